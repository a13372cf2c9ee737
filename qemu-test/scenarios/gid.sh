# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# make check runs 10 insmod/rmmod cycles (its time budget; gid-debug runs
# probe and remove under KASAN and lockdep), make soak (SOAK=1) 100 for the
# rarer races; FERROCE_GID_CYCLES overrides both.
CYCLES=10
[ "${SOAK:-0}" = 1 ] && CYCLES=100
CYCLES=${FERROCE_GID_CYCLES:-$CYCLES}
DESC="ferroce.ko on the emulated NIC: vectors, ib_device, GID table fed by netdev MAC/IP events, in step with the device's table; port events; $CYCLES insmod/rmmod cycles"
TIMEOUT=600
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 single lan - ferroce smp=2
	printf 'CYCLES=%s\nTOOLS=%s\n' "$CYCLES" "${GID_TOOLS:-1}" >"$RUN_DIR/shared/params"
}

report() {
	cat "$1/vm1/notes" 2>/dev/null
}
