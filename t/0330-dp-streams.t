#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-send --streams and libagg streams: the same bits with any stream count, with and without loss; per-stream counters'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"
. "$TEST_DIRECTORY/lib/capture.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"
command -v nc >/dev/null && command -v tcpdump >/dev/null ||
	skip_all "no nc or tcpdump (make deps installs them)"

# An ALEPH plan with a PS and aggregators (job 1), and RAT's worker-rooted
# trees on the workers (job 2), whose roots fan results out from agg-send.
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
b1  10.90.0.2   bw=20
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
c4  10.90.0.7   bw=10
EOF_HOSTS
grep -v role=ps hosts.txt >hosts-rat.txt
ITERS=${AGG_LOSS_ITERS:-3}

# run TAG ITER STREAMS: one allreduce of the inputs of iteration 1 as
# iteration ITER, every worker with --streams STREAMS ("mixed": each its
# own count); the results in out.ITER.W, kept as res.TAG.W
run() {
	for w in $(dp_workers); do
		ln -sf in.1.$w in.$2.$w || return 1
	done &&
	if [ "$3" = mixed ]; then
		dp_send_args_a="--streams 3" dp_send_args_b1="--streams 1" \
		dp_send_args_c1="--streams 4" dp_send_args_c2="--streams 2" \
		dp_send_args_c3="--streams auto" dp_send_args_c4="--streams 64" \
			DP_SEND_ARGS=-v dp_allreduce $2
	else
		DP_SEND_ARGS="-v --streams $3" dp_allreduce $2
	fi &&
	for w in $(dp_workers); do
		cp out.$2.$w res.$1.$w || return 1
	done
}

# same TAG: every worker's result of TAG is the 1-stream reference's bits
same() {
	for w in $(dp_workers); do
		cmp res.ref.$w res.$1.$w || return 1
	done
}

test_expect_success 'setup: 7 hosts, an ALEPH plan of 500000 values' '
	agg-plan --size 2000000 hosts.txt >plan.txt &&
	grep -q "^edge 0 c[0-9] [ab]" plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success 'the 1-stream reference: the same bits on every worker, within 1e-6 of the sum' '
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	for w in $(dp_workers); do cp out.1.$w res.ref.$w || return 1; done
'

test_expect_success '2 and 4 streams, and every worker with a count of its own: the same bits' '
	run s2 2 2 && same s2 &&
	run s4 3 4 && same s4 &&
	run mixed 4 mixed && same mixed
'

test_expect_success '4 streams leave c1 from 4 source ports, on the wire to its parent' '
	parent=$(awk "\$1 == \"edge\" && \$3 == \"c1\" { print \$4 }" plan.txt) &&
	paddr=$(awk -v p=$parent "\$1 == \"node\" && \$2 == p { print \$3 }" plan.txt) &&
	capture_start c1.pcap &&
	run cap 5 4 && same cap &&
	capture_stop &&
	tcpdump -r c1.pcap -nn "src host 10.90.0.4 and dst host $paddr and udp dst port 9999" 2>/dev/null |
		sed -n "s/.* IP 10\.90\.0\.4\.\([0-9]*\) > .*/\1/p" | sort -u >ports &&
	cat ports &&
	test "$(wc -l <ports)" = 4 &&
	! grep -qx 9999 ports
'

test_expect_success 'agg-stat: per-stream counters, text and JSON, add up to the totals' '
	for w in $(dp_workers); do
		agg-stat -j --node $w >$w.json &&
		for f in sent sent_local resent sent_fanout sent_signals; do
			jq -e "([.streams[].$f] | add // 0) == .$f" $w.json >/dev/null ||
			{ echo "$w: $f of the streams does not add up"; cat $w.json; return 1; }
		done || return 1
	done &&
	# c1 sent with 1, 2, 4, 4 (mixed) and 4 streams: streams 0-3 used
	jq -r ".streams[].stream" c1.json >used && printf "0\n1\n2\n3\n" >want && test_cmp want used &&
	# c4 sent once with 64 streams, at most one per lane of the window
	test "$(jq ".streams | length" c4.json)" -gt 4 &&
	agg-stat --node c1 >c1.txt &&
	grep "^# sent per stream" c1.txt &&
	awk "/^# sent per stream/ { t = 1; next } t && /^# +[0-9]+ / { s += \$3 } END { print s }" c1.txt >sum &&
	test "$(cat sum)" = "$(dp_stat c1 sent)"
'

test_expect_success 'agg-send -v says how many streams, and --streams auto why' '
	grep " over 4 streams in " send.3.c1 &&
	grep -- "--streams auto: [0-9]* stream" send.4.c3
'

test_expect_success 'a bad --streams is bad usage (exit 2), one clear line, nothing sent' '
	agg-stat --node c1 >before &&
	for bad in 0 65 -1 x 2x ""; do
		test_expect_code 2 vcluster_run c1 agg-send --iter 99 --streams "$bad" in.1.c1 2>err &&
		head -1 err >first &&
		grep "^agg-send: bad --streams .$bad. (1 to 64, or auto)$" first || { cat err; return 1; }
	done &&
	for opt in "--streams 2" "--streams auto" "--cc off"; do
		test_expect_code 2 vcluster_run c1 agg-send --sparse $opt in.1.c1 2>err &&
		grep "^agg-send: --sparse sends over one acknowledged window: no --streams or --cc$" err ||
		{ cat err; return 1; }
	done &&
	agg-stat --node c1 >after &&
	grep -v "^other " before >b && grep -v "^other " after >a && test_cmp b a
