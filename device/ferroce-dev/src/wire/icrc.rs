// SPDX-License-Identifier: GPL-2.0
//! CRC32 (IEEE 802.3, reflected, polynomial 0xedb88320) and the RoCE ICRC.
//!
//! The ICRC is the InfiniBand invariant CRC (IBTA vol. 1 §7.8.1, RoCE v2:
//! Annex A17.3.3): a CRC32 seeded with all ones, run over a masked LRH (8
//! bytes of ones, folded into [`ICRC_SEED`]), the masked network header
//! (IPv4: TOS, TTL, checksum; IPv6/GRH: traffic class, flow label, hop limit),
//! the UDP header with its checksum masked (RoCE v2 only), the BTH with
//! `resv8a` masked, the remaining transport headers, the payload and the pad
//! bytes. The ICRC field is the complement of that CRC, stored in little-endian
//! byte order (what rxe and hardware put on the wire).

/// CRC state after an all-ones seed and 8 bytes of 0xff (the masked LRH).
pub const ICRC_SEED: u32 = 0xdebb_20e3;

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// Raw CRC32 update without pre/post inversion (Linux `crc32_le`), with
/// the `crc32fast` crate (carry-less multiply where the CPU has it).
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // crc32fast keeps the inverted register as its state.
    let mut h = crc32fast::Hasher::new_with_initial(!crc);
    h.update(data);
    !h.finalize()
}

/// [`crc32_le`] with slice-by-8 tables: the portable reference the fast
/// path is checked against.
pub fn crc32_le_table(mut crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

/// The standard CRC-32 of `data` (as zlib's `crc32`).
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_le(!0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32_le(!0, &[0xff; 8]), ICRC_SEED);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut bytewise = !0u32;
        for &b in &data {
            bytewise = crc32_le_table(bytewise, &[b]);
        }
        assert_eq!(crc32_le(!0, &data), bytewise);
        for n in [0usize, 1, 7, 8, 9, 63, 64, 65, 999] {
            for seed in [0u32, !0, ICRC_SEED, 0x1234_5678] {
                assert_eq!(crc32_le(seed, &data[..n]), crc32_le_table(seed, &data[..n]));
            }
        }
    }
}
