// SPDX-License-Identifier: GPL-2.0
//! The QP_RETRY_EXCEEDED async event (spec 1.3): posted once each time an
//! RC requester completes a WQE with RETRY_EXC_ERR (data 0) or
//! RNR_RETRY_EXC_ERR (data 1), ahead of the CQE, and for no other error.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

fn write_wr(wr_id: u64, m: &MrInfo) -> SendWr {
    SendWr {
        wr_id,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        sges: vec![(m.va(0), 100, m.key)],
        ..SendWr::default()
    }
}

fn send_wr(wr_id: u64, m: &MrInfo) -> SendWr {
    SendWr {
        opcode: WR_SEND,
        ..write_wr(wr_id, m)
    }
}

fn statuses(c: &[Cqe]) -> Vec<(u64, u8)> {
    c.iter().map(|c| (c.wr_id, c.status)).collect()
}

/// The QP_RETRY_EXCEEDED events in `events`.
fn retry_events(events: &[(u8, u32, u32)]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter(|e| e.0 == EQE_QP_RETRY_EXCEEDED)
        .map(|e| (e.1, e.2))
        .collect()
}

fn black_hole() -> Wire {
    Wire::new(
        1,
        Impair {
            drop: 100,
            ..Impair::default()
        },
    )
}

/// Moves QP `qi` of `node` from ERR back to RTS towards `peer`'s QP 0.
fn reconnect(node: &mut Node, qi: usize, peer: &Node) {
    let qpn = node.qps[qi].qpn;
    assert_eq!(
        node.h.modify(attr_with(qpn, QPS_RESET, QP_ATTR_STATE)),
        STATUS_SUCCESS
    );
    // RESET empties the queues: the indexes start again at 0.
    node.qps[qi].sq_pi = 0;
    node.qps[qi].rq_pi = 0;
    let (pq, pm, pg) = (peer.qps[0].qpn, peer.mac, ipv4_gid(peer.ip));
    node.connect(qi, pq, pm, pg, 3, NET_IPV4, |a| {
        a.retry_cnt = 2;
        a.rnr_retry = 1;
    });
}

/// A peer that never answers: one event with data 0 per failure, however
/// many WQEs were queued behind the failing one, posted before the CQE,
/// and again on the next failure after the QP is reconnected.
#[test]
fn ack_timeouts_post_one_event_per_failure() {
    let (mut a, b) = rc_pair(|a| a.retry_cnt = 2);
    let qpn = a.qps[0].qpn;
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.h.take_events();
    for round in 0..2u64 {
        for i in 0..3 {
            a.post_send(0, &write_wr(10 * round + i, &m));
        }
        black_hole().run(&a, &b, 1000);
        // Drain the AEQ before the CQ: the event is already there.
        let events = a.h.take_events();
        assert_eq!(retry_events(&events), vec![(qpn, 0)], "round {round}");
        let first = events
            .iter()
            .position(|e| e.0 == EQE_QP_RETRY_EXCEEDED)
            .unwrap();
        let fatal = events.iter().position(|e| e.0 == EQE_QP_FATAL);
        assert!(
            fatal.is_some_and(|f| f > first),
            "round {round}: {events:?}"
        );
        assert_eq!(
            statuses(&a.poll()),
            vec![
                (10 * round, WC_RETRY_EXC_ERR),
                (10 * round + 1, WC_WR_FLUSH_ERR),
                (10 * round + 2, WC_WR_FLUSH_ERR)
            ],
            "round {round}"
        );
        assert_eq!(a.h.dev.qp_state(qpn), Some(QPS_ERR));
        // Nothing more comes from the failed QP, even when time passes.
        a.h.dev.tick(u64::MAX / 2);
        assert_eq!(retry_events(&a.h.take_events()), vec![]);
        reconnect(&mut a, 0, &b);
        a.h.take_events();
    }
}

/// RNR NAKs until rnr_retry runs out: data 1.
#[test]
fn rnr_retries_post_data_one() {
    let (mut a, b) = rc_pair(|a| a.rnr_retry = 1);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.h.take_events();
    a.post_send(0, &send_wr(1, &m));
    a.post_send(0, &send_wr(2, &m));
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RNR_RETRY_EXC_ERR), (2, WC_WR_FLUSH_ERR)]
    );
    let events = a.h.take_events();
    assert_eq!(retry_events(&events), vec![(a.qps[0].qpn, 1)]);
    // The responder, which sent the RNR NAKs, posts nothing of the kind.
    let mut b = b;
    assert_eq!(retry_events(&b.h.take_events()), vec![]);
}

/// Only the QP that failed reports: a second QP on the same device that
/// works posts nothing.
#[test]
fn only_the_failing_qp_reports() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |q| q.rnr_retry = 0);
    connect_pair(&mut a, 1, &mut b, 1, |_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    a.h.take_events();
    // QP 0: SEND with no receive posted and rnr_retry 0 fails at once.
    a.post_send(0, &send_wr(1, &m));
    // QP 1: a WRITE that succeeds.
    let mut w = write_wr(2, &m);
    w.remote_addr = bm.va(0);
    w.rkey = bm.key;
    a.post_send(1, &w);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    let mut got = statuses(&a.poll());
    got.sort();
    assert_eq!(got, vec![(1, WC_RNR_RETRY_EXC_ERR), (2, WC_SUCCESS)]);
    assert_eq!(retry_events(&a.h.take_events()), vec![(a.qps[0].qpn, 1)]);
}

/// Errors that are not retry exhaustion post no QP_RETRY_EXCEEDED: a
/// remote access error NAK, a local protection error, and a QP moved to
/// ERR by the driver with WQEs in flight and its timer running.
#[test]
fn other_errors_post_nothing() {
    // Remote access error: wrong rkey.
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    a.h.take_events();
    let mut w = write_wr(1, &m);
    w.remote_addr = bm.va(0);
    w.rkey = bm.key ^ 1;
    a.post_send(0, &w);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_REM_ACCESS_ERR)]);
    let events = a.h.take_events();
    assert!(events.contains(&(EQE_QP_FATAL, a.qps[0].qpn, 0)));
    assert_eq!(retry_events(&events), vec![]);
    assert_eq!(retry_events(&b.h.take_events()), vec![]);

    // Local protection error: an lkey that does not exist.
    let (mut a, b) = rc_pair(|_| {});
    a.h.take_events();
    let mut w = write_wr(1, &m);
    w.sges = vec![(0x1000, 100, 0xdead_be00)];
    a.post_send(0, &w);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    let got = statuses(&a.poll());
    assert_eq!(got.len(), 1);
    assert_ne!(got[0].1, WC_SUCCESS);
    assert_ne!(got[0].1, WC_RETRY_EXC_ERR);
    assert_eq!(retry_events(&a.h.take_events()), vec![]);

    // The driver moves the QP to ERR while a WQE waits for its ACK.
    let (mut a, b) = rc_pair(|a| a.retry_cnt = 0);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.h.take_events();
    a.post_send(0, &write_wr(1, &m));
    assert!(!a.h.dev.take_tx().is_empty(), "the WRITE went out");
    let qpn = a.qps[0].qpn;
    assert_eq!(
        a.h.modify(attr_with(qpn, QPS_ERR, QP_ATTR_STATE)),
        STATUS_SUCCESS
    );
    black_hole().run(&a, &b, 1000);
    a.h.dev.tick(u64::MAX / 2);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_WR_FLUSH_ERR)]);
    assert_eq!(retry_events(&a.h.take_events()), vec![]);
}
