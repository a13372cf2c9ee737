// SPDX-License-Identifier: GPL-2.0
//! UC QPs (device 1.5, device.rst "UC"): SEND and RDMA WRITE with and
//! without immediate across two devices, byte-exact over several packets,
//! completed when sent and never acknowledged; the responder's silent
//! drops (PSN gaps, missing first packets, duplicates, no receive WQE, bad
//! R_Key) and their counters; READ and atomics refused locally; the UC QP
//! state machine.

mod common;

use common::rdma::*;
use common::{attr_with, av_v4, full_attr, ipv4_gid};
use ferroce_dev::hw::*;
use ferroce_dev::wire::{decode, op};

const UC_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;

/// The UC drop counters: (dropped, seq_err, no_wqe, bad_req).
fn drops(node: &mut Node) -> (u64, u64, u64, u64) {
    let k = node.query_counters();
    (
        k.rx_uc_dropped,
        k.rx_uc_seq_err,
        k.rx_uc_no_wqe,
        k.rx_uc_bad_req,
    )
}

fn send_wr(wr_id: u64, opcode: u8, m: &MrInfo, off: u64, len: u32) -> SendWr {
    SendWr {
        wr_id,
        opcode,
        flags: WQE_SIGNALED,
        sges: vec![(m.va(off), len, m.key)],
        ..SendWr::default()
    }
}

fn write_wr(wr_id: u64, opcode: u8, m: &MrInfo, len: u32, peer: &MrInfo, off: u64) -> SendWr {
    SendWr {
        remote_addr: peer.va(off),
        rkey: peer.key,
        ..send_wr(wr_id, opcode, m, 0, len)
    }
}

/// A recognisable pattern of `len` bytes.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// (wr_id, opcode, status) of CQEs.
fn cqes(c: &[Cqe]) -> Vec<(u64, u8, u8)> {
    c.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect()
}

/// The BTH opcodes of `frames`, asserting that none asks for an ACK.
fn opcodes(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .map(|f| {
            let p = decode(f).unwrap();
            assert!(!p.bth.ack_req, "UC packet {:#x} with AckReq", p.bth.opcode);
            p.bth.opcode
        })
        .collect()
}

fn deliver(to: &Node, frames: &[Vec<u8>]) {
    to.h.dev.receive_batch(frames.iter().map(|f| f.as_slice()));
}

#[test]
fn version_1_5_and_later_advertise_uc() {
    let a = Node::new(36);
    let version = a.h.reg_r(REG_VERSION);
    assert_eq!(version >> VERSION_MAJOR_SHIFT, 1);
    assert!(version & VERSION_MINOR_MASK >= 5);
    assert_eq!(a.h.reg_r(REG_DEV_CAPS) & CAP_UC, CAP_UC);
    assert_eq!(COUNTERS_SIZE_1_5, COUNTERS_SIZE_1_4 + 4 * 8);
}

