#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='a worker killed or cut off mid-iteration: everyone else says who, in time'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# t/0300's ALEPH testbed: a, b1 and b2 aggregate, the c's are leaves.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
b1  10.90.0.2   bw=20
b2  10.90.0.3   bw=20
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
c4  10.90.0.7   bw=10
c5  10.90.0.8   bw=10
EOF_HOSTS

# Every tool's --timeout, generous for a busy machine: the agg-recvs
# count theirs from their own start, and before the action 8 agg-sends
# (16 MB each) must get a result to the victim.
T=10
# The links shaped at bw= x 0.01 (the c's at 100 Mbit/s, 16 MB each):
# an iteration lasts over a second however fast the machine, so the
# action comes mid-iteration by construction.
VCLUSTER_BW_SCALE=0.01
export VCLUSTER_BW_SCALE

now() { date +%s.%N; }

# stall ITER VICTIM ACTION: agg-recv and agg-send on every worker, ACTION
# (a shell command; $vpid is the victim's agg-send) once a result of
# the iteration is stored at the victim (agg-send's own counters come only
# at its end; a result means every worker sent); then every agg-recv but the
# victim's must exit 1 within T of the action (their T s began before it;
# +1 s for a busy machine).  agg-send starts once every agg-recv listens
# for the fetch signal: their T s have begun (a slow start would count
# against the +1 s).
stall() {
	it=$1 victim=$2 action=$3
	dp_inputs $it &&
	pids= vpid= &&
	for w in $(dp_workers); do
		vcluster_run $w agg-recv --iter $it --timeout $T out.$it.$w 2>recv.$it.$w &
		pids="$pids $w:$!"
	done &&
	for w in $(dp_workers); do
		vcluster_listening $w udp $(( $(dp_plan_field port) + 1 )) || return 1
	done &&
	before=$(dp_stat $victim stored) &&
	for w in $(dp_workers); do
		# not vcluster_run: $! must be agg-send itself (nsenter execs it)
		nsenter --net=/var/run/netns/$(vcluster_ns $w) -- \
			agg-send --iter $it --timeout $T in.$it.$w 2>send.$it.$w &
		[ $w != $victim ] || vpid=$!
	done &&
	n=0 &&
	until [ $(dp_stat $victim stored) -gt $before ]; do
		n=$((n + 1))
		test $n -lt 600 || { echo "no result at $victim"; return 1; }
		sleep 0.05
	done &&
	t0=$(now) && eval "$action" &&
	for wp in $pids; do
		w=${wp%:*} p=${wp#*:}
		wait $p; rc=$?
		t=$(echo "$(now) - $t0" | bc) &&
		if [ $w != $victim ]; then
			test $rc != 0 || { echo "agg-recv on $w: exit 0: the iteration was done before the action"; return 1; }
			test $rc = 1 || { echo "agg-recv on $w: exit $rc"; return 1; }
			echo "$t < $T + 1" | bc | grep -qx 1 ||
				{ echo "agg-recv on $w took $t s"; return 1; }
		fi
	done &&
	wait
}

test_expect_success 'setup: the ALEPH plan on 9 hosts, 4M float32, shaped' '
	agg-plan --size 16000000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	vcluster_shape &&
	test "$(vcluster_rate c3)" = 100
'

test_expect_success 'a leaf killed mid-iteration: every other agg-recv exits 1 in time naming it' '
	parent=$(awk "\$1 == \"edge\" && \$3 == \"c3\" { print \$4 }" plan.txt) &&
	stall 1 c3 "kill -9 \$vpid" &&
	for w in $(dp_workers); do
		test $w = c3 && continue
		grep "iteration 1: [0-9]* of 31250 result segments missing after $T s (wire segments [0-9,-]*31494[;)]" recv.1.$w &&
		grep "held up by c3 ($parent has nothing from it for segment [0-9]*)" recv.1.$w ||
			{ cat recv.1.$w; return 1; }
	done &&
	grep "segments not aggregated after $T s without progress.*held up by c3" send.1.c1
'

test_expect_success "an aggregator's own agg-send killed: it is named for its own contribution" '
	stall 2 a "kill -9 \$vpid" &&
	for w in $(dp_workers); do
		test $w = a && continue
		grep "held up by a (its own contribution to segment [0-9]* is not in)" recv.2.$w ||
			{ cat recv.2.$w; return 1; }
	done
'

test_expect_success 'an aggregator cut off the network: named as not answering' '
	port=$(vcluster_port b1) &&
	test_when_finished "ip -n $(vcluster_brns) link set $port up" &&
	stall 3 b1 "ip -n $(vcluster_brns) link set $port down" &&
	for w in $(dp_workers); do
		test $w = b1 && continue
		grep "held up by b1 (does not answer probes: down or cut off)" recv.3.$w ||
			{ cat recv.3.$w; return 1; }
	done
'

test_expect_success 'after the stalls a full iteration works again' '
	ip -n $(vcluster_brns) link set $(vcluster_port b1) up &&
	vcluster_link_up b1 &&
	dp_inputs 4 && dp_allreduce 4 && dp_check 4
'

# dp_inputs ITER seeds by ITER: inputs of another iteration, so a stale sum
# could not pass dp_check.
inputs_as() {	# inputs_as FROM TO
	dp_inputs $1 && for w in $(dp_workers); do mv in.$1.$w in.$2.$w || return 1; done
}

test_expect_success 'a lower iteration in the same run is refused (exit 2), said so, nothing sent' '
	dp_inputs 2 &&
	agg-stat --node c1 >before &&
	test_expect_code 2 vcluster_run c1 agg-send --iter 2 in.2.c1 2>err &&
	grep "agg-send: run 0 iteration 2 was sent on node c1 already (the newest there is run 0 iteration 4)" err &&
	test_expect_code 2 vcluster_run c1 agg-recv --iter 4 out 2>err &&
	grep "agg-recv: run 0 iteration 4 was received on node c1 already" err &&
	test ! -e out &&
	agg-stat --node c1 >after &&
	test "$(awk "\$1 == \"iterations\" { print \$2 }" before)" = \
	     "$(awk "\$1 == \"iterations\" { print \$2 }" after)"
