#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='loss recovery: results bit-exact under random loss on every bridge port'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"
. "$TEST_DIRECTORY/lib/capture.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"

# Iterations per loss run: 20 at 1% and 20 at 10% (about 0.6 s and 1.5 s
# an iteration on an idle machine, 2-3 times that on a slow busy one),
# and 10 with results-only loss: every path of the recovery is met many
# times over (each iteration is 8 x 7,900 segments).  `make soak` runs
# the soak-sized 100, 100 and 20.  AGG_LOSS_ITERS (or _1, _10, _RESULT
# one by one) changes them.
ITERS_1=${AGG_LOSS_ITERS_1:-${AGG_LOSS_ITERS:-20}}
ITERS_10=${AGG_LOSS_ITERS_10:-${AGG_LOSS_ITERS:-20}}
ITERS_RESULT=${AGG_LOSS_ITERS_RESULT:-${AGG_LOSS_ITERS:-10}}
# agg-send gives up after SEND_TIMEOUT s without any segment completing,
# agg-recv after RECV_TIMEOUT s in all: generous for a busy machine (an
# iteration at 10% takes about 2 s); agg-recv is stopped as soon as an
# agg-send fails, so a hang costs SEND_TIMEOUT.
SEND_TIMEOUT=${AGG_LOSS_SEND_TIMEOUT:-30}
RECV_TIMEOUT=${AGG_LOSS_RECV_TIMEOUT:-120}
K=4	# input sets, used in turn

# The 9 hosts of t/0300 (ALEPH Sec. 6.3's testbed).
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

# agg packets an agg-stat output counts, less the probes among them
rx_not_probes() {
	awk '$1 == "rx" { r = $2 } $1 == "probes" { p = $2 } END { print r - p }' "$1"
}

node_index() {
	awk -v n="$1" '$1 == "node" { if ($2 == n) { print i; exit } i++ }' plan.txt
}

kids_of() {
	awk -v n="$1" '$1 == "edge" && $4 == n { k++ } END { print k + 0 }' plan.txt
}

# bpftool prints the "sent" map (no BTF) as little-endian hex bytes.
SENT_JQ='def num: if type == "array" then reverse | reduce .[] as $b (0;
		. * 256 + ($b | ltrimstr("0x") | explode |
			reduce .[] as $c (0; . * 16 + (if $c >= 97 then $c - 87 else $c - 48 end))))
	else . end;
	.[] | "\(.key | num) \(.value | num)"'

# agg-stat of every node, and agg-send's "sent" map of every worker, as TAG.
snapshot() {
	for h in $(vcluster_hosts); do
		agg-stat --node "$h" >"stat.$1.$h" || return 1
	done &&
	for w in $(dp_workers); do
		bpftool -j map dump pinned "$AGG_PIN_DIR/1/$w/sent" | jq -r "$SENT_JQ" \
			>"sent.$1.$w" || return 1
	done
}

# Counter NAME of NODE from snapshot FROM to snapshot TO.
delta() {
	awk -v k="$1" '$1 == k { v[FILENAME] = $2 } END { print v[ARGV[2]] - v[ARGV[1]] }' \
		"stat.$3.$2" "stat.$4.$2"
}

# The same summed over every node.
delta_all() {
	dl_sum=0
	for dl_h in $(vcluster_hosts); do
		dl_sum=$((dl_sum + $(delta "$1" "$dl_h" "$2" "$3")))
	done
	echo $dl_sum
}

# Resends agg-send made from snapshot FROM to TO, summed over the workers.
resent_all() {
	for w in $(dp_workers); do
		awk '$1 == 3 { print }' "sent.$1.$w" "sent.$2.$w" | awk 'NR == 1 { a = $2 } NR == 2 { print $2 - a }'
	done | awk '{ s += $1 } END { print s + 0 }'
}

# One iteration: agg-recv and agg-send -v on every worker.  nsenter
# itself in the background (not vcluster_run, a shell function): $! is
# then the tool's own pid, which the kill below must reach.
allreduce() {
	ar_recv=
	ar_send=
	for w in $(dp_workers); do
		nsenter --net="/var/run/netns/$(vcluster_ns "$w")" -- \
			agg-recv --iter "$1" --timeout "$RECV_TIMEOUT" "out.$1.$w" 2>"recv.$1.$w" &
		ar_recv="$ar_recv $!"
	done
	for w in $(dp_workers); do
		nsenter --net="/var/run/netns/$(vcluster_ns "$w")" -- \
			agg-send -v --iter "$1" --timeout "$SEND_TIMEOUT" "in.$1.$w" 2>"send.$1.$w" &
		ar_send="$ar_send $!"
	done
	ar_rc=0
	for p in $ar_send; do wait "$p" || ar_rc=1; done
	[ $ar_rc = 0 ] || kill $ar_recv 2>/dev/null
	for p in $ar_recv; do wait "$p" || ar_rc=1; done
	return $ar_rc
}

