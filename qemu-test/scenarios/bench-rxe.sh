# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# make bench's baseline (scripts/bench.sh): the benchmark (bench.guest) over
# Linux's soft-RoCE, rxe on virtio-net, in both VMs; bench-ferroce runs the
# same over ferroce.  Numbers, not pass/fail, so not part of make check
# (BENCH_ONLY).  ~3-4 min on a 2-core TCG host.
DESC="make bench over rxe: perftest RC WRITE/READ/SEND bandwidth (64 KiB) and latency (2 B), ib_write_bw -a 2 B..8 MiB, between two VMs with soft-RoCE"
BENCH_ONLY=1
TIMEOUT=1200
CTL_SERVER=0
GUEST=bench

# The segment's MTU: 1500 here, 9000 in bench-rxe-jumbo.
BENCH_MTU=1500

setup() {
	segment lan mtu="$BENCH_MTU"
	# The same placement as bench-ferroce's VMs (BENCH_PIN=0: none).
	local pin1=() pin2=()
	[ "${BENCH_PIN:-1}" = 1 ] && pin1=(cpu=1) pin2=(cpu=0)
	vm vm1 rxe lan 10.0.1.1/24 "${pin1[@]}"
	vm vm2 rxe lan 10.0.1.2/24 "${pin2[@]}"
}

# Nothing to check on the host: scripts/bench-report.py reads the results.
check() { :; }

report() {
	echo "bench over rxe, client vm2 (scripts/bench-report.py makes the report):"
	cat "$1/vm2/notes" 2>/dev/null
}
