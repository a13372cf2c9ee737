// SPDX-License-Identifier: GPL-2.0
//! The port: steering between the wire, the RDMA engine and the paired
//! netdev, over socketpairs (datagram pairs stand in for the tap, stream
//! pairs for QEMU's stream netdev).

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::rdma::*;
use common::{ipv4_gid, set_gid};
use ferroce_dev::hw::*;
use ferroce_dev::port::{steer, Port, Steer};
use ferroce_dev::wire;

fn frame(dmac: [u8; 6], ethertype: u16, rest: &[u8]) -> Vec<u8> {
    let mut f = dmac.to_vec();
    f.extend_from_slice(&[0x52, 0x54, 0, 0, 0, 0x99]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(rest);
    f
}

/// An IPv4/UDP frame to `dport` (checksums not needed for steering).
fn udp_frame(dmac: [u8; 6], dport: u16) -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 1, 2,
    ];
    ip.extend_from_slice(&1234u16.to_be_bytes());
    ip.extend_from_slice(&dport.to_be_bytes());
    ip.extend_from_slice(&[0, 20, 0, 0]);
    ip.extend_from_slice(&[0u8; 12]);
    frame(dmac, wire::ETH_P_IPV4, &ip)
}

#[test]
fn steering_decisions() {
    let mac = node_mac(1);
    let other = node_mac(2);
    let me = move |m: &[u8; 6]| *m == mac;
    assert_eq!(steer(&udp_frame(mac, 4791), me), Steer::Engine);
    assert_eq!(
        steer(&udp_frame(mac, 4792), me),
        Steer::Netdev,
        "other UDP port"
    );
    assert_eq!(
        steer(&udp_frame(other, 4791), me),
        Steer::Netdev,
        "RoCE for another MAC"
    );
    // 1.7 (CAP_MCAST): RoCE to any group MAC goes to the engine, other
    // frames to group MACs to the netdev.
    for group in [
        [0xff; 6],
        [0x01, 0, 0x5e, 0x66, 1, 2],
        [0x33, 0x33, 0, 0, 0, 1],
    ] {
        assert_eq!(
            steer(&udp_frame(group, 4791), me),
            Steer::Engine,
            "{group:x?}"
        );
        assert_eq!(
            steer(&frame(group, 0x8915, &[0x60; 60]), me),
            Steer::Engine,
            "RoCE v1 to {group:x?}"
        );
        assert_eq!(
            steer(&udp_frame(group, 4792), me),
            Steer::Netdev,
            "other UDP port to {group:x?}"
        );
    }
    assert_eq!(
        steer(&frame(mac, 0x8915, &[0x60; 60]), me),
        Steer::Engine,
        "RoCE v1"
    );
    assert_eq!(
        steer(&frame([0xff; 6], 0x0806, &[0; 28]), me),
        Steer::Netdev,
        "ARP"
    );
    assert_eq!(
        steer(
            &frame(mac, 0x0800, &[0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6]),
            me
        ),
        Steer::Netdev,
        "TCP"
    );
    // One 802.1Q tag is looked through; RoCE in two tags is not steered.
    let tagged = |f: Vec<u8>, tags: usize| {
        let mut t = f[..12].to_vec();
        for _ in 0..tags {
            t.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]); // PCP 3, VID 100
        }
        t.extend_from_slice(&f[12..]);
        t
    };
    assert_eq!(
        steer(&tagged(udp_frame(mac, 4791), 1), me),
        Steer::Engine,
        "tagged RoCE v2"
    );
    assert_eq!(
        steer(&tagged(frame(mac, 0x8915, &[0x60; 60]), 1), me),
        Steer::Engine,
        "tagged RoCE v1"
    );
    assert_eq!(
        steer(&tagged(udp_frame(mac, 4792), 1), me),
        Steer::Netdev,
        "tagged other UDP port"
    );
    assert_eq!(
        steer(&tagged(udp_frame(mac, 4791), 2), me),
        Steer::Netdev,
        "double-tagged"
    );
    assert_eq!(
        steer(&tagged(udp_frame(mac, 4791), 1)[..17], me),
        Steer::Netdev,
        "truncated tag"
    );
    assert_eq!(steer(&[], me), Steer::Netdev);
    assert_eq!(steer(&mac, me), Steer::Netdev, "runt");
}

