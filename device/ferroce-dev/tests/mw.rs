// SPDX-License-Identifier: GPL-2.0
//! Memory windows (device 1.7, `CAP_MW`; device.rst "Memory windows"):
//! allocation through REG_MR, the BIND_MW WQE of both types and its
//! failures, remote access through a window's key (RC WRITE, READ and
//! atomics, UC WRITE) and its checks, unbinding, invalidation by LOCAL_INV
//! and SEND_INV, and what DEREG_MR, MODIFY_MR, DESTROY_QP and the
//! invalidation of a fast-register MR do to the windows bound.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::objects::{MrKind, MwType, MwWindow};
use zerocopy::IntoBytes;

/// The rights of an MR windows are bound to.
const WIN_MR: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_MW_BIND;
const RW: u32 = ACCESS_REMOTE_WRITE;
const RR: u32 = ACCESS_REMOTE_READ;
const RA: u32 = ACCESS_REMOTE_ATOMIC;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

fn with_atomics(x: &mut QpAttr) {
    x.qp_access_flags |= ACCESS_REMOTE_ATOMIC;
}

/// Two nodes with one RC QP each, atomics allowed.
fn pair() -> (Node, Node) {
    rc_pair(with_atomics)
}

/// [`pair`] with a second pair of connected RC QPs (index 1).
fn two_pairs() -> (Node, Node) {
    let (mut a, mut b) = pair();
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 1, &mut b, 1, with_atomics);
    (a, b)
}

fn read_wr(wr_id: u64, sink: &MrInfo, len: u32, remote_addr: u64, rkey: u32) -> SendWr {
    SendWr {
        remote_addr,
        rkey,
        sges: vec![(sink.va(0), len, sink.key)],
        ..wr(wr_id, WR_RDMA_READ)
    }
}

fn fetch_add_wr(wr_id: u64, sink: &MrInfo, remote_addr: u64, rkey: u32, add: u64) -> SendWr {
    SendWr {
        remote_addr,
        rkey,
        compare_add: add,
        sges: vec![(sink.va(0), 8, sink.key)],
        ..wr(wr_id, WR_ATOMIC_FETCH_ADD)
    }
}

fn local_inv_wr(wr_id: u64, key: u32) -> SendWr {
    SendWr {
        imm: key.to_be_bytes(),
        ..wr(wr_id, WR_LOCAL_INV)
    }
}

/// Posts a BIND_MW on QP `qi` of `n` and returns the completions it
/// produced (the bind executes at the doorbell when the SQ is idle).
fn bind(n: &mut Node, qi: usize, wr_id: u64, seg: &SqWqeBindMw) -> Vec<(u64, u8, u8)> {
    n.post_bind_mw(qi, wr_id, seg);
    statuses(&n.poll())
}

/// The current key and kind of the MR or window with `key`'s index.
fn entry(n: &Node, key: u32) -> Option<(u32, MrKind)> {
    let objects = n.h.dev.objects();
    let e = objects
        .mrs
        .iter()
        .find(|e| e.handle == key >> KEY_INDEX_SHIFT)?;
    Some((e.obj.key, e.obj.kind))
}

/// The window a memory window with `key`'s index is bound to (`None`:
/// FREE), checking its current key is `key`.
fn window(n: &Node, key: u32) -> Option<MwWindow> {
    let (current, kind) = entry(n, key).expect("memory window");
    assert_eq!(current, key, "the window's key");
    match kind {
        MrKind::Mw { window, .. } => window,
        other => panic!("not a memory window: {other:?}"),
    }
}

fn mrs_json(n: &Node) -> String {
    serde_json::to_string(&n.h.dev.objects().mrs).unwrap()
}

fn reg_mr_cmd(pdn: u32, mr_type: u8, access: u32) -> CmdRegMr {
    let mut cmd = CmdRegMr {
        pdn,
        mr_type,
        access,
        key_variant: 0x40,
        ..CmdRegMr::zeroed()
    };
    cmd.hdr.opcode = CMD_REG_MR;
    cmd
}

fn dereg(n: &mut Node, key: u32) -> u8 {
    let mut c = CmdDeregMr::zeroed();
    c.hdr.opcode = CMD_DEREG_MR;
    c.key = key;
    n.h.cmd(&c).0
}

/// `f` with `n`'s PD set to `pdn` (objects created in another PD).
fn in_pd<T>(n: &mut Node, pdn: u32, f: impl FnOnce(&mut Node) -> T) -> T {
    let own = std::mem::replace(&mut n.pdn, pdn);
    let r = f(n);
    n.pdn = own;
    r
}

/// RESET and reconnect QP 0 of both nodes (rings back to index 0): the
/// same devices and windows, fresh QPs.
fn reconnect(a: &mut Node, b: &mut Node) {
    for n in [&mut *a, &mut *b] {
        let q = n.qps[0];
        assert_eq!(
            n.h.modify(attr_with(q.qpn, QPS_RESET, QP_ATTR_STATE)),
            STATUS_SUCCESS
        );
        n.h.mem.write_u32(q.sq_dbrec, 0);
        n.h.mem.write_u32(q.rq_dbrec, 0);
        n.qps[0].sq_pi = 0;
        n.qps[0].rq_pi = 0;
    }
    connect_pair(a, 0, b, 0, with_atomics);
}

fn qp_state(n: &Node, qi: usize) -> Option<u8> {
    n.h.dev.qp_state(n.qps[qi].qpn)
}

fn word(n: &Node, gpa: u64) -> u64 {
    u64::from_le_bytes(n.bytes(gpa, 8).try_into().unwrap())
}

// ------------------------------------------------------------ allocation

#[test]
fn version_1_7_advertises_memory_windows() {
    let mut h = Harness::new();
    // 1.7 or later (1.8 adds two bits: tests/placement.rs).
    let minor = h.reg_r(REG_VERSION) & VERSION_MINOR_MASK;
    assert!(minor >= 7);
    assert_eq!(h.reg_r(REG_VERSION), 1 << VERSION_MAJOR_SHIFT | minor);
    let caps = h.reg_r(REG_DEV_CAPS);
    assert_eq!(caps & CAP_MW, CAP_MW);
    assert_eq!(caps & 0x3fffff, 0x3fffff, "device.rst: DEV_CAPS in 1.7");
    let q = h.query_caps();
    assert_eq!(q.device_caps, caps);
    assert_eq!(q.fw_version, 1 << 32 | u64::from(minor) << 16);
}

