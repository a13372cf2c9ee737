// SPDX-License-Identifier: GPL-2.0
//! The data path: RC and UD between two devices (or one, in loopback) on
//! fake memory, over a deterministic lossy wire.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::GuestMemory;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// WRITE, READ and SEND of many sizes under loss, duplication, corruption
/// and reordering: memory ends up byte-exact and every WQE completes once,
/// in order, successfully.
fn lossy_run(seed: u64, imp: Impair) {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(1 << 20, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 20, ALL_ACCESS);
    let data = pattern(seed, 1 << 19);
    a.fill(src.gpa, &data);
    let sizes = [
        1u32,
        100,
        1023,
        1024,
        1025,
        4096,
        9000,
        65536 + 7,
        3,
        0,
        200_000,
    ];
    // RDMA WRITE a -> b at increasing offsets.
    let mut off = 0u64;
    let mut expect = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let mut w = wr(100 + i as u64, WR_RDMA_WRITE);
        w.remote_addr = dst.va(off);
        w.rkey = dst.key;
        w.sges = vec![(src.va(off), n, src.key)];
        a.post_send(0, &w);
        expect.push((100 + i as u64, WC_RDMA_WRITE, WC_SUCCESS));
        off += u64::from(n) + 13;
    }
    let written = off;
    // SEND a -> b into posted receives (two SGEs each).
    let recv_base = 600_000u64;
    let send_sizes = [5u32, 1024, 3000, 20_000];
    let mut roff = 0u64;
    for (i, &n) in send_sizes.iter().enumerate() {
        b.post_recv(
            0,
            500 + i as u64,
            &[
                (dst.va(recv_base + roff), 1000, dst.key),
                (dst.va(recv_base + roff + 1000), 30_000, dst.key),
            ],
        );
        let mut w = wr(
            200 + i as u64,
            if i % 2 == 0 { WR_SEND } else { WR_SEND_IMM },
        );
        w.imm = [1, 2, 3, i as u8];
        w.sges = vec![(src.va(300_000 + roff), n, src.key)];
        a.post_send(0, &w);
        expect.push((200 + i as u64, WC_SEND, WC_SUCCESS));
        roff += 31_000;
    }
    // RDMA READ b -> a (back from what was written), several outstanding.
    let back = 700_000u64;
    let read_sizes = [64u32, 5000, 65536, 1];
    let mut boff = 0u64;
    for (i, &n) in read_sizes.iter().enumerate() {
        let mut w = wr(300 + i as u64, WR_RDMA_READ);
        w.remote_addr = dst.va(boff);
        w.rkey = dst.key;
        w.sges = vec![(src.va(back + boff), n, src.key)];
        a.post_send(0, &w);
        expect.push((300 + i as u64, WC_RDMA_READ, WC_SUCCESS));
        boff += u64::from(n);
    }
    let mut wire = Wire::new(seed, imp);
    let rounds = wire.run(&a, &b, 200_000);
    assert!(rounds < 200_000, "did not converge");
    let ca = a.poll();
    assert_eq!(statuses(&ca), expect, "seed {seed}");
    // Memory is byte-exact.
    let mut off = 0u64;
    for &n in &sizes {
        let got = b.bytes(dst.at(off), n as usize);
        assert_eq!(
            got,
            data[off as usize..off as usize + n as usize],
            "WRITE {n} seed {seed}"
        );
        off += u64::from(n) + 13;
    }
    let _ = written;
    let cb = b.poll();
    let recvs: Vec<_> = cb.iter().filter(|c| c.opcode == WC_RECV).collect();
    assert_eq!(recvs.len(), send_sizes.len());
    let mut roff = 0u64;
    for (i, (&n, c)) in send_sizes.iter().zip(&recvs).enumerate() {
        assert_eq!(c.status, WC_SUCCESS);
        assert_eq!(c.wr_id, 500 + i as u64);
        assert_eq!(c.byte_len, n);
        assert_eq!(c.flags & CQE_WITH_IMM != 0, i % 2 == 1);
        if i % 2 == 1 {
            assert_eq!(c.imm_data.to_le_bytes(), [1, 2, 3, i as u8]);
        }
        let got = b.bytes(dst.at(recv_base + roff), n as usize);
        let s = (300_000 + roff) as usize;
        assert_eq!(got, data[s..s + n as usize], "SEND {n}");
        roff += 31_000;
    }
    let mut boff = 0u64;
    for &n in &read_sizes {
        let got = a.bytes(src.at(back + boff), n as usize);
        let want = b.bytes(dst.at(boff), n as usize);
        assert_eq!(got, want, "READ {n}");
        boff += u64::from(n);
    }
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_RTS));
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
    eprintln!(
        "seed {seed}: {rounds} rounds, wire delivered {} dropped {} dup {} corrupt {} reorder {}; a {:?}",
        wire.delivered, wire.dropped, wire.duplicated, wire.corrupted, wire.reordered,
        a.h.dev.counters().data
    );
}

#[test]
fn rc_clean_wire() {
    lossy_run(1, Impair::default());
}

#[test]
fn rc_lossy_wire_many_seeds() {
    let imp = Impair {
        drop: 10,
        dup: 5,
        corrupt: 5,
        reorder: 10,
    };
    for seed in 1..=6 {
        lossy_run(seed * 7919, imp);
    }
}

/// Runs one node alone (loopback) until quiet.
fn run_alone(a: &Node) {
    for _ in 0..100_000 {
        let out = a.h.dev.take_tx();
        assert!(out.is_empty(), "loopback frames must not reach the wire");
        match a.h.dev.next_timer() {
            Some(t) => a.h.dev.tick(t),
            None => return,
        }
    }
    panic!("loopback did not converge");
}

#[test]
fn rc_loopback_on_one_device() {
    let mut a = Node::new(36);
    a.create_qp(QPT_RC);
    a.create_qp(QPT_RC);
    let (q0, q1) = (a.qps[0].qpn, a.qps[1].qpn);
    let (mac, gid) = (a.mac, ipv4_gid(a.ip));
    a.connect(0, q1, mac, gid, 3, NET_IPV4, |_| {});
    a.connect(1, q0, mac, gid, 3, NET_IPV4, |_| {});
    let m = a.reg_mr(64 << 10, ALL_ACCESS);
    let data = pattern(5, 10_000);
    a.fill(m.gpa, &data);
    let mut w = wr(1, WR_RDMA_WRITE);
    w.remote_addr = m.va(20_000);
    w.rkey = m.key;
    w.sges = vec![(m.va(0), 10_000, m.key)];
    a.post_send(0, &w);
    a.post_recv(1, 9, &[(m.va(40_000), 4096, m.key)]);
    let mut s = wr(2, WR_SEND);
    s.inline = Some(b"hello loopback".to_vec());
    a.post_send(0, &s);
    let mut r = wr(3, WR_RDMA_READ);
    r.remote_addr = m.va(20_000);
    r.rkey = m.key;
    r.sges = vec![(m.va(50_000), 10_000, m.key)];
    a.post_send(1, &r);
    run_alone(&a);
    let c = a.poll();
    let mut got = statuses(&c);
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, WC_RDMA_WRITE, 0),
            (2, WC_SEND, 0),
            (3, WC_RDMA_READ, 0),
            (9, WC_RECV, 0)
        ]
    );
    assert_eq!(a.bytes(m.gpa + 20_000, 10_000), data);
    assert_eq!(a.bytes(m.gpa + 50_000, 10_000), data);
    assert_eq!(a.bytes(m.gpa + 40_000, 14), b"hello loopback");
    assert!(a.h.dev.counters().data.loopback_frames > 0);
}

#[test]
fn rnr_nak_then_success_when_a_receive_is_posted() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &s);
    let mut wire = Wire::new(1, Impair::default());
    // A few RNR rounds with no receive posted.
    rnr_rounds(&a, &b, 3);
    assert!(b.h.dev.counters().data.rnr_naks_sent >= 3);
    assert!(a.poll().is_empty());
    b.post_recv(0, 7, &[(bm.va(0), 4096, bm.key)]);
    wire.run(&a, &b, 1000);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_SUCCESS)]);
    assert_eq!(statuses(&b.poll()), vec![(7, WC_RECV, WC_SUCCESS)]);
}

#[test]
fn rnr_retry_exhaustion() {
    let (mut a, b) = rc_pair(|a| a.rnr_retry = 2);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &s);
    let mut s2 = wr(2, WR_RDMA_WRITE);
    s2.flags = 0; // unsignaled: still flushed with an error
    a.post_send(0, &s2);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_SEND, WC_RNR_RETRY_EXC_ERR),
            (2, WC_RDMA_WRITE, WC_WR_FLUSH_ERR)
        ]
    );
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR));
    assert_eq!(b.h.dev.counters().data.rnr_naks_sent, 3);
    assert!(a.h.take_events().contains(&(EQE_QP_FATAL, a.qps[0].qpn, 0)));
}

