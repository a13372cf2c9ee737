// SPDX-License-Identifier: GPL-2.0

//! The verbs of the ferroce `ib_device` (device and port queries, P_Key,
//! user contexts, PDs, GID table; the user objects are in `verbs`) on top
//! of the safe `rdma` layer.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    dev::{
        Caps,
        PortInfo,
        Shared, //
    },
    gid::{
        self,
        Gid,
        GidKind, //
    },
    hw_stats,
    port,
    rdma::{
        self,
        AhAttr,
        GidAttr,
        GidType,
        LinkLayer,
        QpAttr,
        QpInit,
        UData, //
    },
    srq::{
        self,
        Srq, //
    },
    verbs::{
        self,
        Ah,
        Cq,
        DbPages,
        Mr,
        Mw,
        Qp,
        UContext, //
    }, //
};
use core::sync::atomic::{
    AtomicU16,
    AtomicU32,
    AtomicU8,
    Ordering, //
};
use kernel::{
    num::casts::{
        u32_into_u16,
        u32_into_u8,
        FromSafeCast, //
    },
    prelude::*,
    sync::Arc, //
};

/// Driver state of the ferroce `ib_device`.
pub(crate) struct IbDev {
    pub(crate) shared: Arc<Shared>,
    pub(crate) caps: Caps,
    pub(crate) port: PortInfo,
    pub(crate) node_guid: [u8; 8],
    /// Number of completion vectors (CEQs 1..=num_ceqs).
    pub(crate) num_ceqs: u32,
    /// The doorbell pages of BAR2, as user contexts may map them.
    pub(crate) db_region: rdma::MmioRegion,
    /// Doorbell pages of user contexts.
    pub(crate) db_pages: DbPages,
    /// Last MR key variant handed out (wrapping: only its low byte is used).
    pub(crate) key_variant: AtomicU8,
    /// CQs the device has (or may still have: CQs whose destroy failed stay
    /// counted).
    pub(crate) cqs_live: AtomicU32,
    /// The `vlan` field of each GID entry given to the device (0 or
    /// `VLAN_VALID | id`), for the VLAN of UD receives (`CQE_GID_INDEX`).
    pub(crate) gid_vlans: [AtomicU16; hw::FERROCE_GID_TABLE_LEN as usize],
}

impl IbDev {
    /// The most CQs the driver creates: the device's limit, and at most a
    /// CEQ's depth, so that no CEQ can overflow (each CQ posts at most one
    /// COMPLETION per arming, device.rst "Overflow"; the device drops
    /// events on a full EQ).
    pub(crate) fn max_cq(&self) -> u32 {
        self.caps.max_cq.min(u32::from(crate::eq::CEQ_DEPTH))
    }

    /// Counts a CQ about to be created; `ENOSPC` at [`IbDev::max_cq`].
    pub(crate) fn reserve_cq(&self) -> Result {
        let max = self.max_cq();
        self.cqs_live
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOSPC)
    }

    /// Uncounts a CQ the device does not have (any more).
    pub(crate) fn release_cq(&self) {
        self.cqs_live.fetch_sub(1, Ordering::AcqRel);
    }

    /// The key variant of the next MR (bits 7:0 of its key), so that keys of
    /// a freed MR index do not match its next user.
    pub(crate) fn next_key_variant(&self) -> u8 {
        const MASK: u8 = u32_into_u8::<{ hw::FERROCE_KEY_VARIANT_MASK }>();
        self.key_variant.fetch_add(1, Ordering::Relaxed) & MASK
    }
}

/// Driver state of a protection domain.
pub(crate) struct Pd {
    pub(crate) pdn: u32,
}

/// `FERROCE_VLAN_VALID` and `FERROCE_VLAN_ID_MASK`, for the 16-bit `vlan`
/// fields of the GID entry, the AV and [`IbDev::gid_vlans`].
pub(crate) const VLAN_VALID: u16 = u32_into_u16::<{ hw::FERROCE_VLAN_VALID }>();
pub(crate) const VLAN_ID_MASK: u16 = u32_into_u16::<{ hw::FERROCE_VLAN_ID_MASK }>();

