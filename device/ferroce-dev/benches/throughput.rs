// SPDX-License-Identifier: GPL-2.0
//! Data path throughput (a benchmark, not a test): two devices in one
//! process on one core, connected by an in-memory wire, with a plain
//! memcpy measured in the same run for scale.
//!
//! `cargo bench -p ferroce-dev --bench throughput`

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::time::{Duration, Instant};

use common::rdma::*;
use ferroce_dev::hw::*;

fn memcpy_gbps() -> f64 {
    let src = vec![0x5au8; 64 << 20];
    let mut dst = vec![0u8; 64 << 20];
    let t = Instant::now();
    let mut bytes = 0u64;
    while t.elapsed() < Duration::from_millis(500) {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        bytes += src.len() as u64;
    }
    bytes as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// Posts RDMA WRITEs of `size` bytes for about a second, `batch` per
/// doorbell, the last of each batch signaled; returns (messages/s, GB/s).
fn writes(size: u32, batch: usize) -> (f64, f64) {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    a.create_qp(QPT_RC);
    b.create_qp(QPT_RC);
    connect_pair(&mut a, 0, &mut b, 0, |attr| attr.path_mtu = MTU_4096);
    let src = a.reg_mr(1 << 20, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(1 << 20, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE);
    let mut wire = Wire::new(1, Impair::default());
    let mut msgs = 0u64;
    let t = Instant::now();
    let mut id = 0u64;
    while t.elapsed() < Duration::from_secs(1) {
        for i in 0..batch {
            let off = (id * u64::from(size)) % ((1 << 20) - u64::from(size));
            let w = SendWr {
                wr_id: id,
                opcode: WR_RDMA_WRITE,
                flags: if i + 1 == batch { WQE_SIGNALED } else { 0 },
                remote_addr: dst.va(off),
                rkey: dst.key,
                sges: vec![(src.va(off), size, src.key)],
                ..SendWr::default()
            };
            a.write_send_wqe(0, &w);
            id += 1;
        }
        a.ring_sq(0);
        wire.run(&a, &b, 1_000_000);
        let c = a.poll();
        assert!(c.iter().all(|c| c.status == WC_SUCCESS));
        msgs += batch as u64;
    }
    let s = t.elapsed().as_secs_f64();
    (msgs as f64 / s, msgs as f64 * f64::from(size) / s / 1e9)
}

fn main() {
    // `cargo bench ... -- NAME` runs only the parts whose name contains
    // NAME (memcpy, small, large), for a profiler; cargo's own flags such
    // as --bench are not names.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    if run("memcpy") {
        println!(
            "memcpy (64 MiB buffers):            {:8.2} GB/s",
            memcpy_gbps()
        );
    }
    if run("small") {
        let (small, _) = writes(64, 32);
        println!("RDMA WRITE 64 B, 32 per doorbell:   {small:8.0} messages/s");
    }
    if run("large") {
        let (_, big) = writes(64 << 10, 8);
        println!("RDMA WRITE 64 KiB, MTU 4096:        {big:8.2} GB/s");
    }
}
