// SPDX-License-Identifier: GPL-2.0
//! The completer (rxe `rxe_comp.c`): ACKs, NAKs, READ responses (1.8:
//! also the zero-length ones that answer ATOMIC_WRITE and FLUSH) and
//! ATOMIC_ACKNOWLEDGEs, send completions, retransmission and RNR timers,
//! retries.

use super::codes::{Syndrome, WcStatus};
use crate::device::State;
use crate::hw::*;
use crate::wire::{op, psn_add, psn_diff, Packet};

use super::{ack_timeout_ns, rnr_delay_ns, wc_opcode, Engine, QpCtx, SendWqe, WINDOW};

/// Which retry budget of an RC requester ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exhausted {
    /// `retry_cnt`: ACK timeouts (or PSN sequence error NAKs).
    AckRetries,
    /// `rnr_retry`: RNR NAKs.
    RnrRetries,
}

impl Exhausted {
    fn status(self) -> WcStatus {
        match self {
            Self::AckRetries => WcStatus::RetryExcErr,
            Self::RnrRetries => WcStatus::RnrRetryExcErr,
        }
    }

    /// `data` of the QP_RETRY_EXCEEDED event.
    fn event_data(self) -> u32 {
        match self {
            Self::AckRetries => 0,
            Self::RnrRetries => 1,
        }
    }
}

impl State {
    /// Posts the send CQE of `w` with `status` (a success only if it is
    /// signaled); counts the binds that failed.
    pub(super) fn complete_send(&mut self, c: &QpCtx, w: &SendWqe, status: WcStatus) {
        if status == WcStatus::MwBindErr {
            self.data.mw_bind_errors += 1;
        }
        let sig = w.signaled || c.flags & QP_FLAG_SQ_SIG_ALL != 0;
        if status == WcStatus::Success && !sig {
            return;
        }
        let byte_len = if w.awaits_response() { w.len as u32 } else { 0 };
        self.post_data_cqe(
            c.send_cqn,
            Cqe {
                wr_id: w.wr_id,
                byte_len,
                qpn: c.qpn,
                opcode: wc_opcode(w.opcode),
                status: status.to_hw(),
                wqe_idx: w.idx,
                ..Cqe::zeroed()
            },
        );
    }

    /// The head WQE ran out of retries: posts QP_RETRY_EXCEEDED (1.3, so the
    /// driver can tell the administrator why the path is dead) once for the
    /// WQE about to complete with the matching status, then fails the QP.
    /// The event goes out before the CQE, so a consumer that saw the CQE
    /// finds the event already in the AEQ.
    fn retries_exceeded(&mut self, c: &QpCtx, e: &mut Engine, why: Exhausted) {
        let failing = self.qps.get(c.qpn).is_some_and(|q| q.state != QPS_ERR);
        if failing && !e.inflight.is_empty() {
            self.post_async(EQE_QP_RETRY_EXCEEDED, c.qpn, why.event_data(), 0);
            match why {
                Exhausted::AckRetries => self.data.retry_exceeded += 1,
                Exhausted::RnrRetries => self.data.rnr_retry_exceeded += 1,
            }
        }
        self.qp_fail(c, e, Some(why.status()));
    }

    /// Go-back-N: retransmit everything from `psn` on.
    pub(super) fn rewind(&mut self, e: &mut Engine, psn: u32) {
        self.data.retransmits += 1;
        e.last_rewind = Some(psn);
        for w in e.inflight.iter_mut() {
            let end = psn_add(w.first_psn, w.npkts);
            if psn_diff(end, psn) <= 0 {
                continue;
            }
            if w.awaits_response() {
                w.sent = 0;
            } else {
                let d = psn_diff(psn, w.first_psn).max(0) as u32;
                w.sent = w.sent.min(d);
            }
        }
        e.timer = None;
    }

