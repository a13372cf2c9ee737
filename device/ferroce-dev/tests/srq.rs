// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues (device 1.6, device.rst "Shared receive queues"):
//! CREATE/DESTROY/MODIFY/QUERY_SRQ and CREATE_QP's `QP_FLAG_SRQ` with
//! every status they document; RC, UC and UD QPs taking receive WQEs from
//! one SRQ (multi-packet SENDs, WRITE with immediate, RNR on an empty SRQ),
//! the consumer index written back when a WQE is taken, the limit event,
//! a QP entering ERR (only its own WQE flushed, LAST_WQE_REACHED),
//! WQEs or records that are malformed, unreadable or too far ahead, and
//! RESIZE_SRQ (every status; the WQEs not taken yet, copied by software to
//! the same indices of the new ring, taken from there; the consumer index
//! across the resize and the 16-bit wrap; the armed limit; the old ring
//! never read again).

mod common;
#[path = "common/holed.rs"]
mod holed;
#[path = "common/recording.rs"]
mod recording;

use std::sync::Arc;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{decode, op};
use ferroce_dev::{FakeMemory, GuestMemory, Limits};
use holed::HoledMemory;
use recording::RecordingMemory;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
/// A key no MR has.
const BAD_KEY: u32 = 0x00ff_ff42;

/// A recognisable pattern of `len` bytes.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

fn send_wr(wr_id: u64, m: &MrInfo, off: u64, len: u32) -> SendWr {
    SendWr {
        wr_id,
        opcode: WR_SEND,
        flags: WQE_SIGNALED,
        sges: vec![(m.va(off), len, m.key)],
        ..SendWr::default()
    }
}

fn write_imm_wr(wr_id: u64, m: &MrInfo, len: u32, peer: &MrInfo, off: u64) -> SendWr {
    SendWr {
        opcode: WR_RDMA_WRITE_IMM,
        imm: [1, 2, 3, 4],
        remote_addr: peer.va(off),
        rkey: peer.key,
        ..send_wr(wr_id, m, 0, len)
    }
}

/// (wr_id, opcode, status) of CQEs.
fn cqes(c: &[Cqe]) -> Vec<(u64, u8, u8)> {
    c.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect()
}

/// (qpn, wqe_idx) of CQEs.
fn places(c: &[Cqe]) -> Vec<(u32, u16)> {
    c.iter().map(|c| (c.qpn, c.wqe_idx)).collect()
}

fn deliver(to: &Node, frames: &[Vec<u8>]) {
    to.h.dev.receive_batch(frames.iter().map(|f| f.as_slice()));
}

/// Frames for QP `qpn`, in order.
fn frames_to(frames: &[Vec<u8>], qpn: u32) -> Vec<Vec<u8>> {
    frames
        .iter()
        .filter(|f| decode(f).unwrap().bth.dest_qp == qpn)
        .cloned()
        .collect()
}

fn run(a: &Node, b: &Node) {
    let rounds = Wire::new(1, Impair::default()).run(a, b, 100_000);
    assert!(rounds < 100_000, "the wire never went quiet");
}

/// `rounds` rounds of frames both ways, the clock moved to the next timer
/// after each (an RNR wait), without running until quiet.
fn rounds(a: &Node, b: &Node, n: usize) {
    for _ in 0..n {
        deliver(b, &a.h.dev.take_tx());
        deliver(a, &b.h.dev.take_tx());
        if let Some(t) = a.h.dev.next_timer() {
            a.h.dev.tick(t);
        }
    }
}

/// QUERY_SRQ's outputs: (limit, depth, ci).
fn query_srq(h: &mut Harness, srqn: u32) -> (u32, u32, u32) {
    let mut c = CmdQuerySrq::zeroed();
    c.hdr.opcode = CMD_QUERY_SRQ;
    c.srqn = srqn;
    let (status, out) = h.cmd(&c);
    assert_eq!(status, STATUS_SUCCESS);
    (out[SRQ_OUT_LIMIT], out[SRQ_OUT_DEPTH], out[SRQ_OUT_CI])
}

fn modify_srq(h: &mut Harness, srqn: u32, limit: u32) -> u8 {
    let mut c = CmdModifySrq::zeroed();
    c.hdr.opcode = CMD_MODIFY_SRQ;
    c.srqn = srqn;
    c.limit = limit;
    h.cmd(&c).0
}

fn destroy_srq(h: &mut Harness, srqn: u32) -> u8 {
    let mut c = CmdDestroySrq::zeroed();
    c.hdr.opcode = CMD_DESTROY_SRQ;
    c.srqn = srqn;
    h.cmd(&c).0
}

fn destroy_qp(h: &mut Harness, qpn: u32) -> u8 {
    let mut c = CmdDestroyQp::zeroed();
    c.hdr.opcode = CMD_DESTROY_QP;
    c.qpn = qpn;
    h.cmd(&c).0
}

fn dealloc_pd(h: &mut Harness, pdn: u32) -> u8 {
    let mut c = CmdDeallocPd::zeroed();
    c.hdr.opcode = CMD_DEALLOC_PD;
    c.pdn = pdn;
    h.cmd(&c).0
}

/// The SRQ and QP events of `node` since the last call (no completions).
fn events(node: &mut Node) -> Vec<(u8, u32, u32)> {
    node.h.take_events()
}

/// Node 36 with a UD QP and an AH to node 37, whose UD QP receives from
/// an SRQ of `depth`; returns them and the AH.
fn ud_srq_pair(b: Node, depth: u32) -> (Node, Node, u32) {
    let mut a = Node::new(36);
    let mut b = b;
    a.create_qp(QPT_UD);
    let si = b.create_srq(depth, 0);
    b.create_srq_qp(QPT_UD, si);
    a.activate_ud(0, 0x1111);
    b.activate_ud(0, 0x1111);
    let ahn = a.create_ah(av_to(&b, NET_IPV4));
    (a, b, ahn)
}

/// A UD SEND of `len` bytes of `m` to node b's first QP.
fn datagram(a: &mut Node, b: &Node, ahn: u32, wr_id: u64, m: &MrInfo, len: u32) {
    let wr = SendWr {
        ud: Some((ahn, b.qps[0].qpn, 0x1111)),
        ..send_wr(wr_id, m, 0, len)
    };
    a.post_send(0, &wr);
    deliver(b, &a.h.dev.take_tx());
}

// ------------------------------------------------------------ commands

#[test]
fn version_1_6_advertises_srq() {
    let mut h = Harness::new();
    let minor = h.reg_r(REG_VERSION) & VERSION_MINOR_MASK;
    assert_eq!(h.reg_r(REG_VERSION), 1 << VERSION_MAJOR_SHIFT | minor);
    assert!(minor >= 6);
    assert_eq!(h.reg_r(REG_DEV_CAPS) & CAP_SRQ, CAP_SRQ);
    let caps = h.query_caps();
    assert_eq!(caps.device_caps, h.reg_r(REG_DEV_CAPS));
    assert_eq!(caps.fw_version, 1 << 32 | u64::from(minor) << 16);
}

