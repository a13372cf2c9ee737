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
    pub(super) fn qp_fail(&mut self, c: &QpCtx, e: &mut Engine, head_status: Option<WcStatus>) {
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

    /// The head send WQE failed locally with `status`: an RC QP enters
    /// ERR (flushing both queues), a UC QP enters SQE as a UD QP does.
    pub(super) fn requester_failed(&mut self, c: &QpCtx, e: &mut Engine, status: WcStatus) {
        if !c.uc() {
            self.qp_fail(c, e, Some(status));
        } else if let Some(w) = e.inflight.pop_front() {
            e.sq_ci = w.idx.wrapping_add(1);
            self.send_queue_error(c, e, &w, status);
        }
    }

    /// Send WQE `w` (taken off the SQ) of a UD, GSI or UC QP failed
    /// locally: it completes with `status`, the QP goes to SQE and the WQEs
    /// after it are flushed (IBTA 10.3.1 and 10.8.3.3; rxe moves the QP out
    /// of RTS on a requester error too). The receive queue goes on.
    pub(super) fn send_queue_error(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        w: &SendWqe,
        status: WcStatus,
    ) {
        self.complete_send(c, w, status);
        if let Some(q) = self.qps.get_mut(c.qpn) {
            q.state = QPS_SQE;
            q.attr.qp_state = QPS_SQE;
            q.attr.cur_qp_state = QPS_SQE;
        }
        while let Some(later) = e.inflight.pop_front() {
            e.sq_ci = later.idx.wrapping_add(1);
            self.complete_send(c, &later, WcStatus::WrFlushErr);
        }
        self.flush_sq_posted(c, e);
    }

    pub(super) fn flush_all(&mut self, c: &QpCtx, e: &mut Engine, head_status: Option<WcStatus>) {
        let mut first = head_status;
        while let Some(w) = e.inflight.pop_front() {
            let st = first.take().unwrap_or(WcStatus::WrFlushErr);
            self.complete_send(c, &w, st);
            e.sq_ci = w.idx.wrapping_add(1);
        }
        e.sq_next = e.sq_ci;
        e.timer = None;
        e.rnr_wait = None;
        self.flush_sq_posted(c, e);
        self.flush_recv(c, e);
        e.write = None;
        e.reads.clear();
    }

    /// Flushes SQ WQEs posted but not fetched (up to the last doorbell).
    pub(super) fn flush_sq_posted(&mut self, c: &QpCtx, e: &mut Engine) {
        let pi = self.qps.get(c.qpn).map_or(e.sq_next, |q| q.sq_pi);
        let mut n = 0u32;
        while e.sq_next != pi && n < c.sq_depth {
            let idx = e.sq_next;
            let hdr = self
                .wqe_header::<SqWqeHdr>(c.qpn, true, idx)
                .unwrap_or_else(SqWqeHdr::new_zeroed);
            self.post_data_cqe(
                c.send_cqn,
                Cqe {
                    wr_id: hdr.wr_id,
                    qpn: c.qpn,
                    opcode: wc_opcode(hdr.opcode),
                    status: WcStatus::WrFlushErr.to_hw(),
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

    /// Flushes the receive side of a QP entering ERR. Own RQ: every WQE
    /// posted, the one of a message under way included. SRQ: the WQE the
    /// QP took (for a message under way, or held for its next), then
    /// QP_LAST_WQE_REACHED (IBTA 10.3.1, 11.6.3.1: no receive completion
    /// comes from the QP any more); the SRQ's WQEs stay for the other QPs.
    fn flush_recv(&mut self, c: &QpCtx, e: &mut Engine) {
        if c.srqn == 0 {
            self.flush_rq(c, e);
            e.recv = None;
            return;
        }
        for r in [e.recv.take(), e.held.take()].into_iter().flatten() {
            self.post_data_cqe(
                c.recv_cqn,
                Cqe {
                    wr_id: r.wqe.wr_id,
                    qpn: c.qpn,
                    opcode: WC_RECV,
                    status: WcStatus::WrFlushErr.to_hw(),
                    wqe_idx: r.idx,
                    ..Cqe::zeroed()
                },
            );
        }
        self.post_async(EQE_QP_LAST_WQE_REACHED, c.qpn, 0, 0);
    }

    pub(super) fn flush_rq(&mut self, c: &QpCtx, e: &mut Engine) {
        if c.rq_depth == 0 {
            return;
        }
        let pi = self.rq_pi(c);
        if u32::from(pi.wrapping_sub(e.rq_ci)) > c.rq_depth {
            return;
        }
        while e.rq_ci != pi {
            let wr_id = self.recv_wr_id(c.qpn, e.rq_ci);
            self.post_data_cqe(
                c.recv_cqn,
                Cqe {
                    wr_id,
                    qpn: c.qpn,
                    opcode: WC_RECV,
                    status: WcStatus::WrFlushErr.to_hw(),
                    wqe_idx: e.rq_ci,
                    ..Cqe::zeroed()
                },
            );
            e.rq_ci = e.rq_ci.wrapping_add(1);
        }
    }

    /// RQ doorbell: in ERR, flushes the new receive WQEs.
    pub(crate) fn rq_progress(&mut self, qpn: u32) {
        self.with_engine(qpn, |st, c, e| {
            if c.state == QPS_ERR {
                st.flush_rq(c, e);
            }
        });
    }
}
