#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# t/0430's fuzzing on a plan whose slots are cut into 3 chunks (segment
# 2050: 684 + 684 + 682 values), so a packet that fails or disagrees in a
# later chunk meets every path; pktfuzz state checks the chunks of every
# slot agree.  Fewer packets: each one is 8 KiB.
FZ_SEGMENT=2050
VCLUSTER_MTU=9000
AGG_FUZZ_COUNT=${AGG_FUZZ_COUNT:-100000}	# make soak: 1000000
export FZ_SEGMENT VCLUSTER_MTU AGG_FUZZ_COUNT
exec sh "$(dirname "$0")/0430-dp-fuzz.t" "$@"
