# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="rxe in two IPv4 subnets through a router: IPv4 RoCE v2 GID works, link-local GID 0 fails"
TIMEOUT=480

setup() {
	segment lan1 10.0.1.254/24
	segment lan2 10.0.2.254/24
	vm vm1 server lan1 10.0.1.1/24 10.0.1.254
	vm vm2 client lan2 10.0.2.1/24 10.0.2.254
}

report() {
	echo "rxe across the router namespace (client side):"
	cat "$1/vm2/notes" 2>/dev/null
}
