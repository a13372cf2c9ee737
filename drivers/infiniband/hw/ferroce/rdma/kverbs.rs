// SPDX-License-Identifier: GPL-2.0

//! The kernel verbs of a [`Driver`]: kernel CQs and their polling and
//! arming, posting on kernel QPs, DMA and fast-register MRs, kernel address
//! handles. With them ib_core treats the device as a kernel verbs provider
//! (`kverbs_provider`) and attaches ib_mad, the CM and rdma_cm to it.

use super::{
    device::{
        ptr_result,
        Adapter,
        AhObj,
        CqObj,
        Device,
        Driver,
        MrObj,
        PdObj,
        QpObj, //
    },
    objects::AhAttr,
    wr::{
        RecvWrs,
        SendWrs,
        WcOut, //
    }, //
};
use crate::bindings as b;
use core::ffi::c_int;
use kernel::{
    device::Bound,
    error::from_result,
    prelude::*,
    types::Opaque, //
};

/// The driver state of a live AH of a device of driver `T`.
///
/// # Safety
///
/// `ah` must be a live AH of a device of driver `T` whose creation
/// succeeded, and the reference must not outlive it.
pub(super) unsafe fn ah_data<'a, T: Driver>(ah: *mut b::ib_ah) -> &'a T::Ah {
    // SAFETY: per the safety requirements the state is initialised.
    unsafe { (*ah.cast::<AhObj<T>>()).data.assume_init_ref() }
}

/// The driver state of a live MR of a device of driver `T`.
///
/// # Safety
///
/// `mr` must be a live MR returned by one of our MR verbs, and the
/// reference must not outlive it.
pub(super) unsafe fn mr_data<'a, T: Driver>(mr: *mut b::ib_mr) -> &'a T::Mr {
    // SAFETY: our MR verbs return the `ib` member (offset 0) of a leaked
    // `KBox<MrObj<T>>`.
    unsafe { &(*mr.cast::<MrObj<T>>()).data }
}

impl<T: Driver> Device<T> {
    /// The device DMA is done for (the PCI function), bound.
    pub fn dma_device(&self) -> &kernel::device::Device<Bound> {
        // SAFETY: `ib_register_device` set `dma_device` to the bound device
        // `Builder::register` was given. A `&Device<T>` is only handed out
        // while the device is registered (to the driver's ops, which
        // ib_core calls only then, and by `Registration::device`), and a
        // `Registration` cannot outlive the borrow of that bound device
        // (its lifetime), so the device is still bound for `&self`.
        unsafe {
            kernel::device::Device::<kernel::device::Normal>::from_raw((*self.as_raw()).dma_device)
                .as_bound()
        }
    }

    /// The `ib_qp` of QP number `qpn`, if it is in the QP table.
    pub(super) fn qp_ptr(&self, qpn: u32) -> Option<*mut b::ib_qp> {
        self.qps.get(qpn)
    }

    /// Runs `f` on the driver state of QP `qpn`, under the RCU read lock
    /// (`f` must not sleep); the QP's removal from the table waits for `f`
    /// to return before its destruction. `None` if there is no such QP.
    pub fn with_qp<R>(&self, qpn: u32, f: impl FnOnce(&T::Qp) -> R) -> Option<R> {
        self.qps.with_ref(qpn, |qp| {
            // SAFETY: a QP is inserted into the table only after its state
            // was written, and removed before that state is dropped; the
            // removal waits for `with_ref` to return.
            f(unsafe { (*qp.cast::<QpObj<T>>()).data.assume_init_ref() })
        })
    }
}

impl<T: Driver> Adapter<T> {
    pub(super) extern "C" fn create_kernel_cq(
        ibcq: *mut b::ib_cq,
        attr: *const b::ib_cq_init_attr,
        attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        if !attrs.is_null() {
            return Self::create_user_cq(ibcq, attr, attrs);
        }
        // SAFETY: ib_core allocated `size_ib_cq` bytes for `ibcq` and set its
        // `device`; `attr` is valid for the call.
        let (dev, attr) = unsafe { (Device::<T>::from_raw((*ibcq).device), &*attr) };
        from_result(|| {
            if attr.flags != 0 {
                return Err(EOPNOTSUPP);
            }
            let created = T::create_kernel_cq(dev, attr.cqe, attr.comp_vector)?;
            // SAFETY: `ibcq` is the CQ being created, of `size_ib_cq` bytes.
            unsafe { Self::publish_cq(dev, ibcq, created) }?;
            Ok(0)
        })
    }

    pub(super) extern "C" fn poll_cq(ibcq: *mut b::ib_cq, num: c_int, wc: *mut b::ib_wc) -> c_int {
        let Ok(len) = usize::try_from(num) else {
            return 0;
        };
        if wc.is_null() {
            return 0;
        }
        // SAFETY: a kernel CQ of ours, created successfully (state
        // initialised), alive for the call; `wc` holds `num` entries.
        let (dev, cq, mut out) = unsafe {
            let dev = Device::<T>::from_raw((*ibcq).device);
            (
                dev,
                &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1,
                WcOut::new(dev, wc, len),
            )
        };
        T::poll_cq(dev, cq, &mut out);
        out.filled() as c_int
    }

