// SPDX-License-Identifier: GPL-2.0
//! The RC QPs of a device share `INFLIGHT_BUDGET` unacknowledged PSNs
//! (device.rst, "RC requester"): QPs started one after another send no
//! more packets before their first ACK than the budget, plus the smallest
//! window of each, so that a peer's port queue (a tap's 10000 frames) is
//! not overrun; every message still completes, byte for byte.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::transport::{ACK_REQ_EVERY, INFLIGHT_BUDGET, WINDOW};

const QPS: usize = 64;
/// 512 packets at path MTU 1024: one full window, as ib_write_bw -q 64
/// -s 65536 posts it (8 messages a QP).
const LEN: u32 = 512 << 10;
const PKTS: usize = 512;

#[test]
fn rc_qps_started_together_share_the_budget() {
    assert!(PKTS <= WINDOW as usize);
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    for i in 0..QPS {
        a.create_qp(QPT_RC);
        b.create_qp(QPT_RC);
        connect_pair(&mut a, i, &mut b, i, |attr| attr.path_mtu = MTU_1024);
    }
    let src = a.reg_mr(u64::from(LEN), ACCESS_LOCAL_WRITE);
    // One destination for all: the writes carry the same bytes.
    let dst = b.reg_mr(u64::from(LEN), ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
    let pattern: Vec<u8> = (0..LEN)
        .map(|i| (i.wrapping_mul(7) ^ (i >> 8)) as u8)
        .collect();
    a.fill(src.at(0), &pattern);
    for i in 0..QPS {
        a.post_send(i, &write_wr(i as u64, &src, LEN, dst.va(0), dst.key));
    }

    // What the doorbells sent before any ACK came back. Without the
    // budget: every QP's whole message (32768 packets). With shares alone,
    // QP k gets a window of 4096 / k (at most 512, at least 16) and the
    // first ones keep what they sent: 12373 packets, more than a tap's
    // queue. With what the others have in flight taken off, the first 8
    // send 512 each and the other 56 the smallest window, 16.
    let first = a.h.dev.take_tx();
    let bound = INFLIGHT_BUDGET as usize + QPS * ACK_REQ_EVERY as usize;
    assert!(
        first.len() >= INFLIGHT_BUDGET as usize && first.len() <= bound,
        "{} packets before the first ACK (at most {bound})",
        first.len()
    );
    assert!(first.len() < QPS * PKTS);
    b.h.dev.receive_batch(first.iter().map(|f| f.as_slice()));
    run(&a, &b);

    let cqes = a.poll();
    assert_eq!(cqes.len(), QPS);
    assert!(
        cqes.iter().all(|c| c.status == WC_SUCCESS),
        "{:?}",
        statuses(&cqes)
    );
    assert!(b.bytes(dst.at(0), LEN as usize) == pattern, "data differs");
    let c = a.h.dev.counters();
    assert_eq!(c.data.retransmits, 0);
}