fn read_stream_frame(s: &mut UnixStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut f = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut f).unwrap();
    f
}

fn write_stream_frame(s: &mut UnixStream, f: &[u8]) {
    let mut m = (f.len() as u32).to_be_bytes().to_vec();
    m.extend_from_slice(f);
    s.write_all(&m).unwrap();
}

struct Side {
    node: Node,
    port: Arc<Port>,
    /// QEMU's end of the stream netdev.
    qemu: UnixStream,
}

fn side(i: u8, wire_end: UnixDatagram) -> Side {
    let node = Node::new(i);
    // Non-blocking: a full peer queue drops the frame (as a tap does)
    // instead of blocking both ports' threads on each other.
    wire_end.set_nonblocking(true).unwrap();
    let port = Port::new(node.h.dev.clone(), Arc::new(wire_end), None);
    port.spawn(None).unwrap();
    let (qemu, dev_end) = UnixStream::pair().unwrap();
    qemu.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let p = port.clone();
    std::thread::spawn(move || p.serve_netdev(dev_end));
    Side { node, port, qemu }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Two devices whose ports share a wire: RDMA goes engine to engine,
/// ordinary frames go netdev to netdev, and nothing crosses over.
#[test]
fn two_ports_share_a_wire_with_their_netdevs() {
    let (wa, wb) = UnixDatagram::pair().unwrap();
    let mut a = side(36, wa);
    let mut b = side(37, wb);
    // Wait until both netdev connections are attached (first frame passes).
    a.node.create_qp(QPT_RC);
    b.node.create_qp(QPT_RC);
    connect_pair(&mut a.node, 0, &mut b.node, 0, |x| x.timeout = 14);
    let src = a.node.reg_mr(64 << 10, ACCESS_LOCAL_WRITE);
    let dst = b
        .node
        .reg_mr(64 << 10, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    a.node.fill(src.gpa, &data);
    // Ordinary traffic from a's guest to b's guest (and a broadcast).
    let arp = frame([0xff; 6], 0x0806, &[1; 28]);
    let ip = udp_frame(b.node.mac, 53);
    wait_for("netdev attach", || {
        write_stream_frame(&mut a.qemu, &arp);
        b.port.stats().to_netdev > 0
    });
    assert_eq!(read_stream_frame(&mut b.qemu), arp);
    write_stream_frame(&mut a.qemu, &ip);
    let mut got = read_stream_frame(&mut b.qemu);
    while got == arp {
        got = read_stream_frame(&mut b.qemu);
    }
    assert_eq!(got, ip);
    // RDMA WRITE a -> b through both ports.
    let w = SendWr {
        wr_id: 1,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), 50_000, src.key)],
        ..SendWr::default()
    };
    a.node.post_send(0, &w);
    let mut cqes = Vec::new();
    wait_for("RDMA WRITE completion", || {
        cqes.extend(a.node.poll());
        !cqes.is_empty()
    });
    assert_eq!((cqes[0].wr_id, cqes[0].status), (1, WC_SUCCESS));
    assert_eq!(b.node.bytes(dst.gpa, 50_000), data);
    let (sa, sb) = (a.port.stats(), b.port.stats());
    assert!(sb.to_engine >= 49, "{sb:?}");
    assert!(sa.to_engine >= 1, "ACKs reach a's engine: {sa:?}");
    // No RoCE frame leaked to a netdev: b's netdev got exactly arp + ip,
    // a's netdev got nothing from b.
    assert_eq!(sb.to_netdev + sb.netdev_dropped, sb.wire_rx - sb.to_engine);
    assert!(sb.to_netdev >= 2);
    assert_eq!(sa.to_netdev, 0);
    a.port.stop();
    b.port.stop();
}

