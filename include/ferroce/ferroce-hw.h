/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ferroce-hw.h - the ferroce RoCE v2 device programming model.
 *
 * This header is THE single source of truth for the interface between the
 * ferroce device (device/ferroce-dev), its Linux driver (through bindgen) and
 * its rdma-core provider: register offsets, field masks, command opcodes,
 * status codes and every queue entry layout.  The prose specification is
 * Documentation/ferroce/device.rst.
 *
 * Rules of this file (checked by device/ferroce-dev's agreement test, which
 * parses it):
 *  - only <linux/types.h> types; every multi-byte field is little-endian
 *    unless it is declared __be (immediate data is kept in network order);
 *  - constants are object-like "#define FERROCE_... value" macros with an
 *    integer value; function-like helper macros are allowed but not compared;
 *  - structs are naturally aligned with explicit reserved fields, one field
 *    per line, no unions, no bit-fields, no packing attributes;
 *  - the size of every struct is fixed by a static_assert.
 */
#ifndef FERROCE_HW_H
#define FERROCE_HW_H

#include <linux/types.h>
#ifdef __KERNEL__
#include <linux/build_bug.h>
#else
#include <assert.h>
#endif

/* ------------------------------------------------------------------------
 * PCI identity
 * ------------------------------------------------------------------------
 */
#define FERROCE_PCI_VENDOR_ID			0x1b36
#define FERROCE_PCI_DEVICE_ID			0x0fe0
#define FERROCE_PCI_SUBSYSTEM_VENDOR_ID		0x1b36
#define FERROCE_PCI_SUBSYSTEM_ID		0x0fe0
#define FERROCE_PCI_REVISION			0x01
/* Network controller (0x02), other (0x80), programming interface 0x00. */
#define FERROCE_PCI_CLASS_CODE			0x028000

/* ------------------------------------------------------------------------
 * BARs
 * ------------------------------------------------------------------------
 */
#define FERROCE_BAR_REGS			0	/* BAR0: registers + MSI-X */
#define FERROCE_BAR_DB				2	/* BAR2 (64-bit): doorbell pages */

#define FERROCE_BAR0_SIZE			0x4000
#define FERROCE_REGS_SIZE			0x1000	/* 0x0000..0x0fff registers */
#define FERROCE_MSIX_TABLE_OFFSET		0x2000	/* owned by QEMU, BIR 0 */
#define FERROCE_MSIX_PBA_OFFSET			0x3000	/* owned by QEMU, BIR 0 */
#define FERROCE_MSIX_VECTORS			8

#define FERROCE_DB_PAGE_SHIFT			12
#define FERROCE_DB_PAGE_SIZE			4096
#define FERROCE_DB_PAGES			256	/* BAR2 = 1 MiB */
#define FERROCE_DB_KERNEL_PAGES			1	/* page 0: kernel */
#define FERROCE_BAR2_SIZE			0x100000

/* ------------------------------------------------------------------------
 * BAR0 registers: 32-bit, naturally aligned, 4-byte accesses only.
 * 64-bit addresses are LO/HI register pairs; the device uses them when
 * DEV_CTRL.ENABLE goes from 0 to 1.
 * ------------------------------------------------------------------------
 */
#define FERROCE_REG_VERSION			0x000	/* RO */
#define FERROCE_REG_DEV_CAPS			0x004	/* RO */
#define FERROCE_REG_MAGIC			0x008	/* RO */
#define FERROCE_REG_DEV_CTRL			0x010	/* RW */
#define FERROCE_REG_DEV_STATUS			0x014	/* RO */
#define FERROCE_REG_FATAL_CODE			0x018	/* RO */
#define FERROCE_REG_RESET_TIMEOUT_MS		0x01c	/* RO */
#define FERROCE_REG_CMD_TIMEOUT_MS		0x020	/* RO */
#define FERROCE_REG_SCRATCH			0x024	/* RW, no effect */
#define FERROCE_REG_ADMINQ_BASE_LO		0x030	/* RW while disabled */
#define FERROCE_REG_ADMINQ_BASE_HI		0x034	/* RW while disabled */
#define FERROCE_REG_ADMINCQ_BASE_LO		0x038	/* RW while disabled */
#define FERROCE_REG_ADMINCQ_BASE_HI		0x03c	/* RW while disabled */
#define FERROCE_REG_ADMINQ_DEPTH		0x040	/* RW while disabled */
#define FERROCE_REG_ADMINQ_DB			0x044	/* WO: new producer index */
#define FERROCE_REG_ADMINQ_CI			0x048	/* RO: consumer index */
#define FERROCE_REG_AEQ_BASE_LO			0x050	/* RW while disabled */
#define FERROCE_REG_AEQ_BASE_HI			0x054	/* RW while disabled */
#define FERROCE_REG_AEQ_DEPTH			0x058	/* RW while disabled */
#define FERROCE_REG_EQ_DB			0x05c	/* WO: EQ doorbell, any EQ */
#define FERROCE_REG_NUM_VECTORS			0x060	/* RO */
#define FERROCE_REG_DB_PAGES			0x064	/* RO */
#define FERROCE_REG_DB_KERNEL_PAGES		0x068	/* RO */
#define FERROCE_REG_PORT_MAC_LO			0x070	/* RO: permanent mac[2..5] */
#define FERROCE_REG_PORT_MAC_HI			0x074	/* RO: permanent mac[0..1] */
#define FERROCE_REG_PORT_MTU			0x078	/* RW: Ethernet MTU */
#define FERROCE_REG_PORT_STATE			0x07c	/* RO */

/* VERSION */
#define FERROCE_VERSION_MAJOR_SHIFT		16
#define FERROCE_VERSION_MAJOR_MASK		0xffff0000
#define FERROCE_VERSION_MINOR_MASK		0x0000ffff
#define FERROCE_VERSION_MAJOR			1
#define FERROCE_VERSION_MINOR			10

/* MAGIC: "FRCE" read as a little-endian u32 */
#define FERROCE_MAGIC_VALUE			0x45435246

/* DEV_CAPS (also in struct ferroce_caps.device_caps) */
#define FERROCE_CAP_RC				0x00000001
#define FERROCE_CAP_UD				0x00000002
#define FERROCE_CAP_RDMA_READ			0x00000004
/* 1.4: CMP_SWP, FETCH_ADD (IB_ATOMIC_HCA) */
#define FERROCE_CAP_ATOMIC			0x00000008
#define FERROCE_CAP_INLINE			0x00000010
#define FERROCE_CAP_SEND_IMM			0x00000020
#define FERROCE_CAP_WRITE_IMM			0x00000040
#define FERROCE_CAP_MR_2LEVEL			0x00000080
#define FERROCE_CAP_ZERO_BASED_MR		0x00000100
#define FERROCE_CAP_ROCE_V1			0x00000200
#define FERROCE_CAP_ROCE_V2			0x00000400
#define FERROCE_CAP_GSI				0x00000800
#define FERROCE_CAP_PHYS_MR			0x00001000	/* 1.1: REG_MR of physical MRs */
/* 1.1: fast-reg, LOCAL_INV, SEND_INV, inline AVs */
#define FERROCE_CAP_MEM_MGT_EXT			0x00002000
#define FERROCE_CAP_PORT_MAC			0x00004000	/* 1.2: SET_PORT_MAC */
#define FERROCE_CAP_VLAN			0x00008000	/* 1.3: 802.1Q-tagged GID entries */
/* 1.5: UC QPs (SEND, RDMA WRITE, with immediate) */
#define FERROCE_CAP_UC				0x00010000
#define FERROCE_CAP_SRQ				0x00020000	/* 1.6: shared receive queues */
#define FERROCE_CAP_MODIFY_MR			0x00040000	/* 1.6: MODIFY_MR */
#define FERROCE_CAP_RESIZE_CQ			0x00080000	/* 1.6: RESIZE_CQ */
/* 1.7: UD multicast (ATTACH/DETACH_MCAST) */
#define FERROCE_CAP_MCAST			0x00100000
/* 1.7: memory windows, type 1 and 2 */
#define FERROCE_CAP_MW				0x00200000
/* 1.8: RC ATOMIC_WRITE (IBTA 1.5) */
#define FERROCE_CAP_ATOMIC_WRITE		0x00400000
/* 1.8: RC FLUSH, global visibility (IBTA 1.5) */
#define FERROCE_CAP_FLUSH			0x00800000

