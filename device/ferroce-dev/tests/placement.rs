// SPDX-License-Identifier: GPL-2.0
//! IBTA 1.5's memory placement extensions (device 1.8, device.rst "Atomic
//! write and flush"): ATOMIC_WRITE and FLUSH on the wire and byte-exact in
//! memory, the responder's checks in their order with the NAK and the CQE
//! status each gives, the WQE checks, the replay of duplicates without
//! re-execution, the implied NAK, max_rd_atomic and FENCE, and the
//! FLUSH_GLOBAL / FLUSH_PERSISTENT access flags of MRs, windows and QPs.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::wire::{aeth, decode, feth, op, Packet};
use zerocopy::IntoBytes;

/// The rights of the responder's target MR.
const TARGET: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_FLUSH_GLOBAL;
/// The same without the flush right.
const NO_FLUSH: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
/// The QP access flags of full_attr (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ).
const QP_RW: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
/// Both flush rights of a QP.
const QP_FLUSH: u32 = ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT;
/// The 8 bytes the ATOMIC_WRITEs place: no two alike, so that any
/// reordering or byte swap shows.
const DATA: [u8; 8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
const LOCAL: [u8; 8] = [0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7];
/// Ethernet + IPv4 + UDP: where the BTH of a frame on the wire starts.
const BTH_AT: usize = 14 + 20 + 8;

fn with_flush(x: &mut QpAttr) {
    x.qp_access_flags |= ACCESS_FLUSH_GLOBAL;
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The bytes of an ATOMIC_WRITE send WQE (256-byte stride).
fn aw_wqe(wr_id: u64, flags: u8, remote_addr: u64, rkey: u32, data: [u8; 8]) -> Vec<u8> {
    let seg = SqWqeAtomicWrite {
        remote_addr,
        rkey,
        reserved0: 0,
        data,
        reserved1: 0,
    };
    raw_wqe(wr_id, WR_ATOMIC_WRITE, flags, seg.as_bytes())
}

fn flush_seg(remote_addr: u64, rkey: u32, length: u32, ty: u8, level: u8) -> SqWqeFlush {
    SqWqeFlush {
        remote_addr,
        rkey,
        length,
        r#type: ty,
        level,
        reserved0: [0; 6],
        reserved1: 0,
    }
}

/// The bytes of a FLUSH send WQE.
fn flush_wqe(wr_id: u64, flags: u8, seg: &SqWqeFlush) -> Vec<u8> {
    raw_wqe(wr_id, WR_FLUSH, flags, seg.as_bytes())
}

fn raw_wqe(wr_id: u64, opcode: u8, flags: u8, seg: &[u8]) -> Vec<u8> {
    let mut raw = vec![0u8; 256];
    raw[0..8].copy_from_slice(&wr_id.to_le_bytes());
    raw[8] = opcode;
    raw[9] = flags;
    raw[SQ_WQE_SEG_OFFSET..SQ_WQE_SEG_OFFSET + seg.len()].copy_from_slice(seg);
    raw
}

/// Moves one round of frames a -> b -> a; returns (a's, b's) frames.
fn round(a: &Node, b: &Node) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let fa = a.h.dev.take_tx();
    b.h.dev.receive_batch(fa.iter().map(|f| f.as_slice()));
    let fb = b.h.dev.take_tx();
    a.h.dev.receive_batch(fb.iter().map(|f| f.as_slice()));
    (fa, fb)
}

fn deliver(to: &Node, frames: &[Vec<u8>]) {
    to.h.dev.receive_batch(frames.iter().map(|f| f.as_slice()));
}

fn be32_at(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(f[at..at + 4].try_into().unwrap())
}

fn be64_at(f: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(f[at..at + 8].try_into().unwrap())
}

/// Checks that `f` is the zero-length RDMA_READ_RESPONSE_ONLY answering
/// PSN `psn`: BTH, AETH with an ACK syndrome, no payload, ICRC.
fn assert_placement_response(f: &[u8], psn: u32) {
    assert_eq!(
        f.len(),
        BTH_AT + 12 + 4 + 4,
        "BTH + AETH + ICRC, no payload"
    );
    assert_eq!(f[BTH_AT], op::RC_READ_RESPONSE_ONLY);
    assert_eq!(f[BTH_AT + 1] & 0x30, 0, "no pad");
    let p = decode(f).unwrap();
    assert_eq!(p.bth.opcode, 0x10);
    assert_eq!(p.bth.psn, psn);
    assert!(!p.bth.ack_req);
    assert_eq!(p.aeth.syndrome & aeth::TYPE_MASK, aeth::ACK);
    assert_eq!(f[BTH_AT + 12] & 0xe0, 0, "AETH: an ACK");
    assert!(p.payload.is_empty());
}

// ------------------------------------------------------------ version

#[test]
fn version_1_8_advertises_atomic_write_and_flush() {
    let mut h = Harness::new();
    assert_eq!(h.reg_r(REG_VERSION) >> VERSION_MAJOR_SHIFT, 1);
    assert!(h.reg_r(REG_VERSION) & VERSION_MINOR_MASK >= 8);
    assert_eq!(
        h.reg_r(REG_DEV_CAPS),
        0xffffff,
        "device.rst: DEV_CAPS in 1.8 (1.9 adds no bit)"
    );
    let caps = h.reg_r(REG_DEV_CAPS);
    assert_eq!(caps & CAP_ATOMIC_WRITE, CAP_ATOMIC_WRITE);
    assert_eq!(caps & CAP_FLUSH, CAP_FLUSH);
    let q = h.query_caps();
    assert_eq!(q.device_caps, 0xffffff);
    assert_eq!(q.fw_version, u64::from(h.reg_r(REG_VERSION)) << 16);
}

// ------------------------------------------------------------ success

/// ATOMIC_WRITE: the request on the wire (0x1d, AckReq, RETH with length
/// 8, the 8 bytes as posted), the zero-length READ response, the bytes in
/// remote memory verbatim and nothing around them, the CQE (opcode 9,
/// byte_len 8); the responder's receive queue is not touched. The same
/// through a memory window with REMOTE_WRITE.
#[test]
fn atomic_write_places_its_eight_bytes_verbatim() {
    let (mut a, mut b) = rc_pair(|_| {});
    let remote = b.reg_mr(4096, TARGET | ACCESS_MW_BIND);
    let buf = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.fill(remote.gpa, &[0x5a; 128]);
    b.post_recv(0, 77, &[(buf.va(0), 64, buf.key)]);
    a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, remote.va(16), remote.key, DATA));
    let (fa, fb) = round(&a, &b);
    assert_eq!(fa.len(), 1);
    let f = &fa[0];
    // BTH + RETH + 8 bytes of payload + ICRC, no pad.
    assert_eq!(f.len(), BTH_AT + 12 + 16 + 8 + 4);
    assert_eq!(f[BTH_AT], 0x1d);
    assert_eq!(f[BTH_AT + 1] & 0x30, 0, "no pad");
    assert_eq!(f[BTH_AT + 8] & 0x80, 0x80, "AckReq");
    assert_eq!(be64_at(f, BTH_AT + 12), remote.va(16));
    assert_eq!(be32_at(f, BTH_AT + 20), remote.key);
    assert_eq!(be32_at(f, BTH_AT + 24), 8, "RETH DMA length");
    assert_eq!(&f[BTH_AT + 28..BTH_AT + 36], &DATA);
    let req = decode(f).unwrap();
    assert_eq!(req.bth.opcode, op::RC_ATOMIC_WRITE);
    assert_eq!(req.payload, &DATA);
    assert_eq!(fb.len(), 1);
    assert_placement_response(&fb[0], req.bth.psn);
    let mut want = vec![0x5a; 128];
    want[16..24].copy_from_slice(&DATA);
    assert_eq!(b.bytes(remote.gpa, 128), want);
    let c = a.poll();
    assert_eq!(statuses(&c), vec![(1, WC_ATOMIC_WRITE, WC_SUCCESS)]);
    assert_eq!(c[0].byte_len, 8);
    assert!(b.poll().is_empty(), "no CQE at the responder");

    // Through a type 1 window with REMOTE_WRITE.
    let mw = b.alloc_mw(MR_TYPE_MW1) + 1;
    let seg = bind_seg(mw, remote.key, remote.va(0), 64, ACCESS_REMOTE_WRITE);
    b.post_bind_mw(0, 5, &seg);
    assert_eq!(statuses(&b.poll()), vec![(5, WC_BIND_MW, WC_SUCCESS)]);
    a.post_send_raw(0, &aw_wqe(2, WQE_SIGNALED, remote.va(56), mw, LOCAL));
    round(&a, &b);
    want[56..64].copy_from_slice(&LOCAL);
    assert_eq!(b.bytes(remote.gpa, 128), want);
    let c = a.poll();
    assert_eq!(statuses(&c), vec![(2, WC_ATOMIC_WRITE, WC_SUCCESS)]);
    // The receive is still there: the next SEND takes it.
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.post_send(
        0,
        &SendWr {
            sges: vec![(src.va(0), 16, src.key)],
            ..wr(3, WR_SEND)
        },
    );
    run(&a, &b);
    assert_eq!(statuses(&b.poll()), vec![(77, WC_RECV, WC_SUCCESS)]);
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 0);
}

