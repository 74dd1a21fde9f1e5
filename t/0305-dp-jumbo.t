#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the data plane with jumbo segments: slots in chunks'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# A slot is cut into chunks of at most 1024 values (agg-wire(7), "Aggregation"):
# 16368 values, the largest IPv4 packet, make 16 chunks of 1023 (1024
# accumulators: a multiple of 4); 2050
# make 3 of 684, the last one short (682).  The ALEPH testbed of t/0300,
# so aggregators send multi-chunk aggregates up as well.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.3.100 bw=40 role=ps
a   10.90.3.1   bw=30
b1  10.90.3.2   bw=20
b2  10.90.3.3   bw=20
c1  10.90.3.4   bw=10
c2  10.90.3.5   bw=10
c3  10.90.3.6   bw=10
c4  10.90.3.7   bw=10
c5  10.90.3.8   bw=10
EOF_HOSTS
VCLUSTER_MTU=65535

# 2 windows of --slots per tree, each slot in chunks
slots_map() {	# slots_map HOST FIELD: max_entries or bytes_value of its slots map
	bpftool -j map show pinned "$AGG_PIN_DIR/1/$1/slots" | jq ".$2"
}

test_expect_success 'segment 16368 at MTU 65535: 16 chunks of 1023 values per slot' '
	agg-plan --segment 16368 --slots 16 --size 4000000 hosts.txt >plan.txt &&
	grep -q "^edge 0 c[0-9] [ab]" plan.txt &&
	dp_setup hosts.txt plan.txt &&
	test "$(slots_map ps0 max_entries)" = $((2 * 16 * 16)) &&
	test "$(slots_map ps0 bytes_value)" = $((32 + 8 * 1024)) &&
	test "$(slots_map a bytes_value)" = $((32 + 8 * 1024))
'

test_expect_success 'three iterations: the same bits everywhere, within 1e-6 of the float64 sum' '
	for i in 1 2 3; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done
'

test_expect_success 'max and min, NaN and Inf' '
	DP_OP=max && dp_inputs 4 && dp_allreduce 4 && dp_check 4 &&
	DP_OP=min && dp_inputs 5 && dp_allreduce 5 && dp_check 5 &&
	DP_OP= && dp_inputs 6 nan && dp_allreduce 6 && dp_check 6
'

test_expect_success 'no packet malformed or in error, every segment done' '
	agg-stat --node ps0 -j >stat.ps0 &&
	test "$(jq .drop_malformed stat.ps0)" = 0 &&
	test "$(jq .error stat.ps0)" = 0 &&
	test "$(jq .done stat.ps0)" -ge $((6 * 63))
'

test_expect_success 'the same inputs give the same bits again' '
	for w in $(dp_workers); do cp in.1.$w in.7.$w || return 1; done &&
	dp_allreduce 7 &&
	for w in $(dp_workers); do cmp out.1.$w out.7.$w || return 1; done
'

# Resends meet slots whose chunks are half taken by the original on the
# other CPU, finished slots answer them: every outcome path of a chunk.
# AGG_LOSS_ITERS of them (default 4, at most 12: iteration 20 comes next).
ITERS=${AGG_LOSS_ITERS:-4}
test_expect_success "$ITERS iterations at 10% loss both ways: bit-exact" '
	test $ITERS -le 12 &&
	loss_on 100000 &&
	for i in $(seq 8 $((7 + ITERS))); do
		for w in $(dp_workers); do cp in.1.$w in.$i.$w || return 1; done &&
		dp_allreduce $i &&
		for w in $(dp_workers); do cmp out.1.$w out.$i.$w || return 1; done
	done &&
	loss_stats >loss && cat loss &&
	test "$(loss_stat dropped)" -gt 0 &&
	loss_off &&
	agg-stat --node ps0 -j >stat.loss &&
	test "$(jq .error stat.loss)" = 0 &&
	test "$(jq .served stat.loss)" -gt 0
'

test_expect_success 'segment 2050: 3 chunks, the last one shorter' '
	agg-plan --segment 2050 --size 4000000 hosts.txt >plan2.txt &&
	for h in $(vcluster_hosts); do vcluster_run $h agg-load plan2.txt || return 1; done &&
	DP_PLAN=plan2.txt && DP_SEG=2050 &&
	test "$(dp_plan_field slots)" = 127 &&
	test "$(slots_map ps0 max_entries)" = $((2 * 127 * 3)) &&
	test "$(slots_map ps0 bytes_value)" = $((32 + 8 * 684))
'

test_expect_success 'segment 2050: sum, max and min, bit-identical, within 1e-6' '
	for i in 20 21; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done &&
	DP_OP=max && dp_inputs 22 && dp_allreduce 22 && dp_check 22 &&
	DP_OP=min && dp_inputs 23 && dp_allreduce 23 && dp_check 23 &&
	DP_OP=
'

test_expect_success 'unload' '
	dp_unload && vcluster_down
'

test_done
