// SPDX-License-Identifier: GPL-2.0
//! MSI-X interrupt delivery through the eventfds the client hands over with
//! `VFIO_USER_DEVICE_SET_IRQS`.
//!
//! QEMU 11.1 emulates the MSI-X table and the per-vector mask bits itself: it sends one
//! SET_IRQS with count 1 and no descriptor when the guest enables MSI-X, then one
//! descriptor per vector as the guest first unmasks it, and may replace a vector's
//! descriptor later. Writing a vector's eventfd while the guest has the vector masked is
//! fine: QEMU holds it pending and delivers it on unmask.
//!
//! This handle therefore only has to bridge the window in which a vector has no eventfd
//! yet: [`Irqs::trigger`] on such a vector sets a pending bit (also reported through PBA
//! reads) and the interrupt is delivered as soon as a descriptor arrives. A server-side
//! mask (SET_IRQS `ACTION_MASK`, which QEMU does not send for MSI-X) behaves the same way.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sys;
use crate::Error;

#[derive(Debug, Default)]
struct Vector {
    fd: Option<OwnedFd>,
    pending: bool,
    masked: bool,
}

#[derive(Debug)]
struct State {
    enabled: bool,
    vectors: Vec<Vector>,
}

/// Cloneable, thread-safe handle used by device workers to raise MSI-X interrupts.
#[derive(Debug, Clone)]
pub struct Irqs {
    state: Arc<Mutex<State>>,
    count: u16,
}

impl Irqs {
    /// Creates the interrupt state for `vectors` MSI-X vectors (0 for a device without
    /// MSI-X). The server creates one; devices get clones.
    pub fn new(vectors: u16) -> Irqs {
        Irqs {
            state: Arc::new(Mutex::new(State {
                enabled: false,
                vectors: (0..vectors).map(|_| Vector::default()).collect(),
            })),
            count: vectors,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of MSI-X vectors.
    pub fn vectors(&self) -> u16 {
        self.count
    }

    /// Raises MSI-X vector `vector`: writes 1 to its eventfd, or records it as pending if
    /// the vector has no eventfd yet (delivered when one arrives).
    pub fn trigger(&self, vector: u16) -> Result<(), Error> {
        let mut st = self.lock();
        let v = st
            .vectors
            .get_mut(usize::from(vector))
            .ok_or(Error::InvalidVector(vector))?;
        match (&v.fd, v.masked) {
            (Some(fd), false) => {
                sys::eventfd_write(fd.as_fd(), 1)?;
                Ok(())
            }
            _ => {
                v.pending = true;
                Ok(())
            }
        }
    }

    /// Whether `vector` is currently held pending by the server.
    pub fn is_pending(&self, vector: u16) -> bool {
        self.lock()
            .vectors
            .get(usize::from(vector))
            .is_some_and(|v| v.pending)
    }

    /// Whether the client has given `vector` an eventfd.
    pub fn has_eventfd(&self, vector: u16) -> bool {
        self.lock()
            .vectors
            .get(usize::from(vector))
            .is_some_and(|v| v.fd.is_some())
    }

    /// Whether the client has enabled MSI-X (any SET_IRQS trigger setup since the last
    /// disable).
    pub fn enabled(&self) -> bool {
        self.lock().enabled
    }

    /// Installs (or, with `None`, removes) the eventfd of `vector`; a previous descriptor
    /// is closed. A pending interrupt is delivered to the new descriptor at once.
    pub fn set_eventfd(&self, vector: u16, fd: Option<OwnedFd>) -> Result<(), Error> {
        let mut st = self.lock();
        st.enabled = true;
        let v = st
            .vectors
            .get_mut(usize::from(vector))
            .ok_or(Error::InvalidVector(vector))?;
        v.fd = fd; // drops (closes) the old descriptor
        Self::flush(v)
    }

    fn flush(v: &mut Vector) -> Result<(), Error> {
        if v.pending && !v.masked {
            if let Some(fd) = &v.fd {
                v.pending = false;
                sys::eventfd_write(fd.as_fd(), 1)?;
            }
        }
        Ok(())
    }

    /// Server-side mask/unmask of `vector` (unmask delivers a pending interrupt).
    pub(crate) fn set_masked(&self, vector: u16, masked: bool) -> Result<(), Error> {
        let mut st = self.lock();
        let v = st
            .vectors
            .get_mut(usize::from(vector))
            .ok_or(Error::InvalidVector(vector))?;
        v.masked = masked;
        Self::flush(v)
    }

    /// Marks MSI-X enabled without changing descriptors (the fd-less SET_IRQS).
    pub(crate) fn set_enabled(&self) {
        self.lock().enabled = true;
    }

    /// Disables MSI-X: closes every eventfd. Pending bits are kept so that an interrupt
    /// raised around a disable/enable cycle is not lost.
    pub(crate) fn disable(&self) {
        let mut st = self.lock();
        st.enabled = false;
        for v in &mut st.vectors {
            v.fd = None;
        }
    }

    /// Device reset: clears pending and mask state. Descriptors are kept: the client owns
    /// that state and disables MSI-X itself (SET_IRQS count 0) around a reset.
    pub(crate) fn reset(&self) {
        let mut st = self.lock();
        for v in &mut st.vectors {
            v.pending = false;
            v.masked = false;
        }
    }

    /// Pending bits as PBA bytes, `len` bytes starting at byte `off` of the PBA.
    pub(crate) fn pba_bytes(&self, off: usize, buf: &mut [u8]) {
        let st = self.lock();
        for (i, b) in buf.iter_mut().enumerate() {
            let mut byte = 0u8;
            for bit in 0..8 {
                let idx = (off + i) * 8 + bit;
                if st.vectors.get(idx).is_some_and(|v| v.pending) {
                    byte |= 1 << bit;
                }
            }
            *b = byte;
        }
    }
}
