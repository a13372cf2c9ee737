/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * ferroce-abi.h - the user/kernel ABI of ferroce.ko and libferroce.
 *
 * The driver data that travels inside the uverbs commands (ib_udata) between
 * the rdma-core provider (libferroce) and the kernel driver (ferroce.ko).
 * Queue layouts, doorbell values and CQE formats are not repeated here: they
 * are the device's, defined once in include/ferroce/ferroce-hw.h and
 * described in Documentation/ferroce/device.rst; this file only says how
 * userspace hands its queues to the driver.
 *
 * Rules: only <linux/types.h> types, every field naturally aligned, explicit
 * reserved fields (must be zero), sizes multiple of 8. Structs grow only at
 * the end, and every struct carries a comp_mask saying which optional
 * extensions it uses (none are defined yet: 0).
 *
 * Requests: the driver accepts any length that reaches the end of the
 * struct as first released (FERROCE_UREQ_*_MIN_LEN; shorter: EINVAL), reads
 * the fields it knows (missing ones read as 0) and accepts bytes beyond its
 * struct only if they are zero (EOPNOTSUPP otherwise): an old provider works
 * with a newer driver, and a newer provider with an older driver as long as
 * it uses nothing that driver does not know. A set comp_mask bit the driver
 * does not know is refused with EINVAL.
 *
 * Responses: the driver writes min(length offered, its struct size) bytes;
 * a provider zero-fills its response before the command, so fields an older
 * driver does not write read as 0 (and comp_mask says what was written).
 *
 * Driver id: RDMA_DRIVER_FERROCE (enum rdma_driver_id,
 * <rdma/ib_user_ioctl_verbs.h>). The provider matches the device by it, and
 * by PCI ID (FERROCE_PCI_VENDOR_ID / FERROCE_PCI_DEVICE_ID) when a module
 * older than the id reports RDMA_DRIVER_UNKNOWN; its uverbs ioctls carry the
 * id the kernel reports.
 */
#ifndef FERROCE_ABI_USER_H
#define FERROCE_ABI_USER_H

#include <linux/types.h>

/* ib_device_ops.uverbs_abi_ver; the provider accepts exactly this value. */
#define FERROCE_UVERBS_ABI_VERSION	1

/*
 * alloc_ucontext: the request is optional (length 0 is fine). The response
 * names the doorbell page of the context: one 4 KiB page of BAR2 that the
 * provider maps with
 * mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, cmd_fd, db_mmap_offset).
 * Every CQ and QP of the context is rung through that page only.
 * With PAGE_SIZE > 4 KiB the offset names one PAGE_SIZE mapping of a group
 * of doorbell pages reserved for the context (the kernel rounds the length
 * up); the context's page is the first 4 KiB of it, as with 4 KiB pages.
 */
struct ferroce_ureq_alloc_ctx {
	__u32 comp_mask;		/* none defined: 0 */
	__u32 reserved;
};

#define FERROCE_UREQ_ALLOC_CTX_MIN_LEN	0

struct ferroce_uresp_alloc_ctx {
	__aligned_u64 db_mmap_offset;	/* mmap() offset of the doorbell page */
	__u32 db_page;			/* its BAR2 page index (informational) */
	__u32 device_caps;		/* FERROCE_CAP_* */
	__u32 max_qp_wr;		/* SQ/RQ depth limit */
	__u32 max_sge;
	__u32 max_inline;		/* device limit on inline data */
	__u32 max_cqe;			/* CQ depth limit */
	__u32 comp_mask;		/* none defined: 0 */
	__u32 reserved;
};

/*
 * The extended QUERY_DEVICE command (ibv_query_device_ex) takes no driver
 * request and answers with the calling context's struct
 * ferroce_uresp_alloc_ctx, the same values alloc_ucontext returned: a
 * provider importing a context (ibv_import_device on a dup of another
 * process's or library's cmd_fd) learns its doorbell page and the device's
 * limits this way. The doorbell page may be mapped any number of times.
 */

/*
 * create_cq: the CQ ring lives in process memory, allocated and zeroed by
 * the provider: depth * FERROCE_CQE_SIZE bytes starting on a page boundary.
 * The driver pins it and hands the device its page list. The doorbell
 * record (struct ferroce_cq_dbrec) is 8-byte aligned anywhere in process
 * memory; the driver pins its page.
 */
struct ferroce_ureq_create_cq {
	__aligned_u64 buf_va;
	__aligned_u64 dbrec_va;
	__u32 depth;			/* power of two, >= requested cqe, <= max_cqe */
	__u32 comp_mask;		/* none defined: 0 (was "reserved") */
};

#define FERROCE_UREQ_CREATE_CQ_MIN_LEN	24

struct ferroce_uresp_create_cq {
	__u32 cqn;
	__u32 comp_mask;		/* none defined: 0 */
};

