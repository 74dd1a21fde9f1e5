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

test_done
