#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='RAT on 2 pods x 2 racks without a PS: worker roots with rack and pod aggregators, bit-exact with loss'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"
command -v nc >/dev/null || skip_all "no nc (make deps installs netcat-openbsd)"

cat >hosts.txt <<'EOF_HOSTS'
a1 10.90.1.1 bw=10 pod=p1 rack=r1
a2 10.90.1.2 bw=10 pod=p1 rack=r1
b1 10.90.1.3 bw=10 pod=p1 rack=r2
b2 10.90.1.4 bw=10 pod=p1 rack=r2
c1 10.90.2.1 bw=10 pod=p2 rack=r1
c2 10.90.2.2 bw=10 pod=p2 rack=r1
d1 10.90.2.3 bw=10 pod=p2 rack=r2
d2 10.90.2.4 bw=10 pod=p2 rack=r2
EOF_HOSTS
ITERS=${AGG_LOSS_ITERS:-3}
K=2

test_expect_success 'agg-plan -s rat: 8 trees, 8 roots, aggregates from other racks and pods; it loads' '
	agg-plan -s rat --size 2000000 hosts.txt >plan.txt &&
	test "$(grep -c "^tree " plan.txt)" = 8 &&
	test "$(grep "^tree " plan.txt | cut -d" " -f3 | sort -u | wc -l)" = 8 &&
	# rack and pod aggregators: some edge has a parent that is not its root
	awk "\$1 == \"tree\" { r[\$2] = substr(\$3, 6) } \$1 == \"edge\" && \$4 != r[\$2] { n++ } END { exit !(n > 0) }" plan.txt &&
	dp_setup hosts.txt plan.txt
'

test_expect_success "$K iterations: every worker gets the same bits, within 1e-6 of the float64 sum" '
	for i in $(seq $K); do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done &&
	test "$(for h in $(vcluster_hosts); do dp_stat $h fwd_up; done | awk "{ s += \$1 } END { print s }")" -gt 0
'

test_expect_success "$ITERS iterations bit-exact with 10% loss on every port, both directions" '
	loss_on 100000 &&
	i=$K &&
	while [ $i -lt $((K + ITERS)) ]; do
		i=$((i + 1)) && k=$((i % K + 1)) &&
		for w in $(dp_workers); do cp in.$k.$w in.$i.$w || return 1; done &&
		dp_allreduce $i &&
		for w in $(dp_workers); do cmp out.$k.$w out.$i.$w || return 1; done || return 1
	done &&
	test "$(loss_stat dropped_in)" -gt 0 && test "$(loss_stat dropped_out)" -gt 0 &&
	loss_off &&
	for h in $(vcluster_hosts); do
		for c in drop_busy drop_malformed drop_job drop_token drop_member drop_route drop_seg error; do
			test "$(dp_stat $h $c)" = 0 || { echo "$h: $c $(dp_stat $h $c)"; return 1; }
		done || return 1
	done
'

test_done
