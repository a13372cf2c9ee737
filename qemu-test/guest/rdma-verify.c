// SPDX-License-Identifier: GPL-2.0
/*
 * rdma-verify: an RC data-integrity test between two hosts (perftest and
 * rdma-core's pingpongs do not check what arrives).  Each round moves a
 * known pseudo-random pattern with RDMA WRITE, RDMA READ and SEND/RECV, at
 * lengths around the MTU and page boundaries and at odd offsets, and checks
 * every byte that arrived plus one guard byte on each side that must not
 * change.  Both sides derive the same lengths, offsets and patterns from the
 * round number; they synchronise over TCP (which also carries the QP
 * attributes, as the pingpongs do).
 *
 *   rdma-verify -d DEV -g GID_INDEX [-p PORT] [-n ROUNDS] [-s MAX_LEN] [-t TIMEOUT]
 *               [-w SECONDS] [-x] [-m MW_TYPE] [-P | -W] [-K MS] [SERVER]
 *
 * TIMEOUT is the QP's local ACK timeout exponent (4.096 us * 2^TIMEOUT, 7
 * retries), 14 by default as in the pingpongs.  SECONDS is how long it waits
 * for a completion before it gives up (20 by default; a test that stalls the
 * device waits longer, for the async event instead).  -x polls through the
 * extended CQ API (ibv_create_cq_ex, ibv_start_poll/next_poll/end_poll and
 * the ibv_wc_read_* accessors) instead of ibv_poll_cq.  -m 1 or -m 2 goes
 * through a memory window: the server binds one of that type over its
 * buffer (ibv_bind_mw, or an IBV_WR_BIND_MW work request) and gives the
 * client the window's rkey instead of the MR's; after the rounds it
 * invalidates the window (a zero-length bind, or IBV_WR_LOCAL_INV) and the
 * client's RDMA WRITE through it must fail with a remote access error.
 * -P adds IBTA 1.5's memory placement operations after the rounds (through
 * ibv_create_qp_ex and ibv_wr_*): per round the client ATOMIC_WRITEs 8
 * pattern bytes to an aligned offset of the server's buffer and FLUSHes
 * them (type GLOBAL, level RANGE or MR, alternately), and the server checks
 * the bytes and their guards; then a FLUSH of type PERSISTENT, which the
 * server's QP allows but its MR does not, must fail with a remote access
 * error.  -W does the same with ATOMIC_WRITE alone, for peers whose FLUSH
 * does not interoperate (rxe's FLUSH ICRC, see ferroce-rxe).
 * -K MS adds a late receiver after the rounds: the client SENDs two
 * messages at once to the server, which has one receive posted and posts
 * the second MS milliseconds after the first arrived, so the second SEND
 * waits that long for a receive WQE (a ferroce requester waits for the
 * credit update, sending keep-alives, instead of drawing RNR NAKs).
 *
 * Prints a summary line and exits 0 when every byte matched.  While it
 * waits (for a completion or for its peer) it also reads the device's
 * async events: on IBV_EVENT_DEVICE_FATAL it destroys its QP, MR, CQ and PD,
 * prints each destroy's result and exits 3 (4 if a destroy failed).
 * Built in the guest: gcc -O2 -o rdma-verify rdma-verify.c -libverbs
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GUARD 0xa5

struct dest {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_cq_ex *cq_ex;	/* -x: cq is ibv_cq_ex_to_cq(cq_ex) */
static struct ibv_qp *qp;
static struct ibv_qp_ex *qpx;	/* -P, -W: the QP's extended send API */
static int with_flush;		/* -P: FLUSH after each ATOMIC_WRITE */
static struct ibv_mr *mr;
static struct ibv_mw *mw;	/* -m: the server's window */
static int mw_type;
static uint8_t *src, *dst;	/* two regions of max_len bytes in one MR */
static size_t max_len = 256 * 1024;
static int ack_timeout = 14;
static int cq_wait = 20;
static int sock = -1;