/// A RoCE frame on the wire for the port's MAC but malformed (bad ICRC)
/// reaches the engine and is dropped and counted there.
#[test]
fn corrupt_roce_frame_is_counted_by_the_engine() {
    let (wa, peer) = UnixDatagram::pair().unwrap();
    let a = side(36, wa);
    let mut f = udp_frame(a.node.mac, 4791);
    f.extend_from_slice(&[0u8; 40]);
    peer.send(&f).unwrap();
    wait_for("engine drop", || {
        let d = a.node.h.dev.counters().data;
        d.rx_frames == 1
            && d.rx_frames == d.rx_bad_header + d.rx_truncated + d.rx_bad_icrc + d.rx_bad_bth
    });
    a.port.stop();
}

/// `--pcap`: every frame that crosses the wire is recorded.
#[test]
fn port_records_the_wire_to_pcap() {
    let (wa, peer) = UnixDatagram::pair().unwrap();
    wa.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    let node = Node::new(36);
    let path = std::env::temp_dir().join(format!("ferroce-port-{}.pcap", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let pcap = wire::pcap::PcapWriter::new(file).unwrap();
    let port = Port::new(node.h.dev.clone(), Arc::new(wa), Some(pcap));
    port.spawn(None).unwrap();
    let arp = frame([0xff; 6], 0x0806, &[2; 28]);
    peer.send(&arp).unwrap();
    wait_for("frame", || port.stats().wire_rx == 1);
    port.stop();
    let frames = wire::pcap::read_frames(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(frames, vec![arp]);
    let _ = std::fs::remove_file(&path);
}

/// Real time: the port's engine thread runs the retransmission timers, so
/// a transfer through two ports with lossy devices completes.
#[test]
fn retransmission_through_ports_on_real_time() {
    let (wa, wb) = UnixDatagram::pair().unwrap();
    let mut a = side(36, wa);
    let mut b = side(37, wb);
    let f = |s| ferroce_dev::fault::FaultConfig::parse(s).unwrap();
    a.node.h.dev.set_faults(f("drop=10%,reorder=5%,seed=1"));
    b.node.h.dev.set_faults(f("drop=10%,dup=5%,seed=2"));
    a.node.create_qp(QPT_RC);
    b.node.create_qp(QPT_RC);
    connect_pair(&mut a.node, 0, &mut b.node, 0, |x| x.timeout = 14);
    let src = a.node.reg_mr(256 << 10, ACCESS_LOCAL_WRITE);
    let dst = b.node.reg_mr(
        256 << 10,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
    );
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 + 7) as u8).collect();
    a.node.fill(src.gpa, &data);
    let w = SendWr {
        wr_id: 1,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), 200_000, src.key)],
        ..SendWr::default()
    };
    a.node.post_send(0, &w);
    let r = SendWr {
        wr_id: 2,
        opcode: WR_RDMA_READ,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(210_000), 40_000, src.key)],
        ..SendWr::default()
    };
    a.node.post_send(0, &r);
    let mut cqes = Vec::new();
    wait_for("completions", || {
        cqes.extend(a.node.poll());
        cqes.len() == 2
    });
    let st: Vec<_> = cqes.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        st,
        vec![(1, WC_SUCCESS), (2, WC_SUCCESS)],
        "a {:?} {:?}\nb {:?} {:?}",
        a.node.h.dev.counters().data,
        a.port.stats(),
        b.node.h.dev.counters().data,
        b.port.stats()
    );
    assert_eq!(b.node.bytes(dst.gpa, 200_000), data);
    assert_eq!(a.node.bytes(src.gpa + 210_000, 40_000), data[..40_000]);
    assert!(a.node.h.dev.faults().1.dropped > 0);
    let c = a.node.h.dev.counters();
    let port = c.port.expect("port counters on the control socket");
    assert!(port["wire_tx"].as_u64().unwrap() > 100, "{port}");
    a.port.stop();
    b.port.stop();
}

/// A link that takes 2 ms per frame and records the PSN of each.
struct SlowLink {
    psns: std::sync::Mutex<Vec<u32>>,
    sending: std::sync::atomic::AtomicBool,
}

