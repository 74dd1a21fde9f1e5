# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-recv(1)

_agg_recv()
{
	# shellcheck disable=SC2034	# words, cword: set by _init_completion
	local cur prev words cword split
	_init_completion -s || return
	local pins=${AGG_PIN_DIR:-/sys/fs/bpf/agg}

	case $prev in
	--job)
		mapfile -t COMPREPLY < <(compgen -W "$(ls "$pins" 2>/dev/null)" -- "$cur")
		return
		;;
	--node)
		mapfile -t COMPREPLY < <(compgen -W "$(cd "$pins" 2>/dev/null &&
			ls -d -- */*/ 2>/dev/null | cut -d/ -f2 | sort -u)" -- "$cur")
		return
		;;
	--pin-dir)
		_filedir -d
		return
		;;
	--iter | --run | --timeout)
		return		# a number
		;;
	esac
	$split && return

	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W '--iter --run --timeout --in-place --sparse --text --job --node --pin-dir
			--json --pretty --quiet --verbose --help --usage --version' -- "$cur")
		return
	fi
	_filedir		# FILE: where the result goes
} &&
	complete -F _agg_recv agg-recv
