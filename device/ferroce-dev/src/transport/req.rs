// SPDX-License-Identifier: GPL-2.0
//! The RC requester (rxe `rxe_req.c`): fetches send WQEs, validates them,
//! segments messages into packets and transmits them within the window.

use super::codes::WcStatus;
use crate::device::State;
use crate::hw::*;
use crate::wire::{self, feth, op, psn_add, psn_diff, Aeth, AtomicEth, Bth, Deth, Packet, Reth};

use super::memreg::LocalOp;
use super::{
    pkts_for, wqe_struct, Engine, QpCtx, Segments, SendWqe, SgeList, ACK_REQ_EVERY, ATOMIC_LEN,
    MAX_INFLIGHT_WQES, MAX_MSG, MAX_MSG_PKTS, WINDOW,
};

impl State {
    /// Fetches and validates the send WQE at `idx`.
    pub(super) fn fetch_wqe(&mut self, qp: &QpCtx, idx: u16, mtu: u64) -> SendWqe {
        // CREATE_QP bounds the stride by SQ_WQE_SHIFT_MAX.
        let len = 1usize << qp.sq_shift.min(SQ_WQE_SHIFT_MAX);
        self.with_wqe_buf(len, |s, buf| s.fetch_wqe_into(qp, idx, mtu, buf))
    }

    /// [`Self::fetch_wqe`], reading the WQE into `raw` (its stride).
    fn fetch_wqe_into(&mut self, qp: &QpCtx, idx: u16, mtu: u64, raw: &mut [u8]) -> SendWqe {
        let mut wqe = SendWqe {
            idx,
            wr_id: 0,
            opcode: 0,
            flags: 0,
            signaled: false,
            len: 0,
            imm: [0; 4],
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            aw_data: [0; 8],
            flush_len: 0,
            flush_feth: 0,
            sges: SgeList::new(),
            need: 0,
            segs: Segments::default(),
            epoch: self.mr_epoch,
            inline: None,
            local: None,
            first_psn: 0,
            npkts: 0,
            ssn: 0,
            mtu,
            sent: 0,
            read_rcvd: 0,
            error: None,
            ud: None,
        };
        if !self.wqe_read(qp.qpn, true, idx, raw) {
            self.counters.hw.bad_dma += 1;
            wqe.error = Some(WcStatus::LocQpOpErr);
            return wqe;
        }
        if let Err(status) = self.decode_send_wqe(qp, raw, &mut wqe, mtu) {
            // Never sent: it takes no PSN and is no READ awaiting
            // responses (which would hold back the ACKs of the WQEs
            // before it).
            wqe.error = Some(status);
            wqe.npkts = 0;
        }
        wqe
    }

