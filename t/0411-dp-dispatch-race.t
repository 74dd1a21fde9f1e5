#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-loads of different jobs on one interface at once: one dispatcher, a slot each'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w1  10.90.0.1   bw=10
EOF_HOSTS
JOBS="11 12 13 14 15 16 17 18"

test_expect_success 'eight plans, one per job and port' '
	test_atexit "rm -rf \"$AGG_PIN_DIR\"" &&
	vcluster_up hosts.txt "aggdr$$-" &&
	for j in $JOBS; do
		agg-plan --job $j --port $((9000 + j)) --size 4000 hosts.txt >plan.$j || return 1
	done
'

# The first agg-load on an interface makes its dispatcher, the last
# unload removes it: every round starts with none, so the loads race to
# make it and to take slots in it.
round() {
	pids= &&
	for j in $JOBS; do
		{ nsenter --net=/var/run/netns/$(vcluster_ns w1) -- \
			agg-load --arp-timeout 10000 plan.$j 2>err.$j & } &&
		pids="$pids $!" || return 1
	done &&
	for p in $pids; do wait $p || { cat err.*; return 1; }; done &&
	ports=$(ls "$AGG_PIN_DIR"/dev/*/ports) &&
	test $(echo "$ports" | wc -l) = 1 &&
	bpftool -j map dump pinned $ports >ports.json &&
	jq -e "length == 8 and ([.[].formatted.value.idx] | unique | length) == 8 and
	       ([.[].formatted.value.job] | sort) == [11, 12, 13, 14, 15, 16, 17, 18]" ports.json &&
	bpftool -j map dump pinned "$(dirname $ports)/progs" >progs.json &&
	jq -e "length == 8" progs.json &&
	test "$(vcluster_run w1 ip -d link show dev eth0 | grep -c "prog/xdp")" = 1 &&
	for j in $JOBS; do
		vcluster_run w1 agg-load --unload --job $j --node w1 || return 1
	done &&
	test ! -e "$AGG_PIN_DIR/dev" || test -z "$(ls "$AGG_PIN_DIR/dev")"
}

for r in 1 2 3 4 5; do
	test_expect_success "round $r: 8 concurrent loads, 8 distinct slots, then all unloaded" 'round'
done

test_done
