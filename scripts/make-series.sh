#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make series: the kernel side of ferroce as a `git format-patch` series with
# a cover letter against the pinned 7.3.4 tree (the test kernel's source,
# scripts/make-kernel.sh), made from this repository's files: no second copy
# to keep in sync.  The split (erdma's: the driver's files patch by patch,
# built from the last one on, when its Makefile and Kconfig arrive):
#
#   1 the uapi: include/uapi/rdma/ferroce-abi.h and RDMA_DRIVER_FERROCE
#     (scripts/uapi-driver-id.sh);
#   2, 3 rust: cpu, rust: pci: what drivers/infiniband/hw/ferroce/rdma/kext.rs
#     holds out of tree (the online CPU count; MSI-X vectors with their
#     handlers and the DMA-masked probe adapter, as rust/kernel/pci/msix.rs),
#     with its helpers in rust/helpers/{cpu,device,cpumask,irq}.c;
#   4 rust: rdma: the rest of drivers/infiniband/hw/ferroce/rdma/ as
#     rust/kernel/rdma/, the rest of ferroce_helpers.c as
#     rust/helpers/rdma.c, the rdma headers in
#     rust/bindings/bindings_helper.h, CONFIG_RUST_RDMA_ABSTRACTIONS;
#   5 the device interface: ferroce-hw.h, its bindings, its registers, and
#     Documentation/ferroce/{device,driver}.rst;
#   6-10 the driver by concern (queues, PCI bring-up, ib_device, user verbs,
#     kernel verbs), its paths into kext.rs made kernel::pci's and
#     kernel::cpu's;
#   11 Kconfig and Makefile (the driver's Kbuild without its out-of-tree
#     include, Kbuild.oot, which no patch has).
#
# MAINTAINERS entries come with the first file they cover (patches 1, 4).
#
# Each file of the driver belongs to exactly one patch (a new file fails
# the script until it is given one).  Commit dates and authors come from
# this repository's HEAD, so the same tree gives the same patches.
#
# The patches are made in a repository of only the files they touch, as the
# pinned tree has them, so `git am` applies them to that tree
# (scripts/upstream-check.sh does).
#
# Usage: make-series.sh OUTDIR   (writes OUTDIR/*.patch)
. "$(dirname "$0")/lib.sh"

out=$(realpath -m "${1:?usage: make-series.sh OUTDIR}")
ksrc=$(readlink -f "$("$FERROCE_TOP/scripts/make-kernel.sh")/build/source")
drv=$FERROCE_TOP/drivers/infiniband/hw/ferroce
kdrv=drivers/infiniband/hw/ferroce

