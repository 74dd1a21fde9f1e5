#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Incast at a PS behind a shallow switch buffer (what t/0320 checks for
# correctness, here for the rate): four workers into one PS whose link
# carries everything, the PS's switch port buffering QUEUE_MS of its
# link's rate (bfifo, bytes), shaped at bw= x SCALE (default 0.05: 1
# Gbit/s workers, a 2 Gbit/s PS), MTU 9000, segment 2048, SIZE bytes an
# iteration.  agg-send's congestion window against the plan's fixed
# window (--cc off), in turns (ROUNDS rounds of ITERS iterations each),
# in one run:
#   resent%   resends per packet sent, over the rounds
#   drops     packets the switch dropped at the PS's port
#   seconds   the median iteration
#   busy      the machine's busy share over the rounds (2 cores: a
#             machine that cannot outrun the PS's link shows little
#             loss with either window, and says so here)
# and the congestion window's resends as a ratio to the fixed window's.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster incast
SCALE=${BENCH_INCAST_SCALE:-0.05}
QUEUE_MS=${BENCH_INCAST_QUEUE_MS:-5}
SIZE=${BENCH_INCAST_SIZE:-16000000}
ITERS=${BENCH_INCAST_ITERS:-3}
ROUNDS=${BENCH_INCAST_ROUNDS:-2}

cat >"$tmp/hosts.txt" <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=20
w2  10.90.0.2   bw=20
w3  10.90.0.3   bw=20
w4  10.90.0.4   bw=20
EOF_HOSTS
VCLUSTER_MTU=9000 VCLUSTER_BW_SCALE=$SCALE VCLUSTER_QUEUE_MS=$QUEUE_MS
export VCLUSTER_MTU VCLUSTER_BW_SCALE VCLUSTER_QUEUE_MS
vcluster_up "$tmp/hosts.txt" aggbi$$- || exit 1
vcluster_shape || exit 1
agg-plan -s ps --segment 2048 --size "$SIZE" "$tmp/hosts.txt" >"$tmp/plan"
for h in $(vcluster_hosts); do vcluster_run $h agg-load "$tmp/plan" || exit 1; done
W="w1 w2 w3 w4"
for w in $W; do gradtool gen $((SIZE / 4)) 2048 "$(echo $w | cksum | cut -d' ' -f1)" >"$tmp/in.$w"; done

stat_sum() {	# COUNTER summed over the workers
	for w in $W; do agg-stat --node $w | awk -v k="$1" '$1 == k { print $2 }'; done |
		awk '{ s += $1 } END { print s + 0 }'
}
drops() {
	tc -s -n "$(vcluster_brns)" qdisc show dev "$(vcluster_port ps0)" |
		awk '$1 == "qdisc" { b = ($2 == "bfifo") }
		     b && $1 == "Sent" { for (i = 1; i < NF; i++) if ($i == "(dropped") { sub(/,/, "", $(i + 1)); print $(i + 1) } }'
}
iteration() {	# ITER CC_ARGS: one allreduce on every worker
	pids=
	for w in $W; do
		vcluster_run $w agg-recv --iter "$1" --timeout 120 "$tmp/out.$w" &
		pids="$pids $!"
	done
	for w in $W; do
		vcluster_run $w agg-send --iter "$1" --timeout 60 $2 "$tmp/in.$w" &
		pids="$pids $!"
	done
	rc=0
	for p in $pids; do wait $p || rc=1; done
	return $rc
}

for mode in cc fixed; do : >"$tmp/t.$mode"; echo "0 0 0 0 0" >"$tmp/acc.$mode"; done
it=0
r=0
while [ $r -lt "$ROUNDS" ]; do
	for mode in cc fixed; do
		args=; [ $mode = fixed ] && args="--cc off"
		s0=$(($(stat_sum sent) + $(stat_sum sent_local))); x0=$(stat_sum resent); d0=$(drops)
		c0=$(cpu_busy); t0=$(now)
		i=0
		while [ $i -lt "$ITERS" ]; do
			it=$((it + 1)); i=$((i + 1))
			a=$(now)
			iteration $it "$args" || { echo "incast: iteration $it ($mode) failed"; exit 1; }
			echo "$(now) $a" | awk '{ print $1 - $2 }' >>"$tmp/t.$mode"
		done
		t1=$(now); c1=$(cpu_busy)
		s1=$(($(stat_sum sent) + $(stat_sum sent_local))); x1=$(stat_sum resent); d1=$(drops)
		read as ax ad ac at <"$tmp/acc.$mode"
		echo "$((as + s1 - s0)) $((ax + x1 - x0)) $((ad + d1 - d0))" \
			"$(echo "$ac $c1 $c0 $at $t1 $t0" | awk '{ print $1 + $2 - $3, $4 + $5 - $6 }')" >"$tmp/acc.$mode"
	done
	r=$((r + 1))
done

ncpu=$(getconf _NPROCESSORS_ONLN)
echo "incast: 4 workers at $(vcluster_rate w1) Mbit/s into a PS at $(vcluster_rate ps0) Mbit/s, its port buffering ${QUEUE_MS} ms; $ROUNDS rounds of $ITERS iterations of $SIZE bytes"
printf '%-8s %9s %9s %8s %8s %6s\n' window sent resent% drops seconds busy
for mode in cc fixed; do
	read s x d c t <"$tmp/acc.$mode"
	printf '%-8s %9d %8.1f%% %8d %8.3f %5.0f%%\n' $mode $s "$(echo "$x $s" | awk '{ print $2 ? 100 * $1 / $2 : 0 }')" \
		$d "$(med "$tmp/t.$mode")" "$(echo "$c $t $ncpu $hz" | awk '{ print 100 * $1 / ($2 * $3 * $4) }')"
done
read s x d c t <"$tmp/acc.cc"; read sf xf df cf tf <"$tmp/acc.fixed"
echo "$x $s $xf $sf" | awk '{ a = $2 ? $1 / $2 : 0; b = $4 ? $3 / $4 : 0
	if (b > 0) printf "congestion window: %.2fx the fixed window'"'"'s resends per packet\n", a / b
	else print "the fixed window resent nothing: the senders did not outrun the link (see busy)" }'
