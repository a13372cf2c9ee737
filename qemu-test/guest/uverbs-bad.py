#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Malformed and hostile uverbs commands against a ferroce device, through
the kernel's legacy write() ABI (no rdma-core): each must fail with the
expected errno and leave the device usable (nothing left pinned: VmPin),
and closing the fd with objects still open must be clean.  CREATE_CQ is
also sent as RDMA_VERBS_IOCTL (UVERBS_METHOD_CQ_CREATE), the way
libibverbs sends it, and its checks run through every path that works.
Driver data layouts: include/uapi/rdma/ferroce-abi.h; the checks the
driver does: drivers/infiniband/hw/ferroce/verbs/*.rs; the core structs:
include/uapi/rdma/ib_user_verbs.h, rdma_user_ioctl_cmds.h.

Prints one "ok - ..." / "not ok - ..." line per check and exits with the
number of failed checks (capped at 100).

usage: uverbs-bad.py /dev/infiniband/uverbsN
"""
import ctypes
import errno
import fcntl
import importlib.util
import mmap
import os
import struct
import sys

# include/uapi/rdma/ib_user_verbs.h
CMD_GET_CONTEXT = 0
CMD_ALLOC_PD = 3
CMD_DEALLOC_PD = 4
CMD_REG_MR = 9
CMD_DEREG_MR = 13
CMD_CREATE_CQ = 18
CMD_DESTROY_CQ = 20
CMD_CREATE_QP = 24
CMD_DESTROY_QP = 27
CMD_CREATE_SRQ = 32
CMD_MODIFY_SRQ = 33
CMD_QUERY_SRQ = 34
CMD_DESTROY_SRQ = 35
SRQ_MAX_WR, SRQ_LIMIT = 1, 2  # enum ib_srq_attr_mask

# include/uapi/rdma/rdma_user_ioctl_cmds.h, ib_user_ioctl_cmds.h: the ioctl
# path of CREATE_CQ, the one libibverbs takes (see "cq_path" below).
RDMA_VERBS_IOCTL = (3 << 30) | (24 << 16) | (0x1B << 8) | 1
UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE = 3, 0
(CQ_ATTR_HANDLE, CQ_ATTR_CQE, CQ_ATTR_USER_HANDLE, CQ_ATTR_COMP_VECTOR,
 CQ_ATTR_RESP_CQE) = 0, 1, 2, 4, 6
UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT = 1 << 12, (1 << 12) + 1
# The header's driver_id must be the one the kernel reports for the device
# (RDMA_DRIVER_FERROCE), as libibverbs sends it: set by main().
DRIVER_ID = None

# include/uapi/rdma/ib_user_ioctl_verbs.h
QPT_SMI, QPT_RC, QPT_UC, QPT_UD, QPT_XRC_INI, QPT_XRC_TGT, QPT_DRIVER = 0, 2, 3, 4, 9, 10, 0xFF
ACC_LOCAL_WRITE, ACC_REMOTE_WRITE, ACC_REMOTE_READ = 1, 2, 4
ACC_MW_BIND, ACC_ON_DEMAND = 1 << 4, 1 << 6
ACC_OPTIONAL_FIRST, ACC_OPTIONAL_LAST = 1 << 20, 1 << 29

# include/ferroce/ferroce-hw.h
CQE_SIZE = 32
SQ_SHIFT_MIN, SQ_SHIFT_MAX, RQ_SHIFT_MIN, RQ_SHIFT_MAX = 7, 10, 5, 10
SQ_DATA_OFFSET, RQ_DATA_OFFSET = 64, 16
DB_PAGES = 256
CAP_UC = 0x00010000  # device 1.5: UC QPs
CAP_SRQ = 0x00020000  # device 1.6: shared receive queues

PAGE = 4096
PROT_NONE = 0  # not in Python's mmap module

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

failures = 0


def ename(e):
    if e == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"  # = ENOTSUP on Linux
    return "success" if e == 0 else errno.errorcode.get(e, str(e))


def report(name, good, detail=""):
    global failures
    if good:
        print(f"ok - {name}", flush=True)
    else:
        failures += 1
        print(f"not ok - {name}" + (f" ({detail})" if detail else ""), flush=True)


def expect(name, got, want):
    """want: an errno, 0 for success, or a tuple of acceptable ones."""
    wants = want if isinstance(want, tuple) else (want,)
    shown = "/".join(ename(w) for w in wants)
    if got in wants and len(wants) > 1:
        name = f"{name}: {ename(got)}"
    report(name, got in wants, f"got errno {ename(got)}, want {shown}")
    return got in wants


def check(name, cond, detail=""):
    report(name, bool(cond), detail)
    return bool(cond)


# ---------------------------------------------------------------- memory

def anon(size, prot=mmap.PROT_READ | mmap.PROT_WRITE, guard=True):
    """A zeroed anonymous mapping of size bytes (page aligned), by default
    between two PROT_NONE guard pages so that nothing mapped later by
    Python lands right after it."""
    total = size + (2 * PAGE if guard else 0)
    p = libc.mmap(None, total, mmap.PROT_READ | mmap.PROT_WRITE,
                  mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if p is None or p == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    if guard:
        libc.mprotect(p, PAGE, PROT_NONE)
        libc.mprotect(p + PAGE + size, PAGE, PROT_NONE)
        p += PAGE
    ctypes.memset(p, 0, size)  # fault the pages in, as a provider does
    if prot != mmap.PROT_READ | mmap.PROT_WRITE:
        libc.mprotect(p, size, prot)
    return p


def hole(size):
    """An unmapped range of size bytes, fenced by PROT_NONE pages (only a
    mapping of at most size bytes could land in it)."""
    p = anon(size)
    libc.munmap(p, size)
    return p


def vm_pinned():
    """VmPin of this process in kB (ib_umem pins are accounted there)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPin:"):
                return int(line.split()[1])
    return -1


# ---------------------------------------------------------------- commands

def command(fd, op, req, drv=b"", out=0, resp_ptr=True):
    """Writes one legacy command: header, response pointer (when the
    command has one), the core request req, the driver data drv.  Returns
    (errno, response bytes of length out); errno 0 on success."""
    resp = ctypes.create_string_buffer(max(out, 8))
    body = (struct.pack("<Q", ctypes.addressof(resp)) if resp_ptr else b"") + req + drv
    assert len(body) % 4 == 0 and out % 4 == 0
    hdr = struct.pack("<IHH", op, (8 + len(body)) // 4, out // 4)
    try:
        os.write(fd, hdr + body)
    except OSError as e:
        return e.errno, None
    return 0, resp.raw[:out]


def ioctl(fd, obj, method, attrs):
    """One RDMA_VERBS_IOCTL: attrs are (attr_id, len, data) triples.
    Returns (errno, the attrs as the kernel left them)."""
    buf = bytearray(struct.pack("<HHHHQII", 24 + 16 * len(attrs), obj, method, len(attrs), 0,
                                DRIVER_ID, 0))
    for attr_id, length, data in attrs:
        buf += struct.pack("<HHHHQ", attr_id, length, 0, 0, data)
    try:
        fcntl.ioctl(fd, RDMA_VERBS_IOCTL, buf)
    except OSError as e:
        return e.errno, None
    return 0, [struct.unpack_from("<HHHHQ", buf, 24 + 16 * i) for i in range(len(attrs))]


class Ctx:
    """An open uverbs fd with its context.  cq_path: how CREATE_CQ is sent,
    "ioctl" (RDMA_VERBS_IOCTL, what libibverbs does) or "write" (legacy)."""

    cq_path = "ioctl"

    def __init__(self, path, drv_room=32):
        self.fd = os.open(path, os.O_RDWR)
        self.err, r = command(self.fd, CMD_GET_CONTEXT, b"", out=8 + drv_room)
        if self.err:
            return
        r = r + bytes(40 - len(r))
        (self.async_fd, self.ncomp, self.db_off, self.db_page, self.caps, self.max_qp_wr,
         self.max_sge, self.max_inline, self.max_cqe) = struct.unpack("<IIQIIIIII", r)

    def close(self):
        os.close(self.fd)

    def alloc_pd(self):
        e, r = command(self.fd, CMD_ALLOC_PD, b"", out=4)
        return e, (struct.unpack("<I", r)[0] if not e else None)

    def dealloc_pd(self, pd):
        return command(self.fd, CMD_DEALLOC_PD, struct.pack("<II", pd, 0), resp_ptr=False)[0]

    def create_cq(self, buf, dbrec, depth, cqe, comp_vector=0, reserved=0, drv=None, extra=b""):
        """Returns (errno, (handle, cqe, cqn))."""
        if drv is None:
            drv = struct.pack("<QQII", buf, dbrec, depth, reserved)
        drv += extra
        if self.cq_path == "write":
            req = struct.pack("<QIIiI", 0xC0FFEE, cqe, comp_vector, -1, 0)
            e, r = command(self.fd, CMD_CREATE_CQ, req, drv, out=16)
            return e, (struct.unpack("<IIII", r)[:3] if not e else None)
        resp_cqe = ctypes.c_uint32(0)
        uhw_out = ctypes.create_string_buffer(8)
        uhw_in = ctypes.create_string_buffer(drv, len(drv) or 1)
        attrs = [(CQ_ATTR_HANDLE, 0, 0), (CQ_ATTR_CQE, 4, cqe),
                 (CQ_ATTR_USER_HANDLE, 8, 0xC0FFEE), (CQ_ATTR_COMP_VECTOR, 4, comp_vector),
                 (CQ_ATTR_RESP_CQE, 4, ctypes.addressof(resp_cqe)),
                 (UVERBS_ATTR_UHW_OUT, 8, ctypes.addressof(uhw_out))]
        if drv:
            inline = int.from_bytes(drv, "little") if len(drv) <= 8 else None
            attrs.append((UVERBS_ATTR_UHW_IN, len(drv),
                          ctypes.addressof(uhw_in) if inline is None else inline))
        e, out = ioctl(self.fd, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, attrs)
        if e:
            return e, None
        return 0, (out[0][4], resp_cqe.value, struct.unpack("<II", uhw_out.raw)[0])

    def destroy_cq(self, h):
        return command(self.fd, CMD_DESTROY_CQ, struct.pack("<II", h, 0), out=8)[0]

    def create_qp(self, pd, scq, rcq, q, drv=None, extra=b"", srq=None):
        """q: dict of the fields (see QpBufs.params); srq: the handle of
        an SRQ to attach it to.  Returns (errno, (handle, qpn, max_send_wr,
        max_recv_wr, max_send_sge, max_recv_sge, max_inline_data, driver
        qpn, driver max_inline))."""
        req = struct.pack("<QIIIIIIIIIBBBB", 0xBEEF, pd, scq, rcq, srq or 0,
                          q["max_send_wr"], q["max_recv_wr"], q["max_send_sge"],
                          q["max_recv_sge"], q["max_inline"], 0, q["qp_type"],
                          int(srq is not None), 0)
        if drv is None:
            drv = struct.pack("<QQQQIIBB6s", q["sq_buf"], q["rq_buf"], q["sq_dbrec"],
                              q["rq_dbrec"], q["sq_depth"], q["rq_depth"], q["sq_shift"],
                              q["rq_shift"], q["reserved"])
        e, r = command(self.fd, CMD_CREATE_QP, req, drv + extra, out=40)
        if e:
            return e, None
        v = struct.unpack("<IIIIIIIIII", r)
        return e, v[:7] + v[8:]

    def destroy_qp(self, h):
        return command(self.fd, CMD_DESTROY_QP, struct.pack("<II", h, 0), out=4)[0]

    def create_srq(self, pd, max_wr, max_sge, limit=0, buf=0, dbrec=0, depth=0, shift=0,
                   drv=None):
        """Returns (errno, (handle, max_wr, max_sge, driver srqn))."""
        req = struct.pack("<QIIII", 0x5A5A, pd, max_wr, max_sge, limit)
        if drv is None:
            drv = struct.pack("<QQIB3sII", buf, dbrec, depth, shift, bytes(3), 0, 0)
        e, r = command(self.fd, CMD_CREATE_SRQ, req, drv, out=24)
        if e:
            return e, None
        h, mw, ms, _, dsrqn, _ = struct.unpack("<IIIIII", r)
        return 0, (h, mw, ms, dsrqn)

    def modify_srq(self, h, max_wr, limit, mask, drv=b""):
        return command(self.fd, CMD_MODIFY_SRQ, struct.pack("<IIII", h, mask, max_wr, limit),
                       drv, resp_ptr=False)[0]

    def query_srq(self, h):
        """Returns (errno, (max_wr, max_sge, srq_limit))."""
        e, r = command(self.fd, CMD_QUERY_SRQ, struct.pack("<II", h, 0), out=16)
        return e, (struct.unpack("<IIII", r)[:3] if not e else None)

    def destroy_srq(self, h):
        return command(self.fd, CMD_DESTROY_SRQ, struct.pack("<II", h, 0), out=4)[0]

    def reg_mr(self, pd, start, length, access, hca_va=None):
        """Returns (errno, (handle, lkey, rkey))."""
        req = struct.pack("<QQQII", start, length, start if hca_va is None else hca_va,
                          pd, access)
        e, r = command(self.fd, CMD_REG_MR, req, out=12)
        return e, (struct.unpack("<III", r) if not e else None)

    def dereg_mr(self, h):
        return command(self.fd, CMD_DEREG_MR, struct.pack("<I", h), resp_ptr=False)[0]


def pow2_above(n):
    """The smallest power of two > n."""
    return 1 << n.bit_length()


def pow2_floor(n):
    return 1 << (n.bit_length() - 1)


# ---------------------------------------------------------------- checks

def check_context(path, c):
    if not expect("GET_CONTEXT with room for the driver response", c.err, 0):
        return False
    print(f"# db_mmap_offset {c.db_off:#x} db_page {c.db_page} caps {c.caps:#x} "
          f"max_qp_wr {c.max_qp_wr} max_sge {c.max_sge} max_inline {c.max_inline} "
          f"max_cqe {c.max_cqe} num_comp_vectors {c.ncomp}")
    check("GET_CONTEXT: db_page in 1..255", 1 <= c.db_page < DB_PAGES, f"db_page {c.db_page}")
    check("GET_CONTEXT: db_mmap_offset page aligned", c.db_off % PAGE == 0,
          f"db_mmap_offset {c.db_off:#x}")
    check("GET_CONTEXT: device limits non-zero (max_qp_wr, max_sge, max_cqe >= 2)",
          c.max_qp_wr >= 1 and c.max_sge >= 1 and c.max_cqe >= 2)
    expect("second GET_CONTEXT on the same fd refused",
           command(c.fd, CMD_GET_CONTEXT, b"", out=40)[0], errno.EINVAL)

    def try_mmap(length, off, flags=mmap.MAP_SHARED):
        try:
            m = mmap.mmap(c.fd, length, flags=flags, prot=mmap.PROT_WRITE, offset=off)
        except OSError as e:
            return e.errno, None
        return 0, m

    e, m = try_mmap(PAGE, c.db_off)
    if expect("mmap of the doorbell page (4096 B, PROT_WRITE, MAP_SHARED)", e, 0):
        m.close()
    for name, length, off, flags in (
            ("mmap at a wrong offset (db_mmap_offset + 4096)", PAGE, c.db_off + PAGE,
             mmap.MAP_SHARED),
            ("mmap at a wrong offset (db_mmap_offset + 1 MiB)", PAGE, c.db_off + (1 << 20),
             mmap.MAP_SHARED),
            ("mmap of 8192 B at db_mmap_offset", 2 * PAGE, c.db_off, mmap.MAP_SHARED),
            ("mmap MAP_PRIVATE of the doorbell page", PAGE, c.db_off, mmap.MAP_PRIVATE)):
        e, m = try_mmap(length, off, flags)
        if m:
            m.close()
        expect(name + " refused", e, errno.EINVAL)
    e, m = try_mmap(PAGE, c.db_off)
    if expect("mmap of the doorbell page still works after the refused ones", e, 0):
        m.close()

    # A response with less room than ferroce_uresp_alloc_ctx is truncated.
    t = Ctx(path, drv_room=8)
    if expect("GET_CONTEXT with 8 bytes of driver response room (truncated)", t.err, 0):
        try:
            mmap.mmap(t.fd, PAGE, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE,
                      offset=t.db_off).close()
            e = 0
        except OSError as x:
            e = x.errno
        expect("... its db_mmap_offset maps", e, 0)
    t.close()
    t = Ctx(path)
    if expect("GET_CONTEXT on a third fd", t.err, 0):
        check(f"... db_page {t.db_page}, not the first context's {c.db_page}",
              1 <= t.db_page < DB_PAGES and t.db_page != c.db_page)
    t.close()
    return True


def check_cq(c, ring, dbrec, ro_ring, small_ring):
    """Refused CREATE_CQs; returns nothing (CQs created here are destroyed)."""

    def expect(name, got, want):
        return globals()["expect"](name.replace("CREATE_CQ", f"CREATE_CQ ({c.cq_path})", 1),
                                   got, want)
    d = 64 if c.max_cqe >= 64 else pow2_floor(c.max_cqe)
    cqe = d // 2

    def ok_then_destroy(name, r):
        e, v = r
        if expect(name, e, 0):
            expect(name + ": DESTROY_CQ", c.destroy_cq(v[0]), 0)

    good = struct.pack("<QQII", ring, dbrec, d, 0)
    expect("CREATE_CQ: no driver data (EINVAL)", c.create_cq(0, 0, 0, cqe, drv=b"")[0],
           errno.EINVAL)
    expect("CREATE_CQ: driver data 16 of 24 bytes (EINVAL)",
           c.create_cq(0, 0, 0, cqe, drv=good[:16])[0], errno.EINVAL)
    expect("CREATE_CQ: driver data 20 of 24 bytes (EINVAL)",
           c.create_cq(0, 0, 0, cqe, drv=good[:20])[0], errno.EINVAL)
    expect("CREATE_CQ: 8 extra non-zero bytes (EOPNOTSUPP)",
           c.create_cq(0, 0, 0, cqe, drv=good, extra=struct.pack("<Q", 1))[0],
           errno.EOPNOTSUPP)
    expect("CREATE_CQ: 4 extra bytes, last one non-zero (EOPNOTSUPP)",
           c.create_cq(0, 0, 0, cqe, drv=good, extra=b"\0\0\0\x80")[0], errno.EOPNOTSUPP)
    ok_then_destroy("CREATE_CQ: 8 extra zero bytes accepted",
                    c.create_cq(0, 0, 0, cqe, drv=good, extra=bytes(8)))
    expect("CREATE_CQ: reserved = 1 (EINVAL)", c.create_cq(ring, dbrec, d, cqe, reserved=1)[0],
           errno.EINVAL)
    expect("CREATE_CQ: reserved = 0x80000000 (EINVAL)",
           c.create_cq(ring, dbrec, d, cqe, reserved=1 << 31)[0], errno.EINVAL)
    expect(f"CREATE_CQ: depth {d - d // 4} not a power of two (EINVAL)",
           c.create_cq(ring, dbrec, d - d // 4, 1)[0], errno.EINVAL)
    expect("CREATE_CQ: depth 0 (EINVAL)", c.create_cq(ring, dbrec, 0, 1)[0], errno.EINVAL)
    ok_then_destroy(f"CREATE_CQ: depth {d} = cqe accepted (a CQ holds depth CQEs)",
                    c.create_cq(ring, dbrec, d, d))
    expect(f"CREATE_CQ: depth {d} < cqe {d + 1} (EINVAL)",
           c.create_cq(ring, dbrec, d, d + 1)[0], errno.EINVAL)
    big = pow2_above(c.max_cqe)
    if big < 1 << 32:
        expect(f"CREATE_CQ: depth {big} > max_cqe {c.max_cqe} (EINVAL)",
               c.create_cq(ring, dbrec, big, 1)[0], errno.EINVAL)
    expect("CREATE_CQ: depth 0x80000000 (EINVAL)",
           c.create_cq(ring, dbrec, 1 << 31, 1)[0], errno.EINVAL)
    expect("CREATE_CQ: cqe 0 (EINVAL, ib_core)", c.create_cq(ring, dbrec, d, 0)[0],
           errno.EINVAL)
    expect("CREATE_CQ: buf_va + 64, not page aligned (EINVAL)",
           c.create_cq(ring + 64, dbrec, d, cqe)[0], errno.EINVAL)
    expect("CREATE_CQ: buf_va + 2048, not page aligned (EINVAL)",
           c.create_cq(ring + 2048, dbrec, d, cqe)[0], errno.EINVAL)
    expect("CREATE_CQ: buf_va in unmapped memory (EFAULT)",
           c.create_cq(hole(4 * PAGE), dbrec, d, cqe)[0], errno.EFAULT)
    expect("CREATE_CQ: buf_va 0 (EFAULT or EINVAL)", c.create_cq(0, dbrec, d, cqe)[0],
           (errno.EFAULT, errno.EINVAL))
    expect("CREATE_CQ: buf_va read-only (the device writes the ring) (EFAULT)",
           c.create_cq(ro_ring, dbrec, d, cqe)[0], errno.EFAULT)
    if c.max_cqe >= 256:
        expect("CREATE_CQ: 256-entry ring (8 KiB) over a 4 KiB mapping (EFAULT)",
               c.create_cq(small_ring, dbrec, 256, 1)[0], errno.EFAULT)
    expect("CREATE_CQ: buf_va near the top of the address space (EFAULT or EINVAL)",
           c.create_cq((1 << 64) - PAGE, dbrec, d, cqe)[0], (errno.EFAULT, errno.EINVAL))
    expect("CREATE_CQ: dbrec_va + 4, misaligned (EINVAL)",
           c.create_cq(ring, dbrec + 4, d, cqe)[0], errno.EINVAL)
    expect("CREATE_CQ: dbrec_va + 1, misaligned (EINVAL)",
           c.create_cq(ring, dbrec + 1, d, cqe)[0], errno.EINVAL)
    expect("CREATE_CQ: dbrec_va 0 (EINVAL)", c.create_cq(ring, 0, d, cqe)[0], errno.EINVAL)
    expect("CREATE_CQ: dbrec_va in unmapped memory (EFAULT)",
           c.create_cq(ring, hole(PAGE), d, cqe)[0], errno.EFAULT)
    expect(f"CREATE_CQ: comp_vector {c.ncomp} = num_comp_vectors (EINVAL)",
           c.create_cq(ring, dbrec, d, cqe, comp_vector=c.ncomp)[0], errno.EINVAL)
    expect("CREATE_CQ: comp_vector 0xffffffff (EINVAL)",
           c.create_cq(ring, dbrec, d, cqe, comp_vector=0xFFFFFFFF)[0], errno.EINVAL)
    if c.ncomp > 1:
        ok_then_destroy(f"CREATE_CQ: comp_vector {c.ncomp - 1} accepted",
                        c.create_cq(ring, dbrec, d, cqe, comp_vector=c.ncomp - 1))
    e, v = c.create_cq(ring, dbrec, d, cqe)
    if expect(f"CREATE_CQ: valid (depth {d}, cqe {cqe}, page-aligned mmap'ed ring) after "
              "the refused ones", e, 0):
        print(f"# cq handle {v[0]} cqe {v[1]} cqn {v[2]}")
        check(f"CREATE_CQ: response cqe {v[1]} >= requested {cqe}", v[1] >= cqe)
        expect("DESTROY_CQ", c.destroy_cq(v[0]), 0)
        expect("DESTROY_CQ of the destroyed handle refused", c.destroy_cq(v[0]),
               (errno.EINVAL, errno.ENOENT))


class QpBufs:
    """SQ/RQ rings and doorbell records of one QP."""

    def __init__(self, c):
        self.c = c
        self.sq_depth = min(64, pow2_floor(c.max_qp_wr))
        self.rq_depth = self.sq_depth
        self.sq = anon(max(PAGE, self.sq_depth << SQ_SHIFT_MAX))
        self.rq = anon(max(PAGE, self.rq_depth << RQ_SHIFT_MIN))
        self.db = anon(PAGE)

    def params(self, **kw):
        q = dict(qp_type=QPT_RC, max_send_wr=self.sq_depth // 2,
                 max_recv_wr=self.rq_depth // 2, max_send_sge=1, max_recv_sge=1,
                 max_inline=0, sq_buf=self.sq, rq_buf=self.rq, sq_dbrec=self.db,
                 rq_dbrec=self.db + 64, sq_depth=self.sq_depth, rq_depth=self.rq_depth,
                 sq_shift=SQ_SHIFT_MIN, rq_shift=RQ_SHIFT_MIN, reserved=bytes(6))
        q.update(kw)
        return q

    def no_rq(self, **kw):
        q = dict(max_recv_wr=0, max_recv_sge=0, rq_buf=0, rq_dbrec=0, rq_depth=0, rq_shift=0)
        q.update(kw)
        return self.params(**q)


def check_qp(c, pd, cq, b):
    def bad(name, q, want=errno.EINVAL, **kw):
        e, v = c.create_qp(pd, cq, cq, q, **kw)
        if not e:
            c.destroy_qp(v[0])
        return expect(f"CREATE_QP: {name} ({'/'.join(ename(w) for w in (want if isinstance(want, tuple) else (want,)))})", e, want)

    def good(name, q, **kw):
        e, v = c.create_qp(pd, cq, cq, q, **kw)
        if expect(f"CREATE_QP: {name}", e, 0):
            expect(f"CREATE_QP: {name}: DESTROY_QP", c.destroy_qp(v[0]), 0)
        return v

    p = b.params
    room = (1 << SQ_SHIFT_MIN) - SQ_DATA_OFFSET
    sge_max = min(room // 16, c.max_sge)
    inl_max = min(room, c.max_inline)
    drv = struct.pack("<QQQQIIBB6s", b.sq, b.rq, b.db, b.db + 64, b.sq_depth, b.rq_depth,
                      SQ_SHIFT_MIN, RQ_SHIFT_MIN, bytes(6))
    bad("no driver data", p(), drv=b"")
    bad("driver data 40 of 48 bytes", p(), drv=drv[:40])
    bad("driver data 44 of 48 bytes", p(), drv=drv[:44])
    # drv is the first release's 48-byte request (what old providers send);
    # the struct grew by comp_mask and a reserved word (ferroce-abi.h).
    good("the first release's 48-byte request accepted", p(), drv=drv)
    bad("comp_mask = 1 (no extension known)", p(), drv=drv, extra=struct.pack("<II", 1, 0))
    bad("reserved2 = 1", p(), drv=drv, extra=struct.pack("<II", 0, 1))
    good("56-byte request with comp_mask 0 accepted", p(), drv=drv, extra=bytes(8))
    bad("8 non-zero bytes beyond the 56-byte struct", p(), errno.EOPNOTSUPP, drv=drv,
        extra=bytes(8) + struct.pack("<Q", 1 << 63))
    good("8 zero bytes beyond the 56-byte struct accepted", p(), drv=drv, extra=bytes(16))
    bad("reserved[0] = 1", p(reserved=b"\1" + bytes(5)))
    bad("reserved[5] = 0xff", p(reserved=bytes(5) + b"\xff"))
    for s in (0, SQ_SHIFT_MIN - 1, SQ_SHIFT_MAX + 1, 255):
        bad(f"sq_wqe_shift {s}", p(sq_shift=s))
    bad(f"sq_depth {b.sq_depth - b.sq_depth // 4} not a power of two",
        p(sq_depth=b.sq_depth - b.sq_depth // 4, max_send_wr=1))
    bad("sq_depth 0", p(sq_depth=0, max_send_wr=0))
    bad(f"sq_depth {b.sq_depth // 2} < max_send_wr {b.sq_depth}",
        p(sq_depth=b.sq_depth // 2, max_send_wr=b.sq_depth))
    big = pow2_above(c.max_qp_wr)
    if big < 1 << 32:
        bad(f"sq_depth {big} > max_qp_wr {c.max_qp_wr}", p(sq_depth=big, max_send_wr=1))
    bad(f"max_send_sge {sge_max + 1} > {sge_max} (128 B stride)", p(max_send_sge=sge_max + 1))
    bad("max_send_sge 0xffffffff", p(max_send_sge=0xFFFFFFFF))
    bad(f"max_inline_data {inl_max + 1} > {inl_max} (128 B stride)", p(max_inline=inl_max + 1))
    bad("max_inline_data 0xffffffff", p(max_inline=0xFFFFFFFF))
    bad("rq_depth 0 with rq_wqe_shift 5", b.no_rq(rq_shift=RQ_SHIFT_MIN))
    bad("rq_depth 0 with rq_buf_va set", b.no_rq(rq_buf=b.rq))
    bad("rq_depth 0 with rq_dbrec_va set", b.no_rq(rq_dbrec=b.db + 64))
    bad("rq_depth 0 with max_recv_wr 1", b.no_rq(max_recv_wr=1))
    bad(f"rq_depth {b.rq_depth - b.rq_depth // 4} not a power of two",
        p(rq_depth=b.rq_depth - b.rq_depth // 4, max_recv_wr=1))
    bad(f"rq_depth {b.rq_depth // 2} < max_recv_wr {b.rq_depth}",
        p(rq_depth=b.rq_depth // 2, max_recv_wr=b.rq_depth))
    for s in (0, RQ_SHIFT_MIN - 1, RQ_SHIFT_MAX + 1):
        bad(f"rq_wqe_shift {s} with rq_depth {b.rq_depth}", p(rq_shift=s))
    bad("max_recv_sge 2 > 1 (32 B RQ stride)", p(max_recv_sge=2))
    bad("sq_buf_va + 128, not page aligned", p(sq_buf=b.sq + 128))
    bad("rq_buf_va + 32, not page aligned", p(rq_buf=b.rq + 32))
    bad("sq_buf_va in unmapped memory", p(sq_buf=hole(4 * PAGE)), errno.EFAULT)
    bad("rq_buf_va in unmapped memory", p(rq_buf=hole(4 * PAGE)), errno.EFAULT)
    bad("sq_buf_va 0", p(sq_buf=0), (errno.EFAULT, errno.EINVAL))
    bad("rq_buf_va 0 with rq_depth set", p(rq_buf=0), (errno.EFAULT, errno.EINVAL))
    bad("sq_dbrec_va 0", p(sq_dbrec=0))
    bad("sq_dbrec_va + 4, misaligned", p(sq_dbrec=b.db + 4))
    bad("rq_dbrec_va + 2, misaligned", p(rq_dbrec=b.db + 66))
    bad("sq_dbrec_va in unmapped memory", p(sq_dbrec=hole(PAGE)), errno.EFAULT)
    bad("rq_dbrec_va in unmapped memory", p(rq_dbrec=hole(PAGE)), errno.EFAULT)
    if c.caps & CAP_UC:
        good("UC QP (the device has CAP_UC)", p(qp_type=QPT_UC))
    else:
        bad("UC QP (the device lacks CAP_UC)", p(qp_type=QPT_UC), errno.EOPNOTSUPP)
    bad("XRC_INI QP", p(qp_type=QPT_XRC_INI), (errno.EOPNOTSUPP, errno.EINVAL))
    bad("XRC_TGT QP (the PD handle is no XRCD)", p(qp_type=QPT_XRC_TGT),
        (errno.EOPNOTSUPP, errno.EINVAL))
    bad("SMI QP type 0 (ib_core)", p(qp_type=QPT_SMI))
    bad("qp_type 0x42 (ib_core)", p(qp_type=0x42))
    bad("DRIVER QP type 0xff", p(qp_type=QPT_DRIVER), (errno.EOPNOTSUPP, errno.EINVAL))

    # Valid ones after all that.
    q = p()
    e, v = c.create_qp(pd, cq, cq, q)
    if expect(f"CREATE_QP: valid RC QP (sq {b.sq_depth} x 128 B, rq {b.rq_depth} x 32 B) "
              "after the refused ones", e, 0):
        h, qpn, msw, mrw, mss, mrs, mid, dqpn, dinl = v
        print(f"# qp handle {h} qpn {qpn} max_send_wr {msw} max_recv_wr {mrw} "
              f"max_send_sge {mss} max_recv_sge {mrs} max_inline_data {mid} "
              f"(driver: qpn {dqpn} max_inline {dinl})")
        check(f"CREATE_QP: QPN {qpn} >= 2", qpn >= 2)
        check("CREATE_QP: driver response qpn = ib_core's", dqpn == qpn, f"{dqpn} != {qpn}")
        check(f"CREATE_QP: max_send_wr {msw} = sq_depth, max_recv_wr {mrw} = rq_depth",
              msw == b.sq_depth and mrw == b.rq_depth)
        check(f"CREATE_QP: max_send_sge {mss} = {sge_max}, max_recv_sge {mrs} = 1",
              mss == sge_max and mrs == 1)
        check(f"CREATE_QP: max_inline_data {mid} = driver max_inline {dinl} = {inl_max}",
              mid == dinl == inl_max)
        expect("DESTROY_CQ of a CQ a QP uses refused (EBUSY)", c.destroy_cq(cq), errno.EBUSY)
        expect("DEALLOC_PD of a PD a QP uses refused (EBUSY)", c.dealloc_pd(pd), errno.EBUSY)
        e2, v2 = c.create_qp(pd, cq, cq, QpBufs(c).params())
        if expect("CREATE_QP: a second RC QP (its own rings) on the same CQ and PD", e2, 0):
            check("CREATE_QP: the two QPs have different QPNs", v2[1] != qpn)
            expect("DESTROY_QP (second)", c.destroy_qp(v2[0]), 0)
        expect("DESTROY_QP", c.destroy_qp(h), 0)
        expect("DESTROY_QP of the destroyed handle refused", c.destroy_qp(h),
               (errno.EINVAL, errno.ENOENT))
    good("RC QP without RQ (rq_depth 0) accepted", b.no_rq())
    good("UD QP accepted", p(qp_type=QPT_UD))
    s = min(SQ_SHIFT_MAX, max(SQ_SHIFT_MIN, (SQ_DATA_OFFSET + 16 * c.max_sge - 1).bit_length()))
    n = min(c.max_sge, ((1 << s) - SQ_DATA_OFFSET) // 16)
    good(f"sq_wqe_shift {s} with max_send_sge {n} (all the device's SGEs)",
         p(sq_shift=s, max_send_sge=n))
    good(f"sq_wqe_shift {SQ_SHIFT_MAX}, rq_wqe_shift {RQ_SHIFT_MAX}",
         p(sq_shift=SQ_SHIFT_MAX, rq_shift=RQ_SHIFT_MAX, rq_buf=anon(b.rq_depth << RQ_SHIFT_MAX)))


def check_srq(c, pd, cq, b):
    """CREATE_SRQ's driver data (ferroce_ureq_create_srq) refused field by
    field, MODIFY/QUERY_SRQ, and a QP attached to the SRQ."""
    depth = min(64, pow2_floor(c.max_qp_wr))
    ring = anon(max(PAGE, depth << RQ_SHIFT_MIN))
    db = anon(PAGE)
    good = dict(buf=ring, dbrec=db, depth=depth, shift=RQ_SHIFT_MIN)

    def srq(name, want, max_wr=depth // 2, max_sge=1, limit=0, **kw):
        f = dict(good)
        f.update(kw)
        e, v = c.create_srq(pd, max_wr, max_sge, limit, **f)
        if not e and want:
            c.destroy_srq(v[0])
        ok = expect(f"CREATE_SRQ: {name} ({ename(want)})", e, want)
        return v if ok and not e else None

    if not c.caps & CAP_SRQ:
        srq("the device lacks CAP_SRQ", errno.EOPNOTSUPP)
        return
    e, _ = c.create_srq(pd, 8, 1, drv=struct.pack("<QQI", ring, db, depth))
    expect("CREATE_SRQ: driver data shorter than the first release (EINVAL)", e, errno.EINVAL)
    e, _ = c.create_srq(pd, 8, 1, drv=struct.pack("<QQIB3sII", ring, db, depth, RQ_SHIFT_MIN,
                                                   bytes(3), 1, 0))
    expect("CREATE_SRQ: unknown comp_mask bit (EINVAL)", e, errno.EINVAL)
    e, _ = c.create_srq(pd, 8, 1, drv=struct.pack("<QQIB3sII", ring, db, depth, RQ_SHIFT_MIN,
                                                   b"\x01\0\0", 0, 0))
    expect("CREATE_SRQ: reserved byte set (EINVAL)", e, errno.EINVAL)
    srq("depth not a power of two", errno.EINVAL, depth=depth - 1 if depth > 2 else 3)
    srq("depth below max_wr", errno.EINVAL, max_wr=depth + 1)
    srq("depth above max_qp_wr", errno.EINVAL, depth=pow2_above(c.max_qp_wr))
    srq("WQE shift below the minimum", errno.EINVAL, shift=RQ_SHIFT_MIN - 1)
    srq("WQE shift above the maximum", errno.EINVAL, shift=RQ_SHIFT_MAX + 1)
    srq("more SGEs than a 32-byte WQE holds", errno.EINVAL, max_sge=2)
    srq("ring not page aligned", errno.EINVAL, buf=ring + 8)
    srq("record not 8-byte aligned", errno.EINVAL, dbrec=db + 4)
    srq("record address 0", errno.EINVAL, dbrec=0)
    srq("ring in unmapped memory", errno.EFAULT, buf=hole(PAGE))
    v = srq(f"a valid SRQ (depth {depth}; the limit {depth * 4} at create ignored)", 0,
            limit=depth * 4)
    if not v:
        return
    h, mw, ms, srqn = v
    e, a = c.query_srq(h)
    if expect("QUERY_SRQ of the new SRQ", e, 0):
        check(f"QUERY_SRQ: limit {a[2]} = 0 (not armed at create)", a[2] == 0)
    check(f"CREATE_SRQ: max_wr {mw} = depth, max_sge {ms} = 1", (mw, ms) == (depth, 1))
    check(f"CREATE_SRQ: the driver's srqn {srqn} >= 1", srqn >= 1)
    big = anon(max(PAGE, (depth * 2) << RQ_SHIFT_MIN))

    def resize(name, want, max_wr, buf, d, comp_mask=0):
        drv = struct.pack("<QII", buf, d, comp_mask)
        return expect(f"MODIFY_SRQ: resize, {name} ({ename(want)})",
                      c.modify_srq(h, max_wr, 0, SRQ_MAX_WR, drv), want)

    expect("MODIFY_SRQ: resize without the new ring (EINVAL)",
           c.modify_srq(h, depth * 2, 0, SRQ_MAX_WR), errno.EINVAL)
    resize("unknown comp_mask bit", errno.EINVAL, depth * 2, big, depth * 2, comp_mask=1)
    resize("ring depth below max_wr", errno.EINVAL, depth * 2, big, depth)
    resize("ring depth not a power of two", errno.EINVAL, depth * 2, big, depth * 2 + 1)
    resize("ring not page aligned", errno.EINVAL, depth * 2, big + 64, depth * 2)
    resize("ring in unmapped memory", errno.EFAULT, depth * 2, hole(PAGE), depth * 2)
    e, a = c.query_srq(h)
    check(f"QUERY_SRQ after the refused resizes: max_wr {a and a[0]} = {depth}",
          not e and a[0] == depth)
    if resize(f"to {depth * 2} WQEs (an empty SRQ)", 0, depth * 2, big, depth * 2):
        e, a = c.query_srq(h)
        check(f"QUERY_SRQ after the resize: max_wr {a and a[0]} = {depth * 2}",
              not e and a[0] == depth * 2)
        depth *= 2
    expect("MODIFY_SRQ: limit above max_wr (EINVAL)",
           c.modify_srq(h, 0, depth + 1, SRQ_LIMIT), errno.EINVAL)
    expect("MODIFY_SRQ: limit 9", c.modify_srq(h, 0, 9, SRQ_LIMIT), 0)
    e, a = c.query_srq(h)
    if expect("QUERY_SRQ", e, 0):
        check(f"QUERY_SRQ: max_wr {a[0]}, max_sge {a[1]}, limit {a[2]} as set",
              a == (depth, 1, 9))
    e, q = c.create_qp(pd, cq, cq, b.no_rq(max_recv_wr=4, max_recv_sge=1), srq=h)
    if expect("CREATE_QP: an RC QP on the SRQ (no RQ of its own)", e, 0):
        check(f"CREATE_QP on the SRQ: max_recv_wr {q[3]}, max_recv_sge {q[5]} are 0",
              (q[3], q[5]) == (0, 0))
        expect("DESTROY_SRQ while a QP uses it (EBUSY)", c.destroy_srq(h), errno.EBUSY)
        expect("DESTROY_QP of the SRQ's QP", c.destroy_qp(q[0]), 0)
    e, q = c.create_qp(pd, cq, cq, b.params(), srq=h)
    if e == 0:
        c.destroy_qp(q[0])
    expect("CREATE_QP: an SRQ and an RQ of its own (EINVAL)", e, errno.EINVAL)
    expect("DESTROY_SRQ", c.destroy_srq(h), 0)
    expect("DESTROY_SRQ of the destroyed handle refused", c.destroy_srq(h),
           (errno.EINVAL, errno.ENOENT))


def check_mr(c, pd):
    buf = anon(64 * 1024)
    ro = anon(64 * 1024, prot=mmap.PROT_READ)
    rw = ACC_LOCAL_WRITE | ACC_REMOTE_WRITE | ACC_REMOTE_READ

    def bad(name, r, want):
        e, v = r
        if not e:
            c.dereg_mr(v[0])
        return expect(f"REG_MR: {name} ({'/'.join(ename(w) for w in (want if isinstance(want, tuple) else (want,)))})", e, want)

    def good(name, r):
        e, v = r
        if expect(f"REG_MR: {name}", e, 0):
            expect(f"REG_MR: {name}: DEREG_MR", c.dereg_mr(v[0]), 0)

    bad("access bit 30, beyond the optional range (ib_core)",
        c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | 1 << 30), errno.EINVAL)
    bad("access bit 31 (ib_core)", c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | 1 << 31),
        errno.EINVAL)
    bad("access bit 10, below the optional range (ib_core)",
        c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | 1 << 10), errno.EINVAL)
    bad("REMOTE_WRITE without LOCAL_WRITE (ib_core)",
        c.reg_mr(pd, buf, 65536, ACC_REMOTE_WRITE), errno.EINVAL)
    bad("ON_DEMAND without ODP (ib_core)",
        c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | ACC_ON_DEMAND), errno.EOPNOTSUPP)
    good("MW_BIND accepted (device 1.7 memory windows)",
         c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | ACC_MW_BIND))
    good("optional access bits 20 and 29 ignored, accepted",
         c.reg_mr(pd, buf, 65536, ACC_LOCAL_WRITE | ACC_OPTIONAL_FIRST | ACC_OPTIONAL_LAST))
    bad("length 0", c.reg_mr(pd, buf, 0, rw), errno.EINVAL)
    bad("unmapped range", c.reg_mr(pd, hole(64 * 1024), 65536, rw), errno.EFAULT)
    bad("range running past its mapping into a guard page",
        c.reg_mr(pd, buf + 32 * 1024, 65536, rw), errno.EFAULT)
    bad("start 0", c.reg_mr(pd, 0, 65536, rw), (errno.EFAULT, errno.EINVAL))
    bad("start + length wraps (length 2^64 - 4096)",
        c.reg_mr(pd, buf, (1 << 64) - PAGE, rw), (errno.EINVAL, errno.EFAULT, errno.ENOMEM))
    bad("start and hca_va page offsets differ (ib_core)",
        c.reg_mr(pd, buf, 65536, rw, hca_va=buf + 8), errno.EINVAL)
    bad("read-only memory with LOCAL_WRITE", c.reg_mr(pd, ro, 65536, ACC_LOCAL_WRITE),
        errno.EFAULT)
    good("read-only memory with REMOTE_READ only accepted",
         c.reg_mr(pd, ro, 65536, ACC_REMOTE_READ))
    bad("PD handle 0xdead", c.reg_mr(0xDEAD, buf, 65536, rw), (errno.EINVAL, errno.ENOENT))
    e, v = c.reg_mr(pd, buf, 65536, rw)
    if expect("REG_MR: valid 64 KiB MR after the refused ones", e, 0):
        h, lkey, rkey = v
        print(f"# mr handle {h} lkey {lkey:#x} rkey {rkey:#x}")
        check(f"REG_MR: lkey {lkey:#x} = rkey {rkey:#x}", lkey == rkey)
        check(f"REG_MR: lkey >> 8 = {lkey >> 8:#x} != 0", lkey >> 8 != 0)
        e2, v2 = c.reg_mr(pd, buf, 65536, rw)
        if expect("REG_MR: the same range again", e2, 0):
            check(f"REG_MR: the second MR has another key ({v2[1]:#x} != {lkey:#x})",
                  v2[1] != lkey)
            expect("DEREG_MR (second)", c.dereg_mr(v2[0]), 0)
        e3, v3 = c.reg_mr(pd, buf + 4096 + 100, 1000, ACC_LOCAL_WRITE)
        if expect("REG_MR: 1000 bytes at an unaligned start", e3, 0):
            expect("DEREG_MR (unaligned)", c.dereg_mr(v3[0]), 0)
        expect("DEREG_MR", c.dereg_mr(h), 0)
        expect("DEREG_MR of the deregistered handle refused", c.dereg_mr(h),
               (errno.EINVAL, errno.ENOENT))


def check_close(path, pin0):
    # 1. Objects left open, plain close.
    c = Ctx(path)
    if not expect("close test: GET_CONTEXT on a second fd", c.err, 0):
        c.close()
        return
    e, pd = c.alloc_pd()
    ring, db = anon(PAGE), anon(PAGE)
    e1, cq = c.create_cq(ring, db, 64 if c.max_cqe >= 64 else 2, 1)
    b = QpBufs(c)
    e2 = e3 = errno.EBADE
    if not e1:
        e2, _ = c.create_qp(pd, cq[0], cq[0], b.params())
    mr = anon(65536)
    e3, _ = c.reg_mr(pd, mr, 65536, ACC_LOCAL_WRITE | ACC_REMOTE_WRITE | ACC_REMOTE_READ)
    expect("close test: PD, CQ, QP and MR created", e or e1 or e2 or e3, 0)
    check("close test: pages pinned while they exist", vm_pinned() > pin0,
          f"VmPin {vm_pinned()} kB, baseline {pin0} kB")
    try:
        c.close()
        e = 0
    except OSError as x:
        e = x.errno
    expect("close() of the fd with a CQ, QP and MR still open", e, 0)
    check("close test: every pin released (VmPin back to baseline)", vm_pinned() == pin0,
          f"VmPin {vm_pinned()} kB, baseline {pin0} kB")

    # 2. The same with the doorbell page still mapped: the context goes
    # when the mapping does.
    c = Ctx(path)
    if not expect("close test 2: GET_CONTEXT", c.err, 0):
        c.close()
        return
    try:
        m = mmap.mmap(c.fd, PAGE, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE, offset=c.db_off)
    except OSError as x:
        m = None
        expect("close test 2: mmap of the doorbell page", x.errno, 0)
    e, pd = c.alloc_pd()
    e1, cq = c.create_cq(ring, db, 64 if c.max_cqe >= 64 else 2, 1)
    e2 = errno.EBADE
    if not e1:
        e2, _ = c.create_qp(pd, cq[0], cq[0], b.params())
    e3, _ = c.reg_mr(pd, mr, 65536, ACC_LOCAL_WRITE)
    expect("close test 2: PD, CQ, QP, MR created", e or e1 or e2 or e3, 0)
    try:
        c.close()
        if m:
            m.close()
        e = 0
    except OSError as x:
        e = x.errno
    expect("close() with the doorbell page still mapped, then munmap", e, 0)
    check("close test 2: every pin released (VmPin back to baseline)", vm_pinned() == pin0,
          f"VmPin {vm_pinned()} kB, baseline {pin0} kB")

    # 3. More open/close cycles than there are doorbell pages: none leaks.
    n, fails, first = DB_PAGES + 44, 0, ""
    for i in range(n):
        c = Ctx(path)
        e = c.err
        if not e:
            e, _ = c.create_cq(ring, db, 2, 1)
        c.close()
        if e:
            fails += 1
            first = first or f"cycle {i}: errno {ename(e)}"
    check(f"{n} open/GET_CONTEXT/CREATE_CQ/close cycles (no doorbell page or CQ leaks)",
          fails == 0, f"{fails} failed, first {first}")


def kernel_driver_id(path):
    """The driver id the kernel reports for uverbs device PATH (RDMA netlink,
    asked by uverbs-driver-id.py beside this file)."""
    spec = importlib.util.spec_from_file_location(
        "uverbs_driver_id", os.path.join(os.path.dirname(__file__), "uverbs-driver-id.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(f"/sys/class/infiniband_verbs/{os.path.basename(path)}/ibdev") as f:
        return mod.kernel_driver_id(f.read().strip())


def main():
    global DRIVER_ID
    path = sys.argv[1]
    DRIVER_ID = kernel_driver_id(path)
    pin0 = vm_pinned()
    c = Ctx(path)
    if not check_context(path, c):
        return 1
    e, pd = c.alloc_pd()
    if not expect("ALLOC_PD", e, 0):
        return 1

    ring = anon(PAGE)
    dbrec = anon(PAGE)
    ro_ring = anon(PAGE, prot=mmap.PROT_READ)
    small_ring = anon(PAGE)
    # CREATE_CQ through the legacy write() command: ib_core offers it only
    # when the driver sets ops.create_cq (UAPI_DEF_METHOD_NEEDS_FN(create_cq)
    # in uverbs_cmd.c), the ioctl method with create_cq or create_user_cq.
    Ctx.cq_path = "write"
    e, v = c.create_cq(ring, dbrec, 64 if c.max_cqe >= 64 else 2, 1)
    if expect("CREATE_CQ via the legacy write() command (a valid request)", e, 0):
        expect("DESTROY_CQ of it", c.destroy_cq(v[0]), 0)
    for cq_path in ["ioctl"] + (["write"] if not e else []):
        Ctx.cq_path = cq_path
        check_cq(c, ring, dbrec, ro_ring, small_ring)
    Ctx.cq_path = "ioctl"
    check("no pages left pinned by the CQ commands (VmPin back to baseline)",
          vm_pinned() == pin0, f"VmPin {vm_pinned()} kB, baseline {pin0} kB")

    d = 256 if c.max_cqe >= 256 else pow2_floor(c.max_cqe)
    cq_ring = anon(max(PAGE, d * CQE_SIZE))
    e, v = c.create_cq(cq_ring, dbrec + 8, d, d // 2)
    if expect(f"CREATE_CQ: CQ for the QPs (depth {d})", e, 0):
        cq = v[0]
        check_qp(c, pd, cq, QpBufs(c))
        check_srq(c, pd, cq, QpBufs(c))
        expect("DESTROY_CQ of the QPs' CQ", c.destroy_cq(cq), 0)
    check("no pages left pinned by the QP and SRQ commands (VmPin back to baseline)",
          vm_pinned() == pin0, f"VmPin {vm_pinned()} kB, baseline {pin0} kB")

    check_mr(c, pd)
    check("no pages left pinned by the MR commands (VmPin back to baseline)",
          vm_pinned() == pin0, f"VmPin {vm_pinned()} kB, baseline {pin0} kB")
    expect("DEALLOC_PD", c.dealloc_pd(pd), 0)

    # Still usable at the end.
    e, pd = c.alloc_pd()
    e1, v = c.create_cq(ring, dbrec, 2, 1)
    expect("the first fd still works at the end (ALLOC_PD, CREATE_CQ)", e or e1, 0)
    c.close()

    check_close(path, pin0)
    print(f"# {failures} failed")
    return min(failures, 100)


if __name__ == "__main__":
    sys.exit(main())
