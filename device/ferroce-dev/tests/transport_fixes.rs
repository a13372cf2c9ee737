// SPDX-License-Identifier: GPL-2.0
//! Regression tests of transport defects: each fails without its fix.

mod common;

use common::rdma::*;
use ferroce_dev::hw::*;
use ferroce_dev::GuestMemory;

const ALL_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// An MR over `count` 4 KiB pages of node `n` placed in reverse order (no
/// two neighbours adjacent: `count` segments), through a 2-level page
/// list. Returns the MR and the guest address of each page.
fn reversed_mr(n: &mut Node, count: u32, access: u32) -> (MrInfo, Vec<u64>) {
    let h = &mut n.h;
    let data = h.alloc(u64::from(count) * 4096, 4096);
    let pages: Vec<u64> = (0..count)
        .map(|i| data + u64::from(count - 1 - i) * 4096)
        .collect();
    let n1 = count.div_ceil(PBL_L1_ENTRIES);
    let top = h.alloc(u64::from(n1) * 8, 8);
    for j in 0..n1 {
        let list = h.alloc(4096, 4096);
        h.mem
            .write(top + u64::from(j) * 8, &list.to_le_bytes())
            .unwrap();
        for k in 0..PBL_L1_ENTRIES {
            if let Some(page) = pages.get((j * PBL_L1_ENTRIES + k) as usize) {
                h.mem
                    .write(list + u64::from(k) * 8, &page.to_le_bytes())
                    .unwrap();
            }
        }
    }
    let mut c = CmdRegMr::zeroed();
    c.hdr.opcode = CMD_REG_MR;
    c.pbl.addr = top;
    c.pbl.page_count = count;
    c.pbl.page_shift = 12;
    c.pbl.level = PBL_LEVEL_2;
    c.iova = 0x5000_0000;
    c.length = u64::from(count) * 4096;
    c.pdn = n.pdn;
    c.access = access;
    c.key_variant = 0x22;
    let key = h.ok(&c);
    let mr = MrInfo {
        key,
        iova: c.iova,
        gpa: data,
        len: c.length,
    };
    (mr, pages)
}

/// Writes `data` into the MR's pages in MR order.
fn fill_pages(n: &Node, pages: &[u64], data: &[u8]) {
    for (page, chunk) in pages.iter().zip(data.chunks(4096)) {
        n.fill(*page, chunk);
    }
}

/// Reads `len` bytes of the MR's pages in MR order.
fn read_pages(n: &Node, pages: &[u64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for page in pages {
        let take = (len - out.len()).min(4096);
        out.extend(n.bytes(*page, take));
    }
    out
}

fn sg_steps(n: &Node) -> u64 {
    n.h.dev.counters().data.sg_steps
}

/// Gather and scatter keep a cursor per message: a message over an MR of
/// 2048 discontiguous pages at path MTU 256 (16384 packets) visits each
/// segment about once on each side, not once per packet (which would be
/// ~16384 x 1024 visits). RDMA WRITE (requester gather, responder
/// per-packet translation) and RDMA READ (responder gather, requester
/// scatter), both byte-exact.
#[test]
fn gather_scatter_is_linear_in_segments() {
    const PAGES: u32 = 2048;
    let len = PAGES as usize * 4096;
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |attr| attr.path_mtu = MTU_256);
    let (src, src_pages) = reversed_mr(&mut a, PAGES, ALL_ACCESS);
    let (dst, dst_pages) = reversed_mr(&mut b, PAGES, ALL_ACCESS);
    let data = pattern(7, len);
    fill_pages(&a, &src_pages, &data);

    let packets = (len / 256) as u64;
    // Each packet may start in a segment the previous one ended in.
    let bound = 2 * (u64::from(PAGES) + packets);

    let write = SendWr {
        wr_id: 1,
        opcode: WR_RDMA_WRITE,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), len as u32, src.key)],
        ..SendWr::default()
    };
    a.post_send(0, &write);
    Wire::new(1, Impair::default()).run(&a, &b, 100_000);
    let cqes = a.poll();
    assert_eq!(cqes.len(), 1);
    assert_eq!(cqes[0].status, WC_SUCCESS);
    assert!(
        read_pages(&b, &dst_pages, len) == data,
        "WRITE not byte-exact"
    );
    let (a_steps, b_steps) = (sg_steps(&a), sg_steps(&b));
    assert!(a_steps <= bound, "WRITE gather: {a_steps} steps > {bound}");
    assert!(b_steps <= bound, "WRITE scatter: {b_steps} steps > {bound}");

    // READ it back into the (cleared) source.
    fill_pages(&a, &src_pages, &vec![0; len]);
    let read = SendWr {
        wr_id: 2,
        opcode: WR_RDMA_READ,
        flags: WQE_SIGNALED,
        remote_addr: dst.va(0),
        rkey: dst.key,
        sges: vec![(src.va(0), len as u32, src.key)],
        ..SendWr::default()
    };
    a.post_send(0, &read);
    Wire::new(2, Impair::default()).run(&a, &b, 100_000);
    let cqes = a.poll();
    assert_eq!(cqes.len(), 1);
    assert_eq!(cqes[0].status, WC_SUCCESS);
    assert!(
        read_pages(&a, &src_pages, len) == data,
        "READ not byte-exact"
    );
    let a_steps = sg_steps(&a) - a_steps;
    let b_steps = sg_steps(&b) - b_steps;
    assert!(a_steps <= bound, "READ scatter: {a_steps} steps > {bound}");
    assert!(b_steps <= bound, "READ gather: {b_steps} steps > {bound}");
}
