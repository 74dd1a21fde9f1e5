# SPDX-License-Identifier: GPL-2.0-only
# Shell test library for agg, after git's t/test-lib.sh.
#
#   test_description='what this file tests'
#   . "$(dirname "$0")/lib/test-lib.sh"
#   test_expect_success [PREREQ,...] 'title' 'commands'
#   test_done
#
# Each test file runs in its own trash directory (removed on success,
# kept with --debug or AGG_TEST_KEEP=1).  The tools from $AGG_BUILD
# (default ./build) come first on PATH; AGG_SECRET_FILE names the test
# suite's fixed secret in the trash directory.

TEST_DIRECTORY=$(cd "$(dirname "$0")" && pwd)
AGG_SRC=$(cd "$TEST_DIRECTORY/.." && pwd)
AGG_BUILD=${AGG_BUILD:-$AGG_SRC/build}
PATH=$AGG_BUILD:$PATH
export PATH AGG_BUILD AGG_SRC TEST_DIRECTORY
LC_ALL=C
export LC_ALL

test_count=0
test_failures=0
test_skipped=0
test_cleanup=:
test_name=$(basename "$0" .t)
test_verbose=${AGG_TEST_VERBOSE:-}

for arg; do
	case $arg in
	-v|--verbose) test_verbose=1 ;;
	-d|--debug) AGG_TEST_KEEP=1 ;;
	esac
done

TRASH_DIRECTORY=${AGG_TEST_TMP:-${TMPDIR:-/tmp}}/agg-trash.$test_name.$$
rm -rf "$TRASH_DIRECTORY"
mkdir -p "$TRASH_DIRECTORY" || { echo "Bail out! cannot make $TRASH_DIRECTORY"; exit 1; }
cd "$TRASH_DIRECTORY" || exit 1

# agg-plan derives a plan's default token from a secret (agg-plan(1)): the
# tests use a fixed one of their own, so plans and tokens are the same in
# every run and on every host, whatever /etc/agg/secret holds.
AGG_SECRET_FILE=$PWD/.agg-secret
(umask 077 && printf 'agg test suite secret: not a secret' >"$AGG_SECRET_FILE") ||
	{ echo "Bail out! cannot write $AGG_SECRET_FILE"; exit 1; }
export AGG_SECRET_FILE

# Exit hooks registered by test helpers (vcluster teardown and the like).
test_atexit_cmds=
test_atexit() {
	test_atexit_cmds="$*
$test_atexit_cmds"
}
test_run_atexit_() {
	test_watchdog_stop_
	eval "$test_atexit_cmds" >/dev/null 2>&1
	test_atexit_cmds=
}

# ---- the time bound -------------------------------------------------------
# Every test file runs within a time bound: test_timeout seconds (default
# 600; a file that needs another sets test_timeout=N before it sources this
# file), or AGG_TEST_TIMEOUT for every file.  Past it, a watchdog names
# the test that was running and what it last printed, stops every process
# the file started (TERM, then KILL up to 30 s later, once the file's exit
# hooks have torn down its namespaces and pins), and the file fails.  The
# bound is a cap on a hang, not a measurement: tests wait for conditions,
# never for times.  The watchdog is no child of the file's shell, so a
# test's bare "wait" does not wait for it.
test_timeout_=${AGG_TEST_TIMEOUT:-${test_timeout:-600}}
test_pid_=$$

# The processes below PID (one ps read).
test_descendants_() {
	ps -e -o pid= -o ppid= | awk -v root="$1" '
		{ parent[$1] = $2 }
		END {
			n = 0; list[n++] = root
			for (i = 0; i < n; i++)
				for (p in parent)
					if (parent[p] == list[i]) list[n++] = p
			for (i = 1; i < n; i++) print list[i]
		}'
}

# The test file's shell is running (not gone, not a zombie: prove reaps
# it only once its output closes, which the watchdog holds open).
test_alive_() {
	read -r wa_pid wa_comm wa_state wa_rest 2>/dev/null </proc/"$test_pid_"/stat &&
		[ "$wa_state" != Z ]
}

test_watchdog_fire_() {
	trap '' TERM	# the file's exit hooks stop the watchdog: not now
	wd_step="before the first test"
	[ -s "$TRASH_DIRECTORY/.step" ] && wd_step=$(cat "$TRASH_DIRECTORY/.step")
	{
		echo "# $test_name: TIMEOUT after ${test_timeout_} s (test_timeout), in $wd_step; stopping it"
		[ -s "$TRASH_DIRECTORY/.out" ] &&
			tail -n 20 "$TRASH_DIRECTORY/.out" | sed "s/^/# $test_name: /"
	} >&2
	echo "not ok - $test_name timed out after ${test_timeout_} s in $wd_step"
	wd_pids=$(test_descendants_ "$test_pid_")
	kill -TERM $wd_pids "$test_pid_" 2>/dev/null
	wd_i=0
	while [ $wd_i -lt 300 ] && test_alive_; do
		sleep 0.1; wd_i=$((wd_i + 1))
	done
	kill -KILL $wd_pids $(test_descendants_ "$test_pid_") "$test_pid_" 2>/dev/null
}

# Polls once a second, so it ends soon after the file does, even when
# the file was killed without its exit hooks.
test_watchdog_() {
	read -r wd_self wd_rest </proc/self/stat
	echo "$wd_self" >"$TRASH_DIRECTORY/.watchdog"
	wd_left=$test_timeout_
	while test_alive_; do
		if [ "$wd_left" -le 0 ]; then
			test_watchdog_fire_
			return
		fi
		sleep 1 >/dev/null 2>&1	# holds no pipe prove reads
		wd_left=$((wd_left - 1))
	done
}

