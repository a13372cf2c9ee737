// SPDX-License-Identifier: GPL-2.0
//! The wire thread never waits for the paired virtio-net: a guest that
//! stops reading its netdev stream costs dropped (counted) netdev frames,
//! not a wire thread blocked for the netdev write timeout, which would
//! also starve the RDMA engine of its frames.

use std::io::Read;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroce_dev::port::Port;
use ferroce_dev::{Device, DeviceConfig, NullIrq, NullMemory};

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_guest_that_stops_reading_does_not_block_the_wire_thread() {
    let dev = Arc::new(Device::new(
        DeviceConfig::default(),
        Arc::new(NullMemory),
        Arc::new(NullIrq),
    ));
    let (wire, _peer) = UnixDatagram::pair().unwrap();
    wire.set_nonblocking(true).unwrap();
    let port = Port::new(dev, Arc::new(wire), None);
    port.spawn(None).unwrap();
    // QEMU's end of the stream netdev: connected, never read.
    let (qemu, dev_end) = UnixStream::pair().unwrap();
    let serving = port.clone();
    std::thread::spawn(move || serving.serve_netdev(dev_end));

    // 1500-byte frames for the guest (not for the port's MAC: netdev).
    let mut frame = vec![0u8; 1500];
    frame[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 0x42]);
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let burst: Vec<Vec<u8>> = (0..64).map(|_| frame.clone()).collect();
    wait_for("netdev attach", || {
        port.from_wire_batch(&burst[..1]);
        port.stats().to_netdev > 0
    });

    // Far more than the socket buffer and the queue hold.
    let mut slowest = Duration::ZERO;
    for _ in 0..200 {
        let start = Instant::now();
        port.from_wire_batch(&burst);
        slowest = slowest.max(start.elapsed());
    }
    let stats = port.stats();
    assert!(
        slowest < Duration::from_millis(100),
        "a wire burst waited {slowest:?} for the netdev"
    );
    assert!(
        stats.netdev_dropped > 0,
        "frames the guest did not take are dropped: {stats:?}"
    );
    assert_eq!(
        stats.to_netdev + stats.netdev_dropped,
        stats.wire_rx,
        "every frame is accounted for: {stats:?}"
    );

    // The writer gave up on the stuck connection (write timeout); once
    // QEMU reconnects, frames flow again: the writer is not stuck.
    drop(qemu);
    let (mut qemu, dev_end) = UnixStream::pair().unwrap();
    let serving = port.clone();
    std::thread::spawn(move || serving.serve_netdev(dev_end));
    qemu.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    let mut sink = vec![0u8; 1 << 16];
    wait_for("frames after reconnect", || {
        port.from_wire_batch(&burst[..1]);
        if let Ok(n) = qemu.read(&mut sink) {
            got.extend_from_slice(&sink[..n]);
        }
        got.len() >= 4 + frame.len()
    });
    assert_eq!(got[..4], (frame.len() as u32).to_be_bytes());
    assert_eq!(got[4..4 + frame.len()], frame[..]);
    port.stop();
}
