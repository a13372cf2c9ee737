// SPDX-License-Identifier: GPL-2.0
/*
 * Static inlines and macros the Rust part of ferroce needs and the 7.3
 * kernel crate does not wrap. Declared in ferroce_bindings.h.
 */
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

/* The netdev with this Ethernet MAC in init_net, held; NULL if none. */
struct net_device *ferroce_netdev_get_by_mac(const u8 *mac)
{
	struct net_device *ndev;

	rcu_read_lock();
	ndev = dev_getbyhwaddr_rcu(&init_net, ARPHRD_ETHER, mac);
	if (ndev)
		dev_hold(ndev);
	rcu_read_unlock();
	return ndev;
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
