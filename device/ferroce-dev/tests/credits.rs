// SPDX-License-Identifier: GPL-2.0
//! End-to-end credits (IBTA 9.7.7.2, device.rst "RC requester" and "RC
//! responder"): the responder advertises the receive WQEs it has posted in
//! the AETH of its ACKs, and the requester holds back messages that need
//! one beyond that, instead of sending them into RNR NAKs. A responder
//! that advertised none announces WQEs posted later in a credit update.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::transport::{CREDIT_KEEPALIVES, CREDIT_WAIT_NS};
use ferroce_dev::wire::{aeth, decode, op};

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

/// Moves `from`'s frames to `to`; returns them.
fn hand_over(from: &Node, to: &Node) -> Vec<Vec<u8>> {
    let f = from.h.dev.take_tx();
    to.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
    f
}

/// A signaled RDMA READ of 64 bytes from the start of `dst` into `src`.
fn read(id: u64, src: &MrInfo, dst: &MrInfo) -> SendWr {
    SendWr {
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), 64, src.key)],
        ..wr(id, WR_RDMA_READ)
    }
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
    a.post_send(0, &read(3, &src, &dst));
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
    let (mut a, mut b) = rc_srq_pair(1, 64, 0);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    b.post_srq_recv(0, 1, &[(dst.va(0), 2048, dst.key)]);
    a.post_send(0, &send(1, &src));
    hand_over(&a, &b);
    let ack = hand_over(&b, &a);
    assert_eq!(decode(&ack[0]).unwrap().aeth.syndrome, aeth::ACK_UNLIMITED);
    // Unlimited from now on: ten SENDs go at once without a receive WQE.
    for id in 2..12 {
        a.post_send(0, &send(id, &src));
    }
    assert_eq!(a.h.dev.take_tx().len(), 10);
    assert_eq!(a.h.dev.counters().data.credit_waits, 0);
}

/// SENDs beyond the credits wait for the ACK that brings more; a receiver
/// that keeps up gets no RNR NAK.
#[test]
fn sends_beyond_the_credits_wait_for_an_ack() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 100, 3, &dst);
    // Before any ACK the requester knows no credits: one SEND goes (SSN 1
    // is beyond LSN 0, but alone), the second waits behind it.
    a.post_send(0, &send(1, &src));
    a.post_send(0, &send(2, &src));
    assert_eq!(hand_over(&a, &b).len(), 1);
    assert_eq!(a.h.dev.counters().data.credit_waits, 1);
    // MSN 1 and 2 WQEs left: LSN 3, so SSNs 2 and 3 may go; SSN 4 waits
    // for their ACKs.
    hand_over(&b, &a);
    for id in 3..=10 {
        a.post_send(0, &send(id, &src));
    }
    // The receiver posts 7 more before those arrive: all ten complete,
    // and nothing is RNR NAKed or resent.
    post_recvs(&mut b, 200, 7, &dst);
    assert_eq!(opcodes(&hand_over(&a, &b)), vec![op::RC_SEND_ONLY; 2]);
    assert_eq!(a.h.dev.counters().data.credit_waits, 2);
    run(&a, &b);
    let done = statuses(&a.poll());
    let want: Vec<_> = (1..=10).map(|id| (id, WC_SEND, WC_SUCCESS)).collect();
    assert_eq!(done, want);
    assert_eq!(b.poll().len(), 10);
    let d = a.h.dev.counters().data;
    assert_eq!((d.rnr_naks_rcvd, d.retransmits), (0, 0));
}

