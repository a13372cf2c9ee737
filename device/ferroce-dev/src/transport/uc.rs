// SPDX-License-Identifier: GPL-2.0
//! UC QPs (IBTA 9.7.x, 9.8; rxe's UC paths in `rxe_req.c`/`rxe_resp.c`):
//! SEND and RDMA WRITE, with and without immediate, that nobody
//! acknowledges.
//!
//! * Requester: the RC requester cuts the messages ([`State::rc_transmit`]
//!   with UC opcodes and no AckReq) and a WQE completes as soon as its last
//!   packet is out. There is no window, ACK, timer or retry: the TX queue's
//!   room is the only bound, and a QP that finds none waits on
//!   `State::tx_waiters` until the queue drains.
//! * Responder (this file): packets are executed in PSN order and never
//!   answered. A duplicate (PSN behind the expected one) is dropped. A PSN
//!   gap, or a MIDDLE/LAST packet without its message's FIRST, discards the
//!   partial message; the responder resynchronises on the next FIRST or
//!   ONLY packet, whatever its PSN. A message the responder cannot take (no
//!   receive WQE, bad R_Key, range, access or length) is dropped whole and
//!   silently, the receive WQE it was filling (if any) stays posted for the
//!   next message (one taken from an SRQ stays with the QP for its next
//!   message). Every drop is counted (`rx_uc_*`).

use super::codes::WcStatus;
use crate::device::State;
use crate::hw::*;
use crate::wire::{op, psn_add, psn_diff, Packet};

use super::{Engine, QpCtx, RecvCtx, Segments};

/// Why the UC responder drops a message.
enum UcDrop {
    /// No receive WQE for a SEND or a WRITE with immediate.
    NoWqe,
    /// What an RC responder would NAK: R_Key, range, access, length,
    /// segment size.
    BadRequest,
    /// This receive WQE cannot be used (it is malformed, its SGEs are
    /// refused, or its memory vanished): it completes with this status.
    Local(Box<RecvCtx>, WcStatus),
}

/// The shape of a UC request packet, from its RC twin's opcode.
#[derive(Clone, Copy)]
struct UcPkt {
    send: bool,
    first: bool,
    last: bool,
    imm: bool,
}

impl UcPkt {
    fn of(rc_op: u8) -> Self {
        Self {
            send: rc_op <= op::RC_SEND_ONLY_IMM,
            first: matches!(
                rc_op,
                op::RC_SEND_FIRST
                    | op::RC_SEND_ONLY
                    | op::RC_SEND_ONLY_IMM
                    | op::RC_WRITE_FIRST
                    | op::RC_WRITE_ONLY
                    | op::RC_WRITE_ONLY_IMM
            ),
            last: !matches!(
                rc_op,
                op::RC_SEND_FIRST | op::RC_SEND_MIDDLE | op::RC_WRITE_FIRST | op::RC_WRITE_MIDDLE
            ),
            imm: matches!(
                rc_op,
                op::RC_SEND_LAST_IMM
                    | op::RC_SEND_ONLY_IMM
                    | op::RC_WRITE_LAST_IMM
                    | op::RC_WRITE_ONLY_IMM
            ),
        }
    }
}

impl State {
    /// The UC requester: sends what the TX queue takes and completes every
    /// WQE whose last packet went out.
    pub(super) fn uc_transmit(&mut self, c: &QpCtx, e: &mut Engine) {
        self.rc_transmit(c, e);
        self.complete_head(c, e);
    }

    /// QP `qpn` (UC) has packets to send but the TX queue has no room.
    pub(super) fn wait_for_tx_room(&mut self, qpn: u32) {
        if !self.tx_waiters.contains(&qpn) {
            self.tx_waiters.push(qpn);
        }
    }

    /// Lets the QPs waiting for room in the TX queue send again, once it
    /// has some.
    pub(crate) fn resume_tx_waiters(&mut self) {
        if self.tx_waiters.is_empty() || self.tx_room() == 0 {
            return;
        }
        for qpn in std::mem::take(&mut self.tx_waiters) {
            self.sq_progress(qpn);
        }
    }

