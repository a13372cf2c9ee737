// SPDX-License-Identifier: GPL-2.0
//! The RC responder (rxe `rxe_resp.c`): incoming SEND/WRITE/READ/atomic
//! and (1.8) ATOMIC_WRITE/FLUSH requests, receive WQEs, the responder
//! resources of READs, atomics, ATOMIC_WRITEs and FLUSHes (the replay
//! cache), ACKs and NAKs.

use super::codes::{Credit, NakCode, Syndrome, WcStatus};
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
    /// starts (RC and UC) at the responder of QP `qp`, its whole range
    /// checked against the rkey (an MR's or a memory window's) at once.
    /// `None`: the rkey does not grant remote write over the range.
    pub(super) fn write_start(
        &self,
        cur: Option<WriteCtx>,
        pkt: &Packet<'_>,
        qp: &QpCtx,
    ) -> Option<WriteCtx> {
        if let Some(write) = cur {
            return Some(write);
        }
        let total = u64::from(pkt.reth.len);
        if total > 0 {
            self.translate_rkey(qp, pkt.reth.rkey, pkt.reth.va, total, ACCESS_REMOTE_WRITE)?;
        }
        Some(WriteCtx {
            rkey: pkt.reth.rkey,
            va: pkt.reth.va,
            left: total,
            total,
        })
    }

    pub(super) fn send_ack(&mut self, qp: &QpCtx, psn: u32, syndrome: Syndrome, msn: u32) {
        let Some(path) = self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num) else {
            return;
        };
        let bth = Bth {
            opcode: op::RC_ACK,
            pkey: wire::DEFAULT_PKEY,
            dest_qp: qp.attr.dest_qp_num,
            psn,
            ..Bth::default()
        };
        let aeth = Aeth {
            syndrome: syndrome.to_wire(),
            msn,
        };
        match syndrome {
            Syndrome::Ack(_) => self.data.acks_sent += 1,
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
    fn respond(&mut self, qp: &QpCtx, engine: &mut Engine) {
        engine.listed = false;
        if !self.answer_reads(qp, engine) {
            // Backpressure: the rest (and the ACK, which must not
            // overtake the responses) when the TX queue drains.
            self.schedule_response(qp.qpn, engine);
            return;
        }
        if engine.ack_pending {
            engine.ack_pending = false;
            let (psn, msn) = (psn_add(engine.epsn, 0xff_ffff), engine.msn);
            let credit = self.ack_credit(qp, engine, msn);
            self.send_ack(qp, psn, Syndrome::Ack(credit), msn);
        }
    }

    /// Reads the doorbell record of a watched RQ (device.rst "RC
    /// responder", credit updates): WQEs posted since the QP advertised
    /// none are announced at once in an unsolicited ACK for its newest
    /// PSN, which ends the watch; otherwise the watch goes on to its end.
    pub(super) fn credit_poll(&mut self, qp: &QpCtx, engine: &mut Engine) {
        let Some(mut watch) = engine.credit_watch else {
            return;
        };
        if !matches!(qp.state, QPS_RTR | QPS_RTS | QPS_SQD) {
            engine.credit_watch = None;
            return;
        }
        // A message under way, or output due at the end of the batch:
        // their AETHs carry the count.
        let busy = engine.recv.is_some() || engine.write.is_some() || engine.listed;
        if !busy && self.credit(qp, engine).wqes() != Some(0) {
            self.data.credit_updates += 1;
            engine.ack_pending = true;
            self.respond(qp, engine);
            return;
        }
        engine.credit_watch = watch.rearm(self.now_ns).then_some(watch);
    }

    /// Puts the QP on the list of responder output due at the end of the batch.
    pub(super) fn schedule_response(&mut self, qpn: u32, engine: &mut Engine) {
        if !engine.listed {
            engine.listed = true;
            self.ack_list.push(qpn);
        }
    }

    pub(super) fn want_ack(&mut self, qpn: u32, engine: &mut Engine) {
        engine.ack_pending = true;
        self.schedule_response(qpn, engine);
    }

    /// Sends a NAK (or RNR NAK) from the responder, after the responses of
    /// the READs before it.
    /// A PSN sequence or RNR NAK is not sent while READ responses before
    /// it wait for room (false): it would overtake them; the requester
    /// resends and gets it again.
    pub(super) fn send_nak(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        psn: u32,
        syndrome: Syndrome,
    ) -> bool {
        let answered = self.answer_reads(qp, engine);
        let fatal = matches!(syndrome, Syndrome::Nak(code) if code != NakCode::PsnSeqErr);
        if !answered && !fatal {
            return false;
        }
        self.send_ack(qp, psn, syndrome, engine.msn);
        true
    }

    /// The responder: one request packet on RC QP `qp`.
    pub(super) fn rc_request(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) {
        let psn = pkt.bth.psn;
        let d = psn_diff(psn, engine.epsn);
        if d > 0 {
            if !engine.nak_sent {
                let epsn = engine.epsn;
                engine.nak_sent =
                    self.send_nak(qp, engine, epsn, Syndrome::Nak(NakCode::PsnSeqErr));
            }
            return;
        }
        if d < 0 {
            self.data.dup_requests += 1;
            if matches!(
                pkt.bth.opcode,
                op::RC_READ_REQUEST
                    | op::RC_CMP_SWAP
                    | op::RC_FETCH_ADD
                    | op::RC_ATOMIC_WRITE
                    | op::RC_FLUSH
            ) {
                self.read_duplicate(qp, engine, psn, pkt.bth.opcode);
            } else {
                self.want_ack(qp.qpn, engine);
            }
            return;
        }
        engine.nak_sent = false;
        if qp.state == QPS_RTR && !engine.comm_est_sent {
            // First packet on a QP still in RTR (IBTA 11.6.3: COMM_EST).
            engine.comm_est_sent = true;
            self.post_async(EQE_QP_COMM_EST, qp.qpn, 0, 0);
        }
        let r = match pkt.bth.opcode {
            op::RC_SEND_FIRST
            | op::RC_SEND_MIDDLE
            | op::RC_SEND_LAST
            | op::RC_SEND_LAST_IMM
            | op::RC_SEND_ONLY
            | op::RC_SEND_ONLY_IMM
            | op::RC_SEND_LAST_INV
            | op::RC_SEND_ONLY_INV => self.rc_send(qp, engine, pkt),
            op::RC_WRITE_FIRST
            | op::RC_WRITE_MIDDLE
            | op::RC_WRITE_LAST
            | op::RC_WRITE_LAST_IMM
            | op::RC_WRITE_ONLY
            | op::RC_WRITE_ONLY_IMM => self.rc_write(qp, engine, pkt),
            op::RC_READ_REQUEST
            | op::RC_CMP_SWAP
            | op::RC_FETCH_ADD
            | op::RC_ATOMIC_WRITE
            | op::RC_FLUSH
                if engine.recv.is_some() || engine.write.is_some() =>
            {
                Err(RespErr::Fatal(NakCode::InvalidRequest, None))
            }
            op::RC_READ_REQUEST => self.read_accept(qp, engine, pkt),
            op::RC_CMP_SWAP | op::RC_FETCH_ADD => self.atomic_accept(qp, engine, pkt),
            op::RC_ATOMIC_WRITE => self.atomic_write_accept(qp, engine, pkt),
            op::RC_FLUSH => self.flush_accept(qp, engine, pkt),
            _ => Err(RespErr::Fatal(NakCode::InvalidRequest, None)),
        };
        match r {
            Ok(()) => {}
            Err(RespErr::Rnr) => {
                let _ = self.send_nak(qp, engine, psn, Syndrome::RnrNak(qp.attr.min_rnr_timer));
            }
            Err(RespErr::Fatal(code, recv_status)) => {
                let syndrome = Syndrome::Nak(code);
                let _ = self.send_nak(qp, engine, psn, syndrome);
                if code == NakCode::RemoteAccessErr {
                    let data = u32::from(syndrome.to_wire());
                    self.post_async(EQE_QP_ACCESS_ERR, qp.qpn, data, 0);
                }
                // The receive WQE of the SEND under way completes in error
                // if the error is its own; else the flush completes it.
                if let Some(st) = recv_status {
                    if let Some(recv) = engine.recv.take() {
                        self.recv_failed(qp, engine, &recv, st, qp.attr.dest_qp_num);
                    }
                }
                self.qp_fail(qp, engine, None);
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
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let opcode = pkt.bth.opcode;
        let first = matches!(
            opcode,
            op::RC_SEND_FIRST | op::RC_SEND_ONLY | op::RC_SEND_ONLY_IMM | op::RC_SEND_ONLY_INV
        );
        let last = !matches!(opcode, op::RC_SEND_FIRST | op::RC_SEND_MIDDLE);
        if first != engine.recv.is_none() || engine.write.is_some() {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mtu = self.mtu_of(&qp.attr);
        Self::check_seg_len(mtu, pkt.payload.len(), first, last)?;
        if first {
            if !qp.receives() {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
            let Some(recv) = self.recv_take(qp, engine) else {
                return Err(RespErr::Rnr);
            };
            let error = recv.wqe.error;
            engine.recv = Some(recv);
            if let Some(st) = error {
                return Err(RespErr::Fatal(NakCode::RemoteOpErr, Some(st)));
            }
        }
        let Some(mut recv) = engine.recv.take() else {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        };
        let end = recv.off + pkt.payload.len() as u64;
        if end > recv.wqe.cap {
            engine.recv = Some(recv);
            return Err(RespErr::Fatal(
                NakCode::InvalidRequest,
                Some(WcStatus::LocLenErr),
            ));
        }
        let fresh = self.refresh_recv_segs(qp.pdn, &mut recv.wqe);
        if !fresh || !self.scatter(&mut recv.wqe.segs, recv.off, pkt.payload) {
            engine.recv = Some(recv);
            return Err(RespErr::Fatal(
                NakCode::RemoteOpErr,
                Some(WcStatus::LocProtErr),
            ));
        }
        recv.off = end;
        // SEND with invalidate: the key goes once the data is placed. A key
        // that names no fast-register MR of this PD (nor a type 2 memory
        // window of it, FREE or bound to this QP) is a class J error, as
        // in rxe: the receive completes REM_INV_REQ_ERR, NAK invalid request.
        let with_inv = matches!(opcode, op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV);
        if with_inv && self.invalidate_key(qp.pdn, pkt.ieth, Some(qp.qpn)).is_err() {
            engine.recv = Some(recv);
            return Err(RespErr::Fatal(
                NakCode::InvalidRequest,
                Some(WcStatus::RemInvReqErr),
            ));
        }
        engine.epsn = psn_add(engine.epsn, 1);
        if last {
            engine.msn = (engine.msn + 1) & 0xff_ffff;
            Self::recv_consumed(engine, &recv);
            self.rc_recv_cqe(qp, pkt, recv.wqe.wr_id, recv.idx, recv.off as u32);
        } else {
            engine.recv = Some(recv);
        }
        if pkt.bth.ack_req {
            self.want_ack(qp.qpn, engine);
        }
        Ok(())
    }

    /// Posts the successful receive CQE of `pkt`, the last packet of an
    /// incoming SEND or of an RDMA WRITE with immediate.
    pub(super) fn rc_recv_cqe(
        &mut self,
        qp: &QpCtx,
        pkt: &Packet<'_>,
        wr_id: u64,
        idx: u16,
        byte_len: u32,
    ) {
        let opcode = pkt.bth.opcode;
        let write = matches!(opcode, op::RC_WRITE_LAST_IMM | op::RC_WRITE_ONLY_IMM);
        let mut cqe = Cqe {
            wr_id,
            byte_len,
            qpn: qp.qpn,
            src_qp: qp.attr.dest_qp_num,
            opcode: if write {
                WC_RECV_RDMA_WITH_IMM
            } else {
                WC_RECV
            },
            wqe_idx: idx,
            flags: qp.attr.av.network_type << CQE_NET_TYPE_SHIFT,
            ..Cqe::zeroed()
        };
        if write || matches!(opcode, op::RC_SEND_LAST_IMM | op::RC_SEND_ONLY_IMM) {
            cqe.flags |= CQE_WITH_IMM;
            cqe.imm_data = u32::from_le_bytes(pkt.imm);
        }
        if matches!(opcode, op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV) {
            // imm_data is be32 in the CQE, as the key was on the wire.
            cqe.flags |= CQE_WITH_INV;
            cqe.imm_data = u32::from_le_bytes(pkt.ieth.to_be_bytes());
        }
        if pkt.bth.se {
            cqe.flags |= CQE_SOLICITED;
        }
        self.post_data_cqe(qp.recv_cqn, cqe);
    }

    pub(super) fn rc_write(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let opcode = pkt.bth.opcode;
        let first = matches!(
            opcode,
            op::RC_WRITE_FIRST | op::RC_WRITE_ONLY | op::RC_WRITE_ONLY_IMM
        );
        let last = !matches!(opcode, op::RC_WRITE_FIRST | op::RC_WRITE_MIDDLE);
        let imm = matches!(opcode, op::RC_WRITE_LAST_IMM | op::RC_WRITE_ONLY_IMM);
        if first != engine.write.is_none() || engine.recv.is_some() {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if qp.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mtu = self.mtu_of(&qp.attr);
        Self::check_seg_len(mtu, pkt.payload.len(), first, last)?;
        let Some(mut write) = self.write_start(engine.write, pkt, qp) else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        let n = pkt.payload.len() as u64;
        if !write.takes(n, last) {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // Immediate data needs a receive WQE before anything is written
        // (an SRQ QP takes it now: if the WRITE fails the QP goes to ERR
        // and flushes it).
        if imm && last && !self.recv_ready(qp, engine) {
            if !qp.receives() {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
            engine.write = (!first).then_some(write);
            return Err(RespErr::Rnr);
        }
        if n > 0 {
            let Some(segs) = self.translate_rkey(qp, write.rkey, write.va, n, ACCESS_REMOTE_WRITE)
            else {
                return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
            };
            if !self.scatter(&mut Segments::new(segs), 0, pkt.payload) {
                return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
            }
        }
        write.va = write.va.wrapping_add(n);
        write.left -= n;
        engine.epsn = psn_add(engine.epsn, 1);
        if last {
            engine.write = None;
            engine.msn = (engine.msn + 1) & 0xff_ffff;
            if let Some((wr_id, idx)) = imm.then(|| self.recv_imm(qp, engine)).flatten() {
                self.rc_recv_cqe(qp, pkt, wr_id, idx, write.total as u32);
            }
        } else {
            engine.write = Some(write);
        }
        if pkt.bth.ack_req {
            self.want_ack(qp.qpn, engine);
        }
        Ok(())
    }

    /// A new RDMA READ request: checks it and takes a responder resource;
    /// the responses go out at the end of the batch ([`Self::flush_acks`]).
    pub(super) fn read_accept(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        if qp.attr.qp_access_flags & ACCESS_REMOTE_READ == 0 || qp.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let len = u64::from(pkt.reth.len);
        if len > MAX_MSG {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if self
            .translate_rkey(qp, pkt.reth.rkey, pkt.reth.va, len, ACCESS_REMOTE_READ)
            .is_none()
        {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        }
        let mtu = self.mtu_of(&qp.attr);
        let n = pkts_for(len, mtu);
        if n > MAX_MSG_PKTS {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        self.take_resource(qp, engine, false)?;
        engine.epsn = psn_add(pkt.bth.psn, n);
        engine.msn = (engine.msn + 1) & 0xff_ffff;
        engine.reads.push_back(ReadRes {
            psn: pkt.bth.psn,
            npkts: n,
            va: pkt.reth.va,
            rkey: pkt.reth.rkey,
            len: pkt.reth.len,
            mtu,
            msn: engine.msn,
            from: 0,
            next: 0,
            answered: false,
            kind: ResKind::Read,
        });
        self.schedule_response(qp.qpn, engine);
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
    fn take_resource(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        flush: bool,
    ) -> Result<(), RespErr> {
        let limit = usize::from(qp.attr.max_dest_rd_atomic).next_power_of_two();
        loop {
            while engine.reads.len() >= limit && engine.reads.front().is_some_and(|r| r.answered) {
                engine.reads.pop_front();
            }
            if engine.reads.len() < limit {
                return Ok(());
            }
            let oldest = engine.reads.front().copied().filter(|_| flush);
            let Some(mut res) = oldest else {
                // More READs and atomics outstanding than max_dest_rd_atomic.
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            };
            // A READ whose memory vanished is NAKed by `answer_reads` at
            // the end of the batch, from where this left it.
            let credit = self.ack_credit(qp, engine, res.msn);
            let ok = self.read_responses(qp, &mut res, credit);
            if let Some(front) = engine.reads.front_mut() {
                *front = res;
            }
            if !ok || !res.answered {
                return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
            }
        }
    }

    /// A new atomic request: checked, executed at once and kept in a
    /// responder resource (the replay cache) whose ATOMIC_ACKNOWLEDGE goes
    /// out with the batch's READ responses. The whole engine runs under the
    /// device lock, so no other QP's atomic can come between the read and
    /// the write of the word (`IB_ATOMIC_HCA`).
    fn atomic_accept(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let atomic = pkt.atomic;
        if qp.attr.qp_access_flags & ACCESS_REMOTE_ATOMIC == 0 || qp.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // A misaligned atomic is an invalid request (rxe
        // RESPST_ERR_MISALIGNED_ATOMIC).
        if atomic.va % ATOMIC_LEN != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let Some(segs) =
            self.translate_rkey(qp, atomic.rkey, atomic.va, ATOMIC_LEN, ACCESS_REMOTE_ATOMIC)
        else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        self.take_resource(qp, engine, false)?;
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
        let new = if pkt.bth.opcode == op::RC_CMP_SWAP {
            if orig == atomic.compare {
                atomic.swap_add
            } else {
                orig
            }
        } else {
            orig.wrapping_add(atomic.swap_add)
        };
        if new != orig && !self.scatter(&mut segs, 0, &new.to_le_bytes()) {
            return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
        }
        engine.epsn = psn_add(pkt.bth.psn, 1);
        engine.msn = (engine.msn + 1) & 0xff_ffff;
        engine.reads.push_back(ReadRes {
            psn: pkt.bth.psn,
            npkts: 1,
            va: atomic.va,
            rkey: atomic.rkey,
            len: ATOMIC_LEN as u32,
            mtu: self.mtu_of(&qp.attr),
            msn: engine.msn,
            from: 0,
            next: 0,
            answered: false,
            kind: ResKind::Atomic(AtomicRes {
                opcode: pkt.bth.opcode,
                orig,
            }),
        });
        self.schedule_response(qp.qpn, engine);
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
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let reth = pkt.reth;
        if qp.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 || qp.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if u64::from(reth.len) != ATOMIC_LEN || pkt.payload.len() as u64 != ATOMIC_LEN {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if reth.va % ATOMIC_LEN != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let Some(segs) =
            self.translate_rkey(qp, reth.rkey, reth.va, ATOMIC_LEN, ACCESS_REMOTE_WRITE)
        else {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        };
        self.take_resource(qp, engine, false)?;
        if !self.store_word(segs, pkt.payload) {
            return Err(RespErr::Fatal(NakCode::RemoteOpErr, None));
        }
        self.placement_done(qp, engine, pkt);
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
    fn flush_accept(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
    ) -> Result<(), RespErr> {
        let ty = feth::placement_type(pkt.feth);
        let level = feth::level(pkt.feth);
        let types = FLUSH_GLOBAL | FLUSH_PERSISTENT;
        let type_ok = ty != 0 && ty & !types == 0;
        let level_ok = matches!(level, FLUSH_RANGE | FLUSH_MR);
        if !type_ok || !level_ok || feth::reserved(pkt.feth) != 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        if qp.attr.max_dest_rd_atomic == 0 {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        let mut need = 0;
        if ty & FLUSH_GLOBAL != 0 {
            need |= ACCESS_FLUSH_GLOBAL;
        }
        if ty & FLUSH_PERSISTENT != 0 {
            need |= ACCESS_FLUSH_PERSISTENT;
        }
        if qp.attr.qp_access_flags & need != need {
            return Err(RespErr::Fatal(NakCode::InvalidRequest, None));
        }
        // Level MR: the whole MR, whose VA and length are sent but unused.
        let range = (level == FLUSH_RANGE).then_some((pkt.reth.va, u64::from(pkt.reth.len)));
        if !self.flush_rkey(qp, pkt.reth.rkey, range, need) {
            return Err(RespErr::Fatal(NakCode::RemoteAccessErr, None));
        }
        self.take_resource(qp, engine, true)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.placement_done(qp, engine, pkt);
        Ok(())
    }

    /// An executed ATOMIC_WRITE or FLUSH `pkt`: the PSN and MSN advance, and
    /// a responder resource keeps its PSN and opcode to answer it (and its
    /// duplicates) at the end of the batch.
    fn placement_done(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) {
        engine.epsn = psn_add(pkt.bth.psn, 1);
        engine.msn = (engine.msn + 1) & 0xff_ffff;
        engine.reads.push_back(ReadRes {
            psn: pkt.bth.psn,
            npkts: 1,
            va: pkt.reth.va,
            rkey: pkt.reth.rkey,
            len: 0,
            mtu: self.mtu_of(&qp.attr),
            msn: engine.msn,
            from: 0,
            next: 0,
            answered: false,
            kind: ResKind::Placement(pkt.bth.opcode),
        });
        self.schedule_response(qp.qpn, engine);
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
    pub(super) fn read_duplicate(&mut self, qp: &QpCtx, engine: &mut Engine, psn: u32, opcode: u8) {
        let Some(res) = engine.reads.iter_mut().find(|r| r.index_of(psn).is_some()) else {
            return;
        };
        let same_kind = match res.kind {
            ResKind::Read => opcode == op::RC_READ_REQUEST,
            ResKind::Atomic(a) => a.opcode == opcode,
            ResKind::Placement(o) => o == opcode,
        };
        if !same_kind {
            return;
        }
        let Some(k) = res.index_of(psn) else {
            return;
        };
        if !res.unanswered() || k < res.next {
            res.from = k;
            res.next = k;
            self.schedule_response(qp.qpn, engine);
        }
    }

    /// Sends the responses of the READs in order, as far as the TX queue
    /// has room; true once every READ is answered. A READ whose memory
    /// vanished NAKs remote operational error and moves the QP to ERR.
    pub(super) fn answer_reads(&mut self, qp: &QpCtx, engine: &mut Engine) -> bool {
        let mut credit = None;
        for i in 0..engine.reads.len() {
            let Some(mut res) = engine.reads.get(i).copied().filter(|r| r.unanswered()) else {
                continue;
            };
            let credit = *credit.get_or_insert_with(|| self.ack_credit(qp, engine, res.msn));
            let ok = self.read_responses(qp, &mut res, credit);
            if let Some(slot) = engine.reads.get_mut(i) {
                *slot = res;
            }
            if !ok {
                engine.reads.clear();
                // The PSN of the first response not sent: the requester
                // took the ones before as acknowledgements, and a NAK
                // behind them would be stale to it (device.rst).
                let psn = psn_add(res.psn, res.next);
                self.send_ack(qp, psn, Syndrome::Nak(NakCode::RemoteOpErr), res.msn);
                self.qp_fail(qp, engine, None);
                return true;
            }
            if res.unanswered() {
                return false;
            }
        }
        true
    }

    /// Sends response packets of READ `res` from `res.next` on while the TX
    /// queue has room; false if its memory cannot be read. Only what is
    /// about to be sent is translated, as much as the queue has room for,
    /// so a long READ answered over many calls walks its pages once.
    pub(super) fn read_responses(&mut self, qp: &QpCtx, res: &mut ReadRes, credit: Credit) -> bool {
        match res.kind {
            ResKind::Read => {}
            ResKind::Atomic(_) | ResKind::Placement(_) => {
                self.single_response(qp, res, credit);
                return true;
            }
        }
        let len = u64::from(res.len);
        let mtu = res.mtu;
        let n = res.npkts;
        let from = u64::from(res.next) * mtu;
        // The translated part: `segs` covers message bytes `base..end`.
        let Some((mut segs, mut end)) = self.read_chunk(qp, res, from) else {
            return false;
        };
        let mut base = from;
        let Some(path) = self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num) else {
            res.next = res.npkts;
            res.answered = true;
            return true;
        };
        while res.next < n && self.tx_room() > 0 {
            let k = res.next;
            let off = u64::from(k) * mtu;
            let m = (len - off.min(len)).min(mtu) as usize;
            if off + m as u64 > end {
                let Some(chunk) = self.read_chunk(qp, res, off) else {
                    return false;
                };
                (segs, end) = chunk;
                base = off;
            }
            // A re-requested tail is answered as a READ of its own.
            let opcode = match (k == res.from, k + 1 == n) {
                (true, true) => op::RC_READ_RESPONSE_ONLY,
                (true, false) => op::RC_READ_RESPONSE_FIRST,
                (false, true) => op::RC_READ_RESPONSE_LAST,
                (false, false) => op::RC_READ_RESPONSE_MIDDLE,
            };
            let bth = Bth {
                opcode,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: qp.attr.dest_qp_num,
                psn: psn_add(res.psn, k),
                ..Bth::default()
            };
            let aeth = Aeth {
                syndrome: Syndrome::Ack(credit).to_wire(),
                msn: res.msn,
            };
            let mut pkt = Self::packet_on(&path, self.ip_id, bth, &[]);
            pkt.aeth = aeth;
            // The payload goes from guest memory straight into the frame.
            if !self.emit_gathered(&pkt, &mut segs, off - base, m) {
                return false;
            }
            res.next = k + 1;
        }
        res.answered |= res.next >= n;
        true
    }

    /// Sends the one-packet answer of resource `res` if the TX queue has
    /// room: for an atomic its ATOMIC_ACKNOWLEDGE, from the cached original
    /// value; for an ATOMIC_WRITE or FLUSH (1.8) a zero-length
    /// RDMA_READ_RESPONSE_ONLY with the AETH.
    fn single_response(&mut self, qp: &QpCtx, res: &mut ReadRes, credit: Credit) {
        if self.tx_room() == 0 {
            return;
        }
        if let Some(path) = self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num) {
            let opcode = match res.kind {
                ResKind::Atomic(_) => op::RC_ATOMIC_ACK,
                _ => op::RC_READ_RESPONSE_ONLY,
            };
            let bth = Bth {
                opcode,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: qp.attr.dest_qp_num,
                psn: res.psn,
                ..Bth::default()
            };
            let aeth = Aeth {
                syndrome: Syndrome::Ack(credit).to_wire(),
                msn: res.msn,
            };
            match res.kind {
                ResKind::Atomic(atomic) => self.send_atomic_ack(&path, bth, aeth, atomic.orig),
                _ => self.send_response(&path, bth, aeth, &[]),
            }
        }
        res.next = res.npkts;
        res.answered = true;
    }

    /// Translates the part of READ `res` from message offset `off` that the
    /// TX queue has room for now (at least one packet); returns it and the
    /// message offset where it ends.
    fn read_chunk(&self, qp: &QpCtx, res: &ReadRes, off: u64) -> Option<(Segments, u64)> {
        let len = u64::from(res.len);
        let room = self.tx_room().max(1) as u64;
        let end = len.min(off.saturating_add(room.saturating_mul(res.mtu)));
        let va = res.va.wrapping_add(off);
        let len = end.saturating_sub(off);
        let segs = self.translate_rkey(qp, res.rkey, va, len, ACCESS_REMOTE_READ)?;
        Some((Segments::new(segs), end))
    }
}
