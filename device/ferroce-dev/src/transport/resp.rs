// SPDX-License-Identifier: GPL-2.0
//! The RC responder (rxe `rxe_resp.c`): incoming SEND/WRITE/READ/atomic
//! and (1.8) ATOMIC_WRITE/FLUSH requests, receive WQEs, the responder
//! resources of READs, atomics, ATOMIC_WRITEs and FLUSHes (the replay
//! cache), ACKs and NAKs.

use super::codes::{NakCode, Syndrome, WcStatus};
use crate::device::State;
use crate::hw::*;
use crate::objects::SegList;
use crate::wire::{self, feth, op, psn_add, psn_diff, Aeth, Bth, Packet};

use super::{
    pkts_for, AtomicRes, Engine, QpCtx, ReadRes, ResKind, Segments, WriteCtx, ATOMIC_LEN, MAX_MSG,
    MAX_MSG_PKTS,
};

/// How a packet is being answered by the responder.
pub(super) enum RespErr {
    /// NAK with this code, responder QP to error, optional recv CQE status.
    Fatal(NakCode, Option<WcStatus>),
    /// RNR NAK.
    Rnr,
}

impl State {
    /// The RDMA WRITE a packet continues (`cur`), or the one its RETH
    /// starts (RC and UC) at the responder of QP `c`, its whole range
    /// checked against the rkey (an MR's or a memory window's) at once.
    /// `None`: the rkey does not grant remote write over the range.
    pub(super) fn write_start(
        &self,
        cur: Option<WriteCtx>,
        p: &Packet<'_>,
        c: &QpCtx,
    ) -> Option<WriteCtx> {
        if let Some(w) = cur {
            return Some(w);
        }
        let total = u64::from(p.reth.len);
        if total > 0 {
            self.translate_rkey(c, p.reth.rkey, p.reth.va, total, ACCESS_REMOTE_WRITE)?;
        }
        Some(WriteCtx {
            rkey: p.reth.rkey,
            va: p.reth.va,
            left: total,
            total,
        })
    }

    pub(super) fn send_ack(&mut self, c: &QpCtx, psn: u32, syndrome: Syndrome, msn: u32) {
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
        let aeth = Aeth {
            syndrome: syndrome.to_wire(),
            msn,
        };
        match syndrome {
            Syndrome::Ack => self.data.acks_sent += 1,
            Syndrome::RnrNak(_) => self.data.rnr_naks_sent += 1,
            Syndrome::Nak(NakCode::PsnSeqErr) => self.data.seq_naks_sent += 1,
            _ => self.data.err_naks_sent += 1,
        }
        self.send_response(&path, bth, aeth, &[]);
    }

    /// Sends the responder output of this batch: READ responses, then the
    /// coalesced ACK.
    pub(crate) fn flush_acks(&mut self) {
        let qpns = std::mem::take(&mut self.ack_list);
        for qpn in qpns {
            self.with_engine(qpn, Self::respond);
        }
    }

    /// The responder output of one QP at the end of a batch.
    fn respond(&mut self, c: &QpCtx, e: &mut Engine) {
        e.listed = false;
        if !self.answer_reads(c, e) {
            // Backpressure: the rest (and the ACK, which must not
            // overtake the responses) when the TX queue drains.
            self.schedule_response(c.qpn, e);
            return;
        }
        if e.ack_pending {
            e.ack_pending = false;
            let (psn, msn) = (psn_add(e.epsn, 0xff_ffff), e.msn);
            self.send_ack(c, psn, Syndrome::Ack, msn);
        }
    }

    /// Puts the QP on the list of responder output due at the end of the batch.
    pub(super) fn schedule_response(&mut self, qpn: u32, e: &mut Engine) {
        if !e.listed {
            e.listed = true;
            self.ack_list.push(qpn);
        }
    }

    pub(super) fn want_ack(&mut self, qpn: u32, e: &mut Engine) {
        e.ack_pending = true;
        self.schedule_response(qpn, e);
    }

    /// Sends a NAK (or RNR NAK) from the responder, after the responses of
    /// the READs before it.
    /// A PSN sequence or RNR NAK is not sent while READ responses before
    /// it wait for room (false): it would overtake them; the requester
    /// resends and gets it again.
    pub(super) fn send_nak(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        psn: u32,
        syndrome: Syndrome,
    ) -> bool {
        let answered = self.answer_reads(c, e);
        let fatal = matches!(syndrome, Syndrome::Nak(code) if code != NakCode::PsnSeqErr);
        if !answered && !fatal {
            return false;
        }
        self.send_ack(c, psn, syndrome, e.msn);
        true
    }

