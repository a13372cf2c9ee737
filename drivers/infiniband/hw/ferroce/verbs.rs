// SPDX-License-Identifier: GPL-2.0

//! User objects of the ferroce `ib_device`: the doorbell page of each user
//! context, CQs, QPs, MRs and AHs. Their memory lives in the process and is
//! pinned here; the device learns it through page lists and its admin
//! commands (`Documentation/ferroce/device.rst`); the provider's side of
//! each exchange is `include/uapi/rdma/ferroce-abi.h`.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    gid::Gid,
    ib::{gid_network_type, IbDev},
    rdma::{self, AhAttr, QpAttr, QpInit, QpType, UData, Umem},
};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

/// Pages of the kernel's 4 KiB page size as the device sees them.
const PAGE_SHIFT: u32 = 12;
const PAGE: u64 = 1 << PAGE_SHIFT;

/// The doorbell pages of BAR2 handed out to user contexts (page 0 is the
/// kernel's): a lock-free bitmap.
pub(crate) struct DbPages {
    used: [AtomicU64; 4],
    count: u32,
}

impl DbPages {
    /// `count` pages (at most 256), of which the first `kernel` are never
    /// handed out.
    pub(crate) fn new(count: u32, kernel: u32) -> Self {
        let pages = Self {
            used: [const { AtomicU64::new(0) }; 4],
            count: count.min(256),
        };
        for p in 0..kernel.min(pages.count) {
            pages.used[(p / 64) as usize].fetch_or(1 << (p % 64), Ordering::Relaxed);
        }
        pages
    }

    /// Takes a free page; `ENOSPC` when every page is in use.
    pub(crate) fn alloc(&self) -> Result<u32> {
        for p in 0..self.count {
            let (w, bit) = ((p / 64) as usize, 1u64 << (p % 64));
            if self.used[w].fetch_or(bit, Ordering::AcqRel) & bit == 0 {
                return Ok(p);
            }
        }
        Err(ENOSPC)
    }

    /// Returns a page taken with [`DbPages::alloc`].
    pub(crate) fn free(&self, page: u32) {
        if page < self.count {
            self.used[(page / 64) as usize].fetch_and(!(1u64 << (page % 64)), Ordering::AcqRel);
        }
    }
}

/// Driver state of a user context: its doorbell page.
pub(crate) struct UContext {
    pub(crate) db_page: u32,
}

/// Driver state of a CQ: its number and the pinned ring and record.
pub(crate) struct Cq {
    pub(crate) cqn: u32,
    _ring: Umem,
    _dbrec: Umem,
}

/// Driver state of a QP.
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    /// What the QP was created with: send/recv WRs, send/recv SGEs, inline.
    cap: [u32; 5],
    _sq: Umem,
    _sq_dbrec: Umem,
    _rq: Option<(Umem, Umem)>,
}

/// Driver state of an MR.
pub(crate) struct Mr {
    pub(crate) key: u32,
    _umem: Umem,
}

/// Driver state of an AH.
pub(crate) struct Ah {
    pub(crate) ahn: u32,
}

