# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Common helpers for ferroce's set-up scripts: the artifact cache, input
# hashing, locking, atomic publication of cache entries and the trixie root.
#
# Every heavy artifact (trixie root, kernel build, ...) lives under
# $FERROCE_CACHE (default ~/.cache/ferroce), outside the checkout, in a
# directory whose name carries a hash of everything that went into it.  An
# entry is complete once its ".complete" stamp exists, written after the
# builder succeeded; a directory without the stamp (interrupted build) is
# deleted and rebuilt, never trusted.  Builders hold an flock on the entry, so two runs at once
# build it once and never see each other's half-written state.  Users of an
# entry hold a shared flock on it (cache_hold, in_root for roots) for as long
# as they use it, and prune_cache deletes only entries nobody holds: two runs
# at once never delete what the other one is using.

set -euo pipefail
shopt -s inherit_errexit

FERROCE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FERROCE_CACHE=${FERROCE_CACHE:-${HOME:-/root}/.cache/ferroce}
export FERROCE_TOP FERROCE_CACHE

# Debian suites used for the trixie root.  Nothing here touches the host's
# own apt configuration: the root has its own sources.
FERROCE_MIRROR=${FERROCE_MIRROR:-http://deb.debian.org/debian}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# need_cmd CMD PACKAGE: fail with the command that installs a missing tool.
need_cmd() {
	command -v "$1" >/dev/null 2>&1 && return 0
	die "'$1' not found; install it with: apt-get install -y $2"
}

need_root() {
	[ "$(id -u)" = 0 ] || die "this must run as root (namespaces, chroot, taps)"
}

# hash_inputs ITEM...: sha256 over files (content + name) and literal strings.
hash_inputs() {
	local item
	for item in "$@"; do
		if [ -f "$item" ]; then
			printf 'file %s\n' "${item#"$FERROCE_TOP"/}"
			cat "$item"
		else
			printf 'str %s\n' "$item"
		fi
	done | sha256sum | cut -c1-16
}

# cache_entry NAME BUILDER [ARGS...]: make sure $FERROCE_CACHE/NAME exists and
# is complete; BUILDER is called with the temporary directory as its first
# argument and must populate it.  Prints the final path.
cache_entry() {
	local name=$1 builder=$2
	shift 2
	local dir=$FERROCE_CACHE/$name
	mkdir -p "$(dirname "$dir")"
	exec {lockfd}>"$dir.lock"
	# A complete entry is only read: a shared lock, so that runs holding
	# it (cache_hold) do not keep this one waiting.
	flock -s "$lockfd"
	if [ -e "$dir/.complete" ]; then
		exec {lockfd}>&-
		printf '%s\n' "$dir"
		return 0
	fi
	flock -x "$lockfd"
	if [ -e "$dir" ] && [ ! -e "$dir/.complete" ]; then
		log "discarding incomplete cache entry $dir"
		rm -rf --one-file-system "$dir"
	fi
	if [ ! -e "$dir" ]; then
		# Built in place (kernel build trees record their absolute path);
		# the stamp is written only once the builder has succeeded.
		mkdir -p "$dir"
		"$builder" "$dir" "$@" || die "building $name failed (partial result left in $dir; the next run discards it)"
		date -u +%FT%TZ >"$dir/.complete"
	fi
	exec {lockfd}>&-
	printf '%s\n' "$dir"
}

# cache_hold DIR: hold a shared lock on cache entry DIR until this shell
# exits (the descriptor is inherited by its children, e.g. QEMU), so that no
# prune_cache deletes it meanwhile.
cache_hold() {
	local fd
	exec {fd}>>"$1.lock"
	flock -s "$fd"
}

# prune_cache GLOB [N]: keep only the newest N complete entries matching GLOB
# (old kernels, old roots), and drop abandoned half-built ones (no stamp).
# An entry is deleted only under its exclusive lock, taken without waiting:
# one that a run holds (cache_hold, in_root) or builds is left alone.
# Symlinks are never touched.
prune_cache() {
	local pattern=$1 keep=${2:-2} e n=0 what
	# shellcheck disable=SC2086,SC2012 # GLOB must expand; names are ours
	ls -1dt $FERROCE_CACHE/$pattern 2>/dev/null | while read -r e; do
		case $e in *.lock) continue ;; esac
		[ -L "$e" ] && continue
		if [ -e "$e/.complete" ]; then
			n=$((n + 1))
			[ "$n" -le "$keep" ] && continue
			what="old cache entry"
		else
			what="abandoned partial build"
		fi
		# shellcheck disable=SC2016 # expanded by the inner shell
		if flock -n -x "$e.lock" sh -c 'rm -rf --one-file-system "$1"' prune "$e"; then
			log "pruned $what $e"
		else
			log "keeping $what $e: in use by another run"
		fi
	done
}

