// SPDX-License-Identifier: GPL-2.0
//! vfio-user wire format: message header, command numbers, flags and the VFIO constants
//! the protocol reuses (docs/interop/vfio-user.rst in QEMU's source, `<linux/vfio.h>`).
//! All fields are little-endian (the protocol uses host order; we only run on LE hosts).

/// Size of the common message header.
pub const HEADER_SIZE: usize = 16;

/// `VFIO_USER_VERSION`.
pub const CMD_VERSION: u16 = 1;
/// `VFIO_USER_DMA_MAP`.
pub const CMD_DMA_MAP: u16 = 2;
/// `VFIO_USER_DMA_UNMAP`.
pub const CMD_DMA_UNMAP: u16 = 3;
/// `VFIO_USER_DEVICE_GET_INFO`.
pub const CMD_DEVICE_GET_INFO: u16 = 4;
/// `VFIO_USER_DEVICE_GET_REGION_INFO`.
pub const CMD_DEVICE_GET_REGION_INFO: u16 = 5;
/// `VFIO_USER_DEVICE_GET_REGION_IO_FDS`.
pub const CMD_DEVICE_GET_REGION_IO_FDS: u16 = 6;
/// `VFIO_USER_DEVICE_GET_IRQ_INFO`.
pub const CMD_DEVICE_GET_IRQ_INFO: u16 = 7;
/// `VFIO_USER_DEVICE_SET_IRQS`.
pub const CMD_DEVICE_SET_IRQS: u16 = 8;
/// `VFIO_USER_REGION_READ`.
pub const CMD_REGION_READ: u16 = 9;
/// `VFIO_USER_REGION_WRITE`.
pub const CMD_REGION_WRITE: u16 = 10;
/// `VFIO_USER_DMA_READ` (server to client; not sent by this server).
pub const CMD_DMA_READ: u16 = 11;
/// `VFIO_USER_DMA_WRITE` (server to client; not sent by this server).
pub const CMD_DMA_WRITE: u16 = 12;
/// `VFIO_USER_DEVICE_RESET`.
pub const CMD_DEVICE_RESET: u16 = 13;
/// `VFIO_USER_REGION_WRITE_MULTI`.
pub const CMD_REGION_WRITE_MULTI: u16 = 15;
/// `VFIO_USER_DEVICE_FEATURE`.
pub const CMD_DEVICE_FEATURE: u16 = 16;

/// Header flags: message type mask.
pub const FLAG_TYPE_MASK: u32 = 0xf;
/// Header flags: type "command".
pub const FLAG_TYPE_COMMAND: u32 = 0x0;
/// Header flags: type "reply".
pub const FLAG_TYPE_REPLY: u32 = 0x1;
/// Header flags: the sender wants no reply (posted writes).
pub const FLAG_NO_REPLY: u32 = 0x10;
/// Header flags: the reply reports an error (errno in the error field).
pub const FLAG_ERROR: u32 = 0x20;

/// Protocol major version we speak (QEMU 11.1 proposes 0.0).
pub const VERSION_MAJOR: u16 = 0;
/// Highest protocol minor version we speak.
pub const VERSION_MINOR: u16 = 0;

/// `VFIO_DEVICE_FLAGS_RESET`.
pub const DEVICE_FLAGS_RESET: u32 = 1 << 0;
/// `VFIO_DEVICE_FLAGS_PCI`.
pub const DEVICE_FLAGS_PCI: u32 = 1 << 1;

/// PCI region indices (`VFIO_PCI_*_REGION_INDEX`).
pub const REGION_BAR0: u32 = 0;
/// Last BAR region index.
pub const REGION_BAR5: u32 = 5;
/// Expansion ROM region index.
pub const REGION_ROM: u32 = 6;
/// Config space region index.
pub const REGION_CONFIG: u32 = 7;
/// VGA region index.
pub const REGION_VGA: u32 = 8;
/// `VFIO_PCI_NUM_REGIONS`.
pub const NUM_REGIONS: u32 = 9;

/// `VFIO_REGION_INFO_FLAG_READ`.
pub const REGION_INFO_FLAG_READ: u32 = 1 << 0;
/// `VFIO_REGION_INFO_FLAG_WRITE`.
pub const REGION_INFO_FLAG_WRITE: u32 = 1 << 1;
/// `VFIO_REGION_INFO_FLAG_MMAP`.
pub const REGION_INFO_FLAG_MMAP: u32 = 1 << 2;

/// PCI IRQ indices (`VFIO_PCI_*_IRQ_INDEX`).
pub const IRQ_INTX: u32 = 0;
/// MSI IRQ index.
pub const IRQ_MSI: u32 = 1;
/// MSI-X IRQ index.
pub const IRQ_MSIX: u32 = 2;
/// Error notification IRQ index.
pub const IRQ_ERR: u32 = 3;
/// Request notification IRQ index.
pub const IRQ_REQ: u32 = 4;
/// `VFIO_PCI_NUM_IRQS`.
pub const NUM_IRQS: u32 = 5;