# What a failed iteration leaves for the report: every node's counters,
# the loss log of that iteration, agg-send's and agg-recv's words.
report() {
	for h in $(vcluster_hosts); do
		agg-stat --node "$h" >"fail.$1.stat.$h"
		printf '%s:' "$h"
		awk '$2 != 0 && $1 != "other" { printf " %s=%s", $1, $2 }' "fail.$1.stat.$h"
		echo
	done >&2
	loss_stats >"fail.$1.loss" 2>&1
	loss_log | awk -v i="$1" '$2 == i' >"fail.$1.log"
	echo "loss: $(tr '\n' ' ' <"fail.$1.loss"); iteration $1: $(wc -l <"fail.$1.log") drops" >&2
	cat "send.$1".* "recv.$1".* >&2
}

# COUNT iterations from FIRST, the inputs cycling through the K sets:
# every worker's output must be the reference's bits.
run_iters() {
	ri_i=$1
	while [ "$ri_i" -lt $(($1 + $2)) ]; do
		ri_k=$((ri_i % K + 1))
		for w in $(dp_workers); do
			ln -sf "in.$ri_k.$w" "in.$ri_i.$w" || return 1
		done
		ri_t0=$(date +%s.%N)
		allreduce "$ri_i" || { report "$ri_i"; return 1; }
		echo "$ri_i $(date +%s.%N) $ri_t0" | awk '{ print $1, $2 - $3 }' >>"times.$1"
		for w in $(dp_workers); do
			cmp "out.$ri_k.$w" "out.$ri_i.$w" || { report "$ri_i"; return 1; }
		done
		rm -f out.$ri_i.* in.$ri_i.*	# 4 MB per worker and iteration
		ri_i=$((ri_i + 1))
	done
}

# How long the iterations from FIRST took, for the TAP output.
times_of() {
	[ -s "times.$1" ] || { echo "no iteration completed"; return; }
	sort -k 2 -g "times.$1" | awk '{ t[NR] = $2; s += $2 }
		END { printf "%d iteration(s) in %.0f s: %.2f s each (min %.2f, median %.2f, max %.2f)\n",
			NR, s, s / NR, t[1], t[int((NR + 1) / 2)], t[NR] }'
}

# After COUNT iterations from FIRST at PPM, between snapshots FROM and TO:
# the injector dropped about PPM of what it saw, and logged every drop;
# every segment was completed and stored exactly once per iteration (a
# resend is never added or stored twice); the recovery shows in the
# counters; nothing was dropped for a reason loss cannot explain.
check_run() {
	cr_first=$1 cr_n=$2 cr_ppm=$3 cr_from=$4 cr_to=$5
	loss_stats >loss.$cr_to &&
	cat loss.$cr_to &&
	seen=$(loss_stat seen) && dropped=$(loss_stat dropped) &&
	logged=$(loss_stat logged) && overflow=$(loss_stat overflow) &&
	test "$dropped" -gt 0 &&
	awk -v d="$dropped" -v s="$seen" -v p="$cr_ppm" \
		'BEGIN { r = d / s * 1e6; print "drop rate " r " ppm"; exit !(r > 0.8 * p && r < 1.2 * p) }' &&
	cap=1048576 &&
	test "$logged" = $((dropped < cap ? dropped : cap)) &&
	test "$overflow" = $((dropped - logged)) &&
	loss_log >log.$cr_to &&
	test "$(wc -l <log.$cr_to)" = "$logged" &&
	awk -v lo=$cr_first -v hi=$((cr_first + cr_n)) '
		!($1 == "in" || $1 == "out") || $2 < lo || $2 >= hi ||
		$7 !~ /^10\.90\./ || $8 !~ /^10\.90\./ { print "bad log line: " $0; exit 1 }' log.$cr_to &&
	segs=$(( (DP_N + DP_SEG - 1) / DP_SEG + 62 )) &&
	for h in $(vcluster_hosts); do
		kids=$(kids_of $h) &&
		self=$(awk -v n=$h '$1 == "node" && $2 == n { print ($0 ~ / role=ps/) ? 0 : 1 }' plan.txt) &&
		if [ "$kids" -gt 0 ]; then
			test "$(delta done $h $cr_from $cr_to)" = $((cr_n * segs)) &&
			test "$(delta added $h $cr_from $cr_to)" = $((cr_n * segs * (kids + self))) ||
			{ echo "$h: done $(delta done $h $cr_from $cr_to) added $(delta added $h $cr_from $cr_to), want $((cr_n * segs)) and $((cr_n * segs * (kids + self)))"; return 1; }
		fi &&
		if [ "$self" = 1 ]; then
			test "$(delta stored $h $cr_from $cr_to)" = $((cr_n * segs)) &&
			test "$(delta signals $h $cr_from $cr_to)" = "$cr_n" ||
			{ echo "$h: stored $(delta stored $h $cr_from $cr_to) signals $(delta signals $h $cr_from $cr_to)"; return 1; }
		fi &&
		for c in drop_busy drop_malformed drop_job drop_token drop_member drop_route drop_seg error; do
			test "$(delta $c $h $cr_from $cr_to)" = 0 ||
			{ echo "$h: $c $(delta $c $h $cr_from $cr_to)"; return 1; }
		done || return 1
	done &&
	for c in retx served drop_dup relayed tx_fail drop_stale; do
		echo "$c $(delta_all $c $cr_from $cr_to)"
	done >agg.$cr_to &&
	echo "resent $(resent_all $cr_from $cr_to)" >>agg.$cr_to &&
	cat agg.$cr_to &&
	test "$(awk '$1 == "retx" { print $2 }' agg.$cr_to)" -gt 0 &&
	test "$(awk '$1 == "served" { print $2 }' agg.$cr_to)" -gt 0 &&
	test "$(awk '$1 == "drop_dup" { print $2 }' agg.$cr_to)" -gt 0 &&
	test "$(awk '$1 == "resent" { print $2 }' agg.$cr_to)" -gt 0
}

