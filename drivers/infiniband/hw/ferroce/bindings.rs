// SPDX-License-Identifier: GPL-2.0

//! Bindings for ib_core and the ferroce device programming model.
//!
//! Generated at build time by the module's Kbuild from `ferroce_bindings.h`
//! (which includes `include/ferroce/ferroce-hw.h`, the single source of truth
//! of the device interface). Only items of the rdma headers and of
//! `ferroce-hw.h` are generated here; every other kernel type comes from
//! `kernel::bindings`. Only the `rdma` module and the device-structure impls
//! below may use this module's `unsafe` items.

#![allow(
    clippy::all,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    dead_code
)]

pub(crate) use generated::*;

#[allow(
    clippy::as_underscore,
    clippy::cast_lossless,
    clippy::missing_safety_doc,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::undocumented_unsafe_blocks
)]
mod generated {
    #[allow(unused_imports)]
    use kernel::bindings::*;
    #[allow(unused_imports)]
    use pin_init::{MaybeZeroable, Zeroable};

    // Generated into the object directory (see Kbuild).
    include!(env!("FERROCE_BINDINGS_RSI"));
}

/// An admin command payload of `ferroce-hw.h` (`struct ferroce_cmd_<name>`,
/// header included), with its opcode.
pub(crate) trait Command: kernel::transmute::AsBytes + Default {
    /// `FERROCE_CMD_*`.
    const OPCODE: u32;
}

macro_rules! commands {
    ($($t:ident = $op:ident),* $(,)?) => {$(
        // SAFETY: ferroce-hw.h structs are naturally aligned, with explicit
        // reserved fields instead of padding (its rules, size-checked by its
        // `_Static_assert`s and bindgen's layout tests), so every byte is
        // initialised.
        unsafe impl kernel::transmute::AsBytes for $t {}
        impl Command for $t {
            const OPCODE: u32 = $op;
        }
        const _: () = assert!(core::mem::size_of::<$t>() <= FERROCE_CMD_SIZE as usize);
    )*};
}

commands!(
    ferroce_cmd_query_caps = FERROCE_CMD_QUERY_CAPS,
    ferroce_cmd_query_port = FERROCE_CMD_QUERY_PORT,
    ferroce_cmd_set_port_mtu = FERROCE_CMD_SET_PORT_MTU,
    ferroce_cmd_create_eq = FERROCE_CMD_CREATE_EQ,
    ferroce_cmd_destroy_eq = FERROCE_CMD_DESTROY_EQ,
    ferroce_cmd_alloc_pd = FERROCE_CMD_ALLOC_PD,
    ferroce_cmd_dealloc_pd = FERROCE_CMD_DEALLOC_PD,
    ferroce_cmd_set_gid = FERROCE_CMD_SET_GID,
    ferroce_cmd_clear_gid = FERROCE_CMD_CLEAR_GID,
);
