// SPDX-License-Identifier: GPL-2.0

//! Memory regions (user, DMA and fast-register) and memory windows.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    ib::IbDev,
    pbl,
    rdma::{
        self,
        RegSeg,
        Umem, //
    }, //
};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::{
    dma::Coherent,
    io::io_write,
    num::casts::{
        u32_into_u8,
        FromSafeCast, //
    },
    prelude::*, //
};

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
