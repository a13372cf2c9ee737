# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Host-side checks of a ferroce VM's wire capture (the device process's
# --pcap, RUN_DIR/VM/wire.pcap), for the check() hooks of scenarios.

# wire_check RUN_DIR VM [SRC_IP...]: the capture must hold RoCE v2 frames,
# each ICRC recomputed independently (qemu-test/guest/roce-wire.py) must
# match, each SRC_IP must have sent some, and tshark must dissect the UDP
# 4791 frames as InfiniBand with none malformed.
wire_check() {
	local dir=$1 v=$2 pcap=$1/$2/wire.pcap out rc=0 ib mal
	shift 2
	[ -s "$pcap" ] || { echo "$v: no wire capture $pcap"; return 1; }
	"$FERROCE_TOP/scripts/in-root" -- python3 "$FERROCE_TOP/qemu-test/guest/roce-wire.py" \
		"$pcap" --show 5 "${@/#/--src=}" >"$dir/$v/wire.txt" 2>&1 || rc=1
	sed "s/^/$v wire: /" "$dir/$v/wire.txt"
	# One tshark pass: each frame's UDP destination port and protocol stack.
	out=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$pcap" -T fields \
		-e udp.dstport -e frame.protocols 2>/dev/null)
	ib=$(awk '$1 == 4791 && $2 ~ /:udp:infiniband/' <<<"$out" | wc -l)
	mal=$(grep -c '_ws\.malformed' <<<"$out")
	echo "$v wire: tshark: $ib frames to UDP 4791 dissected as InfiniBand (RoCE v2), $mal malformed frames"
	[ "$rc" = 0 ] && [ "$ib" -gt 0 ] && [ "$mal" = 0 ]
}

# wire_values RUN_DIR VM FILTER FIELD: the distinct values of FIELD (e.g.
# eth.dst) of the captured frames that match the display FILTER, sorted,
# each followed by a space.
wire_values() {
	"$FERROCE_TOP/scripts/in-root" -- tshark -r "$1/$2/wire.pcap" -Y "$3" -T fields \
		-e "$4" 2>/dev/null | sort -u | tr '\n' ' '
}

# seed_truths RUN_DIR VM IP PEER_IP: what the seed article says of a RoCE v2
# frame, checked on the UDP frames between IP and PEER_IP on one segment (one
# tshark pass): the source IP is the IPv4 address of the sgid (the guests
# use their IPv4-mapped GIDs), the UDP destination port is 4791, the source
# port differs between QPs (rdma_flow_label_to_udp_sport or the QPN hash),
# and the destination MAC is the peer's own (on-link next hop: the source
# MAC of the peer's frames).
seed_truths() {
	local dir=$1 v=$2 ip=$3 peer=$4 out dports sports dst peer_mac
	# Only the outermost of each field (-E occurrence=f): tshark's
	# heuristics may dissect a random RDMA payload as an inner Ethernet
	# frame, whose addresses would otherwise join the outer ones.
	out=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$dir/$v/wire.pcap" -Y udp -T fields \
		-E occurrence=f -e ip.src -e ip.dst -e udp.srcport -e udp.dstport -e eth.src \
		-e eth.dst 2>/dev/null)
	mine() { awk -v a="$ip" -v b="$peer" -v f="$1" '$1 == a && $2 == b {print $f}' <<<"$out" | sort -u | tr '\n' ' '; }
	dports=$(mine 4)
	sports=$(mine 3 | wc -w)
	dst=$(mine 6)
	peer_mac=$(awk -v a="$peer" -v b="$ip" '$1 == a && $2 == b {print $5}' <<<"$out" | sort -u | tr '\n' ' ')
	echo "$v wire: RoCE v2 $ip -> $peer: UDP destination port(s) ${dports:-none}, $sports distinct source ports, destination MAC(s) ${dst:-none}, the peer sends from ${peer_mac:-none}"
	[ "$dports" = "4791 " ] && [ "$sports" -gt 1 ] && [ -n "$dst" ] && [ "$dst" = "$peer_mac" ]
}

# vlan_wire RUN_DIR VM VID SRC:PCPS...: tshark dissects the frames tagged
# VID as RoCE v2 inside 802.1Q with none malformed, no RoCE v2 frame of the
# VLAN's subnet 10.0.VID.0/24 is untagged, and each SRC sent tagged RoCE
# frames with exactly the priorities PCPS (sorted, comma-separated; counted
# by roce-wire.py in wire.txt, which wire_check writes).
vlan_wire() {
	local dir=$1 v=$2 vid=$3 pcap=$1/$2/wire.pcap out n mal untagged rc=0 spec src want got
	shift 3
	out=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$pcap" -Y "vlan.id == $vid" \
		-T fields -e frame.protocols 2>/dev/null)
	n=$(grep -c ':vlan:ethertype:ip:udp:infiniband' <<<"$out")
	mal=$(grep -c '_ws\.malformed' <<<"$out")
	untagged=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$pcap" \
		-Y "!vlan && ip.addr == 10.0.$vid.0/24 && udp.dstport == 4791" \
		-T fields -e frame.number 2>/dev/null | grep -c .)
	echo "$v wire: VLAN $vid: $n frames dissected as RoCE v2 inside 802.1Q, $mal malformed, $untagged untagged RoCE v2 frames of 10.0.$vid.0/24"
	{ [ "$n" -gt 0 ] && [ "$mal" = 0 ] && [ "$untagged" = 0 ]; } || rc=1
	for spec; do
		src=${spec%%:*}
		want=${spec#*:}
		got=$(awk -v s="$src:" -v vid="$vid" '$1 == "vlan" && $2 == vid && $6 == s {print $4}' \
			"$dir/$v/wire.txt" | sort -n | paste -sd, -)
		echo "$v wire: VLAN $vid priorities of the frames from $src: ${got:-none} (expected $want)"
		[ "$got" = "$want" ] || rc=1
	done
	return "$rc"
}