/* DEV_CTRL */
#define FERROCE_CTRL_RESET			0x00000001	/* self-clearing */
#define FERROCE_CTRL_ENABLE			0x00000002
#define FERROCE_CTRL_VALID_MASK			0x00000003

/* DEV_STATUS */
#define FERROCE_DEV_STATUS_READY		0x00000001
#define FERROCE_DEV_STATUS_RESETTING	0x00000002
#define FERROCE_DEV_STATUS_FATAL		0x00000004

/* FATAL_CODE */
#define FERROCE_FATAL_NONE			0
#define FERROCE_FATAL_BAD_CONFIG		1	/* ENABLE with bad queues */
#define FERROCE_FATAL_ADMINQ_DMA		2	/* admin SQ/CQ DMA failed */
#define FERROCE_FATAL_AEQ_DMA			3	/* AEQ write DMA failed */
#define FERROCE_FATAL_INTERNAL			4

/* Timeouts the device promises (driver waits at most this long) */
#define FERROCE_RESET_TIMEOUT_MS		1000
#define FERROCE_CMD_TIMEOUT_MS			5000

/* ADMINQ_DB / ADMINQ_CI: a free-running 16-bit index in bits 15:0 */
#define FERROCE_ADMINQ_IDX_MASK			0x0000ffff
#define FERROCE_ADMINQ_DEPTH_MIN		2
#define FERROCE_ADMINQ_DEPTH_MAX		4096
#define FERROCE_RING_ALIGN			64	/* admin SQ/CQ, EQ bases */

/* EQ_DB (BAR0): ci in 15:0, eqn in 23:16, 30:24 reserved, arm in 31 */
#define FERROCE_EQ_DB_CI_MASK			0x0000ffff
#define FERROCE_EQ_DB_EQN_SHIFT			16
#define FERROCE_EQ_DB_EQN_MASK			0x00ff0000
#define FERROCE_EQ_DB_RSVD_MASK			0x7f000000
#define FERROCE_EQ_DB_ARM			0x80000000
#define FERROCE_EQ_DEPTH_MIN			2
#define FERROCE_EQ_DEPTH_MAX			4096
#define FERROCE_AEQN				0	/* async EQ, vector 0 */

/* PORT_MTU: Ethernet (L3) MTU of the port */
#define FERROCE_PORT_MTU_MIN			576
#define FERROCE_PORT_MTU_MAX			9000
#define FERROCE_PORT_MTU_DEFAULT		1500

/* PORT_STATE */
#define FERROCE_PORT_STATE_LINK_UP		0x00000001

/* ------------------------------------------------------------------------
 * Doorbell pages (BAR2).  Page 0 is the kernel's, pages 1..DB_PAGES-1 are
 * handed out one per user context and mmap()ed by the provider.  Every
 * page has the same layout; doorbells are single 8-byte writes.
 * ------------------------------------------------------------------------
 */
#define FERROCE_DB_SQ				0x000
#define FERROCE_DB_RQ				0x008
#define FERROCE_DB_CQ				0x010
#define FERROCE_DB_WRITE_SIZE			8

/* SQ / RQ doorbell: qpn 23:0, 31:24 rsvd, producer index 47:32, 63:48 rsvd */
#define FERROCE_DB_QN_MASK			0x0000000000ffffffULL
#define FERROCE_DB_PI_SHIFT			32
#define FERROCE_DB_IDX_MASK			0x0000ffff00000000ULL
#define FERROCE_DB_QP_RSVD_MASK			0xffff0000ff000000ULL
/* CQ doorbell: cqn 23:0, arm_sn 25:24, cmd 27:26, 31:28 rsvd, ci 47:32 */
#define FERROCE_DB_CQ_SN_SHIFT			24
#define FERROCE_DB_CQ_SN_MASK			0x0000000003000000ULL
#define FERROCE_DB_CQ_CMD_SHIFT			26
#define FERROCE_DB_CQ_CMD_MASK			0x000000000c000000ULL
#define FERROCE_DB_CQ_CI_SHIFT			32
#define FERROCE_DB_CQ_RSVD_MASK			0xffff0000f0000000ULL
#define FERROCE_CQ_CMD_CI			0	/* update ci only */
#define FERROCE_CQ_CMD_ARM_NEXT			1
#define FERROCE_CQ_CMD_ARM_SOLICITED		2

#define FERROCE_DB_SQ_VAL(qpn, pi) \
	((((__u64)(pi) & 0xffff) << 32) | ((__u64)(qpn) & 0xffffff))
#define FERROCE_DB_CQ_VAL(cqn, ci, cmd, sn) \
	((((__u64)(ci) & 0xffff) << 32) | (((__u64)(cmd) & 3) << 26) | \
	 (((__u64)(sn) & 3) << 24) | ((__u64)(cqn) & 0xffffff))

/* Doorbell records: 8 bytes, 8-byte aligned, in host memory */
#define FERROCE_DBREC_ALIGN			8

/* ------------------------------------------------------------------------
 * Admin queue: a ring of 128-byte commands (host memory) and a ring of
 * 32-byte completions of the same depth, slot for slot.
 * ------------------------------------------------------------------------
 */
#define FERROCE_CMD_SIZE			128
#define FERROCE_CMD_COMP_SIZE			32

