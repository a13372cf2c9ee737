// SPDX-License-Identifier: GPL-2.0

//! `struct ib_device` with Rust driver state, its ops table and registration.

use super::{
    attr::{DeviceAttr, GidAttr, LinkLayer, NetDev, NetDevRef, PortAttr, PortImmutable},
    mmap::{self, MmapIo, MmioRegion},
    objects::{AhAttr, CqTable, QpAttr, QpInit, QpTable, QpType},
    srq::{srq_data, SrqAttr, SrqObj, SrqTable},
    stats::{FwStr, ResMsg, StatDesc},
    udata::UData,
    wr::{RecvWrs, SendWrs, WcOut},
};
use crate::bindings as b;
use core::{
    ffi::{c_int, c_void},
    marker::PhantomData,
    mem::{offset_of, size_of, MaybeUninit},
    ops::Deref,
    ptr::NonNull,
};
use kernel::{
    device::Bound,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    prelude::*,
    str::CStr,
    sync::Arc,
    types::Opaque,
};

/// The operations of an RDMA device driver; ib_core calls them through the
/// `extern "C"` trampolines of [`Adapter`].
///
/// The implementing type is the driver's per-device state; it lives inside
/// the `ib_device` allocation ([`Device`]) and is dropped by ib_core's
/// `dealloc_driver` callback, i.e. when the device is unregistered or
/// (before registration) deallocated.
#[vtable]
pub(crate) trait Driver: Send + Sync + Sized + 'static {
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
/// * A `Device<T>` is only ever allocated by [`Builder::new`], with `data`,
///   `cqs`, `qps` and `srqs` initialised before the ops (and thus `dealloc_driver`) are set.
#[repr(C)]
pub(crate) struct Device<T: Driver> {
    ib: Opaque<b::ib_device>,
    data: T,
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
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDevRef> {
        netdev_of(self.as_raw(), port)
    }

    /// The `(IB_SPEED_*, IB_WIDTH_*)` of `port` that its netdev's link
    /// speed maps to (`ib_get_eth_speed`; 1 Gb/s when the netdev reports
    /// none). `ENODEV` without a netdev. It takes RTNL: never call it under
    /// RTNL (from a netdev notifier).
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
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
    pub(crate) fn name(&self) -> DevName {
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
pub(crate) struct DevName([u8; DEV_NAME_LEN]);

impl DevName {
    /// The name as a C string.
    pub(crate) fn as_cstr(&self) -> &CStr {
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
struct UCtx<T: Driver> {
    /// Only dropped (withdrawing the offers).
    _mmaps: KVec<MmapIo>,
    data: T::UContext,
}

type UContextObj<T> = Obj<b::ib_ucontext, UCtx<T>>;
pub(super) type PdObj<T> = Obj<b::ib_pd, <T as Driver>::Pd>;
/// A CQ's state and its number in the [`CqTable`].
pub(super) type CqObj<T> = Obj<b::ib_cq, (u32, <T as Driver>::Cq)>;
pub(super) type QpObj<T> = Obj<b::ib_qp, <T as Driver>::Qp>;
pub(super) type AhObj<T> = Obj<b::ib_ah, <T as Driver>::Ah>;
pub(super) type MwObj<T> = Obj<b::ib_mw, <T as Driver>::Mw>;

/// The type of a memory window (IBTA 10.6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MwType {
    /// Type 1: bound by `ibv_bind_mw`, usable by every QP of its PD.
    One,
    /// Type 2 (2B): bound by a bind work request, usable by that QP only.
    Two,
}

/// What `ibv_rereg_mr` changes of a user MR; `None` keeps the old value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MrRereg {
    /// `IB_MR_REREG_PD`: the MR moves to the PD given with the change.
    pub(crate) pd: bool,
    /// `IB_MR_REREG_TRANS`: the new user address, length and I/O virtual
    /// address.
    pub(crate) trans: Option<(u64, u64, u64)>,
    /// `IB_MR_REREG_ACCESS`: the new `IB_ACCESS_*` rights.
    pub(crate) access: Option<u32>,
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
pub(crate) struct UContextInit<'a> {
    uctx: *mut b::ib_ucontext,
    mmaps: &'a mut KVec<MmapIo>,
}

impl UContextInit<'_> {
    /// Offers the `len` bytes at `offset` of the BAR range `region` for
    /// `mmap()`, uncached; `EINVAL` unless they are page aligned and inside
    /// `region`. Returns the offset userspace maps them at. The offer lasts
    /// as long as the context.
    pub(crate) fn offer_mmio(&mut self, region: &MmioRegion, offset: u64, len: u64) -> Result<u64> {
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
pub(crate) struct QpAttrOut<'a> {
    raw: &'a mut b::ib_qp_attr,
}

/// A RoCE address vector as `query_qp` reports it.
pub(crate) struct RoceAv {
    pub(crate) dgid: [u8; 16],
    pub(crate) dmac: [u8; 6],
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) port: u32,
}

impl QpAttrOut<'_> {
    /// The plain attribute fields.
    pub(crate) fn raw(&mut self) -> &mut b::ib_qp_attr {
        self.raw
    }

