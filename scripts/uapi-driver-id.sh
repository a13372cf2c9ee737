#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The one change ferroce makes to a shared uapi header: RDMA_DRIVER_FERROCE,
# the next value of enum rdma_driver_id in <rdma/ib_user_ioctl_verbs.h>.
# Driver ids are allocated by the kernel, in that header; rdma-core copies
# the header from the kernel.  So both patch series take it from here,
# applied to the pinned kernel's copy (7.3.4: after RDMA_DRIVER_IONIC, so
# RDMA_DRIVER_FERROCE is 22), and so does the out-of-tree provider build,
# whose rdma-core headers are older than the kernel's.
#
# Usage: uapi-driver-id.sh IN OUT   (IN: a kernel's ib_user_ioctl_verbs.h)
set -euo pipefail

in=$1 out=$2
grep -q 'RDMA_DRIVER_FERROCE' "$in" && { echo "error: $in already has RDMA_DRIVER_FERROCE" >&2; exit 1; }
tmp=$out.tmp.$$
# The enum's closing line is the first "};" after "enum rdma_driver_id {".
awk '
	/^enum rdma_driver_id \{$/ { inside = 1 }
	inside && /^\};$/ { print "\tRDMA_DRIVER_FERROCE,"; inside = 0; done++ }
	{ print }
	END { exit done == 1 ? 0 : 1 }
' "$in" >"$tmp" || { rm -f "$tmp"; echo "error: no enum rdma_driver_id in $in" >&2; exit 1; }
mv "$tmp" "$out"
