#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the sparse cold path: an iteration once per run, no mixed attempts, overflow, forged counts and widths'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
command -v jq >/dev/null || skip_all "no jq (make deps installs it)"

# The issue's cluster: a parameter server and 3 workers, links of MTU 1500
# (19 pairs of width 16 a packet).
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10
w1  10.90.0.2   bw=10
w2  10.90.0.3   bw=10
EOF_HOSTS
T=30
PER=19

# rows FILE N VALUE [WIDTH]: ids 0 .. N-1, every value VALUE (text form)
rows() {
	awk -v n="$2" -v v="$3" -v w="${4:-16}" 'BEGIN {
		print "width " w
		for (i = 0; i < n; i++) {
			s = i
			for (j = 0; j < w; j++)
				s = s " " v
			print s
		}
	}' >"$1"
}

# recv_on HOST ITER [TIMEOUT]: agg-recv --sparse on HOST in the background
# (out.ITER.HOST, recv.ITER.HOST.json and .err); its pid in $!
recv_on() {
	nsenter --net="/var/run/netns/$(vcluster_ns "$1")" -- \
		agg-recv --sparse --text -j --iter "$2" --timeout "${3:-$T}" "out.$2.$1" \
		>"recv.$2.$1.json" 2>"recv.$2.$1.err" &
	BG="$BG $!"
}

# send_on HOST ITER [TIMEOUT]: agg-send --sparse of in.ITER.HOST in the
# background (send.ITER.HOST.json and .err); its pid in $!
send_on() {
	nsenter --net="/var/run/netns/$(vcluster_ns "$1")" -- \
		agg-send --sparse -j --iter "$2" --timeout "${3:-$T}" "in.$2.$1" \
		>"send.$2.$1.json" 2>"send.$2.$1.err" &
	BG="$BG $!"
}

# reap: stop what a test left running in the background (a test that
# failed), so the next one finds the ports free
BG=
reap() {
	for p in $BG; do kill "$p" 2>/dev/null; done
	for p in $BG; do wait "$p" 2>/dev/null; done
	BG=
}

# root_rss ITER: agg-recv --sparse on ps0 in the background, its peak
# resident memory (VmHWM at its exit, kB) into rss.ITER
root_rss() {
	/usr/bin/python3 -c '
import resource, signal, subprocess, sys
p = subprocess.Popen(sys.argv[4:], stdout=open(sys.argv[2], "w"), stderr=open(sys.argv[3], "w"))
signal.signal(signal.SIGTERM, lambda *a: p.terminate())
r = p.wait()
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r)' "rss.$1" "recv.$1.ps0.json" "recv.$1.ps0.err" \
		nsenter --net="/var/run/netns/$(vcluster_ns ps0)" -- \
		agg-recv --sparse --text -j --iter "$1" --timeout "$T" "out.$1.ps0" &
	BG="$BG $!"
}

# listening [root]: every receiver of a round listens (root: the root's)
listening() {
	vcluster_listening ps0 udp "$PORT" || return 1
	test "$1" != root || return 0
	for w in $(dp_workers); do
		vcluster_listening "$w" udp $((PORT + 3)) || return 1
	done
}

# round ITER [ROOT_CMD]: the root (ROOT_CMD ITER, default recv_on ps0) and
# every worker receive, every worker sends in.ITER.W; fails if any fails
round() {
	r_pids=
	${2:-recv_on ps0} "$1"
	r_pids=$!
	for w in $(dp_workers); do
		recv_on "$w" "$1"
		r_pids="$r_pids $!"
	done
	listening || return 1
	for w in $(dp_workers); do
		send_on "$w" "$1"
		r_pids="$r_pids $!"
	done
	r_rc=0
	for p in $r_pids; do wait "$p" || r_rc=1; done
	BG=
	[ $r_rc = 0 ] || tail -n 3 recv.$1.*.err send.$1.*.err >&2
	return $r_rc
}

# all_values ITER VALUE: every value of every host's result is VALUE
all_values() {
	for h in $(vcluster_hosts); do
		awk -v want="$2" 'NR > 1 { for (i = 2; i <= NF; i++) if ($i != want) bad++ }
			END { if (bad) { print FILENAME ": " bad " values not " want; exit 1 } }' \
			"out.$1.$h" || return 1
	done
}

