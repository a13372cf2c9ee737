// SPDX-License-Identifier: GPL-2.0
//! Guest memory access for device worker threads.
//!
//! The client (QEMU) announces guest RAM with `VFIO_USER_DMA_MAP`, passing a file
//! descriptor (a shared memfd) that the server maps with `MAP_SHARED`. Ranges announced
//! without a descriptor (ROM/VGA) are recorded but not accessible.
//!
//! Rules:
//! * An access must lie entirely inside **one** mapping. An access that crosses from one
//!   mapping into an adjacent one is rejected with [`Error::OutOfRange`] even if the two
//!   mappings are contiguous in guest physical address space: callers split accesses at
//!   their own buffer boundaries (QEMU maps each RAM block separately, and a guest buffer
//!   from `dma_alloc_coherent` never spans RAM blocks).
//! * Lookups take a read lock for the time it takes to clone an `Arc`; the copy itself runs
//!   without the lock. `DMA_UNMAP` removes the window from the table, then waits for
//!   accesses already in flight on it (single copies) before the reply is sent, as the
//!   protocol requires; the `munmap` happens when the last `Arc` is dropped, so even a
//!   stuck access can never touch unmapped memory.
//! * Guest memory is shared with a running guest, so it is only accessed through raw
//!   pointer copies, never through Rust references.

use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::ptr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::sys::{self, MmapRegion};
use crate::Error;

/// One DMA window announced by the client.
#[derive(Debug)]
struct Mapping {
    gpa: u64,
    size: u64,
    readable: bool,
    writable: bool,
    /// `None` for windows announced without a file descriptor.
    host: Option<MmapRegion>,
}

impl Mapping {
    fn end(&self) -> u64 {
        // Construction guarantees no overflow.
        self.gpa + self.size
    }
}

/// Information about one DMA window (for diagnostics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaRegionInfo {
    /// Guest physical (IOVA) start address.
    pub gpa: u64,
    /// Size in bytes.
    pub size: u64,
    /// The server can read/write it (it came with a file descriptor).
    pub accessible: bool,
    /// The client allows device writes.
    pub writable: bool,
}

/// Cloneable, thread-safe handle to the current set of DMA mappings.
#[derive(Debug, Clone, Default)]
pub struct Dma {
    maps: Arc<RwLock<BTreeMap<u64, Arc<Mapping>>>>,
}

impl Dma {
    /// Creates an empty mapping table (the server creates one; devices get clones).
    pub fn new() -> Dma {
        Dma::default()
    }

    fn read_maps(&self) -> RwLockReadGuard<'_, BTreeMap<u64, Arc<Mapping>>> {
        // A poisoned lock only means a panic elsewhere; the map itself is still consistent
        // because every mutation is a single insert/remove.
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_maps(&self) -> RwLockWriteGuard<'_, BTreeMap<u64, Arc<Mapping>>> {
        self.maps.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a window backed by `fd` at `offset` (mapped `MAP_SHARED`), or, with `fd ==
    /// None`, an inaccessible window. Fails with `EEXIST` semantics
    /// ([`Error::Overlap`]) if it overlaps an existing window.
    pub fn map(
        &self,
        gpa: u64,
        size: u64,
        fd: Option<BorrowedFd<'_>>,
        offset: u64,
        readable: bool,
        writable: bool,
    ) -> Result<(), Error> {
        if size == 0 || gpa.checked_add(size).is_none() {
            return Err(Error::OutOfRange { gpa, len: size });
        }
        if usize::try_from(size).is_err() {
            return Err(Error::OutOfRange { gpa, len: size });
        }
        // Check the table before doing the (possibly expensive) mmap, and again under
        // the write lock after it.
        self.check_free(&self.read_maps(), gpa, size)?;
        let host = match fd {
            Some(fd) => {
                // Refuse windows that extend past the end of a regular file/memfd: touching
                // such pages would raise SIGBUS in the device process.
                if let Some(file_size) = sys::regular_file_size(fd)? {
                    match offset.checked_add(size) {
                        Some(end) if end <= file_size => {}
                        _ => return Err(Error::OutOfRange { gpa, len: size }),
                    }
                }
                Some(MmapRegion::new(fd, offset, size, writable)?)
            }
            None => None,
        };
        let mapping = Arc::new(Mapping {
            gpa,
            size,
            readable,
            writable,
            host,
        });
        let mut maps = self.write_maps();
        self.check_free(&maps, gpa, size)?;
        if maps.len() >= crate::proto::MAX_DMA_MAPS {
            return Err(Error::TooManyMappings);
        }
        maps.insert(gpa, mapping);
        Ok(())
    }