    /// Retires completed WQEs from the head, executes a local operation
    /// (REG_MR, LOCAL_INV, BIND_MW) that reached the head and reports a
    /// local error that did. True if a local operation executed.
    pub(super) fn complete_head(&mut self, c: &QpCtx, e: &mut Engine) -> bool {
        let mut executed = false;
        while let Some(w) = e.inflight.front() {
            if let Some(st) = w.error {
                self.requester_failed(c, e, st);
                return executed;
            }
            if let Some(local) = w.local {
                if self.execute_local_op(c, &local).is_err() {
                    self.qp_fail(c, e, Some(local.failure_status()));
                    return executed;
                }
                executed = true;
                self.retire_head(c, e);
                continue;
            }
            let done = if c.uc() {
                // UC: complete once its last packet went out.
                w.sent >= w.npkts
            } else if w.awaits_response() {
                w.read_rcvd >= w.npkts
            } else {
                w.sent >= w.npkts && psn_diff(e.una, psn_add(w.first_psn, w.npkts)) >= 0
            };
            if !done {
                break;
            }
            self.retire_head(c, e);
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

    /// Completes the SQ's oldest WQE successfully and drops it (it is
    /// completed where it lies, not moved out first).
    fn retire_head(&mut self, c: &QpCtx, e: &mut Engine) {
        if let Some(w) = e.inflight.front() {
            e.sq_ci = w.idx.wrapping_add(1);
            self.complete_send(c, w, WcStatus::Success);
        }
        e.inflight.pop_front();
    }

    pub(super) fn progress_made(&mut self, c: &QpCtx, e: &mut Engine) {
        e.retry_left = c.attr.retry_cnt;
        e.rnr_left = c.attr.rnr_retry;
        e.last_rewind = None;
        e.timer = ack_timeout_ns(c.attr.timeout).map(|t| self.now_ns.saturating_add(t));
    }

    /// Marks PSNs before `psn` (exclusive) acknowledged.
    pub(super) fn ack_before(&mut self, c: &QpCtx, e: &mut Engine, mut psn: u32) {
        // Nothing past an incomplete READ counts as acknowledged: its
        // responses are the acknowledgement (an ACK beyond it is an implied NAK).
        if let Some(w) = e
            .inflight
            .iter()
            .find(|w| w.awaits_response() && w.read_rcvd < w.npkts)
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
    pub(super) fn rc_response(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        let psn = p.bth.psn;
        // Outside [una - WINDOW, next_psn): stale or bogus.
        if psn_diff(psn, e.next_psn) >= 0 || psn_diff(psn, e.una) < -WINDOW {
            self.data.stale_responses += 1;
            return;
        }
        match p.bth.opcode {
            op::RC_ACK => {
                // A NAK names the PSN that failed: one behind `una` was
                // already acted on (a duplicate or a stale NAK, IBTA
                // 9.7.5.1.1; rxe `check_psn`). An ACK behind `una` is old.
                if psn_diff(psn, e.una) < 0 {
                    self.data.stale_responses += 1;
                    return;
                }
                match Syndrome::from_wire(p.aeth.syndrome) {
                    Syndrome::Ack => {
                        self.ack_before(c, e, psn_add(psn, 1));
                        // An ACK beyond an incomplete READ: its responses were lost.
                        let mut implied = None;
                        for w in &e.inflight {
                            if w.awaits_response() && w.read_rcvd < w.npkts {
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
                    Syndrome::RnrNak(_) | Syndrome::Nak(_) if e.lost_read_before(psn).is_some() => {
                        self.ack_before(c, e, psn);
                        if let Some(r) = e.lost_read_before(psn) {
                            if e.last_rewind != Some(r) {
                                self.rewind(e, r);
                            }
                        }
                    }
                    Syndrome::RnrNak(timer) => {
                        self.data.rnr_naks_rcvd += 1;
                        self.ack_before(c, e, psn);
                        self.complete_head(c, e);
                        if e.inflight.is_empty() {
                            return;
                        }
                        if e.rnr_left == 0 {
                            self.retries_exceeded(c, e, Exhausted::RnrRetries);
                            return;
                        }
                        if e.rnr_left != 7 {
                            e.rnr_left -= 1;
                        }
                        e.timer = None;
                        e.rnr_wait = Some((self.now_ns.saturating_add(rnr_delay_ns(timer)), psn));
                        // Nothing more goes out until the RNR timer expires.
                        for w in e.inflight.iter_mut() {
                            let end = psn_add(w.first_psn, w.npkts);
                            if psn_diff(end, psn) > 0 {
                                w.sent = if w.awaits_response() {
                                    0
                                } else {
                                    w.sent.min(psn_diff(psn, w.first_psn).max(0) as u32)
                                };
                            }
                        }
                        return;
                    }
                    Syndrome::Nak(code) => {
                        self.ack_before(c, e, psn);
                        self.complete_head(c, e);
                        // Only a PSN sequence error is retried; every other
                        // NAK completes the WQE in error (rxe `check_ack`).
                        if let Some(status) = code.completion_status() {
                            self.qp_fail(c, e, Some(status));
                            return;
                        }
                        self.data.seq_naks_rcvd += 1;
                        // The responder's answer to the packets that
                        // followed one it RNR NAKed names that packet's
                        // PSN: the RNR wait resends from there already.
                        let rnr_gap = e.rnr_wait.is_some_and(|(_, p)| p == psn);
                        // Else a retry like a timeout's: it consumes one of
                        // retry_cnt (rxe COMPST_ERROR_RETRY).
                        if !rnr_gap && e.last_rewind != Some(psn) && !e.inflight.is_empty() {
                            if e.retry_left == 0 {
                                self.retries_exceeded(c, e, Exhausted::AckRetries);
                                return;
                            }
                            e.retry_left -= 1;
                            self.data.ack_retries += 1;
                            self.rewind(e, psn);
                        }
                    }
                    Syndrome::Reserved(_) => {
                        self.data.stale_responses += 1;
                        return;
                    }
                }
            }
            op::RC_READ_RESPONSE_FIRST
            | op::RC_READ_RESPONSE_MIDDLE
            | op::RC_READ_RESPONSE_LAST
            | op::RC_READ_RESPONSE_ONLY => {
                if !self.read_response(c, e, p) {
                    return;
                }
            }
            op::RC_ATOMIC_ACK => {
                if !self.atomic_ack(c, e, p) {
                    return;
                }
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

    /// The oldest in-flight WQE still awaiting response packets (a READ,
    /// an atomic, or (1.8) an ATOMIC_WRITE or FLUSH); `None` counts the
    /// response that arrived as stale.
    fn awaiting_response(&mut self, e: &Engine) -> Option<usize> {
        let i = e
            .inflight
            .iter()
            .position(|w| w.awaits_response() && w.read_rcvd < w.npkts);
        if i.is_none() {
            self.data.stale_responses += 1;
        }
        i
    }

    /// A READ response for the oldest WQE awaiting responses: a READ's
    /// data goes to its SGEs; (1.8) an ATOMIC_WRITE or FLUSH takes one
    /// zero-length RDMA_READ_RESPONSE_ONLY with an ACK syndrome for its PSN
    /// (device.rst "Atomic write and flush"). False if it answers nothing
    /// outstanding (stale, counted; one beyond the expected PSN rewinds
    /// to it: the responses before were lost) or the QP failed.
    fn read_response(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> bool {
        let psn = p.bth.psn;
        let Some(i) = self.awaiting_response(e) else {
            return false;
        };
        let w = &e.inflight[i];
        if w.is_atomic() {
            // The oldest outstanding response is an ATOMIC_ACKNOWLEDGE.
            self.data.stale_responses += 1;
            return false;
        }
        let exp = psn_add(w.first_psn, w.read_rcvd);
        if psn != exp {
            self.data.stale_responses += 1;
            if psn_diff(psn, exp) > 0 && w.sent >= w.npkts && e.last_rewind != Some(exp) {
                self.rewind(e, exp);
                self.fetch_and_send(c, e);
            }
            return false;
        }
        if w.is_placement() {
            let answer = p.bth.opcode == op::RC_READ_RESPONSE_ONLY
                && p.payload.is_empty()
                && Syndrome::from_wire(p.aeth.syndrome) == Syndrome::Ack;
            if !answer {
                self.data.stale_responses += 1;
                return false;
            }
        } else {
            let off = u64::from(w.read_rcvd) * w.mtu;
            let want = (w.len - off.min(w.len)).min(w.mtu) as usize;
            let last = w.read_rcvd + 1 == w.npkts;
            let op_ok = match p.bth.opcode {
                op::RC_READ_RESPONSE_ONLY | op::RC_READ_RESPONSE_LAST => last,
                _ => !last,
            };
            if p.payload.len() != want || !op_ok {
                self.data.stale_responses += 1;
                return false;
            }
            let fresh = self.refresh_send_segs(c.pdn, &mut e.inflight[i]);
            let ok = fresh && self.scatter(&mut e.inflight[i].segs, off, p.payload);
            if !ok {
                self.qp_fail(c, e, Some(WcStatus::LocProtErr));
                return false;
            }
        }
        e.inflight[i].read_rcvd += 1;
        if psn_diff(psn_add(psn, 1), e.una) > 0 {
            e.una = psn_add(psn, 1);
        }
        self.progress_made(c, e);
        true
    }

    /// An ATOMIC_ACKNOWLEDGE: the original value goes to the atomic's
    /// local SGE (8 bytes, little-endian as the remote word). False if it
    /// answers no outstanding atomic (stale, counted) or the QP failed.
    fn atomic_ack(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) -> bool {
        let psn = p.bth.psn;
        let Some(i) = self.awaiting_response(e) else {
            return false;
        };
        let w = &e.inflight[i];
        if !w.is_atomic()
            || psn != w.first_psn
            || Syndrome::from_wire(p.aeth.syndrome) != Syndrome::Ack
        {
            self.data.stale_responses += 1;
            return false;
        }
        let fresh = self.refresh_send_segs(c.pdn, &mut e.inflight[i]);
        let ok = fresh && self.scatter(&mut e.inflight[i].segs, 0, &p.atomic_ack.to_le_bytes());
        if !ok {
            self.qp_fail(c, e, Some(WcStatus::LocProtErr));
            return false;
        }
        e.inflight[i].read_rcvd = 1;
        if psn_diff(psn_add(psn, 1), e.una) > 0 {
            e.una = psn_add(psn, 1);
        }
        self.progress_made(c, e);
        true
    }

    /// Timers of every QP at the current time.
    pub(crate) fn run_timers(&mut self) {
        if self.faults.stalled {
            return;
        }
        let now = self.now_ns;
        let due: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, qp)| {
                qp.engine
                    .get()
                    .and_then(Engine::next_deadline)
                    .is_some_and(|t| t <= now)
            })
            .map(|(qpn, _)| qpn)
            .collect();
        for qpn in due {
            self.with_engine(qpn, |st, c, e| st.timers_expired(c, e, now));
        }
    }

    /// The retransmission or RNR timer of one QP expired at `now`.
    fn timers_expired(&mut self, c: &QpCtx, e: &mut Engine, now: u64) {
        if c.state != QPS_RTS && c.state != QPS_SQD {
            e.timer = None;
            e.rnr_wait = None;
        } else if let Some((t, psn)) = e.rnr_wait {
            if t <= now {
                e.rnr_wait = None;
                self.rewind(e, psn);
                self.fetch_and_send(c, e);
            }
        } else if e.timer.is_some_and(|t| t <= now) {
            e.timer = None;
            self.data.timeouts += 1;
            if e.inflight.is_empty() {
                // nothing outstanding
            } else if e.retry_left == 0 {
                self.retries_exceeded(c, e, Exhausted::AckRetries);
            } else {
                e.retry_left -= 1;
                self.data.ack_retries += 1;
                let una = e.una;
                self.rewind(e, una);
                self.fetch_and_send(c, e);
            }
        }
    }
}
