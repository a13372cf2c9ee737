# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# Both devices duplicate 3% of the frames they send (ferroce-dev --fault):
# duplicated atomic requests must be answered from the responder's replay
# cache, never executed twice, or atomic-count's counter is off; duplicated
# UC packets must be dropped by their PSN, or a UC message arrives twice.
# The wire loses nothing, which UC pingpong needs (UC never resends).
FAULTS=dup=3%
DESC="two VMs with ferroce NICs, $FAULTS of frames duplicated: UC (device 1.5): ibv_uc_pingpong polling and with events, no ACK sent, duplicates dropped by PSN, ib_write_bw -c UC; SRQ (device 1.6): ibv_srq_pingpong polling and with events; memory windows (device 1.7): rdma-verify through type 1 and 2 windows, refused once revoked; RDMA atomics (device 1.4): ib_atomic_bw and ib_atomic_lat with CMP_AND_SWAP and FETCH_AND_ADD, atomic-count's exact counter over 4 QPs and its CMP_SWAP checks, replays seen by the responders, device counters"
TIMEOUT=540
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce "fault=$FAULTS,seed=1"
	vm vm2 ferroce lan 10.0.1.2/24 ferroce "fault=$FAULTS,seed=2"
}

report() {
	local t log
	echo "UC and RDMA atomics over ferroce, two TCG VMs on one segment (client side):"
	for t in uc_pingpong uc_pingpong_events uc_write_bw; do
		log=$1/vm2/$t.client.log
		[ -f "$log" ] || continue
		echo "== $t, client vm2: $(head -c 300 "$1/vm2/$t.cmd" 2>/dev/null)"
		grep -E ' bytes in | iters in ' "$log"
		[ "$t" = uc_write_bw ] && sed -n '/^ *#bytes/,/^-\{20,\}/p' "$log"
	done
	for t in atomic_bw_cas atomic_bw_fadd atomic_lat_cas atomic_lat_fadd atomic_count; do
		log=$1/vm2/$t.client.log
		[ -f "$log" ] || continue
		echo "== $t, client vm2: $(head -c 300 "$1/vm2/$t.cmd" 2>/dev/null)"
		grep -E '^atomic-count:' "$log"
		sed -n '/^ *#bytes/,/^-\{20,\}/p' "$log"
	done
	grep -h '^atomic-count: server' "$1/vm1/atomic_count.server.log" 2>/dev/null
	cat "$1/vm2/notes" 2>/dev/null
}