/// A zero-based MR whose first byte is 4 bytes into its page: an aligned
/// VA at the end of the first page is a word across two pages that are not
/// contiguous in guest memory. The 8 bytes still land verbatim, half in
/// each page.
#[test]
fn an_atomic_write_across_two_pages_lands_verbatim() {
    let (mut a, mut b) = rc_pair(|_| {});
    let p0 = b.h.alloc(4096, 4096);
    b.h.alloc(4096, 4096); // a gap
    let p1 = b.h.alloc(4096, 4096);
    b.fill(p0, &[0x5a; 4096]);
    b.fill(p1, &[0x5a; 4096]);
    let list = b.h.alloc(16, 8);
    b.fill(list, &[p0.to_le_bytes(), p1.to_le_bytes()].concat());
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = Pbl {
        addr: list,
        page_count: 2,
        page_shift: 12,
        level: PBL_LEVEL_1,
        reserved: 0,
    };
    c.offset = 4;
    c.length = 8000;
    c.pdn = b.pdn;
    c.access = TARGET | ACCESS_ZERO_BASED;
    c.key_variant = 0x11;
    let key = b.h.ok(&c);
    a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, 4088, key, DATA));
    round(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_ATOMIC_WRITE, WC_SUCCESS)]);
    assert_eq!(
        b.bytes(p0 + 4088, 8),
        [0x5a, 0x5a, 0x5a, 0x5a, 0x11, 0x22, 0x33, 0x44]
    );
    assert_eq!(
        b.bytes(p1, 8),
        [0x55, 0x66, 0x77, 0x88, 0x5a, 0x5a, 0x5a, 0x5a]
    );
}

/// FLUSH of level RANGE (a whole MR, a zero-length range inside it and one
/// at its end) and of level MR (whose address and length, here outside the
/// MR and huge, are sent but not used): the request on the wire (0x1c,
/// AckReq, FETH with the type in bits 3:0 and the level in bits 5:4 before
/// the RETH, no payload), the zero-length READ response, the CQE (opcode
/// 8, byte_len 0), and no byte of the responder's memory changed.
#[test]
fn flush_of_a_range_and_of_a_whole_mr_succeeds() {
    let (mut a, mut b) = rc_pair(with_flush);
    let remote = b.reg_mr(8192, TARGET);
    b.fill(remote.gpa, &pattern(3, 8192));
    let cases = [
        (1, remote.va(0), 8192, FLUSH_RANGE),
        (2, remote.va(100), 0, FLUSH_RANGE),
        (3, remote.va(8192), 0, FLUSH_RANGE),
        (4, 0xdead_0000_0000, u32::MAX, FLUSH_MR),
        (5, 0, 0, FLUSH_MR),
    ];
    for (id, va, len, level) in cases {
        let seg = flush_seg(va, remote.key, len, FLUSH_GLOBAL, level);
        a.post_send_raw(0, &flush_wqe(id, WQE_SIGNALED, &seg));
        let (fa, fb) = round(&a, &b);
        assert_eq!(fa.len(), 1, "case {id}");
        let f = &fa[0];
        // BTH + FETH + RETH + ICRC.
        assert_eq!(f.len(), BTH_AT + 12 + 4 + 16 + 4, "case {id}");
        assert_eq!(f[BTH_AT], 0x1c);
        assert_eq!(f[BTH_AT + 8] & 0x80, 0x80, "AckReq");
        let word = u32::from(FLUSH_GLOBAL) | u32::from(level) << 4;
        assert_eq!(be32_at(f, BTH_AT + 12), word, "case {id}: FETH");
        assert_eq!(be64_at(f, BTH_AT + 16), va);
        assert_eq!(be32_at(f, BTH_AT + 24), remote.key);
        assert_eq!(be32_at(f, BTH_AT + 28), len);
        let req = decode(f).unwrap();
        assert_eq!(req.bth.opcode, op::RC_FLUSH);
        assert_eq!(req.feth, word);
        assert_eq!(
            (feth::placement_type(req.feth), feth::level(req.feth)),
            (FLUSH_GLOBAL, level)
        );
        assert!(req.payload.is_empty());
        assert_eq!(fb.len(), 1, "case {id}");
        assert_placement_response(&fb[0], req.bth.psn);
        let c = a.poll();
        assert_eq!(statuses(&c), vec![(id, WC_FLUSH, WC_SUCCESS)], "case {id}");
        assert_eq!(c[0].byte_len, 0);
    }
    assert_eq!(b.bytes(remote.gpa, 8192), pattern(3, 8192));
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 0);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
}