    /// Sets the primary path (a RoCE address with a GRH, no GID attribute
    /// reference).
    pub(crate) fn set_roce_av(&mut self, av: &RoceAv) {
        let ah = &mut self.raw.ah_attr;
        ah.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.port_num = av.port;
        ah.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
        ah.grh.sgid_attr = core::ptr::null();
        ah.grh.sgid_index = av.sgid_index;
        ah.grh.hop_limit = av.hop_limit;
        ah.grh.traffic_class = av.traffic_class;
        ah.grh.flow_label = av.flow_label;
        // SAFETY: `union ib_gid` and the address union hold plain bytes;
        // `roce` is the member of a RoCE address.
        unsafe {
            *ah.grh.dgid.raw.as_mut() = av.dgid;
            ah.__bindgen_anon_1.roce.as_mut().dmac = av.dmac;
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
unsafe fn bundle_udata(attrs: *mut b::uverbs_attr_bundle) -> *mut b::ib_udata {
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
pub(crate) fn destroy_or_leak<D>(data: D, destroy: impl FnOnce(&D) -> Result) {
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
/// [`Builder::new`] for the same `T`, with the arguments its
/// `struct ib_device_ops` documents; the `// SAFETY` comments rely on that.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

// The module object made by modpost (`ferroce.mod.c`); only its address is
// used. (`struct module` may contain field-less structs, hence the lint.)
#[allow(improper_ctypes)]
extern "C" {
    static mut __this_module: kernel::bindings::module;
}

impl<T: Driver> Adapter<T> {
    const OPS: b::ib_device_ops = {
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

    extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut b::ib_device,
        _port: u32,
    ) -> *mut b::rdma_hw_stats {
        let descs = T::PORT_STATS;
        let Ok(n) = c_int::try_from(descs.len()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `descs` are valid descriptors (`StatDesc` invariant) that
        // live for ever, so as long as ib_core keeps the pointer.
        unsafe {
            b::rdma_alloc_hw_stats_struct(
                StatDesc::as_raw(descs),
                n,
                b::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        }
    }

    extern "C" fn get_hw_stats(
        ibdev: *mut b::ib_device,
        stats: *mut b::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: ib_core passes our live device and a stats structure
        // `alloc_hw_port_stats` made (`num_counters` values allocated after
        // it), locked by ib_core for the call.
        let (dev, values) = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            (
                Device::<T>::from_raw(ibdev),
                core::slice::from_raw_parts_mut((*stats).value.as_mut_ptr(), n),
            )
        };
        // All counters are read at once, whichever `_index` asked for.
        from_result(|| {
            T::get_port_stats(dev, port, values)?;
            Ok(c_int::try_from(values.len())?)
        })
    }

    extern "C" fn get_dev_fw_str(ibdev: *mut b::ib_device, out: *mut kernel::ffi::c_char) {
        // SAFETY: ib_core passes our live device and a buffer of
        // `IB_FW_VERSION_NAME_MAX` bytes, ours for the call.
        let (dev, buf) = unsafe {
            (
                Device::<T>::from_raw(ibdev),
                core::slice::from_raw_parts_mut(
                    out.cast::<u8>(),
                    b::IB_FW_VERSION_NAME_MAX as usize,
                ),
            )
        };
        T::dev_fw_str(dev, &mut FwStr::new(buf));
    }

    extern "C" fn fill_res_qp_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibqp: *mut b::ib_qp,
    ) -> c_int {
        // SAFETY: restrack tracks a QP only once our `create_qp` succeeded
        // (`data` initialised) and drains its readers before `destroy_qp`;
        // `msg` is the message being built, ours for the call.
        unsafe {
            let dev = Device::<T>::from_raw((*ibqp).device);
            let data = (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref();
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_qp(dev, data, m)).map(|()| 0))
        }
    }

    extern "C" fn fill_res_cq_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibcq: *mut b::ib_cq,
    ) -> c_int {
        // SAFETY: as in `fill_res_qp_entry`, for a CQ of ours.
        unsafe {
            let dev = Device::<T>::from_raw((*ibcq).device);
            let data = &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1;
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_cq(dev, data, m)).map(|()| 0))
        }
    }

    extern "C" fn fill_res_srq_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibsrq: *mut b::ib_srq,
    ) -> c_int {
        // SAFETY: as in `fill_res_qp_entry`, for an SRQ of ours.
        unsafe {
            let dev = Device::<T>::from_raw((*ibsrq).device);
            let data = srq_data::<T>(ibsrq);
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_srq(dev, data, m)).map(|()| 0))
        }
    }

    extern "C" fn fill_res_mr_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibmr: *mut b::ib_mr,
    ) -> c_int {
        // SAFETY: every MR of our device is an `MrObj<T>` our ops made;
        // restrack tracks it once made and deletes it (waiting for its
        // readers) before `dereg_mr`; `msg` is ours for the call.
        unsafe {
            let dev = Device::<T>::from_raw((*ibmr).device);
            let data = &(*ibmr.cast::<MrObj<T>>()).data;
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_mr(dev, data, m)).map(|()| 0))
        }
    }

    extern "C" fn dealloc_driver(ibdev: *mut b::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: ib_core calls `dealloc_driver` exactly once, when the device
        // is freed; `data` and the tables were initialised before the ops
        // were set (type invariant of `Device`) and nothing uses them
        // afterwards.
        unsafe {
            core::ptr::drop_in_place(&raw mut (*dev).data);
            core::ptr::drop_in_place(&raw mut (*dev).cqs);
            core::ptr::drop_in_place(&raw mut (*dev).qps);
            core::ptr::drop_in_place(&raw mut (*dev).srqs);
        }
    }

    extern "C" fn query_device(
        ibdev: *mut b::ib_device,
        attr: *mut b::ib_device_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: ib_core passes our live device and a valid attribute struct
        // that nothing else accesses during the call; `udata` is NULL (the
        // query at registration) or the driver udata of the extended
        // QUERY_DEVICE command, inside its bundle.
        let (dev, attr, udata) = unsafe {
            (
                Device::<T>::from_raw(ibdev),
                &mut *attr,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            T::query_device(dev, attr)?;
            if let Some(mut udata) = udata {
                // SAFETY: the driver udata of a command of our device;
                // `ctx` is used only during the call.
                let ctx = unsafe { ctx_of::<T>(&udata) }?;
                T::query_device_udata(dev, ctx, &mut udata)?;
            }
            Ok(0)
        })
    }

    extern "C" fn query_port(
        ibdev: *mut b::ib_device,
        port: u32,
        attr: *mut b::ib_port_attr,
    ) -> c_int {
        // SAFETY: as in `query_device`.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
        from_result(|| T::query_port(dev, port, attr).map(|()| 0))
    }

    extern "C" fn get_port_immutable(
        ibdev: *mut b::ib_device,
        port: u32,
        imm: *mut b::ib_port_immutable,
    ) -> c_int {
        // SAFETY: as in `query_device`.
        let (dev, imm) = unsafe { (Device::<T>::from_raw(ibdev), &mut *imm) };
        from_result(|| T::get_port_immutable(dev, port, imm).map(|()| 0))
    }

    extern "C" fn get_link_layer(ibdev: *mut b::ib_device, port: u32) -> b::rdma_link_layer {
        // SAFETY: ib_core passes our live device.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        T::get_link_layer(dev, port).as_raw()
    }

    extern "C" fn query_pkey(
        ibdev: *mut b::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        // SAFETY: ib_core passes our live device.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        from_result(|| {
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the duration of the call.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    extern "C" fn alloc_ucontext(uctx: *mut b::ib_ucontext, udata: *mut b::ib_udata) -> c_int {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core allocated `size_ib_ucontext` = `size_of::<UContextObj<T>>()`
        // bytes for `uctx` and set its `device` to our live device; `udata`
        // is the command's driver data.
        let (dev, udata) = unsafe {
            (
                Device::<T>::from_raw((*uctx).device),
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let mut udata = udata.ok_or(EINVAL)?;
            let mut mmaps = KVec::new();
            let mut init = UContextInit {
                uctx,
                mmaps: &mut mmaps,
            };
            // On failure `mmaps` is dropped here, withdrawing the offers
            // while the context is still alive.
            let data = T::alloc_ucontext(dev, &mut init, &mut udata)?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_ucontext` only.
            unsafe {
                (*obj).data.write(UCtx {
                    _mmaps: mmaps,
                    data,
                })
            };
            Ok(0)
        })
    }

    extern "C" fn dealloc_ucontext(uctx: *mut b::ib_ucontext) {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this once for a context whose
        // `alloc_ucontext` succeeded, so `data` is initialised; ib_core frees
        // the memory right after (the mmap offers go first, with `data`).
        unsafe {
            let dev = Device::<T>::from_raw((*uctx).device);
            T::dealloc_ucontext(dev, &(*obj).data.assume_init_ref().data);
            (*obj).data.assume_init_drop();
        }
    }

    extern "C" fn query_ucontext(
        uctx: *mut b::ib_ucontext,
        _attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this for the live context the QUERY_CONTEXT
        // command runs in, whose `alloc_ucontext` succeeded (so `data` is
        // initialised) and which stays alive during the call.
        let (dev, ctx) = unsafe {
            (
                Device::<T>::from_raw((*uctx).device),
                &(*obj).data.assume_init_ref().data,
            )
        };
        from_result(|| T::query_ucontext(dev, ctx).map(|()| 0))
    }

    extern "C" fn disassociate_ucontext(uctx: *mut b::ib_ucontext) {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this for a live context whose
        // `alloc_ucontext` succeeded (so `data` is initialised), before
        // `dealloc_ucontext`.
        unsafe {
            let dev = Device::<T>::from_raw((*uctx).device);
            T::disassociate_ucontext(dev, &(*obj).data.assume_init_ref().data);
        }
    }

    extern "C" fn mmap(
        uctx: *mut b::ib_ucontext,
        vma: *mut kernel::bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: ib_core passes a live context of our device and the VMA
        // being mapped; all our mmap entries are `MmapIo`s.
        unsafe { mmap::mmap(uctx, vma) }
    }

    extern "C" fn mmap_free(entry: *mut b::rdma_user_mmap_entry) {
        // SAFETY: ib_core passes an entry of ours whose last reference went.
        unsafe { mmap::free_entry(entry) };
    }

    extern "C" fn alloc_pd(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> c_int {
        let obj = pd.cast::<PdObj<T>>();
        // SAFETY: ib_core allocated `size_ib_pd` = `size_of::<PdObj<T>>()` bytes
        // for `pd` and set its `device` to our live device.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        from_result(|| {
            let data = T::alloc_pd(dev, !udata.is_null())?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_pd` only.
            unsafe { (*obj).data.write(data) };
            Ok(0)
        })
    }

    extern "C" fn dealloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
        let obj = pd.cast::<PdObj<T>>();
        // SAFETY: ib_core calls this for a PD whose `alloc_pd` succeeded, so
        // `data` is initialised; ib_core frees the memory right after (we
        // never fail), so `data` is dropped or leaked here.
        unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            // ib_core cannot handle a failed dealloc (uverbs warns and
            // leaks the uobject): leak the state instead, as for the other
            // destroys.
            if T::dealloc_pd(dev, (*obj).data.assume_init_ref()).is_ok() {
                (*obj).data.assume_init_drop();
            }
            0
        }
    }

    extern "C" fn alloc_mw(mw: *mut b::ib_mw, _udata: *mut b::ib_udata) -> c_int {
        let obj = mw.cast::<MwObj<T>>();
        // SAFETY: ib_core allocated `size_ib_mw` = `size_of::<MwObj<T>>()`
        // bytes for `mw` and set its `device` to our live device, its `pd`
        // to one of our PDs (whose `alloc_pd` succeeded; the caller holds it
        // for the call) and its `type` (uverbs accepts only types 1 and 2).
        let (dev, pd, ty) = unsafe {
            (
                Device::<T>::from_raw((*mw).device),
                (*(*mw).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                (*mw).type_,
            )
        };
        from_result(|| {
            let ty = match ty {
                b::ib_mw_type_IB_MW_TYPE_1 => MwType::One,
                b::ib_mw_type_IB_MW_TYPE_2 => MwType::Two,
                _ => return Err(EINVAL),
            };
            let (data, rkey) = T::alloc_mw(dev, pd, ty)?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_mw` only. `rkey` is ib_core's plain field,
            // which it reads after the call.
            unsafe {
                (*obj).data.write(data);
                (*mw).rkey = rkey;
            }
            Ok(0)
        })
    }

    extern "C" fn dealloc_mw(mw: *mut b::ib_mw) -> c_int {
        let obj = mw.cast::<MwObj<T>>();
        // SAFETY: ib_core calls this for an MW whose `alloc_mw` succeeded, so
        // `data` is initialised; ib_core frees the memory right after (we
        // never fail), so `data` is dropped or leaked here.
        unsafe {
            let dev = Device::<T>::from_raw((*mw).device);
            // As for the other destroys: a failure leaks the state, and
            // ib_core is told it succeeded.
            if T::dealloc_mw(dev, (*obj).data.assume_init_ref()).is_ok() {
                (*obj).data.assume_init_drop();
            }
            0
        }
    }

    extern "C" fn add_gid(attr: *const b::ib_gid_attr, _ctx: *mut *mut c_void) -> c_int {
        // SAFETY: ib_core passes a valid GID attribute whose device is ours
        // and whose netdev it holds during the call.
        let (dev, attr) = unsafe {
            (
                Device::<T>::from_raw((*attr).device),
                GidAttr::from_raw(attr),
            )
        };
        from_result(|| T::add_gid(dev, &attr).map(|()| 0))
    }

    extern "C" fn del_gid(attr: *const b::ib_gid_attr, _ctx: *mut *mut c_void) -> c_int {
        // SAFETY: as in `add_gid`.
        let (dev, attr) = unsafe {
            (
                Device::<T>::from_raw((*attr).device),
                GidAttr::from_raw(attr),
            )
        };
        from_result(|| T::del_gid(dev, &attr).map(|()| 0))
    }

    extern "C" fn report_port_event(
        ibdev: *mut b::ib_device,
        ndev: *mut kernel::bindings::net_device,
        _event: kernel::ffi::c_ulong,
    ) {
        let Some(ndev) = NonNull::new(ndev) else {
            return;
        };
        // SAFETY: ib_core passes our live device (it holds a reference) and
        // a netdev valid for the call (its notifier runs under RTNL).
        let (dev, ndev) = unsafe { (Device::<T>::from_raw(ibdev), NetDev::from_raw(ndev)) };
        T::report_port_event(dev, ndev);
    }
}

/// The netdev of `port` of `ibdev`, held (`ib_device_get_netdev`).
fn netdev_of(ibdev: *mut b::ib_device, port: u32) -> Option<NetDevRef> {
    // SAFETY: callers pass a live device; the function checks `port` and
    // returns a netdev with `dev_hold` taken, or NULL.
    let ptr = unsafe { b::ib_device_get_netdev(ibdev, port) };
    // SAFETY: we own the reference the call took.
    NonNull::new(ptr).map(|p| unsafe { NetDevRef::from_held(p) })
}

/// An allocated, not yet registered `ib_device` with driver state `T`.
/// Dropping it deallocates the device (and drops `T`).
///
/// # Invariants
///
/// `dev` points to a `Device<T>` allocated by `_ib_alloc_device`, with `data`
/// initialised and the ops of `Adapter<T>` set; we own its reference.
pub(crate) struct Builder<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Send for Builder<T> {}

impl<T: Driver> Builder<T> {
    /// Allocates an `ib_device` in `init_net` holding `data`; its CQs, QPs
    /// and SRQs go into `cqs`, `qps` and `srqs` (which the driver's event
    /// paths share).
    pub(crate) fn new(
        data: T,
        cqs: Arc<CqTable<T>>,
        qps: Arc<QpTable<T>>,
        srqs: Arc<SrqTable<T>>,
    ) -> Result<Self> {
        // SAFETY: `_ib_alloc_device` may be called with any size of at least
        // `sizeof(struct ib_device)`; `init_net` outlives every device.
        let raw = unsafe {
            b::_ib_alloc_device(size_of::<Device<T>>(), &raw mut kernel::bindings::init_net)
        };
        let Some(dev) = NonNull::new(raw.cast::<Device<T>>()) else {
            drop(data);
            return Err(ENOMEM);
        };
        // SAFETY: `dev` is a fresh, zeroed allocation of `size_of::<Device<T>>()`
        // bytes suitably aligned (`Device::LAYOUT_OK`); `data` is written before
        // the ops (and thus `dealloc_driver`) exist.
        unsafe {
            (&raw mut (*dev.as_ptr()).data).write(data);
            (&raw mut (*dev.as_ptr()).cqs).write(cqs);
            (&raw mut (*dev.as_ptr()).qps).write(qps);
            (&raw mut (*dev.as_ptr()).srqs).write(srqs);
            (*raw).ops.owner = &raw mut __this_module;
            b::ib_set_device_ops(raw, &Adapter::<T>::OPS);
            (*raw).node_type = b::RDMA_NODE_IB_CA as u8;
            (*raw).phys_port_cnt = 1;
        }
        // INVARIANT: allocated, initialised, ops set.
        Ok(Self { dev })
    }

    fn raw(&self) -> *mut b::ib_device {
        self.dev.as_ptr().cast()
    }

    /// Sets the node GUID (8 bytes in network order, e.g. an EUI-64).
    pub(crate) fn set_node_guid(&mut self, guid: [u8; 8]) {
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).node_guid = u64::from_ne_bytes(guid) };
    }

    /// Sets the number of completion vectors (`ibv_context.num_comp_vectors`).
    pub(crate) fn set_num_comp_vectors(&mut self, n: u32) -> Result {
        let n = i32::try_from(n)?;
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).num_comp_vectors = n };
        Ok(())
    }

    /// Sets the number of ports (default 1).
    pub(crate) fn set_phys_port_cnt(&mut self, n: u32) {
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).phys_port_cnt = n };
    }

    /// Registers the device under `name` (e.g. `c"ferroce%d"`), for DMA
    /// through `dma_device`, which also becomes its parent.
    pub(crate) fn register<'a>(
        self,
        name: &CStr,
        dma_device: &'a kernel::device::Device<Bound>,
    ) -> Result<Registration<'a, T>> {
        let dma = core::ptr::from_ref(dma_device)
            .cast::<kernel::bindings::device>()
            .cast_mut();
        // SAFETY: `kernel::device::Device` is a transparent wrapper of
        // `struct device`, so `dma` is the bound device, which outlives the
        // registration (it is dropped in the driver's remove path at the
        // latest). The ib_device is ours and not registered yet.
        let ret = unsafe {
            (*self.raw()).__bindgen_anon_1.dev.as_mut().parent = dma;
            b::ib_register_device(self.raw(), name.as_char_ptr(), dma)
        };
        // On failure `self` is dropped: `ib_dealloc_device` frees the device.
        to_result(ret)?;
        let dev = self.dev;
        core::mem::forget(self);
        // INVARIANT: registered successfully; ownership moves on.
        Ok(Registration {
            dev,
            _dma: PhantomData,
        })
    }
}

impl<T: Driver> Drop for Builder<T> {
    fn drop(&mut self) {
        // SAFETY: we own the unregistered device (type invariant);
        // `ib_dealloc_device` calls `dealloc_driver`, dropping `data`.
        unsafe { b::ib_dealloc_device(self.raw()) };
    }
}

/// A registered `ib_device`; dropping it unregisters the device, which waits
/// for its users to go, then deallocates it (dropping the driver state).
/// It cannot outlive the borrow of the bound device it does DMA for
/// (`'a`), so the device's verbs always run with that device bound.
///
/// # Invariants
///
/// `dev` points to a registered `Device<T>` whose unregistration is ours.
pub(crate) struct Registration<'a, T: Driver> {
    dev: NonNull<Device<T>>,
    _dma: PhantomData<&'a kernel::device::Device<Bound>>,
}

// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Send for Registration<'_, T> {}
// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Sync for Registration<'_, T> {}

impl<T: Driver> Registration<'_, T> {
    /// The device and its driver state.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: the device stays allocated until we unregister it.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the device is registered and unregistering is ours (type
        // invariant); with `dealloc_driver` set, ib_core deallocates it.
        unsafe { b::ib_unregister_device(self.dev.as_ptr().cast()) };
    }
}

/// An async event ib_core can dispatch to its clients
/// (`ib_dispatch_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortEvent {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    Active,
    /// The port went down (`IB_EVENT_PORT_ERR`).
    Err,
}