/// Pins a queue ring of `len` bytes at the page-aligned `va` and returns it
/// with the DMA addresses of its 4 KiB pages.
fn pin_ring(
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

/// Pins the page of an 8-byte doorbell record at `va`; returns it with the
/// record's DMA address.
fn pin_dbrec(dev: &rdma::Device<IbDev>, va: u64) -> Result<(Umem, u64)> {
    if va == 0 || va % u64::from(hw::FERROCE_DBREC_ALIGN) != 0 {
        return Err(EINVAL);
    }
    let umem = Umem::get(dev, va, 8, 0)?;
    let page = *umem.dma_blocks(PAGE)?.first().ok_or(EFAULT)?;
    Ok((umem, page + (va & (PAGE - 1))))
}

fn is_pow2_in(v: u32, min: u32, max: u32) -> bool {
    v.is_power_of_two() && (min..=max).contains(&v)
}

/// `alloc_ucontext`: a doorbell page, offered for `mmap()`.
pub(crate) fn alloc_ucontext(
    dev: &rdma::Device<IbDev>,
    init: &mut rdma::UContextInit<'_>,
    udata: &mut UData<'_>,
) -> Result<UContext> {
    let page = dev.db_pages.alloc()?;
    let r = (|| {
        let phys = dev.bar2 + u64::from(page) * u64::from(hw::FERROCE_DB_PAGE_SIZE);
        let off = init.offer_mmio(phys, hw::FERROCE_DB_PAGE_SIZE as usize)?;
        let c = &dev.caps;
        udata.respond(&hw::ferroce_uresp_alloc_ctx {
            db_mmap_offset: off,
            db_page: page,
            device_caps: c.device_caps,
            max_qp_wr: c.max_qp_wr,
            max_sge: c.max_sge,
            max_inline: c.max_inline,
            max_cqe: c.max_cqe,
        })
    })();
    match r {
        Ok(()) => Ok(UContext { db_page: page }),
        Err(e) => {
            dev.db_pages.free(page);
            Err(e)
        }
    }
}

/// `dealloc_ucontext`: the doorbell page becomes free again. Objects the
/// device could not destroy keep their `db_page`; ringing them through a
/// new context's page is refused by the device, which checks the page.
pub(crate) fn dealloc_ucontext(dev: &rdma::Device<IbDev>, ctx: &UContext) {
    dev.db_pages.free(ctx.db_page);
}

/// `create_cq` of a user CQ.
pub(crate) fn create_cq(
    dev: &rdma::Device<IbDev>,
    ctx: &UContext,
    cqe: u32,
    comp_vector: u32,
    udata: &mut UData<'_>,
) -> Result<(Cq, u32, u32)> {
    let req: hw::ferroce_ureq_create_cq = udata.read()?;
    if req.reserved != 0 {
        return Err(EINVAL);
    }
    let depth = req.depth;
    if !is_pow2_in(depth, 2, dev.caps.max_cqe) || depth <= cqe {
        return Err(EINVAL);
    }
    if comp_vector >= dev.num_ceqs {
        return Err(EINVAL);
    }
    let len = u64::from(depth) * u64::from(hw::FERROCE_CQE_SIZE);
    let (ring, pages) = pin_ring(dev, req.buf_va, len, rdma::umem::access::LOCAL_WRITE)?;
    let (dbrec, dbrec_addr) = pin_dbrec(dev, req.dbrec_va)?;
    let out = dev.shared.exec_with_lists(|lists| {
        Ok(hw::ferroce_cmd_create_cq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            dbrec_addr,
            depth,
            // CEQ n+1 serves completion vector n (EQ 0 is the async EQ).
            eqn: comp_vector + 1,
            db_page: ctx.db_page,
            ..Default::default()
        })
    })?;
    let cq = Cq {
        cqn: out.out[0],
        _ring: ring,
        _dbrec: dbrec,
    };
    if let Err(e) = udata.respond(&hw::ferroce_uresp_create_cq {
        cqn: cq.cqn,
        ..Default::default()
    }) {
        rdma::destroy_or_leak(cq, |cq| destroy_cq(dev, cq));
        return Err(e);
    }
    let cqn = cq.cqn;
    Ok((cq, cqn, depth))
}

pub(crate) fn destroy_cq(dev: &rdma::Device<IbDev>, cq: &Cq) -> Result {
    let cmd = hw::ferroce_cmd_destroy_cq {
        cqn: cq.cqn,
        ..Default::default()
    };
    dev.shared.exec(&cmd).map(|_| ())
}

