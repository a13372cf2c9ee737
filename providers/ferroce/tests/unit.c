// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libferroce unit test: queue sizing, CQE phase/polling, WQE building and
 * doorbell values, SRQ posting against a record the test writes as the
 * device, against fake queues in memory (no device, no kernel); and the
 * provider's control path against a fake kernel of the ABI's first release
 * (test_old_driver, and the SRQ commands of test_srq_create) and an
 * imported context (test_import). Built and run
 * by "make provider-check", also with ThreadSanitizer (ferroce-unit-tsan),
 * which reports any data race test_threads, test_srq_threads or
 * test_srq_resize_threads provokes.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../ferroce.h"

/* alloc_context and the device ops are static: the test takes them whole. */
#include "../ferroce.c"

static int failures;

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #cond);		\
			failures++;					\
		}							\
	} while (0)

static void test_sizing(void)
{
	CHECK(ferroce_cq_depth(1) == 2);
	CHECK(ferroce_cq_depth(2) == 2);
	CHECK(ferroce_cq_depth(3) == 4);
	CHECK(ferroce_cq_depth(4) == 4);
	CHECK(ferroce_cq_depth(5) == 8);
	CHECK(ferroce_cq_depth(1023) == 1024);
	CHECK(ferroce_cq_depth(1024) == 1024);
	CHECK(ferroce_cq_depth(65536) == 65536);

	/* 64 + max(sge * 16, inline) <= stride, stride >= 128 */
	CHECK(ferroce_sq_shift(0, 0) == 7);
	CHECK(ferroce_sq_shift(4, 0) == 7);
	CHECK(ferroce_sq_shift(5, 0) == 8);
	CHECK(ferroce_sq_shift(1, 64) == 7);
	CHECK(ferroce_sq_shift(1, 65) == 8);
	CHECK(ferroce_sq_shift(16, 256) == 9);
	CHECK(ferroce_sq_shift(60, 0) == 10);
	CHECK(ferroce_sq_shift(61, 0) == -EINVAL);
	CHECK(ferroce_sq_shift(1, 961) == -EINVAL);

	/* 16 + sge * 16 rounded to a power of two >= 32 */
	CHECK(ferroce_rq_shift(0) == 5);
	CHECK(ferroce_rq_shift(1) == 5);
	CHECK(ferroce_rq_shift(2) == 6);
	CHECK(ferroce_rq_shift(3) == 6);
	CHECK(ferroce_rq_shift(4) == 7);
	CHECK(ferroce_rq_shift(16) == 9);
	CHECK(ferroce_rq_shift(63) == 10);
	CHECK(ferroce_rq_shift(64) == -EINVAL);
}

struct fake {
	struct ferroce_context *ctx;
	struct ferroce_cq cq;
	struct ferroce_qp qp;
	struct ferroce_cq_dbrec cq_dbrec;
	struct ferroce_qp_dbrec sq_dbrec;
	struct ferroce_qp_dbrec rq_dbrec;
	uint64_t db_page[FERROCE_DB_PAGE_SIZE / 8];
};

static void fake_init(struct fake *f, uint32_t cq_depth, uint32_t sq_depth)
{
	memset(f, 0, sizeof(*f));
	f->ctx = calloc(1, sizeof(*f->ctx));
	f->ctx->db = f->db_page;

	f->cq.vcq.cq.context = &f->ctx->ibv_ctx.context;
	f->cq.depth = cq_depth;
	f->cq.log_depth = ffs(cq_depth) - 1;
	f->cq.buf = calloc(cq_depth, sizeof(struct ferroce_cqe));
	f->cq.dbrec = &f->cq_dbrec;
	f->cq.db = (uint8_t *)f->db_page + FERROCE_DB_CQ;
	f->cq.cqn = 5;
	pthread_spin_init(&f->cq.lock, PTHREAD_PROCESS_PRIVATE);

	f->qp.vqp.qp.context = &f->ctx->ibv_ctx.context;
	f->qp.vqp.qp.qp_type = IBV_QPT_RC;
	f->qp.vqp.qp.state = IBV_QPS_RTS;
	f->qp.qpn = 0x123;
	f->qp.max_inline = 64;
	f->qp.sq.depth = sq_depth;
	f->qp.sq.shift = 7;
	f->qp.sq.max_sge = 4;
	f->qp.sq.buf = calloc(sq_depth, 128);
	f->qp.sq.dbrec = &f->sq_dbrec;
	f->qp.sq.db = (uint8_t *)f->db_page + FERROCE_DB_SQ;
	pthread_spin_init(&f->qp.sq.lock, PTHREAD_PROCESS_PRIVATE);
	f->qp.rq.depth = 4;
	f->qp.rq.shift = 5;
	f->qp.rq.max_sge = 1;
	f->qp.rq.buf = calloc(4, 32);
	f->qp.rq.dbrec = &f->rq_dbrec;
	f->qp.rq.db = (uint8_t *)f->db_page + FERROCE_DB_RQ;
	pthread_spin_init(&f->qp.rq.lock, PTHREAD_PROCESS_PRIVATE);

	/* The QP table entry create_qp would add */
	f->ctx->qp_table[0].table = calloc(FERROCE_QP_TABLE_SIZE,
					   sizeof(struct ferroce_qp *));
	f->ctx->qp_table[0].table[f->qp.qpn] = &f->qp;
	f->ctx->qp_table[0].refcnt = 1;
}

static void fake_fini(struct fake *f)
{
	free(f->cq.buf);
	free(f->qp.sq.buf);
	free(f->qp.rq.buf);
	free(f->ctx->qp_table[0].table);
	free(f->ctx);
}

/* The device's side: write CQE number pi with the phase rule. */
static void device_cqe(struct fake *f, uint32_t pi, uint64_t wr_id,
		       uint8_t opcode, uint16_t wqe_idx)
{
	struct ferroce_cqe *cqe = &f->cq.buf[pi & (f->cq.depth - 1)];

	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = htole64(wr_id);
	cqe->qpn = htole32(f->qp.qpn);
	cqe->opcode = opcode;
	cqe->byte_len = htole32(100);
	cqe->wqe_idx = htole16(wqe_idx);
	cqe->owner = ((pi >> f->cq.log_depth) & 1) ^ 1;
}

static void test_poll(void)
{
	struct ibv_wc wc[4];
	struct fake f;
	uint32_t pi;

	fake_init(&f, 4, 8);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 0);

	/* Three passes over a 4-deep ring, phase flips on every pass. */
	for (pi = 0; pi < 12; pi++) {
		device_cqe(&f, pi, 1000 + pi, IBV_WC_SEND, pi);
		CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 1);
		CHECK(wc[0].wr_id == 1000 + pi);
		CHECK(wc[0].opcode == IBV_WC_SEND);
		CHECK(wc[0].status == IBV_WC_SUCCESS);
		CHECK(wc[0].qp_num == 0x123);
		CHECK(wc[0].byte_len == 100);
		CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 0);
		CHECK(le32toh(f.cq_dbrec.ci) == pi + 1);
	}

	/* A batch, polled in two calls */
	for (pi = 12; pi < 15; pi++)
		device_cqe(&f, pi, pi, IBV_WC_RECV, pi);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 2, wc) == 2);
	CHECK(wc[0].wr_id == 12 && wc[1].wr_id == 13);
	CHECK(wc[0].opcode == IBV_WC_RECV);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 1);
	CHECK(wc[0].wr_id == 14);
	CHECK(le32toh(f.cq_dbrec.ci) == 15);

	/* Arming names cqn, ci, cmd and arm_sn */
	ferroce_req_notify_cq(&f.cq.vcq.cq, 0);
	CHECK(le64toh(f.db_page[FERROCE_DB_CQ / 8]) ==
	      FERROCE_DB_CQ_VAL(5, 15, FERROCE_CQ_CMD_ARM_NEXT, 0));
	ferroce_cq_event(&f.cq.vcq.cq);
	ferroce_req_notify_cq(&f.cq.vcq.cq, 1);
	CHECK(le64toh(f.db_page[FERROCE_DB_CQ / 8]) ==
	      FERROCE_DB_CQ_VAL(5, 15, FERROCE_CQ_CMD_ARM_SOLICITED, 1));
	fake_fini(&f);
}

/* The extended CQ: start/next/end poll and the read_* callbacks. */
static void test_poll_ex(void)
{
	struct ibv_poll_cq_attr attr = {};
	struct ibv_wc wc[1];
	struct ibv_cq_ex *ex;
	struct fake f;
	uint32_t pi;

	fake_init(&f, 4, 8);
	ex = &f.cq.vcq.cq_ex;
	ferroce_cq_set_ex_ops(&f.cq, IBV_WC_EX_WITH_BYTE_LEN |
			      IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_IMM);
	CHECK(ex->read_byte_len && ex->read_qp_num && ex->read_imm_data);
	CHECK(!ex->read_src_qp && !ex->read_slid);
	CHECK(ibv_start_poll(ex, &attr) == ENOENT);

	/* Two batches of three, across the ring's wrap (phase flip). */
	for (pi = 0; pi < 6; pi += 3) {
		device_cqe(&f, pi, 500 + pi, IBV_WC_SEND, pi);
		device_cqe(&f, pi + 1, 500 + pi + 1, IBV_WC_RECV, 0);
		f.cq.buf[(pi + 1) & 3].flags = FERROCE_CQE_WITH_IMM;
		f.cq.buf[(pi + 1) & 3].imm_data = htobe32(0x1234);
		device_cqe(&f, pi + 2, 500 + pi + 2, IBV_WC_RDMA_WRITE, pi + 1);
		f.cq.buf[(pi + 2) & 3].status = IBV_WC_REM_ACCESS_ERR;

		CHECK(ibv_start_poll(ex, &attr) == 0);
		CHECK(ex->wr_id == 500 + pi && ex->status == IBV_WC_SUCCESS);
		CHECK(ibv_wc_read_opcode(ex) == IBV_WC_SEND);
		CHECK(ibv_wc_read_byte_len(ex) == 100);
		CHECK(ibv_wc_read_qp_num(ex) == 0x123);
		CHECK(ibv_wc_read_wc_flags(ex) == 0);
		CHECK(ibv_next_poll(ex) == 0);
		CHECK(ex->wr_id == 500 + pi + 1);
		CHECK(ibv_wc_read_opcode(ex) == IBV_WC_RECV);
		CHECK(ibv_wc_read_wc_flags(ex) == IBV_WC_WITH_IMM);
		CHECK(ibv_wc_read_imm_data(ex) == htobe32(0x1234));
		CHECK(ibv_next_poll(ex) == 0);
		CHECK(ex->status == IBV_WC_REM_ACCESS_ERR);
		CHECK(ibv_next_poll(ex) == ENOENT);
		ibv_end_poll(ex);
		CHECK(f.cq.ci == pi + 3);
		CHECK(le32toh(f.cq_dbrec.ci) == pi + 3);
		/* The send CQEs retired the SQ up to their WQE index. */
		CHECK(f.qp.sq.ci == pi + 2);
		CHECK(ibv_start_poll(ex, &attr) == ENOENT);
	}

	/* Stopping before the end consumes only what was read. */
	device_cqe(&f, 6, 1, IBV_WC_SEND, 6);
	device_cqe(&f, 7, 2, IBV_WC_SEND, 7);
	CHECK(ibv_start_poll(ex, &attr) == 0 && ex->wr_id == 1);
	ibv_end_poll(ex);
	CHECK(le32toh(f.cq_dbrec.ci) == 7);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 1, wc) == 1 && wc[0].wr_id == 2);

	/* A poll attribute this provider does not know */
	attr.comp_mask = 1;
	CHECK(ibv_start_poll(ex, &attr) == EINVAL);
	fake_fini(&f);
}

/* The extended QP: ibv_wr_* builds the same WQEs as ibv_post_send. */
static void test_wr(void)
{
	struct ibv_sge sg[5] = { { .addr = 0x1000, .length = 64, .lkey = 0x100 } };
	char payload[80] = "inline payload";
	struct ferroce_sq_wqe_atomic *atomic;
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_sge *sge;
	struct ibv_qp_ex *ex;
	struct ibv_wc wc[1];
	struct fake f;

	fake_init(&f, 4, 4);
	ex = &f.qp.vqp.qp_ex;
	ferroce_qp_set_ex_ops(&f.qp, IBV_QP_EX_WITH_RDMA_WRITE |
			      IBV_QP_EX_WITH_SEND_WITH_IMM |
			      IBV_QP_EX_WITH_SEND |
			      IBV_QP_EX_WITH_RDMA_READ |
			      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	CHECK(ibv_qp_to_qp_ex(&f.qp.vqp.qp) == ex);
	CHECK(ex->wr_send && ex->wr_rdma_read && ex->wr_atomic_fetch_add);
	CHECK(!ex->wr_rdma_write_imm && !ex->wr_atomic_cmp_swp &&
	      !ex->wr_set_ud_addr);

	/* Two WQEs, one doorbell */
	ibv_wr_start(ex);
	ex->wr_id = 42;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ex, 0x200, 0xabc000);
	ibv_wr_set_sge(ex, 0x100, 0x1000, 64);
	ex->wr_id = 43;
	ex->wr_flags = IBV_SEND_INLINE | IBV_SEND_SOLICITED;
	ibv_wr_send_imm(ex, htobe32(0xdeadbeef));
	ibv_wr_set_inline_data(ex, payload, 15);
	CHECK(le32toh(f.sq_dbrec.pi) == 0);
	CHECK(ibv_wr_complete(ex) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 2);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 2));
	hdr = f.qp.sq.buf;
	rdma = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	sge = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 42);
	CHECK(hdr->opcode == FERROCE_WR_RDMA_WRITE);
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED && hdr->num_sge == 1);
	CHECK(le64toh(rdma->remote_addr) == 0xabc000);
	CHECK(le32toh(rdma->rkey) == 0x200);
	CHECK(le64toh(sge->addr) == 0x1000 && le32toh(sge->length) == 64 &&
	      le32toh(sge->lkey) == 0x100);
	hdr = (void *)((uint8_t *)f.qp.sq.buf + 128);
	CHECK(le64toh(hdr->wr_id) == 43);
	CHECK(hdr->opcode == FERROCE_WR_SEND_IMM);
	CHECK(hdr->flags == (FERROCE_WQE_INLINE | FERROCE_WQE_SOLICITED));
	CHECK(hdr->num_sge == 0 && le32toh(hdr->inline_len) == 15);
	CHECK(hdr->imm_data == htobe32(0xdeadbeef));
	CHECK(!memcmp((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET, payload, 15));

	/* Any failed call discards the whole batch: nothing is rung. */
	ex->wr_flags = 0;
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_set_sge(ex, 0x100, 0x1000, 64);
	ibv_wr_send(ex);
	ibv_wr_set_sge_list(ex, 5, sg);		/* max_sge is 4 */
	CHECK(ibv_wr_complete(ex) == EINVAL);
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_set_inline_data(ex, payload, 65);	/* max_inline is 64 */
	CHECK(ibv_wr_complete(ex) == EINVAL);
	ibv_wr_start(ex);
	ibv_wr_rdma_read(ex, 0x200, 0xabc000);
	ibv_wr_set_inline_data(ex, payload, 8);
	CHECK(ibv_wr_complete(ex) == EINVAL);
	ibv_wr_start(ex);
	ibv_wr_atomic_fetch_add(ex, 0x200, 0xabc000, 5);
	ibv_wr_set_sge(ex, 0x100, 0x1000, 4);	/* atomics take 8 bytes */
	CHECK(ibv_wr_complete(ex) == EINVAL);
	ibv_wr_start(ex);
	ex->wr_flags = IBV_SEND_IP_CSUM;
	ibv_wr_send(ex);
	CHECK(ibv_wr_complete(ex) == EINVAL);
	ex->wr_flags = 0;
	/* Queue full: 2 of 4 slots left, the third WQE fails the batch */
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_send(ex);
	ibv_wr_send(ex);
	CHECK(ibv_wr_complete(ex) == ENOMEM);
	/* Abort: discarded, and the lock is free again */
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_abort(ex);
	CHECK(le32toh(f.sq_dbrec.pi) == 2 && f.qp.sq.pi == 2);

	/* A fetch-and-add, in the slot after the discarded ones */
	ibv_wr_start(ex);
	ex->wr_id = 44;
	ibv_wr_atomic_fetch_add(ex, 0x300, 0xdef000, 5);
	ibv_wr_set_sge(ex, 0x100, 0x2000, 8);
	CHECK(ibv_wr_complete(ex) == 0);
	hdr = (void *)((uint8_t *)f.qp.sq.buf + 2 * 128);
	atomic = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 44);
	CHECK(hdr->opcode == FERROCE_WR_ATOMIC_FETCH_ADD && hdr->num_sge == 1);
	CHECK(le64toh(atomic->remote_addr) == 0xdef000);
	CHECK(le32toh(atomic->rkey) == 0x300);
	CHECK(le64toh(atomic->compare_add) == 5 && atomic->swap == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 3);

	/* Completions free the ring for more */
	device_cqe(&f, 0, 44, IBV_WC_FETCH_ADD, 2);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 1, wc) == 1);
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_send(ex);
	ibv_wr_send(ex);
	CHECK(ibv_wr_complete(ex) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 6);

	/* Not in a state that sends */
	f.qp.vqp.qp.state = IBV_QPS_INIT;
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	CHECK(ibv_wr_complete(ex) == EINVAL);
	CHECK(le32toh(f.sq_dbrec.pi) == 6);
	fake_fini(&f);
}

/* Destroying/resetting a QP drops its CQEs, keeping the others in order. */
static void test_clean(void)
{
	static const uint32_t qpns[] = { 7, 0x123, 7, 7, 0x123, 7 };
	struct ibv_wc wc[8];
	struct fake f;
	uint32_t pi;
	int i, n;

	fake_init(&f, 8, 8);
	/* Start near the end of the first pass so the batch wraps. */
	for (pi = 0; pi < 5; pi++)
		device_cqe(&f, pi, pi, IBV_WC_SEND, pi);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 8, wc) == 5);
	for (i = 0; i < 6; i++) {
		device_cqe(&f, 5 + i, 100 + i, IBV_WC_RECV, i);
		f.cq.buf[(5 + i) & 7].qpn = htole32(qpns[i]);
	}
	pthread_spin_lock(&f.cq.lock);
	ferroce_cq_clean(&f.cq, 7);
	pthread_spin_unlock(&f.cq.lock);
	CHECK(f.cq.ci == 9);
	CHECK(le32toh(f.cq_dbrec.ci) == 9);
	n = ferroce_poll_cq(&f.cq.vcq.cq, 8, wc);
	CHECK(n == 2);
	CHECK(wc[0].wr_id == 101 && wc[1].wr_id == 104);
	CHECK(wc[0].qp_num == 0x123 && wc[1].qp_num == 0x123);
	/* The ring goes on: the next CQE is found at its index. */
	device_cqe(&f, 11, 200, IBV_WC_SEND, 0);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 8, wc) == 1 && wc[0].wr_id == 200);
	fake_fini(&f);
}