/// A handle on a registered `ib_device` for dispatching async events and
/// pairing netdevs from any context, IRQ handlers included.
///
/// It holds only the `struct device` reference (`get_device`), which keeps
/// the memory of the `ib_device` allocated but does not hold its
/// registration: ib_core's `disable_device()` (unregistration, and
/// `rdma_dev_change_netns()`) never waits for it. Each operation takes an
/// `ib_device_try_get` reference for its own duration only (as ib_core's
/// own netdev handlers do per event) and does nothing while the device is
/// disabled or once it is unregistered.
///
/// # Invariants
///
/// `dev` points to an `ib_device` on whose `dev` we hold a `get_device`
/// reference.
pub(crate) struct EventRef {
    dev: NonNull<b::ib_device>,
}

// SAFETY: `ib_dispatch_event`, `ib_device_try_get`/`ib_device_put` and
// `put_device` may be called from any thread.
unsafe impl Send for EventRef {}
// SAFETY: as above; `&EventRef` only dispatches events under a registration
// reference.
unsafe impl Sync for EventRef {}

impl<T: Driver> Registration<'_, T> {
    /// A handle for dispatching events. `None` is never returned today; the
    /// `Option` is kept for callers that treat a missing sink as "no events".
    pub(crate) fn event_ref(&self) -> Option<EventRef> {
        let dev = self.dev.cast::<b::ib_device>();
        // SAFETY: the device is registered and allocated (type invariant), so
        // its `struct device` is initialised; `get_device` takes a reference
        // on it. INVARIANT: we hold that reference.
        unsafe { kernel::bindings::get_device(ib_device_dev(dev.as_ptr())) };
        Some(EventRef { dev })
    }
}