# in_root ROOT CMD...: run CMD inside the trixie root, in a private mount
# namespace so that no bind mount leaks into the host.  /dev, /proc, /sys,
# the checkout and the cache appear inside at the same paths as outside, so
# build trees and sockets can be named identically on both sides; the
# command starts in the caller's directory when that exists inside.
in_root() {
	local root=$1 hold=()
	shift
	# A root from the cache is held (shared lock) while the command runs.
	[ -e "$root.lock" ] && hold=(flock -s "$root.lock")
	# cargo in the root keeps its crates in the cache and trusts what the
	# host trusts (crates.io may be reached through a proxy whose CA only
	# the host's store holds).
	local ca=$FERROCE_CACHE/host-ca.crt
	FERROCE_HOST_CA=
	if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
		cmp -s /etc/ssl/certs/ca-certificates.crt "$ca" ||
			{ cp /etc/ssl/certs/ca-certificates.crt "$ca.tmp.$$" && mv "$ca.tmp.$$" "$ca"; }
		FERROCE_HOST_CA=$ca
	fi
	export FERROCE_HOST_CA
	"${hold[@]}" unshare -m --propagation private -- /bin/bash -euc '
		root=$1 cwd=$2; shift 2
		# A private /tmp first: the checkout or the cache may live under
		# /tmp, and their binds must land on top of it, not under it.
		mount -t tmpfs tmpfs "$root/tmp"
		for d in /dev /proc /sys "$FERROCE_TOP" "$FERROCE_CACHE" ${FERROCE_EXTRA_BINDS:-}; do
			mkdir -p "$root$d"
			mount --rbind "$d" "$root$d"
		done
		cd "$root"
		exec chroot "$root" /usr/bin/env -i \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
			FERROCE_TOP="$FERROCE_TOP" FERROCE_CACHE="$FERROCE_CACHE" \
			CARGO_HOME="$FERROCE_CACHE/cargo" \
			${FERROCE_HOST_CA:+CARGO_HTTP_CAINFO="$FERROCE_HOST_CA"} \
			${FERROCE_ROOT_ENV:-} /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$cwd" "$@"
	' in_root "$root" "$PWD" "$@"
}

# The trixie root: QEMU 11.1 (vfio-user-pci) from trixie-backports, the
# guest's RDMA userspace, and the kernel's Rust/C toolchain.
root_path() {
	"$FERROCE_TOP/scripts/make-root.sh" --print-path
}

