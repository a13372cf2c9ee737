// SPDX-License-Identifier: GPL-2.0
//! Guest memory with a hole (included with `#[path]` by the tests that need
//! it, so `common/mod.rs` stays as is).

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use ferroce_dev::{DmaError, FakeMemory, GuestMemory};

/// Guest memory whose reads fail in `hole` although it is mapped (the
/// device was allowed the range when the object was created): memory that
/// becomes unreadable under a posted WQE or a doorbell record.
pub struct HoledMemory {
    pub inner: Arc<FakeMemory>,
    hole: Mutex<Option<(u64, u64)>>,
}

impl HoledMemory {
    pub fn new(inner: Arc<FakeMemory>) -> Self {
        Self {
            inner,
            hole: Mutex::new(None),
        }
    }

    /// Makes reads of `len` bytes at `base` fail (`None`: none do).
    pub fn set_hole(&self, hole: Option<(u64, u64)>) {
        *self.hole.lock().unwrap() = hole;
    }
}

impl GuestMemory for HoledMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        if let Some((base, len)) = *self.hole.lock().unwrap() {
            if gpa < base + len && base < gpa + buf.len() as u64 {
                let len = buf.len() as u64;
                return Err(DmaError { gpa, len });
            }
        }
        self.inner.read(gpa, buf)
    }

    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        self.inner.write(gpa, buf)
    }

    fn check_range(&self, gpa: u64, len: u64) -> Result<(), DmaError> {
        self.inner.check_range(gpa, len)
    }
}
