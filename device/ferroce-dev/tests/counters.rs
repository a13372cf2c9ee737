// SPDX-License-Identifier: GPL-2.0
//! The data path counters of QUERY_COUNTERS (1.4): each grows exactly when
//! the device does the thing it counts, read the way a driver reads them.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

fn write_wr(wr_id: u64, len: u32, m: &MrInfo, peer: &MrInfo) -> SendWr {
    SendWr {
        wr_id,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: peer.va(0),
        rkey: peer.key,
        sges: vec![(m.va(0), len, m.key)],
        ..SendWr::default()
    }
}

/// Frames of one side, and their bytes.
fn frames_len(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

fn deliver(to: &Node, frames: &[Vec<u8>]) {
    to.h.dev.receive_batch(frames.iter().map(|f| f.as_slice()));
}

/// The error and drop counters, which a fault-free path leaves at 0.
fn errors(k: &Counters) -> [u64; 21] {
    [
        k.tx_dropped,
        k.rx_stalled,
        k.rx_truncated,
        k.rx_not_roce,
        k.rx_bad_header,
        k.rx_bad_bth,
        k.rx_bad_icrc,
        k.rx_no_qp,
        k.rx_bad_key,
        k.rx_bad_addr,
        k.rx_ud_no_wqe,
        k.dup_requests,
        k.seq_naks_sent,
        k.rnr_naks_sent,
        k.err_naks_sent,
        k.rnr_naks_rcvd,
        k.seq_naks_rcvd,
        k.timeouts,
        k.ack_retries,
        k.retransmits,
        k.retry_exceeded + k.rnr_retry_exceeded + k.cqe_errors + k.stale_responses,
    ]
}

#[test]
fn clean_write_counts_every_packet_and_byte() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(8192, ALL_ACCESS);
    let (a0, b0) = (a.query_counters(), b.query_counters());
    assert_eq!(a0.tx_pkts, 0);
    // 3000 bytes at path MTU 1024: three request packets.
    a.post_send(0, &write_wr(1, 3000, &m, &bm));
    let (mut a_out, mut b_out) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        let fa = a.h.dev.take_tx();
        deliver(&b, &fa);
        let fb = b.h.dev.take_tx();
        deliver(&a, &fb);
        if fa.is_empty() && fb.is_empty() {
            break;
        }
        a_out.extend(fa);
        b_out.extend(fb);
    }
    assert_eq!(a.poll().len(), 1);
    let (ka, kb) = (a.query_counters(), b.query_counters());
    assert_eq!(a_out.len(), 3);
    assert_eq!(ka.tx_pkts, 3);
    assert_eq!(ka.tx_bytes, frames_len(&a_out));
    assert_eq!(kb.rx_pkts, 3);
    assert_eq!(kb.rx_bytes, frames_len(&a_out));
    assert_eq!(kb.tx_pkts, b_out.len() as u64);
    assert_eq!(kb.tx_bytes, frames_len(&b_out));
    assert_eq!(kb.acks_sent, b_out.len() as u64);
    assert!(kb.acks_sent >= 1);
    assert_eq!(ka.rx_pkts, kb.tx_pkts);
    assert_eq!(ka.responses_rcvd, kb.tx_pkts);
    assert_eq!(ka.cqes, 1);
    assert_eq!((kb.cqes, ka.loopback_pkts, kb.loopback_pkts), (0, 0, 0));
    assert_eq!(errors(&ka), [0; 21]);
    assert_eq!(errors(&kb), [0; 21]);
    // The 1.0 part is still there and counts the commands.
    assert_eq!(ka.cmds_ok, a0.cmds_ok + 1);
    let _ = b0;
}

#[test]
fn gaps_and_duplicates_count_on_both_sides() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(8192, ALL_ACCESS);
    a.post_send(0, &write_wr(1, 3000, &m, &bm));
    let req = a.h.dev.take_tx();
    assert_eq!(req.len(), 3);
    // Packet 1 lost: packet 2 is out of sequence, one NAK for the gap.
    deliver(&b, &req[0..1]);
    deliver(&b, &req[2..3]);
    deliver(&b, &req[2..3]);
    let kb = b.query_counters();
    assert_eq!(kb.rx_pkts, 3);
    assert_eq!(kb.seq_naks_sent, 1);
    assert_eq!(kb.dup_requests, 0);
    // Packet 0 again: a duplicate.
    deliver(&b, &req[0..1]);
    let kb = b.query_counters();
    assert_eq!(kb.dup_requests, 1);
    assert_eq!(kb.seq_naks_sent, 1);
    // The NAK makes the requester retry once from packet 1.
    let naks = b.h.dev.take_tx();
    deliver(&a, &naks);
    let ka = a.query_counters();
    assert_eq!(ka.seq_naks_rcvd, 1);
    assert_eq!(ka.ack_retries, 1);
    assert_eq!(ka.retransmits, 1);
    assert_eq!(ka.timeouts, 0);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(a.poll()[0].status, WC_SUCCESS);
    // The duplicate ACK of the duplicate request is stale for the completer
    // unless it came first; either way nothing failed.
    let ka = a.query_counters();
    assert_eq!((ka.retry_exceeded, ka.cqe_errors), (0, 0));
    assert_eq!(ka.ack_retries, 1);
}

