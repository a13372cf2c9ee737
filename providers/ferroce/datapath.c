// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libferroce: data path. Posting writes WQEs into the rings and rings the
 * context's doorbell page; polling reads CQEs from the CQ ring. The
 * ordering rules are Documentation/ferroce/device.rst, "Doorbell records".
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "ferroce.h"

/* ------------------------------------------------------------------------
 * CQ
 * ------------------------------------------------------------------------
 */

/* CQE number idx if the device has written it (phase rule of device.rst) */
static struct ferroce_cqe *ferroce_cqe_at(struct ferroce_cq *cq, uint32_t idx)
{
	struct ferroce_cqe *cqe = &cq->buf[idx & (cq->depth - 1)];

	if ((cqe->owner & FERROCE_CQE_OWNER) !=
	    ferroce_cqe_phase(idx, cq->log_depth))
		return NULL;
	return cqe;
}

static unsigned int ferroce_cqe_wc_flags(const struct ferroce_cqe *cqe)
{
	unsigned int flags = 0;

	if (cqe->flags & FERROCE_CQE_WITH_IMM)
		flags |= IBV_WC_WITH_IMM;
	if (cqe->flags & FERROCE_CQE_GRH)
		flags |= IBV_WC_GRH;
	if (cqe->flags & FERROCE_CQE_WITH_INV)
		flags |= IBV_WC_WITH_INV;
	return flags;
}

/*
 * The CQE's imm_data as ibv_wc reports it: the immediate data (big
 * endian) with WITH_IMM, the invalidated key (host order: imm_data and
 * invalidated_rkey share the union, and ibv_wc_read_invalidated_rkey()
 * reads it through read_imm_data) with WITH_INV, else 0.
 */
static __be32 ferroce_cqe_imm_data(const struct ferroce_cqe *cqe)
{
	if (cqe->flags & FERROCE_CQE_WITH_INV)
		return (__force __be32)be32toh(cqe->imm_data);
	if (cqe->flags & FERROCE_CQE_WITH_IMM)
		return cqe->imm_data;
	return 0;
}

/*
 * Retire the WQE of a CQE and every unsignaled one before it. Receive CQEs
 * (also flushed ones) carry a receive opcode (IBV_WC_RECV bit). Those of a
 * QP on an SRQ name a WQE of the SRQ (wqe_idx is its SRQ index), whose slot
 * the device freed when it took the WQE (the record's ci): nothing to do.
 */
static void ferroce_cqe_retire(struct ferroce_cq *cq,
			       const struct ferroce_cqe *cqe)
{
	struct ferroce_context *ctx = to_fctx(cq->vcq.cq.context);
	uint32_t qpn = le32toh(cqe->qpn) & FERROCE_QPN_MASK;
	uint16_t idx = le16toh(cqe->wqe_idx);
	struct ferroce_qp *qp;
	struct ferroce_wq *wq;

	qp = ferroce_find_qp(ctx, qpn);
	if (!qp)
		return;
	/* An error completion: the QP is in ERR, or about to be */
	if (cqe->status != IBV_WC_SUCCESS)
		__atomic_store_n(&qp->rq_ring, true, __ATOMIC_RELAXED);
	wq = cqe->opcode & IBV_WC_RECV ? &qp->rq : &qp->sq;
	if (!wq->depth)
		return;
	__atomic_store_n(&wq->ci, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
}

/* A CQE's opcode is the ibv_wc_opcode (FERROCE_WC_REG_MR is the kernel's). */
static_assert(FERROCE_WC_SEND == IBV_WC_SEND, "WC_SEND");
static_assert(FERROCE_WC_RDMA_WRITE == IBV_WC_RDMA_WRITE, "WC_RDMA_WRITE");
static_assert(FERROCE_WC_RDMA_READ == IBV_WC_RDMA_READ, "WC_RDMA_READ");
static_assert(FERROCE_WC_COMP_SWAP == IBV_WC_COMP_SWAP, "WC_COMP_SWAP");
static_assert(FERROCE_WC_FETCH_ADD == IBV_WC_FETCH_ADD, "WC_FETCH_ADD");
static_assert(FERROCE_WC_BIND_MW == IBV_WC_BIND_MW, "WC_BIND_MW");
static_assert(FERROCE_WC_LOCAL_INV == IBV_WC_LOCAL_INV, "WC_LOCAL_INV");
static_assert(FERROCE_WC_FLUSH == IBV_WC_FLUSH, "WC_FLUSH");
static_assert(FERROCE_WC_ATOMIC_WRITE == IBV_WC_ATOMIC_WRITE,
	      "WC_ATOMIC_WRITE");
static_assert(FERROCE_WC_RECV == IBV_WC_RECV, "WC_RECV");
static_assert(FERROCE_WC_RECV_RDMA_WITH_IMM == IBV_WC_RECV_RDMA_WITH_IMM,
	      "WC_RECV_RDMA_WITH_IMM");

static void ferroce_parse_cqe(struct ferroce_cq *cq,
			      const struct ferroce_cqe *cqe, struct ibv_wc *wc)
{
	wc->wr_id = le64toh(cqe->wr_id);
	wc->status = cqe->status;
	wc->opcode = cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = le32toh(cqe->byte_len);
	wc->qp_num = le32toh(cqe->qpn) & FERROCE_QPN_MASK;
	wc->src_qp = le32toh(cqe->src_qp) & FERROCE_QPN_MASK;
	wc->wc_flags = ferroce_cqe_wc_flags(cqe);
	if (cqe->flags & FERROCE_CQE_WITH_INV)
		wc->invalidated_rkey = be32toh(cqe->imm_data);
	else
		wc->imm_data = ferroce_cqe_imm_data(cqe);
	wc->pkey_index = 0;
	wc->slid = 0;
	wc->sl = 0;
	wc->dlid_path_bits = 0;
	ferroce_cqe_retire(cq, cqe);
}

/* The CQE at the CI, if the device has written it; read after its owner. */
static struct ferroce_cqe *ferroce_cqe_next(struct ferroce_cq *cq)
{
	struct ferroce_cqe *cqe = ferroce_cqe_at(cq, cq->ci);

	if (cqe)
		udma_from_device_barrier();
	return cqe;
}

/* The CQEs up to the CI are read before the device may reuse their slots. */
static void ferroce_cq_update_ci(struct ferroce_cq *cq)
{
	udma_to_device_barrier();
	cq->dbrec->ci = htole32(cq->ci & FERROCE_WQ_IDX_MASK);
}

int ferroce_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct ferroce_cq *cq = to_fcq(ibcq);
	struct ferroce_cqe *cqe;
	int n;

	pthread_spin_lock(&cq->lock);
	for (n = 0; n < num_entries; n++) {
		cqe = ferroce_cqe_next(cq);
		if (!cqe)
			break;
		ferroce_parse_cqe(cq, cqe, &wc[n]);
		cq->ci++;
	}
	if (n)
		ferroce_cq_update_ci(cq);
	pthread_spin_unlock(&cq->lock);
	return n;
}

