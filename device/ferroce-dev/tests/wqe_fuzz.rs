// SPDX-License-Identifier: GPL-2.0
//! A bounded, seeded fuzz loop for the WQE decoder: send and receive WQEs
//! written straight into the SQ/RQ rings of two connected RC QPs, then the
//! doorbells rung and the wire run.
//!
//! Most WQEs are well formed (WRITE, WRITE with immediate, SEND, SEND with
//! immediate, READ; SGE lists of 0 to the maximum 12 entries, inline data up
//! to max_inline, lengths 0, 1 and around the page and the MTU, ranges that
//! end exactly at the end of an MR, zero-length SGEs with any key, which
//! IBTA C9-88 does not validate). Hostile ones break one rule each: an
//! unknown or unsupported opcode (atomics), an unknown flag or the UD-only
//! AV flag, num_sge beyond the ring stride, inline data longer than
//! max_inline or the stride, inline READ, an SGE one byte past the end of
//! its MR, before its start, at the canary's address, with an unknown key
//! or a key of another PD, a READ into a read-only MR, a remote key of
//! another PD, unknown, without the right or one byte past the end, a
//! LOCAL_INV of no MR, a BIND_MW of no memory window; receive WQEs with
//! num_sge beyond the stride, an SGE outside or without local write, or
//! too small for the SEND. Some WQEs are random bytes. The responder has
//! two type 1 memory windows bound (1.7): WRITEs and READs go through them
//! too, and hostile ones break a window's rule (range one byte past its
//! end, a right it lacks, a stale variant). Some WQEs are ATOMIC_WRITEs
//! (into the WRITE slots, through the MR or the window) and FLUSHes (of a
//! range or of the whole MR) of device 1.8; hostile ones are misaligned,
//! past the MR, through a read-only window, a FLUSH through a window, of
//! an MR without FLUSH_GLOBAL, PERSISTENT, of a type or level the spec
//! does not name, or carry SGEs, inline data or reserved bits.
//!
//! For every WQE (all are signaled): a hostile WQE completes with an error
//! status (IBTA 10.8.3: local errors complete the WQE in error, remote ones
//! with the NAK's status, 9.7.5.2), never SUCCESS; a well-formed one
//! before the first failure completes SUCCESS and its data is byte-exact at
//! the target; a receive completes SUCCESS only for a well-formed SEND into
//! a well-formed receive, with its data. Both devices do their DMA through a
//! recording memory: no access outside mapped memory, none to the other
//! PD's MR, the guard pages after the MRs or the canary region, no write to
//! the rings, the read-only MRs or a READ source, and the guard, canary and
//! read-only bytes are unchanged at the end. The same runs with the
//! responder's receive WQEs in a shared receive queue (1.6) instead of its
//! RQ: no write to its ring either. `FERROCE_WQE_FUZZ_BATCHES` raises the
//! number of batches per seed.

mod common;
#[path = "common/recording.rs"]
mod recording;

use std::sync::Arc;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::{FakeMemory, GuestMemory, Limits};
use recording::RecordingMemory;
use zerocopy::IntoBytes;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
const CANARY: u64 = 0x3000_0000;
const CANARY_SIZE: usize = 64 << 10;
const GUARD_BYTE: u8 = 0xee;
const BAD_KEY: u32 = 0x00ff_ff42;
/// SQ stride 256 with SGEs from byte 64: 12 fit (max_sge is 16).
const MAX_SQ_SGE: u8 = 12;
/// RQ stride 64 with SGEs from byte 16: 3 fit.
const MAX_RQ_SGE: u8 = 3;
/// max_inline of the nodes' QPs.
const MAX_INLINE: u32 = 128;
/// Requester MR: sources in [0, 32K), READ sinks (slot k at 32K + 4K k).
const A_MR: u64 = 64 << 10;
const A_SINKS: u64 = 32 << 10;
/// Responder MR: WRITE targets (slot k at 4K k) in [0, 32K), receive
/// buffers (slot j at 32K + 4K j) above.
const B_MR: u64 = 64 << 10;
const B_RECVS: u64 = 32 << 10;
const SLOT: u64 = 4096;
const RO_LEN: u64 = 8192;

fn pattern(tag: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(tag | 1) ^ ((i >> 8) as u8) ^ tag)
        .collect()
}

/// An MR followed by an unregistered guard page.
#[derive(Clone, Copy, Debug)]
struct Guarded {
    mr: MrInfo,
    guard: u64,
}

fn reg_guarded(n: &mut Node, len: u64, access: u32, fill: u8) -> Guarded {
    let pages = len.div_ceil(4096);
    let gpa = n.h.alloc((pages + 1) * 4096, 4096);
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = n.h.pbl_contig(gpa, pages as u32, 12);
    c.iova = 0x7f00_0000_0000 + gpa;
    c.length = len;
    c.pdn = n.pdn;
    c.access = access;
    c.key_variant = 0x21;
    let key = n.h.ok(&c);
    let guard = gpa + pages * 4096;
    n.fill(gpa, &pattern(fill, len));
    n.fill(guard, &[GUARD_BYTE; 4096]);
    Guarded {
        mr: MrInfo {
            key,
            iova: c.iova,
            gpa,
            len,
        },
        guard,
    }
}