#define die(...) do { fprintf(stderr, "rdma-verify: " __VA_ARGS__); exit(2); } while (0)

#include "oob-tcp.h"

static int rounds_done;
static int late_ms;		/* -K: the late receiver's delay */

/*
 * Destroys everything in reverse order of creation and prints each
 * result; returns the number of destroys that failed.
 */
static int teardown(void)
{
	int mw_rc = mw ? ibv_dealloc_mw(mw) : 0;
	int qp_rc = qp ? ibv_destroy_qp(qp) : 0;
	int mr_rc = mr ? ibv_dereg_mr(mr) : 0;
	int cq_rc = cq ? ibv_destroy_cq(cq) : 0;
	int pd_rc = pd ? ibv_dealloc_pd(pd) : 0;
	int ctx_rc = ibv_close_device(ctx);

	printf("rdma-verify: destroy QP %d, dereg MR %d, destroy CQ %d, dealloc PD %d, close %d\n",
	       qp_rc, mr_rc, cq_rc, pd_rc, ctx_rc);
	if (mw)
		printf("rdma-verify: dealloc MW %d\n", mw_rc);
	return !!mw_rc + !!qp_rc + !!mr_rc + !!cq_rc + !!pd_rc + !!ctx_rc;
}

/*
 * Reads the device's pending async events (the async fd is non-blocking);
 * a fatal device ends the program.
 */
static void check_async(void)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(ctx, &ev) == 0) {
		enum ibv_event_type type = ev.event_type;

		ibv_ack_async_event(&ev);
		printf("rdma-verify: async event %s (%d)\n", ibv_event_type_str(type), type);
		if (type == IBV_EVENT_DEVICE_FATAL) {
			printf("rdma-verify: IBV_EVENT_DEVICE_FATAL after %d rounds\n", rounds_done);
			fflush(stdout);
			exit(teardown() ? 4 : 3);
		}
	}
	fflush(stdout);
}

/* Waits until the socket is readable, reading async events meanwhile. */
static void wait_sock(void)
{
	struct pollfd p[2] = {
		{ .fd = sock, .events = POLLIN },
		{ .fd = ctx->async_fd, .events = POLLIN },
	};

	for (;;) {
		if (poll(p, 2, -1) < 0)
			die("poll failed: %s\n", strerror(errno));
		if (p[1].revents)
			check_async();
		if (p[0].revents)
			return;
	}
}

static void xfer(void *p, size_t n, int out)
{
	uint8_t *b = p;

	while (n) {
		ssize_t k;

		if (!out)
			wait_sock();
		k = out ? write(sock, b, n) : read(sock, b, n);

		if (k <= 0)
			die("TCP %s failed\n", out ? "write" : "read");
		b += k;
		n -= (size_t)k;
	}
}