/// SEND and WRITE_IMM across two devices, one packet each: UC opcodes on
/// the wire, the requester completes at once (before the peer saw a
/// byte), the responder completes the receives and sends nothing back.
#[test]
fn send_and_write_imm_across_two_devices() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let rbuf = b.reg_mr(8192, UC_ACCESS);
    let msg = pattern(300, 7);
    a.fill(src.gpa, &msg);
    b.post_recv(0, 100, &[(rbuf.va(0), 4096, rbuf.key)]);
    b.post_recv(0, 101, &[(rbuf.va(4096), 64, rbuf.key)]);

    let mut send = send_wr(1, WR_SEND_IMM, &src, 0, 300);
    send.imm = [0xde, 0xad, 0xbe, 0xef];
    send.flags |= WQE_SOLICITED;
    a.post_send(0, &send);
    a.post_send(0, &write_wr(2, WR_RDMA_WRITE_IMM, &src, 300, &rbuf, 1000));
    // Completed as sent: the CQEs are there before anything was delivered.
    assert_eq!(
        cqes(&a.poll()),
        vec![(1, WC_SEND, WC_SUCCESS), (2, WC_RDMA_WRITE, WC_SUCCESS)]
    );
    let fa = a.h.dev.take_tx();
    assert_eq!(
        opcodes(&fa),
        vec![op::UC_SEND_ONLY_IMM, op::UC_WRITE_ONLY_IMM]
    );
    let p0 = decode(&fa[0]).unwrap();
    assert_eq!(p0.bth.opcode, 0x25);
    assert!(p0.bth.se);
    assert_eq!(p0.bth.dest_qp, b.qps[0].qpn);
    assert_eq!(p0.imm, [0xde, 0xad, 0xbe, 0xef]);
    let p1 = decode(&fa[1]).unwrap();
    assert_eq!(p1.bth.psn, (p0.bth.psn + 1) & 0xff_ffff);
    assert_eq!(
        (p1.reth.va, p1.reth.rkey, p1.reth.len),
        (rbuf.va(1000), rbuf.key, 300)
    );

    deliver(&b, &fa);
    // No ACK, ever.
    assert!(b.h.dev.take_tx().is_empty());
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![
            (100, WC_RECV, WC_SUCCESS),
            (101, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)
        ]
    );
    assert_eq!(c[0].byte_len, 300);
    assert_eq!(
        c[0].flags & (CQE_WITH_IMM | CQE_SOLICITED),
        CQE_WITH_IMM | CQE_SOLICITED
    );
    assert_eq!(c[0].imm_data.to_le_bytes(), [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(c[0].src_qp, a.qps[0].qpn);
    assert_eq!(c[1].byte_len, 300);
    assert_eq!(c[1].flags & CQE_WITH_IMM, CQE_WITH_IMM);
    assert_eq!(c[1].imm_data, 0);
    assert_eq!(b.bytes(rbuf.gpa, 300), msg);
    assert_eq!(b.bytes(rbuf.gpa + 1000, 300), msg);
    assert_eq!(b.bytes(rbuf.gpa + 300, 700), vec![0; 700]);
    // The QP saw its first packet in RTS: no COMM_EST; nothing else either.
    assert!(b.h.take_events().is_empty());
    assert_eq!(drops(&mut b), (0, 0, 0, 0));
    let k = b.query_counters();
    assert_eq!((k.acks_sent, k.seq_naks_sent, k.err_naks_sent), (0, 0, 0));
}

/// Messages of several packets, both ways: FIRST/MIDDLE/LAST with the UC
/// opcodes, RETH only on the first WRITE packet, ImmDt only on the last,
/// every byte where it belongs and nothing beyond.
#[test]
fn multi_packet_messages_are_byte_exact() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, UC_ACCESS);
    let msg = pattern(5000, 3);
    a.fill(src.gpa, &msg);
    b.fill(dst.gpa, &[0xee; 1 << 16]);
    // SEND of 5000 bytes at MTU 1024: 5 packets into two SGEs.
    b.post_recv(
        0,
        7,
        &[(dst.va(0), 2000, dst.key), (dst.va(4096), 4000, dst.key)],
    );
    a.post_send(0, &send_wr(1, WR_SEND, &src, 0, 5000));
    let fa = a.h.dev.take_tx();
    assert_eq!(
        opcodes(&fa),
        vec![
            op::UC_SEND_FIRST,
            op::UC_SEND_MIDDLE,
            op::UC_SEND_MIDDLE,
            op::UC_SEND_MIDDLE,
            op::UC_SEND_LAST
        ]
    );
    let lens: Vec<usize> = fa
        .iter()
        .map(|f| decode(f).unwrap().payload.len())
        .collect();
    assert_eq!(lens, vec![1024, 1024, 1024, 1024, 904]);
    assert_eq!(cqes(&a.poll()), vec![(1, WC_SEND, WC_SUCCESS)]);
    deliver(&b, &fa);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(7, WC_RECV, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 5000);
    assert_eq!(b.bytes(dst.gpa, 2000), msg[..2000]);
    assert_eq!(b.bytes(dst.gpa + 2000, 2096), vec![0xee; 2096]);
    assert_eq!(b.bytes(dst.gpa + 4096, 3000), msg[2000..]);
    assert_eq!(b.bytes(dst.gpa + 7096, 100), vec![0xee; 100]);

    // WRITE of 3000 bytes (3 packets) and WRITE_IMM of 4097 (5 packets).
    b.post_recv(0, 8, &[]);
    a.post_send(0, &write_wr(2, WR_RDMA_WRITE, &src, 3000, &dst, 10_000));
    let mut wimm = write_wr(3, WR_RDMA_WRITE_IMM, &src, 4097, &dst, 20_001);
    wimm.imm = [1, 2, 3, 4];
    a.post_send(0, &wimm);
    let fa = a.h.dev.take_tx();
    assert_eq!(
        opcodes(&fa),
        vec![
            op::UC_WRITE_FIRST,
            op::UC_WRITE_MIDDLE,
            op::UC_WRITE_LAST,
            op::UC_WRITE_FIRST,
            op::UC_WRITE_MIDDLE,
            op::UC_WRITE_MIDDLE,
            op::UC_WRITE_MIDDLE,
            op::UC_WRITE_LAST_IMM
        ]
    );
    let first = decode(&fa[3]).unwrap();
    assert_eq!((first.reth.va, first.reth.len), (dst.va(20_001), 4097));
    let mid = decode(&fa[4]).unwrap();
    assert_eq!(mid.reth.len, 0);
    assert_eq!(decode(&fa[7]).unwrap().imm, [1, 2, 3, 4]);
    assert_eq!(
        cqes(&a.poll()),
        vec![
            (2, WC_RDMA_WRITE, WC_SUCCESS),
            (3, WC_RDMA_WRITE, WC_SUCCESS)
        ]
    );
    deliver(&b, &fa);
    assert!(b.h.dev.take_tx().is_empty());
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(8, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 4097);
    assert_eq!(c[0].imm_data.to_le_bytes(), [1, 2, 3, 4]);
    assert_eq!(b.bytes(dst.gpa + 10_000, 3000), msg[..3000]);
    assert_eq!(b.bytes(dst.gpa + 20_001, 4097), msg[..4097]);
    assert_eq!(b.bytes(dst.gpa + 13_000, 7001), vec![0xee; 7001]);
    assert_eq!(b.bytes(dst.gpa + 24_098, 100), vec![0xee; 100]);
    assert_eq!(drops(&mut b), (0, 0, 0, 0));
}

