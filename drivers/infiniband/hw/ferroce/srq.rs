// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`Documentation/ferroce/device.rst`, "Shared
//! receive queues"): user SRQs, whose ring and record live in the process,
//! and kernel SRQs (nvmet-rdma's `use_srq`), whose ring is the driver's.
//! An SRQ has no doorbell: the device reads the producer index from the
//! record and writes its consumer index back into it.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    ib::{
        IbDev,
        Pd, //
    },
    kqueue::KernelSrq,
    rdma::{
        self,
        RecvWrs,
        SrqAttr,
        UData,
        Umem, //
    },
    verbs::{
        pin_dbrec,
        pin_ring,
        rq_wqe_sges,
        stride_shift,
        user_wq_len,
        UContext,
        Wq,
        PAGE_SHIFT, //
    }, //
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

/// A user SRQ's ring (which a resize replaces) and record, pinned.
struct UserRing {
    /// WQEs the ring holds.
    depth: u32,
    _ring: Umem,
    _dbrec: Umem,
}

/// Where an SRQ's ring and record live.
enum SrqMem {
    /// In the process; the lock serialises resizes.
    User(Pin<KBox<Mutex<UserRing>>>),
    /// In coherent memory of the driver (never resized).
    Kernel {
        ring: Pin<KBox<KernelSrq>>,
        depth: u32,
    },
}

/// Driver state of an SRQ.
pub(crate) struct Srq {
    pub(crate) srqn: u32,
    /// The PD, which QPs attached to the SRQ must share.
    pub(crate) pdn: u32,
    /// log2 of the WQE stride.
    shift: u32,
    /// SGEs per WQE.
    max_sge: u32,
    mem: SrqMem,
}

impl Srq {
    /// WQEs the ring holds now.
    fn depth(&self) -> u32 {
        match &self.mem {
            SrqMem::User(u) => u.lock().depth,
            SrqMem::Kernel { depth, .. } => *depth,
        }
    }
}

/// What the caller asked for, checked against the device's limits (SRQs
/// have the QP limits, device.rst "QUERY_CAPS").
fn check_attr(dev: &rdma::Device<IbDev>, attr: &SrqAttr) -> Result {
    let c = &dev.caps;
    if c.device_caps & hw::FERROCE_CAP_SRQ == 0 {
        return Err(EOPNOTSUPP);
    }
    if attr.max_wr == 0 || attr.max_wr > c.max_qp_wr || attr.max_sge > c.max_sge {
        return Err(EINVAL);
    }
    Ok(())
}

/// `create_srq`: a user SRQ from the provider's ring and record, or a
/// kernel SRQ.
pub(crate) fn create_srq(
    dev: &rdma::Device<IbDev>,
    pd: &Pd,
    attr: &mut SrqAttr,
    user: Option<(&UContext, &mut UData<'_>)>,
) -> Result<(Srq, u32)> {
    check_attr(dev, attr)?;
    // The limit is armed by modify_srq only: the one creation carries is
    // ignored (ibv_create_srq(3), ferroce-abi.h), CREATE_SRQ's is 0.
    match user {
        Some((_, udata)) => create_user_srq(dev, pd, attr, udata),
        None => create_kernel_srq(dev, pd, attr),
    }
}

fn create_user_srq(
    dev: &rdma::Device<IbDev>,
    pd: &Pd,
    attr: &mut SrqAttr,
    udata: &mut UData<'_>,
) -> Result<(Srq, u32)> {
    let c = &dev.caps;
    let req: hw::ferroce_ureq_create_srq = udata.read()?;
    if req.comp_mask != 0 || req.reserved.iter().any(|&b| b != 0) || req.reserved2 != 0 {
        return Err(EINVAL);
    }
    let shift = u32::from(req.wqe_shift);
    let len = user_wq_len(dev, Wq::Rq, req.depth, attr.max_wr, shift)?;
    let max_sge = rq_wqe_sges(shift, c.max_sge);
    if attr.max_sge > max_sge {
        return Err(EINVAL);
    }
    let (ring, pages) = pin_ring(dev, req.buf_va, len, 0)?;
    // The device writes its consumer index into the record.
    let (dbrec, dbrec_addr) = pin_dbrec(dev, req.dbrec_va, rdma::umem::access::LOCAL_WRITE)?;
    // Allocated before the device has the SRQ: nothing fails after it.
    let user = KBox::pin_init(
        new_mutex!(UserRing {
            depth: req.depth,
            _ring: ring,
            _dbrec: dbrec,
        }),
        GFP_KERNEL,
    )?;
    let (out, user) = dev.shared.exec_create(user, |lists, _| {
        Ok(hw::ferroce_cmd_create_srq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            dbrec_addr,
            pdn: pd.pdn,
            depth: req.depth,
            wqe_shift: req.wqe_shift,
            ..Default::default()
        })
    })?;
    let srq = Srq {
        srqn: out.out[0],
        pdn: pd.pdn,
        shift,
        max_sge,
        mem: SrqMem::User(user),
    };
    if let Err(e) = udata.respond(&hw::ferroce_uresp_create_srq {
        srqn: srq.srqn,
        ..Default::default()
    }) {
        rdma::destroy_or_leak(srq, |srq| destroy_srq(dev, srq));
        return Err(e);
    }
    attr.max_wr = req.depth;
    attr.max_sge = max_sge;
    let srqn = srq.srqn;
    Ok((srq, srqn))
}

