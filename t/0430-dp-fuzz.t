#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the data plane after random, truncated and mutated packets (200000 of them; make soak: 5 million)'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/fuzz.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# AGG_FUZZ_SEED picks other packets (the seed is printed either way).
COUNT=${AGG_FUZZ_COUNT:-200000}	# make soak: 5000000
LEAF_COUNT=$((COUNT / 5))
SEED=${AGG_FUZZ_SEED:-1}
say "seed $SEED, $COUNT packets through a and ps0, $LEAF_COUNT through c1"

# One aggregator (a, a worker too) under the root, a leaf beside it.
fz_hosts >hosts.txt

# t/0431 runs this file again with FZ_SEGMENT (and VCLUSTER_MTU) set.
test_expect_success 'plan (100k float32, a aggregates two leaves), loaded on 5 hosts' '
	agg-plan --size 400000 ${FZ_SEGMENT:+--segment $FZ_SEGMENT} hosts.txt >plan.txt &&
	test "$(grep -c "^edge 0 c[0-9] a\$" plan.txt)" = 2 &&
	grep -q "^edge 0 a ps0\$" plan.txt &&
	dp_setup hosts.txt plan.txt &&
	fz_quiet
'

test_expect_success 'a clean iteration: the same bits on every worker, within 1e-6' '
	dp_inputs 1 && dp_allreduce 1 && dp_check 1
'

test_expect_success 'the pinned state before' '
	for h in a ps0 c1; do
		vcluster_run $h pktfuzz state --node $h >state.before.$h &&
		agg-stat --node $h >stat.before.$h || return 1
	done
'

# Valid templates use iterations 1 to 4: iteration 1 is finished, so they
# meet finished, collecting and empty slots, and stored results.
fuzz() {	# fuzz NODE COUNT SEED
	{ vcluster_run $1 pktfuzz run --node $1 --count $2 --seed $3 --iter 1 \
		--trace trace.$1 >fuzz.$1; echo $? >rc.$1; } &&
	agg-stat --node $1 >stat.after.$1 &&
	cat fuzz.$1 &&
	# 1: some packet was not accounted for (the next tests say which)
	test "$(cat rc.$1)" -le 1 &&
	test "$(fz_get fuzz.$1 packets)" = $2 &&
	test $(( $(fz_get fuzz.$1 run) + $(fz_get fuzz.$1 refused) )) = $2
}

test_expect_success "$COUNT packets through the aggregator a's program" '
	fuzz a $COUNT $SEED
'
test_expect_success "$COUNT packets through the root ps0's program" '
	fuzz ps0 $COUNT $((SEED + 1))
'
test_expect_success "$LEAF_COUNT packets through the leaf c1's program" '
	fuzz c1 $LEAF_COUNT $((SEED + 2))
'
for h in a ps0 c1; do
	test -s fuzz.$h && say "$h: $(fz_get fuzz.$h run) run," \
		"$(fz_get fuzz.$h refused) refused (shorter than Ethernet)," \
		"$(fz_get fuzz.$h seconds) s, $(fz_get fuzz.$h pps) packets/s"
done

# The kernel refuses a frame shorter than an Ethernet header; every frame
# it runs is either not agg traffic for the node (other) or agg traffic
# (rx), never both, never neither.
test_expect_success 'every packet run counts as other or rx, exactly once' '
	for h in a ps0 c1; do
		run=$(fz_get fuzz.$h run) &&
		other=$(fz_delta stat.before.$h stat.after.$h other) &&
		rx=$(fz_delta stat.before.$h stat.after.$h rx) &&
		echo "$h: run $run other $other rx $rx" &&
		test $((other + rx)) = $run &&
		test $rx -gt $((run / 4)) || return 1
	done
'

# Every rx packet gets exactly one outcome counter; pktfuzz checks it
# after each packet and writes the ones that do not add up to trace.NODE.
test_expect_success 'every rx packet has exactly one outcome counter' '
	for h in a ps0 c1; do
		rx=$(fz_delta stat.before.$h stat.after.$h rx) &&
		out=$(fz_outcomes stat.before.$h stat.after.$h) &&
		echo "$h: rx $rx outcomes $out unaccounted $(fz_get fuzz.$h unaccounted)" &&
		head -n 5 trace.$h &&
		test $out = $rx &&
		test "$(fz_get fuzz.$h unaccounted)" = 0 || return 1
	done
'

test_expect_success 'a packet the program answered has an outcome that answers' '
	for h in a ps0 c1; do
		grep "^verdict_" fuzz.$h >verdicts.$h &&
		! grep -E "^verdict_[a-z_]+_(aborted|redirect|other) " verdicts.$h &&
		! grep -E "^verdict_(other|drop_[a-z]+|pending)_(drop|pass|tx) " verdicts.$h |
			grep -vE "^verdict_(other_pass|drop_[a-z]+_drop|pending_drop) " &&
		! grep -E "^verdict_(probes|served|relayed)_drop " verdicts.$h || return 1
	done
'

test_expect_success 'the pinned state after: slots consistent, configuration unchanged' '
	for h in a ps0 c1; do
		vcluster_run $h pktfuzz state --node $h >state.after.$h &&
		test "$(fz_get state.after.$h slots_bad)" = 0 &&
		for m in members nodes trees kids segmap plan; do
			test "$(fz_get state.before.$h digest_$m)" = \
			     "$(fz_get state.after.$h digest_$m)" || return 1
		done &&
		test -e "$AGG_PIN_DIR/1/$h/tc_link" &&
		vcluster_run $h ip link show dev eth0 | grep -q "prog/xdp" || return 1
	done &&
	test "$(fz_get state.after.a slots_used)" -gt 0
'

# Packets with the job's token may carry any iteration: a node takes one at
# most 1024 ahead of the newest it has seen (drop_ahead), so none can move
# every slot out of the job's reach; the fuzzer saw to it that some tried.
test_expect_success 'far iterations with the token were refused (drop_ahead), not taken' '
	for h in a ps0 c1; do
		test "$(fz_get fuzz.$h max_iter)" -gt 100000 &&
		test "$(fz_delta stat.before.$h stat.after.$h drop_ahead)" -gt 0 || return 1
	done
'

# Whatever iterations the fuzz left in the slots, a new run supersedes them
# all, from any iteration, without a reload.
test_expect_success 'a new run gives the clean run'"'"'s bits, nothing refused' '
	for w in $(dp_workers); do cp in.1.$w in.2.$w || return 1; done &&
	for h in $(vcluster_hosts); do agg-stat --node $h >stat.pre.$h || return 1; done &&
	AGG_RUN=1 && export AGG_RUN &&
	dp_allreduce 2 && dp_check 2 &&
	for w in $(dp_workers); do cmp out.1.$w out.2.$w || return 1; done &&
	for h in $(vcluster_hosts); do
		agg-stat --node $h >stat.post.$h &&
		fz_diff stat.pre.$h stat.post.$h >d.$h &&
		! grep -E "^(drop_[a-z]+|error) " d.$h | grep -v "^drop_dup " || return 1
	done
'

test_expect_success 'and the one after it, new inputs, within 1e-6' '
	AGG_RUN=1 && export AGG_RUN &&
	dp_inputs 3 && dp_allreduce 3 && dp_check 3
'

test_done
