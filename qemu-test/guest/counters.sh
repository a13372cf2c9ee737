# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Introspection of a ferroce port through the standard interfaces: hardware
# counters (rdma statistic, sysfs hw_counters), driver details of restrack
# entries (rdma res -dd), fw_ver and the port speed.  Needs lib.sh, roce.sh
# and $DEV.

# The counters rxe users know, which ferroce reports under the same names.
RXE_COUNTERS="sent_pkts rcvd_pkts sent_bytes rcvd_bytes duplicate_request
out_of_seq_request rcvd_rnr_err send_rnr_err rcvd_seq_err ack_deferred
retry_exceeded_err retry_rnr_exceeded_err completer_retry_err send_err"

# hw_stats FILE: the port's counters as "name value" lines, from
# `rdma statistic show link DEV/1 -j`.
hw_stats() {
	rdma -j statistic show link "$DEV/1" >"$1.json" 2>&1 || return 1
	python3 - "$1.json" >"$1" <<-'EOF'
		import json, sys
		for entry in json.load(open(sys.argv[1])):
		    for k, v in entry.items():
		        if isinstance(v, int) and k != "port":
		            print(k, v)
	EOF
}

# hw_stat FILE NAME: the value of counter NAME in FILE (empty if absent).
hw_stat() { awk -v n="$2" '$1 == n {print $2}' "$1"; }

# sysfs_stats FILE: the same from sysfs ports/1/hw_counters.
sysfs_stats() {
	local f
	for f in "/sys/class/infiniband/$DEV/ports/1/hw_counters"/*; do
		[ "${f##*/}" = lifespan ] && continue
		echo "${f##*/} $(cat "$f")"
	done >"$1"
}

has_all_counters() {
	local n
	for n in $RXE_COUNTERS; do
		[ -n "$(hw_stat "$1" "$n")" ] || { echo "missing: $n" >&2; return 1; }
	done
}

# sysfs_agrees BEFORE RDMA AFTER: each counter of `rdma statistic` lies
# between its sysfs values read just before and just after.
sysfs_agrees() {
	awk 'FNR == 1 {f++} f == 1 {b[$1] = $2} f == 2 {r[$1] = $2} f == 3 {a[$1] = $2}
		END {
			n = 0
			for (k in r) {
				n++
				if (!(k in b) || b[k] > r[k] || r[k] > a[k]) {
					print "disagree: " k " sysfs " b[k] ".." a[k] " rdma " r[k] > "/dev/stderr"
					bad = 1
				}
			}
			exit bad || n == 0
		}' "$1" "$2" "$3"
}

# counters_names_and_sysfs: rdma statistic lists rxe's names; sysfs agrees.
counters_names_and_sysfs() {
	local s=/mnt/work/hw_stats
	check "rdma statistic show link $DEV/1" hw_stats "$s.now"
	sed 's/^/# /' "$s.now"
	check "rdma statistic: rxe's counter names (${RXE_COUNTERS//$'\n'/ })" has_all_counters "$s.now"
	sysfs_stats "$s.sysfs1"
	hw_stats "$s.rdma"
	sysfs_stats "$s.sysfs2"
	check "sysfs hw_counters agrees with rdma statistic ($(wc -l <"$s.rdma") counters)" \
		sysfs_agrees "$s.sysfs1" "$s.rdma" "$s.sysfs2"
}

# hw_delta BEFORE AFTER NAME: how much counter NAME grew between two
# hw_stats snapshots ("missing" if not in both).
hw_delta() {
	local x y
	x=$(hw_stat "$2" "$3")
	y=$(hw_stat "$1" "$3")
	if [ -n "$x" ] && [ -n "$y" ]; then echo $((x - y)); else echo missing; fi
}

