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
#include <rdma/ib_mad.h>
#include <ferroce/ferroce-hw.h>

/* ferroce_helpers.c: static inlines and macros wrapped for Rust */
unsigned int ferroce_num_online_cpus(void);
void ferroce_dma_rmb(void);
bool ferroce_ib_device_try_get(struct ib_device *dev);
struct net_device *ferroce_netdev_get_by_mac(const u8 *mac);
void ferroce_netdev_put(struct net_device *ndev);
int ferroce_netdev_mac(const struct net_device *ndev, u8 *mac);

#endif /* FERROCE_BINDINGS_H */