#[test]
fn transport_retry_exhaustion() {
    let (mut a, b) = rc_pair(|a| a.retry_cnt = 3);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut w = wr(1, WR_RDMA_WRITE);
    w.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &w);
    let mut wire = Wire::new(
        1,
        Impair {
            drop: 100,
            ..Impair::default()
        },
    );
    wire.run(&a, &b, 1000);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_RETRY_EXC_ERR)]
    );
    let d = a.h.dev.counters().data;
    assert_eq!(d.timeouts, 4);
    assert_eq!(d.tx_frames, 4);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR));
}

#[test]
fn remote_key_and_bounds_violations_write_nothing() {
    for case in 0..4 {
        let (mut a, mut b) = rc_pair(|_| {});
        let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
        a.fill(m.gpa, &[0xab; 8192]);
        let ro = b.reg_mr(4096, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ);
        let bm = b.reg_mr(4096, ALL_ACCESS);
        let mut w = wr(1, WR_RDMA_WRITE);
        w.sges = vec![(m.va(0), 2048, m.key)];
        match case {
            0 => (w.remote_addr, w.rkey) = (bm.va(0), bm.key ^ 1), // wrong variant
            1 => (w.remote_addr, w.rkey) = (bm.va(3000), bm.key),  // beyond the end
            2 => (w.remote_addr, w.rkey) = (ro.va(0), ro.key),     // no REMOTE_WRITE
            _ => {
                w.opcode = WR_RDMA_READ; // READ beyond the end
                w.remote_addr = bm.va(4000);
                w.rkey = bm.key;
            }
        }
        a.post_send(0, &w);
        Wire::new(1, Impair::default()).run(&a, &b, 1000);
        let op = if case == 3 {
            WC_RDMA_READ
        } else {
            WC_RDMA_WRITE
        };
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, op, WC_REM_ACCESS_ERR)],
            "case {case}"
        );
        assert_eq!(b.bytes(bm.gpa, 4096), vec![0; 4096], "case {case}");
        assert_eq!(b.bytes(ro.gpa, 4096), vec![0; 4096], "case {case}");
        if case == 3 {
            assert_eq!(a.bytes(m.gpa, 2048), vec![0xab; 2048]);
        }
        assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR), "case {case}");
        assert!(b
            .h
            .take_events()
            .contains(&(EQE_QP_ACCESS_ERR, b.qps[0].qpn, 0x62)));
    }
}

#[test]
fn local_protection_errors_send_nothing() {
    for case in 0..3 {
        let (mut a, mut b) = rc_pair(|_| {});
        let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let nolw = a.reg_mr(4096, 0);
        let bm = b.reg_mr(4096, ALL_ACCESS);
        let mut w = wr(1, WR_RDMA_WRITE);
        w.remote_addr = bm.va(0);
        w.rkey = bm.key;
        match case {
            0 => w.sges = vec![(m.va(4000), 200, m.key)], // beyond the MR
            1 => w.sges = vec![(m.va(0), 10, 0x0000_0042)], // no such key
            _ => {
                w.opcode = WR_RDMA_READ; // READ into an MR without LOCAL_WRITE
                w.sges = vec![(nolw.va(0), 100, nolw.key)];
            }
        }
        a.post_send(0, &w);
        let mut w2 = wr(2, WR_RDMA_WRITE);
        w2.sges = vec![(m.va(0), 10, m.key)];
        a.post_send(0, &w2);
        assert!(a.h.dev.take_tx().is_empty(), "case {case}");
        let op = if case == 2 {
            WC_RDMA_READ
        } else {
            WC_RDMA_WRITE
        };
        assert_eq!(
            statuses(&a.poll()),
            vec![
                (1, op, WC_LOC_PROT_ERR),
                (2, WC_RDMA_WRITE, WC_WR_FLUSH_ERR)
            ],
            "case {case}"
        );
        assert_eq!(b.bytes(bm.gpa, 4096), vec![0; 4096]);
    }
}

#[test]
fn send_larger_than_receive_buffer() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(8192, ALL_ACCESS);
    b.post_recv(0, 5, &[(bm.va(0), 1000, bm.key)]);
    b.post_recv(0, 6, &[(bm.va(1000), 1000, bm.key)]);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 3000, m.key)];
    a.post_send(0, &s);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_REM_INV_REQ_ERR)]);
    assert_eq!(
        statuses(&b.poll()),
        vec![(5, WC_RECV, WC_LOC_LEN_ERR), (6, WC_RECV, WC_WR_FLUSH_ERR)]
    );
}

#[test]
fn write_with_immediate_and_solicited_event() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(8192, ALL_ACCESS);
    a.fill(m.gpa, &pattern(3, 8192));
    b.post_recv(0, 5, &[]);
    b.post_recv(0, 6, &[(bm.va(4096), 64, bm.key)]);
    b.arm_cq(CQ_CMD_ARM_SOLICITED);
    b.h.irq.take();
    let mut w = wr(1, WR_RDMA_WRITE_IMM);
    w.imm = [0xca, 0xfe, 0xba, 0xbe];
    w.remote_addr = bm.va(0);
    w.rkey = bm.key;
    w.sges = vec![(m.va(0), 3000, m.key)];
    a.post_send(0, &w);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    // Not solicited: no event.
    assert!(b.h.irq.take().is_empty());
    let mut s = wr(2, WR_SEND_IMM);
    s.flags |= WQE_SOLICITED;
    s.inline = Some(vec![7; 64]);
    a.post_send(0, &s);
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    assert_eq!(
        b.h.irq.take(),
        vec![1],
        "MSI-X of the CQ's completion vector"
    );
    let cb = b.poll();
    assert_eq!(cb.len(), 2);
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].status),
        (5, WC_RECV_RDMA_WITH_IMM, 0)
    );
    assert_eq!(cb[0].byte_len, 3000);
    assert_eq!(cb[0].imm_data.to_le_bytes(), [0xca, 0xfe, 0xba, 0xbe]);
    assert_eq!(cb[0].flags & CQE_WITH_IMM, CQE_WITH_IMM);
    assert_eq!(
        (cb[1].wr_id, cb[1].opcode, cb[1].byte_len),
        (6, WC_RECV, 64)
    );
    assert_eq!(
        cb[1].flags & (CQE_SOLICITED | CQE_WITH_IMM),
        CQE_SOLICITED | CQE_WITH_IMM
    );
    assert_eq!(b.bytes(bm.gpa, 3000), pattern(3, 8192)[..3000]);
    assert_eq!(b.bytes(bm.gpa + 4096, 64), vec![7; 64]);
}

#[test]
fn unsignaled_wqes_complete_silently_and_sig_all() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    let bm = (bm.va(0), bm.key);
    for i in 0..5u64 {
        let mut w = wr(i, WR_RDMA_WRITE);
        if i != 4 {
            w.flags = 0;
        }
        w.remote_addr = bm.0;
        w.rkey = bm.1;
        w.sges = vec![(m.va(0), 16, m.key)];
        a.post_send(0, &w);
    }
    Wire::new(1, Impair::default()).run(&a, &b, 1000);
    let c = a.poll();
    assert_eq!(statuses(&c), vec![(4, WC_RDMA_WRITE, 0)]);
    assert_eq!(c[0].wqe_idx, 4);
}

#[test]
fn modify_to_error_flushes_both_queues() {
    let (mut a, _b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.post_recv(0, 50, &[(m.va(0), 100, m.key)]);
    a.post_recv(0, 51, &[(m.va(100), 100, m.key)]);
    let mut w = wr(1, WR_SEND);
    w.sges = vec![(m.va(0), 10, m.key)];
    a.post_send(0, &w); // in flight, never acknowledged
    let qpn = a.qps[0].qpn;
    assert_eq!(a.h.modify(attr_with(qpn, QPS_ERR, 0)), STATUS_SUCCESS);
    let mut got = statuses(&a.poll());
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, WC_SEND, WC_WR_FLUSH_ERR),
            (50, WC_RECV, WC_WR_FLUSH_ERR),
            (51, WC_RECV, WC_WR_FLUSH_ERR)
        ]
    );
    // WQEs posted in ERR are flushed at once.
    a.post_send(0, &w);
    a.post_recv(0, 52, &[]);
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_SEND, WC_WR_FLUSH_ERR),
            (52, WC_RECV, WC_WR_FLUSH_ERR)
        ]
    );
}

