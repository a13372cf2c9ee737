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

use super::{inet_checksum, ETH_HLEN, ETH_P_IPV4, IPV4_HLEN, ROCE_V2_PORT, UDP_HLEN};

/// Size of `struct virtio_net_hdr` (no `num_buffers`: the tap's default).
pub const VNET_HDR_LEN: usize = 10;
/// Most frames in one super-frame (the kernel takes up to 128).
pub const MAX_SEGS: usize = 64;

/// Ethernet, IPv4 and UDP headers.
pub const HDRS_LEN: usize = ETH_HLEN + IPV4_HLEN + UDP_HLEN;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

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
    let mut sum = 17u32 + u32::from(udp_len);
    for w in h[ETH_HLEN + 12..ETH_HLEN + 20].chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[udp + 6..udp + 8].copy_from_slice(&(sum as u16).to_be_bytes());
    out
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
}
