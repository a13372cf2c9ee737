# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two ferroce VMs in two IPv4 subnets through the router namespace: perftest (RC, UD) and rdma-verify over the IPv4 RoCE v2 GID, frames to the router's MAC; perftest picks that GID itself; ferroce-gids names it; link-local GIDs fail fast (v2 at RTR in ~1 s, v1 with retry exceeded and one driver warning naming the working index); mixed sgid/dgid families refused (by ib_core, or the driver with a warning)"
TIMEOUT=900
CTL_SERVER=1
# shellcheck source=../wire.sh
. "$FERROCE_TOP/qemu-test/wire.sh"

setup() {
	segment lan1 10.0.1.254/24
	segment lan2 10.0.2.254/24
	vm vm1 ferroce lan1 10.0.1.1/24 10.0.1.254 ferroce
	vm vm2 ferroce lan2 10.0.2.1/24 10.0.2.254 ferroce
}

# next_hop RUN_DIR VM IP: every RoCE v2 frame IP sent went to the router's
# MAC (the VM noted its gateway's MAC from its neighbour table), and every
# one it received came from it.
next_hop() {
	local dir=$1 v=$2 ip=$3 gw dst src
	gw=$(awk '$1 == "gateway_mac" {print $2}' "$dir/$v/notes" 2>/dev/null)
	dst=$(wire_values "$dir" "$v" "udp.dstport == 4791 && ip.src == $ip" eth.dst)
	src=$(wire_values "$dir" "$v" "udp.dstport == 4791 && ip.dst == $ip" eth.src)
	echo "$v wire: RoCE v2 frames from $ip went to ${dst:-nothing}; those to it came from ${src:-nothing}; the router is ${gw:-unknown}"
	[ -n "$gw" ] && [ "$dst" = "$gw " ] && [ "$src" = "$gw " ]
}

check() {
	local rc=0
	checked wire_check "$1" vm1 10.0.1.1 10.0.2.1 || rc=1
	checked wire_check "$1" vm2 10.0.1.1 10.0.2.1 || rc=1
	checked next_hop "$1" vm1 10.0.1.1 || rc=1
	checked next_hop "$1" vm2 10.0.2.1 || rc=1
	return "$rc"
}

report() {
	echo "ferroce across the router namespace (client side):"
	cat "$1/vm2/notes" 2>/dev/null
}