/// REG_MR of MW1/MW2: every translation field 0, the key in the MR key
/// space, FREE; DEREG_MR by index; MODIFY_MR refused; DEALLOC_PD BUSY.
#[test]
fn allocation_checks_its_fields() {
    let mut n = Node::new(36);
    let pdn = n.pdn;
    let page = n.h.alloc(4096, 4096);
    for mr_type in [MR_TYPE_MW1, MR_TYPE_MW2] {
        let good = reg_mr_cmd(pdn, mr_type, 0);
        let cases: Vec<(&str, CmdRegMr, u8)> = vec![
            (
                "pbl",
                CmdRegMr {
                    pbl: Pbl {
                        addr: page,
                        page_count: 1,
                        page_shift: 12,
                        level: PBL_LEVEL_0,
                        reserved: 0,
                    },
                    ..good
                },
                STATUS_BAD_PARAM,
            ),
            (
                "iova",
                CmdRegMr {
                    iova: 0x1000,
                    ..good
                },
                STATUS_BAD_PARAM,
            ),
            ("length", CmdRegMr { length: 1, ..good }, STATUS_BAD_PARAM),
            ("offset", CmdRegMr { offset: 8, ..good }, STATUS_BAD_PARAM),
            (
                "max_pages",
                CmdRegMr {
                    max_pages: 1,
                    ..good
                },
                STATUS_BAD_PARAM,
            ),
            (
                "access LOCAL_WRITE",
                reg_mr_cmd(pdn, mr_type, ACCESS_LOCAL_WRITE),
                STATUS_BAD_PARAM,
            ),
            (
                "access MW_BIND",
                reg_mr_cmd(pdn, mr_type, ACCESS_MW_BIND),
                STATUS_BAD_PARAM,
            ),
            (
                "access bit 6",
                reg_mr_cmd(pdn, mr_type, 0x40),
                STATUS_BAD_PARAM,
            ),
            (
                "no such PD",
                reg_mr_cmd(pdn + 9, mr_type, 0),
                STATUS_BAD_HANDLE,
            ),
            (
                "reserved1",
                CmdRegMr {
                    reserved1: 1,
                    ..good
                },
                STATUS_BAD_RESERVED,
            ),
        ];
        let before = mrs_json(&n);
        for (what, cmd, status) in &cases {
            assert_eq!(n.h.cmd(cmd).0, *status, "{what}");
            assert_eq!(mrs_json(&n), before, "{what} made an object");
        }
        let key = n.h.ok(&good);
        assert_eq!(key & KEY_VARIANT_MASK, 0x40);
        assert_ne!(key >> KEY_INDEX_SHIFT, 0);
        assert_eq!(window(&n, key), None, "a new window is FREE");
        let want = if mr_type == MR_TYPE_MW1 {
            MwType::One
        } else {
            MwType::Two
        };
        assert!(matches!(entry(&n, key), Some((_, MrKind::Mw { mw_type, .. })) if mw_type == want));
        // Not an MR to modify; its PD is in use.
        let c = modify_mr(key, MODIFY_MR_ACCESS, 0, ACCESS_LOCAL_WRITE);
        assert_eq!(n.h.cmd(&c).0, STATUS_BAD_PARAM);
        let mut dealloc = CmdDeallocPd::zeroed();
        dealloc.hdr.opcode = CMD_DEALLOC_PD;
        dealloc.pdn = pdn;
        assert_eq!(n.h.cmd(&dealloc).0, STATUS_BUSY);
        // DEREG_MR by index: any variant.
        assert_eq!(dereg(&mut n, with_variant(key, 0x99)), STATUS_SUCCESS);
        assert!(entry(&n, key).is_none());
        assert_eq!(dereg(&mut n, key), STATUS_BAD_HANDLE);
    }
    // MW_BIND is an MR right now: REG_MR (USER, PHYS) and MODIFY_MR take it.
    let user = n.reg_mr(4096, ACCESS_LOCAL_WRITE | ACCESS_MW_BIND);
    n.h.ok(&modify_mr(user.key, MODIFY_MR_ACCESS, 0, ACCESS_MW_BIND));
    n.h.ok(&reg_mr_cmd(pdn, MR_TYPE_PHYS, ACCESS_MW_BIND | RR));
    // A fast-register MR gets its rights from REG_MR WQEs, not REG_MR.
    let mut fast = reg_mr_cmd(pdn, MR_TYPE_FAST_REG, ACCESS_MW_BIND);
    fast.max_pages = 1;
    n.h.expect(&fast, STATUS_BAD_PARAM);
}

/// Windows are counted against `max_mr` with the MRs.
#[test]
fn windows_count_against_max_mr() {
    let limits = ferroce_dev::Limits {
        max_mr: 3,
        ..ferroce_dev::Limits::default()
    };
    let mut h = Harness::with(limits, 16, 64);
    let pdn = h.alloc_pd();
    let gpa = h.alloc(4096, 4096);
    let mut user = reg_mr_cmd(pdn, MR_TYPE_USER, ACCESS_LOCAL_WRITE);
    user.pbl = h.pbl_contig(gpa, 1, 12);
    user.iova = gpa;
    user.length = 4096;
    h.ok(&user);
    h.ok(&reg_mr_cmd(pdn, MR_TYPE_MW1, 0));
    h.ok(&reg_mr_cmd(pdn, MR_TYPE_MW2, 0));
    h.expect(&reg_mr_cmd(pdn, MR_TYPE_MW1, 0), STATUS_NO_RESOURCES);
    h.expect(&user, STATUS_NO_RESOURCES);
}

// ------------------------------------------------------------ binding and use

/// Type 1: bound by a WQE of one QP, used by every QP of its PD: WRITE,
/// READ and FETCH_ADD through the window's key land in the MR at the same
/// addresses; the key of the allocation is stale after the bind.
#[test]
fn type_1_window_write_read_and_atomic() {
    let (mut a, mut b) = two_pairs();
    let bm = b.reg_mr(16384, WIN_MR);
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(1, 3000));
    let mw = b.alloc_mw(MR_TYPE_MW1);
    let key = with_variant(mw, 0x41);
    let seg = bind_seg(key, bm.key, bm.va(4096), 8192, RW | RR | RA);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, WC_SUCCESS)]);
    assert_eq!(
        window(&b, key),
        Some(MwWindow {
            mr_index: bm.key >> KEY_INDEX_SHIFT,
            addr: bm.va(4096),
            length: 8192,
            access: RW | RR | RA,
            qpn: None,
        })
    );
    assert_eq!(b.h.dev.counters().data.mw_binds, 1);
    // WRITE (three packets) through QP 0, READ back through QP 1.
    a.post_send(0, &write_wr(2, &src, 3000, bm.va(4196), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert_eq!(b.bytes(bm.at(4196), 3000), pattern(1, 3000));
    assert_eq!(b.bytes(bm.at(4096), 100), vec![0; 100]);
    let sink = MrInfo {
        iova: src.iova + 4096,
        gpa: src.gpa + 4096,
        ..src
    };
    a.post_send(1, &read_wr(3, &sink, 3000, bm.va(4196), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RDMA_READ, WC_SUCCESS)]);
    assert_eq!(a.bytes(sink.gpa, 3000), pattern(1, 3000));
    // FETCH_ADD on the window's last word.
    b.fill(bm.at(12288 - 8), &40u64.to_le_bytes());
    a.post_send(0, &fetch_add_wr(4, &sink, bm.va(12288 - 8), key, 2));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(4, WC_FETCH_ADD, WC_SUCCESS)]);
    assert_eq!(word(&b, bm.at(12288 - 8)), 42);
    assert_eq!(word(&a, sink.gpa), 40);
    // The allocation's key is stale now.
    a.post_send(0, &write_wr(5, &src, 8, bm.va(4096), mw));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(5, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(bm.at(4096), 8), vec![0; 8]);
    assert_eq!(qp_state(&b, 0), Some(QPS_ERR));
}

