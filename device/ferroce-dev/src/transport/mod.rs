// SPDX-License-Identifier: GPL-2.0
//! The data path: RC requester, responder and completer, UC (the RC
//! requester's segmentation without acknowledgements, and a silent
//! responder: `uc.rs`) and UD, as IBTA vol. 1 chapter 9 specifies them (the
//! reference peer is Linux rxe).
//!
//! Everything runs under the device lock, driven by three inputs:
//!
//! * SQ/RQ doorbells ([`crate::Device::bar_write`]): the requester fetches the
//!   new WQEs (DMA through the SQ page list), validates them and translates
//!   their SGEs through the MR table, and transmits packets;
//! * received frames ([`crate::Device::receive`]): requests go to the
//!   responder, ACKs/NAKs/read responses to the completer;
//! * the clock ([`crate::Device::tick`]): retransmission and RNR timers.
//!
//! Frames to send are queued for [`crate::Device::take_tx`]; frames for the
//! device's own MAC are looped back internally, frames for a multicast MAC
//! (1.7) both sent and looped back.
//!
//! Requester: PSNs are assigned when a WQE is fetched (`npkts` PSNs per
//! message, one per MTU segment; an RDMA READ occupies as many PSNs as it
//! has response packets). Packets go out in PSN order within a window of
//! [`WINDOW`] PSNs; AckReq is set on the last packet of every message and
//! on every [`ACK_REQ_EVERY`]th packet. Retransmission is go-back-N from the
//! oldest unacknowledged PSN (`una`) on timeout (`4.096 us << timeout`,
//! consuming `retry_cnt`), from the NAK'ed PSN on a PSN sequence error NAK,
//! and from the RNR NAK'ed PSN after the RNR timer (consuming `rnr_retry`,
//! 7 = infinite). An ACK beyond an incomplete RDMA READ is an implied NAK
//! and re-requests the missing part of the read. A message that needs a
//! receive WQE waits while it is beyond the responder's end-to-end credits
//! (`SendCredits`), unless it is alone and no credit update is awaited;
//! while one is, a keep-alive (a zero-length WRITE for the newest
//! acknowledged PSN, which the responder acknowledges again) asks for the
//! responder's count every `CREDIT_WAIT`, instead of an RNR-NAKed probe.
//!
//! Responder: in-order packets are executed; duplicates (PSN behind the
//! expected PSN) are acknowledged again; a PSN ahead of the expected one
//! gets one PSN sequence error NAK until the expected PSN arrives. ACKs are
//! coalesced: at most one ACK per QP per batch of received frames, for the
//! newest PSN. Their AETH (and that of READ responses and atomic
//! acknowledgements) carries the receive WQEs posted to the QP's RQ as
//! the credit count. One that advertised none starts a watch of the RQ's
//! doorbell record (`CreditWatch`): WQEs posted there are announced in an
//! unsolicited ACK.
//!
//! RDMA READ requests take one of the QP's `max_dest_rd_atomic` responder
//! resources (IBTA 9.5, 9.7.5.1.4): the request is checked when it arrives,
//! its response packets go out when the batch of received frames has been
//! processed (before the coalesced ACK and before any later NAK of the QP).
//! An answered resource stays in the ring to answer duplicates of the READ
//! (from the resource: same rkey and range, PSNs from the duplicate's on)
//! until a newer READ reuses it, oldest first, also while it is answered
//! again for a duplicate (the requester may have completed the READ from
//! the first answer); a duplicate that matches no resource is dropped
//! silently. A new READ that finds every resource never answered in full
//! (the requester exceeded the responder's resources) gets NAK invalid
//! request and the QP goes to ERR.
//!
//! Atomics (CMP_SWAP, FETCH_ADD) take the same responder resources: the
//! responder executes an atomic when it arrives, under the device lock
//! that every QP's engine runs under (so atomics are atomic against each
//! other device-wide, `IB_ATOMIC_HCA`), keeps the original value in the
//! resource and answers with an ATOMIC_ACKNOWLEDGE in the READ responses'
//! order. A duplicate atomic is answered from its resource (the replay
//! cache) and never executed twice. On the requester an atomic counts
//! against `max_rd_atomic` like a READ and completes when its
//! ATOMIC_ACKNOWLEDGE arrives.
//!
//! ATOMIC_WRITE and FLUSH (1.8, IBTA 1.5's memory placement extensions)
//! take the same responder resources: executed when they arrive (an
//! ATOMIC_WRITE stores its 8 bytes under the device lock as the atomics
//! do, a FLUSH issues a memory barrier), answered by a zero-length
//! RDMA_READ_RESPONSE_ONLY in the READ responses' order, duplicates
//! answered again from the resource and never executed twice. On the
//! requester they count against `max_rd_atomic` and complete when that
//! response arrives.
//! A SEND without a receive WQE gets an RNR NAK (`min_rnr_timer`). Invalid
//! requests and remote access errors get the matching NAK and move the
//! responder's QP to the error state.
//!
//! Receive WQEs (RC, UC and UD alike, `recv.rs`) come from the QP's own RQ
//! or (1.6) from the shared receive queue it is attached to, which the QP
//! takes a WQE from when a message needs one; such a WQE is the QP's from
//! then on, and a QP entering ERR flushes it and posts
//! QP_LAST_WQE_REACHED.
//!
//! Files, as rxe splits its transport: `req.rs` (requester), `comp.rs`
//! (completer), `resp.rs` (responder), `recv.rs` (receive WQEs), `uc.rs`
//! and `ud.rs`, `flush.rs` (the error state), `memreg.rs` and `mw.rs`
//! (local memory operations, windows), `dma.rs` (keys and addresses into
//! guest memory, gather and scatter; rxe `rxe_mr.c`), `net.rs` (packets
//! into frames and the TX queue; rxe `rxe_net.c`). This file holds their
//! shared types, WQE reads, the QP lifecycle, the receive dispatch and the
//! RC window.

mod codes;
mod comp;
mod dma;
mod flush;
mod memreg;
mod mw;
mod net;
mod recv;
mod req;
mod resp;
mod uc;
mod ud;

use std::collections::VecDeque;

use zerocopy::{FromBytes, IntoBytes};

use crate::device::State;
use crate::hw::*;
use crate::objects::{Qp, SegList};
use crate::wire::{self, op, psn_diff, NetKind, Packet};
use codes::WcStatus;
use memreg::LocalOp;

/// The SGEs of one WQE, as posted.
type SgeList = crate::inline_vec::InlineVec<Sge, 2>;