    /// The responder: one request packet on RC QP `c`.
    pub(super) fn rc_request(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        let psn = p.bth.psn;
        let d = psn_diff(psn, e.epsn);
        if d > 0 {
            if !e.nak_sent {
                let epsn = e.epsn;
                e.nak_sent = self.send_nak(c, e, epsn, Syndrome::Nak(NakCode::PsnSeqErr));
            }
            return;
        }
        if d < 0 {
            self.data.dup_requests += 1;
            if matches!(
                p.bth.opcode,
                op::RC_READ_REQUEST
                    | op::RC_CMP_SWAP
                    | op::RC_FETCH_ADD
                    | op::RC_ATOMIC_WRITE
                    | op::RC_FLUSH
            ) {
                self.read_duplicate(c, e, psn, p.bth.opcode);
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
            op::RC_READ_REQUEST
            | op::RC_CMP_SWAP
            | op::RC_FETCH_ADD
            | op::RC_ATOMIC_WRITE
            | op::RC_FLUSH
                if e.recv.is_some() || e.write.is_some() =>
            {
                Err(RespErr::Fatal(NakCode::InvalidRequest, None))
            }
            op::RC_READ_REQUEST => self.read_accept(c, e, p),
            op::RC_CMP_SWAP | op::RC_FETCH_ADD => self.atomic_accept(c, e, p),
            op::RC_ATOMIC_WRITE => self.atomic_write_accept(c, e, p),
            op::RC_FLUSH => self.flush_accept(c, e, p),
            _ => Err(RespErr::Fatal(NakCode::InvalidRequest, None)),
        };
        match r {
            Ok(()) => {}
            Err(RespErr::Rnr) => {
                let _ = self.send_nak(c, e, psn, Syndrome::RnrNak(c.attr.min_rnr_timer));
            }
            Err(RespErr::Fatal(code, recv_status)) => {
                let syndrome = Syndrome::Nak(code);
                let _ = self.send_nak(c, e, psn, syndrome);
                if code == NakCode::RemoteAccessErr {
                    let data = u32::from(syndrome.to_wire());
                    self.post_async(EQE_QP_ACCESS_ERR, c.qpn, data, 0);
                }
                // The receive WQE of the SEND under way completes in error
                // if the error is its own; else the flush completes it.
                if let Some(st) = recv_status {
                    if let Some(r) = e.recv.take() {
                        self.recv_failed(c, e, &r, st, c.attr.dest_qp_num);
                    }
                }
                self.qp_fail(c, e, None);
            }
        }
    }

    pub(super) fn check_seg_len(
        mtu: u64,
        len: usize,
        first: bool,
        last: bool,
    ) -> Result<(), RespErr> {
        let len = len as u64;
        let ok = if last {
            len <= mtu && (first || len > 0)
        } else {
            len == mtu
        };
        if ok {
            Ok(())
        } else {
            Err(RespErr::Fatal(NakCode::InvalidRequest, None))
        }
    }

    pub(super) fn rc_send(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let o = p.bth.opcode;
        let first = matches!(
            o,
            op::RC_SEND_FIRST | op::RC_SEND_ONLY | op::RC_SEND_ONLY_IMM | op::RC_SEND_ONLY_INV
        );
        let last = !matches!(o, op::RC_SEND_FIRST | op::RC_SEND_MIDDLE);
        if first != e.recv.is_none() || e.write.is_some() {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mtu = self.mtu_of(&c.attr);
        Self::check_seg_len(mtu, p.payload.len(), first, last)?;
        if first {
            if !c.receives() {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
            let Some(r) = self.recv_take(c, e) else {
                return Err(RespErr::Rnr);
            };
            let error = r.wqe.error;
            e.recv = Some(r);
            if let Some(st) = error {
                return Err(RespErr::Fatal(NakCode::RemoteOpErr, Some(st)));
            }
        }
        let Some(mut r) = e.recv.take() else {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        };
        let end = r.off + p.payload.len() as u64;
        if end > r.wqe.cap {
            e.recv = Some(r);
            return Err(RespErr::Fatal(
                NakCode::InvalidRequest,
                Some(WcStatus::LocLenErr),
            ));
        }
        let fresh = self.refresh_recv_segs(c.pdn, &mut r.wqe);
        if !fresh || !self.scatter(&mut r.wqe.segs, r.off, p.payload) {
            e.recv = Some(r);
            return Err(RespErr::Fatal(
                NakCode::RemoteOpErr,
                Some(WcStatus::LocProtErr),
            ));
        }
        r.off = end;
        // SEND with invalidate: the key goes once the data is placed. A key
        // that names no fast-register MR of this PD (nor a type 2 memory
        // window of it, FREE or bound to this QP) is a class J error, as
        // in rxe: the receive completes REM_INV_REQ_ERR, NAK invalid request.
        let with_inv = matches!(o, op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV);
        if with_inv && self.invalidate_key(c.pdn, p.ieth, Some(c.qpn)).is_err() {
            e.recv = Some(r);
            return Err(RespErr::Fatal(
                NakCode::InvalidRequest,
                Some(WcStatus::RemInvReqErr),
            ));
        }
        e.epsn = psn_add(e.epsn, 1);
        if last {
            e.msn = (e.msn + 1) & 0xff_ffff;
            Self::recv_consumed(e, &r);
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
    pub(super) fn rc_recv_cqe(
        &mut self,
        c: &QpCtx,
        p: &Packet<'_>,
        wr_id: u64,
        idx: u16,
        byte_len: u32,
    ) {
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

    pub(super) fn rc_write(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let o = p.bth.opcode;
        let first = matches!(
            o,
            op::RC_WRITE_FIRST | op::RC_WRITE_ONLY | op::RC_WRITE_ONLY_IMM
        );
        let last = !matches!(o, op::RC_WRITE_FIRST | op::RC_WRITE_MIDDLE);
        let imm = matches!(o, op::RC_WRITE_LAST_IMM | op::RC_WRITE_ONLY_IMM);
        if first != e.write.is_none() || e.recv.is_some() {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if c.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mtu = self.mtu_of(&c.attr);
        Self::check_seg_len(mtu, p.payload.len(), first, last)?;
        let Some(mut w) = self.write_start(e.write, p, c) else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        let n = p.payload.len() as u64;
        if !w.takes(n, last) {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // Immediate data needs a receive WQE before anything is written
        // (an SRQ QP takes it now: if the WRITE fails the QP goes to ERR
        // and flushes it).
        if imm && last && !self.recv_ready(c, e) {
            if !c.receives() {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
            e.write = (!first).then_some(w);
            return Err(RespErr::Rnr);
        }
        if n > 0 {
            let Some(segs) = self.translate_rkey(c, w.rkey, w.va, n, ACCESS_REMOTE_WRITE) else {
                return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
            };
            if !self.scatter(&mut Segments::new(segs), 0, p.payload) {
                return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
            }
        }
        w.va = w.va.wrapping_add(n);
        w.left -= n;
        e.epsn = psn_add(e.epsn, 1);
        if last {
            e.write = None;
            e.msn = (e.msn + 1) & 0xff_ffff;
            if let Some((wr_id, idx)) = imm.then(|| self.recv_imm(c, e)).flatten() {
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
    pub(super) fn read_accept(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
    ) -> Result<(), RespErr> {
        if c.attr.qp_access_flags & ACCESS_REMOTE_READ == 0 || c.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let len = u64::from(p.reth.len);
        if len > MAX_MSG {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if self
            .translate_rkey(c, p.reth.rkey, p.reth.va, len, ACCESS_REMOTE_READ)
            .is_none()
        {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        }
        let mtu = self.mtu_of(&c.attr);
        let n = pkts_for(len, mtu);
        if n > MAX_MSG_PKTS {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        self.take_resource(c, e, false)?;
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
            kind: ResKind::Read,
        });
        self.schedule_response(c.qpn, e);
        Ok(())
    }

    /// Makes room for a new READ, atomic, ATOMIC_WRITE or FLUSH among the
    /// QP's responder resources: max_dest_rd_atomic of them, rounded up to
    /// a power of two as rxe does for both of its limits (an rxe requester
    /// set to 3 may have 4 outstanding; more resources than asked for are
    /// allowed). The oldest resources answered once are reused; never
    /// answered ones stay, and a new request that finds no other is NAKed.
    /// Except a FLUSH: rxe's requester does not count FLUSH against its
    /// max_rd_atomic, so a FLUSH may arrive in the batch of the request it
    /// follows; for it the oldest resource is answered now rather than at
    /// the end of the batch (it goes out first either way), and the FLUSH
    /// is refused only if that answer does not fit the transmit queue.
    fn take_resource(&mut self, c: &QpCtx, e: &mut Engine, flush: bool) -> Result<(), RespErr> {
        let limit = usize::from(c.attr.max_dest_rd_atomic).next_power_of_two();
        loop {
            while e.reads.len() >= limit && e.reads.front().is_some_and(|r| r.answered) {
                e.reads.pop_front();
            }
            if e.reads.len() < limit {
                return Ok(());
            }
            let oldest = e.reads.front().copied().filter(|_| flush);
            let Some(mut r) = oldest else {
                // More READs and atomics outstanding than max_dest_rd_atomic.
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            };
            // A READ whose memory vanished is NAKed by `answer_reads` at
            // the end of the batch, from where this left it.
            let ok = self.read_responses(c, &mut r);
            if let Some(front) = e.reads.front_mut() {
                *front = r;
            }
            if !ok || !r.answered {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
        }
    }

    /// A new atomic request: checked, executed at once and kept in a
    /// responder resource (the replay cache) whose ATOMIC_ACKNOWLEDGE goes
    /// out with the batch's READ responses. The whole engine runs under the
    /// device lock, so no other QP's atomic can come between the read and
    /// the write of the word (`IB_ATOMIC_HCA`).
    fn atomic_accept(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> Result<(), RespErr> {
        let a = p.atomic;
        if c.attr.qp_access_flags & ACCESS_REMOTE_ATOMIC == 0 || c.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // A misaligned atomic is an invalid request (rxe
        // RESPST_ERR_MISALIGNED_ATOMIC).
        if a.va % ATOMIC_LEN != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let Some(segs) = self.translate_rkey(c, a.rkey, a.va, ATOMIC_LEN, ACCESS_REMOTE_ATOMIC)
        else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        self.take_resource(c, e, false)?;
        let mut segs = Segments::new(segs);
        let mut word = Vec::with_capacity(ATOMIC_LEN as usize);
        if !self.gather(&mut segs, 0, ATOMIC_LEN as usize, &mut word) {
            return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
        }
        let orig = word
            .as_slice()
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| RespErr::Fatal(NakCode::RemoteOpErr, None))?;
        let new = if p.bth.opcode == op::RC_CMP_SWAP {
            if orig == a.compare {
                a.swap_add
            } else {
                orig
            }
        } else {
            orig.wrapping_add(a.swap_add)
        };
        if new != orig && !self.scatter(&mut segs, 0, &new.to_le_bytes()) {
            return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
        }
        e.epsn = psn_add(p.bth.psn, 1);
        e.msn = (e.msn + 1) & 0xff_ffff;
        e.reads.push_back(ReadRes {
            psn: p.bth.psn,
            npkts: 1,
            va: a.va,
            rkey: a.rkey,
            len: ATOMIC_LEN as u32,
            mtu: self.mtu_of(&c.attr),
            msn: e.msn,
            from: 0,
            next: 0,
            answered: false,
            kind: ResKind::Atomic(AtomicRes {
                opcode: p.bth.opcode,
                orig,
            }),
        });
        self.schedule_response(c.qpn, e);
        Ok(())
    }

    /// A new ATOMIC_WRITE request (1.8, device.rst "Atomic write and
    /// flush"), checked in the spec's order: `REMOTE_WRITE` on the QP and
    /// `max_dest_rd_atomic` > 0, the RETH's length and the payload 8 bytes,
    /// the VA 8-byte aligned (each else invalid request, rxe
    /// `check_rkey`/`atomic_write_reply`), then the R_Key (an MR's or a
    /// window's) with `REMOTE_WRITE` over `[va, va + 8)` (else remote
    /// access error). It takes a responder resource and is executed at
    /// once: the 8 bytes, as they came, stored as one word under the
    /// device lock that makes atomics atomic, so no device atomic sees half
    /// of it. The resource answers it, and its duplicates, with a
    /// zero-length READ response.
    fn atomic_write_accept(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let r = p.reth;
        if c.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 || c.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if u64::from(r.len) != ATOMIC_LEN || p.payload.len() as u64 != ATOMIC_LEN {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if r.va % ATOMIC_LEN != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let Some(segs) = self.translate_rkey(c, r.rkey, r.va, ATOMIC_LEN, ACCESS_REMOTE_WRITE)
        else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        self.take_resource(c, e, false)?;
        if !self.store_word(segs, p.payload) {
            return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
        }
        self.placement_done(c, e, p);
        Ok(())
    }

    /// Places the 8 bytes of an ATOMIC_WRITE at `segs`: one 64-bit store
    /// where they are one aligned guest word (every VA-based MR maps an
    /// aligned VA to an aligned guest address), else (a zero-based MR
    /// whose offset is not 8-byte aligned) piece by piece. Either way under
    /// the device lock, so no device atomic sees half of it.
    fn store_word(&mut self, segs: SegList, bytes: &[u8]) -> bool {
        let word = <[u8; 8]>::try_from(bytes).map(u64::from_le_bytes);
        match (&*segs, word) {
            (&[(gpa, len)], Ok(word)) if len == ATOMIC_LEN && gpa % ATOMIC_LEN == 0 => {
                self.data.sg_steps += 1;
                let done = self.mem.write_u64(gpa, word).is_ok();
                if !done {
                    self.counters.hw.bad_dma += 1;
                }
                done
            }
            _ => self.scatter(&mut Segments::new(segs), 0, bytes),
        }
    }

    /// A new FLUSH request (1.8, device.rst "Atomic write and flush"),
    /// checked in the spec's order: the FETH's type (`GLOBAL`,
    /// `PERSISTENT` or both), level (`RANGE` or `MR`) and reserved bits,
    /// `max_dest_rd_atomic` > 0, the QP's `FLUSH_GLOBAL` /
    /// `FLUSH_PERSISTENT` for each type asked for (each else invalid
    /// request, as rxe answers a QP without the right), then the R_Key
    /// (else remote access error): an MR of the QP's PD with the MR flag
    /// of each type, holding the range for level `RANGE`. No MR has
    /// `FLUSH_PERSISTENT` and no window a flush right. The device places
    /// the data of every request before it executes the next, so what came
    /// before is placed already: a full memory barrier makes it globally
    /// visible, and a responder resource answers with a zero-length READ
    /// response.
    fn flush_accept(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> Result<(), RespErr> {
        let ty = feth::placement_type(p.feth);
        let level = feth::level(p.feth);
        let types = FLUSH_GLOBAL | FLUSH_PERSISTENT;
        let type_ok = ty != 0 && ty & !types == 0;
        let level_ok = matches!(level, FLUSH_RANGE | FLUSH_MR);
        if !type_ok || !level_ok || feth::reserved(p.feth) != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if c.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mut need = 0;
        if ty & FLUSH_GLOBAL != 0 {
            need |= ACCESS_FLUSH_GLOBAL;
        }
        if ty & FLUSH_PERSISTENT != 0 {
            need |= ACCESS_FLUSH_PERSISTENT;
        }
        if c.attr.qp_access_flags & need != need {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // Level MR: the whole MR, whose VA and length are sent but unused.
        let range = (level == FLUSH_RANGE).then_some((p.reth.va, u64::from(p.reth.len)));
        if !self.flush_rkey(c, p.reth.rkey, range, need) {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        }
        self.take_resource(c, e, true)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.placement_done(c, e, p);
        Ok(())
    }

    /// An executed ATOMIC_WRITE or FLUSH `p`: the PSN and MSN advance, and
    /// a responder resource keeps its PSN and opcode to answer it (and its
    /// duplicates) at the end of the batch.
    fn placement_done(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        e.epsn = psn_add(p.bth.psn, 1);
        e.msn = (e.msn + 1) & 0xff_ffff;
        e.reads.push_back(ReadRes {
            psn: p.bth.psn,
            npkts: 1,
            va: p.reth.va,
            rkey: p.reth.rkey,
            len: 0,
            mtu: self.mtu_of(&c.attr),
            msn: e.msn,
            from: 0,
            next: 0,
            answered: false,
            kind: ResKind::Placement(p.bth.opcode),
        });
        self.schedule_response(c.qpn, e);
    }

    /// A duplicate READ request: answered again from the responder resource
    /// holding its PSN, from that PSN on (IBTA 9.7.5.1.4); one whose
    /// responses are still going out restarts from that PSN if it is
    /// behind them. Without a resource it is dropped. The responses go out
    /// at the end of the batch, as the TX queue has room.
    ///
    /// A duplicate atomic is answered from its resource with the original
    /// value it kept, never executed again (IBTA 9.7.5.1.5); (1.8) a
    /// duplicate ATOMIC_WRITE or FLUSH with the zero-length READ response,
    /// never executed again either. One that names the PSN of a resource
    /// of another opcode is dropped.
    pub(super) fn read_duplicate(&mut self, c: &QpCtx, e: &mut Engine, psn: u32, opcode: u8) {
        let Some(r) = e.reads.iter_mut().find(|r| r.index_of(psn).is_some()) else {
            return;
        };
        let same_kind = match r.kind {
            ResKind::Read => opcode == op::RC_READ_REQUEST,
            ResKind::Atomic(a) => a.opcode == opcode,
            ResKind::Placement(o) => o == opcode,
        };
        if !same_kind {
            return;
        }
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
    pub(super) fn answer_reads(&mut self, c: &QpCtx, e: &mut Engine) -> bool {
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
                // The PSN of the first response not sent: the requester
                // took the ones before as acknowledgements, and a NAK
                // behind them would be stale to it (device.rst).
                let psn = psn_add(r.psn, r.next);
                self.send_ack(c, psn, Syndrome::Nak(NakCode::RemoteOpErr), r.msn);
                self.qp_fail(c, e, None);
                return true;
            }
            if r.unanswered() {
                return false;
            }
        }
        true
    }

    /// Sends response packets of READ `r` from `r.next` on while the TX
    /// queue has room; false if its memory cannot be read. Only what is
    /// about to be sent is translated, as much as the queue has room for,
    /// so a long READ answered over many calls walks its pages once.
    pub(super) fn read_responses(&mut self, c: &QpCtx, r: &mut ReadRes) -> bool {
        match r.kind {
            ResKind::Read => {}
            ResKind::Atomic(_) | ResKind::Placement(_) => {
                self.single_response(c, r);
                return true;
            }
        }
        let len = u64::from(r.len);
        let mtu = r.mtu;
        let n = r.npkts;
        let from = u64::from(r.next) * mtu;
        // The translated part: `segs` covers message bytes `base..end`.
        let Some((mut segs, mut end)) = self.read_chunk(c, r, from) else {
            return false;
        };
        let mut base = from;
        let Some(path) = self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num) else {
            r.next = r.npkts;
            r.answered = true;
            return true;
        };
        while r.next < n && self.tx_room() > 0 {
            let k = r.next;
            let off = u64::from(k) * mtu;
            let m = (len - off.min(len)).min(mtu) as usize;
            if off + m as u64 > end {
                let Some(chunk) = self.read_chunk(c, r, off) else {
                    return false;
                };
                (segs, end) = chunk;
                base = off;
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
                syndrome: Syndrome::Ack.to_wire(),
                msn: r.msn,
            };
            let mut p = Self::packet_on(&path, self.ip_id, bth, &[]);
            p.aeth = aeth;
            // The payload goes from guest memory straight into the frame.
            if !self.emit_gathered(&p, &mut segs, off - base, m) {
                return false;
            }
            r.next = k + 1;
        }
        r.answered |= r.next >= n;
        true
    }

    /// Sends the one-packet answer of resource `r` if the TX queue has
    /// room: for an atomic its ATOMIC_ACKNOWLEDGE, from the cached original
    /// value; for an ATOMIC_WRITE or FLUSH (1.8) a zero-length
    /// RDMA_READ_RESPONSE_ONLY with the AETH.
    fn single_response(&mut self, c: &QpCtx, r: &mut ReadRes) {
        if self.tx_room() == 0 {
            return;
        }
        if let Some(path) = self.path_of(&c.attr.av, c.qpn, c.attr.dest_qp_num) {
            let opcode = match r.kind {
                ResKind::Atomic(_) => op::RC_ATOMIC_ACK,
                _ => op::RC_READ_RESPONSE_ONLY,
            };
            let bth = Bth {
                opcode,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: c.attr.dest_qp_num,
                psn: r.psn,
                ..Bth::default()
            };
            let aeth = Aeth {
                syndrome: Syndrome::Ack.to_wire(),
                msn: r.msn,
            };
            match r.kind {
                ResKind::Atomic(atomic) => self.send_atomic_ack(&path, bth, aeth, atomic.orig),
                _ => self.send_response(&path, bth, aeth, &[]),
            }
        }
        r.next = r.npkts;
        r.answered = true;
    }

    /// Translates the part of READ `r` from message offset `off` that the
    /// TX queue has room for now (at least one packet); returns it and the
    /// message offset where it ends.
    fn read_chunk(&self, c: &QpCtx, r: &ReadRes, off: u64) -> Option<(Segments, u64)> {
        let len = u64::from(r.len);
        let room = self.tx_room().max(1) as u64;
        let end = len.min(off.saturating_add(room.saturating_mul(r.mtu)));
        let va = r.va.wrapping_add(off);
        let len = end.saturating_sub(off);
        let segs = self.translate_rkey(c, r.rkey, va, len, ACCESS_REMOTE_READ)?;
        Some((Segments::new(segs), end))
    }
}
