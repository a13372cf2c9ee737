#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Does libibverbs load libferroce and match it to a ferroce device?  Run as
# root inside the trixie root (make provider-check).  No kernel driver is
# needed: a fake sysfs (SYSFS_PATH; libibverbs falls back to sysfs when the
# kernel has no RDMA netlink) shows one uverbs device with ferroce's PCI
# modalias, and a private mount namespace gives it a /dev/infiniband node
# and an /etc/libibverbs.d with ferroce.driver added, the way the guest's
# load_ferroce_provider does.  ibv_devices must list the device without
# "couldn't load driver" or "no userspace device-specific driver" warnings.
#
# Usage: load-test.sh PROVIDER_DIR   (holding ferroce.driver)
set -euo pipefail

dir=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sys=$tmp/sys
uv=$sys/class/infiniband_verbs
ib=$sys/class/infiniband/ferroce0
mkdir -p "$uv/uverbs0" "$ib/device"
echo 6 >"$uv/abi_version"
echo ferroce0 >"$uv/uverbs0/ibdev"
echo 1 >"$uv/uverbs0/abi_version"
echo 231:192 >"$uv/uverbs0/dev"
echo 1 >"$ib/node_type"
echo 0200:00ff:fe00:0fe0 >"$ib/node_guid"
echo pci:v00001B36d00000FE0sv00001B36sd00000FE0bc02sc80i00 >"$ib/device/modalias"

# The mounts below must not reach the caller's namespace: a private one if
# possible; inside scripts/in-root's chroot (where / is no mount point, so
# unshare cannot change its propagation) the root's own private namespace
# already contains them.
if unshare -m --propagation private true 2>/dev/null; then
	propagation=private
elif [ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ]; then
	propagation=unchanged
else
	echo "not ok - no private mount namespace for the load test"
	exit 1
fi

# run_ibv_devices WITH_FERROCE: ibv_devices against the fake sysfs, with or
# without ferroce.driver in the configuration directory.
run_ibv_devices() {
	unshare -m --propagation "$propagation" -- bash -euc '
		dir=$1 tmp=$2 with=$3
		mkdir "$tmp/conf"
		cp /etc/libibverbs.d/*.driver "$tmp/conf/"
		[ "$with" = 1 ] && cp "$dir/ferroce.driver" "$tmp/conf/"
		mount --bind "$tmp/conf" /etc/libibverbs.d
		mount -t tmpfs tmpfs /dev
		mkdir /dev/infiniband
		: >/dev/infiniband/uverbs0
		SYSFS_PATH=$tmp/sys IBV_SHOW_WARNINGS=1 ibv_devices 2>&1
		rm -rf "$tmp/conf"
	' load-test "$dir" "$tmp" "$1"
}

fail=0
out=$(run_ibv_devices 1)
printf '%s\n' "$out" | sed 's/^/# /'
if ! grep -q 'ferroce0.*020000fffe000fe0' <<<"$out"; then
	echo "not ok - ibv_devices does not list ferroce0"
	fail=1
elif grep -q -i 'warning' <<<"$out"; then
	echo "not ok - libibverbs warned while loading libferroce"
	fail=1
else
	echo "ok - libibverbs loads libferroce and matches ferroce0 by PCI ID"
fi

# Control: without ferroce.driver the device has no provider.
out=$(run_ibv_devices 0)
if grep -q 'no userspace device-specific driver found for ferroce0' <<<"$out"; then
	echo "ok - without ferroce.driver ferroce0 has no provider (control)"
else
	printf '%s\n' "$out" | sed 's/^/# /'
	echo "not ok - control run did not miss the provider"
	fail=1
fi
exit "$fail"
