#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# AIACC's auto-tuning on a workload shaped like a real model's gradients
# (bench/model.c: ResNet-50's or BERT-base's tensors in backward order,
# ready over a BACKWARD-second backward pass, packed into allreduce units
# and allreduced asynchronously through libagg), on 8 workers and a PS
# (MTU 65535, segment 16368), in one run:
#  - untuned: DDP's default unit of 25 MiB, tuning off;
#  - tuned: --tune on from an empty cache: the iterations until the tuner
#    converged, then the median of those after it;
#  - sweep: every unit size the tuner may pick, the median of 4 iterations
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
# the first worker's lines ("iteration unit seconds done") in $tmp/NAME
go() {
	g_name=$1 && shift
	run=$((run + 1)) g_pids=
	for w in $ws; do
		AGG_RUN=$run vcluster_run $w model "$@" >"$tmp/$g_name.$w" 2>&1 & g_pids="$g_pids $!"
	done
	for p in $g_pids; do wait $p || { echo "model: $g_name failed: $(cat "$tmp/$g_name".*)"; exit 1; }; done
	cat "$tmp/$g_name".* | grep -v '^[0-9]* [0-9]* [0-9.]* [01]$' && exit 1
	cp "$tmp/$g_name.w1" "$tmp/$g_name"
}
# medt NAME FIRST: the median seconds of NAME's iterations from FIRST on
medt() { awk -v f=$2 '$1 >= f { print $3 }' "$tmp/$1" >"$tmp/m"; med "$tmp/m"; }

echo "$MODEL ($size bytes) on $N workers and a PS, backward pass $BACKWARD s; seconds an iteration"
go untuned -t off -b $BACKWARD $MODEL 6
untuned=$(medt untuned 1)
go tuned -t on -b $BACKWARD -l "$tmp/tune.log" $MODEL $TUNE_ITERS
conv=$(awk '$4 == 1 { print $1; exit }' "$tmp/tuned")
[ -n "$conv" ] || { echo "model: the tuning did not converge in $TUNE_ITERS iterations"; exit 1; }
tuned_unit=$(awk '$4 == 1 { print $2; exit }' "$tmp/tuned")
tuned=$(medt tuned "$conv")
best= best_unit=
u=262144
while [ $u -le 67108864 ]; do
	go sweep.$u -t off -u $u -b $BACKWARD $MODEL 5
	t=$(medt sweep.$u 1)
	printf '  sweep unit %9d: %.4f s\n' $u "$t"
	if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t best_unit=$u; fi
	u=$((u * 2))
done
go reuse -t reuse -b $BACKWARD $MODEL 4
reuse_unit=$(awk 'NR == 1 { print $2 }' "$tmp/reuse")
reuse=$(medt reuse 1)
printf '%-9s %10s %9s\n' setting unit seconds
printf '%-9s %10d %9.4f\n' untuned 26214400 "$untuned"
printf '%-9s %10d %9.4f   (converged at iteration %d)\n' tuned "$tuned_unit" "$tuned" "$conv"
printf '%-9s %10d %9.4f\n' best "$best_unit" "$best"
printf '%-9s %10d %9.4f   (started at the cached unit: %s)\n' reuse "$reuse_unit" "$reuse" \
	"$([ "$reuse_unit" = "$tuned_unit" ] && echo yes || echo no)"
awk -v u=$untuned -v t=$tuned -v b=$best 'BEGIN { printf "untuned/tuned %.2f, tuned/best %.2f\n", u / t, t / b }'
[ -z "${BENCH_MODEL_LOG:-}" ] || cp "$tmp/tune.log" "$BENCH_MODEL_LOG"
