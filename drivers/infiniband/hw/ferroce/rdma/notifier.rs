// SPDX-License-Identifier: GPL-2.0

//! A netdevice notifier (`register_netdevice_notifier`) calling a Rust
//! handler. Upstream it would live in `kernel::net`.

use super::attr::NetDev;
use crate::bindings as b;
use core::{
    ffi::{
        c_int,
        c_void, //
    },
    ptr::NonNull, //
};
use kernel::{
    ffi::c_ulong,
    prelude::*,
    types::Opaque, //
};

/// The netdev events a handler is told about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// `NETDEV_REGISTER`.
    Register,
    /// `NETDEV_UNREGISTER`: drop every reference on the netdev.
    Unregister,
    /// `NETDEV_UP`.
    Up,
    /// `NETDEV_DOWN`.
    Down,
    /// `NETDEV_CHANGE` (carrier and other state changes).
    Change,
    /// `NETDEV_CHANGEMTU`.
    ChangeMtu,
    /// `NETDEV_CHANGENAME`.
    ChangeName,
    /// `NETDEV_CHANGEADDR`.
    ChangeAddr,
}

impl NetdevEvent {
    fn from_raw(event: c_ulong) -> Option<Self> {
        Some(match b::netdev_cmd::try_from(event).ok()? {
            b::netdev_cmd_NETDEV_REGISTER => Self::Register,
            b::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            b::netdev_cmd_NETDEV_UP => Self::Up,
            b::netdev_cmd_NETDEV_DOWN => Self::Down,
            b::netdev_cmd_NETDEV_CHANGE => Self::Change,
            b::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            b::netdev_cmd_NETDEV_CHANGENAME => Self::ChangeName,
            b::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            _ => return None,
        })
    }
}

/// What a netdevice notifier calls.
pub trait NetdevHandler: Send + Sync + 'static {
    /// `event` happened to `netdev`. Called with RTNL held (so calls are
    /// serialised), in process context; `netdev` is valid for the call.
    fn event(&self, event: NetdevEvent, netdev: NetDev<'_>);
}

#[repr(C)]
struct Inner<H: NetdevHandler> {
    nb: Opaque<kernel::bindings::notifier_block>,
    handler: H,
}

/// A registered netdevice notifier; dropping it unregisters it.
///
/// Registering replays `Register` (and `Up` for running netdevs) for every
/// existing netdev; unregistering replays `Down` and `Unregister` for them
/// (`register_netdevice_notifier` semantics). Handlers that must not act on
/// the latter should check a flag of their own.
///
/// # Invariants
///
/// `inner.nb` is registered with `register_netdevice_notifier`, with
/// `Self::call` as its callback; `inner` is pinned and `nb` sits at offset 0.
pub struct NetdevNotifier<H: NetdevHandler> {
    inner: Pin<KBox<Inner<H>>>,
}

// SAFETY: the notifier block is only touched by the notifier chain (under
// its own locking) and on drop; the handler is `Send`.
unsafe impl<H: NetdevHandler> Send for NetdevNotifier<H> {}
// SAFETY: `&NetdevNotifier` only gives out `&H`, and `H` is `Sync`.
unsafe impl<H: NetdevHandler> Sync for NetdevNotifier<H> {}

impl<H: NetdevHandler> NetdevNotifier<H> {
    const LAYOUT_OK: () = assert!(core::mem::offset_of!(Inner<H>, nb) == 0);

    /// Registers a notifier calling `handler` (which sees the replayed
    /// events before this returns).
    pub fn register(handler: H) -> Result<Self> {
        let () = Self::LAYOUT_OK;
        let inner = KBox::pin(
            Inner {
                nb: Opaque::new(kernel::bindings::notifier_block {
                    notifier_call: Some(Self::call),
                    ..Default::default()
                }),
                handler,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `nb` is initialised and pinned in the box, which we only
        // free after unregistering it (`drop`); the callback only uses the
        // handler, which is initialised.
        kernel::error::to_result(unsafe { b::register_netdevice_notifier(inner.nb.get()) })?;
        // INVARIANT: registered.
        Ok(Self { inner })
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.inner.handler
    }

    extern "C" fn call(
        nb: *mut kernel::bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        let Some(event) = NetdevEvent::from_raw(event) else {
            return kernel::bindings::NOTIFY_DONE as c_int;
        };
        // SAFETY: the notifier chain calls us with the `nb` we registered,
        // which is the first field of a live `Inner<H>` (type invariant of
        // `NetdevNotifier`: it is unregistered before being freed), and with
        // a `struct netdev_notifier_info` whose netdev is valid for the call.
        let (inner, ndev) = unsafe {
            (
                &*nb.cast::<Inner<H>>(),
                b::netdev_notifier_info_to_dev(ptr.cast()),
            )
        };
        if let Some(ndev) = NonNull::new(ndev) {
            // SAFETY: the netdev is valid for the duration of the call.
            let ndev = unsafe { NetDev::from_raw(ndev) };
            inner.handler.event(event, ndev);
        }
        kernel::bindings::NOTIFY_DONE as c_int
    }
}

impl<H: NetdevHandler> Drop for NetdevNotifier<H> {
    fn drop(&mut self) {
        // SAFETY: registered (type invariant); this waits for running
        // callbacks (RTNL), after which nothing uses `inner`.
        unsafe { b::unregister_netdevice_notifier(self.inner.nb.get()) };
    }
}
