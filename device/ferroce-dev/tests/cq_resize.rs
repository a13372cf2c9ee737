// SPDX-License-Identifier: GPL-2.0
//! RESIZE_CQ (device 1.6, device.rst "Resizing a CQ"): every status the
//! command documents and that a failed command changes nothing; a resize
//! with CQEs not yet polled, done the way software does it (the new ring's
//! owner bits prepared for the window it will poll, the unpolled CQEs
//! copied after the command), the CQEs from the switch index on in the new
//! ring and the old ring never written again; growing, shrinking to
//! exactly the unconsumed CQEs, the overflow check at the new depth; the
//! arm state, the announced index and an error state carried over; and a
//! resize across the 16-bit index wrap.

mod common;
#[path = "common/holed.rs"]
mod holed;

use std::sync::Arc;

use common::*;
use ferroce_dev::doorbell::cq_db;
use ferroce_dev::hw::*;
use ferroce_dev::{FakeMemory, GuestMemory, Limits, PostError};
use holed::HoledMemory;
use zerocopy::IntoBytes;

/// A CQ under test and software's view of it: the ring it polls, the
/// ring's depth, its consumer index (written to the record when it polls).
struct SwCq {
    cqn: u32,
    ring: u64,
    depth: u32,
    dbrec: u64,
    ci: u16,
}

/// The owner bit the device writes for CQE `i` in a ring of `depth`.
fn phase(i: u16, depth: u32) -> u8 {
    ((u32::from(i) >> depth.trailing_zeros()) & 1) as u8 ^ 1
}

fn slot(ring: u64, depth: u32, i: u16) -> u64 {
    ring + u64::from(u32::from(i) & (depth - 1)) * CQE_SIZE as u64
}

/// A CQE whose wr_id is its index.
fn cqe(i: u16, flags: u8) -> Cqe {
    let mut c = Cqe::zeroed();
    c.wr_id = u64::from(i);
    c.opcode = WC_RECV;
    c.status = WC_SUCCESS;
    c.flags = flags;
    c.byte_len = 64;
    c
}

/// EQ 1 (16 entries) and a CQ of `depth` on it, record ci 0.
fn setup(h: &mut Harness, depth: u32) -> (SwCq, u64) {
    let (_, ceq) = h.create_eq(1, 16);
    let (cqn, ring, dbrec) = h.create_cq(1, depth, 0);
    h.mem.write_u32(dbrec, 0);
    let cq = SwCq {
        cqn,
        ring,
        depth,
        dbrec,
        ci: 0,
    };
    (cq, ceq)
}

impl SwCq {
    /// The device writes the CQE of index `i` (its wr_id).
    fn post(&self, h: &Harness, i: u16) {
        h.dev.post_cqe(self.cqn, cqe(i, 0)).unwrap();
    }

    /// Polls every CQE the owner bits show as written, checking that they
    /// come in index order; returns their indices.
    fn poll(&mut self, h: &Harness) -> Vec<u16> {
        self.poll_up_to(h, usize::MAX)
    }

    /// [`Self::poll`], at most `n` CQEs.
    fn poll_up_to(&mut self, h: &Harness, n: usize) -> Vec<u16> {
        let mut out = Vec::new();
        while out.len() < n {
            let c: Cqe = h.read(slot(self.ring, self.depth, self.ci));
            if c.owner & CQE_OWNER != phase(self.ci, self.depth) {
                break;
            }
            assert_eq!(c.wr_id, u64::from(self.ci), "CQE in index order");
            out.push(self.ci);
            self.ci = self.ci.wrapping_add(1);
        }
        h.mem.write_u32(self.dbrec, u32::from(self.ci));
        out
    }

    /// Posts and polls `n` CQEs, everything polled before (moves PI and ci
    /// on).
    fn advance(&mut self, h: &Harness, n: u32) {
        for _ in 0..n {
            let i = self.ci;
            self.post(h, i);
            assert_eq!(self.poll(h), vec![i]);
        }
    }

