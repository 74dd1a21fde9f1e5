#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-plan at 20,000 workers: a sound plan, the same bytes as before the speed-ups (issue 33)'
. "$(dirname "$0")/lib/test-lib.sh"

test -x "$AGG_BUILD/agg-plan" || skip_all "agg-plan not built in $AGG_BUILD"

# 20,000 workers in 200 racks, bw= as in ALEPH Sec. 6.4.  A fixed token:
# the plan's bytes must not depend on a secret.
awk -v n=20000 -v racks=200 -v sd=0.2 -v seed=1 \
	-f "$AGG_SRC/bench/gen-hosts.awk" >hosts.txt
token=0x0123456789abcdef

# sha256 of the plans agg-plan made for hosts.txt once the local-improvement
# pass followed M-WCHA (issue 33, second half: 2918 clusters became 2705):
# a change of speed must not change one decision.
test_expect_success 'the plan is byte for byte the one agg-plan made before' '
	agg-plan --token $token hosts.txt >plan.txt &&
	echo "b1fc50a13ac99f8e6ca375f96eb29e10600d851b0fae4496cd0a067308e19d89  -" >want &&
	sha256sum <plan.txt >out && test_cmp want out &&
	agg-plan --token $token --seed 7 hosts.txt | sha256sum >out &&
	echo "851bbf7c012cb3020581c56a5880382ed274eebac57bcf962cf86001a096df6a  -" >want &&
	test_cmp want out
'

# agg-check plan finds nothing wrong with the trees (every worker one
# parent, reaches the root, within Eq. 1 capacity); it exits 1 only for
# the data plane limits, which a plan this size exceeds.
test_expect_success 'agg-check plan: no problem but the data plane limits' '
	test_expect_code 1 agg-check plan plan.txt >out &&
	cat >want <<-EOF &&
	plan.txt: the data plane takes at most 4096 nodes, 64 trees
	plan.txt: tree 0: ps0 has 2705 children, the data plane takes at most 63 per node and tree
	EOF
	test_cmp want out &&
	test $(grep -c "^edge 0 " plan.txt) = 20000
'

# The hashed duplicate check reports what a scan did: the first earlier
# host with the name or the address, the name when both are one host.
test_expect_success 'duplicates: the first earlier host is named' '
	head -4 hosts.txt >dup.txt &&
	echo "w2 10.90.0.1 bw=5" >>dup.txt &&
	test_expect_code 2 agg-plan dup.txt 2>err &&
	echo "agg-plan: dup.txt:5:4: duplicate address 10.90.0.1 (first on line 2, host '\''w0'\'')" >want &&
	test_cmp want err &&
	head -4 hosts.txt >dup.txt &&
	echo "w0 10.90.0.3 bw=5" >>dup.txt &&
	test_expect_code 2 agg-plan dup.txt 2>err &&
	echo "agg-plan: dup.txt:5:1: duplicate host name '\''w0'\'' (first on line 2)" >want &&
	test_cmp want err &&
	sed "20001s/^node w19998 [^ ]*/node w19998 10.90.0.2/" plan.txt >dupplan.txt &&
	test_expect_code 2 agg-check plan dupplan.txt 2>err &&
	echo "agg-check: dupplan.txt:20001:13: duplicate address 10.90.0.2 (first on line 4, host '\''w1'\'')" >want &&
	test_cmp want err
'

test_done
