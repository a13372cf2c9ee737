// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` trampolines of the object verbs (CQ, QP, MR, AH, MW):
//! ib_core's calls turned into calls of the [`Driver`] methods.

use super::{
    device::{
        bundle_udata,
        ctx_of,
        destroy_or_leak,
        ptr_result,
        Adapter,
        AhObj,
        CqObj,
        Device,
        Driver,
        MrObj,
        MrRereg,
        PdObj,
        QpAttrOut,
        QpObj, //
    },
    objects::{
        AhAttr,
        QpAttr,
        QpInit,
        QpType, //
    },
    srq::srq_data,
    udata::UData, //
};
use crate::bindings as b;
use core::ffi::c_int;
use kernel::{
    error::from_result,
    prelude::*, //
};

/// Trampolines of the object verbs (CQ, QP, MR, AH); user objects only.
impl<T: Driver> Adapter<T> {
    pub(super) extern "C" fn create_user_cq(
        ibcq: *mut b::ib_cq,
        attr: *const b::ib_cq_init_attr,
        attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: ib_core allocated `size_ib_cq` = `size_of::<CqObj<T>>()`
        // bytes for `ibcq` and set its `device`; `attr` is valid for the call;
        // `attrs` is the command's bundle (or NULL), whose driver udata is
        // ours for the call.
        let (dev, attr, udata) = unsafe {
            let udata = if attrs.is_null() {
                None
            } else {
                UData::from_raw(bundle_udata(attrs))
            };
            (Device::<T>::from_raw((*ibcq).device), &*attr, udata)
        };
        from_result(|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            if attr.flags != 0 {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: a uverbs command of our device, in a context of ours.
            let ctx = unsafe { ctx_of::<T>(&udata) }?;
            let created = T::create_cq(dev, ctx, attr.cqe, attr.comp_vector, &mut udata)?;
            // SAFETY: `ibcq` is the CQ being created, of `size_ib_cq` bytes.
            unsafe { Self::publish_cq(dev, ibcq, created) }?;
            Ok(0)
        })
    }

    /// Puts a created CQ's state in place and the CQ in the [`CqTable`];
    /// if that fails, destroys the device's CQ again.
    ///
    /// # Safety
    ///
    /// `ibcq` must be the CQ of a `create_cq` call of a device of ours, of
    /// `size_of::<CqObj<T>>()` bytes, whose state is not written yet.
    pub(super) unsafe fn publish_cq(
        dev: &Device<T>,
        ibcq: *mut b::ib_cq,
        (data, id, cqe): (T::Cq, u32, u32),
    ) -> Result {
        if let Err(e) = dev.cqs.insert(id, ibcq) {
            destroy_or_leak(data, |d| T::destroy_cq(dev, d));
            return Err(e);
        }
        let obj = ibcq.cast::<CqObj<T>>();
        // SAFETY: per the safety requirements `obj` is valid for writes;
        // `cqe` is ib_core's to read. No completion event reaches the CQ
        // before it is armed, which needs the state written here.
        unsafe {
            (*obj).data.write((id, data));
            (*ibcq).cqe = i32::try_from(cqe).unwrap_or(i32::MAX);
        }
        Ok(())
    }

