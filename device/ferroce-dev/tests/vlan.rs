// SPDX-License-Identifier: GPL-2.0
//! 802.1Q VLANs (device.rst "VLANs", CAP_VLAN): GID entries on a VLAN tag
//! every frame sent with them, with the address vector's priority; tagged
//! frames are only accepted on the VLAN of the GID entry they belong to;
//! UD receive CQEs name that entry.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
const VID: u16 = 100;
/// GID index of the RoCE v1 entry on the VLAN.
const V1_VLAN: u8 = 4;
/// GID index of the RoCE v2 IPv4 entry on the VLAN.
const V4_VLAN: u8 = 5;

/// `10.0.100.i`, the node's address on the VLAN.
fn vlan_ip(n: &Node) -> [u8; 4] {
    [10, 0, VID as u8, n.ip[3]]
}

/// `fd64::i`, the node's RoCE v1 GID on the VLAN.
fn vlan_v6(n: &Node) -> [u8; 16] {
    let mut g = v6_gid(n.ip[3]);
    g[1] = 0x64;
    g
}

/// Adds the node's VLAN entries: 4 = RoCE v1 `fd64::i`, 5 = RoCE v2
/// `::ffff:10.0.100.i`, both on VLAN [`VID`] with MAC `smac`.
fn join_vlan(n: &mut Node, smac: [u8; 6]) {
    for (index, gid, ty, net) in [
        (V1_VLAN, vlan_v6(n), GID_TYPE_ROCE_V1, NET_ROCE_V1),
        (V4_VLAN, ipv4_gid(vlan_ip(n)), GID_TYPE_ROCE_V2, NET_IPV4),
    ] {
        let mut c = set_gid(u16::from(index), gid, ty, net);
        c.smac = smac;
        c.vlan = VLAN_VALID | VID;
        n.h.ok(&c);
    }
}

/// Nodes 36 and 37, both on VLAN [`VID`] with their own MACs.
fn vlan_nodes() -> (Node, Node) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    let (am, bm) = (a.mac, b.mac);
    join_vlan(&mut a, am);
    join_vlan(&mut b, bm);
    (a, b)
}

/// [`vlan_nodes`] with one RC QP each, connected over their VLAN entry
/// `index` with the priorities `sl_a` and `sl_b`.
fn vlan_rc_pair(index: u8, sl_a: u8, sl_b: u8) -> (Node, Node) {
    let (mut a, mut b) = vlan_nodes();
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
    let (net, ag, bg) = if index == V4_VLAN {
        (NET_IPV4, ipv4_gid(vlan_ip(&a)), ipv4_gid(vlan_ip(&b)))
    } else {
        (NET_ROCE_V1, vlan_v6(&a), vlan_v6(&b))
    };
    let (am, bm) = (a.mac, b.mac);
    a.connect(0, bq, bm, bg, index, net, |q| q.av.sl = sl_a);
    b.connect(0, aq, am, ag, index, net, |q| q.av.sl = sl_b);
    (a, b)
}

fn write_wr(id: u64, src: &MrInfo, dst: &MrInfo, n: u32) -> SendWr {
    SendWr {
        wr_id: id,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), n, src.key)],
        ..SendWr::default()
    }
}

/// The TCI of a frame, `None` if untagged.
fn tci(frame: &[u8]) -> Option<u16> {
    wire::decode(frame).expect("a valid RoCE frame").vlan
}

/// Moves frames both ways until quiet; returns every frame of `a` and `b`.
fn exchange(a: &Node, b: &Node) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let fa = a.h.dev.take_tx();
        let fb = b.h.dev.take_tx();
        if fa.is_empty() && fb.is_empty() {
            break;
        }
        b.h.dev.receive_batch(fa.iter().map(Vec::as_slice));
        a.h.dev.receive_batch(fb.iter().map(Vec::as_slice));
        from_a.extend(fa);
        from_b.extend(fb);
    }
    (from_a, from_b)
}

