// SPDX-License-Identifier: GPL-2.0
//! Device 1.1 for kernel ULPs: physical MRs, fast-register MRs (REG_MR and
//! LOCAL_INV WQEs), SEND with invalidate, and inline address vectors on
//! UD/GSI QPs; and MODIFY_MR (1.6), which changes an MR's PD and rights in
//! place.

mod common;

use common::rdma::*;
use common::*;
use ferroce_dev::hw::*;
use ferroce_dev::objects::{FastRegState, MrKind};
use ferroce_dev::wire::GSI_QKEY;
use ferroce_dev::GuestMemory;
use zerocopy::IntoBytes;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
/// Stride of the harness's send WQEs.
const SQ_STRIDE: usize = 256;
/// An iova for fast-registered regions, not page aligned.
const FR_IOVA: u64 = 0xffff_8880_1234_5100;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn pair() -> (Node, Node) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |_| {});
    (a, b)
}

/// The key as a WQE header's `imm_data` holds it (be32 in memory).
fn key_imm(key: u32) -> u32 {
    u32::from_le_bytes(key.to_be_bytes())
}

fn header(wr_id: u64, opcode: u8, flags: u8) -> SqWqeHdr {
    SqWqeHdr {
        wr_id,
        opcode,
        flags,
        ..SqWqeHdr::zeroed()
    }
}

/// A send WQE of the harness's stride from its parts.
fn wqe(hdr: &SqWqeHdr, seg: &[u8], data: &[(usize, &[u8])]) -> Vec<u8> {
    let mut raw = vec![0u8; SQ_STRIDE];
    raw[..SQ_WQE_SEG_OFFSET].copy_from_slice(hdr.as_bytes());
    raw[SQ_WQE_SEG_OFFSET..SQ_WQE_SEG_OFFSET + seg.len()].copy_from_slice(seg);
    for (at, bytes) in data {
        raw[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    raw
}

fn reg_mr_wqe(wr_id: u64, seg: &SqWqeRegMr, pbl: &Pbl) -> Vec<u8> {
    let hdr = header(wr_id, WR_REG_MR, WQE_SIGNALED);
    wqe(
        &hdr,
        seg.as_bytes(),
        &[(SQ_WQE_DATA_OFFSET, pbl.as_bytes())],
    )
}

fn local_inv_wqe(wr_id: u64, key: u32) -> Vec<u8> {
    let hdr = SqWqeHdr {
        imm_data: key_imm(key),
        ..header(wr_id, WR_LOCAL_INV, WQE_SIGNALED)
    };
    wqe(&hdr, &[], &[])
}

/// Writes a raw WQE and its doorbell record; `ring` rings the doorbell.
fn put_wqe(n: &mut Node, qi: usize, raw: &[u8], ring: bool) {
    let q = n.qps[qi];
    let slot = u64::from(u32::from(q.sq_pi) & (q.sq_depth - 1));
    n.h.mem
        .write(q.sq_base + slot * SQ_STRIDE as u64, raw)
        .unwrap();
    n.qps[qi].sq_pi = q.sq_pi.wrapping_add(1);
    n.h.mem.write_u32(q.sq_dbrec, u32::from(n.qps[qi].sq_pi));
    if ring {
        n.ring_sq(qi);
    }
}

fn post_raw(n: &mut Node, qi: usize, raw: &[u8]) {
    put_wqe(n, qi, raw, true);
}

fn reg_mr_cmd(pdn: u32, mr_type: u8, access: u32, max_pages: u32) -> CmdRegMr {
    let mut cmd = CmdRegMr {
        pdn,
        mr_type,
        access,
        max_pages,
        key_variant: 0x11,
        ..CmdRegMr::zeroed()
    };
    cmd.hdr.opcode = CMD_REG_MR;
    cmd
}

fn fast_reg_mr(n: &mut Node, pdn: u32, max_pages: u32) -> u32 {
    n.h.ok(&reg_mr_cmd(pdn, MR_TYPE_FAST_REG, 0, max_pages))
}

fn phys_mr(n: &mut Node, access: u32) -> u32 {
    let pdn = n.pdn;
    n.h.ok(&reg_mr_cmd(pdn, MR_TYPE_PHYS, access, 0))
}

/// `count` 4 KiB pages, not contiguous, and a level-1 list of them.
fn page_list(n: &mut Node, count: u32) -> (Pbl, Vec<u64>) {
    let pages: Vec<u64> = (0..count)
        .map(|_| {
            let page = n.h.alloc(4096, 4096);
            n.h.alloc(4096, 4096); // a gap: the pages are not contiguous
            page
        })
        .collect();
    let list = n.h.alloc(u64::from(count) * 8, 8);
    let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
    n.fill(list, &bytes);
    let pbl = Pbl {
        addr: list,
        page_count: count,
        page_shift: 12,
        level: PBL_LEVEL_1,
        reserved: 0,
    };
    (pbl, pages)
}

/// Guest physical address of byte `rel` of a region fast-registered at
/// FR_IOVA over `pages`.
fn fr_gpa(pages: &[u64], rel: u64) -> u64 {
    let pos = (FR_IOVA & 0xfff) + rel;
    pages[(pos >> 12) as usize] + (pos & 0xfff)
}

fn reg_seg(key: u32, length: u64, access: u32) -> SqWqeRegMr {
    SqWqeRegMr {
        iova: FR_IOVA,
        length,
        key,
        access,
        reserved: 0,
    }
}

fn mr_state(n: &Node, key: u32) -> Option<FastRegState> {
    let objects = n.h.dev.objects();
    let entry = objects
        .mrs
        .iter()
        .find(|e| e.handle == key >> KEY_INDEX_SHIFT)?;
    match entry.obj.kind {
        MrKind::FastReg { state, .. } => Some(state),
        _ => None,
    }
}

/// Registers a fast-register MR of `b` over 3 pages through b's SQ and
/// returns (new key, pages).
fn fast_register_on(b: &mut Node, access: u32, variant: u8) -> (u32, Vec<u64>) {
    let pdn = b.pdn;
    let key = fast_reg_mr(b, pdn, 8);
    assert_eq!(mr_state(b, key), Some(FastRegState::Free));
    let (pbl, pages) = page_list(b, 3);
    let new_key = with_variant(key, variant);
    let len = 3 * 4096 - (FR_IOVA & 0xfff);
    post_raw(b, 0, &reg_mr_wqe(70, &reg_seg(new_key, len, access), &pbl));
    assert_eq!(statuses(&b.poll()), vec![(70, WC_REG_MR, WC_SUCCESS)]);
    assert_eq!(mr_state(b, new_key), Some(FastRegState::Valid));
    (new_key, pages)
}

#[test]
fn version_1_7_advertises_the_new_capabilities() {
    let h = Harness::new();
    // 1.7 or later.
    let minor = h.reg_r(REG_VERSION) & VERSION_MINOR_MASK;
    assert!(minor >= 7);
    assert_eq!(h.reg_r(REG_VERSION), 1 << VERSION_MAJOR_SHIFT | minor);
    let caps = h.reg_r(REG_DEV_CAPS);
    assert_eq!(caps & CAP_PHYS_MR, CAP_PHYS_MR);
    assert_eq!(caps & CAP_MEM_MGT_EXT, CAP_MEM_MGT_EXT);
    assert_eq!(caps & CAP_PORT_MAC, CAP_PORT_MAC);
    assert_eq!(caps & CAP_VLAN, CAP_VLAN);
    assert_eq!(caps & CAP_ATOMIC, CAP_ATOMIC);
    assert_eq!(caps & CAP_UC, CAP_UC);
    assert_eq!(caps & CAP_SRQ, CAP_SRQ);
    assert_eq!(caps & CAP_MODIFY_MR, CAP_MODIFY_MR);
    assert_eq!(caps & CAP_RESIZE_CQ, CAP_RESIZE_CQ);
    assert_eq!(caps & CAP_MCAST, CAP_MCAST);
    assert_eq!(caps & CAP_MW, CAP_MW);
    assert_eq!(caps & 0x3fffff, 0x3fffff, "device.rst: DEV_CAPS in 1.7");
}

#[test]
fn reg_mr_checks_the_new_fields() {
    let mut n = Node::new(36);
    let pdn = n.pdn;
    let cases: Vec<(CmdRegMr, u8)> = vec![
        // 3 and 4 are the memory windows of 1.7 (tests/mw.rs).
        (reg_mr_cmd(pdn, 5, 0, 0), STATUS_BAD_PARAM),
        (
            CmdRegMr {
                reserved1: 1,
                ..reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 0)
            },
            STATUS_BAD_RESERVED,
        ),
        (
            CmdRegMr {
                reserved0: [0, 1],
                ..reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 0)
            },
            STATUS_BAD_RESERVED,
        ),
        // PHYS: no range, no page list, no ZERO_BASED, the LOCAL_WRITE rule.
        (
            CmdRegMr {
                length: 4096,
                ..reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 0)
            },
            STATUS_BAD_PARAM,
        ),
        (
            CmdRegMr {
                iova: 0x1000,
                ..reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 0)
            },
            STATUS_BAD_PARAM,
        ),
        (
            CmdRegMr {
                pbl: Pbl {
                    addr: HEAP,
                    page_count: 1,
                    page_shift: 12,
                    level: 0,
                    reserved: 0,
                },
                ..reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 0)
            },
            STATUS_BAD_PARAM,
        ),
        (
            reg_mr_cmd(pdn, MR_TYPE_PHYS, ACCESS_ZERO_BASED, 0),
            STATUS_BAD_PARAM,
        ),
        (
            reg_mr_cmd(pdn, MR_TYPE_PHYS, ACCESS_REMOTE_WRITE, 0),
            STATUS_BAD_PARAM,
        ),
        (reg_mr_cmd(pdn, MR_TYPE_PHYS, 0, 1), STATUS_BAD_PARAM),
        (reg_mr_cmd(pdn + 7, MR_TYPE_PHYS, 0, 0), STATUS_BAD_HANDLE),
        // FAST_REG: access 0, max_pages 1..512.
        (reg_mr_cmd(pdn, MR_TYPE_FAST_REG, 0, 0), STATUS_BAD_PARAM),
        (
            reg_mr_cmd(pdn, MR_TYPE_FAST_REG, 0, FAST_REG_MAX_PAGES + 1),
            STATUS_BAD_PARAM,
        ),
        (
            reg_mr_cmd(pdn, MR_TYPE_FAST_REG, ACCESS_LOCAL_WRITE, 4),
            STATUS_BAD_PARAM,
        ),
        (
            CmdRegMr {
                length: 1,
                ..reg_mr_cmd(pdn, MR_TYPE_FAST_REG, 0, 4)
            },
            STATUS_BAD_PARAM,
        ),
        (
            reg_mr_cmd(pdn + 7, MR_TYPE_FAST_REG, 0, 4),
            STATUS_BAD_HANDLE,
        ),
    ];
    for (i, (cmd, status)) in cases.iter().enumerate() {
        let (got, _) = n.h.cmd(cmd);
        assert_eq!(got, *status, "case {i}");
    }
    // A USER MR with max_pages set is refused; with 0 it is a 1.0 REG_MR.
    let gpa = n.h.alloc(4096, 4096);
    let mut user = reg_mr_cmd(pdn, MR_TYPE_USER, ACCESS_LOCAL_WRITE, 1);
    user.pbl = n.h.pbl_contig(gpa, 1, 12);
    user.iova = gpa;
    user.length = 4096;
    n.h.expect(&user, STATUS_BAD_PARAM);
    user.max_pages = 0;
    let user_key = n.h.ok(&user);
    // DEREG_MR works for every type; a fast-register MR by index alone.
    let phys = phys_mr(&mut n, ALL_ACCESS);
    let fast = fast_reg_mr(&mut n, pdn, FAST_REG_MAX_PAGES);
    for key in [user_key, phys, with_variant(fast, 0x99)] {
        let mut dereg = CmdDeregMr::zeroed();
        dereg.hdr.opcode = CMD_DEREG_MR;
        dereg.key = key;
        n.h.ok(&dereg);
    }
    assert!(n.h.dev.objects().mrs.is_empty());
}

