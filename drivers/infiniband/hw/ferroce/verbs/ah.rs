// SPDX-License-Identifier: GPL-2.0

//! Address handles, and the address vector and path checks that modify_qp
//! shares with them.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    diag::{
        self,
        PairWarning,
        PathNote, //
    },
    gid::Gid,
    ib::{
        gid_network_type,
        IbDev,
        VLAN_VALID, //
    },
    rdma::{
        self,
        AhAttr,
        UData, //
    }, //
};
use core::sync::atomic::Ordering;
use kernel::prelude::*;

/// Driver state of an AH: the device's AH number of a user AH, or 0 for a
/// kernel AH, whose address vector goes into each WQE (kernel AHs are
/// created in atomic context, where no admin command can run).
pub(crate) struct Ah {
    pub(crate) ahn: u32,
    pub(crate) av: hw::ferroce_av,
}

/// The device's address vector for an ib_core one (RoCE: GRH always, the
/// destination MAC resolved by ib_core, the network type from the source
/// GID entry).
pub(super) fn av_of(attr: &AhAttr<'_>) -> Result<hw::ferroce_av> {
    let sgid = attr.sgid_attr().ok_or(EINVAL)?;
    if !attr.has_grh() {
        return Err(EINVAL);
    }
    let gid_type = sgid.gid_type().ok_or(EINVAL)?;
    let (_, network_type) = gid_network_type(gid_type, &Gid(sgid.gid()))?;
    // The device tags frames with the sgid entry's VLAN; the AV repeats it
    // and gives the priority (ib_core's sl), only for tagged entries, which
    // exist only on CAP_VLAN devices.
    let vlan = sgid.l2_fields().ok().and_then(|(vlan, _)| vlan);
    Ok(hw::ferroce_av {
        vlan: vlan.map_or(0, |vid| VLAN_VALID | vid),
        sl: if vlan.is_some() { attr.sl() & 7 } else { 0 },
        dgid: attr.dgid(),
        dmac: attr.dmac(),
        sgid_index: attr.sgid_index(),
        hop_limit: attr.hop_limit(),
        flow_label: attr.flow_label() & hw::FERROCE_FLOW_LABEL_MASK,
        traffic_class: attr.traffic_class(),
        network_type,
        ..Default::default()
    })
}

/// Checks the source/destination GID pair of an address vector before it
/// reaches the device (driver.rst, "GID pitfalls"): a pair of different
/// address families is refused with `EINVAL` and one (rate-limited)
/// warning naming the GID index that would work. Otherwise returns what
/// the retry warning needs to know about the path: `Some` if it cannot
/// cross a router (RoCE v1 or link-local source GID). Process context.
pub(super) fn check_path(
    dev: &rdma::Device<IbDev>,
    qpn: Option<u32>,
    av: &AhAttr<'_>,
) -> Result<Option<PathNote>> {
    let sgid_attr = av.sgid_attr().ok_or(EINVAL)?;
    let gid_type = sgid_attr.gid_type().ok_or(EINVAL)?;
    let (sgid, dgid) = (Gid(sgid_attr.gid()), Gid(av.dgid()));
    let mismatch = !diag::same_family(&sgid, &dgid);
    let risk = diag::risk_of(gid_type, &sgid);
    if !mismatch && risk.is_none() {
        return Ok(None);
    }
    // Only unusual paths pay for a copy of the GID table.
    let max = usize::try_from(dev.caps.gid_table_len)?;
    let fix = av
        .gid_table(max)
        .ok()
        .and_then(|t| diag::routable(&t, u32::from(av.sgid_index()), &dgid));
    if mismatch {
        if dev.shared.path_warn.allow() {
            dev.shared
                .stats
                .path_warnings
                .fetch_add(1, Ordering::Relaxed);
            let w = PairWarning {
                qpn,
                sgid_index: av.sgid_index(),
                gid_type,
                sgid,
                dgid,
                fix,
            };
            dev.warn(format_args!("{w}\n"));
        }
        return Err(EINVAL);
    }
    Ok(risk.map(|risk| PathNote {
        risk,
        sgid_index: av.sgid_index(),
        fix,
    }))
}

/// `create_ah`: the device keeps the address vector; UD WQEs name it.
pub(crate) fn create_ah(
    dev: &rdma::Device<IbDev>,
    pd: &crate::ib::Pd,
    attr: &AhAttr<'_>,
    udata: Option<&mut UData<'_>>,
) -> Result<Ah> {
    check_path(dev, None, attr)?;
    let cmd = hw::ferroce_cmd_create_ah {
        pdn: pd.pdn,
        av: av_of(attr)?,
        ..Default::default()
    };
    let ah = Ah {
        ahn: dev.shared.exec(&cmd)?.out[0],
        av: cmd.av,
    };
    if let Some(udata) = udata {
        if let Err(e) = udata.respond(&hw::ferroce_uresp_create_ah {
            ahn: ah.ahn,
            ..Default::default()
        }) {
            // The caller sees why the command failed. A refused destroy
            // is logged by `exec_destroy`; that AH then only holds a
            // device slot until the next reset.
            return match destroy_ah(dev, &ah) {
                Ok(()) | Err(_) => Err(e),
            };
        }
    }
    Ok(ah)
}

pub(crate) fn destroy_ah(dev: &rdma::Device<IbDev>, ah: &Ah) -> Result {
    if ah.ahn == 0 {
        // A kernel AH: the device never knew it.
        return Ok(());
    }
    let cmd = hw::ferroce_cmd_destroy_ah {
        ahn: ah.ahn,
        ..Default::default()
    };
    dev.shared.exec_destroy(&cmd)
}

/// `create_ah` for a kernel consumer: only the address vector, kept for the
/// WQEs (no admin command: this runs in atomic context).
pub(crate) fn create_kernel_ah(attr: &AhAttr<'_>) -> Result<Ah> {
    Ok(Ah {
        ahn: 0,
        av: av_of(attr)?,
    })
}
