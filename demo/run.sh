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
vcluster_up "$work/hosts.txt" aggdemo-
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
echo
if [ $fails = 0 ]; then
	echo "demo: plan built and every tree edge reachable; tearing down"
else
	echo "demo: some edges unreachable" >&2
	exit 1
fi
