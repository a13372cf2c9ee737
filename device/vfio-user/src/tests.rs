// SPDX-License-Identifier: GPL-2.0
//! In-process tests: a fake vfio-user client talks to the server over a unix socket pair,
//! passing memfds and eventfds with SCM_RIGHTS like QEMU does.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::proto::*;
use crate::sys;
use crate::*;

const BAR0_SIZE: u64 = 0x4000;

#[derive(Default)]
struct TestDev {
    regs: Mutex<Vec<u8>>,
    writes: Mutex<Vec<(u8, u64, Vec<u8>)>>,
    resets: AtomicUsize,
    config_writes: Mutex<Vec<(u16, Vec<u8>, u16)>>,
    unmaps: Mutex<Vec<(u64, u64)>>,
}

impl TestDev {
    fn new() -> Arc<TestDev> {
        let d = TestDev::default();
        *d.regs.lock().unwrap() = vec![0; BAR0_SIZE as usize];
        Arc::new(d)
    }
}

impl Device for TestDev {
    fn bar_read(&self, bar: u8, offset: u64, data: &mut [u8]) {
        if bar == 0 {
            let r = self.regs.lock().unwrap();
            data.copy_from_slice(&r[offset as usize..offset as usize + data.len()]);
        } else {
            data.fill(0xa5);
        }
    }

    fn bar_write(&self, bar: u8, offset: u64, data: &[u8]) {
        if bar == 0 {
            let mut r = self.regs.lock().unwrap();
            r[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        }
        self.writes
            .lock()
            .unwrap()
            .push((bar, offset, data.to_vec()));
    }

    fn reset(&self) {
        self.resets.fetch_add(1, Ordering::SeqCst);
    }

    fn config_written(&self, offset: u16, data: &[u8], command: u16) {
        self.config_writes
            .lock()
            .unwrap()
            .push((offset, data.to_vec(), command));
    }

    fn dma_unmapped(&self, gpa: u64, size: u64) {
        self.unmaps.lock().unwrap().push((gpa, size));
    }
}

fn test_config() -> DeviceConfig {
    DeviceConfig {
        vendor_id: 0x1af4,
        device_id: 0x10f0,
        subsystem_vendor_id: 0x1b36,
        subsystem_id: 0x0042,
        class_code: 0x020000,
        revision: 0x02,
        bars: vec![
            BarInfo {
                index: 0,
                size: BAR0_SIZE,
                is_64bit: true,
                prefetchable: false,
            },
            BarInfo {
                index: 2,
                size: 0x1000,
                is_64bit: false,
                prefetchable: true,
            },
        ],
        msix: Some(MsixInfo {
            vectors: 4,
            table_bar: 0,
            table_offset: 0x2000,
            pba_bar: 0,
            pba_offset: 0x3000,
        }),
        config_space_size: CONFIG_SPACE_PCI,
    }
}

/// What QEMU 11.1 sends as version capabilities.
const QEMU_CAPS: &str = "{\"capabilities\":{\"max_data_xfer_size\":1048576,\"pgsizes\":4096,\"max_msg_fds\":16,\"max_dma_maps\":65535,\"write_multiple\":true,\"migration\":{\"pgsize\":4096,\"max_bitmap_size\":268435456}}}";

struct Client {
    sock: UnixStream,
    next_id: u16,
}

impl Client {
    fn new(sock: UnixStream) -> Client {
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client { sock, next_id: 1 }
    }

    fn send_raw(&mut self, bytes: &[u8], fds: &[RawFd]) {
        sys::send_with_fds(self.sock.as_fd(), bytes, fds).unwrap();
    }

    fn send(&mut self, cmd: u16, flags: u32, payload: &[u8], fds: &[RawFd]) -> u16 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let hdr = Header {
            id,
            command: cmd,
            size: (HEADER_SIZE + payload.len()) as u32,
            flags,
            error: 0,
        };
        let mut buf = hdr.to_bytes().to_vec();
        buf.extend_from_slice(payload);
        self.send_raw(&buf, fds);
        id
    }

    fn recv(&mut self) -> (Header, Vec<u8>) {
        let mut h = [0u8; HEADER_SIZE];
        read_exact(&self.sock, &mut h);
        let hdr = Header::from_bytes(&h);
        assert!(hdr.size as usize >= HEADER_SIZE);
        let mut body = vec![0u8; hdr.size as usize - HEADER_SIZE];
        read_exact(&self.sock, &mut body);
        assert_eq!(hdr.flags & FLAG_TYPE_MASK, FLAG_TYPE_REPLY);
        (hdr, body)
    }

    fn call_fds(&mut self, cmd: u16, payload: &[u8], fds: &[RawFd]) -> Result<Vec<u8>, u32> {
        let id = self.send(cmd, 0, payload, fds);
        let (hdr, body) = self.recv();
        assert_eq!(hdr.id, id, "reply id");
        assert_eq!(hdr.command, cmd, "reply command");
        if hdr.flags & FLAG_ERROR != 0 {
            assert!(body.is_empty(), "error replies carry no payload");
            Err(hdr.error)
        } else {
            Ok(body)
        }
    }

    fn call(&mut self, cmd: u16, payload: &[u8]) -> Result<Vec<u8>, u32> {
        self.call_fds(cmd, payload, &[])
    }

