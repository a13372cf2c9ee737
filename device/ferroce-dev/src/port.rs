// SPDX-License-Identifier: GPL-2.0
//! The device's Ethernet port, shared with the guest's paired virtio-net.
//!
//! The port has two sides: the **wire** (a tap interface, or anything that
//! moves whole frames: [`FrameLink`]) and the **netdev** (QEMU's
//! `-netdev stream` connected to a unix socket the device listens on; the
//! stream carries each frame as a 4-byte big-endian length followed by the
//! frame, as QEMU's `net/stream_data.c` writes and `net_fill_rstate` in
//! `net/net.c` reads them, without a vnet header).
//!
//! Steering ([`steer`]): a frame from the wire that is RoCE (UDP port 4791
//! or Ethertype 0x8915, untagged or in one 802.1Q tag) and addressed to a
//! MAC the port answers to, or (1.7, `CAP_MCAST`) to any multicast MAC,
//! broadcast included, goes to the RDMA engine; every other frame goes to
//! the netdev. Frames from the netdev and from the engine go out on the
//! wire. The engine's frames for its own MAC never leave the device
//! (loopback inside the engine); its frames for a multicast MAC go out and
//! are also looped back (the port's QPs attached to the group receive
//! them).
//!
//! Threads: one reads the wire, one serves the netdev socket, one writes
//! to the netdev socket, one drives the engine's clock (timers, and
//! looped-back frames a bounded entry point left over). The engine's
//! frames go out on the thread that queued them: the vfio-user thread for
//! a doorbell, the wire thread for the ACKs and responses of a received
//! batch, the engine thread for retransmissions ([`Device::set_tx_sender`]),
//! so no thread wakeup lies between a doorbell and its first frame. The
//! wire thread never waits for the netdev: it
//! queues frames for the netdev writer (at most [`NETDEV_QUEUE`]) and drops
//! them, counted, when the guest does not keep up.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::device::Device;
use crate::wire::{self, pcap::PcapWriter};

/// Largest frame the port moves (jumbo MTU 9000 + headers, with margin).
pub const MAX_FRAME: usize = 16384;
/// Largest read from the wire: a UDP GSO super-frame (at most 64 KiB of
/// IP packet) with its Ethernet header and VLAN tags.
pub const MAX_READ: usize = 65536 + 64;
/// Most frames read from the wire in one burst.
pub const BURST: usize = 64;
/// Longest wait (ms) for a frame before the wire thread looks whether it
/// should stop.
const WIRE_WAIT_MS: i32 = 100;
/// Most frames waiting for the netdev writer; beyond, frames for the
/// netdev are dropped (counted in `netdev_dropped`).
pub const NETDEV_QUEUE: usize = 256;
/// How long the netdev writer waits for a guest that stopped reading before
/// it drops the connection (QEMU reconnects with `reconnect-ms`).
pub const NETDEV_WRITE_TIMEOUT: Duration = Duration::from_millis(500);

/// Where a frame from the wire goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// The RDMA engine.
    Engine,
    /// The paired virtio-net.
    Netdev,
}

/// Steering decision for a frame received from the wire by a port that
/// answers to the MACs `answers` accepts (device.rst "Port MAC"): RoCE
/// frames to those MACs and (1.7, device.rst "Multicast") to every
/// multicast MAC go to the engine, never to the netdev.
pub fn steer(frame: &[u8], answers: impl Fn(&[u8; 6]) -> bool) -> Steer {
    let dmac = frame.get(0..6).and_then(|m| <&[u8; 6]>::try_from(m).ok());
    let engine_mac = dmac.is_some_and(|m| wire::is_multicast_mac(m) || answers(m));
    if engine_mac && wire::is_roce(frame) {
        Steer::Engine
    } else {
        Steer::Netdev
    }
}

