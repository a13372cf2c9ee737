// SPDX-License-Identifier: GPL-2.0
//! RDMA atomics (device 1.4, device.rst "Atomics"): CMP_SWAP and FETCH_ADD
//! byte-exact on both sides and on the wire, IB_ATOMIC_HCA atomicity across
//! QPs, the responder's replay cache, the errors and max_rd_atomic.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{aeth, decode, op};

/// The rights of the remote counters.
const ATOMIC_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_READ;

fn with_atomics(x: &mut QpAttr) {
    x.qp_access_flags |= ACCESS_REMOTE_ATOMIC;
}

fn atomic_wr(id: u64, opcode: u8, local: (u64, u32), remote: &MrInfo, off: u64) -> SendWr {
    SendWr {
        wr_id: id,
        opcode,
        flags: WQE_SIGNALED,
        remote_addr: remote.va(off),
        rkey: remote.key,
        sges: vec![(local.0, 8, local.1)],
        ..SendWr::default()
    }
}

fn fetch_add(id: u64, local: (u64, u32), remote: &MrInfo, off: u64, add: u64) -> SendWr {
    SendWr {
        compare_add: add,
        ..atomic_wr(id, WR_ATOMIC_FETCH_ADD, local, remote, off)
    }
}

fn cmp_swap(id: u64, local: (u64, u32), r: &MrInfo, off: u64, cmp: u64, swap: u64) -> SendWr {
    SendWr {
        compare_add: cmp,
        swap,
        ..atomic_wr(id, WR_ATOMIC_CMP_SWP, local, r, off)
    }
}

fn word(n: &Node, gpa: u64) -> u64 {
    u64::from_le_bytes(n.bytes(gpa, 8).try_into().unwrap())
}

fn set_word(n: &Node, gpa: u64, v: u64) {
    n.fill(gpa, &v.to_le_bytes());
}

/// Moves one round of frames a -> b -> a; returns (a's, b's) frames.
fn round(a: &Node, b: &Node) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let fa = a.h.dev.take_tx();
    b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
    let fb = b.h.dev.take_tx();
    a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
    (fa, fb)
}

/// Both opcodes, byte-checked: the request's AtomicETH, the
/// ATOMIC_ACKNOWLEDGE's original value, the remote word (and nothing next
/// to it) and the local SGE (and nothing next to it), the CQEs.
#[test]
fn cmp_swap_and_fetch_add_are_byte_exact() {
    let (mut a, mut b) = rc_pair(with_atomics);
    let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(4096, ATOMIC_ACCESS);
    a.fill(local.gpa, &[0xee; 64]);
    b.fill(remote.gpa, &[0x5a; 64]);
    let v0 = 0x1111_2222_3333_4444u64;
    set_word(&b, remote.gpa + 16, v0);
    // FETCH_ADD with a carry across bytes and a wrap-around addend.
    let add = 0xffff_ffff_0000_0001u64;
    a.post_send(0, &fetch_add(1, (local.va(8), local.key), &remote, 16, add));
    let (fa, fb) = round(&a, &b);
    assert_eq!(fa.len(), 1);
    let req = decode(&fa[0]).unwrap();
    assert_eq!(req.bth.opcode, op::RC_FETCH_ADD);
    assert!(req.bth.ack_req);
    assert_eq!(
        (req.atomic.va, req.atomic.rkey, req.atomic.swap_add),
        (remote.va(16), remote.key, add)
    );
    assert!(req.payload.is_empty());
    let ack = decode(&fb[0]).unwrap();
    assert_eq!(ack.bth.opcode, op::RC_ATOMIC_ACK);
    assert_eq!(ack.bth.psn, req.bth.psn);
    assert_eq!(ack.atomic_ack, v0);
    assert_eq!(ack.aeth.syndrome & aeth::TYPE_MASK, aeth::ACK);
    let v1 = v0.wrapping_add(add);
    assert_eq!(word(&b, remote.gpa + 16), v1);
    assert_eq!(word(&a, local.gpa + 8), v0);
    let c = a.poll();
    assert_eq!(statuses(&c), vec![(1, WC_FETCH_ADD, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 8);

    // CMP_SWAP that does not match: nothing written, the original returned.
    a.post_send(
        0,
        &cmp_swap(2, (local.va(24), local.key), &remote, 16, v0, 7),
    );
    let (fa, _) = round(&a, &b);
    let req = decode(&fa[0]).unwrap();
    assert_eq!(req.bth.opcode, op::RC_CMP_SWAP);
    assert_eq!((req.atomic.compare, req.atomic.swap_add), (v0, 7));
    assert_eq!(word(&b, remote.gpa + 16), v1);
    assert_eq!(word(&a, local.gpa + 24), v1);
    // CMP_SWAP that matches: swapped.
    let v2 = 0x0123_4567_89ab_cdefu64;
    a.post_send(
        0,
        &cmp_swap(3, (local.va(40), local.key), &remote, 16, v1, v2),
    );
    round(&a, &b);
    assert_eq!(word(&b, remote.gpa + 16), v2);
    assert_eq!(word(&a, local.gpa + 40), v1);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_COMP_SWAP, WC_SUCCESS), (3, WC_COMP_SWAP, WC_SUCCESS)]
    );
    // Nothing around the words changed.
    let mut want_b = vec![0x5a; 64];
    want_b[16..24].copy_from_slice(&v2.to_le_bytes());
    assert_eq!(b.bytes(remote.gpa, 64), want_b);
    let mut want_a = vec![0xee; 64];
    want_a[8..16].copy_from_slice(&v0.to_le_bytes());
    want_a[24..32].copy_from_slice(&v1.to_le_bytes());
    want_a[40..48].copy_from_slice(&v1.to_le_bytes());
    assert_eq!(a.bytes(local.gpa, 64), want_a);
    let db = b.h.dev.counters().data;
    assert_eq!((db.err_naks_sent, db.dup_requests), (0, 0));
}

