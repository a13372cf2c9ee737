#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: the same RDMA tests (ferroce-pair's guest script: perftest RC
# bandwidth and latency, UD send, the pingpongs) over Linux's soft-RoCE
# (scenario rxe-baseline) and over ferroce (ferroce-pair), one after the
# other on this machine, then a table of both results and their ratio.
# Numbers, not pass/fail: TCG guests on a shared host are slow and noisy, so
# only the side-by-side ratio means anything, and only roughly.
. "$(dirname "$0")/lib.sh"
need_root
"$FERROCE_TOP/scripts/setup-host.sh"

runs=${FERROCE_RUNS:-$FERROCE_TOP/qemu-test/runs}
declare -A dir
failed=()
for s in rxe-baseline ferroce-pair; do
	out=$("$FERROCE_TOP/qemu-test/run" "$s" | tee /dev/stderr | tail -1)
	# A failed test leaves its metric out of the table; the rest still count.
	case $out in PASS*) ;; *) failed+=("$out") ;; esac
	dir[$s]=$(awk '{print $NF}' <<<"$out")
	[ -d "${dir[$s]}" ] || die "no run directory for $s in $runs"
done

echo
echo "Same tests, same machine, one run each (client VM's numbers):"
printf '%-32s %12s %12s %14s\n' metric rxe ferroce ferroce/rxe
awk '
	FNR == 1 { f++ }
	$1 ~ /(_MiB\/s|_us|_usec\/iter|_Mbit\/s)$/ && $1 !~ /^device_/ { v[f, $1] = $2; k[$1] = 1 }
	END {
		for (m in k) {
			a = v[1, m]; b = v[2, m]
			if (a == "" || b == "" || a == "none" || b == "none" || a + 0 == 0) continue
			better = (m ~ /(_us|_usec\/iter)$/) ? "lower is better" : "higher is better"
			printf "%-32s %12.2f %12.2f %8.2fx  (%s)\n", m, a, b, b / a, better
		}
	}' "${dir[rxe-baseline]}/vm2/notes" "${dir[ferroce-pair]}/vm2/notes" | sort
for f in "${failed[@]}"; do
	echo "note: $f (its failed tests are missing above)"
done
