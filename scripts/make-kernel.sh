#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once per input) the Rust-enabled test kernel from Debian's
# linux-source-7.3 package, inside the trixie root with trixie's own toolchain
# (rustc, rust-src, bindgen, clang-19, gcc-14: the combination Debian builds
# its own Rust-enabled 7.3 kernel with).  Prints the build directory, which
# holds:
#   build/               the O= tree; KDIR for out-of-tree modules
#   bzImage              the kernel image
#   modroot/lib/modules  the installed in-tree modules (ib_core, rxe, ...)
#   make-flags           flags every make against it needs (LLVM=1 for debug)
#
# FERROCE_KERNEL_FLAVOUR=debug adds scripts/kernel/debug.config (KASAN,
# kmemleak, lockdep, ...).  FERROCE_KERNEL_VERSION pins the source package
# version prefix (default 7.3.4).
#
# Usage: make-kernel.sh [--print-path]
. "$(dirname "$0")/lib.sh"

flavour=${FERROCE_KERNEL_FLAVOUR:-default}
want=${FERROCE_KERNEL_VERSION:-7.3.4}
# make_flags: what every make against this kernel needs (written to the
# entry's make-flags for out-of-tree module builds).
case $flavour in
default)
	fragments=("$FERROCE_TOP/scripts/kernel/ferroce.config")
	make_flags=
	;;
debug)
	fragments=("$FERROCE_TOP/scripts/kernel/ferroce.config" "$FERROCE_TOP/scripts/kernel/debug.config")
	make_flags=LLVM=1
	;;
*) die "FERROCE_KERNEL_FLAVOUR must be 'default' or 'debug', not '$flavour'" ;;
esac

need_root
root=$("$FERROCE_TOP/scripts/make-root.sh")

# --- source ---------------------------------------------------------------
# An already unpacked source of the wanted version is used without asking
# the archive; otherwise the archive is asked which versions it has.
find_src() {
	local d
	for d in "$FERROCE_CACHE"/kernel/src-"$want"[-+~]*; do
		[ -e "$d/.complete" ] && { echo "$d"; return 0; }
	done
	return 1
}

fetch_src() {
	local dir=$1 debver=$2 pkg=$3
	log "unpacking $pkg $debver into $dir"
	(cd "$dir" && in_root "$root" sh -c "cd '$dir' && apt-get download -q '$pkg=$debver'") >&2
	dpkg-deb --fsys-tarfile "$dir"/"$pkg"_*.deb |
		tar -xO --wildcards './usr/src/linux-source-*.tar.xz' | tar -xJ -C "$dir"
	mv "$dir"/linux-source-*/ "$dir/linux"
	rm -f "$dir"/*.deb
	echo "$debver" >"$dir/deb-version"
}

if ! src=$(find_src); then
	log "asking the archive for linux-source $want"
	in_root "$root" apt-get update -qq >&2
	pkg=linux-source-${want%.*}
	debver=$(in_root "$root" apt-cache madison "$pkg" 2>/dev/null |
		awk -v w="$want" '$3 ~ "^"w"[-+~]" {print $3; exit}')
	if [ -z "$debver" ]; then
		read -r pkg debver < <(in_root "$root" sh -c \
			"apt-cache search --names-only '^linux-source-7\\.[0-9]+\$' | cut -d' ' -f1 |
			 xargs -r apt-cache madison" | awk '{print $1, $3}' | sort -V -k2 | tail -1)
		[ -n "$debver" ] || die "no linux-source-7.x package found in trixie/trixie-backports/sid"
		log "WARNING: ***************************************************************"
		log "WARNING: linux-source $want has left the archive; using $pkg $debver"
		log "WARNING: ***************************************************************"
	fi
	src=$(cache_entry "kernel/src-$debver" fetch_src "$debver" "$pkg")
fi
debver=$(cat "$src/deb-version")

# --- build ----------------------------------------------------------------
toolchain=$(in_root "$root" sh -c 'rustc --version; bindgen --version; gcc --version | head -1; clang --version | head -1')
key=$(hash_inputs "$debver" "$flavour" "$toolchain" "$make_flags" "${fragments[@]}" "$FERROCE_TOP/scripts/make-kernel.sh")
name=kernel/$flavour-$key

if [ "${1:-}" = --print-path ]; then
	[ -e "$FERROCE_CACHE/$name/.complete" ] || die "kernel ($flavour) not built; run scripts/make-kernel.sh"
	echo "$FERROCE_CACHE/$name"
	exit 0
fi

build_kernel() {
	local out=$1
	log "building the $flavour kernel from $debver in $out (~6 min on 2 cores, once)"
	mkdir -p "$out/build"
	cat "${fragments[@]}" >"$out/fragment.config"
	echo "$make_flags" >"$out/make-flags"
	in_root "$root" bash -euc '
		src=$1 out=$2 flags=$3
		cd "$src/linux"
		# shellcheck disable=SC2086 # flags is a word list
		k() { make -s $flags O="$out/build" "$@"; }
		k tinyconfig
		./scripts/kconfig/merge_config.sh -m -O "$out/build" "$out/build/.config" "$out/fragment.config" >/dev/null
		k olddefconfig
		k rustavailable
		# Every requested option (=y/=m/=N and "is not set") must have
		# survived Kconfig.
		bad=0
		while IFS= read -r line; do
			case $line in CONFIG_* | "# CONFIG_"*" is not set") ;; *) continue ;; esac
			grep -qx "$line" "$out/build/.config" || { echo "kernel config: $line did not stick" >&2; bad=1; }
		done <"$out/fragment.config"
		[ $bad = 0 ]
		k -j"$(nproc)" --jobserver-style=pipe bzImage modules
		k INSTALL_MOD_PATH="$out/modroot" modules_install
		cp "$out/build/arch/x86/boot/bzImage" "$out/bzImage"
		k kernelrelease >"$out/release"
	' build "$src" "$out" "$make_flags" >&2
}

path=$(cache_entry "$name" build_kernel)
prune_cache "kernel/$flavour-*" 2
echo "$path"