its() {
	if [ "$1" = 1 ]; then echo "1 iteration"; else echo "$1 iterations"; fi
}

# A log of loss in both directions has drops of data and of results,
# on the way from and to the hosts.
both_ways() {
	test "$(loss_stat dropped_in)" -gt 0 && test "$(loss_stat dropped_out)" -gt 0 &&
	for bw in "in data" "in result" "out data" "out result"; do
		awk -v d="${bw% *}" -v t="${bw#* }" '$1 == d && $5 == t { f = 1; exit } END { exit !f }' "$1" ||
		{ echo "no drop of $bw in $1"; return 1; }
	done
}

test_expect_success 'plan (1M float32) and agg-load on every host' '
	agg-plan --size 4000000 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt &&
	test "$DP_N" = 1000000 &&
	command -v losstool
'

test_expect_success 'losstool: bad usage exits 2, a missing interface or pin directory is named' '
	test_expect_code 2 losstool &&
	test_expect_code 2 losstool attach lo sideways 10 9999 $LOSS_PIN_DIR 2>err &&
	grep "direction .sideways." err &&
	test_expect_code 2 losstool attach lo in 1000001 9999 $LOSS_PIN_DIR 2>err &&
	grep "PPM .1000001." err &&
	test_expect_code 2 losstool attach lo in 10 9999 $LOSS_PIN_DIR --type ack 2>err &&
	grep "type .ack." err &&
	test_expect_code 2 losstool attach nosuch0 in 10 9999 $LOSS_PIN_DIR 2>err &&
	grep "no interface nosuch0" err &&
	test_expect_code 2 losstool attach lo in 10 9999 /tmp/not-bpffs 2>err &&
	grep "not on a bpf filesystem" err &&
	test_must_fail losstool log $LOSS_PIN_DIR 2>err &&
	grep "no losstool attach there" err &&
	test_must_fail test -e $LOSS_PIN_DIR
'

test_expect_success "the loss-free reference: $K iterations, bit-identical, within 1e-6" '
	for k in $(seq $K); do
		dp_inputs $k && allreduce $k && dp_check $k || return 1
	done
'