/// A lost middle packet: the responder discards the rest of that message
/// (no CQE; the receive WQE it was filling takes the next message), and
/// the next message arrives whole. The same for a WRITE_IMM whose FIRST
/// was lost: its MIDDLE and LAST packets are dropped, nothing completes.
#[test]
fn dropped_middle_packet_discards_that_message_and_the_next_arrives() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, UC_ACCESS);
    let m1 = pattern(3000, 1);
    let m2 = pattern(2500, 2);
    a.fill(src.gpa, &m1);
    a.fill(src.gpa + 8192, &m2);
    b.fill(dst.gpa, &[0xee; 1 << 16]);
    b.post_recv(0, 10, &[(dst.va(0), 4096, dst.key)]);
    b.post_recv(0, 11, &[(dst.va(4096), 4096, dst.key)]);
    a.post_send(0, &send_wr(1, WR_SEND, &src, 0, 3000));
    a.post_send(0, &send_wr(2, WR_SEND, &src, 8192, 2500));
    let mut fa = a.h.dev.take_tx();
    assert_eq!(fa.len(), 6);
    assert_eq!(decode(&fa[1]).unwrap().bth.opcode, op::UC_SEND_MIDDLE);
    fa.remove(1);
    deliver(&b, &fa);
    assert!(b.h.dev.take_tx().is_empty());
    // Message 2 went into the receive WQE message 1 had started to fill.
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(10, WC_RECV, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 2500);
    assert_eq!(b.bytes(dst.gpa, 2500), m2);
    // The LAST of message 1 was dropped: one sequence error, one packet.
    assert_eq!(drops(&mut b), (1, 1, 0, 0));
    // Both sends completed successfully on the requester: UC never knows.
    assert_eq!(
        cqes(&a.poll()),
        vec![(1, WC_SEND, WC_SUCCESS), (2, WC_SEND, WC_SUCCESS)]
    );

    // A WRITE_IMM of 3 packets whose FIRST is lost, then a WRITE_IMM of 1.
    let mut w1 = write_wr(3, WR_RDMA_WRITE_IMM, &src, 3000, &dst, 16_384);
    w1.imm = [9, 9, 9, 9];
    let mut w2 = write_wr(4, WR_RDMA_WRITE_IMM, &src, 100, &dst, 32_768);
    w2.imm = [4, 4, 4, 4];
    a.post_send(0, &w1);
    a.post_send(0, &w2);
    let mut fa = a.h.dev.take_tx();
    assert_eq!(fa.len(), 4);
    fa.remove(0);
    deliver(&b, &fa);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(11, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]);
    assert_eq!(c[0].imm_data.to_le_bytes(), [4, 4, 4, 4]);
    assert_eq!(c[0].byte_len, 100);
    assert_eq!(b.bytes(dst.gpa + 32_768, 100), m1[..100]);
    // Nothing of the message without its FIRST was written.
    assert_eq!(b.bytes(dst.gpa + 16_384, 3000), vec![0xee; 3000]);
    // MIDDLE (a gap: a new error) and LAST (the same message) dropped.
    assert_eq!(drops(&mut b), (3, 2, 0, 0));
    assert!(b.h.dev.take_tx().is_empty());
}

