// SPDX-License-Identifier: GPL-2.0
//! UD and GSI QPs: one-packet SENDs to an address handle or an inline
//! address vector, and their reception with a GRH; (1.7) the reception of
//! datagrams to multicast groups by every UD QP attached to the group.
//!
//! A datagram is received in three steps, which unicast and multicast
//! share: the Q_Key of the receiving QP ([`State::ud_qkey_ok`]), the GID
//! entry it is addressed to ([`State::ud_gid_index`]), and the delivery
//! into one receive WQE of the QP ([`State::ud_deliver`]). A unicast
//! datagram runs them in this order for its QP; a multicast datagram
//! finds its GID entry once and then runs the Q_Key check and the
//! delivery for each attached QP.

use super::codes::WcStatus;
use crate::device::State;
use crate::gid::GidEntry;
use crate::hw::*;
use crate::wire::{self, op, psn_add, Aeth, Bth, Deth, NetKind, Packet, Reth};

use super::{wqe_struct, Engine, QpCtx, RecvCtx, RecvWqe, SendWqe, UdDest, GRH_LEN};

impl State {
    /// The Q_Key of a UD/GSI QP: the GSI QP's is always 0x80010000.
    pub(super) fn qp_qkey(qp: &QpCtx) -> u32 {
        if qp.qp_type == QPT_GSI {
            wire::GSI_QKEY
        } else {
            qp.attr.qkey
        }
    }

