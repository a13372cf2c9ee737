// SPDX-License-Identifier: GPL-2.0
//! A reference model of an RC requester/responder pair, checked against the
//! engine by proptest.
//!
//! proptest generates a workload (RDMA WRITE, RDMA READ and SEND work
//! requests of sizes around the path MTU, and (1.8) ATOMIC_WRITEs and
//! FLUSHes of a range or of the whole MR, some with a bad local key, a bad,
//! read-only, cross-PD or out-of-bounds remote key, some through a memory
//! window (1.7) of the responder, in or out of its bounds, receives that may be too
//! small or missing, random retry_cnt and rnr_retry) and a wire schedule
//! (frames dropped, duplicated, delayed, sent late in their batch, with a
//! bad ICRC, old frames of either direction replayed: stale ACKs, NAKs, RNR
//! NAKs, READ responses and requests; optionally a blackout of one or both
//! directions from some frame on, which loses every later frame of that
//! direction, late and replayed ones included). Two devices are driven by
//! hand: WQEs are posted in rounds, frames are moved under the schedule,
//! and the clock only advances to the next timer when nothing is on the
//! wire, so a run is deterministic.
//!
//! The model executes the work requests in order, as IBTA vol. 1 9.5 and
//! 9.7 require of an RC QP: each request completes in order with its
//! opcode, status and byte count, and the first request that fails decides
//! the rest (10.7.3.1: the QP goes to the error state, later WQEs complete
//! with flush error; 11.6.2 for the responder's receives). Zero-length
//! transfers validate no R_Key (C9-88). A missing receive is answered with
//! RNR NAKs until rnr_retry is used up (9.7.5.2.8); an ATOMIC_WRITE places
//! its 8 bytes once, a FLUSH changes nothing, and a window grants no flush
//! (device.rst "Atomic write and flush"); lost frames are retried
//! at most retry_cnt times (9.7.6.1.3) and then fail with
//! RETRY_EXC_ERR. The engine must agree on every CQE of both QPs and on
//! every byte of both memories:
//!
//! * an undisturbed run, or one whose wire faults are too few to use up
//!   retry_cnt, must end exactly as the model says (the one case a lost
//!   error NAK changes: the responder is in the error state and never
//!   answers again, so the request times out with RETRY_EXC_ERR);
//! * otherwise (blackouts, more faults than retries) the first failing
//!   request may fail earlier with RETRY_EXC_ERR, and then after at most
//!   retry_cnt + 1 timeouts of the blackout; everything before it must
//!   have succeeded with the right data, everything after it is flushed;
//! * memory outside the targets of work requests that did not complete
//!   successfully is byte-exact; the read-only and the other PD's MR and
//!   the requester's source buffer are never written.
//!
//! `PROPTEST_CASES` sets the number of cases (default 64); a failure prints
//! the shrunk workload and schedule, the CQEs and the wire trace.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{self, aeth, op};
use proptest::prelude::*;
use proptest::test_runner::Config;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
/// Requester MR: sources in the first half, READ sinks in the second.
const A_MR: usize = 64 << 10;
const SINK: usize = 32 << 10;
/// Responder MR: the WRITE/READ area in the first half, receive buffers
/// (one 4 KiB slot each) in the second.
const B_MR: usize = 64 << 10;
const SLOTS: usize = 32 << 10;
const SLOT: usize = 4096;
const MAX_RECVS: usize = 8;
const MAX_LEN: u32 = 4096;
/// Offsets stay below this so that `offset + MAX_LEN` fits its region.
const MAX_OFF: u32 = 28 << 10;
const RO_LEN: usize = 4096;
const BAD_KEY: u32 = 0xdead_beef;
const MAX_ROUNDS: usize = 20_000;

// ------------------------------------------------------------ workload

/// The remote key (and address) a WRITE or READ uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// The responder's MR, in bounds.
    Good,
    /// An MR with remote read access only.
    ReadOnly,
    /// An MR of another PD of the responder.
    OtherPd,
    /// A key naming no MR.
    Garbage,
    /// The right key, the range running past the end of the MR.
    OutOfBounds,
    /// A type 1 memory window (1.7) over the responder's WRITE/READ area,
    /// with remote write and read: as good as the MR's key there.
    Window,
    /// The window's key, the range running past the end of the window
    /// (into the MR's receive buffers, which the window does not cover).
    OutsideWindow,
}

impl Key {
    /// The key grants remote write and read over the range.
    fn grants(self) -> bool {
        matches!(self, Key::Good | Key::Window)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        len: u32,
        src: u32,
        dst: u32,
        key: Key,
        lkey_bad: bool,
    },
    Read {
        len: u32,
        sink: u32,
        src: u32,
        key: Key,
        lkey_bad: bool,
    },
    Send {
        len: u32,
        src: u32,
        imm: bool,
        lkey_bad: bool,
    },
    /// 1.8: 8 bytes at the 8-byte aligned offset `dst`.
    AtomicWrite { dst: u32, data: u64, key: Key },
    /// 1.8: a FLUSH of `len` bytes at `off`, or of the whole MR.
    Flush {
        off: u32,
        len: u32,
        key: Key,
        whole_mr: bool,
    },
}

