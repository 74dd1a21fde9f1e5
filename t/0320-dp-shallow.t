#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='incast at a PS behind a shallow switch buffer (5 ms): the senders keep the queue, few resends'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"

# Four 1 Gbit/s workers into a 2 Gbit/s PS: the PS's link carries
# everything, and its port buffers 5 ms (1.25 MB, 150 jumbo segments).
# A fixed window of the plan's 128 segments a worker (agg-send --cc off)
# overflows it, and every worker resends what one lost: about 35% of all
# packets are resends.  The senders' congestion window keeps the queue
# (2-5% on an idle machine, most of it slow start's first overshoot in
# each new agg-send); both are measured in the same run, so a busy
# machine slows both alike.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=20
w2  10.90.0.2   bw=20
w3  10.90.0.3   bw=20
w4  10.90.0.4   bw=20
EOF_HOSTS
VCLUSTER_MTU=9000
VCLUSTER_QUEUE_MS=5
export VCLUSTER_MTU VCLUSTER_QUEUE_MS

test_expect_success 'a PS plan on the cluster, shaped, with 5 ms switch buffers in bytes' '
	agg-plan -s ps --segment 2048 --size 40000000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	vcluster_shape &&
	# 2000 Mbit/s x 5 ms = 1250000 bytes, both ways
	tc -n "$(vcluster_brns)" qdisc show dev "$(vcluster_port ps0)" >q &&
	grep -q "bfifo.*limit 1250000b" q || { cat q; return 1; }
'

sent_total() {
	for w in $(dp_workers); do
		echo "$(dp_stat $w sent) $(dp_stat $w sent_local) $(dp_stat $w resent)"
	done | awk '{ s += $1 + $2; r += $3 } END { print s, r }'
}

# resent_in FIRST LAST: packets sent and resent by the workers over
# iterations FIRST..LAST (agg-stat's counters before and after)
sent_run() {
	sent_total >before.$1 &&
	for i in $(seq $1 $2); do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done &&
	sent_total >after.$1 &&
	read s0 r0 <before.$1 && read s1 r1 <after.$1 &&
	echo "$((s1 - s0)) $((r1 - r0))" >run.$1 &&
	echo "iterations $1..$2${DP_SEND_ARGS:+ ($DP_SEND_ARGS)}: sent $((s1 - s0)) resent $((r1 - r0))"
}

test_expect_success '3 iterations of 40 MB each way, bit-identical, within 1e-6; the congestion window resends under half what a fixed one does' '
	DP_SEND_ARGS=-v sent_run 1 3 && cat send.[123].* &&
	DP_SEND_ARGS="-v --cc off" sent_run 4 6 && cat send.[456].* &&
	read sent resent <run.1 && read sent_off resent_off <run.4 &&
	test "$sent" -gt 0 &&
	# the fixed window overflows the buffer (else this tests nothing) ...
	test $((resent_off * 10)) -gt "$sent_off" &&
	# ... the congestion window much less
	test $((resent * 2)) -lt "$resent_off"
'

test_expect_success 'unload' '
	dp_unload
'

test_done
