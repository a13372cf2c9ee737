// SPDX-License-Identifier: GPL-2.0
//! ferroce-dev: the ferroce RoCE v2 device model.
//!
//! This crate holds the device's programming model in Rust ([`hw`], a mirror
//! of `include/ferroce/ferroce-hw.h` checked by the agreement test) and its
//! control plane ([`Device`]): BAR0 registers, the reset/enable handshake,
//! the admin queue, event queues, object tables, the QP state machine, the
//! hardware GID table, doorbell decoding and counters. It runs against the
//! [`GuestMemory`] and [`IrqSink`] traits so that it is independent of the
//! vfio-user transport. [`ctl`] is the JSON-lines control socket.
//!
//! The specification is `Documentation/ferroce/device.rst`.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod cmds;
pub mod ctl;
pub mod device;
pub mod doorbell;
pub mod fault;
pub mod gid;
pub mod hw;
pub mod inline_vec;
pub mod mem;
pub mod objects;
pub mod port;
pub mod qp_state;
pub mod transport;
pub mod vfio;
pub mod wire;

pub use cmds::active_ib_mtu;
pub use device::{
    BusMasterCounters, Counters, Device, DeviceConfig, Limits, ObjectsSnapshot, PostError,
    StatusInfo,
};
pub use mem::{DmaError, FakeMemory, GuestMemory, IrqSink, NullIrq, NullMemory, RecordingIrq};
pub use transport::DataCounters;
