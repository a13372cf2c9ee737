// SPDX-License-Identifier: GPL-2.0
//! Regression tests of transport defects: each fails without its fix.

mod common;
#[path = "common/holed.rs"]
mod holed;

use std::sync::Arc;

use common::rdma::*;
use common::*;
use ferroce_dev::doorbell::qp_db;
use ferroce_dev::hw::*;
use ferroce_dev::{FakeMemory, GuestMemory, Limits};
use holed::HoledMemory;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// A REG_MR command for an MR over `pages` (4 KiB each, in MR order)
/// through a 2-level page list.
fn reg_mr_cmd(n: &mut Node, pages: &[u64], access: u32) -> CmdRegMr {
    let count = pages.len() as u32;
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = n.h.pbl_2level(count, |i| pages[i as usize]);
    c.iova = 0x5000_0000;
    c.length = u64::from(count) * 4096;
    c.pdn = n.pdn;
    c.access = access;
    c.key_variant = 0x22;
    c
}

/// An MR over `count` 4 KiB pages of node `n` placed in reverse order (no
/// two neighbours adjacent: `count` segments). Returns the MR and the
/// guest address of each page.
fn reversed_mr(n: &mut Node, count: u32, access: u32) -> (MrInfo, Vec<u64>) {
    let data = n.h.alloc(u64::from(count) * 4096, 4096);
    let pages: Vec<u64> = (0..count)
        .map(|i| data + u64::from(count - 1 - i) * 4096)
        .collect();
    let c = reg_mr_cmd(n, &pages, access);
    let key = n.h.ok(&c);
    let mr = MrInfo {
        key,
        iova: c.iova,
        gpa: data,
        len: c.length,
    };
    (mr, pages)
}

/// Writes `data` into the MR's pages in MR order.
fn fill_pages(n: &Node, pages: &[u64], data: &[u8]) {
    for (page, chunk) in pages.iter().zip(data.chunks(4096)) {
        n.fill(*page, chunk);
    }
}

/// Reads `len` bytes of the MR's pages in MR order.
fn read_pages(n: &Node, pages: &[u64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for page in pages {
        let take = (len - out.len()).min(4096);
        out.extend(n.bytes(*page, take));
    }
    out
}

fn sg_steps(n: &Node) -> u64 {
    n.h.dev.counters().data.sg_steps
}

/// Gather and scatter keep a cursor per message: a message over an MR of
/// 2048 discontiguous pages at path MTU 256 (16384 packets) visits each
/// segment about once on each side, not once per packet (which would be
/// ~16384 x 1024 visits). RDMA WRITE (requester gather, responder
/// per-packet translation) and RDMA READ (responder gather, requester
/// scatter), both byte-exact.
#[test]
fn gather_scatter_is_linear_in_segments() {
    const PAGES: u32 = 2048;
    let len = PAGES as usize * 4096;
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |attr| attr.path_mtu = MTU_256);
    let (src, src_pages) = reversed_mr(&mut a, PAGES, ALL_ACCESS);
    let (dst, dst_pages) = reversed_mr(&mut b, PAGES, ALL_ACCESS);
    let data = pattern(7, len);
    fill_pages(&a, &src_pages, &data);

    let packets = (len / 256) as u64;
    // Each packet may start in a segment the previous one ended in.
    let bound = 2 * (u64::from(PAGES) + packets);

    let write = SendWr {
        wr_id: 1,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), len as u32, src.key)],
        ..SendWr::default()
    };
    a.post_send(0, &write);
    Wire::new(1, Impair::default()).run(&a, &b, 100_000);
    let cqes = a.poll();
    assert_eq!(cqes.len(), 1);
    assert_eq!(cqes[0].status, WC_SUCCESS);
    assert!(
        read_pages(&b, &dst_pages, len) == data,
        "WRITE not byte-exact"
    );
    let (a_steps, b_steps) = (sg_steps(&a), sg_steps(&b));
    assert!(a_steps <= bound, "WRITE gather: {a_steps} steps > {bound}");
    assert!(b_steps <= bound, "WRITE scatter: {b_steps} steps > {bound}");

    // READ it back into the (cleared) source.
    fill_pages(&a, &src_pages, &vec![0; len]);
    let read = SendWr {
        wr_id: 2,
        opcode: WR_RDMA_READ,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), len as u32, src.key)],
        ..SendWr::default()
    };
    a.post_send(0, &read);
    Wire::new(2, Impair::default()).run(&a, &b, 100_000);
    let cqes = a.poll();
    assert_eq!(cqes.len(), 1);
    assert_eq!(cqes[0].status, WC_SUCCESS);
    assert!(
        read_pages(&a, &src_pages, len) == data,
        "READ not byte-exact"
    );
    let a_steps = sg_steps(&a) - a_steps;
    let b_steps = sg_steps(&b) - b_steps;
    assert!(a_steps <= bound, "READ scatter: {a_steps} steps > {bound}");
    assert!(b_steps <= bound, "READ gather: {b_steps} steps > {bound}");
}

