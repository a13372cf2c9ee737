// SPDX-License-Identifier: GPL-2.0

//! Safe views of the work requests kernel consumers post
//! (`struct ib_send_wr` and its containers, `struct ib_recv_wr`) and of the
//! work completions a driver hands back (`struct ib_wc`).

use super::{
    device::{
        Device,
        Driver, //
    },
    unions, //
};
use crate::bindings as b;
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};
use kernel::{
    num::casts::{
        u32_into_u8,
        FromSafeCast, //
    },
    prelude::*, //
};

/// One scatter/gather element of a work request.
#[derive(Clone, Copy, Debug)]
pub struct Sge {
    /// DMA address (or, for inline data, kernel virtual address).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region the element lies in.
    pub lkey: u32,
}

/// What a send work request asks for (`enum ib_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate data.
    RdmaWriteImm,
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm,
    /// RDMA READ.
    RdmaRead,
    /// SEND with invalidate of the given key at the responder.
    SendInv(u32),
    /// Local invalidate of the given key.
    LocalInv(u32),
    /// Fast registration of an MR ([`SendWr::reg`]).
    RegMr,
    /// Atomic compare and swap ([`SendWr::atomic`]).
    AtomicCmpSwap,
    /// Atomic fetch and add ([`SendWr::atomic`]).
    AtomicFetchAdd,
    /// Anything else (masked atomics, LSO, ...): not supported.
    Unsupported(u32),
}

/// Flags of a send work request (`IB_SEND_*`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SendFlags {
    /// Wait for prior RDMA READs and atomics (`IB_SEND_FENCE`).
    pub fence: bool,
    /// Generate a completion (`IB_SEND_SIGNALED`).
    pub signaled: bool,
    /// Set the solicited event bit (`IB_SEND_SOLICITED`).
    pub solicited: bool,
    /// The data is copied into the WQE (`IB_SEND_INLINE`).
    pub inline: bool,
}

/// The RDMA part of an RDMA READ/WRITE request (`struct ib_rdma_wr`).
#[derive(Clone, Copy, Debug)]
pub struct RdmaSeg {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key of the target region.
    pub rkey: u32,
}

/// The atomic part of an atomic request (`struct ib_atomic_wr`).
#[derive(Clone, Copy, Debug)]
pub struct AtomicSeg {
    /// Remote virtual address of the 8-byte target.
    pub remote_addr: u64,
    /// Remote key of the target region.
    pub rkey: u32,
    /// Compare data (compare and swap) or the addend (fetch and add).
    pub compare_add: u64,
    /// Swap data (compare and swap).
    pub swap: u64,
}

/// The datagram part of a UD/GSI send (`struct ib_ud_wr`).
pub struct UdSeg<'a, A> {
    /// The driver state of the address handle.
    pub ah: &'a A,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Q_Key of the destination QP.
    pub remote_qkey: u32,
}

/// A fast registration request (`struct ib_reg_wr`) with the MR's mapping
/// as `map_mr_sg` left it.
pub struct RegSeg<'a, M> {
    /// The driver state of the MR.
    pub mr: &'a M,
    /// The key the MR gets (the consumer may have changed its variant).
    pub key: u32,
    /// `IB_ACCESS_*`.
    pub access: u32,
    /// Start address, length and page size of the mapping.
    pub iova: u64,
    /// Length of the mapping in bytes.
    pub length: u64,
    /// Page size of the mapping.
    pub page_size: u32,
}

/// One send work request of a chain.
///
/// # Invariants
///
/// `raw` is a send WR of a chain ib_core's `post_send` was called with, on
/// a QP of type `qp_type` of a device of driver `T`: valid for `'a`, its
/// `sg_list` holds `num_sge` entries, and it is embedded in the container
/// its opcode and the QP type imply (`ib_rdma_wr`, `ib_atomic_wr`,
/// `ib_ud_wr`, `ib_reg_wr`), whose AH or MR are live objects of this device.
pub struct SendWr<'a, T: Driver> {
    raw: &'a b::ib_send_wr,
    qp_type: u32,
    _t: PhantomData<T>,
}