'

test_expect_success 'the job restarted in run 1 from iteration 1: new sums, no reload' '
	inputs_as 11 1 && inputs_as 12 2 &&
	AGG_RUN=1 && export AGG_RUN &&
	for i in 1 2; do dp_allreduce $i && dp_check $i || return 1; done &&
	unset AGG_RUN
'

test_expect_success 'a worker left in the old run is told which run took over' '
	inputs_as 13 3 &&
	pids= &&
	for w in $(dp_workers); do
		test $w = c1 && continue
		vcluster_run $w agg-send --run 2 --iter 3 --timeout $T in.3.$w 2>/dev/null &
		pids="$pids $!"
	done &&
	parent=$(awk "\$1 == \"edge\" && \$3 == \"c1\" { print \$4 }" plan.txt) &&
	n=0 &&
	until agg-check --node $parent -j | jq -e ".run == 2" >/dev/null; do
		n=$((n + 1)) && test $n -lt 300 || return 1
		sleep 0.05
	done &&
	test_expect_code 1 vcluster_run c1 agg-send --run 1 --iter 3 --timeout 2 in.3.c1 2>err &&
	cat err &&
	grep "held up by [a-z0-9]* (has seen run 2 iteration 3 for segment [0-9]*, newer than run 1 iteration 3: a job restarted from a lower iteration needs a newer run, --run)" err &&
	test "$(dp_stat $parent drop_run)" -gt 0 &&
	for p in $pids; do test_expect_code 1 wait $p || return 1; done
'

test_expect_success 'then every worker in run 3 from iteration 1: bit-exact' '
	inputs_as 14 1 &&
	AGG_RUN=3 && export AGG_RUN &&
	dp_allreduce 1 && dp_check 1 &&
	unset AGG_RUN
'

test_done