static void test_post(void)
{
	struct ibv_send_wr wr = {}, wr2, w3, *bad = NULL;
	struct ibv_recv_wr rwr = {}, *rbad = NULL;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sge *sge;
	struct ibv_sge sg[5] = {};
	char payload[80] = "inline payload";
	struct ibv_wc wc[1];
	struct fake f;

	fake_init(&f, 4, 4);
	sg[0].addr = 0x1000;
	sg[0].length = 64;
	sg[0].lkey = 0x100;

	/* RDMA WRITE, signaled */
	wr.wr_id = 42;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = sg;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = 0xabc000;
	wr.wr.rdma.rkey = 0x200;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == 0);
	hdr = f.qp.sq.buf;
	rdma = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	sge = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 42);
	CHECK(hdr->opcode == FERROCE_WR_RDMA_WRITE);
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED);
	CHECK(hdr->num_sge == 1);
	CHECK(le64toh(rdma->remote_addr) == 0xabc000);
	CHECK(le32toh(rdma->rkey) == 0x200);
	CHECK(le64toh(sge->addr) == 0x1000 && le32toh(sge->length) == 64 &&
	      le32toh(sge->lkey) == 0x100);
	CHECK(le32toh(f.sq_dbrec.pi) == 1);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 1));

	/* Inline SEND with immediate, solicited */
	sg[1].addr = (uintptr_t)payload;
	sg[1].length = 15;
	wr.wr_id = 43;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SOLICITED;
	wr.sg_list = &sg[1];
	wr.imm_data = htobe32(0xdeadbeef);
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == 0);
	hdr = (void *)((uint8_t *)f.qp.sq.buf + 128);
	CHECK(hdr->opcode == FERROCE_WR_SEND_IMM);
	CHECK(hdr->flags == (FERROCE_WQE_INLINE | FERROCE_WQE_SOLICITED));
	CHECK(hdr->num_sge == 0 && le32toh(hdr->inline_len) == 15);
	CHECK(hdr->imm_data == htobe32(0xdeadbeef));
	CHECK(!memcmp((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET, payload, 15));

	/* Bad input: too many SGEs, inline too large, READ inline, opcode */
	wr.send_flags = 0;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sg;
	wr.num_sge = 5;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	CHECK(bad == &wr);
	sg[1].length = 65;
	wr.sg_list = &sg[1];
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	wr.opcode = IBV_WR_RDMA_READ;
	sg[1].length = 8;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	wr.send_flags = 0;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	CHECK(le32toh(f.sq_dbrec.pi) == 2);

	/* Queue full: 2 more fit in the 4-deep SQ, the 3rd of a chain fails */
	wr.opcode = IBV_WR_SEND;
	wr2 = wr;
	w3 = wr;
	wr.next = &wr2;
	wr2.next = &w3;
	w3.next = NULL;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == ENOMEM);
	CHECK(bad == &w3);
	CHECK(le32toh(f.sq_dbrec.pi) == 4);

	/* A CQE for WQE 2 retires WQEs 0..2: room for 3 again */
	device_cqe(&f, 0, 0, IBV_WC_SEND, 2);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 1, wc) == 1);
	CHECK(f.qp.sq.ci == 3);
	w3.next = &wr;
	wr.next = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr2, &bad) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 7);
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == ENOMEM);

	/* Wrong state */
	f.qp.vqp.qp.state = IBV_QPS_INIT;
	wr.next = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);

	/* Receive */
	rwr.wr_id = 7;
	rwr.sg_list = sg;
	rwr.num_sge = 1;
	/* ... in RTS: the record only, no doorbell */
	CHECK(ferroce_post_recv(&f.qp.vqp.qp, &rwr, &rbad) == 0);
	CHECK(le32toh(f.rq_dbrec.pi) == 1);
	CHECK(f.db_page[FERROCE_DB_RQ / 8] == 0);
	/* ... after an error completion of the QP: rung (the device flushes) */
	device_cqe(&f, 1, 0, IBV_WC_SEND, 3);
	f.cq.buf[1].status = IBV_WC_REM_ACCESS_ERR;
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 1, wc) == 1);
	CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
	CHECK(ferroce_post_recv(&f.qp.vqp.qp, &rwr, &rbad) == 0);
	CHECK(le32toh(f.rq_dbrec.pi) == 2);
	CHECK(le64toh(f.db_page[FERROCE_DB_RQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 2));
	rwr.num_sge = 2;
	CHECK(ferroce_post_recv(&f.qp.vqp.qp, &rwr, &rbad) == EINVAL);
	CHECK(rbad == &rwr);
	fake_fini(&f);
}

/*
 * Threads as an application uses them: one posts sends on a 4-deep SQ,
 * another plays the device (a CQE per posted WQE) and polls the CQ, which
 * retires the WQEs (sq.ci), while a third creates and destroys another QP
 * in the same QP table bucket. Run under ThreadSanitizer any unsynchronised
 * access among them is reported.
 */
#define THREAD_SENDS 20000

struct threads {
	struct fake f;
	atomic_uint posted;
	atomic_bool done;
	unsigned int polled;
};

static void *poster(void *arg)
{
	struct threads *t = arg;
	struct ibv_send_wr wr = {}, *bad;
	unsigned int i;
	int ret;

	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	for (i = 0; i < THREAD_SENDS; i++) {
		wr.wr_id = i;
		while ((ret = ferroce_post_send(&t->f.qp.vqp.qp, &wr, &bad)) ==
		       ENOMEM)
			;
		if (ret) {
			CHECK(ret == 0);
			break;
		}
		atomic_store(&t->posted, i + 1);
	}
	return NULL;
}

static void *device_and_poller(void *arg)
{
	struct threads *t = arg;
	unsigned int written = 0;
	struct ibv_wc wc[2];
	int n, i;

	while (t->polled < THREAD_SENDS) {
		if (written < atomic_load(&t->posted) &&
		    written - t->polled < t->f.cq.depth) {
			device_cqe(&t->f, written, written, IBV_WC_SEND,
				   (uint16_t)written);
			written++;
		}
		n = ferroce_poll_cq(&t->f.cq.vcq.cq, 2, wc);
		for (i = 0; i < n; i++)
			CHECK(wc[i].wr_id == t->polled + i);
		t->polled += n;
	}
	return NULL;
}

static void *table_churn(void *arg)
{
	struct threads *t = arg;
	struct ferroce_context *ctx = t->f.ctx;
	struct ferroce_qp other;

	while (!atomic_load(&t->done)) {
		pthread_mutex_lock(&ctx->qp_table_mutex);
		ctx->qp_table[0].table[0x124] = &other;
		ctx->qp_table[0].refcnt++;
		pthread_mutex_unlock(&ctx->qp_table_mutex);
		pthread_mutex_lock(&ctx->qp_table_mutex);
		ctx->qp_table[0].table[0x124] = NULL;
		ctx->qp_table[0].refcnt--;
		pthread_mutex_unlock(&ctx->qp_table_mutex);
	}
	return NULL;
}

static void test_threads(void)
{
	struct threads t = {};
	pthread_t p, d, c;

	fake_init(&t.f, 4, 4);
	CHECK(pthread_create(&c, NULL, table_churn, &t) == 0);
	CHECK(pthread_create(&d, NULL, device_and_poller, &t) == 0);
	CHECK(pthread_create(&p, NULL, poster, &t) == 0);
	pthread_join(p, NULL);
	pthread_join(d, NULL);
	atomic_store(&t.done, true);
	pthread_join(c, NULL);
	CHECK(t.polled == THREAD_SENDS);
	CHECK(t.f.qp.sq.pi == (uint16_t)THREAD_SENDS);
	fake_fini(&t.f);
}

/*
 * UC QPs (device 1.5): post_send and the ibv_wr_* builders take SEND,
 * SEND_WITH_IMM, RDMA_WRITE and RDMA_WRITE_WITH_IMM only; every other
 * opcode is refused with EINVAL before it reaches the ring, even on a
 * device with atomics, invalidation and memory windows.
 */
static void test_uc_post(void)
{
	static const enum ibv_wr_opcode refused[] = {
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
		IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO,
		IBV_WR_DRIVER1, IBV_WR_ATOMIC_WRITE, IBV_WR_FLUSH,
	};
	static const enum ibv_wr_opcode taken[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM,
	};
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_send_wr wr = {}, *bad;
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ibv_qp_ex *ex;
	uint64_t ops;
	struct fake f;
	size_t i;

	fake_init(&f, 4, 8);
	f.qp.vqp.qp.qp_type = IBV_QPT_UC;
	f.ctx->device_caps = FERROCE_CAP_UC | FERROCE_CAP_ATOMIC |
			     FERROCE_CAP_MEM_MGT_EXT | FERROCE_CAP_MW |
			     FERROCE_CAP_ATOMIC_WRITE | FERROCE_CAP_FLUSH;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = 0xabc000;
	wr.wr.rdma.rkey = 0x200;
	for (i = 0; i < ARRAY_SIZE(refused); i++) {
		wr.opcode = refused[i];
		bad = NULL;
		CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
		CHECK(bad == &wr);
	}
	CHECK(le32toh(f.sq_dbrec.pi) == 0 && f.db_page[FERROCE_DB_SQ / 8] == 0);

	for (i = 0; i < ARRAY_SIZE(taken); i++) {
		wr.wr_id = 60 + i;
		wr.opcode = taken[i];
		wr.imm_data = htobe32(0x1000 + i);
		CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == 0);
		hdr = (void *)((uint8_t *)f.qp.sq.buf + 128 * i);
		rdma = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
		CHECK(le64toh(hdr->wr_id) == 60 + i);
		CHECK(hdr->opcode == (uint8_t)taken[i]);
		CHECK(hdr->num_sge == 1);
		if (taken[i] == IBV_WR_RDMA_WRITE ||
		    taken[i] == IBV_WR_RDMA_WRITE_WITH_IMM) {
			CHECK(le64toh(rdma->remote_addr) == 0xabc000);
			CHECK(le32toh(rdma->rkey) == 0x200);
		} else {
			/* A SEND's segment is zero, as on RC */
			CHECK(rdma->remote_addr == 0 && rdma->rkey == 0);
		}
		if (taken[i] == IBV_WR_SEND_WITH_IMM ||
		    taken[i] == IBV_WR_RDMA_WRITE_WITH_IMM)
			CHECK(hdr->imm_data == htobe32(0x1000 + i));
		else
			CHECK(hdr->imm_data == 0);
	}
	CHECK(le32toh(f.sq_dbrec.pi) == 4);

	/* The extended QP: the UC operations, and only with CAP_UC */
	ops = ferroce_qp_send_ops(f.ctx, IBV_QPT_UC);
	CHECK(ops == (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
		      IBV_QP_EX_WITH_RDMA_WRITE |
		      IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM));
	ferroce_qp_set_ex_ops(&f.qp, ops);
	ex = &f.qp.vqp.qp_ex;
	CHECK(ex->wr_send && ex->wr_send_imm && ex->wr_rdma_write &&
	      ex->wr_rdma_write_imm);
	CHECK(!ex->wr_rdma_read && !ex->wr_atomic_cmp_swp &&
	      !ex->wr_atomic_fetch_add && !ex->wr_set_ud_addr);
	CHECK(!ex->wr_bind_mw && !ex->wr_local_inv && !ex->wr_send_inv);
	CHECK(!ex->wr_atomic_write && !ex->wr_flush);
	ibv_wr_start(ex);
	ex->wr_id = 70;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(ex, 0x300, 0xdef000, htobe32(0xfeed));
	ibv_wr_set_sge(ex, 0x100, 0x1000, 64);
	CHECK(ibv_wr_complete(ex) == 0);
	hdr = (void *)((uint8_t *)f.qp.sq.buf + 128 * 4);
	rdma = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(hdr->opcode == FERROCE_WR_RDMA_WRITE_IMM);
	CHECK(hdr->imm_data == htobe32(0xfeed));
	CHECK(le64toh(rdma->remote_addr) == 0xdef000 &&
	      le32toh(rdma->rkey) == 0x300);
	CHECK(le32toh(f.sq_dbrec.pi) == 5);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 5));

	f.ctx->device_caps = FERROCE_CAP_ATOMIC;
	CHECK(ferroce_qp_send_ops(f.ctx, IBV_QPT_UC) == 0);
	fake_fini(&f);
}

/*
 * Receive rings: an SRQ is sized as an RQ (power-of-two depth >= max_wr and
 * >= 1, the RQ stride for max_sge), within the context's limits; max_wr and
 * max_sge come back as what the ring holds.
 */
static void test_srq_sizing(void)
{
	struct ferroce_context ctx = { .max_qp_wr = 512, .max_sge = 8 };
	uint32_t wr, sge, depth;
	uint8_t shift;

#define RING(w, s) (wr = (w), sge = (s), depth = 0, shift = 0,		\
		    ferroce_recv_ring_size(&ctx, &wr, &sge, &depth, &shift))
	CHECK(RING(0, 0) == 0);
	CHECK(depth == 1 && shift == 5 && wr == 1 && sge == 1);
	CHECK(RING(1, 1) == 0);
	CHECK(depth == 1 && shift == 5 && wr == 1 && sge == 1);
	CHECK(RING(5, 2) == 0);
	/* 16 + 2 * 16 needs 64 bytes, which hold 3 SGEs */
	CHECK(depth == 8 && shift == 6 && wr == 8 && sge == 3);
	CHECK(RING(100, 4) == 0);
	CHECK(depth == 128 && shift == 7 && wr == 128 && sge == 7);
	CHECK(RING(512, 8) == 0);
	CHECK(depth == 512 && shift == 8 && wr == 512 && sge == 8);
	/* what the stride holds is capped by the device */
	ctx.max_sge = 2;
	CHECK(RING(3, 2) == 0);
	CHECK(depth == 4 && shift == 6 && wr == 4 && sge == 2);
	ctx.max_sge = 8;
	/* beyond the device: max_wr, max_sge, or a depth past max_qp_wr */
	CHECK(RING(513, 1) == -EINVAL);
	CHECK(RING(1, 9) == -EINVAL);
	ctx.max_qp_wr = 1000;
	CHECK(RING(1000, 1) == -EINVAL);
	CHECK(RING(512, 1) == 0 && depth == 512);
	ctx.max_sge = 64;
	CHECK(RING(1, 64) == -EINVAL);	/* more than a 1 KiB stride */
#undef RING
}

/* An SRQ of the fake context with a ring of depth WQEs for max_sge SGEs */
static void fake_srq_init(struct fake *f, struct ferroce_srq *srq,
			  struct ferroce_srq_dbrec *rec, uint32_t depth,
			  uint32_t max_sge)
{
	memset(srq, 0, sizeof(*srq));
	memset(rec, 0, sizeof(*rec));
	srq->vsrq.srq.context = &f->ctx->ibv_ctx.context;
	srq->wq.depth = depth;
	srq->wq.shift = ferroce_rq_shift(max_sge);
	srq->wq.max_sge = max_sge;
	srq->wq.buf = calloc(depth, 1U << srq->wq.shift);
	srq->dbrec = rec;
	srq->srqn = 1;
	pthread_spin_init(&srq->wq.lock, PTHREAD_PROCESS_PRIVATE);
}

/* The device's side: it took n WQEs and writes the new ci to the record. */
static void device_srq_take(struct ferroce_srq_dbrec *rec, unsigned int n)
{
	uint32_t ci = le32toh(__atomic_load_n(&rec->ci, __ATOMIC_RELAXED));

	__atomic_store_n(&rec->ci, htole32((ci + n) & 0xffff),
			 __ATOMIC_RELEASE);
}

static uint32_t srq_rec_pi(struct ferroce_srq_dbrec *rec)
{
	return le32toh(__atomic_load_n(&rec->pi, __ATOMIC_ACQUIRE));
}

static struct ferroce_rq_wqe_hdr *srq_wqe(struct ferroce_srq *srq,
					  uint16_t idx)
{
	return (void *)((uint8_t *)srq->wq.buf +
			((size_t)(idx & (srq->wq.depth - 1)) << srq->wq.shift));
}

/*
 * post_srq_recv: RQ WQEs at pi, pi stored to the record, no doorbell;
 * room is depth - (pi - ci) with ci the one the device wrote to the record,
 * so slots come free when the device takes WQEs, not on completions.
 */
static void test_srq_post(void)
{
	struct ibv_sge sg[3] = {
		{ .addr = 0x1000, .length = 64, .lkey = 0x100 },
		{ .addr = 0x2000, .length = 32, .lkey = 0x200 },
		{ .addr = 0x3000, .length = 16, .lkey = 0x300 },
	};
	struct ibv_recv_wr wr[6] = {}, *bad;
	struct ferroce_rq_wqe_hdr *hdr;
	struct ferroce_srq_dbrec rec;
	struct ferroce_srq srq;
	struct ferroce_sge *sge;
	struct ibv_wc wc[1];
	struct fake f;
	size_t i;

	fake_init(&f, 4, 4);
	fake_srq_init(&f, &srq, &rec, 4, 2);
	CHECK(srq.wq.shift == 6);
	for (i = 0; i < ARRAY_SIZE(wr); i++) {
		wr[i].wr_id = 300 + i;
		wr[i].sg_list = sg;
		wr[i].num_sge = i % 3;
		wr[i].next = i + 1 < ARRAY_SIZE(wr) ? &wr[i + 1] : NULL;
	}

	/* A chain of three */
	wr[2].next = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, wr, &bad) == 0);
	CHECK(srq_rec_pi(&rec) == 3 && srq.wq.pi == 3);
	for (i = 0; i < 3; i++) {
		hdr = srq_wqe(&srq, i);
		sge = (struct ferroce_sge *)(hdr + 1);
		CHECK(le64toh(hdr->wr_id) == 300 + i);
		CHECK(hdr->num_sge == i % 3);
		if (i % 3)
			CHECK(le64toh(sge[0].addr) == 0x1000 &&
			      le32toh(sge[0].length) == 64 &&
			      le32toh(sge[0].lkey) == 0x100);
		if (i % 3 == 2)
			CHECK(le64toh(sge[1].addr) == 0x2000 &&
			      le32toh(sge[1].lkey) == 0x200);
	}
	/* No doorbell of any kind */
	for (i = 0; i < ARRAY_SIZE(f.db_page); i++)
		CHECK(f.db_page[i] == 0);

	/* Full: one slot left, the second WR of the chain fails */
	wr[2].next = &wr[3];
	wr[4].next = NULL;
	bad = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[3], &bad) == ENOMEM);
	CHECK(bad == &wr[4]);
	CHECK(srq_rec_pi(&rec) == 4 && le64toh(srq_wqe(&srq, 3)->wr_id) == 303);
	bad = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[4], &bad) == ENOMEM);
	CHECK(bad == &wr[4] && srq_rec_pi(&rec) == 4);

	/* Completions free nothing: the device's ci does. */
	device_cqe(&f, 0, 300, IBV_WC_RECV, 0);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 1, wc) == 1 && wc[0].wr_id == 300);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[4], &bad) == ENOMEM);
	/* The device took two: two slots, 0 and 1, are free again */
	device_srq_take(&rec, 2);
	wr[5].next = NULL;
	wr[4].next = &wr[5];
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[4], &bad) == 0);
	CHECK(srq_rec_pi(&rec) == 6 && srq.wq.pi == 6);
	CHECK(le64toh(srq_wqe(&srq, 4)->wr_id) == 304);
	CHECK(le64toh(srq_wqe(&srq, 5)->wr_id) == 305);
	CHECK(le64toh(srq_wqe(&srq, 2)->wr_id) == 302);	/* not overwritten */
	wr[4].next = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[4], &bad) == ENOMEM);

	/* Too many SGEs (max_sge 2), or a negative count: EINVAL, nothing posted */
	device_srq_take(&rec, 1);
	wr[0].num_sge = 3;
	wr[0].next = NULL;
	bad = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[0], &bad) == EINVAL);
	CHECK(bad == &wr[0] && srq_rec_pi(&rec) == 6);
	wr[0].num_sge = -1;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[0], &bad) == EINVAL);
	/* ... also behind a good one, which is posted */
	wr[0].num_sge = 3;
	wr[1].next = &wr[0];
	bad = NULL;
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == EINVAL);
	CHECK(bad == &wr[0] && srq_rec_pi(&rec) == 7);
	CHECK(le64toh(srq_wqe(&srq, 6)->wr_id) == 301);

	/* ci is bits 15:0 of the record; pi - ci wraps at 16 bits */
	__atomic_store_n(&rec.ci, htole32(0xabcd0000 | 7), __ATOMIC_RELEASE);
	wr[1].next = NULL;
	for (i = 0; i < 4; i++)
		CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == 0);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == ENOMEM);
	CHECK(srq_rec_pi(&rec) == 11);
	srq.wq.pi = 0xfffe;
	__atomic_store_n(&rec.ci, htole32(0xfffe), __ATOMIC_RELEASE);
	for (i = 0; i < 4; i++) {
		wr[1].wr_id = 400 + i;
		CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == 0);
	}
	CHECK(srq_rec_pi(&rec) == 2);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == ENOMEM);
	CHECK(le64toh(srq_wqe(&srq, 0xfffe)->wr_id) == 400);
	CHECK(le64toh(srq_wqe(&srq, 1)->wr_id) == 403);
	device_srq_take(&rec, 3);	/* ci 0xfffe -> 1 */
	CHECK(le32toh(rec.ci) == 1);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == 0);
	CHECK(srq_rec_pi(&rec) == 3);

	/* A record ci more than depth behind pi (not the device's): no room */
	__atomic_store_n(&rec.ci, htole32(0x8000), __ATOMIC_RELEASE);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &wr[1], &bad) == ENOMEM);
	CHECK(srq_rec_pi(&rec) == 3);

	pthread_spin_destroy(&srq.wq.lock);
	free(srq.wq.buf);
	fake_fini(&f);
}

/*
 * A QP on an SRQ has no RQ: post_recv is refused; its receive CQEs (with
 * the SRQ's wqe_idx, flushed ones too) are polled with the wr_id of the
 * CQE and touch no RQ index, while its send CQEs retire its SQ as usual.
 */