    fn negotiate(&mut self) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(QEMU_CAPS.as_bytes());
        p.push(0);
        let reply = self.call(CMD_VERSION, &p).expect("version accepted");
        assert!(
            reply.len() <= p.len(),
            "reply must fit QEMU's request buffer"
        );
        reply
    }

    fn rw_payload(region: u32, offset: u64, count: u32) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&region.to_le_bytes());
        p.extend_from_slice(&count.to_le_bytes());
        p
    }

    fn read(&mut self, region: u32, offset: u64, count: u32) -> Result<Vec<u8>, u32> {
        let body = self.call(CMD_REGION_READ, &Self::rw_payload(region, offset, count))?;
        assert_eq!(body.len(), 16 + count as usize);
        assert_eq!(u32::from_le_bytes(body[12..16].try_into().unwrap()), count);
        Ok(body[16..].to_vec())
    }

    fn read32(&mut self, region: u32, offset: u64) -> u32 {
        u32::from_le_bytes(self.read(region, offset, 4).unwrap().try_into().unwrap())
    }

    fn write(&mut self, region: u32, offset: u64, data: &[u8]) -> Result<(), u32> {
        let mut p = Self::rw_payload(region, offset, data.len() as u32);
        p.extend_from_slice(data);
        let body = self.call(CMD_REGION_WRITE, &p)?;
        assert_eq!(body, Self::rw_payload(region, offset, data.len() as u32));
        Ok(())
    }

    fn posted_write(&mut self, region: u32, offset: u64, data: &[u8]) {
        let mut p = Self::rw_payload(region, offset, data.len() as u32);
        p.extend_from_slice(data);
        self.send(CMD_REGION_WRITE, FLAG_NO_REPLY, &p, &[]);
    }

    fn dma_map(
        &mut self,
        gpa: u64,
        size: u64,
        fd: Option<RawFd>,
        offset: u64,
        flags: u32,
    ) -> Result<(), u32> {
        let mut p = Vec::new();
        p.extend_from_slice(&32u32.to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&gpa.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        let fds: Vec<RawFd> = fd.into_iter().collect();
        let body = self.call_fds(CMD_DMA_MAP, &p, &fds)?;
        assert!(body.is_empty());
        Ok(())
    }

    fn dma_unmap(&mut self, gpa: u64, size: u64, flags: u32) -> Result<(), u32> {
        let mut p = Vec::new();
        p.extend_from_slice(&24u32.to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(&gpa.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        let body = self.call(CMD_DMA_UNMAP, &p)?;
        assert_eq!(body, p, "unmap reply echoes the request entry");
        Ok(())
    }

    fn set_irqs(
        &mut self,
        flags: u32,
        index: u32,
        start: u32,
        count: u32,
        data: &[u8],
        fds: &[RawFd],
    ) -> Result<(), u32> {
        let mut p = Vec::new();
        p.extend_from_slice(&((20 + data.len()) as u32).to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(&index.to_le_bytes());
        p.extend_from_slice(&start.to_le_bytes());
        p.extend_from_slice(&count.to_le_bytes());
        p.extend_from_slice(data);
        let body = self.call_fds(CMD_DEVICE_SET_IRQS, &p, fds)?;
        assert!(body.is_empty());
        Ok(())
    }

    /// Asserts that nothing arrives within `ms` milliseconds.
    fn expect_silence(&mut self, ms: u64) {
        self.sock.set_nonblocking(true).unwrap();
        thread::sleep(Duration::from_millis(ms));
        let mut b = [0u8; 1];
        let r = std::io::Read::read(&mut &self.sock, &mut b);
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "unexpected data from server: {r:?}"
        );
        self.sock.set_nonblocking(false).unwrap();
    }
}

fn read_exact(mut s: &UnixStream, buf: &mut [u8]) {
    std::io::Read::read_exact(&mut s, buf).expect("read from server");
}

struct Harness {
    client: Client,
    dev: Arc<TestDev>,
    dma: Dma,
    irqs: Irqs,
    stop: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), Error>>>,
}

impl Harness {
    fn start() -> Harness {
        Self::start_with(|_| {})
    }

    fn start_with(f: impl FnOnce(&mut Server)) -> Harness {
        let (a, b) = UnixStream::pair().unwrap();
        let mut server = Server::unbound(test_config()).unwrap();
        f(&mut server);
        let dev = TestDev::new();
        let (dma, irqs, stop) = (server.dma(), server.irqs(), server.shutdown_handle());
        let d2 = Arc::clone(&dev);
        let thread = thread::spawn(move || server.serve(b, &*d2));
        Harness {
            client: Client::new(a),
            dev,
            dma,
            irqs,
            stop,
            thread: Some(thread),
        }
    }

    fn negotiated() -> Harness {
        let mut h = Self::start();
        h.client.negotiate();
        h
    }

    /// Closes the client side and returns what `serve` returned.
    fn finish(mut self) -> Result<(), Error> {
        let t = self.thread.take().unwrap();
        drop(self.client);
        t.join().unwrap()
    }

    fn join(mut self) -> Result<(), Error> {
        self.thread.take().unwrap().join().unwrap()
    }
}

fn tmp_path(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "vfio-user-test-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn read_event(fd: &OwnedFd) -> Option<u64> {
    sys::eventfd_read(fd.as_fd()).unwrap()
}

// ---------------------------------------------------------------------------------------

#[test]
fn version_negotiation() {
    let mut h = Harness::start();
    // Anything before VERSION is refused, and the stream stays usable.
    assert_eq!(
        h.client.call(CMD_DEVICE_GET_INFO, &16u32.to_le_bytes()),
        Err(libc::EINVAL as u32)
    );

    let reply = h.client.negotiate();
    assert_eq!(u16::from_le_bytes([reply[0], reply[1]]), 0, "major");
    assert_eq!(u16::from_le_bytes([reply[2], reply[3]]), 0, "minor");
    assert_eq!(*reply.last().unwrap(), 0, "JSON is NUL-terminated");
    let json = std::str::from_utf8(&reply[4..reply.len() - 1]).unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let caps = &v["capabilities"];
    assert!(caps["max_msg_fds"].as_u64().unwrap() >= 8);
    assert!(caps["max_data_xfer_size"].as_u64().unwrap() >= 4096);
    assert!(caps.get("migration").is_none());
    assert!(caps.get("write_multiple").is_none(), "off by default");
    h.finish().unwrap();
}

#[test]
fn version_variants() {
    let mut h = Harness::start_with(|s| s.set_write_multiple(true));
    // Malformed JSON: error reply, connection stays in sync.
    let mut p = vec![0, 0, 0, 0];
    p.extend_from_slice(b"{\"capabilities\": [1,2");
    p.push(0);
    assert_eq!(h.client.call(CMD_VERSION, &p), Err(libc::EINVAL as u32));
    // Capabilities not an object.
    let mut p = vec![0, 0, 0, 0];
    p.extend_from_slice(b"[]\0");
    assert_eq!(h.client.call(CMD_VERSION, &p), Err(libc::EINVAL as u32));
    // Unsupported major.
    assert_eq!(
        h.client.call(CMD_VERSION, &[1, 0, 0, 0]),
        Err(libc::ENOTSUP as u32)
    );
    // Truncated payload.
    assert_eq!(
        h.client.call(CMD_VERSION, &[0, 0]),
        Err(libc::EINVAL as u32)
    );
    // No JSON at all (and no room for ours): just the version comes back.
    let r = h.client.call(CMD_VERSION, &[0, 0, 3, 0]).unwrap();
    assert_eq!(r, vec![0, 0, 0, 0]);
    // Unknown keys, odd types, no NUL terminator: accepted; reply advertises write_multiple.
    let mut p = vec![0, 0, 1, 0];
    p.extend_from_slice(
        b"{\"capabilities\":{\"max_msg_fds\":\"lots\",\"twin_socket\":{\"supported\":true},\"x\":null},\"other\":1}      ",
    );
    p.extend_from_slice(&[b' '; 64]);
    let r = h.client.call(CMD_VERSION, &p).unwrap();
    let json = std::str::from_utf8(&r[4..r.len() - 1]).unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        v["capabilities"]["write_multiple"],
        serde_json::Value::Bool(true)
    );
    assert!(v["capabilities"].get("twin_socket").is_none());
    h.finish().unwrap();
}

