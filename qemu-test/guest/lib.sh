# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Helpers for the guest side of qemu-test scenarios (sourced by
# scenarios/*.guest).  Results are TAP-like lines in /mnt/work/results that
# the harness collects; a guest script ends with "finish", which exits 0 only
# if no check failed (1 otherwise: an exit status is 8 bits, a count of 256
# failures would read as 0).

RESULTS=/mnt/work/results
SHARED=/mnt/shared
: >"$RESULTS"
_failures=0

# The debug kernel's kmemleak scans all memory a minute after boot and then
# every ten minutes: in a TCG guest a scan takes tens of seconds, in the
# middle of the scenario.  Only kmemleak_check's own scans count, so stop
# the automatic ones (a scan on request still runs).
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan=off >/sys/kernel/debug/kmemleak 2>/dev/null
fi

# Each result also goes to /mnt/work/times with the guest's uptime, so that
# the slow steps of a scenario can be found (qemu-test/run's report lists
# the longest gaps).  Builtins only: a scenario records hundreds of results,
# and in a TCG guest each "echo | tee" (two forks, one exec) cost a tenth
# of a second or more.
_stamp() { read -r _up _ </proc/uptime && echo "$_up $*" >>/mnt/work/times; }
# _out LINE FILE: LINE to the console and to FILE.
_out() {
	printf '%s\n' "$1"
	printf '%s\n' "$1" >>"$2"
}
ok() {
	_out "ok - $*" "$RESULTS"
	_stamp "ok - $*"
}
not_ok() {
	_out "not ok - $*" "$RESULTS"
	_stamp "not ok - $*"
	_failures=$((_failures + 1))
}

# skip NAME REASON: a check that was not run, said so: "skip - NAME: REASON"
# in the results, which the harness counts and lists apart (neither passed
# nor failed).
skip() { _out "skip - $1: $2" "$RESULTS"; }

# check NAME CMD...: run CMD, record ok/not ok under NAME.
check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name (command: $*)"; fi
}

# guest_tool NAME: /tmp/NAME, a copy of qemu-test/guest/NAME.c as
# qemu-test/run built it on the host, in the root these guests boot (gcc in
# a TCG guest takes half a minute per program).
guest_tool() {
	[ -x "/tmp/$1" ] && return 0
	cp "/src/.build/guest-tools/$1" "/tmp/$1" ||
		{ echo "no /src/.build/guest-tools/$1: qemu-test/run builds it" >&2; return 1; }
}

# note KEY VALUE: a measured number or fact, collected into the run report.
note() { _out "$1 $2" /mnt/work/notes; }

finish() {
	echo "# $VM_NAME: $_failures failed"
	[ "$_failures" = 0 ]
	exit
}

# pause SECONDS: sleep without a fork or an exec, for the loops that poll
# beside a running test.  The root is 9p, so each /bin/sleep looks up, opens
# and maps its binary and libraries through QEMU: a perftest server's loop
# that slept with it every 0.2 s took its guest from 3,953 root-9p
# interrupts to 13,892 over an ib_write_lat run.  read times out on a FIFO
# that this shell holds both ends of (in /tmp, a tmpfs); without one, pause
# falls back to sleep.
_pause_fifo=/tmp/.pause.$$
if mkfifo "$_pause_fifo" 2>/dev/null; then
	exec {_pause_fd}<>"$_pause_fifo"
	rm -f "$_pause_fifo"
