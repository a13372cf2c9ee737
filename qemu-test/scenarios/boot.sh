# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="our kernel boots, ib_core/ib_uverbs load, the Rust KUnit suites pass"
TIMEOUT=300

setup() {
	segment lan
	vm vm1 single lan 10.0.1.1/24
}

# The kernel crate's KUnit suites (and doctests) run at boot and print KTAP
# on the console; ferroce's own suites run when its module is loaded.  Every
# suite must pass and at least one Rust suite must have run.
check() {
	local log=$1/vm1/console.log ktap
	ktap=$(sed -E 's/^\[ *[0-9.]+\] //' "$log" | tr -d '\r')
	local suites fails rust
	suites=$(grep -Ec '^(not )?ok [0-9]+ ' <<<"$ktap")
	fails=$(grep -Ec '^ *not ok [0-9]+ ' <<<"$ktap")
	rust=$(grep -Ec '^ok [0-9]+ rust_' <<<"$ktap")
	echo "KUnit: $suites suites ran, $rust Rust suites passed, $fails failing tests/suites"
	grep -E '^# Totals:' <<<"$ktap" | sed 's/^/KUnit /'
	grep -E '^ *not ok [0-9]+ ' <<<"$ktap" | head -20
	grep -Eq '^ok [0-9]+ ferroce_gid' <<<"$ktap" || echo "ferroce_gid KUnit suite did not pass"
	[ "$suites" -gt 0 ] && [ "$rust" -gt 0 ] && [ "$fails" = 0 ] &&
		grep -Eq '^ok [0-9]+ ferroce_gid' <<<"$ktap"
}
