#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once) the Debian trixie root that ferroce's tests run from.  It is
# used three ways: QEMU 11.1 (vfio-user-pci, from trixie-backports; bookworm
# only has 7.2 and trixie's libc cannot be installed on bookworm) runs
# chrooted in it; it is the kernel's build environment (trixie's rustc,
# rust-src, bindgen, clang, gcc-14 -- the versions Debian builds its own
# Rust-enabled kernel with, so nothing couples to the host's rustup); and the
# guests mount it read-only over 9p as their userspace (rdma-core, perftest).
#
# Usage: make-root.sh [--print-path]
. "$(dirname "$0")/lib.sh"

pkgs_file=$FERROCE_TOP/scripts/root-packages.txt
key=$(hash_inputs "$pkgs_file" "$FERROCE_TOP/scripts/make-root.sh" "$FERROCE_MIRROR")
name=roots/trixie-$key

if [ "${1:-}" = --print-path ]; then
	[ -e "$FERROCE_CACHE/$name/.complete" ] || die "trixie root not built; run scripts/make-root.sh"
	echo "$FERROCE_CACHE/$name"
	exit 0
fi

need_root
need_cmd mmdebstrap mmdebstrap

build_root() {
	local dir=$1
	local include
	include=$(grep -v '^\s*\(#\|$\)' "$pkgs_file" | paste -sd, -)
	log "building trixie root in $dir (a few minutes, once)"
	# trixie, except QEMU and its firmware from trixie-backports (11.1 has
	# vfio-user-pci, trixie's own 10.0 does not).
	mmdebstrap --variant=apt --mode=root \
		--aptopt='APT::Install-Recommends "false"' \
		--setup-hook='mkdir -p "$1/etc/apt/preferences.d"; printf "%s\n" \
			"Package: qemu-* seabios ipxe-qemu* ovmf* libslirp*" \
			"Pin: release n=trixie-backports" "Pin-Priority: 990" \
			>"$1/etc/apt/preferences.d/ferroce-qemu"' \
		--include="$include" \
		--customize-hook='echo ferroce > "$1/etc/hostname"' \
		--customize-hook='mkdir -p "$1/lib/modules" "$1/src" "$1/mnt/work" "$1/mnt/shared"' \
		trixie "$dir" \
		"deb $FERROCE_MIRROR trixie main" \
		"deb-src $FERROCE_MIRROR trixie main" \
		"deb $FERROCE_MIRROR trixie-backports main" \
		"deb-src $FERROCE_MIRROR trixie-backports main" >&2
	# Sanity: the things the harness relies on.
	chroot "$dir" qemu-system-x86_64 --version | head -1 >&2
	grep -q vfio-user-pci <(chroot "$dir" qemu-system-x86_64 -device help 2>/dev/null) ||
		die "QEMU in the root has no vfio-user-pci device"
}

path=$(cache_entry "$name" build_root)
prune_cache 'roots/trixie-*' 2
echo "$path"
