#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Independent ICRC check of roce-frames.pcap (not run by cargo test).

RoCE v2 frames: scapy's own RoCE layer (scapy.contrib.roce, BTH.compute_icrc)
recomputes the ICRC. RoCE v1 frames (Ethertype 0x8915, which scapy cannot
checksum): zlib's CRC32 over 8 bytes of 0xff (masked LRH) + the GRH with
traffic class, flow label and hop limit set to ones + the BTH with resv8a
set to ones + the rest, as IBTA vol. 1 section 7.8.1 defines it.
Prints one line per frame: index, kind, ICRC on the wire, recomputed, verdict.
"""
import sys
import zlib

from scapy.all import Ether, rdpcap, raw
from scapy.contrib.roce import BTH

ok = True
for i, p in enumerate(rdpcap(sys.argv[1])):
    b = raw(p)
    wire = b[-4:]
    if p.type == 0x8915:
        grh = bytearray(b[14:54])
        grh[0] |= 0x0F
        grh[1:4] = b"\xff\xff\xff"
        grh[7] = 0xFF
        rest = bytearray(b[54:-4])
        rest[4] = 0xFF
        mine = (zlib.crc32(b"\xff" * 8 + bytes(grh) + bytes(rest)) & 0xFFFFFFFF).to_bytes(4, "little")
        kind = "v1"
    elif BTH in p:
        q = Ether(b)
        q[BTH].icrc = None
        mine = raw(q)[-4:]
        kind = "v2"
    else:
        print(i + 1, "not RoCE")
        ok = False
        continue
    good = mine == wire
    ok &= good
    print(f"{i + 1:2} {kind} icrc 0x{wire.hex()} recomputed 0x{mine.hex()} {'OK' if good else 'BAD'}")
sys.exit(0 if ok else 1)
