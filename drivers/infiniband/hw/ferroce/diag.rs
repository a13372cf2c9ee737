// SPDX-License-Identifier: GPL-2.0

//! Telling the administrator why a RoCE path cannot work, and which GID
//! index would (driver.rst, "GID pitfalls").
//!
//! Link-local GIDs (`fe80::/64`) and RoCE v1 GIDs (Ethertype 0x8915, no IP
//! header) work inside one L2 segment only: across an IP router an RC QP
//! sends into the void until its retries run out. ib_core cannot tell, so
//! the driver notes at `modify_qp` (process context) whether a QP's path
//! is of that kind and which local entry would reach the peer, and warns
//! once when the device reports that the QP's retries ran out
//! (`QP_RETRY_EXCEEDED`). An sgid/dgid pair of different address families
//! cannot carry a single packet: it is refused with `EINVAL` and a warning.
//! The decisions are pure functions with KUnit tests.

#![forbid(unsafe_code)]

use crate::{
    gid::{
        Gid,
        GidKind, //
    },
    rdma::{
        GidEntry,
        GidType, //
    }, //
};
use core::{
    fmt,
    sync::atomic::{
        AtomicBool,
        AtomicU32,
        AtomicU64,
        Ordering, //
    }, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::SpinLockIrq,
    time::{
        Instant,
        Monotonic, //
    }, //
};

/// Why a path does not cross an IP router.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PathRisk {
    /// A RoCE v1 source GID: no IP header, the frames are not routable.
    RoceV1,
    /// A RoCE v2 link-local source GID (`fe80::/64`).
    LinkLocal,
}

/// The risk of a path from a source GID entry of `gid_type` with `sgid`.
pub(crate) fn risk_of(gid_type: GidType, sgid: &Gid) -> Option<PathRisk> {
    match (gid_type, sgid.kind()) {
        (GidType::RoceV1, _) => Some(PathRisk::RoceV1),
        (_, GidKind::LinkLocal) => Some(PathRisk::LinkLocal),
        _ => None,
    }
}

/// Whether a source and a destination GID can form a path: both
/// IPv4-mapped or both not (the network header has one address family).
pub(crate) fn same_family(sgid: &Gid, dgid: &Gid) -> bool {
    sgid.ipv4().is_some() == dgid.ipv4().is_some()
}

/// A local GID entry that reaches IP peers through routers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Routable {
    pub(crate) index: u32,
    pub(crate) gid: Gid,
}

/// The local entry to use instead of `sgid_index` towards `dgid`: a valid
/// RoCE v2 entry of the same port and netdev as `sgid_index` whose GID is
/// not link-local. Towards a global IPv6 `dgid` a non-mapped IPv6 entry is
/// preferred, otherwise (IPv4-mapped or link-local `dgid`) an IPv4-mapped
/// one; among equals the lowest index. `None` if `sgid_index` is not in
/// `table` or no entry qualifies.
pub(crate) fn routable(table: &[GidEntry], sgid_index: u32, dgid: &Gid) -> Option<Routable> {
    let sgid = table.iter().find(|e| e.index == sgid_index)?;
    let want_v6 = dgid.kind() == GidKind::Ipv6;
    let rank = |e: &GidEntry| -> Option<u8> {
        let same_dev = e.port == sgid.port && e.netdev_ifindex == sgid.netdev_ifindex;
        if !same_dev || e.gid_type != Some(GidType::RoceV2) {
            return None;
        }
        match (Gid(e.gid).kind(), want_v6) {
            (GidKind::LinkLocal, _) => None,
            (GidKind::Ipv6, true) | (GidKind::Ipv4Mapped, false) => Some(0),
            _ => Some(1),
        }
    };
    table
        .iter()
        .filter_map(|e| rank(e).map(|r| (r, e.index, e)))
        .min_by_key(|&(r, index, _)| (r, index))
        .map(|(_, index, e)| Routable {
            index,
            gid: Gid(e.gid),
        })
}

/// What the driver knows about a QP's path since its last `IB_QP_AV`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PathNote {
    pub(crate) risk: PathRisk,
    pub(crate) sgid_index: u8,
    pub(crate) fix: Option<Routable>,
}

/// The path state of a QP: written by `modify_qp`, read by the event path
/// (any context).
pub(crate) struct PathDiag {
    note: Pin<KBox<SpinLockIrq<Option<PathNote>>>>,
    /// Set once the QP has warned (at most one warning per QP).
    warned: AtomicBool,
}