static void test_srq_poll(void)
{
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 };
	struct ibv_poll_cq_attr attr = {};
	struct ferroce_srq_dbrec rec;
	struct ibv_recv_wr *rbad;
	struct ferroce_srq srq;
	struct ibv_wc wc[4];
	struct ibv_cq_ex *ex;
	struct fake f;

	fake_init(&f, 8, 8);
	fake_srq_init(&f, &srq, &rec, 16, 1);
	/* What create_qp makes of a QP on an SRQ: no RQ of its own */
	free(f.qp.rq.buf);
	f.qp.rq.buf = NULL;
	f.qp.rq.dbrec = NULL;
	f.qp.rq.depth = 0;
	f.qp.rq.shift = 0;
	f.qp.rq.max_sge = 0;
	f.qp.vqp.qp.srq = &srq.vsrq.srq;

	rbad = NULL;
	CHECK(ferroce_post_recv(&f.qp.vqp.qp, &rwr, &rbad) == EINVAL);
	CHECK(rbad == &rwr);
	CHECK(f.db_page[FERROCE_DB_RQ / 8] == 0);
	CHECK(ferroce_post_srq_recv(&srq.vsrq.srq, &rwr, &rbad) == 0);

	/* SRQ indices 13, 9 (any order), a flushed one, and a send */
	device_cqe(&f, 0, 900, IBV_WC_RECV, 13);
	device_cqe(&f, 1, 901, IBV_WC_RECV_RDMA_WITH_IMM, 9);
	f.cq.buf[1].flags = FERROCE_CQE_WITH_IMM;
	f.cq.buf[1].imm_data = htobe32(0x77);
	device_cqe(&f, 2, 902, IBV_WC_RECV, 10);
	f.cq.buf[2].status = IBV_WC_WR_FLUSH_ERR;
	device_cqe(&f, 3, 903, IBV_WC_SEND, 4);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 4);
	CHECK(wc[0].wr_id == 900 && wc[0].opcode == IBV_WC_RECV &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].qp_num == 0x123 &&
	      wc[0].byte_len == 100);
	CHECK(wc[1].wr_id == 901 && wc[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	      wc[1].wc_flags == IBV_WC_WITH_IMM && wc[1].imm_data == htobe32(0x77));
	CHECK(wc[2].wr_id == 902 && wc[2].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(wc[3].wr_id == 903 && wc[3].opcode == IBV_WC_SEND);
	CHECK(f.qp.rq.ci == 0 && f.qp.rq.pi == 0);
	CHECK(f.qp.sq.ci == 5);
	/* The SRQ is the device's business: untouched by polling */
	CHECK(srq.wq.pi == 1 && srq_rec_pi(&rec) == 1 && rec.ci == 0);

	/* The extended CQ takes the same way */
	ferroce_cq_set_ex_ops(&f.cq, IBV_WC_EX_WITH_QP_NUM);
	ex = &f.cq.vcq.cq_ex;
	device_cqe(&f, 4, 904, IBV_WC_RECV, 15);
	device_cqe(&f, 5, 905, IBV_WC_RECV, 0);
	CHECK(ibv_start_poll(ex, &attr) == 0);
	CHECK(ex->wr_id == 904 && ibv_wc_read_opcode(ex) == IBV_WC_RECV);
	CHECK(ibv_wc_read_qp_num(ex) == 0x123);
	CHECK(ibv_next_poll(ex) == 0 && ex->wr_id == 905);
	CHECK(ibv_next_poll(ex) == ENOENT);
	ibv_end_poll(ex);
	CHECK(f.qp.rq.ci == 0 && f.qp.sq.ci == 5);
	CHECK(le32toh(f.cq_dbrec.ci) == 6);

	/* Cleaning the QP's CQEs (destroy, reset) needs no RQ either */
	device_cqe(&f, 6, 906, IBV_WC_RECV, 1);
	pthread_spin_lock(&f.cq.lock);
	ferroce_cq_clean(&f.cq, f.qp.qpn);
	pthread_spin_unlock(&f.cq.lock);
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 0);

	pthread_spin_destroy(&srq.wq.lock);
	free(srq.wq.buf);
	fake_fini(&f);
}

/*
 * An application thread posting to a 4-deep SRQ while another plays the
 * device: it takes the WQEs pi shows, in ring order, and writes ci back.
 * Under ThreadSanitizer, the WQEs must be published by the pi store and
 * reused only after the ci load (no race on the ring or the record).
 */
#define SRQ_THREAD_RECVS 20000

struct srq_threads {
	struct fake f;
	struct ferroce_srq srq;
	struct ferroce_srq_dbrec rec;
	unsigned int taken;
};

/* Posts SRQ_THREAD_RECVS receives (wr_id 0, 1, ...), waiting for room. */
static void srq_post_all(struct ferroce_srq *srq)
{
	struct ibv_sge sg = { .addr = 0x1000, .length = 8, .lkey = 1 };
	struct ibv_recv_wr wr = { .sg_list = &sg, .num_sge = 1 }, *bad;
	unsigned int i;
	int ret;

	for (i = 0; i < SRQ_THREAD_RECVS; i++) {
		wr.wr_id = i;
		while ((ret = ferroce_post_srq_recv(&srq->vsrq.srq, &wr,
						    &bad)) == ENOMEM)
			sched_yield();
		if (ret) {
			CHECK(ret == 0);
			break;
		}
	}
}

static void *srq_poster(void *arg)
{
	struct srq_threads *t = arg;

	srq_post_all(&t->srq);
	return NULL;
}

static void *srq_device(void *arg)
{
	struct srq_threads *t = arg;
	struct ferroce_rq_wqe_hdr *hdr;
	uint16_t pi, ci = 0;

	while (t->taken < SRQ_THREAD_RECVS) {
		pi = srq_rec_pi(&t->rec);
		CHECK((uint16_t)(pi - ci) <= t->srq.wq.depth);
		if (pi == ci)
			continue;
		hdr = srq_wqe(&t->srq, ci);
		CHECK(le64toh(hdr->wr_id) == t->taken && hdr->num_sge == 1);
		t->taken++;
		device_srq_take(&t->rec, 1);
		ci++;
	}
	return NULL;
}

static void test_srq_threads(void)
{
	struct srq_threads t = {};
	pthread_t p, d;

	fake_init(&t.f, 4, 4);
	fake_srq_init(&t.f, &t.srq, &t.rec, 4, 1);
	CHECK(pthread_create(&d, NULL, srq_device, &t) == 0);
	CHECK(pthread_create(&p, NULL, srq_poster, &t) == 0);
	pthread_join(p, NULL);
	pthread_join(d, NULL);
	CHECK(t.taken == SRQ_THREAD_RECVS);
	CHECK(srq_rec_pi(&t.rec) == (uint16_t)SRQ_THREAD_RECVS);
	pthread_spin_destroy(&t.srq.wq.lock);
	free(t.srq.wq.buf);
	fake_fini(&t.f);
}

/*
 * A driver of the ABI's first release (ferroce-abi.h as first committed):
 * its responses end where that release's structs ended, and it writes
 * min(offered, its size) bytes, nothing beyond. The ibv_cmd_* below
 * replace libibverbs' for the test binary (the executable's definitions
 * win); they play that driver and check that the provider offered a
 * zero-filled response at least as long as the first release's, so that
 * what an old driver does not write reads as 0.
 */
struct v1_uresp_alloc_ctx {
	__aligned_u64 db_mmap_offset;
	__u32 db_page;
	__u32 device_caps;
	__u32 max_qp_wr;
	__u32 max_sge;
	__u32 max_inline;
	__u32 max_cqe;
};

struct v1_uresp_create_cq {
	__u32 cqn;
	__u32 reserved;
};

struct v1_uresp_create_qp {
	__u32 qpn;
	__u32 max_inline;
};

struct v1_uresp_create_ah {
	__u32 ahn;
	__u32 reserved;
};

/* Today's structs only grew at the end of the first release's. */
#define SAME_FIELD(s, f)						\
	static_assert(offsetof(struct ferroce_##s, f) ==		\
		      offsetof(struct v1_##s, f), #s "." #f " moved")
static_assert(sizeof(struct v1_uresp_alloc_ctx) == 32, "v1 alloc_ctx size");
SAME_FIELD(uresp_alloc_ctx, db_mmap_offset);
SAME_FIELD(uresp_alloc_ctx, db_page);
SAME_FIELD(uresp_alloc_ctx, device_caps);
SAME_FIELD(uresp_alloc_ctx, max_qp_wr);
SAME_FIELD(uresp_alloc_ctx, max_sge);
SAME_FIELD(uresp_alloc_ctx, max_inline);
SAME_FIELD(uresp_alloc_ctx, max_cqe);
static_assert(sizeof(struct v1_uresp_create_cq) == 8, "v1 create_cq size");
SAME_FIELD(uresp_create_cq, cqn);
static_assert(sizeof(struct v1_uresp_create_qp) == 8, "v1 create_qp size");
SAME_FIELD(uresp_create_qp, qpn);
SAME_FIELD(uresp_create_qp, max_inline);
static_assert(sizeof(struct v1_uresp_create_ah) == 8, "v1 create_ah size");
SAME_FIELD(uresp_create_ah, ahn);

static const struct v1_uresp_alloc_ctx v1_ctx = {
	.db_mmap_offset = 0, .db_page = 3, .device_caps = 0,
	.max_qp_wr = 512, .max_sge = 8, .max_inline = 256, .max_cqe = 4096,
};
static const struct v1_uresp_create_cq v1_cq = { .cqn = 77 };
static const struct v1_uresp_create_qp v1_qp = { .qpn = 0x1234, .max_inline = 100 };
static const struct v1_uresp_create_ah v1_ah = { .ahn = 9 };
static int old_driver_calls;
/* what the driver was asked for by the last create_qp */
static struct ferroce_ureq_create_qp qp_req;
static struct ibv_qp_cap qp_cap;

/*
 * The old driver's answer: the provider's driver part of the response
 * (after the core part of core_size bytes) must be zero-filled and hold at
 * least the first release's struct; the first release's bytes are written.
 */
static void old_driver_respond(void *resp, size_t resp_size, size_t core_size,
			       const void *v1, size_t v1_size)
{
	uint8_t *drv = (uint8_t *)resp + core_size;
	size_t i;

	old_driver_calls++;
	CHECK(resp_size >= core_size + v1_size);
	if (resp_size < core_size + v1_size)
		return;
	for (i = 0; i < resp_size - core_size; i++)
		if (drv[i])
			break;
	CHECK(i == resp_size - core_size);
	memcpy(drv, v1, v1_size);
}

int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp, size_t resp_size)
{
	context->context.num_comp_vectors = 1;
	old_driver_respond(resp, resp_size, sizeof(*resp), &v1_ctx, sizeof(v1_ctx));
	return 0;
}

int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size)
{
	cq->context = context;
	cq->channel = channel;
	cq->cqe = cqe;
	old_driver_respond(resp, resp_size, sizeof(*resp), &v1_cq, sizeof(v1_cq));
	return 0;
}

int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags)
{
	cq->cq.context = context;
	cq->cq.cqe = cq_attr->cqe;
	old_driver_respond(resp, resp_size, sizeof(*resp), &v1_cq, sizeof(v1_cq));
	return 0;
}

int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *vqp,
			 struct ibv_qp_init_attr_ex *attr,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
{
	struct ibv_qp *qp = &vqp->qp;

	/* As libibverbs' own: the legacy command takes no other request. */
	if (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		errno = EINVAL;
		return errno;
	}
	qp->context = context;
	qp->pd = attr->pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->qp_type = attr->qp_type;
	qp->qp_num = v1_qp.qpn;
	CHECK(cmd_size == sizeof(struct ferroce_create_qp));
	qp_req = container_of(cmd, struct ferroce_create_qp, ibv_cmd)->drv_payload;
	qp_cap = attr->cap;
	old_driver_respond(resp, resp_size, sizeof(*resp), &v1_qp, sizeof(v1_qp));
	return 0;
}

int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
{
	ah->context = pd->context;
	ah->pd = pd;
	old_driver_respond(resp, resp_size, sizeof(*resp), &v1_ah, sizeof(v1_ah));
	return 0;
}

int ibv_cmd_destroy_cq(struct ibv_cq *cq) { return 0; }

/*
 * resize_cq of a 1.6 driver: the request is kept in cq_resize_req; the
 * driver runs while the CQ's lock is held (cq_resize_locked: nothing is
 * polled meanwhile), calls cq_resize_hook if set (the device, which may
 * still write the old ring), and answers cq_resize_ret or, on success,
 * the switch index cq_resize_switch and, as the driver's capacity, 12345,
 * which libibverbs copies to ibv_cq.cqe and the provider must replace.
 */
static struct ferroce_ureq_resize_cq cq_resize_req;
static int cq_resize_calls, cq_resize_ret;
static uint16_t cq_resize_switch;
static bool cq_resize_locked;
static void (*cq_resize_hook)(struct ferroce_cq *cq,
			      const struct ferroce_ureq_resize_cq *req);

int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size)
{
	struct ferroce_resize_cq_resp *r =
		container_of(resp, struct ferroce_resize_cq_resp, ibv_resp);
	struct ferroce_cq *fcq = to_fcq(cq);

	cq_resize_calls++;
	CHECK(cmd_size == sizeof(struct ferroce_resize_cq));
	CHECK(resp_size == sizeof(struct ferroce_resize_cq_resp));
	cq_resize_req = container_of(cmd, struct ferroce_resize_cq,
				     ibv_cmd)->drv_payload;
	/* the driver's checks */
	CHECK(cq_resize_req.comp_mask == 0);
	CHECK(cqe >= 1 && cq_resize_req.depth >= (uint32_t)cqe);
	CHECK(r->drv_payload.switch_index == 0 && r->drv_payload.comp_mask == 0);
	cq_resize_locked = pthread_spin_trylock(&fcq->lock) == EBUSY;
	if (!cq_resize_locked)
		pthread_spin_unlock(&fcq->lock);
	if (cq_resize_hook)
		cq_resize_hook(fcq, &cq_resize_req);
	if (cq_resize_ret)
		return cq_resize_ret;
	resp->cqe = 12345;
	r->drv_payload.switch_index = cq_resize_switch;
	cq->cqe = resp->cqe;
	return 0;
}
int ibv_cmd_destroy_qp(struct ibv_qp *qp) { return 0; }
int ibv_cmd_destroy_ah(struct ibv_ah *ah) { return 0; }

/*
 * The SRQ commands of a 1.6 driver (the SRQ structs' first release): the
 * request is kept in srq_req, the SRQ is number 0x42, and the core
 * response has sizes of the kernel's own, which libibverbs copies to the
 * caller's attributes and the provider must replace with its ring's.
 */
static const struct ferroce_uresp_create_srq srq_resp = { .srqn = 0x42 };
static struct ferroce_ureq_create_srq srq_req;
static int srq_modify_calls, srq_modify_mask, srq_destroy_ret;
static uint32_t srq_driver_limit;

static void srq_driver_create(struct ibv_pd *pd, struct ibv_srq *srq,
			      struct ibv_srq_attr *attr,
			      const struct ferroce_ureq_create_srq *req,
			      struct ib_uverbs_create_srq_resp *resp,
			      size_t resp_size)
{
	srq->context = pd->context;
	srq->handle = 7;
	srq_req = *req;
	srq_driver_limit = 0;
	resp->max_wr = 1000;
	resp->max_sge = 99;
	attr->max_wr = resp->max_wr;
	attr->max_sge = resp->max_sge;
	old_driver_respond(resp, resp_size, sizeof(*resp), &srq_resp,
			   sizeof(srq_resp));
}

int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{
	CHECK(cmd_size == sizeof(struct ferroce_create_srq));
	srq_driver_create(pd, srq, &attr->attr,
			  &container_of(cmd, struct ferroce_create_srq,
					ibv_cmd)->drv_payload,
			  resp, resp_size);
	return 0;
}

int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size)
{
	CHECK(cmd_size == sizeof(struct ferroce_create_srq_ex));
	CHECK(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_PD);
	CHECK(attr_ex->comp_mask & IBV_SRQ_INIT_ATTR_TYPE &&
	      attr_ex->srq_type == IBV_SRQT_BASIC);
	srq_driver_create(attr_ex->pd, &srq->srq, &attr_ex->attr,
			  &container_of(cmd, struct ferroce_create_srq_ex,
					ibv_cmd)->drv_payload,
			  resp, resp_size);
	srq->srq_type = IBV_SRQT_BASIC;
	return 0;
}

/*
 * modify_srq: with IBV_SRQ_MAX_WR (a resize) the command carries
 * ferroce_ureq_modify_srq, kept in srq_modify_req; without it, no driver
 * data. The driver runs while the SRQ's lock is held (srq_modify_locked:
 * nothing is posted meanwhile), calls srq_modify_hook if set, and answers
 * srq_modify_ret (0: the limit, if given, is armed).
 */
static struct ferroce_ureq_modify_srq srq_modify_req;
static size_t srq_modify_size;
static int srq_modify_ret;
static bool srq_modify_locked;
static void (*srq_modify_hook)(struct ferroce_srq *srq,
			       const struct ferroce_ureq_modify_srq *req);

int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size)
{
	struct ferroce_srq *fsrq = to_fsrq(srq);

	srq_modify_calls++;
	srq_modify_mask = srq_attr_mask;
	srq_modify_size = cmd_size;
	memset(&srq_modify_req, 0, sizeof(srq_modify_req));
	if (srq_attr_mask & IBV_SRQ_MAX_WR) {
		CHECK(cmd_size == sizeof(struct ferroce_modify_srq));
		srq_modify_req = container_of(cmd, struct ferroce_modify_srq,
					      ibv_cmd)->drv_payload;
		CHECK(srq_modify_req.depth >= srq_attr->max_wr);
	} else {
		CHECK(cmd_size == sizeof(*cmd));
	}
	srq_modify_locked = pthread_spin_trylock(&fsrq->wq.lock) == EBUSY;
	if (!srq_modify_locked)
		pthread_spin_unlock(&fsrq->wq.lock);
	if (srq_modify_hook)
		srq_modify_hook(fsrq, &srq_modify_req);
	if (srq_modify_ret)
		return srq_modify_ret;
	if (srq_attr_mask & IBV_SRQ_LIMIT)
		srq_driver_limit = srq_attr->srq_limit;
	return 0;
}

int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size)
{
	srq_attr->max_wr = 12345;
	srq_attr->max_sge = 99;
	srq_attr->srq_limit = srq_driver_limit;
	return 0;
}

int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	return srq_destroy_ret;
}

/*
 * A fake ferroce device as libibverbs makes it: the kernel reported
 * RDMA_DRIVER_FERROCE (the context's uverbs ioctls carry it).
 */
static struct verbs_sysfs_dev fake_sysfs = { .driver_id = RDMA_DRIVER_FERROCE };
#define FAKE_VERBS_DEVICE { .ops = &ferroce_dev_ops, .sysfs = &fake_sysfs }

/*
 * A context of a fake ferroce device, created through the fake commands
 * above. The doorbell page it maps is /dev/zero's shared zeroes; one
 * device reference is held for the test, so freeing the context never
 * drops the last.
 */
static struct verbs_context *old_driver_context(struct verbs_device *vdev)
{
	int fd = open("/dev/zero", O_RDWR);

	CHECK(fd >= 0);
	atomic_store(&vdev->refcount, 1);
	return ferroce_dev_ops.alloc_context(&vdev->device, fd, NULL);
}

/*
 * A new provider on an old driver: context, CQ, QP and AH are created from
 * first-release responses and take their values from them (none from
 * bytes the driver did not write).
 */
static void test_old_driver(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_qp_init_attr qattr = { .qp_type = IBV_QPT_RC };
	struct ibv_ah_attr aattr = { .port_num = 1 };
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_pd pd = {};
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	CHECK(old_driver_calls == 1);
	CHECK(ctx->max_qp_wr == v1_ctx.max_qp_wr);
	CHECK(ctx->max_sge == v1_ctx.max_sge);
	CHECK(ctx->max_inline == v1_ctx.max_inline);
	CHECK(ctx->max_cqe == v1_ctx.max_cqe);
	CHECK(ctx->device_caps == v1_ctx.device_caps);

	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	CHECK(old_driver_calls == 2);
	if (!cq)
		goto out_ctx;
	CHECK(to_fcq(cq)->cqn == v1_cq.cqn);
	CHECK(cq->cqe == 16);

	{
		struct ibv_cq_init_attr_ex ca = {
			.cqe = 10, .wc_flags = IBV_WC_STANDARD_FLAGS,
		};
		struct ibv_cq_ex *ex = ferroce_create_cq_ex(&vctx->context, &ca);

		CHECK(ex);
		CHECK(old_driver_calls == 3);
		if (ex) {
			CHECK(to_fcq_ex(ex)->cqn == v1_cq.cqn);
			CHECK(ex->cqe == 16);
			CHECK(ex->start_poll && ex->read_sl);
			CHECK(ferroce_destroy_cq(ibv_cq_ex_to_cq(ex)) == 0);
		}
		/* Timestamps, overrun-ignoring CQs: not supported, no command */
		ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
		errno = 0;
		CHECK(!ferroce_create_cq_ex(&vctx->context, &ca) && errno == EOPNOTSUPP);
		ca.wc_flags = 0;
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
		ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
		errno = 0;
		CHECK(!ferroce_create_cq_ex(&vctx->context, &ca) && errno == EOPNOTSUPP);
		CHECK(old_driver_calls == 3);
	}

	/* Inline data up to 128 fits the stride; the old driver grants 100. */
	pd.context = &vctx->context;
	qattr.send_cq = cq;
	qattr.recv_cq = cq;
	qattr.cap = (struct ibv_qp_cap){ .max_send_wr = 8, .max_recv_wr = 8,
					 .max_send_sge = 1, .max_recv_sge = 1,
					 .max_inline_data = 128 };
	qp = ferroce_create_qp(&pd, &qattr);
	CHECK(qp);
	CHECK(old_driver_calls == 4);
	if (qp) {
		CHECK(to_fqp(qp)->qpn == v1_qp.qpn);
		CHECK(to_fqp(qp)->max_inline == v1_qp.max_inline);
		CHECK(qattr.cap.max_inline_data == v1_qp.max_inline);
		CHECK(ferroce_find_qp(ctx, v1_qp.qpn) == to_fqp(qp));
		CHECK(ferroce_destroy_qp(qp) == 0);
		CHECK(!ferroce_find_qp(ctx, v1_qp.qpn));
	}

	{
		struct ibv_qp_init_attr_ex xattr = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 8, .max_send_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD |
				     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = &pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND |
					  IBV_QP_EX_WITH_RDMA_READ,
		};

		qp = ferroce_create_qp_ex(&vctx->context, &xattr);
		CHECK(qp);
		if (qp) {
			CHECK(ibv_qp_to_qp_ex(qp) &&
			      ibv_qp_to_qp_ex(qp)->wr_rdma_read);
			CHECK(ferroce_destroy_qp(qp) == 0);
		}
		/* Atomics on a device without CAP_ATOMIC; creation flags */
		xattr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
		errno = 0;
		CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
		      errno == EOPNOTSUPP);
		xattr.send_ops_flags = 0;
		xattr.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		xattr.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
		errno = 0;
		CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
		      errno == EOPNOTSUPP);
		/* The mask with no flag set is no request */
		xattr.create_flags = 0;
		qp = ferroce_create_qp_ex(&vctx->context, &xattr);
		CHECK(qp);
		if (qp)
			CHECK(ferroce_destroy_qp(qp) == 0);
	}

	ah = ferroce_create_ah(&pd, &aattr);
	CHECK(ah);
	CHECK(old_driver_calls == 7);
	if (ah) {
		CHECK(to_fah(ah)->ahn == v1_ah.ahn);
		CHECK(ferroce_destroy_ah(ah) == 0);
	}
	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * Creating UC QPs: refused (EOPNOTSUPP, no command) on a device without
 * CAP_UC, as the first release's driver reports it; with CAP_UC created
 * through ibv_create_qp and ibv_create_qp_ex, whose send_ops_flags take the
 * four UC operations and nothing else.
 */