static void say(char c) { xfer(&c, 1, 1); }
static char hear(void) { char c; xfer(&c, 1, 0); return c; }
static void expect(char want)
{
	char c = hear();

	if (c != want)
		die("protocol: got '%c', expected '%c'\n", c, want);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1, x = 0;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = rnd(&s);
		p[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
}

/* Region r[off, off+len) must hold pattern(seed), r[off-1] and r[off+len] GUARD. */
static int verify(const char *what, int round, const uint8_t *r, size_t off, size_t len,
		  uint64_t seed)
{
	uint8_t *want = malloc(len);
	int bad = 0;

	pattern(want, len, seed);
	for (size_t i = 0; i < len; i++)
		if (r[off + i] != want[i]) {
			fprintf(stderr, "%s round %d: byte %zu of %zu (offset %zu) is 0x%02x, expected 0x%02x\n",
				what, round, i, len, off, r[off + i], want[i]);
			bad = 1;
			break;
		}
	if (off > 0 && r[off - 1] != GUARD) {
		fprintf(stderr, "%s round %d: guard byte before offset %zu overwritten\n", what, round, off);
		bad = 1;
	}
	if (off + len < max_len && r[off + len] != GUARD) {
		fprintf(stderr, "%s round %d: guard byte after %zu bytes at %zu overwritten\n",
			what, round, len, off);
		bad = 1;
	}
	free(want);
	return bad;
}

static void guard(uint8_t *r, size_t off, size_t len)
{
	size_t a = off ? off - 1 : 0, b = off + len < max_len ? off + len + 1 : max_len;

	memset(r + a, GUARD, b - a);
}

/* ibv_poll_cq through the extended CQ API: at most one completion. */
static int poll_ex(struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int ret = ibv_start_poll(cq_ex, &attr);

	if (ret == ENOENT)
		return 0;
	if (ret)
		return -1;
	*wc = (struct ibv_wc) {
		.wr_id = cq_ex->wr_id,
		.status = cq_ex->status,
		.opcode = ibv_wc_read_opcode(cq_ex),
		.vendor_err = ibv_wc_read_vendor_err(cq_ex),
		.byte_len = ibv_wc_read_byte_len(cq_ex),
		.qp_num = ibv_wc_read_qp_num(cq_ex),
		.wc_flags = ibv_wc_read_wc_flags(cq_ex),
	};
	ibv_end_poll(cq_ex);
	if (wc->qp_num != qp->qp_num)
		die("extended CQ: qp_num %u, expected %u\n", wc->qp_num, qp->qp_num);
	return 1;
}

/* The next completion, whatever its status. */
static struct ibv_wc poll_any(const char *what)
{
	struct ibv_wc wc;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = cq_ex ? poll_ex(&wc) : ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			die("%s: ibv_poll_cq failed\n", what);
		if (n == 1)
			break;
		check_async();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > cq_wait)
			die("%s: no completion in %d s\n", what, cq_wait);
	}
	return wc;
}

static struct ibv_wc poll1(const char *what)
{
	struct ibv_wc wc = poll_any(what);

	if (wc.status != IBV_WC_SUCCESS)
		die("%s: completion status %s (%d)\n", what, ibv_wc_status_str(wc.status), wc.status);
	return wc;
}

static void post_send(enum ibv_wr_opcode op, size_t off, size_t len, const struct dest *rem)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(op == IBV_WR_RDMA_READ ? dst : src) + off,
		.length = (uint32_t)len,
		.lkey = mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op != IBV_WR_SEND) {
		/* WRITE lands in the peer's dst region, READ comes from its src. */
		wr.wr.rdma.remote_addr = rem->addr + (op == IBV_WR_RDMA_WRITE ? max_len : 0) + off;
		wr.wr.rdma.rkey = rem->rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send failed\n");
}

/*
 * -m: binds (len > 0) or, len 0, unbinds (type 1) / invalidates (type 2)
 * the window over the whole buffer; returns the window's rkey.
 */
static uint32_t window(uint32_t key, size_t len)
{
	struct ibv_mw_bind_info info = {
		.mr = mr, .addr = (uintptr_t)src, .length = len,
		.mw_access_flags = len ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0,
	};
	struct ibv_send_wr wr = { .wr_id = 9, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	if (mw_type == 1) {
		struct ibv_mw_bind b = { .wr_id = 9, .send_flags = IBV_SEND_SIGNALED, .bind_info = info };

		if (ibv_bind_mw(qp, mw, &b))
			die("ibv_bind_mw: %s\n", strerror(errno));
		wc = poll1(len ? "bind MW (type 1)" : "unbind MW (type 1)");
		key = mw->rkey;
	} else if (len) {
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = ibv_inc_rkey(key);
		wr.bind_mw.bind_info = info;
		if (ibv_post_send(qp, &wr, &bad))
			die("ibv_post_send(IBV_WR_BIND_MW): %s\n", strerror(errno));
		wc = poll1("bind MW (type 2)");
		key = wr.bind_mw.rkey;
	} else {
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = key;
		if (ibv_post_send(qp, &wr, &bad))
			die("ibv_post_send(IBV_WR_LOCAL_INV): %s\n", strerror(errno));
		wc = poll1("LOCAL_INV of the MW");
	}
	if (wc.opcode != (mw_type == 1 || len ? IBV_WC_BIND_MW : IBV_WC_LOCAL_INV))
		die("memory window: completion opcode %d\n", wc.opcode);
	return key;
}

static void post_recv(size_t off, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)dst + off, .length = (uint32_t)len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv failed\n");
}


