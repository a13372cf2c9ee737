# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# The gid scenario on the debug kernel (KASAN, kmemleak, lockdep, debug
# objects, atomic-sleep checks, Rust debug assertions and overflow checks):
# same guest script, and kmemleak is asked after the insmod/rmmod cycles.
# shellcheck source=gid.sh
. "$SCEN_DIR/gid.sh"
# Fewer cycles than gid's 100: under KASAN in a TCG guest each cycle costs
# about 8 s (every probe also brings up ib_mad's GSI QP, its kernel CQ, DMA
# MR and doorbell records, and tears them down), and make check has a time
# budget: 10 cycles still give kmemleak and KASAN every path of probe and
# remove ten times.  make soak (SOAK=1) runs 100; FERROCE_GID_CYCLES
# overrides both.
CYCLES=10
[ "${SOAK:-0}" = 1 ] && CYCLES=100
CYCLES=${FERROCE_GID_CYCLES:-$CYCLES}
DESC="the gid scenario on the debug kernel: no KASAN/lockdep/kmemleak report after $CYCLES insmod/rmmod cycles (each with the GSI QP's kernel queues)"
KERNEL_FLAVOUR=debug
GUEST=gid
TIMEOUT=$((1800 + 60 * CYCLES))
