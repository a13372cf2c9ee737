# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash disable=SC2034 # DESC/TIMEOUT/hooks are read by qemu-test/run
#
# rdma_cm between two VMs with the emulated ferroce NIC (kernel verbs, the
# GSI QP: ib_mad, ib_cm and rdma_cm attach to ferroce0), and between ferroce
# and rxe (vm3) for the CM handshake with another implementation.
#
# RDMA_CM_DEV=rxe runs the same guest steps with rxe on vm1 and vm2 and no
# vm3 (the ferroce <-> rxe rpings are reported as skipped): the reference
# the ferroce run is held to, and a way to check the scenario itself.
RDMA_CM_KIND=${RDMA_CM_DEV:-ferroce}
DESC="rdma_cm between two VMs ($RDMA_CM_KIND; RDMA_CM_DEV=rxe for rxe): rping both ways with data checked, ucmatose, udaddy, mckey (multicast), rdma_server/client, perftest -R, qperf -cm1; ferroce <-> rxe rping and mckey; CM REQ/REP/RTU and SIDR on the wire, dissected"
TIMEOUT=600
CAPTURE=1
CTL_SERVER=0
[ "$RDMA_CM_KIND" = ferroce ] && CTL_SERVER=1

setup() {
	segment lan
	if [ "$RDMA_CM_KIND" = ferroce ]; then
		vm vm1 ferroce lan 10.0.1.1/24 ferroce
		vm vm2 ferroce lan 10.0.1.2/24 ferroce
		vm vm3 rxe lan 10.0.1.3/24
	else
		# rxe, or an unknown kind that the guests refuse (rdma_up).
		vm vm1 "$RDMA_CM_KIND" lan 10.0.1.1/24
		vm vm2 "$RDMA_CM_KIND" lan 10.0.1.2/24
	fi
}

