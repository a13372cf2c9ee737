// SPDX-License-Identifier: GPL-2.0
//! RoCE wire format: Ethernet, IPv4, IPv6, UDP, GRH (RoCE v1), the IB
//! transport headers (BTH, RETH, AETH, DETH, ImmDt, IETH, AtomicETH,
//! AtomicAckETH, FETH) and the ICRC.
//!
//! [`Packet`] is both what [`encode`] writes and what [`decode`] returns. The
//! decoder never panics: every length is checked, and a frame that is
//! truncated, inconsistent, not RoCE or fails its checksums is refused with a
//! [`ParseError`] (the engine drops and counts it).

pub mod gso;
pub mod icrc;
pub mod pcap;

use crate::hw;
use icrc::icrc;

/// UDP destination port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;
/// Ethertype of IPv4.
pub const ETH_P_IPV4: u16 = 0x0800;
/// Ethertype of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// Ethertype of RoCE v1 (GRH + BTH over Ethernet).
pub const ETH_P_ROCE: u16 = 0x8915;
/// TPID of an 802.1Q tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// Ethernet header bytes.
pub const ETH_HLEN: usize = 14;
/// 802.1Q tag bytes (TPID + TCI).
pub const VLAN_HLEN: usize = 4;
/// VLAN ID bits of a TCI.
pub const VLAN_VID_MASK: u16 = 0x0fff;
/// Shift of the priority (PCP) in a TCI.
pub const VLAN_PRIO_SHIFT: u16 = 13;
/// IPv4 header bytes (no options).
pub const IPV4_HLEN: usize = 20;
/// IPv6 header / GRH bytes.
pub const IPV6_HLEN: usize = 40;
/// UDP header bytes.
pub const UDP_HLEN: usize = 8;
/// BTH bytes.
pub const BTH_LEN: usize = 12;
/// RETH bytes.
pub const RETH_LEN: usize = 16;
/// AETH bytes.
pub const AETH_LEN: usize = 4;
/// AtomicETH bytes (VA, R_Key, swap/add data, compare data).
pub const ATOMIC_ETH_LEN: usize = 28;
/// AtomicAckETH bytes (the original remote value).
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// DETH bytes.
pub const DETH_LEN: usize = 8;
/// ImmDt bytes.
pub const IMM_LEN: usize = 4;
/// Bytes of an IETH (the key a SEND with invalidate invalidates).
pub const IETH_LEN: usize = 4;
/// FETH bytes (FLUSH, IBTA 1.5).
pub const FETH_LEN: usize = 4;
/// ICRC bytes.
pub const ICRC_LEN: usize = 4;
/// GRH next-header value meaning "IBA transport follows".
pub const GRH_NEXT_HDR_IBA: u8 = 0x1b;
/// The default (full membership) P_Key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Q_Key of QP1 (GSI).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// BTH opcodes used by ferroce (IBTA vol. 1 table 38).
pub mod op {
    #![allow(missing_docs)]
    pub const RC_SEND_FIRST: u8 = 0x00;
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    pub const RC_SEND_LAST: u8 = 0x02;
    pub const RC_SEND_LAST_IMM: u8 = 0x03;
    pub const RC_SEND_ONLY: u8 = 0x04;
    pub const RC_SEND_ONLY_IMM: u8 = 0x05;
    pub const RC_WRITE_FIRST: u8 = 0x06;
    pub const RC_WRITE_MIDDLE: u8 = 0x07;
    pub const RC_WRITE_LAST: u8 = 0x08;
    pub const RC_WRITE_LAST_IMM: u8 = 0x09;
    pub const RC_WRITE_ONLY: u8 = 0x0a;
    pub const RC_WRITE_ONLY_IMM: u8 = 0x0b;
    pub const RC_READ_REQUEST: u8 = 0x0c;
    pub const RC_READ_RESPONSE_FIRST: u8 = 0x0d;
    pub const RC_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub const RC_READ_RESPONSE_LAST: u8 = 0x0f;
    pub const RC_READ_RESPONSE_ONLY: u8 = 0x10;
    pub const RC_ACK: u8 = 0x11;
    pub const RC_ATOMIC_ACK: u8 = 0x12;
    pub const RC_CMP_SWAP: u8 = 0x13;
    pub const RC_FETCH_ADD: u8 = 0x14;
    pub const RC_SEND_LAST_INV: u8 = 0x16;
    pub const RC_SEND_ONLY_INV: u8 = 0x17;
    /// FLUSH (IBTA 1.5 memory placement extensions): FETH + RETH.
    pub const RC_FLUSH: u8 = 0x1c;
    /// ATOMIC_WRITE (IBTA 1.5): RETH + 8 bytes of payload.
    pub const RC_ATOMIC_WRITE: u8 = 0x1d;
    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
    /// Transport bits (7:5) of the UC opcodes, which are the RC SEND and
    /// RDMA WRITE opcodes 0x00..0x0b with these bits set (IBTA table 38).
    pub const UC: u8 = 0x20;
    pub const UC_SEND_FIRST: u8 = 0x20;
    pub const UC_SEND_MIDDLE: u8 = 0x21;
    pub const UC_SEND_LAST: u8 = 0x22;
    pub const UC_SEND_LAST_IMM: u8 = 0x23;
    pub const UC_SEND_ONLY: u8 = 0x24;
    pub const UC_SEND_ONLY_IMM: u8 = 0x25;
    pub const UC_WRITE_FIRST: u8 = 0x26;
    pub const UC_WRITE_MIDDLE: u8 = 0x27;
    pub const UC_WRITE_LAST: u8 = 0x28;
    pub const UC_WRITE_LAST_IMM: u8 = 0x29;
    pub const UC_WRITE_ONLY: u8 = 0x2a;
    pub const UC_WRITE_ONLY_IMM: u8 = 0x2b;