/// The device's GID type and network type of an entry.
pub(crate) fn gid_network_type(gid_type: GidType, gid: &Gid) -> Result<(u8, u8)> {
    match gid_type {
        GidType::RoceV1 => Ok((
            u32_into_u8::<{ hw::FERROCE_GID_TYPE_ROCE_V1 }>(),
            u32_into_u8::<{ hw::FERROCE_NET_ROCE_V1 }>(),
        )),
        GidType::RoceV2 => Ok((
            u32_into_u8::<{ hw::FERROCE_GID_TYPE_ROCE_V2 }>(),
            match gid.kind() {
                GidKind::Ipv4Mapped => u32_into_u8::<{ hw::FERROCE_NET_IPV4 }>(),
                GidKind::LinkLocal | GidKind::Ipv6 => u32_into_u8::<{ hw::FERROCE_NET_IPV6 }>(),
            },
        )),
        GidType::Ib => Err(EINVAL),
    }
}

#[vtable]
impl rdma::Driver for IbDev {
    type UContext = UContext;
    type Pd = Pd;
    type Cq = Cq;
    type Qp = Qp;
    type Mr = Mr;
    type Ah = Ah;
    type Srq = Srq;
    type Mw = Mw;

    const UVERBS_ABI_VERSION: u32 = hw::FERROCE_UVERBS_ABI_VERSION;
    const DRIVER_ID: hw::rdma_driver_id = hw::rdma_driver_id_RDMA_DRIVER_FERROCE;
    const NODE_TYPE: rdma::NodeType = rdma::NodeType::Ca;

    fn query_device(dev: &rdma::Device<Self>, attr: &mut rdma::DeviceAttr) -> Result {
        let c = &dev.caps;
        attr.fw_ver = c.fw_version;
        attr.sys_image_guid = u64::from_ne_bytes(dev.node_guid);
        attr.max_mr_size = c.max_mr_size;
        attr.page_size_cap = c.page_size_cap;
        attr.vendor_id = hw::FERROCE_PCI_VENDOR_ID;
        attr.vendor_part_id = hw::FERROCE_PCI_DEVICE_ID;
        attr.hw_ver = hw::FERROCE_PCI_REVISION;
        attr.max_qp = c.max_qp;
        attr.max_qp_wr = c.max_qp_wr;
        attr.max_send_sge = c.max_sge;
        attr.max_recv_sge = c.max_sge;
        attr.max_sge_rd = c.max_sge;
        attr.max_cq = dev.max_cq();
        attr.max_cqe = c.max_cqe;
        attr.max_mr = c.max_mr;
        attr.max_pd = c.max_pd;
        attr.max_ah = c.max_ah;
        attr.max_qp_rd_atom = c.max_qp_rd_atom;
        attr.max_qp_init_rd_atom = c.max_qp_init_rd_atom;
        attr.max_res_rd_atom = c.max_qp_rd_atom.saturating_mul(c.max_qp);
        attr.max_pkeys = u16::try_from(c.pkey_table_len).unwrap_or(1);
        attr.local_ca_ack_delay = u8::try_from(c.local_ca_ack_delay).unwrap_or(u8::MAX);
        // 1.4: atomic against each other across all QPs of the device, not
        // against the CPUs (device.rst, Atomics); no masked atomics.
        attr.atomic_cap = if c.device_caps & hw::FERROCE_CAP_ATOMIC != 0 {
            hw::ib_atomic_cap_IB_ATOMIC_HCA
        } else {
            hw::ib_atomic_cap_IB_ATOMIC_NONE
        };
        attr.masked_atomic_cap = hw::ib_atomic_cap_IB_ATOMIC_NONE;
        // 1.7: UD multicast, with the limits of the format (device.rst,
        // Limits).
        if c.device_caps & hw::FERROCE_CAP_MCAST != 0 {
            let (grp, per_grp) = (hw::FERROCE_MAX_MCAST_GRP, hw::FERROCE_MAX_MCAST_QP_ATTACH);
            attr.max_mcast_grp = grp;
            attr.max_mcast_qp_attach = per_grp;
            attr.max_total_mcast_qp_attach = grp.saturating_mul(per_grp);
        }
        // 1.6: SRQs have the QP limits (device.rst, QUERY_CAPS).
        if c.device_caps & hw::FERROCE_CAP_SRQ != 0 {
            attr.max_srq = c.max_qp;
            attr.max_srq_wr = c.max_qp_wr;
            attr.max_srq_sge = c.max_sge;
        }
        let mut flags = hw::ib_device_cap_flags_IB_DEVICE_CURR_QP_STATE_MOD
            | hw::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT;
        if c.device_caps & hw::FERROCE_CAP_MEM_MGT_EXT != 0 {
            // Fast registration, local invalidate, send with invalidate.
            flags |= hw::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS;
            attr.max_fast_reg_page_list_len = hw::FERROCE_FAST_REG_MAX_PAGES;
            attr.max_pi_fast_reg_page_list_len = 0;
        }
        if c.device_caps & hw::FERROCE_CAP_MW != 0 {
            // 1.7: memory windows of type 1 and 2B, in the MRs' key space.
            flags |= hw::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
                | hw::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B;
            attr.max_mw = c.max_mr;
        }
        if c.device_caps & hw::FERROCE_CAP_SRQ != 0 {
            // User SRQs (RESIZE_SRQ); kernel SRQs are not resized.
            flags |= hw::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE;
        }
        if c.device_caps & hw::FERROCE_CAP_ATOMIC_WRITE != 0 {
            // 1.8: IBTA 1.5's ATOMIC_WRITE on RC QPs.
            flags |= hw::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE;
        }
        if c.device_caps & hw::FERROCE_CAP_FLUSH != 0 {
            // 1.8: FLUSH for global visibility. Guest RAM is not persistent
            // memory, so not IB_DEVICE_FLUSH_PERSISTENT: ib_core then refuses
            // MRs with IB_ACCESS_FLUSH_PERSISTENT.
            flags |= hw::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL;
        }
        attr.device_cap_flags = u64::from_safe_cast(flags);
        Ok(())
    }

