#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make provider-series: libferroce as a patch series against upstream
# rdma-core of the trixie root's version (56.1), in rdma-core's own layout,
# made from this repository's files (no second copy to keep in sync):
#
#   0001 Update kernel headers: kernel-headers/rdma/ferroce-abi.h (from
#        include/uapi/rdma/) and ib_user_ioctl_verbs.h as the pinned kernel
#        has it plus RDMA_DRIVER_FERROCE (scripts/uapi-driver-id.sh), both
#        registered in kernel-headers/CMakeLists.txt;
#   0002 providers/ferroce: providers/ferroce/ (its CMakeLists.txt with
#        rdma_provider(), the sources, ferroce-hw.h from include/ferroce/),
#        add_subdirectory(), verbs_provider_ferroce for static builds, and
#        the MAINTAINERS, README, debian, redhat and suse lines.
#
# The upstream tarball is Debian's rdma-core_<version>.orig.tar.gz, fetched
# once into $FERROCE_CACHE/rdma-core-orig/ (apt checks its sha256).  Commit
# dates and authors come from this repository's HEAD, so the same tree
# gives the same patches.
#
# Usage: make-provider-series.sh OUTDIR   (writes OUTDIR/*.patch)
. "$(dirname "$0")/lib.sh"

need_root
out=${1:?usage: make-provider-series.sh OUTDIR}
root=$("$FERROCE_TOP/scripts/make-root.sh")
orig=$(rdma_core_orig "$root")
cache_hold "${orig%/*}"
upver=${orig##*/rdma-core_}
upver=${upver%.orig.tar.gz}
ksrc=$(readlink -f "$("$FERROCE_TOP/scripts/make-kernel.sh")/build/source")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/rdma-core
mkdir "$tree"
tar -xzf "$orig" -C "$tree" --strip-components=1

series_git_init "$tree" "rdma-core $upver"
author=$series_author
g() { git -C "$tree" -c core.autocrlf=false -c commit.gpgsign=false "$@"; }
g tag base
signoff="Signed-off-by: $author"

# 0001: the kernel's uapi, as rdma-core's kernel-headers/update copies it.
"$FERROCE_TOP/scripts/uapi-driver-id.sh" "$ksrc/include/uapi/rdma/ib_user_ioctl_verbs.h" \
	"$tree/kernel-headers/rdma/ib_user_ioctl_verbs.h"
cp "$FERROCE_TOP/include/uapi/rdma/ferroce-abi.h" "$tree/kernel-headers/rdma/"
# Listed twice: published, and made into kernel-abi/ struct macros.
insert_text after "$tree/kernel-headers/CMakeLists.txt" '  rdma/erdma-abi.h' '  rdma/ferroce-abi.h' 2
g add -A
kver=$(make -s -C "$ksrc" kernelversion)
prev=$(grep -B1 '^	RDMA_DRIVER_FERROCE,$' "$tree/kernel-headers/rdma/ib_user_ioctl_verbs.h" | head -1 | tr -d '\t,')
g commit -q -F - <<-EOF2
	Update kernel headers

	To the ferroce kernel series on Linux $kver:
	- ib_user_ioctl_verbs.h is Linux $kver's, plus RDMA_DRIVER_FERROCE
	  after $prev;
	- rdma/ferroce-abi.h is new: the driver data of ferroce's uverbs
	  commands.

	$signoff
EOF2

# 0002: the provider.
p=$tree/providers/ferroce
mkdir -p "$p"
cp "$FERROCE_TOP"/providers/ferroce/{CMakeLists.txt,datapath.c,ferroce.c,ferroce.h,verbs.c} "$p/"
cp "$FERROCE_TOP/include/ferroce/ferroce-hw.h" "$p/"
insert_text after "$tree/CMakeLists.txt" 'add_subdirectory(providers/erdma)' \
	'add_subdirectory(providers/ferroce)'
insert_text after "$tree/libibverbs/verbs.h" \
	'extern const struct verbs_device_ops verbs_provider_erdma;' \
	'extern const struct verbs_device_ops verbs_provider_ferroce;'
insert_text after "$tree/MAINTAINERS" 'F:	providers/erdma/' "
FERROCE USERSPACE PROVIDER (for ferroce.ko)
M:	$author
S:	Supported
F:	providers/ferroce/"
insert_text after "$tree/README.md" ' - erdma.ko' ' - ferroce.ko'
insert_text after "$tree/debian/control" '  - erdma: Alibaba Elastic RDMA (iWarp) Adapter' \
	'  - ferroce: ferroce RoCE v2 device'
insert_text after "$tree/debian/copyright" 'Files: providers/erdma/*
Copyright: 2020-2021, Alibaba Group
License: BSD-MIT or GPL-2' "
Files: providers/ferroce/*
Copyright: 2026 The ferroce developers
License: BSD-2-clause or GPL-2"
insert_text after "$tree/redhat/rdma-core.spec" '- liberdma: Alibaba Elastic RDMA (iWarp) Adapter' \
	'- libferroce: ferroce RoCE v2 device'
insert_text after "$tree/suse/rdma-core.spec" '- libefa: Amazon Elastic Fabric Adapter' \
	'- libferroce: ferroce RoCE v2 device'
g add -A
g commit -q -F - <<-EOF2
	providers/ferroce: Add the ferroce userspace provider

	ferroce is a RoCE v2 NIC (an emulated PCI function, 1b36:0fe0, that
	QEMU attaches over vfio-user) driven by the Rust ferroce.ko.  The
	provider runs the whole data path in the process: RC, UC and UD QPs,
	SRQs, extended QPs and CQs (ibv_wr_*, atomics, flush, atomic write),
	posting through a doorbell page of BAR2 mapped by the context and
	polling CQ rings in process memory.  Control verbs go through the
	uverbs commands with ferroce-abi.h driver data.

	The device is matched by RDMA_DRIVER_FERROCE, and by PCI ID for
	kernels whose ferroce.ko predates it.

	ferroce-hw.h is the device programming model shared with the kernel
	driver and the device (Documentation/ferroce/device.rst there).

	$signoff
EOF2

rm -rf "$out"
mkdir -p "$out"
g format-patch -q --cover-letter --subject-prefix="PATCH rdma-core" -o "$out" base..HEAD
python3 - "$out"/0000-cover-letter.patch "$upver" <<-'PY'
	import sys
	path, ver = sys.argv[1:]
	s = open(path).read()
	s = s.replace("*** SUBJECT HERE ***", "ferroce: a provider for the ferroce RoCE v2 device")
	s = s.replace("*** BLURB HERE ***", f"""\
libferroce, the userspace provider of ferroce, against rdma-core {ver}.

ferroce is a RoCE v2 NIC whose Linux driver is written in Rust; its
device is an emulated PCI function that QEMU attaches with vfio-user,
so RDMA (perftest, rdma_cm, NVMe over RDMA, kernel-bypass verbs) runs
inside a VM with no RDMA hardware on the host, and interoperates with
rxe on the wire.

Patch 1 takes the kernel headers from the ferroce kernel series: the
ferroce ABI and RDMA_DRIVER_FERROCE.  Patch 2 adds the provider.

Tested with rdma-core's own build (cmake/ninja), the provider's unit
test against that build, and a load test of libibverbs matching the
device; rdma-core's tests/ (pyverbs) pass against a ferroce device in
the VMs of the project's test bed.""")
	open(path, "w").write(s)
	PY
ls "$out"