# counters_delta TAG BEFORE AFTER MIN_PKTS MIN_BYTES: a workload that sent
# and received at least MIN_PKTS packets of MIN_BYTES in all shows in
# sent/rcvd_pkts/bytes; the error counters stay 0; retries are reported.
counters_delta() {
	local tag=$1 b=$2 a=$3 min=$4 minb=$5 n d
	delta() { hw_delta "$b" "$a" "$1"; }
	for n in sent_pkts rcvd_pkts; do
		d=$(delta $n)
		note "${tag}_${n}_delta" "$d"
		check "$tag: $n grew by $d >= $min" test "$d" -ge "$min"
	done
	for n in sent_bytes rcvd_bytes; do
		d=$(delta $n)
		note "${tag}_${n}_delta" "$d"
		check "$tag: $n grew by $d >= $minb" test "$d" -ge "$minb"
	done
	for n in send_err rcvd_icrc_err retry_exceeded_err retry_rnr_exceeded_err \
		rx_truncated rx_bad_header rx_bad_bth rx_bad_addr; do
		d=$(delta $n)
		check "$tag: $n stays 0 on a fault-free path (+$d)" test "$d" = 0
	done
	for n in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err \
		retransmits timeouts rcvd_rnr_err send_rnr_err ack_deferred cqe_errors; do
		note "${tag}_${n}_delta" "$(delta $n)"
	done
}

