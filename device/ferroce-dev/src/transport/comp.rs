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
    /// Posts the send CQE of `wqe` with `status` (a success only if it is
    /// signaled); counts the binds that failed.
    pub(super) fn complete_send(&mut self, qp: &QpCtx, wqe: &SendWqe, status: WcStatus) {
        if status == WcStatus::MwBindErr {
            self.data.mw_bind_errors += 1;
        }
        let sig = wqe.signaled || qp.flags & QP_FLAG_SQ_SIG_ALL != 0;
        if status == WcStatus::Success && !sig {
            return;
        }
        let byte_len = if wqe.awaits_response() {
            wqe.len as u32
        } else {
            0
        };
        self.post_data_cqe(
            qp.send_cqn,
            Cqe {
                wr_id: wqe.wr_id,
                byte_len,
                qpn: qp.qpn,
                opcode: wc_opcode(wqe.opcode),
                status: status.to_hw(),
                wqe_idx: wqe.idx,
                ..Cqe::zeroed()
            },
        );
    }

    /// The head WQE ran out of retries: posts QP_RETRY_EXCEEDED (1.3, so the
    /// driver can tell the administrator why the path is dead) once for the
    /// WQE about to complete with the matching status, then fails the QP.
    /// The event goes out before the CQE, so a consumer that saw the CQE
    /// finds the event already in the AEQ.
    fn retries_exceeded(&mut self, qp: &QpCtx, engine: &mut Engine, why: Exhausted) {
        let failing = self.qps.get(qp.qpn).is_some_and(|q| q.state != QPS_ERR);
        if failing && !engine.inflight.is_empty() {
            self.post_async(EQE_QP_RETRY_EXCEEDED, qp.qpn, why.event_data(), 0);
            match why {
                Exhausted::AckRetries => self.data.retry_exceeded += 1,
                Exhausted::RnrRetries => self.data.rnr_retry_exceeded += 1,
            }
        }
        self.qp_fail(qp, engine, Some(why.status()));
    }

    /// Go-back-N: retransmit everything from `psn` on.
    pub(super) fn rewind(&mut self, engine: &mut Engine, psn: u32) {
        self.data.retransmits += 1;
        engine.last_rewind = Some(psn);
        for wqe in engine.inflight.iter_mut() {
            let end = psn_add(wqe.first_psn, wqe.npkts);
            if psn_diff(end, psn) <= 0 {
                continue;
            }
            if wqe.awaits_response() {
                wqe.sent = 0;
            } else {
                let d = psn_diff(psn, wqe.first_psn).max(0) as u32;
                wqe.sent = wqe.sent.min(d);
            }
        }
        engine.timer = None;
    }

    /// Retires completed WQEs from the head, executes a local operation
    /// (REG_MR, LOCAL_INV, BIND_MW) that reached the head and reports a
    /// local error that did. True if a local operation executed.
    pub(super) fn complete_head(&mut self, qp: &QpCtx, engine: &mut Engine) -> bool {
        let mut executed = false;
        while let Some(wqe) = engine.inflight.front() {
            if let Some(st) = wqe.error {
                self.requester_failed(qp, engine, st);
                return executed;
            }
            if let Some(local) = wqe.local {
                if self.execute_local_op(qp, &local).is_err() {
                    self.qp_fail(qp, engine, Some(local.failure_status()));
                    return executed;
                }
                executed = true;
                self.retire_head(qp, engine);
                continue;
            }
            let done = if qp.uc() {
                // UC: complete once its last packet went out.
                wqe.sent >= wqe.npkts
            } else if wqe.awaits_response() {
                wqe.read_rcvd >= wqe.npkts
            } else {
                wqe.sent >= wqe.npkts
                    && psn_diff(engine.una, psn_add(wqe.first_psn, wqe.npkts)) >= 0
            };
            if !done {
                break;
            }
            self.retire_head(qp, engine);
        }
        if !engine.on_wire() {
            engine.timer = None;
        }
        if engine.inflight.is_empty() && engine.drain_notify && qp.state == QPS_SQD {
            engine.drain_notify = false;
            self.post_async(EQE_QP_SQ_DRAINED, qp.qpn, 0, 0);
        }
        executed
    }

    /// Completes the SQ's oldest WQE successfully and drops it (it is
    /// completed where it lies, not moved out first).
    fn retire_head(&mut self, qp: &QpCtx, engine: &mut Engine) {
        if let Some(wqe) = engine.inflight.front() {
            engine.sq_ci = wqe.idx.wrapping_add(1);
            self.complete_send(qp, wqe, WcStatus::Success);
        }
        engine.inflight.pop_front();
    }

    pub(super) fn progress_made(&mut self, qp: &QpCtx, engine: &mut Engine) {
        engine.retry_left = qp.attr.retry_cnt;
        engine.rnr_left = qp.attr.rnr_retry;
        engine.last_rewind = None;
        self.start_ack_timer(qp, engine);
    }

    /// (Re)starts the QP's retransmission timer (none if its `timeout` is
    /// 0), armed for the engine thread ([`State::arm`]); stops it if no
    /// packet that went on the wire is unacknowledged (a message held back
    /// for credits has sent nothing).
    pub(super) fn start_ack_timer(&mut self, qp: &QpCtx, engine: &mut Engine) {
        if !engine.on_wire() {
            engine.timer = None;
            return;
        }
        engine.timer = ack_timeout_ns(qp.attr.timeout).map(|t| self.now_ns.saturating_add(t));
        if let Some(t) = engine.timer {
            self.arm(t);
        }
    }

    /// Marks PSNs before `psn` (exclusive) acknowledged.
    pub(super) fn ack_before(&mut self, qp: &QpCtx, engine: &mut Engine, mut psn: u32) {
        // Nothing past an incomplete READ counts as acknowledged: its
        // responses are the acknowledgement (an ACK beyond it is an implied NAK).
        if let Some(wqe) = engine
            .inflight
            .iter()
            .find(|w| w.awaits_response() && w.read_rcvd < w.npkts)
        {
            let exp = psn_add(wqe.first_psn, wqe.read_rcvd);
            if psn_diff(psn, exp) > 0 {
                psn = exp;
            }
        }
        if psn_diff(psn, engine.una) > 0 && psn_diff(psn, engine.next_psn) <= 0 {
            engine.una = psn;
            self.progress_made(qp, engine);
        }
    }

    /// The completer: ACK, NAK or read response for QP `qp`.
    pub(super) fn rc_response(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) {
        let psn = pkt.bth.psn;
        // Outside [una - WINDOW, next_psn): stale or bogus.
        if psn_diff(psn, engine.next_psn) >= 0 || psn_diff(psn, engine.una) < -WINDOW {
            self.data.stale_responses += 1;
            return;
        }
        match pkt.bth.opcode {
            op::RC_ACK => {
                // A NAK names the PSN that failed: one behind `una` was
                // already acted on (a duplicate or a stale NAK, IBTA
                // 9.7.5.1.1; rxe `check_psn`). An ACK behind `una` is old,
                // but one for the newest acknowledged PSN may be the
                // responder's credit update (hfi1's "ghost" ACK) or the
                // answer to a keep-alive: its credit count is taken, and
                // nothing else.
                let syndrome = Syndrome::from_wire(pkt.aeth.syndrome);
                if psn_diff(psn, engine.una) < 0 {
                    self.data.stale_responses += 1;
                    if let Syndrome::Ack(credit) = syndrome {
                        if psn_diff(psn, engine.una) == -1 {
                            engine
                                .credits
                                .update(pkt.aeth.msn, credit, self.now_ns, false);
                            if engine.rnr_wait.is_none() {
                                self.fetch_and_send(qp, engine);
                            }
                        }
                    }
                    return;
                }
                match syndrome {
                    Syndrome::Ack(credit) => {
                        let msn = pkt.aeth.msn;
                        let consumed = engine.consumed(msn);
                        engine.credits.update(msn, credit, self.now_ns, consumed);
                        self.ack_before(qp, engine, psn_add(psn, 1));
                        // An ACK beyond an incomplete READ: its responses were lost.
                        let mut implied = None;
                        for wqe in &engine.inflight {
                            if wqe.awaits_response() && wqe.read_rcvd < wqe.npkts {
                                if wqe.sent >= wqe.npkts && psn_diff(psn, wqe.first_psn) >= 0 {
                                    implied = Some(psn_add(wqe.first_psn, wqe.read_rcvd));
                                }
                                break;
                            }
                        }
                        if let Some(rewind_to) = implied {
                            if engine.last_rewind != Some(rewind_to) {
                                self.rewind(engine, rewind_to);
                            }
                        }
                    }
                    // A NAK or RNR NAK naming a request after a READ whose
                    // responses are missing: the responder executed the
                    // READ and its responses were lost. An implied NAK for
                    // the READ, as an ACK there is (rxe `check_psn`), never
                    // the READ's own error or RNR.
                    Syndrome::RnrNak(_) | Syndrome::Nak(_)
                        if engine.lost_read_before(psn).is_some() =>
                    {
                        self.ack_before(qp, engine, psn);
                        if let Some(rewind_to) = engine.lost_read_before(psn) {
                            if engine.last_rewind != Some(rewind_to) {
                                self.rewind(engine, rewind_to);
                            }
                        }
                    }
                    Syndrome::RnrNak(timer) => {
                        self.data.rnr_naks_rcvd += 1;
                        self.ack_before(qp, engine, psn);
                        self.complete_head(qp, engine);
                        if engine.inflight.is_empty() {
                            return;
                        }
                        if engine.rnr_left == 0 {
                            self.retries_exceeded(qp, engine, Exhausted::RnrRetries);
                            return;
                        }
                        if engine.rnr_left != 7 {
                            engine.rnr_left -= 1;
                        }
                        engine.timer = None;
                        let t = self.now_ns.saturating_add(rnr_delay_ns(timer));
                        self.arm(t);
                        engine.rnr_wait = Some((t, psn));
                        // Nothing more goes out until the RNR timer expires.
                        for wqe in engine.inflight.iter_mut() {
                            let end = psn_add(wqe.first_psn, wqe.npkts);
                            if psn_diff(end, psn) > 0 {
                                wqe.sent = if wqe.awaits_response() {
                                    0
                                } else {
                                    wqe.sent.min(psn_diff(psn, wqe.first_psn).max(0) as u32)
                                };
                            }
                        }
                        return;
                    }
                    Syndrome::Nak(code) => {
                        self.ack_before(qp, engine, psn);
                        self.complete_head(qp, engine);
                        // Only a PSN sequence error is retried; every other
                        // NAK completes the WQE in error (rxe `check_ack`).
                        if let Some(status) = code.completion_status() {
                            self.qp_fail(qp, engine, Some(status));
                            return;
                        }
                        self.data.seq_naks_rcvd += 1;
                        // The responder's answer to the packets that
                        // followed one it RNR NAKed names that packet's
                        // PSN: the RNR wait resends from there already.
                        let rnr_gap = engine.rnr_wait.is_some_and(|(_, p)| p == psn);
                        // Else a retry like a timeout's: it consumes one of
                        // retry_cnt (rxe COMPST_ERROR_RETRY).
                        if !rnr_gap
                            && engine.last_rewind != Some(psn)
                            && !engine.inflight.is_empty()
                        {
                            if engine.retry_left == 0 {
                                self.retries_exceeded(qp, engine, Exhausted::AckRetries);
                                return;
                            }
                            engine.retry_left -= 1;
                            self.data.ack_retries += 1;
                            self.rewind(engine, psn);
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
                if !self.read_response(qp, engine, pkt) {
                    return;
                }
                // MIDDLE responses carry no AETH.
                if pkt.bth.opcode != op::RC_READ_RESPONSE_MIDDLE {
                    self.take_credit(engine, pkt);
                }
            }
            op::RC_ATOMIC_ACK => {
                if !self.atomic_ack(qp, engine, pkt) {
                    return;
                }
                self.take_credit(engine, pkt);
            }
            _ => {
                self.data.stale_responses += 1;
                return;
            }
        }
        self.complete_head(qp, engine);
        if engine.rnr_wait.is_none() {
            self.fetch_and_send(qp, engine);
        }
    }

    /// The credit count of a response's AETH with the ACK syndrome (its
    /// message, a READ or an atomic, took no receive WQE).
    fn take_credit(&self, engine: &mut Engine, pkt: &Packet<'_>) {
        if let Syndrome::Ack(credit) = Syndrome::from_wire(pkt.aeth.syndrome) {
            engine
                .credits
                .update(pkt.aeth.msn, credit, self.now_ns, false);
        }
    }

    /// The oldest in-flight WQE still awaiting response packets (a READ,
    /// an atomic, or (1.8) an ATOMIC_WRITE or FLUSH); `None` counts the
    /// response that arrived as stale.
    fn awaiting_response(&mut self, engine: &Engine) -> Option<usize> {
        let i = engine
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
    fn read_response(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) -> bool {
        let psn = pkt.bth.psn;
        let Some(i) = self.awaiting_response(engine) else {
            return false;
        };
        let wqe = &engine.inflight[i];
        if wqe.is_atomic() {
            // The oldest outstanding response is an ATOMIC_ACKNOWLEDGE.
            self.data.stale_responses += 1;
            return false;
        }
        let exp = psn_add(wqe.first_psn, wqe.read_rcvd);
        if psn != exp {
            self.data.stale_responses += 1;
            if psn_diff(psn, exp) > 0 && wqe.sent >= wqe.npkts && engine.last_rewind != Some(exp) {
                self.rewind(engine, exp);
                self.fetch_and_send(qp, engine);
            }
            return false;
        }
        if wqe.is_placement() {
            let answer = pkt.bth.opcode == op::RC_READ_RESPONSE_ONLY
                && pkt.payload.is_empty()
                && matches!(Syndrome::from_wire(pkt.aeth.syndrome), Syndrome::Ack(_));
            if !answer {
                self.data.stale_responses += 1;
                return false;
            }
        } else {
            let off = u64::from(wqe.read_rcvd) * wqe.mtu;
            let want = (wqe.len - off.min(wqe.len)).min(wqe.mtu) as usize;
            let last = wqe.read_rcvd + 1 == wqe.npkts;
            let op_ok = match pkt.bth.opcode {
                op::RC_READ_RESPONSE_ONLY | op::RC_READ_RESPONSE_LAST => last,
                _ => !last,
            };
            if pkt.payload.len() != want || !op_ok {
                self.data.stale_responses += 1;
                return false;
            }
            let fresh = self.refresh_send_segs(qp.pdn, &mut engine.inflight[i]);
            let ok = fresh && self.scatter(&mut engine.inflight[i].segs, off, pkt.payload);
            if !ok {
                self.qp_fail(qp, engine, Some(WcStatus::LocProtErr));
                return false;
            }
        }
        engine.inflight[i].read_rcvd += 1;
        if psn_diff(psn_add(psn, 1), engine.una) > 0 {
            engine.una = psn_add(psn, 1);
        }
        self.progress_made(qp, engine);
        true
    }

    /// An ATOMIC_ACKNOWLEDGE: the original value goes to the atomic's
    /// local SGE (8 bytes, little-endian as the remote word). False if it
    /// answers no outstanding atomic (stale, counted) or the QP failed.
    fn atomic_ack(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) -> bool {
        let psn = pkt.bth.psn;
        let Some(i) = self.awaiting_response(engine) else {
            return false;
        };
        let wqe = &engine.inflight[i];
        if !wqe.is_atomic()
            || psn != wqe.first_psn
            || !matches!(Syndrome::from_wire(pkt.aeth.syndrome), Syndrome::Ack(_))
        {
            self.data.stale_responses += 1;
            return false;
        }
        let fresh = self.refresh_send_segs(qp.pdn, &mut engine.inflight[i]);
        let ok = fresh
            && self.scatter(
                &mut engine.inflight[i].segs,
                0,
                &pkt.atomic_ack.to_le_bytes(),
            );
        if !ok {
            self.qp_fail(qp, engine, Some(WcStatus::LocProtErr));
            return false;
        }
        engine.inflight[i].read_rcvd = 1;
        if psn_diff(psn_add(psn, 1), engine.una) > 0 {
            engine.una = psn_add(psn, 1);
        }
        self.progress_made(qp, engine);
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
            self.with_engine(qpn, |st, qp, engine| st.timers_expired(qp, engine, now));
        }
    }

    /// A timer of one QP expired at `now`: its credit watch's next read,
    /// the wait for a credit update, the RNR or the retransmission timer.
    fn timers_expired(&mut self, qp: &QpCtx, engine: &mut Engine, now: u64) {
        if engine.credit_watch.is_some_and(|w| w.next <= now) {
            self.credit_poll(qp, engine);
        }
        let sends = qp.state == QPS_RTS || qp.state == QPS_SQD;
        if engine.credits.probe_at().is_some_and(|t| t <= now) {
            // No update came: a keep-alive asks the responder for its
            // count again, or the message held back goes as the probe.
            let quiet = sends && engine.rnr_wait.is_none();
            if quiet && !engine.on_wire() && engine.credits.keep_alive(now) {
                self.send_keepalive(qp, engine);
            } else {
                engine.credits.dry_until = None;
                if quiet {
                    self.fetch_and_send(qp, engine);
                }
            }
        }
        if !sends {
            engine.timer = None;
            engine.rnr_wait = None;
        } else if let Some((t, psn)) = engine.rnr_wait {
            if t <= now {
                engine.rnr_wait = None;
                self.rewind(engine, psn);
                self.fetch_and_send(qp, engine);
            }
        } else if engine.timer.is_some_and(|t| t <= now) {
            engine.timer = None;
            if !engine.on_wire() {
                // Nothing sent is unacknowledged: a message held back for
                // credits has not timed out.
                return;
            }
            self.data.timeouts += 1;
            if engine.retry_left == 0 {
                self.retries_exceeded(qp, engine, Exhausted::AckRetries);
            } else {
                engine.retry_left -= 1;
                self.data.ack_retries += 1;
                let una = engine.una;
                self.rewind(engine, una);
                self.fetch_and_send(qp, engine);
            }
        }
    }
}