/// A gap that swallows a whole message and the FIRST of the next one, then
/// the resynchronisation on an ONLY packet whose PSN is far ahead.
#[test]
fn a_gap_resyncs_on_the_next_first_or_only_packet() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, UC_ACCESS);
    a.fill(src.gpa, &pattern(4096, 5));
    for i in 0..3 {
        b.post_recv(0, 20 + i, &[(dst.va(4096 * i), 4096, dst.key)]);
    }
    a.post_send(0, &send_wr(1, WR_SEND, &src, 0, 100)); // ONLY, lost
    a.post_send(0, &send_wr(2, WR_SEND, &src, 0, 2048)); // FIRST lost, LAST
    a.post_send(0, &send_wr(3, WR_SEND, &src, 0, 50)); // ONLY
    let fa = a.h.dev.take_tx();
    assert_eq!(fa.len(), 4);
    deliver(&b, &fa[2..]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(20, WC_RECV, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 50);
    assert_eq!(drops(&mut b), (1, 1, 0, 0));
    // The lost ones arriving late are behind the expected PSN: duplicates.
    deliver(&b, &fa[..2]);
    assert!(b.poll().is_empty());
    assert_eq!(drops(&mut b), (3, 1, 0, 0));
    assert_eq!(b.query_counters().dup_requests, 2);
}

/// A wire that duplicates, drops and reorders frames: every message that
/// arrives, arrives once and whole (duplicates are dropped by PSN), and
/// the receive WQEs complete in order with the right bytes.
#[test]
fn impaired_wire_never_delivers_a_message_twice_or_torn() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 20, UC_ACCESS);
    let mut wire = Wire::new(
        0x5eed,
        Impair {
            drop: 3,
            dup: 20,
            reorder: 5,
            corrupt: 0,
        },
    );
    let n = 60u64;
    for i in 0..n {
        b.post_recv(0, 1000 + i, &[(dst.va(4096 * i), 4096, dst.key)]);
    }
    let mut sent = 0;
    for i in 0..n {
        let len = 1 + (i as u32 * 397) % 3000;
        let mut data = pattern(len as usize, i as u8);
        // The first 8 bytes say which message this is.
        data[..8.min(len as usize)].copy_from_slice(&i.to_le_bytes()[..8.min(len as usize)]);
        a.fill(src.gpa + 8192 * (i % 4), &data);
        a.post_send(0, &send_wr(i, WR_SEND, &src, 8192 * (i % 4), len));
        wire.run(&a, &b, 10);
        sent += 1;
    }
    assert_eq!(a.poll().len(), sent);
    let c = b.poll();
    assert!(!c.is_empty() && c.len() < n as usize, "{} of {n}", c.len());
    assert!(wire.duplicated > 0 && wire.dropped > 0);
    let mut last = None;
    for (k, cqe) in c.iter().enumerate() {
        assert_eq!(cqe.status, WC_SUCCESS);
        // Receive WQEs complete in order, none skipped.
        assert_eq!(cqe.wr_id, 1000 + k as u64);
        let slot = dst.gpa + 4096 * k as u64;
        let len = cqe.byte_len as usize;
        let head = b.bytes(slot, 8.min(len));
        let mut id = [0u8; 8];
        id[..head.len()].copy_from_slice(&head);
        let i = u64::from_le_bytes(id);
        if len >= 8 {
            // Each message at most once, in order.
            assert!(last.is_none_or(|l| i > l), "message {i} after {last:?}");
            last = Some(i);
            assert_eq!(len as u32, 1 + (i as u32 * 397) % 3000);
            let mut want = pattern(len, i as u8);
            want[..8].copy_from_slice(&i.to_le_bytes());
            assert_eq!(b.bytes(slot, len), want, "message {i}");
        }
    }
    let (dropped, _, no_wqe, bad) = drops(&mut b);
    assert!(dropped > 0);
    assert_eq!((no_wqe, bad), (0, 0));
    assert!(b.query_counters().dup_requests > 0);
    assert!(b.h.dev.take_tx().is_empty());
}

