// SPDX-License-Identifier: GPL-2.0
//! The receive side of a client connection: one `recvmsg` per wake-up.
//!
//! A posted write (a doorbell) is one small message. Read as a header and
//! then a body, with a final `recvmsg` to find the socket empty before
//! sleeping in `poll`, each one cost four system calls. Here the bytes
//! come in through a buffer, a burst of messages with one `recvmsg`, and
//! a read that found the socket empty waits in `poll` before it tries
//! again: a lone doorbell costs a `poll` and a `recvmsg`.
//!
//! Descriptors (`SCM_RIGHTS`) travel with the byte stream: Linux hands
//! over a unix stream socket's descriptors with the first bytes of the
//! `sendmsg` that sent them, and a `recvmsg` that returns such bytes
//! returns nothing after the socket buffer that carried them (it stops
//! there). So the descriptors one `recvmsg` returns belong to the message
//! that holds the last byte it returned, if the client sends each message
//! with its descriptors in one `sendmsg`, as QEMU does. Each set is kept
//! with that position until its message is complete.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::proto::MAX_MSG_FDS;
use crate::sys;
use crate::Error;

/// Size of the receive buffer. A message body longer than half of it is
/// read straight into the message's own buffer instead.
const RX_BUF: usize = 16 * 1024;

/// How a read ended.
pub(crate) enum ReadStatus {
    /// The destination is full.
    Full,
    /// End of stream after this many bytes of the destination.
    Eof(usize),
    /// Shutdown requested.
    Shutdown,
}

/// What a read waits on: the connection, and the server's shutdown
/// eventfd and flag.
pub(crate) struct Wait<'a> {
    pub(crate) stream: BorrowedFd<'a>,
    pub(crate) shutdown_fd: BorrowedFd<'a>,
    pub(crate) shutdown: &'a AtomicBool,
}

/// Bytes received from the client and not yet taken, and the descriptors
/// that came with them.
pub(crate) struct Rx {
    buf: Box<[u8]>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes received on this connection.
    received: u64,
    /// Descriptors received, each set with the stream position just past
    /// the last byte of the `recvmsg` that brought it, and whether the
    /// kernel dropped some of that set (`MSG_CTRUNC`).
    fds: VecDeque<(u64, Vec<OwnedFd>, bool)>,
    /// The last `recvmsg` found the socket empty or emptied it: the next
    /// read waits in `poll` first.
    drained: bool,
}

impl std::fmt::Debug for Rx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rx")
            .field("buffered", &(self.end - self.start))
            .field("received", &self.received)
            .field("fd_sets", &self.fds.len())
            .field("drained", &self.drained)
            .finish()
    }
}

impl Rx {
    pub(crate) fn new() -> Self {
        Self {
            buf: vec![0; RX_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            received: 0,
            fds: VecDeque::new(),
            drained: false,
        }
    }

    /// Forgets everything of the last connection.
    pub(crate) fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
        self.received = 0;
        self.fds.clear();
        self.drained = false;
    }

    /// Moves buffered bytes into `dst`; returns how many.
    fn take_buffered(&mut self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.end - self.start);
        dst[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        n
    }

    /// Fills `dst`: from the buffer first, then from the socket.
    pub(crate) fn read_exact(&mut self, w: &Wait<'_>, dst: &mut [u8]) -> Result<ReadStatus, Error> {
        let mut got = self.take_buffered(dst);
        while got < dst.len() {
            // Cheap check so a client that keeps the socket busy cannot
            // delay a shutdown.
            if w.shutdown.load(Ordering::Relaxed) {
                return Ok(ReadStatus::Shutdown);
            }
            if self.drained {
                // Nothing queued: sleep until data or a shutdown request
                // arrives.
                if sys::poll_readable(&[w.stream, w.shutdown_fd])? == 1 {
                    return Ok(ReadStatus::Shutdown);
                }
                self.drained = false;
            }
            // Everything buffered went into `dst` above.
            self.start = 0;
            self.end = 0;
            let direct = dst.len() - got > RX_BUF / 2;
            let into = if direct {
                &mut dst[got..]
            } else {
                &mut self.buf[..]
            };
            let asked = into.len();
            let r = match sys::recv_with_fds(w.stream, into) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Ok(ReadStatus::Eof(got))
                }
                Err(e) => return Err(e.into()),
            };
            if r.len == 0 {
                return Ok(ReadStatus::Eof(got));
            }
            self.drained = r.len < asked;
            self.received += r.len as u64;
            if !r.fds.is_empty() || r.fds_truncated {
                self.fds.push_back((self.received, r.fds, r.fds_truncated));
            }
            if direct {
                got += r.len;
            } else {
                self.end = r.len;
                got += self.take_buffered(&mut dst[got..]);
            }
        }
        Ok(ReadStatus::Full)
    }

    /// The descriptors of the message just read (everything up to the
    /// bytes still buffered), at most `2 * MAX_MSG_FDS` of them, and
    /// whether any were dropped.
    pub(crate) fn take_fds(&mut self) -> (Vec<OwnedFd>, bool) {
        let taken = self.received - (self.end - self.start) as u64;
        let mut fds = Vec::new();
        let mut truncated = false;
        while let Some((at, _, _)) = self.fds.front() {
            if *at > taken {
                break;
            }
            let Some((_, set, cut)) = self.fds.pop_front() else {
                break;
            };
            truncated |= cut;
            for fd in set {
                if fds.len() < MAX_MSG_FDS * 2 {
                    fds.push(fd);
                } else {
                    truncated = true;
                }
            }
        }
        (fds, truncated)
    }
}