    fn query_port(dev: &rdma::Device<Self>, port: u32, attr: &mut rdma::PortAttr) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        // ACTIVE = the device's link bit and the paired netdev running
        // with carrier; the active MTU follows the netdev's MTU.
        let netdev = dev.netdev(port);
        let up = dev.shared.link_up() && netdev.as_ref().is_some_and(|n| n.get().oper_up());
        let (eth_mtu, active_mtu) =
            netdev
                .as_ref()
                .map_or((dev.port.mtu, dev.port.active_mtu), |n| {
                    let mtu = n.get().mtu();
                    (mtu, port::active_mtu(mtu, dev.caps.max_path_mtu))
                });
        attr.state = if up {
            hw::ib_port_state_IB_PORT_ACTIVE
        } else {
            hw::ib_port_state_IB_PORT_DOWN
        };
        attr.phys_state = if up {
            u32_into_u8::<{ hw::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP }>()
        } else {
            u32_into_u8::<{ hw::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED }>()
        };
        attr.max_mtu = dev.caps.max_path_mtu;
        attr.active_mtu = active_mtu;
        attr.phys_mtu = eth_mtu;
        attr.gid_tbl_len = i32::try_from(dev.caps.gid_table_len)?;
        attr.pkey_tbl_len = u16::try_from(dev.caps.pkey_table_len)?;
        attr.max_msg_sz = dev.caps.max_msg_size;
        attr.port_cap_flags = hw::ib_uverbs_query_port_cap_flags_IB_UVERBS_PCF_CM_SUP
            | hw::ib_uverbs_query_port_cap_flags_IB_UVERBS_PCF_IP_BASED_GIDS;
        attr.max_vl_num = 1;
        // The paired netdev's link speed (1 Gb/s if it reports none);
        // without a netdev, the slowest there is.
        let (speed, width) = dev.eth_speed(port).unwrap_or((
            u32_into_u16::<{ hw::ib_port_speed_IB_SPEED_SDR }>(),
            u32_into_u8::<{ hw::ib_port_width_IB_WIDTH_1X }>(),
        ));
        attr.active_speed = speed;
        attr.active_width = width;
        Ok(())
    }

    fn get_port_immutable(
        dev: &rdma::Device<Self>,
        port: u32,
        imm: &mut rdma::PortImmutable,
    ) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        imm.pkey_tbl_len = i32::try_from(dev.caps.pkey_table_len)?;
        imm.gid_tbl_len = i32::try_from(dev.caps.gid_table_len)?;
        let mut flags = 0;
        if dev.caps.device_caps & hw::FERROCE_CAP_ROCE_V1 != 0 {
            flags |= hw::RDMA_CORE_PORT_IBA_ROCE;
        }
        if dev.caps.device_caps & hw::FERROCE_CAP_ROCE_V2 != 0 {
            flags |= hw::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        }
        imm.core_cap_flags = flags;
        imm.max_mad_size = hw::IB_MGMT_MAD_SIZE;
        Ok(())
    }

    fn get_link_layer(_dev: &rdma::Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &rdma::Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != 1 || u32::from(index) >= hw::FERROCE_PKEY_TABLE_LEN {
            return Err(EINVAL);
        }
        Ok(u32_into_u16::<{ hw::FERROCE_DEFAULT_PKEY }>())
    }

    fn alloc_ucontext(
        dev: &rdma::Device<Self>,
        init: &mut rdma::UContextInit<'_>,
        udata: &mut UData<'_>,
    ) -> Result<UContext> {
        verbs::alloc_ucontext(dev, init, udata)
    }

    fn dealloc_ucontext(dev: &rdma::Device<Self>, ctx: &UContext) {
        verbs::dealloc_ucontext(dev, ctx)
    }

    fn query_ucontext(_dev: &rdma::Device<Self>, _ctx: &UContext) -> Result {
        // Nothing to add to ib_core's answer: the provider reads the
        // context's values with the extended QUERY_DEVICE.
        Ok(())
    }

    fn query_device_udata(
        dev: &rdma::Device<Self>,
        ctx: &UContext,
        udata: &mut UData<'_>,
    ) -> Result {
        verbs::query_device_udata(dev, ctx, udata)
    }

    fn create_cq(
        dev: &rdma::Device<Self>,
        ctx: &UContext,
        cqe: u32,
        comp_vector: u32,
        udata: &mut UData<'_>,
    ) -> Result<(Cq, u32, u32)> {
        dev.reserve_cq()?;
        verbs::create_cq(dev, ctx, cqe, comp_vector, udata).inspect_err(|_| dev.release_cq())
    }

    fn destroy_cq(dev: &rdma::Device<Self>, cq: &Cq) -> Result {
        verbs::destroy_cq(dev, cq)?;
        dev.release_cq();
        Ok(())
    }

    fn resize_user_cq(
        dev: &rdma::Device<Self>,
        cq: &Cq,
        cqe: u32,
        udata: &mut UData<'_>,
    ) -> Result<u32> {
        verbs::resize_user_cq(dev, cq, cqe, udata)
    }

    fn create_qp(
        dev: &rdma::Device<Self>,
        ctx: &UContext,
        init: &mut QpInit<'_, Cq, Pd, Srq>,
        udata: &mut UData<'_>,
    ) -> Result<(Qp, u32)> {
        verbs::create_qp(dev, ctx, init, udata)
    }

    fn modify_qp(dev: &rdma::Device<Self>, qp: &Qp, attr: &QpAttr<'_>, mask: u32) -> Result {
        verbs::modify_qp(dev, qp, attr, mask)
    }

    fn query_qp(
        dev: &rdma::Device<Self>,
        qp: &Qp,
        _mask: u32,
        attr: &mut rdma::QpAttrOut<'_>,
        cap: &mut hw::ib_qp_cap,
    ) -> Result {
        verbs::query_qp(dev, qp, attr, cap)
    }

    fn destroy_qp(dev: &rdma::Device<Self>, qp: &Qp) -> Result {
        verbs::destroy_qp(dev, qp)
    }

    fn attach_mcast(dev: &rdma::Device<Self>, qp: &Qp, gid: &[u8; 16]) -> Result {
        verbs::mcast(dev, qp, gid, true)
    }

    fn detach_mcast(dev: &rdma::Device<Self>, qp: &Qp, gid: &[u8; 16]) -> Result {
        verbs::mcast(dev, qp, gid, false)
    }

    fn reg_user_mr(
        dev: &rdma::Device<Self>,
        pd: &Pd,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        _udata: &mut UData<'_>,
    ) -> Result<(Mr, u32)> {
        verbs::reg_user_mr(dev, pd, start, length, iova, access)
    }

    fn rereg_user_mr(
        dev: &rdma::Device<Self>,
        mr: &Mr,
        change: &rdma::MrRereg,
        pd: &Pd,
        _udata: &mut UData<'_>,
    ) -> Result<Option<(Mr, u32)>> {
        verbs::rereg_user_mr(dev, mr, change, pd)
    }

    fn dereg_mr(dev: &rdma::Device<Self>, mr: &Mr) -> Result {
        verbs::dereg_mr(dev, mr)
    }

    fn alloc_mw(dev: &rdma::Device<Self>, pd: &Pd, mw_type: rdma::MwType) -> Result<(Mw, u32)> {
        verbs::alloc_mw(dev, pd, mw_type)
    }

    fn dealloc_mw(dev: &rdma::Device<Self>, mw: &Mw) -> Result {
        verbs::dealloc_mw(dev, mw)
    }

    fn create_ah(
        dev: &rdma::Device<Self>,
        pd: &Pd,
        attr: &AhAttr<'_>,
        udata: Option<&mut UData<'_>>,
    ) -> Result<Ah> {
        verbs::create_ah(dev, pd, attr, udata)
    }

    fn destroy_ah(dev: &rdma::Device<Self>, ah: &Ah) -> Result {
        verbs::destroy_ah(dev, ah)
    }

    fn alloc_pd(dev: &rdma::Device<Self>, _user: bool) -> Result<Pd> {
        let comp = dev.shared.exec(&hw::ferroce_cmd_alloc_pd::default())?;
        Ok(Pd { pdn: comp.out[0] })
    }

    fn dealloc_pd(dev: &rdma::Device<Self>, pd: &Pd) -> Result {
        let cmd = hw::ferroce_cmd_dealloc_pd {
            pdn: pd.pdn,
            ..Default::default()
        };
        dev.shared.exec_destroy(&cmd)
    }

    fn create_kernel_ah(_dev: &rdma::Device<Self>, _pd: &Pd, attr: &AhAttr<'_>) -> Result<Ah> {
        verbs::create_kernel_ah(attr)
    }

    fn create_kernel_cq(
        dev: &rdma::Device<Self>,
        cqe: u32,
        comp_vector: u32,
    ) -> Result<(Cq, u32, u32)> {
        dev.reserve_cq()?;
        verbs::create_kernel_cq(dev, cqe, comp_vector).inspect_err(|_| dev.release_cq())
    }

    fn poll_cq(dev: &rdma::Device<Self>, cq: &Cq, out: &mut rdma::WcOut<'_, Self>) {
        if let Some(k) = cq.kernel() {
            k.poll(dev, out);
        }
    }

    fn req_notify_cq(
        dev: &rdma::Device<Self>,
        cq: &Cq,
        solicited_only: bool,
        report_missed: bool,
    ) -> Result<bool> {
        let missed = cq
            .kernel()
            .ok_or(EINVAL)?
            .arm(dev, cq.cqn, solicited_only)?;
        Ok(report_missed && missed)
    }

    fn create_kernel_qp(
        dev: &rdma::Device<Self>,
        init: &mut QpInit<'_, Cq, Pd, Srq>,
    ) -> Result<(Qp, u32)> {
        verbs::create_kernel_qp(dev, init)
    }

    fn post_send(dev: &rdma::Device<Self>, qp: &Qp, wrs: &mut rdma::SendWrs<'_, Self>) -> Result {
        verbs::post_send(dev, qp, wrs)
    }

    fn post_recv(dev: &rdma::Device<Self>, qp: &Qp, wrs: &mut rdma::RecvWrs<'_>) -> Result {
        verbs::post_recv(dev, qp, wrs)
    }

    fn create_srq(
        dev: &rdma::Device<Self>,
        pd: &Pd,
        attr: &mut rdma::SrqAttr,
        user: Option<(&UContext, &mut UData<'_>)>,
    ) -> Result<(Srq, u32)> {
        srq::create_srq(dev, pd, attr, user)
    }

    fn modify_srq(
        dev: &rdma::Device<Self>,
        srq: &Srq,
        max_wr: Option<u32>,
        limit: Option<u32>,
        udata: Option<&mut UData<'_>>,
    ) -> Result {
        srq::modify_srq(dev, srq, max_wr, limit, udata)
    }

    fn query_srq(dev: &rdma::Device<Self>, srq: &Srq) -> Result<rdma::SrqAttr> {
        srq::query_srq(dev, srq)
    }

    fn destroy_srq(dev: &rdma::Device<Self>, srq: &Srq) -> Result {
        srq::destroy_srq(dev, srq)
    }

    fn post_srq_recv(_dev: &rdma::Device<Self>, srq: &Srq, wrs: &mut rdma::RecvWrs<'_>) -> Result {
        srq::post_srq_recv(srq, wrs)
    }

    fn get_dma_mr(dev: &rdma::Device<Self>, pd: &Pd, access: u32) -> Result<(Mr, u32)> {
        verbs::get_dma_mr(dev, pd, access)
    }

    fn alloc_mr(dev: &rdma::Device<Self>, pd: &Pd, max_pages: u32) -> Result<(Mr, u32)> {
        verbs::alloc_mr(dev, pd, max_pages)
    }

    fn map_mr_sg_start(mr: &Mr) {
        verbs::map_mr_sg_start(mr)
    }

    fn map_mr_sg_page(mr: &Mr, addr: u64) -> Result {
        verbs::map_mr_sg_page(mr, addr)
    }

    fn add_gid(dev: &rdma::Device<Self>, attr: &GidAttr<'_>) -> Result {
        // Frames sent with this entry carry its netdev's MAC, and its VLAN
        // tag if the netdev is (on) a VLAN (device.rst, "VLANs").
        let (vlan, smac) = attr.l2_fields().unwrap_or((None, dev.port.mac));
        // Without CAP_VLAN (devices before 1.3), refusing the entry keeps it
        // out of ib_core's table as well as the device's.
        if vlan.is_some() && dev.caps.device_caps & hw::FERROCE_CAP_VLAN == 0 {
            let n = dev
                .shared
                .stats
                .vlan_gids_rejected
                .fetch_add(1, Ordering::Relaxed);
            if n == 0 {
                dev_warn!(
                    dev.shared.dev(),
                    "GIDs of VLAN netdevs need device 1.3 (CAP_VLAN), refused\n"
                );
            }
            return Err(EOPNOTSUPP);
        }
        let gid = Gid(attr.gid());
        let (gid_type, network_type) = gid_network_type(attr.gid_type().ok_or(EINVAL)?, &gid)?;
        let hw_vlan = vlan.map_or(0, |vid| VLAN_VALID | vid);
        let cmd = hw::ferroce_cmd_set_gid {
            gid: gid.0,
            smac,
            vlan: hw_vlan,
            index: attr.index(),
            gid_type,
            network_type,
            port: attr.port(),
            ..Default::default()
        };
        dev.shared.exec(&cmd)?;
        if let Some(slot) = dev.gid_vlans.get(usize::from(attr.index())) {
            slot.store(hw_vlan, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Port state events are the driver's own (`dev::PortWatch` and the
    /// device's PORT_ACTIVE/PORT_DOWN combined), not ib_core's netdev-only
    /// ones.
    fn report_port_event(_dev: &rdma::Device<Self>, _netdev: rdma::NetDev<'_>) {}

    const PORT_STATS: &'static [rdma::StatDesc] = &hw_stats::PORT_STATS;

    fn get_port_stats(dev: &rdma::Device<Self>, port: u32, values: &mut [u64]) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        // A dead device answers EIO at once, without a message.
        let counters = dev.shared.query_counters()?;
        hw_stats::values(&counters, values);
        Ok(())
    }

    fn dev_fw_str(dev: &rdma::Device<Self>, out: &mut rdma::FwStr<'_>) {
        // QUERY_CAPS `fw_version` is VERSION (major << 32 | minor << 16),
        // shown as libibverbs shows `fw_ver` ("%d.%d.%d").
        let v = dev.caps.fw_version;
        out.set(format_args!(
            "{}.{}.{}",
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        ));
    }

    fn fill_res_qp(_dev: &rdma::Device<Self>, qp: &Qp, msg: &mut rdma::ResMsg<'_>) -> Result {
        qp.fill_res(msg)
    }

    fn fill_res_cq(_dev: &rdma::Device<Self>, cq: &Cq, msg: &mut rdma::ResMsg<'_>) -> Result {
        cq.fill_res(msg)
    }

    fn fill_res_srq(_dev: &rdma::Device<Self>, srq: &Srq, msg: &mut rdma::ResMsg<'_>) -> Result {
        srq.fill_res(msg)
    }

    fn fill_res_mr(_dev: &rdma::Device<Self>, mr: &Mr, msg: &mut rdma::ResMsg<'_>) -> Result {
        mr.fill_res(msg)
    }

    fn del_gid(dev: &rdma::Device<Self>, attr: &GidAttr<'_>) -> Result {
        if let Some(slot) = dev.gid_vlans.get(usize::from(attr.index())) {
            slot.store(0, Ordering::Relaxed);
        }
        let cmd = hw::ferroce_cmd_clear_gid {
            index: attr.index(),
            port: attr.port(),
            ..Default::default()
        };
        dev.shared.exec(&cmd).map(|_| ())
    }
}

/// The node GUID: the EUI-64 of the port MAC.
pub(crate) fn node_guid(mac: &[u8; 6]) -> [u8; 8] {
    gid::eui64_interface_id(mac)
}