#[test]
fn phys_mr_translates_guest_physical_addresses() {
    let (mut a, mut b) = pair();
    let a_phys = phys_mr(&mut a, ACCESS_LOCAL_WRITE);
    let b_phys = phys_mr(&mut b, ALL_ACCESS);
    let src = a.h.alloc(8192, 8);
    let back = a.h.alloc(8192, 8);
    let dst = b.h.alloc(8192, 8) + 5;
    a.fill(src, &pattern(1, 6000));
    // WRITE from a GPA through a's physical lkey to a GPA through b's rkey.
    let mut write = wr(1, WR_RDMA_WRITE);
    write.sges = vec![(src, 6000, a_phys)];
    (write.remote_addr, write.rkey) = (dst, b_phys);
    a.post_send(0, &write);
    // READ it back into a's memory through the physical lkey.
    let mut read = wr(2, WR_RDMA_READ);
    read.sges = vec![(back, 6000, a_phys)];
    (read.remote_addr, read.rkey) = (dst, b_phys);
    a.post_send(0, &read);
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, 0), (2, WC_RDMA_READ, 0)]
    );
    assert_eq!(b.bytes(dst, 6000), pattern(1, 6000));
    assert_eq!(a.bytes(back, 6000), pattern(1, 6000));
}

#[test]
fn phys_mr_refuses_what_is_not_guest_memory() {
    // Local: an SGE outside guest memory, and one whose end overflows.
    for (addr, len) in [(UNMAPPED, 16u32), (u64::MAX - 8, 16)] {
        let (mut a, mut b) = pair();
        let a_phys = phys_mr(&mut a, ACCESS_LOCAL_WRITE);
        let bm = b.reg_mr(4096, ALL_ACCESS);
        let mut write = write_wr(1, &bm, 0, bm.va(0), bm.key);
        write.sges = vec![(addr, len, a_phys)];
        a.post_send(0, &write);
        assert!(a.h.dev.take_tx().is_empty());
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_RDMA_WRITE, WC_LOC_PROT_ERR)]
        );
    }
    // Remote: an RDMA WRITE to a GPA outside guest memory; and a physical
    // MR without REMOTE_WRITE.
    for case in 0..2 {
        let (mut a, mut b) = pair();
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let b_phys = if case == 0 {
            phys_mr(&mut b, ALL_ACCESS)
        } else {
            phys_mr(&mut b, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ)
        };
        let target = if case == 0 {
            UNMAPPED
        } else {
            b.h.alloc(4096, 8)
        };
        a.post_send(0, &write_wr(1, &src, 64, target, b_phys));
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)],
            "case {case}"
        );
        assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
    }
}