/// Largest number of unacknowledged PSNs in flight per QP.
pub const WINDOW: i32 = 512;
/// Packets the RC requesters of one device may have unacknowledged
/// together (device.rst "RC requester"): each busy RC QP's window is an
/// equal share of it when that is less than [`WINDOW`], and no more than
/// what the other QPs leave of it. The wire has no flow control: what a
/// peer's port has not read yet waits in its queue (a tap's: 10000 frames
/// in the test bed and the usage page), and 64 QPs with full windows would
/// be 32768 frames. Shares alone are not enough: QPs that start one after
/// another each take the share of the moment, and the first ones keep what
/// they sent, which comes to 12373 frames for 64 QPs.
pub const INFLIGHT_BUDGET: u32 = 4096;
/// The smallest window a share of [`INFLIGHT_BUDGET`] comes to.
const MIN_WINDOW: i32 = ACK_REQ_EVERY as i32;
/// How often (ns of the data path clock) the busy RC QPs are counted.
const BUSY_RECOUNT_NS: u64 = 1_000_000;
/// `CREDIT_WAIT` (device.rst "RC requester", "RC responder"): how long a
/// responder that advertised no receive WQE watches its RQ, and how long
/// a requester told so waits for the update before it probes.
pub const CREDIT_WAIT_NS: u64 = 1_000_000;
/// `CREDIT_KEEPALIVES` (device.rst "RC requester"): keep-alives a
/// requester sends for one held message, each after a `CREDIT_WAIT` with
/// no update, answered or not, before it sends the message as the probe.
pub const CREDIT_KEEPALIVES: u8 = 32;
/// The first and the longest interval between two reads of a watched RQ's
/// doorbell record.
const CREDIT_POLL_NS: (u64, u64) = (20_000, 100_000);
/// AckReq is also set on every this many packets of a long message.
pub const ACK_REQ_EVERY: u32 = 16;
/// Largest number of fetched, uncompleted WQEs per QP.
const MAX_INFLIGHT_WQES: usize = 128;
/// Frames queued (wire and loopback) before READ responses wait for the
/// queue to drain (backpressure); nothing queued is ever dropped for room.
/// Shallow, so that a READ restarted from a lost response (a duplicate
/// request) is not queued behind the rest of its stale answer, which the
/// requester discards while its ACK timer runs (device.rst "Backpressure").
pub const READ_RESPONSE_QUEUE: usize = 512;
/// Bound of the queue that requesters (window-bounded per QP) fill.
pub const TX_QUEUE_MAX: usize = 65536;
/// Last resort if nobody drains the wire queue: new frames beyond this are
/// dropped (as lost on the wire) and counted in `tx_overflow`. Only reached
/// by window-bounded requesters on many QPs, never by READ responses.
const TX_QUEUE_HARD_MAX: usize = 4 * TX_QUEUE_MAX;
/// Buffers of sent frames kept for new frames ([`State::spare_frames`]):
/// a burst's worth (about 9 MiB at most, of jumbo frames).
pub const SPARE_FRAMES_MAX: usize = 1024;
/// Largest message (2 GiB).
const MAX_MSG: u64 = 1 << 31;
/// Most PSNs one message may take: fewer than 2^23 - [`WINDOW`], so that
/// PSNs in flight never span half the 24-bit PSN space and alias (IBTA
/// 9.7.1). At path MTU 256 this caps a message at (2^23 - 513) x 256 bytes.
pub const MAX_MSG_PKTS: u32 = (1 << 23) - WINDOW as u32 - 1;
/// The message size advertised in QUERY_CAPS: the largest that fits
/// [`MAX_MSG_PKTS`] at every path MTU (the smallest, 256, binds).
pub const MAX_MSG_ADVERTISED: u32 = MAX_MSG_PKTS * 256;
/// Bytes an atomic operates on, remote and local.
const ATOMIC_LEN: u64 = 8;
/// GRH bytes at the head of a UD receive buffer.
pub const GRH_LEN: u32 = 40;

/// IBTA RNR timer encoding (table 45) in nanoseconds.
const RNR_NS: [u64; 32] = [
    655_360_000,
    10_000,
    20_000,
    30_000,
    40_000,
    60_000,
    80_000,
    120_000,
    160_000,
    240_000,
    320_000,
    480_000,
    640_000,
    960_000,
    1_280_000,
    1_920_000,
    2_560_000,
    3_840_000,
    5_120_000,
    7_680_000,
    10_240_000,
    15_360_000,
    20_480_000,
    30_720_000,
    40_960_000,
    61_440_000,
    81_920_000,
    122_880_000,
    163_840_000,
    245_760_000,
    327_680_000,
    491_520_000,
];

/// The RNR delay of an IBTA 5-bit timer value, in nanoseconds.
pub fn rnr_delay_ns(code: u8) -> u64 {
    RNR_NS[usize::from(code & 0x1f)]
}

/// Local ACK timeout of the QP attribute `timeout` (0 = infinite).
pub fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| 4096u64 << timeout.min(31))
}