impl PathDiag {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            note: KBox::pin_init(new_spinlock_irq!(None), GFP_KERNEL)?,
            warned: AtomicBool::new(false),
        })
    }

    /// Records the path of the QP's new address vector (`None`: it may
    /// cross routers).
    pub(crate) fn set(&self, note: Option<PathNote>) {
        *self.note.lock() = note;
    }

    /// The note to warn about on retry exhaustion, once per QP: `None` if
    /// the path is routable or the QP already warned.
    pub(crate) fn take_warning(&self) -> Option<PathNote> {
        let note = *self.note.lock();
        note.filter(|_| !self.warned.swap(true, Ordering::Relaxed))
    }
}

/// A simple rate limit shared by a device's path warnings: at most
/// `BURST` per `INTERVAL_MS` (printk's defaults, 10 per 5 s). Any context.
pub(crate) struct RateLimit {
    base: Instant<Monotonic>,
    window_start_ms: AtomicU64,
    printed: AtomicU32,
}

impl RateLimit {
    const INTERVAL_MS: u64 = 5000;
    const BURST: u32 = 10;

    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
            window_start_ms: AtomicU64::new(0),
            printed: AtomicU32::new(0),
        }
    }

    /// Whether one more message may be printed now.
    pub(crate) fn allow(&self) -> bool {
        let now = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(0);
        let start = self.window_start_ms.load(Ordering::Relaxed);
        if now.saturating_sub(start) >= Self::INTERVAL_MS
            && self
                .window_start_ms
                .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.printed.store(0, Ordering::Relaxed);
        }
        self.printed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < Self::BURST).then_some(n + 1)
            })
            .is_ok()
    }
}

/// The advice part of a warning: which index to use instead.
struct Advice(Option<Routable>);

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(r) => write!(f, "use GID index {} (RoCE v2, {})", r.index, r.gid),
            None => f.write_str(
                "no RoCE v2 GID with a routable address on this port: \
                 give its netdev an IP address",
            ),
        }
    }
}

/// The warning of a QP whose retries ran out on a non-routable path.
pub(crate) struct RetryWarning {
    pub(crate) qpn: u32,
    pub(crate) note: PathNote,
}

impl fmt::Display for RetryWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.note.risk {
            PathRisk::RoceV1 => "a RoCE v1",
            PathRisk::LinkLocal => "a link-local",
        };
        write!(
            f,
            "QP {:#x}: retries exceeded on {} path (sgid index {}); link-local and RoCE v1 GIDs do not cross IP routers, {}",
            self.qpn,
            what,
            self.note.sgid_index,
            Advice(self.note.fix)
        )
    }
}

/// The warning of an sgid/dgid pair that cannot carry a packet.
pub(crate) struct PairWarning {
    /// `Some(qpn)` for `modify_qp`, `None` for `create_ah`.
    pub(crate) qpn: Option<u32>,
    pub(crate) sgid_index: u8,
    pub(crate) gid_type: GidType,
    pub(crate) sgid: Gid,
    pub(crate) dgid: Gid,
    pub(crate) fix: Option<Routable>,
}

impl fmt::Display for PairWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.qpn {
            Some(qpn) => write!(f, "QP {qpn:#x}: ")?,
            None => f.write_str("AH: ")?,
        }
        let ty = match self.gid_type {
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
            GidType::Ib => "IB",
        };
        write!(
            f,
            "sgid index {} ({}, {}) and dgid {} are not of one address family \
             (IPv4-mapped or IPv6), refused; {} on both sides",
            self.sgid_index,
            ty,
            self.sgid,
            self.dgid,
            Advice(self.fix)
        )
    }
}

#[kunit_tests(ferroce_diag)]
mod tests {
    use super::*;
    use crate::gid::{
        ipv4_mapped_gid,
        link_local_gid, //
    };

    const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

    fn entry(index: u32, gid: Gid, ty: GidType, ifindex: u32) -> GidEntry {
        GidEntry {
            gid: gid.0,
            index,
            port: 1,
            gid_type: Some(ty),
            netdev_ifindex: ifindex,
        }
    }

