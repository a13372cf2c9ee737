// SPDX-License-Identifier: GPL-2.0
//! The hardware GID table.

use serde::Serialize;
use std::net::Ipv6Addr;

use crate::hw;

/// One valid hardware GID entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GidEntry {
    /// Table index.
    pub index: u16,
    /// The GID (network order).
    #[serde(serialize_with = "ser_gid")]
    pub gid: [u8; 16],
    /// `GID_TYPE_*`.
    pub gid_type: u8,
    /// `NET_*`.
    pub network_type: u8,
    /// Source MAC of frames sent with this entry.
    #[serde(serialize_with = "ser_mac")]
    pub smac: [u8; 6],
    /// The entry's 802.1Q VLAN ID, `None` if untagged.
    pub vlan: Option<u16>,
}

impl GidEntry {
    /// The VLAN ID frames of this entry carry, 0 when untagged (the same
    /// number a priority-tagged frame has).
    pub fn vid(&self) -> u16 {
        self.vlan.unwrap_or(0)
    }

    /// Source IP template of this entry: the IPv4 address of an IPv4-mapped
    /// GID, the IPv6 address itself otherwise.
    pub fn source_ip(&self) -> std::net::IpAddr {
        let v6 = Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => v4.into(),
            None => v6.into(),
        }
    }
}

/// Whether `gid` is an IPv4-mapped address (`::ffff:a.b.c.d`).
pub fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// Whether `gid` names a multicast group (1.7, device.rst "Multicast"):
/// `ff00::/8`, or IPv4-mapped with the address in `224.0.0.0/4` (what
/// ib_core's `rdma_is_multicast_addr` accepts).
pub fn is_multicast(gid: &[u8; 16]) -> bool {
    gid[0] == 0xff || (is_ipv4_mapped(gid) && gid[12] & 0xf0 == 0xe0)
}

/// The network type a GID of `gid_type` must have (`NET_*`).
pub fn expected_network_type(gid_type: u8, gid: &[u8; 16]) -> u8 {
    if gid_type == hw::GID_TYPE_ROCE_V1 {
        hw::NET_ROCE_V1
    } else if is_ipv4_mapped(gid) {
        hw::NET_IPV4
    } else {
        hw::NET_IPV6
    }
}

/// The EUI-64 link-local GID of a MAC: fe80:: + MAC with ff:fe inserted in
/// the middle and the U/L bit (0x02) of the first byte flipped.
pub fn eui64_link_local(mac: [u8; 6]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = mac[0] ^ 0x02;
    g[9] = mac[1];
    g[10] = mac[2];
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13] = mac[3];
    g[14] = mac[4];
    g[15] = mac[5];
    g
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut n = 0;
    for part in s.split(':') {
        let slot = mac.get_mut(n)?;
        if part.len() != 2 {
            return None;
        }
        *slot = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(mac)
}

pub(crate) fn ser_gid<S: serde::Serializer>(g: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&Ipv6Addr::from(*g).to_string())
}

fn ser_mac<S: serde::Serializer>(m: &[u8; 6], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fmt_mac(m))
}
