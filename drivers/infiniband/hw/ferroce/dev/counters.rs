// SPDX-License-Identifier: GPL-2.0

//! The driver's counters and the debugfs directory that shows them.

#![forbid(unsafe_code)]

use super::Shared;
use crate::{
    bindings as hw,
    dbrec::DbRecPool, //
};
use core::sync::atomic::{
    AtomicU64,
    Ordering, //
};
use kernel::{
    debugfs,
    prelude::*,
    sync::Arc, //
};

/// Driver counters.
#[derive(Default)]
pub(crate) struct Stats {
    /// COMPLETION events for a CQ number the driver does not know (dropped).
    pub(crate) unknown_cq_events: AtomicU64,
    /// Async events for objects the driver does not know (dropped).
    pub(crate) unknown_obj_events: AtomicU64,
    /// EQEs of an unknown type (dropped).
    pub(crate) unknown_events: AtomicU64,
    /// CMD_COMPLETION events (commands are polled; counted only).
    pub(crate) cmd_events: AtomicU64,
    /// GIDs of VLAN netdevs refused by `add_gid` (devices without CAP_VLAN).
    pub(crate) vlan_gids_rejected: AtomicU64,
    /// Admin command completions by `FERROCE_STATUS_*` (0 = success).
    pub(crate) cmd_status: [AtomicU64; hw::FERROCE_STATUS_COUNT as usize],
    /// Admin commands the device did not answer in time.
    pub(crate) cmd_timeouts: AtomicU64,
    /// COMPLETION events delivered to a CQ's handler.
    pub(crate) cq_events: AtomicU64,
    /// QP async events passed on to their QP.
    pub(crate) qp_events: AtomicU64,
    /// QP_RETRY_EXCEEDED events (informational, counted only).
    pub(crate) qp_retry_exceeded: AtomicU64,
    /// Warnings about GID pairs and paths that cannot work (diag.rs).
    pub(crate) path_warnings: AtomicU64,
}

/// The debugfs name of admin completion status `status`
/// (`FERROCE_STATUS_*`), if the device model defines it.
fn status_name(status: u32) -> Option<&'static str> {
    Some(match status {
        hw::FERROCE_STATUS_SUCCESS => "ok",
        hw::FERROCE_STATUS_BAD_OPCODE => "bad_opcode",
        hw::FERROCE_STATUS_BAD_PARAM => "bad_param",
        hw::FERROCE_STATUS_BAD_RESERVED => "bad_reserved",
        hw::FERROCE_STATUS_BAD_HANDLE => "bad_handle",
        hw::FERROCE_STATUS_BAD_STATE => "bad_state",
        hw::FERROCE_STATUS_BAD_ATTR_MASK => "bad_attr_mask",
        hw::FERROCE_STATUS_NO_RESOURCES => "no_resources",
        hw::FERROCE_STATUS_BUSY => "busy",
        hw::FERROCE_STATUS_DMA_ERROR => "dma_error",
        hw::FERROCE_STATUS_NOT_SUPPORTED => "not_supported",
        _ => return None,
    })
}

impl Stats {
    /// The debugfs `counters` file: one `name value` line each.
    fn show(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        for (i, c) in self.cmd_status.iter().enumerate() {
            match u32::try_from(i).ok().and_then(status_name) {
                Some(name) => writeln!(f, "cmd_{} {}", name, r(c))?,
                None if r(c) != 0 => writeln!(f, "cmd_status_{} {}", i, r(c))?,
                None => {}
            }
        }
        writeln!(f, "cmd_timeouts {}", r(&self.cmd_timeouts))?;
        writeln!(f, "cmd_events {}", r(&self.cmd_events))?;
        writeln!(f, "cq_events {}", r(&self.cq_events))?;
        writeln!(f, "qp_events {}", r(&self.qp_events))?;
        writeln!(f, "unknown_cq_events {}", r(&self.unknown_cq_events))?;
        writeln!(f, "unknown_obj_events {}", r(&self.unknown_obj_events))?;
        writeln!(f, "unknown_events {}", r(&self.unknown_events))?;
        writeln!(f, "vlan_gids_rejected {}", r(&self.vlan_gids_rejected))?;
        writeln!(f, "qp_retry_exceeded {}", r(&self.qp_retry_exceeded))?;
        writeln!(f, "path_warnings {}", r(&self.path_warnings))
    }
}

/// The debugfs directory `ferroce/<ibdev>/` with the `counters` file.
pub(super) struct Debugfs {
    /// Removed first.
    _scope: Pin<KBox<debugfs::Scope<Arc<Shared>>>>,
    _root: debugfs::Dir,
}

impl Debugfs {
    /// Best effort: `None` if debugfs is unavailable (a second ferroce
    /// device shares the root, which already exists).
    pub(super) fn new(shared: &Arc<Shared>, name: &CStr) -> Option<Self> {
        let root = debugfs::Dir::new(c"ferroce");
        let scope = root.scope(shared.clone(), name, |shared, dir| {
            dir.read_callback_file(c"counters", &shared.stats, &Stats::show);
            dir.read_callback_file(c"dbrecs", &*shared.dbrecs, &DbRecPool::show);
        });
        let scope = KBox::pin_init(scope, GFP_KERNEL).ok()?;
        Some(Self {
            _scope: scope,
            _root: root,
        })
    }
}