#[test]
fn device_region_and_irq_info() {
    let mut h = Harness::negotiated();
    let info = h
        .client
        .call(
            CMD_DEVICE_GET_INFO,
            &[16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )
        .unwrap();
    assert_eq!(u32_at(&info, 0), 16);
    assert_eq!(u32_at(&info, 4), DEVICE_FLAGS_RESET | DEVICE_FLAGS_PCI);
    assert_eq!(u32_at(&info, 8), 9);
    assert_eq!(u32_at(&info, 12), 5);

    let region = |c: &mut Client, index: u32| {
        let mut p = vec![0u8; 32];
        p[0..4].copy_from_slice(&32u32.to_le_bytes());
        p[8..12].copy_from_slice(&index.to_le_bytes());
        c.call(CMD_DEVICE_GET_REGION_INFO, &p)
    };
    let rw = REGION_INFO_FLAG_READ | REGION_INFO_FLAG_WRITE;
    for (index, flags, size) in [
        (0, rw, BAR0_SIZE),
        (1, 0, 0),
        (2, rw, 0x1000),
        (3, 0, 0),
        (5, 0, 0),
        (6, 0, 0),
        (7, rw, 256),
        (8, 0, 0),
    ] {
        let r = region(&mut h.client, index).unwrap();
        assert_eq!(r.len(), 32);
        assert_eq!(u32_at(&r, 0), 32, "argsz");
        assert_eq!(u32_at(&r, 4), flags, "flags of region {index}");
        assert_eq!(u32_at(&r, 4) & REGION_INFO_FLAG_MMAP, 0);
        assert_eq!(u32_at(&r, 8), index);
        assert_eq!(u64_at(&r, 16), size, "size of region {index}");
    }
    assert_eq!(region(&mut h.client, 9), Err(libc::EINVAL as u32));

    let irq = |c: &mut Client, index: u32| {
        let mut p = vec![0u8; 16];
        p[0..4].copy_from_slice(&16u32.to_le_bytes());
        p[8..12].copy_from_slice(&index.to_le_bytes());
        c.call(CMD_DEVICE_GET_IRQ_INFO, &p)
    };
    let msix = irq(&mut h.client, IRQ_MSIX).unwrap();
    assert_eq!(u32_at(&msix, 12), 4);
    assert_ne!(u32_at(&msix, 4) & IRQ_INFO_EVENTFD, 0);
    assert_eq!(u32_at(&msix, 4) & IRQ_INFO_NORESIZE, 0);
    assert_eq!(u32_at(&irq(&mut h.client, IRQ_INTX).unwrap(), 12), 0);
    assert_eq!(u32_at(&irq(&mut h.client, IRQ_MSI).unwrap(), 12), 0);
    assert_eq!(irq(&mut h.client, IRQ_ERR), Err(libc::EINVAL as u32));
    assert_eq!(u32_at(&irq(&mut h.client, IRQ_REQ).unwrap(), 12), 0);
    assert_eq!(irq(&mut h.client, 5), Err(libc::EINVAL as u32));
    h.finish().unwrap();
}

#[test]
fn config_space() {
    let mut h = Harness::negotiated();
    let c = h.client.read(REGION_CONFIG, 0, 256).unwrap();
    assert_eq!(u16::from_le_bytes([c[0], c[1]]), 0x1af4);
    assert_eq!(u16::from_le_bytes([c[2], c[3]]), 0x10f0);
    assert_eq!(c[8], 0x02, "revision");
    assert_eq!(&c[9..12], &[0x00, 0x00, 0x02], "class code 02/00/00");
    assert_eq!(c[0x0e], 0, "header type 0");
    assert_eq!(u16::from_le_bytes([c[0x2c], c[0x2d]]), 0x1b36);
    assert_eq!(u16::from_le_bytes([c[0x2e], c[0x2f]]), 0x0042);
    assert_ne!(
        u16::from_le_bytes([c[6], c[7]]) & 0x10,
        0,
        "capability list bit"
    );
    assert_eq!(c[0x3d], 0, "no INTx pin");
    // Capability chain: 0x34 -> MSI-X -> end.
    let cap = c[0x34] as usize;
    assert_eq!(cap, MSIX_CAP_OFFSET);
    assert_eq!(c[cap], 0x11);
    assert_eq!(c[cap + 1], 0, "last capability");
    assert_eq!(
        u16::from_le_bytes([c[cap + 2], c[cap + 3]]) & 0x7ff,
        3,
        "table size N-1"
    );
    assert_eq!(u32_at(&c, cap + 4), 0x2000, "table offset | BIR 0");
    assert_eq!(u32_at(&c, cap + 8), 0x3000, "PBA offset | BIR 0");
    // BAR type bits.
    assert_eq!(u32_at(&c, 0x10), 0x4, "BAR0: 64-bit memory");
    assert_eq!(u32_at(&c, 0x18), 0x8, "BAR2: 32-bit prefetchable");
    assert_eq!(u32_at(&c, 0x20), 0, "BAR4 absent");

    // BAR sizing.
    h.client.write(REGION_CONFIG, 0x10, &[0xff; 4]).unwrap();
    h.client.write(REGION_CONFIG, 0x14, &[0xff; 4]).unwrap();
    assert_eq!(h.client.read32(REGION_CONFIG, 0x10), 0xffff_c004);
    assert_eq!(h.client.read32(REGION_CONFIG, 0x14), 0xffff_ffff);
    h.client.write(REGION_CONFIG, 0x18, &[0xff; 4]).unwrap();
    assert_eq!(h.client.read32(REGION_CONFIG, 0x18), 0xffff_f008);
    h.client.write(REGION_CONFIG, 0x20, &[0xff; 4]).unwrap();
    assert_eq!(
        h.client.read32(REGION_CONFIG, 0x20),
        0,
        "absent BAR stays 0"
    );
    // Program an address.
    h.client
        .write(REGION_CONFIG, 0x10, &0xfe00_0000u32.to_le_bytes())
        .unwrap();
    h.client
        .write(REGION_CONFIG, 0x14, &0u32.to_le_bytes())
        .unwrap();
    assert_eq!(h.client.read32(REGION_CONFIG, 0x10), 0xfe00_0004);
    assert_eq!(h.client.read32(REGION_CONFIG, 0x14), 0);

    // Read-only IDs, writable command register, notification to the device.
    h.client.write(REGION_CONFIG, 0, &[0, 0, 0, 0]).unwrap();
    assert_eq!(h.client.read32(REGION_CONFIG, 0), 0x10f0_1af4);
    h.client.write(REGION_CONFIG, 4, &[0x06, 0x00]).unwrap();
    assert_eq!(
        h.client.read(REGION_CONFIG, 4, 2).unwrap(),
        vec![0x06, 0x00]
    );
    let last = h.dev.config_writes.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last, (4, vec![0x06, 0x00], 0x0006));
    // MSI-X enable bit is writable, table size is not.
    h.client
        .write(REGION_CONFIG, cap as u64 + 2, &[0xff, 0xff])
        .unwrap();
    assert_eq!(
        h.client.read(REGION_CONFIG, cap as u64 + 2, 2).unwrap(),
        vec![0x03, 0xc0]
    );

    // Out of range.
    assert_eq!(
        h.client.read(REGION_CONFIG, 254, 4),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.read(REGION_CONFIG, u64::MAX - 1, 4),
        Err(libc::EINVAL as u32)
    );

    // Reset restores the power-on image and reaches the device.
    assert_eq!(h.client.call(CMD_DEVICE_RESET, &[]), Ok(vec![]));
    assert_eq!(h.dev.resets.load(Ordering::SeqCst), 1);
    assert_eq!(h.client.read(REGION_CONFIG, 4, 2).unwrap(), vec![0, 0]);
    assert_eq!(h.client.read32(REGION_CONFIG, 0x10), 0x4);
    h.finish().unwrap();
}

