#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-plan as a user runs it: input, errors, output forms'
. "$(dirname "$0")/lib/test-lib.sh"

test -x "$AGG_BUILD/agg-plan" || skip_all "agg-plan not built in $AGG_BUILD"

# ALEPH Fig. 1: three 10 G workers, one of 30 G, a PS of 20 G.
cp "$TEST_DIRECTORY/lib/fig1.hosts" fig1.txt
cat >regions.txt <<'EOF'
ps0 10.90.0.100 bw=40 role=ps
ps1 10.90.0.101 bw=10 role=ps
w1 10.90.1.1 bw=25 rack=r1 pod=p1
w2 10.90.1.2 bw=10 rack=r1 pod=p1
w3 10.90.1.3 bw=10 rack=r2 pod=p1
w4 10.90.1.4 bw=12 rack=r2 pod=p1
w5 10.90.2.1 bw=25 rack=r1 pod=p2
w6 10.90.2.2 bw=10 rack=r1 pod=p2
EOF
# One clique where M-WCHA has choices to make: which 10 G workers the
# 30 G and 20 G ones take depends on the seed.
{
	echo "ps0 10.90.0.100 bw=100 role=ps"
	for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
		echo "w$i 10.90.0.$i bw=$(case $i in 1|2) echo 30 ;; 3|4|5) echo 20 ;; *) echo 10 ;; esac)"
	done
} >clique.txt

# Edges of a plan as "TREE CHILD PARENT", sorted.
edges() { awk '$1 == "edge" { print $2, $3, $4 }' "$1" | sort; }

test_expect_success 'reads a file, standard input and -, the same plan each time' '
	agg-plan fig1.txt >a &&
	agg-plan <fig1.txt >b &&
	agg-plan - <fig1.txt >c &&
	test_cmp a b && test_cmp a c &&
	head -n 1 a | grep "^plan v1 job=1 port=9999 scheme=aleph seed=1 " &&
	test "$(grep -c "^node " a)" = 5 &&
	test "$(grep -c "^tree " a)" = 1 &&
	test "$(grep -c "^edge 0 " a)" = 4
'

test_expect_success 'ALEPH Fig. 1: w3 aggregates w1 and w2, w0 and w3 send to the PS' '
	agg-plan fig1.txt >p &&
	edges p >got &&
	printf "0 w0 ps0\n0 w1 w3\n0 w2 w3\n0 w3 ps0\n" >want &&
	test_cmp want got
'

test_expect_success 'the same input and seed give the same bytes' '
	for s in 1 2 3 17; do
		agg-plan --seed $s clique.txt >x1 &&
		agg-plan --seed $s clique.txt >x2 &&
		test_cmp x1 x2 &&
		agg-plan -s rat --seed $s regions.txt >r1 &&
		agg-plan -s rat --seed $s regions.txt >r2 &&
		test_cmp r1 r2 || return 1
	done
'

test_expect_success 'the seed reaches M-WCHA: some seeds cluster differently' '
	for s in 1 2 3 4 5 6 7 8; do
		agg-plan --seed $s clique.txt >p.$s &&
		grep -q "^plan v1 .* seed=$s " p.$s &&
		edges p.$s | md5sum || return 1
	done >sums &&
	test "$(sort -u sums | wc -l)" -gt 1
'

test_expect_success 'several parameter servers: one tree each, weights by bandwidth (40:10)' '
	agg-plan regions.txt >p &&
	grep -x "tree 0 root=ps0 weight=4" p &&
	grep -x "tree 1 root=ps1 weight=1" p &&
	edges p | awk "\$1 == 0 { \$1 = \"\"; sub(/ps0\$/, \"PS\"); print }" >t0 &&
	edges p | awk "\$1 == 1 { \$1 = \"\"; sub(/ps1\$/, \"PS\"); print }" >t1 &&
	test_cmp t0 t1
'

