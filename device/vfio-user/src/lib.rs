// SPDX-License-Identifier: GPL-2.0
//! A vfio-user **server** (device side) for emulated PCI devices, written for QEMU 11.1's
//! `-device vfio-user-pci,socket=...` client.
//!
//! The server listens on a unix socket, accepts one client, negotiates the protocol
//! version, emulates the device's PCI config space (type 0 header, memory BARs with sizing
//! semantics, an MSI-X capability), forwards BAR accesses to a [`Device`] implementation,
//! maps guest memory announced with `DMA_MAP` for the device's worker threads ([`Dma`]) and
//! delivers MSI-X interrupts through the client's eventfds ([`Irqs`]).
//!
//! # Protocol coverage
//!
//! | Command | Handling |
//! |---|---|
//! | `VERSION` | 0.0; JSON capabilities parsed leniently (unknown keys ignored); reply carries `max_msg_fds` 16, `max_data_xfer_size` 1 MiB, `pgsizes`, `max_dma_maps`, optionally `write_multiple`, never `migration`/`twin_socket`, and is kept no longer than the request (QEMU receives the reply into its request buffer) |
//! | `DMA_MAP` / `DMA_UNMAP` | fd windows mapped `MAP_SHARED`, fd-less windows recorded as inaccessible; overlap `EEXIST`; unmap must match exactly (`ENOENT`); `VFIO_DMA_UNMAP_FLAG_ALL` supported; dirty bitmaps `ENOTSUP` |
//! | `DEVICE_GET_INFO` | `RESET \| PCI`, 9 regions, 5 IRQ indices |
//! | `DEVICE_GET_REGION_INFO` | BARs 0–5 (size 0 if absent), ROM/VGA size 0, config 256/4096; read+write, never mmap (so QEMU keeps posted writes) |
//! | `DEVICE_GET_IRQ_INFO` | INTx 0, MSI 0, MSI-X N (resizable), ERR `EINVAL` (conventional PCI), REQ 0 |
//! | `DEVICE_SET_IRQS` | MSI-X: eventfd assign/replace/de-assign (incl. the fd-less enable), `DATA_NONE`/`DATA_BOOL` trigger, mask/unmask, disable (count 0) |
//! | `REGION_READ` / `REGION_WRITE` | BARs to [`Device`], config space emulated, MSI-X PBA answered from [`Irqs`]; no-reply (posted) writes get no reply |
//! | `REGION_WRITE_MULTI` | handled (QEMU only sends it if `write_multiple` was advertised, see [`Server::set_write_multiple`]) |
//! | `DEVICE_RESET` | config space and pending interrupts reset, then [`Device::reset`] |
//! | `DEVICE_FEATURE`, `GET_REGION_IO_FDS` | `ENOTSUP` |
//! | anything else | `ENOSYS` |
//!
//! Every request body is read completely before it is answered, so errors never
//! desynchronise the stream; messages over ~1 MiB are skipped in chunks and answered with
//! `E2BIG`. A header whose size is below 16 bytes, or end of stream inside a message, ends
//! the session with [`Error::Protocol`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use vfio_user::{BarInfo, Device, DeviceConfig, MsixInfo, Server};
//!
//! struct Nic { /* registers, worker channels, Dma and Irqs clones ... */ }
//! impl Device for Nic {
//!     fn bar_read(&self, _bar: u8, _offset: u64, data: &mut [u8]) { data.fill(0) }
//!     fn bar_write(&self, _bar: u8, _offset: u64, _data: &[u8]) {}
//!     fn reset(&self) {}
//! }
//!
//! # fn main() -> Result<(), vfio_user::Error> {
//! let config = DeviceConfig {
//!     vendor_id: 0x1af4, device_id: 0x10f0,
//!     subsystem_vendor_id: 0x1af4, subsystem_id: 0x0001,
//!     class_code: 0x020000, revision: 1,
//!     bars: vec![BarInfo { index: 0, size: 0x4000, is_64bit: true, prefetchable: false }],
//!     msix: Some(MsixInfo { vectors: 4, table_bar: 0, table_offset: 0x2000,
//!                           pba_bar: 0, pba_offset: 0x3000 }),
//!     config_space_size: vfio_user::CONFIG_SPACE_PCI,
//! };
//! let mut server = Server::bind("/tmp/ferroce.sock", config)?;
//! let (dma, irqs) = (server.dma(), server.irqs());   // hand clones to worker threads
//! let stop = server.shutdown_handle();                // e.g. for a signal handler thread
//! let nic = Arc::new(Nic {});
//! server.run(&*nic)?;                                 // returns Ok when QEMU disconnects
//! # drop((dma, irqs, stop)); Ok(()) }
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod dma;
mod irq;
mod pci;
pub mod proto;
mod rx;
mod server;
mod sys;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;