static void test_uc_create(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_qp_init_attr qattr = { .qp_type = IBV_QPT_UC };
	struct ibv_qp_init_attr_ex xattr = {};
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_pd pd = {};
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int calls;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	CHECK(!(ctx->device_caps & FERROCE_CAP_UC));
	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_ctx;
	pd.context = &vctx->context;
	qattr.send_cq = cq;
	qattr.recv_cq = cq;
	qattr.cap = (struct ibv_qp_cap){ .max_send_wr = 8, .max_recv_wr = 8,
					 .max_send_sge = 1, .max_recv_sge = 1 };
	xattr = (struct ibv_qp_init_attr_ex){
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = &pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};

	/* No CAP_UC: nothing reaches the driver */
	calls = old_driver_calls;
	errno = 0;
	CHECK(!ferroce_create_qp(&pd, &qattr) && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	CHECK(old_driver_calls == calls);

	ctx->device_caps |= FERROCE_CAP_UC | FERROCE_CAP_ATOMIC;
	qp = ferroce_create_qp(&pd, &qattr);
	CHECK(qp);
	CHECK(old_driver_calls == calls + 1);
	if (qp) {
		CHECK(qp->qp_type == IBV_QPT_UC);
		CHECK(ferroce_find_qp(ctx, v1_qp.qpn) == to_fqp(qp));
		CHECK(ferroce_destroy_qp(qp) == 0);
	}
	xattr.send_ops_flags = IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM |
			       IBV_QP_EX_WITH_RDMA_WRITE |
			       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	qp = ferroce_create_qp_ex(&vctx->context, &xattr);
	CHECK(qp);
	if (qp) {
		struct ibv_qp_ex *ex = ibv_qp_to_qp_ex(qp);

		CHECK(ex && ex->wr_rdma_write_imm && ex->wr_send_imm);
		CHECK(ex && !ex->wr_rdma_read && !ex->wr_atomic_fetch_add);
		CHECK(ferroce_destroy_qp(qp) == 0);
	}
	/* READ and atomics do not exist on UC, whatever the device has */
	calls = old_driver_calls;
	xattr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	errno = 0;
	CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	xattr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	errno = 0;
	CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	CHECK(old_driver_calls == calls);
	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/* A QP of each type that takes an SRQ, on srq, with no RQ of its own */
static void check_srq_qp(struct ibv_pd *pd, struct ibv_cq *cq,
			 struct ibv_srq *srq, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr qattr = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = type,
		.cap = { .max_send_wr = 8, .max_recv_wr = 64,
			 .max_send_sge = 1, .max_recv_sge = 4 },
	};
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;
	struct ibv_qp *qp;

	memset(&qp_req, 0xff, sizeof(qp_req));
	qp = ferroce_create_qp(pd, &qattr);
	CHECK(qp);
	if (!qp)
		return;
	/* The driver is asked for no RQ: rq fields and receive caps 0 */
	CHECK(qp_req.rq_depth == 0 && qp_req.rq_wqe_shift == 0 &&
	      qp_req.rq_buf_va == 0 && qp_req.rq_dbrec_va == 0);
	CHECK(qp_req.sq_depth == 8 && qp_req.sq_buf_va != 0);
	CHECK(qp_cap.max_recv_wr == 0 && qp_cap.max_recv_sge == 0);
	CHECK(qattr.cap.max_recv_wr == 0 && qattr.cap.max_recv_sge == 0);
	CHECK(qattr.cap.max_send_wr == 8);
	CHECK(qp->srq == srq);
	CHECK(to_fqp(qp)->rq.depth == 0 && !to_fqp(qp)->rq.buf &&
	      !to_fqp(qp)->rq.dbrec);
	qp->state = IBV_QPS_RTR;
	CHECK(ferroce_post_recv(qp, &rwr, &bad) == EINVAL && bad == &rwr);
	CHECK(ferroce_destroy_qp(qp) == 0);
}

/*
 * SRQs through the provider's verbs, against the fake driver: only with
 * CAP_SRQ; the ring sized as an RQ and handed over zeroed, with a zeroed
 * record; what the caller gets back is the ring's size; the limit up to
 * the depth (resizing: test_srq_resize); QPs of RC, UC and UD on it, with
 * no RQ.
 */
static void test_srq_create(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_srq_init_attr sattr = {
		.srq_context = &sattr, .attr = { .max_wr = 5, .max_sge = 2 },
	};
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 };
	struct ibv_qp_init_attr qattr = { .qp_type = IBV_QPT_RC };
	struct ibv_srq_init_attr_ex xattr;
	struct ibv_context other_ctx = {};
	struct ibv_srq other_srq = { .context = &other_ctx };
	struct ibv_srq_attr attr;
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_recv_wr *bad;
	struct ferroce_srq *fsrq;
	struct ibv_pd pd = {};
	struct ibv_srq *srq;
	struct ibv_cq *cq;
	size_t i;
	int calls;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	pd.context = &vctx->context;
	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_ctx;
	xattr = (struct ibv_srq_init_attr_ex){
		.srq_context = &xattr, .attr = { .max_wr = 100, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
			     IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_BASIC, .pd = &pd, .cq = cq,
	};

	/* No CAP_SRQ (the first release's device): nothing reaches the driver */
	calls = old_driver_calls;
	CHECK(!(ctx->device_caps & FERROCE_CAP_SRQ));
	errno = 0;
	CHECK(!ferroce_create_srq(&pd, &sattr) && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(!ferroce_create_srq_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	CHECK(old_driver_calls == calls);

	/* Beyond the device (max_qp_wr 512, max_sge 8) */
	ctx->device_caps |= FERROCE_CAP_SRQ;
	sattr.attr.max_wr = 513;
	errno = 0;
	CHECK(!ferroce_create_srq(&pd, &sattr) && errno == EINVAL);
	sattr.attr.max_wr = 5;
	sattr.attr.max_sge = 9;
	errno = 0;
	CHECK(!ferroce_create_srq(&pd, &sattr) && errno == EINVAL);
	sattr.attr.max_sge = 2;
	CHECK(old_driver_calls == calls);

	srq = ferroce_create_srq(&pd, &sattr);
	CHECK(srq);
	CHECK(old_driver_calls == calls + 1);
	if (!srq)
		goto out_cq;
	fsrq = to_fsrq(srq);
	CHECK(fsrq->srqn == 0x42);
	CHECK(srq_req.depth == 8 && srq_req.wqe_shift == 6);
	CHECK(srq_req.comp_mask == 0 && srq_req.reserved2 == 0 &&
	      !srq_req.reserved[0] && !srq_req.reserved[1] &&
	      !srq_req.reserved[2]);
	CHECK(srq_req.buf_va == (uintptr_t)fsrq->wq.buf &&
	      srq_req.buf_va % FERROCE_PAGE_SIZE == 0);
	CHECK(srq_req.dbrec_va == (uintptr_t)fsrq->dbrec &&
	      srq_req.dbrec_va % 8 == 0);
	CHECK(fsrq->wq.buf_size >= 8U << 6 &&
	      fsrq->wq.buf_size % FERROCE_PAGE_SIZE == 0);
	for (i = 0; i < fsrq->wq.buf_size; i++)
		if (((uint8_t *)fsrq->wq.buf)[i])
			break;
	CHECK(i == fsrq->wq.buf_size);
	CHECK(fsrq->dbrec->pi == 0 && fsrq->dbrec->ci == 0);
	/* 8 WQEs of a 64-byte stride, which holds 3 SGEs */
	CHECK(sattr.attr.max_wr == 8 && sattr.attr.max_sge == 3);
	CHECK(fsrq->wq.max_sge == 3);
	CHECK(ferroce_post_srq_recv(srq, &rwr, &bad) == 0);
	CHECK(le32toh(fsrq->dbrec->pi) == 1);

	/* The limit, up to the depth, with no driver data; nothing else */
	calls = srq_modify_calls;
	attr = (struct ibv_srq_attr){ .max_wr = 16, .srq_limit = 4 };
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_LIMIT | 0x80) == EINVAL);
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR | 0x80) == EINVAL);
	attr.srq_limit = 9;
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_LIMIT) == EINVAL);
	CHECK(srq_modify_calls == calls);
	attr.srq_limit = 8;
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_LIMIT) == 0);
	CHECK(srq_modify_calls == calls + 1 && srq_modify_mask == IBV_SRQ_LIMIT);
	CHECK(srq_modify_size == sizeof(struct ibv_modify_srq));
	CHECK(!srq_modify_locked && srq_driver_limit == 8);

	/* Query: the ring's size, the driver's limit */
	memset(&attr, 0, sizeof(attr));
	CHECK(ferroce_query_srq(srq, &attr) == 0);
	CHECK(attr.max_wr == 8 && attr.max_sge == 3 && attr.srq_limit == 8);

	/* QPs on the SRQ: RC, UD, and UC with CAP_UC */
	check_srq_qp(&pd, cq, srq, IBV_QPT_RC);
	check_srq_qp(&pd, cq, srq, IBV_QPT_UD);
	calls = old_driver_calls;
	qattr.send_cq = cq;
	qattr.recv_cq = cq;
	qattr.srq = srq;
	qattr.qp_type = IBV_QPT_UC;
	qattr.cap = (struct ibv_qp_cap){ .max_send_wr = 8, .max_send_sge = 1 };
	errno = 0;
	CHECK(!ferroce_create_qp(&pd, &qattr) && errno == EOPNOTSUPP);
	ctx->device_caps |= FERROCE_CAP_UC;
	check_srq_qp(&pd, cq, srq, IBV_QPT_UC);
	/* An SRQ that is not this context's is not ours */
	qattr.qp_type = IBV_QPT_RC;
	qattr.srq = &other_srq;
	errno = 0;
	CHECK(!ferroce_create_qp(&pd, &qattr) && errno == EINVAL);
	CHECK(old_driver_calls == calls + 1);

	/* A driver refusal (a QP still attached: EBUSY) keeps the SRQ */
	srq_destroy_ret = EBUSY;
	CHECK(ferroce_destroy_srq(srq) == EBUSY);
	srq_destroy_ret = 0;
	CHECK(ferroce_post_srq_recv(srq, &rwr, &bad) == 0);
	CHECK(le32toh(fsrq->dbrec->pi) == 2);
	CHECK(ferroce_destroy_srq(srq) == 0);

	/* ibv_create_srq_ex(): a basic SRQ, its CQ ignored */
	calls = old_driver_calls;
	srq = ferroce_create_srq_ex(&vctx->context, &xattr);
	CHECK(srq);
	CHECK(old_driver_calls == calls + 1);
	if (srq) {
		CHECK(srq->context == &vctx->context && srq->pd == &pd &&
		      srq->srq_context == &xattr);
		CHECK(to_fsrq(srq)->srqn == 0x42);
		CHECK(srq_req.depth == 128 && srq_req.wqe_shift == 5);
		CHECK(xattr.attr.max_wr == 128 && xattr.attr.max_sge == 1);
		CHECK(ferroce_destroy_srq(srq) == 0);
	}
	/* Without IBV_SRQ_INIT_ATTR_TYPE srq_type means nothing: basic */
	xattr.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	xattr.srq_type = IBV_SRQT_XRC;
	srq = ferroce_create_srq_ex(&vctx->context, &xattr);
	CHECK(srq);
	CHECK(old_driver_calls == calls + 2);
	if (srq)
		CHECK(ferroce_destroy_srq(srq) == 0);
	calls = old_driver_calls;
	xattr.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;

	/* XRC and tag-matching SRQs are not supported; the PD is required */
	xattr.srq_type = IBV_SRQT_XRC;
	xattr.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
	errno = 0;
	CHECK(!ferroce_create_srq_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	xattr.comp_mask &= ~IBV_SRQ_INIT_ATTR_XRCD;
	errno = 0;
	CHECK(!ferroce_create_srq_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	xattr.srq_type = IBV_SRQT_TM;
	xattr.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
	xattr.tm_cap.max_num_tags = 4;
	errno = 0;
	CHECK(!ferroce_create_srq_ex(&vctx->context, &xattr) &&
	      errno == EOPNOTSUPP);
	xattr.srq_type = IBV_SRQT_BASIC;
	xattr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_CQ;
	errno = 0;
	CHECK(!ferroce_create_srq_ex(&vctx->context, &xattr) && errno == EINVAL);
	CHECK(old_driver_calls == calls);

out_cq:
	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * What the driver must find in the ring of a resize, checked when it is
 * called: the WQEs of indices srq_resize_ci up to pi (not yet taken) copied
 * from the old ring to their slots in the new one, every other slot zero,
 * the old ring still the SRQ's. The device then takes srq_resize_take more
 * WQEs (before the new ring is its), which changes nothing.
 */
static uint16_t srq_resize_ci;
static unsigned int srq_resize_take, srq_resize_checks;

static void srq_check_resize(struct ferroce_srq *srq,
			     const struct ferroce_ureq_modify_srq *req)
{
	struct ferroce_wq ring = {
		.buf = (void *)(uintptr_t)req->buf_va,
		.depth = req->depth, .shift = srq->wq.shift,
	};
	size_t stride = (size_t)1 << ring.shift;
	struct ferroce_wq want = ring;
	uint16_t i;

	srq_resize_checks++;
	CHECK(srq_modify_locked);
	CHECK(req->comp_mask == 0);
	CHECK(ring.buf && ring.buf != srq->wq.buf);
	CHECK(req->buf_va % FERROCE_PAGE_SIZE == 0);
	CHECK(req->depth && !(req->depth & (req->depth - 1)));
	want.buf = calloc(ring.depth, stride);
	if (!ring.buf || !want.buf)
		goto out;
	for (i = srq_resize_ci; i != srq->wq.pi; i++)
		memcpy(ferroce_wqe(&want, i), ferroce_wqe(&srq->wq, i), stride);
	CHECK(memcmp(ring.buf, want.buf, ring.depth * stride) == 0);
	device_srq_take(srq->dbrec, srq_resize_take);
out:
	free(want.buf);
}

/* Post WRs of wr_ids first.. one by one (one SGE each), expect ret */
static void srq_post_n(struct ibv_srq *srq, uint64_t first, unsigned int n,
		       int ret)
{
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_recv_wr wr = { .sg_list = &sg, .num_sge = 1 }, *bad;
	unsigned int i;

	for (i = 0; i < n; i++) {
		wr.wr_id = first + i;
		CHECK(ferroce_post_srq_recv(srq, &wr, &bad) == ret);
	}
}

static uint64_t srq_wr_id(struct ferroce_srq *srq, uint16_t idx)
{
	return le64toh(srq_wqe(srq, idx)->wr_id);
}

/*
 * Resizing (IBV_SRQ_MAX_WR, with CAP_SRQ): a new ring of a power-of-two
 * depth >= max_wr, the untaken WQEs copied to their slots (16-bit indices
 * that wrap, a ci the device advanced), handed to the driver under the
 * SRQ's lock as ferroce_ureq_modify_srq; the SRQ goes on in the new ring.
 * A driver refusal keeps the old ring; a depth below the WQEs outstanding,
 * beyond the device, or below the limit given with it: EINVAL, no command.
 */
static void test_srq_resize(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_srq_init_attr sattr = {
		.attr = { .max_wr = 4, .max_sge = 1 },
	};
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_srq_attr attr;
	struct ferroce_srq *fsrq;
	struct ibv_pd pd = {};
	struct ibv_srq *srq;
	void *old_buf;
	int calls;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	ctx->device_caps |= FERROCE_CAP_SRQ;
	pd.context = &vctx->context;
	srq = ferroce_create_srq(&pd, &sattr);
	CHECK(srq);
	if (!srq)
		goto out_ctx;
	fsrq = to_fsrq(srq);
	CHECK(fsrq->wq.depth == 4 && fsrq->wq.shift == 5);
	srq_modify_hook = srq_check_resize;

	/*
	 * Indices 0xfffd..0 hold 100..103; the device took 0xfffd: 0xfffe,
	 * 0xffff and 0 go to slots 6, 7 and 0 of 8, and the device takes
	 * one more during the command.
	 */
	fsrq->wq.pi = 0xfffd;
	fsrq->dbrec->pi = htole32(0xfffd);
	fsrq->dbrec->ci = htole32(0xfffd);
	srq_post_n(srq, 100, 4, 0);
	srq_post_n(srq, 104, 1, ENOMEM);
	CHECK(le32toh(fsrq->dbrec->pi) == 1);
	device_srq_take(fsrq->dbrec, 1);
	srq_resize_ci = 0xfffe;
	srq_resize_take = 1;
	srq_resize_checks = 0;
	calls = srq_modify_calls;
	old_buf = fsrq->wq.buf;
	attr = (struct ibv_srq_attr){ .max_wr = 5, .srq_limit = 99 };
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == 0);
	CHECK(srq_modify_calls == calls + 1 && srq_resize_checks == 1);
	CHECK(srq_modify_mask == IBV_SRQ_MAX_WR);
	CHECK(srq_modify_size == sizeof(struct ferroce_modify_srq));
	CHECK(srq_modify_req.depth == 8 && srq_modify_req.comp_mask == 0);
	CHECK(srq_modify_req.buf_va == (uintptr_t)fsrq->wq.buf);
	CHECK(fsrq->wq.buf != old_buf && fsrq->wq.depth == 8);
	CHECK(fsrq->wq.buf_size >= 8U << 5 &&
	      fsrq->wq.buf_size % FERROCE_PAGE_SIZE == 0);
	CHECK(srq_driver_limit == 0);	/* no limit asked for */
	/* pi, the record and the stride stay */
	CHECK(fsrq->wq.pi == 1 && le32toh(fsrq->dbrec->pi) == 1 &&
	      le32toh(fsrq->dbrec->ci) == 0xffff);
	CHECK(fsrq->wq.shift == 5 && fsrq->wq.max_sge == 1);
	CHECK(srq_wr_id(fsrq, 0xfffe) == 101 && srq_wr_id(fsrq, 0xffff) == 102 &&
	      srq_wr_id(fsrq, 0) == 103);
	CHECK(ferroce_wqe(&fsrq->wq, 0xfffe) ==
	      (uint8_t *)fsrq->wq.buf + 6 * 32);
	memset(&attr, 0, sizeof(attr));
	CHECK(ferroce_query_srq(srq, &attr) == 0 && attr.max_wr == 8);

	/* Posting fills the new ring: 6 free slots (0xffff and 0 untaken) */
	srq_post_n(srq, 200, 6, 0);
	srq_post_n(srq, 206, 1, ENOMEM);
	CHECK(fsrq->wq.pi == 7 && le32toh(fsrq->dbrec->pi) == 7);
	CHECK(srq_wr_id(fsrq, 1) == 200 && srq_wr_id(fsrq, 6) == 205);
	CHECK(srq_wr_id(fsrq, 0xffff) == 102 && srq_wr_id(fsrq, 0) == 103);

	/* 8 outstanding: not into 4; beyond max_qp_wr (512); no command */
	calls = srq_modify_calls;
	old_buf = fsrq->wq.buf;
	attr = (struct ibv_srq_attr){ .max_wr = 4 };
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == EINVAL);
	attr.max_wr = 513;
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == EINVAL);
	/* The limit given with it: up to the new depth */
	attr = (struct ibv_srq_attr){ .max_wr = 9, .srq_limit = 17 };
	CHECK(ferroce_modify_srq(srq, &attr,
				 IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == EINVAL);
	/* Not without CAP_SRQ */
	ctx->device_caps &= ~FERROCE_CAP_SRQ;
	attr.srq_limit = 0;
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == EINVAL);
	ctx->device_caps |= FERROCE_CAP_SRQ;
	CHECK(srq_modify_calls == calls);
	CHECK(fsrq->wq.buf == old_buf && fsrq->wq.depth == 8);

	/* A driver refusal keeps the old ring, which posting goes on with */
	device_srq_take(fsrq->dbrec, 3);	/* ci 2 */
	srq_resize_ci = 2;
	srq_resize_take = 0;
	srq_modify_ret = ENOMEM;
	attr = (struct ibv_srq_attr){ .max_wr = 16, .srq_limit = 3 };
	CHECK(ferroce_modify_srq(srq, &attr,
				 IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == ENOMEM);
	srq_modify_ret = 0;
	CHECK(srq_modify_calls == calls + 1 && srq_modify_req.depth == 16);
	CHECK(fsrq->wq.buf == old_buf && fsrq->wq.depth == 8);
	CHECK(srq_driver_limit == 0);
	CHECK(srq_wr_id(fsrq, 2) == 201 && srq_wr_id(fsrq, 6) == 205);
	memset(&attr, 0, sizeof(attr));
	CHECK(ferroce_query_srq(srq, &attr) == 0 && attr.max_wr == 8);
	srq_post_n(srq, 300, 3, 0);
	srq_post_n(srq, 303, 1, ENOMEM);
	CHECK(fsrq->wq.pi == 10 && srq_wr_id(fsrq, 9) == 302);

	/*
	 * Shrinking to what is outstanding, with the limit: indices 8 and 9
	 * (wr_ids 301, 302) go to slots 0 and 1 of 2, the limit is armed.
	 */
	device_srq_take(fsrq->dbrec, 6);	/* ci 8 */
	srq_resize_ci = 8;
	attr = (struct ibv_srq_attr){ .max_wr = 2, .srq_limit = 1 };
	CHECK(ferroce_modify_srq(srq, &attr,
				 IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) == 0);
	CHECK(srq_modify_mask == (IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT));
	CHECK(srq_modify_req.depth == 2 && fsrq->wq.depth == 2);
	CHECK(srq_driver_limit == 1);
	CHECK(srq_wr_id(fsrq, 8) == 301 && srq_wr_id(fsrq, 9) == 302);
	CHECK(ferroce_wqe(&fsrq->wq, 9) == (uint8_t *)fsrq->wq.buf + 32);
	srq_post_n(srq, 400, 1, ENOMEM);
	/* ... and to 1 once the device took one: max_wr 1 */
	device_srq_take(fsrq->dbrec, 1);	/* ci 9 */
	srq_resize_ci = 9;
	attr = (struct ibv_srq_attr){ .max_wr = 1 };
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == 0);
	CHECK(srq_modify_req.depth == 1 && fsrq->wq.depth == 1);
	CHECK(srq_wr_id(fsrq, 9) == 302);
	/* A record ci that is not the device's (past pi): EINVAL */
	calls = srq_modify_calls;
	fsrq->dbrec->ci = htole32(11);
	attr.max_wr = 512;
	CHECK(ferroce_modify_srq(srq, &attr, IBV_SRQ_MAX_WR) == EINVAL);
	CHECK(srq_modify_calls == calls && fsrq->wq.depth == 1);
	fsrq->dbrec->ci = htole32(10);
	srq_post_n(srq, 500, 1, 0);
	CHECK(srq_wr_id(fsrq, 10) == 500 && le32toh(fsrq->dbrec->pi) == 11);

	srq_modify_hook = NULL;
	CHECK(ferroce_destroy_srq(srq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * Resizing while an application thread posts and another plays the device,
 * which takes WQEs from the ring it was last given (switched by the
 * driver's command, srq_device_switch) in ring order and checks their
 * wr_ids: none lost or reordered across resizes (the copies), and under
 * ThreadSanitizer no race on the rings, the record or the SRQ's fields.
 */
struct srq_resize_threads {
	struct fake f;
	struct ferroce_srq srq;
	struct ferroce_srq_dbrec rec;
	pthread_mutex_t dev_lock;
	struct ferroce_wq dev_ring;	/* under dev_lock */
	unsigned int taken;
	bool done;			/* __atomic_* accesses */
};

static void srq_device_switch(struct ferroce_srq *srq,
			      const struct ferroce_ureq_modify_srq *req)
{
	struct srq_resize_threads *t =
		container_of(srq, struct srq_resize_threads, srq);

	pthread_mutex_lock(&t->dev_lock);
	t->dev_ring.buf = (void *)(uintptr_t)req->buf_va;
	t->dev_ring.depth = req->depth;
	pthread_mutex_unlock(&t->dev_lock);
}

static void *srq_resize_poster(void *arg)
{
	struct srq_resize_threads *t = arg;

	srq_post_all(&t->srq);
	return NULL;
}

static void *srq_resize_device(void *arg)
{
	struct srq_resize_threads *t = arg;
	struct ferroce_rq_wqe_hdr *hdr;
	uint16_t pi, ci = 0;

	while (t->taken < SRQ_THREAD_RECVS) {
		pi = srq_rec_pi(&t->rec);
		CHECK((uint16_t)(pi - ci) <= 16);
		if (pi == ci) {
			sched_yield();
			continue;
		}
		pthread_mutex_lock(&t->dev_lock);
		hdr = ferroce_wqe(&t->dev_ring, ci);
		CHECK(le64toh(hdr->wr_id) == t->taken && hdr->num_sge == 1);
		pthread_mutex_unlock(&t->dev_lock);
		t->taken++;
		device_srq_take(&t->rec, 1);
		ci++;
	}
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void test_srq_resize_threads(void)
{
	static const uint32_t max_wr[] = { 8, 1, 16, 3, 2, 5 };
	struct srq_resize_threads t = {};
	struct ibv_srq_attr attr = {};
	unsigned int i, resized = 0;
	pthread_t p, d;
	int ret;

	fake_init(&t.f, 4, 4);
	t.f.ctx->device_caps = FERROCE_CAP_SRQ;
	t.f.ctx->max_qp_wr = 16;
	fake_srq_init(&t.f, &t.srq, &t.rec, 4, 1);
	pthread_mutex_init(&t.dev_lock, NULL);
	t.dev_ring = (struct ferroce_wq){
		.buf = t.srq.wq.buf, .depth = 4, .shift = t.srq.wq.shift,
	};
	srq_modify_hook = srq_device_switch;
	CHECK(pthread_create(&d, NULL, srq_resize_device, &t) == 0);
	CHECK(pthread_create(&p, NULL, srq_resize_poster, &t) == 0);
	for (i = 0; !__atomic_load_n(&t.done, __ATOMIC_ACQUIRE); i++) {
		attr.max_wr = max_wr[i % ARRAY_SIZE(max_wr)];
		ret = ferroce_modify_srq(&t.srq.vsrq.srq, &attr,
					 IBV_SRQ_MAX_WR);
		/* EINVAL: more outstanding than the new depth holds */
		CHECK(ret == 0 || ret == EINVAL);
		resized += !ret;
		sched_yield();
	}
	pthread_join(p, NULL);
	pthread_join(d, NULL);
	srq_modify_hook = NULL;
	CHECK(resized > 0);
	CHECK(t.taken == SRQ_THREAD_RECVS);
	CHECK(srq_rec_pi(&t.rec) == (uint16_t)SRQ_THREAD_RECVS);
	pthread_mutex_destroy(&t.dev_lock);
	pthread_spin_destroy(&t.srq.wq.lock);
	/* a ring of the provider's (ferroce_alloc_ring) */
	ibv_dofork_range(t.srq.wq.buf, t.srq.wq.buf_size);
	free(t.srq.wq.buf);
	fake_fini(&t.f);
}

/* ------------------------------------------------------------------------
 * CQ resize (device 1.6, CAP_RESIZE_CQ)
 * ------------------------------------------------------------------------
 */

/* The device writes CQE number idx (16 bits) of a ring with the phase rule */
static void cq_dev_write(struct ferroce_cqe *ring, uint32_t depth,
			 uint16_t idx, uint64_t wr_id, uint32_t qpn)
{
	struct ferroce_cqe *cqe = &ring[idx & (depth - 1)];

	memset(cqe, 0, offsetof(struct ferroce_cqe, owner));
	cqe->wr_id = htole64(wr_id);
	cqe->qpn = htole32(qpn);
	cqe->opcode = IBV_WC_SEND;
	cqe->byte_len = htole32(idx);
	cqe->owner = ((idx >> (ffs(depth) - 1)) & 1) ^ 1;
}

/* A CQ that has consumed every CQE below c: its ring is all "not written" */
static void cq_start_at(struct ferroce_cq *cq, uint32_t c)
{
	uint32_t i;

	cq->ci = c;
	cq->dbrec->ci = htole32(c & FERROCE_WQ_IDX_MASK);
	for (i = c; i != c + cq->depth; i++)
		cq->buf[i & (cq->depth - 1)].owner =
			ferroce_cqe_phase(i, cq->log_depth) ^ 1;
}

/*
 * The hook: the new ring, checked before the device has it, must be zero
 * but for the owner bits of the window C .. C + depth - 1 (C is
 * cq_resize_c), each "not written" for its index. Then the device writes
 * CQEs cq_resize_dev_first .. cq_resize_switch - 1 into the old ring
 * (wr_id 1000 + index) before it switches.
 */
static uint32_t cq_resize_c;
static uint16_t cq_resize_dev_first;
static unsigned int cq_resize_checks;

static void cq_check_resize(struct ferroce_cq *cq,
			    const struct ferroce_ureq_resize_cq *req)
{
	struct ferroce_cqe *ring = (void *)(uintptr_t)req->buf_va;
	static const struct ferroce_cqe zero;
	uint32_t log = ffs(req->depth) - 1, i, ones = 0;
	uint16_t idx;

	cq_resize_checks++;
	CHECK(cq_resize_locked);
	CHECK(ring && ring != cq->buf);
	CHECK(req->buf_va % FERROCE_PAGE_SIZE == 0);
	CHECK(req->depth >= 2 && !(req->depth & (req->depth - 1)));
	CHECK(cq->ci == cq_resize_c);
	if (!ring)
		return;
	for (i = cq_resize_c; i != cq_resize_c + req->depth; i++) {
		struct ferroce_cqe *e = &ring[i & (req->depth - 1)];

		CHECK(memcmp(e, &zero, offsetof(struct ferroce_cqe, owner)) == 0);
		/* the opposite of the phase rule, from the 16-bit index too */
		CHECK(e->owner == ((i >> log) & 1));
		CHECK(e->owner == (((uint16_t)i >> log) & 1));
		ones += e->owner;
	}
	/* windows that cross a pass: both values */
	CHECK(ones > 0 && ones < req->depth);
	for (idx = cq_resize_dev_first; idx != cq_resize_switch; idx++)
		cq_dev_write(cq->buf, cq->depth, idx, 1000 + idx, 0x77);
}

/* The CQE of index i in the CQ's current ring, with the owner it must have */
static void cq_check_copied(struct ferroce_cq *cq, uint32_t i, uint64_t wr_id)
{
	struct ferroce_cqe *e = &cq->buf[i & (cq->depth - 1)];

	CHECK(le64toh(e->wr_id) == wr_id);
	CHECK(le32toh(e->byte_len) == (uint16_t)i);
	CHECK(le32toh(e->qpn) == 0x77 && e->opcode == IBV_WC_SEND);
	CHECK(e->owner == ferroce_cqe_phase(i, cq->log_depth));
}

/*
 * ibv_resize_cq of a CQ of ibv_create_cq: refused without CAP_RESIZE_CQ
 * (EOPNOTSUPP) or beyond the device (EINVAL), no command. Growing from 4
 * to 16 across the 16-bit wrap (C 0xfffe, S 1): the unpolled CQEs 0xfffe,
 * 0xffff and the one the device writes during the command (0) are copied
 * with the new phase; polling goes on with them, then with what the device
 * writes from S on into the new ring; cleaning and arming use it too. A
 * driver refusal keeps the old ring.
 */
static void test_cq_resize(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ferroce_cqe *old_buf;
	struct ferroce_cq *fcq;
	struct ibv_wc wc[8];
	struct ibv_cq *cq;
	uint32_t i;
	int calls;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	cq = ferroce_create_cq(&vctx->context, 4, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_ctx;
	fcq = to_fcq(cq);
	CHECK(fcq->depth == 4 && cq->cqe == 4);
	cq_start_at(fcq, 0xfffd);
	for (i = 0xfffd; i <= 0xffff; i++)
		cq_dev_write(fcq->buf, 4, i, 1000 + i, 0x77);
	CHECK(ferroce_poll_cq(cq, 1, wc) == 1 && wc[0].wr_id == 1000 + 0xfffd);

	/* Not without the capability; not beyond max_cqe; no command */
	calls = cq_resize_calls;
	old_buf = fcq->buf;
	CHECK(!(ctx->device_caps & FERROCE_CAP_RESIZE_CQ));
	CHECK(ferroce_resize_cq(cq, 16) == EOPNOTSUPP);
	ctx->device_caps |= FERROCE_CAP_RESIZE_CQ;
	CHECK(ferroce_resize_cq(cq, 0) == EINVAL);
	CHECK(ferroce_resize_cq(cq, -1) == EINVAL);
	CHECK(ferroce_resize_cq(cq, ctx->max_cqe + 1) == EINVAL);
	ctx->max_cqe = 3000;	/* 2049 takes a depth of 4096 */
	CHECK(ferroce_resize_cq(cq, 2049) == EINVAL);
	ctx->max_cqe = v1_ctx.max_cqe;
	CHECK(cq_resize_calls == calls);
	CHECK(fcq->buf == old_buf && fcq->depth == 4 && cq->cqe == 4);

	/* Grow: 10 -> 16 */
	cq_resize_hook = cq_check_resize;
	cq_resize_c = 0xfffe;
	cq_resize_dev_first = 0;
	cq_resize_switch = 1;
	cq_resize_checks = 0;
	CHECK(ferroce_resize_cq(cq, 10) == 0);
	CHECK(cq_resize_calls == calls + 1 && cq_resize_checks == 1);
	CHECK(cq_resize_req.depth == 16);
	CHECK(cq_resize_req.buf_va == (uintptr_t)fcq->buf);
	CHECK(fcq->buf != old_buf && fcq->depth == 16 && fcq->log_depth == 4);
	CHECK(fcq->buf_size == FERROCE_PAGE_SIZE && cq->cqe == 16);
	/* ci and its record stay */
	CHECK(fcq->ci == 0xfffe && le32toh(fcq->dbrec->ci) == 0xfffe);
	cq_check_copied(fcq, 0xfffe, 1000 + 0xfffe);
	cq_check_copied(fcq, 0xffff, 1000 + 0xffff);
	cq_check_copied(fcq, 0x10000, 1000);
	/* S on: not written yet */
	CHECK(fcq->buf[0x10001 & 15].owner ==
	      (ferroce_cqe_phase(0x10001, 4) ^ 1));
	/* the device from S on, into the new ring */
	cq_dev_write(fcq->buf, 16, 1, 2001, 0x77);
	cq_dev_write(fcq->buf, 16, 2, 2002, 0x77);
	CHECK(ferroce_poll_cq(cq, 8, wc) == 5);
	CHECK(wc[0].wr_id == 1000 + 0xfffe && wc[1].wr_id == 1000 + 0xffff);
	CHECK(wc[2].wr_id == 1000 && wc[3].wr_id == 2001 &&
	      wc[4].wr_id == 2002);
	CHECK(wc[2].byte_len == 0 && wc[2].qp_num == 0x77);
	CHECK(ferroce_poll_cq(cq, 8, wc) == 0);
	CHECK(fcq->ci == 0x10003 && le32toh(fcq->dbrec->ci) == 3);

	/* Cleaning a QP's CQEs works in the new ring */
	for (i = 3; i < 6; i++)
		cq_dev_write(fcq->buf, 16, i, 2000 + i, i == 4 ? 0x99 : 7);
	pthread_spin_lock(&fcq->lock);
	ferroce_cq_clean(fcq, 7);
	pthread_spin_unlock(&fcq->lock);
	CHECK(fcq->ci == 0x10005 && le32toh(fcq->dbrec->ci) == 5);
	CHECK(ferroce_poll_cq(cq, 8, wc) == 1 && wc[0].wr_id == 2004 &&
	      wc[0].qp_num == 0x99);
	/* Arming names the CI */
	CHECK(ferroce_req_notify_cq(cq, 0) == 0);
	CHECK(le64toh(*(uint64_t *)((uint8_t *)ctx->db + FERROCE_DB_CQ)) ==
	      FERROCE_DB_CQ_VAL(v1_cq.cqn, 6, FERROCE_CQ_CMD_ARM_NEXT, 0));

	/* A refusal keeps the old ring; the device goes on writing it */
	old_buf = fcq->buf;
	cq_resize_ret = ENOMEM;
	cq_resize_c = 0x10006;
	cq_resize_dev_first = 6;
	cq_resize_switch = 7;		/* the device writes 6 (old ring) */
	CHECK(ferroce_resize_cq(cq, 64) == ENOMEM);
	cq_resize_ret = 0;
	CHECK(cq_resize_req.depth == 64 && cq_resize_checks == 2);
	CHECK(fcq->buf == old_buf && fcq->depth == 16 && fcq->log_depth == 4);
	CHECK(fcq->buf_size == FERROCE_PAGE_SIZE && cq->cqe == 16);
	cq_dev_write(fcq->buf, 16, 7, 3007, 0x77);
	CHECK(ferroce_poll_cq(cq, 8, wc) == 2);
	CHECK(wc[0].wr_id == 1006 && wc[1].wr_id == 3007);

	cq_resize_hook = NULL;
	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * Shrinking a CQ of ibv_create_cq_ex from 16 to 4, full (C 0x0ffa, three
 * unpolled CQEs, a fourth written during the command, S 0x0ffe): the
 * extended poll returns the copies, then what the device writes into the
 * new ring. A switch index beyond what the rings hold: EIO, the new ring.
 */
static void test_cq_resize_ex(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_poll_cq_attr pattr = {};
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ferroce_cqe *old_buf;
	struct ferroce_cq *fcq;
	struct ibv_cq_ex *ex;
	struct ibv_cq *cq;
	uint32_t i;
	int ret;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	ctx->device_caps |= FERROCE_CAP_RESIZE_CQ;
	ex = ferroce_create_cq_ex(&vctx->context, &ca);
	CHECK(ex);
	if (!ex)
		goto out_ctx;
	cq = ibv_cq_ex_to_cq(ex);
	fcq = to_fcq_ex(ex);
	CHECK(fcq == to_fcq(cq) && fcq->depth == 16);
	cq_start_at(fcq, 0x0ffa);
	for (i = 0x0ffa; i < 0x0ffd; i++)
		cq_dev_write(fcq->buf, 16, i, 1000 + i, 0x77);

	cq_resize_hook = cq_check_resize;
	cq_resize_c = 0x0ffa;
	cq_resize_dev_first = 0x0ffd;
	cq_resize_switch = 0x0ffe;
	cq_resize_checks = 0;
	old_buf = fcq->buf;
	CHECK(ferroce_resize_cq(cq, 3) == 0);
	CHECK(cq_resize_checks == 1 && cq_resize_req.depth == 4);
	CHECK(fcq->buf != old_buf && fcq->depth == 4 && fcq->log_depth == 2);
	CHECK(cq->cqe == 4 && ex->cqe == 4 && fcq->ci == 0x0ffa);
	for (i = 0x0ffa; i < 0x0ffe; i++)
		cq_check_copied(fcq, i, 1000 + i);

	CHECK(ibv_start_poll(ex, &pattr) == 0 && ex->wr_id == 1000 + 0x0ffa);
	for (i = 0x0ffb; i < 0x0ffe; i++) {
		CHECK(ibv_next_poll(ex) == 0);
		CHECK(ex->wr_id == 1000 + i);
		CHECK(ibv_wc_read_byte_len(ex) == i);
	}
	CHECK(ibv_next_poll(ex) == ENOENT);
	ibv_end_poll(ex);
	CHECK(fcq->ci == 0x0ffe && le32toh(fcq->dbrec->ci) == 0x0ffe);
	/* The device from S on: 0x0ffe, 0x0fff, 0x1000 into slots 2, 3, 0 */
	for (i = 0x0ffe; i < 0x1001; i++)
		cq_dev_write(fcq->buf, 4, i, 2000 + i, 0x77);
	CHECK(ibv_start_poll(ex, &pattr) == 0 && ex->wr_id == 2000 + 0x0ffe);
	CHECK(ibv_next_poll(ex) == 0 && ex->wr_id == 2000 + 0x0fff);
	CHECK(ibv_next_poll(ex) == 0 && ex->wr_id == 2000 + 0x1000);
	CHECK(ibv_next_poll(ex) == ENOENT);
	ibv_end_poll(ex);
	CHECK(fcq->ci == 0x1001);

	/* S more than 4 ahead of C: not the device's */
	cq_resize_hook = NULL;
	cq_resize_switch = 0x1001 + 5;
	CHECK(ferroce_resize_cq(cq, 8) == EIO);
	CHECK(fcq->depth == 8 && cq->cqe == 8 && fcq->ci == 0x1001);
	ret = ibv_start_poll(ex, &pattr);
	CHECK(ret == ENOENT);
	if (!ret)
		ibv_end_poll(ex);
	cq_dev_write(fcq->buf, 8, 0x1001, 7, 0x77);
	CHECK(ibv_start_poll(ex, &pattr) == 0 && ex->wr_id == 7);
	ibv_end_poll(ex);

	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * Memory windows (device 1.7, CAP_MW) and invalidation (CAP_MEM_MGT_EXT)
 * on the fake QP: the objects of one PD the binds below use.
 */
struct mw_objs {
	struct ibv_pd pd, other_pd;
	struct verbs_mr mr;		/* LOCAL_WRITE | MW_BIND */
	struct ibv_mw mw1, mw2;		/* type 1, type 2 */
};

static void mw_objs_init(struct fake *f, struct mw_objs *o)
{
	memset(o, 0, sizeof(*o));
	o->pd.context = &f->ctx->ibv_ctx.context;
	o->other_pd.context = &f->ctx->ibv_ctx.context;
	o->mr.ibv_mr.context = &f->ctx->ibv_ctx.context;
	o->mr.ibv_mr.pd = &o->pd;
	o->mr.ibv_mr.lkey = 0x1234;
	o->mr.ibv_mr.rkey = 0x1234;
	o->mr.mr_type = IBV_MR_TYPE_MR;
	o->mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
	/* variant 0xff: the next one is 0x00 */
	o->mw1 = (struct ibv_mw){ .context = &f->ctx->ibv_ctx.context,
				  .pd = &o->pd, .rkey = 0x5ff,
				  .type = IBV_MW_TYPE_1 };
	o->mw2 = (struct ibv_mw){ .context = &f->ctx->ibv_ctx.context,
				  .pd = &o->pd, .rkey = 0x610,
				  .type = IBV_MW_TYPE_2 };
	f->qp.vqp.qp.pd = &o->pd;
	f->ctx->device_caps = FERROCE_CAP_MW | FERROCE_CAP_MEM_MGT_EXT;
}

static struct ferroce_sq_wqe_hdr *sq_wqe(struct fake *f, uint16_t idx)
{
	return ferroce_wqe(&f->qp.sq, idx);
}

static struct ferroce_sq_wqe_bind_mw *bind_seg(struct ferroce_sq_wqe_hdr *hdr)
{
	return (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
}

/* The 32 bytes of a WQE's segment are all zero. */
static bool seg_zero(struct ferroce_sq_wqe_hdr *hdr)
{
	static const uint8_t zero[FERROCE_SQ_WQE_DATA_OFFSET -
				  FERROCE_SQ_WQE_SEG_OFFSET];

	return !memcmp((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET, zero,
		       sizeof(zero));
}

/*
 * ibv_bind_mw (type 1): one BIND_MW WQE with the MW's next key, which
 * becomes mw->rkey once posted; length 0 unbinds (still a WQE), with or
 * without an MR. Refused before the ring (the errno returned and set,
 * mw->rkey kept): a type 2 MW, rights a window cannot have, an MR without
 * MW_BIND (or LOCAL_WRITE for remote writes), PDs that differ (EPERM), a
 * non-RC QP, no CAP_MW, a QP that cannot send, a full SQ (ENOMEM).
 */
static void test_bind_mw(void)
{
	struct ibv_mw_bind bind = {
		.wr_id = 81, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ferroce_sq_wqe_bind_mw *seg;
	struct ferroce_sq_wqe_hdr *hdr;
	struct mw_objs o;
	struct fake f;

	fake_init(&f, 4, 4);
	mw_objs_init(&f, &o);
	bind.bind_info = (struct ibv_mw_bind_info){
		.mr = &o.mr.ibv_mr, .addr = 0x10000, .length = 0x2000,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_LOCAL_WRITE,
	};
	CHECK(ferroce_bind_mw(&f.qp.vqp.qp, &o.mw1, &bind) == 0);
	CHECK(o.mw1.rkey == 0x500);
	CHECK(le32toh(f.sq_dbrec.pi) == 1);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 1));
	hdr = sq_wqe(&f, 0);
	seg = bind_seg(hdr);
	CHECK(le64toh(hdr->wr_id) == 81);
	CHECK(hdr->opcode == FERROCE_WR_BIND_MW);
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED);
	CHECK(hdr->num_sge == 0 && hdr->inline_len == 0 && hdr->imm_data == 0);
	CHECK(le64toh(seg->addr) == 0x10000 && le64toh(seg->length) == 0x2000);
	CHECK(le32toh(seg->mw_key) == 0x500 && le32toh(seg->mr_key) == 0x1234);
	/* LOCAL_WRITE is not a window's right */
	CHECK(le32toh(seg->access) == (FERROCE_ACCESS_REMOTE_WRITE |
				       FERROCE_ACCESS_REMOTE_READ));
	CHECK(seg->reserved == 0);

	/* Unbind, as pyverbs does it: the MR, length 0, no rights; fenced */
	bind.wr_id = 82;
	bind.send_flags = IBV_SEND_FENCE | IBV_SEND_INLINE;
	bind.bind_info.length = 0;
	bind.bind_info.mw_access_flags = 0;
	CHECK(ferroce_bind_mw(&f.qp.vqp.qp, &o.mw1, &bind) == 0);
	CHECK(o.mw1.rkey == 0x501);
	hdr = sq_wqe(&f, 1);
	seg = bind_seg(hdr);
	CHECK(hdr->opcode == FERROCE_WR_BIND_MW && le64toh(hdr->wr_id) == 82);
	/* INLINE means nothing without data */
	CHECK(hdr->flags == FERROCE_WQE_FENCE && hdr->inline_len == 0);
	CHECK(le64toh(seg->addr) == 0x10000 && seg->length == 0);
	CHECK(le32toh(seg->mw_key) == 0x501 && le32toh(seg->mr_key) == 0x1234);
	CHECK(seg->access == 0);

	/* Unbind without an MR (ibv_bind_mw() lets addr and length 0 pass) */
	bind.send_flags = 0;
	bind.bind_info = (struct ibv_mw_bind_info){};
	CHECK(ferroce_bind_mw(&f.qp.vqp.qp, &o.mw1, &bind) == 0);
	CHECK(o.mw1.rkey == 0x502);
	seg = bind_seg(sq_wqe(&f, 2));
	CHECK(le32toh(seg->mw_key) == 0x502 && seg->mr_key == 0);
	CHECK(seg->addr == 0 && seg->length == 0 && seg->access == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 3);

	/* Refusals: nothing posted, the key kept */
#define BIND_FAILS(mw, err)						\
	do {								\
		uint32_t key = (mw)->rkey;				\
		errno = 0;						\
		CHECK(ferroce_bind_mw(&f.qp.vqp.qp, mw, &bind) == (err)); \
		CHECK(errno == (err) && (mw)->rkey == key);		\
		CHECK(le32toh(f.sq_dbrec.pi) == 3 && f.qp.sq.pi == 3);	\
	} while (0)
	bind.bind_info = (struct ibv_mw_bind_info){
		.mr = &o.mr.ibv_mr, .addr = 0x10000, .length = 0x100,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ,
	};
	BIND_FAILS(&o.mw2, EINVAL);
	bind.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	BIND_FAILS(&o.mw1, EINVAL);
	bind.bind_info.mw_access_flags = IBV_ACCESS_MW_BIND;
	BIND_FAILS(&o.mw1, EINVAL);
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	bind.bind_info.mr = NULL;		/* a range needs an MR */
	BIND_FAILS(&o.mw1, EINVAL);
	bind.bind_info.mr = &o.mr.ibv_mr;
	o.mr.access = IBV_ACCESS_LOCAL_WRITE;	/* no MW_BIND */
	BIND_FAILS(&o.mw1, EINVAL);
	o.mr.access = IBV_ACCESS_MW_BIND;	/* no LOCAL_WRITE */
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	BIND_FAILS(&o.mw1, EINVAL);
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_ATOMIC;
	BIND_FAILS(&o.mw1, EINVAL);
	o.mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
	o.mr.ibv_mr.pd = &o.other_pd;		/* the MR's PD is not the MW's */
	BIND_FAILS(&o.mw1, EPERM);
	o.mr.ibv_mr.pd = &o.pd;
	f.qp.vqp.qp.pd = &o.other_pd;		/* nor the QP's */
	BIND_FAILS(&o.mw1, EPERM);
	f.qp.vqp.qp.pd = &o.pd;
	f.qp.vqp.qp.qp_type = IBV_QPT_UC;	/* RC only */
	f.ctx->device_caps |= FERROCE_CAP_UC;
	BIND_FAILS(&o.mw1, EINVAL);
	f.qp.vqp.qp.qp_type = IBV_QPT_UD;
	BIND_FAILS(&o.mw1, EINVAL);
	f.qp.vqp.qp.qp_type = IBV_QPT_RC;
	f.ctx->device_caps = FERROCE_CAP_MEM_MGT_EXT;	/* no CAP_MW */
	BIND_FAILS(&o.mw1, EINVAL);
	f.ctx->device_caps = FERROCE_CAP_MW;
	f.qp.vqp.qp.state = IBV_QPS_RTR;
	BIND_FAILS(&o.mw1, EINVAL);
	f.qp.vqp.qp.state = IBV_QPS_RTS;
	/* A REMOTE_READ window on an MR without LOCAL_WRITE is fine */
	o.mr.access = IBV_ACCESS_MW_BIND;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	CHECK(ferroce_bind_mw(&f.qp.vqp.qp, &o.mw1, &bind) == 0);
	CHECK(o.mw1.rkey == 0x503 && le32toh(f.sq_dbrec.pi) == 4);
	/* The SQ (4 deep) is full */
	errno = 0;
	CHECK(ferroce_bind_mw(&f.qp.vqp.qp, &o.mw1, &bind) == ENOMEM);
	CHECK(errno == ENOMEM && o.mw1.rkey == 0x503);
	CHECK(le32toh(f.sq_dbrec.pi) == 4);
#undef BIND_FAILS
	fake_fini(&f);
}

/*
 * ibv_post_send of BIND_MW (type 2 windows: the new key is the caller's,
 * mw->rkey is not changed), LOCAL_INV (the key in imm_data, big endian, no
 * data) and SEND_WITH_INV (a SEND with the key in imm_data), in one chain;
 * RC only, with CAP_MW and CAP_MEM_MGT_EXT.
 */
static void test_post_mw(void)
{
	struct ibv_sge sg = { .addr = 0x1000, .length = 64, .lkey = 0x100 };
	struct ibv_send_wr bind = {}, inv = {}, sinv = {}, wr, *bad;
	char payload[16] = "with invalidate";
	struct ferroce_sq_wqe_bind_mw *seg;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_sge *sge;
	struct ibv_ah ah = {};
	struct mw_objs o;
	struct fake f;

	fake_init(&f, 4, 8);
	mw_objs_init(&f, &o);
	bind.wr_id = 90;
	bind.opcode = IBV_WR_BIND_MW;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_mw.mw = &o.mw2;
	bind.bind_mw.rkey = ibv_inc_rkey(o.mw2.rkey);
	bind.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = &o.mr.ibv_mr, .addr = 0x20000, .length = 0x1000,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	bind.next = &inv;
	inv.wr_id = 91;
	inv.opcode = IBV_WR_LOCAL_INV;
	inv.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	inv.invalidate_rkey = 0x611;
	inv.next = &sinv;
	sinv.wr_id = 92;
	sinv.opcode = IBV_WR_SEND_WITH_INV;
	sinv.sg_list = &sg;
	sinv.num_sge = 1;
	sinv.invalidate_rkey = 0xabcdef12;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &bind, &bad) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 3);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 3));
	CHECK(o.mw2.rkey == 0x610);

	hdr = sq_wqe(&f, 0);
	seg = bind_seg(hdr);
	CHECK(le64toh(hdr->wr_id) == 90 && hdr->opcode == FERROCE_WR_BIND_MW);
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED && hdr->num_sge == 0);
	CHECK(hdr->imm_data == 0 && hdr->inline_len == 0);
	CHECK(le64toh(seg->addr) == 0x20000 && le64toh(seg->length) == 0x1000);
	CHECK(le32toh(seg->mw_key) == 0x611 && le32toh(seg->mr_key) == 0x1234);
	CHECK(le32toh(seg->access) == (FERROCE_ACCESS_REMOTE_READ |
				       FERROCE_ACCESS_REMOTE_ATOMIC));

	hdr = sq_wqe(&f, 1);
	CHECK(le64toh(hdr->wr_id) == 91 && hdr->opcode == FERROCE_WR_LOCAL_INV);
	CHECK(hdr->flags == (FERROCE_WQE_SIGNALED | FERROCE_WQE_FENCE));
	CHECK(hdr->imm_data == htobe32(0x611));
	CHECK(hdr->num_sge == 0 && hdr->inline_len == 0 && seg_zero(hdr));

	hdr = sq_wqe(&f, 2);
	sge = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 92 && hdr->opcode == FERROCE_WR_SEND_INV);
	CHECK(hdr->flags == 0 && hdr->num_sge == 1);
	CHECK(hdr->imm_data == htobe32(0xabcdef12));
	CHECK(((uint8_t *)&hdr->imm_data)[0] == 0xab);	/* network order */
	CHECK(seg_zero(hdr));
	CHECK(le64toh(sge->addr) == 0x1000 && le32toh(sge->length) == 64 &&
	      le32toh(sge->lkey) == 0x100);

	/* SEND_WITH_INV inline, solicited */
	sg.addr = (uintptr_t)payload;
	sg.length = sizeof(payload);
	sinv.send_flags = IBV_SEND_INLINE | IBV_SEND_SOLICITED;
	sinv.next = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &sinv, &bad) == 0);
	hdr = sq_wqe(&f, 3);
	CHECK(hdr->opcode == FERROCE_WR_SEND_INV);
	CHECK(hdr->flags == (FERROCE_WQE_INLINE | FERROCE_WQE_SOLICITED));
	CHECK(hdr->num_sge == 0 && le32toh(hdr->inline_len) == sizeof(payload));
	CHECK(hdr->imm_data == htobe32(0xabcdef12));
	CHECK(!memcmp((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET, payload,
		      sizeof(payload)));
	CHECK(le32toh(f.sq_dbrec.pi) == 4);

	/* Refusals: EINVAL (EPERM for PDs), bad_wr, nothing posted */
#define POST_FAILS(w, err)						\
	do {								\
		bad = NULL;						\
		CHECK(ferroce_post_send(&f.qp.vqp.qp, w, &bad) == (err)); \
		CHECK(bad == (w));					\
		CHECK(le32toh(f.sq_dbrec.pi) == 4 && f.qp.sq.pi == 4);	\
	} while (0)
	bind.next = NULL;
	inv.next = NULL;
	wr = bind;
	wr.bind_mw.mw = &o.mw1;			/* type 1: ibv_bind_mw only */
	wr.bind_mw.rkey = ibv_inc_rkey(o.mw1.rkey);
	POST_FAILS(&wr, EINVAL);
	wr = bind;
	wr.bind_mw.rkey = 0x711;		/* another MW's index */
	POST_FAILS(&wr, EINVAL);
	wr = bind;
	wr.bind_mw.mw = NULL;
	POST_FAILS(&wr, EINVAL);
	wr = bind;
	wr.bind_mw.bind_info.mr = NULL;		/* type 2 always names an MR */
	wr.bind_mw.bind_info.addr = 0;
	wr.bind_mw.bind_info.length = 0;
	POST_FAILS(&wr, EINVAL);
	wr = bind;
	wr.bind_mw.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	POST_FAILS(&wr, EINVAL);
	wr = bind;
	o.mw2.pd = &o.other_pd;
	o.mr.ibv_mr.pd = &o.other_pd;		/* the QP's PD is another */
	POST_FAILS(&wr, EPERM);
	o.mw2.pd = &o.pd;
	POST_FAILS(&wr, EPERM);			/* the MR's PD is another */
	o.mr.ibv_mr.pd = &o.pd;
	wr = bind;
	wr.sg_list = &sg;			/* no data */
	wr.num_sge = 1;
	POST_FAILS(&wr, EINVAL);
	wr = inv;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	POST_FAILS(&wr, EINVAL);
	/* Later WRs of a chain after a refused one are not posted */
	wr = inv;
	wr.num_sge = -1;
	bind.next = &wr;
	wr.next = &inv;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &bind, &bad) == EINVAL);
	CHECK(bad == &wr && le32toh(f.sq_dbrec.pi) == 5);
	bind.next = NULL;
	wr.next = NULL;
	CHECK(sq_wqe(&f, 4)->opcode == FERROCE_WR_BIND_MW);

	/* Without the capabilities */
	f.ctx->device_caps = FERROCE_CAP_MEM_MGT_EXT;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &bind, &bad) == EINVAL);
	CHECK(bad == &bind);
	f.ctx->device_caps = FERROCE_CAP_MW;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &inv, &bad) == EINVAL);
	CHECK(bad == &inv);
	sinv.next = NULL;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &sinv, &bad) == EINVAL);
	CHECK(bad == &sinv);
	CHECK(le32toh(f.sq_dbrec.pi) == 5);

	/* UD: none of the three (UC: test_uc_post) */
	f.ctx->device_caps = FERROCE_CAP_MW | FERROCE_CAP_MEM_MGT_EXT;
	f.qp.vqp.qp.qp_type = IBV_QPT_UD;
	bind.wr.ud.ah = &ah;
	inv.wr.ud.ah = &ah;
	sinv.wr.ud.ah = &ah;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &bind, &bad) == EINVAL);
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &inv, &bad) == EINVAL);
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &sinv, &bad) == EINVAL);
	CHECK(le32toh(f.sq_dbrec.pi) == 5);
