#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# libagg in-process against Gloo and against the command-line round, on
# the same namespaces (4 workers and a parameter server, MTU 65535), for
# 38 KB (one bucket of a small model), 4 MB and 100 MB of float32:
#  - inproc: bench/inproc.c, one process per worker that opens its node
#    once and times agg_allreduce of a buffer in memory;
#  - tools: the round as a program ran it before libagg: agg-recv and
#    agg-send started on every worker, gradient and result in /dev/shm;
#  - gloo: torch.distributed's gloo allreduce (bench/gloo.py), its best
#    configuration here (one thread, its own TCP connections set up
#    before the timing).
# Medians of ITERS timed calls; vs_gloo and vs_tools are time ratios
# (below 1: faster than the baseline).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster inproc
ITERS=${BENCH_ITERS:-9}
SEG=${BENCH_SEGMENT:-16368}
PY=/usr/bin/python3
gloo=; $PY -c 'import torch.distributed' 2>/dev/null && gloo=yes
n=4
{
	echo "ps0 10.90.0.100 bw=40 role=ps"
	i=1; while [ $i -le $n ]; do echo "w$i 10.90.0.$i bw=10"; i=$((i + 1)); done
} >"$tmp/hosts"
VCLUSTER_MTU=65535 vcluster_up "$tmp/hosts" aggbi$$- || exit 1
ws=$(vcluster_hosts | grep -v ps0)
echo "allreduce among $n workers: median of $ITERS calls; segment $SEG, MTU 65535"
printf '%-7s %-7s %10s %9s %8s %8s\n' size impl seconds cpu_s vs_gloo vs_tools
for size in 38000 4000000 100000000; do
	label=$(awk -v b=$size 'BEGIN { if (b < 1e6) printf "%dKB", b / 1000; else printf "%dMB", b / 1e6 }')
	agg-plan --segment $SEG --size $size "$tmp/hosts" >"$tmp/p"
	for h in $(vcluster_hosts); do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
	# tools: agg-recv and agg-send on every worker
	shm=$(mktemp -d /dev/shm/aggbench.XXXXXX)
	for w in $ws; do gradtool gen $((size / 4)) 2048 1 >"$shm/in.$w"; done
	: >"$tmp/tt"; it=0
	while [ $it -le "$ITERS" ]; do
		t0=$(now); pids=
		for w in $ws; do vcluster_run $w agg-recv --iter $it --timeout 60 "$shm/out.$w" & pids="$pids $!"; done
		for w in $ws; do vcluster_run $w agg-send --iter $it --timeout 30 "$shm/in.$w" & pids="$pids $!"; done
		for p in $pids; do wait $p || { echo "inproc: the tools' allreduce failed"; exit 1; }; done
		t1=$(now)
		[ $it = 0 ] || echo "$t1 - $t0" | bc -l >>"$tmp/tt"
		it=$((it + 1))
	done
	rm -rf "$shm"
	tools=$(med "$tmp/tt")
	# inproc: a new run for the library (the tools used run 0)
	pids=; for w in $ws; do
		AGG_RUN=1 vcluster_run $w inproc $size "$ITERS" >"$tmp/ip.$w" 2>&1 & pids="$pids $!"
	done
	for p in $pids; do wait $p || { echo "inproc: failed: $(cat "$tmp"/ip.*)"; exit 1; }; done
	cat "$tmp"/ip.* | grep -v '^[0-9.]* [0-9.]*$' && exit 1
	cat "$tmp"/ip.* | cut -d' ' -f1 >"$tmp/it"; cat "$tmp"/ip.* | cut -d' ' -f2 >"$tmp/ic"
	inproc=$(med "$tmp/it"); inproc_c=$(med "$tmp/ic")
	for h in $(vcluster_hosts); do vcluster_run "$h" agg-load --unload --node "$h"; done
	gloo_t= gloo_c=
	[ -z "$gloo" ] || bench_gloo inproc 10.90.0.1 $size "$ITERS" $ws
	g=$gloo_t gc=$gloo_c
	awk -v l=$label -v t=$inproc -v c=$inproc_c -v g="$g" -v o=$tools 'BEGIN {
		printf "%-7s %-7s %10.6f %9.3f %8s %8.2f\n", l, "inproc", t, c,
			g == "" ? "-" : sprintf("%.2f", t / g), t / o }'
	awk -v l=$label -v t=$tools 'BEGIN { printf "%-7s %-7s %10.6f %9s %8s %8.2f\n", l, "tools", t, "-", "-", 1 }'
	[ -z "$g" ] || awk -v l=$label -v t=$g -v c=$gc -v o=$tools 'BEGIN {
		printf "%-7s %-7s %10.6f %9.3f %8.2f %8.2f\n", l, "gloo", t, c, 1, t / o }'
done
[ -n "$gloo" ] || echo "(gloo: python3-torch is not installed; apt-get install python3-torch)"
