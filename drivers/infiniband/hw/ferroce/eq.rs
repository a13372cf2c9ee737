// SPDX-License-Identifier: GPL-2.0

//! Event queues: rings of 16-byte EQEs in coherent DMA memory, one per MSI-X
//! vector (`Documentation/ferroce/device.rst`, "Event queues"). EQ 0 is the
//! async EQ (created through registers), EQs 1.. are completion EQs
//! (CREATE_EQ).

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    regs, //
};
use core::{
    mem::{
        offset_of,
        size_of, //
    },
    sync::atomic::{
        AtomicU16,
        Ordering, //
    }, //
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::{
        Coherent,
        DmaAddress, //
    },
    io::io_read,
    prelude::*,
    str::CString,
    sync::barrier::{
        dma_mb,
        Read, //
    }, //
};

/// The name of MSI-X vector `index` of PCI function `dev` in
/// `/proc/interrupts`, after mlx5's: `ferroce-async@pci:DEV` for vector 0
/// (the async EQ), `ferroce-compN@pci:DEV` for completion vector `N`
/// (vector and EQ `N + 1`), so the vectors of two functions can be told
/// apart.
pub(crate) fn irq_name(index: usize, dev: &CStr) -> Result<CString> {
    match index.checked_sub(1) {
        None => CString::try_from_fmt(fmt!("ferroce-async@pci:{dev}")),
        Some(comp) => CString::try_from_fmt(fmt!("ferroce-comp{comp}@pci:{dev}")),
    }
}

/// Entries of the async EQ: room for every admin completion plus async
/// events.
pub(crate) const AEQ_DEPTH: u16 = 256;
/// Entries of each completion EQ.
pub(crate) const CEQ_DEPTH: u16 = 1024;
const _: () = assert!(AEQ_DEPTH.is_power_of_two() && CEQ_DEPTH.is_power_of_two());
const _: () = assert!(AEQ_DEPTH as u32 >= hw::FERROCE_EQ_DEPTH_MIN);
const _: () = assert!(CEQ_DEPTH as u32 <= hw::FERROCE_EQ_DEPTH_MAX);
const _: () = assert!(AEQ_DEPTH >= 2 * crate::cmdq::DEPTH);

const EQE_WORDS: usize = hw::FERROCE_EQE_SIZE as usize / 4;
const _: () = assert!(size_of::<hw::ferroce_eqe>() == EQE_WORDS * 4);

const fn byte_pos(offset: usize) -> (usize, u32) {
    (offset / 4, (offset % 4) as u32 * 8)
}
const OWNER: (usize, u32) = byte_pos(offset_of!(hw::ferroce_eqe, owner));
const TYPE: (usize, u32) = byte_pos(offset_of!(hw::ferroce_eqe, event_type));
const OBJ: usize = offset_of!(hw::ferroce_eqe, obj) / 4;
const DATA: usize = offset_of!(hw::ferroce_eqe, data) / 4;
const DATA2: usize = offset_of!(hw::ferroce_eqe, data2) / 4;

/// One event queue entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Eqe {
    /// `FERROCE_EQE_*`.
    pub(crate) event_type: u8,
    /// The object: cqn, qpn, cmd_id or port.
    pub(crate) obj: u32,
    /// Event specific.
    pub(crate) data: u32,
    /// Event specific.
    pub(crate) data2: u32,
}

/// An event queue.
pub(crate) struct Eq {
    ring: Coherent<[u32]>,
    depth: u16,
    eqn: u8,
    /// Consumer index (free-running); only the EQ's IRQ handler moves it.
    ci: AtomicU16,
}

impl Eq {
    /// Allocates a zeroed ring of `depth` entries for EQ `eqn`.
    pub(crate) fn new(dev: &Device<Bound>, eqn: u8, depth: u16) -> Result<Self> {
        Ok(Self {
            ring: Coherent::zeroed_slice(dev, usize::from(depth) * EQE_WORDS, GFP_KERNEL)?,
            depth,
            eqn,
            ci: AtomicU16::new(0),
        })
    }

    /// The EQ number (== its MSI-X vector).
    pub(crate) fn eqn(&self) -> u8 {
        self.eqn
    }

    /// Entries of the ring.
    pub(crate) fn depth(&self) -> u16 {
        self.depth
    }

    /// Bus address of the ring.
    pub(crate) fn dma_addr(&self) -> DmaAddress {
        self.ring.dma_address()
    }

    /// Word `word` of entry `slot`: the device writes EQEs little-endian.
    fn word(&self, slot: usize, word: usize) -> Result<u32> {
        let raw: u32 = io_read!(&self.ring, [try: slot * EQE_WORDS + word]);
        Ok(u32::from_le(raw))
    }

    /// Consumes the entries the device has written, calling `f` for each,
    /// and returns the new consumer index (for the EQ doorbell). Called
    /// from the EQ's IRQ handler only (never concurrently with itself).
    pub(crate) fn drain(&self, mut f: impl FnMut(Eqe)) -> Result<u16> {
        let mut ci = self.ci.load(Ordering::Relaxed);
        let shift = self.depth.trailing_zeros();
        // At most one ring's worth per call, so a misbehaving device cannot
        // keep the handler looping.
        for _ in 0..self.depth {
            let slot = usize::from(ci & (self.depth - 1));
            let phase = (u32::from(ci >> shift) & 1) ^ 1;
            let w = self.word(slot, OWNER.0)?;
            if (w >> OWNER.1) & hw::FERROCE_EQE_OWNER != phase {
                break;
            }
            dma_mb(Read);
            let eqe = Eqe {
                event_type: regs::lower_8_bits(self.word(slot, TYPE.0)? >> TYPE.1),
                obj: self.word(slot, OBJ)?,
                data: self.word(slot, DATA)?,
                data2: self.word(slot, DATA2)?,
            };
            ci = ci.wrapping_add(1);
            f(eqe);
        }
        self.ci.store(ci, Ordering::Relaxed);
        Ok(ci)
    }
}