# The device's cargo target directory (device/target) is per checkout: a
# run's device process is the binary built from its own sources.  What
# every checkout builds the same is the crates.io dependencies, so a fresh
# checkout starts from the cache's snapshot of them (cargo/target-KEY, keyed
# by the root, which holds the toolchain, and the workspace manifests) and
# compiles only ferroce's own crates; cargo's fingerprints still decide what
# is up to date, so a stale snapshot costs time, never correctness.
cargo_target_key() {
	hash_inputs "$(basename "$(root_path)")" "$FERROCE_TOP"/device/Cargo.lock \
		"$FERROCE_TOP"/device/Cargo.toml "$FERROCE_TOP"/device/*/Cargo.toml
}

# cargo_target_seed: give a checkout without device/target the snapshot's
# dependencies, if the cache has one for this key.
cargo_target_seed() {
	local top=$FERROCE_TOP/device snap
	[ -f "$top/Cargo.toml" ] && [ ! -e "$top/target" ] || return 0
	snap=$FERROCE_CACHE/cargo/target-$(cargo_target_key)
	[ -e "$snap/.complete" ] || return 0
	log "device/target: starting from the cached dependencies in $snap"
	# Held while copying, so that no prune_cache removes it under us; into
	# a temporary name first, so that an interrupted copy is never taken
	# for a build.
	rm -rf "$top/target.seed.$$"
	if flock -s "$snap.lock" cp -a "$snap/target" "$top/target.seed.$$"; then
		mv -T "$top/target.seed.$$" "$top/target" 2>/dev/null || rm -rf "$top/target.seed.$$"
	else
		rm -rf "$top/target.seed.$$"
	fi
	return 0
}

# snapshot_cargo_target DIR: cache_entry builder: the dependencies' part of
# device/target (every profile built so far), without ferroce's own crates,
# their test binaries and incremental state.
snapshot_cargo_target() {
	local src=$FERROCE_TOP/device/target
	mkdir -p "$1/target"
	(cd "$src" && find . -name incremental -prune -o \
		\( -path './*/deps/*' ! -name 'lib*' ! -name '*.d' \) -prune -o \
		\( -name '*ferroce_dev*' -o -name '*ferroce-dev*' -o \
		-name '*vfio_user*' -o -name '*vfio-user*' \) -prune -o -print0 |
		cpio -0 -pdm --quiet "$1/target")
}

# cargo_target_save: after a run that built device/target, publish its
# dependencies as the snapshot for this key unless the cache has it.
cargo_target_save() {
	[ -d "$FERROCE_TOP/device/target" ] || return 0
	cache_entry "cargo/target-$(cargo_target_key)" snapshot_cargo_target >/dev/null
	prune_cache 'cargo/target-*' 2
}

# rdma_core_orig ROOT: the upstream rdma-core tarball of the version ROOT's
# libibverbs comes from: Debian's rdma-core_<upstream>.orig.tar.gz, named by
# the root's deb-src Sources index and fetched once into
# $FERROCE_CACHE/rdma-core-orig/<upstream>/ with apt-helper (which checks its
# sha256).  Prints its path (run in a command substitution, it cannot hold
# the entry: callers cache_hold its directory).
rdma_core_orig() {
	local root=$1 debver upver dir
	debver=$(in_root "$root" dpkg-query -W -f='${Version}' libibverbs1)
	upver=${debver%-*}
	dir=$(cache_entry "rdma-core-orig/$upver" fetch_rdma_core_orig "$root" "$debver")
	printf '%s\n' "$dir/rdma-core_$upver.orig.tar.gz"
}

# fetch_rdma_core_orig DIR ROOT DEBVER: cache_entry builder of rdma_core_orig.
fetch_rdma_core_orig() {
	log "fetching the rdma-core ${3%-*} upstream tarball"
	in_root "$2" bash -euc '
		dir=$1 debver=$2
		uris() {
			apt-get source --print-uris -qq "rdma-core=$debver" 2>/dev/null |
				tr -d "\047" | grep "\.orig\.tar\."
		}
		[ -n "$(uris)" ] || apt-get update -qq
		[ -n "$(uris)" ] || { echo "rdma-core $debver not in the Sources index" >&2; exit 1; }
		uris | while read -r uri file _ sum; do
			/usr/lib/apt/apt-helper -q download-file "$uri" "$dir/$file" "$sum"
		done
	' fetch "$1" "$3" >&2
}

# series_git_init TREE MESSAGE: make TREE, as it is, a git repository with one
# commit (MESSAGE) to format patches against (make series, make
# provider-series).  Its commits, this one and later ones, take their author
# and dates from this repository's HEAD, so the same checkout gives the same
# patches; series_author is HEAD's "Name <email>" (for sign-offs).
series_git_init() {
	local tree=$1 msg=$2
	series_author=$(git -C "$FERROCE_TOP" log -1 --format='%an <%ae>')
	export GIT_AUTHOR_NAME=${series_author% <*} GIT_AUTHOR_EMAIL=${series_author##*<}
	GIT_AUTHOR_EMAIL=${GIT_AUTHOR_EMAIL%>}
	export GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
	export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
	GIT_AUTHOR_DATE=$(git -C "$FERROCE_TOP" log -1 --format=%cI)
	GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE
	git -C "$tree" init -q
	git -C "$tree" -c core.autocrlf=false add -A
	git -C "$tree" -c commit.gpgsign=false commit -q -m "$msg"
}

# insert_text before|after FILE ANCHOR TEXT [N]: TEXT (lines) before or after
# each occurrence of the whole line ANCHOR in FILE; fails unless ANCHOR
# occurs exactly N times (default 1).  For the patch series, which edit
# upstream files at fixed places.
insert_text() {
	python3 - "$@" <<-'PY'
		import sys
		where, path, anchor, text = sys.argv[1:5]
		want = int(sys.argv[5]) if len(sys.argv) > 5 else 1
		s = open(path).read()
		a = "\n" + anchor + "\n"
		n = s.count(a)
		if n != want:
		    sys.exit(f"{path}: {n} occurrences of {anchor!r}, want {want}")
		new = "\n" + text + a if where == "before" else a + text + "\n"
		open(path, "w").write(s.replace(a, new))
	PY
}

# run_scenario NAME: qemu-test/run NAME, its output passed through.  When
# it fails, SCENARIO_WHY holds the reasons the run kept in its
# $RUN_DIR/failures (found by its last line, "FAIL ... $RUN_DIR"), each on
# a line of its own after a newline, for a summary that a long log's reader
# (CI keeps the tail) sees.
# shellcheck disable=SC2034 # SCENARIO_WHY is read by the caller
run_scenario() {
	local out rc dir
	SCENARIO_WHY=
	out=$(mktemp)
	"$FERROCE_TOP/qemu-test/run" "$1" | tee "$out"
	rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ]; then
		dir=$(tail -n 1 "$out" | awk '{print $NF}')
		[ -s "$dir/failures" ] &&
			SCENARIO_WHY=$'\n'$(cut -c1-200 "$dir/failures" | sed 's/^/    /')
	fi
	rm -f "$out"
	return "$rc"
}
