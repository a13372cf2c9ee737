// SPDX-License-Identifier: GPL-2.0
/*
 * atomic-count: RDMA atomics checked end to end (perftest's ib_atomic_*
 * only measure).  The server exposes one 8-byte counter with guard words
 * on both sides; the client opens NQPS RC QPs to it and, interleaved over
 * the QPs with up to DEPTH outstanding each, does K FETCH_ADDs per QP of
 * known, distinct addends.  Then:
 *  - the server checks the counter equals its start value plus the sum of
 *    every addend (a lost, doubled or torn add shows), and that the guard
 *    words did not change;
 *  - the client checks the fetched original values: sorted, the first is
 *    the start value and each next one is the previous plus the previous
 *    operation's addend (every FETCH_ADD saw its own value, none twice);
 *  - one CMP_SWAP that must not match (counter unchanged, the original
 *    returned) and one that must (swapped), checked by both sides.
 * The start value sits just below a 32-bit boundary, so the adds carry
 * into the upper half.  Both sides derive the addends from (qp, k).
 *
 *   atomic-count -d DEV -g GID_INDEX [-p PORT] [-q NQPS] [-k K] [SERVER]
 *
 * Prints a summary line ending in "counter verified" and exits 0 on
 * success.  Built in the guest: gcc -O2 -o atomic-count atomic-count.c -libverbs
 */
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_QPS 16
#define DEPTH 4
#define GUARD 0xa5a5a5a5a5a5a5a5ULL

struct dest {
	uint32_t qpn[MAX_QPS], psn[MAX_QPS], rkey;
	uint64_t addr, start;
	uint8_t gid[16];
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qps[MAX_QPS];
static struct ibv_mr *mr;
static uint64_t *buf;
static int sock = -1, nqps = 4, per_qp = 200;

#define die(...) do { fprintf(stderr, "atomic-count: " __VA_ARGS__); exit(2); } while (0)

#include "oob-tcp.h"

static void xfer(void *p, size_t n, int out)
{
	uint8_t *b = p;

	while (n) {
		ssize_t k = out ? write(sock, b, n) : read(sock, b, n);

		if (k <= 0)
			die("TCP %s failed\n", out ? "write" : "read");
		b += k;
		n -= (size_t)k;
	}
}

static void say(char c) { xfer(&c, 1, 1); }
static char hear(void) { char c; xfer(&c, 1, 0); return c; }

/* The addend of the k-th FETCH_ADD on QP q: distinct, > 0. */
static uint64_t addend(int q, int k)
{
	return 1 + (uint64_t)q * 1000003 + (uint64_t)k * 7919;
}

static uint64_t total(void)
{
	uint64_t s = 0;

	for (int q = 0; q < nqps; q++)
		for (int k = 0; k < per_qp; k++)
			s += addend(q, k);
	return s;
}


static void connect_qp(struct ibv_qp *qp, int gidx, const uint8_t *dgid, uint32_t dqpn,
		       uint32_t rpsn, uint32_t spsn, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = dqpn,
		.rq_psn = rpsn, .max_dest_rd_atomic = DEPTH, .min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .hop_limit = 64, .sgid_index = (uint8_t)gidx },
		},
	};

	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR failed: %s\n", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = spsn;
	a.max_rd_atomic = DEPTH;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS failed: %s\n", strerror(errno));
}

static void post_atomic(int q, uint64_t wr_id, enum ibv_wr_opcode op, uint64_t *result,
			const struct dest *rem, uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)result, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	/* The counter is the server's word 1, between guards 0 and 2. */
	wr.wr.atomic.remote_addr = rem->addr + 8;
	wr.wr.atomic.rkey = rem->rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(qps[q], &wr, &bad))
		die("ibv_post_send (%s) failed\n", op == IBV_WR_ATOMIC_CMP_AND_SWP ?
		    "CMP_AND_SWP" : "FETCH_AND_ADD");
}

static struct ibv_wc poll1(enum ibv_wc_opcode want)
{
	struct timespec t0, t;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			die("ibv_poll_cq failed\n");
		if (n == 1)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30)
			die("no completion in 30 s\n");
	}
	if (wc.status != IBV_WC_SUCCESS)
		die("wr_id %llu: completion status %s (%d)\n", (unsigned long long)wc.wr_id,
		    ibv_wc_status_str(wc.status), wc.status);
	if (wc.opcode != want)
		die("wr_id %llu: completion opcode %d, expected %d\n",
		    (unsigned long long)wc.wr_id, wc.opcode, want);
	return wc;
}