impl Op {
    /// The outcome at the responder of an ATOMIC_WRITE or FLUSH (the
    /// QP serves both, the responder's MR has FLUSH_GLOBAL); None for the
    /// other operations.
    fn placement_ok(&self) -> Option<bool> {
        match *self {
            // In bounds of the MR and of the window: REMOTE_WRITE.
            Op::AtomicWrite { key, .. } => Some(key.grants()),
            // No window grants a flush; an empty range at the MR's end
            // and the whole MR are inside it.
            Op::Flush {
                len, key, whole_mr, ..
            } => Some(key == Key::Good || (key == Key::OutOfBounds && (whole_mr || len == 0))),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
struct Post {
    op: Op,
    signaled: bool,
}

#[derive(Clone, Debug)]
struct Workload {
    posts: Vec<Post>,
    /// Receive buffer sizes, posted before any send.
    recvs: Vec<u32>,
    retry_cnt: u8,
    rnr_retry: u8,
    /// Send WQEs posted (each with a doorbell) per wire round.
    per_round: usize,
    /// The responder's QP takes its receives from a shared receive queue
    /// (1.6): the same outcome, except that a failed QP flushes no receive
    /// it did not take (they stay in the SRQ).
    srq: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    AtoB,
    BtoA,
    Both,
}

#[derive(Clone, Copy, Debug)]
enum Fate {
    Drop,
    Dup,
    /// Delivered this many rounds later.
    Delay(u8),
    /// Delivered at the end of its batch.
    Late,
    /// ICRC broken: the receiver must drop it.
    Corrupt,
}

#[derive(Clone, Debug)]
struct Schedule {
    /// (frame number, what happens to it); frames are numbered in the
    /// order they leave either device.
    fates: Vec<(u16, Fate)>,
    /// (round, pick): in that round, a frame delivered earlier
    /// (`pick` modulo their number) is delivered again.
    replays: Vec<(u16, u16)>,
    /// From this frame on, every frame in that direction is lost.
    blackout: Option<(u16, Dir)>,
}

fn len_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(1023),
        Just(1024),
        Just(1025),
        Just(2048),
        Just(MAX_LEN),
        0..=MAX_LEN,
    ]
}

fn key_strategy() -> impl Strategy<Value = Key> {
    prop_oneof![
        12 => Just(Key::Good),
        1 => Just(Key::ReadOnly),
        1 => Just(Key::OtherPd),
        1 => Just(Key::Garbage),
        1 => Just(Key::OutOfBounds),
        2 => Just(Key::Window),
        1 => Just(Key::OutsideWindow),
    ]
}

fn lkey_bad_strategy() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.04)
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            len_strategy(),
            0..=MAX_OFF,
            0..=MAX_OFF,
            key_strategy(),
            lkey_bad_strategy()
        )
            .prop_map(|(len, src, dst, key, lkey_bad)| Op::Write {
                len,
                src,
                dst,
                key,
                lkey_bad
            }),
        (
            len_strategy(),
            0..=MAX_OFF,
            0..=MAX_OFF,
            key_strategy(),
            lkey_bad_strategy()
        )
            .prop_map(|(len, sink, src, key, lkey_bad)| Op::Read {
                len,
                sink,
                src,
                key,
                lkey_bad
            }),
        (
            len_strategy(),
            0..=MAX_OFF,
            any::<bool>(),
            lkey_bad_strategy()
        )
            .prop_map(|(len, src, imm, lkey_bad)| Op::Send {
                len,
                src,
                imm,
                lkey_bad
            }),
    ]
}

fn placement_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..=MAX_OFF / 8, any::<u64>(), key_strategy()).prop_map(|(dst, data, key)| {
            Op::AtomicWrite {
                dst: dst * 8,
                data,
                key,
            }
        }),
        (
            0..=MAX_OFF,
            len_strategy(),
            key_strategy(),
            prop::bool::weighted(0.3)
        )
            .prop_map(|(off, len, key, whole_mr)| Op::Flush {
                off,
                len,
                key,
                whole_mr
            }),
    ]
}

/// Mostly WRITEs, READs and SENDs, some ATOMIC_WRITEs and FLUSHes.
fn any_op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![5 => op_strategy(), 1 => placement_strategy()]
}

fn workload_strategy() -> impl Strategy<Value = Workload> {
    (
        prop::collection::vec(
            (any_op_strategy(), prop::bool::weighted(0.85))
                .prop_map(|(op, signaled)| Post { op, signaled }),
            1..12,
        ),
        prop::collection::vec(
            prop_oneof![3 => Just(MAX_LEN), 1 => len_strategy()],
            0..=MAX_RECVS,
        ),
        0..=7u8,
        0..=6u8,
        1..=4usize,
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(posts, recvs, retry_cnt, rnr_retry, per_round, srq)| Workload {
                posts,
                recvs,
                retry_cnt,
                rnr_retry,
                per_round,
                srq,
            },
        )
}

fn schedule_strategy() -> impl Strategy<Value = Schedule> {
    let fate = prop_oneof![
        3 => Just(Fate::Drop),
        2 => Just(Fate::Dup),
        2 => (1..=3u8).prop_map(Fate::Delay),
        2 => Just(Fate::Late),
        1 => Just(Fate::Corrupt),
    ];
    let dir = prop_oneof![Just(Dir::AtoB), Just(Dir::BtoA), Just(Dir::Both)];
    (
        prop::collection::vec((0..96u16, fate), 0..6),
        prop::collection::vec((0..60u16, any::<u16>()), 0..4),
        prop::option::weighted(0.2, (0..80u16, dir)),
    )
        .prop_map(|(fates, replays, blackout)| Schedule {
            fates,
            replays,
            blackout,
        })
}

// ------------------------------------------------------------ data

fn a_src_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(7) ^ ((i >> 8) as u8).wrapping_mul(13) ^ 0x5a
}

fn b_init_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(11) ^ ((i >> 8) as u8).wrapping_mul(3) ^ 0xc3
}

fn ro_byte(i: usize) -> u8 {
    (i as u8) ^ 0x3c
}

fn a_init() -> Vec<u8> {
    (0..A_MR)
        .map(|i| if i < SINK { a_src_byte(i) } else { 0x11 })
        .collect()
}

fn b_init() -> Vec<u8> {
    (0..B_MR)
        .map(|i| if i < SLOTS { b_init_byte(i) } else { 0x22 })
        .collect()
}

fn overlaps(a: u32, alen: u32, b: u32, blen: u32) -> bool {
    alen > 0 && blen > 0 && a < b + blen && b < a + alen
}

/// A WRITE (or ATOMIC_WRITE) that may overwrite the source of an earlier
/// READ carries the fence indicator (IBTA 10.8.3.3): without it the READ's
/// data would be undefined (its response may be re-read after the WRITE
/// landed).
fn needs_fence(posts: &[Post], i: usize) -> bool {
    let (len, dst, key) = match posts[i].op {
        Op::Write { len, dst, key, .. } => (len, dst, key),
        Op::AtomicWrite { dst, key, .. } => (8, dst, key),
        _ => return false,
    };
    key.grants()
        && posts[..i].iter().any(|p| {
            matches!(p.op, Op::Read { len: rl, src, key, .. } if key.grants() && overlaps(src, rl, dst, len))
        })
}

// ------------------------------------------------------------ the model

/// What the model says one work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sem {
    Ok,
    /// Fails at the requester before anything is sent.
    Local(u8),
    /// The responder NAKs it and goes to the error state; the receive it
    /// consumed (if any) completes with the given status.
    Remote(u8, Option<(usize, u8)>),
    /// No receive: RNR NAKs until rnr_retry is used up.
    Rnr,
}

impl Sem {
    fn status(self) -> u8 {
        match self {
            Sem::Ok => WC_SUCCESS,
            Sem::Local(st) | Sem::Remote(st, _) => st,
            Sem::Rnr => WC_RNR_RETRY_EXC_ERR,
        }
    }
}

