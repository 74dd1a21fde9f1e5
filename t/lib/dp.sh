# SPDX-License-Identifier: GPL-2.0-only
# Data-plane test helpers on top of vcluster.sh.
#
#   dp_setup HOSTS PLANFILE      virtual cluster for HOSTS, PLANFILE loaded
#                                on every host (pins under $AGG_PIN_DIR)
#   dp_workers                   the plan's worker names
#   dp_inputs ITER [nan]         one random gradient per worker: in.ITER.NAME
#   dp_allreduce ITER            agg-recv on every worker, then agg-send;
#                                results in out.ITER.NAME; fails if any fails
#   dp_check ITER                every result bit-identical, within 1e-6 of
#                                the float64 sum (gradtool check)
#   DP_OP=max|min                the op of dp_allreduce and dp_check
#   DP_JOB=J                     --job J for the tools (several jobs loaded)
#   dp_unload                    agg-load --unload on every host
#   dp_stat NODE COUNTER         NODE's COUNTER (agg-stat) now
#   dp_udp_in NODE               UDP datagrams NODE's stack delivered to a
#                                socket (the kernel's Udp InDatagrams): on
#                                a worker, the fetch signals agg-recv got

AGG_PIN_DIR=/sys/fs/bpf/aggt-$$
PATH=${AGG_BUILD:-build}/t:$PATH
export AGG_PIN_DIR

dp_plan_field() {
	awk -v k="$1=" 'NR == 1 { for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }' "$DP_PLAN"
}

dp_stat() {
	agg-stat ${DP_JOB:+--job $DP_JOB} --node "$1" | awk -v k="$2" '$1 == k { print $2 }'
}

dp_udp_in() {
	vcluster_run "$1" cat /proc/net/snmp |
		awk '$1 == "Udp:" { if (h) { print $2; exit } h = 1 }'
}

dp_workers() {
	awk '$1 == "node" && !/ role=ps/ { print $2 }' "$DP_PLAN"
}

dp_setup() {
	DP_PLAN=$2
	command -v test_atexit >/dev/null 2>&1 && test_atexit 'rm -rf "$AGG_PIN_DIR"'
	vcluster_up "$1" "${3:-aggdp$$-}" || return 1
	for dp_h in $(vcluster_hosts); do
		# ARP on a machine loaded by other tests: 10 s, not 3
		vcluster_run "$dp_h" agg-load --arp-timeout 10000 "$DP_PLAN" ||
			{ echo "agg-load failed on $dp_h" >&2; return 1; }
	done
	DP_N=$(( $(dp_plan_field size) / 4 ))
	DP_SEG=$(dp_plan_field segment)
}

dp_inputs() {
	for dp_w in $(dp_workers); do
		gradtool gen "$DP_N" "$DP_SEG" "$(printf '%s%s' "$1" "$dp_w" | cksum | cut -d" " -f1)" $2 \
			>"in.$1.$dp_w" || return 1
	done
}

dp_allreduce() {
	dp_pids=
	for dp_w in $(dp_workers); do
		vcluster_run "$dp_w" agg-recv ${DP_JOB:+--job $DP_JOB} --iter "$1" --timeout "${DP_TIMEOUT:-30}" \
			"out.$1.$dp_w" 2>"recv.$1.$dp_w" &
		dp_pids="$dp_pids $!"
	done
	for dp_w in $(dp_workers); do
		vcluster_run "$dp_w" agg-send ${DP_JOB:+--job $DP_JOB} --iter "$1" --timeout "${DP_TIMEOUT:-30}" ${DP_OP:+--op $DP_OP} \
			${DP_SEND_ARGS:-} "in.$1.$dp_w" 2>"send.$1.$dp_w" &
		dp_pids="$dp_pids $!"
	done
	dp_rc=0
	for dp_p in $dp_pids; do wait "$dp_p" || dp_rc=1; done
	[ $dp_rc = 0 ] || cat recv.$1.* send.$1.* >&2
	return $dp_rc
}

dp_check() {
	dp_first=
	dp_ins=
	for dp_w in $(dp_workers); do dp_ins="$dp_ins in.$1.$dp_w"; done
	for dp_w in $(dp_workers); do
		if [ -z "$dp_first" ]; then
			dp_first=out.$1.$dp_w
			gradtool check${DP_OP:+-$DP_OP} "$DP_SEG" "$dp_first" $dp_ins || return 1
		else
			cmp "$dp_first" "out.$1.$dp_w" || return 1
		fi
	done
}

dp_unload() {
	for dp_h in $(vcluster_hosts); do
		vcluster_run "$dp_h" agg-load --unload ${DP_JOB:+--job $DP_JOB} --node "$dp_h" || return 1
	done
}
