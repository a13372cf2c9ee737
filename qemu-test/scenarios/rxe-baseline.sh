# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# ferroce-pair's guest script with Linux's soft-RoCE (rxe on virtio-net) as
# the RDMA device of both VMs: the same tests, the baseline that make bench
# (scripts/bench.sh) compares ferroce with. Not part of make check
# (BENCH_ONLY): rxe-pair already covers rxe there.
# shellcheck source=ferroce-pair.sh
. "$SCEN_DIR/ferroce-pair.sh"
DESC="ferroce-pair's tests over rxe on both VMs (the baseline of make bench)"
BENCH_ONLY=1
TIMEOUT=720
CTL_SERVER=0
GUEST=ferroce-pair

setup() {
	segment lan
	vm vm1 rxe lan 10.0.1.1/24
	vm vm2 rxe lan 10.0.1.2/24
}

# No emulated NIC, so no device capture to check.
check() { :; }

report() {
	echo "RDMA over rxe, two TCG VMs on one segment (client side):"
	rdma_report "$1" vm2 rc_pingpong rdma_verify write_bw read_bw send_bw \
		write_lat read_lat send_lat ud_send_bw
}