/// `&ibdev->dev`: the `struct device` that starts the anonymous union of
/// `struct ib_device` (with `coredev`, whose first member it is too).
///
/// # Safety
///
/// `ibdev` must point to an allocated `struct ib_device`.
unsafe fn ib_device_dev(ibdev: *mut b::ib_device) -> *mut kernel::bindings::device {
    // SAFETY: `ibdev` is allocated (safety requirements); only an address
    // is computed, and every member of a union starts at its address.
    unsafe { (&raw mut (*ibdev).__bindgen_anon_1).cast() }
}

impl EventRef {
    /// Runs `f` under a registration reference (`ib_device_try_get`);
    /// `None` if the device is disabled or unregistered now.
    fn live<R>(&self, f: impl FnOnce(*mut b::ib_device) -> R) -> Option<R> {
        let dev = self.dev.as_ptr();
        // SAFETY: the memory of the device is valid (type invariant);
        // `ib_device_try_get` only increments its registration count if it
        // is not zero, from any context.
        if !unsafe { b::ib_device_try_get(dev) } {
            return None;
        }
        let r = f(dev);
        // SAFETY: we took this reference above.
        unsafe { b::ib_device_put(dev) };
        Some(r)
    }

    fn dispatch(&self, event: b::ib_event_type, port: u32) {
        self.live(|dev| {
            // SAFETY: `ib_event` is plain data; all zeroes is a valid value.
            let mut ev: b::ib_event = unsafe { core::mem::zeroed() };
            ev.device = dev;
            ev.event = event;
            // SAFETY: `ev` is ours; `port_num` is the union member ib_core
            // reads for port events. `ib_dispatch_event` copies the event,
            // allocates with GFP_ATOMIC and defers the clients to a work
            // item, so it may be called from IRQ context; the device is
            // registered (`live`).
            unsafe {
                *ev.element.port_num.as_mut() = port;
                b::ib_dispatch_event(&ev);
            }
        });
    }