/// A node like [`Node::new`] whose device does its DMA through `guest`.
fn node_over(mem: Arc<FakeMemory>, guest: Arc<dyn GuestMemory>) -> Node {
    let mut h = Harness::enabled_over(mem, guest, Limits::default(), 16, 256);
    let ip = [10, 0, 1, 36];
    let mut gid = set_gid(3, ipv4_gid(ip), GID_TYPE_ROCE_V2, NET_IPV4);
    gid.smac = mac();
    h.ok(&gid);
    let pdn = h.alloc_pd();
    h.create_eq(1, 256);
    let (c, ring, dbrec) = h.cq_cmd(1, CQ_DEPTH, 0);
    let cqn = h.ok(&c);
    Node {
        h,
        mac: mac(),
        ip,
        pdn,
        cqn,
        cq_ring: ring,
        cq_dbrec: dbrec,
        cq_ci: 0,
        qps: Vec::new(),
        srqs: Vec::new(),
    }
}

/// A UD send whose local memory cannot be read completes with
/// LOC_PROT_ERR and moves the QP to SQE; the WQEs after it are flushed and
/// nothing is sent (IBTA 10.3.1, as for a refused SGE).
#[test]
fn ud_gather_failure_completes_in_error_and_moves_to_sqe() {
    let mem = Arc::new(FakeMemory::new());
    mem.add_region(RAM, RAM_SIZE);
    let holed = Arc::new(HoledMemory::new(mem.clone()));
    let mut a = node_over(mem, holed.clone());
    a.create_qp(QPT_UD);
    let qkey = 0x1111;
    a.activate_ud(0, qkey);
    let mut av = Av::zeroed();
    av.dmac = node_mac(37);
    av.dgid = ipv4_gid([10, 0, 1, 37]);
    av.sgid_index = 3;
    av.hop_limit = 64;
    av.network_type = NET_IPV4;
    let ahn = a.create_ah(av);
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    holed.set_hole(Some((m.gpa, 4096)));
    let send = |wr_id: u64, sges: Vec<(u64, u32, u32)>| SendWr {
        wr_id,
        opcode: WR_SEND,
        flags: WQE_SIGNALED,
        sges,
        ud: Some((ahn, 0x99, qkey)),
        ..SendWr::default()
    };
    a.post_send(0, &send(1, vec![(m.va(0), 256, m.key)]));
    let cqes: Vec<_> = a.poll().iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(cqes, vec![(1, WC_LOC_PROT_ERR)]);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_SQE));
    // In SQE a readable send is flushed, not sent.
    a.post_send(0, &send(2, vec![(m.va(4096), 256, m.key)]));
    let cqes: Vec<_> = a.poll().iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(cqes, vec![(2, WC_WR_FLUSH_ERR)]);
    assert!(a.h.dev.take_tx().is_empty(), "nothing was sent");
}

/// Runs one node alone (loopback) until quiet.
fn run_alone(a: &Node) {
    for _ in 0..100_000 {
        assert!(a.h.dev.take_tx().is_empty(), "loopback frames left");
        match a.h.dev.next_timer() {
            Some(t) => a.h.dev.tick(t),
            None => return,
        }
    }
    panic!("loopback did not converge");
}

