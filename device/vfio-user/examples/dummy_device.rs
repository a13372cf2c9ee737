// SPDX-License-Identifier: GPL-2.0
//! Minimal device for smoke tests against a real QEMU:
//! `cargo run -p vfio-user --example dummy_device -- /path/to.sock`, then start QEMU with
//! `-device vfio-user-pci,socket=/path/to.sock` (guest RAM must be a shared memfd).
//!
//! BAR0 (16 KiB) is plain scratch memory except: a write to offset 0x10 raises the MSI-X
//! vector given by the written value. Every protocol event is logged to stderr.

use std::sync::Mutex;

use vfio_user::{BarInfo, Device, DeviceConfig, Irqs, MsixInfo, Server};

struct Dummy {
    regs: Mutex<Vec<u8>>,
    irqs: Irqs,
}

impl Device for Dummy {
    fn bar_read(&self, bar: u8, offset: u64, data: &mut [u8]) {
        let regs = self.regs.lock().unwrap_or_else(|e| e.into_inner());
        let off = offset as usize;
        data.copy_from_slice(&regs[off..off + data.len()]);
        eprintln!("bar_read  bar{bar} {offset:#x} {data:02x?}");
    }

    fn bar_write(&self, bar: u8, offset: u64, data: &[u8]) {
        eprintln!("bar_write bar{bar} {offset:#x} {data:02x?}");
        if offset == 0x10 {
            let vector = u16::from(data[0]);
            if let Err(e) = self.irqs.trigger(vector) {
                eprintln!("trigger {vector}: {e}");
            }
        }
        let mut regs = self.regs.lock().unwrap_or_else(|e| e.into_inner());
        let off = offset as usize;
        regs[off..off + data.len()].copy_from_slice(data);
    }

    fn reset(&self) {
        eprintln!("reset");
    }

    fn config_written(&self, offset: u16, data: &[u8], command: u16) {
        eprintln!("config write {offset:#x} {data:02x?} (command {command:#06x})");
    }

    fn dma_unmapped(&self, gpa: u64, size: u64) {
        eprintln!("dma unmapped {gpa:#x}+{size:#x}");
    }
}

struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        eprintln!("[{}] {}", record.level(), record.args());
    }
    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    log::set_logger(&LOGGER).map_err(|e| e.to_string())?;
    log::set_max_level(log::LevelFilter::Debug);
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/vfio-user-dummy.sock".into());
    let config = DeviceConfig {
        vendor_id: 0x1af4,
        device_id: 0x10f0,
        subsystem_vendor_id: 0x1af4,
        subsystem_id: 0x0001,
        class_code: 0x020000,
        revision: 1,
        bars: vec![BarInfo {
            index: 0,
            size: 0x4000,
            is_64bit: true,
            prefetchable: false,
        }],
        msix: Some(MsixInfo {
            vectors: 4,
            table_bar: 0,
            table_offset: 0x2000,
            pba_bar: 0,
            pba_offset: 0x3000,
        }),
        config_space_size: vfio_user::CONFIG_SPACE_PCI,
    };
    let mut server = Server::bind(&path, config)?;
    let dev = Dummy {
        regs: Mutex::new(vec![0; 0x4000]),
        irqs: server.irqs(),
    };
    eprintln!("listening on {path}");
    server.run(&dev)?;
    eprintln!(
        "client gone; DMA windows left: {}",
        server.dma().regions().len()
    );
    Ok(())
}
