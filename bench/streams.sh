#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Streams (issue 18, AIACC-Training's multi-streamed communication) on the
# virtual cluster with RSS emulated (VCLUSTER_QUEUES: multi-queue veths,
# threaded NAPI, so each receive queue of a host is a kernel thread the
# scheduler puts on any CPU): one worker w1 sends SIZE bytes of float32 an
# iteration to a parameter server ps0, which aggregates them in XDP, with
# agg-send --streams 1, 2 and 4, in turns (ROUNDS rounds of ITERS
# iterations each), all in one run.  ps0's numbers come from its agg-stat
# counters (added: packets aggregated) and the CPU time of its receive
# threads (vcluster_napi: /proc/PID/stat utime + stime), which run its
# XDP program and nothing else:
#   pkts/s    packets ps0 aggregated per second of the iterations
#   pkts/cpu_s  per CPU-second of ps0's receive threads (its per-core rate)
#   queues    ps0's receive queues that took at least 5% of an iteration's
#             packets (ethtool -S: rx_queue_N_xdp_packets), the mean over
#             the iterations (each agg-send has new source ports, so one
#             stream lands on one queue, not always the same one)
#   top%      the busiest receive thread's share of ps0's CPU time
#   seconds   the median iteration
# and each as a ratio to 1 stream's.  Source ports hash to queues as RSS
# hashes them: two streams share a queue when their hashes do, so a run
# with 2 streams on 2 queues uses one of them about half the time.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster streams
QUEUES=${BENCH_STREAMS_QUEUES:-$(getconf _NPROCESSORS_ONLN)}
[ "$QUEUES" -ge 2 ] || QUEUES=2
SIZE=${BENCH_STREAMS_SIZE:-16000000}
ITERS=${BENCH_STREAMS_ITERS:-5}
ROUNDS=${BENCH_STREAMS_ROUNDS:-3}
COUNTS=${BENCH_STREAMS_COUNTS:-1 2 4}

cat >"$tmp/hosts.txt" <<'EOF_HOSTS'
ps0 10.90.0.100 bw=10 role=ps
w1  10.90.0.1   bw=10
EOF_HOSTS
VCLUSTER_QUEUES=$QUEUES vcluster_up "$tmp/hosts.txt" aggbq$$- || exit 1
agg-plan -s ps --size "$SIZE" "$tmp/hosts.txt" >"$tmp/plan"
for h in ps0 w1; do vcluster_run $h agg-load "$tmp/plan" || exit 1; done
vcluster_napi ps0 | cut -d" " -f1 >"$tmp/napi"
[ "$(wc -l <"$tmp/napi")" = "$QUEUES" ] ||
	{ echo "streams: ps0 has $(wc -l <"$tmp/napi") receive threads, not $QUEUES"; exit 1; }
gradtool gen $((SIZE / 4)) 128 1 >"$tmp/in"

added() { agg-stat --node ps0 | awk '$1 == "added" { print $2 }'; }
# packets each of ps0's receive queues took, one line
per_queue() {
	vcluster_run ps0 ethtool -S eth0 | awk '/rx_queue_[0-9]*_xdp_packets:/ { printf " %s", $2 } END { print "" }'
}
# "pid jiffies" of each of ps0's receive threads
napi_cpu() {
	while read -r p; do
		awk -v p="$p" '{ sub(/^.*\) /, ""); print p, $12 + $13 }' "/proc/$p/stat"
	done <"$tmp/napi"
}

it=0
r=0
while [ $r -lt "$ROUNDS" ]; do
	for s in $COUNTS; do
		k=0
		while [ $k -lt "$ITERS" ]; do
			a0=$(added); napi_cpu >"$tmp/c0"; q0=$(per_queue); t0=$(now)
			vcluster_run w1 agg-recv --in-place --iter $it --timeout 60 "$tmp/out" &
			rp=$!
			vcluster_run w1 agg-send --streams $s --iter $it --timeout 30 "$tmp/in" ||
				{ echo "streams: agg-send --streams $s failed"; exit 1; }
			wait $rp || { echo "streams: agg-recv failed"; exit 1; }
			t1=$(now); napi_cpu >"$tmp/c1"; a1=$(added); q1=$(per_queue)
			echo "$q0 |$q1" | awk '{ n = (NF - 1) / 2; for (i = 1; i <= n; i++) printf " %d", $(n + 1 + i) - $i; print "" }' >>"$tmp/q.$s"
			# iteration's seconds, packets, then each thread's jiffies
			join "$tmp/c0" "$tmp/c1" | awk -v t="$t1 - $t0" -v n=$((a1 - a0)) '
				BEGIN { split(t, x, " - "); printf "%.6f %d", x[1] - x[2], n }
				{ printf " %d", $3 - $2 } END { print "" }' >>"$tmp/s.$s"
			it=$((it + 1)) k=$((k + 1))
		done
	done
	r=$((r + 1))
done

echo "streams: w1 sends $SIZE bytes an iteration to ps0 (plan ps, segment 128,"
echo "MTU 1500), $QUEUES receive queues a host (VCLUSTER_QUEUES) on $(getconf _NPROCESSORS_ONLN) CPUs;"
echo "$ROUNDS rounds of $ITERS iterations per stream count, in turns; ps0's"
echo "aggregation: packets per second, per CPU-second of its receive threads,"
echo "receive queues that took 5% or more of an iteration's packets (mean),"
echo "the busiest receive thread's share of its CPU time"
printf '%-8s %9s %11s %11s %7s %6s %9s %11s\n' streams seconds pkts/s pkts/cpu_s queues top% vs1_pps vs1_per_cpu
for s in $COUNTS; do
	cut -d" " -f1 "$tmp/s.$s" >"$tmp/t.$s"
	q=$(awk '{ all = 0; for (i = 1; i <= NF; i++) all += $i
		   for (i = 1; i <= NF; i++) if ($i >= 0.05 * all) q++; n++ }
		END { printf "%.1f", n ? q / n : 0 }' "$tmp/q.$s")
	awk -v s="$s" -v hz="$hz" -v med="$(med "$tmp/t.$s")" -v q="$q" '
		{ secs += $1; pk += $2; for (i = 3; i <= NF; i++) { j[i] += $i; all += $i } }
		END {
			top = 0
			for (i in j) if (j[i] > top) top = j[i]
			printf "%s %.4f %.0f %.0f %d %.0f\n", s, med, pk / secs,
				all ? pk / (all / hz) : 0, q, all ? 100 * top / all : 0
		}' "$tmp/s.$s"
done >"$tmp/rows"
awk 'NR == 1 { p1 = $3; c1 = $4 }
	{ printf "%-8s %9.4f %11.0f %11.0f %7.1f %6.0f %9.2f %11.2f\n", $1, $2, $3, $4, $5, $6,
		$3 / p1, c1 ? $4 / c1 : 0 }' "$tmp/rows"
for h in ps0 w1; do vcluster_run $h agg-load --unload --node $h; done