/// An MR of `count` 4 KiB pages that cycle over 16 real ones: a long
/// message without as much guest memory.
fn cycling_mr(n: &mut Node, count: u32, access: u32) -> (MrInfo, u64) {
    let real = n.h.alloc(16 * 4096, 4096);
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = n.h.pbl_2level(count, |i| real + u64::from(i % 16) * 4096);
    c.iova = 0x6000_0000;
    c.length = u64::from(count) * 4096;
    c.pdn = n.pdn;
    c.access = access;
    let key = n.h.ok(&c);
    let mr = MrInfo {
        key,
        iova: c.iova,
        gpa: real,
        len: c.length,
    };
    (mr, real)
}

/// The loopback queue is bounded: a loopback READ of 64 x
/// READ_RESPONSE_QUEUE response packets never has more than
/// READ_RESPONSE_QUEUE frames queued; its responses stop when the queue is
/// full and resume as the engine drains it, and the READ completes.
#[test]
fn loopback_read_queue_is_bounded() {
    use ferroce_dev::transport::READ_RESPONSE_QUEUE;
    let packets = READ_RESPONSE_QUEUE as u64 * 64;
    let len = packets * 256;
    let mut a = Node::new(36);
    a.create_qp(QPT_RC);
    a.create_qp(QPT_RC);
    let (q0, q1) = (a.qps[0].qpn, a.qps[1].qpn);
    let (mac, gid) = (a.mac, ipv4_gid(a.ip));
    let mtu = |attr: &mut QpAttr| attr.path_mtu = MTU_256;
    a.connect(0, q1, mac, gid, 3, NET_IPV4, mtu);
    a.connect(1, q0, mac, gid, 3, NET_IPV4, mtu);
    let (m, real) = cycling_mr(&mut a, (len / 4096) as u32, ALL_ACCESS);
    let data = pattern(11, 16 * 4096);
    a.fill(real, &data);
    let read = SendWr {
        wr_id: 1,
        opcode: WR_RDMA_READ,
        flags: WQE_SIGNALED,
        remote_addr: m.va(0),
        rkey: m.key,
        sges: vec![(m.va(0), len as u32, m.key)],
        ..SendWr::default()
    };
    a.post_send(0, &read);
    run_alone(&a);
    let cqes: Vec<_> = a.poll().iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(cqes, vec![(1, WC_SUCCESS)]);
    // Read onto itself through the same pages: unchanged.
    assert!(a.bytes(real, data.len()) == data);
    let d = a.h.dev.counters().data;
    assert!(d.loopback_frames > packets, "{}", d.loopback_frames);
    assert!(
        d.tx_queue_peak <= READ_RESPONSE_QUEUE as u64,
        "peak {} frames queued",
        d.tx_queue_peak
    );
}

/// REG_MR checks every page of the list for DMA (device.rst: each page
/// must be DMA-able): one page outside guest memory anywhere in a 2-level
/// list, the last one included, fails the command with DMA_ERROR.
#[test]
fn reg_mr_checks_every_page() {
    let mut a = Node::new(36);
    let base = a.h.alloc(1100 * 4096, 4096);
    let good: Vec<u64> = (0..1100).map(|i| base + i * 4096).collect();
    // Just past the end of guest RAM: aligned, but not memory.
    let outside = RAM + RAM_SIZE as u64;
    for bad in [0usize, 511, 512, 700, 1099] {
        let mut pages = good.clone();
        pages[bad] = outside;
        let c = reg_mr_cmd(&mut a, &pages, ACCESS_LOCAL_WRITE);
        a.h.expect(&c, STATUS_DMA_ERROR);
    }
    let c = reg_mr_cmd(&mut a, &good, ACCESS_LOCAL_WRITE);
    a.h.ok(&c);
}

