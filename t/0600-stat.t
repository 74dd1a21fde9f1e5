#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-stat: counters after a known workload, rates, slots, JSON'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
test_require JQ "make deps installs jq"

# One tree: ps0 the root with children a and b; a aggregates c1, c2 and
# its own gradient.  41 wire segments an iteration (1 exponent, 40 data),
# a pool of 8 slots (2 windows of 4).
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.6.100 bw=40 role=ps
a   10.90.6.1   bw=30
b   10.90.6.2   bw=10
c1  10.90.6.3   bw=10
c2  10.90.6.4   bw=10
EOF_HOSTS
cat >plan.txt <<'EOF_PLAN'
plan v1 job=7 port=9999 scheme=aleph segment=128 size=20480 slots=4 token=0x5eed bw-demand=0
node ps0 10.90.6.100 bw=40 role=ps
node a 10.90.6.1 bw=30
node b 10.90.6.2 bw=10
node c1 10.90.6.3 bw=10
node c2 10.90.6.4 bw=10
tree 0 root=ps0 weight=1
edge 0 a ps0
edge 0 b ps0
edge 0 c1 a
edge 0 c2 a
EOF_PLAN
N=41
ITERS=2

# field NODE NAME [FILE]: NAME's value in agg-stat's text for NODE
field() {
	awk -v k="$2" '$1 == k { print $2; n++ } END { exit n != 1 }' "${3:-$1.stat}"
}

# expect NODE NAME VALUE: say what differs
expect() {
	got=$(field "$1" "$2") &&
	{ test "$got" = "$3" || { echo "$1 $2: $got, want $3"; return 1; }; }
}

# Iteration I on every worker with the inputs of iteration 1.
iterate() {
	for w in $(dp_workers); do ln -sf in.1.$w in.$1.$w || return 1; done &&
	dp_allreduce "$1"
}

test_expect_success 'set up: 5 hosts, the plan loaded, 2 iterations' '
	dp_setup hosts.txt plan.txt aggst$$- &&
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	iterate 2 && dp_check 2
'

test_expect_success 'the text groups every counter once, names at column 0' '
	agg-stat --node ps0 >ps0.stat &&
	grep -v "^#" ps0.stat | awk "{ print \$1 }" | sort >names &&
	sort -u names >names.u &&
	test_cmp names.u names &&
	test $(wc -l <names) = 36 &&
	for g in "packets in" aggregation results recovery drops "sent by agg-send and libagg"; do
		grep -qx "# $g" ps0.stat || return 1
	done &&
	for k in other rx added stored relayed served pending probes done fwd_up fanout \
		signals saturated drop_dup drop_stale drop_busy drop_malformed drop_job \
		drop_token drop_member drop_mac drop_flags drop_run drop_ahead drop_route \
		drop_seg error retx tx_fail sparse \
		iterations sent sent_local resent sent_fanout sent_signals; do
		grep -q "^$k " ps0.stat || return 1
	done &&
	head -1 ps0.stat | grep "^# job 7 node ps0 10.90.6.100 root, [0-9]* cpus, segment 128 values$"
'

