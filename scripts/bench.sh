#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: one benchmark (qemu-test/scenarios/bench.guest: perftest RC
# WRITE/READ/SEND bandwidth at 64 KiB and latency at 2 B, ib_write_bw -a
# from 2 B to 8 MiB, and for ferroce 1/4/16/64-QP ib_write_bw and the
# devices' retransmits and timeouts) over Linux's soft-RoCE (scenario
# bench-rxe) and over ferroce (bench-ferroce), one run each, one after the
# other on this machine; then both again with jumbo frames (bench-rxe-jumbo,
# bench-ferroce-jumbo: MTU 9000, IB MTU 4096).  scripts/bench-report.py then
# writes qemu-test/runs/<date>-bench/: bench.json (every number, the ratios
# ferroce/rxe, and the host's price of a wake-up, measured first) and
# gnuplot's charts (bw-vs-size.svg, latency.svg, qp-scaling.svg; the gnuplot
# root is scripts/make-plot-root.sh's), and prints a table.  Numbers, not
# pass/fail: TCG guests on a shared host are slow and noisy, so only the
# side-by-side ratio means anything, and only roughly.
#
# The scenarios pin each VM's vCPU to a CPU of its own and run both ferroce
# device processes on the client VM's CPU, SCHED_FIFO (bench-ferroce.sh
# says why; the report says where everything ran).  BENCH_PIN=0 pins
# nothing.
#
# Exit status non-zero if a scenario failed, a ratio could not be computed
# or a chart was not drawn (the report is written all the same, with the
# missing numbers null and listed).
. "$(dirname "$0")/lib.sh"
need_root
need_cmd python3 python3
"$FERROCE_TOP/scripts/setup-host.sh"

runs=${FERROCE_RUNS:-$FERROCE_TOP/qemu-test/runs}
out=$runs/$(date +%Y%m%d-%H%M%S)-bench
mkdir -p "$out"
log "make bench: results in $out"

# The chart root first (cached; a minute the first time): a mirror problem
# shows before the VMs' minutes, not after.  Without it the report is still
# written, without charts, and make bench fails.
plot_root=$("$FERROCE_TOP/scripts/make-plot-root.sh") ||
	{ log "the plot root could not be built: no charts"; plot_root=none; }

# The host's own price of a thread wake-up and of a system call
# (device/ferroce-dev/benches/wakeup.rs), measured on a quiet machine
# before the VMs start: each latency test's floor (bench-report.py).
# Without it the report says so, and nothing else is missing.
"$FERROCE_TOP/scripts/make-root.sh" >/dev/null || die "cannot build the trixie root"
cargo_target_seed
(cd "$FERROCE_TOP/device" && "$FERROCE_TOP/scripts/in-root" -- \
	cargo bench -q -p ferroce-dev --bench wakeup) >"$out/host.json" ||
	{ log "the host's wake-up benchmark failed: no latency floors"; rm -f "$out/host.json"; }

# The scenarios in one qemu-test/run (it builds the kernel module, the
# device process and the provider once), rxe first at each MTU.  Its last
# line per scenario is "PASS|FAIL NAME (...) RUN_DIR".
scenarios=(bench-rxe bench-ferroce bench-rxe-jumbo bench-ferroce-jumbo)
"$FERROCE_TOP/qemu-test/run" "${scenarios[@]}" 2>&1 | tee "$out/qemu-test-run.log" || true
status=0
declare -A dir=()
for s in "${scenarios[@]}"; do
	line=$(grep -aE "^(PASS|FAIL) $s " "$out/qemu-test-run.log" | tail -n 1) || line=
	case $line in
	PASS*) ;;
	*)
		status=1
		log "scenario $s: ${line:-no result (see $out/qemu-test-run.log)}"
		;;
	esac
	dir[$s]=${line##* }
	# No run directory: the report lists all of the scenario's numbers
	# as missing.
	if [ -z "$line" ] || [ ! -d "${dir[$s]}" ]; then
		dir[$s]=$out/no-run-dir-$s
	fi
done

# The report's inputs, copied (the harness keeps only its newest run
# directories): each VM's notes, results, perftest logs and commands, and
# the device counters.
for s in "${scenarios[@]}"; do
	[ -d "${dir[$s]}" ] || continue
	for v in vm1 vm2; do
		[ -d "${dir[$s]}/$v" ] || continue
		mkdir -p "$out/$s/$v"
		find "${dir[$s]}/$v" -maxdepth 1 -type f \( -name notes -o -name results -o -name exit-code -o -name placement \
			-o -name '*.client.log' -o -name '*.server.log' -o -name '*.cmd' -o -name 'counters*.json' \
			-o -name ibv_devinfo.txt \) -exec cp -p {} "$out/$s/$v/" \;
	done
done

rc=0
python3 "$FERROCE_TOP/scripts/bench-report.py" "${dir[bench-rxe]}" "${dir[bench-ferroce]}" \
	"${dir[bench-rxe-jumbo]}" "${dir[bench-ferroce-jumbo]}" "$out" "$plot_root" || rc=$?
case $rc in
0) ;;
3) log "a ratio could not be computed (see \"missing\" in bench.json)" ;;
4) log "a chart was not drawn (see \"charts\" in bench.json)" ;;
*) log "bench-report.py failed (exit status $rc)" ;;
esac
[ "$rc" = 0 ] || status=1

echo
echo "bench.json: $out/bench.json"
for c in bw-vs-size latency qp-scaling; do
	[ -s "$out/$c.svg" ] && echo "chart:      $out/$c.svg"
done
echo "runs:       rxe ${dir[bench-rxe]}, ferroce ${dir[bench-ferroce]}"
echo "            MTU 9000: rxe ${dir[bench-rxe-jumbo]}, ferroce ${dir[bench-ferroce-jumbo]}"
[ "$status" = 0 ] || echo "make bench: FAILED (a scenario failed, a ratio is missing or a chart was not drawn; see above)"
exit "$status"
