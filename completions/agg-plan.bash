# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-plan(1)

_agg_plan()
{
	# shellcheck disable=SC2034	# words, cword: set by _init_completion
	local cur prev words cword split
	_init_completion -s || return

	case $prev in
	-s | --scheme)
		mapfile -t COMPREPLY < <(compgen -W 'aleph rat ps' -- "$cur")
		return
		;;
	--seed | --size | --job | --port | --segment | --slots | --token | \
	--bw-demand | --cpu-demand | --trees)
		return		# a number: nothing to offer
		;;
	--secret)
		_filedir
		return
		;;
	esac
	$split && return

	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W '--scheme --seed --size --job
			--port --segment --slots --token --secret --bw-demand --cpu-demand
			--trees --eval --dot --json --pretty --quiet --verbose --help
			--usage --version' -- "$cur")
		return
	fi
	_filedir		# HOSTS
} &&
	complete -F _agg_plan agg-plan