    pub(super) extern "C" fn req_notify_cq(
        ibcq: *mut b::ib_cq,
        flags: b::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: a kernel CQ of ours, alive for the call.
        let (dev, cq) = unsafe {
            (
                Device::<T>::from_raw((*ibcq).device),
                &(*ibcq.cast::<CqObj<T>>()).data.assume_init_ref().1,
            )
        };
        let solicited = flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == b::ib_cq_notify_flags_IB_CQ_SOLICITED;
        let report = flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        match T::req_notify_cq(dev, cq, solicited, report) {
            Ok(missed) => c_int::from(missed),
            Err(e) => e.to_errno(),
        }
    }

    pub(super) extern "C" fn post_send(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_send_wr,
        bad_wr: *mut *const b::ib_send_wr,
    ) -> c_int {
        // SAFETY: a QP of ours (state initialised), alive for the call; the
        // chain is the consumer's, with containers and AH/MR objects of
        // this device as the verbs contract requires.
        let (dev, qp, mut wrs) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                SendWrs::<T>::new(wr, (*ibqp).qp_type),
            )
        };
        match T::post_send(dev, qp, &mut wrs) {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: ib_core passes a writable `bad_wr`.
                    unsafe { bad_wr.write(wrs.current()) };
                }
                e.to_errno()
            }
        }
    }

    pub(super) extern "C" fn post_recv(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_recv_wr,
        bad_wr: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: as in `post_send`.
        let (dev, qp, mut wrs) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                (*ibqp.cast::<QpObj<T>>()).data.assume_init_ref(),
                RecvWrs::new(wr),
            )
        };
        match T::post_recv(dev, qp, &mut wrs) {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: ib_core passes a writable `bad_wr`.
                    unsafe { bad_wr.write(wrs.current()) };
                }
                e.to_errno()
            }
        }
    }

    /// Boxes the state of a new MR and returns its `ib_mr` with the key set
    /// (ib_core fills in the rest: device, pd, uobject).
    pub(super) fn new_mr(
        slot: KBox<core::mem::MaybeUninit<MrObj<T>>>,
        data: T::Mr,
        key: u32,
    ) -> *mut b::ib_mr {
        let obj = KBox::write(
            slot,
            MrObj::<T> {
                ib: Opaque::zeroed(),
                data,
            },
        );
        let raw = KBox::into_raw(obj);
        // SAFETY: `raw` is ours until returned to ib_core.
        unsafe {
            let ib = (*raw).ib.get();
            (*ib).lkey = key;
            (*ib).rkey = key;
            ib
        }
    }

    pub(super) extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: c_int) -> *mut b::ib_mr {
        // SAFETY: a live PD of our device created through our ops.
        let (dev, pd_data) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
            )
        };
        ptr_result((|| {
            let access = u32::try_from(access).map_err(|_| EINVAL)?;
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            let (data, key) = T::get_dma_mr(dev, pd_data, access)?;
            Ok(Self::new_mr(slot, data, key))
        })())
    }

    pub(super) extern "C" fn alloc_mr(
        pd: *mut b::ib_pd,
        mr_type: b::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut b::ib_mr {
        // SAFETY: a live PD of our device created through our ops.
        let (dev, pd_data) = unsafe {
            (
                Device::<T>::from_raw((*pd).device),
                (*pd.cast::<PdObj<T>>()).data.assume_init_ref(),
            )
        };
        ptr_result((|| {
            if mr_type != b::ib_mr_type_IB_MR_TYPE_MEM_REG {
                return Err(EINVAL);
            }
            let slot = KBox::<MrObj<T>>::new_uninit(GFP_KERNEL)?;
            let (data, key) = T::alloc_mr(dev, pd_data, max_num_sg)?;
            Ok(Self::new_mr(slot, data, key))
        })())
    }

    extern "C" fn set_page(ibmr: *mut b::ib_mr, addr: u64) -> c_int {
        // SAFETY: `ib_sg_to_pages` calls this with the MR `map_mr_sg` was
        // called for, one of ours.
        let mr = unsafe { mr_data::<T>(ibmr) };
        match T::map_mr_sg_page(mr, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    pub(super) extern "C" fn map_mr_sg(
        ibmr: *mut b::ib_mr,
        sg: *mut kernel::bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut u32,
    ) -> c_int {
        // SAFETY: an MR of ours allocated by `alloc_mr`, alive for the call.
        let mr = unsafe { mr_data::<T>(ibmr) };
        T::map_mr_sg_start(mr);
        // SAFETY: ib_core passes the consumer's DMA-mapped scatterlist of
        // `sg_nents` entries and its offset pointer; `ib_sg_to_pages` sets the
        // MR's iova/length and calls `set_page` for every page.
        unsafe { b::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page)) }
    }

    pub(super) extern "C" fn create_kernel_ah(
        ibah: *mut b::ib_ah,
        init: *mut b::rdma_ah_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        if !udata.is_null() {
            return Self::create_user_ah(ibah, init, udata);
        }
        let obj = ibah.cast::<AhObj<T>>();
        // SAFETY: ib_core allocated `size_ib_ah` bytes and set `device` and
        // `pd`; `init->ah_attr` is valid, with its source GID attribute held
        // for the call.
        let (dev, pd, attr) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                (*(*ibah).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                AhAttr::new(&*(*init).ah_attr),
            )
        };
        from_result(|| {
            let data = T::create_kernel_ah(dev, pd, &attr)?;
            // SAFETY: `obj` is valid for writes.
            unsafe { (*obj).data.write(data) };
            Ok(0)
        })
    }
}