    /// Dispatches a port event for `port` (dropped while the device is
    /// disabled: ib_core queries the port again when it enables it).
    pub(crate) fn port_event(&self, port: u32, event: PortEvent) {
        let ev = match event {
            PortEvent::Active => b::ib_event_type_IB_EVENT_PORT_ACTIVE,
            PortEvent::Err => b::ib_event_type_IB_EVENT_PORT_ERR,
        };
        self.dispatch(ev, port);
    }

    /// The netdev associated with `port`, held.
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDevRef> {
        // `ib_device_get_netdev` reads `port_data`, which lives as long as
        // the memory of the device (`ib_device_release` frees it).
        netdev_of(self.dev.as_ptr(), port)
    }

    /// Associates `netdev` (or none) with `port` (`ib_device_set_netdev`;
    /// ib_core holds its own tracked reference).
    ///
    /// Call it from a netdev notifier (RTNL held), with `None` at the latest
    /// when the associated netdev sends `NETDEV_UNREGISTER`. Pairing needs
    /// the device registered and enabled (`ENODEV` otherwise: an
    /// unregistered device would keep the netdev reference for good);
    /// unpairing always works.
    pub(crate) fn set_netdev(&self, netdev: Option<NetDev<'_>>, port: u32) -> Result {
        let set = |dev: *mut b::ib_device| {
            let nd = netdev.map_or(core::ptr::null_mut(), |n| n.as_raw());
            // SAFETY: the memory of the device, its `port_data` included, is
            // valid (type invariant; ib_core frees `port_data` in the release
            // of the `struct device`); `nd` is NULL or a netdev valid for
            // the call, not unregistering (the caller reacts to its
            // `NETDEV_UNREGISTER` under RTNL, which it holds).
            to_result(unsafe { b::ib_device_set_netdev(dev, nd, port) })
        };
        if netdev.is_some() {
            self.live(set).unwrap_or(Err(ENODEV))
        } else {
            set(self.dev.as_ptr())
        }
    }

