#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-check plan: good plans pass, every kind of broken plan is named'
. "$(dirname "$0")/lib/test-lib.sh"

test -x "$AGG_BUILD/agg-check" || skip_all "agg-check not built in $AGG_BUILD"

# ALEPH Sec. 6.3's testbed: a aggregates c3 and c4 (capacity 2), b1 c5,
# b2 c1; c2 sends to ps0.
cat >hosts.txt <<'EOF'
ps0 10.90.0.100 bw=40 role=ps
a   10.90.0.1   bw=30
b1  10.90.0.2   bw=20
b2  10.90.0.3   bw=20
c1  10.90.0.4   bw=10
c2  10.90.0.5   bw=10
c3  10.90.0.6   bw=10
c4  10.90.0.7   bw=10
c5  10.90.0.8   bw=10
EOF

# broken NAME SED-SCRIPT: good.txt edited into NAME.txt
broken() {
	sed "$2" good.txt >"$1.txt" && ! cmp -s good.txt "$1.txt"
}

test_expect_success 'plans agg-plan makes (aleph, rat, ps) are fine: exit 0' '
	agg-plan hosts.txt >good.txt &&
	grep -x "edge 0 c3 a" good.txt && grep -x "edge 0 c4 a" good.txt &&
	grep -x "edge 0 c5 b1" good.txt && grep -x "edge 0 c1 b2" good.txt &&
	agg-check plan good.txt >out &&
	echo "good.txt: ok nodes=9 workers=8 trees=1 segments=196839 slots=512" >want &&
	test_cmp want out &&
	agg-plan -s rat --trees 3 hosts.txt >rat.txt &&
	agg-check plan rat.txt >out &&
	grep -x "rat.txt: ok nodes=9 workers=8 trees=3 segments=196839 slots=1536" out &&
	agg-plan -s ps --size 1M hosts.txt >ps.txt &&
	agg-check plan ps.txt >out &&
	grep -x "ps.txt: ok nodes=9 workers=8 trees=1 segments=1970 slots=512" out
'

test_expect_success 'standard input, - and -j' '
	agg-check plan <good.txt >out &&
	grep -x "<stdin>: ok nodes=9 .*" out &&
	agg-check plan - <good.txt >out &&
	grep -x "<stdin>: ok nodes=9 .*" out &&
	agg-plan hosts.txt | agg-check plan -j >out.json &&
	jq -e ".ok and .problems == [] and .file == \"<stdin>\" and .nodes == 9" out.json
'

# b1 under its own child c5: both cut off, and c5 (bw=10) has no
# capacity to aggregate.
test_expect_success 'a cycle: every worker cut off from the root, exit 1' '
	broken cycle "s/^edge 0 b1 ps0\$/edge 0 b1 c5/" &&
	test_expect_code 1 agg-check plan cycle.txt >out &&
	cat >want <<-EOF &&
	cycle.txt: tree 0: worker b1 does not reach root ps0 (a cycle)
	cycle.txt: tree 0: worker c5 does not reach root ps0 (a cycle)
	cycle.txt: tree 0: c5 aggregates 1 worker, capacity 0 (bw=10, b=10)
	EOF
	test_cmp want out
'

test_expect_success 'a worker with two parents, exit 1' '
	broken twoparents "\$a edge 0 c1 ps0" &&
	test_expect_code 1 agg-check plan twoparents.txt >out &&
	echo "twoparents.txt: tree 0: worker c1 has 2 parents" >want &&
	test_cmp want out
'

test_expect_success 'a worker missing from a tree, exit 1' '
	broken missing "/^edge 0 c5 /d" &&
	test_expect_code 1 agg-check plan missing.txt >out &&
	echo "missing.txt: tree 0: worker c5 has no parent" >want &&
	test_cmp want out
'

test_expect_success 'an aggregator over its capacity (ALEPH Eq. 1), exit 1' '
	broken overcap "s/^edge 0 c5 b1\$/edge 0 c5 a/" &&
	test_expect_code 1 agg-check plan overcap.txt >out &&
	echo "overcap.txt: tree 0: a aggregates 3 workers, capacity 2 (bw=30, b=10)" >want &&
	test_cmp want out
'

test_expect_success 'a worker root with a parent, exit 1' '
	broken root "s/^tree 0 root=ps0 /tree 0 root=b2 /" &&
	test_expect_code 1 agg-check plan root.txt >out &&
	cat >want <<-EOF &&
	root.txt: tree 0: root b2 has a parent
	root.txt: tree 0: worker a does not reach root b2 (its chain ends at ps0)
	root.txt: tree 0: worker b1 does not reach root b2 (its chain ends at ps0)
	root.txt: tree 0: worker c2 does not reach root b2 (its chain ends at ps0)
	root.txt: tree 0: worker c3 does not reach root b2 (its chain ends at ps0)
	root.txt: tree 0: worker c4 does not reach root b2 (its chain ends at ps0)
	root.txt: tree 0: worker c5 does not reach root b2 (its chain ends at ps0)
	EOF
	test_cmp want out
'