/// Type 2: bound by a WQE of a QP, usable by that QP only.
#[test]
fn type_2_window_is_the_binding_qps() {
    let (mut a, mut b) = two_pairs();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(2, 100));
    let key = with_variant(b.alloc_mw(MR_TYPE_MW2), 0x77);
    let seg = bind_seg(key, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, WC_SUCCESS)]);
    assert_eq!(window(&b, key).and_then(|w| w.qpn), Some(b.qps[0].qpn));
    a.post_send(0, &write_wr(2, &src, 100, bm.va(10), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert_eq!(b.bytes(bm.at(10), 100), pattern(2, 100));
    // Through the other QP of the PD: a remote access error.
    a.fill(src.gpa, &[0xee; 100]);
    a.post_send(1, &write_wr(3, &src, 100, bm.va(10), key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(bm.at(10), 100), pattern(2, 100));
    assert_eq!(qp_state(&b, 1), Some(QPS_ERR));
    assert_eq!(qp_state(&b, 0), Some(QPS_RTS));
}

/// Windows over a zero-based MR (its addresses) and over a physical MR
/// (guest memory only).
#[test]
fn windows_over_zero_based_and_physical_mrs() {
    let (mut a, mut b) = pair();
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(3, 200));
    // Zero-based: the window is [512, 1536) of the MR's [0, 4096).
    let gpa = b.h.alloc(4096, 4096);
    let mut zb = reg_mr_cmd(b.pdn, MR_TYPE_USER, WIN_MR | ACCESS_ZERO_BASED);
    zb.pbl = b.h.pbl_contig(gpa, 1, 12);
    zb.length = 4096;
    let zb_key = b.h.ok(&zb);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, zb_key, 512, 1024, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, WC_SUCCESS)]);
    a.post_send(0, &write_wr(2, &src, 200, 600, key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert_eq!(b.bytes(gpa + 600, 200), pattern(3, 200));
    // Physical: the window's addresses are guest physical.
    let phys = b.h.ok(&reg_mr_cmd(b.pdn, MR_TYPE_PHYS, WIN_MR));
    let buf = b.h.alloc(4096, 4096);
    let pkey = with_variant(b.alloc_mw(MR_TYPE_MW2), 2);
    let seg = bind_seg(pkey, phys, buf, 4096, RW | RR);
    assert_eq!(bind(&mut b, 0, 3, &seg), vec![(3, WC_BIND_MW, WC_SUCCESS)]);
    a.post_send(0, &write_wr(4, &src, 200, buf + 1000, pkey));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(4, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert_eq!(b.bytes(buf + 1000, 200), pattern(3, 200));
    // A physical window over memory the guest does not have is refused.
    let bad = with_variant(b.alloc_mw(MR_TYPE_MW1), 3);
    let seg = bind_seg(bad, phys, UNMAPPED, 4096, RR);
    assert_eq!(
        bind(&mut b, 0, 5, &seg),
        vec![(5, WC_BIND_MW, WC_MW_BIND_ERR)]
    );
}

/// A window's key is no lkey: an SGE naming it, or a REG_MR WQE naming
/// it, fails with LOC_PROT_ERR.
#[test]
fn window_keys_are_never_lkeys() {
    for case in 0..3 {
        let (mut a, mut b) = pair();
        let am = a.reg_mr(4096, WIN_MR);
        let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE | RW);
        b.post_recv(0, 9, &[(bm.va(0), 4096, bm.key)]);
        let key = with_variant(a.alloc_mw(MR_TYPE_MW1), 1);
        let seg = bind_seg(key, am.key, am.va(0), 4096, RW | RR);
        assert_eq!(bind(&mut a, 0, 1, &seg), vec![(1, WC_BIND_MW, WC_SUCCESS)]);
        let (opcode, wc) = match case {
            0 => {
                let mut send = wr(2, WR_SEND);
                send.sges = vec![(am.va(0), 64, key)];
                a.post_send(0, &send);
                (WR_SEND, WC_SEND)
            }
            1 => {
                let mut read = read_wr(2, &am, 64, bm.va(0), bm.key);
                read.sges = vec![(am.va(0), 64, key)];
                a.post_send(0, &read);
                (WR_RDMA_READ, WC_RDMA_READ)
            }
            _ => {
                let mut raw = vec![0u8; 256];
                raw[0..8].copy_from_slice(&2u64.to_le_bytes());
                raw[8] = WR_REG_MR;
                raw[9] = WQE_SIGNALED;
                let reg = SqWqeRegMr {
                    iova: 0x1000,
                    length: 4096,
                    key,
                    access: ACCESS_LOCAL_WRITE,
                    reserved: 0,
                };
                raw[32..64].copy_from_slice(reg.as_bytes());
                let pbl = Pbl {
                    addr: am.gpa,
                    page_count: 1,
                    page_shift: 12,
                    level: PBL_LEVEL_0,
                    reserved: 0,
                };
                raw[64..80].copy_from_slice(pbl.as_bytes());
                a.post_send_raw(0, &raw);
                (WR_REG_MR, WC_REG_MR)
            }
        };
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(2, wc, WC_LOC_PROT_ERR)],
            "opcode {opcode}"
        );
        assert!(window(&a, key).is_some(), "the window stays bound");
    }
    // A receive SGE naming a window: the SEND into it fails.
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(4096, WIN_MR);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, WC_SUCCESS)]);
    b.post_recv(0, 7, &[(bm.va(0), 4096, key)]);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let mut send = wr(2, WR_SEND);
    send.sges = vec![(src.va(0), 64, src.key)];
    a.post_send(0, &send);
    run(&a, &b);
    assert_eq!(statuses(&b.poll()), vec![(7, WC_RECV, WC_LOC_PROT_ERR)]);
    assert_ne!(statuses(&a.poll())[0].2, WC_SUCCESS);
}