/// The model of both QPs: per request its outcome, and which receive each
/// SEND consumes.
struct Model {
    sem: Vec<Sem>,
    recv_of: Vec<Option<usize>>,
    /// Index of the first request that fails (`posts.len()` if none).
    first_fail: usize,
}

impl Model {
    fn new(w: &Workload) -> Self {
        let mut sem = Vec::new();
        let mut recv_of = Vec::new();
        let mut next_recv = 0usize;
        for p in &w.posts {
            let mut recv = None;
            let s = match p.op {
                Op::Write {
                    len, key, lkey_bad, ..
                } => {
                    if lkey_bad && len > 0 {
                        Sem::Local(WC_LOC_PROT_ERR)
                    } else if len > 0 && !key.grants() {
                        Sem::Remote(WC_REM_ACCESS_ERR, None)
                    } else {
                        Sem::Ok
                    }
                }
                Op::Read {
                    len, key, lkey_bad, ..
                } => {
                    if lkey_bad && len > 0 {
                        Sem::Local(WC_LOC_PROT_ERR)
                    } else if len > 0 && !(key.grants() || key == Key::ReadOnly) {
                        Sem::Remote(WC_REM_ACCESS_ERR, None)
                    } else {
                        Sem::Ok
                    }
                }
                Op::AtomicWrite { .. } | Op::Flush { .. } => {
                    if p.op.placement_ok() == Some(true) {
                        Sem::Ok
                    } else {
                        Sem::Remote(WC_REM_ACCESS_ERR, None)
                    }
                }
                Op::Send { len, lkey_bad, .. } => {
                    if lkey_bad && len > 0 {
                        Sem::Local(WC_LOC_PROT_ERR)
                    } else if next_recv >= w.recvs.len() {
                        Sem::Rnr
                    } else {
                        let j = next_recv;
                        next_recv += 1;
                        recv = Some(j);
                        if len > w.recvs[j] {
                            // 9.7.5.2.3 class B: invalid request, the
                            // receive completes with a length error.
                            Sem::Remote(WC_REM_INV_REQ_ERR, Some((j, WC_LOC_LEN_ERR)))
                        } else {
                            Sem::Ok
                        }
                    }
                }
            };
            sem.push(s);
            recv_of.push(recv);
        }
        let first_fail = sem
            .iter()
            .position(|s| *s != Sem::Ok)
            .unwrap_or(w.posts.len());
        Self {
            sem,
            recv_of,
            first_fail,
        }
    }

    /// The requester's CQEs (wr_id, opcode, status, byte_len or None) when
    /// request `f` is the first to fail with `status`.
    fn requester_cqes(
        &self,
        w: &Workload,
        f: usize,
        status: u8,
    ) -> Vec<(u64, u8, u8, Option<u32>)> {
        let mut out = Vec::new();
        for (i, p) in w.posts.iter().enumerate() {
            let (opcode, len) = match p.op {
                Op::Write { .. } => (WC_RDMA_WRITE, 0),
                Op::Read { len, .. } => (WC_RDMA_READ, len),
                Op::Send { .. } => (WC_SEND, 0),
                Op::AtomicWrite { .. } => (WC_ATOMIC_WRITE, 8),
                Op::Flush { .. } => (WC_FLUSH, 0),
            };
            match i.cmp(&f) {
                std::cmp::Ordering::Less if p.signaled => {
                    out.push((i as u64, opcode, WC_SUCCESS, Some(len)));
                }
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => out.push((i as u64, opcode, status, None)),
                std::cmp::Ordering::Greater => {
                    out.push((i as u64, opcode, WC_WR_FLUSH_ERR, None));
                }
            }
        }
        out
    }

    /// The responder's receive CQEs (wr_id, status, byte_len, imm) when it
    /// executed the first `m` requests, and with `failed` the failure of
    /// request `m` (its QP then flushes every other receive of its RQ; an
    /// SRQ keeps them).
    fn responder_cqes(&self, w: &Workload, m: usize, failed: bool) -> Vec<RespCqe> {
        let mut out = Vec::new();
        let mut next = 0usize;
        for i in 0..m {
            if let (Some(j), Op::Send { len, imm, .. }) = (self.recv_of[i], &w.posts[i].op) {
                let imm = imm.then_some(imm_of(i));
                out.push((recv_wr_id(j), WC_SUCCESS, Some((*len, imm))));
                next = j + 1;
            }
        }
        if failed {
            if let Sem::Remote(_, Some((j, st))) = self.sem[m] {
                out.push((recv_wr_id(j), st, None));
                next = j + 1;
            }
            if !w.srq {
                for j in next..w.recvs.len() {
                    out.push((recv_wr_id(j), WC_WR_FLUSH_ERR, None));
                }
            }
        }
        out
    }
}

/// The immediate data request `i` sends.
fn imm_of(i: usize) -> u32 {
    i as u32 | 0xab00_0000
}

fn recv_wr_id(j: usize) -> u64 {
    1000 + j as u64
}

/// Expected memory: a value per byte, or any value (`None`) where a
/// request that did not complete successfully may have written.
struct Mem {
    bytes: Vec<u8>,
    wild: Vec<bool>,
}

impl Mem {
    fn new(bytes: Vec<u8>) -> Self {
        let wild = vec![false; bytes.len()];
        Self { bytes, wild }
    }
    fn set(&mut self, at: usize, data: &[u8]) {
        self.bytes[at..at + data.len()].copy_from_slice(data);
    }
    fn wild(&mut self, at: usize, len: usize) {
        for w in &mut self.wild[at..at + len] {
            *w = true;
        }
    }
    fn check(&self, got: &[u8], what: &str) -> Result<(), String> {
        for (i, (g, e)) in got.iter().zip(&self.bytes).enumerate() {
            if !self.wild[i] && g != e {
                return Err(format!(
                    "{what}: byte {i:#x} is {g:#04x}, the model says {e:#04x}"
                ));
            }
        }
        Ok(())
    }
}

