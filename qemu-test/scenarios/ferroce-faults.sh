# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# The two-VM ferroce pair over a bad wire: each VM's device process injects
# faults into every RoCE frame it sends (ferroce-dev --fault, see
# device/ferroce-dev/src/fault.rs), so both directions of both wires lose,
# duplicate, reorder, corrupt and delay frames.  RC must hide all of it:
# rdma-verify byte-exact, perftest completes, no work request completes in
# error.  The counters must prove the faults were real: frames retransmitted
# and frames dropped for a bad ICRC.
#
# FERROCE_FAULTS overrides the fault spec; SOAK=1 (make soak) repeats the
# traffic for FERROCE_SOAK_ROUNDS rounds (default 10, several minutes).
FAULTS=${FERROCE_FAULTS:-drop=5%,reorder=2%,dup=1%,corrupt=0.5%,delay=2%:2ms}
ROUNDS=1
[ "${SOAK:-0}" = 1 ] && ROUNDS=${FERROCE_SOAK_ROUNDS:-10}
DESC="two ferroce VMs, faults injected on both wires ($FAULTS): rdma-verify byte-exact, perftest RC write/read/send complete; retransmits and bad-ICRC drops seen, no CQE error ($ROUNDS round(s))"
TIMEOUT=$((600 + 300 * ROUNDS))
CTL_SERVER=1

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 ferroce "fault=$FAULTS,seed=1"
	vm vm2 ferroce lan 10.0.1.2/24 ferroce "fault=$FAULTS,seed=2"
	echo "ROUNDS=$ROUNDS" >"$RUN_DIR/shared/params"
}

# sum_counter RUN_DIR FILE KEY: KEY (a dotted path) of FILE (an answer of
# the device's control socket saved by each guest) summed over both VMs.
sum_counter() {
	local f docs=()
	for f in "$1"/vm*/"$2"; do docs+=("$(cat "$f")"); done
	"$FERROCE_TOP/scripts/in-root" "$ROOT" -- python3 -c '
import json, sys
total = 0
for doc in sys.argv[2:]:
    v = json.loads(doc)
    for k in sys.argv[1].split("."):
        v = v[k]
    total += v
print(total)' "$3" "${docs[@]}"
}

check() {
	local dir=$1 rc=0 k v f
	for f in "$dir"/vm1/counters.json "$dir"/vm2/counters.json "$dir"/vm1/faults.json "$dir"/vm2/faults.json; do
		[ -s "$f" ] || { echo "no $f: the guest did not save its device's counters"; return 1; }
	done
	# The injector's own counts: every kind of fault happened.
	for k in dropped duplicated reordered corrupted delayed; do
		v=$(sum_counter "$dir" faults.json "injected.$k")
		echo "faults injected: $k $v"
		[ "${v:-0}" -gt 0 ] || { check_failed "no frame was $k: the fault injection did not run"; rc=1; }
	done
	# Their effect on the transports: go-back-N retransmissions and frames
	# dropped by the receiving device for a bad ICRC.
	for k in retransmits rx_bad_icrc; do
		v=$(sum_counter "$dir" counters.json "data.$k")
		echo "device counters, both VMs: $k $v"
		[ "${v:-0}" -gt 0 ] || { check_failed "$k is 0: the faults had no visible effect"; rc=1; }
	done
	for k in timeouts rx_no_qp rx_bad_key cqe_errors; do
		echo "device counters, both VMs: $k $(sum_counter "$dir" counters.json "data.$k")"
	done
	return "$rc"
}

report() {
	echo "RDMA over ferroce with wire faults ($FAULTS), client vm2:"
	local t
	for t in "$1"/vm2/*.client.log; do
		[ -f "$t" ] || continue
		echo "== $(basename "$t" .client.log): $(head -c 200 "${t%.client.log}.cmd" 2>/dev/null)"
		grep -E ' (bytes|iters) in |^rdma-verify:' "$t"
		sed -n '/^ *#bytes/,/^-\{20,\}/p' "$t"
	done
	cat "$1/vm2/notes" 2>/dev/null
}