/// CREATE_SRQ: every documented status, in the documented order; numbers
/// from FIRST_SRQN; the consumer index written to the record at once and
/// nothing written by a refused command; the table holds max_qp SRQs.
#[test]
fn create_srq_checks_every_field() {
    type Case = (Box<dyn Fn(&mut CmdCreateSrq)>, u8);
    let limits = Limits {
        max_qp: 2,
        ..Limits::default()
    };
    let mut h = Harness::with(limits, 16, 64);
    let pdn = h.alloc_pd();
    let (base, _) = h.srq_cmd(pdn, 64, 0);
    h.mem.write(base.dbrec_addr, &[0xaa; 8]).unwrap();
    let cases: Vec<Case> = vec![
        (Box::new(|c| c.hdr.flags = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved0[2] = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved1 = 1 << 63), STATUS_BAD_RESERVED),
        (Box::new(|c| c.buf.reserved = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.depth = 0), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 48), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 32768), STATUS_BAD_PARAM), // > max_qp_wr
        (Box::new(|c| c.wqe_shift = 4), STATUS_BAD_PARAM),
        (Box::new(|c| c.wqe_shift = 11), STATUS_BAD_PARAM),
        (Box::new(|c| c.limit = 65), STATUS_BAD_PARAM),
        (Box::new(|c| c.dbrec_addr += 4), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 128), STATUS_BAD_PARAM), // ring too small
        (Box::new(|c| c.buf.page_shift = 11), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.level = 3), STATUS_BAD_PARAM),
        (Box::new(|c| c.pdn = 99), STATUS_BAD_HANDLE),
        (Box::new(|c| c.pdn = 0), STATUS_BAD_HANDLE),
        (Box::new(|c| c.dbrec_addr = UNMAPPED), STATUS_DMA_ERROR),
        (Box::new(|c| c.buf.addr = UNMAPPED), STATUS_DMA_ERROR),
        // The first check that fails decides.
        (
            Box::new(|c| {
                c.reserved1 = 1;
                c.depth = 3;
            }),
            STATUS_BAD_RESERVED,
        ),
        (
            Box::new(|c| {
                c.limit = 100;
                c.pdn = 99;
            }),
            STATUS_BAD_PARAM,
        ),
        (
            Box::new(|c| {
                c.pdn = 99;
                c.dbrec_addr = UNMAPPED;
            }),
            STATUS_BAD_HANDLE,
        ),
    ];
    for (i, (f, status)) in cases.iter().enumerate() {
        let mut c = base;
        f(&mut c);
        assert_eq!(h.cmd(&c).0, *status, "case {i}");
    }
    assert!(h.dev.objects().srqs.is_empty());
    assert_eq!(h.mem.read_u32(base.dbrec_addr + 4), 0xaaaa_aaaa);
    // The limit may be the depth; the record's ci becomes 0, pi stays.
    let mut c = base;
    c.limit = 64;
    assert_eq!(h.ok(&c), FIRST_SRQN);
    assert_eq!(h.mem.read_u32(base.dbrec_addr + 4), 0);
    assert_eq!(h.mem.read_u32(base.dbrec_addr), 0xaaaa_aaaa);
    assert_eq!(query_srq(&mut h, FIRST_SRQN), (64, 64, 0));
    // A one-WQE SRQ with a 1 KiB stride.
    let (mut one, _) = h.srq_cmd(pdn, 1, 1);
    one.wqe_shift = RQ_WQE_SHIFT_MAX;
    assert_eq!(h.ok(&one), FIRST_SRQN + 1);
    // max_qp SRQs: the table is full.
    let (third, _) = h.srq_cmd(pdn, 8, 0);
    h.expect(&third, STATUS_NO_RESOURCES);
    assert_eq!(destroy_srq(&mut h, FIRST_SRQN), STATUS_SUCCESS);
    assert_eq!(h.ok(&third), FIRST_SRQN);
}

/// DESTROY_SRQ, MODIFY_SRQ and QUERY_SRQ: statuses and results; an SRQ
/// with a QP attached cannot be destroyed, a PD with an SRQ not freed.
#[test]
fn destroy_modify_and_query_srq() {
    let mut h = Harness::new();
    let (pdn, cqn, _) = h.setup_qp(QPT_RC);
    let (c, _) = h.srq_cmd(pdn, 16, 4);
    let srqn = h.ok(&c);
    assert_eq!(query_srq(&mut h, srqn), (4, 16, 0));

    let mut q = CmdQuerySrq::zeroed();
    q.hdr.opcode = CMD_QUERY_SRQ;
    q.srqn = srqn;
    q.reserved = 1;
    h.expect(&q, STATUS_BAD_RESERVED);
    for bad in [0, srqn + 1, 1 << 24] {
        q.reserved = 0;
        q.srqn = bad;
        h.expect(&q, STATUS_BAD_HANDLE);
        assert_eq!(modify_srq(&mut h, bad, 1), STATUS_BAD_HANDLE);
        assert_eq!(destroy_srq(&mut h, bad), STATUS_BAD_HANDLE);
    }

    assert_eq!(modify_srq(&mut h, srqn, 17), STATUS_BAD_PARAM);
    assert_eq!(query_srq(&mut h, srqn), (4, 16, 0));
    assert_eq!(modify_srq(&mut h, srqn, 16), STATUS_SUCCESS);
    assert_eq!(query_srq(&mut h, srqn), (16, 16, 0));
    assert_eq!(modify_srq(&mut h, srqn, 0), STATUS_SUCCESS);
    assert_eq!(query_srq(&mut h, srqn), (0, 16, 0));

    let mut d = CmdDestroySrq::zeroed();
    d.hdr.opcode = CMD_DESTROY_SRQ;
    d.srqn = srqn;
    d.reserved = 1;
    h.expect(&d, STATUS_BAD_RESERVED);

    // Busy while a QP takes from it.
    let c = h.srq_qp_cmd(pdn, cqn, QPT_UD, srqn);
    let qpn = h.ok(&c);
    assert_eq!(destroy_srq(&mut h, srqn), STATUS_BUSY);
    assert_eq!(destroy_qp(&mut h, qpn), STATUS_SUCCESS);

    // A PD that only an SRQ uses is busy too.
    let pd2 = h.alloc_pd();
    let (c2, _) = h.srq_cmd(pd2, 8, 0);
    let srq2 = h.ok(&c2);
    assert_eq!(dealloc_pd(&mut h, pd2), STATUS_BUSY);
    assert_eq!(destroy_srq(&mut h, srq2), STATUS_SUCCESS);
    assert_eq!(dealloc_pd(&mut h, pd2), STATUS_SUCCESS);

    assert_eq!(destroy_srq(&mut h, srqn), STATUS_SUCCESS);
    assert_eq!(destroy_srq(&mut h, srqn), STATUS_BAD_HANDLE);
    q.srqn = srqn;
    h.expect(&q, STATUS_BAD_HANDLE);
    assert!(h.dev.objects().srqs.is_empty());
}

/// CREATE_QP with QP_FLAG_SRQ: RC, UC and UD only, no RQ of its own, an
/// existing SRQ of the QP's PD; without the flag srqn must be 0, and the
/// new reserved field always. The RQ doorbell of such a QP is malformed.
#[test]
fn create_qp_on_an_srq() {
    type Case = (Box<dyn Fn(&mut CmdCreateQp)>, u8);
    let mut h = Harness::new();
    let (pdn, cqn, plain) = h.setup_qp(QPT_RC);
    let (c, _) = h.srq_cmd(pdn, 16, 0);
    let srqn = h.ok(&c);
    let pd2 = h.alloc_pd();
    let (c2, _) = h.srq_cmd(pd2, 16, 0);
    let other_pd_srq = h.ok(&c2);
    let with_rq = h.qp_cmd(pdn, cqn, QPT_RC, 0);
    let base = h.srq_qp_cmd(pdn, cqn, QPT_RC, srqn);
    let cases: Vec<Case> = vec![
        (Box::new(|c| c.reserved = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.flags |= 0x80), STATUS_BAD_RESERVED),
        (Box::new(|c| c.flags = 0), STATUS_BAD_RESERVED), // srqn without the flag
        (Box::new(|c| c.qp_type = QPT_GSI), STATUS_BAD_PARAM),
        (
            Box::new(move |c| {
                c.rq_depth = with_rq.rq_depth;
                c.rq_wqe_shift = with_rq.rq_wqe_shift;
                c.rq_buf = with_rq.rq_buf;
                c.rq_dbrec_addr = with_rq.rq_dbrec_addr;
            }),
            STATUS_BAD_PARAM,
        ),
        (Box::new(|c| c.rq_wqe_shift = 6), STATUS_BAD_PARAM),
        (
            Box::new(move |c| c.rq_dbrec_addr = with_rq.rq_dbrec_addr),
            STATUS_BAD_PARAM,
        ),
        (
            Box::new(move |c| c.rq_buf = with_rq.rq_buf),
            STATUS_BAD_PARAM,
        ),
        (Box::new(|c| c.srqn = 0), STATUS_BAD_HANDLE),
        (Box::new(|c| c.srqn = 77), STATUS_BAD_HANDLE),
        (Box::new(move |c| c.srqn = other_pd_srq), STATUS_BAD_PARAM),
        // BAD_PARAM of the fields comes before BAD_HANDLE of the SRQ.
        (
            Box::new(|c| {
                c.qp_type = QPT_GSI;
                c.srqn = 77;
            }),
            STATUS_BAD_PARAM,
        ),
    ];
    for (i, (f, status)) in cases.iter().enumerate() {
        let mut c = base;
        f(&mut c);
        assert_eq!(h.cmd(&c).0, *status, "case {i}");
    }
    let mut c = with_rq;
    c.reserved = 1;
    h.expect(&c, STATUS_BAD_RESERVED);

    let mut qpns = Vec::new();
    for t in [QPT_RC, QPT_UC, QPT_UD] {
        let mut c = base;
        c.qp_type = t;
        qpns.push(h.ok(&c));
    }
    let objects = h.dev.objects();
    for qpn in &qpns {
        let qp = objects.qps.iter().find(|q| q.handle == *qpn).unwrap();
        assert_eq!((qp.obj.srqn, qp.obj.rq_depth), (srqn, 0));
    }
    let own = objects.qps.iter().find(|q| q.handle == plain).unwrap();
    assert_eq!(own.obj.srqn, 0);

    // An RQ doorbell for a QP that has no RQ is refused and counted.
    let qpn = qpns[0];
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    assert_eq!(h.modify(attr_with(qpn, QPS_INIT, init)), STATUS_SUCCESS);
    let before = h.dev.counters().hw;
    h.db(0, DB_RQ, ferroce_dev::doorbell::qp_db(qpn, 1));
    let after = h.dev.counters().hw;
    assert_eq!(after.malformed_doorbells, before.malformed_doorbells + 1);
    assert_eq!(after.rq_doorbells, before.rq_doorbells);
}

