// SPDX-License-Identifier: GPL-2.0
//! UD multicast (device 1.7, device.rst "Multicast", CAP_MCAST):
//! ATTACH_MCAST and DETACH_MCAST with every status in the documented order,
//! attaching twice, the limits (64 groups, 16 QPs per group), DESTROY_QP
//! and reset; datagrams to a group received by every attached QP of
//! another device over the wire and of the sending device itself over its
//! loopback (the sender included), each QP with its own Q_Key, receive WQE
//! (RQ or SRQ) and state; what is dropped and where it is counted (not a
//! UD SEND to `MCAST_QPN`, a group nobody is attached to, no GID entry on
//! the frame's encapsulation and VLAN); RoCE v2 over IPv4 and IPv6 and
//! RoCE v1 groups.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{self, op};

/// The Q_Key of the groups' QPs.
const QKEY: u32 = 0x1111;
/// An IPv4 group (`::ffff:230.1.2.3`) and its MAC (01:00:5e + low 23 bits).
const GROUP_V4: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 230, 1, 2, 3];
const MAC_V4: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
/// An IPv6 group (`ff0e::1234:5678`) and its MAC (33:33 + low 32 bits).
const GROUP_V6: [u8; 16] = [
    0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78,
];
const MAC_V6: [u8; 6] = [0x33, 0x33, 0x12, 0x34, 0x56, 0x78];

fn mcast_cmd(opcode: u8, qpn: u32, gid: [u8; 16]) -> CmdMcast {
    let mut c = CmdMcast {
        qpn,
        gid,
        ..CmdMcast::zeroed()
    };
    c.hdr.opcode = opcode;
    c
}

fn attach(h: &mut Harness, qpn: u32, gid: [u8; 16]) -> u8 {
    h.cmd(&mcast_cmd(CMD_ATTACH_MCAST, qpn, gid)).0
}

fn detach(h: &mut Harness, qpn: u32, gid: [u8; 16]) -> u8 {
    h.cmd(&mcast_cmd(CMD_DETACH_MCAST, qpn, gid)).0
}

fn destroy_qp(h: &mut Harness, qpn: u32) -> u8 {
    let mut c = CmdDestroyQp::zeroed();
    c.hdr.opcode = CMD_DESTROY_QP;
    c.qpn = qpn;
    h.cmd(&c).0
}

/// The device's groups: (gid, attached QPs), oldest group first.
fn groups(h: &Harness) -> Vec<([u8; 16], Vec<u32>)> {
    h.dev
        .objects()
        .mcast
        .into_iter()
        .map(|g| (g.gid, g.qpns))
        .collect()
}

/// An IPv6 multicast GID `ff0e::i`.
fn group_n(i: u16) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x0e;
    g[14..].copy_from_slice(&i.to_be_bytes());
    g
}

/// An address vector to `group` (its MAC `dmac`) over `net`, through the
/// node's GID entry of that network type (3, 1 or 0).
fn group_av(group: [u8; 16], dmac: [u8; 6], net: u8) -> Av {
    let mut av = Av::zeroed();
    av.dgid = group;
    av.dmac = dmac;
    av.hop_limit = 64;
    av.network_type = net;
    av.sgid_index = match net {
        NET_IPV4 => 3,
        NET_IPV6 => 1,
        _ => 0,
    };
    av
}

/// Node `i` with `n` UD QPs in RTS with Q_Key [`QKEY`].
fn ud_node(i: u8, n: usize) -> Node {
    let mut node = Node::new(i);
    for qi in 0..n {
        node.create_qp(QPT_UD);
        node.activate_ud(qi, QKEY);
    }
    node
}

/// A signaled UD SEND with immediate of `len` bytes of `m` through AH
/// `ahn` to `MCAST_QPN` with Q_Key `qkey`, solicited.
fn group_send(wr_id: u64, ahn: u32, m: &MrInfo, len: u32, qkey: u32) -> SendWr {
    SendWr {
        wr_id,
        opcode: WR_SEND_IMM,
        flags: WQE_SIGNALED | WQE_SOLICITED,
        imm: [0xa, 0xb, 0xc, wr_id as u8],
        sges: vec![(m.va(0), len, m.key)],
        ud: Some((ahn, MCAST_QPN, qkey)),
        ..SendWr::default()
    }
}

/// A recognisable pattern of `len` bytes.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// (qpn, wr_id, status) of the receive CQEs among `c`.
fn recvs(c: &[Cqe]) -> Vec<(u32, u64, u8)> {
    c.iter()
        .filter(|c| c.opcode == WC_RECV)
        .map(|c| (c.qpn, c.wr_id, c.status))
        .collect()
}

/// Node 36 with one UD QP and an AH to [`GROUP_V4`], and its source MR
/// filled with `pattern(256, 1)`.
fn ipv4_sender() -> (Node, u32, MrInfo) {
    let mut a = ud_node(36, 1);
    let ahn = a.create_ah(group_av(GROUP_V4, MAC_V4, NET_IPV4));
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(m.gpa, &pattern(256, 1));
    (a, ahn, m)
}