/// An ATOMIC_WRITE and a FLUSH between WRITEs and a READ: everything in
/// SQ order, the FLUSH after the WRITE it makes visible, the READ sees the
/// ATOMIC_WRITE.
#[test]
fn placement_operations_keep_their_order_with_the_others() {
    let (mut a, mut b) = rc_pair(with_flush);
    let local = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(8192, TARGET);
    a.fill(local.gpa, &pattern(9, 4096));
    a.post_send(0, &write_wr(1, &local, 3000, remote.va(0), remote.key));
    let seg = flush_seg(remote.va(0), remote.key, 3000, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &flush_wqe(2, WQE_SIGNALED, &seg));
    a.post_send_raw(0, &aw_wqe(3, WQE_SIGNALED, remote.va(8), remote.key, DATA));
    a.post_send(
        0,
        &SendWr {
            remote_addr: remote.va(0),
            rkey: remote.key,
            sges: vec![(local.va(4096), 64, local.key)],
            ..wr(4, WR_RDMA_READ)
        },
    );
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_RDMA_WRITE, WC_SUCCESS),
            (2, WC_FLUSH, WC_SUCCESS),
            (3, WC_ATOMIC_WRITE, WC_SUCCESS),
            (4, WC_RDMA_READ, WC_SUCCESS),
        ]
    );
    let mut want = pattern(9, 64);
    want[8..16].copy_from_slice(&DATA);
    assert_eq!(a.bytes(local.gpa + 4096, 64), want);
    let mut remote_want = pattern(9, 3000);
    remote_want[8..16].copy_from_slice(&DATA);
    assert_eq!(b.bytes(remote.gpa, 3000), remote_want);
}

// ------------------------------------------------------------ remote errors

/// One request the responder must refuse: the responder's QP attributes
/// (`b_attr`), the target MR's rights, the WQE (made from b and the MR),
/// an edit of the request on the wire, the NAK it must get.
struct Refused {
    name: &'static str,
    b_attr: fn(&mut QpAttr),
    mr_access: u32,
    wqe: fn(&mut Node, &MrInfo) -> Vec<u8>,
    forge: fn(&mut Packet<'_>),
    nak: u8,
}

fn no_forge(_: &mut Packet<'_>) {}

/// A type 1 window over the first 4 KiB of `m` with `access`.
fn window(b: &mut Node, m: &MrInfo, access: u32) -> u32 {
    let mw = b.alloc_mw(MR_TYPE_MW1) + 1;
    b.post_bind_mw(0, 0xb1d, &bind_seg(mw, m.key, m.va(0), 4096, access));
    assert_eq!(statuses(&b.poll()), vec![(0xb1d, WC_BIND_MW, WC_SUCCESS)]);
    mw
}

fn flush_of(m: &MrInfo, key: u32, off: u64, len: u32, ty: u8, level: u8) -> Vec<u8> {
    flush_wqe(1, WQE_SIGNALED, &flush_seg(m.va(off), key, len, ty, level))
}

static BYTES16: [u8; 16] = [0x99; 16];

fn refused_cases() -> Vec<Refused> {
    fn global(x: &mut QpAttr) {
        x.qp_access_flags = QP_RW | ACCESS_FLUSH_GLOBAL;
    }
    fn both(x: &mut QpAttr) {
        x.qp_access_flags = QP_RW | QP_FLUSH;
    }
    fn plain(_: &mut QpAttr) {}
    let inv = aeth::NAK_INVALID_REQ;
    let acc = aeth::NAK_REM_ACCESS;
    vec![
        // ATOMIC_WRITE, in the order of the checks.
        Refused {
            name: "AW: QP without REMOTE_WRITE",
            b_attr: |x| x.qp_access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "AW: max_dest_rd_atomic 0",
            b_attr: |x| x.max_dest_rd_atomic = 0,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "AW: RETH length 16",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: |p| p.reth.len = 16,
            nak: inv,
        },
        Refused {
            name: "AW: RETH length 0",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: |p| p.reth.len = 0,
            nak: inv,
        },
        Refused {
            name: "AW: 4 bytes of payload",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: |p| p.payload = &BYTES16[..4],
            nak: inv,
        },
        Refused {
            name: "AW: 16 bytes of payload and RETH length 16",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: |p| {
                p.payload = &BYTES16;
                p.reth.len = 16;
            },
            nak: inv,
        },
        Refused {
            name: "AW: misaligned VA",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(4), m.key, DATA),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "AW: misaligned VA with a bad rkey (alignment first)",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(1), m.key ^ 0x100, DATA),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "AW: unknown rkey",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key ^ 0x100, DATA),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "AW: stale rkey variant",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), with_variant(m.key, 0x12), DATA),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "AW: MR without REMOTE_WRITE",
            b_attr: plain,
            mr_access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(0), m.key, DATA),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "AW: beyond the MR",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| aw_wqe(1, WQE_SIGNALED, m.va(4096), m.key, DATA),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "AW: window without REMOTE_WRITE",
            b_attr: plain,
            mr_access: TARGET | ACCESS_MW_BIND,
            wqe: |b, m| {
                let mw = window(b, m, ACCESS_REMOTE_READ);
                aw_wqe(1, WQE_SIGNALED, m.va(0), mw, DATA)
            },
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "AW: rkey of another PD",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |b, _| {
                let home = b.pdn;
                b.pdn = b.h.alloc_pd();
                let other = b.reg_mr(4096, TARGET);
                b.pdn = home;
                aw_wqe(1, WQE_SIGNALED, other.va(0), other.key, DATA)
            },
            forge: no_forge,
            nak: acc,
        },
        // FLUSH, in the order of the checks.
        Refused {
            name: "FLUSH: FETH type 0",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: |p| p.feth = feth::encode(0, FLUSH_RANGE),
            nak: inv,
        },
        Refused {
            name: "FLUSH: FETH type 4",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: |p| p.feth = feth::encode(4 | FLUSH_GLOBAL, FLUSH_RANGE),
            nak: inv,
        },
        Refused {
            name: "FLUSH: FETH level 2",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: |p| p.feth = feth::encode(FLUSH_GLOBAL, 2),
            nak: inv,
        },
        Refused {
            name: "FLUSH: FETH reserved bit",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: |p| p.feth |= 0x8000_0000,
            nak: inv,
        },
        Refused {
            name: "FLUSH: max_dest_rd_atomic 0",
            b_attr: |x| {
                x.qp_access_flags |= ACCESS_FLUSH_GLOBAL;
                x.max_dest_rd_atomic = 0;
            },
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "FLUSH: GLOBAL, QP without FLUSH_GLOBAL",
            b_attr: plain,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "FLUSH: GLOBAL, QP with FLUSH_PERSISTENT only",
            b_attr: |x| x.qp_access_flags = QP_RW | ACCESS_FLUSH_PERSISTENT,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_MR),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "FLUSH: PERSISTENT, QP with FLUSH_GLOBAL only",
            b_attr: global,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_PERSISTENT, FLUSH_RANGE),
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "FLUSH: QP without the right, through a window (QP first)",
            b_attr: plain,
            mr_access: TARGET | ACCESS_MW_BIND,
            wqe: |b, m| {
                let mw = window(b, m, ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ);
                flush_of(m, mw, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE)
            },
            forge: no_forge,
            nak: inv,
        },
        Refused {
            name: "FLUSH: MR without FLUSH_GLOBAL",
            b_attr: global,
            mr_access: NO_FLUSH,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: MR without FLUSH_GLOBAL, level MR",
            b_attr: global,
            mr_access: NO_FLUSH,
            wqe: |_, m| flush_of(m, m.key, 0, 0, FLUSH_GLOBAL, FLUSH_MR),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: MR without FLUSH_GLOBAL, empty range",
            b_attr: global,
            mr_access: NO_FLUSH,
            wqe: |_, m| flush_of(m, m.key, 0, 0, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: PERSISTENT (no MR has FLUSH_PERSISTENT)",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_PERSISTENT, FLUSH_RANGE),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: GLOBAL | PERSISTENT, level MR",
            b_attr: both,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 0, 64, FLUSH_GLOBAL | FLUSH_PERSISTENT, FLUSH_MR),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: through a window",
            b_attr: global,
            mr_access: TARGET | ACCESS_MW_BIND,
            wqe: |b, m| {
                let all = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
                let mw = window(b, m, all);
                flush_of(m, mw, 0, 64, FLUSH_GLOBAL, FLUSH_RANGE)
            },
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: through a window, level MR",
            b_attr: global,
            mr_access: TARGET | ACCESS_MW_BIND,
            wqe: |b, m| {
                let mw = window(b, m, ACCESS_REMOTE_WRITE);
                flush_of(m, mw, 0, 0, FLUSH_GLOBAL, FLUSH_MR)
            },
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: range beyond the MR",
            b_attr: global,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key, 4000, 97, FLUSH_GLOBAL, FLUSH_RANGE),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: empty range before the MR",
            b_attr: global,
            mr_access: TARGET,
            wqe: |_, m| {
                let seg = flush_seg(m.iova - 1, m.key, 0, FLUSH_GLOBAL, FLUSH_RANGE);
                flush_wqe(1, WQE_SIGNALED, &seg)
            },
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: unknown rkey, level MR",
            b_attr: global,
            mr_access: TARGET,
            wqe: |_, m| flush_of(m, m.key ^ 0x100, 0, 0, FLUSH_GLOBAL, FLUSH_MR),
            forge: no_forge,
            nak: acc,
        },
        Refused {
            name: "FLUSH: rkey of another PD, level MR",
            b_attr: global,
            mr_access: TARGET,
            wqe: |b, _| {
                let home = b.pdn;
                b.pdn = b.h.alloc_pd();
                let other = b.reg_mr(4096, TARGET);
                b.pdn = home;
                flush_of(&other, other.key, 0, 0, FLUSH_GLOBAL, FLUSH_MR)
            },
            forge: no_forge,
            nak: acc,
        },
    ]
}