/// A link that moves whole Ethernet frames.
pub trait FrameLink: Send + Sync {
    /// Receives what one read of the link brings, using `buf` (at least
    /// [`MAX_READ`] bytes): one frame, or the frames a tap with receive
    /// offloads cuts a super-frame into ([`wire::gso::cut`]). Each frame
    /// goes to `frame` as two parts to join (a frame read whole is all in
    /// the first); returns how many. With `wait` it may wait a while for
    /// one; without, or when none came, it fails with `WouldBlock` or
    /// `TimedOut`. `InvalidData`: what was read was not a frame and is
    /// dropped.
    fn recv(
        &self,
        buf: &mut [u8],
        wait: bool,
        frame: &mut dyn FnMut(&[u8], &[u8]),
    ) -> io::Result<usize>;
    /// Waits up to `ms` milliseconds for a frame, after [`Self::recv`]
    /// found none: whether one may be queued now. The default does not
    /// wait (its [`Self::recv`] does).
    fn wait(&self, _ms: i32) -> bool {
        true
    }
    /// Sends one frame.
    fn send(&self, frame: &[u8]) -> io::Result<()>;
    /// Sends `frames` in order. The default sends them one by one.
    fn send_all(&self, frames: &[Vec<u8>]) -> Sent {
        let mut r = Sent::default();
        for f in frames {
            r.count(self.send(f).is_ok(), 1);
        }
        r
    }
}

/// What [`FrameLink::send_all`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Frames sent.
    pub frames: u64,
    /// Frames whose write failed.
    pub failed: u64,
    /// Writes that succeeded (fewer than `frames` where several frames
    /// went in one).
    pub writes: u64,
}

impl Sent {
    fn count(&mut self, ok: bool, frames: usize) {
        if ok {
            self.frames += frames as u64;
            self.writes += 1;
        } else {
            self.failed += frames as u64;
        }
    }
}

impl FrameLink for UnixDatagram {
    fn recv(
        &self,
        buf: &mut [u8],
        wait: bool,
        frame: &mut dyn FnMut(&[u8], &[u8]),
    ) -> io::Result<usize> {
        // Only non-blocking sockets can be drained without waiting.
        if !wait && self.read_timeout()?.is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = UnixDatagram::recv(self, buf)?;
        frame(&buf[..n.min(buf.len())], &[]);
        Ok(1)
    }
    fn send(&self, frame: &[u8]) -> io::Result<()> {
        UnixDatagram::send(self, frame).map(|_| ())
    }
}

/// A tap interface (`IFF_TAP | IFF_NO_PI`): one read or write per frame,
/// or, with a `virtio_net_hdr` before each frame (`IFF_VNET_HDR`), UDP GSO
/// either way ([`wire::gso`]): runs of RoCE v2 data packets written as one
/// super-frame that the kernel cuts back into them, and super-frames read
/// whole and cut here.
pub struct Tap {
    file: std::fs::File,
    /// Opened with `IFF_VNET_HDR`: each read and write starts with a
    /// `virtio_net_hdr`.
    vnet_hdr: bool,
    /// Runs go out as super-frames. Cleared for good when the kernel
    /// refuses one as invalid: taps take `GSO_UDP_L4` since Linux 6.2.
    runs: AtomicBool,
    /// The tap hands over UDP GSO super-frames and frames without their
    /// checksum (`TUNSETOFFLOAD`), which [`wire::gso::cut`] completes.
    rx_offload: bool,
}

