// SPDX-License-Identifier: GPL-2.0

//! Page lists (`struct ferroce_pbl`, `Documentation/ferroce/device.rst`,
//! "Page lists"): how CQ, SQ, RQ and MR memory is described to the device.
//!
//! The device reads a list only while the command naming it executes, so
//! one coherent scratch area, allocated at probe and used under a mutex
//! around build + command, holds every list; nothing is allocated per
//! command.

#![forbid(unsafe_code)]

use crate::bindings as hw;
use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_read,
        io_write, //
    },
    num::casts::{
        u32_into_u8,
        FromSafeCast, //
    },
    prelude::*, //
};

/// Entries of one 4 KiB list page.
const L1: usize = hw::FERROCE_PBL_L1_ENTRIES as usize;

/// `FERROCE_PBL_LEVEL_*`, as `ferroce_pbl.level` takes them.
const LEVEL_0: u8 = u32_into_u8::<{ hw::FERROCE_PBL_LEVEL_0 }>();
pub(crate) const LEVEL_1: u8 = u32_into_u8::<{ hw::FERROCE_PBL_LEVEL_1 }>();
const LEVEL_2: u8 = u32_into_u8::<{ hw::FERROCE_PBL_LEVEL_2 }>();

/// Scratch pages for lists: 256 pages = 1 MiB, enough for one level-2 list
/// of 255 level-1 pages (130560 pages: 510 MiB of 4 KiB pages, more with
/// larger pages) or several smaller lists.
pub(crate) const SCRATCH_PAGES: usize = 256;

/// The coherent scratch area lists are built in.
pub(crate) struct PblScratch {
    mem: Coherent<[u64]>,
}

impl PblScratch {
    /// Allocates the scratch area.
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        Ok(Self {
            mem: Coherent::zeroed_slice(dev, SCRATCH_PAGES * L1, GFP_KERNEL)?,
        })
    }

    /// Bus address of the area, for a command's response (`resp_addr`)
    /// when no list is built.
    pub(crate) fn resp_addr(&self) -> u64 {
        self.mem.dma_address()
    }

    /// Zeroes the first `len` bytes of the area (rounded up to 8), so the
    /// part of a response a device does not write reads 0.
    pub(crate) fn clear_resp(&mut self, len: usize) -> Result {
        for i in 0..len.div_ceil(8) {
            io_write!(&self.mem, [try: i], 0u64);
        }
        Ok(())
    }

    /// Reads the first `out.len()` bytes of the area (a command's
    /// response).
    pub(crate) fn read_resp(&self, out: &mut [u8]) -> Result {
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            let w: u64 = io_read!(&self.mem, [try: i]);
            let bytes = u64::from_le(w).to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }

    /// A builder placing lists one after the other in the scratch area.
    pub(crate) fn builder(&mut self) -> PblBuilder<'_> {
        PblBuilder {
            scratch: self,
            next_page: 0,
        }
    }
}

/// Places page lists in the scratch area (see [`PblScratch::builder`]).
pub(crate) struct PblBuilder<'a> {
    scratch: &'a mut PblScratch,
    /// First free scratch page.
    next_page: usize,
}

impl PblBuilder<'_> {
    fn put(&mut self, index: usize, value: u64) -> Result {
        io_write!(&self.scratch.mem, [try: index], value.to_le());
        Ok(())
    }

    fn page_addr(&self, page: usize) -> u64 {
        self.scratch.mem.dma_address() + u64::from_safe_cast(page * L1 * 8)
    }

    /// Describes a buffer of `pages` (DMA addresses of `1 << page_shift`
    /// byte pages, each aligned to that size) with the lowest level that
    /// fits. `E2BIG` if the list does not fit in what is left.
    pub(crate) fn add(&mut self, pages: &[u64], page_shift: u32) -> Result<hw::ferroce_pbl> {
        let n = pages.len();
        let page_count = u32::try_from(n)?;
        if n == 0 || page_count > hw::FERROCE_PBL_MAX_PAGES {
            return Err(EINVAL);
        }
        if !(hw::FERROCE_PAGE_SHIFT_MIN..=hw::FERROCE_PAGE_SHIFT_MAX).contains(&page_shift) {
            return Err(EINVAL);
        }
        let mut pbl = hw::ferroce_pbl {
            page_count,
            page_shift: u8::try_from(page_shift)?,
            ..Default::default()
        };
        if n == 1 {
            pbl.level = LEVEL_0;
            pbl.addr = pages[0];
            return Ok(pbl);
        }
        let first = self.next_page;
        let l1_pages = n.div_ceil(L1);
        // Level 1: the page list at page `first`. Level 2: the array of
        // level-1 pages at `first`, the page list from `first + 1` on.
        let (level, list) = if l1_pages == 1 {
            (LEVEL_1, first)
        } else {
            (LEVEL_2, first + 1)
        };
        if list + l1_pages > SCRATCH_PAGES {
            return Err(E2BIG);
        }
        if level == LEVEL_2 {
            for k in 0..l1_pages {
                let addr = self.page_addr(list + k);
                self.put(first * L1 + k, addr)?;
            }
        }
        for (i, &p) in pages.iter().enumerate() {
            self.put(list * L1 + i, p)?;
        }
        self.next_page = list + l1_pages;
        pbl.level = level;
        pbl.addr = self.page_addr(first);
        Ok(pbl)
    }
}