/// Every refused request: the NAK it must get, the requester's CQE
/// (REM_INV_REQ_ERR or REM_ACCESS_ERR), QP_ACCESS_ERR at the responder for
/// an access error only, the responder's QP in ERR, no byte written.
#[test]
fn refused_requests_nak_in_the_order_of_the_checks() {
    for case in refused_cases() {
        let name = case.name;
        let (mut a, mut b) = rc_pair(case.b_attr);
        let remote = b.reg_mr(4096, case.mr_access);
        b.fill(remote.gpa, &pattern(7, 4096));
        let raw = (case.wqe)(&mut b, &remote);
        let opcode = raw[8];
        a.post_send_raw(0, &raw);
        let fa = a.h.dev.take_tx();
        assert_eq!(fa.len(), 1, "{name}");
        let forged_fa: Vec<Vec<u8>> = fa.iter().map(|f| forged(f, case.forge)).collect();
        deliver(&b, &forged_fa);
        let fb = b.h.dev.take_tx();
        assert_eq!(fb.len(), 1, "{name}");
        let p = decode(&fb[0]).unwrap();
        assert_eq!(
            (p.bth.opcode, p.aeth.syndrome),
            (op::RC_ACK, case.nak),
            "{name}"
        );
        assert_eq!(p.bth.psn, decode(&fa[0]).unwrap().bth.psn, "{name}");
        deliver(&a, &fb);
        let wc = if opcode == WR_FLUSH {
            WC_FLUSH
        } else {
            WC_ATOMIC_WRITE
        };
        let status = if case.nak == aeth::NAK_INVALID_REQ {
            WC_REM_INV_REQ_ERR
        } else {
            WC_REM_ACCESS_ERR
        };
        assert_eq!(statuses(&a.poll()), vec![(1, wc, status)], "{name}");
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR), "{name}");
        assert_eq!(b.bytes(remote.gpa, 4096), pattern(7, 4096), "{name}");
        assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR), "{name}");
        let access_event =
            b.h.take_events()
                .contains(&(EQE_QP_ACCESS_ERR, b.qps[0].qpn, 0x62));
        assert_eq!(access_event, case.nak == aeth::NAK_REM_ACCESS, "{name}");
    }
}

// ------------------------------------------------------------ local errors