/// `create_qp` of a user RC or UD QP.
pub(crate) fn create_qp(
    dev: &rdma::Device<IbDev>,
    ctx: &UContext,
    init: &mut QpInit<'_, Cq, crate::ib::Pd>,
    udata: &mut UData<'_>,
) -> Result<(Qp, u32)> {
    let req: hw::ferroce_ureq_create_qp = udata.read()?;
    if req.reserved.iter().any(|&b| b != 0) {
        return Err(EINVAL);
    }
    let c = &dev.caps;
    let cap = &mut *init.cap;
    // SQ: depth, stride, SGEs and inline data as device.rst "SQ WQE" says.
    let sq_shift = u32::from(req.sq_wqe_shift);
    if !is_pow2_in(req.sq_depth, 1, c.max_qp_wr)
        || req.sq_depth < cap.max_send_wr
        || !(hw::FERROCE_SQ_WQE_SHIFT_MIN..=hw::FERROCE_SQ_WQE_SHIFT_MAX).contains(&sq_shift)
    {
        return Err(EINVAL);
    }
    let sq_room = (1u32 << sq_shift) - hw::FERROCE_SQ_WQE_DATA_OFFSET;
    let max_send_sge = (sq_room / 16).min(c.max_sge);
    let max_inline = sq_room.min(c.max_inline);
    if cap.max_send_sge > max_send_sge || cap.max_inline_data > max_inline {
        return Err(EINVAL);
    }
    // RQ: absent (all zero) or as the SQ.
    let rq_shift = u32::from(req.rq_wqe_shift);
    let max_recv_sge = if req.rq_depth == 0 {
        if rq_shift != 0 || req.rq_buf_va != 0 || req.rq_dbrec_va != 0 || cap.max_recv_wr != 0 {
            return Err(EINVAL);
        }
        0
    } else {
        if !is_pow2_in(req.rq_depth, 1, c.max_qp_wr)
            || req.rq_depth < cap.max_recv_wr
            || !(hw::FERROCE_RQ_WQE_SHIFT_MIN..=hw::FERROCE_RQ_WQE_SHIFT_MAX).contains(&rq_shift)
        {
            return Err(EINVAL);
        }
        let m = (((1u32 << rq_shift) - hw::FERROCE_RQ_WQE_DATA_OFFSET) / 16).min(c.max_sge);
        if cap.max_recv_sge > m {
            return Err(EINVAL);
        }
        m
    };

    let sq_len = u64::from(req.sq_depth) << sq_shift;
    let (sq, sq_pages) = pin_ring(dev, req.sq_buf_va, sq_len, 0)?;
    let (sq_dbrec, sq_dbrec_addr) = pin_dbrec(dev, req.sq_dbrec_va)?;
    let rq = if req.rq_depth != 0 {
        let rq_len = u64::from(req.rq_depth) << rq_shift;
        let (rq, rq_pages) = pin_ring(dev, req.rq_buf_va, rq_len, 0)?;
        let (rq_dbrec, rq_dbrec_addr) = pin_dbrec(dev, req.rq_dbrec_va)?;
        Some((rq, rq_pages, rq_dbrec, rq_dbrec_addr))
    } else {
        None
    };
    let qp_type = match init.qp_type {
        QpType::Rc => hw::FERROCE_QPT_RC,
        QpType::Ud => hw::FERROCE_QPT_UD,
    };
    let out = dev.shared.exec_with_lists(|lists| {
        let mut cmd = hw::ferroce_cmd_create_qp {
            sq_buf: lists.add(&sq_pages, PAGE_SHIFT)?,
            sq_dbrec_addr,
            pdn: init.pd.pdn,
            send_cqn: init.send_cq.cqn,
            recv_cqn: init.recv_cq.cqn,
            sq_depth: req.sq_depth,
            rq_depth: req.rq_depth,
            db_page: ctx.db_page,
            max_inline,
            qp_type: qp_type as u8,
            sq_wqe_shift: req.sq_wqe_shift,
            rq_wqe_shift: req.rq_wqe_shift,
            flags: if init.sq_sig_all {
                hw::FERROCE_QP_FLAG_SQ_SIG_ALL as u8
            } else {
                0
            },
            ..Default::default()
        };
        if let Some((_, pages, _, dbrec)) = rq.as_ref() {
            cmd.rq_buf = lists.add(pages, PAGE_SHIFT)?;
            cmd.rq_dbrec_addr = *dbrec;
        }
        Ok(cmd)
    })?;
    let granted = [
        req.sq_depth,
        req.rq_depth,
        max_send_sge,
        max_recv_sge,
        max_inline,
    ];
    let qp = Qp {
        qpn: out.out[0],
        cap: granted,
        _sq: sq,
        _sq_dbrec: sq_dbrec,
        _rq: rq.map(|(rq, _, dbrec, _)| (rq, dbrec)),
    };
    set_cap(cap, &granted);
    if let Err(e) = udata.respond(&hw::ferroce_uresp_create_qp {
        qpn: qp.qpn,
        max_inline,
    }) {
        rdma::destroy_or_leak(qp, |qp| destroy_qp(dev, qp));
        return Err(e);
    }
    let qpn = qp.qpn;
    Ok((qp, qpn))
}

