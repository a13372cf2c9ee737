# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Helpers for scenarios whose connections are set up by the RDMA connection
# manager (rdma_cm over ib_cm: REQ/REP/RTU MADs to the GSI QP 1), sourced
# after lib.sh and roce.sh.  Unlike perftest without -R, rdma_cm servers
# listen on an rdma_cm port, not a TCP socket, so readiness is asked of the
# kernel's resource tracking ("rdma resource show cm_id").

# cm_modules: rdma_cm and what it stands on are loaded and have their
# character device (load_rdma_core loads them when the kernel has them).
cm_modules() {
	local m
	for m in ib_cm iw_cm rdma_cm rdma_ucm; do
		step "module $m loaded" test -d "/sys/module/$m" || return 1
	done
	step "/dev/infiniband/rdma_cm exists" test -c /dev/infiniband/rdma_cm
}

# cm_listening PORT: a TCP socket or an rdma_cm ID listens on PORT.
cm_listening() {
	ss -Hltn "sport = :$1" | grep -q . && return 0
	rdma resource show cm_id 2>/dev/null | grep -Eq "LISTEN.* src-addr [^ ]*:$1( |$)"
}

# cm_expect NAME RC SIDR: this client's test NAME set up RC connections
# (REQ/REP/RTU) and SIDR exchanges through the CM; the host's check() sums
# /mnt/work/cm-expect over the VMs and asks the wire capture for as many.
cm_expect() { echo "$1 rc=$2 sidr=$3" >>/mnt/work/cm-expect; }

# mckey_pair NAME RECEIVER_VM GROUP: UD multicast through rdma_cm between
# this VM and its peer (PEER_VMS).  RECEIVER_VM joins GROUP (an IPv4
# multicast address: RoCE v2 MGID ::ffff:GROUP, MAC 01:00:5e:...) and waits
# for 20 datagrams of 500 bytes; once it receives, the other VM joins the
# same group and sends 40.  Both join as full members, so the sender's QP
# gets its own datagrams back through its device's loopback (and drops
# them: it posted no receive).  Too few datagrams leave the receiver
# waiting: its timeout fails the check.
#
# mckey's sender posts its SENDs unsignaled and, without waiting for them,
# leaves the group and destroys its QP.  rxe sends from a work queue, so in
# a slow TCG guest that teardown flushes the SENDs it has not sent yet (an
# rxe sender put 13 of 20, and fewer than 20 of 40, on the wire).  So the
# sender runs again, up to MCKEY_TRIES times, until the receiver says it
# is done; the notes count the runs.  Logs: /mnt/work/NAME.{server,client}.log,
# and NAME.tryN.client.log for the sender's earlier runs.
MCKEY_TRIES=4
mckey_pair() {
	local name=$1 rcv=$2 group=$3 pid rc r try
	# mck LIMIT SIDE COUNT [-s]: mckey, its command line in NAME.SIDE.cmd.
	mck() {
		local cmd=(mckey -m "$group" -b "${VM_IP%/*}" -C "$3" -S 500 "${@:4}")
		echo "${cmd[*]}" >"/mnt/work/$name.$2.cmd"
		timeout "$1" stdbuf -oL "${cmd[@]}"
	}
	if [ "$VM_NAME" = "$rcv" ]; then
		mck 180 server 20 >"/mnt/work/$name.server.log" 2>&1 &
		pid=$!
		wait_for 90 grep -q '^receiving data transfers' "/mnt/work/$name.server.log"
		set_marker "$name-ready" "$?"
		wait "$pid"
		rc=$?
		set_marker "$name-done" "$rc"
		sed "s/^/# $name: /" "/mnt/work/$name.server.log"
		check "$name receiver: joined $group, received the 20 datagrams (exit $rc)" \
			sh -c "[ $rc = 0 ] && grep -q '^data transfers complete' /mnt/work/$name.server.log"
	else
		r=$(wait_marker "$name-ready" 150)
		check "$name sender: the receiver joined $group (${r:-no answer})" test "$r" = 0
		try=0
		while :; do
			try=$((try + 1))
			mck 60 client 40 -s >"/mnt/work/$name.client.log" 2>&1
			rc=$?
			sed "s/^/# $name (run $try): /" "/mnt/work/$name.client.log"
			if [ "$rc" != 0 ] || ! grep -q '^data transfers complete' "/mnt/work/$name.client.log"; then
				break
			fi
			# The receiver needs a moment to take the datagrams in.
			r=$(wait_marker "$name-done" 15 2>/dev/null) && break
			[ "$try" -lt "$MCKEY_TRIES" ] || break
			mv "/mnt/work/$name.client.log" "/mnt/work/$name.try$try.client.log"
		done
		note "${name}_sender_runs" "$try"
		check "$name sender: joined $group, sent 40 datagrams to it (exit $rc, run $try of at most $MCKEY_TRIES)" \
			sh -c "[ $rc = 0 ] && grep -q '^data transfers complete' /mnt/work/$name.client.log"
	fi
}

