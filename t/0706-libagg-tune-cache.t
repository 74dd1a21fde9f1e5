#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='libagg tuning cache: the fingerprint tells plans of other topologies apart, reuse applies only a setting of this search space, a held lock fails the store in bounded time'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
command -v flock >/dev/null || skip_all "no flock(1)"

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

# model OUT RUN ARGS...: bench/model on every worker at once, as run RUN
# (bounded: a hang fails); OUT.W (iteration unit streams seconds done),
# err.OUT.W, rc.OUT.W
model() {
	m_o=$1 m_r=$2 && shift 2 && m_pids= &&
	for w in w1 w2 w3; do
		{ AGG_RUN=$m_r vcluster_run $w timeout 120 "$MODEL" "$@" >$m_o.$w 2>err.$m_o.$w
		  echo $? >rc.$m_o.$w; } &
		m_pids="$m_pids $!"
	done &&
	for p in $m_pids; do wait $p; done
}

# ok_all OUT: every worker's run ended well
ok_all() {
	for w in w1 w2 w3; do
		cat err.$1.$w && test "$(cat rc.$1.$w)" = 0 || return 1
	done
}

# load PLAN: PLAN replaces the loaded plan on every host
load() {
	DP_PLAN=$1 &&
	for h in $(vcluster_hosts); do
		vcluster_run $h agg-load --arp-timeout 10000 "$1" || return 1
	done
}

# The same hosts as scheme ps and as scheme aleph: here both make the same
# single tree, so only the scheme tells them apart; the window (slots) is
# another plan again.
test_expect_success 'setup: the hosts planned as ps (loaded), aleph and ps with another window' '
	agg-plan --token 1 --scheme ps --size 4194304 --segment 256 hosts.txt >plan.ps &&
	agg-plan --token 1 --scheme aleph --size 4194304 --segment 256 hosts.txt >plan.aleph &&
	agg-plan --token 1 --scheme ps --slots 64 --size 4194304 --segment 256 hosts.txt >plan.win &&
	dp_setup hosts.txt plan.ps
'

test_expect_success 'ps: tuned and stored, with the scheme, depth, fan-in and window in the fingerprint' '
	model ps 1 -t on -b 0.02 mlp $ITERS && ok_all ps &&
	best=$(awk "\$5 == 1 { print \$2; exit }" ps.w1) && test -n "$best" &&
	echo $best >best.ps &&
	cat cache/tune.cache &&
	test $(grep -c "^fp " cache/tune.cache) = 1 &&
	grep "^fp " cache/tune.cache | grep " scheme=2 " | grep " depth=1 " | grep " fanin=3 " |
		grep -q " slots=256 "
'

test_expect_success 'ps again, reuse: the cached unit from the first iteration, no tuning' '
	model psr 2 -t reuse -b 0.02 mlp 3 && ok_all psr &&
	for w in w1 w2 w3; do
		awk -v b=$(cat best.ps) "\$2 != b || \$5 != 1 { exit 1 }" psr.$w || return 1
	done
'

test_expect_success 'aleph, reuse: ps'"'"'s setting does not carry over; it tunes and stores its own' '
	load plan.aleph &&
	model aleph 3 -t reuse -b 0.02 mlp $ITERS && ok_all aleph &&
	cat aleph.w1 &&
	for w in w1 w2 w3; do
		test "$(head -1 aleph.$w | cut -d" " -f5)" = 0 || return 1
	done &&
	test $(grep -c "^fp " cache/tune.cache) = 2 &&
	grep "^fp " cache/tune.cache | grep -q " scheme=0 "
'

test_expect_success 'another window (slots 64), reuse: not the 256-slot plan'"'"'s setting' '
	load plan.win &&
	model win 4 -t reuse -b 0.02 mlp 2 && ok_all win &&
	cat win.w1 &&
	test "$(head -1 win.w1 | cut -d" " -f5)" = 0
'

# A setting outside this handle's units: the cache's own lines, their
# unit set to 8 MiB (the plan takes 4 MiB; the hash covers the features
# only, so the lines still read).
test_expect_success 'reuse of a cached unit outside the units this handle may use: it tunes within them' '
	load plan.ps &&
	cp cache/tune.cache cache.good &&
	test_when_finished "cp cache.good cache/tune.cache" &&
	sed "s/ unit=[0-9]* / unit=8388608 /" cache.good >cache/tune.cache &&
	grep -q "unit=8388608" cache/tune.cache &&
	model out 5 -t reuse -b 0.02 mlp 3 && ok_all out &&
	cat out.w1 &&
	for w in w1 w2 w3; do
		test "$(head -1 out.$w | cut -d" " -f5)" = 0 &&
		awk "\$2 > 4194304 || \$2 < 262144 { exit 1 }" out.$w || return 1
	done
'

test_expect_success 'a lock another process holds: the store fails with a message after a bounded wait, the cache kept' '
	cp cache/tune.cache cache.before &&
	exec 9>>cache/tune.lock &&
	test_when_finished "exec 9>&-" &&
	flock -x -n 9 &&
	model locked 6 -t on -b 0.02 mlp 60 9>&- &&
	for w in w1 w2 w3; do
		cat err.locked.$w &&
		test "$(cat rc.locked.$w)" = 1 &&
		grep -q "cannot lock $PWD/cache/tune.lock: another process has held it for 10 s" \
			err.locked.$w || return 1
	done &&
	test_cmp cache.before cache/tune.cache
'

test_expect_success 'unload' '
	dp_unload
'

test_done
