// SPDX-License-Identifier: GPL-2.0

//! Views of what ib_core hands the verbs that create and modify objects,
//! and the completion-event table of CQs.

use super::{
    attr::GidAttr,
    device::{Device, Driver},
    gids::{query_gid_table, GidEntry},
    unions,
};
use crate::bindings as b;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
};

/// QP transport types the layer passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1, kernel only).
    Gsi,
}

/// The creation attributes of a user QP (`struct ib_qp_init_attr`) and its
/// CQs' and PD's driver state.
pub struct QpInit<'a, Cq, Pd, Srq> {
    /// The transport.
    pub qp_type: QpType,
    /// Every send WR generates a completion (`IB_SIGNAL_ALL_WR`).
    pub sq_sig_all: bool,
    /// Requested capacities; the driver writes back what it granted.
    pub cap: &'a mut b::ib_qp_cap,
    /// The CQ of the send queue.
    pub send_cq: &'a Cq,
    /// The CQ of the receive queue.
    pub recv_cq: &'a Cq,
    /// The protection domain.
    pub pd: &'a Pd,
    /// The SRQ its receives come from, if any.
    pub srq: Option<&'a Srq>,
}

/// Attributes of a QP modification (`struct ib_qp_attr`): the plain fields
/// through [`QpAttr::raw`], the address vector through [`QpAttr::av`].
///
/// # Invariants
///
/// `raw` comes from ib_core's `modify_qp` call: when the mask has
/// `IB_QP_AV`, `ah_attr.grh.sgid_attr` is NULL or a GID attribute held for
/// the call.
pub struct QpAttr<'a> {
    raw: &'a b::ib_qp_attr,
    mask: u32,
}

impl<'a> QpAttr<'a> {
    /// # Safety
    ///
    /// `raw` and `mask` (the `IB_QP_*` mask of the call) must satisfy the
    /// type invariant.
    pub(super) unsafe fn new(raw: &'a b::ib_qp_attr, mask: u32) -> Self {
        // INVARIANT: per the safety requirements.
        Self { raw, mask }
    }

    /// The plain attribute fields.
    pub fn raw(&self) -> &b::ib_qp_attr {
        self.raw
    }

    /// The primary path: `None` unless the mask has `IB_QP_AV` (only then
    /// does ib_core hold its source GID attribute).
    pub fn av(&self) -> Option<AhAttr<'a>> {
        if self.mask & b::ib_qp_attr_mask_IB_QP_AV == 0 {
            return None;
        }
        // INVARIANT: with `IB_QP_AV`, from the type invariant.
        Some(AhAttr {
            raw: &self.raw.ah_attr,
        })
    }
}

/// An address vector (`struct rdma_ah_attr`) of a RoCE port.
///
/// # Invariants
///
/// `raw.grh.sgid_attr` is NULL or a GID attribute held for `'a`, and `raw`
/// is of type `RDMA_AH_ATTR_TYPE_ROCE` or the `roce` member is plain bytes
/// anyway (it is: all members of the union are plain data).
pub struct AhAttr<'a> {
    raw: &'a b::rdma_ah_attr,
}

impl<'a> AhAttr<'a> {
    /// # Safety
    ///
    /// `raw` must satisfy the type invariant.
    pub(super) unsafe fn new(raw: &'a b::rdma_ah_attr) -> Self {
        // INVARIANT: per the safety requirements.
        Self { raw }
    }

    /// The destination GID, network order.
    pub fn dgid(&self) -> [u8; 16] {
        // SAFETY: every variant of `union ib_gid` is 16 plain bytes.
        unsafe { unions::read::<_, [u8; 16]>(&self.raw.grh.dgid) }
    }

    /// The destination MAC ib_core resolved (RoCE).
    pub fn dmac(&self) -> [u8; 6] {
        // SAFETY: the union holds plain data only; for a RoCE port ib_core
        // fills the `roce` member.
        // `roce.dmac`, the first byte of the member (checked in `unions`).
        unsafe { unions::read::<_, [u8; 6]>(&self.raw.__bindgen_anon_1) }
    }

    /// The source GID's index in the port's GID table.
    pub fn sgid_index(&self) -> u8 {
        self.raw.grh.sgid_index
    }

