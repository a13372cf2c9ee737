# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two VMs with the emulated ferroce NIC on one segment: ibv_devinfo, ibv_rc/ud_pingpong, data-checked WRITE/READ/SEND, perftest RC and UD over ferroce0; RoCE v2 with good ICRCs on the wire"
TIMEOUT=720
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce
	vm vm2 ferroce lan 10.0.1.2/24 ferroce
}

# wire_check RUN_DIR VM [SRC_IP...]: the VM's device recorded its wire
# (--pcap): it must hold RoCE v2 frames, each ICRC recomputed independently
# (qemu-test/guest/roce-wire.py) must match, each SRC_IP must have sent some,
# and tshark must dissect the UDP 4791 frames as InfiniBand with none
# malformed.
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

check() {
	local rc=0
	wire_check "$1" vm1 10.0.1.1 10.0.1.2 || rc=1
	wire_check "$1" vm2 10.0.1.1 10.0.1.2 || rc=1
	return "$rc"
}

# rdma_report DIR VM TEST...: each test's command, then the client's result
# (perftest's table, the pingpong's throughput and latency lines, or
# rdma-verify's summary).
rdma_report() {
	local dir=$1 v=$2 t log
	shift 2
	for t in "$@"; do
		log=$dir/$v/$t.client.log
		[ -f "$log" ] || continue
		echo "== $t, client $v: $(head -c 300 "$dir/$v/$t.cmd" 2>/dev/null)"
		grep -E ' (bytes|iters) in |^rdma-verify:' "$log"
		sed -n '/^ *#bytes/,/^-\{20,\}/p' "$log"
	done
}

report() {
	echo "RDMA over ferroce, two TCG VMs on one segment (client side):"
	rdma_report "$1" vm2 rc_pingpong rc_pingpong_events rdma_verify write_bw read_bw send_bw \
		write_lat read_lat send_lat ud_send_bw ud_pingpong
	cat "$1/vm2/notes" 2>/dev/null
}