impl Tap {
    /// Opens (creating if needed) tap interface `name`, with UDP GSO for
    /// the engine's frames if `tx_gso` and for the frames read if
    /// `rx_gso`.
    pub fn open(name: &str, tx_gso: bool, rx_gso: bool) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")?;
        let vnet_hdr = tx_gso || rx_gso;
        tap_ioctl::set_iff(&file, name, vnet_hdr)?;
        tap_ioctl::set_nonblocking(&file)?;
        let rx_offload = rx_gso
            && match tap_ioctl::set_offload(&file, tap_ioctl::RX_GSO) {
                Ok(()) => true,
                Err(e) => {
                    log::warn!(
                        "tap {name}: no UDP GSO on receive ({e}); reading every frame alone"
                    );
                    false
                }
            };
        Ok(Self {
            file,
            vnet_hdr,
            runs: AtomicBool::new(tx_gso),
            rx_offload,
        })
    }

    /// Reads what the tap holds into `buf`, handing its frames to `frame`:
    /// how many.
    fn read_frames(
        &self,
        buf: &mut [u8],
        frame: &mut dyn FnMut(&[u8], &[u8]),
    ) -> io::Result<usize> {
        if !self.vnet_hdr {
            let n = (&self.file).read(buf)?;
            frame(&buf[..n.min(buf.len())], &[]);
            return Ok(1);
        }
        let mut hdr = [0u8; wire::gso::VNET_HDR_LEN];
        let mut iov = [io::IoSliceMut::new(&mut hdr), io::IoSliceMut::new(buf)];
        let n = (&self.file).read_vectored(&mut iov)?;
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("tap: {what}"));
        let n = n
            .checked_sub(wire::gso::VNET_HDR_LEN)
            .ok_or_else(|| bad("short read"))?;
        // The tap reports the length of a frame that did not fit.
        let read = buf
            .get_mut(..n)
            .ok_or_else(|| bad("frame longer than the read"))?;
        if !self.rx_offload {
            // Without offloads the tap hands over whole frames with their
            // checksums, and the header says nothing that matters here.
            frame(read, &[]);
            return Ok(1);
        }
        wire::gso::cut(&hdr, read, frame).map_err(|e| bad(&e.to_string()))
    }

    /// Writes `parts` (at most [`wire::gso::MAX_SEGS`] + 1) as one frame,
    /// after `hdr` or an empty `virtio_net_hdr` when the tap takes one:
    /// one `write` is one frame or super-frame.
    fn write_parts<'a>(
        &self,
        hdr: Option<&[u8]>,
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> io::Result<()> {
        const EMPTY: [u8; wire::gso::VNET_HDR_LEN] = [0; wire::gso::VNET_HDR_LEN];
        let mut iov = [io::IoSlice::new(&[]); wire::gso::MAX_SEGS + 2];
        let mut n = 0;
        if self.vnet_hdr {
            iov[0] = io::IoSlice::new(hdr.unwrap_or(&EMPTY));
            n = 1;
        }
        for p in parts {
            let Some(slot) = iov.get_mut(n) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "too many parts",
                ));
            };
            *slot = io::IoSlice::new(p);
            n += 1;
        }
        let iov = &iov[..n];
        let want: usize = iov.iter().map(|v| v.len()).sum();
        if (&self.file).write_vectored(iov)? != want {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short tap write"));
        }
        Ok(())
    }
}

impl FrameLink for Tap {
    fn recv(
        &self,
        buf: &mut [u8],
        wait: bool,
        frame: &mut dyn FnMut(&[u8], &[u8]),
    ) -> io::Result<usize> {
        match self.read_frames(buf, frame) {
            Err(e) if wait && e.kind() == io::ErrorKind::WouldBlock => {
                tap_ioctl::poll_in(&self.file, WIRE_WAIT_MS)?;
                Err(io::ErrorKind::TimedOut.into())
            }
            r => r,
        }
    }
    fn wait(&self, ms: i32) -> bool {
        tap_ioctl::poll_in(&self.file, ms).unwrap_or(true)
    }
    fn send(&self, frame: &[u8]) -> io::Result<()> {
        if !self.vnet_hdr {
            return (&self.file).write(frame).map(|_| ());
        }
        self.write_parts(None, [frame])
    }
    fn send_all(&self, frames: &[Vec<u8>]) -> Sent {
        let mut r = Sent::default();
        let mut rest = frames;
        while let Some((first, after)) = rest.split_first() {
            let next = if self.runs.load(Ordering::Relaxed) {
                wire::gso::next_run(rest)
            } else {
                None
            };
            let Some((n, hdrs)) = next else {
                r.count(self.send(first).is_ok(), 1);
                rest = after;
                continue;
            };
            let (run, tail) = rest.split_at(n);
            rest = tail;
            let (vnet, eth) = hdrs.split_at(wire::gso::VNET_HDR_LEN);
            let payloads = run
                .iter()
                .map(|f| f.get(wire::gso::HDRS_LEN..).unwrap_or_default());
            let parts = std::iter::once(eth).chain(payloads);
            match self.write_parts(Some(vnet), parts) {
                Ok(()) => r.count(true, run.len()),
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EINVAL)
                        && self.runs.swap(false, Ordering::Relaxed)
                    {
                        log::warn!(
                            "tap: UDP GSO super-frame refused ({e}); \
                             writing every frame on its own from now on"
                        );
                    }
                    // The kernel still gets the frames, one by one.
                    for f in run {
                        r.count(self.send(f).is_ok(), 1);
                    }
                }
            }
        }
        r
    }
}