# cm_pair NAME LIMIT SERVER_VM PORT SERVER_CMD... -- CLIENT_CMD...
# Like roce.sh's pair, for tools that take their whole command line (the
# server address is in CLIENT_CMD): the server runs SERVER_CMD and says it
# is ready once something listens on PORT (TCP or rdma_cm); the client, on
# the other VM, then runs CLIENT_CMD.  Logs are /mnt/work/NAME.{server,client}.log
# and the commands NAME.{server,client}.cmd; the exit status of this side's
# command is returned; PT_SECONDS is its run time.  Bounded: each command
# by LIMIT s, the wait for the server by CM_READY_WAIT s (default 300), a
# server still running CM_GRACE s (default 20) after its client ended is
# stopped, 2 s after a client that failed (a server whose client crashed
# waits for nobody; the listener race below costs one such wait per try).  Run again on both sides (and said so in the notes), up to
# twice, when perftest's clock calibration failed on either side (see
# roce.sh's pair), or when a perftest -R client's second connection (its
# data QP) was rejected with "invalid service ID" (REJ reason 8): perftest
# -R connects twice, and its server listens for the second connection only
# after it has set up the first one's resources -- on a slow TCG guest,
# sometimes after the client's REQ has arrived (the client then crashes in
# its clean-up).  qperf -cm1 has the same race between tests (the server
# listens anew for each test; its client says only "Event rejected", the
# capture shows REJ reason 8).
CM_READY_WAIT=300
CM_GRACE=20
CM_SCMD=()
CM_CCMD=()
cm_pair() {
	local name=$1 limit=$2 server=$3 port=$4 side=client rc f try
	shift 4
	CM_SCMD=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		CM_SCMD+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	CM_CCMD=("$@")
	[ "$VM_NAME" = "$server" ] && side=server
	cm_pair_once "$name" "$limit" "$server" "$port"
	rc=$?
	for try in 1 2; do
		cm_pair_retry "$name" "$try" "$server" || return "$rc"
		cm_pair_once "$name.retry$try" "$limit" "$server" "$port"
		rc=$?
		for f in "$side.log" "$side.cmd"; do
			mv "/mnt/work/$name.retry$try.$f" "/mnt/work/$name.$f"
		done
	done
	return "$rc"
}

# cm_pair_retry NAME TRY SERVER_VM: whether the run of NAME just ended
# should be run again (both sides agree through markers); keeps its log as
# NAME.tryTRY.
cm_pair_retry() {
	local name=$1 try=$2 server=$3 side=client other=server mine peer
	[ "$VM_NAME" = "$server" ] && { side=server; other=client; }
	mine=0
	grep -qs 'Correlation coefficient r^2' "/mnt/work/$name.$side.log" && mine="clock calibration"
	[ "$side" = client ] && [ "${CM_SCMD[0]}" != "${CM_SCMD[0]#ib_}" ] &&
		grep -qs 'RDMA_CM_EVENT_REJECTED; error: 8' "/mnt/work/$name.$side.log" &&
		mine="perftest -R listener race (REJ, invalid service ID)"
	[ "$side" = client ] && [ "${CM_SCMD[0]}" = qperf ] &&
		grep -qs 'unexpected event from RDMA CM: Event rejected' "/mnt/work/$name.$side.log" &&
		mine="qperf listener race (REJ)"
	set_marker "$name.$side-retry$try" "$mine"
	peer=$(wait_marker "$name.$other-retry$try" 60) || peer=0
	[ "$mine" != 0 ] || [ "$peer" != 0 ] || return 1
	# Noted by the side that saw the reason.
	[ "$mine" = 0 ] || note cm_pair_retry "$name, try $try: $mine ($side)"
	mv "/mnt/work/$name.$side.log" "/mnt/work/$name.try$try.$side.log"
}