'

test_expect_success "10% loss both ways, $ITERS iterations each with 1 and 4 streams: the reference's bits" '
	loss_on 100000 &&
	i=10 &&
	for s in 1 4 mixed; do
		k=0 &&
		while [ $k -lt $ITERS ]; do
			run loss$s.$k $i $s && same loss$s.$k || return 1
			i=$((i + 1)) && k=$((k + 1))
		done || return 1
	done &&
	test "$(loss_stat dropped)" -gt 0 &&
	test "$(dp_stat c1 resent)" -gt 0
'

test_expect_success 'loss off; worker-rooted trees (RAT, job 2) with 1, 3 and 4 streams: the same bits' '
	loss_off &&
	agg-plan -s rat --job 2 --port 9990 --size 400000 hosts-rat.txt >plan2.txt &&
	for w in $(awk "\$1 == \"node\" { print \$2 }" plan2.txt); do
		vcluster_run $w agg-load --arp-timeout 10000 plan2.txt || return 1
	done &&
	DP_PLAN=plan2.txt DP_JOB=2 DP_N=100000 &&
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	for w in $(dp_workers); do cp out.1.$w res.ref.$w || return 1; done &&
	run r3 2 3 && same r3 &&
	run r4 3 4 && same r4 &&
	for w in $(dp_workers); do
		agg-stat -j --job 2 --node $w >$w.2.json &&
		for f in sent sent_local resent sent_fanout sent_signals; do
			jq -e "([.streams[].$f] | add // 0) == .$f" $w.2.json >/dev/null ||
			{ echo "$w: $f of the streams does not add up"; cat $w.2.json; return 1; }
		done || return 1
	done
'

cat >streams.c <<'EOF_C'
/* Open with opts.streams = argv[1] (auto: AGG_STREAMS_AUTO), allreduce
 * (rank + 1) x a pattern of argv[2] values, check the sum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <agg/agg.h>

int main(int argc, char **argv)
{
	struct agg_opts o = { .sz = sizeof(o), .job = "1" };
	struct agg *a;
	size_t n = strtoul(argv[2], NULL, 0), bad = 0;
	float *x = malloc(n * sizeof(*x)), k;
	int w;

	o.streams = strcmp(argv[1], "auto") ? (unsigned)strtoul(argv[1], NULL, 0) : AGG_STREAMS_AUTO;
	if (agg_open(&a, &o)) {
		fprintf(stderr, "streams: %s\n", agg_errmsg());
		return 1;
	}
	w = agg_world_size(a);
	k = w * (w + 1) / 2.0f;
	for (size_t i = 0; i < n; i++)
		x[i] = (agg_rank(a) + 1) * (float)((int)(i % 7) - 3) * 0.25f;
	if (agg_allreduce(a, x, n, AGG_FLOAT32, AGG_REDUCE_SUM, 0)) {
		fprintf(stderr, "streams: %s\n", agg_errmsg());
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		bad += x[i] != k * (float)((int)(i % 7) - 3) * 0.25f;
	printf("%zu values, %zu wrong\n", n, bad);
	agg_close(a);
	return bad != 0;
}
EOF_C

test_expect_success 'libagg: opts.streams 4, auto and 1 on the workers at once give exact sums' '
	cc -Wall -Werror -I"$AGG_SRC/lib/api" -o streams streams.c -L"$AGG_BUILD" -lagg &&
	pids= &&
	for w in $(awk "\$1 == \"node\" && !/ role=ps/ { print \$2 }" plan.txt); do
		case $w in c1) s=4 ;; c2) s=auto ;; *) s=1 ;; esac
		{ AGG_RUN=7 vcluster_run $w env LD_LIBRARY_PATH="$AGG_BUILD" ./streams $s 300000 \
			>lib.$w 2>err.lib.$w; echo $? >rc.lib.$w; } &
		pids="$pids $!"
	done &&
	for p in $pids; do wait $p; done &&
	for w in $(awk "\$1 == \"node\" && !/ role=ps/ { print \$2 }" plan.txt); do
		cat lib.$w err.lib.$w &&
		test "$(cat rc.lib.$w)" = 0 &&
		grep "^300000 values, 0 wrong" lib.$w || return 1
	done &&
	agg-stat -j --job 1 --node c1 >c1.lib.json &&
	jq -e "([.streams[].sent] | add) == .sent" c1.lib.json
'

test_expect_success 'libagg: opts.streams 65 is refused at open, naming the limit' '
	AGG_RUN=8 vcluster_run c1 env LD_LIBRARY_PATH="$AGG_BUILD" ./streams 65 10 >out 2>err &&
	return 1
	cat err &&
	grep "^streams: streams 65: 1 to 64, or AGG_STREAMS_AUTO$" err
'

test_done
