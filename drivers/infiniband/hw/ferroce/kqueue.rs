// SPDX-License-Identifier: GPL-2.0

//! Kernel queues: CQ, SQ and RQ rings in coherent memory owned by the
//! driver, their doorbell records (from [`crate::dbrec`]) and the kernel
//! doorbell page of BAR2 (page 0), for kernel consumers (ib_mad and the
//! GSI QP, rdma_cm, NVMe over RDMA, ...). The formats are the device's
//! (`Documentation/ferroce/device.rst`, "Work queues"); the provider does
//! the same in user memory.
//!
//! Posting and polling run in any context (hard IRQ included), under one
//! IRQ-safe spinlock per ring; the lock order is CQ, then (through the QP
//! table) a QP's ring.

#![forbid(unsafe_code)]

use crate::{
    bindings::{
        self as hw, //
    },
    dbrec::{
        DbRec,
        DbRecPool, //
    },
    ib::{
        IbDev,
        VLAN_ID_MASK,
        VLAN_VALID, //
    },
    rdma::{
        self,
        NetType,
        RecvWr,
        RecvWrs,
        SendOp,
        SendWr,
        SendWrs,
        Sge,
        Wc,
        WcOp,
        WcOut, //
    },
    regs, //
};
use core::{
    mem::size_of,
    sync::atomic::Ordering, //
};
use kernel::{
    dma::Coherent,
    io::{
        io_read,
        io_write, //
    },
    new_spinlock_irq,
    num::casts::{
        self,
        u32_into_u8,
        FromSafeCast, //
    },
    prelude::*,
    sync::barrier::{
        dma_mb,
        Read,
        Write, //
    },
    sync::SpinLockIrq,
    transmute::{
        AsBytes,
        FromBytes, //
    }, //
};

/// 4 KiB: the page size of the rings' page lists.
const RING_PAGE: usize = 4096;

const CQE_SIZE: usize = casts::u32_as_usize(hw::FERROCE_CQE_SIZE);
const SQ_WQE_SEG_OFFSET: usize = casts::u32_as_usize(hw::FERROCE_SQ_WQE_SEG_OFFSET);
const SQ_WQE_DATA_OFFSET: usize = casts::u32_as_usize(hw::FERROCE_SQ_WQE_DATA_OFFSET);
const RQ_WQE_DATA_OFFSET: usize = casts::u32_as_usize(hw::FERROCE_RQ_WQE_DATA_OFFSET);

/// Allocates a zeroed ring of at least `bytes` bytes (whole 4 KiB pages)
/// and returns it with the bus addresses of its pages.
fn alloc_ring(dev: &rdma::Device<IbDev>, bytes: usize) -> Result<(Coherent<[u64]>, KVec<u64>)> {
    let bytes = bytes.div_ceil(RING_PAGE) * RING_PAGE;
    let ring = Coherent::<u64>::zeroed_slice(dev.dma_device(), bytes / 8, GFP_KERNEL)?;
    let base = ring.dma_address();
    let n = bytes / RING_PAGE;
    let mut pages = KVec::with_capacity(n, GFP_KERNEL)?;
    for i in 0..n {
        pages.push(base + u64::from_safe_cast(i * RING_PAGE), GFP_KERNEL)?;
    }
    Ok((ring, pages))
}

/// Writes `bytes` (a multiple of 8 long) at byte `offset` of `ring`.
fn put_bytes(ring: &Coherent<[u64]>, offset: usize, bytes: &[u8]) -> Result {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        io_write!(ring, [try: offset / 8 + i], u64::from_ne_bytes(w));
    }
    Ok(())
}

fn put<S: AsBytes>(ring: &Coherent<[u64]>, offset: usize, s: &S) -> Result {
    put_bytes(ring, offset, s.as_bytes())
}

/// Writes a WQE's scatter/gather list at byte `offset` of `ring`.
fn put_sges(ring: &Coherent<[u64]>, offset: usize, sges: impl Iterator<Item = Sge>) -> Result {
    for (i, sge) in sges.enumerate() {
        let seg = hw::ferroce_sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
        put(ring, offset + i * size_of::<hw::ferroce_sge>(), &seg)?;
    }
    Ok(())
}