test_expect_success 'rat: one tree per host by default, each rooted at a host of its own, weighted by its bandwidth' '
	agg-plan -s rat regions.txt >plan &&
	grep "^tree " plan >trees &&
	cat >want <<-EOF &&
	tree 0 root=ps0 weight=40
	tree 1 root=ps1 weight=10
	tree 2 root=w1 weight=25
	tree 3 root=w5 weight=25
	tree 4 root=w4 weight=12
	tree 5 root=w6 weight=10
	tree 6 root=w2 weight=10
	tree 7 root=w3 weight=10
	EOF
	test_cmp want trees &&
	agg-check plan plan
'

test_expect_success 'rat --trees 3: the PSs, then a worker; a worker root aggregates its own rack and pod' '
	agg-plan -s rat --trees 3 regions.txt >plan &&
	grep "^tree " plan >trees &&
	printf "tree 0 root=ps0 weight=8\ntree 1 root=ps1 weight=2\ntree 2 root=w1 weight=5\n" >want &&
	test_cmp want trees &&
	test "$(grep -c "^edge 0 " plan)" = 6 &&
	test "$(grep -c "^edge 1 " plan)" = 6 &&
	# tree 2 (w1 of rack r1, pod p1): w2 of its rack and the aggregate
	# of rack r2 go straight to w1; pod p2 sends one aggregate
	grep "^edge 2 " plan | sort >got &&
	printf "edge 2 w2 w1\nedge 2 w3 w4\nedge 2 w4 w1\nedge 2 w5 w1\nedge 2 w6 w5\n" >want &&
	test_cmp want got
'

test_expect_success 'rat without a parameter server: a tree per worker; ps and aleph refuse' '
	grep -v role=ps regions.txt >nops.txt &&
	agg-plan -s rat nops.txt >plan &&
	test "$(grep -c "^tree " plan)" = 6 &&
	grep -q "^tree 0 root=w1 " plan &&
	agg-check plan plan &&
	test_expect_code 2 agg-plan nops.txt 2>err &&
	echo "agg-plan: nops.txt:7:1: no parameter server: mark one host role=ps" >want &&
	test_cmp want err &&
	test_expect_code 2 agg-plan -s ps nops.txt 2>err &&
	test_cmp want err
'

test_expect_success '--eval on ALEPH Fig. 1 gives Table 1: ps 0.84, ring 0.63, aleph 0.42' '
	agg-plan --eval --size 525M fig1.txt >eval &&
	awk "NR > 1 { print \$1, \$2 }" eval >got &&
	printf "ps 0.8400\nring 0.6300\naleph 0.4200\nrat 0.5250\n" >want &&
	test_cmp want got
'

# The lines the man page shows after "$ agg-plan --eval --size 525M fig1.txt".
man_fig1_table() {
	sed 's/\\-/-/g' "$AGG_SRC/man/agg-plan.1" |
		sed -n '/^\$ agg-plan --eval --size 525M fig1.txt$/,/^\$ /p' | sed '1d;$d'
}

test_expect_success 'the Fig. 1 table in agg-plan(1) is what agg-plan prints' '
	man_fig1_table >want &&
	test "$(wc -l <want)" = 5 &&
	agg-plan --eval --size 525M fig1.txt >got &&
	test_cmp want got
'

test_expect_success '--eval without a parameter server: ps and aleph are "-", ring and rat modelled' '
	agg-plan --eval regions.txt >eval &&
	awk "NR > 1 { print \$1 }" eval >got &&
	printf "ps\nring\naleph\nrat\n" >want &&
	test_cmp want got &&
	printf "w0 10.90.0.1 bw=10\nw1 10.90.0.2 bw=10\nw2 10.90.0.3 bw=10\nw3 10.90.0.4 bw=10\n" >four.txt &&
	agg-plan --eval --size 100M four.txt >eval &&
	awk "NR > 1 { print \$1, \$2, \$3 }" eval >got &&
	# ring and rat both move 2(n-1)/n of 100 MB per worker each way:
	# 150 MB at 10 Gbit/s
	printf "ps - -\nring 0.1200 w0\naleph - -\nrat 0.1200 w0\n" >want &&
	test_cmp want got &&
	agg-plan --eval -j four.txt >json &&
	jq -e ".[0].time_s == null and .[2].bottleneck == null and .[3].time_s > 0" json
