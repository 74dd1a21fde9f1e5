#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='two jobs on the same hosts at once; agg-load killed at any point'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
EOF_HOSTS

# xdp_prog_of HOST: the id of the XDP program on the host's eth0 (or empty)
xdp_prog_of() {
	vcluster_run "$1" ip -j link show dev eth0 | jq -r '.[0].xdp.prog.id // empty'
}

# xdp_gone HOST: wait up to 30 s for eth0 to have no XDP program.  The
# kernel frees an unpinned link from a work queue, so the program leaves
# the interface a moment after agg-load --unload removed its last pin.
xdp_gone() {
	xg=0
	while [ -n "$(xdp_prog_of "$1")" ]; do
		xg=$((xg + 1)) && test $xg -lt 300 || { echo "XDP still on $1's eth0"; return 1; }
		sleep 0.1
	done
}

test_expect_success 'two jobs loaded on every host: one dispatcher per interface' '
	agg-plan --job 1 --size 4000000 hosts.txt >plan1.txt &&
	agg-plan --job 2 --port 9997 --token 0x2222 -s ps --size 2000000 hosts.txt >plan2.txt &&
	dp_setup hosts.txt plan1.txt &&
	for h in $(vcluster_hosts); do
		vcluster_run $h agg-load plan2.txt || return 1
	done &&
	for h in $(vcluster_hosts); do
		id=$(xdp_prog_of $h) && test -n "$id" &&
		bpftool -j prog show id $id | jq -e ".name == \"agg_dispatch\"" >/dev/null ||
			return 1
	done &&
	test $(ls $AGG_PIN_DIR/dev | wc -l) = 5 &&
	for d in $AGG_PIN_DIR/dev/*; do
		test $(bpftool -j map dump pinned $d/ports | jq length) = 2 || return 1
	done
'

test_expect_success 'both jobs run at the same time, each bit-identical and within 1e-6' '
	DP_JOB=1 dp_inputs 1 && DP_JOB=1 dp_inputs 2 &&
	DP_PLAN=plan2.txt DP_N=500000 dp_inputs 101 &&
	DP_PLAN=plan2.txt DP_N=500000 dp_inputs 102 &&
	{ ( DP_JOB=1 dp_allreduce 1 && DP_JOB=1 dp_allreduce 2 ) >job1.log 2>&1 & p1=$!; } &&
	{ ( DP_PLAN=plan2.txt DP_JOB=2 dp_allreduce 101 &&
	    DP_PLAN=plan2.txt DP_JOB=2 dp_allreduce 102 ) >job2.log 2>&1 & p2=$!; } &&
	wait $p1 && wait $p2 &&
	dp_check 1 && dp_check 2 &&
	DP_PLAN=plan2.txt dp_check 101 && DP_PLAN=plan2.txt dp_check 102
'

test_expect_success "each job's packets reach only its own program" '
	for h in ps0 a; do
		vcluster_run $h agg-stat --job 1 >s1.$h &&
		vcluster_run $h agg-stat --job 2 >s2.$h &&
		awk "\$1 ~ /^drop_(job|token|member|route|malformed)\$/ && \$2 != 0 { print; exit 1 }" s1.$h s2.$h ||
			return 1
	done &&
	test "$(awk "\$1 == \"done\" { print \$2 }" s2.a)" = 0
'

test_expect_success "a third job on a taken port is refused, naming the job" '
	agg-plan --job 3 --size 4000 hosts.txt >plan3.txt &&
	test_expect_code 2 vcluster_run c1 agg-load plan3.txt 2>err &&
	grep "UDP port 9999 on eth0 is taken by job 1" err &&
	# a failed load leaves nothing it made: no node or job directory
	test_must_fail test -e $AGG_PIN_DIR/3
'

test_expect_success "a load whose parent does not answer ARP fails and leaves nothing" '
	sed "s/^ps0 10.90.0.100/ps9 10.90.0.250/" hosts.txt >hosts4.txt &&
	agg-plan --job 4 --port 9997 -s ps --size 4000 hosts4.txt >plan4.txt &&
	test_expect_code 3 vcluster_run c1 agg-load --arp-timeout 300 plan4.txt 2>err &&
	grep "cannot resolve the MAC address of ps9 (10.90.0.250) on eth0: no ARP reply" err &&
	test_must_fail test -e $AGG_PIN_DIR/4
'

test_expect_success 'replacing one job while the other runs disturbs neither' '
	agg-plan --job 2 --port 9997 --token 0x2222 -s ps --size 2000000 --segment 64 hosts.txt >plan2b.txt &&
	DP_JOB=1 dp_inputs 3 &&
	{ DP_JOB=1 dp_allreduce 3 >job1.log 2>&1 & p1=$!; } &&
	for h in $(vcluster_hosts); do
		vcluster_run $h agg-load -j plan2b.txt >re.$h || return 1
		jq -e ".action == \"replaced\"" re.$h >/dev/null || return 1
	done &&
	wait $p1 && dp_check 3 &&
	DP_PLAN=plan2b.txt DP_SEG=64 DP_N=500000 dp_inputs 103 &&
	DP_PLAN=plan2b.txt DP_JOB=2 dp_allreduce 103 &&
	DP_PLAN=plan2b.txt DP_SEG=64 dp_check 103
'

test_expect_success 'unloading one job leaves the other running; the last takes the dispatcher' '
	DP_JOB=1 dp_unload &&
	test_must_fail test -e $AGG_PIN_DIR/1 &&
	test -n "$(xdp_prog_of c1)" &&
	DP_PLAN=plan2b.txt DP_SEG=64 DP_N=500000 dp_inputs 104 &&
	DP_PLAN=plan2b.txt DP_JOB=2 dp_allreduce 104 &&
	DP_PLAN=plan2b.txt DP_SEG=64 dp_check 104 &&
	DP_JOB=2 dp_unload &&
	test_must_fail test -e $AGG_PIN_DIR/2 &&
	test_must_fail test -e $AGG_PIN_DIR/dev &&
	for h in $(vcluster_hosts); do
		xdp_gone $h || return 1
	done
'

KILL_RUNS=${AGG_KILL_RUNS:-12}
test_expect_success 'agg-load killed at any point: running it again leaves a working node' '
	for h in $(vcluster_hosts); do
		vcluster_run $h agg-load plan1.txt || return 1
	done &&
	# how long one load takes here and now: the kills spread over 0 to
	# 1.1 times that, so they hit every step (the longest ones may come
	# after the load is done); 12 runs meet each of the 12 delays once,
	# more (AGG_KILL_RUNS) meet them again
	sed "s/ seed=[0-9]*/ seed=999/" plan1.txt >plan1k.txt &&
	t0=$(date +%s%N) && vcluster_run c1 agg-load plan1k.txt &&
	ms=$(( ($(date +%s%N) - t0) / 1000000 )) &&
	i=0 killed=0 &&
	while [ $i -lt $KILL_RUNS ]; do
		# a new plan each time (another seed), so every run really loads
		sed "s/ seed=[0-9]*/ seed=$((1000 + i))/" plan1.txt >plan1k.txt &&
		# not vcluster_run: $! must be agg-load itself (nsenter execs it),
		# not a subshell whose death leaves agg-load running
		{ nsenter --net=/var/run/netns/$(vcluster_ns c1) -- \
			agg-load plan1k.txt 2>/dev/null & pid=$!; } &&
		d=$(( ms * ((i * 7) % 12) / 10 )) &&
		sleep $((d / 1000)).$(printf %03d $((d % 1000))) &&
		kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
		[ $? != 137 ] || killed=$((killed + 1))
		i=$((i + 1))
	done &&
	say "one load took $ms ms; $killed of $KILL_RUNS runs killed" &&
	test $killed -gt 0 &&
	# whatever the kills left (another plan, or none if a kill came
	# between the old pins going and the new plan coming), plan1 loads
	# again and then stands
	vcluster_run c1 agg-load -j plan1.txt >again.json &&
	jq -e ".action == \"loaded\" or .action == \"replaced\"" again.json >/dev/null &&
	vcluster_run c1 agg-load -j plan1.txt >again2.json &&
	jq -e ".action == \"unchanged\"" again2.json >/dev/null &&
	test $(ls $AGG_PIN_DIR/dev | wc -l) = 5 &&
	for d in $AGG_PIN_DIR/dev/*; do
		bpftool -j map dump pinned $d/ports >ports.json &&
		test "$(jq length ports.json)" = 1 &&
		test "$(jq ".[0].formatted.value.job // .[0].value.job" ports.json)" = 1 || return 1
	done &&
	for h in $(vcluster_hosts); do
		id=$(xdp_prog_of $h) && test -n "$id" &&
		bpftool -j prog show id $id | jq -e ".name == \"agg_dispatch\"" >/dev/null ||
			return 1
	done &&
	DP_JOB=1 dp_inputs 5 && DP_JOB=1 dp_allreduce 5 && dp_check 5
'

test_done
