#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the data plane end to end: an ALEPH plan on 9 hosts'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
command -v nc >/dev/null || skip_all "no nc (make deps installs netcat-openbsd)"

# ALEPH Sec. 6.3's testbed: M-WCHA makes a, b1 and b2 aggregators.
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

test_expect_success 'plan (1M float32) and agg-load on every host' '
	agg-plan --size 4000000 hosts.txt >plan.txt &&
	grep -q "^edge 0 c[0-9] [ab]" plan.txt &&
	dp_setup hosts.txt plan.txt &&
	test "$DP_N" = 1000000 &&
	for h in $(vcluster_hosts); do
		test -e "$AGG_PIN_DIR/1/$h/plan" || return 1
	done
'

test_expect_success 'three iterations: every worker gets the same bits, within 1e-6 of the float64 sum' '
	for i in 1 2 3; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done
'

test_expect_success 'the same inputs give the same bits again' '
	for w in $(dp_workers); do cp in.1.$w in.9.$w || return 1; done &&
	dp_allreduce 9 &&
	for w in $(dp_workers); do cmp out.1.$w out.9.$w || return 1; done
'

# Exact counts even when agg-send resent something (a result that took
# long): a resent contribution is never added twice, a result never stored
# twice.  Drops other than duplicates mean something went wrong.
test_expect_success 'the counters add up: the root saw every child, every worker every result' '
	segs=$(( (1000000 + 127) / 128 + 62 )) &&
	agg-stat --node ps0 >ps0.stat &&
	children=$(grep -c " ps0\$" plan.txt) &&
	test "$(awk "\$1 == \"done\" { print \$2 }" ps0.stat)" = $((4 * segs)) &&
	test "$(awk "\$1 == \"added\" { print \$2 }" ps0.stat)" = $((4 * segs * children)) &&
	for w in $(dp_workers); do
		agg-stat --node $w >$w.stat &&
		test "$(awk "\$1 == \"stored\" { print \$2 }" $w.stat)" = $((4 * segs)) &&
		test "$(awk "\$1 == \"signals\" { print \$2 }" $w.stat)" = 4 &&
		# every signal reached agg-recv, on the aggregators too
		test "$(dp_udp_in $w)" = 4 &&
		awk "\$1 ~ /^drop_/ && \$1 != \"drop_dup\" && \$2 != 0 { print; exit 1 }" $w.stat || return 1
	done
'

test_expect_success 'NaN and Inf become NaN in every result, and agg-send counts them' '
	dp_inputs 10 nan &&
	dp_allreduce 10 &&
	dp_check 10 &&
	grep "2 NaN or Inf values in the input" send.10.c1

'

test_expect_success 'an older iteration: agg-send refuses it (exit 2); its packets are stale, dropped and counted' '
	parent=$(awk "\$1 == \"edge\" && \$3 == \"c1\" { print \$4 }" plan.txt) &&
	test_expect_code 2 vcluster_run c1 agg-send --iter 5 --timeout 1 in.1.c1 2>err &&
	grep "run 0 iteration 5 was sent on node c1 already (the newest there is run 0 iteration 10)" err &&
	b=$(dp_stat $parent drop_stale) &&
	vcluster_run c1 pktfuzz send --plan plan.txt --to $parent --count 3 iter=5 >sent &&
	# the packets are on the wire when pktfuzz exits, not yet counted:
	# wait (up to 30 s) for all three: exactly three
	n=0 &&
	until a=$(dp_stat $parent drop_stale) && [ $((a - b)) -ge 3 ]; do
		n=$((n + 1)) && test $n -lt 300 || return 1
		sleep 0.1
	done &&
	test $((a - b)) = 3
'

test_expect_success 'a gradient of the wrong length is bad input (exit 2), nothing sent' '
	head -c 1000 in.1.c1 >short &&
	agg-stat --node ps0 >before &&
	test_expect_code 2 vcluster_run c1 agg-send --iter 5 short 2>err &&
	grep "short: 1000 bytes, the plan.s gradient is 4000000 bytes" err &&
	agg-stat --node ps0 >after &&
	grep -v "^other " before >before.agg &&
	grep -v "^other " after >after.agg &&
	cmp before.agg after.agg
'