    /// The IP TTL / hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.raw.grh.hop_limit
    }

    /// The service level; on RoCE the 802.1Q priority of tagged frames.
    pub fn sl(&self) -> u8 {
        self.raw.sl
    }

    /// The IP traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        self.raw.grh.traffic_class
    }

    /// The IPv6 flow label.
    pub fn flow_label(&self) -> u32 {
        self.raw.grh.flow_label
    }

    /// Whether the address carries a GRH (always on RoCE).
    pub fn has_grh(&self) -> bool {
        u32::from(self.raw.ah_flags) & b::ib_ah_flags_IB_AH_GRH != 0
    }

    /// The source GID entry ib_core resolved for `sgid_index`.
    pub fn sgid_attr(&self) -> Option<GidAttr<'a>> {
        let p = self.raw.grh.sgid_attr;
        // SAFETY: NULL or held for `'a` (type invariant).
        (!p.is_null()).then(|| unsafe { GidAttr::from_raw(p) })
    }

    /// The valid entries (at most `max`) of the GID tables of the device
    /// the source GID belongs to; `EINVAL` without a source GID or with more
    /// than `max` entries. Process context (allocates).
    pub fn gid_table(&self, max: usize) -> Result<KVec<GidEntry>> {
        let p = self.raw.grh.sgid_attr;
        if p.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the source GID attribute is held for `'a` (type
        // invariant), so its device is registered and its GID cache, which
        // holds the entry, exists for the call.
        unsafe { query_gid_table((*p).device, max) }
    }
}

/// An ib_core object kept in an [`ObjTable`].
struct Ptr<R>(NonNull<R>);

impl<R> Clone for Ptr<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Ptr<R> {}

// SAFETY: the pointer is only dereferenced under the table's lock, while the
// object is guaranteed alive (see `ObjTable`).
unsafe impl<R> Send for Ptr<R> {}

/// Async events of a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqEvent {
    /// `IB_EVENT_CQ_ERR` (overflow, DMA error).
    Err,
}

