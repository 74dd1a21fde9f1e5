#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Number conversion (lib/ops/quant.c) on a 100 MB gradient, against the scalar
# code it replaced, in the same run: see bench/quant.c.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
"$B/bench/quant" "${BENCH_QUANT_VALUES:-25000000}" 2048 "${BENCH_QUANT_REPS:-5}"
