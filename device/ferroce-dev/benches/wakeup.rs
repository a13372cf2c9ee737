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
//!   on a frame from the peer. The two threads run where the scheduler
//!   puts them: on a machine that is otherwise idle, on two CPUs.
//! - `wakeup_rtt_one_cpu_us`, `wakeup_rtt_one_cpu_runs`: the same with
//!   both threads pinned to one CPU (the first this process may use), as
//!   `make bench` places the two devices' threads; `null` where the
//!   affinity cannot be set.
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

/// The first CPU the calling thread may run on.
fn first_allowed_cpu() -> io::Result<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed, written by the
    // call; pid 0 is the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } < 0 {
        return Err(io::Error::last_os_error());
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, inside `set`.
        .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .ok_or_else(|| io::Error::other("no CPU allowed"))
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and `cpu` is below CPU_SETSIZE,
    // inside it.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Microseconds per wake-up round trip between two threads, both on `cpu`
/// if given.
fn wakeup_rtt(cpu: Option<usize>) -> io::Result<f64> {
    let (a, b) = UnixDatagram::pair()?;
    if let Some(cpu) = cpu {
        pin_to(cpu)?;
    }
    let echo = std::thread::spawn(move || -> io::Result<()> {
        if let Some(cpu) = cpu {
            pin_to(cpu)?;
        }
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

/// `RUNS` round-trip measurements (rounded to 0.01 us) and their median.
fn measure(cpu: Option<usize>) -> io::Result<(f64, Vec<f64>)> {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push((wakeup_rtt(cpu)? * 100.0).round() / 100.0);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    Ok((sorted[RUNS / 2], runs))
}

fn main() -> io::Result<()> {
    // Unpinned first: the main thread is pinned by the second measurement.
    let (rtt, runs) = measure(None)?;
    let one_cpu = first_allowed_cpu().and_then(|cpu| measure(Some(cpu)));
    if let Err(e) = &one_cpu {
        eprintln!("wakeup: no measurement on one CPU: {e}");
    }
    let (one_rtt, one_runs) = match one_cpu {
        Ok((m, r)) => (Some(m), Some(r)),
        Err(_) => (None, None),
    };
    let json = serde_json::json!({
        "wakeup_rtt_us": rtt,
        "wakeup_rtt_runs": runs,
        "wakeup_rtt_one_cpu_us": one_rtt,
        "wakeup_rtt_one_cpu_runs": one_runs,
        "syscall_us": (syscall_cost() * 1000.0).round() / 1000.0,
    });
    println!("{json}");
    Ok(())
}