/// The SRQs are in the objects dump (device and control socket) and a
/// device reset removes them like every other object.
#[test]
fn srqs_are_dumped_and_reset() {
    let mut n = Node::new(36);
    let si = n.create_srq(8, 2);
    let srqn = n.srqs[si].srqn;
    let objects = n.h.dev.objects();
    assert_eq!(objects.srqs.len(), 1);
    let s = &objects.srqs[0];
    assert_eq!((s.handle, s.obj.pdn, s.obj.depth), (srqn, n.pdn, 8));
    assert_eq!(
        (s.obj.limit, s.obj.ci, s.obj.dbrec),
        (2, 0, n.srqs[si].dbrec)
    );
    let v = ferroce_dev::ctl::handle_line(&n.h.dev, r#"{"cmd":"objects"}"#);
    assert_eq!(v["ok"], true);
    assert_eq!(v["data"]["srqs"][0]["handle"], srqn);
    assert_eq!(v["data"]["srqs"][0]["depth"], 8);
    n.h.reg_w(REG_DEV_CTRL, CTRL_RESET);
    assert!(n.h.dev.objects().srqs.is_empty());
}

// ------------------------------------------------------------ RC

/// Two RC QPs take SENDs from one SRQ: a WQE is taken when the first
/// packet of a message arrives (ci written back before the message
/// completes), in ring order whichever QP needs it, so the completions come
/// out of index order; multi-packet SENDs land byte-exact.
#[test]
fn two_rc_qps_share_one_srq() {
    let (mut a, mut b) = rc_srq_pair(2, 16, 0);
    let (b0, b1) = (b.qps[0].qpn, b.qps[1].qpn);
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let m0 = pattern(5000, 1);
    let m1 = pattern(300, 2);
    a.fill(src.gpa, &m0);
    a.fill(src.gpa + 8192, &m1);
    b.fill(dst.gpa, &[0xee; 1 << 16]);
    for j in 0..4 {
        b.post_srq_recv(0, 100 + j, &[(dst.va(j * 8192), 8192, dst.key)]);
    }
    assert_eq!(b.srq_ci(0), 0);

    a.post_send(0, &send_wr(1, &src, 0, 5000));
    a.post_send(1, &send_wr(2, &src, 8192, 300));
    let fa = a.h.dev.take_tx();
    let to0 = frames_to(&fa, b0);
    let to1 = frames_to(&fa, b1);
    assert_eq!(to0.len(), 5);
    assert_eq!(decode(&to0[0]).unwrap().bth.opcode, op::RC_SEND_FIRST);
    // The FIRST packet takes WQE 0: ci is written back at once.
    deliver(&b, &to0[..1]);
    assert!(b.poll().is_empty());
    assert_eq!(b.srq_ci(0), 1);
    assert_eq!(query_srq(&mut b.h, b.srqs[0].srqn), (0, 16, 1));
    // QP 1's message takes WQE 1 and completes first.
    deliver(&b, &to1);
    assert_eq!(b.srq_ci(0), 2);
    deliver(&b, &to0[1..]);
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![(101, WC_RECV, WC_SUCCESS), (100, WC_RECV, WC_SUCCESS)]
    );
    assert_eq!(places(&c), vec![(b1, 1), (b0, 0)]);
    assert_eq!((c[0].byte_len, c[1].byte_len), (300, 5000));
    assert_eq!((c[0].src_qp, c[1].src_qp), (a.qps[1].qpn, a.qps[0].qpn));
    assert_eq!(b.bytes(dst.gpa, 5000), m0);
    assert_eq!(b.bytes(dst.gpa + 5000, 100), vec![0xee; 100]);
    assert_eq!(b.bytes(dst.gpa + 8192, 300), m1);
    run(&a, &b);
    let mut got = cqes(&a.poll());
    got.sort();
    assert_eq!(
        got,
        vec![(1, WC_SEND, WC_SUCCESS), (2, WC_SEND, WC_SUCCESS)]
    );

    // Two more, over the wire: WQEs 2 and 3, and the SRQ is empty.
    a.post_send(1, &send_wr(3, &src, 8192, 300));
    run(&a, &b);
    a.post_send(0, &send_wr(4, &src, 0, 5000));
    run(&a, &b);
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![(102, WC_RECV, WC_SUCCESS), (103, WC_RECV, WC_SUCCESS)]
    );
    assert_eq!(places(&c), vec![(b1, 2), (b0, 3)]);
    assert_eq!(b.bytes(dst.gpa + 2 * 8192, 300), m1);
    assert_eq!(b.bytes(dst.gpa + 3 * 8192, 5000), m0);
    assert_eq!(b.srq_ci(0), 4);
    assert_eq!(query_srq(&mut b.h, b.srqs[0].srqn), (0, 16, 4));
    assert_eq!(a.poll().len(), 2);
    assert!(events(&mut b).is_empty());
}

/// An RDMA WRITE with immediate (several packets) consumes an SRQ WQE: its
/// wr_id and index, the data where the WRITE put it.
#[test]
fn write_with_immediate_consumes_an_srq_wqe() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 0);
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    let msg = pattern(3000, 3);
    a.fill(src.gpa, &msg);
    b.post_srq_recv(0, 7, &[]);
    a.post_send(0, &write_imm_wr(1, &src, 3000, &dst, 100));
    run(&a, &b);
    assert_eq!(cqes(&a.poll()), vec![(1, WC_RDMA_WRITE, WC_SUCCESS)]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(7, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(b.qps[0].qpn, 0)]);
    assert_eq!(c[0].byte_len, 3000);
    assert_eq!(c[0].imm_data.to_le_bytes(), [1, 2, 3, 4]);
    assert_eq!(c[0].flags & CQE_WITH_IMM, CQE_WITH_IMM);
    assert_eq!(b.bytes(dst.gpa + 100, 3000), msg);
    assert_eq!(b.srq_ci(0), 1);
}

/// A SEND, and a WRITE with immediate, that find the SRQ empty are RNR
/// NAKed and succeed once software posts (the record alone: an SRQ has no
/// doorbell).
#[test]
fn rnr_while_the_srq_is_empty_then_success() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 0);
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ALL_ACCESS);
    a.fill(src.gpa, &pattern(200, 4));
    a.post_send(0, &send_wr(1, &src, 0, 200));
    rounds(&a, &b, 3);
    assert!(b.h.dev.counters().data.rnr_naks_sent >= 3);
    assert!(a.poll().is_empty());
    assert!(b.poll().is_empty());
    assert_eq!(b.srq_ci(0), 0);
    let rq_doorbells = b.h.dev.counters().hw.rq_doorbells;
    b.post_srq_recv(0, 10, &[(dst.va(0), 4096, dst.key)]);
    run(&a, &b);
    assert_eq!(cqes(&a.poll()), vec![(1, WC_SEND, WC_SUCCESS)]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(10, WC_RECV, WC_SUCCESS)]);
    assert_eq!((c[0].wqe_idx, c[0].byte_len), (0, 200));
    assert_eq!(b.bytes(dst.gpa, 200), pattern(200, 4));

    let naks = b.h.dev.counters().data.rnr_naks_sent;
    a.post_send(0, &write_imm_wr(2, &src, 64, &dst, 4096));
    rounds(&a, &b, 2);
    assert!(b.h.dev.counters().data.rnr_naks_sent >= naks + 2);
    // Nothing of the WRITE was placed without its receive WQE.
    assert_eq!(b.bytes(dst.gpa + 4096, 64), vec![0; 64]);
    b.post_srq_recv(0, 11, &[]);
    run(&a, &b);
    assert_eq!(cqes(&a.poll()), vec![(2, WC_RDMA_WRITE, WC_SUCCESS)]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(11, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]);
    assert_eq!(c[0].wqe_idx, 1);
    assert_eq!(b.bytes(dst.gpa + 4096, 64), pattern(200, 4)[..64]);
    assert_eq!(b.srq_ci(0), 2);
    assert_eq!(b.h.dev.counters().hw.rq_doorbells, rq_doorbells);
}

