// SPDX-License-Identifier: GPL-2.0
//! Minimal pcap (libpcap classic format, LINKTYPE_ETHERNET) writer and reader.

use std::io::{self, Write};

const MAGIC: u32 = 0xa1b2_c3d4;
const LINKTYPE_ETHERNET: u32 = 1;
const RECORD_HEADER: u64 = 16;

/// Frames at most this long are always recorded whole: ACKs, READ
/// requests, atomics, MADs (a 256-byte MAD in a RoCE v2 frame over IPv6
/// is 342 bytes), ARP and neighbour discovery.
pub const SHORT_FRAME: usize = 512;

/// What a longer frame keeps once the whole-frame budget is spent: the
/// Ethernet, 802.1Q, IPv6/GRH, UDP, BTH and RETH headers (94 bytes at most).
pub const SNAP_LEN: usize = 128;

/// Writes a pcap stream.
///
/// Bulk data makes a capture of a whole test run large (a few GB per VM):
/// frames are recorded whole until the stream holds the whole-frame budget
/// ([`PcapWriter::whole_until`]); after that, frames longer than
/// [`SHORT_FRAME`] keep their first [`SNAP_LEN`] bytes, with their real
/// length in the record, as `tcpdump -s` records them.
pub struct PcapWriter<W: Write> {
    out: W,
    written: u64,
    whole_budget: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header. Every frame is recorded whole.
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
        Ok(Self {
            out,
            written: h.len() as u64,
            whole_budget: u64::MAX,
        })
    }

    /// Records long frames whole only while the stream holds fewer than
    /// `bytes` bytes.
    pub fn whole_until(self, bytes: u64) -> Self {
        Self {
            whole_budget: bytes,
            ..self
        }
    }

    /// Appends one frame with timestamp `ts_us` (microseconds), in one
    /// write.
    pub fn write(&mut self, ts_us: u64, frame: &[u8]) -> io::Result<()> {
        let cut = frame.len() > SHORT_FRAME && self.written >= self.whole_budget;
        let kept = match frame.get(..SNAP_LEN) {
            Some(head) if cut => head,
            _ => frame,
        };
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = u32::try_from(kept.len()).unwrap_or(u32::MAX);
        let mut r = Vec::with_capacity(RECORD_HEADER as usize + kept.len());
        r.extend_from_slice(&((ts_us / 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&((ts_us % 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&incl.to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        r.extend_from_slice(kept);
        self.out.write_all(&r)?;
        self.written += r.len() as u64;
        self.out.flush()
    }
}

/// One record of a pcap file: the bytes captured and the frame's length on
/// the wire (more than `data.len()` when the capture truncated it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The bytes captured.
    pub data: Vec<u8>,
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// Reads the records of a little-endian classic pcap file; `None` if
/// malformed.
pub fn read_records(data: &[u8]) -> Option<Vec<Record>> {
    let magic = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?);
    if magic != MAGIC {
        return None;
    }
    let mut at = 24usize;
    let mut records = Vec::new();
    while at < data.len() {
        let h = data.get(at..at + 16)?;
        let incl = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
        let orig_len = u32::from_le_bytes(h[12..16].try_into().ok()?);
        at += 16;
        let data = data.get(at..at.checked_add(incl)?)?.to_vec();
        records.push(Record { data, orig_len });
        at += incl;
    }
    Some(records)
}

/// Reads the frames (as captured) of a little-endian classic pcap file;
/// `None` if malformed.
pub fn read_frames(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    Some(read_records(data)?.into_iter().map(|r| r.data).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_frames_are_cut_once_the_budget_is_spent() {
        let long: Vec<u8> = (0..1078u32).map(|i| i as u8).collect();
        let short = vec![7u8; SHORT_FRAME];
        let mut out = Vec::new();
        // The header (24) and one whole long frame (16 + 1078) spend it.
        let mut w = PcapWriter::new(&mut out).unwrap().whole_until(1000);
        for f in [&long, &long, &short, &long] {
            w.write(1, f).unwrap();
        }
        let r = read_records(&out).unwrap();
        let cut = r.iter().filter(|r| r.data.len() < r.orig_len as usize);
        assert_eq!(cut.count(), 2);
        let got: Vec<_> = r.iter().map(|r| (r.data.len(), r.orig_len)).collect();
        assert_eq!(
            got,
            [
                (1078, 1078),
                (SNAP_LEN, 1078),
                (SHORT_FRAME, 512),
                (SNAP_LEN, 1078)
            ]
        );
        assert_eq!(r[1].data, long[..SNAP_LEN]);
        assert_eq!(read_frames(&out).unwrap()[2], short);
    }

    #[test]
    fn without_a_budget_every_frame_is_whole() {
        let long = vec![1u8; 9000];
        let mut out = Vec::new();
        let mut w = PcapWriter::new(&mut out).unwrap();
        for _ in 0..3 {
            w.write(1, &long).unwrap();
        }
        assert_eq!(read_frames(&out).unwrap(), vec![long; 3]);
    }
}
