#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='--help, the man page and the completion name the same options'
. "$(dirname "$0")/lib/test-lib.sh"

tools=$(for t in "$AGG_BUILD"/agg-*; do
	case $t in *.o|*.d) ;; *) [ -x "$t" ] && echo "${t##*/}" ;; esac
done)
[ -n "$tools" ] || skip_all "no tools built in $AGG_BUILD"

help_opts() {
	"$AGG_BUILD/$1" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
man_opts() {	# the long options in the OPTIONS section
	sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$AGG_SRC/man/$1.1" |
		sed 's/\\-/-/g' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
comp_opts() {	# the options offered: compgen -W word lists starting with --
	awk '/compgen -W \x27/ { on = 1 } on { print } on && /\x27 --/ { on = 0 }' \
		"$AGG_SRC/completions/$1.bash" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

for t in $tools; do
	test_expect_success "$t has a man page and a completion" "
		test -f \"\$AGG_SRC/man/$t.1\" &&
		test -f \"\$AGG_SRC/completions/$t.bash\"
	"
	test_expect_success "$t: the man page names every option of --help, no more" "
		help_opts $t >help &&
		man_opts $t >man &&
		test -s help &&
		test_cmp help man
	"
	test_expect_success "$t: the completion names every option of --help, no more" "
		help_opts $t >help &&
		comp_opts $t >comp &&
		test_cmp help comp
	"
done

test_expect_success 'every man page of a tool belongs to a built tool' '
	for m in "$AGG_SRC"/man/agg-*.1; do
		n=${m##*/}; n=${n%.1}
		echo "$tools" | grep -qx "$n" || { echo "no tool for $m"; return 1; }
	done
'

test_done
