// SPDX-License-Identifier: GPL-2.0
//! Minimal pcap (libpcap classic format, LINKTYPE_ETHERNET) writer and reader.

use std::io::{self, Write};

const MAGIC: u32 = 0xa1b2_c3d4;
const LINKTYPE_ETHERNET: u32 = 1;

/// Writes a pcap stream.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&65535u32.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(Self { out })
    }

    /// Appends one frame with timestamp `ts_us` (microseconds).
    pub fn write(&mut self, ts_us: u64, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&((ts_us / 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&((ts_us % 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(frame)?;
        self.out.flush()
    }
}

/// Reads the frames of a little-endian classic pcap file; `None` if malformed.
pub fn read_frames(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    let magic = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?);
    if magic != MAGIC {
        return None;
    }
    let mut at = 24usize;
    let mut frames = Vec::new();
    while at < data.len() {
        let h = data.get(at..at + 16)?;
        let incl = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
        at += 16;
        frames.push(data.get(at..at.checked_add(incl)?)?.to_vec());
        at += incl;
    }
    Some(frames)
}
