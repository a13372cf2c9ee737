# SPDX-License-Identifier: GPL-2.0
#
# ferroce top-level Makefile.
#
#   make            build the kernel module(s) out of tree against the test
#                   kernel (built once into $FERROCE_CACHE by scripts/), inside
#                   the trixie root so the Rust toolchain is the kernel's own,
#                   into .build/<flavour>/ (FERROCE_KERNEL_FLAVOUR=debug);
#                   KDIR=/path/to/a/rust-enabled/kernel/build builds against
#                   any other tree with the host's toolchain instead;
#                   also builds the provider and the device
#   make device     ferroce-dev, the emulated NIC's device process, with the
#                   root's cargo: device/target/release/ferroce-dev
#   make provider   libferroce, the rdma-core provider (providers/ferroce),
#                   against a cached rdma-core of the root's libibverbs
#                   version, inside the trixie root, into .build/provider/
#   make provider-series
#                   libferroce as a patch series against upstream rdma-core
#                   (its own layout and CMake), in .build/provider-series/
#   make series     the kernel side as a patch series against the pinned
#                   7.3.4 tree (rust/kernel/rdma, the driver, the uapi), in
#                   .build/series/
#   make upstream-check
#                   the series in tree: git am patch by patch, each built,
#                   checkpatch --strict, rustfmt, CLIPPY=1, rustdoc, then gid
#                   and ferroce-pair on the in-tree kernel (in make soak)
#   make provider-check
#                   the provider's tests, against both builds
#   make run        the main job: VMs, RDMA, perftest, results shown
#   make check      every test (cargo, KUnit, VM scenarios); ends with
#                   "N passed, N failed"
#   make soak       the long versions of the scenarios that have one (SOAK=1:
#                   100 debug gid cycles, minutes of wire faults, ...)
#   make bench      the same RDMA benchmark over rxe and over ferroce (scenarios
#                   bench-rxe, bench-ferroce), side by side: bench.json with
#                   their ratios and gnuplot charts in qemu-test/runs/<date>-bench
#                   (numbers, not pass/fail)
#   make lint       rustfmt, clippy, checkpatch, shellcheck, and the checked-in
#                   bindings of the device's headers are current
#   make hw-bindings
#                   rewrites those bindings (ferroce_hw_bindings.rs) after a
#                   change to ferroce-hw.h or ferroce-abi.h
#   make install    the module and libferroce with its .driver file, under
#                   DESTDIR (see "install" below)
#   make clean
#
# The module sources are described by ./Kbuild (kbuild reads it for M=).

TOP := $(CURDIR)
DEVICE_DIR := $(TOP)/device

ifeq ($(origin KDIR),undefined)
# The cached test kernel; built on first use (~6 min).  Its make-flags
# (LLVM=1 for the debug flavour) apply to module builds too.
KERNEL_DIR = $$($(TOP)/scripts/make-kernel.sh)
KERNEL_BUILD = $(KERNEL_DIR)/build
# The module is built out of the source tree, into .build/FLAVOUR
# (kbuild's MO=), so builds for the default and the debug kernel coexist:
# .build/default/drivers/infiniband/hw/ferroce/ferroce.ko.
FLAVOUR := $(or $(FERROCE_KERNEL_FLAVOUR),default)
KMAKE_ANY = k=$(KERNEL_DIR) && flock -s $$k.lock $(TOP)/scripts/in-root -- make -C $$k/build \
	$$(cat $$k/make-flags 2>/dev/null) M=$(TOP)
KMAKE = $(KMAKE_ANY) MO=$(TOP)/.build/$(FLAVOUR)
# make lint's clippy build has a tree of its own: in the module's tree it
# would change every object's command line, and the next make modules would
# build them all again.
KMAKE_CLIPPY = $(KMAKE_ANY) MO=$(TOP)/.build/clippy-$(FLAVOUR)
KSRC_CMD = readlink -f $(KERNEL_BUILD)/source
MOD_OBJ = $(TOP)/.build/$(FLAVOUR)
else
KMAKE = $(MAKE) -C $(KDIR) M=$(TOP)
KMAKE_CLIPPY = $(KMAKE)
KSRC_CMD = readlink -f $(KDIR)/source 2>/dev/null || echo $(KDIR)
MOD_OBJ = $(TOP)
endif

