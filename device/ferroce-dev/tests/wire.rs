// SPDX-License-Identifier: GPL-2.0
//! Wire format: encoder/decoder round trips, ICRC against vectors checked
//! independently by tshark (tests/data/roce-frames.pcap and
//! tests/data/roce-frames.icrc), and a randomized parser robustness test.
//!
//! Regenerate the pcap with `FERROCE_WRITE_PCAP=1 cargo test -p ferroce-dev
//! --test wire sample_frames_match_committed_pcap`, then re-validate with
//! tshark as described in tests/data/README.md.

use ferroce_dev::hw;
use ferroce_dev::wire::{
    self, feth, op, pcap, Aeth, AtomicEth, Bth, Deth, NetHdr, NetKind, Packet, ParseError, Reth,
};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

fn v6(last: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xfd;
    g[1] = 0x00;
    g[15] = last;
    g
}

fn base<'a>(kind: NetKind, opcode: u8, payload: &'a [u8]) -> Packet<'a> {
    let (sgid, dgid) = match kind {
        NetKind::Ipv4 => (v4([10, 0, 1, 36]), v4([10, 0, 1, 37])),
        _ => (v6(0x36), v6(0x37)),
    };
    let net = NetHdr {
        kind,
        sgid,
        dgid,
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 64,
    };
    let bth = Bth {
        opcode,
        pkey: 0xffff,
        dest_qp: 0x12,
        psn: 0x100,
        ..Bth::default()
    };
    Packet {
        dmac: [0x52, 0x54, 0x00, 0xfe, 0x00, 0x02],
        smac: [0x52, 0x54, 0x00, 0xfe, 0x00, 0x01],
        udp_sport: wire::udp_sport(0, 0x11, 0x12),
        ..Packet::new(net, bth, payload)
    }
}

/// Payload bytes `0, 1, 2, ...` of `len`.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + 5) as u8).collect()
}

/// The sample frames, one per header combination.
fn sample_frames() -> Vec<(String, Vec<u8>)> {
    let p64 = pattern(64);
    let p13 = pattern(13);
    let p1k = pattern(1024);
    let p7 = pattern(7);
    let mut v = Vec::new();
    let mut add = |name: &str, p: Packet<'_>| {
        let mut out = Vec::new();
        assert!(wire::encode(&p, &mut out), "{name}");
        v.push((name.to_string(), out));
    };
    add(
        "v4 RC SEND_ONLY 64B",
        base(NetKind::Ipv4, op::RC_SEND_ONLY, &p64),
    );
    let mut p = base(NetKind::Ipv4, op::RC_SEND_ONLY_IMM, &p13);
    p.imm = [0xde, 0xad, 0xbe, 0xef];
    p.bth.se = true;
    p.bth.ack_req = true;
    p.net.traffic_class = 0x68;
    p.net.hop_limit = 3;
    p.ip_id = 0x1234;
    add("v4 RC SEND_ONLY_IMM 13B pad 3", p);
    let mut p = base(NetKind::Ipv4, op::RC_WRITE_FIRST, &p1k);
    p.reth = Reth {
        va: 0x7f00_1234_5000,
        rkey: 0x0000_0105,
        len: 4096,
    };
    p.bth.psn = 0xff_fffe;
    add("v4 RC RDMA_WRITE_FIRST 1024B RETH", p);
    let mut p = base(NetKind::Ipv4, op::RC_WRITE_ONLY_IMM, &p7);
    p.reth = Reth {
        va: 0x1000,
        rkey: 0x201,
        len: 7,
    };
    p.imm = [1, 2, 3, 4];
    add("v4 RC RDMA_WRITE_ONLY_IMM 7B RETH ImmDt", p);
    let mut p = base(NetKind::Ipv4, op::RC_READ_REQUEST, &[]);
    p.reth = Reth {
        va: 0xdead_beef_0000,
        rkey: 0x301,
        len: 65536,
    };
    p.bth.ack_req = true;
    add("v4 RC RDMA_READ_REQUEST RETH", p);
    let mut p = base(NetKind::Ipv4, op::RC_READ_RESPONSE_ONLY, &p64);
    p.aeth = Aeth {
        syndrome: wire::aeth::ACK_UNLIMITED,
        msn: 7,
    };
    add("v4 RC RDMA_READ_RESPONSE_ONLY AETH", p);
    let mut p = base(NetKind::Ipv4, op::RC_ACK, &[]);
    p.aeth = Aeth {
        syndrome: wire::aeth::ACK_UNLIMITED,
        msn: 0x123456,
    };
    add("v4 RC ACK", p);
    let mut p = base(NetKind::Ipv4, op::RC_ACK, &[]);
    p.aeth = Aeth {
        syndrome: wire::aeth::RNR_NAK | 14,
        msn: 9,
    };
    add("v4 RC RNR NAK", p);
    let mut p = base(NetKind::Ipv6, op::RC_SEND_ONLY, &p64);
    p.net.flow_label = 0xabcde;
    p.net.traffic_class = 0x20;
    p.udp_sport = wire::udp_sport(0xabcde, 0, 0);
    add("v6 RC SEND_ONLY flow label", p);
    let mut p = base(NetKind::Ipv6, op::UD_SEND_ONLY, &p13);
    p.deth = Deth {
        qkey: 0x0000_1234,
        src_qp: 0x11,
    };
    add("v6 UD SEND_ONLY DETH", p);
    let mut p = base(NetKind::Ipv4, op::UD_SEND_ONLY_IMM, &p64);
    p.deth = Deth {
        qkey: 0x1111_1111,
        src_qp: 0x45,
    };
    p.imm = [9, 8, 7, 6];
    add("v4 UD SEND_ONLY_IMM DETH ImmDt", p);
    let mut p = base(NetKind::RoceV1, op::RC_SEND_ONLY, &p64);
    p.net.sgid = ferroce_dev::gid::eui64_link_local([0x52, 0x54, 0, 0xfe, 0, 1]);
    p.net.dgid = ferroce_dev::gid::eui64_link_local([0x52, 0x54, 0, 0xfe, 0, 2]);
    add("v1 RC SEND_ONLY GRH", p);
    let mut p = base(NetKind::RoceV1, op::UD_SEND_ONLY, &p7);
    p.deth = Deth {
        qkey: 0x22,
        src_qp: 0x33,
    };
    add("v1 UD SEND_ONLY GRH DETH", p);
    v
}

