#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-hot on the Zipf(1.1) workload: sampling, online, packing'
. "$(dirname "$0")/lib/test-lib.sh"

# Zipf(1.1) over 1M parameters, 100 iterations of 1000 examples with 10
# updates each (a batch of the order ZEBRA's recommendation models use).
test_expect_success 'generate the workload' '
	agg-hot gen --ids 1M --zipf 1.1 --iters 100 --batch 1000 --per-example 10 >log &&
	test "$(wc -l <log)" = 100000 &&
	agg-hot log >exact &&
	head -1 exact | grep "^hot v1 k=[0-9]* coverage=0.5 achieved=0.5" &&
	head -1 exact | grep "updates=1000000 iter=100"
'

test_expect_success 'sampling 8% of the examples: precision at least 0.9' '
	for s in 1 2 3; do
		agg-hot --sample 0.08 --seed $s log >sampled &&
		agg-hot compare exact sampled >cmp &&
		p=$(sed -n "s/^precision //p" cmp) &&
		echo "seed $s precision $p" &&
		awk -v p="$p" "BEGIN { exit !(p >= 0.9) }" || return 1
	done
'

test_expect_success 'online: the table after 5% of the iterations, precision at least 0.7' '
	agg-hot --online 5 log >online &&
	awk "/^hot/ { n++ } n == 1" online >first &&
	head -1 first | grep "iter=5$" &&
	agg-hot compare exact first >cmp &&
	p=$(sed -n "s/^precision //p" cmp) &&
	echo "precision $p" &&
	awk -v p="$p" "BEGIN { exit !(p >= 0.7) }"
'

test_expect_success 'online prints a new table only when it moved more than --tau' '
	agg-hot --online 5 --tau 1 log >never &&
	test "$(grep -c "^hot" never)" = 1 &&
	agg-hot --online 5 --tau 0.000001 log >always &&
	test "$(grep -c "^hot" always)" -gt 2
'

test_expect_success 'heat layout + Alg. 1: under 0.1 conflicts per packet, random layout beside it' '
	agg-hot --coverage 0.8 --stripes 128 log >hot &&
	for it in 0 33 66 99; do
		awk -v i=$it "\$1 == i" log >batch &&
		agg-hot pack --pairs 64 hot batch >pack &&
		cat pack &&
		h=$(awk "\$1 == \"heat\" && \$2 == \"alg1\" { print \$6 }" pack) &&
		r=$(awk "\$1 == \"random\" { print \$6 }" pack) &&
		awk -v h="$h" -v r="$r" "BEGIN { exit !(h < 0.1 && r > 1) }" || return 1
	done
'

test_expect_success 'binary logs give the same table as text' '
	agg-hot gen --ids 1M --iters 20 --batch 100 --binary >log.bin &&
	agg-hot gen --ids 1M --iters 20 --batch 100 >log.txt &&
	test "$(wc -c <log.bin)" = $(( (20 * 100 * 10 + 20) * 8 )) &&
	agg-hot --binary log.bin >a &&
	agg-hot log.txt >b &&
	test_cmp a b &&
	agg-hot --binary --online 5 log.bin >a &&
	agg-hot --online 5 log.txt >b &&
	test_cmp a b
'

test_expect_success '--sketch agrees with exact counting on the hot set' '
	agg-hot --sketch=65536 log >sk &&
	agg-hot compare exact sk >cmp &&
	grep "^precision 1.000000" cmp
'

test_expect_success 'a budget too small for the coverage: take what fits, say so' '
	agg-hot --coverage 0.9 --budget 1Ki log >small 2>err &&
	head -1 small | grep "^hot v1 k=64 " &&
	grep "^agg-hot: budget 1024 B holds 64 hot parameters covering" err
'

test_expect_success JQ '-j: the table and the comparison as JSON' '
	agg-hot -j log >t.json &&
	jq -e ".k == (.params | length) and .params[1].stripe == 1 and .params[1].slot == 0" t.json &&
	agg-hot compare -j exact exact | jq -e ".precision == 1 and .kendall_tau == 0" &&
	agg-hot pack -j hot batch | jq -e "length == 3 and .[0].layout == \"heat\""
'

test_expect_success 'bad input: file, line and column; exit 2' '
	printf "0 1 2\n1 3 x\n" >bad &&
	test_expect_code 2 agg-hot bad 2>err &&
	grep "^agg-hot: bad:2:5: expected an id" err &&
	printf "0 4294967296\n" >big &&
	test_expect_code 2 agg-hot big 2>err &&
	grep "use --sketch" err &&
	agg-hot --sketch big >/dev/null &&
	test_expect_code 2 agg-hot compare exact 2>/dev/null &&
	test_expect_code 2 agg-hot --sample 0 log 2>/dev/null &&
	test_expect_code 2 agg-hot compare exact log 2>err &&
	grep "^agg-hot: log:1:1: expected a .hot v1. header" err &&
	printf "hot v1 k=2 stripes=2\n0 5 3 0 0\n1 5 2 1 0\n" >dup &&
	test_expect_code 2 agg-hot compare dup dup 2>err &&
	grep "^agg-hot: dup:4:1: id 5 has two ranks, 0 and 1" err &&
	printf "\001\002\003" >odd.bin &&
	test_expect_code 2 agg-hot --binary odd.bin 2>err
'

test_done
