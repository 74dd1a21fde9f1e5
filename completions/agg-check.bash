# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-check(1)

_agg_check()
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
	--pcap)
		_filedir 'pcap?(ng)'
		return
		;;
	--plan)
		_filedir
		return
		;;
	--op)
		mapfile -t COMPREPLY < <(compgen -W "sum max min" -- "$cur")
		return
		;;
	--iter | --run | --timeout | --port)
		return		# a number
		;;
	esac
	$split && return

	# The command is the first word that is neither an option nor its value.
	local cmd= i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--job | --node | --pin-dir | --pcap | --plan | --op | --iter | --run | \
		--timeout | --port)
			((i++))
			;;
		-*) ;;
		*)
			cmd=${words[i]}
			break
			;;
		esac
	done

	if [[ $cur == -* ]]; then
		if [[ $cmd == plan ]]; then
			mapfile -t COMPREPLY < <(compgen -W '--json --pretty --quiet --verbose
				--help --usage --version' -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W '--iter --run --request --timeout --op
				--pcap --port --plan --job --node --pin-dir --json --pretty
				--quiet --verbose --help --usage --version' -- "$cur")
		fi
		return
	fi
	if [[ $cmd == plan ]]; then
		_filedir		# FILE: the plan
	elif [[ -z $cmd ]]; then
		mapfile -t COMPREPLY < <(compgen -W "plan" -- "$cur")
	fi
} &&
	complete -F _agg_check agg-check
