#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-plan: the default token is keyed by a secret (--secret, AGG_SECRET_FILE)'
. "$(dirname "$0")/lib/test-lib.sh"

test -x "$AGG_BUILD/agg-plan" || skip_all "agg-plan not built in $AGG_BUILD"

cp "$TEST_DIRECTORY/lib/fig1.hosts" fig1.txt

token() { sed -n '1s/.* token=\([^ ]*\) .*/\1/p' "$1"; }
# secret FILE MODE CONTENT: a secret file
secret() {
	rm -f "$1" && (umask 077 && printf '%s' "$3" >"$1") && chmod "$2" "$1"
}
# refused ARG...: exit 2, nothing on stdout, one line on stderr (in err)
refused() {
	test_expect_code 2 agg-plan "$@" >out 2>err &&
	! test -s out &&
	test "$(wc -l <err)" = 1 || { echo "for: $*"; cat err; return 1; }
}

# The built-in default, as --help says it.
default_secret=$("$AGG_BUILD/agg-plan" --help | tr -s ' \n' '  ' |
	sed -n 's/.*--secret=FILE .*(default \$AGG_SECRET_FILE, else \([^ )]*\)).*/\1/p')
test_lazy_prereq_NODEFAULT='test -n "$default_secret" && ! test -e "$default_secret"'

test_expect_success 'the test suite secret: mode 600, from AGG_SECRET_FILE' '
	test "$AGG_SECRET_FILE" = "$PWD/.agg-secret" &&
	test "$(stat -c %a "$AGG_SECRET_FILE")" = 600 &&
	test "$(cat "$AGG_SECRET_FILE")" = "agg test suite secret: not a secret"
'

# SipHash-2-4 of the plan text with token=0 under the key of the suite's
# secret, computed apart from agg (the construction of agg-plan(1)): a
# change here changes every plan made with an existing secret.
test_expect_success 'the default token of ALEPH Fig. 1 under the suite secret' '
	agg-plan fig1.txt >p &&
	test "$(token p)" = 0x8dbf14b94de1fe81
'

test_expect_success 'the same hosts, options and secret: the same plan, from any path' '
	agg-plan --seed 3 fig1.txt >a &&
	agg-plan --seed 3 fig1.txt >b &&
	test_cmp a b &&
	mkdir elsewhere && cp -p "$AGG_SECRET_FILE" elsewhere/copy &&
	agg-plan --seed 3 --secret elsewhere/copy fig1.txt >c &&
	test_cmp a c &&
	AGG_SECRET_FILE=$PWD/elsewhere/copy agg-plan --seed 3 fig1.txt >d &&
	test_cmp a d
'

test_expect_success 'another secret: another token, the rest of the plan the same' '
	secret other 600 "another secret of 32 bytes......" &&
	agg-plan fig1.txt >a &&
	agg-plan --secret other fig1.txt >b &&
	test "$(token a)" != "$(token b)" &&
	sed "1s/token=[^ ]*//" a >a.rest && sed "1s/token=[^ ]*//" b >b.rest &&
	test_cmp a.rest b.rest &&
	secret one-bit 600 "agg test suite secret: not a secres" &&
	agg-plan --secret one-bit fig1.txt >c &&
	test "$(token a)" != "$(token c)"
'

test_expect_success 'the whole plan enters the token: job, seed, size, hosts' '
	agg-plan fig1.txt >p0 &&
	agg-plan --job 2 fig1.txt >p1 &&
	agg-plan --seed 2 fig1.txt >p2 &&
	agg-plan --size 4000 fig1.txt >p3 &&
	sed "s/bw=30/bw=31/" fig1.txt >fig1b.txt && agg-plan fig1b.txt >p4 &&
	for i in 0 1 2 3 4; do token p$i; done >tokens &&
	test "$(sort -u tokens | wc -l)" = 5
'

test_expect_success '--secret comes before AGG_SECRET_FILE' '
	secret other 600 "another secret of 32 bytes......" &&
	agg-plan --secret other fig1.txt >want &&
	AGG_SECRET_FILE=$PWD/no-such-secret agg-plan --secret other fig1.txt >got &&
	test_cmp want got
