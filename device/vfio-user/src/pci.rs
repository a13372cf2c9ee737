// SPDX-License-Identifier: GPL-2.0
//! Device description and the emulated PCI configuration space (type 0 header, memory
//! BARs with sizing semantics, a capability list holding an MSI-X capability).

use crate::Error;

/// Conventional PCI config space size. QEMU then treats the device as a conventional PCI
/// endpoint (no PCIe capability).
pub const CONFIG_SPACE_PCI: u32 = 256;
/// PCIe extended config space size.
pub const CONFIG_SPACE_PCIE: u32 = 4096;

/// Offset of the MSI-X capability in config space.
pub const MSIX_CAP_OFFSET: usize = 0x40;

/// One memory BAR of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarInfo {
    /// BAR index 0..=5 (a 64-bit BAR also occupies `index + 1`).
    pub index: u8,
    /// Size in bytes: a power of two, at least 16 (at most 2 GiB for 32-bit BARs).
    pub size: u64,
    /// 64-bit memory BAR.
    pub is_64bit: bool,
    /// Prefetchable memory BAR.
    pub prefetchable: bool,
}

/// MSI-X layout of the device. The table and PBA live in (memory) BARs; QEMU emulates the
/// table itself and forwards only PBA reads to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsixInfo {
    /// Number of vectors, 1..=2048.
    pub vectors: u16,
    /// BAR holding the vector table.
    pub table_bar: u8,
    /// Offset of the table in that BAR (8-byte aligned); 16 bytes per vector.
    pub table_offset: u32,
    /// BAR holding the pending bit array.
    pub pba_bar: u8,
    /// Offset of the PBA in that BAR (8-byte aligned); one bit per vector, rounded up to
    /// whole qwords.
    pub pba_offset: u32,
}

impl MsixInfo {
    /// Size of the vector table in bytes.
    pub fn table_size(&self) -> u64 {
        u64::from(self.vectors) * 16
    }

    /// Size of the PBA in bytes.
    pub fn pba_size(&self) -> u64 {
        u64::from(self.vectors).div_ceil(64) * 8
    }
}

/// Everything the server needs to present the device to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    /// PCI vendor ID.
    pub vendor_id: u16,
    /// PCI device ID.
    pub device_id: u16,
    /// PCI subsystem vendor ID.
    pub subsystem_vendor_id: u16,
    /// PCI subsystem ID.
    pub subsystem_id: u16,
    /// 24-bit class code: base class << 16 | subclass << 8 | programming interface
    /// (e.g. `0x020000` for an Ethernet controller).
    pub class_code: u32,
    /// Revision ID.
    pub revision: u8,
    /// Memory BARs (I/O BARs are not supported).
    pub bars: Vec<BarInfo>,
    /// MSI-X capability, if any.
    pub msix: Option<MsixInfo>,
    /// Config space size: [`CONFIG_SPACE_PCI`] (256) or [`CONFIG_SPACE_PCIE`] (4096).
    pub config_space_size: u32,
}

impl DeviceConfig {
    /// Looks up a BAR by index.
    pub fn bar(&self, index: u8) -> Option<&BarInfo> {
        self.bars.iter().find(|b| b.index == index)
    }