# res_driver_details PORT: the driver attributes of live objects in `rdma
# res show qp|cq|mr -dd`: a user QP, CQ and MR (an ibv_rc_pingpong server
# waiting for its client) and the kernel GSI QP.  iproute2 prints them as
# "drv_NAME VALUE" on indented lines after the object's: res_has joins
# them first.
res_has() {
	awk '/^[^ \t]/ {if (l != "") print l; l = $0; next} {l = l " " $0} END {if (l != "") print l}' \
		/mnt/work/res.txt | tr -s ' \t' '  ' | grep -E "$1" | grep -Eq "$2"
}
res_driver_details() {
	local port=$1 pid t
	ibv_rc_pingpong -d "$DEV" -g "$GIDX" -p "$port" >/mnt/work/res_pingpong.log 2>&1 &
	pid=$!
	wait_for 30 sh -c "ss -Hltn 'sport = :$port' | grep -q ."
	rdma res show qp link "$DEV/1" -dd >/mnt/work/res.qp.txt 2>&1
	for t in cq mr; do
		rdma res show "$t" dev "$DEV" -dd >"/mnt/work/res.$t.txt" 2>&1
	done
	sed 's/^/# /' /mnt/work/res.qp.txt /mnt/work/res.cq.txt /mnt/work/res.mr.txt
	cp /mnt/work/res.qp.txt /mnt/work/res.txt
	check "rdma res show qp -dd: a user QP with qpn, sq/rq depth and db_page" \
		res_has 'comm ibv_rc_pingpong' 'drv_qpn [0-9]+ drv_sq_depth [0-9]+ drv_rq_depth [0-9]+ drv_db_page [0-9]+'
	check "rdma res show qp -dd: the GSI QP with its SQ/RQ indices" \
		res_has 'lqpn 1 ' 'drv_sq_pi [0-9]+ drv_sq_ci [0-9]+ drv_rq_pi [0-9]+ drv_rq_ci [0-9]+'
	cp /mnt/work/res.cq.txt /mnt/work/res.txt
	check "rdma res show cq -dd: a user CQ with cqn, depth and EQ" \
		res_has 'comm ibv_rc_pingpong' 'drv_cqn [0-9]+ drv_cq_depth [0-9]+ drv_eqn [1-9][0-9]* drv_db_page'
	check "rdma res show cq -dd: a kernel CQ with its consumer index" \
		res_has 'comm \[' 'drv_cq_depth [0-9]+ drv_eqn [1-9][0-9]* drv_ci [0-9]+'
	cp /mnt/work/res.mr.txt /mnt/work/res.txt
	check "rdma res show mr -dd: a user MR with key, type and pages" \
		res_has 'comm ibv_rc_pingpong' 'drv_key 0x[0-9a-f]+ drv_mr_type user drv_pages [1-9][0-9]* drv_page_size [0-9]+'
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# devinfo_field NAME: the value of NAME in `ibv_devinfo -v` of $DEV.
devinfo_field() { ibv_devinfo -v -d "$DEV" | awk -v n="$1:" '$1 == n {$1 = ""; sub(/^ /, ""); print; exit}'; }

# fw_and_speed: fw_ver is the device's programming model version (as the
# driver printed it at probe), and the port's speed follows the netdev's
# (ib_get_eth_speed: 1 Gb/s = 2.5 Gbps x 1X when virtio-net reports no
# speed, 10 Gb/s = FDR10 x 1X, 25 Gb/s = EDR x 1X).
fw_and_speed() {
	local model want fw sysfs_fw s w
	model=$(dmesg | sed -n "s/.*$DEV: programming model \([0-9]*\.[0-9]*\),.*/\1/p" | tail -1)
	want="${model:-?}.0"
	fw=$(devinfo_field fw_ver)
	sysfs_fw=$(cat "/sys/class/infiniband/$DEV/fw_ver")
	note "${DEV}_fw_ver" "$fw"
	check "ibv_devinfo fw_ver $fw = programming model $want" test "$fw" = "$want"
	check "sysfs fw_ver $sysfs_fw = ibv_devinfo's" test "$sysfs_fw" = "$fw"
	note eth0_speed "$(cat /sys/class/net/eth0/speed 2>/dev/null)"
	s=$(devinfo_field active_speed)
	w=$(devinfo_field active_width)
	note "${DEV}_active_speed_default" "$s / $w"
	check "no netdev speed: active_speed 2.5 Gbps ($s), width 1X ($w)" \
		test "$s $w" = "2.5 Gbps (1) 1X (1)"
	check "ethtool -s eth0 speed 10000 duplex full" ethtool -s eth0 speed 10000 duplex full
	s=$(devinfo_field active_speed)
	w=$(devinfo_field active_width)
	check "eth0 at 10 Gb/s: active_speed 10.0 Gbps ($s), width 1X ($w)" \
		test "$s $w" = "10.0 Gbps (8) 1X (1)"
	check "ethtool -s eth0 speed 25000 duplex full" ethtool -s eth0 speed 25000 duplex full
	s=$(devinfo_field active_speed)
	w=$(devinfo_field active_width)
	check "eth0 at 25 Gb/s: active_speed 25.0 Gbps ($s), width 1X ($w)" \
		test "$s $w" = "25.0 Gbps (32) 1X (1)"
}

# counters_under_faults BEFORE AFTER: with faults injected on the wires, the
# transport's recovery shows in rdma statistic (retransmits, duplicate and
# out-of-sequence requests), and rdma statistic's retransmits are the
# device's own count (the control socket's, in /tmp/counters.txt from
# device_counters).
counters_under_faults() {
	local b=$1 a=$2 n sum=0 d dev missing=
	for n in retransmits timeouts completer_retry_err duplicate_request out_of_seq_request \
		rcvd_seq_err rcvd_icrc_err sent_pkts rcvd_pkts; do
		d=$(hw_delta "$b" "$a" $n)
		note "faults_${n}_delta" "$d"
		[ "$d" = missing ] && missing="$missing $n" && continue
		case $n in retransmits | duplicate_request | out_of_seq_request) sum=$((sum + d)) ;; esac
	done
	check "rdma statistic: both snapshots have every counter asked for${missing:+ (missing:$missing)}" \
		test -z "$missing"
	check "rdma statistic: recovery from the faults shows (retransmits + duplicate_request + out_of_seq_request = $sum)" \
		test "$sum" -gt 0
	dev=$(awk '$1 == "retransmits" {print $2}' /tmp/counters.txt)
	check "rdma statistic retransmits $(hw_stat "$a" retransmits) = the device's (control socket: ${dev:-none})" \
		test "$(hw_stat "$a" retransmits)" = "$dev"
}

# credits_agree: rdma statistic's end-to-end credit counters (device 1.9,
# keep-alives 1.10) are the device's own (the control socket's, in
# /tmp/counters.txt from device_counters, taken when this VM's verbs work is
# over).
credits_agree() {
	local s=/mnt/work/hw_stats.credits n mine dev
	check "rdma statistic show link $DEV/1 (credits)" hw_stats "$s" || return 1
	for n in credit_waits credit_updates credit_keepalives; do
		mine=$(hw_stat "$s" "$n")
		dev=$(awk -v k="$n" '$1 == k {print $2}' /tmp/counters.txt)
		note "$n" "${mine:-none}"
		check "rdma statistic $n ${mine:-none} = the device's (control socket: ${dev:-none})" \
			test -n "$mine" -a "$mine" = "$dev"
	done
}
