// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libferroce: data path. Posting writes WQEs into the rings and rings the
 * context's doorbell page; polling reads CQEs from the CQ ring. The
 * ordering rules are Documentation/ferroce/device.rst, "Doorbell records".
 */
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
	uint8_t phase = ((idx >> cq->log_depth) & 1) ^ 1;

	if ((cqe->owner & FERROCE_CQE_OWNER) != phase)
		return NULL;
	return cqe;
}

static void ferroce_parse_cqe(struct ferroce_cq *cq,
			      const struct ferroce_cqe *cqe, struct ibv_wc *wc)
{
	struct ferroce_context *ctx = to_fctx(cq->ibv_cq.context);
	uint32_t qpn = le32toh(cqe->qpn) & FERROCE_QPN_MASK;
	uint16_t idx = le16toh(cqe->wqe_idx);
	struct ferroce_qp *qp;

	wc->wr_id = le64toh(cqe->wr_id);
	wc->status = cqe->status;
	wc->opcode = cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = le32toh(cqe->byte_len);
	wc->qp_num = qpn;
	wc->src_qp = le32toh(cqe->src_qp) & FERROCE_QPN_MASK;
	wc->wc_flags = 0;
	wc->imm_data = 0;
	if (cqe->flags & FERROCE_CQE_WITH_IMM) {
		wc->wc_flags |= IBV_WC_WITH_IMM;
		wc->imm_data = cqe->imm_data;	/* stays big endian */
	}
	if (cqe->flags & FERROCE_CQE_GRH)
		wc->wc_flags |= IBV_WC_GRH;
	wc->pkey_index = 0;
	wc->slid = 0;
	wc->sl = 0;
	wc->dlid_path_bits = 0;

	/*
	 * Retire the WQE and every unsignaled one before it. Receive CQEs
	 * (also flushed ones) carry a receive opcode (IBV_WC_RECV bit).
	 */
	qp = ferroce_find_qp(ctx, qpn);
	if (!qp)
		return;
	__atomic_store_n(cqe->opcode & IBV_WC_RECV ? &qp->rq.ci : &qp->sq.ci,
			 (uint16_t)(idx + 1), __ATOMIC_RELEASE);
}

int ferroce_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct ferroce_cq *cq = to_fcq(ibcq);
	struct ferroce_cqe *cqe;
	int n;

	pthread_spin_lock(&cq->lock);
	for (n = 0; n < num_entries; n++) {
		cqe = ferroce_cqe_at(cq, cq->ci);
		if (!cqe)
			break;
		/* Read the owner byte before the rest of the CQE. */
		udma_from_device_barrier();
		ferroce_parse_cqe(cq, cqe, &wc[n]);
		cq->ci++;
	}
	if (n) {
		/* The CQEs are read before the device may reuse their slots. */
		udma_to_device_barrier();
		cq->dbrec->ci = htole32(cq->ci & FERROCE_WQ_IDX_MASK);
	}
	pthread_spin_unlock(&cq->lock);
	return n;
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
		udma_to_device_barrier();
		cq->dbrec->ci = htole32(cq->ci & FERROCE_WQ_IDX_MASK);
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
static inline void *ferroce_wqe(struct ferroce_wq *wq, uint16_t idx)
{
	return (uint8_t *)wq->buf + ((size_t)(idx & (wq->depth - 1)) << wq->shift);
}

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

static int ferroce_build_send_wqe(struct ferroce_qp *qp, void *wqe,
				  const struct ibv_send_wr *wr)
{
	struct ferroce_sq_wqe_hdr *hdr = wqe;
	uint8_t *seg = (uint8_t *)wqe + FERROCE_SQ_WQE_SEG_OFFSET;
	uint8_t *data = (uint8_t *)wqe + FERROCE_SQ_WQE_DATA_OFFSET;
	struct ferroce_context *ctx = to_fctx(qp->ibv_qp.context);
	struct ferroce_sq_wqe_atomic *atomic;
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sq_wqe_ud *ud;
	uint32_t inline_len = 0;
	uint8_t flags = 0;
	int ret;

	if (qp->ibv_qp.qp_type == IBV_QPT_UD) {
		if (wr->opcode != IBV_WR_SEND &&
		    wr->opcode != IBV_WR_SEND_WITH_IMM)
			return -EINVAL;
		if (!wr->wr.ud.ah)
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
		default:
			return -EINVAL;
		}
	}
	if (wr->num_sge < 0)
		return -EINVAL;
	if (!(wr->send_flags & IBV_SEND_INLINE) &&
	    (uint32_t)wr->num_sge > qp->sq.max_sge)
		return -EINVAL;

	memset(wqe, 0, FERROCE_SQ_WQE_DATA_OFFSET);

	if (wr->send_flags & IBV_SEND_INLINE) {
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

	if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
		flags |= FERROCE_WQE_SIGNALED;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		flags |= FERROCE_WQE_SOLICITED;
	if (wr->send_flags & IBV_SEND_FENCE)
		flags |= FERROCE_WQE_FENCE;

	hdr->wr_id = htole64(wr->wr_id);
	hdr->opcode = wr->opcode;	/* FERROCE_WR_* == IBV_WR_* */
	hdr->flags = flags;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		hdr->imm_data = wr->imm_data;	/* already big endian */

	if (qp->ibv_qp.qp_type == IBV_QPT_UD) {
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
	}
	return 0;
}

static bool ferroce_can_post_send(enum ibv_qp_state state)
{
	/* In ERR (and SQE) the device flushes what is posted. */
	return state == IBV_QPS_RTS || state == IBV_QPS_SQD ||
	       state == IBV_QPS_SQE || state == IBV_QPS_ERR;
}

int ferroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct ferroce_qp *qp = to_fqp(ibqp);
	struct ferroce_wq *sq = &qp->sq;
	uint16_t pi;
	int ret = 0;

	pthread_spin_lock(&sq->lock);
	pi = sq->pi;
	if (!ferroce_can_post_send(ibqp->state)) {
		ret = EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (ferroce_wq_full(sq, pi)) {
			ret = ENOMEM;
			break;
		}
		ret = -ferroce_build_send_wqe(qp, ferroce_wqe(sq, pi), wr);
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

int ferroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct ferroce_qp *qp = to_fqp(ibqp);
	struct ferroce_wq *rq = &qp->rq;
	struct ferroce_rq_wqe_hdr *hdr;
	uint16_t pi;
	int ret = 0;

	pthread_spin_lock(&rq->lock);
	pi = rq->pi;
	/* No RQ (max_recv_wr was 0), or a QP that cannot receive yet */
	if (!rq->depth || ibqp->state == IBV_QPS_RESET) {
		ret = EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (ferroce_wq_full(rq, pi)) {
			ret = ENOMEM;
			break;
		}
		hdr = ferroce_wqe(rq, pi);
		memset(hdr, 0, sizeof(*hdr));
		hdr->wr_id = htole64(wr->wr_id);
		hdr->num_sge = wr->num_sge;
		ferroce_set_sges((struct ferroce_sge *)(hdr + 1), wr->sg_list,
				 wr->num_sge);
		pi++;
	}
	if (pi != rq->pi) {
		rq->pi = pi;
		ferroce_ring(rq, qp->qpn, pi);
	}
out:
	if (ret)
		*bad_wr = wr;
	pthread_spin_unlock(&rq->lock);
	return ret;
}
