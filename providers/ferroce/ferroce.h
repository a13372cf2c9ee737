/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libferroce: the rdma-core provider of the ferroce RoCE v2 device.
 *
 * The device programming model (doorbells, WQE/CQE layouts, posting rules)
 * is include/ferroce/ferroce-hw.h and Documentation/ferroce/device.rst; the
 * udata exchanged with ferroce.ko is include/uapi/rdma/ferroce-abi.h.
 */
#ifndef FERROCE_PROVIDER_H
#define FERROCE_PROVIDER_H

#include <endian.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ccan/array_size.h>
#include <ccan/list.h>
#include <ccan/minmax.h>
#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <util/util.h>

#include <rdma/ferroce-abi.h>
#include <kernel-abi/ferroce-abi.h>

#include "ferroce-hw.h"

DECLARE_DRV_CMD(ferroce_alloc_context, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, ferroce_uresp_alloc_ctx);
/* the extended QUERY_DEVICE answers with the context's alloc_ctx values */
DECLARE_DRV_CMD(ferroce_query_device_ex, IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
		empty, ferroce_uresp_alloc_ctx);
DECLARE_DRV_CMD(ferroce_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		ferroce_ureq_create_cq, ferroce_uresp_create_cq);
DECLARE_DRV_CMD(ferroce_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		ferroce_ureq_create_cq, ferroce_uresp_create_cq);
DECLARE_DRV_CMD(ferroce_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ,
		ferroce_ureq_resize_cq, ferroce_uresp_resize_cq);
DECLARE_DRV_CMD(ferroce_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		ferroce_ureq_create_qp, ferroce_uresp_create_qp);
DECLARE_DRV_CMD(ferroce_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		ferroce_ureq_create_srq, ferroce_uresp_create_srq);
DECLARE_DRV_CMD(ferroce_create_srq_ex, IB_USER_VERBS_CMD_CREATE_XSRQ,
		ferroce_ureq_create_srq, ferroce_uresp_create_srq);
/* modify_srq with IBV_SRQ_MAX_WR (resize) only: the limit alone has none */
DECLARE_DRV_CMD(ferroce_modify_srq, IB_USER_VERBS_CMD_MODIFY_SRQ,
		ferroce_ureq_modify_srq, empty);
DECLARE_DRV_CMD(ferroce_create_ah, IB_USER_VERBS_CMD_CREATE_AH,
		empty, ferroce_uresp_create_ah);

#define FERROCE_PAGE_SIZE		4096
#define FERROCE_WQ_IDX_MASK		0xffff	/* 16-bit free-running PI/CI */

/* qpn -> QP, two levels of 4096 entries (QPNs are 24 bits) */
#define FERROCE_QP_TABLE_SHIFT		12
#define FERROCE_QP_TABLE_SIZE		(1 << FERROCE_QP_TABLE_SHIFT)
#define FERROCE_QP_TABLE_MASK		(FERROCE_QP_TABLE_SIZE - 1)

/* doorbell records: one 4 KiB page holds 512 of them */
#define FERROCE_DBRECS_PER_PAGE		(FERROCE_PAGE_SIZE / FERROCE_DBREC_ALIGN)

struct ferroce_device {
	struct verbs_device ibv_dev;
};

struct ferroce_qp;

struct ferroce_qp_table_ent {
	struct ferroce_qp **table;
	unsigned int refcnt;
};

struct ferroce_context {
	struct verbs_context ibv_ctx;
	void *db;			/* the context's doorbell page */
	uint32_t device_caps;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_inline;
	uint32_t max_cqe;

	pthread_mutex_t qp_table_mutex;
	struct ferroce_qp_table_ent qp_table[FERROCE_QP_TABLE_SIZE];

	pthread_mutex_t dbrec_mutex;
	struct list_head dbrec_pages;
};

/*
 * A CQ. resize_cq replaces buf, buf_size, depth and log_depth (and
 * vcq.cq.cqe) under lock: the poller, the arm and the cleaner read them
 * with it held.
 */
struct ferroce_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex of create_cq_ex */
	pthread_spinlock_t lock;
	struct ferroce_cqe *buf;
	size_t buf_size;
	struct ferroce_cq_dbrec *dbrec;
	void *db;			/* CQ doorbell in the context's page */
	uint32_t cqn;
	uint32_t depth;
	uint32_t log_depth;
	uint32_t ci;			/* free-running consumer index */
	uint32_t arm_sn;		/* 2 bits used, +1 per consumed event */
	struct ferroce_cqe *cur;	/* the CQE ibv_next_poll() is at */
};

