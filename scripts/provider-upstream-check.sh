#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make provider-check, rdma-core's side: the provider series
# (make-provider-series.sh) applied with git am to the pristine upstream
# rdma-core, built by rdma-core's own CMake and ninja (-DENABLE_WERROR=1, as
# its CI builds; no man pages or pyverbs), and the provider's tests run
# against that build:
#   - the build made libferroce-rdmav<ABI>.so and a ferroce.driver file;
#   - tests/unit.c, compiled in the patched tree's providers/ferroce/ with
#     the build's private headers and libraries;
#   - tests/load-test.sh: libibverbs loads the built libferroce and
#     matches a ferroce device.
# Prints "ok - ..." / "not ok - ..." lines; exits non-zero on any failure.
#
# Usage: provider-upstream-check.sh [WORKDIR]   (default .build/provider-upstream)
. "$(dirname "$0")/lib.sh"

need_root
work=${1:-$FERROCE_TOP/.build/provider-upstream}
root=$("$FERROCE_TOP/scripts/make-root.sh")
rc=$("$FERROCE_TOP/scripts/make-rdma-core.sh")
pabi=$(cat "$rc/provider-abi")
fail=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fail=1; }

rm -rf "$work"
mkdir -p "$work"
"$FERROCE_TOP/scripts/make-provider-series.sh" "$work/series" >/dev/null

orig=$(rdma_core_orig "$root")
cache_hold "${orig%/*}"
upver=${orig##*/rdma-core_}
upver=${upver%.orig.tar.gz}
tree=$work/rdma-core
mkdir "$tree"
tar -xzf "$orig" -C "$tree" --strip-components=1
g() { git -C "$tree" -c commit.gpgsign=false -c user.name=check -c user.email=check@localhost "$@"; }
g init -q && g add -A && g commit -q -m base
patches=("$work"/series/0[0-9][0-9][1-9]-*.patch)
if g am -q "${patches[@]}"; then
	ok "the series applies to rdma-core $upver with git am (${#patches[@]} patches)"
else
	not_ok "the series does not apply with git am"
	exit 1
fi

log "building rdma-core with the series (its own CMake and ninja)"
if in_root "$root" bash -euc '
	tree=$1
	cmake -S "$tree" -B "$tree/build" -G Ninja -Wno-dev -DENABLE_WERROR=1 \
		-DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 >"$tree/cmake.log"
	ninja -C "$tree/build" >"$tree/ninja.log"
' build "$tree" 2>&1 | tail -20; then
	ok "rdma-core builds with the series (-DENABLE_WERROR=1)"
else
	tail -40 "$tree/ninja.log" 2>/dev/null | sed 's/^/# /'
	not_ok "rdma-core does not build with the series"
	exit 1
fi

# Built in place, the .driver file names the library in the build tree.
lib=$tree/build/lib/libferroce-rdmav$pabi.so
drv=$tree/build/etc/libibverbs.d/ferroce.driver
if [ -f "$lib" ] && [ "$(cat "$drv" 2>/dev/null)" = "driver ${lib%-rdmav*}" ]; then
	ok "the build made $(basename "$lib") and its ferroce.driver"
else
	not_ok "no $(basename "$lib"), or $drv does not name it"
fi

# The unit test includes ../ferroce.c and links verbs.c and datapath.c: all
# from the patched tree.  rdma-core's headers, util and ccan come from its
# build, libibverbs too.
p=$tree/providers/ferroce
mkdir -p "$p/tests"
cp "$FERROCE_TOP/providers/ferroce/tests/unit.c" "$p/tests/"
b=$tree/build
if in_root "$root" cc -std=gnu11 -O2 -Wall -Werror -I"$b/include" -o "$work/ferroce-unit" \
	"$p/tests/unit.c" "$p/verbs.c" "$p/datapath.c" \
	"$b/util/librdma_util.a" "$b/ccan/libccan.a" -L"$b/lib" -libverbs -lpthread; then
	if out=$(in_root "$root" env LD_LIBRARY_PATH="$b/lib" "$work/ferroce-unit" 2>&1); then
		ok "the unit test passes against the rdma-core build ($(tail -1 <<<"$out"))"
	else
		printf '%s\n' "$out" | tail -20 | sed 's/^/# /'
		not_ok "the unit test fails against the rdma-core build"
	fi
else
	not_ok "the unit test does not compile against the rdma-core build"
fi

# load-test.sh takes the directory of a ferroce.driver: the build's own.
if out=$(in_root "$root" "$FERROCE_TOP/providers/ferroce/tests/load-test.sh" "${drv%/*}" 2>&1); then
	ok "libibverbs loads the rdma-core build's libferroce through its ferroce.driver"
else
	printf '%s\n' "$out" | sed 's/^/# /'
	not_ok "load test of the rdma-core build's libferroce"
fi
exit "$fail"
