#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make bench's report: rxe and ferroce side by side.

Usage: bench-report.py RXE_RUN_DIR FERROCE_RUN_DIR
                       [RXE_JUMBO_RUN_DIR FERROCE_JUMBO_RUN_DIR] OUT_DIR PLOT_ROOT

Reads the client VM's perftest logs of a bench-rxe and a bench-ferroce run
(RUN_DIR/vm2/NAME.client.log, NAME.cmd; qemu-test/scenarios/bench.guest),
the ferroce devices' counter growth (RUN_DIR/vm{1,2}/counters.delta.json)
and the checks' results, and the same of the jumbo-frame runs
(bench-rxe-jumbo, bench-ferroce-jumbo: MTU 9000, IB MTU 4096) if given,
and writes into OUT_DIR:

  bench.json          every number, the ratios ferroce/rxe, the machine
                      (with OUT_DIR/host.json, the host's wake-up and
                      system call costs, if bench.sh measured them); the
                      top level is the 1500-byte MTU, "jumbo" the same for
                      MTU 9000
  bw-vs-size.{dat,gp,svg}, latency.{dat,gp,svg}, qp-scaling.{dat,gp,svg}
                      the charts: gnuplot run in PLOT_ROOT (scripts/in-root;
                      scripts/make-plot-root.sh builds it); "cd OUT_DIR &&
                      gnuplot NAME.gp" draws one again

