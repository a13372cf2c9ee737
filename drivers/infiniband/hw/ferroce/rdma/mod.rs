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
//!   The object verbs' trampolines are in `obj_ops`, [`Builder`],
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
//!   probe adapter that sets the DMA masks before the driver's probe, DMA
//!   barriers, online CPU count). They would belong to other kernel modules
//!   upstream.
//!
//! All `unsafe` code of the driver lives here (and in the generated
//! bindings); the driver modules above it contain none.

pub(crate) mod attr;
pub(crate) mod device;
pub(crate) mod gids;
pub(crate) mod kext;
pub(crate) mod kverbs;
pub(crate) mod mmap;
pub(crate) mod notifier;
mod obj_ops;
pub(crate) mod objects;
mod registration;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod udata;
pub(crate) mod umem;
mod unions;
pub(crate) mod wr;

pub(crate) use attr::{DeviceAttr, GidAttr, GidType, LinkLayer, NetDev, PortAttr, PortImmutable};
pub(crate) use device::{
    destroy_or_leak, Device, Driver, MrRereg, MwType, QpAttrOut, RoceAv, UContextInit,
};
pub(crate) use gids::GidEntry;
pub(crate) use mmap::MmioRegion;
pub(crate) use notifier::{NetdevEvent, NetdevHandler, NetdevNotifier};
pub(crate) use objects::{AhAttr, CqEvent, CqTable, QpAttr, QpEvent, QpInit, QpTable, QpType};
pub(crate) use registration::{Builder, EventRef, PortEvent, Registration};
pub(crate) use srq::{SrqAttr, SrqEvent, SrqTable};
pub(crate) use stats::{FwStr, ResMsg, StatDesc};
pub(crate) use udata::{UData, UserRequest};
pub(crate) use umem::Umem;
pub(crate) use wr::{
    NetType, RecvWr, RecvWrs, RegSeg, SendOp, SendWr, SendWrs, Sge, Wc, WcOp, WcOut,
};