/*
 * The extended CQ (ibv_create_cq_ex): ibv_start_poll() takes the CQ's lock
 * and stops at the first CQE, ibv_next_poll() consumes it and moves to the
 * next, ibv_end_poll() consumes the last one, records the CI and unlocks.
 * The read_* callbacks read the CQE the poll is at.
 */
static void ferroce_cq_ex_at(struct ferroce_cq *cq, struct ferroce_cqe *cqe)
{
	cq->cur = cqe;
	cq->vcq.cq_ex.wr_id = le64toh(cqe->wr_id);
	cq->vcq.cq_ex.status = cqe->status;
	ferroce_cqe_retire(cq, cqe);
}

static int ferroce_start_poll(struct ibv_cq_ex *ibcq,
			      struct ibv_poll_cq_attr *attr)
{
	struct ferroce_cq *cq = to_fcq_ex(ibcq);
	struct ferroce_cqe *cqe;

	if (attr->comp_mask)
		return EINVAL;

	pthread_spin_lock(&cq->lock);
	cqe = ferroce_cqe_next(cq);
	if (!cqe) {
		pthread_spin_unlock(&cq->lock);
		return ENOENT;
	}
	ferroce_cq_ex_at(cq, cqe);
	return 0;
}

static int ferroce_next_poll(struct ibv_cq_ex *ibcq)
{
	struct ferroce_cq *cq = to_fcq_ex(ibcq);
	struct ferroce_cqe *cqe;

	if (!cq->cur)
		return ENOENT;
	cq->ci++;
	cqe = ferroce_cqe_next(cq);
	if (!cqe) {
		cq->cur = NULL;
		return ENOENT;
	}
	ferroce_cq_ex_at(cq, cqe);
	return 0;
}

static void ferroce_end_poll(struct ibv_cq_ex *ibcq)
{
	struct ferroce_cq *cq = to_fcq_ex(ibcq);

	if (cq->cur) {
		cq->ci++;
		cq->cur = NULL;
	}
	ferroce_cq_update_ci(cq);
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode ferroce_wc_read_opcode(struct ibv_cq_ex *ibcq)
{
	return to_fcq_ex(ibcq)->cur->opcode;
}

static uint32_t ferroce_wc_read_vendor_err(struct ibv_cq_ex *ibcq)
{
	return to_fcq_ex(ibcq)->cur->vendor_err;
}

static uint32_t ferroce_wc_read_byte_len(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_fcq_ex(ibcq)->cur->byte_len);
}

static __be32 ferroce_wc_read_imm_data(struct ibv_cq_ex *ibcq)
{
	return ferroce_cqe_imm_data(to_fcq_ex(ibcq)->cur);
}

static uint32_t ferroce_wc_read_qp_num(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_fcq_ex(ibcq)->cur->qpn) & FERROCE_QPN_MASK;
}

static uint32_t ferroce_wc_read_src_qp(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_fcq_ex(ibcq)->cur->src_qp) & FERROCE_QPN_MASK;
}

static unsigned int ferroce_wc_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	return ferroce_cqe_wc_flags(to_fcq_ex(ibcq)->cur);
}

/* RoCE has no LIDs; the SL of a received packet is not reported. */
static uint32_t ferroce_wc_read_slid(struct ibv_cq_ex *ibcq)
{
	return 0;
}

static uint8_t ferroce_wc_read_sl(struct ibv_cq_ex *ibcq)
{
	return 0;
}

static uint8_t ferroce_wc_read_dlid_path_bits(struct ibv_cq_ex *ibcq)
{
	return 0;
}

/* wc_flags is a subset of FERROCE_WC_EX_FLAGS. */
void ferroce_cq_set_ex_ops(struct ferroce_cq *cq, uint64_t wc_flags)
{
	struct ibv_cq_ex *ex = &cq->vcq.cq_ex;

	ex->start_poll = ferroce_start_poll;
	ex->next_poll = ferroce_next_poll;
	ex->end_poll = ferroce_end_poll;
	ex->read_opcode = ferroce_wc_read_opcode;
	ex->read_vendor_err = ferroce_wc_read_vendor_err;
	ex->read_wc_flags = ferroce_wc_read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		ex->read_byte_len = ferroce_wc_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		ex->read_imm_data = ferroce_wc_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		ex->read_qp_num = ferroce_wc_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		ex->read_src_qp = ferroce_wc_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		ex->read_slid = ferroce_wc_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		ex->read_sl = ferroce_wc_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		ex->read_dlid_path_bits = ferroce_wc_read_dlid_path_bits;
}

/*
 * Drop the CQEs of a QP that is destroyed or reset (its qpn may be reused,
 * its WQE indices restart), moving the later CQEs over them. The device
 * writes no more CQEs for the QP, and only slots it has already written are
 * touched. Called with the CQ's lock held.
 */
void ferroce_cq_clean(struct ferroce_cq *cq, uint32_t qpn)
{
	struct ferroce_cqe *cqe, *dest;
	uint32_t prod, nfreed = 0;
	uint8_t owner;

	for (prod = cq->ci; prod - cq->ci < cq->depth; prod++)
		if (!ferroce_cqe_at(cq, prod))
			break;
	udma_from_device_barrier();

	while (prod-- != cq->ci) {
		cqe = &cq->buf[prod & (cq->depth - 1)];
		if ((le32toh(cqe->qpn) & FERROCE_QPN_MASK) == qpn) {
			nfreed++;
		} else if (nfreed) {
			/* The slot keeps its own phase. */
			dest = &cq->buf[(prod + nfreed) & (cq->depth - 1)];
			owner = dest->owner;
			memcpy(dest, cqe, sizeof(*cqe));
			dest->owner = owner;
		}
	}
	if (nfreed) {
		cq->ci += nfreed;
		ferroce_cq_update_ci(cq);
	}
}