impl<'a, T: Driver> SendWr<'a, T> {
    /// The consumer's identifier (or `ib_cqe` pointer), returned in the
    /// completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 64-bit plain data.
        unsafe { unions::read::<_, u64>(&self.raw.__bindgen_anon_1) }
    }

    /// The operation.
    pub fn op(&self) -> SendOp {
        // SAFETY: both members of `ex` are 32-bit plain data.
        let inv = unsafe { unions::read::<_, u32>(&self.raw.ex) };
        match self.raw.opcode {
            b::ib_wr_opcode_IB_WR_RDMA_WRITE => SendOp::RdmaWrite,
            b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => SendOp::RdmaWriteImm,
            b::ib_wr_opcode_IB_WR_SEND => SendOp::Send,
            b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => SendOp::SendImm,
            b::ib_wr_opcode_IB_WR_RDMA_READ => SendOp::RdmaRead,
            b::ib_wr_opcode_IB_WR_SEND_WITH_INV => SendOp::SendInv(inv),
            b::ib_wr_opcode_IB_WR_LOCAL_INV => SendOp::LocalInv(inv),
            b::ib_wr_opcode_IB_WR_REG_MR => SendOp::RegMr,
            b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => SendOp::AtomicCmpSwap,
            b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => SendOp::AtomicFetchAdd,
            other => SendOp::Unsupported(other),
        }
    }

    /// The immediate data, in network order as the consumer stored it.
    pub fn imm_data_be(&self) -> u32 {
        // SAFETY: both members of `ex` are 32-bit plain data.
        unsafe { unions::read::<_, u32>(&self.raw.ex) }
    }

    /// `IB_SEND_*` flags.
    pub fn flags(&self) -> SendFlags {
        let f = self.raw.send_flags;
        SendFlags {
            fence: f & b::ib_send_flags_IB_SEND_FENCE != 0,
            signaled: f & b::ib_send_flags_IB_SEND_SIGNALED != 0,
            solicited: f & b::ib_send_flags_IB_SEND_SOLICITED != 0,
            inline: f & b::ib_send_flags_IB_SEND_INLINE != 0,
        }
    }

    /// The scatter/gather list.
    pub fn sges(&self) -> impl Iterator<Item = Sge> + '_ {
        sge_list(self.raw.sg_list, self.raw.num_sge)
    }

    /// Number of SGEs (0 for a negative count).
    pub fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }

    /// Calls `f` with the bytes of each SGE of an `IB_SEND_INLINE` request,
    /// in order. Empty for other requests.
    pub fn for_each_inline(&self, mut f: impl FnMut(&[u8]) -> Result) -> Result {
        if !self.flags().inline {
            return Ok(());
        }
        for sge in self.sges() {
            if sge.length == 0 {
                continue;
            }
            let p = sge.addr as usize as *const u8;
            if p.is_null() {
                return Err(EINVAL);
            }
            let len = usize::from_safe_cast(sge.length);
            // SAFETY: for `IB_SEND_INLINE` the verbs contract has `addr` be
            // a kernel virtual address of `length` readable bytes, valid
            // during `post_send` (the driver copies them into the WQE).
            let bytes = unsafe { core::slice::from_raw_parts(p, len) };
            f(bytes)?;
        }
        Ok(())
    }

    /// The RDMA segment of an RDMA READ/WRITE request.
    pub fn rdma(&self) -> Option<RdmaSeg> {
        matches!(
            self.op(),
            SendOp::RdmaWrite | SendOp::RdmaWriteImm | SendOp::RdmaRead
        )
        .then(|| {
            // SAFETY: RDMA opcodes are posted in an `ib_rdma_wr` (type
            // invariant), whose first member is the send WR.
            let r = unsafe { &*core::ptr::from_ref(self.raw).cast::<b::ib_rdma_wr>() };
            RdmaSeg {
                remote_addr: r.remote_addr,
                rkey: r.rkey,
            }
        })
    }

    /// The atomic segment of an atomic request.
    pub fn atomic(&self) -> Option<AtomicSeg> {
        matches!(self.op(), SendOp::AtomicCmpSwap | SendOp::AtomicFetchAdd).then(|| {
            // SAFETY: atomic opcodes are posted in an `ib_atomic_wr` (type
            // invariant), whose first member is the send WR.
            let a = unsafe { &*core::ptr::from_ref(self.raw).cast::<b::ib_atomic_wr>() };
            AtomicSeg {
                remote_addr: a.remote_addr,
                rkey: a.rkey,
                compare_add: a.compare_add,
                swap: a.swap,
            }
        })
    }

    /// The datagram segment of a send on a UD or GSI QP.
    pub fn ud(&self) -> Option<UdSeg<'a, T::Ah>> {
        if self.qp_type != b::ib_qp_type_IB_QPT_UD && self.qp_type != b::ib_qp_type_IB_QPT_GSI {
            return None;
        }
        // SAFETY: sends on UD/GSI QPs are posted in an `ib_ud_wr` (type
        // invariant), whose first member is the send WR.
        let ud = unsafe { &*core::ptr::from_ref(self.raw).cast::<b::ib_ud_wr>() };
        let ah = NonNull::new(ud.ah)?;
        Some(UdSeg {
            // SAFETY: the AH is a live AH of this device (type invariant),
            // created by our `create_ah`, so its state is initialised.
            ah: unsafe { super::kverbs::ah_data::<T>(ah.as_ptr()) },
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        })
    }

    /// The registration segment of an `IB_WR_REG_MR` request.
    pub fn reg(&self) -> Option<RegSeg<'a, T::Mr>> {
        if self.op() != SendOp::RegMr {
            return None;
        }
        // SAFETY: REG_MR requests are posted in an `ib_reg_wr` (type
        // invariant), whose first member is the send WR.
        let reg = unsafe { &*core::ptr::from_ref(self.raw).cast::<b::ib_reg_wr>() };
        let mr = NonNull::new(reg.mr)?;
        // SAFETY: the MR is a live MR of this device allocated by our
        // `alloc_mr` (type invariant); its mapping fields are plain data
        // `ib_map_mr_sg` set.
        let (data, iova, length, page_size) = unsafe {
            let m = &*mr.as_ptr();
            (
                super::kverbs::mr_data::<T>(mr.as_ptr()),
                m.iova,
                m.length,
                m.page_size,
            )
        };
        Some(RegSeg {
            mr: data,
            key: reg.key,
            access: super::int_bits(reg.access),
            iova,
            length,
            page_size,
        })
    }
}

