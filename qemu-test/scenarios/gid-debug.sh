# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# The gid scenario on the debug kernel (KASAN, kmemleak, lockdep, debug
# objects, atomic-sleep checks, Rust debug assertions and overflow checks):
# same guest script, and kmemleak is asked after the insmod/rmmod cycles.
# shellcheck source=gid.sh
. "$SCEN_DIR/gid.sh"
# Fewer cycles than gid's: under KASAN in a TCG guest each cycle costs
# about 11 s (every probe also brings up ib_mad's GSI QP, its kernel CQ, DMA
# MR and doorbell records, and tears them down), and make check has a time
# budget.  KASAN and lockdep see every path of probe and remove on the
# first cycle and kmemleak finds a leak of one cycle as well as of ten;
# repeating is for what only shows up now and then, which is make soak's
# job (SOAK=1: 100 cycles).  FERROCE_GID_CYCLES overrides both.
CYCLES=3
[ "${SOAK:-0}" = 1 ] && CYCLES=100
CYCLES=${FERROCE_GID_CYCLES:-$CYCLES}
# The userspace views of the GID table (gid-table.py after each change,
# ferroce-gids, ibv_devinfo) do not depend on the kernel flavour, and the
# IPv6 round takes the driver's add_gid/del_gid path that IPv4 already
# takes; gid checks them all.  Under KASAN in TCG they cost 8 minutes, so
# make check leaves them to gid and make soak runs them here too.
GID_TOOLS=0
[ "${SOAK:-0}" = 1 ] && GID_TOOLS=1
DESC="the gid scenario on the debug kernel: no KASAN/lockdep/kmemleak report after $CYCLES insmod/rmmod cycles (each with the GSI QP's kernel queues)$([ "$GID_TOOLS" = 1 ] || echo "; userspace table views left to gid")"
KERNEL_FLAVOUR=debug
GUEST=gid
TIMEOUT=$((1800 + 60 * CYCLES))
