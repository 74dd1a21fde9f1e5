#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# AIACC's auto-tuning on a workload shaped like a real model's gradients
# (bench/model.c: ResNet-50's or BERT-base's tensors in backward order,
# ready over a BACKWARD-second backward pass, packed into allreduce units
# and allreduced asynchronously through libagg), on 8 workers and a PS
# (MTU 65535, segment 16368), in one run:
#  - untuned: DDP's default unit of 25 MiB, one stream, tuning off;
#  - tuned: --tune on from an empty cache, the unit size and the streams
#    (1 to STREAMS): the iterations until the tuner converged, then the
#    median of those after it;
#  - sweep: every setting the tuner may pick, the median of 4 iterations
#    each after a warm-up: the exhaustive best;
#  - reuse: a second run with the tuned cache (--tune reuse): the unit it
#    starts with, and its median.
# Ratios: untuned/tuned (above 1: tuning made the iteration faster) and
# tuned/best.  The tuning log is $BENCH_MODEL_LOG if set.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_cluster model
MODEL=${BENCH_MODEL:-resnet50}
N=${BENCH_MODEL_WORKERS:-8}
BACKWARD=${BENCH_MODEL_BACKWARD:-0.1}
TUNE_ITERS=${BENCH_MODEL_TUNE_ITERS:-64}
STREAMS=${BENCH_MODEL_STREAMS:-4}
case $MODEL in
resnet50) size=102228128 ;;
bert-base) size=437928960 ;;
*) echo "model: BENCH_MODEL is resnet50 or bert-base"; exit 2 ;;
esac
{
	echo "ps0 10.90.0.100 bw=40 role=ps"
	i=1; while [ $i -le $N ]; do echo "w$i 10.90.0.$i bw=10"; i=$((i + 1)); done
} >"$tmp/hosts"
VCLUSTER_MTU=65535 vcluster_up "$tmp/hosts" aggbm$$- >/dev/null || exit 1
ws=$(vcluster_hosts | grep -v ps0)
agg-plan --segment 16368 --size $size "$tmp/hosts" >"$tmp/p"
for h in $(vcluster_hosts); do vcluster_run "$h" agg-load "$tmp/p" || exit 1; done
export AGG_CACHE_DIR=$tmp/cache
run=0
# go NAME ARGS...: bench/model.c on every worker (a new run each time);
# the first worker's lines ("iteration unit streams seconds done") in $tmp/NAME
go() {
	g_name=$1 && shift
	run=$((run + 1)) g_pids=
	for w in $ws; do
		AGG_RUN=$run vcluster_run $w model "$@" >"$tmp/$g_name.$w" 2>&1 & g_pids="$g_pids $!"
	done
	for p in $g_pids; do wait $p || { echo "model: $g_name failed: $(cat "$tmp/$g_name".*)"; exit 1; }; done
	cat "$tmp/$g_name".* | grep -v '^[0-9]* [0-9]* [0-9]* [0-9.]* [01]$' && exit 1
	cp "$tmp/$g_name.w1" "$tmp/$g_name"
}
# medt NAME FIRST: the median seconds of NAME's iterations from FIRST on
medt() { awk -v f=$2 '$1 >= f { print $4 }' "$tmp/$1" >"$tmp/m"; med "$tmp/m"; }

echo "$MODEL ($size bytes) on $N workers and a PS, backward pass $BACKWARD s; seconds an iteration"
go untuned -t off -b $BACKWARD $MODEL 6
untuned=$(medt untuned 1)
go tuned -t on -s $STREAMS -b $BACKWARD -l "$tmp/tune.log" $MODEL $TUNE_ITERS
conv=$(awk '$5 == 1 { print $1; exit }' "$tmp/tuned")
[ -n "$conv" ] || { echo "model: the tuning did not converge in $TUNE_ITERS iterations"; exit 1; }
tuned_set=$(awk '$5 == 1 { print $2 "/" $3; exit }' "$tmp/tuned")
tuned=$(medt tuned "$conv")
best= best_set=
s=1
while [ $s -le "$STREAMS" ]; do
	u=262144
	while [ $u -le 67108864 ]; do
		go sweep.$u.$s -t off -u $u -S $s -b $BACKWARD $MODEL 5
		t=$(medt sweep.$u.$s 1)
		printf '  sweep unit %9d streams %d: %.4f s\n' $u $s "$t"
		if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t best_set=$u/$s; fi
		u=$((u * 2))
	done
	s=$((s * 2))
done
go reuse -t reuse -s $STREAMS -b $BACKWARD $MODEL 4
reuse_set=$(awk 'NR == 1 { print $2 "/" $3 }' "$tmp/reuse")
reuse=$(medt reuse 1)
printf '%-9s %18s %9s\n' setting unit/streams seconds
printf '%-9s %18s %9.4f\n' untuned 26214400/1 "$untuned"
printf '%-9s %18s %9.4f   (converged at iteration %d)\n' tuned "$tuned_set" "$tuned" "$conv"
printf '%-9s %18s %9.4f\n' best "$best_set" "$best"
printf '%-9s %18s %9.4f   (started at the cached setting: %s)\n' reuse "$reuse_set" "$reuse" \
	"$([ "$reuse_set" = "$tuned_set" ] && echo yes || echo no)"
awk -v u=$untuned -v t=$tuned -v b=$best 'BEGIN { printf "untuned/tuned %.2f, tuned/best %.2f\n", u / t, t / b }'
[ -z "${BENCH_MODEL_LOG:-}" ] || cp "$tmp/tune.log" "$BENCH_MODEL_LOG"
