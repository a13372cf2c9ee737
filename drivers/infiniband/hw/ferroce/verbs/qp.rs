// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: create, modify, query and destroy (user and kernel),
//! multicast attach and detach, and posting to kernel QPs.

#![forbid(unsafe_code)]

use super::{
    ah::{
        av_of,
        check_path, //
    },
    cq::Cq,
    pin_dbrec,
    pin_ring,
    rq_wqe_sges,
    stride_shift,
    ucontext::UContext,
    user_wq_len,
    Wq,
    KERNEL_DB_PAGE,
    PAGE_SHIFT, //
};
use crate::{
    bindings as hw,
    diag::PathDiag,
    ib::IbDev,
    kqueue::{
        KernelQp,
        QpGeometry, //
    },
    rdma::{
        self,
        QpAttr,
        QpInit,
        QpType,
        UData,
        Umem, //
    },
    srq::Srq, //
};
use kernel::{
    num::casts::u32_into_u8,
    prelude::*, //
};

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
    let sq_len = user_wq_len(dev, Wq::Sq, req.sq_depth, cap.max_send_wr, sq_shift)?;
    let sq_room = (1u32 << sq_shift) - hw::FERROCE_SQ_WQE_DATA_OFFSET;
    let max_send_sge = (sq_room / 16).min(c.max_sge);
    let max_inline = sq_room.min(c.max_inline);
    if cap.max_send_sge > max_send_sge || cap.max_inline_data > max_inline {
        return Err(EINVAL);
    }
    // RQ: absent (all zero) or as the SQ.
    let rq_shift = u32::from(req.rq_wqe_shift);
    let (rq_len, max_recv_sge) = if req.rq_depth == 0 {
        if rq_shift != 0 || req.rq_buf_va != 0 || req.rq_dbrec_va != 0 || cap.max_recv_wr != 0 {
            return Err(EINVAL);
        }
        (0, 0)
    } else {
        let len = user_wq_len(dev, Wq::Rq, req.rq_depth, cap.max_recv_wr, rq_shift)?;
        if init.srq.is_some() {
            return Err(EINVAL);
        }
        let m = rq_wqe_sges(rq_shift, c.max_sge);
        if cap.max_recv_sge > m {
            return Err(EINVAL);
        }
        (len, m)
    };

    let (sq, sq_pages) = pin_ring(dev, req.sq_buf_va, sq_len, 0)?;
    let (sq_dbrec, sq_dbrec_addr) = pin_dbrec(dev, req.sq_dbrec_va, 0)?;
    let rq = if req.rq_depth != 0 {
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
    let sq_shift = stride_shift(data + room, Wq::Sq)?;
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
                Wq::Rq,
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
