#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the test library itself: the helpers a test relies on'
. "$(dirname "$0")/lib/test-lib.sh"

test_expect_success 'test_must_fail accepts a failing command' '
	test_must_fail false
'

test_expect_success 'test_must_fail rejects a succeeding command' '
	! test_must_fail true 2>err &&
	grep "command succeeded" err
'

test_expect_success 'test_must_fail rejects death by a signal' '
	! test_must_fail sh -c "kill -TERM \$\$" 2>err &&
	grep "signal" err
'

test_expect_success 'test_expect_code checks the exact status' '
	test_expect_code 2 sh -c "exit 2" &&
	! test_expect_code 2 sh -c "exit 1" 2>/dev/null
'

test_expect_success 'test_when_finished runs its cleanup' '
	test_when_finished "rm -f cleanup-marker" &&
	touch cleanup-marker
'

test_expect_success 'the cleanup ran after the previous test' '
	! test -e cleanup-marker
'

test_expect_success 'a failing test body is reported as not ok' '
	cat >inner.t <<-\INNER &&
	#!/bin/sh
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	test_expect_success "fails" "false"
	test_done
	INNER
	! AGG_TEST_TMP=$PWD sh inner.t >out &&
	grep "^not ok 1 - fails" out &&
	grep "^1\.\.1" out
'

test_expect_success 'a missing prerequisite skips with a TAP skip' '
	cat >inner.t <<-\INNER &&
	#!/bin/sh
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	test_lazy_prereq_NEVER=false
	test_expect_success NEVER "never runs" "false"
	test_done
	INNER
	AGG_TEST_TMP=$PWD sh inner.t >out &&
	grep "^ok 1 # skip never runs (missing NEVER)" out
'

test_expect_success 'return 1 fails a test and still runs its cleanup' '
	cat >inner.t <<-\INNER &&
	#!/bin/sh
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	test_expect_success "returns" "test_when_finished \"touch cleaned\"; for i in 1; do return 1; done"
	test_done
	INNER
	! AGG_TEST_TMP=$PWD sh inner.t >out &&
	grep "^not ok 1 - returns" out &&
	test -e "$(sed -n "s/.*trash kept in //p" out)/cleaned"
'

test_expect_success 'lazy prerequisites are evaluated once' '
	test_lazy_prereq_COUNTED="echo x >>count; true" &&
	test_have_prereq COUNTED && test_have_prereq COUNTED &&
	test "$(wc -l <count)" = 1
'

test_expect_success 'a hung test file is stopped at its time bound, naming the test, and cleans up' '
	cat >inner.t <<-\INNER &&
	#!/bin/sh
	test_timeout=2
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	test_atexit "touch \"$TEST_DIRECTORY_OUT/hook-ran\""
	test_expect_success "waits for its own jobs" "sleep 0.1 & wait"
	test_expect_success "hangs here" "echo last words; sleep 300 & echo \$! >\"$TEST_DIRECTORY_OUT/pid\"; wait \$!; sleep 300"
	test_expect_success "never reached" "true"
	test_done
	INNER
	start=$(date +%s) &&
	{ TEST_DIRECTORY_OUT=$PWD AGG_TEST_TMP=$PWD sh inner.t >out 2>err; echo $? >rc; } &&
	cat out err &&
	# stopped by TERM: the exit hooks ran, then the status of an interrupt
	test "$(cat rc)" = 130 &&
	# a bare wait in a test body does not wait for the watchdog
	grep "^ok 1 - waits for its own jobs" out &&
	grep "^not ok - inner timed out after 2 s in test 2 .hangs here." out &&
	grep "TIMEOUT after 2 s (test_timeout), in test 2 .hangs here." err &&
	grep "inner: last words" err &&
	! grep "never reached" out &&
	test -e hook-ran &&
	! kill -0 "$(cat pid)" 2>/dev/null &&
	# not the 300 s of the sleeps
	test $(($(date +%s) - start)) -lt 200
'

test_expect_success 'AGG_TEST_TIMEOUT bounds every file; a bad bound bails out' '
	cat >inner.t <<-\INNER &&
	#!/bin/sh
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	test_expect_success "hangs" "sleep 300"
	test_done
	INNER
	! AGG_TEST_TIMEOUT=1 AGG_TEST_TMP=$PWD sh inner.t >out 2>&1 &&
	grep "timed out after 1 s in test 1 .hangs." out &&
	AGG_TEST_TIMEOUT=soon AGG_TEST_TMP=$PWD test_must_fail sh inner.t >out 2>&1 &&
	grep "^Bail out! test_timeout .soon.: a whole number of seconds" out
'

test_done
