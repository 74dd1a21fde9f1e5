#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='PyTorch DDP through agg (demo/train.py): the loss Gloo gives from the same seed, the same weights on every rank; a crashed job resumes from its checkpoint as a new run, without agg-load'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/torch.sh"

test_have_prereq TORCH || skip_all "$PY cannot import torch and numpy (apt-get install python3-torch)"
test_have_prereq SKLEARN || skip_all "$PY cannot import sklearn (apt-get install python3-sklearn)"
test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test -e "$AGG_LIB" || skip_all "no $AGG_LIB (make)"
unset AGG_RUN TORCHELASTIC_RESTART_COUNT

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
w4  10.90.0.4   bw=10
EOF_HOSTS
EPOCHS=4
TRAIN="$AGG_SRC/demo/train.py"

# train OUT BACKEND ARGS...: train.py on w1..w4 at once (rank i on w(i+1),
# w1 the rendezvous), waiting for all: stdout OUT.RANK, stderr
# err.OUT.RANK, exit status rc.OUT.RANK
train() {
	t_o=$1 && t_b=$2 && shift 2 && t_pids= && t_r=0 &&
	for t_w in w1 w2 w3 w4; do
		{ vcluster_run $t_w env RANK=$t_r WORLD_SIZE=4 MASTER_ADDR=10.90.0.1 MASTER_PORT=29512 \
			"$PY" "$TRAIN" --backend $t_b --epochs $EPOCHS "$@" >$t_o.$t_r 2>err.$t_o.$t_r
		  echo $? >rc.$t_o.$t_r; } &
		t_pids="$t_pids $!" && t_r=$((t_r + 1))
	done &&
	for t_p in $t_pids; do wait $t_p; done
}
rcs() { for r in 0 1 2 3; do printf '%s ' "$(cat rc.$1.$r)"; done; }
field() { sed -n "s/^$1 //p" "$2"; }
# one_digest OUT: every rank's digest is the same: prints it
one_digest() {
	for r in 0 1 2 3; do field digest $1.$r; done | sort -u >digests.$1 &&
	test "$(wc -l <digests.$1)" = 1 && grep -E "^[0-9a-f]{64}\$" digests.$1
}

test_expect_success 'setup: 4 workers and ps0 (MTU 9000), a plan the size of the whole model (DDP'"'"'s first bucket)' '
	size=$("$PY" "$TRAIN" --print-size) &&
	test "$size" -gt 100000 &&
	agg-plan -s ps --size $size --segment 2048 hosts.txt >plan.txt &&
	VCLUSTER_MTU=9000 && export VCLUSTER_MTU &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'DDP through agg: every rank ends with the same weights; several buckets a step' '
	train agg agg &&
	for r in 0 1 2 3; do cat err.agg.$r; done &&
	test "$(rcs agg)" = "0 0 0 0 " &&
	one_digest agg &&
	grep "^agg: node w1 rank 0 of 4, run 0, max_count $((size / 4))," agg.0 &&
	steps=$(sed -n "s/.* \([0-9]*\) steps an epoch\$/\1/p" agg.0) &&
	buckets=$(sed -n "s/^agg: \([0-9]*\) buckets in \([0-9]*\) allreduces\$/\1 \2/p" agg.0) &&
	set -- $buckets &&
	test "$1" = "$2" && test "$1" -ge $((2 * EPOCHS * steps)) &&
	test "$(grep -c "^epoch [0-9]* loss " agg.0)" = $EPOCHS
'

test_expect_success 'the same through Gloo, on the same namespaces: the same weights on every rank' '
	train gloo gloo &&
	for r in 0 1 2 3; do cat err.gloo.$r; done &&
	test "$(rcs gloo)" = "0 0 0 0 " &&
	one_digest gloo
'

test_expect_success 'agg and Gloo: the loss within 1e-4 (relative) at every epoch, the final accuracy within 0.01' '
	grep "^epoch " agg.0 >a && grep "^epoch " gloo.0 >g &&
	paste -d" " a g | tee cmp &&
	awk "{ d = \$4 - \$10; if (d < 0) d = -d; if (\$2 != \$8 || d > 1e-4 * \$10) bad++ }
	     END { exit !(NR == $EPOCHS && !bad) }" cmp &&
	echo "$(field accuracy agg.0) $(field accuracy gloo.0)" |
		awk "{ d = \$1 - \$2; if (d < 0) d = -d; exit !(\$1 > 0.8 && d <= 0.01) }" &&
	say "ms a step: agg $(field step_ms agg.0), gloo $(field step_ms gloo.0)"
'

test_expect_success 'a crash: rank 2 dies in epoch 3; the others fail, naming w3 (agg-timeout 5)' '
	die=$((2 * steps + 3)) &&
	AGG_RUN=1 && export AGG_RUN &&
	train crash agg --checkpoint ck.pt --die-at-step $die --die-rank 2 --agg-timeout 5 &&
	for r in 0 1 2 3; do cat err.crash.$r; done &&
	test "$(rcs crash)" = "1 1 1 1 " &&
	grep "^dying at step $die\$" crash.2 &&
	grep "run 1," crash.0 &&
	test "$(grep -c "^epoch " crash.0)" = 2 &&
	for r in 0 1 3; do
		grep "^train.py: rank $r: RuntimeError: .*\[Errno 110\] iteration [0-9]*: .* held up by w3" err.crash.$r || return 1
	done &&
	test -s ck.pt
'

# Not the uninterrupted run's bits: DDP's first step after a start sends
# the whole model as one bucket, and agg's per-segment exponents depend on
# which values share a segment.
test_expect_success 'restarted as torchrun would (restart count 1, run 2), no agg-load: resumes at epoch 3, every rank ends with the same weights, the loss of the uninterrupted run' '
	AGG_RUN=1 TORCHELASTIC_RESTART_COUNT=1 && export AGG_RUN TORCHELASTIC_RESTART_COUNT &&
	# 4 torch ranks on a busy machine: a generous timeout where none may fire
	train resume agg --checkpoint ck.pt --agg-timeout 60 &&
	for r in 0 1 2 3; do cat err.resume.$r; done &&
	test "$(rcs resume)" = "0 0 0 0 " &&
	for r in 0 1 2 3; do
		grep "^resumed from ck.pt at epoch 2\$" resume.$r || return 1
	done &&
	grep "run 2," resume.0 &&
	one_digest resume &&
	grep "^epoch " resume.0 >r &&
	head -n 2 a >a2 && head -n 2 r >r2 && test_cmp a2 r2 &&
	paste -d" " a r | tee cmp &&
	awk "{ d = \$4 - \$10; if (d < 0) d = -d; if (\$2 != \$8 || d > 1e-4 * \$10) bad++ }
	     END { exit !(NR == $EPOCHS && !bad) }" cmp &&
	buckets=$(sed -n "s/^agg: \([0-9]*\) buckets in .*/\1/p" resume.0) &&
	test "$buckets" -le $(( (EPOCHS - 2) * steps * 4 ))
'

test_done
