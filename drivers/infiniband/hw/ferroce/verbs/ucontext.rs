// SPDX-License-Identifier: GPL-2.0

//! User contexts, and the doorbell pages of BAR2 handed out to them: a
//! context gets a group of pages it alone can map and ring through.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    ib::IbDev,
    rdma::{
        self,
        UData, //
    }, //
};
use core::{
    num::NonZeroU32,
    sync::atomic::{
        AtomicU32,
        Ordering, //
    }, //
};
use kernel::{
    num::casts::FromSafeCast,
    prelude::*, //
};

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
