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
    // The C helpers (`ferroce_helpers.c`), bound by the names they wrap.
    #[cfg(not(CONFIG_RUST_RDMA_ABSTRACTIONS))]
    include!(env!("FERROCE_HELPERS_RSI"));
}

// In tree, ib_core's items and the helpers are the kernel crate's (its
// `bindings` include the rdma headers, `rust/helpers/rdma.c` the helpers);
// only the device's headers are generated here.
#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]
pub(crate) use kernel::bindings::*;

/// An admin command payload of `ferroce-hw.h` (`struct ferroce_cmd_<name>`,
/// header included), with its opcode.
pub(crate) trait Command: kernel::transmute::AsBytes + Default {
    /// `FERROCE_CMD_*` (`ferroce_cmd_hdr.opcode`).
    const OPCODE: u8;
}

macro_rules! commands {
    ($($t:ident = $op:ident),* $(,)?) => {$(
        // SAFETY: ferroce-hw.h structs are naturally aligned, with explicit
        // reserved fields instead of padding (its rules, size-checked by its
        // `_Static_assert`s and bindgen's layout tests), so every byte is
        // initialised.
        unsafe impl kernel::transmute::AsBytes for $t {}
        impl Command for $t {
            const OPCODE: u8 = kernel::num::casts::u32_into_u8::<{ $op }>();
        }
        const _: () = assert!(core::mem::size_of::<$t>() <= FERROCE_CMD_SIZE as usize);
    )*};
}

commands!(
    ferroce_cmd_query_caps = FERROCE_CMD_QUERY_CAPS,
    ferroce_cmd_query_port = FERROCE_CMD_QUERY_PORT,
    ferroce_cmd_query_counters = FERROCE_CMD_QUERY_COUNTERS,
    ferroce_cmd_set_port_mtu = FERROCE_CMD_SET_PORT_MTU,
    ferroce_cmd_set_port_mac = FERROCE_CMD_SET_PORT_MAC,
    ferroce_cmd_create_eq = FERROCE_CMD_CREATE_EQ,
    ferroce_cmd_destroy_eq = FERROCE_CMD_DESTROY_EQ,
    ferroce_cmd_alloc_pd = FERROCE_CMD_ALLOC_PD,
    ferroce_cmd_dealloc_pd = FERROCE_CMD_DEALLOC_PD,
    ferroce_cmd_set_gid = FERROCE_CMD_SET_GID,
    ferroce_cmd_clear_gid = FERROCE_CMD_CLEAR_GID,
    ferroce_cmd_create_cq = FERROCE_CMD_CREATE_CQ,
    ferroce_cmd_destroy_cq = FERROCE_CMD_DESTROY_CQ,
    ferroce_cmd_resize_cq = FERROCE_CMD_RESIZE_CQ,
    ferroce_cmd_reg_mr = FERROCE_CMD_REG_MR,
    ferroce_cmd_dereg_mr = FERROCE_CMD_DEREG_MR,
    ferroce_cmd_modify_mr = FERROCE_CMD_MODIFY_MR,
    ferroce_cmd_create_qp = FERROCE_CMD_CREATE_QP,
    ferroce_cmd_destroy_qp = FERROCE_CMD_DESTROY_QP,
    ferroce_cmd_modify_qp = FERROCE_CMD_MODIFY_QP,
    ferroce_cmd_query_qp = FERROCE_CMD_QUERY_QP,
    ferroce_cmd_create_srq = FERROCE_CMD_CREATE_SRQ,
    ferroce_cmd_destroy_srq = FERROCE_CMD_DESTROY_SRQ,
    ferroce_cmd_modify_srq = FERROCE_CMD_MODIFY_SRQ,
    ferroce_cmd_query_srq = FERROCE_CMD_QUERY_SRQ,
    ferroce_cmd_resize_srq = FERROCE_CMD_RESIZE_SRQ,
    ferroce_cmd_create_ah = FERROCE_CMD_CREATE_AH,
    ferroce_cmd_destroy_ah = FERROCE_CMD_DESTROY_AH,
);

/// ATTACH_MCAST: its payload is `struct ferroce_cmd_mcast`, which it shares
/// with DETACH_MCAST.
#[derive(Default)]
#[repr(transparent)]
pub(crate) struct AttachMcast(pub(crate) ferroce_cmd_mcast);

/// DETACH_MCAST, with `struct ferroce_cmd_mcast`.
#[derive(Default)]
#[repr(transparent)]
pub(crate) struct DetachMcast(pub(crate) ferroce_cmd_mcast);

