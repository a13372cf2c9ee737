// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` trampolines of the device-level verbs (device and port
//! queries, user contexts and their mmaps, PDs, MWs, GIDs, port events,
//! counters and restrack): ib_core's calls turned into calls of the
//! [`Driver`] methods.

use super::{
    attr::{
        GidAttr,
        NetDev, //
    },
    device::{
        ctx_of,
        Adapter,
        CqObj,
        Device,
        Driver,
        MrObj,
        MwObj,
        MwType,
        PdObj,
        QpObj,
        UContextInit,
        UContextObj,
        UCtx, //
    },
    mmap,
    srq::srq_data,
    stats::{
        FwStr,
        ResMsg,
        StatDesc, //
    },
    udata::UData, //
};
use crate::bindings as b;
use core::{
    ffi::{
        c_int,
        c_void, //
    },
    ptr::NonNull, //
};
use kernel::{
    error::from_result,
    prelude::*, //
};

/// Trampolines of the device-level verbs.
impl<T: Driver> Adapter<T> {
    pub(super) extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut b::ib_device,
        _port: u32,
    ) -> *mut b::rdma_hw_stats {
        let descs = T::PORT_STATS;
        let Ok(n) = c_int::try_from(descs.len()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `descs` are valid descriptors (`StatDesc` invariant) that
        // live for ever, so as long as ib_core keeps the pointer.
        unsafe {
            b::rdma_alloc_hw_stats_struct(
                StatDesc::as_raw(descs),
                n,
                b::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        }
    }

    pub(super) extern "C" fn get_hw_stats(
        ibdev: *mut b::ib_device,
        stats: *mut b::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: ib_core passes our live device and a stats structure
        // `alloc_hw_port_stats` made (`num_counters` values allocated after
        // it), locked by ib_core for the call.
        let (dev, values) = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0);
            (
                Device::<T>::from_raw(ibdev),
                core::slice::from_raw_parts_mut((*stats).value.as_mut_ptr(), n),
            )
        };
        // All counters are read at once, whichever `_index` asked for.
        from_result(|| {
            T::get_port_stats(dev, port, values)?;
            Ok(c_int::try_from(values.len())?)
        })
    }

    pub(super) extern "C" fn get_dev_fw_str(
        ibdev: *mut b::ib_device,
        out: *mut kernel::ffi::c_char,
    ) {
        // SAFETY: ib_core passes our live device and a buffer of
        // `IB_FW_VERSION_NAME_MAX` bytes, ours for the call.
        let (dev, buf) = unsafe {
            (
                Device::<T>::from_raw(ibdev),
                core::slice::from_raw_parts_mut(
                    out.cast::<u8>(),
                    b::IB_FW_VERSION_NAME_MAX as usize,
                ),
            )
        };
        T::dev_fw_str(dev, &mut FwStr::new(buf));
    }

    pub(super) extern "C" fn fill_res_qp_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibqp: *mut b::ib_qp,
    ) -> c_int {
        // SAFETY: restrack tracks a QP only once our `create_qp` succeeded
        // (`data` initialised) and drains its readers before `destroy_qp`;
        // `msg` is the message being built, ours for the call.
        unsafe {
            let dev = Device::<T>::from_raw((*ibqp).device);
            let data = (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref();
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_qp(dev, data, m)).map(|()| 0))
        }
    }

    pub(super) extern "C" fn fill_res_cq_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibcq: *mut b::ib_cq,
    ) -> c_int {
        // SAFETY: as in `fill_res_qp_entry`, for a CQ of ours.
        unsafe {
            let dev = Device::<T>::from_raw((*ibcq).device);
            let data = &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1;
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_cq(dev, data, m)).map(|()| 0))
        }
    }

    pub(super) extern "C" fn fill_res_srq_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibsrq: *mut b::ib_srq,
    ) -> c_int {
        // SAFETY: as in `fill_res_qp_entry`, for an SRQ of ours.
        unsafe {
            let dev = Device::<T>::from_raw((*ibsrq).device);
            let data = srq_data::<T>(ibsrq);
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_srq(dev, data, m)).map(|()| 0))
        }
    }

    pub(super) extern "C" fn fill_res_mr_entry(
        msg: *mut kernel::bindings::sk_buff,
        ibmr: *mut b::ib_mr,
    ) -> c_int {
        // SAFETY: every MR of our device is an `MrObj<T>` our ops made;
        // restrack tracks it once made and deletes it (waiting for its
        // readers) before `dereg_mr`; `msg` is ours for the call.
        unsafe {
            let dev = Device::<T>::from_raw((*ibmr).device);
            let data = &(*ibmr.cast::<MrObj<T>>()).data;
            from_result(|| ResMsg::with_nest(msg, |m| T::fill_res_mr(dev, data, m)).map(|()| 0))
        }
    }

    pub(super) extern "C" fn dealloc_driver(ibdev: *mut b::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: ib_core calls `dealloc_driver` exactly once, when the device
        // is freed; `data` and the tables were initialised before the ops
        // were set (type invariant of `Device`) and nothing uses them
        // afterwards.
        unsafe {
            core::ptr::drop_in_place(&raw mut (*dev).data);
            core::ptr::drop_in_place(&raw mut (*dev).cqs);
            core::ptr::drop_in_place(&raw mut (*dev).qps);
            core::ptr::drop_in_place(&raw mut (*dev).srqs);
        }
    }

    pub(super) extern "C" fn query_device(
        ibdev: *mut b::ib_device,
        attr: *mut b::ib_device_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: ib_core passes our live device and a valid attribute struct
        // that nothing else accesses during the call; `udata` is NULL (the
        // query at registration) or the driver udata of the extended
        // QUERY_DEVICE command, inside its bundle.
        let (dev, attr, udata) = unsafe {
            (
                Device::<T>::from_raw(ibdev),
                &mut *attr,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            T::query_device(dev, attr)?;
            if let Some(mut udata) = udata {
                // SAFETY: the driver udata of a command of our device;
                // `ctx` is used only during the call.
                let ctx = unsafe { ctx_of::<T>(&udata) }?;
                T::query_device_udata(dev, ctx, &mut udata)?;
            }
            Ok(0)
        })
    }

    pub(super) extern "C" fn query_port(
        ibdev: *mut b::ib_device,
        port: u32,
        attr: *mut b::ib_port_attr,
    ) -> c_int {
        // SAFETY: as in `query_device`.
        let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
        from_result(|| T::query_port(dev, port, attr).map(|()| 0))
    }

    pub(super) extern "C" fn get_port_immutable(
        ibdev: *mut b::ib_device,
        port: u32,
        imm: *mut b::ib_port_immutable,
    ) -> c_int {
        // SAFETY: as in `query_device`.
        let (dev, imm) = unsafe { (Device::<T>::from_raw(ibdev), &mut *imm) };
        from_result(|| T::get_port_immutable(dev, port, imm).map(|()| 0))
    }

    pub(super) extern "C" fn get_link_layer(
        ibdev: *mut b::ib_device,
        port: u32,
    ) -> b::rdma_link_layer {
        // SAFETY: ib_core passes our live device.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        T::get_link_layer(dev, port).as_raw()
    }

    pub(super) extern "C" fn query_pkey(
        ibdev: *mut b::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        // SAFETY: ib_core passes our live device.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        from_result(|| {
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the duration of the call.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    pub(super) extern "C" fn alloc_ucontext(
        uctx: *mut b::ib_ucontext,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core allocated `size_ib_ucontext` = `size_of::<UContextObj<T>>()`
        // bytes for `uctx` and set its `device` to our live device; `udata`
        // is the command's driver data.
        let (dev, udata) = unsafe {
            (
                Device::<T>::from_raw((*uctx).device),
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let mut udata = udata.ok_or(EINVAL)?;
            let mut mmaps = KVec::new();
            let mut init = UContextInit {
                uctx,
                mmaps: &mut mmaps,
            };
            // On failure `mmaps` is dropped here, withdrawing the offers
            // while the context is still alive.
            let data = T::alloc_ucontext(dev, &mut init, &mut udata)?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_ucontext` only.
            unsafe {
                (*obj).data.write(UCtx {
                    _mmaps: mmaps,
                    data,
                })
            };
            Ok(0)
        })
    }

    pub(super) extern "C" fn dealloc_ucontext(uctx: *mut b::ib_ucontext) {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this once for a context whose
        // `alloc_ucontext` succeeded, so `data` is initialised; ib_core frees
        // the memory right after (the mmap offers go first, with `data`).
        unsafe {
            let dev = Device::<T>::from_raw((*uctx).device);
            T::dealloc_ucontext(dev, &(*obj).data.assume_init_ref().data);
            (*obj).data.assume_init_drop();
        }
    }

    pub(super) extern "C" fn query_ucontext(
        uctx: *mut b::ib_ucontext,
        _attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this for the live context the QUERY_CONTEXT
        // command runs in, whose `alloc_ucontext` succeeded (so `data` is
        // initialised) and which stays alive during the call.
        let (dev, ctx) = unsafe {
            (
                Device::<T>::from_raw((*uctx).device),
                &(*obj).data.assume_init_ref().data,
            )
        };
        from_result(|| T::query_ucontext(dev, ctx).map(|()| 0))
    }

    pub(super) extern "C" fn disassociate_ucontext(uctx: *mut b::ib_ucontext) {
        let obj = uctx.cast::<UContextObj<T>>();
        // SAFETY: ib_core calls this for a live context whose
        // `alloc_ucontext` succeeded (so `data` is initialised), before
        // `dealloc_ucontext`.
        unsafe {
            let dev = Device::<T>::from_raw((*uctx).device);
            T::disassociate_ucontext(dev, &(*obj).data.assume_init_ref().data);
        }
    }

    pub(super) extern "C" fn mmap(
        uctx: *mut b::ib_ucontext,
        vma: *mut kernel::bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: ib_core passes a live context of our device and the VMA
        // being mapped; all our mmap entries are `MmapIo`s.
        unsafe { mmap::mmap(uctx, vma) }
    }

    pub(super) extern "C" fn mmap_free(entry: *mut b::rdma_user_mmap_entry) {
        // SAFETY: ib_core passes an entry of ours whose last reference went.
        unsafe { mmap::free_entry(entry) };
    }

    pub(super) extern "C" fn alloc_pd(pd: *mut b::ib_pd, udata: *mut b::ib_udata) -> c_int {
        let obj = pd.cast::<PdObj<T>>();
        // SAFETY: ib_core allocated `size_ib_pd` = `size_of::<PdObj<T>>()` bytes
        // for `pd` and set its `device` to our live device.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        from_result(|| {
            let data = T::alloc_pd(dev, !udata.is_null())?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_pd` only.
            unsafe { (*obj).data.write(data) };
            Ok(0)
        })
    }

    pub(super) extern "C" fn dealloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
        let obj = pd.cast::<PdObj<T>>();
        // SAFETY: ib_core calls this for a PD whose `alloc_pd` succeeded, so
        // `data` is initialised; ib_core frees the memory right after (we
        // never fail), so `data` is dropped or leaked here.
        unsafe {
            let dev = Device::<T>::from_raw((*pd).device);
            // ib_core cannot handle a failed dealloc (uverbs warns and
            // leaks the uobject): leak the state instead, as for the other
            // destroys.
            if T::dealloc_pd(dev, (*obj).data.assume_init_ref()).is_ok() {
                (*obj).data.assume_init_drop();
            }
            0
        }
    }

    pub(super) extern "C" fn alloc_mw(mw: *mut b::ib_mw, _udata: *mut b::ib_udata) -> c_int {
        let obj = mw.cast::<MwObj<T>>();
        // SAFETY: ib_core allocated `size_ib_mw` = `size_of::<MwObj<T>>()`
        // bytes for `mw` and set its `device` to our live device, its `pd`
        // to one of our PDs (whose `alloc_pd` succeeded; the caller holds it
        // for the call) and its `type` (uverbs accepts only types 1 and 2).
        let (dev, pd, ty) = unsafe {
            (
                Device::<T>::from_raw((*mw).device),
                (*(*mw).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                (*mw).type_,
            )
        };
        from_result(|| {
            let ty = match ty {
                b::ib_mw_type_IB_MW_TYPE_1 => MwType::One,
                b::ib_mw_type_IB_MW_TYPE_2 => MwType::Two,
                _ => return Err(EINVAL),
            };
            let (data, rkey) = T::alloc_mw(dev, pd, ty)?;
            // SAFETY: `obj` is valid for writes; on success the state is
            // dropped in `dealloc_mw` only. `rkey` is ib_core's plain field,
            // which it reads after the call.
            unsafe {
                (*obj).data.write(data);
                (*mw).rkey = rkey;
            }
            Ok(0)
        })
    }

    pub(super) extern "C" fn dealloc_mw(mw: *mut b::ib_mw) -> c_int {
        let obj = mw.cast::<MwObj<T>>();
        // SAFETY: ib_core calls this for an MW whose `alloc_mw` succeeded, so
        // `data` is initialised; ib_core frees the memory right after (we
        // never fail), so `data` is dropped or leaked here.
        unsafe {
            let dev = Device::<T>::from_raw((*mw).device);
            // As for the other destroys: a failure leaks the state, and
            // ib_core is told it succeeded.
            if T::dealloc_mw(dev, (*obj).data.assume_init_ref()).is_ok() {
                (*obj).data.assume_init_drop();
            }
            0
        }
    }

    pub(super) extern "C" fn add_gid(attr: *const b::ib_gid_attr, _ctx: *mut *mut c_void) -> c_int {
        // SAFETY: ib_core passes a valid GID attribute whose device is ours
        // and whose netdev it holds during the call.
        let (dev, attr) = unsafe {
            (
                Device::<T>::from_raw((*attr).device),
                GidAttr::from_raw(attr),
            )
        };
        from_result(|| T::add_gid(dev, &attr).map(|()| 0))
    }

    pub(super) extern "C" fn del_gid(attr: *const b::ib_gid_attr, _ctx: *mut *mut c_void) -> c_int {
        // SAFETY: as in `add_gid`.
        let (dev, attr) = unsafe {
            (
                Device::<T>::from_raw((*attr).device),
                GidAttr::from_raw(attr),
            )
        };
        from_result(|| T::del_gid(dev, &attr).map(|()| 0))
    }

    pub(super) extern "C" fn report_port_event(
        ibdev: *mut b::ib_device,
        ndev: *mut kernel::bindings::net_device,
        _event: kernel::ffi::c_ulong,
    ) {
        let Some(ndev) = NonNull::new(ndev) else {
            return;
        };
        // SAFETY: ib_core passes our live device (it holds a reference) and
        // a netdev valid for the call (its notifier runs under RTNL).
        let (dev, ndev) = unsafe { (Device::<T>::from_raw(ibdev), NetDev::from_raw(ndev)) };
        T::report_port_event(dev, ndev);
    }
}