/// `VFIO_IRQ_INFO_EVENTFD`.
pub const IRQ_INFO_EVENTFD: u32 = 1 << 0;
/// `VFIO_IRQ_INFO_MASKABLE`.
pub const IRQ_INFO_MASKABLE: u32 = 1 << 1;
/// `VFIO_IRQ_INFO_AUTOMASKED`.
pub const IRQ_INFO_AUTOMASKED: u32 = 1 << 2;
/// `VFIO_IRQ_INFO_NORESIZE`.
pub const IRQ_INFO_NORESIZE: u32 = 1 << 3;

/// `VFIO_IRQ_SET_DATA_NONE`.
pub const IRQ_SET_DATA_NONE: u32 = 1 << 0;
/// `VFIO_IRQ_SET_DATA_BOOL`.
pub const IRQ_SET_DATA_BOOL: u32 = 1 << 1;
/// `VFIO_IRQ_SET_DATA_EVENTFD`.
pub const IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
/// `VFIO_IRQ_SET_ACTION_MASK`.
pub const IRQ_SET_ACTION_MASK: u32 = 1 << 3;
/// `VFIO_IRQ_SET_ACTION_UNMASK`.
pub const IRQ_SET_ACTION_UNMASK: u32 = 1 << 4;
/// `VFIO_IRQ_SET_ACTION_TRIGGER`.
pub const IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;
/// Mask of the data-type flags.
pub const IRQ_SET_DATA_MASK: u32 = IRQ_SET_DATA_NONE | IRQ_SET_DATA_BOOL | IRQ_SET_DATA_EVENTFD;
/// Mask of the action flags.
pub const IRQ_SET_ACTION_MASK_ALL: u32 =
    IRQ_SET_ACTION_MASK | IRQ_SET_ACTION_UNMASK | IRQ_SET_ACTION_TRIGGER;

/// `VFIO_DMA_MAP_FLAG_READ`.
pub const DMA_MAP_FLAG_READ: u32 = 1 << 0;
/// `VFIO_DMA_MAP_FLAG_WRITE`.
pub const DMA_MAP_FLAG_WRITE: u32 = 1 << 1;
/// `VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP`.
pub const DMA_UNMAP_FLAG_GET_DIRTY_BITMAP: u32 = 1 << 0;
/// `VFIO_DMA_UNMAP_FLAG_ALL`.
pub const DMA_UNMAP_FLAG_ALL: u32 = 1 << 1;

/// Largest data count we accept in one REGION_READ/WRITE (advertised as
/// `max_data_xfer_size`; also the protocol default).
pub const MAX_DATA_XFER: usize = 1 << 20;
/// Largest message we buffer; larger ones are drained and answered with `E2BIG`.
pub const MAX_MSG_SIZE: usize = HEADER_SIZE + 16 + MAX_DATA_XFER + 4096;
/// Number of descriptors per message we advertise (`max_msg_fds`).
pub const MAX_MSG_FDS: usize = 16;
/// Maximum number of DMA mappings kept at once (advertised as `max_dma_maps`).
pub const MAX_DMA_MAPS: usize = 65535;
/// Size of one entry of a REGION_WRITE_MULTI message.
pub const WRITE_MULTI_ENTRY: usize = 24;

/// The 16-byte header preceding every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message ID, echoed in the reply.
    pub id: u16,
    /// Command number.
    pub command: u16,
    /// Size of the whole message including this header.
    pub size: u32,
    /// Type / no-reply / error flags.
    pub flags: u32,
    /// errno in error replies.
    pub error: u32,
}

impl Header {
    /// Decodes a header from its wire form.
    pub fn from_bytes(b: &[u8; HEADER_SIZE]) -> Header {
        Header {
            id: u16::from_le_bytes([b[0], b[1]]),
            command: u16::from_le_bytes([b[2], b[3]]),
            size: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            flags: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            error: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// Encodes the header.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..2].copy_from_slice(&self.id.to_le_bytes());
        b[2..4].copy_from_slice(&self.command.to_le_bytes());
        b[4..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..12].copy_from_slice(&self.flags.to_le_bytes());
        b[12..16].copy_from_slice(&self.error.to_le_bytes());
        b
    }
}

/// Little-endian field reader over a payload; out-of-range reads yield `None`.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn bytes(&self, off: usize, len: usize) -> Option<&'a [u8]> {
        self.buf.get(off..off.checked_add(len)?)
    }

    pub(crate) fn u16(&self, off: usize) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes(off, 2)?.try_into().ok()?))
    }

    pub(crate) fn u32(&self, off: usize) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(off, 4)?.try_into().ok()?))
    }

    pub(crate) fn u64(&self, off: usize) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(off, 8)?.try_into().ok()?))
    }
}

/// Little-endian payload builder.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u16(mut self, v: u16) -> Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u32(mut self, v: u32) -> Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(mut self, v: u64) -> Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
}
