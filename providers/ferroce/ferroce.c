// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libferroce: device matching and the user context (doorbell page), also
 * an imported one (ibv_import_device).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ferroce.h"

static void ferroce_uninit_context(struct ferroce_context *ctx)
{
	pthread_mutex_destroy(&ctx->qp_table_mutex);
	pthread_mutex_destroy(&ctx->dbrec_mutex);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static void ferroce_free_context(struct ibv_context *ibctx)
{
	struct ferroce_context *ctx = to_fctx(ibctx);

	munmap(ctx->db, FERROCE_DB_PAGE_SIZE);
	ferroce_uninit_context(ctx);
}

static const struct verbs_context_ops ferroce_context_ops = {
	.alloc_mw = ferroce_alloc_mw,
	.alloc_pd = ferroce_alloc_pd,
	.async_event = ferroce_async_event,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = ferroce_bind_mw,
	.create_ah = ferroce_create_ah,
	.create_cq = ferroce_create_cq,
	.create_cq_ex = ferroce_create_cq_ex,
	.create_qp = ferroce_create_qp,
	.create_qp_ex = ferroce_create_qp_ex,
	.create_srq = ferroce_create_srq,
	.create_srq_ex = ferroce_create_srq_ex,
	.cq_event = ferroce_cq_event,
	.dealloc_mw = ferroce_dealloc_mw,
	.dealloc_pd = ferroce_dealloc_pd,
	.dereg_mr = ferroce_dereg_mr,
	.destroy_ah = ferroce_destroy_ah,
	.destroy_cq = ferroce_destroy_cq,
	.destroy_qp = ferroce_destroy_qp,
	.destroy_srq = ferroce_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = ferroce_free_context,
	.import_mr = ferroce_import_mr,
	.import_pd = ferroce_import_pd,
	.modify_qp = ferroce_modify_qp,
	.modify_srq = ferroce_modify_srq,
	.poll_cq = ferroce_poll_cq,
	.post_recv = ferroce_post_recv,
	.post_send = ferroce_post_send,
	.post_srq_recv = ferroce_post_srq_recv,
	.query_device_ex = ferroce_query_device,
	.query_port = ferroce_query_port,
	.query_qp = ferroce_query_qp,
	.query_srq = ferroce_query_srq,
	.reg_mr = ferroce_reg_mr,
	.rereg_mr = ferroce_rereg_mr,
	.req_notify_cq = ferroce_req_notify_cq,
	.resize_cq = ferroce_resize_cq,
	.unimport_mr = ferroce_unimport_mr,
	.unimport_pd = ferroce_unimport_pd,
};

/* A context with nothing of the device's yet, on cmd_fd (NULL: errno) */
static struct ferroce_context *ferroce_init_context(struct ibv_device *ibdev,
						   int cmd_fd)
{
	struct verbs_device *vdev = verbs_get_device(ibdev);
	struct ferroce_context *ctx;

	/*
	 * uverbs ioctls must carry the driver id the kernel reports:
	 * RDMA_DRIVER_FERROCE, or RDMA_DRIVER_UNKNOWN from a ferroce.ko that
	 * predates it (matched by PCI ID).
	 */
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   vdev->sysfs->driver_id);
	if (!ctx)
		return NULL;

	pthread_mutex_init(&ctx->qp_table_mutex, NULL);
	pthread_mutex_init(&ctx->dbrec_mutex, NULL);
	list_head_init(&ctx->dbrec_pages);
	return ctx;
}

/*
 * The context's values, as alloc_ucontext answered them (also when the
 * extended QUERY_DEVICE repeats them for an import): the device's limits
 * and the doorbell page, mapped here. Returns an errno.
 */
static int ferroce_set_context(struct ferroce_context *ctx,
			       const struct ferroce_uresp_alloc_ctx *resp)
{
	int ret;

	ctx->device_caps = resp->device_caps;
	ctx->max_qp_wr = resp->max_qp_wr;
	ctx->max_sge = resp->max_sge;
	ctx->max_inline = resp->max_inline;
	ctx->max_cqe = resp->max_cqe;

	ctx->db = mmap(NULL, FERROCE_DB_PAGE_SIZE, PROT_WRITE, MAP_SHARED,
		       ctx->ibv_ctx.context.cmd_fd, resp->db_mmap_offset);
	if (ctx->db == MAP_FAILED) {
		ret = errno;
		verbs_err(&ctx->ibv_ctx, "ferroce: cannot map doorbell page: %m\n");
		return ret;
	}

	verbs_set_ops(&ctx->ibv_ctx, &ferroce_context_ops);
	return 0;
}