/// A response lost early in a long READ costs the requester one
/// re-request, not its ACK timer: the first response past the gap makes it
/// ask again from the missing PSN (a duplicate READ, IBTA 9.7.5.1.4), and
/// the responder, which keeps at most READ_RESPONSE_QUEUE responses queued
/// ahead of the wire, restarts from there at once. With the whole answer
/// queued ahead (65536 frames before), the requester discarded all of it
/// as stale while its timer ran; on a slow host that cost every retry and
/// ended an 8 MiB `ib_read_bw` in RETRY_EXC_ERR.
#[test]
fn a_lost_read_response_is_re_requested_without_the_stale_answer() {
    use ferroce_dev::transport::READ_RESPONSE_QUEUE;
    let packets = 16 * READ_RESPONSE_QUEUE as u64;
    let len = packets * 256;
    let (mut a, mut b) = rc_pair(|x| {
        x.path_mtu = MTU_256;
        x.timeout = 14;
    });
    let src = b.reg_mr(len, ALL_ACCESS);
    let dst = a.reg_mr(len, ACCESS_LOCAL_WRITE);
    let data = pattern(21, len as usize);
    b.fill(src.gpa, &data);
    a.post_send(
        0,
        &SendWr {
            wr_id: 7,
            opcode: WR_RDMA_READ,
            flags: WQE_SIGNALED,
            remote_addr: src.va(0),
            rkey: src.key,
            sges: vec![(dst.va(0), len as u32, dst.key)],
            ..SendWr::default()
        },
    );
    // The wire by hand, without ever advancing the clock: the READ must
    // finish without a timeout. The second response is lost.
    let mut responses = 0u64;
    let mut cqes = Vec::new();
    for _ in 0..100_000 {
        let fa = a.h.dev.take_tx();
        b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
        let mut fb = b.h.dev.take_tx();
        if responses < 2 && responses + fb.len() as u64 >= 2 {
            fb.remove((1 - responses) as usize);
        }
        responses += fb.len() as u64;
        a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
        cqes.extend(a.poll());
        if !cqes.is_empty() {
            break;
        }
    }
    let st: Vec<_> = cqes.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(st, vec![(7, WC_SUCCESS)]);
    assert!(a.bytes(dst.gpa, len as usize) == data, "READ data differs");
    let d = a.h.dev.counters().data;
    assert_eq!(d.timeouts, 0);
    assert!(
        d.stale_responses <= 2 * READ_RESPONSE_QUEUE as u64,
        "{} stale responses discarded for one lost one ({} packets)",
        d.stale_responses,
        packets
    );
}

/// The RQ doorbell is optional: the provider and the kernel driver ring it
/// only once a QP may be in ERR. The doorbell that asks a QP in ERR to
/// flush its new receives may so come more than the RQ's depth of
/// receives after the last one, and was refused as a jump of more than
/// the depth: the receive was never flushed, and a drain (ib_drain_rq,
/// rdma_cm's teardown) waited for it forever. The RQ's doorbell is checked
/// against the receives the device has not consumed.
#[test]
fn an_rq_doorbell_after_many_silent_receives_flushes() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    let n = 2 * b.qps[0].rq_depth + 3;
    for i in 0..u64::from(n) {
        b.write_recv(0, i, &[(bm.va(0), 64, bm.key)]);
        let mut s = wr(1000 + i, WR_SEND);
        s.sges = vec![(m.va(0), 64, m.key)];
        a.post_send(0, &s);
        Wire::new(1, Impair::default()).run(&a, &b, 1000);
        assert_eq!(statuses(&a.poll()), vec![(1000 + i, WC_SEND, WC_SUCCESS)]);
        assert_eq!(statuses(&b.poll()), vec![(i, WC_RECV, WC_SUCCESS)]);
    }
    let qpn = b.qps[0].qpn;
    // A late doorbell, for WQEs the device already took, is no fault.
    let (pi, depth) = (b.qps[0].rq_pi, b.qps[0].rq_depth as u16);
    b.h.db(0, DB_RQ, qp_db(qpn, u32::from(pi.wrapping_sub(depth))));
    assert_eq!(b.h.dev.counters().hw.malformed_doorbells, 0);
    assert_eq!(b.h.modify(attr_with(qpn, QPS_ERR, 0)), STATUS_SUCCESS);
    b.post_recv(0, 99, &[(bm.va(0), 64, bm.key)]);
    assert_eq!(statuses(&b.poll()), vec![(99, WC_RECV, WC_WR_FLUSH_ERR)]);
    assert_eq!(b.h.dev.counters().hw.malformed_doorbells, 0);
    // Beyond the depth either way, it is malformed.
    let pi = b.qps[0].rq_pi;
    b.h.db(0, DB_RQ, qp_db(qpn, u32::from(pi.wrapping_add(depth + 1))));
    b.h.db(0, DB_RQ, qp_db(qpn, u32::from(pi.wrapping_sub(depth + 1))));
    assert_eq!(b.h.dev.counters().hw.malformed_doorbells, 2);
}