    /// Resizes to `depth` the way software does (device.rst): prepares the
    /// new ring's owner bits for the window `ci .. ci + depth - 1` to "not
    /// written", issues the command, copies the old ring's CQEs `ci .. S -
    /// 1` into the new ring with the new phase (body first, owner last)
    /// and from then on polls the new ring. Returns S.
    fn resize(&mut self, h: &mut Harness, depth: u32) -> u16 {
        let (c, ring) = h.cq_resize_cmd(self.cqn, depth);
        for k in 0..depth {
            let i = self.ci.wrapping_add(k as u16);
            let owner = slot(ring, depth, i) + CQE_SIZE as u64 - 1;
            h.mem.write(owner, &[phase(i, depth) ^ 1]).unwrap();
        }
        let pi = cq_pi(h, self.cqn);
        let s = h.ok(&c);
        assert_eq!(s, u32::from(pi), "out[0] is the PI at the switch");
        let s = s as u16;
        let mut i = self.ci;
        while i != s {
            let mut e: Cqe = h.read(slot(self.ring, self.depth, i));
            assert_eq!(e.owner & CQE_OWNER, phase(i, self.depth), "old CQE {i}");
            let owner = phase(i, depth);
            e.owner = 0;
            let at = slot(ring, depth, i);
            h.mem.write(at, &e.as_bytes()[..CQE_SIZE - 1]).unwrap();
            h.mem.write(at + CQE_SIZE as u64 - 1, &[owner]).unwrap();
            i = i.wrapping_add(1);
        }
        self.ring = ring;
        self.depth = depth;
        s
    }

    fn bytes(&self, h: &Harness) -> Vec<u8> {
        let mut b = vec![0u8; self.depth as usize * CQE_SIZE];
        h.mem.read(self.ring, &mut b).unwrap();
        b
    }
}

/// The COMPLETION events of a 16-entry CEQ since `ci`, consumed.
fn ceq_events(h: &Harness, ceq: u64, ci: &mut u16) -> Vec<(u8, u32, u32)> {
    let mut out = Vec::new();
    loop {
        let e: Eqe = h.read(ceq + u64::from(*ci & 15) * EQE_SIZE as u64);
        if e.owner & EQE_OWNER != ((*ci >> 4) & 1) as u8 ^ 1 {
            return out;
        }
        out.push((e.event_type, e.obj, e.data));
        *ci = ci.wrapping_add(1);
    }
}

fn cq_pi(h: &Harness, cqn: u32) -> u16 {
    let objects = h.dev.objects();
    objects.cqs.iter().find(|c| c.handle == cqn).unwrap().obj.pi
}

/// The CQ's fields the device shows (pages aside).
fn cq_json(h: &Harness, cqn: u32) -> String {
    let objects = h.dev.objects();
    let cq = objects.cqs.iter().find(|c| c.handle == cqn).unwrap();
    serde_json::to_string(&cq.obj).unwrap()
}

