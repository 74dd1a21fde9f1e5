#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='worker-rooted trees (RAT without a PS, 4 workers): exact counters, bit-exact with loss, libagg'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/loss.sh"
. "$TEST_DIRECTORY/lib/torch.sh"

test_require ROOT,NETNS,BPF "XDP and tcx on namespaces need root and bpffs"
command -v nc >/dev/null || skip_all "no nc (make deps installs netcat-openbsd)"

cat >hosts.txt <<'EOF_HOSTS'
w0 10.90.0.1 bw=10
w1 10.90.0.2 bw=10
w2 10.90.0.3 bw=10
w3 10.90.0.4 bw=10
EOF_HOSTS


test_expect_success 'agg-plan -s rat without a PS: one tree rooted at each worker; it loads' '
	agg-plan -s rat --size 4000000 hosts.txt >plan.txt &&
	grep "^tree " plan.txt | cut -d" " -f3 >roots &&
	printf "root=w0\nroot=w1\nroot=w2\nroot=w3\n" >want &&
	test_cmp want roots &&
	dp_setup hosts.txt plan.txt
'

# Iterations under loss (AGG_LOSS_ITERS, default 4; make soak: 20): about
# a second each at 10%.
ITERS=${AGG_LOSS_ITERS:-4}
K=3

# Counter NAME of NODE summed over what every node's agg-stat says now.
count_all() {
	for h in $(vcluster_hosts); do dp_stat "$h" "$1"; done | awk '{ s += $1 } END { print s + 0 }'
}

snapshot() {
	for h in $(vcluster_hosts); do agg-stat --node "$h" >"stat.$1.$h" || return 1; done
}

# NAME of NODE between snapshots A and B.
delta() {
	awk -v k="$1" '$1 == k { v[FILENAME] = $2 } END { print v[ARGV[2]] - v[ARGV[1]] }' \
		"stat.$3.$2" "stat.$4.$2"
}

test_expect_success "$K iterations: every worker gets the same bits, within 1e-6 of the float64 sum" '
	for i in $(seq $K); do
		dp_inputs $i && dp_allreduce $i && dp_check $i || return 1
	done
'

segs=$(( (1000000 + 127) / 128 + 62 ))

test_expect_success 'every segment completed once, at its tree root; every worker stored it and was signalled' '
	test "$(count_all done)" = $((K * segs)) &&
	test "$(count_all fwd_up)" = 0 &&
	for w in $(dp_workers); do
		test "$(dp_stat $w stored)" = $((K * segs)) &&
		test $(( $(dp_stat $w signals) + $(dp_stat $w sent_signals) )) = $K &&
		# and each reached agg-recv: the stack drops a signal from our
		# own address or to another MAC without a word
		test "$(dp_udp_in $w)" = $K &&
		agg-stat --node $w | awk "\$1 ~ /^drop_/ && \$1 != \"drop_dup\" && \$2 != 0 { print; exit 1 }" ||
		return 1
	done &&
	# each completed segment went to the 3 other workers once: by the TC
	# program (a packet of a child completed it) or by agg-send on the
	# root (its own contribution did); which depends on the arrival order
	test $(( $(count_all fanout) + $(count_all sent_fanout) )) = $((3 * K * segs))
'

test_expect_success 'agg-stat and agg-check on a worker root' '
	agg-stat --node w1 | head -1 | grep " w1 10.90.0.2 root,leaf, " &&
	for w in $(dp_workers); do
		agg-check --node $w --iter $K >check.$w || { cat check.$w; return 1; }
	done
'