/* opcodes */
#define FERROCE_CMD_QUERY_CAPS			0x01
#define FERROCE_CMD_QUERY_PORT			0x02
#define FERROCE_CMD_SET_PORT_MTU		0x03
#define FERROCE_CMD_QUERY_COUNTERS		0x04
#define FERROCE_CMD_SET_PORT_MAC		0x05	/* 1.2, CAP_PORT_MAC */
#define FERROCE_CMD_CREATE_EQ			0x10
#define FERROCE_CMD_DESTROY_EQ			0x11
#define FERROCE_CMD_CREATE_CQ			0x20
#define FERROCE_CMD_DESTROY_CQ			0x21
#define FERROCE_CMD_RESIZE_CQ			0x22	/* 1.6, CAP_RESIZE_CQ */
#define FERROCE_CMD_ALLOC_PD			0x30
#define FERROCE_CMD_DEALLOC_PD			0x31
#define FERROCE_CMD_REG_MR			0x40
#define FERROCE_CMD_DEREG_MR			0x41
#define FERROCE_CMD_MODIFY_MR			0x42	/* 1.6, CAP_MODIFY_MR */
#define FERROCE_CMD_CREATE_QP			0x50
#define FERROCE_CMD_DESTROY_QP			0x51
#define FERROCE_CMD_MODIFY_QP			0x52
#define FERROCE_CMD_QUERY_QP			0x53
#define FERROCE_CMD_CREATE_SRQ			0x54	/* 1.6, CAP_SRQ */
#define FERROCE_CMD_DESTROY_SRQ			0x55	/* 1.6, CAP_SRQ */
#define FERROCE_CMD_MODIFY_SRQ			0x56	/* 1.6, CAP_SRQ */
#define FERROCE_CMD_QUERY_SRQ			0x57	/* 1.6, CAP_SRQ */
#define FERROCE_CMD_RESIZE_SRQ			0x58	/* 1.6, CAP_SRQ */
#define FERROCE_CMD_ATTACH_MCAST		0x59	/* 1.7, CAP_MCAST */
#define FERROCE_CMD_DETACH_MCAST		0x5a	/* 1.7, CAP_MCAST */
#define FERROCE_CMD_CREATE_AH			0x60
#define FERROCE_CMD_DESTROY_AH			0x61
#define FERROCE_CMD_SET_GID			0x70
#define FERROCE_CMD_CLEAR_GID			0x71

/* completion status */
#define FERROCE_STATUS_SUCCESS			0
#define FERROCE_STATUS_BAD_OPCODE		1
#define FERROCE_STATUS_BAD_PARAM		2
#define FERROCE_STATUS_BAD_RESERVED		3
#define FERROCE_STATUS_BAD_HANDLE		4
#define FERROCE_STATUS_BAD_STATE		5
#define FERROCE_STATUS_BAD_ATTR_MASK		6
#define FERROCE_STATUS_NO_RESOURCES		7
#define FERROCE_STATUS_BUSY			8
#define FERROCE_STATUS_DMA_ERROR		9
#define FERROCE_STATUS_NOT_SUPPORTED		10
#define FERROCE_STATUS_COUNT			16	/* counters array size */

/* struct ferroce_cmd_comp.flags */
#define FERROCE_COMP_PHASE			0x01

/* 8-byte header at the start of every command */
struct ferroce_cmd_hdr {
	__u8 opcode;
	__u8 flags;		/* reserved, 0 */
	__le16 cmd_id;		/* opaque, echoed in the completion */
	__le32 reserved;
};

struct ferroce_cmd {
	struct ferroce_cmd_hdr hdr;
	__u8 payload[120];
};

struct ferroce_cmd_comp {
	__le16 cmd_id;
	__u8 status;
	__u8 reserved0;
	__le16 sq_ci;		/* admin SQ consumer index after this command */
	__le16 reserved1;
	__le32 out[5];		/* command specific results */
	__u8 reserved2[3];
	__u8 flags;		/* FERROCE_COMP_PHASE, written last */
};

/* Page buffer list descriptor (queues and MRs) */
#define FERROCE_PBL_LEVEL_0			0	/* addr = the only page */
#define FERROCE_PBL_LEVEL_1			1	/* addr -> __le64[count] */
#define FERROCE_PBL_LEVEL_2			2	/* addr -> __le64[] of L1 pages */
#define FERROCE_PBL_L1_ENTRIES			512	/* per 4 KiB list page */
#define FERROCE_PBL_MAX_PAGES			262144	/* 512 * 512 */
#define FERROCE_PAGE_SHIFT_MIN			12
#define FERROCE_PAGE_SHIFT_MAX			30
#define FERROCE_PAGE_SIZE_CAP			0x7ffff000ULL

struct ferroce_pbl {
	__le64 addr;
	__le32 page_count;
	__u8 page_shift;
	__u8 level;
	__le16 reserved;
};

/* QUERY_CAPS: response DMA-written to resp_addr */
struct ferroce_cmd_query_caps {
	struct ferroce_cmd_hdr hdr;
	__le64 resp_addr;
	__le32 resp_len;	/* >= sizeof(struct ferroce_caps) */
	__le32 reserved;
};

struct ferroce_caps {
	__le32 device_caps;
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 max_sge;
	__le32 max_inline;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_ah;
	__le32 max_eq;
	__le32 max_eqe;
	__le32 max_qp_rd_atom;
	__le32 max_qp_init_rd_atom;
	__le32 gid_table_len;
	__le32 pkey_table_len;
	__le32 num_ports;
	__le32 max_msg_size;
	__le32 max_pbl_pages;
	__le32 db_pages;
	__le32 local_ca_ack_delay;
	__le32 max_path_mtu;	/* FERROCE_MTU_* */
	__le64 max_mr_size;
	__le64 page_size_cap;
	__le64 fw_version;
};

/* QUERY_PORT: results in the completion (out[]) */
#define FERROCE_PORT_OUT_STATE			0	/* FERROCE_PORT_ACTIVE/DOWN */
#define FERROCE_PORT_OUT_MTU			1	/* Ethernet MTU */
#define FERROCE_PORT_OUT_ACTIVE_MTU		2	/* FERROCE_MTU_* */
#define FERROCE_PORT_OUT_MAC_LO			3	/* current MAC, as REG_PORT_MAC_LO */
#define FERROCE_PORT_OUT_MAC_HI			4	/* current MAC, as REG_PORT_MAC_HI */
#define FERROCE_PORT_DOWN			1	/* == IB_PORT_DOWN */
#define FERROCE_PORT_ACTIVE			4	/* == IB_PORT_ACTIVE */

struct ferroce_cmd_query_port {
	struct ferroce_cmd_hdr hdr;
	__le32 port;		/* 1 */
	__le32 reserved;
};

struct ferroce_cmd_set_port_mtu {
	struct ferroce_cmd_hdr hdr;
	__le32 port;		/* 1 */
	__le32 mtu;		/* Ethernet MTU, PORT_MTU_MIN..MAX */
};

/* SET_PORT_MAC (1.2): the port's current MAC (receive steering, loopback) */
struct ferroce_cmd_set_port_mac {
	struct ferroce_cmd_hdr hdr;
	__le32 port;		/* 1 */
	__le32 reserved;
	__u8 mac[6];		/* wire order; unicast, non-zero */
	__u8 reserved2[2];
};

struct ferroce_cmd_query_counters {
	struct ferroce_cmd_hdr hdr;
	__le64 resp_addr;
	__le32 resp_len;	/* >= FERROCE_COUNTERS_SIZE_1_0 */
	__le32 reserved;
};

/*
 * The size of struct ferroce_counters in devices 1.0..1.3. QUERY_COUNTERS
 * writes min(resp_len, sizeof(struct ferroce_counters)) bytes (1.4).
 */
#define FERROCE_COUNTERS_SIZE_1_0		240
/* The size of struct ferroce_counters in 1.4 (1.5 adds the UC drops). */
#define FERROCE_COUNTERS_SIZE_1_4		504
/* The size of struct ferroce_counters in 1.5..1.8 (1.9 adds the credits). */
#define FERROCE_COUNTERS_SIZE_1_5		536
/* The size of struct ferroce_counters in 1.9 (1.10 adds the keep-alives). */
#define FERROCE_COUNTERS_SIZE_1_9		552