/*
 * -P, -W, client: ATOMIC_WRITE (8 bytes of pattern(seed) from src + off)
 * to the server's dst + off, then (-P) FLUSH it, signaled and in order.
 */
static void place(size_t off, uint64_t seed, int level, const struct dest *rem)
{
	uint64_t raddr = rem->addr + max_len + off;
	uint8_t value[8];
	struct ibv_wc wc;

	pattern(value, sizeof(value), seed);
	ibv_wr_start(qpx);
	qpx->wr_id = 15;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, rem->rkey, raddr, value);
	if (with_flush) {
		qpx->wr_id = 14;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_flush(qpx, rem->rkey, raddr, sizeof(value), IBV_FLUSH_GLOBAL,
			     (uint8_t)level);
	}
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete(ATOMIC_WRITE, FLUSH): %s\n", strerror(errno));
	wc = poll1("ATOMIC_WRITE");
	if (wc.opcode != IBV_WC_ATOMIC_WRITE || wc.wr_id != 15)
		die("ATOMIC_WRITE: completion opcode %d, wr_id %llu\n", wc.opcode,
		    (unsigned long long)wc.wr_id);
	if (!with_flush)
		return;
	wc = poll1("FLUSH");
	if (wc.opcode != IBV_WC_FLUSH || wc.wr_id != 14)
		die("FLUSH: completion opcode %d, wr_id %llu\n", wc.opcode, (unsigned long long)wc.wr_id);
}

/* -P, client: a FLUSH the server's MR does not allow; returns its status. */
static enum ibv_wc_status flush_persistent(const struct dest *rem)
{
	ibv_wr_start(qpx);
	qpx->wr_id = 16;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_flush(qpx, rem->rkey, rem->addr, 8, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete(FLUSH PERSISTENT): %s\n", strerror(errno));
	return poll_any("FLUSH PERSISTENT").status;
}

/* ibv_query_qp reports back what the QP was given on the way to RTS. */
static void check_query(int gidx, const struct dest *rem, enum ibv_mtu mtu, uint32_t psn)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr q;

	memset(&q, 0, sizeof(q));
	if (ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			 IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_TIMEOUT | IBV_QP_CAP, &init))
		die("ibv_query_qp failed: %s\n", strerror(errno));
	if (q.qp_state != IBV_QPS_RTS || q.path_mtu != mtu || q.dest_qp_num != rem->qpn ||
	    q.sq_psn != psn || q.rq_psn != rem->psn || q.timeout != ack_timeout ||
	    q.ah_attr.grh.sgid_index != gidx || memcmp(q.ah_attr.grh.dgid.raw, rem->gid, 16) ||
	    q.cap.max_send_wr < 1 || init.cap.max_send_wr != q.cap.max_send_wr)
		die("ibv_query_qp: state %d mtu %d dest_qpn %u sq_psn %u rq_psn %u timeout %u sgid %u\n",
		    q.qp_state, q.path_mtu, q.dest_qp_num, q.sq_psn, q.rq_psn, q.timeout,
		    q.ah_attr.grh.sgid_index);
	printf("ibv_query_qp: RTS, attributes as set\n");
}