    /// The UC opcode of an RC SEND or RDMA WRITE opcode.
    pub const fn uc_of(rc: u8) -> u8 {
        rc | UC
    }

    /// The RC opcode with the same headers and meaning as UC opcode `uc`
    /// (None if `uc` is no UC opcode).
    pub const fn rc_of_uc(uc: u8) -> Option<u8> {
        if uc >= UC_SEND_FIRST && uc <= UC_WRITE_ONLY_IMM {
            Some(uc & !UC)
        } else {
            None
        }
    }
}

/// Extended headers an opcode carries (bit set).
pub mod ext {
    #![allow(missing_docs)]
    pub const RETH: u16 = 1;
    pub const AETH: u16 = 2;
    pub const DETH: u16 = 4;
    pub const IMM: u16 = 8;
    /// Carries payload.
    pub const PAYLOAD: u16 = 16;
    pub const IETH: u16 = 32;
    /// AtomicETH (atomic requests).
    pub const ATOMIC: u16 = 64;
    /// AtomicAckETH (ATOMIC_ACKNOWLEDGE).
    pub const ATOMIC_ACK: u16 = 128;
    /// FETH (FLUSH), before the RETH.
    pub const FETH: u16 = 256;
}

/// The extended headers of `opcode` (`ext::*` bits), `None` if ferroce does
/// not know the opcode.
pub fn opcode_ext(opcode: u8) -> Option<u16> {
    use ext::*;
    Some(match opcode {
        op::RC_SEND_FIRST | op::RC_SEND_MIDDLE | op::RC_SEND_LAST | op::RC_SEND_ONLY => PAYLOAD,
        op::RC_SEND_LAST_IMM | op::RC_SEND_ONLY_IMM => PAYLOAD | IMM,
        op::RC_WRITE_FIRST | op::RC_WRITE_ONLY => PAYLOAD | RETH,
        op::RC_WRITE_MIDDLE | op::RC_WRITE_LAST => PAYLOAD,
        op::RC_WRITE_LAST_IMM => PAYLOAD | IMM,
        op::RC_WRITE_ONLY_IMM => PAYLOAD | RETH | IMM,
        op::RC_READ_REQUEST => RETH,
        op::RC_READ_RESPONSE_FIRST | op::RC_READ_RESPONSE_LAST | op::RC_READ_RESPONSE_ONLY => {
            PAYLOAD | AETH
        }
        op::RC_READ_RESPONSE_MIDDLE => PAYLOAD,
        op::RC_ACK => AETH,
        op::RC_ATOMIC_ACK => AETH | ATOMIC_ACK,
        op::RC_CMP_SWAP | op::RC_FETCH_ADD => ATOMIC,
        op::RC_SEND_LAST_INV | op::RC_SEND_ONLY_INV => PAYLOAD | IETH,
        op::RC_FLUSH => FETH | RETH,
        op::RC_ATOMIC_WRITE => PAYLOAD | RETH,
        op::UD_SEND_ONLY => PAYLOAD | DETH,
        op::UD_SEND_ONLY_IMM => PAYLOAD | DETH | IMM,
        // UC SEND and RDMA WRITE: the headers of their RC twins.
        op::UC_SEND_FIRST..=op::UC_WRITE_ONLY_IMM => return opcode_ext(opcode & !op::UC),
        _ => return None,
    })
}

