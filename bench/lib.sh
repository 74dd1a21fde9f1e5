# SPDX-License-Identifier: GPL-2.0-only
# Sourced by the benchmarks: $B (the build), $tmp (removed on exit), now(),
# med FILE (the median of its numbers), cpu_busy (jiffies the machine was
# not idle; $hz a second), and AGG_SECRET_FILE for agg-plan's job tokens (unless already set).
set -eu
B=${AGG_BUILD:-$here/../build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${AGG_SECRET_FILE:-}" ]; then
	AGG_SECRET_FILE=$tmp/secret
	(umask 077 && head -c 32 /dev/urandom >"$AGG_SECRET_FILE")
	export AGG_SECRET_FILE
fi
now() { date +%s.%N; }
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
cpu_busy() {	# jiffies the machine spent not idle
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
}
hz=$(getconf CLK_TCK)

# bench_cluster NAME: what a benchmark on the virtual cluster needs: root
# (else it says NAME is skipped and exits 0), the tools and test tools on
# PATH, vcluster.sh, a pin directory of its own; all removed on exit.
bench_cluster() {
	AGG_SRC=$(cd "$here/.." && pwd)
	PATH=$B:$B/bench:$B/t:$PATH
	export AGG_BUILD=$B PATH
	if [ "$(id -u)" != 0 ]; then echo "$1: needs root (namespaces, XDP): skipped"; exit 0; fi
	. "$AGG_SRC/t/lib/vcluster.sh"
	export AGG_PIN_DIR=/sys/fs/bpf/aggbench-$$
	trap 'vcluster_down; rm -rf "$tmp" "$AGG_PIN_DIR"' EXIT
}

# bench_gloo NAME MASTER SIZE ITERS WORKER...: Gloo's allreduce
# (bench/gloo.py) of SIZE bytes among the workers, one rank a worker, the
# first one's address MASTER the rendezvous; sets gloo_t and gloo_c to the medians of rank 0's times
# and CPU-seconds, both empty (and NAME says why) when it failed.  Needs
# $gloo (python3-torch is there) and $PY.
bench_gloo() {
	bg_name=$1 bg_master=$2 bg_size=$3 bg_iters=$4 && shift 4
	gloo_t= gloo_c= bg_pids= bg_r=0 bg_n=$#
	for bg_w in "$@"; do
		vcluster_run $bg_w $PY "$here/gloo.py" $bg_r $bg_n $bg_master $bg_size $bg_iters \
			>"$tmp/gloo.$bg_r" 2>&1 &
		bg_pids="$bg_pids $!"; bg_r=$((bg_r + 1))
	done
	for bg_p in $bg_pids; do wait $bg_p || :; done
	if grep -qv '^[0-9.]* [0-9.]*$' "$tmp/gloo.0" || [ ! -s "$tmp/gloo.0" ]; then
		echo "$bg_name: gloo failed: $(head -3 "$tmp/gloo.0")"
		return 0
	fi
	cut -d' ' -f1 "$tmp/gloo.0" >"$tmp/gt"; cut -d' ' -f2 "$tmp/gloo.0" >"$tmp/gc"
	gloo_t=$(med "$tmp/gt"); gloo_c=$(med "$tmp/gc")
}