#[test]
fn cq_overflow_is_detected_on_the_data_path() {
    let (mut a, b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    // Fill the CQ without consuming it: CQ_DEPTH successful zero-length writes.
    let mut posted = 0u64;
    let mut wire = Wire::new(1, Impair::default());
    while posted < u64::from(CQ_DEPTH) + 2 {
        for _ in 0..32 {
            let mut w = wr(posted, WR_RDMA_WRITE);
            w.sges = vec![(m.va(0), 0, m.key)];
            a.post_send(0, &w);
            posted += 1;
        }
        wire.run(&a, &b, 1000);
    }
    let ev = a.h.take_events();
    assert!(
        ev.contains(&(EQE_CQ_ERROR, a.cqn, CQ_SYNDROME_OVERFLOW)),
        "{ev:?}"
    );
}

fn ud_pair(kind: u8) -> (Node, Node, u32) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    let t = if kind == 0 { QPT_GSI } else { QPT_UD };
    a.create_qp(t);
    b.create_qp(t);
    let qkey = if t == QPT_GSI { 0x8001_0000 } else { 0x1111 };
    a.activate_ud(0, qkey);
    b.activate_ud(0, qkey);
    (a, b, qkey)
}

#[test]
fn ud_and_gsi_send_with_grh_in_the_receive_buffer() {
    for (kind, net) in [
        (0u8, NET_IPV4),
        (1, NET_IPV4),
        (1, NET_IPV6),
        (1, NET_ROCE_V1),
    ] {
        let (mut a, mut b, qkey) = ud_pair(kind);
        let ahn = a.create_ah(av_to(&b, net));
        let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
        a.fill(m.gpa, &pattern(9, 256));
        b.post_recv(0, 77, &[(bm.va(0), 40, bm.key), (bm.va(100), 1000, bm.key)]);
        let dst = b.qps[0].qpn;
        let mut s = wr(1, WR_SEND_IMM);
        s.imm = [0, 0, 0, 42];
        s.sges = vec![(m.va(0), 256, m.key)];
        s.ud = Some((ahn, dst, qkey));
        a.post_send(0, &s);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_SEND, 0)],
            "UD completes on send"
        );
        Wire::new(1, Impair::default()).run(&a, &b, 100);
        let c = b.poll();
        assert_eq!(statuses(&c), vec![(77, WC_RECV, 0)], "{kind} {net}");
        let c = c[0];
        assert_eq!(c.byte_len, 40 + 256);
        assert_eq!(c.src_qp, a.qps[0].qpn);
        assert_eq!(c.flags & CQE_GRH, CQE_GRH);
        assert_eq!((c.flags & CQE_NET_TYPE_MASK) >> CQE_NET_TYPE_SHIFT, net);
        assert_eq!(c.imm_data.to_le_bytes(), [0, 0, 0, 42]);
        assert_eq!(b.bytes(bm.gpa + 100, 256), pattern(9, 256));
        let grh = b.bytes(bm.gpa, 40);
        if net == NET_IPV4 {
            assert_eq!(grh[20] >> 4, 4, "IPv4 header in the last 20 bytes");
            assert_eq!(grh[32..36], a.ip);
            assert_eq!(grh[36..40], b.ip);
        } else {
            assert_eq!(grh[0] >> 4, 6);
            assert_eq!(grh[8..24], v6_gid(36));
            assert_eq!(grh[24..40], v6_gid(37));
        }
    }
}

#[test]
fn ud_qkey_mismatch_and_missing_receive_drop() {
    let (mut a, mut b, qkey) = ud_pair(1);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.qps[0].qpn;
    let mut s = wr(1, WR_SEND);
    s.inline = Some(vec![1; 8]);
    s.ud = Some((ahn, dst, qkey ^ 1));
    a.post_send(0, &s); // wrong Q_Key
    s.ud = Some((ahn, dst, qkey));
    s.wr_id = 2;
    a.post_send(0, &s); // no receive posted
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert!(b.poll().is_empty());
    let d = b.h.dev.counters().data;
    assert_eq!((d.rx_bad_key, d.rx_ud_no_wqe), (1, 1));
    b.post_recv(0, 9, &[(bm.va(0), 100, bm.key)]);
    s.wr_id = 3;
    a.post_send(0, &s);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&b.poll()), vec![(9, WC_RECV, 0)]);
    assert_eq!(a.poll().len(), 3);
}

#[test]
fn ud_message_larger_than_mtu_fails_locally() {
    let (mut a, b, qkey) = ud_pair(1);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 4096, m.key)];
    s.ud = Some((ahn, b.qps[0].qpn, qkey));
    a.post_send(0, &s);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_LOC_LEN_ERR)]);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_SQE));
    assert!(a.h.dev.take_tx().is_empty());
}

#[test]
fn garbage_frames_never_panic_and_are_counted() {
    let (a, b) = rc_pair(|_| {});
    let mut rng = Rng(77);
    // Real frames, mutated.
    let m_frames = {
        let mut a = a;
        let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
        for i in 0..4 {
            let mut w = wr(i, WR_RDMA_WRITE);
            w.remote_addr = 0x1000;
            w.rkey = 0x101;
            w.sges = vec![(m.va(0), 3000, m.key)];
            a.post_send(0, &w);
        }
        a.h.dev.take_tx()
    };
    for _ in 0..20_000 {
        let mut f = m_frames[rng.below(m_frames.len() as u64) as usize].clone();
        for _ in 0..rng.below(4) + 1 {
            let i = rng.below(f.len() as u64) as usize;
            f[i] = rng.next() as u8;
        }
        if rng.pct(20) {
            f.truncate(rng.below(f.len() as u64) as usize);
        }
        b.h.dev.receive(&f);
    }
    let d = b.h.dev.counters().data;
    assert_eq!(d.rx_frames, 20_000);
    assert!(d.rx_bad_icrc + d.rx_truncated + d.rx_bad_header > 10_000);
}

/// The device's own fault injector (as set from the command line or the
/// control socket) on both sides: data still arrives intact.
#[test]
fn device_fault_injection_is_survived_and_counted() {
    let (mut a, mut b) = rc_pair(|_| {});
    let spec = "drop=8%,dup=3%,reorder=5%,corrupt=3%,delay=5%:300us,seed=";
    a.h.dev
        .set_faults(ferroce_dev::fault::FaultConfig::parse(&format!("{spec}1")).unwrap());
    b.h.dev
        .set_faults(ferroce_dev::fault::FaultConfig::parse(&format!("{spec}2")).unwrap());
    let src = a.reg_mr(256 << 10, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(256 << 10, ALL_ACCESS);
    let data = pattern(11, 100_000);
    a.fill(src.gpa, &data);
    let mut w = wr(1, WR_RDMA_WRITE);
    w.remote_addr = dst.va(0);
    w.rkey = dst.key;
    w.sges = vec![(src.va(0), 100_000, src.key)];
    a.post_send(0, &w);
    let mut r = wr(2, WR_RDMA_READ);
    r.remote_addr = dst.va(0);
    r.rkey = dst.key;
    r.sges = vec![(src.va(120_000), 100_000, src.key)];
    a.post_send(0, &r);
    let rounds = Wire::new(1, Impair::default()).run(&a, &b, 100_000);
    assert!(rounds < 100_000);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, 0), (2, WC_RDMA_READ, 0)]
    );
    assert_eq!(b.bytes(dst.gpa, 100_000), data);
    assert_eq!(a.bytes(src.gpa + 120_000, 100_000), data);
    let (_, fa, _) = a.h.dev.faults();
    let (_, fb, _) = b.h.dev.faults();
    for f in [fa, fb] {
        assert!(
            f.dropped > 0
                && f.duplicated > 0
                && f.reordered > 0
                && f.corrupted > 0
                && f.delayed > 0,
            "{f:?}"
        );
    }
    assert!(b.h.dev.counters().data.rx_bad_icrc > 0);
}

#[test]
fn stalled_device_does_nothing_until_resumed() {
    let (mut a, mut b) = rc_pair(|_| {});
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    a.fill(m.gpa, &[5; 100]);
    a.h.dev.set_stall(true);
    let mut w = wr(1, WR_RDMA_WRITE);
    w.remote_addr = bm.va(0);
    w.rkey = bm.key;
    w.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &w);
    assert!(!a.h.dev.has_tx());
    a.h.dev.set_stall(false);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(bm.gpa, 100), vec![5; 100]);
}

fn write_wr(id: u64, src: &MrInfo, so: u64, dst: &MrInfo, doff: u64, n: u32) -> SendWr {
    let mut w = wr(id, WR_RDMA_WRITE);
    w.remote_addr = dst.va(doff);
    w.rkey = dst.key;
    w.sges = vec![(src.va(so), n, src.key)];
    w
}

/// A 64-packet WRITE delivered as one batch is acknowledged by one ACK.
#[test]
fn acks_are_coalesced_per_batch() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(64 << 10, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(64 << 10, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 64 << 10));
    let f = a.h.dev.take_tx();
    assert_eq!(f.len(), 64, "segmented at the 1024-byte path MTU");
    let ack_req = f
        .iter()
        .filter(|f| ferroce_dev::wire::decode(f).unwrap().bth.ack_req)
        .count();
    assert_eq!(ack_req, 4, "AckReq every 16 packets and on the last");
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    assert_eq!(b.h.dev.counters().data.acks_sent, 1);
    let acks = b.h.dev.take_tx();
    a.h.dev.receive_batch(acks.iter().map(|f| f.as_slice()));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
}

