#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='loss_off: once it returns, the loss injector drops nothing'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"

test_require ROOT,NETNS,BPF "tc programs on namespaces need root and bpffs"

cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10
EOF_HOSTS

# UDP datagrams ps0 took for a port nobody listens on: nothing is loaded,
# so every agg packet that reaches ps0 counts here.
noports() {
	vcluster_run ps0 cat /proc/net/snmp |
		awk '$1 == "Udp:" { if (h) { print $3; exit } h = 1 }'
}

test_expect_success 'setup: two hosts, a plan, nothing loaded' '
	agg-plan --size 4000 hosts.txt >plan.txt &&
	DP_PLAN=plan.txt &&
	vcluster_up hosts.txt aggloff$$- &&
	vcluster_run w0 ping -c 1 -W 10 -q 10.90.0.100 >/dev/null &&
	vcluster_run ps0 cat /proc/net/snmp | grep -q "^Udp: .* NoPorts "
'

test_expect_success 'all of w0'"'"'s agg packets dropped while it is on' '
	loss_on 1000000 in w0 &&
	test_when_finished loss_off &&
	n0=$(noports) &&
	vcluster_run w0 pktfuzz send --plan plan.txt --to ps0 --count 5 iter=1 >sent &&
	n=0 &&
	until test "$(loss_stat dropped_in)" = 5; do
		n=$((n + 1)) && test $n -lt 300 || return 1
		sleep 0.1
	done &&
	test "$(noports)" = $n0
'

# losstool detach used to leave each link to its last reference, which
# bpffs drops after an RCU grace period and a work item: packets sent
# right after loss_off were still dropped, for a while.
test_expect_success 'the packet right after each loss_off arrives (20 times)' '
	for k in $(seq 20); do
		loss_on 1000000 && n0=$(noports) && loss_off &&
		test_must_fail test -e $LOSS_PIN_DIR &&
		vcluster_run w0 pktfuzz send --plan plan.txt --to ps0 --count 1 iter=1 >sent || return 1
		n=0
		until test "$(noports)" -gt $n0; do
			n=$((n + 1)) && test $n -lt 300 ||
				{ echo "round $k: the packet after loss_off did not arrive"; return 1; }
			sleep 0.1
		done
		test "$(noports)" = $((n0 + 1)) || return 1
	done
'

test_done