# c1 sends, nobody else: with every DATA from c1 dropped on its port,
# nothing reaches its parent, and the log names each try: the first
# sends of its congestion window (8 segments at first, no result ever
# widens it), then resends.
test_expect_success 'the injector drops what it is told to, logs each drop, and passes the rest' '
	parent=$(awk "\$1 == \"edge\" && \$3 == \"c1\" { print \$4 }" plan.txt) &&
	from=$(node_index c1) &&
	loss_on --type data 1000000 in c1 &&
	agg-stat --node $parent >before &&
	test_expect_code 1 vcluster_run c1 agg-send --iter 5 --timeout 3 in.1.c1 2>err &&
	grep "iteration 5: 62 of 62 exponent segments not aggregated" err &&
	agg-stat --node $parent >after &&
	# nothing reached the parent but the probes agg-send sends before it gives up
	test "$(rx_not_probes before)" = "$(rx_not_probes after)" &&
	loss_stats >stats && cat stats &&
	test "$(loss_stat seen_in)" -ge 16 &&
	test "$(loss_stat dropped_in)" = "$(loss_stat seen_in)" &&
	test "$(loss_stat seen_out)" = 0 &&
	test "$(loss_stat logged)" = "$(loss_stat dropped)" &&
	loss_log >log &&
	test "$(wc -l <log)" = "$(loss_stat dropped)" &&
	awk -v f=$from "\$1 != \"in\" || \$2 != 5 || \$3 >= 62 || \$4 != f || \$5 != \"data\" ||
		\$7 != \"10.90.0.4\" || \$8 != \"10.90.0.3\" { print \"unexpected: \" \$0; exit 1 }" log &&
	awk "\$6 == 0 { z[\$3]++ } \$6 > 0 { r++ } END { for (s in z) { n++; if (z[s] != 1) exit 1 }
		exit !(n >= 8 && r >= n) }" log &&
	vcluster_run c1 ping -c 2 -i 0.2 -W 10 -q 10.90.0.3 >/dev/null &&
	printf "%064d" 0 | vcluster_run c1 nc -u -q0 10.90.0.3 9999 &&
	m0=$(awk "\$1 == \"drop_malformed\" { print \$2 }" after) &&
	n=0 &&
	until m=$(dp_stat $parent drop_malformed) && [ $((m - m0)) -ge 1 ]; do
		n=$((n + 1)) && test $n -lt 300 || return 1
		sleep 0.1
	done &&
	test $((m - m0)) = 1 &&
	loss_off &&
	test_must_fail test -e $LOSS_PIN_DIR
'

FIRST=10
test_expect_success "$(its $ITERS_1) bit-exact with 1% loss on every port, both directions" '
	snapshot a1 &&
	loss_on 10000 &&
	run_iters $FIRST $ITERS_1 &&
	snapshot b1 &&
	check_run $FIRST $ITERS_1 10000 a1 b1 &&
	both_ways log.b1
'
say "1% loss: $(times_of $FIRST)"

FIRST=$((FIRST + ITERS_1))
test_expect_success "$(its $ITERS_10) bit-exact with 10% loss on every port, both directions" '
	snapshot a10 &&
	loss_on 100000 &&
	run_iters $FIRST $ITERS_10 &&
	snapshot b10 &&
	check_run $FIRST $ITERS_10 100000 a10 b10 &&
	both_ways log.b10
'
say "10% loss: $(times_of $FIRST)"

# Only results are lost, only on their way down: every DATA arrives, so
# all the repair is a resend answered from a finished slot and the
# result sent down again.
FIRST=$((FIRST + ITERS_10))
test_expect_success "$(its $ITERS_RESULT) bit-exact with 10% of the results lost on the way to each host" '
	snapshot ar &&
	loss_on --type result 100000 out &&
	run_iters $FIRST $ITERS_RESULT &&
	snapshot br &&
	check_run $FIRST $ITERS_RESULT 100000 ar br &&
	test "$(loss_stat seen_in)" = 0 &&
	awk "\$1 != \"out\" || \$5 != \"result\" { print \"unexpected: \" \$0; exit 1 }" log.br
'
say "10% of the results lost: $(times_of $FIRST)"

# agg-check --pcap on a capture of c1's bridge port, taken while the
# injector drops c1's DATA there: a capture sees what c1 sends before tc
# ingress drops it, and every transmission dropped was sent again.
FIRST=$((FIRST + ITERS_RESULT))
test_expect_success 'agg-check --pcap names the segments the injector dropped' '
	from=$(node_index c1) &&
	loss_on --type data 50000 in c1 &&
	CAP_HOST=c1 capture_start lossy.pcap &&
	run_iters $FIRST 1 &&
	capture_stop &&
	loss_log | awk -v i=$FIRST -v f=$from "\$2 == i && \$4 == f { print \$3 }" |
		sort -u >dropped &&
	test -s dropped &&
	test_expect_code 1 agg-check --pcap lossy.pcap --plan plan.txt -v >check.out &&
	sed -n "s/^lost iter=$FIRST from=c1 to=[a-z0-9]* type=DATA seg=//p" check.out |
		sort -u >named &&
	comm -23 dropped named >unnamed &&
	{ test ! -s unnamed || { echo "dropped, not named:"; cat unnamed; false; }; } &&
	say "agg-check --pcap: $(wc -l <dropped) segments dropped by the injector, all named; $(comm -13 dropped named | wc -l) more named (resent early, not lost)"
'

test_expect_success 'loss_off leaves no pin behind' '
	loss_off &&
	test_must_fail test -e $LOSS_PIN_DIR
'

test_done