/// A receiver that reposts as it completes, with 4 WQEs posted at most:
/// the requester sends what the ACKs allow, and the one message beyond
/// them arrives after the repost. Without credits all 40 SENDs would go
/// at once into 4 WQEs, and each one after them would be RNR NAKed or
/// resent.
#[test]
fn a_slow_receiver_costs_waits_not_rnr_naks() {
    let (mut a, mut b) = rc_pair(|a| a.rnr_retry = 7);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 1000, 4, &dst);
    for id in 1..=40 {
        a.post_send(0, &send(id, &src));
    }
    // The receiver reposts 4 WQEs per round trip, after it has seen the
    // round's SENDs: it never has more than 4 posted.
    let mut received = 0;
    for _ in 0..1000 {
        let sent = hand_over(&a, &b);
        let completed = b.poll().len() as u64;
        post_recvs(&mut b, 1004 + received, completed, &dst);
        received += completed;
        hand_over(&b, &a);
        if sent.is_empty() {
            if let Some(t) = a.h.dev.next_timer() {
                a.h.dev.tick(t);
            }
        }
        if received == 40 {
            break;
        }
    }
    assert_eq!(received, 40);
    run(&a, &b);
    let done = statuses(&a.poll());
    let want: Vec<_> = (1..=40).map(|id| (id, WC_SEND, WC_SUCCESS)).collect();
    assert_eq!(done, want);
    let d = a.h.dev.counters().data;
    assert!(d.credit_waits > 0);
    assert_eq!((d.rnr_naks_rcvd, d.seq_naks_rcvd, d.retransmits), (0, 0, 0));
}

/// RDMA WRITEs, READs and atomics need no receive WQE: never held back,
/// and each raises the LSN by the MSN it takes.
#[test]
fn writes_and_reads_are_never_held_back() {
    let (mut a, mut b) = rc_pair(|a| {
        a.max_rd_atomic = 4;
        a.max_dest_rd_atomic = 4;
    });
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 100, 1, &dst);
    for id in 1..=3 {
        a.post_send(0, &write_wr(id, &src, 8, dst.va(3000), dst.key));
    }
    a.post_send(0, &read(4, &src, &dst));
    let imm = SendWr {
        imm: [1, 2, 3, 4],
        ..write_wr(5, &src, 8, dst.va(3000), dst.key)
    };
    a.post_send(
        0,
        &SendWr {
            opcode: WR_RDMA_WRITE_IMM,
            ..imm
        },
    );
    a.post_send(0, &send(6, &src));
    // SSNs 1-4 raise the LSN to 4; the WRITE_IMM (SSN 5) is beyond it
    // and waits for their ACKs, and the SEND (SSN 6) behind it.
    let want = [
        op::RC_WRITE_ONLY,
        op::RC_WRITE_ONLY,
        op::RC_WRITE_ONLY,
        op::RC_READ_REQUEST,
    ];
    assert_eq!(opcodes(&hand_over(&a, &b)), want);
    assert_eq!(a.h.dev.counters().data.credit_waits, 1);
    // The READ response says 2 WQEs are posted: both go.
    post_recvs(&mut b, 101, 1, &dst);
    run(&a, &b);
    let got: Vec<_> = statuses(&a.poll()).iter().map(|s| (s.0, s.2)).collect();
    let want: Vec<_> = (1..=6).map(|id| (id, WC_SUCCESS)).collect();
    assert_eq!(got, want);
    assert_eq!(b.poll().len(), 2);
}

/// A responder that sends 0x1F (rxe does, always) lifts the limit for
/// good: nothing is held back after its first ACK.
#[test]
fn an_unlimited_ack_lifts_the_limit() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 8, dst.va(0), dst.key));
    hand_over(&a, &b);
    let ack = b.h.dev.take_tx();
    // b has no receive WQE posted (code 0); the ACK as rxe sends it.
    let p = decode(&ack[0]).unwrap();
    assert_eq!(p.bth.opcode, op::RC_ACK);
    let rxe_ack = forged(&ack[0], |p| p.aeth.syndrome = aeth::ACK_UNLIMITED);
    a.h.dev.receive(&rxe_ack);
    for id in 2..=9 {
        a.post_send(0, &send(id, &src));
    }
    assert_eq!(a.h.dev.take_tx().len(), 8);
    assert_eq!(a.h.dev.counters().data.credit_waits, 0);
}

