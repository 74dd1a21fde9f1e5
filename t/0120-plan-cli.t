#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-plan as a user runs it: input, errors, output forms'
. "$(dirname "$0")/lib/test-lib.sh"

cat >fig1.txt <<'EOF_H'
# ALEPH Fig. 1
ps0 10.90.0.100 bw=20 role=ps
w0  10.90.0.1 bw=10
w1  10.90.0.2 bw=10
w2  10.90.0.3 bw=10
w3  10.90.0.4 bw=30
EOF_H
cat >regions.txt <<'EOF_H'
ps0 10.90.0.100 bw=40 role=ps
w1 10.90.1.1 bw=25 rack=r1 pod=p1
w2 10.90.1.2 bw=10 rack=r1 pod=p1
w3 10.90.1.3 bw=10 rack=r2 pod=p1
w4 10.90.1.4 bw=12 rack=r2 pod=p1
w5 10.90.2.1 bw=25 rack=r1 pod=p2
w6 10.90.2.2 bw=10 rack=r1 pod=p2
EOF_H

test_expect_success 'reads a file, stdin and -' '
	agg-plan fig1.txt >a &&
	agg-plan <fig1.txt >b &&
	agg-plan - <fig1.txt >c &&
	test_cmp a b && test_cmp a c &&
	head -1 a | grep "^plan v1 " &&
	test "$(grep -c "^node " a)" = 5 &&
	test "$(grep -c "^edge 0 " a)" = 4
'

test_expect_success 'the same input and seed give the same bytes' '
	for s in 1 2 3; do
		agg-plan --seed $s regions.txt >x1 &&
		agg-plan --seed $s regions.txt >x2 &&
		test_cmp x1 x2 || return 1
	done
'

test_expect_success 'ALEPH Fig. 1: w3 aggregates two workers, w0 goes to the PS' '
	agg-plan fig1.txt >p &&
	test "$(grep -c " w3$" p)" = 2 &&
	grep "^edge 0 w3 ps0$" p &&
	test "$(grep -c " ps0$" p)" = 2
'

test_expect_success '--eval on ALEPH Fig. 1 gives Table 1' '
	agg-plan --eval --size 525M fig1.txt >eval &&
	grep "^ps  *0\.8400 " eval &&
	grep "^ring  *0\.6300 " eval &&
	grep "^aleph  *0\.4200 " eval &&
	! grep "^rat" eval
'

test_expect_success '--eval adds rat when the hosts name regions' '
	agg-plan --eval regions.txt >eval &&
	grep "^rat " eval
'

test_expect_success JQ '--eval -j is a list of schemes with the same numbers' '
	agg-plan --eval -j --size 525M fig1.txt >eval.json &&
	jq -e "length == 3" eval.json &&
	jq -r ".[] | \"\(.scheme) \(.time_s)\"" eval.json >got &&
	printf "ps 0.84\nring 0.63\naleph 0.42\n" >want &&
	test_cmp want got &&
	jq -e ".[0] | has(\"bottleneck\") and has(\"root_bytes\") and has(\"chain\") and has(\"mean_hops\")" eval.json
'

test_expect_success JQ '-j prints the plan as JSON with the same edges' '
	agg-plan -j regions.txt >plan.json &&
	agg-plan regions.txt >plan.txt &&
	jq -r ".trees[0].edges[] | \"edge 0 \(.child) \(.parent)\"" plan.json >got &&
	grep "^edge" plan.txt >want &&
	test_cmp want got &&
	test "$(jq -r .scheme plan.json)" = aleph
'

test_expect_success '-p pretty-prints the same JSON' '
	agg-plan -p regions.txt >pretty &&
	test "$(wc -l <pretty)" -gt 10 &&
	if test_have_prereq JQ; then
		agg-plan -j regions.txt | jq -S . >a && jq -S . pretty >b && test_cmp a b
	fi
'

test_expect_success '--dot draws one arrow per edge' '
	agg-plan -s rat --trees 2 --dot regions.txt >dot &&
	head -1 dot | grep "^digraph" &&
	agg-plan -s rat --trees 2 regions.txt >plan &&
	test "$(grep -c -- "->" dot)" = "$(grep -c "^edge" plan)"
'

test_expect_success 'rat: one tree per --trees, workers in every tree' '
	agg-plan -s rat --trees 3 regions.txt >plan &&
	test "$(grep -c "^tree " plan)" = 3 &&
	for t in 0 1 2; do
		test "$(grep -c "^edge $t " plan)" = 6 || return 1
	done
'

test_expect_success 'bad input: one line naming file, line and column; exit 2; no output' '
	printf "ps0 10.90.0.100 bw=40 role=ps\nw0 10.90.0.1 bw=10 colour=red\n" >bad.txt &&
	test_expect_code 2 agg-plan bad.txt >out 2>err &&
	test_must_fail test -s out &&
	test "$(wc -l <err)" = 1 &&
	grep "^agg-plan: bad.txt:2:20: unknown attribute in .colour=red.$" err
'

test_expect_success 'bad input on stdin is named <stdin>' '
	printf "w0 10.90.0.1 bw=10\n" | test_expect_code 2 agg-plan 2>err &&
	grep "^agg-plan: <stdin>:2:1: no parameter server" err
'

test_expect_success 'a missing file is exit 2' '
	test_expect_code 2 agg-plan no-such-file 2>err &&
	grep "^agg-plan: cannot open no-such-file: " err
'

test_expect_success 'bad options are exit 2' '
	test_expect_code 2 agg-plan --scheme ring fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --size 10MB fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --size 6 fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --port 0 fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --trees 2 fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --eval --dot fig1.txt 2>/dev/null &&
	test_expect_code 2 agg-plan --no-such-option 2>/dev/null &&
	test_expect_code 2 agg-plan fig1.txt regions.txt 2>/dev/null
'

test_expect_success 'options reach the plan header' '
	agg-plan --job 7 --port 7000 --segment 256 --slots 64 --size 4Ki \
		--token beef --seed 9 fig1.txt >p &&
	head -1 p | grep "job=7 port=7000 scheme=aleph seed=9 segment=256 size=4096 slots=64 token=0x000000000000beef "
'

test_expect_success 'a full disk is exit 3 with a message' '
	test_expect_code 3 agg-plan fig1.txt >/dev/full 2>err &&
	grep "^agg-plan: cannot write standard output" err
'

test_expect_success '--version and --help exit 0' '
	agg-plan --version | grep "^agg [0-9]" &&
	agg-plan --help | grep -- "--scheme"
'

test_done
