#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# The data plane's benchmarks, each against a baseline in the same run:
#  1. aggregation rate: packets per second agg_xdp aggregates from one
#     sender, against an XDP program that only counts and drops (same veth,
#     same sender, same frame size), one that also copies the whole packet
#     (bpf/copy.bpf.c: what reading it costs) and a user-space recvmmsg
#     aggregator;
#  2. allreduce: time and bus bandwidth (nccl-tests: 2(n-1)/n x bytes /
#     time) of agg among 4 and 8 workers for 10 MB and 100 MB, with a
#     parameter server's plan (-s ps) and RAT's worker-rooted trees (-s
#     rat, no PS), each through the tools (agg-recv --in-place and
#     agg-send on every worker, files in /dev/shm) and through the library
#     in-process (bench/inproc.c), against Gloo's ring allreduce on the
#     same namespaces in its best configuration (no XDP program on the
#     bridge ports, so veth keeps TSO) when python3-torch is installed;
#     CPU seconds of the whole machine during each.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster dp
T=${BENCH_SECONDS:-3}
# The allreduce's links and plan: the largest packets veth takes.
AR_MTU=${BENCH_MTU:-65535}
AR_SEG=${BENCH_SEGMENT:-16368}
AR_SLOTS=${BENCH_SLOTS:-}	# default: agg-plan's
ITERS=${BENCH_ITERS:-3}
# The switch: a forwarding table in XDP on its ports (vcluster.sh)
AR_SWITCH=${BENCH_SWITCH:-xdp}
AR_WORKERS=${BENCH_WORKERS:-4 8}


# BENCH_DP_PARTS: which parts run (default both: "rate allreduce")
PARTS=" ${BENCH_DP_PARTS:-rate allreduce} "

# ---- 1. aggregation rate -------------------------------------------------
if [ "${PARTS#* rate }" != "$PARTS" ]; then
cat >"$tmp/rate.txt" <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10
w1  10.90.0.2   bw=10
EOF_HOSTS
VCLUSTER_MTU=65535 vcluster_up "$tmp/rate.txt" aggbr$$- || exit 1
# Resolve ARP first: the counting XDP_DROP program would drop the replies.
vcluster_run w0 ping -c 1 -W 2 -q 10.90.0.100 >/dev/null
stat_of() { agg-stat --node ps0 | awk -v k="$1" '$1 == k { print $2 }'; }
counted() {	# counted drop|copy: packets/s the baseline program $1.bpf.o counts
	ip -n "$(vcluster_ns ps0)" link set dev eth0 xdpdrv obj "$B/$1.bpf.o" sec xdp.frags || exit 1
	vcluster_run w0 blast "$tmp/plan.$seg" w0 ps0 "$T" >/dev/null
	# the counter map of the program attached there, not any map of that name
	c_prog=$(ip -n "$(vcluster_ns ps0)" -j link show dev eth0 | jq '.[0].xdp.prog.id')
	c_map=$(for m in $(bpftool -j prog show id "$c_prog" | jq '.map_ids[]'); do
		bpftool -j map show id "$m" | jq -r "select(.name == \"$1_count\") | .id"
	done)
	c_n=$(bpftool -j map dump id "$c_map" | jq '[.[0].formatted.values[].value] | add')
	ip -n "$(vcluster_ns ps0)" link set dev eth0 xdpdrv off
	awk -v n="$c_n" -v t="$T" 'BEGIN { printf "%.0f", n / t }'
}
rate_agg() {	# packets/s agg_xdp adds
	vcluster_run ps0 agg-load "$tmp/plan.$seg" || exit 1
	r_a0=$(stat_of added)
	vcluster_run w0 blast "$tmp/plan.$seg" w0 ps0 "$T" >/dev/null
	r_a1=$(stat_of added)
	vcluster_run ps0 agg-load --unload --node ps0
	awk -v n=$((r_a1 - r_a0)) -v t="$T" 'BEGIN { printf "%.0f", n / t }'
}
rate_uagg() {	# packets/s the user-space aggregator adds
	vcluster_run ps0 uagg "$tmp/plan.$seg" ps0 $((T + 1)) >"$tmp/uagg" &
	sleep 0.5
	vcluster_run w0 blast "$tmp/plan.$seg" w0 ps0 "$T" >/dev/null
	wait
	awk -v n="$(cat "$tmp/uagg")" -v t="$T" 'BEGIN { printf "%.0f", n / t }'
}
ROUNDS=${BENCH_ROUNDS:-3}
echo "aggregation rate: one sender (w0) to ps0 for $T s; w1 never sends, so"
echo "every packet is aggregated into a slot and none completes; the median"
echo "of $ROUNDS rounds, each measuring the four receivers in turn"
printf '%-8s %-22s %12s %8s\n' segment receiver packets/s vs_drop
segs="128 2048 16368"
case " $segs " in *" $AR_SEG "*) ;; *) segs="$segs $AR_SEG" ;; esac
for seg in $segs; do
	agg-plan -s ps --segment $seg --size 64M "$tmp/rate.txt" >"$tmp/plan.$seg"
	: >"$tmp/r.drop"; : >"$tmp/r.copy"; : >"$tmp/r.agg"; : >"$tmp/r.uagg"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		counted drop >>"$tmp/r.drop"; echo >>"$tmp/r.drop"
		counted copy >>"$tmp/r.copy"; echo >>"$tmp/r.copy"
		rate_agg >>"$tmp/r.agg"; echo >>"$tmp/r.agg"
		rate_uagg >>"$tmp/r.uagg"; echo >>"$tmp/r.uagg"
		r=$((r + 1))
	done
	d=$(med "$tmp/r.drop")
	eval "drop_pps_$seg=$d"
	for x in "drop xdp_drop" "copy xdp_copy (read it all)" "agg agg_xdp" \
		 "uagg user-space recvmmsg"; do
		awk -v s=$seg -v name="${x#* }" -v n="$(med "$tmp/r.${x%% *}")" -v d="$d" \
			'BEGIN { printf "%-8s %-22s %12.0f %8.2f\n", s, name, n, n / d }'
	done
