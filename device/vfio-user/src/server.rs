// SPDX-License-Identifier: GPL-2.0
//! The socket server: accepts the client, reads messages, dispatches them and replies.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log::{debug, info, warn};

use crate::dma::Dma;
use crate::irq::Irqs;
use crate::pci::{ConfigSpace, DeviceConfig};
use crate::proto::*;
use crate::rx::{ReadStatus, Rx, Wait};
use crate::sys;
use crate::{Device, Error};

/// Cloneable handle that makes [`Server::run`] return `Ok(())` (from any thread). The
/// request is sticky: once shut down, later `run` calls return at once.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    fd: Arc<OwnedFd>,
    flag: Arc<AtomicBool>,
}

impl ShutdownHandle {
    /// Asks the server to stop. The connection (if any) is closed after the message being
    /// processed, DMA mappings are dropped and interrupt eventfds closed.
    pub fn shutdown(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Err(e) = sys::eventfd_write(self.fd.as_fd(), 1) {
            warn!("vfio-user: shutdown request failed: {e}");
        }
    }
}

/// A received message.
struct Msg {
    hdr: Header,
    payload: Vec<u8>,
    fds: Vec<OwnedFd>,
    fds_truncated: bool,
    oversized: bool,
}

enum Incoming {
    Msg(Msg),
    Eof,
    Shutdown,
}

/// Result of one request: a reply payload or an errno.
type Reply = Result<Vec<u8>, i32>;

/// A vfio-user server for one PCI device. See the crate documentation for an example.
#[derive(Debug)]
pub struct Server {
    listener: Option<UnixListener>,
    path: Option<PathBuf>,
    config: DeviceConfig,
    cfg_space: ConfigSpace,
    dma: Dma,
    irqs: Irqs,
    shutdown_fd: Arc<OwnedFd>,
    shutdown_flag: Arc<AtomicBool>,
    write_multiple: bool,
    negotiated: bool,
    rx: Rx,
}

impl Server {
    /// Validates `config`, removes a stale socket file at `path` (only if it is a socket;
    /// any other existing file is an error) and listens there.
    pub fn bind(path: impl AsRef<Path>, config: DeviceConfig) -> Result<Server, Error> {
        let path = path.as_ref();
        let mut server = Server::unbound(config)?;
        match fs::symlink_metadata(path) {
            Ok(md) if md.file_type().is_socket() => {
                info!("vfio-user: removing stale socket {}", path.display());
                fs::remove_file(path)?;
            }
            Ok(_) => {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        server.listener = Some(UnixListener::bind(path)?);
        server.path = Some(path.to_path_buf());
        Ok(server)
    }

    /// Creates a server without a listening socket, for use with [`Server::serve`] on an
    /// already connected stream (socket pairs, socket activation, tests).
    pub fn unbound(config: DeviceConfig) -> Result<Server, Error> {
        config.validate()?;
        let vectors = config.msix.map_or(0, |m| m.vectors);
        Ok(Server {
            listener: None,
            path: None,
            cfg_space: ConfigSpace::new(&config),
            config,
            dma: Dma::new(),
            irqs: Irqs::new(vectors),
            shutdown_fd: Arc::new(sys::eventfd()?),
            shutdown_flag: Arc::new(AtomicBool::new(false)),
            write_multiple: false,
            negotiated: false,
            rx: Rx::new(),
        })
    }

    /// Advertise `write_multiple` so the client may coalesce posted writes into
    /// `VFIO_USER_REGION_WRITE_MULTI` (QEMU only does so when its send queue is long).
    /// Off by default; the message is handled either way.
    pub fn set_write_multiple(&mut self, enable: bool) {
        self.write_multiple = enable;
    }

    /// The device description.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// A handle to the DMA mapping table for device workers.
    pub fn dma(&self) -> Dma {
        self.dma.clone()
    }

    /// A handle for raising MSI-X interrupts from device workers.
    pub fn irqs(&self) -> Irqs {
        self.irqs.clone()
    }

    /// A handle that stops [`Server::run`] / [`Server::serve`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            fd: Arc::clone(&self.shutdown_fd),
            flag: Arc::clone(&self.shutdown_flag),
        }
    }

