#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# ALEPH's experiment (Sec. 6.3): its 9-host testbed (a 40 Gbit/s PS, one
# 30, two 20 and five 10 Gbit/s workers) as namespaces shaped to bw= x
# VCLUSTER_BW_SCALE (0.05: 2 Gbit/s down to 0.5), MTU 9000, segment 2048,
# 100 MB of float32 gradients; each switch port's queue holds QUEUE ms of
# its link's rate (a switch's buffer, in bytes), 50 ms and then 5 ms.
# Rows: agg with the ALEPH, PS and RAT plans (agg-recv and agg-send on
# every worker, files in /dev/shm) and Gloo's ring (torch.distributed) on
# the same shaped namespaces; model: agg-plan --eval's time at the shaped
# rates; seconds: the median of iterations 2..ITERS; resent: packets
# agg-send sent again, per iteration, and as a share of all it sent;
# cpu_s: the whole machine's busy CPU time per iteration.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster shaped
ITERS=${BENCH_SHAPED_ITERS:-4}
SIZE=${BENCH_SHAPED_SIZE:-100000000}
SEG=2048
SCALE=${VCLUSTER_BW_SCALE:-0.05}
QUEUES=${BENCH_SHAPED_QUEUES:-50 5}
PLANS=${BENCH_SHAPED_PLANS:-aleph ps rat}
PY=/usr/bin/python3
gloo=
if $PY -c 'import torch.distributed' 2>/dev/null; then gloo=yes; fi

cp "$AGG_SRC/t/lib/aleph-testbed.hosts" "$tmp/hosts.txt"
# The model at the shaped rates: the same hosts with bw= scaled.
vcluster_scaled_hosts "$tmp/hosts.txt" >"$tmp/scaled.txt"
agg-plan --eval -j --size "$SIZE" "$tmp/scaled.txt" >"$tmp/eval.json"
model() { jq -r --arg s "$1" '.[] | select(.scheme == $s) | .time_s' "$tmp/eval.json"; }
ws=$(awk '!/^#/ && NF >= 2 && !/role=ps/ { print $1 }' "$tmp/hosts.txt")
sent_sum() {	# sent + sent_local, resent summed over the nodes
	agg-stat --all -j | jq -r '[([.[].sent // 0] | add) + ([.[].sent_local // 0] | add), ([.[].resent // 0] | add)] | @tsv'
}

echo "ALEPH's testbed: 9 hosts shaped to bw= x $SCALE Gbit/s, MTU 9000, segment $SEG,"
echo "$((SIZE / 1000000)) MB; median of iterations 2..$ITERS; queue: each port's buffer in ms"
echo "of its rate; model: agg-plan --eval at the shaped rates; resent: packets sent"
echo "again per iteration (and % of all sent); cpu_s: busy CPU-seconds per iteration"
printf '%-6s %-6s %8s %8s %8s %9s %8s %7s\n' queue plan seconds model ratio resent/it resent% cpu_s
for q in $QUEUES; do
	VCLUSTER_MTU=9000 vcluster_up "$tmp/hosts.txt" aggbs$$- >/dev/null || exit 1
	VCLUSTER_QUEUE_MS=$q vcluster_shape || exit 1
	run=0
	for plan in $PLANS; do
		agg-plan -s $plan --seed 1 --segment $SEG --size "$SIZE" "$tmp/hosts.txt" >"$tmp/p"
		nodes=$(awk '$1 == "node" { print $2 }' "$tmp/p")
		for h in $nodes; do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
		shm=$(mktemp -d /dev/shm/aggbench.XXXXXX)
		for w in $ws; do gradtool gen $((SIZE / 4)) $SEG 1 >"$shm/in.$w"; done
		: >"$tmp/times"; : >"$tmp/cpus"; : >"$tmp/res"; it=1
		while [ $it -le "$ITERS" ]; do
			s0=$(sent_sum); c0=$(cpu_busy); t0=$(now); pids=
			for w in $ws; do AGG_RUN=$run vcluster_run $w agg-recv --in-place --iter $it --timeout 120 "$shm/out.$w" & pids="$pids $!"; done
			for w in $ws; do AGG_RUN=$run vcluster_run $w agg-send --iter $it --timeout 60 "$shm/in.$w" & pids="$pids $!"; done
			ok=1; for p in $pids; do wait $p || ok=0; done
			t1=$(now); c1=$(cpu_busy); s1=$(sent_sum)
			[ $ok = 1 ] || { echo "shaped: agg allreduce ($plan, queue $q ms) failed"; exit 1; }
			if [ $it -gt 1 ]; then
				echo "$t1 - $t0" | bc -l >>"$tmp/times"
				echo "($c1 - $c0) / $hz" | bc -l >>"$tmp/cpus"
				printf '%s\t%s\n' "$s0" "$s1" >>"$tmp/res"
			fi
			it=$((it + 1))
		done
		for w in $ws; do cmp -s "$shm/out.$(echo $ws | cut -d' ' -f1)" "$shm/out.$w" ||
			{ echo "shaped: results differ between workers ($plan)"; exit 1; }; done
		rm -rf "$shm"
		for h in $nodes; do vcluster_run "$h" agg-load --unload --node "$h"; done
		run=$((run + 1))
		awk -F'\t' '{ sent += $3 - $1; res += $4 - $2 } END { printf "%d %.2f\n", res / NR, sent ? 100 * res / sent : 0 }' \
			"$tmp/res" >"$tmp/r"
		read -r rs rp <"$tmp/r"
		awk -v q=$q -v p=$plan -v t="$(med "$tmp/times")" -v m="$(model $plan)" -v rs=$rs -v rp=$rp \
			-v c="$(med "$tmp/cpus")" 'BEGIN { printf "%-6s %-6s %8.2f %8.2f %8.2f %9d %8.2f %7.2f\n",
				q, p, t, m, t / m, rs, rp, c }'
	done
	if [ -n "$gloo" ]; then
		vcluster_ports off || exit 1
		bench_gloo shaped 10.90.0.1 "$SIZE" "$ITERS" $ws
		[ -z "$gloo_t" ] || awk -v q=$q -v t="$gloo_t" -v m="$(model ring)" -v c="$gloo_c" \
			'BEGIN { printf "%-6s %-6s %8.2f %8.2f %8.2f %9s %8s %7.2f\n", q, "gloo", t, m, t / m, "-", "-", c }'
	fi
	vcluster_down
done
[ -n "$gloo" ] || echo "(gloo: python3-torch is not installed; apt-get install python3-torch)"