static void connect_qp(int gidx, const struct dest *rem, enum ibv_mtu mtu, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .hop_limit = 64, .sgid_index = (uint8_t)gidx },
		},
	};

	memcpy(a.ah_attr.grh.dgid.raw, rem->gid, 16);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify QP to RTR failed: %s\n", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)ack_timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify QP to RTS failed: %s\n", strerror(errno));
	check_query(gidx, rem, mtu, psn);
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *server = NULL;
	int gidx = -1, port = 18800, rounds = 24, c, bad = 0, use_cq_ex = 0, placement = 0;
	static const size_t lens[] = { 1, 2, 7, 63, 64, 1023, 1024, 1025, 2048, 4095, 4096,
				       4097, 8191, 65536, 65537, 131072 };
	size_t nlens = sizeof(lens) / sizeof(lens[0]);
	uint64_t bytes[3] = { 0 }, seq = 42;
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct dest me = { 0 }, rem;
	union ibv_gid gid;

	while ((c = getopt(argc, argv, "d:g:p:n:s:t:w:xm:PWK:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'n': rounds = atoi(optarg); break;
		case 's': max_len = strtoul(optarg, NULL, 0); break;
		case 't': ack_timeout = atoi(optarg); break;
		case 'w': cq_wait = atoi(optarg); break;
		case 'x': use_cq_ex = 1; break;
		case 'm': mw_type = atoi(optarg); break;
		case 'P': placement = 1; with_flush = 1; break;
		case 'W': placement = 1; break;
		case 'K': late_ms = atoi(optarg); break;
		default: die("usage: rdma-verify -d DEV -g GID_INDEX [-p PORT] [-n ROUNDS] [-s MAX_LEN] [-t TIMEOUT] [-w SECONDS] [-x] [-m MW_TYPE] [-P | -W] [SERVER]\n");
		}
	}
	if (optind < argc)
		server = argv[optind];
	if (!devname || gidx < 0 || max_len < 2)
		die("-d DEV and -g GID_INDEX are required\n");
	if (mw_type < 0 || mw_type > 2)
		die("-m takes 1 or 2\n");
	if (placement && max_len < 16)
		die("-P and -W need -s 16 or more\n");

	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("cannot open %s\n", devname);
	if (fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK))
		die("cannot make the async fd non-blocking\n");
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &gid))
		die("cannot query port 1 / GID %d\n", gidx);
	pd = ibv_alloc_pd(ctx);
	if (use_cq_ex) {
		struct ibv_cq_init_attr_ex ca = {
			.cqe = 16,
			.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
		};

		cq_ex = pd ? ibv_create_cq_ex(ctx, &ca) : NULL;
		if (pd && !cq_ex)
			die("ibv_create_cq_ex: %s\n", strerror(errno));
		cq = cq_ex ? ibv_cq_ex_to_cq(cq_ex) : NULL;
	} else {
		cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	}
	src = aligned_alloc(4096, 2 * max_len);
	if (!cq || !src)
		die("cannot allocate PD/CQ/buffer\n");
	dst = src + max_len;
	memset(src, GUARD, 2 * max_len);
	mr = ibv_reg_mr(pd, src, 2 * max_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | (mw_type ? IBV_ACCESS_MW_BIND : 0) |
			(with_flush ? IBV_ACCESS_FLUSH_GLOBAL : 0));
	if (mr && mw_type && !server) {
		mw = ibv_alloc_mw(pd, mw_type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
		if (!mw)
			die("ibv_alloc_mw(type %d): %s\n", mw_type, strerror(errno));
	}
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		struct ibv_qp_init_attr_ex iax = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = ia.cap, .pd = pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
					  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE |
					  (with_flush ? IBV_QP_EX_WITH_FLUSH : 0),
		};
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					   (with_flush ? IBV_ACCESS_FLUSH_GLOBAL |
							 IBV_ACCESS_FLUSH_PERSISTENT : 0),
		};

		if (!mr)
			die("cannot register the buffer: %s\n", strerror(errno));
		if (placement) {
			qp = ibv_create_qp_ex(ctx, &iax);
			qpx = qp ? ibv_qp_to_qp_ex(qp) : NULL;
			if (!qpx)
				die("ibv_create_qp_ex with ATOMIC_WRITE%s: %s\n",
				    with_flush ? " and FLUSH" : "", strerror(errno));
		} else {
			qp = ibv_create_qp(pd, &ia);
		}
		if (!qp)
			die("cannot create the QP\n");
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
			die("modify QP to INIT failed\n");
	}
	srand48(getpid() * time(NULL));
	me.qpn = qp->qp_num;
	me.psn = (uint32_t)lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)src;
	memcpy(me.gid, gid.raw, 16);

	sock = oob_connect(server, port);
	xfer(&me, sizeof(me), 1);
	xfer(&rem, sizeof(rem), 0);
	connect_qp(gidx, &rem, pa.active_mtu, me.psn);
	say('C');
	expect('C');
	if (mw_type && !server) {
		/* The client writes and reads through the window. */
		uint32_t key = window(mw->rkey, 2 * max_len);

		printf("rdma-verify: type %d memory window 0x%x over MR 0x%x\n", mw_type, key,
		       mr->rkey);
		xfer(&key, sizeof(key), 1);
		me.rkey = key;
	} else if (mw_type) {
		xfer(&rem.rkey, sizeof(rem.rkey), 0);
	}

	for (int r = 0; r < rounds; r++) {
		size_t len = (size_t)r < nlens ? lens[r] : 1 + rnd(&seq) % max_len;
		size_t off;

		if (len > max_len)
			len = max_len;
		off = len == max_len ? 0 : rnd(&seq) % (max_len - len + 1);
		if (server) {
			/* WRITE: the server checks its dst. */
			expect('R');
			pattern(src + off, len, 1000 + r);
			post_send(IBV_WR_RDMA_WRITE, off, len, &rem);
			poll1("RDMA WRITE");
			say('W');
			bad |= hear() != 'O';
			bytes[0] += len;
			/* READ: from the server's src into our dst. */
			expect('R');
			guard(dst, off, len);
			post_send(IBV_WR_RDMA_READ, off, len, &rem);
			poll1("RDMA READ");
			c = verify("RDMA READ", r, dst, off, len, 2000 + r);
			say(c ? 'X' : 'O');
			bad |= c;
			bytes[1] += len;
			/* SEND into the server's posted receive. */
			expect('R');
			pattern(src + off, len, 3000 + r);
			post_send(IBV_WR_SEND, off, len, &rem);
			poll1("SEND");
			bad |= hear() != 'O';
			bytes[2] += len;
		} else {
			struct ibv_wc wc;

			guard(dst, off, len);
			say('R');
			expect('W');
			c = verify("RDMA WRITE", r, dst, off, len, 1000 + r);
			say(c ? 'X' : 'O');
			bad |= c;
			pattern(src + off, len, 2000 + r);
			say('R');
			bad |= hear() != 'O';
			guard(dst, off, len);
			post_recv(off, len);
			say('R');
			wc = poll1("RECV");
			if (wc.byte_len != len) {
				fprintf(stderr, "RECV round %d: %u bytes, expected %zu\n", r, wc.byte_len, len);
				c = 1;
			} else {
				c = verify("SEND/RECV", r, dst, off, len, 3000 + r);
			}
			say(c ? 'X' : 'O');
			bad |= c;
			bytes[0] += len;
			bytes[1] += len;
			bytes[2] += len;
		}
		if (bad) {
			fprintf(stderr, "rdma-verify: round %d (%zu bytes at offset %zu) failed\n", r, len, off);
			break;
		}
		rounds_done = r + 1;
	}
	if (late_ms > 0 && !bad) {
		/* Two 64-byte SENDs, apart; the server's second receive comes late. */
		if (server) {
			expect('R');
			pattern(src, 64, 5000);
			pattern(src + 128, 64, 5001);
			post_send(IBV_WR_SEND, 0, 64, &rem);
			post_send(IBV_WR_SEND, 128, 64, &rem);
			poll1("first SEND to the late receiver");
			poll1("second SEND to the late receiver");
			c = hear() != 'O';
			printf("rdma-verify: two SENDs, the second received %d ms late: %s\n",
			       late_ms, c ? "DATA MISMATCH" : "verified");
			bad |= c;
		} else {
			struct ibv_wc wc;

			guard(dst, 0, 64);
			guard(dst, 128, 64);
			post_recv(0, 64);
			say('R');
			wc = poll1("RECV of the first SEND");
			c = wc.byte_len != 64 || verify("late SEND 1", 0, dst, 0, 64, 5000);
			usleep(late_ms * 1000);
			post_recv(128, 64);
			wc = poll1("RECV of the second SEND");
			c |= wc.byte_len != 64 || verify("late SEND 2", 1, dst, 128, 64, 5001);
			say(c ? 'X' : 'O');
			bad |= c;
		}
	}
	for (int r = 0; placement && !bad && r < rounds; r++) {
		/* 8-byte aligned, somewhere in the server's dst region. */
		size_t off = 8 * (rnd(&seq) % (max_len / 8));

		if (server) {
			xfer(&off, sizeof(off), 1);
			expect('R');
			place(off, 4000 + r, r % 2 ? IBV_FLUSH_MR : IBV_FLUSH_RANGE, &rem);
			say('W');
			bad |= hear() != 'O';
		} else {
			size_t want;

			xfer(&want, sizeof(want), 0);
			if (want != off)
				die("-P: the client's offset %zu, expected %zu\n", want, off);
			guard(dst, off, 8);
			say('R');
			expect('W');
			c = verify("ATOMIC_WRITE", r, dst, off, 8, 4000 + r);
			say(c ? 'X' : 'O');
			bad |= c;
		}
		if (bad)
			fprintf(stderr, "rdma-verify: placement round %d (offset %zu) failed\n", r, off);
	}
	if (placement && !bad && !with_flush) {
		if (server)
			printf("rdma-verify: %d ATOMIC_WRITE rounds verified\n", rounds);
	} else if (placement && !bad) {
		/* The server's QP has both FLUSH rights, its MR FLUSH_GLOBAL only. */
		if (server) {
			enum ibv_wc_status st = flush_persistent(&rem);

			printf("rdma-verify: %d ATOMIC_WRITE + FLUSH rounds verified; FLUSH PERSISTENT: %s\n",
			       rounds, ibv_wc_status_str(st));
			bad |= st != IBV_WC_REM_ACCESS_ERR;
			say('D');
		} else {
			expect('D');
		}
	}
	if (mw_type && !bad) {
		/* Revoked, the window refuses the client's next WRITE. */
		if (!server) {
			window(me.rkey, 0);
			say('I');
			expect('D');
		} else {
			struct ibv_wc wc;

			expect('I');
			post_send(IBV_WR_RDMA_WRITE, 0, 64, &rem);
			wc = poll_any("RDMA WRITE through the revoked window");
			printf("rdma-verify: RDMA WRITE through the revoked window: %s\n",
			       ibv_wc_status_str(wc.status));
			bad |= wc.status != IBV_WC_REM_ACCESS_ERR;
			say('D');
		}
	}
	printf("rdma-verify: %s, %d rounds up to %zu bytes, RDMA WRITE %llu, RDMA READ %llu, SEND %llu bytes: %s\n",
	       devname, rounds, max_len, (unsigned long long)bytes[0], (unsigned long long)bytes[1],
	       (unsigned long long)bytes[2], bad ? "DATA MISMATCH" : "all data verified");
	/*
	 * Neither side destroys its QP before the other is done with it. The
	 * receiver of the last SEND has its data before the sender has its
	 * completion, which waits for the ACK; if that ACK is lost, only the
	 * receiver's QP can answer the retransmission.
	 */
	say('E');
	expect('E');
	if (teardown())
		bad = 1;
	ibv_free_device_list(list);
	return bad;
}
