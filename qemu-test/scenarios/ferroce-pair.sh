# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two VMs with the emulated ferroce NIC on one segment: ibv_devinfo, ibv_rc/ud_pingpong, data-checked WRITE/READ/SEND, perftest RC and UD over ferroce0, RoCE v1, a new IPv4 GID, a MAC change and back; RoCE v2 with good ICRCs on the wire"
TIMEOUT=900
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce
	vm vm2 ferroce lan 10.0.1.2/24 ferroce
}

# shellcheck source=../wire.sh
. "$FERROCE_TOP/qemu-test/wire.sh"

# roce_v1 RUN_DIR VM: RoCE v1 frames (Ethertype 0x8915, from the -g 0
# pingpong) crossed the wire, and tshark dissects them with nothing
# malformed.
roce_v1() {
	local n mal
	n=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$1/$2/wire.pcap" -Y 'eth.type == 0x8915' \
		-T fields -e frame.protocols 2>/dev/null)
	mal=$(grep -c '_ws\.malformed' <<<"$n")
	echo "$2 wire: $(grep -c . <<<"$n") RoCE v1 frames (Ethertype 0x8915), $mal malformed"
	[ "$(grep -c . <<<"$n")" -gt 0 ] && [ "$mal" = 0 ]
}

check() {
	local rc=0
	# Both devices capture the one segment, so vm2's capture holds the
	# same frames: its ICRCs are checked once, in vm1's.
	checked wire_check "$1" vm1 10.0.1.1 10.0.1.2 || rc=1
	checked roce_v1 "$1" vm1 || rc=1
	checked roce_v1 "$1" vm2 || rc=1
	checked seed_truths "$1" vm1 10.0.1.1 10.0.1.2 || rc=1
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
		write_lat read_lat send_lat send_lat_events ud_send_bw ud_pingpong
	awk '$1 == "send_lat_us" {p = $2} $1 == "send_lat_events_us" {e = $2}
		END {print "ib_send_lat 2 B, typical: " p " us polling the CQ, " e " us waiting for CQ events (-e)"}' \
		"$1/vm2/notes" 2>/dev/null
	cat "$1/vm2/notes" 2>/dev/null
}