/// The memories after the requester completed requests `0..a_done` and
/// the responder executed `0..b_done` (None: an unknown number from
/// `a_done` on). READ sinks of requests from `a_done` to `a_wild_end` may
/// hold anything (their responses may have been partly placed), as may the
/// responder's targets of the requests it may or may not have executed.
fn model_memory(
    w: &Workload,
    model: &Model,
    a_done: usize,
    a_wild_end: usize,
    b_done: Option<usize>,
) -> (Mem, Mem) {
    let a0 = a_init();
    let mut a = Mem::new(a0.clone());
    let mut b = Mem::new(b_init());
    let ro: Vec<u8> = (0..RO_LEN).map(ro_byte).collect();
    for (i, p) in w.posts.iter().enumerate() {
        let at_b = match b_done {
            Some(m) => i < m,
            None => i < a_done,
        };
        let wild_b = b_done.is_none() && i >= a_done;
        match p.op {
            Op::Write {
                len, src, dst, key, ..
            } => {
                let (len, src, dst) = (len as usize, src as usize, dst as usize);
                if key.grants() && len > 0 {
                    if at_b {
                        b.set(dst, &a0[src..src + len]);
                    } else if wild_b {
                        b.wild(dst, len);
                    }
                }
            }
            Op::Read {
                len,
                sink,
                src,
                key,
                ..
            } => {
                let (len, sink, src) = (len as usize, SINK + sink as usize, src as usize);
                if len == 0 {
                    continue;
                }
                if i < a_done {
                    let data = match key {
                        Key::ReadOnly => ro[..len].to_vec(),
                        _ => b.bytes[src..src + len].to_vec(),
                    };
                    a.set(sink, &data);
                } else if i < a_wild_end {
                    a.wild(sink, len);
                }
            }
            Op::AtomicWrite { dst, data, key } => {
                let dst = dst as usize;
                if key.grants() {
                    if at_b {
                        b.set(dst, &data.to_le_bytes());
                    } else if wild_b {
                        b.wild(dst, 8);
                    }
                }
            }
            Op::Flush { .. } => {}
            Op::Send { len, src, .. } => {
                let Some(j) = model.recv_of[i] else {
                    continue;
                };
                let (len, src) = (len as usize, src as usize);
                let slot = SLOTS + j * SLOT;
                if at_b {
                    b.set(slot, &a0[src..src + len]);
                } else if wild_b {
                    b.wild(slot, len.min(SLOT));
                }
            }
        }
    }
    (a, b)
}

// ------------------------------------------------------------ the engine

struct Setup {
    a: Node,
    b: Node,
    a_mr: MrInfo,
    b_mr: MrInfo,
    ro: MrInfo,
    other: MrInfo,
    /// The key of a type 1 window over `b_mr`'s WRITE/READ area.
    mw: u32,
}

fn setup(w: &Workload) -> Setup {
    let (retry, rnr) = (w.retry_cnt, w.rnr_retry);
    let tweak = |attr: &mut QpAttr| {
        attr.retry_cnt = retry;
        attr.rnr_retry = rnr;
        attr.qp_access_flags |= ACCESS_FLUSH_GLOBAL;
    };
    let (mut a, mut b) = if w.srq {
        let mut a = Node::new(36);
        let mut b = Node::new(37);
        a.create_qp(QPT_RC);
        let si = b.create_srq(16, 0);
        b.create_srq_qp(QPT_RC, si);
        connect_pair(&mut a, 0, &mut b, 0, tweak);
        (a, b)
    } else {
        rc_pair(tweak)
    };
    let a_mr = a.reg_mr(A_MR as u64, ACCESS_LOCAL_WRITE);
    let b_mr = b.reg_mr(
        B_MR as u64,
        ALL_ACCESS | ACCESS_MW_BIND | ACCESS_FLUSH_GLOBAL,
    );
    let ro = b.reg_mr(RO_LEN as u64, ACCESS_REMOTE_READ);
    let home = b.pdn;
    b.pdn = b.h.alloc_pd();
    let other = b.reg_mr(4096, ALL_ACCESS);
    b.pdn = home;
    a.fill(a_mr.gpa, &a_init());
    b.fill(b_mr.gpa, &b_init());
    b.fill(ro.gpa, &(0..RO_LEN).map(ro_byte).collect::<Vec<_>>());
    b.fill(other.gpa, &[0x77; 4096]);
    // The window: bound by a BIND_MW WQE of b's QP, which executes at the
    // doorbell (nothing before it on the SQ); its CQE is consumed here.
    let mw = b.alloc_mw(MR_TYPE_MW1) + 1;
    let access = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
    b.post_bind_mw(
        0,
        0xb1d,
        &bind_seg(mw, b_mr.key, b_mr.va(0), SLOTS as u64, access),
    );
    let done: Vec<(u64, u8, u8)> = b
        .poll()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(done, vec![(0xb1d, WC_BIND_MW, WC_SUCCESS)]);
    Setup {
        a,
        b,
        a_mr,
        b_mr,
        ro,
        other,
        mw,
    }
}

fn remote(s: &Setup, key: Key, off: u32, len: u32) -> (u64, u32) {
    match key {
        Key::Good => (s.b_mr.va(u64::from(off)), s.b_mr.key),
        Key::ReadOnly => (s.ro.va(0), s.ro.key),
        Key::OtherPd => (s.other.va(0), s.other.key),
        Key::Garbage => (s.b_mr.va(u64::from(off)), BAD_KEY),
        Key::OutOfBounds => (s.b_mr.va((B_MR as u64) - u64::from(len / 2)), s.b_mr.key),
        Key::Window => (s.b_mr.va(u64::from(off)), s.mw),
        Key::OutsideWindow => (s.b_mr.va((SLOTS as u64) - u64::from(len / 2)), s.mw),
    }
}

fn send_wr(s: &Setup, posts: &[Post], i: usize) -> SendWr {
    let p = &posts[i];
    let lkey = |bad: bool| if bad { BAD_KEY } else { s.a_mr.key };
    let mut wr = SendWr {
        wr_id: i as u64,
        flags: if p.signaled { WQE_SIGNALED } else { 0 },
        ..SendWr::default()
    };
    match p.op {
        Op::Write {
            len,
            src,
            dst,
            key,
            lkey_bad,
        } => {
            wr.opcode = WR_RDMA_WRITE;
            (wr.remote_addr, wr.rkey) = remote(s, key, dst, len);
            wr.sges = vec![(s.a_mr.va(u64::from(src)), len, lkey(lkey_bad))];
            if needs_fence(posts, i) {
                wr.flags |= WQE_FENCE;
            }
        }
        Op::Read {
            len,
            sink,
            src,
            key,
            lkey_bad,
        } => {
            wr.opcode = WR_RDMA_READ;
            (wr.remote_addr, wr.rkey) = remote(s, key, src, len);
            let at = (SINK as u64) + u64::from(sink);
            wr.sges = vec![(s.a_mr.va(at), len, lkey(lkey_bad))];
        }
        Op::Send {
            len,
            src,
            imm,
            lkey_bad,
        } => {
            wr.opcode = if imm { WR_SEND_IMM } else { WR_SEND };
            wr.imm = imm_of(i).to_le_bytes();
            wr.sges = vec![(s.a_mr.va(u64::from(src)), len, lkey(lkey_bad))];
        }
        // The segments of both are laid out where SendWr puts an atomic's:
        // remote_addr, rkey, then (bytes 16..24) the data or the FLUSH's
        // type and level; FLUSH's length (bytes 12..16) is patched in
        // [`post`].
        Op::AtomicWrite { dst, data, key } => {
            wr.opcode = WR_ATOMIC_WRITE;
            (wr.remote_addr, wr.rkey) = placement_remote(s, key, dst, 8);
            wr.compare_add = data;
            if needs_fence(posts, i) {
                wr.flags |= WQE_FENCE;
            }
        }
        Op::Flush {
            off,
            len,
            key,
            whole_mr,
        } => {
            wr.opcode = WR_FLUSH;
            (wr.remote_addr, wr.rkey) = placement_remote(s, key, off, len);
            let level = if whole_mr { FLUSH_MR } else { FLUSH_RANGE };
            wr.compare_add = u64::from(FLUSH_GLOBAL) | u64::from(level) << 8;
        }
    }
    wr
}

