#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ibv_create_cq(ctx, max_cqe) through the provider must succeed and give a
CQ of at least max_cqe entries; max_cqe + 1 must fail. Usage: cq-max.py DEV.
Prints TAP-like lines; exits 1 if any check failed."""
import ctypes
import sys

lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_get_device_name.restype = ctypes.c_char_p
lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
lib.ibv_open_device.restype = ctypes.c_void_p
lib.ibv_open_device.argtypes = [ctypes.c_void_p]
lib.ibv_query_device.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.ibv_create_cq.restype = ctypes.c_void_p
lib.ibv_create_cq.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_int]
lib.ibv_destroy_cq.argtypes = [ctypes.c_void_p]
lib.ibv_close_device.argtypes = [ctypes.c_void_p]

# struct ibv_device_attr: fw_ver[64], 4 u64, vendor_id, vendor_part_id,
# hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq,
# max_cqe (offset 132).
MAX_CQE_OFF = 132
# struct ibv_cq: context (ptr), channel (ptr), cq_context (ptr), handle u32,
# cqe int (offset 28).
CQ_CQE_OFF = 28

fails = 0


def check(name, cond):
    global fails
    print(("ok - " if cond else "not ok - ") + name)
    fails += 0 if cond else 1


def main():
    n = ctypes.c_int()
    devs = lib.ibv_get_device_list(ctypes.byref(n))
    dev = next((devs[i] for i in range(n.value)
                if lib.ibv_get_device_name(devs[i]).decode() == sys.argv[1]), None)
    if dev is None:
        check(f"{sys.argv[1]} found by libibverbs", False)
        return
    ctx = lib.ibv_open_device(dev)
    check(f"ibv_open_device({sys.argv[1]})", bool(ctx))
    if not ctx:
        return
    attr = ctypes.create_string_buffer(1024)
    check("ibv_query_device", lib.ibv_query_device(ctx, attr) == 0)
    max_cqe = int.from_bytes(attr.raw[MAX_CQE_OFF:MAX_CQE_OFF + 4], "little")
    print(f"# max_cqe {max_cqe}")
    cq = lib.ibv_create_cq(ctx, max_cqe, None, None, 0)
    err = ctypes.get_errno()
    check(f"ibv_create_cq(ctx, max_cqe = {max_cqe}) succeeds (errno {0 if cq else err})",
          bool(cq))
    if cq:
        got = ctypes.c_int.from_address(cq + CQ_CQE_OFF).value
        check(f"the CQ holds >= max_cqe entries ({got})", got >= max_cqe)
        check("ibv_destroy_cq", lib.ibv_destroy_cq(cq) == 0)
    cq = lib.ibv_create_cq(ctx, max_cqe + 1, None, None, 0)
    check(f"ibv_create_cq(ctx, max_cqe + 1) fails", not cq)
    if cq:
        lib.ibv_destroy_cq(cq)
    lib.ibv_close_device(ctx)


main()
sys.exit(1 if fails else 0)