test_watchdog_stop_() {
	[ -s "$TRASH_DIRECTORY/.watchdog" ] || return 0
	kill "$(cat "$TRASH_DIRECTORY/.watchdog")" 2>/dev/null
	rm -f "$TRASH_DIRECTORY/.watchdog"
}

case $test_timeout_ in
''|*[!0-9]*|0) echo "Bail out! test_timeout '$test_timeout_': a whole number of seconds"; exit 1 ;;
esac
(test_watchdog_ &)

trap 'test_run_atexit_' EXIT
trap 'test_run_atexit_; exit 130' INT TERM HUP

say() { echo "# $*"; }

skip_all() {
	echo "1..0 # SKIP $*"
	test_run_atexit_
	cd / && rm -rf "$TRASH_DIRECTORY"
	exit 0
}

# ---- prerequisites (lazy: evaluated on first use) -------------------------
test_lazy_prereq_ROOT='test "$(id -u)" = 0'
test_lazy_prereq_BPFFS='test_have_prereq ROOT &&
	{ mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf; } 2>/dev/null'
test_lazy_prereq_BPF='test_have_prereq BPFFS && command -v bpftool >/dev/null &&
	bpftool prog show >/dev/null 2>&1'
test_lazy_prereq_NETNS='test_have_prereq ROOT && command -v ip >/dev/null &&
	ip netns add agg-probe-$$ 2>/dev/null && ip netns del agg-probe-$$'
test_lazy_prereq_JQ='command -v jq >/dev/null'
test_lazy_prereq_MAN='command -v man >/dev/null'

test_have_prereq() {
	for p in $(echo "$1" | tr , ' '); do
		case $p in !*) neg=1; p=${p#!} ;; *) neg= ;; esac
		eval "cached=\${test_prereq_cache_$p-}"
		if [ -z "$cached" ]; then
			eval "code=\${test_lazy_prereq_$p-}"
			if [ -z "$code" ]; then
				echo "Bail out! unknown prerequisite $p"; exit 1
			fi
			if (eval "$code") >/dev/null 2>&1; then cached=yes; else cached=no; fi
			eval "test_prereq_cache_$p=$cached"
		fi
		if [ -n "$neg" ]; then
			[ "$cached" = no ] || return 1
		else
			[ "$cached" = yes ] || return 1
		fi
	done
	return 0
}

# Skip the whole file unless PREREQ holds.
test_require() {
	test_have_prereq "$1" || skip_all "missing $1${2:+ ($2)}"
}

# ---- running tests -------------------------------------------------------
# A test body runs in this shell (so helpers like vcluster_up keep their
# state for later tests): chain its commands with && and leave loops with
# "return 1", never "exit".
test_when_finished() {
	test_cleanup="{ $*
} && (exit \"\$eval_ret\"); eval_ret=\$?; $test_cleanup"
}

test_eval_inner_() {
	eval "$1"	# a "return" in the body returns from here
}

test_run_() {
	test_cleanup=:
	if [ -n "$test_verbose" ]; then
		test_eval_inner_ "$1"
	else
		test_eval_inner_ "$1" >"$TRASH_DIRECTORY/.out" 2>&1
	fi
	eval_ret=$?
	eval "$test_cleanup"
	return $eval_ret
}

test_expect_success() {
	prereq=
	if [ $# = 3 ]; then prereq=$1; shift; fi
	test_count=$((test_count + 1))
	if [ -n "$prereq" ] && ! test_have_prereq "$prereq"; then
		test_skipped=$((test_skipped + 1))
		echo "ok $test_count # skip $1 (missing $prereq)"
		return 0
	fi
	echo "test $test_count '$1'" >"$TRASH_DIRECTORY/.step"
	if test_run_ "$2"; then
		echo "ok $test_count - $1"
	else
		test_failures=$((test_failures + 1))
		echo "not ok $test_count - $1"
		echo "$2" | sed 's/^/#	/'
		if [ -z "$test_verbose" ] && [ -s "$TRASH_DIRECTORY/.out" ]; then
			# on stderr too, which prove shows (CI's log), and kept
			cp "$TRASH_DIRECTORY/.out" "$TRASH_DIRECTORY/.out.$test_count"
			{ echo "# $test_name $test_count, output:"
			  tail -n 40 "$TRASH_DIRECTORY/.out" | sed 's/^/#	/'; } | tee /dev/stderr
		fi
	fi
}

# test_must_fail CMD: CMD must exit non-zero and not by a signal.
test_must_fail() {
	"$@"
	code=$?
	if [ $code = 0 ]; then
		echo >&2 "test_must_fail: command succeeded: $*"; return 1
	elif [ $code -gt 128 ] && [ $code -le 192 ]; then
		echo >&2 "test_must_fail: died by signal $((code - 128)): $*"; return 1
	fi
	return 0
}

# test_expect_code N CMD: CMD must exit exactly N.
test_expect_code() {
	want=$1; shift
	"$@"
	code=$?
	if [ $code != "$want" ]; then
		echo >&2 "test_expect_code: want exit $want, got $code: $*"
		return 1
	fi
	return 0
}

test_cmp() {
	diff -u "$1" "$2"
}

# test_grep PATTERN FILE (with a helpful failure message)
test_grep() {
	if ! grep -q -E -- "$1" "$2"; then
		echo >&2 "test_grep: no '$1' in $2:"; cat >&2 "$2"; return 1
	fi
}

test_done() {
	echo "1..$test_count"
	test_run_atexit_
	cd /
	if [ $test_failures = 0 ] && [ -z "${AGG_TEST_KEEP:-}" ]; then
		rm -rf "$TRASH_DIRECTORY"
	elif [ $test_failures != 0 ]; then
		echo "# $test_failures of $test_count failed; trash kept in $TRASH_DIRECTORY"
	fi
	[ $test_failures = 0 ]
	exit $?
}