#undef POST_FAILS
	fake_fini(&f);
}

/*
 * The extended QP: wr_bind_mw (type 2), wr_local_inv and wr_send_inv on RC
 * QPs of a device with CAP_MW and CAP_MEM_MGT_EXT, the same WQEs as
 * ibv_post_send's; BIND_MW and LOCAL_INV take no setter.
 */
static void test_wr_mw(void)
{
	struct ibv_mw_bind_info info;
	struct ferroce_sq_wqe_bind_mw *seg;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_sge *sge;
	struct ibv_qp_ex *ex;
	struct mw_objs o;
	struct fake f;
	uint64_t ops;

	fake_init(&f, 4, 8);
	mw_objs_init(&f, &o);
	ex = &f.qp.vqp.qp_ex;

	/* What create_qp_ex accepts, by device caps and QP type */
	ops = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
	      IBV_QP_EX_WITH_SEND_WITH_INV;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) == ops);
	f.ctx->device_caps = FERROCE_CAP_MW | FERROCE_CAP_UC;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) ==
	      IBV_QP_EX_WITH_BIND_MW);
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_UC) & ops));
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_UD) & ops));
	f.ctx->device_caps = FERROCE_CAP_MEM_MGT_EXT;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) ==
	      (IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV));
	f.ctx->device_caps = 0;
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops));
	f.ctx->device_caps = FERROCE_CAP_MW | FERROCE_CAP_MEM_MGT_EXT;

	ferroce_qp_set_ex_ops(&f.qp, IBV_QP_EX_WITH_SEND);
	CHECK(!ex->wr_bind_mw && !ex->wr_local_inv && !ex->wr_send_inv);
	ferroce_qp_set_ex_ops(&f.qp, ferroce_qp_send_ops(f.ctx, IBV_QPT_RC));
	CHECK(ex->wr_bind_mw && ex->wr_local_inv && ex->wr_send_inv);

	info = (struct ibv_mw_bind_info){
		.mr = &o.mr.ibv_mr, .addr = 0x30000, .length = 0x40,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	ibv_wr_start(ex);
	ex->wr_id = 100;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(ex, &o.mw2, ibv_inc_rkey(o.mw2.rkey), &info);
	ex->wr_id = 101;
	ex->wr_flags = IBV_SEND_FENCE;
	ibv_wr_local_inv(ex, 0x611);
	ex->wr_id = 102;
	ex->wr_flags = IBV_SEND_SOLICITED;
	ibv_wr_send_inv(ex, 0x12345678);
	ibv_wr_set_sge(ex, 0x100, 0x1000, 64);
	CHECK(ibv_wr_complete(ex) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 3);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 3));

	hdr = sq_wqe(&f, 0);
	seg = bind_seg(hdr);
	CHECK(le64toh(hdr->wr_id) == 100 && hdr->opcode == FERROCE_WR_BIND_MW);
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED && hdr->num_sge == 0);
	CHECK(hdr->imm_data == 0 && hdr->inline_len == 0);
	CHECK(le64toh(seg->addr) == 0x30000 && le64toh(seg->length) == 0x40);
	CHECK(le32toh(seg->mw_key) == 0x611 && le32toh(seg->mr_key) == 0x1234);
	CHECK(le32toh(seg->access) == FERROCE_ACCESS_REMOTE_WRITE);
	CHECK(o.mw2.rkey == 0x610);
	hdr = sq_wqe(&f, 1);
	CHECK(le64toh(hdr->wr_id) == 101 && hdr->opcode == FERROCE_WR_LOCAL_INV);
	CHECK(hdr->flags == FERROCE_WQE_FENCE && hdr->num_sge == 0);
	CHECK(hdr->imm_data == htobe32(0x611) && seg_zero(hdr));
	hdr = sq_wqe(&f, 2);
	sge = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 102 && hdr->opcode == FERROCE_WR_SEND_INV);
	CHECK(hdr->flags == FERROCE_WQE_SOLICITED && hdr->num_sge == 1);
	CHECK(hdr->imm_data == htobe32(0x12345678) && seg_zero(hdr));
	CHECK(le64toh(sge->addr) == 0x1000 && le32toh(sge->lkey) == 0x100);

	/* Refusals discard the batch */
	ex->wr_flags = 0;
	ibv_wr_start(ex);
	ibv_wr_bind_mw(ex, &o.mw1, ibv_inc_rkey(o.mw1.rkey), &info);
	CHECK(ibv_wr_complete(ex) == EINVAL);	/* type 1 */
	ibv_wr_start(ex);
	ibv_wr_send(ex);
	ibv_wr_bind_mw(ex, &o.mw2, 0x911, &info);
	CHECK(ibv_wr_complete(ex) == EINVAL);	/* another index */
	ibv_wr_start(ex);
	ibv_wr_bind_mw(ex, &o.mw2, 0x611, &info);
	ibv_wr_set_sge(ex, 0x100, 0x1000, 64);
	CHECK(ibv_wr_complete(ex) == EINVAL);	/* no data */
	ibv_wr_start(ex);
	ibv_wr_local_inv(ex, 0x611);
	ibv_wr_set_inline_data(ex, &info, 8);
	CHECK(ibv_wr_complete(ex) == EINVAL);
	info.mw_access_flags = IBV_ACCESS_REMOTE_ATOMIC;
	o.mr.access = IBV_ACCESS_MW_BIND;
	ibv_wr_start(ex);
	ibv_wr_bind_mw(ex, &o.mw2, 0x611, &info);
	CHECK(ibv_wr_complete(ex) == EINVAL);	/* no LOCAL_WRITE */
	o.mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
	o.mw2.pd = &o.other_pd;
	ibv_wr_start(ex);
	ibv_wr_bind_mw(ex, &o.mw2, 0x611, &info);
	CHECK(ibv_wr_complete(ex) == EPERM);
	o.mw2.pd = &o.pd;
	CHECK(le32toh(f.sq_dbrec.pi) == 3 && f.qp.sq.pi == 3);

	/* SEND_WITH_INV with inline data */
	ibv_wr_start(ex);
	ibv_wr_send_inv(ex, 0x611);
	ibv_wr_set_inline_data(ex, &info, 8);
	CHECK(ibv_wr_complete(ex) == 0);
	hdr = sq_wqe(&f, 3);
	CHECK(hdr->opcode == FERROCE_WR_SEND_INV);
	CHECK(hdr->flags == FERROCE_WQE_INLINE && le32toh(hdr->inline_len) == 8);
	CHECK(hdr->imm_data == htobe32(0x611));
	CHECK(le32toh(f.sq_dbrec.pi) == 4);
	fake_fini(&f);
}