/// Every failing bind: MW_BIND_ERR, the QP to ERR, no object changed.
#[test]
fn bind_failures() {
    for case in 0..22 {
        let (mut a, mut b) = pair();
        let pdn = b.pdn;
        let other_pd = b.h.alloc_pd();
        let bm = b.reg_mr(8192, WIN_MR);
        let mw1 = b.alloc_mw(MR_TYPE_MW1);
        let mw2 = b.alloc_mw(MR_TYPE_MW2);
        let k1 = with_variant(mw1, 0x51);
        let k2 = with_variant(mw2, 0x52);
        let good = bind_seg(k1, bm.key, bm.va(0), 4096, RW | RR);
        let mut flags = WQE_SIGNALED;
        let mut num_sge = 0u8;
        let (what, seg) = match case {
            0 => {
                let other = in_pd(&mut b, other_pd, |b| b.alloc_mw(MR_TYPE_MW1));
                (
                    "window of another PD",
                    SqWqeBindMw {
                        mw_key: other,
                        ..good
                    },
                )
            }
            1 => {
                let m = in_pd(&mut b, other_pd, |b| b.reg_mr(4096, WIN_MR));
                ("MR of another PD", bind_seg(k1, m.key, m.va(0), 4096, RR))
            }
            2 => {
                let m = b.reg_mr(4096, WIN_MR & !ACCESS_MW_BIND);
                ("MR without MW_BIND", bind_seg(k1, m.key, m.va(0), 4096, RR))
            }
            3 => (
                "range before the MR",
                SqWqeBindMw {
                    addr: bm.va(0) - 1,
                    ..good
                },
            ),
            4 => (
                "range past the end of the MR",
                bind_seg(k2, bm.key, bm.va(4096), 4097, RR),
            ),
            5 => {
                let phys = b.h.ok(&reg_mr_cmd(pdn, MR_TYPE_PHYS, WIN_MR));
                (
                    "range overflows",
                    bind_seg(k1, phys, u64::MAX - 10, 100, RR),
                )
            }
            6 => {
                let m = b.reg_mr(4096, RR | ACCESS_MW_BIND);
                (
                    "REMOTE_WRITE, MR without LOCAL_WRITE",
                    bind_seg(k1, m.key, m.va(0), 4096, RW | RR),
                )
            }
            7 => {
                let m = b.reg_mr(4096, RR | ACCESS_MW_BIND);
                (
                    "REMOTE_ATOMIC, MR without LOCAL_WRITE",
                    bind_seg(k2, m.key, m.va(0), 4096, RA),
                )
            }
            8 => {
                let first = bind_seg(k2, bm.key, bm.va(0), 4096, RR);
                assert_eq!(bind(&mut b, 0, 1, &first), vec![(1, WC_BIND_MW, 0)]);
                (
                    "type 2 bound already",
                    bind_seg(with_variant(k2, 0x53), bm.key, bm.va(4096), 4096, RR),
                )
            }
            9 => (
                "access ZERO_BASED",
                SqWqeBindMw {
                    access: RR | ACCESS_ZERO_BASED,
                    ..good
                },
            ),
            10 => (
                "access MW_BIND",
                SqWqeBindMw {
                    access: RR | ACCESS_MW_BIND,
                    ..good
                },
            ),
            11 => (
                "access bit 8",
                SqWqeBindMw {
                    access: RR | 0x100,
                    ..good
                },
            ),
            12 => (
                "reserved",
                SqWqeBindMw {
                    reserved: 1,
                    ..good
                },
            ),
            13 => (
                "mw_key names an MR",
                SqWqeBindMw {
                    mw_key: bm.key,
                    ..good
                },
            ),
            14 => (
                "mr_key names a window",
                SqWqeBindMw {
                    mr_key: mw2,
                    ..good
                },
            ),
            15 => (
                "mr_key with a stale variant",
                SqWqeBindMw {
                    mr_key: with_variant(bm.key, 0x99),
                    ..good
                },
            ),
            16 => {
                let mut fast = reg_mr_cmd(pdn, MR_TYPE_FAST_REG, 0);
                fast.max_pages = 4;
                let key = b.h.ok(&fast);
                ("a FREE fast-register MR", bind_seg(k1, key, 0, 100, RR))
            }
            17 => (
                "mw_key names nothing",
                SqWqeBindMw {
                    mw_key: 0x00ff_ff41,
                    ..good
                },
            ),
            18 => {
                num_sge = 1;
                ("num_sge 1", good)
            }
            19 => {
                flags |= WQE_INLINE;
                ("INLINE", good)
            }
            20 => ("type 2, length 0, no MR", bind_seg(k2, 0, 0, 0, 0)),
            _ => (
                "type 1 replaced by a range past the MR",
                bind_seg(k1, bm.key, bm.va(8000), 200, RR),
            ),
        };
        let before = mrs_json(&b);
        let mut raw = bind_mw_wqe(100, flags, &seg);
        raw[10] = num_sge;
        b.post_send_raw(0, &raw);
        assert_eq!(
            statuses(&b.poll()),
            vec![(100, WC_BIND_MW, WC_MW_BIND_ERR)],
            "{what}"
        );
        assert_eq!(mrs_json(&b), before, "{what} changed an object");
        assert_eq!(qp_state(&b, 0), Some(QPS_ERR), "{what}");
        assert_eq!(b.h.dev.counters().data.mw_bind_errors, 1, "{what}");
        let _ = &mut a;
    }
}

/// BIND_MW is an RC opcode: UD and UC QPs complete it with
/// LOC_QP_OP_ERR (their SQ enters SQE), as REG_MR.
#[test]
fn bind_mw_is_rc_only() {
    let mut n = Node::new(36);
    let m = n.reg_mr(4096, WIN_MR);
    let key = with_variant(n.alloc_mw(MR_TYPE_MW1), 1);
    n.create_qp(QPT_UD);
    n.activate_ud(0, 0x1111);
    let seg = bind_seg(key, m.key, m.va(0), 4096, RR);
    assert_eq!(
        bind(&mut n, 0, 1, &seg),
        vec![(1, WC_BIND_MW, WC_LOC_QP_OP_ERR)]
    );
    assert_eq!(qp_state(&n, 0), Some(QPS_SQE));
    let (mut a, mut b) = uc_pair();
    let bm = b.reg_mr(4096, WIN_MR);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, bm.key, bm.va(0), 4096, RW);
    assert_eq!(
        bind(&mut b, 0, 2, &seg),
        vec![(2, WC_BIND_MW, WC_LOC_QP_OP_ERR)]
    );
    assert_eq!(qp_state(&b, 0), Some(QPS_SQE));
    assert_eq!(window(&b, key_of(&b, key)), None);
    let _ = &mut a;
}

/// The current key of the object with `key`'s index.
fn key_of(n: &Node, key: u32) -> u32 {
    entry(n, key).expect("object").0
}