impl ferroce_dev::port::FrameLink for SlowLink {
    fn recv(
        &self,
        _buf: &mut [u8],
        _wait: bool,
        _frame: &mut dyn FnMut(&[u8], &[u8]),
    ) -> std::io::Result<usize> {
        std::thread::sleep(Duration::from_millis(10));
        Err(std::io::ErrorKind::WouldBlock.into())
    }
    fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        self.sending
            .store(true, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        // Ethernet, IPv4, UDP, then the BTH: PSN in its bytes 9..12.
        let b = &frame[14 + 20 + 8 + 9..14 + 20 + 8 + 12];
        let psn = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        self.psns.lock().unwrap().push(psn);
        Ok(())
    }
}

/// Frames leave in the order the engine queued them although the wire
/// and engine threads both flush the port: one that takes frames while
/// another still sends the ones it took must not overtake them (a READ
/// request sent ahead of earlier ones costs a sequence NAK, a go-back
/// and READs answered twice).
#[test]
fn concurrent_flushes_keep_the_engine_order() {
    let mut a = Node::new(38);
    let mut b = Node::new(39);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |_| {});
    let link = Arc::new(SlowLink {
        psns: std::sync::Mutex::new(Vec::new()),
        sending: std::sync::atomic::AtomicBool::new(false),
    });
    // Not spawned: only the two flushes below send.
    let port = Port::new(a.h.dev.clone(), link.clone(), None);
    let src = a.reg_mr(64 << 10, ACCESS_LOCAL_WRITE);
    let write = |wr_id, off| SendWr {
        wr_id,
        opcode: WR_RDMA_WRITE,
        remote_addr: 0x1000,
        rkey: 0x100,
        sges: vec![(src.va(off), 8 << 10, src.key)],
        ..SendWr::default()
    };
    a.post_send(0, &write(1, 0));
    let first = {
        let p = port.clone();
        std::thread::spawn(move || p.flush_engine())
    };
    wait_for("the first flush to send", || {
        link.sending.load(std::sync::atomic::Ordering::SeqCst)
    });
    a.post_send(0, &write(2, 8 << 10));
    port.flush_engine();
    first.join().unwrap();
    let psns = link.psns.lock().unwrap().clone();
    assert!(psns.len() >= 16, "{psns:?}");
    assert!(
        psns.windows(2).all(|w| w[1] == (w[0] + 1) & 0xff_ffff),
        "frames left out of order: {psns:?}"
    );
}

/// What the driver does on NETDEV_CHANGEADDR (device.rst "Port MAC"):
/// SET_PORT_MAC with the netdev's new address, and ib_core re-adds the
/// GIDs with it as source MAC.
fn change_mac(n: &mut Node, mac: [u8; 6]) {
    let mut m = CmdSetPortMac::zeroed();
    m.hdr.opcode = CMD_SET_PORT_MAC;
    m.port = 1;
    m.mac = mac;
    n.h.ok(&m);
    let mut clear = CmdClearGid::zeroed();
    clear.hdr.opcode = CMD_CLEAR_GID;
    clear.index = 3;
    clear.port = 1;
    n.h.ok(&clear);
    let mut g = set_gid(3, ipv4_gid(n.ip), GID_TYPE_ROCE_V2, NET_IPV4);
    g.smac = mac;
    n.h.ok(&g);
    n.mac = mac;
}

/// One byte-checked RDMA WRITE from QP `qa` of `a` to `b` through the
/// ports.
fn write_through_ports(a: &mut Side, qa: usize, b: &mut Side, wr_id: u64) {
    let src = a.node.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b
        .node
        .reg_mr(8192, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
    let data: Vec<u8> = (0..5000u32)
        .map(|i| (i * 13 + wr_id as u32) as u8)
        .collect();
    a.node.fill(src.gpa, &data);
    let w = SendWr {
        wr_id,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), 5000, src.key)],
        ..SendWr::default()
    };
    a.node.post_send(qa, &w);
    let mut cqes = Vec::new();
    wait_for("RDMA WRITE completion", || {
        cqes.extend(a.node.poll());
        !cqes.is_empty()
    });
    assert_eq!((cqes[0].wr_id, cqes[0].status), (wr_id, WC_SUCCESS));
    assert_eq!(b.node.bytes(dst.gpa, 5000), data);
}

