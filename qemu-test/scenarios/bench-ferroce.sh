# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# make bench's ferroce half (scripts/bench.sh): the benchmark (bench.guest)
# over the emulated ferroce NIC in both VMs, plus QP scaling; the devices'
# counters through the control socket (CTL_SERVER).  Not part of make check
# (BENCH_ONLY).  ~3-4 min on a 2-core TCG host.
DESC="make bench over ferroce: perftest RC WRITE/READ/SEND bandwidth (64 KiB) and latency (2 B), ib_write_bw -a 2 B..8 MiB, 1/4/16/64-QP ib_write_bw, device retransmits and timeouts, between two VMs with the emulated NIC"
BENCH_ONLY=1
TIMEOUT=1200
CTL_SERVER=1
GUEST=bench
# No wire capture: it costs the device two writes per frame.  BENCH_PCAP=1
# takes one anyway, e.g. for scripts/wire-latency.py (where a latency
# test's round trip goes), at the price of slower numbers.
DEVICE_PCAP=${BENCH_PCAP:-0}

# The segment's MTU: 1500 here, 9000 in bench-ferroce-jumbo.
BENCH_MTU=1500

setup() {
	segment lan mtu="$BENCH_MTU"
	# Placement (qemu-test/run's cpu=, dev-cpu=, dev-fifo=; BENCH_PIN=0:
	# none, in bench-rxe too).  Each VM's vCPU on a CPU of its own, the
	# client vm2's on the first, and both device processes on that CPU,
	# SCHED_FIFO: a thread woken on another CPU of these hosts runs 20-25
	# us later, on its waker's 1-4 us later, and a CFS thread woken on a
	# CPU where a vCPU polls may wait for its time slice (README,
	# "Performance").  So every hop between the devices is on one CPU, and
	# the client's doorbells too.  rxe's vCPUs are pinned the same way.
	local pin1=() pin2=()
	if [ "${BENCH_PIN:-1}" = 1 ]; then
		pin1=(cpu=1 dev-cpu=0 dev-fifo=1)
		pin2=(cpu=0 dev-cpu=0 dev-fifo=1)
	fi
	vm vm1 ferroce lan 10.0.1.1/24 ferroce "${pin1[@]}"
	vm vm2 ferroce lan 10.0.1.2/24 ferroce "${pin2[@]}"
}

# Nothing to check on the host: scripts/bench-report.py reads the results.
check() { :; }

report() {
	echo "bench over ferroce, client vm2 (scripts/bench-report.py makes the report):"
	cat "$1/vm2/notes" 2>/dev/null
	echo "server vm1's device counters over the tests:"
	grep '^bench_device_' "$1/vm1/notes" 2>/dev/null
}