struct ferroce_counters {
	__le64 cmds_ok;
	__le64 cmds_failed;
	__le64 cmd_status[16];	/* by FERROCE_STATUS_* */
	__le64 malformed_doorbells;
	__le64 bad_dma;
	__le64 bad_reg_access;
	__le64 sq_doorbells;
	__le64 rq_doorbells;
	__le64 cq_doorbells;
	__le64 eq_doorbells;
	__le64 eqes_posted;
	__le64 eq_overflows;
	__le64 interrupts;
	__le64 async_events;
	__le64 resets;
	/* New in 1.4: the data path */
	__le64 tx_pkts;
	__le64 rx_pkts;
	__le64 tx_bytes;
	__le64 rx_bytes;
	__le64 loopback_pkts;
	__le64 tx_dropped;
	__le64 rx_stalled;
	__le64 rx_truncated;
	__le64 rx_not_roce;
	__le64 rx_bad_header;
	__le64 rx_bad_bth;
	__le64 rx_bad_icrc;
	__le64 rx_no_qp;
	__le64 rx_bad_key;
	__le64 rx_bad_addr;
	__le64 rx_ud_no_wqe;
	__le64 dup_requests;
	__le64 seq_naks_sent;
	__le64 rnr_naks_sent;
	__le64 err_naks_sent;
	__le64 acks_sent;
	__le64 responses_rcvd;
	__le64 rnr_naks_rcvd;
	__le64 seq_naks_rcvd;
	__le64 stale_responses;
	__le64 timeouts;
	__le64 ack_retries;
	__le64 retransmits;
	__le64 retry_exceeded;
	__le64 rnr_retry_exceeded;
	__le64 cqes;
	__le64 cqe_errors;
	__le64 cqe_flushed;
	/* New in 1.5: UC responder drops */
	__le64 rx_uc_dropped;
	__le64 rx_uc_seq_err;
	__le64 rx_uc_no_wqe;
	__le64 rx_uc_bad_req;
	/* New in 1.9: end-to-end credits */
	__le64 credit_waits;
	__le64 credit_updates;
	/* New in 1.10 */
	__le64 credit_keepalives;
};

/* CREATE_EQ: out[0] = eqn (== vector) */
struct ferroce_cmd_create_eq {
	struct ferroce_cmd_hdr hdr;
	__le64 base;		/* contiguous, RING_ALIGN aligned */
	__le32 depth;		/* power of two, EQ_DEPTH_MIN..MAX */
	__le16 vector;		/* 1..NUM_VECTORS-1 */
	__le16 reserved;
};

struct ferroce_cmd_destroy_eq {
	struct ferroce_cmd_hdr hdr;
	__le32 eqn;
	__le32 reserved;
};

/* CREATE_CQ: out[0] = cqn */
struct ferroce_cmd_create_cq {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl buf;	/* depth * 32 bytes of CQEs */
	__le64 dbrec_addr;	/* struct ferroce_cq_dbrec */
	__le32 depth;		/* power of two, 2..max_cqe */
	__le32 eqn;		/* completion EQ, 1..NUM_VECTORS-1 */
	__le32 db_page;		/* doorbell page allowed to ring it */
	__le32 reserved;
};

struct ferroce_cmd_destroy_cq {
	struct ferroce_cmd_hdr hdr;
	__le32 cqn;
	__le32 reserved;
};

/* RESIZE_CQ: out[0] = the producer index from which CQEs go to the new ring */
struct ferroce_cmd_resize_cq {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl buf;		/* depth * 32 bytes, prepared (device.rst) */
	__le32 cqn;
	__le32 depth;			/* power of two, 2..max_cqe, >= pi - ci */
	__le64 reserved;
};

/* ALLOC_PD: out[0] = pdn */
struct ferroce_cmd_alloc_pd {
	struct ferroce_cmd_hdr hdr;
	__le64 reserved;
};

struct ferroce_cmd_dealloc_pd {
	struct ferroce_cmd_hdr hdr;
	__le32 pdn;
	__le32 reserved;
};

/* Access flags: same values as IB_ACCESS_* / IBV_ACCESS_* */
#define FERROCE_ACCESS_LOCAL_WRITE		0x01
#define FERROCE_ACCESS_REMOTE_WRITE		0x02
#define FERROCE_ACCESS_REMOTE_READ		0x04
#define FERROCE_ACCESS_REMOTE_ATOMIC		0x08
#define FERROCE_ACCESS_MW_BIND			0x10	/* 1.7, CAP_MW */
#define FERROCE_ACCESS_ZERO_BASED		0x20
#define FERROCE_ACCESS_FLUSH_GLOBAL		0x100	/* 1.8, CAP_FLUSH: MRs and RC QPs */
#define FERROCE_ACCESS_FLUSH_PERSISTENT		0x200	/* 1.8, CAP_FLUSH: RC QPs only */
#define FERROCE_ACCESS_MR_MASK			0x2f	/* | MW_BIND, FLUSH_GLOBAL with the caps */
#define FERROCE_ACCESS_QP_MASK			0x0f	/* | FLUSH_* with CAP_FLUSH, RC */

/* Memory keys: index in 31:8, variant ("key") in 7:0; index 0 is invalid */
#define FERROCE_KEY_INDEX_SHIFT			8
#define FERROCE_KEY_VARIANT_MASK		0xff

/* REG_MR mr_type (1.1; 0 in a 1.0 command) */
#define FERROCE_MR_TYPE_USER			0	/* page list translation */
#define FERROCE_MR_TYPE_PHYS			1	/* addresses are guest physical */
#define FERROCE_MR_TYPE_FAST_REG		2	/* registered by REG_MR WQEs */
#define FERROCE_MR_TYPE_MW1			3	/* 1.7, CAP_MW: memory window, type 1 */
#define FERROCE_MR_TYPE_MW2			4	/* 1.7, CAP_MW: memory window, type 2 */
#define FERROCE_FAST_REG_MAX_PAGES		512

/* REG_MR: out[0] = lkey = rkey */
struct ferroce_cmd_reg_mr {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl pbl;
	__le64 iova;		/* start VA; 0 if ZERO_BASED */
	__le64 length;		/* bytes, 1..max_mr_size */
	__le32 pdn;
	__le32 access;		/* FERROCE_ACCESS_* */
	__le32 offset;		/* start offset inside the first page */
	__u8 key_variant;	/* becomes key bits 7:0 */
	__u8 mr_type;		/* FERROCE_MR_TYPE_* */
	__u8 reserved0[2];
	__le32 max_pages;	/* FAST_REG: 1..FAST_REG_MAX_PAGES, else 0 */
	__le32 reserved1;
};

struct ferroce_cmd_dereg_mr {
	struct ferroce_cmd_hdr hdr;
	__le32 key;
	__le32 reserved;
};

/* MODIFY_MR (1.6): changes a USER or PHYS MR in place, keeping its key */
#define FERROCE_MODIFY_MR_PD			0x01	/* pdn is the new PD */
#define FERROCE_MODIFY_MR_ACCESS		0x02	/* access is the new rights */

struct ferroce_cmd_modify_mr {
	struct ferroce_cmd_hdr hdr;
	__le32 key;
	__le32 flags;		/* FERROCE_MODIFY_MR_* */
	__le32 pdn;
	__le32 access;		/* FERROCE_ACCESS_*, ZERO_BASED as before */
};

/* QP types */
#define FERROCE_QPT_RC				0
#define FERROCE_QPT_UD				1
#define FERROCE_QPT_GSI				2	/* UD semantics, qpn 1 */
#define FERROCE_QPT_UC				3	/* 1.5, CAP_UC */
#define FERROCE_GSI_QPN				1
#define FERROCE_FIRST_QPN			2

