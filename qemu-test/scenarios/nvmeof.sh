# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
#
# NVMe over RDMA between two VMs, both ends the kernel's own drivers over
# the emulated ferroce NIC: nvmet-rdma on vm1 exporting a memory-backed
# null_blk namespace (configfs), nvme-rdma on vm2 (nvme-cli).  cm_wire_check
# and cm_expected come from rdma-cm.sh (everything else is redefined here).
#
# NVMEOF_DEV=rxe runs the same guest steps over rxe (the reference, and a
# check of the scenario itself); NVMEOF_MIB sets the namespace size (MiB,
# default and minimum 64).
# shellcheck source=rdma-cm.sh
. "$SCEN_DIR/rdma-cm.sh"
NVMEOF_KIND=${NVMEOF_DEV:-ferroce}
DESC="NVMe over RDMA ($NVMEOF_KIND; NVMEOF_DEV=rxe for rxe): nvmet-rdma + memory-backed null_blk on vm1, nvme-rdma on vm2; pattern written over the whole namespace, read back and found on the target; stacks unloaded; device removed under a connected host"
TIMEOUT=600
# Only the MADs (UD SEND_ONLY, opcode 0x64, to QP 1): the data would be
# hundreds of MB.
CAPTURE=1
CAPTURE_FILTER="udp dst port 4791 and udp[8] = 0x64 and udp[13:2] = 0 and udp[15] = 1"
CTL_SERVER=0
[ "$NVMEOF_KIND" = ferroce ] && CTL_SERVER=1

setup() {
	local opt=()
	# rxe, or an unknown kind that the guests refuse (rdma_up).
	[ "$NVMEOF_KIND" = ferroce ] && opt=(ferroce)
	segment lan
	# Two vCPUs each: two completion vectors, over which the NVMe queues'
	# CQs spread (checked in /proc/interrupts).
	vm vm1 "$NVMEOF_KIND" lan 10.0.1.1/24 smp=2 mem=768 "${opt[@]}"
	vm vm2 "$NVMEOF_KIND" lan 10.0.1.2/24 smp=2 mem=768 "${opt[@]}"
	# The guests' parameters (qemu-test/scenarios/nvmeof.guest).
	cat >"$RUN_DIR/shared/nvmeof.env" <<-EOF
		NVMEOF_MIB=${NVMEOF_MIB:-64}
		NVMEOF_BS=4096
		NVMEOF_NQN=nqn.2014-08.org.ferroce:nvmeof-$(basename "$RUN_DIR")
		NVMEOF_SVCID=4420
	EOF
}

check() {
	local dir=$1 rc=0 cm
	cm=$(cm_expected "$dir" rc)
	echo "wire: the host reports $cm RDMA connections (NVMe queues) set up through the CM"
	[ "$cm" -gt 0 ] || { check_failed "wire: the host reported no CM connection"; rc=1; }
	checked cm_wire_check "$dir/wire-lan.pcap" "bridge wire (MADs)" "$cm" 0 10.0.1.1 10.0.1.2 || rc=1
	checked cm_device_wire_checks "$dir" || rc=1
	return "$rc"
}

report() {
	echo "NVMe over RDMA ($NVMEOF_KIND), host vm2, target vm1:"
	cat "$1/vm1/notes" "$1/vm2/notes" 2>/dev/null
}
