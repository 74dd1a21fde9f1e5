#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='runs: a retried step never gets the old sum, a restarted job needs no reload; results read whole; sums poisoned both ways'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/fuzz.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# Three workers straight under a parameter server; 1000 values a worker.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS
N=1000

const() {	# const VALUE FILE: N float32 values, all VALUE
	perl -e 'print pack("f<*", ($ARGV[0]) x $ARGV[1])' "$1" "$N" >"$2"
}
all_are() {	# all_are VALUE FILE: FILE holds N float32 values, all VALUE
	test "$(stat -c %s "$2")" = $((4 * N)) &&
	perl -e 'local $/; $_ = <STDIN>; for (unpack("f<*", $_)) { exit 1 if $_ != $ARGV[0] }' \
		"$1" <"$2"
}
# step ITER V1 V2 V3: agg-recv and agg-send on every worker (worker i
# sends Vi); the exit status of each in rc.recv.ITER.W and rc.send.ITER.W
step() {
	it=$1 && shift &&
	pids= &&
	for w in w1 w2 w3; do
		const $1 in.$it.$w && shift && rm -f out.$it.$w || return 1
	done &&
	for w in w1 w2 w3; do
		{ vcluster_run $w agg-recv --iter $it --timeout 10 out.$it.$w 2>recv.$it.$w
		  echo $? >rc.recv.$it.$w; } &
		pids="$pids $!"
	done &&
	for w in w1 w2 w3; do
		{ vcluster_run $w agg-send --iter $it --timeout 10 in.$it.$w 2>send.$it.$w
		  echo $? >rc.send.$it.$w; } &
		pids="$pids $!"
	done &&
	for p in $pids; do wait $p; done
}
rcs() {		# rcs ITER: "send recv" exit status of every worker, one line
	for w in w1 w2 w3; do printf "%s%s " "$(cat rc.send.$1.$w)" "$(cat rc.recv.$1.$w)"; done
}

test_expect_success 'plan (every worker a child of ps0), loaded' '
	agg-plan -s ps --size $((4 * N)) hosts.txt >plan.txt &&
	test "$(grep -c "^edge 0 w[0-9] ps0\$" plan.txt)" = 3 &&
	dp_setup hosts.txt plan.txt &&
	NEXP=$(( ( (N + DP_SEG - 1) / DP_SEG + DP_SEG - 1) / DP_SEG ))
'

test_expect_success 'iterations 1 to 3 of run 0; iteration 3 sums to 9' '
	step 1 1 1 1 && test "$(rcs 1)" = "00 00 00 " &&
	step 2 2 2 2 && test "$(rcs 2)" = "00 00 00 " &&
	step 3 1 3 5 && test "$(rcs 3)" = "00 00 00 " &&
	for w in w1 w2 w3; do all_are 9 out.3.$w || return 1; done
'

# The issue: the retry used to exit 0 everywhere and write 9.
test_expect_success 'iteration 3 again, summing to 21 (a retried step): refused everywhere, exit 2, nothing written' '
	agg-stat --node ps0 >ps0.before &&
	step 3 5 7 9 &&
	test "$(rcs 3)" = "22 22 22 " &&
	for w in w1 w2 w3; do
		test ! -e out.3.$w &&
		grep "agg-send: run 0 iteration 3 was sent on node $w already" send.3.$w &&
		grep "agg-recv: run 0 iteration 3 was received on node $w already" recv.3.$w || return 1
	done &&
	agg-stat --node ps0 >ps0.after &&
	test "$(fz_delta ps0.before ps0.after rx)" = 0
'

test_expect_success 'the retried step as iteration 4: 21' '
	step 4 5 7 9 && test "$(rcs 4)" = "00 00 00 " &&
	for w in w1 w2 w3; do all_are 21 out.4.$w || return 1; done
'

# The issue: a new start from iteration 1 used to time out until a reload.
test_expect_success 'the job restarted as run 1 from iteration 1, no reload: its own sums' '
	AGG_RUN=1 && export AGG_RUN &&
	step 1 4 4 4 && test "$(rcs 1)" = "00 00 00 " &&
	for w in w1 w2 w3; do all_are 12 out.1.$w || return 1; done &&
	step 2 1 2 3 && test "$(rcs 2)" = "00 00 00 " &&
	for w in w1 w2 w3; do all_are 6 out.2.$w || return 1; done
'