    /// Decodes and validates a send WQE into `wqe`; the error is the WQE's
    /// completion status (nothing is read or sent for it).
    pub(super) fn decode_send_wqe(
        &mut self,
        qp: &QpCtx,
        raw: &[u8],
        wqe: &mut SendWqe,
        mtu: u64,
    ) -> Result<(), WcStatus> {
        let hdr: SqWqeHdr = wqe_struct(raw, 0).ok_or(WcStatus::LocQpOpErr)?;
        wqe.wr_id = hdr.wr_id;
        wqe.opcode = hdr.opcode;
        wqe.flags = hdr.flags;
        wqe.signaled = hdr.flags & WQE_SIGNALED != 0;
        wqe.imm = hdr.imm_data.to_le_bytes();
        let ud = !qp.connected();
        let common_flags = WQE_SIGNALED | WQE_SOLICITED | WQE_INLINE | WQE_FENCE;
        let (op_ok, known_flags) = if ud {
            (
                matches!(hdr.opcode, WR_SEND | WR_SEND_IMM),
                common_flags | WQE_AV,
            )
        } else if qp.uc() {
            // UC has no READ, atomic or local operation (IBTA 9.8; 1.7
            // binds no memory window on UC either, 1.8 has no ATOMIC_WRITE
            // or FLUSH there): a local QP operation error, as for any
            // opcode the QP lacks.
            let op_ok = matches!(
                hdr.opcode,
                WR_SEND | WR_SEND_IMM | WR_RDMA_WRITE | WR_RDMA_WRITE_IMM
            );
            (op_ok, common_flags)
        } else {
            let op_ok = matches!(
                hdr.opcode,
                WR_SEND
                    | WR_SEND_IMM
                    | WR_SEND_INV
                    | WR_RDMA_WRITE
                    | WR_RDMA_WRITE_IMM
                    | WR_RDMA_READ
                    | WR_ATOMIC_CMP_SWP
                    | WR_ATOMIC_FETCH_ADD
                    | WR_LOCAL_INV
                    | WR_REG_MR
                    | WR_BIND_MW
                    | WR_FLUSH
                    | WR_ATOMIC_WRITE
            );
            (op_ok, common_flags)
        };
        let inline = hdr.flags & WQE_INLINE != 0;
        // READ and atomics write local memory: never from inline data.
        let writes_local = matches!(
            hdr.opcode,
            WR_RDMA_READ | WR_ATOMIC_CMP_SWP | WR_ATOMIC_FETCH_ADD
        );
        if !op_ok || hdr.flags & !known_flags != 0 || (inline && writes_local) {
            return Err(WcStatus::LocQpOpErr);
        }
        match hdr.opcode {
            WR_BIND_MW => {
                // Carries no data; like every failure of a bind, a
                // malformed one completes with MW_BIND_ERR.
                if hdr.num_sge != 0 || inline || hdr.inline_len != 0 {
                    return Err(WcStatus::MwBindErr);
                }
                let seg = wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::MwBindErr)?;
                wqe.local = Some(LocalOp::BindMw { seg });
                wqe.npkts = 0;
                return Ok(());
            }
            WR_REG_MR | WR_LOCAL_INV => {
                if hdr.num_sge != 0 || inline || hdr.inline_len != 0 {
                    return Err(WcStatus::LocProtErr);
                }
                let local = if hdr.opcode == WR_REG_MR {
                    LocalOp::RegMr {
                        seg: wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocProtErr)?,
                        pbl: wqe_struct(raw, SQ_WQE_DATA_OFFSET).ok_or(WcStatus::LocProtErr)?,
                    }
                } else {
                    LocalOp::LocalInv {
                        key: u32::from_be_bytes(wqe.imm),
                    }
                };
                wqe.local = Some(local);
                wqe.npkts = 0;
                return Ok(());
            }
            WR_RDMA_WRITE | WR_RDMA_WRITE_IMM | WR_RDMA_READ => {
                let rdma: SqWqeRdma =
                    wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
                wqe.remote_addr = rdma.remote_addr;
                wqe.rkey = rdma.rkey;
            }
            WR_ATOMIC_CMP_SWP | WR_ATOMIC_FETCH_ADD => {
                let atomic: SqWqeAtomic =
                    wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
                wqe.remote_addr = atomic.remote_addr;
                wqe.rkey = atomic.rkey;
                wqe.compare_add = atomic.compare_add;
                wqe.swap = atomic.swap;
            }
            WR_ATOMIC_WRITE | WR_FLUSH => {
                Self::decode_placement(raw, &hdr, wqe)?;
                wqe.npkts = 1;
                return Ok(());
            }
            _ => {}
        }
        let data = if ud {
            self.decode_ud_dest(qp, raw, wqe)?
        } else {
            SQ_WQE_DATA_OFFSET
        };
        let room = raw.len().saturating_sub(data);
        if inline {
            let len = hdr.inline_len as usize;
            if hdr.inline_len > qp.max_inline || len > room {
                return Err(WcStatus::LocLenErr);
            }
            let bytes = raw.get(data..data + len).ok_or(WcStatus::LocLenErr)?;
            wqe.len = u64::from(hdr.inline_len);
            wqe.inline = Some(bytes.to_vec());
        } else {
            let num_sge = usize::from(hdr.num_sge);
            let max_sge =
                (room / core::mem::size_of::<Sge>()).min(self.cfg.limits.max_sge as usize);
            if num_sge > max_sge {
                return Err(WcStatus::LocLenErr);
            }
            wqe.need = if writes_local { ACCESS_LOCAL_WRITE } else { 0 };
            for i in 0..num_sge {
                let at = data + i * core::mem::size_of::<Sge>();
                wqe.sges
                    .push(wqe_struct(raw, at).ok_or(WcStatus::LocLenErr)?);
            }
            wqe.segs = Segments::new(
                self.translate_sges(qp.pdn, &wqe.sges, wqe.need)
                    .ok_or(WcStatus::LocProtErr)?,
            );
            wqe.len = wqe.sges.iter().fold(0u64, |total, sge| {
                total.saturating_add(u64::from(sge.length))
            });
        }
        if wqe.len > MAX_MSG || (ud && wqe.len > mtu) || (wqe.is_atomic() && wqe.len != ATOMIC_LEN)
        {
            return Err(WcStatus::LocLenErr);
        }
        wqe.npkts = if ud { 1 } else { pkts_for(wqe.len, mtu) };
        if wqe.npkts > MAX_MSG_PKTS {
            return Err(WcStatus::LocLenErr);
        }
        Ok(())
    }

    /// The segment of an ATOMIC_WRITE or FLUSH WQE (1.8, device.rst "Send
    /// WQE processing"): no SGEs, no `INLINE`, `inline_len` 0, reserved
    /// fields 0, and a FLUSH's type `GLOBAL`, `PERSISTENT` or both and its
    /// level `RANGE` or `MR`; else a local QP operation error. The remote
    /// side (alignment, keys, rights) is the responder's to check.
    fn decode_placement(raw: &[u8], hdr: &SqWqeHdr, wqe: &mut SendWqe) -> Result<(), WcStatus> {
        let inline = hdr.flags & WQE_INLINE != 0;
        if hdr.num_sge != 0 || inline || hdr.inline_len != 0 {
            return Err(WcStatus::LocQpOpErr);
        }
        if hdr.opcode == WR_ATOMIC_WRITE {
            let seg: SqWqeAtomicWrite =
                wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
            if seg.reserved0 != 0 || seg.reserved1 != 0 {
                return Err(WcStatus::LocQpOpErr);
            }
            wqe.remote_addr = seg.remote_addr;
            wqe.rkey = seg.rkey;
            wqe.aw_data = seg.data;
            // The CQE's byte_len.
            wqe.len = ATOMIC_LEN;
        } else {
            let seg: SqWqeFlush = wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
            let types = FLUSH_GLOBAL | FLUSH_PERSISTENT;
            let type_ok = seg.r#type != 0 && seg.r#type & !types == 0;
            let level_ok = matches!(seg.level, FLUSH_RANGE | FLUSH_MR);
            let reserved = seg.reserved0 != [0; 6] || seg.reserved1 != 0;
            if !type_ok || !level_ok || reserved {
                return Err(WcStatus::LocQpOpErr);
            }
            wqe.remote_addr = seg.remote_addr;
            wqe.rkey = seg.rkey;
            wqe.flush_len = seg.length;
            wqe.flush_feth = feth::encode(seg.r#type, seg.level);
            // Nothing is transferred: byte_len 0.
            wqe.len = 0;
        }
        Ok(())
    }

    /// SQ doorbell / state change: fetch new WQEs and transmit.
    pub(crate) fn sq_progress(&mut self, qpn: u32) {
        self.with_engine(qpn, |st, qp, engine| {
            // In ERR and in SQE new send WQEs complete with flush error (IBTA
            // 10.3.1); after SQE -> RTS only WQEs posted later run.
            if qp.state == QPS_ERR || qp.state == QPS_SQE {
                st.flush_sq_posted(qp, engine);
            } else if qp.state == QPS_RTS {
                // A credit update due goes before the new requests.
                st.credit_poll(qp, engine);
                st.fetch_and_send(qp, engine);
            }
        });
    }

    pub(super) fn fetch_and_send(&mut self, qp: &QpCtx, engine: &mut Engine) {
        let mtu = self.mtu_of(&qp.attr);
        loop {
            self.fetch_new_wqes(qp, engine, mtu);
            if qp.uc() {
                // Completed as sent: nothing waits for an ACK or a timer.
                self.uc_transmit(qp, engine);
                return;
            }
            if !qp.rc() {
                self.ud_transmit(qp, engine);
                return;
            }
            self.rc_transmit(qp, engine);
            // A local operation that executed lets the WQEs after it in.
            if !self.complete_head(qp, engine) {
                break;
            }
        }
        // Anything outstanding on the wire is covered by a timer.
        if engine.timer.is_none() && engine.rnr_wait.is_none() {
            self.start_ack_timer(qp, engine);
        }
    }

    /// Fetches posted WQEs while the window allows, up to a failed WQE or
    /// a local operation (nothing after one is fetched before it executed).
    pub(super) fn fetch_new_wqes(&mut self, qp: &QpCtx, engine: &mut Engine, mtu: u64) {
        let rc = qp.rc();
        let window = if rc {
            self.rc_window(qp, engine)
        } else {
            WINDOW
        };
        let was_idle = engine.next_psn == engine.una;
        // New WQEs are started only in RTS (SQD drains what is outstanding).
        let state = self.qps.get(qp.qpn).map_or(qp.state, |q| q.state);
        while state == QPS_RTS
            && engine.sq_next != qp.sq_pi
            && engine.inflight.len() < MAX_INFLIGHT_WQES
        {
            if rc && psn_diff(engine.next_psn, engine.una) >= window {
                break;
            }
            if engine
                .inflight
                .back()
                .is_some_and(|w| w.error.is_some() || w.local.is_some())
            {
                break;
            }
            let mut wqe = self.fetch_wqe(qp, engine.sq_next, mtu);
            engine.sq_next = engine.sq_next.wrapping_add(1);
            if qp.connected() && wqe.error.is_none() {
                wqe.first_psn = engine.next_psn;
                engine.next_psn = psn_add(engine.next_psn, wqe.npkts);
            }
            if rc && wqe.error.is_none() && wqe.local.is_none() {
                wqe.ssn = engine.credits.assign();
            }
            engine.inflight.push_back(wqe);
        }
        // A QP that becomes busy counts at once, so that QPs started
        // together share the budget from their first packets; the next
        // count (`rc_window`) also sees those that went idle.
        if rc && was_idle && engine.next_psn != engine.una {
            self.busy_rc = self.busy_rc.saturating_add(1);
        }
    }

    /// A keep-alive (device.rst "RC requester", credit updates): a
    /// zero-length RDMA WRITE Only with AckReq for the newest acknowledged
    /// PSN, which the responder takes as a duplicate and acknowledges
    /// again, with its credit count, without executing it.
    ///
    /// Sent only from the engine thread's timers, whose next sleep already
    /// counts the wait it starts: nothing to arm.
    pub(super) fn send_keepalive(&mut self, qp: &QpCtx, engine: &mut Engine) {
        let Some(path) = self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num) else {
            return;
        };
        let bth = Bth {
            opcode: op::RC_WRITE_ONLY,
            pkey: wire::DEFAULT_PKEY,
            dest_qp: qp.attr.dest_qp_num,
            ack_req: true,
            psn: psn_add(engine.una, 0xff_ffff),
            ..Bth::default()
        };
        let (aeth, deth) = (Aeth::default(), Deth::default());
        let pkt = self.data_packet(&path, bth, Reth::default(), aeth, deth, [0; 4], &[]);
        self.emit_packet(&pkt);
        self.data.credit_keepalives += 1;
    }

    /// Sends every packet that the window, the read limit and fences allow.
    ///
    /// UC QPs send through here too, with UC opcodes and no AckReq: their
    /// bound is not the window (nothing is acknowledged) but the room in
    /// the TX queue; a UC QP that finds none waits on `State::tx_waiters`.
    pub(super) fn rc_transmit(&mut self, qp: &QpCtx, engine: &mut Engine) {
        let uc = qp.uc();
        // After an RNR NAK nothing goes out until the RNR timer fires, new
        // doorbells included (IBTA 9.7.5.2.8; rxe `wait_for_rnr_timer`).
        if engine.rnr_wait.is_some() {
            return;
        }
        let Some(path) = self.path_of(&qp.attr.av, qp.qpn, qp.attr.dest_qp_num) else {
            if engine.inflight.iter().any(|w| w.error.is_none()) {
                self.requester_failed(qp, engine, WcStatus::LocQpOpErr);
            }
            return;
        };
        // READs, atomics, ATOMIC_WRITEs and FLUSHes together (IBTA 9.5:
        // the initiator depth; each takes a responder resource).
        let max_reads = usize::from(qp.attr.max_rd_atomic.max(1));
        let window = if uc {
            WINDOW
        } else {
            self.rc_window(qp, engine)
        };
        let mut sent_any = false;
        let mut reads_pending = 0usize;
        for i in 0..engine.inflight.len() {
            let Some(wqe) = engine.inflight.get(i) else {
                break;
            };
            if wqe.error.is_some() {
                break;
            }
            if wqe.flags & WQE_FENCE != 0 && reads_pending > 0 {
                break;
            }
            if wqe.awaits_response() {
                if wqe.read_rcvd >= wqe.npkts {
                    continue;
                }
                if wqe.sent < wqe.npkts {
                    if reads_pending >= max_reads {
                        break;
                    }
                    let psn = psn_add(wqe.first_psn, wqe.read_rcvd);
                    if psn_diff(psn, engine.una) >= window {
                        break;
                    }
                    // Takes no receive WQE: never held back, but it
                    // takes an MSN, which raises the LSN.
                    let waits = &mut self.data.credit_waits;
                    engine
                        .credits
                        .admit(wqe.ssn, false, false, self.now_ns, waits);
                    let mut bth = Bth {
                        opcode: op::RC_READ_REQUEST,
                        pkey: wire::DEFAULT_PKEY,
                        dest_qp: qp.attr.dest_qp_num,
                        ack_req: true,
                        psn,
                        ..Bth::default()
                    };
                    if wqe.is_placement() {
                        // Same PSN on a retransmission: the responder
                        // answers it from its resource (device.rst "Atomic
                        // write and flush").
                        let write = wqe.opcode == WR_ATOMIC_WRITE;
                        bth.opcode = if write {
                            op::RC_ATOMIC_WRITE
                        } else {
                            op::RC_FLUSH
                        };
                        let (reth, feth, data) = if write {
                            let reth = Reth {
                                va: wqe.remote_addr,
                                rkey: wqe.rkey,
                                len: ATOMIC_LEN as u32,
                            };
                            (reth, 0, wqe.aw_data)
                        } else {
                            let reth = Reth {
                                va: wqe.remote_addr,
                                rkey: wqe.rkey,
                                len: wqe.flush_len,
                            };
                            (reth, wqe.flush_feth, [0; 8])
                        };
                        let payload: &[u8] = if write { &data } else { &[] };
                        self.send_placement(&path, bth, reth, feth, payload);
                    } else if wqe.is_atomic() {
                        // Same PSN on a retransmission: the responder
                        // answers it from its replay cache.
                        let cmp_swap = wqe.opcode == WR_ATOMIC_CMP_SWP;
                        bth.opcode = if cmp_swap {
                            op::RC_CMP_SWAP
                        } else {
                            op::RC_FETCH_ADD
                        };
                        let atomic = AtomicEth {
                            va: wqe.remote_addr,
                            rkey: wqe.rkey,
                            swap_add: if cmp_swap { wqe.swap } else { wqe.compare_add },
                            compare: if cmp_swap { wqe.compare_add } else { 0 },
                        };
                        self.send_atomic(&path, bth, atomic);
                    } else {
                        let off = u64::from(wqe.read_rcvd) * wqe.mtu;
                        let reth = Reth {
                            va: wqe.remote_addr.wrapping_add(off),
                            rkey: wqe.rkey,
                            len: wqe.len.saturating_sub(off) as u32,
                        };
                        let pkt = self.data_packet(
                            &path,
                            bth,
                            reth,
                            Aeth::default(),
                            Deth::default(),
                            [0; 4],
                            &[],
                        );
                        self.emit_packet(&pkt);
                    }
                    if let Some(wqe) = engine.inflight.get_mut(i) {
                        wqe.sent = wqe.npkts;
                    }
                    sent_any = true;
                }
                reads_pending += 1;
                continue;
            }
            let (npkts, first_psn, len, mtu) = (wqe.npkts, wqe.first_psn, wqe.len, wqe.mtu);
            let write = matches!(wqe.opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_IMM);
            let with_imm = matches!(wqe.opcode, WR_RDMA_WRITE_IMM | WR_SEND_IMM);
            let with_inv = wqe.opcode == WR_SEND_INV;
            let mut k = wqe.sent;
            if !uc && k < npkts {
                let alone = engine.una == first_psn;
                let (now, waits) = (self.now_ns, &mut self.data.credit_waits);
                if !engine
                    .credits
                    .admit(wqe.ssn, wqe.consumes_rwqe(), alone, now, waits)
                {
                    if let Some(t) = engine.credits.probe_at() {
                        self.arm(t);
                    }
                    break;
                }
            }
            let mut blocked = false;
            while k < npkts {
                let psn = psn_add(first_psn, k);
                if !uc && psn_diff(psn, engine.una) >= window {
                    blocked = true;
                    break;
                }
                if uc && self.tx_room() == 0 {
                    self.wait_for_tx_room(qp.qpn);
                    blocked = true;
                    break;
                }
                let Some(wqe) = engine.inflight.get(i) else {
                    break;
                };
                let off = u64::from(k) * mtu;
                let n = (len - off.min(len)).min(mtu) as usize;
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
                let opcode = if uc { op::uc_of(opcode) } else { opcode };
                let bth = Bth {
                    opcode,
                    se: last && wqe.flags & WQE_SOLICITED != 0 && (!write || with_imm),
                    pkey: wire::DEFAULT_PKEY,
                    dest_qp: qp.attr.dest_qp_num,
                    // UC is never acknowledged: no AckReq.
                    ack_req: !uc && (last || (k + 1) % ACK_REQ_EVERY == 0),
                    psn,
                    ..Bth::default()
                };
                let reth = if write && first {
                    Reth {
                        va: wqe.remote_addr,
                        rkey: wqe.rkey,
                        len: len as u32,
                    }
                } else {
                    Reth::default()
                };
                let (aeth, deth) = (Aeth::default(), Deth::default());
                let pkt = self.data_packet(&path, bth, reth, aeth, deth, wqe.imm, &[]);
                // The payload goes from guest memory straight into the frame.
                let ok = match &wqe.inline {
                    Some(v) => {
                        let s = off as usize;
                        match v.get(s..s + n) {
                            Some(payload) => {
                                self.emit_packet(&Packet { payload, ..pkt });
                                true
                            }
                            None => false,
                        }
                    }
                    None => {
                        let fresh = self.refresh_send_segs(qp.pdn, &mut engine.inflight[i]);
                        fresh && self.emit_gathered(&pkt, &mut engine.inflight[i].segs, off, n)
                    }
                };
                if !ok {
                    // The local pages vanished under the WQE.
                    let head = i == 0;
                    if head {
                        self.requester_failed(qp, engine, WcStatus::LocProtErr);
                        return;
                    }
                    blocked = true;
                    break;
                }
                sent_any = true;
                k += 1;
                if let Some(wqe) = engine.inflight.get_mut(i) {
                    wqe.sent = k;
                }
            }
            if blocked {
                break;
            }
        }
        if !uc && sent_any && engine.timer.is_none() && engine.rnr_wait.is_none() {
            self.start_ack_timer(qp, engine);
        }
        if !uc {
            self.count_inflight(engine);
        }
    }
}