/// IB_ATOMIC_HCA: 4 requester QPs on two devices and a loopback QP on the
/// responder's own device hammer one counter with distinct addends over a
/// lossy, duplicating, reordering wire. The counter ends exactly at the sum,
/// and the original values chain: sorted, each is the previous plus the
/// previous operation's addend (every FETCH_ADD saw a distinct value and
/// none was executed twice or lost).
#[test]
fn fetch_adds_from_many_qps_are_atomic_and_exact() {
    let mut a = Node::new(36);
    let mut c = Node::new(38);
    let mut b = Node::new(37);
    let counter = b.reg_mr(4096, ATOMIC_ACCESS);
    set_word(&b, counter.gpa + 64, 1000);
    // a: QPs 0, 1; c: QPs 0, 1; each to its own QP on b.
    for qi in 0..2 {
        let qa = a.create_qp(QPT_RC);
        let qc = c.create_qp(QPT_RC);
        let qb = b.create_qp(QPT_RC);
        let qb2 = b.create_qp(QPT_RC);
        connect_pair(&mut a, qa, &mut b, qb, with_atomics);
        connect_pair(&mut c, qc, &mut b, qb2, with_atomics);
        assert_eq!((qa, qc), (qi, qi));
    }
    const K: u64 = 40;
    let la = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let lc = c.reg_mr(4096, ACCESS_LOCAL_WRITE);
    // (node, qp, k) -> addend, distinct and odd-sized.
    let addend = |n: u64, q: u64, k: u64| 1 + k * 7 + q * 1000 + n * 100_000;
    for k in 0..K {
        for q in 0..2u64 {
            let slot = (q * K + k) * 8;
            let wa = fetch_add(k, (la.va(slot), la.key), &counter, 64, addend(0, q, k));
            a.post_send(q as usize, &wa);
            let wc = fetch_add(k, (lc.va(slot), lc.key), &counter, 64, addend(1, q, k));
            c.post_send(q as usize, &wc);
        }
    }
    let mut rng = Rng(7);
    let imp = Impair {
        drop: 5,
        dup: 10,
        corrupt: 2,
        reorder: 10,
    };
    for _ in 0..20_000 {
        let fa = a.h.dev.take_tx();
        let fc = c.h.dev.take_tx();
        let fb = b.h.dev.take_tx();
        if fa.is_empty() && fb.is_empty() && fc.is_empty() {
            let next = [
                a.h.dev.next_timer(),
                b.h.dev.next_timer(),
                c.h.dev.next_timer(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = next else {
                break;
            };
            for n in [&a, &b, &c] {
                n.h.dev.tick(t);
            }
            continue;
        }
        let mut to_b: Vec<Vec<u8>> = Vec::new();
        for f in fa.into_iter().chain(fc) {
            if rng.pct(imp.drop) {
                continue;
            }
            if rng.pct(imp.dup) {
                to_b.push(f.clone());
            }
            to_b.push(f);
        }
        let n = to_b.len();
        for i in 0..n {
            if rng.pct(imp.reorder) {
                let j = rng.below(n as u64) as usize;
                to_b.swap(i, j);
            }
        }
        b.h.dev.receive_batch(to_b.iter().map(|f| f.as_slice()));
        for f in fb {
            if rng.pct(imp.drop) {
                continue;
            }
            let mut f = f;
            if rng.pct(imp.corrupt) {
                let i = rng.below(f.len() as u64) as usize;
                f[i] ^= 0x10;
            }
            // Each frame goes to its device (by destination MAC).
            let dst = if f[0..6] == a.mac { &a } else { &c };
            dst.h.dev.receive(&f);
            if rng.pct(imp.dup) {
                dst.h.dev.receive(&f);
            }
        }
    }
    let mut ops: Vec<(u64, u64)> = Vec::new();
    for (n, node, mr) in [(0u64, &mut a, &la), (1, &mut c, &lc)] {
        let cqes = node.poll();
        assert_eq!(cqes.len(), 2 * K as usize, "node {n}: every WQE completes");
        assert!(cqes
            .iter()
            .all(|c| c.status == WC_SUCCESS && c.opcode == WC_FETCH_ADD));
        for q in 0..2u64 {
            for k in 0..K {
                let got = word(node, mr.gpa + (q * K + k) * 8);
                ops.push((got, addend(n, q, k)));
            }
        }
    }
    let sum: u64 = ops.iter().map(|o| o.1).sum();
    assert_eq!(
        word(&b, counter.gpa + 64),
        1000 + sum,
        "counter = start + sum"
    );
    ops.sort();
    assert_eq!(ops[0].0, 1000, "the first FETCH_ADD saw the start value");
    for w in ops.windows(2) {
        assert_eq!(w[1].0, w[0].0 + w[0].1, "original values chain");
    }
    let db = b.h.dev.counters().data;
    assert!(db.dup_requests > 0, "the wire duplicated requests");
    assert_eq!(db.err_naks_sent, 0);
}

/// The replay cache: a duplicate atomic (a retransmitted PSN already
/// executed) is answered with the cached original value and not executed
/// again, also after the word changed; a lost ATOMIC_ACKNOWLEDGE is
/// recovered by the requester's timeout; once a newer request reused the
/// only resource, a duplicate of the old atomic is dropped.
#[test]
fn duplicate_atomics_are_answered_from_the_replay_cache() {
    let (mut a, mut b) = rc_pair(|x| {
        with_atomics(x);
        x.max_rd_atomic = 1;
        x.max_dest_rd_atomic = 1;
    });
    let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(4096, ATOMIC_ACCESS);
    set_word(&b, remote.gpa, 5);
    a.post_send(0, &fetch_add(1, (local.va(0), local.key), &remote, 0, 10));
    let f1 = a.h.dev.take_tx();
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    let r1 = b.h.dev.take_tx();
    assert_eq!(word(&b, remote.gpa), 15);
    // Replayed twice: answered twice with 5, still executed once.
    for _ in 0..2 {
        b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
        let again = b.h.dev.take_tx();
        assert_eq!(again.len(), 1);
        let p = decode(&again[0]).unwrap();
        assert_eq!((p.bth.opcode, p.atomic_ack), (op::RC_ATOMIC_ACK, 5));
        assert_eq!(word(&b, remote.gpa), 15, "not executed again");
    }
    // The word changes under it; a duplicate still returns 5, adds nothing.
    set_word(&b, remote.gpa, 100);
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    let again = b.h.dev.take_tx();
    assert_eq!(decode(&again[0]).unwrap().atomic_ack, 5);
    assert_eq!(word(&b, remote.gpa), 100);
    assert_eq!(b.h.dev.counters().data.dup_requests, 3);
    // The first answer is lost: the requester times out and sends the
    // same PSN again; the cached answer completes it with 5.
    drop(r1);
    assert!(a.poll().is_empty());
    let t = a.h.dev.next_timer().expect("the ACK timer runs");
    a.h.dev.tick(t);
    let f1b = a.h.dev.take_tx();
    assert_eq!(f1b.len(), 1);
    let p = decode(&f1b[0]).unwrap();
    assert_eq!(
        (p.bth.opcode, p.bth.psn),
        (op::RC_FETCH_ADD, decode(&f1[0]).unwrap().bth.psn)
    );
    b.h.dev.receive_batch(f1b.iter().map(|f| f.as_slice()));
    let r = b.h.dev.take_tx();
    a.h.dev.receive_batch(r.iter().map(|f| f.as_slice()));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_FETCH_ADD, WC_SUCCESS)]);
    assert_eq!(word(&a, local.gpa), 5);
    assert_eq!(word(&b, remote.gpa), 100);
    // A CMP_SWAP takes the only resource; the old FETCH_ADD is dropped.
    a.post_send(
        0,
        &cmp_swap(2, (local.va(8), local.key), &remote, 0, 100, 1),
    );
    round(&a, &b);
    assert_eq!(word(&b, remote.gpa), 1);
    b.h.dev.receive_batch(f1.iter().map(|f| f.as_slice()));
    assert!(b.h.dev.take_tx().is_empty(), "no resource: dropped");
    assert_eq!(word(&b, remote.gpa), 1);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_COMP_SWAP, WC_SUCCESS)]);
    assert_eq!(word(&a, local.gpa + 8), 100);
    let db = b.h.dev.counters().data;
    assert_eq!(db.err_naks_sent, 0);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
}