/// Bytes of the transport headers (BTH + extended) of `opcode`.
pub fn transport_hdr_len(opcode: u8) -> Option<usize> {
    let e = opcode_ext(opcode)?;
    let mut n = BTH_LEN;
    if e & ext::FETH != 0 {
        n += FETH_LEN;
    }
    if e & ext::RETH != 0 {
        n += RETH_LEN;
    }
    if e & ext::AETH != 0 {
        n += AETH_LEN;
    }
    if e & ext::DETH != 0 {
        n += DETH_LEN;
    }
    if e & ext::IMM != 0 {
        n += IMM_LEN;
    }
    if e & ext::IETH != 0 {
        n += IETH_LEN;
    }
    if e & ext::ATOMIC != 0 {
        n += ATOMIC_ETH_LEN;
    }
    if e & ext::ATOMIC_ACK != 0 {
        n += ATOMIC_ACK_ETH_LEN;
    }
    Some(n)
}

/// Network encapsulation of a RoCE packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetKind {
    /// RoCE v1: Ethertype 0x8915 + GRH.
    RoceV1,
    /// RoCE v2 over IPv4.
    Ipv4,
    /// RoCE v2 over IPv6.
    Ipv6,
}

impl NetKind {
    /// From `hw::NET_*`.
    pub fn from_hw(net: u8) -> Option<Self> {
        match net {
            hw::NET_ROCE_V1 => Some(Self::RoceV1),
            hw::NET_IPV4 => Some(Self::Ipv4),
            hw::NET_IPV6 => Some(Self::Ipv6),
            _ => None,
        }
    }
    /// To `hw::NET_*`.
    pub fn to_hw(self) -> u8 {
        match self {
            Self::RoceV1 => hw::NET_ROCE_V1,
            Self::Ipv4 => hw::NET_IPV4,
            Self::Ipv6 => hw::NET_IPV6,
        }
    }
}

/// Network header fields (IPv4 addresses are carried as IPv4-mapped GIDs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetHdr {
    /// Encapsulation.
    pub kind: NetKind,
    /// Source GID / address.
    pub sgid: [u8; 16],
    /// Destination GID / address.
    pub dgid: [u8; 16],
    /// Traffic class (IPv4: TOS).
    pub traffic_class: u8,
    /// Flow label (20 bits; not in IPv4).
    pub flow_label: u32,
    /// Hop limit (IPv4: TTL).
    pub hop_limit: u8,
}

/// Base transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// MigReq.
    pub mig: bool,
    /// Pad count (set by the encoder from the payload length).
    pub pad: u8,
    /// P_Key.
    pub pkey: u16,
    /// FECN/BECN bits (byte 4, masked in the ICRC).
    pub resv8a: u8,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

/// RDMA extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// DMA length.
    pub len: u32,
}

/// ACK extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    /// Syndrome (`aeth::*` type in bits 7:5).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

/// Atomic extended transport header (IBTA 9.3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Virtual address of the remote 64-bit word.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Swap data (CMP_SWAP) or add data (FETCH_ADD).
    pub swap_add: u64,
    /// Compare data (CMP_SWAP).
    pub compare: u64,
}

/// FLUSH extended transport header (IBTA 1.5; rxe `rxe_feth`): one
/// big-endian word, the placement type in bits 3:0 and the selectivity
/// level in bits 5:4, the rest reserved.
pub mod feth {
    /// Placement type bits (`hw::FLUSH_GLOBAL` | `hw::FLUSH_PERSISTENT`).
    pub const TYPE_MASK: u32 = 0x0f;
    /// Selectivity level bits (`hw::FLUSH_RANGE`, `hw::FLUSH_MR`).
    pub const LEVEL_MASK: u32 = 0x30;
    /// Shift of the selectivity level.
    pub const LEVEL_SHIFT: u32 = 4;

    /// The FETH word of placement type `ty` and selectivity `level`.
    pub const fn encode(ty: u8, level: u8) -> u32 {
        (ty as u32 & TYPE_MASK) | ((level as u32) << LEVEL_SHIFT & LEVEL_MASK)
    }

    /// The placement type of a FETH word.
    pub const fn placement_type(word: u32) -> u8 {
        (word & TYPE_MASK) as u8
    }

    /// The selectivity level of a FETH word.
    pub const fn level(word: u32) -> u8 {
        ((word & LEVEL_MASK) >> LEVEL_SHIFT) as u8
    }

    /// The reserved bits of a FETH word.
    pub const fn reserved(word: u32) -> u32 {
        word & !(TYPE_MASK | LEVEL_MASK)
    }
}

/// Datagram extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    /// Q_Key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