    /// Checks the description for consistency (called by `Server::bind`).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |s: String| Err(Error::InvalidConfig(s));
        if self.config_space_size != CONFIG_SPACE_PCI && self.config_space_size != CONFIG_SPACE_PCIE
        {
            return bad(format!(
                "config space size {} (must be 256 or 4096)",
                self.config_space_size
            ));
        }
        if self.class_code > 0xff_ffff {
            return bad(format!(
                "class code {:#x} wider than 24 bits",
                self.class_code
            ));
        }
        let mut used = [false; 6];
        for b in &self.bars {
            let last = if b.is_64bit { b.index + 1 } else { b.index };
            if last > 5 {
                return bad(format!("BAR {} out of range", b.index));
            }
            if b.is_64bit && b.index % 2 != 0 {
                // Not required by PCI, but keeps the layout simple and unambiguous.
                return bad(format!("64-bit BAR {} must have an even index", b.index));
            }
            for i in b.index..=last {
                if used[i as usize] {
                    return bad(format!("BAR slot {i} used twice"));
                }
                used[i as usize] = true;
            }
            if b.size < 16 || !b.size.is_power_of_two() {
                return bad(format!(
                    "BAR {} size {:#x} not a power of two >= 16",
                    b.index, b.size
                ));
            }
            if !b.is_64bit && b.size > 1 << 31 {
                return bad(format!(
                    "32-bit BAR {} size {:#x} too large",
                    b.index, b.size
                ));
            }
        }
        if let Some(m) = &self.msix {
            if m.vectors == 0 || m.vectors > 2048 {
                return bad(format!(
                    "MSI-X vector count {} (must be 1..=2048)",
                    m.vectors
                ));
            }
            let check = |what: &str, bar: u8, off: u32, size: u64| -> Result<(), Error> {
                let Some(b) = self.bar(bar) else {
                    return bad(format!("MSI-X {what} in missing BAR {bar}"));
                };
                if off % 8 != 0 {
                    return bad(format!("MSI-X {what} offset {off:#x} not 8-byte aligned"));
                }
                if u64::from(off) + size > b.size {
                    return bad(format!("MSI-X {what} does not fit in BAR {bar}"));
                }
                Ok(())
            };
            check("table", m.table_bar, m.table_offset, m.table_size())?;
            check("PBA", m.pba_bar, m.pba_offset, m.pba_size())?;
            if m.table_bar == m.pba_bar {
                let (t0, t1) = (
                    u64::from(m.table_offset),
                    u64::from(m.table_offset) + m.table_size(),
                );
                let (p0, p1) = (
                    u64::from(m.pba_offset),
                    u64::from(m.pba_offset) + m.pba_size(),
                );
                if t0 < p1 && p0 < t1 {
                    return bad("MSI-X table and PBA overlap".into());
                }
            }
        }
        Ok(())
    }
}

const PCI_VENDOR_ID: usize = 0x00;
const PCI_DEVICE_ID: usize = 0x02;
const PCI_COMMAND: usize = 0x04;
const PCI_STATUS: usize = 0x06;
const PCI_REVISION_ID: usize = 0x08;
const PCI_CLASS_PROG: usize = 0x09;
const PCI_CACHE_LINE_SIZE: usize = 0x0c;
const PCI_LATENCY_TIMER: usize = 0x0d;
const PCI_HEADER_TYPE: usize = 0x0e;
const PCI_BASE_ADDRESS_0: usize = 0x10;
const PCI_SUBSYSTEM_VENDOR_ID: usize = 0x2c;
const PCI_SUBSYSTEM_ID: usize = 0x2e;
const PCI_CAPABILITY_LIST: usize = 0x34;
const PCI_INTERRUPT_LINE: usize = 0x3c;
const PCI_STATUS_CAP_LIST: u16 = 0x10;
/// Writable command bits: I/O, memory, bus master, parity, SERR#, INTx disable.
const PCI_COMMAND_WMASK: u16 = 0x0001 | 0x0002 | 0x0004 | 0x0040 | 0x0100 | 0x0400;
const PCI_CAP_ID_MSIX: u8 = 0x11;
const PCI_BAR_MEM_TYPE_64: u32 = 0x4;
const PCI_BAR_MEM_PREFETCH: u32 = 0x8;

/// Emulated config space: current bytes, per-bit write mask and the reset image.
#[derive(Debug, Clone)]
pub(crate) struct ConfigSpace {
    data: Vec<u8>,
    wmask: Vec<u8>,
    initial: Vec<u8>,
}