    pub(super) extern "C" fn resize_user_cq(
        ibcq: *mut b::ib_cq,
        cqe: core::ffi::c_uint,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: a CQ of ours whose creation succeeded, alive for the call
        // (uverbs holds its object); `udata` is the command's driver data.
        let (dev, cq, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
                &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let mut udata = udata.ok_or(EINVAL)?;
            let n = T::resize_user_cq(dev, cq, cqe, &mut udata)?;
            // SAFETY: `cqe` is ib_core's plain field of the live CQ, which it
            // reads back after the call.
            unsafe { (*ibcq).cqe = c_int::try_from(n)? };
            Ok(0)
        })
    }

    pub(super) extern "C" fn destroy_cq(ibcq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibcq.cast::<CqObj<T>>();
        // SAFETY: ib_core calls this once for a CQ whose creation succeeded
        // (`data` initialised, moved out here and never read again) and
        // frees it afterwards.
        let (dev, (id, data)) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
                (*obj).data.assume_init_read(),
            )
        };
        // Removal from the table comes first, so no completion handler call
        // uses the CQ after it.
        dev.cqs.remove(id);
        // A CQ ib_core cannot destroy would leak its uobject forever; the
        // driver state is leaked instead (see `Driver::destroy_cq`).
        destroy_or_leak(data, |d| T::destroy_cq(dev, d));
        0
    }

    pub(super) extern "C" fn create_qp(
        ibqp: *mut b::ib_qp,
        init: *mut b::ib_qp_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = ibqp.cast::<QpObj<T>>();
        // SAFETY: ib_core allocated `size_ib_qp` bytes for `ibqp` and set its
        // `device` and `pd`; `init` is valid and ours for the call; `udata`
        // is the command's driver data or NULL.
        let (dev, init, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let qp_type = match init.qp_type {
                b::ib_qp_type_IB_QPT_RC => QpType::Rc,
                b::ib_qp_type_IB_QPT_UC => QpType::Uc,
                b::ib_qp_type_IB_QPT_UD => QpType::Ud,
                b::ib_qp_type_IB_QPT_GSI if udata.is_none() => QpType::Gsi,
                _ => return Err(EOPNOTSUPP),
            };
            if !init.xrcd.is_null() || init.create_flags != 0 {
                return Err(EOPNOTSUPP);
            }
            if !init.srq.is_null() && (!T::HAS_CREATE_SRQ || qp_type == QpType::Gsi) {
                return Err(EOPNOTSUPP);
            }
            if init.send_cq.is_null() || init.recv_cq.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the CQs and the PD of a QP are live objects of our
            // device, created through our ops (so their driver state is
            // initialised), held by ib_core for the call.
            let (send_cq, recv_cq, pd) = unsafe {
                (
                    &(*init.send_cq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                    &(*init.recv_cq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                    (*(*ibqp).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                )
            };
            let srq = if init.srq.is_null() {
                None
            } else {
                // SAFETY: the SRQ of a QP is a live SRQ of our device (only
                // our ops create its SRQs), held by ib_core for the call.
                Some(unsafe { srq_data::<T>(init.srq) })
            };
            let mut qi = QpInit {
                qp_type,
                sq_sig_all: init.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
                cap: &mut init.cap,
                send_cq,
                recv_cq,
                pd,
                srq,
            };
            let (data, qpn) = match udata {
                Some(mut udata) => {
                    // SAFETY: a uverbs command of our device, in a context of
                    // ours.
                    let ctx = unsafe { ctx_of::<T>(&udata) }?;
                    T::create_qp(dev, ctx, &mut qi, &mut udata)?
                }
                None if T::HAS_CREATE_KERNEL_QP => T::create_kernel_qp(dev, &mut qi)?,
                None => return Err(EOPNOTSUPP),
            };
            // The state is in place before the QP is in the table, through
            // which completions and events reach it.
            // SAFETY: `obj` is valid for writes; `qp_num` is ib_core's to read.
            unsafe {
                (*obj).data.write(data);
                (*ibqp).qp_num = qpn;
            }
            if let Err(e) = dev.qps.insert(qpn, ibqp) {
                // SAFETY: written just above, never read again: ib_core
                // frees the QP after a failed create.
                let data = unsafe { (*obj).data.assume_init_read() };
                destroy_or_leak(data, |d| T::destroy_qp(dev, d));
                return Err(e);
            }
            Ok(0)
        })
    }

    pub(super) extern "C" fn modify_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: a QP created by us (`data` initialised), alive for the
        // call; `attr` comes from ib_core's modify path, which holds the
        // source GID attribute of an `IB_QP_AV` change for the call.
        let (dev, data, attr) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                QpAttr::new(&*attr, super::int_bits(mask)),
            )
        };
        from_result(|| T::modify_qp(dev, data, &attr, super::int_bits(mask)).map(|()| 0))
    }

    pub(super) extern "C" fn query_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        init: *mut b::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: a QP created by us, alive for the call; `attr` and `init`
        // are ib_core's output structures, ours for the call.
        let (dev, data, attr, init) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                &mut *attr,
                &mut *init,
            )
        };
        from_result(|| {
            let mut out = QpAttrOut { raw: attr };
            T::query_qp(dev, data, super::int_bits(mask), &mut out, &mut init.cap)?;
            let c = &init.cap;
            out.raw.cap = b::ib_qp_cap {
                max_send_wr: c.max_send_wr,
                max_recv_wr: c.max_recv_wr,
                max_send_sge: c.max_send_sge,
                max_recv_sge: c.max_recv_sge,
                max_inline_data: c.max_inline_data,
                max_rdma_ctxs: c.max_rdma_ctxs,
            };
            // SAFETY: `ibqp` is alive; these are plain fields ib_core set.
            unsafe {
                init.qp_type = (*ibqp).qp_type;
                init.send_cq = (*ibqp).send_cq;
                init.recv_cq = (*ibqp).recv_cq;
            }
            Ok(0)
        })
    }

    /// The QP and group of an `attach_mcast` / `detach_mcast` call.
    ///
    /// # Safety
    ///
    /// `ibqp` must be a QP created by us and `gid` a GID, both alive for `'a`.
    unsafe fn mcast_args<'a>(
        ibqp: *mut b::ib_qp,
        gid: *const b::ib_gid,
    ) -> (&'a Device<T>, &'a T::Qp, &'a [u8; 16]) {
        // SAFETY: by the caller's guarantee the QP's `data` was initialised
        // by `create_qp` and stays alive; every variant of `ib_gid` is
        // 16 plain bytes, so `raw` is always valid.
        unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                &*gid.cast::<[u8; 16]>(),
            )
        }
    }

    pub(super) extern "C" fn attach_mcast(
        ibqp: *mut b::ib_qp,
        gid: *mut b::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: ib_core calls this for a QP of ours that is alive for the
        // call (it holds the uverbs object or the kernel consumer does), with
        // the group's GID.
        let (dev, qp, gid) = unsafe { Self::mcast_args(ibqp, gid) };
        from_result(|| T::attach_mcast(dev, qp, gid).map(|()| 0))
    }

    pub(super) extern "C" fn detach_mcast(
        ibqp: *mut b::ib_qp,
        gid: *mut b::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: as in `attach_mcast`.
        let (dev, qp, gid) = unsafe { Self::mcast_args(ibqp, gid) };
        from_result(|| T::detach_mcast(dev, qp, gid).map(|()| 0))
    }

    pub(super) extern "C" fn destroy_qp(ibqp: *mut b::ib_qp, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibqp.cast::<QpObj<T>>();
        // SAFETY: called once for a QP whose creation succeeded (`data`
        // moved out here and never read again); ib_core frees it afterwards.
        let (dev, qpn, data) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp).qp_num,
                (*obj).data.assume_init_read(),
            )
        };
        // Removal from the event table comes first.
        dev.qps.remove(qpn);
        destroy_or_leak(data, |d| T::destroy_qp(dev, d));
        0
    }

    pub(super) extern "C" fn reg_user_mr(
        pd: *mut b::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        dmah: *mut b::ib_dmah,
        udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: `pd` is a live PD of our device created through our ops;
        // `udata` is the command's driver data or NULL.
        let (dev, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                UData::from_raw(udata),
            )
        };
        ptr_result((|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            if !dmah.is_null() {
                return Err(EOPNOTSUPP);
            }
            let access = u32::try_from(access).map_err(|_| EINVAL)?;
            // Allocated first: once the device has the MR, nothing may fail
            // before its state is stored.
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            let (data, key) =
                T::reg_user_mr(dev, pd_data, start, length, iova, access, &mut udata)?;
            Ok(Self::new_mr(slot, data, key))
        })())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) extern "C" fn rereg_user_mr(
        ibmr: *mut b::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut b::ib_pd,
        udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: `ibmr` is a live user MR of ours (a `KBox<MrObj<T>>` that
        // `reg_user_mr` or this function returned), its uobject held for
        // writing for the call; `pd` is a live PD of our device created
        // through our ops; `udata` is the command's driver data or NULL.
        let (dev, mr, pd_data, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibmr).device),
                &(*ibmr.cast::<MrObj<T>>()).data,
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                UData::from_raw(udata),
            )
        };
        ptr_result((|| {
            let mut udata = udata.ok_or(EOPNOTSUPP)?;
            let flags = u32::try_from(flags).map_err(|_| EINVAL)?;
            if flags & !b::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
                return Err(EOPNOTSUPP);
            }
            let change = MrRereg {
                pd: flags & b::ib_mr_rereg_flags_IB_MR_REREG_PD != 0,
                trans: (flags & b::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0)
                    .then_some((start, length, iova)),
                access: if flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
                    Some(u32::try_from(access).map_err(|_| EINVAL)?)
                } else {
                    None
                },
            };
            // Allocated first, as in `reg_user_mr`.
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            Ok(
                match T::rereg_user_mr(dev, mr, &change, pd_data, &mut udata)? {
                    Some((data, key)) => Self::new_mr(slot, data, key),
                    // Changed in place: ib_core keeps the MR (and moves it
                    // to the new PD).
                    None => core::ptr::null_mut(),
                },
            )
        })())
    }

    pub(super) extern "C" fn dereg_mr(ibmr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibmr.cast::<MrObj<T>>();
        // SAFETY: ib_core calls this once for an MR `reg_user_mr` returned
        // (a leaked `KBox<MrObj<T>>`, `ib` at offset 0), never using it
        // afterwards, so the box is ours again.
        let (dev, mr) = unsafe { (Device::<T>::from_raw((*ibmr).device), KBox::from_raw(obj)) };
        destroy_or_leak(mr, |mr| T::dereg_mr(dev, &mr.data));
        0
    }

    pub(super) extern "C" fn create_user_ah(
        ibah: *mut b::ib_ah,
        init: *mut b::rdma_ah_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = ibah.cast::<AhObj<T>>();
        // SAFETY: ib_core allocated `size_ib_ah` bytes and set `device` and
        // `pd`; `init->ah_attr` is valid, with its source GID attribute held
        // for the call; `udata` is the command's driver data or NULL.
        let (dev, pd, attr, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                (*(*ibah).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                AhAttr::new(&*(*init).ah_attr),
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let data = T::create_ah(dev, pd, &attr, udata.as_mut())?;
            // SAFETY: `obj` is valid for writes.
            unsafe { (*obj).data.write(data) };
            Ok(0)
        })
    }

    pub(super) extern "C" fn destroy_ah(ibah: *mut b::ib_ah, _flags: u32) -> c_int {
        let obj = ibah.cast::<AhObj<T>>();
        // SAFETY: called once for an AH whose creation succeeded (`data`
        // moved out here and never read again); ib_core frees it afterwards.
        let (dev, data) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                (*obj).data.assume_init_read(),
            )
        };
        destroy_or_leak(data, |d| T::destroy_ah(dev, d));
        0
    }
}