#[test]
fn sample_frames_match_committed_pcap() {
    let frames = sample_frames();
    let path = format!("{DATA}/roce-frames.pcap");
    if std::env::var_os("FERROCE_WRITE_PCAP").is_some() {
        let f = std::fs::File::create(&path).unwrap();
        let mut w = pcap::PcapWriter::new(f).unwrap();
        for (i, (_, fr)) in frames.iter().enumerate() {
            w.write(1_000_000 + i as u64, fr).unwrap();
        }
    }
    let committed = pcap::read_frames(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(committed.len(), frames.len());
    for ((name, fr), c) in frames.iter().zip(&committed) {
        assert_eq!(fr, c, "frame {name} differs from the committed pcap");
    }
}

/// The ICRC values tshark printed for each frame of the committed pcap
/// (tests/data/roce-frames.icrc, one `0x........` per frame, in order),
/// compared with what the decoder accepts and the encoder produced.
#[test]
fn icrc_matches_tshark_vectors() {
    let text = std::fs::read_to_string(format!("{DATA}/roce-frames.icrc")).unwrap();
    let want: Vec<u32> = text
        .lines()
        .filter(|l| l.starts_with("0x"))
        .map(|l| u32::from_str_radix(l.trim_start_matches("0x").trim(), 16).unwrap())
        .collect();
    let frames =
        pcap::read_frames(&std::fs::read(format!("{DATA}/roce-frames.pcap")).unwrap()).unwrap();
    assert_eq!(want.len(), frames.len());
    for (i, (fr, w)) in frames.iter().zip(&want).enumerate() {
        let n = fr.len();
        // tshark shows the ICRC as the big-endian number of the 4 wire bytes.
        let on_wire = u32::from_be_bytes([fr[n - 4], fr[n - 3], fr[n - 2], fr[n - 1]]);
        assert_eq!(on_wire, *w, "frame {i}");
        wire::decode(fr).unwrap_or_else(|e| panic!("frame {i}: {e}"));
    }
}

#[test]
fn round_trip_every_sample() {
    for (name, fr) in sample_frames() {
        let p = wire::decode(&fr).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut again = Vec::new();
        assert!(wire::encode(&p, &mut again));
        assert_eq!(again, fr, "{name}");
        assert!(wire::is_roce(&fr), "{name}");
    }
}

/// An 802.1Q tag sits between the MACs and the Ethertype, carries the TCI
/// as given, and changes nothing else: the tagged frame minus its 4 tag
/// bytes is the untagged frame, ICRC included (the ICRC does not cover L2).
#[test]
fn vlan_tag_round_trip() {
    let p64 = pattern(64);
    for kind in [NetKind::Ipv4, NetKind::Ipv6, NetKind::RoceV1] {
        for opcode in [op::RC_SEND_ONLY, op::UD_SEND_ONLY, op::RC_ACK] {
            let mut p = base(kind, opcode, &p64);
            let mut plain = Vec::new();
            assert!(wire::encode(&p, &mut plain));
            p.vlan = Some(3 << wire::VLAN_PRIO_SHIFT | 100);
            let mut tagged = Vec::new();
            assert!(wire::encode(&p, &mut tagged));
            assert_eq!(tagged.len(), plain.len() + wire::VLAN_HLEN);
            assert_eq!(tagged[12..16], [0x81, 0x00, 0x60, 0x64], "{kind:?}");
            let mut stripped = tagged[..12].to_vec();
            stripped.extend_from_slice(&tagged[16..]);
            assert_eq!(stripped, plain, "{kind:?} {opcode:#x}");
            assert!(wire::is_roce(&tagged));
            let d = wire::decode(&tagged).expect("tagged frame decodes");
            assert_eq!((d.vlan, d.net, d.bth), (p.vlan, p.net, p.bth));
            let mut again = Vec::new();
            assert!(wire::encode(&d, &mut again));
            assert_eq!(again, tagged, "{kind:?} {opcode:#x}");
            // A priority tag (VID 0) is kept as it came.
            p.vlan = Some(5 << wire::VLAN_PRIO_SHIFT);
            assert!(wire::encode(&p, &mut tagged));
            assert_eq!(wire::decode(&tagged).map(|d| d.vlan), Ok(p.vlan));
            // Every truncation of the tagged frame is refused, never a panic.
            for len in 0..tagged.len() {
                assert!(wire::decode(&tagged[..len]).is_err(), "{kind:?} {len}");
            }
        }
    }
    // Two tags: the inner Ethertype is 0x8100 again, which is no RoCE.
    let mut p = base(NetKind::Ipv4, op::RC_SEND_ONLY, &p64);
    p.vlan = Some(100);
    let mut once = Vec::new();
    assert!(wire::encode(&p, &mut once));
    let mut twice = once[..16].to_vec();
    twice.extend_from_slice(&once[12..]);
    assert!(!wire::is_roce(&twice));
    assert_eq!(wire::decode(&twice), Err(ParseError::NotRoce));
}

#[test]
fn corruption_is_detected() {
    for (name, fr) in sample_frames() {
        // Flip every bit after the Ethernet header in turn: each single-bit
        // error is refused (ICRC, IP checksum, lengths) or lands in a masked
        // ICRC field (IPv4 TOS/TTL, IPv6 TC/flow label/hop limit, UDP
        // checksum/sport, BTH resv8a) which does not change what the
        // transport sees.
        for byte in wire::ETH_HLEN..fr.len() {
            for bit in 0..8 {
                let mut c = fr.clone();
                c[byte] ^= 1 << bit;
                if let Ok(p) = wire::decode(&c) {
                    let o = wire::decode(&fr).unwrap();
                    assert_eq!(p.bth.opcode, o.bth.opcode, "{name} byte {byte}");
                    assert_eq!(p.bth.psn, o.bth.psn, "{name} byte {byte}");
                    assert_eq!(p.bth.dest_qp, o.bth.dest_qp, "{name} byte {byte}");
                    assert_eq!(p.payload, o.payload, "{name} byte {byte}");
                    assert_eq!(p.reth, o.reth, "{name} byte {byte}");
                    assert_eq!(p.net.sgid, o.net.sgid, "{name} byte {byte}");
                }
            }
        }
        // Every truncation is refused.
        for len in 0..fr.len() {
            assert!(wire::decode(&fr[..len]).is_err(), "{name} cut at {len}");
        }
        // A wrong ICRC byte is refused as such.
        let mut c = fr.clone();
        let n = c.len();
        c[n - 1] ^= 0x80;
        assert_eq!(wire::decode(&c), Err(ParseError::BadIcrc), "{name}");
    }
}

#[test]
fn ethernet_padding_is_ignored() {
    for (name, fr) in sample_frames() {
        let mut padded = fr.clone();
        padded.extend_from_slice(&[0u8; 17]);
        let a = wire::decode(&fr).unwrap();
        let b = wire::decode(&padded).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(a, b, "{name}");
    }
}

/// xorshift64*: deterministic pseudo-random numbers for the fuzz loop.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn parser_survives_random_mutations() {
    let samples = sample_frames();
    let mut rng = Rng(0x5eed_f00d_1234_5678);
    let mut accepted = 0u32;
    for _ in 0..200_000 {
        let (_, base) = &samples[rng.below(samples.len())];
        let mut f = base.clone();
        match rng.below(5) {
            0 => {
                let n = 1 + rng.below(8);
                for _ in 0..n {
                    let i = rng.below(f.len());
                    f[i] = rng.next() as u8;
                }
            }
            1 => f.truncate(rng.below(f.len() + 1)),
            2 => {
                let extra = rng.below(64);
                for _ in 0..extra {
                    f.push(rng.next() as u8);
                }
            }
            3 => {
                // Random header-length fields.
                for at in [16usize, 17, 18, 19, 38, 39, 42, 43, 55] {
                    if at < f.len() && rng.below(2) == 0 {
                        f[at] = rng.next() as u8;
                    }
                }
            }
            _ => {
                f = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
            }
        }
        let _ = wire::is_roce(&f);
        if let Ok(p) = wire::decode(&f) {
            accepted += 1;
            let mut out = Vec::new();
            let _ = wire::encode(&p, &mut out);
        }
    }
    // Extra Ethernet bytes and masked-field changes keep some frames valid.
    assert!(accepted > 0);
}