    /// Has ib_core scan the netdevs for the GIDs of this device now
    /// (`rdma_roce_rescan_device`), e.g. after a netdev was associated with
    /// a port. It takes RTNL: never call it from a netdev notifier.
    pub(crate) fn rescan_gids(&self) {
        self.live(|dev| {
            // SAFETY: the device is registered (`live`).
            unsafe { b::rdma_roce_rescan_device(dev) }
        });
    }

    /// Dispatches `IB_EVENT_DEVICE_FATAL`.
    pub(crate) fn device_fatal(&self) {
        self.dispatch(b::ib_event_type_IB_EVENT_DEVICE_FATAL, 1);
    }
}

impl Drop for EventRef {
    fn drop(&mut self) {
        // SAFETY: we hold a `get_device` reference (type invariant). It is
        // dropped in process context (the last put may free the device).
        unsafe { kernel::bindings::put_device(ib_device_dev(self.dev.as_ptr())) };
    }
}

/// Trampolines of the object verbs (CQ, QP, MR, AH); user objects only.
impl<T: Driver> Adapter<T> {
    pub(super) extern "C" fn create_user_cq(
        ibcq: *mut b::ib_cq,
        attr: *const b::ib_cq_init_attr,
        attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: ib_core allocated `size_ib_cq` = `size_of::<CqObj<T>>()`
        // bytes for `ibcq` and set its `device`; `attr` is valid for the call;
        // `attrs` is the command's bundle (or NULL), whose driver udata is
        // ours for the call.
        let (dev, attr, udata) = unsafe {
            let udata = if attrs.is_null() {
                None
            } else {
                UData::from_raw(bundle_udata(attrs))
            };
            (Device::<T>::from_raw((*ibcq).device), &*attr, udata)
        };
        from_result(|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            if attr.flags != 0 {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: a uverbs command of our device, in a context of ours.
            let ctx = unsafe { ctx_of::<T>(&udata) }?;
            let created = T::create_cq(dev, ctx, attr.cqe, attr.comp_vector, &mut udata)?;
            // SAFETY: `ibcq` is the CQ being created, of `size_ib_cq` bytes.
            unsafe { Self::publish_cq(dev, ibcq, created) }?;
            Ok(0)
        })
    }

    /// Puts a created CQ's state in place and the CQ in the [`CqTable`];
    /// if that fails, destroys the device's CQ again.
    ///
    /// # Safety
    ///
    /// `ibcq` must be the CQ of a `create_cq` call of a device of ours, of
    /// `size_of::<CqObj<T>>()` bytes, whose state is not written yet.
    pub(super) unsafe fn publish_cq(
        dev: &Device<T>,
        ibcq: *mut b::ib_cq,
        (data, id, cqe): (T::Cq, u32, u32),
    ) -> Result {
        if let Err(e) = dev.cqs.insert(id, ibcq) {
            destroy_or_leak(data, |d| T::destroy_cq(dev, d));
            return Err(e);
        }
        let obj = ibcq.cast::<CqObj<T>>();
        // SAFETY: per the safety requirements `obj` is valid for writes;
        // `cqe` is ib_core's to read. No completion event reaches the CQ
        // before it is armed, which needs the state written here.
        unsafe {
            (*obj).data.write((id, data));
            (*ibcq).cqe = i32::try_from(cqe).unwrap_or(i32::MAX);
        }
        Ok(())
    }

