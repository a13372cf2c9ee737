// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).

use super::device::{
    Device,
    Driver, //
};
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::{
    error::from_err_ptr,
    num::casts::FromSafeCast,
    prelude::*, //
};

/// User memory pinned and DMA-mapped for the device; unpinned on drop.
///
/// Drop it only once the device can no longer access it (after the object
/// using it was destroyed on the device).
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get_va` that we own.
pub struct Umem {
    ptr: NonNull<b::ib_umem>,
}

// SAFETY: a umem may be used and released from any thread (process context).
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads the umem's immutable description.
unsafe impl Sync for Umem {}

/// Access flags of [`Umem::get`] (`IB_ACCESS_*`).
pub mod access {
    /// The device writes to the memory.
    pub const LOCAL_WRITE: u32 = crate::bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
}

impl Umem {
    /// Pins `len` bytes at user address `addr` of the current process for
    /// DMA by `dev` (`access`: `IB_ACCESS_*`).
    pub fn get<T: Driver>(dev: &Device<T>, addr: u64, len: usize, access: u32) -> Result<Self> {
        let access = i32::try_from(access)?;
        // SAFETY: `dev` is a live, registered device; the call validates the
        // range and pins it for the current process.
        // `ib_umem_get_va()`: no bundle attribute, the range of the process.
        let ptr = from_err_ptr(unsafe {
            b::ib_umem_get_attr_or_va(dev.as_raw(), core::ptr::null(), 0, addr, len, access)
        })?;
        let ptr = NonNull::new(ptr).ok_or(EFAULT)?;
        // INVARIANT: a umem we own.
        Ok(Self { ptr })
    }

    /// The largest page size of `pgsz_bitmap` (bit n = 2^n bytes) that maps
    /// the umem with `virt` as the device address of its first byte, or
    /// `EINVAL` if none does.
    pub fn best_page_size(&self, pgsz_bitmap: u64, virt: u64) -> Result<u64> {
        let bitmap = usize::try_from(pgsz_bitmap).map_err(|_| EINVAL)?;
        // SAFETY: `ptr` is a valid umem (type invariant).
        let sz = unsafe { b::ib_umem_find_best_pgsz(self.ptr.as_ptr(), bitmap, virt) };
        if sz == 0 {
            return Err(EINVAL);
        }
        Ok(u64::from_safe_cast(sz))
    }

    /// The DMA addresses of the umem's `pgsz`-byte blocks (the first one
    /// aligned down to `pgsz`).
    pub fn dma_blocks(&self, pgsz: u64) -> Result<KVVec<u64>> {
        let pgsz = usize::try_from(pgsz)?;
        if !pgsz.is_power_of_two() {
            return Err(EINVAL);
        }
        let umem = self.ptr.as_ptr();
        // SAFETY: `ptr` is a valid umem (type invariant).
        let n = unsafe { b::ib_umem_num_dma_blocks(umem, pgsz) };
        let mut v = KVVec::with_capacity(n, GFP_KERNEL)?;
        // `rdma_umem_for_each_dma_block()`.
        let mut biter = b::ib_block_iter::default();
        // SAFETY: `umem` is valid (type invariant) and `pgsz` a power of two;
        // the iterator is ours.
        unsafe { b::__rdma_umem_block_iter_start(&mut biter, umem, pgsz) };
        // SAFETY: the iterator was started on `umem` just above.
        while unsafe { b::__rdma_umem_block_iter_next(&mut biter) } {
            if v.len() == n {
                return Err(EIO);
            }
            // SAFETY: the iterator stands on a block.
            let addr = unsafe { b::rdma_block_iter_dma_address(&mut biter) };
            v.push(addr, GFP_KERNEL)?;
        }
        if v.len() != n {
            return Err(EIO);
        }
        Ok(v)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: we own the umem (type invariant).
        unsafe { b::ib_umem_release(self.ptr.as_ptr()) };
    }
}