/// The QP pair after one SEND took the receiver's only WQE: `a`'s SEND
/// `id` is posted and held back, since the ACK advertised 0 WQEs.
fn drained(id: u64) -> (Node, Node, MrInfo, MrInfo) {
    let (mut a, mut b) = rc_pair(|a| a.rnr_retry = 7);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 100, 1, &dst);
    a.post_send(0, &send(1, &src));
    hand_over(&a, &b);
    let ack = hand_over(&b, &a);
    assert_eq!(decode(&ack[0]).unwrap().aeth.syndrome, aeth::ACK);
    a.post_send(0, &send(id, &src));
    assert!(a.h.dev.take_tx().is_empty(), "held for the credit update");
    (a, b, src, dst)
}

/// A responder that advertised no WQE watches its RQ: the WQE posted
/// later (a doorbell record store, no doorbell) is announced in an
/// unsolicited ACK for its newest PSN, and the SEND held back for it goes
/// at once, without an RNR NAK.
#[test]
fn a_credit_update_releases_the_held_send() {
    let (mut a, mut b, _src, dst) = drained(2);
    // Nothing posted yet: the watch reads the record and goes on.
    let t = b.h.dev.next_timer().expect("b watches its RQ");
    b.h.dev.tick(t);
    assert!(b.h.dev.take_tx().is_empty());
    post_recvs(&mut b, 101, 1, &dst);
    let t = b.h.dev.next_timer().expect("b still watches");
    b.h.dev.tick(t);
    let update = b.h.dev.take_tx();
    assert_eq!(opcodes(&update), vec![op::RC_ACK]);
    let p = decode(&update[0]).unwrap();
    assert_eq!(p.aeth.syndrome, aeth::ACK | 1);
    assert_eq!(p.aeth.msn, 1);
    assert_eq!(b.h.dev.counters().data.credit_updates, 1);
    // The watch ended with the update.
    assert_eq!(b.h.dev.next_timer(), None);
    a.h.dev.receive(&update[0]);
    assert_eq!(opcodes(&hand_over(&a, &b)), vec![op::RC_SEND_ONLY]);
    run(&a, &b);
    assert_eq!(statuses(&a.poll()).len(), 2);
    let d = a.h.dev.counters().data;
    assert_eq!((d.rnr_naks_rcvd, d.retransmits, d.credit_waits), (0, 0, 1));
}

/// QUERY_COUNTERS (1.9) carries both credit counters, as the data path
/// counts them: the requester's held SEND, the responder's update.
#[test]
fn the_credit_counters_reach_the_driver() {
    let (mut a, mut b, _src, dst) = drained(2);
    post_recvs(&mut b, 101, 1, &dst);
    while b.h.dev.counters().data.credit_updates == 0 {
        let t = b.h.dev.next_timer().expect("b watches its RQ");
        b.h.dev.tick(t);
    }
    hand_over(&b, &a);
    run(&a, &b);
    let (ka, kb) = (a.query_counters(), b.query_counters());
    assert_eq!((ka.credit_waits, ka.credit_updates), (1, 0));
    assert_eq!((kb.credit_waits, kb.credit_updates), (0, 1));
    assert_eq!(ka.rnr_naks_rcvd, 0);
}

/// An application that posts a receive and then sends gets the credit
/// update out before its request, so the peer learns of the WQE first.
#[test]
fn the_update_goes_before_the_responders_own_request() {
    let (mut a, mut b, _src, dst) = drained(2);
    let target = a.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 101, 1, &dst);
    let m = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_send(0, &write_wr(7, &m, 8, target.va(0), target.key));
    let out = b.h.dev.take_tx();
    assert_eq!(opcodes(&out), vec![op::RC_ACK, op::RC_WRITE_ONLY]);
    assert_eq!(decode(&out[0]).unwrap().aeth.syndrome, aeth::ACK | 1);
}

/// Runs the timers of `a` and `b` in time order up to `until` (ns), one
/// clock for both. While `b_answers`, `a`'s frames go to `b` and `b`'s
/// answers back to `a`; otherwise they are lost. Returns `a`'s frames.
fn run_timers(a: &Node, b: &Node, until: u64, b_answers: bool) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    loop {
        let (ta, tb) = (a.h.dev.next_timer(), b.h.dev.next_timer());
        let t = match (ta, tb) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => match x.or(y) {
                Some(t) => t,
                None => break,
            },
        };
        if t > until {
            break;
        }
        a.h.dev.tick(t);
        b.h.dev.tick(t);
        let f = a.h.dev.take_tx();
        if b_answers {
            b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
            hand_over(b, a);
        }
        sent.extend(f);
    }
    sent
}

