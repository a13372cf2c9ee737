// SPDX-License-Identifier: GPL-2.0
//! Packets out: the path a QP or AH sends on, packets built on it and
//! encoded into frames (payloads gathered straight into the frame), and
//! the TX queue frames wait in for the wire.

use crate::device::State;
use crate::hw::*;
use crate::wire::{self, Aeth, AtomicEth, Bth, Deth, NetHdr, NetKind, Packet, Reth};

use super::{Path, Segments, READ_RESPONSE_QUEUE, SPARE_FRAMES_MAX, TX_QUEUE_HARD_MAX};

impl State {
    /// Resolves an address vector into a path (None: the sgid entry is gone
    /// or does not match the AV's network type).
    pub(super) fn path_of(&self, av: &Av, src_qpn: u32, dst_qpn: u32) -> Option<Path> {
        let g = self.gids.get(usize::from(av.sgid_index))?.as_ref()?;
        if g.network_type != av.network_type {
            return None;
        }
        let kind = NetKind::from_hw(av.network_type)?;
        let sport = if av.udp_sport != 0 {
            av.udp_sport
        } else {
            wire::udp_sport(av.flow_label, src_qpn, dst_qpn)
        };
        Some(Path {
            dmac: av.dmac,
            smac: g.smac,
            vlan: g
                .vlan
                .map(|vid| u16::from(av.sl & 7) << wire::VLAN_PRIO_SHIFT | vid),
            kind,
            sgid: g.gid,
            dgid: av.dgid,
            tc: av.traffic_class,
            flow_label: av.flow_label & 0xfffff,
            hop: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            sport,
        })
    }