/// A multi-packet WRITE over RoCE v2 and RoCE v1 VLAN entries: every
/// request carries the requester's tag and priority, every ACK the
/// responder's, and the data arrives.
#[test]
fn rc_over_a_vlan_is_tagged_with_each_sides_priority() {
    for index in [V4_VLAN, V1_VLAN] {
        let (mut a, mut b) = vlan_rc_pair(index, 3, 5);
        let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
        let dst = b.reg_mr(8192, ALL_ACCESS);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        a.fill(src.gpa, &data);
        a.post_send(0, &write_wr(1, &src, &dst, 5000));
        let (from_a, from_b) = exchange(&a, &b);
        assert!(from_a.len() >= 5, "5000 bytes at MTU 1024");
        assert!(!from_b.is_empty(), "ACKs");
        for f in &from_a {
            assert_eq!(tci(f), Some(3 << 13 | VID), "request, index {index}");
        }
        for f in &from_b {
            assert_eq!(tci(f), Some(5 << 13 | VID), "ACK, index {index}");
        }
        assert_eq!(b.bytes(dst.gpa, 5000), data);
        let c = a.poll();
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].wr_id, c[0].status), (1, WC_SUCCESS));
    }
}

/// An RC packet of a VLAN QP that arrives untagged, priority-tagged or on
/// another VLAN is dropped and counted before it touches memory; the same
/// packet on the right VLAN, whatever its priority, is accepted. An
/// untagged QP takes a priority-tagged frame (VLAN ID 0) as untagged.
#[test]
fn rc_packets_on_the_wrong_vlan_are_dropped() {
    let (mut a, mut b) = vlan_rc_pair(V4_VLAN, 0, 0);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.fill(src.gpa, &[9; 100]);
    a.post_send(0, &write_wr(1, &src, &dst, 100));
    let f = a.h.dev.take_tx();
    assert_eq!(f.len(), 1);
    let wrong = [
        forged(&f[0], |p| p.vlan = None),
        forged(&f[0], |p| p.vlan = Some(0)),
        forged(&f[0], |p| p.vlan = Some(VID + 1)),
    ];
    b.h.dev.receive_batch(wrong.iter().map(Vec::as_slice));
    assert_eq!(b.bytes(dst.gpa, 100), vec![0; 100]);
    assert!(b.h.dev.take_tx().is_empty(), "no ACK for a wrong VLAN");
    assert_eq!(b.h.dev.counters().data.rx_bad_addr, 3);
    b.h.dev
        .receive(&forged(&f[0], |p| p.vlan = Some(7 << 13 | VID)));
    assert_eq!(b.bytes(dst.gpa, 100), vec![9; 100]);

    // Untagged QPs: a priority tag is no VLAN.
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.fill(src.gpa, &[5; 64]);
    a.post_send(0, &write_wr(1, &src, &dst, 64));
    let f = a.h.dev.take_tx();
    assert_eq!(tci(&f[0]), None, "an untagged entry sends untagged frames");
    b.h.dev.receive(&forged(&f[0], |p| p.vlan = Some(VID)));
    assert_eq!(b.bytes(dst.gpa, 64), vec![0; 64]);
    b.h.dev.receive(&forged(&f[0], |p| p.vlan = Some(6 << 13)));
    assert_eq!(b.bytes(dst.gpa, 64), vec![5; 64]);
}