'

test_expect_success JQ '--eval -j: a list of objects with the numbers of the table' '
	agg-plan --eval -j --size 525M fig1.txt >fig1.json &&
	jq -e "type == \"array\" and length == 4 and all(.[]; has(\"scheme\") and has(\"time_s\"))" fig1.json &&
	jq -r ".[] | \"\(.scheme) \(.time_s)\"" fig1.json >got &&
	printf "ps 0.84\nring 0.63\naleph 0.42\nrat 0.525\n" >want &&
	test_cmp want got &&
	for f in fig1.txt regions.txt; do
		agg-plan --eval "$f" | awk "NR > 1" >text &&
		agg-plan --eval -j "$f" >json &&
		# the numbers rounded as the text rounds them (C printf)
		jq -r ".[] | [.scheme, .time_s, .bottleneck, .root_bytes, .aggregators,
			.clusters, .cross_region_bytes, .chain, .mean_hops] | @tsv" json |
			awk -F "\t" -v OFS="\t" "{ \$2 = sprintf(\"%.4f\", \$2); \$9 = sprintf(\"%.3f\", \$9); print }" >from-json &&
		awk -v OFS="\t" "{ \$1 = \$1; print }" text >from-text &&
		test_cmp from-text from-json || return 1
	done
'

test_expect_success JQ '-j prints the plan as JSON with the same header, nodes and edges' '
	agg-plan -s rat --trees 2 -j regions.txt >plan.json &&
	agg-plan -s rat --trees 2 regions.txt >plan.txt &&
	jq -e ".version == 1 and .scheme == \"rat\" and .job == 1 and .port == 9999" plan.json &&
	test "$(jq -r .token plan.json)" = "$(head -n 1 plan.txt | sed "s/.* token=//; s/ .*//")" &&
	jq -r ".nodes[] | .name + \" \" + .addr" plan.json >got &&
	awk "\$1 == \"node\" { print \$2, \$3 }" plan.txt >want &&
	test_cmp want got &&
	jq -r ".trees[] | .id as \$t | .edges[] | \"edge \(\$t) \(.child) \(.parent)\"" plan.json >got &&
	grep "^edge" plan.txt >want &&
	test_cmp want got
'

test_expect_success '-p pretty-prints the same JSON' '
	agg-plan -p regions.txt >pretty &&
	test "$(wc -l <pretty)" -gt 10 &&
	if test_have_prereq JQ; then
		agg-plan -j regions.txt | jq -S . >a && jq -S . pretty >b && test_cmp a b
	fi
'

test_expect_success '--dot is a digraph with one edge line per plan edge' '
	agg-plan -s rat --trees 2 --dot regions.txt >dot &&
	head -n 1 dot | grep "^digraph " &&
	tail -n 1 dot | grep "^}$" &&
	agg-plan -s rat --trees 2 regions.txt >plan &&
	sed -n "s/^\t\"\([^\"]*\)\" -> \"\([^\"]*\)\" \[label=\"\([0-9]*\)\"\];$/\3 \1 \2/p" dot |
		sort >got &&
	edges plan >want &&
	test_cmp want got &&
	test "$(grep -c -- "->" dot)" = "$(grep -c "^edge " plan)"
'

# bad_input NAME CONTENT MESSAGE: agg-plan NAME exits 2, prints nothing on
# standard output and exactly "agg-plan: MESSAGE" on standard error.
bad_input() {
	printf "$2" >"$1" &&
	test_expect_code 2 agg-plan "$1" >out 2>err &&
	! test -s out &&
	echo "agg-plan: $3" >want &&
	test_cmp want err
}