    /// A packet on `path` with these headers and `payload`, to encode and
    /// queue with [`Self::emit_packet`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn data_packet<'a>(
        &self,
        path: &Path,
        bth: Bth,
        reth: Reth,
        aeth: Aeth,
        deth: Deth,
        imm: [u8; 4],
        payload: &'a [u8],
    ) -> Packet<'a> {
        let mut pkt = Self::packet_on(path, self.ip_id, bth, payload);
        pkt.reth = reth;
        pkt.aeth = aeth;
        pkt.deth = deth;
        pkt.imm = imm;
        // SEND with invalidate: the key travels where ImmDt would.
        pkt.ieth = u32::from_be_bytes(imm);
        pkt
    }

    /// A packet on `path` with `bth` and `payload`, other headers empty.
    pub(super) fn packet_on<'a>(
        path: &Path,
        ip_id: u16,
        bth: Bth,
        payload: &'a [u8],
    ) -> Packet<'a> {
        let net = NetHdr {
            kind: path.kind,
            sgid: path.sgid,
            dgid: path.dgid,
            traffic_class: path.tc,
            flow_label: path.flow_label,
            hop_limit: path.hop,
        };
        Packet {
            dmac: path.dmac,
            smac: path.smac,
            vlan: path.vlan,
            udp_sport: path.sport,
            ip_id,
            ..Packet::new(net, bth, payload)
        }
    }

    /// Encodes `pkt` and queues it.
    pub(super) fn emit_packet(&mut self, pkt: &Packet<'_>) {
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut frame = self.new_frame(pkt.payload.len());
        if !wire::encode(pkt, &mut frame) {
            self.recycle_frames([frame]);
            return;
        }
        self.emit(frame);
    }

    /// An empty buffer for a frame with `payload` bytes of payload: a sent
    /// frame's given back ([`State::recycle_frames`]) if there is one.
    pub(super) fn new_frame(&mut self, payload: usize) -> Vec<u8> {
        let mut frame = self.spare_frames.pop().unwrap_or_default();
        frame.clear();
        frame.reserve(payload + 96);
        frame
    }

    /// Keeps the buffers of sent frames for new ones, up to
    /// [`SPARE_FRAMES_MAX`]; the rest are freed.
    pub(crate) fn recycle_frames(&mut self, frames: impl IntoIterator<Item = Vec<u8>>) {
        let room = SPARE_FRAMES_MAX.saturating_sub(self.spare_frames.len());
        self.spare_frames.extend(frames.into_iter().take(room));
    }

    /// Encodes `pkt` with the `len` payload bytes at offset `off` of a
    /// message's segments gathered straight into the frame, and queues it;
    /// false (nothing queued) if they cannot be read.
    pub(super) fn emit_gathered(
        &mut self,
        pkt: &Packet<'_>,
        segs: &mut Segments,
        off: u64,
        len: usize,
    ) -> bool {
        let mut frame = self.new_frame(len);
        let (mem, steps, mut dma_failed) = (&*self.mem, &mut self.data.sg_steps, false);
        let ok = wire::encode_with(
            pkt,
            len,
            |dst| Self::gather_into(mem, steps, segs, off, dst, &mut dma_failed),
            &mut frame,
        );
        if dma_failed {
            self.counters.hw.bad_dma += 1;
        }
        if !ok {
            self.recycle_frames([frame]);
            return false;
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        self.emit(frame);
        true
    }

    /// Sends an atomic request (`bth` carries its opcode and PSN).
    pub(super) fn send_atomic(&mut self, path: &Path, bth: Bth, atomic: AtomicEth) {
        let mut pkt = Self::packet_on(path, self.ip_id, bth, &[]);
        pkt.atomic = atomic;
        self.emit_packet(&pkt);
    }

    /// Sends an ATOMIC_WRITE or FLUSH request (1.8; `bth` carries its
    /// opcode and PSN): the RETH, the FETH word `feth` (FLUSH only) and
    /// `payload` (ATOMIC_WRITE only, the encoder drops it for a FLUSH).
    pub(super) fn send_placement(
        &mut self,
        path: &Path,
        bth: Bth,
        reth: Reth,
        feth: u32,
        payload: &[u8],
    ) {
        let mut pkt = Self::packet_on(path, self.ip_id, bth, payload);
        pkt.reth = reth;
        pkt.feth = feth;
        self.emit_packet(&pkt);
    }

    /// Sends an ATOMIC_ACKNOWLEDGE carrying the original value `orig`.
    pub(super) fn send_atomic_ack(&mut self, path: &Path, bth: Bth, aeth: Aeth, orig: u64) {
        let mut pkt = Self::packet_on(path, self.ip_id, bth, &[]);
        pkt.aeth = aeth;
        pkt.atomic_ack = orig;
        self.emit_packet(&pkt);
    }

    /// Encodes and queues a responder packet (ACK/NAK or READ response).
    pub(super) fn send_response(&mut self, path: &Path, bth: Bth, aeth: Aeth, payload: &[u8]) {
        let (reth, deth) = (Reth::default(), Deth::default());
        let pkt = self.data_packet(path, bth, reth, aeth, deth, [0; 4], payload);
        self.emit_packet(&pkt);
    }

    /// Queues a frame: to the loopback queue if it is for our own MAC.
    pub(crate) fn emit(&mut self, frame: Vec<u8>) {
        if self.faults.cfg.active() || self.faults.held.is_some() {
            let now = self.now_ns;
            for f in self.faults.apply(frame, now) {
                self.queue_frame(f);
            }
        } else {
            self.queue_frame(frame);
        }
    }

    /// Queues a frame after fault injection: for one of the port's own
    /// MACs to the loopback queue only; for any other MAC to the wire; and
    /// (1.7, device.rst "Multicast") for a group MAC to the wire and a copy
    /// to the loopback queue as well, so that the port's QPs attached to
    /// the group, the sender's included, receive it. The frame counts once
    /// in `tx_frames`, the copy in `loopback_frames`.
    pub(crate) fn queue_frame(&mut self, frame: Vec<u8>) {
        let len = frame.len() as u64;
        let dmac = frame.get(0..6).and_then(|m| <&[u8; 6]>::try_from(m).ok());
        let to_self = dmac.is_some_and(|m| self.answers_mac(m));
        let to_group = !to_self && dmac.is_some_and(wire::is_multicast_mac);
        if to_self {
            self.data.loopback_frames += 1;
            self.loopback.push_back(frame);
        } else {
            if to_group {
                self.data.loopback_frames += 1;
                self.loopback.push_back(frame.clone());
            }
            if self.tx.len() >= TX_QUEUE_HARD_MAX {
                self.data.tx_overflow += 1;
                if !to_group {
                    return;
                }
            } else {
                self.tx.push_back(frame);
            }
        }
        self.data.tx_frames += 1;
        self.data.tx_bytes += len;
        let queued = (self.tx.len() + self.loopback.len()) as u64;
        self.data.tx_queue_peak = self.data.tx_queue_peak.max(queued);
    }

    /// Frames the TX and loopback queues still take before producers that
    /// can wait (READ responses) stop.
    pub(crate) fn tx_room(&self) -> usize {
        READ_RESPONSE_QUEUE.saturating_sub(self.tx.len() + self.loopback.len())
    }
}
