// SPDX-License-Identifier: GPL-2.0

//! Allocating and registering an `ib_device` ([`Builder`],
//! [`Registration`]), and dispatching device and port events
//! ([`EventRef`]).

use super::{
    attr::{
        NetDev,
        NetDevRef, //
    },
    device::{
        Adapter,
        Device,
        Driver, //
    },
    objects::{
        CqTable,
        QpTable, //
    },
    srq::SrqTable,
    unions, //
};
use crate::bindings as b;
use core::{
    marker::PhantomData,
    mem::size_of,
    ptr::NonNull, //
};
use kernel::{
    device::Bound,
    error::to_result,
    prelude::*,
    str::CStr,
    sync::Arc,
    ThisModule, //
};

/// The netdev of `port` of `ibdev`, held (`ib_device_get_netdev`).
pub(super) fn netdev_of(ibdev: *mut b::ib_device, port: u32) -> Option<NetDevRef> {
    // SAFETY: callers pass a live device; the function checks `port` and
    // returns a netdev with `dev_hold` taken, or NULL.
    let ptr = unsafe { b::ib_device_get_netdev(ibdev, port) };
    // SAFETY: we own the reference the call took.
    NonNull::new(ptr).map(|p| unsafe { NetDevRef::from_held(p) })
}

/// An allocated, not yet registered `ib_device` with driver state `T`.
/// Dropping it deallocates the device (and drops `T`).
///
/// # Invariants
///
/// `dev` points to a `Device<T>` allocated by `_ib_alloc_device`, with `data`
/// initialised and the ops of `Adapter<T>` set; we own its reference.
pub struct Builder<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Send for Builder<T> {}

impl<T: Driver> Builder<T> {
    /// Allocates an `ib_device` in `init_net` whose driver state `data`
    /// initialises in place, owned by `module` (the driver's `THIS_MODULE`);
    /// its CQs, QPs and SRQs go into `cqs`, `qps` and `srqs` (which the
    /// driver's event paths share).
    pub fn new<E>(
        module: &'static ThisModule,
        data: impl PinInit<T, E>,
        cqs: Arc<CqTable<T>>,
        qps: Arc<QpTable<T>>,
        srqs: Arc<SrqTable<T>>,
    ) -> Result<Self>
    where
        Error: From<E>,
    {
        // SAFETY: `_ib_alloc_device` may be called with any size of at least
        // `sizeof(struct ib_device)`; `init_net` outlives every device.
        let raw = unsafe {
            b::_ib_alloc_device(size_of::<Device<T>>(), &raw mut kernel::bindings::init_net)
        };
        let Some(dev) = NonNull::new(raw.cast::<Device<T>>()) else {
            return Err(ENOMEM);
        };
        // SAFETY: `data` is a fresh, zeroed field of an allocation of
        // `size_of::<Device<T>>()` bytes suitably aligned
        // (`Device::LAYOUT_OK`), valid for writes; ib_core frees the device
        // only through `ib_dealloc_device`, so it never moves.
        let init = unsafe { data.__init(&raw mut (*dev.as_ptr()).data) };
        if let Err(e) = init {
            // SAFETY: the device is ours and not registered; its ops are not
            // set, so no `dealloc_driver` runs on the uninitialised `data`.
            unsafe { b::ib_dealloc_device(raw) };
            return Err(e.into());
        }
        // SAFETY: as above; `data` is initialised before the ops (and thus
        // `dealloc_driver`) exist.
        unsafe {
            (&raw mut (*dev.as_ptr()).cqs).write(cqs);
            (&raw mut (*dev.as_ptr()).qps).write(qps);
            (&raw mut (*dev.as_ptr()).srqs).write(srqs);
            (*raw).ops.owner = module.as_ptr();
            b::ib_set_device_ops(raw, &Adapter::<T>::OPS);
            (*raw).node_type = T::NODE_TYPE.as_raw();
            (*raw).phys_port_cnt = 1;
        }
        // INVARIANT: allocated, initialised, ops set.
        Ok(Self { dev })
    }

    fn raw(&self) -> *mut b::ib_device {
        self.dev.as_ptr().cast()
    }