/// A lost first packet: one PSN sequence error NAK for the whole burst,
/// go-back-N from the lost PSN, completion.
#[test]
fn psn_sequence_error_nak_and_go_back_n() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    a.fill(src.gpa, &pattern(4, 4096));
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 4096));
    let mut f = a.h.dev.take_tx();
    assert_eq!(f.len(), 4);
    f.remove(0);
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let d = b.h.dev.counters().data;
    assert_eq!(d.seq_naks_sent, 1);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(dst.gpa, 4096), pattern(4, 4096));
    let da = a.h.dev.counters().data;
    assert_eq!((da.seq_naks_rcvd, da.timeouts), (1, 0));
}

/// Duplicated requests: a replayed WRITE is acknowledged again without
/// re-executing, a replayed READ request is answered again.
#[test]
fn duplicate_requests_are_answered() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    b.fill(dst.gpa + 4096, &[9; 100]);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    let mut r = wr(2, WR_RDMA_READ);
    r.remote_addr = dst.va(4096);
    r.rkey = dst.key;
    r.sges = vec![(src.va(4096), 100, src.key)];
    a.post_send(0, &r);
    let f = a.h.dev.take_tx();
    assert_eq!(f.len(), 2);
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let first = b.h.dev.take_tx();
    // Replay both requests: duplicates.
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let again = b.h.dev.take_tx();
    assert_eq!(b.h.dev.counters().data.dup_requests, 2);
    assert_eq!(again.len(), 2, "one ACK and one read response");
    a.h.dev
        .receive_batch(first.iter().chain(&again).map(|f| f.as_slice()));
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, 0), (2, WC_RDMA_READ, 0)]
    );
    assert_eq!(a.bytes(src.gpa + 4096, 100), vec![9; 100]);
    assert!(a.h.dev.counters().data.stale_responses >= 1);
}

#[test]
fn comm_est_and_sq_drained_events() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    // b stays in RTR: its first received packet raises COMM_EST.
    let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
    a.connect(0, bq, b.mac, ipv4_gid(b.ip), 3, NET_IPV4, |_| {});
    b.connect(0, aq, a.mac, ipv4_gid(a.ip), 3, NET_IPV4, |_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    b.h.take_events();
    // Move b back to a fresh RTR so that it is in RTR when data arrives.
    for st in [QPS_RESET, QPS_INIT, QPS_RTR] {
        let mut m = full_attr(bq);
        m.qp_state = st;
        m.dest_qp_num = aq;
        m.av.dgid = ipv4_gid(a.ip);
        m.av.dmac = a.mac;
        m.rq_psn = 0xff_fff0;
        m.max_dest_rd_atomic = 4;
        m.attr_mask = match st {
            QPS_RESET => QP_ATTR_STATE,
            QPS_INIT => QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS,
            _ => {
                QP_ATTR_STATE
                    | QP_ATTR_AV
                    | QP_ATTR_PATH_MTU
                    | QP_ATTR_DEST_QPN
                    | QP_ATTR_RQ_PSN
                    | QP_ATTR_MAX_DEST_RD_ATOMIC
                    | QP_ATTR_MIN_RNR_TIMER
            }
        };
        assert_eq!(b.h.modify(m), STATUS_SUCCESS);
    }
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 3000));
    // a drains: SQD requested while the WRITE is outstanding.
    let mut sqd = full_attr(aq);
    sqd.qp_state = QPS_SQD;
    sqd.en_sqd_async_notify = 1;
    sqd.attr_mask = QP_ATTR_STATE | QP_ATTR_EN_SQD_ASYNC_NOTIFY;
    assert_eq!(a.h.modify(sqd), STATUS_SUCCESS);
    assert!(!a.h.take_events().iter().any(|e| e.0 == EQE_QP_SQ_DRAINED));
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    assert!(a.h.take_events().contains(&(EQE_QP_SQ_DRAINED, aq, 0)));
    let eb = b.h.take_events();
    assert_eq!(
        eb.iter().filter(|e| e.0 == EQE_QP_COMM_EST).count(),
        1,
        "{eb:?}"
    );
    // In SQD new WQEs wait; back in RTS they go.
    a.post_send(0, &write_wr(2, &src, 0, &dst, 0, 10));
    assert!(a.h.dev.take_tx().is_empty());
    let mut rts = full_attr(aq);
    rts.qp_state = QPS_RTS;
    rts.attr_mask = QP_ATTR_STATE;
    assert_eq!(a.h.modify(rts), STATUS_SUCCESS);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, 0)]);
}

/// Random WQE and receive WQE contents never panic the device: every
/// WQE completes (successfully or with an error) or the QP ends in ERR.
#[test]
fn random_wqes_never_panic() {
    for seed in 1..=20u64 {
        let (mut a, mut b) = rc_pair(|_| {});
        let m = a.reg_mr(1 << 16, ALL_ACCESS);
        let bm = b.reg_mr(1 << 16, ALL_ACCESS);
        let mut rng = Rng(seed * 0x9e37_79b9);
        for round in 0..8 {
            let n = 1 + rng.below(6) as usize;
            for _ in 0..n {
                // Plausible-looking but random WQEs.
                let mut raw = vec![0u8; 256];
                for x in raw.iter_mut() {
                    *x = rng.next() as u8;
                }
                raw[8] = rng.below(8) as u8; // opcode
                raw[9] &= 0x1f;
                raw[10] = rng.below(6) as u8;
                if rng.pct(50) {
                    raw[40..44].copy_from_slice(&bm.key.to_le_bytes());
                    raw[32..40].copy_from_slice(&bm.va(rng.below(1 << 16)).to_le_bytes());
                }
                for s in 0..4 {
                    let o = 64 + s * 16;
                    if rng.pct(60) {
                        raw[o..o + 8].copy_from_slice(&m.va(rng.below(1 << 16)).to_le_bytes());
                        raw[o + 8..o + 12].copy_from_slice(&(rng.below(5000) as u32).to_le_bytes());
                        raw[o + 12..o + 16].copy_from_slice(&m.key.to_le_bytes());
                    }
                }
                let q = a.qps[0];
                let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
                a.h.mem.write(q.sq_base + (slot << 8), &raw).unwrap();
                a.qps[0].sq_pi = q.sq_pi.wrapping_add(1);
                a.h.mem.write_u32(q.sq_dbrec, u32::from(a.qps[0].sq_pi));
                let sges: Vec<_> = (0..rng.below(3))
                    .map(|_| {
                        (
                            bm.va(rng.below(1 << 16)),
                            rng.below(4000) as u32,
                            bm.key ^ (rng.below(2) as u32),
                        )
                    })
                    .collect();
                b.post_recv(0, round, &sges);
            }
            a.ring_sq(0);
            Wire::new(
                seed,
                Impair {
                    drop: 5,
                    dup: 5,
                    corrupt: 5,
                    reorder: 5,
                },
            )
            .run(&a, &b, 20_000);
            a.poll();
            b.poll();
        }
    }
}

/// RC over RoCE v2/IPv6 and RoCE v1 (GRH) paths, with the wire frames of
/// the right encapsulation.
#[test]
fn rc_over_ipv6_and_roce_v1() {
    for (net, sgid) in [(NET_IPV6, 1u8), (NET_ROCE_V1, 0)] {
        let mut a = Node::new(36);
        let mut b = Node::new(37);
        a.create_qp(QPT_RC);
        b.create_qp(QPT_RC);
        let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
        a.connect(0, bq, b.mac, v6_gid(37), sgid, net, |x| {
            x.av.flow_label = 0x12345
        });
        b.connect(0, aq, a.mac, v6_gid(36), sgid, net, |_| {});
        let src = a.reg_mr(16384, ACCESS_LOCAL_WRITE);
        let dst = b.reg_mr(16384, ALL_ACCESS);
        a.fill(src.gpa, &pattern(net.into(), 5000));
        a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 5000));
        let f = a.h.dev.take_tx();
        let p = ferroce_dev::wire::decode(&f[0]).unwrap();
        assert_eq!(p.net.kind.to_hw(), net);
        assert_eq!(p.net.sgid, v6_gid(36));
        if net == NET_IPV6 {
            assert_eq!(p.net.flow_label, 0x12345);
            assert_eq!(p.udp_sport, ferroce_dev::wire::udp_sport(0x12345, 0, 0));
        }
        b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
        let mut r = wr(2, WR_RDMA_READ);
        r.remote_addr = dst.va(0);
        r.rkey = dst.key;
        r.sges = vec![(src.va(8192), 5000, src.key)];
        a.post_send(0, &r);
        Wire::new(1, Impair::default()).run(&a, &b, 100);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_RDMA_WRITE, 0), (2, WC_RDMA_READ, 0)],
            "net {net}"
        );
        assert_eq!(a.bytes(src.gpa + 8192, 5000), pattern(net.into(), 5000));
    }
}