/// SRQ_LIMIT_REACHED: armed at CREATE_SRQ, posted once when a take leaves
/// fewer WQEs than the limit (data = the limit), then disarmed (QUERY_SRQ
/// reads 0) until MODIFY_SRQ arms it again; MODIFY_SRQ 0 disarms.
#[test]
fn the_limit_event_fires_once_and_is_rearmed() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 3);
    let srqn = b.srqs[0].srqn;
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    for j in 0..6 {
        b.post_srq_recv(0, 100 + j, &[(dst.va(j * 4096), 4096, dst.key)]);
    }
    let limit_events = |b: &mut Node| -> Vec<(u8, u32, u32)> {
        events(b)
            .into_iter()
            .filter(|e| e.0 == EQE_SRQ_LIMIT_REACHED)
            .collect()
    };
    let one = |a: &mut Node, b: &mut Node, id: u64| {
        a.post_send(0, &send_wr(id, &src, 0, 10));
        run(a, b);
        assert_eq!(cqes(&b.poll()), vec![(100 + id, WC_RECV, WC_SUCCESS)]);
    };
    // 5, 4, 3 left: not fewer than 3.
    for id in 0..3 {
        one(&mut a, &mut b, id);
        assert!(limit_events(&mut b).is_empty(), "take {id}");
    }
    assert_eq!(query_srq(&mut b.h, srqn), (3, 8, 3));
    // 2 left: the event, once, and the limit is disarmed.
    one(&mut a, &mut b, 3);
    assert_eq!(limit_events(&mut b), vec![(EQE_SRQ_LIMIT_REACHED, srqn, 3)]);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 8, 4));
    one(&mut a, &mut b, 4);
    assert!(limit_events(&mut b).is_empty());
    // Re-armed below what is left: the next take fires it.
    assert_eq!(modify_srq(&mut b.h, srqn, 2), STATUS_SUCCESS);
    one(&mut a, &mut b, 5);
    assert_eq!(limit_events(&mut b), vec![(EQE_SRQ_LIMIT_REACHED, srqn, 2)]);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 8, 6));
    // Armed and disarmed again: nothing.
    for j in 6..8 {
        b.post_srq_recv(0, 100 + j, &[(dst.va(j * 4096), 4096, dst.key)]);
    }
    assert_eq!(modify_srq(&mut b.h, srqn, 8), STATUS_SUCCESS);
    assert_eq!(modify_srq(&mut b.h, srqn, 0), STATUS_SUCCESS);
    one(&mut a, &mut b, 6);
    one(&mut a, &mut b, 7);
    assert!(limit_events(&mut b).is_empty());
    assert_eq!(query_srq(&mut b.h, srqn), (0, 8, 8));
    assert_eq!(b.srqs[0].pi, 8);
    assert_eq!(b.srq_ci(0), 8);
}

/// A QP attached to an SRQ that enters ERR flushes the WQE it took for a
/// message under way and no other, and posts QP_LAST_WQE_REACHED; the
/// other QP goes on taking WQEs. A QP failing on a SEND too long for its
/// WQE completes that WQE in error, QP_FATAL then LAST_WQE_REACHED.
#[test]
fn a_qp_in_err_flushes_only_the_wqe_it_took() {
    let (mut a, mut b) = rc_srq_pair(2, 16, 0);
    let (b0, b1) = (b.qps[0].qpn, b.qps[1].qpn);
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    b.post_srq_recv(0, 100, &[(dst.va(0), 8192, dst.key)]);
    b.post_srq_recv(0, 101, &[(dst.va(8192), 8192, dst.key)]);
    b.post_srq_recv(0, 102, &[(dst.va(16_384), 100, dst.key)]);
    b.post_srq_recv(0, 103, &[(dst.va(24_576), 8192, dst.key)]);
    a.post_send(0, &send_wr(1, &src, 0, 5000));
    let fa = a.h.dev.take_tx();
    deliver(&b, &fa[..1]);
    assert_eq!(b.srq_ci(0), 1);
    assert!(events(&mut b).is_empty());

    assert_eq!(b.h.modify(attr_with(b0, QPS_ERR, 0)), STATUS_SUCCESS);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(100, WC_RECV, WC_WR_FLUSH_ERR)]);
    assert_eq!(places(&c), vec![(b0, 0)]);
    assert_eq!(events(&mut b), vec![(EQE_QP_LAST_WQE_REACHED, b0, 0)]);
    assert_eq!(b.srq_ci(0), 1);
    assert_eq!(query_srq(&mut b.h, b.srqs[0].srqn).2, 1);

    // QP 1 takes the next one.
    a.post_send(1, &send_wr(2, &src, 0, 100));
    run(&a, &b);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(101, WC_RECV, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(b1, 1)]);
    // a's QP 0 never heard back.
    let ca = a.poll();
    assert!(cqes(&ca).contains(&(2, WC_SEND, WC_SUCCESS)));
    assert!(cqes(&ca).contains(&(1, WC_SEND, WC_RETRY_EXC_ERR)));

    // 200 bytes into WQE 2's 100: LOC_LEN_ERR, QP 1 to ERR, WQE 3 stays.
    a.post_send(1, &send_wr(3, &src, 0, 200));
    run(&a, &b);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(102, WC_RECV, WC_LOC_LEN_ERR)]);
    assert_eq!(places(&c), vec![(b1, 2)]);
    assert_eq!(b.h.dev.qp_state(b1), Some(QPS_ERR));
    assert_eq!(
        events(&mut b),
        vec![(EQE_QP_FATAL, b1, 0), (EQE_QP_LAST_WQE_REACHED, b1, 0)]
    );
    assert_eq!(cqes(&a.poll()), vec![(3, WC_SEND, WC_REM_INV_REQ_ERR)]);
    assert_eq!(b.srq_ci(0), 3);
    assert_eq!(b.srqs[0].pi, 4);
}

/// An RC SEND that the responder refuses half way (a second FIRST packet
/// while the SEND is under way: invalid request, not the WQE's fault) moves
/// the QP to ERR; the WQE it took completes WR_FLUSH_ERR, the next stays.
#[test]
fn an_rc_send_refused_half_way_flushes_its_wqe() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 0);
    let b0 = b.qps[0].qpn;
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    b.post_srq_recv(0, 60, &[(dst.va(0), 8192, dst.key)]);
    b.post_srq_recv(0, 61, &[(dst.va(8192), 8192, dst.key)]);
    a.post_send(0, &send_wr(1, &src, 0, 3000));
    let fa = a.h.dev.take_tx();
    deliver(&b, &fa[..1]);
    assert_eq!(b.srq_ci(0), 1);
    let mut p = decode(&fa[1]).unwrap();
    assert_eq!(p.bth.opcode, op::RC_SEND_MIDDLE);
    p.bth.opcode = op::RC_SEND_FIRST;
    let mut bad = Vec::new();
    assert!(ferroce_dev::wire::encode(&p, &mut bad));
    deliver(&b, &[bad]);
    assert_eq!(b.h.dev.qp_state(b0), Some(QPS_ERR));
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(60, WC_RECV, WC_WR_FLUSH_ERR)]);
    assert_eq!(places(&c), vec![(b0, 0)]);
    assert_eq!(
        events(&mut b),
        vec![(EQE_QP_FATAL, b0, 0), (EQE_QP_LAST_WQE_REACHED, b0, 0)]
    );
    assert_eq!(b.srq_ci(0), 1);
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 1);
}

/// A malformed SRQ WQE is taken and completes in error as an RQ WQE
/// would: the SEND is NAKed remote operational error and the QP fails.
#[test]
fn a_malformed_srq_wqe_fails_the_rc_send() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 0);
    let b0 = b.qps[0].qpn;
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    // Four SGEs do not fit the 64-byte stride.
    let mut raw = rq_wqe(55, &[]);
    raw[8] = 4;
    b.write_srq_wqe(0, &raw);
    b.set_srq_pi(0, 1);
    a.post_send(0, &send_wr(1, &src, 0, 10));
    run(&a, &b);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(55, WC_RECV, WC_LOC_LEN_ERR)]);
    assert_eq!(places(&c), vec![(b0, 0)]);
    assert_eq!(b.srq_ci(0), 1);
    assert_eq!(
        events(&mut b),
        vec![(EQE_QP_FATAL, b0, 0), (EQE_QP_LAST_WQE_REACHED, b0, 0)]
    );
    assert_eq!(cqes(&a.poll()), vec![(1, WC_SEND, WC_REM_OP_ERR)]);
}