    /// Sets the node GUID (8 bytes in network order, e.g. an EUI-64).
    pub fn set_node_guid(&mut self, guid: [u8; 8]) {
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).node_guid = u64::from_ne_bytes(guid) };
    }

    /// Sets the number of completion vectors (`ibv_context.num_comp_vectors`).
    pub fn set_num_comp_vectors(&mut self, n: u32) -> Result {
        let n = i32::try_from(n)?;
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).num_comp_vectors = n };
        Ok(())
    }

    /// Sets the number of ports (default 1).
    pub fn set_phys_port_cnt(&mut self, n: u32) {
        // SAFETY: the device is not registered yet, nobody else accesses it.
        unsafe { (*self.raw()).phys_port_cnt = n };
    }

    /// Registers the device under `name` (e.g. `c"ferroce%d"`), for DMA
    /// through `dma_device`, which also becomes its parent.
    pub fn register<'a>(
        self,
        name: &CStr,
        dma_device: &'a kernel::device::Device<Bound>,
    ) -> Result<Registration<'a, T>> {
        let dma = core::ptr::from_ref(dma_device)
            .cast::<kernel::bindings::device>()
            .cast_mut();
        // SAFETY: `kernel::device::Device` is a transparent wrapper of
        // `struct device`, so `dma` is the bound device, which outlives the
        // registration (it is dropped in the driver's remove path at the
        // latest). The ib_device is ours and not registered yet.
        let ret = unsafe {
            (*ib_device_dev(self.raw())).parent = dma;
            b::ib_register_device(self.raw(), name.as_char_ptr(), dma)
        };
        // On failure `self` is dropped: `ib_dealloc_device` frees the device.
        to_result(ret)?;
        let dev = self.dev;
        core::mem::forget(self);
        // INVARIANT: registered successfully; ownership moves on.
        Ok(Registration {
            dev,
            _dma: PhantomData,
        })
    }
}

impl<T: Driver> Drop for Builder<T> {
    fn drop(&mut self) {
        // SAFETY: we own the unregistered device (type invariant);
        // `ib_dealloc_device` calls `dealloc_driver`, dropping `data`.
        unsafe { b::ib_dealloc_device(self.raw()) };
    }
}

/// A registered `ib_device`; dropping it unregisters the device, which waits
/// for its users to go, then deallocates it (dropping the driver state).
/// It cannot outlive the borrow of the bound device it does DMA for
/// (`'a`), so the device's verbs always run with that device bound.
///
/// # Invariants
///
/// `dev` points to a registered `Device<T>` whose unregistration is ours.
pub struct Registration<'a, T: Driver> {
    dev: NonNull<Device<T>>,
    _dma: PhantomData<&'a kernel::device::Device<Bound>>,
}

// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Send for Registration<'_, T> {}
// SAFETY: see `Device<T>`.
unsafe impl<T: Driver> Sync for Registration<'_, T> {}

impl<T: Driver> Registration<'_, T> {
    /// The device and its driver state.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: the device stays allocated until we unregister it.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for Registration<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the device is registered and unregistering is ours (type
        // invariant); with `dealloc_driver` set, ib_core deallocates it.
        unsafe { b::ib_unregister_device(self.dev.as_ptr().cast()) };
    }
}

/// An async event ib_core can dispatch to its clients
/// (`ib_dispatch_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    Active,
    /// The port went down (`IB_EVENT_PORT_ERR`).
    Err,
}

/// A handle on a registered `ib_device` for dispatching async events and
/// pairing netdevs from any context, IRQ handlers included.
///
/// It holds only the `struct device` reference (`get_device`), which keeps
/// the memory of the `ib_device` allocated but does not hold its
/// registration: ib_core's `disable_device()` (unregistration, and
/// `rdma_dev_change_netns()`) never waits for it. Each operation takes an
/// `ib_device_try_get` reference for its own duration only (as ib_core's
/// own netdev handlers do per event) and does nothing while the device is
/// disabled or once it is unregistered.
///
/// # Invariants
///
/// `dev` points to an `ib_device` on whose `dev` we hold a `get_device`
/// reference.
pub struct EventRef {
    dev: NonNull<b::ib_device>,
}

// SAFETY: `ib_dispatch_event`, `ib_device_try_get`/`ib_device_put` and
// `put_device` may be called from any thread.
unsafe impl Send for EventRef {}
// SAFETY: as above; `&EventRef` only dispatches events under a registration
// reference.
unsafe impl Sync for EventRef {}

impl<T: Driver> Registration<'_, T> {
    /// A handle for dispatching events. `None` is never returned today; the
    /// `Option` is kept for callers that treat a missing sink as "no events".
    pub fn event_ref(&self) -> Option<EventRef> {
        let dev = self.dev.cast::<b::ib_device>();
        // SAFETY: the device is registered and allocated (type invariant), so
        // its `struct device` is initialised; `get_device` takes a reference
        // on it. INVARIANT: we hold that reference.
        unsafe { kernel::bindings::get_device(ib_device_dev(dev.as_ptr())) };
        Some(EventRef { dev })
    }
}