#[test]
fn config_space_4096() {
    let mut cfg = test_config();
    cfg.config_space_size = CONFIG_SPACE_PCIE;
    cfg.msix = None;
    let (a, b) = UnixStream::pair().unwrap();
    let mut server = Server::unbound(cfg).unwrap();
    let dev = TestDev::new();
    let d2 = Arc::clone(&dev);
    let t = thread::spawn(move || server.serve(b, &*d2));
    let mut c = Client::new(a);
    c.negotiate();
    let mut p = vec![0u8; 32];
    p[0..4].copy_from_slice(&32u32.to_le_bytes());
    p[8..12].copy_from_slice(&REGION_CONFIG.to_le_bytes());
    let r = c.call(CMD_DEVICE_GET_REGION_INFO, &p).unwrap();
    assert_eq!(u64_at(&r, 16), 4096);
    let cs = c.read(REGION_CONFIG, 0, 4096).unwrap();
    assert_eq!(cs[0x34], 0, "no capabilities");
    assert_eq!(u16::from_le_bytes([cs[6], cs[7]]) & 0x10, 0);
    assert_eq!(u32_at(&cs, 0x100), 0, "no extended capabilities");
    drop(c);
    t.join().unwrap().unwrap();
}

#[test]
fn invalid_configs_rejected() {
    let mut c = test_config();
    c.bars[0].size = 0x3000;
    assert!(matches!(Server::unbound(c), Err(Error::InvalidConfig(_))));
    let mut c = test_config();
    c.bars[1].index = 1; // collides with the upper half of 64-bit BAR0
    assert!(Server::unbound(c).is_err());
    let mut c = test_config();
    c.msix.as_mut().unwrap().pba_offset = 0x2000; // overlaps the table
    assert!(Server::unbound(c).is_err());
    let mut c = test_config();
    c.msix.as_mut().unwrap().table_bar = 4; // missing BAR
    assert!(Server::unbound(c).is_err());
    let mut c = test_config();
    c.config_space_size = 512;
    assert!(Server::unbound(c).is_err());
}