    fn check_free(
        &self,
        maps: &BTreeMap<u64, Arc<Mapping>>,
        gpa: u64,
        size: u64,
    ) -> Result<(), Error> {
        let end = gpa + size;
        if let Some((_, m)) = maps.range(..end).next_back() {
            if m.end() > gpa {
                return Err(Error::Overlap { gpa, len: size });
            }
        }
        Ok(())
    }

    /// Removes the window that starts at `gpa` with exactly `size` bytes, then waits until
    /// accesses already in flight on it have finished (each is a single copy), so that no
    /// device access touches the window after this returns.
    pub fn unmap(&self, gpa: u64, size: u64) -> Result<(), Error> {
        let removed = {
            let mut maps = self.write_maps();
            match maps.get(&gpa) {
                Some(m) if m.size == size => maps.remove(&gpa),
                _ => return Err(Error::NotMapped { gpa, len: size }),
            }
        };
        if let Some(m) = removed {
            wait_idle(&m);
        }
        Ok(())
    }

    /// Removes all windows (client disconnect, `VFIO_DMA_UNMAP_FLAG_ALL`), waiting for
    /// accesses in flight like [`Dma::unmap`].
    pub fn unmap_all(&self) {
        let removed = std::mem::take(&mut *self.write_maps());
        for m in removed.values() {
            wait_idle(m);
        }
    }

    /// Lists the current windows, ordered by address.
    pub fn regions(&self) -> Vec<DmaRegionInfo> {
        self.read_maps()
            .values()
            .map(|m| DmaRegionInfo {
                gpa: m.gpa,
                size: m.size,
                accessible: m.host.is_some(),
                writable: m.writable,
            })
            .collect()
    }

    /// Finds the mapping wholly containing `[gpa, gpa + len)`, returning it and the offset
    /// of `gpa` inside it.
    fn lookup(&self, gpa: u64, len: usize, write: bool) -> Result<(Arc<Mapping>, usize), Error> {
        let len64 = len as u64;
        let end = gpa
            .checked_add(len64)
            .ok_or(Error::OutOfRange { gpa, len: len64 })?;
        let m = {
            let maps = self.read_maps();
            match maps.range(..=gpa).next_back() {
                Some((_, m)) if end <= m.end() => Arc::clone(m),
                _ => return Err(Error::OutOfRange { gpa, len: len64 }),
            }
        };
        if m.host.is_none() {
            return Err(Error::NotAccessible { gpa });
        }
        if (write && !m.writable) || (!write && !m.readable) {
            return Err(Error::PermissionDenied { gpa });
        }
        // `gpa - m.gpa < m.size`, which fits in usize (checked at map time).
        let off = (gpa - m.gpa) as usize;
        Ok((m, off))
    }

    /// Copies guest memory at `gpa` into `buf`.
    pub fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), Error> {
        if buf.is_empty() {
            return Ok(());
        }
        let (m, off) = self.lookup(gpa, buf.len(), false)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        copy_from_guest(host, off, buf);
        Ok(())
    }

    /// Copies `data` into guest memory at `gpa`.
    pub fn write(&self, gpa: u64, data: &[u8]) -> Result<(), Error> {
        if data.is_empty() {
            return Ok(());
        }
        let (m, off) = self.lookup(gpa, data.len(), true)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        copy_to_guest(host, off, data);
        Ok(())
    }

    /// Reads a little-endian `u32` (one 32-bit load when the address is 4-byte aligned).
    pub fn read_u32(&self, gpa: u64) -> Result<u32, Error> {
        let (m, off) = self.lookup(gpa, 4, false)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        Ok(load_u32(host, off))
    }

    /// Reads a little-endian `u64` (one 64-bit load when the address is 8-byte aligned).
    pub fn read_u64(&self, gpa: u64) -> Result<u64, Error> {
        let (m, off) = self.lookup(gpa, 8, false)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        Ok(load_u64(host, off))
    }

    /// Writes a little-endian `u32` (one 32-bit store when the address is 4-byte aligned).
    pub fn write_u32(&self, gpa: u64, value: u32) -> Result<(), Error> {
        let (m, off) = self.lookup(gpa, 4, true)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        store_u32(host, off, value);
        Ok(())
    }

    /// Writes a little-endian `u64` (one 64-bit store when the address is 8-byte aligned).
    pub fn write_u64(&self, gpa: u64, value: u64) -> Result<(), Error> {
        let (m, off) = self.lookup(gpa, 8, true)?;
        let host = m.host.as_ref().ok_or(Error::NotAccessible { gpa })?;
        store_u64(host, off, value);
        Ok(())
    }
}