done
vcluster_down
echo
fi

# ---- 2. allreduce --------------------------------------------------------
[ "${PARTS#* allreduce }" != "$PARTS" ] || exit 0
gloo=
PY=/usr/bin/python3	# Debian's, where python3-torch installs
if $PY -c 'import torch.distributed' 2>/dev/null; then gloo=yes; fi
echo "allreduce: median of $ITERS iterations after one warm-up; MTU $AR_MTU,"
echo "segment $AR_SEG, slots ${AR_SLOTS:-agg-plan's default}; plan ps: every worker"
echo "to a parameter server; plan rat: one tree rooted at each worker, no PS;"
echo "tools: agg-recv --in-place and agg-send started on every worker until"
echo "all results are in /dev/shm; lib: libagg's agg_allreduce in one process"
echo "per worker that opened its node once (bench/inproc.c); gloo: Gloo's ring"
echo "(torch.distributed) without XDP on the bridge ports; vs_gloo: time and"
echo "CPU-seconds over Gloo's; cpu_s: the whole machine's busy CPU time"
printf '%-7s %-6s %-5s %-6s %9s %10s %7s %8s %8s\n' workers size plan impl seconds busbw_GB/s cpu_s t/gloo cpu/gloo
# row N LABEL PLAN IMPL SECONDS CPU BYTES: one line, the ratios to gloo's
# (set before, for this size) when there is one
row() {
	awk -v n=$1 -v l=$2 -v p=$3 -v i=$4 -v t=$5 -v c=$6 -v b=$7 -v gt="${gt:-}" -v gc="${gc:-}" 'BEGIN {
		printf "%-7s %-6s %-5s %-6s %9.3f %10.3f %7.2f %8s %8s\n", n, l, p, i, t,
			2 * (n - 1) / n * b / t / 1e9, c, gt == "" ? "-" : sprintf("%.2f", t / gt),
			gc == "" ? "-" : sprintf("%.2f", c / gc) }'
}
for n in $AR_WORKERS; do
	{
		echo "ps0 10.90.0.100 bw=10 role=ps"
		i=1; while [ $i -le $n ]; do echo "w$i 10.90.0.$i bw=10"; i=$((i + 1)); done
	} >"$tmp/ar$n.txt"
	grep -v role=ps "$tmp/ar$n.txt" >"$tmp/ar$n-nops.txt"
	VCLUSTER_SWITCH=$AR_SWITCH VCLUSTER_MTU=$AR_MTU vcluster_up "$tmp/ar$n.txt" aggba$$- || exit 1
	ws=$(grep -v role=ps "$tmp/ar$n.txt" | awk '{ print $1 }')
	run=0
	for size in 10000000 100000000; do
		label=$((size / 1000000))MB
		gt= gc=
		if [ -n "$gloo" ]; then
			# Gloo's best here: no XDP on the ports, so veth keeps TSO
			vcluster_ports off || exit 1
			bench_gloo dp 10.90.0.1 $size $ITERS $ws
			gt=$gloo_t gc=$gloo_c
			vcluster_ports on || exit 1
		fi
		shm=$(mktemp -d /dev/shm/aggbench.XXXXXX)
		for w in $ws; do gradtool gen $((size / 4)) 2048 1 >"$shm/in.$w"; done
		for plan in ps rat; do
			if [ $plan = ps ]; then hosts=$tmp/ar$n.txt; else hosts=$tmp/ar$n-nops.txt; fi
			agg-plan -s $plan --segment $AR_SEG ${AR_SLOTS:+--slots $AR_SLOTS} --size $size \
				"$hosts" >"$tmp/p"
			nodes=$(awk '$1 == "node" { print $2 }' "$tmp/p")
			for h in $nodes; do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
			# tools: a run of its own, one warm-up
			: >"$tmp/times"; : >"$tmp/cpus"; it=0
			while [ $it -le "$ITERS" ]; do
				c0=$(cpu_busy); t0=$(now); pids=
				for w in $ws; do AGG_RUN=$run vcluster_run $w agg-recv --in-place --iter $it --timeout 60 "$shm/out.$w" & pids="$pids $!"; done
				for w in $ws; do AGG_RUN=$run vcluster_run $w agg-send --iter $it --timeout 30 "$shm/in.$w" & pids="$pids $!"; done
				ok=1; for p in $pids; do wait $p || ok=0; done
				t1=$(now); c1=$(cpu_busy)
				[ $ok = 1 ] || { echo "dp: agg allreduce ($plan, tools) failed"; exit 1; }
				if [ $it -gt 0 ]; then
					echo "$t1 - $t0" | bc -l >>"$tmp/times"
					echo "($c1 - $c0) / $hz" | bc -l >>"$tmp/cpus"
				fi
				it=$((it + 1))
			done
			row $n $label $plan tools "$(med "$tmp/times")" "$(med "$tmp/cpus")" $size
			# lib: a newer run, in-process
			run=$((run + 1)); pids=
			for w in $ws; do
				AGG_RUN=$run vcluster_run $w inproc $size "$ITERS" >"$tmp/ip.$w" 2>&1 & pids="$pids $!"
			done
			for p in $pids; do wait $p || { echo "dp: inproc ($plan) failed: $(cat "$tmp"/ip.*)"; exit 1; }; done
			cat "$tmp"/ip.* | cut -d' ' -f1 >"$tmp/it"; cat "$tmp"/ip.* | cut -d' ' -f2 >"$tmp/ic"
			row $n $label $plan lib "$(med "$tmp/it")" "$(med "$tmp/ic")" $size
			run=$((run + 1))
			for h in $nodes; do vcluster_run "$h" agg-load --unload --node "$h"; done
		done
		rm -rf "$shm"
		[ -z "$gt" ] || row $n $label - gloo "$gt" "$gc" $size
	done
	vcluster_down
done
[ -n "$gloo" ] || echo "(gloo: python3-torch is not installed; apt-get install python3-torch)"