/// READ and atomics (1.8: ATOMIC_WRITE and FLUSH too) do not exist on UC:
/// the WQE completes with a local QP operation error without a packet, the
/// QP enters SQE (its receive side goes on), later WQEs are flushed, and
/// SQE -> RTS sends again.
#[test]
fn read_and_atomics_on_uc_complete_with_local_qp_op_error() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, UC_ACCESS);
    let qpn = a.qps[0].qpn;
    for (id, opcode) in [
        (1, WR_RDMA_READ),
        (2, WR_ATOMIC_FETCH_ADD),
        (3, WR_ATOMIC_CMP_SWP),
        (4, WR_LOCAL_INV),
        (5, WR_SEND_INV),
        (6, WR_REG_MR),
        (7, WR_ATOMIC_WRITE),
        (8, WR_FLUSH),
    ] {
        let mut wr = write_wr(id, opcode, &src, 8, &dst, 0);
        if matches!(
            opcode,
            WR_LOCAL_INV | WR_REG_MR | WR_ATOMIC_WRITE | WR_FLUSH
        ) {
            wr.sges.clear();
        }
        if opcode == WR_FLUSH {
            // A well-formed segment: type GLOBAL, level RANGE.
            wr.compare_add = u64::from(FLUSH_GLOBAL);
        }
        a.post_send(0, &wr);
        a.post_send(0, &send_wr(id + 100, WR_SEND, &src, 0, 8));
        assert!(a.h.dev.take_tx().is_empty(), "opcode {opcode}: a packet");
        let c = a.poll();
        assert_eq!(
            cqes(&c),
            vec![
                (id, wc_of(opcode), WC_LOC_QP_OP_ERR),
                (id + 100, WC_SEND, WC_WR_FLUSH_ERR)
            ],
            "opcode {opcode}"
        );
        assert_eq!(a.h.query_qp(qpn).qp_state, QPS_SQE);
        // SQE -> RTS (UC: CUR_STATE, ACCESS_FLAGS allowed).
        let mut m = attr_with(qpn, QPS_RTS, QP_ATTR_STATE | QP_ATTR_CUR_STATE);
        m.cur_qp_state = QPS_SQE;
        assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    }
    // A SQE QP still receives; after SQE -> RTS it sends.
    b.post_recv(0, 50, &[(dst.va(0), 64, dst.key)]);
    a.post_send(0, &send_wr(7, WR_SEND, &src, 0, 8));
    assert_eq!(cqes(&a.poll()), vec![(7, WC_SEND, WC_SUCCESS)]);
    let fa = a.h.dev.take_tx();
    assert_eq!(opcodes(&fa), vec![op::UC_SEND_ONLY]);
    deliver(&b, &fa);
    assert_eq!(cqes(&b.poll()), vec![(50, WC_RECV, WC_SUCCESS)]);
    // No async event for a send queue error (the CQE says it).
    assert!(a.h.take_events().is_empty());
}

fn wc_of(wr: u8) -> u8 {
    match wr {
        WR_RDMA_READ => WC_RDMA_READ,
        WR_ATOMIC_FETCH_ADD => WC_FETCH_ADD,
        WR_ATOMIC_CMP_SWP => WC_COMP_SWAP,
        WR_LOCAL_INV => WC_LOCAL_INV,
        WR_REG_MR => WC_REG_MR,
        WR_ATOMIC_WRITE => WC_ATOMIC_WRITE,
        WR_FLUSH => WC_FLUSH,
        _ => WC_SEND,
    }
}

