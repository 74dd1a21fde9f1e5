#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='make install and uninstall honour PREFIX and DESTDIR'
. "$(dirname "$0")/lib/test-lib.sh"

command -v make >/dev/null || skip_all "no make"

test_expect_success 'install into DESTDIR' '
	make -s -C "$AGG_SRC" install DESTDIR="$PWD/root" PREFIX=/usr/local >out 2>&1 &&
	test -x root/usr/local/bin/agg-plan &&
	test -f root/usr/local/share/man/man1/agg-plan.1 &&
	test -f root/usr/local/share/man/man5/agg-hosts.5 &&
	test -f root/usr/local/share/man/man5/agg-plan.5 &&
	test -f root/usr/local/share/bash-completion/completions/agg-plan
'

test_expect_success 'every built tool, man page and completion is installed' '
	for t in "$AGG_BUILD"/agg-*; do
		case $t in *.o|*.d) continue ;; esac
		n=${t##*/}
		test -x root/usr/local/bin/$n || { echo "missing bin/$n"; exit 1; }
	done &&
	for m in "$AGG_SRC"/man/*.[1-8]; do
		s=${m##*.}
		test -f root/usr/local/share/man/man$s/${m##*/} ||
			{ echo "missing man $m"; exit 1; }
	done
'

test_expect_success 'the installed tool runs' '
	root/usr/local/bin/agg-plan --version >v &&
	grep "^agg " v
'

test_expect_success 'uninstall removes what install put there' '
	make -s -C "$AGG_SRC" uninstall DESTDIR="$PWD/root" PREFIX=/usr/local >out 2>&1 &&
	test -z "$(find root -type f)"
'

test_done