PS='ps0 10.90.0.100 bw=40 role=ps\n'
test_expect_success 'bad input: one line FILE:LINE:COL: message, exit 2, nothing on stdout' "
	bad_input colour.txt '${PS}w0 10.90.0.1 bw=10 colour=red\n' \
		\"colour.txt:2:20: unknown attribute in 'colour=red'\" &&
	bad_input bw.txt '${PS}w0 10.90.0.1 bw=fast\n' \
		\"bw.txt:2:17: not a decimal number in 'bw=fast'\" &&
	bad_input nobw.txt '${PS}w0 10.90.0.1 cpu=4\n' \
		\"nobw.txt:2:19: host 'w0' has no bw= (available Gbit/s)\" &&
	bad_input dupaddr.txt '${PS}w0 10.90.0.1 bw=10\nw1 10.90.0.1 bw=10\n' \
		\"dupaddr.txt:3:4: duplicate address 10.90.0.1 (first on line 2, host 'w0')\" &&
	bad_input dupname.txt '${PS}w0 10.90.0.1 bw=10\nw0 10.90.0.2 bw=10\n' \
		\"dupname.txt:3:1: duplicate host name 'w0' (first on line 2)\" &&
	bad_input lo.txt '${PS}w0 127.0.0.1 bw=10\n' \
		\"lo.txt:2:4: address '127.0.0.1' is not a unicast host address\" &&
	bad_input link.txt '${PS}w0 10.90.0.1 bw=10\nlink w0 w9\n' \
		\"link.txt:3:9: unknown host 'w9' in link\" &&
	bad_input nops.txt 'w0 10.90.0.1 bw=10\n' \
		'nops.txt:2:1: no parameter server: mark one host role=ps' &&
	bad_input empty.txt '' \
		'empty.txt:1:1: no parameter server: mark one host role=ps' &&
	bad_input noworker.txt '${PS}' 'noworker.txt:2:1: no workers'
"

test_expect_success 'bad input on standard input is named <stdin>' '
	printf "w0 10.90.0.1 bw=10\n" >nops.txt &&
	test_expect_code 2 agg-plan <nops.txt >out 2>err &&
	! test -s out &&
	echo "agg-plan: <stdin>:2:1: no parameter server: mark one host role=ps" >want &&
	test_cmp want err
'

test_expect_success 'a missing file is exit 2 with one line naming it' '
	test_expect_code 2 agg-plan no-such-file >out 2>err &&
	! test -s out &&
	echo "agg-plan: cannot open no-such-file: No such file or directory" >want &&
	test_cmp want err
'

# bad_usage ARG...: exit 2, a message on stderr, nothing on stdout.
bad_usage() {
	test_expect_code 2 agg-plan "$@" >out 2>err &&
	! test -s out &&
	grep -q "^agg-plan: " err || { echo "for: $*"; cat err; return 1; }
}

test_expect_success 'bad options are exit 2 with a message and no output' '
	bad_usage --scheme ring fig1.txt &&
	bad_usage -s nope fig1.txt &&
	bad_usage --size 10MB fig1.txt &&
	bad_usage --size 6 fig1.txt &&
	bad_usage --port 0 fig1.txt &&
	bad_usage --port 65536 fig1.txt &&
	bad_usage --segment 16385 fig1.txt &&
	bad_usage --seed -1 fig1.txt &&
	bad_usage --token xyz fig1.txt &&
	bad_usage --bw-demand 0 fig1.txt &&
	bad_usage --trees 65 -s rat fig1.txt &&
	bad_usage --eval --dot fig1.txt &&
	bad_usage --no-such-option fig1.txt &&
	bad_usage fig1.txt regions.txt
'

test_expect_success '--trees without -s rat is exit 2' '
	bad_usage --trees 2 fig1.txt &&
	grep "trees applies to --scheme rat" err &&
	bad_usage -s ps --trees 2 fig1.txt &&
	agg-plan -s rat --trees 2 fig1.txt >/dev/null &&
	agg-plan --eval --trees 2 regions.txt >/dev/null
