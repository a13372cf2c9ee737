// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the ferroce device (`ferroce-hw.h`, "BAR0 registers").
//!
//! `register!` takes literal offsets and bit ranges, so each definition is
//! tied to the header by a compile-time assertion below: a change of the
//! header that is not mirrored here fails the build instead of silently
//! drifting.

#![forbid(unsafe_code)]

use crate::bindings as hw;
use kernel::{
    io::{
        register,
        register::Register, //
    },
    pci, //
};

/// The register window of BAR0 the driver maps with compile-time checked
/// accessors (the rest of the BAR is MSI-X, owned by the PCI core).
pub(crate) const REGS_SIZE: usize = hw::FERROCE_REGS_SIZE as usize;

/// BAR0, mapped.
pub(crate) type Bar0<'a> = pci::Bar<'a, REGS_SIZE>;

/// BAR0, mapped and revoked when the device is unbound.
pub(crate) type DevresBar0 = pci::DevresBar<REGS_SIZE>;

register! {
    /// Programming model version.
    pub(crate) VERSION(u32) @ 0x000 {
        31:16 major => u16;
        15:0 minor => u16;
    }
    /// `FERROCE_CAP_*` feature bits.
    pub(crate) DEV_CAPS(u32) @ 0x004 {}
    /// "FRCE".
    pub(crate) MAGIC(u32) @ 0x008 {}
    /// Reset and enable.
    pub(crate) DEV_CTRL(u32) @ 0x010 {
        1:1 enable => bool;
        0:0 reset => bool;
    }
    /// Ready, resetting, fatal.
    pub(crate) DEV_STATUS(u32) @ 0x014 {
        2:2 fatal => bool;
        1:1 resetting => bool;
        0:0 ready => bool;
    }
    /// `FERROCE_FATAL_*` when FATAL is set.
    pub(crate) FATAL_CODE(u32) @ 0x018 {}
    /// Longest time a reset or enable may take, in ms.
    pub(crate) RESET_TIMEOUT_MS(u32) @ 0x01c {}
    /// Longest time an admin command may take, in ms.
    pub(crate) CMD_TIMEOUT_MS(u32) @ 0x020 {}
    /// Admin SQ base, low half.
    pub(crate) ADMINQ_BASE_LO(u32) @ 0x030 {}
    /// Admin SQ base, high half.
    pub(crate) ADMINQ_BASE_HI(u32) @ 0x034 {}
    /// Admin CQ base, low half.
    pub(crate) ADMINCQ_BASE_LO(u32) @ 0x038 {}
    /// Admin CQ base, high half.
    pub(crate) ADMINCQ_BASE_HI(u32) @ 0x03c {}
    /// Entries of both admin rings.
    pub(crate) ADMINQ_DEPTH(u32) @ 0x040 {}
    /// Admin doorbell: the new producer index.
    pub(crate) ADMINQ_DB(u32) @ 0x044 {
        15:0 pi => u16;
    }
    /// The device's admin consumer index.
    pub(crate) ADMINQ_CI(u32) @ 0x048 {
        15:0 ci => u16;
    }
    /// Async EQ base, low half.
    pub(crate) AEQ_BASE_LO(u32) @ 0x050 {}
    /// Async EQ base, high half.
    pub(crate) AEQ_BASE_HI(u32) @ 0x054 {}
    /// Async EQ entries.
    pub(crate) AEQ_DEPTH(u32) @ 0x058 {}
    /// EQ doorbell (any EQ).
    pub(crate) EQ_DB(u32) @ 0x05c {
        31:31 arm => bool;
        23:16 eqn => u8;
        15:0 ci => u16;
    }
    /// MSI-X vectors of the device.
    pub(crate) NUM_VECTORS(u32) @ 0x060 {}
    /// Port MAC bytes 2..5.
    pub(crate) PORT_MAC_LO(u32) @ 0x070 {}
    /// Port MAC bytes 0..1.
    pub(crate) PORT_MAC_HI(u32) @ 0x074 {}
    /// Link state.
    pub(crate) PORT_STATE(u32) @ 0x07c {
        0:0 link_up => bool;
    }
}

macro_rules! assert_offsets {
    ($($reg:ident = $hdr:ident),* $(,)?) => {
        $(const _: () = assert!(<$reg as Register>::OFFSET == hw::$hdr as usize);)*
    };
}

assert_offsets!(
    VERSION = FERROCE_REG_VERSION,
    DEV_CAPS = FERROCE_REG_DEV_CAPS,
    MAGIC = FERROCE_REG_MAGIC,
    DEV_CTRL = FERROCE_REG_DEV_CTRL,
    DEV_STATUS = FERROCE_REG_DEV_STATUS,
    FATAL_CODE = FERROCE_REG_FATAL_CODE,
    RESET_TIMEOUT_MS = FERROCE_REG_RESET_TIMEOUT_MS,
    CMD_TIMEOUT_MS = FERROCE_REG_CMD_TIMEOUT_MS,
    ADMINQ_BASE_LO = FERROCE_REG_ADMINQ_BASE_LO,
    ADMINQ_BASE_HI = FERROCE_REG_ADMINQ_BASE_HI,
    ADMINCQ_BASE_LO = FERROCE_REG_ADMINCQ_BASE_LO,
    ADMINCQ_BASE_HI = FERROCE_REG_ADMINCQ_BASE_HI,
    ADMINQ_DEPTH = FERROCE_REG_ADMINQ_DEPTH,
    ADMINQ_DB = FERROCE_REG_ADMINQ_DB,
    ADMINQ_CI = FERROCE_REG_ADMINQ_CI,
    AEQ_BASE_LO = FERROCE_REG_AEQ_BASE_LO,
    AEQ_BASE_HI = FERROCE_REG_AEQ_BASE_HI,
    AEQ_DEPTH = FERROCE_REG_AEQ_DEPTH,
    EQ_DB = FERROCE_REG_EQ_DB,
    NUM_VECTORS = FERROCE_REG_NUM_VECTORS,
    PORT_MAC_LO = FERROCE_REG_PORT_MAC_LO,
    PORT_MAC_HI = FERROCE_REG_PORT_MAC_HI,
    PORT_STATE = FERROCE_REG_PORT_STATE,
);

