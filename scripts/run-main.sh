#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The main job (make run): boot two TCG VMs on one L2 segment inside a private
# network namespace, bring up RDMA on each and run perftest between them,
# showing perftest's own output.  Until ferroce's driver carries traffic the
# RDMA device is Linux's soft-RoCE (rxe) on virtio-net; the same job will run
# over ferroce's emulated NIC.
. "$(dirname "$0")/lib.sh"
need_root
"$FERROCE_TOP/scripts/setup-host.sh"
exec "$FERROCE_TOP/qemu-test/run" rxe-pair