/// AETH syndromes (IBTA vol. 1 table 42).
pub mod aeth {
    #![allow(missing_docs)]
    pub const TYPE_MASK: u8 = 0xe0;
    pub const ACK: u8 = 0x00;
    pub const RNR_NAK: u8 = 0x20;
    pub const NAK: u8 = 0x60;
    /// ACK with the credit count "invalid": no end-to-end credit limit.
    pub const ACK_UNLIMITED: u8 = 0x1f;
    pub const NAK_PSN_SEQ: u8 = 0x60;
    pub const NAK_INVALID_REQ: u8 = 0x61;
    pub const NAK_REM_ACCESS: u8 = 0x62;
    pub const NAK_REM_OP: u8 = 0x63;
}

/// One RoCE packet (headers + payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Source MAC.
    pub smac: [u8; 6],
    /// The TCI of the frame's 802.1Q tag, `None` if untagged. A decoded
    /// priority tag (VLAN ID 0) is kept as it came.
    pub vlan: Option<u16>,
    /// Network header.
    pub net: NetHdr,
    /// UDP source port (RoCE v2).
    pub udp_sport: u16,
    /// IPv4 identification (ignored otherwise).
    pub ip_id: u16,
    /// BTH.
    pub bth: Bth,
    /// RETH (opcodes that carry one).
    pub reth: Reth,
    /// AETH (opcodes that carry one).
    pub aeth: Aeth,
    /// DETH (UD).
    pub deth: Deth,
    /// Immediate data, wire byte order (opcodes with ImmDt).
    pub imm: [u8; 4],
    /// IETH: the key to invalidate (SEND with invalidate opcodes).
    pub ieth: u32,
    /// AtomicETH (atomic requests).
    pub atomic: AtomicEth,
    /// AtomicAckETH: the original remote value (ATOMIC_ACKNOWLEDGE).
    pub atomic_ack: u64,
    /// FETH word (FLUSH; [`feth`] takes it apart).
    pub feth: u32,
    /// Payload (without pad and ICRC).
    pub payload: &'a [u8],
}

impl<'a> Packet<'a> {
    /// A packet with network header `net`, `bth` and `payload`, no
    /// extension header, untagged, from and to MAC 0, UDP source port 0
    /// and IPv4 identification 0; callers fill in the rest.
    pub fn new(net: NetHdr, bth: Bth, payload: &'a [u8]) -> Self {
        Self {
            dmac: [0; 6],
            smac: [0; 6],
            vlan: None,
            net,
            udp_sport: 0,
            ip_id: 0,
            bth,
            reth: Reth::default(),
            aeth: Aeth::default(),
            deth: Deth::default(),
            imm: [0; 4],
            ieth: 0,
            atomic: AtomicEth::default(),
            atomic_ack: 0,
            feth: 0,
            payload,
        }
    }
}

/// Why a frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Shorter than its headers claim.
    #[error("truncated")]
    Truncated,
    /// Not a RoCE frame (other Ethertype, protocol or UDP port).
    #[error("not RoCE")]
    NotRoce,
    /// Bad IPv4/IPv6/GRH header (version, length, options, fragment).
    #[error("bad network header")]
    BadNetHdr,
    /// IPv4 header checksum mismatch.
    #[error("bad IPv4 checksum")]
    BadIpChecksum,
    /// Bad UDP header (length).
    #[error("bad UDP header")]
    BadUdp,
    /// Unknown opcode or bad BTH (version, pad).
    #[error("bad BTH")]
    BadBth,
    /// ICRC mismatch.
    #[error("bad ICRC")]
    BadIcrc,
}

/// The Ethertype, 802.1Q TCI (if tagged) and network header offset of an
/// Ethernet frame: one tag is looked through, a second one is not (its
/// Ethertype is 0x8100 again, which is no RoCE).
pub fn l2_header(frame: &[u8]) -> Option<(u16, Option<u16>, usize)> {
    match be16(frame, 12)? {
        ETH_P_8021Q => Some((
            be16(frame, 16)?,
            Some(be16(frame, 14)?),
            ETH_HLEN + VLAN_HLEN,
        )),
        et => Some((et, None, ETH_HLEN)),
    }
}