/// A receiver that posts nothing for longer than `CREDIT_WAIT`: the
/// requester does not probe it into an RNR NAK but sends a keep-alive
/// every `CREDIT_WAIT`, a zero-length WRITE for its newest acknowledged
/// PSN, which the responder acknowledges again with its count (0), and
/// which keeps its watch going. The WQE posted 10 ms later is announced
/// in an update, and the SEND goes without an RNR NAK.
#[test]
fn a_keepalive_keeps_the_watch_of_a_stalled_receiver() {
    let (mut a, mut b, _src, dst) = drained(2);
    let start = a.h.dev.now_ns();
    let sent = run_timers(&a, &b, start + 10 * CREDIT_WAIT_NS, true);
    assert_eq!(sent.len(), 10, "one keep-alive per CREDIT_WAIT");
    let first = decode(&sent[0]).unwrap().bth.psn;
    for f in &sent {
        let p = decode(f).unwrap();
        assert_eq!(p.bth.opcode, op::RC_WRITE_ONLY);
        assert!(p.bth.ack_req);
        assert_eq!(p.bth.psn, first, "the newest acknowledged PSN, each time");
        assert_eq!((p.reth.len, p.payload.len()), (0, 0));
    }
    // b took each for a duplicate of the first SEND (its PSN is behind
    // b's expected PSN), executed nothing and acknowledged it again.
    let (da, db) = (a.h.dev.counters().data, b.h.dev.counters().data);
    assert_eq!(da.credit_keepalives, 10);
    assert_eq!(
        (db.dup_requests, db.credit_updates, db.rnr_naks_sent),
        (10, 0, 0)
    );
    assert_eq!((db.seq_naks_sent, db.acks_sent), (0, 11));
    assert!(b.h.dev.next_timer().is_some(), "b still watches its RQ");
    post_recvs(&mut b, 101, 1, &dst);
    run_timers(&a, &b, a.h.dev.now_ns() + CREDIT_WAIT_NS, true);
    assert_eq!(b.h.dev.counters().data.credit_updates, 1);
    run(&a, &b);
    assert_eq!(statuses(&a.poll()).len(), 2);
    let d = a.h.dev.counters().data;
    assert_eq!(
        (d.rnr_naks_rcvd, d.retransmits, d.credit_keepalives),
        (0, 0, 10)
    );
    assert_eq!(b.poll().len(), 2, "both SENDs received");
    // QUERY_COUNTERS (1.10) carries the keep-alives to the driver.
    let (ka, kb) = (a.query_counters(), b.query_counters());
    assert_eq!((ka.credit_keepalives, kb.credit_keepalives), (10, 0));
    assert_eq!((ka.credit_waits, kb.credit_updates), (1, 1));
}

