#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compare ib_core's GID table of an RDMA device (sysfs) with the device's
own hardware GID table (the JSON answer of `ferroce-dev ctl gids`).

usage: gid-table.py IBDEV DEVICE_GIDS_JSON [--show]
Every valid sysfs entry must exist in the hardware table at the same index
with the same GID, type, network type (v1 / v2 over IPv4 / v2 over IPv6) and
the netdev's current MAC as source MAC, and the hardware table must hold
nothing else.  Prints the differences; exits 1 if there are any.
"""
import ipaddress
import json
import os
import sys

TYPES = {"IB/RoCE v1": 0, "RoCE v2": 1}  # FERROCE_GID_TYPE_*


def sysfs_table(ibdev, count=16):
    port = f"/sys/class/infiniband/{ibdev}/ports/1"
    table = {}
    for i in range(count):
        try:
            with open(f"{port}/gids/{i}") as f:
                gid = ipaddress.IPv6Address(f.read().strip())
            with open(f"{port}/gid_attrs/types/{i}") as f:
                gtype = f.read().strip()
            with open(f"{port}/gid_attrs/ndevs/{i}") as f:
                ndev = f.read().strip()
        except OSError:
            continue  # empty entries have no attributes
        if gid == ipaddress.IPv6Address("::"):
            continue
        table[i] = (gid, gtype, ndev)
    return table


def network_type(gid, gtype):
    if gtype == "IB/RoCE v1":
        return 0
    return 1 if gid.ipv4_mapped is not None else 2


def main():
    ibdev, dump = sys.argv[1], sys.argv[2]
    with open(dump) as f:
        hw = {e["index"]: e for e in json.load(f)}
    sw = sysfs_table(ibdev)
    bad = 0
    for i, (gid, gtype, ndev) in sorted(sw.items()):
        print(f"# ib_core {i}: {gid} {gtype} {ndev}")
        with open(f"/sys/class/net/{ndev}/address") as f:
            mac = f.read().strip()
        e = hw.get(i)
        want = (str(gid), TYPES.get(gtype), network_type(gid, gtype), mac)
        got = e and (str(ipaddress.IPv6Address(e["gid"])), e["gid_type"], e["network_type"], e["smac"])
        if got != want:
            print(f"mismatch at {i}: ib_core {want} device {got}")
            bad = 1
    for i in sorted(set(hw) - set(sw)):
        print(f"device has an entry ib_core does not: {i} {hw[i]}")
        bad = 1
    print(f"# {len(sw)} entries in ib_core, {len(hw)} in the device")
    return bad


if __name__ == "__main__":
    sys.exit(main())
