// SPDX-License-Identifier: GPL-2.0

//! Views of what ib_core hands the verbs that create and modify objects,
//! and the completion-event table of CQs.

use super::{
    attr::GidAttr,
    device::{
        Device,
        Driver, //
    },
    gids::{
        query_gid_table,
        GidEntry, //
    },
    unions, //
};
use crate::bindings as b;
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{
        AtomicU32,
        Ordering, //
    }, //
};
use kernel::{
    bindings as kb,
    error::to_result,
    prelude::*,
    sync::{
        rcu,
        Arc,
        Completion, //
    },
    types::Opaque, //
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

/// The CQs, QPs or SRQs that can receive events, by the device's number
/// for them: an XArray of slots, each holding a pointer to the ib_core
/// object and a count of the lookups using it.
///
/// The trampolines insert an object after its creation succeeded and remove
/// it before its destroy method runs. Lookups take no lock, so the event
/// and completion paths of different vectors do not contend: a lookup
/// loads the slot under the RCU read lock (from hard IRQ context too) and
/// takes a use of it for as long as it runs the caller's function. A
/// removal erases the entry, drops the table's own use and, if a lookup is
/// still running, waits until the last one ends, as mlx5's CQ table does;
/// it does not wait for a grace period. The slot itself is freed after one
/// (`kvfree_call_rcu`), since a lookup may still be about to read its count.
/// So no lookup uses an object once its removal returned, and a removal
/// waits only for the lookups of its own object. Inserts and removals take
/// the XArray's lock in process context only, which no IRQ path takes.
///
/// Only the layer inserts, and only objects of a `Device<D>`; a device keeps
/// (an `Arc` of) the tables it was built with, so every insert and its
/// remove go to the same table, whatever the driver does.
///
/// # Invariants
///
/// `xa` is an initialised XArray whose entries are pointers to pinned
/// `Slot<R>`s allocated with `KBox` and owned by the table (never any of
/// the XArray's own kinds of entry, which have one of the two low bits
/// set: a slot is aligned to 4 bytes at least).
#[pin_data(PinnedDrop)]
pub struct ObjTable<R, D> {
    #[pin]
    xa: Opaque<kb::xarray>,
    _objects: PhantomData<*mut R>,
    _driver: PhantomData<fn() -> D>,
}

/// One object of an [`ObjTable`] and the lookups running on it.
///
/// # Invariants
///
/// While the slot is in its table, `users` is 1 (the table's use) plus the
/// number of lookups that took a use and have not put it back. Its removal
/// drops the table's use, so `users` falls to 0 exactly once, after which
/// no use is taken again; `idle` is completed when a lookup's put brings it
/// to 0.
#[pin_data]
struct Slot<R> {
    obj: NonNull<R>,
    users: AtomicU32,
    #[pin]
    idle: Completion,
    rcu: Opaque<kb::kvfree_rcu_head>,
}

impl<R> Slot<R> {
    /// Takes a use unless the slot was removed (its count fell to 0).
    fn try_get(&self) -> bool {
        let mut n = self.users.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            let Some(next) = n.checked_add(1) else {
                return false;
            };
            match self
                .users
                .compare_exchange_weak(n, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// Puts back a use taken by [`Slot::try_get`]; the last one after the
    /// slot's removal wakes the remover.
    fn put(&self) {
        if self.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.complete_all();
        }
    }
}

// SAFETY: an XArray may be used from any thread (writers take its lock,
// readers hold the RCU read lock); the table owns its slots, which hold
// only pointers that the layer dereferences under the rules above, an
// atomic count and a completion.
unsafe impl<R, D> Send for ObjTable<R, D> {}
// SAFETY: as for `Send`: every method takes `&self` and is safe to run
// concurrently with the others.
unsafe impl<R, D> Sync for ObjTable<R, D> {}

#[pinned_drop]
impl<R, D> PinnedDrop for ObjTable<R, D> {
    fn drop(self: Pin<&mut Self>) {
        let xa = self.xa.get();
        let mut index = 0;
        loop {
            // SAFETY: `xa` is initialised (type invariant) and no longer
            // shared, so no lookup runs: the slots left in it (objects
            // whose removal never came) are freed at once.
            let slot = unsafe { kb::xa_find(xa, &mut index, usize::MAX, kb::XA_PRESENT) };
            if slot.is_null() {
                break;
            }
            // SAFETY: entries are `KBox`ed slots owned by the table (type
            // invariant); `xa_destroy` below forgets them without reading.
            drop(unsafe { KBox::from_raw(slot.cast::<Slot<R>>()) });
            let Some(next) = index.checked_add(1) else {
                break;
            };
            index = next;
        }
        // SAFETY: `xa` is initialised (type invariant) and no longer
        // shared; only its nodes are freed.
        unsafe { kb::xa_destroy(xa) };
    }
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
                // SAFETY: `xa_init_flags` initialises the XArray in place.
                // No flags: its lock is taken in process context only.
                xa <- Opaque::ffi_init(|xa| unsafe { kb::xa_init_flags(xa, 0) }),
                _objects: PhantomData,
                _driver: PhantomData,
            }),
            GFP_KERNEL,
        )
    }

    /// Puts `obj` at `id`; `EBUSY` if there is an object there already.
    /// Process context (allocates).
    pub(super) fn insert(&self, id: u32, obj: *mut R) -> Result {
        const { assert!(core::mem::align_of::<Slot<R>>() >= 4) };
        let obj = NonNull::new(obj).ok_or(EINVAL)?;
        let index = usize::try_from(id)?;
        let slot = KBox::pin_init(
            pin_init!(Slot {
                obj,
                users: AtomicU32::new(1),
                idle <- Completion::new(),
                rcu: Opaque::uninit(),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: the slot is never moved: the table keeps the pointer and
        // frees it as a `KBox` again.
        let slot = KBox::into_raw(unsafe { Pin::into_inner_unchecked(slot) });
        let xa = self.xa.get();
        // SAFETY: `xa` is initialised (type invariant). `__xa_insert` runs
        // with the lock held, as it requires, and may drop and retake it to
        // allocate with GFP_KERNEL (the trampolines run in process
        // context); `slot` is an aligned pointer, never an internal entry.
        let ret = unsafe {
            kb::xa_lock(xa);
            let ret = kb::__xa_insert(xa, index, slot.cast(), kb::GFP_KERNEL);
            kb::xa_unlock(xa);
            ret
        };
        if ret != 0 {
            // SAFETY: the insert failed, so no lookup saw the slot; it is
            // still the `KBox` made above.
            drop(unsafe { KBox::from_raw(slot) });
        }
        to_result(ret)
    }

    /// Erases object `id`, then waits until no lookup that found it is
    /// still running. Process context (may sleep).
    pub(super) fn remove(&self, id: u32) {
        let Ok(index) = usize::try_from(id) else {
            return;
        };
        // SAFETY: `xa` is initialised (type invariant); `xa_erase` takes
        // its lock.
        let slot = unsafe { kb::xa_erase(self.xa.get(), index) }.cast::<Slot<R>>();
        if slot.is_null() {
            return;
        }
        // SAFETY: the entry was a live slot (type invariant), and erasing
        // it passed the table's ownership (and its use) to this call.
        let s = unsafe { &*slot };
        if s.users.fetch_sub(1, Ordering::AcqRel) != 1 {
            s.idle.wait_for_completion();
        }
        // SAFETY: the slot was `KBox`ed, so `kvfree` may free it; it is out
        // of the table and its count is 0, so only lookups that loaded it
        // before the erase can still read it, and they hold the RCU read
        // lock, which the free waits for. `rcu` is the slot's own head.
        unsafe { kb::kvfree_call_rcu(s.rcu.get(), slot.cast()) };
    }

    /// Runs `f` on object `id` under the RCU read lock (any context, `f`
    /// must not sleep); `false` if there is none.
    pub(super) fn with(&self, id: u32, f: impl FnOnce(*mut R)) -> bool {
        self.with_ref(id, f).is_some()
    }

    /// Runs `f` on object `id` under the RCU read lock (any context, `f`
    /// must not sleep) and returns its result; `None` if there is no such
    /// object. An object's removal waits for `f` to return.
    pub(super) fn with_ref<X>(&self, id: u32, f: impl FnOnce(*mut R) -> X) -> Option<X> {
        let index = usize::try_from(id).ok()?;
        let _rcu = rcu::read_lock();
        // SAFETY: `xa` is initialised (type invariant); `xa_load` may run
        // in any context under the RCU read lock.
        let slot = unsafe { kb::xa_load(self.xa.get(), index) }.cast::<Slot<R>>();
        if slot.is_null() {
            return None;
        }
        // SAFETY: entries are slots (type invariant); one erased after the
        // load is freed only after a grace period, which waits for this
        // read section.
        let slot = unsafe { &*slot };
        if !slot.try_get() {
            return None;
        }
        let x = f(slot.obj.as_ptr());
        slot.put();
        Some(x)
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
            // SAFETY: the CQ is alive while it is in the table, and its
            // removal waits for `with` to return. `comp_handler`
            // may run in IRQ context.
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
            // SAFETY: the QP is alive while it is in the table, and its
            // removal waits for `with` to return; ib_core's QP
            // event handler (and ib_uverbs') may run in IRQ context.
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
    /// RCU read lock (any context, `f` must not sleep); `None` if there is
    /// no such QP.
    pub fn with_qp<X>(&self, id: u32, f: impl FnOnce(&Device<D>, &D::Qp) -> X) -> Option<X> {
        self.with_ref(id, |qp| {
            // SAFETY: a QP is inserted after the write of its driver state
            // (create) and removed before that state is dropped (destroy),
            // and the removal waits for `with_ref` to return, so the QP is
            // alive and initialised here; only QPs of a
            // `Device<D>` are inserted, and the device outlives its QPs.
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

#[kunit_tests(rdma_obj_table)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_remove() -> Result {
        let table = ObjTable::<u64, ()>::new()?;
        let (mut a, mut b) = (11u64, 22u64);
        let (pa, pb): (*mut u64, *mut u64) = (&mut a, &mut b);
        table.insert(7, pa)?;
        assert_eq!(table.insert(7, pb), Err(EBUSY));
        assert_eq!(table.insert(8, core::ptr::null_mut()), Err(EINVAL));
        assert_eq!(table.get(7), Some(pa));
        assert_eq!(table.get(8), None);
        assert_eq!(table.with_ref(7, |p| p == pa), Some(true));
        table.remove(7);
        assert_eq!(table.get(7), None);
        assert!(!table.with(7, |_| ()));
        // Removing what is not there is a no-op.
        table.remove(7);
        table.remove(u32::MAX);
        // The number is free again.
        table.insert(7, pb)?;
        assert_eq!(table.get(7), Some(pb));
        table.remove(7);
        Ok(())
    }

    #[test]
    fn dropped_with_objects_left() -> Result {
        let table = ObjTable::<u64, ()>::new()?;
        let mut a = 1u64;
        let pa: *mut u64 = &mut a;
        for id in [0, 1, 4096, u32::MAX] {
            table.insert(id, pa)?;
        }
        assert_eq!(table.get(u32::MAX), Some(pa));
        // The table frees the slots of the objects never removed.
        drop(table);
        Ok(())
    }
}
