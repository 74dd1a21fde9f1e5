#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='lib/ layers: each tool links only the system libraries its layers need'
. "$(dirname "$0")/lib/test-lib.sh"

command -v ldd >/dev/null || skip_all "no ldd"

# needs BINARY: the shared libraries BINARY loads, by name
needs() {
	ldd "$AGG_BUILD/$1" | awk "{ print \$1 }" | sed "s/\.so.*//"
}

test_expect_success 'agg-plan and agg-hot (plan, hot, util) need neither libbpf nor libpcap' '
	for t in agg-plan agg-hot; do
		needs $t >libs.$t &&
		cat libs.$t &&
		! grep -E "^lib(bpf|pcap|elf|numa)$" libs.$t || return 1
	done
'

test_expect_success 'the data-plane tools need libbpf; only agg-check libpcap' '
	for t in agg-load agg-send agg-recv agg-stat agg-check; do
		needs $t >libs.$t && grep -q "^libbpf$" libs.$t || return 1
	done &&
	grep -q "^libpcap$" libs.agg-check &&
	! grep -l "^libpcap$" libs.agg-load libs.agg-send libs.agg-recv libs.agg-stat
'

test_expect_success 'libagg.so needs libbpf, not libpcap' '
	needs libagg.so.1 >libs.so &&
	grep -q "^libbpf$" libs.so &&
	! grep -q "^libpcap$" libs.so
'

test_expect_success 'each layer archive holds only its own folder' '
	for l in util plan ops hot tune dp; do
		ar t "$AGG_BUILD/libagg-$l.a" | sed "s/\.o$//" | sort >in.$l &&
		ls "$AGG_SRC/lib/$l/"*.c | sed "s|.*/||; s/\.c$//" | sort >src.$l &&
		test_cmp src.$l in.$l || return 1
	done
'

test_done
