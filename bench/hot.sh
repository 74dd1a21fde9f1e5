#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# agg-hot at scale: 100M updates drawn from Zipf(1.1) over 150M ids (ZEBRA's
# Task 1 size), 100 iterations.  Exact counting must take under 30 s and
# 2 GiB, --sketch under 64 MiB; its precision against exact is reported.
# Reading the log with cat is the baseline measured in the same run.
# Usage: AGG_BUILD=build sh bench/hot.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

H="$B/agg-hot"
[ -x "$H" ] || { echo "bench/hot.sh: no $H (make first)" >&2; exit 2; }

# run NAME CMD...: seconds and peak RSS.  agg-hot -v reports its own peak
# (getrusage); for other commands, GNU time when there is one.
run() {
	name=$1; shift
	t0=$(now)
	if [ "$1" = "$H" ]; then
		"$@" -v >"$tmp/$name.out" 2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 3; }
	elif [ -x /usr/bin/time ]; then
		/usr/bin/time -f 'peak memory %M KiB' "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	else
		"$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	fi
	t1=$(now)
	kib=$(sed -n 's/.*peak memory \([0-9]*\) KiB/\1/p' "$tmp/$name.err")
	secs=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
	k=$(head -c 100 "$tmp/$name.out" | sed -n '1s/^hot v1 k=\([0-9]*\) .*/\1/p')
	echo "$name $secs ${kib:-0} ${k:--}" >>"$tmp/results"
	printf '%-18s %8s %9s %7s\n' "$name" "$secs" \
		"$(echo "${kib:-0}" | awk '{ printf "%.1f", $1 / 1024 }')" "${k:--}"
}

# compare NAME: precision and Kendall tau of NAME's table against exact's
precision() {
	"$H" compare "$tmp/$2.out" "$tmp/$1.out" |
		awk '/^precision/ { p = $2 } /^kendall_tau/ { t = $2 } END { printf "%s %s", p, t }'
}

field() {	# field NAME COLUMN
	awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$tmp/results"
}

echo "generating 100M updates, Zipf(1.1) over 150M ids (binary and text logs)"
t0=$(now)
"$H" gen --binary --ids 150M --zipf 1.1 --iters 100 --batch 100000 --per-example 10 \
	>"$tmp/log.bin"
t1=$(now)
"$H" gen --ids 150M --zipf 1.1 --iters 100 --batch 100000 --per-example 10 >"$tmp/log.txt"
t2=$(now)
echo "$t0 $t1 $t2 $(wc -c <"$tmp/log.bin") $(wc -c <"$tmp/log.txt")" |
	awk '{ printf "gen: binary %.1f s (%.0f MB), text %.1f s (%.0f MB)\n\n",
		$2 - $1, $4 / 1e6, $3 - $2, $5 / 1e6 }'

printf '%-18s %8s %9s %7s\n' case seconds peak_MiB k
run cat-binary sh -c "cat \"$tmp/log.bin\" >/dev/null"
run exact "$H" --binary "$tmp/log.bin"
run exact-text "$H" "$tmp/log.txt"
run exact-1MiB "$H" --binary --coverage 0.9 --budget 1Mi "$tmp/log.bin"
run exact-online10 "$H" --binary --coverage 0.9 --online 10 --tau 0 "$tmp/log.bin"
run sample-8pct "$H" --binary --coverage 0.9 --sample 0.08 "$tmp/log.bin"
run sketch "$H" --binary --sketch "$tmp/log.bin"
run sketch-1MiB "$H" --binary --coverage 0.9 --budget 1Mi --sketch "$tmp/log.bin"
run sketch-4Mi "$H" --binary --coverage 0.9 --budget 1Mi --sketch=4Mi "$tmp/log.bin"

echo
echo "precision and Kendall tau (common ids) against exact counting:"
printf '  %-28s %s\n' "sketch, coverage 0.5" "$(precision sketch exact)"
printf '  %-28s %s\n' "sketch, 1 MiB (k=43690)" "$(precision sketch-1MiB exact-1MiB)"
printf '  %-28s %s\n' "sketch 4Mi counters, 1 MiB" "$(precision sketch-4Mi exact-1MiB)"
printf '  %-28s %s\n' "sample 8%, 1 MiB" "$(precision sample-8pct exact-1MiB)"
printf '  %-28s %s\n' "text log, coverage 0.5" "$(precision exact-text exact)"

echo
rc=0
verdict() {	# verdict WHAT OK
	if [ "$2" = 1 ]; then echo "ok   $1"; else echo "MISS $1"; rc=1; fi
}
for c in exact exact-1MiB; do
	s=$(field $c 2); m=$(field $c 3)
	verdict "$c: $s s < 30 s, $m KiB < 2 GiB" \
		"$(awk -v s="$s" -v m="$m" 'BEGIN { print (s < 30 && m < 2097152) }')"
done
for c in sketch sketch-1MiB; do
	m=$(field $c 3)
	verdict "$c: $m KiB < 64 MiB" "$(awk -v m="$m" 'BEGIN { print (m < 65536) }')"
done
exit $rc
