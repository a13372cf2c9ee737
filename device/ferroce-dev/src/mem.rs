// SPDX-License-Identifier: GPL-2.0
//! DMA and interrupt abstractions the device model runs against.
//!
//! The control plane never touches guest memory or eventfds directly: it
//! goes through [`GuestMemory`] and [`IrqSink`], so a vfio-user server can
//! plug in its DMA mapping table and MSI-X eventfds and unit tests can plug
//! in [`FakeMemory`] and [`RecordingIrq`].

use std::collections::BTreeMap;
use std::sync::Mutex;

/// A DMA access the device could not perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DMA to unmapped guest range {gpa:#x}+{len:#x}")]
pub struct DmaError {
    /// First guest physical address of the access.
    pub gpa: u64,
    /// Length of the access in bytes.
    pub len: u64,
}

/// Guest physical memory as seen by the device (DMA).
pub trait GuestMemory: Send + Sync {
    /// Reads `buf.len()` bytes at guest physical address `gpa`.
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Writes `buf` at guest physical address `gpa`.
    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError>;
    /// Writes `value` little-endian at `gpa`, as one 64-bit store where the
    /// memory can (an 8-byte aligned address): an ATOMIC_WRITE's (1.8).
    ///
    /// The default writes the 8 bytes with [`Self::write`].
    fn write_u64(&self, gpa: u64, value: u64) -> Result<(), DmaError> {
        self.write(gpa, &value.to_le_bytes())
    }
    /// Checks that `gpa..gpa+len` is DMA-able without transferring it.
    ///
    /// The default probes the first and the last byte; implementations that
    /// know their mapping table should check the whole range.
    fn check_range(&self, gpa: u64, len: u64) -> Result<(), DmaError> {
        if len == 0 {
            return Ok(());
        }
        let last = gpa.checked_add(len - 1).ok_or(DmaError { gpa, len })?;
        let mut b = [0u8; 1];
        self.read(gpa, &mut b).map_err(|_| DmaError { gpa, len })?;
        self.read(last, &mut b).map_err(|_| DmaError { gpa, len })
    }
}

/// Interrupt delivery (MSI-X vectors).
pub trait IrqSink: Send + Sync {
    /// Signals MSI-X vector `vector`.
    fn trigger(&self, vector: u16);
}

/// Memory made of a few disjoint byte regions; for tests and tools.
#[derive(Debug, Default)]
pub struct FakeMemory {
    regions: Mutex<BTreeMap<u64, Vec<u8>>>,
}

impl FakeMemory {
    /// An empty memory: every access fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a zero-filled region `base..base+size`.
    pub fn add_region(&self, base: u64, size: usize) {
        self.lock().insert(base, vec![0; size]);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Vec<u8>>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes `gpa..gpa+len` of the region that holds them all, found
    /// with one lookup.
    fn locate(map: &mut BTreeMap<u64, Vec<u8>>, gpa: u64, len: u64) -> Option<&mut [u8]> {
        let (base, region) = map.range_mut(..=gpa).next_back()?;
        let off = usize::try_from(gpa.checked_sub(*base)?).ok()?;
        let end = off.checked_add(usize::try_from(len).ok()?)?;
        region.get_mut(off..end)
    }

    /// Reads a little-endian u32 (test helper; panics on unmapped memory).
    pub fn read_u32(&self, gpa: u64) -> u32 {
        let mut b = [0u8; 4];
        self.read(gpa, &mut b).expect("read_u32");
        u32::from_le_bytes(b)
    }

    /// Writes a little-endian u32 (test helper; panics on unmapped memory).
    pub fn write_u32(&self, gpa: u64, v: u32) {
        self.write(gpa, &v.to_le_bytes()).expect("write_u32");
    }
}

impl GuestMemory for FakeMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let len = buf.len() as u64;
        let mut map = self.lock();
        let src = Self::locate(&mut map, gpa, len).ok_or(DmaError { gpa, len })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        let len = buf.len() as u64;
        let mut map = self.lock();
        let dst = Self::locate(&mut map, gpa, len).ok_or(DmaError { gpa, len })?;
        dst.copy_from_slice(buf);
        Ok(())
    }

    fn check_range(&self, gpa: u64, len: u64) -> Result<(), DmaError> {
        let mut map = self.lock();
        Self::locate(&mut map, gpa, len)
            .map(|_| ())
            .ok_or(DmaError { gpa, len })
    }
}

/// Memory with nothing mapped (the device before a DMA backend is attached).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullMemory;

impl GuestMemory for NullMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        Err(DmaError {
            gpa,
            len: buf.len() as u64,
        })
    }
    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        Err(DmaError {
            gpa,
            len: buf.len() as u64,
        })
    }
}

/// An [`IrqSink`] that records every triggered vector; for tests.
#[derive(Debug, Default)]
pub struct RecordingIrq {
    fired: Mutex<Vec<u16>>,
}

impl RecordingIrq {
    /// A sink with no interrupts recorded.
    pub fn new() -> Self {
        Self::default()
    }
    /// Returns and clears the vectors triggered so far, in order.
    pub fn take(&self) -> Vec<u16> {
        std::mem::take(&mut *self.fired.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl IrqSink for RecordingIrq {
    fn trigger(&self, vector: u16) {
        self.fired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(vector);
    }
}

/// An [`IrqSink`] that drops interrupts.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullIrq;

impl IrqSink for NullIrq {
    fn trigger(&self, _vector: u16) {}
}
