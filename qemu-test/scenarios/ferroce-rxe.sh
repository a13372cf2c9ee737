# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# Interoperability with Linux's soft-RoCE on the wire.  wire_check and
# rdma_report come from ferroce-pair.sh (everything else is redefined here).
# shellcheck source=ferroce-pair.sh
. "$SCEN_DIR/ferroce-pair.sh"
DESC="ferroce (emulated NIC) and rdma_rxe (plain virtio-net) on one segment: ibv_rc_pingpong, ibv_uc_pingpong, ibv_srq_pingpong, data-checked WRITE/READ/SEND (also through a type 2 memory window, refused once revoked) and perftest (ib_atomic_bw FETCH_AND_ADD too) and data-checked ATOMIC_WRITE both ways, and over an 802.1Q VLAN; both ends' frames pass an independent ICRC check"
TIMEOUT=720
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce
	vm vm2 rxe lan 10.0.1.2/24
}

# Only vm1 has a device (and a wire capture): frames from both ends on it.
check() {
	local rc=0
	checked wire_check "$1" vm1 10.0.1.1 10.0.1.2 || rc=1
	# ibv_uc_pingpong both ways: UC frames from both ends (their ICRCs
	# were checked with all the others).
	local ip
	for ip in 10.0.1.1 10.0.1.2; do
		grep -q "^uc $ip: [1-9]" "$1/vm1/wire.txt" || {
			check_failed "vm1 wire: no UC frame from $ip"
			rc=1
		}
	done
	# ferroce tags with the AV's sl (perftest -S 3, rping's 5 from the
	# egress map, rdma-verify 0); rxe leaves the priority to the VLAN
	# netdev, whose egress map turns skb priority 0 into 5.
	checked vlan_wire "$1" vm1 100 10.0.100.1:0,3,5 10.0.100.2:5 || rc=1
	return "$rc"
}

report() {
	local t
	echo "ferroce <-> rxe, two TCG VMs on one segment (client side of each test):"
	for t in rc_pingpong uc_pingpong rdma_verify write_bw read_lat send_bw atomic_bw; do
		rdma_report "$1" vm2 "$t.ferroce0-server"
		rdma_report "$1" vm1 "$t.rxe0-server"
	done
	echo "over VLAN 100 (ferroce serves, rxe is the client):"
	rdma_report "$1" vm2 vlan_write_bw vlan_send_bw vlan_ud_send_bw vlan_rdma_verify
	cat "$1/vm1/notes" "$1/vm2/notes" 2>/dev/null
}
