#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own test suite (shipped by python3-pyverbs) against one
device, one result line per test for the harness:

  ok - pyverbs ID
  not ok - pyverbs ID: ERROR|FAIL|UNEXPECTED SUCCESS: last line of the trace
  skip - pyverbs ID: [CLASS] REASON

CLASS says why a skip is acceptable, or that it is not:
  vendor      a test of another vendor's device (mlx5, EFA, ...);
  platform    something the test VM does not have (GPU, CUDA, 2M huge pages,
              a PCI device passed to VFIO);
  not-asked   a feature ferroce does not aim at (XRC, ODP, device memory,
              flow steering, raw packet QPs, tag matching, RSS, parent
              domains, dma-buf, hardware clocks);
  missing     anything else: a verbs feature ferroce still lacks.
The modules of other vendors' devices (test_mlx5_*, test_efa*) are not
run at all (each would only skip, and on TCG setting up costs ~2 s a
test): each such module is one "skip - pyverbs MODULE: [vendor] ..." line.
The last line is "# pyverbs: N ok, N failed, N skipped (vendor N, ...)".

Usage: pyverbs-suite.py TESTS_DIR DEV GID_INDEX [unittest arguments...]
TESTS_DIR is an unpacked copy of /usr/share/doc/rdma-core/tests.
"""
import os
import re
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader

# (class, pattern over "module: reason"), first match wins.
VENDOR_MODULES = r"^tests\.test_(mlx5|efa|irdma)"

SKIP_CLASSES = [
    ("vendor", r"mlx5|MLX5|efa|EFA|irdma|DEVX|DevX"),
    ("platform", r"CUDA|cuda|GPU|/dev/dri|[Hh]uge pages|PCI device must be passed"),
    ("not-asked", r"XRC|ODP|[Dd]evice memory|[Ff]low|Raw Packet|QP type 8|"
                  r"Tag Matching|tag_matching|RSS|Parent Domain|[Dd]ma-?[Bb]uf|"
                  r"real time|timestamp"),
]


def skip_class(test_id, reason):
    text = f"{test_id}: {reason}"
    for name, pattern in SKIP_CLASSES:
        if re.search(pattern, text):
            return name
    return "missing"


def last_line(trace):
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "?"


class Result(unittest.TestResult):
    """Prints each outcome as it happens (a hang still shows progress)."""

    def __init__(self):
        super().__init__()
        self.counts = {"ok": 0, "failed": 0, "skipped": 0}
        self.classes = {}
        self.started = 0.0

    def _id(self, test):
        return test.id().removeprefix("tests.")

    def _out(self, line):
        print(line, flush=True)

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()

    def _secs(self):
        return f"{time.monotonic() - self.started:.1f}s"

    def addSuccess(self, test):
        self.counts["ok"] += 1
        self._out(f"ok - pyverbs {self._id(test)} ({self._secs()})")

    def _failed(self, test, kind, trace):
        self.counts["failed"] += 1
        self._out(f"not ok - pyverbs {self._id(test)}: {kind}: {last_line(trace)}")
        for line in trace.splitlines():
            self._out(f"#   {line}")

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test, "ERROR", self.errors[-1][1])

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test, "FAIL", self.failures[-1][1])

    def addUnexpectedSuccess(self, test):
        self._failed(test, "UNEXPECTED SUCCESS", "expected to fail, passed")

    def addExpectedFailure(self, test, err):
        self.addSuccess(test)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            super().addSubTest(test, subtest, err)
            self._failed(subtest, "FAIL", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        cls = skip_class(test.id(), reason)
        self.counts["skipped"] += 1
        self.classes[cls] = self.classes.get(cls, 0) + 1
        reason = " ".join(reason.split())
        self._out(f"skip - pyverbs {self._id(test)}: [{cls}] {reason}")


def iter_tests(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from iter_tests(test)
        else:
            yield test


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tests_dir, dev, gid = sys.argv[1:4]
    # As the suite's run_tests.py: its directory on the path, its own
    # argument parser given the device, the rest for unittest.
    # (Not this script's directory: "pyverbs" must be rdma-core's package.)
    sys.path[0] = tests_dir
    sys.argv = [sys.argv[0], "--dev", dev, "--gid", gid] + sys.argv[4:]
    from args_parser import parser  # noqa: E402 (needs the path above)
    parser.parse_args()
    tests = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
    suite = unittest.TestSuite()
    vendor = {}
    for test in iter_tests(unittest.defaultTestLoader.loadTestsFromModule(tests)):
        module = test.id().rsplit(".", 2)[0]
        if re.match(VENDOR_MODULES, module):
            vendor[module] = vendor.get(module, 0) + 1
        else:
            suite.addTest(test)
    result = Result()
    for module, n in sorted(vendor.items()):
        result.counts["skipped"] += n
        result.classes["vendor"] = result.classes.get("vendor", 0) + n
        print(f"skip - pyverbs {module.removeprefix('tests.')}: [vendor] "
              f"another vendor's device: {n} test(s) not run", flush=True)
    start = time.monotonic()
    suite.run(result)
    c = result.counts
    by_class = ", ".join(f"{k} {v}" for k, v in sorted(result.classes.items()))
    print(f"# pyverbs: {c['ok']} ok, {c['failed']} failed, {c['skipped']} skipped"
          f" ({by_class or 'none'}) in {time.monotonic() - start:.0f}s", flush=True)
    sys.exit(1 if c["failed"] else 0)


if __name__ == "__main__":
    main()