    extern "C" fn resize_user_cq(
        ibcq: *mut b::ib_cq,
        cqe: core::ffi::c_uint,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: a CQ of ours whose creation succeeded, alive for the call
        // (uverbs holds its object); `udata` is the command's driver data.
        let (dev, cq, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
                &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let mut udata = udata.ok_or(EINVAL)?;
            let n = T::resize_user_cq(dev, cq, cqe, &mut udata)?;
            // SAFETY: `cqe` is ib_core's plain field of the live CQ, which it
            // reads back after the call.
            unsafe { (*ibcq).cqe = c_int::try_from(n)? };
            Ok(0)
        })
    }

    pub(super) extern "C" fn destroy_cq(ibcq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibcq.cast::<CqObj<T>>();
        // SAFETY: ib_core calls this once for a CQ whose creation succeeded
        // (`data` initialised, moved out here and never read again) and
        // frees it afterwards.
        let (dev, (id, data)) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
                (*obj).data.assume_init_read(),
            )
        };
        // Removal from the table comes first, so no completion handler call
        // uses the CQ after it.
        dev.cqs.remove(id);
        // A CQ ib_core cannot destroy would leak its uobject forever; the
        // driver state is leaked instead (see `Driver::destroy_cq`).
        destroy_or_leak(data, |d| T::destroy_cq(dev, d));
        0
    }

    extern "C" fn create_qp(
        ibqp: *mut b::ib_qp,
        init: *mut b::ib_qp_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = ibqp.cast::<QpObj<T>>();
        // SAFETY: ib_core allocated `size_ib_qp` bytes for `ibqp` and set its
        // `device` and `pd`; `init` is valid and ours for the call; `udata`
        // is the command's driver data or NULL.
        let (dev, init, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let qp_type = match init.qp_type {
                b::ib_qp_type_IB_QPT_RC => QpType::Rc,
                b::ib_qp_type_IB_QPT_UC => QpType::Uc,
                b::ib_qp_type_IB_QPT_UD => QpType::Ud,
                b::ib_qp_type_IB_QPT_GSI if udata.is_none() => QpType::Gsi,
                _ => return Err(EOPNOTSUPP),
            };
            if !init.xrcd.is_null() || init.create_flags != 0 {
                return Err(EOPNOTSUPP);
            }
            if !init.srq.is_null() && (!T::HAS_CREATE_SRQ || qp_type == QpType::Gsi) {
                return Err(EOPNOTSUPP);
            }
            if init.send_cq.is_null() || init.recv_cq.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the CQs and the PD of a QP are live objects of our
            // device, created through our ops (so their driver state is
            // initialised), held by ib_core for the call.
            let (send_cq, recv_cq, pd) = unsafe {
                (
                    &(*init.send_cq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                    &(*init.recv_cq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                    (*(*ibqp).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                )
            };
            let srq = if init.srq.is_null() {
                None
            } else {
                // SAFETY: the SRQ of a QP is a live SRQ of our device (only
                // our ops create its SRQs), held by ib_core for the call.
                Some(unsafe { srq_data::<T>(init.srq) })
            };
            let mut qi = QpInit {
                qp_type,
                sq_sig_all: init.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
                cap: &mut init.cap,
                send_cq,
                recv_cq,
                pd,
                srq,
            };
            let (data, qpn) = match udata {
                Some(mut udata) => {
                    // SAFETY: a uverbs command of our device, in a context of
                    // ours.
                    let ctx = unsafe { ctx_of::<T>(&udata) }?;
                    T::create_qp(dev, ctx, &mut qi, &mut udata)?
                }
                None if T::HAS_CREATE_KERNEL_QP => T::create_kernel_qp(dev, &mut qi)?,
                None => return Err(EOPNOTSUPP),
            };
            // The state is in place before the QP is in the table, through
            // which completions and events reach it.
            // SAFETY: `obj` is valid for writes; `qp_num` is ib_core's to read.
            unsafe {
                (*obj).data.write(data);
                (*ibqp).qp_num = qpn;
            }
            if let Err(e) = dev.qps.insert(qpn, ibqp) {
                // SAFETY: written just above, never read again: ib_core
                // frees the QP after a failed create.
                let data = unsafe { (*obj).data.assume_init_read() };
                destroy_or_leak(data, |d| T::destroy_qp(dev, d));
                return Err(e);
            }
            Ok(0)
        })
    }

    extern "C" fn modify_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: a QP created by us (`data` initialised), alive for the
        // call; `attr` comes from ib_core's modify path, which holds the
        // source GID attribute of an `IB_QP_AV` change for the call.
        let (dev, data, attr) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                QpAttr::new(&*attr, mask as u32),
            )
        };
        from_result(|| T::modify_qp(dev, data, &attr, mask as u32).map(|()| 0))
    }

    extern "C" fn query_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        init: *mut b::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: a QP created by us, alive for the call; `attr` and `init`
        // are ib_core's output structures, ours for the call.
        let (dev, data, attr, init) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                &mut *attr,
                &mut *init,
            )
        };
        from_result(|| {
            let mut out = QpAttrOut { raw: attr };
            T::query_qp(dev, data, mask as u32, &mut out, &mut init.cap)?;
            let c = &init.cap;
            out.raw.cap = b::ib_qp_cap {
                max_send_wr: c.max_send_wr,
                max_recv_wr: c.max_recv_wr,
                max_send_sge: c.max_send_sge,
                max_recv_sge: c.max_recv_sge,
                max_inline_data: c.max_inline_data,
                max_rdma_ctxs: c.max_rdma_ctxs,
            };
            // SAFETY: `ibqp` is alive; these are plain fields ib_core set.
            unsafe {
                init.qp_type = (*ibqp).qp_type;
                init.send_cq = (*ibqp).send_cq;
                init.recv_cq = (*ibqp).recv_cq;
            }
            Ok(0)
        })
    }

    /// The QP and group of an `attach_mcast` / `detach_mcast` call.
    ///
    /// # Safety
    ///
    /// `ibqp` must be a QP created by us and `gid` a GID, both alive for `'a`.
    unsafe fn mcast_args<'a>(
        ibqp: *mut b::ib_qp,
        gid: *const b::ib_gid,
    ) -> (&'a Device<T>, &'a T::Qp, &'a [u8; 16]) {
        // SAFETY: by the caller's guarantee the QP's `data` was initialised
        // by `create_qp` and stays alive; every variant of `ib_gid` is
        // 16 plain bytes, so `raw` is always valid.
        unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                (*gid).raw.as_ref(),
            )
        }
    }

    extern "C" fn attach_mcast(ibqp: *mut b::ib_qp, gid: *mut b::ib_gid, _lid: u16) -> c_int {
        // SAFETY: ib_core calls this for a QP of ours that is alive for the
        // call (it holds the uverbs object or the kernel consumer does), with
        // the group's GID.
        let (dev, qp, gid) = unsafe { Self::mcast_args(ibqp, gid) };
        from_result(|| T::attach_mcast(dev, qp, gid).map(|()| 0))
    }

    extern "C" fn detach_mcast(ibqp: *mut b::ib_qp, gid: *mut b::ib_gid, _lid: u16) -> c_int {
        // SAFETY: as in `attach_mcast`.
        let (dev, qp, gid) = unsafe { Self::mcast_args(ibqp, gid) };
        from_result(|| T::detach_mcast(dev, qp, gid).map(|()| 0))
    }

    extern "C" fn destroy_qp(ibqp: *mut b::ib_qp, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibqp.cast::<QpObj<T>>();
        // SAFETY: called once for a QP whose creation succeeded (`data`
        // moved out here and never read again); ib_core frees it afterwards.
        let (dev, qpn, data) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp).qp_num,
                (*obj).data.assume_init_read(),
            )
        };
        // Removal from the event table comes first.
        dev.qps.remove(qpn);
        destroy_or_leak(data, |d| T::destroy_qp(dev, d));
        0
    }

    extern "C" fn reg_user_mr(
        pd: *mut b::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        dmah: *mut b::ib_dmah,
        udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: `pd` is a live PD of our device created through our ops;
        // `udata` is the command's driver data or NULL.
        let (dev, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                UData::from_raw(udata),
            )
        };
        ptr_result((|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            if !dmah.is_null() {
                return Err(EOPNOTSUPP);
            }
            let access = u32::try_from(access).map_err(|_| EINVAL)?;
            // Allocated first: once the device has the MR, nothing may fail
            // before its state is stored.
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            let (data, key) =
                T::reg_user_mr(dev, pd_data, start, length, iova, access, &mut udata)?;
            Ok(Self::new_mr(slot, data, key))
        })())
    }

    #[allow(clippy::too_many_arguments)]
    extern "C" fn rereg_user_mr(
        ibmr: *mut b::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut b::ib_pd,
        udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: `ibmr` is a live user MR of ours (a `KBox<MrObj<T>>` that
        // `reg_user_mr` or this function returned), its uobject held for
        // writing for the call; `pd` is a live PD of our device created
        // through our ops; `udata` is the command's driver data or NULL.
        let (dev, mr, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibmr).device),
                &(*ibmr.cast::<MrObj<T>>()).data,
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                UData::from_raw(udata),
            )
        };
        ptr_result((|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            let flags = u32::try_from(flags).map_err(|_| EINVAL)?;
            if flags & !b::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
                return Err(EOPNOTSUPP);
            }
            let change = MrRereg {
                pd: flags & b::ib_mr_rereg_flags_IB_MR_REREG_PD != 0,
                trans: (flags & b::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0)
                    .then_some((start, length, iova)),
                access: if flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
                    Some(u32::try_from(access).map_err(|_| EINVAL)?)
                } else {
                    None
                },
            };
            // Allocated first, as in `reg_user_mr`.
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            Ok(
                match T::rereg_user_mr(dev, mr, &change, pd_data, &mut udata)? {
                    Some((data, key)) => Self::new_mr(slot, data, key),
                    // Changed in place: ib_core keeps the MR (and moves it
                    // to the new PD).
                    None => core::ptr::null_mut(),
                },
            )
        })())
    }

    pub(super) extern "C" fn dereg_mr(ibmr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibmr.cast::<MrObj<T>>();
        // SAFETY: ib_core calls this once for an MR `reg_user_mr` returned
        // (a leaked `KBox<MrObj<T>>`, `ib` at offset 0), never using it
        // afterwards, so the box is ours again.
        let (dev, mr) = unsafe { (Device::<T>::from_raw((*ibmr).device), KBox::from_raw(obj)) };
        destroy_or_leak(mr, |mr| T::dereg_mr(dev, &mr.data));
        0
    }

    pub(super) extern "C" fn create_user_ah(
        ibah: *mut b::ib_ah,
        init: *mut b::rdma_ah_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = ibah.cast::<AhObj<T>>();
        // SAFETY: ib_core allocated `size_ib_ah` bytes and set `device` and
        // `pd`; `init->ah_attr` is valid, with its source GID attribute held
        // for the call; `udata` is the command's driver data or NULL.
        let (dev, pd, attr, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                (*(*ibah).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                AhAttr::new(&*(*init).ah_attr),
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let data = T::create_ah(dev, pd, &attr, udata.as_mut())?;
            // SAFETY: `obj` is valid for writes.
            unsafe { (*obj).data.write(data) };
            Ok(0)
        })
    }

    pub(super) extern "C" fn destroy_ah(ibah: *mut b::ib_ah, _flags: u32) -> c_int {
        let obj = ibah.cast::<AhObj<T>>();
        // SAFETY: called once for an AH whose creation succeeded (`data`
        // moved out here and never read again); ib_core frees it afterwards.
        let (dev, data) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                (*obj).data.assume_init_read(),
            )
        };
        destroy_or_leak(data, |d| T::destroy_ah(dev, d));
        0
    }
}
