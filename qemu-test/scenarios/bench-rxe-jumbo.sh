# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# make bench's rxe half with jumbo frames: bench-rxe on a segment whose
# bridge, taps and guest eth0 have MTU 9000, so the RDMA port runs at IB MTU
# 4096 (bench.guest checks it).  Not part of make check (BENCH_ONLY).
# shellcheck source=bench-rxe.sh
. "$SCEN_DIR/bench-rxe.sh"
DESC="make bench over rxe at MTU 9000 (jumbo frames, IB MTU 4096): the same benchmark as bench-rxe"
BENCH_ONLY=1
BENCH_MTU=9000
