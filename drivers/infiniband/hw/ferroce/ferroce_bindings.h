/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of the module's own bindgen run (see Kbuild): the ib_core API, the
 * few netdev items the kernel crate's bindings lack, and the ferroce device
 * programming model. The C helpers (ferroce_helpers.c) have a bindgen run
 * of their own.
 */
#ifndef FERROCE_BINDINGS_H
#define FERROCE_BINDINGS_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <ferroce/ferroce-hw.h>
#include <uapi/rdma/ferroce-abi.h>

#endif /* FERROCE_BINDINGS_H */