#[test]
fn udp_source_port_is_in_the_roce_range() {
    assert_eq!(wire::udp_sport(0, 2, 3) & 0xc000, 0xc000);
    assert_ne!(wire::udp_sport(0, 2, 3), wire::udp_sport(0, 4, 3));
    // rdma_flow_label_to_udp_sport(0xabcde) = 0xc000 | (0x3cde ^ 0x2a)
    assert_eq!(wire::udp_sport(0xabcde, 0, 0), 0xc000 | (0x3cde ^ 0x2a));
}

#[test]
fn psn_arithmetic_wraps() {
    assert_eq!(wire::psn_add(0xff_ffff, 2), 1);
    assert_eq!(wire::psn_diff(1, 0xff_ffff), 2);
    assert_eq!(wire::psn_diff(0xff_ffff, 1), -2);
}

/// The AtomicETH and AtomicAckETH sit right after the BTH (and AETH),
/// big-endian, as IBTA 9.3.5 and rxe lay them out; the requests carry no
/// payload.
#[test]
fn atomic_headers_byte_layout() {
    // Ethernet + IPv4 + UDP: the BTH starts here.
    let bth_at = 14 + 20 + 8;
    for opcode in [op::RC_CMP_SWAP, op::RC_FETCH_ADD] {
        let mut p = base(NetKind::Ipv4, opcode, &[]);
        p.atomic = AtomicEth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            swap_add: 0xa1a2_a3a4_a5a6_a7a8,
            compare: 0xc1c2_c3c4_c5c6_c7c8,
        };
        let mut f = Vec::new();
        assert!(wire::encode(&p, &mut f));
        assert_eq!(f.len(), bth_at + 12 + 28 + 4, "BTH + AtomicETH + ICRC");
        assert_eq!(f[bth_at], opcode);
        let eth = &f[bth_at + 12..bth_at + 40];
        assert_eq!(&eth[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&eth[8..12], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(
            &eth[12..20],
            &[0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8]
        );
        assert_eq!(
            &eth[20..28],
            &[0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8]
        );
        let d = wire::decode(&f).expect("decodes");
        assert_eq!(d.atomic, p.atomic);
        assert!(d.payload.is_empty());
    }
    let mut p = base(NetKind::Ipv6, op::RC_ATOMIC_ACK, &[]);
    p.aeth = Aeth {
        syndrome: wire::aeth::ACK_UNLIMITED,
        msn: 0x00ab_cdef,
    };
    p.atomic_ack = 0xfedc_ba98_7654_3210;
    let mut f = Vec::new();
    assert!(wire::encode(&p, &mut f));
    let bth_at = 14 + 40 + 8;
    assert_eq!(
        f.len(),
        bth_at + 12 + 4 + 8 + 4,
        "BTH + AETH + AtomicAckETH + ICRC"
    );
    assert_eq!(&f[bth_at + 12..bth_at + 16], &[0x1f, 0xab, 0xcd, 0xef]);
    assert_eq!(
        &f[bth_at + 16..bth_at + 24],
        &[0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10]
    );
    let d = wire::decode(&f).expect("decodes");
    assert_eq!(d.atomic_ack, p.atomic_ack);
    assert_eq!(d.aeth, p.aeth);
    // One byte short of the AtomicAckETH: the IB length check refuses it.
    let cut = f.len() - 5;
    let mut bad = f[..cut].to_vec();
    bad.extend_from_slice(&f[f.len() - 4..]);
    assert!(wire::decode(&bad).is_err());
}

/// 1.8 (IBTA 1.5 memory placement extensions), as rxe lays them out:
/// FLUSH (0x1c) is BTH, FETH (big-endian; type bits 3:0, level bits 5:4),
/// RETH, no payload; ATOMIC_WRITE (0x1d) is BTH, RETH, 8 bytes of payload;
/// both are answered by RDMA_READ_RESPONSE_ONLY (0x10) with the AETH and no
/// payload.
#[test]
fn placement_headers_byte_layout() {
    let bth_at = 14 + 20 + 8;
    let reth = Reth {
        va: 0x0102_0304_0506_0708,
        rkey: 0x1122_3344,
        len: 0x5566_7788,
    };
    let reth_bytes = [
        1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
    ];
    // FLUSH: a payload given to the encoder is not sent.
    let junk = [0xee; 8];
    let mut p = base(NetKind::Ipv4, op::RC_FLUSH, &junk);
    p.bth.ack_req = true;
    p.feth = feth::encode(hw::FLUSH_GLOBAL | hw::FLUSH_PERSISTENT, hw::FLUSH_MR);
    p.reth = reth;
    let mut f = Vec::new();
    assert!(wire::encode(&p, &mut f));
    assert_eq!(
        f.len(),
        bth_at + 12 + 4 + 16 + 4,
        "BTH + FETH + RETH + ICRC"
    );
    assert_eq!(f[bth_at], 0x1c);
    assert_eq!(&f[bth_at + 12..bth_at + 16], &[0, 0, 0, 0x13]);
    assert_eq!(&f[bth_at + 16..bth_at + 32], &reth_bytes);
    let d = wire::decode(&f).expect("decodes");
    assert_eq!((d.feth, d.reth), (0x13, reth));
    assert!(d.payload.is_empty());
    assert_eq!(feth::placement_type(d.feth), 3);
    assert_eq!(feth::level(d.feth), hw::FLUSH_MR);
    assert_eq!(feth::reserved(d.feth), 0);
    assert_eq!(feth::reserved(0xffff_ffc0), 0xffff_ffc0);
    assert_eq!(feth::encode(hw::FLUSH_GLOBAL, hw::FLUSH_RANGE), 0x01);
    // A FLUSH with bytes after its RETH is refused.
    let mut long = f[..f.len() - 4].to_vec();
    long.extend_from_slice(&[0; 4]);
    long.extend_from_slice(&f[f.len() - 4..]);
    assert!(wire::decode(&long).is_err());

    // ATOMIC_WRITE.
    let data = [0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18];
    let mut p = base(NetKind::Ipv4, op::RC_ATOMIC_WRITE, &data);
    p.reth = Reth { len: 8, ..reth };
    let mut f = Vec::new();
    assert!(wire::encode(&p, &mut f));
    assert_eq!(f.len(), bth_at + 12 + 16 + 8 + 4, "BTH + RETH + 8 + ICRC");
    assert_eq!(f[bth_at], 0x1d);
    assert_eq!(f[bth_at + 1] & 0x30, 0, "no pad");
    assert_eq!(&f[bth_at + 12..bth_at + 24], &reth_bytes[..12]);
    assert_eq!(&f[bth_at + 24..bth_at + 28], &[0, 0, 0, 8]);
    assert_eq!(&f[bth_at + 28..bth_at + 36], &data);
    let d = wire::decode(&f).expect("decodes");
    assert_eq!(d.payload, &data);
    assert_eq!(d.reth.len, 8);

    // The answer: RDMA_READ_RESPONSE_ONLY, AETH, no payload.
    let mut p = base(NetKind::Ipv4, op::RC_READ_RESPONSE_ONLY, &[]);
    p.aeth = Aeth {
        syndrome: wire::aeth::ACK_UNLIMITED,
        msn: 0x12_3456,
    };
    let mut f = Vec::new();
    assert!(wire::encode(&p, &mut f));
    assert_eq!(f.len(), bth_at + 12 + 4 + 4, "BTH + AETH + ICRC");
    assert_eq!(f[bth_at], 0x10);
    assert_eq!(&f[bth_at + 12..bth_at + 16], &[0x1f, 0x12, 0x34, 0x56]);
    let d = wire::decode(&f).expect("decodes");
    assert!(d.payload.is_empty());
    assert_eq!(d.aeth, p.aeth);
}
