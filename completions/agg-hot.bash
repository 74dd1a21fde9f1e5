# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-hot(1)

_agg_hot()
{
	local cur prev words cword split
	_init_completion -s || return

	case $prev in
	--sample | --online | --tau | --sketch | --coverage | --budget | \
	--stripes | --seed | --pairs | --ids | --iters | --batch | \
	--per-example | --zipf)
		return
		;;
	esac
	$split && return

	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W '--binary --sample --online --tau --sketch
			--coverage --budget --stripes --seed --pairs --ids --iters
			--batch --per-example --zipf --json --pretty --quiet --verbose
			--help --usage --version' -- "$cur"))
		[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
		return
	fi
	if ((cword == 1)); then
		COMPREPLY=($(compgen -W 'pack compare gen' -- "$cur"))
	fi
	_filedir
} &&
	complete -F _agg_hot agg-hot
