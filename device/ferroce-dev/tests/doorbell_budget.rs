// SPDX-License-Identifier: GPL-2.0
//! The work a doorbell does synchronously is bounded: a BAR write runs on
//! the guest's vCPU, so looped-back frames beyond `PUMP_BUDGET` are left to
//! the device's engine thread (woken through the waker) and nothing is lost.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::rdma::*;
use common::*;
use ferroce_dev::device::PUMP_BUDGET;
use ferroce_dev::hw::*;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

/// One device, two RC QPs connected to each other through the device's own
/// MAC (every frame loops back inside the device).
fn loopback_node() -> Node {
    let mut node = Node::new(40);
    node.create_qp(QPT_RC);
    node.create_qp(QPT_RC);
    let (q0, q1) = (node.qps[0].qpn, node.qps[1].qpn);
    let (mac, gid) = (node.mac, ipv4_gid(node.ip));
    node.connect(0, q1, mac, gid, 3, NET_IPV4, |_| {});
    node.connect(1, q0, mac, gid, 3, NET_IPV4, |_| {});
    node
}

#[test]
fn a_doorbell_processes_at_most_the_budget_and_the_engine_thread_finishes() {
    let mut node = loopback_node();
    let wakes = Arc::new(AtomicUsize::new(0));
    let counter = wakes.clone();
    node.h.dev.set_tx_waker(Box::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    }));
    // 448 KiB at path MTU 1024: 448 request packets (inside the 512-PSN
    // window, so the doorbell emits them all) plus their ACKs.
    let len = 448 << 10;
    let mr = node.reg_mr(2 * len as u64, ALL_ACCESS);
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
    node.fill(mr.gpa, &data);
    let write = SendWr {
        wr_id: 77,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: mr.va(len as u64),
        rkey: mr.key,
        sges: vec![(mr.va(0), len as u32, mr.key)],
        ..SendWr::default()
    };
    let before = node.h.dev.counters().data.rx_frames;
    node.post_send(0, &write);
    let processed = node.h.dev.counters().data.rx_frames - before;
    assert!(
        processed <= PUMP_BUDGET as u64,
        "the SQ doorbell processed {processed} looped-back frames (budget {PUMP_BUDGET})"
    );
    assert!(
        processed < 448,
        "the doorbell did not run the whole message"
    );
    assert!(
        node.h.dev.has_backlog(),
        "frames beyond the budget stay queued"
    );
    assert!(
        wakes.load(Ordering::Relaxed) > 0,
        "the engine thread was woken"
    );
    assert_eq!(
        node.h.dev.next_timer(),
        Some(node.h.dev.now_ns()),
        "the backlog is due now"
    );
    assert!(
        node.poll().is_empty(),
        "nothing completed inside the doorbell"
    );

    // The engine thread: bounded ticks until quiet.
    let mut ticks = 0;
    while let Some(t) = node.h.dev.next_timer() {
        let before = node.h.dev.counters().data.rx_frames;
        node.h.dev.tick(t);
        let processed = node.h.dev.counters().data.rx_frames - before;
        assert!(processed <= PUMP_BUDGET as u64, "a tick is bounded too");
        assert!(node.h.dev.take_tx().is_empty(), "loopback stays inside");
        ticks += 1;
        assert!(ticks < 10_000, "the backlog did not drain");
    }
    assert!(ticks >= 1, "the engine thread did the rest");
    let cqes = node.poll();
    let got: Vec<(u64, u8, u8)> = cqes.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect();
    assert_eq!(got, vec![(77, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert_eq!(node.bytes(mr.gpa + len as u64, len), data, "nothing lost");
    let data_counters = node.h.dev.counters().data;
    assert_eq!(data_counters.tx_overflow, 0);
}

#[test]
fn a_received_batch_is_bounded_too() {
    // Frames looped back while handling a batch from the wire are also
    // left to the engine thread beyond the budget.
    let mut node = loopback_node();
    let len = 448 << 10;
    let mr = node.reg_mr(2 * len as u64, ALL_ACCESS);
    let write = SendWr {
        wr_id: 5,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: mr.va(len as u64),
        rkey: mr.key,
        sges: vec![(mr.va(0), len as u32, mr.key)],
        ..SendWr::default()
    };
    node.post_send(0, &write);
    assert!(node.h.dev.has_backlog());
    let before = node.h.dev.counters().data.rx_frames;
    node.h.dev.receive_batch(std::iter::empty());
    let processed = node.h.dev.counters().data.rx_frames - before;
    assert!(
        processed <= PUMP_BUDGET as u64,
        "{processed} frames in one batch"
    );
}