struct op { uint64_t orig, add; };

static int by_orig(const void *a, const void *b)
{
	const struct op *x = a, *y = b;

	return x->orig < y->orig ? -1 : x->orig > y->orig;
}

/* The client: the FETCH_ADDs, then the CMP_SWAPs; 0 if all checks pass. */
static int client(const struct dest *rem)
{
	int n = nqps * per_qp, posted[MAX_QPS] = { 0 }, out[MAX_QPS] = { 0 }, done = 0, bad = 0;
	uint64_t *res = buf + 8, start = rem->start, sum = total(), fin = start + sum;
	uint64_t swap = ~start;
	struct op *ops = calloc((size_t)n, sizeof(*ops));
	struct timespec t0, t1;
	double secs;

	if (!ops)
		die("out of memory\n");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < n) {
		for (int q = 0; q < nqps; q++)
			while (out[q] < DEPTH && posted[q] < per_qp) {
				int k = posted[q]++;
				uint64_t id = (uint64_t)q * per_qp + k;

				res[id] = GUARD;
				post_atomic(q, id, IBV_WR_ATOMIC_FETCH_AND_ADD, &res[id], rem,
					    addend(q, k), 0);
				out[q]++;
			}
		struct ibv_wc wc = poll1(IBV_WC_FETCH_ADD);

		out[wc.wr_id / per_qp]--;
		done++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (int q = 0; q < nqps; q++)
		for (int k = 0; k < per_qp; k++) {
			ops[q * per_qp + k].orig = res[q * per_qp + k];
			ops[q * per_qp + k].add = addend(q, k);
		}
	qsort(ops, (size_t)n, sizeof(*ops), by_orig);
	if (ops[0].orig != start) {
		fprintf(stderr, "the smallest fetched value is %#llx, not the start %#llx\n",
			(unsigned long long)ops[0].orig, (unsigned long long)start);
		bad = 1;
	}
	for (int i = 0; i + 1 < n && !bad; i++)
		if (ops[i + 1].orig != ops[i].orig + ops[i].add) {
			fprintf(stderr, "fetched values do not chain at %d: %#llx + %llu != %#llx\n", i,
				(unsigned long long)ops[i].orig, (unsigned long long)ops[i].add,
				(unsigned long long)ops[i + 1].orig);
			bad = 1;
		}
	if (!bad && ops[n - 1].orig + ops[n - 1].add != fin) {
		fprintf(stderr, "the last fetched value does not end at the sum\n");
		bad = 1;
	}
	printf("atomic-count: client: %d FETCH_ADDs on %d QPs in %.2f s (%.0f/s), fetched values %s\n",
	       n, nqps, secs, n / secs, bad ? "INCONSISTENT" : "distinct and chained");
	say('A');
	bad |= hear() != 'O';

	/* CMP_SWAP that must not match, then one that must. */
	res[n] = GUARD;
	post_atomic(0, 1000001, IBV_WR_ATOMIC_CMP_AND_SWP, &res[n], rem, fin + 1, swap);
	poll1(IBV_WC_COMP_SWAP);
	if (res[n] != fin) {
		fprintf(stderr, "CMP_SWAP (no match) returned %#llx, expected %#llx\n",
			(unsigned long long)res[n], (unsigned long long)fin);
		bad = 1;
	}
	say('M');
	bad |= hear() != 'O';
	res[n + 1] = GUARD;
	post_atomic(nqps - 1, 1000002, IBV_WR_ATOMIC_CMP_AND_SWP, &res[n + 1], rem, fin, swap);
	poll1(IBV_WC_COMP_SWAP);
	if (res[n + 1] != fin) {
		fprintf(stderr, "CMP_SWAP (match) returned %#llx, expected %#llx\n",
			(unsigned long long)res[n + 1], (unsigned long long)fin);
		bad = 1;
	}
	say('S');
	bad |= hear() != 'O';
	printf("atomic-count: client: CMP_SWAP miss and hit returned %s\n",
	       bad ? "WRONG values" : "the counter's value");
	free(ops);
	return bad;
}