/*
 * Completions of the memory operations: BIND_MW (5) and LOCAL_INV (6) are
 * send CQEs (they retire the SQ) reported as IBV_WC_BIND_MW and
 * IBV_WC_LOCAL_INV, MW_BIND_ERR as it is; a receive CQE with WITH_INV
 * reports IBV_WC_WITH_INV and the invalidated key in host order, by
 * ibv_poll_cq and by the extended CQ (ibv_wc_read_invalidated_rkey).
 */
static void test_poll_mw(void)
{
	struct ibv_poll_cq_attr attr = {};
	struct ibv_cq_ex *ex;
	struct ibv_wc wc[4];
	struct fake f;

	fake_init(&f, 8, 8);
	device_cqe(&f, 0, 1, FERROCE_WC_BIND_MW, 0);
	device_cqe(&f, 1, 2, FERROCE_WC_LOCAL_INV, 1);
	device_cqe(&f, 2, 3, FERROCE_WC_RECV, 0);
	f.cq.buf[2].flags = FERROCE_CQE_WITH_INV;
	f.cq.buf[2].imm_data = htobe32(0x61122);
	device_cqe(&f, 3, 4, FERROCE_WC_BIND_MW, 2);
	f.cq.buf[3].status = FERROCE_WC_MW_BIND_ERR;
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 4);
	CHECK(wc[0].wr_id == 1 && wc[0].opcode == IBV_WC_BIND_MW);
	CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].wc_flags == 0);
	CHECK(wc[1].wr_id == 2 && wc[1].opcode == IBV_WC_LOCAL_INV);
	CHECK(wc[2].opcode == IBV_WC_RECV);
	CHECK(wc[2].wc_flags == IBV_WC_WITH_INV);
	CHECK(wc[2].invalidated_rkey == 0x61122);
	CHECK(wc[3].opcode == IBV_WC_BIND_MW);
	CHECK(wc[3].status == IBV_WC_MW_BIND_ERR);
	CHECK(f.qp.sq.ci == 3);
	CHECK(f.qp.rq.ci == 1);

	ex = &f.cq.vcq.cq_ex;
	ferroce_cq_set_ex_ops(&f.cq, IBV_WC_EX_WITH_IMM);
	device_cqe(&f, 4, 5, FERROCE_WC_LOCAL_INV, 3);
	device_cqe(&f, 5, 6, FERROCE_WC_RECV, 1);
	f.cq.buf[5].flags = FERROCE_CQE_WITH_INV;
	f.cq.buf[5].imm_data = htobe32(0xabcdef01);
	device_cqe(&f, 6, 7, FERROCE_WC_RECV_RDMA_WITH_IMM, 2);
	f.cq.buf[6].flags = FERROCE_CQE_WITH_IMM;
	f.cq.buf[6].imm_data = htobe32(0xabcdef01);
	device_cqe(&f, 7, 8, FERROCE_WC_BIND_MW, 4);
	CHECK(ibv_start_poll(ex, &attr) == 0);
	CHECK(ex->wr_id == 5 && ibv_wc_read_opcode(ex) == IBV_WC_LOCAL_INV);
	CHECK(ibv_wc_read_wc_flags(ex) == 0);
	CHECK(ibv_next_poll(ex) == 0);
	CHECK(ibv_wc_read_opcode(ex) == IBV_WC_RECV);
	CHECK(ibv_wc_read_wc_flags(ex) == IBV_WC_WITH_INV);
	CHECK(ibv_wc_read_invalidated_rkey(ex) == 0xabcdef01);
	CHECK(ibv_next_poll(ex) == 0);
	CHECK(ibv_wc_read_wc_flags(ex) == IBV_WC_WITH_IMM);
	CHECK(ibv_wc_read_imm_data(ex) == htobe32(0xabcdef01));
	CHECK(ibv_next_poll(ex) == 0);
	CHECK(ex->wr_id == 8 && ibv_wc_read_opcode(ex) == IBV_WC_BIND_MW);
	CHECK(ibv_next_poll(ex) == ENOENT);
	ibv_end_poll(ex);
	CHECK(f.qp.sq.ci == 5 && f.qp.rq.ci == 3);
	fake_fini(&f);
}