/// Traffic both ways, SENDs and WRITEs of every shape: every frame on the
/// wire is a UC request without AckReq, none an ACK, NAK or response.
#[test]
fn no_ack_frames_on_the_wire() {
    let (mut a, mut b) = uc_pair();
    let sa = a.reg_mr(1 << 16, UC_ACCESS);
    let sb = b.reg_mr(1 << 16, UC_ACCESS);
    for i in 0..8 {
        a.post_recv(0, i, &[(sa.va(32_768), 8192, sa.key)]);
        b.post_recv(0, i, &[(sb.va(32_768), 8192, sb.key)]);
    }
    /// One SEND and one WRITE from `from` (memory `m`) to `to` (memory
    /// `peer`); returns their frames, delivered.
    fn exchange(
        from: &mut Node,
        m: &MrInfo,
        to: &Node,
        peer: &MrInfo,
        i: u64,
        len: u32,
    ) -> Vec<Vec<u8>> {
        from.post_send(0, &send_wr(i, WR_SEND, m, 0, len));
        from.post_send(0, &write_wr(i, WR_RDMA_WRITE, m, len, peer, 0));
        let f = from.h.dev.take_tx();
        deliver(to, &f);
        f
    }
    let mut frames = Vec::new();
    for (i, len) in [0u32, 1, 1024, 1025, 4096, 5000].into_iter().enumerate() {
        let i = i as u64;
        frames.extend(exchange(&mut a, &sa, &b, &sb, i, len));
        frames.extend(exchange(&mut b, &sb, &a, &sa, i, len));
    }
    frames.extend(a.h.dev.take_tx());
    frames.extend(b.h.dev.take_tx());
    for op in opcodes(&frames) {
        assert!(
            (op::UC_SEND_FIRST..=op::UC_WRITE_ONLY_IMM).contains(&op),
            "{op:#x}"
        );
    }
    assert_eq!(a.poll().len() + b.poll().len(), 4 * 6 + 2 * 6);
    for n in [&mut a, &mut b] {
        let k = n.query_counters();
        assert_eq!(
            (
                k.acks_sent,
                k.err_naks_sent,
                k.seq_naks_sent,
                k.rnr_naks_sent
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(k.rx_uc_dropped, 0);
        assert_eq!(k.timeouts, 0);
    }
    // And no timer is left behind: UC has no retransmission.
    assert_eq!(a.h.dev.next_timer(), None);
    assert_eq!(b.h.dev.next_timer(), None);
}

/// An unknown R_Key, a range outside the MR, a missing right, a SEND
/// longer than the receive WQE, and a SEND or WRITE_IMM without a receive
/// WQE: each message is dropped silently (no frame back, no CQE, the QP
/// stays in RTS, a partly filled receive WQE is reused) and counted.
#[test]
fn bad_requests_are_dropped_silently_and_counted() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(1 << 14, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 14, UC_ACCESS);
    let ro = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(1 << 14, 9));
    b.fill(dst.gpa, &[0xee; 1 << 14]);
    let bad_key = MrInfo {
        key: dst.key ^ 0x100,
        ..dst
    };
    let mut expect_bad = 0;
    for wr in [
        write_wr(1, WR_RDMA_WRITE, &src, 100, &bad_key, 0),
        write_wr(2, WR_RDMA_WRITE_IMM, &src, 3000, &bad_key, 0),
        write_wr(3, WR_RDMA_WRITE, &src, 200, &dst, (1 << 14) - 100),
        write_wr(4, WR_RDMA_WRITE, &src, 100, &ro, 0),
    ] {
        a.post_send(0, &wr);
        let fa = a.h.dev.take_tx();
        deliver(&b, &fa);
        expect_bad += 1;
        assert!(b.h.dev.take_tx().is_empty());
        assert!(b.poll().is_empty());
        let (dropped, seq, no_wqe, bad) = drops(&mut b);
        assert_eq!((seq, no_wqe, bad), (0, 0, expect_bad));
        // Every packet of the message went (3000 bytes: 3 packets).
        assert_eq!(dropped, b.query_counters().rx_uc_dropped);
        assert_eq!(b.h.query_qp(b.qps[0].qpn).qp_state, QPS_RTS);
    }
    assert_eq!(drops(&mut b).0, 6);
    assert_eq!(b.bytes(dst.gpa, 1 << 14), vec![0xee; 1 << 14]);
    assert_eq!(b.bytes(ro.gpa, 100), vec![0; 100]);
    assert_eq!(a.poll().len(), 4);

    // No receive WQE: a SEND and a WRITE_IMM are dropped and counted.
    a.post_send(0, &send_wr(5, WR_SEND, &src, 0, 10));
    a.post_send(0, &write_wr(6, WR_RDMA_WRITE_IMM, &src, 10, &dst, 0));
    deliver(&b, &a.h.dev.take_tx());
    assert!(b.poll().is_empty());
    assert_eq!(drops(&mut b), (8, 0, 2, 4));
    // A SEND longer than the receive WQE: dropped, the WQE takes the next.
    b.post_recv(0, 77, &[(dst.va(0), 1500, dst.key)]);
    a.post_send(0, &send_wr(7, WR_SEND, &src, 0, 2000));
    a.post_send(0, &send_wr(8, WR_SEND, &src, 4096, 1500));
    deliver(&b, &a.h.dev.take_tx());
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(77, WC_RECV, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 1500);
    assert_eq!(b.bytes(dst.gpa, 1500), pattern(1 << 14, 9)[4096..5596]);
    // Its FIRST fitted (1024 of 1500 bytes), its LAST did not: one packet.
    assert_eq!(drops(&mut b), (9, 0, 2, 5));
    assert!(b.h.dev.take_tx().is_empty());
    assert!(b.h.take_events().is_empty());
    assert_eq!(b.h.query_qp(b.qps[0].qpn).qp_state, QPS_RTS);
}