test_expect_success 'restarted again with the same run: refused, exit 2, told to take a new run' '
	AGG_RUN=1 && export AGG_RUN &&
	step 1 4 4 4 && test "$(rcs 1)" = "22 22 22 " &&
	grep "a restarted job a new run (--run, AGG_RUN)" send.1.w1
'

test_expect_success 'run 2 from a checkpoint at iteration 4000 (any k): its own sums' '
	AGG_RUN=2 && export AGG_RUN &&
	step 4000 2 2 3 && test "$(rcs 4000)" = "00 00 00 " &&
	for w in w1 w2 w3; do all_are 7 out.4000.$w || return 1; done
'

test_expect_success 'an older run after a newer one: refused, exit 2' '
	AGG_RUN=1 && export AGG_RUN &&
	step 5 1 1 1 && test "$(rcs 5)" = "22 22 22 " &&
	grep "agg-send: run 1 is over on node w1: it has seen run 2" send.5.w1
'

# A result whose sequence lock is odd is being rewritten: agg-recv must not
# take it (it used to read results without looking).
test_expect_success 'a result being written is not read: agg-recv waits, then reads it whole' '
	AGG_RUN=2 && export AGG_RUN &&
	pids= &&
	for w in w1 w2 w3; do
		const 1 in.4001.$w &&
		{ vcluster_run $w agg-send --iter 4001 --timeout 10 in.4001.$w & } &&
		pids="$pids $!" || return 1
	done &&
	for p in $pids; do wait $p || return 1; done &&
	seg=$NEXP &&
	metatool "$AGG_PIN_DIR/1/w1" $seg show >before.meta &&
	grep "^seq [0-9]*[02468] run 2 iter 4001\$" before.meta &&
	# held until agg-recv has given up, however long that takes
	{ metatool "$AGG_PIN_DIR/1/w1" $seg hold >held & } &&
	hold=$! &&
	test_when_finished "kill $hold 2>/dev/null || :" &&
	n=0 && until test -s held; do n=$((n + 1)) && test $n -lt 600 || return 1; sleep 0.05; done &&
	test_expect_code 1 vcluster_run w1 agg-recv --iter 4001 --timeout 1 out.a 2>err &&
	grep "iteration 4001: 1 of 8 result segments missing" err &&
	test ! -e out.a &&
	kill $hold && wait $hold &&
	metatool "$AGG_PIN_DIR/1/w1" $seg show >after.meta &&
	grep "^seq [0-9]*[02468] run 2 iter 4001\$" after.meta &&
	vcluster_run w1 agg-recv --iter 4001 --timeout 5 out.b &&
	all_are 3 out.b
'

# Crafted sums past +-2^30 (no honest gradient makes one: the quantization
# keeps any sum of W values within): both directions become NaN's poison.
# val= is the int32 as an unsigned number: 3894967296 is -4e8, 3994967296 -3e8.
test_expect_success 'a sum below -2^30 is poison, as one above 2^30 is' '
	agg-stat --node ps0 >ps0.before &&
	for w in w1 w2 w3; do
		vcluster_run $w pktfuzz send --plan plan.txt --to ps0 --count 1 \
			"run=2,iter=4002,seg=$NEXP,val=3894967296" \
			"run=2,iter=4002,seg=$((NEXP + 1)),val=400000000" \
			"run=2,iter=4002,seg=$((NEXP + 2)),val=3994967296" >sent.$w || return 1
	done &&
	n=0 &&
	until vcluster_run w1 metatool "$AGG_PIN_DIR/1/w1" $((NEXP + 2)) show | grep -q "iter 4002\$"; do
		n=$((n + 1)) && test $n -lt 100 || return 1
		sleep 0.05
	done &&
	for s in $NEXP $((NEXP + 1)) $((NEXP + 2)); do
		bpftool -j map lookup pinned "$AGG_PIN_DIR/1/w1/results" key $s 0 0 0 |
			jq -r ".value[0:4] | join(\" \")" >v.$s || return 1
	done &&
	test "$(cat v.$NEXP)" = "0xff 0xff 0xff 0x7f" &&
	test "$(cat v.$((NEXP + 1)))" = "0xff 0xff 0xff 0x7f" &&
	# -9e8: within the limit, sent on as it is
	test "$(cat v.$((NEXP + 2)))" = "0x00 0x17 0x5b 0xca" &&
	agg-stat --node ps0 >ps0.after &&
	test "$(fz_delta ps0.before ps0.after saturated)" = 2
'

test_done
