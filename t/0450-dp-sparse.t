#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the sparse cold path: Zipf gradients of 8 workers summed on the root, with and without loss'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
command -v jq >/dev/null || skip_all "no jq (make deps installs it)"

# A parameter server and 8 workers; the plan's dense size is small (the
# dense path is not used here).  ZEBRA's workload: a 1M-row table of
# 16-wide embeddings, 1.5% of the rows touched per worker per iteration.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10
w1  10.90.0.2   bw=10
w2  10.90.0.3   bw=10
w3  10.90.0.4   bw=10
w4  10.90.0.5   bw=10
w5  10.90.0.6   bw=10
w6  10.90.0.7   bw=10
w7  10.90.0.8   bw=10
EOF_HOSTS
T=${AGG_SPARSE_TIMEOUT:-60}

# gen ITER: one Zipf gradient per worker, in.ITER.NAME
gen() {
	k=0
	for w in $(dp_workers); do
		agg-hot gen --sparse --binary --ids 1M --width 16 --touch 0.015 --seed 7 \
			--worker $k --iter "$1" >"in.$1.$w" || return 1
		k=$((k + 1))
	done
}

# round ITER: agg-recv --sparse on every host (the root serves), then
# agg-send --sparse on every worker; out.ITER.HOST, their -j in *.json.
round() {
	r_pids=
	for h in $(vcluster_hosts); do
		nsenter --net="/var/run/netns/$(vcluster_ns "$h")" -- \
			agg-recv --sparse $R_OPTS -j --iter "$1" --timeout "$T" "out.$1.$h" \
			>"recv.$1.$h.json" 2>"recv.$1.$h.err" &
		r_pids="$r_pids $!"
	done
	for w in $(dp_workers); do
		nsenter --net="/var/run/netns/$(vcluster_ns "$w")" -- \
			agg-send --sparse -j --iter "$1" --timeout "$T" "in.$1.$w" \
			>"send.$1.$w.json" 2>"send.$1.$w.err" &
		r_pids="$r_pids $!"
	done
	r_rc=0
	for p in $r_pids; do wait "$p" || r_rc=1; done
	[ $r_rc = 0 ] || tail -n 3 recv.$1.*.err send.$1.*.err >&2
	return $r_rc
}

# same ITER: every host wrote the same bytes, within 1e-6 of the float64 sum
same() {
	for h in $(vcluster_hosts); do
		cmp "out.$1.ps0" "out.$1.$h" || return 1
	done &&
	ins= &&
	for w in $(dp_workers); do ins="$ins in.$1.$w"; done &&
	sparsetool check "out.$1.ps0" $ins >check.$1 &&
	cat check.$1
}

# sum_of KEY FILES...: KEY of the -j objects in FILES, added up
sum_of() {
	k=$1
	shift
	jq -s "map(.$k) | add" "$@"
}

# counted ITER: the root kept each worker packet once (its taken is the
# workers' first transmissions) and every pair once; every worker got
# the result's pairs
counted() {
	taken=$(jq .taken "recv.$1.ps0.json") &&
	sent=$(sum_of sent send.$1.*.json) &&
	echo "root took $taken packets, the workers sent $sent (and resent $(sum_of resent send.$1.*.json)); the root: $(jq -c "{dup, resent, drop_malformed}" "recv.$1.ps0.json")" &&
	test "$taken" = "$sent" &&
	test "$(jq .pairs_in "recv.$1.ps0.json")" = "$(sum_of pairs_out send.$1.*.json)" &&
	pairs=$(jq .pairs "recv.$1.ps0.json") &&
	for w in $(dp_workers); do
		test "$(jq .pairs_in "recv.$1.$w.json")" = "$pairs" || return 1
	done
}

test_expect_success 'a plan and agg-load on 9 hosts' '
	agg-plan --scheme ps --size 4096 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	PORT=$(dp_plan_field port) &&
	test -n "$PORT"
'

test_expect_success 'agg-hot gen --sparse: 15000 rows of 16 values a worker' '
	gen 1 &&
	for w in $(dp_workers); do
		test $(wc -c <in.1.$w) = $((16 + 15000 * (8 + 64))) || return 1
	done &&
	! cmp -s in.1.w0 in.1.w1
'

test_expect_success 'iteration 1: every host gets the same sum, within 1e-6 of float64' '
	sparse_before=$(dp_stat ps0 sparse) &&
	round 1 &&
	same 1 &&
	counted 1 &&
	test "$(jq .role recv.1.ps0.json)" = "\"root\"" &&
	test "$(jq .width recv.1.w3.json)" = 16 &&
	# the root XDP program passed every packet it received to the aggregator
	test $(( $(dp_stat ps0 sparse) - sparse_before )) -ge "$(jq .taken recv.1.ps0.json)" &&
	test "$(dp_stat ps0 drop_malformed)" = 0
'

test_expect_success 'iteration 2 with one worker that touched nothing (its end marker alone)' '
	gen 2 &&
	printf "width 16\n" >in.2.w5 &&
	round 2 &&
	same 2 &&
	counted 2 &&
	test "$(jq .sent send.2.w5.json)" = 1
