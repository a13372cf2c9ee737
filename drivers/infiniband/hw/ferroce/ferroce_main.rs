// SPDX-License-Identifier: GPL-2.0

//! ferroce: RDMA over Converged Ethernet driver for the ferroce NIC.
//!
//! Layout:
//! * `rdma`: safe abstractions over ib_core (and a few kernel APIs the 7.3
//!   `kernel` crate lacks: netdevice notifier, IRQ affinity). In tree they
//!   are the kernel crate's `kernel::rdma` (`CONFIG_RUST_RDMA_ABSTRACTIONS`);
//!   out of tree the same files are this crate's `rdma` module. All of the
//!   driver's `unsafe` code is there and in `bindings` (generated at build
//!   time from `ferroce-hw.h`, and out of tree from the rdma headers);
//! * `regs`, `cmdq`, `eq`: the device's register block, admin queue and
//!   event queues (`Documentation/ferroce/device.rst`);
//! * `dev`: PCI bring-up and teardown, netdev pairing and port state (a
//!   netdevice notifier), debugfs counters; `ib`: the device verbs;
//!   `verbs`: the user objects (CQ, QP, MR, AH) and doorbell pages, with
//!   `pbl` describing their memory to the device;
//! * `gid`, `port`: GID conversions, port state and MTU rules, with their
//!   KUnit suites.

use kernel::{
    pci,
    prelude::*, //
};

mod bindings;
mod cmdq;
mod dbrec;
mod dev;
mod diag;
mod eq;
mod gid;
mod hw_stats;
mod ib;
mod kqueue;
mod pairing;
mod pbl;
mod port;
#[cfg(not(CONFIG_RUST_RDMA_ABSTRACTIONS))]
pub mod rdma;
#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]
use kernel::rdma;
mod regs;
mod srq;
mod verbs;

struct FerroceDriver;

// The header's vendor is Red Hat's QEMU range (the kernel crate only builds
// a `Vendor` from its own list).
const _: () = assert!(pci::Vendor::REDHAT.as_raw() as u32 == bindings::FERROCE_PCI_VENDOR_ID);

kernel::pci_device_table!(
    PCI_TABLE,
    <FerroceDriver as rdma::kext::MaskedPciDriver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::REDHAT, bindings::FERROCE_PCI_DEVICE_ID),
        ()
    )]
);

impl rdma::kext::MaskedPciDriver for FerroceDriver {
    type IdInfo = ();
    type Data<'bound> = dev::Ferroce<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;
    /// Every address field of the device is 64 bits wide.
    const DMA_MASK_BITS: u32 = 64;

    fn probe<'bound>(
        pdev: &'bound pci::Device<kernel::device::Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev::Ferroce::probe(pdev)
    }
}

kernel::module_pci_driver! {
    type: rdma::kext::DmaMasked<FerroceDriver>,
    name: "ferroce",
    authors: ["ferroce developers"],
    description: "RDMA over Converged Ethernet driver for the ferroce NIC",
    license: "GPL",
}