/*
 * resize_cq (FERROCE_CAP_RESIZE_CQ): the new ring, page aligned, depth *
 * FERROCE_CQE_SIZE bytes, prepared as device.rst "Resizing a CQ" says; the
 * provider polls nothing until it has copied the old ring's remaining CQEs
 * (up to switch_index, from the response) into it.
 */
struct ferroce_ureq_resize_cq {
	__aligned_u64 buf_va;
	__u32 depth;			/* power of two, >= requested cqe, <= max_cqe */
	__u32 comp_mask;		/* none defined: 0 */
};

#define FERROCE_UREQ_RESIZE_CQ_MIN_LEN	16

struct ferroce_uresp_resize_cq {
	__u32 switch_index;		/* CQEs from here on are in the new ring */
	__u32 comp_mask;		/* none defined: 0 */
};

/*
 * create_qp (RC, UC and UD): SQ and RQ rings in process memory, page
 * aligned, depth << wqe_shift bytes each, zeroed by the provider. Without a
 * receive queue of its own (a QP attached to an SRQ, or one that never
 * receives) rq_depth, rq_wqe_shift, rq_buf_va and rq_dbrec_va are all 0.
 * Strides and depths follow device.rst ("Work queues"); the driver checks
 * them against the device's limits.
 */
struct ferroce_ureq_create_qp {
	__aligned_u64 sq_buf_va;
	__aligned_u64 rq_buf_va;
	__aligned_u64 sq_dbrec_va;	/* struct ferroce_qp_dbrec */
	__aligned_u64 rq_dbrec_va;	/* struct ferroce_qp_dbrec */
	__u32 sq_depth;			/* power of two */
	__u32 rq_depth;			/* 0 or a power of two */
	__u8 sq_wqe_shift;		/* FERROCE_SQ_WQE_SHIFT_MIN..MAX */
	__u8 rq_wqe_shift;		/* FERROCE_RQ_WQE_SHIFT_MIN..MAX, or 0 */
	__u8 reserved[6];
	/* End of the first release (FERROCE_UREQ_CREATE_QP_MIN_LEN). */
	__u32 comp_mask;		/* none defined: 0 */
	__u32 reserved2;
};

#define FERROCE_UREQ_CREATE_QP_MIN_LEN	48

struct ferroce_uresp_create_qp {
	__u32 qpn;
	__u32 max_inline;		/* inline bytes accepted per SQ WQE */
	__u32 comp_mask;		/* none defined: 0 */
	__u32 reserved;
};

/*
 * create_srq (FERROCE_CAP_SRQ in device_caps): the SRQ ring lives in process
 * memory, page aligned, depth << wqe_shift bytes, zeroed by the provider;
 * its WQEs are RQ WQEs. The record (struct ferroce_srq_dbrec, 8-byte
 * aligned) carries the provider's producer index and the consumer index the
 * device writes back; the provider zeroes it. The SRQ limit is set with the
 * ordinary modify_srq verb: the driver ignores the one create_srq carries
 * (as ibv_create_srq(3) says; mlx5 does the same).
 */
struct ferroce_ureq_create_srq {
	__aligned_u64 buf_va;
	__aligned_u64 dbrec_va;		/* struct ferroce_srq_dbrec */
	__u32 depth;			/* power of two, >= max_wr, <= max_qp_wr */
	__u8 wqe_shift;			/* FERROCE_RQ_WQE_SHIFT_MIN..MAX */
	__u8 reserved[3];
	__u32 comp_mask;		/* none defined: 0 */
	__u32 reserved2;
};

#define FERROCE_UREQ_CREATE_SRQ_MIN_LEN	32

struct ferroce_uresp_create_srq {
	__u32 srqn;
	__u32 comp_mask;		/* none defined: 0 */
};

/*
 * modify_srq with IB_SRQ_MAX_WR (resize): the new ring, page aligned,
 * depth << the SRQ's wqe_shift bytes, into which the provider has copied the
 * WQEs the device has not taken yet (device.rst, "Shared receive queues",
 * "Resizing"); it posts nothing meanwhile. Without IB_SRQ_MAX_WR the driver
 * data may be absent.
 */
struct ferroce_ureq_modify_srq {
	__aligned_u64 buf_va;
	__u32 depth;			/* power of two, >= max_wr, <= max_qp_wr */
	__u32 comp_mask;		/* none defined: 0 */
};

#define FERROCE_UREQ_MODIFY_SRQ_MIN_LEN	16

/* create_ah: the device's handle, put in UD send WQEs (ahn). */
struct ferroce_uresp_create_ah {
	__u32 ahn;
	__u32 comp_mask;		/* none defined: 0 */
};

#endif /* FERROCE_ABI_USER_H */
