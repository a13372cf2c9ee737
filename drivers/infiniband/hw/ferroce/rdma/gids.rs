// SPDX-License-Identifier: GPL-2.0

//! Reading ib_core's GID table (`rdma_query_gid_table`) and warnings in
//! an `ib_device`'s name (`ibdev_warn`).

use super::{
    attr::GidType,
    device::{
        Device,
        Driver, //
    }, //
};
use crate::bindings as b;
use core::fmt;
use kernel::{
    prelude::*,
    str::CStrExt, //
};

/// A valid entry of a port's GID table, as `rdma_query_gid_table` copies it
/// (`struct ib_uverbs_gid_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID, network order.
    pub gid: [u8; 16],
    /// Its index in the port's table.
    pub index: u32,
    /// The port (1-based).
    pub port: u32,
    /// `None` for a type this layer does not know.
    pub gid_type: Option<GidType>,
    /// The ifindex of the entry's netdev, 0 if it has none.
    pub netdev_ifindex: u32,
}

impl GidEntry {
    fn from_raw(e: &b::ib_uverbs_gid_entry) -> Self {
        let mut gid = [0u8; 16];
        // `gid` holds the 16 bytes of `union ib_gid` in memory order.
        gid[..8].copy_from_slice(&e.gid[0].to_ne_bytes());
        gid[8..].copy_from_slice(&e.gid[1].to_ne_bytes());
        Self {
            gid,
            index: e.gid_index,
            port: e.port_num,
            gid_type: match e.gid_type {
                b::ib_gid_type_IB_GID_TYPE_IB => Some(GidType::Ib),
                b::ib_gid_type_IB_GID_TYPE_ROCE => Some(GidType::RoceV1),
                b::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => Some(GidType::RoceV2),
                _ => None,
            },
            netdev_ifindex: e.netdev_ifindex,
        }
    }
}

/// Copies the valid entries of every port's GID table of `dev`, at most
/// `max` (`EINVAL` if there are more). Process context: allocates.
///
/// # Safety
///
/// `dev` must be a registered `ib_device` whose GID cache is set up for
/// the call (for example: the device of a GID attribute held for the call).
pub(super) unsafe fn query_gid_table(dev: *mut b::ib_device, max: usize) -> Result<KVec<GidEntry>> {
    let mut raw = KVec::with_capacity(max, GFP_KERNEL)?;
    for _ in 0..max {
        raw.push(b::ib_uverbs_gid_entry::default(), GFP_KERNEL)?;
    }
    // SAFETY: `dev` has a GID cache (safety requirements); `raw` has room
    // for `max` entries, which is all the function writes.
    let n = unsafe { b::rdma_query_gid_table(dev, raw.as_mut_ptr(), max) };
    let n = usize::try_from(n).map_err(|_| i32::try_from(n).map_or(EINVAL, Error::from_errno))?;
    let mut out = KVec::with_capacity(n, GFP_KERNEL)?;
    for e in raw.iter().take(n) {
        out.push(GidEntry::from_raw(e), GFP_KERNEL)?;
    }
    Ok(out)
}

impl<T: Driver> Device<T> {
    /// `ibdev_warn`: a warning prefixed with the driver and device names
    /// (any context). Rate limiting is the caller's.
    pub fn warn(&self, args: fmt::Arguments<'_>) {
        // SAFETY: `as_raw` is the device's `ib_device`, alive while `self`
        // is; "%pA" takes a pointer to a `fmt::Arguments`, which `args` is
        // for the duration of the call.
        unsafe {
            b::ibdev_warn(
                self.as_raw(),
                c"%pA".as_char_ptr(),
                core::ptr::from_ref(&args).cast::<kernel::ffi::c_void>(),
            )
        };
    }
}