// ------------------------------------------------------------ UC

/// A UC QP on an SRQ: a message that loses a packet after its WQE was
/// taken leaves the WQE with the QP, and the next message fills it (ci
/// moved once); a WRITE with immediate takes the next WQE; with the SRQ
/// empty a message is dropped and counted; entering ERR flushes a WQE the
/// QP holds.
#[test]
fn uc_qp_on_an_srq() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_UC);
    let si = b.create_srq(8, 0);
    b.create_srq_qp(QPT_UC, si);
    let (aq, bq) = (a.qps[0].qpn, b.qps[0].qpn);
    let (am, bm) = (a.mac, b.mac);
    a.connect_uc(0, bq, bm, ipv4_gid(b.ip));
    b.connect_uc(0, aq, am, ipv4_gid(a.ip));
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
    let m1 = pattern(3000, 5);
    let m2 = pattern(2500, 6);
    a.fill(src.gpa, &m1);
    a.fill(src.gpa + 8192, &m2);
    b.post_srq_recv(si, 10, &[(dst.va(0), 4096, dst.key)]);
    b.post_srq_recv(si, 11, &[(dst.va(4096), 4096, dst.key)]);

    a.post_send(0, &send_wr(1, &src, 0, 3000));
    a.post_send(0, &send_wr(2, &src, 8192, 2500));
    let mut fa = a.h.dev.take_tx();
    assert_eq!(fa.len(), 6);
    fa.remove(1); // message 1's MIDDLE
    deliver(&b, &fa[..2]);
    // Message 1 took WQE 0 and was dropped: the QP keeps the WQE.
    assert_eq!(b.srq_ci(si), 1);
    assert!(b.poll().is_empty());
    deliver(&b, &fa[2..]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(10, WC_RECV, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(bq, 0)]);
    assert_eq!(c[0].byte_len, 2500);
    assert_eq!(b.bytes(dst.gpa, 2500), m2);
    assert_eq!(b.srq_ci(si), 1);

    // WRITE with immediate: WQE 1.
    a.post_send(0, &write_imm_wr(3, &src, 1500, &dst, 20_000));
    deliver(&b, &a.h.dev.take_tx());
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(11, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(bq, 1)]);
    assert_eq!(b.bytes(dst.gpa + 20_000, 1500), m1[..1500]);
    assert_eq!(b.srq_ci(si), 2);

    // The SRQ is empty: a SEND and a WRITE with immediate are dropped.
    let before = b.h.dev.counters().data.rx_uc_no_wqe;
    a.post_send(0, &send_wr(4, &src, 0, 100));
    a.post_send(0, &write_imm_wr(5, &src, 100, &dst, 30_000));
    deliver(&b, &a.h.dev.take_tx());
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_uc_no_wqe, before + 2);
    assert_eq!(b.bytes(dst.gpa + 30_000, 100), vec![0; 100]);

    // A message that takes WQE 2 and loses its MIDDLE (the QP holds the
    // WQE), then ERR: the held WQE is flushed, WQE 3 stays in the SRQ.
    b.post_srq_recv(si, 12, &[(dst.va(8192), 4096, dst.key)]);
    b.post_srq_recv(si, 13, &[(dst.va(12_288), 4096, dst.key)]);
    a.post_send(0, &send_wr(6, &src, 0, 3000));
    let fa = a.h.dev.take_tx();
    deliver(&b, &[fa[0].clone(), fa[2].clone()]);
    assert!(b.poll().is_empty());
    assert_eq!(b.srq_ci(si), 3);
    assert_eq!(b.h.modify(attr_with(bq, QPS_ERR, 0)), STATUS_SUCCESS);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(12, WC_RECV, WC_WR_FLUSH_ERR)]);
    assert_eq!(places(&c), vec![(bq, 2)]);
    assert_eq!(events(&mut b), vec![(EQE_QP_LAST_WQE_REACHED, bq, 0)]);
    assert_eq!(b.srq_ci(si), 3);
}

// ------------------------------------------------------------ UD

/// A UD QP on an SRQ: datagrams land with their GRH in SRQ WQEs (index
/// and QP in the CQE); without a WQE one is dropped and counted; a
/// malformed WQE or one with a refused SGE is taken and completes in
/// error, the QP goes on; a `pi` more than depth ahead takes nothing.
#[test]
fn ud_qp_on_an_srq() {
    let (mut a, mut b, ahn) = ud_srq_pair(Node::new(37), 4);
    let bq = b.qps[0].qpn;
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let msg = pattern(256, 7);
    a.fill(src.gpa, &msg);

    datagram(&mut a, &b, ahn, 1, &src, 256);
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, 1);
    assert_eq!(b.srq_ci(0), 0);

    b.post_srq_recv(
        0,
        20,
        &[(dst.va(0), 40, dst.key), (dst.va(100), 1000, dst.key)],
    );
    b.post_srq_recv(0, 21, &[(dst.va(4096), 4096, dst.key)]);
    datagram(&mut a, &b, ahn, 2, &src, 256);
    datagram(&mut a, &b, ahn, 3, &src, 100);
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![(20, WC_RECV, WC_SUCCESS), (21, WC_RECV, WC_SUCCESS)]
    );
    assert_eq!(places(&c), vec![(bq, 0), (bq, 1)]);
    assert_eq!((c[0].byte_len, c[1].byte_len), (40 + 256, 40 + 100));
    assert_eq!(c[0].src_qp, a.qps[0].qpn);
    assert_eq!(c[0].flags & CQE_GRH, CQE_GRH);
    assert_eq!(b.bytes(dst.gpa + 100, 256), msg);
    assert_eq!(b.bytes(dst.gpa + 4096 + 40, 100), msg[..100]);
    assert_eq!(b.srq_ci(0), 2);

    // Malformed (more SGEs than the stride holds), then a refused key.
    let mut raw = rq_wqe(22, &[]);
    raw[8] = 4;
    b.write_srq_wqe(0, &raw);
    b.write_srq_wqe(0, &rq_wqe(23, &[(dst.va(0), 4096, BAD_KEY)]));
    b.post_srq_recv(0, 24, &[(dst.va(8192), 4096, dst.key)]);
    for id in 4..7 {
        datagram(&mut a, &b, ahn, id, &src, 64);
    }
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![
            (22, WC_RECV, WC_LOC_LEN_ERR),
            (23, WC_RECV, WC_LOC_PROT_ERR),
            (24, WC_RECV, WC_SUCCESS)
        ]
    );
    assert_eq!(places(&c), vec![(bq, 2), (bq, 3), (bq, 4)]);
    assert_eq!(b.h.dev.qp_state(bq), Some(QPS_RTS));
    assert_eq!(b.srq_ci(0), 5);

    // pi more than depth (4) ahead of ci: nothing is taken.
    for j in 0..4 {
        b.write_srq_wqe(0, &rq_wqe(30 + j, &[(dst.va(4096 * j), 4096, dst.key)]));
    }
    b.set_srq_pi(0, 5 + 5);
    let dropped = b.h.dev.counters().data.rx_ud_no_wqe;
    datagram(&mut a, &b, ahn, 7, &src, 64);
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, dropped + 1);
    assert_eq!(b.srq_ci(0), 5);
    b.set_srq_pi(0, 5 + 4);
    datagram(&mut a, &b, ahn, 8, &src, 64);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(30, WC_RECV, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(bq, 5)]);
    assert_eq!(b.srq_ci(0), 6);
}

/// An SRQ record that cannot be read takes nothing (counted in bad_dma);
/// a WQE that cannot be read is taken and completes LOC_QP_OP_ERR.
#[test]
fn unreadable_srq_record_or_wqe() {
    let mem = Arc::new(FakeMemory::new());
    mem.add_region(RAM, RAM_SIZE);
    let holed = Arc::new(HoledMemory::new(mem.clone()));
    let h = Harness::enabled_over_mac(mem, holed.clone(), Limits::default(), 16, 256, node_mac(37));
    let (mut a, mut b, ahn) = ud_srq_pair(Node::on(37, h), 4);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(8192, ACCESS_LOCAL_WRITE);
    b.post_srq_recv(0, 40, &[(dst.va(0), 4096, dst.key)]);
    b.post_srq_recv(0, 41, &[(dst.va(4096), 4096, dst.key)]);

    holed.set_hole(Some((b.srqs[0].dbrec, 8)));
    let bad_dma = b.h.dev.counters().hw.bad_dma;
    datagram(&mut a, &b, ahn, 1, &src, 64);
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().hw.bad_dma, bad_dma + 1);
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, 1);
    assert_eq!(b.srq_ci(0), 0);

    holed.set_hole(Some((b.srqs[0].ring, 64)));
    datagram(&mut a, &b, ahn, 2, &src, 64);
    datagram(&mut a, &b, ahn, 3, &src, 64);
    holed.set_hole(None);
    let c = b.poll();
    assert_eq!(
        cqes(&c),
        vec![(0, WC_RECV, WC_LOC_QP_OP_ERR), (41, WC_RECV, WC_SUCCESS)]
    );
    assert_eq!(places(&c), vec![(b.qps[0].qpn, 0), (b.qps[0].qpn, 1)]);
    assert_eq!(b.srq_ci(0), 2);
}