/// The device's address vector for an ib_core one (RoCE: GRH always, the
/// destination MAC resolved by ib_core, the network type from the source
/// GID entry).
fn av_of(attr: &AhAttr<'_>) -> Result<hw::ferroce_av> {
    let sgid = attr.sgid_attr().ok_or(EINVAL)?;
    if !attr.has_grh() {
        return Err(EINVAL);
    }
    let gid_type = sgid.gid_type().ok_or(EINVAL)?;
    let (_, network_type) = gid_network_type(gid_type, &Gid(sgid.gid()))?;
    Ok(hw::ferroce_av {
        dgid: attr.dgid(),
        dmac: attr.dmac(),
        sgid_index: attr.sgid_index(),
        hop_limit: attr.hop_limit(),
        flow_label: attr.flow_label() & hw::FERROCE_FLOW_LABEL_MASK,
        traffic_class: attr.traffic_class(),
        network_type,
        ..Default::default()
    })
}

/// `modify_qp`: the attributes go to the device, which owns the state
/// machine and checks every transition (device.rst, "QP state machine").
pub(crate) fn modify_qp(
    dev: &rdma::Device<IbDev>,
    qp: &Qp,
    attr: &QpAttr<'_>,
    mask: u32,
) -> Result {
    if mask & !hw::FERROCE_QP_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    let a = attr.raw();
    let mut hwa = hw::ferroce_qp_attr {
        qpn: qp.qpn,
        attr_mask: mask,
        qp_state: a.qp_state as u8,
        cur_qp_state: a.cur_qp_state as u8,
        path_mtu: a.path_mtu as u8,
        port_num: a.port_num as u8,
        dest_qp_num: a.dest_qp_num,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        qkey: a.qkey,
        qp_access_flags: a.qp_access_flags as u32,
        pkey_index: a.pkey_index,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        min_rnr_timer: a.min_rnr_timer,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        en_sqd_async_notify: a.en_sqd_async_notify,
        ..Default::default()
    };
    if mask & hw::FERROCE_QP_ATTR_AV != 0 {
        hwa.av = av_of(&attr.av())?;
    }
    let cmd = hw::ferroce_cmd_modify_qp {
        attr: hwa,
        ..Default::default()
    };
    dev.shared.exec(&cmd).map(|_| ())
}

fn set_cap(cap: &mut hw::ib_qp_cap, v: &[u32; 5]) {
    cap.max_send_wr = v[0];
    cap.max_recv_wr = v[1];
    cap.max_send_sge = v[2];
    cap.max_recv_sge = v[3];
    cap.max_inline_data = v[4];
}

/// `query_qp`: the device's view of the QP (it keeps every attribute's
/// last value), plus the capacities it was created with.
pub(crate) fn query_qp(
    dev: &rdma::Device<IbDev>,
    qp: &Qp,
    attr: &mut rdma::QpAttrOut<'_>,
    cap: &mut hw::ib_qp_cap,
) -> Result {
    let a = dev.shared.query_qp(qp.qpn)?;
    let r = attr.raw();
    r.qp_state = u32::from(a.qp_state);
    r.cur_qp_state = u32::from(a.cur_qp_state);
    r.path_mtu = u32::from(a.path_mtu);
    r.path_mig_state = hw::ib_mig_state_IB_MIG_MIGRATED;
    r.qkey = a.qkey;
    r.rq_psn = a.rq_psn;
    r.sq_psn = a.sq_psn;
    r.dest_qp_num = a.dest_qp_num;
    r.qp_access_flags = i32::try_from(a.qp_access_flags)?;
    r.pkey_index = a.pkey_index;
    r.en_sqd_async_notify = a.en_sqd_async_notify;
    r.sq_draining = a.sq_draining;
    r.max_rd_atomic = a.max_rd_atomic;
    r.max_dest_rd_atomic = a.max_dest_rd_atomic;
    r.min_rnr_timer = a.min_rnr_timer;
    r.port_num = u32::from(a.port_num);
    r.timeout = a.timeout;
    r.retry_cnt = a.retry_cnt;
    r.rnr_retry = a.rnr_retry;
    attr.set_roce_av(&rdma::RoceAv {
        dgid: a.av.dgid,
        dmac: a.av.dmac,
        sgid_index: a.av.sgid_index,
        hop_limit: a.av.hop_limit,
        traffic_class: a.av.traffic_class,
        flow_label: a.av.flow_label,
        port: u32::from(a.port_num).max(1),
    });
    set_cap(cap, &qp.cap);
    Ok(())
}