fn sge_list<'a>(list: *const b::ib_sge, n: i32) -> impl Iterator<Item = Sge> + 'a {
    let n = if list.is_null() {
        0
    } else {
        usize::try_from(n).unwrap_or(0)
    };
    (0..n).map(move |i| {
        // SAFETY: callers pass a WR's `sg_list` and `num_sge`: `n` valid
        // entries, alive as long as the WR ('a).
        let s = unsafe { &*list.add(i) };
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    })
}

/// The chain of send WRs of one `post_send` call; iterating it records the
/// WR being handled, which is reported back as `bad_wr` if the driver
/// fails.
pub struct SendWrs<'a, T: Driver> {
    next: *const b::ib_send_wr,
    current: *const b::ib_send_wr,
    qp_type: u32,
    _t: PhantomData<(&'a b::ib_send_wr, T)>,
}

impl<'a, T: Driver> SendWrs<'a, T> {
    /// # Safety
    ///
    /// `first` must be the chain ib_core's `post_send` passed for a QP of
    /// type `qp_type` of our device, each WR satisfying [`SendWr`]'s
    /// invariants for `'a`.
    pub(super) unsafe fn new(first: *const b::ib_send_wr, qp_type: u32) -> Self {
        Self {
            next: first,
            current: first,
            qp_type,
            _t: PhantomData,
        }
    }

    pub(super) fn current(&self) -> *const b::ib_send_wr {
        self.current
    }
}

impl<'a, T: Driver> Iterator for SendWrs<'a, T> {
    type Item = SendWr<'a, T>;