#[test]
fn resize_cq_checks_every_field() {
    type Case = (Box<dyn Fn(&mut CmdResizeCq)>, u8);
    let mem = Arc::new(FakeMemory::new());
    mem.add_region(RAM, RAM_SIZE);
    let holed = Arc::new(HoledMemory::new(mem.clone()));
    let mut h = Harness::enabled_over(mem, holed.clone(), Limits::default(), 16, 64);
    let (mut cq, _) = setup(&mut h, 8);
    let (gone, _, _) = h.create_cq(1, 4, 0);
    let c = CmdDestroyCq {
        hdr: CmdHdr {
            opcode: CMD_DESTROY_CQ,
            ..CmdHdr::zeroed()
        },
        cqn: gone,
        reserved: 0,
    };
    h.ok(&c);
    // Five CQEs written, two polled: three unconsumed.
    for i in 0..5 {
        cq.post(&h, i);
    }
    h.mem.write_u32(cq.dbrec, 2);
    let max_cqe = h.dev.config().limits.max_cqe;
    // A one-page ring (level 0) for 4 CQEs; it would hold 128.
    let (base, _) = h.cq_resize_cmd(cq.cqn, 4);
    assert_eq!(base.buf.level, PBL_LEVEL_0);
    let cases: Vec<Case> = vec![
        (Box::new(|c| c.hdr.flags = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.reserved = 1 << 63), STATUS_BAD_RESERVED),
        (Box::new(|c| c.buf.reserved = 1), STATUS_BAD_RESERVED),
        (Box::new(|c| c.depth = 0), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 1), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 6), STATUS_BAD_PARAM),
        (Box::new(move |c| c.depth = max_cqe * 2), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 1 << 31), STATUS_BAD_PARAM),
        (Box::new(|c| c.depth = 256), STATUS_BAD_PARAM), // ring too small
        (Box::new(|c| c.buf.page_shift = 11), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.page_shift = 64), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.page_count = 0), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.page_count = 2), STATUS_BAD_PARAM), // level 0
        (Box::new(|c| c.buf.level = 3), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.addr += 8), STATUS_BAD_PARAM), // misaligned page
        (Box::new(|c| c.cqn = 0), STATUS_BAD_HANDLE),
        (Box::new(|c| c.cqn = 99), STATUS_BAD_HANDLE),
        (Box::new(|c| c.cqn = u32::MAX), STATUS_BAD_HANDLE),
        (Box::new(move |c| c.cqn = gone), STATUS_BAD_HANDLE),
        // Three CQEs unconsumed: a ring of 2 cannot hold them.
        (Box::new(|c| c.depth = 2), STATUS_BAD_PARAM),
        (Box::new(|c| c.buf.addr = UNMAPPED), STATUS_DMA_ERROR),
        // The first check that fails decides.
        (
            Box::new(|c| {
                c.reserved = 1;
                c.depth = 3;
            }),
            STATUS_BAD_RESERVED,
        ),
        (
            Box::new(|c| {
                c.depth = 3;
                c.cqn = 99;
            }),
            STATUS_BAD_PARAM,
        ),
        (
            Box::new(|c| {
                c.cqn = 99;
                c.buf.addr = UNMAPPED;
            }),
            STATUS_BAD_HANDLE,
        ),
        (
            Box::new(|c| {
                c.depth = 2;
                c.buf.addr = UNMAPPED;
            }),
            STATUS_BAD_PARAM,
        ),
    ];
    let before = cq_json(&h, cq.cqn);
    for (i, (edit, status)) in cases.iter().enumerate() {
        let mut c = base;
        edit(&mut c);
        assert_eq!(h.cmd(&c).0, *status, "case {i}");
        assert_eq!(cq_json(&h, cq.cqn), before, "case {i} changed the CQ");
    }
    // The record unreadable: DMA_ERROR, counted as a DMA error.
    let bad_dma = h.dev.counters().hw.bad_dma;
    holed.set_hole(Some((cq.dbrec, 8)));
    assert_eq!(h.cmd(&base).0, STATUS_DMA_ERROR);
    holed.set_hole(None);
    assert_eq!(h.dev.counters().hw.bad_dma, bad_dma + 1);
    assert_eq!(cq_json(&h, cq.cqn), before);
    // A record ci beyond PI: PI - ci (16-bit) is more than any depth.
    h.mem.write_u32(cq.dbrec, 6);
    let (big, _) = h.cq_resize_cmd(cq.cqn, max_cqe);
    assert_eq!(h.cmd(&big).0, STATUS_BAD_PARAM);
    h.mem.write_u32(cq.dbrec, 2);
    // Nothing changed: the next CQE still lands in the old ring.
    cq.post(&h, 5);
    assert_eq!(cq.poll(&h), vec![0, 1, 2, 3, 4, 5]);
    // The largest depth is allowed; the ring then is 256 pages (level 1).
    assert_eq!(big.buf.level, PBL_LEVEL_1);
    assert_eq!(h.ok(&big), 6);
    let objects = h.dev.objects();
    let obj = &objects.cqs.iter().find(|x| x.handle == cq.cqn).unwrap().obj;
    assert_eq!((obj.depth, obj.pi), (max_cqe, 6));
}