and prints a table.  A measurement that is missing (no log, no result row)
or failed (its pair's check is "not ok") is null in bench.json and listed
under "missing"; nothing is made up.

A run directory that does not exist counts as a run with no results.

Exit status: 0; 3 if a ratio could not be computed; 4 if a chart was not
drawn (both: 3); 2 for bad arguments.
"""

import datetime
import json
import os
import platform
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT = "vm2"
VMS = ("vm1", "vm2")
OPS = ("write", "read", "send")
QPS = (1, 4, 16, 64)
SWEEP_SIZES = [2 ** i for i in range(1, 24)]  # 2 B .. 8 MiB
LAT_STATS = (("t_min", "min"), ("t_typical", "typical"), ("t_avg", "avg"),
             ("p99", "99%"), ("p99.9", "99.9%"))

# perftest's column headings -> our keys.
COLUMNS = {
    "#bytes": "bytes",
    "#iterations": "iterations",
    "BW peak[MiB/sec]": "bw_peak",
    "BW average[MiB/sec]": "bw_average",
    "MsgRate[Mpps]": "msg_rate_mpps",
    "t_min[usec]": "t_min",
    "t_max[usec]": "t_max",
    "t_typical[usec]": "t_typical",
    "t_avg[usec]": "t_avg",
    "t_stdev[usec]": "t_stdev",
    "99% percentile[usec]": "p99",
    "99.9% percentile[usec]": "p99.9",
}
HEADING = re.compile(r"#\w+|[^\s\[\]#][^\[\]#]*?\[[^\]]*\]")


def num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in s else v


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def perftest_rows(text):
    """perftest's result table: a list of {key: number} (one per row), or
    (None, why)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip().startswith("#bytes"):
            continue
        heads = [h.strip() for h in HEADING.findall(line)]
        keys = [COLUMNS.get(h) for h in heads]
        if None in keys:
            return None, "unknown perftest columns: %s" % ", ".join(
                h for h, k in zip(heads, keys) if k is None)
        rows = []
        for row in lines[i + 1:]:
            f = row.split()
            if not f or not re.fullmatch(r"\d+", f[0]):
                if rows or row.startswith("-"):
                    break
                continue
            vals = [num(x) for x in f]
            if len(vals) != len(keys) or None in vals:
                return None, "malformed result row: %r" % row.strip()
            rows.append(dict(zip(keys, vals)))
        if not rows:
            return None, "no result row under perftest's heading"
        return rows, None
    return None, "no perftest result table"


class Run:
    """One bench scenario's run directory."""

    def __init__(self, kind, path):
        self.kind = kind
        self.path = os.path.abspath(path)
        self.missing = []  # (what, why)
        self.not_ok = {}  # VM -> [lines]
        self.exit_codes = {}
        for vm in VMS:
            res = read(os.path.join(self.path, vm, "results"))
            self.not_ok[vm] = [l for l in (res or "").splitlines() if l.startswith("not ok")]
            ec = read(os.path.join(self.path, vm, "exit-code"))
            self.exit_codes[vm] = ec.strip() if ec is not None else None
        self.notes = {}
        for vm in VMS:
            d = {}
            for line in (read(os.path.join(self.path, vm, "notes")) or "").splitlines():
                k, _, v = line.partition(" ")
                d[k] = v.strip()
            self.notes[vm] = d

    def failed_check(self, name):
        """The "not ok" line of NAME's client/server pair, if any."""
        for vm in VMS:
            for l in self.not_ok[vm]:
                if l.startswith("not ok - %s (" % name):
                    return "%s: %s" % (vm, l[:240])
        return None

    def test(self, name, what, keep_rows_of_failed=False):
        """NAME's client result rows and its command, or None (noted as
        missing under WHAT)."""
        log = os.path.join(self.path, CLIENT, name + ".client.log")
        cmd = read(os.path.join(self.path, CLIENT, name + ".cmd"))
        cmd = cmd.strip() if cmd else None
        text = read(log)
        failed = self.failed_check(name)
        if text is None:
            self.missing.append((what, "no client log %s" % log + ("; " + failed if failed else "")))
            return None, cmd, failed
        rows, why = perftest_rows(text)
        if rows is None:
            tail = " | ".join(l.strip() for l in text.strip().splitlines()[-3:])[:300]
            self.missing.append((what, "%s (%s); log ends: %s" % (why, log, tail)
                                 + ("; " + failed if failed else "")))
            return None, cmd, failed
        if failed and not keep_rows_of_failed:
            self.missing.append((what, "the test failed: " + failed))
            return None, cmd, failed
        return rows, cmd, failed

    def guest_kernel(self):
        con = read(os.path.join(self.path, CLIENT, "console.log")) or ""
        m = re.search(r"ferroce-guest: \S+ \(\S+\) up after \S+, kernel (\S+)", con)
        return m.group(1) if m else None

    def vm_config(self):
        q = read(os.path.join(self.path, CLIENT, "qemu.cmd")) or ""
        acc = re.search(r"-accel (\S+)", q)
        smp = re.search(r"-smp (\d+)", q)
        mem = re.search(r" -m (\d+)", q)
        # Where each VM's vCPU and device process ran (qemu-test/run's
        # RUN_DIR/VM/placement; none: nothing was pinned).
        place = {}
        for vm in VMS:
            text = read(os.path.join(self.path, vm, "placement"))
            place[vm] = text.strip().splitlines() if text else None
        return {"accel": acc.group(1) if acc else None,
                "smp": int(smp.group(1)) if smp else None,
                "mem_mib": int(mem.group(1)) if mem else None,
                "placement": place}


def collect(run):
    """One device kind's numbers."""
    r = {"run_dir": run.path, "device": run.notes[CLIENT].get("bench_device")}
    for k, n in (("eth_mtu", "bench_eth_mtu"), ("active_mtu", "bench_active_mtu")):
        v = run.notes[CLIENT].get(n)
        r[k] = num(v) if v else None
    outs = run.notes[CLIENT].get("bench_outstanding_reads")
    r["outstanding_reads"] = num(outs) if outs else None
    # Bandwidth (BW average) and latency (t_typical) of each operation,
    # measured REPS times (NAME, NAME_r2, ...): the headline number
    # OP_bw / OP_lat is the median repetition's, whose whole row is under
    # "bandwidth"/"latency" with every repetition's number as "samples".
    reps = run.notes[CLIENT].get("bench_reps")
    reps = int(num(reps)) if reps and num(reps) else 1
    r["repetitions"] = reps
    for group, suffix, headline in (("bandwidth", "_bw", "bw_average"),
                                    ("latency", "_lat", "t_typical")):
        r[group] = {}
        for op in OPS:
            got = []  # (headline, row, command) of each repetition with a result
            cmd = None
            for rep in range(1, reps + 1):
                name = op + suffix + ("_r%d" % rep if rep > 1 else "")
                rows, c, _ = run.test(name, "%s.%s" % (run.kind, name))
                cmd = cmd or c
                if rows and rows[0].get(headline) is not None:
                    got.append((rows[0][headline], rows[0], c))
            # The median of an even count is the lower middle sample, so
            # that the headline is one real measurement.
            mid = sorted(got, key=lambda g: g[0])[(len(got) - 1) // 2] if got else None
            r[group][op] = dict(mid[1] if mid else {}, command=mid[2] if mid else cmd,
                                samples=[g[0] for g in got])
            r[op + suffix] = mid[0] if mid else None
    # The sweep: a failed run keeps the sizes it completed (each row is a
    # whole measurement), the others are null.
    rows, cmd, failed = run.test("write_bw_sweep", "%s.write_bw_sweep" % run.kind,
                                 keep_rows_of_failed=True)
    by_size = {row["bytes"]: row for row in rows or []}
    points = []
    lacking = []
    for size in SWEEP_SIZES:
        row = by_size.get(size)
        points.append(dict(row, bw=sweep_bw(row)) if row else
                      {"bytes": size, "bw_average": None, "bw": None})
        if row is None:
            lacking.append(size)
    if rows is not None and lacking:
        run.missing.append(("%s.write_bw_sweep" % run.kind,
                            "no result for %d of %d sizes (%s)" % (
                                len(lacking), len(SWEEP_SIZES), ", ".join(map(str, lacking)))
                            + ("; the test failed: " + failed if failed else "")))
    elif rows is not None and failed:
        run.missing.append(("%s.write_bw_sweep" % run.kind,
                            "every size has a row, but the test failed: " + failed))
    r["sweep"] = {"command": cmd, "failed": bool(failed), "points": points}
    return r


def sweep_bw(row):
    """A sweep row's bandwidth in MiB/s, as precisely as perftest printed
    it: BW average has two decimals (0.00 MiB/s for small messages on a
    slow device), MsgRate six (1 message/s); both come from the same
    cycle count (BW = MsgRate x size).  So MsgRate x size when that is the
    finer of the two (messages up to 8 KiB), else BW average."""
    mr, size = row.get("msg_rate_mpps"), row.get("bytes")
    if isinstance(mr, (int, float)) and isinstance(size, int) and 0.5 * size / 2 ** 20 < 0.005:
        return round(mr * 1e6 * size / 2 ** 20, 6)
    return row.get("bw_average")


def collect_ferroce(run, r):
    r["qp_scaling"] = []
    for q in QPS:
        rows, cmd, _ = run.test("write_bw_q%d" % q, "ferroce.write_bw_q%d" % q)
        row = rows[0] if rows else None
        r["qp_scaling"].append(dict(row or {}, qps=q, command=cmd,
                                    bw_average=row.get("bw_average") if row else None))
    # Retransmits and timeouts: the growth over the tests of both VMs'
    # devices (each VM has its own).
    per_vm = {}
    for vm in VMS:
        p = os.path.join(run.path, vm, "counters.delta.json")
        try:
            with open(p) as f:
                per_vm[vm] = json.load(f)
        except (OSError, ValueError) as e:
            per_vm[vm] = None
            run.missing.append(("ferroce.device_counters.%s" % vm,
                                "no counter growth (%s: %s)" % (p, e.__class__.__name__)))
    r["device_counters_delta"] = per_vm
    # RNR NAKs are flow control, not loss: a receiver that had no receive
    # posted. Each makes its sender rewind (a retransmit) and wait.
    # Credit waits are the flow control that replaces them: messages held
    # back until an ACK advertised a receive WQE (device.rst, end-to-end
    # credits); credit updates are the unsolicited ACKs that announced
    # receives posted after an ACK advertised none; keep-alives are what a
    # requester that waited for one sent instead of a probe into an RNR NAK.
    for k, name in (("retransmits", "retransmits"), ("timeouts", "timeouts"),
                    ("rnr_naks", "rnr_naks_rcvd"), ("credit_waits", "credit_waits"),
                    ("credit_updates", "credit_updates"),
                    ("credit_keepalives", "credit_keepalives")):
        r[k] = vm_sum(per_vm, name)
        if r[k] is None:
            run.missing.append(("ferroce.%s" % k, "not known for every VM's device"))
    # The device lock: how often the entry points took it, and waited.
    r["device_lock"] = {k: vm_sum(per_vm, name) for k, name in
                        (("taken", "lock_taken"), ("contended", "lock_contended"),
                         ("wait_us", "lock_wait_us"))}
    # The wire: frames, and the tap reads and writes that moved them
    # (super-frames carry several).
    r["wire"] = {k: vm_sum(per_vm, "port_" + k) for k in
                 ("wire_rx", "wire_rx_reads", "wire_tx", "wire_tx_writes")}
    r["counters_note"] = ("retransmits/timeouts/rnr_naks (rnr_naks_rcvd)/credit_waits: growth "
                          "of the device counters of both VMs (vm1 + vm2) over all of "
                          "bench.guest's tests; an RNR NAK (no receive posted) makes its sender "
                          "rewind, and counts as a retransmit too; a credit wait is a message "
                          "held back until the receiver's ACK advertised a receive WQE; "
                          "credit_updates: unsolicited ACKs announcing receives posted "
                          "after an ACK advertised none; credit_keepalives: zero-length "
                          "WRITEs for the newest acknowledged PSN that a requester sent "
                          "every millisecond while it waited for an update; "
                          "device_lock: how often both devices' "
                          "entry points took their one lock (taken), found it held "
                          "(contended) and waited for it (wait_us), over the same tests; "
                          "wire: the frames both devices' ports received and sent, and the "
                          "tap reads and writes that moved them (a UDP GSO super-frame is one)")


def vm_sum(per_vm, name):
    """Counter `name`'s growth summed over the VMs' devices; None unless
    every VM's device has it."""
    vals = [d.get(name) if d else None for d in per_vm.values()]
    return sum(vals) if all(isinstance(v, int) for v in vals) else None


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0:
        return round(b / a, 4)
    return None


def machine():
    model = None
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = None
    m = re.search(r"^MemTotal:\s+(\d+) kB", read("/proc/meminfo") or "", re.M)
    if m:
        mem = int(m.group(1)) // 1024
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "kernel_version": platform.version(), "mem_mib": mem,
            "hostname": platform.node()}


# The fewest thread wake-ups in each latency test's reported time (one
# message in flight; the guests poll, so no interrupt wakes anyone).
# perftest reports half a round trip for write and send: one way is the
# doorbell (QEMU's message wakes the device's doorbell thread) and the
# frame (it wakes the peer device's wire thread), after which the peer
# guest sees the data or the CQE by polling.  ib_read_lat reports a whole
# READ: the doorbell, the request at the peer's wire thread and the
# response at ours.
WAKEUPS = {"write_lat": 2, "send_lat": 2, "read_lat": 3}


def host(out):
    """bench.sh's measurement of the host (OUT_DIR/host.json, from
    device/ferroce-dev/benches/wakeup.rs) and the latency floors it
    gives, or None."""
    try:
        with open(os.path.join(out, "host.json")) as f:
            h = json.load(f)
    except (OSError, ValueError):
        return None
    rtt = h.get("wakeup_rtt_us")
    if not isinstance(rtt, (int, float)):
        return None
    h["wakeups"] = dict(WAKEUPS)
    h["floor_us"] = {k: round(n * rtt / 2, 2) for k, n in WAKEUPS.items()}
    one = h.get("wakeup_rtt_one_cpu_us")
    h["floor_one_cpu_us"] = ({k: round(n * one / 2, 2) for k, n in WAKEUPS.items()}
                             if isinstance(one, (int, float)) else None)
    h["note"] = ("wakeup_rtt_us: two threads of one process wake each other through a "
                 "socket, each asleep in poll(2) like the device's threads, on this machine "
                 "before the VMs start, where the scheduler puts them (on an idle machine, "
                 "two CPUs); wakeup_rtt_one_cpu_us: the same, both threads pinned to one "
                 "CPU, as make bench places the devices' threads; a wake-up is half of a "
                 "round trip. floor_us, floor_one_cpu_us: the fewest wake-ups in each "
                 "latency test's reported time (wakeups) times that, with no guest or "
                 "device work at all")
    return h


# --- charts ------------------------------------------------------------------

def fmt(v, missing="NaN"):
    # Lines: NaN, at which gnuplot breaks the line (it draws a line on
    # across a "missing" marker as if the point were there).  Histograms:
    # "?" (set datafile missing), since a column of NaN is an error there.
    return missing if v is None else repr(v)


def size_label(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


COMMON = """set terminal svg size 900,560 dynamic noenhanced font "sans,12" background "white"
set grid
set key top left
"""


def chart_bw(b):
    """Bandwidth vs size: rxe and ferroce, and with jumbo frames (b["jumbo"])
    the same at MTU 9000."""
    sets = [("rxe", b["rxe"], "rxe"), ("ferroce", b["ferroce"], "ferroce")]
    if "jumbo" in b:
        sets += [("rxe_9000", b["jumbo"]["rxe"], "rxe, MTU 9000"),
                 ("ferroce_9000", b["jumbo"]["ferroce"], "ferroce, MTU 9000")]
    lines = ["# bytes  " + "  ".join("%s_MiB/s" % n for n, _, _ in sets)
             + "  (perftest BW average; NaN = no result)"]
    have = [False] * len(sets)
    for i, size in enumerate(SWEEP_SIZES):
        vals = []
        for j, (_, r, _) in enumerate(sets):
            v = r["sweep"]["points"][i].get("bw")
            have[j] |= v is not None and v > 0
            vals.append(fmt(v if v is None or v > 0 else None))
        lines.append("%d %s" % (size, " ".join(vals)))
    tics = ", ".join('"%s" %d' % (size_label(s), s) for s in SWEEP_SIZES[0:21:3] + SWEEP_SIZES[-1:])
    style = {"rxe": 'lw 2 pt 7 lc rgb "#1f77b4"', "ferroce": 'lw 2 pt 5 lc rgb "#d62728"',
             "rxe_9000": 'lw 2 pt 6 dt 2 lc rgb "#1f77b4"',
             "ferroce_9000": 'lw 2 pt 4 dt 2 lc rgb "#d62728"'}
    plots = ['"bw-vs-size.dat" using 1:%d with linespoints %s title "%s"' % (j + 2, style[n], t)
             for j, (n, _, t) in enumerate(sets) if have[j]]
    gp = COMMON + """set output "bw-vs-size.svg"
set title "RDMA WRITE bandwidth vs message size (ib_write_bw -a, %s)"
set xlabel "message size"
set ylabel "MiB/s (log scale)"
set logscale x 2
set logscale y 10
set xtics (%s)
set xrange [1.5:12000000]
""" % (b["_subtitle"], tics)
    return "\n".join(lines) + "\n", gp + plot_or_nodata(plots), any(have)


def chart_lat(b):
    lines = ["# stat  " + "  ".join("%s_rxe %s_ferroce" % (op, op) for op in OPS)
             + "  (usec, 2 B; ? = no result)"]
    anyv = False
    allv = []
    op_has = dict.fromkeys(OPS, False)
    for key, label in LAT_STATS:
        vals = []
        for op in OPS:
            for kind in ("rxe", "ferroce"):
                v = b[kind]["latency"][op].get(key)
                anyv |= v is not None and v > 0
                if v is not None and v > 0:
                    allv.append(v)
                    op_has[op] = True
                vals.append(fmt(v if v is None or v > 0 else None, "?"))
        lines.append('"%s" %s' % (label, " ".join(vals)))
    gp = COMMON.replace("size 900,560", "size 1200,520") + """set output "latency.svg"
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 10
set yrange [%g:%g]
set ylabel "usec (log scale)"
set xtics nomirror
set grid ytics
set key top left
set multiplot layout 1,3 title "2-byte latency percentiles, rxe vs ferroce (ib_*_lat, %s)"
""" % (decade(min(allv or [1]), -1), decade(max(allv or [10]), 1), b["_subtitle"])
    col = 2
    for op in OPS:
        gp += 'set title "%s"\n' % {"write": "RDMA WRITE", "read": "RDMA READ", "send": "SEND"}[op]
        if op_has[op]:
            gp += ('plot "latency.dat" using %d:xtic(1) title "rxe" lc rgb "#1f77b4", '
                   '"" using %d title "ferroce" lc rgb "#d62728"\n' % (col, col + 1))
        else:
            # gnuplot refuses a plot with no point at all.
            gp += ('set xrange [0:1]\nset label 2 "no data" at graph 0.5, graph 0.5 center\n'
                   'plot 1e-300 notitle\nunset label 2\nset autoscale x\n')
        col += 2
    gp += "unset multiplot\n"
    if not anyv:
        gp = COMMON + 'set output "latency.svg"\n' + plot_or_nodata([])
    return "\n".join(lines) + "\n", gp, anyv


def chart_qp(b):
    sets = [("MTU 1500", b["ferroce"]["qp_scaling"])]
    if "jumbo" in b:
        sets.append(("MTU 9000", b["jumbo"]["ferroce"]["qp_scaling"]))
    lines = ["# qps  " + "  ".join("ferroce_MiB/s_%s" % t.replace(" ", "") for t, _ in sets)
             + "  (ib_write_bw -q N -s 65536, BW average; NaN = no result)"]
    have = [False] * len(sets)
    for i, q in enumerate(QPS):
        vals = []
        for j, (_, pts) in enumerate(sets):
            v = pts[i].get("bw_average")
            have[j] |= v is not None
            vals.append(fmt(v))
        lines.append("%d %s" % (q, " ".join(vals)))
    gp = COMMON + """set output "qp-scaling.svg"
set title "ferroce RDMA WRITE bandwidth vs queue pairs (64 KiB messages, %s)"
set xlabel "queue pairs (ib_write_bw -q N)"
set ylabel "MiB/s (BW average, all QPs)"
set logscale x 2
set xtics (%s)
set xrange [0.7:90]
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
""" % (b["_subtitle"], ", ".join('"%d" %d' % (q, q) for q in QPS))
    style = ['lw 2 pt 7 lc rgb "#d62728"', 'lw 2 pt 4 dt 2 lc rgb "#9467bd"']
    plots = []
    for j, (t, _) in enumerate(sets):
        if have[j]:
            plots.append('"qp-scaling.dat" using 1:%d with linespoints %s title "%s", '
                         '"" using 1:%d:(sprintf("%%.1f", $%d)) with labels offset 0,1 notitle'
                         % (j + 2, style[j], t, j + 2, j + 2))
    return "\n".join(lines) + "\n", gp + plot_or_nodata(plots), any(have)


def decade(v, way):
    """The power of 10 at or below (way -1) / above (way 1) v."""
    import math
    e = math.log10(v)
    return 10.0 ** (math.floor(e) if way < 0 else max(math.ceil(e), math.floor(e) + 1))


def plot_or_nodata(plots):
    if plots:
        return "plot " + ", \\\n     ".join(plots) + "\n"
    return ('unset logscale\nunset xtics\nunset ytics\nset xrange [0:1]\nset yrange [0:1]\n'
            'set label 1 "no data (see bench.json, \\"missing\\")" at 0.5,0.5 center\n'
            'plot 2 notitle\n')


def draw(out, plot_root, name):
    """Run NAME.gp with gnuplot in PLOT_ROOT, in OUT_DIR (bound into the
    root when the checkout does not hold it); None or why it failed."""
    svg = os.path.join(out, name + ".svg")
    try:
        os.unlink(svg)
    except OSError:
        pass
    if not os.path.lexists(os.path.join(plot_root, "usr", "bin", "gnuplot")):
        return "no gnuplot in the plot root %r (scripts/make-plot-root.sh builds it)" % plot_root
    env = dict(os.environ)
    if not re.search(r"\s", out):
        env["FERROCE_EXTRA_BINDS"] = (env.get("FERROCE_EXTRA_BINDS", "") + " " + out).strip()
    try:
        p = subprocess.run([os.path.join(TOP, "scripts", "in-root"), plot_root, "--",
                            "gnuplot", name + ".gp"], cwd=out, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "gnuplot did not run: %s" % e
    if p.returncode != 0 or not os.path.isfile(svg) or os.path.getsize(svg) == 0:
        return "gnuplot %s.gp: exit %d: %s" % (name, p.returncode, p.stdout.strip()[-500:])
    with open(svg, errors="replace") as f:
        if "</svg>" not in f.read():
            return "%s is not a whole SVG" % svg
    return None


# --- the table ---------------------------------------------------------------

def show(v, width=10, prec=2):
    if v is None:
        return "%*s" % (width, "n/a")
    if isinstance(v, float) and 0 < abs(v) < 0.1:
        return "%*.*g" % (width, 3, v)
    if isinstance(v, int):
        return "%*d" % (width, v)
    return "%*.*f" % (width, prec, v)


def xratio(r):
    return "%12s" % "n/a" if r is None else "%11.3fx" % r


def table(b):
    out = []
    p = out.append
    p("make bench: rxe vs ferroce, two TCG VMs each, one run each (%s)" % b["_subtitle"])
    p("  BW and latency: the median of %s / %s repetitions (rxe / ferroce)" % (
        b["rxe"].get("repetitions"), b["ferroce"].get("repetitions")))
    p("  machine: %s, %s CPUs, kernel %s" % (b["machine"]["cpu_model"], b["machine"]["nproc"],
                                           b["machine"]["kernel"]))
    h = b.get("host")
    if h:
        p("  host: a thread wake-up round trip %s usec, a system call %s usec; so ferroce's "
          "latency floor (usec, wake-ups alone)" % (show(h["wakeup_rtt_us"]).strip(),
                                                     show(h.get("syscall_us"), 10, 3).strip()))
        p("        write %s, read %s, send %s" % tuple(
            show(h["floor_us"][op + "_lat"]).strip() for op in OPS))
        if h.get("floor_one_cpu_us"):
            p("        with both threads on one CPU: a round trip %s usec, floor write %s, "
              "read %s, send %s" % ((show(h["wakeup_rtt_one_cpu_us"]).strip(),) + tuple(
                  show(h["floor_one_cpu_us"][op + "_lat"]).strip() for op in OPS)))
    for kind in ("rxe", "ferroce"):
        place = (b[kind].get("vm") or {}).get("placement") or {}
        p("  placement, %s: %s" % (kind, "; ".join(
            "%s %s" % (vm, ", ".join(place[vm]) if place.get(vm) else "not pinned")
            for vm in VMS)))
    p("  MTU (client): rxe eth %s, IB %s; ferroce eth %s, IB %s" % tuple(
        show(b[k].get(m), 0).strip() for k in ("rxe", "ferroce") for m in ("eth_mtu", "active_mtu")))
    p("")
    p("%-34s %10s %10s %12s" % ("metric", "rxe", "ferroce", "ferroce/rxe"))
    for op in OPS:
        k = op + "_bw"
        p("%-34s %s %s %12s   higher is better" % (
            "%s BW 64 KiB (MiB/s)" % op, show(b["rxe"][k]), show(b["ferroce"][k]),
            xratio(b["ratios"][k])))
    for op in OPS:
        k = op + "_lat"
        p("%-34s %s %s %12s   lower is better" % (
            "%s lat 2 B t_typical (usec)" % op, show(b["rxe"][k]), show(b["ferroce"][k]),
            xratio(b["ratios"][k])))
    p("the repetitions, in the order run (rxe | ferroce):")
    for group, suffix in (("bandwidth", "_bw"), ("latency", "_lat")):
        for op in OPS:
            p("  %-10s %s | %s" % (op + suffix, *(
                " ".join(show(v, 8, 2).strip() for v in b[kind][group][op].get("samples", []))
                or "-" for kind in ("rxe", "ferroce"))))
    p("")
    p("latency percentiles (usec, 2 B):")
    p("  %-6s %-8s %s" % ("op", "device", " ".join("%10s" % l for _, l in LAT_STATS)))
    for op in OPS:
        for kind in ("rxe", "ferroce"):
            L = b[kind]["latency"][op]
            p("  %-6s %-8s %s" % (op, kind, " ".join(show(L.get(k)) for k, _ in LAT_STATS)))
    p("")
    p("ib_write_bw -a (MiB/s; BW average, up to 8 KiB MsgRate x size):")
    p("  %10s %10s %10s %12s" % ("bytes", "rxe", "ferroce", "ferroce/rxe"))
    for i, size in enumerate(SWEEP_SIZES):
        a = b["rxe"]["sweep"]["points"][i].get("bw")
        c = b["ferroce"]["sweep"]["points"][i].get("bw")
        p("  %10s %s %s %12s" % (size_label(size), show(a), show(c), xratio(ratio(a, c))))
    p("")
    p("ferroce QP scaling (ib_write_bw -q N -s 65536, MiB/s):")
    p("  " + "  ".join("%d QP: %s" % (q["qps"], show(q.get("bw_average"), 0)) for q in
                       b["ferroce"]["qp_scaling"]))
    p("ferroce device counters over the tests (vm1 + vm2): retransmits %s, timeouts %s, "
      "RNR NAKs received %s, credit waits %s, credit updates %s, keep-alives %s"
      % (show(b["ferroce"]["retransmits"], 0), show(b["ferroce"]["timeouts"], 0),
         show(b["ferroce"]["rnr_naks"], 0), show(b["ferroce"].get("credit_waits"), 0),
         show(b["ferroce"].get("credit_updates"), 0),
         show(b["ferroce"].get("credit_keepalives"), 0)))
    lk = b["ferroce"]["device_lock"]
    p("ferroce device lock over the tests (vm1 + vm2): taken %s times, %s of them after "
      "waiting, %s us of waiting" % (show(lk["taken"], 0), show(lk["contended"], 0),
                                     show(lk["wait_us"], 0)))
    w = b["ferroce"]["wire"]
    p("ferroce wire over the tests (vm1 + vm2): %s frames received in %s reads, %s sent in "
      "%s writes" % (show(w["wire_rx"], 0), show(w["wire_rx_reads"], 0),
                     show(w["wire_tx"], 0), show(w["wire_tx_writes"], 0)))
    if b["missing"]:
        p("")
        p("missing or failed (null in bench.json):")
        for m in b["missing"]:
            p("  %s: %s" % (m["what"], m["why"]))
    for kind in ("rxe", "ferroce"):
        for vm, lines in b["checks"][kind]["not_ok"].items():
            for l in lines[:10]:
                p("  %s %s: %s" % (kind, vm, l[:200]))
    return "\n".join(out)


def pair(rxe_dir, fer_dir, prefix):
    """One side-by-side pair of runs: {"rxe", "ferroce", "ratios",
    "checks"} and the list of what is missing (each "what" led by
    PREFIX)."""
    runs = {"rxe": Run("rxe", rxe_dir), "ferroce": Run("ferroce", fer_dir)}
    for run in runs.values():
        # A scenario that never got as far as its run directory: every
        # one of its numbers is missing, and says why.
        if not os.path.isdir(run.path):
            run.missing.append((run.kind, "no run directory %s" % run.path))
    b = {}
    for kind, run in runs.items():
        b[kind] = collect(run)
        b[kind]["guest_kernel"] = run.guest_kernel()
        b[kind]["vm"] = run.vm_config()
        b[kind]["iterations"] = {k: num(run.notes[CLIENT][n]) if n in run.notes[CLIENT] else None
                                 for k, n in (("bw", "bench_bw_iters"), ("lat", "bench_lat_iters"),
                                              ("sweep", "bench_sweep_iters"))}
    collect_ferroce(runs["ferroce"], b["ferroce"])
    b["ratios"] = {}
    for k in ("write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat"):
        b["ratios"][k] = ratio(b["rxe"][k], b["ferroce"][k])
    missing = []
    for run in runs.values():
        missing += [{"what": prefix + w, "why": y} for w, y in run.missing]
    b["checks"] = {k: {"not_ok": {vm: l for vm, l in run.not_ok.items() if l},
                       "exit_codes": run.exit_codes} for k, run in runs.items()}
    for k, v in b["ratios"].items():
        if v is None:
            missing.append({"what": prefix + "ratios." + k,
                            "why": "rxe or ferroce %s missing (or rxe's is 0)" % k})
    return b, missing


def main(argv):
    if len(argv) not in (5, 7):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    out, plot_root = argv[-2:]
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).astimezone()

    b = {"date": now.isoformat(timespec="seconds"), "machine": machine(), "host": host(out)}
    b["_subtitle"] = now.strftime("%Y-%m-%d")
    main_pair, missing = pair(argv[1], argv[2], "")
    b.update(main_pair)
    if b["host"] is None:
        missing.append({"what": "host", "why": "no host.json (the wake-up benchmark did not run)"})
    if len(argv) == 7:
        b["jumbo"], jm = pair(argv[3], argv[4], "jumbo.")
        missing += jm
    b["units"] = {"*_bw": "MiB/s: perftest BW average, 64 KiB messages, RC; the median of "
                          "\"repetitions\" runs (bandwidth.OP.samples, in the order run)",
                  "*_lat": "usec: perftest t_typical, 2-byte messages, RC; the median of "
                           "\"repetitions\" runs (latency.OP.samples), whose percentiles "
                           "latency.OP holds",
                  "latency.*": "usec", "qp_scaling": "MiB/s (BW average, all QPs together)",
                  "sweep": "MiB/s: bw_average as perftest printed it (2 decimals); bw, used in the "
                           "chart and the table, is MsgRate x size for messages up to 8 KiB (MsgRate "
                           "has 6 decimals, the same measurement), else bw_average",
                  "eth_mtu, active_mtu": "the client's netdev MTU and its RDMA port's active IB MTU"}
    b["notes"] = ("ratios are ferroce/rxe for every metric. Bandwidth: higher is better, a ratio > 1 "
                  "means ferroce is faster. Latency: lower is better, a ratio < 1 means ferroce is "
                  "faster. Both devices run in TCG guests on this one machine (rxe in the guest "
                  "kernel, ferroce's data path in its device process on the host), one scenario run "
                  "each; the bandwidth and latency numbers are the medians of its interleaved "
                  "repetitions (\"repetitions\"), the sweep and QP scaling one measurement "
                  "each: only the rough ratio means anything. Bandwidth iterations differ per "
                  "device (at most a few seconds of transfer each); latency and the sweep use the same counts. "
                  "Where each VM's vCPU and device process ran is rxe.vm.placement and "
                  "ferroce.vm.placement: make bench pins each VM's vCPU to a CPU of its "
                  "own, the client vm2's to the first, and both "
                  "ferroce device processes to the client's CPU at SCHED_FIFO 1 (BENCH_PIN=0: "
                  "nothing is pinned). "
                  "The top level ran at MTU 1500 (IB MTU 1024); \"jumbo\", when present, is the "
                  "same benchmark at MTU 9000 (IB MTU 4096).")

    charts = {}
    for name, fn in (("bw-vs-size", chart_bw), ("latency", chart_lat), ("qp-scaling", chart_qp)):
        dat, gp, has_data = fn(b)
        with open(os.path.join(out, name + ".dat"), "w") as f:
            f.write(dat)
        with open(os.path.join(out, name + ".gp"), "w") as f:
            f.write(gp)
        why = draw(out, plot_root, name)
        charts[name] = {"svg": os.path.join(out, name + ".svg") if why is None else None,
                        "has_data": has_data, "error": why}
        if why:
            missing.append({"what": "chart " + name, "why": why})
        elif not has_data:
            missing.append({"what": "chart " + name, "why": "drawn without data (every point missing)"})
    b["charts"] = charts
    b["missing"] = missing
    subtitle = b.pop("_subtitle")
    with open(os.path.join(out, "bench.json.tmp"), "w") as f:
        json.dump(b, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(out, "bench.json.tmp"), os.path.join(out, "bench.json"))
    b["_subtitle"] = subtitle
    print(table(b))
    if "jumbo" in b:
        j = dict(b["jumbo"], machine=b["machine"], missing=[], _subtitle=subtitle + ", MTU 9000",
                 _title="jumbo frames")
        print()
        print(table(j))
    rc = 0
    if any(c["error"] for c in charts.values()):
        rc = 4
    if any(v is None for p in [b] + ([b["jumbo"]] if "jumbo" in b else []) for v in p["ratios"].values()):
        rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