    fn next(&mut self) -> Option<Self::Item> {
        let wr = NonNull::new(self.next.cast_mut())?;
        self.current = wr.as_ptr();
        // SAFETY: a WR of the chain (see `new`), valid for `'a`.
        let raw = unsafe { &*wr.as_ptr() };
        self.next = raw.next;
        // INVARIANT: from `new`'s safety requirements.
        Some(SendWr {
            raw,
            qp_type: self.qp_type,
            _t: PhantomData,
        })
    }
}

/// One receive work request of a chain.
pub struct RecvWr<'a> {
    raw: &'a b::ib_recv_wr,
}

impl RecvWr<'_> {
    /// The consumer's identifier, returned in the completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: both union members are 64-bit plain data.
        unsafe { unions::read::<_, u64>(&self.raw.__bindgen_anon_1) }
    }

    /// The scatter/gather list.
    pub fn sges(&self) -> impl Iterator<Item = Sge> + '_ {
        sge_list(self.raw.sg_list, self.raw.num_sge)
    }

    /// Number of SGEs (0 for a negative count).
    pub fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(0)
    }
}

/// The chain of receive WRs of one `post_recv` call (see [`SendWrs`]).
pub struct RecvWrs<'a> {
    next: *const b::ib_recv_wr,
    current: *const b::ib_recv_wr,
    _t: PhantomData<&'a b::ib_recv_wr>,
}

impl RecvWrs<'_> {
    /// # Safety
    ///
    /// `first` must be the chain ib_core's `post_recv` passed, valid (with
    /// each `sg_list` of `num_sge` entries) for the lifetime.
    pub(super) unsafe fn new(first: *const b::ib_recv_wr) -> Self {
        Self {
            next: first,
            current: first,
            _t: PhantomData,
        }
    }

    pub(super) fn current(&self) -> *const b::ib_recv_wr {
        self.current
    }
}

impl<'a> Iterator for RecvWrs<'a> {
    type Item = RecvWr<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let wr = NonNull::new(self.next.cast_mut())?;
        self.current = wr.as_ptr();
        // SAFETY: a WR of the chain (see `new`).
        let raw = unsafe { &*wr.as_ptr() };
        self.next = raw.next;
        Some(RecvWr { raw })
    }
}

/// Status of a work completion (`enum ib_wc_status`; the device's values
/// are the same numbers).
pub type WcStatus = u32;

/// Opcode of a work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOp {
    /// A SEND completed.
    Send,
    /// An RDMA WRITE completed.
    RdmaWrite,
    /// An RDMA READ completed.
    RdmaRead,
    /// An atomic compare and swap completed.
    CompSwap,
    /// An atomic fetch and add completed.
    FetchAdd,
    /// A local invalidate completed.
    LocalInv,
    /// A fast registration completed.
    RegMr,
    /// A receive completed.
    Recv,
    /// An RDMA WRITE with immediate data consumed a receive.
    RecvRdmaWithImm,
}

/// Network header type of a received datagram (`enum rdma_network_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetType {
    /// RoCE v1 (a GRH, EtherType 0x8915).
    RoceV1,
    /// RoCE v2 over IPv4.
    Ipv4,
    /// RoCE v2 over IPv6.
    Ipv6,
}

/// One work completion.
#[derive(Clone, Copy, Debug)]
pub struct Wc {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// Its status (`IB_WC_*`).
    pub status: WcStatus,
    /// What completed.
    pub op: WcOp,
    /// The device's own error code, for errors.
    pub vendor_err: u32,
    /// Bytes received (receives) or transferred (RDMA READ).
    pub byte_len: u32,
    /// The local QP number.
    pub qpn: u32,
    /// The sender's QP number (UD/GSI receives).
    pub src_qp: u32,
    /// Immediate data (network order), if any.
    pub imm_be: Option<u32>,
    /// The key a SEND with invalidate invalidated, if any.
    pub invalidated: Option<u32>,
    /// The buffer starts with a 40-byte GRH area (UD/GSI receives).
    pub grh: bool,
    /// The network header type (UD/GSI receives on RoCE v2).
    pub net_type: Option<NetType>,
    /// The 802.1Q VLAN ID the datagram arrived on (UD/GSI receives).
    pub vlan: Option<u16>,
}

