#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install the few bookworm host packages ferroce's scripts use (only those
# missing; the host's apt sources are not changed).  Everything else -- QEMU
# 11.1, the guest userspace, the kernel toolchain -- lives in the trixie root
# (scripts/make-root.sh).
. "$(dirname "$0")/lib.sh"
need_root

# command package
wanted="mmdebstrap:mmdebstrap ip:iproute2 cpio:cpio setsid:util-linux flock:util-linux
shellcheck:shellcheck perl:perl dpkg-deb:dpkg xz:xz-utils"
missing=()
for w in $wanted; do
	command -v "${w%%:*}" >/dev/null 2>&1 || missing+=("${w#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing host packages: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
