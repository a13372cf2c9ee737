// SPDX-License-Identifier: GPL-2.0

//! GID conversions for RoCE.
//!
//! ib_core's `roce_gid_mgmt` turns netdev MAC and IP events into GID table
//! entries; the driver only has to understand the entries it is handed, to
//! classify them and to derive the source address the device puts on the
//! wire. These are the pure conversions for that, with their KUnit tests:
//!
//! * MAC -> modified EUI-64 interface identifier (RFC 4291 appendix A: insert
//!   `ff:fe` in the middle, invert the universal/local bit `0x02` of the first
//!   byte), and the default link-local GID `fe80::/64` + EUI-64;
//! * IPv4 address <-> IPv4-mapped GID `::ffff:a.b.c.d`;
//! * classification of a GID (link-local, IPv4-mapped, other IPv6).

#![forbid(unsafe_code)]

use core::fmt;
use kernel::prelude::*;

/// A 128-bit RoCE GID in network byte order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Gid(pub(crate) [u8; 16]);

/// What kind of address a RoCE GID carries, which decides the network header
/// the device builds for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum GidKind {
    /// `fe80::/64`: valid only inside one L2 domain, never routed.
    LinkLocal,
    /// `::ffff:a.b.c.d`: RoCE v2 over IPv4 (v1: the GRH carries it as is).
    Ipv4Mapped,
    /// Any other IPv6 address.
    Ipv6,
}

/// Returns the modified EUI-64 interface identifier of a MAC address.
pub(crate) fn eui64_interface_id(mac: &[u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Returns the default link-local GID (`fe80::` + EUI-64) of a MAC address.
pub(crate) fn link_local_gid(mac: &[u8; 6]) -> Gid {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8..].copy_from_slice(&eui64_interface_id(mac));
    Gid(gid)
}

/// Returns the IPv4-mapped GID `::ffff:a.b.c.d` of an IPv4 address.
pub(crate) fn ipv4_mapped_gid(addr: [u8; 4]) -> Gid {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&addr);
    Gid(gid)
}

impl Gid {
    /// Returns the IPv4 address of an IPv4-mapped GID, `None` otherwise.
    pub(crate) fn ipv4(&self) -> Option<[u8; 4]> {
        let g = &self.0;
        if g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff {
            Some([g[12], g[13], g[14], g[15]])
        } else {
            None
        }
    }

    /// Classifies the GID.
    pub(crate) fn kind(&self) -> GidKind {
        if self.ipv4().is_some() {
            GidKind::Ipv4Mapped
        } else if self.0[0] == 0xfe && (self.0[1] & 0xc0) == 0x80 {
            GidKind::LinkLocal
        } else {
            GidKind::Ipv6
        }
    }
}

/// RFC 5952 text: `::ffff:a.b.c.d` for an IPv4-mapped GID, otherwise
/// lower-case groups without leading zeros and the longest run of two or
/// more zero groups (the first of equal runs) written `::`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some([a, b, c, d]) = self.ipv4() {
            return write!(f, "::ffff:{a}.{b}.{c}.{d}");
        }
        let groups: [u16; 8] =
            core::array::from_fn(|i| u16::from_be_bytes([self.0[2 * i], self.0[2 * i + 1]]));
        // The longest run of zero groups: (start, length).
        let (mut best, mut run) = ((0, 0), (0, 0));
        for (i, &g) in groups.iter().enumerate() {
            if g == 0 {
                run = if run.1 == 0 {
                    (i, 1)
                } else {
                    (run.0, run.1 + 1)
                };
                if run.1 > best.1 {
                    best = run;
                }
            } else {
                run = (0, 0);
            }
        }
        let mut i = 0;
        while i < 8 {
            if best.1 >= 2 && i == best.0 {
                f.write_str(if i == 0 { "::" } else { ":" })?;
                i += best.1;
                continue;
            }
            write!(f, "{:x}", groups[i])?;
            if i < 7 {
                f.write_str(":")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[kunit_tests(ferroce_gid)]
mod tests {
    use super::*;

    /// The seed article's example, with the universal/local bit flipped
    /// correctly (0xf8 ^ 0x02 = 0xfa; the article prints 0xf8 by mistake).
    #[test]
    fn seed_example_mac() {
        let mac = [0xf8, 0x27, 0x00, 0x00, 0x1d, 0xa7];
        let want = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xfa, 0x27, 0x00, 0xff, 0xfe, 0x00, 0x1d, 0xa7,
        ];
        assert_eq!(link_local_gid(&mac), Gid(want));
        assert_eq!(link_local_gid(&mac).kind(), GidKind::LinkLocal);
    }

    /// A locally administered MAC (QEMU's 52:54:00:...) loses the U/L bit.
    #[test]
    fn local_mac_clears_ul_bit() {
        let iid = eui64_interface_id(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(iid, [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]);
    }

    #[test]
    fn ipv4_round_trip() {
        let gid = ipv4_mapped_gid([10, 0, 1, 36]);
        assert_eq!(
            gid.0,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 1, 36]
        );
        assert_eq!(gid.kind(), GidKind::Ipv4Mapped);
        assert_eq!(gid.ipv4(), Some([10, 0, 1, 36]));
    }

    /// Formats `gid` into a fixed buffer (no allocation in KUnit).
    fn text(gid: &Gid, buf: &mut [u8; 48]) -> usize {
        struct W<'a>(&'a mut [u8; 48], usize);
        impl fmt::Write for W<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                let end = self.1 + s.len();
                self.0
                    .get_mut(self.1..end)
                    .ok_or(fmt::Error)?
                    .copy_from_slice(s.as_bytes());
                self.1 = end;
                Ok(())
            }
        }
        let mut w = W(buf, 0);
        fmt::write(&mut w, format_args!("{gid}")).unwrap();
        w.1
    }

    #[test]
    fn display() {
        let mut buf = [0u8; 48];
        let cases: [(Gid, &[u8]); 5] = [
            (ipv4_mapped_gid([10, 0, 2, 2]), b"::ffff:10.0.2.2"),
            (
                link_local_gid(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
                b"fe80::5054:ff:fe12:3456",
            ),
            (Gid([0; 16]), b"::"),
            (
                Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]),
                b"2001:db8:0:1::1",
            ),
            (
                Gid([0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]),
                b"fd00:0:0:1::1",
            ),
        ];
        for (gid, want) in cases {
            let n = text(&gid, &mut buf);
            assert_eq!(&buf[..n], want);
        }
    }

    #[test]
    fn classification() {
        let mut global = [0u8; 16];
        global[0] = 0x20;
        global[1] = 0x01;
        global[15] = 1;
        assert_eq!(Gid(global).kind(), GidKind::Ipv6);
        assert_eq!(Gid(global).ipv4(), None);
        // ::ffff:0:0/96 needs the ffff marker; ::a.b.c.d (compat) is not mapped.
        let mut compat = [0u8; 16];
        compat[12..].copy_from_slice(&[10, 0, 1, 36]);
        assert_eq!(Gid(compat).kind(), GidKind::Ipv6);
    }
}