fn create_kernel_srq(dev: &rdma::Device<IbDev>, pd: &Pd, attr: &mut SrqAttr) -> Result<(Srq, u32)> {
    let c = &dev.caps;
    let depth = attr.max_wr.checked_next_power_of_two().ok_or(EINVAL)?;
    if depth > c.max_qp_wr {
        return Err(EINVAL);
    }
    let shift = stride_shift(
        hw::FERROCE_RQ_WQE_DATA_OFFSET + attr.max_sge.max(1) * 16,
        Wq::Rq,
    )?;
    let max_sge = rq_wqe_sges(shift, c.max_sge);
    let (ring, pages, dbrec_addr) = KernelSrq::new(dev, u16::try_from(depth)?, shift, max_sge)?;
    let (out, ring) = dev.shared.exec_create(ring, |lists, _| {
        Ok(hw::ferroce_cmd_create_srq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            dbrec_addr,
            pdn: pd.pdn,
            depth,
            wqe_shift: u8::try_from(shift)?,
            ..Default::default()
        })
    })?;
    attr.max_wr = depth;
    attr.max_sge = max_sge;
    let srq = Srq {
        srqn: out.out[0],
        pdn: pd.pdn,
        shift,
        max_sge,
        mem: SrqMem::Kernel { ring, depth },
    };
    let srqn = srq.srqn;
    Ok((srq, srqn))
}

/// `modify_srq`: resizes a user SRQ, then (re)arms the limit event.
pub(crate) fn modify_srq(
    dev: &rdma::Device<IbDev>,
    srq: &Srq,
    max_wr: Option<u32>,
    limit: Option<u32>,
    udata: Option<&mut UData<'_>>,
) -> Result {
    if let Some(max_wr) = max_wr {
        resize_srq(dev, srq, max_wr, udata)?;
    }
    let Some(limit) = limit else {
        return Ok(());
    };
    if limit > srq.depth() {
        return Err(EINVAL);
    }
    dev.shared.exec(&hw::ferroce_cmd_modify_srq {
        srqn: srq.srqn,
        limit,
        ..Default::default()
    })?;
    Ok(())
}

/// Gives a user SRQ the ring the provider prepared (device.rst, "Shared
/// receive queues", "Resizing"): it copied the WQEs the device has not
/// taken into it and posts nothing until this returns. Kernel SRQs are
/// not resized: no kernel consumer asks for it.
fn resize_srq(
    dev: &rdma::Device<IbDev>,
    srq: &Srq,
    max_wr: u32,
    udata: Option<&mut UData<'_>>,
) -> Result {
    let (SrqMem::User(user), Some(udata)) = (&srq.mem, udata) else {
        return Err(EOPNOTSUPP);
    };
    let req: hw::ferroce_ureq_modify_srq = udata.read()?;
    if req.comp_mask != 0 {
        return Err(EINVAL);
    }
    if max_wr == 0 {
        return Err(EINVAL);
    }
    let len = user_wq_len(dev, Wq::Rq, req.depth, max_wr, srq.shift)?;
    let mut cur = user.lock();
    let (ring, pages) = pin_ring(dev, req.buf_va, len, 0)?;
    let r = dev.shared.exec_with_lists(|lists| {
        Ok(hw::ferroce_cmd_resize_srq {
            buf: lists.add(&pages, PAGE_SHIFT)?,
            srqn: srq.srqn,
            depth: req.depth,
            wqe_shift: u8::try_from(srq.shift)?,
            ..Default::default()
        })
    });
    if let Err(e) = r {
        dev.shared.release_after_failure(ring);
        return Err(e);
    }
    // The device reads the new ring only; the old one is unpinned here.
    cur.depth = req.depth;
    cur._ring = ring;
    Ok(())
}

/// `query_srq`: the capacities and the limit still armed on the device.
pub(crate) fn query_srq(dev: &rdma::Device<IbDev>, srq: &Srq) -> Result<SrqAttr> {
    let out = dev.shared.exec(&hw::ferroce_cmd_query_srq {
        srqn: srq.srqn,
        ..Default::default()
    })?;
    Ok(SrqAttr {
        max_wr: srq.depth(),
        max_sge: srq.max_sge,
        limit: out.out[hw::FERROCE_SRQ_OUT_LIMIT as usize],
    })
}

pub(crate) fn destroy_srq(dev: &rdma::Device<IbDev>, srq: &Srq) -> Result {
    dev.shared.exec_destroy(&hw::ferroce_cmd_destroy_srq {
        srqn: srq.srqn,
        ..Default::default()
    })
}

/// `post_srq_recv` on a kernel SRQ.
pub(crate) fn post_srq_recv(srq: &Srq, wrs: &mut RecvWrs<'_>) -> Result {
    match &srq.mem {
        SrqMem::Kernel { ring, .. } => ring.post(wrs),
        SrqMem::User(_) => Err(EINVAL),
    }
}

impl Srq {
    /// The device's SRQ number, its depth and, for a kernel SRQ, the
    /// producer and the device's consumer index.
    pub(crate) fn fill_res(&self, msg: &mut rdma::ResMsg<'_>) -> Result {
        msg.put_u32(c"srqn", self.srqn)?;
        msg.put_u32(c"srq_depth", self.depth())?;
        if let SrqMem::Kernel { ring, .. } = &self.mem {
            let (pi, ci) = ring.indices();
            msg.put_u32(c"pi", pi.into())?;
            msg.put_u32(c"ci", ci.into())?;
        }
        Ok(())
    }
}
