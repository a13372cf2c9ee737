// SPDX-License-Identifier: GPL-2.0
/*
 * Static inlines and macros the Rust part of ferroce needs and the 7.3
 * kernel crate does not wrap. Declared in ferroce_bindings.h.
 */
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/cpumask.h>
#include "ferroce_bindings.h"

unsigned int ferroce_num_online_cpus(void)
{
	return num_online_cpus();
}

void ferroce_dma_rmb(void)
{
	dma_rmb();
}

bool ferroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
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

bool ferroce_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
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
 * Pins @irq to the @index-th CPU of the local spread (cpumask_local_spread),
 * as affinity and hint; ferroce_irq_clear_hint() must run before free_irq().
 */
int ferroce_irq_set_spread_hint(unsigned int irq, unsigned int index)
{
	unsigned int cpu = cpumask_local_spread(index, NUMA_NO_NODE);

	return irq_set_affinity_and_hint(irq, cpumask_of(cpu));
}

void ferroce_irq_clear_hint(unsigned int irq)
{
	irq_update_affinity_hint(irq, NULL);
}