#[test]
fn fast_reg_then_write_and_read_through_the_new_rkey() {
    let (mut a, mut b) = pair();
    let (key, pages) = fast_register_on(&mut b, ALL_ACCESS, 0x22);
    assert_eq!(key & KEY_VARIANT_MASK, 0x22);
    let src = a.reg_mr(16384, ACCESS_LOCAL_WRITE);
    let data = pattern(7, 7000);
    a.fill(src.gpa, &data);
    // 7000 bytes at byte 300 of the region: across all three pages.
    a.post_send(0, &write_wr(1, &src, 7000, FR_IOVA + 300, key));
    let mut read = wr(2, WR_RDMA_READ);
    read.sges = vec![(src.va(8192), 7000, src.key)];
    (read.remote_addr, read.rkey) = (FR_IOVA + 300, key);
    a.post_send(0, &read);
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, 0), (2, WC_RDMA_READ, 0)]
    );
    for (i, byte) in data.iter().enumerate().step_by(97) {
        let gpa = fr_gpa(&pages, 300 + i as u64);
        assert_eq!(b.bytes(gpa, 1)[0], *byte, "byte {i}");
    }
    assert_eq!(a.bytes(src.at(8192), 7000), data);
    // The key of the MR before the registration is stale now.
    a.post_send(0, &write_wr(3, &src, 8, FR_IOVA, with_variant(key, 0x11)));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
}

#[test]
fn a_free_fast_reg_key_is_an_invalid_key() {
    // Remote use of a FREE MR's key.
    let (mut a, mut b) = pair();
    let pdn = b.pdn;
    let key = fast_reg_mr(&mut b, pdn, 4);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.post_send(0, &write_wr(1, &src, 8, 0, key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    // Local use: an SGE with a FREE MR's key.
    let (mut a, mut b) = pair();
    let pdn = a.pdn;
    let key = fast_reg_mr(&mut a, pdn, 4);
    let bm = b.reg_mr(4096, ALL_ACCESS);
    let mut write = write_wr(1, &bm, 0, bm.va(0), bm.key);
    write.sges = vec![(0, 8, key)];
    a.post_send(0, &write);
    assert!(a.h.dev.take_tx().is_empty());
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_LOC_PROT_ERR)]
    );
}

#[test]
fn local_inv_then_remote_access_is_refused() {
    let (mut a, mut b) = pair();
    let (key, pages) = fast_register_on(&mut b, ALL_ACCESS, 0x23);
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &[0x5a; 64]);
    a.post_send(0, &write_wr(1, &src, 64, FR_IOVA, key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    post_raw(&mut b, 0, &local_inv_wqe(71, key));
    assert_eq!(statuses(&b.poll()), vec![(71, WC_LOCAL_INV, 0)]);
    assert_eq!(mr_state(&b, key), Some(FastRegState::Free));
    a.fill(src.gpa, &[0xa5; 64]);
    a.post_send(0, &write_wr(2, &src, 64, FR_IOVA, key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(fr_gpa(&pages, 0), 64), vec![0x5a; 64]);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
}

#[test]
fn invalidation_reaches_a_write_under_way() {
    // A multi-packet WRITE whose rkey is invalidated between its packets:
    // the rest of it is refused.
    let (mut a, mut b) = pair();
    let (key, pages) = fast_register_on(&mut b, ALL_ACCESS, 0x24);
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(3, 4000));
    a.post_send(0, &write_wr(1, &src, 4000, FR_IOVA, key));
    let frames = a.h.dev.take_tx();
    assert_eq!(frames.len(), 4, "four 1024-byte packets");
    b.h.dev.receive_batch(frames[..1].iter().map(Vec::as_slice));
    post_raw(&mut b, 0, &local_inv_wqe(72, key));
    assert_eq!(statuses(&b.poll()), vec![(72, WC_LOCAL_INV, 0)]);
    b.h.dev.receive_batch(frames[1..].iter().map(Vec::as_slice));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(fr_gpa(&pages, 1024), 8), vec![0; 8]);
}

#[test]
fn local_operations_run_in_sq_order() {
    // REG_MR, a SEND from the new lkey, LOCAL_INV and a SEND from the
    // invalidated key, posted under one doorbell.
    let (mut a, mut b) = pair();
    let pdn = a.pdn;
    let key = fast_reg_mr(&mut a, pdn, 4);
    let (pbl, pages) = page_list(&mut a, 2);
    a.fill(fr_gpa(&pages, 0), &pattern(9, 100));
    let bm = b.reg_mr(4096, ALL_ACCESS);
    b.post_recv(0, 50, &[(bm.va(0), 1000, bm.key)]);
    let new_key = with_variant(key, 0x31);
    let seg = reg_seg(new_key, 5000, ACCESS_LOCAL_WRITE);
    put_wqe(&mut a, 0, &reg_mr_wqe(1, &seg, &pbl), false);
    let mut send = wr(2, WR_SEND);
    send.sges = vec![(FR_IOVA, 100, new_key)];
    a.write_send_wqe(0, &send);
    put_wqe(&mut a, 0, &local_inv_wqe(3, new_key), false);
    send.wr_id = 4;
    a.write_send_wqe(0, &send);
    a.ring_sq(0);
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![
            (1, WC_REG_MR, 0),
            (2, WC_SEND, 0),
            (3, WC_LOCAL_INV, 0),
            (4, WC_SEND, WC_LOC_PROT_ERR)
        ]
    );
    assert_eq!(statuses(&b.poll()), vec![(50, WC_RECV, 0)]);
    assert_eq!(b.bytes(bm.gpa, 100), pattern(9, 100));
}