    /// The UC responder: one request packet on UC QP `c`.
    pub(super) fn uc_request(&mut self, c: &QpCtx, e: &mut Engine, p: &Packet<'_>) {
        let Some(rc_op) = op::rc_of_uc(p.bth.opcode) else {
            // Not reached: only UC opcodes are handed to a UC QP.
            self.data.rx_uc_dropped += 1;
            return;
        };
        let d = psn_diff(p.bth.psn, e.epsn);
        if d < 0 {
            // Behind the expected PSN: a duplicate the wire made. Never
            // executed twice.
            self.data.dup_requests += 1;
            self.data.rx_uc_dropped += 1;
            return;
        }
        e.epsn = psn_add(p.bth.psn, 1);
        if c.state == QPS_RTR && !e.comm_est_sent {
            // First packet on a QP still in RTR (IBTA 11.6.3: COMM_EST).
            e.comm_est_sent = true;
            self.post_async(EQE_QP_COMM_EST, c.qpn, 0, 0);
        }
        let pkt = UcPkt::of(rc_op);
        let in_msg = e.recv.is_some() || e.write.is_some();
        let continues = if pkt.send {
            e.recv.is_some()
        } else {
            e.write.is_some()
        };
        let in_order = d == 0 && if pkt.first { !in_msg } else { continues };
        if !in_order {
            // A gap, or a packet that does not continue the message under
            // way: that message is lost (its receive WQE stays posted). A
            // packet of a message already being dropped is no new error.
            if d > 0 || !e.uc_drop {
                self.data.rx_uc_seq_err += 1;
            }
            e.abandon_recv();
            e.write = None;
            if !pkt.first {
                e.uc_drop = true;
                self.data.rx_uc_dropped += 1;
                return;
            }
        }
        // A FIRST or ONLY packet starts a message whatever came before.
        if pkt.first {
            e.uc_drop = false;
        }
        // The receive CQE is the one of the RC twin of the opcode.
        let mut twin = p.clone();
        twin.bth.opcode = rc_op;
        let mtu = self.mtu_of(&c.attr);
        let r = if Self::check_seg_len(mtu, p.payload.len(), pkt.first, pkt.last).is_err() {
            Err(UcDrop::BadRequest)
        } else if pkt.send {
            self.uc_send(c, e, &twin, pkt)
        } else {
            self.uc_write(c, e, &twin, pkt)
        };
        let Err(why) = r else {
            return;
        };
        e.abandon_recv();
        e.write = None;
        e.uc_drop = !pkt.last;
        self.data.rx_uc_dropped += 1;
        match why {
            UcDrop::NoWqe => self.data.rx_uc_no_wqe += 1,
            UcDrop::BadRequest => self.data.rx_uc_bad_req += 1,
            UcDrop::Local(r, status) => self.recv_failed(c, e, &r, status, c.attr.dest_qp_num),
        }
    }

    /// One in-order packet of a UC SEND (`p` carries the RC twin opcode),
    /// its segment length checked by [`Self::uc_request`].
    fn uc_send(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
        pkt: UcPkt,
    ) -> Result<(), UcDrop> {
        if pkt.first {
            let Some(r) = self.recv_take(c, e) else {
                return Err(UcDrop::NoWqe);
            };
            if let Some(status) = r.wqe.error {
                return Err(UcDrop::Local(Box::new(r), status));
            }
            e.recv = Some(r);
        }
        let Some(mut r) = e.recv.take() else {
            return Err(UcDrop::BadRequest);
        };
        let end = r.off + p.payload.len() as u64;
        if end > r.wqe.cap {
            // Longer than the receive WQE: dropped, the WQE stays posted
            // (rxe: UC class D).
            e.recv_unused(r);
            return Err(UcDrop::BadRequest);
        }
        let fresh = self.refresh_recv_segs(c.pdn, &mut r.wqe);
        if !fresh || !self.scatter(&mut r.wqe.segs, r.off, p.payload) {
            return Err(UcDrop::Local(Box::new(r), WcStatus::LocProtErr));
        }
        r.off = end;
        if pkt.last {
            Self::recv_consumed(e, &r);
            self.rc_recv_cqe(c, p, r.wqe.wr_id, r.idx, r.off as u32);
        } else {
            e.recv = Some(r);
        }
        Ok(())
    }

    /// One in-order packet of a UC RDMA WRITE (`p` carries the RC twin
    /// opcode). The whole range is checked on the first packet; a later
    /// packet whose memory was invalidated meanwhile drops the rest.
    fn uc_write(
        &mut self,
        c: &QpCtx,
        e: &mut Engine,
        p: &Packet<'_>,
        pkt: UcPkt,
    ) -> Result<(), UcDrop> {
        if c.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 {
            return Err(UcDrop::BadRequest);
        }
        let Some(mut w) = self.write_start(e.write.take(), p, c) else {
            return Err(UcDrop::BadRequest);
        };
        let n = p.payload.len() as u64;
        if !w.takes(n, pkt.last) {
            return Err(UcDrop::BadRequest);
        }
        // The immediate needs a receive WQE before the last bytes land (an
        // SRQ QP takes it now and keeps it if the WRITE is dropped).
        if pkt.imm && !self.recv_ready(c, e) {
            return Err(UcDrop::NoWqe);
        }
        if n > 0 {
            let Some(segs) = self.translate_rkey(c, w.rkey, w.va, n, ACCESS_REMOTE_WRITE) else {
                return Err(UcDrop::BadRequest);
            };
            if !self.scatter(&mut Segments::new(segs), 0, p.payload) {
                return Err(UcDrop::BadRequest);
            }
        }
        w.va = w.va.wrapping_add(n);
        w.left -= n;
        if !pkt.last {
            e.write = Some(w);
        } else if let Some((wr_id, idx)) = pkt.imm.then(|| self.recv_imm(c, e)).flatten() {
            self.rc_recv_cqe(c, p, wr_id, idx, w.total as u32);
        }
        Ok(())
    }
}
