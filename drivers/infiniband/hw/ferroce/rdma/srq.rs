// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`): their attributes, the
//! trampolines of the SRQ verbs (user and kernel) and their async events.

use super::{
    device::{
        ctx_of,
        destroy_or_leak,
        Adapter,
        Device,
        Driver,
        Obj,
        PdObj, //
    },
    objects::ObjTable,
    udata::UData,
    wr::RecvWrs, //
};
use crate::bindings as b;
use core::ffi::c_int;
use kernel::{
    error::from_result,
    prelude::*, //
};

/// The size and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive WRs the SRQ holds.
    pub max_wr: u32,
    /// SGEs per receive WR.
    pub max_sge: u32,
    /// The threshold of `IB_EVENT_SRQ_LIMIT_REACHED`; 0 = not armed.
    pub limit: u32,
}

/// An SRQ's number in the [`SrqTable`] and its driver state.
pub(super) type SrqObj<T> = Obj<b::ib_srq, (u32, <T as Driver>::Srq)>;

/// SRQs of the devices of driver `D` by SRQ number (see [`ObjTable`]).
pub type SrqTable<D> = ObjTable<b::ib_srq, D>;

/// Async events of an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqEvent {
    /// `IB_EVENT_SRQ_LIMIT_REACHED`.
    LimitReached,
}

impl<D> ObjTable<b::ib_srq, D> {
    /// Dispatches an async event of SRQ `id`; `false` if there is none.
    pub fn event(&self, id: u32, ev: SrqEvent) -> bool {
        let ty = match ev {
            SrqEvent::LimitReached => b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
        };
        self.with(id, |srq| {
            // SAFETY: the SRQ is alive while it is in the table, and its
            // removal waits for `with` to return; the event
            // handler may run in IRQ context.
            unsafe {
                super::objects::dispatch_event(
                    (*srq).event_handler,
                    (*srq).srq_context,
                    (*srq).device,
                    ty,
                    |e| super::unions::write(e, srq),
                )
            }
        })
    }
}

/// The driver state of a live SRQ of a device of driver `T`.
///
/// # Safety
///
/// `srq` must be a live SRQ of a device of driver `T` whose creation
/// succeeded, and the reference must not outlive it.
pub(super) unsafe fn srq_data<'a, T: Driver>(srq: *mut b::ib_srq) -> &'a T::Srq {
    // SAFETY: per the safety requirements the state is initialised.
    unsafe { &(*srq.cast::<SrqObj<T>>()).data.assume_init_ref().1 }
}

impl<T: Driver> Adapter<T> {
    pub(super) extern "C" fn create_srq(
        ibsrq: *mut b::ib_srq,
        init: *mut b::ib_srq_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        let obj = ibsrq.cast::<SrqObj<T>>();
        // SAFETY: ib_core allocated `size_ib_srq` bytes for `ibsrq` and set
        // its `device` and `pd` (a live PD of ours, created through our ops,
        // held for the call); `init` is valid and ours for the call;
        // `udata` is the command's driver data or NULL.
        let (dev, pd, init, udata) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                (*(*ibsrq).pd.cast::<PdObj<T>>()).data.assume_init_ref(),
                &mut *init,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            if init.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
                return Err(EOPNOTSUPP);
            }
            let mut attr = SrqAttr {
                max_wr: init.attr.max_wr,
                max_sge: init.attr.max_sge,
                limit: init.attr.srq_limit,
            };
            let (data, srqn) = match udata {
                Some(mut udata) => {
                    // SAFETY: a uverbs command of our device, in a context of
                    // ours.
                    let ctx = unsafe { ctx_of::<T>(&udata) }?;
                    T::create_srq(dev, pd, &mut attr, Some((ctx, &mut udata)))?
                }
                None => T::create_srq(dev, pd, &mut attr, None)?,
            };
            init.attr.max_wr = attr.max_wr;
            init.attr.max_sge = attr.max_sge;
            // The state is in place before the SRQ is in the table, through
            // which its events reach it.
            // SAFETY: `obj` is valid for writes.
            unsafe { (*obj).data.write((srqn, data)) };
            if let Err(e) = dev.srqs.insert(srqn, ibsrq) {
                // SAFETY: written just above, never read again: ib_core
                // frees the SRQ after a failed create.
                let (_, data) = unsafe { (*obj).data.assume_init_read() };
                destroy_or_leak(data, |d| T::destroy_srq(dev, d));
                return Err(e);
            }
            Ok(0)
        })
    }

    pub(super) extern "C" fn modify_srq(
        ibsrq: *mut b::ib_srq,
        attr: *mut b::ib_srq_attr,
        mask: b::ib_srq_attr_mask,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: an SRQ created by us, alive for the call; `attr` is
        // ib_core's, valid for the call; `udata` is the command's driver
        // data or NULL.
        let (dev, srq, attr, mut udata) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                srq_data::<T>(ibsrq),
                &*attr,
                UData::from_raw(udata),
            )
        };
        from_result(|| {
            let known = b::ib_srq_attr_mask_IB_SRQ_MAX_WR | b::ib_srq_attr_mask_IB_SRQ_LIMIT;
            if mask & !known != 0 {
                return Err(EINVAL);
            }
            let max_wr = (mask & b::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(attr.max_wr);
            let limit = (mask & b::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(attr.srq_limit);
            T::modify_srq(dev, srq, max_wr, limit, udata.as_mut()).map(|()| 0)
        })
    }

    pub(super) extern "C" fn query_srq(ibsrq: *mut b::ib_srq, attr: *mut b::ib_srq_attr) -> c_int {
        // SAFETY: an SRQ created by us, alive for the call; `attr` is
        // ib_core's output structure, ours for the call.
        let (dev, srq, attr) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                srq_data::<T>(ibsrq),
                &mut *attr,
            )
        };
        from_result(|| {
            let a = T::query_srq(dev, srq)?;
            attr.max_wr = a.max_wr;
            attr.max_sge = a.max_sge;
            attr.srq_limit = a.limit;
            Ok(0)
        })
    }

    pub(super) extern "C" fn destroy_srq(ibsrq: *mut b::ib_srq, _udata: *mut b::ib_udata) -> c_int {
        let obj = ibsrq.cast::<SrqObj<T>>();
        // SAFETY: called once for an SRQ whose creation succeeded (`data`
        // moved out here and never read again); ib_core frees it
        // afterwards, and only after every QP attached to it is gone.
        let (dev, (srqn, data)) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                (*obj).data.assume_init_read(),
            )
        };
        // Removal from the event table comes first.
        dev.srqs.remove(srqn);
        destroy_or_leak(data, |d| T::destroy_srq(dev, d));
        0
    }

    pub(super) extern "C" fn post_srq_recv(
        ibsrq: *mut b::ib_srq,
        wr: *const b::ib_recv_wr,
        bad_wr: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: a kernel SRQ of ours, alive for the call; `wr` is the
        // consumer's chain, valid for the call.
        let (dev, srq, mut wrs) = unsafe {
            (
                Device::<T>::from_raw((*ibsrq).device),
                srq_data::<T>(ibsrq),
                RecvWrs::new(wr),
            )
        };
        match T::post_srq_recv(dev, srq, &mut wrs) {
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
}