fi
pause() {
	if [ -n "${_pause_fd-}" ]; then
		read -r -t "$1" -u "$_pause_fd" _
		[ $? -gt 128 ] && return 0
	fi
	sleep "$1"
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
wait_for() {
	local limit=$1 i=0
	shift
	until "$@"; do
		i=$((i + 1))
		[ "$i" -gt "$((limit * 10))" ] && return 1
		pause 0.1
	done
}

# Cross-VM rendezvous through the run's shared 9p directory (cache=none, so
# files written by one guest are seen by the other on the next lookup).
set_marker() { echo "${2:-1}" >"$SHARED/$1.tmp" && mv "$SHARED/$1.tmp" "$SHARED/$1"; }
wait_marker() {
	wait_for "${2:-120}" test -e "$SHARED/$1" ||
		{ echo "timed out waiting for marker $1" >&2; return 1; }
	cat "$SHARED/$1"
}

# load_rdma_core: ib_core, uverbs and the RDMA CM, each one loaded (or built
# in) afterwards; a module the kernel lacks is a failure, not a skip.
load_rdma_core() {
	local m
	for m in ib_core ib_uverbs_support ib_uverbs rdma_cm rdma_ucm; do
		modprobe "$m" || { echo "modprobe $m failed" >&2; return 1; }
		# (A built-in module without parameters has no /sys/module entry:
		# the in-tree kernel of make upstream-check builds ib_core in.)
		[ -d "/sys/module/$m" ] ||
			grep -qs "/$m\.ko\$" "/lib/modules/$(uname -r)/modules.builtin" ||
			{ echo "$m is neither loaded after modprobe nor built in" >&2; return 1; }
	done
	[ -d /sys/class/infiniband_verbs ] || { echo "ib_uverbs did not load" >&2; return 1; }
}

# load_ferroce_provider: make libibverbs load libferroce, the rdma-core
# provider "make provider" builds into the checkout's .build/provider/.
# libibverbs takes its provider list from /etc/libibverbs.d (fixed at build
# time) or RDMAV_DRIVERS; the root is read-only, so a tmpfs holding the
# root's *.driver files plus ferroce.driver is mounted over the directory
# (every process sees it, whatever its environment).  A "driver" line with
# an absolute path makes libibverbs dlopen PATH-rdmav<ABI>.so.  The library
# must be the one the harness built for this run (FERROCE_PROVIDER_SHA256 in
# vm.env), not an older one left in the checkout.
FERROCE_PROVIDER=/src/.build/provider/libferroce
load_ferroce_provider() {
	local dir=/etc/libibverbs.d so tmp rc sum
	for so in "$FERROCE_PROVIDER"-rdmav*.so; do
		[ -f "$so" ] && break
		echo "libferroce not built (make provider): no $so" >&2
		return 1
	done
	sum=$(sha256sum <"$so" | cut -d' ' -f1)
	if [ -z "${FERROCE_PROVIDER_SHA256:-}" ] || [ "$sum" != "$FERROCE_PROVIDER_SHA256" ]; then
		echo "$so is not the libferroce this run built (sha256 $sum, built ${FERROCE_PROVIDER_SHA256:-none})" >&2
		return 1
	fi
	[ -f "$dir/ferroce.driver" ] && return 0
	tmp=$(mktemp -d) || return 1
	cp "$dir"/*.driver "$tmp"/ &&
		mount -t tmpfs -o mode=0755 libibverbs.d "$dir" &&
		cp "$tmp"/*.driver "$dir"/ &&
		echo "driver $FERROCE_PROVIDER" >"$dir/ferroce.driver"
	rc=$?
	rm -rf "$tmp"
	return "$rc"
}

# rxe_up DEV NETDEV: soft-RoCE on a netdev.
rxe_up() {
	load_rdma_core && modprobe rdma_rxe && rdma link add "$1" type rxe netdev "$2"
}

# wait_port_active DEV [TIMEOUT]
wait_port_active() {
	wait_for "${2:-30}" grep -qs ACTIVE "/sys/class/infiniband/$1/ports/1/state"
}

# gid_index DEV TYPE PREFIX: first GID index (of the first 16; reading all
# 1024 sysfs entries takes ~50 s under TCG) whose GID starts with PREFIX and
# whose type is TYPE ("RoCE v2" or "IB/RoCE v1").
gid_index() {
	local dev=$1 type=$2 prefix=$3 i gid t port
	port=/sys/class/infiniband/$dev/ports/1
	# Callers poll this (wait_for): read, not $(cat), so that a round
	# forks no process per entry (slow in a TCG guest, slower under KASAN).
	for ((i = 0; i < 16; i++)); do
		read -r gid 2>/dev/null <"$port/gids/$i" || continue
		read -r t 2>/dev/null <"$port/gid_attrs/types/$i" || continue
		case $gid in "$prefix"*) [ "$t" = "$type" ] && { echo "$i"; return 0; } ;; esac
	done
	return 1
}

# eui64_gid MAC: the sysfs spelling of fe80:: + the modified EUI-64 of MAC
# (ff:fe in the middle, the universal/local bit flipped).
eui64_gid() {
	local IFS=:
	# shellcheck disable=SC2086
	set -- $1
	printf 'fe80:0000:0000:0000:%02x%s:%sff:fe%s:%s%s' $((0x$1 ^ 2)) "$2" "$3" "$4" "$5" "$6"
}

# set_mac MAC: eth0's address, live or (if the NIC needs it) down and up.
set_mac() {
	ip link set eth0 address "$1" 2>/dev/null ||
		{ ip link set eth0 down && ip link set eth0 address "$1" && ip link set eth0 up; }
}

# device_mac NAME: the current MAC of this VM's emulated NIC (control socket).
device_mac() {
	# sed, not python: python's start-up costs 20 s on the debug kernel.
	host_ctl "$1" status | sed -n 's/.*"mac": *"\([0-9a-f:]*\)".*/\1/p'
}

# ipv4_gid_prefix A.B.C.D: the sysfs spelling of ::ffff:A.B.C.D.
ipv4_gid_prefix() {
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}

# perftest pairs.  Each test NAME gets its own TCP port.  The server side
# starts perftest, waits until it listens, then publishes a marker; the client
# waits for that marker.  Output goes to /mnt/work/NAME.{server,client}.log,
# the exit status is returned and the elapsed seconds kept in PT_SECONDS.
PT_SECONDS=0
pt_server() {
	local name=$1 port=$2 limit=$3
	shift 3
	local log=/mnt/work/$name.server.log start=$SECONDS pid rc i=0
	timeout "$limit" "$@" -p "$port" >"$log" 2>&1 &
	pid=$!
	until ss -Hltn "sport = :$port" | grep -q .; do
		i=$((i + 1))
		if ! kill -0 "$pid" 2>/dev/null || [ "$i" -gt 300 ]; then
			echo "server $name never listened" >>"$log"
			break
		fi
		pause 0.1
	done
	set_marker "$name.ready"
	wait "$pid"
	rc=$?
	PT_SECONDS=$((SECONDS - start))
	set_marker "$name.server-done" "$rc"
	echo "# $name server: rc=$rc after ${PT_SECONDS}s"
	sed 's/^/#   /' "$log"
	return "$rc"
}

pt_client() {
	local name=$1 port=$2 limit=$3 server=$4
	shift 4
	local log=/mnt/work/$name.client.log start rc
	wait_marker "$name.ready" 180 >/dev/null || return 1
	start=$SECONDS
	timeout "$limit" "$@" -p "$port" "$server" >"$log" 2>&1
	rc=$?
	PT_SECONDS=$((SECONDS - start))
	wait_marker "$name.server-done" "$limit" >/dev/null
	echo "# $name client: rc=$rc after ${PT_SECONDS}s"
	sed 's/^/#   /' "$log"
	return "$rc"
}

# pt_result NAME COLUMN: a number from perftest's result table (the line after
# the header that starts with "#bytes"), e.g. column 4 = BW average [MiB/s].
pt_result() {
	awk -v col="$2" '/^ *#bytes/ {getline; print $col; exit}' "/mnt/work/$1.client.log"
}

# host_ctl NAME ARGS...: ask this VM's emulated NIC (its device process on
# the host) over its control socket, e.g. "host_ctl g1 gids"; prints the
# answer (JSON).  Needs CTL_SERVER=1 in the scenario.
host_ctl() {
	local name=$1
	shift
	set_marker "req-$name" "$VM_NAME $*"
	wait_for 30 test -e "$SHARED/resp-$name.done" ||
		{ echo "host_ctl $name: no answer" >&2; return 1; }
	cat "$SHARED/resp-$name"
	return "$(cat "$SHARED/resp-$name.done")"
}

# kmemleak_check: on a kernel with kmemleak (the debug flavour), two scans
# must find no unreferenced object (the reports go to the console); a debug
# kernel without a writable kmemleak file fails, another kernel reports the
# check SKIPPED.
kmemleak_check() {
	local f=/sys/kernel/debug/kmemleak leaks
	if [ -w "$f" ]; then
		if echo scan >"$f" && sleep 1 && echo scan >"$f"; then
			leaks=$(grep -c unreferenced "$f")
			note kmemleak_reports "$leaks"
			sed -n '1,40s/^/# kmemleak: /p' "$f"
			check "kmemleak: no leak ($leaks reports)" test "$leaks" = 0
		else
			not_ok "kmemleak: scan refused (disabled after an error? see dmesg)"
		fi
	elif [ "$KERNEL_FLAVOUR" = debug ]; then
		not_ok "kmemleak: the debug kernel has no writable $f"
	else
		skip "kmemleak: no leak" "the $KERNEL_FLAVOUR kernel has no kmemleak"
	fi
}
