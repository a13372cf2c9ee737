#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make upstream-check: the kernel series (scripts/make-series.sh) in tree.
#
#  1. make series, then `git am` of each patch onto the pristine tree
#     (scripts/make-upstream-base.sh), building after each one (bzImage and
#     modules, CONFIG_RUST=y, CONFIG_INFINIBAND_FERROCE=m once the series
#     has it), so the series bisects; a build warning fails the patch;
#  2. checkpatch.pl --strict on every patch;
#  3. on the result: rustfmtcheck, CLIPPY=1, make rustdoc;
#  4. boots the in-tree kernel (ib_core built in, kernel::rdma) and runs
#     the gid and ferroce-pair scenarios with the in-tree ferroce.ko.
#
# Prints "ok N - what" / "not ok N - what" lines and exits non-zero on any
# failure.  Builds are incremental from the base tree's build; the base is
# used in place, under its lock.
#
# FERROCE_UPSTREAM_SCENARIOS (default "gid ferroce-pair") sets step 4's
# scenarios ("" skips the boot).
. "$(dirname "$0")/lib.sh"

need_root
"$FERROCE_TOP/scripts/setup-host.sh"
# checkpatch.pl's SPDX check runs scripts/spdxcheck.py with the system's
# python3, which needs ply and GitPython (only here: make check needs
# neither).
want=()
/usr/bin/python3 -c 'import ply' 2>/dev/null || want+=(python3-ply)
/usr/bin/python3 -c 'import git' 2>/dev/null || want+=(python3-git)
if [ ${#want[@]} -gt 0 ]; then
	log "installing host packages: ${want[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >/dev/null
fi
root=$("$FERROCE_TOP/scripts/make-root.sh")
base=$("$FERROCE_TOP/scripts/make-upstream-base.sh")
exec {basefd}>>"$base.lock"
flock -x "$basefd"
linux=$base/linux
build=$base/build
out=$FERROCE_TOP/.build/upstream-check
series=$FERROCE_TOP/.build/series
rm -rf "$out"
mkdir -p "$out"

n=0 failed=0
result() { # result OK WHAT
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}

"$FERROCE_TOP/scripts/make-series.sh" "$series"
mapfile -t patches < <(find "$series" -name '*.patch' ! -name '0000-*' | sort)
[ "${#patches[@]}" -gt 0 ] || die "make series wrote no patches"

# The kernel's make in the root, from the tree, into the base's O= tree.
kmake() {
	in_root "$root" make -C "$linux" -s O="$build" -j"$(nproc)" --jobserver-style=pipe "$@"
}
# configure: the test kernel's options plus upstream.config, over the
# current .config; options the tree does not have yet are dropped.
configure() {
	in_root "$root" sh -c 'cd "$1" && ./scripts/kconfig/merge_config.sh -m -O "$2" "$2/.config" \
		"$3" >/dev/null 2>&1 && make -s O="$2" olddefconfig' \
		cfg "$linux" "$build" "$FERROCE_TOP/scripts/kernel/upstream.config"
}
# A build's warnings: compiler and kbuild warnings, except what the
# pristine tree's build prints too: objtool's notes on rustc's code for
# core library generics ("falls through") and a sub-make of the kernel's
# without the jobserver.
warnings() {
	grep -E 'warning|error' "$1" |
		grep -Ev 'objtool: .* falls through to next function|jobserver unavailable' || true
}
# Warnings (clippy, rustdoc) located in the series' own files; the kernel
# crate's other modules have a few of their own, counted apart.
ours='/(rust/kernel/rdma/|rust/helpers/rdma\.c|drivers/infiniband/hw/ferroce/)'
own_warnings() {
	grep -E -A1 '^(warning|error)' "$1" | grep -E -- "--> .*$ours" || true
}
other_warnings() {
	grep -E -A1 '^(warning|error)' "$1" | grep -E -- '--> ' | grep -Evc "$ours" || true
}

log "upstream-check: resetting $linux to its base"
git -C "$linux" am --abort >/dev/null 2>&1 || true
git -C "$linux" checkout -q -f base
git -C "$linux" clean -q -fdx
gam() { git -C "$linux" -c user.name=ferroce -c user.email=ferroce@invalid -c commit.gpgsign=false "$@"; }
# From here on every step reports its result and the run goes on.
set +e

i=0
for p in "${patches[@]}"; do
	i=$((i + 1))
	name=$(basename "$p" .patch)
	if ! gam am -q "$p" >"$out/$name.am.log" 2>&1; then
		cat "$out/$name.am.log"
		result 1 "patch $i applies ($name)"
		break
	fi
	log "upstream-check: building with patch $i ($name)"
	rc=0
	configure >"$out/$name.build.log" 2>&1 && kmake bzImage modules >>"$out/$name.build.log" 2>&1 || rc=$?
	w=$(warnings "$out/$name.build.log")
	if [ "$rc" != 0 ] || [ -n "$w" ]; then
		tail -40 "$out/$name.build.log"
		rc=1
	fi
	result "$rc" "patch $i builds without warnings ($name)"
	# (FILE_PATH_CHANGES: patches 5-10 add files that patch 1's MAINTAINERS
	# entry already covers.)
	# On the host, whose system python3 has spdxcheck.py's modules
	# (setup-host.sh), in the git tree spdxcheck.py needs.
	(cd "$linux" && PATH=/usr/bin:/bin:$PATH ./scripts/checkpatch.pl --strict --no-summary \
		--terse --ignore FILE_PATH_CHANGES --root="$linux" "$p") >"$out/$name.checkpatch.log" 2>&1
	rc=$?
	[ -s "$out/$name.checkpatch.log" ] && { cat "$out/$name.checkpatch.log"; rc=1; }
	result "$rc" "checkpatch --strict: patch $i ($name)"
done

grep -qx 'CONFIG_RUST_RDMA_ABSTRACTIONS=y' "$build/.config" &&
	grep -qx 'CONFIG_INFINIBAND_FERROCE=m' "$build/.config" &&
	[ -f "$build/drivers/infiniband/hw/ferroce/ferroce.ko" ]
result $? "the series' options are set and ferroce.ko is built in tree"

# The kernel to boot, before clippy rebuilds the Rust objects.
boot=$base/boot
rm -rf "$boot"
mkdir -p "$boot"
cp "$build/arch/x86/boot/bzImage" "$boot/bzImage"
kmake INSTALL_MOD_PATH="$boot/modroot" modules_install >"$out/modules_install.log" 2>&1
result $? "modules_install"
release=$(kmake -s kernelrelease)

kmake rustfmtcheck >"$out/rustfmt.log" 2>&1
rc=$?
[ "$rc" = 0 ] || cat "$out/rustfmt.log"
result "$rc" "make rustfmtcheck"

rc=0
kmake CLIPPY=1 bzImage modules >"$out/clippy.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || tail -30 "$out/clippy.log"
[ -z "$(own_warnings "$out/clippy.log")" ] || { own_warnings "$out/clippy.log"; rc=1; }
result "$rc" "CLIPPY=1 build, no warning in the series' files ($(other_warnings \
	"$out/clippy.log") in the rest of the tree)"

rc=0
kmake rustdoc >"$out/rustdoc.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || tail -30 "$out/rustdoc.log"
[ -z "$(own_warnings "$out/rustdoc.log")" ] || { own_warnings "$out/rustdoc.log"; rc=1; }
[ -e "$build/Documentation/output/rust/rustdoc/kernel/rdma/index.html" ] || rc=1
result "$rc" "make rustdoc, kernel::rdma documented without warnings"

ko=/lib/modules/$release/kernel/drivers/infiniband/hw/ferroce/ferroce.ko
for s in ${FERROCE_UPSTREAM_SCENARIOS-gid ferroce-pair}; do
	log "upstream-check: $s on the in-tree kernel $release"
	FERROCE_KERNEL_DIR=$boot FERROCE_KO_GUEST=$ko "$FERROCE_TOP/qemu-test/run" "$s"
	result $? "scenario $s on the in-tree kernel (kernel::rdma, in-tree ferroce.ko)"
done

echo "upstream-check: $((n - failed)) ok, $failed not ok (logs in $out)"
[ "$failed" = 0 ]
