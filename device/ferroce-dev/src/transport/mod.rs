// SPDX-License-Identifier: GPL-2.0
//! The data path: RC requester, responder and completer, and UD, as IBTA
//! vol. 1 chapter 9 specifies them (the reference peer is Linux rxe).
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
//! device's own MAC are looped back internally.
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
//! and re-requests the missing part of the read.
//!
//! Responder: in-order packets are executed; duplicates (PSN behind the
//! expected PSN) are acknowledged again; a PSN ahead of the expected one
//! gets one PSN sequence error NAK until the expected PSN arrives. ACKs are
//! coalesced: at most one ACK per QP per batch of received frames, for the
//! newest PSN.
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
//! A SEND without a receive WQE gets an RNR NAK (`min_rnr_timer`). Invalid
//! requests and remote access errors get the matching NAK and move the
//! responder's QP to the error state.

mod memreg;

use std::collections::VecDeque;

use zerocopy::FromBytes;

use crate::device::State;
use crate::hw::*;
use crate::objects::{MrKind, Qp};
use crate::wire::{
    self, aeth, op, psn_add, psn_diff, Aeth, Bth, Deth, NetHdr, NetKind, Packet, Reth,
};
use memreg::LocalOp;

/// Largest number of unacknowledged PSNs in flight per QP.
pub const WINDOW: i32 = 512;
/// AckReq is also set on every this many packets of a long message.
pub const ACK_REQ_EVERY: u32 = 16;
/// Largest number of fetched, uncompleted WQEs per QP.
const MAX_INFLIGHT_WQES: usize = 128;
/// Frames queued (wire and loopback) before READ responses wait for the
/// queue to drain (backpressure); nothing queued is ever dropped for room.
pub const TX_QUEUE_MAX: usize = 65536;
/// Last resort if nobody drains the wire queue: new frames beyond this are
/// dropped (as lost on the wire) and counted in `tx_overflow`. Only reached
/// by window-bounded requesters on many QPs, never by READ responses.
const TX_QUEUE_HARD_MAX: usize = 4 * TX_QUEUE_MAX;
/// Largest message (2 GiB).
const MAX_MSG: u64 = 1 << 31;
/// Most PSNs one message may take: fewer than 2^23 - [`WINDOW`], so that
/// PSNs in flight never span half the 24-bit PSN space and alias (IBTA
/// 9.7.1). At path MTU 256 this caps a message at (2^23 - 513) x 256 bytes.
pub const MAX_MSG_PKTS: u32 = (1 << 23) - WINDOW as u32 - 1;
/// The message size advertised in QUERY_CAPS: the largest that fits
/// [`MAX_MSG_PKTS`] at every path MTU (the smallest, 256, binds).
pub const MAX_MSG_ADVERTISED: u32 = MAX_MSG_PKTS * 256;
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
    /// Frames sent (wire and loopback).
    pub tx_frames: u64,
    /// Frames looped back to this device.
    pub loopback_frames: u64,
    /// Frames dropped because the device was stalled.
    pub rx_stalled: u64,
    /// Frames for the wire dropped because nobody took them.
    pub tx_overflow: u64,
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
    /// Dropped: destination MAC, QP, QP type or QP state does not match.
    pub rx_no_qp: u64,
    /// Dropped: P_Key or Q_Key mismatch.
    pub rx_bad_key: u64,
    /// RC packets dropped: source or destination address is not the QP's
    /// peer and local address (rxe `check_addr`).
    pub rx_bad_addr: u64,
    /// UD datagrams dropped for want of a receive WQE.
    pub rx_ud_no_wqe: u64,
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
    /// RNR NAKs received.
    pub rnr_naks_rcvd: u64,
    /// PSN sequence error NAKs received.
    pub seq_naks_rcvd: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Go-back-N rewinds (timeouts, NAKs, implied NAKs).
    pub retransmits: u64,
    /// Stale or unexpected responses ignored by the completer.
    pub stale_responses: u64,
    /// CQEs written by the data path.
    pub cqes: u64,
    /// Of those, with an error status (flushes included).
    pub cqe_errors: u64,
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
    /// The local SGEs as posted, with the rights they need.
    sges: Vec<Sge>,
    need: u32,
    /// Translated local segments (guest physical, length), valid while
    /// `State::mr_epoch` equals `epoch`.
    segs: Vec<(u64, u64)>,
    epoch: u64,
    inline: Option<Vec<u8>>,
    /// REG_MR / LOCAL_INV: executed when it reaches the head of the SQ.
    local: Option<LocalOp>,
    first_psn: u32,
    npkts: u32,
    /// Segment size of this message in bytes, fixed when it was fetched:
    /// retransmissions are cut exactly as the first transmission.
    mtu: u64,
    /// Packets (READ: 0 or npkts = request) transmitted since the last rewind.
    sent: u32,
    /// READ: response packets received.
    read_rcvd: u32,
    /// A local error found when fetching: completes with this status.
    error: Option<u8>,
    /// UD destination.
    ud: Option<UdDest>,
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
    wr_id: u64,
    /// The SGEs as posted.
    sges: Vec<Sge>,
    /// Their translation, valid while `State::mr_epoch` equals `epoch`.
    segs: Vec<(u64, u64)>,
    epoch: u64,
    /// Bytes the SGEs hold.
    cap: u64,
}

/// Responder state of a multi-packet SEND.
#[derive(Debug, Clone)]
struct RecvCtx {
    idx: u16,
    wqe: RecvWqe,
    off: u64,
}

/// A responder resource: one accepted RDMA READ request.
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
    // responder
    epsn: u32,
    msn: u32,
    rq_ci: u16,
    recv: Option<RecvCtx>,
    write: Option<WriteCtx>,
    nak_sent: bool,
    ack_pending: bool,
    /// On `State::ack_list`: responder output due at the end of the batch.
    listed: bool,
    /// Responder resources (RDMA READs), oldest first; at most
    /// `max_dest_rd_atomic`.
    reads: VecDeque<ReadRes>,
    // error/flush
    sq_flushed: u16,
    // events
    comm_est_sent: bool,
    drain_notify: bool,
}

/// Where a QP's (or AH's) packets go, resolved from its address vector and
/// the GID table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path {
    dmac: [u8; 6],
    smac: [u8; 6],
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
            rq_dbrec: q.rq_dbrec,
            state: q.state,
            sq_pi: q.sq_pi,
            attr: q.attr,
        }
    }
    fn rc(&self) -> bool {
        self.qp_type == QPT_RC
    }
}

/// How a packet is being answered by the responder.
enum RespErr {
    /// NAK with this syndrome, responder QP to error, optional recv CQE status.
    Fatal(u8, Option<u8>),
    /// RNR NAK.
    Rnr,
}

