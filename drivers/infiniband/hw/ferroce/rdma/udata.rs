// SPDX-License-Identifier: GPL-2.0

//! Driver data of uverbs commands (`struct ib_udata`).

use crate::bindings as b;
use core::{
    ffi::c_void,
    marker::PhantomData,
    mem::size_of,
    ptr::NonNull, //
};
use kernel::{
    error::to_result,
    prelude::*,
    transmute::{
        AsBytes,
        FromBytes, //
    }, //
};

/// A driver request of a uverbs command: plain data that may grow at its
/// end. Requests of at least `MIN_LEN` bytes (the end of the struct as first
/// released) are accepted; the missing tail keeps its `Default`.
pub trait UserRequest: FromBytes + Default {
    /// The shortest request accepted.
    const MIN_LEN: usize;
    /// `MIN_LEN` lies within the struct.
    const MIN_LEN_OK: () = assert!(Self::MIN_LEN <= size_of::<Self>());
}

/// The driver part of a uverbs command: the provider's request and room for
/// the driver's response (`include/uapi/rdma/ferroce-abi.h`).
///
/// # Invariants
///
/// `raw` points to a valid `struct ib_udata` of a uverbs command, exclusively
/// ours for `'a`, embedded in that command's `struct uverbs_attr_bundle`.
pub struct UData<'a> {
    raw: NonNull<b::ib_udata>,
    _p: PhantomData<&'a mut b::ib_udata>,
}

impl<'a> UData<'a> {
    /// # Safety
    ///
    /// `ptr` must be NULL or satisfy the type invariant for `'a`.
    pub(super) unsafe fn from_raw(ptr: *mut b::ib_udata) -> Option<Self> {
        // INVARIANT: per the safety requirements.
        NonNull::new(ptr).map(|raw| Self {
            raw,
            _p: PhantomData,
        })
    }

    pub(super) fn as_raw(&self) -> *mut b::ib_udata {
        self.raw.as_ptr()
    }

    /// Reads the request: `EINVAL` if it is shorter than `R::MIN_LEN`,
    /// `EOPNOTSUPP` if it is longer than `R` and the extra bytes are not
    /// zero, `EFAULT` if it cannot be read. Fields beyond a shorter request
    /// (an older provider's) keep their `Default`.
    pub fn read<R: UserRequest>(&self) -> Result<R> {
        let () = R::MIN_LEN_OK;
        let mut req = R::default();
        let udata = self.raw.as_ptr();
        // SAFETY: `raw` is a valid udata (type invariant).
        let inlen = unsafe { (*udata).inlen };
        if inlen < R::MIN_LEN {
            return Err(EINVAL);
        }
        let len = size_of::<R>();
        // Bytes beyond the struct this driver knows must be zero
        // (ferroce-abi.h, "Requests").
        // SAFETY: `udata` is valid (type invariant); the range lies within
        // its input.
        if inlen > len && !unsafe { b::ib_is_udata_cleared(udata, len, inlen - len) } {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: `udata` is valid (type invariant); `req` has room for
        // `len` >= `inlen.min(len)` bytes and any byte pattern is a valid
        // `R` (`FromBytes`).
        to_result(unsafe {
            b::ib_copy_from_udata((&raw mut req).cast::<c_void>(), udata, inlen.min(len))
        })?;
        Ok(req)
    }

    /// Writes the response, truncated to the room userspace gave.
    pub fn respond<R: AsBytes>(&mut self, resp: &R) -> Result {
        let udata = self.raw.as_ptr();
        // SAFETY: `raw` is a valid udata (type invariant).
        let len = size_of::<R>().min(unsafe { (*udata).outlen });
        // SAFETY: `udata` is valid (type invariant); `resp` is
        // `size_of::<R>()` >= `len` initialised bytes (`AsBytes`), only read.
        to_result(unsafe {
            b::ib_copy_to_udata(
                udata,
                core::ptr::from_ref(resp).cast_mut().cast::<c_void>(),
                len,
            )
        })
    }
}
