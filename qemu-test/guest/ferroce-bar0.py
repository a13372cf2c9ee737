#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Guest-side handshake with a ferroce PCI function, without its driver.

Maps BAR0 through sysfs (resource0) and speaks the register protocol of
include/ferroce/ferroce-hw.h: every offset and value used here is read from
that header at run time, so this test follows the one definition of the
programming model instead of repeating it.

usage: ferroce-bar0.py SYSFS_DEVICE_DIR EXPECTED_MAC
Prints one "ok - ..." / "not ok - ..." line per check; exits with the number
of failed checks.
"""
import ctypes
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

HEADER = "/src/include/ferroce/ferroce-hw.h"

# Struct layouts come from the header too: compiled here, printed as JSON.
LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "ferroce-hw.h"
#define F(s, f) printf("\"%s.%s\": %zu,\n", #s, #f, offsetof(struct s, f))
#define S(s) printf("\"%s\": %zu,\n", #s, sizeof(struct s))
int main(void)
{
	printf("{\n");
	S(ferroce_cmd); S(ferroce_cmd_comp); S(ferroce_eqe); S(ferroce_caps);
	F(ferroce_cmd_hdr, opcode); F(ferroce_cmd_hdr, cmd_id);
	F(ferroce_cmd_query_caps, resp_addr); F(ferroce_cmd_query_caps, resp_len);
	F(ferroce_cmd_comp, cmd_id); F(ferroce_cmd_comp, status);
	F(ferroce_cmd_comp, sq_ci); F(ferroce_cmd_comp, flags);
	F(ferroce_caps, device_caps);
	printf("\"end\": 0}\n");
	return 0;
}
"""


def load_layout():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "layout.c")
        exe = os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(LAYOUT_C)
        subprocess.run(["gcc", "-I", os.path.dirname(HEADER), "-o", exe, src], check=True)
        return json.loads(subprocess.run([exe], check=True, capture_output=True).stdout)