/// A responder that answers no keep-alive (a peer gone, or its QP
/// destroyed): the keep-alives go on all the same, one per `CREDIT_WAIT`
/// (1 ns earlier: nothing), and after `CREDIT_KEEPALIVES` the held
/// message goes as the probe, whose fate is the ACK timer's and RNR NAKs'
/// again.
#[test]
fn unanswered_keepalives_go_on_to_the_probe() {
    let (mut a, b, _src, _dst) = drained(2);
    let first = a.h.dev.next_timer().expect("the wait for the update");
    let start = a.h.dev.now_ns();
    assert!(first >= start + CREDIT_WAIT_NS - 1000 && first <= start + CREDIT_WAIT_NS);
    let mut sent = Vec::new();
    for k in 0..=u64::from(CREDIT_KEEPALIVES) {
        let due = first + k * CREDIT_WAIT_NS;
        assert_eq!(a.h.dev.next_timer(), Some(due), "wait {k}");
        a.h.dev.tick(due - 1);
        assert!(a.h.dev.take_tx().is_empty());
        a.h.dev.tick(due);
        let f = a.h.dev.take_tx();
        assert_eq!(f.len(), 1, "one frame at the end of wait {k}");
        sent.extend(f); // lost
    }
    let (keepalives, probe) = sent.split_at(CREDIT_KEEPALIVES.into());
    assert!(opcodes(keepalives).iter().all(|&o| o == op::RC_WRITE_ONLY));
    assert_eq!(opcodes(probe), vec![op::RC_SEND_ONLY], "the probe");
    b.h.dev.receive_batch(probe.iter().map(|f| f.as_slice()));
    let nak = hand_over(&b, &a);
    assert_eq!(decode(&nak[0]).unwrap().aeth.syndrome & 0x60, aeth::RNR_NAK);
    let d = a.h.dev.counters().data;
    assert_eq!(d.credit_keepalives, u64::from(CREDIT_KEEPALIVES));
    assert_eq!(d.rnr_naks_rcvd, 1);
    assert_eq!(a.poll().len(), 1, "only the first SEND completed");
}

/// A host that deschedules the responder's device for longer than
/// `CREDIT_WAIT`: each answer to a keep-alive comes after the requester's
/// next keep-alive went. The keep-alives go on and no probe is RNR NAKed;
/// the WQE posted then is announced and releases the held SEND.
#[test]
fn a_late_answer_keeps_the_keepalives_going() {
    let (mut a, mut b, _src, dst) = drained(2);
    let mut late: Vec<Vec<u8>> = Vec::new();
    let mut keepalives = 0;
    for _ in 0..6 {
        let t = a.h.dev.next_timer().expect("the held SEND waits");
        a.h.dev.tick(t);
        b.h.dev.tick(t);
        let f = a.h.dev.take_tx();
        // The answer to the keep-alive before arrives only now.
        a.h.dev.receive_batch(late.iter().map(|x| x.as_slice()));
        assert_eq!(
            opcodes(&f),
            vec![op::RC_WRITE_ONLY],
            "a keep-alive, not the probe"
        );
        keepalives += 1;
        b.h.dev.receive_batch(f.iter().map(|f| f.as_slice()));
        late = b.h.dev.take_tx();
        assert_eq!(opcodes(&late), vec![op::RC_ACK]);
    }
    post_recvs(&mut b, 101, 1, &dst);
    a.h.dev.receive_batch(late.iter().map(|f| f.as_slice()));
    run_timers(&a, &b, a.h.dev.now_ns() + CREDIT_WAIT_NS, true);
    assert_eq!(b.h.dev.counters().data.credit_updates, 1);
    run(&a, &b);
    assert_eq!(statuses(&a.poll()).len(), 2, "both SENDs completed");
    let d = a.h.dev.counters().data;
    assert_eq!(
        (d.rnr_naks_rcvd, d.retransmits, d.credit_keepalives),
        (0, 0, keepalives)
    );
    assert_eq!(b.poll().len(), 2, "both SENDs received");
}

/// A receiver that never posts: the keep-alives are bounded. After
/// `CREDIT_KEEPALIVES`, all answered with 0, the held message goes as the
/// probe and is RNR NAKed, so `rnr_retry` bounds the wait as before.
#[test]
fn the_probe_goes_after_the_last_keepalive() {
    let (mut a, b, _src, _dst) = drained(2);
    let start = a.h.dev.now_ns();
    let n = u64::from(CREDIT_KEEPALIVES);
    let sent = run_timers(&a, &b, start + (n + 1) * CREDIT_WAIT_NS, true);
    let (keepalives, rest) = sent.split_at(sent.len().min(CREDIT_KEEPALIVES.into()));
    assert!(opcodes(keepalives).iter().all(|&o| o == op::RC_WRITE_ONLY));
    let probe = rest.first().map(|f| decode(f).unwrap().bth.opcode);
    assert_eq!(probe, Some(op::RC_SEND_ONLY), "the probe");
    let d = a.h.dev.counters().data;
    assert_eq!(d.credit_keepalives, n);
    assert!(d.rnr_naks_rcvd >= 1, "the probe met no receive WQE");
    assert_eq!(a.poll().len(), 1, "only the first SEND completed");
}