/// A REG_MR WQE that must fail: LOC_PROT_ERR, QP to ERR, MR unchanged.
#[test]
fn reg_mr_wqe_errors() {
    for case in 0..13 {
        let (mut a, _b) = pair();
        let pdn = a.pdn;
        let key = fast_reg_mr(&mut a, pdn, 2);
        let (pbl, _) = page_list(&mut a, 2);
        let mut seg = reg_seg(with_variant(key, 0x40), 4096, ALL_ACCESS);
        let mut pbl = pbl;
        let mut raw_flags = None;
        match case {
            0 => {
                // Already VALID.
                post_raw(&mut a, 0, &reg_mr_wqe(9, &seg, &pbl));
                assert_eq!(statuses(&a.poll()), vec![(9, WC_REG_MR, 0)]);
            }
            1 => {
                // An MR of another PD.
                let other = a.h.alloc_pd();
                seg.key = fast_reg_mr(&mut a, other, 2);
            }
            2 => {
                // More pages than max_pages.
                pbl = page_list(&mut a, 3).0;
            }
            3 => seg.key = a.reg_mr(4096, ALL_ACCESS).key, // not fast-register
            4 => seg.key = phys_mr(&mut a, ACCESS_LOCAL_WRITE),
            5 => seg.access = ACCESS_LOCAL_WRITE | ACCESS_ZERO_BASED,
            6 => seg.access = ACCESS_REMOTE_WRITE, // without LOCAL_WRITE
            7 => seg.length = 2 * 4096,            // offset + length beyond the pages
            8 => seg.length = 0,
            9 => pbl.level = PBL_LEVEL_2,
            10 => pbl.addr = UNMAPPED, // list not DMA-able
            11 => seg.key = with_variant(key, 0) + (1 << KEY_INDEX_SHIFT) * 50, // no such MR
            _ => raw_flags = Some(1u8), // num_sge set
        }
        let mut raw = reg_mr_wqe(1, &seg, &pbl);
        if let Some(num_sge) = raw_flags {
            raw[10] = num_sge;
        }
        post_raw(&mut a, 0, &raw);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_REG_MR, WC_LOC_PROT_ERR)],
            "case {case}"
        );
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR), "case {case}");
        if case != 0 {
            assert_eq!(mr_state(&a, key), Some(FastRegState::Free), "case {case}");
        }
    }
}

#[test]
fn local_inv_errors() {
    for case in 0..4 {
        let (mut a, _b) = pair();
        let pdn = a.pdn;
        let key = fast_reg_mr(&mut a, pdn, 2);
        let target = match case {
            0 => with_variant(key, 0x12), // wrong variant
            1 => {
                let other = a.h.alloc_pd();
                fast_reg_mr(&mut a, other, 2) // another PD
            }
            2 => a.reg_mr(4096, ACCESS_LOCAL_WRITE).key, // a USER MR
            _ => 0x4200,                                 // no such MR
        };
        post_raw(&mut a, 0, &local_inv_wqe(1, target));
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_LOCAL_INV, WC_LOC_PROT_ERR)],
            "case {case}"
        );
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_ERR));
    }
    // A FREE MR may be invalidated again.
    let (mut a, _b) = pair();
    let pdn = a.pdn;
    let key = fast_reg_mr(&mut a, pdn, 2);
    post_raw(&mut a, 0, &local_inv_wqe(1, key));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_LOCAL_INV, 0)]);
}

#[test]
fn memory_opcodes_are_rc_only_and_av_is_ud_only() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_UD);
    b.create_qp(QPT_UD);
    a.activate_ud(0, 0x1111);
    for (i, opcode) in [WR_REG_MR, WR_LOCAL_INV, WR_SEND_INV]
        .into_iter()
        .enumerate()
    {
        let ahn = a.create_ah(av_to(&b));
        let hdr = header(i as u64, opcode, WQE_SIGNALED);
        let dest = SqWqeUd {
            ahn,
            remote_qpn: 2,
            remote_qkey: 0x1111,
            reserved: 0,
        };
        post_raw(&mut a, 0, &wqe(&hdr, dest.as_bytes(), &[]));
        let qpn = a.qps[0].qpn;
        let wc_opcode = [WC_REG_MR, WC_LOCAL_INV, WC_SEND][i];
        assert_eq!(
            statuses(&a.poll()),
            vec![(i as u64, wc_opcode, WC_LOC_QP_OP_ERR)]
        );
        // Back from SQE to RTS for the next case.
        let mut attr = full_attr(qpn);
        attr.qp_state = QPS_RTS;
        attr.attr_mask = QP_ATTR_STATE;
        assert_eq!(a.h.modify(attr), STATUS_SUCCESS);
    }
    assert!(a.h.dev.take_tx().is_empty());
    // WQE_AV is a reserved flag on RC.
    let (mut a, _b) = pair();
    let mut send = wr(1, WR_SEND);
    send.flags |= WQE_AV;
    send.inline = Some(vec![1; 4]);
    a.post_send(0, &send);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, WC_LOC_QP_OP_ERR)]);
}

#[test]
fn send_with_invalidate_frees_the_remote_mr() {
    // One packet (SEND_ONLY_WITH_INVALIDATE) and three (..._LAST_...).
    for len in [200u32, 3000] {
        let (mut a, mut b) = pair();
        let (key, pages) = fast_register_on(&mut b, ALL_ACCESS, 0x25);
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        a.fill(src.gpa, &pattern(5, len as usize));
        let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
        b.post_recv(0, 60, &[(bm.va(0), 4096, bm.key)]);
        let mut send = wr(1, WR_SEND_INV);
        send.flags |= WQE_SOLICITED;
        send.imm = key.to_be_bytes();
        send.sges = vec![(src.va(0), len, src.key)];
        a.post_send(0, &send);
        // On the wire: the last packet is SEND_LAST/ONLY_WITH_INVALIDATE
        // with the key in the IETH right after the BTH (IPv4: byte 54).
        let frames = a.h.dev.take_tx();
        let last = frames.last().unwrap();
        let want = if len > 1024 { 0x16 } else { 0x17 };
        assert_eq!(last[42], want);
        assert_eq!(last[54..58], key.to_be_bytes());
        b.h.dev.receive_batch(frames.iter().map(Vec::as_slice));
        run(&a, &b);
        assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, 0)]);
        let cqes = b.poll();
        assert_eq!(statuses(&cqes), vec![(60, WC_RECV, 0)]);
        let recv = cqes[0];
        assert_eq!(recv.byte_len, len);
        assert_eq!(
            recv.flags & (CQE_WITH_INV | CQE_WITH_IMM | CQE_SOLICITED),
            CQE_WITH_INV | CQE_SOLICITED
        );
        assert_eq!(recv.imm_data.to_le_bytes(), key.to_be_bytes());
        assert_eq!(b.bytes(bm.gpa, len as usize), pattern(5, len as usize));
        assert_eq!(mr_state(&b, key), Some(FastRegState::Free));
        // The invalidated rkey is refused.
        a.post_send(0, &write_wr(2, &src, 8, FR_IOVA, key));
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(2, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
        );
        assert_eq!(b.bytes(fr_gpa(&pages, 0), 8), vec![0; 8]);
    }
}

