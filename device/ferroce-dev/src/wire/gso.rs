// SPDX-License-Identifier: GPL-2.0
//! UDP segmentation offload toward a tap (`IFF_VNET_HDR`): a run of RoCE v2
//! frames that the kernel's UDP GSO would cut out of one datagram goes to
//! the tap in one write, as one super-frame with a `virtio_net_hdr`.
//!
//! The kernel (`__udp_gso_segment`, `inet_gso_segment`) cuts the
//! super-frame's UDP payload into `gso_size` pieces, copies the Ethernet,
//! IPv4 and UDP headers onto each, numbers the IPv4 identifications on
//! from the super-frame's, sets each piece's lengths and fills in the IPv4
//! and UDP checksums. So a run is coalesced only when that gives back the
//! very frames of the run, byte for byte except the UDP checksum (zero in
//! the engine's frames, computed by the kernel; the ICRC does not cover
//! it):
//!
//! - untagged IPv4 without options, UDP to port 4791, not fragmented, no
//!   Ethernet padding (the frame ends where the IPv4 packet does);
//! - the same Ethernet header, IPv4 header fields (TOS, flags, TTL,
//!   addresses) and UDP ports as the run's first frame;
//! - consecutive IPv4 identifications;
//! - the same UDP payload length, except that the last may be shorter;
//! - from 2 to [`MAX_SEGS`] frames, and an IPv4 packet of at most 64 KiB.
//!
//! Everything else (ACKs between data packets, IPv6, RoCE v1, VLAN tags)
//! goes out alone, with an empty `virtio_net_hdr`.
//!
//! The other way, a tap with receive offloads (`TUNSETOFFLOAD` with
//! `TUN_F_CSUM`, `TUN_F_USO4` and `TUN_F_USO6`) hands over a UDP GSO
//! super-frame as the sender wrote it, and a frame whose checksum the
//! sender left to the hardware without it. [`cut`] does what the kernel
//! would have done before a tap without offloads: it cuts the super-frame
//! into its frames and fills in their checksums.

use super::{
    inet_checksum, ETH_HLEN, ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6, IPV4_HLEN, IPV6_HLEN,
    ROCE_V2_PORT, UDP_HLEN, VLAN_HLEN,
};

/// Size of `struct virtio_net_hdr` (no `num_buffers`: the tap's default).
pub const VNET_HDR_LEN: usize = 10;
/// Most frames in one super-frame (the kernel takes up to 128).
pub const MAX_SEGS: usize = 64;

/// Ethernet, IPv4 and UDP headers.
pub const HDRS_LEN: usize = ETH_HLEN + IPV4_HLEN + UDP_HLEN;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;
/// TPID of an 802.1ad (QinQ service) tag.
const ETH_P_8021AD: u16 = 0x88a8;

/// The UDP payload length of `f` if it may be part of a run at all.
fn udp_payload_len(f: &[u8]) -> Option<usize> {
    let ip = f.get(ETH_HLEN..ETH_HLEN + IPV4_HLEN)?;
    let udp = f.get(ETH_HLEN + IPV4_HLEN..HDRS_LEN)?;
    let ipv4 = f.get(12..ETH_HLEN)? == ETH_P_IPV4.to_be_bytes() && ip[0] == 0x45 && ip[9] == 17;
    // DF may be set; MF and a fragment offset may not.
    let whole = ip[6] & 0x3f == 0 && ip[7] == 0;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let roce = u16::from_be_bytes([udp[2], udp[3]]) == ROCE_V2_PORT;
    (ipv4
        && whole
        && roce
        && total == f.len() - ETH_HLEN
        && udp_len == total - IPV4_HLEN
        && udp_len > UDP_HLEN)
        .then(|| udp_len - UDP_HLEN)
}

/// Whether `f` follows `head` as segment `k` of `head`'s run.
fn continues(head: &[u8], f: &[u8], k: usize) -> bool {
    let id = |f: &[u8]| u16::from_be_bytes([f[ETH_HLEN + 4], f[ETH_HLEN + 5]]);
    head[..ETH_HLEN] == f[..ETH_HLEN]
        // Version, IHL and TOS; flags, fragment offset, TTL and protocol;
        // addresses.
        && head[ETH_HLEN..ETH_HLEN + 2] == f[ETH_HLEN..ETH_HLEN + 2]
        && head[ETH_HLEN + 6..ETH_HLEN + 10] == f[ETH_HLEN + 6..ETH_HLEN + 10]
        && head[ETH_HLEN + 12..ETH_HLEN + 20] == f[ETH_HLEN + 12..ETH_HLEN + 20]
        // UDP ports.
        && head[ETH_HLEN + IPV4_HLEN..ETH_HLEN + IPV4_HLEN + 4]
            == f[ETH_HLEN + IPV4_HLEN..ETH_HLEN + IPV4_HLEN + 4]
        && id(f) == id(head).wrapping_add(k as u16)
}

