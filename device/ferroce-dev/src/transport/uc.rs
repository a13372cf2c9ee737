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
    pub(super) fn uc_transmit(&mut self, qp: &QpCtx, engine: &mut Engine) {
        self.rc_transmit(qp, engine);
        self.complete_head(qp, engine);
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

    /// The UC responder: one request packet on UC QP `qp`.
    pub(super) fn uc_request(&mut self, qp: &QpCtx, engine: &mut Engine, pkt: &Packet<'_>) {
        let Some(rc_op) = op::rc_of_uc(pkt.bth.opcode) else {
            // Not reached: only UC opcodes are handed to a UC QP.
            self.data.rx_uc_dropped += 1;
            return;
        };
        let d = psn_diff(pkt.bth.psn, engine.epsn);
        if d < 0 {
            // Behind the expected PSN: a duplicate the wire made. Never
            // executed twice.
            self.data.dup_requests += 1;
            self.data.rx_uc_dropped += 1;
            return;
        }
        engine.epsn = psn_add(pkt.bth.psn, 1);
        if qp.state == QPS_RTR && !engine.comm_est_sent {
            // First packet on a QP still in RTR (IBTA 11.6.3: COMM_EST).
            engine.comm_est_sent = true;
            self.post_async(EQE_QP_COMM_EST, qp.qpn, 0, 0);
        }
        let shape = UcPkt::of(rc_op);
        let in_msg = engine.recv.is_some() || engine.write.is_some();
        let continues = if shape.send {
            engine.recv.is_some()
        } else {
            engine.write.is_some()
        };
        let in_order = d == 0 && if shape.first { !in_msg } else { continues };
        if !in_order {
            // A gap, or a packet that does not continue the message under
            // way: that message is lost (its receive WQE stays posted). A
            // packet of a message already being dropped is no new error.
            if d > 0 || !engine.uc_drop {
                self.data.rx_uc_seq_err += 1;
            }
            engine.abandon_recv();
            engine.write = None;
            if !shape.first {
                engine.uc_drop = true;
                self.data.rx_uc_dropped += 1;
                return;
            }
        }
        // A FIRST or ONLY packet starts a message whatever came before.
        if shape.first {
            engine.uc_drop = false;
        }
        // The receive CQE is the one of the RC twin of the opcode.
        let mut twin = pkt.clone();
        twin.bth.opcode = rc_op;
        let mtu = self.mtu_of(&qp.attr);
        let r = if Self::check_seg_len(mtu, pkt.payload.len(), shape.first, shape.last).is_err() {
            Err(UcDrop::BadRequest)
        } else if shape.send {
            self.uc_send(qp, engine, &twin, shape)
        } else {
            self.uc_write(qp, engine, &twin, shape)
        };
        let Err(why) = r else {
            return;
        };
        engine.abandon_recv();
        engine.write = None;
        engine.uc_drop = !shape.last;
        self.data.rx_uc_dropped += 1;
        match why {
            UcDrop::NoWqe => self.data.rx_uc_no_wqe += 1,
            UcDrop::BadRequest => self.data.rx_uc_bad_req += 1,
            UcDrop::Local(r, status) => {
                self.recv_failed(qp, engine, &r, status, qp.attr.dest_qp_num)
            }
        }
    }

    /// One in-order packet of a UC SEND (`pkt` carries the RC twin opcode),
    /// its segment length checked by [`Self::uc_request`].
    fn uc_send(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
        shape: UcPkt,
    ) -> Result<(), UcDrop> {
        if shape.first {
            let Some(recv) = self.recv_take(qp, engine) else {
                return Err(UcDrop::NoWqe);
            };
            if let Some(status) = recv.wqe.error {
                return Err(UcDrop::Local(Box::new(recv), status));
            }
            engine.recv = Some(recv);
        }
        let Some(mut recv) = engine.recv.take() else {
            return Err(UcDrop::BadRequest);
        };
        let end = recv.off + pkt.payload.len() as u64;
        if end > recv.wqe.cap {
            // Longer than the receive WQE: dropped, the WQE stays posted
            // (rxe: UC class D).
            engine.recv_unused(recv);
            return Err(UcDrop::BadRequest);
        }
        let fresh = self.refresh_recv_segs(qp.pdn, &mut recv.wqe);
        if !fresh || !self.scatter(&mut recv.wqe.segs, recv.off, pkt.payload) {
            return Err(UcDrop::Local(Box::new(recv), WcStatus::LocProtErr));
        }
        recv.off = end;
        if shape.last {
            Self::recv_consumed(engine, &recv);
            self.rc_recv_cqe(qp, pkt, recv.wqe.wr_id, recv.idx, recv.off as u32);
        } else {
            engine.recv = Some(recv);
        }
        Ok(())
    }

    /// One in-order packet of a UC RDMA WRITE (`pkt` carries the RC twin
    /// opcode). The whole range is checked on the first packet; a later
    /// packet whose memory was invalidated meanwhile drops the rest.
    fn uc_write(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
        shape: UcPkt,
    ) -> Result<(), UcDrop> {
        if qp.attr.qp_access_flags & ACCESS_REMOTE_WRITE == 0 {
            return Err(UcDrop::BadRequest);
        }
        let Some(mut write) = self.write_start(engine.write.take(), pkt, qp) else {
            return Err(UcDrop::BadRequest);
        };
        let n = pkt.payload.len() as u64;
        if !write.takes(n, shape.last) {
            return Err(UcDrop::BadRequest);
        }
        // The immediate needs a receive WQE before the last bytes land (an
        // SRQ QP takes it now and keeps it if the WRITE is dropped).
        if shape.imm && !self.recv_ready(qp, engine) {
            return Err(UcDrop::NoWqe);
        }
        if n > 0 {
            let Some(segs) = self.translate_rkey(qp, write.rkey, write.va, n, ACCESS_REMOTE_WRITE)
            else {
                return Err(UcDrop::BadRequest);
            };
            if !self.scatter(&mut Segments::new(segs), 0, pkt.payload) {
                return Err(UcDrop::BadRequest);
            }
        }
        write.va = write.va.wrapping_add(n);
        write.left -= n;
        if !shape.last {
            engine.write = Some(write);
        } else if let Some((wr_id, idx)) = shape.imm.then(|| self.recv_imm(qp, engine)).flatten() {
            self.rc_recv_cqe(qp, pkt, wr_id, idx, write.total as u32);
        }
        Ok(())
    }
}