    /// Resolves the destination of a UD/GSI send WQE, from its AH or from
    /// its inline address vector (`WQE_AV`); returns where its SGEs or
    /// inline data start.
    pub(super) fn decode_ud_dest(
        &mut self,
        qp: &QpCtx,
        raw: &[u8],
        wqe: &mut SendWqe,
    ) -> Result<usize, WcStatus> {
        let dest: SqWqeUd = wqe_struct(raw, SQ_WQE_SEG_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
        let (av, data) = if wqe.flags & WQE_AV != 0 {
            let av: Av = wqe_struct(raw, SQ_WQE_DATA_OFFSET).ok_or(WcStatus::LocQpOpErr)?;
            let av_end = SQ_WQE_DATA_OFFSET + core::mem::size_of::<Av>();
            let reserved = raw
                .get(av_end..SQ_WQE_AV_DATA_OFFSET)
                .ok_or(WcStatus::LocQpOpErr)?;
            if dest.ahn != 0 || reserved.iter().any(|b| *b != 0) || self.check_av(&av).is_err() {
                return Err(WcStatus::LocQpOpErr);
            }
            (av, SQ_WQE_AV_DATA_OFFSET)
        } else {
            let av = self
                .ahs
                .get(dest.ahn)
                .filter(|ah| ah.pdn == qp.pdn)
                .map(|ah| ah.av)
                .ok_or(WcStatus::LocQpOpErr)?;
            (av, SQ_WQE_DATA_OFFSET)
        };
        let qpn = dest.remote_qpn & QPN_MASK;
        let qkey = if dest.remote_qkey & 0x8000_0000 != 0 {
            Self::qp_qkey(qp)
        } else {
            dest.remote_qkey
        };
        let path = self.path_of(&av, qp.qpn, qpn).ok_or(WcStatus::LocQpOpErr)?;
        wqe.ud = Some(UdDest { path, qpn, qkey });
        Ok(data)
    }

    pub(super) fn ud_transmit(&mut self, qp: &QpCtx, engine: &mut Engine) {
        while let Some(mut wqe) = engine.inflight.pop_front() {
            engine.sq_ci = wqe.idx.wrapping_add(1);
            if let Some(status) = wqe.error {
                self.send_queue_error(qp, engine, &wqe, status);
                return;
            }
            let Some(dest) = wqe.ud else {
                // Not reached: a UD WQE without a destination fails to decode.
                self.send_queue_error(qp, engine, &wqe, WcStatus::LocQpOpErr);
                return;
            };
            let mut payload = Vec::new();
            let ok = match &wqe.inline {
                Some(v) => {
                    payload.extend_from_slice(v);
                    true
                }
                None => self.gather(&mut wqe.segs, 0, wqe.len as usize, &mut payload),
            };
            if !ok {
                // The local memory cannot be read (any more): the same
                // local error as a refused SGE, nothing is sent.
                self.send_queue_error(qp, engine, &wqe, WcStatus::LocProtErr);
                return;
            }
            let opcode = if wqe.opcode == WR_SEND_IMM {
                op::UD_SEND_ONLY_IMM
            } else {
                op::UD_SEND_ONLY
            };
            let bth = Bth {
                opcode,
                se: wqe.flags & WQE_SOLICITED != 0,
                pkey: wire::DEFAULT_PKEY,
                dest_qp: dest.qpn,
                psn: engine.next_psn,
                ..Bth::default()
            };
            engine.next_psn = psn_add(engine.next_psn, 1);
            let deth = Deth {
                qkey: dest.qkey,
                src_qp: qp.qpn,
            };
            let pkt = self.data_packet(
                &dest.path,
                bth,
                Reth::default(),
                Aeth::default(),
                deth,
                wqe.imm,
                &payload,
            );
            self.emit_packet(&pkt);
            self.complete_send(qp, &wqe, WcStatus::Success);
        }
    }

    /// A unicast datagram for UD/GSI QP `qp`: its Q_Key (else
    /// `rx_bad_key`), then the GID entry it is addressed to, the one of
    /// its destination GID on its encapsulation and VLAN (else
    /// `rx_bad_addr`), then its delivery.
    pub(super) fn ud_receive(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
        frame: &[u8],
    ) {
        if !self.ud_qkey_ok(qp, pkt) {
            return;
        }
        let Some(gid_index) = self.ud_gid_index(pkt, |g| g.gid == pkt.net.dgid) else {
            return;
        };
        self.ud_deliver(qp, engine, pkt, frame, gid_index);
    }

    /// A datagram to a multicast group (1.7, device.rst "Multicast"),
    /// after the P_Key check. It must be a UD SEND to `MCAST_QPN` with a
    /// multicast destination GID, for a group a QP is attached to
    /// (`rx_no_qp`), on the encapsulation and VLAN of a GID entry
    /// (`rx_bad_addr`; the first such entry is the CQEs' `gid_index`).
    /// Then every attached QP, in group order, receives its own copy as a
    /// unicast datagram would: its state (`rx_no_qp`), its Q_Key
    /// (`rx_bad_key`) and its receive WQE (`rx_ud_no_wqe`) are its own,
    /// and a copy one QP cannot take is lost for that QP only.
    pub(super) fn mcast_receive(&mut self, pkt: &Packet<'_>, frame: &[u8]) {
        let ud_send = matches!(pkt.bth.opcode, op::UD_SEND_ONLY | op::UD_SEND_ONLY_IMM);
        if !ud_send || pkt.bth.dest_qp != MCAST_QPN || !crate::gid::is_multicast(&pkt.net.dgid) {
            self.data.rx_no_qp += 1;
            return;
        }
        let Some(qpns) = self
            .mcast
            .iter()
            .find(|g| g.gid == pkt.net.dgid)
            .map(|g| g.qpns.clone())
        else {
            self.data.rx_no_qp += 1;
            return;
        };
        let Some(gid_index) = self.ud_gid_index(pkt, |_| true) else {
            return;
        };
        for qpn in qpns {
            let receives = self
                .qp_ctx(qpn)
                .filter(|c| c.qp_type == QPT_UD && c.takes_datagrams());
            let Some(qp) = receives else {
                self.data.rx_no_qp += 1;
                continue;
            };
            self.lend_engine(&qp, |st, qp, engine| {
                if st.ud_qkey_ok(qp, pkt) {
                    st.ud_deliver(qp, engine, pkt, frame, gid_index);
                }
            });
        }
    }

    /// Whether a datagram carries the Q_Key of QP `qp` (else counted in
    /// `rx_bad_key`).
    fn ud_qkey_ok(&mut self, qp: &QpCtx, pkt: &Packet<'_>) -> bool {
        let ok = pkt.deth.qkey == Self::qp_qkey(qp);
        if !ok {
            self.data.rx_bad_key += 1;
        }
        ok
    }

    /// The index of the first valid GID entry on a datagram's
    /// encapsulation and VLAN that `addressed` accepts: the entry the
    /// datagram is addressed to, reported in the CQE. None (counted in
    /// `rx_bad_addr`) if there is none.
    fn ud_gid_index(
        &mut self,
        pkt: &Packet<'_>,
        addressed: impl Fn(&GidEntry) -> bool,
    ) -> Option<u8> {
        let index = self
            .gids
            .iter()
            .flatten()
            .find(|g| {
                g.network_type == pkt.net.kind.to_hw()
                    && g.vid() == super::vid(pkt.vlan)
                    && addressed(g)
            })
            .and_then(|g| u8::try_from(g.index).ok());
        if index.is_none() {
            self.data.rx_bad_addr += 1;
        }
        index
    }

    /// Delivers a datagram whose Q_Key and address were checked to UD/GSI
    /// QP `qp`: into the receive WQE it takes (RQ or SRQ; none: dropped,
    /// `rx_ud_no_wqe`), the GRH area first, and a CQE naming GID entry
    /// `gid_index`.
    fn ud_deliver(
        &mut self,
        qp: &QpCtx,
        engine: &mut Engine,
        pkt: &Packet<'_>,
        frame: &[u8],
        gid_index: u8,
    ) {
        let Some(recv) = self.recv_take(qp, engine) else {
            self.data.rx_ud_no_wqe += 1;
            return;
        };
        if let Some(st) = recv.wqe.error {
            self.recv_failed(qp, engine, &recv, st, 0);
            return;
        }
        Self::recv_consumed(engine, &recv);
        let RecvCtx {
            idx,
            wqe:
                RecvWqe {
                    wr_id,
                    mut segs,
                    cap,
                    ..
                },
            ..
        } = recv;
        let mut grh = [0u8; GRH_LEN as usize];
        let l3 = wire::l2_header(frame).map_or(wire::ETH_HLEN, |(_, _, l3)| l3);
        match pkt.net.kind {
            NetKind::Ipv4 => {
                if let Some(h) = frame.get(l3..l3 + wire::IPV4_HLEN) {
                    grh[20..].copy_from_slice(h);
                }
            }
            _ => {
                if let Some(h) = frame.get(l3..l3 + wire::IPV6_HLEN) {
                    grh.copy_from_slice(h);
                }
            }
        }
        let total = u64::from(GRH_LEN) + pkt.payload.len() as u64;
        let mut cqe = Cqe {
            wr_id,
            qpn: qp.qpn,
            src_qp: pkt.deth.src_qp,
            opcode: WC_RECV,
            wqe_idx: idx,
            ..Cqe::zeroed()
        };
        if total > cap {
            cqe.status = WcStatus::LocLenErr.to_hw();
        } else if !self.scatter(&mut segs, 0, &grh)
            || !self.scatter(&mut segs, u64::from(GRH_LEN), pkt.payload)
        {
            cqe.status = WcStatus::LocProtErr.to_hw();
        } else {
            cqe.byte_len = total as u32;
            cqe.flags = CQE_GRH | CQE_GID_INDEX | (pkt.net.kind.to_hw() << CQE_NET_TYPE_SHIFT);
            cqe.gid_index = gid_index;
            if pkt.bth.opcode == op::UD_SEND_ONLY_IMM {
                cqe.flags |= CQE_WITH_IMM;
                cqe.imm_data = u32::from_le_bytes(pkt.imm);
            }
            if pkt.bth.se {
                cqe.flags |= CQE_SOLICITED;
            }
        }
        self.post_data_cqe(qp.recv_cqn, cqe);
    }
}
