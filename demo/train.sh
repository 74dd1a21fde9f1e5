#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# make train: PyTorch DDP training (demo/train.py, sklearn's digits) on a
# virtual cluster of 4 workers and a parameter server, the gradients summed
# by agg's XDP data plane and then, on the same namespaces from the same
# seed, by Gloo's ring allreduce; the two loss curves side by side.
#
#   TRAIN_EPOCHS (8)   epochs
#   TRAIN_ARGS         more options for train.py (python3 demo/train.py --help)
#   TRAIN_MTU (9000), TRAIN_SEGMENT (2048)   the links and the plan's packets
set -eu
here=$(cd "$(dirname "$0")" && pwd)
AGG_SRC=$(cd "$here/.." && pwd)
AGG_BUILD=${AGG_BUILD:-$AGG_SRC/build}
PATH=$AGG_BUILD:$PATH
PY=/usr/bin/python3	# Debian's, where python3-torch installs
PYTHONPATH=$AGG_SRC/python${PYTHONPATH:+:$PYTHONPATH}
AGG_LIB=${AGG_LIB:-$AGG_BUILD/libagg.so.1}
PYTHONDONTWRITEBYTECODE=1
export AGG_BUILD PATH PYTHONPATH AGG_LIB PYTHONDONTWRITEBYTECODE

if [ "$(id -u)" != 0 ]; then
	echo "train: the virtual cluster needs root (network namespaces, XDP)" >&2
	exit 3
fi
if ! $PY -c 'import torch, sklearn.datasets' 2>/dev/null; then
	echo "train: $PY cannot import torch and sklearn (apt-get install python3-torch python3-sklearn)" >&2
	exit 3
fi
[ -e "$AGG_LIB" ] || { echo "train: no $AGG_LIB (make)" >&2; exit 3; }
. "$AGG_SRC/t/lib/vcluster.sh"

EPOCHS=${TRAIN_EPOCHS:-8}
MTU=${TRAIN_MTU:-9000}
SEGMENT=${TRAIN_SEGMENT:-2048}
work=$(mktemp -d)
export AGG_PIN_DIR=/sys/fs/bpf/aggtrain-$$
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || :; done
	vcluster_down
	rm -rf "$work" "$AGG_PIN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
# the job token's site secret: the demo's own unless one is given
if [ -z "${AGG_SECRET_FILE:-}" ]; then
	AGG_SECRET_FILE=$work/secret
	(umask 077 && head -c 32 /dev/urandom >"$AGG_SECRET_FILE")
	export AGG_SECRET_FILE
fi
unset AGG_RUN TORCHELASTIC_RESTART_COUNT

cat >"$work/hosts.txt" <<'HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
w4  10.90.0.4   bw=10
HOSTS
workers="w1 w2 w3 w4"
world=4

# DDP's largest bucket: its first step sends the whole model as one
size=$($PY "$here/train.py" --print-size ${TRAIN_ARGS:-})
echo "== agg-plan --size $size (DDP's largest bucket) --segment $SEGMENT"
agg-plan --size "$size" --segment "$SEGMENT" "$work/hosts.txt" | tee "$work/plan.txt"
echo
echo "== virtual cluster: 4 workers and ps0 on a bridge, MTU $MTU; agg-load on every host"
VCLUSTER_MTU=$MTU vcluster_up "$work/hosts.txt" aggtrain$$-
for h in $(vcluster_hosts); do
	vcluster_run "$h" agg-load --arp-timeout 10000 "$work/plan.txt"
done

# train BACKEND: train.py on every worker at once, rank i on the i-th
# worker (rank 0's address the rendezvous); outputs in $work/BACKEND.RANK
train() {
	pids=; r=0
	for w in $workers; do
		vcluster_run "$w" env RANK=$r WORLD_SIZE=$world MASTER_ADDR=10.90.0.1 MASTER_PORT=29512 \
			"$PY" "$here/train.py" --backend "$1" --epochs "$EPOCHS" ${TRAIN_ARGS:-} \
			>"$work/$1.$r" 2>"$work/$1.err.$r" &
		pids="$pids $!"
		r=$((r + 1))
	done
	ok=0
	for p in $pids; do wait "$p" || ok=1; done
	pids=
	if [ $ok != 0 ]; then
		echo "train: the $1 run failed:" >&2
		cat "$work/$1".err.* >&2
		exit 1
	fi
}
echo
echo "== training through agg (the DDP comm hook, python/agg/ddp.py)"
train agg
sed -n 's/^agg: /  /p' "$work/agg.0"
echo "== training through Gloo (torch.distributed's allreduce), same namespaces, same seed"
train gloo
echo

field() { sed -n "s/^$1 //p" "$2"; }
same() {	# same BACKEND: the number of ranks whose digest is rank 0's
	d0=$(field digest "$work/$1.0")
	n=0; r=0
	while [ $r -lt $world ]; do
		[ "$(field digest "$work/$1.$r")" = "$d0" ] && n=$((n + 1))
		r=$((r + 1))
	done
	echo "$n"
}
echo "== loss over the training set and held-out accuracy after each epoch (rank 0)"
printf '%-6s %14s %14s %10s %10s %10s\n' epoch agg_loss gloo_loss rel_diff agg_acc gloo_acc
grep '^epoch ' "$work/agg.0" >"$work/a"
grep '^epoch ' "$work/gloo.0" >"$work/g"
paste -d' ' "$work/a" "$work/g" | awk '{
	d = $4 - $10; if (d < 0) d = -d
	printf "%-6s %14.9f %14.9f %10.2e %10.4f %10.4f\n", $2, $4, $10, d / $10, $6, $12 }'
echo
printf '%-28s %12s %12s\n' "" agg gloo
printf '%-28s %12s %12s\n' "final accuracy" "$(field accuracy "$work/agg.0")" "$(field accuracy "$work/gloo.0")"
printf '%-28s %12s %12s\n' "ms a step (rank 0)" "$(field step_ms "$work/agg.0")" "$(field step_ms "$work/gloo.0")"
printf '%-28s %12s %12s\n' "s to start, s to train" "$(field setup_s "$work/agg.0" | awk '{ print $1 "," $3 }')" "$(field setup_s "$work/gloo.0" | awk '{ print $1 "," $3 }')"
printf '%-28s %12s %12s\n' "ranks with rank 0's weights" "$(same agg)/$world" "$(same gloo)/$world"
echo
for h in $(vcluster_hosts); do vcluster_run "$h" agg-load --unload --node "$h"; done
echo "train: done; everything unloaded; tearing down"
