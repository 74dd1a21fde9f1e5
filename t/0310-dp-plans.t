#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the data plane on a three-level RAT plan and a plan with two PS'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# RAT: two pods of two racks of two workers; one aggregator per rack and
# per pod, so a gradient from w4 climbs w4 -> w3 (rack) -> w1 (pod) -> ps0.
cat >rat.txt <<'EOF_HOSTS'
ps0 10.90.1.100 bw=40 role=ps
w1  10.90.1.1 bw=10 rack=r1 pod=p1
w2  10.90.1.2 bw=10 rack=r1 pod=p1
w3  10.90.1.3 bw=10 rack=r2 pod=p1
w4  10.90.1.4 bw=10 rack=r2 pod=p1
w5  10.90.1.5 bw=10 rack=r3 pod=p2
w6  10.90.1.6 bw=10 rack=r3 pod=p2
w7  10.90.1.7 bw=10 rack=r4 pod=p2
w8  10.90.1.8 bw=10 rack=r4 pod=p2
EOF_HOSTS

# ALEPH's multi-PS split: two trees, weights by PS bandwidth (2:1).
cat >twops.txt <<'EOF_HOSTS'
ps0 10.90.2.100 bw=40 role=ps
ps1 10.90.2.101 bw=20 role=ps
w1  10.90.2.1 bw=10
w2  10.90.2.2 bw=10
w3  10.90.2.3 bw=10
w4  10.90.2.4 bw=10
w5  10.90.2.5 bw=10
w6  10.90.2.6 bw=10
EOF_HOSTS

test_expect_success 'rat, the tree of the PS: three levels of aggregation' '
	agg-plan -s rat --trees 1 --size 4000000 rat.txt >plan.txt &&
	test "$(awk "\$1 == \"edge\" { p[\$3] = \$4 } END { n = 0; for (x = \"w4\"; x in p; x = p[x]) n++; print n }" plan.txt)" = 3
'

test_expect_success 'rat: three iterations of 1M float32, the same bits everywhere, within 1e-6' '
	dp_setup rat.txt plan.txt rat$$- &&
	for i in 1 2 3; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done
'

test_expect_success 'rat: max and min' '
	DP_OP=max && dp_inputs 4 && dp_allreduce 4 && dp_check 4 &&
	DP_OP=min && dp_inputs 5 && dp_allreduce 5 && dp_check 5 &&
	DP_OP=
'

test_expect_success 'rat: unload' '
	dp_unload && vcluster_down
'

test_expect_success 'two PS: segments split 2:1 between the trees' '
	agg-plan --size 4000000 twops.txt >plan.txt &&
	grep "^tree 0 root=ps0 weight=2" plan.txt &&
	grep "^tree 1 root=ps1 weight=1" plan.txt &&
	dp_setup twops.txt plan.txt twops$$- &&
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	agg-stat --node ps0 >ps0.stat && agg-stat --node ps1 >ps1.stat &&
	d0=$(awk "\$1 == \"done\" { print \$2 }" ps0.stat) &&
	d1=$(awk "\$1 == \"done\" { print \$2 }" ps1.stat) &&
	echo "ps0 $d0 ps1 $d1" &&
	test $((d0 + d1)) = $((7813 + 62)) &&
	test $((d0 - 2 * d1)) -ge -2 && test $((d0 - 2 * d1)) -le 2
'

test_expect_success 'two PS: more iterations, and the same inputs give the same bits' '
	for i in 2 3; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done &&
	for w in $(dp_workers); do cp in.2.$w in.7.$w || return 1; done &&
	dp_allreduce 7 &&
	for w in $(dp_workers); do cmp out.2.$w out.7.$w || return 1; done
'

test_expect_success 'two PS: unload' '
	dp_unload
'

test_done
