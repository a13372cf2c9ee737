#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The pristine tree make upstream-check applies the kernel series to, built
# once: the pinned linux-source (the test kernel's, scripts/make-kernel.sh)
# as a git repository whose commit "base" is the unpacked source, and an O=
# build of it configured like the test kernel plus
# scripts/kernel/upstream.config (ib_core built in).  Prints the entry's
# path, which holds:
#   linux/   the git work tree (upstream-check resets it to "base" and
#            applies the series with git am, patch by patch)
#   build/   the O= tree; a run's builds are incremental from it
#
# The entry is used in place (kbuild records absolute paths): a run holds its
# lock exclusively (scripts/upstream-check.sh).
#
# Usage: make-upstream-base.sh
. "$(dirname "$0")/lib.sh"

need_root
root=$("$FERROCE_TOP/scripts/make-root.sh")
kdir=$("$FERROCE_TOP/scripts/make-kernel.sh")
ksrc=$(readlink -f "$kdir/build/source")
fragments=("$FERROCE_TOP/scripts/kernel/ferroce.config" "$FERROCE_TOP/scripts/kernel/upstream.config")
toolchain=$(in_root "$root" sh -c 'rustc --version; bindgen --version; gcc --version | head -1')
key=$(hash_inputs "$ksrc" "$toolchain" "${fragments[@]}" "$FERROCE_TOP/scripts/make-upstream-base.sh")

build_base() {
	local out=$1
	log "building the pristine upstream-check tree in $out (~12 min on 2 cores, once)"
	cp -a "$ksrc" "$out/linux"
	git -C "$out/linux" init -q
	git -C "$out/linux" -c core.autocrlf=false add -A -f
	git -C "$out/linux" -c user.name=ferroce -c user.email=ferroce@invalid \
		-c commit.gpgsign=false commit -q -m "linux $(make -s -C "$ksrc" kernelversion)"
	git -C "$out/linux" tag base
	mkdir -p "$out/build"
	cat "${fragments[@]}" >"$out/fragment.config"
	in_root "$root" bash -euc '
		out=$1
		cd "$out/linux"
		k() { make -s O="$out/build" "$@"; }
		k tinyconfig
		./scripts/kconfig/merge_config.sh -m -O "$out/build" "$out/build/.config" \
			"$out/fragment.config" >/dev/null
		k olddefconfig
		grep -qx CONFIG_INFINIBAND=y "$out/build/.config"
		grep -qx CONFIG_RUST=y "$out/build/.config"
		k -j"$(nproc)" --jobserver-style=pipe bzImage modules
	' base "$out" >&2
}

path=$(cache_entry "kernel/upstream-$key" build_base)
prune_cache "kernel/upstream-*" 1
echo "$path"