/*
 * ibv_alloc_mw / ibv_dealloc_mw against the fake driver (alloc_mw takes no
 * driver data); mw_cmd_ret is what the next command answers.
 */
static int mw_alloc_calls, mw_dealloc_calls, mw_cmd_ret;
static enum ibv_mw_type mw_alloc_type;

int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size)
{
	mw_alloc_calls++;
	mw_alloc_type = type;
	CHECK(cmd_size == sizeof(*cmd) && resp_size == sizeof(*resp));
	if (mw_cmd_ret)
		return mw_cmd_ret;
	mw->context = pd->context;
	mw->pd = pd;
	mw->rkey = 0x4200 + mw_alloc_calls;
	mw->handle = mw_alloc_calls;
	mw->type = type;
	return 0;
}

int ibv_cmd_dealloc_mw(struct ibv_mw *mw)
{
	mw_dealloc_calls++;
	return mw_cmd_ret;
}

/* rereg_mr of the fake driver: answers rereg_ret */
static int rereg_calls, rereg_ret;

int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_sz)
{
	rereg_calls++;
	return rereg_ret;
}

/*
 * Memory windows through the provider's verbs: allocated only with CAP_MW
 * (EOPNOTSUPP before any command otherwise) and of type 1 or 2 (EINVAL);
 * the driver's errors passed on; ibv_bind_mw reaches ferroce_bind_mw on a
 * QP of the provider; rereg_mr keeps the MR's rights the bind checks.
 */
static void test_mw_verbs(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_qp_init_attr qattr = { .qp_type = IBV_QPT_RC };
	struct verbs_mr vmr = {};
	struct ibv_mw_bind bind = {};
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_pd pd = {};
	struct ibv_mw *mw1, *mw2;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint16_t pi;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	pd.context = &vctx->context;
	CHECK(vctx->context.ops.alloc_mw == ferroce_alloc_mw);
	CHECK(vctx->context.ops.dealloc_mw == ferroce_dealloc_mw);
	CHECK(vctx->context.ops.bind_mw == ferroce_bind_mw);

	/* No CAP_MW (the first release's device) */
	CHECK(!(ctx->device_caps & FERROCE_CAP_MW));
	errno = 0;
	CHECK(!ibv_alloc_mw(&pd, IBV_MW_TYPE_1) && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(!ferroce_alloc_mw(&pd, IBV_MW_TYPE_2) && errno == EOPNOTSUPP);
	CHECK(mw_alloc_calls == 0);

	ctx->device_caps |= FERROCE_CAP_MW | FERROCE_CAP_MEM_MGT_EXT;
	errno = 0;
	CHECK(!ibv_alloc_mw(&pd, 3) && errno == EINVAL);
	errno = 0;
	CHECK(!ibv_alloc_mw(&pd, 0) && errno == EINVAL);
	CHECK(mw_alloc_calls == 0);
	mw_cmd_ret = ENOSPC;
	errno = 0;
	CHECK(!ibv_alloc_mw(&pd, IBV_MW_TYPE_1) && errno == ENOSPC);
	CHECK(mw_alloc_calls == 1);
	mw_cmd_ret = 0;
	mw1 = ibv_alloc_mw(&pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(&pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2);
	if (!mw1 || !mw2)
		goto out_ctx;
	CHECK(mw_alloc_calls == 3 && mw_alloc_type == IBV_MW_TYPE_2);
	CHECK(mw1->type == IBV_MW_TYPE_1 && mw1->pd == &pd &&
	      mw1->rkey == 0x4202);
	CHECK(mw2->type == IBV_MW_TYPE_2 && mw2->rkey == 0x4203);

	/* ibv_bind_mw on an RTS QP of the provider */
	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_mw;
	qattr.send_cq = cq;
	qattr.recv_cq = cq;
	qattr.cap = (struct ibv_qp_cap){ .max_send_wr = 4, .max_send_sge = 1 };
	qp = ferroce_create_qp(&pd, &qattr);
	CHECK(qp);
	if (!qp)
		goto out_cq;
	qp->state = IBV_QPS_RTS;
	vmr.ibv_mr.context = &vctx->context;
	vmr.ibv_mr.pd = &pd;
	vmr.ibv_mr.lkey = 0x777;
	vmr.mr_type = IBV_MR_TYPE_MR;
	vmr.access = IBV_ACCESS_LOCAL_WRITE;
	bind.bind_info = (struct ibv_mw_bind_info){
		.mr = &vmr.ibv_mr, .addr = 0x1000, .length = 0x100,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	pi = to_fqp(qp)->sq.pi;
	CHECK(ibv_bind_mw(qp, mw2, &bind) == EINVAL);	/* libibverbs' check */
	CHECK(ibv_bind_mw(qp, mw1, &bind) == EINVAL);	/* no MW_BIND */
	CHECK(to_fqp(qp)->sq.pi == pi);

	/* rereg_mr: the new rights once the driver took them */
	rereg_ret = EINVAL;
	CHECK(ferroce_rereg_mr(&vmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) ==
	      EINVAL);
	CHECK(vmr.access == IBV_ACCESS_LOCAL_WRITE);
	rereg_ret = 0;
	CHECK(ferroce_rereg_mr(&vmr, IBV_REREG_MR_CHANGE_PD, &pd, NULL, 0,
			       0) == 0);
	CHECK(vmr.access == IBV_ACCESS_LOCAL_WRITE);
	CHECK(ferroce_rereg_mr(&vmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) ==
	      0);
	CHECK(vmr.access == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
	CHECK(rereg_calls == 3);

	CHECK(ibv_bind_mw(qp, mw1, &bind) == 0);
	CHECK(mw1->rkey == 0x4203);
	CHECK(to_fqp(qp)->sq.pi == (uint16_t)(pi + 1));
	hdr = ferroce_wqe(&to_fqp(qp)->sq, pi);
	CHECK(hdr->opcode == FERROCE_WR_BIND_MW && hdr->flags == 0);
	CHECK(le32toh(bind_seg(hdr)->mw_key) == 0x4203);
	CHECK(ferroce_destroy_qp(qp) == 0);
out_cq:
	CHECK(ferroce_destroy_cq(cq) == 0);
out_mw:
	/* A failing dealloc keeps the MW */
	mw_cmd_ret = EBUSY;
	CHECK(ibv_dealloc_mw(mw1) == EBUSY);
	mw_cmd_ret = 0;
	CHECK(ibv_dealloc_mw(mw1) == 0);
	CHECK(ibv_dealloc_mw(mw2) == 0);
	CHECK(mw_dealloc_calls == 3);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

/*
 * ATOMIC_WRITE and FLUSH (device 1.8, CAP_ATOMIC_WRITE and CAP_FLUSH): RC
 * QPs only, with the caps; posted by ibv_wr_atomic_write and ibv_wr_flush
 * only (ibv_send_wr has no fields for them: ibv_post_send refuses them).
 * Their WQEs have no SGEs, no inline data and no setter, the segment of
 * device.rst ("Atomic write and flush") and every reserved byte 0.
 */
static void test_wr_mpe(void)
{
	static const uint8_t data[8] = { 0x11, 0x22, 0x33, 0x44,
					 0x55, 0x66, 0x77, 0x88 };
	const uint64_t ops = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH;
	struct ibv_sge sg = { .addr = 0x1000, .length = 8, .lkey = 0x100 };
	struct ferroce_sq_wqe_atomic_write *aw;
	struct ibv_send_wr wr = {}, *bad;
	struct ferroce_sq_wqe_flush *fl;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ibv_qp_ex *ex;
	struct fake f;

	fake_init(&f, 4, 8);
	ex = &f.qp.vqp.qp_ex;

	/* What create_qp_ex accepts, by device caps and QP type */
	f.ctx->device_caps = FERROCE_CAP_ATOMIC_WRITE | FERROCE_CAP_FLUSH |
			     FERROCE_CAP_UC;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) == ops);
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_UC) & ops));
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_UD) & ops));
	f.ctx->device_caps = FERROCE_CAP_ATOMIC_WRITE;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) ==
	      IBV_QP_EX_WITH_ATOMIC_WRITE);
	f.ctx->device_caps = FERROCE_CAP_FLUSH;
	CHECK((ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops) ==
	      IBV_QP_EX_WITH_FLUSH);
	/* a 1.7 device */
	f.ctx->device_caps = FERROCE_CAP_ATOMIC | FERROCE_CAP_MEM_MGT_EXT |
			     FERROCE_CAP_MW | FERROCE_CAP_UC;
	CHECK(!(ferroce_qp_send_ops(f.ctx, IBV_QPT_RC) & ops));
	f.ctx->device_caps = FERROCE_CAP_ATOMIC_WRITE | FERROCE_CAP_FLUSH;

	ferroce_qp_set_ex_ops(&f.qp, IBV_QP_EX_WITH_SEND);
	CHECK(!ex->wr_atomic_write && !ex->wr_flush);
	ferroce_qp_set_ex_ops(&f.qp, ferroce_qp_send_ops(f.ctx, IBV_QPT_RC));
	CHECK(ex->wr_atomic_write && ex->wr_flush);

	/* Stale bytes in the slots: the reserved fields are written as 0 */
	memset(f.qp.sq.buf, 0xa5, 8 * 128);
	ibv_wr_start(ex);
	ex->wr_id = 110;
	ex->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_atomic_write(ex, 0x4321, 0x7000008, data);
	ex->wr_id = 111;
	ex->wr_flags = IBV_SEND_FENCE;
	ibv_wr_flush(ex, 0x4322, 0x7000000, 4096, IBV_FLUSH_GLOBAL,
		     IBV_FLUSH_RANGE);
	ex->wr_id = 112;
	ex->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	ibv_wr_flush(ex, 0x4323, 0x7000010, UINT32_MAX,
		     IBV_FLUSH_GLOBAL | IBV_FLUSH_PERSISTENT, IBV_FLUSH_MR);
	ex->wr_id = 113;
	ex->wr_flags = 0;
	ibv_wr_flush(ex, 0x4324, 0, 0, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	CHECK(ibv_wr_complete(ex) == 0);
	CHECK(le32toh(f.sq_dbrec.pi) == 4);
	CHECK(le64toh(f.db_page[FERROCE_DB_SQ / 8]) ==
	      FERROCE_DB_SQ_VAL(0x123, 4));

	hdr = sq_wqe(&f, 0);
	aw = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 110);
	CHECK(hdr->opcode == FERROCE_WR_ATOMIC_WRITE && hdr->opcode == 15);
	/* INLINE means nothing without data */
	CHECK(hdr->flags == FERROCE_WQE_SIGNALED);
	CHECK(hdr->num_sge == 0 && hdr->inline_len == 0 && hdr->imm_data == 0);
	CHECK(hdr->reserved0 == 0 && hdr->reserved1 == 0 &&
	      hdr->reserved2 == 0);
	CHECK(le64toh(aw->remote_addr) == 0x7000008);
	CHECK(le32toh(aw->rkey) == 0x4321);
	/* the bytes as they are, not a number in some byte order */
	CHECK(!memcmp(aw->data, data, sizeof(data)));
	CHECK(aw->reserved0 == 0 && aw->reserved1 == 0);

	hdr = sq_wqe(&f, 1);
	fl = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 111);
	CHECK(hdr->opcode == FERROCE_WR_FLUSH && hdr->opcode == 14);
	CHECK(hdr->flags == FERROCE_WQE_FENCE);
	CHECK(hdr->num_sge == 0 && hdr->inline_len == 0 && hdr->imm_data == 0);
	CHECK(hdr->reserved0 == 0 && hdr->reserved1 == 0 &&
	      hdr->reserved2 == 0);
	CHECK(le64toh(fl->remote_addr) == 0x7000000);
	CHECK(le32toh(fl->rkey) == 0x4322 && le32toh(fl->length) == 4096);
	CHECK(fl->type == FERROCE_FLUSH_GLOBAL);
	CHECK(fl->level == FERROCE_FLUSH_RANGE);
	CHECK(!memcmp(fl->reserved0, "\0\0\0\0\0\0", 6) && fl->reserved1 == 0);

	hdr = sq_wqe(&f, 2);
	fl = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 112 && hdr->opcode == FERROCE_WR_FLUSH);
	CHECK(hdr->flags == (FERROCE_WQE_SIGNALED | FERROCE_WQE_SOLICITED));
	CHECK(le64toh(fl->remote_addr) == 0x7000010);
	CHECK(le32toh(fl->rkey) == 0x4323 && le32toh(fl->length) == UINT32_MAX);
	CHECK(fl->type == (FERROCE_FLUSH_GLOBAL | FERROCE_FLUSH_PERSISTENT));
	CHECK(fl->level == FERROCE_FLUSH_MR);
	CHECK(!memcmp(fl->reserved0, "\0\0\0\0\0\0", 6) && fl->reserved1 == 0);

	/* A persistent flush is the responder's to refuse */
	hdr = sq_wqe(&f, 3);
	fl = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	CHECK(le64toh(hdr->wr_id) == 113 && hdr->opcode == FERROCE_WR_FLUSH);
	CHECK(hdr->flags == 0 && fl->remote_addr == 0 && fl->length == 0);
	CHECK(fl->type == FERROCE_FLUSH_PERSISTENT);
	CHECK(fl->level == FERROCE_FLUSH_RANGE);

	/* Refusals discard the batch: nothing is rung */
