# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
# Documentation/ferroce/usage.rst, as written: its host network (a bridge, a
# VXLAN tunnel to the other host, the tap), its ferroce-dev command line and
# its QEMU options run here, its guest commands and perftest lines in the
# guests (usage.guest).  The page's "What the test supplies" lists the rest.
DESC="Documentation/ferroce/usage.rst as written: two hosts (namespaces) whose bridges are joined only by a VXLAN tunnel over their uplinks, a ferroce VM on each, perftest between them over its own TCP exchange and over rdma_cm"
TIMEOUT=600
# The underlay's VXLAN (UDP 4789), headers only (run_scenario's capture).
CAPTURE=1
# The page's ferroce-dev command line as written, UDP GSO writes included:
# the underlay carries and the capture records a run of RoCE v2 frames as
# one VXLAN super-frame, so check() counts bytes, not frames.
TX_GSO=1
PAGE=$FERROCE_TOP/Documentation/ferroce/usage.rst

setup() {
	host hostA 192.0.2.1/24
	host hostB 192.0.2.2/24
	vm vm1 usage - 10.0.0.1/24 smp=2 ferroce host=hostA tap=ferroce-tap0
	vm vm2 usage - 10.0.0.2/24 smp=2 ferroce host=hostB tap=ferroce-tap0
}

# page_block NAME: a block of the page (qemu-test/guest/page-block).
page_block() { "$FERROCE_TOP/qemu-test/guest/page-block" "$PAGE" "$1"; }

# page_names VM: the page's names (its first code block) for VM, on its host.
page_names() {
	local h=${VM_HOST[$1]} o
	UPLINK=eth0
	LOCAL=${HOST_ADDR[$h]%/*}
	for o in "${HOSTS[@]}"; do [ "$o" != "$h" ] && PEER=${HOST_ADDR[$o]%/*}; done
	MAC=$(vm_mac "$1")
	MEM=${VM_MEM[$1]}M
	RUN=$RUN_DIR/$1
	export UPLINK LOCAL PEER MAC MEM RUN
}

# The host's network: the page's block, run in the host's namespace.
host_setup() {
	local v block
	for v in "${VMS[@]}"; do [ "${VM_HOST[$v]}" = "$1" ] && break; done
	block=$(page_block host-network) || return 1
	(page_names "$v" && hostns "$1" bash -eux -c "$block")
}

# The device process's options: the page's command line, as its block
# expands it (ferroce-dev itself is the repository's build, run by the
# harness in the test root).
device_args() {
	local block
	block=$(page_block device) || return 1
	(
		page_names "$1"
		ferroce-dev() { printf '%s\n' "$@"; }
		eval "$block"
		wait
	)
}

# QEMU's options: the page's -object, -machine, -netdev and -device ones,
# as its block expands them; the rest of its command line (KVM, a disk) is
# the user's VM, and the test bed's own (qemu-test/run) replaces it.
qemu_net_args() {
	local block
	block=$(page_block qemu) || return 1
	(
		page_names "$1"
		qemu-system-x86_64() {
			while [ $# -gt 0 ]; do
				case $1 in
				-object | -machine | -netdev | -device) printf '%s\n%s\n' "$1" "$2" ;;
				esac
				shift 2
			done
		}
		eval "$block"
	)
}

# The underlay carried the RDMA traffic, as VXLAN: RoCE v2 inside, both ways
# (by the inner IPv4 source: guest B's requests, guest A's ACKs). Counted
# in captured frames and in inner IPv4 bytes (the last of each frame's
# ip.src and ip.len is the inner header's): a UDP GSO super-frame is one
# frame of up to 64 KiB, which the receiving host's tap cuts back into
# the RoCE frames.
check() {
	local pcap=$1/wire-underlay.pcap a b b_frames
	"$FERROCE_TOP/scripts/in-root" "$ROOT" -- tshark -r "$pcap" -Y 'vxlan && udp.dstport == 4791' \
		-T fields -E separator=' ' -e ip.src -e ip.len 2>/dev/null |
		awk '{n = split($1, s, ","); m = split($2, l, ","); f[s[n]]++; b[s[n]] += l[m]}
			END {for (k in f) print k, f[k], b[k]}' >"$1/underlay.txt"
	a=$(awk '$1 == "10.0.0.1" {print $2}' "$1/underlay.txt")
	read -r b_frames b < <(awk '$1 == "10.0.0.2" {print $2, $3}' "$1/underlay.txt")
	echo "underlay: RoCE v2 inside VXLAN from guest B ${b_frames:-0} frames, ${b:-0} bytes, from guest A ${a:-0} frames"
	# Guest B's two runs send 1000 64-KiB messages each; the capture may
	# miss some under load, so one run's worth of payload (65536000
	# bytes) must be there.
	[ "${b:-0}" -ge 65536000 ] && [ "${a:-0}" -ge 1 ]
}

report() {
	cat "$1/vm2/notes" 2>/dev/null
}
