# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-stat(1)

_agg_stat()
{
	# shellcheck disable=SC2034	# words, cword: set by _init_completion
	local cur prev words cword split
	_init_completion -s || return
	local pins=${AGG_PIN_DIR:-/sys/fs/bpf/agg} job=* i

	# --pin-dir and --job given earlier on the line narrow what is offered
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--pin-dir) pins=${words[i + 1]} ;;
		--pin-dir=*) pins=${words[i]#*=} ;;
		--job) job=${words[i + 1]} ;;
		--job=*) job=${words[i]#*=} ;;
		esac
	done

	case $prev in
	--job)
		mapfile -t COMPREPLY < <(compgen -W "$(cd "$pins" 2>/dev/null &&
			ls -d -- [0-9]*/ 2>/dev/null | tr -d /)" -- "$cur")
		return
		;;
	--node)
		# shellcheck disable=SC2086	# $job: a job id or the glob *
		mapfile -t COMPREPLY < <(compgen -W "$(cd "$pins" 2>/dev/null &&
			ls -d -- $job/*/ 2>/dev/null | cut -d/ -f2 | sort -u)" -- "$cur")
		return
		;;
	--pin-dir)
		_filedir -d
		return
		;;
	--watch | --count | --range)
		return		# seconds, intervals, wire segments A-B
		;;
	esac
	$split && return

	mapfile -t COMPREPLY < <(compgen -W '--all --per-cpu --watch --count --slots --range
		--job --node --pin-dir --json --pretty --quiet --verbose --help --usage
		--version' -- "$cur")
} &&
	complete -F _agg_stat agg-stat