    fn global_v6() -> Gid {
        Gid([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
    }

    /// ib_core's default layout for eth0 (ifindex 2) with one IPv4 and one
    /// global IPv6 address, plus a VLAN netdev's entries (ifindex 3).
    fn table() -> [GidEntry; 8] {
        let ll = link_local_gid(&MAC);
        let v4 = ipv4_mapped_gid([10, 0, 1, 2]);
        [
            entry(0, ll, GidType::RoceV1, 2),
            entry(1, ll, GidType::RoceV2, 2),
            entry(2, v4, GidType::RoceV1, 2),
            entry(3, v4, GidType::RoceV2, 2),
            entry(4, global_v6(), GidType::RoceV1, 2),
            entry(5, global_v6(), GidType::RoceV2, 2),
            entry(6, ipv4_mapped_gid([10, 1, 0, 2]), GidType::RoceV1, 3),
            entry(7, ipv4_mapped_gid([10, 1, 0, 2]), GidType::RoceV2, 3),
        ]
    }

    #[test]
    fn risks() {
        let v4 = ipv4_mapped_gid([10, 0, 1, 2]);
        let ll = link_local_gid(&MAC);
        assert_eq!(risk_of(GidType::RoceV1, &ll), Some(PathRisk::RoceV1));
        assert_eq!(risk_of(GidType::RoceV1, &v4), Some(PathRisk::RoceV1));
        assert_eq!(risk_of(GidType::RoceV2, &ll), Some(PathRisk::LinkLocal));
        assert_eq!(risk_of(GidType::RoceV2, &v4), None);
        assert_eq!(risk_of(GidType::RoceV2, &global_v6()), None);
    }

    #[test]
    fn families() {
        let v4 = ipv4_mapped_gid([10, 0, 2, 2]);
        let ll = link_local_gid(&MAC);
        assert!(same_family(&v4, &v4));
        assert!(same_family(&ll, &global_v6()));
        assert!(!same_family(&ll, &v4));
        assert!(!same_family(&v4, &ll));
        assert!(!same_family(&global_v6(), &v4));
    }

    #[test]
    fn routable_prefers_the_dgid_family() {
        let t = table();
        let v4_peer = ipv4_mapped_gid([10, 0, 2, 2]);
        let ll_peer = link_local_gid(&[0x52, 0x54, 0, 0, 0, 1]);
        for sgid in 0..6 {
            assert_eq!(routable(&t, sgid, &v4_peer).map(|r| r.index), Some(3));
            assert_eq!(routable(&t, sgid, &ll_peer).map(|r| r.index), Some(3));
            assert_eq!(routable(&t, sgid, &global_v6()).map(|r| r.index), Some(5));
        }
        // The VLAN netdev's entries answer for the VLAN netdev only.
        assert_eq!(routable(&t, 6, &v4_peer).map(|r| r.index), Some(7));
        assert_eq!(
            routable(&t, 0, &v4_peer).map(|r| r.gid),
            Some(ipv4_mapped_gid([10, 0, 1, 2]))
        );
        // Unknown sgid index.
        assert_eq!(routable(&t, 9, &v4_peer), None);
    }

    #[test]
    fn routable_falls_back_or_gives_up() {
        let t = table();
        // Only link-local and v1 entries: nothing routable.
        assert_eq!(routable(&t[..3], 0, &ipv4_mapped_gid([10, 0, 2, 2])), None);
        // No IPv6 address: an IPv6 peer gets the IPv4 entry.
        assert_eq!(routable(&t[..4], 0, &global_v6()).map(|r| r.index), Some(3));
        // No IPv4 address: an IPv4 peer gets the IPv6 entry.
        let no_v4 = [t[0], t[1], t[4], t[5]];
        assert_eq!(
            routable(&no_v4, 0, &ipv4_mapped_gid([10, 0, 2, 2])).map(|r| r.index),
            Some(5)
        );
    }

    #[test]
    fn warns_once_per_qp() {
        let d = PathDiag::new().unwrap();
        assert_eq!(d.take_warning(), None);
        let note = PathNote {
            risk: PathRisk::RoceV1,
            sgid_index: 0,
            fix: None,
        };
        d.set(Some(note));
        assert_eq!(d.take_warning(), Some(note));
        assert_eq!(d.take_warning(), None);
        d.set(Some(note));
        assert_eq!(d.take_warning(), None);
    }

    #[test]
    fn rate_limit_bursts() {
        let r = RateLimit::new();
        let allowed = (0..25).filter(|_| r.allow()).count();
        assert_eq!(allowed, RateLimit::BURST as usize);
    }
}