# cm_wire_check PCAP LABEL CM_MIN SIDR_MIN SRC...: the capture's RoCE v2
# frames, read twice.  qemu-test/guest/roce-wire.py: every ICRC right, each
# SRC sent frames, every MAD to QP 1 well formed, at least CM_MIN complete
# REQ/REP/RTU handshakes and SIDR_MIN SIDR exchanges.  tshark: every frame
# to UDP 4791 dissected as InfiniBand, none malformed, the CM MADs dissected
# as such (REQ with its service ID, REP and RTU with their communication
# IDs) and as many REQ, REP and RTU as roce-wire.py counted.
cm_wire_check() {
	local pcap=$1 label=$2 cm_min=$3 sidr_min=$4 out rc=0 ib mal a t py ts
	shift 4
	[ -s "$pcap" ] || { echo "$label: no capture $pcap"; return 1; }
	out=${pcap%.pcap}.txt
	"$FERROCE_TOP/scripts/in-root" -- python3 "$FERROCE_TOP/qemu-test/guest/roce-wire.py" \
		"$pcap" --show 5 --cm-min "$cm_min" --sidr-min "$sidr_min" "${@/#/--src=}" \
		>"$out" 2>&1 || rc=1
	sed "s/^/$label: /" "$out"
	[ "$rc" = 0 ] || echo "$label: roce-wire.py: FAILED (cm_min $cm_min, sidr_min $sidr_min)"
	t=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$pcap" -T fields -E occurrence=f \
		-e udp.dstport -e frame.protocols -e infiniband.mad.mgmtclass \
		-e infiniband.mad.attributeid -e infiniband.cm.req.serviceid -e infiniband.cm.rep \
		-e infiniband.cm.rtu.localcommid 2>/dev/null)
	ib=$(awk -F'\t' '$1 == 4791 && $2 ~ /:udp:infiniband/' <<<"$t" | wc -l)
	mal=$(grep -c '_ws\.malformed' <<<"$t")
	echo "$label: tshark: $ib frames to UDP 4791 dissected as InfiniBand, $mal malformed"
	[ "$ib" -gt 0 ] && [ "$mal" = 0 ] || rc=1
	# attribute: tshark's count, how many of those carry their CM fields.
	for a in REQ:0x0010:5 REP:0x0013:6 RTU:0x0014:7; do
		IFS=: read -r name id col <<<"$a"
		ts=$(awk -F'\t' -v id="$id" -v col="$col" '
			($3 == "0x07" || $3 == "7") && $4 == id {n++; if ($col != "") d++}
			END {print n + 0, d + 0}' <<<"$t")
		py=$(sed -n "s/^mads .*CM\.$name=\([0-9]*\).*/\1/p" "$out")
		echo "$label: tshark: CM $name: ${ts% *} MADs, ${ts#* } with their CM fields; roce-wire.py: ${py:-0}"
		[ "${ts% *}" -gt 0 ] && [ "${ts% *}" = "${ts#* }" ] && [ "${ts% *}" = "${py:-0}" ] || rc=1
	done
	return "$rc"
}

# The CM connections the clients made (cm_expect in qemu-test/guest/cm.sh).
cm_expected() {
	cat "$1"/vm*/cm-expect 2>/dev/null |
		awk -v k="$2" '{for (i = 2; i <= NF; i++) {split($i, f, "="); if (f[1] == k) s += f[2]}}
			END {print s + 0}'
}

check() {
	local dir=$1 rc=0 cm sidr v srcs=()
	cm=$(cm_expected "$dir" rc)
	sidr=$(cm_expected "$dir" sidr)
	for v in "${VMS[@]}"; do srcs+=("${VM_IPADDR[$v]%/*}"); done
	echo "wire: the clients report $cm RC connections and $sidr SIDR exchanges made through the CM"
	[ "$cm" -gt 0 ] || { check_failed "wire: no CM connection was reported by any client"; rc=1; }
	checked cm_wire_check "$dir/wire-lan.pcap" "bridge wire" "$cm" "$sidr" "${srcs[@]}" || rc=1
	checked cm_device_wire_checks "$dir" || rc=1
	# vm2 sent to vm1's group; with vm3 (rxe), vm3 sent to vm1's and vm1
	# to vm3's.
	checked mckey_wire_check "$dir" 10.0.1.2 230.0.1.1 01:00:5e:00:01:01 || rc=1
	if [ -n "${VM_ROLE[vm3]:-}" ]; then
		checked mckey_wire_check "$dir" 10.0.1.3 230.0.3.2 01:00:5e:00:03:02 || rc=1
		checked mckey_wire_check "$dir" 10.0.1.1 230.0.3.4 01:00:5e:00:03:04 || rc=1
	fi
	return "$rc"
}

# mckey_wire_check RUN_DIR SRC GROUP MAC: mckey's datagrams from SRC to
# GROUP crossed the bridge as RoCE v2 multicast: at least 20 UD SENDs with
# immediate (opcode 0x65) to QP 0xffffff, all to the group's MAC.
mckey_wire_check() {
	local out n macs
	out=$("$FERROCE_TOP/scripts/in-root" -- tshark -r "$1/wire-lan.pcap" \
		-Y "ip.src == $2 && ip.dst == $3 && udp.dstport == 4791" -T fields \
		-e eth.dst -e infiniband.bth.opcode -e infiniband.bth.destqp 2>/dev/null)
	n=$(awk '{q = tolower($3); sub(/^0x0*/, "", q)} $2 == 101 && (q == "ffffff" || $3 == 16777215)' <<<"$out" | wc -l)
	macs=$(awk '{print $1}' <<<"$out" | sort -u | tr '\n' ' ')
	echo "bridge wire: mckey: $n UD SEND-with-immediate frames $2 -> $3 to QP 0xffffff, destination MAC(s) ${macs:-none}"
	[ "$n" -ge 20 ] && [ "$macs" = "$4 " ]
}

# cm_device_wire_checks RUN_DIR: each ferroce device's own capture holds a
# handshake it took part in (cm_wire_check, from its own address).
cm_device_wire_checks() {
	local v rc=0
	for v in "${VMS[@]}"; do
		[ -n "${VM_FERROCE[$v]}" ] || continue
		cm_wire_check "$1/$v/wire.pcap" "$v device wire" 1 0 "${VM_IPADDR[$v]%/*}" || rc=1
	done
	return "$rc"
}

report() {
	local dir=$1 t log
	echo "rdma_cm over $RDMA_CM_KIND (client side of each test):"
	for log in "$dir"/vm*/*.client.log; do
		[ -f "$log" ] || continue
		t=$(basename "$log" .client.log)
		case $t in *.try[0-9]) continue ;; esac
		echo "== $t, client $(basename "$(dirname "$log")"): $(head -c 300 "${log%.log}.cmd" 2>/dev/null)"
		grep -E '^(return status|rdma_client: end|data transfers complete)' "$log"
		sed -n '/^ *#bytes/,/^-\{20,\}/p' "$log"
		grep -E '^[a-z_]+:$|^ +(bw|latency) +=' "$log"
		grep -c '^ping data: ' "$log" | sed 's/^/ping data lines: /;/: 0$/d'
	done
	cat "$dir"/vm*/notes 2>/dev/null
}
