# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# RoCE over an 802.1Q VLAN (device.rst "VLANs"), for two-VM scenarios that
# source lib.sh, roce.sh and cm.sh.
#
# Both VMs add eth0.$VLAN_ID with 10.0.$VLAN_ID.N/24 (N from the VM's
# 10.0.1.N) and the egress priority map 0:5; ib_core gives the RDMA device
# (ferroce or rxe) that netdev's GIDs.  Over the VLAN's RoCE v2 GID, the
# index tools/ferroce-gids names for the peer's VLAN address: perftest with
# sl 3 (-S 3), data-checked WRITE/READ/SEND, and rping over the VLAN
# addresses (rdma_cm and the GSI QP, with the sl ib_core derives from the
# egress map: 5).  The host checks tags and priorities in the capture.
VLAN_ID=100
vlan_addr() { echo "10.0.$VLAN_ID.${1##*.}"; }
vlan_up() {
	{
		modprobe 8021q &&
			ip link add link eth0 name "$1" type vlan id "$VLAN_ID" egress-qos-map 0:5 &&
			ip addr add "$2/24" dev "$1" && ip link set "$1" up
	} >>/mnt/work/vlan_up.log 2>&1
}
vlan_gid_index() { "/src/tools/ferroce-gids" -d "$DEV" --peer "$1" --index-only; }
gid_netdev_is() {
	[ "$(cat "/sys/class/infiniband/$DEV/ports/1/gid_attrs/ndevs/$1" 2>/dev/null)" = "$2" ]
}

# vlan_roce SERVER_VM PORT PEER_IP [ACK_TIMEOUT]: PEER_IP is the other VM's
# 10.0.1.N; ACK_TIMEOUT the RC tests' ACK timeout exponent (perftest -u,
# rdma-verify -t) where the peer is rxe.
vlan_roce() {
	local srv=$1 port=$2 vdev=eth0.$VLAN_ID me peer vidx srv_addr side=client
	local -a pt=() rv=()
	[ -n "$4" ] && { pt=(-u "$4"); rv=(-t "$4"); }
	[ "$VM_NAME" = "$srv" ] && side=server
	me=$(vlan_addr "${VM_IP%/*}")
	peer=$(vlan_addr "$3")
	check "ip link add $vdev (802.1Q id $VLAN_ID, egress-qos-map 0:5), $me/24" vlan_up "$vdev" "$me"
	check "peer answers ping over the VLAN ($peer)" wait_for 30 ping -c 1 -W 2 "$peer"
	check "ferroce-gids names a GID of $DEV that reaches $peer" wait_for 10 vlan_gid_index "$peer"
	vidx=$(vlan_gid_index "$peer")
	note vlan_gid_index "${vidx:-none}"
	check "GID ${vidx:-?} of $DEV belongs to $vdev" gid_netdev_is "$vidx" "$vdev"
	[ -n "$vidx" ] || vidx=0
	perftest_pair vlan_write_bw $((port++)) 150 "$srv" 4 MiB/s \
		ib_write_bw -d "$DEV" -x "$vidx" -S 3 -s 65536 -n 200 "${pt[@]}"
	perftest_pair vlan_send_bw $((port++)) 150 "$srv" 4 MiB/s \
		ib_send_bw -d "$DEV" -x "$vidx" -S 3 -s 65536 -n 200 "${pt[@]}"
	perftest_pair vlan_ud_send_bw $((port++)) 150 "$srv" 4 MiB/s \
		ib_send_bw -d "$DEV" -x "$vidx" -S 3 -c UD -s 512 -n 300
	GIDX=$vidx verify_pair vlan_rdma_verify $((port++)) 120 "$srv" -n 8 "${rv[@]}"
	srv_addr=$peer
	[ "$side" = server ] && srv_addr=$me
	local -a common=(-a "$srv_addr" -p "$port" -C 50 -S 4000 -v -V)
	step "vlan_rping (rping over $srv_addr): $side side" \
		cm_pair vlan_rping 120 "$srv" "$port" rping -s "${common[@]}" -- rping -c "${common[@]}"
	check "vlan_rping $side: 50 pings, every byte as the client wrote it" \
		rping_data_ok "/mnt/work/vlan_rping.$side.log" 50 4000 \
		"$([ "$side" = server ] && echo "server ping data: " || echo "ping data: ")"
}
