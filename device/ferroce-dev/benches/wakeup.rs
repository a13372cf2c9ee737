// SPDX-License-Identifier: GPL-2.0
//! What the host charges for the steps of a round trip that the device
//! process cannot avoid (a benchmark of the machine, not of the device):
//! `make bench` records it beside the latencies it measures.
//!
//! `cargo bench -p ferroce-dev --bench wakeup`
//!
//! Prints one line of JSON:
//!
//! - `wakeup_rtt_us`: a thread wakes another that sleeps in `poll(2)` on a
//!   socket, which answers the same way; microseconds per round trip, the
//!   median of five runs of 20,000 (`wakeup_rtt_runs`). Each hop of a
//!   frame or a doorbell between processes costs the device one such
//!   wake-up: the doorbell thread's on QEMU's message, the wire thread's
//!   on a frame from the peer.
//! - `syscall_us`: one `getppid(2)`, the cheapest system call;
//!   microseconds, over a million calls.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::time::Instant;

const ROUND_TRIPS: u32 = 20_000;
const RUNS: usize = 5;

/// Sleeps in `poll(2)` until `s` is readable, then takes one datagram.
fn wait_recv(s: &UnixDatagram) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call and the
    // count passed is 1.
    if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut b = [0u8; 8];
    s.recv(&mut b).map(|_| ())
}

/// Microseconds per wake-up round trip between two threads.
fn wakeup_rtt() -> io::Result<f64> {
    let (a, b) = UnixDatagram::pair()?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        for _ in 0..ROUND_TRIPS {
            wait_recv(&b)?;
            b.send(&[1])?;
        }
        Ok(())
    });
    let t = Instant::now();
    for _ in 0..ROUND_TRIPS {
        a.send(&[1])?;
        wait_recv(&a)?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS);
    echo.join()
        .map_err(|_| io::Error::other("echo thread panicked"))??;
    Ok(us)
}

/// Microseconds per `getppid(2)`.
fn syscall_cost() -> f64 {
    const N: u32 = 1_000_000;
    let t = Instant::now();
    for _ in 0..N {
        // SAFETY: getppid takes no arguments and cannot fail.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(N)
}

fn main() -> io::Result<()> {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push(wakeup_rtt()?);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    let json = serde_json::json!({
        "wakeup_rtt_us": (sorted[RUNS / 2] * 100.0).round() / 100.0,
        "wakeup_rtt_runs": runs.iter().map(|v| (v * 100.0).round() / 100.0).collect::<Vec<_>>(),
        "syscall_us": (syscall_cost() * 1000.0).round() / 1000.0,
    });
    println!("{json}");
    Ok(())
}
