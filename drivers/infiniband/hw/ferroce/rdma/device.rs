// SPDX-License-Identifier: GPL-2.0

//! `struct ib_device` with Rust driver state: the [`Driver`] trait, the
//! device and object containers, and the ops table. The device-level
//! trampolines are in `dev_ops`, the object trampolines in `obj_ops`,
//! allocation and registration in `registration`.

use super::{
    attr::{
        DeviceAttr,
        GidAttr,
        LinkLayer,
        NetDev,
        NetDevRef,
        NodeType,
        PortAttr,
        PortImmutable, //
    },
    mmap::{
        MmapIo,
        MmioRegion, //
    },
    objects::{
        AhAttr,
        CqTable,
        QpAttr,
        QpInit,
        QpTable, //
    },
    registration::netdev_of,
    srq::{
        SrqAttr,
        SrqObj,
        SrqTable, //
    },
    stats::{
        FwStr,
        ResMsg,
        StatDesc, //
    },
    udata::UData,
    unions,
    wr::{
        RecvWrs,
        SendWrs,
        WcOut, //
    }, //
};
use crate::bindings as b;
use core::{
    marker::PhantomData,
    mem::{
        offset_of,
        size_of,
        MaybeUninit, //
    },
    ops::Deref, //
};
use kernel::{
    error::{
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    prelude::*,
    str::CStr,
    sync::Arc,
    types::Opaque, //
};

/// The operations of an RDMA device driver; ib_core calls them through the
/// layer's `extern "C"` trampolines (the `ib_device_ops` it sets).
///
/// The implementing type is the driver's per-device state; it lives inside
/// the `ib_device` allocation ([`Device`]) and is dropped by ib_core's
/// `dealloc_driver` callback, i.e. when the device is unregistered or
/// (before registration) deallocated.
#[vtable]
pub trait Driver: Send + Sync + Sized + 'static {
    /// Driver state of a user context (`struct ib_ucontext`).
    type UContext: Send + Sync;
    /// Driver state of a protection domain (`struct ib_pd`).
    type Pd: Send + Sync;
    /// Driver state of a completion queue (`struct ib_cq`).
    type Cq: Send + Sync;
    /// Driver state of a queue pair (`struct ib_qp`).
    type Qp: Send + Sync;
    /// Driver state of a memory region (`struct ib_mr`).
    type Mr: Send + Sync;
    /// Driver state of an address handle (`struct ib_ah`).
    type Ah: Send + Sync;
    /// Driver state of a shared receive queue (`struct ib_srq`).
    type Srq: Send + Sync;
    /// Driver state of a memory window (`struct ib_mw`).
    type Mw: Send + Sync;

    /// The version of the driver's uverbs ABI (`ib_device_ops.uverbs_abi_ver`),
    /// which its rdma-core provider checks.
    const UVERBS_ABI_VERSION: u32;

    /// The device's node type (`ib_device.node_type`).
    const NODE_TYPE: NodeType;

    /// The driver's `enum rdma_driver_id` value (`ib_device_ops.driver_id`),
    /// which rdma-core matches its provider by.
    const DRIVER_ID: b::rdma_driver_id;

    /// Fills in the device attributes (zeroed by ib_core).
    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result;

    /// Fills in the attributes of `port` (zeroed by ib_core).
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result;

    /// Fills in the immutable attributes of `port`.
    fn get_port_immutable(dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result;

    /// Returns the link layer of `port`.
    fn get_link_layer(dev: &Device<Self>, port: u32) -> LinkLayer;

    /// Returns the P_Key at `index` of `port`'s P_Key table.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver state of a new user context; `uctx` offers MMIO
    /// pages for `mmap()`, `udata` carries the provider's request and the
    /// driver's response.
    fn alloc_ucontext(
        _dev: &Device<Self>,
        _uctx: &mut UContextInit<'_>,
        _udata: &mut UData<'_>,
    ) -> Result<Self::UContext> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases a user context; its state is dropped afterwards.
    fn dealloc_ucontext(_dev: &Device<Self>, _ctx: &Self::UContext) {}

    /// The device is going away while the context is still open: stop all
    /// hardware access on its behalf (ib_core has already zapped its
    /// mmaps). `dealloc_ucontext` follows when the process closes it.
    fn disassociate_ucontext(_dev: &Device<Self>, _ctx: &Self::UContext) {}

    /// Lets a context be imported by another owner of its command file
    /// (`ibv_import_device`): ib_core's QUERY_CONTEXT answers only for a
    /// driver that has this. The provider learns the context's driver data
    /// through [`Driver::query_device_udata`].
    fn query_ucontext(_dev: &Device<Self>, _ctx: &Self::UContext) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Writes the driver's response to the extended QUERY_DEVICE command
    /// (`ibv_query_device_ex`) of context `ctx`, after
    /// [`Driver::query_device`]; nothing by default.
    fn query_device_udata(
        _dev: &Device<Self>,
        _ctx: &Self::UContext,
        _udata: &mut UData<'_>,
    ) -> Result {
        Ok(())
    }

    /// Creates the driver state of a new protection domain.
    fn alloc_pd(dev: &Device<Self>, user: bool) -> Result<Self::Pd>;

    /// Releases a protection domain; on success its state is dropped
    /// afterwards, on failure it is leaked (ib_core is told it succeeded).
    fn dealloc_pd(dev: &Device<Self>, pd: &Self::Pd) -> Result;

    /// Creates a user CQ of at least `cqe` entries on completion vector
    /// `comp_vector`; returns its state, its number in the [`CqTable`] and
    /// its real capacity.
    fn create_cq(
        _dev: &Device<Self>,
        _ctx: &Self::UContext,
        _cqe: u32,
        _comp_vector: u32,
        _udata: &mut UData<'_>,
    ) -> Result<(Self::Cq, u32, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resizes a user CQ to at least `cqe` entries with the command's driver
    /// data; returns the new capacity.
    fn resize_user_cq(
        _dev: &Device<Self>,
        _cq: &Self::Cq,
        _cqe: u32,
        _udata: &mut UData<'_>,
    ) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a CQ on the device. On success its state (and the memory it
    /// pins) is dropped afterwards; on failure the state is leaked, so
    /// memory a misbehaving device may still write stays pinned. ib_core is
    /// told it succeeded either way. Return `Err` only if the device may
    /// still access the object: a dead device that was reset destroyed it.
    fn destroy_cq(_dev: &Device<Self>, _cq: &Self::Cq) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a user QP; returns its state and QP number.
    fn create_qp(
        _dev: &Device<Self>,
        _ctx: &Self::UContext,
        _init: &mut QpInit<'_, Self::Cq, Self::Pd, Self::Srq>,
        _udata: &mut UData<'_>,
    ) -> Result<(Self::Qp, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Modifies a QP (`mask`: `IB_QP_*`).
    fn modify_qp(_dev: &Device<Self>, _qp: &Self::Qp, _attr: &QpAttr<'_>, _mask: u32) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads a QP's attributes (`IB_QP_*` `mask` says which the caller
    /// wants; filling in more is allowed) and its capacities.
    fn query_qp(
        _dev: &Device<Self>,
        _qp: &Self::Qp,
        _mask: u32,
        _attr: &mut QpAttrOut<'_>,
        _cap: &mut b::ib_qp_cap,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a QP on the device; as [`Driver::destroy_cq`].
    fn destroy_qp(_dev: &Device<Self>, _qp: &Self::Qp) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Attaches a UD QP to the multicast group `gid` (ib_core has checked
    /// that the QP is UD and `gid` a multicast GID; on RoCE the LID is
    /// ignored).
    fn attach_mcast(_dev: &Device<Self>, _qp: &Self::Qp, _gid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a UD QP from the multicast group `gid`; as
    /// [`Driver::attach_mcast`].
    fn detach_mcast(_dev: &Device<Self>, _qp: &Self::Qp, _gid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Registers `length` bytes of user memory at `start`, addressed by the
    /// device from `iova`, with `IB_ACCESS_*` rights; returns the state and
    /// the key (lkey = rkey).
    #[allow(clippy::too_many_arguments)]
    fn reg_user_mr(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _start: u64,
        _length: u64,
        _iova: u64,
        _access: u32,
        _udata: &mut UData<'_>,
    ) -> Result<(Self::Mr, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Re-registers a user MR (`ibv_rereg_mr`) with what `change` says and
    /// the PD `pd` (the MR's own unless `change.pd`). Either changes it in
    /// place, keeping its key (`None`), or registers a new MR and returns
    /// its state and key, which ib_core swaps in before it deregisters the
    /// old one. On failure the MR is left as it was.
    fn rereg_user_mr(
        _dev: &Device<Self>,
        _mr: &Self::Mr,
        _change: &MrRereg,
        _pd: &Self::Pd,
        _udata: &mut UData<'_>,
    ) -> Result<Option<(Self::Mr, u32)>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deregisters an MR; as [`Driver::destroy_cq`].
    fn dereg_mr(_dev: &Device<Self>, _mr: &Self::Mr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Allocates a memory window of type `mw_type` in `pd`; returns its
    /// state and its first rkey.
    fn alloc_mw(_dev: &Device<Self>, _pd: &Self::Pd, _mw_type: MwType) -> Result<(Self::Mw, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deallocates a memory window; as [`Driver::destroy_cq`].
    fn dealloc_mw(_dev: &Device<Self>, _mw: &Self::Mw) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a user address handle.
    fn create_ah(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _attr: &AhAttr<'_>,
        _udata: Option<&mut UData<'_>>,
    ) -> Result<Self::Ah> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys an address handle; as [`Driver::destroy_cq`].
    fn destroy_ah(_dev: &Device<Self>, _ah: &Self::Ah) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a kernel address handle. Called in atomic context: must not
    /// sleep.
    fn create_kernel_ah(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _attr: &AhAttr<'_>,
    ) -> Result<Self::Ah> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a kernel CQ of at least `cqe` entries on completion vector
    /// `comp_vector`; returns its state, its number in the [`CqTable`] and
    /// its real capacity. Implementing it makes the device a kernel verbs
    /// provider, together with [`Driver::create_kernel_qp`],
    /// [`Driver::post_send`], [`Driver::post_recv`], [`Driver::poll_cq`],
    /// [`Driver::req_notify_cq`] and [`Driver::get_dma_mr`].
    fn create_kernel_cq(
        _dev: &Device<Self>,
        _cqe: u32,
        _comp_vector: u32,
    ) -> Result<(Self::Cq, u32, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Polls up to `out.room()` completions of a kernel CQ into `out`. Any
    /// context, hard IRQ included.
    fn poll_cq(_dev: &Device<Self>, _cq: &Self::Cq, _out: &mut WcOut<'_, Self>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Arms a kernel CQ for the next (or next solicited) completion; with
    /// `report_missed`, returns whether completions may already be waiting
    /// (`IB_CQ_REPORT_MISSED_EVENTS`). Any context.
    fn req_notify_cq(
        _dev: &Device<Self>,
        _cq: &Self::Cq,
        _solicited_only: bool,
        _report_missed: bool,
    ) -> Result<bool> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a kernel QP (RC, UD or GSI); returns its state and QP number.
    fn create_kernel_qp(
        _dev: &Device<Self>,
        _init: &mut QpInit<'_, Self::Cq, Self::Pd, Self::Srq>,
    ) -> Result<(Self::Qp, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of send WRs on a kernel QP; on failure the WR being
    /// handled is reported to the consumer as the bad one. Any context.
    fn post_send(_dev: &Device<Self>, _qp: &Self::Qp, _wrs: &mut SendWrs<'_, Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive WRs on a kernel QP (as [`Driver::post_send`]).
    fn post_recv(_dev: &Device<Self>, _qp: &Self::Qp, _wrs: &mut RecvWrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an SRQ of the PD: a user SRQ with the context and the
    /// command's driver data, else a kernel one. `attr` holds what was
    /// asked; the driver writes back the capacities it granted. Returns the
    /// state and the SRQ's number in the [`SrqTable`].
    fn create_srq(
        _dev: &Device<Self>,
        _pd: &Self::Pd,
        _attr: &mut SrqAttr,
        _user: Option<(&Self::UContext, &mut UData<'_>)>,
    ) -> Result<(Self::Srq, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resizes an SRQ (`max_wr`) and/or (re)arms its limit event (`limit`,
    /// 0 disarms); `udata` is the command's driver data for a user SRQ.
    fn modify_srq(
        _dev: &Device<Self>,
        _srq: &Self::Srq,
        _max_wr: Option<u32>,
        _limit: Option<u32>,
        _udata: Option<&mut UData<'_>>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The capacities and the armed limit of an SRQ.
    fn query_srq(_dev: &Device<Self>, _srq: &Self::Srq) -> Result<SrqAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys an SRQ on the device (no QP uses it any more); `Err`
    /// leaks the state, as for [`Driver::destroy_cq`].
    fn destroy_srq(_dev: &Device<Self>, _srq: &Self::Srq) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive WRs on a kernel SRQ (as
    /// [`Driver::post_send`]). Any context.
    fn post_srq_recv(_dev: &Device<Self>, _srq: &Self::Srq, _wrs: &mut RecvWrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A DMA MR of the PD: its key addresses memory by DMA address (the
    /// PD's local DMA lkey when only `IB_ACCESS_LOCAL_WRITE` is asked).
    fn get_dma_mr(_dev: &Device<Self>, _pd: &Self::Pd, _access: u32) -> Result<(Self::Mr, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A fast-register MR of the PD with room for `max_pages` pages
    /// (`IB_MR_TYPE_MEM_REG`), registered later by `IB_WR_REG_MR`.
    fn alloc_mr(_dev: &Device<Self>, _pd: &Self::Pd, _max_pages: u32) -> Result<(Self::Mr, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// `ib_map_mr_sg` starts mapping a scatterlist into a fast-register
    /// MR: forget the previous page list.
    fn map_mr_sg_start(_mr: &Self::Mr) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Appends the DMA address of the next page of the mapping; an error
    /// ends the mapping there (the MR is full).
    fn map_mr_sg_page(_mr: &Self::Mr, _addr: u64) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A GID table entry was added (RoCE).
    fn add_gid(_dev: &Device<Self>, _attr: &GidAttr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A GID table entry was removed (RoCE).
    fn del_gid(_dev: &Device<Self>, _attr: &GidAttr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// ib_core saw `NETDEV_UP`, `NETDEV_DOWN` or `NETDEV_CHANGE` on the
    /// netdev of a port. Implementing this (even empty) means the driver
    /// reports port state events itself; without it ib_core dispatches
    /// `IB_EVENT_PORT_ACTIVE`/`IB_EVENT_PORT_ERR` from the netdev state
    /// alone.
    fn report_port_event(_dev: &Device<Self>, _netdev: NetDev<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The names of the port counters (sysfs `ports/<n>/hw_counters`,
    /// `rdma statistic`), whose values [`Driver::get_port_stats`] reads.
    const PORT_STATS: &'static [StatDesc] = &[];

    /// Reads the counters of `port` into `values`, in the order of
    /// [`Driver::PORT_STATS`]. Process context.
    fn get_port_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Writes the firmware version (sysfs `fw_ver`, `ibv_devinfo`).
    fn dev_fw_str(_dev: &Device<Self>, _out: &mut FwStr<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Adds driver attributes of a QP to its restrack entry (`rdma res
    /// show qp -dd`). Never runs concurrently with the QP's destruction.
    fn fill_res_qp(_dev: &Device<Self>, _qp: &Self::Qp, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// As [`Driver::fill_res_qp`] for a CQ.
    fn fill_res_cq(_dev: &Device<Self>, _cq: &Self::Cq, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// As [`Driver::fill_res_qp`] for an SRQ.
    fn fill_res_srq(_dev: &Device<Self>, _srq: &Self::Srq, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// As [`Driver::fill_res_qp`] for an MR.
    fn fill_res_mr(_dev: &Device<Self>, _mr: &Self::Mr, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// An `ib_device` followed by the driver state `T`.
///
/// # Invariants
///
/// * `ib` sits at offset 0, so `*mut ib_device` and `*mut Device<T>` convert
///   into each other.
/// * A `Device<T>` is only ever allocated by
///   [`Builder::new`](super::Builder::new), with `data`, `cqs`, `qps` and
///   `srqs` initialised before the ops (and thus `dealloc_driver`) are set.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<b::ib_device>,
    pub(super) data: T,
    /// Where completion and CQ events reach the CQs; the layer inserts and
    /// removes them, always in this table.
    pub(super) cqs: Arc<CqTable<T>>,
    /// Where async events reach the QPs, as for `cqs`.
    pub(super) qps: Arc<QpTable<T>>,
    /// Where async events reach the SRQs, as for `cqs`.
    pub(super) srqs: Arc<SrqTable<T>>,
}

// SAFETY: ib_core's `struct ib_device` may be used from any thread; `T` is
// `Send + Sync`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: as above; `&Device<T>` only gives shared access to `T`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    const LAYOUT_OK: () = {
        assert!(offset_of!(Self, ib) == 0);
        // kzalloc() guarantees at least 8-byte alignment.
        assert!(core::mem::align_of::<Self>() <= 8);
    };

    /// # Safety
    ///
    /// `ptr` must point to the `ib_device` of a live `Device<T>` for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut b::ib_device) -> &'a Self {
        // SAFETY: per the safety requirements and the type invariant (`ib` at
        // offset 0).
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut b::ib_device {
        self.ib.get()
    }

    /// The netdev associated with `port`, held.
    pub fn netdev(&self, port: u32) -> Option<NetDevRef> {
        netdev_of(self.as_raw(), port)
    }

    /// The `(IB_SPEED_*, IB_WIDTH_*)` of `port` that its netdev's link
    /// speed maps to (`ib_get_eth_speed`; 1 Gb/s when the netdev reports
    /// none). `ENODEV` without a netdev. It takes RTNL: never call it under
    /// RTNL (from a netdev notifier).
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: the device is alive; the outputs are valid for writes.
        to_result(unsafe { b::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width) })?;
        Ok((speed, width))
    }

    /// A copy of the name ib_core gave the device (e.g. `ferroce0`). ib_core
    /// may rename the device at any time (`rdma dev set NAME name NEW`,
    /// under its own lock, which drivers cannot take), so no reference into
    /// the device's array is handed out: the bytes are copied one by one
    /// (a copy racing a rename may mix the two names, never more) and the
    /// copy is always NUL-terminated.
    pub fn name(&self) -> DevName {
        let mut out = DevName([0; DEV_NAME_LEN]);
        // SAFETY: the device is alive, so its `name` array is valid for
        // reads; each byte is read with a volatile load because ib_core may
        // write it concurrently.
        let src = unsafe { &raw const (*self.as_raw()).name };
        for (i, byte) in out.0.iter_mut().enumerate().take(DEV_NAME_LEN - 1) {
            // SAFETY: `i` is within the array (`DEV_NAME_LEN` is its length).
            *byte = unsafe { core::ptr::read_volatile(src.cast::<u8>().add(i)) };
        }
        out
    }
}

/// Length of `ib_device.name` (`IB_DEVICE_NAME_MAX`).
const DEV_NAME_LEN: usize = b::IB_DEVICE_NAME_MAX as usize;

/// An owned copy of an `ib_device`'s name (always NUL-terminated).
pub struct DevName([u8; DEV_NAME_LEN]);

impl DevName {
    /// The name as a C string.
    pub fn as_cstr(&self) -> &CStr {
        // The last byte is always NUL (`Device::name`), so there is one.
        CStr::from_bytes_until_nul(&self.0).unwrap_or(c"")
    }
}

impl kernel::fmt::Display for DevName {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        kernel::fmt::Display::fmt(self.as_cstr(), f)
    }
}

impl<T: Driver> Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

/// A core-allocated ib object (`ib_ucontext`, `ib_pd`, ...) followed by the
/// driver state: ib_core allocates `size_of::<Obj<I, D>>()` bytes (the
/// `INIT_RDMA_OBJ_SIZE` equivalent) and frees them after the destroy
/// callback.
#[repr(C)]
pub(super) struct Obj<I, D> {
    pub(super) ib: Opaque<I>,
    pub(super) data: MaybeUninit<D>,
}

impl<I, D> Obj<I, D> {
    const LAYOUT_OK: () = {
        assert!(offset_of!(Self, ib) == 0);
        // ib_core allocates the object with kzalloc() (8-byte aligned).
        assert!(core::mem::align_of::<Self>() <= 8);
    };
}

/// A user context's driver state and the mmap offers made for it (withdrawn
/// before the context goes).
pub(super) struct UCtx<T: Driver> {
    /// Only dropped (withdrawing the offers).
    pub(super) _mmaps: KVec<MmapIo>,
    pub(super) data: T::UContext,
}

pub(super) type UContextObj<T> = Obj<b::ib_ucontext, UCtx<T>>;
pub(super) type PdObj<T> = Obj<b::ib_pd, <T as Driver>::Pd>;
/// A CQ's state and its number in the [`CqTable`].
pub(super) type CqObj<T> = Obj<b::ib_cq, (u32, <T as Driver>::Cq)>;
pub(super) type QpObj<T> = Obj<b::ib_qp, <T as Driver>::Qp>;
pub(super) type AhObj<T> = Obj<b::ib_ah, <T as Driver>::Ah>;
pub(super) type MwObj<T> = Obj<b::ib_mw, <T as Driver>::Mw>;

/// The type of a memory window (IBTA 10.6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Type 1: bound by `ibv_bind_mw`, usable by every QP of its PD.
    One,
    /// Type 2 (2B): bound by a bind work request, usable by that QP only.
    Two,
}

/// What `ibv_rereg_mr` changes of a user MR; `None` keeps the old value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrRereg {
    /// `IB_MR_REREG_PD`: the MR moves to the PD given with the change.
    pub pd: bool,
    /// `IB_MR_REREG_TRANS`: the new user address, length and I/O virtual
    /// address.
    pub trans: Option<(u64, u64, u64)>,
    /// `IB_MR_REREG_ACCESS`: the new `IB_ACCESS_*` rights.
    pub access: Option<u32>,
}

/// A driver-allocated `ib_mr` followed by the driver state (ib_core lets the
/// driver allocate MRs).
#[repr(C)]
pub(super) struct MrObj<T: Driver> {
    pub(super) ib: Opaque<b::ib_mr>,
    pub(super) data: T::Mr,
}

/// What `alloc_ucontext` may do with the new context besides creating its
/// state.
pub struct UContextInit<'a> {
    /// Made only by the `alloc_ucontext` trampoline (`dev_ops`): the
    /// context being allocated.
    pub(super) uctx: *mut b::ib_ucontext,
    pub(super) mmaps: &'a mut KVec<MmapIo>,
}

impl UContextInit<'_> {
    /// Offers the `len` bytes at `offset` of the BAR range `region` for
    /// `mmap()`, uncached; `EINVAL` unless they are page aligned and inside
    /// `region`. Returns the offset userspace maps them at. The offer lasts
    /// as long as the context.
    pub fn offer_mmio(&mut self, region: &MmioRegion, offset: u64, len: u64) -> Result<u64> {
        self.mmaps.reserve(1, GFP_KERNEL)?;
        // SAFETY: `uctx` is the live context being allocated, of a device
        // with our `mmap`/`mmap_free` ops; the entry is kept in the context's
        // `UCtx` and dropped in `dealloc_ucontext` (or right away if the
        // allocation fails), before ib_core frees the context.
        let io = unsafe { MmapIo::insert(self.uctx, region, offset, len)? };
        let off = io.offset();
        self.mmaps.push(io, GFP_KERNEL)?;
        Ok(off)
    }
}

/// The attributes `query_qp` fills in: the plain fields through
/// [`QpAttrOut::raw`], the primary path through [`QpAttrOut::set_roce_av`].
pub struct QpAttrOut<'a> {
    pub(super) raw: &'a mut b::ib_qp_attr,
}

/// A RoCE address vector as `query_qp` reports it.
pub struct RoceAv {
    /// The destination GID.
    pub dgid: [u8; 16],
    /// The destination MAC address.
    pub dmac: [u8; 6],
    /// The source GID's index in the port's GID table.
    pub sgid_index: u8,
    /// The IP TTL / hop limit.
    pub hop_limit: u8,
    /// The IP traffic class.
    pub traffic_class: u8,
    /// The IPv6 flow label.
    pub flow_label: u32,
    /// The port number (1-based).
    pub port: u32,
}

impl QpAttrOut<'_> {
    /// The plain attribute fields.
    pub fn raw(&mut self) -> &mut b::ib_qp_attr {
        self.raw
    }

    /// Sets the primary path (a RoCE address with a GRH, no GID attribute
    /// reference).
    pub fn set_roce_av(&mut self, av: &RoceAv) {
        let ah = &mut self.raw.ah_attr;
        ah.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.port_num = av.port;
        ah.ah_flags = kernel::num::casts::u32_into_u8::<{ b::ib_ah_flags_IB_AH_GRH }>();
        ah.grh.sgid_attr = core::ptr::null();
        ah.grh.sgid_index = av.sgid_index;
        ah.grh.hop_limit = av.hop_limit;
        ah.grh.traffic_class = av.traffic_class;
        ah.grh.flow_label = av.flow_label;
        // SAFETY: `union ib_gid` and the address union hold plain bytes;
        // `roce` is the member of a RoCE address.
        unsafe {
            unions::write(&mut ah.grh.dgid, av.dgid);
            // `roce.dmac`, the first byte of the member (checked in
            // `unions`).
            unions::write(&mut ah.__bindgen_anon_1, av.dmac);
        }
    }
}

/// The header of `struct uverbs_attr_bundle` (its `struct_group_tagged`
/// `uverbs_attr_bundle_hdr`, which starts the bundle).
type BundleHdr = b::uverbs_attr_bundle__bindgen_ty_1_uverbs_attr_bundle_hdr;
const _: () = assert!(core::mem::offset_of!(b::uverbs_attr_bundle, __bindgen_anon_1) == 0);

/// The driver udata of a uverbs command's bundle (`&attrs->driver_udata`).
///
/// # Safety
///
/// `attrs` must point to a `struct uverbs_attr_bundle`.
pub(super) unsafe fn bundle_udata(attrs: *mut b::uverbs_attr_bundle) -> *mut b::ib_udata {
    // SAFETY: the bundle starts with its header (`BundleHdr`, checked
    // above); only an address is computed.
    unsafe { &raw mut (*attrs.cast::<BundleHdr>()).driver_udata }
}

/// The driver state of the user context a uverbs command runs in;
/// `EINVAL` if the command's file has no context.
///
/// # Safety
///
/// `udata` must be the driver udata of a uverbs command of a device of
/// driver `T`; the returned reference must not outlive the command.
pub(super) unsafe fn ctx_of<'a, T: Driver>(udata: &UData<'_>) -> Result<&'a T::UContext> {
    // SAFETY: per the safety requirements `udata` is the `driver_udata` of
    // a command's bundle, whose header starts the bundle.
    let hdr = unsafe {
        udata
            .as_raw()
            .byte_sub(core::mem::offset_of!(BundleHdr, driver_udata))
            .cast::<BundleHdr>()
    };
    // SAFETY: `hdr` is the command's bundle header, valid for the command;
    // the bundle's `context` is set only for commands that create an
    // object, so ask the command's file, as `ib_uverbs_get_ucontext()`
    // does: its context or an error pointer.
    let uctx = unsafe { b::ib_uverbs_get_ucontext_file((*hdr).ufile) };
    let uctx = kernel::error::from_err_ptr(uctx).map_err(|_| EINVAL)?;
    if uctx.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: a file's context is published only once `alloc_ucontext`
    // succeeded on our device (so its `UCtx` is initialised), and ib_core
    // keeps it alive while the command runs.
    Ok(unsafe { &(*uctx.cast::<UContextObj<T>>()).data.assume_init_ref().data })
}

/// Destroys an object's state on the device with `destroy`, then drops it;
/// if the device refuses or does not answer, leaks it instead, so memory the
/// state pins stays pinned under a device that might still access it (the
/// policy of [`Driver::destroy_cq`] and the other destroy methods).
pub fn destroy_or_leak<D>(data: D, destroy: impl FnOnce(&D) -> Result) {
    if destroy(&data).is_err() {
        core::mem::forget(data);
    }
}

/// Converts a trait method's result into ib_core's `ERR_PTR` convention.
pub(super) fn ptr_result<P>(r: Result<*mut P>) -> *mut P {
    r.unwrap_or_else(|e| e.to_ptr())
}

/// The `extern "C"` trampolines and the ops table of a [`Driver`].
///
/// ib_core calls each trampoline only as the op of a device set up by
/// [`Builder::new`](super::Builder::new) for the same `T`, with the
/// arguments its `struct ib_device_ops` documents; the `// SAFETY` comments
/// rely on that.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    pub(super) const OPS: b::ib_device_ops = {
        let () = Device::<T>::LAYOUT_OK;
        let () = UContextObj::<T>::LAYOUT_OK;
        let () = PdObj::<T>::LAYOUT_OK;
        let () = CqObj::<T>::LAYOUT_OK;
        let () = QpObj::<T>::LAYOUT_OK;
        let () = AhObj::<T>::LAYOUT_OK;
        let () = MwObj::<T>::LAYOUT_OK;
        let () = SrqObj::<T>::LAYOUT_OK;
        // SAFETY: `ib_device_ops` is plain data (pointers, integers and
        // nullable function pointers), so all zeroes is a valid value.
        let mut ops: b::ib_device_ops = unsafe { core::mem::zeroed() };
        ops.driver_id = T::DRIVER_ID;
        ops.uverbs_abi_ver = T::UVERBS_ABI_VERSION;
        ops.dealloc_driver = Some(Self::dealloc_driver);
        ops.query_device = Some(Self::query_device);
        ops.query_port = Some(Self::query_port);
        ops.get_port_immutable = Some(Self::get_port_immutable);
        ops.get_link_layer = Some(Self::get_link_layer);
        if T::HAS_QUERY_PKEY {
            ops.query_pkey = Some(Self::query_pkey);
        }
        if T::HAS_ALLOC_UCONTEXT {
            ops.alloc_ucontext = Some(Self::alloc_ucontext);
            ops.dealloc_ucontext = Some(Self::dealloc_ucontext);
            // With it, unregistration disassociates open contexts instead of
            // waiting for their processes to close them.
            ops.disassociate_ucontext = Some(Self::disassociate_ucontext);
            ops.size_ib_ucontext = size_of::<UContextObj<T>>();
            if T::HAS_QUERY_UCONTEXT {
                ops.query_ucontext = Some(Self::query_ucontext);
            }
        }
        ops.mmap = Some(Self::mmap);
        ops.mmap_free = Some(Self::mmap_free);
        if T::HAS_CREATE_CQ {
            // User CQs only (kernel verbs are not implemented): ib_core
            // calls `create_user_cq` for both uverbs paths, but offers the
            // legacy write() CREATE_CQ only to drivers that also set
            // `create_cq`; kernel callers (no bundle) get EOPNOTSUPP.
            ops.create_user_cq = Some(Self::create_user_cq);
            ops.create_cq = Some(Self::create_user_cq);
            ops.destroy_cq = Some(Self::destroy_cq);
            ops.size_ib_cq = size_of::<CqObj<T>>();
        }
        // Kernel verbs: with all of them ib_core treats the device as a
        // kernel verbs provider and attaches ib_mad, the CM and rdma_cm.
        if T::HAS_CREATE_KERNEL_CQ {
            // ib_core calls `create_cq` for kernel CQs only once
            // `create_user_cq` exists (both uverbs paths use the latter).
            ops.create_cq = Some(Self::create_kernel_cq);
            ops.destroy_cq = Some(Self::destroy_cq);
            ops.size_ib_cq = size_of::<CqObj<T>>();
            ops.poll_cq = Some(Self::poll_cq);
            ops.req_notify_cq = Some(Self::req_notify_cq);
        }
        if T::HAS_POST_SEND {
            ops.post_send = Some(Self::post_send);
        }
        if T::HAS_POST_RECV {
            ops.post_recv = Some(Self::post_recv);
        }
        if T::HAS_GET_DMA_MR {
            ops.get_dma_mr = Some(Self::get_dma_mr);
            ops.dereg_mr = Some(Self::dereg_mr);
        }
        if T::HAS_ALLOC_MR {
            ops.alloc_mr = Some(Self::alloc_mr);
            ops.map_mr_sg = Some(Self::map_mr_sg);
            ops.dereg_mr = Some(Self::dereg_mr);
        }
        if T::HAS_CREATE_KERNEL_AH {
            ops.create_ah = Some(Self::create_kernel_ah);
            ops.destroy_ah = Some(Self::destroy_ah);
            ops.size_ib_ah = size_of::<AhObj<T>>();
        }
        if T::HAS_CREATE_QP {
            ops.create_qp = Some(Self::create_qp);
            ops.modify_qp = Some(Self::modify_qp);
            if T::HAS_QUERY_QP {
                ops.query_qp = Some(Self::query_qp);
            }
            ops.destroy_qp = Some(Self::destroy_qp);
            ops.size_ib_qp = size_of::<QpObj<T>>();
            if T::HAS_ATTACH_MCAST && T::HAS_DETACH_MCAST {
                ops.attach_mcast = Some(Self::attach_mcast);
                ops.detach_mcast = Some(Self::detach_mcast);
            }
        }
        if T::HAS_CREATE_SRQ {
            ops.create_srq = Some(Self::create_srq);
            ops.modify_srq = Some(Self::modify_srq);
            ops.query_srq = Some(Self::query_srq);
            ops.destroy_srq = Some(Self::destroy_srq);
            ops.size_ib_srq = size_of::<SrqObj<T>>();
        }
        if T::HAS_POST_SRQ_RECV {
            ops.post_srq_recv = Some(Self::post_srq_recv);
        }
        if T::HAS_REG_USER_MR {
            ops.reg_user_mr = Some(Self::reg_user_mr);
            ops.dereg_mr = Some(Self::dereg_mr);
        }
        if T::HAS_ALLOC_MW && T::HAS_DEALLOC_MW {
            ops.alloc_mw = Some(Self::alloc_mw);
            ops.dealloc_mw = Some(Self::dealloc_mw);
            ops.size_ib_mw = size_of::<MwObj<T>>();
        }
        if T::HAS_RESIZE_USER_CQ {
            ops.resize_user_cq = Some(Self::resize_user_cq);
        }
        if T::HAS_REREG_USER_MR {
            ops.rereg_user_mr = Some(Self::rereg_user_mr);
        }
        if T::HAS_CREATE_AH {
            ops.create_user_ah = Some(Self::create_user_ah);
            ops.destroy_ah = Some(Self::destroy_ah);
            ops.size_ib_ah = size_of::<AhObj<T>>();
        }
        ops.alloc_pd = Some(Self::alloc_pd);
        ops.dealloc_pd = Some(Self::dealloc_pd);
        ops.size_ib_pd = size_of::<PdObj<T>>();
        if T::HAS_ADD_GID {
            ops.add_gid = Some(Self::add_gid);
        }
        if T::HAS_DEL_GID {
            ops.del_gid = Some(Self::del_gid);
        }
        if T::HAS_REPORT_PORT_EVENT {
            ops.report_port_event = Some(Self::report_port_event);
        }
        if T::HAS_GET_PORT_STATS {
            ops.alloc_hw_port_stats = Some(Self::alloc_hw_port_stats);
            ops.get_hw_stats = Some(Self::get_hw_stats);
        }
        if T::HAS_DEV_FW_STR {
            ops.get_dev_fw_str = Some(Self::get_dev_fw_str);
        }
        if T::HAS_FILL_RES_QP {
            ops.fill_res_qp_entry = Some(Self::fill_res_qp_entry);
        }
        if T::HAS_FILL_RES_CQ {
            ops.fill_res_cq_entry = Some(Self::fill_res_cq_entry);
        }
        if T::HAS_FILL_RES_SRQ {
            ops.fill_res_srq_entry = Some(Self::fill_res_srq_entry);
        }
        if T::HAS_FILL_RES_MR {
            ops.fill_res_mr_entry = Some(Self::fill_res_mr_entry);
        }
        ops
    };
}