SHELL_SCRIPTS := $(wildcard scripts/*.sh) scripts/in-root qemu-test/run qemu-test/wire.sh \
	$(filter-out %.py %.c %.h %/__pycache__,$(wildcard qemu-test/guest/*)) $(wildcard qemu-test/scenarios/*) .ci/run \
	$(wildcard providers/*/tests/*.sh)
RUST_SOURCES = $(shell find drivers -name '*.rs')
C_SOURCES = $(shell find include drivers -name '*.[ch]' 2>/dev/null)
# libibverbs' provider interface returns positive errno values.
PROVIDER_C_SOURCES = $(shell find providers -name '*.[ch]' 2>/dev/null)

PROVIDER_OUT := $(TOP)/.build/provider

.PHONY: all modules hw-bindings provider provider-check provider-series series upstream-check device run check soak bench lint install clean help

all: modules provider device

modules:
	$(KMAKE) modules

# bindgen's output for the device's headers, made by Kbuild.oot, as the
# checked-in drivers/infiniband/hw/ferroce/ferroce_hw_bindings.rs.
HW_RSI = $(MOD_OBJ)/drivers/infiniband/hw/ferroce/ferroce_hw_generated.rsi
hw-bindings:
	$(KMAKE) drivers/infiniband/hw/ferroce/ferroce_hw_generated.rsi
	ksrc=$$($(KSRC_CMD)) && $(TOP)/scripts/gen-hw-bindings.sh --write $(HW_RSI) $$ksrc

# rdma-core's private headers and provider flags come from the tree that
# scripts/make-rdma-core.sh prepares once (~1 min) in $FERROCE_CACHE.
# RDMA_DRIVER_FERROCE comes from the kernel's uapi (the one the kernel series
# targets): its source is the kernel build's.
PROVIDER_MAKE = rc=$$($(TOP)/scripts/make-rdma-core.sh) && ksrc=$$($(KSRC_CMD)) && \
	$(TOP)/scripts/in-root -- make -C $(TOP)/providers/ferroce RDMA_CORE=$$rc \
	KERNEL_UAPI=$$ksrc/include/uapi O=$(PROVIDER_OUT)

provider:
	$(PROVIDER_MAKE)

# provider-check: the out-of-tree build's unit, symbol and load tests, then
# the provider series built in rdma-core's tree by its own CMake, with the
# unit and load tests against that build.
provider-check:
	$(PROVIDER_MAKE) check
	$(TOP)/scripts/provider-upstream-check.sh

# provider-series [SERIES_OUT=dir]: libferroce as git format-patch patches
# against upstream rdma-core (the root's version), with a cover letter.
SERIES_OUT ?= $(TOP)/.build/provider-series
provider-series:
	$(TOP)/scripts/make-provider-series.sh $(SERIES_OUT)

# series [KSERIES_OUT=dir]: the kernel series (scripts/make-series.sh).
KSERIES_OUT ?= $(TOP)/.build/series
series:
	$(TOP)/scripts/make-series.sh $(KSERIES_OUT)

upstream-check:
	$(TOP)/scripts/upstream-check.sh

device:
	cd $(DEVICE_DIR) && $(TOP)/scripts/in-root -- cargo build --release -p ferroce-dev

help:
	@sed -n '3,41p' Makefile

run:
	$(TOP)/scripts/run-main.sh

check:
	$(TOP)/scripts/check.sh

soak:
	$(TOP)/scripts/soak.sh

bench:
	$(TOP)/scripts/bench.sh

lint: modules
	@echo "== the device headers' checked-in bindings are current"
	ksrc=$$($(KSRC_CMD)) && $(TOP)/scripts/gen-hw-bindings.sh --check $(HW_RSI) $$ksrc
	@echo "== rustfmt (kernel's .rustfmt.toml)"
	ksrc=$$($(KSRC_CMD)) && $(TOP)/scripts/in-root -- rustfmt --check --edition 2021 \
		--config-path $$ksrc/.rustfmt.toml $(RUST_SOURCES)
	@echo "== clippy (CLIPPY=1)"
	@# Its warnings show only when the crate is compiled: a second run over
	@# an unchanged tree must not pass on what the first one reported.
	rm -f $(addprefix $(TOP)/.build/clippy-$(FLAVOUR)/drivers/infiniband/hw/ferroce/,ferroce_main.o ferroce_helpers.o)
	$(KMAKE_CLIPPY) CLIPPY=1 W=1 modules 2>&1 | tee $(TOP)/.clippy.log; \
		! grep -E '^(warning|error)' $(TOP)/.clippy.log; rc=$$?; rm -f $(TOP)/.clippy.log; exit $$rc
	@echo "== shellcheck"
	shellcheck -x $(SHELL_SCRIPTS)
	@echo "== checkpatch (C sources)"
	@if [ -n "$(C_SOURCES)" ]; then ksrc=$$($(KSRC_CMD)) && \
		$$ksrc/scripts/checkpatch.pl --no-tree --quiet --terse --show-types \
		--ignore SPDX_LICENSE_TAG,FILE_PATH_CHANGES -f $(C_SOURCES); fi
	@if [ -n "$(PROVIDER_C_SOURCES)" ]; then ksrc=$$($(KSRC_CMD)) && \
		$$ksrc/scripts/checkpatch.pl --no-tree --quiet --terse --show-types \
		--ignore SPDX_LICENSE_TAG,FILE_PATH_CHANGES,USE_NEGATIVE_ERRNO \
		-f $(PROVIDER_C_SOURCES); fi
	@if [ -f $(DEVICE_DIR)/Cargo.toml ]; then \
		echo "== cargo fmt / clippy (device; the root's 1.85: its precedence lint \
			flags a << b | c, allowed since 1.86, and its needless_lifetimes \
			flags more than later ones)"; \
		cd $(DEVICE_DIR) && $(TOP)/scripts/in-root -- cargo fmt --all --check && \
		$(TOP)/scripts/in-root -- cargo clippy --workspace --all-targets -- -D warnings \
			-A clippy::precedence -A clippy::needless_lifetimes; fi

# make install [DESTDIR=...]: ferroce.ko into lib/modules/<release>/updates/
# of the kernel it was built against (depmod runs when DESTDIR is empty),
# libferroce-rdmav<ABI>.so into libibverbs' provider directory
# (PROVIDER_DIR, by default the root's /usr/lib/<multiarch>/libibverbs) and
# /etc/libibverbs.d/ferroce.driver ("driver ferroce": libibverbs then loads
# the library from its provider directory).
ifeq ($(origin KDIR),undefined)
KRELEASE_CMD = cat $(KERNEL_BUILD)/include/config/kernel.release
else
KRELEASE_CMD = cat $(KDIR)/include/config/kernel.release
endif
MODULE_KO = $(if $(filter undefined,$(origin KDIR)),$(TOP)/.build/$(FLAVOUR),$(TOP))/drivers/infiniband/hw/ferroce/ferroce.ko
PROVIDER_DIR ?= /usr/lib/$$($(TOP)/scripts/in-root -- gcc -print-multiarch)/libibverbs

install: modules provider
	rel=$$($(KRELEASE_CMD)) && \
		install -D -m 0644 $(MODULE_KO) $(DESTDIR)/lib/modules/$$rel/updates/ferroce.ko && \
		if [ -z "$(DESTDIR)" ]; then depmod -a "$$rel"; fi
	so=$$(ls $(PROVIDER_OUT)/libferroce-rdmav*.so) && \
		install -D -m 0755 $$so $(DESTDIR)$(PROVIDER_DIR)/$${so##*/}
	install -d $(DESTDIR)/etc/libibverbs.d
	echo "driver ferroce" >$(DESTDIR)/etc/libibverbs.d/ferroce.driver

clean:
	-$(KMAKE) clean
	rm -rf qemu-test/runs .build
	@if [ -f $(DEVICE_DIR)/Cargo.toml ]; then cd $(DEVICE_DIR) && $(TOP)/scripts/in-root -- cargo clean; fi