/* CREATE_QP flags */
#define FERROCE_QP_FLAG_SQ_SIG_ALL		0x01
#define FERROCE_QP_FLAG_SRQ			0x02	/* 1.6, CAP_SRQ: receives from srqn */

/* WQE strides */
#define FERROCE_SQ_WQE_SHIFT_MIN		7	/* 128 B */
#define FERROCE_SQ_WQE_SHIFT_MAX		10	/* 1 KiB */
#define FERROCE_RQ_WQE_SHIFT_MIN		5	/* 32 B */
#define FERROCE_RQ_WQE_SHIFT_MAX		10

/* CREATE_QP: out[0] = qpn */
struct ferroce_cmd_create_qp {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl sq_buf;	/* sq_depth << sq_wqe_shift bytes */
	struct ferroce_pbl rq_buf;	/* rq_depth << rq_wqe_shift bytes */
	__le64 sq_dbrec_addr;		/* struct ferroce_qp_dbrec */
	__le64 rq_dbrec_addr;		/* 0 if rq_depth == 0 */
	__le32 pdn;
	__le32 send_cqn;
	__le32 recv_cqn;
	__le32 sq_depth;		/* power of two, 1..max_qp_wr */
	__le32 rq_depth;		/* 0 or power of two */
	__le32 db_page;
	__le32 max_inline;		/* <= stride - 64 */
	__u8 qp_type;			/* FERROCE_QPT_* */
	__u8 sq_wqe_shift;
	__u8 rq_wqe_shift;
	__u8 flags;			/* FERROCE_QP_FLAG_* */
	/* 1.6 */
	__le32 srqn;			/* QP_FLAG_SRQ: the SRQ, else 0 */
	__le32 reserved;
};

struct ferroce_cmd_destroy_qp {
	struct ferroce_cmd_hdr hdr;
	__le32 qpn;
	__le32 reserved;
};

/*
 * Shared receive queues (1.6, CAP_SRQ).  A ring of RQ WQEs (struct
 * ferroce_rq_wqe_hdr + SGEs) with a doorbell record that software writes
 * (pi) and the device writes (ci); no doorbell.
 */
#define FERROCE_FIRST_SRQN			1

/* CREATE_SRQ: out[0] = srqn */
struct ferroce_cmd_create_srq {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl buf;		/* depth << wqe_shift bytes */
	__le64 dbrec_addr;		/* struct ferroce_srq_dbrec */
	__le32 pdn;
	__le32 depth;			/* power of two, 1..max_qp_wr */
	__le32 limit;			/* 0 (not armed) or 1..depth */
	__u8 wqe_shift;			/* FERROCE_RQ_WQE_SHIFT_MIN..MAX */
	__u8 reserved0[3];
	__le64 reserved1;
};

struct ferroce_cmd_destroy_srq {
	struct ferroce_cmd_hdr hdr;
	__le32 srqn;
	__le32 reserved;
};

/* MODIFY_SRQ: (re)arms the limit event; 0 disarms */
struct ferroce_cmd_modify_srq {
	struct ferroce_cmd_hdr hdr;
	__le32 srqn;
	__le32 limit;			/* 0..depth */
};

/* QUERY_SRQ: results in the completion (out[]) */
#define FERROCE_SRQ_OUT_LIMIT			0	/* armed limit, 0 = not armed */
#define FERROCE_SRQ_OUT_DEPTH			1
#define FERROCE_SRQ_OUT_CI			2	/* device's consumer index */

struct ferroce_cmd_query_srq {
	struct ferroce_cmd_hdr hdr;
	__le32 srqn;
	__le32 reserved;
};

/* RESIZE_SRQ: a new ring, WQEs not yet taken copied at the same indices */
struct ferroce_cmd_resize_srq {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_pbl buf;		/* depth << wqe_shift bytes */
	__le32 srqn;
	__le32 depth;			/* power of two, >= pi - ci, <= max_qp_wr */
	__u8 wqe_shift;			/* the SRQ's */
	__u8 reserved0[3];
	__le32 reserved1;
};

/*
 * UD multicast (1.7, CAP_MCAST): ATTACH_MCAST / DETACH_MCAST of a UD QP to a
 * multicast GID (ff00::/8, or IPv4-mapped 224.0.0.0/4).  Datagrams to the
 * group have BTH destination QP FERROCE_MCAST_QPN.
 */
#define FERROCE_MAX_MCAST_GRP			64
#define FERROCE_MAX_MCAST_QP_ATTACH		16
#define FERROCE_MCAST_QPN			0xffffff

struct ferroce_cmd_mcast {
	struct ferroce_cmd_hdr hdr;
	__le32 qpn;			/* a UD QP */
	__le32 reserved;
	__u8 gid[16];			/* the group, wire order */
};

/* QP states: same values as enum ib_qp_state / ibv_qp_state */
#define FERROCE_QPS_RESET			0
#define FERROCE_QPS_INIT			1
#define FERROCE_QPS_RTR				2
#define FERROCE_QPS_RTS				3
#define FERROCE_QPS_SQD				4
#define FERROCE_QPS_SQE				5
#define FERROCE_QPS_ERR				6

/* MODIFY_QP attr_mask: same bits as enum ib_qp_attr_mask */
#define FERROCE_QP_ATTR_STATE			0x00000001
#define FERROCE_QP_ATTR_CUR_STATE		0x00000002
#define FERROCE_QP_ATTR_EN_SQD_ASYNC_NOTIFY	0x00000004
#define FERROCE_QP_ATTR_ACCESS_FLAGS		0x00000008
#define FERROCE_QP_ATTR_PKEY_INDEX		0x00000010
#define FERROCE_QP_ATTR_PORT			0x00000020
#define FERROCE_QP_ATTR_QKEY			0x00000040
#define FERROCE_QP_ATTR_AV			0x00000080
#define FERROCE_QP_ATTR_PATH_MTU		0x00000100
#define FERROCE_QP_ATTR_TIMEOUT			0x00000200
#define FERROCE_QP_ATTR_RETRY_CNT		0x00000400
#define FERROCE_QP_ATTR_RNR_RETRY		0x00000800
#define FERROCE_QP_ATTR_RQ_PSN			0x00001000
#define FERROCE_QP_ATTR_MAX_QP_RD_ATOMIC	0x00002000
#define FERROCE_QP_ATTR_ALT_PATH		0x00004000	/* unsupported */
#define FERROCE_QP_ATTR_MIN_RNR_TIMER		0x00008000
#define FERROCE_QP_ATTR_SQ_PSN			0x00010000
#define FERROCE_QP_ATTR_MAX_DEST_RD_ATOMIC	0x00020000
#define FERROCE_QP_ATTR_PATH_MIG_STATE		0x00040000	/* unsupported */
#define FERROCE_QP_ATTR_CAP			0x00080000	/* unsupported */
#define FERROCE_QP_ATTR_DEST_QPN		0x00100000
#define FERROCE_QP_ATTR_SUPPORTED		0x0013bfff

/* path MTU: same values as enum ib_mtu */
#define FERROCE_MTU_256				1
#define FERROCE_MTU_512				2
#define FERROCE_MTU_1024			3
#define FERROCE_MTU_2048			4
#define FERROCE_MTU_4096			5