/// Connects a fresh pair with the requester's `max_rd_atomic` on `a` and
/// the responder's `max_dest_rd_atomic` on `b`.
/// (Only `a` requests and only `b` responds: each uses one of the two.)
fn read_pair(max_rd_atomic: u8, max_dest_rd_atomic: u8) -> (Node, Node) {
    rc_pair(|x| {
        x.max_rd_atomic = max_rd_atomic;
        x.max_dest_rd_atomic = max_dest_rd_atomic;
    })
}

fn read_wr(id: u64, dst: &MrInfo, doff: u64, src: &MrInfo, soff: u64, n: u32) -> SendWr {
    let mut r = wr(id, WR_RDMA_READ);
    r.remote_addr = src.va(soff);
    r.rkey = src.key;
    r.sges = vec![(dst.va(doff), n, dst.key)];
    r
}

fn decoded(frames: &[Vec<u8>]) -> Vec<(u8, u32, u8, Vec<u8>)> {
    frames
        .iter()
        .map(|f| {
            let p = ferroce_dev::wire::decode(f).unwrap();
            (p.bth.opcode, p.bth.psn, p.aeth.syndrome, p.payload.to_vec())
        })
        .collect()
}

/// 16 READs against max_rd_atomic = max_dest_rd_atomic = 4: the requester
/// never has more than 4 READ requests unanswered on the wire, the
/// responder (4 requests in one batch) serves them all, byte-exact.
#[test]
fn reads_are_limited_to_max_rd_atomic_and_all_served() {
    use ferroce_dev::wire::{decode, op, psn_diff};
    let (mut a, mut b) = read_pair(4, 4);
    let local = a.reg_mr(256 << 10, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(256 << 10, ALL_ACCESS);
    let data = pattern(16, 256 << 10);
    b.fill(remote.gpa, &data);
    let sizes = [
        1u32, 1024, 1025, 3000, 4096, 64, 9000, 2048, 0, 5, 16_384, 1023, 7777, 100, 2049, 4,
    ];
    let mut off = 0u64;
    let mut expect = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        a.post_send(0, &read_wr(i as u64, &local, off, &remote, off, n));
        expect.push((i as u64, WC_RDMA_READ, WC_SUCCESS));
        off += u64::from(n) + 11;
    }
    // Unanswered READ requests seen on the wire: (first PSN, packets).
    let mut open: Vec<(u32, u32)> = Vec::new();
    let mut most = 0usize;
    for _ in 0..1000 {
        let fa = a.h.dev.take_tx();
        let fb_empty = !b.h.dev.has_tx();
        if fa.is_empty() && fb_empty {
            break;
        }
        for f in &fa {
            let p = decode(f).unwrap();
            if p.bth.opcode == op::RC_READ_REQUEST {
                assert!(!open.iter().any(|r| r.0 == p.bth.psn), "no retransmission");
                open.push((p.bth.psn, p.reth.len.div_ceil(1024).max(1)));
            }
        }
        most = most.max(open.len());
        assert!(open.len() <= 4, "{} READs unanswered", open.len());
        b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
        let fb = b.h.dev.take_tx();
        for f in &fb {
            let p = decode(f).unwrap();
            if matches!(
                p.bth.opcode,
                op::RC_READ_RESPONSE_LAST | op::RC_READ_RESPONSE_ONLY
            ) {
                open.retain(|&(psn, n)| {
                    let d = psn_diff(p.bth.psn, psn);
                    !(0..n as i32).contains(&d)
                });
            }
        }
        a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
    }
    assert!(open.is_empty());
    assert_eq!(most, 4, "the requester uses all of max_rd_atomic");
    assert_eq!(statuses(&a.poll()), expect);
    let mut off = 0u64;
    for &n in &sizes {
        let o = off as usize;
        assert_eq!(a.bytes(local.at(off), n as usize), data[o..o + n as usize]);
        off += u64::from(n) + 11;
    }
    let db = b.h.dev.counters().data;
    assert_eq!((db.err_naks_sent, db.dup_requests), (0, 0));
    assert_eq!(a.h.dev.counters().data.timeouts, 0);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
}

/// A requester that exceeds the responder's resources (max_rd_atomic 2
/// against max_dest_rd_atomic 1, both READs in one batch): the first READ
/// is answered, the second NAKed invalid request; the requester completes
/// it with REM_INV_REQ_ERR and both QPs end in ERR.
#[test]
fn reads_beyond_max_dest_rd_atomic_are_naked_invalid_request() {
    use ferroce_dev::wire::{aeth, op};
    let (mut a, mut b) = read_pair(2, 1);
    let local = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(8192, ALL_ACCESS);
    b.fill(remote.gpa, &pattern(5, 8192));
    a.post_send(0, &read_wr(1, &local, 0, &remote, 0, 100));
    a.post_send(0, &read_wr(2, &local, 4096, &remote, 4096, 100));
    let f = a.h.dev.take_tx();
    let req = decoded(&f);
    assert_eq!(req.len(), 2, "max_rd_atomic 2: both READs go out");
    assert!(req.iter().all(|r| r.0 == op::RC_READ_REQUEST));
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let fb = b.h.dev.take_tx();
    let resp = decoded(&fb);
    assert_eq!(resp.len(), 2);
    assert_eq!(
        (resp[0].0, resp[0].1),
        (op::RC_READ_RESPONSE_ONLY, req[0].1)
    );
    assert_eq!(
        (resp[1].0, resp[1].1, resp[1].2),
        (op::RC_ACK, req[1].1, aeth::NAK_INVALID_REQ)
    );
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 1);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
    a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_RDMA_READ, WC_SUCCESS),
            (2, WC_RDMA_READ, WC_REM_INV_REQ_ERR)
        ]
    );
    assert_eq!(a.bytes(local.gpa, 100), pattern(5, 8192)[..100]);
    assert_eq!(a.bytes(local.gpa + 4096, 100), vec![0; 100]);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR));
    assert!(a.h.take_events().contains(&(EQE_QP_FATAL, a.qps[0].qpn, 0)));
    assert!(b.h.take_events().contains(&(EQE_QP_FATAL, b.qps[0].qpn, 0)));
}

/// Duplicate READ requests are answered from the responder resources and
/// take none: twice in one batch it is answered once; a re-requested tail
/// is answered from its PSN on; once a newer READ reused the only resource
/// (max_dest_rd_atomic 1), a duplicate of the old READ is dropped.
#[test]
fn duplicate_reads_are_served_from_responder_resources() {
    // The AETH of a READ response carries the responder's credit count
    // (device.rst "RC responder"): b has no receive WQE posted, code 0.
    use ferroce_dev::wire::{aeth::ACK, decode, encode, op};
    let (mut a, mut b) = read_pair(1, 1);
    let local = a.reg_mr(16384, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(16384, ALL_ACCESS);
    let data = pattern(9, 16384);
    b.fill(remote.gpa, &data);
    a.post_send(0, &read_wr(1, &local, 0, &remote, 0, 2048));
    let f1 = a.h.dev.take_tx();
    assert_eq!(f1.len(), 1);
    // The request and its duplicate in one batch: one set of responses.
    b.h.dev
        .receive_batch(f1.iter().chain(&f1).map(|f| f.as_slice()));
    let r1 = b.h.dev.take_tx();
    let psn = decode(&f1[0]).unwrap().bth.psn;
    let want = vec![
        (op::RC_READ_RESPONSE_FIRST, psn, ACK, data[..1024].to_vec()),
        (
            op::RC_READ_RESPONSE_LAST,
            psn_next(psn),
            ACK,
            data[1024..2048].to_vec(),
        ),
    ];
    assert_eq!(decoded(&r1), want);
    // Answered: a duplicate is answered again, still without a NAK.
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    assert_eq!(decoded(&b.h.dev.take_tx()), want);
    // The tail re-requested (as after a lost last response).
    let mut p = decode(&f1[0]).unwrap();
    p.bth.psn = psn_next(psn);
    p.reth.va += 1024;
    p.reth.len -= 1024;
    let mut tail = Vec::new();
    assert!(encode(&p, &mut tail));
    b.h.dev.receive(&tail);
    assert_eq!(
        decoded(&b.h.dev.take_tx()),
        vec![(
            op::RC_READ_RESPONSE_ONLY,
            psn_next(psn),
            ACK,
            data[1024..2048].to_vec()
        )]
    );
    a.h.dev.receive_batch(r1.iter().map(|f| f.as_slice()));
    // A new READ reuses the (answered) resource.
    a.post_send(0, &read_wr(2, &local, 4096, &remote, 8192, 100));
    let f2 = a.h.dev.take_tx();
    b.h.dev.receive_batch(f2.iter().map(|f| f.as_slice()));
    let r2 = b.h.dev.take_tx();
    assert_eq!(r2.len(), 1);
    // The old READ has no resource any more: dropped; the new one answered.
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    assert!(b.h.dev.take_tx().is_empty());
    b.h.dev.receive_batch(f2.iter().map(|f| f.as_slice()));
    assert_eq!(decoded(&b.h.dev.take_tx()), decoded(&r2));
    a.h.dev.receive_batch(r2.iter().map(|f| f.as_slice()));
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_READ, 0), (2, WC_RDMA_READ, 0)]
    );
    assert_eq!(a.bytes(local.gpa, 2048), data[..2048]);
    assert_eq!(a.bytes(local.gpa + 4096, 100), data[8192..8292]);
    let db = b.h.dev.counters().data;
    assert_eq!((db.dup_requests, db.err_naks_sent), (5, 0));
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
}

