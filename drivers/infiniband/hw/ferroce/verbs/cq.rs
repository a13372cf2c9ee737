// SPDX-License-Identifier: GPL-2.0

//! Completion queues: user CQs, whose ring and doorbell record are pinned
//! in the process, and kernel CQs, whose rings are coherent memory of the
//! driver (`kqueue.rs`).

#![forbid(unsafe_code)]

use super::{
    is_pow2_in,
    pin_dbrec,
    pin_ring,
    ucontext::UContext,
    KERNEL_DB_PAGE,
    PAGE_SHIFT, //
};
use crate::{
    bindings as hw,
    ib::IbDev,
    kqueue::KernelCq,
    rdma::{
        self,
        UData,
        Umem, //
    }, //
};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

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

/// Checks the depth of a user CQ's ring, which holds `depth` CQEs
/// (device.rst, "CQ ring, overflow"): a power of two from 2 to `max_cqe`,
/// room for the `cqe` asked for. Pins the ring at `va` and returns it with
/// its pages.
fn pin_user_ring(
    dev: &rdma::Device<IbDev>,
    depth: u32,
    cqe: u32,
    va: u64,
) -> Result<(Umem, KVVec<u64>)> {
    if !is_pow2_in(depth, 2, dev.caps.max_cqe) || depth < cqe {
        return Err(EINVAL);
    }
    let len = u64::from(depth) * u64::from(hw::FERROCE_CQE_SIZE);
    pin_ring(dev, va, len, rdma::umem::access::LOCAL_WRITE)
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
    if comp_vector >= dev.num_ceqs {
        return Err(EINVAL);
    }
    let depth = req.depth;
    let (ring, pages) = pin_user_ring(dev, depth, cqe, req.buf_va)?;
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
    let (new, pages) = pin_user_ring(dev, depth, cqe, req.buf_va)?;
    let mut cur = ring.lock();
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