/// Counters of the data path (see the control socket's `counters`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DataCounters {
    /// Frames handed to the engine.
    pub rx_frames: u64,
    /// Frames sent (wire and loopback), not those dropped in `tx_overflow`.
    pub tx_frames: u64,
    /// Bytes of the frames of `tx_frames`.
    pub tx_bytes: u64,
    /// Frames looped back to this device (1.7: with the copies of the
    /// frames sent to multicast MACs).
    pub loopback_frames: u64,
    /// Frames dropped because the device was stalled.
    pub rx_stalled: u64,
    /// Frames for the wire dropped because nobody took them.
    pub tx_overflow: u64,
    /// Most frames queued at once, wire and loopback together.
    pub tx_queue_peak: u64,
    /// Frames that passed the header and ICRC checks.
    pub rx_pkts: u64,
    /// Bytes of the frames of `rx_pkts`.
    pub rx_bytes: u64,
    /// Dropped: truncated.
    pub rx_truncated: u64,
    /// Dropped: not RoCE.
    pub rx_not_roce: u64,
    /// Dropped: bad IP/GRH/UDP header or IPv4 checksum.
    pub rx_bad_header: u64,
    /// Dropped: bad BTH or unknown opcode.
    pub rx_bad_bth: u64,
    /// Dropped: ICRC mismatch.
    pub rx_bad_icrc: u64,
    /// Dropped: destination MAC, QP, QP type or QP state does not match;
    /// (1.7) a datagram to a multicast group that is no UD SEND to
    /// `MCAST_QPN`, for a group no QP is attached to, or the copy of an
    /// attached QP not in a receiving state.
    pub rx_no_qp: u64,
    /// Dropped: P_Key or Q_Key mismatch.
    pub rx_bad_key: u64,
    /// RC packets dropped: source or destination address is not the QP's
    /// peer and local address (rxe `check_addr`).
    pub rx_bad_addr: u64,
    /// UD datagrams dropped for want of a receive WQE.
    pub rx_ud_no_wqe: u64,
    /// UC request packets the responder discarded, for any reason.
    pub rx_uc_dropped: u64,
    /// PSN gaps and opcode sequence errors the UC responder met (each
    /// discards the partial message under way, if any).
    pub rx_uc_seq_err: u64,
    /// UC messages (SEND, WRITE with immediate) discarded for want of a
    /// receive WQE.
    pub rx_uc_no_wqe: u64,
    /// UC messages discarded for what an RC responder NAKs: a bad R_Key,
    /// range, access right or length.
    pub rx_uc_bad_req: u64,
    /// Duplicate requests seen by the responder.
    pub dup_requests: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// PSN sequence error NAKs sent.
    pub seq_naks_sent: u64,
    /// RNR NAKs sent.
    pub rnr_naks_sent: u64,
    /// Other NAKs sent (invalid request, remote access, remote operation).
    pub err_naks_sent: u64,
    /// ACKs, NAKs and READ responses handed to an RC completer.
    pub responses_rcvd: u64,
    /// RNR NAKs received.
    pub rnr_naks_rcvd: u64,
    /// PSN sequence error NAKs received.
    pub seq_naks_rcvd: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Retries that consumed one of `retry_cnt` (timeouts, PSN sequence
    /// error NAKs).
    pub ack_retries: u64,
    /// Go-back-N rewinds (timeouts, NAKs, implied NAKs, RNR waits).
    pub retransmits: u64,
    /// Messages an RC requester held back for want of end-to-end credits
    /// (each counted once, however long it waited).
    pub credit_waits: u64,
    /// Unsolicited ACKs an RC responder sent to announce receive WQEs
    /// posted after it advertised none (credit updates).
    pub credit_updates: u64,
    /// Keep-alives an RC requester sent while it held a message back for
    /// a credit update.
    pub credit_keepalives: u64,
    /// WQEs failed with RETRY_EXC_ERR.
    pub retry_exceeded: u64,
    /// WQEs failed with RNR_RETRY_EXC_ERR.
    pub rnr_retry_exceeded: u64,
    /// Stale or unexpected responses ignored by the completer.
    pub stale_responses: u64,
    /// Segments visited by gather and scatter: the work of walking the
    /// translated SGE and page lists of messages.
    pub sg_steps: u64,
    /// CQEs written by the data path.
    pub cqes: u64,
    /// Of those, with an error status (flushes included).
    pub cqe_errors: u64,
    /// Of those, flushes (`WR_FLUSH_ERR`): WQEs still posted when their QP
    /// entered ERR, as every rdma_cm disconnect leaves receives.
    pub cqe_flushed: u64,
    /// BIND_MW WQEs executed (1.7): binds and type 1 unbinds.
    pub mw_binds: u64,
    /// BIND_MW WQEs completed with `MW_BIND_ERR` (refused when they
    /// executed, or malformed).
    pub mw_bind_errors: u64,
    /// Times the device's lock was taken (every entry point: BAR
    /// accesses, received batches, clock ticks, the control socket).
    pub lock_taken: u64,
    /// Of those, the times another thread held it, so the taker waited.
    pub lock_contended: u64,
    /// Microseconds spent waiting for it in all.
    pub lock_wait_us: u64,
}

/// The local memory of a message: guest physical segments (address,
/// length) in message order, with a cursor where the last access ended.
///
/// The packets of a message are cut in order, so each access continues
/// from the cursor: a message of n segments costs O(n + packets) steps, not
/// O(n) per packet (rxe keeps the same position in its `dma` state,
/// `rxe_mr_copy` resumes from `cur_sge`/`sge_offset`). An access behind
/// the cursor (a retransmission after a rewind) starts over.
#[derive(Debug, Clone, Default)]
struct Segments {
    list: SegList,
    /// Index of the segment the cursor is in.
    idx: usize,
    /// Message offset where segment `idx` starts.
    start: u64,
}

impl Segments {
    fn new(list: SegList) -> Self {
        Self {
            list,
            idx: 0,
            start: 0,
        }
    }

    /// Calls `f(gpa, at, n)` for each piece of the `len` bytes at message
    /// offset `off` (`at`: offset in those bytes); false if the segments
    /// end first or `f` fails. Adds the segments visited to `steps`.
    fn walk(
        &mut self,
        off: u64,
        len: usize,
        steps: &mut u64,
        mut f: impl FnMut(u64, usize, usize) -> bool,
    ) -> bool {
        if off < self.start {
            self.idx = 0;
            self.start = 0;
        }
        let mut done = 0usize;
        while done < len {
            let Some(&(gpa, seg_len)) = self.list.get(self.idx) else {
                return false;
            };
            *steps += 1;
            let pos = off + done as u64;
            let in_seg = pos - self.start;
            if in_seg >= seg_len {
                self.start += seg_len;
                self.idx += 1;
                continue;
            }
            let n = ((seg_len - in_seg) as usize).min(len - done);
            if !f(gpa + in_seg, done, n) {
                return false;
            }
            done += n;
            if in_seg + n as u64 == seg_len {
                self.start += seg_len;
                self.idx += 1;
            }
        }
        true
    }
}

/// One fetched send WQE.
#[derive(Debug, Clone)]
struct SendWqe {
    idx: u16,
    wr_id: u64,
    opcode: u8,
    flags: u8,
    signaled: bool,
    len: u64,
    imm: [u8; 4],
    remote_addr: u64,
    rkey: u32,
    /// Atomics: compare (CMP_SWAP) or addend (FETCH_ADD), and swap.
    compare_add: u64,
    swap: u64,
    /// ATOMIC_WRITE: the 8 bytes to place, in the WQE's order.
    aw_data: [u8; 8],
    /// FLUSH: the RETH's length and the FETH word (type and level).
    flush_len: u32,
    flush_feth: u32,
    /// The local SGEs as posted, with the rights they need.
    sges: SgeList,
    need: u32,
    /// Translated local segments, valid while `State::mr_epoch` equals
    /// `epoch`.
    segs: Segments,
    epoch: u64,
    inline: Option<Vec<u8>>,
    /// REG_MR / LOCAL_INV / BIND_MW: executed when it reaches the head of
    /// the SQ.
    local: Option<LocalOp>,
    first_psn: u32,
    npkts: u32,
    /// RC: the message's SSN ([`SendCredits`]).
    ssn: u32,
    /// Segment size of this message in bytes, fixed when it was fetched:
    /// retransmissions are cut exactly as the first transmission.
    mtu: u64,
    /// Packets (READ: 0 or npkts = request) transmitted since the last rewind.
    sent: u32,
    /// READ: response packets received; atomic: 1 once its
    /// ATOMIC_ACKNOWLEDGE arrived; ATOMIC_WRITE and FLUSH: 1 once their
    /// zero-length READ response arrived.
    read_rcvd: u32,
    /// A local error found when fetching: completes with this status.
    error: Option<WcStatus>,
    /// UD destination.
    ud: Option<UdDest>,
}