/// An access through a window that breaks one of its rules: a remote
/// access error (the QP's own flags: invalid request), nothing written.
#[test]
fn access_outside_the_window_rules_fails() {
    for case in 0..10 {
        let (mut a, mut b) = if case == 9 {
            rc_pair(|x| x.qp_access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ)
        } else {
            two_pairs()
        };
        let bm = b.reg_mr(16384, WIN_MR);
        let src = a.reg_mr(4096, WIN_MR);
        a.fill(src.gpa, &[0xab; 64]);
        let mw1 = b.alloc_mw(MR_TYPE_MW1);
        let k1 = with_variant(mw1, 0x61);
        let rights = match case {
            2 => RW,
            3 => RR,
            4 => RW | RR,
            _ => RW | RR | RA,
        };
        let seg = bind_seg(k1, bm.key, bm.va(4096), 4096, rights);
        assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
        let (what, req, want) = match case {
            0 => (
                "WRITE one byte before the window",
                write_wr(2, &src, 2, bm.va(4095), k1),
                WC_REM_ACCESS_ERR,
            ),
            1 => (
                "WRITE one byte past the window",
                write_wr(2, &src, 11, bm.va(8192 - 10), k1),
                WC_REM_ACCESS_ERR,
            ),
            2 => (
                "READ through a write-only window",
                read_wr(2, &src, 64, bm.va(4096), k1),
                WC_REM_ACCESS_ERR,
            ),
            3 => (
                "WRITE through a read-only window",
                write_wr(2, &src, 64, bm.va(4096), k1),
                WC_REM_ACCESS_ERR,
            ),
            4 => (
                "atomic without REMOTE_ATOMIC",
                fetch_add_wr(2, &src, bm.va(4096), k1, 1),
                WC_REM_ACCESS_ERR,
            ),
            5 => (
                "stale variant",
                write_wr(2, &src, 64, bm.va(4096), mw1),
                WC_REM_ACCESS_ERR,
            ),
            6 => {
                let free = b.alloc_mw(MR_TYPE_MW1);
                (
                    "a FREE window",
                    write_wr(2, &src, 64, bm.va(4096), free),
                    WC_REM_ACCESS_ERR,
                )
            }
            7 => {
                let k2 = with_variant(b.alloc_mw(MR_TYPE_MW2), 0x62);
                let seg = bind_seg(k2, bm.key, bm.va(4096), 4096, RW);
                assert_eq!(bind(&mut b, 1, 3, &seg), vec![(3, WC_BIND_MW, 0)]);
                (
                    "type 2 bound to another QP",
                    write_wr(2, &src, 64, bm.va(4096), k2),
                    WC_REM_ACCESS_ERR,
                )
            }
            8 => (
                "READ past the window's end",
                read_wr(2, &src, 64, bm.va(8192 - 32), k1),
                WC_REM_ACCESS_ERR,
            ),
            _ => (
                "the QP without REMOTE_WRITE",
                write_wr(2, &src, 64, bm.va(4096), k1),
                WC_REM_INV_REQ_ERR,
            ),
        };
        let opcode = match req.opcode {
            WR_RDMA_READ => WC_RDMA_READ,
            WR_ATOMIC_FETCH_ADD => WC_FETCH_ADD,
            _ => WC_RDMA_WRITE,
        };
        a.post_send(0, &req);
        run(&a, &b);
        assert_eq!(statuses(&a.poll()), vec![(2, opcode, want)], "{what}");
        assert_eq!(b.bytes(bm.gpa, 16384), vec![0; 16384], "{what}");
        assert_eq!(qp_state(&b, 0), Some(QPS_ERR), "{what}");
    }
}

/// UC: an RDMA WRITE through a window lands; outside it, it is dropped.
#[test]
fn uc_write_through_a_window() {
    let (mut a, mut b) = uc_pair();
    // The window is bound by an RC QP of the same PD.
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 1, &mut b, 1, |_| {});
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(4, 2000));
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, bm.key, bm.va(1000), 4000, RW);
    assert_eq!(bind(&mut b, 1, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    a.post_send(0, &write_wr(2, &src, 2000, bm.va(1500), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(bm.at(1500), 2000), pattern(4, 2000));
    let bad_req = b.h.dev.counters().data.rx_uc_bad_req;
    a.fill(src.gpa, &[0xcd; 2000]);
    a.post_send(0, &write_wr(3, &src, 2000, bm.va(3500), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.h.dev.counters().data.rx_uc_bad_req, bad_req + 1);
    assert_eq!(b.bytes(bm.at(1500), 2000), pattern(4, 2000));
    assert_eq!(b.bytes(bm.at(3500), 2000), vec![0; 2000]);
}

// ------------------------------------------------------------ unbinding

/// Type 1: a bind replaces the window, a zero-length bind (no MR) unbinds
/// with the new variant.
#[test]
fn type_1_rebind_and_unbind() {
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(5, 64));
    let mw = b.alloc_mw(MR_TYPE_MW1);
    let k1 = with_variant(mw, 1);
    let k2 = with_variant(mw, 2);
    let k3 = with_variant(mw, 3);
    let seg = bind_seg(k1, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    // Bound again: the second half with the next variant.
    let seg = bind_seg(k2, bm.key, bm.va(4096), 4096, RW);
    assert_eq!(bind(&mut b, 0, 2, &seg), vec![(2, WC_BIND_MW, 0)]);
    assert_eq!(window(&b, k2).map(|w| w.addr), Some(bm.va(4096)));
    a.post_send(0, &write_wr(3, &src, 64, bm.va(4096), k2));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(bm.at(4096), 64), pattern(5, 64));
    // Unbound: FREE with the new variant; addr, mr_key and access are
    // ignored.
    let seg = bind_seg(k3, 0xdead_beef, 0x1234, 0, ACCESS_ZERO_BASED | 0x100);
    assert_eq!(bind(&mut b, 0, 4, &seg), vec![(4, WC_BIND_MW, 0)]);
    assert_eq!(window(&b, k3), None);
    assert_eq!(b.h.dev.counters().data.mw_binds, 3);
    for (id, key) in [(5, k2), (6, k3)] {
        a.post_send(0, &write_wr(id, &src, 64, bm.va(4096), key));
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(id, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
        );
        reconnect(&mut a, &mut b);
    }
    assert_eq!(b.bytes(bm.at(0), 64), vec![0; 64]);
}

/// A window changed between the packets of a multi-packet WRITE: the rest
/// of it is refused, as after an invalidation.
#[test]
fn unbind_reaches_a_write_under_way() {
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(6, 4000));
    let mw = b.alloc_mw(MR_TYPE_MW1);
    let key = with_variant(mw, 1);
    let seg = bind_seg(key, bm.key, bm.va(0), 8192, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    a.post_send(0, &write_wr(2, &src, 4000, bm.va(0), key));
    let frames = a.h.dev.take_tx();
    assert_eq!(frames.len(), 4, "four 1024-byte packets");
    b.h.dev.receive_batch(frames[..1].iter().map(Vec::as_slice));
    let seg = bind_seg(with_variant(mw, 2), 0, 0, 0, 0);
    assert_eq!(bind(&mut b, 0, 3, &seg), vec![(3, WC_BIND_MW, 0)]);
    b.h.dev.receive_batch(frames[1..].iter().map(Vec::as_slice));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(bm.at(0), 1024), pattern(6, 1024));
    assert_eq!(b.bytes(bm.at(1024), 8), vec![0; 8]);
}

/// A READ accepted through a window whose responses are held back (the
/// TX queue is full) when the window is invalidated: the rest of them is
/// refused, nothing more is read, the responder's QP enters ERR.
#[test]
fn invalidation_reaches_read_responses_under_way() {
    const LEN: u64 = 700 * 1024;
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(LEN, WIN_MR);
    b.fill(bm.gpa, &pattern(7, LEN as usize));
    let sink = a.reg_mr(LEN, ACCESS_LOCAL_WRITE);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW2), 1);
    let seg = bind_seg(key, bm.key, bm.va(0), LEN, RR);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    a.post_send(0, &read_wr(2, &sink, LEN as u32, bm.va(0), key));
    let request = a.h.dev.take_tx();
    b.h.dev.receive_batch(request.iter().map(Vec::as_slice));
    // The READ was accepted; part of its responses wait for room.
    assert_eq!(qp_state(&b, 0), Some(QPS_RTS));
    b.post_send(0, &local_inv_wr(3, key));
    assert_eq!(statuses(&b.poll()), vec![(3, WC_LOCAL_INV, 0)]);
    run(&a, &b);
    // The responder NAKs remote operational error with the PSN of the
    // first response it did not send: the requester fails the READ at
    // once, with no retry.
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_READ, WC_REM_OP_ERR)]);
    assert_eq!(qp_state(&b, 0), Some(QPS_ERR));
    let tail = (LEN - 1024) as usize;
    assert_eq!(a.bytes(sink.gpa + tail as u64, 1024), vec![0; 1024]);
}