#[test]
fn send_with_invalidate_of_a_bad_key_fails_both_sides() {
    for case in 0..3 {
        let (mut a, mut b) = pair();
        let (key, _) = fast_register_on(&mut b, ALL_ACCESS, 0x26);
        let target = match case {
            0 => with_variant(key, 0x27),        // stale variant
            1 => b.reg_mr(4096, ALL_ACCESS).key, // a USER MR
            _ => {
                let other = b.h.alloc_pd();
                fast_reg_mr(&mut b, other, 2) // another PD
            }
        };
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
        b.post_recv(0, 61, &[(bm.va(0), 4096, bm.key)]);
        let mut send = wr(1, WR_SEND_INV);
        send.imm = target.to_be_bytes();
        send.sges = vec![(src.va(0), 100, src.key)];
        a.post_send(0, &send);
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_SEND, WC_REM_INV_REQ_ERR)],
            "case {case}"
        );
        assert_eq!(
            statuses(&b.poll()),
            vec![(61, WC_RECV, WC_REM_INV_REQ_ERR)],
            "case {case}"
        );
        assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
        assert_eq!(mr_state(&b, key), Some(FastRegState::Valid));
    }
}

fn av_to(b: &Node) -> Av {
    let mut av = Av::zeroed();
    av.dmac = b.mac;
    av.hop_limit = 64;
    av.network_type = NET_IPV4;
    av.dgid = ipv4_gid(b.ip);
    av.sgid_index = 3;
    av
}

/// A UD/GSI send WQE with an inline AV and `sges` at AV_DATA_OFFSET.
fn av_send_wqe(wr_id: u64, av: &Av, dest: &SqWqeUd, sges: &[Sge]) -> Vec<u8> {
    let hdr = SqWqeHdr {
        num_sge: sges.len() as u8,
        ..header(wr_id, WR_SEND, WQE_SIGNALED | WQE_AV)
    };
    let sge_bytes: Vec<u8> = sges.iter().flat_map(|s| s.as_bytes().to_vec()).collect();
    wqe(
        &hdr,
        dest.as_bytes(),
        &[
            (SQ_WQE_DATA_OFFSET, av.as_bytes()),
            (SQ_WQE_AV_DATA_OFFSET, &sge_bytes),
        ],
    )
}

#[test]
fn gsi_send_with_an_inline_av_and_two_sges() {
    // As ib_mad does it: QP1 to QP1, Q_Key 0x80010000, the MAD header and
    // its data in two SGEs, into a 40 + 256-byte receive buffer.
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_GSI);
    b.create_qp(QPT_GSI);
    a.activate_ud(0, GSI_QKEY);
    b.activate_ud(0, GSI_QKEY);
    let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(m.gpa, &pattern(11, 256));
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 80, &[(bm.va(0), 40 + 256, bm.key)]);
    let dest = SqWqeUd {
        ahn: 0,
        remote_qpn: GSI_QPN,
        remote_qkey: 0x8001_0000,
        reserved: 0,
    };
    let sges = [
        Sge {
            addr: m.va(0),
            length: 24,
            lkey: m.key,
        },
        Sge {
            addr: m.va(24),
            length: 232,
            lkey: m.key,
        },
    ];
    post_raw(&mut a, 0, &av_send_wqe(1, &av_to(&b), &dest, &sges));
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, 0)]);
    run(&a, &b);
    let cqes = b.poll();
    assert_eq!(statuses(&cqes), vec![(80, WC_RECV, 0)]);
    let recv = cqes[0];
    assert_eq!(recv.byte_len, 40 + 256);
    assert_eq!(recv.src_qp, GSI_QPN);
    assert_eq!(recv.qpn, GSI_QPN);
    assert_eq!(recv.flags & CQE_GRH, CQE_GRH);
    assert_eq!(
        (recv.flags & CQE_NET_TYPE_MASK) >> CQE_NET_TYPE_SHIFT,
        NET_IPV4
    );
    let grh = b.bytes(bm.gpa, 40);
    assert_eq!(grh[..20], [0; 20]);
    assert_eq!(grh[20] >> 4, 4);
    assert_eq!(grh[32..36], a.ip);
    assert_eq!(b.bytes(bm.gpa + 40, 256), pattern(11, 256));
}

#[test]
fn ud_send_with_an_inline_av() {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_UD);
    b.create_qp(QPT_UD);
    a.activate_ud(0, 0x1111);
    b.activate_ud(0, 0x2222);
    let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
    b.post_recv(0, 81, &[(bm.va(0), 200, bm.key)]);
    let dest = SqWqeUd {
        ahn: 0,
        remote_qpn: b.qps[0].qpn,
        remote_qkey: 0x2222,
        reserved: 0,
    };
    // Inline data after the AV.
    let hdr = SqWqeHdr {
        inline_len: 13,
        ..header(1, WR_SEND, WQE_SIGNALED | WQE_AV | WQE_INLINE)
    };
    let raw = wqe(
        &hdr,
        dest.as_bytes(),
        &[
            (SQ_WQE_DATA_OFFSET, av_to(&b).as_bytes()),
            (SQ_WQE_AV_DATA_OFFSET, &pattern(2, 13)),
        ],
    );
    post_raw(&mut a, 0, &raw);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_SEND, 0)]);
    run(&a, &b);
    let cqes = b.poll();
    assert_eq!(statuses(&cqes), vec![(81, WC_RECV, 0)]);
    assert_eq!(cqes[0].byte_len, 40 + 13);
    assert_eq!(cqes[0].src_qp, a.qps[0].qpn);
    assert_eq!(b.bytes(bm.gpa + 40, 13), pattern(2, 13));
}

#[test]
fn inline_av_errors() {
    for case in 0..8 {
        let mut a = Node::new(36);
        let b = Node::new(37);
        a.create_qp(QPT_UD);
        a.activate_ud(0, 0x1111);
        let m = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        let mut av = av_to(&b);
        let mut dest = SqWqeUd {
            ahn: 0,
            remote_qpn: 2,
            remote_qkey: 0x1111,
            reserved: 0,
        };
        let mut sges = vec![Sge {
            addr: m.va(0),
            length: 16,
            lkey: m.key,
        }];
        let mut reserved_after_av = false;
        let mut num_sge = None;
        let mut status = WC_LOC_QP_OP_ERR;
        match case {
            0 => dest.ahn = a.create_ah(av_to(&b)), // both an AH and an AV
            1 => av.sgid_index = 9,                 // no such GID entry
            2 => av.network_type = NET_IPV6,        // not the entry's type
            3 => av.vlan = VLAN_VALID | 5,
            4 => av.reserved[0] = 1,
            5 => reserved_after_av = true,
            6 => av.dmac = [0; 6],
            _ => {
                // (256 - 112) / 16 = 9 SGEs fit, 10 do not.
                sges = vec![sges[0]; 9];
                num_sge = Some(10);
                status = WC_LOC_LEN_ERR;
            }
        }
        let mut raw = av_send_wqe(1, &av, &dest, &sges);
        if reserved_after_av {
            raw[SQ_WQE_AV_DATA_OFFSET - 1] = 1;
            raw[SQ_WQE_AV_DATA_OFFSET..].fill(0);
            raw[10] = 0;
        }
        if let Some(n) = num_sge {
            raw[10] = n;
        }
        post_raw(&mut a, 0, &raw);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_SEND, status)],
            "case {case}"
        );
        assert_eq!(a.h.dev.qp_state(a.qps[0].qpn), Some(QPS_SQE), "case {case}");
        assert!(a.h.dev.take_tx().is_empty(), "case {case}");
    }
}

