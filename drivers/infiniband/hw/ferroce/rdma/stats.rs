// SPDX-License-Identifier: GPL-2.0

//! Introspection: hardware counters (`rdma_hw_stats`), the firmware version
//! string and the driver attributes of restrack entries (`rdma res show
//! ... -dd`).

use crate::bindings as b;
use core::{
    ffi::c_int,
    marker::PhantomData, //
};
use kernel::{
    error::to_result,
    prelude::*,
    str::{
        as_char_ptr_in_const_context,
        CStr,
        CStrExt, //
    }, //
};

/// `RDMA_NLDEV_ATTR_DRIVER` as `nla_nest_start()` takes it (checked to fit).
const NLDEV_ATTR_DRIVER: c_int = {
    let attr = b::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER;
    assert!(attr <= c_int::MAX as u32);
    attr as c_int
};

/// The name of one hardware counter (`struct rdma_stat_desc`), as a
/// driver lists them in a `static`.
///
/// # Invariants
///
/// `name` points to a NUL-terminated `'static` string; `priv` is NULL.
#[repr(transparent)]
pub struct StatDesc(b::rdma_stat_desc);

// SAFETY: a `StatDesc` only holds a pointer to an immutable `'static` string
// (type invariant), which any thread may read.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// The counter called `name` (sysfs `hw_counters/<name>`, `rdma
    /// statistic`).
    pub const fn new(name: &'static CStr) -> Self {
        Self(b::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }

    /// The descriptors as ib_core takes them.
    pub(super) fn as_raw(descs: &'static [Self]) -> *const b::rdma_stat_desc {
        // `repr(transparent)`: a `StatDesc` is an `rdma_stat_desc`.
        descs.as_ptr().cast()
    }
}

/// Where `get_dev_fw_str` writes the firmware version: a buffer of
/// `IB_FW_VERSION_NAME_MAX` bytes, always NUL-terminated.
pub struct FwStr<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> FwStr<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        let mut s = Self { buf, len: 0 };
        s.clear();
        s
    }

    fn clear(&mut self) {
        self.len = 0;
        if let Some(first) = self.buf.first_mut() {
            *first = 0;
        }
    }

    /// Sets the string to `args`, cut off at the end of the buffer (ib_core
    /// has no error to take). A formatting error leaves it empty rather
    /// than half-written.
    pub fn set(&mut self, args: core::fmt::Arguments<'_>) {
        self.clear();
        if core::fmt::write(self, args).is_err() {
            self.clear();
        }
    }
}

impl core::fmt::Write for FwStr<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // Room for the NUL stays.
        let room = self.buf.len().saturating_sub(self.len + 1);
        let n = s.len().min(room);
        if let Some(dst) = self.buf.get_mut(self.len..self.len + n) {
            dst.copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
        }
        if let Some(nul) = self.buf.get_mut(self.len) {
            *nul = 0;
        }
        Ok(())
    }
}

/// The driver attributes of one restrack entry: a netlink message with the
/// `RDMA_NLDEV_ATTR_DRIVER` nest open, for the `fill_res_*_entry` methods.
pub struct ResMsg<'a> {
    msg: *mut kernel::bindings::sk_buff,
    _msg: PhantomData<&'a mut kernel::bindings::sk_buff>,
}

impl ResMsg<'_> {
    /// Adds `name = value` (decimal). `EMSGSIZE` when the message is full.
    pub fn put_u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `msg` is the message of the fill call (see `with_nest`);
        // `name` is NUL-terminated and copied into the message.
        to_result(unsafe { b::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds `name = value` (hexadecimal).
    pub fn put_u32_hex(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: as in `put_u32`.
        to_result(unsafe { b::rdma_nl_put_driver_u32_hex(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds `name = value` (a string).
    pub fn put_str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: as in `put_u32`; `value` is NUL-terminated and copied.
        to_result(unsafe {
            b::rdma_nl_put_driver_string(self.msg, name.as_char_ptr(), value.as_char_ptr())
        })
    }

    /// Opens the driver nest of `msg`, runs `fill` and closes the nest, or
    /// cancels it (dropping what `fill` added) if `fill` failed.
    ///
    /// # Safety
    ///
    /// `msg` must be the netlink message of a `fill_res_*_entry` call,
    /// valid and exclusively ours for the call.
    pub(super) unsafe fn with_nest(
        msg: *mut kernel::bindings::sk_buff,
        fill: impl FnOnce(&mut ResMsg<'_>) -> Result,
    ) -> Result {
        // SAFETY: `msg` is valid (safety requirements).
        let nest = unsafe { b::nla_nest_start(msg, NLDEV_ATTR_DRIVER) };
        if nest.is_null() {
            return Err(EMSGSIZE);
        }
        let mut m = ResMsg {
            msg,
            _msg: PhantomData,
        };
        let r = fill(&mut m);
        // SAFETY: `nest` was opened on `msg` just above and nothing closed it.
        unsafe {
            match r {
                Ok(()) => {
                    b::nla_nest_end(msg, nest);
                }
                Err(_) => b::nla_nest_cancel(msg, nest),
            }
        }
        r
    }
}