test_expect_success 'what the data plane cannot run: segment 16370, port 65535, exit 1' '
	broken seg16370 "1s/ segment=128 / segment=16370 /" &&
	test_expect_code 1 agg-check plan seg16370.txt >out &&
	echo "seg16370.txt: segment=16370: the data plane takes an even number from 2 to 16368" >want &&
	test_cmp want out &&
	broken odd "1s/ segment=128 / segment=127 /" &&
	test_expect_code 1 agg-check plan odd.txt >out &&
	grep -x "odd.txt: segment=127: the data plane takes an even number from 2 to 16368" out &&
	broken port "1s/ port=9999 / port=65535 /" &&
	test_expect_code 1 agg-check plan port.txt >out &&
	echo "port.txt: port=65535: the fetch signal goes to port + 1 (take 1 to 65534)" >want &&
	test_cmp want out
'

test_expect_success 'at most 63 children per node and tree: 63 pass, 64 do not' '
	for n in 63 64; do
		{
			echo "ps0 10.90.0.100 bw=100 role=ps"
			i=1
			while [ $i -le $n ]; do echo "w$i 10.90.1.$i bw=10"; i=$((i + 1)); done
		} >wide$n.hosts &&
		agg-plan -s ps wide$n.hosts >wide$n.txt || return 1
	done &&
	agg-check plan wide63.txt &&
	test_expect_code 1 agg-check plan wide64.txt >out &&
	echo "wide64.txt: tree 0: ps0 has 64 children, the data plane takes at most 63 per node and tree" >want &&
	test_cmp want out
'

test_expect_success 'several problems: one line each, and -j lists them' '
	broken many "s/^edge 0 c5 b1\$/edge 0 c5 a/; /^edge 0 c1 /d; 1s/ segment=128 / segment=16370 /" &&
	test_expect_code 1 agg-check plan many.txt >out &&
	cat >want <<-EOF &&
	many.txt: tree 0: worker c1 has no parent
	many.txt: tree 0: a aggregates 3 workers, capacity 2 (bw=30, b=10)
	many.txt: segment=16370: the data plane takes an even number from 2 to 16368
	EOF
	test_cmp want out &&
	test_expect_code 1 agg-check plan -j many.txt >out.json &&
	jq -e ".ok == false and (.problems | length) == 3 and
		.problems[0] == \"tree 0: worker c1 has no parent\"" out.json
'

test_expect_success 'duplicate names and addresses do not read: file:line:col, exit 2' '
	broken dupname "s/^node b1 10.90.0.2 /node a 10.90.0.2 /" &&
	test_expect_code 2 agg-check plan dupname.txt >out 2>err &&
	echo "agg-check: dupname.txt:4:6: duplicate host name '"'"'a'"'"' (first on line 3)" >want &&
	test_cmp want err &&
	test_must_fail test -s out &&
	broken dupaddr "s/^node b1 10.90.0.2 /node b1 10.90.0.1 /" &&
	test_expect_code 2 agg-check plan dupaddr.txt 2>err &&
	echo "agg-check: dupaddr.txt:4:9: duplicate address 10.90.0.1 (first on line 3, host '"'"'a'"'"')" >want &&
	test_cmp want err
'

test_expect_success 'weights and other bad input: file:line:col, exit 2; -j says why' '
	broken weight "s/^tree 0 root=ps0 weight=1\$/tree 0 root=ps0 weight=0/" &&
	test_expect_code 2 agg-check plan weight.txt 2>err &&
	grep -x "agg-check: weight.txt:11:24: weight must be 1 to 1024: .weight=0." err &&
	broken badnum "1s/ segment=128 / segment=12x /" &&
	test_expect_code 2 agg-check plan -j badnum.txt >out.json 2>err &&
	grep -x "agg-check: badnum.txt:1:55: bad number in .segment=12x." err &&
	jq -e ".ok == false and (.error | test(\"^badnum.txt:1:55: \"))" out.json &&
	broken unknown "\$a edge 0 c9 a" &&
	test_expect_code 2 agg-check plan unknown.txt 2>err &&
	grep -x "agg-check: unknown.txt:20:8: unknown node .c9." err &&
	: >empty.txt &&
	test_expect_code 2 agg-check plan empty.txt 2>err &&
	grep -x "agg-check: empty.txt:1:1: empty plan: no .plan v1. header" err
'

test_expect_success 'usage: missing file, a directory, two files, live options: exit 2' '
	test_expect_code 2 agg-check plan nosuch.txt 2>err &&
	grep -x "agg-check: cannot open nosuch.txt: No such file or directory" err &&
	test_expect_code 2 agg-check plan . 2>err &&
	grep "^agg-check: cannot read \\.: Is a directory" err &&
	test_expect_code 2 agg-check plan good.txt rat.txt 2>err &&
	grep "plan takes one FILE at most" err &&
	test_expect_code 2 agg-check plan --iter 3 good.txt 2>err &&
	test_expect_code 2 agg-check plan --request good.txt 2>err &&
	test_expect_code 2 agg-check plan --pcap x.pcap 2>err
'

test_done