/* network types of an address vector / GID entry */
#define FERROCE_NET_ROCE_V1			0	/* RoCE v1, Ethertype 0x8915 */
#define FERROCE_NET_IPV4			1	/* RoCE v2 over IPv4 */
#define FERROCE_NET_IPV6			2	/* RoCE v2 over IPv6 */

/* limits of QP attribute values */
#define FERROCE_PSN_MASK			0x00ffffff
#define FERROCE_QPN_MASK			0x00ffffff
#define FERROCE_FLOW_LABEL_MASK			0x000fffff
#define FERROCE_MAX_TIMEOUT			31
#define FERROCE_MAX_RETRY_CNT			7
#define FERROCE_MAX_RNR_RETRY			7
#define FERROCE_MAX_MIN_RNR_TIMER		31
#define FERROCE_MAX_RD_ATOMIC			16
#define FERROCE_PKEY_TABLE_LEN			1
#define FERROCE_DEFAULT_PKEY			0xffff
#define FERROCE_NUM_PORTS			1

/* Address vector (QP primary path, AH) */
struct ferroce_av {
	__u8 dgid[16];
	__u8 dmac[6];
	__u8 sgid_index;
	__u8 hop_limit;
	__le32 flow_label;	/* 19:0 */
	__u8 traffic_class;
	__u8 network_type;	/* FERROCE_NET_*, must match the sgid entry */
	__le16 udp_sport;	/* RoCE v2 source port, 0 = device chooses */
	__le16 vlan;		/* 0, or (CAP_VLAN) the sgid entry's VLAN_VALID | id */
	__u8 sl;		/* CAP_VLAN: 802.1Q priority (PCP) 0..7, else 0 */
	__u8 reserved[5];
};

/* MODIFY_QP payload and QUERY_QP response */
struct ferroce_qp_attr {
	__le32 qpn;
	__le32 attr_mask;
	__u8 qp_state;
	__u8 cur_qp_state;
	__u8 path_mtu;
	__u8 port_num;
	__le32 dest_qp_num;
	__le32 rq_psn;
	__le32 sq_psn;
	__le32 qkey;
	__le32 qp_access_flags;
	__le16 pkey_index;
	__u8 timeout;
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 min_rnr_timer;
	__u8 max_rd_atomic;
	__u8 max_dest_rd_atomic;
	struct ferroce_av av;
	__u8 en_sqd_async_notify;
	__u8 sq_draining;	/* QUERY_QP only */
	__u8 qp_type;		/* QUERY_QP only */
	__u8 reserved0;
	__le32 reserved1;
};

struct ferroce_cmd_modify_qp {
	struct ferroce_cmd_hdr hdr;
	struct ferroce_qp_attr attr;
};

struct ferroce_cmd_query_qp {
	struct ferroce_cmd_hdr hdr;
	__le64 resp_addr;
	__le32 resp_len;	/* >= sizeof(struct ferroce_qp_attr) */
	__le32 qpn;
};

/* CREATE_AH: out[0] = ahn */
struct ferroce_cmd_create_ah {
	struct ferroce_cmd_hdr hdr;
	__le32 pdn;
	__le32 reserved;
	struct ferroce_av av;
};

struct ferroce_cmd_destroy_ah {
	struct ferroce_cmd_hdr hdr;
	__le32 ahn;
	__le32 reserved;
};

/* GID table */
#define FERROCE_GID_TABLE_LEN			256
#define FERROCE_GID_TYPE_ROCE_V1		0
#define FERROCE_GID_TYPE_ROCE_V2		1
#define FERROCE_VLAN_VALID			0x8000
#define FERROCE_VLAN_ID_MASK			0x0fff

struct ferroce_cmd_set_gid {
	struct ferroce_cmd_hdr hdr;
	__u8 gid[16];
	__u8 smac[6];		/* source MAC of frames using this entry */
	__le16 vlan;		/* 0 = untagged, CAP_VLAN: VLAN_VALID | id 1..4094 */
	__le16 index;		/* < GID_TABLE_LEN */
	__u8 gid_type;		/* FERROCE_GID_TYPE_* */
	__u8 network_type;	/* FERROCE_NET_*, must match gid_type and gid */
	__le32 port;		/* 1 */
};

struct ferroce_cmd_clear_gid {
	struct ferroce_cmd_hdr hdr;
	__le16 index;
	__le16 reserved0;
	__le32 port;		/* 1 */
};

/* ------------------------------------------------------------------------
 * Event queues: 16-byte EQEs, owner/phase bit in the last byte.
 * ------------------------------------------------------------------------
 */
#define FERROCE_EQE_SIZE			16
#define FERROCE_EQE_OWNER			0x01

#define FERROCE_EQE_COMPLETION			0x01	/* obj = cqn, data = arm_sn */
/* obj = cmd_id, data = status, data2 = slot */
#define FERROCE_EQE_CMD_COMPLETION		0x02
#define FERROCE_EQE_PORT_ACTIVE			0x10	/* obj = port */
#define FERROCE_EQE_PORT_DOWN			0x11	/* obj = port */
/* obj = port, data = mtu; not sent in 1.0 */
#define FERROCE_EQE_PORT_MTU_CHANGE		0x12
#define FERROCE_EQE_QP_FATAL			0x20	/* obj = qpn, data = syndrome */
#define FERROCE_EQE_QP_LAST_WQE_REACHED		0x21	/* obj = qpn */
#define FERROCE_EQE_QP_SQ_DRAINED		0x22	/* obj = qpn */
#define FERROCE_EQE_QP_COMM_EST			0x23	/* obj = qpn */
#define FERROCE_EQE_QP_ACCESS_ERR		0x24	/* obj = qpn */
/* 1.3: obj = qpn, data = 0 ACK timeout / 1 RNR; informational */
#define FERROCE_EQE_QP_RETRY_EXCEEDED		0x25
#define FERROCE_EQE_CQ_ERROR			0x30	/* obj = cqn, data = syndrome */
#define FERROCE_EQE_DEVICE_FATAL		0x40	/* data = fatal code */
#define FERROCE_EQE_SRQ_LIMIT_REACHED		0x50	/* 1.6: obj = srqn, data = limit */

#define FERROCE_CQ_SYNDROME_OVERFLOW		1
#define FERROCE_CQ_SYNDROME_DMA			2

struct ferroce_eqe {
	__le32 obj;
	__le32 data;
	__le32 data2;
	__u8 reserved;
	__u8 subtype;
	__u8 event_type;	/* FERROCE_EQE_* */
	__u8 owner;		/* FERROCE_EQE_OWNER, written last */
};

/* ------------------------------------------------------------------------
 * Work queues: SGE, SQ WQE (header + segment + SGEs or inline data),
 * RQ WQE, doorbell records, CQE.
 * ------------------------------------------------------------------------
 */
struct ferroce_sge {
	__le64 addr;
	__le32 length;
	__le32 lkey;
};

/* SQ opcodes: same values as enum ibv_wr_opcode */
#define FERROCE_WR_RDMA_WRITE			0
#define FERROCE_WR_RDMA_WRITE_IMM		1
#define FERROCE_WR_SEND				2
#define FERROCE_WR_SEND_IMM			3
#define FERROCE_WR_RDMA_READ			4	/* RC */
#define FERROCE_WR_ATOMIC_CMP_SWP		5	/* CAP_ATOMIC, RC */
#define FERROCE_WR_ATOMIC_FETCH_ADD		6	/* CAP_ATOMIC, RC */
#define FERROCE_WR_LOCAL_INV			7	/* CAP_MEM_MGT_EXT, RC */
#define FERROCE_WR_BIND_MW			8	/* CAP_MW, RC */
#define FERROCE_WR_SEND_INV			9	/* CAP_MEM_MGT_EXT, RC */
#define FERROCE_WR_FLUSH			14	/* 1.8, CAP_FLUSH, RC */
#define FERROCE_WR_ATOMIC_WRITE			15	/* 1.8, CAP_ATOMIC_WRITE, RC */
#define FERROCE_WR_REG_MR			0x20	/* CAP_MEM_MGT_EXT, RC */