#[test]
fn unpolled_cqes_move_and_new_ones_land_in_the_new_ring() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 8);
    // Move past a phase flip of the old ring: PI = ci = 11.
    cq.advance(&h, 11);
    // Six CQEs written, two polled: C = 13, S = 17.
    for i in 11..17 {
        cq.post(&h, i);
    }
    assert_eq!(cq.poll_up_to(&h, 2), vec![11, 12]);
    let (old_ring, old) = (cq.ring, cq.bytes(&h));
    assert_eq!(cq.resize(&mut h, 16), 17);
    // The copied CQEs poll from the new ring, and nothing beyond them.
    assert_eq!(cq.poll(&h), vec![13, 14, 15, 16]);
    // New CQEs: slot i & 15 of the new ring with the new phase.
    for i in 17..29 {
        cq.post(&h, i);
        let e: Cqe = h.read(slot(cq.ring, 16, i));
        assert_eq!((e.wr_id, e.owner & CQE_OWNER), (u64::from(i), phase(i, 16)));
    }
    assert_eq!(cq.poll(&h), (17..29).collect::<Vec<_>>());
    // 16 ahead of ci fit, the 17th does not (the new depth counts).
    for i in 29..45 {
        cq.post(&h, i);
    }
    let overflow = h.dev.post_cqe(cq.cqn, cqe(45, 0));
    assert_eq!(overflow, Err(PostError::Overflow));
    assert_eq!(cq.poll(&h), (29..45).collect::<Vec<_>>());
    // The old ring was not written after the switch.
    let mut now = vec![0u8; old.len()];
    h.mem.read(old_ring, &mut now).unwrap();
    assert_eq!(now, old, "old ring written after RESIZE_CQ");
}

#[test]
fn the_old_ring_is_not_written_after_the_switch() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 4);
    cq.advance(&h, 3);
    cq.post(&h, 3);
    cq.post(&h, 4);
    let old = cq.bytes(&h);
    let old_ring = cq.ring;
    assert_eq!(cq.resize(&mut h, 32), 5);
    for i in 5..30 {
        cq.post(&h, i);
    }
    assert_eq!(cq.poll(&h), (3..30).collect::<Vec<_>>());
    let mut now = vec![0u8; old.len()];
    h.mem.read(old_ring, &mut now).unwrap();
    assert_eq!(now, old, "old ring written after RESIZE_CQ");
}

#[test]
fn grow_then_shrink_to_exactly_the_unconsumed_cqes() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 4);
    // Grow 4 -> 64 with three unconsumed, then fill far beyond 4.
    for i in 0..3 {
        cq.post(&h, i);
    }
    assert_eq!(cq.resize(&mut h, 64), 3);
    for i in 3..40 {
        cq.post(&h, i);
    }
    assert_eq!(cq.poll(&h), (0..40).collect::<Vec<_>>());
    // Five unconsumed: a ring of 4 is one short.
    for i in 40..45 {
        cq.post(&h, i);
    }
    let (c, _) = h.cq_resize_cmd(cq.cqn, 4);
    assert_eq!(h.cmd(&c).0, STATUS_BAD_PARAM);
    // Software polls one: four unconsumed fit 4.
    assert_eq!(cq.poll_up_to(&h, 1), vec![40]);
    assert_eq!(cq.resize(&mut h, 4), 45);
    // Full: the next CQE overflows at the new depth.
    assert_eq!(h.dev.post_cqe(cq.cqn, cqe(45, 0)), Err(PostError::Overflow));
    assert_eq!(
        h.take_events(),
        vec![(EQE_CQ_ERROR, cq.cqn, CQ_SYNDROME_OVERFLOW)]
    );
    assert_eq!(cq.poll(&h), vec![41, 42, 43, 44]);
}

#[test]
fn overflow_after_a_shrink_is_checked_at_the_new_depth() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 64);
    for i in 0..2 {
        cq.post(&h, i);
    }
    assert_eq!(cq.resize(&mut h, 4), 2);
    h.take_events();
    cq.post(&h, 2);
    cq.post(&h, 3);
    // The old depth had room for 60 more; the new one has none.
    assert_eq!(h.dev.post_cqe(cq.cqn, cqe(4, 0)), Err(PostError::Overflow));
    assert_eq!(
        h.take_events(),
        vec![(EQE_CQ_ERROR, cq.cqn, CQ_SYNDROME_OVERFLOW)]
    );
    assert_eq!(cq.poll(&h), vec![0, 1, 2, 3]);
    // The error state carries over a resize.
    assert_eq!(cq.resize(&mut h, 8), 4);
    assert_eq!(h.dev.post_cqe(cq.cqn, cqe(4, 0)), Err(PostError::CqError));
    let objects = h.dev.objects();
    assert!(objects.cqs[0].obj.error);
}