/// [`remote`] for an ATOMIC_WRITE or FLUSH: the bad ranges are 8-byte
/// aligned, so that they fail the range check, not the alignment check.
fn placement_remote(s: &Setup, key: Key, off: u32, len: u32) -> (u64, u32) {
    match key {
        Key::OutOfBounds => (s.b_mr.va(B_MR as u64 - u64::from(len / 16 * 8)), s.b_mr.key),
        Key::OutsideWindow => (s.b_mr.va(SLOTS as u64 - u64::from(len / 16 * 8)), s.mw),
        _ => remote(s, key, off, len),
    }
}

/// Posts request `i` of `posts` on a's QP and rings the doorbell.
fn post(s: &mut Setup, posts: &[Post], i: usize) {
    let wr = send_wr(s, posts, i);
    let q = s.a.qps[0];
    s.a.write_send_wqe(0, &wr);
    if let Op::Flush { len, .. } = posts[i].op {
        // The FLUSH segment's length sits where SendWr writes nothing.
        let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
        let at = q.sq_base + (slot << 8) + SQ_WQE_SEG_OFFSET as u64 + 12;
        s.a.fill(at, &len.to_le_bytes());
    }
    s.a.ring_sq(0);
}

/// One line of the wire trace.
fn describe(f: &[u8]) -> String {
    match wire::decode(f) {
        Ok(p) => {
            let mut s = format!("op {:#04x} psn {:#08x}", p.bth.opcode, p.bth.psn);
            if p.bth.opcode == op::RC_ACK {
                s += &format!(" syn {:#04x}", p.aeth.syndrome);
            }
            if !p.payload.is_empty() {
                s += &format!(" +{}", p.payload.len());
            }
            s
        }
        Err(e) => format!("undecodable ({e:?})"),
    }
}

/// An error NAK (not a PSN sequence NAK, not an RNR NAK).
fn is_error_nak(f: &[u8]) -> bool {
    wire::decode(f).is_ok_and(|p| {
        p.bth.opcode == op::RC_ACK
            && p.aeth.syndrome & aeth::TYPE_MASK == aeth::NAK
            && p.aeth.syndrome != aeth::NAK_PSN_SEQ
    })
}

/// What a run did, beyond the CQEs and memory.
#[derive(Default)]
struct WireLog {
    trace: Vec<String>,
    /// Faults that may each cost one retry: drops, corruptions, delays,
    /// late frames, replays.
    disruptions: usize,
    /// An error NAK was lost (dropped or corrupted) and none delivered.
    lost_error_nak: bool,
    error_nak_delivered: bool,
    /// Timeouts counted by the requester when the blackout began.
    blackout_from: Option<u64>,
    rounds: usize,
}

