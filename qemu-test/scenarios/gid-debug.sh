# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# The gid scenario on the debug kernel (KASAN, kmemleak, lockdep, debug
# objects, atomic-sleep checks, Rust debug assertions and overflow checks):
# same guest script, and kmemleak is asked after the insmod/rmmod cycles.
# shellcheck source=gid.sh
. "$SCEN_DIR/gid.sh"
DESC="the gid scenario on the debug kernel: no KASAN/lockdep/kmemleak report after 100 insmod/rmmod cycles"
KERNEL_FLAVOUR=debug
GUEST=gid
TIMEOUT=3000