impl SendWqe {
    /// An atomic (CMP_SWAP or FETCH_ADD).
    fn is_atomic(&self) -> bool {
        matches!(self.opcode, WR_ATOMIC_CMP_SWP | WR_ATOMIC_FETCH_ADD)
    }

    /// ATOMIC_WRITE or FLUSH (1.8): answered by one zero-length READ
    /// response.
    fn is_placement(&self) -> bool {
        matches!(self.opcode, WR_ATOMIC_WRITE | WR_FLUSH)
    }

    /// A SEND or an RDMA WRITE with immediate: its message consumes a
    /// receive WQE at the responder.
    fn consumes_rwqe(&self) -> bool {
        matches!(
            self.opcode,
            WR_SEND | WR_SEND_IMM | WR_SEND_INV | WR_RDMA_WRITE_IMM
        )
    }

    /// A READ, an atomic, an ATOMIC_WRITE or a FLUSH: completed by its
    /// responses, not by an ACK, and counted against `max_rd_atomic`.
    fn awaits_response(&self) -> bool {
        self.opcode == WR_RDMA_READ || self.is_atomic() || self.is_placement()
    }
}

#[derive(Debug, Clone, Copy)]
struct UdDest {
    path: Path,
    qpn: u32,
    qkey: u32,
}

/// A translated receive WQE.
#[derive(Debug, Clone)]
struct RecvWqe {
    /// 0 if the WQE could not be read.
    wr_id: u64,
    /// The SGEs as posted.
    sges: SgeList,
    /// Their translation, valid while `State::mr_epoch` equals `epoch`.
    segs: Segments,
    epoch: u64,
    /// Bytes the SGEs hold.
    cap: u64,
    /// A local error found when it was read (unreadable, malformed, an SGE
    /// refused): a message that uses it completes it with this status.
    error: Option<WcStatus>,
}

/// The receive WQE of a message (`recv.rs`), and the responder state of a
/// multi-packet SEND placing data in it.
#[derive(Debug, Clone)]
struct RecvCtx {
    /// RQ or SRQ index: the CQE's `wqe_idx`.
    idx: u16,
    /// Taken from the QP's SRQ: the QP owns it, whatever becomes of the
    /// message (the SRQ's `ci` has passed it).
    from_srq: bool,
    wqe: RecvWqe,
    /// Bytes placed so far.
    off: u64,
}

/// A responder resource: one accepted RDMA READ, atomic, ATOMIC_WRITE or
/// FLUSH request.
#[derive(Debug, Clone, Copy)]
struct ReadRes {
    /// PSN of the first response packet.
    psn: u32,
    /// Response packets (PSNs) of the READ.
    npkts: u32,
    va: u64,
    rkey: u32,
    len: u32,
    /// Segment size of the responses (the path MTU when it was accepted).
    mtu: u64,
    /// MSN carried by the responses.
    msn: u32,
    /// Packet index the responses being sent start from (FIRST/ONLY).
    from: u32,
    /// Next response packet to send; `npkts` once all were sent. The
    /// responses go out as the TX queue has room (backpressure), never
    /// all at once.
    next: u32,
    /// Every response was sent once: the requester may have completed the
    /// READ, so a new READ may take the resource even while a duplicate
    /// has it answered again.
    answered: bool,
    /// What the resource answers (and duplicates) with.
    kind: ResKind,
}

/// What a responder resource answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResKind {
    /// An RDMA READ: its response packets, read from memory as they go.
    Read,
    /// An executed atomic: the ATOMIC_ACKNOWLEDGE of its original value.
    Atomic(AtomicRes),
    /// An executed ATOMIC_WRITE or FLUSH (1.8; the request's BTH opcode,
    /// which a duplicate must match): a zero-length READ_RESPONSE_ONLY.
    Placement(u8),
}

/// The replay cache of one executed atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AtomicRes {
    /// The request's BTH opcode (a duplicate must match it).
    opcode: u8,
    /// The original value of the remote word.
    orig: u64,
}

impl ReadRes {
    /// Responses remain to be sent.
    fn unanswered(&self) -> bool {
        self.next < self.npkts
    }

    /// Packet index of `psn` within this READ's responses.
    fn index_of(&self, psn: u32) -> Option<u32> {
        let d = psn_diff(psn, self.psn);
        (d >= 0 && (d as u32) < self.npkts).then_some(d as u32)
    }
}

/// Responder state of a multi-packet RDMA WRITE.
#[derive(Debug, Clone, Copy)]
struct WriteCtx {
    rkey: u32,
    va: u64,
    left: u64,
    total: u64,
}

impl WriteCtx {
    /// Whether a packet of `n` payload bytes fits what is left of the
    /// WRITE, and ends it exactly if it is the last.
    fn takes(&self, n: u64, last: bool) -> bool {
        n <= self.left && (!last || n == self.left)
    }
}

/// Where a QP keeps its [`Engine`]: boxed, so that lending it to an
/// engine entry point ([`State::with_engine`]) moves a pointer, not the
/// state (576 bytes, out and back for every packet); empty while lent.
#[derive(Debug, Clone)]
pub(crate) struct EngineSlot(Option<Box<Engine>>);

impl Default for EngineSlot {
    fn default() -> Self {
        Self(Some(Box::default()))
    }
}

impl EngineSlot {
    /// The engine state; None while it is lent out.
    pub(crate) fn get(&self) -> Option<&Engine> {
        self.0.as_deref()
    }

    fn get_mut(&mut self) -> Option<&mut Engine> {
        self.0.as_deref_mut()
    }
}

/// Per-QP transport state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Engine {
    // requester
    sq_ci: u16,
    sq_next: u16,
    inflight: VecDeque<SendWqe>,
    next_psn: u32,
    una: u32,
    retry_left: u8,
    rnr_left: u8,
    timer: Option<u64>,
    rnr_wait: Option<(u64, u32)>,
    last_rewind: Option<u32>,
    credits: SendCredits,
    /// This QP's share of `State::rc_inflight`: its packets sent and not
    /// acknowledged when it last reported them.
    inflight_counted: u32,
    // responder
    epsn: u32,
    msn: u32,
    rq_ci: u16,
    recv: Option<RecvCtx>,
    /// SRQ: a WQE this QP took whose message never completed it (dropped
    /// or refused before it was placed): the next message's.
    held: Option<RecvCtx>,
    write: Option<WriteCtx>,
    nak_sent: bool,
    /// UC: the rest of the current message is discarded (its first
    /// packet was lost or refused) until the next FIRST or ONLY packet.
    uc_drop: bool,
    ack_pending: bool,
    /// On `State::ack_list`: responder output due at the end of the batch.
    listed: bool,
    /// The MSN of the newest message that consumed a WQE of the QP's own
    /// RQ (since RTR).
    consumed_msn: Option<u32>,
    credit_watch: Option<CreditWatch>,
    /// Responder resources (RDMA READs, atomics, ATOMIC_WRITEs and
    /// FLUSHes), oldest first; at most `max_dest_rd_atomic`.
    reads: VecDeque<ReadRes>,
    // error/flush
    sq_flushed: u16,
    // events
    comm_est_sent: bool,
    drain_notify: bool,
}