pub(crate) fn destroy_qp(dev: &rdma::Device<IbDev>, qp: &Qp) -> Result {
    let cmd = hw::ferroce_cmd_destroy_qp {
        qpn: qp.qpn,
        ..Default::default()
    };
    dev.shared.exec(&cmd).map(|_| ())
}

/// `reg_user_mr`: pins the range and registers it with the largest page
/// size the device and the mapping allow.
pub(crate) fn reg_user_mr(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
) -> Result<(Mr, u32)> {
    // Optional flags (relaxed ordering, ...) may be ignored by definition.
    let access = access & !hw::ib_access_flags_IB_ACCESS_OPTIONAL;
    if access & !hw::FERROCE_ACCESS_MR_MASK != 0 {
        return Err(EOPNOTSUPP);
    }
    if length == 0 || length > dev.caps.max_mr_size {
        return Err(EINVAL);
    }
    let zero_based = access & hw::FERROCE_ACCESS_ZERO_BASED != 0;
    let umem = Umem::get(dev, start, usize::try_from(length)?, access)?;
    // The device address of the first byte decides which page sizes fit;
    // a zero-based MR starts at offset `start` within its first page.
    let virt = if zero_based { start } else { iova };
    let pgsz = umem.best_page_size(dev.caps.page_size_cap, virt)?;
    let pages = umem.dma_blocks(pgsz)?;
    let variant = dev.next_key_variant();
    let out = dev.shared.exec_with_lists(|lists| {
        Ok(hw::ferroce_cmd_reg_mr {
            pbl: lists.add(&pages, pgsz.trailing_zeros())?,
            iova: if zero_based { 0 } else { iova },
            length,
            pdn: pd.pdn,
            access,
            offset: (virt & (pgsz - 1)) as u32,
            key_variant: variant,
            ..Default::default()
        })
    })?;
    let key = out.out[0];
    Ok((Mr { key, _umem: umem }, key))
}

pub(crate) fn dereg_mr(dev: &rdma::Device<IbDev>, mr: &Mr) -> Result {
    let cmd = hw::ferroce_cmd_dereg_mr {
        key: mr.key,
        ..Default::default()
    };
    dev.shared.exec(&cmd).map(|_| ())
}

/// `create_ah`: the device keeps the address vector; UD WQEs name it.
pub(crate) fn create_ah(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    attr: &AhAttr<'_>,
    udata: Option<&mut UData<'_>>,
) -> Result<Ah> {
    let cmd = hw::ferroce_cmd_create_ah {
        pdn: pd.pdn,
        av: av_of(attr)?,
        ..Default::default()
    };
    let ah = Ah {
        ahn: dev.shared.exec(&cmd)?.out[0],
    };
    if let Some(udata) = udata {
        if let Err(e) = udata.respond(&hw::ferroce_uresp_create_ah {
            ahn: ah.ahn,
            ..Default::default()
        }) {
            let _ = destroy_ah(dev, &ah);
            return Err(e);
        }
    }
    Ok(ah)
}

pub(crate) fn destroy_ah(dev: &rdma::Device<IbDev>, ah: &Ah) -> Result {
    let cmd = hw::ferroce_cmd_destroy_ah {
        ahn: ah.ahn,
        ..Default::default()
    };
    dev.shared.exec(&cmd).map(|_| ())
}