// Bit fields against the header's masks.
const _: () = {
    assert!(VERSION::from_raw(hw::FERROCE_VERSION_MAJOR_MASK).into_raw() == 0xffff_0000);
    assert!(hw::FERROCE_VERSION_MAJOR_SHIFT == 16 && hw::FERROCE_VERSION_MINOR_MASK == 0xffff);
    assert!(hw::FERROCE_CTRL_RESET == 1 << 0 && hw::FERROCE_CTRL_ENABLE == 1 << 1);
    assert!(hw::FERROCE_DEV_STATUS_READY == 1 << 0);
    assert!(hw::FERROCE_DEV_STATUS_RESETTING == 1 << 1);
    assert!(hw::FERROCE_DEV_STATUS_FATAL == 1 << 2);
    assert!(hw::FERROCE_ADMINQ_IDX_MASK == 0xffff);
    assert!(hw::FERROCE_EQ_DB_CI_MASK == 0xffff && hw::FERROCE_EQ_DB_EQN_SHIFT == 16);
    assert!(hw::FERROCE_EQ_DB_EQN_MASK == 0x00ff_0000 && hw::FERROCE_EQ_DB_ARM == 1 << 31);
    assert!(hw::FERROCE_PORT_STATE_LINK_UP == 1);
    assert!(hw::FERROCE_MSIX_TABLE_OFFSET as usize >= REGS_SIZE);
};

/// Bits 31:0 of `v`, for the `*_LO` register of a 64-bit pair (deliberately
/// truncating, as C's `lower_32_bits()`).
pub(crate) const fn lower_32_bits(v: u64) -> u32 {
    v as u32
}

/// Bits 63:32 of `v`, for the `*_HI` register of a 64-bit pair (C's
/// `upper_32_bits()`).
pub(crate) const fn upper_32_bits(v: u64) -> u32 {
    (v >> 32) as u32
}

/// Bits 15:0 of `v` (deliberately truncating, as C's `lower_16_bits()`): a
/// 16-bit index or id in the low half of a 32-bit word.
pub(crate) const fn lower_16_bits(v: u32) -> u16 {
    v as u16
}

/// Bits 7:0 of `v` (deliberately truncating): a byte-sized field of a 32-bit
/// word.
pub(crate) const fn lower_8_bits(v: u32) -> u8 {
    v as u8
}

/// The MAC encoded as in PORT_MAC_LO/HI (and QUERY_PORT's out[3..4]):
/// `lo = mac[2]<<24 | mac[3]<<16 | mac[4]<<8 | mac[5]`, `hi = mac[0]<<8 | mac[1]`.
pub(crate) fn mac_from_regs(lo: u32, hi: u32) -> [u8; 6] {
    let lo = lo.to_be_bytes();
    let hi = hi.to_be_bytes();
    [hi[2], hi[3], lo[0], lo[1], lo[2], lo[3]]
}

#[kernel::prelude::kunit_tests(ferroce_regs)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    /// PORT_MAC_LO/HI as the spec encodes them.
    #[test]
    fn mac_from_port_regs() {
        let mac = mac_from_regs(0x00fe_0001, 0x0000_5254);
        assert_eq!(mac, [0x52, 0x54, 0x00, 0xfe, 0x00, 0x01]);
    }

    /// The typed VERSION register splits major/minor as the header does.
    #[test]
    fn version_fields() {
        let v =
            VERSION::from_raw((hw::FERROCE_VERSION_MAJOR << hw::FERROCE_VERSION_MAJOR_SHIFT) | 7);
        assert_eq!(u32::from(v.major()), hw::FERROCE_VERSION_MAJOR);
        assert_eq!(v.minor(), 7);
    }

    /// The truncating helpers keep exactly the bits they name.
    #[test]
    fn word_parts() {
        let v = 0x1234_5678_9abc_def0u64;
        assert_eq!(
            (upper_32_bits(v), lower_32_bits(v)),
            (0x1234_5678, 0x9abc_def0)
        );
        assert_eq!(lower_16_bits(0x1234_5678), 0x5678);
        assert_eq!(lower_8_bits(0x1234_5678), 0x78);
    }

    /// EQ doorbell fields land where the header puts them.
    #[test]
    fn eq_doorbell_layout() {
        let db = EQ_DB::zeroed().with_ci(0x1234).with_eqn(3).with_arm(true);
        assert_eq!(
            db.into_raw(),
            0x1234 | (3 << hw::FERROCE_EQ_DB_EQN_SHIFT) | hw::FERROCE_EQ_DB_ARM
        );
    }
}