/* The server's checks of its counter at each step of the client. */
static int server(uint64_t start)
{
	volatile uint64_t *w = buf;
	uint64_t fin = start + total(), want[3] = { fin, fin, ~start };
	const char *what[3] = { "after the FETCH_ADDs", "after the CMP_SWAP miss",
				"after the CMP_SWAP hit" };
	const char step[3] = { 'A', 'M', 'S' };
	int bad = 0;

	for (int i = 0; i < 3; i++) {
		int ok;

		if (hear() != step[i])
			die("protocol: expected '%c'\n", step[i]);
		ok = w[1] == want[i] && w[0] == GUARD && w[2] == GUARD;
		printf("atomic-count: server: counter %#llx %s (expected %#llx), guards %s: %s\n",
		       (unsigned long long)w[1], what[i], (unsigned long long)want[i],
		       w[0] == GUARD && w[2] == GUARD ? "intact" : "OVERWRITTEN",
		       ok ? "ok" : "WRONG");
		bad |= !ok;
		say(ok ? 'O' : 'X');
	}
	return bad;
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *server_name = NULL;
	int gidx = -1, port = 18900, c, bad;
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct dest me = { 0 }, rem;
	union ibv_gid gid;
	size_t len;

	while ((c = getopt(argc, argv, "d:g:p:q:k:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'q': nqps = atoi(optarg); break;
		case 'k': per_qp = atoi(optarg); break;
		default: die("usage: atomic-count -d DEV -g GID_INDEX [-p PORT] [-q NQPS] [-k K] [SERVER]\n");
		}
	}
	if (optind < argc)
		server_name = argv[optind];
	if (!devname || gidx < 0 || nqps < 1 || nqps > MAX_QPS || per_qp < 1)
		die("-d DEV and -g GID_INDEX are required, 1 <= NQPS <= %d, K >= 1\n", MAX_QPS);

	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("cannot open %s\n", devname);
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &gid))
		die("cannot query port 1 / GID %d\n", gidx);
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, nqps * DEPTH + 4, NULL, NULL, 0) : NULL;
	/* Server: guard, counter, guard. Client: results from word 8 on. */
	len = ((size_t)nqps * per_qp + 16) * 8;
	buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!cq || !buf)
		die("cannot allocate PD/CQ/buffer\n");
	for (size_t i = 0; i < len / 8; i++)
		buf[i] = GUARD;
	srand48(getpid() * time(NULL));
	/* Just below a 32-bit boundary: the adds carry into the upper half. */
	me.start = 0x00000001ffff0000ULL + (uint64_t)(lrand48() & 0xffff);
	buf[1] = me.start;
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("ibv_reg_mr with REMOTE_ATOMIC failed: %s\n", strerror(errno));
	for (int q = 0; q < nqps; q++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = DEPTH + 2, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC,
		};

		qps[q] = ibv_create_qp(pd, &ia);
		if (!qps[q])
			die("cannot create QP %d\n", q);
		if (ibv_modify_qp(qps[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
			die("modify QP to INIT failed\n");
		me.qpn[q] = qps[q]->qp_num;
		me.psn[q] = (uint32_t)lrand48() & 0xffffff;
	}
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	memcpy(me.gid, gid.raw, 16);

	sock = oob_connect(server_name, port);
	xfer(&me, sizeof(me), 1);
	xfer(&rem, sizeof(rem), 0);
	for (int q = 0; q < nqps; q++)
		connect_qp(qps[q], gidx, rem.gid, rem.qpn[q], rem.psn[q], me.psn[q], pa.active_mtu);
	say('C');
	if (hear() != 'C')
		die("protocol: no connect\n");

	bad = server_name ? client(&rem) : server(me.start);
	printf("atomic-count: %s, %d QPs x %d FETCH_ADDs + 2 CMP_SWAPs: %s\n", devname, nqps,
	       per_qp, bad ? "COUNTER MISMATCH" : "counter verified");
	for (int q = 0; q < nqps; q++)
		bad |= !!ibv_destroy_qp(qps[q]);
	bad |= !!ibv_dereg_mr(mr);
	bad |= !!ibv_destroy_cq(cq);
	bad |= !!ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return bad;
}