int ferroce_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct ferroce_cq *cq = to_fcq(ibcq);
	uint32_t cmd = solicited_only ? FERROCE_CQ_CMD_ARM_SOLICITED :
					FERROCE_CQ_CMD_ARM_NEXT;
	uint64_t val;

	pthread_spin_lock(&cq->lock);
	val = FERROCE_DB_CQ_VAL(cq->cqn, cq->ci, cmd, cq->arm_sn);
	/* The CI record is written before the doorbell that names it. */
	udma_to_device_barrier();
	/*
	 * CQEs at or beyond ci fire the arm at once, also those the device
	 * wrote before this posted doorbell reached it (device.rst, "CQ
	 * arming"), so no completion falls between the caller's last poll
	 * and the arm.
	 */
	mmio_write64_le(cq->db, htole64(val));
	pthread_spin_unlock(&cq->lock);
	return 0;
}

/* Called by ibv_get_cq_event() for each event: the next arm is a new one. */
void ferroce_cq_event(struct ibv_cq *ibcq)
{
	struct ferroce_cq *cq = to_fcq(ibcq);

	pthread_spin_lock(&cq->lock);
	cq->arm_sn = (cq->arm_sn + 1) & 3;
	pthread_spin_unlock(&cq->lock);
}

/* ------------------------------------------------------------------------
 * Work queues
 * ------------------------------------------------------------------------
 */
static inline bool ferroce_wq_full(struct ferroce_wq *wq, uint16_t pi)
{
	uint16_t ci = __atomic_load_n(&wq->ci, __ATOMIC_ACQUIRE);

	return (uint16_t)(pi - ci) >= wq->depth;
}

/* WQEs -> barrier -> PI record -> barrier -> doorbell (device.rst) */
static void ferroce_ring(struct ferroce_wq *wq, uint32_t qpn, uint16_t pi)
{
	udma_to_device_barrier();
	wq->dbrec->pi = htole32(pi);
	udma_to_device_barrier();
	mmio_write64_le(wq->db, htole64(FERROCE_DB_SQ_VAL(qpn, pi)));
}

static void ferroce_set_sges(struct ferroce_sge *dst, const struct ibv_sge *sg,
			     int num_sge)
{
	int i;

	for (i = 0; i < num_sge; i++) {
		dst[i].addr = htole64(sg[i].addr);
		dst[i].length = htole32(sg[i].length);
		dst[i].lkey = htole32(sg[i].lkey);
	}
}

static int ferroce_set_inline(struct ferroce_qp *qp, uint8_t *data,
			      const struct ibv_send_wr *wr, uint32_t *len)
{
	uint32_t total = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		if (wr->sg_list[i].length > qp->max_inline - total)
			return -EINVAL;
		memcpy(data + total, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		total += wr->sg_list[i].length;
	}
	*len = total;
	return 0;
}