fn run(s: &mut Setup, w: &Workload, sch: &Schedule) -> WireLog {
    let mut log = WireLog::default();
    for (j, &len) in w.recvs.iter().enumerate() {
        let at = s.b_mr.va((SLOTS + j * SLOT) as u64);
        let sges = [(at, len, s.b_mr.key)];
        if w.srq {
            s.b.post_srq_recv(0, recv_wr_id(j), &sges);
        } else {
            s.b.post_recv(0, recv_wr_id(j), &sges);
        }
    }
    let mut posted = 0usize;
    let mut frame_no = 0u16;
    let mut delivered: Vec<(bool, Vec<u8>)> = Vec::new();
    // (round, to_b, frame)
    let mut delayed: Vec<(usize, bool, Vec<u8>)> = Vec::new();
    for round in 0..MAX_ROUNDS {
        log.rounds = round;
        for _ in 0..w.per_round {
            if posted < w.posts.len() {
                post(s, &w.posts, posted);
                posted += 1;
            }
        }
        let mut to_b: Vec<Vec<u8>> = Vec::new();
        let mut to_a: Vec<Vec<u8>> = Vec::new();
        let mut late: Vec<(bool, Vec<u8>)> = Vec::new();
        let out_a = s.a.h.dev.take_tx();
        let out_b = s.b.h.dev.take_tx();
        let frames = out_a
            .into_iter()
            .map(|f| (true, f))
            .chain(out_b.into_iter().map(|f| (false, f)));
        // Whether a frame in this direction crosses a blacked-out path.
        let dark = |to_b_dir: bool| match sch.blackout {
            Some((_, Dir::AtoB)) => to_b_dir,
            Some((_, Dir::BtoA)) => !to_b_dir,
            Some((_, Dir::Both)) => true,
            None => false,
        };
        for (to_b_dir, mut f) in frames {
            let k = frame_no;
            frame_no = frame_no.saturating_add(1);
            let dir = if to_b_dir { "a>b" } else { "b>a" };
            if let Some((from, _)) = sch.blackout {
                if k >= from && dark(to_b_dir) {
                    if log.blackout_from.is_none() {
                        log.blackout_from = Some(s.a.h.dev.counters().data.timeouts);
                    }
                    log.trace
                        .push(format!("r{round} #{k} {dir} {} blackout", describe(&f)));
                    continue;
                }
            }
            let fate = sch.fates.iter().find(|(n, _)| *n == k).map(|x| x.1);
            log.trace
                .push(format!("r{round} #{k} {dir} {} {fate:?}", describe(&f)));
            match fate {
                None => {}
                Some(Fate::Drop) => {
                    log.disruptions += 1;
                    log.lost_error_nak |= !to_b_dir && is_error_nak(&f);
                    continue;
                }
                Some(Fate::Corrupt) => {
                    log.disruptions += 1;
                    log.lost_error_nak |= !to_b_dir && is_error_nak(&f);
                    let n = f.len();
                    f[n - 1] ^= 0x40;
                }
                Some(Fate::Dup) => {
                    delivered.push((to_b_dir, f.clone()));
                    if to_b_dir { &mut to_b } else { &mut to_a }.push(f.clone());
                }
                Some(Fate::Delay(n)) => {
                    log.disruptions += 1;
                    delayed.push((round + usize::from(n), to_b_dir, f));
                    continue;
                }
                Some(Fate::Late) => {
                    log.disruptions += 1;
                    late.push((to_b_dir, f));
                    continue;
                }
            }
            delivered.push((to_b_dir, f.clone()));
            if to_b_dir { &mut to_b } else { &mut to_a }.push(f);
        }
        let mut i = 0;
        while i < delayed.len() {
            if delayed[i].0 <= round {
                let (_, to_b_dir, f) = delayed.swap_remove(i);
                late.push((to_b_dir, f));
            } else {
                i += 1;
            }
        }
        for &(r, pick) in &sch.replays {
            if usize::from(r) == round && !delivered.is_empty() {
                let (to_b_dir, f) = delivered[usize::from(pick) % delivered.len()].clone();
                log.disruptions += 1;
                log.trace.push(format!(
                    "r{round} replay {} {}",
                    if to_b_dir { "a>b" } else { "b>a" },
                    describe(&f)
                ));
                late.push((to_b_dir, f));
            }
        }
        for (to_b_dir, f) in late {
            // Once the path is dead nothing crosses it, not even an old
            // frame: a replayed request would draw a genuine ACK, which is
            // forward progress and restarts the requester's retry count.
            if log.blackout_from.is_some() && dark(to_b_dir) {
                log.trace.push(format!(
                    "r{round} late {} {} blackout",
                    if to_b_dir { "a>b" } else { "b>a" },
                    describe(&f)
                ));
                continue;
            }
            delivered.push((to_b_dir, f.clone()));
            if to_b_dir { &mut to_b } else { &mut to_a }.push(f);
        }
        log.error_nak_delivered |= to_a.iter().any(|f| is_error_nak(f));
        if to_a.is_empty() && to_b.is_empty() {
            if !delayed.is_empty() || posted < w.posts.len() {
                continue;
            }
            let next = [s.a.h.dev.next_timer(), s.b.h.dev.next_timer()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else {
                log.lost_error_nak &= !log.error_nak_delivered;
                return log;
            };
            log.trace.push(format!("r{round} clock -> {t}"));
            s.a.h.dev.tick(t);
            s.b.h.dev.tick(t);
            continue;
        }
        s.b.h.dev.receive_batch(to_b.iter().map(|f| f.as_slice()));
        s.a.h.dev.receive_batch(to_a.iter().map(|f| f.as_slice()));
    }
    log.rounds = MAX_ROUNDS;
    log
}

type ReqCqe = (u64, u8, u8, Option<u32>);
type RespCqe = (u64, u8, Option<(u32, Option<u32>)>);

fn requester_view(c: &[Cqe], qpn: u32) -> Result<Vec<ReqCqe>, String> {
    c.iter()
        .map(|c| {
            if c.qpn != qpn {
                return Err(format!("requester CQE of QP {:#x}: {c:?}", c.qpn));
            }
            let len = (c.status == WC_SUCCESS).then_some(
                if matches!(c.opcode, WC_RDMA_READ | WC_ATOMIC_WRITE) {
                    c.byte_len
                } else {
                    0
                },
            );
            Ok((c.wr_id, c.opcode, c.status, len))
        })
        .collect()
}

fn responder_view(c: &[Cqe], qpn: u32, peer: u32) -> Result<Vec<RespCqe>, String> {
    c.iter()
        .map(|c| {
            if c.qpn != qpn || c.opcode != WC_RECV {
                return Err(format!("unexpected responder CQE {c:?}"));
            }
            if c.status != WC_SUCCESS {
                return Ok((c.wr_id, c.status, None));
            }
            if c.src_qp != peer {
                return Err(format!("receive CQE from QP {:#x}: {c:?}", c.src_qp));
            }
            let imm = (c.flags & CQE_WITH_IMM != 0).then_some(c.imm_data);
            Ok((c.wr_id, c.status, Some((c.byte_len, imm))))
        })
        .collect()
}

/// How a checked run ended: the first failed request and its status, and
/// the timeouts the requester counted during a blackout.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    failed: Option<(usize, u8)>,
    blackout_timeouts: Option<u64>,
}

fn check(w: &Workload, sch: &Schedule) -> Result<Outcome, String> {
    let model = Model::new(w);
    let mut s = setup(w);
    let log = run(&mut s, w, sch);
    let mut report = String::new();
    let result = check_run(w, &model, &mut s, &log, &mut report);
    result.map_err(|e| {
        let tail = log.trace.len().saturating_sub(300);
        format!(
            "{e}\n{report}model: {:?}\nwire trace ({} frames, {} rounds, {} disruptions):\n{}",
            model.sem,
            log.trace.len(),
            log.rounds,
            log.disruptions,
            log.trace[tail..].join("\n")
        )
    })
}

