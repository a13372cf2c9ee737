// SPDX-License-Identifier: GPL-2.0
/*
 * rtr-errno DEV SGID_INDEX DGID: moves a new RC QP of DEV to RTR towards
 * DGID (IPv6 text, e.g. ::ffff:10.0.2.1 or fe80::1) from SGID_INDEX and
 * prints what ibv_modify_qp answered ("rtr: ok" or "rtr: errno N (text)"),
 * so that a scenario can assert which sgid/dgid pairs ib_core or the driver
 * refuse, and with which errno.  Exit status: 0 if the modify succeeded,
 * 1 if it failed, 2 on a setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_attr attr = { 0 };
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int i, ret;

	if (argc != 4) {
		fprintf(stderr, "usage: %s DEV SGID_INDEX DGID\n", argv[0]);
		return 2;
	}
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 2, NULL, NULL, 0) : NULL;
	init.send_cq = cq;
	init.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &init) : NULL;
	if (!qp) {
		perror("pd/cq/qp");
		return 2;
	}
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret) {
		fprintf(stderr, "INIT: %s\n", strerror(ret));
		return 2;
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = 0x123;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.grh.sgid_index = atoi(argv[2]);
	attr.ah_attr.grh.hop_limit = 64;
	if (inet_pton(AF_INET6, argv[3], attr.ah_attr.grh.dgid.raw) != 1) {
		fprintf(stderr, "bad DGID %s\n", argv[3]);
		return 2;
	}
	ret = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		printf("rtr: errno %d (%s)\n", ret, strerror(ret));
	else
		printf("rtr: ok\n");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return ret ? 1 : 0;
}
