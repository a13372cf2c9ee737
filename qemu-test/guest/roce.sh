# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Helpers for the two-VM RDMA scenarios (ferroce-pair, ferroce-rxe), sourced
# by their guest scripts after lib.sh.  A VM's role names its RDMA device
# kind: "ferroce" (ferroce.ko on the emulated NIC, libferroce) or "rxe"
# (soft-RoCE on virtio-net), so the same guest script can pair either kind
# with either.

# step NAME CMD...: like check, but returns CMD's status (check returns 0
# whatever happened), for steps that later steps depend on.
step() {
	local name=$1
	shift
	if "$@"; then
		ok "$name"
	else
		not_ok "$name (command: $*)"
		return 1
	fi
}

# rdma_up KIND: bring up this VM's RDMA device; sets DEV (ferroce0 or rxe0).
# Every step is its own check, and the first failing one stops the bring-up
# (returns 1) so that the failure is named at the step that broke.
DEV=
rdma_up() {
	case $1 in
	rxe)
		DEV=rxe0
		step "rxe0 on eth0" rxe_up rxe0 eth0 || return 1
		step "rxe0 port 1 ACTIVE" wait_port_active rxe0 || return 1
		;;
	ferroce)
		DEV=ferroce0
		step "ib_core, uverbs load" load_rdma_core || return 1
		step "ferroce.ko loads ($FERROCE_KO)" insmod "$FERROCE_KO" || return 1
		step "ferroce0 registered" wait_for 10 test -d /sys/class/infiniband/ferroce0 || return 1
		step "ferroce0 port 1 ACTIVE" wait_port_active ferroce0 10 || return 1
		if ! declare -F load_ferroce_provider >/dev/null; then
			not_ok "load_ferroce_provider: not in qemu-test/guest/lib.sh (libferroce has not landed)"
			return 1
		fi
		step "libferroce provider loaded (load_ferroce_provider)" load_ferroce_provider || return 1
		;;
	*)
		not_ok "unknown RDMA device kind '$1' (role of $VM_NAME)"
		return 1
		;;
	esac
}

# rdma_gid_v4: this VM's IPv4-mapped RoCE v2 GID index on DEV (waits up to
# 10 s for ib_core to add it); sets GIDX.
GIDX=
rdma_gid_v4() {
	local prefix
	prefix=$(ipv4_gid_prefix "${VM_IP%/*}")
	wait_for 10 gid_index "$DEV" "RoCE v2" "$prefix" >/dev/null || return 1
	GIDX=$(gid_index "$DEV" "RoCE v2" "$prefix")
}

# rdma_rendezvous OK: tell the peer VM whether this VM's device came up
# ("ok" or "fail") and learn the same about the peer, so that one VM whose
# bring-up failed does not leave the other waiting for every test in turn.
# Returns 0 only if both came up.  PEER_VMS (set by the guest script) names
# the peer VM(s); PEER_DEV gets the peer's device name.
PEER_DEV=
rdma_rendezvous() {
	local mine=fail peer p
	[ "$1" = 0 ] && mine="ok $DEV"
	set_marker "up-$VM_NAME" "$mine"
	[ "$1" = 0 ] || return 1
	for p in $PEER_VMS; do
		peer=$(wait_marker "up-$p" 300) || peer="fail (no answer in 300 s)"
		case $peer in
		ok\ *) PEER_DEV=${peer#ok } ;;
		*)
			not_ok "peer $p brought up its RDMA device ($peer)"
			return 1
			;;
		esac
	done
	ok "peer(s) $PEER_VMS brought up RDMA ($PEER_DEV)"
}