/// Malformed WQEs complete with LOC_QP_OP_ERR without a packet: a FLUSH
/// type or level the spec does not name, reserved fields, SGEs, INLINE or
/// inline_len; the RC QP enters ERR and flushes what follows.
#[test]
fn malformed_wqes_complete_with_a_local_qp_operation_error() {
    let flush = |f: fn(&mut SqWqeFlush)| {
        let mut seg = flush_seg(0x1000, 0x1234, 64, FLUSH_GLOBAL, FLUSH_RANGE);
        f(&mut seg);
        flush_wqe(1, WQE_SIGNALED, &seg)
    };
    let with_aw = |f: fn(&mut Vec<u8>)| {
        let mut raw = aw_wqe(1, WQE_SIGNALED, 0x1000, 0x1234, DATA);
        f(&mut raw);
        raw
    };
    let with_flush_raw = |f: fn(&mut Vec<u8>)| {
        let mut raw = flush(|_| {});
        f(&mut raw);
        raw
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("FLUSH type 0", flush(|s| s.r#type = 0)),
        ("FLUSH type 4", flush(|s| s.r#type = 4)),
        ("FLUSH type 0x81", flush(|s| s.r#type = 0x81)),
        ("FLUSH type 0xff", flush(|s| s.r#type = 0xff)),
        ("FLUSH level 2", flush(|s| s.level = 2)),
        ("FLUSH level 0xff", flush(|s| s.level = 0xff)),
        ("FLUSH reserved0", flush(|s| s.reserved0[5] = 1)),
        ("FLUSH reserved1", flush(|s| s.reserved1 = 1 << 63)),
        ("AW reserved0", with_aw(|r| r[32 + 12] = 1)),
        ("AW reserved1", with_aw(|r| r[32 + 31] = 0x80)),
        ("AW with an SGE", with_aw(|r| r[10] = 1)),
        ("AW INLINE", with_aw(|r| r[9] |= WQE_INLINE)),
        ("AW inline_len", with_aw(|r| r[16] = 8)),
        ("FLUSH with an SGE", with_flush_raw(|r| r[10] = 1)),
        ("FLUSH INLINE", with_flush_raw(|r| r[9] |= WQE_INLINE)),
        ("FLUSH inline_len", with_flush_raw(|r| r[16] = 1)),
    ];
    for (name, raw) in cases {
        let (mut a, mut b) = rc_pair(with_flush);
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let mut raw = raw;
        // A valid SGE where num_sge says there is one.
        raw[64..72].copy_from_slice(&src.va(0).to_le_bytes());
        raw[72..76].copy_from_slice(&8u32.to_le_bytes());
        raw[76..80].copy_from_slice(&src.key.to_le_bytes());
        let wc = if raw[8] == WR_FLUSH {
            WC_FLUSH
        } else {
            WC_ATOMIC_WRITE
        };
        a.post_send_raw(0, &raw);
        a.post_send(0, &wr(2, WR_SEND));
        assert!(a.h.dev.take_tx().is_empty(), "{name}: nothing is sent");
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, wc, WC_LOC_QP_OP_ERR), (2, WC_SEND, WC_WR_FLUSH_ERR)],
            "{name}"
        );
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR), "{name}");
        run(&a, &b);
        assert!(b.poll().is_empty());
    }
}

/// UC and UD QPs have neither operation: LOC_QP_OP_ERR without a packet,
/// the QP in SQE, the WQE after it flushed.
#[test]
fn uc_and_ud_qps_have_no_atomic_write_or_flush() {
    let seg = flush_seg(0x1000, 0x1234, 64, FLUSH_GLOBAL, FLUSH_RANGE);
    let wqes = [
        (
            aw_wqe(1, WQE_SIGNALED, 0x1000, 0x1234, DATA),
            WC_ATOMIC_WRITE,
        ),
        (flush_wqe(1, WQE_SIGNALED, &seg), WC_FLUSH),
    ];
    for (raw, wc) in &wqes {
        let (mut a, _b) = uc_pair();
        a.post_send_raw(0, raw);
        a.post_send(0, &wr(2, WR_SEND));
        assert!(a.h.dev.take_tx().is_empty(), "UC {wc}: nothing is sent");
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, *wc, WC_LOC_QP_OP_ERR), (2, WC_SEND, WC_WR_FLUSH_ERR)],
            "UC {wc}"
        );
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_SQE));

        let mut n = Node::new(40);
        let ud = n.create_qp(QPT_UD);
        n.activate_ud(ud, 0x1111);
        n.post_send_raw(ud, raw);
        assert!(n.h.dev.take_tx().is_empty(), "UD {wc}: nothing is sent");
        assert_eq!(
            statuses(&n.poll()),
            vec![(1, *wc, WC_LOC_QP_OP_ERR)],
            "UD {wc}"
        );
        assert_eq!(n.h.dev.qp_state(n.qps[ud].qpn), Some(QPS_SQE));
    }
}

// ------------------------------------------------------------ replay

/// A duplicate ATOMIC_WRITE (its response lost) is answered again with the
/// zero-length READ response and not executed again, also after the target
/// changed locally; the requester's timeout resends the same PSN and
/// completes from that answer. The same for a FLUSH. Once a newer request
/// reused the only resource, a duplicate of the old one is dropped; one
/// whose opcode is not the resource's too.
#[test]
fn duplicates_are_answered_without_being_executed_again() {
    let (mut a, mut b) = rc_pair(|x| {
        with_flush(x);
        x.max_rd_atomic = 1;
        x.max_dest_rd_atomic = 1;
    });
    let remote = b.reg_mr(4096, TARGET);
    a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, remote.va(0), remote.key, DATA));
    let f1 = a.h.dev.take_tx();
    let psn1 = decode(&f1[0]).unwrap().bth.psn;
    deliver(&b, &f1);
    let lost = b.h.dev.take_tx();
    assert_eq!(lost.len(), 1);
    assert_eq!(b.bytes(remote.gpa, 8), DATA);
    // The target changes under the executed request; replays leave it.
    b.fill(remote.gpa, &LOCAL);
    for _ in 0..2 {
        deliver(&b, &f1);
        let again = b.h.dev.take_tx();
        assert_eq!(again.len(), 1);
        assert_placement_response(&again[0], psn1);
        assert_eq!(b.bytes(remote.gpa, 8), LOCAL, "not executed again");
    }
    assert_eq!(b.h.dev.counters().data.dup_requests, 2);
    // The requester times out and sends the same PSN again.
    assert!(a.poll().is_empty());
    let t = a.h.dev.next_timer().expect("the ACK timer runs");
    a.h.dev.tick(t);
    let f1b = a.h.dev.take_tx();
    assert_eq!(f1b.len(), 1);
    let p = decode(&f1b[0]).unwrap();
    assert_eq!((p.bth.opcode, p.bth.psn), (op::RC_ATOMIC_WRITE, psn1));
    assert_eq!(p.payload, &DATA);
    deliver(&b, &f1b);
    let r = b.h.dev.take_tx();
    deliver(&a, &r);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_ATOMIC_WRITE, WC_SUCCESS)]);
    assert_eq!(b.bytes(remote.gpa, 8), LOCAL);

    // A FLUSH: executed once, its duplicate answered from the resource,
    // which it took from the ATOMIC_WRITE.
    let seg = flush_seg(remote.va(0), remote.key, 4096, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &flush_wqe(2, WQE_SIGNALED, &seg));
    let f2 = a.h.dev.take_tx();
    let psn2 = decode(&f2[0]).unwrap().bth.psn;
    deliver(&b, &f2);
    let _lost = b.h.dev.take_tx();
    deliver(&b, &f2);
    let again = b.h.dev.take_tx();
    assert_eq!(again.len(), 1);
    assert_placement_response(&again[0], psn2);
    deliver(&a, &again);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_FLUSH, WC_SUCCESS)]);
    // The old ATOMIC_WRITE's resource is gone: its duplicate is dropped,
    // not executed.
    deliver(&b, &f1);
    assert!(b.h.dev.take_tx().is_empty(), "no resource: dropped");
    assert_eq!(b.bytes(remote.gpa, 8), LOCAL);
    // An ATOMIC_WRITE with the FLUSH's PSN is no duplicate of it: dropped.
    let other = forged(&f1[0], |p| p.bth.psn = psn2);
    deliver(&b, &[other]);
    assert!(b.h.dev.take_tx().is_empty(), "another opcode: dropped");
    assert_eq!(b.bytes(remote.gpa, 8), LOCAL);
    let db = b.h.dev.counters().data;
    // 2 replays and the resend of the ATOMIC_WRITE, 1 of the FLUSH, the 2
    // dropped.
    assert_eq!((db.dup_requests, db.err_naks_sent), (6, 0));
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_RTS));
}

