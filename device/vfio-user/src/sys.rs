// SPDX-License-Identifier: GPL-2.0
//! Thin wrappers around the few system calls that need `unsafe`: fd passing over unix
//! sockets (`sendmsg`/`recvmsg` with `SCM_RIGHTS`), `poll`, `eventfd`, `memfd_create`,
//! `mmap`/`munmap` and `fstat`.
//!
//! Every function here is small and documents why its `unsafe` block is sound; the rest
//! of the crate only uses the safe signatures.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

/// Maximum number of file descriptors accepted in one `recvmsg` call. Larger than what we
/// advertise (`max_msg_fds`) so a client that sends a few too many does not get its
/// descriptors silently truncated by the kernel.
pub(crate) const RECV_MAX_FDS: usize = 32;

/// Result of one `recvmsg` call.
pub(crate) struct Received {
    /// Bytes read into the buffer (0 means end of stream).
    pub(crate) len: usize,
    /// File descriptors received with these bytes.
    pub(crate) fds: Vec<OwnedFd>,
    /// The kernel dropped descriptors because our control buffer was too small.
    pub(crate) fds_truncated: bool,
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Receives bytes (and any `SCM_RIGHTS` descriptors) from a stream socket without
/// blocking (`MSG_DONTWAIT`; `WouldBlock` when no data is queued). Retries on `EINTR`.
pub(crate) fn recv_with_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    // Control buffer sized for RECV_MAX_FDS descriptors; u64 elements keep it aligned for
    // `cmsghdr`.
    const CMSG_WORDS: usize = (RECV_MAX_FDS * 4 + 64) / 8;
    let mut cmsg_buf = [0u64; CMSG_WORDS];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is a valid (empty) value of this plain C struct.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg_buf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg_buf) as _;
        // SAFETY: `msg` points at a live iovec covering `buf` and at a live control buffer
        // of the stated length; the kernel writes only within those bounds.
        let ret = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
            )
        };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        let mut fds = Vec::new();
        // SAFETY: the CMSG_* helpers walk the control buffer the kernel just filled, using
        // the `msg_controllen` it reported; every SCM_RIGHTS payload holds `c_int`s that
        // are new descriptors owned by this process, so wrapping each in OwnedFd exactly
        // once is correct. Reads use read_unaligned because CMSG_DATA is only byte-aligned
        // in principle.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let hdr_len = libc::CMSG_LEN(0) as usize;
                    let n = ((*cmsg).cmsg_len as usize).saturating_sub(hdr_len)
                        / std::mem::size_of::<libc::c_int>();
                    for i in 0..n {
                        let fd =
                            ptr::read_unaligned(data.add(i * std::mem::size_of::<libc::c_int>())
                                as *const libc::c_int);
                        if fd >= 0 {
                            fds.push(OwnedFd::from_raw_fd(fd));
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        return Ok(Received {
            len: ret as usize,
            fds,
            fds_truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
        });
    }
}

/// Sends `buf` with `fds` attached (as `SCM_RIGHTS`) on the first chunk; the rest of the
/// buffer is sent without descriptors. Uses `MSG_NOSIGNAL` so a vanished peer yields
/// `EPIPE` instead of a signal.
pub(crate) fn send_with_fds(sock: BorrowedFd<'_>, buf: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > RECV_MAX_FDS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    const CMSG_WORDS: usize = (RECV_MAX_FDS * 4 + 64) / 8;
    let mut cmsg_buf = [0u64; CMSG_WORDS];
    let mut sent = 0usize;
    let mut first = true;
    while sent < buf.len() || first {
        let rest = &buf[sent..];
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: an all-zero msghdr is a valid (empty) value of this plain C struct.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if first && !fds.is_empty() {
            let payload = std::mem::size_of_val(fds) as u32;
            // SAFETY: CMSG_SPACE only computes a size; the buffer is large enough for
            // RECV_MAX_FDS descriptors (checked above), CMSG_FIRSTHDR returns a pointer
            // into it, and the descriptor array is copied within CMSG_LEN(payload) bytes.
            unsafe {
                msg.msg_control = cmsg_buf.as_mut_ptr().cast();
                msg.msg_controllen = libc::CMSG_SPACE(payload) as _;
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
                ptr::copy_nonoverlapping(
                    fds.as_ptr().cast::<u8>(),
                    libc::CMSG_DATA(cmsg),
                    payload as usize,
                );
            }
        }
        // SAFETY: `msg` references a live iovec over `rest` and (optionally) the control
        // buffer initialised above; sendmsg only reads from them.
        let ret = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        first = false;
        sent += ret as usize;
        if buf.is_empty() {
            break;
        }
    }
    Ok(())
}