fn wc_opcode(wr: u8) -> u8 {
    match wr {
        WR_RDMA_WRITE | WR_RDMA_WRITE_IMM => WC_RDMA_WRITE,
        WR_RDMA_READ => WC_RDMA_READ,
        WR_LOCAL_INV => WC_LOCAL_INV,
        WR_REG_MR => WC_REG_MR,
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

    /// The `wr_id` of the WQE at `idx` (0 if it cannot be read).
    fn wqe_wr_id(&self, qpn: u32, sq: bool, idx: u16) -> u64 {
        let mut b = [0u8; 8];
        if self.wqe_read(qpn, sq, idx, &mut b) {
            u64::from_le_bytes(b)
        } else {
            0
        }
    }

    fn mr_for(&self, key: u32, pdn: u32) -> Option<&crate::objects::Mr> {
        self.mrs
            .get(key >> KEY_INDEX_SHIFT)
            .filter(|m| m.key == key && m.pdn == pdn)
    }

    /// Translates `len` bytes at `addr` through `key` needing `need`.
    fn translate(
        &self,
        key: u32,
        pdn: u32,
        addr: u64,
        len: u64,
        need: u32,
    ) -> Option<Vec<(u64, u64)>> {
        if len == 0 {
            return Some(Vec::new());
        }
        let mr = self.mr_for(key, pdn)?;
        let segs = mr.translate(addr, len, need).ok()?;
        // A physical MR covers guest memory, not the whole address space.
        if mr.kind == MrKind::Phys && self.mem.check_range(addr, len).is_err() {
            return None;
        }
        Some(segs)
    }

    /// Translates a list of SGEs needing `need` (None: one is refused).
    fn translate_sges(&self, pdn: u32, sges: &[Sge], need: u32) -> Option<Vec<(u64, u64)>> {
        let mut segs = Vec::new();
        for sge in sges {
            segs.extend(self.translate(sge.lkey, pdn, sge.addr, u64::from(sge.length), need)?);
        }
        Some(segs)
    }

    /// Redoes the translation of a fetched WQE's SGEs if an MR was
    /// invalidated since it was made; false if it is refused now.
    fn refresh_send_segs(&self, pdn: u32, w: &mut SendWqe) -> bool {
        if w.epoch == self.mr_epoch || w.inline.is_some() {
            return true;
        }
        match self.translate_sges(pdn, &w.sges, w.need) {
            Some(segs) => {
                w.segs = segs;
                w.epoch = self.mr_epoch;
                true
            }
            None => false,
        }
    }

    /// The same for the receive WQE of a SEND under way.
    fn refresh_recv_segs(&self, pdn: u32, wqe: &mut RecvWqe) -> bool {
        if wqe.epoch == self.mr_epoch {
            return true;
        }
        match self.translate_sges(pdn, &wqe.sges, ACCESS_LOCAL_WRITE) {
            Some(segs) => {
                wqe.segs = segs;
                wqe.epoch = self.mr_epoch;
                true
            }
            None => false,
        }
    }

    /// The Q_Key of a UD/GSI QP: the GSI QP's is always 0x80010000.
    fn qp_qkey(c: &QpCtx) -> u32 {
        if c.qp_type == QPT_GSI {
            wire::GSI_QKEY
        } else {
            c.attr.qkey
        }
    }

    /// Copies `len` bytes from offset `off` of a segment list into `out`.
    fn gather(&mut self, segs: &[(u64, u64)], mut off: u64, len: usize, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        out.resize(start + len, 0);
        let mut done = 0usize;
        for &(gpa, slen) in segs {
            if done == len {
                break;
            }
            if off >= slen {
                off -= slen;
                continue;
            }
            let n = ((slen - off) as usize).min(len - done);
            if self
                .mem
                .read(gpa + off, &mut out[start + done..start + done + n])
                .is_err()
            {
                self.counters.hw.bad_dma += 1;
                return false;
            }
            done += n;
            off = 0;
        }
        done == len
    }

    /// Writes `data` at offset `off` of a segment list.
    fn scatter(&mut self, segs: &[(u64, u64)], mut off: u64, data: &[u8]) -> bool {
        let mut done = 0usize;
        for &(gpa, slen) in segs {
            if done == data.len() {
                break;
            }
            if off >= slen {
                off -= slen;
                continue;
            }
            let n = ((slen - off) as usize).min(data.len() - done);
            if self.mem.write(gpa + off, &data[done..done + n]).is_err() {
                self.counters.hw.bad_dma += 1;
                return false;
            }
            done += n;
            off = 0;
        }
        done == data.len()
    }

    /// Resolves an address vector into a path (None: the sgid entry is gone
    /// or does not match the AV's network type).
    fn path_of(&self, av: &Av, src_qpn: u32, dst_qpn: u32) -> Option<Path> {
        let g = self.gids.get(usize::from(av.sgid_index))?.as_ref()?;
        if g.network_type != av.network_type {
            return None;
        }
        let kind = NetKind::from_hw(av.network_type)?;
        let sport = if av.udp_sport != 0 {
            av.udp_sport
        } else {
            wire::udp_sport(av.flow_label, src_qpn, dst_qpn)
        };
        Some(Path {
            dmac: av.dmac,
            smac: g.smac,
            kind,
            sgid: g.gid,
            dgid: av.dgid,
            tc: av.traffic_class,
            flow_label: av.flow_label & 0xfffff,
            hop: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            sport,
        })
    }

    /// Encodes and queues one packet on `path`.
    #[allow(clippy::too_many_arguments)]
    fn send_pkt(
        &mut self,
        path: &Path,
        bth: Bth,
        reth: Reth,
        aeth: Aeth,
        deth: Deth,
        imm: [u8; 4],
        payload: &[u8],
    ) {
        let p = Packet {
            dmac: path.dmac,
            smac: path.smac,
            net: NetHdr {
                kind: path.kind,
                sgid: path.sgid,
                dgid: path.dgid,
                traffic_class: path.tc,
                flow_label: path.flow_label,
                hop_limit: path.hop,
            },
            udp_sport: path.sport,
            ip_id: self.ip_id,
            bth,
            reth,
            aeth,
            deth,
            imm,
            // SEND with invalidate: the key travels where ImmDt would.
            ieth: u32::from_be_bytes(imm),
            payload,
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut frame = Vec::with_capacity(payload.len() + 96);
        if !wire::encode(&p, &mut frame) {
            return;
        }
        self.emit(frame);
    }

    /// Encodes and queues a responder packet (ACK/NAK or READ response).
    fn send_response(&mut self, path: &Path, bth: Bth, aeth: Aeth, payload: &[u8]) {
        let (reth, deth) = (Reth::default(), Deth::default());
        self.send_pkt(path, bth, reth, aeth, deth, [0; 4], payload);
    }

    /// Queues a frame: to the loopback queue if it is for our own MAC.
    pub(crate) fn emit(&mut self, frame: Vec<u8>) {
        if self.faults.cfg.active() || self.faults.held.is_some() {
            let now = self.now_ns;
            for f in self.faults.apply(frame, now) {
                self.queue_frame(f);
            }
        } else {
            self.queue_frame(frame);
        }
    }

    /// Queues a frame after fault injection.
    pub(crate) fn queue_frame(&mut self, frame: Vec<u8>) {
        self.data.tx_frames += 1;
        if frame.get(0..6) == Some(&self.cfg.mac[..]) {
            self.data.loopback_frames += 1;
            self.loopback.push_back(frame);
        } else {
            if self.tx.len() >= TX_QUEUE_HARD_MAX {
                self.data.tx_overflow += 1;
                return;
            }
            self.tx.push_back(frame);
        }
    }

    fn post_data_cqe(&mut self, cqn: u32, cqe: Cqe) {
        self.data.cqes += 1;
        if cqe.status != WC_SUCCESS {
            self.data.cqe_errors += 1;
        }
        let _ = self.post_cqe(cqn, cqe);
    }

    fn take_engine(&mut self, qpn: u32) -> Engine {
        self.engines.remove(&qpn).unwrap_or_default()
    }

    // ------------------------------------------------------------ QP lifecycle

    /// Called after MODIFY_QP changed QP `qpn` from `cur` to `next`.
    pub(crate) fn engine_modified(&mut self, qpn: u32, cur: u8, next: u8) {
        let Some(c) = self.qp_ctx(qpn) else {
            return;
        };
        if next == QPS_RESET {
            self.engines.remove(&qpn);
            return;
        }
        let mut e = self.take_engine(qpn);
        if cur != next && next == QPS_RTR {
            e.epsn = c.attr.rq_psn & 0xff_ffff;
            e.msn = 0;
            e.reads.clear();
        }
        if cur == QPS_RTR && next == QPS_RTS {
            e.next_psn = c.attr.sq_psn & 0xff_ffff;
            e.una = e.next_psn;
            e.retry_left = c.attr.retry_cnt;
            e.rnr_left = c.attr.rnr_retry;
        }
        if cur == QPS_SQD && next == QPS_SQD {
            // SQD -> SQD may change the retry counts (IBTA 11.2.4.2): they
            // apply to what is outstanding at once.
            e.retry_left = c.attr.retry_cnt;
            e.rnr_left = c.attr.rnr_retry;
        }
        if next == QPS_ERR && cur != QPS_ERR {
            self.flush_all(&c, &mut e, None);
        }
        if cur != QPS_SQD && next == QPS_SQD && c.attr.en_sqd_async_notify != 0 {
            // SQ_DRAINED once nothing is outstanding any more.
            if e.inflight.is_empty() {
                self.post_async(EQE_QP_SQ_DRAINED, qpn, 0, 0);
            } else {
                e.drain_notify = true;
            }
        }
        if next != QPS_SQD {
            e.drain_notify = false;
        }
        self.engines.insert(qpn, e);
        if next == QPS_RTS {
            self.sq_progress(qpn);
        }
    }

    /// Called when QP `qpn` is destroyed.
    pub(crate) fn engine_destroyed(&mut self, qpn: u32) {
        self.engines.remove(&qpn);
    }

    /// Moves the QP to ERR (posting QP_FATAL), completes the head send WQE
    /// with `head_status` if given, and flushes everything else.
    fn qp_fail(&mut self, c: &QpCtx, e: &mut Engine, head_status: Option<u8>) {
        if let Some(q) = self.qps.get_mut(c.qpn) {
            if q.state == QPS_ERR {
                return;
            }
            q.state = QPS_ERR;
            q.attr.qp_state = QPS_ERR;
            q.attr.cur_qp_state = QPS_ERR;
        }
        self.post_async(EQE_QP_FATAL, c.qpn, 0, 0);
        self.flush_all(c, e, head_status);
    }

    fn flush_all(&mut self, c: &QpCtx, e: &mut Engine, head_status: Option<u8>) {
        let mut first = head_status;
        while let Some(w) = e.inflight.pop_front() {
            let st = first.take().unwrap_or(WC_WR_FLUSH_ERR);
            self.complete_send(c, &w, st);
            e.sq_ci = w.idx.wrapping_add(1);
        }
        e.sq_next = e.sq_ci;
        e.timer = None;
        e.rnr_wait = None;
        self.flush_sq_posted(c, e);
        self.flush_rq(c, e);
        e.recv = None;
        e.write = None;
        e.reads.clear();
    }

    /// Flushes SQ WQEs posted but not fetched (up to the last doorbell).
    fn flush_sq_posted(&mut self, c: &QpCtx, e: &mut Engine) {
        let pi = self.qps.get(c.qpn).map_or(e.sq_next, |q| q.sq_pi);
        let mut n = 0u32;
        while e.sq_next != pi && n < c.sq_depth {
            let mut hdr = [0u8; 32];
            let idx = e.sq_next;
            let wr_id = if self.wqe_read(c.qpn, true, idx, &mut hdr) {
                u64::from_le_bytes(hdr[0..8].try_into().unwrap_or_default())
            } else {
                0
            };
            let op = hdr[8];
            self.post_data_cqe(
                c.send_cqn,
                Cqe {
                    wr_id,
                    qpn: c.qpn,
                    opcode: wc_opcode(op),
                    status: WC_WR_FLUSH_ERR,
                    wqe_idx: idx,
                    ..Cqe::zeroed()
                },
            );
            e.sq_next = idx.wrapping_add(1);
            n += 1;
        }
        e.sq_ci = e.sq_next;
        e.sq_flushed = e.sq_next;
    }

    fn rq_pi(&mut self, c: &QpCtx) -> u16 {
        let mut b = [0u8; 4];
        if c.rq_depth == 0 {
            return 0;
        }
        if self.mem.read(c.rq_dbrec, &mut b).is_err() {
            self.counters.hw.bad_dma += 1;
            return self.qps.get(c.qpn).map_or(0, |q| q.rq_pi);
        }
        u32::from_le_bytes(b) as u16
    }

    fn rq_available(&mut self, c: &QpCtx, e: &Engine) -> bool {
        let pi = self.rq_pi(c);
        let n = u32::from(pi.wrapping_sub(e.rq_ci));
        n != 0 && n <= c.rq_depth
    }

    fn flush_rq(&mut self, c: &QpCtx, e: &mut Engine) {
        if c.rq_depth == 0 {
            return;
        }
        let pi = self.rq_pi(c);
        if u32::from(pi.wrapping_sub(e.rq_ci)) > c.rq_depth {
            return;
        }
        while e.rq_ci != pi {
            let wr_id = self.wqe_wr_id(c.qpn, false, e.rq_ci);
            self.post_data_cqe(
                c.recv_cqn,
                Cqe {
                    wr_id,
                    qpn: c.qpn,
                    opcode: WC_RECV,
                    status: WC_WR_FLUSH_ERR,
                    wqe_idx: e.rq_ci,
                    ..Cqe::zeroed()
                },
            );
            e.rq_ci = e.rq_ci.wrapping_add(1);
        }
    }

    /// RQ doorbell: in ERR, flushes the new receive WQEs.
    pub(crate) fn rq_progress(&mut self, qpn: u32) {
        let Some(c) = self.qp_ctx(qpn) else {
            return;
        };
        if c.state == QPS_ERR {
            let mut e = self.take_engine(qpn);
            self.flush_rq(&c, &mut e);
            self.engines.insert(qpn, e);
        }
    }

    fn complete_send(&mut self, c: &QpCtx, w: &SendWqe, status: u8) {
        let sig = w.signaled || c.flags & QP_FLAG_SQ_SIG_ALL != 0;
        if status == WC_SUCCESS && !sig {
            return;
        }
        let byte_len = if w.opcode == WR_RDMA_READ {
            w.len as u32
        } else {
            0
        };
        self.post_data_cqe(
            c.send_cqn,
            Cqe {
                wr_id: w.wr_id,
                byte_len,
                qpn: c.qpn,
                opcode: wc_opcode(w.opcode),
                status,
                wqe_idx: w.idx,
                ..Cqe::zeroed()
            },
        );
    }

    // ------------------------------------------------------------ requester

    /// Fetches and validates the send WQE at `idx`.
    fn fetch_wqe(&mut self, c: &QpCtx, idx: u16, mtu: u64) -> SendWqe {
        let stride = 1usize << c.sq_shift;
        let mut raw = vec![0u8; stride];
        let mut w = SendWqe {
            idx,
            wr_id: 0,
            opcode: 0,
            flags: 0,
            signaled: false,
            len: 0,
            imm: [0; 4],
            remote_addr: 0,
            rkey: 0,
            sges: Vec::new(),
            need: 0,
            segs: Vec::new(),
            epoch: self.mr_epoch,
            inline: None,
            local: None,
            first_psn: 0,
            npkts: 0,
            mtu,
            sent: 0,
            read_rcvd: 0,
            error: None,
            ud: None,
        };
        if !self.wqe_read(c.qpn, true, idx, &mut raw) {
            self.counters.hw.bad_dma += 1;
            w.error = Some(WC_LOC_QP_OP_ERR);
            return w;
        }
        if let Err(status) = self.decode_send_wqe(c, &raw, &mut w, mtu) {
            // Never sent: it takes no PSN and is no READ awaiting
            // responses (which would hold back the ACKs of the WQEs
            // before it).
            w.error = Some(status);
            w.npkts = 0;
        }
        w
    }

    /// Decodes and validates a send WQE into `w`; the error is the WQE's
    /// completion status (nothing is read or sent for it).
    fn decode_send_wqe(
        &mut self,
        c: &QpCtx,
        raw: &[u8],
        w: &mut SendWqe,
        mtu: u64,
    ) -> Result<(), u8> {
        let hdr: SqWqeHdr = wqe_struct(raw, 0).ok_or(WC_LOC_QP_OP_ERR)?;
        w.wr_id = hdr.wr_id;
        w.opcode = hdr.opcode;
        w.flags = hdr.flags;
        w.signaled = hdr.flags & WQE_SIGNALED != 0;
        w.imm = hdr.imm_data.to_le_bytes();
        let ud = !c.rc();
        let common_flags = WQE_SIGNALED | WQE_SOLICITED | WQE_INLINE | WQE_FENCE;
        let (op_ok, known_flags) = if ud {
            (
                matches!(hdr.opcode, WR_SEND | WR_SEND_IMM),
                common_flags | WQE_AV,
            )
        } else {
            let op_ok = matches!(
                hdr.opcode,
                WR_SEND
                    | WR_SEND_IMM
                    | WR_SEND_INV
                    | WR_RDMA_WRITE
                    | WR_RDMA_WRITE_IMM
                    | WR_RDMA_READ
                    | WR_LOCAL_INV
                    | WR_REG_MR
            );
            (op_ok, common_flags)
        };
        let inline = hdr.flags & WQE_INLINE != 0;
        if !op_ok || hdr.flags & !known_flags != 0 || (inline && hdr.opcode == WR_RDMA_READ) {
            return Err(WC_LOC_QP_OP_ERR);
        }
        match hdr.opcode {
            WR_REG_MR | WR_LOCAL_INV => {
                if hdr.num_sge != 0 || inline || hdr.inline_len != 0 {
                    return Err(WC_LOC_PROT_ERR);
                }
                let local = if hdr.opcode == WR_REG_MR {
                    LocalOp::RegMr {
                        seg: wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WC_LOC_PROT_ERR)?,
                        pbl: wqe_struct(raw, SQ_WQE_DATA_OFFSET).ok_or(WC_LOC_PROT_ERR)?,
                    }
                } else {
                    LocalOp::LocalInv {
                        key: u32::from_be_bytes(w.imm),
                    }
                };
                w.local = Some(local);
                w.npkts = 0;
                return Ok(());
            }
            WR_RDMA_WRITE | WR_RDMA_WRITE_IMM | WR_RDMA_READ => {
                let rdma: SqWqeRdma = wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WC_LOC_QP_OP_ERR)?;
                w.remote_addr = rdma.remote_addr;
                w.rkey = rdma.rkey;
            }
            _ => {}
        }
        let data = if ud {
            self.decode_ud_dest(c, raw, w)?
        } else {
            SQ_WQE_DATA_OFFSET
        };
        let room = raw.len().saturating_sub(data);
        if inline {
            let len = hdr.inline_len as usize;
            if hdr.inline_len > c.max_inline || len > room {
                return Err(WC_LOC_LEN_ERR);
            }
            let bytes = raw.get(data..data + len).ok_or(WC_LOC_LEN_ERR)?;
            w.len = u64::from(hdr.inline_len);
            w.inline = Some(bytes.to_vec());
        } else {
            let num_sge = usize::from(hdr.num_sge);
            let max_sge =
                (room / core::mem::size_of::<Sge>()).min(self.cfg.limits.max_sge as usize);
            if num_sge > max_sge {
                return Err(WC_LOC_LEN_ERR);
            }
            w.need = if hdr.opcode == WR_RDMA_READ {
                ACCESS_LOCAL_WRITE
            } else {
                0
            };
            for i in 0..num_sge {
                let at = data + i * core::mem::size_of::<Sge>();
                w.sges.push(wqe_struct(raw, at).ok_or(WC_LOC_LEN_ERR)?);
            }
            w.segs = self
                .translate_sges(c.pdn, &w.sges, w.need)
                .ok_or(WC_LOC_PROT_ERR)?;
            w.len = w.sges.iter().fold(0u64, |total, sge| {
                total.saturating_add(u64::from(sge.length))
            });
        }
        if w.len > MAX_MSG || (ud && w.len > mtu) {
            return Err(WC_LOC_LEN_ERR);
        }
        w.npkts = if ud { 1 } else { pkts_for(w.len, mtu) };
        if w.npkts > MAX_MSG_PKTS {
            return Err(WC_LOC_LEN_ERR);
        }
        Ok(())
    }

    /// Resolves the destination of a UD/GSI send WQE, from its AH or from
    /// its inline address vector (`WQE_AV`); returns where its SGEs or
    /// inline data start.
    fn decode_ud_dest(&mut self, c: &QpCtx, raw: &[u8], w: &mut SendWqe) -> Result<usize, u8> {
        let dest: SqWqeUd = wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WC_LOC_QP_OP_ERR)?;
        let (av, data) = if w.flags & WQE_AV != 0 {
            let av: Av = wqe_struct(raw, SQ_WQE_DATA_OFFSET).ok_or(WC_LOC_QP_OP_ERR)?;
            let av_end = SQ_WQE_DATA_OFFSET + core::mem::size_of::<Av>();
            let reserved = raw
                .get(av_end..SQ_WQE_AV_DATA_OFFSET)
                .ok_or(WC_LOC_QP_OP_ERR)?;
            if dest.ahn != 0 || reserved.iter().any(|b| *b != 0) || self.check_av(&av).is_err() {
                return Err(WC_LOC_QP_OP_ERR);
            }
            (av, SQ_WQE_AV_DATA_OFFSET)
        } else {
            let av = self
                .ahs
                .get(dest.ahn)
                .filter(|ah| ah.pdn == c.pdn)
                .map(|ah| ah.av)
                .ok_or(WC_LOC_QP_OP_ERR)?;
            (av, SQ_WQE_DATA_OFFSET)
        };
        let qpn = dest.remote_qpn & QPN_MASK;
        let qkey = if dest.remote_qkey & 0x8000_0000 != 0 {
            Self::qp_qkey(c)
        } else {
            dest.remote_qkey
        };
        let path = self.path_of(&av, c.qpn, qpn).ok_or(WC_LOC_QP_OP_ERR)?;
        w.ud = Some(UdDest { path, qpn, qkey });
        Ok(data)
    }

    /// SQ doorbell / state change: fetch new WQEs and transmit.
    pub(crate) fn sq_progress(&mut self, qpn: u32) {
        let Some(c) = self.qp_ctx(qpn) else {
            return;
        };
        let mut e = self.take_engine(qpn);
        // In ERR and in SQE new send WQEs complete with flush error (IBTA
        // 10.3.1); after SQE -> RTS only WQEs posted later run.
        if c.state == QPS_ERR || c.state == QPS_SQE {
            self.flush_sq_posted(&c, &mut e);
        } else if c.state == QPS_RTS {
            self.fetch_and_send(&c, &mut e);
        }
        self.engines.insert(qpn, e);
    }

    fn fetch_and_send(&mut self, c: &QpCtx, e: &mut Engine) {
        let mtu = self.mtu_of(&c.attr);
        let rc = c.rc();
        loop {
            self.fetch_new_wqes(c, e, mtu);
            if !rc {
                self.ud_transmit(c, e);
                return;
            }
            self.rc_transmit(c, e);
            // A local operation that executed lets the WQEs after it in.
            if !self.complete_head(c, e) {
                break;
            }
        }
        // Anything outstanding is covered by a timer.
        if !e.inflight.is_empty() && e.timer.is_none() && e.rnr_wait.is_none() {
            e.timer = ack_timeout_ns(c.attr.timeout).map(|t| self.now_ns.saturating_add(t));
        }
    }

    /// Fetches posted WQEs while the window allows, up to a failed WQE or
    /// a local operation (nothing after one is fetched before it executed).
    fn fetch_new_wqes(&mut self, c: &QpCtx, e: &mut Engine, mtu: u64) {
        let rc = c.rc();
        // New WQEs are started only in RTS (SQD drains what is outstanding).
        let state = self.qps.get(c.qpn).map_or(c.state, |q| q.state);
        while state == QPS_RTS && e.sq_next != c.sq_pi && e.inflight.len() < MAX_INFLIGHT_WQES {
            if rc && psn_diff(e.next_psn, e.una) >= WINDOW {
                break;
            }
            if e.inflight
                .back()
                .is_some_and(|w| w.error.is_some() || w.local.is_some())
            {
                break;
            }
            let mut w = self.fetch_wqe(c, e.sq_next, mtu);
            e.sq_next = e.sq_next.wrapping_add(1);
            if rc && w.error.is_none() {
                w.first_psn = e.next_psn;
                e.next_psn = psn_add(e.next_psn, w.npkts);
            }
            e.inflight.push_back(w);
        }
    }

    fn ud_transmit(&mut self, c: &QpCtx, e: &mut Engine) {
        while let Some(w) = e.inflight.pop_front() {
            e.sq_ci = w.idx.wrapping_add(1);
            if let Some(st) = w.error {
                // UD: the WQE fails, the QP goes to SQE (IBTA 10.8.3.3).
                self.complete_send(c, &w, st);
                if let Some(q) = self.qps.get_mut(c.qpn) {
                    q.state = QPS_SQE;
                    q.attr.qp_state = QPS_SQE;
                    q.attr.cur_qp_state = QPS_SQE;
                }
                // Later WQEs are flushed.
                while let Some(w2) = e.inflight.pop_front() {
                    e.sq_ci = w2.idx.wrapping_add(1);
                    self.complete_send(c, &w2, WC_WR_FLUSH_ERR);
                }
                self.flush_sq_posted(c, e);
                return;
            }
            let Some(d) = w.ud else {
                continue;
            };
            let mut payload = Vec::new();
            let ok = match &w.inline {
                Some(v) => {
                    payload.extend_from_slice(v);
                    true
                }
                None => self.gather(&w.segs, 0, w.len as usize, &mut payload),
            };
            if !ok {
                self.complete_send(c, &w, WC_LOC_PROT_ERR);
                continue;
            }
            let opcode = if w.opcode == WR_SEND_IMM {
                op::UD_SEND_ONLY_IMM
            } else {
                op::UD_SEND_ONLY
            };
            let bth = Bth {
                opcode,
                se: w.flags & WQE_SOLICITED != 0,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: d.qpn,
                psn: e.next_psn,
                ..Bth::default()
            };
            e.next_psn = psn_add(e.next_psn, 1);
            let deth = Deth {
                qkey: d.qkey,
                src_qp: c.qpn,
            };
            self.send_pkt(
                &d.path,
                bth,
                Reth::default(),
                Aeth::default(),
                deth,
                w.imm,
                &payload,
            );
            self.complete_send(c, &w, WC_SUCCESS);
        }
    }

    /// Sends every packet that the window, the read limit and fences allow.
    fn rc_transmit(&mut self, c: &QpCtx, e: &mut Engine) {
        // After an RNR NAK nothing goes out until the RNR timer fires, new
        // doorbells included (IBTA 9.7.5.2.8; rxe `wait_for_rnr_timer`).
        if e.rnr_wait.is_some() {
            return;
        }
        let Some(path) = self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num) else {
            if e.inflight.iter().any(|w| w.error.is_none()) {
                self.qp_fail(c, e, Some(WC_LOC_QP_OP_ERR));
            }
            return;
        };
        let max_reads = usize::from(c.attr.max_rd_atomic.max(1));
        let mut sent_any = false;
        let mut reads_pending = 0usize;
        let mut payload = Vec::new();
        for i in 0..e.inflight.len() {
            let Some(w) = e.inflight.get(i) else {
                break;
            };
            if w.error.is_some() {
                break;
            }
            let is_read = w.opcode == WR_RDMA_READ;
            if w.flags & WQE_FENCE != 0 && reads_pending > 0 {
                break;
            }
            if is_read {
                if w.read_rcvd >= w.npkts {
                    continue;
                }
                if w.sent < w.npkts {
                    if reads_pending >= max_reads {
                        break;
                    }
                    let psn = psn_add(w.first_psn, w.read_rcvd);
                    if psn_diff(psn, e.una) >= WINDOW {
                        break;
                    }
                    let off = u64::from(w.read_rcvd) * w.mtu;
                    let reth = Reth {
                        va: w.remote_addr.wrapping_add(off),
                        rkey: w.rkey,
                        len: w.len.saturating_sub(off) as u32,
                    };
                    let bth = Bth {
                        opcode: op::RC_READ_REQUEST,
                        pkey: wire::DEFAULT_PKEY,
                        dest_qp: c.attr.dest_qp_num,
                        ack_req: true,
                        psn,
                        ..Bth::default()
                    };
                    self.send_pkt(
                        &path,
                        bth,
                        reth,
                        Aeth::default(),
                        Deth::default(),
                        [0; 4],
                        &[],
                    );
                    if let Some(w) = e.inflight.get_mut(i) {
                        w.sent = w.npkts;
                    }
                    sent_any = true;
                }
                reads_pending += 1;
                continue;
            }
            let (npkts, first_psn, len, mtu) = (w.npkts, w.first_psn, w.len, w.mtu);
            let write = matches!(w.opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_IMM);
            let with_imm = matches!(w.opcode, WR_RDMA_WRITE_IMM | WR_SEND_IMM);
            let with_inv = w.opcode == WR_SEND_INV;
            let mut k = w.sent;
            let mut blocked = false;
            while k < npkts {
                let psn = psn_add(first_psn, k);
                if psn_diff(psn, e.una) >= WINDOW {
                    blocked = true;
                    break;
                }
                let Some(w) = e.inflight.get(i) else {
                    break;
                };
                let off = u64::from(k) * mtu;
                let n = (len - off.min(len)).min(mtu) as usize;
                payload.clear();
                let ok = match &w.inline {
                    Some(v) => {
                        let s = off as usize;
                        payload.extend_from_slice(v.get(s..s + n).unwrap_or(&[]));
                        payload.len() == n
                    }
                    None => {
                        let fresh = self.refresh_send_segs(c.pdn, &mut e.inflight[i]);
                        let segs = std::mem::take(&mut e.inflight[i].segs);
                        let ok = fresh && self.gather(&segs, off, n, &mut payload);
                        e.inflight[i].segs = segs;
                        ok
                    }
                };
                let Some(w) = e.inflight.get(i) else {
                    break;
                };
                if !ok {
                    // The local pages vanished under the WQE.
                    let head = i == 0;
                    if head {
                        self.qp_fail(c, e, Some(WC_LOC_PROT_ERR));
                        return;
                    }
                    blocked = true;
                    break;
                }
                let first = k == 0;
                let last = k + 1 == npkts;
                let opcode = match (write, first, last) {
                    (true, true, true) if with_imm => op::RC_WRITE_ONLY_IMM,
                    (true, true, true) => op::RC_WRITE_ONLY,
                    (true, true, false) => op::RC_WRITE_FIRST,
                    (true, false, false) => op::RC_WRITE_MIDDLE,
                    (true, false, true) if with_imm => op::RC_WRITE_LAST_IMM,
                    (true, false, true) => op::RC_WRITE_LAST,
                    (false, true, true) if with_imm => op::RC_SEND_ONLY_IMM,
                    (false, true, true) if with_inv => op::RC_SEND_ONLY_INV,
                    (false, true, true) => op::RC_SEND_ONLY,
                    (false, true, false) => op::RC_SEND_FIRST,
                    (false, false, false) => op::RC_SEND_MIDDLE,
                    (false, false, true) if with_imm => op::RC_SEND_LAST_IMM,
                    (false, false, true) if with_inv => op::RC_SEND_LAST_INV,
                    (false, false, true) => op::RC_SEND_LAST,
                };
                let reth = if write && first {
                    Reth {
                        va: w.remote_addr,
                        rkey: w.rkey,
                        len: len as u32,
                    }
                } else {
                    Reth::default()
                };
                let bth = Bth {
                    opcode,
                    se: last && w.flags & WQE_SOLICITED != 0 && (!write || with_imm),
                    pkey: wire::DEFAULT_PKEY,
                    dest_qp: c.attr.dest_qp_num,
                    ack_req: last || (k + 1) % ACK_REQ_EVERY == 0,
                    psn,
                    ..Bth::default()
                };
                let imm = w.imm;
                self.send_pkt(
                    &path,
                    bth,
                    reth,
                    Aeth::default(),
                    Deth::default(),
                    imm,
                    &payload,
                );
                sent_any = true;
                k += 1;
                if let Some(w) = e.inflight.get_mut(i) {
                    w.sent = k;
                }
            }
            if blocked {
                break;
            }
        }
        if sent_any && e.timer.is_none() && e.rnr_wait.is_none() {
            e.timer = ack_timeout_ns(c.attr.timeout).map(|t| self.now_ns.saturating_add(t));
        }
    }

    /// Go-back-N: retransmit everything from `psn` on.
    fn rewind(&mut self, e: &mut Engine, psn: u32) {
        self.data.retransmits += 1;
        e.last_rewind = Some(psn);
        for w in e.inflight.iter_mut() {
            let end = psn_add(w.first_psn, w.npkts);
            if psn_diff(end, psn) <= 0 {
                continue;
            }
            if w.opcode == WR_RDMA_READ {
                w.sent = 0;
            } else {
                let d = psn_diff(psn, w.first_psn).max(0) as u32;
                w.sent = w.sent.min(d);
            }
        }
        e.timer = None;
    }

    /// Retires completed WQEs from the head, executes a local operation
    /// (REG_MR, LOCAL_INV) that reached the head and reports a local error
    /// that did. True if a local operation executed.
    fn complete_head(&mut self, c: &QpCtx, e: &mut Engine) -> bool {
        let mut executed = false;
        while let Some(w) = e.inflight.front() {
            if let Some(st) = w.error {
                self.qp_fail(c, e, Some(st));
                return executed;
            }
            if let Some(local) = w.local {
                if self.execute_local_op(c.pdn, &local).is_err() {
                    self.qp_fail(c, e, Some(WC_LOC_PROT_ERR));
                    return executed;
                }
                executed = true;
                if let Some(w) = e.inflight.pop_front() {
                    e.sq_ci = w.idx.wrapping_add(1);
                    self.complete_send(c, &w, WC_SUCCESS);
                }
                continue;
            }
            let done = if w.opcode == WR_RDMA_READ {
                w.read_rcvd >= w.npkts
            } else {
                w.sent >= w.npkts && psn_diff(e.una, psn_add(w.first_psn, w.npkts)) >= 0
            };
            if !done {
                break;
            }
            if let Some(w) = e.inflight.pop_front() {
                e.sq_ci = w.idx.wrapping_add(1);
                self.complete_send(c, &w, WC_SUCCESS);
            }
        }
        if e.inflight.is_empty() {
            e.timer = None;
            if e.drain_notify && c.state == QPS_SQD {
                e.drain_notify = false;
                self.post_async(EQE_QP_SQ_DRAINED, c.qpn, 0, 0);
            }
        }
        executed
    }

    fn progress_made(&mut self, c: &QpCtx, e: &mut Engine) {
        e.retry_left = c.attr.retry_cnt;
        e.rnr_left = c.attr.rnr_retry;
        e.last_rewind = None;
        e.timer = ack_timeout_ns(c.attr.timeout).map(|t| self.now_ns.saturating_add(t));
    }

    /// Marks PSNs before `psn` (exclusive) acknowledged.
    fn ack_before(&mut self, c: &QpCtx, e: &mut Engine, mut psn: u32) {
        // Nothing past an incomplete READ counts as acknowledged: its
        // responses are the acknowledgement (an ACK beyond it is an implied NAK).
        if let Some(w) = e
            .inflight
            .iter()
            .find(|w| w.opcode == WR_RDMA_READ && w.read_rcvd < w.npkts)
        {
            let exp = psn_add(w.first_psn, w.read_rcvd);
            if psn_diff(psn, exp) > 0 {
                psn = exp;
            }
        }
        if psn_diff(psn, e.una) > 0 && psn_diff(psn, e.next_psn) <= 0 {
            e.una = psn;
            self.progress_made(c, e);
        }
    }

    /// The completer: ACK, NAK or read response for QP `c`.
    fn rc_response(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        let psn = p.bth.psn;
        // Outside [una - WINDOW, next_psn): stale or bogus.
        if psn_diff(psn, e.next_psn) >= 0 || psn_diff(psn, e.una) < -WINDOW {
            self.data.stale_responses += 1;
            return;
        }
        match p.bth.opcode {
            op::RC_ACK => {
                let syn = p.aeth.syndrome;
                // A NAK names the PSN that failed: one behind `una` was
                // already acted on (a duplicate or a stale NAK, IBTA
                // 9.7.5.1.1; rxe `check_psn`). An ACK behind `una` is old.
                if psn_diff(psn, e.una) < 0 {
                    self.data.stale_responses += 1;
                    return;
                }
                match syn & aeth::TYPE_MASK {
                    aeth::ACK => {
                        self.ack_before(c, e, psn_add(psn, 1));
                        // An ACK beyond an incomplete READ: its responses were lost.
                        let mut implied = None;
                        for w in &e.inflight {
                            if w.opcode == WR_RDMA_READ && w.read_rcvd < w.npkts {
                                if w.sent >= w.npkts && psn_diff(psn, w.first_psn) >= 0 {
                                    implied = Some(psn_add(w.first_psn, w.read_rcvd));
                                }
                                break;
                            }
                        }
                        if let Some(r) = implied {
                            if e.last_rewind != Some(r) {
                                self.rewind(e, r);
                            }
                        }
                    }
                    // A NAK or RNR NAK naming a request after a READ whose
                    // responses are missing: the responder executed the
                    // READ and its responses were lost. An implied NAK for
                    // the READ, as an ACK there is (rxe `check_psn`), never
                    // the READ's own error or RNR.
                    aeth::RNR_NAK | aeth::NAK if e.lost_read_before(psn).is_some() => {
                        self.ack_before(c, e, psn);
                        if let Some(r) = e.lost_read_before(psn) {
                            if e.last_rewind != Some(r) {
                                self.rewind(e, r);
                            }
                        }
                    }
                    aeth::RNR_NAK => {
                        self.data.rnr_naks_rcvd += 1;
                        self.ack_before(c, e, psn);
                        self.complete_head(c, e);
                        if e.inflight.is_empty() {
                            return;
                        }
                        if e.rnr_left == 0 {
                            self.qp_fail(c, e, Some(WC_RNR_RETRY_EXC_ERR));
                            return;
                        }
                        if e.rnr_left != 7 {
                            e.rnr_left -= 1;
                        }
                        e.timer = None;
                        e.rnr_wait = Some((self.now_ns.saturating_add(rnr_delay_ns(syn)), psn));
                        // Nothing more goes out until the RNR timer expires.
                        for w in e.inflight.iter_mut() {
                            let end = psn_add(w.first_psn, w.npkts);
                            if psn_diff(end, psn) > 0 {
                                w.sent = if w.opcode == WR_RDMA_READ {
                                    0
                                } else {
                                    w.sent.min(psn_diff(psn, w.first_psn).max(0) as u32)
                                };
                            }
                        }
                        return;
                    }
                    aeth::NAK => {
                        self.ack_before(c, e, psn);
                        self.complete_head(c, e);
                        if syn == aeth::NAK_PSN_SEQ {
                            self.data.seq_naks_rcvd += 1;
                            // A retry like a timeout's: it consumes one of
                            // retry_cnt (rxe COMPST_ERROR_RETRY).
                            if e.last_rewind != Some(psn) && !e.inflight.is_empty() {
                                if e.retry_left == 0 {
                                    self.qp_fail(c, e, Some(WC_RETRY_EXC_ERR));
                                    return;
                                }
                                e.retry_left -= 1;
                                self.rewind(e, psn);
                            }
                        } else {
                            let st = match syn {
                                aeth::NAK_INVALID_REQ => WC_REM_INV_REQ_ERR,
                                aeth::NAK_REM_ACCESS => WC_REM_ACCESS_ERR,
                                _ => WC_REM_OP_ERR,
                            };
                            self.qp_fail(c, e, Some(st));
                            return;
                        }
                    }
                    _ => {
                        self.data.stale_responses += 1;
                        return;
                    }
                }
            }
            op::RC_READ_RESPONSE_FIRST
            | op::RC_READ_RESPONSE_MIDDLE
            | op::RC_READ_RESPONSE_LAST
            | op::RC_READ_RESPONSE_ONLY => {
                let Some(i) = e
                    .inflight
                    .iter()
                    .position(|w| w.opcode == WR_RDMA_READ && w.read_rcvd < w.npkts)
                else {
                    self.data.stale_responses += 1;
                    return;
                };
                let w = &e.inflight[i];
                let exp = psn_add(w.first_psn, w.read_rcvd);
                if psn != exp {
                    self.data.stale_responses += 1;
                    if psn_diff(psn, exp) > 0 && w.sent >= w.npkts && e.last_rewind != Some(exp) {
                        self.rewind(e, exp);
                        self.fetch_and_send(c, e);
                    }
                    return;
                }
                let off = u64::from(w.read_rcvd) * w.mtu;
                let want = (w.len - off.min(w.len)).min(w.mtu) as usize;
                let last = w.read_rcvd + 1 == w.npkts;
                let op_ok = match p.bth.opcode {
                    op::RC_READ_RESPONSE_ONLY | op::RC_READ_RESPONSE_LAST => last,
                    _ => !last,
                };
                if p.payload.len() != want || !op_ok {
                    self.data.stale_responses += 1;
                    return;
                }
                let fresh = self.refresh_send_segs(c.pdn, &mut e.inflight[i]);
                let segs = std::mem::take(&mut e.inflight[i].segs);
                let ok = fresh && self.scatter(&segs, off, p.payload);
                e.inflight[i].segs = segs;
                if !ok {
                    self.qp_fail(c, e, Some(WC_LOC_PROT_ERR));
                    return;
                }
                e.inflight[i].read_rcvd += 1;
                if psn_diff(psn_add(psn, 1), e.una) > 0 {
                    e.una = psn_add(psn, 1);
                }
                self.progress_made(c, e);
            }
            _ => {
                self.data.stale_responses += 1;
                return;
            }
        }
        self.complete_head(c, e);
        if e.rnr_wait.is_none() {
            self.fetch_and_send(c, e);
        }
    }

    /// Timers of every QP at the current time.
    pub(crate) fn run_timers(&mut self) {
        if self.faults.stalled {
            return;
        }
        let now = self.now_ns;
        let due: Vec<u32> = self
            .engines
            .iter()
            .filter(|(_, e)| {
                e.timer.is_some_and(|t| t <= now) || e.rnr_wait.is_some_and(|(t, _)| t <= now)
            })
            .map(|(q, _)| *q)
            .collect();
        for qpn in due {
            let Some(c) = self.qp_ctx(qpn) else {
                continue;
            };
            let mut e = self.take_engine(qpn);
            if c.state != QPS_RTS && c.state != QPS_SQD {
                e.timer = None;
                e.rnr_wait = None;
            } else if let Some((t, psn)) = e.rnr_wait {
                if t <= now {
                    e.rnr_wait = None;
                    self.rewind(&mut e, psn);
                    self.fetch_and_send(&c, &mut e);
                }
            } else if e.timer.is_some_and(|t| t <= now) {
                e.timer = None;
                self.data.timeouts += 1;
                if e.inflight.is_empty() {
                    // nothing outstanding
                } else if e.retry_left == 0 {
                    self.qp_fail(&c, &mut e, Some(WC_RETRY_EXC_ERR));
                } else {
                    e.retry_left -= 1;
                    let una = e.una;
                    self.rewind(&mut e, una);
                    self.fetch_and_send(&c, &mut e);
                }
            }
            self.engines.insert(qpn, e);
        }
    }

    // ------------------------------------------------------------ receive

    /// One received frame (already known to be for this device's port).
    pub(crate) fn rx_frame(&mut self, frame: &[u8]) {
        self.data.rx_frames += 1;
        if self.faults.stalled {
            self.data.rx_stalled += 1;
            return;
        }
        let p = match wire::decode(frame) {
            Ok(p) => p,
            Err(err) => {
                use wire::ParseError as E;
                let c = &mut self.data;
                match err {
                    E::Truncated => c.rx_truncated += 1,
                    E::NotRoce => c.rx_not_roce += 1,
                    E::BadNetHdr | E::BadIpChecksum | E::BadUdp => c.rx_bad_header += 1,
                    E::BadBth => c.rx_bad_bth += 1,
                    E::BadIcrc => c.rx_bad_icrc += 1,
                }
                return;
            }
        };
        // Only frames for this port's MAC: no multicast group can be
        // attached, so a multicast or broadcast frame reaches no QP.
        if p.dmac != self.cfg.mac {
            self.data.rx_no_qp += 1;
            return;
        }
        if p.bth.pkey & 0x7fff != 0x7fff {
            self.data.rx_bad_key += 1;
            return;
        }
        let qpn = p.bth.dest_qp;
        let Some(c) = self.qp_ctx(qpn) else {
            self.data.rx_no_qp += 1;
            return;
        };
        let ud_op = p.bth.opcode >> 5 == 3;
        let connected = matches!(c.state, QPS_RTR | QPS_RTS | QPS_SQD);
        if c.rc() && !ud_op && connected && !self.is_from_peer(&c, &p) {
            self.data.rx_bad_addr += 1;
            return;
        }
        let mut e = self.take_engine(qpn);
        if c.rc() && !ud_op {
            match p.bth.opcode {
                op::RC_ACK
                | op::RC_READ_RESPONSE_FIRST
                | op::RC_READ_RESPONSE_MIDDLE
                | op::RC_READ_RESPONSE_LAST
                | op::RC_READ_RESPONSE_ONLY => {
                    if matches!(c.state, QPS_RTS | QPS_SQD) {
                        self.rc_response(&c, &mut e, &p);
                    } else {
                        self.data.rx_no_qp += 1;
                    }
                }
                _ => {
                    if matches!(c.state, QPS_RTR | QPS_RTS | QPS_SQD) {
                        self.rc_request(&c, &mut e, &p);
                    } else {
                        self.data.rx_no_qp += 1;
                    }
                }
            }
        } else if !c.rc() && ud_op {
            if matches!(c.state, QPS_RTR | QPS_RTS | QPS_SQD | QPS_SQE) {
                self.ud_receive(&c, &mut e, &p, frame);
            } else {
                self.data.rx_no_qp += 1;
            }
        } else {
            self.data.rx_no_qp += 1;
        }
        self.engines.insert(qpn, e);
    }

    /// An RC packet comes from the QP's peer to the QP's own address: its
    /// encapsulation, source and destination GID/IP are those of the QP's
    /// address vector (rxe `check_addr`).
    fn is_from_peer(&self, c: &QpCtx, p: &Packet<'_>) -> bool {
        self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num)
            .is_some_and(|path| {
                p.net.kind == path.kind && p.net.sgid == path.dgid && p.net.dgid == path.sgid
            })
    }

    fn ud_receive(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>, frame: &[u8]) {
        if p.deth.qkey != Self::qp_qkey(c) {
            self.data.rx_bad_key += 1;
            return;
        }
        if !self.rq_available(c, e) {
            self.data.rx_ud_no_wqe += 1;
            return;
        }
        let idx = e.rq_ci;
        let RecvWqe {
            wr_id, segs, cap, ..
        } = match self.read_recv_wqe(c, idx) {
            Ok(wqe) => wqe,
            Err(st) => {
                e.rq_ci = idx.wrapping_add(1);
                let wr_id = self.wqe_wr_id(c.qpn, false, idx);
                self.post_data_cqe(
                    c.recv_cqn,
                    Cqe {
                        wr_id,
                        qpn: c.qpn,
                        opcode: WC_RECV,
                        status: st,
                        wqe_idx: idx,
                        ..Cqe::zeroed()
                    },
                );
                return;
            }
        };
        e.rq_ci = idx.wrapping_add(1);
        let mut grh = [0u8; GRH_LEN as usize];
        match p.net.kind {
            NetKind::Ipv4 => {
                if let Some(h) = frame.get(wire::ETH_HLEN..wire::ETH_HLEN + wire::IPV4_HLEN) {
                    grh[20..].copy_from_slice(h);
                }
            }
            _ => {
                if let Some(h) = frame.get(wire::ETH_HLEN..wire::ETH_HLEN + wire::IPV6_HLEN) {
                    grh.copy_from_slice(h);
                }
            }
        }
        let total = u64::from(GRH_LEN) + p.payload.len() as u64;
        let mut cqe = Cqe {
            wr_id,
            qpn: c.qpn,
            src_qp: p.deth.src_qp,
            opcode: WC_RECV,
            wqe_idx: idx,
            ..Cqe::zeroed()
        };
        if total > cap {
            cqe.status = WC_LOC_LEN_ERR;
        } else if !self.scatter(&segs, 0, &grh)
            || !self.scatter(&segs, u64::from(GRH_LEN), p.payload)
        {
            cqe.status = WC_LOC_PROT_ERR;
        } else {
            cqe.byte_len = total as u32;
            cqe.flags = CQE_GRH | (p.net.kind.to_hw() << CQE_NET_TYPE_SHIFT);
            if p.bth.opcode == op::UD_SEND_ONLY_IMM {
                cqe.flags |= CQE_WITH_IMM;
                cqe.imm_data = u32::from_le_bytes(p.imm);
            }
            if p.bth.se {
                cqe.flags |= CQE_SOLICITED;
            }
        }
        self.post_data_cqe(c.recv_cqn, cqe);
    }

    /// Reads and translates the receive WQE at `idx`.
    fn read_recv_wqe(&mut self, c: &QpCtx, idx: u16) -> Result<RecvWqe, u8> {
        let stride = 1usize << c.rq_shift;
        let mut raw = vec![0u8; stride];
        if !self.wqe_read(c.qpn, false, idx, &mut raw) {
            self.counters.hw.bad_dma += 1;
            return Err(WC_LOC_QP_OP_ERR);
        }
        let hdr: RqWqeHdr = wqe_struct(&raw, 0).ok_or(WC_LOC_QP_OP_ERR)?;
        let num_sge = usize::from(hdr.num_sge);
        let sge_size = core::mem::size_of::<Sge>();
        if RQ_WQE_DATA_OFFSET + num_sge * sge_size > stride
            || num_sge > self.cfg.limits.max_sge as usize
        {
            return Err(WC_LOC_LEN_ERR);
        }
        let sges = (0..num_sge)
            .map(|i| wqe_struct::<Sge>(&raw, RQ_WQE_DATA_OFFSET + i * sge_size))
            .collect::<Option<Vec<Sge>>>()
            .ok_or(WC_LOC_LEN_ERR)?;
        let segs = self
            .translate_sges(c.pdn, &sges, ACCESS_LOCAL_WRITE)
            .ok_or(WC_LOC_PROT_ERR)?;
        let cap = sges
            .iter()
            .fold(0u64, |cap, sge| cap.saturating_add(u64::from(sge.length)));
        Ok(RecvWqe {
            wr_id: hdr.wr_id,
            sges,
            segs,
            epoch: self.mr_epoch,
            cap,
        })
    }

    fn send_ack(&mut self, c: &QpCtx, psn: u32, syndrome: u8, msn: u32) {
        let Some(path) = self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num) else {
            return;
        };
        let bth = Bth {
            opcode: op::RC_ACK,
            pkey: wire::DEFAULT_PKEY,
            dest_qp: c.attr.dest_qp_num,
            psn,
            ..Bth::default()
        };
        let aeth = Aeth { syndrome, msn };
        match syndrome & aeth::TYPE_MASK {
            aeth::ACK => self.data.acks_sent += 1,
            aeth::RNR_NAK => self.data.rnr_naks_sent += 1,
            _ if syndrome == aeth::NAK_PSN_SEQ => self.data.seq_naks_sent += 1,
            _ => self.data.err_naks_sent += 1,
        }
        self.send_response(&path, bth, aeth, &[]);
    }

    /// Sends the responder output of this batch: READ responses, then the
    /// coalesced ACK.
    pub(crate) fn flush_acks(&mut self) {
        let qpns = std::mem::take(&mut self.ack_list);
        for qpn in qpns {
            let Some(c) = self.qp_ctx(qpn) else {
                continue;
            };
            let Some(mut e) = self.engines.remove(&qpn) else {
                continue;
            };
            e.listed = false;
            if !self.answer_reads(&c, &mut e) {
                // Backpressure: the rest (and the ACK, which must not
                // overtake the responses) when the TX queue drains.
                self.schedule_response(qpn, &mut e);
                self.engines.insert(qpn, e);
                continue;
            }
            if e.ack_pending {
                e.ack_pending = false;
                let (psn, msn) = (psn_add(e.epsn, 0xff_ffff), e.msn);
                self.send_ack(&c, psn, aeth::ACK_UNLIMITED, msn);
            }
            self.engines.insert(qpn, e);
        }
    }

    /// Puts the QP on the list of responder output due at the end of the batch.
    fn schedule_response(&mut self, qpn: u32, e: &mut Engine) {
        if !e.listed {
            e.listed = true;
            self.ack_list.push(qpn);
        }
    }

    fn want_ack(&mut self, qpn: u32, e: &mut Engine) {
        e.ack_pending = true;
        self.schedule_response(qpn, e);
    }

    /// Sends a NAK (or RNR NAK) from the responder, after the responses of
    /// the READs before it.
    /// A PSN sequence or RNR NAK is not sent while READ responses before
    /// it wait for room (false): it would overtake them; the requester
    /// resends and gets it again.
    fn send_nak(&mut self, c: &QpCtx, e: &mut Engine, psn: u32, syndrome: u8) -> bool {
        let answered = self.answer_reads(c, e);
        let fatal = syndrome & aeth::TYPE_MASK == aeth::NAK && syndrome != aeth::NAK_PSN_SEQ;
        if !answered && !fatal {
            return false;
        }
        self.send_ack(c, psn, syndrome, e.msn);
        true
    }

    /// The responder: one request packet on RC QP `c`.
    fn rc_request(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        let psn = p.bth.psn;
        let d = psn_diff(psn, e.epsn);
        if d > 0 {
            if !e.nak_sent {
                let epsn = e.epsn;
                e.nak_sent = self.send_nak(c, e, epsn, aeth::NAK_PSN_SEQ);
            }
            return;
        }
        if d < 0 {
            self.data.dup_requests += 1;
            if p.bth.opcode == op::RC_READ_REQUEST {
                self.read_duplicate(c, e, psn);
            } else {
                self.want_ack(c.qpn, e);
            }
            return;
        }
        e.nak_sent = false;
        if c.state == QPS_RTR && !e.comm_est_sent {
            // First packet on a QP still in RTR (IBTA 11.6.3: COMM_EST).
            e.comm_est_sent = true;
            self.post_async(EQE_QP_COMM_EST, c.qpn, 0, 0);
        }
        let r = match p.bth.opcode {
            op::RC_SEND_FIRST
            | op::RC_SEND_MIDDLE
            | op::RC_SEND_LAST
            | op::RC_SEND_LAST_IMM
            | op::RC_SEND_ONLY
            | op::RC_SEND_ONLY_IMM
            | op::RC_SEND_LAST_INV
            | op::RC_SEND_ONLY_INV => self.rc_send(c, e, p),
            op::RC_WRITE_FIRST
            | op::RC_WRITE_MIDDLE
            | op::RC_WRITE_LAST
            | op::RC_WRITE_LAST_IMM
            | op::RC_WRITE_ONLY
            | op::RC_WRITE_ONLY_IMM => self.rc_write(c, e, p),
            op::RC_READ_REQUEST => {
                if e.recv.is_some() || e.write.is_some() {
                    Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None))
                } else {
                    self.read_accept(c, e, p)
                }
            }
            _ => Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None)),
        };
        match r {
            Ok(()) => {}
            Err(RespErr::Rnr) => {
                let _ = self.send_nak(c, e, psn, aeth::RNR_NAK | (c.attr.min_rnr_timer & 0x1f));
            }
            Err(RespErr::Fatal(syn, recv_status)) => {
                let _ = self.send_nak(c, e, psn, syn);
                if syn == aeth::NAK_REM_ACCESS {
                    self.post_async(EQE_QP_ACCESS_ERR, c.qpn, u32::from(syn), 0);
                }
                if let (Some(st), Some(r)) = (recv_status, e.recv.take()) {
                    e.rq_ci = r.idx.wrapping_add(1);
                    self.post_data_cqe(
                        c.recv_cqn,
                        Cqe {
                            wr_id: r.wqe.wr_id,
                            qpn: c.qpn,
                            src_qp: c.attr.dest_qp_num,
                            opcode: WC_RECV,
                            status: st,
                            wqe_idx: r.idx,
                            ..Cqe::zeroed()
                        },
                    );
                }
                self.qp_fail(c, e, None);
            }
        }
    }

    fn check_seg_len(mtu: u64, len: usize, first: bool, last: bool) -> Result<(), RespErr> {
        let len = len as u64;
        let ok = if last {
            len <= mtu && (first || len > 0)
        } else {
            len == mtu
        };
        if ok {
            Ok(())
        } else {
            Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None))
        }
    }

    fn rc_send(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> Result<(), RespErr> {
        let o = p.bth.opcode;
        let first = matches!(
            o,
            op::RC_SEND_FIRST | op::RC_SEND_ONLY | op::RC_SEND_ONLY_IMM | op::RC_SEND_ONLY_INV
        );
        let last = !matches!(o, op::RC_SEND_FIRST | op::RC_SEND_MIDDLE);
        if first != e.recv.is_none() || e.write.is_some() {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        let mtu = self.mtu_of(&c.attr);
        Self::check_seg_len(mtu, p.payload.len(), first, last)?;
        if first {
            if c.rq_depth == 0 {
                return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
            }
            if !self.rq_available(c, e) {
                return Err(RespErr::Rnr);
            }
            let idx = e.rq_ci;
            match self.read_recv_wqe(c, idx) {
                Ok(wqe) => e.recv = Some(RecvCtx { idx, wqe, off: 0 }),
                Err(st) => {
                    let wqe = RecvWqe {
                        wr_id: self.wqe_wr_id(c.qpn, false, idx),
                        sges: Vec::new(),
                        segs: Vec::new(),
                        epoch: self.mr_epoch,
                        cap: 0,
                    };
                    e.recv = Some(RecvCtx { idx, wqe, off: 0 });
                    return Err(RespErr::Fatal(aeth::NAK_REM_OP, Some(st)));
                }
            }
        }
        let Some(mut r) = e.recv.take() else {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        };
        let end = r.off + p.payload.len() as u64;
        if end > r.wqe.cap {
            e.recv = Some(r);
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, Some(WC_LOC_LEN_ERR)));
        }
        let fresh = self.refresh_recv_segs(c.pdn, &mut r.wqe);
        if !fresh || !self.scatter(&r.wqe.segs, r.off, p.payload) {
            e.recv = Some(r);
            return Err(RespErr::Fatal(aeth::NAK_REM_OP, Some(WC_LOC_PROT_ERR)));
        }
        r.off = end;
        // SEND with invalidate: the key goes once the data is placed. A key
        // that names no fast-register MR of this PD is a class J error, as
        // in rxe: the receive completes REM_INV_REQ_ERR, NAK invalid request.
        let with_inv = matches!(o, op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV);
        if with_inv && self.invalidate_key(c.pdn, p.ieth).is_err() {
            e.recv = Some(r);
            return Err(RespErr::Fatal(
                aeth::NAK_INVALID_REQ,
                Some(WC_REM_INV_REQ_ERR),
            ));
        }
        e.epsn = psn_add(e.epsn, 1);
        if last {
            e.msn = (e.msn + 1) & 0xff_ffff;
            e.rq_ci = r.idx.wrapping_add(1);
            self.rc_recv_cqe(c, p, r.wqe.wr_id, r.idx, r.off as u32);
        } else {
            e.recv = Some(r);
        }
        if p.bth.ack_req {
            self.want_ack(c.qpn, e);
        }
        Ok(())
    }

    /// Posts the successful receive CQE of `p`, the last packet of an
    /// incoming SEND or of an RDMA WRITE with immediate.
    fn rc_recv_cqe(&mut self, c: &QpCtx, p: &Packet<'_>, wr_id: u64, idx: u16, byte_len: u32) {
        let o = p.bth.opcode;
        let write = matches!(o, op::RC_WRITE_LAST_IMM | op::RC_WRITE_ONLY_IMM);
        let mut cqe = Cqe {
            wr_id,
            byte_len,
            qpn: c.qpn,
            src_qp: c.attr.dest_qp_num,
            opcode: if write {
                WC_RECV_RDMA_WITH_IMM
            } else {
                WC_RECV
            },
            wqe_idx: idx,
            flags: c.attr.av.network_type << CQE_NET_TYPE_SHIFT,
            ..Cqe::zeroed()
        };
        if write || matches!(o, op::RC_SEND_LAST_IMM | op::RC_SEND_ONLY_IMM) {
            cqe.flags |= CQE_WITH_IMM;
            cqe.imm_data = u32::from_le_bytes(p.imm);
        }
        if matches!(o, op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV) {
            // imm_data is be32 in the CQE, as the key was on the wire.
            cqe.flags |= CQE_WITH_INV;
            cqe.imm_data = u32::from_le_bytes(p.ieth.to_be_bytes());
        }
        if p.bth.se {
            cqe.flags |= CQE_SOLICITED;
        }
        self.post_data_cqe(c.recv_cqn, cqe);
    }

    fn rc_write(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> Result<(), RespErr> {
        let o = p.bth.opcode;
        let first = matches!(
            o,
            op::RC_WRITE_FIRST | op::RC_WRITE_ONLY | op::RC_WRITE_ONLY_IMM
        );
        let last = !matches!(o, op::RC_WRITE_FIRST | op::RC_WRITE_MIDDLE);
        let imm = matches!(o, op::RC_WRITE_LAST_IMM | op::RC_WRITE_ONLY_IMM);
        if first != e.write.is_none() || e.recv.is_some() {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        if c.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        let mtu = self.mtu_of(&c.attr);
        Self::check_seg_len(mtu, p.payload.len(), first, last)?;
        let mut w = match e.write {
            Some(w) => w,
            None => {
                let total = u64::from(p.reth.len);
                if total > 0
                    && self
                        .translate(p.reth.rkey, c.pdn, p.reth.va, total, ACCESS_REMOTE_WRITE)
                        .is_none()
                {
                    return Err(RespErr::Fatal(aeth::NAK_REM_ACCESS, None));
                }
                WriteCtx {
                    rkey: p.reth.rkey,
                    va: p.reth.va,
                    left: total,
                    total,
                }
            }
        };
        let n = p.payload.len() as u64;
        if n > w.left || (last && n != w.left) {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        // Immediate data needs a receive WQE before anything is written.
        if imm && last && !self.rq_available(c, e) {
            if c.rq_depth == 0 {
                return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
            }
            e.write = (!first).then_some(w);
            return Err(RespErr::Rnr);
        }
        if n > 0 {
            let Some(segs) = self.translate(w.rkey, c.pdn, w.va, n, ACCESS_REMOTE_WRITE) else {
                return Err(RespErr::Fatal(aeth::NAK_REM_ACCESS, None));
            };
            if !self.scatter(&segs, 0, p.payload) {
                return Err(RespErr::Fatal(aeth::NAK_REM_OP, None));
            }
        }
        w.va = w.va.wrapping_add(n);
        w.left -= n;
        e.epsn = psn_add(e.epsn, 1);
        if last {
            e.write = None;
            e.msn = (e.msn + 1) & 0xff_ffff;
            if imm {
                let idx = e.rq_ci;
                let wr_id = self.wqe_wr_id(c.qpn, false, idx);
                e.rq_ci = idx.wrapping_add(1);
                self.rc_recv_cqe(c, p, wr_id, idx, w.total as u32);
            }
        } else {
            e.write = Some(w);
        }
        if p.bth.ack_req {
            self.want_ack(c.qpn, e);
        }
        Ok(())
    }

    /// A new RDMA READ request: checks it and takes a responder resource;
    /// the responses go out at the end of the batch ([`Self::flush_acks`]).
    fn read_accept(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> Result<(), RespErr> {
        // Resources for max_dest_rd_atomic READs, rounded up to a power of
        // two as rxe does for both of its limits: an rxe requester set to 3
        // may have 4 outstanding. More resources than asked for are allowed.
        let limit = usize::from(c.attr.max_dest_rd_atomic).next_power_of_two();
        if c.attr.qp_access_flags & ACCESS_REMOTE_READ == 0 || c.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        let len = u64::from(p.reth.len);
        if len > MAX_MSG {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        if self
            .translate(p.reth.rkey, c.pdn, p.reth.va, len, ACCESS_REMOTE_READ)
            .is_none()
        {
            return Err(RespErr::Fatal(aeth::NAK_REM_ACCESS, None));
        }
        // Reuse the oldest resources answered once; never answered ones
        // stay.
        while e.reads.len() >= limit && e.reads.front().is_some_and(|r| r.answered) {
            e.reads.pop_front();
        }
        if e.reads.len() >= limit {
            // More READs outstanding than max_dest_rd_atomic.
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        let mtu = self.mtu_of(&c.attr);
        let n = pkts_for(len, mtu);
        if n > MAX_MSG_PKTS {
            return Err(RespErr::Fatal(aeth::NAK_INVALID_REQ, None));
        }
        e.epsn = psn_add(p.bth.psn, n);
        e.msn = (e.msn + 1) & 0xff_ffff;
        e.reads.push_back(ReadRes {
            psn: p.bth.psn,
            npkts: n,
            va: p.reth.va,
            rkey: p.reth.rkey,
            len: p.reth.len,
            mtu,
            msn: e.msn,
            from: 0,
            next: 0,
            answered: false,
        });
        self.schedule_response(c.qpn, e);
        Ok(())
    }

    /// A duplicate READ request: answered again from the responder resource
    /// holding its PSN, from that PSN on (IBTA 9.7.5.1.4); one whose
    /// responses are still going out restarts from that PSN if it is
    /// behind them. Without a resource it is dropped. The responses go out
    /// at the end of the batch, as the TX queue has room.
    fn read_duplicate(&mut self, c: &QpCtx, e: &mut Engine, psn: u32) {
        let Some(r) = e.reads.iter_mut().find(|r| r.index_of(psn).is_some()) else {
            return;
        };
        let Some(k) = r.index_of(psn) else {
            return;
        };
        if !r.unanswered() || k < r.next {
            r.from = k;
            r.next = k;
            self.schedule_response(c.qpn, e);
        }
    }

    /// Sends the responses of the READs in order, as far as the TX queue
    /// has room; true once every READ is answered. A READ whose memory
    /// vanished NAKs remote operational error and moves the QP to ERR.
    fn answer_reads(&mut self, c: &QpCtx, e: &mut Engine) -> bool {
        for i in 0..e.reads.len() {
            let Some(mut r) = e.reads.get(i).copied().filter(|r| r.unanswered()) else {
                continue;
            };
            let ok = self.read_responses(c, &mut r);
            if let Some(slot) = e.reads.get_mut(i) {
                *slot = r;
            }
            if !ok {
                e.reads.clear();
                self.send_ack(c, r.psn, aeth::NAK_REM_OP, r.msn);
                self.qp_fail(c, e, None);
                return true;
            }
            if r.unanswered() {
                return false;
            }
        }
        true
    }

    /// Frames the TX and loopback queues still take before producers that
    /// can wait (READ responses) stop.
    pub(crate) fn tx_room(&self) -> usize {
        TX_QUEUE_MAX.saturating_sub(self.tx.len() + self.loopback.len())
    }

    /// Sends response packets of READ `r` from `r.next` on while the TX
    /// queue has room; false if its memory cannot be read.
    fn read_responses(&mut self, c: &QpCtx, r: &mut ReadRes) -> bool {
        let len = u64::from(r.len);
        let Some(segs) = self.translate(r.rkey, c.pdn, r.va, len, ACCESS_REMOTE_READ) else {
            return false;
        };
        let Some(path) = self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num) else {
            r.next = r.npkts;
            r.answered = true;
            return true;
        };
        let mtu = r.mtu;
        let n = r.npkts;
        let mut payload = Vec::with_capacity(mtu as usize);
        while r.next < n && self.tx_room() > 0 {
            let k = r.next;
            let off = u64::from(k) * mtu;
            let m = (len - off.min(len)).min(mtu) as usize;
            payload.clear();
            if !self.gather(&segs, off, m, &mut payload) {
                return false;
            }
            // A re-requested tail is answered as a READ of its own.
            let opcode = match (k == r.from, k + 1 == n) {
                (true, true) => op::RC_READ_RESPONSE_ONLY,
                (true, false) => op::RC_READ_RESPONSE_FIRST,
                (false, true) => op::RC_READ_RESPONSE_LAST,
                (false, false) => op::RC_READ_RESPONSE_MIDDLE,
            };
            let bth = Bth {
                opcode,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: c.attr.dest_qp_num,
                psn: psn_add(r.psn, k),
                ..Bth::default()
            };
            let aeth = Aeth {
                syndrome: aeth::ACK_UNLIMITED,
                msn: r.msn,
            };
            self.send_response(&path, bth, aeth, &payload);
            r.next = k + 1;
        }
        r.answered |= r.next >= n;
        true
    }
}

impl Engine {
    /// The PSN to re-request of the oldest incomplete READ, if `psn` is
    /// beyond all of that READ's responses.
    fn lost_read_before(&self, psn: u32) -> Option<u32> {
        self.inflight
            .iter()
            .find(|w| w.opcode == WR_RDMA_READ && w.read_rcvd < w.npkts)
            .filter(|w| w.sent >= w.npkts && psn_diff(psn, psn_add(w.first_psn, w.npkts)) >= 0)
            .map(|w| psn_add(w.first_psn, w.read_rcvd))
    }

    /// The earliest timer of this QP.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        match (self.timer, self.rnr_wait) {
            (Some(a), Some((b, _))) => Some(a.min(b)),
            (a, b) => a.or(b.map(|x| x.0)),
        }
    }
}
