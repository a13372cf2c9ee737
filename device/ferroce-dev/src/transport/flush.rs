// SPDX-License-Identifier: GPL-2.0
//! The error path: a QP that fails or is moved to ERR completes what is
//! outstanding and flushes both queues with `WR_FLUSH_ERR` (IBTA 10.3.1,
//! rxe `rxe_qp_error` and the flush in `rxe_comp.c`/`rxe_resp.c`). A QP
//! attached to an SRQ flushes only the receive WQE it took, never the
//! SRQ, and posts QP_LAST_WQE_REACHED.

use super::codes::WcStatus;
use crate::device::State;
use crate::hw::*;
use zerocopy::FromZeros;

use super::{wc_opcode, Engine, QpCtx, SendWqe};

impl State {
    /// Moves the QP to ERR (posting QP_FATAL), completes the head send WQE
    /// with `head_status` if given, and flushes everything else.
    pub(super) fn qp_fail(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        head_status: Option<WcStatus>,
    ) {
        if let Some(q) = self.qps.get_mut(qp.qpn) {
            if q.state == QPS_ERR {
                return;
            }
            q.state = QPS_ERR;
            q.attr.qp_state = QPS_ERR;
            q.attr.cur_qp_state = QPS_ERR;
        }
        self.post_async(EQE_QP_FATAL, qp.qpn, 0, 0);
        self.flush_all(qp, engine, head_status);
    }

    /// The head send WQE failed locally with `status`: an RC QP enters
    /// ERR (flushing both queues), a UC QP enters SQE as a UD QP does.
    pub(super) fn requester_failed(&mut self, qp: &QpCtx, engine: &mut Engine, status: WcStatus) {
        if !qp.uc() {
            self.qp_fail(qp, engine, Some(status));
        } else if let Some(wqe) = engine.inflight.pop_front() {
            engine.sq_ci = wqe.idx.wrapping_add(1);
            self.send_queue_error(qp, engine, &wqe, status);
        }
    }

    /// Send WQE `wqe` (taken off the SQ) of a UD, GSI or UC QP failed
    /// locally: it completes with `status`, the QP goes to SQE and the WQEs
    /// after it are flushed (IBTA 10.3.1 and 10.8.3.3; rxe moves the QP out
    /// of RTS on a requester error too). The receive queue goes on.
    pub(super) fn send_queue_error(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        wqe: &SendWqe,
        status: WcStatus,
    ) {
        self.complete_send(qp, wqe, status);
        if let Some(q) = self.qps.get_mut(qp.qpn) {
            q.state = QPS_SQE;
            q.attr.qp_state = QPS_SQE;
            q.attr.cur_qp_state = QPS_SQE;
        }
        while let Some(later) = engine.inflight.pop_front() {
            engine.sq_ci = later.idx.wrapping_add(1);
            self.complete_send(qp, &later, WcStatus::WrFlushErr);
        }
        self.flush_sq_posted(qp, engine);
    }

    pub(super) fn flush_all(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        head_status: Option<WcStatus>,
    ) {
        let mut first = head_status;
        while let Some(wqe) = engine.inflight.pop_front() {
            let st = first.take().unwrap_or(WcStatus::WrFlushErr);
            self.complete_send(qp, &wqe, st);
            engine.sq_ci = wqe.idx.wrapping_add(1);
        }
        engine.sq_next = engine.sq_ci;
        engine.timer = None;
        engine.rnr_wait = None;
        self.flush_sq_posted(qp, engine);
        self.flush_recv(qp, engine);
        engine.write = None;
        engine.reads.clear();
    }

    /// Flushes SQ WQEs posted but not fetched (up to the last doorbell).
    pub(super) fn flush_sq_posted(&mut self, qp: &QpCtx, engine: &mut Engine) {
        let pi = self.qps.get(qp.qpn).map_or(engine.sq_next, |q| q.sq_pi);
        let mut n = 0u32;
        while engine.sq_next != pi && n < qp.sq_depth {
            let idx = engine.sq_next;
            let hdr = self
                .wqe_header::<SqWqeHdr>(qp.qpn, true, idx)
                .unwrap_or_else(SqWqeHdr::new_zeroed);
            self.post_data_cqe(
                qp.send_cqn,
                Cqe {
                    wr_id: hdr.wr_id,
                    qpn: qp.qpn,
                    opcode: wc_opcode(hdr.opcode),
                    status: WcStatus::WrFlushErr.to_hw(),
                    wqe_idx: idx,
                    ..Cqe::zeroed()
                },
            );
            engine.sq_next = idx.wrapping_add(1);
            n += 1;
        }
        engine.sq_ci = engine.sq_next;
        engine.sq_flushed = engine.sq_next;
    }

    /// Flushes the receive side of a QP entering ERR. Own RQ: every WQE
    /// posted, the one of a message under way included. SRQ: the WQE the
    /// QP took (for a message under way, or held for its next), then
    /// QP_LAST_WQE_REACHED (IBTA 10.3.1, 11.6.3.1: no receive completion
    /// comes from the QP any more); the SRQ's WQEs stay for the other QPs.
    fn flush_recv(&mut self, qp: &QpCtx, engine: &mut Engine) {
        if qp.srqn == 0 {
            self.flush_rq(qp, engine);
            engine.recv = None;
            return;
        }
        for recv in [engine.recv.take(), engine.held.take()]
            .into_iter()
            .flatten()
        {
            self.post_data_cqe(
                qp.recv_cqn,
                Cqe {
                    wr_id: recv.wqe.wr_id,
                    qpn: qp.qpn,
                    opcode: WC_RECV,
                    status: WcStatus::WrFlushErr.to_hw(),
                    wqe_idx: recv.idx,
                    ..Cqe::zeroed()
                },
            );
        }
        self.post_async(EQE_QP_LAST_WQE_REACHED, qp.qpn, 0, 0);
    }

    pub(super) fn flush_rq(&mut self, qp: &QpCtx, engine: &mut Engine) {
        if qp.rq_depth == 0 {
            return;
        }
        let pi = self.rq_pi(qp);
        if u32::from(pi.wrapping_sub(engine.rq_ci)) > qp.rq_depth {
            return;
        }
        while engine.rq_ci != pi {
            let wr_id = self.recv_wr_id(qp.qpn, engine.rq_ci);
            self.post_data_cqe(
                qp.recv_cqn,
                Cqe {
                    wr_id,
                    qpn: qp.qpn,
                    opcode: WC_RECV,
                    status: WcStatus::WrFlushErr.to_hw(),
                    wqe_idx: engine.rq_ci,
                    ..Cqe::zeroed()
                },
            );
            engine.rq_ci = engine.rq_ci.wrapping_add(1);
        }
    }

    /// RQ doorbell: in ERR, flushes the new receive WQEs.
    pub(crate) fn rq_progress(&mut self, qpn: u32) {
        self.with_engine(qpn, |st, qp, engine| {
            if qp.state == QPS_ERR {
                st.flush_rq(qp, engine);
            }
        });
    }
}