/// The super-frame for the run of frames at the start of `frames`: how
/// many frames it takes (at least 2) and the `virtio_net_hdr` and headers
/// to write before their bytes after [`HDRS_LEN`], in order. None if the
/// first frame goes out alone.
pub fn next_run<F: AsRef<[u8]>>(frames: &[F]) -> Option<(usize, [u8; VNET_HDR_LEN + HDRS_LEN])> {
    let n = run_len(frames);
    let run = frames.get(..n).filter(|_| n >= 2)?;
    Some((n, super_headers(run)))
}

/// How many frames from the start of `frames` make one super-frame: 1 if
/// the first goes out alone.
fn run_len<F: AsRef<[u8]>>(frames: &[F]) -> usize {
    let Some(head) = frames.first().map(AsRef::as_ref) else {
        return 0;
    };
    let Some(seg) = udp_payload_len(head) else {
        return 1;
    };
    let mut n = 1;
    let mut udp_len = UDP_HLEN + seg;
    for f in frames.iter().skip(1).take(MAX_SEGS - 1).map(AsRef::as_ref) {
        let Some(len) = udp_payload_len(f) else {
            break;
        };
        if len > seg || !continues(head, f, n) || IPV4_HLEN + udp_len + len > usize::from(u16::MAX)
        {
            break;
        }
        n += 1;
        udp_len += len;
        if len < seg {
            // Only the last segment may be short.
            break;
        }
    }
    n
}

/// The `virtio_net_hdr` and headers of the super-frame made of `run`, a
/// run [`run_len`] found, of at least 2 frames.
fn super_headers<F: AsRef<[u8]>>(run: &[F]) -> [u8; VNET_HDR_LEN + HDRS_LEN] {
    let head = run[0].as_ref();
    let seg = head.len() - HDRS_LEN;
    let payload: usize = run.iter().map(|f| f.as_ref().len() - HDRS_LEN).sum();
    let udp_len = (UDP_HLEN + payload) as u16;
    let total = (IPV4_HLEN + UDP_HLEN + payload) as u16;
    let mut out = [0u8; VNET_HDR_LEN + HDRS_LEN];
    // struct virtio_net_hdr, in the host's byte order (a tap without
    // TUNSETVNETLE on a little-endian host).
    out[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    out[1] = VIRTIO_NET_HDR_GSO_UDP_L4;
    out[2..4].copy_from_slice(&(HDRS_LEN as u16).to_ne_bytes());
    out[4..6].copy_from_slice(&(seg as u16).to_ne_bytes());
    out[6..8].copy_from_slice(&((ETH_HLEN + IPV4_HLEN) as u16).to_ne_bytes());
    out[8..10].copy_from_slice(&6u16.to_ne_bytes());
    let h = &mut out[VNET_HDR_LEN..];
    h.copy_from_slice(&head[..HDRS_LEN]);
    h[ETH_HLEN + 2..ETH_HLEN + 4].copy_from_slice(&total.to_be_bytes());
    h[ETH_HLEN + 10..ETH_HLEN + 12].fill(0);
    let ck = inet_checksum(&h[ETH_HLEN..ETH_HLEN + IPV4_HLEN]);
    h[ETH_HLEN + 10..ETH_HLEN + 12].copy_from_slice(&ck.to_be_bytes());
    let udp = ETH_HLEN + IPV4_HLEN;
    h[udp + 4..udp + 6].copy_from_slice(&udp_len.to_be_bytes());
    // CHECKSUM_PARTIAL: the field holds the pseudo-header's sum, not
    // complemented; the kernel adds each segment's payload to it.
    let sum = csum_add(17 + u64::from(udp_len), &h[ETH_HLEN + 12..ETH_HLEN + 20]);
    h[udp + 6..udp + 8].copy_from_slice(&csum_fold(sum).to_be_bytes());
    out
}

/// Why [`cut`] refused what a tap handed over (the frames are dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CutError {
    /// A GSO type other than UDP (the port takes no TCP segmentation).
    #[error("GSO type {0} not taken")]
    GsoType(u8),
    /// `csum_start` and `csum_offset` do not lie inside the frame.
    #[error("checksum offsets outside the frame")]
    CsumOffsets,
    /// A UDP GSO super-frame whose headers are not Ethernet (up to two
    /// VLAN tags), IPv4 or IPv6 without extension headers, and UDP at
    /// `csum_start` with the checksum to fill in.
    #[error("UDP GSO super-frame with headers not understood")]
    Headers,
    /// A UDP GSO super-frame with no payload or a `gso_size` of 0.
    #[error("UDP GSO super-frame without segments")]
    NoSegments,
    /// A UDP GSO super-frame whose `gso_size` makes segments longer than
    /// an IP packet can be.
    #[error("UDP GSO segments too long")]
    SegmentTooLong,
}