fn check_run(
    w: &Workload,
    model: &Model,
    s: &mut Setup,
    log: &WireLog,
    report: &mut String,
) -> Result<Outcome, String> {
    let n = w.posts.len();
    let s_idx = model.first_fail;
    let sem_s = model.sem.get(s_idx).copied();
    let (qa, qb) = (s.a.qps[0].qpn, s.b.qps[0].qpn);
    if log.rounds >= MAX_ROUNDS {
        return Err("the wire never went quiet (unbounded retries?)".into());
    }
    let ca = requester_view(&s.a.poll(), qa)?;
    let cb = responder_view(&s.b.poll(), qb, qa)?;
    *report += &format!("requester CQEs: {ca:?}\nresponder CQEs: {cb:?}\n");
    // The first request that failed, as the engine reports it.
    let failed = ca
        .iter()
        .find(|c| c.2 != WC_SUCCESS)
        .map(|c| (c.0 as usize, c.2));
    let (f, st) = failed.unwrap_or((n, WC_SUCCESS));
    let relaxed = log.blackout_from.is_some()
        || log.disruptions + usize::from(sem_s == Some(Sem::Rnr)) > usize::from(w.retry_cnt);
    // Once the responder is in the error state it answers nothing more:
    // whatever the wire lost before (READ responses, ACKs, the error NAK)
    // is never recovered, and the requester times out.
    let remote = matches!(sem_s, Some(Sem::Remote(..)));
    let may_time_out = relaxed || (remote && (log.lost_error_nak || log.disruptions > 0));
    let allowed = if f == s_idx {
        match sem_s {
            None => true,
            Some(sem) if st == sem.status() => !(remote && log.lost_error_nak),
            Some(Sem::Remote(..) | Sem::Rnr) if st == WC_RETRY_EXC_ERR => may_time_out,
            _ => false,
        }
    } else {
        f < s_idx && st == WC_RETRY_EXC_ERR && may_time_out
    };
    if !allowed {
        return Err(format!(
            "request {f} ended with status {st}; the model says request {s_idx} fails with {:?} \
             ({}; error NAK lost: {})",
            sem_s,
            if relaxed {
                "faults may use up retry_cnt"
            } else {
                "faults are fewer than retry_cnt"
            },
            log.lost_error_nak
        ));
    }
    let want_a = model.requester_cqes(w, f, st);
    if ca != want_a {
        return Err(format!("requester CQEs differ from the model: {want_a:?}"));
    }
    // Retries are bounded: after a blackout began, at most retry_cnt + 1
    // timeouts before RETRY_EXC_ERR.
    if let Some(t0) = log.blackout_from {
        let used = s.a.h.dev.counters().data.timeouts - t0;
        if used > u64::from(w.retry_cnt) + 1 {
            return Err(format!(
                "{used} timeouts in the blackout, retry_cnt is {}",
                w.retry_cnt
            ));
        }
        if st == WC_RETRY_EXC_ERR
            && log.disruptions == 0
            && sem_s != Some(Sem::Rnr)
            && used != u64::from(w.retry_cnt) + 1
        {
            return Err(format!(
                "RETRY_EXC_ERR after {used} timeouts, retry_cnt is {}",
                w.retry_cnt
            ));
        }
    }
    // QP states.
    let a_state = s.a.h.dev.qp_state(qa);
    let want_a_state = if f < n { QPS_ERR } else { QPS_RTS };
    if a_state != Some(want_a_state) {
        return Err(format!("requester QP state {a_state:?}"));
    }
    let b_err = s.b.h.dev.qp_state(qb) == Some(QPS_ERR);
    // The responder executed requests 0..m, m between f and the model's
    // failure (exactly s_idx unless the wire was allowed to cut it short);
    // it is in ERR iff it reached a remote failure.
    let b_failed_ok = matches!(sem_s, Some(Sem::Remote(..)));
    if b_err && !b_failed_ok {
        return Err("responder QP in ERR without a remote error".into());
    }
    let ms: Vec<usize> = if b_err {
        vec![s_idx]
    } else if relaxed {
        (f.min(s_idx)..=s_idx.min(n)).collect()
    } else {
        vec![s_idx]
    };
    if !b_err && !relaxed && b_failed_ok {
        return Err("the responder QP did not go to ERR on a remote error".into());
    }
    if !ms.iter().any(|&m| cb == model.responder_cqes(w, m, b_err)) {
        return Err(format!(
            "responder CQEs match no prefix the model allows: {:?}",
            ms.iter()
                .map(|&m| model.responder_cqes(w, m, b_err))
                .collect::<Vec<_>>()
        ));
    }
    // Memory.
    let b_done = if b_err || !relaxed { Some(s_idx) } else { None };
    let a_wild_end = if relaxed { n } else { s_idx };
    let (ma, mut mb) = model_memory(w, model, f, a_wild_end, b_done);
    // A receive that completed successfully holds exactly its SEND.
    for c in &cb {
        if c.1 == WC_SUCCESS {
            let j = (c.0 - recv_wr_id(0)) as usize;
            let i = model
                .recv_of
                .iter()
                .position(|r| *r == Some(j))
                .unwrap_or(0);
            if let Op::Send { len, src, .. } = w.posts[i].op {
                let slot = SLOTS + j * SLOT;
                let a0 = a_init();
                mb.set(slot, &a0[src as usize..(src + len) as usize]);
                for x in &mut mb.wild[slot..slot + len as usize] {
                    *x = false;
                }
            }
        }
    }
    // A SEND larger than its receive leaves part of it written.
    if let (true, Some(Sem::Remote(_, Some((j, _))))) = (b_err, sem_s) {
        mb.wild(SLOTS + j * SLOT, SLOT);
    }
    ma.check(&s.a.bytes(s.a_mr.gpa, A_MR), "requester MR")?;
    mb.check(&s.b.bytes(s.b_mr.gpa, B_MR), "responder MR")?;
    let ro: Vec<u8> = (0..RO_LEN).map(ro_byte).collect();
    if s.b.bytes(s.ro.gpa, RO_LEN) != ro {
        return Err("the read-only MR was written".into());
    }
    if s.b.bytes(s.other.gpa, 4096) != [0x77; 4096] {
        return Err("the other PD's MR was written".into());
    }
    Ok(Outcome {
        failed,
        blackout_timeouts: log
            .blackout_from
            .map(|t0| s.a.h.dev.counters().data.timeouts - t0),
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })]

    /// The engine and the model agree on every CQE and every byte, under
    /// any schedule of wire faults.
    #[test]
    fn engine_agrees_with_the_model(w in workload_strategy(), sch in schedule_strategy()) {
        if let Err(e) = check(&w, &sch) {
            prop_assert!(false, "{}", e);
        }
    }
}

fn read(len: u32) -> Post {
    Post {
        op: Op::Read {
            len,
            sink: 0,
            src: 0,
            key: Key::Good,
            lkey_bad: false,
        },
        signaled: false,
    }
}

fn write(len: u32) -> Post {
    Post {
        op: Op::Write {
            len,
            src: 0,
            dst: 0,
            key: Key::Good,
            lkey_bad: false,
        },
        signaled: false,
    }
}

fn send(len: u32) -> Post {
    Post {
        op: Op::Send {
            len,
            src: 0,
            imm: false,
            lkey_bad: false,
        },
        signaled: false,
    }
}

/// Shrunk by proptest: a READ whose first response is lost, then a SEND
/// into a too small receive. The error NAK names the SEND, beyond the READ:
/// it is an implied NAK for the READ (its responses were lost), not the
/// READ's error. The engine used to complete the READ with
/// REM_INV_REQ_ERR and flush the SEND. A WRITE first: its ACK advertises
/// the two receives, the credit the SEND needs to go behind the READ.
#[test]
fn an_error_nak_beyond_a_read_with_lost_responses_is_not_the_reads() {
    let w = Workload {
        posts: vec![write(8), read(4096), send(4096)],
        recvs: vec![0, 0],
        retry_cnt: 0,
        rnr_retry: 0,
        per_round: 1,
        srq: false,
    };
    // #7 is the READ's first response, after the SEND's 4 packets.
    let sch = Schedule {
        fates: vec![(7, Fate::Drop)],
        replays: vec![],
        blackout: None,
    };
    let out = check(&w, &sch).unwrap();
    // The responder is in ERR: the re-requested READ times out.
    assert_eq!(out.failed, Some((1, WC_RETRY_EXC_ERR)));
}

