// SPDX-License-Identifier: GPL-2.0

//! Doorbell records of kernel queues (`Documentation/ferroce/device.rst`,
//! "Doorbell records"): 8-byte records the driver writes and the device
//! DMA-reads, handed out from shared coherent pages as mlx5's
//! `mlx5_db_alloc` does. A page holds 512 records; one is allocated when
//! no page has a free record, and freed when its last record goes. Nothing
//! is allocated per record.

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
    new_mutex,
    num::casts::FromSafeCast,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    }, //
};

/// Records per page (4 KiB of 8-byte records).
const PER_PAGE: usize = 4096 / hw::FERROCE_DBREC_ALIGN as usize;
const WORDS: usize = PER_PAGE / 64;

/// One coherent page of records, as le32 halves: record `i` is words
/// `2 * i` (the index software writes) and `2 * i + 1` (reserved, or the
/// consumer index the device writes back into an SRQ record).
struct DbRecPage {
    mem: Coherent<[u32]>,
}

/// A page and which of its records are in use (guarded by the pool's
/// lock).
struct PageSlot {
    page: Arc<DbRecPage>,
    used: [u64; WORDS],
}

impl PageSlot {
    fn is_empty(&self) -> bool {
        self.used.iter().all(|&w| w == 0)
    }

    /// Takes a free record of the page.
    fn take(&mut self) -> Option<usize> {
        for (w, word) in self.used.iter_mut().enumerate() {
            if *word != u64::MAX {
                let bit = usize::from_safe_cast((!*word).trailing_zeros());
                *word |= 1 << bit;
                return Some(w * 64 + bit);
            }
        }
        None
    }
}

/// The doorbell-record pages of one device.
#[pin_data]
pub(crate) struct DbRecPool {
    #[pin]
    pages: Mutex<KVec<PageSlot>>,
}

impl DbRecPool {
    /// An empty pool.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            pages <- new_mutex!(KVec::new()),
        })
    }

    /// A zeroed record; allocates a page if every page is full. Sleeps.
    pub(crate) fn alloc(pool: &Arc<Self>, dev: &Device<Bound>) -> Result<DbRec> {
        let mut pages = pool.pages.lock();
        for slot in pages.iter_mut() {
            if let Some(index) = slot.take() {
                let rec = DbRec {
                    pool: pool.clone(),
                    page: slot.page.clone(),
                    index,
                };
                // A record freed earlier may hold old values.
                rec.clear()?;
                return Ok(rec);
            }
        }
        let page = Arc::new(
            DbRecPage {
                mem: Coherent::zeroed_slice(dev, 2 * PER_PAGE, GFP_KERNEL)?,
            },
            GFP_KERNEL,
        )?;
        let mut slot = PageSlot {
            page: page.clone(),
            used: [0; WORDS],
        };
        let index = slot.take().ok_or(ENOMEM)?;
        pages.push(slot, GFP_KERNEL)?;
        Ok(DbRec {
            pool: pool.clone(),
            page,
            index,
        })
    }

    /// The debugfs `dbrecs` file: pages and records in use.
    pub(crate) fn show(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let pages = self.pages.lock();
        let records: u32 = pages
            .iter()
            .flat_map(|s| s.used.iter())
            .map(|w| w.count_ones())
            .sum();
        writeln!(f, "pages {}", pages.len())?;
        writeln!(f, "records {}", records)
    }

    fn free(&self, page: &Arc<DbRecPage>, index: usize) {
        let mut pages = self.pages.lock();
        let Some(pos) = pages.iter().position(|s| Arc::ptr_eq(&s.page, page)) else {
            return;
        };
        let slot = &mut pages[pos];
        slot.used[index / 64] &= !(1u64 << (index % 64));
        if slot.is_empty() {
            // The page goes with its last record (the record's own
            // reference is dropped right after).
            drop(pages.remove(pos));
        }
    }
}

/// One doorbell record; returned to its pool when dropped.
pub(crate) struct DbRec {
    pool: Arc<DbRecPool>,
    page: Arc<DbRecPage>,
    index: usize,
}

impl DbRec {
    /// The bus address the device reads the record at.
    pub(crate) fn dma_addr(&self) -> u64 {
        self.page.mem.dma_address() + u64::from_safe_cast(self.index * 8)
    }

    /// Stores a producer or consumer index (bits 15:0 of the record's
    /// first le32) with one 32-bit store: the second half is the device's
    /// in an SRQ record.
    pub(crate) fn write(&self, index: u32) -> Result {
        io_write!(&self.page.mem, [try: 2 * self.index], index.to_le());
        Ok(())
    }

    /// The record's second le32: the consumer index the device writes
    /// back into an SRQ record (`struct ferroce_srq_dbrec`).
    pub(crate) fn read_device_half(&self) -> Result<u32> {
        let v: u32 = io_read!(&self.page.mem, [try: 2 * self.index + 1]);
        Ok(u32::from_le(v))
    }

    /// Zeroes both halves.
    fn clear(&self) -> Result {
        io_write!(&self.page.mem, [try: 2 * self.index], 0u32);
        io_write!(&self.page.mem, [try: 2 * self.index + 1], 0u32);
        Ok(())
    }
}

impl Drop for DbRec {
    fn drop(&mut self) {
        self.pool.free(&self.page, self.index);
    }
}