/// Remote errors: the right NAK, the right CQE status, the responder's QP
/// in ERR (with QP_ACCESS_ERR for access errors) and no byte written.
#[test]
fn remote_atomic_errors_nak_and_write_nothing() {
    // (name, QP grants REMOTE_ATOMIC, MR rights, offset, rkey flip, NAK, status)
    let cases = [
        (
            "misaligned",
            true,
            ATOMIC_ACCESS,
            4,
            0,
            aeth::NAK_INVALID_REQ,
        ),
        (
            "wrong rkey",
            true,
            ATOMIC_ACCESS,
            0,
            0x100,
            aeth::NAK_REM_ACCESS,
        ),
        (
            "MR without REMOTE_ATOMIC",
            true,
            ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
            0,
            0,
            aeth::NAK_REM_ACCESS,
        ),
        (
            "beyond the MR",
            true,
            ATOMIC_ACCESS,
            4096,
            0,
            aeth::NAK_REM_ACCESS,
        ),
        (
            "QP without REMOTE_ATOMIC",
            false,
            ATOMIC_ACCESS,
            0,
            0,
            aeth::NAK_INVALID_REQ,
        ),
    ];
    for (name, qp_ok, mr_access, off, flip, nak) in cases {
        let (mut a, mut b) = rc_pair(move |x| {
            if qp_ok {
                with_atomics(x);
            }
        });
        let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let remote = b.reg_mr(4096, mr_access);
        b.fill(remote.gpa, &[0x33; 4096]);
        a.fill(local.gpa, &[0x44; 16]);
        let mut w = fetch_add(1, (local.va(0), local.key), &remote, off, 1);
        w.rkey ^= flip;
        a.post_send(0, &w);
        let (_, fb) = round(&a, &b);
        let p = decode(&fb[0]).unwrap();
        assert_eq!((p.bth.opcode, p.aeth.syndrome), (op::RC_ACK, nak), "{name}");
        let status = if nak == aeth::NAK_INVALID_REQ {
            WC_REM_INV_REQ_ERR
        } else {
            WC_REM_ACCESS_ERR
        };
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_FETCH_ADD, status)],
            "{name}"
        );
        assert_eq!(b.bytes(remote.gpa, 4096), vec![0x33; 4096], "{name}");
        assert_eq!(a.bytes(local.gpa, 16), vec![0x44; 16], "{name}");
        assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR), "{name}");
        let access_event =
            b.h.take_events()
                .contains(&(EQE_QP_ACCESS_ERR, b.qps[0].qpn, 0x62));
        assert_eq!(access_event, nak == aeth::NAK_REM_ACCESS, "{name}");
    }
}