// ------------------------------------------------------------ RESIZE_SRQ

/// The base of WQE `i`'s slot in a ring of `depth` 64-byte WQEs at `ring`.
fn slot_at(ring: u64, depth: u32, i: u16) -> u64 {
    ring + (u64::from(u32::from(i) & (depth - 1)) << SRQ_WQE_SHIFT)
}

/// Resizes SRQ `si` of `n` to `depth` as software does: a new ring, every
/// WQE posted that the device may not have taken (from the `ci` in the
/// record up to `pi`) copied to the same index of it, then RESIZE_SRQ;
/// the node posts to the new ring from then on. Returns the old ring's
/// base.
fn resize(n: &mut Node, si: usize, depth: u32) -> u64 {
    let s = n.srqs[si];
    let (c, ring) = n.h.srq_resize_cmd(s.srqn, depth);
    let mut i = n.srq_ci(si) as u16;
    while i != s.pi {
        let wqe = n.bytes(slot_at(s.ring, s.depth, i), 1 << SRQ_WQE_SHIFT);
        n.fill(slot_at(ring, depth, i), &wqe);
        i = i.wrapping_add(1);
    }
    assert_eq!(n.h.cmd(&c).0, STATUS_SUCCESS);
    n.srqs[si].ring = ring;
    n.srqs[si].depth = depth;
    s.ring
}

/// Software reuses the old ring of `depth` WQEs at `ring` for something
/// else: every byte 0xff (a WQE with 255 SGEs, malformed for any stride,
/// and a wr_id no test uses).
fn scribble(n: &Node, ring: u64, depth: u32) {
    n.fill(ring, &vec![0xff; (depth as usize) << SRQ_WQE_SHIFT]);
}

/// RESIZE_SRQ: every documented status, in the order the device checks
/// them; a failed resize changes nothing (depth, limit, ci, the record);
/// `pi` is read from the record when the command runs; a resize to
/// exactly `pi − ci` WQEs and one to max_qp_wr succeed and the dump and
/// QUERY_SRQ show the new depth, the limit and ci as before.
#[test]
fn resize_srq_checks_every_field() {
    type Case = (Box<dyn Fn(&mut CmdResizeSrq)>, u8);
    let mem = Arc::new(FakeMemory::new());
    mem.add_region(RAM, RAM_SIZE);
    let holed = Arc::new(HoledMemory::new(mem.clone()));
    let mut h = Harness::enabled_over(mem, holed.clone(), Limits::default(), 16, 64);
    let pdn = h.alloc_pd();
    let (c, _) = h.srq_cmd(pdn, 16, 5);
    let srqn = h.ok(&c);
    let dbrec = c.dbrec_addr;
    let (c2, _) = h.srq_cmd(pdn, 16, 0);
    let gone = h.ok(&c2);
    assert_eq!(destroy_srq(&mut h, gone), STATUS_SUCCESS);
    // Three WQEs posted, none taken.
    h.mem.write_u32(dbrec, 3);
    // A one-page ring (level 0) for 8 WQEs; it would hold 64.
    let (base, _) = h.srq_resize_cmd(srqn, 8);
    assert_eq!(base.buf.level, PBL_LEVEL_0);
    let cases: Vec<Case> = vec![
        (Box::new(|c| c.hdr.flags = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved0[0] = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved0[2] = 0x80), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved1 = 1 << 31), STATUS_BAD_RESERVED),
        (Box::new(|c| c.buf.reserved = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.depth = 0), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 24), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 32768), STATUS_BAD_PARAM), // > max_qp_wr
        (Box::new(|c| c.wqe_shift = 4), STATUS_BAD_PARAM),
        (Box::new(|c| c.wqe_shift = 11), STATUS_BAD_PARAM),
        (Box::new(|c| c.wqe_shift = 255), STATUS_BAD_PARAM),
        // A stride of the range, not the SRQ's (64 B).
        (Box::new(|c| c.wqe_shift = 5), STATUS_BAD_PARAM),
        (Box::new(|c| c.wqe_shift = 7), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 128), STATUS_BAD_PARAM), // ring too small
        (Box::new(|c| c.buf.page_shift = 11), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.page_count = 0), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.level = 3), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.addr += 8), STATUS_BAD_PARAM), // misaligned page
        (Box::new(|c| c.srqn = 0), STATUS_BAD_HANDLE),
        (Box::new(|c| c.srqn = 99), STATUS_BAD_HANDLE),
        (Box::new(|c| c.srqn = 1 << 24), STATUS_BAD_HANDLE),
        (Box::new(move |c| c.srqn = gone), STATUS_BAD_HANDLE),
        (Box::new(|c| c.buf.addr = UNMAPPED), STATUS_DMA_ERROR),
        // The first check that fails decides.
        (
            Box::new(|c| {
                c.reserved1 = 1;
                c.depth = 3;
            }),
            STATUS_BAD_RESERVED,
        ),
        (
            Box::new(|c| {
                c.depth = 3;
                c.srqn = 99;
            }),
            STATUS_BAD_PARAM,
        ),
        (
            Box::new(|c| {
                c.wqe_shift = 11;
                c.srqn = 99;
            }),
            STATUS_BAD_PARAM,
        ),
        // Whether the stride is the SRQ's needs the SRQ.
        (
            Box::new(|c| {
                c.wqe_shift = 7;
                c.srqn = 99;
            }),
            STATUS_BAD_HANDLE,
        ),
        (
            Box::new(|c| {
                c.srqn = 99;
                c.buf.addr = UNMAPPED;
            }),
            STATUS_BAD_HANDLE,
        ),
        (
            Box::new(|c| {
                c.wqe_shift = 7;
                c.buf.addr = UNMAPPED;
            }),
            STATUS_BAD_PARAM,
        ),
    ];
    let check = |h: &mut Harness, i: &str| {
        assert_eq!(query_srq(h, srqn), (5, 16, 0), "{i}");
        assert_eq!(h.mem.read_u32(dbrec + 4), 0, "{i}");
        let objects = h.dev.objects();
        let srq = objects.srqs.iter().find(|s| s.handle == srqn).unwrap();
        assert_eq!(
            (srq.obj.depth, srq.obj.wqe_shift),
            (16, SRQ_WQE_SHIFT),
            "{i}"
        );
    };
    for (i, (f, status)) in cases.iter().enumerate() {
        let mut c = base;
        f(&mut c);
        assert_eq!(h.cmd(&c).0, *status, "case {i}");
        check(&mut h, &format!("case {i}"));
    }

    // pi - ci (16-bit) more than the new depth, or more than the old depth
    // (no state the data path takes from; the new ring would hold it), or
    // pi behind ci: BAD_PARAM, read from the record when the command runs.
    // A bad pi decides before a bad ring; a good one lets the ring's pages
    // be checked (bits 31:16 of the record's word are not pi).
    let mut c32 = base;
    c32.depth = 32;
    let mut bad_ring = base;
    bad_ring.buf.addr = UNMAPPED;
    for (i, (pi, c, status)) in [
        (9, base, STATUS_BAD_PARAM),
        (17, c32, STATUS_BAD_PARAM),
        (0xffff, c32, STATUS_BAD_PARAM),
        (9, bad_ring, STATUS_BAD_PARAM),
        (8, bad_ring, STATUS_DMA_ERROR),
        (0x1_0003, bad_ring, STATUS_DMA_ERROR),
    ]
    .into_iter()
    .enumerate()
    {
        h.mem.write_u32(dbrec, pi);
        assert_eq!(h.cmd(&c).0, status, "pi case {i}");
        check(&mut h, &format!("pi case {i}"));
    }

    // A record that cannot be read: DMA_ERROR, counted; it decides before
    // the pi and the ring, after the SRQ and its stride.
    h.mem.write_u32(dbrec, 3);
    holed.set_hole(Some((dbrec, 8)));
    let bad_dma = h.dev.counters().hw.bad_dma;
    let mut c = base;
    assert_eq!(h.cmd(&c).0, STATUS_DMA_ERROR);
    assert_eq!(h.dev.counters().hw.bad_dma, bad_dma + 1);
    c.depth = 2; // fewer than the 3 posted, were pi readable
    assert_eq!(h.cmd(&c).0, STATUS_DMA_ERROR);
    c.wqe_shift = 7;
    assert_eq!(h.cmd(&c).0, STATUS_BAD_PARAM);
    c.srqn = 99;
    assert_eq!(h.cmd(&c).0, STATUS_BAD_HANDLE);
    holed.set_hole(None);
    check(&mut h, "hole");

    // Exactly pi - ci WQEs: the new ring is full. The limit (5, above the
    // new depth) and ci stay, the record is not written.
    h.mem.write_u32(dbrec, 8);
    h.ok(&base);
    assert_eq!(query_srq(&mut h, srqn), (5, 8, 0));
    assert_eq!(h.mem.read_u32(dbrec), 8);
    assert_eq!(h.mem.read_u32(dbrec + 4), 0);
    let objects = h.dev.objects();
    let srq = objects.srqs.iter().find(|s| s.handle == srqn).unwrap();
    assert_eq!((srq.obj.depth, srq.obj.ci, srq.obj.limit), (8, 0, 5));
    let v = ferroce_dev::ctl::handle_line(&h.dev, r#"{"cmd":"objects"}"#);
    assert_eq!(v["data"]["srqs"][0]["handle"], srqn);
    assert_eq!(v["data"]["srqs"][0]["depth"], 8);
    // The same ring again is a resize like any other; now a 1-WQE SRQ
    // cannot take 8.
    h.ok(&base);
    let (one, _) = h.srq_resize_cmd(srqn, 1);
    h.expect(&one, STATUS_BAD_PARAM);
    // max_qp_wr WQEs (a 1 MiB ring of 256 pages, level 1).
    let (max, _) = h.srq_resize_cmd(srqn, Limits::default().max_qp_wr);
    assert_eq!(max.buf.level, PBL_LEVEL_1);
    h.ok(&max);
    assert_eq!(query_srq(&mut h, srqn), (5, 16384, 0));
    // One WQE, none outstanding.
    h.mem.write_u32(dbrec, 0);
    h.ok(&one);
    assert_eq!(query_srq(&mut h, srqn), (5, 1, 0));
    // MODIFY_SRQ checks limits against the new depth.
    assert_eq!(modify_srq(&mut h, srqn, 2), STATUS_BAD_PARAM);
    assert_eq!(modify_srq(&mut h, srqn, 1), STATUS_SUCCESS);
    assert_eq!(query_srq(&mut h, srqn), (1, 1, 0));
}

