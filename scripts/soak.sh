#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make soak: the long versions of the scenarios that have one, for a machine
# with time to spare (not part of make check, whose budget is 45 min).  Each
# scenario that reads SOAK (qemu-test/scenarios/*.sh) runs once with SOAK=1:
# gid-debug does 100 insmod/rmmod cycles on the debug kernel instead of 20,
# ferroce-faults repeats its traffic over the faulty wires for
# FERROCE_SOAK_ROUNDS rounds (default 10) instead of 1, and so on for every
# scenario that grows a SOAK knob.  Ends with "N passed, N failed".
#
# First the device's property and fuzz tests with many more cases:
# PROPTEST_CASES (default 5000) for tests/model.rs, FERROCE_WQE_FUZZ_BATCHES
# (default 1000) for tests/wqe_fuzz.rs.
#
# FERROCE_SCENARIOS="gid-debug" limits the scenarios run.
. "$(dirname "$0")/lib.sh"
set +e
need_root
"$FERROCE_TOP/scripts/setup-host.sh" || exit 1
export SOAK=1

scenarios=${FERROCE_SCENARIOS:-$(grep -l '\bSOAK\b' "$FERROCE_TOP"/qemu-test/scenarios/*.sh |
	sed 's|.*/||; s/\.sh$//' | sort)}
[ -n "$scenarios" ] || die "no scenario has a SOAK knob"
passed=0 failed=0
declare -a failures=()
# The device's cargo runs in the trixie root: build it first on a cold
# cache (later steps would, but the cargo tests come before them).
"$FERROCE_TOP/scripts/make-root.sh" >/dev/null || die "cannot build the trixie root"
cargo_target_seed

log "soak: device model and WQE fuzz (PROPTEST_CASES=${PROPTEST_CASES:=5000})"
# (in-root clears the environment: the knobs go through env.)
if (cd "$FERROCE_TOP/device" && "$FERROCE_TOP/scripts/in-root" -- env \
	PROPTEST_CASES="$PROPTEST_CASES" \
	FERROCE_WQE_FUZZ_BATCHES="${FERROCE_WQE_FUZZ_BATCHES:-1000}" \
	cargo test -p ferroce-dev --test model --test wqe_fuzz); then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failures+=("device model/wqe_fuzz")
fi
# The kernel series in tree (make upstream-check: each patch built,
# checkpatch, clippy, rustdoc, gid and ferroce-pair on the in-tree kernel);
# 14 min warm (27 min with a cold base tree), too long for make check.
if [ -z "${FERROCE_SCENARIOS:-}" ]; then
	log "soak: make upstream-check"
	if make -C "$FERROCE_TOP" -s upstream-check; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("make upstream-check")
	fi
fi
for s in $scenarios; do
	log "soak: qemu-test/run $s (SOAK=1)"
	if run_scenario "$s"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$s$SCENARIO_WHY")
	fi
done
echo
for f in "${failures[@]}"; do echo "FAILED: soak scenario $f"; done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
