# SPDX-License-Identifier: GPL-2.0-only
# Sourced by the benchmarks: $B (the build), $tmp (removed on exit), now().
set -eu
B=${AGG_BUILD:-$here/../build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
