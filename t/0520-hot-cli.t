#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-hot: formats, Principle 1, online, sketch, pack, errors'
. "$(dirname "$0")/lib/test-lib.sh"

test_expect_success 'a small workload; text and binary logs give the same table' '
	agg-hot gen --ids 100k --iters 20 --batch 500 >log &&
	test "$(wc -l <log)" = 10000 &&
	head -1 log | grep -E "^0( [0-9]+){10}$" &&
	agg-hot gen --ids 100k --iters 20 --batch 500 --binary >log.bin &&
	test "$(wc -c <log.bin)" = $(( (20 * 500 * 10 + 20) * 8 )) &&
	agg-hot --coverage 0.6 log >hot &&
	agg-hot --coverage 0.6 --binary log.bin >hot.bin &&
	test_cmp hot hot.bin &&
	agg-hot --coverage 0.6 <log >hot.stdin &&
	test_cmp hot hot.stdin
'

test_expect_success 'the table: header fields, rank i on stripe i mod m, slot i div m' '
	agg-hot --coverage 0.6 --stripes 4 log >t4 &&
	head -1 t4 | grep -E "^hot v1 k=[0-9]+ coverage=0.6 achieved=0.6[0-9]* budget=1048576 slot_bytes=24 stripes=4 updates=100000 iter=20 sample=1 method=exact$" &&
	awk "NR > 1 && (\$4 != \$1 % 4 || \$5 != int(\$1 / 4)) { bad++ } END { exit bad }" t4 &&
	awk "NR > 2 && \$3 > prev { bad++ } NR > 1 { prev = \$3 } END { exit bad }" t4 &&
	k=$(head -1 t4 | sed "s/.* k=\([0-9]*\) .*/\1/") &&
	test "$(wc -l <t4)" = $((k + 1))
'

test_expect_success 'Principle 1: coverage is met by the smallest k' '
	k=$(head -1 hot | sed "s/.* k=\([0-9]*\) .*/\1/") &&
	awk -v k="$k" "NR > 1 { s += \$3; if (NR - 1 == k - 1) a = s; if (NR - 1 == k) b = s }
		END { exit !(a < 0.6 * 100000 && b >= 0.6 * 100000) }" hot
'

test_expect_success 'a budget short of the coverage: what fits, and a warning' '
	agg-hot --coverage 0.9 --budget 1Ki log >small 2>err &&
	head -1 small | grep "^hot v1 k=42 " &&
	test "$(wc -l <small)" = 43 &&
	grep "^agg-hot: budget 1024 B holds 42 hot parameters of 24 B covering" err &&
	agg-hot -q --coverage 0.9 --budget 1Ki log >/dev/null 2>err &&
	test_must_fail test -s err &&
	agg-hot --budget 10 log >none 2>err &&
	head -1 none | grep "^hot v1 k=0 "
'

test_expect_success 'compare: precision, recall and both Kendall distances' '
	agg-hot compare hot hot >same &&
	grep "^precision 1.000000" same && grep "^kendall_tau 0.000000" same &&
	grep "^kendall_topk 0.000000" same &&
	agg-hot --coverage 0.6 --sample 0.2 log >s20 &&
	agg-hot compare hot s20 >cmp &&
	cat cmp &&
	awk "/^precision/ { p = \$2 } /^kendall_topk/ { t = \$2 }
		END { exit !(p > 0.5 && p < 1 && t > 0 && t < 0.5) }" cmp &&
	agg-hot compare hot - <s20 >cmp2 &&
	test_cmp cmp cmp2
'

test_expect_success 'sampling counts whole examples' '
	agg-hot --sample 0.1 log >s10 &&
	u=$(head -1 s10 | sed "s/.* updates=\([0-9]*\) .*/\1/") &&
	test $((u % 10)) = 0 && test "$u" -gt 8000 && test "$u" -lt 12000 &&
	head -1 s10 | grep " sample=0.1 "
'

test_expect_success '--online: tables while the log streams, printed when they moved' '
	agg-hot --online 5 --tau 1 log >one &&
	test "$(grep -c "^hot" one)" = 1 &&
	agg-hot --online 5 --tau 0 log >all &&
	grep "^hot" all | sed "s/.* iter=\([0-9]*\) .*/\1/" | tr "\n" " " >iters &&
	test "$(cat iters)" = "5 10 15 20 " &&
	awk "/^hot/ { n++ } n == 4" all >last &&
	agg-hot log >offline &&
	test_cmp offline last
'

test_expect_success '--online --window follows a drifting hot set' '
	agg-hot gen --ids 100k --iters 20 --batch 500 --drift 200 >drift &&
	agg-hot --online 5 --tau 0.3 drift >cum &&
	agg-hot --online 5 --tau 0.3 --window drift >win &&
	c=$(grep -c "^hot" cum) && w=$(grep -c "^hot" win) &&
	echo "since the start: $c tables, windowed: $w" &&
	test "$w" = 4 && test "$c" -lt 4
'