/// A resize with WQEs outstanding, over RC: software copies the WQEs not
/// taken yet to the same indices of a ring twice as large (other slots
/// than in the old ring: the indices are past the old depth) and reuses
/// the old ring at once. The WQE a QP took before the resize, for a SEND
/// under way, is the QP's: the rest of the SEND lands in it. Every later
/// SEND takes the next WQE from the new ring in order, at `ci & 15`, data
/// byte-exact, also with more WQEs outstanding than the old depth; ci goes
/// on counting; the device never reads the old ring again.
#[test]
fn a_resize_moves_the_untaken_wqes_to_the_new_ring() {
    let mem = Arc::new(FakeMemory::new());
    mem.add_region(RAM, RAM_SIZE);
    let recording = Arc::new(RecordingMemory::new(mem.clone()));
    let h = Harness::enabled_over_mac(
        mem,
        recording.clone(),
        Limits::default(),
        16,
        256,
        node_mac(37),
    );
    let mut a = Node::new(36);
    let mut b = Node::on(37, h);
    let si = b.create_srq(8, 0);
    let srqn = b.srqs[si].srqn;
    a.create_qp(QPT_RC);
    b.create_srq_qp(QPT_RC, si);
    connect_pair(&mut a, 0, &mut b, 0, |_| {});
    let bq = b.qps[0].qpn;
    let src = a.reg_mr(1 << 17, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 17, ACCESS_LOCAL_WRITE);
    // Message k: pattern k at src 8 KiB * k; WQE j: dst 8 KiB * j.
    let len = |k: u64| if k == 6 { 3000 } else { 100 + 10 * k as usize };
    for k in 0..16u64 {
        a.fill(src.gpa + k * 8192, &pattern(len(k), k as u8));
    }
    let post = |b: &mut Node, j: u64| {
        b.post_srq_recv(si, 100 + j, &[(dst.va(j * 8192), 8192, dst.key)]);
    };
    let send = |a: &mut Node, k: u64| {
        a.post_send(0, &send_wr(k, &src, k * 8192, len(k) as u32));
    };

    // WQEs 0..7 posted, 0..5 taken, 8..11 posted (old slots 0..3).
    for j in 0..8 {
        post(&mut b, j);
    }
    for k in 0..6 {
        send(&mut a, k);
    }
    run(&a, &b);
    let c = b.poll();
    assert_eq!(c.len(), 6);
    assert!(c.iter().all(|c| c.status == WC_SUCCESS));
    for j in 8..12 {
        post(&mut b, j);
    }
    // The FIRST packet of a 3-packet SEND takes WQE 6.
    send(&mut a, 6);
    let fa = a.h.dev.take_tx();
    assert_eq!(fa.len(), 3);
    deliver(&b, &fa[..1]);
    assert_eq!(b.srq_ci(si), 7);
    assert!(b.poll().is_empty());

    // Resize to 16: WQEs 7..11 copied to new slots 7..11, the old ring
    // reused at once.
    recording.take();
    let old = resize(&mut b, si, 16);
    scribble(&b, old, 8);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 16, 7));
    assert_eq!(b.srq_ci(si), 7);

    // The rest of the SEND goes to WQE 6, which the QP holds.
    deliver(&b, &fa[1..]);
    let c = b.poll();
    assert_eq!(cqes(&c), vec![(106, WC_RECV, WC_SUCCESS)]);
    assert_eq!(places(&c), vec![(bq, 6)]);
    assert_eq!(c[0].byte_len, 3000);
    assert_eq!(b.bytes(dst.gpa + 6 * 8192, 3000), pattern(3000, 6));
    run(&a, &b);

    // WQEs 12..15 to the new ring: 9 outstanding, more than the old depth.
    for j in 12..16 {
        post(&mut b, j);
    }
    assert_eq!(b.srqs[si].pi, 16);
    for k in 7..16 {
        send(&mut a, k);
    }
    run(&a, &b);
    let c = b.poll();
    let want: Vec<_> = (7..16).map(|j| (100 + j, WC_RECV, WC_SUCCESS)).collect();
    assert_eq!(cqes(&c), want);
    let at: Vec<_> = (7..16).map(|j| (bq, j as u16)).collect();
    assert_eq!(places(&c), at);
    for (cqe, j) in c.iter().zip(7..16u64) {
        assert_eq!(cqe.byte_len as usize, len(j));
        assert_eq!(
            b.bytes(dst.gpa + j * 8192, len(j)),
            pattern(len(j), j as u8)
        );
    }
    assert_eq!(b.srq_ci(si), 16);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 16, 16));
    let sent = cqes(&a.poll());
    assert_eq!(sent.len(), 16);
    assert!(sent.iter().all(|c| c.2 == WC_SUCCESS));

    // Not one access to the old ring since the resize.
    let old_end = old + (8 << SRQ_WQE_SHIFT);
    let stray: Vec<_> = recording
        .take()
        .into_iter()
        .filter(|x| x.gpa < old_end && x.gpa + x.len > old)
        .collect();
    assert!(stray.is_empty(), "old ring accessed: {stray:?}");
    assert!(events(&mut b).is_empty());
}