/// An RC requester's end-to-end credits (IBTA 9.7.7.2, device.rst "RC
/// requester"), kept as qib and hfi1 keep them: sequence numbers of
/// messages (SSNs, counted as the responder counts its MSN) against a
/// limit (the LSN) that ACKs raise.
#[derive(Debug, Clone, Copy)]
struct SendCredits {
    /// The SSN of the next message fetched.
    next_ssn: u32,
    /// The SSN of the newest message sent.
    sent_ssn: u32,
    /// The newest SSN the responder has a receive WQE for.
    lsn: u32,
    /// The responder sent code 0x1F: no limit.
    unlimited: bool,
    /// The SSN of a message held back and counted in `credit_waits`.
    held: Option<u32>,
    /// The newest ACK that set the LSN advertised no receive WQE after a
    /// message that consumed one: until this time (ns) a message beyond
    /// the LSN waits for the responder's credit update even when it is
    /// alone.
    dry_until: Option<u64>,
    /// Keep-alives sent since the LSN last rose or the wait began.
    keepalives: u8,
}

/// An RC responder's watch of its RQ's doorbell record after it
/// advertised no receive WQE (device.rst "RC responder", credit updates).
#[derive(Debug, Clone, Copy)]
struct CreditWatch {
    /// When the watch ends (ns), unless WQEs are posted before.
    until: u64,
    /// When the record is read next (ns).
    next: u64,
    /// The interval to the read after that.
    step: u64,
}

impl CreditWatch {
    fn new(now: u64) -> Self {
        Self {
            until: now.saturating_add(CREDIT_WAIT_NS),
            next: now.saturating_add(CREDIT_POLL_NS.0),
            step: CREDIT_POLL_NS.0,
        }
    }

    /// The record was read at `now` and showed no WQE: the next read, or
    /// the end of the watch (false).
    fn rearm(&mut self, now: u64) -> bool {
        if now >= self.until {
            return false;
        }
        self.step = self.step.saturating_mul(2).min(CREDIT_POLL_NS.1);
        self.next = now.saturating_add(self.step).min(self.until);
        true
    }
}

impl Default for SendCredits {
    fn default() -> Self {
        Self {
            next_ssn: 1,
            sent_ssn: 0,
            lsn: 0,
            unlimited: false,
            held: None,
            dry_until: None,
            keepalives: 0,
        }
    }
}

impl SendCredits {
    /// The SSN of a message that takes PSNs.
    fn assign(&mut self) -> u32 {
        let ssn = self.next_ssn;
        self.next_ssn = wire::psn_add(ssn, 1);
        ssn
    }

    /// An AETH with the ACK syndrome, received at `now`: MSN `msn` and
    /// `credit`; message `msn` `consumed` a receive WQE. One that
    /// advertises no WQE after such a message, and sets the LSN or
    /// repeats it, makes a message beyond the LSN wait for the responder's
    /// credit update until `CREDIT_WAIT_NS` from `now`: the responder
    /// watches its RQ for as long.
    fn update(&mut self, msn: u32, credit: codes::Credit, now: u64, consumed: bool) {
        match credit.wqes() {
            None => self.unlimited = true,
            Some(n) => {
                let lsn = wire::psn_add(msn, n);
                let d = psn_diff(lsn, self.lsn);
                if d > 0 {
                    self.lsn = lsn;
                    self.dry_until = None;
                    self.keepalives = 0;
                }
                if n == 0 && consumed && d >= 0 {
                    self.dry_until = Some(now.saturating_add(CREDIT_WAIT_NS));
                    self.keepalives = 0;
                }
            }
        }
    }

    /// Whether message `ssn` may be sent at `now`, and if so records it as
    /// sent: a message sent before (a retransmission or its next packet)
    /// always; a new one that `consumes` a receive WQE if `ssn` is at most
    /// the LSN, or as the probe beyond it if it is `alone` (nothing before
    /// it is unacknowledged) and no credit update is awaited (`dry_until`);
    /// one that consumes none always, raising the LSN by its MSN. `waits`
    /// counts each message held back once.
    fn admit(&mut self, ssn: u32, consumes: bool, alone: bool, now: u64, waits: &mut u64) -> bool {
        if psn_diff(ssn, self.sent_ssn) <= 0 {
            return true;
        }
        if !self.unlimited {
            let awaited = self.dry_until.is_some_and(|t| now < t);
            if consumes && psn_diff(ssn, self.lsn) > 0 && (!alone || awaited) {
                if self.held != Some(ssn) {
                    self.held = Some(ssn);
                    *waits += 1;
                }
                return false;
            }
            if !consumes {
                self.lsn = wire::psn_add(self.lsn, 1);
            }
        }
        self.sent_ssn = ssn;
        true
    }

    /// The wait for a credit update ran out at `now` with no update, and
    /// nothing is unacknowledged: whether a keep-alive goes, after which
    /// the held message waits `CREDIT_WAIT_NS` again, or the message goes
    /// as the probe, after [`CREDIT_KEEPALIVES`]. Whether the responder
    /// answered the last keep-alive does not matter: a host that
    /// deschedules its device delays the answer without losing it, and a
    /// peer gone, or a QP destroyed or reset, is found by the probe's ACK
    /// timer, at most `CREDIT_KEEPALIVES` waits later than without them.
    fn keep_alive(&mut self, now: u64) -> bool {
        if self.keepalives >= CREDIT_KEEPALIVES {
            self.dry_until = None;
            return false;
        }
        self.keepalives += 1;
        self.dry_until = Some(now.saturating_add(CREDIT_WAIT_NS));
        true
    }

    /// When a message held back for an awaited credit update is sent as
    /// the probe anyway.
    fn probe_at(&self) -> Option<u64> {
        let held = self.held.is_some_and(|h| psn_diff(h, self.sent_ssn) > 0);
        self.dry_until.filter(|_| held)
    }
}

/// Where a QP's (or AH's) packets go, resolved from its address vector and
/// the GID table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path {
    dmac: [u8; 6],
    smac: [u8; 6],
    /// 802.1Q TCI of the sgid entry's VLAN with the AV's priority.
    vlan: Option<u16>,
    kind: NetKind,
    sgid: [u8; 16],
    dgid: [u8; 16],
    tc: u8,
    flow_label: u32,
    hop: u8,
    sport: u16,
}