/*
 * A send or receive queue (or the ring of an SRQ, struct ferroce_srq). pi
 * and ci are free-running 16-bit indices: pi is advanced by
 * post_send/post_recv under the queue's lock, ci by the poller of the
 * queue's CQ under the CQ's lock (wqe_idx + 1 of each CQE). The two sides
 * share ci through atomic accesses: the poster may read a ci that is
 * already behind, which only makes the queue look fuller than it is, and a
 * slot it sees free has been consumed by the device (release/acquire).
 */
struct ferroce_wq {
	pthread_spinlock_t lock;
	void *buf;
	size_t buf_size;
	struct ferroce_qp_dbrec *dbrec;
	void *db;			/* SQ or RQ doorbell in the context's page */
	uint32_t depth;
	uint32_t shift;			/* log2 of the WQE stride */
	uint32_t max_sge;
	uint16_t pi;
	uint16_t ci;			/* __atomic_* accesses only */
};

/* The slot of the WQE of index idx in a queue's ring */
static inline void *ferroce_wqe(struct ferroce_wq *wq, uint16_t idx)
{
	return (uint8_t *)wq->buf + ((size_t)(idx & (wq->depth - 1)) << wq->shift);
}

struct ferroce_qp {
	struct verbs_qp vqp;		/* ibv_qp, and ibv_qp_ex for ibv_wr_* */
	struct ferroce_wq sq;
	struct ferroce_wq rq;		/* depth 0: none, or on an SRQ (vqp.qp.srq) */
	uint32_t qpn;
	uint32_t max_inline;
	bool sq_sig_all;
	/*
	 * The QP may be in ERR: post_recv then rings the RQ doorbell, which
	 * makes the device flush the new receive WQEs (device.rst, "Doorbell
	 * records"). Set by modify_qp to ERR, an error completion of the QP
	 * and a fatal QP event; cleared by modify_qp to RESET. Otherwise
	 * post_recv only stores the record, which the device reads when a
	 * message needs a WQE: no doorbell write, no trap to the device.
	 * Receives posted after the device moved the QP to ERR but before
	 * software learnt of it are flushed by the next post_recv that
	 * rings, or dropped by a move to RESET or the QP's destruction.
	 */
	bool rq_ring;

	/*
	 * ibv_wr_start() .. ibv_wr_complete(): the SQ's lock is held, WQEs
	 * are written from sq.pi on and counted in wr_pi; the first error
	 * is kept in wr_err and discards them all at ibv_wr_complete().
	 */
	uint16_t wr_pi;
	int wr_err;
	void *wr_wqe;			/* the WQE the setters fill, or NULL */
	uint8_t wr_opcode;		/* its FERROCE_WR_* */
};

/*
 * A shared receive queue (device 1.6, CAP_SRQ): a ring of RQ WQEs in wq,
 * whose pi post_srq_recv advances under wq.lock, and a record of its own:
 * the provider stores pi there, the device DMA-writes ci there when it
 * takes a WQE (device.rst, "Shared receive queues"). Completions do not
 * free SRQ slots, so wq.ci is unused, as are wq.dbrec and wq.db (an SRQ has
 * no doorbell). modify_srq's resize replaces wq.buf, wq.buf_size and
 * wq.depth under wq.lock: read them with it held.
 */
struct ferroce_srq {
	struct verbs_srq vsrq;
	struct ferroce_wq wq;
	struct ferroce_srq_dbrec *dbrec;
	uint32_t srqn;
};

/*
 * The consumer index the device wrote to an SRQ's record (bits 15:0). The
 * device read the WQEs below it before it wrote it: with the acquire, the
 * caller reads or rewrites their slots only after that.
 */
static inline uint16_t ferroce_srq_ci(struct ferroce_srq *srq)
{
	return le32toh(__atomic_load_n(&srq->dbrec->ci, __ATOMIC_ACQUIRE)) &
	       FERROCE_WQ_IDX_MASK;
}

struct ferroce_ah {
	struct ibv_ah ibv_ah;
	uint32_t ahn;
};

/*
 * The owner bit the device writes CQE number idx of a ring of 1 << log_depth
 * entries with (device.rst, "Conventions": the phase rule); the opposite
 * value means "not written" for idx.
 */
static inline uint8_t ferroce_cqe_phase(uint32_t idx, uint32_t log_depth)
{
	return ((idx >> log_depth) & 1) ^ 1;
}

static inline struct ferroce_context *to_fctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct ferroce_context, ibv_ctx.context);
}

static inline struct ferroce_cq *to_fcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct ferroce_cq, vcq.cq);
}

static inline struct ferroce_cq *to_fcq_ex(struct ibv_cq_ex *ibcq)
{
	return container_of(ibcq, struct ferroce_cq, vcq.cq_ex);
}

