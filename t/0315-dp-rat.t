#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='worker-rooted trees (RAT without a PS): bit-exact, with loss'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"
command -v nc >/dev/null || skip_all "no nc (make deps installs netcat-openbsd)"

cat >hosts.txt <<'EOF_HOSTS'
w0 10.90.0.1 bw=10
w1 10.90.0.2 bw=10
w2 10.90.0.3 bw=10
w3 10.90.0.4 bw=10
EOF_HOSTS

cat >plan.txt <<'EOF_PLAN'
plan v1 job=1 port=9999 scheme=rat seed=1 segment=128 size=4000000 slots=64 token=0x0000000000001234 bw-demand=10 cpu-demand=0.1
node w0 10.90.0.1 bw=10
node w1 10.90.0.2 bw=10
node w2 10.90.0.3 bw=10
node w3 10.90.0.4 bw=10
tree 0 root=w0 weight=1
edge 0 w1 w0
edge 0 w2 w0
edge 0 w3 w0
tree 1 root=w1 weight=1
edge 1 w0 w1
edge 1 w2 w1
edge 1 w3 w1
tree 2 root=w2 weight=1
edge 2 w0 w2
edge 2 w1 w2
edge 2 w3 w2
tree 3 root=w3 weight=1
edge 3 w0 w3
edge 3 w1 w3
edge 3 w2 w3
EOF_PLAN

test_expect_success 'a plan whose every tree is rooted at a worker loads' '
	dp_setup hosts.txt plan.txt
'

test_expect_success 'three iterations: every worker gets the same bits, within 1e-6 of the float64 sum' '
	for i in 1 2 3; do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done
'

test_done