/// Scalars of a QP needed by the engine (copied out of the table).
#[derive(Debug, Clone, Copy)]
struct QpCtx {
    qpn: u32,
    qp_type: u8,
    pdn: u32,
    send_cqn: u32,
    recv_cqn: u32,
    sq_depth: u32,
    rq_depth: u32,
    sq_shift: u8,
    rq_shift: u8,
    max_inline: u32,
    flags: u8,
    /// The SRQ its receive WQEs come from, 0 = its own RQ.
    srqn: u32,
    rq_dbrec: u64,
    state: u8,
    sq_pi: u16,
    attr: QpAttr,
}

impl QpCtx {
    fn of(qpn: u32, q: &Qp) -> Self {
        Self {
            qpn,
            qp_type: q.qp_type,
            pdn: q.pdn,
            send_cqn: q.send_cqn,
            recv_cqn: q.recv_cqn,
            sq_depth: q.sq_depth,
            rq_depth: q.rq_depth,
            sq_shift: q.sq_wqe_shift,
            rq_shift: q.rq_wqe_shift,
            max_inline: q.max_inline,
            flags: q.flags,
            srqn: q.srqn,
            rq_dbrec: q.rq_dbrec,
            state: q.state,
            sq_pi: q.sq_pi,
            attr: q.attr,
        }
    }
    fn rc(&self) -> bool {
        self.qp_type == QPT_RC
    }
    fn uc(&self) -> bool {
        self.qp_type == QPT_UC
    }
    /// RC or UC: a connected QP with PSN-sequenced messages of any length.
    fn connected(&self) -> bool {
        self.rc() || self.uc()
    }
    /// Whether the QP receives at all: it has an RQ or an SRQ.
    fn receives(&self) -> bool {
        self.rq_depth != 0 || self.srqn != 0
    }
    /// Whether a UD/GSI QP's state takes datagrams (RTR and later, SQE
    /// included: only its send queue stopped).
    fn takes_datagrams(&self) -> bool {
        matches!(self.state, QPS_RTR | QPS_RTS | QPS_SQD | QPS_SQE)
    }
}

fn wc_opcode(wr: u8) -> u8 {
    match wr {
        WR_RDMA_WRITE | WR_RDMA_WRITE_IMM => WC_RDMA_WRITE,
        WR_RDMA_READ => WC_RDMA_READ,
        WR_ATOMIC_CMP_SWP => WC_COMP_SWAP,
        WR_ATOMIC_FETCH_ADD => WC_FETCH_ADD,
        WR_LOCAL_INV => WC_LOCAL_INV,
        WR_REG_MR => WC_REG_MR,
        WR_BIND_MW => WC_BIND_MW,
        WR_FLUSH => WC_FLUSH,
        WR_ATOMIC_WRITE => WC_ATOMIC_WRITE,
        _ => WC_SEND,
    }
}

/// Reads a `T` at byte `at` of a WQE (None if it does not fit).
fn wqe_struct<T: FromBytes>(raw: &[u8], at: usize) -> Option<T> {
    T::read_from_prefix(raw.get(at..)?).ok().map(|(t, _)| t)
}

fn pkts_for(len: u64, mtu: u64) -> u32 {
    u32::try_from(len.div_ceil(mtu).max(1)).unwrap_or(u32::MAX)
}

impl State {
    // ------------------------------------------------------------ helpers

    fn qp_ctx(&self, qpn: u32) -> Option<QpCtx> {
        self.qps.get(qpn).map(|q| QpCtx::of(qpn, q))
    }

    /// Path MTU in bytes: the QP's path MTU (IBTA 9.7.1; rxe `qp->mtu`),
    /// which a later change of the port's MTU does not touch; the port's
    /// active MTU for a QP without one (UD, GSI).
    fn mtu_of(&self, attr: &QpAttr) -> u64 {
        let m = if attr.path_mtu == 0 {
            crate::cmds::active_ib_mtu(self.mtu)
        } else {
            attr.path_mtu
        };
        wire::mtu_bytes(m) as u64
    }

    /// Reads `buf` at byte `off` of a buffer described by a page list.
    fn pages_read(&self, pages: &[u64], shift: u8, off: u64, buf: &mut [u8]) -> bool {
        let psize = 1u64 << shift;
        let mut done = 0usize;
        while done < buf.len() {
            let pos = off + done as u64;
            let Some(&base) = usize::try_from(pos >> shift)
                .ok()
                .and_then(|i| pages.get(i))
            else {
                return false;
            };
            let in_page = pos & (psize - 1);
            let chunk = ((psize - in_page) as usize).min(buf.len() - done);
            if self
                .mem
                .read(base + in_page, &mut buf[done..done + chunk])
                .is_err()
            {
                return false;
            }
            done += chunk;
        }
        true
    }

    /// Runs `f` with [`State::wqe_buf`] lent out at `len` bytes for one
    /// WQE, and keeps the buffer for the next one. Its bytes are those of
    /// an earlier WQE: `f` reads the WQE over them and decodes nothing of
    /// a read that failed.
    pub(super) fn with_wqe_buf<R>(
        &mut self,
        len: usize,
        f: impl FnOnce(&mut Self, &mut [u8]) -> R,
    ) -> R {
        let mut buf = std::mem::take(&mut self.wqe_buf);
        buf.resize(len, 0);
        let r = f(self, &mut buf);
        self.wqe_buf = buf;
        r
    }

    fn wqe_read(&self, qpn: u32, sq: bool, idx: u16, buf: &mut [u8]) -> bool {
        let Some(q) = self.qps.get(qpn) else {
            return false;
        };
        let (depth, shift, pages) = if sq {
            (q.sq_depth, q.sq_wqe_shift, &q.sq_pages)
        } else {
            (q.rq_depth, q.rq_wqe_shift, &q.rq_pages)
        };
        if depth == 0 {
            return false;
        }
        let pshift = if sq { q.sq_page_shift } else { q.rq_page_shift };
        let off = u64::from(u32::from(idx) & (depth - 1)) << shift;
        self.pages_read(pages, pshift, off, buf)
    }

    /// The header `T` of the SQ or RQ WQE at `idx` (None if it cannot be
    /// read).
    fn wqe_header<T: FromBytes + IntoBytes>(&self, qpn: u32, sq: bool, idx: u16) -> Option<T> {
        let mut hdr = T::new_zeroed();
        self.wqe_read(qpn, sq, idx, hdr.as_mut_bytes())
            .then_some(hdr)
    }

    /// The `wr_id` of the receive WQE at `idx` (0 if it cannot be read).
    fn recv_wr_id(&self, qpn: u32, idx: u16) -> u64 {
        self.wqe_header::<RqWqeHdr>(qpn, false, idx)
            .map_or(0, |hdr| hdr.wr_id)
    }

