// SPDX-License-Identifier: GPL-2.0
//! Receive WQEs: where the RC responder, the UC responder and UD reception
//! get the receive WQE of a message, from the QP's own RQ or (1.6) from the
//! shared receive queue it is attached to (device.rst "Shared receive
//! queues"; rxe `get_srq_wqe` in `rxe_resp.c`).
//!
//! * Own RQ: the WQE at the QP's `rq_ci` is read when a message needs one
//!   and consumed (`rq_ci` advances) when it completes; a message dropped
//!   before that leaves it posted for the next one, and a flush completes
//!   it from the ring.
//! * SRQ: the WQE at the SRQ's consumer index is taken at once: read whole,
//!   the SRQ's `ci` advanced and written to its record, the limit event
//!   checked. From then on it belongs to the QP ([`RecvCtx::from_srq`]):
//!   a message dropped before it completes leaves it in `Engine::held` for
//!   the QP's next message, and a flush completes it from there.
//!
//! The callers see one interface: [`State::recv_take`] (the WQE for a new
//! message), [`State::recv_ready`] and [`State::recv_imm`] (an RDMA WRITE
//! with immediate, which places no data in its WQE), [`State::recv_consumed`]
//! (it completes), [`State::recv_failed`] (it completes in error) and
//! [`Engine::recv_unused`] (the message is dropped, the WQE is kept).

use super::codes::{Credit, WcStatus};
use crate::device::State;
use crate::hw::*;
use crate::objects::Srq;

use super::{wqe_struct, CreditWatch, Engine, QpCtx, RecvCtx, RecvWqe, Segments, SgeList};

impl State {
    /// The producer index of the QP's RQ from its doorbell record (the
    /// last doorbell's if the record cannot be read).
    pub(super) fn rq_pi(&mut self, qp: &QpCtx) -> u16 {
        let mut b = [0u8; 4];
        if qp.rq_depth == 0 {
            return 0;
        }
        if self.mem.read(qp.rq_dbrec, &mut b).is_err() {
            self.counters.hw.bad_dma += 1;
            return self.qps.get(qp.qpn).map_or(0, |q| q.rq_pi);
        }
        u32::from_le_bytes(b) as u16
    }

    /// The WQEs posted to the QP's own RQ from `rq_ci` on; none if its
    /// record is more than `rq_depth` ahead (nothing is taken from it).
    fn rq_posted(&mut self, qp: &QpCtx, engine: &Engine) -> u32 {
        let n = u32::from(self.rq_pi(qp).wrapping_sub(engine.rq_ci));
        if n <= qp.rq_depth {
            n
        } else {
            0
        }
    }

    /// The credit count of the QP's next ACK (IBTA 9.7.7.2, device.rst
    /// "RC responder"): the WQEs posted to its own RQ and not consumed
    /// yet; no limit for a QP attached to an SRQ.
    pub(super) fn credit(&mut self, qp: &QpCtx, engine: &Engine) -> Credit {
        if qp.srqn != 0 {
            return Credit::UNLIMITED;
        }
        Credit::of_wqes(self.rq_posted(qp, engine))
    }

    /// [`Self::credit`] for an AETH with the ACK syndrome and MSN `msn`
    /// sent now. One that advertises no WQE for a message that consumed
    /// one starts a credit watch (or extends the one running); one that
    /// advertises WQEs ends it (device.rst "RC responder", credit
    /// updates).
    pub(super) fn ack_credit(&mut self, qp: &QpCtx, engine: &mut Engine, msn: u32) -> Credit {
        let credit = self.credit(qp, engine);
        let now = self.now_ns;
        match credit.wqes() {
            Some(0) if engine.consumed_msn == Some(msn) => match engine.credit_watch.as_mut() {
                Some(watch) => watch.until = now.saturating_add(super::CREDIT_WAIT_NS),
                None => {
                    let watch = CreditWatch::new(now);
                    self.arm(watch.next);
                    engine.credit_watch = Some(watch);
                }
            },
            Some(0) => {}
            _ => engine.credit_watch = None,
        }
        credit
    }

    /// Whether the QP's own RQ has a WQE posted at `rq_ci`.
    fn rq_available(&mut self, qp: &QpCtx, engine: &Engine) -> bool {
        self.rq_posted(qp, engine) != 0
    }

