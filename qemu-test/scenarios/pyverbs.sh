# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# rdma-core's own test suite (python3-pyverbs ships it) against ferroce0 in
# one VM; its traffic tests run between QPs of that one device.  Every test
# that runs must pass; each skip is listed with its class (vendor, platform,
# not-asked, missing: see qemu-test/guest/pyverbs-suite.py).  "missing" skips are
# verbs features ferroce still lacks; their count is in the notes.
DESC="rdma-core's test suite (pyverbs) on ferroce0: no failure, no error; skips listed by class"
TIMEOUT=1200

setup() {
	segment lan
	vm vm1 ferroce lan 10.0.1.1/24 smp=2 ferroce
}

report() {
	cat "$1/vm1/notes" 2>/dev/null
}