    fn post_data_cqe(&mut self, cqn: u32, cqe: Cqe) {
        self.data.cqes += 1;
        if cqe.status != WC_SUCCESS {
            self.data.cqe_errors += 1;
        }
        if cqe.status == WcStatus::WrFlushErr.to_hw() {
            self.data.cqe_flushed += 1;
        }
        let _ = self.post_cqe(cqn, cqe);
    }

    /// Runs `f` on QP `qpn`'s engine state and the device state; None if
    /// there is no such QP.
    ///
    /// Every entry point of the engine works on one QP. Its engine state
    /// lives in its [`crate::objects::Qp`]; for the call it is held out of
    /// the QP so that `f` may use the rest of the device (CQs, MRs, queues,
    /// the QP's own scalars) through `st`, and is put back after (dropped
    /// if `f` destroyed the QP, which no engine path does). Nothing in the
    /// engine looks at another QP's engine state.
    fn with_engine<R>(
        &mut self,
        qpn: u32,
        f: impl FnOnce(&mut Self, &QpCtx, &mut Engine) -> R,
    ) -> Option<R> {
        let qp = self.qp_ctx(qpn)?;
        self.lend_engine(&qp, f)
    }

    /// [`Self::with_engine`] for a QP whose scalars `qp` were just read.
    fn lend_engine<R>(
        &mut self,
        qp: &QpCtx,
        f: impl FnOnce(&mut Self, &QpCtx, &mut Engine) -> R,
    ) -> Option<R> {
        // None if lent out already: no engine path lends a QP's engine
        // twice.
        let mut engine = self.qps.get_mut(qp.qpn)?.engine.0.take()?;
        let r = f(self, qp, &mut engine);
        if let Some(slot) = self.qps.get_mut(qp.qpn) {
            slot.engine.0 = Some(engine);
        }
        Some(r)
    }

    // ------------------------------------------------------------ QP lifecycle

    /// Called after MODIFY_QP changed QP `qpn` from `cur` to `next`.
    pub(crate) fn engine_modified(&mut self, qpn: u32, cur: u8, next: u8) {
        if next == QPS_RESET {
            if let Some(qp) = self.qps.get_mut(qpn) {
                qp.engine = EngineSlot::default();
            }
            return;
        }
        let modified = self.with_engine(qpn, |st, qp, engine| {
            if cur != next && next == QPS_RTR {
                engine.epsn = qp.attr.rq_psn & 0xff_ffff;
                engine.msn = 0;
                engine.reads.clear();
                engine.consumed_msn = None;
                engine.credit_watch = None;
            }
            if cur == QPS_RTR && next == QPS_RTS {
                engine.next_psn = qp.attr.sq_psn & 0xff_ffff;
                engine.una = engine.next_psn;
                engine.retry_left = qp.attr.retry_cnt;
                engine.rnr_left = qp.attr.rnr_retry;
                engine.credits = SendCredits::default();
            }
            if cur == QPS_SQD && next == QPS_SQD {
                // SQD -> SQD may change the retry counts (IBTA 11.2.4.2): they
                // apply to what is outstanding at once.
                engine.retry_left = qp.attr.retry_cnt;
                engine.rnr_left = qp.attr.rnr_retry;
            }
            if next == QPS_ERR && cur != QPS_ERR {
                st.flush_all(qp, engine, None);
            }
            if cur != QPS_SQD && next == QPS_SQD && qp.attr.en_sqd_async_notify != 0 {
                // SQ_DRAINED once nothing is outstanding any more.
                if engine.inflight.is_empty() {
                    st.post_async(EQE_QP_SQ_DRAINED, qpn, 0, 0);
                } else {
                    engine.drain_notify = true;
                }
            }
            if next != QPS_SQD {
                engine.drain_notify = false;
            }
        });
        if modified.is_some() && next == QPS_RTS {
            self.sq_progress(qpn);
        }
    }

    // ------------------------------------------------------------ receive dispatch

    /// One received frame (already known to be for this device's port).
    pub(crate) fn rx_frame(&mut self, frame: &[u8]) {
        self.data.rx_frames += 1;
        if self.faults.stalled {
            self.data.rx_stalled += 1;
            return;
        }
        let pkt = match wire::decode(frame) {
            Ok(pkt) => pkt,
            Err(err) => {
                use wire::ParseError as E;
                let counters = &mut self.data;
                match err {
                    E::Truncated => counters.rx_truncated += 1,
                    E::NotRoce => counters.rx_not_roce += 1,
                    E::BadNetHdr | E::BadIpChecksum | E::BadUdp => counters.rx_bad_header += 1,
                    E::BadBth => counters.rx_bad_bth += 1,
                    E::BadIcrc => counters.rx_bad_icrc += 1,
                }
                return;
            }
        };
        self.data.rx_pkts += 1;
        self.data.rx_bytes += frame.len() as u64;
        // Only frames for this port's MACs and (1.7) for group MACs, which
        // only datagrams to multicast groups use.
        let to_group_mac = wire::is_multicast_mac(&pkt.dmac);
        if !to_group_mac && !self.answers_mac(&pkt.dmac) {
            self.data.rx_no_qp += 1;
            return;
        }
        if pkt.bth.pkey & 0x7fff != 0x7fff {
            self.data.rx_bad_key += 1;
            return;
        }
        if crate::gid::is_multicast(&pkt.net.dgid) || pkt.bth.dest_qp == MCAST_QPN {
            self.mcast_receive(&pkt, frame);
            return;
        }
        if to_group_mac {
            // A unicast destination GID in a frame to a group MAC: no QP
            // takes it (as before 1.7).
            self.data.rx_no_qp += 1;
            return;
        }
        let qpn = pkt.bth.dest_qp;
        let Some(qp) = self.qp_ctx(qpn) else {
            self.data.rx_no_qp += 1;
            return;
        };
        // The transport of the opcode (bits 7:5: 0 RC, 1 UC, 3 UD) must be
        // the QP's.
        let transport = pkt.bth.opcode >> 5;
        let own_transport = (qp.rc() && transport == 0) || (qp.uc() && transport == 1);
        let connected = matches!(qp.state, QPS_RTR | QPS_RTS | QPS_SQD);
        let uc_sqe = qp.uc() && qp.state == QPS_SQE;
        if own_transport && (connected || uc_sqe) && !self.is_from_peer(&qp, &pkt) {
            self.data.rx_bad_addr += 1;
            return;
        }
        let response = matches!(
            pkt.bth.opcode,
            op::RC_ACK
                | op::RC_READ_RESPONSE_FIRST
                | op::RC_READ_RESPONSE_MIDDLE
                | op::RC_READ_RESPONSE_LAST
                | op::RC_READ_RESPONSE_ONLY
                | op::RC_ATOMIC_ACK
        );
        // Which part of the engine takes the packet, in which QP states. A
        // UC QP in SQE still receives (only its send queue stopped).
        let accepted = match (qp.qp_type, transport) {
            (QPT_RC, 0) if response => matches!(qp.state, QPS_RTS | QPS_SQD),
            (QPT_RC, 0) => connected,
            (QPT_UC, 1) => connected || uc_sqe,
            (QPT_UD | QPT_GSI, 3) => qp.takes_datagrams(),
            _ => false,
        };
        if !accepted {
            self.data.rx_no_qp += 1;
            return;
        }
        self.lend_engine(&qp, |st, qp, engine| {
            if qp.uc() {
                st.uc_request(qp, engine, &pkt);
            } else if !qp.rc() {
                st.ud_receive(qp, engine, &pkt, frame);
            } else if response {
                st.data.responses_rcvd += 1;
                st.rc_response(qp, engine, &pkt);
            } else {
                st.rc_request(qp, engine, &pkt);
            }
        });
    }

