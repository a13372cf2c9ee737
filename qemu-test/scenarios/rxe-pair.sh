# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="two VMs on one L2 segment, rdma_rxe on virtio-net, perftest between them"
TIMEOUT=420

setup() {
	segment lan
	vm vm1 server lan 10.0.1.1/24
	vm vm2 client lan 10.0.1.2/24
}

report() {
	local t
	echo "perftest over rxe, two TCG VMs on one segment (client side):"
	for t in write_bw read_lat send_lat; do
		echo "== $t: $(head -c 300 "$1/vm2/$t.cmd" 2>/dev/null)"
		sed -n '/^ *#bytes/,/^-\{20,\}/p' "$1/vm2/$t.client.log" 2>/dev/null
	done
	cat "$1/vm2/notes" 2>/dev/null
}