/// The `ib_wc` array of a `poll_cq` call.
///
/// # Invariants
///
/// `wc` points to `len` writable `ib_wc`s for the call; `filled` ≤ `len`.
pub struct WcOut<'a, T: Driver> {
    dev: &'a Device<T>,
    wc: *mut b::ib_wc,
    len: usize,
    filled: usize,
}

impl<'a, T: Driver> WcOut<'a, T> {
    /// # Safety
    ///
    /// `wc` must point to `len` `ib_wc`s writable for `'a`.
    pub(super) unsafe fn new(dev: &'a Device<T>, wc: *mut b::ib_wc, len: usize) -> Self {
        Self {
            dev,
            wc,
            len,
            filled: 0,
        }
    }

    /// Room left.
    pub fn room(&self) -> usize {
        self.len - self.filled
    }

    /// Completions written.
    pub(crate) fn filled(&self) -> usize {
        self.filled
    }

    /// Appends `c`; `false` (nothing written) when the array is full or
    /// QP `c.qpn` does not exist (the completion is then dropped: a QP's
    /// completions cannot outlive it).
    pub fn push(&mut self, c: &Wc) -> bool {
        if self.filled >= self.len {
            return false;
        }
        let Some(qp) = self.dev.qp_ptr(c.qpn) else {
            return false;
        };
        let mut flags = 0u32;
        // SAFETY: `ib_wc` is plain data; all zeroes is a valid value.
        let mut w: b::ib_wc = unsafe { core::mem::zeroed() };
        // SAFETY: plain-data union members.
        unsafe {
            unions::write(&mut w.__bindgen_anon_1, c.wr_id);
            if let Some(imm) = c.imm_be {
                unions::write(&mut w.ex, imm);
                flags |= b::ib_wc_flags_IB_WC_WITH_IMM;
            } else if let Some(key) = c.invalidated {
                unions::write(&mut w.ex, key);
                flags |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
            }
        }
        w.status = c.status;
        w.opcode = match c.op {
            WcOp::Send => b::ib_wc_opcode_IB_WC_SEND,
            WcOp::RdmaWrite => b::ib_wc_opcode_IB_WC_RDMA_WRITE,
            WcOp::RdmaRead => b::ib_wc_opcode_IB_WC_RDMA_READ,
            WcOp::CompSwap => b::ib_wc_opcode_IB_WC_COMP_SWAP,
            WcOp::FetchAdd => b::ib_wc_opcode_IB_WC_FETCH_ADD,
            WcOp::LocalInv => b::ib_wc_opcode_IB_WC_LOCAL_INV,
            WcOp::RegMr => b::ib_wc_opcode_IB_WC_REG_MR,
            WcOp::Recv => b::ib_wc_opcode_IB_WC_RECV,
            WcOp::RecvRdmaWithImm => b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
        };
        w.vendor_err = c.vendor_err;
        w.byte_len = c.byte_len;
        w.qp = qp;
        w.src_qp = c.src_qp;
        if c.grh {
            flags |= b::ib_wc_flags_IB_WC_GRH;
        }
        if let Some(nt) = c.net_type {
            flags |= b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
            w.network_hdr_type = match nt {
                NetType::RoceV1 => u32_into_u8::<{ b::rdma_network_type_RDMA_NETWORK_ROCE_V1 }>(),
                NetType::Ipv4 => u32_into_u8::<{ b::rdma_network_type_RDMA_NETWORK_IPV4 }>(),
                NetType::Ipv6 => u32_into_u8::<{ b::rdma_network_type_RDMA_NETWORK_IPV6 }>(),
            };
        }
        if let Some(vid) = c.vlan {
            flags |= b::ib_wc_flags_IB_WC_WITH_VLAN;
            w.vlan_id = vid;
        }
        w.wc_flags = super::bits_int(flags);
        w.port_num = 1;
        // SAFETY: `filled < len`, so the slot is in the caller's array
        // (type invariant).
        unsafe { self.wc.add(self.filled).write(w) };
        self.filled += 1;
        true
    }
}