/// A QP that takes RDMA WRITEs with no receive posted advertises 0 in every
/// ACK, and is not watched: no WQE was consumed. After a SEND consumed
/// one, the watch runs its course once and is not restarted by WRITEs.
#[test]
fn only_a_qp_that_consumed_a_wqe_is_watched() {
    let (mut a, mut b) = rc_pair(|_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    let write = |a: &mut Node, id| a.post_send(0, &write_wr(id, &src, 8, dst.va(0), dst.key));
    for id in 1..=3 {
        write(&mut a, id);
        run(&a, &b);
        assert_eq!(b.h.dev.next_timer(), None, "no watch after WRITE {id}");
    }
    post_recvs(&mut b, 100, 1, &dst);
    a.post_send(0, &send(4, &src));
    hand_over(&a, &b);
    hand_over(&b, &a);
    let start = b.h.dev.now_ns();
    let mut reads = 0;
    while let Some(t) = b.h.dev.next_timer() {
        b.h.dev.tick(t);
        reads += 1;
    }
    // 20, 40, 80, then every 100 us up to 1 ms after the ACK.
    assert!((8..=16).contains(&reads), "{reads} reads of the record");
    assert_eq!(b.h.dev.now_ns() - start, CREDIT_WAIT_NS);
    assert!(b.h.dev.take_tx().is_empty());
    for id in 5..=7 {
        write(&mut a, id);
        run(&a, &b);
        assert_eq!(b.h.dev.next_timer(), None, "no watch after WRITE {id}");
    }
    assert_eq!(a.poll().len(), 7);
}

/// A message held back for credits has sent nothing: the retransmission
/// timer does not run for it, and no retry is used while it waits, however
/// short the ACK timeout.
#[test]
fn a_held_message_does_not_time_out() {
    let (mut a, mut b) = rc_pair(|q| {
        q.timeout = 1; // 8 us
        q.retry_cnt = 0;
    });
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    post_recvs(&mut b, 100, 1, &dst);
    a.post_send(0, &send(1, &src));
    a.post_send(0, &send(2, &src));
    hand_over(&a, &b);
    hand_over(&b, &a);
    assert!(a.h.dev.take_tx().is_empty(), "SEND 2 is held");
    let t = a.h.dev.next_timer().expect("the wait for the update");
    assert_eq!(t - a.h.dev.now_ns(), CREDIT_WAIT_NS);
    a.h.dev.tick(t - 1);
    let d = a.h.dev.counters().data;
    assert_eq!((d.timeouts, d.retry_exceeded), (0, 0));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_SUCCESS)]);
}

/// A timer armed by an entry point (here the wait for a credit update,
/// armed by the SQ doorbell of the SEND it holds back) wakes the engine
/// thread if it would sleep past it, and only then.
#[test]
fn an_early_timer_wakes_the_engine_thread() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    for (sleep_ns, wakes) in [(10 * CREDIT_WAIT_NS, 1), (CREDIT_WAIT_NS / 2, 0)] {
        let (mut a, mut b) = rc_pair(|_| {});
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let dst = b.reg_mr(4096, ALL_ACCESS);
        post_recvs(&mut b, 100, 1, &dst);
        a.post_send(0, &send(1, &src));
        hand_over(&a, &b);
        hand_over(&b, &a);
        let n = Arc::new(AtomicU32::new(0));
        let m = Arc::clone(&n);
        a.h.dev.set_tx_waker(Box::new(move || {
            m.fetch_add(1, Ordering::Relaxed);
        }));
        a.h.dev.sleep_until(sleep_ns);
        a.post_send(0, &send(2, &src));
        assert!(a.h.dev.take_tx().is_empty(), "held for the credit update");
        assert_eq!(n.load(Ordering::Relaxed), wakes, "sleeping {sleep_ns} ns");
    }
}
