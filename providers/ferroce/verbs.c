// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libferroce: control path. Every object is created by ferroce.ko through
 * the uverbs commands; CQ and QP rings and their doorbell records live in
 * process memory, allocated here and handed to the driver in the udata
 * (include/uapi/rdma/ferroce-abi.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <util/udma_barrier.h>

#include "ferroce.h"

/* ------------------------------------------------------------------------
 * Queue sizing (Documentation/ferroce/device.rst, "Work queues")
 * ------------------------------------------------------------------------
 */

/*
 * CQ depth: a power of two >= cqe (the ABI's rule), at least 2. A CQ holds
 * depth CQEs (the device overflows only at PI - record.ci >= depth), so
 * ibv_create_cq(ctx, max_cqe) gets a CQ of max_cqe entries.
 */
uint32_t ferroce_cq_depth(uint32_t cqe)
{
	return roundup_pow_of_two(max_t(uint32_t, cqe, 2));
}

/* log2 of the smallest SQ stride >= 128 B holding the SGEs or inline data */
int ferroce_sq_shift(uint32_t max_send_sge, uint32_t max_inline)
{
	uint64_t need = FERROCE_SQ_WQE_DATA_OFFSET +
		max_t(uint64_t, (uint64_t)max_send_sge * sizeof(struct ferroce_sge),
		      max_inline);
	int shift;

	for (shift = FERROCE_SQ_WQE_SHIFT_MIN;
	     shift <= FERROCE_SQ_WQE_SHIFT_MAX; shift++)
		if (need <= 1ULL << shift)
			return shift;
	return -EINVAL;
}

/* log2 of the RQ stride: header + SGEs, rounded to a power of two >= 32 B */
int ferroce_rq_shift(uint32_t max_recv_sge)
{
	uint64_t need = FERROCE_RQ_WQE_DATA_OFFSET +
		(uint64_t)max_recv_sge * sizeof(struct ferroce_sge);
	int shift;

	for (shift = FERROCE_RQ_WQE_SHIFT_MIN;
	     shift <= FERROCE_RQ_WQE_SHIFT_MAX; shift++)
		if (need <= 1ULL << shift)
			return shift;
	return -EINVAL;
}

/*
 * A receive ring, a QP's RQ or an SRQ, for *max_wr WQEs (at least one) of
 * *max_sge SGEs: its depth, a power of two, and log2 stride. *max_wr and
 * *max_sge are updated to what the ring really holds, capped by the device.
 */
int ferroce_recv_ring_size(struct ferroce_context *ctx, uint32_t *max_wr,
			   uint32_t *max_sge, uint32_t *depth, uint8_t *shift)
{
	uint32_t stride_sge;
	int rq_shift;

	if (*max_wr > ctx->max_qp_wr || *max_sge > ctx->max_sge)
		return -EINVAL;
	rq_shift = ferroce_rq_shift(max_t(uint32_t, *max_sge, 1));
	if (rq_shift < 0)
		return -EINVAL;
	*depth = roundup_pow_of_two(max_t(uint32_t, *max_wr, 1));
	if (*depth > ctx->max_qp_wr)
		return -EINVAL;
	*shift = rq_shift;

	stride_sge = ((1U << rq_shift) - FERROCE_RQ_WQE_DATA_OFFSET) /
		     sizeof(struct ferroce_sge);
	*max_wr = *depth;
	*max_sge = min_t(uint32_t, stride_sge, ctx->max_sge);
	return 0;
}

/* ------------------------------------------------------------------------
 * Doorbell records: 8-byte slots carved out of dedicated 4 KiB pages, so
 * that the pages the driver pins hold nothing but records and can be
 * excluded from fork().
 * ------------------------------------------------------------------------
 */
struct ferroce_dbrec_page {
	struct list_node entry;
	void *page;
	unsigned int used;
	uint64_t busy[FERROCE_DBRECS_PER_PAGE / 64];
};

static void *ferroce_alloc_dbrec(struct ferroce_context *ctx)
{
	struct ferroce_dbrec_page *p;
	void *rec = NULL;
	unsigned int i;
	int bit;

	pthread_mutex_lock(&ctx->dbrec_mutex);
	list_for_each(&ctx->dbrec_pages, p, entry)
		if (p->used < FERROCE_DBRECS_PER_PAGE)
			goto found;

	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	if (posix_memalign(&p->page, FERROCE_PAGE_SIZE, FERROCE_PAGE_SIZE)) {
		free(p);
		goto out;
	}
	if (ibv_dontfork_range(p->page, FERROCE_PAGE_SIZE)) {
		free(p->page);
		free(p);
		goto out;
	}
	list_add(&ctx->dbrec_pages, &p->entry);

found:
	for (i = 0; i < ARRAY_SIZE(p->busy); i++) {
		if (p->busy[i] == UINT64_MAX)
			continue;
		bit = ffsll(~p->busy[i]) - 1;
		p->busy[i] |= 1ULL << bit;
		p->used++;
		rec = (uint8_t *)p->page +
		      (i * 64 + bit) * FERROCE_DBREC_ALIGN;
		memset(rec, 0, FERROCE_DBREC_ALIGN);
		break;
	}
out:
	pthread_mutex_unlock(&ctx->dbrec_mutex);
	if (!rec)
		errno = ENOMEM;
	return rec;
}

static void ferroce_free_dbrec(struct ferroce_context *ctx, void *rec)
{
	uintptr_t page = (uintptr_t)rec & ~(uintptr_t)(FERROCE_PAGE_SIZE - 1);
	struct ferroce_dbrec_page *p;
	unsigned int idx;

	if (!rec)
		return;

	pthread_mutex_lock(&ctx->dbrec_mutex);
	list_for_each(&ctx->dbrec_pages, p, entry) {
		if ((uintptr_t)p->page != page)
			continue;
		idx = ((uintptr_t)rec - page) / FERROCE_DBREC_ALIGN;
		p->busy[idx / 64] &= ~(1ULL << (idx % 64));
		if (--p->used == 0) {
			list_del(&p->entry);
			ibv_dofork_range(p->page, FERROCE_PAGE_SIZE);
			free(p->page);
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&ctx->dbrec_mutex);
}

/* A zeroed, page-aligned ring excluded from fork() */
static void *ferroce_alloc_ring(size_t size)
{
	void *buf;
	int ret;

	ret = posix_memalign(&buf, FERROCE_PAGE_SIZE, size);
	if (ret) {
		errno = ret;
		return NULL;
	}
	memset(buf, 0, size);
	if (ibv_dontfork_range(buf, size)) {
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	return buf;
}

static void ferroce_free_ring(void *buf, size_t size)
{
	if (!buf)
		return;
	ibv_dofork_range(buf, size);
	free(buf);
}

/* ------------------------------------------------------------------------
 * QP table: the poller maps a CQE's qpn to its QP to retire WQEs.
 * ------------------------------------------------------------------------
 */
static int ferroce_store_qp(struct ferroce_context *ctx, struct ferroce_qp *qp)
{
	uint32_t hi = (qp->qpn & FERROCE_QPN_MASK) >> FERROCE_QP_TABLE_SHIFT;
	uint32_t lo = qp->qpn & FERROCE_QP_TABLE_MASK;
	struct ferroce_qp_table_ent *ent = &ctx->qp_table[hi];
	int ret = 0;

	pthread_mutex_lock(&ctx->qp_table_mutex);
	if (!ent->refcnt) {
		ent->table = calloc(FERROCE_QP_TABLE_SIZE, sizeof(*ent->table));
		if (!ent->table) {
			ret = ENOMEM;
			goto out;
		}
	}
	if (ent->table[lo]) {
		ret = EEXIST;
		goto out;
	}
	ent->table[lo] = qp;
	ent->refcnt++;
out:
	pthread_mutex_unlock(&ctx->qp_table_mutex);
	return ret;
}

static void ferroce_clear_qp(struct ferroce_context *ctx, struct ferroce_qp *qp)
{
	uint32_t hi = (qp->qpn & FERROCE_QPN_MASK) >> FERROCE_QP_TABLE_SHIFT;
	uint32_t lo = qp->qpn & FERROCE_QP_TABLE_MASK;
	struct ferroce_qp_table_ent *ent = &ctx->qp_table[hi];

	pthread_mutex_lock(&ctx->qp_table_mutex);
	if (ent->refcnt && ent->table[lo] == qp) {
		ent->table[lo] = NULL;
		if (--ent->refcnt == 0) {
			free(ent->table);
			ent->table = NULL;
		}
	}
	pthread_mutex_unlock(&ctx->qp_table_mutex);
}

/*
 * The QP stays valid after the table's lock is dropped for as long as the
 * caller holds the lock of one of its CQs: destroy_qp takes those before
 * it clears the entry.
 */
struct ferroce_qp *ferroce_find_qp(struct ferroce_context *ctx, uint32_t qpn)
{
	struct ferroce_qp_table_ent *ent;
	struct ferroce_qp *qp = NULL;

	ent = &ctx->qp_table[(qpn & FERROCE_QPN_MASK) >> FERROCE_QP_TABLE_SHIFT];
	pthread_mutex_lock(&ctx->qp_table_mutex);
	if (ent->refcnt)
		qp = ent->table[qpn & FERROCE_QP_TABLE_MASK];
	pthread_mutex_unlock(&ctx->qp_table_mutex);
	return qp;
}

/* ------------------------------------------------------------------------
 * Device, port, PD, MR
 * ------------------------------------------------------------------------
 */
int ferroce_query_device(struct ibv_context *ibctx,
			 const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

int ferroce_query_port(struct ibv_context *ibctx, uint8_t port,
		       struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(ibctx, port, attr, &cmd, sizeof(cmd));
}

struct ibv_pd *ferroce_alloc_pd(struct ibv_context *ibctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd = {};
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	ret = ibv_cmd_alloc_pd(ibctx, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

int ferroce_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

/*
 * ibv_import_pd: the PD of handle pd_handle in the context's command file
 * (another owner's, for an imported context), without a command: the
 * provider's PD is libibverbs' alone, and the kernel checks the handle
 * whenever a command names it. ibv_unimport_pd frees it and leaves the PD
 * to its owner.
 */
struct ibv_pd *ferroce_import_pd(struct ibv_context *ibctx, uint32_t pd_handle)
{
	struct ibv_pd *pd;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	pd->context = ibctx;
	pd->handle = pd_handle;
	return pd;
}

void ferroce_unimport_pd(struct ibv_pd *pd)
{
	free(pd);
}

struct ibv_mr *ferroce_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			      uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	ret = ibv_cmd_reg_mr(pd, addr, len, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/*
 * The driver changes the rights and the PD in place, keeping the keys
 * (device MODIFY_MR); a new translation registers a new MR that ib_core swaps
 * in for the old one, with new keys (the response carries them either way).
 * Flags it does not know fail with EOPNOTSUPP there.
 */
int ferroce_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		     void *addr, size_t len, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;
	int ret;

	ret = ibv_cmd_rereg_mr(vmr, flags, addr, len, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	/* The rights binding a memory window checks (ferroce_bind_mw) */
	if (!ret && flags & IBV_REREG_MR_CHANGE_ACCESS)
		vmr->access = access;
	return ret;
}

int ferroce_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

/*
 * ibv_import_mr: the MR of handle mr_handle, its keys and length from the
 * kernel (QUERY_MR); its address (NULL) and rights (0, mr_type
 * IBV_MR_TYPE_IMPORTED_MR) are not known. ibv_unimport_mr frees it and
 * leaves the MR to its owner.
 */
struct ibv_mr *ferroce_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	ret = ibv_cmd_query_mr(pd, vmr, mr_handle);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

void ferroce_unimport_mr(struct ibv_mr *mr)
{
	free(verbs_get_mr(mr));
}

/*
 * Memory windows (device 1.7, CAP_MW): type 1 (bound by ibv_bind_mw) and
 * type 2 (bound by IBV_WR_BIND_MW), allocated by the driver in the key
 * space of MRs with no driver data. The binds are WQEs (datapath.c).
 */
struct ibv_mw *ferroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ferroce_context *ctx = to_fctx(pd->context);
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;
	int ret;

	if (!(ctx->device_caps & FERROCE_CAP_MW)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;

	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

int ferroce_dealloc_mw(struct ibv_mw *mw)
{
	int ret;

	ret = ibv_cmd_dealloc_mw(mw);
	if (ret)
		return ret;
	free(mw);
	return 0;
}

/* ------------------------------------------------------------------------
 * CQ
 * ------------------------------------------------------------------------
 */
/* The depth of a CQ ring for cqe entries, or EINVAL beyond the device */
static int ferroce_cq_size(struct ferroce_context *ctx, uint32_t cqe,
			   uint32_t *depth)
{
	if (cqe < 1 || cqe > ctx->max_cqe)
		return EINVAL;
	*depth = ferroce_cq_depth(cqe);
	if (*depth > ctx->max_cqe)
		return EINVAL;
	return 0;
}

/* A zeroed CQ ring of depth CQEs, *size bytes (whole pages) */
static struct ferroce_cqe *ferroce_alloc_cq_ring(uint32_t depth, size_t *size)
{
	*size = align((size_t)depth * FERROCE_CQE_SIZE, FERROCE_PAGE_SIZE);
	return ferroce_alloc_ring(*size);
}

/* A CQ of at least cqe entries with its ring and CI record, not created yet. */
static struct ferroce_cq *ferroce_alloc_cq(struct ferroce_context *ctx,
					   uint32_t cqe)
{
	struct ferroce_cq *cq;
	uint32_t depth;
	int ret;

	ret = ferroce_cq_size(ctx, cqe, &depth);
	if (ret) {
		errno = ret;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	cq->depth = depth;
	cq->log_depth = ffs(depth) - 1;
	cq->buf = ferroce_alloc_cq_ring(depth, &cq->buf_size);
	if (!cq->buf)
		goto err_free;
	cq->dbrec = ferroce_alloc_dbrec(ctx);
	if (!cq->dbrec)
		goto err_ring;
	return cq;

err_ring:
	ferroce_free_ring(cq->buf, cq->buf_size);
err_free:
	free(cq);
	return NULL;
}

static void ferroce_free_cq(struct ferroce_context *ctx, struct ferroce_cq *cq)
{
	ferroce_free_dbrec(ctx, cq->dbrec);
	ferroce_free_ring(cq->buf, cq->buf_size);
	free(cq);
}

static void ferroce_cq_created(struct ferroce_context *ctx,
			       struct ferroce_cq *cq, uint32_t cqn)
{
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->cqn = cqn;
	cq->db = (uint8_t *)ctx->db + FERROCE_DB_CQ;
	/* The device writes at most depth CQEs ahead of the recorded CI. */
	cq->vcq.cq.cqe = cq->depth;
}

struct ibv_cq *ferroce_create_cq(struct ibv_context *ibctx, int cqe,
				 struct ibv_comp_channel *channel,
				 int comp_vector)
{
	struct ferroce_context *ctx = to_fctx(ibctx);
	struct ferroce_create_cq_resp resp = {};
	struct ferroce_create_cq cmd = {};
	struct ferroce_cq *cq;
	int ret;

	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	cq = ferroce_alloc_cq(ctx, cqe);
	if (!cq)
		return NULL;

	cmd.buf_va = (uintptr_t)cq->buf;
	cmd.dbrec_va = (uintptr_t)cq->dbrec;
	cmd.depth = cq->depth;

	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		ferroce_free_cq(ctx, cq);
		errno = ret;
		return NULL;
	}
	ferroce_cq_created(ctx, cq, resp.cqn);
	return &cq->vcq.cq;
}

/*
 * Supported: the standard work completion fields, and the single-threaded
 * hint (the CQ keeps its lock). Not: completion timestamps, CVLAN, flow
 * tags, tag matching, overrun-ignoring CQs and parent domains.
 */
struct ibv_cq_ex *ferroce_create_cq_ex(struct ibv_context *ibctx,
				       struct ibv_cq_init_attr_ex *attr)
{
	struct ferroce_context *ctx = to_fctx(ibctx);
	struct ferroce_create_cq_ex_resp resp = {};
	struct ferroce_create_cq_ex cmd = {};
	struct ferroce_cq *cq;
	int ret;

	if (attr->wc_flags & ~(uint64_t)FERROCE_WC_EX_FLAGS ||
	    attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS ||
	    (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS &&
	     attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = ferroce_alloc_cq(ctx, attr->cqe);
	if (!cq)
		return NULL;

	cmd.buf_va = (uintptr_t)cq->buf;
	cmd.dbrec_va = (uintptr_t)cq->dbrec;
	cmd.depth = cq->depth;

	ret = ibv_cmd_create_cq_ex(ibctx, attr, &cq->vcq, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp), 0);
	if (ret) {
		ferroce_free_cq(ctx, cq);
		errno = ret;
		return NULL;
	}
	ferroce_cq_created(ctx, cq, resp.cqn);
	ferroce_cq_set_ex_ops(cq, attr->wc_flags);
	return &cq->vcq.cq_ex;
}

/*
 * Resizing (device 1.6, CAP_RESIZE_CQ; device.rst, "Resizing a CQ"): a new
 * ring of ferroce_cq_depth(cqe) entries, prepared under the CQ's lock (no
 * poll runs until the copy is done): from the consumer index C on, each of
 * its depth slots holds the owner bit that means "not written" for its
 * index. The driver hands it to the device, which answers the switch index
 * S: CQEs C .. S - 1 (16-bit indices) are in the old ring and are copied to
 * the new one with the new ring's phase, CQEs from S on the device writes
 * there itself, into slots the copy does not touch (it is never more than
 * depth ahead of the record's ci, which is C). The CQ's ci and record stay;
 * the old ring is freed. On a failure nothing changes and the new ring is
 * freed. The device refuses (EINVAL) a depth below the CQEs not consumed.
 * An S more than either ring holds from C is not the device's: the CQ goes
 * on in the new ring (the device's now) without the copies, and EIO.
 */
int ferroce_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct ferroce_context *ctx = to_fctx(ibcq->context);
	struct ferroce_cq *cq = to_fcq(ibcq);
	struct ferroce_resize_cq_resp resp = {};
	struct ferroce_resize_cq cmd = {};
	struct ferroce_cqe *buf, *src, *dst;
	uint32_t depth, log_depth, i, c;
	size_t size, old_size;
	uint16_t n, k;
	int ret;

	if (!(ctx->device_caps & FERROCE_CAP_RESIZE_CQ))
		return EOPNOTSUPP;
	if (cqe < 1)
		return EINVAL;
	ret = ferroce_cq_size(ctx, cqe, &depth);
	if (ret)
		return ret;
	log_depth = ffs(depth) - 1;
	buf = ferroce_alloc_cq_ring(depth, &size);
	if (!buf)
		return errno;

	pthread_spin_lock(&cq->lock);
	c = cq->ci;
	/* The ring is zeroed: only the owner bits are set */
	for (i = c; i != c + depth; i++)
		buf[i & (depth - 1)].owner = ferroce_cqe_phase(i, log_depth) ^ 1;
	/* The prepared ring before the command that hands it to the device */
	udma_to_device_barrier();

	cmd.buf_va = (uintptr_t)buf;
	cmd.depth = depth;
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp));
	if (ret)
		goto out;

	/*
	 * The device wrote CQEs up to S - 1 into the old ring before it
	 * answered: read them after the answer, write each one's body
	 * before its owner byte, as the device does.
	 */
	n = (uint16_t)resp.switch_index - (uint16_t)c;
	if (n > depth || n > cq->depth) {
		/* Not the device's S (it checks depth >= PI - ci) */
		verbs_err(&ctx->ibv_ctx,
			  "ferroce: CQ %u resized at %u, consumer at %u\n",
			  cq->cqn, resp.switch_index, c & FERROCE_WQ_IDX_MASK);
		n = 0;
		ret = EIO;
	}
	udma_from_device_barrier();
	for (k = 0, i = c; k < n; k++, i++) {
		src = &cq->buf[i & (cq->depth - 1)];
		dst = &buf[i & (depth - 1)];
		memcpy(dst, src, offsetof(struct ferroce_cqe, owner));
		udma_to_device_barrier();
		dst->owner = (src->owner & ~FERROCE_CQE_OWNER) |
			     ferroce_cqe_phase(i, log_depth);
	}

	/* The device writes the new ring only: the old one is ours */
	src = cq->buf;
	cq->buf = buf;
	buf = src;
	old_size = cq->buf_size;
	cq->buf_size = size;
	size = old_size;
	cq->depth = depth;
	cq->log_depth = log_depth;
	/* The device writes at most depth CQEs ahead of the recorded CI. */
	ibcq->cqe = depth;
out:
	pthread_spin_unlock(&cq->lock);
	ferroce_free_ring(buf, size);
	return ret;
}

int ferroce_destroy_cq(struct ibv_cq *ibcq)
{
	struct ferroce_context *ctx = to_fctx(ibcq->context);
	struct ferroce_cq *cq = to_fcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;

	pthread_spin_destroy(&cq->lock);
	ferroce_free_cq(ctx, cq);
	return 0;
}

/* ------------------------------------------------------------------------
 * QP
 * ------------------------------------------------------------------------
 */
static void ferroce_free_wq(struct ferroce_context *ctx, struct ferroce_wq *wq)
{
	ferroce_free_dbrec(ctx, wq->dbrec);
	ferroce_free_ring(wq->buf, wq->buf_size);
}

/* The ring of a queue: depth WQEs of 1 << shift bytes */
static int ferroce_alloc_wq_ring(struct ferroce_wq *wq, uint32_t depth,
				 int shift)
{
	wq->depth = depth;
	wq->shift = shift;
	wq->buf_size = align((size_t)depth << shift, FERROCE_PAGE_SIZE);
	wq->buf = ferroce_alloc_ring(wq->buf_size);
	if (!wq->buf)
		return -errno;
	return 0;
}

static int ferroce_alloc_wq(struct ferroce_context *ctx, struct ferroce_wq *wq,
			    uint32_t depth, int shift)
{
	int ret;

	ret = ferroce_alloc_wq_ring(wq, depth, shift);
	if (ret)
		return ret;
	wq->dbrec = ferroce_alloc_dbrec(ctx);
	if (!wq->dbrec) {
		ferroce_free_ring(wq->buf, wq->buf_size);
		wq->buf = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * Check the requested capabilities of a QP of type qp_type (on an SRQ if
 * srq is set) and work out the queue geometry; cap is updated to what the
 * QP really provides. A QP on an SRQ has no RQ of its own (req's RQ fields
 * stay 0) and its receive capabilities are ignored and reported as 0.
 */
static int ferroce_qp_geometry(struct ferroce_context *ctx,
			       enum ibv_qp_type qp_type, struct ibv_srq *srq,
			       struct ibv_qp_cap *cap,
			       struct ferroce_ureq_create_qp *req)
{
	uint32_t stride_sge;
	int sq_shift;

	/* Only this context's SRQs are ferroce's: basic SRQs of CAP_SRQ */
	if (srq && srq->context != &ctx->ibv_ctx.context)
		return -EINVAL;
	switch (qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UD:
		break;
	case IBV_QPT_UC:
		/* device 1.5: CAP_UC */
		if (!(ctx->device_caps & FERROCE_CAP_UC))
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (cap->max_send_wr > ctx->max_qp_wr ||
	    cap->max_send_sge > ctx->max_sge ||
	    cap->max_inline_data > ctx->max_inline)
		return -EINVAL;
	if (!srq && (cap->max_recv_wr > ctx->max_qp_wr ||
		     cap->max_recv_sge > ctx->max_sge))
		return -EINVAL;

	sq_shift = ferroce_sq_shift(cap->max_send_sge, cap->max_inline_data);
	if (sq_shift < 0)
		return -EINVAL;
	req->sq_depth = roundup_pow_of_two(max_t(uint32_t, cap->max_send_wr, 1));
	req->sq_wqe_shift = sq_shift;
	if (req->sq_depth > ctx->max_qp_wr)
		return -EINVAL;

	/* What the stride really holds, capped by the device. */
	stride_sge = ((1U << sq_shift) - FERROCE_SQ_WQE_DATA_OFFSET) /
		     sizeof(struct ferroce_sge);
	cap->max_send_wr = req->sq_depth;
	cap->max_send_sge = min_t(uint32_t, stride_sge, ctx->max_sge);
	cap->max_inline_data = min_t(uint32_t,
				     (1U << sq_shift) - FERROCE_SQ_WQE_DATA_OFFSET,
				     ctx->max_inline);

	if (srq || !cap->max_recv_wr) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
		return 0;
	}
	return ferroce_recv_ring_size(ctx, &cap->max_recv_wr, &cap->max_recv_sge,
				      &req->rq_depth, &req->rq_wqe_shift);
}

/*
 * Supported: a PD (required), the ibv_wr_* send operations of the QP's
 * type (ferroce_qp_send_ops) and an SRQ of the context for RC, UC and UD.
 * Not: XRC, RSS, TSO, creation flags (IBV_QP_INIT_ATTR_CREATE_FLAGS only
 * with none set).
 */
struct ibv_qp *ferroce_create_qp_ex(struct ibv_context *ibctx,
				    struct ibv_qp_init_attr_ex *attr)
{
	struct ferroce_context *ctx = to_fctx(ibctx);
	struct ferroce_create_qp_resp resp = {};
	struct ferroce_create_qp cmd = {};
	struct ibv_qp_init_attr_ex kattr;
	uint64_t send_ops = 0;
	struct ibv_qp_cap cap;
	struct ferroce_qp *qp;
	int ret;

	if (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD |
				IBV_QP_INIT_ATTR_CREATE_FLAGS |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
	    (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS &&
	     attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		send_ops = attr->send_ops_flags;
		if (send_ops & ~ferroce_qp_send_ops(ctx, attr->qp_type)) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}

	cap = attr->cap;
	ret = ferroce_qp_geometry(ctx, attr->qp_type, attr->srq, &cap,
				  &cmd.drv_payload);
	if (ret) {
		errno = -ret;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	ret = -ferroce_alloc_wq(ctx, &qp->sq, cmd.sq_depth, cmd.sq_wqe_shift);
	if (ret)
		goto err_free;
	if (cmd.rq_depth) {
		ret = -ferroce_alloc_wq(ctx, &qp->rq, cmd.rq_depth,
					cmd.rq_wqe_shift);
		if (ret)
			goto err_sq;
	}

	cmd.sq_buf_va = (uintptr_t)qp->sq.buf;
	cmd.sq_dbrec_va = (uintptr_t)qp->sq.dbrec;
	cmd.rq_buf_va = (uintptr_t)qp->rq.buf;
	cmd.rq_dbrec_va = (uintptr_t)qp->rq.dbrec;

	/*
	 * IBV_QP_INIT_ATTR_CREATE_FLAGS can only be here with no flag set:
	 * no request, and libibverbs' legacy command would refuse its bit.
	 */
	kattr = *attr;
	kattr.comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	/* On an SRQ the QP asks for no RQ, whatever the caller's cap says. */
	if (attr->srq) {
		kattr.cap.max_recv_wr = 0;
		kattr.cap.max_recv_sge = 0;
	}
	ret = ibv_cmd_create_qp_ex(ibctx, &qp->vqp, &kattr, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_rq;

	qp->qpn = resp.qpn;
	qp->max_inline = min_t(uint32_t, resp.max_inline, cap.max_inline_data);
	qp->sq_sig_all = attr->sq_sig_all;
	qp->sq.max_sge = cap.max_send_sge;
	qp->sq.db = (uint8_t *)ctx->db + FERROCE_DB_SQ;
	qp->rq.max_sge = cap.max_recv_sge;
	qp->rq.db = (uint8_t *)ctx->db + FERROCE_DB_RQ;
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		ferroce_qp_set_ex_ops(qp, send_ops);

	/* Report the provider's real limits, not the kernel's echo. */
	cap.max_inline_data = qp->max_inline;
	attr->cap = cap;

	ret = ferroce_store_qp(ctx, qp);
	if (ret)
		goto err_destroy;

	return &qp->vqp.qp;

err_destroy:
	pthread_spin_destroy(&qp->sq.lock);
	pthread_spin_destroy(&qp->rq.lock);
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_rq:
	ferroce_free_wq(ctx, &qp->rq);
err_sq:
	ferroce_free_wq(ctx, &qp->sq);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *ferroce_create_qp(struct ibv_pd *pd,
				 struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = ferroce_create_qp_ex(pd->context, &attr_ex);

	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

/* A QP's send and receive CQ (the same one if it has no other) */
static void ferroce_qp_cqs(struct ibv_qp *ibqp, struct ferroce_cq **scq,
			   struct ferroce_cq **rcq)
{
	*scq = to_fcq(ibqp->send_cq);
	*rcq = ibqp->recv_cq ? to_fcq(ibqp->recv_cq) : *scq;
}

/* Lock a QP's CQs (one lock if they are the same CQ), in a fixed order. */
static void ferroce_lock_cqs(struct ibv_qp *ibqp)
{
	struct ferroce_cq *scq, *rcq;

	ferroce_qp_cqs(ibqp, &scq, &rcq);
	if (scq == rcq) {
		pthread_spin_lock(&scq->lock);
	} else if (scq < rcq) {
		pthread_spin_lock(&scq->lock);
		pthread_spin_lock(&rcq->lock);
	} else {
		pthread_spin_lock(&rcq->lock);
		pthread_spin_lock(&scq->lock);
	}
}

static void ferroce_unlock_cqs(struct ibv_qp *ibqp)
{
	struct ferroce_cq *scq, *rcq;

	ferroce_qp_cqs(ibqp, &scq, &rcq);
	pthread_spin_unlock(&scq->lock);
	if (rcq != scq)
		pthread_spin_unlock(&rcq->lock);
}

/* Forget the QP's CQEs; called with its CQs locked. */
static void ferroce_clean_cqs(struct ferroce_qp *qp)
{
	struct ferroce_cq *scq, *rcq;

	ferroce_qp_cqs(&qp->vqp.qp, &scq, &rcq);
	ferroce_cq_clean(scq, qp->qpn);
	if (rcq != scq)
		ferroce_cq_clean(rcq, qp->qpn);
}

int ferroce_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		      int attr_mask)
{
	struct ferroce_qp *qp = to_fqp(ibqp);
	struct ibv_modify_qp cmd = {};
	int ret;

	/*
	 * No queue lock is held across the command (it may take seconds):
	 * posters keep going, and a post racing with a state change gets
	 * the old or the new state, as on any device. A QP that went back
	 * to RESET restarts its queues at index 0 (device.rst: "-> RESET
	 * clears ... the recorded indices"): its CQEs are dropped and its
	 * indices reset afterwards, under the queues' and the CQs' locks.
	 */
	/* Before the command: a post_recv racing with it rings (harmless) */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR)
		__atomic_store_n(&qp->rq_ring, true, __ATOMIC_RELAXED);
	ret = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (ret || !(attr_mask & IBV_QP_STATE) ||
	    attr->qp_state != IBV_QPS_RESET)
		return ret;

	pthread_spin_lock(&qp->sq.lock);
	pthread_spin_lock(&qp->rq.lock);
	ferroce_lock_cqs(ibqp);
	ferroce_clean_cqs(qp);
	qp->sq.pi = 0;
	__atomic_store_n(&qp->sq.ci, 0, __ATOMIC_RELAXED);
	qp->sq.dbrec->pi = 0;
	if (qp->rq.depth) {
		qp->rq.pi = 0;
		__atomic_store_n(&qp->rq.ci, 0, __ATOMIC_RELAXED);
		qp->rq.dbrec->pi = 0;
	}
	__atomic_store_n(&qp->rq_ring, false, __ATOMIC_RELAXED);
	ferroce_unlock_cqs(ibqp);
	pthread_spin_unlock(&qp->rq.lock);
	pthread_spin_unlock(&qp->sq.lock);
	return 0;
}

/*
 * A fatal QP event (the device moved the QP to ERR): from now on
 * post_recv rings, so that the device flushes the new receive WQEs.
 */
void ferroce_async_event(struct ibv_context *ctx,
			 struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		__atomic_store_n(&to_fqp(event->element.qp)->rq_ring, true,
				 __ATOMIC_RELAXED);
		break;
	default:
		break;
	}
}

int ferroce_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		     int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ferroce_qp *qp = to_fqp(ibqp);
	struct ibv_query_qp cmd = {};
	int ret;

	ret = ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
			       sizeof(cmd));
	if (ret)
		return ret;

	/* The provider owns the queues: report their real limits. */
	attr->cap.max_send_wr = qp->sq.depth;
	attr->cap.max_send_sge = qp->sq.max_sge;
	attr->cap.max_inline_data = qp->max_inline;
	attr->cap.max_recv_wr = qp->rq.depth;
	attr->cap.max_recv_sge = qp->rq.max_sge;
	init_attr->cap = attr->cap;
	return 0;
}

int ferroce_destroy_qp(struct ibv_qp *ibqp)
{
	struct ferroce_context *ctx = to_fctx(ibqp->context);
	struct ferroce_qp *qp = to_fqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;

	/* The poller looks QPs up with the CQ lock held. */
	ferroce_lock_cqs(ibqp);
	ferroce_clean_cqs(qp);
	ferroce_clear_qp(ctx, qp);
	ferroce_unlock_cqs(ibqp);
	pthread_spin_destroy(&qp->sq.lock);
	pthread_spin_destroy(&qp->rq.lock);
	ferroce_free_wq(ctx, &qp->rq);
	ferroce_free_wq(ctx, &qp->sq);
	free(qp);
	return 0;
}

/* ------------------------------------------------------------------------
 * SRQ (device 1.6, CAP_SRQ): basic SRQs only, no XRC or tag matching
 * ------------------------------------------------------------------------
 */
/*
 * An SRQ of at least attr->max_wr WQEs of attr->max_sge SGEs, with its
 * ring and record, not created yet; the request for the driver in req.
 */
static struct ferroce_srq *ferroce_alloc_srq(struct ferroce_context *ctx,
					     const struct ibv_srq_attr *attr,
					     struct ferroce_ureq_create_srq *req)
{
	uint32_t max_wr = attr->max_wr, max_sge = attr->max_sge;
	struct ferroce_srq *srq;
	int ret;

	if (!(ctx->device_caps & FERROCE_CAP_SRQ)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	ret = ferroce_recv_ring_size(ctx, &max_wr, &max_sge, &req->depth,
				     &req->wqe_shift);
	if (ret) {
		errno = -ret;
		return NULL;
	}

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	if (ferroce_alloc_wq_ring(&srq->wq, req->depth, req->wqe_shift))
		goto err_free;
	srq->wq.max_sge = max_sge;
	/* pi and ci 0: the device writes its ci (0) at CREATE_SRQ */
	srq->dbrec = ferroce_alloc_dbrec(ctx);
	if (!srq->dbrec)
		goto err_ring;

	req->buf_va = (uintptr_t)srq->wq.buf;
	req->dbrec_va = (uintptr_t)srq->dbrec;
	return srq;

err_ring:
	ferroce_free_wq(ctx, &srq->wq);
err_free:
	free(srq);
	return NULL;
}

static void ferroce_free_srq(struct ferroce_context *ctx,
			     struct ferroce_srq *srq)
{
	ferroce_free_dbrec(ctx, srq->dbrec);
	ferroce_free_wq(ctx, &srq->wq);
	free(srq);
}

/* The driver created the SRQ: report the provider's real limits. */
static void ferroce_srq_created(struct ferroce_srq *srq, uint32_t srqn,
				struct ibv_srq_attr *attr)
{
	pthread_spin_init(&srq->wq.lock, PTHREAD_PROCESS_PRIVATE);
	srq->srqn = srqn;
	attr->max_wr = srq->wq.depth;
	attr->max_sge = srq->wq.max_sge;
}

struct ibv_srq *ferroce_create_srq(struct ibv_pd *pd,
				   struct ibv_srq_init_attr *attr)
{
	struct ferroce_context *ctx = to_fctx(pd->context);
	struct ferroce_create_srq_resp resp = {};
	struct ferroce_create_srq cmd = {};
	struct ferroce_srq *srq;
	int ret;

	srq = ferroce_alloc_srq(ctx, &attr->attr, &cmd.drv_payload);
	if (!srq)
		return NULL;

	ret = ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd.ibv_cmd,
				 sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret) {
		ferroce_free_srq(ctx, srq);
		errno = ret;
		return NULL;
	}
	ferroce_srq_created(srq, resp.srqn, &attr->attr);
	return &srq->vsrq.srq;
}

/*
 * ibv_create_srq_ex() comes here for what ibv_create_srq() cannot express:
 * a basic SRQ with IBV_SRQ_INIT_ATTR_CQ (used by XRC and tag-matching SRQs
 * only, so ignored, as the kernel does). Other SRQ types: not supported.
 */
struct ibv_srq *ferroce_create_srq_ex(struct ibv_context *ibctx,
				      struct ibv_srq_init_attr_ex *attr)
{
	struct ferroce_context *ctx = to_fctx(ibctx);
	struct ferroce_create_srq_ex_resp resp = {};
	struct ferroce_create_srq_ex cmd = {};
	struct ibv_srq_init_attr_ex kattr;
	struct ferroce_srq *srq;
	int ret;

	if (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
				IBV_SRQ_INIT_ATTR_CQ) ||
	    (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE &&
	     attr->srq_type != IBV_SRQT_BASIC)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	srq = ferroce_alloc_srq(ctx, &attr->attr, &cmd.drv_payload);
	if (!srq)
		return NULL;

	/*
	 * The type made explicit: libibverbs' write() fallback reads
	 * srq_type whether IBV_SRQ_INIT_ATTR_TYPE is set or not.
	 */
	kattr = *attr;
	kattr.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	kattr.srq_type = IBV_SRQT_BASIC;
	ret = ibv_cmd_create_srq_ex(ibctx, &srq->vsrq, &kattr, &cmd.ibv_cmd,
				    sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret) {
		ferroce_free_srq(ctx, srq);
		errno = ret;
		return NULL;
	}
	ferroce_srq_created(srq, resp.srqn, &attr->attr);
	/* What libibverbs sets after ibv_create_srq() but not here */
	srq->vsrq.srq.pd = attr->pd;
	srq->vsrq.srq.srq_context = attr->srq_context;
	srq->vsrq.srq.events_completed = 0;
	return &srq->vsrq.srq;
}

/* The SRQ's depth, which a resize may be changing */
static uint32_t ferroce_srq_depth(struct ferroce_srq *srq)
{
	uint32_t depth;

	pthread_spin_lock(&srq->wq.lock);
	depth = srq->wq.depth;
	pthread_spin_unlock(&srq->wq.lock);
	return depth;
}

/*
 * Resizing (device.rst, "Shared receive queues", "Resizing"): a new zeroed
 * ring of the same stride, a power of two >= attr->max_wr (and >= 1) deep,
 * into which every WQE the device may not have taken yet (from the ci of
 * the record up to pi) is copied at the same index, then modify_srq with
 * the ring as driver data (ferroce_ureq_modify_srq) and attr_mask as given:
 * the limit, if set, against the new depth. The SRQ's lock is held from
 * the ci read until the driver answered, so nothing is posted meanwhile.
 * The device may take more WQEs after the ci read; their copies are never
 * read, it goes on from its own ci. On success the old ring is freed, on
 * failure the new one. A depth below the WQEs outstanding: EINVAL.
 */
static int ferroce_resize_srq(struct ferroce_srq *srq,
			      struct ibv_srq_attr *attr, int attr_mask)
{
	struct ferroce_context *ctx = to_fctx(srq->vsrq.srq.context);
	struct ferroce_wq *wq = &srq->wq;
	struct ferroce_modify_srq cmd = {};
	struct ferroce_wq ring = {};
	size_t stride, old_size;
	uint16_t ci, i, used;
	uint32_t depth;
	void *old_buf;
	int ret;

	if (!(ctx->device_caps & FERROCE_CAP_SRQ) ||
	    attr->max_wr > ctx->max_qp_wr)
		return EINVAL;
	depth = roundup_pow_of_two(max_t(uint32_t, attr->max_wr, 1));
	if (depth > ctx->max_qp_wr ||
	    (attr_mask & IBV_SRQ_LIMIT && attr->srq_limit > depth))
		return EINVAL;
	/* The stride is the SRQ's, set at creation: no lock needed */
	ret = ferroce_alloc_wq_ring(&ring, depth, wq->shift);
	if (ret)
		return -ret;
	stride = (size_t)1 << wq->shift;

	pthread_spin_lock(&wq->lock);
	ci = ferroce_srq_ci(srq);
	used = wq->pi - ci;
	/* More than the ring held: a record ci that is not the device's */
	if (used > depth || used > wq->depth) {
		ret = EINVAL;
		goto out;
	}
	for (i = ci; i != wq->pi; i++)
		memcpy(ferroce_wqe(&ring, i), ferroce_wqe(wq, i), stride);
	/* The copies before the command that hands the ring to the device */
	udma_to_device_barrier();

	cmd.buf_va = (uintptr_t)ring.buf;
	cmd.depth = depth;
	ret = ibv_cmd_modify_srq(&srq->vsrq.srq, attr, attr_mask, &cmd.ibv_cmd,
				 sizeof(cmd));
	if (!ret) {
		/* The device takes WQEs from the new ring: the old is ours */
		old_buf = wq->buf;
		old_size = wq->buf_size;
		wq->buf = ring.buf;
		wq->buf_size = ring.buf_size;
		wq->depth = depth;
		ring.buf = old_buf;
		ring.buf_size = old_size;
	}
out:
	pthread_spin_unlock(&wq->lock);
	ferroce_free_ring(ring.buf, ring.buf_size);
	return ret;
}

/*
 * IBV_SRQ_MAX_WR resizes (ferroce_resize_srq), with or without
 * IBV_SRQ_LIMIT; the limit alone (0..depth, 0 disarms) takes no driver
 * data.
 */
int ferroce_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		       int attr_mask)
{
	struct ferroce_srq *srq = to_fsrq(ibsrq);
	struct ibv_modify_srq cmd = {};

	if (attr_mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (attr_mask & IBV_SRQ_MAX_WR)
		return ferroce_resize_srq(srq, attr, attr_mask);
	if (attr_mask & IBV_SRQ_LIMIT &&
	    attr->srq_limit > ferroce_srq_depth(srq))
		return EINVAL;
	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

int ferroce_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ferroce_srq *srq = to_fsrq(ibsrq);
	struct ibv_query_srq cmd = {};
	int ret;

	ret = ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
	if (ret)
		return ret;

	/* The provider owns the ring: report its real limits. */
	attr->max_wr = ferroce_srq_depth(srq);
	attr->max_sge = srq->wq.max_sge;
	return 0;
}

/* Refused (EBUSY by ib_core) while a QP is attached to the SRQ. */
int ferroce_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ferroce_context *ctx = to_fctx(ibsrq->context);
	struct ferroce_srq *srq = to_fsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;

	pthread_spin_destroy(&srq->wq.lock);
	ferroce_free_srq(ctx, srq);
	return 0;
}

/* ------------------------------------------------------------------------
 * AH
 * ------------------------------------------------------------------------
 */
struct ibv_ah *ferroce_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ferroce_create_ah_resp resp = {};
	struct ferroce_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;

	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->ahn = resp.ahn;
	return &ah->ibv_ah;
}

int ferroce_destroy_ah(struct ibv_ah *ibah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;
	free(to_fah(ibah));
	return 0;
}
