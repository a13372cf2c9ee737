// SPDX-License-Identifier: GPL-2.0

//! Members of C unions, read and written through the union's address.
//!
//! The kernel crate's bindgen run emits native Rust unions. The module's
//! own run, which leaves most types to `kernel::bindings`, cannot prove
//! their members `Copy` and emits `__BindgenUnionField` wrappers instead.
//! Every member of a C union starts at the union's address, so a member
//! accessed through a cast of that address reads the same with both, and
//! this layer builds unchanged in the kernel crate.

// `rdma_ah_attr`'s address union: `roce.dmac` is read and written as the
// 6 bytes at the start of the union.
const _: () = assert!(core::mem::offset_of!(crate::bindings::roce_ah_attr, dmac) == 0);

/// Reads the member of type `M` of the union `u`.
///
/// # Safety
///
/// `M` must be the type of a member of the C union `U`, or of the first
/// field of one (which starts at the same address), whose bytes are
/// initialised and valid for `M`.
pub(super) unsafe fn read<U, M: Copy>(u: &U) -> M {
    const { assert!(size_of::<M>() <= size_of::<U>() && align_of::<M>() <= align_of::<U>()) };
    // SAFETY: every member starts at the union's address, which is aligned
    // for `M` (checked above); the bytes are valid for `M` (safety
    // requirements).
    unsafe { core::ptr::from_ref(u).cast::<M>().read() }
}

/// Writes `v` as the member of type `M` of the union `u`.
///
/// # Safety
///
/// `M` must be the type of a member of the C union `U`, or of the first
/// field of one.
pub(super) unsafe fn write<U, M: Copy>(u: &mut U, v: M) {
    const { assert!(size_of::<M>() <= size_of::<U>() && align_of::<M>() <= align_of::<U>()) };
    // SAFETY: every member starts at the union's address, which is aligned
    // for `M` (checked above) and exclusively ours.
    unsafe { core::ptr::from_mut(u).cast::<M>().write(v) }
}
