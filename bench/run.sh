#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# make bench: every benchmark, each reporting against a baseline measured
# in the same run (these machines have 2 shared cores and are noisy).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for b in "$here"/plan.sh "$here"/hot.sh "$here"/quant.sh "$here"/dp.sh "$here"/shaped.sh "$here"/incast.sh "$here"/streams.sh "$here"/inproc.sh "$here"/sparse.sh "$here"/model.sh "$here"/train.sh; do
	[ -f "$b" ] || continue
	echo "== $(basename "$b" .sh)"
	sh "$b" || rc=1
	echo
done
exit $rc
