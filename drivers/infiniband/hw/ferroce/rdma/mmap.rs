// SPDX-License-Identifier: GPL-2.0

//! `mmap()` of device memory into a user context (`rdma_user_mmap_entry`).

use crate::bindings as b;
use core::ptr::NonNull;
use kernel::{
    device::Bound,
    error::to_result,
    num::casts::FromSafeCast,
    page::{
        PAGE_SHIFT,
        PAGE_SIZE, //
    },
    pci,
    prelude::*,
    types::Opaque, //
};

/// A page-aligned range of a BAR of a bound PCI function, the only MMIO a
/// user context can be offered ([`UContextInit::offer_mmio`]): made once at
/// probe from the function and a BAR index, so a driver cannot name any
/// other physical address.
///
/// # Invariants
///
/// `phys..phys + len` lies within BAR `bar` of the function it was made
/// from (`resource_start`/`resource_len` at creation); `phys` and `len` are
/// multiples of `PAGE_SIZE`, `len` is not 0.
///
/// [`UContextInit::offer_mmio`]: super::UContextInit::offer_mmio
#[derive(Clone, Copy, Debug)]
pub struct MmioRegion {
    phys: u64,
    len: u64,
}

impl MmioRegion {
    /// The `len` bytes at `offset` of BAR `bar` of `pdev`; `EINVAL` unless
    /// the range is page aligned, non-empty and inside the BAR, `ENODEV` if
    /// the BAR is not assigned.
    pub fn new(pdev: &pci::Device<Bound>, bar: u32, offset: u64, len: u64) -> Result<Self> {
        let start = pdev.resource_start(bar)?;
        let bar_len = pdev.resource_len(bar)?;
        if start == 0 || bar_len == 0 {
            return Err(ENODEV);
        }
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        let phys = start.checked_add(offset).ok_or(EINVAL)?;
        let page = u64::from_safe_cast(PAGE_SIZE);
        if len == 0 || end > bar_len || phys % page != 0 || len % page != 0 {
            return Err(EINVAL);
        }
        // INVARIANT: checked just above.
        Ok(Self { phys, len })
    }

    /// The physical address of the `len` bytes at `offset` of the region;
    /// `EINVAL` unless they are page aligned, non-empty and inside it.
    fn slice(&self, offset: u64, len: u64) -> Result<u64> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        let page = u64::from_safe_cast(PAGE_SIZE);
        if len == 0 || end > self.len || offset % page != 0 || len % page != 0 {
            return Err(EINVAL);
        }
        Ok(self.phys + offset)
    }
}

/// An mmap entry of ib_core followed by what it maps.
///
/// Allocated by [`MmapIo::insert`]; from then on ib_core owns it (it is
/// reference counted) and frees it through the `mmap_free` op
/// ([`free_entry`]).
#[repr(C)]
struct IoEntry {
    entry: Opaque<b::rdma_user_mmap_entry>,
    /// Page frame number of the first MMIO page.
    pfn: usize,
}

/// MMIO pages offered to a user context for `mmap()` (uncached), e.g. a
/// doorbell page. Dropping it withdraws the offer; existing mappings stay
/// until their VMAs go (or ib_core zaps them on disassociation).
///
/// # Invariants
///
/// `entry` is an inserted `IoEntry` on which we hold ib_core's initial
/// reference.
pub(crate) struct MmapIo {
    entry: NonNull<IoEntry>,
}

// SAFETY: the entry is only read after insertion, and removing it may happen
// from any thread (process context).
unsafe impl Send for MmapIo {}
// SAFETY: as above.
unsafe impl Sync for MmapIo {}

impl MmapIo {
    /// Offers the `len` bytes at `offset` of `region` (page aligned, inside
    /// it) to the user context `uctx`.
    ///
    /// # Safety
    ///
    /// `uctx` must be a live user context of a device with the `mmap` and
    /// `mmap_free` ops of this module, and the returned object must be
    /// dropped before the context is deallocated.
    pub(super) unsafe fn insert(
        uctx: *mut b::ib_ucontext,
        region: &MmioRegion,
        offset: u64,
        len: u64,
    ) -> Result<Self> {
        let phys = region.slice(offset, len)?;
        let len = usize::try_from(len)?;
        let pfn = usize::try_from(phys >> PAGE_SHIFT)?;
        let boxed = KBox::new(
            IoEntry {
                entry: Opaque::zeroed(),
                pfn,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(boxed);
        // SAFETY: `uctx` is live (safety requirements); `raw` is a valid,
        // zeroed entry that ib_core takes over on success.
        let ret = unsafe { b::rdma_user_mmap_entry_insert(uctx, (*raw).entry.get(), len) };
        if let Err(e) = to_result(ret) {
            // SAFETY: insertion failed, the box is still ours.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(e);
        }
        // INVARIANT: inserted; we hold the initial reference.
        Ok(Self {
            // SAFETY: `KBox::into_raw` never returns NULL.
            entry: unsafe { NonNull::new_unchecked(raw) },
        })
    }

    /// The `mmap()` offset userspace passes to map the pages.
    pub(crate) fn offset(&self) -> u64 {
        // SAFETY: the entry is inserted and alive (type invariant).
        unsafe { b::rdma_user_mmap_get_offset((*self.entry.as_ptr()).entry.get()) }
    }
}

impl Drop for MmapIo {
    fn drop(&mut self) {
        // SAFETY: the entry is inserted; this drops our reference, ib_core
        // frees it through `mmap_free` once no mapping uses it.
        unsafe { b::rdma_user_mmap_entry_remove((*self.entry.as_ptr()).entry.get()) };
    }
}

/// The `mmap` op: maps the entry named by the VMA's offset, uncached.
///
/// # Safety
///
/// `uctx` and `vma` must be what ib_core passes to the `mmap` op of a device
/// whose mmap entries are all [`MmapIo`]s.
pub(super) unsafe fn mmap(
    uctx: *mut b::ib_ucontext,
    vma: *mut kernel::bindings::vm_area_struct,
) -> i32 {
    // SAFETY: per the safety requirements; the lookup takes a reference.
    let entry = unsafe { b::rdma_user_mmap_entry_get(uctx, vma.cast()) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    let io = entry.cast::<IoEntry>();
    // SAFETY: every entry of this device is an `IoEntry` (entry at offset
    // 0), alive while we hold the lookup's reference; `vma` is valid for the
    // call. The entry's pages are mapped uncached (doorbell pages).
    let ret = unsafe {
        match (*entry).npages.checked_mul(kernel::page::PAGE_SIZE) {
            Some(len) => b::rdma_user_mmap_io(
                uctx,
                vma.cast(),
                (*io).pfn,
                len,
                b::pgprot_noncached((*vma).vm_page_prot),
                entry,
            ),
            None => EINVAL.to_errno(),
        }
    };
    // SAFETY: drops the lookup's reference.
    unsafe { b::rdma_user_mmap_entry_put(entry) };
    ret
}

/// The `mmap_free` op: frees an entry whose last reference is gone.
///
/// # Safety
///
/// `entry` must be an [`IoEntry`] inserted by [`MmapIo::insert`], passed by
/// ib_core once its reference count dropped to zero.
pub(super) unsafe fn free_entry(entry: *mut b::rdma_user_mmap_entry) {
    // SAFETY: per the safety requirements the box is ours again.
    drop(unsafe { KBox::from_raw(entry.cast::<IoEntry>()) });
}