/* The WQE flags that IBV_SEND_* flags (of ibv_post_send or ibv_wr_*) ask for. */
static uint8_t ferroce_wqe_flags(const struct ferroce_qp *qp,
				 unsigned int send_flags)
{
	uint8_t flags = 0;

	if ((send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
		flags |= FERROCE_WQE_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		flags |= FERROCE_WQE_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		flags |= FERROCE_WQE_FENCE;
	return flags;
}

/* A WQE's opcode is the ibv_wr_opcode: post_send writes wr->opcode as is. */
static_assert(FERROCE_WR_RDMA_WRITE == IBV_WR_RDMA_WRITE, "WR_RDMA_WRITE");
static_assert(FERROCE_WR_RDMA_WRITE_IMM == IBV_WR_RDMA_WRITE_WITH_IMM,
	      "WR_RDMA_WRITE_IMM");
static_assert(FERROCE_WR_SEND == IBV_WR_SEND, "WR_SEND");
static_assert(FERROCE_WR_SEND_IMM == IBV_WR_SEND_WITH_IMM, "WR_SEND_IMM");
static_assert(FERROCE_WR_RDMA_READ == IBV_WR_RDMA_READ, "WR_RDMA_READ");
static_assert(FERROCE_WR_ATOMIC_CMP_SWP == IBV_WR_ATOMIC_CMP_AND_SWP,
	      "WR_ATOMIC_CMP_SWP");
static_assert(FERROCE_WR_ATOMIC_FETCH_ADD == IBV_WR_ATOMIC_FETCH_AND_ADD,
	      "WR_ATOMIC_FETCH_ADD");
static_assert(FERROCE_WR_LOCAL_INV == IBV_WR_LOCAL_INV, "WR_LOCAL_INV");
static_assert(FERROCE_WR_BIND_MW == IBV_WR_BIND_MW, "WR_BIND_MW");
static_assert(FERROCE_WR_SEND_INV == IBV_WR_SEND_WITH_INV, "WR_SEND_INV");
static_assert(FERROCE_WR_FLUSH == IBV_WR_FLUSH, "WR_FLUSH");
static_assert(FERROCE_WR_ATOMIC_WRITE == IBV_WR_ATOMIC_WRITE,
	      "WR_ATOMIC_WRITE");

/* The rights of a window: remote ones; LOCAL_WRITE is taken and ignored */
#define FERROCE_MW_ACCESS						\
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |		\
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/*
 * What software can check of a bind of mw (device 1.7, "Memory windows")
 * before its WQE is posted, for an MW of type mw_type (1: ibv_bind_mw, 2:
 * IBV_WR_BIND_MW and ibv_wr_bind_mw): the MW's type, its PD (the QP's:
 * EPERM, as ibv_bind_mw() has it for the MR's), a new key rkey of the MW's
 * index, the window's rights (no ZERO_BASED: zero-based windows are not in
 * 1.7), and an MR of the MW's PD registered with IBV_ACCESS_MW_BIND, and
 * with LOCAL_WRITE for a window with REMOTE_WRITE or REMOTE_ATOMIC. The
 * rights of an MR from ferroce_reg_mr are known (verbs_mr.access, which
 * ferroce_rereg_mr keeps); those of an imported one (ibv_import_mr) are
 * not, and only the device checks them. Only a type 1 unbind (addr and
 * length 0) may name no MR. The device checks the rest (the MR's range and
 * state, the MW's) and completes a failing bind with MW_BIND_ERR, which
 * moves the QP to ERR. Returns an errno.
 */
static int ferroce_check_bind_mw(const struct ferroce_qp *qp,
				 const struct ibv_mw *mw, uint32_t rkey,
				 const struct ibv_mw_bind_info *info,
				 enum ibv_mw_type mw_type)
{
	int mr_access;

	if (!mw || mw->type != mw_type)
		return EINVAL;
	if (mw->pd != qp->vqp.qp.pd)
		return EPERM;
	if ((rkey ^ mw->rkey) & ~FERROCE_KEY_VARIANT_MASK)
		return EINVAL;
	if (info->mw_access_flags & ~FERROCE_MW_ACCESS)
		return EINVAL;
	if (!info->mr)
		return mw_type == IBV_MW_TYPE_1 && !info->addr &&
		       !info->length ? 0 : EINVAL;
	if (info->mr->pd != mw->pd)
		return EPERM;
	if (verbs_get_mr(info->mr)->mr_type == IBV_MR_TYPE_IMPORTED_MR)
		return 0;
	mr_access = verbs_get_mr(info->mr)->access;
	if (!(mr_access & IBV_ACCESS_MW_BIND))
		return EINVAL;
	if (info->mw_access_flags &
	    (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) &&
	    !(mr_access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

/* The segment of a BIND_MW WQE (zeroed): the MW's new key is rkey. */
static void ferroce_set_bind_mw(struct ferroce_sq_wqe_bind_mw *bind,
				uint32_t rkey,
				const struct ibv_mw_bind_info *info)
{
	uint32_t access = 0;

	if (info->mw_access_flags & IBV_ACCESS_REMOTE_WRITE)
		access |= FERROCE_ACCESS_REMOTE_WRITE;
	if (info->mw_access_flags & IBV_ACCESS_REMOTE_READ)
		access |= FERROCE_ACCESS_REMOTE_READ;
	if (info->mw_access_flags & IBV_ACCESS_REMOTE_ATOMIC)
		access |= FERROCE_ACCESS_REMOTE_ATOMIC;
	bind->addr = htole64(info->addr);
	bind->length = htole64(info->length);
	bind->mw_key = htole32(rkey);
	/* no MR: a type 1 unbind */
	bind->mr_key = htole32(info->mr ? info->mr->lkey : 0);
	bind->access = htole32(access);
}

/*
 * Write the WQE of wr; a BIND_MW names an MW of type bind_type (2 for
 * ibv_post_send, 1 for ibv_bind_mw). LOCAL_INV and BIND_MW carry no data:
 * num_sge must be 0, IBV_SEND_INLINE means nothing for them.
 */
static int ferroce_build_send_wqe(struct ferroce_qp *qp, void *wqe,
				  const struct ibv_send_wr *wr,
				  enum ibv_mw_type bind_type)
{
	struct ferroce_sq_wqe_hdr *hdr = wqe;
	uint8_t *seg = (uint8_t *)wqe + FERROCE_SQ_WQE_SEG_OFFSET;
	uint8_t *data = (uint8_t *)wqe + FERROCE_SQ_WQE_DATA_OFFSET;
	struct ferroce_context *ctx = to_fctx(qp->vqp.qp.context);
	struct ferroce_sq_wqe_atomic *atomic;
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sq_wqe_ud *ud;
	uint32_t inline_len = 0;
	bool has_data = true;
	uint8_t flags = 0;
	int ret;

	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		if (wr->opcode != IBV_WR_SEND &&
		    wr->opcode != IBV_WR_SEND_WITH_IMM)
			return -EINVAL;
		if (!wr->wr.ud.ah)
			return -EINVAL;
	} else if (qp->vqp.qp.qp_type == IBV_QPT_UC) {
		/* UC has no READ, atomics or memory operations (IBTA 9.8) */
		if (wr->opcode != IBV_WR_SEND &&
		    wr->opcode != IBV_WR_SEND_WITH_IMM &&
		    wr->opcode != IBV_WR_RDMA_WRITE &&
		    wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
			return -EINVAL;
	} else {
		switch (wr->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			break;
		case IBV_WR_RDMA_READ:
			if (wr->send_flags & IBV_SEND_INLINE)
				return -EINVAL;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			/* 1.4 (CAP_ATOMIC): the original value lands in the SGE */
			if (!(ctx->device_caps & FERROCE_CAP_ATOMIC) ||
			    (wr->send_flags & IBV_SEND_INLINE))
				return -EINVAL;
			break;
		case IBV_WR_SEND_WITH_INV:
			/* 1.1 (CAP_MEM_MGT_EXT): a SEND, the key in its IETH */
			if (!(ctx->device_caps & FERROCE_CAP_MEM_MGT_EXT))
				return -EINVAL;
			break;
		case IBV_WR_LOCAL_INV:
			if (!(ctx->device_caps & FERROCE_CAP_MEM_MGT_EXT))
				return -EINVAL;
			has_data = false;
			break;
		case IBV_WR_BIND_MW:
			/* 1.7 (CAP_MW) */
			if (!(ctx->device_caps & FERROCE_CAP_MW))
				return -EINVAL;
			ret = ferroce_check_bind_mw(qp, wr->bind_mw.mw,
						    wr->bind_mw.rkey,
						    &wr->bind_mw.bind_info,
						    bind_type);
			if (ret)
				return -ret;
			has_data = false;
			break;
		case IBV_WR_FLUSH:
		case IBV_WR_ATOMIC_WRITE:
			/*
			 * struct ibv_send_wr has no fields for them (the
			 * flush's type and level, the 8 bytes to write):
			 * ibv_wr_flush and ibv_wr_atomic_write only.
			 */
		default:
			return -EINVAL;
		}
	}
	if (wr->num_sge < 0 || (!has_data && wr->num_sge))
		return -EINVAL;
	if (!(wr->send_flags & IBV_SEND_INLINE) &&
	    (uint32_t)wr->num_sge > qp->sq.max_sge)
		return -EINVAL;

	memset(wqe, 0, FERROCE_SQ_WQE_DATA_OFFSET);

	if (has_data && (wr->send_flags & IBV_SEND_INLINE)) {
		ret = ferroce_set_inline(qp, data, wr, &inline_len);
		if (ret)
			return ret;
		flags |= FERROCE_WQE_INLINE;
		hdr->inline_len = htole32(inline_len);
	} else {
		ferroce_set_sges((struct ferroce_sge *)data, wr->sg_list,
				 wr->num_sge);
		hdr->num_sge = wr->num_sge;
	}

	flags |= ferroce_wqe_flags(qp, wr->send_flags);

	hdr->wr_id = htole64(wr->wr_id);
	hdr->opcode = wr->opcode;	/* FERROCE_WR_* == IBV_WR_* */
	hdr->flags = flags;
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		hdr->imm_data = wr->imm_data;	/* already big endian */
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
		/* the key, in network order as in the IETH */
		hdr->imm_data = htobe32(wr->invalidate_rkey);
		break;
	default:
		break;
	}

	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		ud = (struct ferroce_sq_wqe_ud *)seg;
		ud->ahn = htole32(to_fah(wr->wr.ud.ah)->ahn);
		ud->remote_qpn = htole32(wr->wr.ud.remote_qpn);
		ud->remote_qkey = htole32(wr->wr.ud.remote_qkey);
	} else if (wr->opcode == IBV_WR_RDMA_WRITE ||
		   wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
		   wr->opcode == IBV_WR_RDMA_READ) {
		rdma = (struct ferroce_sq_wqe_rdma *)seg;
		rdma->remote_addr = htole64(wr->wr.rdma.remote_addr);
		rdma->rkey = htole32(wr->wr.rdma.rkey);
	} else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		   wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		atomic = (struct ferroce_sq_wqe_atomic *)seg;
		atomic->remote_addr = htole64(wr->wr.atomic.remote_addr);
		atomic->rkey = htole32(wr->wr.atomic.rkey);
		atomic->compare_add = htole64(wr->wr.atomic.compare_add);
		atomic->swap = htole64(wr->wr.atomic.swap);
	} else if (wr->opcode == IBV_WR_BIND_MW) {
		ferroce_set_bind_mw((struct ferroce_sq_wqe_bind_mw *)seg,
				    wr->bind_mw.rkey, &wr->bind_mw.bind_info);
	}
	return 0;
}

static bool ferroce_can_post_send(enum ibv_qp_state state)
{
	/* In ERR (and SQE) the device flushes what is posted. */
	return state == IBV_QPS_RTS || state == IBV_QPS_SQD ||
	       state == IBV_QPS_SQE || state == IBV_QPS_ERR;
}

/* ibv_post_send, whose BIND_MW WRs name MWs of type bind_type */
static int ferroce_post_send_wrs(struct ferroce_qp *qp, struct ibv_send_wr *wr,
				 struct ibv_send_wr **bad_wr,
				 enum ibv_mw_type bind_type)
{
	struct ferroce_wq *sq = &qp->sq;
	uint16_t pi;
	int ret = 0;

	pthread_spin_lock(&sq->lock);
	pi = sq->pi;
	if (!ferroce_can_post_send(qp->vqp.qp.state)) {
		ret = EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (ferroce_wq_full(sq, pi)) {
			ret = ENOMEM;
			break;
		}
		ret = -ferroce_build_send_wqe(qp, ferroce_wqe(sq, pi), wr,
					      bind_type);
		if (ret)
			break;
		pi++;
	}
	if (pi != sq->pi) {
		sq->pi = pi;
		ferroce_ring(sq, qp->qpn, pi);
	}
out:
	if (ret)
		*bad_wr = wr;
	pthread_spin_unlock(&sq->lock);
	return ret;
}

/* IBV_WR_BIND_MW binds type 2 windows; type 1 ones take ibv_bind_mw. */
int ferroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	return ferroce_post_send_wrs(to_fqp(ibqp), wr, bad_wr, IBV_MW_TYPE_2);
}

/*
 * ibv_bind_mw (type 1 windows): one BIND_MW WQE, posted as ibv_post_send
 * posts them, that gives the MW the key of the next variant
 * (ibv_inc_rkey); a length of 0 unbinds the MW (device.rst, "Memory
 * windows"). Once the WQE is posted mw->rkey is that key. If the bind
 * then fails (an MW_BIND_ERR CQE) the device changed nothing: the MW's
 * key is the old one, which the consumer has to restore.
 */
int ferroce_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		    struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {
		.wr_id = mw_bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = mw_bind->send_flags,
		.bind_mw = {
			.mw = mw,
			.rkey = ibv_inc_rkey(mw->rkey),
			.bind_info = mw_bind->bind_info,
		},
	};
	struct ibv_send_wr *bad_wr;
	int ret;

	ret = ferroce_post_send_wrs(to_fqp(ibqp), &wr, &bad_wr, IBV_MW_TYPE_1);
	if (ret) {
		errno = ret;
		return ret;
	}
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

/*
 * Write the receive WQEs of the list wr into the ring of an RQ or an SRQ,
 * from wq->pi on, into the slots the consumer index ci has freed (depth -
 * (pi - ci)), and advance wq->pi past them; the caller publishes the new pi.
 * Called with the queue's lock held; on an error *bad_wr is the WR that was
 * not posted.
 */
static int ferroce_write_recv_wqes(struct ferroce_wq *wq, uint16_t ci,
				   struct ibv_recv_wr *wr,
				   struct ibv_recv_wr **bad_wr)
{
	uint16_t used = wq->pi - ci;
	uint32_t room = used <= wq->depth ? wq->depth - used : 0;
	struct ferroce_rq_wqe_hdr *hdr;
	int ret = 0;

	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (!room) {
			ret = ENOMEM;
			break;
		}
		hdr = ferroce_wqe(wq, wq->pi);
		memset(hdr, 0, sizeof(*hdr));
		hdr->wr_id = htole64(wr->wr_id);
		hdr->num_sge = wr->num_sge;
		ferroce_set_sges((struct ferroce_sge *)(hdr + 1), wr->sg_list,
				 wr->num_sge);
		wq->pi++;
		room--;
	}
	if (ret)
		*bad_wr = wr;
	return ret;
}

int ferroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct ferroce_qp *qp = to_fqp(ibqp);
	struct ferroce_wq *rq = &qp->rq;
	uint16_t pi;
	int ret;

	pthread_spin_lock(&rq->lock);
	/*
	 * No RQ (max_recv_wr was 0, or the QP receives from an SRQ, which
	 * takes ibv_post_srq_recv), or a QP that cannot receive yet
	 */
	if (!rq->depth || ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		pthread_spin_unlock(&rq->lock);
		return EINVAL;
	}
	pi = rq->pi;
	ret = ferroce_write_recv_wqes(rq, __atomic_load_n(&rq->ci,
							   __ATOMIC_ACQUIRE),
				      wr, bad_wr);
	if (rq->pi != pi) {
		if (__atomic_load_n(&qp->rq_ring, __ATOMIC_RELAXED)) {
			ferroce_ring(rq, qp->qpn, rq->pi);
		} else {
			udma_to_device_barrier();
			/* one store: the device may read the record at any time */
			__atomic_store_n(&rq->dbrec->pi, htole32(rq->pi),
					 __ATOMIC_RELEASE);
		}
	}
	pthread_spin_unlock(&rq->lock);
	return ret;
}

/*
 * device.rst, "Shared receive queues", software's rule: WQEs at pi, into
 * the depth - (pi - ci) free slots, ci read from the record where the
 * device writes it (a slot is free once the device took its WQE, before
 * the completion arrives); a write barrier; the new pi to the record. The
 * device reads pi whenever a QP needs a WQE: there is no doorbell.
 */
int ferroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	struct ferroce_srq *srq = to_fsrq(ibsrq);
	struct ferroce_wq *wq = &srq->wq;
	uint16_t pi;
	int ret;

	pthread_spin_lock(&wq->lock);
	pi = wq->pi;
	ret = ferroce_write_recv_wqes(wq, ferroce_srq_ci(srq), wr, bad_wr);
	if (wq->pi != pi) {
		udma_to_device_barrier();
		/* one store: the device may read the record at any time */
		__atomic_store_n(&srq->dbrec->pi, htole32(wq->pi),
				 __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&wq->lock);
	return ret;
}

/* ------------------------------------------------------------------------
 * Extended QP: ibv_wr_start(), the ibv_wr_* builders and setters,
 * ibv_wr_complete(). Each builder starts a WQE in the SQ ring (header and
 * segment); the setters add its data. Nothing reaches the device before
 * ibv_wr_complete(), which rings once for all of them, or discards them all
 * if any call failed (ibv_wr_abort() discards them too).
 * ------------------------------------------------------------------------
 */
#define FERROCE_RC_SEND_OPS						\
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ)
#define FERROCE_ATOMIC_SEND_OPS						\
	(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define FERROCE_INV_SEND_OPS						\
	(IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)
#define FERROCE_UD_SEND_OPS						\
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define FERROCE_UC_SEND_OPS						\
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)

uint64_t ferroce_qp_send_ops(struct ferroce_context *ctx,
			     enum ibv_qp_type type)
{
	uint64_t ops;

	switch (type) {
	case IBV_QPT_RC:
		ops = FERROCE_RC_SEND_OPS;
		if (ctx->device_caps & FERROCE_CAP_ATOMIC)
			ops |= FERROCE_ATOMIC_SEND_OPS;
		if (ctx->device_caps & FERROCE_CAP_MEM_MGT_EXT)
			ops |= FERROCE_INV_SEND_OPS;
		if (ctx->device_caps & FERROCE_CAP_MW)
			ops |= IBV_QP_EX_WITH_BIND_MW;
		/* 1.8: IBTA 1.5's memory placement extensions */
		if (ctx->device_caps & FERROCE_CAP_ATOMIC_WRITE)
			ops |= IBV_QP_EX_WITH_ATOMIC_WRITE;
		if (ctx->device_caps & FERROCE_CAP_FLUSH)
			ops |= IBV_QP_EX_WITH_FLUSH;
		return ops;
	case IBV_QPT_UC:
		return ctx->device_caps & FERROCE_CAP_UC ? FERROCE_UC_SEND_OPS : 0;
	case IBV_QPT_UD:
		return FERROCE_UD_SEND_OPS;
	default:
		return 0;
	}
}

static void ferroce_wr_fail(struct ferroce_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
	qp->wr_wqe = NULL;
}

/* Starts a WQE of opcode op: header from the qp_ex's wr_id and wr_flags. */
static void *ferroce_wr_begin(struct ibv_qp_ex *ibqp, uint8_t op)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_hdr *hdr;

	if (qp->wr_err)
		return NULL;
	if (ferroce_wq_full(&qp->sq, qp->wr_pi)) {
		ferroce_wr_fail(qp, ENOMEM);
		return NULL;
	}
	if (ibqp->wr_flags & ~(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
			       IBV_SEND_FENCE | IBV_SEND_INLINE)) {
		ferroce_wr_fail(qp, EINVAL);
		return NULL;
	}
	hdr = ferroce_wqe(&qp->sq, qp->wr_pi++);
	memset(hdr, 0, FERROCE_SQ_WQE_DATA_OFFSET);
	hdr->wr_id = htole64(ibqp->wr_id);
	hdr->opcode = op;
	hdr->flags = ferroce_wqe_flags(qp, ibqp->wr_flags);
	qp->wr_wqe = hdr;
	qp->wr_opcode = op;
	return hdr;
}

static void *ferroce_wr_seg(void *wqe)
{
	return (uint8_t *)wqe + FERROCE_SQ_WQE_SEG_OFFSET;
}

static void ferroce_wr_rdma(struct ibv_qp_ex *ibqp, uint8_t op, uint32_t rkey,
			    uint64_t remote_addr, __be32 imm)
{
	struct ferroce_sq_wqe_hdr *hdr = ferroce_wr_begin(ibqp, op);
	struct ferroce_sq_wqe_rdma *rdma;

	if (!hdr)
		return;
	hdr->imm_data = imm;
	rdma = ferroce_wr_seg(hdr);
	rdma->remote_addr = htole64(remote_addr);
	rdma->rkey = htole32(rkey);
}