'

test_expect_success 'a secret through a pipe: --secret /dev/stdin' '
	agg-plan fig1.txt >want &&
	cat "$AGG_SECRET_FILE" | agg-plan --secret /dev/stdin fig1.txt >got &&
	test_cmp want got
'

test_expect_success NODEFAULT 'no secret at all: exit 2, one line saying how to make one' '
	(unset AGG_SECRET_FILE && refused fig1.txt) &&
	d=${default_secret%/*} &&
	echo "agg-plan: no secret to derive the job token from ($default_secret): create it once with '\''install -d -m 700 $d && (umask 077; head -c 32 /dev/urandom >$default_secret)'\'' and copy it (mode 600) wherever plans are made; or --secret FILE, AGG_SECRET_FILE, --token HEX" >want &&
	test_cmp want err &&
	(AGG_SECRET_FILE= && refused -j fig1.txt) &&
	test_cmp want err
'

test_expect_success 'AGG_SECRET_FILE or --secret naming a missing file: exit 2, naming it' '
	AGG_SECRET_FILE=$PWD/no-such-secret refused fig1.txt &&
	echo "agg-plan: AGG_SECRET_FILE: cannot open secret $PWD/no-such-secret: No such file or directory" >want &&
	test_cmp want err &&
	refused --secret no-such-secret fig1.txt &&
	echo "agg-plan: cannot open secret no-such-secret: No such file or directory" >want &&
	test_cmp want err
'

test_expect_success 'a secret group or others can read is refused: exit 2' '
	secret open 640 "agg test suite secret: not a secret" &&
	refused --secret open fig1.txt &&
	echo "agg-plan: secret open is open to group or others (mode 0640): chmod 600 open" >want &&
	test_cmp want err &&
	chmod 604 open && refused --secret open fig1.txt &&
	grep "(mode 0604)" err &&
	chmod 644 open && AGG_SECRET_FILE=$PWD/open refused fig1.txt &&
	grep "^agg-plan: AGG_SECRET_FILE: secret $PWD/open is open to group or others (mode 0644)" err &&
	chmod 600 open && agg-plan --secret open fig1.txt >/dev/null &&
	chmod 400 open && agg-plan --secret open fig1.txt >/dev/null
'

test_expect_success 'a secret shorter than 16 bytes is refused: exit 2' '
	secret short 600 "0123456789abcde" &&
	refused --secret short fig1.txt &&
	echo "agg-plan: secret short has 15 bytes, fewer than 16: fill it with '\''head -c 32 /dev/urandom >short'\''" >want &&
	test_cmp want err &&
	secret empty 600 "" && refused --secret empty fig1.txt &&
	refused --secret . fig1.txt &&
	grep "^agg-plan: secret \. is a directory$" err &&
	secret enough 600 "0123456789abcdef" &&
	agg-plan --secret enough fig1.txt >/dev/null
'

test_expect_success '--token overrides the secret, which is then not needed' '
	AGG_SECRET_FILE=$PWD/no-such-secret agg-plan --token 0x1234 fig1.txt >p &&
	test "$(token p)" = 0x0000000000001234 &&
	secret open 644 "agg test suite secret: not a secret" &&
	agg-plan --secret open --token 99 fig1.txt >p &&
	test "$(token p)" = 0x0000000000000099 &&
	agg-plan fig1.txt | sed "1s/token=[^ ]*/token=0x0000000000001234/" >want &&
	agg-plan --token 1234 fig1.txt >got &&
	test_cmp want got
'

test_expect_success '--eval and --dot print no token and need no secret' '
	AGG_SECRET_FILE=$PWD/no-such-secret agg-plan --eval fig1.txt >eval &&
	test "$(wc -l <eval)" = 5 &&
	AGG_SECRET_FILE=$PWD/no-such-secret agg-plan --eval -j fig1.txt >/dev/null &&
	AGG_SECRET_FILE=$PWD/no-such-secret agg-plan --dot fig1.txt >dot &&
	grep "^digraph" dot &&
	secret short 600 "short" &&
	agg-plan --secret short --eval fig1.txt >/dev/null &&
	refused --secret short -j fig1.txt
'

test_done
