#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='incast at a PS behind a shallow switch buffer (5 ms): the buffer overflows, every result still exact'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"

# Four 200 Mbit/s workers into a 400 Mbit/s PS: the PS's link carries
# everything, and its port buffers 5 ms of it (250,000 bytes: 30 jumbo
# segments).  The links are shaped at bw= x 0.01, far below what any
# machine pushes (800 Mbit/s of jumbo frames is 12,000 packets a second,
# a quarter of what the slowest machine seen here sent), so the incast
# is structural whatever the machine's speed or load: a fixed window of
# the plan's 128 segments a worker (agg-send --cc off: 512 segments at
# once into a buffer of 30) overflows it, and the switch drops.  What a
# user notices is asserted: the overflow happened (the port's own drop
# counter), and every worker still gets the bit-identical exact sum, with
# the congestion window and without it.  How much less the congestion
# window resends is a rate, so a benchmark's: bench/incast.sh (make
# bench) measures both in one run at the testbed's rates.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=20
w2  10.90.0.2   bw=20
w3  10.90.0.3   bw=20
w4  10.90.0.4   bw=20
EOF_HOSTS
VCLUSTER_MTU=9000
VCLUSTER_QUEUE_MS=5
VCLUSTER_BW_SCALE=0.01
export VCLUSTER_MTU VCLUSTER_QUEUE_MS VCLUSTER_BW_SCALE

test_expect_success 'a PS plan on the cluster, shaped, with 5 ms switch buffers in bytes' '
	agg-plan -s ps --segment 2048 --size 4000000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	vcluster_shape &&
	test "$(vcluster_rate ps0)" = 400 && test "$(vcluster_rate w1)" = 200 &&
	# 400 Mbit/s x 5 ms = 250000 bytes
	tc -n "$(vcluster_brns)" qdisc show dev "$(vcluster_port ps0)" >q &&
	grep -q "bfifo.*limit 250000b" q || { cat q; return 1; }
'

# Packets the switch dropped at ps0's port (its bfifo toward ps0).
switch_drops() {
	tc -s -n "$(vcluster_brns)" qdisc show dev "$(vcluster_port ps0)" |
		awk '$1 == "qdisc" { bfifo = ($2 == "bfifo") }
		     bfifo && $1 == "Sent" { for (i = 1; i < NF; i++) if ($i == "(dropped") { sub(/,/, "", $(i + 1)); print $(i + 1) } }'
}

resent_total() {
	for w in $(dp_workers); do dp_stat $w resent; done | awk '{ r += $1 } END { print r + 0 }'
}

# run FIRST LAST: iterations FIRST..LAST, each bit-identical on every
# worker and within 1e-6; "drops resends" over them in run.FIRST
run() {
	d0=$(switch_drops) && r0=$(resent_total) &&
	for i in $(seq $1 $2); do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done &&
	d1=$(switch_drops) && r1=$(resent_total) &&
	echo "$((d1 - d0)) $((r1 - r0))" >run.$1 &&
	say "iterations $1..$2${DP_SEND_ARGS:+ ($DP_SEND_ARGS)}: the switch dropped $((d1 - d0)), the workers resent $((r1 - r0))"
}

test_expect_success 'a fixed window: the switch buffer overflows, 3 iterations of 4 MB still exact' '
	DP_SEND_ARGS="-v --cc off" run 1 3 && cat send.[123].* &&
	read drops resent <run.1 &&
	# the precondition: the incast overflowed the buffer (else this
	# tests nothing), and the workers resent what it dropped
	test "$drops" -gt 0 && test "$resent" -gt 0
'

test_expect_success 'the congestion window: 3 iterations of 4 MB exact' '
	DP_SEND_ARGS=-v run 4 6 && cat send.[456].*
'

test_expect_success 'unload' '
	dp_unload
'

test_done
