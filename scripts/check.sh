#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Every test (make check): the device model's cargo tests, the module build,
# make lint, then the VM scenarios (KUnit suites run in "boot").  Builds whatever is missing first
# (trixie root, kernel: cached in $FERROCE_CACHE).  Ends with one line
# "N passed, N failed": cargo test cases plus one per scenario.
#
# FERROCE_SCENARIOS="boot rxe-pair" limits the scenarios run.
. "$(dirname "$0")/lib.sh"
set +e
need_root
"$FERROCE_TOP/scripts/setup-host.sh" || exit 1

# What the disk holds decides a CI run as much as the tests: say it.
disk_free() { df -Pm "$1" | awk 'NR == 2 {printf "%.1f GiB free", $4 / 1024}'; }
mkdir -p "$FERROCE_CACHE"
log "check: $(disk_free "$FERROCE_TOP") for the checkout, $(disk_free "$FERROCE_CACHE") for the cache"

passed=0 failed=0
declare -a failures=()
pass() { passed=$((passed + $1)); }
fail() { failed=$((failed + 1)); failures+=("$1"); }

# The device's cargo runs in the trixie root: build it first on a cold
# cache (later steps would, but the cargo tests come before them).
"$FERROCE_TOP/scripts/make-root.sh" >/dev/null || die "cannot build the trixie root"
# A fresh checkout compiles only ferroce's own crates (lib.sh).
cargo_target_seed

# 1. Host-side Rust: the emulated device and its protocol library.
if [ -f "$FERROCE_TOP/device/Cargo.toml" ]; then
	log "check: cargo test (device/)"
	out=$(mktemp)
	(cd "$FERROCE_TOP/device" && "$FERROCE_TOP/scripts/in-root" -- cargo test --workspace 2>&1) | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$out" | awk '{s+=$4} END {print s+0}')
	f=$(grep -Eo '[0-9]+ failed' "$out" | awk '{s+=$1} END {print s+0}')
	pass "$p"
	failed=$((failed + f))
	[ "$f" -gt 0 ] && failures+=("cargo test: $f failed")
	[ "$rc" != 0 ] && [ "$f" = 0 ] && fail "cargo test (build or run error, exit $rc)"
	rm -f "$out"
fi

# 2. The kernel module builds against the test kernel (also done by the
#    harness; separate here so that a build failure is named as such).
log "check: make modules"
if make -C "$FERROCE_TOP" -s modules; then pass 1; else fail "make modules"; fi

# 2b. libferroce, the rdma-core provider: builds, its unit test, symbol
#     check and load test (libibverbs matches it to a fake ferroce device).
log "check: make provider-check"
if make -C "$FERROCE_TOP" -s provider-check; then pass 1; else fail "make provider-check"; fi

# 2b'. The kernel series is made from the current files (every driver file
#      belongs to one patch); make upstream-check, in make soak, builds it.
log "check: make series"
if make -C "$FERROCE_TOP" -s series; then pass 1; else fail "make series"; fi

# 2c. The cache's locking: a held entry is never pruned.
log "check: scripts/test-cache.sh"
if "$FERROCE_TOP/scripts/test-cache.sh"; then pass 1; else fail "scripts/test-cache.sh"; fi

# 3. Style: rustfmt, clippy, checkpatch, shellcheck (make lint).
log "check: make lint"
if make -C "$FERROCE_TOP" -s lint; then pass 1; else fail "make lint"; fi

# 4. VM scenarios.
#    Benchmark-only scenarios (BENCH_ONLY=1, run by make bench) are left out.
scenarios=${FERROCE_SCENARIOS:-$(grep -L '^BENCH_ONLY=1' "$FERROCE_TOP"/qemu-test/scenarios/*.sh |
	sed 's|.*/||; s/\.sh$//' | sort)}
for s in $scenarios; do
	log "check: qemu-test/run $s"
	if run_scenario "$s"; then pass 1; else fail "scenario $s$SCENARIO_WHY"; fi
done

runs=${FERROCE_RUNS:-$FERROCE_TOP/qemu-test/runs}
log "check: the scenarios' run directories hold $(du -sm "$runs" 2>/dev/null | cut -f1) MiB; now $(disk_free "$FERROCE_TOP")"

# The dependencies every profile built here, for the next fresh checkout.
(cargo_target_save) || log "check: could not cache device/target's dependencies (not a test failure)"

echo
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