# devinfo_checks: ibv_devinfo through the userspace provider; its output
# stays in DEVINFO.
DEVINFO=
devinfo_checks() {
	local out=/mnt/work/ibv_devinfo.$DEV.txt
	# shellcheck disable=SC2034 # read by the guest scripts
	DEVINFO=$out
	ibv_devices >/mnt/work/ibv_devices.txt 2>&1
	sed 's/^/# /' /mnt/work/ibv_devices.txt
	check "ibv_devices lists $DEV" grep -qw "$DEV" /mnt/work/ibv_devices.txt
	if ! ibv_devinfo -v -d "$DEV" >"$out" 2>&1; then
		not_ok "ibv_devinfo -v -d $DEV: $(head -c 300 "$out")"
		return 1
	fi
	ok "ibv_devinfo -v -d $DEV"
	grep -E 'hca_id|transport|node_guid|num_comp_vectors|state:|link_layer|GID\[' "$out" | sed 's/^/# /'
	check "ibv_devinfo: transport InfiniBand" grep -Eq '^\s*transport:\s+InfiniBand \(0\)' "$out"
	check "ibv_devinfo: link_layer Ethernet" grep -Eq '^\s*link_layer:\s+Ethernet$' "$out"
	check "ibv_devinfo: port PORT_ACTIVE" grep -Eq '^\s*state:\s+PORT_ACTIVE \(4\)' "$out"
	check "ibv_devinfo: node_guid = sysfs node_guid" \
		grep -Eq "^\s*node_guid:\s+$(cat "/sys/class/infiniband/$DEV/node_guid")$" "$out"
	local ncomp
	ncomp=$(awk '/num_comp_vectors:/ {print $2}' "$out")
	note "${DEV}_num_comp_vectors" "${ncomp:-none}"
	check "ibv_devinfo: num_comp_vectors >= 1 ($ncomp)" test "${ncomp:-0}" -ge 1
	check "ibv_devinfo: GID[0] is link-local fe80::" grep -Eq '^\s*GID\[\s*0\]:\s+fe80' "$out"
	local ip=${VM_IP%/*}
	check "ibv_devinfo: the IPv4 RoCE v2 GID ::ffff:$ip at index $GIDX" \
		grep -Eq "^\s*GID\[\s*$GIDX\]:\s+::ffff:${ip//./\\.}, RoCE v2$" "$out"
}

# pair NAME PORT LIMIT SERVER_VM CMD...: run CMD as a client/server pair
# (perftest or an ibv_*_pingpong), the server on VM SERVER_VM, the client on
# the other; each side runs this with the same arguments.  Like lib.sh's
# pt_server/pt_client (logs /mnt/work/NAME.{server,client}.log, exit status
# returned, PT_SECONDS), and in addition:
#  - a server that dies before listening says so in its ready marker and the
#    client does not start;
#  - LIMIT bounds the client from its start, and the server from the
#    moment it listens: a server that takes long to set up (up to 60 s, as
#    on the debug kernel) must not run out of time before its client
#    connects; a server still running 20 s after its client finished is
#    stopped (a failed client must not cost the server's whole time limit);
#  - output is line-buffered (stdbuf -oL), so that a run stopped by its time
#    limit still shows how far it got.
PEER_GONE=
pair() {
	local name=$1 port=$2 limit=$3 server=$4 side=client other=server rc mine peer f
	[ "$VM_NAME" = "$server" ] && { side=server; other=client; }
	pair_once "$@"
	rc=$?
	# perftest calibrates its clock (get_cpu_mhz) when it writes its report;
	# on a host too busy for TCG to keep time steadily that fails ("Correlation
	# coefficient r^2: ... < 0.9", "Can't produce a report") after the RDMA
	# transfers succeeded.  Then both sides run the test once more (and say
	# so in the notes); any other failure stands.
	[ -n "$PEER_GONE" ] && return "$rc"
	mine=0
	grep -qs 'Correlation coefficient r^2' "/mnt/work/$name.$side.log" && mine=1
	set_marker "$name.$side-clock" "$mine"
	peer=$(wait_marker "$name.$other-clock" 60) || peer=0
	[ "$mine" = 1 ] || [ "$peer" = 1 ] || return "$rc"
	note perftest_clock_retry "$name (clock calibration failed on the $([ "$mine" = 1 ] && echo "$side" || echo "$other"))"
	mv "/mnt/work/$name.$side.log" "/mnt/work/$name.try1.$side.log"
	pair_once "$name.retry" "$((port + 50))" "$3" "$4" "${@:5}"
	rc=$?
	for f in "$side.log" cmd; do
		mv "/mnt/work/$name.retry.$f" "/mnt/work/$name.$f"
	done
	return "$rc"
}

pair_once() {
	local name=$1 port=$2 limit=$3 server=$4
	shift 4
	local start=$SECONDS pid rc i=0 state log ipvar=IP_${server//-/_}
	if [ "$VM_NAME" = "$server" ]; then
		log=/mnt/work/$name.server.log
		echo "$* -p $port" >"/mnt/work/$name.cmd"
		timeout "$((limit + 60))" stdbuf -oL "$@" -p "$port" >"$log" 2>&1 &
		pid=$!
		state=listening
		until ss -Hltn "sport = :$port" | grep -q .; do
			i=$((i + 1))
			if ! kill -0 "$pid" 2>/dev/null; then state=died; break; fi
			[ "$i" -gt 600 ] && { state="not listening after 60 s"; break; }
			pause 0.1
		done
		set_marker "$name.ready" "$state"
		i=0
		while kill -0 "$pid" 2>/dev/null; do
			if [ -e "$SHARED/$name.client-done" ]; then
				i=$((i + 1))
				if [ "$i" -gt 100 ]; then
					echo "pair: client finished 20 s ago, stopping the server" >>"$log"
					kill "$pid" 2>/dev/null
				fi
			fi
			pause 0.2
		done
		wait "$pid"
		rc=$?
		PT_SECONDS=$((SECONDS - start))
		set_marker "$name.server-done" "$rc"
		echo "# $name server: rc=$rc after ${PT_SECONDS}s"
	else
		log=/mnt/work/$name.client.log
		echo "$* -p $port ${!ipvar}" >"/mnt/work/$name.cmd"
		if [ -n "$PEER_GONE" ]; then
			state="not asked: $PEER_GONE"
		else
			state=$(wait_marker "$name.ready" 300) ||
				{ state="no ready marker in 300 s"; PEER_GONE="the server of $name never answered"; }
		fi
		if [ "$state" = listening ]; then
			start=$SECONDS
			timeout "$limit" stdbuf -oL "$@" -p "$port" "${!ipvar}" >"$log" 2>&1
			rc=$?
		else
			echo "pair: server side of $name: $state; client not started" >"$log"
			rc=1
		fi
		PT_SECONDS=$((SECONDS - start))
		set_marker "$name.client-done" "$rc"
		wait_marker "$name.server-done" "$((limit + 30))" >/dev/null
		echo "# $name client: rc=$rc after ${PT_SECONDS}s"
	fi
	# The console copy must not look like a kernel warning to the harness
	# (perftest says "WARNING: BW peak won't be measured in this run").
	sed -e 's/^/#   /' -e 's/WARNING:/Warning:/g' "$log"
	return "$rc"
}

# positive VALUE: VALUE is a number > 0.
positive() { awk -v v="$1" 'BEGIN {exit !(v ~ /^[0-9.]+$/ && v + 0 > 0)}'; }

# perftest_pair NAME PORT LIMIT SERVER_VM COLUMN UNIT CMD...: a perftest pair;
# the client records perftest's number (COLUMN of the result table: 4 = BW
# average for *_bw, 5 = t_typical for *_lat) as note NAME_UNIT and checks it
# is > 0.
perftest_pair() {
	local name=$1 port=$2 limit=$3 server=$4 col=$5 unit=$6 v
	shift 6
	check "$name ($*): $([ "$VM_NAME" = "$server" ] && echo server || echo client) side" \
		pair "$name" "$port" "$limit" "$server" "$@"
	if [ "$VM_NAME" != "$server" ]; then
		v=$(pt_result "$name" "$col")
		note "${name}_$unit" "${v:-none}"
		check "$name: a result > 0 ($v $unit)" positive "$v"
	fi
}

# pingpong_pair NAME PORT LIMIT SERVER_VM CMD...: an ibv_*_pingpong pair
# (run with -c): both sides must exit 0 and print their throughput and
# latency lines, and the client must report no invalid data.
pingpong_pair() {
	local name=$1 port=$2 limit=$3 server=$4 side=client lat bw log
	shift 4
	[ "$VM_NAME" = "$server" ] && side=server
	log=/mnt/work/$name.$side.log
	check "$name ($*): $side side" pair "$name" "$port" "$limit" "$server" "$@"
	lat=$(awk '/ iters in .* usec\/iter/ {print $(NF-1)}' "$log")
	bw=$(awk '/ bytes in .* Mbit\/sec/ {print $(NF-1)}' "$log")
	note "${name}_${side}_usec/iter" "${lat:-none}"
	note "${name}_${side}_Mbit/s" "${bw:-none}"
	step "$name $side: completed every iteration (${lat:-?} usec/iter)" positive "$lat" || return 0
	[ "$side" = client ] && check "$name client: received data validated (-c)" \
		not grep -q 'invalid data' "$log"
	return 0
}
not() { ! "$@"; }

# verify_pair NAME PORT LIMIT SERVER_VM [ARGS...]: qemu-test/guest/rdma-verify.c
# (compiled here on first use) between the VMs on DEV with GIDX: RDMA WRITE,
# RDMA READ and SEND of known patterns, every byte checked on arrival.
verify_pair() {
	local name=$1 port=$2 limit=$3 server=$4 side=client
	shift 4
	[ "$VM_NAME" = "$server" ] && side=server
	if [ ! -x /tmp/rdma-verify ]; then
		step "rdma-verify is built" guest_tool rdma-verify || return 1
	fi
	check "$name (rdma-verify -d $DEV -g $GIDX $*): $side side" \
		pair "$name" "$port" "$limit" "$server" /tmp/rdma-verify -d "$DEV" -g "$GIDX" "$@"
	check "$name $side: all data verified" grep -q 'all data verified' "/mnt/work/$name.$side.log"
}

# device_counters NAME [faults|cm]: this VM's emulated NIC counters (asked on
# the host, CTL_SERVER=1) into /mnt/work/counters.json; checks that its RDMA
# engine sent and received frames, completed no work request in error and,
# on a fault-free wire, dropped none as malformed, for no QP or for a bad key.
# Retransmits and timeouts are reported only: a loaded host can deschedule a
# guest past the retransmit timer.  With "faults" (the device injects wire
# faults, ferroce-faults) malformed frames and frames for a QP destroyed
# before a late copy arrived are expected and reported only.  With "cm"
# (rdma_cm traffic) flushed work requests and frames for a QP destroyed at
# disconnect are reported only.  PEER_RETRIES, when set, is the number of
# retransmissions the peer made (rxe's completer_retry_err): frames for no
# QP are then late copies if either end retransmitted, and are reported.
# NO_QP_KNOWN, when set, is the number of frames for no QP that the scenario
# already measured and bounded around the test that sends them (ferroce-rxe's
# ibv_srq_pingpong); they are left out of the rx_no_qp check.
device_counters() {
	if host_ctl "$1" counters >/mnt/work/counters.json; then
		ok "device counters (control socket)"
	else
		not_ok "device counters (control socket): $(head -c 200 /mnt/work/counters.json)"
		return 1
	fi
	python3 - /mnt/work/counters.json >/tmp/counters.txt <<-'EOF'
		import json, sys
		d = json.load(open(sys.argv[1]))["data"]
		for k in ("tx_frames", "rx_frames", "acks_sent", "retransmits", "timeouts",
		          "rx_bad_header", "rx_bad_bth", "rx_bad_icrc", "rx_no_qp", "rx_bad_key",
		          "rx_bad_addr", "rx_ud_no_wqe", "cqes", "cqe_errors", "cqe_flushed",
		          "credit_waits", "credit_updates", "credit_keepalives"):
		    print(k, d[k])
	EOF
	sed 's/^/device_/' /tmp/counters.txt >>/mnt/work/notes
	sed 's/^/# device /' /tmp/counters.txt
	local tx rx bad k v
	counter() { awk -v k="$1" '$1 == k {print $2}' /tmp/counters.txt; }
	tx=$(counter tx_frames)
	rx=$(counter rx_frames)
	bad=$(awk '$1 ~ /^rx_bad_(header|bth|icrc)$/ {s += $2} END {print s + 0}' /tmp/counters.txt)
	check "device RDMA engine sent RoCE frames ($tx)" positive "$tx"
	check "device RDMA engine received RoCE frames ($rx)" positive "$rx"
	local quiet="rx_no_qp rx_bad_key rx_bad_addr"
	case ${2:-} in
	cm)
		# rdma_cm disconnects move QPs to ERR, which completes every
		# posted receive as a flush (counted in cqe_errors), and the
		# peer's last frames can reach a QP already destroyed.
		echo "# device cqe_errors $(counter cqe_errors), rx_no_qp $(counter rx_no_qp) (reported only)"
		quiet="rx_bad_key rx_bad_addr"
		;;
	*)
		# Flushes are what a QP in ERR does with its posted WQEs (an
		# rping disconnect leaves receives); any failure completes its
		# own WQE with another status first.
		local failed=$(($(counter cqe_errors) - $(counter cqe_flushed)))
		check "device completed no work request in error (cqe_errors $(counter cqe_errors), of which flushed $(counter cqe_flushed))" \
			test "$failed" = 0
		;;
	esac
	[ "${2:-}" = faults ] && return 0
	check "device dropped no frame as malformed (bad header/BTH/ICRC: $bad)" test "$bad" = 0
	# With PEER_RETRIES (the peer's retransmissions, when the peer can
	# say), frames for no QP are late copies if either end retransmitted:
	# reported, not failed.  Without any retransmission they fail.
	local resent
	resent=$(($(counter retransmits) + ${PEER_RETRIES:-0}))
	for k in $quiet; do
		v=$(counter "$k")
		if [ "$k" = rx_no_qp ] && [ "${NO_QP_KNOWN:-0}" != 0 ]; then
			echo "# device rx_no_qp $v, of which $NO_QP_KNOWN accounted for by the scenario"
			v=$((v - NO_QP_KNOWN))
		fi
		if [ "$k" = rx_no_qp ] && [ -n "${PEER_RETRIES:-}" ] && [ "$v" != 0 ] && [ "$resent" -gt 0 ]; then
			ok "device counter rx_no_qp: $v late copies after retransmissions (device $(counter retransmits), peer $PEER_RETRIES)"
			continue
		fi
		check "device counter $k is 0 ($v)" test "$v" = 0
	done
}