/// Whether `mac` is a group (multicast or broadcast) address: bit 0 of its
/// first byte is set.
pub fn is_multicast_mac(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// Whether an Ethernet frame is RoCE (v1 Ethertype or v2 UDP port 4791),
/// untagged or in one 802.1Q tag; used by the port to steer frames. Only
/// looks at headers, never panics.
pub fn is_roce(frame: &[u8]) -> bool {
    let Some((et, _, l3)) = l2_header(frame) else {
        return false;
    };
    match et {
        ETH_P_ROCE => true,
        ETH_P_IPV4 => {
            let Some(&vihl) = frame.get(l3) else {
                return false;
            };
            let ihl = usize::from(vihl & 0xf) * 4;
            frame.get(l3 + 9) == Some(&17) && be16(frame, l3 + ihl + 2) == Some(ROCE_V2_PORT)
        }
        ETH_P_IPV6 => {
            frame.get(l3 + 6) == Some(&17) && be16(frame, l3 + IPV6_HLEN + 2) == Some(ROCE_V2_PORT)
        }
        _ => false,
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

/// The Internet checksum of `data` (IPv4 header checksum).
pub fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut it = data.chunks_exact(2);
    for c in &mut it {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let Some(&b) = it.remainder().first() {
        sum += u32::from(b) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The RoCE v2 UDP source port for a flow: the flow label folded into
/// 0xc000..=0xffff as `rdma_flow_label_to_udp_sport` does, or, without a
/// flow label, a hash of the two QPNs in the same range.
pub fn udp_sport(flow_label: u32, src_qpn: u32, dst_qpn: u32) -> u16 {
    let fl = if flow_label & 0xfffff != 0 {
        flow_label & 0xfffff
    } else {
        // rdma_calc_flow_label style hash of the QPN pair.
        let v = u64::from(src_qpn & 0xff_ffff) * u64::from(dst_qpn & 0xff_ffff);
        let v = v ^ (v >> 20) ^ (v >> 40);
        (v as u32) & 0xfffff
    };
    let low = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);
    (low as u16) | 0xc000
}

fn net_hdr_len(kind: NetKind) -> usize {
    match kind {
        NetKind::RoceV1 => IPV6_HLEN,
        NetKind::Ipv4 => IPV4_HLEN + UDP_HLEN,
        NetKind::Ipv6 => IPV6_HLEN + UDP_HLEN,
    }
}

/// Total frame length of a packet with `opcode` and `payload_len` bytes.
pub fn frame_len(kind: NetKind, opcode: u8, payload_len: usize) -> Option<usize> {
    let pad = (4 - payload_len % 4) % 4;
    ETH_HLEN
        .checked_add(net_hdr_len(kind))?
        .checked_add(transport_hdr_len(opcode)?)?
        .checked_add(payload_len)?
        .checked_add(pad + ICRC_LEN)
}

/// Largest payload per packet for an IB MTU enum (`MTU_256`..`MTU_4096`).
pub fn mtu_bytes(mtu: u8) -> usize {
    match mtu {
        1 => 256,
        2 => 512,
        3 => 1024,
        4 => 2048,
        _ => 4096,
    }
}

/// ICRC over a frame laid out by [`encode`] / accepted by [`decode`]:
/// `l3` is the offset of the IP header / GRH, `end` the end of the pad
/// bytes (start of the ICRC field).
fn compute_icrc(frame: &[u8], kind: NetKind, l3: usize, end: usize) -> Option<u32> {
    let mut pseudo = [0u8; IPV6_HLEN + UDP_HLEN + BTH_LEN];
    let hlen = net_hdr_len(kind);
    let plen = hlen + BTH_LEN;
    let src = frame.get(l3..l3.checked_add(plen)?)?;
    let p = pseudo.get_mut(..plen)?;
    p.copy_from_slice(src);
    match kind {
        NetKind::Ipv4 => {
            p[1] = 0xff; // TOS
            p[8] = 0xff; // TTL
            p[10] = 0xff; // checksum
            p[11] = 0xff;
            p[IPV4_HLEN + 6] = 0xff; // UDP checksum
            p[IPV4_HLEN + 7] = 0xff;
        }
        NetKind::Ipv6 | NetKind::RoceV1 => {
            p[0] |= 0x0f; // traffic class (high nibble in byte 0)
            p[1] = 0xff; // traffic class low nibble + flow label
            p[2] = 0xff;
            p[3] = 0xff;
            p[7] = 0xff; // hop limit
            if kind == NetKind::Ipv6 {
                p[IPV6_HLEN + 6] = 0xff;
                p[IPV6_HLEN + 7] = 0xff;
            }
        }
    }
    p[hlen + 4] = 0xff; // BTH resv8a
    let rest = frame.get(l3.checked_add(plen)?..end)?;
    Some(icrc(p, rest))
}

/// Appends the Ethernet frame of `p` to `out` (cleared first). The pad count
/// is computed from the payload; the IPv4 checksum and the ICRC are filled in.
/// Returns `false` (and leaves `out` empty) for an unknown opcode or a
/// payload too large for one frame.
pub fn encode(p: &Packet<'_>, out: &mut Vec<u8>) -> bool {
    encode_with(
        p,
        p.payload.len(),
        |dst| {
            dst.copy_from_slice(p.payload);
            true
        },
        out,
    )
}

/// [`encode`] for a payload that is not in memory yet: `p.payload` is
/// ignored, and `fill` writes the `len` payload bytes straight into their
/// place in the frame (a DMA gather from guest memory), before the ICRC is
/// computed over them. Returns `false` (and leaves `out` empty) where
/// [`encode`] does, and if `fill` does.
pub fn encode_with(
    p: &Packet<'_>,
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    let Some(e) = opcode_ext(p.bth.opcode) else {
        return false;
    };
    let has_payload = e & ext::PAYLOAD != 0;
    let payload_len = if has_payload { len } else { 0 };
    if payload_len > 9000 {
        return false;
    }
    let pad = (4 - payload_len % 4) % 4;
    let Some(tlen) = transport_hdr_len(p.bth.opcode) else {
        return false;
    };
    let ib_len = tlen + payload_len + pad + ICRC_LEN;
    out.extend_from_slice(&p.dmac);
    out.extend_from_slice(&p.smac);
    if let Some(tci) = p.vlan {
        out.extend_from_slice(&ETH_P_8021Q.to_be_bytes());
        out.extend_from_slice(&tci.to_be_bytes());
    }
    let l3 = out.len() + 2;
    match p.net.kind {
        NetKind::Ipv4 => {
            out.extend_from_slice(&ETH_P_IPV4.to_be_bytes());
            let total = (IPV4_HLEN + UDP_HLEN + ib_len) as u16;
            out.extend_from_slice(&[0x45, p.net.traffic_class]);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&p.ip_id.to_be_bytes());
            out.extend_from_slice(&0x4000u16.to_be_bytes()); // DF
            out.extend_from_slice(&[p.net.hop_limit, 17, 0, 0]);
            out.extend_from_slice(&p.net.sgid[12..]);
            out.extend_from_slice(&p.net.dgid[12..]);
            let ck = inet_checksum(&out[l3..l3 + IPV4_HLEN]);
            out[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
        }
        NetKind::Ipv6 | NetKind::RoceV1 => {
            let v1 = p.net.kind == NetKind::RoceV1;
            out.extend_from_slice(&(if v1 { ETH_P_ROCE } else { ETH_P_IPV6 }).to_be_bytes());
            let w = (6u32 << 28)
                | (u32::from(p.net.traffic_class) << 20)
                | (p.net.flow_label & 0xfffff);
            out.extend_from_slice(&w.to_be_bytes());
            let plen = if v1 { ib_len } else { UDP_HLEN + ib_len } as u16;
            out.extend_from_slice(&plen.to_be_bytes());
            out.push(if v1 { GRH_NEXT_HDR_IBA } else { 17 });
            out.push(p.net.hop_limit);
            out.extend_from_slice(&p.net.sgid);
            out.extend_from_slice(&p.net.dgid);
        }
    }
    if p.net.kind != NetKind::RoceV1 {
        out.extend_from_slice(&p.udp_sport.to_be_bytes());
        out.extend_from_slice(&ROCE_V2_PORT.to_be_bytes());
        out.extend_from_slice(&((UDP_HLEN + ib_len) as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
    let b = &p.bth;
    out.push(b.opcode);
    out.push(
        (u8::from(b.se) << 7) | (u8::from(b.mig) << 6) | ((pad as u8) << 4), /* tver 0 */
    );
    out.extend_from_slice(&b.pkey.to_be_bytes());
    out.push(b.resv8a);
    out.extend_from_slice(&(b.dest_qp & 0xff_ffff).to_be_bytes()[1..]);
    out.extend_from_slice(&((u32::from(b.ack_req) << 31) | (b.psn & 0xff_ffff)).to_be_bytes());
    if e & ext::DETH != 0 {
        out.extend_from_slice(&p.deth.qkey.to_be_bytes());
        out.extend_from_slice(&(p.deth.src_qp & 0xff_ffff).to_be_bytes());
    }
    if e & ext::FETH != 0 {
        out.extend_from_slice(&p.feth.to_be_bytes());
    }
    if e & ext::RETH != 0 {
        out.extend_from_slice(&p.reth.va.to_be_bytes());
        out.extend_from_slice(&p.reth.rkey.to_be_bytes());
        out.extend_from_slice(&p.reth.len.to_be_bytes());
    }
    if e & ext::AETH != 0 {
        let v = (u32::from(p.aeth.syndrome) << 24) | (p.aeth.msn & 0xff_ffff);
        out.extend_from_slice(&v.to_be_bytes());
    }
    if e & ext::IMM != 0 {
        out.extend_from_slice(&p.imm);
    }
    if e & ext::IETH != 0 {
        out.extend_from_slice(&p.ieth.to_be_bytes());
    }
    if e & ext::ATOMIC != 0 {
        out.extend_from_slice(&p.atomic.va.to_be_bytes());
        out.extend_from_slice(&p.atomic.rkey.to_be_bytes());
        out.extend_from_slice(&p.atomic.swap_add.to_be_bytes());
        out.extend_from_slice(&p.atomic.compare.to_be_bytes());
    }
    if e & ext::ATOMIC_ACK != 0 {
        out.extend_from_slice(&p.atomic_ack.to_be_bytes());
    }
    let at = out.len();
    out.resize(at + payload_len + pad, 0);
    if has_payload && !fill(&mut out[at..at + payload_len]) {
        out.clear();
        return false;
    }
    let end = out.len();
    let Some(icrc) = compute_icrc(out, p.net.kind, l3, end) else {
        out.clear();
        return false;
    };
    out.extend_from_slice(&icrc.to_le_bytes());
    true
}

/// Parses and checks one Ethernet frame.
pub fn decode(frame: &[u8]) -> Result<Packet<'_>, ParseError> {
    use ParseError::*;
    let (et, vlan, l3) = l2_header(frame).ok_or(Truncated)?;
    let mut dmac = [0u8; 6];
    let mut smac = [0u8; 6];
    dmac.copy_from_slice(frame.get(0..6).ok_or(Truncated)?);
    smac.copy_from_slice(frame.get(6..12).ok_or(Truncated)?);
    let mut sgid = [0u8; 16];
    let mut dgid = [0u8; 16];
    let (kind, tc, fl, hop, ip_id, ib_start, ib_end);
    let mut udp_sport = 0;
    match et {
        ETH_P_IPV4 => {
            let h = frame.get(l3..l3 + IPV4_HLEN).ok_or(Truncated)?;
            if h[0] != 0x45 {
                // RoCE v2 never uses IP options.
                return Err(if h[0] >> 4 == 4 { BadNetHdr } else { NotRoce });
            }
            if h[9] != 17 {
                return Err(NotRoce);
            }
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]);
            if frag & 0x3fff != 0 {
                return Err(BadNetHdr);
            }
            if inet_checksum(h) != 0 {
                return Err(BadIpChecksum);
            }
            if total < IPV4_HLEN + UDP_HLEN {
                return Err(BadNetHdr);
            }
            let end = l3.checked_add(total).ok_or(Truncated)?;
            if end > frame.len() {
                return Err(Truncated);
            }
            kind = NetKind::Ipv4;
            tc = h[1];
            fl = 0;
            hop = h[8];
            ip_id = u16::from_be_bytes([h[4], h[5]]);
            sgid[10] = 0xff;
            sgid[11] = 0xff;
            dgid[10] = 0xff;
            dgid[11] = 0xff;
            sgid[12..].copy_from_slice(&h[12..16]);
            dgid[12..].copy_from_slice(&h[16..20]);
            ib_start = l3 + IPV4_HLEN + UDP_HLEN;
            ib_end = end;
        }
        ETH_P_IPV6 | ETH_P_ROCE => {
            let h = frame.get(l3..l3 + IPV6_HLEN).ok_or(Truncated)?;
            let v1 = et == ETH_P_ROCE;
            if h[0] >> 4 != 6 {
                return Err(BadNetHdr);
            }
            if v1 && h[6] != GRH_NEXT_HDR_IBA {
                return Err(BadNetHdr);
            }
            if !v1 && h[6] != 17 {
                return Err(NotRoce);
            }
            let w = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let end = (l3 + IPV6_HLEN).checked_add(plen).ok_or(Truncated)?;
            if end > frame.len() {
                return Err(Truncated);
            }
            kind = if v1 { NetKind::RoceV1 } else { NetKind::Ipv6 };
            tc = (w >> 20) as u8;
            fl = w & 0xfffff;
            hop = h[7];
            ip_id = 0;
            sgid.copy_from_slice(&h[8..24]);
            dgid.copy_from_slice(&h[24..40]);
            ib_start = l3 + IPV6_HLEN + if v1 { 0 } else { UDP_HLEN };
            ib_end = end;
        }
        _ => return Err(NotRoce),
    }
    if kind != NetKind::RoceV1 {
        let u = ib_start - UDP_HLEN;
        let sport = be16(frame, u).ok_or(Truncated)?;
        let dport = be16(frame, u + 2).ok_or(Truncated)?;
        let ulen = usize::from(be16(frame, u + 4).ok_or(Truncated)?);
        if dport != ROCE_V2_PORT {
            return Err(NotRoce);
        }
        if u.checked_add(ulen) != Some(ib_end) {
            return Err(BadUdp);
        }
        udp_sport = sport;
    }
    let ib = frame.get(ib_start..ib_end).ok_or(Truncated)?;
    if ib.len() < BTH_LEN + ICRC_LEN {
        return Err(Truncated);
    }
    let opcode = ib[0];
    let e = opcode_ext(opcode).ok_or(BadBth)?;
    if ib[1] & 0x0f != 0 {
        return Err(BadBth); // transport header version
    }
    let bth = Bth {
        opcode,
        se: ib[1] & 0x80 != 0,
        mig: ib[1] & 0x40 != 0,
        pad: (ib[1] >> 4) & 3,
        pkey: u16::from_be_bytes([ib[2], ib[3]]),
        resv8a: ib[4],
        dest_qp: u32::from_be_bytes([0, ib[5], ib[6], ib[7]]),
        ack_req: ib[8] & 0x80 != 0,
        psn: u32::from_be_bytes([0, ib[9], ib[10], ib[11]]),
    };
    let tlen = transport_hdr_len(opcode).ok_or(BadBth)?;
    let icrc_at = ib.len() - ICRC_LEN;
    if tlen > icrc_at {
        return Err(Truncated);
    }
    let with_pad = icrc_at - tlen;
    let pad = usize::from(bth.pad);
    if pad > with_pad || (e & ext::PAYLOAD == 0 && with_pad != 0) {
        return Err(BadBth);
    }
    let got = u32::from_le_bytes([
        ib[icrc_at],
        ib[icrc_at + 1],
        ib[icrc_at + 2],
        ib[icrc_at + 3],
    ]);
    let want = compute_icrc(frame, kind, l3, ib_start + icrc_at).ok_or(Truncated)?;
    if got != want {
        return Err(BadIcrc);
    }
    let mut at = BTH_LEN;
    let mut deth = Deth::default();
    let mut reth = Reth::default();
    let mut aeth = Aeth::default();
    let mut imm = [0u8; 4];
    let mut ieth = 0u32;
    let mut feth = 0u32;
    if e & ext::DETH != 0 {
        deth.qkey = be32(ib, at).ok_or(Truncated)?;
        deth.src_qp = be32(ib, at + 4).ok_or(Truncated)? & 0xff_ffff;
        at += DETH_LEN;
    }
    if e & ext::FETH != 0 {
        feth = be32(ib, at).ok_or(Truncated)?;
        at += FETH_LEN;
    }
    if e & ext::RETH != 0 {
        reth.va = be64(ib, at).ok_or(Truncated)?;
        reth.rkey = be32(ib, at + 8).ok_or(Truncated)?;
        reth.len = be32(ib, at + 12).ok_or(Truncated)?;
        at += RETH_LEN;
    }
    if e & ext::AETH != 0 {
        let v = be32(ib, at).ok_or(Truncated)?;
        aeth.syndrome = (v >> 24) as u8;
        aeth.msn = v & 0xff_ffff;
        at += AETH_LEN;
    }
    if e & ext::IMM != 0 {
        imm.copy_from_slice(ib.get(at..at + IMM_LEN).ok_or(Truncated)?);
        at += IMM_LEN;
    }
    if e & ext::IETH != 0 {
        ieth = be32(ib, at).ok_or(Truncated)?;
        at += IETH_LEN;
    }
    let mut atomic = AtomicEth::default();
    if e & ext::ATOMIC != 0 {
        atomic.va = be64(ib, at).ok_or(Truncated)?;
        atomic.rkey = be32(ib, at + 8).ok_or(Truncated)?;
        atomic.swap_add = be64(ib, at + 12).ok_or(Truncated)?;
        atomic.compare = be64(ib, at + 20).ok_or(Truncated)?;
        at += ATOMIC_ETH_LEN;
    }
    let mut atomic_ack = 0u64;
    if e & ext::ATOMIC_ACK != 0 {
        atomic_ack = be64(ib, at).ok_or(Truncated)?;
        at += ATOMIC_ACK_ETH_LEN;
    }
    let payload = ib.get(at..icrc_at - pad).ok_or(Truncated)?;
    Ok(Packet {
        dmac,
        smac,
        vlan,
        net: NetHdr {
            kind,
            sgid,
            dgid,
            traffic_class: tc,
            flow_label: fl,
            hop_limit: hop,
        },
        udp_sport,
        ip_id,
        bth,
        reth,
        aeth,
        deth,
        imm,
        ieth,
        atomic,
        atomic_ack,
        feth,
        payload,
    })
}

/// PSN arithmetic on the 24-bit circle: `a - b` as a signed distance.
pub fn psn_diff(a: u32, b: u32) -> i32 {
    (((a.wrapping_sub(b)) << 8) as i32) >> 8
}

/// `psn + n` modulo 2^24.
pub fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & 0xff_ffff
}
