#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='packets from a host outside the plan and from another job change nothing'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/fuzz.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

# x shares the bridge but is not in the plan.  It knows the plan (a leaked
# copy), so it can address every check: member, token, job, segment.
fz_hosts >hosts.txt
echo "x   10.90.0.66  bw=10" >>hosts.txt
K=50		# packets of each kind

test_expect_success 'plan without x (a aggregates c1), loaded on its 5 hosts; x up beside them' '
	grep -v "^x " hosts.txt >hosts.plan &&
	agg-plan --size 400000 hosts.plan >plan.txt &&
	for e in "c1 a" "c3 a" "a ps0" "c2 ps0"; do
		grep -q "^edge 0 $e\$" plan.txt || return 1
	done &&
	test_atexit "rm -rf \"$AGG_PIN_DIR\"" &&
	vcluster_up hosts.txt "aggin$$-" &&
	DP_PLAN=plan.txt &&
	for h in $(awk "\$1 == \"node\" { print \$2 }" plan.txt); do
		vcluster_run $h agg-load plan.txt || return 1
	done &&
	test_must_fail vcluster_run x agg-load plan.txt 2>err &&
	DP_N=$(( $(dp_plan_field size) / 4 )) && DP_SEG=$(dp_plan_field segment) &&
	fz_quiet &&
	vcluster_run x ping -c 1 -W 10 -q 10.90.0.1 >/dev/null
'

test_expect_success 'a clean iteration: the same bits on every worker, within 1e-6' '
	test "$(dp_workers | tr "\n" " ")" = "a c1 c2 c3 " &&
	dp_inputs 1 && dp_allreduce 1 && dp_check 1
'

# The second job: its own id and token on the same port, as a confused or
# hostile second job sends them (agg-load refuses a second job on a port
# already taken, so it is crafted rather than loaded).
test_expect_success 'a second job: another id and token' '
	agg-plan --job 2 --seed 2 --size 400000 hosts.plan >plan2.txt &&
	T1=$(dp_plan_field token) &&
	T2=$(sed -n "1s/.* token=\([^ ]*\).*/\1/p" plan2.txt) &&
	test -n "$T1" && test -n "$T2" && test "$T1" != "$T2" &&
	NSEGS=$(( (DP_N + DP_SEG - 1) / DP_SEG )) &&
	NSEGS=$(( NSEGS + (NSEGS + DP_SEG - 1) / DP_SEG ))
'

