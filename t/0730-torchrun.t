#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='demo/train.py under torchrun (static rendezvous, one agent a host): a rank that crashes once, torchrun restarts every worker, and the job resumes from its checkpoint as a newer agg run (the restart count), without agg-load'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/torch.sh"

test_have_prereq TORCH || skip_all "$PY cannot import torch and numpy (apt-get install python3-torch)"
test_have_prereq SKLEARN || skip_all "$PY cannot import sklearn (apt-get install python3-sklearn)"
test_have_prereq TORCHRUN || skip_all "no $TORCHRUN (python3-torch's torchrun)"
test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test_have_prereq JQ || skip_all "no jq"
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
STEPS=11	# (1797 digits - 299 held out) // (32 examples x 4 ranks)
TRAIN="$AGG_SRC/demo/train.py"

# torchrun's static rendezvous (--node_rank, --master_addr): an agent
# whose worker fails restarts it, with TORCHELASTIC_RESTART_COUNT one more,
# but never restarts a healthy one (the static handler has no nodes
# waiting).  Here the healthy ranks fail by themselves, on agg's timeout
# (--agg-timeout 20: the same for attempt 1, which must not time out
# with 4 torch ranks on a busy machine) waiting for the dead rank's gradients, so every agent
# restarts its worker once and all agree on the restart count, hence on
# the run (libagg: $AGG_RUN + the restart count).  The restarted workers
# meet in a process group of their own (the agent's store under
# /worker/attempt_1) before any sends an iteration of the new run.

# torchrun_all OUT ARGS...: a torchrun on each of w1..w4 at once (node
# rank i on w(i+1); w1's agent serves the static rendezvous' TCP store,
# which the workers' process group shares), waiting for all, each for at
# most 540 s (the harness bounds the file): torchrun's stdout OUT.R, stderr err.OUT.R (the workers'
# stderr too), exit status rc.OUT.R; every attempt's worker output in
# logs.OUT.R/*/attempt_N/0/std{out,err}.log.  --redirects 1 --tee 2, not
# 3 or the default 0: torch 1.13's Std.from_str finds neither value under
# Python 3.11 (an IntFlag iterates its one-bit members only).
torchrun_all() {
	t_o=$1 && shift && t_pids= &&
	for t_r in 0 1 2 3; do
		{ vcluster_run w$((t_r + 1)) timeout -k 10 540 "$TORCHRUN" \
			--nnodes 4 --nproc_per_node 1 --node_rank $t_r \
			--master_addr 10.90.0.1 --master_port 29530 \
			--max_restarts 2 --monitor_interval 1 \
			--log_dir logs.$t_o.$t_r --redirects 1 --tee 2 \
			"$TRAIN" --backend agg --epochs $EPOCHS "$@" >$t_o.$t_r 2>err.$t_o.$t_r
		  echo $? >rc.$t_o.$t_r; } &
		t_pids="$t_pids $!"
	done &&
	for t_p in $t_pids; do wait $t_p; done
}
rcs() { for r in 0 1 2 3; do printf '%s ' "$(cat rc.$1.$r)"; done; }
field() { sed -n "s/^$1 //p" "$2"; }
# log OUT R ATTEMPT [err]: rank R's stdout (stderr) in that attempt
log() { echo logs.$1.$2/*/attempt_$3/0/std${4:-out}.log; }
# attempts OUT: the attempts of every rank, "R N" a line
attempts() {
	for r in 0 1 2 3; do
		for a in logs.$1.$r/*/attempt_*; do echo "$r ${a##*_}"; done
	done
}
# one_digest OUT ATTEMPT: every rank's digest is the same: prints it
one_digest() {
	for r in 0 1 2 3; do field digest $(log $1 $r $2); done | sort -u >digests.$1 &&
	test "$(wc -l <digests.$1)" = 1 && grep -E "^[0-9a-f]{64}\$" digests.$1
}
# xdp_progs: each host's pinned xdp_prog id and its eth0's XDP program id
xdp_progs() {
	for h in $(vcluster_hosts); do
		echo "$h $(bpftool -j prog show pinned $AGG_PIN_DIR/1/$h/xdp_prog | jq .id)" \
			"$(vcluster_run $h ip -j link show dev eth0 | jq -r ".[0].xdp.prog.id")" || return 1
	done
}

