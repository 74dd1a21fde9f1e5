#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-check on live nodes: Alg. 2 on a virtual cluster, and --request'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test_have_prereq JQ || skip_all "no jq (make deps installs it)"

# a aggregates two of the c's (and itself); the third sends to ps0.
cat >hosts.txt <<'EOF'
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
EOF

# agg-check on host NAME for node NAME: ck NAME [OPTION...]
ck() {
	ck_n=$1; shift
	vcluster_run "$ck_n" agg-check --node "$ck_n" "$@"
}
# The field KEY=VALUE of the summary line in FILE.
field() {
	sed -n "s/^summary .* $1=\([^ ]*\).*/\1/p" "$2"
}

test_expect_success 'setup: 4000 float32 values (33 wire segments), loaded on 5 hosts' '
	agg-plan --size 16000 hosts.txt >plan.txt &&
	grep -x "edge 0 c1 a" plan.txt && grep -x "edge 0 c3 a" plan.txt &&
	grep -x "edge 0 c2 ps0" plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'before any iteration: nothing seen, nothing missing, exit 0' '
	for h in $(vcluster_hosts); do
		ck $h >out.$h || return 1
		grep -x "summary node=$h iter=none ok=yes" out.$h || return 1
	done &&
	ck c1 -j >none.json &&
	jq -e ".node == \"c1\" and .iter == null and .ok" none.json
'

test_expect_success 'after a complete iteration agg-check exits 0 on every node' '
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	for h in $(vcluster_hosts); do
		ck $h >out.$h || { cat out.$h; return 1; }
		test $(wc -l <out.$h) = 1 &&
		test "$(field iter out.$h)" = 1 &&
		test "$(field incomplete out.$h)" = 0 &&
		test "$(field ok out.$h)" = yes || return 1
	done &&
	grep "results_missing=- superseded=- signal=-" out.ps0 &&
	grep "results_missing=0 superseded=0 signal=yes" out.c1 &&
	ck a -j >a.json &&
	jq -e ".ok and .iter == 1 and (.incomplete | length) == 0 and
		.results_missing.count == 0 and .signal" a.json
'

test_expect_success 'a worker that does not send: its parent names it, exit 1' '
	dp_inputs 2 &&
	pids= &&
	for w in a c1 c2; do
		vcluster_run $w agg-send --iter 2 --timeout 1 in.2.$w 2>send.2.$w &
		pids="$pids $!"
	done &&
	for p in $pids; do test_expect_code 1 wait $p || return 1; done &&
	test_expect_code 1 ck a >a.out &&
	cat a.out &&
	# The exponent phase never completes: segment 0 waits for c3 alone.
	grep -x "incomplete node=a iter=2 seg=0 tree=0 missing=c3 in=c1,a" a.out &&
	test $(grep -c "^incomplete " a.out) = 1 &&
	grep -x "not-started node=a iter=2 segs=1-32 count=32" a.out &&
	grep "^summary node=a iter=2 run=0 incomplete=1 not_started=32 " a.out &&
	test "$(field ok a.out)" = no &&
	test_expect_code 1 ck a -j >a.json &&
	jq -e "[.incomplete[].missing] == [[\"c3\"]] and .ok == false" a.json &&
	# Above it, ps0 waits for a: the subtree that is incomplete.
	test_expect_code 1 ck ps0 >ps0.out &&
	grep -x "incomplete node=ps0 iter=2 seg=0 tree=0 missing=a in=c2" ps0.out
'

test_expect_success 'workers name the results they miss as ranges; --iter picks the iteration' '
	for w in c1 c2 c3; do
		test_expect_code 1 ck $w --iter 2 >$w.out &&
		grep -x "results-missing node=$w iter=2 segs=0-32 count=33" $w.out &&
		grep "results_missing=33 superseded=0 signal=no ok=no" $w.out || return 1
	done &&
	# Without --iter: the newest iteration the node has seen, the one its
	# own agg-send opened too (2), in the newest run.
	test_expect_code 1 ck c1 >c1.default &&
	test "$(field iter c1.default)" = 2 &&
	test "$(field run c1.default)" = 0
'

test_expect_success '--request for segments the parent has not finished: pending, nothing comes' '
	before=$(dp_stat a pending) &&
	test_expect_code 1 ck c1 --iter 2 --request --timeout 0.3 >req.out &&
	grep -x "request node=c1 iter=2 requested=33 op=sum arrived=0 still_missing=33" req.out &&
	# the requests may still be on their way (softirq work deferred to
	# ksoftirqd on a busy machine): up to 30 s for them to be counted
	n=0 &&
	until after=$(dp_stat a pending) && [ $((after - before)) -ge 33 ]; do
		n=$((n + 1)) && test $n -lt 600 || break
		sleep 0.05
	done &&
	test $((after - before)) = 33
