#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Does the kernel report the driver id that libferroce matches?

Asks RDMA netlink for the uverbs char device of an RDMA device
(RDMA_NLDEV_CMD_GET_CHARDEV, as libibverbs does when it enumerates devices)
and compares its RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID with RDMA_DRIVER_FERROCE's
value in the ib_user_ioctl_verbs.h libferroce was compiled with.
Prints both; exits 0 only when they are equal.

usage: uverbs-driver-id.py IBDEV HEADER
"""
import json
import re
import socket
import struct
import subprocess
import sys

# include/uapi/rdma/rdma_netlink.h
NETLINK_RDMA = 20
RDMA_NL_NLDEV = 5
RDMA_NLDEV_CMD_GET_CHARDEV = 15
RDMA_NLDEV_ATTR_DEV_INDEX = 1
RDMA_NLDEV_ATTR_CHARDEV_TYPE = 69
RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID = 73
NLM_F_REQUEST = 1
NLMSG_ERROR = 2


def attr(kind, payload):
    a = struct.pack("<HH", 4 + len(payload), kind) + payload
    return a + b"\0" * (-len(a) % 4)


def kernel_driver_id(ibdev):
    index = json.loads(subprocess.check_output(["rdma", "-j", "dev", "show", ibdev]))[0]["ifindex"]
    body = attr(RDMA_NLDEV_ATTR_DEV_INDEX, struct.pack("<I", index))
    body += attr(RDMA_NLDEV_ATTR_CHARDEV_TYPE, b"uverbs\0")
    kind = (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_GET_CHARDEV
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA)
    s.send(struct.pack("<IHHII", 16 + len(body), kind, NLM_F_REQUEST, 1, 0) + body)
    msg = s.recv(65536)
    length, mtype = struct.unpack_from("<IH", msg)
    if mtype == NLMSG_ERROR:
        sys.exit(f"netlink error {struct.unpack_from('<i', msg, 16)[0]}")
    off = 16
    while off + 4 <= length:
        alen, akind = struct.unpack_from("<HH", msg, off)
        if akind & 0x3FFF == RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
            return struct.unpack_from("<I", msg, off + 4)[0]
        off += (alen + 3) & ~3
    sys.exit("no RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID in the reply")


def header_driver_id(path):
    body = re.search(r"enum rdma_driver_id \{(.*?)\};", open(path).read(), re.S).group(1)
    values, value = {}, -1
    for entry in body.split(","):
        name, _, init = (part.strip() for part in entry.partition("="))
        if name:
            # An initializer is a number or an earlier entry (an alias).
            value = (values[init] if init in values else int(init, 0)) if init else value + 1
            values[name] = value
    if "RDMA_DRIVER_FERROCE" not in values:
        sys.exit(f"no RDMA_DRIVER_FERROCE in {path}")
    return values["RDMA_DRIVER_FERROCE"]


def main():
    got = kernel_driver_id(sys.argv[1])
    want = header_driver_id(sys.argv[2])
    print(f"uverbs driver_id {got}, RDMA_DRIVER_FERROCE {want}")
    sys.exit(0 if got == want else 1)


if __name__ == "__main__":
    main()