/// One device with its MRs, its DMA recorded.
struct Side {
    n: Node,
    rec: Arc<RecordingMemory>,
    /// All access, the data path's MR.
    mr: Guarded,
    /// Local read only (no LOCAL_WRITE, no remote rights).
    ro: Guarded,
    /// Remote read only.
    rro: Guarded,
    /// All access, another PD.
    other: Guarded,
    /// Responder: a type 1 window over the WRITE half of `mr` (remote
    /// write and read); 0 on the requester.
    mw: u32,
    /// Responder: a type 1 window over `rro` (remote read); 0 on the
    /// requester.
    rmw: u32,
}

/// A side; with `srq` its QP takes its receive WQEs from an SRQ.
fn side(i: u8, srq: bool) -> Side {
    let fake = Arc::new(FakeMemory::new());
    fake.add_region(RAM, RAM_SIZE);
    fake.add_region(CANARY, CANARY_SIZE);
    fake.write(CANARY, &vec![GUARD_BYTE; CANARY_SIZE]).unwrap();
    let rec = Arc::new(RecordingMemory::new(fake.clone()));
    let h = Harness::enabled_over_mac(fake, rec.clone(), Limits::default(), 16, 256, node_mac(i));
    let mut n = Node::on(i, h);
    if srq {
        let si = n.create_srq(64, 0);
        n.create_srq_qp(QPT_RC, si);
    } else {
        n.create_qp(QPT_RC);
    }
    let len = if i == 36 { A_MR } else { B_MR };
    let mr = reg_guarded(
        &mut n,
        len,
        ALL_ACCESS | ACCESS_MW_BIND | ACCESS_FLUSH_GLOBAL,
        i,
    );
    let ro = reg_guarded(&mut n, RO_LEN, 0, i + 1);
    let rro = reg_guarded(&mut n, RO_LEN, ACCESS_REMOTE_READ | ACCESS_MW_BIND, i + 2);
    let home = n.pdn;
    n.pdn = n.h.alloc_pd();
    let other = reg_guarded(&mut n, RO_LEN, ALL_ACCESS, i + 3);
    n.pdn = home;
    Side {
        n,
        rec,
        mr,
        ro,
        rro,
        other,
        mw: 0,
        rmw: 0,
    }
}

/// Allocates two type 1 memory windows on the responder and binds them
/// with BIND_MW WQEs of its QP: `mw` over the WRITE half of its MR, `rmw`
/// over its remote read-only MR, the same addresses as the MRs'.
fn bind_windows(b: &mut Side) {
    let windows = [
        (b.mr.mr, B_RECVS, ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ),
        (b.rro.mr, RO_LEN, ACCESS_REMOTE_READ),
    ];
    let mut keys = Vec::new();
    for (i, (m, len, access)) in windows.into_iter().enumerate() {
        let mut c = CmdRegMr::zeroed();
        c.hdr.opcode = CMD_REG_MR;
        c.pdn = b.n.pdn;
        c.mr_type = MR_TYPE_MW1;
        c.key_variant = 0x30;
        let key = b.n.h.ok(&c) + 1;
        let mut raw = vec![0u8; 256];
        header(&mut raw, 900 + i as u64, WR_BIND_MW, WQE_SIGNALED, 0);
        raw[32..40].copy_from_slice(&m.va(0).to_le_bytes());
        raw[40..48].copy_from_slice(&len.to_le_bytes());
        raw[48..52].copy_from_slice(&key.to_le_bytes());
        raw[52..56].copy_from_slice(&m.key.to_le_bytes());
        raw[56..60].copy_from_slice(&access.to_le_bytes());
        write_sq(&mut b.n, &raw);
        keys.push(key);
    }
    b.n.ring_sq(0);
    let done: Vec<(u8, u8)> = b.n.poll().iter().map(|c| (c.opcode, c.status)).collect();
    assert_eq!(done, vec![(WC_BIND_MW, WC_SUCCESS); 2]);
    (b.mw, b.rmw) = (keys[0], keys[1]);
}

/// What a WQE must do.
#[derive(Clone)]
enum Expect {
    /// Hostile: must not complete SUCCESS.
    Fail(&'static str),
    /// Random bytes: anything but a panic or a stray access.
    Unknown,
    /// WRITE of these bytes at this offset of b's MR.
    Write(Vec<u8>, u64),
    /// READ of these bytes into these (offset of a's MR, length) pieces.
    Read(Vec<u8>, Vec<(u64, u64)>),
    /// SEND of these bytes into receive `j` (which must be well formed).
    Send(Vec<u8>),
    /// Nothing to check but success (zero-length READ, ...).
    Ok,
}

impl std::fmt::Debug for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expect::Fail(why) => write!(f, "Fail({why})"),
            Expect::Unknown => write!(f, "Unknown"),
            Expect::Write(d, at) => write!(f, "Write({} B at {at:#x})", d.len()),
            Expect::Read(d, sinks) => write!(f, "Read({} B into {sinks:x?})", d.len()),
            Expect::Send(d) => write!(f, "Send({} B)", d.len()),
            Expect::Ok => write!(f, "Ok"),
        }
    }
}

struct Wqe {
    raw: Vec<u8>,
    expect: Expect,
    /// Consumes a receive (SEND, WRITE with immediate).
    consumes_recv: bool,
}