/// Random memory-management WQEs (and SENDs with invalidate of random
/// keys) against fast-register MRs of both ends never make either device
/// panic, and every WQE completes exactly once.
#[test]
fn random_memory_wqes_never_panic() {
    for seed in 1..=12u64 {
        let (mut a, mut b) = pair();
        let mut rng = Rng(seed * 0x9e37_79b9);
        let (a_pdn, b_pdn) = (a.pdn, b.pdn);
        let a_keys: Vec<u32> = (0..3).map(|_| fast_reg_mr(&mut a, a_pdn, 4)).collect();
        let b_keys: Vec<u32> = (0..3).map(|_| fast_reg_mr(&mut b, b_pdn, 4)).collect();
        let (pbl, _) = page_list(&mut a, 4);
        let m = a.reg_mr(1 << 14, ACCESS_LOCAL_WRITE);
        let bm = b.reg_mr(1 << 14, ACCESS_LOCAL_WRITE);
        let mut posted = 0usize;
        for _ in 0..6 {
            b.post_recv(0, 0, &[(bm.va(0), 1 << 14, bm.key)]);
            let key = a_keys[rng.below(3) as usize] ^ (rng.below(2) as u32);
            let raw = match rng.below(3) {
                0 => {
                    let mut seg = reg_seg(key, 1 + rng.below(4 * 4096), ALL_ACCESS);
                    seg.iova = rng.next();
                    seg.access = rng.below(0x40) as u32;
                    let mut pbl = pbl;
                    pbl.page_count = rng.below(6) as u32;
                    pbl.page_shift = 10 + rng.below(24) as u8;
                    pbl.level = rng.below(3) as u8;
                    reg_mr_wqe(posted as u64, &seg, &pbl)
                }
                1 => local_inv_wqe(posted as u64, key),
                _ => {
                    let target = b_keys[rng.below(3) as usize] ^ (rng.below(2) as u32);
                    let hdr = SqWqeHdr {
                        imm_data: key_imm(target),
                        num_sge: 1,
                        ..header(posted as u64, WR_SEND_INV, WQE_SIGNALED)
                    };
                    let sge = Sge {
                        addr: m.va(0),
                        length: rng.below(3000) as u32,
                        lkey: m.key,
                    };
                    wqe(&hdr, &[], &[(SQ_WQE_DATA_OFFSET, sge.as_bytes())])
                }
            };
            put_wqe(&mut a, 0, &raw, rng.pct(50));
            posted += 1;
        }
        a.ring_sq(0);
        run(&a, &b);
        let cqes = a.poll();
        assert_eq!(cqes.len(), posted, "seed {seed}");
        b.poll();
    }
}

// ------------------------------------------------------------ MODIFY_MR

/// The MRs of `n` as the device dumps them (key, type, PD, rights, range).
fn mrs_json(n: &Node) -> String {
    serde_json::to_string(&n.h.dev.objects().mrs).unwrap()
}

/// The (PD, rights) of the MR with `key`'s index.
fn mr_pd_access(n: &Node, key: u32) -> (u32, u32) {
    let objects = n.h.dev.objects();
    let e = objects
        .mrs
        .iter()
        .find(|e| e.handle == key >> KEY_INDEX_SHIFT)
        .expect("MR");
    assert_eq!(e.obj.key, key, "the key stays");
    (e.obj.pdn, e.obj.access)
}

fn dealloc_pd(n: &mut Node, pdn: u32) -> u8 {
    let mut c = CmdDeallocPd::zeroed();
    c.hdr.opcode = CMD_DEALLOC_PD;
    c.pdn = pdn;
    n.h.cmd(&c).0
}

/// A zero-based USER MR of one page in `n`'s PD.
fn zero_based_mr(n: &mut Node, access: u32) -> u32 {
    let gpa = n.h.alloc(4096, 4096);
    let mut c = reg_mr_cmd(n.pdn, MR_TYPE_USER, access | ACCESS_ZERO_BASED, 0);
    c.pbl = n.h.pbl_contig(gpa, 1, 12);
    c.length = 4096;
    n.h.ok(&c)
}

/// Creates an RC QP of `n` in PD `pdn` (not `n`'s own); returns its index.
fn qp_in_pd(n: &mut Node, pdn: u32) -> usize {
    let own = std::mem::replace(&mut n.pdn, pdn);
    let qi = n.create_qp(QPT_RC);
    n.pdn = own;
    qi
}