#[test]
fn an_armed_cq_stays_armed_across_a_resize() {
    let mut h = Harness::new();
    let (mut cq, ceq) = setup(&mut h, 8);
    let mut eci = 0u16;
    cq.advance(&h, 5);
    // Armed with everything polled: the resize raises nothing, the next
    // CQE (in the new ring) fires the arm.
    h.db(0, DB_CQ, cq_db(cq.cqn, 5, CQ_CMD_ARM_NEXT, 2));
    assert_eq!(cq.resize(&mut h, 16), 5);
    assert_eq!(ceq_events(&h, ceq, &mut eci), vec![]);
    cq.post(&h, 5);
    assert_eq!(
        ceq_events(&h, ceq, &mut eci),
        vec![(EQE_COMPLETION, cq.cqn, 2)]
    );
    // Announced CQE 5 still unpolled: re-armed, resized, still no second
    // event for it; the next CQE fires.
    h.db(0, DB_CQ, cq_db(cq.cqn, 5, CQ_CMD_ARM_NEXT, 3));
    assert_eq!(cq.resize(&mut h, 32), 6);
    assert_eq!(ceq_events(&h, ceq, &mut eci), vec![]);
    cq.post(&h, 6);
    assert_eq!(
        ceq_events(&h, ceq, &mut eci),
        vec![(EQE_COMPLETION, cq.cqn, 3)]
    );
    // A solicited arm across a shrink: unsolicited CQEs raise nothing, the
    // solicited one fires.
    assert_eq!(cq.poll(&h), vec![5, 6]);
    h.db(0, DB_CQ, cq_db(cq.cqn, 7, CQ_CMD_ARM_SOLICITED, 1));
    assert_eq!(cq.resize(&mut h, 2), 7);
    cq.post(&h, 7);
    assert_eq!(ceq_events(&h, ceq, &mut eci), vec![]);
    h.dev.post_cqe(cq.cqn, cqe(8, CQE_SOLICITED)).unwrap();
    assert_eq!(
        ceq_events(&h, ceq, &mut eci),
        vec![(EQE_COMPLETION, cq.cqn, 1)]
    );
    assert_eq!(cq.poll(&h), vec![7, 8]);
}

#[test]
fn a_resize_across_the_16_bit_index_wrap() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 4);
    // PI = ci = 65531.
    cq.advance(&h, 65531);
    // Three written, none polled: C = 65531, S = 65534.
    for i in 65531..65534 {
        cq.post(&h, i);
    }
    let old = cq.bytes(&h);
    let old_ring = cq.ring;
    assert_eq!(cq.resize(&mut h, 8), 65534);
    // Five more, across the wrap: 65534, 65535, 0, 1, 2 (eight unconsumed).
    for i in [65534, 65535, 0, 1, 2] {
        cq.post(&h, i);
        let e: Cqe = h.read(slot(cq.ring, 8, i));
        assert_eq!((e.wr_id, e.owner & CQE_OWNER), (u64::from(i), phase(i, 8)));
    }
    assert_eq!(phase(65535, 8), 0);
    assert_eq!(phase(0, 8), 1);
    assert_eq!(h.dev.post_cqe(cq.cqn, cqe(3, 0)), Err(PostError::Overflow));
    assert_eq!(
        cq.poll(&h),
        vec![65531, 65532, 65533, 65534, 65535, 0, 1, 2]
    );
    let mut now = vec![0u8; old.len()];
    h.mem.read(old_ring, &mut now).unwrap();
    assert_eq!(now, old);
}

#[test]
fn a_resize_with_a_switch_index_right_at_the_wrap() {
    let mut h = Harness::new();
    let (mut cq, _) = setup(&mut h, 16);
    // PI = ci = 65530, then six written: S = 0 (65536).
    cq.advance(&h, 65530);
    for i in 65530..=65535 {
        cq.post(&h, i);
    }
    assert_eq!(cq.poll_up_to(&h, 3), vec![65530, 65531, 65532]);
    assert_eq!(cq.resize(&mut h, 4), 0);
    cq.post(&h, 0);
    assert_eq!(cq.poll(&h), vec![65533, 65534, 65535, 0]);
    for i in 1..5 {
        cq.post(&h, i);
    }
    assert_eq!(cq.poll(&h), vec![1, 2, 3, 4]);
}