/// Async events of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// `IB_EVENT_QP_FATAL`.
    Fatal,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`.
    LastWqeReached,
    /// `IB_EVENT_SQ_DRAINED`.
    SqDrained,
    /// `IB_EVENT_COMM_EST`.
    CommEst,
    /// `IB_EVENT_QP_ACCESS_ERR`.
    AccessErr,
}

/// The CQs or QPs that can receive events, by the device's number for
/// them.
///
/// The trampolines insert an object after its creation succeeded and remove
/// it before its destroy method runs; the event methods call the object's
/// handlers under the table's lock, so an object being destroyed is never
/// called after its removal. Usable from hard IRQ context.
///
/// Only the layer inserts, and only objects of a `Device<D>`; a device keeps
/// (an `Arc` of) the tables it was built with, so every insert and its
/// remove go to the same table, whatever the driver does.
#[pin_data]
pub struct ObjTable<R, D> {
    #[pin]
    slots: SpinLockIrq<KVVec<Option<Ptr<R>>>>,
    _driver: PhantomData<fn() -> D>,
}

/// CQs of the devices of driver `D` by CQ number.
pub type CqTable<D> = ObjTable<b::ib_cq, D>;
/// QPs of the devices of driver `D` by QP number.
pub type QpTable<D> = ObjTable<b::ib_qp, D>;

impl<R, D> ObjTable<R, D> {
    /// An empty table, shared by the driver (for its event paths) and the
    /// device it is given to in [`super::Builder::new`].
    pub fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                slots <- new_spinlock_irq!(KVVec::new()),
                _driver: PhantomData,
            }),
            GFP_KERNEL,
        )
    }

    pub(super) fn insert(&self, id: u32, obj: *mut R) -> Result {
        let obj = Ptr(NonNull::new(obj).ok_or(EINVAL)?);
        let id = usize::try_from(id)?;
        loop {
            let len = self.slots.lock().len();
            if id < len {
                break;
            }
            // Grow outside the lock (allocation may sleep), then swap.
            let want = (id + 1).max(len * 2).max(64);
            let mut bigger = KVVec::with_capacity(want, GFP_KERNEL)?;
            bigger.resize(want, None, GFP_KERNEL)?;
            let mut slots = self.slots.lock();
            if slots.len() < want {
                bigger[..slots.len()].copy_from_slice(&slots);
                core::mem::swap(&mut *slots, &mut bigger);
            }
            drop(slots);
            // `bigger` (the old table) is freed here, outside the lock.
        }
        let mut slots = self.slots.lock();
        match slots.get_mut(id) {
            Some(slot @ None) => {
                *slot = Some(obj);
                Ok(())
            }
            _ => Err(EBUSY),
        }
    }

    pub(super) fn remove(&self, id: u32) {
        let Ok(i) = usize::try_from(id) else {
            return;
        };
        if let Some(slot) = self.slots.lock().get_mut(i) {
            *slot = None;
        }
    }

    /// Runs `f` on object `id` under the lock; `false` if there is none.
    pub(super) fn with(&self, id: u32, f: impl FnOnce(*mut R)) -> bool {
        self.with_ref(id, f).is_some()
    }

    /// Runs `f` on object `id` under the lock and returns its result;
    /// `None` if there is no such object.
    pub(super) fn with_ref<X>(&self, id: u32, f: impl FnOnce(*mut R) -> X) -> Option<X> {
        let slots = self.slots.lock();
        let Some(Some(obj)) = usize::try_from(id).ok().and_then(|i| slots.get(i)) else {
            return None;
        };
        Some(f(obj.0.as_ptr()))
    }

    /// The object `id`, if it is in the table (a pointer only: whoever
    /// dereferences it must know by other means that it is alive).
    pub(super) fn get(&self, id: u32) -> Option<*mut R> {
        self.with_ref(id, |p| p)
    }
}

/// A consumer's async event handler (`event_handler` of a CQ, QP or SRQ).
type EventHandler = Option<unsafe extern "C" fn(*mut b::ib_event, *mut kernel::ffi::c_void)>;

/// Calls `handler(&event, context)`, if there is a handler, with an
/// `ib_event` of type `ty` on `device` whose `element` `set` fills in.
///
/// # Safety
///
/// `handler`, `context` and `device` must be those of one live object, and
/// `set` must store that object into the element.
pub(super) unsafe fn dispatch_event(
    handler: EventHandler,
    context: *mut kernel::ffi::c_void,
    device: *mut b::ib_device,
    ty: b::ib_event_type,
    set: impl FnOnce(&mut b::ib_event__bindgen_ty_1),
) {
    let Some(handler) = handler else {
        return;
    };
    let mut ev = b::ib_event {
        device,
        // SAFETY: a union of pointers and an integer: all zeroes is a
        // valid value.
        element: unsafe { core::mem::zeroed() },
        event: ty,
    };
    set(&mut ev.element);
    // SAFETY: the object's own handler and context (safety requirements),
    // with an event that lives for the call.
    unsafe { handler(&mut ev, context) }
}

impl<D> ObjTable<b::ib_cq, D> {
    /// Calls the completion handler of CQ `id`; `false` if there is none.
    pub fn notify(&self, id: u32) -> bool {
        self.with(id, |cq| {
            // SAFETY: the CQ is alive while it is in the table, and `with`
            // holds the lock its removal takes. `comp_handler` may run in
            // IRQ context.
            unsafe {
                if let Some(comp) = (*cq).comp_handler {
                    comp(cq, (*cq).cq_context);
                }
            }
        })
    }

    /// Dispatches an async event of CQ `id`; `false` if there is none.
    pub fn event(&self, id: u32, ev: CqEvent) -> bool {
        let ty = match ev {
            CqEvent::Err => b::ib_event_type_IB_EVENT_CQ_ERR,
        };
        self.with(id, |cq| {
            // SAFETY: as in `notify`; the event handler may run in IRQ
            // context.
            unsafe {
                dispatch_event(
                    (*cq).event_handler,
                    (*cq).cq_context,
                    (*cq).device,
                    ty,
                    |e| {
                        unions::write(e, cq);
                    },
                )
            }
        })
    }
}

impl<D> ObjTable<b::ib_qp, D> {
    /// Dispatches an async event of QP `id`; `false` if there is none.
    pub fn event(&self, id: u32, ev: QpEvent) -> bool {
        let ty = match ev {
            QpEvent::Fatal => b::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::LastWqeReached => b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::SqDrained => b::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::CommEst => b::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::AccessErr => b::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
        };
        self.with(id, |qp| {
            // SAFETY: the QP is alive while it is in the table, and `with`
            // holds the lock its removal takes; ib_core's QP event handler
            // (and ib_uverbs') may run in IRQ context.
            unsafe {
                dispatch_event(
                    (*qp).event_handler,
                    (*qp).qp_context,
                    (*qp).device,
                    ty,
                    |e| {
                        unions::write(e, qp);
                    },
                )
            }
        })
    }
}

impl<D: Driver> ObjTable<b::ib_qp, D> {
    /// Runs `f` with the device and the driver state of QP `id`, under the
    /// table's lock (any context, `f` must not sleep); `None` if there is
    /// no such QP.
    pub fn with_qp<X>(&self, id: u32, f: impl FnOnce(&Device<D>, &D::Qp) -> X) -> Option<X> {
        self.with_ref(id, |qp| {
            // SAFETY: a QP is in the table only between the write of its
            // driver state (create) and the read that moves it out
            // (destroy), so it is alive and initialised while `with_ref`
            // holds the lock; only QPs of a `Device<D>` are inserted
            // (type invariant), and the device outlives its QPs.
            let (dev, data) = unsafe {
                (
                    Device::<D>::from_raw((*qp).device),
                    (*qp.cast::<super::device::QpObj<D>>())
                        .data
                        .assume_init_ref(),
                )
            };
            f(dev, data)
        })
    }
}