#[test]
fn a_response_seen_twice_is_stale() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, 100, &m, &bm));
    deliver(&b, &a.h.dev.take_tx());
    let acks = b.h.dev.take_tx();
    assert_eq!(acks.len(), 1);
    deliver(&a, &acks);
    assert_eq!(a.query_counters().stale_responses, 0);
    deliver(&a, &acks);
    let ka = a.query_counters();
    assert_eq!(ka.stale_responses, 1);
    assert_eq!(ka.responses_rcvd, 2);
}

#[test]
fn timeouts_retries_and_retry_exhaustion() {
    let (mut a, b) = rc_pair(|a| a.retry_cnt = 3);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut w = write_wr(1, 100, &m, &m);
    w.remote_addr = 0;
    a.post_send(0, &w);
    let mut second = write_wr(2, 100, &m, &m);
    second.flags = 0;
    a.post_send(0, &second);
    let drop_all = Impair {
        drop: 100,
        ..Impair::default()
    };
    Wire::new(1, drop_all).run(&a, &b, 1000);
    let ka = a.query_counters();
    assert_eq!(ka.timeouts, 4);
    assert_eq!(ka.ack_retries, 3);
    assert_eq!(ka.retransmits, 3);
    assert_eq!(ka.retry_exceeded, 1);
    assert_eq!(ka.rnr_retry_exceeded, 0);
    // Two WQEs each sent once and retried three times.
    assert_eq!(ka.tx_pkts, 8);
    // The head completes with RETRY_EXC_ERR, the second is flushed.
    assert_eq!((ka.cqes, ka.cqe_errors, ka.cqe_flushed), (2, 2, 1));
}

#[test]
fn rnr_naks_and_rnr_exhaustion() {
    let (mut a, mut b) = rc_pair(|a| a.rnr_retry = 2);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let s = SendWr {
        wr_id: 1,
        opcode: WR_SEND,
        flags: WQE_SIGNALED,
        sges: vec![(m.va(0), 100, m.key)],
        ..SendWr::default()
    };
    a.post_send(0, &s);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    let (ka, kb) = (a.query_counters(), b.query_counters());
    assert_eq!(kb.rnr_naks_sent, 3);
    assert_eq!(ka.rnr_naks_rcvd, 3);
    assert_eq!(ka.rnr_retry_exceeded, 1);
    assert_eq!(ka.retry_exceeded, 0);
    // RNR waits rewind the queue but use none of retry_cnt.
    assert_eq!(ka.retransmits, 2);
    assert_eq!(ka.ack_retries, 0);
    assert_eq!(ka.timeouts, 0);
    assert_eq!((ka.cqes, ka.cqe_errors, ka.cqe_flushed), (1, 1, 0));
    assert_eq!(kb.acks_sent, 0);
}

/// The responder NAKs the request after an RNR NAKed SEND as out of
/// sequence, naming the SEND's PSN. The RNR wait already resends from
/// there: that NAK is counted, and neither rewinds the queue again nor uses
/// retry_cnt. (The request is an RDMA WRITE: end-to-end credits hold a
/// second SEND back while the first has no receive WQE.)
#[test]
fn a_sequence_nak_behind_an_rnr_nak_is_not_a_retry() {
    let (mut a, mut b) = rc_pair(|a| a.retry_cnt = 1);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &s);
    let mut w = wr(2, WR_RDMA_WRITE);
    w.sges = vec![(m.va(0), 100, m.key)];
    w.remote_addr = bm.va(2048);
    w.rkey = bm.key;
    a.post_send(0, &w);
    rnr_rounds(&a, &b, 3);
    let (ka, kb) = (a.query_counters(), b.query_counters());
    assert_eq!(kb.rnr_naks_sent, 3);
    assert_eq!(kb.seq_naks_sent, 3);
    assert_eq!((ka.rnr_naks_rcvd, ka.seq_naks_rcvd), (3, 3));
    assert_eq!(ka.retransmits, 3);
    assert_eq!(ka.ack_retries, 0);
    b.post_recv(0, 7, &[(bm.va(0), 2048, bm.key)]);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_SEND, WC_SUCCESS), (2, WC_RDMA_WRITE, WC_SUCCESS)]
    );
    assert_eq!(statuses(&b.poll()), vec![(7, WC_RECV, WC_SUCCESS)]);
    let ka = a.query_counters();
    assert_eq!((ka.ack_retries, ka.retry_exceeded, ka.timeouts), (0, 0, 0));
}