/// The value of an SQ or RQ doorbell (device.rst, "Doorbell pages").
fn qp_doorbell(qpn: u32, pi: u16) -> u64 {
    u64::from(qpn) & u64::from(hw::FERROCE_DB_QN_MASK) | u64::from(pi) << hw::FERROCE_DB_PI_SHIFT
}

/// Rings a doorbell of the kernel page.
fn ring_doorbell(dev: &rdma::Device<IbDev>, offset: u32, value: u64) -> Result {
    dev.shared
        .kernel_doorbell(usize::from_safe_cast(offset), value)
}

/// Whether a ring of `depth` slots with producer index `pi` and consumer
/// index `ci` (16-bit, free-running) has no free slot.
fn ring_full(pi: u16, ci: u16, depth: u16) -> bool {
    pi.wrapping_sub(ci) >= depth
}

/// Producer and consumer index of a ring (16-bit, free-running).
#[derive(Clone, Copy, Default)]
struct Indices {
    pi: u16,
    ci: u16,
}

impl Indices {
    /// Whether the ring of `depth` slots has no free slot.
    fn is_full(&self, depth: u16) -> bool {
        ring_full(self.pi, self.ci, depth)
    }

    /// Retires the WQEs up to and including `wqe_idx`: only forward, and
    /// never beyond what was posted.
    fn retire(&mut self, wqe_idx: u16) {
        let next = wqe_idx.wrapping_add(1);
        if next.wrapping_sub(self.ci) <= self.pi.wrapping_sub(self.ci) {
            self.ci = next;
        }
    }
}

/// An RQ's indices and whether a post rings its doorbell.
#[derive(Clone, Copy, Default)]
struct RqIndices {
    idx: Indices,
    /// post_recv rings the doorbell, because the QP may be in ERR
    /// (device.rst, "Posting rules"). Read and set under the ring's lock,
    /// so a post either sees it or came before the ring that set it.
    ring: bool,
}

/// A kernel CQ.
#[pin_data]
pub(crate) struct KernelCq {
    ring: Coherent<[u64]>,
    dbrec: DbRec,
    depth: u16,
    /// The consumer index.
    #[pin]
    ci: SpinLockIrq<u16>,
}

impl KernelCq {
    /// The consumer index.
    pub(crate) fn ci(&self) -> u16 {
        *self.ci.lock()
    }

