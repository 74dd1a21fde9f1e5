#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# The data plane's benchmarks, each against a baseline in the same run:
#  1. aggregation rate: packets per second agg_xdp aggregates from one
#     sender, against an XDP program that only counts and drops (same veth,
#     same sender, same frame size), one that also copies the whole packet
#     (bpf/copy.bpf.c: what reading it costs) and a user-space recvmmsg
#     aggregator;
#  2. allreduce: time and bus bandwidth (nccl-tests: 2(n-1)/n x bytes /
#     time) of agg among 4 and 8 workers for 10 MB and 100 MB, against
#     Gloo's ring allreduce on the same namespaces when python3-torch is
#     installed; CPU seconds of the whole machine during each; and the
#     floor: the allreduce's packets (n x size up, n x size down, in full
#     segments) at part 1's XDP_DROP rate, spread over every core, which
#     is what moving those bytes through these veths costs before any
#     aggregation, quantization or file.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster dp
T=${BENCH_SECONDS:-3}
# The allreduce's links and plan: the largest packets veth takes.
AR_MTU=${BENCH_MTU:-65535}
AR_SEG=${BENCH_SEGMENT:-16368}
AR_SLOTS=${BENCH_SLOTS:-}	# default: agg-plan's
ITERS=${BENCH_ITERS:-3}


# ---- 1. aggregation rate -------------------------------------------------
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

# ---- 2. allreduce --------------------------------------------------------
gloo=
PY=/usr/bin/python3	# Debian's, where python3-torch installs
if $PY -c 'import torch.distributed' 2>/dev/null; then gloo=yes; fi
echo "allreduce: median of $ITERS iterations after one warm-up; MTU $AR_MTU,"
echo "segment $AR_SEG, slots ${AR_SLOTS:-$(agg-plan --segment $AR_SEG "$tmp/rate.txt" | sed -n "1s/.* slots=\([0-9]*\) .*/\1/p")}; agg's time is the wall time of starting agg-recv and"
echo "agg-send on every worker until all results are written (/dev/shm);"
echo "send_s: the slowest agg-send's own time from its input in memory to"
echo "every result on its node (no process start, no file I/O), as Gloo's is;"
echo "agg: agg-recv replaces FILE through a temporary file (the default),"
echo "agg-ip: agg-recv --in-place rewrites FILE's own pages;"
echo "floor: the allreduce's packets at the XDP_DROP rate of segment $AR_SEG"
echo "above, on all $(nproc) cores: moving the bytes, no aggregation, no files"
printf '%-8s %-6s %-6s %9s %10s %9s %9s %10s\n' workers size impl seconds busbw_GB/s cpu_s send_s send_busbw
for n in 4 8; do
	{
		echo "ps0 10.90.0.100 bw=40 role=ps"
		i=1; while [ $i -le $n ]; do echo "w$i 10.90.0.$i bw=10"; i=$((i + 1)); done
	} >"$tmp/ar$n.txt"
	VCLUSTER_MTU=$AR_MTU vcluster_up "$tmp/ar$n.txt" aggba$$- || exit 1
	for size in 10000000 100000000; do
		label=$((size / 1000000))MB
		agg-plan --segment $AR_SEG ${AR_SLOTS:+--slots $AR_SLOTS} --size $size "$tmp/ar$n.txt" >"$tmp/p"
		for h in $(vcluster_hosts); do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
		ws=$(awk '$1 == "node" && !/ role=ps/ { print $2 }' "$tmp/p")
		shm=$(mktemp -d /dev/shm/aggbench.XXXXXX)
		for w in $ws; do gradtool gen $((size / 4)) 2048 1 >"$shm/in.$w"; done
		# agg: agg-recv replaces its FILE through a temporary file (the
		# default); agg-ip: agg-recv --in-place rewrites it
		it=0
		for impl in agg agg-ip; do
			: >"$tmp/times"; : >"$tmp/cpus"; : >"$tmp/sends"
			ropt=; [ $impl = agg-ip ] && ropt=--in-place
			last=$((it + ITERS))
			while [ $it -le $last ]; do
				c0=$(cpu_busy); t0=$(now); pids=
				for w in $ws; do vcluster_run $w agg-recv $ropt --iter $it --timeout 60 "$shm/out.$w" & pids="$pids $!"; done
				for w in $ws; do vcluster_run $w agg-send -j --iter $it --timeout 30 "$shm/in.$w" >"$shm/s.$w" & pids="$pids $!"; done
				ok=1; for p in $pids; do wait $p || ok=0; done
				t1=$(now); c1=$(cpu_busy)
				[ $ok = 1 ] || { echo "dp: agg allreduce failed"; exit 1; }
				if [ $it -gt $((last - ITERS)) ]; then
					cat "$shm"/s.* | jq -s "map(.seconds) | max" >>"$tmp/sends"
					echo "$t1 - $t0" | bc -l >>"$tmp/times"
					echo "($c1 - $c0) / $hz" | bc -l >>"$tmp/cpus"
				fi
				it=$((it + 1))
			done
			t=$(med "$tmp/times"); c=$(med "$tmp/cpus"); s=$(med "$tmp/sends")
			awk -v n=$n -v l=$label -v i=$impl -v t=$t -v b=$size -v c=$c -v s=$s \
				'BEGIN { printf "%-8s %-6s %-6s %9.3f %10.3f %9.2f %9.3f %10.3f\n", n, l, i, t, 2 * (n - 1) / n * b / t / 1e9, c, s, 2 * (n - 1) / n * b / s / 1e9 }'
		done
		rm -rf "$shm"
		eval "d=\$drop_pps_$AR_SEG"
		awk -v n=$n -v l=$label -v b=$size -v seg=$AR_SEG -v d="$d" -v ncpu="$(nproc)" 'BEGIN {
			pk = 2 * n * int((b / 4 + seg - 1) / seg); c = pk / d; t = c / ncpu
			printf "%-8s %-6s %-6s %9.3f %10.3f %9.2f\n", n, l, "floor", t, 2 * (n - 1) / n * b / t / 1e9, c }'
		for h in $(vcluster_hosts); do vcluster_run "$h" agg-load --unload --node "$h"; done
		if [ -n "$gloo" ]; then
			bench_gloo dp 10.90.0.1 $size $ITERS $ws
			[ -z "$gloo_t" ] || awk -v n=$n -v l=$label -v t=$gloo_t -v b=$size -v c=$gloo_c \
				'BEGIN { printf "%-8s %-6s %-6s %9.3f %10.3f %9.2f\n", n, l, "gloo", t, 2 * (n - 1) / n * b / t / 1e9, c }'
		fi
	done
	vcluster_down
done
[ -n "$gloo" ] || echo "(gloo: python3-torch is not installed; apt-get install python3-torch)"
