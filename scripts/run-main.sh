#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The main job (make run): boot two TCG VMs, each with the emulated ferroce
# NIC, on one L2 segment inside a private network namespace; load ferroce.ko
# and libferroce in each, run rdma-core's verbs examples and perftest (RC and
# UD) between them over ferroce0, check the wire capture, and show perftest's
# own result tables (qemu-test/scenarios/ferroce-pair.sh).  The same job over
# Linux's soft-RoCE, the baseline, is "qemu-test/run rxe-pair".
. "$(dirname "$0")/lib.sh"
need_root
"$FERROCE_TOP/scripts/setup-host.sh"
exec "$FERROCE_TOP/qemu-test/run" ferroce-pair
