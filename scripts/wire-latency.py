#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the time of a ferroce latency test goes, from the devices' captures.

Usage: wire-latency.py RUN_DIR

Reads RUN_DIR/vm1 and vm2's wire.pcap (ferroce-dev --pcap: every frame the
device sends or receives, stamped by the device when it sends or receives
it) and ferroce-dev.cmd (for each device's --mac), and splits the round
trips of perftest's RC latency tests (ib_write_lat, ib_send_lat,
ib_read_lat: one message in flight at a time) at the devices:

  write, send  "answer": from a peer's request arriving at a device to that
               device's next request leaving it (the device takes the
               frame, the guest sees it and posts, the doorbell traps,
               the device sends); "away": from a device's request leaving
               to the peer's next request arriving (the wire both ways
               and the peer's answer), so away - the peer's answer is
               the wire there and back
  read         "request to response" (the wire both ways and the peer's
               device, no peer guest) and "response to next request"
               (the device writes the data and the CQE, the guest polls
               the CQ and posts, the doorbell traps, the device sends)

Prints the median, 10th and 90th percentile of each, in microseconds (the
capture's resolution is 1 us).  Take the capture from a run made for it,
"BENCH_PCAP=1 qemu-test/run bench-ferroce" (make bench takes none: writing
the capture costs the devices time on every frame).  The run's three
repetitions of each latency test are taken together.
"""

import os
import re
import statistics
import struct
import sys

RDMA_WRITE_ONLY = 0x0A
SEND_ONLY = 0x04
READ_REQUEST = 0x0C
READ_RESPONSE_ONLY = 0x10
ROCE_V2_PORT = 4791


def frames(path):
    """(timestamp in us, frame) of a classic little-endian pcap."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\xd4\xc3\xb2\xa1":
        raise ValueError("%s: not a little-endian classic pcap" % path)
    off = 24
    while off + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, off)
        yield sec * 1000000 + usec, data[off + 16:off + 16 + incl]
        off += 16 + incl


def bth_opcode(f):
    """The BTH opcode of a RoCE v1 or v2 frame (one 802.1Q tag at most);
    None for any other frame, a truncated one included."""
    try:
        return _bth_opcode(f)
    except (IndexError, struct.error):
        return None


def _bth_opcode(f):
    off, etype = 14, f[12:14]
    if etype == b"\x81\x00":
        off, etype = 18, f[16:18]
    if etype == b"\x89\x15":  # RoCE v1: GRH, then BTH
        return f[off + 40]
    if etype == b"\x08\x00":  # RoCE v2 over IPv4
        proto, ip_len = f[off + 9], (f[off] & 0x0F) * 4
    elif etype == b"\x86\xdd":  # RoCE v2 over IPv6
        proto, ip_len = f[off + 6], 40
    else:
        return None
    off += ip_len
    if proto != 17 or struct.unpack_from(">H", f, off + 2)[0] != ROCE_V2_PORT:
        return None
    off += 8
    return f[off]


def events(vm_dir):
    with open(os.path.join(vm_dir, "ferroce-dev.cmd")) as f:
        m = re.search(r"--mac ([0-9a-fA-F:]{17})", f.read())
    if not m:
        raise ValueError("%s: no --mac in ferroce-dev.cmd" % vm_dir)
    mac = bytes(int(x, 16) for x in m.group(1).split(":"))
    out = []
    for t, f in frames(os.path.join(vm_dir, "wire.pcap")):
        op = bth_opcode(f)
        if op is not None:
            out.append((t, f[6:12] == mac, op))
    return out


def gaps(ev, first, second):
    """Times from each (sent, opcode) `first` to the next `second`."""
    res, start = [], None
    for t, sent, op in ev:
        if (sent, op) == first:
            start = t
        elif (sent, op) == second and start is not None:
            res.append(t - start)
            start = None
    return res


def summary(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return {"n": len(xs), "median": statistics.median(xs),
            "p10": xs[len(xs) // 10], "p90": xs[(len(xs) * 9) // 10]}


def show(name, s):
    if s:
        print("  %-26s %7.1f  (p10 %d, p90 %d, %d samples)"
              % (name, s["median"], s["p10"], s["p90"], s["n"]))
    else:
        print("  %-26s     n/a" % name)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    run = sys.argv[1]
    ev = {vm: events(os.path.join(run, vm)) for vm in ("vm1", "vm2")}
    for vm, peer in (("vm1", "vm2"), ("vm2", "vm1")):
        print("%s (us):" % vm)
        for name, op in (("write", RDMA_WRITE_ONLY), ("send", SEND_ONLY)):
            answer = summary(gaps(ev[vm], (False, op), (True, op)))
            away = summary(gaps(ev[vm], (True, op), (False, op)))
            peer_answer = summary(gaps(ev[peer], (False, op), (True, op)))
            show("%s: answer" % name, answer)
            show("%s: away" % name, away)
            if away and peer_answer:
                print("  %-26s %7.1f" % ("%s: wire there and back" % name,
                                         away["median"] - peer_answer["median"]))
        show("read: request to response",
             summary(gaps(ev[vm], (True, READ_REQUEST), (False, READ_RESPONSE_ONLY))))
        show("read: response to next",
             summary(gaps(ev[vm], (False, READ_RESPONSE_ONLY), (True, READ_REQUEST))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
