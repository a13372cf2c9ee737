// SPDX-License-Identifier: GPL-2.0

//! The verbs of the objects of the ferroce `ib_device`, one file per
//! object: user contexts and their doorbell pages, CQs, QPs, MRs and MWs,
//! AHs (SRQs are `srq.rs`); here, what they share: pinning rings and
//! doorbell records, and queue geometry. User objects' memory lives in the
//! process and is pinned here; the device learns it through page lists and
//! its admin commands (`Documentation/ferroce/device.rst`); the provider's
//! side of each exchange is `include/uapi/rdma/ferroce-abi.h`.

#![forbid(unsafe_code)]

mod ah;
mod cq;
mod mr;
mod qp;
mod ucontext;

pub(crate) use ah::{
    create_ah,
    create_kernel_ah,
    destroy_ah,
    Ah, //
};
pub(crate) use cq::{
    create_cq,
    create_kernel_cq,
    destroy_cq,
    resize_user_cq,
    Cq, //
};
pub(crate) use mr::{
    alloc_mr,
    alloc_mw,
    dealloc_mw,
    dereg_mr,
    get_dma_mr,
    map_mr_sg_page,
    map_mr_sg_start,
    reg_mr_wqe,
    reg_user_mr,
    rereg_user_mr,
    Mr,
    Mw, //
};
pub(crate) use qp::{
    create_kernel_qp,
    create_qp,
    destroy_qp,
    mcast,
    modify_qp,
    post_recv,
    post_send,
    query_qp,
    Qp, //
};
pub(crate) use ucontext::{
    alloc_ucontext,
    dealloc_ucontext,
    query_device_udata,
    DbPages,
    UContext,
    DB_PAGES_PER_MAPPING, //
};

use crate::{
    bindings as hw,
    ib::IbDev,
    rdma::{
        self,
        Umem, //
    }, //
};
use core::ops::RangeInclusive;
use kernel::prelude::*;

/// Pages of the kernel's 4 KiB page size as the device sees them.
pub(crate) const PAGE_SHIFT: u32 = 12;
const PAGE: u64 = 1 << PAGE_SHIFT;

/// Pins a queue ring of `len` bytes at the page-aligned `va` and returns it
/// with the DMA addresses of its 4 KiB pages.
pub(crate) fn pin_ring(
    dev: &rdma::Device<IbDev>,
    va: u64,
    len: u64,
    access: u32,
) -> Result<(Umem, KVVec<u64>)> {
    if va % PAGE != 0 || len == 0 {
        return Err(EINVAL);
    }
    let umem = Umem::get(dev, va, usize::try_from(len)?, access)?;
    let pages = umem.dma_blocks(PAGE)?;
    Ok((umem, pages))
}

/// Pins the page of an 8-byte doorbell record at `va` (with `access`
/// rights for the device); returns it with the record's DMA address.
pub(crate) fn pin_dbrec(dev: &rdma::Device<IbDev>, va: u64, access: u32) -> Result<(Umem, u64)> {
    if va == 0 || va % u64::from(hw::FERROCE_DBREC_ALIGN) != 0 {
        return Err(EINVAL);
    }
    let umem = Umem::get(dev, va, 8, access)?;
    let page = *umem.dma_blocks(PAGE)?.first().ok_or(EFAULT)?;
    Ok((umem, page + (va & (PAGE - 1))))
}

pub(crate) fn is_pow2_in(v: u32, min: u32, max: u32) -> bool {
    v.is_power_of_two() && (min..=max).contains(&v)
}

/// The two kinds of work queue ring, whose WQE strides differ (device.rst,
/// "SQ WQE" and "RQ WQE"; an SRQ's WQEs are RQ WQEs).
#[derive(Clone, Copy)]
pub(crate) enum Wq {
    Sq,
    Rq,
}

impl Wq {
    /// log2 of the smallest and of the largest WQE stride.
    fn shifts(self) -> RangeInclusive<u32> {
        match self {
            Self::Sq => hw::FERROCE_SQ_WQE_SHIFT_MIN..=hw::FERROCE_SQ_WQE_SHIFT_MAX,
            Self::Rq => hw::FERROCE_RQ_WQE_SHIFT_MIN..=hw::FERROCE_RQ_WQE_SHIFT_MAX,
        }
    }
}

/// Checks the ring a provider laid out for a user SQ, RQ or SRQ: `depth`
/// WQEs, a power of two up to `max_qp_wr` and room for the `wanted` WRs, of
/// stride `1 << shift` in `wq`'s range. Returns the ring's length in bytes.
pub(crate) fn user_wq_len(
    dev: &rdma::Device<IbDev>,
    wq: Wq,
    depth: u32,
    wanted: u32,
    shift: u32,
) -> Result<u64> {
    if !is_pow2_in(depth, 1, dev.caps.max_qp_wr) || depth < wanted || !wq.shifts().contains(&shift)
    {
        return Err(EINVAL);
    }
    Ok(u64::from(depth) << shift)
}

