#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# ZEBRA's workload through agg's sparse cold path, which is also the
# PS-lite baseline ZEBRA compares with (every pair summed in user space on
# the root: agg-send --sparse and agg-recv --sparse), against agg's dense
# allreduce of the whole table, on 8 workers and a PS (MTU 9000, segment
# 2048), in one run: a 1M-row table of 16-wide float32 embeddings, each
# worker touching 1.5% of the rows an iteration, Zipf (agg-hot gen
# --sparse).  Medians of ITERS iterations after a warm-up:
#   seconds     an iteration, from the first process started to the last ended
#   pairs/s     (id, 16 values) pairs the root took from the workers, per second
#   rows/s      the dense allreduce's equivalent: every worker's 1M rows
#   vs_dense    the dense allreduce's time over the sparse path's
# (the goal of issue 17, once the hot path in XDP exists: 2x these
# pairs/s, and vs_dense at least the density's inverse over ten).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster sparse
ITERS=${BENCH_SPARSE_ITERS:-4}
ROWS=1000000 WIDTH=16 TOUCH=0.015
{
	echo "ps0 10.90.0.100 bw=40 role=ps"
	i=0; while [ $i -lt 8 ]; do echo "w$i 10.90.0.$((i + 1)) bw=10"; i=$((i + 1)); done
} >"$tmp/hosts"
VCLUSTER_MTU=9000 vcluster_up "$tmp/hosts" aggbz$$- >/dev/null || exit 1
ws=$(vcluster_hosts | grep -v ps0)
size=$((ROWS * WIDTH * 4))
agg-plan -s ps --segment 2048 --size $size "$tmp/hosts" >"$tmp/p"
for h in $(vcluster_hosts); do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
shm=$(mktemp -d /dev/shm/aggbench.XXXXXX)
trap 'vcluster_down; rm -rf "$tmp" "$shm" "$AGG_PIN_DIR"' EXIT

# sparse ITER: one round of the cold path; its seconds and the root's
# pairs_in on one line
sparse() {
	k=0
	for w in $ws; do
		agg-hot gen --sparse --binary --ids $ROWS --width $WIDTH --touch $TOUCH --seed 7 \
			--worker $k --iter "$1" >"$shm/in.$w" || exit 1
		k=$((k + 1))
	done
	t0=$(now) pids=
	vcluster_run ps0 agg-recv --sparse -j --iter "$1" --timeout 60 "$shm/out.ps0" \
		>"$tmp/recv.ps0" & root=$!
	for h in $ws; do
		vcluster_run $h agg-recv --sparse -j --iter "$1" --timeout 60 "$shm/out.$h" \
			>"$tmp/recv.$h" & pids="$pids $!"
	done
	for w in $ws; do
		vcluster_run $w agg-send --sparse --iter "$1" --timeout 60 "$shm/in.$w" & pids="$pids $!"
	done
	for p in $pids; do wait $p || { echo "sparse: the sparse round failed"; exit 1; }; done
	t1=$(now)
	# the root's agg-recv lingers 0.3 s to re-acknowledge, then ends
	wait $root || { echo "sparse: the root failed"; exit 1; }
	for h in $ws; do cmp -s "$shm/out.ps0" "$shm/out.$h" || { echo "sparse: results differ"; exit 1; }; done
	echo "$(echo "$t1 - $t0" | bc -l) $(jq -s 'map(.pairs_in // 0) | add' "$tmp/recv.ps0")"
}

# dense ITER: one allreduce of the whole table through the tools; seconds
dense() {
	t0=$(now) pids=
	for w in $ws; do vcluster_run $w agg-recv --iter "$1" --timeout 60 "$shm/dout.$w" & pids="$pids $!"; done
	for w in $ws; do vcluster_run $w agg-send --iter "$1" --timeout 60 "$shm/din" & pids="$pids $!"; done
	for p in $pids; do wait $p || { echo "sparse: the dense allreduce failed"; exit 1; }; done
	echo "$(now) - $t0" | bc -l
}

gradtool gen $((size / 4)) 2048 1 >"$shm/din"
: >"$tmp/s"; : >"$tmp/d"
it=0
while [ $it -le "$ITERS" ]; do
	s=$(sparse $it) && d=$(dense $it) || exit 1
	[ $it = 0 ] || { echo "$s" >>"$tmp/s"; echo "$d" >>"$tmp/d"; }
	it=$((it + 1))
done
cut -d' ' -f1 "$tmp/s" >"$tmp/st"; cut -d' ' -f2 "$tmp/s" >"$tmp/sp"
st=$(med "$tmp/st") sp=$(med "$tmp/sp") dt=$(med "$tmp/d")
echo "1M rows x $WIDTH float32, $TOUCH of the rows per worker, 8 workers and a PS, MTU 9000;"
echo "medians of $ITERS iterations"
printf '%-22s %9s %12s %9s\n' path seconds rate vs_dense
awk -v t=$st -v p=$sp -v d=$dt 'BEGIN { printf "%-22s %9.3f %9.0f pairs/s %6.2f\n", "sparse (cold, PS-lite)", t, p / t, d / t }'
awk -v d=$dt 'BEGIN { printf "%-22s %9.3f %9.0f rows/s  %6.2f\n", "dense (whole table)", d, 8 * 1000000 / d, 1 }'