/// Shrunk by proptest: the same with an RNR NAK (no receive at all) while
/// the READ's first response is delayed. The engine used to complete the
/// READ with RNR_RETRY_EXC_ERR. The receiver is on an SRQ, whose ACKs set
/// no credit limit (as rxe's do): the WRITE's ACK lets the SEND go behind
/// the READ.
#[test]
fn an_rnr_nak_beyond_a_read_with_lost_responses_is_not_the_reads() {
    let w = Workload {
        posts: vec![write(8), read(4096), send(4096)],
        recvs: vec![],
        retry_cnt: 0,
        rnr_retry: 0,
        per_round: 1,
        srq: true,
    };
    // #7 is the READ's first response, after the SEND's 4 packets.
    let sch = Schedule {
        fates: vec![(7, Fate::Delay(1))],
        replays: vec![],
        blackout: None,
    };
    let out = check(&w, &sch).unwrap();
    // The READ completes from the re-requested responses; the SEND fails.
    assert_eq!(out.failed, Some((2, WC_RNR_RETRY_EXC_ERR)));
}

/// Everything lost from the first frame on: the first request fails with
/// RETRY_EXC_ERR after exactly retry_cnt + 1 timeouts (IBTA 9.7.6.1.3),
/// the others are flushed, for every retry_cnt.
#[test]
fn a_blackout_fails_after_exactly_retry_cnt_retries() {
    for retry_cnt in 0..=7 {
        let w = Workload {
            posts: vec![send(100), read(2000)],
            recvs: vec![4096],
            retry_cnt,
            rnr_retry: 0,
            per_round: 2,
            srq: false,
        };
        let sch = Schedule {
            fates: vec![],
            replays: vec![],
            blackout: Some((0, Dir::Both)),
        };
        let out = check(&w, &sch).unwrap();
        assert_eq!(
            out,
            Outcome {
                failed: Some((0, WC_RETRY_EXC_ERR)),
                blackout_timeouts: Some(u64::from(retry_cnt) + 1),
            }
        );
    }
}

/// Shrunk by proptest (`make soak`): the last packet of a WRITE lost to a
/// blackout of A to B, then an old copy of its first packet replayed into
/// the dead path. B answered the copy with a genuine ACK of the packets it
/// had, the requester's retry count restarted on that progress, and the
/// request took retry_cnt + 2 timeouts from the blackout's start. A dead
/// path now loses replayed and late frames too: exactly retry_cnt + 1.
#[test]
fn a_replay_into_a_blackout_is_lost() {
    let unsignaled = |op| Post {
        op,
        signaled: false,
    };
    let w = Workload {
        posts: vec![
            unsignaled(Op::Read {
                len: 0,
                sink: 0,
                src: 0,
                key: Key::Good,
                lkey_bad: false,
            }),
            unsignaled(Op::AtomicWrite {
                dst: 0,
                data: 0,
                key: Key::Good,
            }),
            unsignaled(Op::Write {
                len: 4096,
                src: 0,
                dst: 0,
                key: Key::Good,
                lkey_bad: false,
            }),
        ],
        recvs: vec![],
        retry_cnt: 3,
        rnr_retry: 0,
        per_round: 2,
        srq: false,
    };
    let sch = Schedule {
        fates: vec![],
        replays: vec![(3, 21401)],
        blackout: Some((5, Dir::AtoB)),
    };
    let out = check(&w, &sch).unwrap();
    assert_eq!(
        out,
        Outcome {
            failed: Some((2, WC_RETRY_EXC_ERR)),
            blackout_timeouts: Some(4),
        }
    );
}

/// Shrunk by proptest (and found again by tests/wqe_fuzz.rs): a READ with
/// a bad local key after WQEs that took the PSNs past 0. The READ failed
/// when it was fetched, but counted as a READ awaiting its responses from
/// PSN 0, so no ACK got past it: the WRITEs before it timed out with
/// RETRY_EXC_ERR instead of completing, and the READ never reported
/// LOC_PROT_ERR.
#[test]
fn a_read_refused_at_fetch_holds_back_no_ack() {
    let write = Post {
        op: Op::Write {
            len: 4096,
            src: 0,
            dst: 0,
            key: Key::Good,
            lkey_bad: false,
        },
        signaled: true,
    };
    let bad_read = Post {
        op: Op::Read {
            len: 1,
            sink: 0,
            src: 0,
            key: Key::Good,
            lkey_bad: true,
        },
        signaled: true,
    };
    let w = Workload {
        posts: vec![
            write.clone(),
            write.clone(),
            write.clone(),
            write.clone(),
            write,
            bad_read,
        ],
        recvs: vec![],
        retry_cnt: 3,
        rnr_retry: 0,
        per_round: 6,
        srq: false,
    };
    let sch = Schedule {
        fates: vec![],
        replays: vec![],
        blackout: None,
    };
    let out = check(&w, &sch).unwrap();
    assert_eq!(out.failed, Some((5, WC_LOC_PROT_ERR)));
}

/// A responder on an SRQ fails on a SEND too long for its receive, under a
/// lossy wire: that receive completes LOC_LEN_ERR, the receives after it
/// stay in the SRQ (no flush), the requester's SEND gets REM_INV_REQ_ERR.
#[test]
fn a_responder_on_an_srq_flushes_no_receive_it_did_not_take() {
    let w = Workload {
        posts: vec![send(3000), send(2000), send(100)],
        recvs: vec![4096, 1000, 4096],
        retry_cnt: 7,
        rnr_retry: 0,
        per_round: 3,
        srq: true,
    };
    let sch = Schedule {
        fates: vec![(1, Fate::Drop), (4, Fate::Dup)],
        replays: vec![],
        blackout: None,
    };
    let out = check(&w, &sch).unwrap();
    assert_eq!(out.failed, Some((1, WC_REM_INV_REQ_ERR)));
    let model = Model::new(&w);
    assert_eq!(
        model.responder_cqes(&w, 1, true),
        vec![
            (recv_wr_id(0), WC_SUCCESS, Some((3000, None))),
            (recv_wr_id(1), WC_LOC_LEN_ERR, None)
        ]
    );
}
