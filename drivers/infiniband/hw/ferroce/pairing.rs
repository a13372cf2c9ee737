// SPDX-License-Identifier: GPL-2.0

//! The pairing of the port with a netdev: a netdevice notifier, the erdma
//! way, by permanent MAC; then the netdev's state, MTU and MAC followed.

#![forbid(unsafe_code)]

use crate::{
    dev::{
        Mac,
        Shared, //
    },
    rdma::{
        EventRef,
        NetDev,
        NetdevEvent,
        NetdevHandler, //
    }, //
};
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// The netdev notifier's handler: pairs the port with the netdev whose
/// permanent MAC is the port's, follows its state and MTU, and drops it on
/// unregistration. Runs under RTNL, so calls are serialised.
pub(crate) struct PortWatch {
    shared: Arc<Shared>,
    ib: EventRef,
    /// The port's permanent MAC (PORT_MAC), the pairing key.
    mac: [u8; 6],
    /// The device has SET_PORT_MAC (`CAP_PORT_MAC`).
    can_set_mac: bool,
    /// Set before the notifier is unregistered: the replayed
    /// `NETDEV_DOWN`/`NETDEV_UNREGISTER` events are then ignored (the
    /// `ib_device` is unregistered right after, dropping the pairing).
    closing: AtomicBool,
}

impl PortWatch {
    /// A handler for the port whose permanent MAC is `mac`; `can_set_mac`:
    /// the device has SET_PORT_MAC.
    pub(crate) fn new(shared: Arc<Shared>, ib: EventRef, mac: [u8; 6], can_set_mac: bool) -> Self {
        Self {
            shared,
            ib,
            mac,
            can_set_mac,
            closing: AtomicBool::new(false),
        }
    }

    /// Ignore the events from now on: the notifier is about to be
    /// unregistered, and the `ib_device` with it.
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Has ib_core rebuild the GID table of the port (`EventRef`).
    pub(crate) fn rescan_gids(&self) {
        self.ib.rescan_gids();
    }

    fn pair(&self, nd: NetDev<'_>) {
        if let Err(e) = self.ib.set_netdev(Some(nd), 1) {
            dev_err!(
                self.shared.dev(),
                "cannot pair with {}: error {}\n",
                nd.name(),
                e.to_errno()
            );
            return;
        }
        dev_info!(
            self.shared.dev(),
            "paired with {} (MAC {})\n",
            nd.name(),
            Mac(&self.mac)
        );
        self.sync_mtu(nd);
        if nd.mac().is_some_and(|m| m != self.mac) {
            self.sync_mac(nd);
        }
        let up = nd.oper_up();
        self.shared.update_port(|s| s.netdev_up = up);
        // No GID rescan here (it takes RTNL): for a netdev registering now,
        // roce_gid_mgmt's own deferred work for the event sees the pairing;
        // at probe, probe asks for a rescan once the notifier is in place.
    }

    fn unpair(&self, nd: NetDev<'_>) {
        dev_info!(self.shared.dev(), "{} unregistering, unpaired\n", nd.name());
        self.shared.update_port(|s| s.netdev_up = false);
        if let Err(e) = self.ib.set_netdev(None, 1) {
            dev_err!(
                self.shared.dev(),
                "unpairing failed: error {}\n",
                e.to_errno()
            );
        }
    }

    /// Has the device steer RoCE frames for the netdev's current MAC (the
    /// GIDs follow by themselves: ib_core re-adds them with the new MAC).
    fn sync_mac(&self, nd: NetDev<'_>) {
        let Some(mac) = nd.mac() else {
            return;
        };
        if !self.can_set_mac {
            dev_warn!(
                self.shared.dev(),
                "{} has MAC {}, but the device cannot follow (no CAP_PORT_MAC): \
                 RoCE still uses {}\n",
                nd.name(),
                Mac(&mac),
                Mac(&self.mac)
            );
            return;
        }
        match self.shared.set_port_mac(mac) {
            Ok(()) => dev_info!(
                self.shared.dev(),
                "{} has MAC {}: RoCE follows\n",
                nd.name(),
                Mac(&mac)
            ),
            Err(e) => dev_warn!(
                self.shared.dev(),
                "SET_PORT_MAC {} failed: error {}\n",
                Mac(&mac),
                e.to_errno()
            ),
        }
    }

    fn sync_mtu(&self, nd: NetDev<'_>) {
        let mtu = nd.mtu();
        if let Err(e) = self.shared.set_port_mtu(mtu) {
            dev_warn!(
                self.shared.dev(),
                "SET_PORT_MTU {} failed: error {}\n",
                mtu,
                e.to_errno()
            );
        }
    }
}

/// The MAC a port pairs by: the netdev's permanent address, or `dev_addr`
/// if it has none. `None` for netdevs that carry a port's MAC without being
/// its own: anything not Ethernet, VLANs, bridge and bond masters.
fn pair_mac(nd: &NetDev<'_>) -> Option<[u8; 6]> {
    if !nd.is_ether() || nd.is_vlan() || nd.is_bridge_master() || nd.is_lag_master() {
        return None;
    }
    nd.perm_addr().filter(|a| *a != [0; 6]).or_else(|| nd.mac())
}

impl NetdevHandler for PortWatch {
    fn event(&self, event: NetdevEvent, nd: NetDev<'_>) {
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        let paired = self.ib.netdev(1);
        let is_ours = paired.as_ref().is_some_and(|p| p.get().same_as(&nd));
        match event {
            NetdevEvent::Register if paired.is_none() => {
                if pair_mac(&nd) == Some(self.mac) {
                    self.pair(nd);
                }
            }
            _ if !is_ours => {}
            NetdevEvent::Unregister => {
                // Drop our reference before ib_core's goes.
                drop(paired);
                self.unpair(nd);
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                let up = nd.oper_up();
                self.shared.update_port(|s| s.netdev_up = up);
            }
            NetdevEvent::ChangeMtu => self.sync_mtu(nd),
            NetdevEvent::ChangeName => {
                dev_info!(self.shared.dev(), "paired netdev is now {}\n", nd.name());
            }
            // roce_gid_mgmt re-adds the default GIDs; add_gid takes the new
            // MAC from the netdev.
            NetdevEvent::ChangeAddr => self.sync_mac(nd),
            NetdevEvent::Register => {}
        }
    }
}