/// LOCAL_INV of a type 2 window (exact key, any QP of the PD): FREE, then
/// bound again with a new variant; of a type 1 window, a stale key or
/// another PD's window: LOC_PROT_ERR, nothing changes.
#[test]
fn local_inv_of_windows() {
    let (mut a, mut b) = two_pairs();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(8, 64));
    let mw2 = b.alloc_mw(MR_TYPE_MW2);
    let k = with_variant(mw2, 1);
    let seg = bind_seg(k, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    // Invalidated by the PD's other QP.
    b.post_send(1, &local_inv_wr(2, k));
    assert_eq!(statuses(&b.poll()), vec![(2, WC_LOCAL_INV, 0)]);
    assert_eq!(window(&b, k), None);
    // No window bound to the MR any more: it may be modified.
    b.h.ok(&modify_mr(bm.key, MODIFY_MR_ACCESS, 0, WIN_MR));
    a.post_send(0, &write_wr(3, &src, 64, bm.va(0), k));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(bm.at(0), 64), vec![0; 64]);
    reconnect(&mut a, &mut b);
    // Bound again with the next variant: it works.
    let k2 = with_variant(mw2, 2);
    let seg = bind_seg(k2, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 4, &seg), vec![(4, WC_BIND_MW, 0)]);
    a.post_send(0, &write_wr(5, &src, 64, bm.va(0), k2));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(5, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(bm.at(0), 64), pattern(8, 64));
    // The failures.
    let other_pd = b.h.alloc_pd();
    let other = in_pd(&mut b, other_pd, |b| b.alloc_mw(MR_TYPE_MW2));
    let mw1 = b.alloc_mw(MR_TYPE_MW1);
    let k1 = with_variant(mw1, 1);
    let seg = bind_seg(k1, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 1, 6, &seg), vec![(6, WC_BIND_MW, 0)]);
    for (what, key) in [
        ("type 1", k1),
        ("stale variant", with_variant(mw2, 1)),
        ("another PD", other),
    ] {
        let before = mrs_json(&b);
        b.post_send(1, &local_inv_wr(7, key));
        assert_eq!(
            statuses(&b.poll()),
            vec![(7, WC_LOCAL_INV, WC_LOC_PROT_ERR)],
            "{what}"
        );
        assert_eq!(mrs_json(&b), before, "{what}");
        // QP 1 back to work for the next case.
        let q = b.qps[1];
        assert_eq!(
            b.h.modify(attr_with(q.qpn, QPS_RESET, QP_ATTR_STATE)),
            STATUS_SUCCESS
        );
        b.h.mem.write_u32(q.sq_dbrec, 0);
        b.h.mem.write_u32(q.rq_dbrec, 0);
        b.qps[1].sq_pi = 0;
        b.qps[1].rq_pi = 0;
        let aq = a.qps[1].qpn;
        let (am, ag) = (a.mac, ipv4_gid(a.ip));
        b.connect(1, aq, am, ag, 3, NET_IPV4, with_atomics);
    }
}

/// A received SEND with invalidate frees a type 2 window that is FREE or
/// bound to the receiving QP; one bound to another QP, a type 1 window or
/// a stale key fail as an invalid key does (REM_INV_REQ_ERR both sides).
#[test]
fn send_with_invalidate_of_windows() {
    for case in 0..5 {
        let (mut a, mut b) = two_pairs();
        let bm = b.reg_mr(8192, WIN_MR);
        let rbuf = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        a.fill(src.gpa, &pattern(9, 100));
        let mw2 = b.alloc_mw(MR_TYPE_MW2);
        let mw1 = b.alloc_mw(MR_TYPE_MW1);
        let (what, key, ok) = match case {
            0 => {
                let k = with_variant(mw2, 1);
                let seg = bind_seg(k, bm.key, bm.va(0), 4096, RW);
                assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
                ("bound to the receiving QP", k, true)
            }
            1 => ("FREE", mw2, true),
            2 => {
                let k = with_variant(mw2, 1);
                let seg = bind_seg(k, bm.key, bm.va(0), 4096, RW);
                assert_eq!(bind(&mut b, 1, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
                ("bound to another QP", k, false)
            }
            3 => {
                let k = with_variant(mw1, 1);
                let seg = bind_seg(k, bm.key, bm.va(0), 4096, RW);
                assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
                ("type 1", k, false)
            }
            _ => {
                let k = with_variant(mw2, 1);
                let seg = bind_seg(k, bm.key, bm.va(0), 4096, RW);
                assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
                ("stale variant", mw2, false)
            }
        };
        b.post_recv(0, 50, &[(rbuf.va(0), 4096, rbuf.key)]);
        let before = mrs_json(&b);
        let mut send = wr(2, WR_SEND_INV);
        send.imm = key.to_be_bytes();
        send.sges = vec![(src.va(0), 100, src.key)];
        a.post_send(0, &send);
        run(&a, &b);
        if ok {
            assert_eq!(statuses(&a.poll()), vec![(2, WC_SEND, 0)], "{what}");
            let cqes = b.poll();
            assert_eq!(statuses(&cqes), vec![(50, WC_RECV, 0)], "{what}");
            assert_eq!(cqes[0].flags & CQE_WITH_INV, CQE_WITH_INV);
            assert_eq!(cqes[0].imm_data.to_le_bytes(), key.to_be_bytes());
            assert_eq!(window(&b, key), None, "{what}");
            // The window's key is refused now.
            a.post_send(0, &write_wr(3, &src, 8, bm.va(0), key));
            run(&a, &b);
            assert_eq!(
                statuses(&a.poll()),
                vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)],
                "{what}"
            );
            assert_eq!(b.bytes(bm.gpa, 8), vec![0; 8]);
        } else {
            assert_eq!(
                statuses(&a.poll()),
                vec![(2, WC_SEND, WC_REM_INV_REQ_ERR)],
                "{what}"
            );
            assert_eq!(
                statuses(&b.poll()),
                vec![(50, WC_RECV, WC_REM_INV_REQ_ERR)],
                "{what}"
            );
            assert_eq!(mrs_json(&b), before, "{what}");
            assert_eq!(qp_state(&b, 0), Some(QPS_ERR));
        }
    }
}