test_expect_success 'setup: 4 workers and ps0 (MTU 9000), a plan the size of the whole model, agg-load once on every host' '
	size=$("$PY" "$TRAIN" --print-size) &&
	test "$size" -gt 100000 &&
	agg-plan -s ps --size $size --segment 2048 hosts.txt >plan.txt &&
	VCLUSTER_MTU=9000 && export VCLUSTER_MTU &&
	dp_setup hosts.txt plan.txt &&
	xdp_progs >progs.before && cat progs.before &&
	test "$(awk "\$2 ~ /^[0-9]+\$/ && \$3 ~ /^[0-9]+\$/" progs.before | wc -l)" = 5
'

test_expect_success 'rank 2 dies in epoch 3 of the first attempt only (--die-restart 0): every torchrun restarts its worker once and exits 0' '
	die=$((2 * STEPS + 3)) &&
	t0=$(date +%s) &&
	torchrun_all tr --checkpoint "$PWD/ck.pt" \
		--die-at-step $die --die-rank 2 --die-restart 0 --agg-timeout 20 &&
	say "4 torchruns, a crash and a restart: $(( $(date +%s) - t0 )) s" &&
	for r in 0 1 2 3; do cat $(log tr $r 0 err) $(log tr $r 1 err); done &&
	test "$(rcs tr)" = "0 0 0 0 " &&
	attempts tr >att && printf "0 0\n0 1\n1 0\n1 1\n2 0\n2 1\n3 0\n3 1\n" >att.want &&
	test_cmp att.want att
'

test_expect_success 'attempt 0 (run 0): rank 2 died at step '$((2 * STEPS + 3))', the others failed on agg'"'"'s timeout, naming w3' '
	grep "^dying at step $die\$" $(log tr 2 0) &&
	for r in 0 1 2 3; do
		grep "^agg: node w$((r + 1)) rank $r of 4, run 0," $(log tr $r 0) &&
		grep -q " $STEPS steps an epoch\$" $(log tr $r 0) &&
		test "$(grep -c "^epoch " $(log tr $r 0))" = 2 || return 1
	done &&
	for r in 0 1 3; do
		grep "^train.py: rank $r: RuntimeError: .*\[Errno 110\] iteration [0-9]*: .* held up by w3" \
			$(log tr $r 0 err) || return 1
	done
'

test_expect_success 'attempt 1 (restart count 1: run 1, no agg-load): every rank resumes at epoch 3 from the checkpoint and ends with the same weights' '
	for r in 0 1 2 3; do
		grep "^resumed from $PWD/ck.pt at epoch 2\$" $(log tr $r 1) &&
		grep "^agg: node w$((r + 1)) rank $r of 4, run 1," $(log tr $r 1) || return 1
	done &&
	one_digest tr 1 &&
	buckets=$(sed -n "s/^agg: \([0-9]*\) buckets in .*/\1/p" $(log tr 0 1)) &&
	say "attempt 1: $buckets buckets, $(grep setup_s $(log tr 0 1))" &&
	test "$buckets" -ge $(( (EPOCHS - 2) * STEPS )) &&
	test "$buckets" -le $(( (EPOCHS - 2) * STEPS * 4 ))
'

# (t/0720 compares such a resumed job's loss with a job without a crash.)
test_expect_success 'the restarted job: epochs 1-2 as attempt 0 saw them (from the checkpoint), the loss falling at every epoch, the accuracy above 0.8' '
	grep "^epoch " $(log tr 0 0) >e0 && grep "^epoch " $(log tr 0 1) >e1 &&
	cat e1 && test $(wc -l <e1) = $EPOCHS &&
	head -n 2 e1 >e1.2 && test_cmp e0 e1.2 &&
	awk "\$2 != NR || (NR > 1 && \$4 >= prev) { bad++ } { prev = \$4 } END { exit bad }" e1 &&
	field accuracy $(log tr 0 1) | awk "{ exit !(\$1 > 0.8) }"
'

test_expect_success 'nothing reloaded: every node'"'"'s pinned xdp_prog and its interface'"'"'s XDP program are those agg-load attached' '
	xdp_progs >progs.after &&
	test_cmp progs.before progs.after
'

test_expect_success 'agg.ddp.from_env refuses several torchrun ranks on one host (LOCAL_WORLD_SIZE 2)' '
	test_must_fail vcluster_run w1 env RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 WORLD_SIZE=8 \
		"$PY" -c "import agg.ddp; agg.ddp.from_env()" 2>err.lws &&
	grep "AggError: \[Errno 22\] agg.ddp: 2 ranks on this host (LOCAL_WORLD_SIZE), .*--nproc_per_node 1" err.lws
'

test_done