/// Waits (briefly) until `m` is only referenced by the caller. Accesses hold their `Arc`
/// only for one copy, so this normally returns at once; after a second it gives up with a
/// warning (memory safety does not depend on it: the pages stay mapped until the last
/// `Arc` is dropped).
fn wait_idle(m: &Arc<Mapping>) {
    let start = Instant::now();
    while Arc::strong_count(m) > 1 {
        if start.elapsed() > Duration::from_secs(1) {
            log::warn!(
                "vfio-user: DMA window {:#x}+{:#x} still in use after unmap",
                m.gpa,
                m.size
            );
            return;
        }
        std::thread::yield_now();
    }
}

fn check_bounds(host: &MmapRegion, off: usize, len: usize) {
    // `lookup` already guarantees this; keep a hard check so a logic error can never turn
    // into an out-of-bounds access.
    assert!(
        off.checked_add(len).is_some_and(|e| e <= host.len()),
        "DMA bounds"
    );
}

fn copy_from_guest(host: &MmapRegion, off: usize, buf: &mut [u8]) {
    check_bounds(host, off, buf.len());
    // SAFETY: `off + buf.len() <= host.len()` (checked above), the mapping stays alive
    // while `host` is borrowed, and `buf` is a distinct Rust buffer so the ranges do not
    // overlap. The guest may write concurrently; we only copy bytes, never form a
    // reference to guest memory.
    unsafe { ptr::copy_nonoverlapping(host.as_ptr().add(off), buf.as_mut_ptr(), buf.len()) }
}

fn copy_to_guest(host: &MmapRegion, off: usize, data: &[u8]) {
    check_bounds(host, off, data.len());
    // SAFETY: as in `copy_from_guest`; the mapping is writable because `lookup` checked
    // the window's write permission, and PROT_WRITE was requested for writable windows.
    unsafe { ptr::copy_nonoverlapping(data.as_ptr(), host.as_ptr().add(off), data.len()) }
}

fn load_u32(host: &MmapRegion, off: usize) -> u32 {
    check_bounds(host, off, 4);
    // SAFETY: `off + 4 <= host.len()` (checked above) and the mapping is alive while
    // `host` is borrowed. An aligned address gets one volatile 32-bit load (the guest may
    // be writing concurrently); otherwise an unaligned read.
    let v = unsafe {
        let p = host.as_ptr().add(off) as *const u32;
        if p.is_aligned() {
            ptr::read_volatile(p)
        } else {
            ptr::read_unaligned(p)
        }
    };
    u32::from_le(v)
}

fn load_u64(host: &MmapRegion, off: usize) -> u64 {
    check_bounds(host, off, 8);
    // SAFETY: as in `load_u32`, for 8 bytes.
    let v = unsafe {
        let p = host.as_ptr().add(off) as *const u64;
        if p.is_aligned() {
            ptr::read_volatile(p)
        } else {
            ptr::read_unaligned(p)
        }
    };
    u64::from_le(v)
}

fn store_u32(host: &MmapRegion, off: usize, value: u32) {
    check_bounds(host, off, 4);
    // SAFETY: in bounds (checked above), mapping alive, and `lookup` checked that the
    // window is writable (mapped with PROT_WRITE).
    unsafe {
        let p = host.as_ptr().add(off) as *mut u32;
        if p.is_aligned() {
            ptr::write_volatile(p, value.to_le())
        } else {
            ptr::write_unaligned(p, value.to_le())
        }
    }
}

fn store_u64(host: &MmapRegion, off: usize, value: u64) {
    check_bounds(host, off, 8);
    // SAFETY: as in `store_u32`, for 8 bytes.
    unsafe {
        let p = host.as_ptr().add(off) as *mut u64;
        if p.is_aligned() {
            ptr::write_volatile(p, value.to_le())
        } else {
            ptr::write_unaligned(p, value.to_le())
        }
    }
}
