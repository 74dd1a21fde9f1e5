# SPDX-License-Identifier: GPL-2.0-only
# bash completion for agg-hot(1)

_agg_hot()
{
	local cur prev words cword split
	_init_completion -s || return

	case $prev in
	--sample | --online | --tau | --coverage | --budget | --stripes | \
	--seed | --pairs | --ids | --iters | --batch | --per-example | \
	--zipf | --drift | --width | --touch | --worker | --iter)
		return
		;;
	esac
	$split && return

	# The command is the first word that is neither an option nor its value.
	local cmd= i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--sample | --online | --tau | --coverage | --budget | --stripes | \
		--seed | --pairs | --ids | --iters | --batch | --per-example | \
		--zipf | --drift | --width | --touch | --worker | --iter)
			((i++))
			;;
		-*) ;;
		*)
			cmd=${words[i]}
			break
			;;
		esac
	done
	case $cmd in
	pack | compare | gen) ;;
	*) cmd=identify ;;
	esac

	if [[ $cur == -* ]]; then
		case $cmd in
		pack)
			COMPREPLY=($(compgen -W '--pairs --binary --seed --json --pretty
				--quiet --verbose --help --usage --version' -- "$cur"))
			;;
		compare)
			COMPREPLY=($(compgen -W '--json --pretty --quiet --verbose --help
				--usage --version' -- "$cur"))
			;;
		gen)
			COMPREPLY=($(compgen -W '--ids --iters --batch --per-example --zipf
				--drift --sparse --width --touch --worker --iter --binary --seed
				--json --pretty --quiet --verbose --help --usage --version' -- "$cur"))
			;;
		*)
			COMPREPLY=($(compgen -W '--sample --online --tau --window --sketch
				--coverage --budget --stripes --binary --seed --json --pretty
				--quiet --verbose --help --usage --version' -- "$cur"))
			;;
		esac
		return
	fi
	if [[ $cmd == identify ]] && ((i >= cword)); then
		COMPREPLY=($(compgen -W 'pack compare gen' -- "$cur"))
	fi
	[[ $cmd == gen ]] || _filedir
} &&
	complete -F _agg_hot agg-hot