pub use dma::{Dma, DmaRegionInfo};
pub use irq::Irqs;
pub use pci::{
    BarInfo, DeviceConfig, MsixInfo, CONFIG_SPACE_PCI, CONFIG_SPACE_PCIE, MSIX_CAP_OFFSET,
};
pub use server::{Server, ShutdownHandle};
pub use sys::{eventfd, eventfd_read, memfd_create};

/// The device model behind the server. Called from the thread running [`Server::run`];
/// device worker threads share the device through their own `Arc`s.
pub trait Device: Send + Sync {
    /// Read `data.len()` bytes at `offset` of BAR `bar`. The access lies inside the BAR
    /// (checked by the server). MSI-X PBA reads are answered by the server and not passed
    /// here.
    fn bar_read(&self, bar: u8, offset: u64, data: &mut [u8]);

    /// Write `data` at `offset` of BAR `bar`. Posted writes (no reply to the client) arrive
    /// here too, in order with all other messages.
    fn bar_write(&self, bar: u8, offset: u64, data: &[u8]);

    /// Device reset (`VFIO_USER_DEVICE_RESET`). Config space and interrupt pending state
    /// have already been reset by the server; DMA mappings stay.
    fn reset(&self) {}

    /// Notification after the client wrote config space (`offset`, bytes written). The
    /// server has already applied the write; `command` is the new command register (bit 2
    /// = bus master enable).
    fn config_written(&self, offset: u16, data: &[u8], command: u16) {
        let _ = (offset, data, command);
    }

    /// Notification after a DMA window was removed from the [`Dma`] table (`DMA_UNMAP`),
    /// e.g. to drop cached translations.
    fn dma_unmapped(&self, gpa: u64, size: u64) {
        let _ = (gpa, size);
    }
}

/// Errors of this crate.
#[derive(Debug)]
pub enum Error {
    /// An I/O or system call error.
    Io(io::Error),
    /// The client violated the protocol in a way that ended the connection.
    Protocol(String),
    /// The device description is inconsistent.
    InvalidConfig(String),
    /// A DMA access or window is not inside one mapping (or overflows).
    OutOfRange {
        /// Guest physical address.
        gpa: u64,
        /// Length in bytes.
        len: u64,
    },
    /// The DMA window containing the address was announced without a file descriptor.
    NotAccessible {
        /// Guest physical address.
        gpa: u64,
    },
    /// The DMA window does not allow this direction (read-only window written).
    PermissionDenied {
        /// Guest physical address.
        gpa: u64,
    },
    /// A new DMA window overlaps an existing one.
    Overlap {
        /// Guest physical address.
        gpa: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `DMA_UNMAP` of a range that is not exactly a current window.
    NotMapped {
        /// Guest physical address.
        gpa: u64,
        /// Length in bytes.
        len: u64,
    },
    /// The DMA window limit was reached.
    TooManyMappings,
    /// MSI-X vector number out of range.
    InvalidVector(u16),
}

impl Error {
    /// The errno sent to the client when this error answers a request.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Protocol(_) | Error::InvalidConfig(_) => libc::EINVAL,
            Error::OutOfRange { .. } => libc::EINVAL,
            Error::NotAccessible { .. } => libc::EFAULT,
            Error::PermissionDenied { .. } => libc::EPERM,
            Error::Overlap { .. } => libc::EEXIST,
            Error::NotMapped { .. } => libc::ENOENT,
            Error::TooManyMappings => libc::ENOSPC,
            Error::InvalidVector(_) => libc::EINVAL,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Protocol(s) => write!(f, "vfio-user protocol error: {s}"),
            Error::InvalidConfig(s) => write!(f, "invalid device config: {s}"),
            Error::OutOfRange { gpa, len } => {
                write!(f, "DMA range {gpa:#x}+{len:#x} not inside one mapping")
            }
            Error::NotAccessible { gpa } => {
                write!(
                    f,
                    "DMA address {gpa:#x} is in a window without file descriptor"
                )
            }
            Error::PermissionDenied { gpa } => write!(f, "DMA access at {gpa:#x} not permitted"),
            Error::Overlap { gpa, len } => {
                write!(f, "DMA window {gpa:#x}+{len:#x} overlaps an existing one")
            }
            Error::NotMapped { gpa, len } => write!(f, "DMA window {gpa:#x}+{len:#x} not mapped"),
            Error::TooManyMappings => write!(f, "too many DMA mappings"),
            Error::InvalidVector(v) => write!(f, "MSI-X vector {v} out of range"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}
