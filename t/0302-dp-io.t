#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-send input (mapped file, pipe) and agg-recv output (replaced file, pipe, FIFO, device)'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS

# io_allreduce ITER: on every worker W, the sh command lines $RECV_W and
# $SEND_W (default: R out.$I.W and S in.$I.W), where $I is ITER and R and
# S are agg-recv and agg-send of that iteration.  Fails if any fails.
io_sh='R() { agg-recv --iter $I --timeout 30 "$@"; }; S() { agg-send --iter $I --timeout 30 "$@"; }; '
io_allreduce() {
	io_pids=
	for w in $(dp_workers); do
		eval "io_r=\${RECV_$w:-'R out.\$I.$w'}"
		vcluster_run $w env I=$1 sh -c "$io_sh$io_r" 2>recv.$1.$w &
		io_pids="$io_pids $!"
	done
	for w in $(dp_workers); do
		eval "io_s=\${SEND_$w:-'S in.\$I.$w'}"
		vcluster_run $w env I=$1 sh -c "$io_sh$io_s" 2>send.$1.$w &
		io_pids="$io_pids $!"
	done
	io_rc=0
	for p in $io_pids; do wait $p || io_rc=1; done
	[ $io_rc = 0 ] || cat recv.$1.* send.$1.* >&2
	return $io_rc
}

# No temporary file of agg-recv in DIR: only the names given.
only_files() {
	dir=$1; shift
	ls -A "$dir" | sort >files.have &&
	for f; do echo "$f"; done | sort >files.want &&
	test_cmp files.want files.have
}

test_expect_success 'plan (1M float32, 3 workers) loaded on every host' '
	agg-plan --size 4000000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	test "$DP_N" = 1000000
'

test_expect_success 'agg-recv FILE: the result, no temporary file left, the mode fopen leaves' '
	dp_inputs 1 &&
	mkdir o1 &&
	printf "old" >o1/w1 && chmod 604 o1/w1 &&
	RECV_w1="R o1/w1" RECV_w2="R o1/w2" RECV_w3="R o1/w3" &&
	old_umask=$(umask) && umask 027 &&
	{ io_allreduce 1; rc=$?; umask $old_umask; test $rc = 0; } &&
	gradtool check $DP_SEG o1/w1 in.1.w1 in.1.w2 in.1.w3 &&
	cmp o1/w1 o1/w2 && cmp o1/w1 o1/w3 &&
	test $(stat -c %a o1/w1) = 604 &&
	test $(stat -c %a o1/w2) = 640 &&
	only_files o1 w1 w2 w3
'

test_expect_success 'a symlink FILE: its target gets the result, the link stays a link' '
	dp_inputs 2 &&
	mkdir real && echo old >real/sum && ln -s real/sum link.w1 &&
	RECV_w1="R link.w1" RECV_w2= RECV_w3= &&
	io_allreduce 2 &&
	test -L link.w1 &&
	cmp real/sum out.2.w2 && cmp out.2.w2 out.2.w3 &&
	gradtool check $DP_SEG out.2.w2 in.2.w1 in.2.w2 in.2.w3 &&
	only_files real sum
'

test_expect_success 'standard output into a pipe, a FIFO, /dev/null: the same bits as a file' '
	dp_inputs 3 &&
	mkfifo fifo &&
	{ cat fifo >fifo.out & } && reader=$! &&
	test_when_finished "kill $reader 2>/dev/null || :" &&
	RECV_w1="R | cat >pipe.out" RECV_w2="R fifo" RECV_w3= &&
	io_allreduce 3 &&
	wait $reader &&
	gradtool check $DP_SEG out.3.w3 in.3.w1 in.3.w2 in.3.w3 &&
	cmp out.3.w3 pipe.out && cmp out.3.w3 fifo.out &&
	RECV_w1="R /dev/null" RECV_w2="R >stdout.out" RECV_w3= &&
	for w in w1 w2 w3; do cp in.3.$w in.4.$w || return 1; done &&
	io_allreduce 4 &&
	test -c /dev/null &&
	cmp out.3.w3 out.4.w3 && cmp out.3.w3 stdout.out
'

test_expect_success '--in-place: the same file (inode) gets the result, shorter or longer before' '
	dp_inputs 5 &&
	mkdir ip && head -c 5000000 /dev/zero >ip/w1 && echo short >ip/w2 &&
	ino1=$(stat -c %i ip/w1) && ino2=$(stat -c %i ip/w2) &&
	RECV_w1="R --in-place ip/w1" RECV_w2="R --in-place ip/w2" RECV_w3="R --in-place ip/w3" &&
	io_allreduce 5 &&
	gradtool check $DP_SEG ip/w1 in.5.w1 in.5.w2 in.5.w3 &&
	cmp ip/w1 ip/w2 && cmp ip/w1 ip/w3 &&
	test $(stat -c %s ip/w1) = 4000000 &&
	test $(stat -c %i ip/w1) = $ino1 && test $(stat -c %i ip/w2) = $ino2 &&
	only_files ip w1 w2 w3 &&
	test_expect_code 1 vcluster_run w1 agg-recv --in-place --iter 50 --timeout 1 ip/w1 &&
	cmp ip/w1 ip/w2
