// SPDX-License-Identifier: GPL-2.0

//! Port state and MTU rules, pure, with their KUnit tests.
//!
//! * The port is ACTIVE when the device reports its link up (PORT_STATE
//!   bit, PORT_ACTIVE/PORT_DOWN events) and the paired netdev is running
//!   with carrier; each change of that is one `IB_EVENT_PORT_ACTIVE` or
//!   `IB_EVENT_PORT_ERR`.
//! * The active IB MTU follows the netdev MTU by ib_core's `iboe_get_mtu()`
//!   rule (which is also the device's, `device.rst` "PORT_MTU"): the largest
//!   of 256..4096 that fits in the Ethernet MTU minus 96 bytes of headers
//!   (IPv6 40 + UDP 8 + BTH 12 + extended headers 32 + ICRC 4).

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    rdma::PortEvent, //
};
use kernel::prelude::*;

/// Bytes of an Ethernet MTU that are not RoCE payload (`iboe_get_mtu`).
const ROCE_HEADERS: u32 = 40 + 8 + 12 + 28 + 4 + 4;

/// `enum ib_mtu` (= `FERROCE_MTU_*`) for an Ethernet MTU, 0 if even 256
/// bytes do not fit (`iboe_get_mtu`).
pub(crate) fn ib_mtu(eth_mtu: u32) -> u32 {
    let payload = eth_mtu.saturating_sub(ROCE_HEADERS);
    [
        (4096, hw::FERROCE_MTU_4096),
        (2048, hw::FERROCE_MTU_2048),
        (1024, hw::FERROCE_MTU_1024),
        (512, hw::FERROCE_MTU_512),
        (256, hw::FERROCE_MTU_256),
    ]
    .into_iter()
    .find(|&(bytes, _)| payload >= bytes)
    .map_or(0, |(_, mtu)| mtu)
}

/// The active IB MTU `query_port` reports for a netdev MTU: [`ib_mtu`],
/// at most the device's `max_path_mtu`, at least 256.
pub(crate) fn active_mtu(eth_mtu: u32, max_path_mtu: u32) -> u32 {
    ib_mtu(eth_mtu).min(max_path_mtu).max(hw::FERROCE_MTU_256)
}

/// The Ethernet MTU to program into the device for a netdev MTU: clamped
/// to what the device accepts (PORT_MTU_MIN..MAX).
pub(crate) fn device_mtu(eth_mtu: u32) -> u32 {
    eth_mtu.clamp(hw::FERROCE_PORT_MTU_MIN, hw::FERROCE_PORT_MTU_MAX)
}

/// The inputs of the port state and what was last reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PortState {
    /// The device's link bit.
    pub(crate) link: bool,
    /// The paired netdev is running with carrier (false when unpaired).
    pub(crate) netdev_up: bool,
    /// The state last reported to ib_core (ACTIVE or not).
    pub(crate) active: bool,
}

impl PortState {
    /// Whether the port is ACTIVE now.
    pub(crate) fn is_active(&self) -> bool {
        self.link && self.netdev_up
    }

    /// Records the current state as reported; returns the event to
    /// dispatch if it changed.
    pub(crate) fn update(&mut self) -> Option<PortEvent> {
        let now = self.is_active();
        if now == self.active {
            return None;
        }
        self.active = now;
        Some(if now {
            PortEvent::Active
        } else {
            PortEvent::Err
        })
    }
}

#[kunit_tests(ferroce_port)]
mod tests {
    use super::*;

    #[test]
    fn ib_mtu_rule() {
        assert_eq!(ib_mtu(1500), hw::FERROCE_MTU_1024);
        assert_eq!(ib_mtu(9000), hw::FERROCE_MTU_4096);
        assert_eq!(ib_mtu(4000), hw::FERROCE_MTU_2048);
        assert_eq!(ib_mtu(4096 + 96), hw::FERROCE_MTU_4096);
        assert_eq!(ib_mtu(4096 + 95), hw::FERROCE_MTU_2048);
        assert_eq!(ib_mtu(2048 + 96), hw::FERROCE_MTU_2048);
        assert_eq!(ib_mtu(1024 + 95), hw::FERROCE_MTU_512);
        assert_eq!(ib_mtu(576), hw::FERROCE_MTU_256);
        assert_eq!(ib_mtu(351), 0);
        assert_eq!(ib_mtu(0), 0);
    }

    #[test]
    fn active_mtu_is_clamped() {
        assert_eq!(active_mtu(9000, hw::FERROCE_MTU_2048), hw::FERROCE_MTU_2048);
        assert_eq!(active_mtu(100, hw::FERROCE_MTU_4096), hw::FERROCE_MTU_256);
        assert_eq!(active_mtu(1500, hw::FERROCE_MTU_4096), hw::FERROCE_MTU_1024);
    }

    #[test]
    fn device_mtu_is_clamped() {
        assert_eq!(device_mtu(1500), 1500);
        assert_eq!(device_mtu(68), hw::FERROCE_PORT_MTU_MIN);
        assert_eq!(device_mtu(65535), hw::FERROCE_PORT_MTU_MAX);
    }

    #[test]
    fn state_events_only_on_change() {
        let mut s = PortState::default();
        assert_eq!(s.update(), None);
        s.link = true;
        assert_eq!(s.update(), None);
        s.netdev_up = true;
        assert_eq!(s.update(), Some(PortEvent::Active));
        assert_eq!(s.update(), None);
        s.link = false;
        assert_eq!(s.update(), Some(PortEvent::Err));
        s.netdev_up = false;
        assert_eq!(s.update(), None);
        s.link = true;
        assert_eq!(s.update(), None);
        s.netdev_up = true;
        assert_eq!(s.update(), Some(PortEvent::Active));
    }
}