/// The ones' complement sum of `data` (as 16-bit big-endian words, a last
/// odd byte padded with zero) added to `sum`, not folded.
fn csum_add(mut sum: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut last = [0u8; 4];
    last[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(last))
}

/// `sum` folded to 16 bits, not complemented.
fn csum_fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// `sum` folded to 16 bits and complemented: a checksum field's value,
/// 0 sent as 0xffff (`CSUM_MANGLED_0`) as the kernel does.
fn csum_field(sum: u64) -> [u8; 2] {
    match !csum_fold(sum) {
        0 => [0xff, 0xff],
        c => c.to_be_bytes(),
    }
}

/// A `virtio_net_hdr` as the tap wrote it (the host's byte order).
struct VnetHdr {
    needs_csum: bool,
    gso_type: u8,
    gso_size: usize,
    csum_start: usize,
    csum_offset: usize,
}

impl VnetHdr {
    fn parse(h: &[u8; VNET_HDR_LEN]) -> Self {
        let u16_at = |i: usize| usize::from(u16::from_ne_bytes([h[i], h[i + 1]]));
        Self {
            needs_csum: h[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0,
            gso_type: h[1] & !VIRTIO_NET_HDR_GSO_ECN,
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        }
    }
}

/// Where the network header of `f` starts, after its Ethernet header and
/// up to two VLAN tags, and its Ethertype.
fn l3_start(f: &[u8]) -> Option<(usize, u16)> {
    let mut at = ETH_HLEN - 2;
    for _ in 0..3 {
        let et = u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]);
        if et != ETH_P_8021Q && et != ETH_P_8021AD {
            return Some((at + 2, et));
        }
        at += VLAN_HLEN;
    }
    None
}