/* SQ WQE flags */
#define FERROCE_WQE_SIGNALED			0x01
#define FERROCE_WQE_SOLICITED			0x02
#define FERROCE_WQE_INLINE			0x04
#define FERROCE_WQE_FENCE			0x08
#define FERROCE_WQE_AV				0x10	/* UD/GSI: inline address vector */

#define FERROCE_SQ_WQE_SEG_OFFSET		32
#define FERROCE_SQ_WQE_DATA_OFFSET		64
#define FERROCE_SQ_WQE_AV_DATA_OFFSET		112	/* SGEs/inline data with WQE_AV */
#define FERROCE_RQ_WQE_DATA_OFFSET		16

struct ferroce_sq_wqe_hdr {
	__le64 wr_id;
	__u8 opcode;		/* FERROCE_WR_* */
	__u8 flags;		/* FERROCE_WQE_* */
	__u8 num_sge;		/* SGEs at DATA_OFFSET unless INLINE */
	__u8 reserved0;
	__be32 imm_data;	/* *_IMM opcodes; key for LOCAL_INV, SEND_INV */
	__le32 inline_len;	/* INLINE: bytes at DATA_OFFSET */
	__le32 reserved1;
	__le64 reserved2;
};

/* segment at SEG_OFFSET: one of the following, zero for plain RC/UC SEND */
struct ferroce_sq_wqe_rdma {
	__le64 remote_addr;
	__le32 rkey;
	__le32 reserved;
};

struct ferroce_sq_wqe_ud {
	__le32 ahn;
	__le32 remote_qpn;
	__le32 remote_qkey;
	__le32 reserved;
};

/* CMP_SWP: compare_add = compare, swap; FETCH_ADD: compare_add = addend */
struct ferroce_sq_wqe_atomic {
	__le64 remote_addr;
	__le32 rkey;
	__le32 reserved;
	__le64 compare_add;
	__le64 swap;
};

/* REG_MR WQE: this segment, a struct ferroce_pbl at DATA_OFFSET */
struct ferroce_sq_wqe_reg_mr {
	__le64 iova;
	__le64 length;
	__le32 key;		/* a FREE FAST_REG MR; bits 7:0 = new variant */
	__le32 access;		/* FERROCE_ACCESS_*, not ZERO_BASED */
	__le64 reserved;
};

/* BIND_MW WQE (1.7, CAP_MW): type 1 and type 2 windows */
struct ferroce_sq_wqe_bind_mw {
	__le64 addr;		/* the window, in the MR's address space */
	__le64 length;		/* type 1: 0 unbinds */
	__le32 mw_key;		/* the MW; bits 7:0 = its new variant */
	__le32 mr_key;		/* the MR (with MW_BIND), exact variant */
	__le32 access;		/* FERROCE_ACCESS_REMOTE_*; LOCAL_WRITE ignored */
	__le32 reserved;
};

/* ATOMIC_WRITE WQE (1.8, CAP_ATOMIC_WRITE): 8 bytes placed as one store */
struct ferroce_sq_wqe_atomic_write {
	__le64 remote_addr;	/* 8-byte aligned */
	__le32 rkey;
	__le32 reserved0;
	__u8 data[8];		/* written verbatim, in this byte order */
	__le64 reserved1;
};

/* FLUSH placement types (bit mask) and selectivity levels (1.8, CAP_FLUSH) */
#define FERROCE_FLUSH_GLOBAL			0x01	/* = IB_FLUSH_GLOBAL */
#define FERROCE_FLUSH_PERSISTENT		0x02	/* = IB_FLUSH_PERSISTENT */
#define FERROCE_FLUSH_RANGE			0	/* = IB_FLUSH_RANGE */
#define FERROCE_FLUSH_MR			1	/* = IB_FLUSH_MR */

/* FLUSH WQE (1.8, CAP_FLUSH) */
struct ferroce_sq_wqe_flush {
	__le64 remote_addr;	/* RANGE: start of the range */
	__le32 rkey;
	__le32 length;		/* RANGE: bytes; MR: sent, not used */
	__u8 type;		/* FERROCE_FLUSH_GLOBAL | FERROCE_FLUSH_PERSISTENT */
	__u8 level;		/* FERROCE_FLUSH_RANGE or FERROCE_FLUSH_MR */
	__u8 reserved0[6];
	__le64 reserved1;
};

struct ferroce_rq_wqe_hdr {
	__le64 wr_id;
	__u8 num_sge;
	__u8 reserved0[3];
	__le32 reserved1;
};

/* Doorbell records: software writes, the device DMA-reads */
struct ferroce_qp_dbrec {
	__le32 pi;		/* producer index, 15:0 used */
	__le32 reserved;
};

struct ferroce_cq_dbrec {
	__le32 ci;		/* consumer index, 15:0 used */
	__le32 reserved;
};

/* SRQ record: software writes pi, the device DMA-writes ci */
struct ferroce_srq_dbrec {
	__le32 pi;		/* producer index, 15:0 used; software */
	__le32 ci;		/* consumer index, 15:0 used; device */
};

/* CQE opcodes: same values as enum ibv_wc_opcode */
#define FERROCE_WC_SEND				0
#define FERROCE_WC_RDMA_WRITE			1
#define FERROCE_WC_RDMA_READ			2
#define FERROCE_WC_COMP_SWAP			3
#define FERROCE_WC_FETCH_ADD			4
#define FERROCE_WC_BIND_MW			5	/* 1.7, CAP_MW */
#define FERROCE_WC_LOCAL_INV			6
#define FERROCE_WC_FLUSH			8	/* 1.8, CAP_FLUSH */
#define FERROCE_WC_ATOMIC_WRITE			9	/* 1.8, CAP_ATOMIC_WRITE */
#define FERROCE_WC_REG_MR			0x20	/* not IB_WC_REG_MR (10): driver maps */
#define FERROCE_WC_RECV				128
#define FERROCE_WC_RECV_RDMA_WITH_IMM		129

/* CQE status: same values as enum ibv_wc_status */
#define FERROCE_WC_SUCCESS			0
#define FERROCE_WC_LOC_LEN_ERR			1
#define FERROCE_WC_LOC_QP_OP_ERR		2
#define FERROCE_WC_LOC_EEC_OP_ERR		3
#define FERROCE_WC_LOC_PROT_ERR			4
#define FERROCE_WC_WR_FLUSH_ERR			5
#define FERROCE_WC_MW_BIND_ERR			6
#define FERROCE_WC_BAD_RESP_ERR			7
#define FERROCE_WC_LOC_ACCESS_ERR		8
#define FERROCE_WC_REM_INV_REQ_ERR		9
#define FERROCE_WC_REM_ACCESS_ERR		10
#define FERROCE_WC_REM_OP_ERR			11
#define FERROCE_WC_RETRY_EXC_ERR		12
#define FERROCE_WC_RNR_RETRY_EXC_ERR		13
#define FERROCE_WC_LOC_RDD_VIOL_ERR		14
#define FERROCE_WC_REM_INV_RD_REQ_ERR		15
#define FERROCE_WC_REM_ABORT_ERR		16
#define FERROCE_WC_INV_EECN_ERR			17
#define FERROCE_WC_INV_EEC_STATE_ERR		18
#define FERROCE_WC_FATAL_ERR			19
#define FERROCE_WC_RESP_TIMEOUT_ERR		20
#define FERROCE_WC_GENERAL_ERR			21