test_expect_success 'a plan and agg-load on 4 hosts' '
	agg-plan --scheme ps --size 4096 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	PORT=$(dp_plan_field port) &&
	test -n "$PORT"
'

test_expect_success 'iteration 5: 2 + 10 + 10 on 38 rows (2 packets a worker) is 22 everywhere' '
	test_when_finished reap &&
	rows in.5.w0 38 2 && rows in.5.w1 38 10 && rows in.5.w2 38 10 &&
	round 5 &&
	all_values 5 22 &&
	test "$(jq .pairs recv.5.ps0.json)" = 38
'

test_expect_success 'agg-send --sparse of iteration 5 again on w0 is refused (exit 2), not acknowledged' '
	rows again 38 1 &&
	test_expect_code 2 vcluster_run w0 agg-send --sparse --iter 5 --timeout 5 again 2>err &&
	cat err &&
	grep "^agg-send: run 0 iteration 5 was sent (sparse) on node w0 already" err &&
	# an older iteration too: a run goes forward
	test_expect_code 2 vcluster_run w0 agg-send --sparse --iter 4 --timeout 5 again 2>err &&
	grep "iteration 4 was sent (sparse) on node w0 already" err
'

test_expect_success 'the root does not serve iteration 5 again, a worker does not receive it again (exit 2)' '
	test_expect_code 2 vcluster_run ps0 agg-recv --sparse --iter 5 --timeout 5 out.again 2>err &&
	cat err &&
	grep "^agg-recv: run 0 iteration 5 was served (sparse) on node ps0 already" err &&
	test_expect_code 2 vcluster_run w1 agg-recv --sparse --iter 5 --timeout 5 out.again 2>err &&
	grep "^agg-recv: run 0 iteration 5 was received (sparse) on node w1 already" err &&
	! test -e out.again
'

test_expect_success 'a dense iteration 5 is not the sparse one: its marks are its own' '
	dp_inputs 5 &&
	dp_allreduce 5 &&
	dp_check 5
'

test_expect_success 'an attempt of w0 cut off after packet 0 (values 1), then all of it with 2: never a mixed sum' '
	test_when_finished reap &&
	rows in.6.w0 38 2 && rows in.6.w1 38 10 && rows in.6.w2 38 10 &&
	recv_on ps0 6 &&
	root=$! &&
	w_pids= &&
	for w in $(dp_workers); do recv_on $w 6 5; w_pids="$w_pids $!"; done &&
	listening &&
	# the first attempt: packet 0 of 2, 19 pairs of 1.0, acknowledged
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=6 seg=0 npkts=2 npairs=$PER value=1 &&
	for w in $(dp_workers); do
		send_on "$w" 6 5
		w_pids="$w_pids $!"
	done &&
	test_expect_code 1 wait $root &&
	cat recv.6.ps0.err &&
	grep "^agg-recv: iteration 6: w0 sent packet 0 twice with different pairs: two attempts" recv.6.ps0.err &&
	test "$(jq .ok recv.6.ps0.json)" = false &&
	test "$(jq .drop_attempt recv.6.ps0.json)" = 1 &&
	for p in $w_pids; do wait $p || :; done &&
	# no host wrote a sum
	for h in $(vcluster_hosts); do ! test -e out.6.$h || return 1; done
'

test_expect_success 'a sum beyond float32 range is NaN and counted, never Inf' '
	test_when_finished reap &&
	rows in.7.w0 38 2e38 && rows in.7.w1 38 2e38 && rows in.7.w2 38 -1 &&
	round 7 &&
	cat recv.7.ps0.err &&
	grep "^agg-recv: iteration 7: 608 values of the sum are NaN" recv.7.ps0.err &&
	test "$(jq .saturated recv.7.ps0.json)" = $((38 * 16)) &&
	for h in $(vcluster_hosts); do
		test "$(jq .nan recv.7.$h.json)" = $((38 * 16)) &&
		! grep -i inf out.7.$h || return 1
	done &&
	all_values 7 nan
'

test_expect_success 'the root memory of a clean iteration (the baseline)' '
	test_when_finished reap &&
	for w in $(dp_workers); do rows in.8.$w 38 1 || return 1; done &&
	round 8 root_rss &&
	all_values 8 3 &&
	echo "root peak: $(cat rss.8) kB"
