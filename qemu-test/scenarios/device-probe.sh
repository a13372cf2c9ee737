# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="the emulated ferroce NIC appears as a PCI function (IDs, class, BARs, MSI-X), answers a reset handshake and carries its netdev's traffic"
TIMEOUT=240

setup() {
	segment lan 10.0.1.254/24
	vm vm1 single lan 10.0.1.1/24 ferroce
}

# The VM's Ethernet traffic went through the device's port: the device's
# pcap of its wire holds the ICMP echo replies from the segment's router.
check() {
	local replies
	replies=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$1/vm1/wire.pcap" \
		-Y 'icmp.type == 0' -T fields -e ip.src 2>/dev/null | grep -c '^10\.0\.1\.254$')
	echo "device port: $replies ICMP echo replies from the router in the device's wire pcap"
	[ "$replies" -ge 3 ]
}

report() {
	sed -n '/^lspci/,/^end lspci/p' "$1/vm1/notes" 2>/dev/null
}
