// SPDX-License-Identifier: GPL-2.0
/*
 * Static inlines and macros the Rust part of ferroce needs and the 7.3
 * kernel crate does not wrap. Declared in ferroce_bindings.h.
 */
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/cpumask.h>
#include <linux/mm.h>
#include <rdma/iter.h>
#include <rdma/rdma_netlink.h>
#include <net/netlink.h>
#include "ferroce_bindings.h"

unsigned int ferroce_num_online_cpus(void)
{
	return num_online_cpus();
}

void ferroce_dma_rmb(void)
{
	dma_rmb();
}

void ferroce_dma_wmb(void)
{
	dma_wmb();
}

bool ferroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void ferroce_ib_device_hold_mem(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void ferroce_ib_device_put_mem(struct ib_device *dev)
{
	put_device(&dev->dev);
}

void ferroce_netdev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

/* Copies the 6-byte Ethernet address of @ndev; -EINVAL if it has none. */
int ferroce_netdev_mac(const struct net_device *ndev, u8 *mac)
{
	if (ndev->addr_len != ETH_ALEN)
		return -EINVAL;
	memcpy(mac, ndev->dev_addr, ETH_ALEN);
	return 0;
}

/*
 * The MAC a ferroce port pairs by: the permanent address, or dev_addr if the
 * netdev has none. -EINVAL for netdevs that never pair (not Ethernet, VLAN,
 * bridge or bond masters: they carry a port's MAC without being its netdev).
 */
int ferroce_netdev_pair_mac(const struct net_device *ndev, u8 *mac)
{
	if (ndev->type != ARPHRD_ETHER || ndev->addr_len != ETH_ALEN ||
	    is_vlan_dev(ndev) || netif_is_bridge_master(ndev) ||
	    netif_is_lag_master(ndev))
		return -EINVAL;
	if (!is_zero_ether_addr(ndev->perm_addr))
		memcpy(mac, ndev->perm_addr, ETH_ALEN);
	else
		memcpy(mac, ndev->dev_addr, ETH_ALEN);
	return 0;
}

/* Administratively up with carrier: what makes a RoCE port ACTIVE. */
bool ferroce_netdev_oper_up(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

unsigned int ferroce_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

const char *ferroce_netdev_name(const struct net_device *ndev)
{
	return netdev_name(ndev);
}

int ferroce_register_netdev_notifier(struct notifier_block *nb)
{
	return register_netdevice_notifier(nb);
}

void ferroce_unregister_netdev_notifier(struct notifier_block *nb)
{
	unregister_netdevice_notifier(nb);
}

unsigned int ferroce_netdev_event(unsigned long event)
{
	switch (event) {
	case NETDEV_REGISTER:
		return FERROCE_NDEV_REGISTER;
	case NETDEV_UNREGISTER:
		return FERROCE_NDEV_UNREGISTER;
	case NETDEV_UP:
		return FERROCE_NDEV_UP;
	case NETDEV_DOWN:
		return FERROCE_NDEV_DOWN;
	case NETDEV_CHANGE:
		return FERROCE_NDEV_CHANGE;
	case NETDEV_CHANGEMTU:
		return FERROCE_NDEV_CHANGEMTU;
	case NETDEV_CHANGENAME:
		return FERROCE_NDEV_CHANGENAME;
	case NETDEV_CHANGEADDR:
		return FERROCE_NDEV_CHANGEADDR;
	default:
		return FERROCE_NDEV_OTHER;
	}
}

struct net_device *ferroce_netdev_notifier_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

/*
 * Pins @irq to the @index-th CPU of the spread local to @dev's NUMA node
 * (cpumask_local_spread), as affinity and hint; ferroce_irq_clear_hint()
 * must run before free_irq().
 */
int ferroce_irq_set_spread_hint(struct device *dev, unsigned int irq,
				unsigned int index)
{
	unsigned int cpu = cpumask_local_spread(index, dev_to_node(dev));

	return irq_set_affinity_and_hint(irq, cpumask_of(cpu));
}

void ferroce_irq_clear_hint(unsigned int irq)
{
	irq_update_affinity_hint(irq, NULL);
}

/*
 * Reads a driver request of at most @len bytes into @dst (zeroed by the
 * caller): -EINVAL if userspace gave fewer than @min_len bytes, -EOPNOTSUPP
 * if it gave more than @len and the bytes beyond are not zero
 * (ferroce-abi.h, "Requests").
 */
int ferroce_udata_in(struct ib_udata *udata, void *dst, size_t len,
		     size_t min_len)
{
	if (udata->inlen < min_len)
		return -EINVAL;
	if (udata->inlen > len &&
	    !ib_is_udata_cleared(udata, len, udata->inlen - len))
		return -EOPNOTSUPP;
	return ib_copy_from_udata(dst, udata, min(len, udata->inlen));
}

/* Copies a driver response, truncated to what userspace has room for. */
int ferroce_udata_out(struct ib_udata *udata, void *src, size_t len)
{
	return ib_copy_to_udata(udata, src, min(len, udata->outlen));
}

/* The driver udata of a uverbs command's bundle. */
struct ib_udata *ferroce_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

/*
 * The user context a uverbs command runs in, or NULL if it has none (yet,
 * or any more). The bundle's context is set only for commands that create
 * an object, so ask the command's file, as ib_core does.
 */
struct ib_ucontext *ferroce_udata_ucontext(struct ib_udata *udata)
{
	struct uverbs_attr_bundle *attrs =
		container_of(udata, struct uverbs_attr_bundle, driver_udata);
	struct ib_ucontext *uctx = ib_uverbs_get_ucontext(attrs);

	return IS_ERR(uctx) ? NULL : uctx;
}

struct ib_umem *ferroce_umem_get(struct ib_device *dev, u64 addr, size_t size,
				 int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

size_t ferroce_umem_num_blocks(struct ib_umem *umem, unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

/*
 * Writes the DMA addresses of the @pgsz blocks of @umem to @out (room for
 * @max); returns how many there are.
 */
size_t ferroce_umem_blocks(struct ib_umem *umem, unsigned long pgsz, u64 *out,
			   size_t max)
{
	struct ib_block_iter biter;
	size_t n = 0;

	rdma_umem_for_each_dma_block(umem, &biter, pgsz) {
		if (n < max)
			out[n] = rdma_block_iter_dma_address(&biter);
		n++;
	}
	return n;
}

u64 ferroce_mmap_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

/* Maps the MMIO pages of @entry, uncached (doorbell pages). */
int ferroce_mmap_io_nc(struct ib_ucontext *uctx, struct vm_area_struct *vma,
		       unsigned long pfn, struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_io(uctx, vma, pfn, entry->npages << PAGE_SHIFT,
				 pgprot_noncached(vma->vm_page_prot), entry);
}

/* Calls the completion handler of @cq (ib_uverbs' for user CQs). */
void ferroce_cq_comp(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

/* Dispatches an async event of @qp to its consumer. */
void ferroce_qp_event(struct ib_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = type,
	};

	if (qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}

/* Dispatches an async event of @cq to its consumer. */
void ferroce_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = type,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

/* Dispatches an async event of @srq to its consumer. */
void ferroce_srq_event(struct ib_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = srq->device,
		.element.srq = srq,
		.event = type,
	};

	if (srq->event_handler)
		srq->event_handler(&ev, srq->srq_context);
}

void *ferroce_nl_driver_nest_start(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void ferroce_nl_nest_end(struct sk_buff *msg, void *nest)
{
	nla_nest_end(msg, nest);
}

void ferroce_nl_nest_cancel(struct sk_buff *msg, void *nest)
{
	nla_nest_cancel(msg, nest);
}