/// One multicast datagram of node `a` (QP 0, AH `ahn`) as it goes out on
/// the wire; `a`'s own copy is looped back (and dropped if `a` has no QP
/// in the group).
fn group_frame(a: &mut Node, ahn: u32, m: &MrInfo, wr_id: u64) -> Vec<u8> {
    a.post_send(0, &group_send(wr_id, ahn, m, 64, QKEY));
    let mut out = a.h.dev.take_tx();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

// ------------------------------------------------------------ commands

#[test]
fn version_1_7_advertises_multicast() {
    let mut h = Harness::new();
    // 1.7 or later (1.8 adds ATOMIC_WRITE and FLUSH: tests/placement.rs).
    let minor = h.reg_r(REG_VERSION) & VERSION_MINOR_MASK;
    assert!(minor >= 7);
    assert_eq!(h.reg_r(REG_VERSION), 1 << VERSION_MAJOR_SHIFT | minor);
    assert_eq!(
        h.reg_r(REG_DEV_CAPS) & 0x3fffff,
        0x3fffff,
        "device.rst: DEV_CAPS in 1.7"
    );
    assert_eq!(h.reg_r(REG_DEV_CAPS) & CAP_MCAST, CAP_MCAST);
    let caps = h.query_caps();
    assert_eq!(caps.device_caps, h.reg_r(REG_DEV_CAPS));
    assert_eq!(caps.fw_version, 1 << 32 | u64::from(minor) << 16);
}

/// Both commands: every status, in the documented order (reserved, gid,
/// qpn, QP type), and a refused command changes nothing.
#[test]
fn attach_and_detach_check_every_field_in_order() {
    let mut n = Node::new(36);
    let ud = n.create_qp(QPT_UD);
    let rc = n.create_qp(QPT_RC);
    let uc = n.create_qp(QPT_UC);
    let gsi = n.create_qp(QPT_GSI);
    let gone = n.create_qp(QPT_UD);
    let (ud, rc, uc, gsi, gone) = (
        n.qps[ud].qpn,
        n.qps[rc].qpn,
        n.qps[uc].qpn,
        n.qps[gsi].qpn,
        n.qps[gone].qpn,
    );
    assert_eq!(gsi, GSI_QPN);
    assert_eq!(destroy_qp(&mut n.h, gone), STATUS_SUCCESS);
    let not_mcast: [[u8; 16]; 7] = [
        [0; 16],
        v6_gid(36),
        ferroce_dev::gid::eui64_link_local(n.mac),
        ipv4_gid([10, 0, 1, 36]),
        ipv4_gid([223, 255, 255, 255]),
        ipv4_gid([240, 0, 0, 1]),
        // 230.1.2.3 in a GID that is not IPv4-mapped.
        {
            let mut g = GROUP_V4;
            g[9] = 1;
            g
        },
    ];
    let mcast: [[u8; 16]; 5] = [
        GROUP_V4,
        GROUP_V6,
        ipv4_gid([224, 0, 0, 1]),
        ipv4_gid([239, 255, 255, 255]),
        {
            let mut g = [0u8; 16];
            g[0] = 0xff;
            g
        },
    ];
    for opcode in [CMD_ATTACH_MCAST, CMD_DETACH_MCAST] {
        let cmd = |qpn, gid, reserved| CmdMcast {
            reserved,
            ..mcast_cmd(opcode, qpn, gid)
        };
        // reserved first: before a bad gid, qpn or QP type.
        for r in [1, 0x8000_0000, u32::MAX] {
            n.h.expect(&cmd(0xdead, [0; 16], r), STATUS_BAD_RESERVED);
            n.h.expect(&cmd(rc, GROUP_V4, r), STATUS_BAD_RESERVED);
            n.h.expect(&cmd(ud, GROUP_V4, r), STATUS_BAD_RESERVED);
        }
        // Then the gid: before a bad qpn.
        for g in not_mcast {
            n.h.expect(&cmd(0xdead, g, 0), STATUS_BAD_PARAM);
            n.h.expect(&cmd(ud, g, 0), STATUS_BAD_PARAM);
        }
        // Then the QP: destroyed, never created, the group QPN, beyond
        // 24 bits.
        for q in [0, gone, 0xdead, MCAST_QPN, ud | 1 << 24, u32::MAX] {
            n.h.expect(&cmd(q, GROUP_V4, 0), STATUS_BAD_HANDLE);
        }
        // UD only: GSI and connected QPs are refused.
        for q in [rc, uc, gsi] {
            for g in mcast {
                n.h.expect(&cmd(q, g, 0), STATUS_BAD_PARAM);
            }
        }
        // A header with a flag set is refused before anything else.
        let mut bad_hdr = cmd(ud, GROUP_V4, 0);
        bad_hdr.hdr.flags = 1;
        n.h.expect(&bad_hdr, STATUS_BAD_RESERVED);
        assert!(groups(&n.h).is_empty(), "refused commands attach nothing");
    }
    // Every multicast GID is a group; detaching them all empties the table.
    for g in mcast {
        assert_eq!(attach(&mut n.h, ud, g), STATUS_SUCCESS);
    }
    assert_eq!(
        groups(&n.h),
        mcast.iter().map(|g| (*g, vec![ud])).collect::<Vec<_>>()
    );
    for g in mcast {
        assert_eq!(detach(&mut n.h, ud, g), STATUS_SUCCESS);
    }
    assert!(groups(&n.h).is_empty());
    let k = n.h.dev.counters().hw;
    assert!(k.cmds_failed > 0 && k.cmds_ok > 0);
}

/// Attaching an attached pair changes nothing; a group keeps its QPs in
/// the order they were attached; detaching a pair that is not attached is
/// BAD_PARAM; a group whose last QP left is gone.
#[test]
fn attach_twice_detach_and_group_order() {
    let mut n = ud_node(36, 3);
    let q: Vec<u32> = n.qps.iter().map(|q| q.qpn).collect();
    assert_eq!(attach(&mut n.h, q[2], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(attach(&mut n.h, q[2], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(groups(&n.h), vec![(GROUP_V4, vec![q[2]])]);
    assert_eq!(attach(&mut n.h, q[0], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(attach(&mut n.h, q[1], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(attach(&mut n.h, q[0], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(attach(&mut n.h, q[0], GROUP_V6), STATUS_SUCCESS);
    assert_eq!(
        groups(&n.h),
        vec![(GROUP_V4, vec![q[2], q[0], q[1]]), (GROUP_V6, vec![q[0]])]
    );
    // Not attached: to this group, to any group.
    assert_eq!(detach(&mut n.h, q[1], GROUP_V6), STATUS_BAD_PARAM);
    assert_eq!(detach(&mut n.h, q[0], group_n(9)), STATUS_BAD_PARAM);
    assert_eq!(detach(&mut n.h, q[0], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(detach(&mut n.h, q[0], GROUP_V4), STATUS_BAD_PARAM);
    assert_eq!(
        groups(&n.h),
        vec![(GROUP_V4, vec![q[2], q[1]]), (GROUP_V6, vec![q[0]])]
    );
    assert_eq!(detach(&mut n.h, q[0], GROUP_V6), STATUS_SUCCESS);
    assert_eq!(groups(&n.h), vec![(GROUP_V4, vec![q[2], q[1]])]);
    assert_eq!(detach(&mut n.h, q[0], GROUP_V6), STATUS_BAD_PARAM);
    // QP state does not matter: a QP in RESET attaches too.
    let fresh = n.create_qp(QPT_UD);
    let fresh = n.qps[fresh].qpn;
    assert_eq!(n.h.dev.qp_state(fresh), Some(QPS_RESET));
    assert_eq!(attach(&mut n.h, fresh, GROUP_V6), STATUS_SUCCESS);
    assert_eq!(
        groups(&n.h),
        vec![(GROUP_V4, vec![q[2], q[1]]), (GROUP_V6, vec![fresh])]
    );
}

/// 64 groups and 16 QPs per group: one more is NO_RESOURCES, after the
/// other checks; attaching an attached pair still succeeds; a freed
/// place is used again.
#[test]
fn limits_of_groups_and_of_qps_per_group() {
    let mut h = Harness::new();
    let (pdn, cqn, _) = h.setup_qp(QPT_UD);
    let ud: Vec<u32> = (0..=MAX_MCAST_QP_ATTACH)
        .map(|_| {
            let c = h.qp_cmd(pdn, cqn, QPT_UD, 0);
            h.ok(&c)
        })
        .collect();
    let rc = {
        let c = h.qp_cmd(pdn, cqn, QPT_RC, 0);
        h.ok(&c)
    };
    // 16 QPs in one group.
    for q in &ud[..MAX_MCAST_QP_ATTACH] {
        assert_eq!(attach(&mut h, *q, GROUP_V4), STATUS_SUCCESS);
    }
    let extra = ud[MAX_MCAST_QP_ATTACH];
    assert_eq!(attach(&mut h, extra, GROUP_V4), STATUS_NO_RESOURCES);
    assert_eq!(attach(&mut h, ud[3], GROUP_V4), STATUS_SUCCESS, "attached");
    assert_eq!(attach(&mut h, rc, GROUP_V4), STATUS_BAD_PARAM, "type first");
    assert_eq!(attach(&mut h, 0xdead, GROUP_V4), STATUS_BAD_HANDLE);
    assert_eq!(groups(&h)[0].1, ud[..MAX_MCAST_QP_ATTACH].to_vec());
    assert_eq!(detach(&mut h, ud[0], GROUP_V4), STATUS_SUCCESS);
    assert_eq!(attach(&mut h, extra, GROUP_V4), STATUS_SUCCESS);
    assert_eq!(groups(&h)[0].1.last(), Some(&extra));
    assert_eq!(groups(&h)[0].1.len(), MAX_MCAST_QP_ATTACH);
    // 64 groups (GROUP_V4 and 63 more).
    for i in 1..MAX_MCAST_GRP as u16 {
        assert_eq!(attach(&mut h, ud[0], group_n(i)), STATUS_SUCCESS);
    }
    assert_eq!(groups(&h).len(), MAX_MCAST_GRP);
    let new = group_n(1000);
    assert_eq!(attach(&mut h, ud[0], new), STATUS_NO_RESOURCES);
    assert_eq!(attach(&mut h, ud[1], new), STATUS_NO_RESOURCES);
    assert_eq!(attach(&mut h, rc, new), STATUS_BAD_PARAM, "type first");
    // More QPs in existing groups are fine.
    assert_eq!(attach(&mut h, ud[1], group_n(5)), STATUS_SUCCESS);
    assert_eq!(attach(&mut h, ud[0], group_n(5)), STATUS_SUCCESS);
    assert_eq!(groups(&h).len(), MAX_MCAST_GRP);
    // A group that disappears makes room for a new one.
    assert_eq!(detach(&mut h, ud[0], group_n(7)), STATUS_SUCCESS);
    assert_eq!(groups(&h).len(), MAX_MCAST_GRP - 1);
    assert_eq!(attach(&mut h, ud[2], new), STATUS_SUCCESS);
    assert_eq!(groups(&h).len(), MAX_MCAST_GRP);
    assert_eq!(groups(&h).last(), Some(&(new, vec![ud[2]])));
    assert_eq!(attach(&mut h, ud[2], group_n(7)), STATUS_NO_RESOURCES);
}

/// DESTROY_QP detaches the QP from every group (groups left empty are
/// gone); a device reset forgets every group.
#[test]
fn destroy_qp_and_reset_detach() {
    let mut n = ud_node(36, 2);
    let (q0, q1) = (n.qps[0].qpn, n.qps[1].qpn);
    for g in [GROUP_V4, GROUP_V6, group_n(3)] {
        assert_eq!(attach(&mut n.h, q0, g), STATUS_SUCCESS);
    }
    assert_eq!(attach(&mut n.h, q1, GROUP_V6), STATUS_SUCCESS);
    assert_eq!(attach(&mut n.h, q1, group_n(4)), STATUS_SUCCESS);
    assert_eq!(destroy_qp(&mut n.h, q0), STATUS_SUCCESS);
    assert_eq!(
        groups(&n.h),
        vec![(GROUP_V6, vec![q1]), (group_n(4), vec![q1])]
    );
    assert_eq!(detach(&mut n.h, q0, GROUP_V6), STATUS_BAD_HANDLE);
    // A new QP (perhaps with the old number one day) is in no group.
    let q2 = n.create_qp(QPT_UD);
    let q2 = n.qps[q2].qpn;
    assert_eq!(detach(&mut n.h, q2, GROUP_V4), STATUS_BAD_PARAM);
    assert_eq!(attach(&mut n.h, q2, GROUP_V4), STATUS_SUCCESS);
    assert_eq!(destroy_qp(&mut n.h, q1), STATUS_SUCCESS);
    assert_eq!(groups(&n.h), vec![(GROUP_V4, vec![q2])]);
    n.h.reg_w(REG_DEV_CTRL, CTRL_RESET);
    assert!(groups(&n.h).is_empty());
    assert!(n.h.dev.objects().qps.is_empty());
}

// ------------------------------------------------------------ data path

/// Three QPs of another device attached to an IPv4 group receive one
/// datagram each, in group order, as unicast UD receives (GRH area,
/// source QP, network type, immediate, solicited, the GID entry on the
/// frame's encapsulation); the datagram counts once. The frame goes to
/// the group's MAC and QPN; the sender's own copy finds no group there.
#[test]
fn datagram_to_several_qps_of_another_device() {
    let (mut a, ahn, m) = ipv4_sender();
    let mut b = ud_node(37, 3);
    let q: Vec<u32> = b.qps.iter().map(|q| q.qpn).collect();
    for i in [2, 0, 1] {
        assert_eq!(attach(&mut b.h, q[i], GROUP_V4), STATUS_SUCCESS);
    }
    let bm = b.reg_mr(3 * 4096, ACCESS_LOCAL_WRITE);
    for i in 0..3 {
        let at = 4096 * i as u64;
        b.post_recv(i, 10 + i as u64, &[(bm.va(at), 2048, bm.key)]);
    }
    let before = b.h.dev.counters().data;
    a.post_send(0, &group_send(7, ahn, &m, 256, QKEY));
    let sent = a.poll();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].wr_id, sent[0].status), (7, WC_SUCCESS));
    let frames = a.h.dev.take_tx();
    assert_eq!(frames.len(), 1, "the frame goes out on the wire");
    let p = wire::decode(&frames[0]).unwrap();
    assert_eq!(p.dmac, MAC_V4);
    assert_eq!(p.net.dgid, GROUP_V4);
    assert_eq!(p.bth.dest_qp, MCAST_QPN);
    assert_eq!(p.bth.opcode, op::UD_SEND_ONLY_IMM);
    // a's own copy: looped back, no group on a.
    let da = a.h.dev.counters().data;
    assert_eq!((da.loopback_frames, da.tx_frames), (1, 1));
    assert_eq!(da.rx_no_qp, 1);
    assert!(a.poll().is_empty());

    b.h.dev.receive(&frames[0]);
    let c = b.poll();
    assert_eq!(
        recvs(&c),
        vec![
            (q[2], 12, WC_SUCCESS),
            (q[0], 10, WC_SUCCESS),
            (q[1], 11, WC_SUCCESS)
        ],
        "group order"
    );
    let net_ipv4 = NET_IPV4 << CQE_NET_TYPE_SHIFT;
    for (k, cqe) in c.iter().enumerate() {
        assert_eq!(cqe.byte_len, 40 + 256);
        assert_eq!(cqe.src_qp, a.qps[0].qpn);
        assert_eq!(
            cqe.flags,
            CQE_GRH | CQE_GID_INDEX | net_ipv4 | CQE_WITH_IMM | CQE_SOLICITED,
            "copy {k}"
        );
        assert_eq!(cqe.gid_index, 3);
        assert_eq!(cqe.imm_data.to_le_bytes(), [0xa, 0xb, 0xc, 7]);
        assert_eq!(cqe.wqe_idx, 0);
    }
    for i in 0..3u64 {
        let at = bm.gpa + 4096 * i;
        assert_eq!(b.bytes(at + 40, 256), pattern(256, 1), "QP {i}'s copy");
        let grh = b.bytes(at, 40);
        assert_eq!(grh[20] >> 4, 4, "IPv4 header in the last 20 bytes");
        assert_eq!(grh[32..36], a.ip);
        assert_eq!(grh[36..40], [230, 1, 2, 3]);
    }
    let after = b.h.dev.counters().data;
    assert_eq!(after.rx_pkts - before.rx_pkts, 1, "counted once");
    assert_eq!(after.cqes - before.cqes, 3);
    assert_eq!(after.rx_no_qp, before.rx_no_qp);
    assert_eq!(b.h.dev.counters().hw.rx_pkts - before.rx_pkts, 1);
}

/// The sending device's own QPs attached to the group receive the
/// datagram through its loopback, the sender included (no loopback
/// blocking), while the frame also goes out on the wire.
#[test]
fn loopback_to_qps_of_the_sender_sender_included() {
    let mut a = ud_node(36, 3);
    let q: Vec<u32> = a.qps.iter().map(|q| q.qpn).collect();
    for qpn in &q {
        assert_eq!(attach(&mut a.h, *qpn, GROUP_V6), STATUS_SUCCESS);
    }
    let ahn = a.create_ah(group_av(GROUP_V6, MAC_V6, NET_IPV6));
    let m = a.reg_mr(16384, ACCESS_LOCAL_WRITE);
    a.fill(m.gpa, &pattern(100, 9));
    for i in 0..3 {
        let at = 4096 * (1 + i as u64);
        a.post_recv(i, 20 + i as u64, &[(m.va(at), 1024, m.key)]);
    }
    a.post_send(1, &group_send(5, ahn, &m, 100, QKEY));
    let c = a.poll();
    assert_eq!(
        c.iter()
            .filter(|c| c.opcode == WC_SEND)
            .map(|c| (c.qpn, c.wr_id, c.status))
            .collect::<Vec<_>>(),
        vec![(q[1], 5, WC_SUCCESS)]
    );
    assert_eq!(
        recvs(&c),
        vec![
            (q[0], 20, WC_SUCCESS),
            (q[1], 21, WC_SUCCESS),
            (q[2], 22, WC_SUCCESS)
        ]
    );
    for cqe in c.iter().filter(|c| c.opcode == WC_RECV) {
        assert_eq!(cqe.src_qp, q[1]);
        assert_eq!(cqe.gid_index, 1);
        assert_eq!(
            cqe.flags & (CQE_NET_TYPE_MASK | CQE_GID_INDEX | CQE_GRH),
            NET_IPV6 << CQE_NET_TYPE_SHIFT | CQE_GID_INDEX | CQE_GRH
        );
    }
    for i in 0..3u64 {
        let at = m.gpa + 4096 * (1 + i);
        assert_eq!(a.bytes(at + 40, 100), pattern(100, 9));
        assert_eq!(a.bytes(at + 24, 16), GROUP_V6, "GRH DGID");
    }
    let d = a.h.dev.counters().data;
    assert_eq!((d.tx_frames, d.loopback_frames, d.rx_pkts), (1, 1, 1));
    let wire_frames = a.h.dev.take_tx();
    assert_eq!(wire_frames.len(), 1, "and out on the wire");
    assert_eq!(wire::decode(&wire_frames[0]).unwrap().dmac, MAC_V6);
}

/// Each QP checks its own Q_Key: a mismatch loses that QP's copy only
/// (counted in rx_bad_key), and its receive WQE stays for the next one.
#[test]
fn qkey_mismatch_loses_only_that_copy() {
    let (mut a, ahn, m) = ipv4_sender();
    // QP 1 has another Q_Key.
    let mut b = Node::new(37);
    for (qi, qkey) in [QKEY, 0x2222, QKEY].into_iter().enumerate() {
        b.create_qp(QPT_UD);
        b.activate_ud(qi, qkey);
    }
    let q: Vec<u32> = b.qps.iter().map(|q| q.qpn).collect();
    let bm = b.reg_mr(3 * 4096, ACCESS_LOCAL_WRITE);
    for (i, qpn) in q.iter().enumerate() {
        assert_eq!(attach(&mut b.h, *qpn, GROUP_V4), STATUS_SUCCESS);
        let at = 4096 * i as u64;
        b.post_recv(i, 30 + i as u64, &[(bm.va(at), 1024, bm.key)]);
    }
    let bad_key = b.h.dev.counters().data.rx_bad_key;
    let f = group_frame(&mut a, ahn, &m, 1);
    b.h.dev.receive(&f);
    assert_eq!(
        recvs(&b.poll()),
        vec![(q[0], 30, WC_SUCCESS), (q[2], 32, WC_SUCCESS)]
    );
    assert_eq!(b.h.dev.counters().data.rx_bad_key, bad_key + 1);
    // A datagram with QP 1's Q_Key: only QP 1 takes it, into its first WQE.
    a.post_send(0, &group_send(2, ahn, &m, 64, 0x2222));
    let f = a.h.dev.take_tx();
    b.h.dev.receive(&f[0]);
    let c = b.poll();
    assert_eq!(recvs(&c), vec![(q[1], 31, WC_SUCCESS)]);
    assert_eq!(c[0].wqe_idx, 0);
    assert_eq!(b.h.dev.counters().data.rx_bad_key, bad_key + 3);
}

/// Each QP takes its own receive WQE, from its RQ or its SRQ: a QP
/// without one loses its copy only (rx_ud_no_wqe); a WQE too small fails
/// that QP's copy only (LOC_LEN_ERR).
#[test]
fn each_qp_takes_its_own_wqe() {
    let (mut a, ahn, m) = ipv4_sender();
    let mut b = ud_node(37, 3);
    let si = b.create_srq(8, 0);
    let s = b.create_srq_qp(QPT_UD, si);
    b.activate_ud(s, QKEY);
    let q: Vec<u32> = b.qps.iter().map(|q| q.qpn).collect();
    for qpn in &q {
        assert_eq!(attach(&mut b.h, *qpn, GROUP_V4), STATUS_SUCCESS);
    }
    let bm = b.reg_mr(8 * 4096, ACCESS_LOCAL_WRITE);
    // QP 0: a WQE; QP 1: none; QP 2: a WQE too small; QP 3: the SRQ's.
    b.post_recv(0, 40, &[(bm.va(0), 1024, bm.key)]);
    b.post_recv(2, 42, &[(bm.va(8192), 50, bm.key)]);
    b.post_srq_recv(si, 43, &[(bm.va(12288), 1024, bm.key)]);
    let no_wqe = b.h.dev.counters().data.rx_ud_no_wqe;
    let f = group_frame(&mut a, ahn, &m, 1);
    b.h.dev.receive(&f);
    let c = b.poll();
    assert_eq!(
        recvs(&c),
        vec![
            (q[0], 40, WC_SUCCESS),
            (q[2], 42, WC_LOC_LEN_ERR),
            (q[3], 43, WC_SUCCESS)
        ]
    );
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, no_wqe + 1);
    assert_eq!(b.srq_ci(si), 1);
    assert_eq!(b.bytes(bm.gpa + 12288 + 40, 64), pattern(64, 1));
    // QP 1 gets the next one once it has a WQE; the others have none now.
    b.post_recv(1, 41, &[(bm.va(4096), 1024, bm.key)]);
    let f = group_frame(&mut a, ahn, &m, 2);
    b.h.dev.receive(&f);
    assert_eq!(recvs(&b.poll()), vec![(q[1], 41, WC_SUCCESS)]);
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, no_wqe + 4);
    for qpn in q {
        assert_eq!(b.h.dev.qp_state(qpn), Some(QPS_RTS));
    }
}

/// What no attached QP takes: a datagram to a multicast GID that is not a
/// UD SEND to `MCAST_QPN`, one to `MCAST_QPN` with a unicast destination,
/// one for a group nobody is attached to (rx_no_qp); a copy for a QP not
/// yet able to receive (INIT) or detached. A broadcast MAC does as well as
/// the group's.
#[test]
fn datagrams_no_qp_takes() {
    let (mut a, ahn, m) = ipv4_sender();
    let mut b = ud_node(37, 3);
    let q: Vec<u32> = b.qps.iter().map(|q| q.qpn).collect();
    // A fourth QP only in INIT.
    let init = b.create_qp(QPT_UD);
    let mut attr = full_attr(b.qps[init].qpn);
    attr.qkey = QKEY;
    attr.qp_state = QPS_INIT;
    attr.attr_mask = QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_QKEY | QP_ATTR_PORT;
    assert_eq!(b.h.modify(attr), STATUS_SUCCESS);
    let init_qpn = b.qps[init].qpn;
    for qpn in [q[0], init_qpn, q[1], q[2]] {
        assert_eq!(attach(&mut b.h, qpn, GROUP_V4), STATUS_SUCCESS);
    }
    assert_eq!(detach(&mut b.h, q[1], GROUP_V4), STATUS_SUCCESS);
    let bm = b.reg_mr(4 * 4096, ACCESS_LOCAL_WRITE);
    for i in 0..4 {
        b.post_recv(i, 50 + i as u64, &[(bm.va(4096 * i as u64), 1024, bm.key)]);
    }
    let good = group_frame(&mut a, ahn, &m, 1);
    let unicast = {
        let uah = a.create_ah(av_to(&b, NET_IPV4));
        a.post_send(0, &group_send(2, uah, &m, 64, QKEY));
        a.h.dev.take_tx().remove(0)
    };
    let bad = [
        // To a QP of the group by its own number.
        forged(&good, |p| p.bth.dest_qp = q[0]),
        // Not a UD SEND.
        forged(&good, |p| p.bth.opcode = op::RC_SEND_ONLY),
        forged(&good, |p| p.bth.opcode = op::UC_SEND_ONLY),
        // A unicast destination to the group QPN.
        forged(&unicast, |p| p.bth.dest_qp = MCAST_QPN),
        forged(&unicast, |p| {
            p.bth.dest_qp = MCAST_QPN;
            p.dmac = MAC_V4;
        }),
        // A group nobody is attached to.
        forged(&good, |p| p.net.dgid = ipv4_gid([230, 9, 9, 9])),
    ];
    let before = b.h.dev.counters().data;
    for f in &bad {
        b.h.dev.receive(f);
    }
    assert!(b.poll().is_empty());
    let after = b.h.dev.counters().data;
    assert_eq!(after.rx_no_qp - before.rx_no_qp, bad.len() as u64);
    assert_eq!(after.rx_pkts - before.rx_pkts, bad.len() as u64);
    // The group's frame, and the same to the broadcast MAC: QP 0 and QP 2
    // receive; the QP in INIT loses its copies (rx_no_qp), the detached
    // QP gets nothing.
    b.h.dev.receive(&good);
    b.h.dev.receive(&forged(&good, |p| p.dmac = [0xff; 6]));
    b.post_recv(0, 60, &[(bm.va(0), 1024, bm.key)]);
    b.post_recv(2, 62, &[(bm.va(8192), 1024, bm.key)]);
    let c = b.poll();
    assert_eq!(
        recvs(&c),
        vec![(q[0], 50, WC_SUCCESS), (q[2], 52, WC_SUCCESS)]
    );
    let after2 = b.h.dev.counters().data;
    assert_eq!(after2.rx_no_qp - after.rx_no_qp, 2, "the INIT QP's copies");
    assert_eq!(after2.rx_ud_no_wqe - after.rx_ud_no_wqe, 2, "no WQE left");
    b.h.dev.receive(&good);
    assert_eq!(
        recvs(&b.poll()),
        vec![(q[0], 60, WC_SUCCESS), (q[2], 62, WC_SUCCESS)]
    );
    // The detached QP's WQE is still there for a unicast datagram.
    b.h.dev.receive(&forged(&unicast, |p| p.bth.dest_qp = q[1]));
    assert_eq!(recvs(&b.poll()), vec![(q[1], 51, WC_SUCCESS)]);
}

/// RoCE v2 over IPv6 and RoCE v1 groups (`ff0e::…`, 33:33:… MACs): the
/// GID entry of the frame's encapsulation (1 and 0) in the CQE, the GRH
/// as received.
#[test]
fn ipv6_and_roce_v1_groups() {
    for (net, index) in [(NET_IPV6, 1u8), (NET_ROCE_V1, 0)] {
        let mut a = ud_node(36, 1);
        let mut b = ud_node(37, 2);
        let ahn = a.create_ah(group_av(GROUP_V6, MAC_V6, net));
        let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        a.fill(m.gpa, &pattern(512, 3));
        let bm = b.reg_mr(8192, ACCESS_LOCAL_WRITE);
        for i in 0..2 {
            assert_eq!(attach(&mut b.h, b.qps[i].qpn, GROUP_V6), STATUS_SUCCESS);
            b.post_recv(i, 70 + i as u64, &[(bm.va(4096 * i as u64), 4096, bm.key)]);
        }
        a.post_send(0, &group_send(1, ahn, &m, 512, QKEY));
        let frames = a.h.dev.take_tx();
        let p = wire::decode(&frames[0]).unwrap();
        assert_eq!((p.dmac, p.net.dgid), (MAC_V6, GROUP_V6));
        assert_eq!(p.net.kind.to_hw(), net);
        b.h.dev.receive_batch(frames.iter().map(Vec::as_slice));
        let c = b.poll();
        let (q0, q1) = (b.qps[0].qpn, b.qps[1].qpn);
        assert_eq!(
            recvs(&c),
            vec![(q0, 70, WC_SUCCESS), (q1, 71, WC_SUCCESS)],
            "net {net}"
        );
        for cqe in &c {
            assert_eq!(cqe.gid_index, index);
            assert_eq!((cqe.flags & CQE_NET_TYPE_MASK) >> CQE_NET_TYPE_SHIFT, net);
            assert_eq!(cqe.byte_len, 40 + 512);
        }
        for i in 0..2u64 {
            let grh = b.bytes(bm.gpa + 4096 * i, 40);
            assert_eq!(grh[0] >> 4, 6);
            assert_eq!(grh[8..24], v6_gid(36));
            assert_eq!(grh[24..40], GROUP_V6);
            assert_eq!(b.bytes(bm.gpa + 4096 * i + 40, 512), pattern(512, 3));
        }
    }
}

/// The frame's encapsulation and VLAN must be those of a GID entry: a
/// tagged frame on a VLAN without one is dropped (rx_bad_addr); with an
/// entry on that VLAN it is received and the CQE names that entry; the
/// CQE names the first entry of the frame's encapsulation and VLAN.
#[test]
fn encapsulation_and_vlan_need_a_gid_entry() {
    let (mut a, ahn, m) = ipv4_sender();
    let mut b = ud_node(37, 1);
    let q0 = b.qps[0].qpn;
    assert_eq!(attach(&mut b.h, q0, GROUP_V4), STATUS_SUCCESS);
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let good = group_frame(&mut a, ahn, &m, 1);
    let tagged = forged(&good, |p| p.vlan = Some(100));
    b.post_recv(0, 80, &[(bm.va(0), 1024, bm.key)]);
    let before = b.h.dev.counters().data;
    b.h.dev.receive(&tagged);
    assert!(b.poll().is_empty());
    let after = b.h.dev.counters().data;
    assert_eq!(after.rx_bad_addr - before.rx_bad_addr, 1);
    assert_eq!(after.rx_ud_no_wqe, before.rx_ud_no_wqe, "no WQE looked at");
    // An IPv4 entry on VLAN 100: the tagged frame is received with it.
    let mut c = set_gid(5, ipv4_gid([10, 0, 100, 37]), GID_TYPE_ROCE_V2, NET_IPV4);
    c.smac = b.mac;
    c.vlan = VLAN_VALID | 100;
    b.h.ok(&c);
    b.h.dev.receive(&tagged);
    let cqe = b.poll();
    assert_eq!(recvs(&cqe), vec![(q0, 80, WC_SUCCESS)]);
    assert_eq!(cqe[0].gid_index, 5);
    // Untagged: the first untagged IPv4 entry, 3, then 2 once there is one.
    b.post_recv(0, 81, &[(bm.va(0), 1024, bm.key)]);
    b.post_recv(0, 82, &[(bm.va(0), 1024, bm.key)]);
    b.h.dev.receive(&good);
    let mut c = set_gid(2, ipv4_gid([10, 0, 2, 37]), GID_TYPE_ROCE_V2, NET_IPV4);
    c.smac = b.mac;
    b.h.ok(&c);
    b.h.dev.receive(&good);
    let cqes = b.poll();
    assert_eq!(
        recvs(&cqes),
        vec![(q0, 81, WC_SUCCESS), (q0, 82, WC_SUCCESS)]
    );
    assert_eq!((cqes[0].gid_index, cqes[1].gid_index), (3, 2));
    // No IPv4 entry at all: dropped.
    for index in [2u16, 3, 5] {
        let mut clr = CmdClearGid::zeroed();
        clr.hdr.opcode = CMD_CLEAR_GID;
        clr.index = index;
        clr.port = 1;
        b.h.ok(&clr);
    }
    b.post_recv(0, 83, &[(bm.va(0), 1024, bm.key)]);
    let bad_addr = b.h.dev.counters().data.rx_bad_addr;
    b.h.dev.receive(&good);
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_bad_addr, bad_addr + 1);
}

/// A unicast UD datagram is received as before 1.7 while its QP is in a
/// group; multicast frames never disturb unicast QPs.
#[test]
fn unicast_datagrams_are_unchanged() {
    let (mut a, ahn, m) = ipv4_sender();
    let mut b = ud_node(37, 1);
    let q0 = b.qps[0].qpn;
    assert_eq!(attach(&mut b.h, q0, GROUP_V4), STATUS_SUCCESS);
    let uah = a.create_ah(av_to(&b, NET_IPV4));
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 90, &[(bm.va(0), 1024, bm.key)]);
    b.post_recv(0, 91, &[(bm.va(0), 1024, bm.key)]);
    let mut s = group_send(1, uah, &m, 64, QKEY);
    s.ud = Some((uah, q0, QKEY));
    a.post_send(0, &s);
    a.post_send(0, &group_send(2, ahn, &m, 64, QKEY));
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    let c = b.poll();
    assert_eq!(recvs(&c), vec![(q0, 90, WC_SUCCESS), (q0, 91, WC_SUCCESS)]);
    assert_eq!((c[0].gid_index, c[1].gid_index), (3, 3));
    let d = b.h.dev.counters().data;
    assert_eq!((d.rx_pkts, d.rx_no_qp, d.rx_bad_addr), (2, 0, 0));
}