/// SGEs an RQ or SRQ WQE of stride `1 << shift` holds, at most `max_sge`;
/// none for a stride outside the RQ range.
pub(crate) fn rq_wqe_sges(shift: u32, max_sge: u32) -> u32 {
    if !Wq::Rq.shifts().contains(&shift) {
        return 0;
    }
    (((1u32 << shift) - hw::FERROCE_RQ_WQE_DATA_OFFSET) / 16).min(max_sge)
}

// The smallest WQEs hold one SGE: the data offsets fit every stride.
const _: () = assert!(1 << hw::FERROCE_RQ_WQE_SHIFT_MIN >= hw::FERROCE_RQ_WQE_DATA_OFFSET + 16);
const _: () = assert!(1 << hw::FERROCE_SQ_WQE_SHIFT_MIN >= hw::FERROCE_SQ_WQE_AV_DATA_OFFSET + 16);
const _: () = assert!(hw::FERROCE_SQ_WQE_AV_DATA_OFFSET >= hw::FERROCE_SQ_WQE_DATA_OFFSET);
const _: () = assert!(hw::FERROCE_SQ_WQE_SHIFT_MAX < 32 && hw::FERROCE_RQ_WQE_SHIFT_MAX < 32);

/// The doorbell page of kernel queues (device.rst, "Doorbell pages").
const KERNEL_DB_PAGE: u32 = 0;
const _: () = assert!(KERNEL_DB_PAGE < hw::FERROCE_DB_KERNEL_PAGES);

/// The smallest stride shift of `wq` with `1 << shift >= bytes`.
pub(crate) fn stride_shift(bytes: u32, wq: Wq) -> Result<u32> {
    let shifts = wq.shifts();
    let shift = bytes
        .max(1)
        .checked_next_power_of_two()
        .ok_or(EINVAL)?
        .trailing_zeros()
        .max(*shifts.start());
    if shift > *shifts.end() {
        return Err(EINVAL);
    }
    Ok(shift)
}

#[kunit_tests(ferroce_wq_geometry)]
mod wq_geometry_tests {
    use super::*;

    const RQ_DATA: u32 = hw::FERROCE_RQ_WQE_DATA_OFFSET;

    #[test]
    fn stride_shift_is_the_smallest_fit() {
        let rq_min = hw::FERROCE_RQ_WQE_SHIFT_MIN;
        assert_eq!(stride_shift(0, Wq::Rq).ok(), Some(rq_min));
        assert_eq!(stride_shift(RQ_DATA + 16, Wq::Rq).ok(), Some(rq_min));
        assert_eq!(
            stride_shift((1 << rq_min) + 1, Wq::Rq).ok(),
            Some(rq_min + 1)
        );
        let rq_max = hw::FERROCE_RQ_WQE_SHIFT_MAX;
        assert_eq!(stride_shift(1 << rq_max, Wq::Rq).ok(), Some(rq_max));
        assert!(stride_shift((1 << rq_max) + 1, Wq::Rq).is_err());
        assert!(stride_shift(u32::MAX, Wq::Rq).is_err());
        let sq_data = hw::FERROCE_SQ_WQE_DATA_OFFSET;
        assert_eq!(
            stride_shift(sq_data + 16, Wq::Sq).ok(),
            Some(hw::FERROCE_SQ_WQE_SHIFT_MIN)
        );
        let sq_max = hw::FERROCE_SQ_WQE_SHIFT_MAX;
        assert!(stride_shift((1 << sq_max) + 1, Wq::Sq).is_err());
    }

    /// The stride chosen for `n` SGEs holds them, and any shift, even one
    /// no queue has, gives an answer rather than an overflow.
    #[test]
    fn rq_wqe_sges_fit_and_total() {
        let most = rq_wqe_sges(hw::FERROCE_RQ_WQE_SHIFT_MAX, u32::MAX);
        assert_eq!(most, ((1 << hw::FERROCE_RQ_WQE_SHIFT_MAX) - RQ_DATA) / 16);
        for n in 1..=most {
            let shift = stride_shift(RQ_DATA + n * 16, Wq::Rq).unwrap();
            assert!(rq_wqe_sges(shift, u32::MAX) >= n);
            assert_eq!(rq_wqe_sges(shift, n), n);
        }
        for shift in [
            0,
            hw::FERROCE_RQ_WQE_SHIFT_MIN - 1,
            hw::FERROCE_RQ_WQE_SHIFT_MAX + 1,
            32,
            u32::MAX,
        ] {
            assert_eq!(rq_wqe_sges(shift, u32::MAX), 0);
        }
    }
}