#[test]
fn bar_access_and_posted_writes() {
    let mut h = Harness::negotiated();
    h.client
        .write(0, 0x10, &0xdead_beefu32.to_le_bytes())
        .unwrap();
    assert_eq!(h.client.read32(0, 0x10), 0xdead_beef);
    assert_eq!(
        h.client.read(2, 0x20, 2).unwrap(),
        vec![0xa5, 0xa5],
        "BAR2 reaches the device"
    );
    h.client.write(2, 0x0, &[1]).unwrap();

    // Posted writes: no reply; later read sees them (in order).
    h.client.posted_write(0, 0x100, &[1, 2, 3, 4]);
    h.client.posted_write(0, 0x104, &[5, 6, 7, 8]);
    h.client.expect_silence(100);
    assert_eq!(
        h.client.read(0, 0x100, 8).unwrap(),
        vec![1, 2, 3, 4, 5, 6, 7, 8]
    );
    {
        let w = h.dev.writes.lock().unwrap();
        assert_eq!(w.len(), 4);
        assert_eq!(w[1], (2, 0, vec![1]));
        assert_eq!(w[2], (0, 0x100, vec![1, 2, 3, 4]));
        assert_eq!(w[3], (0, 0x104, vec![5, 6, 7, 8]));
    }
    // A failing posted write is not answered either.
    h.client.posted_write(0, BAR0_SIZE, &[1]);
    h.client.expect_silence(50);

    // Bounds and missing BARs.
    assert_eq!(h.client.read(0, BAR0_SIZE - 2, 4), Err(libc::EINVAL as u32));
    assert_eq!(h.client.read(1, 0, 4), Err(libc::EINVAL as u32));
    assert_eq!(h.client.read(4, 0, 4), Err(libc::EINVAL as u32));
    assert_eq!(h.client.read(REGION_ROM, 0, 4), Err(libc::EINVAL as u32));
    assert_eq!(
        h.client.write(0, u64::MAX - 1, &[0; 4]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.read(0, 0, MAX_DATA_XFER as u32 + 1),
        Err(libc::E2BIG as u32)
    );
    // Write whose count exceeds the data present.
    let mut p = Client::rw_payload(0, 0, 8);
    p.extend_from_slice(&[1, 2]);
    assert_eq!(
        h.client.call(CMD_REGION_WRITE, &p),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(h.dev.writes.lock().unwrap().len(), 4);
    h.finish().unwrap();
}

#[test]
fn write_multi() {
    let mut h = Harness::negotiated();
    let mut p = Vec::new();
    p.extend_from_slice(&2u64.to_le_bytes());
    for (off, val) in [(0x200u64, 0x1111_1111u32), (0x204, 0x2222_2222)] {
        p.extend_from_slice(&off.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&4u32.to_le_bytes());
        p.extend_from_slice(&(val as u64).to_le_bytes());
    }
    // As QEMU sends it: posted.
    h.client
        .send(CMD_REGION_WRITE_MULTI, FLAG_NO_REPLY, &p, &[]);
    assert_eq!(h.client.read32(0, 0x200), 0x1111_1111);
    assert_eq!(h.client.read32(0, 0x204), 0x2222_2222);
    // With a reply.
    let r = h.client.call(CMD_REGION_WRITE_MULTI, &p).unwrap();
    assert_eq!(r, 2u64.to_le_bytes().to_vec());
    // wr_cnt larger than the entries present.
    let mut bad = p.clone();
    bad[0..8].copy_from_slice(&3u64.to_le_bytes());
    assert_eq!(
        h.client.call(CMD_REGION_WRITE_MULTI, &bad),
        Err(libc::EINVAL as u32)
    );
    h.finish().unwrap();
}

#[test]
fn pba_reads_report_pending() {
    let mut h = Harness::negotiated();
    assert_eq!(h.client.read(0, 0x3000, 8).unwrap(), vec![0; 8]);
    h.irqs.trigger(1).unwrap();
    h.irqs.trigger(3).unwrap();
    assert_eq!(
        h.client.read(0, 0x3000, 8).unwrap(),
        vec![0x0a, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(h.client.read(0, 0x3000, 1).unwrap(), vec![0x0a]);
    // PBA writes are dropped and do not reach the device.
    h.client.write(0, 0x3000, &[0; 8]).unwrap();
    assert!(h.dev.writes.lock().unwrap().is_empty());
    assert!(h.irqs.is_pending(1));
    h.finish().unwrap();
}

#[test]
fn dma_map_access_unmap() {
    let mut h = Harness::negotiated();
    let ps = sys::page_size();
    let mem = sys::memfd_create("guest-ram", 4 << 20).unwrap();
    let file = File::from(mem.try_clone().unwrap());
    let gpa = 0x1_0000_0000u64;
    let size = 1u64 << 20;
    let rw = DMA_MAP_FLAG_READ | DMA_MAP_FLAG_WRITE;
    h.client
        .dma_map(gpa, size, Some(mem.as_raw_fd()), ps, rw)
        .unwrap();

    // Device writes are visible in the memfd at offset + (addr - gpa) and vice versa.
    h.dma.write(gpa + 0x10, b"hello guest").unwrap();
    let mut b = [0u8; 11];
    file.read_at(&mut b, ps + 0x10).unwrap();
    assert_eq!(&b, b"hello guest");
    file.write_at(b"from guest", ps + 0x800).unwrap();
    let mut b = [0u8; 10];
    h.dma.read(gpa + 0x800, &mut b).unwrap();
    assert_eq!(&b, b"from guest");
    h.dma.write_u32(gpa + 0x40, 0x1234_5678).unwrap();
    h.dma.write_u64(gpa + 0x48, 0x0102_0304_0506_0708).unwrap();
    h.dma.write_u32(gpa + 0x51, 0xa1b2_c3d4).unwrap(); // unaligned
    assert_eq!(h.dma.read_u32(gpa + 0x40).unwrap(), 0x1234_5678);
    assert_eq!(h.dma.read_u64(gpa + 0x48).unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(h.dma.read_u32(gpa + 0x51).unwrap(), 0xa1b2_c3d4);
    let mut b = [0u8; 4];
    file.read_at(&mut b, ps + 0x40).unwrap();
    assert_eq!(b, [0x78, 0x56, 0x34, 0x12], "little-endian in guest memory");
    // Last bytes of the window are accessible.
    h.dma.write(gpa + size - 4, &[9; 4]).unwrap();

    // Out-of-range accesses never touch other memory.
    let mut b = [0u8; 8];
    assert!(matches!(
        h.dma.read(gpa + size - 4, &mut b),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        h.dma.read(gpa - 4, &mut b),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        h.dma.write(u64::MAX - 2, &[0; 8]),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(h.dma.read_u64(0), Err(Error::OutOfRange { .. })));

    // An adjacent window: accesses may not span the boundary.
    h.client
        .dma_map(gpa + size, size, Some(mem.as_raw_fd()), ps + size, rw)
        .unwrap();
    h.dma.write(gpa + size, &[7; 4]).unwrap();
    assert!(matches!(
        h.dma.read(gpa + size - 4, &mut b),
        Err(Error::OutOfRange { .. })
    ));

    // Overlaps are refused with EEXIST; fd-less windows are recorded but inaccessible.
    assert_eq!(
        h.client
            .dma_map(gpa + 0x1000, 0x1000, Some(mem.as_raw_fd()), 0, rw),
        Err(libc::EEXIST as u32)
    );
    h.client
        .dma_map(0xc0000, 0x20000, None, 0, DMA_MAP_FLAG_READ)
        .unwrap();
    assert!(matches!(
        h.dma.read(0xc0000, &mut b),
        Err(Error::NotAccessible { .. })
    ));
    // Read-only window.
    h.client
        .dma_map(
            0x2000_0000,
            0x1000,
            Some(mem.as_raw_fd()),
            0,
            DMA_MAP_FLAG_READ,
        )
        .unwrap();
    h.dma.read(0x2000_0000, &mut b).unwrap();
    assert!(matches!(
        h.dma.write(0x2000_0000, &b),
        Err(Error::PermissionDenied { .. })
    ));
    // A window beyond the end of the file would SIGBUS: refused.
    assert_eq!(
        h.client
            .dma_map(0x3000_0000, 8 << 20, Some(mem.as_raw_fd()), 0, rw),
        Err(libc::EINVAL as u32)
    );
    // Zero size, overflowing range.
    assert_eq!(
        h.client.dma_map(0x4000_0000, 0, None, 0, rw),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.dma_map(u64::MAX - 10, 0x1000, None, 0, rw),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(h.dma.regions().len(), 4);

    // Unmap: unknown range and partial range are errors.
    assert_eq!(
        h.client.dma_unmap(0x5000_0000, 0x1000, 0),
        Err(libc::ENOENT as u32)
    );
    assert_eq!(
        h.client.dma_unmap(gpa, size / 2, 0),
        Err(libc::ENOENT as u32)
    );
    assert_eq!(
        h.client
            .dma_unmap(gpa, size, DMA_UNMAP_FLAG_GET_DIRTY_BITMAP),
        Err(libc::ENOTSUP as u32)
    );

    // Unmap while a worker clone keeps accessing the window: no crash; accesses either
    // succeed (old pages still mapped) or fail cleanly once the window is gone.
    let worker_dma = h.dma.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let worker = thread::spawn(move || {
        let (mut ok, mut err) = (0u64, 0u64);
        let mut buf = [0u8; 256];
        while !stop2.load(Ordering::Relaxed) {
            match worker_dma.read(gpa + 0x100, &mut buf) {
                Ok(()) => ok += 1,
                Err(Error::OutOfRange { .. }) => err += 1,
                Err(e) => panic!("unexpected error {e}"),
            }
            let _ = worker_dma.write_u64(gpa + 0x200, ok);
        }
        (ok, err)
    });
    for _ in 0..50 {
        h.client.dma_unmap(gpa, size, 0).unwrap();
        h.client
            .dma_map(gpa, size, Some(mem.as_raw_fd()), ps, rw)
            .unwrap();
    }
    h.client.dma_unmap(gpa, size, 0).unwrap();
    thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let (_ok, err) = worker.join().unwrap();
    assert!(err > 0, "worker saw the window disappear");
    assert!(matches!(
        h.dma.read(gpa, &mut b),
        Err(Error::OutOfRange { .. })
    ));
    assert!(h.dev.unmaps.lock().unwrap().contains(&(gpa, size)));

    // Unmap-all.
    h.client.dma_unmap(0, 0, DMA_UNMAP_FLAG_ALL).unwrap();
    assert!(h.dma.regions().is_empty());

    // Mappings are dropped when the client goes away.
    h.client
        .dma_map(gpa, size, Some(mem.as_raw_fd()), ps, rw)
        .unwrap();
    let dma = h.dma.clone();
    h.finish().unwrap();
    assert!(dma.regions().is_empty());
}

#[test]
fn msix_irqs() {
    let mut h = Harness::negotiated();
    let trig_fd = IRQ_SET_DATA_EVENTFD | IRQ_SET_ACTION_TRIGGER;
    assert!(!h.irqs.enabled());
    // Interrupt raised before MSI-X is set up: held pending.
    h.irqs.trigger(2).unwrap();
    assert!(h.irqs.is_pending(2));
    // QEMU's enable message: count 1, no fd.
    h.client
        .set_irqs(trig_fd, IRQ_MSIX, 0, 1, &[], &[])
        .unwrap();
    assert!(h.irqs.enabled());
    assert!(!h.irqs.has_eventfd(0));
    // Vector 2 gets its eventfd: the pending interrupt is delivered at once.
    let e2 = sys::eventfd().unwrap();
    h.client
        .set_irqs(trig_fd, IRQ_MSIX, 2, 1, &[], &[e2.as_raw_fd()])
        .unwrap();
    assert!(h.irqs.has_eventfd(2));
    assert_eq!(read_event(&e2), Some(1));
    assert!(!h.irqs.is_pending(2));
    // Triggers from a worker thread.
    let irqs = h.irqs.clone();
    thread::spawn(move || irqs.trigger(2).unwrap())
        .join()
        .unwrap();
    assert_eq!(read_event(&e2), Some(1));
    assert_eq!(read_event(&e2), None);
    // Replacement: the new fd gets the interrupts, the old one no more.
    let e2b = sys::eventfd().unwrap();
    h.client
        .set_irqs(trig_fd, IRQ_MSIX, 2, 1, &[], &[e2b.as_raw_fd()])
        .unwrap();
    h.irqs.trigger(2).unwrap();
    assert_eq!(read_event(&e2b), Some(1));
    assert_eq!(read_event(&e2), None);
    // Several fds in one message.
    let (e0, e1) = (sys::eventfd().unwrap(), sys::eventfd().unwrap());
    h.client
        .set_irqs(
            trig_fd,
            IRQ_MSIX,
            0,
            2,
            &[],
            &[e0.as_raw_fd(), e1.as_raw_fd()],
        )
        .unwrap();
    h.irqs.trigger(0).unwrap();
    h.irqs.trigger(1).unwrap();
    assert_eq!((read_event(&e0), read_event(&e1)), (Some(1), Some(1)));
    // Client-side trigger: DATA_NONE and DATA_BOOL.
    h.client
        .set_irqs(
            IRQ_SET_DATA_NONE | IRQ_SET_ACTION_TRIGGER,
            IRQ_MSIX,
            2,
            1,
            &[],
            &[],
        )
        .unwrap();
    assert_eq!(read_event(&e2b), Some(1));
    h.client
        .set_irqs(
            IRQ_SET_DATA_BOOL | IRQ_SET_ACTION_TRIGGER,
            IRQ_MSIX,
            0,
            3,
            &[1, 0, 1],
            &[],
        )
        .unwrap();
    assert_eq!(
        (read_event(&e0), read_event(&e1), read_event(&e2b)),
        (Some(1), None, Some(1))
    );
    // Server-side mask holds the interrupt pending until unmask.
    h.client
        .set_irqs(
            IRQ_SET_DATA_NONE | IRQ_SET_ACTION_MASK,
            IRQ_MSIX,
            1,
            1,
            &[],
            &[],
        )
        .unwrap();
    h.irqs.trigger(1).unwrap();
    assert_eq!(read_event(&e1), None);
    h.client
        .set_irqs(
            IRQ_SET_DATA_BOOL | IRQ_SET_ACTION_UNMASK,
            IRQ_MSIX,
            1,
            1,
            &[1],
            &[],
        )
        .unwrap();
    assert_eq!(read_event(&e1), Some(1));
    // De-assign one vector (eventfd flag, no fd).
    h.client
        .set_irqs(trig_fd, IRQ_MSIX, 1, 1, &[], &[])
        .unwrap();
    assert!(!h.irqs.has_eventfd(1));
    // Errors.
    assert_eq!(
        h.client.set_irqs(trig_fd, IRQ_MSIX, 3, 2, &[], &[]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client
            .set_irqs(trig_fd, IRQ_MSIX, 0, 2, &[], &[e0.as_raw_fd()]),
        Err(libc::EINVAL as u32),
        "fd count mismatch"
    );
    assert_eq!(
        h.client.set_irqs(
            IRQ_SET_DATA_BOOL | IRQ_SET_ACTION_TRIGGER,
            IRQ_MSIX,
            0,
            4,
            &[1],
            &[]
        ),
        Err(libc::EINVAL as u32),
        "bool array too short"
    );
    assert_eq!(
        h.client
            .set_irqs(trig_fd | IRQ_SET_DATA_NONE, IRQ_MSIX, 0, 1, &[], &[]),
        Err(libc::EINVAL as u32),
        "two data types"
    );
    assert_eq!(
        h.client.set_irqs(trig_fd, IRQ_INTX, 0, 1, &[], &[]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.set_irqs(trig_fd, 9, 0, 1, &[], &[]),
        Err(libc::EINVAL as u32)
    );
    assert!(matches!(h.irqs.trigger(4), Err(Error::InvalidVector(4))));
    // Disable: count 0, DATA_NONE.
    h.client
        .set_irqs(
            IRQ_SET_DATA_NONE | IRQ_SET_ACTION_TRIGGER,
            IRQ_MSIX,
            0,
            0,
            &[],
            &[],
        )
        .unwrap();
    assert!(!h.irqs.enabled());
    assert!(!h.irqs.has_eventfd(0) && !h.irqs.has_eventfd(2));
    h.irqs.trigger(0).unwrap();
    assert_eq!(read_event(&e0), None);
    assert!(h.irqs.is_pending(0));
    // Disabling INTx (never enabled) is accepted, like the kernel does.
    h.client
        .set_irqs(
            IRQ_SET_DATA_NONE | IRQ_SET_ACTION_TRIGGER,
            IRQ_INTX,
            0,
            0,
            &[],
            &[],
        )
        .unwrap();
    // Eventfds are closed when the client goes away.
    let e3 = sys::eventfd().unwrap();
    h.client
        .set_irqs(trig_fd, IRQ_MSIX, 3, 1, &[], &[e3.as_raw_fd()])
        .unwrap();
    let irqs = h.irqs.clone();
    h.finish().unwrap();
    assert!(!irqs.has_eventfd(3));
}

#[test]
fn unknown_commands_keep_stream_in_sync() {
    let mut h = Harness::negotiated();
    assert_eq!(h.client.call(99, &[0xab; 100]), Err(libc::ENOSYS as u32));
    assert_eq!(
        h.client.call(CMD_DEVICE_FEATURE, &[0x55; 40]),
        Err(libc::ENOTSUP as u32)
    );
    assert_eq!(
        h.client.call(CMD_DEVICE_GET_REGION_IO_FDS, &[0; 16]),
        Err(libc::ENOTSUP as u32)
    );
    assert_eq!(
        h.client.call(CMD_DMA_READ, &[0; 16]),
        Err(libc::ENOSYS as u32)
    );
    // An unknown posted command gets no reply.
    h.client.send(77, FLAG_NO_REPLY, &[1; 33], &[]);
    // A stray "reply" from the client is ignored.
    let hdr = Header {
        id: 500,
        command: CMD_DMA_READ,
        size: HEADER_SIZE as u32 + 8,
        flags: FLAG_TYPE_REPLY,
        error: 0,
    };
    let mut raw = hdr.to_bytes().to_vec();
    raw.extend_from_slice(&[0; 8]);
    h.client.send_raw(&raw, &[]);
    // Unexpected fds on a command that takes none are closed, the command still works.
    let e = sys::eventfd().unwrap();
    let p = Client::rw_payload(0, 0, 4);
    let r = h
        .client
        .call_fds(CMD_REGION_READ, &p, &[e.as_raw_fd()])
        .unwrap();
    assert_eq!(r.len(), 20);
    // Truncated payloads of known commands: EINVAL, still in sync.
    assert_eq!(
        h.client.call(CMD_REGION_READ, &[0; 8]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.call(CMD_DMA_MAP, &[0; 31]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.call(CMD_DEVICE_SET_IRQS, &[0; 12]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.call(CMD_DEVICE_GET_REGION_INFO, &[0; 4]),
        Err(libc::EINVAL as u32)
    );
    assert_eq!(
        h.client.call(CMD_DEVICE_GET_INFO, &[]),
        Err(libc::EINVAL as u32)
    );
    let info = h
        .client
        .call(CMD_DEVICE_GET_INFO, &16u32.to_le_bytes())
        .unwrap();
    assert_eq!(u32_at(&info, 8), 9);
    h.finish().unwrap();
}

/// Messages queued before the server reads are taken in bursts (one
/// `recvmsg` for several); descriptors still go to the message they were
/// sent with, before and after messages without any.
#[test]
fn descriptors_stay_with_their_message_in_a_burst() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut client = Client::new(a);
    let ps = sys::page_size();
    let mem = sys::memfd_create("guest-ram", 1 << 20).unwrap();
    let map = |gpa: u64, offset: u64| {
        let mut p = Vec::new();
        p.extend_from_slice(&32u32.to_le_bytes());
        p.extend_from_slice(&(DMA_MAP_FLAG_READ | DMA_MAP_FLAG_WRITE).to_le_bytes());
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&gpa.to_le_bytes());
        p.extend_from_slice(&ps.to_le_bytes());
        p
    };
    let mut version = Vec::new();
    version.extend_from_slice(&[0; 4]);
    version.extend_from_slice(QEMU_CAPS.as_bytes());
    version.push(0);
    // All of it is queued before the server reads anything.
    let mut ids = vec![client.send(CMD_VERSION, 0, &version, &[])];
    client.posted_write(0, 0x100, &[1, 2, 3, 4]);
    ids.push(client.send(CMD_DMA_MAP, 0, &map(0x10_0000, ps), &[mem.as_raw_fd()]));
    client.posted_write(0, 0x104, &[5, 6, 7, 8]);
    ids.push(client.send(CMD_DMA_MAP, 0, &map(0x20_0000, 0), &[]));
    let e = sys::eventfd().unwrap();
    let read = Client::rw_payload(0, 0x100, 8);
    ids.push(client.send(CMD_REGION_READ, 0, &read, &[e.as_raw_fd()]));
    ids.push(client.send(CMD_DMA_MAP, 0, &map(0x30_0000, 2 * ps), &[mem.as_raw_fd()]));

    let mut server = Server::unbound(test_config()).unwrap();
    let dma = server.dma();
    let dev = TestDev::new();
    let d2 = Arc::clone(&dev);
    let thread = thread::spawn(move || server.serve(b, &*d2));
    for (i, id) in ids.into_iter().enumerate() {
        let (hdr, body) = client.recv();
        assert_eq!(hdr.id, id);
        assert_eq!(hdr.flags & FLAG_ERROR, 0, "reply {i}: error {}", hdr.error);
        if hdr.command == CMD_REGION_READ {
            assert_eq!(&body[16..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        }
    }
    // The first and last windows got their memfd, the middle one none.
    dma.write(0x10_0000, b"one").unwrap();
    dma.write(0x30_0000, b"three").unwrap();
    let mut b = [0u8; 5];
    assert!(matches!(
        dma.read(0x20_0000, &mut b),
        Err(Error::NotAccessible { .. })
    ));
    let file = File::from(mem);
    file.read_at(&mut b[..3], ps).unwrap();
    assert_eq!(&b[..3], b"one");
    file.read_at(&mut b, 2 * ps).unwrap();
    assert_eq!(&b, b"three");
    assert_eq!(dev.writes.lock().unwrap().len(), 2);
    drop(client);
    thread.join().unwrap().unwrap();
}

#[test]
fn oversized_message_is_drained() {
    let mut h = Harness::negotiated();
    let big = MAX_MSG_SIZE + 12345;
    let hdr = Header {
        id: 42,
        command: CMD_REGION_WRITE,
        size: big as u32,
        flags: 0,
        error: 0,
    };
    let mut raw = hdr.to_bytes().to_vec();
    raw.resize(big, 0x5a);
    let mut sock = h.client.sock.try_clone().unwrap();
    let writer = thread::spawn(move || std::io::Write::write_all(&mut sock, &raw).unwrap());
    let (rh, body) = h.client.recv();
    writer.join().unwrap();
    assert_eq!(rh.id, 42);
    assert_ne!(rh.flags & FLAG_ERROR, 0);
    assert_eq!(rh.error, libc::E2BIG as u32);
    assert!(body.is_empty());
    assert!(h.dev.writes.lock().unwrap().is_empty());
    // Still in sync.
    assert_eq!(h.client.read32(REGION_CONFIG, 0), 0x10f0_1af4);
    h.finish().unwrap();
}

#[test]
fn truncated_header_ends_session_with_error() {
    let mut h = Harness::negotiated();
    h.client.send_raw(&[1, 0, 4, 0, 16, 0, 0, 0], &[]);
    h.client.sock.shutdown(std::net::Shutdown::Write).unwrap();
    let r = h.join();
    assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
}

#[test]
fn truncated_body_ends_session_with_error() {
    let mut h = Harness::negotiated();
    let hdr = Header {
        id: 7,
        command: CMD_REGION_WRITE,
        size: 64,
        flags: 0,
        error: 0,
    };
    h.client.send_raw(&hdr.to_bytes(), &[]);
    h.client.send_raw(&[0; 10], &[]);
    h.client.sock.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(matches!(h.join(), Err(Error::Protocol(_))));
}

#[test]
fn undersized_header_gets_error_then_disconnect() {
    let mut h = Harness::negotiated();
    let hdr = Header {
        id: 9,
        command: CMD_DEVICE_GET_INFO,
        size: 8,
        flags: 0,
        error: 0,
    };
    h.client.send_raw(&hdr.to_bytes(), &[]);
    let (rh, _) = h.client.recv();
    assert_eq!(rh.id, 9);
    assert_eq!(rh.error, libc::EINVAL as u32);
    // The server closed the connection.
    let mut b = [0u8; 1];
    assert_eq!(std::io::Read::read(&mut &h.client.sock, &mut b).unwrap(), 0);
    assert!(matches!(h.join(), Err(Error::Protocol(_))));
}

#[test]
fn client_disconnect_ends_serve_ok() {
    let h = Harness::negotiated();
    h.finish().unwrap();
    // Also right after connecting, before any message.
    let h = Harness::start();
    h.finish().unwrap();
}

#[test]
fn shutdown_handle_stops_session() {
    let mut h = Harness::negotiated();
    h.stop.shutdown();
    let t = h.thread.take().unwrap();
    assert!(t.join().unwrap().is_ok());
    // The server closed its end.
    let mut b = [0u8; 1];
    assert_eq!(std::io::Read::read(&mut &h.client.sock, &mut b).unwrap(), 0);
}

#[test]
fn listen_run_and_stale_socket() {
    let path = tmp_path("sock");
    // A stale socket file left by a dead process.
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let mut server = Server::bind(&path, test_config()).unwrap();
    let dev = TestDev::new();
    let d2 = Arc::clone(&dev);
    let t = thread::spawn(move || {
        let r = server.run(&*d2);
        (r, server)
    });
    let mut c = Client::new(UnixStream::connect(&path).unwrap());
    c.negotiate();
    c.write(0, 0, &[1, 2, 3, 4]).unwrap();
    drop(c);
    let (r, server) = t.join().unwrap();
    r.unwrap();
    assert_eq!(dev.writes.lock().unwrap().len(), 1);
    drop(server);
    assert!(!path.exists(), "socket removed when the server is dropped");

    // A regular file is not clobbered.
    std::fs::write(&path, b"not a socket").unwrap();
    assert!(Server::bind(&path, test_config()).is_err());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn shutdown_while_waiting_for_client() {
    let path = tmp_path("sock");
    let mut server = Server::bind(&path, test_config()).unwrap();
    let stop = server.shutdown_handle();
    let t = thread::spawn(move || server.run(&*TestDev::new()));
    thread::sleep(Duration::from_millis(50));
    stop.shutdown();
    t.join().unwrap().unwrap();
    assert!(!path.exists());
}

#[test]
fn dma_handle_standalone() {
    // The Dma handle is usable without a server (device unit tests).
    let dma = Dma::new();
    let mem = memfd_create("t", 0x2000).unwrap();
    dma.map(0x1000, 0x2000, Some(mem.as_fd()), 0, true, true)
        .unwrap();
    dma.write_u32(0x1ffc, 5).unwrap();
    assert_eq!(dma.read_u32(0x1ffc).unwrap(), 5);
    assert!(matches!(
        dma.map(0x2000, 0x1000, None, 0, true, true),
        Err(Error::Overlap { .. })
    ));
    // Unaligned file offset (not page aligned) works too.
    dma.map(0x10_0000, 0x100, Some(mem.as_fd()), 0xffc, true, false)
        .unwrap();
    assert_eq!(dma.read_u32(0x10_0000).unwrap(), 5);
    assert!(matches!(
        dma.unmap(0x1000, 0x1000),
        Err(Error::NotMapped { .. })
    ));
    dma.unmap(0x1000, 0x2000).unwrap();
    assert_eq!(dma.regions().len(), 1);
}

/// Throughput of posted writes and of read round trips (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn bench_posted_writes() {
    let mut h = Harness::negotiated();
    let n = 200_000u32;
    let mut sock = h.client.sock.try_clone().unwrap();
    let mut msg = Vec::new();
    for i in 0..n {
        let hdr = Header {
            id: i as u16,
            command: CMD_REGION_WRITE,
            size: (HEADER_SIZE + 20) as u32,
            flags: FLAG_NO_REPLY,
            error: 0,
        };
        msg.extend_from_slice(&hdr.to_bytes());
        msg.extend_from_slice(&Client::rw_payload(0, 0x100, 4));
        msg.extend_from_slice(&i.to_le_bytes());
    }
    let start = std::time::Instant::now();
    let writer = thread::spawn(move || std::io::Write::write_all(&mut sock, &msg).unwrap());
    writer.join().unwrap();
    assert_eq!(h.client.read32(0, 0x100), n - 1);
    let dt = start.elapsed();
    println!(
        "{n} posted writes in {dt:?}: {:.0}/s",
        f64::from(n) / dt.as_secs_f64()
    );
    let start = std::time::Instant::now();
    for _ in 0..10_000 {
        h.client.read32(0, 0x100);
    }
    println!("read round trip: {:?}", start.elapsed() / 10_000);
    h.finish().unwrap();
}