/// DEREG_MR of a bound window: its key is refused at once.
#[test]
fn dealloc_of_a_bound_window_revokes_access() {
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(10, 64));
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    a.post_send(0, &write_wr(2, &src, 64, bm.va(0), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, 0)]);
    // By index, whatever the variant; the MR stays.
    assert_eq!(dereg(&mut b, with_variant(key, 0xee)), STATUS_SUCCESS);
    assert!(entry(&b, key).is_none());
    assert!(entry(&b, bm.key).is_some());
    a.fill(src.gpa, &[0xff; 64]);
    a.post_send(0, &write_wr(3, &src, 64, bm.va(0), key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(bm.at(0), 64), pattern(10, 64));
}

/// DEREG_MR of an MR unbinds every window bound to it (they stay, FREE,
/// with their keys); MODIFY_MR of an MR with windows bound is BUSY, after
/// its other checks.
#[test]
fn dereg_and_modify_of_an_mr_with_windows() {
    let (mut a, mut b) = two_pairs();
    let bm = b.reg_mr(8192, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let k1 = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let k2 = with_variant(b.alloc_mw(MR_TYPE_MW2), 2);
    let seg = bind_seg(k1, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    let seg = bind_seg(k2, bm.key, bm.va(4096), 4096, RW);
    assert_eq!(bind(&mut b, 1, 2, &seg), vec![(2, WC_BIND_MW, 0)]);
    // MODIFY_MR: the other checks first, then BUSY; nothing changes.
    let before = mrs_json(&b);
    let other = b.h.alloc_pd();
    for (what, cmd, status) in [
        (
            "new rights",
            modify_mr(bm.key, MODIFY_MR_ACCESS, 0, ACCESS_LOCAL_WRITE),
            STATUS_BUSY,
        ),
        (
            "new PD",
            modify_mr(bm.key, MODIFY_MR_PD, other, 0),
            STATUS_BUSY,
        ),
        (
            "no such PD",
            modify_mr(bm.key, MODIFY_MR_PD, other + 50, 0),
            STATUS_BAD_HANDLE,
        ),
        (
            "ZERO_BASED changed",
            modify_mr(bm.key, MODIFY_MR_ACCESS, 0, WIN_MR | ACCESS_ZERO_BASED),
            STATUS_BAD_PARAM,
        ),
        (
            "stale key",
            modify_mr(with_variant(bm.key, 0x12), MODIFY_MR_ACCESS, 0, 0),
            STATUS_BAD_HANDLE,
        ),
        (
            "access bit 6",
            modify_mr(bm.key, MODIFY_MR_ACCESS, 0, 0x40),
            STATUS_BAD_PARAM,
        ),
    ] {
        assert_eq!(b.h.cmd(&cmd).0, status, "{what}");
        assert_eq!(mrs_json(&b), before, "{what}");
    }
    // An MR without windows is modified as before.
    let plain = b.reg_mr(4096, WIN_MR);
    b.h.ok(&modify_mr(
        plain.key,
        MODIFY_MR_ACCESS,
        0,
        ACCESS_LOCAL_WRITE,
    ));
    // DEREG_MR: both windows FREE, their keys kept.
    assert_eq!(dereg(&mut b, bm.key), STATUS_SUCCESS);
    assert_eq!(window(&b, k1), None);
    assert_eq!(window(&b, k2), None);
    // A new MR (at the freed index, as it happens) is not reached.
    let again = b.reg_mr(8192, WIN_MR);
    for (qi, key) in [(0usize, k1), (1, k2)] {
        a.post_send(qi, &write_wr(3, &src, 64, again.va(0), key));
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
        );
    }
    assert_eq!(b.bytes(again.gpa, 8192), vec![0; 8192]);
    // Unbound, the windows let the MR be modified.
    let seg = bind_seg(with_variant(k1, 3), again.key, again.va(0), 64, RW);
    let b2 = &mut b;
    reconnect(&mut a, b2);
    assert_eq!(bind(b2, 0, 4, &seg), vec![(4, WC_BIND_MW, 0)]);
    assert_eq!(
        b2.h.cmd(&modify_mr(again.key, MODIFY_MR_ACCESS, 0, WIN_MR))
            .0,
        STATUS_BUSY
    );
    let seg = bind_seg(with_variant(k1, 4), 0, 0, 0, 0);
    assert_eq!(bind(b2, 0, 5, &seg), vec![(5, WC_BIND_MW, 0)]);
    b2.h.ok(&modify_mr(again.key, MODIFY_MR_ACCESS, 0, WIN_MR));
    // A type 1 window bound again to another MR leaves the first one.
    let plain = b2.reg_mr(4096, WIN_MR);
    let seg = bind_seg(with_variant(k1, 5), again.key, again.va(0), 64, RW);
    assert_eq!(bind(b2, 0, 6, &seg), vec![(6, WC_BIND_MW, 0)]);
    let seg = bind_seg(with_variant(k1, 6), plain.key, plain.va(0), 64, RW);
    assert_eq!(bind(b2, 0, 7, &seg), vec![(7, WC_BIND_MW, 0)]);
    b2.h.ok(&modify_mr(again.key, MODIFY_MR_ACCESS, 0, WIN_MR));
    assert_eq!(
        b2.h.cmd(&modify_mr(plain.key, MODIFY_MR_ACCESS, 0, WIN_MR))
            .0,
        STATUS_BUSY
    );
    // Deallocated, the window leaves its MR too.
    assert_eq!(dereg(b2, k1), STATUS_SUCCESS);
    b2.h.ok(&modify_mr(plain.key, MODIFY_MR_ACCESS, 0, WIN_MR));
}

/// DESTROY_QP frees the type 2 windows bound to the QP (not type 1 ones).
#[test]
fn destroy_qp_frees_its_type_2_windows() {
    let (_a, mut b) = two_pairs();
    let bm = b.reg_mr(8192, WIN_MR);
    let k1 = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let k2 = with_variant(b.alloc_mw(MR_TYPE_MW2), 2);
    let seg = bind_seg(k1, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 1, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    let seg = bind_seg(k2, bm.key, bm.va(0), 4096, RW);
    assert_eq!(bind(&mut b, 1, 2, &seg), vec![(2, WC_BIND_MW, 0)]);
    let mut c = CmdDestroyQp::zeroed();
    c.hdr.opcode = CMD_DESTROY_QP;
    c.qpn = b.qps[1].qpn;
    b.h.ok(&c);
    assert_eq!(window(&b, k2), None);
    assert!(window(&b, k1).is_some());
}

/// A window over a fast-register MR (REG_MR WQE with MW_BIND): usable
/// while the MR is VALID; invalidating the MR unbinds the window.
#[test]
fn windows_over_a_fast_register_mr() {
    let (mut a, mut b) = pair();
    let mut fast = reg_mr_cmd(b.pdn, MR_TYPE_FAST_REG, 0);
    fast.max_pages = 1;
    let fkey = with_variant(b.h.ok(&fast), 0x41);
    let page = b.h.alloc(4096, 4096);
    let mut raw = vec![0u8; 256];
    raw[0..8].copy_from_slice(&1u64.to_le_bytes());
    raw[8] = WR_REG_MR;
    raw[9] = WQE_SIGNALED;
    let reg = SqWqeRegMr {
        iova: 0x10_0000,
        length: 4096,
        key: fkey,
        access: WIN_MR,
        reserved: 0,
    };
    raw[32..64].copy_from_slice(reg.as_bytes());
    let pbl = Pbl {
        addr: page,
        page_count: 1,
        page_shift: 12,
        level: PBL_LEVEL_0,
        reserved: 0,
    };
    raw[64..80].copy_from_slice(pbl.as_bytes());
    b.post_send_raw(0, &raw);
    assert_eq!(statuses(&b.poll()), vec![(1, WC_REG_MR, 0)]);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let seg = bind_seg(key, fkey, 0x10_0100, 256, RW);
    assert_eq!(bind(&mut b, 0, 2, &seg), vec![(2, WC_BIND_MW, 0)]);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(11, 64));
    a.post_send(0, &write_wr(3, &src, 64, 0x10_0140, key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(page + 0x140, 64), pattern(11, 64));
    // LOCAL_INV of the MR: the window goes FREE with it.
    b.post_send(0, &local_inv_wr(4, fkey));
    assert_eq!(statuses(&b.poll()), vec![(4, WC_LOCAL_INV, 0)]);
    assert_eq!(window(&b, key), None);
    a.post_send(0, &write_wr(5, &src, 64, 0x10_0100, key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(5, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(page + 0x100, 64), vec![0; 64]);
}

/// A bind executes in SQ order: not before the WQEs before it completed.
#[test]
fn bind_runs_in_sq_order() {
    let (mut a, mut b) = pair();
    let bm = b.reg_mr(4096, WIN_MR);
    let am = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    // b's SEND waits for a receive (RNR), the bind behind it waits too.
    let mut send = wr(1, WR_SEND);
    send.sges = vec![(bm.va(0), 32, bm.key)];
    b.post_send(0, &send);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    b.post_bind_mw(0, 2, &bind_seg(key, bm.key, bm.va(0), 4096, RR));
    let frames = b.h.dev.take_tx();
    a.h.dev.receive_batch(frames.iter().map(Vec::as_slice));
    let naks = a.h.dev.take_tx();
    b.h.dev.receive_batch(naks.iter().map(Vec::as_slice));
    assert!(b.poll().is_empty());
    assert_eq!(window(&b, key_of(&b, key)), None, "not executed yet");
    a.post_recv(0, 3, &[(am.va(0), 4096, am.key)]);
    run(&a, &b);
    assert_eq!(
        statuses(&b.poll()),
        vec![(1, WC_SEND, 0), (2, WC_BIND_MW, 0)]
    );
    assert!(window(&b, key).is_some());
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RECV, 0)]);
}

/// A QP entering ERR flushes a BIND_MW WQE with its own opcode.
#[test]
fn a_flushed_bind_has_its_opcode() {
    let (_a, mut b) = pair();
    let bm = b.reg_mr(4096, WIN_MR);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW1), 1);
    let qpn = b.qps[0].qpn;
    assert_eq!(
        b.h.modify(attr_with(qpn, QPS_ERR, QP_ATTR_STATE)),
        STATUS_SUCCESS
    );
    b.post_bind_mw(0, 1, &bind_seg(key, bm.key, bm.va(0), 4096, RR));
    assert_eq!(statuses(&b.poll()), vec![(1, WC_BIND_MW, WC_WR_FLUSH_ERR)]);
    assert_eq!(window(&b, key_of(&b, key)), None);
}