static void ferroce_wr_rdma_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
				  uint64_t remote_addr)
{
	ferroce_wr_rdma(ibqp, FERROCE_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void ferroce_wr_rdma_write_imm(struct ibv_qp_ex *ibqp, uint32_t rkey,
				      uint64_t remote_addr, __be32 imm)
{
	ferroce_wr_rdma(ibqp, FERROCE_WR_RDMA_WRITE_IMM, rkey, remote_addr, imm);
}

static void ferroce_wr_rdma_read(struct ibv_qp_ex *ibqp, uint32_t rkey,
				 uint64_t remote_addr)
{
	ferroce_wr_rdma(ibqp, FERROCE_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void ferroce_wr_send(struct ibv_qp_ex *ibqp)
{
	ferroce_wr_begin(ibqp, FERROCE_WR_SEND);
}

static void ferroce_wr_send_imm(struct ibv_qp_ex *ibqp, __be32 imm)
{
	struct ferroce_sq_wqe_hdr *hdr = ferroce_wr_begin(ibqp,
							  FERROCE_WR_SEND_IMM);

	if (hdr)
		hdr->imm_data = imm;
}

static void ferroce_wr_atomic(struct ibv_qp_ex *ibqp, uint8_t op,
			      uint32_t rkey, uint64_t remote_addr,
			      uint64_t compare_add, uint64_t swap)
{
	struct ferroce_sq_wqe_hdr *hdr = ferroce_wr_begin(ibqp, op);
	struct ferroce_sq_wqe_atomic *atomic;

	if (!hdr)
		return;
	atomic = ferroce_wr_seg(hdr);
	atomic->remote_addr = htole64(remote_addr);
	atomic->rkey = htole32(rkey);
	atomic->compare_add = htole64(compare_add);
	atomic->swap = htole64(swap);
}

static void ferroce_wr_atomic_cmp_swp(struct ibv_qp_ex *ibqp, uint32_t rkey,
				      uint64_t remote_addr, uint64_t compare,
				      uint64_t swap)
{
	ferroce_wr_atomic(ibqp, FERROCE_WR_ATOMIC_CMP_SWP, rkey, remote_addr,
			  compare, swap);
}

static void ferroce_wr_atomic_fetch_add(struct ibv_qp_ex *ibqp, uint32_t rkey,
					uint64_t remote_addr, uint64_t add)
{
	ferroce_wr_atomic(ibqp, FERROCE_WR_ATOMIC_FETCH_ADD, rkey, remote_addr,
			  add, 0);
}

static void ferroce_wr_send_inv(struct ibv_qp_ex *ibqp, uint32_t invalidate_rkey)
{
	struct ferroce_sq_wqe_hdr *hdr = ferroce_wr_begin(ibqp,
							  FERROCE_WR_SEND_INV);

	if (hdr)
		hdr->imm_data = htobe32(invalidate_rkey);
}

/* LOCAL_INV and BIND_MW carry no data: no setter may follow them. */
static void ferroce_wr_local_inv(struct ibv_qp_ex *ibqp,
				 uint32_t invalidate_rkey)
{
	struct ferroce_sq_wqe_hdr *hdr = ferroce_wr_begin(ibqp,
							  FERROCE_WR_LOCAL_INV);

	if (!hdr)
		return;
	hdr->imm_data = htobe32(invalidate_rkey);
	to_fqp_ex(ibqp)->wr_wqe = NULL;
}

/* Binds a type 2 window, as IBV_WR_BIND_MW does. */
static void ferroce_wr_bind_mw(struct ibv_qp_ex *ibqp, struct ibv_mw *mw,
			       uint32_t rkey,
			       const struct ibv_mw_bind_info *info)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_hdr *hdr;
	int err;

	err = ferroce_check_bind_mw(qp, mw, rkey, info, IBV_MW_TYPE_2);
	if (err) {
		ferroce_wr_fail(qp, err);
		return;
	}
	hdr = ferroce_wr_begin(ibqp, FERROCE_WR_BIND_MW);
	if (!hdr)
		return;
	ferroce_set_bind_mw(ferroce_wr_seg(hdr), rkey, info);
	qp->wr_wqe = NULL;
}

/*
 * ATOMIC_WRITE (device 1.8, CAP_ATOMIC_WRITE): the 8 bytes at atomic_wr go
 * into the WQE as they are, and land in remote memory in that order. No
 * SGEs or inline data: no setter may follow.
 */
static void ferroce_wr_atomic_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
				    uint64_t remote_addr,
				    const void *atomic_wr)
{
	struct ferroce_sq_wqe_hdr *hdr =
		ferroce_wr_begin(ibqp, FERROCE_WR_ATOMIC_WRITE);
	struct ferroce_sq_wqe_atomic_write *seg;

	if (!hdr)
		return;
	seg = ferroce_wr_seg(hdr);
	seg->remote_addr = htole64(remote_addr);
	seg->rkey = htole32(rkey);
	memcpy(seg->data, atomic_wr, sizeof(seg->data));
	to_fqp_ex(ibqp)->wr_wqe = NULL;
}

/* The placement types and selectivity levels of a FLUSH WQE */
static_assert(FERROCE_FLUSH_GLOBAL == IBV_FLUSH_GLOBAL, "FLUSH_GLOBAL");
static_assert(FERROCE_FLUSH_PERSISTENT == IBV_FLUSH_PERSISTENT,
	      "FLUSH_PERSISTENT");
static_assert(FERROCE_FLUSH_RANGE == IBV_FLUSH_RANGE, "FLUSH_RANGE");
static_assert(FERROCE_FLUSH_MR == IBV_FLUSH_MR, "FLUSH_MR");

/*
 * FLUSH (device 1.8, CAP_FLUSH): type GLOBAL, PERSISTENT or both, level
 * RANGE or MR, and a length the WQE's 32 bits hold; else the batch fails
 * with EINVAL. A PERSISTENT flush is posted: the responder refuses it
 * (no MR of the device has FLUSH_PERSISTENT). No data: no setter may
 * follow.
 */
static void ferroce_wr_flush(struct ibv_qp_ex *ibqp, uint32_t rkey,
			     uint64_t remote_addr, size_t len, uint8_t type,
			     uint8_t level)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_flush *seg;
	struct ferroce_sq_wqe_hdr *hdr;

	if ((uint64_t)len > UINT32_MAX || !type ||
	    type & ~(FERROCE_FLUSH_GLOBAL | FERROCE_FLUSH_PERSISTENT) ||
	    (level != FERROCE_FLUSH_RANGE && level != FERROCE_FLUSH_MR)) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	hdr = ferroce_wr_begin(ibqp, FERROCE_WR_FLUSH);
	if (!hdr)
		return;
	seg = ferroce_wr_seg(hdr);
	seg->remote_addr = htole64(remote_addr);
	seg->rkey = htole32(rkey);
	seg->length = htole32(len);
	seg->type = type;
	seg->level = level;
	qp->wr_wqe = NULL;
}

static void ferroce_wr_set_ud_addr(struct ibv_qp_ex *ibqp, struct ibv_ah *ah,
				   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_ud *ud;

	if (!qp->wr_wqe) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	if (!ah) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	ud = ferroce_wr_seg(qp->wr_wqe);
	ud->ahn = htole32(to_fah(ah)->ahn);
	ud->remote_qpn = htole32(remote_qpn);
	ud->remote_qkey = htole32(remote_qkey);
}

static bool ferroce_wr_is_atomic(uint8_t op)
{
	return op == FERROCE_WR_ATOMIC_CMP_SWP ||
	       op == FERROCE_WR_ATOMIC_FETCH_ADD;
}

static uint64_t ferroce_sge_bytes(const struct ibv_sge *sg_list, size_t num_sge)
{
	uint64_t bytes = 0;
	size_t i;

	for (i = 0; i < num_sge; i++)
		bytes += sg_list[i].length;
	return bytes;
}

/* Gather list of the current WQE; atomics take exactly 8 bytes. */
static void ferroce_wr_set_sge_list(struct ibv_qp_ex *ibqp, size_t num_sge,
				    const struct ibv_sge *sg_list)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_hdr *hdr = qp->wr_wqe;

	if (!hdr) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	if (num_sge > qp->sq.max_sge ||
	    (ferroce_wr_is_atomic(qp->wr_opcode) &&
	     ferroce_sge_bytes(sg_list, num_sge) != 8)) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	ferroce_set_sges((struct ferroce_sge *)((uint8_t *)hdr +
						FERROCE_SQ_WQE_DATA_OFFSET),
			 sg_list, num_sge);
	hdr->num_sge = num_sge;
	qp->wr_wqe = NULL;
}

