#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once) a small Debian trixie root with gnuplot, for make bench's
# charts (scripts/bench-report.py runs gnuplot in it through scripts/in-root).
# Kept apart from the main root (scripts/make-root.sh) so that the charts
# change neither that root nor its cache key, which make check depends on.
# Cached like the main root: $FERROCE_CACHE/roots/plot-trixie-<hash of this
# script and the mirror>.
#
# Usage: make-plot-root.sh [--print-path]
. "$(dirname "$0")/lib.sh"

key=$(hash_inputs "$FERROCE_TOP/scripts/make-plot-root.sh" "$FERROCE_MIRROR")
name=roots/plot-trixie-$key

if [ "${1:-}" = --print-path ]; then
	[ -e "$FERROCE_CACHE/$name/.complete" ] || die "plot root not built; run scripts/make-plot-root.sh"
	echo "$FERROCE_CACHE/$name"
	exit 0
fi

need_root
need_cmd mmdebstrap mmdebstrap

build_plot_root() {
	local dir=$1
	log "building the plot root (trixie, gnuplot-nox) in $dir (a minute, once)"
	mmdebstrap --variant=apt --mode=root \
		--aptopt='APT::Install-Recommends "false"' \
		--include=gnuplot-nox \
		--customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
		trixie "$dir" "deb $FERROCE_MIRROR trixie main" >&2
	# Sanity: gnuplot runs and writes SVG.
	printf 'set terminal svg\nplot x\n' | chroot "$dir" gnuplot | grep -q '</svg>' ||
		die "gnuplot in the plot root cannot write SVG"
}

path=$(cache_entry "$name" build_plot_root)
# Not roots/trixie-*: make-root.sh prunes those, keeping its own two.
prune_cache 'roots/plot-trixie-*' 2
echo "$path"