# Exact numbers per role.  A resend (agg-send did not see a result within
# its timeout on a busy machine) adds packets that are served again or
# dropped as duplicates, but never changes what is added, completed or
# stored: those are exact always, the rest exact when nothing was resent.
test_expect_success 'counters after 2 iterations: what every role must count' '
	resent=0 &&
	for h in $(vcluster_hosts); do
		agg-stat --node $h >$h.stat &&
		resent=$((resent + $(field $h resent))) || return 1
	done &&
	say "resent by agg-send in all: $resent" &&
	NI=$((N * ITERS)) &&
	expect ps0 added $((2 * NI)) && expect ps0 done $NI && expect ps0 stored 0 &&
	expect ps0 signals 0 && expect ps0 iterations 0 &&
	expect a added $((3 * NI)) && expect a done $NI && expect a stored $NI &&
	expect a signals $ITERS && expect a iterations $ITERS &&
	for w in b c1 c2; do
		expect $w added 0 && expect $w done 0 && expect $w stored $NI &&
		expect $w signals $ITERS && expect $w iterations $ITERS &&
		expect $w sent $((NI + $(field $w resent))) && expect $w sent_local 0 || return 1
	done &&
	expect a sent 0 && expect a sent_local $((NI + $(field a resent))) &&
	for h in $(vcluster_hosts); do
		# every agg packet gets exactly one outcome
		awk -v h=$h "/^#/ { next } { v[\$1] = \$2 }
		     END { o = v[\"added\"] + v[\"stored\"] + v[\"relayed\"] + v[\"served\"] + \
			       v[\"pending\"] + v[\"probes\"] + v[\"error\"] + v[\"sparse\"]
			   for (k in v) if (k ~ /^drop_/) o += v[k]
			   if (o != v[\"rx\"]) { print h, \"rx\", v[\"rx\"], \"outcomes\", o; exit 1 } }" $h.stat &&
		for k in drop_stale drop_busy drop_malformed drop_job drop_token drop_member drop_mac \
			drop_flags drop_run drop_ahead drop_route drop_seg error tx_fail saturated \
			pending probes; do
			expect $h $k 0 || return 1
		done || return 1
	done &&
	if test $resent = 0; then
		expect ps0 rx $((2 * NI)) && expect ps0 fanout $((2 * NI)) && expect ps0 fwd_up 0 &&
		expect a rx $((4 * NI)) && expect a fwd_up $NI && expect a fanout $((2 * NI)) &&
		for h in $(vcluster_hosts); do
			expect $h retx 0 && expect $h served 0 && expect $h drop_dup 0 &&
			expect $h relayed 0 || return 1
		done &&
		for w in b c1 c2; do
			expect $w rx $NI && expect $w fwd_up 0 && expect $w fanout 0 || return 1
		done
	else
		say "resends: exact rx, fanout and fwd_up not asserted"
	fi
'

test_expect_success '--all -j: every node, the same fields and values as the text' '
	agg-stat --all --job 7 -j >all.json &&
	jq -e "length == 5 and ([.[].node] == [\"a\", \"b\", \"c1\", \"c2\", \"ps0\"])" all.json &&
	agg-stat --all >all.stat &&
	test $(grep -c "^# job 7 node " all.stat) = 5 &&
	for h in $(vcluster_hosts); do
		agg-stat --node $h >$h.stat &&
		agg-stat --node $h -j >$h.json &&
		jq -r "to_entries[] | select(.key | test(\"^(job|node|address|role|cpus|segment|streams)$\") | not) |
			\"\\(.key) \\(.value)\"" $h.json | grep -v "^other " | sort >$h.json.kv &&
		grep -v "^#" $h.stat | awk "{ print \$1, \$2 }" | grep -v "^other " | sort >$h.text.kv &&
		test_cmp $h.text.kv $h.json.kv &&
		jq -r ".[] | select(.node == \"$h\") | to_entries[] |
			select(.key | test(\"^(job|node|address|role|cpus|segment|other|streams)$\") | not) |
			\"\\(.key) \\(.value)\"" all.json | sort >$h.all.kv &&
		test_cmp $h.text.kv $h.all.kv &&
		jq -e ".job == 7 and .node == \"$h\" and .segment == 128 and (.cpus | type == \"number\")" $h.json ||
		return 1
	done &&
	jq -e ".role == \"aggregator\" and .address == \"10.90.6.1\"" a.json &&
	jq -e ".role == \"leaf\"" c1.json &&
	agg-stat -p --node a | jq -e ".done == $((N * ITERS))"
'

test_expect_success '--per-cpu: the CPUs add up to the total, in text and JSON' '
	agg-stat --node a --per-cpu >pc.stat &&
	ncpu=$(head -1 pc.stat | sed -n "s/.*, \([0-9]*\) cpus,.*/\1/p") &&
	test "$ncpu" -ge 1 &&
	grep -E "^# counter +total +cpu0( +cpu[0-9]+)*$" pc.stat &&
	awk -v n=$ncpu "/^#/ { next }
		\$1 ~ /^(iterations|sent|sent_local|resent|sent_fanout|sent_signals)\$/ { next }
		{ if (NF != n + 2) { print \"fields: \" \$0; exit 1 }
		  s = 0; for (i = 3; i <= NF; i++) s += \$i
		  if (s != \$2) { print \"sum: \" \$0; exit 1 } }" pc.stat &&
	agg-stat --node a --per-cpu -j >pc.json &&
	jq -e "(.per_cpu | length) == $ncpu" pc.json &&
	jq -e ". as \$t | [.per_cpu[0] | keys[] | select(. != \"cpu\")] |
		all(. as \$k | ([\$t.per_cpu[][\$k]] | add) == (\$t[\$k]))" pc.json
'

test_expect_success '--slots: the pool of the last window, contributors by name' '
	agg-stat --node a --slots >a.slots &&
	cat a.slots &&
	grep "^# 8 slots (2 windows of 4), 1 tree, 41 wire segments, showing 0-40$" a.slots &&
	awk "\$1 ~ /^[0-9]+\$/ && NF == 9" a.slots >a.rows &&
	test $(wc -l <a.rows) = 8 &&
	# iteration 2 took the pool last: segments 33..40, in slot (2 x 41 + seg) mod 8
	awk "{ if (\$2 != 2 || \$1 != (2 * 41 + \$3) % 8 || \$3 < 33 || \$6 != \"done\" ||
		   \$7 != \"0x7/0x7\" || \$8 != \"c1,c2,a\" || \$9 != \"-\") { print; exit 1 } }" a.rows &&
	grep "^# 8 slots shown, 0 never used$" a.slots &&
	grep "^0  *2 max$" a.slots && grep "^1-40  *2 sum$" a.slots &&
	agg-stat --node ps0 --slots -j >ps0.slots.json &&
	jq -e "(.slots | length) == 8 and all(.slots[]; .state == \"done\" and
		.in == [\"a\", \"b\"] and .missing == [] and .iter == 2 and .run == 0 and .bitmap == 3)" ps0.slots.json &&
	jq -e ".results == []" ps0.slots.json &&
	agg-stat --node c1 --slots -j >c1.slots.json &&
	jq -e ".slots == [] and .unused == 8 and .results == [
		{first: 0, last: 0, stored: true, iter: 2, run: 0, op: \"max\"},
		{first: 1, last: 40, stored: true, iter: 2, run: 0, op: \"sum\"}]" c1.slots.json
'

test_expect_success '--slots --range: only those wire segments' '
	agg-stat --node a --slots --range 35-36 -j >r.json &&
	jq -e "[.slots[].seg] == [35, 36] and .first == 35 and .last == 36 and
		.results == [{first: 35, last: 36, stored: true, iter: 2, run: 0, op: \"sum\"}]" r.json &&
	agg-stat --node a --slots --range 40 >r.txt &&
	grep "^# 1 slots shown" r.txt &&
	agg-stat --node a --slots --range 39-1000 -j | jq -e ".last == 40" &&
	test_expect_code 2 agg-stat --node a --slots --range 41-50 >out 2>err &&
	grep "^agg-stat: --range 41-50: job 7 node a has wire segments 0-40$" err &&
	test_must_fail test -s out
'

# Two watchers, text and JSON, and an iteration in each of their first
# two intervals; the counters read before they start and after they end
# bracket their windows, so the rates times the measured intervals must
# add up to the counters' differences.  The watchers are stopped
# (SIGSTOP) while an iteration runs: they read only between iterations,
# never with packets in flight, however long one takes on a busy machine
# (the third interval has none).  Each is stopped again as soon as it
# has printed, so the test has 2 s (--watch 2) to see each one's output,
# not to see both.  Their intervals then last 2 s or the iteration, and
# all of them no longer than the test saw them run.
test_expect_success '--watch 2 --count 3: rates x intervals = counter deltas, text and JSON' '
	W=2 &&
	agg-stat --all -j >before.json &&
	t0=$(date +%s.%N) &&
	{ agg-stat -v --all --watch $W --count 3 -j >watch.json 2>watch.err & } &&
	wj=$! &&
	{ agg-stat -v --all --watch $W --count 3 >watch.txt 2>watch.terr & } &&
	wt=$! &&
	# (once they are waited for, their pids are free for others to take)
	test_when_finished "test -z \"\$wj\" || { kill -CONT \$wj \$wt; kill \$wj \$wt; } 2>/dev/null || :" &&
	# both have read their first counters (-v says so on stderr)
	until grep -q "watching 5 nodes every $W s" watch.err &&
	      grep -q "watching 5 nodes every $W s" watch.terr; do
		kill -0 $wj && kill -0 $wt || return 1
		sleep 0.01
	done &&
	kill -STOP $wj $wt &&
	for k in 1 2; do
		iterate $((9 + k)) && kill -CONT $wj $wt || return 1
		# each stopped again as soon as it has printed interval k (5
		# nodes), before its next read, but for the last
		sj= st= n=0
		until test -n "$sj" && test -n "$st"; do
			if test -z "$sj" && test $(wc -l <watch.json) -ge $((5 * k)); then
				sj=1 && test $k = 2 || kill -STOP $wj
			fi
			if test -z "$st" && test $(grep -c "^7/" watch.txt) -ge $((5 * k)); then
				st=1 && test $k = 2 || kill -STOP $wt
			fi
			n=$((n + 1)) && test $n -lt 1200 && kill -0 $wj && kill -0 $wt || return 1
			sleep 0.02
		done
	done &&
	wait $wj && wait $wt && wj= wt= &&
	life=$(echo "$(date +%s.%N) - $t0" | bc) &&
	agg-stat --all -j >after.json &&
	cat watch.txt &&
	test $(wc -l <watch.json) = 15 &&
	jq -e -s "all(.[]; keys == [\"done_per_s\", \"drops\", \"drops_per_s\", \"gbit_per_s\",
		\"interval\", \"job\", \"node\", \"retx_per_s\", \"rx_per_s\", \"seconds\",
		\"stored_per_s\"] and .seconds > 0)" watch.json &&
	jq -e -s "[.[].interval] == [1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3]" watch.json &&
	jq -e -s "map(select(.node == \"ps0\" and .interval < 3)) | all(.rx_per_s > 0)" watch.json &&
	jq -e -s --argjson life "$life" "group_by(.node) |
		all(([.[].seconds] | add) > 3 * $W - 0.05 and ([.[].seconds] | add) < \$life)" watch.json &&
	head -1 watch.txt | grep "^# node *secs *rx/s *Gbit/s *done/s *stored/s *retx/s *drops/s reasons$" &&
	test $(grep -c "^7/" watch.txt) = 15 &&
	delta="([\$a[0][] | {key: .node, value: .}] | from_entries) as \$A |
		.[] | . as \$b | \$A[.node] as \$x |
		\"\\(.node) \\(.rx - \$x.rx) \\(.done - \$x.done) \\(.stored - \$x.stored) \\(.retx - \$x.retx) \\(
		[to_entries[] | select(.key | test(\"^(drop_.*|error|tx_fail)$\")) | .value - \$x[.key]] | add)\"" &&
	jq -r --slurpfile a before.json "$delta" after.json | sort >deltas &&
	cat deltas &&
	jq -r -s "group_by(.node)[] | \"\\(.[0].node) \\([.[] | .rx_per_s * .seconds] | add) \\(
		[.[] | .done_per_s * .seconds] | add) \\([.[] | .stored_per_s * .seconds] | add) \\(
		[.[] | .retx_per_s * .seconds] | add) \\([.[] | .drops_per_s * .seconds] | add) \\(
		[.[] | .gbit_per_s * .seconds * 1e9 / (128 * 32)] | add)\"" watch.json | sort >sums.json &&
	join deltas sums.json | awk "{
		for (i = 2; i <= 6; i++) if ((\$i - \$(i + 5)) ^ 2 > (0.01 + 1e-6 * \$i) ^ 2) bad = 1
		if ((\$2 - \$12) ^ 2 > (0.01 + 1e-6 * \$2) ^ 2) bad = 1
		if (bad) { print \"json rates disagree: \" \$0; exit 1 } }" &&
	awk "/^7\\// { split(\$1, n, \"/\"); s = \$2
		for (i = 3; i <= 8; i++) { sum[n[2], i] += \$i * s; tol[n[2], i] += 0.06 * s + 0.0006 * \$i }
		secs[n[2]] += s; nodes[n[2]] = 1 }
		END { for (x in nodes) print x, sum[x, 3], sum[x, 5], sum[x, 6], sum[x, 7], sum[x, 8],
			tol[x, 3], tol[x, 5], tol[x, 6], tol[x, 7], tol[x, 8], sum[x, 4] * 1e9 / 4096, secs[x] }" \
		watch.txt | sort >sums.txt &&
	join deltas sums.txt | awk "{
		for (i = 2; i <= 6; i++) { d = \$i - \$(i + 5); if (d < 0) d = -d; if (d > \$(i + 10)) bad = 1 }
		d = \$2 - \$17; if (d < 0) d = -d; if (d > 0.0006 * \$18 * 1e9 / 4096 + 0.001 * \$2) bad = 1
		if (bad) { print \"text rates disagree: \" \$0; exit 1 } }"
'

# SwitchML's show_bitmap use: an iteration that hangs, and who it waits for.
test_expect_success '--slots names the child a hung segment waits for' '
	hp= &&
	for w in a b c1; do
		vcluster_run $w agg-send --iter 50 --timeout 1 in.1.$w 2>hang.$w &
		hp="$hp $!"
	done &&
	for p in $hp; do wait $p; done;
	grep "iteration 50: 1 of 1 exponent segments not aggregated" hang.c1 &&
	agg-stat --node a --slots --range 0 >hang.a &&
	cat hang.a &&
	awk "\$1 ~ /^[0-9]+\$/ && \$2 == 50" hang.a >hang.rows &&
	test $(wc -l <hang.rows) = 1 &&
	awk "{ if (\$3 != 0 || \$6 != \"collecting\" || \$7 != \"0x5/0x7\" || \$8 != \"c1,a\" ||
		   \$9 != \"c2\") { print; exit 1 } }" hang.rows &&
	agg-stat --node ps0 --slots --range 0 -j >hang.ps0.json &&
	jq -e ".slots == [{slot: ((50 * 41) % 8), iter: 50, run: 0, seg: 0, tree: 0, op: \"max\",
		state: \"collecting\", bitmap: 2, expect: 3, in: [\"b\"], missing: [\"a\"]}]" hang.ps0.json
'

test_expect_success '--watch goes on over an unload and a load again of the node' '
	# no --count: it stops on SIGINT once it has seen the node come back
	# (a count would bound how long the unload and load may take)
	{ agg-stat -v --node c1 --watch 0.2 -j >reload.json 2>reload.err & } &&
	wr=$! &&
	test_when_finished "kill $wr 2>/dev/null || :" &&
	k=0 &&
	until test -s reload.json; do
		k=$((k + 1)) && test $k -lt 600 && kill -0 $wr || return 1
		sleep 0.05
	done &&
	vcluster_run c1 agg-load --unload --node c1 &&
	k=0 &&
	until grep -q "c1: unloaded; watching for it to come back" reload.err; do
		k=$((k + 1)) && test $k -lt 600 && kill -0 $wr || return 1
		sleep 0.05
	done &&
	n=$(wc -l <reload.json) &&
	sleep 0.5 &&
	test $(wc -l <reload.json) = $n &&
	vcluster_run c1 agg-load plan.txt &&
	k=0 &&
	until grep -q "c1: loaded again; its rates start over" reload.err &&
	      test $(wc -l <reload.json) -gt $n; do
		k=$((k + 1)) && test $k -lt 600 && kill -0 $wr || return 1
		sleep 0.05
	done &&
	kill -INT $wr && wait $wr &&
	cat reload.err &&
	jq -e -s "all(.[]; .node == \"c1\" and .rx_per_s == 0)" reload.json
'

test_done