/// A go-back re-requests a READ whose responses are still on the way; the
/// requester completes it from them and posts the next READ, which reaches
/// the responder in one batch with the duplicate (max_dest_rd_atomic 1):
/// the new READ takes the resource the duplicate has answered again. It
/// used to be NAKed invalid request, failing a requester that kept to its
/// limit (ib_read_bw -a after a reordered READ request).
#[test]
fn a_new_read_reuses_a_resource_answered_again_for_a_duplicate() {
    use ferroce_dev::wire::{decode, op};
    let (mut a, mut b) = read_pair(1, 1);
    let local = a.reg_mr(16384, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(16384, ALL_ACCESS);
    let data = pattern(11, 16384);
    b.fill(remote.gpa, &data);
    a.post_send(0, &read_wr(1, &local, 0, &remote, 0, 2048));
    let f1 = a.h.dev.take_tx();
    assert_eq!(f1.len(), 1);
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    let r1 = b.h.dev.take_tx();
    assert_eq!(r1.len(), 2);
    // The requester completes READ 1 and sends READ 2.
    a.h.dev.receive_batch(r1.iter().map(|f| f.as_slice()));
    a.post_send(0, &read_wr(2, &local, 4096, &remote, 8192, 100));
    let f2 = a.h.dev.take_tx();
    assert_eq!(f2.len(), 1);
    // The late retransmission of READ 1 and READ 2 in one batch.
    b.h.dev
        .receive_batch(f1.iter().chain(&f2).map(|f| f.as_slice()));
    let r2 = b.h.dev.take_tx();
    let psn2 = decode(&f2[0]).unwrap().bth.psn;
    let got = decoded(&r2);
    assert!(
        got.iter().all(|r| r.0 != op::RC_ACK),
        "no NAK: {:?}",
        got.iter().map(|r| (r.0, r.1, r.2)).collect::<Vec<_>>()
    );
    assert!(got
        .iter()
        .any(|r| (r.0, r.1) == (op::RC_READ_RESPONSE_ONLY, psn2) && r.3 == data[8192..8292]));
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 0);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
    a.h.dev.receive_batch(r2.iter().map(|f| f.as_slice()));
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_READ, 0), (2, WC_RDMA_READ, 0)]
    );
    assert_eq!(a.bytes(local.gpa, 2048), data[..2048]);
    assert_eq!(a.bytes(local.gpa + 4096, 100), data[8192..8292]);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_RTS));
}

fn psn_next(psn: u32) -> u32 {
    ferroce_dev::wire::psn_add(psn, 1)
}

/// IBTA 9.7.5.2.8 / rxe `rnr_nak_timer`: after an RNR NAK the requester
/// waits for the RNR timer before it resends; a new doorbell in the
/// meantime queues the WQE but sends nothing (rxe's `req_next_wqe` checks
/// `qp->req.wait_for_rnr_timer`).
#[test]
fn rnr_wait_is_respected_by_new_doorbells() {
    let (mut a, mut b) = rc_pair(|a| a.min_rnr_timer = 1);
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &s);
    let f = a.h.dev.take_tx();
    assert_eq!(f.len(), 1);
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let nak = b.h.dev.take_tx();
    assert_eq!(b.h.dev.counters().data.rnr_naks_sent, 1);
    a.h.dev.receive_batch(nak.iter().map(|f| f.as_slice()));
    assert!(a.h.dev.take_tx().is_empty(), "nothing before the RNR timer");
    let mut s2 = wr(2, WR_SEND);
    s2.sges = vec![(m.va(0), 100, m.key)];
    a.post_send(0, &s2);
    assert!(
        a.h.dev.take_tx().is_empty(),
        "a new doorbell must not resend before the RNR timer"
    );
    let t = a.h.dev.next_timer().expect("the RNR timer is armed");
    a.h.dev.tick(t);
    let resent = a.h.dev.take_tx();
    // The second SEND also waits for a credit (device.rst "RC requester"):
    // the first is unacknowledged and took the one the requester may
    // send beyond what the responder advertised.
    assert_eq!(
        resent.len(),
        1,
        "the RNR NAKed SEND goes once the timer fired"
    );
    assert_eq!(a.h.dev.counters().data.credit_waits, 1);
    for id in 7..=8 {
        b.post_recv(0, id, &[(bm.va(0), 2048, bm.key)]);
    }
    b.h.dev.receive_batch(resent.iter().map(|f| f.as_slice()));
    let ack = b.h.dev.take_tx();
    a.h.dev.receive_batch(ack.iter().map(|f| f.as_slice()));
    assert_eq!(
        a.h.dev.take_tx().len(),
        1,
        "the ACK's credit lets the second go"
    );
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_SUCCESS)]);
}

/// Re-encodes ACK frame `f` with another AETH syndrome.
fn with_syndrome(f: &[u8], syndrome: u8) -> Vec<u8> {
    forged(f, |p| p.aeth.syndrome = syndrome)
}

/// IBTA 9.7.5.1.1 / rxe `check_psn` in rxe_comp.c: a NAK or RNR NAK whose
/// PSN is behind the oldest unacknowledged PSN (`una`) is stale (a
/// duplicate of one already acted on) and is ignored; it must not fail or
/// delay the WQE now at the head.
#[test]
fn stale_naks_behind_una_are_ignored() {
    use ferroce_dev::wire::aeth;
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    let f = a.h.dev.take_tx();
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let ack = b.h.dev.take_tx();
    assert_eq!(ack.len(), 1);
    a.h.dev.receive_batch(ack.iter().map(|f| f.as_slice()));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    a.post_send(0, &write_wr(2, &src, 0, &dst, 0, 100));
    let f2 = a.h.dev.take_tx();
    let before = a.h.dev.counters().data.stale_responses;
    for syn in [aeth::NAK_REM_ACCESS, aeth::RNR_NAK | 1, aeth::NAK_PSN_SEQ] {
        a.h.dev.receive(&with_syndrome(&ack[0], syn));
    }
    assert_eq!(a.h.dev.counters().data.stale_responses, before + 3);
    assert!(a.poll().is_empty());
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_RTS));
    assert!(a.h.dev.take_tx().is_empty(), "no rewind on a stale NAK");
    b.h.dev.receive_batch(f2.iter().map(|f| f.as_slice()));
    let ack2 = b.h.dev.take_tx();
    a.h.dev.receive_batch(ack2.iter().map(|f| f.as_slice()));
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, 0)]);
}

/// IBTA 11.4.2.1 (a work completion carries the WR ID of its WQE, error
/// or not) / rxe `do_complete`: a UD receive WQE that cannot be used (bad
/// lkey) completes with an error and with its own `wr_id`.
#[test]
fn failed_ud_receive_carries_its_wr_id() {
    let (mut a, mut b, qkey) = ud_pair(1);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 0xfeed, &[(bm.va(0), 100, bm.key ^ 0x100)]);
    let mut s = wr(1, WR_SEND);
    s.inline = Some(vec![1; 8]);
    s.ud = Some((ahn, b.qps[0].qpn, qkey));
    a.post_send(0, &s);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(
        statuses(&b.poll()),
        vec![(0xfeed, WC_RECV, WC_LOC_PROT_ERR)]
    );
}

fn set_port_mtu(n: &mut Node, mtu: u32) {
    let mut m = CmdSetPortMtu::zeroed();
    m.hdr.opcode = CMD_SET_PORT_MTU;
    m.port = 1;
    m.mtu = mtu;
    n.h.ok(&m);
}

/// IBTA 9.7.1 / rxe `qp->mtu`: messages are segmented by the QP's path
/// MTU (set at INIT->RTR), which a later change of the port's MTU does not
/// touch; a retransmission is cut exactly as the original was, and the
/// responder checks segment lengths against the same path MTU.
#[test]
fn segmentation_follows_the_path_mtu_not_the_port_mtu() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    a.fill(src.gpa, &pattern(3, 8192));
    b.post_recv(0, 5, &[(dst.va(0), 8192, dst.key)]);
    let mut s = wr(1, WR_SEND);
    s.sges = vec![(src.va(0), 8192, src.key)];
    a.post_send(0, &s);
    let lost = a.h.dev.take_tx();
    assert_eq!(lost.len(), 8, "8192 bytes at the 1024-byte path MTU");
    // Both ports shrink (active MTU 256) while the message is outstanding.
    set_port_mtu(&mut a, 576);
    set_port_mtu(&mut b, 576);
    let t = a.h.dev.next_timer().unwrap();
    a.h.dev.tick(t);
    let again = a.h.dev.take_tx();
    assert_eq!(again.len(), 8, "the retransmission is cut as the original");
    b.h.dev.receive_batch(again.iter().map(|f| f.as_slice()));
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, 0)]);
    let c = b.poll();
    assert_eq!(statuses(&c), vec![(5, WC_RECV, 0)]);
    assert_eq!(c[0].byte_len, 8192);
    assert_eq!(b.bytes(dst.gpa, 8192), pattern(3, 8192));
}

