#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-hot gen --sparse: Zipf sparse gradients, text and binary; the float64 reference'
. "$(dirname "$0")/lib/test-lib.sh"

PATH=$AGG_BUILD/t:$PATH

test_expect_success 'text and binary hold the same pairs; the same options, the same bytes' '
	agg-hot gen --sparse --ids 100k --width 4 --touch 0.01 --worker 2 --iter 5 >g.txt &&
	agg-hot gen --sparse --binary --ids 100k --width 4 --touch 0.01 --worker 2 --iter 5 >g.bin &&
	test $(wc -c <g.bin) = $((16 + 1000 * (8 + 16))) &&
	head -1 g.txt >w && echo "width 4" >want && test_cmp want w &&
	test $(wc -l <g.txt) = 1001 &&
	awk "NR > 1 && NF != 5 { bad++ } NR > 2 && \$1 <= prev { bad++ } NR > 1 { prev = \$1 } END { exit bad }" g.txt &&
	sparsetool ref g.txt >ref.txt && sparsetool ref g.bin >ref.bin && test_cmp ref.txt ref.bin &&
	agg-hot gen --sparse --binary --ids 100k --width 4 --touch 0.01 --worker 2 --iter 5 >g2.bin &&
	cmp g.bin g2.bin &&
	agg-hot gen --sparse --binary --ids 100k --width 4 --touch 0.01 --worker 3 --iter 5 >g3.bin &&
	! cmp -s g.bin g3.bin
'

test_expect_success 'Zipf: the hot rows are in every worker, the union smaller than the sum' '
	for k in 0 1 2 3; do
		agg-hot gen --sparse --ids 100k --width 1 --touch 0.02 --worker $k --iter 1 >w$k || return 1
	done &&
	sparsetool ref w0 w1 w2 w3 >sum &&
	union=$(($(wc -l <sum) - 1)) &&
	echo "union $union of 4 x 2000" &&
	test $union -gt 2000 && test $union -lt 7000 &&
	cat w0 w1 w2 w3 | awk "\$1 != \"width\" { n[\$1]++ } END { for (i in n) if (n[i] == 4) c++; print c }" >in4 &&
	test $(cat in4) -gt 200
'

test_expect_success 'the reference sums per id in float64; check accepts it, rejects a changed value' '
	printf "width 2\n1 0.5 1\n3 1e8 0\n" >a &&
	printf "width 2\n3 1 0\n2 0.25 0.25\n" >b &&
	sparsetool ref a b >r &&
	printf "width 2\n1 0.5 1\n2 0.25 0.25\n3 100000001 0\n" >want &&
	test_cmp want r &&
	printf "width 2\n1 0.5 1\n2 0.25 0.25\n3 1e8 0\n" >got &&
	sparsetool check got a b &&
	printf "width 2\n1 0.5 1\n2 0.25 300.25\n3 1e8 0\n" >bad &&
	test_expect_code 1 sparsetool check bad a b 2>err &&
	grep "id 2 value 1: 300.25, the reference 0.25" err
'

test_expect_success 'bad options: exit 2, named' '
	test_expect_code 2 agg-hot gen --sparse --iters 3 2>err && grep -- "--iters does not apply to gen --sparse" err &&
	test_expect_code 2 agg-hot gen --touch 0.1 2>err && grep -- "--touch needs gen --sparse" err &&
	test_expect_code 2 agg-hot gen --sparse --width 257 2>err && grep -- "bad --width" err &&
	test_expect_code 2 agg-hot gen --sparse --ids 1000 --zipf 5 --touch 0.5 2>err &&
	grep "out of reach of Zipf 5" err &&
	test_expect_code 2 agg-hot --worker 1 log 2>err && grep -- "--worker does not apply to identification" err
'

test_done