static struct verbs_context *ferroce_alloc_context(struct ibv_device *ibdev,
						   int cmd_fd,
						   void *private_data)
{
	struct ferroce_alloc_context_resp resp = {};
	struct ibv_get_context cmd = {};
	struct ferroce_context *ctx;
	int ret;

	ctx = ferroce_init_context(ibdev, cmd_fd);
	if (!ctx)
		return NULL;

	ret = ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (!ret)
		ret = ferroce_set_context(ctx, &resp.drv_payload);
	if (ret) {
		ferroce_uninit_context(ctx);
		errno = ret;
		return NULL;
	}
	return &ctx->ibv_ctx;
}

/*
 * Whether the extended QUERY_DEVICE answered with the context's values
 * (ferroce-abi.h): resp_size is the core response's length, or that of the
 * old command's (no driver data) if the kernel has no extended one. The
 * driver's part has no length of its own: a driver that does not know it
 * writes nothing there and it reads as the zeroes it was filled with, and
 * no driver's answer has a max_qp_wr or max_cqe of 0.
 */
static bool
ferroce_query_device_has_ctx(const struct ferroce_query_device_ex_resp *resp,
			     size_t resp_size)
{
	return resp_size > sizeof(resp->ibv_resp.base) &&
	       resp->drv_payload.max_qp_wr && resp->drv_payload.max_cqe;
}

/*
 * ibv_import_device(): the context of cmd_fd (a dup of another owner's
 * command file), as alloc_context makes it, from the context's values the
 * driver repeats in the extended QUERY_DEVICE's response instead of
 * ALLOC_CONTEXT's. QUERY_CONTEXT first: it fails (EOPNOTSUPP) on a driver
 * that does not let its contexts be imported, and sets num_comp_vectors.
 * A driver that does not return the values: EOPNOTSUPP.
 */
static struct verbs_context *ferroce_import_context(struct ibv_device *ibdev,
						    int cmd_fd)
{
	struct ferroce_query_device_ex_resp resp = {};
	size_t resp_size = sizeof(resp);
	struct ibv_device_attr_ex attr;
	struct ferroce_context *ctx;
	int ret;

	ctx = ferroce_init_context(ibdev, cmd_fd);
	if (!ctx)
		return NULL;

	ret = ibv_cmd_query_context(&ctx->ibv_ctx.context, NULL);
	if (ret)
		goto err;
	ret = ibv_cmd_query_device_any(&ctx->ibv_ctx.context, NULL, &attr,
				       sizeof(attr), &resp.ibv_resp,
				       &resp_size);
	if (ret)
		goto err;
	if (!ferroce_query_device_has_ctx(&resp, resp_size)) {
		verbs_err(&ctx->ibv_ctx,
			  "ferroce: the driver does not return the context\n");
		ret = EOPNOTSUPP;
		goto err;
	}
	ret = ferroce_set_context(ctx, &resp.drv_payload);
	if (ret)
		goto err;
	return &ctx->ibv_ctx;

err:
	ferroce_uninit_context(ctx);
	errno = ret;
	return NULL;
}

static struct verbs_device *ferroce_device_alloc(struct verbs_sysfs_dev *sdev)
{
	struct ferroce_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	return &dev->ibv_dev;
}

static void ferroce_device_free(struct verbs_device *vdev)
{
	free(container_of(vdev, struct ferroce_device, ibv_dev));
}

/*
 * By driver id once the kernel reports RDMA_DRIVER_FERROCE, and by PCI ID
 * for kernels whose ferroce.ko predates it.
 */
static const struct verbs_match_ent ferroce_match_table[] = {
	VERBS_DRIVER_ID(RDMA_DRIVER_FERROCE),
	VERBS_PCI_MATCH(FERROCE_PCI_VENDOR_ID, FERROCE_PCI_DEVICE_ID, NULL),
	{},
};

static const struct verbs_device_ops ferroce_dev_ops = {
	.name = "ferroce",
	.match_min_abi_version = FERROCE_UVERBS_ABI_VERSION,
	.match_max_abi_version = FERROCE_UVERBS_ABI_VERSION,
	.match_table = ferroce_match_table,
	.alloc_device = ferroce_device_alloc,
	.uninit_device = ferroce_device_free,
	.alloc_context = ferroce_alloc_context,
	.import_context = ferroce_import_context,
};

PROVIDER_DRIVER(ferroce, ferroce_dev_ops);
