#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# agg-plan at scale: M-WCHA on 10,000 workers with and without racks, and
# the same hosts through -s ps (parse, build, write) as the baseline
# measured in the same run.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

best_of() {	# best_of N CMD...: fastest of N runs, seconds
	n=$1; shift; best=
	for _ in $(seq "$n"); do
		t0=$(now); "$@" >/dev/null; t1=$(now)
		best=$(echo "$t0 $t1 ${best:-1e9}" | awk '{d=$2-$1; print (d<$3)?d:$3}')
	done
	echo "$best"
}

printf '%-34s %9s %9s %7s %s\n' case aleph_s ps_s ratio target
for racks in 100 0; do
	awk -v n=10000 -v racks=$racks -v sd=0.2 -v seed=1 -f "$here/gen-hosts.awk" > "$tmp/h"
	a=$(best_of 3 "$B/agg-plan" "$tmp/h")
	p=$(best_of 3 "$B/agg-plan" -s ps "$tmp/h")
	target=$([ $racks = 0 ] && echo "<10s" || echo "<1s")
	printf '%-34s %9.3f %9.3f %7.2f %s\n' "10000 workers, $racks racks" "$a" "$p" \
		"$(echo "$a $p" | awk '{print $1/$2}')" "$target"
done