fn put_sge(raw: &mut [u8], at: usize, addr: u64, len: u32, key: u32) {
    raw[at..at + 8].copy_from_slice(&addr.to_le_bytes());
    raw[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
    raw[at + 12..at + 16].copy_from_slice(&key.to_le_bytes());
}

fn boundary_len(rng: &mut Rng, max: u64) -> u64 {
    let lens = [0u64, 1, 2, 63, 64, 255, 1023, 1024, 1025, 2048, 4095, 4096];
    let l = lens[rng.below(lens.len() as u64) as usize];
    if rng.pct(20) {
        rng.below(max + 1)
    } else {
        l.min(max)
    }
}

/// A valid list of source SGEs on a (from the source half of a's MR or
/// from the local read-only MR, some to its exact end) of `total` bytes at
/// most; returns the SGEs and the bytes they gather.
fn source_sges(rng: &mut Rng, a: &Side, max_total: u64) -> (Vec<(u64, u32, u32)>, Vec<u8>) {
    let n = rng.below(u64::from(MAX_SQ_SGE) + 1) as usize;
    let n = if rng.pct(10) {
        MAX_SQ_SGE as usize
    } else {
        n.min(4)
    };
    let mut sges = Vec::new();
    let mut data = Vec::new();
    let mut left = max_total;
    let src = pattern(36, A_MR);
    let ro = pattern(37, RO_LEN);
    for _ in 0..n {
        let len = boundary_len(rng, left.min(4096));
        left -= len;
        if len == 0 && rng.pct(30) {
            // Zero-length: the key is not looked at.
            sges.push((rng.next(), 0, BAD_KEY));
            continue;
        }
        if rng.pct(30) {
            // In the read-only MR, sometimes ending at its last byte.
            let off = if rng.pct(50) {
                RO_LEN - len
            } else {
                rng.below(RO_LEN - len + 1)
            };
            sges.push((a.ro.mr.va(off), len as u32, a.ro.mr.key));
            data.extend_from_slice(&ro[off as usize..(off + len) as usize]);
        } else {
            let off = rng.below(A_SINKS - len + 1);
            sges.push((a.mr.mr.va(off), len as u32, a.mr.mr.key));
            data.extend_from_slice(&src[off as usize..(off + len) as usize]);
        }
    }
    (sges, data)
}

/// A hostile local SGE (len > 0): past the end, before the start, at the
/// canary, unknown key, other PD.
fn bad_local_sge(rng: &mut Rng, s: &Side) -> ((u64, u32, u32), &'static str) {
    let len = 1 + rng.below(4096) as u32;
    match rng.below(6) {
        0 => {
            let m = if rng.pct(50) { s.mr.mr } else { s.ro.mr };
            // One byte past the end.
            let off = m.len + 1 - u64::from(len);
            ((m.va(off), len, m.key), "SGE past the end of its MR")
        }
        1 => ((s.mr.mr.iova - 1, len, s.mr.mr.key), "SGE before its MR"),
        2 => (
            (
                s.mr.mr.iova.wrapping_add(CANARY.wrapping_sub(s.mr.mr.gpa)),
                len,
                s.mr.mr.key,
            ),
            "SGE at the canary",
        ),
        3 => ((s.mr.mr.va(0), len, BAD_KEY), "SGE with an unknown key"),
        4 => ((s.other.mr.va(0), len, s.other.mr.key), "SGE of another PD"),
        _ => (
            (s.mr.mr.va(0), len, s.mr.mr.key ^ 0x01),
            "SGE with a stale key variant",
        ),
    }
}

fn header(raw: &mut [u8], wr_id: u64, opcode: u8, flags: u8, num_sge: u8) {
    raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
    raw[8] = opcode;
    raw[9] = flags;
    raw[10] = num_sge;
}

/// One send WQE: well formed or hostile; `k` is its slot in the batch.
fn gen_wqe(rng: &mut Rng, a: &Side, b: &Side, wr_id: u64, k: u64) -> Wqe {
    let mut raw = vec![0u8; 256];
    if rng.pct(4) {
        for x in raw.iter_mut() {
            *x = rng.next() as u8;
        }
        raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
        // Signaled, so that success or failure is seen.
        raw[9] |= WQE_SIGNALED;
        let consumes_recv = matches!(
            raw[8],
            WR_SEND | WR_SEND_IMM | WR_RDMA_WRITE_IMM | WR_SEND_INV
        );
        return Wqe {
            raw,
            expect: Expect::Unknown,
            consumes_recv,
        };
    }
    if rng.pct(10) {
        return gen_placement(rng, a, b, wr_id, k);
    }
    let ops = [
        WR_RDMA_WRITE,
        WR_RDMA_WRITE_IMM,
        WR_SEND,
        WR_SEND_IMM,
        WR_RDMA_READ,
    ];
    let opcode = ops[rng.below(ops.len() as u64) as usize];
    let read = opcode == WR_RDMA_READ;
    let write = matches!(opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_IMM);
    let consumes_recv = matches!(opcode, WR_SEND | WR_SEND_IMM | WR_RDMA_WRITE_IMM);
    let mut flags = WQE_SIGNALED;
    let mut op_byte = opcode;
    raw[12..16].copy_from_slice(&(wr_id as u32).to_le_bytes());
    // The well-formed WQE.
    let mut expect;
    let mut num_sge;
    if read {
        // Sinks: pieces of slot k of a's sink half; source: b's remote
        // read-only MR, sometimes to its last byte.
        let total = boundary_len(rng, 4096);
        let off = if rng.pct(30) {
            RO_LEN - total
        } else {
            rng.below(RO_LEN - total + 1)
        };
        // Through the MR or the window over it.
        let rkey = if rng.pct(20) { b.rmw } else { b.rro.mr.key };
        raw[32..40].copy_from_slice(&b.rro.mr.va(off).to_le_bytes());
        raw[40..44].copy_from_slice(&rkey.to_le_bytes());
        let pieces = (1 + rng.below(3)).min(total.max(1));
        let mut sinks = Vec::new();
        let mut at = A_SINKS + k * SLOT;
        let mut left = total;
        for p in 0..pieces {
            let len = if p + 1 == pieces {
                left
            } else {
                rng.below(left + 1)
            };
            left -= len;
            put_sge(
                &mut raw,
                64 + 16 * p as usize,
                a.mr.mr.va(at),
                len as u32,
                a.mr.mr.key,
            );
            sinks.push((at, len));
            // Gaps between the pieces while the slot has room.
            at += len + if total + 16 <= SLOT { rng.below(8) } else { 0 };
        }
        num_sge = pieces as u8;
        let src = pattern(39, RO_LEN);
        let data = src[off as usize..(off + total) as usize].to_vec();
        expect = if total == 0 {
            Expect::Ok
        } else {
            Expect::Read(data, sinks)
        };
    } else {
        let (sges, data) = if rng.pct(25) {
            // Inline, up to max_inline exactly.
            let len = if rng.pct(30) {
                u64::from(MAX_INLINE)
            } else {
                rng.below(u64::from(MAX_INLINE) + 1)
            };
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            flags |= WQE_INLINE;
            raw[16..20].copy_from_slice(&(len as u32).to_le_bytes());
            raw[64..64 + len as usize].copy_from_slice(&bytes);
            (Vec::new(), bytes)
        } else {
            source_sges(rng, a, 4096)
        };
        for (i, &(addr, len, key)) in sges.iter().enumerate() {
            put_sge(&mut raw, 64 + 16 * i, addr, len, key);
        }
        num_sge = sges.len() as u8;
        if write {
            let dst = k * SLOT + rng.below(SLOT - data.len() as u64 + 1);
            // Through the MR or the window over its WRITE half.
            let rkey = if rng.pct(20) { b.mw } else { b.mr.mr.key };
            raw[32..40].copy_from_slice(&b.mr.mr.va(dst).to_le_bytes());
            raw[40..44].copy_from_slice(&rkey.to_le_bytes());
            expect = Expect::Write(data, dst);
        } else {
            expect = Expect::Send(data);
        }
    }
    // One hostile change, sometimes.
    if rng.pct(35) {
        let inline = flags & WQE_INLINE != 0;
        let reason = match rng.below(10) {
            0 => {
                // 8 is BIND_MW since 1.7 (case 9).
                let bad = [5u8, 6, 12, 10, 0x11, 0x1f, 0x21, 0x80, 0xff];
                op_byte = bad[rng.below(bad.len() as u64) as usize];
                "unknown or unsupported opcode"
            }
            1 => {
                let bad = [0x20u8, 0x40, 0x80, WQE_AV];
                flags |= bad[rng.below(bad.len() as u64) as usize];
                "unknown flag"
            }
            2 if !inline => {
                num_sge = MAX_SQ_SGE + 1 + rng.below(u64::from(255 - MAX_SQ_SGE)) as u8;
                "num_sge beyond the stride"
            }
            3 if !read => {
                flags |= WQE_INLINE;
                let lens = [MAX_INLINE + 1, 192, 193, 4096, u32::MAX];
                let len = lens[rng.below(lens.len() as u64) as usize];
                raw[16..20].copy_from_slice(&len.to_le_bytes());
                "inline longer than max_inline"
            }
            4 if read => {
                flags |= WQE_INLINE;
                "inline READ"
            }
            5 | 6 if !inline => {
                let (sge, why) = if read && rng.pct(30) {
                    (
                        (a.ro.mr.va(0), 1 + rng.below(4096) as u32, a.ro.mr.key),
                        "READ into a read-only MR",
                    )
                } else {
                    bad_local_sge(rng, a)
                };
                let i = rng
                    .below(u64::from(num_sge) + 1)
                    .min(u64::from(MAX_SQ_SGE) - 1) as u8;
                put_sge(&mut raw, 64 + 16 * usize::from(i), sge.0, sge.1, sge.2);
                num_sge = num_sge.max(i + 1);
                why
            }
            7 | 8 if read || write => {
                let total = match &expect {
                    Expect::Write(d, _) | Expect::Read(d, _) => d.len() as u64,
                    _ => 0,
                };
                if total == 0 {
                    // Zero-length transfers validate no R_Key (C9-88).
                    "none"
                } else {
                    let (va, key, why) = match rng.below(8) {
                        0 => (b.other.mr.va(0), b.other.mr.key, "remote key of another PD"),
                        1 => (b.mr.mr.va(0), BAD_KEY, "unknown remote key"),
                        2 if write => (
                            b.rro.mr.va(0),
                            b.rro.mr.key,
                            "WRITE to a remote read-only MR",
                        ),
                        2 => (
                            b.ro.mr.va(0),
                            b.ro.mr.key,
                            "READ of an MR without remote read",
                        ),
                        3 => {
                            let m = if read { b.rro.mr } else { b.mr.mr };
                            (
                                m.va(m.len + 1 - total),
                                m.key,
                                "remote range one byte past the end",
                            )
                        }
                        4 => (b.mr.mr.iova - 1, b.mr.mr.key, "remote range before the MR"),
                        // The window over the WRITE half: the MR goes on.
                        5 => (
                            b.mr.mr.va(B_RECVS + 1 - total),
                            b.mw,
                            "remote range one byte past the end of a window",
                        ),
                        6 if write => (b.rro.mr.va(0), b.rmw, "WRITE through a read-only window"),
                        _ => (b.mr.mr.va(0), b.mw ^ 0x01, "stale window variant"),
                    };
                    raw[32..40].copy_from_slice(&va.to_le_bytes());
                    raw[40..44].copy_from_slice(&key.to_le_bytes());
                    why
                }
            }
            9 if rng.pct(50) => {
                op_byte = WR_LOCAL_INV;
                num_sge = 0;
                flags &= !WQE_INLINE;
                raw[12..16].copy_from_slice(&BAD_KEY.to_be_bytes());
                "LOCAL_INV of no MR"
            }
            9 => {
                op_byte = WR_BIND_MW;
                num_sge = 0;
                flags &= !WQE_INLINE;
                // The segment: what the WQE had there, the MW key unknown.
                raw[48..52].copy_from_slice(&BAD_KEY.to_le_bytes());
                "BIND_MW of no memory window"
            }
            _ => "none",
        };
        if reason != "none" {
            expect = Expect::Fail(reason);
        }
    }
    header(&mut raw, wr_id, op_byte, flags, num_sge);
    let consumes_recv = consumes_recv && op_byte == opcode;
    Wqe {
        raw,
        expect,
        consumes_recv,
    }
}

/// An ATOMIC_WRITE (into slot `k` of b's WRITE half, through the MR or the
/// window over it) or a FLUSH (1.8; of a range of b's MR or of the whole
/// MR): well formed, or hostile in one way.
fn gen_placement(rng: &mut Rng, a: &Side, b: &Side, wr_id: u64, k: u64) -> Wqe {
    let mut raw = vec![0u8; 256];
    // The way a hostile one breaks the rules.
    let how = if rng.pct(35) {
        Some(rng.below(8))
    } else {
        None
    };
    let (opcode, expect, mut reason) = if rng.pct(50) {
        let dst = k * SLOT + 8 * rng.below(SLOT / 8);
        let data = rng.next().to_le_bytes();
        let rkey = if rng.pct(20) { b.mw } else { b.mr.mr.key };
        let mut seg = SqWqeAtomicWrite {
            remote_addr: b.mr.mr.va(dst),
            rkey,
            reserved0: 0,
            data,
            reserved1: 0,
        };
        let reason = match how {
            Some(0) => {
                seg.remote_addr += 1 + rng.below(7);
                "misaligned ATOMIC_WRITE"
            }
            Some(1) => {
                (seg.remote_addr, seg.rkey) = (b.rro.mr.va(0), b.rro.mr.key);
                "ATOMIC_WRITE to a remote read-only MR"
            }
            Some(2) => {
                (seg.remote_addr, seg.rkey) = (b.rro.mr.va(0), b.rmw);
                "ATOMIC_WRITE through a read-only window"
            }
            Some(3) => {
                seg.remote_addr = b.mr.mr.va(B_MR);
                "ATOMIC_WRITE past the MR"
            }
            Some(4) => {
                seg.rkey = BAD_KEY;
                "ATOMIC_WRITE with an unknown key"
            }
            _ => "none",
        };
        raw[SQ_WQE_SEG_OFFSET..SQ_WQE_DATA_OFFSET].copy_from_slice(seg.as_bytes());
        (WR_ATOMIC_WRITE, Expect::Write(data.to_vec(), dst), reason)
    } else {
        let whole = rng.pct(25);
        let (va, len) = if whole {
            (rng.next(), rng.next() as u32)
        } else {
            let len = boundary_len(rng, B_MR);
            (b.mr.mr.va(rng.below(B_MR - len + 1)), len as u32)
        };
        let mut seg = SqWqeFlush {
            remote_addr: va,
            rkey: b.mr.mr.key,
            length: len,
            r#type: FLUSH_GLOBAL,
            level: if whole { FLUSH_MR } else { FLUSH_RANGE },
            reserved0: [0; 6],
            reserved1: 0,
        };
        let reason = match how {
            Some(0) => {
                seg.r#type = [0, 4, 0x81, FLUSH_GLOBAL | 8][rng.below(4) as usize];
                "FLUSH of an unknown type"
            }
            Some(1) => {
                seg.level = 2 + rng.below(254) as u8;
                "FLUSH of an unknown level"
            }
            Some(2) => {
                seg.rkey = b.mw;
                "FLUSH through a window"
            }
            Some(3) if !whole => {
                (seg.remote_addr, seg.length) = (b.mr.mr.va(B_MR - 64), 65);
                "FLUSH of a range past the MR"
            }
            Some(3) => {
                seg.rkey = b.rro.mr.key;
                "FLUSH of an MR without FLUSH_GLOBAL"
            }
            Some(4) => {
                seg.r#type = FLUSH_PERSISTENT;
                "PERSISTENT FLUSH"
            }
            _ => "none",
        };
        raw[SQ_WQE_SEG_OFFSET..SQ_WQE_DATA_OFFSET].copy_from_slice(seg.as_bytes());
        (WR_FLUSH, Expect::Ok, reason)
    };
    let mut flags = WQE_SIGNALED;
    let mut num_sge = 0u8;
    match how {
        Some(5) => {
            put_sge(&mut raw, SQ_WQE_DATA_OFFSET, a.mr.mr.va(0), 8, a.mr.mr.key);
            num_sge = 1;
            reason = "ATOMIC_WRITE or FLUSH with an SGE";
        }
        Some(6) => {
            flags |= WQE_INLINE;
            raw[16..20].copy_from_slice(&(rng.below(9) as u32).to_le_bytes());
            reason = "ATOMIC_WRITE or FLUSH with inline data";
        }
        Some(7) => {
            // reserved0 of either segment (bytes 12..16, 18..24).
            let at = if opcode == WR_FLUSH { 18 } else { 12 };
            raw[SQ_WQE_SEG_OFFSET + at + rng.below(4) as usize] = 1 + rng.below(255) as u8;
            reason = "reserved bits in the segment";
        }
        _ => {}
    }
    header(&mut raw, wr_id, opcode, flags, num_sge);
    Wqe {
        raw,
        expect: if reason == "none" {
            expect
        } else {
            Expect::Fail(reason)
        },
        consumes_recv: false,
    }
}

/// A receive WQE for slot `j` of b's receive half: well formed (room for
/// `need` bytes or more) or hostile. Returns its bytes and whether it is
/// well formed and large enough.
fn gen_recv(rng: &mut Rng, b: &Side, wr_id: u64, j: u64, need: Option<u64>) -> (Vec<u8>, bool) {
    let mut raw = vec![0u8; 64];
    raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
    let base = B_RECVS + j * SLOT;
    let cap = match need {
        Some(n) if rng.pct(90) => n + rng.below(SLOT - n + 1),
        _ => rng.below(SLOT + 1),
    };
    let pieces = 1 + rng.below(u64::from(MAX_RQ_SGE));
    let mut left = cap;
    let mut at = base;
    for p in 0..pieces {
        let len = if p + 1 == pieces {
            left
        } else {
            rng.below(left + 1)
        };
        left -= len;
        put_sge(
            &mut raw,
            16 + 16 * p as usize,
            b.mr.mr.va(at),
            len as u32,
            b.mr.mr.key,
        );
        at += len;
    }
    raw[8] = pieces as u8;
    let mut good = need.is_some_and(|n| cap >= n);
    if rng.pct(12) {
        good = false;
        match rng.below(3) {
            0 => raw[8] = MAX_RQ_SGE + 1 + rng.below(250) as u8,
            1 => {
                let (sge, _) = bad_local_sge(rng, b);
                put_sge(&mut raw, 16, sge.0, sge.1.max(1), sge.2);
            }
            _ => put_sge(
                &mut raw,
                16,
                b.ro.mr.va(0),
                1 + rng.below(4096) as u32,
                b.ro.mr.key,
            ),
        }
    }
    (raw, good)
}

fn write_sq(n: &mut Node, raw: &[u8]) {
    let q = n.qps[0];
    let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
    n.h.mem.write(q.sq_base + (slot << 8), raw).unwrap();
    n.qps[0].sq_pi = q.sq_pi.wrapping_add(1);
    n.h.mem.write_u32(q.sq_dbrec, u32::from(n.qps[0].sq_pi));
}

fn post_rq(n: &mut Node, raw: &[u8]) {
    if !n.srqs.is_empty() {
        n.write_srq_wqe(0, raw);
        let pi = n.srqs[0].pi;
        n.set_srq_pi(0, pi);
        return;
    }
    let q = n.qps[0];
    let slot = u64::from(u32::from(q.rq_pi) & (q.rq_depth - 1));
    n.h.mem.write(q.rq_base + (slot << 6), raw).unwrap();
    let pi = q.rq_pi.wrapping_add(1);
    n.qps[0].rq_pi = pi;
    n.h.mem.write_u32(q.rq_dbrec, u32::from(pi));
    n.h.db(0, DB_RQ, ferroce_dev::doorbell::qp_db(q.qpn, u32::from(pi)));
}

/// RESET and reconnect both QPs (indices back to 0).
fn reconnect(a: &mut Side, b: &mut Side) {
    for s in [&mut *a, &mut *b] {
        let qpn = s.n.qps[0].qpn;
        assert_eq!(
            s.n.h.modify(attr_with(qpn, QPS_RESET, QP_ATTR_STATE)),
            STATUS_SUCCESS
        );
        // As a driver does: empty rings, doorbell records back to 0.
        let q = s.n.qps[0];
        s.n.h.mem.write_u32(q.sq_dbrec, 0);
        s.n.qps[0].sq_pi = 0;
        if s.n.srqs.is_empty() {
            s.n.h.mem.write_u32(q.rq_dbrec, 0);
            s.n.qps[0].rq_pi = 0;
        } else {
            // The SRQ lives on: the receives of the failed batch that no
            // SEND took are given up (pi back to the device's ci).
            let ci = s.n.srq_ci(0) as u16;
            s.n.srqs[0].pi = ci;
            s.n.set_srq_pi(0, ci);
        }
    }
    connect_pair(&mut a.n, 0, &mut b.n, 0, qp_attr);
}

/// The QPs' attributes: one RNR retry; FLUSH requests served (1.8).
fn qp_attr(attr: &mut QpAttr) {
    attr.rnr_retry = 1;
    attr.qp_access_flags |= ACCESS_FLUSH_GLOBAL;
}

/// The accesses of one side are within what it may touch.
fn check_accesses(s: &Side, name: &str, seed: u64) {
    let q = s.n.qps[0];
    let no_access = [
        (s.other.mr.gpa, s.other.mr.len + 4096),
        (s.mr.guard, 4096),
        (s.ro.guard, 4096),
        (s.rro.guard, 4096),
        (CANARY, CANARY_SIZE as u64),
    ];
    let srq_ring =
        s.n.srqs
            .first()
            .map_or((0, 0), |r| (r.ring, u64::from(r.depth) << SRQ_WQE_SHIFT));
    let no_write = [
        (s.ro.mr.gpa, RO_LEN),
        (s.rro.mr.gpa, RO_LEN),
        (q.sq_base, u64::from(q.sq_depth) << 8),
        (q.rq_base, u64::from(q.rq_depth) << 6),
        srq_ring,
    ];
    let hit = |a: &recording::Access, (start, len): (u64, u64)| {
        a.gpa < start + len && a.gpa + a.len > start
    };
    for acc in s.rec.take() {
        assert!(
            acc.ok,
            "seed {seed}: {name}: DMA outside guest memory: {acc:?}"
        );
        for r in no_access {
            assert!(!hit(&acc, r), "seed {seed}: {name}: DMA to {r:x?}: {acc:?}");
        }
        if acc.write {
            for r in no_write {
                assert!(
                    !hit(&acc, r),
                    "seed {seed}: {name}: write to {r:x?}: {acc:?}"
                );
            }
        }
    }
}

fn check_untouched(s: &Side, tag: u8, seed: u64) {
    assert_eq!(
        s.n.bytes(s.ro.mr.gpa, RO_LEN as usize),
        pattern(tag + 1, RO_LEN),
        "seed {seed}: ro"
    );
    assert_eq!(
        s.n.bytes(s.rro.mr.gpa, RO_LEN as usize),
        pattern(tag + 2, RO_LEN),
        "seed {seed}: rro"
    );
    assert_eq!(
        s.n.bytes(s.other.mr.gpa, RO_LEN as usize),
        pattern(tag + 3, RO_LEN),
        "seed {seed}: other"
    );
    for g in [s.mr.guard, s.ro.guard, s.rro.guard, s.other.guard] {
        assert!(
            s.n.bytes(g, 4096).iter().all(|&x| x == GUARD_BYTE),
            "seed {seed}: guard page {g:#x} written"
        );
    }
    assert!(
        s.n.bytes(CANARY, CANARY_SIZE)
            .iter()
            .all(|&x| x == GUARD_BYTE),
        "seed {seed}: canary written"
    );
}

fn fuzz_seed(seed: u64, batches: usize, srq: bool) -> (usize, usize, usize) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut a = side(36, false);
    let mut b = side(37, srq);
    connect_pair(&mut a.n, 0, &mut b.n, 0, qp_attr);
    bind_windows(&mut b);
    let (mut hostile, mut succeeded, mut failed) = (0, 0, 0);
    for batch in 0..batches as u64 {
        let n = 1 + rng.below(6);
        let wqes: Vec<Wqe> = (0..n)
            .map(|k| gen_wqe(&mut rng, &a, &b, batch * 100 + k, k))
            .collect();
        // One receive per WQE that consumes one, in order.
        let mut recvs = Vec::new();
        for (k, w) in wqes.iter().enumerate() {
            if w.consumes_recv {
                let need = match &w.expect {
                    Expect::Send(d) => Some(d.len() as u64),
                    Expect::Write(..) => Some(0),
                    _ => None,
                };
                let j = recvs.len() as u64;
                let (raw, good) = gen_recv(&mut rng, &b, 10_000 + batch * 100 + j, j, need);
                post_rq(&mut b.n, &raw);
                // WRITE with immediate uses only the receive's wr_id.
                let good = good || matches!(w.expect, Expect::Write(..));
                recvs.push((k, good, raw));
            }
        }
        for w in &wqes {
            write_sq(&mut a.n, &w.raw);
        }
        a.n.ring_sq(0);
        let rounds = Wire::new(seed ^ batch, Impair::default()).run(&a.n, &b.n, 50_000);
        assert!(rounds < 50_000, "seed {seed} batch {batch}: no convergence");
        let ca = a.n.poll();
        let cb = b.n.poll();
        let ctx = || {
            format!(
                "seed {seed} batch {batch}: {:?}\nreceives {:?}\n{ca:?}\n{cb:?}\na {:?}\nb {:?}",
                wqes.iter().map(|w| &w.expect).collect::<Vec<_>>(),
                recvs.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
                a.n.h.dev.counters().data,
                b.n.h.dev.counters().data,
            )
        };
        // Every WQE completes exactly once, in order.
        let ids: Vec<u64> = ca.iter().map(|c| c.wr_id).collect();
        let want: Vec<u64> = (0..n).map(|k| batch * 100 + k).collect();
        assert_eq!(ids, want, "{}", ctx());
        let first_fail = ca
            .iter()
            .position(|c| c.status != WC_SUCCESS)
            .unwrap_or(n as usize);
        for (k, (w, c)) in wqes.iter().zip(&ca).enumerate() {
            // A SEND (or WRITE with immediate) into a bad receive fails.
            let recv_good = recvs.iter().find(|r| r.0 == k).is_none_or(|r| r.1);
            match &w.expect {
                Expect::Fail(why) => {
                    hostile += 1;
                    assert_ne!(c.status, WC_SUCCESS, "{why}: {}", ctx());
                }
                Expect::Unknown => {}
                _ if k < first_fail => {
                    assert!(recv_good, "success with a bad receive: {}", ctx());
                    assert_eq!(c.status, WC_SUCCESS, "{}", ctx());
                }
                _ if recv_good && k == first_fail => {
                    panic!("a well-formed WQE failed: {}", ctx());
                }
                _ => assert_ne!(c.status, WC_SUCCESS, "{}", ctx()),
            }
            if c.status != WC_SUCCESS {
                failed += 1;
                continue;
            }
            succeeded += 1;
            match &w.expect {
                Expect::Write(data, dst) => {
                    let got = b.n.bytes(b.mr.mr.at(*dst), data.len());
                    assert!(got == *data, "WRITE {k} data: {}", ctx());
                }
                Expect::Read(data, sinks) => {
                    let mut got = Vec::new();
                    for &(at, len) in sinks {
                        got.extend(a.n.bytes(a.mr.mr.at(at), len as usize));
                    }
                    assert!(got == *data, "READ {k} data: {}", ctx());
                }
                _ => {}
            }
        }
        // Receives: success only for a well-formed WQE, with its data.
        for c in &cb {
            let j = c.wr_id.wrapping_sub(10_000 + batch * 100) as usize;
            assert!(j < recvs.len(), "receive CQE of another batch: {}", ctx());
            let (k, good, ref raw) = recvs[j];
            if c.status != WC_SUCCESS {
                continue;
            }
            assert!(good, "a bad receive succeeded: {}", ctx());
            match &wqes[k].expect {
                Expect::Send(data) => {
                    assert_eq!(c.byte_len as usize, data.len(), "{}", ctx());
                    let mut got = Vec::new();
                    for p in 0..usize::from(raw[8]) {
                        let o = 16 + 16 * p;
                        let addr = u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
                        let len = u32::from_le_bytes(raw[o + 8..o + 12].try_into().unwrap());
                        got.extend(b.n.bytes(addr - b.mr.mr.iova + b.mr.mr.gpa, len as usize));
                    }
                    got.truncate(data.len());
                    assert!(got == *data, "SEND {k} data: {}", ctx());
                }
                Expect::Write(..) => assert_eq!(c.opcode, WC_RECV_RDMA_WITH_IMM, "{}", ctx()),
                Expect::Unknown => {}
                e => panic!("receive completed for {e:?}: {}", ctx()),
            }
        }
        check_accesses(&a, "requester", seed);
        check_accesses(&b, "responder", seed);
        let err = |s: &Side| s.n.h.dev.qp_state(s.n.qps[0].qpn) != Some(QPS_RTS);
        if err(&a) || err(&b) || first_fail < n as usize {
            reconnect(&mut a, &mut b);
            let _ = (a.rec.take(), b.rec.take());
        }
    }
    check_untouched(&a, 36, seed);
    check_untouched(&b, 37, seed);
    (hostile, succeeded, failed)
}

