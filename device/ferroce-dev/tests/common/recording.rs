// SPDX-License-Identifier: GPL-2.0
//! Guest memory that records every access the device makes (included with
//! `#[path]` by the tests that need it, so `common/mod.rs` stays as is).

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use ferroce_dev::{DmaError, FakeMemory, GuestMemory};

/// One device access: guest address, length, direction, whether it was
/// inside mapped memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub gpa: u64,
    pub len: u64,
    pub write: bool,
    pub ok: bool,
}

/// A [`FakeMemory`] that logs every read and write the device makes.
pub struct RecordingMemory {
    pub inner: Arc<FakeMemory>,
    log: Mutex<Vec<Access>>,
}

impl RecordingMemory {
    pub fn new(inner: Arc<FakeMemory>) -> Self {
        Self {
            inner,
            log: Mutex::new(Vec::new()),
        }
    }

    /// Returns and clears the accesses so far.
    pub fn take(&self) -> Vec<Access> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn push(&self, gpa: u64, len: usize, write: bool, ok: bool) {
        self.log.lock().unwrap().push(Access {
            gpa,
            len: len as u64,
            write,
            ok,
        });
    }
}

impl GuestMemory for RecordingMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = self.inner.read(gpa, buf);
        self.push(gpa, buf.len(), false, r.is_ok());
        r
    }

    fn write(&self, gpa: u64, buf: &[u8]) -> Result<(), DmaError> {
        let r = self.inner.write(gpa, buf);
        self.push(gpa, buf.len(), true, r.is_ok());
        r
    }

    fn check_range(&self, gpa: u64, len: u64) -> Result<(), DmaError> {
        // A look-up in the mapping table, not a bus access: not logged.
        self.inner.check_range(gpa, len)
    }
}