/// Waits until one of `fds` is readable (or hung up). Returns the index of the first
/// ready descriptor. Retries on `EINTR`.
pub(crate) fn poll_readable(fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `pfds` is a live, correctly sized array of pollfd structs.
        let ret = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if let Some(i) = pfds.iter().position(|p| p.revents != 0) {
            return Ok(i);
        }
    }
}

/// Creates a non-blocking, close-on-exec eventfd with counter 0.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; on success it returns a new descriptor that we
    // own exclusively.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` is a freshly created descriptor not owned by anything else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `value` to an eventfd counter.
pub(crate) fn eventfd_write(fd: BorrowedFd<'_>, value: u64) -> io::Result<()> {
    let bytes = value.to_ne_bytes();
    loop {
        // SAFETY: writes 8 bytes from a live local buffer to a descriptor we borrow.
        let ret = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if ret == 8 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if ret < 0 && err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if ret < 0 {
            return Err(err);
        }
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short eventfd write",
        ));
    }
}

/// Reads (and resets) an eventfd counter. Returns `Ok(None)` if the counter is zero and
/// the descriptor is non-blocking.
pub fn eventfd_read(fd: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    let mut bytes = [0u8; 8];
    loop {
        // SAFETY: reads at most 8 bytes into a live local buffer.
        let ret = unsafe { libc::read(fd.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        if ret == 8 {
            return Ok(Some(u64::from_ne_bytes(bytes)));
        }
        let err = io::Error::last_os_error();
        if ret < 0 && err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if ret < 0 && err.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        if ret < 0 {
            return Err(err);
        }
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short eventfd read",
        ));
    }
}

/// Creates a memfd of `size` bytes (useful for tests and for device-side unit tests that
/// need "guest memory").
pub fn memfd_create(name: &str, size: u64) -> io::Result<OwnedFd> {
    let cname = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let fd = cvt(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: `fd` is a freshly created descriptor not owned by anything else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let size =
        libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain syscall on a descriptor we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size) })?;
    Ok(fd)
}

/// Size of a regular file (including memfds), or `None` for other kinds of descriptor.
pub(crate) fn regular_file_size(fd: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable stat buffer.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        Ok(Some(st.st_size as u64))
    } else {
        Ok(None)
    }
}

/// System page size.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf takes no pointers.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ps <= 0 {
        4096
    } else {
        ps as u64
    }
}

/// A shared mapping of (part of) a file; unmapped on drop.
#[derive(Debug)]
pub(crate) struct MmapRegion {
    map_base: *mut libc::c_void,
    map_len: usize,
    /// Start of the requested range (`map_base` plus the page-offset adjustment).
    ptr: *mut u8,
    len: usize,
}

// SAFETY: MmapRegion only holds the address of a MAP_SHARED mapping that it owns; the
// mapping is valid from any thread and is only unmapped in Drop (requiring exclusive
// ownership). Concurrent accesses to the bytes go through raw pointers (never Rust
// references), like accesses by the guest itself.
unsafe impl Send for MmapRegion {}
// SAFETY: see the Send impl; &MmapRegion only exposes the raw address and length.
unsafe impl Sync for MmapRegion {}

impl MmapRegion {
    /// Maps `len` bytes of `fd` at `offset` with `MAP_SHARED`.
    pub(crate) fn new(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        writable: bool,
    ) -> io::Result<Self> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        if len == 0 {
            return Err(einval());
        }
        let ps = page_size();
        let delta = offset % ps;
        let aligned = offset - delta;
        let map_len = len.checked_add(delta).ok_or_else(einval)?;
        let map_len = usize::try_from(map_len).map_err(|_| einval())?;
        let file_off = libc::off_t::try_from(aligned).map_err(|_| einval())?;
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        // SAFETY: we request a fresh mapping at a kernel-chosen address (NULL hint), so no
        // existing memory is affected; the result is checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                file_off,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MmapRegion {
            map_base: base,
            map_len,
            // `delta < page size <= map_len`, so this stays inside the mapping.
            ptr: base.cast::<u8>().wrapping_add(delta as usize),
            len: len as usize,
        })
    }

    /// Start of the mapped range.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length of the mapped range.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // SAFETY: `map_base`/`map_len` describe a mapping created by `new` and owned by
        // this value; nobody can use it after drop.
        unsafe {
            libc::munmap(self.map_base, self.map_len);
        }
    }
}
