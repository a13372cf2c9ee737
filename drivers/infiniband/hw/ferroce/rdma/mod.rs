// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over ib_core for a Rust RDMA driver.
//!
//! Shaped so that it could become `rust/kernel/rdma/`:
//!
//! * [`device`]: an `ib_device` whose driver state is a Rust type implementing
//!   the [`Driver`] `#[vtable]` trait; ib_core calls `extern "C"` trampolines
//!   that call the trait's methods. [`Builder`] allocates it
//!   (`_ib_alloc_device` with the size of the Rust container, `ib_device`
//!   first), [`Registration`] registers it and unregisters it on drop;
//!   ib_core's `dealloc_driver` is the one place the driver state is dropped.
//!   The device-level verbs' trampolines are in `dev_ops`, the object
//!   verbs' in `obj_ops`, [`Builder`],
//!   [`Registration`] and the event handle [`EventRef`] in `registration`.
//! * [`attr`]: safe views of what ib_core hands the driver (GID attributes,
//!   netdevs) and the attribute structures it fills in.
//! * [`gids`]: ib_core's GID table (`rdma_query_gid_table`, reached through
//!   a held source GID entry) and `ibdev_warn`.
//! * [`stats`]: hardware counters, the firmware version string and the
//!   driver attributes of restrack entries.
//! * [`notifier`]: a netdevice notifier calling a Rust handler.
//! * [`kext`]: small wrappers for kernel APIs the 7.3 `kernel` crate lacks
//!   or only offers as `unsafe` (MSI-X vectors with their handlers, a PCI
//!   probe adapter that sets the DMA masks before the driver's probe,
//!   online CPU count). In tree they are `kernel::pci`'s and
//!   `kernel::cpu`'s, not this module's.
//!
//! All `unsafe` code of the driver lives here (and in the generated
//! bindings); the driver modules above it contain none.

pub mod attr;
mod dev_ops;
pub mod device;
pub mod gids;
pub mod kext;
pub mod kverbs;
pub mod mmap;
pub mod notifier;
mod obj_ops;
pub mod objects;
mod registration;
pub mod srq;
pub mod stats;
pub mod udata;
pub mod umem;
mod unions;
pub mod wr;

pub use attr::{
    DeviceAttr,
    GidAttr,
    GidType,
    LinkLayer,
    NetDev,
    NodeType,
    PortAttr,
    PortImmutable, //
};
pub use device::{
    destroy_or_leak,
    Device,
    Driver,
    MrRereg,
    MwType,
    QpAttrOut,
    RoceAv,
    UContextInit, //
};
pub use gids::GidEntry;
pub use mmap::MmioRegion;
pub use notifier::{
    NetdevEvent,
    NetdevHandler,
    NetdevNotifier, //
};
pub use objects::{
    AhAttr,
    CqEvent,
    CqTable,
    QpAttr,
    QpEvent,
    QpInit,
    QpTable,
    QpType, //
};
pub use registration::{
    Builder,
    EventRef,
    PortEvent,
    Registration, //
};
pub use srq::{
    SrqAttr,
    SrqEvent,
    SrqTable, //
};
pub use stats::{
    FwStr,
    ResMsg,
    StatDesc, //
};
pub use udata::{
    UData,
    UserRequest, //
};
pub use umem::Umem;
pub use wr::{
    NetType,
    RecvWr,
    RecvWrs,
    RegSeg,
    SendOp,
    SendWr,
    SendWrs,
    Sge,
    Wc,
    WcOp,
    WcOut, //
};

/// The bits of an `int` flag set or mask of ib_core as a `u32` (bit for bit:
/// never lossy, whatever the sign).
fn int_bits(v: core::ffi::c_int) -> u32 {
    u32::from_ne_bytes(v.to_ne_bytes())
}

/// A `u32` flag set as ib_core's `int` (bit for bit, as [`int_bits`]).
fn bits_int(v: u32) -> core::ffi::c_int {
    core::ffi::c_int::from_ne_bytes(v.to_ne_bytes())
}