    /// Waits for one client on the listening socket and serves it on the calling thread.
    /// Returns `Ok(())` when the client disconnects or on shutdown, an error for socket
    /// failures and for unrecoverable protocol violations (the connection is then closed).
    pub fn run<D: Device + ?Sized>(&mut self, device: &D) -> Result<(), Error> {
        let listener = self
            .listener
            .as_ref()
            .ok_or_else(|| Error::Protocol("server has no listening socket".into()))?;
        if self.shutdown_flag.load(Ordering::SeqCst) {
            return Ok(());
        }
        let ready = sys::poll_readable(&[listener.as_fd(), self.shutdown_fd.as_fd()])?;
        if ready == 1 {
            return Ok(());
        }
        let (stream, _) = listener.accept()?;
        info!("vfio-user: client connected");
        self.serve(stream, device)
    }

    /// Serves an already connected client until it disconnects (see [`Server::run`]).
    /// On return all DMA mappings are dropped and interrupt eventfds closed; the device
    /// and config space state is kept.
    pub fn serve<D: Device + ?Sized>(
        &mut self,
        stream: UnixStream,
        device: &D,
    ) -> Result<(), Error> {
        self.negotiated = false;
        self.rx.reset();
        // Replies are written with blocking sends; reads never block (MSG_DONTWAIT + poll).
        let result = match stream.set_nonblocking(false) {
            Ok(()) => self.serve_loop(&stream, device),
            Err(e) => Err(e.into()),
        };
        self.dma.unmap_all();
        self.irqs.disable();
        match &result {
            Ok(()) => info!("vfio-user: client session ended"),
            Err(e) => warn!("vfio-user: client session ended with error: {e}"),
        }
        result
    }