/// The port follows its netdev's MAC: after SET_PORT_MAC, RoCE frames for
/// the new MAC reach the engine and carry traffic, RoCE frames for the old
/// one go to the netdev, QUERY_PORT reports the new MAC while PORT_MAC
/// keeps the permanent one, and a reset goes back to the permanent MAC.
#[test]
fn the_port_follows_a_mac_change() {
    let (wa, wb) = UnixDatagram::pair().unwrap();
    let mut a = side(40, wa);
    let mut b = side(41, wb);
    let old = b.node.mac;
    let new = [0x02, 0x11, 0x22, 0x33, 0x44, 0x41];
    assert_eq!(b.node.h.dev.current_mac(), old);
    change_mac(&mut b.node, new);
    assert_eq!(b.node.h.dev.current_mac(), new);
    let mut q = CmdQueryPort::zeroed();
    q.hdr.opcode = CMD_QUERY_PORT;
    q.port = 1;
    let (s, out) = b.node.h.cmd(&q);
    assert_eq!(s, STATUS_SUCCESS);
    assert_eq!(
        (out[PORT_OUT_MAC_HI], out[PORT_OUT_MAC_LO]),
        (0x0211, 0x2233_4441)
    );
    assert_eq!(b.node.h.reg_r(REG_PORT_MAC_HI), 0x5254);
    assert_eq!(b.node.h.reg_r(REG_PORT_MAC_LO), 0x00fe_0029);
    assert_eq!(b.node.h.dev.status().mac, "02:11:22:33:44:41");

    // A connection made after the change (the peer resolved the new MAC)
    // carries traffic both ways (ACKs come from the new source MAC).
    a.node.create_qp(QPT_RC);
    b.node.create_qp(QPT_RC);
    connect_pair(&mut a.node, 0, &mut b.node, 0, |x| x.timeout = 14);
    write_through_ports(&mut a, 0, &mut b, 1);
    write_through_ports(&mut b, 0, &mut a, 2);

    // A RoCE frame for the old MAC is no longer the engine's.
    let before = b.port.stats();
    let f = udp_frame(old, 4791);
    wait_for("old-MAC frame at b's netdev", || {
        // Sent from a's guest: resent until a's netdev connection is up.
        write_stream_frame(&mut a.qemu, &f);
        b.port.stats().to_netdev > before.to_netdev
    });
    assert_eq!(read_stream_frame(&mut b.qemu), f);
    assert_eq!(b.port.stats().to_engine, before.to_engine);

    // And back: the permanent MAC works again.
    change_mac(&mut b.node, old);
    a.node.create_qp(QPT_RC);
    b.node.create_qp(QPT_RC);
    connect_pair(&mut a.node, 1, &mut b.node, 1, |x| x.timeout = 14);
    write_through_ports(&mut a, 1, &mut b, 3);

    // Bad addresses and fields are refused and change nothing.
    let mut m = CmdSetPortMac::zeroed();
    m.hdr.opcode = CMD_SET_PORT_MAC;
    m.port = 1;
    for (mac, st) in [
        ([0; 6], STATUS_BAD_PARAM),
        ([0xff; 6], STATUS_BAD_PARAM),
        ([0x01, 0, 0x5e, 0, 0, 1], STATUS_BAD_PARAM),
        ([0x33, 0x33, 0, 0, 0, 1], STATUS_BAD_PARAM),
    ] {
        m.mac = mac;
        b.node.h.expect(&m, st);
    }
    m.mac = new;
    m.port = 2;
    b.node.h.expect(&m, STATUS_BAD_PARAM);
    m.port = 1;
    m.reserved = 1;
    b.node.h.expect(&m, STATUS_BAD_RESERVED);
    m.reserved = 0;
    m.reserved2 = [0, 1];
    b.node.h.expect(&m, STATUS_BAD_RESERVED);
    assert_eq!(b.node.h.dev.current_mac(), old);

    // A reset goes back to the permanent MAC.
    m.reserved2 = [0; 2];
    b.node.h.ok(&m);
    assert_eq!(b.node.h.dev.current_mac(), new);
    b.node.h.dev.reset();
    assert_eq!(b.node.h.dev.current_mac(), old);
    a.port.stop();
    b.port.stop();
}
