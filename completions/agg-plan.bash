# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-plan(1)

_agg_plan()
{
	local cur prev words cword split
	_init_completion -s || return

	case $prev in
	-s | --scheme)
		COMPREPLY=($(compgen -W 'aleph rat ps' -- "$cur"))
		return
		;;
	--seed | --size | --job | --port | --segment | --slots | --token | \
	--bw-demand | --cpu-demand | --trees)
		return
		;;
	esac
	$split && return

	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W '--scheme --seed --size --job --port
			--segment --slots --token --bw-demand --cpu-demand --trees
			--eval --dot --json --pretty --quiet --verbose --help
			--usage --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
	fi
	_filedir
} &&
	complete -F _agg_plan agg-plan