#[allow(unsafe_code)]
mod tap_ioctl {
    use std::io;
    use std::os::fd::AsRawFd;

    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
    const TUN_F_CSUM: libc::c_ulong = 0x01;
    const TUN_F_USO4: libc::c_ulong = 0x20;
    const TUN_F_USO6: libc::c_ulong = 0x40;
    /// Offloads for UDP GSO on receive: the kernel takes USO only with
    /// both address families and checksum offload.
    pub const RX_GSO: libc::c_ulong = TUN_F_CSUM | TUN_F_USO4 | TUN_F_USO6;
    const IFF_TAP: libc::c_short = 0x0002;
    const IFF_NO_PI: libc::c_short = 0x1000;
    const IFF_VNET_HDR: libc::c_short = 0x4000;

    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }

    /// Attaches `file` (/dev/net/tun) to tap interface `name`, with a
    /// `virtio_net_hdr` before each frame if `vnet_hdr`.
    pub fn set_iff(file: &std::fs::File, name: &str, vnet_hdr: bool) -> io::Result<()> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= 16 || bytes.contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad tap name"));
        }
        let mut req = IfReq {
            name: [0; 16],
            flags: IFF_TAP | IFF_NO_PI | if vnet_hdr { IFF_VNET_HDR } else { 0 },
            pad: [0; 22],
        };
        req.name[..bytes.len()].copy_from_slice(bytes);
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq` (40 bytes:
        // 16-byte name, flags, union padding), which `IfReq` lays out with
        // repr(C); the pointer is valid for the call and `file` is an open
        // /dev/net/tun descriptor owned by the caller.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sets the offloads (`TUN_F_*`) the reader of `file`, an attached
    /// tap, takes.
    pub fn set_offload(file: &std::fs::File, flags: libc::c_ulong) -> io::Result<()> {
        // SAFETY: TUNSETOFFLOAD takes its argument by value, no pointer;
        // `file` is an open /dev/net/tun descriptor owned by the caller.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD as _, flags) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Puts `file` in non-blocking mode.
    pub fn set_nonblocking(file: &std::fs::File) -> io::Result<()> {
        let fd = file.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on a descriptor the caller owns; no
        // pointers are passed.
        let r = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 {
                fl
            } else {
                libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
            }
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `ms` milliseconds for `file` to become readable:
    /// whether it did (or was interrupted, when it may have).
    pub fn poll_in(file: &std::fs::File, ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd for the duration of the call and
        // the count passed is 1.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            return Ok(true);
        }
        Ok(r > 0)
    }
}

/// Counters of the port.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received from the wire.
    pub wire_rx: AtomicU64,
    /// Frames sent on the wire.
    pub wire_tx: AtomicU64,
    /// Wire frames handed to the engine.
    pub to_engine: AtomicU64,
    /// Wire frames handed to the netdev.
    pub to_netdev: AtomicU64,
    /// Wire frames for the netdev dropped (not connected, queue full,
    /// write failed).
    pub netdev_dropped: AtomicU64,
    /// Frames received from the netdev.
    pub from_netdev: AtomicU64,
    /// Wire send failures.
    pub wire_errors: AtomicU64,
    /// Writes of the engine's frames to the wire: fewer than the frames
    /// when runs went as UDP GSO super-frames.
    pub wire_tx_writes: AtomicU64,
    /// Reads from the wire that brought frames: fewer than `wire_rx` when
    /// UDP GSO super-frames came in whole.
    pub wire_rx_reads: AtomicU64,
    /// Reads from the wire that were dropped: a super-frame the port
    /// could not cut into frames, or a frame that did not fit.
    pub wire_rx_bad: AtomicU64,
}

/// A snapshot of [`PortCounters`].
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received from the wire.
    pub wire_rx: u64,
    /// Frames sent on the wire.
    pub wire_tx: u64,
    /// Wire frames handed to the engine.
    pub to_engine: u64,
    /// Wire frames handed to the netdev.
    pub to_netdev: u64,
    /// Wire frames for the netdev dropped (not connected, queue full,
    /// write failed).
    pub netdev_dropped: u64,
    /// Frames received from the netdev.
    pub from_netdev: u64,
    /// Wire send failures.
    pub wire_errors: u64,
    /// Writes of the engine's frames to the wire: fewer than the frames
    /// when runs went as UDP GSO super-frames.
    pub wire_tx_writes: u64,
    /// Reads from the wire that brought frames: fewer than `wire_rx` when
    /// UDP GSO super-frames came in whole.
    pub wire_rx_reads: u64,
    /// Reads from the wire that were dropped: a super-frame the port
    /// could not cut into frames, or a frame that did not fit.
    pub wire_rx_bad: u64,
}

/// The port of one device.
pub struct Port {
    dev: Arc<Device>,
    wire: Arc<dyn FrameLink>,
    /// The attached netdev connection and its serial number, so that a
    /// reader that lost its connection detaches only its own.
    netdev: Mutex<Option<(u64, UnixStream)>>,
    netdev_serial: AtomicU64,
    /// Whether a netdev connection is attached (read without the writer's
    /// lock, which a slow write holds).
    netdev_connected: AtomicBool,
    netdev_queue: SyncSender<Vec<u8>>,
    netdev_queue_rx: Mutex<Option<Receiver<Vec<u8>>>>,
    pcap: Option<Mutex<PcapWriter<std::fs::File>>>,
    /// Held from taking the engine's frames until they are on the wire, so
    /// that the threads sending them never reorder them.
    tx: Mutex<()>,
    start: Instant,
    stop: AtomicBool,
    wake_tx: SyncSender<()>,
    wake_rx: Mutex<Option<Receiver<()>>>,
    /// Counters.
    pub counters: PortCounters,
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

impl Port {
    /// A port for `dev` on `wire`, optionally recording the wire to `pcap`.
    pub fn new(
        dev: Arc<Device>,
        wire: Arc<dyn FrameLink>,
        pcap: Option<PcapWriter<std::fs::File>>,
    ) -> Arc<Self> {
        let pcap = pcap.map(Mutex::new);
        let (wake_tx, wake_rx) = sync_channel(1);
        let (netdev_queue, netdev_queue_rx) = sync_channel(NETDEV_QUEUE);
        let port = Arc::new(Self {
            dev,
            wire,
            netdev: Mutex::new(None),
            netdev_serial: AtomicU64::new(0),
            netdev_connected: AtomicBool::new(false),
            netdev_queue,
            netdev_queue_rx: Mutex::new(Some(netdev_queue_rx)),
            pcap,
            tx: Mutex::new(()),
            start: Instant::now(),
            stop: AtomicBool::new(false),
            wake_tx,
            wake_rx: Mutex::new(Some(wake_rx)),
            counters: PortCounters::default(),
        });
        port.dev.use_real_clock();
        let weak = Arc::downgrade(&port);
        port.dev.set_port_stats(Box::new(move || {
            weak.upgrade()
                .and_then(|p| serde_json::to_value(p.stats()).ok())
                .unwrap_or(serde_json::Value::Null)
        }));
        let w = port.wake_tx.clone();
        port.dev.set_tx_waker(Box::new(move || {
            let _ = w.try_send(());
        }));
        let weak = Arc::downgrade(&port);
        port.dev.set_tx_sender(Box::new(move || {
            if let Some(p) = weak.upgrade() {
                p.flush_engine();
            }
        }));
        port
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> PortStats {
        let c = &self.counters;
        PortStats {
            wire_rx: load(&c.wire_rx),
            wire_tx: load(&c.wire_tx),
            to_engine: load(&c.to_engine),
            to_netdev: load(&c.to_netdev),
            netdev_dropped: load(&c.netdev_dropped),
            from_netdev: load(&c.from_netdev),
            wire_errors: load(&c.wire_errors),
            wire_tx_writes: load(&c.wire_tx_writes),
            wire_rx_reads: load(&c.wire_rx_reads),
            wire_rx_bad: load(&c.wire_rx_bad),
        }
    }

    /// Asks the port's threads to stop (they notice within ~10 ms when
    /// their links have read timeouts).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake_tx.try_send(());
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn record(&self, frame: &[u8]) {
        if let Some(p) = &self.pcap {
            let ts = self.now_ns() / 1000;
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            let _ = p.write(ts, frame);
        }
    }

    fn send_wire(&self, frame: &[u8]) {
        self.record(frame);
        match self.wire.send(frame) {
            Ok(()) => bump(&self.counters.wire_tx),
            Err(_) => bump(&self.counters.wire_errors),
        }
    }

    /// Sends the engine's queued frames on the wire, until it has no more
    /// (taking frames lets READ responses held back by backpressure go on).
    /// Frames leave in the engine's order: a caller that finds another
    /// one sending waits for it (its frames may come after ours).
    pub fn flush_engine(&self) {
        let _tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let mut frames = Vec::new();
        loop {
            self.dev.swap_tx(&mut frames);
            if frames.is_empty() {
                return;
            }
            for f in &frames {
                self.record(f);
            }
            let sent = self.wire.send_all(&frames);
            let c = &self.counters;
            c.wire_tx.fetch_add(sent.frames, Ordering::Relaxed);
            c.wire_errors.fetch_add(sent.failed, Ordering::Relaxed);
            c.wire_tx_writes.fetch_add(sent.writes, Ordering::Relaxed);
        }
    }

    /// Handles one frame from the wire.
    pub fn from_wire(&self, frame: &[u8]) {
        bump(&self.counters.wire_rx);
        self.record(frame);
        match steer(frame, |m| self.dev.answers_mac(m)) {
            Steer::Engine => {
                bump(&self.counters.to_engine);
                self.dev.receive(frame); // sends its frames (the sender)
            }
            Steer::Netdev => self.to_netdev(frame),
        }
    }

    /// Queues a wire frame for the netdev writer; never waits: without a
    /// connection or with a full queue the frame is dropped and counted.
    fn to_netdev(&self, frame: &[u8]) {
        if !self.netdev_connected.load(Ordering::Relaxed) {
            bump(&self.counters.netdev_dropped);
            return;
        }
        let len = (frame.len() as u32).to_be_bytes();
        let mut msg = Vec::with_capacity(frame.len() + 4);
        msg.extend_from_slice(&len);
        msg.extend_from_slice(frame);
        match self.netdev_queue.try_send(msg) {
            Ok(()) => bump(&self.counters.to_netdev),
            Err(_) => bump(&self.counters.netdev_dropped),
        }
    }

    /// Writes one queued frame to the netdev connection; a write that
    /// cannot finish within [`NETDEV_WRITE_TIMEOUT`] drops the connection.
    fn write_netdev(&self, msg: &[u8]) {
        let mut netdev = self.netdev.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, stream)) = netdev.as_mut() else {
            bump(&self.counters.netdev_dropped);
            return;
        };
        if stream.write_all(msg).is_err() {
            bump(&self.counters.netdev_dropped);
            // The reader of this connection sees EOF and exits too.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            *netdev = None;
            self.netdev_connected.store(false, Ordering::Relaxed);
        }
    }

    /// Writes the frames the wire thread queued for the netdev until
    /// stopped.
    pub fn netdev_writer_loop(&self) {
        let Some(queue) = self
            .netdev_queue_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        while !self.stop.load(Ordering::Relaxed) {
            match queue.recv_timeout(Duration::from_millis(10)) {
                Ok(msg) => self.write_netdev(&msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Serves one netdev connection (QEMU's stream netdev) until it closes:
    /// its frames go to the wire; wire frames for the netdev go to it.
    pub fn serve_netdev(&self, stream: UnixStream) -> io::Result<()> {
        let writer = stream.try_clone()?;
        // A guest that stops reading stalls only the netdev writer, and
        // not for long: a write that cannot finish in time drops the
        // connection (QEMU reconnects with `reconnect-ms`).
        writer.set_write_timeout(Some(NETDEV_WRITE_TIMEOUT))?;
        let serial = self.netdev_serial.fetch_add(1, Ordering::Relaxed);
        {
            let mut netdev = self.netdev.lock().unwrap_or_else(|e| e.into_inner());
            *netdev = Some((serial, writer));
            self.netdev_connected.store(true, Ordering::Relaxed);
        }
        let mut r = io::BufReader::new(stream);
        let mut buf = vec![0u8; MAX_FRAME];
        loop {
            let mut len = [0u8; 4];
            if r.read_exact(&mut len).is_err() {
                break;
            }
            let n = u32::from_be_bytes(len) as usize;
            if n > MAX_FRAME {
                break; // framing lost: drop the connection
            }
            if r.read_exact(&mut buf[..n]).is_err() {
                break;
            }
            bump(&self.counters.from_netdev);
            self.send_wire(&buf[..n]);
        }
        // A newer connection may have replaced this one meanwhile (QEMU
        // reconnected): leave that one attached.
        let mut netdev = self.netdev.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*netdev, Some((s, _)) if s == serial) {
            *netdev = None;
            self.netdev_connected.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Handles a burst of frames from the wire: RoCE frames for the engine
    /// are handed over as one batch, so that its ACKs are coalesced.
    pub fn from_wire_batch(&self, frames: &[Vec<u8>]) {
        let mut engine: Vec<&[u8]> = Vec::new();
        for f in frames {
            bump(&self.counters.wire_rx);
            self.record(f);
            match steer(f, |m| self.dev.answers_mac(m)) {
                Steer::Engine => {
                    bump(&self.counters.to_engine);
                    engine.push(f);
                }
                Steer::Netdev => self.to_netdev(f),
            }
        }
        if !engine.is_empty() {
            self.dev.receive_batch(engine); // sends its frames (the sender)
        }
    }

    /// Reads the wire until stopped.
    pub fn wire_loop(&self) {
        let mut buf = vec![0u8; MAX_READ];
        // The burst's frames, their buffers kept from one burst to the next.
        let mut burst: Vec<Vec<u8>> = Vec::new();
        // The last burst ended on an empty link: wait before reading again
        // (a read that finds nothing is a system call for nothing).
        let mut drained = false;
        while !self.stop.load(Ordering::Relaxed) {
            if drained && !self.wire.wait(WIRE_WAIT_MS) {
                continue;
            }
            drained = false;
            let mut k = 0;
            // Read until the burst is full (a super-frame may overfill
            // it) or the link has nothing more.
            while k < BURST {
                let wait = k == 0;
                let mut keep = |head: &[u8], rest: &[u8]| {
                    if burst.len() <= k {
                        burst.push(Vec::new());
                    }
                    let f = &mut burst[k];
                    f.clear();
                    f.extend_from_slice(head);
                    f.extend_from_slice(rest);
                    k += 1;
                };
                match self.wire.recv(&mut buf, wait, &mut keep) {
                    Ok(_) => bump(&self.counters.wire_rx_reads),
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                        bump(&self.counters.wire_rx_bad);
                        log::debug!("wire: dropped a read: {e}");
                    }
                    Err(e) => {
                        match e.kind() {
                            io::ErrorKind::WouldBlock => drained = true,
                            io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {}
                            // A failing link: hand on what was read, then
                            // wait a little before reading again.
                            _ if k > 0 => drained = true,
                            _ => std::thread::sleep(Duration::from_millis(10)),
                        }
                        break;
                    }
                }
            }
            if k > 0 {
                self.from_wire_batch(&burst[..k]);
            }
        }
    }

    /// Drives the engine's clock and sends its frames until stopped.
    pub fn engine_loop(&self) {
        let Some(rx) = self
            .wake_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        while !self.stop.load(Ordering::Relaxed) {
            self.dev.tick(0); // the device runs on its real-time clock
            self.flush_engine();
            if self.dev.has_backlog() {
                // A bounded entry point left work: go on at once (the
                // device lock was released in between).
                continue;
            }
            let (now, until) = self.dev.sleep_until(10_000_000);
            let wait = until.saturating_sub(now).clamp(20_000, 10_000_000);
            match rx.recv_timeout(Duration::from_nanos(wait)) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Starts the wire, engine and netdev writer threads, and the netdev
    /// listener if given.
    pub fn spawn(self: &Arc<Self>, netdev: Option<UnixListener>) -> io::Result<()> {
        let p = Arc::clone(self);
        std::thread::Builder::new()
            .name("port-netdev-tx".into())
            .spawn(move || p.netdev_writer_loop())?;
        let p = Arc::clone(self);
        std::thread::Builder::new()
            .name("port-wire".into())
            .spawn(move || p.wire_loop())?;
        let p = Arc::clone(self);
        std::thread::Builder::new()
            .name("port-engine".into())
            .spawn(move || p.engine_loop())?;
        if let Some(l) = netdev {
            let p = Arc::clone(self);
            std::thread::Builder::new()
                .name("port-netdev".into())
                .spawn(move || {
                    for conn in l.incoming() {
                        if p.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        if let Ok(s) = conn {
                            let _ = p.serve_netdev(s);
                        }
                    }
                })?;
        }
        Ok(())
    }
}