/// A message far larger than the TX queue's room: the UC requester sends
/// as the queue drains (no window to bound it) and completes once the
/// last packet is out.
#[test]
fn a_message_larger_than_the_tx_queue_waits_for_room() {
    let (mut a, mut b) = uc_pair();
    let len = 2 << 20; // 2048 packets at MTU 1024
    let src = a.reg_mr(len, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(len, UC_ACCESS);
    let data = pattern(len as usize, 11);
    a.fill(src.gpa, &data);
    b.post_recv(0, 1, &[(dst.va(0), len as u32, dst.key)]);
    a.post_send(0, &write_wr(9, WR_RDMA_WRITE, &src, 100, &dst, 0));
    a.post_send(0, &send_wr(10, WR_SEND, &src, 0, len as u32));
    let first = a.h.dev.take_tx();
    // The WRITE and 511 packets of the SEND: the TX queue's room (512).
    assert_eq!(first.len(), 512);
    assert_eq!(cqes(&a.poll()), vec![(9, WC_RDMA_WRITE, WC_SUCCESS)]);
    deliver(&b, &first);
    let mut wire = Wire::new(1, Impair::default());
    wire.run(&a, &b, 100);
    assert_eq!(cqes(&a.poll()), vec![(10, WC_SEND, WC_SUCCESS)]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(1, WC_RECV, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, len as u32);
    assert!(b.bytes(dst.gpa, len as usize) == data);
    assert_eq!(drops(&mut b), (0, 0, 0, 0));
}

/// Both QPs on one device (loopback): a UC message larger than the
/// queue's room goes through the device's own pump.
#[test]
fn loopback_uc_pair_on_one_device() {
    let mut a = Node::new(36);
    a.create_qp(QPT_UC);
    a.create_qp(QPT_UC);
    let (q0, q1) = (a.qps[0].qpn, a.qps[1].qpn);
    let (mac, gid) = (a.mac, ipv4_gid(a.ip));
    a.connect_uc(0, q1, mac, gid);
    a.connect_uc(1, q0, mac, gid);
    let len = 1 << 20;
    let src = a.reg_mr(len, ACCESS_LOCAL_WRITE);
    let dst = a.reg_mr(len, UC_ACCESS);
    let data = pattern(len as usize, 13);
    a.fill(src.gpa, &data);
    a.post_recv(1, 2, &[(dst.va(0), len as u32, dst.key)]);
    let mut wr = send_wr(1, WR_SEND_IMM, &src, 0, len as u32);
    wr.imm = [5, 6, 7, 8];
    a.post_send(0, &wr);
    for _ in 0..100 {
        if a.h.dev.next_timer().is_none() {
            break;
        }
        a.h.dev.tick(0);
    }
    assert!(a.h.dev.take_tx().is_empty());
    let c = a.poll();
    assert_eq!(
        cqes(&c),
        vec![(1, WC_SEND, WC_SUCCESS), (2, WC_RECV, WC_SUCCESS)]
    );
    assert_eq!(c[1].byte_len, len as u32);
    assert_eq!(c[1].imm_data.to_le_bytes(), [5, 6, 7, 8]);
    assert!(a.bytes(dst.gpa, len as usize) == data);
}

/// The UC rows of ib_core's `qp_state_table`: RTR needs AV, PATH_MTU,
/// DEST_QPN, RQ_PSN; RTS needs SQ_PSN; the attributes of ACKs, retries
/// and READ resources are refused; REMOTE_READ/ATOMIC access is refused.
#[test]
fn uc_state_machine_takes_uc_attributes_only() {
    let mut a = Node::new(36);
    a.create_qp(QPT_UC);
    let qpn = a.qps[0].qpn;
    let q = a.h.query_qp(qpn);
    assert_eq!((q.qp_type, q.qp_state), (QPT_UC, QPS_RESET));
    let init = QP_ATTR_STATE | QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    let mut m = full_attr(qpn);
    m.av = av_v4();
    m.av.sgid_index = 3;
    m.av.dgid = ipv4_gid([10, 0, 1, 37]);
    m.path_mtu = MTU_1024;
    m.qp_state = QPS_INIT;
    m.attr_mask = init & !QP_ATTR_ACCESS_FLAGS;
    assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK);
    m.attr_mask = init;
    m.qp_access_flags = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_LOCAL_WRITE;
    assert_eq!(a.h.modify(m), STATUS_BAD_PARAM);
    m.qp_access_flags = ACCESS_REMOTE_ATOMIC | ACCESS_LOCAL_WRITE;
    assert_eq!(a.h.modify(m), STATUS_BAD_PARAM);
    m.qp_access_flags = ACCESS_REMOTE_WRITE | ACCESS_LOCAL_WRITE;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    let rtr = QP_ATTR_STATE | QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
    m.qp_state = QPS_RTR;
    for extra in [
        QP_ATTR_MAX_DEST_RD_ATOMIC,
        QP_ATTR_MIN_RNR_TIMER,
        QP_ATTR_QKEY,
    ] {
        m.attr_mask = rtr | extra;
        assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK, "{extra:#x}");
    }
    m.attr_mask = rtr & !QP_ATTR_RQ_PSN;
    assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK);
    m.attr_mask = rtr | QP_ATTR_PKEY_INDEX;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    m.qp_state = QPS_RTS;
    for extra in [
        QP_ATTR_TIMEOUT,
        QP_ATTR_RETRY_CNT,
        QP_ATTR_RNR_RETRY,
        QP_ATTR_MAX_QP_RD_ATOMIC,
    ] {
        m.attr_mask = QP_ATTR_STATE | QP_ATTR_SQ_PSN | extra;
        assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK, "{extra:#x}");
    }
    m.attr_mask = QP_ATTR_STATE;
    assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK);
    m.attr_mask = QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_ACCESS_FLAGS;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    let q = a.h.query_qp(qpn);
    assert_eq!((q.qp_type, q.qp_state), (QPT_UC, QPS_RTS));
    assert_eq!(q.qp_access_flags, ACCESS_REMOTE_WRITE | ACCESS_LOCAL_WRITE);
    // RTS -> SQD -> SQD (AV allowed, TIMEOUT not) -> RTS.
    m.qp_state = QPS_SQD;
    m.attr_mask = QP_ATTR_STATE;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    m.attr_mask = QP_ATTR_STATE | QP_ATTR_TIMEOUT;
    assert_eq!(a.h.modify(m), STATUS_BAD_ATTR_MASK);
    m.attr_mask = QP_ATTR_STATE | QP_ATTR_AV;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    m.qp_state = QPS_RTS;
    m.attr_mask = QP_ATTR_STATE;
    assert_eq!(a.h.modify(m), STATUS_SUCCESS);
    // A UC QP is not accepted before 1.5's QP type number: 4 is unknown.
    let (pdn, cqn) = (a.pdn, a.cqn);
    let mut c = a.h.qp_cmd(pdn, cqn, QPT_UC + 1, 0);
    c.max_inline = 0;
    assert_eq!(a.h.cmd(&c).0, STATUS_BAD_PARAM);
}

/// rxe's UC requester sets AckReq on the last packet of a message (and on
/// every few packets): the responder executes such packets like any other
/// and still answers nothing.
#[test]
fn rxe_style_ack_req_is_executed_and_not_answered() {
    let (mut a, mut b) = uc_pair();
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, UC_ACCESS);
    let msg = pattern(3000, 21);
    a.fill(src.gpa, &msg);
    b.post_recv(0, 5, &[(dst.va(0), 4096, dst.key)]);
    a.post_send(0, &send_wr(1, WR_SEND, &src, 0, 3000));
    let frames: Vec<Vec<u8>> =
        a.h.dev
            .take_tx()
            .iter()
            .map(|f| forged(f, |p| p.bth.ack_req = true))
            .collect();
    deliver(&b, &frames);
    assert!(b.h.dev.take_tx().is_empty());
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(5, WC_RECV, WC_SUCCESS)]);
    assert_eq!(b.bytes(dst.gpa, 3000), msg);
    let k = b.query_counters();
    assert_eq!((k.acks_sent, k.rx_uc_dropped, k.rx_bad_icrc), (0, 0, 0));
}
