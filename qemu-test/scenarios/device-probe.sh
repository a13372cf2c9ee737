# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
DESC="the emulated ferroce NIC appears as a PCI function (IDs, class, BARs, MSI-X) and answers a reset handshake"
TIMEOUT=240

setup() {
	segment lan
	vm vm1 single lan 10.0.1.1/24 ferroce
}

report() {
	sed -n '/^lspci/,/^end lspci/p' "$1/vm1/notes" 2>/dev/null
}