'

# Results of 4 segments dropped on their way to c1 (the bridge port's
# egress, toward c1): c1's agg-send resends them until it gives up.  This
# kernel has no gact ("action drop"); mirred to a device that is down
# drops (an ifb never set up).  u32 offsets count from the IP header: the
# agg header's type at 29, its segment (little-endian) at 44.
drop_results() {
	br=$(vcluster_brns) port=$(vcluster_port c1) &&
	ip -n $br link add ckdrop type ifb &&
	tc -n $br qdisc add dev $port clsact &&
	for s in 05 07 08 09; do
		tc -n $br filter add dev $port egress protocol ip prio 1 u32 \
			match ip dport 9999 0xffff match u8 2 0xff at 29 \
			match u32 0x${s}000000 0xffffffff at 44 \
			action mirred egress redirect dev ckdrop || return 1
	done
}

# Packets the filters of drop_results dropped.
dropped() {
	tc -n "$(vcluster_brns)" -s filter show dev "$(vcluster_port c1)" egress |
		awk '$1 == "Sent" { n += $4 } END { print n + 0 }'
}

test_expect_success 'results lost on the way to one worker: it names them, the others are fine' '
	dp_inputs 3 &&
	drop_results &&
	test_when_finished "tc -n $(vcluster_brns) qdisc del dev $(vcluster_port c1) clsact" &&
	a0=$(dp_stat a added) && p0=$(dp_stat ps0 added) &&
	for w in a c2 c3; do
		vcluster_run $w agg-send --iter 3 --timeout 30 in.3.$w 2>send.3.$w &
		eval "pid_$w=\$!"
	done &&
	# c1 times out (its results are dropped), so it starts once the
	# others have sent their exponents: a has its own and the one of c3,
	# ps0 the one of c2
	n=0 &&
	until [ $(dp_stat a added) -ge $((a0 + 2)) ] && [ $(dp_stat ps0 added) -ge $((p0 + 1)) ]; do
		n=$((n + 1)) && test $n -lt 600 || return 1
		sleep 0.05
	done &&
	{ vcluster_run c1 agg-send --iter 3 --timeout 3 in.3.c1 2>send.3.c1 & } &&
	pid_c1=$! &&
	for w in a c2 c3; do eval "wait \$pid_$w" || return 1; done &&
	test_expect_code 1 wait $pid_c1 &&
	test_expect_code 1 ck c1 >c1.out &&
	cat c1.out &&
	grep -x "results-missing node=c1 iter=3 segs=5,7-9 count=4" c1.out &&
	grep "^summary node=c1 iter=3 run=0 incomplete=0 not_started=0 unknown=0 results_missing=4 " c1.out &&
	# At least the 4 results, and the resends of c1 answered again.
	test "$(dropped)" -gt 4 &&
	for h in ps0 a c2 c3; do
		ck $h >$h.out || { cat $h.out; return 1; }
	done
'

test_expect_success '--request gets them from the parent: exit 0, and agg-recv has the iteration' '
	served=$(dp_stat a served) &&
	ck c1 --request --timeout 10 >req.out &&
	cat req.out &&
	grep -x "request node=c1 iter=3 requested=4 op=sum arrived=4 still_missing=0" req.out &&
	grep "^summary node=c1 iter=3 .* results_missing=0 superseded=0 signal=yes ok=yes" req.out &&
	test $(( $(dp_stat a served) - served )) = 4 &&
	ck c1 &&
	for w in $(dp_workers); do
		vcluster_run $w agg-recv --iter 3 --timeout 2 out.3.$w || return 1
	done &&
	dp_check 3
'

test_expect_success 'bad usage and nothing loaded: exit 2' '
	test_expect_code 2 agg-check --node nosuch 2>err &&
	grep "^agg-check: node nosuch of job 1 is not loaded" err &&
	test_expect_code 2 agg-check --pin-dir /sys/fs/bpf/agg-none-$$ --node a 2>err &&
	test_expect_code 2 agg-check frobnicate 2>err &&
	grep "unknown command .frobnicate." err &&
	test_expect_code 2 agg-check --timeout 1 --node a 2>err &&
	grep -- "--timeout and --op go with --request" err &&
	test_expect_code 2 agg-check --request --pcap x.pcap 2>err &&
	test_expect_code 2 ck ps0 --request 2>err &&
	grep "node ps0 is a parameter server" err
'

test_expect_success '--request needs the node'"'"'s network namespace, a scan does not' '
	agg-check --node a >root-ns.out &&
	ck a >a-ns.out &&
	test_cmp a-ns.out root-ns.out &&
	test_expect_code 3 agg-check --node c1 --iter 2 --request 2>err &&
	grep "run it in the node.s network namespace" err
'

test_done
