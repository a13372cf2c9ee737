#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Independent look at the RoCE frames of a wire capture (the device's
--pcap; classic pcap, Ethernet).  Standard library only, so that it runs in
the trixie root on the host (the scenarios' check() hooks) or in a guest.

For every RoCE frame -- v2 (UDP destination port 4791 over IPv4 or IPv6) or
v1 (Ethertype 0x8915), untagged or in one 802.1Q tag (counted per VLAN ID
and priority) -- it recomputes the ICRC (IBTA vol. 1 7.8.1 and annex A17:
CRC32 over 8 bytes of ones, the IP/GRH header with its variant fields set to
ones, UDP with checksum ones, the BTH with resv8a ones, and the rest
up to the ICRC) and compares it with the frame's; tshark dissects RoCE but
does not verify ICRCs.  The computation is checked against
device/ferroce-dev/tests/data/roce-frames.pcap, whose ICRCs were
recomputed by scapy (see that directory's README).

A frame the capture truncated (a record shorter than the frame: the
device's --pcap keeps only the headers of long frames once it has recorded
its budget of whole ones) is counted, by flow and opcode, but its ICRC
cannot be checked: "icrc_unchecked N" says how many.

MADs (UD SEND to QP 1, the GSI QP) are decoded too: counts per management
class and attribute, and for the communication manager (class 0x07) the
connections seen through: a REQ answered by a REP (whose remote
communication ID is the REQ's local one) and that REP by an RTU, and SIDR
REQs answered by a SIDR REP with status 0.  Every MAD to QP 1 must be 256
bytes with the GSI Q_Key 0x80010000 in its DETH.

usage: roce-wire.py PCAP [--min N] [--src A.B.C.D]... [--show N]
                    [--cm-min N] [--sidr-min N]
Prints counts per (source, destination, RoCE version) and per BTH opcode,
"uc SRC N" for each source of UC frames (opcodes 0x20-0x2b), then
"roce_frames N", "icrc_bad N", "icrc_unchecked N", the MAD counts,
"cm_handshakes N", "sidr_exchanges N"; exits 0 when there are at least N
(default 1) RoCE frames, some ICRCs were checked and every one checked is
right, every --src address sent at least one RoCE frame, every MAD to QP 1
is well formed and there are at least --cm-min complete REQ/REP/RTU
handshakes and --sidr-min SIDR exchanges (default 0).
"""
import argparse
import collections
import ipaddress
import struct
import sys
import zlib

ROCE_V2_PORT = 4791
OPCODES = {
    0: "SEND_FIRST", 1: "SEND_MIDDLE", 2: "SEND_LAST", 3: "SEND_LAST_IMM",
    4: "SEND_ONLY", 5: "SEND_ONLY_IMM", 6: "WRITE_FIRST", 7: "WRITE_MIDDLE",
    8: "WRITE_LAST", 9: "WRITE_LAST_IMM", 10: "WRITE_ONLY", 11: "WRITE_ONLY_IMM",
    12: "READ_REQUEST", 13: "READ_RESPONSE_FIRST", 14: "READ_RESPONSE_MIDDLE",
    15: "READ_RESPONSE_LAST", 16: "READ_RESPONSE_ONLY", 17: "ACKNOWLEDGE",
    18: "ATOMIC_ACKNOWLEDGE", 19: "CMP_SWAP", 20: "FETCH_ADD",
    22: "SEND_LAST_INV", 23: "SEND_ONLY_INV",
    0x20: "UC_SEND_FIRST", 0x21: "UC_SEND_MIDDLE", 0x22: "UC_SEND_LAST",
    0x23: "UC_SEND_LAST_IMM", 0x24: "UC_SEND_ONLY", 0x25: "UC_SEND_ONLY_IMM",
    0x26: "UC_WRITE_FIRST", 0x27: "UC_WRITE_MIDDLE", 0x28: "UC_WRITE_LAST",
    0x29: "UC_WRITE_LAST_IMM", 0x2a: "UC_WRITE_ONLY", 0x2b: "UC_WRITE_ONLY_IMM",
    0x64: "UD_SEND_ONLY", 0x65: "UD_SEND_ONLY_IMM",
}
UD_SEND_ONLY = 0x64
GSI_QKEY = 0x80010000
MAD_SIZE = 256
MGMT_CLASSES = {0x01: "SM", 0x03: "SA", 0x04: "PerfMgmt", 0x07: "CM"}
CM_ATTRS = {
    0x0001: "ClassPortInfo", 0x0010: "REQ", 0x0011: "MRA", 0x0012: "REJ",
    0x0013: "REP", 0x0014: "RTU", 0x0015: "DREQ", 0x0016: "DREP",
    0x0017: "SIDR_REQ", 0x0018: "SIDR_REP", 0x0019: "LAP", 0x001A: "APR",
}


class Mads:
    """The MADs of a capture (UD SEND_ONLY to QP 1) and the CM exchanges."""

    def __init__(self):
        self.count = collections.Counter()
        self.bad = []
        self.req = set()    # (requester, local comm ID)
        self.rep = {}       # (requester, REQ's comm ID) -> REP's local comm ID
        self.rtu = set()    # (requester, local comm ID, remote comm ID)
        self.sidr_req = set()  # (requester, request ID)
        self.sidr_rep = set()  # (requester, request ID) with status 0

    def add(self, n, fr, bth, src, dst):
        if fr[bth] != UD_SEND_ONLY or int.from_bytes(fr[bth + 5:bth + 8], "big") != 1:
            return
        pad = (fr[bth + 1] >> 4) & 3
        qkey = int.from_bytes(fr[bth + 12:bth + 16], "big")
        mad = fr[bth + 20:len(fr) - 4 - pad]
        if len(mad) != MAD_SIZE or qkey != GSI_QKEY:
            self.bad.append(f"frame {n}: MAD to QP 1 of {len(mad)} bytes, Q_Key {qkey:#x}")
            return
        cls = mad[1]
        attr = int.from_bytes(mad[16:18], "big")
        if cls != 0x07:
            self.count[(MGMT_CLASSES.get(cls, f"class{cls:#x}"), f"{attr:#06x}")] += 1
            return
        name = CM_ATTRS.get(attr, f"{attr:#06x}")
        self.count[("CM", name)] += 1
        ids = (int.from_bytes(mad[24:28], "big"), int.from_bytes(mad[28:32], "big"))
        if name == "REQ":
            self.req.add((src, ids[0]))
        elif name == "REP":
            self.rep[(dst, ids[1])] = ids[0]
        elif name == "RTU":
            self.rtu.add((src, ids[0], ids[1]))
        elif name == "SIDR_REQ":
            self.sidr_req.add((src, ids[0]))
        elif name == "SIDR_REP" and mad[28] == 0:
            self.sidr_rep.add((dst, ids[0]))

    def handshakes(self):
        return sum(1 for (a, x) in self.req
                   if (a, x) in self.rep and (a, x, self.rep[(a, x)]) in self.rtu)

    def sidr(self):
        return len(self.sidr_req & self.sidr_rep)


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        e = ">"
    else:
        raise SystemExit(f"{path}: not a classic pcap file")
    if struct.unpack(e + "I", data[20:24])[0] != 1:
        raise SystemExit(f"{path}: not an Ethernet capture")
    off = 24
    while off + 16 <= len(data):
        incl, orig = struct.unpack(e + "II", data[off + 8:off + 16])
        yield data[off + 16:off + 16 + incl], orig > incl
        off += 16 + incl


def classify(fr):
    """(version, src, dst, bth offset, pseudo-header bytes) or None."""
    if len(fr) < 14:
        return None
    etype = struct.unpack(">H", fr[12:14])[0]
    if etype == 0x0800 and len(fr) >= 34:
        ihl = (fr[14] & 0x0F) * 4
        if fr[23] != 17 or len(fr) < 14 + ihl + 8 + 12 + 4:
            return None
        udp = 14 + ihl
        if struct.unpack(">H", fr[udp + 2:udp + 4])[0] != ROCE_V2_PORT:
            return None
        ip = bytearray(fr[14:udp])
        ip[1] = 0xFF  # TOS
        ip[8] = 0xFF  # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
        u = bytearray(fr[udp:udp + 8])
        u[6:8] = b"\xff\xff"
        return ("v2", str(ipaddress.IPv4Address(fr[26:30])),
                str(ipaddress.IPv4Address(fr[30:34])), udp + 8, bytes(ip + u))
    if etype == 0x86DD and len(fr) >= 54 + 8 + 12 + 4:
        if fr[20] != 17:
            return None
        if struct.unpack(">H", fr[56:58])[0] != ROCE_V2_PORT:
            return None
        ip = bytearray(fr[14:54])
        ip[0] |= 0x0F  # traffic class, flow label
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF  # hop limit
        u = bytearray(fr[54:62])
        u[6:8] = b"\xff\xff"
        return ("v2", str(ipaddress.IPv6Address(fr[22:38])),
                str(ipaddress.IPv6Address(fr[38:54])), 62, bytes(ip + u))
    if etype == 0x8915 and len(fr) >= 54 + 12 + 4:
        grh = bytearray(fr[14:54])
        grh[0] |= 0x0F
        grh[1:4] = b"\xff\xff\xff"
        grh[7] = 0xFF
        return ("v1", str(ipaddress.IPv6Address(fr[22:38])),
                str(ipaddress.IPv6Address(fr[38:54])), 54, bytes(grh))
    return None


def icrc_ok(fr, bth, pseudo):
    rest = bytearray(fr[bth:-4])
    rest[4] = 0xFF  # BTH resv8a
    mine = zlib.crc32(b"\xff" * 8 + pseudo + bytes(rest)) & 0xFFFFFFFF
    return mine.to_bytes(4, "little") == fr[-4:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--show", type=int, default=0, help="list the first N bad frames")
    ap.add_argument("--cm-min", type=int, default=0,
                    help="need N complete CM REQ/REP/RTU handshakes")
    ap.add_argument("--sidr-min", type=int, default=0,
                    help="need N SIDR REQ/REP exchanges (status 0)")
    a = ap.parse_args()
    mads = Mads()
    flows = collections.Counter()
    ops = collections.Counter()
    uc_from = collections.Counter()
    tags = collections.Counter()
    total = bad = unchecked = 0
    for n, (fr, cut) in enumerate(frames(a.pcap), 1):
        # One 802.1Q tag is looked through; the ICRC does not cover it.
        tag = None
        if len(fr) >= 18 and fr[12:14] == b"\x81\x00":
            tci = struct.unpack(">H", fr[14:16])[0]
            tag = (tci & 0x0FFF, tci >> 13)
            fr = fr[:12] + fr[16:]
        c = classify(fr)
        if c is None:
            continue
        ver, src, dst, bth, pseudo = c
        total += 1
        if tag:
            tags[(src, tag)] += 1
        flows[(src, dst, ver)] += 1
        ops[OPCODES.get(fr[bth], f"0x{fr[bth]:02x}")] += 1
        if 0x20 <= fr[bth] <= 0x2b:
            uc_from[src] += 1
        if cut:
            # Neither its ICRC nor a MAD in it can be read (the device's
            # capture cuts only frames longer than any MAD).
            unchecked += 1
            continue
        mads.add(n, fr, bth, src, dst)
        if not icrc_ok(fr, bth, pseudo):
            bad += 1
            if bad <= a.show:
                print(f"frame {n}: ICRC mismatch ({src} -> {dst}, opcode {fr[bth]:#x})")
    for (src, dst, ver), k in sorted(flows.items()):
        print(f"roce {ver} {src} -> {dst}: {k}")
    print("opcodes " + " ".join(f"{o}={k}" for o, k in sorted(ops.items())))
    for src, k in sorted(uc_from.items()):
        print(f"uc {src}: {k}")
    print(f"roce_frames {total}")
    for (src, (vid, pcp)), k in sorted(tags.items()):
        print(f"vlan {vid} pcp {pcp} from {src}: {k}")
    print(f"icrc_bad {bad}")
    print(f"icrc_unchecked {unchecked}")
    for line in mads.bad[:a.show]:
        print(line)
    print("mads " + " ".join(f"{c}.{t}={k}" for (c, t), k in sorted(mads.count.items())))
    print(f"mad_bad {len(mads.bad)}")
    print(f"cm_handshakes {mads.handshakes()}")
    print(f"sidr_exchanges {mads.sidr()}")
    # Some ICRCs must have been checked: a capture of cut frames only
    # shows nothing of them.
    good = total >= a.min and bad == 0 and not mads.bad and total > unchecked
    good &= mads.handshakes() >= a.cm_min and mads.sidr() >= a.sidr_min
    for s in a.src:
        k = sum(v for (src, _, _), v in flows.items() if src == s)
        print(f"roce_frames_from {s} {k}")
        good &= k > 0
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
