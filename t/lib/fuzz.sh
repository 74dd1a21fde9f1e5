# SPDX-License-Identifier: GPL-2.0-only
# Helpers of the data-plane robustness tests (t/0430, t/0440), on top of
# vcluster.sh and dp.sh.
#
#   fz_quiet                 IPv6 off in every namespace of the cluster (the
#                            bridge's too): no router solicitation or MLD
#                            report reaches a program while a test counts;
#                            and the bridge forwards frames as a switch
#                            does, without br_netfilter's IPv4 checks
#                            (they drop a frame shorter than its IP length)
#   fz_hosts                 the hosts file of both tests: ps0 and four
#                            workers, of which M-WCHA makes a (bw=30) the
#                            aggregator of two
#   fz_get FILE NAME         the value of NAME in a "name value" file
#   fz_delta OLD NEW NAME    how much counter NAME grew from OLD to NEW
#   fz_diff OLD NEW          "name delta" of every counter that changed
#   fz_outcomes OLD NEW      the growth of the outcome counters together:
#                            added ... probes, error and every drop_*
#   fz_only OLD NEW NAME...  NAMEs may have changed, no other counter but
#                            "other" (ARP, traffic of no job) did

fz_quiet() {
	for fz_h in $(vcluster_hosts); do
		vcluster_run "$fz_h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
			net.ipv6.conf.default.disable_ipv6=1 || return 1
	done
	fz_br=/var/run/netns/$(vcluster_brns)
	nsenter --net="$fz_br" sysctl -qw \
		net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || return 1
	if nsenter --net="$fz_br" test -e /proc/sys/net/bridge/bridge-nf-call-iptables; then
		nsenter --net="$fz_br" sysctl -qw net.bridge.bridge-nf-call-iptables=0
	fi
}

fz_hosts() {
	cat <<-'EOF_HOSTS'
	ps0 10.90.0.100 bw=40 role=ps
	a   10.90.0.1   bw=30
	c1  10.90.0.4   bw=10
	c2  10.90.0.5   bw=10
	c3  10.90.0.6   bw=10
	EOF_HOSTS
}

fz_get() {
	awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' "$1" ||
		{ echo "fz_get: no $2 in $1" >&2; return 1; }
}

fz_delta() {
	fz_a=$(fz_get "$1" "$3") && fz_b=$(fz_get "$2" "$3") && echo $((fz_b - fz_a))
}

# agg-stat's text: "name value" lines, and "# heading" lines to skip
fz_diff() {
	awk '/^#/ { next } NR == FNR { old[$1] = $2; next } $2 != old[$1] { print $1, $2 - old[$1] }' "$1" "$2"
}

# the outcome counters: every rx packet gets exactly one (bpf/agg.h)
fz_outcomes() {
	awk '/^#/ { next } NR == FNR { old[$1] = $2; next }
	     $1 ~ /^(added|stored|relayed|served|pending|probes|error|drop_.*)$/ { sum += $2 - old[$1] }
	     END { print sum }' "$1" "$2"
}

fz_only() {
	fz_old=$1 fz_new=$2
	shift 2
	fz_diff "$fz_old" "$fz_new" | {
		while read -r fz_k fz_d; do
			case " other $* " in
			*" $fz_k "*) ;;
			*) echo "fz_only: $fz_k changed by $fz_d" >&2; exit 1 ;;
			esac
		done
	}
}