    /// The receive WQE for a new message of QP `qp`, if one is there: the
    /// one the QP holds, one taken from its SRQ, or the one at its RQ's
    /// consumer index (consumed by [`Self::recv_consumed`]). A WQE that
    /// cannot be read or is malformed comes back with its
    /// [`RecvWqe::error`]; it is the message's all the same.
    pub(super) fn recv_take(&mut self, qp: &QpCtx, engine: &mut Engine) -> Option<RecvCtx> {
        if qp.srqn != 0 {
            return engine.held.take().or_else(|| self.srq_take(qp));
        }
        if !self.rq_available(qp, engine) {
            return None;
        }
        let idx = engine.rq_ci;
        let wqe = self.with_wqe_buf(1usize << qp.rq_shift, |s, raw| {
            let read = s.wqe_read(qp.qpn, false, idx, raw);
            s.parse_recv_wqe(qp.pdn, read.then_some(&*raw))
        });
        Some(RecvCtx {
            idx,
            from_srq: false,
            wqe,
            off: 0,
        })
    }

    /// Whether a receive WQE is at hand for a new message without placing
    /// anything in it yet (an RDMA WRITE with immediate checks this before
    /// it writes). An SRQ QP takes the WQE now and holds it.
    pub(super) fn recv_ready(&mut self, qp: &QpCtx, engine: &mut Engine) -> bool {
        if qp.srqn == 0 {
            return qp.rq_depth != 0 && self.rq_available(qp, engine);
        }
        if engine.held.is_none() {
            engine.held = self.srq_take(qp);
        }
        engine.held.is_some()
    }

    /// Consumes the receive WQE of an RDMA WRITE with immediate, after
    /// [`Self::recv_ready`]: its `wr_id` and index. The WRITE placed no
    /// data in it, so its SGEs are not looked at (an RQ WQE's header alone
    /// is read).
    pub(super) fn recv_imm(&mut self, qp: &QpCtx, engine: &mut Engine) -> Option<(u64, u16)> {
        if qp.srqn != 0 {
            return self.recv_take(qp, engine).map(|r| (r.wqe.wr_id, r.idx));
        }
        let idx = engine.rq_ci;
        engine.rq_ci = idx.wrapping_add(1);
        engine.consumed_msn = Some(engine.msn);
        Some((self.recv_wr_id(qp.qpn, idx), idx))
    }

    /// The receive WQE `recv` completes (successfully or not): an RQ WQE is
    /// consumed; an SRQ WQE was when it was taken.
    pub(super) fn recv_consumed(engine: &mut Engine, recv: &RecvCtx) {
        if !recv.from_srq {
            engine.rq_ci = recv.idx.wrapping_add(1);
            engine.consumed_msn = Some(engine.msn);
        }
    }

    /// Receive WQE `recv` could not be used (a local error of the WQE itself):
    /// it is consumed and completes in error with `status`.
    pub(super) fn recv_failed(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        recv: &RecvCtx,
        status: WcStatus,
        src_qp: u32,
    ) {
        Self::recv_consumed(engine, recv);
        self.post_data_cqe(
            qp.recv_cqn,
            Cqe {
                wr_id: recv.wqe.wr_id,
                qpn: qp.qpn,
                src_qp,
                opcode: WC_RECV,
                status: status.to_hw(),
                wqe_idx: recv.idx,
                ..Cqe::zeroed()
            },
        );
    }