/* CQE flags */
#define FERROCE_CQE_WITH_IMM			0x01
#define FERROCE_CQE_GRH				0x02	/* UD: 40-byte GRH area filled */
#define FERROCE_CQE_SOLICITED			0x04
#define FERROCE_CQE_WITH_INV			0x08	/* imm_data = invalidated key */
#define FERROCE_CQE_NET_TYPE_SHIFT		4	/* FERROCE_NET_* in 5:4 */
#define FERROCE_CQE_NET_TYPE_MASK		0x30
#define FERROCE_CQE_GID_INDEX			0x40	/* 1.3, UD receives: gid_index is valid */
#define FERROCE_CQE_OWNER			0x01

#define FERROCE_CQE_SIZE			32

struct ferroce_cqe {
	__le64 wr_id;
	__le32 byte_len;
	__be32 imm_data;
	__le32 qpn;		/* 23:0 */
	__le32 src_qp;		/* 23:0, UD receives */
	__u8 opcode;		/* FERROCE_WC_* */
	__u8 status;		/* FERROCE_WC_* status */
	__u8 vendor_err;
	__u8 flags;		/* FERROCE_CQE_* */
	__le16 wqe_idx;		/* SQ/RQ index of the completed WQE */
	__u8 gid_index;		/* CQE_GID_INDEX: GID entry the packet was sent to */
	__u8 owner;		/* FERROCE_CQE_OWNER, written last */
};

/* ------------------------------------------------------------------------
 * Size checks
 * ------------------------------------------------------------------------
 */
static_assert(sizeof(struct ferroce_cmd_hdr) == 8, "cmd_hdr");
static_assert(sizeof(struct ferroce_cmd) == FERROCE_CMD_SIZE, "cmd");
static_assert(sizeof(struct ferroce_cmd_comp) == FERROCE_CMD_COMP_SIZE, "cmd_comp");
static_assert(sizeof(struct ferroce_pbl) == 16, "pbl");
static_assert(sizeof(struct ferroce_cmd_query_caps) == 24, "query_caps");
static_assert(sizeof(struct ferroce_caps) == 112, "caps");
static_assert(sizeof(struct ferroce_cmd_query_port) == 16, "query_port");
static_assert(sizeof(struct ferroce_cmd_set_port_mtu) == 16, "set_port_mtu");
static_assert(sizeof(struct ferroce_cmd_set_port_mac) == 24, "set_port_mac");
static_assert(sizeof(struct ferroce_cmd_query_counters) == 24, "query_counters");
static_assert(sizeof(struct ferroce_counters) == 560, "counters");
static_assert(sizeof(struct ferroce_cmd_create_eq) == 24, "create_eq");
static_assert(sizeof(struct ferroce_cmd_destroy_eq) == 16, "destroy_eq");
static_assert(sizeof(struct ferroce_cmd_create_cq) == 48, "create_cq");
static_assert(sizeof(struct ferroce_cmd_destroy_cq) == 16, "destroy_cq");
static_assert(sizeof(struct ferroce_cmd_resize_cq) == 40, "resize_cq");
static_assert(sizeof(struct ferroce_cmd_alloc_pd) == 16, "alloc_pd");
static_assert(sizeof(struct ferroce_cmd_dealloc_pd) == 16, "dealloc_pd");
static_assert(sizeof(struct ferroce_cmd_reg_mr) == 64, "reg_mr");
static_assert(sizeof(struct ferroce_cmd_dereg_mr) == 16, "dereg_mr");
static_assert(sizeof(struct ferroce_cmd_modify_mr) == 24, "modify_mr");
static_assert(sizeof(struct ferroce_cmd_create_qp) == 96, "create_qp");
static_assert(sizeof(struct ferroce_cmd_destroy_qp) == 16, "destroy_qp");
static_assert(sizeof(struct ferroce_cmd_create_srq) == 56, "create_srq");
static_assert(sizeof(struct ferroce_cmd_destroy_srq) == 16, "destroy_srq");
static_assert(sizeof(struct ferroce_cmd_modify_srq) == 16, "modify_srq");
static_assert(sizeof(struct ferroce_cmd_query_srq) == 16, "query_srq");
static_assert(sizeof(struct ferroce_cmd_resize_srq) == 40, "resize_srq");
static_assert(sizeof(struct ferroce_cmd_mcast) == 32, "mcast");
static_assert(sizeof(struct ferroce_av) == 40, "av");
static_assert(sizeof(struct ferroce_qp_attr) == 88, "qp_attr");
static_assert(sizeof(struct ferroce_cmd_modify_qp) == 96, "modify_qp");
static_assert(sizeof(struct ferroce_cmd_query_qp) == 24, "query_qp");
static_assert(sizeof(struct ferroce_cmd_create_ah) == 56, "create_ah");
static_assert(sizeof(struct ferroce_cmd_destroy_ah) == 16, "destroy_ah");
static_assert(sizeof(struct ferroce_cmd_set_gid) == 40, "set_gid");
static_assert(sizeof(struct ferroce_cmd_clear_gid) == 16, "clear_gid");
static_assert(sizeof(struct ferroce_eqe) == FERROCE_EQE_SIZE, "eqe");
static_assert(sizeof(struct ferroce_sge) == 16, "sge");
static_assert(sizeof(struct ferroce_sq_wqe_hdr) == FERROCE_SQ_WQE_SEG_OFFSET, "sq_wqe_hdr");
static_assert(sizeof(struct ferroce_sq_wqe_rdma) == 16, "sq_wqe_rdma");
static_assert(sizeof(struct ferroce_sq_wqe_ud) == 16, "sq_wqe_ud");
static_assert(sizeof(struct ferroce_sq_wqe_atomic) == 32, "sq_wqe_atomic");
static_assert(sizeof(struct ferroce_sq_wqe_reg_mr) == 32, "sq_wqe_reg_mr");
static_assert(sizeof(struct ferroce_sq_wqe_bind_mw) == 32, "sq_wqe_bind_mw");
static_assert(sizeof(struct ferroce_sq_wqe_atomic_write) == 32, "sq_wqe_atomic_write");
static_assert(sizeof(struct ferroce_sq_wqe_flush) == 32, "sq_wqe_flush");
static_assert(sizeof(struct ferroce_rq_wqe_hdr) == FERROCE_RQ_WQE_DATA_OFFSET, "rq_wqe_hdr");
static_assert(sizeof(struct ferroce_qp_dbrec) == 8, "qp_dbrec");
static_assert(sizeof(struct ferroce_cq_dbrec) == 8, "cq_dbrec");
static_assert(sizeof(struct ferroce_srq_dbrec) == 8, "srq_dbrec");
static_assert(sizeof(struct ferroce_cqe) == FERROCE_CQE_SIZE, "cqe");

#endif /* FERROCE_HW_H */