/// device.rst, Commands, MODIFY_MR: every refusal has its status and
/// changes nothing; a change keeps the key.
#[test]
fn modify_mr_checks_its_fields() {
    let mut n = Node::new(36);
    let pdn = n.pdn;
    let other = n.h.alloc_pd();
    let user = n.reg_mr(4096, ALL_ACCESS).key;
    let phys = phys_mr(&mut n, ACCESS_LOCAL_WRITE);
    let zero = zero_based_mr(&mut n, ACCESS_LOCAL_WRITE);
    let fast = fast_reg_mr(&mut n, pdn, 4);
    let gone = n.reg_mr(4096, ALL_ACCESS).key;
    let mut dereg = CmdDeregMr::zeroed();
    dereg.hdr.opcode = CMD_DEREG_MR;
    dereg.key = gone;
    n.h.ok(&dereg);
    let (pd, acc, both) = (
        MODIFY_MR_PD,
        MODIFY_MR_ACCESS,
        MODIFY_MR_PD | MODIFY_MR_ACCESS,
    );
    let lw = ACCESS_LOCAL_WRITE;
    let cases: Vec<(&str, CmdModifyMr, u8)> = vec![
        // flags: at least one, no other bits.
        ("no flag", modify_mr(user, 0, 0, 0), STATUS_BAD_PARAM),
        ("flag bit 2", modify_mr(user, 4, 0, 0), STATUS_BAD_RESERVED),
        (
            "flag bit 31",
            modify_mr(user, acc | 1 << 31, 0, lw),
            STATUS_BAD_RESERVED,
        ),
        // pdn and access only with their flag.
        (
            "pdn without PD",
            modify_mr(user, acc, other, lw),
            STATUS_BAD_RESERVED,
        ),
        (
            "access without ACCESS",
            modify_mr(user, pd, other, lw),
            STATUS_BAD_RESERVED,
        ),
        (
            "both without flags",
            modify_mr(user, 0, other, lw),
            STATUS_BAD_RESERVED,
        ),
        // The new PD must exist.
        (
            "no such PD",
            modify_mr(user, pd, other + 50, 0),
            STATUS_BAD_HANDLE,
        ),
        ("PD 0", modify_mr(user, both, 0, lw), STATUS_BAD_HANDLE),
        // Rights checked as REG_MR checks them.
        // Bit 4 is MW_BIND since 1.7 (tests/mw.rs).
        (
            "access bit 7",
            modify_mr(user, acc, 0, lw | 0x80),
            STATUS_BAD_PARAM,
        ),
        (
            "access bit 6",
            modify_mr(user, acc, 0, lw | 0x40),
            STATUS_BAD_PARAM,
        ),
        (
            "REMOTE_WRITE without LOCAL_WRITE",
            modify_mr(user, acc, 0, ACCESS_REMOTE_WRITE),
            STATUS_BAD_PARAM,
        ),
        (
            "REMOTE_ATOMIC without LOCAL_WRITE",
            modify_mr(user, both, other, ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_READ),
            STATUS_BAD_PARAM,
        ),
        // The address space stays: ZERO_BASED neither added nor dropped.
        (
            "ZERO_BASED added",
            modify_mr(user, acc, 0, lw | ACCESS_ZERO_BASED),
            STATUS_BAD_PARAM,
        ),
        (
            "ZERO_BASED dropped",
            modify_mr(zero, acc, 0, lw),
            STATUS_BAD_PARAM,
        ),
        (
            "ZERO_BASED on a PHYS MR",
            modify_mr(phys, acc, 0, lw | ACCESS_ZERO_BASED),
            STATUS_BAD_PARAM,
        ),
        // The key: exact, of a USER or PHYS MR.
        (
            "stale variant",
            modify_mr(with_variant(user, 0x12), acc, 0, lw),
            STATUS_BAD_HANDLE,
        ),
        (
            "deregistered",
            modify_mr(gone, acc, 0, lw),
            STATUS_BAD_HANDLE,
        ),
        (
            "no such index",
            modify_mr(0x4211, acc, 0, lw),
            STATUS_BAD_HANDLE,
        ),
        ("key 0", modify_mr(0, pd, other, 0), STATUS_BAD_HANDLE),
        ("FAST_REG", modify_mr(fast, pd, other, 0), STATUS_BAD_PARAM),
        // The exact key first: a stale variant names no MR, whatever type.
        (
            "FAST_REG, stale variant",
            modify_mr(with_variant(fast, 0x12), pd, other, 0),
            STATUS_BAD_HANDLE,
        ),
        (
            "FAST_REG rights",
            modify_mr(fast, acc, 0, lw),
            STATUS_BAD_PARAM,
        ),
    ];
    let before = mrs_json(&n);
    for (what, cmd, status) in &cases {
        let (got, _) = n.h.cmd(cmd);
        assert_eq!(got, *status, "{what}");
        assert_eq!(mrs_json(&n), before, "{what} changed an MR");
    }
    let mut header = modify_mr(user, acc, 0, lw);
    header.hdr.flags = 1;
    n.h.expect(&header, STATUS_BAD_RESERVED);
    // Accepted: rights, PD, both; ZERO_BASED kept; the same rights again.
    n.h.ok(&modify_mr(user, acc, 0, ACCESS_REMOTE_READ));
    assert_eq!(mr_pd_access(&n, user), (pdn, ACCESS_REMOTE_READ));
    n.h.ok(&modify_mr(user, pd, other, 0));
    assert_eq!(mr_pd_access(&n, user), (other, ACCESS_REMOTE_READ));
    n.h.ok(&modify_mr(
        user,
        both,
        pdn,
        ALL_ACCESS | ACCESS_REMOTE_ATOMIC,
    ));
    assert_eq!(
        mr_pd_access(&n, user),
        (pdn, ALL_ACCESS | ACCESS_REMOTE_ATOMIC)
    );
    n.h.ok(&modify_mr(user, both, pdn, ALL_ACCESS));
    n.h.ok(&modify_mr(user, both, pdn, ALL_ACCESS));
    assert_eq!(mr_pd_access(&n, user), (pdn, ALL_ACCESS));
    n.h.ok(&modify_mr(zero, acc, 0, ALL_ACCESS | ACCESS_ZERO_BASED));
    assert_eq!(
        mr_pd_access(&n, zero),
        (pdn, ALL_ACCESS | ACCESS_ZERO_BASED)
    );
    n.h.ok(&modify_mr(phys, both, other, ALL_ACCESS));
    assert_eq!(mr_pd_access(&n, phys), (other, ALL_ACCESS));
    // The translation and the bounds stayed.
    let objects = n.h.dev.objects();
    let e = objects
        .mrs
        .iter()
        .find(|e| e.handle == user >> KEY_INDEX_SHIFT)
        .unwrap();
    assert_eq!(
        (e.obj.kind, e.obj.length, e.obj.page_count),
        (MrKind::User, 4096, 1)
    );
}

/// Rights removed in place: an incoming RDMA WRITE with the same rkey is
/// NAKed with a remote access error; rights added in place: it succeeds
/// with the same key.
#[test]
fn modify_mr_changes_rights_in_place() {
    let (mut a, mut b) = pair();
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 1, &mut b, 1, |_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(1, 4096));
    let dst = b.reg_mr(4096, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ);
    let key = dst.key;
    // No REMOTE_WRITE yet: added in place, the key works for a WRITE.
    b.h.ok(&modify_mr(key, MODIFY_MR_ACCESS, 0, ALL_ACCESS));
    assert_eq!(mr_pd_access(&b, key).1, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 100, dst.va(0), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(dst.gpa, 100), pattern(1, 100));
    // REMOTE_WRITE removed: the same WRITE is NAKed, nothing lands.
    b.h.ok(&modify_mr(
        key,
        MODIFY_MR_ACCESS,
        0,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
    ));
    let naks = b.h.dev.counters().data.err_naks_sent;
    a.post_send(0, &write_wr(2, &src, 100, dst.va(200), key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(2, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.h.dev.counters().data.err_naks_sent, naks + 1);
    assert_eq!(b.bytes(dst.gpa + 200, 100), vec![0; 100]);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
    // The rights it kept still serve: a READ through the same key.
    let mut read = wr(3, WR_RDMA_READ);
    read.sges = vec![(src.va(2048), 100, src.key)];
    (read.remote_addr, read.rkey) = (dst.va(0), key);
    a.post_send(1, &read);
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(3, WC_RDMA_READ, 0)]);
    assert_eq!(a.bytes(src.at(2048), 100), pattern(1, 100));
    // REMOTE_WRITE back: the same key writes again (the other QP pair).
    b.h.ok(&modify_mr(key, MODIFY_MR_ACCESS, 0, ALL_ACCESS));
    a.post_send(1, &write_wr(4, &src, 100, dst.va(200), key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(4, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(dst.gpa + 200, 100), pattern(1, 100));
    // A local SGE needs LOCAL_WRITE to be written by a READ response: the
    // requester's buffer loses it in place.
    a.h.ok(&modify_mr(src.key, MODIFY_MR_ACCESS, 0, 0));
    a.post_send(1, &read);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_READ, WC_LOC_PROT_ERR)]
    );
    assert_eq!(mr_pd_access(&a, src.key), (a.pdn, 0));
}

