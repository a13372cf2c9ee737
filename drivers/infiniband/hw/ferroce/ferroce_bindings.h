/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of the module's own bindgen run (see Kbuild): the ib_core API and
 * the ferroce device programming model, plus the C helpers of
 * ferroce_helpers.c.
 */
#ifndef FERROCE_BINDINGS_H
#define FERROCE_BINDINGS_H

#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_cache.h>
#include <ferroce/ferroce-hw.h>
#include <uapi/rdma/ferroce-abi.h>

/* ferroce_helpers.c: static inlines and macros wrapped for Rust */
unsigned int ferroce_num_online_cpus(void);
void ferroce_dma_rmb(void);
void ferroce_dma_wmb(void);
bool ferroce_ib_device_try_get(struct ib_device *dev);
void ferroce_ib_device_hold_mem(struct ib_device *dev);
void ferroce_ib_device_put_mem(struct ib_device *dev);
void ferroce_netdev_put(struct net_device *ndev);
int ferroce_netdev_mac(const struct net_device *ndev, u8 *mac);
int ferroce_netdev_pair_mac(const struct net_device *ndev, u8 *mac);
bool ferroce_netdev_oper_up(const struct net_device *ndev);
unsigned int ferroce_netdev_mtu(const struct net_device *ndev);
const char *ferroce_netdev_name(const struct net_device *ndev);

/* Netdev notifier events, as ferroce_netdev_event() reports them */
#define FERROCE_NDEV_OTHER	0
#define FERROCE_NDEV_REGISTER	1
#define FERROCE_NDEV_UNREGISTER	2
#define FERROCE_NDEV_UP		3
#define FERROCE_NDEV_DOWN	4
#define FERROCE_NDEV_CHANGE	5
#define FERROCE_NDEV_CHANGEMTU	6
#define FERROCE_NDEV_CHANGENAME	7
#define FERROCE_NDEV_CHANGEADDR	8

int ferroce_register_netdev_notifier(struct notifier_block *nb);
void ferroce_unregister_netdev_notifier(struct notifier_block *nb);
unsigned int ferroce_netdev_event(unsigned long event);
struct net_device *ferroce_netdev_notifier_dev(void *info);

int ferroce_udata_in(struct ib_udata *udata, void *dst, size_t len,
		     size_t min_len);
int ferroce_udata_out(struct ib_udata *udata, void *src, size_t len);
struct ib_udata *ferroce_bundle_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *ferroce_udata_ucontext(struct ib_udata *udata);
struct ib_umem *ferroce_umem_get(struct ib_device *dev, u64 addr, size_t size,
				 int access);
size_t ferroce_umem_num_blocks(struct ib_umem *umem, unsigned long pgsz);
size_t ferroce_umem_blocks(struct ib_umem *umem, unsigned long pgsz, u64 *out,
			   size_t max);
u64 ferroce_mmap_offset(const struct rdma_user_mmap_entry *entry);
int ferroce_mmap_io_nc(struct ib_ucontext *uctx, struct vm_area_struct *vma,
		       unsigned long pfn, struct rdma_user_mmap_entry *entry);
void ferroce_cq_comp(struct ib_cq *cq);
void ferroce_qp_event(struct ib_qp *qp, enum ib_event_type type);
void ferroce_cq_event(struct ib_cq *cq, enum ib_event_type type);
void ferroce_srq_event(struct ib_srq *srq, enum ib_event_type type);

/* restrack: the RDMA_NLDEV_ATTR_DRIVER nest of a fill_res_*_entry call */
void *ferroce_nl_driver_nest_start(struct sk_buff *msg);
void ferroce_nl_nest_end(struct sk_buff *msg, void *nest);
void ferroce_nl_nest_cancel(struct sk_buff *msg, void *nest);

int ferroce_irq_set_spread_hint(struct device *dev, unsigned int irq,
				unsigned int index);
void ferroce_irq_clear_hint(unsigned int irq);

#endif /* FERROCE_BINDINGS_H */