/// A 2 GiB MR of two 1 GiB pages on lazily allocated memory of `n`.
fn huge_mr(n: &mut Node, access: u32) -> MrInfo {
    let gpa = 0x1_0000_0000u64;
    n.h.mem.add_region(gpa, 2 << 30);
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = n.h.pbl_contig(gpa, 2, 30);
    c.iova = gpa;
    c.length = 2 << 30;
    c.pdn = n.pdn;
    c.access = access;
    c.key_variant = 0x22;
    let key = n.h.ok(&c);
    MrInfo {
        key,
        iova: gpa,
        gpa,
        len: 2 << 30,
    }
}

/// IBTA 9.7.1 (PSNs are compared modulo 2^24 within half the space): a
/// message must take fewer than 2^23 - 512 (the window) PSNs or its PSNs
/// alias. At path MTU 256 a 2 GiB WRITE needs 2^23 PSNs: it completes
/// with LOC_LEN_ERR and sends nothing; the largest allowed one is sent.
#[test]
fn messages_that_would_overflow_the_psn_space_are_refused() {
    let (mut a, _b) = rc_pair(|a| a.path_mtu = MTU_256);
    let big = huge_mr(&mut a, ACCESS_LOCAL_WRITE);
    let mut w = wr(1, WR_RDMA_WRITE);
    w.remote_addr = 0x1000;
    w.rkey = 0x1234;
    w.sges = vec![(big.va(0), 1 << 31, big.key)];
    let mut ok = w.clone();
    ok.wr_id = 2;
    ok.sges = vec![(big.va(0), ((1 << 23) - 513) * 256, big.key)];
    a.post_send(0, &ok);
    assert_eq!(a.h.dev.take_tx().len(), 512, "the largest message is sent");
    assert!(a.poll().is_empty());

    let (mut a, _b) = rc_pair(|a| a.path_mtu = MTU_256);
    let big = huge_mr(&mut a, ACCESS_LOCAL_WRITE);
    w.sges = vec![(big.va(0), 1 << 31, big.key)];
    a.post_send(0, &w);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_LOC_LEN_ERR)]
    );
    assert!(a.h.dev.take_tx().is_empty());
}

/// rxe `check_addr` (rxe_recv.c), IBTA 9.6.1.5 (the GRH/IP addresses of an
/// RC packet are those of the connection): a request or response whose
/// source or destination address is not the QP's peer and local address
/// is dropped and counted, so a third host that guesses QPN and PSN writes
/// nothing.
#[test]
fn rc_packets_from_a_foreign_address_are_dropped() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.fill(src.gpa, &[7; 100]);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    let f = a.h.dev.take_tx();
    let other_src = forged(&f[0], |p| p.net.sgid = ipv4_gid([10, 0, 1, 99]));
    let other_dst = forged(&f[0], |p| p.net.dgid = ipv4_gid([10, 0, 1, 98]));
    b.h.dev
        .receive_batch([other_src.as_slice(), other_dst.as_slice()]);
    assert_eq!(b.bytes(dst.gpa, 100), vec![0; 100]);
    assert!(b.h.dev.take_tx().is_empty(), "no ACK for a foreign packet");
    assert_eq!(b.h.dev.counters().data.rx_bad_addr, 2);
    // The same from the real peer is accepted; a forged ACK is not.
    b.h.dev.receive(&f[0]);
    assert_eq!(b.bytes(dst.gpa, 100), vec![7; 100]);
    let ack = b.h.dev.take_tx();
    let bad_ack = forged(&ack[0], |p| p.net.sgid = ipv4_gid([10, 0, 1, 99]));
    a.h.dev.receive(&bad_ack);
    assert!(a.poll().is_empty());
    assert_eq!(a.h.dev.counters().data.rx_bad_addr, 1);
    a.h.dev.receive(&ack[0]);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
}

/// rxe's `rxe_mr_copy` walks the MR's map once per copy; here a message
/// over physically contiguous pages is one segment, so gathering a packet
/// does not walk one segment per page (a 1 GiB message at MTU 256 took
/// longer than the command timeout).
#[test]
fn contiguous_pages_translate_to_one_segment() {
    let mut a = Node::new(36);
    let m = a.reg_mr(64 << 10, ALL_ACCESS);
    let objs = a.h.dev.objects();
    let mr = &objs.mrs.iter().find(|o| o.obj.key == m.key).unwrap().obj;
    assert_eq!(
        mr.translate(m.va(100), (64 << 10) - 200, ACCESS_REMOTE_READ),
        Ok(vec![(m.gpa + 100, (64 << 10) - 200)])
    );
}

/// rxe `read_reply` sends one response packet per responder pass and
/// yields: READ responses are produced as the TX queue drains, never
/// queued all at once and never dropped for room. A READ of more than
/// 65536 (the TX queue) x path MTU completes, byte-exact, with no
/// retransmission and no frame dropped.
#[test]
fn read_larger_than_the_tx_queue_completes() {
    let (mut a, mut b) = rc_pair(|a| a.path_mtu = MTU_256);
    let len = (65536 + 3) * 256 + 17;
    let local = huge_mr(&mut a, ACCESS_LOCAL_WRITE);
    let remote = huge_mr(&mut b, ALL_ACCESS);
    let data = pattern(11, len);
    b.fill(remote.gpa, &data);
    a.post_send(0, &read_wr(1, &local, 0, &remote, 0, len as u32));
    let mut wire = Wire::new(1, Impair::default());
    wire.run(&a, &b, 1000);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_READ, 0)]);
    assert!(a.bytes(local.gpa, len) == data, "READ data differs");
    let (da, db) = (a.h.dev.counters().data, b.h.dev.counters().data);
    assert_eq!((da.retransmits, da.timeouts), (0, 0));
    assert_eq!(db.tx_overflow, 0);
    assert_eq!(
        wire.delivered,
        1 + 65536 + 4,
        "the request and its responses"
    );
}

fn dereg(n: &mut Node, key: u32) {
    let mut c = CmdDeregMr::zeroed();
    c.hdr.opcode = CMD_DEREG_MR;
    c.key = key;
    n.h.ok(&c);
}

/// A READ in flight, its responses captured; then `revoke` runs on the
/// requester and the responses arrive: not one byte may land in the pages
/// the READ was to fill.
fn read_then_revoke(revoke: impl Fn(&mut Node, &MrInfo)) -> Node {
    let (mut a, mut b) = read_pair(1, 1);
    let local = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(8192, ALL_ACCESS);
    b.fill(remote.gpa, &[0x5a; 4096]);
    a.post_send(0, &read_wr(1, &local, 0, &remote, 0, 4096));
    let req = a.h.dev.take_tx();
    b.h.dev.receive_batch(req.iter().map(|f| f.as_slice()));
    let resp = b.h.dev.take_tx();
    assert_eq!(resp.len(), 4);
    revoke(&mut a, &local);
    a.h.dev.receive_batch(resp.iter().map(|f| f.as_slice()));
    assert_eq!(a.bytes(local.gpa, 4096), vec![0; 4096]);
    a
}

/// IBTA 10.6.3.6 (DEREG_MR ends all access through the MR) and rxe
/// (`rxe_dereg_mr` fails while the MR is referenced; the completer then
/// finds no MR): after DEREG_MR, DESTROY_QP or a move to RESET completes,
/// no DMA to the pages of the READ's destination follows, and a
/// retransmission never re-reads a deregistered source.
#[test]
fn dereg_destroy_and_reset_revoke_dma_of_outstanding_wqes() {
    let mut a = read_then_revoke(|a, mr| dereg(a, mr.key));
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_READ, WC_LOC_PROT_ERR)]
    );
    let mut a = read_then_revoke(|a, _| {
        let mut c = CmdDestroyQp::zeroed();
        c.hdr.opcode = CMD_DESTROY_QP;
        c.qpn = a.qps[0].qpn;
        a.h.ok(&c);
    });
    assert!(a.poll().is_empty());
    let mut a = read_then_revoke(|a, _| {
        let qpn = a.qps[0].qpn;
        assert_eq!(
            a.h.modify(attr_with(qpn, QPS_RESET, QP_ATTR_STATE)),
            STATUS_SUCCESS
        );
    });
    assert!(a.poll().is_empty());

    // A WRITE whose first transmission was lost, source deregistered:
    // the retransmission reads nothing and the WQE fails locally.
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    assert_eq!(a.h.dev.take_tx().len(), 1);
    dereg(&mut a, src.key);
    let t = a.h.dev.next_timer().unwrap();
    a.h.dev.tick(t);
    assert!(
        a.h.dev.take_tx().is_empty(),
        "no retransmission from freed pages"
    );
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_LOC_PROT_ERR)]
    );
}

