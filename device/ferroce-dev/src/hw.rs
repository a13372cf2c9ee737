// SPDX-License-Identifier: GPL-2.0
//! Rust mirror of `include/ferroce/ferroce-hw.h`, the device programming model.
//!
//! Every constant here has the name of its C macro without the `FERROCE_`
//! prefix, every struct the CamelCase name of its C struct without the
//! `ferroce_` prefix and the same field names. All multi-byte fields are
//! little-endian in memory (the `__be32` immediate fields hold bytes in network
//! order and are copied, never interpreted). The agreement test
//! (`tests/agreement.rs`) compares all of it with the C header compiled by the
//! C compiler: a constant, size, offset or field width that differs fails it.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

#[cfg(target_endian = "big")]
compile_error!(
    "ferroce-dev reads device structures in host byte order and needs a little-endian host"
);

/// Layout of one hardware struct as seen from Rust (for the agreement test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructLayout {
    /// C name, e.g. `ferroce_cqe`.
    pub name: &'static str,
    /// `size_of` the struct.
    pub size: usize,
    /// `(field name, offset, size)` in declaration order.
    pub fields: Vec<(&'static str, usize, usize)>,
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

macro_rules! hw_consts {
    ($( $(#[$m:meta])* $name:ident : $t:ty = $v:expr; )*) => {
        $( $(#[$m])* pub const $name: $t = $v; )*
        /// Every constant as `(C macro name, value as u64)`.
        pub fn all_consts() -> Vec<(String, u64)> {
            vec![$( (format!("FERROCE_{}", stringify!($name)), $name as u64) ),*]
        }
    };
}

macro_rules! hw_structs {
    ($( $(#[$m:meta])* pub struct $name:ident = $cname:literal { $( $(#[$fm:meta])* pub $f:ident : $t:ty, )* } )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
            pub struct $name { $( $(#[$fm])* pub $f: $t, )* }

            impl $name {
                /// The C name of this struct.
                pub const C_NAME: &'static str = $cname;
                /// All-zero value.
                pub fn zeroed() -> Self { <Self as zerocopy::FromZeros>::new_zeroed() }
                /// Size/offset description for the agreement test.
                pub fn layout() -> StructLayout {
                    StructLayout {
                        name: $cname,
                        size: core::mem::size_of::<Self>(),
                        // A field named with a keyword (`r#type`) has the C name.
                        fields: vec![$( (stringify!($f).trim_start_matches("r#"), core::mem::offset_of!($name, $f), field_size(|s: &$name| &s.$f)) ),*],
                    }
                }
            }

            impl Default for $name {
                fn default() -> Self { Self::zeroed() }
            }
        )*
        /// Layouts of every hardware struct.
        pub fn all_layouts() -> Vec<StructLayout> {
            vec![$( $name::layout() ),*]
        }
    };
}

hw_consts! {
    /// `FERROCE_PCI_VENDOR_ID`.
    PCI_VENDOR_ID: u16 = 0x1b36;
    /// `FERROCE_PCI_DEVICE_ID`.
    PCI_DEVICE_ID: u16 = 0x0fe0;
    /// `FERROCE_PCI_SUBSYSTEM_VENDOR_ID`.
    PCI_SUBSYSTEM_VENDOR_ID: u16 = 0x1b36;
    /// `FERROCE_PCI_SUBSYSTEM_ID`.
    PCI_SUBSYSTEM_ID: u16 = 0x0fe0;
    /// `FERROCE_PCI_REVISION`.
    PCI_REVISION: u8 = 0x01;
    /// `FERROCE_PCI_CLASS_CODE`.
    PCI_CLASS_CODE: u32 = 0x028000;
    /// BAR0: registers + MSI-X
    BAR_REGS: u32 = 0;
    /// BAR2 (64-bit): doorbell pages
    BAR_DB: u32 = 2;
    /// `FERROCE_BAR0_SIZE`.
    BAR0_SIZE: u64 = 0x4000;
    /// 0x0000..0x0fff registers
    REGS_SIZE: u64 = 0x1000;
    /// Owned by QEMU, BIR 0
    MSIX_TABLE_OFFSET: u64 = 0x2000;
    /// Owned by QEMU, BIR 0
    MSIX_PBA_OFFSET: u64 = 0x3000;
    /// `FERROCE_MSIX_VECTORS`.
    MSIX_VECTORS: u16 = 8;
    /// `FERROCE_DB_PAGE_SHIFT`.
    DB_PAGE_SHIFT: u32 = 12;
    /// `FERROCE_DB_PAGE_SIZE`.
    DB_PAGE_SIZE: u64 = 4096;
    /// BAR2 = 1 MiB
    DB_PAGES: u32 = 256;
    /// Page 0: kernel
    DB_KERNEL_PAGES: u32 = 1;
    /// `FERROCE_BAR2_SIZE`.
    BAR2_SIZE: u64 = 0x100000;
    /// RO
    REG_VERSION: u32 = 0x000;
    /// RO
    REG_DEV_CAPS: u32 = 0x004;
    /// RO
    REG_MAGIC: u32 = 0x008;
    /// RW
    REG_DEV_CTRL: u32 = 0x010;
    /// RO
    REG_DEV_STATUS: u32 = 0x014;
    /// RO
    REG_FATAL_CODE: u32 = 0x018;
    /// RO
    REG_RESET_TIMEOUT_MS: u32 = 0x01c;
    /// RO
    REG_CMD_TIMEOUT_MS: u32 = 0x020;
    /// RW, no effect
    REG_SCRATCH: u32 = 0x024;
    /// RW while disabled
    REG_ADMINQ_BASE_LO: u32 = 0x030;
    /// RW while disabled
    REG_ADMINQ_BASE_HI: u32 = 0x034;
    /// RW while disabled
    REG_ADMINCQ_BASE_LO: u32 = 0x038;
    /// RW while disabled
    REG_ADMINCQ_BASE_HI: u32 = 0x03c;
    /// RW while disabled
    REG_ADMINQ_DEPTH: u32 = 0x040;
    /// WO: new producer index
    REG_ADMINQ_DB: u32 = 0x044;
    /// RO: consumer index
    REG_ADMINQ_CI: u32 = 0x048;
    /// RW while disabled
    REG_AEQ_BASE_LO: u32 = 0x050;
    /// RW while disabled
    REG_AEQ_BASE_HI: u32 = 0x054;
    /// RW while disabled
    REG_AEQ_DEPTH: u32 = 0x058;
    /// WO: EQ doorbell, any EQ
    REG_EQ_DB: u32 = 0x05c;
    /// RO
    REG_NUM_VECTORS: u32 = 0x060;
    /// RO
    REG_DB_PAGES: u32 = 0x064;
    /// RO
    REG_DB_KERNEL_PAGES: u32 = 0x068;
    /// RO: `mac[2..5]`
    REG_PORT_MAC_LO: u32 = 0x070;
    /// RO: `mac[0..1]`
    REG_PORT_MAC_HI: u32 = 0x074;
    /// RW: Ethernet MTU
    REG_PORT_MTU: u32 = 0x078;
    /// RO
    REG_PORT_STATE: u32 = 0x07c;
    /// `FERROCE_VERSION_MAJOR_SHIFT`.
    VERSION_MAJOR_SHIFT: u32 = 16;
    /// `FERROCE_VERSION_MAJOR_MASK`.
    VERSION_MAJOR_MASK: u32 = 0xffff0000;
    /// `FERROCE_VERSION_MINOR_MASK`.
    VERSION_MINOR_MASK: u32 = 0x0000ffff;
    /// `FERROCE_VERSION_MAJOR`.
    VERSION_MAJOR: u32 = 1;
    /// `FERROCE_VERSION_MINOR`.
    VERSION_MINOR: u32 = 10;
    /// `FERROCE_MAGIC_VALUE`.
    MAGIC_VALUE: u32 = 0x45435246;
    /// `FERROCE_CAP_RC`.
    CAP_RC: u32 = 0x00000001;
    /// `FERROCE_CAP_UD`.
    CAP_UD: u32 = 0x00000002;
    /// `FERROCE_CAP_RDMA_READ`.
    CAP_RDMA_READ: u32 = 0x00000004;
    /// 1.4: CMP_SWP, FETCH_ADD (IB_ATOMIC_HCA)
    CAP_ATOMIC: u32 = 0x00000008;
    /// `FERROCE_CAP_INLINE`.
    CAP_INLINE: u32 = 0x00000010;
    /// `FERROCE_CAP_SEND_IMM`.
    CAP_SEND_IMM: u32 = 0x00000020;
    /// `FERROCE_CAP_WRITE_IMM`.
    CAP_WRITE_IMM: u32 = 0x00000040;
    /// `FERROCE_CAP_MR_2LEVEL`.
    CAP_MR_2LEVEL: u32 = 0x00000080;
    /// `FERROCE_CAP_ZERO_BASED_MR`.
    CAP_ZERO_BASED_MR: u32 = 0x00000100;
    /// `FERROCE_CAP_ROCE_V1`.
    CAP_ROCE_V1: u32 = 0x00000200;
    /// `FERROCE_CAP_ROCE_V2`.
    CAP_ROCE_V2: u32 = 0x00000400;
    /// `FERROCE_CAP_GSI`.
    CAP_GSI: u32 = 0x00000800;
    /// 1.1: REG_MR of physical MRs
    CAP_PHYS_MR: u32 = 0x00001000;
    /// 1.1: fast-reg, LOCAL_INV, SEND_INV, inline AVs
    CAP_MEM_MGT_EXT: u32 = 0x00002000;
    /// 1.2: SET_PORT_MAC
    CAP_PORT_MAC: u32 = 0x00004000;
    /// 1.3: 802.1Q-tagged GID entries
    CAP_VLAN: u32 = 0x00008000;
    /// 1.5: UC QPs (SEND, RDMA WRITE, with immediate)
    CAP_UC: u32 = 0x00010000;
    /// 1.6: shared receive queues
    CAP_SRQ: u32 = 0x00020000;
    /// 1.6: MODIFY_MR
    CAP_MODIFY_MR: u32 = 0x00040000;
    /// 1.6: RESIZE_CQ
    CAP_RESIZE_CQ: u32 = 0x00080000;
    /// 1.7: UD multicast (ATTACH/DETACH_MCAST)
    CAP_MCAST: u32 = 0x00100000;
    /// 1.7: memory windows, type 1 and 2
    CAP_MW: u32 = 0x00200000;
    /// 1.8: RC ATOMIC_WRITE (IBTA 1.5)
    CAP_ATOMIC_WRITE: u32 = 0x00400000;
    /// 1.8: RC FLUSH, global visibility (IBTA 1.5)
    CAP_FLUSH: u32 = 0x00800000;
    /// Self-clearing
    CTRL_RESET: u32 = 0x00000001;
    /// `FERROCE_CTRL_ENABLE`.
    CTRL_ENABLE: u32 = 0x00000002;
    /// `FERROCE_CTRL_VALID_MASK`.
    CTRL_VALID_MASK: u32 = 0x00000003;
    /// `FERROCE_DEV_STATUS_READY`.
    DEV_STATUS_READY: u32 = 0x00000001;
    /// `FERROCE_DEV_STATUS_RESETTING`.
    DEV_STATUS_RESETTING: u32 = 0x00000002;
    /// `FERROCE_DEV_STATUS_FATAL`.
    DEV_STATUS_FATAL: u32 = 0x00000004;
    /// `FERROCE_FATAL_NONE`.
    FATAL_NONE: u32 = 0;
    /// ENABLE with bad queues
    FATAL_BAD_CONFIG: u32 = 1;
    /// Admin SQ/CQ DMA failed
    FATAL_ADMINQ_DMA: u32 = 2;
    /// AEQ write DMA failed
    FATAL_AEQ_DMA: u32 = 3;
    /// `FERROCE_FATAL_INTERNAL`.
    FATAL_INTERNAL: u32 = 4;
    /// `FERROCE_RESET_TIMEOUT_MS`.
    RESET_TIMEOUT_MS: u32 = 1000;
    /// `FERROCE_CMD_TIMEOUT_MS`.
    CMD_TIMEOUT_MS: u32 = 5000;
    /// `FERROCE_ADMINQ_IDX_MASK`.
    ADMINQ_IDX_MASK: u32 = 0x0000ffff;
    /// `FERROCE_ADMINQ_DEPTH_MIN`.
    ADMINQ_DEPTH_MIN: u32 = 2;
    /// `FERROCE_ADMINQ_DEPTH_MAX`.
    ADMINQ_DEPTH_MAX: u32 = 4096;
    /// Admin SQ/CQ, EQ bases
    RING_ALIGN: u32 = 64;
    /// `FERROCE_EQ_DB_CI_MASK`.
    EQ_DB_CI_MASK: u32 = 0x0000ffff;
    /// `FERROCE_EQ_DB_EQN_SHIFT`.
    EQ_DB_EQN_SHIFT: u32 = 16;
    /// `FERROCE_EQ_DB_EQN_MASK`.
    EQ_DB_EQN_MASK: u32 = 0x00ff0000;
    /// `FERROCE_EQ_DB_RSVD_MASK`.
    EQ_DB_RSVD_MASK: u32 = 0x7f000000;
    /// `FERROCE_EQ_DB_ARM`.
    EQ_DB_ARM: u32 = 0x80000000;
    /// `FERROCE_EQ_DEPTH_MIN`.
    EQ_DEPTH_MIN: u32 = 2;
    /// `FERROCE_EQ_DEPTH_MAX`.
    EQ_DEPTH_MAX: u32 = 4096;
    /// Async EQ, vector 0
    AEQN: u32 = 0;
    /// `FERROCE_PORT_MTU_MIN`.
    PORT_MTU_MIN: u32 = 576;
    /// `FERROCE_PORT_MTU_MAX`.
    PORT_MTU_MAX: u32 = 9000;
    /// `FERROCE_PORT_MTU_DEFAULT`.
    PORT_MTU_DEFAULT: u32 = 1500;
    /// `FERROCE_PORT_STATE_LINK_UP`.
    PORT_STATE_LINK_UP: u32 = 0x00000001;
    /// `FERROCE_DB_SQ`.
    DB_SQ: u64 = 0x000;
    /// `FERROCE_DB_RQ`.
    DB_RQ: u64 = 0x008;
    /// `FERROCE_DB_CQ`.
    DB_CQ: u64 = 0x010;
    /// `FERROCE_DB_WRITE_SIZE`.
    DB_WRITE_SIZE: usize = 8;
    /// `FERROCE_DB_QN_MASK`.
    DB_QN_MASK: u64 = 0x0000000000ffffff;
    /// `FERROCE_DB_PI_SHIFT`.
    DB_PI_SHIFT: u32 = 32;
    /// `FERROCE_DB_IDX_MASK`.
    DB_IDX_MASK: u64 = 0x0000ffff00000000;
    /// `FERROCE_DB_QP_RSVD_MASK`.
    DB_QP_RSVD_MASK: u64 = 0xffff0000ff000000;
    /// `FERROCE_DB_CQ_SN_SHIFT`.
    DB_CQ_SN_SHIFT: u32 = 24;
    /// `FERROCE_DB_CQ_SN_MASK`.
    DB_CQ_SN_MASK: u64 = 0x0000000003000000;
    /// `FERROCE_DB_CQ_CMD_SHIFT`.
    DB_CQ_CMD_SHIFT: u32 = 26;
    /// `FERROCE_DB_CQ_CMD_MASK`.
    DB_CQ_CMD_MASK: u64 = 0x000000000c000000;
    /// `FERROCE_DB_CQ_CI_SHIFT`.
    DB_CQ_CI_SHIFT: u32 = 32;
    /// `FERROCE_DB_CQ_RSVD_MASK`.
    DB_CQ_RSVD_MASK: u64 = 0xffff0000f0000000;
    /// Update ci only
    CQ_CMD_CI: u32 = 0;
    /// `FERROCE_CQ_CMD_ARM_NEXT`.
    CQ_CMD_ARM_NEXT: u32 = 1;
    /// `FERROCE_CQ_CMD_ARM_SOLICITED`.
    CQ_CMD_ARM_SOLICITED: u32 = 2;
    /// `FERROCE_DBREC_ALIGN`.
    DBREC_ALIGN: u32 = 8;
    /// `FERROCE_CMD_SIZE`.
    CMD_SIZE: usize = 128;
    /// `FERROCE_CMD_COMP_SIZE`.
    CMD_COMP_SIZE: usize = 32;
    /// `FERROCE_COUNTERS_SIZE_1_0`: `struct ferroce_counters` before 1.4,
    /// the least `resp_len` QUERY_COUNTERS accepts.
    COUNTERS_SIZE_1_0: usize = 240;
    /// `FERROCE_COUNTERS_SIZE_1_4`: `struct ferroce_counters` in 1.4,
    /// before the UC drops of 1.5.
    COUNTERS_SIZE_1_4: usize = 504;
    /// `FERROCE_COUNTERS_SIZE_1_5`: `struct ferroce_counters` in 1.5..1.8,
    /// before the credit counters of 1.9.
    COUNTERS_SIZE_1_5: usize = 536;
    /// `FERROCE_COUNTERS_SIZE_1_9`: `struct ferroce_counters` in 1.9,
    /// before the keep-alive counter of 1.10.
    COUNTERS_SIZE_1_9: usize = 552;
    /// `FERROCE_CMD_QUERY_CAPS`.
    CMD_QUERY_CAPS: u8 = 0x01;
    /// `FERROCE_CMD_QUERY_PORT`.
    CMD_QUERY_PORT: u8 = 0x02;
    /// `FERROCE_CMD_SET_PORT_MTU`.
    CMD_SET_PORT_MTU: u8 = 0x03;
    /// `FERROCE_CMD_QUERY_COUNTERS`.
    CMD_QUERY_COUNTERS: u8 = 0x04;
    /// 1.2, CAP_PORT_MAC
    CMD_SET_PORT_MAC: u8 = 0x05;
    /// `FERROCE_CMD_CREATE_EQ`.
    CMD_CREATE_EQ: u8 = 0x10;
    /// `FERROCE_CMD_DESTROY_EQ`.
    CMD_DESTROY_EQ: u8 = 0x11;
    /// `FERROCE_CMD_CREATE_CQ`.
    CMD_CREATE_CQ: u8 = 0x20;
    /// `FERROCE_CMD_DESTROY_CQ`.
    CMD_DESTROY_CQ: u8 = 0x21;
    /// 1.6, CAP_RESIZE_CQ
    CMD_RESIZE_CQ: u8 = 0x22;
    /// `FERROCE_CMD_ALLOC_PD`.
    CMD_ALLOC_PD: u8 = 0x30;
    /// `FERROCE_CMD_DEALLOC_PD`.
    CMD_DEALLOC_PD: u8 = 0x31;
    /// `FERROCE_CMD_REG_MR`.
    CMD_REG_MR: u8 = 0x40;
    /// `FERROCE_CMD_DEREG_MR`.
    CMD_DEREG_MR: u8 = 0x41;
    /// 1.6, CAP_MODIFY_MR
    CMD_MODIFY_MR: u8 = 0x42;
    /// `FERROCE_CMD_CREATE_QP`.
    CMD_CREATE_QP: u8 = 0x50;
    /// `FERROCE_CMD_DESTROY_QP`.
    CMD_DESTROY_QP: u8 = 0x51;
    /// `FERROCE_CMD_MODIFY_QP`.
    CMD_MODIFY_QP: u8 = 0x52;
    /// `FERROCE_CMD_QUERY_QP`.
    CMD_QUERY_QP: u8 = 0x53;
    /// 1.6, CAP_SRQ
    CMD_CREATE_SRQ: u8 = 0x54;
    /// 1.6, CAP_SRQ
    CMD_DESTROY_SRQ: u8 = 0x55;
    /// 1.6, CAP_SRQ
    CMD_MODIFY_SRQ: u8 = 0x56;
    /// 1.6, CAP_SRQ
    CMD_QUERY_SRQ: u8 = 0x57;
    /// 1.6, CAP_SRQ
    CMD_RESIZE_SRQ: u8 = 0x58;
    /// 1.7, CAP_MCAST
    CMD_ATTACH_MCAST: u8 = 0x59;
    /// 1.7, CAP_MCAST
    CMD_DETACH_MCAST: u8 = 0x5a;
    /// `FERROCE_CMD_CREATE_AH`.
    CMD_CREATE_AH: u8 = 0x60;
    /// `FERROCE_CMD_DESTROY_AH`.
    CMD_DESTROY_AH: u8 = 0x61;
    /// `FERROCE_CMD_SET_GID`.
    CMD_SET_GID: u8 = 0x70;
    /// `FERROCE_CMD_CLEAR_GID`.
    CMD_CLEAR_GID: u8 = 0x71;
    /// `FERROCE_STATUS_SUCCESS`.
    STATUS_SUCCESS: u8 = 0;
    /// `FERROCE_STATUS_BAD_OPCODE`.
    STATUS_BAD_OPCODE: u8 = 1;
    /// `FERROCE_STATUS_BAD_PARAM`.
    STATUS_BAD_PARAM: u8 = 2;
    /// `FERROCE_STATUS_BAD_RESERVED`.
    STATUS_BAD_RESERVED: u8 = 3;
    /// `FERROCE_STATUS_BAD_HANDLE`.
    STATUS_BAD_HANDLE: u8 = 4;
    /// `FERROCE_STATUS_BAD_STATE`.
    STATUS_BAD_STATE: u8 = 5;
    /// `FERROCE_STATUS_BAD_ATTR_MASK`.
    STATUS_BAD_ATTR_MASK: u8 = 6;
    /// `FERROCE_STATUS_NO_RESOURCES`.
    STATUS_NO_RESOURCES: u8 = 7;
    /// `FERROCE_STATUS_BUSY`.
    STATUS_BUSY: u8 = 8;
    /// `FERROCE_STATUS_DMA_ERROR`.
    STATUS_DMA_ERROR: u8 = 9;
    /// `FERROCE_STATUS_NOT_SUPPORTED`.
    STATUS_NOT_SUPPORTED: u8 = 10;
    /// Counters array size
    STATUS_COUNT: usize = 16;
    /// `FERROCE_COMP_PHASE`.
    COMP_PHASE: u8 = 0x01;
    /// Addr = the only page
    PBL_LEVEL_0: u8 = 0;
    /// `addr` points to `__le64[count]`
    PBL_LEVEL_1: u8 = 1;
    /// `addr` points to `__le64[]` of L1 pages
    PBL_LEVEL_2: u8 = 2;
    /// Per 4 KiB list page
    PBL_L1_ENTRIES: u32 = 512;
    /// 512 * 512
    PBL_MAX_PAGES: u32 = 262144;
    /// `FERROCE_PAGE_SHIFT_MIN`.
    PAGE_SHIFT_MIN: u8 = 12;
    /// `FERROCE_PAGE_SHIFT_MAX`.
    PAGE_SHIFT_MAX: u8 = 30;
    /// `FERROCE_PAGE_SIZE_CAP`.
    PAGE_SIZE_CAP: u64 = 0x7ffff000;
    /// FERROCE_PORT_ACTIVE/DOWN
    PORT_OUT_STATE: usize = 0;
    /// Ethernet MTU
    PORT_OUT_MTU: usize = 1;
    /// FERROCE_MTU_*
    PORT_OUT_ACTIVE_MTU: usize = 2;
    /// As REG_PORT_MAC_LO
    PORT_OUT_MAC_LO: usize = 3;
    /// As REG_PORT_MAC_HI
    PORT_OUT_MAC_HI: usize = 4;
    /// == IB_PORT_DOWN
    PORT_DOWN: u32 = 1;
    /// == IB_PORT_ACTIVE
    PORT_ACTIVE: u32 = 4;
    /// `FERROCE_ACCESS_LOCAL_WRITE`.
    ACCESS_LOCAL_WRITE: u32 = 0x01;
    /// `FERROCE_ACCESS_REMOTE_WRITE`.
    ACCESS_REMOTE_WRITE: u32 = 0x02;
    /// `FERROCE_ACCESS_REMOTE_READ`.
    ACCESS_REMOTE_READ: u32 = 0x04;
    /// `FERROCE_ACCESS_REMOTE_ATOMIC`.
    ACCESS_REMOTE_ATOMIC: u32 = 0x08;
    /// 1.7, CAP_MW
    ACCESS_MW_BIND: u32 = 0x10;
    /// `FERROCE_ACCESS_ZERO_BASED`.
    ACCESS_ZERO_BASED: u32 = 0x20;
    /// 1.8, CAP_FLUSH: MRs and RC QPs
    ACCESS_FLUSH_GLOBAL: u32 = 0x100;
    /// 1.8, CAP_FLUSH: RC QPs only
    ACCESS_FLUSH_PERSISTENT: u32 = 0x200;
    /// `FERROCE_ACCESS_MR_MASK` (| MW_BIND, FLUSH_GLOBAL with the caps).
    ACCESS_MR_MASK: u32 = 0x2f;
    /// `FERROCE_ACCESS_QP_MASK` (| FLUSH_* with CAP_FLUSH, RC).
    ACCESS_QP_MASK: u32 = 0x0f;
    /// `FERROCE_KEY_INDEX_SHIFT`.
    KEY_INDEX_SHIFT: u32 = 8;
    /// `FERROCE_KEY_VARIANT_MASK`.
    KEY_VARIANT_MASK: u32 = 0xff;
    /// Page list translation
    MR_TYPE_USER: u8 = 0;
    /// Addresses are guest physical
    MR_TYPE_PHYS: u8 = 1;
    /// Registered by REG_MR WQEs
    MR_TYPE_FAST_REG: u8 = 2;
    /// 1.7, CAP_MW: memory window, type 1
    MR_TYPE_MW1: u8 = 3;
    /// 1.7, CAP_MW: memory window, type 2
    MR_TYPE_MW2: u8 = 4;
    /// `FERROCE_FAST_REG_MAX_PAGES`.
    FAST_REG_MAX_PAGES: u32 = 512;
    /// 1.6: `pdn` is the new PD
    MODIFY_MR_PD: u32 = 0x01;
    /// 1.6: `access` is the new rights
    MODIFY_MR_ACCESS: u32 = 0x02;
    /// `FERROCE_QPT_RC`.
    QPT_RC: u8 = 0;
    /// `FERROCE_QPT_UD`.
    QPT_UD: u8 = 1;
    /// UD semantics, qpn 1
    QPT_GSI: u8 = 2;
    /// 1.5, CAP_UC
    QPT_UC: u8 = 3;
    /// `FERROCE_GSI_QPN`.
    GSI_QPN: u32 = 1;
    /// `FERROCE_FIRST_QPN`.
    FIRST_QPN: u32 = 2;
    /// `FERROCE_QP_FLAG_SQ_SIG_ALL`.
    QP_FLAG_SQ_SIG_ALL: u8 = 0x01;
    /// 1.6, CAP_SRQ: receives from srqn
    QP_FLAG_SRQ: u8 = 0x02;
    /// 128 B
    SQ_WQE_SHIFT_MIN: u8 = 7;
    /// 1 KiB
    SQ_WQE_SHIFT_MAX: u8 = 10;
    /// 32 B
    RQ_WQE_SHIFT_MIN: u8 = 5;
    /// `FERROCE_RQ_WQE_SHIFT_MAX`.
    RQ_WQE_SHIFT_MAX: u8 = 10;
    /// `FERROCE_FIRST_SRQN`.
    FIRST_SRQN: u32 = 1;
    /// Armed limit, 0 = not armed
    SRQ_OUT_LIMIT: usize = 0;
    /// `FERROCE_SRQ_OUT_DEPTH`.
    SRQ_OUT_DEPTH: usize = 1;
    /// Device's consumer index
    SRQ_OUT_CI: usize = 2;
    /// 1.7: multicast groups a device keeps
    MAX_MCAST_GRP: usize = 64;
    /// 1.7: QPs attached to one multicast group
    MAX_MCAST_QP_ATTACH: usize = 16;
    /// 1.7: BTH destination QP of datagrams to a multicast group
    MCAST_QPN: u32 = 0xffffff;
    /// `FERROCE_QPS_RESET`.
    QPS_RESET: u8 = 0;
    /// `FERROCE_QPS_INIT`.
    QPS_INIT: u8 = 1;
    /// `FERROCE_QPS_RTR`.
    QPS_RTR: u8 = 2;
    /// `FERROCE_QPS_RTS`.
    QPS_RTS: u8 = 3;
    /// `FERROCE_QPS_SQD`.
    QPS_SQD: u8 = 4;
    /// `FERROCE_QPS_SQE`.
    QPS_SQE: u8 = 5;
    /// `FERROCE_QPS_ERR`.
    QPS_ERR: u8 = 6;
    /// `FERROCE_QP_ATTR_STATE`.
    QP_ATTR_STATE: u32 = 0x00000001;
    /// `FERROCE_QP_ATTR_CUR_STATE`.
    QP_ATTR_CUR_STATE: u32 = 0x00000002;
    /// `FERROCE_QP_ATTR_EN_SQD_ASYNC_NOTIFY`.
    QP_ATTR_EN_SQD_ASYNC_NOTIFY: u32 = 0x00000004;
    /// `FERROCE_QP_ATTR_ACCESS_FLAGS`.
    QP_ATTR_ACCESS_FLAGS: u32 = 0x00000008;
    /// `FERROCE_QP_ATTR_PKEY_INDEX`.
    QP_ATTR_PKEY_INDEX: u32 = 0x00000010;
    /// `FERROCE_QP_ATTR_PORT`.
    QP_ATTR_PORT: u32 = 0x00000020;
    /// `FERROCE_QP_ATTR_QKEY`.
    QP_ATTR_QKEY: u32 = 0x00000040;
    /// `FERROCE_QP_ATTR_AV`.
    QP_ATTR_AV: u32 = 0x00000080;
    /// `FERROCE_QP_ATTR_PATH_MTU`.
    QP_ATTR_PATH_MTU: u32 = 0x00000100;
    /// `FERROCE_QP_ATTR_TIMEOUT`.
    QP_ATTR_TIMEOUT: u32 = 0x00000200;
    /// `FERROCE_QP_ATTR_RETRY_CNT`.
    QP_ATTR_RETRY_CNT: u32 = 0x00000400;
    /// `FERROCE_QP_ATTR_RNR_RETRY`.
    QP_ATTR_RNR_RETRY: u32 = 0x00000800;
    /// `FERROCE_QP_ATTR_RQ_PSN`.
    QP_ATTR_RQ_PSN: u32 = 0x00001000;
    /// `FERROCE_QP_ATTR_MAX_QP_RD_ATOMIC`.
    QP_ATTR_MAX_QP_RD_ATOMIC: u32 = 0x00002000;
    /// Unsupported
    QP_ATTR_ALT_PATH: u32 = 0x00004000;
    /// `FERROCE_QP_ATTR_MIN_RNR_TIMER`.
    QP_ATTR_MIN_RNR_TIMER: u32 = 0x00008000;
    /// `FERROCE_QP_ATTR_SQ_PSN`.
    QP_ATTR_SQ_PSN: u32 = 0x00010000;
    /// `FERROCE_QP_ATTR_MAX_DEST_RD_ATOMIC`.
    QP_ATTR_MAX_DEST_RD_ATOMIC: u32 = 0x00020000;
    /// Unsupported
    QP_ATTR_PATH_MIG_STATE: u32 = 0x00040000;
    /// Unsupported
    QP_ATTR_CAP: u32 = 0x00080000;
    /// `FERROCE_QP_ATTR_DEST_QPN`.
    QP_ATTR_DEST_QPN: u32 = 0x00100000;
    /// `FERROCE_QP_ATTR_SUPPORTED`.
    QP_ATTR_SUPPORTED: u32 = 0x0013bfff;
    /// `FERROCE_MTU_256`.
    MTU_256: u8 = 1;
    /// `FERROCE_MTU_512`.
    MTU_512: u8 = 2;
    /// `FERROCE_MTU_1024`.
    MTU_1024: u8 = 3;
    /// `FERROCE_MTU_2048`.
    MTU_2048: u8 = 4;
    /// `FERROCE_MTU_4096`.
    MTU_4096: u8 = 5;
    /// RoCE v1, Ethertype 0x8915
    NET_ROCE_V1: u8 = 0;
    /// RoCE v2 over IPv4
    NET_IPV4: u8 = 1;
    /// RoCE v2 over IPv6
    NET_IPV6: u8 = 2;
    /// `FERROCE_PSN_MASK`.
    PSN_MASK: u32 = 0x00ffffff;
    /// `FERROCE_QPN_MASK`.
    QPN_MASK: u32 = 0x00ffffff;
    /// `FERROCE_FLOW_LABEL_MASK`.
    FLOW_LABEL_MASK: u32 = 0x000fffff;
    /// `FERROCE_MAX_TIMEOUT`.
    MAX_TIMEOUT: u8 = 31;
    /// `FERROCE_MAX_RETRY_CNT`.
    MAX_RETRY_CNT: u8 = 7;
    /// `FERROCE_MAX_RNR_RETRY`.
    MAX_RNR_RETRY: u8 = 7;
    /// `FERROCE_MAX_MIN_RNR_TIMER`.
    MAX_MIN_RNR_TIMER: u8 = 31;
    /// `FERROCE_MAX_RD_ATOMIC`.
    MAX_RD_ATOMIC: u8 = 16;
    /// `FERROCE_PKEY_TABLE_LEN`.
    PKEY_TABLE_LEN: u32 = 1;
    /// `FERROCE_DEFAULT_PKEY`.
    DEFAULT_PKEY: u16 = 0xffff;
    /// `FERROCE_NUM_PORTS`.
    NUM_PORTS: u32 = 1;
    /// `FERROCE_GID_TABLE_LEN`.
    GID_TABLE_LEN: usize = 256;
    /// `FERROCE_GID_TYPE_ROCE_V1`.
    GID_TYPE_ROCE_V1: u8 = 0;
    /// `FERROCE_GID_TYPE_ROCE_V2`.
    GID_TYPE_ROCE_V2: u8 = 1;
    /// `FERROCE_VLAN_VALID`.
    VLAN_VALID: u16 = 0x8000;
    /// `FERROCE_VLAN_ID_MASK`.
    VLAN_ID_MASK: u16 = 0x0fff;
    /// `FERROCE_EQE_SIZE`.
    EQE_SIZE: usize = 16;
    /// `FERROCE_EQE_OWNER`.
    EQE_OWNER: u8 = 0x01;
    /// Obj = cqn, data = arm_sn
    EQE_COMPLETION: u8 = 0x01;
    /// Obj = cmd_id, data = status, data2 = slot
    EQE_CMD_COMPLETION: u8 = 0x02;
    /// Obj = port
    EQE_PORT_ACTIVE: u8 = 0x10;
    /// Obj = port
    EQE_PORT_DOWN: u8 = 0x11;
    /// Obj = port, data = mtu
    EQE_PORT_MTU_CHANGE: u8 = 0x12;
    /// Obj = qpn, data = syndrome
    EQE_QP_FATAL: u8 = 0x20;
    /// Obj = qpn
    EQE_QP_LAST_WQE_REACHED: u8 = 0x21;
    /// Obj = qpn
    EQE_QP_SQ_DRAINED: u8 = 0x22;
    /// Obj = qpn
    EQE_QP_COMM_EST: u8 = 0x23;
    /// Obj = qpn
    EQE_QP_ACCESS_ERR: u8 = 0x24;
    /// 1.3: obj = qpn, data = 0 ACK timeout / 1 RNR; informational
    EQE_QP_RETRY_EXCEEDED: u8 = 0x25;
    /// Obj = cqn, data = syndrome
    EQE_CQ_ERROR: u8 = 0x30;
    /// 1.6: obj = srqn, data = limit
    EQE_SRQ_LIMIT_REACHED: u8 = 0x50;
    /// Data = fatal code
    EQE_DEVICE_FATAL: u8 = 0x40;
    /// `FERROCE_CQ_SYNDROME_OVERFLOW`.
    CQ_SYNDROME_OVERFLOW: u32 = 1;
    /// `FERROCE_CQ_SYNDROME_DMA`.
    CQ_SYNDROME_DMA: u32 = 2;
    /// `FERROCE_WR_RDMA_WRITE`.
    WR_RDMA_WRITE: u8 = 0;
    /// `FERROCE_WR_RDMA_WRITE_IMM`.
    WR_RDMA_WRITE_IMM: u8 = 1;
    /// `FERROCE_WR_SEND`.
    WR_SEND: u8 = 2;
    /// `FERROCE_WR_SEND_IMM`.
    WR_SEND_IMM: u8 = 3;
    /// RC
    WR_RDMA_READ: u8 = 4;
    /// CAP_ATOMIC, RC
    WR_ATOMIC_CMP_SWP: u8 = 5;
    /// CAP_ATOMIC, RC
    WR_ATOMIC_FETCH_ADD: u8 = 6;
    /// CAP_MEM_MGT_EXT, RC
    WR_LOCAL_INV: u8 = 7;
    /// CAP_MW, RC
    WR_BIND_MW: u8 = 8;
    /// CAP_MEM_MGT_EXT, RC
    WR_SEND_INV: u8 = 9;
    /// 1.8, CAP_FLUSH, RC
    WR_FLUSH: u8 = 14;
    /// 1.8, CAP_ATOMIC_WRITE, RC
    WR_ATOMIC_WRITE: u8 = 15;
    /// CAP_MEM_MGT_EXT, RC
    WR_REG_MR: u8 = 0x20;
    /// `FERROCE_WQE_SIGNALED`.
    WQE_SIGNALED: u8 = 0x01;
    /// `FERROCE_WQE_SOLICITED`.
    WQE_SOLICITED: u8 = 0x02;
    /// `FERROCE_WQE_INLINE`.
    WQE_INLINE: u8 = 0x04;
    /// `FERROCE_WQE_FENCE`.
    WQE_FENCE: u8 = 0x08;
    /// UD/GSI: inline address vector
    WQE_AV: u8 = 0x10;
    /// `FERROCE_SQ_WQE_SEG_OFFSET`.
    SQ_WQE_SEG_OFFSET: usize = 32;
    /// `FERROCE_SQ_WQE_DATA_OFFSET`.
    SQ_WQE_DATA_OFFSET: usize = 64;
    /// SGEs/inline data with WQE_AV
    SQ_WQE_AV_DATA_OFFSET: usize = 112;
    /// `FERROCE_RQ_WQE_DATA_OFFSET`.
    RQ_WQE_DATA_OFFSET: usize = 16;
    /// FLUSH placement type (1.8, CAP_FLUSH): = IB_FLUSH_GLOBAL
    FLUSH_GLOBAL: u8 = 0x01;
    /// FLUSH placement type: = IB_FLUSH_PERSISTENT
    FLUSH_PERSISTENT: u8 = 0x02;
    /// FLUSH selectivity level: = IB_FLUSH_RANGE
    FLUSH_RANGE: u8 = 0;
    /// FLUSH selectivity level: = IB_FLUSH_MR
    FLUSH_MR: u8 = 1;
    /// `FERROCE_WC_SEND`.
    WC_SEND: u8 = 0;
    /// `FERROCE_WC_RDMA_WRITE`.
    WC_RDMA_WRITE: u8 = 1;
    /// `FERROCE_WC_RDMA_READ`.
    WC_RDMA_READ: u8 = 2;
    /// `FERROCE_WC_COMP_SWAP`.
    WC_COMP_SWAP: u8 = 3;
    /// `FERROCE_WC_FETCH_ADD`.
    WC_FETCH_ADD: u8 = 4;
    /// 1.7, CAP_MW
    WC_BIND_MW: u8 = 5;
    /// `FERROCE_WC_LOCAL_INV`.
    WC_LOCAL_INV: u8 = 6;
    /// 1.8, CAP_FLUSH
    WC_FLUSH: u8 = 8;
    /// 1.8, CAP_ATOMIC_WRITE
    WC_ATOMIC_WRITE: u8 = 9;
    /// Not IB_WC_REG_MR (10): driver maps
    WC_REG_MR: u8 = 0x20;
    /// `FERROCE_WC_RECV`.
    WC_RECV: u8 = 128;
    /// `FERROCE_WC_RECV_RDMA_WITH_IMM`.
    WC_RECV_RDMA_WITH_IMM: u8 = 129;
    /// `FERROCE_WC_SUCCESS`.
    WC_SUCCESS: u8 = 0;
    /// `FERROCE_WC_LOC_LEN_ERR`.
    WC_LOC_LEN_ERR: u8 = 1;
    /// `FERROCE_WC_LOC_QP_OP_ERR`.
    WC_LOC_QP_OP_ERR: u8 = 2;
    /// `FERROCE_WC_LOC_EEC_OP_ERR`.
    WC_LOC_EEC_OP_ERR: u8 = 3;
    /// `FERROCE_WC_LOC_PROT_ERR`.
    WC_LOC_PROT_ERR: u8 = 4;
    /// `FERROCE_WC_WR_FLUSH_ERR`.
    WC_WR_FLUSH_ERR: u8 = 5;
    /// `FERROCE_WC_MW_BIND_ERR`.
    WC_MW_BIND_ERR: u8 = 6;
    /// `FERROCE_WC_BAD_RESP_ERR`.
    WC_BAD_RESP_ERR: u8 = 7;
    /// `FERROCE_WC_LOC_ACCESS_ERR`.
    WC_LOC_ACCESS_ERR: u8 = 8;
    /// `FERROCE_WC_REM_INV_REQ_ERR`.
    WC_REM_INV_REQ_ERR: u8 = 9;
    /// `FERROCE_WC_REM_ACCESS_ERR`.
    WC_REM_ACCESS_ERR: u8 = 10;
    /// `FERROCE_WC_REM_OP_ERR`.
    WC_REM_OP_ERR: u8 = 11;
    /// `FERROCE_WC_RETRY_EXC_ERR`.
    WC_RETRY_EXC_ERR: u8 = 12;
    /// `FERROCE_WC_RNR_RETRY_EXC_ERR`.
    WC_RNR_RETRY_EXC_ERR: u8 = 13;
    /// `FERROCE_WC_LOC_RDD_VIOL_ERR`.
    WC_LOC_RDD_VIOL_ERR: u8 = 14;
    /// `FERROCE_WC_REM_INV_RD_REQ_ERR`.
    WC_REM_INV_RD_REQ_ERR: u8 = 15;
    /// `FERROCE_WC_REM_ABORT_ERR`.
    WC_REM_ABORT_ERR: u8 = 16;
    /// `FERROCE_WC_INV_EECN_ERR`.
    WC_INV_EECN_ERR: u8 = 17;
    /// `FERROCE_WC_INV_EEC_STATE_ERR`.
    WC_INV_EEC_STATE_ERR: u8 = 18;
    /// `FERROCE_WC_FATAL_ERR`.
    WC_FATAL_ERR: u8 = 19;
    /// `FERROCE_WC_RESP_TIMEOUT_ERR`.
    WC_RESP_TIMEOUT_ERR: u8 = 20;
    /// `FERROCE_WC_GENERAL_ERR`.
    WC_GENERAL_ERR: u8 = 21;
    /// `FERROCE_CQE_WITH_IMM`.
    CQE_WITH_IMM: u8 = 0x01;
    /// UD: 40-byte GRH area filled
    CQE_GRH: u8 = 0x02;
    /// `FERROCE_CQE_SOLICITED`.
    CQE_SOLICITED: u8 = 0x04;
    /// imm_data = invalidated key
    CQE_WITH_INV: u8 = 0x08;
    /// FERROCE_NET_* in 5:4
    CQE_NET_TYPE_SHIFT: u32 = 4;
    /// `FERROCE_CQE_NET_TYPE_MASK`.
    CQE_NET_TYPE_MASK: u8 = 0x30;
    /// 1.3, UD receives: gid_index is valid
    CQE_GID_INDEX: u8 = 0x40;
    /// `FERROCE_CQE_OWNER`.
    CQE_OWNER: u8 = 0x01;
    /// `FERROCE_CQE_SIZE`.
    CQE_SIZE: usize = 32;
}

hw_structs! {
    /// `struct ferroce_cmd_hdr`.
    pub struct CmdHdr = "ferroce_cmd_hdr" {
        /// opcode
        pub opcode: u8,
        /// reserved, 0
        pub flags: u8,
        /// opaque, echoed in the completion
        pub cmd_id: u16,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd`.
    pub struct Cmd = "ferroce_cmd" {
        /// hdr
        pub hdr: CmdHdr,
        /// payload
        pub payload: [u8; 120],
    }
    /// `struct ferroce_cmd_comp`.
    pub struct CmdComp = "ferroce_cmd_comp" {
        /// cmd id
        pub cmd_id: u16,
        /// status
        pub status: u8,
        /// reserved0
        pub reserved0: u8,
        /// admin SQ consumer index after this command
        pub sq_ci: u16,
        /// reserved1
        pub reserved1: u16,
        /// command specific results
        pub out: [u32; 5],
        /// reserved2
        pub reserved2: [u8; 3],
        /// FERROCE_COMP_PHASE, written last
        pub flags: u8,
    }
    /// `struct ferroce_pbl`.
    pub struct Pbl = "ferroce_pbl" {
        /// addr
        pub addr: u64,
        /// page count
        pub page_count: u32,
        /// page shift
        pub page_shift: u8,
        /// level
        pub level: u8,
        /// reserved
        pub reserved: u16,
    }
    /// `struct ferroce_cmd_query_caps`.
    pub struct CmdQueryCaps = "ferroce_cmd_query_caps" {
        /// hdr
        pub hdr: CmdHdr,
        /// resp addr
        pub resp_addr: u64,
        /// >= sizeof(struct ferroce_caps)
        pub resp_len: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_caps`.
    pub struct Caps = "ferroce_caps" {
        /// device caps
        pub device_caps: u32,
        /// max qp
        pub max_qp: u32,
        /// max qp wr
        pub max_qp_wr: u32,
        /// max sge
        pub max_sge: u32,
        /// max inline
        pub max_inline: u32,
        /// max cq
        pub max_cq: u32,
        /// max cqe
        pub max_cqe: u32,
        /// max mr
        pub max_mr: u32,
        /// max pd
        pub max_pd: u32,
        /// max ah
        pub max_ah: u32,
        /// max eq
        pub max_eq: u32,
        /// max eqe
        pub max_eqe: u32,
        /// max qp rd atom
        pub max_qp_rd_atom: u32,
        /// max qp init rd atom
        pub max_qp_init_rd_atom: u32,
        /// gid table len
        pub gid_table_len: u32,
        /// pkey table len
        pub pkey_table_len: u32,
        /// num ports
        pub num_ports: u32,
        /// max msg size
        pub max_msg_size: u32,
        /// max pbl pages
        pub max_pbl_pages: u32,
        /// db pages
        pub db_pages: u32,
        /// local ca ack delay
        pub local_ca_ack_delay: u32,
        /// FERROCE_MTU_*
        pub max_path_mtu: u32,
        /// max mr size
        pub max_mr_size: u64,
        /// page size cap
        pub page_size_cap: u64,
        /// fw version
        pub fw_version: u64,
    }
    /// `struct ferroce_cmd_query_port`.
    pub struct CmdQueryPort = "ferroce_cmd_query_port" {
        /// hdr
        pub hdr: CmdHdr,
        /// 1
        pub port: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_set_port_mtu`.
    pub struct CmdSetPortMtu = "ferroce_cmd_set_port_mtu" {
        /// hdr
        pub hdr: CmdHdr,
        /// 1
        pub port: u32,
        /// Ethernet MTU, PORT_MTU_MIN..MAX
        pub mtu: u32,
    }
    /// `struct ferroce_cmd_set_port_mac`: the port's current MAC.
    pub struct CmdSetPortMac = "ferroce_cmd_set_port_mac" {
        /// hdr
        pub hdr: CmdHdr,
        /// 1
        pub port: u32,
        /// reserved
        pub reserved: u32,
        /// wire order; unicast, non-zero
        pub mac: [u8; 6],
        /// reserved2
        pub reserved2: [u8; 2],
    }
    /// `struct ferroce_cmd_query_counters`.
    pub struct CmdQueryCounters = "ferroce_cmd_query_counters" {
        /// hdr
        pub hdr: CmdHdr,
        /// resp addr
        pub resp_addr: u64,
        /// >= FERROCE_COUNTERS_SIZE_1_0
        pub resp_len: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_counters` (also the device's own counters, see
    /// [`crate::Counters`]).
    #[derive(serde::Serialize)]
    pub struct Counters = "ferroce_counters" {
        /// Admin commands completed with SUCCESS.
        pub cmds_ok: u64,
        /// Admin commands completed with an error status.
        pub cmds_failed: u64,
        /// Admin commands by completion status (`STATUS_*`).
        pub cmd_status: [u64; 16],
        /// Doorbell writes (BAR2, ADMINQ_DB, EQ_DB) that were refused.
        pub malformed_doorbells: u64,
        /// DMA accesses that failed or addresses refused as unmapped.
        pub bad_dma: u64,
        /// Register accesses of the wrong size/alignment or to RO registers.
        pub bad_reg_access: u64,
        /// SQ doorbells accepted.
        pub sq_doorbells: u64,
        /// RQ doorbells accepted.
        pub rq_doorbells: u64,
        /// CQ doorbells accepted.
        pub cq_doorbells: u64,
        /// EQ doorbells accepted.
        pub eq_doorbells: u64,
        /// EQEs written.
        pub eqes_posted: u64,
        /// EQEs dropped on a full EQ.
        pub eq_overflows: u64,
        /// MSI-X interrupts raised.
        pub interrupts: u64,
        /// Async events (port, QP, CQ, device) posted.
        pub async_events: u64,
        /// Device resets.
        pub resets: u64,
        // New in 1.4: the data path.
        /// RoCE frames sent, on the wire or looped back (rxe `sent_pkts`).
        pub tx_pkts: u64,
        /// Frames that passed the header and ICRC checks (rxe `rcvd_pkts`).
        pub rx_pkts: u64,
        /// Bytes of the frames of `tx_pkts`.
        pub tx_bytes: u64,
        /// Bytes of the frames of `rx_pkts`.
        pub rx_bytes: u64,
        /// Of `tx_pkts`, frames looped back to this device.
        pub loopback_pkts: u64,
        /// Frames for the wire dropped because nobody took them (rxe `send_err`).
        pub tx_dropped: u64,
        /// Frames dropped because the device was stalled.
        pub rx_stalled: u64,
        /// Dropped: truncated.
        pub rx_truncated: u64,
        /// Dropped: not RoCE.
        pub rx_not_roce: u64,
        /// Dropped: bad IP/GRH/UDP header or IPv4 checksum.
        pub rx_bad_header: u64,
        /// Dropped: bad BTH or unknown opcode.
        pub rx_bad_bth: u64,
        /// Dropped: ICRC mismatch.
        pub rx_bad_icrc: u64,
        /// Dropped: destination MAC, QP, QP type or QP state does not match.
        pub rx_no_qp: u64,
        /// Dropped: P_Key or Q_Key mismatch.
        pub rx_bad_key: u64,
        /// RC packets dropped: not from the QP's peer to its address.
        pub rx_bad_addr: u64,
        /// UD datagrams dropped for want of a receive WQE.
        pub rx_ud_no_wqe: u64,
        /// Duplicate requests seen by the responder (rxe `duplicate_request`).
        pub dup_requests: u64,
        /// PSN sequence error NAKs sent (rxe `out_of_seq_request`).
        pub seq_naks_sent: u64,
        /// RNR NAKs sent (rxe `send_rnr_err`).
        pub rnr_naks_sent: u64,
        /// Other NAKs sent.
        pub err_naks_sent: u64,
        /// ACKs sent.
        pub acks_sent: u64,
        /// ACKs, NAKs and READ responses taken by the completer (rxe `ack_deferred`).
        pub responses_rcvd: u64,
        /// RNR NAKs received (rxe `rcvd_rnr_err`).
        pub rnr_naks_rcvd: u64,
        /// PSN sequence error NAKs received (rxe `rcvd_seq_err`).
        pub seq_naks_rcvd: u64,
        /// Stale or unexpected responses ignored.
        pub stale_responses: u64,
        /// Retransmission timer expiries.
        pub timeouts: u64,
        /// Retries that consumed one of `retry_cnt` (rxe `completer_retry_err`).
        pub ack_retries: u64,
        /// Go-back-N rewinds (timeouts, NAKs, implied NAKs, RNR waits).
        pub retransmits: u64,
        /// WQEs failed with RETRY_EXC_ERR (rxe `retry_exceeded_err`).
        pub retry_exceeded: u64,
        /// WQEs failed with RNR_RETRY_EXC_ERR (rxe `retry_rnr_exceeded_err`).
        pub rnr_retry_exceeded: u64,
        /// CQEs written by the data path.
        pub cqes: u64,
        /// Of those, with an error status (flushes included).
        pub cqe_errors: u64,
        /// Of those, flushes (`WR_FLUSH_ERR`).
        pub cqe_flushed: u64,
        // New in 1.5: UC responder drops.
        /// UC request packets the responder discarded, for any reason.
        pub rx_uc_dropped: u64,
        /// UC partial messages discarded for a PSN gap or a missing first packet.
        pub rx_uc_seq_err: u64,
        /// UC messages discarded for want of a receive WQE.
        pub rx_uc_no_wqe: u64,
        /// UC messages discarded for a bad R_Key, range, access or length.
        pub rx_uc_bad_req: u64,
        // New in 1.9: end-to-end credits.
        /// Messages an RC requester held back for credits.
        pub credit_waits: u64,
        /// Credit updates an RC responder sent.
        pub credit_updates: u64,
        // New in 1.10.
        /// Keep-alives an RC requester sent while it waited for a credit
        /// update.
        pub credit_keepalives: u64,
    }
    /// `struct ferroce_cmd_create_eq`.
    pub struct CmdCreateEq = "ferroce_cmd_create_eq" {
        /// hdr
        pub hdr: CmdHdr,
        /// contiguous, RING_ALIGN aligned
        pub base: u64,
        /// power of two, EQ_DEPTH_MIN..MAX
        pub depth: u32,
        /// 1..NUM_VECTORS-1
        pub vector: u16,
        /// reserved
        pub reserved: u16,
    }
    /// `struct ferroce_cmd_destroy_eq`.
    pub struct CmdDestroyEq = "ferroce_cmd_destroy_eq" {
        /// hdr
        pub hdr: CmdHdr,
        /// eqn
        pub eqn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_create_cq`.
    pub struct CmdCreateCq = "ferroce_cmd_create_cq" {
        /// hdr
        pub hdr: CmdHdr,
        /// depth * 32 bytes of CQEs
        pub buf: Pbl,
        /// struct ferroce_cq_dbrec
        pub dbrec_addr: u64,
        /// power of two, 2..max_cqe
        pub depth: u32,
        /// completion EQ, 1..NUM_VECTORS-1
        pub eqn: u32,
        /// doorbell page allowed to ring it
        pub db_page: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_destroy_cq`.
    pub struct CmdDestroyCq = "ferroce_cmd_destroy_cq" {
        /// hdr
        pub hdr: CmdHdr,
        /// cqn
        pub cqn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_resize_cq` (1.6, CAP_RESIZE_CQ): out[0] = the
    /// producer index from which CQEs go to the new ring.
    pub struct CmdResizeCq = "ferroce_cmd_resize_cq" {
        /// hdr
        pub hdr: CmdHdr,
        /// depth * 32 bytes, prepared (device.rst)
        pub buf: Pbl,
        /// cqn
        pub cqn: u32,
        /// power of two, 2..max_cqe, >= pi - ci
        pub depth: u32,
        /// reserved
        pub reserved: u64,
    }
    /// `struct ferroce_cmd_alloc_pd`.
    pub struct CmdAllocPd = "ferroce_cmd_alloc_pd" {
        /// hdr
        pub hdr: CmdHdr,
        /// reserved
        pub reserved: u64,
    }
    /// `struct ferroce_cmd_dealloc_pd`.
    pub struct CmdDeallocPd = "ferroce_cmd_dealloc_pd" {
        /// hdr
        pub hdr: CmdHdr,
        /// pdn
        pub pdn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_reg_mr`.
    pub struct CmdRegMr = "ferroce_cmd_reg_mr" {
        /// hdr
        pub hdr: CmdHdr,
        /// pbl
        pub pbl: Pbl,
        /// start VA; 0 if ZERO_BASED
        pub iova: u64,
        /// bytes, 1..max_mr_size
        pub length: u64,
        /// pdn
        pub pdn: u32,
        /// FERROCE_ACCESS_*
        pub access: u32,
        /// start offset inside the first page
        pub offset: u32,
        /// becomes key bits 7:0
        pub key_variant: u8,
        /// FERROCE_MR_TYPE_*
        pub mr_type: u8,
        /// reserved0
        pub reserved0: [u8; 2],
        /// FAST_REG: 1..FAST_REG_MAX_PAGES, else 0
        pub max_pages: u32,
        /// reserved1
        pub reserved1: u32,
    }
    /// `struct ferroce_cmd_dereg_mr`.
    pub struct CmdDeregMr = "ferroce_cmd_dereg_mr" {
        /// hdr
        pub hdr: CmdHdr,
        /// key
        pub key: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_modify_mr` (1.6, CAP_MODIFY_MR): changes a USER
    /// or PHYS MR in place, keeping its key.
    pub struct CmdModifyMr = "ferroce_cmd_modify_mr" {
        /// hdr
        pub hdr: CmdHdr,
        /// key
        pub key: u32,
        /// FERROCE_MODIFY_MR_*
        pub flags: u32,
        /// pdn
        pub pdn: u32,
        /// FERROCE_ACCESS_*, ZERO_BASED as before
        pub access: u32,
    }
    /// `struct ferroce_cmd_create_qp`.
    pub struct CmdCreateQp = "ferroce_cmd_create_qp" {
        /// hdr
        pub hdr: CmdHdr,
        /// sq_depth << sq_wqe_shift bytes
        pub sq_buf: Pbl,
        /// rq_depth << rq_wqe_shift bytes
        pub rq_buf: Pbl,
        /// struct ferroce_qp_dbrec
        pub sq_dbrec_addr: u64,
        /// 0 if rq_depth == 0
        pub rq_dbrec_addr: u64,
        /// pdn
        pub pdn: u32,
        /// send cqn
        pub send_cqn: u32,
        /// recv cqn
        pub recv_cqn: u32,
        /// power of two, 1..max_qp_wr
        pub sq_depth: u32,
        /// 0 or power of two
        pub rq_depth: u32,
        /// db page
        pub db_page: u32,
        /// <= stride - 64
        pub max_inline: u32,
        /// FERROCE_QPT_*
        pub qp_type: u8,
        /// sq wqe shift
        pub sq_wqe_shift: u8,
        /// rq wqe shift
        pub rq_wqe_shift: u8,
        /// FERROCE_QP_FLAG_*
        pub flags: u8,
        /// 1.6, QP_FLAG_SRQ: the SRQ, else 0
        pub srqn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_destroy_qp`.
    pub struct CmdDestroyQp = "ferroce_cmd_destroy_qp" {
        /// hdr
        pub hdr: CmdHdr,
        /// qpn
        pub qpn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_create_srq` (1.6, CAP_SRQ): out[0] = srqn.
    pub struct CmdCreateSrq = "ferroce_cmd_create_srq" {
        /// hdr
        pub hdr: CmdHdr,
        /// depth << wqe_shift bytes
        pub buf: Pbl,
        /// struct ferroce_srq_dbrec
        pub dbrec_addr: u64,
        /// pdn
        pub pdn: u32,
        /// power of two, 1..max_qp_wr
        pub depth: u32,
        /// 0 (not armed) or 1..depth
        pub limit: u32,
        /// FERROCE_RQ_WQE_SHIFT_MIN..MAX
        pub wqe_shift: u8,
        /// reserved0
        pub reserved0: [u8; 3],
        /// reserved1
        pub reserved1: u64,
    }
    /// `struct ferroce_cmd_destroy_srq` (1.6, CAP_SRQ).
    pub struct CmdDestroySrq = "ferroce_cmd_destroy_srq" {
        /// hdr
        pub hdr: CmdHdr,
        /// srqn
        pub srqn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_modify_srq` (1.6, CAP_SRQ): (re)arms the limit
    /// event; 0 disarms.
    pub struct CmdModifySrq = "ferroce_cmd_modify_srq" {
        /// hdr
        pub hdr: CmdHdr,
        /// srqn
        pub srqn: u32,
        /// 0..depth
        pub limit: u32,
    }
    /// `struct ferroce_cmd_query_srq` (1.6, CAP_SRQ): results in out[]
    /// (`SRQ_OUT_*`).
    pub struct CmdQuerySrq = "ferroce_cmd_query_srq" {
        /// hdr
        pub hdr: CmdHdr,
        /// srqn
        pub srqn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_resize_srq` (1.6, CAP_SRQ): a new ring, the
    /// WQEs not yet taken copied at the same indices.
    pub struct CmdResizeSrq = "ferroce_cmd_resize_srq" {
        /// hdr
        pub hdr: CmdHdr,
        /// depth << wqe_shift bytes
        pub buf: Pbl,
        /// srqn
        pub srqn: u32,
        /// power of two, >= pi - ci, <= max_qp_wr
        pub depth: u32,
        /// the SRQ's
        pub wqe_shift: u8,
        /// reserved0
        pub reserved0: [u8; 3],
        /// reserved1
        pub reserved1: u32,
    }
    /// `struct ferroce_cmd_mcast` (1.7, CAP_MCAST): ATTACH_MCAST and
    /// DETACH_MCAST of a UD QP to a multicast GID (ff00::/8, or
    /// IPv4-mapped 224.0.0.0/4).
    pub struct CmdMcast = "ferroce_cmd_mcast" {
        /// hdr
        pub hdr: CmdHdr,
        /// a UD QP
        pub qpn: u32,
        /// reserved
        pub reserved: u32,
        /// the group, wire order
        pub gid: [u8; 16],
    }
    /// `struct ferroce_av`.
    pub struct Av = "ferroce_av" {
        /// dgid
        pub dgid: [u8; 16],
        /// dmac
        pub dmac: [u8; 6],
        /// sgid index
        pub sgid_index: u8,
        /// hop limit
        pub hop_limit: u8,
        /// 19:0
        pub flow_label: u32,
        /// traffic class
        pub traffic_class: u8,
        /// FERROCE_NET_*, must match the sgid entry
        pub network_type: u8,
        /// RoCE v2 source port, 0 = device chooses
        pub udp_sport: u16,
        /// 0, or (CAP_VLAN) the sgid entry's VLAN_VALID | id
        pub vlan: u16,
        /// CAP_VLAN: 802.1Q priority (PCP) 0..7, else 0
        pub sl: u8,
        /// reserved
        pub reserved: [u8; 5],
    }
    /// `struct ferroce_qp_attr`.
    pub struct QpAttr = "ferroce_qp_attr" {
        /// qpn
        pub qpn: u32,
        /// attr mask
        pub attr_mask: u32,
        /// qp state
        pub qp_state: u8,
        /// cur qp state
        pub cur_qp_state: u8,
        /// path mtu
        pub path_mtu: u8,
        /// port num
        pub port_num: u8,
        /// dest qp num
        pub dest_qp_num: u32,
        /// rq psn
        pub rq_psn: u32,
        /// sq psn
        pub sq_psn: u32,
        /// qkey
        pub qkey: u32,
        /// qp access flags
        pub qp_access_flags: u32,
        /// pkey index
        pub pkey_index: u16,
        /// timeout
        pub timeout: u8,
        /// retry cnt
        pub retry_cnt: u8,
        /// rnr retry
        pub rnr_retry: u8,
        /// min rnr timer
        pub min_rnr_timer: u8,
        /// max rd atomic
        pub max_rd_atomic: u8,
        /// max dest rd atomic
        pub max_dest_rd_atomic: u8,
        /// av
        pub av: Av,
        /// en sqd async notify
        pub en_sqd_async_notify: u8,
        /// QUERY_QP only
        pub sq_draining: u8,
        /// QUERY_QP only
        pub qp_type: u8,
        /// reserved0
        pub reserved0: u8,
        /// reserved1
        pub reserved1: u32,
    }
    /// `struct ferroce_cmd_modify_qp`.
    pub struct CmdModifyQp = "ferroce_cmd_modify_qp" {
        /// hdr
        pub hdr: CmdHdr,
        /// attr
        pub attr: QpAttr,
    }
    /// `struct ferroce_cmd_query_qp`.
    pub struct CmdQueryQp = "ferroce_cmd_query_qp" {
        /// hdr
        pub hdr: CmdHdr,
        /// resp addr
        pub resp_addr: u64,
        /// >= sizeof(struct ferroce_qp_attr)
        pub resp_len: u32,
        /// qpn
        pub qpn: u32,
    }
    /// `struct ferroce_cmd_create_ah`.
    pub struct CmdCreateAh = "ferroce_cmd_create_ah" {
        /// hdr
        pub hdr: CmdHdr,
        /// pdn
        pub pdn: u32,
        /// reserved
        pub reserved: u32,
        /// av
        pub av: Av,
    }
    /// `struct ferroce_cmd_destroy_ah`.
    pub struct CmdDestroyAh = "ferroce_cmd_destroy_ah" {
        /// hdr
        pub hdr: CmdHdr,
        /// ahn
        pub ahn: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cmd_set_gid`.
    pub struct CmdSetGid = "ferroce_cmd_set_gid" {
        /// hdr
        pub hdr: CmdHdr,
        /// gid
        pub gid: [u8; 16],
        /// source MAC of frames using this entry
        pub smac: [u8; 6],
        /// 0 = untagged, CAP_VLAN: VLAN_VALID | id 1..4094
        pub vlan: u16,
        /// < GID_TABLE_LEN
        pub index: u16,
        /// FERROCE_GID_TYPE_*
        pub gid_type: u8,
        /// FERROCE_NET_*, must match gid_type and gid
        pub network_type: u8,
        /// 1
        pub port: u32,
    }
    /// `struct ferroce_cmd_clear_gid`.
    pub struct CmdClearGid = "ferroce_cmd_clear_gid" {
        /// hdr
        pub hdr: CmdHdr,
        /// index
        pub index: u16,
        /// reserved0
        pub reserved0: u16,
        /// 1
        pub port: u32,
    }
    /// `struct ferroce_eqe`.
    pub struct Eqe = "ferroce_eqe" {
        /// obj
        pub obj: u32,
        /// data
        pub data: u32,
        /// data2
        pub data2: u32,
        /// reserved
        pub reserved: u8,
        /// subtype
        pub subtype: u8,
        /// FERROCE_EQE_*
        pub event_type: u8,
        /// FERROCE_EQE_OWNER, written last
        pub owner: u8,
    }
    /// `struct ferroce_sge`.
    pub struct Sge = "ferroce_sge" {
        /// addr
        pub addr: u64,
        /// length
        pub length: u32,
        /// lkey
        pub lkey: u32,
    }
    /// `struct ferroce_sq_wqe_hdr`.
    pub struct SqWqeHdr = "ferroce_sq_wqe_hdr" {
        /// wr id
        pub wr_id: u64,
        /// FERROCE_WR_*
        pub opcode: u8,
        /// FERROCE_WQE_*
        pub flags: u8,
        /// SGEs at DATA_OFFSET unless INLINE
        pub num_sge: u8,
        /// reserved0
        pub reserved0: u8,
        /// *_IMM opcodes
        pub imm_data: u32,
        /// INLINE: bytes at DATA_OFFSET
        pub inline_len: u32,
        /// reserved1
        pub reserved1: u32,
        /// reserved2
        pub reserved2: u64,
    }
    /// `struct ferroce_sq_wqe_rdma`.
    pub struct SqWqeRdma = "ferroce_sq_wqe_rdma" {
        /// remote addr
        pub remote_addr: u64,
        /// rkey
        pub rkey: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_sq_wqe_ud`.
    pub struct SqWqeUd = "ferroce_sq_wqe_ud" {
        /// ahn
        pub ahn: u32,
        /// remote qpn
        pub remote_qpn: u32,
        /// remote qkey
        pub remote_qkey: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_sq_wqe_atomic`.
    pub struct SqWqeAtomic = "ferroce_sq_wqe_atomic" {
        /// remote addr
        pub remote_addr: u64,
        /// rkey
        pub rkey: u32,
        /// reserved
        pub reserved: u32,
        /// compare add
        pub compare_add: u64,
        /// swap
        pub swap: u64,
    }
    /// `struct ferroce_sq_wqe_reg_mr`: REG_MR WQE segment (a `Pbl` at DATA_OFFSET).
    pub struct SqWqeRegMr = "ferroce_sq_wqe_reg_mr" {
        /// iova
        pub iova: u64,
        /// length
        pub length: u64,
        /// a FREE FAST_REG MR; bits 7:0 = new variant
        pub key: u32,
        /// FERROCE_ACCESS_*, not ZERO_BASED
        pub access: u32,
        /// reserved
        pub reserved: u64,
    }
    /// `struct ferroce_sq_wqe_bind_mw` (1.7, CAP_MW): BIND_MW WQE segment,
    /// type 1 and type 2 windows.
    pub struct SqWqeBindMw = "ferroce_sq_wqe_bind_mw" {
        /// the window, in the MR's address space
        pub addr: u64,
        /// type 1: 0 unbinds
        pub length: u64,
        /// the MW; bits 7:0 = its new variant
        pub mw_key: u32,
        /// the MR (with MW_BIND), exact variant
        pub mr_key: u32,
        /// FERROCE_ACCESS_REMOTE_*; LOCAL_WRITE ignored
        pub access: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_sq_wqe_atomic_write`: ATOMIC_WRITE WQE segment (1.8,
    /// CAP_ATOMIC_WRITE): 8 bytes placed as one store.
    pub struct SqWqeAtomicWrite = "ferroce_sq_wqe_atomic_write" {
        /// 8-byte aligned
        pub remote_addr: u64,
        /// rkey
        pub rkey: u32,
        /// reserved0
        pub reserved0: u32,
        /// written verbatim, in this byte order
        pub data: [u8; 8],
        /// reserved1
        pub reserved1: u64,
    }
    /// `struct ferroce_sq_wqe_flush`: FLUSH WQE segment (1.8, CAP_FLUSH).
    pub struct SqWqeFlush = "ferroce_sq_wqe_flush" {
        /// RANGE: start of the range
        pub remote_addr: u64,
        /// rkey
        pub rkey: u32,
        /// RANGE: bytes; MR: sent, not used
        pub length: u32,
        /// FERROCE_FLUSH_GLOBAL | FERROCE_FLUSH_PERSISTENT
        pub r#type: u8,
        /// FERROCE_FLUSH_RANGE or FERROCE_FLUSH_MR
        pub level: u8,
        /// reserved0
        pub reserved0: [u8; 6],
        /// reserved1
        pub reserved1: u64,
    }
    /// `struct ferroce_rq_wqe_hdr`.
    pub struct RqWqeHdr = "ferroce_rq_wqe_hdr" {
        /// wr id
        pub wr_id: u64,
        /// num sge
        pub num_sge: u8,
        /// reserved0
        pub reserved0: [u8; 3],
        /// reserved1
        pub reserved1: u32,
    }
    /// `struct ferroce_qp_dbrec`.
    pub struct QpDbrec = "ferroce_qp_dbrec" {
        /// producer index, 15:0 used
        pub pi: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_cq_dbrec`.
    pub struct CqDbrec = "ferroce_cq_dbrec" {
        /// consumer index, 15:0 used
        pub ci: u32,
        /// reserved
        pub reserved: u32,
    }
    /// `struct ferroce_srq_dbrec` (1.6): software writes pi, the device
    /// DMA-writes ci.
    pub struct SrqDbrec = "ferroce_srq_dbrec" {
        /// producer index, 15:0 used; software
        pub pi: u32,
        /// consumer index, 15:0 used; device
        pub ci: u32,
    }
    /// `struct ferroce_cqe`.
    pub struct Cqe = "ferroce_cqe" {
        /// wr id
        pub wr_id: u64,
        /// byte len
        pub byte_len: u32,
        /// imm data
        pub imm_data: u32,
        /// 23:0
        pub qpn: u32,
        /// 23:0, UD receives
        pub src_qp: u32,
        /// FERROCE_WC_*
        pub opcode: u8,
        /// FERROCE_WC_* status
        pub status: u8,
        /// vendor err
        pub vendor_err: u8,
        /// FERROCE_CQE_*
        pub flags: u8,
        /// SQ/RQ index of the completed WQE
        pub wqe_idx: u16,
        /// CQE_GID_INDEX: GID entry the packet was sent to
        pub gid_index: u8,
        /// FERROCE_CQE_OWNER, written last
        pub owner: u8,
    }
}