/// A type 2 window bound with length 0 is a window of no bytes: BOUND,
/// but no access of a byte passes it.
#[test]
fn a_zero_length_type_2_window_grants_no_byte() {
    let (mut a, mut b) = two_pairs();
    let bm = b.reg_mr(4096, WIN_MR);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let key = with_variant(b.alloc_mw(MR_TYPE_MW2), 1);
    let seg = bind_seg(key, bm.key, bm.va(100), 0, RW);
    assert_eq!(bind(&mut b, 0, 1, &seg), vec![(1, WC_BIND_MW, 0)]);
    assert_eq!(window(&b, key).map(|w| w.length), Some(0));
    // Zero bytes validate no R_Key (C9-88); one byte is refused.
    a.post_send(0, &write_wr(2, &src, 0, bm.va(100), key));
    a.post_send(0, &write_wr(3, &src, 1, bm.va(100), key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_RDMA_WRITE, 0), (3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    // Bound, it cannot be bound again before it is invalidated (by the
    // other QP: this one is in ERR after the refused WRITE).
    let seg = bind_seg(with_variant(key, 2), bm.key, bm.va(0), 64, RW);
    assert_eq!(
        bind(&mut b, 1, 4, &seg),
        vec![(4, WC_BIND_MW, WC_MW_BIND_ERR)]
    );
}