/// An ACK beyond an ATOMIC_WRITE whose response was lost is an implied NAK:
/// the requester sends the request again with the same PSN (and what
/// followed it, go-back-N), the responder answers the duplicate without
/// writing again, and both WQEs complete in order.
#[test]
fn an_ack_beyond_a_lost_response_is_an_implied_nak() {
    let (mut a, mut b) = rc_pair(with_flush);
    let remote = b.reg_mr(4096, TARGET);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let buf = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 50, &[(buf.va(0), 64, buf.key)]);
    // A WRITE first: its ACK advertises the receive, the end-to-end
    // credit the SEND needs to go behind the ATOMIC_WRITE.
    a.post_send(0, &write_wr(9, &src, 8, remote.va(64), remote.key));
    deliver(&b, &a.h.dev.take_tx());
    deliver(&a, &b.h.dev.take_tx());
    assert_eq!(statuses(&a.poll()), vec![(9, WC_RDMA_WRITE, WC_SUCCESS)]);
    a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, remote.va(8), remote.key, DATA));
    let send = SendWr {
        sges: vec![(src.va(0), 16, src.key)],
        ..wr(2, WR_SEND)
    };
    a.post_send(0, &send);
    let fa = a.h.dev.take_tx();
    assert_eq!(opcodes(&fa), vec![op::RC_ATOMIC_WRITE, op::RC_SEND_ONLY]);
    let psn = decode(&fa[0]).unwrap().bth.psn;
    deliver(&b, &fa);
    let fb = b.h.dev.take_tx();
    assert_eq!(opcodes(&fb), vec![op::RC_READ_RESPONSE_ONLY, op::RC_ACK]);
    assert_eq!(b.bytes(remote.gpa + 8, 8), DATA);
    b.fill(remote.gpa + 8, &LOCAL);
    // The READ response is lost; the ACK of the SEND arrives.
    deliver(&a, &fb[1..]);
    assert!(
        a.poll().is_empty(),
        "nothing completes past the lost response"
    );
    let again = a.h.dev.take_tx();
    assert_eq!(opcodes(&again), vec![op::RC_ATOMIC_WRITE, op::RC_SEND_ONLY]);
    assert_eq!(decode(&again[0]).unwrap().bth.psn, psn, "the same PSN");
    deliver(&b, &again);
    let fb = b.h.dev.take_tx();
    deliver(&a, &fb);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_ATOMIC_WRITE, WC_SUCCESS), (2, WC_SEND, WC_SUCCESS)]
    );
    assert_eq!(b.bytes(remote.gpa + 8, 8), LOCAL, "not written again");
    assert_eq!(statuses(&b.poll()), vec![(50, WC_RECV, WC_SUCCESS)]);
    assert_eq!(b.h.dev.counters().data.dup_requests, 2);
}

// ------------------------------------------------------------ limits

/// max_rd_atomic bounds READs, ATOMIC_WRITEs and FLUSHes together: with 2,
/// never more than 2 unanswered on the wire, and 2 are reached; everything
/// completes in order. A requester beyond the responder's resources
/// (max_dest_rd_atomic 1) gets its second request NAKed invalid request,
/// and that ATOMIC_WRITE is not executed.
#[test]
fn max_rd_atomic_counts_atomic_writes_and_flushes() {
    let (mut a, mut b) = rc_pair(|x| {
        with_flush(x);
        x.max_rd_atomic = 2;
        x.max_dest_rd_atomic = 2;
    });
    let local = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(8192, TARGET);
    let mut expect = Vec::new();
    for i in 0..12u64 {
        match i % 3 {
            0 => {
                let data = (i * 0x0101_0101_0101_0101).to_le_bytes();
                let raw = aw_wqe(i, WQE_SIGNALED, remote.va(i * 8), remote.key, data);
                a.post_send_raw(0, &raw);
                expect.push((i, WC_ATOMIC_WRITE, WC_SUCCESS));
            }
            1 => {
                let seg = flush_seg(remote.va(0), remote.key, 4096, FLUSH_GLOBAL, FLUSH_RANGE);
                a.post_send_raw(0, &flush_wqe(i, WQE_SIGNALED, &seg));
                expect.push((i, WC_FLUSH, WC_SUCCESS));
            }
            _ => {
                a.post_send(
                    0,
                    &SendWr {
                        remote_addr: remote.va(4096),
                        rkey: remote.key,
                        sges: vec![(local.va(i * 64), 64, local.key)],
                        ..wr(i, WR_RDMA_READ)
                    },
                );
                expect.push((i, WC_RDMA_READ, WC_SUCCESS));
            }
        }
    }
    let mut most = 0usize;
    for _ in 0..100 {
        let fa = a.h.dev.take_tx();
        if fa.is_empty() {
            break;
        }
        let requests = opcodes(&fa)
            .into_iter()
            .filter(|o| matches!(*o, op::RC_READ_REQUEST | op::RC_ATOMIC_WRITE | op::RC_FLUSH))
            .count();
        most = most.max(requests);
        assert!(requests <= 2, "{requests} outstanding");
        deliver(&b, &fa);
        let fb = b.h.dev.take_tx();
        deliver(&a, &fb);
    }
    assert_eq!(most, 2);
    assert_eq!(statuses(&a.poll()), expect);
    for i in (0..12u64).step_by(3) {
        let data = (i * 0x0101_0101_0101_0101).to_le_bytes();
        assert_eq!(b.bytes(remote.gpa + i * 8, 8), data);
    }

    // max_rd_atomic 2 against max_dest_rd_atomic 1.
    let (mut a, mut b) = rc_pair(|x| {
        with_flush(x);
        x.max_rd_atomic = 2;
        x.max_dest_rd_atomic = 1;
    });
    let remote = b.reg_mr(4096, TARGET);
    let seg = flush_seg(remote.va(0), remote.key, 64, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &flush_wqe(1, WQE_SIGNALED, &seg));
    a.post_send_raw(0, &aw_wqe(2, WQE_SIGNALED, remote.va(0), remote.key, DATA));
    let (fa, fb) = round(&a, &b);
    assert_eq!(fa.len(), 2, "max_rd_atomic 2: both go out");
    let resp: Vec<_> = fb.iter().map(|f| decode(f).unwrap()).collect();
    assert_eq!(resp[0].bth.opcode, op::RC_READ_RESPONSE_ONLY);
    assert_eq!(
        (resp[1].bth.opcode, resp[1].aeth.syndrome),
        (op::RC_ACK, aeth::NAK_INVALID_REQ)
    );
    assert_eq!(
        b.bytes(remote.gpa, 8),
        [0; 8],
        "the NAKed request did nothing"
    );
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_FLUSH, WC_SUCCESS),
            (2, WC_ATOMIC_WRITE, WC_REM_INV_REQ_ERR)
        ]
    );
}