/// Local errors: nothing is sent and the WQE completes with the status the
/// spec names (an SGE of other than 8 bytes, inline, a local MR without
/// LOCAL_WRITE).
#[test]
fn local_atomic_errors_send_nothing() {
    for case in 0..4 {
        let (mut a, mut b) = rc_pair(with_atomics);
        let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let ro = a.reg_mr(4096, ACCESS_REMOTE_READ);
        let remote = b.reg_mr(4096, ATOMIC_ACCESS);
        let mut w = fetch_add(1, (local.va(0), local.key), &remote, 0, 1);
        let status = match case {
            0 => {
                w.sges = vec![(local.va(0), 4, local.key)];
                WC_LOC_LEN_ERR
            }
            1 => {
                w.sges = vec![(local.va(0), 8, local.key), (local.va(8), 8, local.key)];
                WC_LOC_LEN_ERR
            }
            2 => {
                w.sges.clear();
                w.inline = Some(vec![0; 8]);
                WC_LOC_QP_OP_ERR
            }
            _ => {
                w.sges = vec![(ro.va(0), 8, ro.key)];
                WC_LOC_PROT_ERR
            }
        };
        a.post_send(0, &w);
        assert!(a.h.dev.take_tx().is_empty(), "case {case}: nothing sent");
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_FETCH_ADD, status)],
            "case {case}"
        );
        assert_eq!(word(&b, remote.gpa), 0);
    }
}