/// The consumer index keeps counting across a resize and the 16-bit wrap:
/// 0xfffc WQEs taken from a 64-WQE ring (one UD datagram delivered again
/// and again), six WQEs posted at 0xfffc..0x0001, the ring shrunk to 8
/// (software copies them to slots 4..7, 0, 1), two more posted to fill it;
/// eight datagrams land in them in order with their data, wqe_idx
/// 0xfffc..0x0003, and ci ends at 4 in the record and in QUERY_SRQ.
#[test]
fn ci_keeps_counting_across_a_resize_and_the_wrap() {
    let (mut a, mut b, ahn) = ud_srq_pair(Node::new(37), 64);
    let bq = b.qps[0].qpn;
    let srqn = b.srqs[0].srqn;
    let src = a.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    for k in 0..8u64 {
        a.fill(src.gpa + k * 4096, &pattern(100 + k as usize, 40 + k as u8));
    }
    let wr = SendWr {
        ud: Some((ahn, bq, 0x1111)),
        ..send_wr(1, &src, 0, 32)
    };
    a.post_send(0, &wr);
    let frame = a.h.dev.take_tx();
    assert_eq!(frame.len(), 1);
    assert_eq!(a.poll().len(), 1);
    // Every slot: a WQE for the datagram and its GRH.
    let filler = rq_wqe(7, &[(dst.va(0), 4096, dst.key)]);
    for i in 0..64 {
        b.fill(slot_at(b.srqs[0].ring, 64, i), &filler);
    }
    let target = 0xfffc_u32;
    let mut taken = 0u32;
    while taken < target {
        let n = (target - taken).min(64);
        b.set_srq_pi(0, (taken + n) as u16);
        b.h.dev
            .receive_batch(std::iter::repeat_n(frame[0].as_slice(), n as usize));
        let c = b.poll();
        assert_eq!(c.len(), n as usize, "after {taken}");
        assert!(c.iter().all(|c| c.status == WC_SUCCESS && c.wr_id == 7));
        assert_eq!(c[0].wqe_idx, taken as u16);
        taken += n;
    }
    b.srqs[0].pi = target as u16;
    assert_eq!(b.srq_ci(0), target);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 64, target));

    // Six WQEs at 0xfffc..0x0001 (pi wraps), then the resize to 8.
    let wqe_of = |j: u64| 200 + j;
    for j in 0..6 {
        b.post_srq_recv(0, wqe_of(j), &[(dst.va(4096 * (j + 1)), 4096, dst.key)]);
    }
    assert_eq!(b.srqs[0].pi, 2);
    let old = resize(&mut b, 0, 8);
    scribble(&b, old, 64);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 8, target));
    for j in 6..8 {
        b.post_srq_recv(0, wqe_of(j), &[(dst.va(4096 * (j + 1)), 4096, dst.key)]);
    }
    assert_eq!(b.srqs[0].pi, 4);
    for k in 0..8u64 {
        let wr = SendWr {
            ud: Some((ahn, bq, 0x1111)),
            ..send_wr(10 + k, &src, k * 4096, 100 + k as u32)
        };
        a.post_send(0, &wr);
        deliver(&b, &a.h.dev.take_tx());
    }
    let c = b.poll();
    let want: Vec<_> = (0..8).map(|j| (wqe_of(j), WC_RECV, WC_SUCCESS)).collect();
    assert_eq!(cqes(&c), want);
    let at: Vec<_> = (0..8u16)
        .map(|j| (bq, 0xfffc_u16.wrapping_add(j)))
        .collect();
    assert_eq!(places(&c), at);
    for (cqe, j) in c.iter().zip(0..8u64) {
        let n = 100 + j as usize;
        assert_eq!(cqe.byte_len as usize, 40 + n);
        let landed = b.bytes(dst.gpa + 4096 * (j + 1) + 40, n);
        assert_eq!(landed, pattern(n, 40 + j as u8), "WQE {j}");
    }
    assert_eq!(b.srq_ci(0), 4);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 8, 4));
    // All taken: the next datagram finds none.
    let dropped = b.h.dev.counters().data.rx_ud_no_wqe;
    datagram(&mut a, &b, ahn, 99, &src, 32);
    assert!(b.poll().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_ud_no_wqe, dropped + 1);
}

/// The armed limit stays across a resize and fires after it, counting the
/// WQEs of the new ring; a limit armed above the new depth stays armed too
/// and fires at the next take. An SRQ_LIMIT_REACHED is never posted by the
/// resize itself.
#[test]
fn the_limit_stays_armed_across_a_resize() {
    let (mut a, mut b) = rc_srq_pair(1, 8, 3);
    let srqn = b.srqs[0].srqn;
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 16, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(64, 9));
    let limit_events = |b: &mut Node| -> Vec<(u8, u32, u32)> {
        events(b)
            .into_iter()
            .filter(|e| e.0 == EQE_SRQ_LIMIT_REACHED)
            .collect()
    };
    let post = |b: &mut Node, j: u64| {
        b.post_srq_recv(0, 100 + j, &[(dst.va(j * 4096), 4096, dst.key)]);
    };
    let one = |a: &mut Node, b: &mut Node, id: u64| {
        a.post_send(0, &send_wr(id, &src, 0, 64));
        run(a, b);
        let c = b.poll();
        assert_eq!(cqes(&c), vec![(100 + id, WC_RECV, WC_SUCCESS)]);
        assert_eq!(c[0].wqe_idx, id as u16);
        assert_eq!(b.bytes(dst.gpa + id * 4096, 64), pattern(64, 9));
    };
    for j in 0..6 {
        post(&mut b, j);
    }
    // 5, 4 left: not fewer than 3.
    one(&mut a, &mut b, 0);
    one(&mut a, &mut b, 1);
    assert!(limit_events(&mut b).is_empty());

    let old = resize(&mut b, 0, 16);
    scribble(&b, old, 8);
    assert_eq!(query_srq(&mut b.h, srqn), (3, 16, 2));
    assert!(limit_events(&mut b).is_empty());
    // 3 left, then 2: the event, once, with the limit; disarmed.
    one(&mut a, &mut b, 2);
    assert!(limit_events(&mut b).is_empty());
    one(&mut a, &mut b, 3);
    assert_eq!(limit_events(&mut b), vec![(EQE_SRQ_LIMIT_REACHED, srqn, 3)]);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 16, 4));

    // Armed at 12 (of 16), then shrunk to 4 with 4 outstanding: the limit
    // stays 12 and the next take fires it.
    post(&mut b, 6);
    post(&mut b, 7);
    assert_eq!(modify_srq(&mut b.h, srqn, 12), STATUS_SUCCESS);
    let old = resize(&mut b, 0, 4);
    scribble(&b, old, 16);
    assert_eq!(query_srq(&mut b.h, srqn), (12, 4, 4));
    assert!(limit_events(&mut b).is_empty());
    one(&mut a, &mut b, 4);
    assert_eq!(
        limit_events(&mut b),
        vec![(EQE_SRQ_LIMIT_REACHED, srqn, 12)]
    );
    assert_eq!(query_srq(&mut b.h, srqn), (0, 4, 5));
    for id in 5..8 {
        one(&mut a, &mut b, id);
    }
    assert!(limit_events(&mut b).is_empty());
    assert_eq!(b.srq_ci(0), 8);
    assert_eq!(a.poll().len(), 8);
}

/// The new ring's page list is the SRQ's from the resize on, page size
/// included: a 256-WQE ring in two 8 KiB pages listed in reverse order
/// (the SRQ was created with one 4 KiB page); each of 256 datagrams takes
/// the WQE at its index, read from the right page and offset.
#[test]
fn a_resized_ring_may_have_another_page_layout() {
    let (mut a, mut b, ahn) = ud_srq_pair(Node::new(37), 4);
    let bq = b.qps[0].qpn;
    let srqn = b.srqs[0].srqn;
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let base = b.h.alloc(16384, 8192);
    let list = b.h.alloc(16, 8);
    b.fill(list, &(base + 8192).to_le_bytes());
    b.fill(list + 8, &base.to_le_bytes());
    let mut c = CmdResizeSrq::zeroed();
    c.hdr.opcode = CMD_RESIZE_SRQ;
    c.buf.addr = list;
    c.buf.page_count = 2;
    c.buf.page_shift = 13;
    c.buf.level = PBL_LEVEL_1;
    c.srqn = srqn;
    c.depth = 256;
    c.wqe_shift = SRQ_WQE_SHIFT;
    b.h.ok(&c);
    assert_eq!(query_srq(&mut b.h, srqn), (0, 256, 0));
    for i in 0..256u64 {
        let off = i << SRQ_WQE_SHIFT;
        let at = if off < 8192 {
            base + 8192 + off
        } else {
            base + off - 8192
        };
        b.fill(at, &rq_wqe(1000 + i, &[(dst.va(0), 4096, dst.key)]));
    }
    b.set_srq_pi(0, 256);
    let wr = SendWr {
        ud: Some((ahn, bq, 0x1111)),
        ..send_wr(1, &src, 0, 16)
    };
    a.post_send(0, &wr);
    let frame = a.h.dev.take_tx();
    b.h.dev
        .receive_batch(std::iter::repeat_n(frame[0].as_slice(), 256));
    let c = b.poll();
    assert_eq!(c.len(), 256);
    for (i, cqe) in c.iter().enumerate() {
        assert_eq!(
            (cqe.wr_id, cqe.wqe_idx, cqe.status),
            (1000 + i as u64, i as u16, WC_SUCCESS)
        );
    }
    assert_eq!(b.srq_ci(0), 256);
}