impl ConfigSpace {
    /// Builds the config space for a validated description.
    pub(crate) fn new(cfg: &DeviceConfig) -> ConfigSpace {
        let n = cfg.config_space_size as usize;
        let mut data = vec![0u8; n];
        let mut wmask = vec![0u8; n];
        let put16 =
            |d: &mut [u8], off: usize, v: u16| d[off..off + 2].copy_from_slice(&v.to_le_bytes());
        let put32 =
            |d: &mut [u8], off: usize, v: u32| d[off..off + 4].copy_from_slice(&v.to_le_bytes());

        put16(&mut data, PCI_VENDOR_ID, cfg.vendor_id);
        put16(&mut data, PCI_DEVICE_ID, cfg.device_id);
        put16(&mut wmask, PCI_COMMAND, PCI_COMMAND_WMASK);
        data[PCI_REVISION_ID] = cfg.revision;
        data[PCI_CLASS_PROG] = cfg.class_code as u8;
        data[PCI_CLASS_PROG + 1] = (cfg.class_code >> 8) as u8;
        data[PCI_CLASS_PROG + 2] = (cfg.class_code >> 16) as u8;
        wmask[PCI_CACHE_LINE_SIZE] = 0xff;
        wmask[PCI_LATENCY_TIMER] = 0xff;
        data[PCI_HEADER_TYPE] = 0; // type 0, single function
        put16(&mut data, PCI_SUBSYSTEM_VENDOR_ID, cfg.subsystem_vendor_id);
        put16(&mut data, PCI_SUBSYSTEM_ID, cfg.subsystem_id);
        wmask[PCI_INTERRUPT_LINE] = 0xff;
        // Interrupt pin stays 0: no INTx.

        for b in &cfg.bars {
            let off = PCI_BASE_ADDRESS_0 + 4 * b.index as usize;
            let mut flags = 0u32;
            if b.is_64bit {
                flags |= PCI_BAR_MEM_TYPE_64;
            }
            if b.prefetchable {
                flags |= PCI_BAR_MEM_PREFETCH;
            }
            let size_mask = !(b.size - 1);
            put32(&mut data, off, flags);
            put32(&mut wmask, off, (size_mask as u32) & !0xf);
            if b.is_64bit {
                put32(&mut wmask, off + 4, (size_mask >> 32) as u32);
            }
        }

        if let Some(m) = &cfg.msix {
            let c = MSIX_CAP_OFFSET;
            data[PCI_CAPABILITY_LIST] = c as u8;
            put16(&mut data, PCI_STATUS, PCI_STATUS_CAP_LIST);
            data[c] = PCI_CAP_ID_MSIX;
            data[c + 1] = 0; // end of list
            put16(&mut data, c + 2, m.vectors - 1);
            wmask[c + 3] = 0xc0; // MSI-X enable, function mask
            put32(&mut data, c + 4, m.table_offset | u32::from(m.table_bar));
            put32(&mut data, c + 8, m.pba_offset | u32::from(m.pba_bar));
        }

        ConfigSpace {
            initial: data.clone(),
            data,
            wmask,
        }
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// Reads `buf.len()` bytes at `off`. The caller checks bounds.
    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) {
        buf.copy_from_slice(&self.data[off..off + buf.len()]);
    }

    /// Writes bytes at `off`, honouring the write mask (read-only bits keep their value;
    /// BAR registers therefore read back `~(size - 1) | flags` after writing all ones).
    pub(crate) fn write(&mut self, off: usize, bytes: &[u8]) {
        for (i, &v) in bytes.iter().enumerate() {
            let a = off + i;
            let m = self.wmask[a];
            self.data[a] = (self.data[a] & !m) | (v & m);
        }
    }

    /// Restores the power-on image.
    pub(crate) fn reset(&mut self) {
        self.data.copy_from_slice(&self.initial);
    }

    /// Current command register.
    pub(crate) fn command(&self) -> u16 {
        u16::from_le_bytes([self.data[PCI_COMMAND], self.data[PCI_COMMAND + 1]])
    }
}