# The driver's files, by patch (paths relative to $drv).
declare -A part=(
	[bindings.rs]=5 [ferroce_hw_bindings.rs]=5 [regs.rs]=5
	[cmdq.rs]=6 [eq.rs]=6 [dbrec.rs]=6 [pbl.rs]=6
	[dev.rs]=7 [dev/events.rs]=7 [dev/counters.rs]=7 [pairing.rs]=7 [port.rs]=7
	[diag.rs]=7 [hw_stats.rs]=7
	[ib.rs]=8 [gid.rs]=8
	[verbs.rs]=9 [verbs/ucontext.rs]=9 [verbs/cq.rs]=9 [verbs/qp.rs]=9 [verbs/mr.rs]=9
	[verbs/ah.rs]=9 [srq.rs]=9
	[kqueue.rs]=10
	[ferroce_main.rs]=11 [Kbuild]=11
	# Not driver files in tree: ferroce_helpers.c is rust/helpers/ (cpu.c,
	# device.c, cpumask.c and irq.c in patches 2 and 3, rdma.c in patch 4),
	# rdma/ is patch 4's rust/kernel/rdma/ but for rdma/kext.rs, which is
	# patch 2's kernel::cpu and patch 3's kernel::pci.
	[ferroce_helpers.c]=4
	# Only for the out-of-tree build against a kernel without the series
	# (its bindgen input and rules, and their outputs): in no patch.
	[ferroce_bindings.h]=- [Kbuild.oot]=- [.gitignore]=-
)
bad=0
while IFS= read -r f; do
	case $f in rdma/*) continue ;; esac
	[ -n "${part[$f]:-}" ] || { echo "make-series.sh: $kdrv/$f belongs to no patch" >&2; bad=1; }
done < <(git -C "$drv" ls-files)
[ $bad = 0 ] || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/linux
mkdir -p "$tree"
# The pristine files the series modifies.
touched=(include/uapi/rdma/ib_user_ioctl_verbs.h rust/kernel/lib.rs
	rust/kernel/cpu.rs rust/kernel/pci.rs rust/helpers/cpu.c rust/helpers/device.c
	rust/helpers/cpumask.c rust/helpers/irq.c
	rust/bindings/bindings_helper.h rust/helpers/helpers.c rust/bindgen_parameters
	drivers/infiniband/Kconfig drivers/infiniband/hw/Makefile MAINTAINERS
	Documentation/infiniband/index.rst)
for f in "${touched[@]}"; do
	mkdir -p "$tree/$(dirname "$f")"
	cp "$ksrc/$f" "$tree/$f"
done

kver=$(make -s -C "$ksrc" kernelversion)
series_git_init "$tree" "linux $kver (the files this series touches)"
author=$series_author
g() { git -C "$tree" -c core.autocrlf=false -c commit.gpgsign=false "$@"; }
g tag base
signoff="Signed-off-by: $author"

# commit SUBJECT BODY: commit everything with a signed-off message.
commit() {
	g add -A
	printf '%s\n\n%s\n\n%s\n' "$1" "$2" "$signoff" | g commit -q -F -
}

# maintainers TEXT: a MAINTAINERS section, where its title sorts.
maintainers() {
	python3 - "$tree/MAINTAINERS" "$1" <<-'PY'
		import re, sys
		path, entry = sys.argv[1:]
		lines = open(path).read().split('\n')
		title = entry.split('\n')[0]
		start = lines.index('Maintainers List') if 'Maintainers List' in lines else 0
		heads = [i for i in range(start + 1, len(lines) - 1)
		         if lines[i - 1] == '' and re.match(r'^[A-Z0-9]', lines[i])
		         and re.match(r'^[A-Z]:\t', lines[i + 1])]
		# Before the first title after ours whose neighbours agree (the
		# file has a few entries out of order).
		for k in range(1, len(heads) - 1):
		    a, b, c = (lines[heads[j]].upper() for j in (k - 1, k, k + 1))
		    if a < title.upper() < b and c > title.upper():
		        i = heads[k]
		        lines[i:i] = entry.split('\n') + ['']
		        break
		else:
		    sys.exit('no place for ' + title)
		open(path, 'w').write('\n'.join(lines))
	PY
}

# --- 1: the uapi -------------------------------------------------------------
"$FERROCE_TOP/scripts/uapi-driver-id.sh" "$ksrc/include/uapi/rdma/ib_user_ioctl_verbs.h" \
	"$tree/include/uapi/rdma/ib_user_ioctl_verbs.h"
cp "$FERROCE_TOP/include/uapi/rdma/ferroce-abi.h" "$tree/include/uapi/rdma/"
# The driver's MAINTAINERS entry comes with its first file, and covers
# the files of the later patches.
maintainers 'FERROCE RDMA DRIVER
M:	'"$author"'
L:	linux-rdma@vger.kernel.org
S:	Supported
F:	Documentation/infiniband/ferroce/
F:	drivers/infiniband/hw/ferroce/
F:	include/uapi/rdma/ferroce-abi.h'
prev=$(grep -B1 '^	RDMA_DRIVER_FERROCE,$' "$tree/include/uapi/rdma/ib_user_ioctl_verbs.h" | head -1 | tr -d '\t,')
commit "RDMA/ferroce: add the user ABI header and RDMA_DRIVER_FERROCE" \
"ferroce is a RoCE v2/v1 NIC (an emulated one for now, attached to QEMU over
vfio-user) whose driver is written in Rust.  Its userspace provider,
libferroce, talks to the driver through the structures of ferroce-abi.h:
the request and response of each uverbs command that carries driver data.
Every structure is growable: requests have a minimum length the driver
accepts, later fields default to zero, and a comp_mask says which optional
fields are meant.

RDMA_DRIVER_FERROCE follows $prev in enum rdma_driver_id, so
that rdma-core matches the provider by driver id as it does for every
other provider.

Add the driver's MAINTAINERS entry with its first file."

# --- 2, 3: rust: cpu, rust: pci ------------------------------------------------
# rdma/kext.rs out of tree; in tree its items are kernel::cpu's and
# kernel::pci's, and the helpers they call join rust/helpers/ by subject.
# kext_helper NAME FILE: ferroce_helpers.c's rust_helper_NAME, appended to
# rust/helpers/FILE.
kext_helper() {
	python3 - "$drv/ferroce_helpers.c" "$1" "$tree/rust/helpers/$2" <<-'PY'
		import re, sys
		src, name, dst = sys.argv[1:]
		m = re.search(r'\n(__rust_helper[^\n]*\n?[^\n]*\brust_helper_' + name + r'\(.*?\n}\n)',
		              open(src).read(), re.S)
		assert m, name
		open(dst, 'a').write('\n' + m.group(1))
	PY
}
kext_helper num_online_cpus cpu.c
insert_text before "$tree/rust/helpers/cpu.c" '#include <linux/smp.h>' '#include <linux/cpumask.h>'
python3 - "$drv/rdma/kext.rs" "$tree/rust/kernel/cpu.rs" <<-'PY'
	import re, sys
	src, dst = sys.argv[1:]
	m = re.search(r'\n(/// The number of online CPUs.*?\n}\n)', open(src).read(), re.S)
	assert m
	f = m.group(1).replace('b::num_online_cpus', 'bindings::num_online_cpus')
	open(dst, 'a').write('\n' + f)
PY
commit "rust: cpu: add num_online_cpus()" \
"A driver sizes its per-CPU resources, such as completion vectors, by the
CPUs that are online, not by nr_cpu_ids.  Wrap num_online_cpus(), a
static inline, with a helper."

kext_helper dev_to_node device.c
kext_helper cpumask_of cpumask.c
kext_helper irq_set_affinity_and_hint irq.c
kext_helper irq_update_affinity_hint irq.c
mkdir -p "$tree/rust/kernel/pci"
python3 - "$drv/rdma/kext.rs" "$tree/rust/kernel/pci/msix.rs" <<-'PY'
	import re, sys
	src, dst = sys.argv[1:]
	s = open(src).read()
	doc = re.compile(r'^//! .*?\n\n', re.S | re.M)
	cpus = re.compile(r'/// The number of online CPUs.*?\n}\n\n', re.S)
	assert len(doc.findall(s)) == 1 and len(cpus.findall(s)) == 1
	s = doc.sub('//! MSI-X vectors of a PCI function with one handler each, and a PCI\n'
	            '//! driver adapter that sets the DMA masks before the driver\'s probe.\n\n', s, 1)
	s = cpus.sub('', s)
	# rustfmt orders `crate` before `core`.
	core = 'use core::marker::{\n    PhantomData,\n    PhantomPinned, //\n};\n'
	imports = re.compile(r'^use kernel::\{.*?\n\};\n', re.S | re.M)
	assert s.count(core) == 1 and len(imports.findall(s)) == 1
	s = s.replace(core, '')
	s = imports.sub(lambda m: m.group(0).replace('use kernel::{', 'use crate::{') + core, s)
	s = s.replace('kernel::device::Device', 'crate::device::Device')
	s = s.replace('kernel::bindings::', 'b::')
	assert 'kernel::' not in s, s
	open(dst, 'w').write(s)
PY
insert_text after "$tree/rust/kernel/pci.rs" 'mod irq;' 'mod msix;'
python3 - "$tree/rust/kernel/pci.rs" <<-'PY'
	import sys
	path = sys.argv[1]
	s = open(path).read()
	anchor = '    IrqVectorRegistration, //\n};\n'
	assert s.count(anchor) == 1
	s = s.replace(anchor, anchor + 'pub use self::msix::{\n    DmaMasked,\n    MaskedPciDriver,\n'
	              '    MsixIrqs, //\n};\n')
	open(path, 'w').write(s)
PY
commit "rust: pci: add MSI-X vectors with handlers and a DMA-masked probe" \
"MsixIrqs allocates a function's MSI-X vectors and requests each with a
handler and a name of its own, in one pinned object that frees them in
the right order: each vector's affinity hint is cleared, then its IRQ
freed (and then its name, which request_irq() keeps a pointer to), and
the vectors are freed last.  Vectors from a given index on (completion
vectors after an async one) get one CPU each, spread from the device's
NUMA node, as affinity and hint.

DmaMasked implements pci::Driver for a MaskedPciDriver: it sets the
streaming and coherent DMA masks to the driver's DMA_MASK_BITS before the
driver's probe runs, when no DMA allocation or mapping of the device can
exist yet, so that a driver needs no unsafe call to set them.

The helpers wrap the static inlines dev_to_node(), cpumask_of(),
irq_set_affinity_and_hint() and irq_update_affinity_hint()."

# --- 4: rust: rdma -------------------------------------------------------------
mkdir -p "$tree/rust/kernel/rdma"
cp "$drv"/rdma/*.rs "$tree/rust/kernel/rdma/"
# kext.rs is patches 2 and 3's.
rm "$tree/rust/kernel/rdma/kext.rs"
python3 - "$tree/rust/kernel/rdma/mod.rs" <<-'PY'
	import re, sys
	path = sys.argv[1]
	s = open(path).read()
	doc = re.compile(r'^//! \* \[`kext`\].*?\n(?=//! \*|//!\n)', re.S | re.M)
	assert len(doc.findall(s)) == 1 and s.count('pub mod kext;\n') == 1
	s = doc.sub('', s).replace('pub mod kext;\n', '')
	assert 'kext' not in s
	open(path, 'w').write(s)
PY
# The helpers, with rust/helpers/'s header (helpers.c defines
# __rust_helper), but for kext.rs's (patches 2 and 3).
python3 - "$drv/ferroce_helpers.c" "$tree/rust/helpers/rdma.c" <<-'PY'
	import re, sys
	src, dst = sys.argv[1:]
	s = open(src).read()
	body = s[s.index('__rust_helper bool rust_helper_'):]
	kext = ('num_online_cpus', 'dev_to_node', 'cpumask_of', 'irq_set_affinity_and_hint',
	        'irq_update_affinity_hint')
	for name in kext:
	    fn = re.compile(r'__rust_helper[^\n]*\n?[^\n]*\brust_helper_' + name + r'\(.*?\n}\n\n', re.S)
	    assert len(fn.findall(body)) == 1, name
	    body = fn.sub('', body)
	includes = ''.join(l + '\n' for l in s.split('\n') if l.startswith('#include ')
	                   and l not in ('#include <linux/interrupt.h>', '#include <linux/cpumask.h>'))
	open(dst, 'w').write('// SPDX-License-Identifier: GPL-2.0\n\n' + includes + '\n' + body)
PY
# Only with the abstractions: the helpers call into ib_core.
insert_text before "$tree/rust/helpers/helpers.c" '#include "rbtree.c"' '#ifdef CONFIG_RUST_RDMA_ABSTRACTIONS
#include "rdma.c"
#endif'
insert_text after "$tree/rust/bindings/bindings_helper.h" '#include <net/netlink.h>' \
	"$(printf '#include <rdma/%s.h>\n' ib_addr ib_cache ib_mad ib_umem ib_verbs iter \
		rdma_netlink uverbs_ioctl)"
# Packed and aligned at once: bindgen cannot lay it out (as for the
# x86 types there).
insert_text before "$tree/rust/bindgen_parameters" '--opaque-type spinlock' "--opaque-type ib_user_mad_reg_req
"
insert_text before "$tree/rust/kernel/lib.rs" 'pub mod regulator;' '#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]
pub mod rdma;'
insert_text before "$tree/drivers/infiniband/Kconfig" 'if INFINIBAND_USER_ACCESS || !INFINIBAND_USER_ACCESS' \
'config RUST_RDMA_ABSTRACTIONS
	bool "Rust RDMA abstractions support"
	depends on RUST
	depends on INFINIBAND=y
	help
	  Adds support needed for RDMA drivers written in Rust: safe
	  abstractions over ib_core (the ib_device, its verbs and objects,
	  udata, umem, user mmap entries, the GID table and counters).
	  ib_core must be built in, since the abstractions are part of
	  the kernel crate.
'
maintainers 'RUST [RDMA]
M:	'"$author"'
L:	linux-rdma@vger.kernel.org
L:	rust-for-linux@vger.kernel.org
S:	Maintained
F:	rust/helpers/rdma.c
F:	rust/kernel/rdma/'
commit "rust: rdma: add abstractions over ib_core" \
"Safe abstractions for an RDMA driver written in Rust.  The driver's state
is a type implementing the #[vtable] trait rdma::Driver; ib_core calls
extern \"C\" trampolines that call its methods:

- device: the ib_device (allocated with the size of the Rust container,
  ib_device first), its ops table, and the object verbs' trampolines
  (ucontext, PD, CQ, QP, AH, MR, MW, SRQ) with the driver state of each
  object in ib_core's own allocation;
- registration: Builder allocates, Registration registers and unregisters
  on drop; ib_core's dealloc_driver is the one place the state is dropped;
- attr, gids: GID attributes, netdevs, port attributes, the GID table;
- udata, umem, mmap: the growable request/response rules of a driver's
  ABI header, pinned user memory walked by DMA blocks, user mmap entries;
- kverbs, wr: kernel verbs (post_send/post_recv/poll_cq) with safe views
  of work requests and completions;
- objects, srq: CQ/QP/SRQ tables for event dispatch;
- stats, notifier: counters and restrack, a netdevice notifier.

Like RUST_PHYLIB_ABSTRACTIONS, the abstractions need ib_core built in.
The helpers wrap static inlines only."

# --- 5-11: the driver, file by file ------------------------------------------
mkdir -p "$tree/$kdrv"
# kext_paths FILE: the driver's paths into rdma/kext.rs made the kernel
# crate's (patches 2 and 3).
kext_paths() {
	python3 - "$1" <<-'PY'
		import re, sys
		path = sys.argv[1]
		s = open(path).read()
		if 'kext' not in s:
		    sys.exit(0)
		s = s.replace('rdma::kext::MaskedPciDriver', 'pci::MaskedPciDriver')
		s = s.replace('rdma::kext::DmaMasked', 'pci::DmaMasked')
		s = re.sub(r'(rdma::\{\n( +)self,\n)\2kext,\n', r'\1', s)
		s = s.replace('kext::MsixIrqs', 'pci::MsixIrqs')
		if 'kext::num_online_cpus' in s:
		    imports = 'use kernel::{\n    device::'
		    assert s.count(imports) == 1, path
		    s = s.replace(imports, 'use kernel::{\n    cpu,\n    device::')
		    s = s.replace('kext::num_online_cpus', 'cpu::num_online_cpus')
		assert 'kext' not in s, path
		open(path, 'w').write(s)
	PY
}
add_part() {
	local n=$1 f
	for f in "${!part[@]}"; do
		[ "${part[$f]}" = "$n" ] || continue
		case $f in
		ferroce_helpers.c) ;;
		# The Makefile is the Kbuild without its out-of-tree include.
		Kbuild)
			python3 - "$drv/$f" "$tree/$kdrv/Makefile" <<-'PY'
				import sys
				s = open(sys.argv[1]).read()
				oot = s.index('\n# Out of tree (M=')
				assert s.rstrip().endswith('include $(src)/Kbuild.oot\nendif')
				open(sys.argv[2], 'w').write(s[:oot])
			PY
			;;
		# In tree, ib_core's bindings and the helpers are the kernel
		# crate's: the out-of-tree includes and cfgs go.
		bindings.rs)
			python3 - "$drv/$f" "$tree/$kdrv/$f" <<-'PY'
				import re, sys
				s = open(sys.argv[1]).read()
				oot = re.compile(r'    // Out of tree, .*?include!\(env!\("FERROCE_HELPERS_RSI"\)\);\n', re.S)
				cfg = '#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]\npub(crate) use kernel::bindings::*;\n'
				assert len(oot.findall(s)) == 1 and s.count(cfg) == 1
				s = oot.sub('', s).replace(cfg, 'pub(crate) use kernel::bindings::*;\n')
				assert 'RDMA_ABSTRACTIONS' not in s and 'RSI' not in s, s
				open(sys.argv[2], 'w').write(s)
			PY
			;;
		# In tree the layer is the kernel crate's: the out-of-tree
		# `mod rdma;` goes (rustfmt would look for its files).
		ferroce_main.rs)
			python3 - "$drv/$f" "$tree/$kdrv/$f" <<-'PY'
				import sys
				s = open(sys.argv[1]).read()
				oot = '#[cfg(not(CONFIG_RUST_RDMA_ABSTRACTIONS))]\npub mod rdma;\n'
				cfg = '#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]\nuse kernel::rdma;\n'
				assert s.count(oot) == 1 and s.count(cfg) == 1
				s = s.replace(oot, '').replace(cfg, 'use kernel::rdma;\n')
				open(sys.argv[2], 'w').write(s)
			PY
			;;
		*)
			mkdir -p "$(dirname "$tree/$kdrv/$f")"
			cp "$drv/$f" "$tree/$kdrv/$f"
			;;
		esac
		case $f in *.rs) kext_paths "$tree/$kdrv/$f" ;; esac
	done
}
add_part 5
cp "$FERROCE_TOP/include/ferroce/ferroce-hw.h" "$tree/$kdrv/"
mkdir -p "$tree/Documentation/infiniband/ferroce"
cp "$FERROCE_TOP"/Documentation/ferroce/{device,driver}.rst "$tree/Documentation/infiniband/ferroce/"
cat >"$tree/Documentation/infiniband/ferroce/index.rst" <<-'EOF'
	.. SPDX-License-Identifier: GPL-2.0

	=======
	ferroce
	=======

	.. toctree::
	   :maxdepth: 1

	   device
	   driver
EOF
insert_text before "$tree/Documentation/infiniband/index.rst" '   ipoib' '   ferroce/index'
commit "RDMA/ferroce: add the device programming interface" \
"ferroce-hw.h is the device's programming model: the BAR0 register block,
the admin queue's commands, the event queues, work queue entries, CQEs and
doorbell records.  It is the single source of truth shared with the
emulated device and the userspace provider; device.rst describes it, and
driver.rst the driver's design.  The driver's bindings of the header and
of the uapi ferroce-abi.h are bindgen's output, checked in as nova-core's
firmware bindings are (ferroce_hw_bindings.rs, included by bindings.rs),
and it describes its registers with register! (regs.rs).

Nothing is built yet; the Makefile comes last in the series."
add_part 6
commit "RDMA/ferroce: add the admin queue, event queues and doorbell records" \
"The admin queue (cmdq.rs) carries every control command, with a
completion per command; the event queues (eq.rs) deliver completion and
async events through MSI-X; doorbell records (dbrec.rs) are DMA pages the
device reads producer indices from; page buffer lists (pbl.rs) describe
queue and MR memory to the device."
add_part 7
commit "RDMA/ferroce: add PCI bring-up and netdev pairing" \
"Probe resets the device, maps BAR0, sets up MSI-X (one async vector and
one per completion EQ, spread over CPUs), the admin queue and the EQs;
remove undoes it in reverse order and survives a dead device.  The RoCE
port pairs with the netdev that has the device's MAC address (pairing.rs),
follows its state and MTU through a netdevice notifier, and exports
counters through hw_stats and debugfs."
add_part 8
commit "RDMA/ferroce: add the ib_device and its GID table" \
"Register the ib_device with its port attributes and feed the device's
GID table from ib_core's (add_gid/del_gid): RoCE v1 and v2 entries,
IPv4-mapped and EUI-64 link-local GIDs, VLAN ids."
add_part 9
commit "RDMA/ferroce: add user verbs" \
"PD, CQ, QP (RC, UC, UD), SRQ, AH, MR and MW for userspace: the provider
owns its queues' memory (pinned with ib_umem) and rings doorbells through
mmap'd pages; requests and responses follow ferroce-abi.h."
add_part 10
commit "RDMA/ferroce: add kernel verbs" \
"Kernel QPs and CQs (post_send, post_recv, poll_cq, req_notify_cq, fast
registration) and the GSI QP, so that ib_mad, the CM and rdma_cm, and
kernel ULPs such as NVMe over RDMA, run on ferroce."
add_part 11
cat >"$tree/$kdrv/Kconfig" <<'EOF'
# SPDX-License-Identifier: GPL-2.0
config INFINIBAND_FERROCE
	tristate "ferroce RoCE NIC support"
	depends on RUST_RDMA_ABSTRACTIONS
	depends on PCI_MSI && 64BIT && INET
	depends on INFINIBAND_USER_ACCESS
	help
	  RDMA over Converged Ethernet (RoCE v1 and v2) driver for the
	  ferroce NIC, written in Rust.  The NIC is emulated by a
	  vfio-user device process that QEMU attaches as a PCI function.

	  To compile this driver as a module, choose M here.  The module
	  will be called ferroce.
EOF
insert_text before "$tree/drivers/infiniband/Kconfig" 'source "drivers/infiniband/hw/hfi1/Kconfig"' \
	'source "drivers/infiniband/hw/ferroce/Kconfig"'
echo 'obj-$(CONFIG_INFINIBAND_FERROCE)	+= ferroce/' >>"$tree/drivers/infiniband/hw/Makefile"
commit "RDMA/ferroce: add Kconfig and Makefile" \
"Build the driver (ferroce.ko).  The build runs no bindgen of its own: the
device's bindings are checked in (patch 5), ib_core's come from the kernel
crate (patch 4)."

# --- the series --------------------------------------------------------------
rm -rf "$out"
mkdir -p "$out"
n=$(g rev-list --count base..HEAD)
g format-patch -q --cover-letter -o "$out" base..HEAD
cover=$(ls "$out"/0000-*.patch)
python3 - "$cover" "$kver" "$(git -C "$FERROCE_TOP" rev-parse --short HEAD)" <<-'PY'
	import sys
	path, kver, rev = sys.argv[1:]
	s = open(path).read()
	s = s.replace('*** SUBJECT HERE ***', 'RDMA/ferroce: a RoCE driver in Rust')
	s = s.replace('*** BLURB HERE ***', f"""\
This series adds ferroce, a RoCE v2/v1 NIC driver written in Rust, and
the safe abstractions over ib_core it is built on (rust/kernel/rdma).

The NIC is an emulated PCI function (a vfio-user device process that
QEMU attaches), so that RDMA can be used and tested in a VM without RDMA
hardware: perftest, rdma_cm, NVMe over RDMA, and rxe on the same wire
interoperate with it.  Its rdma-core provider is posted separately.

- Patch 1 adds the user ABI header and RDMA_DRIVER_FERROCE.
- Patches 2 and 3 add what the driver needs of kernel::cpu and
  kernel::pci: the online CPU count, MSI-X vectors with their handlers,
  and a probe adapter that sets the DMA masks first.
- Patch 4 adds the abstractions over ib_core.  All of the driver's
  unsafe code is in patches 2-4; every driver module is
  #![forbid(unsafe_code)].
- Patches 5-10 add the driver by concern; patch 11 builds it.  As in the
  erdma series, the driver's files arrive before its Makefile, so every
  patch builds.

Open questions for reviewers:
- The driver's bindings of its hardware header (ferroce-hw.h, shared
  with the device and the provider) are bindgen's output checked in, as
  nova-core's firmware bindings are, rather than a restatement in Rust
  with register! and checked structs; its registers are register!s.
- The CQ, QP and SRQ tables that events are dispatched through are
  XArrays of small slots, looked up with xa_load() under the RCU read
  lock (the EQ handlers run in hard IRQ context).  A lookup takes a use
  of the slot, and destroy waits on a completion for the uses still
  running, as mlx5's CQ table does; the slot is freed with
  kvfree_call_rcu().  7.3's kernel::xarray owns its entries but has no
  RCU lookup, so rust/kernel/rdma calls the C API.  Would reviewers
  rather see an RCU read path added to kernel::xarray first?

Based on Linux {kver} (Debian's linux-source); generated from ferroce
{rev} by make series.""")
	open(path, 'w').write(s)
PY
log "make series: $n patches and a cover letter in $out"
