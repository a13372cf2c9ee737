#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Admin commands on a device that stopped answering. Usage: dead-verbs.py DEV.

Opens DEV (no admin command), then calls ibv_alloc_pd (an ALLOC_PD admin
command) twice and closes the device. For each call prints one line
"NAME errno=E seconds=S" (errno 0: it succeeded, and the PD is freed
again); the caller judges them: on a stalled device the first call should
fail after the driver's command timeout, the second at once."""
import ctypes
import sys
import time

START = time.monotonic()
# A first line at once: when the caller's time limit ends the run, it tells
# a slow start (the debug kernel under load) from a command that hung.
print("started", flush=True)
lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_get_device_name.restype = ctypes.c_char_p
lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
lib.ibv_open_device.restype = ctypes.c_void_p
lib.ibv_open_device.argtypes = [ctypes.c_void_p]
lib.ibv_alloc_pd.restype = ctypes.c_void_p
lib.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
lib.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
lib.ibv_close_device.argtypes = [ctypes.c_void_p]


def main():
    n = ctypes.c_int()
    devs = lib.ibv_get_device_list(ctypes.byref(n))
    print(f"listed {n.value} device(s) seconds={time.monotonic() - START:.2f}", flush=True)
    dev = next((devs[i] for i in range(n.value)
                if lib.ibv_get_device_name(devs[i]).decode() == sys.argv[1]), None)
    if dev is None:
        print(f"open: {sys.argv[1]} not found")
        return 1
    ctx = lib.ibv_open_device(dev)
    print(f"open errno={0 if ctx else ctypes.get_errno()}", flush=True)
    if not ctx:
        return 1
    for name in ("alloc_pd_1", "alloc_pd_2"):
        start = time.monotonic()
        pd = lib.ibv_alloc_pd(ctx)
        err = 0 if pd else ctypes.get_errno()
        print(f"{name} errno={err} seconds={time.monotonic() - start:.2f}", flush=True)
        if pd:
            print(f"{name}_dealloc rc={lib.ibv_dealloc_pd(pd)}", flush=True)
    print(f"close rc={lib.ibv_close_device(ctx)}", flush=True)
    return 0


sys.exit(main())