/// Hands the frames of `frame`, read from a tap with receive offloads
/// after the `virtio_net_hdr` `hdr`, to `out` as two parts to join:
///
/// - a frame without GSO as it is (`out(frame, &[])`), its checksum filled
///   in first if the header asks for it (`NEEDS_CSUM`), as
///   `skb_checksum_help` does;
/// - a UDP GSO super-frame cut as `__udp_gso_segment` and
///   `inet_gso_segment`/`ipv6_gso_segment` cut it: its UDP payload in
///   `gso_size` pieces (the last may be shorter), each after a copy of its
///   headers with the lengths set, the IPv4 identifications numbered on
///   from the super-frame's and the IPv4 and UDP checksums computed
///   (`out(headers, piece)`).
///
/// Returns how many frames went to `out`; on an error none did.
pub fn cut(
    hdr: &[u8; VNET_HDR_LEN],
    frame: &mut [u8],
    out: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<usize, CutError> {
    let vnet = VnetHdr::parse(hdr);
    let field = vnet.csum_start + vnet.csum_offset;
    if vnet.needs_csum && (vnet.csum_start > frame.len() || field + 2 > frame.len()) {
        return Err(CutError::CsumOffsets);
    }
    match vnet.gso_type {
        VIRTIO_NET_HDR_GSO_NONE => {
            if vnet.needs_csum {
                let sum = csum_add(0, &frame[vnet.csum_start..]);
                frame[field..field + 2].copy_from_slice(&csum_field(sum));
            }
            out(frame, &[]);
            Ok(1)
        }
        VIRTIO_NET_HDR_GSO_UDP_L4 => cut_udp(&vnet, frame, out),
        t => Err(CutError::GsoType(t)),
    }
}

/// [`cut`] for a UDP GSO super-frame.
fn cut_udp(
    vnet: &VnetHdr,
    frame: &[u8],
    out: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<usize, CutError> {
    /// Longest headers taken: two VLAN tags, IPv4 with options, UDP.
    const MAX_HDRS: usize = ETH_HLEN + 2 * VLAN_HLEN + 60 + UDP_HLEN;
    let udp = vnet.csum_start;
    let (l3, et) = l3_start(frame).ok_or(CutError::Headers)?;
    let ip_ok = match et {
        ETH_P_IPV4 => {
            frame.get(l3).is_some_and(|&b| {
                b >> 4 == 4 && l3 + usize::from(b & 0xf) * 4 == udp && usize::from(b & 0xf) >= 5
            }) && frame.get(l3 + 9) == Some(&17)
        }
        ETH_P_IPV6 => {
            frame.get(l3).is_some_and(|&b| b >> 4 == 6)
                && l3 + IPV6_HLEN == udp
                && frame.get(l3 + 6) == Some(&17)
        }
        _ => false,
    };
    let hdrs_len = udp + UDP_HLEN;
    if !vnet.needs_csum || vnet.csum_offset != 6 || !ip_ok || hdrs_len > MAX_HDRS {
        return Err(CutError::Headers);
    }
    let payload = frame.get(hdrs_len..).ok_or(CutError::Headers)?;
    if payload.is_empty() || vnet.gso_size == 0 {
        return Err(CutError::NoSegments);
    }
    // The longest segment's IPv4 total length or IPv6 payload length.
    if udp - l3 + UDP_HLEN + vnet.gso_size.min(payload.len()) > usize::from(u16::MAX) {
        return Err(CutError::SegmentTooLong);
    }
    let mut hdrs = [0u8; MAX_HDRS];
    let hdrs = &mut hdrs[..hdrs_len];
    hdrs.copy_from_slice(&frame[..hdrs_len]);
    let v4 = et == ETH_P_IPV4;
    let id0 = u16::from_be_bytes([hdrs[l3 + 4], hdrs[l3 + 5]]);
    let mut n = 0;
    for (k, piece) in payload.chunks(vnet.gso_size).enumerate() {
        let udp_len = (UDP_HLEN + piece.len()) as u16;
        if v4 {
            let total = (udp - l3) as u16 + udp_len;
            hdrs[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            let id = id0.wrapping_add(k as u16);
            hdrs[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
            hdrs[l3 + 10..l3 + 12].fill(0);
            let ck = inet_checksum(&hdrs[l3..udp]);
            hdrs[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
        } else {
            hdrs[l3 + 4..l3 + 6].copy_from_slice(&udp_len.to_be_bytes());
        }
        hdrs[udp + 4..udp + 6].copy_from_slice(&udp_len.to_be_bytes());
        hdrs[udp + 6..udp + 8].fill(0);
        // The pseudo-header: addresses, protocol, UDP length.
        let addrs = if v4 {
            &hdrs[l3 + 12..l3 + 20]
        } else {
            &hdrs[l3 + 8..l3 + 40]
        };
        let mut sum = csum_add(17 + u64::from(udp_len), addrs);
        sum = csum_add(sum, &hdrs[udp..]);
        // `hdrs[udp..]` is 8 bytes, so the piece's words stay aligned.
        sum = csum_add(sum, piece);
        hdrs[udp + 6..udp + 8].copy_from_slice(&csum_field(sum));
        out(hdrs, piece);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::{encode, op, udp_sport, Bth, NetHdr, NetKind, Packet, Reth};
    use super::*;

    /// A RoCE v2 frame as the engine builds it: IPv4 identification `id`,
    /// `payload` bytes of UDP payload filled with `fill`.
    fn frame(id: u16, payload: usize, fill: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (IPV4_HLEN + UDP_HLEN + payload) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 1, 2]);
        let ck = inet_checksum(&f[ETH_HLEN..ETH_HLEN + IPV4_HLEN]);
        f[ETH_HLEN + 10..ETH_HLEN + 12].copy_from_slice(&ck.to_be_bytes());
        f.extend_from_slice(&0xc000u16.to_be_bytes());
        f.extend_from_slice(&ROCE_V2_PORT.to_be_bytes());
        f.extend_from_slice(&((UDP_HLEN + payload) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.resize(f.len() + payload, fill);
        f
    }

    /// What the kernel's UDP GSO makes of a super-frame (headers as
    /// [`super_headers`] wrote them, then the payloads): the frames, with
    /// their UDP checksums left out (zeroed).
    fn segment(hdrs: &[u8], payload: &[u8]) -> Vec<Vec<u8>> {
        assert_eq!(hdrs[1], VIRTIO_NET_HDR_GSO_UDP_L4);
        let seg = usize::from(u16::from_ne_bytes([hdrs[4], hdrs[5]]));
        let h = &hdrs[VNET_HDR_LEN..];
        let id0 = u16::from_be_bytes([h[ETH_HLEN + 4], h[ETH_HLEN + 5]]);
        payload
            .chunks(seg)
            .enumerate()
            .map(|(k, p)| {
                let mut f = h.to_vec();
                let total = (IPV4_HLEN + UDP_HLEN + p.len()) as u16;
                f[ETH_HLEN + 2..ETH_HLEN + 4].copy_from_slice(&total.to_be_bytes());
                let id = id0.wrapping_add(k as u16);
                f[ETH_HLEN + 4..ETH_HLEN + 6].copy_from_slice(&id.to_be_bytes());
                f[ETH_HLEN + 10..ETH_HLEN + 12].fill(0);
                let ck = inet_checksum(&f[ETH_HLEN..ETH_HLEN + IPV4_HLEN]);
                f[ETH_HLEN + 10..ETH_HLEN + 12].copy_from_slice(&ck.to_be_bytes());
                let udp = ETH_HLEN + IPV4_HLEN;
                f[udp + 4..udp + 6].copy_from_slice(&((UDP_HLEN + p.len()) as u16).to_be_bytes());
                f[udp + 6..udp + 8].fill(0);
                f.extend_from_slice(p);
                f
            })
            .collect()
    }

    #[test]
    fn a_run_segments_back_into_its_frames() {
        let frames: Vec<_> = (0..5)
            .map(|k| {
                frame(
                    0xfffe_u16.wrapping_add(k),
                    if k == 4 { 100 } else { 1040 },
                    k as u8,
                )
            })
            .collect();
        let (n, hdrs) = next_run(&frames).unwrap();
        assert_eq!(n, 5);
        let payload: Vec<u8> = frames.iter().flat_map(|f| f[HDRS_LEN..].to_vec()).collect();
        assert_eq!(segment(&hdrs, &payload), frames);
    }

    /// A packet of an RDMA WRITE from 10.0.1.1 to 10.0.1.2, as the engine
    /// sends it: `net` its network header, `ip_id` and `psn` numbered on.
    fn write_packet(net: NetKind, opcode: u8, k: u16, payload: &[u8]) -> Packet<'_> {
        let gid = |last| {
            let mut g = [0u8; 16];
            g[10..12].fill(0xff);
            g[12..].copy_from_slice(&[10, 0, 1, last]);
            g
        };
        let net = NetHdr {
            kind: net,
            sgid: gid(1),
            dgid: gid(2),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        };
        let psn = 0x100 + u32::from(k);
        let bth = Bth {
            opcode,
            psn,
            ..Bth::default()
        };
        Packet {
            dmac: [2, 0, 0, 0, 0, 2],
            smac: [2, 0, 0, 0, 0, 1],
            udp_sport: udp_sport(0, 0x11, 0x12),
            ip_id: 0xfffa_u16.wrapping_add(k),
            reth: Reth {
                va: 0x1000,
                rkey: 0x55,
                len: 10_000,
            },
            ..Packet::new(net, bth, payload)
        }
    }

    #[test]
    fn the_encoders_frames_of_a_message_make_runs() {
        // A 10000-byte WRITE at IB MTU 1024: FIRST (with its RETH), 8
        // MIDDLE and a short LAST. The RETH makes the first UDP payload
        // longer than the others', so the first MIDDLE ends its run as
        // the short last segment, and the other 8 make the second run.
        let data: Vec<u8> = (0..10_000).map(|i| (i * 7) as u8).collect();
        let frames: Vec<Vec<u8>> = data
            .chunks(1024)
            .enumerate()
            .map(|(k, chunk)| {
                let opcode = match k {
                    0 => op::RC_WRITE_FIRST,
                    9 => op::RC_WRITE_LAST,
                    _ => op::RC_WRITE_MIDDLE,
                };
                let mut f = Vec::new();
                assert!(encode(
                    &write_packet(NetKind::Ipv4, opcode, k as u16, chunk),
                    &mut f
                ));
                f
            })
            .collect();
        let mut at = 0;
        for want in [2, 8] {
            let (n, hdrs) = next_run(&frames[at..]).unwrap();
            assert_eq!(n, want);
            let run = &frames[at..at + n];
            let payload: Vec<u8> = run.iter().flat_map(|f| f[HDRS_LEN..].to_vec()).collect();
            assert_eq!(segment(&hdrs, &payload), run);
            at += n;
        }
        assert_eq!(at, frames.len());
        // RoCE v1 and IPv6 frames go out alone.
        for net in [NetKind::RoceV1, NetKind::Ipv6] {
            let f: Vec<Vec<u8>> = (0..3)
                .map(|k| {
                    let mut f = Vec::new();
                    let p = write_packet(net, op::RC_WRITE_MIDDLE, k, &data[..1024]);
                    assert!(encode(&p, &mut f));
                    f
                })
                .collect();
            assert_eq!(run_len(&f), 1);
        }
    }

    #[test]
    fn runs_stop_where_the_kernel_would_cut_differently() {
        let f = |id, len| frame(id, len, 0);
        // A short frame ends a run; a longer one, a gap in the
        // identifications or another flow starts a new one.
        assert_eq!(run_len(&[f(1, 1040), f(2, 500), f(3, 500)]), 2);
        assert_eq!(run_len(&[f(1, 500), f(2, 1040)]), 1);
        assert_eq!(run_len(&[f(1, 1040), f(3, 1040)]), 1);
        let mut other = f(2, 1040);
        other[ETH_HLEN + IPV4_HLEN] ^= 1; // UDP source port
        assert_eq!(run_len(&[f(1, 1040), other]), 1);
        let mut tagged = f(1, 1040);
        tagged.splice(12..12, [0x81, 0x00, 0, 5]);
        assert_eq!(run_len(&[tagged, f(2, 1040)]), 1);
        let mut padded = f(1, 1040);
        padded.push(0);
        assert_eq!(run_len(&[padded, f(2, 1040)]), 1);
        // No more than MAX_SEGS, nor more than 64 KiB of IPv4 packet.
        let many: Vec<_> = (0..100).map(|k| f(k, 256)).collect();
        assert_eq!(run_len(&many), MAX_SEGS);
        let jumbo: Vec<_> = (0..20).map(|k| f(k, 4124)).collect();
        assert_eq!(run_len(&jumbo), 15);
        assert_eq!(run_len::<Vec<u8>>(&[]), 0);
        assert_eq!(run_len(&[vec![0u8; 20]]), 1);
        // Not IPv4: its bytes where the UDP length would be are not one.
        assert_eq!(run_len(&[vec![0u8; 100], vec![0u8; 100]]), 1);
        // A frame alone is no run.
        assert!(next_run::<Vec<u8>>(&[]).is_none());
        assert!(next_run(&[f(1, 1040)]).is_none());
        assert!(next_run(&[f(1, 1040), f(3, 1040)]).is_none());
    }

    /// `frames` as a tap with receive offloads hands over their run: the
    /// `virtio_net_hdr` and the super-frame.
    fn super_frame(frames: &[Vec<u8>]) -> ([u8; VNET_HDR_LEN], Vec<u8>) {
        let (n, hdrs) = next_run(frames).unwrap();
        assert_eq!(n, frames.len());
        let mut vnet = [0u8; VNET_HDR_LEN];
        vnet.copy_from_slice(&hdrs[..VNET_HDR_LEN]);
        let mut f = hdrs[VNET_HDR_LEN..].to_vec();
        for p in frames {
            f.extend_from_slice(&p[HDRS_LEN..]);
        }
        (vnet, f)
    }

    /// What [`cut`] hands out, each frame joined.
    fn cut_all(vnet: &[u8; VNET_HDR_LEN], f: &mut [u8]) -> Result<Vec<Vec<u8>>, CutError> {
        let mut out = Vec::new();
        let n = cut(vnet, f, &mut |h, p| out.push([h, p].concat()))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    /// Whether the UDP checksum of `f` (network header at `l3`, UDP at
    /// `udp`) is right and not 0.
    fn udp_checksum_ok(f: &[u8], l3: usize, udp: usize) -> bool {
        let addrs = if udp - l3 == IPV6_HLEN {
            &f[l3 + 8..l3 + 40]
        } else {
            &f[l3 + 12..l3 + 20]
        };
        let len = (f.len() - udp) as u16;
        let mut pseudo = addrs.to_vec();
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&len.to_be_bytes());
        pseudo.extend_from_slice(&f[udp..]);
        f[udp + 6..udp + 8] != [0, 0] && inet_checksum(&pseudo) == 0
    }

    /// The virtio_net_hdr of a super-frame: UDP GSO, `gso_size` `seg`,
    /// UDP at `udp`.
    fn vnet(gso_type: u8, seg: u16, udp: u16) -> [u8; VNET_HDR_LEN] {
        let mut h = [0u8; VNET_HDR_LEN];
        h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h[1] = gso_type;
        h[4..6].copy_from_slice(&seg.to_ne_bytes());
        h[6..8].copy_from_slice(&udp.to_ne_bytes());
        h[8..10].copy_from_slice(&6u16.to_ne_bytes());
        h
    }

    #[test]
    fn a_super_frame_read_whole_is_cut_into_its_frames() {
        let frames: Vec<_> = (0..7)
            .map(|k| {
                frame(
                    0xfffd_u16.wrapping_add(k),
                    if k == 6 { 333 } else { 1040 },
                    k as u8,
                )
            })
            .collect();
        let (vnet, mut f) = super_frame(&frames);
        // The UDP checksum field holds the pseudo-header's sum (addresses,
        // protocol, the super-frame's UDP length), not complemented.
        let udp = ETH_HLEN + IPV4_HLEN;
        let mut pseudo = f[ETH_HLEN + 12..udp].to_vec();
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&((f.len() - udp) as u16).to_be_bytes());
        assert_eq!(
            u16::from_be_bytes([f[udp + 6], f[udp + 7]]),
            !inet_checksum(&pseudo)
        );
        let got = cut_all(&vnet, &mut f).unwrap();
        assert_eq!(got.len(), frames.len());
        for (g, want) in got.iter().zip(&frames) {
            assert!(udp_checksum_ok(g, ETH_HLEN, ETH_HLEN + IPV4_HLEN));
            assert_eq!(inet_checksum(&g[ETH_HLEN..ETH_HLEN + IPV4_HLEN]), 0);
            // The engine's frames leave the UDP checksum 0; all else is
            // the same byte for byte.
            let mut g = g.clone();
            g[ETH_HLEN + IPV4_HLEN + 6..ETH_HLEN + IPV4_HLEN + 8].fill(0);
            assert_eq!(&g, want);
        }
    }

    #[test]
    fn tagged_and_ipv6_super_frames_are_cut() {
        // IPv6 in one 802.1Q tag: Ethernet, tag, IPv6, UDP, 2500 bytes.
        let l3 = ETH_HLEN + VLAN_HLEN;
        let udp = l3 + IPV6_HLEN;
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x20, 0x05, 0x86, 0xdd,
        ];
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((UDP_HLEN + 2500) as u16).to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend((0..32u8).map(|i| i.wrapping_add(0xfe)));
        f.extend_from_slice(&[0xc0, 0x01, 0x12, 0xb7, 0, 0, 0, 0]);
        f.extend((0..2500).map(|i| (i * 13) as u8));
        let payload = f[udp + UDP_HLEN..].to_vec();
        let mut h = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 1000, udp as u16);
        h[1] |= VIRTIO_NET_HDR_GSO_ECN;
        let got = cut_all(&h, &mut f).unwrap();
        assert_eq!(got.len(), 3);
        for (k, g) in got.iter().enumerate() {
            let len = if k == 2 { 500 } else { 1000 };
            assert_eq!(g.len(), udp + UDP_HLEN + len);
            assert_eq!(&g[..l3 + 4], &f[..l3 + 4]);
            assert_eq!(&g[l3 + 4..l3 + 6], &((UDP_HLEN + len) as u16).to_be_bytes());
            assert_eq!(&g[l3 + 6..udp + 4], &f[l3 + 6..udp + 4]);
            assert_eq!(
                &g[udp + 4..udp + 6],
                &((UDP_HLEN + len) as u16).to_be_bytes()
            );
            assert!(udp_checksum_ok(g, l3, udp));
            assert_eq!(&g[udp + UDP_HLEN..], &payload[k * 1000..k * 1000 + len]);
        }
        // IPv4 in two tags (802.1ad, then 802.1Q).
        let mut frames: Vec<_> = (0..3).map(|k| frame(k, 512, 1)).collect();
        for f in &mut frames {
            f.splice(12..12, [0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 5]);
        }
        let l3 = ETH_HLEN + 2 * VLAN_HLEN;
        let mut sf = frames[0][..l3 + IPV4_HLEN + UDP_HLEN].to_vec();
        for f in &frames {
            sf.extend_from_slice(&f[l3 + IPV4_HLEN + UDP_HLEN..]);
        }
        let h = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 512, (l3 + IPV4_HLEN) as u16);
        let got = cut_all(&h, &mut sf).unwrap();
        for (g, want) in got.iter().zip(&frames) {
            assert!(udp_checksum_ok(g, l3, l3 + IPV4_HLEN));
            let mut g = g.clone();
            g[l3 + IPV4_HLEN + 6..l3 + IPV4_HLEN + 8].fill(0);
            assert_eq!(&g, want);
        }
    }

    #[test]
    fn a_frame_without_its_checksum_gets_it() {
        // An IPv4 UDP frame of odd length, its checksum right...
        let mut want = frame(9, 101, 0x5a);
        let udp = ETH_HLEN + IPV4_HLEN;
        let mut pseudo = want[ETH_HLEN + 12..ETH_HLEN + 20].to_vec();
        pseudo.extend_from_slice(&[0, 17, 0, (UDP_HLEN + 101) as u8]);
        pseudo.extend_from_slice(&want[udp..]);
        let ck = inet_checksum(&pseudo);
        want[udp + 6..udp + 8].copy_from_slice(&ck.to_be_bytes());
        assert!(udp_checksum_ok(&want, ETH_HLEN, udp));
        // ... and as a sender left it to the hardware: the pseudo-header's
        // sum, not complemented.
        let mut f = want.clone();
        let mut sum = 17 + (UDP_HLEN + 101) as u64;
        sum = csum_add(sum, &f[ETH_HLEN + 12..ETH_HLEN + 20]);
        let partial = !u16::from_be_bytes(csum_field(sum));
        f[udp + 6..udp + 8].copy_from_slice(&partial.to_be_bytes());
        let mut h = vnet(VIRTIO_NET_HDR_GSO_NONE, 0, udp as u16);
        assert_eq!(cut_all(&h, &mut f).unwrap(), [want.clone()]);
        // Without NEEDS_CSUM the frame goes as it is.
        h[0] = 0;
        let mut g = want.clone();
        g[udp + 6] ^= 1;
        assert_eq!(cut_all(&h, &mut g.clone()).unwrap(), [g]);
    }

    #[test]
    fn checksum_helpers_agree_with_the_ip_checksum() {
        let data: Vec<u8> = (0..1031u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0, 1, 2, 3, 4, 5, 19, 20, 1031] {
            let d = &data[..len];
            assert_eq!(u16::from_be_bytes(csum_field(csum_add(0, d))), {
                let c = inet_checksum(d);
                if c == 0 {
                    0xffff
                } else {
                    c
                }
            });
        }
        // A sum that folds to 0xffff is sent as 0xffff, never 0.
        assert_eq!(csum_field(0xffff), [0xff, 0xff]);
        assert_eq!(csum_field(0x1_fffe), [0xff, 0xff]);
    }

    #[test]
    fn what_cannot_be_cut_is_refused() {
        let frames: Vec<_> = (0..3).map(|k| frame(k, 1040, 3)).collect();
        let (h, f) = super_frame(&frames);
        let udp = ETH_HLEN + IPV4_HLEN;
        let try_cut = |h: [u8; VNET_HDR_LEN], mut f: Vec<u8>| cut_all(&h, &mut f);
        // TCP segmentation is not taken.
        let mut t = h;
        t[1] = 1;
        assert_eq!(try_cut(t, f.clone()), Err(CutError::GsoType(1)));
        // Offsets outside the frame.
        let mut t = h;
        t[6..8].copy_from_slice(&u16::MAX.to_ne_bytes());
        assert_eq!(try_cut(t, f.clone()), Err(CutError::CsumOffsets));
        let mut t = vnet(VIRTIO_NET_HDR_GSO_NONE, 0, 40);
        t[8..10].copy_from_slice(&20u16.to_ne_bytes());
        assert_eq!(try_cut(t, vec![0; 61]), Err(CutError::CsumOffsets));
        // A checksum field other than UDP's, no NEEDS_CSUM, UDP elsewhere.
        let mut t = h;
        t[8..10].copy_from_slice(&16u16.to_ne_bytes());
        assert_eq!(try_cut(t, f.clone()), Err(CutError::Headers));
        let mut t = h;
        t[0] = 0;
        assert_eq!(try_cut(t, f.clone()), Err(CutError::Headers));
        let t = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 1040, udp as u16 + 4);
        assert_eq!(try_cut(t, f.clone()), Err(CutError::Headers));
        // Not UDP, not IP, three tags.
        let mut g = f.clone();
        g[ETH_HLEN + 9] = 6;
        assert_eq!(try_cut(h, g), Err(CutError::Headers));
        let mut g = f.clone();
        g[12] = 0x89;
        assert_eq!(try_cut(h, g), Err(CutError::Headers));
        let mut g = f.clone();
        g.splice(12..12, [0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3]);
        let t = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 1040, (udp + 12) as u16);
        assert_eq!(try_cut(t, g), Err(CutError::Headers));
        // No payload, or no segment size.
        assert_eq!(
            try_cut(h, f[..udp + UDP_HLEN].to_vec()),
            Err(CutError::NoSegments)
        );
        let t = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 0, udp as u16);
        assert_eq!(try_cut(t, f.clone()), Err(CutError::NoSegments));
        // Truncated headers and empty reads.
        assert_eq!(
            try_cut(h, f[..udp + 3].to_vec()),
            Err(CutError::CsumOffsets)
        );
        assert!(try_cut(h, Vec::new()).is_err());
        assert_eq!(
            try_cut([0; VNET_HDR_LEN], Vec::new()).unwrap(),
            [Vec::<u8>::new()]
        );
        // Segments longer than an IP packet.
        let mut g = f.clone();
        g.resize(udp + UDP_HLEN + 65_510, 0);
        let t = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 65_508, udp as u16);
        assert_eq!(try_cut(t, g.clone()), Err(CutError::SegmentTooLong));
        let t = vnet(VIRTIO_NET_HDR_GSO_UDP_L4, 65_507, udp as u16);
        assert_eq!(try_cut(t, g).map(|v| v.len()), Ok(2));
        // And every prefix of a good super-frame is cut or refused,
        // never a panic.
        for len in 0..f.len() {
            let _ = try_cut(h, f[..len].to_vec());
        }
    }
}
