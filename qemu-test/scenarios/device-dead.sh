# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two ferroce VMs; during RDMA traffic vm2's ferroce function is removed (PCI remove) and rescanned, then its device stalls past the admin command timeout (dead: reset, IBV_EVENT_DEVICE_FATAL): userspace exits instead of hanging, every destroy succeeds, rmmod works, and ferroce0 comes back and carries traffic again each time; with FERROCE_DEVICE_KILL=1 its device process is then killed too"
TIMEOUT=900
CTL_SERVER=1

setup() {
	# Killing the device process is opt-in: QEMU 11.1.3's vfio-user client
	# sometimes aborts when its server dies (util/error.c: error_setv:
	# Assertion '*errp == NULL' failed), which ends the VM, not the test.
	if [ "${FERROCE_DEVICE_KILL:-0}" = 1 ]; then
		echo 1 >"$RUN_DIR/shared/device-kill"
	fi
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce
	vm vm2 ferroce lan 10.0.1.2/24 ferroce
}

report() {
	cat "$1/vm2/notes" 2>/dev/null
}