/// `&ibdev->dev`: the `struct device` that starts the anonymous union of
/// `struct ib_device` (with `coredev`, whose first member it is too).
///
/// # Safety
///
/// `ibdev` must point to an allocated `struct ib_device`.
unsafe fn ib_device_dev(ibdev: *mut b::ib_device) -> *mut kernel::bindings::device {
    // SAFETY: `ibdev` is allocated (safety requirements); only an address
    // is computed, and every member of a union starts at its address.
    unsafe { (&raw mut (*ibdev).__bindgen_anon_1).cast() }
}

impl EventRef {
    /// Runs `f` under a registration reference (`ib_device_try_get`);
    /// `None` if the device is disabled or unregistered now.
    fn live<R>(&self, f: impl FnOnce(*mut b::ib_device) -> R) -> Option<R> {
        let dev = self.dev.as_ptr();
        // SAFETY: the memory of the device is valid (type invariant);
        // `ib_device_try_get` only increments its registration count if it
        // is not zero, from any context.
        if !unsafe { b::ib_device_try_get(dev) } {
            return None;
        }
        let r = f(dev);
        // SAFETY: we took this reference above.
        unsafe { b::ib_device_put(dev) };
        Some(r)
    }

    fn dispatch(&self, event: b::ib_event_type, port: u32) {
        self.live(|dev| {
            // SAFETY: `ib_event` is plain data; all zeroes is a valid value.
            let mut ev: b::ib_event = unsafe { core::mem::zeroed() };
            ev.device = dev;
            ev.event = event;
            // SAFETY: `ev` is ours; `port_num` is the union member ib_core
            // reads for port events. `ib_dispatch_event` copies the event,
            // allocates with GFP_ATOMIC and defers the clients to a work
            // item, so it may be called from IRQ context; the device is
            // registered (`live`).
            unsafe {
                unions::write(&mut ev.element, port);
                b::ib_dispatch_event(&ev);
            }
        });
    }

    /// Dispatches a port event for `port` (dropped while the device is
    /// disabled: ib_core queries the port again when it enables it).
    pub fn port_event(&self, port: u32, event: PortEvent) {
        let ev = match event {
            PortEvent::Active => b::ib_event_type_IB_EVENT_PORT_ACTIVE,
            PortEvent::Err => b::ib_event_type_IB_EVENT_PORT_ERR,
        };
        self.dispatch(ev, port);
    }

    /// The netdev associated with `port`, held.
    pub fn netdev(&self, port: u32) -> Option<NetDevRef> {
        // `ib_device_get_netdev` reads `port_data`, which lives as long as
        // the memory of the device (`ib_device_release` frees it).
        netdev_of(self.dev.as_ptr(), port)
    }

    /// Associates `netdev` (or none) with `port` (`ib_device_set_netdev`;
    /// ib_core holds its own tracked reference).
    ///
    /// Call it from a netdev notifier (RTNL held), with `None` at the latest
    /// when the associated netdev sends `NETDEV_UNREGISTER`. Pairing needs
    /// the device registered and enabled (`ENODEV` otherwise: an
    /// unregistered device would keep the netdev reference for good);
    /// unpairing always works.
    pub fn set_netdev(&self, netdev: Option<NetDev<'_>>, port: u32) -> Result {
        let set = |dev: *mut b::ib_device| {
            let nd = netdev.map_or(core::ptr::null_mut(), |n| n.as_raw());
            // SAFETY: the memory of the device, its `port_data` included, is
            // valid (type invariant; ib_core frees `port_data` in the release
            // of the `struct device`); `nd` is NULL or a netdev valid for
            // the call, not unregistering (the caller reacts to its
            // `NETDEV_UNREGISTER` under RTNL, which it holds).
            to_result(unsafe { b::ib_device_set_netdev(dev, nd, port) })
        };
        if netdev.is_some() {
            self.live(set).unwrap_or(Err(ENODEV))
        } else {
            set(self.dev.as_ptr())
        }
    }

    /// Has ib_core scan the netdevs for the GIDs of this device now
    /// (`rdma_roce_rescan_device`), e.g. after a netdev was associated with
    /// a port. It takes RTNL: never call it from a netdev notifier.
    pub fn rescan_gids(&self) {
        self.live(|dev| {
            // SAFETY: the device is registered (`live`).
            unsafe { b::rdma_roce_rescan_device(dev) }
        });
    }

    /// Dispatches `IB_EVENT_DEVICE_FATAL`.
    pub fn device_fatal(&self) {
        self.dispatch(b::ib_event_type_IB_EVENT_DEVICE_FATAL, 1);
    }
}

impl Drop for EventRef {
    fn drop(&mut self) {
        // SAFETY: we hold a `get_device` reference (type invariant). It is
        // dropped in process context (the last put may free the device).
        unsafe { kernel::bindings::put_device(ib_device_dev(self.dev.as_ptr())) };
    }
}
