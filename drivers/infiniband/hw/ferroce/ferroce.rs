// SPDX-License-Identifier: GPL-2.0

//! ferroce: RDMA over Converged Ethernet driver for the ferroce NIC.
//!
//! This is the start of the driver: the GID conversions it is built around
//! (see `gid`), with their KUnit suite. PCI probe, the command queue, the
//! event queues and the `ib_device` come with the device's programming model
//! (`Documentation/ferroce/`).

use kernel::prelude::*;

mod gid;

module! {
    type: Ferroce,
    name: "ferroce",
    authors: ["ferroce developers"],
    description: "RDMA over Converged Ethernet driver for the ferroce NIC",
    license: "GPL",
}

struct Ferroce;

impl kernel::Module for Ferroce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Ferroce)
    }
}
