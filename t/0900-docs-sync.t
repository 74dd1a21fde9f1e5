#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='--help, the man page and the completion name the same options'
. "$(dirname "$0")/lib/test-lib.sh"

# Every tool built, so a new tool is covered the day it is built.
tools=$(for t in "$AGG_BUILD"/agg-*; do
	case $t in *.o|*.d) continue ;; esac
	test -f "$t" && test -x "$t" && echo "${t##*/}"
done)
test -n "$tools" || skip_all "no tools built in $AGG_BUILD"

# The long options of --help: argp's option lines only (indented at most
# 8 columns and starting with a dash), not the examples in the doc text.
help_opts() {
	"$AGG_BUILD/$1" --help >help.raw || return 1
	grep -E '^ {1,8}-' help.raw | sed -E 's/^ +//; s/  .*//' |
		grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# The long options the man page documents: the tags of .TP/.TQ/.IP entries
# in its OPTIONS section (an option mentioned only in running text does
# not count as documented).
man_opts() {
	sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$AGG_SRC/man/$1.1" |
		awk '/^\.(TP|TQ)/ { tag = 1; next }
		     /^\.IP/ { print; next }
		     tag { print; tag = 0 }' |
		sed 's/\\-/-/g; s/\\f[BIRP]//g' |
		grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# The long options the completion offers, asked of the completion itself
# as bash runs it: "TOOL --<TAB>", and "TOOL SUB --<TAB>" for every
# subcommand word it offers first.  bash-completion's _init_completion
# when installed, a minimal stand-in otherwise.
comp_words() {	# comp_words TOOL WORD...: completions of the last word
	mkdir -p empty &&
	(cd empty && bash -c '
		if [ -f /usr/share/bash-completion/bash_completion ]; then
			. /usr/share/bash-completion/bash_completion
		else
			_init_completion() {
				cur=${COMP_WORDS[COMP_CWORD]}
				prev=${COMP_WORDS[COMP_CWORD-1]}
				words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; split=false
			}
			_filedir() { :; }
		fi
		. "$1" || exit 1
		shift
		fn=$(complete -p "$1" 2>/dev/null | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
		test -n "$fn" || { echo >&2 "no completion function for $1"; exit 1; }
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
		"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
		printf "%s\n" "${COMPREPLY[@]}"
	' _ "$AGG_SRC/completions/$1.bash" "$@")
}
comp_opts() {
	{
		comp_words "$1" -- || return 1
		for sub in $(comp_words "$1" ""); do
			case $sub in -*) ;; *) comp_words "$1" "$sub" -- ;; esac
		done
	} | sed 's/=$//' | grep -E -- '^--[a-z]' | sort -u
}

for t in $tools; do
	test_expect_success "$t has a man page and a completion" "
		test -f \"\$AGG_SRC/man/$t.1\" ||
			{ echo \"missing man/$t.1\"; return 1; }
		test -f \"\$AGG_SRC/completions/$t.bash\" ||
			{ echo \"missing completions/$t.bash\"; return 1; }
	"
	test_expect_success "$t: man/$t.1 documents exactly the options of --help" "
		help_opts $t >help &&
		test -s help &&
		man_opts $t >man &&
		{ test_cmp help man ||
		  { echo '# - only in --help, + only in man/$t.1'; return 1; }; }
	"
	test_expect_success "$t: completions/$t.bash offers exactly the options of --help" "
		help_opts $t >help &&
		test -s help &&
		comp_opts $t >comp &&
		{ test_cmp help comp ||
		  { echo '# - only in --help, + only in completions/$t.bash'; return 1; }; }
	"
done

test_expect_success 'every section 1 man page and completion belongs to a tool' '
	for f in "$AGG_SRC"/man/agg-*.1 "$AGG_SRC"/completions/agg-*.bash; do
		test -e "$f" || continue
		n=${f##*/}; n=${n%.1}; n=${n%.bash}
		test -e "$AGG_SRC/cmd/$n.c" || test -d "$AGG_SRC/cmd/$n" ||
			{ echo "$f: no cmd/$n.c"; return 1; }
	done
'

test_done