# intrude TARGET COUNTER SPEC...: K packets of each SPEC from x at TARGET
# (SPEC as pktfuzz send takes it); every one lands in COUNTER and in rx
# (up to 30 s to be counted),
# and no other counter moves but "other" (x's ARP).
intrude() {
	in_t=$1 in_want=$2
	shift 2
	agg-stat --node $in_t >before.$in_t &&
	vcluster_run x pktfuzz send --plan plan.txt --to $in_t --count $K "$@" >sent &&
	in_n=$(fz_get sent sent) && test $in_n = $((K * $#)) &&
	in_i=0 &&
	while [ $in_i -lt 300 ]; do
		agg-stat --node $in_t >after.$in_t &&
		[ "$(fz_delta before.$in_t after.$in_t rx)" -lt $in_n ] || break
		in_i=$((in_i + 1)) && sleep 0.1
	done &&
	fz_diff before.$in_t after.$in_t &&
	fdb_relearn &&
	test "$(fz_delta before.$in_t after.$in_t $in_want)" = $in_n &&
	test "$(fz_delta before.$in_t after.$in_t rx)" = $in_n &&
	fz_only before.$in_t after.$in_t $in_want rx
}

# When x sends with a member's MAC (smac=), the bridge learns that MAC on
# x's port, as a switch without port security would, and sends the
# member's traffic to x until the member sends again: every member sends
# one packet, so the bridge knows where each really is.
fdb_relearn() {
	for fr_h in ps0 a c1 c2 c3; do
		vcluster_run $fr_h ping -c 1 -W 1 -q 10.90.0.66 >/dev/null 2>&1 || :
	done
}

test_expect_success 'the pinned state before' '
	for h in ps0 a c1 c2 c3; do
		vcluster_run $h pktfuzz state --node $h >state.before.$h || return 1
	done
'

test_expect_success 'from x'"'"'s own address, with the job and token: drop_member' '
	intrude a drop_member "src=10.90.0.66" "src=10.90.0.66,from=c1" &&
	intrude c1 drop_member "src=10.90.0.66,type=result,from=a"
'

test_expect_success 'a member'"'"'s address under the wrong node index: drop_member' '
	intrude a drop_member "src=c1,from=c3" "src=c1,from=9"
'

test_expect_success 'spoofing a member with a wrong token: drop_token' '
	intrude a drop_token "src=c1,token=0x1234" "src=c3,token=0" "src=c1,token=$T2" &&
	intrude c1 drop_token "src=a,type=result,token=0x1234"
'

test_expect_success 'the second job'"'"'s packets (job 2, its token): drop_job' '
	intrude a drop_job "src=c1,job=2,token=$T2" "src=10.90.0.66,job=2,token=$T2" \
		"src=c1,job=2,token=$T1" "src=c3,job=2,token=$T2,type=request" &&
	intrude c1 drop_job "src=a,job=2,token=$T2,type=result"
'

test_expect_success 'malformed headers: drop_malformed' '
	intrude a drop_malformed "src=c1,magic=0" "src=c1,op=3" "src=c1,iter=0xffffffff" \
		"src=c1,len=100" "src=c1,smac=c1,type=9" \
		"src=c1,smac=c1,seg=0,op=sum" &&
	intrude c1 drop_malformed "src=a,type=result,iter=100,len=200" \
		"src=a,type=result,magic=0xa8"
'

# x copies a member's address but sends from its own MAC.
test_expect_success 'a member'"'"'s address from another MAC, valid token: drop_mac' '
	intrude a drop_mac "src=c1" "src=c3,type=request" &&
	intrude c1 drop_mac "src=a,type=result"
'

# Flags are for a node's own XDP -> TC hand-over only, and travel in the
# XDP metadata, never on the wire: a header with any is forged, whoever
# the IP destination is.
test_expect_success 'internal flags on the wire, to the node or past it: drop_flags' '
	intrude a drop_flags "src=c1,flags=1" "src=c1,smac=c1,flags=4" \
		"src=ps0,from=ps0,type=result,flags=1,dstip=10.90.0.77" &&
	intrude c1 drop_flags "src=a,smac=a,type=result,flags=3"
'

# The experiment of the issue: forged FANOUT results to the root's MAC,
# claiming the root's own address and index, for an address that is not
# the root's (XDP used to pass those, and TC copied each to every child).
test_expect_success 'forged fan-outs to the root deliver nothing to any worker' '
	for h in ps0 a c1 c2 c3; do agg-stat --node $h >fan.before.$h || return 1; done &&
	vcluster_run x pktfuzz send --plan plan.txt --to ps0 --count 1000 \
		"src=ps0,from=ps0,type=result,flags=1,dstip=10.90.0.200" \
		"src=ps0,from=ps0,type=result,flags=4,dstip=10.90.0.1,dst=ps0" >sent &&
	test "$(fz_get sent sent)" = 2000 &&
	n=0 &&
	until agg-stat --node ps0 >fan.after.ps0 &&
	      test "$(fz_delta fan.before.ps0 fan.after.ps0 drop_flags)" -ge 2000; do
		n=$((n + 1)) && test $n -lt 100 || return 1
		sleep 0.05
	done &&
	test "$(fz_delta fan.before.ps0 fan.after.ps0 drop_flags)" = 2000 &&
	test "$(fz_delta fan.before.ps0 fan.after.ps0 fanout)" = 0 &&
	for h in a c1 c2 c3; do
		agg-stat --node $h >fan.after.$h &&
		test "$(fz_delta fan.before.$h fan.after.$h rx)" = 0 || return 1
	done
'

# From here x copies the member's MAC too (what the token cannot stop on a
# shared segment): the checks behind the MAC's.
test_expect_success 'a stale iteration, valid token, from a member'"'"'s address: drop_stale' '
	intrude a drop_stale "src=c1,smac=c1,iter=0" "src=c3,smac=c3,iter=0,seg=100" &&
	intrude c1 drop_stale "src=a,smac=a,type=result,iter=0" \
		"src=a,smac=a,type=result,iter=0,seg=300"
'

test_expect_success 'a far iteration or run, valid token: drop_ahead; an old run: drop_run' '
	intrude a drop_ahead "src=c1,smac=c1,iter=0xfffffffe" "src=c1,smac=c1,iter=1030" \
		"src=c1,smac=c1,run=2000" &&
	intrude c1 drop_ahead "src=a,smac=a,type=result,iter=0xfffffffe" &&
	intrude a drop_run "src=c1,smac=c1,run=65535" "src=c3,smac=c3,run=40000,type=request"
'

test_expect_success 'a segment out of range: drop_seg' '
	intrude a drop_seg "src=c1,smac=c1,seg=$NSEGS" "src=c1,smac=c1,seg=0xffffffff,tree=0" &&
	intrude c1 drop_seg "src=a,smac=a,type=result,seg=$NSEGS"
'

test_expect_success 'a member that is not a child here, a result not from the parent: drop_route' '
	intrude a drop_route "src=c2,smac=c2" "src=c1,smac=c1,type=result" "src=c1,smac=c1,tree=1" &&
	intrude c1 drop_route "src=ps0,smac=ps0,type=result" "src=c3,smac=c3,type=result"
'

test_expect_success 'no slot, result or configuration moved on any node' '
	for h in ps0 a c1 c2 c3; do
		vcluster_run $h pktfuzz state --node $h >state.after.$h &&
		test_cmp state.before.$h state.after.$h || return 1
	done
'

# A probe that says it is longer than the frame: its answer cannot be
# written, so it must be dropped (and counted) like any other short frame.
test_expect_success 'a truncated probe from a member, valid token: drop_malformed' '
	intrude a drop_malformed "src=c1,type=probe,len=80"
'

test_expect_success 'the next iteration gives the clean run'"'"'s bits' '
	for w in $(dp_workers); do cp in.1.$w in.2.$w || return 1; done &&
	dp_allreduce 2 && dp_check 2 &&
	for w in $(dp_workers); do cmp out.1.$w out.2.$w || return 1; done
'

# Every kind at once, at the aggregator and at a leaf, while the workers
# run three iterations.  Nothing the workers send is ever dropped as a
# non-member, another job, a wrong token or a segment out of range, so
# those counters grow by exactly what x sent.
cat >flood.txt <<EOF_FLOOD
a drop_member src=10.90.0.66
a drop_token src=c1,token=0x1234
a drop_job src=c1,job=2,token=$T2
a drop_flags src=c1,flags=1
a drop_malformed src=c3,len=100
a drop_mac src=c1,iter=0
a drop_flags src=ps0,from=ps0,type=result,flags=1,dstip=10.90.0.77
c1 drop_member src=10.90.0.66,type=result,from=a
c1 drop_token src=a,type=result,token=0
c1 drop_job src=a,type=result,job=2,token=$T2
c1 drop_mac src=a,type=result,iter=0
c1 drop_mac src=a,type=result,seg=$NSEGS
EOF_FLOOD

# flood_counted: has every packet of flood.want reached its counter yet?
# (flood.after.HOST: the counters read)
flood_counted() {
	for h in a c1; do agg-stat --node $h >flood.after.$h || return 1; done &&
	while read -r t c n; do
		test "$(fz_delta flood.before.$t flood.after.$t $c)" -ge $n || return 1
	done <flood.want
}

# flood_total: how many packets the counters of flood.txt at a and c1
# have grown by so far (flood.now.HOST: the counters read)
flood_total() {
	for h in a c1; do agg-stat --node $h >flood.now.$h || return 1; done &&
	awk "{ print \$1, \$2 }" flood.txt | sort -u | while read -r t c; do
		fz_delta flood.before.$t flood.now.$t $c || return 1
	done | awk "{ s += \$1 } END { print s + 0 }"
}

# The flood: FLOOD packets of each kind (AGG_FLOOD_COUNT, default 200: 2400
# in all; make soak sends 5000 of each) at 2000 a second, a rate any
# machine keeps up with and the hosts' queues hold however late their
# NAPI runs.  It is on before the iterations start; pktfuzz exits once
# it has sent them all, however long the iterations take.
FLOOD=${AGG_FLOOD_COUNT:-200}
test_expect_success 'three iterations while x floods: every one the clean run'"'"'s bits' '
	for h in a c1; do agg-stat --node $h >flood.before.$h || return 1; done &&
	specs=$(awk "{ print \$3 \",dst=\" \$1 }" flood.txt) &&
	{ nsenter --net=/var/run/netns/$(vcluster_ns x) -- \
		pktfuzz send --plan plan.txt --count $FLOOD --rate 2000 $specs \
		>flood.sent 2>flood.err & } &&
	flood=$! &&
	test_when_finished "kill $flood 2>/dev/null || :" &&
	# on once a and c1 count it (pktfuzz sends after its ARP for both)
	k=0 &&
	until [ "$(flood_total)" -gt 0 ]; do
		k=$((k + 1)) && test $k -lt 600 && kill -0 $flood || { cat flood.err; return 1; }
		sleep 0.05
	done &&
	for i in 3 4 5; do
		for w in $(dp_workers); do cp in.1.$w in.$i.$w || return 1; done &&
		dp_allreduce $i && dp_check $i &&
		for w in $(dp_workers); do cmp out.1.$w out.$i.$w || return 1; done
	done &&
	wait $flood &&
	cat flood.sent &&
	test "$(fz_get flood.sent sent)" = $((FLOOD * $(wc -l <flood.txt))) &&
	awk "{ print \$1, \$2, NR }" flood.txt | while read -r t c i; do
		echo "$t $c $(fz_get flood.sent sent_$i)"
	done | awk "{ s[\$1 \" \" \$2] += \$3 } END { for (k in s) print k, s[k] }" >flood.want &&
	cat flood.want &&
	# the last frames may still be queued: up to 30 s for them
	k=0 &&
	until flood_counted; do
		k=$((k + 1)) && test $k -lt 600 || break
		sleep 0.05
	done &&
	while read -r t c n; do
		d=$(fz_delta flood.before.$t flood.after.$t $c) &&
		echo "$t $c sent $n counted $d" &&
		if [ $c = drop_stale ]; then test $d -ge $n; else test $d = $n; fi || return 1
	done <flood.want &&
	for h in a c1; do
		fz_diff flood.before.$h flood.after.$h >flood.diff.$h &&
		! grep -E "^(drop_route|drop_busy|error) " flood.diff.$h || return 1
	done
'

test_done