static inline struct ferroce_qp *to_fqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct ferroce_qp, vqp.qp);
}

static inline struct ferroce_qp *to_fqp_ex(struct ibv_qp_ex *ibqp)
{
	return container_of(ibqp, struct ferroce_qp, vqp.qp_ex);
}

static inline struct ferroce_srq *to_fsrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct ferroce_srq, vsrq.srq);
}

static inline struct ferroce_ah *to_fah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct ferroce_ah, ibv_ah);
}

/* Queue sizing (verbs.c), exported for the unit test. */
uint32_t ferroce_cq_depth(uint32_t cqe);
int ferroce_sq_shift(uint32_t max_send_sge, uint32_t max_inline);
int ferroce_rq_shift(uint32_t max_recv_sge);
int ferroce_recv_ring_size(struct ferroce_context *ctx, uint32_t *max_wr,
			   uint32_t *max_sge, uint32_t *depth, uint8_t *shift);

/*
 * QP table (verbs.c); ferroce_find_qp is called by the poller, with the
 * CQ's lock held, and takes the table's lock itself.
 */
struct ferroce_qp *ferroce_find_qp(struct ferroce_context *ctx, uint32_t qpn);

/* verbs.c: control path */
int ferroce_query_device(struct ibv_context *ibctx,
			 const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size);
int ferroce_query_port(struct ibv_context *ibctx, uint8_t port,
		       struct ibv_port_attr *attr);
struct ibv_pd *ferroce_alloc_pd(struct ibv_context *ibctx);
int ferroce_dealloc_pd(struct ibv_pd *pd);
struct ibv_pd *ferroce_import_pd(struct ibv_context *ibctx, uint32_t pd_handle);
void ferroce_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *ferroce_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			      uint64_t hca_va, int access);
int ferroce_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		     void *addr, size_t len, int access);
int ferroce_dereg_mr(struct verbs_mr *vmr);
struct ibv_mr *ferroce_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void ferroce_unimport_mr(struct ibv_mr *mr);
struct ibv_mw *ferroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int ferroce_dealloc_mw(struct ibv_mw *mw);
struct ibv_cq *ferroce_create_cq(struct ibv_context *ibctx, int cqe,
				 struct ibv_comp_channel *channel,
				 int comp_vector);
struct ibv_cq_ex *ferroce_create_cq_ex(struct ibv_context *ibctx,
				       struct ibv_cq_init_attr_ex *attr);
int ferroce_resize_cq(struct ibv_cq *ibcq, int cqe);
int ferroce_destroy_cq(struct ibv_cq *ibcq);
struct ibv_qp *ferroce_create_qp(struct ibv_pd *pd,
				 struct ibv_qp_init_attr *attr);
struct ibv_qp *ferroce_create_qp_ex(struct ibv_context *ibctx,
				    struct ibv_qp_init_attr_ex *attr);
int ferroce_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		      int attr_mask);
int ferroce_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     int attr_mask, struct ibv_qp_init_attr *init_attr);
void ferroce_async_event(struct ibv_context *ctx,
			 struct ibv_async_event *event);
int ferroce_destroy_qp(struct ibv_qp *ibqp);
struct ibv_srq *ferroce_create_srq(struct ibv_pd *pd,
				   struct ibv_srq_init_attr *attr);
struct ibv_srq *ferroce_create_srq_ex(struct ibv_context *ibctx,
				      struct ibv_srq_init_attr_ex *attr);
int ferroce_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		       int attr_mask);
int ferroce_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int ferroce_destroy_srq(struct ibv_srq *ibsrq);
struct ibv_ah *ferroce_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ferroce_destroy_ah(struct ibv_ah *ah);

/* datapath.c */
/* the work completion fields an extended CQ can report */
#define FERROCE_WC_EX_FLAGS	IBV_WC_STANDARD_FLAGS
void ferroce_cq_set_ex_ops(struct ferroce_cq *cq, uint64_t wc_flags);
/* the ibv_wr_* operations of a QP of this type on this device */
uint64_t ferroce_qp_send_ops(struct ferroce_context *ctx,
			     enum ibv_qp_type type);
void ferroce_qp_set_ex_ops(struct ferroce_qp *qp, uint64_t send_ops);
int ferroce_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc);
int ferroce_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
void ferroce_cq_event(struct ibv_cq *ibcq);
void ferroce_cq_clean(struct ferroce_cq *cq, uint32_t qpn);
int ferroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ferroce_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		    struct ibv_mw_bind *mw_bind);
int ferroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int ferroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);

#endif /* FERROCE_PROVIDER_H */
