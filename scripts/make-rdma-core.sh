#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Prepare (once per version) a configured and built rdma-core source tree of
# exactly the version the trixie root's libibverbs comes from.  libferroce
# (providers/ferroce) is an rdma-core provider: it needs rdma-core's private
# headers (infiniband/driver.h, util/, ccan/, the generated kernel-abi
# headers, config.h) and must match the root's libibverbs private ABI
# (IBVERBS_PRIVATE_<N>), so it is compiled against this tree and linked
# against the root's libibverbs.so.1.  The source comes from Debian's archive
# (the root's deb-src Sources index names the files and their sha256).
# Prints the entry directory, which holds:
#   src/           the unpacked (Debian-patched) rdma-core source
#   build/         its cmake/ninja build tree (build/include: private headers)
#   version        the Debian version, e.g. 56.1-1
#   provider-abi   the provider private ABI number, e.g. 34
#   cflags         the compile flags rdma-core uses for its providers
#   ldflags        and its link flags (--no-undefined, provider.map, ...)
#
# Usage: make-rdma-core.sh [--print-path]
. "$(dirname "$0")/lib.sh"

need_root
root=$("$FERROCE_TOP/scripts/make-root.sh")

debver=$(in_root "$root" dpkg-query -W -f='${Version}' libibverbs1)
[ -n "$debver" ] || die "libibverbs1 is not installed in the trixie root"
key=$(hash_inputs "$debver" "$FERROCE_TOP/scripts/make-rdma-core.sh")
name=rdma-core/$debver-$key

if [ "${1:-}" = --print-path ]; then
	[ -e "$FERROCE_CACHE/$name/.complete" ] || die "rdma-core tree not built; run scripts/make-rdma-core.sh"
	echo "$FERROCE_CACHE/$name"
	exit 0
fi

build_rdma_core() {
	local dir=$1
	log "fetching and building rdma-core $debver in $dir (~1 min, once)"
	# apt-get source --print-uris names the files of the source package
	# and their sha256 (from the root's Sources index); they are fetched
	# one by one with apt-helper, which checks the sums.  The .dsc is
	# skipped: some mirrors and proxies serve the tarballs but not it.
	in_root "$root" bash -euc '
		dir=$1 debver=$2
		cd "$dir"
		# "URI" FILE SIZE SHA256:SUM per file, without the quotes.
		uris() {
			apt-get source --print-uris -qq "rdma-core=$debver" 2>/dev/null |
				tr -d "\047" | grep -v "\.dsc "
		}
		[ -n "$(uris)" ] || apt-get update -qq
		[ -n "$(uris)" ] || { echo "rdma-core $debver not in the Sources index" >&2; exit 1; }
		uris | while read -r uri file _ sum; do
			/usr/lib/apt/apt-helper -q download-file "$uri" "$dir/$file" "$sum"
		done
		mkdir src
		tar -xzf rdma-core_*.orig.tar.gz -C src --strip-components=1
		tar -xJf rdma-core_*.debian.tar.xz -C src
		if [ -s src/debian/patches/series ]; then
			grep -v "^\s*\(#\|$\)" src/debian/patches/series | while read -r p _; do
				patch -d src -p1 -s <"src/debian/patches/$p"
			done
		fi
		rm -f rdma-core_*
		# Configured as debian/rules does (Release, Debian'\''s hardening
		# flags from dpkg-buildflags), without man pages and pyverbs.
		CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
		LDFLAGS=$(dpkg-buildflags --get LDFLAGS) \
		cmake -S src -B build -G Ninja \
			-DDISTRO_FLAVOUR=Debian \
			-DCMAKE_BUILD_TYPE=Release \
			-DCMAKE_INSTALL_PREFIX=/usr \
			-DCMAKE_INSTALL_SYSCONFDIR=/etc \
			-DCMAKE_INSTALL_RUNDIR=/run \
			-DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 \
			-DCMAKE_EXPORT_COMPILE_COMMANDS=ON
		ninja -C build
	' build "$dir" "$debver" >&2 || return 1

	echo "$debver" >"$dir/version"
	# The provider private ABI: libibverbs exports IBVERBS_PRIVATE_<N>
	# (verbs_register_driver_<N>), providers are named lib*-rdmav<N>.so.
	sed -n 's/^set(IBVERBS_PABI_VERSION "\([0-9]*\)")/\1/p' \
		"$dir/src/CMakeLists.txt" >"$dir/provider-abi"
	[ -s "$dir/provider-abi" ] || die "cannot find IBVERBS_PABI_VERSION in rdma-core's CMakeLists.txt"
	# rdma-core's own compile and link flags for a provider (erdma's, from
	# compile_commands.json and build.ninja), minus the per-file parts
	# (-I, -o, -c, dependency files, the target's own -D..._EXPORTS).
	in_root "$root" python3 - "$dir/build" <<-'EOF' || return 1
		import json, shlex, sys
		build = sys.argv[1]
		def flags(words, drop_next, drop_prefix):
		    keep, skip = [], False
		    for w in words:
		        if skip:
		            skip = False
		        elif w in drop_next:
		            skip = True
		        elif w.startswith("-") and not w.startswith(drop_prefix):
		            keep.append(w)
		    return " ".join(keep) + "\n"
		cc = [e for e in json.load(open(build + "/compile_commands.json"))
		      if e["file"].endswith("/providers/erdma/erdma_verbs.c")][0]
		cflags = flags(shlex.split(cc["command"])[1:], ("-o", "-c", "-MF", "-MT"),
		               ("-I", "-M", "-o", "-Derdma"))
		lines = open(build + "/build.ninja").read().split("\n")
		i = [n for n, l in enumerate(lines) if l.startswith("build lib/liberdma-rdmav")][0]
		link = [l for l in lines[i:i + 10] if l.strip().startswith("LINK_FLAGS =")][0]
		ldflags = flags(shlex.split(link.split("=", 1)[1]), (), ("-Wl,--dependency-file",))
		if not cflags.strip() or "--version-script" not in ldflags:
		    sys.exit("could not extract rdma-core's provider flags")
		open(build + "/../cflags", "w").write(cflags)
		open(build + "/../ldflags", "w").write(ldflags)
	EOF
}

path=$(cache_entry "$name" build_rdma_core)
prune_cache 'rdma-core/*' 2
echo "$path"