'

test_expect_success 'options reach the plan header' '
	agg-plan --job 7 --port 7000 --segment 256 --slots 64 --size 4Ki \
		--token beef --seed 9 --bw-demand 5 --cpu-demand 0.5 fig1.txt >p &&
	head -n 1 p >got &&
	echo "plan v1 job=7 port=7000 scheme=aleph seed=9 segment=256 size=4096 slots=64 token=0x000000000000beef bw-demand=5 cpu-demand=0.5" >want &&
	test_cmp want got
'

test_expect_success 'the default slots keep a window of 2^18 values: 256 to 16' '
	for sw in 128:256 1024:256 2048:128 4096:64 16368:16; do
		agg-plan --segment ${sw%%:*} fig1.txt | head -n 1 |
			grep " slots=${sw#*:} " || return 1
	done &&
	agg-plan --segment 16368 fig1.txt | sed "1s/ slots=16//" >noslots &&
	agg-check plan -j noslots | jq -e ".slots == 32"
'

test_expect_success 'the default token depends on job and seed; --token overrides it' '
	t1=$(agg-plan fig1.txt | head -n 1 | sed "s/.* token=//; s/ .*//") &&
	t2=$(agg-plan --job 2 fig1.txt | head -n 1 | sed "s/.* token=//; s/ .*//") &&
	t3=$(agg-plan --seed 2 fig1.txt | head -n 1 | sed "s/.* token=//; s/ .*//") &&
	test "$t1" != "$t2" && test "$t1" != "$t3" && test "$t2" != "$t3" &&
	agg-plan --token 0x0123456789abcdef fig1.txt | head -n 1 |
		grep " token=0x0123456789abcdef "
'

test_expect_success '-v says what M-WCHA did on stderr, -q keeps quiet; stdout unchanged' '
	agg-plan fig1.txt >plain 2>err0 &&
	! test -s err0 &&
	agg-plan -v fig1.txt >verbose 2>err &&
	test_cmp plain verbose &&
	grep -x "agg-plan: aleph: 2 clusters (M-WCHA 2, improved 2), 1 aggregators, 1 rounds, b=10 Gbit/s" err &&
	agg-plan -v -q fig1.txt >quiet 2>err &&
	test_cmp plain quiet &&
	! test -s err
'

test_expect_success 'a full disk is exit 3 with a message' '
	test -w /dev/full &&
	test_expect_code 3 agg-plan fig1.txt >/dev/full 2>err &&
	grep "^agg-plan: cannot write standard output: No space left on device$" err &&
	test_expect_code 3 agg-plan --eval -j fig1.txt >/dev/full 2>err &&
	grep "^agg-plan: cannot write standard output" err
'

test_expect_success '--help, --usage and --version exit 0 on stdout' '
	agg-plan --version >out && grep "^agg [0-9]" out &&
	agg-plan --help >out && grep -- "--scheme=SCHEME" out &&
	grep "^Exit status: 0 ok, 2 bad usage or bad input, 3 system failure" out &&
	agg-plan --usage >out && grep "^Usage: agg-plan " out
'

test_lazy_prereq_BASHCOMP='command -v bash && test -f /usr/share/bash-completion/bash_completion'
test_expect_success BASHCOMP 'the completion offers the schemes after -s' '
	bash -c ". /usr/share/bash-completion/bash_completion &&
		. \"\$AGG_SRC/completions/agg-plan.bash\" &&
		COMP_WORDS=(agg-plan -s \"\"); COMP_CWORD=2;
		COMP_LINE=\"agg-plan -s \"; COMP_POINT=\${#COMP_LINE};
		_agg_plan agg-plan \"\" -s; echo \"\${COMPREPLY[*]}\"" >got &&
	echo "aleph rat ps" >want &&
	test_cmp want got
'

test_done