cm_pair_once() {
	local name=$1 limit=$2 server=$3 port=$4 start=$SECONDS pid rc i=0 state log grace
	if [ "$VM_NAME" = "$server" ]; then
		log=/mnt/work/$name.server.log
		echo "${CM_SCMD[*]}" >"/mnt/work/$name.server.cmd"
		timeout "$limit" stdbuf -oL "${CM_SCMD[@]}" >"$log" 2>&1 &
		pid=$!
		state=listening
		until cm_listening "$port"; do
			i=$((i + 1))
			if ! kill -0 "$pid" 2>/dev/null; then state=died; break; fi
			[ "$i" -gt 300 ] && { state="not listening after 60 s"; break; }
			pause 0.2
		done
		set_marker "$name.ready" "$state"
		i=0
		while kill -0 "$pid" 2>/dev/null; do
			if [ -e "$SHARED/$name.client-done" ]; then
				i=$((i + 1))
				grace=$CM_GRACE
				[ "$(cat "$SHARED/$name.client-done")" = 0 ] || grace=2
				if [ "$i" -gt $((grace * 5)) ]; then
					echo "cm_pair: client finished $grace s ago, stopping the server" >>"$log"
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
		echo "${CM_CCMD[*]}" >"/mnt/work/$name.client.cmd"
		state=$(wait_marker "$name.ready" "$CM_READY_WAIT") ||
			state="no ready marker in $CM_READY_WAIT s"
		if [ "$state" = listening ]; then
			start=$SECONDS
			timeout "$limit" stdbuf -oL "${CM_CCMD[@]}" >"$log" 2>&1
			rc=$?
		else
			echo "cm_pair: server side of $name: $state; client not started" >"$log"
			rc=1
		fi
		PT_SECONDS=$((SECONDS - start))
		set_marker "$name.client-done" "$rc"
		wait_marker "$name.server-done" "$((limit + 30))" >/dev/null
		echo "# $name client: rc=$rc after ${PT_SECONDS}s"
	fi
	# The console (a slow serial port under TCG) gets long lines cut and
	# long logs (rping -v) as head and tail; the logs keep everything.
	local n
	n=$(wc -l <"$log")
	{
		if [ "$n" -gt 40 ]; then
			head -n 8 "$log"
			echo "[... $((n - 20)) lines, see $log ...]"
			tail -n 12 "$log"
		else
			cat "$log"
		fi
	} | sed -e 's/^\(.\{120\}\).*/\1.../' -e 's/^/#   /' -e 's/WARNING:/Warning:/g'
	return "$rc"
}

# rping_data_ok LOG COUNT SIZE PREFIX: LOG (rping -v) holds exactly COUNT
# lines "PREFIX<data>", ping i's data being what rping's client puts in its
# buffer ("rdma-ping-<i>: " then letters from 'A' + i mod 58 on, cycling
# through 'A'..'z', SIZE - 1 bytes in all).  The client prints the buffer
# the server wrote back (RDMA WRITE), the server the one it read (RDMA READ),
# so both directions are checked here, independently of rping's own -V.
rping_data_ok() {
	python3 - "$@" <<-'EOF'
		import sys
		log, count, size, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
		got = [l[len(prefix):].rstrip("\n") for l in open(log, errors="replace")
		       if l.startswith(prefix)]
		if len(got) != count:
		    sys.exit(f"{log}: {len(got)} lines '{prefix}...', expected {count}")
		start = 65
		for i, line in enumerate(got):
		    want = bytearray(f"rdma-ping-{i}: ".encode())
		    c = start
		    while len(want) < size - 1:
		        want.append(c)
		        c = 65 if c >= 122 else c + 1
		    start = 65 if start >= 122 else start + 1
		    want = want[:size - 1].decode()
		    if line != want:
		        at = next((k for k in range(min(len(line), len(want))) if line[k] != want[k]),
		                  min(len(line), len(want)))
		        sys.exit(f"{log}: ping {i} differs at byte {at} (length {len(line)}, expected "
		                 f"{len(want)}): {line[at:at + 20]!r} != {want[at:at + 20]!r}")
		print(f"{log}: {count} pings of {size - 1} bytes as expected")
	EOF
}

# rping_pair NAME SERVER_VM PORT COUNT SIZE: rping -C COUNT -S SIZE -v -V
# with SERVER_VM as the server (bound to its address); both sides exit 0
# and every ping's data is checked (rping_data_ok).
rping_pair() {
	local name=$1 server=$2 port=$3 count=$4 size=$5 side=client prefix="ping data: " ipvar
	ipvar=IP_${server//-/_}
	local -a common=(-a "${!ipvar}" -p "$port" -C "$count" -S "$size" -v -V)
	[ "$VM_NAME" = "$server" ] && { side=server; prefix="server ping data: "; }
	if step "$name (rping -C $count -S $size -v -V, server $server): $side side" \
		cm_pair "$name" 120 "$server" "$port" rping -s "${common[@]}" -- rping -c "${common[@]}"; then
		[ "$side" = client ] && cm_expect "$name" 1 0
		note "${name}_${side}_seconds" "$PT_SECONDS"
	fi
	check "$name $side: $count pings, every byte as the client wrote it" \
		rping_data_ok "/mnt/work/$name.$side.log" "$count" "$size" "$prefix"
	check "$name $side: rping's own check found no mismatch" \
		not grep -q 'data mismatch' "/mnt/work/$name.$side.log"
}
