#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# make demo: the main job on a virtual cluster shaped like ALEPH's testbed
# (Sec. 6.3: one 30, two 20 and five 10 Gbit/s workers, a 40 Gbit/s PS),
# one network namespace per host on a bridge in its own namespace.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
AGG_SRC=$(cd "$here/.." && pwd)
AGG_BUILD=${AGG_BUILD:-$AGG_SRC/build}
PATH=$AGG_BUILD:$PATH
export AGG_BUILD PATH

if [ "$(id -u)" != 0 ]; then
	echo "demo: the virtual cluster needs root (network namespaces, XDP)" >&2
	exit 3
fi
. "$AGG_SRC/t/lib/vcluster.sh"

work=$(mktemp -d)
# agg-plan derives the job token from a site secret: the demo's own, unless
# one is given (agg-plan(1), Token).
if [ -z "${AGG_SECRET_FILE:-}" ]; then
	AGG_SECRET_FILE=$work/secret
	(umask 077 && head -c 32 /dev/urandom >"$AGG_SECRET_FILE")
	export AGG_SECRET_FILE
fi
cleanup() { vcluster_down; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

cp "$AGG_SRC/t/lib/aleph-testbed.hosts" "$work/hosts.txt"

echo "== hosts (ALEPH Sec. 6.3 testbed)"
grep -v '^#' "$work/hosts.txt"
echo
echo "== agg-plan --eval --size 100M: the schemes on these hosts"
agg-plan --eval --size 100M "$work/hosts.txt"
echo
echo "== agg-plan: the ALEPH plan (M-WCHA, seed 1)"
agg-plan --seed 1 "$work/hosts.txt" | tee "$work/plan.txt"
echo
echo "== virtual cluster: $(grep -c '^node' "$work/plan.txt") namespaces on a bridge, XDP on every port"
VCLUSTER_MTU=${DEMO_MTU:-9000} vcluster_up "$work/hosts.txt" aggdemo-
vcluster_shape
for h in $(vcluster_hosts); do
	printf '%s: %s Mbit/s each way (bw= x %s)\n' "$h" "$(vcluster_rate "$h")" \
		"${VCLUSTER_BW_SCALE:-0.05}"
done
echo "(each switch port buffers ${VCLUSTER_QUEUE_MS:-50} ms of its link's rate)"
echo
echo "== every child reaches its parent in the plan"
fails=0
grep '^edge' "$work/plan.txt" | while read -r _ tree child parent; do
	addr=$(awk -v n="$parent" '$1 == "node" && $2 == n { print $3 }' "$work/plan.txt")
	if vcluster_run "$child" ping -c 1 -W 1 -q "$addr" >/dev/null 2>&1; then
		echo "tree $tree: $child -> $parent ($addr) ok"
	else
		echo "tree $tree: $child -> $parent ($addr) UNREACHABLE"
		exit 1
	fi
done || fails=1
[ $fails = 0 ] || { echo "demo: some edges unreachable" >&2; exit 1; }
echo

SIZE=${DEMO_SIZE:-100000000}
SEGMENT=${DEMO_SEGMENT:-2048}	# values per packet: jumbo frames (MTU 9000)
ITERS=${DEMO_ITERS:-3}
PATH=$AGG_BUILD/t:$PATH
export AGG_PIN_DIR=/sys/fs/bpf/aggdemo-$$
cleanup() { vcluster_down; rm -rf "$work" "$AGG_PIN_DIR"; }
workers=$(awk '!/^#/ && !/ role=ps/ && NF >= 2 { print $1 }' "$work/hosts.txt")
n=$(echo $workers | wc -w)
values=$((SIZE / 4))
# The model at the shaped rates: agg-plan --eval on the hosts with bw=
# scaled as the links are.
vcluster_scaled_hosts "$work/hosts.txt" >"$work/scaled.txt"
agg-plan --eval -j --size "$SIZE" "$work/scaled.txt" >"$work/eval.json"

# run_plan SCHEME: load agg-plan -s SCHEME's plan on every host, run ITERS
# allreduce iterations checked bit for bit and against a float64 sum, print
# a row each and the counters, unload; $median: iterations 2.. (the first
# also pays for the page cache and ARP).
run_plan() {
	scheme=$1
	agg-plan -s "$scheme" --seed 1 --size "$SIZE" --segment "$SEGMENT" "$work/hosts.txt" >"$work/plan.txt"
	echo "== agg-load on every host: the $scheme plan (XDP and TC programs, maps pinned under $AGG_PIN_DIR)"
	for h in $(vcluster_hosts); do
		vcluster_run "$h" agg-load -v "$work/plan.txt" 2>&1 | sed 's/^agg-load: /  /'
	done
	echo
	echo "== allreduce, $scheme plan: $ITERS iterations of $SIZE bytes of random gradients on $n workers"
	echo "   (segment magnitudes 1e-6..1e2; checked against a float64 sum)"
	printf '%-5s %8s %10s %14s %s\n' iter seconds busbw_GB/s max_rel_error results
	: >"$work/times"
	for it in $(seq 1 "$ITERS"); do
		for w in $workers; do
			gradtool gen "$values" "$SEGMENT" "$(printf '%s%s' "$it" "$w" | cksum | cut -d' ' -f1)" \
				>"$work/in.$w"
		done
		t0=$(date +%s.%N)
		pids=
		for w in $workers; do
			AGG_RUN=$run vcluster_run "$w" agg-recv --iter "$it" --timeout 120 "$work/out.$w" & pids="$pids $!"
		done
		for w in $workers; do
			AGG_RUN=$run vcluster_run "$w" agg-send --iter "$it" --timeout 60 "$work/in.$w" & pids="$pids $!"
		done
		for p in $pids; do wait "$p" || { echo "demo: iteration $it failed" >&2; exit 1; }; done
		t1=$(date +%s.%N)
		first=
		ins=
		for w in $workers; do ins="$ins $work/in.$w"; done
		same=0
		for w in $workers; do
			if [ -z "$first" ]; then
				first=$work/out.$w
				err=$(gradtool check "$SEGMENT" "$first" $ins) ||
					{ echo "demo: iteration $it: results off: $err" >&2; exit 1; }
			fi
			cmp -s "$first" "$work/out.$w" && same=$((same + 1))
		done
		[ "$same" = "$n" ] || { echo "demo: iteration $it: results differ between workers" >&2; exit 1; }
		[ "$it" = 1 ] || echo "$t1 - $t0" | bc -l >>"$work/times"
		awk -v it="$it" -v t0="$t0" -v t1="$t1" -v n="$n" -v b="$SIZE" -v e="${err#max_rel_error }" -v s="$same" \
			'BEGIN { t = t1 - t0; printf "%-5s %8.2f %10.3f %14s %d/%d bit-identical\n", it, t, 2 * (n - 1) / n * b / t / 1e9, e, s, n }'
	done
	echo "   (seconds include starting agg-send and agg-recv on every worker)"
	echo
	echo "== counters (agg-stat): packets in, slots completed, sent up, fanned out, results, drops, resent"
	printf '%-4s %9s %8s %8s %8s %8s %6s %7s\n' node rx done fwd_up fanout results drops resent
	for h in $(vcluster_hosts); do
		agg-stat --node "$h" | awk -v h="$h" '{ v[$1] = $2 } $1 ~ /^drop_/ { d += $2 }
			END { printf "%-4s %9d %8d %8d %8d %8d %6d %7d\n", h, v["rx"], v["done"], v["fwd_up"], v["fanout"], v["stored"], d, v["resent"] }'
	done
	echo
	for h in $(vcluster_hosts); do vcluster_run "$h" agg-load --unload --node "$h"; done
	median=$(sort -n "$work/times" | awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : 0 }')
	eval "median_$scheme=\$median"
	run=$((run + 1))
}

run=0
run_plan aleph
run_plan ps
echo "== the point: the same $((SIZE / 1000000)) MB on the same shaped cluster, two plans"
echo "   (model: agg-plan --eval at the shaped rates; measured: median of iterations 2..$ITERS,"
echo "   the lower of the middle two when even)"
printf '%-6s %9s %9s %7s\n' plan model_s measured ratio
for scheme in ps aleph; do
	eval "m=\$median_$scheme"
	jq -r --arg s "$scheme" --arg m "$m" '.[] | select(.scheme == $s) |
		"\(.scheme) \(.time_s) \($m)"' "$work/eval.json" |
		awk '{ printf "%-6s %9.2f %9.2f %7.2f\n", $1, $2, $3, $3 / $2 }'
done
awk -v a="$median_aleph" -v p="$median_ps" 'BEGIN { printf "ALEPH clusters the workers by bandwidth: %.2f s against %.2f s with every\nworker sending to the PS, %.0f%% less time per allreduce.\n", a, p, 100 * (1 - a / p) }'
echo
echo "demo: $ITERS allreduce iterations of each plan checked; everything unloaded; tearing down"