'

test_expect_success 'a forged packet count (2^24 - 1): the root memory stays bounded, the genuine packets complete' '
	test_when_finished reap &&
	for w in $(dp_workers); do rows in.9.$w 38 1 || return 1; done &&
	root_rss 9 &&
	root=$! &&
	w_pids= &&
	for h in $(dp_workers); do recv_on $h 9; w_pids="$w_pids $!"; done &&
	listening &&
	# the highest packet of the largest count a packet may claim
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=9 seg=16777214 npkts=16777215 &&
	for w in $(dp_workers); do
		send_on "$w" 9
		w_pids="$w_pids $!"
	done &&
	wait $root &&
	for p in $w_pids; do wait $p || return 1; done &&
	all_values 9 3 &&
	echo "root peak: $(cat rss.9) kB, clean $(cat rss.8) kB" &&
	# What a packet may make the root hold is its own frame (at most the
	# links'"'"' MTU, 1500) and a table entry; 1 MiB of slack for the
	# allocator, where the 2^24-entry index a count cost was 130 MiB.
	test $(cat rss.9) -le $(( $(cat rss.8) + 2 * 1500 / 1024 + 1024 ))
'

test_expect_success 'a malformed first packet of another width does not set the width' '
	test_when_finished reap &&
	for w in $(dp_workers); do rows in.10.$w 38 1 || return 1; done &&
	recv_on ps0 10 &&
	w_pids=$! &&
	for h in $(dp_workers); do recv_on $h 10; w_pids="$w_pids $!"; done &&
	listening &&
	# packet 5 of 2, width 4
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=10 seg=5 npkts=2 width=4 &&
	for w in $(dp_workers); do
		send_on "$w" 10
		w_pids="$w_pids $!"
	done &&
	for p in $w_pids; do wait $p || return 1; done &&
	all_values 10 3 &&
	test "$(jq .drop_malformed recv.10.ps0.json)" = 1
'

test_expect_success 'a retry that reaches the root after its sum (its linger) is not acknowledged' '
	test_when_finished reap &&
	for w in $(dp_workers); do rows in.11.$w 38 1 || return 1; done &&
	recv_on ps0 11 &&
	root=$! &&
	w_pids= &&
	for w in $(dp_workers); do recv_on $w 11; w_pids="$w_pids $!"; done &&
	listening &&
	s_pids= &&
	for w in $(dp_workers); do
		send_on "$w" 11 "$T"
		s_pids="$s_pids $!"
	done &&
	for p in $s_pids; do wait $p || return 1; done &&
	# every worker is acknowledged complete: the root summed (or sums)
	# them.  The bytes w0 sent as its packet 0 again: a duplicate, answered
	# while the root lingers; then a retry of it (w0'"'"'s mark bypassed)
	# with 5s, which the root did not sum: not answered, whenever it comes
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=11 seg=0 npkts=2 npairs=$PER value=1 ack=1 >dup.11 &&
	vcluster_run w0 sparsetool forge plan.txt w0 ps0 iter=11 seg=0 npkts=2 npairs=$PER value=5 ack=1 >ack.11 &&
	wait $root &&
	for p in $w_pids; do wait $p || return 1; done &&
	echo "the retry: $(cat ack.11); the duplicate: $(cat dup.11)" &&
	test "$(cat ack.11)" = "no ack" &&
	all_values 11 3
'

test_expect_success 'a worker with another width: the root fails at once with the documented error (exit 1)' '
	test_when_finished reap &&
	rows in.12.w0 38 1 && rows in.12.w1 38 1 && rows in.12.w2 38 1 8 &&
	recv_on ps0 12 &&
	root=$! &&
	listening root &&
	w_pids= &&
	for w in $(dp_workers); do
		send_on "$w" 12 5
		w_pids="$w_pids $!"
	done &&
	test_expect_code 1 wait $root &&
	for p in $w_pids; do wait $p || :; done &&
	cat recv.12.ps0.err &&
	grep "^agg-recv: iteration 12: w[0-2] sends pairs of width [0-9]*, w[0-2] of width [0-9]*: the workers.* must have one width" recv.12.ps0.err &&
	grep -q "width 8" recv.12.ps0.err
'

test_done