#define WR_FAILS(calls, err)						\
	do {								\
		ibv_wr_start(ex);					\
		ibv_wr_send(ex);					\
		calls;							\
		CHECK(ibv_wr_complete(ex) == (err));			\
		CHECK(le32toh(f.sq_dbrec.pi) == 4 && f.qp.sq.pi == 4);	\
	} while (0)
	ferroce_qp_set_ex_ops(&f.qp, ops | IBV_QP_EX_WITH_SEND);
	WR_FAILS(ibv_wr_flush(ex, 1, 0, (size_t)UINT32_MAX + 1,
			      IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE), EINVAL);
	WR_FAILS(ibv_wr_flush(ex, 1, 0, 8, 0, IBV_FLUSH_RANGE), EINVAL);
	WR_FAILS(ibv_wr_flush(ex, 1, 0, 8, 4, IBV_FLUSH_RANGE), EINVAL);
	WR_FAILS(ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL | 0x80,
			      IBV_FLUSH_MR), EINVAL);
	WR_FAILS(ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL, 2), EINVAL);
	/* no data: no setter */
	WR_FAILS((ibv_wr_atomic_write(ex, 1, 0x7000000, data),
		  ibv_wr_set_sge(ex, 0x100, 0x1000, 8)), EINVAL);
	WR_FAILS((ibv_wr_atomic_write(ex, 1, 0x7000000, data),
		  ibv_wr_set_inline_data(ex, (void *)data, 8)), EINVAL);
	WR_FAILS((ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR),
		  ibv_wr_set_sge(ex, 0x100, 0x1000, 8)), EINVAL);
	/* the first error is the one returned */
	WR_FAILS((ibv_wr_set_sge(ex, 0x100, 0x1000, 8),
		  ibv_wr_set_sge(ex, 0x100, 0x1000, 8),
		  ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR),
		  ibv_wr_atomic_write(ex, 1, 0, data),
		  ibv_wr_send(ex), ibv_wr_send(ex), ibv_wr_send(ex),
		  ibv_wr_send(ex)), EINVAL);
	/* full: 4 of 8 slots taken, the 5th WQE of the batch */
	WR_FAILS((ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR),
		  ibv_wr_atomic_write(ex, 1, 0, data),
		  ibv_wr_atomic_write(ex, 1, 0, data),
		  ibv_wr_flush(ex, 1, 0, 8, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR)),
		 ENOMEM);
#undef WR_FAILS

	/* ibv_post_send: no fields for them, EINVAL whatever the caps */
	wr.wr_id = 120;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = 0x7000000;
	wr.wr.rdma.rkey = 0x4321;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	CHECK(bad == &wr);
	wr.opcode = IBV_WR_FLUSH;
	wr.num_sge = 0;
	bad = NULL;
	CHECK(ferroce_post_send(&f.qp.vqp.qp, &wr, &bad) == EINVAL);
	CHECK(bad == &wr);
	CHECK(le32toh(f.sq_dbrec.pi) == 4 && f.qp.sq.pi == 4);
	fake_fini(&f);
}

/*
 * Completions of ATOMIC_WRITE (9) and FLUSH (8): send CQEs that retire the
 * SQ, reported as IBV_WC_ATOMIC_WRITE (byte_len 8) and IBV_WC_FLUSH
 * (byte_len 0) by ibv_poll_cq and by the extended CQ; a refused flush with
 * its error status.
 */
static void test_poll_mpe(void)
{
	struct ibv_poll_cq_attr attr = {};
	struct ibv_cq_ex *ex;
	struct ibv_wc wc[4];
	struct fake f;

	fake_init(&f, 8, 8);
	device_cqe(&f, 0, 1, FERROCE_WC_ATOMIC_WRITE, 0);
	f.cq.buf[0].byte_len = htole32(8);
	device_cqe(&f, 1, 2, FERROCE_WC_FLUSH, 1);
	f.cq.buf[1].byte_len = 0;
	device_cqe(&f, 2, 3, FERROCE_WC_FLUSH, 3);
	f.cq.buf[2].byte_len = 0;
	f.cq.buf[2].status = IBV_WC_REM_ACCESS_ERR;
	CHECK(ferroce_poll_cq(&f.cq.vcq.cq, 4, wc) == 3);
	CHECK(wc[0].wr_id == 1 && wc[0].opcode == IBV_WC_ATOMIC_WRITE);
	CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 8);
	CHECK(wc[0].wc_flags == 0 && wc[0].qp_num == 0x123);
	CHECK(wc[1].wr_id == 2 && wc[1].opcode == IBV_WC_FLUSH);
	CHECK(wc[1].status == IBV_WC_SUCCESS && wc[1].byte_len == 0);
	CHECK(wc[2].opcode == IBV_WC_FLUSH);
	CHECK(wc[2].status == IBV_WC_REM_ACCESS_ERR);
	CHECK(f.qp.sq.ci == 4 && f.qp.rq.ci == 0);

	ex = &f.cq.vcq.cq_ex;
	ferroce_cq_set_ex_ops(&f.cq, IBV_WC_EX_WITH_BYTE_LEN);
	device_cqe(&f, 3, 4, FERROCE_WC_FLUSH, 4);
	f.cq.buf[3].byte_len = 0;
	device_cqe(&f, 4, 5, FERROCE_WC_ATOMIC_WRITE, 5);
	f.cq.buf[4].byte_len = htole32(8);
	CHECK(ibv_start_poll(ex, &attr) == 0);
	CHECK(ex->wr_id == 4 && ibv_wc_read_opcode(ex) == IBV_WC_FLUSH);
	CHECK(ibv_wc_read_byte_len(ex) == 0);
	CHECK(ibv_next_poll(ex) == 0);
	CHECK(ex->wr_id == 5 && ibv_wc_read_opcode(ex) == IBV_WC_ATOMIC_WRITE);
	CHECK(ex->status == IBV_WC_SUCCESS && ibv_wc_read_byte_len(ex) == 8);
	CHECK(ibv_next_poll(ex) == ENOENT);
	ibv_end_poll(ex);
	CHECK(f.qp.sq.ci == 6 && le32toh(f.cq_dbrec.ci) == 5);
	fake_fini(&f);
}

/*
 * Importing (ibv_import_device, ibv_import_pd, ibv_import_mr) against a
 * fake 1.8 driver: QUERY_CONTEXT answers import_qc_ret; the extended
 * QUERY_DEVICE answers with import_ctx as the driver data, or (an older
 * driver) none (import_qd_drv false), or is not there at all
 * (import_qd_ex false: libibverbs falls back to the old command and
 * reports its length). QUERY_MR answers import_qmr_ret or the MR below.
 */
static const struct ferroce_uresp_alloc_ctx import_ctx = {
	.db_mmap_offset = 3 * 4096, .db_page = 7,
	.device_caps = FERROCE_CAP_ATOMIC | FERROCE_CAP_MW |
		       FERROCE_CAP_ATOMIC_WRITE | FERROCE_CAP_FLUSH,
	.max_qp_wr = 1024, .max_sge = 16, .max_inline = 512, .max_cqe = 8192,
};
static int import_qc_calls, import_qc_ret, import_qd_calls, import_qmr_ret;
static bool import_qd_ex = true, import_qd_drv = true;
static int dealloc_pd_calls, dereg_mr_calls;

int ibv_cmd_query_context(struct ibv_context *ctx,
			  struct ibv_command_buffer *driver)
{
	import_qc_calls++;
	if (import_qc_ret)
		return import_qc_ret;
	ctx->num_comp_vectors = 3;
	return 0;
}

int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size)
{
	struct ferroce_query_device_ex_resp *r = container_of(
		resp, struct ferroce_query_device_ex_resp, ibv_resp);
	static const struct ferroce_uresp_alloc_ctx zero;

	import_qd_calls++;
	memset(attr, 0, attr_size);
	attr->orig_attr.max_qp_wr = 4321;
	/* libibverbs tries the extended command for more than the old attrs */
	if (!import_qd_ex || attr_size <= sizeof(attr->orig_attr)) {
		resp->base.max_qp_wr = 4321;
		*resp_size = sizeof(resp->base);
		return 0;
	}
	resp->base.max_qp_wr = 4321;
	/* the core response's length, as the kernel reports it */
	resp->response_length = sizeof(*resp);
	if (import_qd_drv && *resp_size >= sizeof(*r)) {
		/* zero-filled by the provider, as the ABI asks */
		CHECK(!memcmp(&r->drv_payload, &zero, sizeof(zero)));
		r->drv_payload = import_ctx;
	}
	*resp_size = resp->response_length;
	return 0;
}

int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
		     uint32_t mr_handle)
{
	if (import_qmr_ret)
		return import_qmr_ret;
	/* what libibverbs' sets */
	vmr->ibv_mr.lkey = 0x3344;
	vmr->ibv_mr.rkey = 0x3344;
	vmr->ibv_mr.length = 0x10000;
	vmr->ibv_mr.handle = mr_handle;
	vmr->ibv_mr.context = pd->context;
	vmr->ibv_mr.pd = pd;
	vmr->ibv_mr.addr = NULL;
	vmr->mr_type = IBV_MR_TYPE_IMPORTED_MR;
	return 0;
}

int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	dealloc_pd_calls++;
	return 0;
}

int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{
	dereg_mr_calls++;
	return 0;
}

/*
 * A context imported from a cmd_fd that is a file of four pages: the
 * doorbell page is mapped from it at import_ctx.db_mmap_offset. The
 * context owns the file (closed by ferroce_free_context, or on failure);
 * *dup_fd (if not NULL) is a dup of it to read the doorbells with.
 */
static struct verbs_context *import_context(struct verbs_device *vdev,
					    int *dup_fd)
{
	char path[] = "/tmp/ferroce-unit-XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0 && unlink(path) == 0 && ftruncate(fd, 4 * 4096) == 0);
	if (dup_fd)
		*dup_fd = dup(fd);
	atomic_store(&vdev->refcount, 1);
	return ferroce_dev_ops.import_context(&vdev->device, fd);
}

/*
 * ibv_import_device: the context's values come from the extended
 * QUERY_DEVICE, no ALLOC_CONTEXT is sent; a driver that does not let
 * contexts be imported or does not return them: NULL, errno, nothing
 * left behind. Then what rdma-core's test_shared_pd does: a PD and an MR
 * imported by handle (no command), a CQ and an extended QP of the
 * imported context that writes with the imported MR's keys; unimporting
 * sends no DEALLOC_PD or DEREG_MR.
 */
static void test_import(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	struct ibv_qp_init_attr_ex xattr = {};
	struct ferroce_sq_wqe_rdma *rdma;
	struct ferroce_sq_wqe_hdr *hdr;
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_device_attr_ex attr;
	struct ferroce_sge *sge;
	struct ibv_qp_ex *ex;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int calls, fd = -1;
	uint64_t db;

	CHECK(ferroce_dev_ops.import_context == ferroce_import_context);

	/* Refused: no command beyond the failing one, the device let go */
	calls = old_driver_calls;
	import_qc_ret = EOPNOTSUPP;
	errno = 0;
	CHECK(!import_context(&vdev, NULL) && errno == EOPNOTSUPP);
	CHECK(import_qc_calls == 1 && import_qd_calls == 0);
	CHECK(atomic_load(&vdev.refcount) == 1);
	import_qc_ret = 0;
	import_qd_drv = false;			/* a driver before 1.8 */
	errno = 0;
	CHECK(!import_context(&vdev, NULL) && errno == EOPNOTSUPP);
	CHECK(import_qc_calls == 2 && import_qd_calls == 1);
	CHECK(atomic_load(&vdev.refcount) == 1);
	import_qd_drv = true;
	import_qd_ex = false;			/* a kernel without it */
	errno = 0;
	CHECK(!import_context(&vdev, NULL) && errno == EOPNOTSUPP);
	CHECK(import_qd_calls == 2);
	CHECK(atomic_load(&vdev.refcount) == 1);
	import_qd_ex = true;
	CHECK(old_driver_calls == calls);

	vctx = import_context(&vdev, &fd);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	CHECK(import_qc_calls == 4 && import_qd_calls == 3);
	CHECK(old_driver_calls == calls);	/* no ALLOC_CONTEXT */
	CHECK(vctx->context.num_comp_vectors == 3);
	CHECK(ctx->device_caps == import_ctx.device_caps);
	CHECK(ctx->max_qp_wr == import_ctx.max_qp_wr);
	CHECK(ctx->max_sge == import_ctx.max_sge);
	CHECK(ctx->max_inline == import_ctx.max_inline);
	CHECK(ctx->max_cqe == import_ctx.max_cqe);
	CHECK(ctx->db && ctx->db != MAP_FAILED);
	CHECK(vctx->context.ops.poll_cq == ferroce_poll_cq);
	CHECK(vctx->context.ops.post_send == ferroce_post_send);
	/* query_device goes on without driver data */
	CHECK(ferroce_query_device(&vctx->context, NULL, &attr,
				   sizeof(attr)) == 0);
	CHECK(attr.orig_attr.max_qp_wr == 4321);
	CHECK(import_qd_calls == 4);

	/* PD: no command either way */
	pd = ibv_import_pd(&vctx->context, 0x55);
	CHECK(pd);
	if (!pd)
		goto out_ctx;
	CHECK(pd->context == &vctx->context && pd->handle == 0x55);

	/* MR: QUERY_MR's answer; its failure passed on */
	import_qmr_ret = ENOENT;
	errno = 0;
	CHECK(!ibv_import_mr(pd, 0x66) && errno == ENOENT);
	import_qmr_ret = 0;
	mr = ibv_import_mr(pd, 0x66);
	CHECK(mr);
	if (!mr)
		goto out_pd;
	CHECK(mr->handle == 0x66 && mr->pd == pd &&
	      mr->context == &vctx->context);
	CHECK(mr->lkey == 0x3344 && mr->rkey == 0x3344 &&
	      mr->length == 0x10000 && !mr->addr);
	CHECK(verbs_get_mr(mr)->mr_type == IBV_MR_TYPE_IMPORTED_MR);

	/* An RDMA WRITE of the imported context, with the imported keys */
	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_mr;
	xattr = (struct ibv_qp_init_attr_ex){
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_send_sge = 1,
			 .max_recv_wr = 4, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_ATOMIC_WRITE |
				  IBV_QP_EX_WITH_FLUSH,
	};
	qp = ferroce_create_qp_ex(&vctx->context, &xattr);
	CHECK(qp);
	if (!qp)
		goto out_cq;
	CHECK(qp->pd == pd);
	CHECK(ferroce_find_qp(ctx, v1_qp.qpn) == to_fqp(qp));
	qp->state = IBV_QPS_RTS;
	ex = ibv_qp_to_qp_ex(qp);
	CHECK(ex && ex->wr_rdma_write && ex->wr_atomic_write && ex->wr_flush);
	ibv_wr_start(ex);
	ex->wr_id = 0x123;
	ex->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(ex, 0x7788, 0x20000);
	ibv_wr_set_sge(ex, mr->lkey, 0x30000, 1024);
	CHECK(ibv_wr_complete(ex) == 0);
	hdr = ferroce_wqe(&to_fqp(qp)->sq, 0);
	rdma = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_SEG_OFFSET);
	sge = (void *)((uint8_t *)hdr + FERROCE_SQ_WQE_DATA_OFFSET);
	CHECK(hdr->opcode == FERROCE_WR_RDMA_WRITE && hdr->num_sge == 1);
	CHECK(le32toh(rdma->rkey) == 0x7788);
	CHECK(le32toh(sge->lkey) == 0x3344 && le64toh(sge->addr) == 0x30000);
	CHECK(le32toh(to_fqp(qp)->sq.dbrec->pi) == 1);
	/* rung through the doorbell page at the offset the driver named */
	CHECK(pread(fd, &db, sizeof(db), import_ctx.db_mmap_offset +
		    FERROCE_DB_SQ) == sizeof(db));
	CHECK(le64toh(db) == FERROCE_DB_SQ_VAL(v1_qp.qpn, 1));

	/*
	 * A window bound to an imported MR: its rights are not known (0
	 * here), the device checks them
	 */
	{
		struct ibv_mw mw = { .context = &vctx->context, .pd = pd,
				     .rkey = 0x900, .type = IBV_MW_TYPE_2 };
		struct ibv_send_wr bwr = {
			.opcode = IBV_WR_BIND_MW,
			.bind_mw = { .mw = &mw, .rkey = 0x901, .bind_info = {
				.mr = mr, .addr = 0x30000, .length = 64,
				.mw_access_flags = IBV_ACCESS_REMOTE_WRITE } },
		}, *bad;

		CHECK(verbs_get_mr(mr)->access == 0);
		CHECK(ferroce_post_send(qp, &bwr, &bad) == 0);
		hdr = ferroce_wqe(&to_fqp(qp)->sq, 1);
		CHECK(hdr->opcode == FERROCE_WR_BIND_MW);
		CHECK(le32toh(bind_seg(hdr)->mr_key) == 0x3344);
	}
	CHECK(ferroce_destroy_qp(qp) == 0);
out_cq:
	CHECK(ferroce_destroy_cq(cq) == 0);
out_mr:
	ibv_unimport_mr(mr);
out_pd:
	ibv_unimport_pd(pd);
	CHECK(dealloc_pd_calls == 0 && dereg_mr_calls == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
	close(fd);
}

/*
 * create_qp_ex with ATOMIC_WRITE or FLUSH: EOPNOTSUPP before any command
 * on a device without the cap (the first release's) and on UC; an RC QP
 * with the caps gets the builders.
 */
static void test_mpe_create(void)
{
	static struct verbs_device vdev = FAKE_VERBS_DEVICE;
	static const uint64_t ops[] = {
		IBV_QP_EX_WITH_ATOMIC_WRITE, IBV_QP_EX_WITH_FLUSH,
	};
	struct ibv_qp_init_attr_ex xattr;
	struct ferroce_context *ctx;
	struct verbs_context *vctx;
	struct ibv_pd pd = {};
	struct ibv_qp_ex *ex;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	size_t i;
	int calls;

	vctx = old_driver_context(&vdev);
	CHECK(vctx);
	if (!vctx)
		return;
	ctx = to_fctx(&vctx->context);
	cq = ferroce_create_cq(&vctx->context, 16, NULL, 0);
	CHECK(cq);
	if (!cq)
		goto out_ctx;
	pd.context = &vctx->context;
	xattr = (struct ibv_qp_init_attr_ex){
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = &pd,
	};

	calls = old_driver_calls;
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		/* no cap */
		ctx->device_caps = FERROCE_CAP_UC;
		xattr.qp_type = IBV_QPT_RC;
		xattr.send_ops_flags = IBV_QP_EX_WITH_SEND | ops[i];
		errno = 0;
		CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
		      errno == EOPNOTSUPP);
		/* the other cap only */
		ctx->device_caps = ops[i] == IBV_QP_EX_WITH_FLUSH ?
				   FERROCE_CAP_ATOMIC_WRITE : FERROCE_CAP_FLUSH;
		errno = 0;
		CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
		      errno == EOPNOTSUPP);
		/* UC */
		ctx->device_caps = FERROCE_CAP_UC | FERROCE_CAP_ATOMIC_WRITE |
				   FERROCE_CAP_FLUSH;
		xattr.qp_type = IBV_QPT_UC;
		errno = 0;
		CHECK(!ferroce_create_qp_ex(&vctx->context, &xattr) &&
		      errno == EOPNOTSUPP);
	}
	CHECK(old_driver_calls == calls);

	xattr.qp_type = IBV_QPT_RC;
	xattr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE |
			       IBV_QP_EX_WITH_FLUSH;
	qp = ferroce_create_qp_ex(&vctx->context, &xattr);
	CHECK(qp);
	CHECK(old_driver_calls == calls + 1);
	if (qp) {
		ex = ibv_qp_to_qp_ex(qp);
		CHECK(ex && ex->wr_atomic_write && ex->wr_flush);
		CHECK(ex && !ex->wr_send && !ex->wr_rdma_write);
		CHECK(ferroce_destroy_qp(qp) == 0);
	}
	CHECK(ferroce_destroy_cq(cq) == 0);
out_ctx:
	ferroce_free_context(&vctx->context);
	CHECK(atomic_load(&vdev.refcount) == 1);
}

int main(void)
{
	test_sizing();
	test_poll();
	test_poll_ex();
	test_clean();
	test_post();
	test_wr();
	test_threads();
	test_old_driver();
	test_uc_post();
	test_uc_create();
	test_srq_sizing();
	test_srq_post();
	test_srq_poll();
	test_srq_threads();
	test_srq_create();
	test_srq_resize();
	test_srq_resize_threads();
	test_cq_resize();
	test_cq_resize_ex();
	test_bind_mw();
	test_post_mw();
	test_wr_mw();
	test_poll_mw();
	test_mw_verbs();
	test_wr_mpe();
	test_poll_mpe();
	test_mpe_create();
	test_import();
	if (failures) {
		fprintf(stderr, "ferroce-unit: %d check(s) failed\n", failures);
		return 1;
	}
	printf("ferroce-unit: all checks passed\n");
	return 0;
}