/// rxe's requester does not count FLUSH against its max_rd_atomic, so a
/// FLUSH may arrive in the batch of the READ or ATOMIC_WRITE before it
/// with max_dest_rd_atomic 1: the responder answers the older request at
/// once to give its resource to the FLUSH, and both succeed in order.
#[test]
fn a_flush_behind_an_unanswered_request_gets_its_resource() {
    let (mut a, mut b) = rc_pair(|x| {
        with_flush(x);
        x.max_rd_atomic = 2;
        x.max_dest_rd_atomic = 1;
    });
    let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(4096, TARGET);
    b.fill(remote.gpa + 512, &pattern(7, 64));
    let seg = flush_seg(remote.va(0), remote.key, 4096, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, remote.va(0), remote.key, DATA));
    a.post_send_raw(0, &flush_wqe(2, WQE_SIGNALED, &seg));
    let (fa, fb) = round(&a, &b);
    assert_eq!(
        opcodes(&fa),
        vec![op::RC_ATOMIC_WRITE, op::RC_FLUSH],
        "one batch"
    );
    let psn = decode(&fa[0]).unwrap().bth.psn;
    assert_eq!(fb.len(), 2);
    assert_placement_response(&fb[0], psn);
    assert_placement_response(&fb[1], (psn + 1) & 0xff_ffff);
    assert_eq!(b.bytes(remote.gpa, 8), DATA);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_ATOMIC_WRITE, WC_SUCCESS), (2, WC_FLUSH, WC_SUCCESS)]
    );

    // The same behind a READ, whose response goes out first.
    a.post_send(
        0,
        &SendWr {
            remote_addr: remote.va(512),
            rkey: remote.key,
            sges: vec![(local.va(0), 64, local.key)],
            ..wr(3, WR_RDMA_READ)
        },
    );
    a.post_send_raw(0, &flush_wqe(4, WQE_SIGNALED, &seg));
    let (fa, fb) = round(&a, &b);
    assert_eq!(opcodes(&fa), vec![op::RC_READ_REQUEST, op::RC_FLUSH]);
    assert_eq!(
        opcodes(&fb),
        vec![op::RC_READ_RESPONSE_ONLY, op::RC_READ_RESPONSE_ONLY]
    );
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_READ, WC_SUCCESS), (4, WC_FLUSH, WC_SUCCESS)]
    );
    assert_eq!(a.bytes(local.gpa, 64), pattern(7, 64));
    assert_eq!(b.h.dev.counters().data.err_naks_sent, 0);
}

/// A FENCE WQE waits for an earlier ATOMIC_WRITE or FLUSH to be answered.
#[test]
fn a_fence_waits_for_atomic_writes_and_flushes() {
    let (mut a, mut b) = rc_pair(with_flush);
    let local = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let remote = b.reg_mr(4096, TARGET);
    let seg = flush_seg(remote.va(0), remote.key, 0, FLUSH_GLOBAL, FLUSH_MR);
    for first in [
        aw_wqe(1, WQE_SIGNALED, remote.va(0), remote.key, DATA),
        flush_wqe(1, WQE_SIGNALED, &seg),
    ] {
        a.post_send_raw(0, &first);
        let mut fenced = write_wr(2, &local, 16, remote.va(64), remote.key);
        fenced.flags |= WQE_FENCE;
        a.post_send(0, &fenced);
        let fa = a.h.dev.take_tx();
        assert_eq!(fa.len(), 1, "the fenced WRITE waits");
        deliver(&b, &fa);
        let fb = b.h.dev.take_tx();
        deliver(&a, &fb);
        let fa = a.h.dev.take_tx();
        assert_eq!(opcodes(&fa), vec![op::RC_WRITE_ONLY]);
        deliver(&b, &fa);
        let fb = b.h.dev.take_tx();
        deliver(&a, &fb);
        let done = a.poll();
        assert_eq!(done.len(), 2);
        assert_eq!(done[1].wr_id, 2);
        assert!(done.iter().all(|c| c.status == WC_SUCCESS));
    }
}

// ------------------------------------------------------------ access flags

fn reg_mr_cmd(n: &mut Node, access: u32) -> CmdRegMr {
    let gpa = n.h.alloc(4096, 4096);
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl = n.h.pbl_contig(gpa, 1, 12);
    c.iova = 0x7f00_0000_0000 + gpa;
    c.length = 4096;
    c.pdn = n.pdn;
    c.access = access;
    c.key_variant = 0x11;
    c
}

/// MRs: FLUSH_GLOBAL is a right of REG_MR, MODIFY_MR and the REG_MR WQE;
/// FLUSH_PERSISTENT is BAD_PARAM (LOC_PROT_ERR for the WQE): guest RAM is
/// not persistent. A window is never bound with a flush right
/// (MW_BIND_ERR).
#[test]
fn mrs_take_flush_global_and_never_flush_persistent() {
    let (mut a, mut b) = rc_pair(with_flush);
    for (access, status) in [
        (ACCESS_FLUSH_GLOBAL, STATUS_SUCCESS),
        (TARGET, STATUS_SUCCESS),
        (
            TARGET | ACCESS_MW_BIND | ACCESS_ZERO_BASED,
            STATUS_BAD_PARAM,
        ),
        (ACCESS_FLUSH_PERSISTENT, STATUS_BAD_PARAM),
        (TARGET | ACCESS_FLUSH_PERSISTENT, STATUS_BAD_PARAM),
        (ACCESS_LOCAL_WRITE | 0x400, STATUS_BAD_PARAM),
        (ACCESS_LOCAL_WRITE | 0x80, STATUS_BAD_PARAM),
    ] {
        let c = reg_mr_cmd(&mut b, access);
        b.h.expect(&c, status);
    }
    // Zero-based MRs take FLUSH_GLOBAL too (iova 0).
    let mut c = reg_mr_cmd(&mut b, TARGET | ACCESS_ZERO_BASED);
    c.iova = 0;
    c.offset = 0;
    b.h.ok(&c);

    // MODIFY_MR: FLUSH_GLOBAL granted and taken away, PERSISTENT refused.
    let m = b.reg_mr(4096, NO_FLUSH);
    let flush = |a: &mut Node, b: &mut Node, id: u64| {
        let seg = flush_seg(m.va(0), m.key, 64, FLUSH_GLOBAL, FLUSH_RANGE);
        a.post_send_raw(0, &flush_wqe(id, WQE_SIGNALED, &seg));
        round(a, b);
        a.poll()
    };
    let modify = |b: &mut Node, access: u32, status: u8| {
        b.h.expect(&modify_mr(m.key, MODIFY_MR_ACCESS, 0, access), status);
    };
    modify(&mut b, TARGET | ACCESS_FLUSH_PERSISTENT, STATUS_BAD_PARAM);
    modify(&mut b, TARGET, STATUS_SUCCESS);
    assert_eq!(
        statuses(&flush(&mut a, &mut b, 1)),
        vec![(1, WC_FLUSH, WC_SUCCESS)]
    );
    modify(&mut b, NO_FLUSH, STATUS_SUCCESS);
    assert_eq!(
        statuses(&flush(&mut a, &mut b, 2)),
        vec![(2, WC_FLUSH, WC_REM_ACCESS_ERR)]
    );

    // The REG_MR WQE of a fast-register MR: with FLUSH_GLOBAL the MR takes
    // FLUSHes (and ATOMIC_WRITEs); with FLUSH_PERSISTENT it fails.
    let (mut a, mut b) = rc_pair(with_flush);
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pdn = b.pdn;
    c.mr_type = MR_TYPE_FAST_REG;
    c.max_pages = 1;
    c.key_variant = 0x11;
    let key = b.h.ok(&c);
    let page = b.h.alloc(4096, 4096);
    let iova = 0x5000_0000u64;
    let reg = |b: &mut Node, id: u64, key: u32, access: u32| {
        let seg = SqWqeRegMr {
            iova,
            length: 4096,
            key,
            access,
            reserved: 0,
        };
        let pbl = Pbl {
            addr: page,
            page_count: 1,
            page_shift: 12,
            level: PBL_LEVEL_0,
            reserved: 0,
        };
        let mut raw = raw_wqe(id, WR_REG_MR, WQE_SIGNALED, seg.as_bytes());
        let pbl = pbl.as_bytes();
        raw[SQ_WQE_DATA_OFFSET..SQ_WQE_DATA_OFFSET + pbl.len()].copy_from_slice(pbl);
        b.post_send_raw(0, &raw);
        statuses(&b.poll())
    };
    let fr = with_variant(key, 0x13);
    assert_eq!(reg(&mut b, 1, fr, TARGET), vec![(1, WC_REG_MR, WC_SUCCESS)]);
    let seg = flush_seg(iova, fr, 4096, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &flush_wqe(2, WQE_SIGNALED, &seg));
    a.post_send_raw(0, &aw_wqe(3, WQE_SIGNALED, iova + 8, fr, DATA));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_FLUSH, WC_SUCCESS), (3, WC_ATOMIC_WRITE, WC_SUCCESS)]
    );
    assert_eq!(b.bytes(page + 8, 8), DATA);
    // Invalidated (FREE), it takes no FLUSH, not even of level MR.
    let mut inv = raw_wqe(4, WR_LOCAL_INV, WQE_SIGNALED, &[]);
    inv[12..16].copy_from_slice(&fr.to_be_bytes());
    b.post_send_raw(0, &inv);
    assert_eq!(statuses(&b.poll()), vec![(4, WC_LOCAL_INV, WC_SUCCESS)]);
    let seg = flush_seg(iova, fr, 0, FLUSH_GLOBAL, FLUSH_MR);
    a.post_send_raw(0, &flush_wqe(5, WQE_SIGNALED, &seg));
    round(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(5, WC_FLUSH, WC_REM_ACCESS_ERR)]);
    // With FLUSH_PERSISTENT the REG_MR WQE fails.
    let (_a, mut b) = rc_pair(with_flush);
    c.pdn = b.pdn;
    let key = b.h.ok(&c);
    let persistent = TARGET | ACCESS_FLUSH_PERSISTENT;
    assert_eq!(
        reg(&mut b, 6, with_variant(key, 0x14), persistent),
        vec![(6, WC_REG_MR, WC_LOC_PROT_ERR)]
    );

    // BIND_MW: a window gets no flush right.
    let (_a, mut b) = rc_pair(with_flush);
    let m = b.reg_mr(4096, TARGET | ACCESS_MW_BIND);
    let mw = b.alloc_mw(MR_TYPE_MW1) + 1;
    let access = ACCESS_REMOTE_WRITE | ACCESS_FLUSH_GLOBAL;
    b.post_bind_mw(0, 9, &bind_seg(mw, m.key, m.va(0), 4096, access));
    assert_eq!(statuses(&b.poll()), vec![(9, WC_BIND_MW, WC_MW_BIND_ERR)]);
}

