// SPDX-License-Identifier: GPL-2.0
//! End-to-end credits (IBTA 9.7.7.2, device.rst "RC responder"): the
//! responder advertises the receive WQEs it has posted in the AETH of its
//! ACKs.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{aeth, decode, op};

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

/// Moves `from`'s frames to `to`; returns them.
fn hand_over(from: &Node, to: &Node) -> Vec<Vec<u8>> {
    let f = from.h.dev.take_tx();
    to.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    f
}

/// The opcodes of `frames`.
fn opcodes(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .map(|f| decode(f).unwrap().bth.opcode)
        .collect()
}

/// A signaled SEND of 100 bytes from `m`.
fn send(id: u64, m: &MrInfo) -> SendWr {
    SendWr {
        sges: vec![(m.va(0), 100, m.key)],
        ..wr(id, WR_SEND)
    }
}

/// Posts `n` receive WQEs (ids from `first`) of 2048 bytes of `m` on `b`.
fn post_recvs(b: &mut Node, first: u64, n: u64, m: &MrInfo) {
    for id in first..first + n {
        b.post_recv(0, id, &[(m.va(0), 2048, m.key)]);
    }
}

/// The credit count codes of IBTA 9.7.7.2: the largest whose count is at
/// most the receive WQEs posted and not consumed.
#[test]
fn acks_carry_the_receive_wqes_posted() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    let mut posted = 0u64;
    // (WQEs posted, code): 0-4 exact, 5 -> 4, 7 -> 6 (code 5), 63 -> 48 (code 0xB).
    for (wqes, code) in [(0, 0), (1, 1), (4, 4), (5, 4), (7, 5), (63, 0xb)] {
        post_recvs(&mut b, posted, wqes - posted, &dst);
        posted = wqes;
        a.post_send(0, &write_wr(1, &src, 8, dst.va(3000), dst.key));
        hand_over(&a, &b);
        let ack = hand_over(&b, &a);
        assert_eq!(opcodes(&ack), vec![op::RC_ACK]);
        let p = decode(&ack[0]).unwrap();
        assert_eq!(p.aeth.syndrome, aeth::ACK | code, "{wqes} WQEs posted");
    }
    // A SEND consumes one: 62 -> 48 still; a READ response says so too.
    a.post_send(0, &send(2, &src));
    hand_over(&a, &b);
    let ack = hand_over(&b, &a);
    assert_eq!(decode(&ack[0]).unwrap().aeth.syndrome, aeth::ACK | 0xb);
    let read = SendWr {
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), 64, src.key)],
        ..wr(3, WR_RDMA_READ)
    };
    a.post_send(0, &read);
    hand_over(&a, &b);
    let resp = hand_over(&b, &a);
    assert_eq!(opcodes(&resp), vec![op::RC_READ_RESPONSE_ONLY]);
    let p = decode(&resp[0]).unwrap();
    assert_eq!(p.aeth.syndrome, aeth::ACK | 0xb);
    assert_eq!(b.poll().len(), 1, "the SEND's receive completion");
}

/// A QP attached to an SRQ shares its WQEs: its ACKs carry 0x1F, no limit.
#[test]
fn an_srq_qp_sets_no_limit() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    let si = b.create_srq(64, 0);
    b.create_srq_qp(QPT_RC, si);
    connect_pair(&mut a, 0, &mut b, 0, |_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    b.post_srq_recv(si, 1, &[(dst.va(0), 2048, dst.key)]);
    a.post_send(0, &send(1, &src));
    hand_over(&a, &b);
    let ack = hand_over(&b, &a);
    assert_eq!(decode(&ack[0]).unwrap().aeth.syndrome, aeth::ACK_UNLIMITED);
}