/// A UD datagram to a VLAN GID is tagged with the AH's priority, lands with
/// `CQE_GID_INDEX` naming the entry it was sent to, and is dropped when it
/// arrives on another VLAN or names a GID the port does not have there.
#[test]
fn ud_on_a_vlan_names_the_gid_entry() {
    let (mut a, mut b) = vlan_nodes();
    a.create_qp(QPT_UD);
    b.create_qp(QPT_UD);
    a.activate_ud(0, 0x1111);
    b.activate_ud(0, 0x1111);
    let mut av = Av::zeroed();
    av.dmac = b.mac;
    av.hop_limit = 64;
    av.network_type = NET_IPV4;
    av.dgid = ipv4_gid(vlan_ip(&b));
    av.sgid_index = V4_VLAN;
    av.sl = 6;
    av.vlan = VLAN_VALID | VID;
    let ahn = a.create_ah(av);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm_ = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(m.gpa, &[3; 64]);
    for id in 0..4 {
        b.post_recv(0, 70 + id, &[(bm_.va(0), 200, bm_.key)]);
    }
    let send = SendWr {
        wr_id: 1,
        opcode: WR_SEND,
        flags: WQE_SIGNALED,
        sges: vec![(m.va(0), 64, m.key)],
        ud: Some((ahn, b.qps[0].qpn, 0x1111)),
        ..SendWr::default()
    };
    a.post_send(0, &send);
    let f = a.h.dev.take_tx();
    assert_eq!(f.len(), 1);
    assert_eq!(tci(&f[0]), Some(6 << 13 | VID));
    let off_vlan = [
        forged(&f[0], |p| p.vlan = None),
        forged(&f[0], |p| p.vlan = Some(VID + 1)),
        // Right VLAN, but b's address on the untagged network.
        forged(&f[0], |p| p.net.dgid = ipv4_gid(b.ip)),
    ];
    b.h.dev.receive_batch(off_vlan.iter().map(Vec::as_slice));
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_bad_addr, 3);
    b.h.dev.receive(&f[0]);
    let c = b.poll();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].status, WC_SUCCESS);
    assert_eq!(c[0].flags & CQE_GID_INDEX, CQE_GID_INDEX);
    assert_eq!(c[0].gid_index, V4_VLAN);
    assert_eq!(b.bytes(bm_.gpa + 40, 64), vec![3; 64]);

    // Untagged datagrams name their untagged entry (3 = 10.0.1.37).
    av.dgid = ipv4_gid(b.ip);
    av.sgid_index = 3;
    av.vlan = 0;
    let ahn = a.create_ah(av);
    a.post_send(
        0,
        &SendWr {
            ud: Some((ahn, b.qps[0].qpn, 0x1111)),
            ..send
        },
    );
    let f = a.h.dev.take_tx();
    assert_eq!(tci(&f[0]), None);
    b.h.dev.receive(&f[0]);
    let c = b.poll();
    assert_eq!((c[0].status, c[0].gid_index), (WC_SUCCESS, 3));
}

/// The address vector's `vlan` may only repeat its sgid entry's.
#[test]
fn av_vlan_must_match_the_sgid_entry() {
    let mut a = Node::new(36);
    let am = a.mac;
    join_vlan(&mut a, am);
    let mut av = Av::zeroed();
    av.dmac = node_mac(37);
    av.hop_limit = 64;
    av.network_type = NET_IPV4;
    av.dgid = ipv4_gid([10, 0, VID as u8, 37]);
    av.sgid_index = V4_VLAN;
    let mut c = CmdCreateAh::zeroed();
    c.hdr.opcode = CMD_CREATE_AH;
    c.pdn = a.pdn;
    for (vlan, sl, status) in [
        (0, 0, STATUS_SUCCESS),
        (VLAN_VALID | VID, 7, STATUS_SUCCESS),
        (VLAN_VALID | (VID + 1), 0, STATUS_BAD_PARAM),
        (VID, 0, STATUS_BAD_PARAM),
        (0, 8, STATUS_BAD_PARAM),
    ] {
        c.av = av;
        c.av.vlan = vlan;
        c.av.sl = sl;
        a.h.expect(&c, status);
    }
}

/// A VLAN netdev with an address of its own: the port answers to it while
/// a VLAN entry uses it, and stops when the entry goes away.
#[test]
fn a_vlan_mac_of_its_own_is_answered_while_its_entries_exist() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    let own = [0x02, 0, 0, 0, 0x64, 37];
    let am = a.mac;
    join_vlan(&mut a, am);
    join_vlan(&mut b, own);
    assert!(b.h.dev.answers_mac(&own));
    assert!(b.h.dev.answers_mac(&b.mac));
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
    let (ag, bg) = (ipv4_gid(vlan_ip(&a)), ipv4_gid(vlan_ip(&b)));
    a.connect(0, bq, own, bg, V4_VLAN, NET_IPV4, |_| {});
    b.connect(0, aq, am, ag, V4_VLAN, NET_IPV4, |_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.fill(src.gpa, &[4; 32]);
    a.post_send(0, &write_wr(1, &src, &dst, 32));
    let (_, from_b) = exchange(&a, &b);
    assert_eq!(b.bytes(dst.gpa, 32), vec![4; 32]);
    assert!(
        from_b.iter().all(|f| f[6..12] == own),
        "b sends from its VLAN MAC"
    );
    for index in [V1_VLAN, V4_VLAN] {
        let mut clr = CmdClearGid::zeroed();
        clr.hdr.opcode = CMD_CLEAR_GID;
        clr.port = 1;
        clr.index = u16::from(index);
        b.h.ok(&clr);
    }
    assert!(!b.h.dev.answers_mac(&own));
    assert!(b.h.dev.answers_mac(&b.mac));
}