/// MODIFY_QP: an RC QP takes FLUSH_GLOBAL and FLUSH_PERSISTENT (0x30f in
/// all, reported back by QUERY_QP); a UC QP neither (only 0x03); other
/// bits stay BAD_PARAM.
#[test]
fn qp_access_flags_take_the_flush_rights_on_rc_only() {
    let mut n = Node::new(36);
    let init_mask = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    for (qp_type, flags, status) in [
        (QPT_RC, ACCESS_QP_MASK | QP_FLUSH, STATUS_SUCCESS),
        (QPT_RC, ACCESS_FLUSH_PERSISTENT, STATUS_SUCCESS),
        (QPT_RC, ACCESS_QP_MASK | 0x400, STATUS_BAD_PARAM),
        (QPT_RC, ACCESS_MW_BIND, STATUS_BAD_PARAM),
        (
            QPT_RC,
            ACCESS_ZERO_BASED | ACCESS_FLUSH_GLOBAL,
            STATUS_BAD_PARAM,
        ),
        (
            QPT_UC,
            ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
            STATUS_SUCCESS,
        ),
        (
            QPT_UC,
            ACCESS_REMOTE_WRITE | ACCESS_FLUSH_GLOBAL,
            STATUS_BAD_PARAM,
        ),
        (QPT_UC, ACCESS_FLUSH_PERSISTENT, STATUS_BAD_PARAM),
    ] {
        let qi = n.create_qp(qp_type);
        let qpn = n.qps[qi].qpn;
        let mut m = attr_with(qpn, QPS_INIT, init_mask);
        m.qp_access_flags = flags;
        assert_eq!(n.h.modify(m), status, "type {qp_type} flags {flags:#x}");
        if status == STATUS_SUCCESS {
            assert_eq!(n.h.query_qp(qpn).qp_access_flags, flags);
        } else {
            assert_eq!(n.h.dev.qp_state(qpn), Some(QPS_RESET));
        }
    }
    // An RC QP in RTS changes its flush rights; a peer's FLUSH sees them.
    let (mut a, mut b) = rc_pair(|_| {});
    let remote = b.reg_mr(4096, TARGET);
    let qpn = b.qps[0].qpn;
    let mut m = attr_with(qpn, QPS_RTS, QP_ATTR_ACCESS_FLAGS);
    m.qp_access_flags = QP_RW | ACCESS_FLUSH_GLOBAL;
    assert_eq!(b.h.modify(m), STATUS_SUCCESS);
    let seg = flush_seg(remote.va(0), remote.key, 4096, FLUSH_GLOBAL, FLUSH_RANGE);
    a.post_send_raw(0, &flush_wqe(1, WQE_SIGNALED, &seg));
    round(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_FLUSH, WC_SUCCESS)]);
}

/// A FLUSH or ATOMIC_WRITE request to a UC QP (an RC opcode) is no UC
/// request: dropped, the QP unharmed.
#[test]
fn rc_placement_opcodes_are_dropped_by_a_uc_qp() {
    let (a, b) = uc_pair();
    // An RC requester makes the frame.
    let (mut rc_a, _rc_b) = rc_pair(with_flush);
    rc_a.post_send_raw(0, &aw_wqe(1, WQE_SIGNALED, 0x1000, 0x1234, DATA));
    let f = rc_a.h.dev.take_tx();
    // Re-address the request to b's UC QP, from a's address.
    let bq = b.qps[0].qpn;
    let frame = forged(&f[0], |p| {
        p.bth.dest_qp = bq;
        p.dmac = b.mac;
        p.smac = a.mac;
        p.net.sgid = ipv4_gid(a.ip);
        p.net.dgid = ipv4_gid(b.ip);
    });
    let before = b.h.dev.counters().data.rx_no_qp;
    deliver(&b, &[frame]);
    assert!(b.h.dev.take_tx().is_empty());
    assert_eq!(b.h.dev.counters().data.rx_no_qp, before + 1);
    assert_eq!(b.h.dev.qp_state(bq), Some(QPS_RTS));
}