/// rxe `COMPST_ERROR_RETRY` (rxe_comp.c): a PSN sequence error NAK starts a
/// retry and consumes one of `retry_cnt`, as a timeout does (IBTA
/// 9.7.5.2.3); with retry_cnt 1 a NAK then a timeout exhaust it.
#[test]
fn sequence_naks_consume_retry_cnt() {
    use ferroce_dev::wire::{aeth, decode, encode};
    let (mut a, mut b) = rc_pair(|a| a.retry_cnt = 1);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    let f = a.h.dev.take_tx();
    b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    let ack = b.h.dev.take_tx();
    a.h.dev.receive_batch(ack.iter().map(|f| f.as_slice()));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    a.post_send(0, &write_wr(2, &src, 0, &dst, 0, 100));
    let lost = a.h.dev.take_tx();
    let mut p = decode(&ack[0]).unwrap();
    p.bth.psn = decode(&lost[0]).unwrap().bth.psn;
    p.aeth.syndrome = aeth::NAK_PSN_SEQ;
    let mut nak = Vec::new();
    assert!(encode(&p, &mut nak));
    a.h.dev.receive(&nak);
    assert_eq!(a.h.dev.take_tx().len(), 1, "the NAK'ed PSN is resent");
    let t = a.h.dev.next_timer().unwrap();
    a.h.dev.tick(t);
    assert!(a.h.dev.take_tx().is_empty(), "the NAK used the last retry");
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_RDMA_WRITE, WC_RETRY_EXC_ERR)]
    );
}

/// A frame to a multicast or broadcast MAC whose destination GID is no
/// multicast GID reaches no QP, even with the QPN of one: only datagrams
/// to multicast groups (1.7, `tests/mcast.rs`) use group MACs.
#[test]
fn multicast_frames_are_rejected() {
    let (mut a, mut b, qkey) = ud_pair(1);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 9, &[(bm.va(0), 1000, bm.key)]);
    let mut s = wr(1, WR_SEND);
    s.inline = Some(vec![1; 8]);
    s.ud = Some((ahn, b.qps[0].qpn, qkey));
    a.post_send(0, &s);
    let f = a.h.dev.take_tx();
    let before = b.h.dev.counters().data.rx_no_qp;
    for dmac in [[0x01, 0x00, 0x5e, 0, 0, 1], [0xff; 6]] {
        let mut p = ferroce_dev::wire::decode(&f[0]).unwrap();
        p.dmac = dmac;
        let mut m = Vec::new();
        assert!(ferroce_dev::wire::encode(&p, &mut m));
        b.h.dev.receive(&m);
    }
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_no_qp, before + 2);
    b.h.dev.receive(&f[0]);
    assert_eq!(statuses(&b.poll()), vec![(9, WC_RECV, 0)]);
}

/// IBTA 10.3.1 (QP state table, SQ Error: work requests submitted to the
/// send queue are completed with flush error): a WQE posted while a UD QP
/// is in SQE is flushed, not run after SQE -> RTS; later ones run.
#[test]
fn wqes_posted_in_sqe_are_flushed() {
    let (mut a, mut b, qkey) = ud_pair(1);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    let m = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut big = wr(1, WR_SEND);
    big.sges = vec![(m.va(0), 4096, m.key)];
    big.ud = Some((ahn, b.qps[0].qpn, qkey));
    a.post_send(0, &big);
    assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_SQE));
    let mut s = wr(2, WR_SEND);
    s.inline = Some(vec![2; 8]);
    s.ud = Some((ahn, b.qps[0].qpn, qkey));
    a.post_send(0, &s);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_SEND, WC_LOC_LEN_ERR), (2, WC_SEND, WC_WR_FLUSH_ERR)]
    );
    let qpn = a.qps[0].qpn;
    let mut to_rts = attr_with(qpn, QPS_RTS, QP_ATTR_STATE | QP_ATTR_CUR_STATE);
    to_rts.cur_qp_state = QPS_SQE;
    assert_eq!(a.h.modify(to_rts), STATUS_SUCCESS);
    assert!(a.h.dev.take_tx().is_empty(), "the flushed WQE never runs");
    b.post_recv(0, 9, &[(bm.va(0), 1000, bm.key)]);
    s.wr_id = 3;
    a.post_send(0, &s);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_SEND, 0)]);
    Wire::new(1, Impair::default()).run(&a, &b, 100);
    assert_eq!(statuses(&b.poll()), vec![(9, WC_RECV, 0)]);
}

/// IBTA 11.2.4.2 (SQD -> SQD may change RETRY_CNT, RNR_RETRY, TIMEOUT):
/// the new counts reach the requester at once, for the WQEs still
/// outstanding, not only after the next acknowledged progress.
#[test]
fn sqd_to_sqd_retry_attributes_reach_the_engine() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 0, &dst, 0, 100));
    assert_eq!(a.h.dev.take_tx().len(), 1);
    let qpn = a.qps[0].qpn;
    assert_eq!(
        a.h.modify(attr_with(qpn, QPS_SQD, QP_ATTR_STATE)),
        STATUS_SUCCESS
    );
    let mut m = attr_with(qpn, QPS_SQD, QP_ATTR_STATE | QP_ATTR_RETRY_CNT);
    m.retry_cnt = 0;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    let t = a.h.dev.next_timer().unwrap();
    a.h.dev.tick(t);
    assert!(
        a.h.dev.take_tx().is_empty(),
        "retry_cnt 0: no retransmission"
    );
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_RETRY_EXC_ERR)]
    );
}

/// 64 RC QPs streaming at once on one device pair all complete,
/// byte-exact, and none starves: every QP finishes within a few wire
/// rounds of the first. Prints each QP's share of the data frames and the
/// round its last WRITE completed in.
#[test]
fn sixty_four_qps_streaming_at_once_all_complete() {
    const N: usize = 64;
    const LEN: u32 = 16 << 10;
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    for i in 0..N {
        a.create_qp(QPT_RC);
        b.create_qp(QPT_RC);
        connect_pair(&mut a, i, &mut b, i, |_| {});
    }
    let src = a.reg_mr(u64::from(LEN) * N as u64, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(u64::from(LEN) * N as u64 * 2, ALL_ACCESS);
    let data = pattern(64, LEN as usize * N);
    a.fill(src.gpa, &data);
    for k in 0..2u64 {
        for i in 0..N {
            let off = i as u64 * u64::from(LEN);
            let doff = (i as u64 * 2 + k) * u64::from(LEN);
            a.post_send(i, &write_wr(i as u64 * 2 + k, &src, off, &dst, doff, LEN));
        }
    }
    let mut frames = vec![0usize; N];
    let mut done_round = vec![None; N];
    let mut cqes = Vec::new();
    let mut wire = Wire::new(3, Impair::default());
    for round in 0..1000 {
        let fa = a.h.dev.take_tx();
        for f in &fa {
            let qpn = ferroce_dev::wire::decode(f).unwrap().bth.dest_qp;
            if let Some(i) = b.qps.iter().position(|q| q.qpn == qpn) {
                frames[i] += 1;
            }
        }
        b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
        if wire.run(&a, &b, 1) == 0 && fa.is_empty() {
            break;
        }
        for c in a.poll() {
            let i = (c.wr_id / 2) as usize;
            done_round[i] = Some(round);
            cqes.push(c);
        }
    }
    assert_eq!(cqes.len(), 2 * N, "every WRITE completes");
    assert!(cqes.iter().all(|c| c.status == WC_SUCCESS));
    for i in 0..N {
        for k in 0..2 {
            let off = (i * 2 + k) * LEN as usize;
            let want = &data[i * LEN as usize..(i + 1) * LEN as usize];
            assert!(
                b.bytes(dst.gpa + off as u64, LEN as usize) == want,
                "QP {i}"
            );
        }
    }
    let rounds: Vec<usize> = done_round.iter().map(|r| r.unwrap()).collect();
    let total: usize = frames.iter().sum();
    eprintln!("data frames per QP (of {total}): {frames:?}");
    eprintln!("round of each QP's last completion: {rounds:?}");
    assert!(
        frames.iter().all(|f| *f == 32),
        "each QP sent its 32 packets once"
    );
    let (first, last) = (rounds.iter().min().unwrap(), rounds.iter().max().unwrap());
    assert!(
        last - first <= 2,
        "a QP finished {} rounds after the first",
        last - first
    );
}