    fn serve_loop<D: Device + ?Sized>(
        &mut self,
        stream: &UnixStream,
        device: &D,
    ) -> Result<(), Error> {
        loop {
            let mut msg = match self.recv(stream)? {
                Incoming::Msg(m) => m,
                Incoming::Eof | Incoming::Shutdown => return Ok(()),
            };
            match msg.hdr.flags & FLAG_TYPE_MASK {
                FLAG_TYPE_COMMAND => {}
                FLAG_TYPE_REPLY => {
                    debug!("vfio-user: ignoring unexpected reply id {}", msg.hdr.id);
                    continue;
                }
                t => {
                    warn!("vfio-user: ignoring message with unknown type {t}");
                    continue;
                }
            }
            let reply = self.dispatch(&mut msg, device);
            if msg.hdr.flags & FLAG_NO_REPLY != 0 {
                if let Err(errno) = reply {
                    debug!(
                        "vfio-user: no-reply command {} failed with errno {errno}",
                        msg.hdr.command
                    );
                }
                continue;
            }
            if let Err(e) = self.send_reply(stream, msg.hdr, reply) {
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) {
                    return Ok(());
                }
                return Err(e.into());
            }
        }
    }

    fn send_reply(&self, stream: &UnixStream, req: Header, reply: Reply) -> io::Result<()> {
        let (payload, flags, error) = match reply {
            Ok(p) => (p, FLAG_TYPE_REPLY, 0),
            Err(errno) => (Vec::new(), FLAG_TYPE_REPLY | FLAG_ERROR, errno as u32),
        };
        let hdr = Header {
            id: req.id,
            command: req.command,
            size: (HEADER_SIZE + payload.len()) as u32,
            flags,
            error,
        };
        let mut buf = Vec::with_capacity(HEADER_SIZE + payload.len());
        buf.extend_from_slice(&hdr.to_bytes());
        buf.extend_from_slice(&payload);
        sys::send_with_fds(stream.as_fd(), &buf, &[])
    }

    fn recv(&mut self, stream: &UnixStream) -> Result<Incoming, Error> {
        // Messages served from the buffer do not reach the check in
        // `Rx::read_exact`.
        if self.shutdown_flag.load(Ordering::Relaxed) {
            return Ok(Incoming::Shutdown);
        }
        let w = Wait {
            stream: stream.as_fd(),
            shutdown_fd: self.shutdown_fd.as_fd(),
            shutdown: &self.shutdown_flag,
        };
        let rx = &mut self.rx;
        let mut hbuf = [0u8; HEADER_SIZE];
        match rx.read_exact(&w, &mut hbuf)? {
            ReadStatus::Full => {}
            ReadStatus::Eof(0) => return Ok(Incoming::Eof),
            ReadStatus::Eof(n) => {
                return Err(Error::Protocol(format!(
                    "connection closed inside a message header ({n} of {HEADER_SIZE} bytes)"
                )))
            }
            ReadStatus::Shutdown => return Ok(Incoming::Shutdown),
        }
        let hdr = Header::from_bytes(&hbuf);
        let size = hdr.size as usize;
        if size < HEADER_SIZE {
            // The message boundary is lost: report it and drop the connection.
            let _ = self.send_reply(stream, hdr, Err(libc::EINVAL));
            return Err(Error::Protocol(format!(
                "message size {size} smaller than the header (id {}, command {})",
                hdr.id, hdr.command
            )));
        }
        let body = size - HEADER_SIZE;
        let mut msg = Msg {
            hdr,
            payload: Vec::new(),
            fds: Vec::new(),
            fds_truncated: false,
            oversized: false,
        };
        let status = if size > MAX_MSG_SIZE {
            // Never allocate what the client asks for; skip the body in chunks so the
            // stream stays in sync, then answer E2BIG.
            msg.oversized = true;
            let mut chunk = vec![0u8; 64 * 1024];
            let mut left = body;
            let mut status = ReadStatus::Full;
            while left > 0 {
                let n = left.min(chunk.len());
                status = rx.read_exact(&w, &mut chunk[..n])?;
                if !matches!(status, ReadStatus::Full) {
                    break;
                }
                left -= n;
            }
            status
        } else {
            msg.payload = vec![0u8; body];
            rx.read_exact(&w, &mut msg.payload)?
        };
        match status {
            ReadStatus::Full => {}
            ReadStatus::Eof(_) => {
                return Err(Error::Protocol(format!(
                    "connection closed inside message id {} (command {}, size {size})",
                    hdr.id, hdr.command
                )))
            }
            ReadStatus::Shutdown => return Ok(Incoming::Shutdown),
        }
        (msg.fds, msg.fds_truncated) = rx.take_fds();
        Ok(Incoming::Msg(msg))
    }

    fn dispatch<D: Device + ?Sized>(&mut self, msg: &mut Msg, device: &D) -> Reply {
        let hdr = msg.hdr;
        if msg.oversized {
            warn!(
                "vfio-user: command {} of {} bytes is too large",
                hdr.command, hdr.size
            );
            return Err(libc::E2BIG);
        }
        if msg.fds_truncated {
            warn!(
                "vfio-user: too many descriptors with command {}",
                hdr.command
            );
            return Err(libc::EINVAL);
        }
        if hdr.command != CMD_VERSION && !self.negotiated {
            warn!(
                "vfio-user: command {} before version negotiation",
                hdr.command
            );
            return Err(libc::EINVAL);
        }
        let p = &msg.payload;
        let r = match hdr.command {
            CMD_VERSION => self.version(p),
            CMD_DMA_MAP => self.dma_map(p, &msg.fds),
            CMD_DMA_UNMAP => self.dma_unmap(p, device),
            CMD_DEVICE_GET_INFO => self.device_info(p),
            CMD_DEVICE_GET_REGION_INFO => self.region_info(p),
            CMD_DEVICE_GET_IRQ_INFO => self.irq_info(p),
            CMD_DEVICE_SET_IRQS => self.set_irqs(p, std::mem::take(&mut msg.fds)),
            CMD_REGION_READ => self.region_read(p, device),
            CMD_REGION_WRITE => self.region_write(p, device),
            CMD_REGION_WRITE_MULTI => self.region_write_multi(p, device),
            CMD_DEVICE_RESET => {
                self.cfg_space.reset();
                self.irqs.reset();
                device.reset();
                Ok(Vec::new())
            }
            CMD_DEVICE_GET_REGION_IO_FDS | CMD_DEVICE_FEATURE => Err(libc::ENOTSUP),
            _ => Err(libc::ENOSYS),
        };
        if let Err(errno) = r {
            debug!(
                "vfio-user: command {} (id {}) failed: errno {errno}",
                hdr.command, hdr.id
            );
        }
        r
    }

    fn version(&mut self, p: &[u8]) -> Reply {
        let r = Reader::new(p);
        let (Some(major), Some(minor)) = (r.u16(0), r.u16(2)) else {
            return Err(libc::EINVAL);
        };
        if major != VERSION_MAJOR {
            warn!("vfio-user: client proposes unsupported version {major}.{minor}");
            return Err(libc::ENOTSUP);
        }
        let json = &p[4..];
        let json = &json[..json.iter().position(|&b| b == 0).unwrap_or(json.len())];
        if !json.iter().all(|b| b.is_ascii_whitespace()) {
            let caps = parse_client_caps(json).map_err(|e| {
                warn!("vfio-user: bad client capabilities: {e}");
                libc::EINVAL
            })?;
            debug!("vfio-user: client capabilities: {caps}");
        }
        self.negotiated = true;
        // QEMU receives our reply into the buffer of its request, so the reply must not be
        // longer than the request: fall back to shorter capability strings if needed.
        let full = format!(
            "{{\"capabilities\":{{\"max_msg_fds\":{MAX_MSG_FDS},\"max_data_xfer_size\":{MAX_DATA_XFER},\"pgsizes\":{},\"max_dma_maps\":{MAX_DMA_MAPS}{}}}}}",
            sys::page_size(),
            if self.write_multiple { ",\"write_multiple\":true" } else { "" }
        );
        let short = format!("{{\"capabilities\":{{\"max_msg_fds\":{MAX_MSG_FDS}}}}}");
        // Our minor version (0) is never above the client's proposal.
        let mut out = Writer::default().u16(VERSION_MAJOR).u16(VERSION_MINOR).buf;
        for cand in [full.as_str(), short.as_str(), "{}"] {
            if 4 + cand.len() < p.len() {
                out.extend_from_slice(cand.as_bytes());
                out.push(0);
                break;
            }
        }
        Ok(out)
    }

    fn device_info(&self, p: &[u8]) -> Reply {
        let argsz = Reader::new(p).u32(0).ok_or(libc::EINVAL)?;
        if argsz < 16 {
            return Err(libc::EINVAL);
        }
        Ok(Writer::default()
            .u32(16)
            .u32(DEVICE_FLAGS_RESET | DEVICE_FLAGS_PCI)
            .u32(NUM_REGIONS)
            .u32(NUM_IRQS)
            .buf)
    }

    fn region_info(&self, p: &[u8]) -> Reply {
        let r = Reader::new(p);
        let (Some(argsz), Some(index)) = (r.u32(0), r.u32(8)) else {
            return Err(libc::EINVAL);
        };
        if argsz < 32 {
            return Err(libc::EINVAL);
        }
        let rw = REGION_INFO_FLAG_READ | REGION_INFO_FLAG_WRITE;
        let (flags, size) = match index {
            REGION_BAR0..=REGION_BAR5 => match self.config.bar(index as u8) {
                Some(b) => (rw, b.size),
                None => (0, 0),
            },
            REGION_CONFIG => (rw, self.cfg_space.len() as u64),
            REGION_ROM | REGION_VGA => (0, 0),
            _ => return Err(libc::EINVAL),
        };
        Ok(Writer::default()
            .u32(32)
            .u32(flags)
            .u32(index)
            .u32(0) // cap_offset
            .u64(size)
            .u64(0) // offset (only meaningful for mmap-able regions)
            .buf)
    }

    fn irq_info(&self, p: &[u8]) -> Reply {
        let r = Reader::new(p);
        let (Some(argsz), Some(index)) = (r.u32(0), r.u32(8)) else {
            return Err(libc::EINVAL);
        };
        if argsz < 16 {
            return Err(libc::EINVAL);
        }
        let (flags, count) = match index {
            IRQ_INTX => (
                IRQ_INFO_EVENTFD | IRQ_INFO_MASKABLE | IRQ_INFO_AUTOMASKED,
                0,
            ),
            IRQ_MSI => (IRQ_INFO_EVENTFD | IRQ_INFO_NORESIZE, 0),
            // Resizable (no NORESIZE): QEMU then hands over one eventfd per vector as the
            // guest unmasks it instead of re-enabling the whole set each time.
            IRQ_MSIX => (IRQ_INFO_EVENTFD, u32::from(self.irqs.vectors())),
            // Like the kernel for a conventional PCI function: no error index (QEMU then
            // skips AER setup quietly; a count of 0 makes it warn), no request IRQ.
            IRQ_ERR => return Err(libc::EINVAL),
            IRQ_REQ => (IRQ_INFO_EVENTFD, 0),
            _ => return Err(libc::EINVAL),
        };
        Ok(Writer::default()
            .u32(16)
            .u32(flags)
            .u32(index)
            .u32(count)
            .buf)
    }

    fn set_irqs(&mut self, p: &[u8], fds: Vec<OwnedFd>) -> Reply {
        let r = Reader::new(p);
        let (Some(_argsz), Some(flags), Some(index), Some(start), Some(count)) =
            (r.u32(0), r.u32(4), r.u32(8), r.u32(12), r.u32(16))
        else {
            return Err(libc::EINVAL);
        };
        let data = flags & IRQ_SET_DATA_MASK;
        let action = flags & IRQ_SET_ACTION_MASK_ALL;
        if flags & !(IRQ_SET_DATA_MASK | IRQ_SET_ACTION_MASK_ALL) != 0
            || !data.is_power_of_two()
            || !action.is_power_of_two()
        {
            return Err(libc::EINVAL);
        }
        if data != IRQ_SET_DATA_EVENTFD && !fds.is_empty() {
            return Err(libc::EINVAL);
        }
        let nvec = if index == IRQ_MSIX {
            u32::from(self.irqs.vectors())
        } else if index < NUM_IRQS {
            0
        } else {
            return Err(libc::EINVAL);
        };
        // count 0 with DATA_NONE (or an empty eventfd set) + TRIGGER disables the index.
        if count == 0 {
            if action == IRQ_SET_ACTION_TRIGGER && data != IRQ_SET_DATA_BOOL && fds.is_empty() {
                if index == IRQ_MSIX {
                    self.irqs.disable();
                }
                return Ok(Vec::new());
            }
            return Err(libc::EINVAL);
        }
        match start.checked_add(count) {
            Some(end) if end <= nvec => {}
            _ => return Err(libc::EINVAL),
        }
        let vectors = start as u16..(start + count) as u16;
        let bools = if data == IRQ_SET_DATA_BOOL {
            Some(r.bytes(20, count as usize).ok_or(libc::EINVAL)?)
        } else {
            None
        };
        let selected = |v: u16| bools.is_none_or(|b| b[usize::from(v - start as u16)] != 0);
        let errno = |e: Error| e.errno();
        match (action, data) {
            (IRQ_SET_ACTION_TRIGGER, IRQ_SET_DATA_EVENTFD) => {
                if fds.is_empty() {
                    // QEMU's "enable MSI-X" message (count 1, no fd) and per-vector
                    // de-assignment.
                    self.irqs.set_enabled();
                    for v in vectors {
                        self.irqs.set_eventfd(v, None).map_err(errno)?;
                    }
                } else if fds.len() == count as usize {
                    for (v, fd) in vectors.zip(fds) {
                        self.irqs.set_eventfd(v, Some(fd)).map_err(errno)?;
                    }
                } else {
                    return Err(libc::EINVAL);
                }
            }
            (IRQ_SET_ACTION_TRIGGER, _) => {
                for v in vectors.filter(|&v| selected(v)) {
                    self.irqs.trigger(v).map_err(errno)?;
                }
            }
            (
                IRQ_SET_ACTION_MASK | IRQ_SET_ACTION_UNMASK,
                IRQ_SET_DATA_NONE | IRQ_SET_DATA_BOOL,
            ) => {
                let masked = action == IRQ_SET_ACTION_MASK;
                for v in vectors.filter(|&v| selected(v)) {
                    self.irqs.set_masked(v, masked).map_err(errno)?;
                }
            }
            _ => return Err(libc::EINVAL),
        }
        Ok(Vec::new())
    }

    /// Validates a region access and returns the region kind.
    fn check_access(&self, region: u32, offset: u64, count: usize) -> Result<Region, i32> {
        if count > MAX_DATA_XFER {
            return Err(libc::E2BIG);
        }
        let end = offset.checked_add(count as u64).ok_or(libc::EINVAL)?;
        match region {
            REGION_BAR0..=REGION_BAR5 => {
                let bar = self.config.bar(region as u8).ok_or(libc::EINVAL)?;
                if end > bar.size {
                    return Err(libc::EINVAL);
                }
                if let Some(m) = &self.config.msix {
                    let pba = u64::from(m.pba_offset);
                    if m.pba_bar as u32 == region && offset >= pba && end <= pba + m.pba_size() {
                        return Ok(Region::Pba((offset - pba) as usize));
                    }
                }
                Ok(Region::Bar(region as u8))
            }
            REGION_CONFIG if end <= self.cfg_space.len() as u64 => Ok(Region::Config),
            _ => Err(libc::EINVAL),
        }
    }

    fn region_read<D: Device + ?Sized>(&self, p: &[u8], device: &D) -> Reply {
        let r = Reader::new(p);
        let (Some(offset), Some(region), Some(count)) = (r.u64(0), r.u32(8), r.u32(12)) else {
            return Err(libc::EINVAL);
        };
        let kind = self.check_access(region, offset, count as usize)?;
        let mut out = Writer::default().u64(offset).u32(region).u32(count).buf;
        out.resize(16 + count as usize, 0);
        let data = &mut out[16..];
        match kind {
            Region::Bar(bar) => device.bar_read(bar, offset, data),
            Region::Pba(off) => self.irqs.pba_bytes(off, data),
            Region::Config => self.cfg_space.read(offset as usize, data),
        }
        Ok(out)
    }

    fn write_one<D: Device + ?Sized>(
        &mut self,
        region: u32,
        offset: u64,
        data: &[u8],
        device: &D,
    ) -> Result<(), i32> {
        match self.check_access(region, offset, data.len())? {
            Region::Bar(bar) => device.bar_write(bar, offset, data),
            Region::Pba(_) => debug!("vfio-user: dropping write to the MSI-X PBA"),
            Region::Config => {
                self.cfg_space.write(offset as usize, data);
                device.config_written(offset as u16, data, self.cfg_space.command());
            }
        }
        Ok(())
    }

    fn region_write<D: Device + ?Sized>(&mut self, p: &[u8], device: &D) -> Reply {
        let r = Reader::new(p);
        let (Some(offset), Some(region), Some(count)) = (r.u64(0), r.u32(8), r.u32(12)) else {
            return Err(libc::EINVAL);
        };
        let data = r.bytes(16, count as usize).ok_or(libc::EINVAL)?;
        self.write_one(region, offset, data, device)?;
        Ok(Writer::default().u64(offset).u32(region).u32(count).buf)
    }

    fn region_write_multi<D: Device + ?Sized>(&mut self, p: &[u8], device: &D) -> Reply {
        let r = Reader::new(p);
        let wr_cnt = r.u64(0).ok_or(libc::EINVAL)?;
        let max = (p.len().saturating_sub(8) / WRITE_MULTI_ENTRY) as u64;
        if wr_cnt > max {
            return Err(libc::EINVAL);
        }
        for i in 0..wr_cnt as usize {
            let base = 8 + i * WRITE_MULTI_ENTRY;
            let (Some(offset), Some(region), Some(count)) =
                (r.u64(base), r.u32(base + 8), r.u32(base + 12))
            else {
                return Err(libc::EINVAL);
            };
            if count > 8 {
                return Err(libc::EINVAL);
            }
            let data = r.bytes(base + 16, count as usize).ok_or(libc::EINVAL)?;
            self.write_one(region, offset, data, device)?;
        }
        Ok(Writer::default().u64(wr_cnt).buf)
    }

    fn dma_map(&mut self, p: &[u8], fds: &[OwnedFd]) -> Reply {
        let r = Reader::new(p);
        let (Some(flags), Some(offset), Some(gpa), Some(size)) =
            (r.u32(4), r.u64(8), r.u64(16), r.u64(24))
        else {
            return Err(libc::EINVAL);
        };
        if fds.len() > 1 {
            return Err(libc::EINVAL);
        }
        let readable = flags & DMA_MAP_FLAG_READ != 0;
        let writable = flags & DMA_MAP_FLAG_WRITE != 0;
        let fd = fds.first().map(|f| f.as_fd());
        self.dma
            .map(gpa, size, fd, offset, readable, writable)
            .map_err(|e| {
                warn!("vfio-user: DMA_MAP {gpa:#x}+{size:#x} failed: {e}");
                e.errno()
            })?;
        debug!(
            "vfio-user: DMA_MAP {gpa:#x}+{size:#x} fd={} offset={offset:#x} flags={flags:#x}",
            fd.is_some()
        );
        Ok(Vec::new())
    }

    fn dma_unmap<D: Device + ?Sized>(&mut self, p: &[u8], device: &D) -> Reply {
        let r = Reader::new(p);
        let (Some(flags), Some(gpa), Some(size)) = (r.u32(4), r.u64(8), r.u64(16)) else {
            return Err(libc::EINVAL);
        };
        if flags & !DMA_UNMAP_FLAG_ALL != 0 {
            return Err(libc::ENOTSUP);
        }
        if flags & DMA_UNMAP_FLAG_ALL != 0 {
            // The kernel wants iova = size = 0 here; be lenient and ignore them.
            let regions = self.dma.regions();
            self.dma.unmap_all();
            for reg in regions {
                device.dma_unmapped(reg.gpa, reg.size);
            }
        } else {
            self.dma.unmap(gpa, size).map_err(|e| {
                warn!("vfio-user: DMA_UNMAP failed: {e}");
                e.errno()
            })?;
            device.dma_unmapped(gpa, size);
        }
        // The reply echoes the request's DMA entry.
        Ok(p[..24].to_vec())
    }
}

/// Kind of region an access goes to.
enum Region {
    Bar(u8),
    /// Byte offset inside the MSI-X PBA.
    Pba(usize),
    Config,
}

/// Parses the client's version JSON; returns a printable summary. Unknown keys and
/// unexpected value types of optional keys are ignored.
fn parse_client_caps(json: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(json).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let obj = v.as_object().ok_or("capabilities JSON is not an object")?;
    let Some(caps) = obj.get("capabilities") else {
        return Ok("none".into());
    };
    let caps = caps
        .as_object()
        .ok_or("\"capabilities\" is not an object")?;
    let num = |k: &str| caps.get(k).and_then(|v| v.as_u64());
    Ok(format!(
        "max_msg_fds={:?} max_data_xfer_size={:?} pgsizes={:?} max_dma_maps={:?} write_multiple={:?} migration={}",
        num("max_msg_fds"),
        num("max_data_xfer_size"),
        num("pgsizes"),
        num("max_dma_maps"),
        caps.get("write_multiple").and_then(|v| v.as_bool()),
        caps.contains_key("migration"),
    ))
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = fs::remove_file(path);
        }
    }
}
