#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='agg-stat: usage errors, nothing loaded, unknown jobs and nodes, no bpffs'
. "$(dirname "$0")/lib/test-lib.sh"

PINS=/sys/fs/bpf/aggt-cli-$$
export AGG_PIN_DIR=$PINS
test_atexit 'rm -rf "$PINS"'

# fails CODE MESSAGE ARGS...: agg-stat ARGS exits CODE and says MESSAGE
# on the first line of stderr, nothing on stdout
fails() {
	code=$1 msg=$2
	shift 2
	test_expect_code "$code" agg-stat "$@" >out 2>err &&
	{ head -1 err | grep -F -- "agg-stat: $msg" ||
	  { echo "want: agg-stat: $msg"; cat err; return 1; }; } &&
	{ ! test -s out || { echo "stdout:"; cat out; return 1; }; }
}

# one_line: the error is one line (argp's usage errors add a "Try" line)
one_line() {
	test $(wc -l <err) = 1 || { cat err; return 1; }
}

test_expect_success 'bad --watch values are usage errors' '
	for v in 0 0.001 -1 abc 1x 1.5s 100000 ""; do
		fails 2 "bad --watch '\''$v'\'' (seconds, 0.01 to 86400)" --watch "$v" || return 1
	done
'

test_expect_success 'bad --count values, and --count without --watch' '
	for v in 0 -2 x 1.5 4294967296; do
		fails 2 "bad --count '\''$v'\'' (1 to 4294967295 intervals)" --watch 1 --count "$v" ||
		return 1
	done &&
	fails 2 "--count needs --watch" --count 3
'

test_expect_success 'bad --range values name the character, and --range needs --slots' '
	fails 2 "bad --range '\''5-3'\'' at character 3" --slots --range 5-3 &&
	fails 2 "bad --range '\''a-9'\'' at character 1" --slots --range a-9 &&
	fails 2 "bad --range '\''1-x'\'' at character 3" --slots --range 1-x &&
	fails 2 "bad --range '\''1-'\'' at character 3" --slots --range 1- &&
	fails 2 "bad --range '\''-4'\'' at character 1" --slots --range -4 &&
	fails 2 "bad --range '\''99999999999'\''" --slots --range 99999999999 &&
	fails 2 "--range needs --slots" --range 1-2
'

test_expect_success 'options that do not go together; no arguments' '
	fails 2 "--all and --node do not go together" --all --node a &&
	fails 2 "--watch does not go with --slots" --watch 1 --slots &&
	fails 2 "--watch does not go with --per-cpu" --watch 1 --per-cpu &&
	fails 2 "no arguments expected ('\''ps0'\'')" ps0 &&
	fails 2 "unrecognized option" --frobnicate
'

test_expect_success 'a pin directory that is not on bpffs: exit 2, and how to mount it' '
	mkdir notbpf &&
	fails 2 "$PWD/notbpf: not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)" \
		--pin-dir "$PWD/notbpf" &&
	one_line &&
	fails 2 "$PWD/notbpf: not on a bpf filesystem" --pin-dir "$PWD/notbpf" --all &&
	fails 2 "$PWD/notbpf: not on a bpf filesystem" --pin-dir "$PWD/notbpf" --slots &&
	AGG_PIN_DIR=$PWD/notbpf fails 2 "$PWD/notbpf: not on a bpf filesystem" --watch 1
'

test_expect_success ROOT 'no bpf filesystem mounted at all (a private mount namespace)' '
	unshare -m --propagation private sh -c "umount -l /sys/fs/bpf 2>/dev/null; umount -l /sys/fs/bpf 2>/dev/null;
		mountpoint -q /sys/fs/bpf && exit 9
		AGG_PIN_DIR= agg-stat --node ps0; echo \$? >rc" >out 2>err &&
	test "$(cat rc)" = 2 &&
	grep "^agg-stat: /sys/fs/bpf/agg: not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)$" err &&
	one_line
'

test_expect_success BPFFS 'nothing loaded: exit 2 and a message, for every mode' '
	fails 2 "no job is loaded under $PINS" &&
	one_line &&
	fails 2 "no job is loaded under $PINS" --all &&
	fails 2 "no job is loaded under $PINS" --slots &&
	fails 2 "no job is loaded under $PINS" --watch 1 --count 1 -j &&
	mkdir -p "$PINS" &&
	fails 2 "no job is loaded under $PINS" --all -j &&
	fails 2 "no job is loaded under $PINS" --node ps0
'

test_expect_success BPFFS 'an unknown job or node says which' '
	mkdir -p "$PINS/7/a" "$PINS/7/b" &&
	fails 2 "job 9 is not loaded (no $PINS/9)" --job 9 &&
	fails 2 "job 9 is not loaded (no $PINS/9)" --job 9 --all &&
	fails 2 "node zz of job 7 is not loaded (no $PINS/7/zz)" --job 7 --node zz &&
	one_line &&
	fails 2 "node zz of job 7 is not loaded" --node zz &&
	fails 2 "no node of job 7 is loaded for an address of this host (--node)" &&
	mkdir "$PINS/8" &&
	fails 2 "several jobs are loaded under $PINS: say which with --job" --node a &&
	fails 2 "job 8 has no node loaded under $PINS" --all --job 8
'

test_expect_success BPFFS 'a node directory without its plan (a load that did not finish)' '
	fails 2 "$PINS/7/a: no plan pinned (a load in progress or half done? run agg-load again)" \
		--job 7 --node a &&
	one_line &&
	fails 2 "$PINS/7/a: no plan pinned" --job 7 --all &&
	test $(wc -l <err) = 2 &&
	grep "^agg-stat: $PINS/7/b: no plan pinned" err
'

test_expect_success '--help and --version exit 0' '
	agg-stat --help >help &&
	grep -e "--watch=SEC" help && grep -e "--slots" help && grep "Exit status" help &&
	agg-stat --version | grep "^agg "
'

test_done