commands!(
    AttachMcast = FERROCE_CMD_ATTACH_MCAST,
    DetachMcast = FERROCE_CMD_DETACH_MCAST,
);

// SAFETY (all impls below): the structs of include/uapi/rdma/ferroce-abi.h
// consist of integers only, naturally aligned with explicit reserved fields
// (its rules), so any byte pattern is a valid value and every byte of a
// value is initialised.
macro_rules! abi_requests {
    ($($t:ident),* $(,)?) => {$(
        // SAFETY: see above.
        unsafe impl kernel::transmute::FromBytes for $t {}
    )*};
}
macro_rules! abi_responses {
    ($($t:ident),* $(,)?) => {$(
        // SAFETY: see above.
        unsafe impl kernel::transmute::AsBytes for $t {}
    )*};
}
abi_requests!(
    ferroce_ureq_alloc_ctx,
    ferroce_ureq_create_cq,
    ferroce_ureq_create_qp,
    ferroce_ureq_create_srq,
    ferroce_ureq_modify_srq,
    ferroce_ureq_resize_cq,
);
impl crate::rdma::UserRequest for ferroce_ureq_alloc_ctx {
    const MIN_LEN: usize = FERROCE_UREQ_ALLOC_CTX_MIN_LEN as usize;
}
impl crate::rdma::UserRequest for ferroce_ureq_create_cq {
    const MIN_LEN: usize = FERROCE_UREQ_CREATE_CQ_MIN_LEN as usize;
}
impl crate::rdma::UserRequest for ferroce_ureq_create_qp {
    const MIN_LEN: usize = FERROCE_UREQ_CREATE_QP_MIN_LEN as usize;
}
impl crate::rdma::UserRequest for ferroce_ureq_create_srq {
    const MIN_LEN: usize = FERROCE_UREQ_CREATE_SRQ_MIN_LEN as usize;
}
impl crate::rdma::UserRequest for ferroce_ureq_resize_cq {
    const MIN_LEN: usize = FERROCE_UREQ_RESIZE_CQ_MIN_LEN as usize;
}
impl crate::rdma::UserRequest for ferroce_ureq_modify_srq {
    const MIN_LEN: usize = FERROCE_UREQ_MODIFY_SRQ_MIN_LEN as usize;
}
// The first releases' sizes: what old providers send.
const _: () = assert!(
    FERROCE_UREQ_CREATE_CQ_MIN_LEN == 24
        && FERROCE_UREQ_CREATE_QP_MIN_LEN as usize
            == core::mem::offset_of!(ferroce_ureq_create_qp, comp_mask)
        && FERROCE_UREQ_CREATE_SRQ_MIN_LEN as usize
            == core::mem::size_of::<ferroce_ureq_create_srq>()
);

// Responses the device DMA-writes (read back by `Shared::exec_resp`).
// SAFETY: ferroce-hw.h structs (naturally aligned, explicit reserved
// fields, integers only): any byte pattern is a valid value.
unsafe impl kernel::transmute::FromBytes for ferroce_qp_attr {}
// SAFETY: as above.
unsafe impl kernel::transmute::FromBytes for ferroce_caps {}
// SAFETY: as above.
unsafe impl kernel::transmute::FromBytes for ferroce_counters {}
// SAFETY: as above (CQEs of kernel CQs).
unsafe impl kernel::transmute::FromBytes for ferroce_cqe {}

// Work queue entries the driver writes for kernel QPs.
macro_rules! wqe_parts {
    ($($t:ident),* $(,)?) => {$(
        // SAFETY: ferroce-hw.h structs (naturally aligned, explicit
        // reserved fields, integers only): every byte is initialised.
        unsafe impl kernel::transmute::AsBytes for $t {}
    )*};
}
wqe_parts!(
    ferroce_sq_wqe_hdr,
    ferroce_sq_wqe_rdma,
    ferroce_sq_wqe_ud,
    ferroce_sq_wqe_atomic,
    ferroce_sq_wqe_reg_mr,
    ferroce_av,
    ferroce_pbl,
    ferroce_sge,
    ferroce_rq_wqe_hdr,
);
abi_responses!(
    ferroce_uresp_alloc_ctx,
    ferroce_uresp_create_cq,
    ferroce_uresp_create_qp,
    ferroce_uresp_create_ah,
    ferroce_uresp_create_srq,
    ferroce_uresp_resize_cq,
);
