# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two ferroce VMs in exclusive RDMA netns mode: ferroce0 and its netdev move into a namespace, carry RDMA traffic there, move back, and come back again when a namespace holding them is deleted; nothing hangs, then rmmod ferroce"
TIMEOUT=600

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce
	vm vm2 ferroce lan 10.0.1.2/24 ferroce
}

report() {
	cat "$1/vm2/notes" 2>/dev/null
}
