// SPDX-License-Identifier: GPL-2.0

//! User objects of the ferroce `ib_device`: the doorbell page of each user
//! context, CQs, QPs, MRs and AHs. Their memory lives in the process and is
//! pinned here; the device learns it through page lists and its admin
//! commands (`Documentation/ferroce/device.rst`); the provider's side of
//! each exchange is `include/uapi/rdma/ferroce-abi.h`.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    diag::{self, PairWarning, PathDiag, PathNote},
    gid::Gid,
    ib::{gid_network_type, IbDev, VLAN_VALID},
    kqueue::{KernelCq, KernelQp, QpGeometry},
    pbl,
    rdma::{self, AhAttr, QpAttr, QpInit, QpType, RegSeg, UData, Umem},
    srq::Srq,
};
use core::{
    num::NonZeroU32,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::{
    dma::Coherent,
    io::io_write,
    new_mutex,
    num::casts::{u32_into_u8, FromSafeCast},
    prelude::*,
    sync::Mutex,
};

/// Pages of the kernel's 4 KiB page size as the device sees them.
pub(crate) const PAGE_SHIFT: u32 = 12;
const PAGE: u64 = 1 << PAGE_SHIFT;

/// Doorbell pages in one kernel page: a user context maps (and reserves) a
/// group of this many consecutive pages, aligned to the group size, and
/// rings through the first of them (1 with 4 KiB pages, 16 with 64 KiB).
pub(crate) const DB_PAGES_PER_MAPPING: u32 =
    (kernel::page::PAGE_SIZE / hw::FERROCE_DB_PAGE_SIZE as usize) as u32;
const _: () = assert!(
    kernel::page::PAGE_SIZE % hw::FERROCE_DB_PAGE_SIZE as usize == 0
        && DB_PAGES_PER_MAPPING >= 1
        && DB_PAGES_PER_MAPPING.is_power_of_two()
);

/// The doorbell pages of BAR2 handed out to user contexts, in groups of
/// `per_group` consecutive pages aligned to `per_group` (one kernel page:
/// [`DB_PAGES_PER_MAPPING`]); a group holding one of the kernel's pages
/// (page 0) is never handed out, nor is a partial group at the end. A
/// context gets a whole group, so no other context can ring through its
/// mapping, and uses the group's first page.
///
/// Groups are counted: a context holds its group, and so does every CQ
/// and QP created in it until the device destroyed it. A group is handed
/// out again only when nothing holds it, so objects the device could not
/// destroy (leaked) keep their page reserved for good and a new context
/// can never ring them.
pub(crate) struct DbPages {
    /// Holds of each group.
    refs: [AtomicU32; 256],
    groups: u32,
    per_group: NonZeroU32,
}

impl DbPages {
    /// `count` pages (at most 256), of which the first `kernel` are never
    /// handed out, in groups of `per_group` (a power of two; 1 if 0).
    pub(crate) fn new(count: u32, kernel: u32, per_group: u32) -> Self {
        let per_group = NonZeroU32::new(per_group).unwrap_or(NonZeroU32::MIN);
        let count = count.min(256);
        let pages = Self {
            refs: [const { AtomicU32::new(0) }; 256],
            groups: count / per_group,
            per_group,
        };
        let kernel_groups = kernel.div_ceil(per_group.get()).min(pages.groups);
        for r in pages.refs.iter().take(usize::from_safe_cast(kernel_groups)) {
            r.store(1, Ordering::Relaxed);
        }
        pages
    }

    /// The number of pages of a group (what a context maps).
    pub(crate) fn per_group(&self) -> u32 {
        self.per_group.get()
    }

    /// Takes a free group for a new context and returns its first page;
    /// `ENOSPC` when none is free.
    pub(crate) fn alloc(&self) -> Result<u32> {
        (0..self.groups)
            .find(|&g| {
                self.refs[usize::from_safe_cast(g)]
                    .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .map(|g| g.saturating_mul(self.per_group.get()))
            .ok_or(ENOSPC)
    }

    fn group(&self, page: u32) -> Option<&AtomicU32> {
        self.refs.get(usize::from_safe_cast(page / self.per_group))
    }

    /// One more holder of the group of `page` (an object created in its
    /// context, which holds it already).
    pub(crate) fn hold(&self, page: u32) {
        if let Some(r) = self.group(page) {
            r.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Drops a hold of the group of `page` (from [`DbPages::alloc`] or
    /// [`DbPages::hold`]); the group is free once none is left.
    pub(crate) fn put(&self, page: u32) {
        if let Some(r) = self.group(page) {
            r.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether a context may get the group of `page` now (for the KUnit
    /// test).
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    fn is_free(&self, page: u32) -> bool {
        self.group(page)
            .is_some_and(|r| r.load(Ordering::Relaxed) == 0)
    }
}

#[kunit_tests(ferroce_db_pages)]
mod db_pages_tests {
    use super::*;

    #[test]
    fn leaked_objects_keep_their_page() {
        let pages = DbPages::new(3, 1, 1);
        let a = pages.alloc().unwrap();
        assert_eq!(a, 1);
        let b = pages.alloc().unwrap();
        assert_eq!(b, 2);
        assert!(pages.alloc().is_err());
        // A CQ of context `a` is created, then the context goes away: the
        // page stays reserved while the CQ exists (or was leaked).
        pages.hold(a);
        pages.put(a);
        assert!(!pages.is_free(a));
        assert!(pages.alloc().is_err());
        // The CQ is destroyed: the page is free again.
        pages.put(a);
        assert!(pages.is_free(a));
        assert_eq!(pages.alloc().unwrap(), a);
        assert!(!pages.is_free(0));
    }

    /// 64 KiB kernel pages: groups of 16 pages, aligned, the kernel's
    /// group (0) never handed out.
    #[test]
    fn groups_of_16() {
        let pages = DbPages::new(256, 1, 16);
        assert_eq!(pages.per_group(), 16);
        assert!(!pages.is_free(0) && !pages.is_free(15));
        let mut expected = 16;
        while let Ok(page) = pages.alloc() {
            assert_eq!(page, expected);
            expected += 16;
        }
        // 15 groups: pages 16..256.
        assert_eq!(expected, 256);
        // A hold through the group's page keeps the whole group: no other
        // context gets any page of it.
        let a = 32;
        pages.hold(a);
        pages.put(a);
        assert!(!pages.is_free(a) && !pages.is_free(a + 15));
        assert!(pages.alloc().is_err());
        pages.put(a);
        assert!(pages.is_free(a + 7));
        assert_eq!(pages.alloc().unwrap(), a);

        // A partial group at the end is not used; kernel pages spanning
        // two groups keep both.
        let pages = DbPages::new(40, 17, 16);
        assert!(pages.alloc().is_err());
        let pages = DbPages::new(40, 1, 16);
        assert_eq!(pages.alloc().unwrap(), 16);
        assert!(pages.alloc().is_err());
    }
}

/// Driver state of a user context: its doorbell page.
pub(crate) struct UContext {
    pub(crate) db_page: u32,
    /// The `mmap()` offset of the doorbell page group.
    db_mmap_offset: u64,
}

/// Where a CQ's ring and doorbell record live.
enum CqMem {
    /// In the process, pinned; rung through doorbell page `db_page` (held).
    /// The ring's lock serialises resizes, which replace it.
    User {
        ring: Pin<KBox<Mutex<Umem>>>,
        _dbrec: Umem,
        db_page: u32,
    },
    /// In coherent memory of the driver.
    Kernel(Pin<KBox<KernelCq>>),
}

/// Driver state of a CQ: its number and its memory.
pub(crate) struct Cq {
    pub(crate) cqn: u32,
    /// CQEs the ring holds (a resize changes it).
    depth: AtomicU32,
    /// The completion EQ.
    eqn: u32,
    mem: CqMem,
}

impl Cq {
    /// The rings of a kernel CQ.
    pub(crate) fn kernel(&self) -> Option<&KernelCq> {
        match &self.mem {
            CqMem::Kernel(k) => Some(k),
            CqMem::User { .. } => None,
        }
    }
}

/// What a QP was created with.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
}

/// Where a QP's rings and doorbell records live.
enum QpMem {
    /// In the process, pinned: SQ ring and record, RQ ring and record.
    User {
        _sq: Umem,
        _sq_dbrec: Umem,
        _rq: Option<(Umem, Umem)>,
        db_page: u32,
    },
    /// In coherent memory of the driver.
    Kernel(Pin<KBox<KernelQp>>),
}

/// Driver state of a QP.
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    /// The transport, for the access flags it takes.
    qp_type: QpType,
    cap: QpCaps,
    mem: QpMem,
    /// Whether the path crosses routers, for the retry warning.
    pub(crate) path: PathDiag,
}

impl Qp {
    /// The rings of a kernel QP.
    pub(crate) fn kernel(&self) -> Option<&KernelQp> {
        match &self.mem {
            QpMem::Kernel(k) => Some(k),
            QpMem::User { .. } => None,
        }
    }
}

/// The page list of a fast-register MR, which `map_mr_sg` fills and an
/// `IB_WR_REG_MR` hands to the device (a level-1 list).
pub(crate) struct FastRegPages {
    pages: Coherent<[u64]>,
    max: u32,
    count: AtomicU32,
}

/// What an MR translates.
enum MrMem {
    /// Pinned user memory, in `pages` pages of `1 << page_shift` bytes,
    /// registered with `reg` (what a re-registration keeps).
    User {
        _umem: Umem,
        pages: u32,
        page_shift: u32,
        reg: UserReg,
    },
    /// Every DMA address (`get_dma_mr`).
    Dma,
    /// Pages a REG_MR work request gives it.
    FastReg(FastRegPages),
}

/// Rights for which ib_core pins user pages writable (`ib_access_writable`).
const WRITABLE: u32 = hw::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | hw::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | hw::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | hw::ib_access_flags_IB_ACCESS_MW_BIND;

/// What a user MR was registered with: `reg_user_mr`'s arguments, the
/// rights as changed in place since.
#[derive(Debug)]
pub(crate) struct UserReg {
    start: u64,
    length: u64,
    iova: u64,
    access: AtomicU32,
    /// The pages were pinned writable (`IB_ACCESS_WRITABLE` rights).
    writable: bool,
}

/// Driver state of an MR.
pub(crate) struct Mr {
    pub(crate) key: u32,
    mem: MrMem,
}

/// Driver state of a memory window: its key at allocation (DEREG_MR of an
/// MW matches its index, whatever variant binds have given it since).
pub(crate) struct Mw {
    key: u32,
}

/// Driver state of an AH: the device's AH number of a user AH, or 0 for a
/// kernel AH, whose address vector goes into each WQE (kernel AHs are
/// created in atomic context, where no admin command can run).
pub(crate) struct Ah {
    pub(crate) ahn: u32,
    pub(crate) av: hw::ferroce_av,
}

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

/// SGEs an RQ or SRQ WQE of stride `1 << shift` holds, at most `max_sge`.
pub(crate) fn rq_wqe_sges(shift: u32, max_sge: u32) -> u32 {
    (((1u32 << shift) - hw::FERROCE_RQ_WQE_DATA_OFFSET) / 16).min(max_sge)
}

/// The CREATE_QP flags and SRQ number of a QP: signaling and, with an
/// SRQ, where its receives come from. The SRQ must belong to the QP's PD
/// (device.rst, CREATE_QP).
fn qp_flags(init: &QpInit<'_, Cq, crate::ib::Pd, Srq>) -> Result<(u8, u32)> {
    let mut flags = 0;
    if init.sq_sig_all {
        flags |= hw::FERROCE_QP_FLAG_SQ_SIG_ALL;
    }
    let srqn = match init.srq {
        Some(srq) if srq.pdn != init.pd.pdn => return Err(EINVAL),
        Some(srq) => {
            flags |= hw::FERROCE_QP_FLAG_SRQ;
            srq.srqn
        }
        None => 0,
    };
    Ok((u8::try_from(flags)?, srqn))
}

/// `alloc_ucontext`: a group of doorbell pages (one kernel page), offered
/// for `mmap()`.
pub(crate) fn alloc_ucontext(
    dev: &rdma::Device<IbDev>,
    init: &mut rdma::UContextInit<'_>,
    udata: &mut UData<'_>,
) -> Result<UContext> {
    let req: hw::ferroce_ureq_alloc_ctx = udata.read()?;
    if req.comp_mask != 0 || req.reserved != 0 {
        return Err(EINVAL);
    }
    // The context's group of doorbell pages, one kernel page: mapped whole,
    // rung through its first page (offset 0 of the mapping).
    let page = dev.db_pages.alloc()?;
    (|| {
        let db_page_size = u64::from(hw::FERROCE_DB_PAGE_SIZE);
        let off = init.offer_mmio(
            &dev.db_region,
            u64::from(page) * db_page_size,
            u64::from(dev.db_pages.per_group()) * db_page_size,
        )?;
        let ctx = UContext {
            db_page: page,
            db_mmap_offset: off,
        };
        udata.respond(&ctx_resp(dev, &ctx))?;
        Ok(ctx)
    })()
    .inspect_err(|_| dev.db_pages.put(page))
}

/// What the provider learns of context `ctx`: from `alloc_ucontext`, and
/// again from the extended QUERY_DEVICE when it imports the context.
fn ctx_resp(dev: &rdma::Device<IbDev>, ctx: &UContext) -> hw::ferroce_uresp_alloc_ctx {
    let c = &dev.caps;
    hw::ferroce_uresp_alloc_ctx {
        db_mmap_offset: ctx.db_mmap_offset,
        db_page: ctx.db_page,
        device_caps: c.device_caps,
        max_qp_wr: c.max_qp_wr,
        max_sge: c.max_sge,
        max_inline: c.max_inline,
        max_cqe: c.max_cqe,
        ..Default::default()
    }
}

/// The extended QUERY_DEVICE's driver response (`ferroce-abi.h`): the
/// context's `alloc_ucontext` response, for `ibv_import_device`.
pub(crate) fn query_device_udata(
    dev: &rdma::Device<IbDev>,
    ctx: &UContext,
    udata: &mut UData<'_>,
) -> Result {
    udata.respond(&ctx_resp(dev, ctx))
}

/// `dealloc_ucontext`: the context's hold of its doorbell page goes; the
/// page is free once its objects are destroyed too (never, for objects the
/// device could not destroy: see [`DbPages`]).
pub(crate) fn dealloc_ucontext(dev: &rdma::Device<IbDev>, ctx: &UContext) {
    dev.db_pages.put(ctx.db_page);
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
    // No extensions are defined yet.
    if req.comp_mask != 0 {
        return Err(EINVAL);
    }
    let depth = req.depth;
    // A CQ holds `depth` CQEs (device.rst, "CQ ring, overflow").
    if !is_pow2_in(depth, 2, dev.caps.max_cqe) || depth < cqe {
        return Err(EINVAL);
    }
    if comp_vector >= dev.num_ceqs {
        return Err(EINVAL);
    }
    let len = u64::from(depth) * u64::from(hw::FERROCE_CQE_SIZE);
    let (ring, pages) = pin_ring(dev, req.buf_va, len, rdma::umem::access::LOCAL_WRITE)?;
    let (dbrec, dbrec_addr) = pin_dbrec(dev, req.dbrec_va, 0)?;
    // Allocated before the device has the CQ: nothing fails after it.
    let ring = KBox::pin_init(new_mutex!(ring), GFP_KERNEL)?;
    let (out, (ring, dbrec)) = dev.shared.exec_create((ring, dbrec), |lists, _| {
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
        depth: AtomicU32::new(depth),
        eqn: comp_vector + 1,
        mem: CqMem::User {
            ring,
            _dbrec: dbrec,
            db_page: ctx.db_page,
        },
    };
    // Released by `destroy_cq` once the device destroyed the CQ.
    dev.db_pages.hold(ctx.db_page);
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

/// `resize_user_cq` (device 1.6, `CAP_RESIZE_CQ`): pins the ring the
/// provider prepared, lets the device switch to it (device.rst, "Resizing
/// a CQ") and answers the switch index, from which the provider polls the
/// new ring once it copied the CQEs before it. Returns the new capacity.
pub(crate) fn resize_user_cq(
    dev: &rdma::Device<IbDev>,
    cq: &Cq,
    cqe: u32,
    udata: &mut UData<'_>,
) -> Result<u32> {
    if dev.caps.device_caps & hw::FERROCE_CAP_RESIZE_CQ == 0 {
        return Err(EOPNOTSUPP);
    }
    let CqMem::User { ring, .. } = &cq.mem else {
        return Err(EINVAL);
    };
    let req: hw::ferroce_ureq_resize_cq = udata.read()?;
    if req.comp_mask != 0 {
        return Err(EINVAL);
    }
    let depth = req.depth;
    if !is_pow2_in(depth, 2, dev.caps.max_cqe) || depth < cqe {
        return Err(EINVAL);
    }
    let mut cur = ring.lock();
    let len = u64::from(depth) * u64::from(hw::FERROCE_CQE_SIZE);
    let (new, pages) = pin_ring(dev, req.buf_va, len, rdma::umem::access::LOCAL_WRITE)?;
    let (out, new) = dev.shared.exec_create(new, |lists, _| {
        Ok(hw::ferroce_cmd_resize_cq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            cqn: cq.cqn,
            depth,
            ..Default::default()
        })
    })?;
    // The device writes the new ring only; the old one is unpinned here
    // (the provider still reads the CQEs before the switch from it).
    *cur = new;
    cq.depth.store(depth, Ordering::Relaxed);
    // A response that cannot be written fails the call with the device on
    // the new ring: only the process that passed a bad response buffer
    // loses its completions.
    udata.respond(&hw::ferroce_uresp_resize_cq {
        switch_index: out.out[0],
        ..Default::default()
    })?;
    Ok(depth)
}

pub(crate) fn destroy_cq(dev: &rdma::Device<IbDev>, cq: &Cq) -> Result {
    let cmd = hw::ferroce_cmd_destroy_cq {
        cqn: cq.cqn,
        ..Default::default()
    };
    dev.shared.exec_destroy(&cmd)?;
    if let CqMem::User { db_page, .. } = &cq.mem {
        dev.db_pages.put(*db_page);
    }
    Ok(())
}

/// `create_qp` of a user RC, UC or UD QP. UC only on a device that
/// reports `CAP_UC` (1.5).
pub(crate) fn create_qp(
    dev: &rdma::Device<IbDev>,
    ctx: &UContext,
    init: &mut QpInit<'_, Cq, crate::ib::Pd, Srq>,
    udata: &mut UData<'_>,
) -> Result<(Qp, u32)> {
    let c = &dev.caps;
    if init.qp_type == QpType::Uc && c.device_caps & hw::FERROCE_CAP_UC == 0 {
        return Err(EOPNOTSUPP);
    }
    let req: hw::ferroce_ureq_create_qp = udata.read()?;
    let path = PathDiag::new()?;
    if req.reserved.iter().any(|&b| b != 0) || req.comp_mask != 0 || req.reserved2 != 0 {
        return Err(EINVAL);
    }
    let (flags, srqn) = qp_flags(init)?;
    let cap = &mut *init.cap;
    if init.srq.is_some() {
        // Receives come from the SRQ: what was asked for an RQ is ignored.
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    }
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
        if init.srq.is_some() {
            return Err(EINVAL);
        }
        let m = rq_wqe_sges(rq_shift, c.max_sge);
        if cap.max_recv_sge > m {
            return Err(EINVAL);
        }
        m
    };

    let sq_len = u64::from(req.sq_depth) << sq_shift;
    let (sq, sq_pages) = pin_ring(dev, req.sq_buf_va, sq_len, 0)?;
    let (sq_dbrec, sq_dbrec_addr) = pin_dbrec(dev, req.sq_dbrec_va, 0)?;
    let rq = if req.rq_depth != 0 {
        let rq_len = u64::from(req.rq_depth) << rq_shift;
        let (rq, rq_pages) = pin_ring(dev, req.rq_buf_va, rq_len, 0)?;
        let (rq_dbrec, rq_dbrec_addr) = pin_dbrec(dev, req.rq_dbrec_va, 0)?;
        Some((rq, rq_pages, rq_dbrec, rq_dbrec_addr))
    } else {
        None
    };
    let qp_type = hw_qp_type(init.qp_type);
    let (out, (sq, sq_dbrec, rq)) =
        dev.shared
            .exec_create((sq, sq_dbrec, rq), |lists, (_, _, rq)| {
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
                    qp_type,
                    sq_wqe_shift: req.sq_wqe_shift,
                    rq_wqe_shift: req.rq_wqe_shift,
                    flags,
                    srqn,
                    ..Default::default()
                };
                if let Some((_, pages, _, dbrec)) = rq.as_ref() {
                    cmd.rq_buf = lists.add(pages, PAGE_SHIFT)?;
                    cmd.rq_dbrec_addr = *dbrec;
                }
                Ok(cmd)
            })?;
    let granted = QpCaps {
        max_send_wr: req.sq_depth,
        max_recv_wr: req.rq_depth,
        max_send_sge,
        max_recv_sge,
        max_inline,
    };
    let qp = Qp {
        qpn: out.out[0],
        qp_type: init.qp_type,
        cap: granted,
        mem: QpMem::User {
            _sq: sq,
            _sq_dbrec: sq_dbrec,
            _rq: rq.map(|(rq, _, dbrec, _)| (rq, dbrec)),
            db_page: ctx.db_page,
        },
        path,
    };
    // Released by `destroy_qp` once the device destroyed the QP.
    dev.db_pages.hold(ctx.db_page);
    set_cap(cap, &granted);
    if let Err(e) = udata.respond(&hw::ferroce_uresp_create_qp {
        qpn: qp.qpn,
        max_inline,
        ..Default::default()
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
    // The device tags frames with the sgid entry's VLAN; the AV repeats it
    // and gives the priority (ib_core's sl), only for tagged entries, which
    // exist only on CAP_VLAN devices.
    let vlan = sgid.l2_fields().ok().and_then(|(vlan, _)| vlan);
    Ok(hw::ferroce_av {
        vlan: vlan.map_or(0, |vid| VLAN_VALID | vid),
        sl: if vlan.is_some() { attr.sl() & 7 } else { 0 },
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
        qp_state: masked_attr(mask, hw::FERROCE_QP_ATTR_STATE, a.qp_state)?,
        cur_qp_state: masked_attr(mask, hw::FERROCE_QP_ATTR_CUR_STATE, a.cur_qp_state)?,
        path_mtu: masked_attr(mask, hw::FERROCE_QP_ATTR_PATH_MTU, a.path_mtu)?,
        port_num: masked_attr(mask, hw::FERROCE_QP_ATTR_PORT, a.port_num)?,
        dest_qp_num: a.dest_qp_num,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        qkey: a.qkey,
        qp_access_flags: qp_access(
            masked_attr(mask, hw::FERROCE_QP_ATTR_ACCESS_FLAGS, a.qp_access_flags)?,
            qp.qp_type,
            dev.caps.device_caps,
        ),
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
    let mut path = None;
    if mask & hw::FERROCE_QP_ATTR_AV != 0 {
        let av = attr.av().ok_or(EINVAL)?;
        path = Some(check_path(dev, Some(qp.qpn), &av)?);
        hwa.av = av_of(&av)?;
    }
    let to = (mask & hw::FERROCE_QP_ATTR_STATE != 0).then_some(u32::from(hwa.qp_state));
    // Before the command: a receive posted while the QP enters ERR rings,
    // and the transition flushes those posted before.
    if let (Some(hw::FERROCE_QPS_ERR), Some(k)) = (to, qp.kernel()) {
        k.rq_may_fail(dev, qp.qpn, false);
    }
    let cmd = hw::ferroce_cmd_modify_qp {
        attr: hwa,
        ..Default::default()
    };
    dev.shared.exec(&cmd)?;
    if let (Some(hw::FERROCE_QPS_RESET), Some(k)) = (to, qp.kernel()) {
        k.rq_reset();
    }
    if let Some(note) = path {
        qp.path.set(note);
    }
    Ok(())
}

/// A `modify_qp` attribute converted to the device's field type (`EINVAL`
/// if it does not fit) if `bit` is in `mask`, else 0: the device reads only
/// the masked fields, and kernel callers may leave the others unset.
fn masked_attr<S, T>(mask: u32, bit: u32, v: S) -> Result<T>
where
    T: TryFrom<S> + Default,
{
    if mask & bit == 0 {
        return Ok(T::default());
    }
    T::try_from(v).map_err(|_| EINVAL)
}

/// Checks the source/destination GID pair of an address vector before it
/// reaches the device (driver.rst, "GID pitfalls"): a pair of different
/// address families is refused with `EINVAL` and one (rate-limited)
/// warning naming the GID index that would work. Otherwise returns what
/// the retry warning needs to know about the path: `Some` if it cannot
/// cross a router (RoCE v1 or link-local source GID). Process context.
fn check_path(
    dev: &rdma::Device<IbDev>,
    qpn: Option<u32>,
    av: &AhAttr<'_>,
) -> Result<Option<PathNote>> {
    let sgid_attr = av.sgid_attr().ok_or(EINVAL)?;
    let gid_type = sgid_attr.gid_type().ok_or(EINVAL)?;
    let (sgid, dgid) = (Gid(sgid_attr.gid()), Gid(av.dgid()));
    let mismatch = !diag::same_family(&sgid, &dgid);
    let risk = diag::risk_of(gid_type, &sgid);
    if !mismatch && risk.is_none() {
        return Ok(None);
    }
    // Only unusual paths pay for a copy of the GID table.
    let max = usize::try_from(dev.caps.gid_table_len)?;
    let fix = av
        .gid_table(max)
        .ok()
        .and_then(|t| diag::routable(&t, u32::from(av.sgid_index()), &dgid));
    if mismatch {
        if dev.shared.path_warn.allow() {
            dev.shared
                .stats
                .path_warnings
                .fetch_add(1, Ordering::Relaxed);
            let w = PairWarning {
                qpn,
                sgid_index: av.sgid_index(),
                gid_type,
                sgid,
                dgid,
                fix,
            };
            dev.warn(format_args!("{w}\n"));
        }
        return Err(EINVAL);
    }
    Ok(risk.map(|risk| PathNote {
        risk,
        sgid_index: av.sgid_index(),
        fix,
    }))
}

fn set_cap(cap: &mut hw::ib_qp_cap, v: &QpCaps) {
    cap.max_send_wr = v.max_send_wr;
    cap.max_recv_wr = v.max_recv_wr;
    cap.max_send_sge = v.max_send_sge;
    cap.max_recv_sge = v.max_recv_sge;
    cap.max_inline_data = v.max_inline;
}

fn hw_qp_type(t: QpType) -> u8 {
    match t {
        QpType::Rc => u32_into_u8::<{ hw::FERROCE_QPT_RC }>(),
        QpType::Uc => u32_into_u8::<{ hw::FERROCE_QPT_UC }>(),
        QpType::Ud => u32_into_u8::<{ hw::FERROCE_QPT_UD }>(),
        QpType::Gsi => u32_into_u8::<{ hw::FERROCE_QPT_GSI }>(),
    }
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
    dev.shared.exec_destroy(&cmd)?;
    if let QpMem::User { db_page, .. } = &qp.mem {
        dev.db_pages.put(*db_page);
    }
    Ok(())
}

/// `attach_mcast` (`attach`) or `detach_mcast` (device 1.7, `CAP_MCAST`):
/// ib_core has checked that the QP is UD and `gid` a multicast GID. The
/// device detaches a QP from every group when it is destroyed.
pub(crate) fn mcast(dev: &rdma::Device<IbDev>, qp: &Qp, gid: &[u8; 16], attach: bool) -> Result {
    if dev.caps.device_caps & hw::FERROCE_CAP_MCAST == 0 {
        return Err(EOPNOTSUPP);
    }
    let cmd = hw::ferroce_cmd_mcast {
        qpn: qp.qpn,
        gid: *gid,
        ..Default::default()
    };
    if attach {
        dev.shared.exec(&hw::AttachMcast(cmd))?;
    } else {
        dev.shared.exec(&hw::DetachMcast(cmd))?;
    }
    Ok(())
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
    let reg = UserReg {
        start,
        length,
        iova,
        access: AtomicU32::new(access),
        writable: access & WRITABLE != 0,
    };
    // Optional flags (relaxed ordering, ...) may be ignored by definition.
    let access = access & !hw::ib_access_flags_IB_ACCESS_OPTIONAL;
    if access & !mr_access_mask(dev) != 0 {
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
    let (out, umem) = dev.shared.exec_create(umem, |lists, _| {
        Ok(hw::ferroce_cmd_reg_mr {
            pbl: lists.add(&pages, pgsz.trailing_zeros())?,
            iova: if zero_based { 0 } else { iova },
            length,
            pdn: pd.pdn,
            access,
            offset: u32::try_from(virt & (pgsz - 1))?,
            key_variant: variant,
            ..Default::default()
        })
    })?;
    let key = out.out[0];
    Ok((
        Mr {
            key,
            mem: MrMem::User {
                _umem: umem,
                pages: u32::try_from(pages.len()).unwrap_or(u32::MAX),
                page_shift: pgsz.trailing_zeros(),
                reg,
            },
        },
        key,
    ))
}

/// `rereg_user_mr`. A change of the PD and/or the rights is made in place
/// with MODIFY_MR (device 1.6), keeping the key, as long as the pages were
/// pinned writable if the new rights write. Anything else (a new
/// translation, write rights over read-only pinned pages, an older device)
/// registers a new MR, with a new key, as mlx5 does when it cannot change
/// an MR in place. Either way a failure leaves the MR as it was.
pub(crate) fn rereg_user_mr(
    dev: &rdma::Device<IbDev>,
    mr: &Mr,
    change: &rdma::MrRereg,
    pd: &crate::ib::Pd,
) -> Result<Option<(Mr, u32)>> {
    let MrMem::User { reg, .. } = &mr.mem else {
        return Err(EINVAL);
    };
    let old_access = reg.access.load(Ordering::Relaxed);
    let access = change.access.unwrap_or(old_access);
    let in_place = change.trans.is_none()
        && dev.caps.device_caps & hw::FERROCE_CAP_MODIFY_MR != 0
        && (reg.writable || access & WRITABLE == 0);
    if !in_place {
        let (start, length, iova) = change.trans.unwrap_or((reg.start, reg.length, reg.iova));
        return reg_user_mr(dev, pd, start, length, iova, access).map(Some);
    }
    let mut cmd = hw::ferroce_cmd_modify_mr {
        key: mr.key,
        ..Default::default()
    };
    if change.pd {
        cmd.flags |= hw::FERROCE_MODIFY_MR_PD;
        cmd.pdn = pd.pdn;
    }
    if change.access.is_some() {
        // As reg_user_mr: optional flags dropped, others refused.
        let dev_access = access & !hw::ib_access_flags_IB_ACCESS_OPTIONAL;
        if dev_access & !mr_access_mask(dev) != 0 {
            return Err(EOPNOTSUPP);
        }
        cmd.flags |= hw::FERROCE_MODIFY_MR_ACCESS;
        cmd.access = dev_access;
    }
    if cmd.flags == 0 {
        return Ok(None);
    }
    dev.shared.exec(&cmd)?;
    reg.access.store(access, Ordering::Relaxed);
    Ok(None)
}

/// The `IB_ACCESS_*` rights an MR may have on this device: `MW_BIND` only
/// with memory windows (device 1.7, `CAP_MW`), `FLUSH_GLOBAL` only with
/// `CAP_FLUSH` (1.8); never `FLUSH_PERSISTENT` (ib_core already refuses it,
/// as the device does not claim persistent memory).
fn mr_access_mask(dev: &rdma::Device<IbDev>) -> u32 {
    let caps = dev.caps.device_caps;
    let mut mask = hw::FERROCE_ACCESS_MR_MASK;
    if caps & hw::FERROCE_CAP_MW != 0 {
        mask |= hw::FERROCE_ACCESS_MW_BIND;
    }
    if caps & hw::FERROCE_CAP_FLUSH != 0 {
        mask |= hw::FERROCE_ACCESS_FLUSH_GLOBAL;
    }
    mask
}

/// `alloc_mw` (device 1.7, `CAP_MW`): a REG_MR of type `MW1` or `MW2`, a
/// key in the MRs' key space that binds give a window later.
pub(crate) fn alloc_mw(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    mw_type: rdma::MwType,
) -> Result<(Mw, u32)> {
    if dev.caps.device_caps & hw::FERROCE_CAP_MW == 0 {
        return Err(EOPNOTSUPP);
    }
    let mr_type = match mw_type {
        rdma::MwType::One => hw::FERROCE_MR_TYPE_MW1,
        rdma::MwType::Two => hw::FERROCE_MR_TYPE_MW2,
    };
    let cmd = hw::ferroce_cmd_reg_mr {
        pdn: pd.pdn,
        key_variant: dev.next_key_variant(),
        mr_type: u8::try_from(mr_type)?,
        ..Default::default()
    };
    let key = dev.shared.exec(&cmd)?.out[0];
    Ok((Mw { key }, key))
}

/// `dealloc_mw`: DEREG_MR of the window, whatever it is bound to.
pub(crate) fn dealloc_mw(dev: &rdma::Device<IbDev>, mw: &Mw) -> Result {
    let cmd = hw::ferroce_cmd_dereg_mr {
        key: mw.key,
        ..Default::default()
    };
    dev.shared.exec_destroy(&cmd)
}

pub(crate) fn dereg_mr(dev: &rdma::Device<IbDev>, mr: &Mr) -> Result {
    let cmd = hw::ferroce_cmd_dereg_mr {
        key: mr.key,
        ..Default::default()
    };
    dev.shared.exec_destroy(&cmd)
}

/// `create_ah`: the device keeps the address vector; UD WQEs name it.
pub(crate) fn create_ah(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    attr: &AhAttr<'_>,
    udata: Option<&mut UData<'_>>,
) -> Result<Ah> {
    check_path(dev, None, attr)?;
    let cmd = hw::ferroce_cmd_create_ah {
        pdn: pd.pdn,
        av: av_of(attr)?,
        ..Default::default()
    };
    let ah = Ah {
        ahn: dev.shared.exec(&cmd)?.out[0],
        av: cmd.av,
    };
    if let Some(udata) = udata {
        if let Err(e) = udata.respond(&hw::ferroce_uresp_create_ah {
            ahn: ah.ahn,
            ..Default::default()
        }) {
            // The caller sees why the command failed. A refused destroy
            // is logged by `exec_destroy`; that AH then only holds a
            // device slot until the next reset.
            return match destroy_ah(dev, &ah) {
                Ok(()) | Err(_) => Err(e),
            };
        }
    }
    Ok(ah)
}

pub(crate) fn destroy_ah(dev: &rdma::Device<IbDev>, ah: &Ah) -> Result {
    if ah.ahn == 0 {
        // A kernel AH: the device never knew it.
        return Ok(());
    }
    let cmd = hw::ferroce_cmd_destroy_ah {
        ahn: ah.ahn,
        ..Default::default()
    };
    dev.shared.exec_destroy(&cmd)
}

/// `create_cq` of a kernel CQ: the ring in coherent memory, the record
/// from the device's pool, doorbells through the kernel page.
pub(crate) fn create_kernel_cq(
    dev: &rdma::Device<IbDev>,
    cqe: u32,
    comp_vector: u32,
) -> Result<(Cq, u32, u32)> {
    if comp_vector >= dev.num_ceqs {
        return Err(EINVAL);
    }
    // A CQ holds `depth` CQEs (device.rst, "CQ ring, overflow").
    let depth = cqe.max(2).checked_next_power_of_two().ok_or(EINVAL)?;
    if depth > dev.caps.max_cqe {
        return Err(EINVAL);
    }
    // The ring's indices are 16-bit: `EINVAL` beyond.
    let (ring, pages) = KernelCq::new(dev, u16::try_from(depth)?)?;
    let (out, ring) = dev.shared.exec_create(ring, |lists, ring| {
        Ok(hw::ferroce_cmd_create_cq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            dbrec_addr: ring.dbrec_addr(),
            depth,
            eqn: comp_vector + 1,
            db_page: KERNEL_DB_PAGE,
            ..Default::default()
        })
    })?;
    let cq = Cq {
        cqn: out.out[0],
        depth: AtomicU32::new(depth),
        eqn: comp_vector + 1,
        mem: CqMem::Kernel(ring),
    };
    let cqn = cq.cqn;
    Ok((cq, cqn, depth))
}

/// The doorbell page of kernel queues (device.rst, "Doorbell pages").
const KERNEL_DB_PAGE: u32 = 0;
const _: () = assert!(KERNEL_DB_PAGE < hw::FERROCE_DB_KERNEL_PAGES);

/// The smallest `shift` in `min..=max` with `1 << shift >= bytes`.
pub(crate) fn stride_shift(bytes: u32, min: u32, max: u32) -> Result<u32> {
    let shift = bytes
        .max(1)
        .checked_next_power_of_two()
        .ok_or(EINVAL)?
        .trailing_zeros()
        .max(min);
    if shift > max {
        return Err(EINVAL);
    }
    Ok(shift)
}

/// The rings a kernel QP needs for what its consumer asks.
fn kernel_qp_geometry(
    dev: &rdma::Device<IbDev>,
    init: &QpInit<'_, Cq, crate::ib::Pd, Srq>,
) -> Result<QpGeometry> {
    let c = &dev.caps;
    let cap = &*init.cap;
    let datagram = matches!(init.qp_type, QpType::Ud | QpType::Gsi);
    let data = if datagram {
        hw::FERROCE_SQ_WQE_AV_DATA_OFFSET
    } else {
        hw::FERROCE_SQ_WQE_DATA_OFFSET
    };
    if cap.max_send_sge > c.max_sge || cap.max_recv_sge > c.max_sge {
        return Err(EINVAL);
    }
    if cap.max_inline_data > c.max_inline {
        return Err(EINVAL);
    }
    // Room for a REG_MR's page list on RC, one SGE at least.
    let room = (cap.max_send_sge.max(1) * 16).max(cap.max_inline_data);
    let sq_shift = stride_shift(
        data + room,
        hw::FERROCE_SQ_WQE_SHIFT_MIN,
        hw::FERROCE_SQ_WQE_SHIFT_MAX,
    )?;
    let sq_room = (1 << sq_shift) - data;
    // A consumer may ask for any count: `EINVAL` past 2^31, not an overflow.
    let depth = |wr: u32| wr.max(1).checked_next_power_of_two().ok_or(EINVAL);
    let sq_depth = depth(cap.max_send_wr)?;
    let (rq_depth, rq_shift) = if cap.max_recv_wr == 0 {
        (0, 0)
    } else {
        (
            depth(cap.max_recv_wr)?,
            stride_shift(
                hw::FERROCE_RQ_WQE_DATA_OFFSET + cap.max_recv_sge.max(1) * 16,
                hw::FERROCE_RQ_WQE_SHIFT_MIN,
                hw::FERROCE_RQ_WQE_SHIFT_MAX,
            )?,
        )
    };
    if sq_depth > c.max_qp_wr || rq_depth > c.max_qp_wr {
        return Err(EINVAL);
    }
    Ok(QpGeometry {
        // The rings' indices are 16-bit: `EINVAL` beyond.
        sq_depth: u16::try_from(sq_depth)?,
        sq_shift,
        rq_depth: u16::try_from(rq_depth)?,
        rq_shift,
        max_send_sge: (sq_room / 16).min(c.max_sge),
        max_recv_sge: if rq_depth == 0 {
            0
        } else {
            rq_wqe_sges(rq_shift, c.max_sge)
        },
        max_inline: sq_room.min(c.max_inline),
        sq_data_offset: data,
        datagram,
        atomics: init.qp_type == QpType::Rc && c.device_caps & hw::FERROCE_CAP_ATOMIC != 0,
    })
}

/// `create_qp` of a kernel RC, UD or GSI QP.
///
/// Not UC: no kernel consumer creates UC QPs (rdma_cm has no UC port
/// space, ULPs use RC, UD and GSI), so the kernel send path has no UC
/// branch (opcode filter, geometry) that anything could exercise.
pub(crate) fn create_kernel_qp(
    dev: &rdma::Device<IbDev>,
    init: &mut QpInit<'_, Cq, crate::ib::Pd, Srq>,
) -> Result<(Qp, u32)> {
    if init.qp_type == QpType::Uc {
        return Err(EOPNOTSUPP);
    }
    let (flags, srqn) = qp_flags(init)?;
    if init.srq.is_some() {
        // Receives come from the SRQ: no RQ of its own.
        init.cap.max_recv_wr = 0;
        init.cap.max_recv_sge = 0;
    }
    if init.send_cq.kernel().is_none() || init.recv_cq.kernel().is_none() {
        return Err(EINVAL);
    }
    let geo = kernel_qp_geometry(dev, init)?;
    let path = PathDiag::new()?;
    let (rings, mem) = KernelQp::new(dev, geo)?;
    let (out, (rings, _)) = dev.shared.exec_create((rings, mem), |lists, (_, mem)| {
        let mut cmd = hw::ferroce_cmd_create_qp {
            sq_buf: lists.add(&mem.sq_pages, PAGE_SHIFT)?,
            sq_dbrec_addr: mem.sq_dbrec,
            pdn: init.pd.pdn,
            send_cqn: init.send_cq.cqn,
            recv_cqn: init.recv_cq.cqn,
            sq_depth: u32::from(geo.sq_depth),
            rq_depth: u32::from(geo.rq_depth),
            db_page: KERNEL_DB_PAGE,
            max_inline: geo.max_inline,
            qp_type: hw_qp_type(init.qp_type),
            sq_wqe_shift: u8::try_from(geo.sq_shift)?,
            rq_wqe_shift: u8::try_from(geo.rq_shift)?,
            flags,
            srqn,
            ..Default::default()
        };
        if let Some(pages) = mem.rq_pages.as_ref() {
            cmd.rq_buf = lists.add(pages, PAGE_SHIFT)?;
            cmd.rq_dbrec_addr = mem.rq_dbrec;
        }
        Ok(cmd)
    })?;
    let granted = QpCaps {
        max_send_wr: u32::from(geo.sq_depth),
        max_recv_wr: u32::from(geo.rq_depth),
        max_send_sge: geo.max_send_sge,
        max_recv_sge: geo.max_recv_sge,
        max_inline: geo.max_inline,
    };
    set_cap(init.cap, &granted);
    let qp = Qp {
        qpn: out.out[0],
        qp_type: init.qp_type,
        cap: granted,
        mem: QpMem::Kernel(rings),
        path,
    };
    let qpn = qp.qpn;
    Ok((qp, qpn))
}

/// `post_send` on a kernel QP.
pub(crate) fn post_send(
    dev: &rdma::Device<IbDev>,
    qp: &Qp,
    wrs: &mut rdma::SendWrs<'_, IbDev>,
) -> Result {
    qp.kernel().ok_or(EINVAL)?.post_send(dev, qp.qpn, wrs)
}

/// `post_recv` on a kernel QP.
pub(crate) fn post_recv(dev: &rdma::Device<IbDev>, qp: &Qp, wrs: &mut rdma::RecvWrs<'_>) -> Result {
    qp.kernel().ok_or(EINVAL)?.post_recv(dev, qp.qpn, wrs)
}

/// The QP access flags for the device. Optional flags, and permissions for
/// remote operations the QP never executes (memory-window binds; FLUSH,
/// which ib_core grants with `IB_ACCESS_FLUSH_*`, except on RC QPs of a
/// device with `CAP_FLUSH`, 1.8), allow nothing and are dropped, as mlx5
/// does; the device refuses any other bit it does not know. A UC QP has no
/// READ and no atomic (IBTA 9.8): ib_core lets applications ask for them
/// anyway (perftest, pyverbs and rdma-core's examples set them for every
/// connected QP) and they allow nothing, so they are dropped too (the
/// device refuses them on UC).
fn qp_access(access: u32, qp_type: QpType, device_caps: u32) -> u32 {
    let mut dropped =
        hw::ib_access_flags_IB_ACCESS_OPTIONAL | hw::ib_access_flags_IB_ACCESS_MW_BIND;
    if qp_type == QpType::Uc {
        dropped |=
            hw::ib_access_flags_IB_ACCESS_REMOTE_READ | hw::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    }
    if qp_type != QpType::Rc || device_caps & hw::FERROCE_CAP_FLUSH == 0 {
        dropped |= hw::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL
            | hw::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
    }
    access & !dropped
}

/// The access flags the device takes (optional flags may be ignored by
/// definition); `EOPNOTSUPP` for others.
fn mr_access(access: u32) -> Result<u32> {
    let access = access & !hw::ib_access_flags_IB_ACCESS_OPTIONAL;
    if access & !hw::FERROCE_ACCESS_QP_MASK != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(access)
}

/// `get_dma_mr`: a physical MR of the PD (device.rst, REG_MR types).
pub(crate) fn get_dma_mr(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    access: u32,
) -> Result<(Mr, u32)> {
    if dev.caps.device_caps & hw::FERROCE_CAP_PHYS_MR == 0 {
        return Err(EOPNOTSUPP);
    }
    let cmd = hw::ferroce_cmd_reg_mr {
        pdn: pd.pdn,
        access: mr_access(access)?,
        key_variant: dev.next_key_variant(),
        mr_type: u32_into_u8::<{ hw::FERROCE_MR_TYPE_PHYS }>(),
        ..Default::default()
    };
    let key = dev.shared.exec(&cmd)?.out[0];
    Ok((
        Mr {
            key,
            mem: MrMem::Dma,
        },
        key,
    ))
}

/// `alloc_mr` of a fast-register MR with room for `max_pages` pages.
pub(crate) fn alloc_mr(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    max_pages: u32,
) -> Result<(Mr, u32)> {
    if dev.caps.device_caps & hw::FERROCE_CAP_MEM_MGT_EXT == 0 {
        return Err(EOPNOTSUPP);
    }
    if max_pages == 0 || max_pages > hw::FERROCE_FAST_REG_MAX_PAGES {
        return Err(EINVAL);
    }
    let len = usize::from_safe_cast(max_pages);
    let pages = Coherent::<u64>::zeroed_slice(dev.dma_device(), len, GFP_KERNEL)?;
    let cmd = hw::ferroce_cmd_reg_mr {
        pdn: pd.pdn,
        key_variant: dev.next_key_variant(),
        mr_type: u32_into_u8::<{ hw::FERROCE_MR_TYPE_FAST_REG }>(),
        max_pages,
        ..Default::default()
    };
    let key = match dev.shared.exec(&cmd) {
        Ok(out) => out.out[0],
        Err(e) => {
            dev.shared.release_after_failure(pages);
            return Err(e);
        }
    };
    let mr = Mr {
        key,
        mem: MrMem::FastReg(FastRegPages {
            pages,
            max: max_pages,
            count: AtomicU32::new(0),
        }),
    };
    Ok((mr, key))
}

/// `map_mr_sg` begins: the page list is empty again.
pub(crate) fn map_mr_sg_start(mr: &Mr) {
    if let MrMem::FastReg(f) = &mr.mem {
        f.count.store(0, Ordering::Relaxed);
    }
}

/// `map_mr_sg` adds a page; `ENOMEM` when the MR is full.
pub(crate) fn map_mr_sg_page(mr: &Mr, addr: u64) -> Result {
    let MrMem::FastReg(f) = &mr.mem else {
        return Err(EINVAL);
    };
    let n = f.count.load(Ordering::Relaxed);
    if n >= f.max {
        return Err(ENOMEM);
    }
    io_write!(&f.pages, [try: usize::from_safe_cast(n)], addr.to_le());
    f.count.store(n + 1, Ordering::Relaxed);
    Ok(())
}

/// The segment and page list of an `IB_WR_REG_MR` WQE (device.rst, REG_MR
/// WQE).
pub(crate) fn reg_mr_wqe(
    reg: &RegSeg<'_, Mr>,
) -> Result<(hw::ferroce_pbl, hw::ferroce_sq_wqe_reg_mr)> {
    let MrMem::FastReg(f) = &reg.mr.mem else {
        return Err(EINVAL);
    };
    let count = f.count.load(Ordering::Relaxed);
    let page_shift = reg.page_size.trailing_zeros();
    if count == 0
        || !reg.page_size.is_power_of_two()
        || !(hw::FERROCE_PAGE_SHIFT_MIN..=hw::FERROCE_PAGE_SHIFT_MAX).contains(&page_shift)
    {
        return Err(EINVAL);
    }
    let pbl = hw::ferroce_pbl {
        addr: f.pages.dma_address(),
        page_count: count,
        page_shift: u8::try_from(page_shift)?,
        level: pbl::LEVEL_1,
        ..Default::default()
    };
    let seg = hw::ferroce_sq_wqe_reg_mr {
        iova: reg.iova,
        length: reg.length,
        key: reg.key,
        access: mr_access(reg.access)?,
        ..Default::default()
    };
    Ok((pbl, seg))
}

/// `create_ah` for a kernel consumer: only the address vector, kept for the
/// WQEs (no admin command: this runs in atomic context).
pub(crate) fn create_kernel_ah(attr: &AhAttr<'_>) -> Result<Ah> {
    Ok(Ah {
        ahn: 0,
        av: av_of(attr)?,
    })
}

/// Driver attributes of restrack entries (`rdma res show qp|cq|mr -dd`).
impl Qp {
    /// The device's QP number, the ring depths and, for a kernel QP, the
    /// producer and consumer indices (a user QP's live in the process) or,
    /// for a user QP, its doorbell page.
    pub(crate) fn fill_res(&self, msg: &mut rdma::ResMsg<'_>) -> Result {
        msg.put_u32(c"qpn", self.qpn)?;
        msg.put_u32(c"sq_depth", self.cap.max_send_wr)?;
        msg.put_u32(c"rq_depth", self.cap.max_recv_wr)?;
        match &self.mem {
            QpMem::Kernel(k) => {
                let ((sq_pi, sq_ci), (rq_pi, rq_ci)) = k.indices();
                msg.put_u32(c"sq_pi", sq_pi.into())?;
                msg.put_u32(c"sq_ci", sq_ci.into())?;
                msg.put_u32(c"rq_pi", rq_pi.into())?;
                msg.put_u32(c"rq_ci", rq_ci.into())
            }
            QpMem::User { db_page, .. } => msg.put_u32(c"db_page", *db_page),
        }
    }
}

impl Cq {
    /// The device's CQ number, depth and EQ, and the consumer index of a
    /// kernel CQ (or the doorbell page of a user CQ).
    pub(crate) fn fill_res(&self, msg: &mut rdma::ResMsg<'_>) -> Result {
        msg.put_u32(c"cqn", self.cqn)?;
        msg.put_u32(c"cq_depth", self.depth.load(Ordering::Relaxed))?;
        msg.put_u32(c"eqn", self.eqn)?;
        match &self.mem {
            CqMem::Kernel(k) => msg.put_u32(c"ci", k.ci().into()),
            CqMem::User { db_page, .. } => msg.put_u32(c"db_page", *db_page),
        }
    }
}

impl Mr {
    /// The key, the kind of MR and its pages.
    pub(crate) fn fill_res(&self, msg: &mut rdma::ResMsg<'_>) -> Result {
        msg.put_u32_hex(c"key", self.key)?;
        match &self.mem {
            MrMem::User {
                pages, page_shift, ..
            } => {
                msg.put_str(c"mr_type", c"user")?;
                msg.put_u32(c"pages", *pages)?;
                msg.put_u32(c"page_size", 1u32.checked_shl(*page_shift).unwrap_or(0))
            }
            MrMem::Dma => msg.put_str(c"mr_type", c"phys"),
            MrMem::FastReg(f) => {
                msg.put_str(c"mr_type", c"fast_reg")?;
                msg.put_u32(c"pages", f.count.load(Ordering::Relaxed))?;
                msg.put_u32(c"max_pages", f.max)
            }
        }
    }
}
