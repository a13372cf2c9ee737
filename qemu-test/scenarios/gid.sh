# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="ferroce.ko on the emulated NIC: vectors, ib_device, GID table fed by netdev MAC/IP events, in step with the device's table; port events; 100 insmod/rmmod cycles"
TIMEOUT=600
CTL_SERVER=1
CYCLES=${FERROCE_GID_CYCLES:-100}

setup() {
	segment lan
	vm vm1 single lan - ferroce smp=2
	echo "CYCLES=$CYCLES" >"$RUN_DIR/shared/params"
}

report() {
	cat "$1/vm1/notes" 2>/dev/null
}