/// MODIFY_MR with PD: the MR belongs to the new PD (DEALLOC_PD of the old
/// one succeeds, of the new one is BUSY) and serves only its QPs; the key
/// stays.
#[test]
fn modify_mr_moves_an_mr_to_another_pd() {
    // The bookkeeping DEALLOC_PD relies on.
    let mut n = Node::new(36);
    let (p1, p2) = (n.h.alloc_pd(), n.h.alloc_pd());
    n.pdn = p1;
    let key = n.reg_mr(4096, ALL_ACCESS).key;
    assert_eq!(dealloc_pd(&mut n, p1), STATUS_BUSY);
    n.h.ok(&modify_mr(key, MODIFY_MR_PD, p2, 0));
    assert_eq!(mr_pd_access(&n, key), (p2, ALL_ACCESS));
    assert_eq!(dealloc_pd(&mut n, p2), STATUS_BUSY);
    assert_eq!(dealloc_pd(&mut n, p1), STATUS_SUCCESS);
    n.h.expect(&modify_mr(key, MODIFY_MR_PD, p1, 0), STATUS_BAD_HANDLE);
    let mut dereg = CmdDeregMr::zeroed();
    dereg.hdr.opcode = CMD_DEREG_MR;
    dereg.key = key;
    n.h.ok(&dereg);
    assert_eq!(dealloc_pd(&mut n, p2), STATUS_SUCCESS);

    // The data path: b's QP 0 is in b's PD, QP 1 in PD `moved`.
    let (mut a, mut b) = pair();
    let moved = b.h.alloc_pd();
    a.create_qp(QPT_RC);
    qp_in_pd(&mut b, moved);
    connect_pair(&mut a, 1, &mut b, 1, |_| {});
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(2, 4096));
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 64, dst.va(0), dst.key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(1, WC_RDMA_WRITE, 0)]);
    b.h.ok(&modify_mr(dst.key, MODIFY_MR_PD, moved, 0));
    assert_eq!(mr_pd_access(&b, dst.key), (moved, ALL_ACCESS));
    // Accepted for a QP of the new PD, with the same key.
    a.post_send(1, &write_wr(2, &src, 64, dst.va(64), dst.key));
    run(&a, &b);
    assert_eq!(statuses(&a.poll()), vec![(2, WC_RDMA_WRITE, 0)]);
    assert_eq!(b.bytes(dst.gpa + 64, 64), pattern(2, 64));
    // Refused for a QP of the old one.
    a.post_send(0, &write_wr(3, &src, 64, dst.va(128), dst.key));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(3, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(dst.gpa + 128, 64), vec![0; 64]);
    assert_eq!(b.h.dev.qp_state(b.qps[0].qpn), Some(QPS_ERR));
    // The old PD still has b's QP 0; without it, it could go.
    let mut destroy = CmdDestroyQp::zeroed();
    destroy.hdr.opcode = CMD_DESTROY_QP;
    destroy.qpn = b.qps[0].qpn;
    b.h.ok(&destroy);
    let bpdn = b.pdn;
    assert_eq!(dealloc_pd(&mut b, moved), STATUS_BUSY);
    assert_eq!(dealloc_pd(&mut b, bpdn), STATUS_SUCCESS);
    // A local SGE: the source MR moved away from a's QP's PD.
    let elsewhere = a.h.alloc_pd();
    a.h.ok(&modify_mr(src.key, MODIFY_MR_PD, elsewhere, 0));
    a.post_send(1, &write_wr(4, &src, 64, dst.va(0), dst.key));
    assert!(a.h.dev.take_tx().is_empty());
    assert_eq!(
        statuses(&a.poll()),
        vec![(4, WC_RDMA_WRITE, WC_LOC_PROT_ERR)]
    );
}

/// MODIFY_MR takes effect as an invalidation does: for the rest of a
/// WRITE under way, for a receive WQE a multi-packet SEND is filling, and
/// for the source of a retransmission.
#[test]
fn modify_mr_reaches_requests_under_way() {
    // The rest of a WRITE after REMOTE_WRITE was taken away.
    let (mut a, mut b) = pair();
    let src = a.reg_mr(8192, ACCESS_LOCAL_WRITE);
    a.fill(src.gpa, &pattern(3, 4000));
    let dst = b.reg_mr(8192, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 4000, dst.va(0), dst.key));
    let frames = a.h.dev.take_tx();
    assert_eq!(frames.len(), 4, "four 1024-byte packets");
    b.h.dev.receive_batch(frames[..1].iter().map(Vec::as_slice));
    b.h.ok(&modify_mr(dst.key, MODIFY_MR_ACCESS, 0, ACCESS_LOCAL_WRITE));
    b.h.dev.receive_batch(frames[1..].iter().map(Vec::as_slice));
    run(&a, &b);
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert_eq!(b.bytes(dst.gpa, 1024), pattern(3, 1024));
    assert_eq!(b.bytes(dst.gpa + 1024, 8), vec![0; 8]);

    // A SEND whose receive buffer moves to another PD between packets (or
    // loses LOCAL_WRITE): the translation the receive WQE cached is redone
    // and refused.
    for case in ["PD", "rights"] {
        let (mut a, mut b) = pair();
        let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
        a.fill(src.gpa, &pattern(4, 3000));
        let bm = b.reg_mr(4096, ACCESS_LOCAL_WRITE);
        b.post_recv(0, 60, &[(bm.va(0), 4096, bm.key)]);
        let mut send = wr(1, WR_SEND);
        send.sges = vec![(src.va(0), 3000, src.key)];
        a.post_send(0, &send);
        let frames = a.h.dev.take_tx();
        assert_eq!(frames.len(), 3, "{case}");
        b.h.dev.receive_batch(frames[..1].iter().map(Vec::as_slice));
        let modify = if case == "PD" {
            let other = b.h.alloc_pd();
            modify_mr(bm.key, MODIFY_MR_PD, other, 0)
        } else {
            modify_mr(bm.key, MODIFY_MR_ACCESS, 0, 0)
        };
        b.h.ok(&modify);
        b.h.dev.receive_batch(frames[1..].iter().map(Vec::as_slice));
        run(&a, &b);
        assert_eq!(
            statuses(&a.poll()),
            vec![(1, WC_SEND, WC_REM_OP_ERR)],
            "{case}"
        );
        assert_eq!(
            statuses(&b.poll()),
            vec![(60, WC_RECV, WC_LOC_PROT_ERR)],
            "{case}"
        );
        assert_eq!(b.bytes(bm.gpa + 1024, 8), vec![0; 8], "{case}");
    }

    // A WRITE whose first transmission was lost, its source moved to
    // another PD: the retransmission reads nothing, the WQE fails locally.
    let (mut a, mut b) = pair();
    let src = a.reg_mr(4096, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(4096, ALL_ACCESS);
    a.post_send(0, &write_wr(1, &src, 100, dst.va(0), dst.key));
    assert_eq!(a.h.dev.take_tx().len(), 1);
    let other = a.h.alloc_pd();
    a.h.ok(&modify_mr(src.key, MODIFY_MR_PD, other, 0));
    let t = a.h.dev.next_timer().unwrap();
    a.h.dev.tick(t);
    assert!(a.h.dev.take_tx().is_empty(), "no retransmission");
    assert_eq!(
        statuses(&a.poll()),
        vec![(1, WC_RDMA_WRITE, WC_LOC_PROT_ERR)]
    );
}
