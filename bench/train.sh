#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Training time per step: demo/train.sh's DDP run on sklearn's digits
# (4 workers, the same namespaces and seed for both) through agg's comm
# hook and through Gloo; the ratio agg/gloo of rank 0's median ms a step
# (below 1: agg is faster).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
if [ "$(id -u)" != 0 ]; then echo "train: needs root (namespaces, XDP): skipped"; exit 0; fi
if ! /usr/bin/python3 -c 'import torch, sklearn' 2>/dev/null; then
	echo "train: python3-torch and python3-sklearn are not installed: skipped"; exit 0
fi
TRAIN_EPOCHS=${BENCH_TRAIN_EPOCHS:-4} AGG_BUILD=$B sh "$here/../demo/train.sh" >"$tmp/out" 2>&1 ||
	{ cat "$tmp/out"; exit 1; }
sed -n '/^== loss/,/^ranks with/p' "$tmp/out"
awk '/^ms a step/ { a = $(NF - 1); g = $NF }
     END { if (g > 0) printf "\nms a step: agg %s, gloo %s, agg/gloo %.2f\n", a, g, a / g }' "$tmp/out"
