#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# agg-plan at scale: M-WCHA on 10,000 and 100,000 workers with and without
# racks, and the same hosts through -s ps (parse, build, write) as the
# baseline measured in the same run; peak_MB is aleph's maximum RSS.
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

# peak_kb CMD...: maximum resident set of one run, KiB ("-" without GNU time)
peak_kb() {
	if /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1; then
		cat "$tmp/rss"
	else
		echo -
	fi
}

# gen-hosts.awk numbers workers 10.90.(i/250).x, past 10.90.255 beyond
# 64,000 workers: give every worker an address of its own in 10.90-10.91
# (names, bw= and racks, all M-WCHA reads, stay as drawn).
readdr() {
	awk '/^w/ { i = substr($1, 2) + 0
		$2 = sprintf("10.%d.%d.%d", 90 + int(i / 62500), int(i / 250) % 250, i % 250 + 1) }
		{ print }'
}

printf '%-34s %9s %9s %7s %8s %s\n' case aleph_s ps_s ratio peak_MB target
for row in "10000 100 <1s" "10000 0 <10s" "100000 1000 <2s" "100000 0 <20s"; do
	set -- $row
	awk -v n=$1 -v racks=$2 -v sd=0.2 -v seed=1 -f "$here/gen-hosts.awk" | readdr > "$tmp/h"
	a=$(best_of 3 "$B/agg-plan" "$tmp/h")
	p=$(best_of 3 "$B/agg-plan" -s ps "$tmp/h")
	kb=$(peak_kb "$B/agg-plan" "$tmp/h")
	printf '%-34s %9.3f %9.3f %7.2f %8s %s\n' "$1 workers, $2 racks" "$a" "$p" \
		"$(echo "$a $p" | awk '{print $1/$2}')" \
		"$(echo "$kb" | awk '$1 == "-" { print; next } { printf "%.1f", $1 / 1024 }')" "$3"
done