class DmaPage:
    """One locked page of this process's memory and its guest-physical
    address (from /proc/self/pagemap): what a driver's dma_alloc_coherent
    gives it, enough for the admin rings of a depth-2 queue."""

    def __init__(self):
        self.buf = mmap.mmap(-1, 4096, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.buf.write(b"\0" * 4096)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(4096)) != 0:
            raise OSError(ctypes.get_errno(), "mlock")
        with open("/proc/self/pagemap", "rb") as f:
            f.seek((addr // 4096) * 8)
            entry = struct.unpack("<Q", f.read(8))[0]
        if not entry >> 63:
            raise RuntimeError("page not present")
        self.phys = (entry & ((1 << 55) - 1)) * 4096

    def put(self, off, data):
        self.buf[off:off + len(data)] = data

    def get(self, off, n):
        return bytes(self.buf[off:off + n])


def load_defines(path):
    """#define FERROCE_X <int> lines of the header, as a dict."""
    defs = {}
    pat = re.compile(r"^#define\s+(FERROCE_\w+)\s+(0x[0-9a-fA-F]+|\d+)\b")
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m:
                defs[m.group(1)] = int(m.group(2), 0)
    return defs


class Bar0:
    def __init__(self, devdir, size):
        fd = os.open(os.path.join(devdir, "resource0"), os.O_RDWR | os.O_SYNC)
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        # 4-byte accesses only (the spec forbids others): go through a
        # memoryview cast so each access is one 32-bit load or store.
        self.words = memoryview(self.map).cast("I")

    def read(self, off):
        return self.words[off // 4]

    def write(self, off, val):
        self.words[off // 4] = val & 0xFFFFFFFF


def main():
    devdir, mac = sys.argv[1], sys.argv[2].lower()
    d = load_defines(HEADER)
    failures = 0

    def check(name, cond, detail=""):
        nonlocal failures
        if cond:
            print(f"ok - {name}")
        else:
            failures += 1
            print(f"not ok - {name} {detail}")

    # Memory decoding on (what pci_enable_device does for a driver).
    with open(os.path.join(devdir, "enable"), "w") as f:
        f.write("1")

    def set_bus_master(on):
        """PCI COMMAND.BME, what pci_set_master / pci_clear_master do."""
        with open(os.path.join(devdir, "config"), "r+b") as f:
            f.seek(4)
            command = struct.unpack("<H", f.read(2))[0]
            command = command | 0x4 if on else command & ~0x4
            f.seek(4)
            f.write(struct.pack("<H", command))
    bar = Bar0(devdir, d["FERROCE_BAR0_SIZE"])

    magic = bar.read(d["FERROCE_REG_MAGIC"])
    check("MAGIC register", magic == d["FERROCE_MAGIC_VALUE"], f"read {magic:#x}")
    ver = bar.read(d["FERROCE_REG_VERSION"])
    major = (ver & d["FERROCE_VERSION_MAJOR_MASK"]) >> d["FERROCE_VERSION_MAJOR_SHIFT"]
    check(f"VERSION major {major} is the header's", major == d["FERROCE_VERSION_MAJOR"],
          f"read {ver:#x}")

    limit = bar.read(d["FERROCE_REG_RESET_TIMEOUT_MS"]) / 1000.0
    check("RESET_TIMEOUT_MS is the header's",
          limit == d["FERROCE_RESET_TIMEOUT_MS"] / 1000.0, f"read {limit}")

    def poll_status(done):
        start = time.monotonic()
        while True:
            status = bar.read(d["FERROCE_REG_DEV_STATUS"])
            if done(status) or time.monotonic() - start > max(limit, 1.0):
                return status, (time.monotonic() - start) * 1000
            time.sleep(0.001)

    # Bring-up as the spec's handshake describes it.  1. reset: DEV_STATUS
    # reads 0 (not READY, not RESETTING) within RESET_TIMEOUT_MS.
    bar.write(d["FERROCE_REG_DEV_CTRL"], d["FERROCE_CTRL_RESET"])
    status, took = poll_status(lambda st: st == 0)
    check(f"reset: DEV_STATUS 0 after {took:.1f} ms", status == 0, f"status {status:#x}")
    ctrl = bar.read(d["FERROCE_REG_DEV_CTRL"])
    check("RESET bit self-cleared, device not enabled", ctrl == 0, f"DEV_CTRL {ctrl:#x}")

    # 2. admin SQ/CQ and async EQ in DMA-able memory, ENABLE, READY.
    lay = load_layout()
    page = DmaPage()
    sq, cq, aeq, resp = 0, 1024, 2048, 3072
    for reg, off in (("ADMINQ_BASE", sq), ("ADMINCQ_BASE", cq), ("AEQ_BASE", aeq)):
        bar.write(d[f"FERROCE_REG_{reg}_LO"], page.phys + off)
        bar.write(d[f"FERROCE_REG_{reg}_HI"], (page.phys + off) >> 32)
    bar.write(d["FERROCE_REG_ADMINQ_DEPTH"], 4)
    bar.write(d["FERROCE_REG_AEQ_DEPTH"], 4)
    bar.write(d["FERROCE_REG_DEV_CTRL"], d["FERROCE_CTRL_ENABLE"])
    status, took = poll_status(lambda st: st & (d["FERROCE_DEV_STATUS_READY"] | d["FERROCE_DEV_STATUS_FATAL"]))
    check(f"enable: READY after {took:.1f} ms (admin rings at guest-physical {page.phys:#x})",
          status == d["FERROCE_DEV_STATUS_READY"],
          f"status {status:#x} fatal code {bar.read(d['FERROCE_REG_FATAL_CODE'])}")

    # 3. admin commands through the rings (DMA both ways, phase bit).
    def command(slot, opcode, cmd_id, body=b"", timeout=None):
        cmd = bytearray(lay["ferroce_cmd"])
        cmd[lay["ferroce_cmd_hdr.opcode"]] = opcode
        struct.pack_into("<H", cmd, lay["ferroce_cmd_hdr.cmd_id"], cmd_id)
        for off, fmt, val in body:
            struct.pack_into(fmt, cmd, off, val)
        page.put(sq + slot * lay["ferroce_cmd"], bytes(cmd))
        bar.write(d["FERROCE_REG_ADMINQ_DB"], slot + 1)
        return completion(slot, timeout)

    def completion(slot, timeout=None):
        if timeout is None:
            timeout = d["FERROCE_CMD_TIMEOUT_MS"] / 1000.0
        comp = cq + slot * lay["ferroce_cmd_comp"]
        start = time.monotonic()
        while not page.get(comp + lay["ferroce_cmd_comp.flags"], 1)[0] & d["FERROCE_COMP_PHASE"]:
            if time.monotonic() - start > timeout:
                return None
            time.sleep(0.001)
        got_id = struct.unpack_from("<H", page.get(comp + lay["ferroce_cmd_comp.cmd_id"], 2))[0]
        return got_id, page.get(comp + lay["ferroce_cmd_comp.status"], 1)[0]

    # Bus Master Enable clear (sysfs "enable" leaves it so): the device
    # must not fetch the command nor write its completion (device.rst,
    # "Bus mastering"); setting BME runs it.
    q = lay["ferroce_cmd_query_caps.resp_addr"], lay["ferroce_cmd_query_caps.resp_len"]
    res = command(0, d["FERROCE_CMD_QUERY_CAPS"], 0x1234,
                  [(q[0], "<Q", page.phys + resp), (q[1], "<I", lay["ferroce_caps"])],
                  timeout=0.3)
    ci = bar.read(d["FERROCE_REG_ADMINQ_CI"])
    check("with Bus Master Enable clear the device DMAs nothing",
          res is None and ci == 0, f"completion {res}, ADMINQ_CI {ci}")
    set_bus_master(True)
    res = completion(0)
    check("QUERY_CAPS completes with SUCCESS and its cmd_id",
          res == (0x1234, d["FERROCE_STATUS_SUCCESS"]), f"completion {res}")
    caps = struct.unpack_from("<I", page.get(resp + lay["ferroce_caps.device_caps"], 4))[0]
    check(f"QUERY_CAPS DMA-wrote device_caps {caps:#x} = DEV_CAPS register",
          caps == bar.read(d["FERROCE_REG_DEV_CAPS"]) and caps != 0)
    res = command(1, 0xEE, 0x4321)
    check("an unknown opcode completes with BAD_OPCODE",
          res == (0x4321, d["FERROCE_STATUS_BAD_OPCODE"]), f"completion {res}")
    bar.write(d["FERROCE_REG_DEV_CTRL"], d["FERROCE_CTRL_RESET"])
    status, _ = poll_status(lambda st: st == 0)
    check("reset after use", status == 0, f"status {status:#x}")

    # Port MAC = the paired virtio-net's MAC.
    lo = bar.read(d["FERROCE_REG_PORT_MAC_LO"])
    hi = bar.read(d["FERROCE_REG_PORT_MAC_HI"])
    dev_mac = struct.pack(">HI", hi & 0xFFFF, lo)
    dev_mac = ":".join(f"{b:02x}" for b in dev_mac)
    check(f"port MAC {dev_mac} equals the netdev's {mac}", dev_mac == mac)

    # Read/write register round trip, and reset restores defaults.
    bar.write(d["FERROCE_REG_SCRATCH"], 0x5A5AA5A5)
    check("SCRATCH round trip", bar.read(d["FERROCE_REG_SCRATCH"]) == 0x5A5AA5A5)
    nv = bar.read(d["FERROCE_REG_NUM_VECTORS"])
    check(f"NUM_VECTORS {nv} matches the header",
          nv == d["FERROCE_MSIX_VECTORS"])
    pages = bar.read(d["FERROCE_REG_DB_PAGES"])
    check(f"DB_PAGES {pages} matches the header", pages == d["FERROCE_DB_PAGES"])
    mtu = bar.read(d["FERROCE_REG_PORT_MTU"])
    check(f"PORT_MTU default {mtu}", mtu == d["FERROCE_PORT_MTU_DEFAULT"])

    # A write the spec forbids (reserved DEV_CTRL bits) must not enable or
    # break the device.
    bar.write(d["FERROCE_REG_DEV_CTRL"], 0xFFFFFFFC)
    status = bar.read(d["FERROCE_REG_DEV_STATUS"])
    ctrl = bar.read(d["FERROCE_REG_DEV_CTRL"])
    check("DEV_CTRL write with reserved bits dropped, device still healthy",
          ctrl == 0 and not status & d["FERROCE_DEV_STATUS_FATAL"],
          f"DEV_CTRL {ctrl:#x} status {status:#x}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