'

test_expect_success 'on timeout (exit 1) an existing FILE keeps its content; nothing left behind' '
	mkdir keep && echo "old content" >keep/sum && cp keep/sum expect &&
	test_expect_code 1 vcluster_run w1 agg-recv --iter 50 --timeout 1 keep/sum 2>err &&
	grep "iteration 50: .* missing after 1 s" err &&
	test_cmp expect keep/sum &&
	only_files keep sum &&
	test_expect_code 1 vcluster_run w1 agg-recv --iter 50 --timeout 1 keep/new 2>err &&
	only_files keep sum
'

test_expect_success 'killed while waiting (SIGTERM, SIGINT): FILE unchanged, nothing left behind' '
	for sig in TERM INT; do
		# not vcluster_run: $! must be agg-recv (nsenter and env exec it)
		nsenter --net=/var/run/netns/$(vcluster_ns w1) -- env --default-signal=INT \
			agg-recv --iter 51 --timeout 30 keep/sum 2>err &
		pid=$! &&
		# waiting: it listens for the fetch signal (plan port + 1)
		vcluster_listening w1 udp $(( $(dp_plan_field port) + 1 )) &&
		kill -$sig $pid &&
		{ wait $pid; test $? -gt 128; } &&
		test_cmp expect keep/sum &&
		only_files keep sum || return 1
	done
'

# Iterations 7 and 8: within a run an iteration is sent and received once.
test_expect_success 'agg-send: FILE, a pipe and standard input (at an offset too) give the same bits' '
	dp_inputs 7 &&
	RECV_w1= RECV_w2= RECV_w3= &&
	io_allreduce 7 &&
	for w in w1 w2 w3; do cp in.7.$w in.8.$w || return 1; done &&
	head -c 4099 /dev/urandom >pre.w3 && cat in.8.w3 >>pre.w3 &&
	SEND_w1="cat in.8.w1 | S" SEND_w2="S - <in.8.w2" &&
	SEND_w3="{ dd bs=4099 count=1 of=/dev/null status=none; S; } <pre.w3" &&
	io_allreduce 8 &&
	for w in w1 w2 w3; do cmp out.7.$w out.8.$w || return 1; done &&
	SEND_w1= SEND_w2= SEND_w3=
'

test_expect_success 'a wrong length is bad input (exit 2), file or pipe, with the same messages' '
	head -c 1000 in.5.w1 >short && cat in.5.w1 in.5.w1 >long &&
	tail="the plan.s gradient is 4000000 bytes (1000000 float32 values)\$" &&
	test_expect_code 2 vcluster_run w1 agg-send --iter 9 short 2>err &&
	grep "^agg-send: short: 1000 bytes, $tail" err &&
	test_expect_code 2 vcluster_run w1 agg-send --iter 9 long 2>err &&
	grep "^agg-send: long: more than 4000000 bytes, $tail" err &&
	test_expect_code 2 vcluster_run w1 sh -c "cat short | agg-send --iter 9" 2>err &&
	grep "^agg-send: <stdin>: 1000 bytes, $tail" err &&
	test_expect_code 2 vcluster_run w1 sh -c "cat long | agg-send --iter 9" 2>err &&
	grep "^agg-send: <stdin>: more than 4000000 bytes, $tail" err &&
	test_expect_code 2 vcluster_run w1 agg-send --iter 9 - <short 2>err &&
	grep "^agg-send: <stdin>: 1000 bytes, $tail" err &&
	test_expect_code 2 vcluster_run w1 agg-send --iter 9 nonexistent 2>err &&
	grep "^agg-send: cannot open nonexistent: No such file or directory\$" err &&
	mkdir dir &&
	test_expect_code 2 vcluster_run w1 agg-send --iter 9 dir 2>err &&
	grep "^agg-send: cannot read dir: Is a directory\$" err
'

# agg-send reads a mapped FILE twice: for the exponents at once, for the
# values once every worker's exponents are in (w2 and w3 start later).
test_expect_success 'a FILE truncated while agg-send runs: exit 2, said so' '
	cp in.5.w1 trunc || return 1
	before=$(dp_stat ps0 added) &&
	{ vcluster_run w1 agg-send --iter 10 --timeout 30 trunc 2>err.w1 & } &&
	pid=$! &&
	# w1 has read FILE once: its exponents are in at ps0
	n=0 &&
	until [ $(dp_stat ps0 added) -gt $before ]; do
		n=$((n + 1)) && test $n -lt 600 || return 1
		sleep 0.05
	done &&
	: >trunc &&
	{ vcluster_run w2 agg-send --iter 10 --timeout 2 in.5.w2 2>/dev/null & } &&
	p2=$! &&
	{ vcluster_run w3 agg-send --iter 10 --timeout 2 in.5.w3 2>/dev/null & } &&
	p3=$! &&
	test_expect_code 2 wait $pid &&
	grep "^agg-send: trunc was truncated while it was being sent" err.w1 &&
	{ wait $p2; wait $p3; true; }
'

test_done
