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

cat > "$work/hosts.txt" <<'HOSTS'
# ALEPH Sec. 6.3 testbed
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
b1  10.90.0.2   bw=20
b2  10.90.0.3   bw=20
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
c4  10.90.0.7   bw=10
c5  10.90.0.8   bw=10
HOSTS

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
agg-plan --seed 1 --size "$SIZE" --segment "$SEGMENT" "$work/hosts.txt" >"$work/plan.txt"
echo "== agg-load on every host (XDP and TC programs, maps pinned under $AGG_PIN_DIR)"
for h in $(vcluster_hosts); do
	vcluster_run "$h" agg-load -v "$work/plan.txt" 2>&1 | sed 's/^agg-load: /  /'
done
workers=$(awk '$1 == "node" && !/ role=ps/ { print $2 }' "$work/plan.txt")
n=$(echo $workers | wc -w)
values=$((SIZE / 4))
echo
echo "== allreduce: $ITERS iterations of $SIZE bytes of random gradients on $n workers"
echo "   (segment magnitudes 1e-6..1e2; checked against a float64 sum)"
printf '%-5s %8s %10s %14s %s\n' iter seconds busbw_GB/s max_rel_error results
for it in $(seq 1 "$ITERS"); do
	for w in $workers; do
		gradtool gen "$values" "$SEGMENT" "$(printf '%s%s' "$it" "$w" | cksum | cut -d' ' -f1)" \
			>"$work/in.$w"
	done
	t0=$(date +%s.%N)
	pids=
	for w in $workers; do
		vcluster_run "$w" agg-recv --iter "$it" --timeout 120 "$work/out.$w" & pids="$pids $!"
	done
	for w in $workers; do
		vcluster_run "$w" agg-send --iter "$it" --timeout 60 "$work/in.$w" & pids="$pids $!"
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
	awk -v it="$it" -v t0="$t0" -v t1="$t1" -v n="$n" -v b="$SIZE" -v e="${err#max_rel_error }" -v s="$same" \
		'BEGIN { t = t1 - t0; printf "%-5s %8.2f %10.3f %14s %d/%d bit-identical\n", it, t, 2 * (n - 1) / n * b / t / 1e9, e, s, n }'
done
echo "   (seconds include starting agg-send and agg-recv on every worker)"
echo
echo "== counters (agg-stat): packets in, slots completed, sent up, fanned out, results, drops"
printf '%-4s %9s %8s %8s %8s %8s %6s\n' node rx done fwd_up fanout results drops
for h in $(vcluster_hosts); do
	agg-stat --node "$h" | awk -v h="$h" '{ v[$1] = $2 } $1 ~ /^drop_/ { d += $2 }
		END { printf "%-4s %9d %8d %8d %8d %8d %6d\n", h, v["rx"], v["done"], v["fwd_up"], v["fanout"], v["stored"], d }'
done
echo
for h in $(vcluster_hosts); do vcluster_run "$h" agg-load --unload --node "$h"; done
echo "demo: $ITERS allreduce iterations checked; everything unloaded; tearing down"