#[test]
fn receive_drops_by_reason() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, 100, &m, &bm));
    let req = a.h.dev.take_tx();
    assert_eq!(req.len(), 1);
    let base = b.query_counters();

    // A flipped payload bit: the ICRC fails, the packet is not received.
    let mut bad = req[0].clone();
    let last = bad.len() - 10;
    bad[last] ^= 1;
    deliver(&b, &[bad]);
    let k = b.query_counters();
    assert_eq!(k.rx_bad_icrc - base.rx_bad_icrc, 1);
    assert_eq!(k.rx_pkts, base.rx_pkts);
    // Too short to be anything.
    deliver(&b, &[req[0][..20].to_vec()]);
    let k = b.query_counters();
    assert_eq!(k.rx_truncated - base.rx_truncated, 1);
    assert_eq!(k.rx_pkts, base.rx_pkts);

    // A third node writes to b's QP, which is connected to a: bad address.
    let mut c = Node::new(38);
    c.create_qp(QPT_RC);
    let (bq, bmac, bgid) = (b.qps[0].qpn, b.mac, ipv4_gid(b.ip));
    c.connect(0, bq, bmac, bgid, 3, NET_IPV4, |_| {});
    let cm = c.reg_mr(4096, ACCESS_LOCAL_WRITE);
    c.post_send(0, &write_wr(1, 100, &cm, &bm));
    deliver(&b, &c.h.dev.take_tx());
    let k = b.query_counters();
    assert_eq!(k.rx_bad_addr - base.rx_bad_addr, 1);
    assert_eq!(k.rx_pkts - base.rx_pkts, 1);
    // And to a QP number b does not have: no QP.
    c.create_qp(QPT_RC);
    c.connect(1, bq + 100, bmac, bgid, 3, NET_IPV4, |_| {});
    c.post_send(1, &write_wr(2, 100, &cm, &bm));
    deliver(&b, &c.h.dev.take_tx());
    let k = b.query_counters();
    assert_eq!(k.rx_no_qp - base.rx_no_qp, 1);
    assert_eq!(k.rx_pkts - base.rx_pkts, 2);
    assert_eq!(k.acks_sent, base.acks_sent);

    // The genuine request still goes through.
    deliver(&b, &req);
    let k = b.query_counters();
    assert_eq!(k.rx_pkts - base.rx_pkts, 3);
    assert_eq!(k.acks_sent - base.acks_sent, 1);
    assert_eq!(k.rx_bad_icrc - base.rx_bad_icrc, 1);
}

#[test]
fn loopback_frames_are_sent_and_received() {
    let mut a = Node::new(36);
    a.create_qp(QPT_RC);
    a.create_qp(QPT_RC);
    let (q0, q1) = (a.qps[0].qpn, a.qps[1].qpn);
    let (mac, gid) = (a.mac, ipv4_gid(a.ip));
    a.connect(0, q1, mac, gid, 3, NET_IPV4, |_| {});
    a.connect(1, q0, mac, gid, 3, NET_IPV4, |_| {});
    let m = a.reg_mr(8192, ALL_ACCESS);
    let mut w = write_wr(1, 100, &m, &m);
    w.remote_addr = m.va(4096);
    a.post_send(0, &w);
    for _ in 0..100 {
        assert!(a.h.dev.take_tx().is_empty());
        match a.h.dev.next_timer() {
            Some(t) => a.h.dev.tick(t),
            None => break,
        }
    }
    let k = a.query_counters();
    // One request and its ACK, both looped back and received.
    assert_eq!((k.tx_pkts, k.loopback_pkts, k.rx_pkts), (2, 2, 2));
    assert_eq!(k.tx_bytes, k.rx_bytes);
    assert_eq!(k.acks_sent, 1);
    assert_eq!(errors(&k), [0; 21]);
}

#[test]
fn the_device_lock_counts_every_taking_and_each_wait() {
    let (a, _b) = rc_pair(|_| {});
    let dev = std::sync::Arc::clone(&a.h.dev);
    let before = dev.counters().data;
    // Two threads take the lock 20000 times each (counters() takes it
    // once); whether they ever meet depends on the host's CPUs.
    let other = {
        let dev = std::sync::Arc::clone(&dev);
        std::thread::spawn(move || (0..20_000).for_each(|_| drop(dev.counters())))
    };
    (0..20_000).for_each(|_| drop(dev.counters()));
    other.join().expect("the other thread");
    let after = dev.counters().data;
    // 40000 takings and the last counters(), plus whatever else ran.
    assert!(after.lock_taken - before.lock_taken >= 40_001);
    let contended = after.lock_contended - before.lock_contended;
    assert!(contended <= after.lock_taken - before.lock_taken);
    if contended == 0 {
        assert_eq!(after.lock_wait_us, before.lock_wait_us);
    }
}

/// 1.9 and 1.10 add no capability bit: the credit counters grow the
/// structure by two le64 after the 1.5..1.8 one, the keep-alives by one
/// more after the 1.9 one.
#[test]
fn version_1_10_counts_keepalives() {
    let a = Node::new(36);
    assert_eq!(a.h.reg_r(REG_VERSION), 1 << VERSION_MAJOR_SHIFT | 10);
    assert_eq!(a.h.reg_r(REG_DEV_CAPS), 0xffffff);
    assert_eq!(COUNTERS_SIZE_1_9, COUNTERS_SIZE_1_5 + 2 * 8);
    assert_eq!(core::mem::size_of::<Counters>(), COUNTERS_SIZE_1_9 + 8);
}
