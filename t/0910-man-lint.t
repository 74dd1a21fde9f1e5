#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='man pages render without warnings'
. "$(dirname "$0")/lib/test-lib.sh"

command -v man >/dev/null || skip_all "no man (make deps installs man-db)"

for m in "$AGG_SRC"/man/*.[1-8]; do
	test_expect_success "${m##*/} renders cleanly" "
		MANWIDTH=80 man --warnings -E UTF-8 -l \"$m\" >out 2>err &&
		test -s out &&
		! test -s err || { cat err; return 1; }
	"
	test_expect_success "${m##*/} has the sections a user looks for" "
		for s in NAME SYNOPSIS DESCRIPTION \"SEE ALSO\"; do
			grep -q \"^\\.SH \$s\" \"$m\" || { echo \"no \$s\"; return 1; }
		done &&
		case \"$m\" in *.1)
			for s in OPTIONS \"EXIT STATUS\" EXAMPLES; do
				grep -q \"^\\.SH \$s\" \"$m\" || { echo \"no \$s\"; return 1; }
			done ;;
		esac
	"
done

test_done