    /// An RC or UC packet comes from the QP's peer to the QP's own address: its
    /// encapsulation, source and destination GID/IP are those of the QP's
    /// address vector (rxe `check_addr`).
    fn is_from_peer(&self, qp: &QpCtx, pkt: &Packet<'_>) -> bool {
        self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num)
            .is_some_and(|path| {
                pkt.net.kind == path.kind
                    && pkt.net.sgid == path.dgid
                    && pkt.net.dgid == path.sgid
                    && vid(pkt.vlan) == vid(path.vlan)
            })
    }

    /// The window of RC requester `qp` (its engine lent out of the QP):
    /// [`WINDOW`], or its equal share of [`INFLIGHT_BUDGET`] among the RC
    /// QPs in RTS or SQD with packets unacknowledged if that is smaller, and
    /// no more than the other QPs' packets in flight leave of the budget,
    /// but at least [`MIN_WINDOW`]. The busy QPs and their packets in
    /// flight are counted again at most every [`BUSY_RECOUNT_NS`], so that
    /// no path that resets, errors or destroys a QP can leak budget; in
    /// between, each QP brings its own count up to date when it transmits.
    fn rc_window(&mut self, qp: &QpCtx, engine: &mut Engine) -> i32 {
        if self.now_ns.saturating_sub(self.busy_counted_ns) >= BUSY_RECOUNT_NS {
            self.busy_counted_ns = self.now_ns;
            let sending = |t: u8, state: u8, engine: &Engine| {
                t == QPT_RC && matches!(state, QPS_RTS | QPS_SQD) && engine.next_psn != engine.una
            };
            let mut busy = 0usize;
            let mut inflight = 0u32;
            self.qps.for_each_mut(|q| {
                let (qp_type, state) = (q.qp_type, q.state);
                let Some(qe) = q.engine.get_mut() else {
                    return;
                };
                let n = if sending(qp_type, state, qe) {
                    busy += 1;
                    qe.unacked_sent()
                } else {
                    0
                };
                qe.inflight_counted = n;
                inflight = inflight.saturating_add(n);
            });
            // The QP being served holds its engine out of the table; its
            // packets in flight are added just below.
            let state = self.qps.get(qp.qpn).map_or(qp.state, |q| q.state);
            self.busy_rc = busy.saturating_add(usize::from(sending(qp.qp_type, state, engine)));
            engine.inflight_counted = 0;
            self.rc_inflight = inflight;
        }
        self.count_inflight(engine);
        let share = INFLIGHT_BUDGET as usize / self.busy_rc.max(1);
        let others = self.rc_inflight.saturating_sub(engine.inflight_counted);
        let left = INFLIGHT_BUDGET.saturating_sub(others) as usize;
        i32::try_from(share.min(left))
            .unwrap_or(WINDOW)
            .clamp(MIN_WINDOW, WINDOW)
    }

    /// Brings `State::rc_inflight` up to date with RC requester `engine`'s
    /// packets in flight. Those of the other QPs are what they last
    /// reported, refreshed for all at each recount in [`Self::rc_window`],
    /// which also forgets QPs that were destroyed or reset.
    pub(super) fn count_inflight(&mut self, engine: &mut Engine) {
        let n = engine.unacked_sent();
        self.rc_inflight = self
            .rc_inflight
            .saturating_sub(engine.inflight_counted)
            .saturating_add(n);
        engine.inflight_counted = n;
    }
}

/// The VLAN ID of a TCI, 0 for an untagged or priority-tagged frame.
pub(crate) fn vid(tci: Option<u16>) -> u16 {
    tci.map_or(0, |t| t & wire::VLAN_VID_MASK)
}

impl Engine {
    /// Packets sent and not acknowledged yet: the PSNs from `una` to the
    /// end of the last packet sent (a READ request counts its responses'
    /// PSNs, as the window does).
    fn unacked_sent(&self) -> u32 {
        self.inflight
            .iter()
            .rev()
            .find(|w| w.sent > 0)
            .and_then(|w| {
                u32::try_from(psn_diff(wire::psn_add(w.first_psn, w.sent), self.una)).ok()
            })
            .unwrap_or(0)
    }

    /// The PSN to re-request of the oldest incomplete READ, if `psn` is
    /// beyond all of that READ's responses.
    fn lost_read_before(&self, psn: u32) -> Option<u32> {
        self.inflight
            .iter()
            .find(|w| w.awaits_response() && w.read_rcvd < w.npkts)
            .filter(|w| {
                w.sent >= w.npkts && psn_diff(psn, crate::wire::psn_add(w.first_psn, w.npkts)) >= 0
            })
            .map(|w| crate::wire::psn_add(w.first_psn, w.read_rcvd))
    }

    /// The RQ's consumer index: the receive WQEs taken so far.
    pub(crate) fn rq_ci(&self) -> u16 {
        self.rq_ci
    }

    /// Whether a packet that went on the wire is unacknowledged: what the
    /// retransmission timer covers. A message held back for end-to-end
    /// credits has sent nothing, and waits for no ACK.
    fn on_wire(&self) -> bool {
        self.inflight.iter().any(|w| w.sent > 0)
    }

    /// Whether message `ssn`, outstanding, consumes a receive WQE.
    fn consumed(&self, ssn: u32) -> bool {
        self.inflight
            .iter()
            .any(|w| w.ssn == ssn && w.error.is_none() && w.local.is_none() && w.consumes_rwqe())
    }

    /// The earliest timer of this QP.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        [
            self.timer,
            self.rnr_wait.map(|(t, _)| t),
            self.credits.probe_at(),
            self.credit_watch.map(|w| w.next),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
