#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='man pages render without warnings and have their sections'
. "$(dirname "$0")/lib/test-lib.sh"

test_require MAN "make deps installs man-db"

pages=$(ls "$AGG_SRC"/man/*.[1-8] 2>/dev/null)
test -n "$pages" || skip_all "no man pages in $AGG_SRC/man"

# groff's warnings, at the terminal's default width and at 80 columns.
lint() {
	man --warnings -E UTF-8 -l "$1" >out 2>err &&
	MANWIDTH=80 man --warnings -E UTF-8 -l "$1" >out80 2>>err &&
	test -s out &&
	{ ! test -s err || { cat err; return 1; }; }
}

# has_sections PAGE SECTION...: every ".SH SECTION" is there.
has_sections() {
	page=$1; shift
	for s; do
		grep -qxE "\.SH \"?$s\"?" "$page" || { echo "no .SH $s"; return 1; }
	done
}

for m in $pages; do
	n=${m##*/}
	title=$(echo "${n%.*}" | tr a-z A-Z)
	sect=${n##*.}
	test_expect_success "$n renders without warnings" "lint '$m'"
	test_expect_success "$n: .TH names the page and its section" "
		grep -q '^\.TH $title $sect ' '$m' ||
			{ grep '^\.TH' '$m'; echo 'want: .TH $title $sect ...'; return 1; }
	"
	test_expect_success "$n has the sections a user looks for" "
		has_sections '$m' NAME SYNOPSIS DESCRIPTION 'SEE ALSO' &&
		case '$n' in
		*.1) has_sections '$m' OPTIONS 'EXIT STATUS' EXAMPLES ;;
		esac
	"
done

test_done