test_expect_success '--sketch: bounded memory, the same hot set here' '
	agg-hot --coverage 0.6 --sketch=4096 log >sk &&
	head -1 sk | grep " method=sketch$" &&
	agg-hot compare hot sk | grep "^precision 1.000000" &&
	agg-hot -v --sketch log 2>err >/dev/null &&
	grep "sketch: 1048576 counters, 33554432 bytes" err
'

test_expect_success 'exact counting takes any u64 id, in little memory when sparse' '
	printf "0 1099511627776 1099511627776 5\n1 18446744073709551614 1099511627776\n" >sparse &&
	agg-hot -v --coverage 0.5 sparse >t 2>err &&
	sed -n 2p t | grep "^0 1099511627776 3 0 0$" &&
	kib=$(sed -n "s/.*peak memory \([0-9]*\) KiB/\1/p" err) &&
	test "$kib" -lt 20000
'

test_expect_success 'pack: four rows, the table from stdin too' '
	awk "\$1 == 3" log >batch &&
	agg-hot pack hot batch >pack &&
	head -1 pack | grep "^layout *packing *pairs *packets *conflicts *per_packet *padded$" &&
	test "$(awk "NR > 1 { print \$1 \"/\" \$2 }" pack | tr "\n" " ")" = "heat/alg1 heat/sequential random/alg1 random/sequential " &&
	agg-hot pack - batch <hot >pack2 &&
	test_cmp pack pack2 &&
	agg-hot pack --pairs 1 hot batch | awk "NR > 1 && \$5 != 0 { bad++ } END { exit bad }"
'

test_expect_success JQ '-j: table, online list, comparison and pack as JSON' '
	agg-hot -j --stripes 4 log >t.json &&
	jq -e ".k == (.params | length) and .slot_bytes == 24 and .params[5].stripe == 1 and .params[5].slot == 1" t.json &&
	agg-hot -j --online 10 --tau 0 log | jq -e "length == 2 and .[1].iter == 20" &&
	agg-hot compare -j hot hot | jq -e ".precision == 1 and .kendall_topk == 0 and .common > 0" &&
	agg-hot pack -j hot batch | jq -e "length == 4 and .[0].layout == \"heat\" and .[0].packing == \"alg1\" and (.[3].conflicts_per_packet > .[0].conflicts_per_packet)"
'

test_expect_success 'bad logs: file, line and column; exit 2' '
	printf "0 1 2\n1 3 x\n" >bad &&
	test_expect_code 2 agg-hot bad 2>err &&
	test "$(cat err)" = "agg-hot: bad:2:5: expected an id (unsigned integer)" &&
	printf "0 18446744073709551616\n" >big &&
	test_expect_code 2 agg-hot big 2>err &&
	grep "^agg-hot: big:1:3: bad id .18446744073709551616." err &&
	printf "\001\002\003\004\005\006\007\010\011" >odd.bin &&
	test_expect_code 2 agg-hot --binary odd.bin 2>err &&
	grep "^agg-hot: odd.bin: 1 trailing byte after the last whole id at offset 8" err &&
	test_expect_code 2 agg-hot pack hot bad 2>err &&
	grep "^agg-hot: bad:2:5:" err
'

test_expect_success 'bad tables: file, line and column; exit 2' '
	test_expect_code 2 agg-hot compare hot log 2>err &&
	grep "^agg-hot: log:1:1: expected a .hot v1. header" err &&
	printf "hot v1 k=2 stripes=2\n0 5 3 0 0\n1 5 2 1 0\n" >dup &&
	test_expect_code 2 agg-hot compare dup dup 2>err &&
	grep "^agg-hot: dup:4:1: id 5 has two ranks, 0 and 1" err &&
	printf "hot v1 k=2 stripes=2\n0 5 3 0 0\n1 6 2 0 0\n" >moved &&
	test_expect_code 2 agg-hot pack moved log 2>err &&
	grep "^agg-hot: moved:3:1: row out of place (rank 1: stripe 1, slot 0)" err
'

test_expect_success 'bad usage: exit 2' '
	test_expect_code 2 agg-hot compare hot 2>/dev/null &&
	test_expect_code 2 agg-hot compare - - 2>/dev/null &&
	test_expect_code 2 agg-hot --sample 0 log 2>/dev/null &&
	test_expect_code 2 agg-hot --sample 1.5 log 2>/dev/null &&
	test_expect_code 2 agg-hot --coverage 0 log 2>/dev/null &&
	test_expect_code 2 agg-hot --stripes 0 log 2>/dev/null &&
	test_expect_code 2 agg-hot --tau 0.2 log 2>err &&
	grep "tau needs --online" err &&
	test_expect_code 2 agg-hot compare --sample 0.1 hot hot 2>err &&
	grep -- "--sample does not apply to compare" err &&
	test_expect_code 2 agg-hot gen --pairs 3 2>/dev/null &&
	test_expect_code 2 agg-hot log log 2>/dev/null &&
	test_expect_code 2 agg-hot nosuchfile 2>err &&
	grep "^agg-hot: cannot open nosuchfile: No such file or directory" err
'

test_expect_success 'write errors: exit 3' '
	test -w /dev/full || return 0
	test_expect_code 3 agg-hot gen >/dev/full 2>err &&
	test_expect_code 3 agg-hot log >/dev/full 2>err
'

test_done
