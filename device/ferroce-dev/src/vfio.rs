// SPDX-License-Identifier: GPL-2.0
//! The device on the vfio-user transport.
//!
//! Glue between the control plane ([`Device`]) and the `vfio-user` server:
//! the PCI identity and BAR layout of the programming model as the server's
//! [`vfio_user::DeviceConfig`], the server's DMA mapping table as
//! [`GuestMemory`] and its MSI-X eventfds as [`IrqSink`].

use std::sync::Arc;

use crate::hw;
use crate::mem::{DmaError, GuestMemory, IrqSink};
use crate::Device;

/// PCI identity, BARs and MSI-X of a ferroce function with `vectors` MSI-X
/// vectors, as `include/ferroce/ferroce-hw.h` defines them.
pub fn pci_config(vectors: u16) -> vfio_user::DeviceConfig {
    vfio_user::DeviceConfig {
        vendor_id: hw::PCI_VENDOR_ID,
        device_id: hw::PCI_DEVICE_ID,
        subsystem_vendor_id: hw::PCI_SUBSYSTEM_VENDOR_ID,
        subsystem_id: hw::PCI_SUBSYSTEM_ID,
        class_code: hw::PCI_CLASS_CODE,
        revision: hw::PCI_REVISION,
        bars: vec![
            vfio_user::BarInfo {
                index: hw::BAR_REGS as u8,
                size: hw::BAR0_SIZE,
                is_64bit: false,
                prefetchable: false,
            },
            vfio_user::BarInfo {
                index: hw::BAR_DB as u8,
                size: hw::BAR2_SIZE,
                is_64bit: true,
                prefetchable: false,
            },
        ],
        msix: Some(vfio_user::MsixInfo {
            vectors,
            table_bar: hw::BAR_REGS as u8,
            table_offset: hw::MSIX_TABLE_OFFSET as u32,
            pba_bar: hw::BAR_REGS as u8,
            pba_offset: hw::MSIX_PBA_OFFSET as u32,
        }),
        // Conventional PCI: QEMU then adds no PCIe capability of its own.
        config_space_size: vfio_user::CONFIG_SPACE_PCI,
    }
}

/// Guest memory through the server's DMA mapping table.
pub struct VfioMemory(pub vfio_user::Dma);

impl GuestMemory for VfioMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.0.read(gpa, buf).map_err(|_| DmaError {
            gpa,
            len: buf.len() as u64,
        })
    }

    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        self.0.write(gpa, buf).map_err(|_| DmaError {
            gpa,
            len: buf.len() as u64,
        })
    }

    fn write_u64(&self, gpa: u64, value: u64) -> Result<(), DmaError> {
        self.0
            .write_u64(gpa, value)
            .map_err(|_| DmaError { gpa, len: 8 })
    }
}

/// MSI-X vectors through the eventfds QEMU handed to the server.
pub struct VfioIrq(pub vfio_user::Irqs);

impl IrqSink for VfioIrq {
    fn trigger(&self, vector: u16) {
        // A vector without an eventfd yet is held pending by the server and
        // delivered when QEMU provides one; other errors (vector out of
        // range) are bugs of the caller, reported but not fatal.
        if let Err(e) = self.0.trigger(vector) {
            log::warn!("MSI-X vector {vector}: {e}");
        }
    }
}

/// PCI COMMAND register: Bus Master Enable.
pub const PCI_COMMAND_MASTER: u16 = 0x4;

/// The control plane as a vfio-user device.
pub struct VfioDevice(pub Arc<Device>);

impl VfioDevice {
    /// Wraps `dev` for the server; BME starts clear, as in the server's
    /// fresh config space (the driver sets it with `pci_set_master`).
    pub fn new(dev: Arc<Device>) -> Self {
        dev.set_bus_master(false);
        Self(dev)
    }
}

impl vfio_user::Device for VfioDevice {
    fn bar_read(&self, bar: u8, offset: u64, data: &mut [u8]) {
        self.0.bar_read(bar, offset, data);
    }

    fn bar_write(&self, bar: u8, offset: u64, data: &[u8]) {
        self.0.bar_write(bar, offset, data);
    }

    fn reset(&self) {
        // The server has restored the config space: COMMAND is 0.
        self.0.reset();
        self.0.set_bus_master(false);
    }

    fn config_written(&self, _offset: u16, _data: &[u8], command: u16) {
        self.0.set_bus_master(command & PCI_COMMAND_MASTER != 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_config_is_valid_and_keeps_registers_clear_of_msix() {
        let cfg = pci_config(hw::MSIX_VECTORS);
        cfg.validate().expect("valid vfio-user device config");
        let msix = cfg.msix.as_ref().expect("msix");
        // Registers live below REGS_SIZE; QEMU owns the table and the PBA.
        assert!(u64::from(msix.table_offset) >= hw::REGS_SIZE);
        assert!(u64::from(msix.pba_offset) >= hw::REGS_SIZE);
        assert!(u64::from(msix.pba_offset) + msix.pba_size() <= hw::BAR0_SIZE);
    }
}
