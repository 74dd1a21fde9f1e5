#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='libagg tuning (agg_tuning_*): the workers agree on every setting, converge, keep the best in the cache and start from it again'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

MODEL=$AGG_BUILD/bench/model
test -x "$MODEL" || skip_all "no $MODEL (make all builds it)"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
w2  10.90.0.2   bw=10
w3  10.90.0.3   bw=10
EOF_HOSTS
unset AGG_RUN TORCHELASTIC_RESTART_COUNT
AGG_CACHE_DIR=$PWD/cache
export AGG_CACHE_DIR
ITERS=24

# The MLP's gradients (2678824 bytes) through a plan of 4 MiB: units of
# 256 KiB .. 4 MiB to tune.
test_expect_success 'setup: 3 workers, a plan of 4 MiB loaded' '
	agg-plan --size 4194304 --segment 256 hosts.txt >plan.txt &&
	dp_setup hosts.txt plan.txt
'

# model OUT RUN ARGS...: bench/model on every worker at once, as run RUN;
# OUT.W (its lines: iteration unit streams seconds done), err.OUT.W, rc.OUT.W
model() {
	m_o=$1 m_r=$2 && shift 2 && m_pids= &&
	for w in w1 w2 w3; do
		{ AGG_RUN=$m_r vcluster_run $w "$MODEL" "$@" >$m_o.$w 2>err.$m_o.$w
		  echo $? >rc.$m_o.$w; } &
		m_pids="$m_pids $!"
	done &&
	for p in $m_pids; do wait $p; done
}

# units OUT: the unit of every iteration, one a line
units() { awk "{ print \$2 }" "$1"; }

test_expect_success "tuning on, empty cache: every worker the same settings; converged within $ITERS iterations, then fixed" '
	model on 1 -t on -b 0.02 -l tune.log -j mlp $ITERS &&
	for w in w1 w2 w3; do
		cat err.on.$w && test "$(cat rc.on.$w)" = 0 &&
		test $(wc -l <on.$w) = $ITERS || return 1
	done &&
	units on.w1 >u1 && units on.w2 >u2 && units on.w3 >u3 &&
	test_cmp u1 u2 && test_cmp u1 u3 &&
	cat on.w1 &&
	conv=$(awk "\$5 == 1 { print \$1; exit }" on.w1) &&
	test -n "$conv" &&
	best=$(awk -v c=$conv "\$1 == c { print \$2 }" on.w1) &&
	awk -v c=$conv -v b=$best "\$1 >= c && (\$2 != b || \$5 != 1) { exit 1 }" on.w1 &&
	# more than one unit was tried, each a power of two in 256 KiB .. 4 MiB
	test $(sort -u u1 | wc -l) -gt 1 &&
	awk "{ u = \$1; while (u > 1 && u % 2 == 0) u /= 2; if (u != 1 || \$1 < 262144 || \$1 > 4194304) exit 1 }" u1 &&
	echo $best >best
'

test_expect_success 'the tuning log: one JSON object a trial, the setting each iteration ran' '
	test $(wc -l <tune.log) = $(awk "\$5 == 0" on.w1 | wc -l) &&
	jq -r "[.trial, .technique, .setting.unit, .seconds] | @tsv" tune.log >trials &&
	cat trials &&
	awk "\$5 == 0 { print \$2 }" on.w1 >ran &&
	cut -f3 trials >logged && test_cmp ran logged &&
	head -1 trials | cut -f2 | grep -qx start &&
	jq -s -e "map(select(.new_best)) | length > 0 and all(.found_by != null)" tune.log
'

test_expect_success 'the cache keeps the best unit for this plan' '
	cat cache/tune.cache &&
	test $(grep -c "^fp " cache/tune.cache) = 1 &&
	grep -q "unit=$(cat best)" cache/tune.cache &&
	grep -q "workers=3" cache/tune.cache
'

test_expect_success 'tuning reuse: every worker starts at the cached unit, tuned from the first iteration' '
	model reuse 2 -t reuse -b 0.02 mlp 3 &&
	for w in w1 w2 w3; do
		cat err.reuse.$w && test "$(cat rc.reuse.$w)" = 0 &&
		awk -v b=$(cat best) "\$2 != b || \$5 != 1 { exit 1 }" reuse.$w || return 1
	done
'

test_expect_success 'tuning off: the unit given (25 MiB, capped at the plan: 4 MiB)' '
	model off 3 -t off mlp 2 &&
	for w in w1 w2 w3; do
		test "$(cat rc.off.$w)" = 0 &&
		awk "\$2 != 4194304 || \$5 != 1 { exit 1 }" off.$w || return 1
	done &&
	model offu 4 -t off -u 524288 mlp 2 &&
	awk "\$2 != 524288 { exit 1 }" offu.w2
'

test_expect_success 'a cache that does not parse: every worker fails, worker 0 names the place, the cache is kept' '
	cp cache/tune.cache good &&
	echo "fp 1 workers=x" >>cache/tune.cache &&
	cp cache/tune.cache bad &&
	model broken 5 -t on mlp 2 &&
	for w in w1 w2 w3; do
		test "$(cat rc.broken.$w)" = 1 && test ! -s broken.$w || return 1
	done &&
	cat err.broken.w1 err.broken.w2 &&
	grep -q "tune.cache:[0-9]*:[0-9]*: " err.broken.w1 &&
	grep -q "worker 0 cannot read its tuning cache" err.broken.w2 &&
	test_cmp bad cache/tune.cache
'

test_expect_success 'tuning the streams too (-s 4): the same (unit, streams) on every worker, streams used as set' '
	AGG_CACHE_DIR=$PWD/cache2 model st 6 -t on -s 4 -b 0.02 mlp $ITERS &&
	for w in w1 w2 w3; do
		cat err.st.$w && test "$(cat rc.st.$w)" = 0 || return 1
	done &&
	awk "{ print \$2, \$3 }" st.w1 >s1 && awk "{ print \$2, \$3 }" st.w3 >s3 &&
	test_cmp s1 s3 &&
	cat s1 &&
	awk "\$3 != 1 && \$3 != 2 && \$3 != 4 { exit 1 }" st.w1 &&
	test $(awk "{ print \$3 }" st.w1 | sort -u | wc -l) -gt 1 &&
	grep -q "streams=" cache2/tune.cache &&
	# the node sent over the streams the tuner chose: stream 1 sent
	agg-stat -j --node w2 >w2.json &&
	jq -e "[.streams[] | select(.stream >= 1) | .sent] | add > 0" w2.json
'

test_expect_success 'unload' '
	dp_unload
'

test_done