'

test_expect_success 'agg-recv --sparse --text: the same sum as text, on every host' '
	for w in $(dp_workers); do cp in.1.$w in.3.$w || return 1; done &&
	R_OPTS=--text round 3 &&
	head -1 out.3.w4 >first && echo "width 16" >want && test_cmp want first &&
	test $(wc -l <out.3.w4) = $(( $(jq .pairs recv.1.ps0.json) + 1 )) &&
	same 3
'

test_expect_success '10% loss both ways on every port: the same bits as without loss' '
	test_when_finished loss_off &&
	LOSS_PORT="$PORT-$((PORT + 3))" loss_on 100000 &&
	for w in $(dp_workers); do cp in.1.$w in.11.$w || return 1; done &&
	round 11 &&
	same 11 &&
	cmp out.1.ps0 out.11.ps0 &&
	counted 11 &&
	loss_stats >loss.11 && cat loss.11 &&
	test "$(loss_stat dropped_in)" -gt 0 && test "$(loss_stat dropped_out)" -gt 0 &&
	loss_log >log.11 &&
	for t in sparse sparse_ack sparse_result; do
		grep -q " $t " log.11 || { echo "no $t dropped"; return 1; }
	done &&
	test "$(sum_of resent send.11.*.json)" -gt 0 &&
	test "$(jq .resent recv.11.ps0.json)" -gt 0 &&
	test "$(jq .dup recv.11.ps0.json)" -gt 0
'

# forged COUNTER KEY=VALUE...: one packet forged from w0 to ps0 reaches
# ps0's XDP program (rx moves by one, waited for up to 30 s: sending it
# again would count a late one twice) and is counted under COUNTER there,
# nothing else
forged() {
	f_c=$1
	shift
	f_rx=$(dp_stat ps0 rx) && f_n=$(dp_stat ps0 "$f_c") && f_sp=$(dp_stat ps0 sparse) &&
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 "$@" || return 1
	f_wait=0
	while [ "$(dp_stat ps0 rx)" = "$f_rx" ] && [ $f_wait -lt 300 ]; do
		f_wait=$((f_wait + 1))
		sleep 0.1
	done
	test $(( $(dp_stat ps0 rx) - f_rx )) = 1 &&
	test $(( $(dp_stat ps0 "$f_c") - f_n )) = 1 &&
	test "$(dp_stat ps0 sparse)" = "$f_sp" ||
	{ echo "$*: rx $f_rx -> $(dp_stat ps0 rx), $f_c $f_n -> $(dp_stat ps0 "$f_c")"; return 1; }
}

test_expect_success 'packets of another job, token or an older run: dropped by the root XDP and counted' '
	forged drop_job job=99 iter=12 &&
	forged drop_token token=12345 iter=12 &&
	forged drop_run run=65535 iter=12 &&
	forged drop_malformed width=0 iter=12 &&
	forged drop_malformed type=result iter=12
'

test_expect_success 'a forged packet of the right job that XDP passes is dropped by the aggregator' '
	# 6 s from its start for two forge runs to deliver on a busy machine
	nsenter --net="/var/run/netns/$(vcluster_ns ps0)" -- \
		agg-recv --sparse -j --iter 12 --timeout 6 out.12.ps0 >recv.12.json 2>recv.12.err &
	pid=$! &&
	vcluster_listening ps0 udp $PORT &&
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=13 &&
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=12 seg=5 npkts=2 &&
	test_expect_code 1 wait $pid &&
	grep "iteration 12: after 6 s, pairs missing from w0 (nothing) w1 (nothing)" recv.12.err &&
	cat recv.12.json &&
	test "$(jq .ok recv.12.json)" = false &&
	test "$(jq .drop_stale recv.12.json)" = 1 &&
	test "$(jq .drop_malformed recv.12.json)" = 1 &&
	test "$(jq .taken recv.12.json)" = 0
'

test_expect_success 'on a worker --sparse receives; an agg-send --sparse with no root times out (exit 1)' '
	printf "width 2\n5 1 2\n" >tiny &&
	test_expect_code 1 vcluster_run w1 agg-send --sparse --iter 20 --timeout 0.5 tiny 2>err &&
	grep "iteration 20: 2 of 2 packets (1 of pairs and the end marker) not acknowledged by the sparse root ps0" err &&
	test_expect_code 2 vcluster_run w1 agg-send --sparse --op max tiny 2>err &&
	grep -- "--sparse sums: no --op" err &&
	printf "width 2\n5 1\n" >bad &&
	test_expect_code 2 vcluster_run w1 agg-send --sparse --iter 21 bad 2>err &&
	grep "^agg-send: bad:2:4: 1 values, want 2 (the width line)" err &&
	test_expect_code 2 vcluster_run ps0 agg-send --sparse --iter 21 tiny 2>err &&
	grep "node ps0 is a parameter server" err
'

test_done
