#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Open a uverbs device with the kernel's write() ABI, without rdma-core
(no userspace provider is needed): GET_CONTEXT, ALLOC_PD, DEALLOC_PD.
Prints "num_comp_vectors N" and exits 0 when all three succeed.

usage: uverbs-ctx.py /dev/infiniband/uverbsN
"""
import ctypes
import os
import struct
import sys

# include/uapi/rdma/ib_user_verbs.h
IB_USER_VERBS_CMD_GET_CONTEXT = 0
IB_USER_VERBS_CMD_ALLOC_PD = 3
IB_USER_VERBS_CMD_DEALLOC_PD = 4


def command(fd, op, body_after_resp, out_words, resp_ptr=True):
    resp = ctypes.create_string_buffer(max(out_words * 4, 8))
    body = (struct.pack("<Q", ctypes.addressof(resp)) if resp_ptr else b"") + body_after_resp
    hdr = struct.pack("<IHH", op, (8 + len(body)) // 4, out_words)
    os.write(fd, hdr + body)
    return resp.raw[: out_words * 4]


def main():
    fd = os.open(sys.argv[1], os.O_RDWR)
    r = command(fd, IB_USER_VERBS_CMD_GET_CONTEXT, b"", 2)
    _async_fd, ncomp = struct.unpack("<II", r)
    print(f"num_comp_vectors {ncomp}")
    (pd,) = struct.unpack("<I", command(fd, IB_USER_VERBS_CMD_ALLOC_PD, b"", 1))
    print(f"pd handle {pd}")
    command(fd, IB_USER_VERBS_CMD_DEALLOC_PD, struct.pack("<II", pd, 0), 0, resp_ptr=False)
    os.close(fd)


if __name__ == "__main__":
    main()