static void ferroce_wr_set_sge(struct ibv_qp_ex *ibqp, uint32_t lkey,
			       uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	ferroce_wr_set_sge_list(ibqp, 1, &sge);
}

/* Inline data of the current WQE: copied now, the buffers may be reused. */
static void ferroce_wr_set_inline_data_list(struct ibv_qp_ex *ibqp,
					    size_t num_buf,
					    const struct ibv_data_buf *buf_list)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	struct ferroce_sq_wqe_hdr *hdr = qp->wr_wqe;
	uint8_t *data;
	size_t i, total = 0;

	if (!hdr) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	if (qp->wr_opcode == FERROCE_WR_RDMA_READ ||
	    ferroce_wr_is_atomic(qp->wr_opcode)) {
		ferroce_wr_fail(qp, EINVAL);
		return;
	}
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->max_inline - total) {
			ferroce_wr_fail(qp, EINVAL);
			return;
		}
		total += buf_list[i].length;
	}
	data = (uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET;
	for (i = 0, total = 0; i < num_buf; i++) {
		memcpy(data + total, buf_list[i].addr, buf_list[i].length);
		total += buf_list[i].length;
	}
	hdr->flags |= FERROCE_WQE_INLINE;
	hdr->inline_len = htole32(total);
	qp->wr_wqe = NULL;
}

static void ferroce_wr_set_inline_data(struct ibv_qp_ex *ibqp, void *addr,
				       size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	ferroce_wr_set_inline_data_list(ibqp, 1, &buf);
}

static void ferroce_wr_start(struct ibv_qp_ex *ibqp)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);

	pthread_spin_lock(&qp->sq.lock);
	qp->wr_pi = qp->sq.pi;
	qp->wr_wqe = NULL;
	qp->wr_err = ferroce_can_post_send(qp->vqp.qp.state) ? 0 : EINVAL;
}

static int ferroce_wr_complete(struct ibv_qp_ex *ibqp)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);
	int err = qp->wr_err;

	if (!err && qp->wr_pi != qp->sq.pi) {
		qp->sq.pi = qp->wr_pi;
		ferroce_ring(&qp->sq, qp->qpn, qp->sq.pi);
	}
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static void ferroce_wr_abort(struct ibv_qp_ex *ibqp)
{
	struct ferroce_qp *qp = to_fqp_ex(ibqp);

	pthread_spin_unlock(&qp->sq.lock);
}

/* send_ops is a subset of ferroce_qp_send_ops() for the QP's type. */
void ferroce_qp_set_ex_ops(struct ferroce_qp *qp, uint64_t send_ops)
{
	struct ibv_qp_ex *ex = &qp->vqp.qp_ex;

	qp->vqp.comp_mask |= VERBS_QP_EX;
	ex->wr_start = ferroce_wr_start;
	ex->wr_complete = ferroce_wr_complete;
	ex->wr_abort = ferroce_wr_abort;
	ex->wr_set_sge = ferroce_wr_set_sge;
	ex->wr_set_sge_list = ferroce_wr_set_sge_list;
	ex->wr_set_inline_data = ferroce_wr_set_inline_data;
	ex->wr_set_inline_data_list = ferroce_wr_set_inline_data_list;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		ex->wr_set_ud_addr = ferroce_wr_set_ud_addr;
	if (send_ops & IBV_QP_EX_WITH_SEND)
		ex->wr_send = ferroce_wr_send;
	if (send_ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		ex->wr_send_imm = ferroce_wr_send_imm;
	if (send_ops & IBV_QP_EX_WITH_RDMA_WRITE)
		ex->wr_rdma_write = ferroce_wr_rdma_write;
	if (send_ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		ex->wr_rdma_write_imm = ferroce_wr_rdma_write_imm;
	if (send_ops & IBV_QP_EX_WITH_RDMA_READ)
		ex->wr_rdma_read = ferroce_wr_rdma_read;
	if (send_ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		ex->wr_atomic_cmp_swp = ferroce_wr_atomic_cmp_swp;
	if (send_ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		ex->wr_atomic_fetch_add = ferroce_wr_atomic_fetch_add;
	if (send_ops & IBV_QP_EX_WITH_LOCAL_INV)
		ex->wr_local_inv = ferroce_wr_local_inv;
	if (send_ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		ex->wr_send_inv = ferroce_wr_send_inv;
	if (send_ops & IBV_QP_EX_WITH_BIND_MW)
		ex->wr_bind_mw = ferroce_wr_bind_mw;
	if (send_ops & IBV_QP_EX_WITH_ATOMIC_WRITE)
		ex->wr_atomic_write = ferroce_wr_atomic_write;
	if (send_ops & IBV_QP_EX_WITH_FLUSH)
		ex->wr_flush = ferroce_wr_flush;
}
