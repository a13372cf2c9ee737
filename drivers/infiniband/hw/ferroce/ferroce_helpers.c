// SPDX-License-Identifier: GPL-2.0
/*
 * Static inlines and macros of ib_core, the netdev core, IRQ affinity and
 * netlink that ferroce's Rust code calls and the 7.3 kernel crate does not
 * wrap, in the form of rust/helpers/: each rust_helper_NAME only calls NAME,
 * and the module's Kbuild binds it as NAME (bindgen over this file, then the
 * same rename rust/Makefile does), so the Rust code calls it by the name it
 * will have in tree. Every decision is made in Rust.
 */
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/cpumask.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iter.h>
#include <net/netlink.h>

/*
 * rust/helpers/helpers.c defines this (to __always_inline in tree); built as
 * a module of its own, the helpers are out-of-line functions.
 */
#ifndef __rust_helper
#define __rust_helper
#endif

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper int rust_helper_ib_copy_from_udata(void *dest, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dest, udata, len);
}

__rust_helper int rust_helper_ib_copy_to_udata(struct ib_udata *udata, void *src, size_t len)
{
	return ib_copy_to_udata(udata, src, len);
}

__rust_helper bool rust_helper_ib_is_udata_cleared(struct ib_udata *udata,
						   size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}

__rust_helper size_t rust_helper_ib_umem_num_dma_blocks(struct ib_umem *umem, unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

__rust_helper void
rust_helper___rdma_umem_block_iter_start(struct ib_block_iter *biter,
					 struct ib_umem *umem,
					 unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

__rust_helper bool
rust_helper___rdma_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

__rust_helper dma_addr_t
rust_helper_rdma_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

__rust_helper u64
rust_helper_rdma_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

__rust_helper pgprot_t rust_helper_pgprot_noncached(pgprot_t prot)
{
	return pgprot_noncached(prot);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

__rust_helper bool rust_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

__rust_helper bool rust_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

__rust_helper const char *rust_helper_netdev_name(const struct net_device *dev)
{
	return netdev_name(dev);
}

__rust_helper bool rust_helper_is_vlan_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev);
}

__rust_helper bool
rust_helper_netif_is_bridge_master(const struct net_device *dev)
{
	return netif_is_bridge_master(dev);
}

__rust_helper bool rust_helper_netif_is_lag_master(const struct net_device *dev)
{
	return netif_is_lag_master(dev);
}

__rust_helper struct net_device *
rust_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

__rust_helper unsigned int rust_helper_num_online_cpus(void)
{
	return num_online_cpus();
}

__rust_helper int rust_helper_dev_to_node(struct device *dev)
{
	return dev_to_node(dev);
}

__rust_helper const struct cpumask *rust_helper_cpumask_of(unsigned int cpu)
{
	return cpumask_of(cpu);
}

__rust_helper int rust_helper_irq_set_affinity_and_hint(unsigned int irq, const struct cpumask *m)
{
	return irq_set_affinity_and_hint(irq, m);
}

__rust_helper int rust_helper_irq_update_affinity_hint(unsigned int irq, const struct cpumask *m)
{
	return irq_update_affinity_hint(irq, m);
}

__rust_helper struct nlattr *rust_helper_nla_nest_start(struct sk_buff *skb, int attrtype)
{
	return nla_nest_start(skb, attrtype);
}

__rust_helper int rust_helper_nla_nest_end(struct sk_buff *skb, struct nlattr *start)
{
	return nla_nest_end(skb, start);
}

__rust_helper void rust_helper_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start)
{
	nla_nest_cancel(skb, start);
}

/*
 * struct net_device is opaque in the 7.3 kernel crate's bindings: these
 * read one field each (what a kernel::net::Device would read directly).
 */
__rust_helper unsigned short rust_helper_netdev_type(const struct net_device *dev)
{
	return dev->type;
}

__rust_helper unsigned char rust_helper_netdev_addr_len(const struct net_device *dev)
{
	return dev->addr_len;
}

__rust_helper const unsigned char *
rust_helper_netdev_dev_addr(const struct net_device *dev)
{
	return dev->dev_addr;
}

__rust_helper const unsigned char *
rust_helper_netdev_perm_addr(const struct net_device *dev)
{
	return dev->perm_addr;
}

__rust_helper unsigned int rust_helper_netdev_mtu(const struct net_device *dev)
{
	return READ_ONCE(dev->mtu);
}