/// max_rd_atomic bounds READs and atomics together on the requester: with
/// 2, never more than 2 unanswered READ/atomic requests are on the wire,
/// and 2 are reached. A requester beyond the responder's resources
/// (max_dest_rd_atomic 1) gets its second atomic NAKed invalid request,
/// which is not executed.
#[test]
fn max_rd_atomic_counts_reads_and_atomics() {
    let (mut a, mut b) = rc_pair(|x| {
        with_atomics(x);
        x.max_rd_atomic = 2;
        x.max_dest_rd_atomic = 2;
    });
    let local = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(8192, ATOMIC_ACCESS);
    let mut expect = Vec::new();
    for i in 0..12u64 {
        let w = if i % 3 == 2 {
            let mut r = atomic_wr(
                i,
                WR_RDMA_READ,
                (local.va(4096 + i * 64), local.key),
                &remote,
                512,
            );
            r.sges[0].1 = 64;
            expect.push((i, WC_RDMA_READ, WC_SUCCESS));
            r
        } else {
            expect.push((i, WC_FETCH_ADD, WC_SUCCESS));
            fetch_add(i, (local.va(i * 8), local.key), &remote, 0, 1)
        };
        a.post_send(0, &w);
    }
    let mut most = 0usize;
    for _ in 0..100 {
        let fa = a.h.dev.take_tx();
        if fa.is_empty() {
            break;
        }
        let requests = fa
            .iter()
            .map(|f| decode(f).unwrap().bth.opcode)
            .filter(|o| matches!(*o, op::RC_READ_REQUEST | op::RC_FETCH_ADD))
            .count();
        // Every round answers all requests: each round's are all unanswered.
        most = most.max(requests);
        assert!(requests <= 2, "{requests} READs/atomics outstanding");
        b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
        let fb = b.h.dev.take_tx();
        a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
    }
    assert_eq!(most, 2);
    assert_eq!(statuses(&a.poll()), expect);
    assert_eq!(word(&b, remote.gpa), 8);

    // max_rd_atomic 2 against max_dest_rd_atomic 1.
    let (mut a, mut b) = rc_pair(|x| {
        with_atomics(x);
        x.max_rd_atomic = 2;
        x.max_dest_rd_atomic = 1;
    });
    let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(4096, ATOMIC_ACCESS);
    a.post_send(0, &fetch_add(1, (local.va(0), local.key), &remote, 0, 1));
    a.post_send(0, &fetch_add(2, (local.va(8), local.key), &remote, 0, 1));
    let (fa, fb) = round(&a, &b);
    assert_eq!(fa.len(), 2, "max_rd_atomic 2: both go out");
    let resp: Vec<_> = fb.iter().map(|f| decode(f).unwrap()).collect();
    assert_eq!(resp[0].bth.opcode, op::RC_ATOMIC_ACK);
    assert_eq!(
        (resp[1].bth.opcode, resp[1].aeth.syndrome),
        (op::RC_ACK, aeth::NAK_INVALID_REQ)
    );
    assert_eq!(word(&b, remote.gpa), 1, "the NAKed atomic was not executed");
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_FETCH_ADD, WC_SUCCESS),
            (2, WC_FETCH_ADD, WC_REM_INV_REQ_ERR)
        ]
    );
}
