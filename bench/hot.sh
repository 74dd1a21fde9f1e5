#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# agg-hot at scale: 100M updates drawn from Zipf(1.1) over 150M ids, exact
# and --sketch, against reading the same log (cat) in the same run.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# run NAME CMD...: seconds and peak KiB (agg-hot -v reports its peak)
run() {
	name=$1; shift
	t0=$(now)
	"$@" >"$tmp/out" 2>"$tmp/err"
	t1=$(now)
	kib=$(sed -n 's/.*peak memory \([0-9]*\) KiB/\1/p' "$tmp/err")
	secs=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
	res=$(head -c 200 "$tmp/out" | head -1 | grep -a '^hot' | cut -c1-60 || true)
	printf '%-28s %8s %10s %s\n' "$name" "$secs" "${kib:--}" "${res:--}"
	cp "$tmp/out" "$tmp/$name.out"
}

"$B/agg-hot" gen --ids 150M --zipf 1.1 --iters 100 --batch 100000 --per-example 10 \
	--binary >"$tmp/log.bin"
printf '%-28s %8s %10s %s\n' case seconds peak_KiB result
run cat-baseline cat "$tmp/log.bin"
run exact "$B/agg-hot" -v --binary "$tmp/log.bin"
run sketch "$B/agg-hot" -v --binary --sketch "$tmp/log.bin"
run exact-k65536 "$B/agg-hot" -v --binary --coverage 0.9 "$tmp/log.bin"
run sketch-k65536 "$B/agg-hot" -v --binary --coverage 0.9 --sketch "$tmp/log.bin"
echo
echo "sketch vs exact, coverage 0.5: $("$B/agg-hot" compare "$tmp/exact.out" "$tmp/sketch.out" | tr '\n' ' ')"
echo "sketch vs exact, k=65536:      $("$B/agg-hot" compare "$tmp/exact-k65536.out" "$tmp/sketch-k65536.out" | tr '\n' ' ')"
echo "targets: exact under 30 s and 2 GiB (2097152 KiB); sketch under 64 MiB (65536 KiB)"