test_expect_success "$ITERS iterations bit-exact with 10% loss on every port, both directions" '
	snapshot a &&
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
	snapshot b &&
	done_n=0 && retx=0 &&
	for h in $(vcluster_hosts); do
		done_n=$((done_n + $(delta done $h a b))) &&
		retx=$((retx + $(delta retx $h a b))) &&
		test "$(delta stored $h a b)" = $((ITERS * segs)) &&
		for c in drop_busy drop_malformed drop_job drop_token drop_member drop_route drop_seg error; do
			test "$(delta $c $h a b)" = 0 || { echo "$h: $c $(delta $c $h a b)"; return 1; }
		done || return 1
	done &&
	test $done_n = $((ITERS * segs)) &&
	test $retx -gt 0
'

# libagg in-process (through the Python binding), a newer run: the sums
# of 3 calls of different lengths, against float64, the same bits on
# every worker (a digest each).
cat >lib.py <<'EOF_PY'
import hashlib, sys
import numpy as np
import agg
a = agg.Agg(timeout=30)
h = hashlib.sha256()
for case, n in enumerate((1000000, 777, 128 * 3000 + 5)):
    xs = [np.random.default_rng([case, k]).standard_normal(n).astype(np.float32)
          for k in range(a.world_size)]
    x = xs[a.rank].copy()
    a.allreduce(x)
    ref = np.sum(np.asarray(xs, np.float64), axis=0)
    # the data plane's bound: 1e-6 of the largest input magnitude in the
    # element's segment (128 values)
    big = np.repeat(np.maximum.reduceat(np.max(np.abs(xs), axis=0), np.arange(0, n, 128)), 128)[:n]
    bad = np.abs(x - ref) > 1e-6 * big
    if bad.any():
        sys.exit("case %d: %d values off by more than 1e-6 of their segment" % (case, bad.sum()))
    h.update(x.tobytes())
print(h.hexdigest())
EOF_PY

# An iteration in which w0 contributes last by construction: the others'
# agg-sends run until every root holds a slot only w0 is missing from
# (agg-stat --slots), then w0's starts.  Its contribution completes a slot
# at w0, whose agg-send sends the result down itself (sent_fanout), and its
# packets complete slots at w1..w3, whose TC programs do (fanout).
test_expect_success 'w0 last: its agg-send sends results down itself, the other roots'"'"' TC programs theirs' '
	I=$((K + ITERS + 1)) &&
	for w in $(dp_workers); do cp in.1.$w in.$I.$w || return 1; done &&
	snapshot c &&
	pids= &&
	for w in $(dp_workers); do
		vcluster_run $w agg-recv --iter $I --timeout 30 out.$I.$w 2>recv.$I.$w &
		pids="$pids $!"
	done &&
	for w in w1 w2 w3; do
		vcluster_run $w agg-send --iter $I --timeout 30 in.$I.$w 2>send.$I.$w &
		pids="$pids $!"
	done &&
	for w in $(dp_workers); do
		n=0
		until agg-stat --node $w --slots -j >slots.$w.json &&
		      jq -e "[.slots[] | select(.iter == $I and .missing == [\"w0\"])] | length > 0" \
			slots.$w.json >/dev/null; do
			n=$((n + 1)) && test $n -lt 300 || { cat slots.$w.json; return 1; }
			sleep 0.1
		done
	done &&
	vcluster_run w0 agg-send --iter $I --timeout 30 in.$I.w0 2>send.$I.w0 &&
	for p in $pids; do wait $p || return 1; done &&
	for w in $(dp_workers); do cmp out.1.$w out.$I.$w || return 1; done &&
	snapshot d &&
	test "$(delta sent_fanout w0 c d)" -gt 0 &&
	for w in w1 w2 w3; do
		test "$(delta fanout $w c d)" -gt 0 || return 1
	done
'

test_expect_success TORCH 'libagg in-process on worker roots: float64 sums, the same bits everywhere' '
	AGG_RUN=1 py_all lib $(dp_workers) -- lib.py &&
	test "$(py_rcs lib $(dp_workers))" = "0 0 0 0 " &&
	test "$(cat $(for w in $(dp_workers); do echo lib.$w; done) | sort -u | wc -l)" = 1
'

test_done