    /// Takes the WQE at the consumer index of QP `qp`'s SRQ if its record's
    /// `pi` shows one (`pi - ci` in 1..depth): reads it whole, advances
    /// `ci` and writes it to the record, and posts SRQ_LIMIT_REACHED once
    /// if fewer WQEs than the armed limit remain. A record that cannot be
    /// read, or a `pi` more than `depth` ahead, takes nothing. The ring
    /// (pages, depth) is the SRQ's of this moment: RESIZE_SRQ may have
    /// replaced it since the last take, and nothing of it is kept between
    /// takes.
    fn srq_take(&mut self, qp: &QpCtx) -> Option<RecvCtx> {
        let srqn = qp.srqn;
        let srq = self.srqs.get(srqn)?;
        let (dbrec, ci, depth) = (srq.dbrec, srq.ci, srq.depth);
        let mut b = [0u8; 4];
        if self.mem.read(Srq::pi_addr(dbrec), &mut b).is_err() {
            self.counters.hw.bad_dma += 1;
            return None;
        }
        let pi = u32::from_le_bytes(b) as u16;
        let n = u32::from(pi.wrapping_sub(ci));
        if n == 0 || n > depth {
            return None;
        }
        let off = u64::from(u32::from(ci) & (depth - 1)) << srq.wqe_shift;
        let (len, page_shift) = (1usize << srq.wqe_shift, srq.page_shift);
        let wqe = self.with_wqe_buf(len, |s, raw| {
            let read = s
                .srqs
                .get(srqn)
                .is_some_and(|srq| s.pages_read(&srq.pages, page_shift, off, raw));
            s.parse_recv_wqe(qp.pdn, read.then_some(&*raw))
        });
        let next = ci.wrapping_add(1);
        let srq = self.srqs.get_mut(srqn)?;
        srq.ci = next;
        srq.taken += 1;
        // `n - 1` WQEs remain after this one.
        let limit = srq.limit;
        let fire = limit != 0 && n - 1 < limit;
        if fire {
            srq.limit = 0;
            srq.limit_events += 1;
        }
        if self
            .mem
            .write(Srq::ci_addr(dbrec), &u32::from(next).to_le_bytes())
            .is_err()
        {
            self.counters.hw.bad_dma += 1;
        }
        if fire {
            self.post_async(EQE_SRQ_LIMIT_REACHED, srqn, limit, 0);
        }
        Some(RecvCtx {
            idx: ci,
            from_srq: true,
            wqe,
            off: 0,
        })
    }

    /// Decodes and translates a receive WQE read from a ring (`None`: it
    /// could not be read). Its error, if any: LOC_QP_OP_ERR unreadable,
    /// LOC_LEN_ERR more SGEs than its stride or `max_sge` hold,
    /// LOC_PROT_ERR an SGE refused.
    fn parse_recv_wqe(&mut self, pdn: u32, raw: Option<&[u8]>) -> RecvWqe {
        let mut wqe = RecvWqe {
            wr_id: 0,
            sges: SgeList::new(),
            segs: Segments::default(),
            epoch: self.mr_epoch,
            cap: 0,
            error: None,
        };
        let Some(raw) = raw else {
            self.counters.hw.bad_dma += 1;
            wqe.error = Some(WcStatus::LocQpOpErr);
            return wqe;
        };
        let Some(hdr) = wqe_struct::<RqWqeHdr>(raw, 0) else {
            wqe.error = Some(WcStatus::LocQpOpErr);
            return wqe;
        };
        wqe.wr_id = hdr.wr_id;
        let num_sge = usize::from(hdr.num_sge);
        let sge_size = core::mem::size_of::<Sge>();
        if RQ_WQE_DATA_OFFSET + num_sge * sge_size > raw.len()
            || num_sge > self.cfg.limits.max_sge as usize
        {
            wqe.error = Some(WcStatus::LocLenErr);
            return wqe;
        }
        let Some(sges) = (0..num_sge)
            .map(|i| wqe_struct::<Sge>(raw, RQ_WQE_DATA_OFFSET + i * sge_size))
            .collect::<Option<SgeList>>()
        else {
            wqe.error = Some(WcStatus::LocLenErr);
            return wqe;
        };
        let Some(segs) = self.translate_sges(pdn, &sges, ACCESS_LOCAL_WRITE) else {
            wqe.error = Some(WcStatus::LocProtErr);
            return wqe;
        };
        wqe.cap = sges
            .iter()
            .fold(0u64, |cap, sge| cap.saturating_add(u64::from(sge.length)));
        wqe.sges = sges;
        wqe.segs = Segments::new(segs);
        wqe
    }
}

impl Engine {
    /// The message receive WQE `recv` was taken for is dropped before it
    /// completes: an RQ WQE stays posted (`rq_ci` did not move), an SRQ WQE
    /// stays with the QP for its next message.
    pub(super) fn recv_unused(&mut self, recv: RecvCtx) {
        if recv.from_srq {
            self.held = Some(RecvCtx { off: 0, ..recv });
        }
    }

    /// The message under way is dropped: its receive WQE, if it has one,
    /// is kept as [`Self::recv_unused`] says.
    pub(super) fn abandon_recv(&mut self) {
        if let Some(recv) = self.recv.take() {
            self.recv_unused(recv);
        }
    }
}