    /// Allocates a CQ of `depth` entries (a power of two); returns it with
    /// the page addresses of its ring and its record's address.
    pub(crate) fn new(
        dev: &rdma::Device<IbDev>,
        depth: u16,
    ) -> Result<(Pin<KBox<Self>>, KVec<u64>)> {
        let bytes = usize::from(depth) * CQE_SIZE;
        let (ring, pages) = alloc_ring(dev, bytes)?;
        let dbrec = DbRecPool::alloc(&dev.shared.dbrecs, dev.dma_device())?;
        let cq = KBox::pin_init(
            try_pin_init!(Self {
                ring,
                dbrec,
                depth,
                ci <- new_spinlock_irq!(0),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok((cq, pages))
    }

    pub(crate) fn dbrec_addr(&self) -> u64 {
        self.dbrec.dma_addr()
    }

    /// Reads the CQE at index `ci` if the device has written it (phase
    /// rule), else `None`.
    fn cqe_at(&self, ci: u16) -> Result<Option<hw::ferroce_cqe>> {
        const WORDS: usize = CQE_SIZE / 8;
        let slot = usize::from(ci & (self.depth - 1)) * WORDS;
        let phase = ((ci >> self.depth.trailing_zeros()) & 1) ^ 1;
        // The owner byte is the last of the entry: check it first, then
        // read barrier, then the body (device.rst, phase rule).
        let last: u64 = io_read!(&self.ring, [try: slot + WORDS - 1]);
        let owner = last.to_ne_bytes()[7] & u32_into_u8::<{ hw::FERROCE_CQE_OWNER }>();
        if u16::from(owner) != phase {
            return Ok(None);
        }
        dma_mb(Read);
        let mut bytes = [0u8; CQE_SIZE];
        for (i, chunk) in bytes.chunks_exact_mut(8).enumerate() {
            let w: u64 = io_read!(&self.ring, [try: slot + i]);
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        // `bytes` holds the entry in memory order; its multi-byte fields
        // are little-endian (`__le*`) except `imm_data` (`__be32`, kept as
        // the wire bytes).
        Ok(
            hw::ferroce_cqe::from_bytes_copy(&bytes).map(|c| hw::ferroce_cqe {
                wr_id: u64::from_le(c.wr_id),
                byte_len: u32::from_le(c.byte_len),
                qpn: u32::from_le(c.qpn),
                src_qp: u32::from_le(c.src_qp),
                wqe_idx: u16::from_le(c.wqe_idx),
                ..c
            }),
        )
    }

    /// Polls up to `out.room()` completions.
    pub(crate) fn poll(&self, dev: &rdma::Device<IbDev>, out: &mut WcOut<'_, IbDev>) {
        let mut ci = self.ci.lock();
        let start = *ci;
        while out.room() > 0 {
            let Ok(Some(cqe)) = self.cqe_at(*ci) else {
                break;
            };
            *ci = ci.wrapping_add(1);
            let wc = wc_of(&cqe, |index| {
                let v = dev
                    .gid_vlans
                    .get(usize::from(index))?
                    .load(Ordering::Relaxed);
                (v & VLAN_VALID != 0).then_some(v & VLAN_ID_MASK)
            });
            // Retire the WQEs this completion covers (unsignaled ones
            // before it included).
            let idx = cqe.wqe_idx;
            let recv = matches!(wc.op, WcOp::Recv | WcOp::RecvRdmaWithImm);
            dev.with_qp(wc.qpn, |qp| {
                if let Some(k) = qp.kernel() {
                    k.retire(recv, idx);
                    // An error completion: the QP is in ERR.
                    if wc.status != hw::FERROCE_WC_SUCCESS {
                        k.rq_may_fail(dev, qp.qpn, true);
                    }
                }
            });
            // A completion of a QP that is gone is dropped.
            out.push(&wc);
        }
        if *ci != start {
            // The record tells the device how far the ring is consumed.
            // It lies inside its page by construction: a failed store is
            // a driver bug.
            kernel::warn_on!(self.dbrec.write(u32::from(*ci)).is_err());
        }
    }

    /// Arms the CQ; returns whether a completion is already waiting.
    pub(crate) fn arm(&self, dev: &rdma::Device<IbDev>, cqn: u32, solicited: bool) -> Result<bool> {
        let ci = *self.ci.lock();
        let cmd = if solicited {
            hw::FERROCE_CQ_CMD_ARM_SOLICITED
        } else {
            hw::FERROCE_CQ_CMD_ARM_NEXT
        };
        let value = u64::from(cqn) & u64::from(hw::FERROCE_DB_QN_MASK)
            | (u64::from(cmd) << hw::FERROCE_DB_CQ_CMD_SHIFT)
                & u64::from(hw::FERROCE_DB_CQ_CMD_MASK)
            | u64::from(ci) << hw::FERROCE_DB_CQ_CI_SHIFT;
        ring_doorbell(dev, hw::FERROCE_DB_CQ, value)?;
        Ok(self.cqe_at(ci)?.is_some())
    }
}

/// The work completion of a CQE; `vlan_of` gives the VLAN ID of a GID
/// entry (`None` if untagged).
fn wc_of(cqe: &hw::ferroce_cqe, vlan_of: impl Fn(u8) -> Option<u16>) -> Wc {
    let flags = u32::from(cqe.flags);
    let op = match u32::from(cqe.opcode) {
        hw::FERROCE_WC_SEND => WcOp::Send,
        hw::FERROCE_WC_RDMA_WRITE => WcOp::RdmaWrite,
        hw::FERROCE_WC_RDMA_READ => WcOp::RdmaRead,
        hw::FERROCE_WC_COMP_SWAP => WcOp::CompSwap,
        hw::FERROCE_WC_FETCH_ADD => WcOp::FetchAdd,
        hw::FERROCE_WC_LOCAL_INV => WcOp::LocalInv,
        hw::FERROCE_WC_REG_MR => WcOp::RegMr,
        hw::FERROCE_WC_RECV_RDMA_WITH_IMM => WcOp::RecvRdmaWithImm,
        _ => WcOp::Recv,
    };
    let status = u32::from(cqe.status).min(hw::FERROCE_WC_GENERAL_ERR);
    let grh = flags & hw::FERROCE_CQE_GRH != 0;
    let net_type = match (flags & hw::FERROCE_CQE_NET_TYPE_MASK) >> hw::FERROCE_CQE_NET_TYPE_SHIFT {
        hw::FERROCE_NET_ROCE_V1 => NetType::RoceV1,
        hw::FERROCE_NET_IPV4 => NetType::Ipv4,
        _ => NetType::Ipv6,
    };
    Wc {
        wr_id: cqe.wr_id,
        status,
        op,
        vendor_err: u32::from(cqe.vendor_err),
        byte_len: cqe.byte_len,
        qpn: cqe.qpn & hw::FERROCE_QPN_MASK,
        src_qp: cqe.src_qp & hw::FERROCE_QPN_MASK,
        imm_be: (flags & hw::FERROCE_CQE_WITH_IMM != 0).then_some(cqe.imm_data),
        invalidated: (flags & hw::FERROCE_CQE_WITH_INV != 0).then(|| u32::from_be(cqe.imm_data)),
        grh,
        net_type: grh.then_some(net_type),
        vlan: if flags & hw::FERROCE_CQE_GID_INDEX != 0 {
            vlan_of(cqe.gid_index)
        } else {
            None
        },
    }
}

/// Geometry of a kernel QP's rings and what the consumer was granted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpGeometry {
    /// A power of two (the rings' indices are 16-bit).
    pub(crate) sq_depth: u16,
    pub(crate) sq_shift: u32,
    /// A power of two, or 0 (no RQ).
    pub(crate) rq_depth: u16,
    pub(crate) rq_shift: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
    /// Where SGEs and inline data start in a send WQE.
    pub(crate) sq_data_offset: u32,
    /// Sends carry an inline address vector (UD, GSI).
    pub(crate) datagram: bool,
    /// The device executes atomics (`CAP_ATOMIC`, RC QPs).
    pub(crate) atomics: bool,
}

/// A kernel QP's rings.
#[pin_data]
pub(crate) struct KernelQp {
    geo: QpGeometry,
    sq: Coherent<[u64]>,
    sq_dbrec: DbRec,
    rq: Option<(Coherent<[u64]>, DbRec)>,
    #[pin]
    sq_idx: SpinLockIrq<Indices>,
    #[pin]
    rq_idx: SpinLockIrq<RqIndices>,
}

/// The page lists and records of a new kernel QP, for CREATE_QP.
pub(crate) struct KernelQpMem {
    pub(crate) sq_pages: KVec<u64>,
    pub(crate) sq_dbrec: u64,
    pub(crate) rq_pages: Option<KVec<u64>>,
    pub(crate) rq_dbrec: u64,
}

impl KernelQp {
    /// The producer and consumer indices of the SQ and the RQ:
    /// `((sq_pi, sq_ci), (rq_pi, rq_ci))`.
    pub(crate) fn indices(&self) -> ((u16, u16), (u16, u16)) {
        let sq = *self.sq_idx.lock();
        let rq = self.rq_idx.lock().idx;
        ((sq.pi, sq.ci), (rq.pi, rq.ci))
    }

    /// Allocates the rings of a QP of geometry `geo`.
    pub(crate) fn new(
        dev: &rdma::Device<IbDev>,
        geo: QpGeometry,
    ) -> Result<(Pin<KBox<Self>>, KernelQpMem)> {
        let new_dbrec = || DbRecPool::alloc(&dev.shared.dbrecs, dev.dma_device());
        let (sq, sq_pages) = alloc_ring(dev, usize::from(geo.sq_depth) << geo.sq_shift)?;
        let sq_dbrec = new_dbrec()?;
        let (rq, rq_pages) = if geo.rq_depth != 0 {
            let (ring, pages) = alloc_ring(dev, usize::from(geo.rq_depth) << geo.rq_shift)?;
            (Some((ring, new_dbrec()?)), Some(pages))
        } else {
            (None, None)
        };
        let mem = KernelQpMem {
            sq_pages,
            sq_dbrec: sq_dbrec.dma_addr(),
            rq_dbrec: rq.as_ref().map_or(0, |(_, r)| r.dma_addr()),
            rq_pages,
        };
        let qp = KBox::pin_init(
            try_pin_init!(Self {
                geo,
                sq,
                sq_dbrec,
                rq,
                sq_idx <- new_spinlock_irq!(Indices::default()),
                rq_idx <- new_spinlock_irq!(RqIndices::default()),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok((qp, mem))
    }

    /// Retires the WQEs up to and including `wqe_idx` of the SQ (or RQ).
    fn retire(&self, recv: bool, wqe_idx: u16) {
        if recv {
            self.rq_idx.lock().idx.retire(wqe_idx);
        } else {
            self.sq_idx.lock().retire(wqe_idx);
        }
    }

    /// Posts a chain of send WRs and rings the SQ doorbell once.
    pub(crate) fn post_send(
        &self,
        dev: &rdma::Device<IbDev>,
        qpn: u32,
        wrs: &mut SendWrs<'_, IbDev>,
    ) -> Result {
        let mut idx = self.sq_idx.lock();
        let start = idx.pi;
        let mut r = Ok(());
        for wr in wrs.by_ref() {
            if idx.is_full(self.geo.sq_depth) {
                r = Err(ENOMEM);
                break;
            }
            let slot = usize::from(idx.pi & (self.geo.sq_depth - 1));
            if let Err(e) = self.write_send_wqe(slot << self.geo.sq_shift, &wr) {
                r = Err(e);
                break;
            }
            idx.pi = idx.pi.wrapping_add(1);
        }
        if idx.pi != start {
            // WQEs, then the record, then the doorbell (device.rst,
            // posting rules); the MMIO write orders the record before it.
            dma_mb(Write);
            self.sq_dbrec.write(u32::from(idx.pi))?;
            ring_doorbell(dev, hw::FERROCE_DB_SQ, qp_doorbell(qpn, idx.pi))?;
        }
        r
    }

    fn write_send_wqe(&self, base: usize, wr: &SendWr<'_, IbDev>) -> Result {
        let geo = &self.geo;
        let flags = wr.flags();
        let op = wr.op();
        let mut hdr = hw::ferroce_sq_wqe_hdr {
            wr_id: wr.wr_id(),
            ..Default::default()
        };
        let mut wqe_flags = 0u32;
        if flags.signaled {
            wqe_flags |= hw::FERROCE_WQE_SIGNALED;
        }
        if flags.solicited {
            wqe_flags |= hw::FERROCE_WQE_SOLICITED;
        }
        if flags.fence {
            wqe_flags |= hw::FERROCE_WQE_FENCE;
        }
        let opcode = match op {
            SendOp::RdmaWrite => hw::FERROCE_WR_RDMA_WRITE,
            SendOp::RdmaWriteImm => hw::FERROCE_WR_RDMA_WRITE_IMM,
            SendOp::Send => hw::FERROCE_WR_SEND,
            SendOp::SendImm => hw::FERROCE_WR_SEND_IMM,
            SendOp::RdmaRead => hw::FERROCE_WR_RDMA_READ,
            SendOp::SendInv(_) => hw::FERROCE_WR_SEND_INV,
            SendOp::LocalInv(_) => hw::FERROCE_WR_LOCAL_INV,
            SendOp::RegMr => hw::FERROCE_WR_REG_MR,
            SendOp::AtomicCmpSwap if geo.atomics => hw::FERROCE_WR_ATOMIC_CMP_SWP,
            SendOp::AtomicFetchAdd if geo.atomics => hw::FERROCE_WR_ATOMIC_FETCH_ADD,
            SendOp::AtomicCmpSwap | SendOp::AtomicFetchAdd | SendOp::Unsupported(_) => {
                return Err(EINVAL)
            }
        };
        let datagram_ok = matches!(op, SendOp::Send | SendOp::SendImm);
        if geo.datagram && !datagram_ok {
            return Err(EINVAL);
        }
        match op {
            SendOp::RdmaWriteImm | SendOp::SendImm => hdr.imm_data = wr.imm_data_be(),
            SendOp::SendInv(key) | SendOp::LocalInv(key) => hdr.imm_data = key.to_be(),
            _ => {}
        }
        hdr.opcode = u8::try_from(opcode)?;

        // Segment at 32.
        let seg = SQ_WQE_SEG_OFFSET;
        let data = usize::from_safe_cast(geo.sq_data_offset);
        if let Some(rdma) = wr.rdma() {
            put(
                &self.sq,
                base + seg,
                &hw::ferroce_sq_wqe_rdma {
                    remote_addr: rdma.remote_addr,
                    rkey: rdma.rkey,
                    ..Default::default()
                },
            )?;
        } else if let Some(atomic) = wr.atomic() {
            put(
                &self.sq,
                base + seg,
                &hw::ferroce_sq_wqe_atomic {
                    remote_addr: atomic.remote_addr,
                    rkey: atomic.rkey,
                    compare_add: atomic.compare_add,
                    swap: atomic.swap,
                    ..Default::default()
                },
            )?;
        } else if geo.datagram {
            let ud = wr.ud().ok_or(EINVAL)?;
            wqe_flags |= hw::FERROCE_WQE_AV;
            put(
                &self.sq,
                base + seg,
                &hw::ferroce_sq_wqe_ud {
                    ahn: 0,
                    remote_qpn: ud.remote_qpn & hw::FERROCE_QPN_MASK,
                    remote_qkey: ud.remote_qkey,
                    ..Default::default()
                },
            )?;
            // The address vector and its 8 reserved bytes.
            put(&self.sq, base + SQ_WQE_DATA_OFFSET, &ud.ah.av)?;
            put_bytes(&self.sq, base + SQ_WQE_DATA_OFFSET + 40, &[0; 8])?;
        } else if let Some(reg) = wr.reg() {
            let (pbl, seg_reg) = crate::verbs::reg_mr_wqe(&reg)?;
            put(&self.sq, base + seg, &seg_reg)?;
            put(&self.sq, base + data, &pbl)?;
        } else {
            put_bytes(&self.sq, base + seg, &[0; 32])?;
        }

        // Data: SGEs or inline bytes (nothing for LOCAL_INV / REG_MR).
        if matches!(op, SendOp::LocalInv(_) | SendOp::RegMr) {
            hdr.num_sge = 0;
        } else if flags.inline {
            if matches!(
                op,
                SendOp::RdmaRead | SendOp::AtomicCmpSwap | SendOp::AtomicFetchAdd
            ) {
                return Err(EINVAL);
            }
            wqe_flags |= hw::FERROCE_WQE_INLINE;
            let mut len = 0usize;
            let mut word = [0u8; 8];
            let mut fill = 0usize;
            let room = usize::from_safe_cast(geo.max_inline);
            wr.for_each_inline(|bytes| {
                for &b in bytes {
                    if len >= room {
                        return Err(EINVAL);
                    }
                    word[fill] = b;
                    fill += 1;
                    len += 1;
                    if fill == 8 {
                        put_bytes(&self.sq, base + data + len - 8, &word)?;
                        fill = 0;
                    }
                }
                Ok(())
            })?;
            if fill != 0 {
                word[fill..].fill(0);
                put_bytes(&self.sq, base + data + len - fill, &word)?;
            }
            hdr.inline_len = u32::try_from(len)?;
        } else {
            let n = u8::try_from(wr.num_sge())?;
            if u32::from(n) > geo.max_send_sge {
                return Err(EINVAL);
            }
            put_sges(&self.sq, base + data, wr.sges())?;
            hdr.num_sge = n;
        }
        hdr.flags = u8::try_from(wqe_flags)?;
        // The header last: the device reads WQEs only up to the doorbell's
        // index, so the order inside a WQE does not matter to it.
        put(&self.sq, base, &hdr)
    }

    /// Posts a chain of receive WRs and updates the RQ record. The device
    /// reads the record when a message needs a WQE; the doorbell is rung
    /// only once the QP may be in ERR ([`Self::rq_may_fail`]), so that the
    /// device flushes the new WQEs: a doorbell write traps to the device,
    /// which a receive posted per message would pay every time.
    pub(crate) fn post_recv(
        &self,
        dev: &rdma::Device<IbDev>,
        qpn: u32,
        wrs: &mut RecvWrs<'_>,
    ) -> Result {
        let Some((ring, dbrec)) = self.rq.as_ref() else {
            return Err(EINVAL);
        };
        let geo = &self.geo;
        let mut rq = self.rq_idx.lock();
        let start = rq.idx.pi;
        let mut r = Ok(());
        for wr in wrs.by_ref() {
            let idx = &mut rq.idx;
            if idx.is_full(geo.rq_depth) {
                r = Err(ENOMEM);
                break;
            }
            let slot = usize::from(idx.pi & (geo.rq_depth - 1));
            if let Err(e) = put_recv_wqe(ring, slot << geo.rq_shift, &wr, geo.max_recv_sge) {
                r = Err(e);
                break;
            }
            idx.pi = idx.pi.wrapping_add(1);
        }
        let pi = rq.idx.pi;
        if pi != start {
            dma_mb(Write);
            dbrec.write(u32::from(pi))?;
            if rq.ring {
                ring_doorbell(dev, hw::FERROCE_DB_RQ, qp_doorbell(qpn, pi))?;
            }
        }
        r
    }

    /// The QP may be in ERR from now on: later receives ring the RQ
    /// doorbell. With `flush`, rings it once now if it was not rung
    /// already, for receives posted before this was known (the QP went to
    /// ERR on its own: an error completion or a fatal QP event). Without,
    /// the caller is about to move the QP to ERR, which flushes them.
    /// Any context.
    pub(crate) fn rq_may_fail(&self, dev: &rdma::Device<IbDev>, qpn: u32, flush: bool) {
        if self.rq.is_none() {
            return;
        }
        let mut rq = self.rq_idx.lock();
        if rq.ring {
            return;
        }
        rq.ring = true;
        if !flush {
            return;
        }
        // It fails only once the device is unbound, which flushes nothing
        // any more (ib_core's unregistration tears the QP down).
        if let Err(e) = ring_doorbell(dev, hw::FERROCE_DB_RQ, qp_doorbell(qpn, rq.idx.pi)) {
            dev_dbg!(
                dev.shared.dev(),
                "QP {}: no RQ flush doorbell (error {})\n",
                qpn,
                e.to_errno()
            );
        }
    }

    /// The QP went back to RESET: receives stop ringing.
    pub(crate) fn rq_reset(&self) {
        self.rq_idx.lock().ring = false;
    }
}

/// Writes receive WR `wr` as the RQ WQE at byte `base` of `ring` (an RQ or
/// an SRQ ring); `EINVAL` if it has more than `max_sge` SGEs.
fn put_recv_wqe(ring: &Coherent<[u64]>, base: usize, wr: &RecvWr<'_>, max_sge: u32) -> Result {
    let n = u8::try_from(wr.num_sge())?;
    if u32::from(n) > max_sge {
        return Err(EINVAL);
    }
    put_sges(ring, base + RQ_WQE_DATA_OFFSET, wr.sges())?;
    put(
        ring,
        base,
        &hw::ferroce_rq_wqe_hdr {
            wr_id: wr.wr_id(),
            num_sge: n,
            ..Default::default()
        },
    )
}

/// A kernel SRQ's ring and record (`Documentation/ferroce/device.rst`,
/// "Shared receive queues"): the driver writes the producer index, the
/// device the consumer index, so a slot is free again as soon as the
/// device took its WQE.
#[pin_data]
pub(crate) struct KernelSrq {
    ring: Coherent<[u64]>,
    dbrec: DbRec,
    depth: u16,
    shift: u32,
    max_sge: u32,
    /// The producer index.
    #[pin]
    pi: SpinLockIrq<u16>,
}

impl KernelSrq {
    /// Allocates an SRQ ring of `depth` WQEs (a power of two) of
    /// `1 << shift` bytes; returns it with its pages and record address.
    pub(crate) fn new(
        dev: &rdma::Device<IbDev>,
        depth: u16,
        shift: u32,
        max_sge: u32,
    ) -> Result<(Pin<KBox<Self>>, KVec<u64>, u64)> {
        let (ring, pages) = alloc_ring(dev, usize::from(depth) << shift)?;
        let dbrec = DbRecPool::alloc(&dev.shared.dbrecs, dev.dma_device())?;
        let addr = dbrec.dma_addr();
        let srq = KBox::pin_init(
            try_pin_init!(Self {
                ring,
                dbrec,
                depth,
                shift,
                max_sge,
                pi <- new_spinlock_irq!(0),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok((srq, pages, addr))
    }

    /// The producer index and the consumer index the device wrote back.
    pub(crate) fn indices(&self) -> (u16, u16) {
        let pi = *self.pi.lock();
        (pi, self.device_ci())
    }

    fn device_ci(&self) -> u16 {
        // The index is bits 15:0 of the device's half.
        regs::lower_16_bits(self.dbrec.read_device_half().unwrap_or(0))
    }

    /// Posts a chain of receive WRs and publishes them in the record (an
    /// SRQ has no doorbell).
    pub(crate) fn post(&self, wrs: &mut RecvWrs<'_>) -> Result {
        let mut pi = self.pi.lock();
        let start = *pi;
        // The device's consumer index is read once per call: slots it frees
        // meanwhile are only found by the next call.
        let ci = self.device_ci();
        let mut r = Ok(());
        for wr in wrs.by_ref() {
            if ring_full(*pi, ci, self.depth) {
                r = Err(ENOMEM);
                break;
            }
            let slot = usize::from(*pi & (self.depth - 1));
            if let Err(e) = put_recv_wqe(&self.ring, slot << self.shift, &wr, self.max_sge) {
                r = Err(e);
                break;
            }
            *pi = pi.wrapping_add(1);
        }
        if *pi != start {
            // WQEs before the index that publishes them.
            dma_mb(Write);
            self.dbrec.write(u32::from(*pi))?;
        }
        r
    }
}

#[kunit_tests(ferroce_kqueue)]
mod tests {
    use super::*;

    #[test]
    fn retire_moves_forward_within_posted() {
        let mut i = Indices { pi: 5, ci: 2 };
        i.retire(3);
        assert_eq!(i.ci, 4);
        // Backwards and beyond the producer index are ignored.
        i.retire(1);
        assert_eq!(i.ci, 4);
        i.retire(9);
        assert_eq!(i.ci, 4);
        i.retire(4);
        assert_eq!(i.ci, 5);
        // Across the 16-bit wrap.
        let mut w = Indices { pi: 2, ci: 0xfffe };
        w.retire(0xffff);
        assert_eq!(w.ci, 0);
        w.retire(1);
        assert_eq!(w.ci, 2);
    }

    #[test]
    fn full_at_depth_across_the_wrap() {
        assert!(!Indices { pi: 3, ci: 0 }.is_full(4));
        assert!(Indices { pi: 4, ci: 0 }.is_full(4));
        assert!(!Indices { pi: 1, ci: 0xfffe }.is_full(4));
        assert!(Indices { pi: 2, ci: 0xfffe }.is_full(4));
        assert!(!ring_full(0, 0, 1));
        assert!(ring_full(0x8000, 0, 0x8000));
    }
}