test_expect_success 'ordinary traffic passes: ICMP, TCP and other UDP' '
	vcluster_run c1 ping -c 2 -i 0.2 -W 10 -q 10.90.0.1 >/dev/null &&
	head -c 100000 /dev/urandom >payload &&
	# not vcluster_run: $! must be timeout, which nsenter execs
	{ nsenter --net=/var/run/netns/$(vcluster_ns a) -- \
		timeout 10 nc -l -p 7777 >tcp.out & } &&
	tcp=$! &&
	{ nsenter --net=/var/run/netns/$(vcluster_ns a) -- \
		timeout 30 nc -u -l -p 9998 >udp.out & } &&
	udp=$! &&
	test_when_finished "kill $udp 2>/dev/null || :" &&
	vcluster_listening a tcp 7777 && vcluster_listening a udp 9998 &&
	vcluster_run c1 timeout 10 nc -N 10.90.0.1 7777 <payload &&
	wait $tcp &&
	cmp payload tcp.out &&
	echo hello-udp | vcluster_run c1 timeout 10 nc -u -w 1 10.90.0.1 9998 &&
	n=0 &&
	until grep -q hello-udp udp.out; do
		n=$((n + 1)) && test $n -lt 200 || return 1
		sleep 0.05
	done
'

test_expect_success 'agg-load of the same plan is a no-op; another plan replaces it' '
	vcluster_run a agg-load -j plan.txt >same.json &&
	jq -e ".action == \"unchanged\"" same.json &&
	agg-plan --size 400000 --seed 2 hosts.txt >plan2.txt &&
	for h in $(vcluster_hosts); do
		vcluster_run $h agg-load -j plan2.txt >re.$h.json &&
		jq -e ".action == \"replaced\"" re.$h.json >/dev/null || return 1
	done &&
	DP_PLAN=plan2.txt DP_N=100000 &&
	dp_inputs 1 && dp_allreduce 1 && dp_check 1
'

test_expect_success 'agg-load -vv prints the verifier statistics of both programs' '
	vcluster_run c5 agg-load --unload --node c5 &&
	vcluster_run c5 agg-load -vv plan2.txt 2>vv &&
	test "$(grep -c "^processed [0-9]* insns" vv)" = 2 &&
	dp_inputs 2 && dp_allreduce 2 && dp_check 2
'

test_expect_success 'agg-load --unload leaves no program, link, map or pin behind' '
	for h in $(vcluster_hosts); do
		for o in xdp_prog; do
			bpftool -j prog show pinned $AGG_PIN_DIR/1/$h/$o | jq .id >>progs || return 1
		done &&
		bpftool -j link show pinned $AGG_PIN_DIR/1/$h/tc_link | jq .id >>links &&
		for o in slots results stats plan; do
			bpftool -j map show pinned $AGG_PIN_DIR/1/$h/$o | jq .id >>maps || return 1
		done
	done &&
	for d in $AGG_PIN_DIR/dev/*; do
		bpftool -j link show pinned $d/link >dlink &&
		jq .id dlink >>links && jq .prog_id dlink >>progs &&
		bpftool -j map show pinned $d/progs | jq .id >>maps &&
		bpftool -j map show pinned $d/ports | jq .id >>maps || return 1
	done &&
	test $(wc -l <progs) = 18 && test $(wc -l <links) = 18 && test $(wc -l <maps) = 54 &&
	dp_unload &&
	test_must_fail test -e $AGG_PIN_DIR/1 &&
	test_must_fail test -e $AGG_PIN_DIR/dev &&
	# the kernel frees them asynchronously (RCU, a workqueue): up to 30 s.
	# Ids only (bpfids): bpftool map show opens every map, which can make
	# the kernel leak a program array that has just lost its last pin.
	n=0 &&
	until bpfids prog >progs.after && bpfids link >links.after &&
	      bpfids map >maps.after &&
	      ! grep -Fxf progs progs.after && ! grep -Fxf links links.after &&
	      ! grep -Fxf maps maps.after; do
		n=$((n + 1)) && test $n -lt 300 || return 1
		sleep 0.1
	done &&
	for h in $(vcluster_hosts); do
		vcluster_run $h ip link show dev eth0 >link.$h &&
		! grep -q "prog/xdp" link.$h || return 1
	done
'

test_expect_success 'the aggregator memory is the same for a 10 MB and a 1 GB gradient' '
	for size in 10M 1G; do
		agg-plan --size $size hosts.txt >plan.$size &&
		vcluster_run ps0 agg-load plan.$size &&
		for m in $AGG_PIN_DIR/1/ps0/*; do
			bpftool -j map show pinned $m 2>/dev/null | jq .bytes_memlock
		done | awk "{ s += \$1 } END { print s }" >mem.$size &&
		vcluster_run ps0 agg-load --unload --node ps0 || return 1
	done &&
	cat mem.10M mem.1G &&
	test "$(cat mem.10M)" -gt 0 &&
	test_cmp mem.10M mem.1G
'

test_done