/// IBTA 10.8.3 and 9.7.5.2 (a WQE that breaks a rule completes in error,
/// nothing is read or written for it), C9-88 (zero-length transfers
/// validate no key): 12 seeds of 60 batches of up to 6 WQEs.
#[test]
fn hostile_wqes_fail_and_touch_nothing_outside_their_mrs() {
    let batches = std::env::var("FERROCE_WQE_FUZZ_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let (mut hostile, mut ok, mut bad) = (0, 0, 0);
    for seed in 1..=12 {
        let (h, s, f) = fuzz_seed(seed, batches, false);
        hostile += h;
        ok += s;
        bad += f;
    }
    eprintln!("{hostile} hostile WQEs; {ok} completions succeeded, {bad} failed");
    assert!(hostile > 100 && ok > 100, "the fuzz reaches too little");
}

/// The same with the responder's receive WQEs in an SRQ: 4 seeds.
#[test]
fn hostile_wqes_with_an_srq_fail_and_touch_nothing_outside_their_mrs() {
    let batches = std::env::var("FERROCE_WQE_FUZZ_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let (mut hostile, mut ok) = (0, 0);
    for seed in 101..=104 {
        let (h, s, _) = fuzz_seed(seed, batches, true);
        hostile += h;
        ok += s;
    }
    assert!(hostile > 30 && ok > 30, "the fuzz reaches too little");
}
