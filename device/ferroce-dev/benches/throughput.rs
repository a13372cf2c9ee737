// SPDX-License-Identifier: GPL-2.0
//! Data path throughput (a benchmark, not a test): two devices in one
//! process on one core, connected by an in-memory wire, with a plain
//! memcpy measured in the same run for scale.
//!
//! `cargo bench -p ferroce-dev --bench throughput [-- memcpy|small|qps|large|read]`
//!
//! What a message costs here, all on one thread: the requester's doorbell
//! (a BAR write), fetching and decoding the WQE by DMA, translating its
//! SGEs, encoding the frame with the payload gathered into it by DMA and
//! its ICRC; the in-memory wire (each frame a `Vec`, handed over in
//! batches as they are: it impairs none, and no capture is asked for); the
//! responder decoding and checking the frame and its ICRC, translating the
//! R_Key, placing the payload by DMA and coalescing ACKs; the requester
//! taking the ACK and writing the CQE. The fake guest's side is counted
//! too, and reported as a share: writing the WQEs into guest memory and
//! polling the CQ. A READ takes the same steps the other way round: the
//! request goes out, the responder gathers the payload straight into its
//! response frames, and the requester checks them, places the payload and
//! writes the CQE.
//!
//! What it leaves out: the doorbell's way to the device (a guest store,
//! QEMU's vfio-user message and the socket wake-up), the frame's way
//! between devices (the tap's `write()`/`read()` and the host bridge),
//! interrupts (recorded, not delivered), and the vfio-user DMA table:
//! guest memory here is `FakeMemory` (a mutex and a B-tree lookup per
//! access), where the device process has `vfio_user::Dma` (a read lock,
//! a B-tree lookup and a reference count per access).

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

/// Posts RDMA WRITEs (`opcode` [`WR_RDMA_WRITE`]) or READs
/// ([`WR_RDMA_READ`]) of `size` bytes for about a second over `qps` RC QP
/// pairs, `batch` per doorbell on each QP, the last of each batch
/// signaled.
fn transfers(opcode: u8, size: u32, batch: usize, qps: usize) -> Rate {
    let mut a = Node::new(36);
    let mut b = Node::new(37);
    for q in 0..qps {
        a.create_qp(QPT_RC);
        b.create_qp(QPT_RC);
        connect_pair(&mut a, q, &mut b, q, |attr| {
            attr.path_mtu = MTU_4096;
            attr.max_rd_atomic = MAX_RD_ATOMIC;
            attr.max_dest_rd_atomic = MAX_RD_ATOMIC;
        });
    }
    let src = a.reg_mr(1 << 20, ACCESS_LOCAL_WRITE);
    let dst = b.reg_mr(
        1 << 20,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
    );
    let mut wire = Wire::new(1, Impair::default());
    let mut msgs = 0u64;
    let t = Instant::now();
    let mut id = 0u64;
    let mut guest = Duration::ZERO;
    while t.elapsed() < Duration::from_secs(1) {
        let g = Instant::now();
        for q in 0..qps {
            for i in 0..batch {
                let off = (id * u64::from(size)) % ((1 << 20) - u64::from(size));
                let w = SendWr {
                    wr_id: id,
                    opcode,
                    flags: if i + 1 == batch { WQE_SIGNALED } else { 0 },
                    remote_addr: dst.va(off),
                    rkey: dst.key,
                    sges: vec![(src.va(off), size, src.key)],
                    ..SendWr::default()
                };
                a.write_send_wqe(q, &w);
                id += 1;
            }
        }
        guest += g.elapsed();
        for q in 0..qps {
            a.ring_sq(q);
        }
        wire.run(&a, &b, 1_000_000);
        let g = Instant::now();
        let c = a.poll();
        guest += g.elapsed();
        assert_eq!(c.len(), qps);
        assert!(c.iter().all(|c| c.status == WC_SUCCESS));
        msgs += (batch * qps) as u64;
    }
    let s = t.elapsed().as_secs_f64();
    Rate {
        msgs: msgs as f64 / s,
        gbps: msgs as f64 * f64::from(size) / s / 1e9,
        guest_share: guest.as_secs_f64() / s,
    }
}

/// One run of [`transfers`].
struct Rate {
    /// Messages per second.
    msgs: f64,
    /// Payload bytes per second, in GB/s.
    gbps: f64,
    /// Share of the time the fake guest took (posting, polling).
    guest_share: f64,
}

fn main() {
    // `cargo bench ... -- NAME` runs only the parts whose name contains
    // NAME (memcpy, small, qps, large, read), for a profiler; cargo's own flags
    // such as --bench are not names.
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
        let r = transfers(WR_RDMA_WRITE, 64, 32, 1);
        println!(
            "RDMA WRITE 64 B, 32 per doorbell:   {:8.0} messages/s (fake guest {:.0} %)",
            r.msgs,
            r.guest_share * 100.0
        );
        println!(
            "  the same, the devices' time only: {:8.0} messages/s",
            r.msgs / (1.0 - r.guest_share)
        );
    }
    if run("qps") {
        // The same 64 B WRITEs spread over more QPs: 32 per doorbell on
        // each, all rung before the wire runs.
        for qps in [1, 4, 16, 64] {
            let r = transfers(WR_RDMA_WRITE, 64, 32, qps);
            println!(
                "  over {qps:2} QP{}:{:>18}{:8.0} messages/s (fake guest {:.0} %)",
                if qps == 1 { " " } else { "s" },
                "",
                r.msgs,
                r.guest_share * 100.0
            );
        }
    }
    for (name, opcode, what) in [
        ("large", WR_RDMA_WRITE, "RDMA WRITE 64 KiB, MTU 4096:"),
        ("read", WR_RDMA_READ, "RDMA READ 64 KiB, MTU 4096:"),
    ] {
        if run(name) {
            let r = transfers(opcode, 64 << 10, 8, 1);
            println!(
                "{what:<36}{:8.2} GB/s (fake guest {:.0} %)",
                r.gbps,
                r.guest_share * 100.0
            );
        }
    }
}
