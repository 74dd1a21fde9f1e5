#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='every packet to the job ports P..P+3 goes through the XDP checks: IP options, fragments, the sparse ports'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/dp.sh"
. "$TEST_DIRECTORY/lib/fuzz.sh"

test_require ROOT,NETNS,BPF "XDP on namespaces needs root and bpffs"
command -v jq >/dev/null || skip_all "no jq (make deps installs it)"

# ps0 is the root of the plan's only tree, so the sparse root; x shares the
# bridge, is not in the plan and knows it (a leaked copy).
cat >hosts.txt <<'EOF_HOSTS'
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10
w1  10.90.0.2   bw=10
x   10.90.0.66  bw=10
EOF_HOSTS
K=20		# packets of each kind

# snmp HOST PROTO FIELD: the kernel's counter (/proc/net/snmp) in HOST
snmp() {
	vcluster_run "$1" cat /proc/net/snmp |
		awk -v p="$2:" -v f="$3" '$1 == p { if (!h) { for (i = 2; i <= NF; i++) if ($i == f) c = i; h = 1 } else print $c }'
}

# udp_seen HOST: datagrams HOST's UDP layer took, to a socket or not
udp_seen() {
	echo $(( $(snmp "$1" Udp InDatagrams) + $(snmp "$1" Udp NoPorts) + $(snmp "$1" Udp InErrors) ))
}

# round ITER: a sparse iteration: agg-recv --sparse on every node (the root
# serves), agg-send --sparse on every worker; every node the same sum
round() {
	r_pids=
	for h in ps0 w0 w1; do
		vcluster_run $h agg-recv --sparse -j --iter "$1" --timeout 30 "sout.$1.$h" \
			>"srecv.$1.$h.json" 2>"srecv.$1.$h.err" &
		r_pids="$r_pids $!"
	done
	for w in w0 w1; do
		vcluster_run $w agg-send --sparse -j --iter "$1" --timeout 30 "sin.$1.$w" \
			>"ssend.$1.$w.json" 2>"ssend.$1.$w.err" &
		r_pids="$r_pids $!"
	done
	r_rc=0
	for p in $r_pids; do wait "$p" || r_rc=1; done
	[ $r_rc = 0 ] || { tail -n 3 srecv.$1.*.err ssend.$1.*.err >&2; return 1; }
	cmp sout.$1.ps0 sout.$1.w0 && cmp sout.$1.ps0 sout.$1.w1 &&
	sparsetool check sout.$1.ps0 sin.$1.w0 sin.$1.w1
}

test_expect_success 'a plan of ps0, w0, w1 loaded; x up beside them' '
	grep -v "^x " hosts.txt >hosts.plan &&
	agg-plan --scheme ps --size 40000 hosts.plan >plan.txt &&
	test_atexit "rm -rf \"$AGG_PIN_DIR\"" &&
	vcluster_up hosts.txt "aggip$$-" &&
	DP_PLAN=plan.txt &&
	for h in ps0 w0 w1; do
		vcluster_run $h agg-load --arp-timeout 10000 plan.txt || return 1
	done &&
	DP_N=$(( $(dp_plan_field size) / 4 )) && DP_SEG=$(dp_plan_field segment) &&
	P=$(dp_plan_field port) && test -n "$P" &&
	fz_quiet &&
	vcluster_run x ping -c 1 -W 10 -q 10.90.0.100 >/dev/null &&
	k=0 &&
	for w in w0 w1; do
		agg-hot gen --sparse --binary --ids 20000 --width 4 --touch 0.05 --seed 7 \
			--worker $k --iter 1 >sin.1.$w &&
		cp sin.1.$w sin.2.$w && k=$((k + 1)) || return 1
	done
'

test_expect_success 'before: an allreduce and a sparse iteration' '
	dp_inputs 1 && dp_allreduce 1 && dp_check 1 &&
	round 1 &&
	# the workers XDP programs checked and passed the root ACKs and results
	test "$(dp_stat w0 sparse)" -gt 0 && test "$(dp_stat w1 sparse)" -gt 0
'

# A socket on each of the job's ports of ps0 and w0 (the node's address,
# as the tools bind): ports.HOST holds "port datagrams" once one arrives.
test_expect_success 'listeners on P..P+3 of ps0 and w0' '
	for h in ps0 w0; do
		a=$(awk -v h=$h "\$1 == h { print \$2 }" hosts.txt) &&
		rm -f ports.$h ready.$h &&
		{ nsenter --net=/var/run/netns/$(vcluster_ns $h) -- /usr/bin/python3 -c "
import select, socket, sys
a, p, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ss = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for k in range(4)]
for k, s in enumerate(ss):
    s.bind((a, p + k))
open(sys.argv[4], \"w\").close()
n = {}
while True:
    for s in select.select(ss, [], [])[0]:
        s.recv(65536)
        port = s.getsockname()[1]
        n[port] = n.get(port, 0) + 1
        with open(out + \".new\", \"w\") as f:
            f.write(\"\".join(\"%d %d\\n\" % (q, n[q]) for q in sorted(n)))
        __import__(\"os\").rename(out + \".new\", out)
" $a $P $PWD/ports.$h $PWD/ready.$h & } &&
		eval "listener_$h=\$!" || return 1
	done &&
	test_atexit "kill $listener_ps0 $listener_w0 2>/dev/null" &&
	k=0 &&
	until test -e ready.ps0 && test -e ready.w0; do
		k=$((k + 1)) && test $k -lt 300 || return 1
		sleep 0.1
	done
'

# hit FROM TARGET COUNTER N SPEC...: K packets of each SPEC from FROM's
# namespace (its own address and MAC unless the SPEC says src=) to
# TARGET, N of them counted by TARGET's XDP program (up to 30 s for
# them): each in rx and COUNTER, no other counter moved but "other"; and
# none of them reached TARGET's UDP, however many fragments the stack took
hit() {
	h_from=$1 h_to=$2 h_want=$3 h_n=$4
	shift 4
	agg-stat --node $h_to >before.$h_to &&
	h_udp=$(udp_seen $h_to) && h_reasm=$(snmp $h_to Ip ReasmOKs) &&
	vcluster_run $h_from pktfuzz send --plan plan.txt --to $h_to --count $K "$@" >sent &&
	test "$(fz_get sent sent)" = $((K * $#)) &&
	h_i=0 &&
	while [ $h_i -lt 200 ]; do
		agg-stat --node $h_to >after.$h_to &&
		[ "$(fz_delta before.$h_to after.$h_to rx)" -lt $h_n ] || break
		h_i=$((h_i + 1)) && sleep 0.1
	done &&
	fz_diff before.$h_to after.$h_to &&
	test "$(fz_delta before.$h_to after.$h_to $h_want)" = $h_n &&
	test "$(fz_delta before.$h_to after.$h_to rx)" = $h_n &&
	fz_only before.$h_to after.$h_to $h_want rx &&
	test "$(udp_seen $h_to)" = "$h_udp" &&
	test "$(snmp $h_to Ip ReasmOKs)" = "$h_reasm"
}

# frags FROM TARGET SPEC: SPEC's datagram as two fragments (the later one
# first, so the stack holds it when the first arrives), as a datagram
# with IP options, and both; the first fragments and those with options
# are drop_malformed, the later fragments wait in the stack for a first
# one that never comes (wait for the stack to have taken them all)
frags() {
	f_reqs=$(snmp $2 Ip ReasmReqds) &&
	hit $1 $2 drop_malformed $((4 * K)) "$3,frag=rest" "$3,frag=first" "$3,ihl=6" \
		"$3,ihl=15,frag=rest" "$3,ihl=15,frag=first" "$3,ihl=8" &&
	f_i=0 &&
	until [ $(( $(snmp $2 Ip ReasmReqds) - f_reqs )) -ge $((2 * K)) ]; do
		f_i=$((f_i + 1)) && test $f_i -lt 300 || return 1
		sleep 0.1
	done &&
	test $(( $(snmp $2 Ip ReasmReqds) - f_reqs )) = $((2 * K)) &&
	test "$(snmp $2 Ip ReasmOKs)" = "$h_reasm" &&
	test "$(udp_seen $2)" = "$h_udp"
}

for k in 0 1 2 3; do
	test_expect_success "fragments and IP options to P+$k of the sparse root, from a member: dropped" '
		frags w0 ps0 "dport=$((P + '$k'))"
	'
	test_expect_success "... from x, as itself and with w0's address: dropped" '
		frags x ps0 "dport=$((P + '$k'))" &&
		frags x ps0 "src=w0,dport=$((P + '$k'))"
	'
	test_expect_success "... to P+$k of a worker, from x with the root's address, and from w1: dropped" '
		frags x w0 "src=ps0,dport=$((P + '$k')),type=sparse_ack" &&
		frags w1 w0 "dport=$((P + '$k')),type=sparse_result"
	'
done

test_expect_success 'a sparse packet to P+2 or P+3 of a worker from a non-member: drop_member' '
	hit x w0 drop_member $((2 * K)) "dport=$((P + 2)),type=sparse_ack" \
		"dport=$((P + 3)),type=sparse_result"
'

test_expect_success '... with the root'"'"'s address from another MAC: drop_mac' '
	hit x w0 drop_mac $((2 * K)) "src=ps0,dport=$((P + 2)),type=sparse_ack" \
		"src=ps0,dport=$((P + 3)),type=sparse_result"
'

test_expect_success '... of another job or token: drop_job, drop_token' '
	hit ps0 w0 drop_job $((2 * K)) "dport=$((P + 2)),type=sparse_ack,job=99" \
		"dport=$((P + 3)),type=sparse_result,job=99" &&
	hit ps0 w0 drop_token $((2 * K)) "dport=$((P + 2)),type=sparse_ack,token=0x1234" \
		"dport=$((P + 3)),type=sparse_result,token=0"
'

test_expect_success '... malformed: drop_malformed' '
	hit ps0 w0 drop_malformed $((3 * K)) "dport=$((P + 2)),type=sparse_ack,width=0" \
		"dport=$((P + 3)),type=sparse_result,len=90" \
		"dport=$((P + 3)),type=sparse_result,op=max"
'

# P+2 takes the root's acknowledgements, P+3 its results, for a worker;
# nothing from the wire belongs on P+1 (the fetch signal is made on the
# node itself)
test_expect_success 'not what the port takes, or not from the sparse root: drop_route' '
	hit ps0 w0 drop_route $((5 * K)) "dport=$((P + 2)),type=sparse_result" \
		"dport=$((P + 3)),type=sparse_ack" "dport=$((P + 1)),type=result,from=ps0" \
		"dport=$((P + 1)),type=sparse_result" "dport=$((P + 2)),type=data" &&
	hit w1 w0 drop_route $((3 * K)) "dport=$((P + 2)),type=sparse_ack" \
		"dport=$((P + 3)),type=sparse_result" "dport=$((P + 1))" &&
	hit w0 ps0 drop_route $((2 * K)) "dport=$((P + 2)),type=sparse_ack" \
		"dport=$((P + 1)),type=sparse_ack"
'

test_expect_success 'none of it reached a listener on P..P+3' '
	! test -e ports.ps0 && ! test -e ports.w0
'

# The checks pass what belongs: the root's acknowledgement to a worker's
# P+2 and result to its P+3 reach the socket there.
test_expect_success 'the root'"'"'s sparse packets to P+2 and P+3 of a worker pass: sparse' '
	agg-stat --node w0 >before.w0 &&
	vcluster_run ps0 pktfuzz send --plan plan.txt --to w0 --count 1 \
		"dport=$((P + 2)),type=sparse_ack,iter=5" \
		"dport=$((P + 3)),type=sparse_result,iter=5" >sent &&
	k=0 &&
	until test "$(cat ports.w0 2>/dev/null | wc -l)" = 2; do
		k=$((k + 1)) && test $k -lt 300 || return 1
		sleep 0.1
	done &&
	printf "%d 1\n%d 1\n" $((P + 2)) $((P + 3)) >want &&
	test_cmp want ports.w0 &&
	agg-stat --node w0 >after.w0 &&
	test "$(fz_delta before.w0 after.w0 sparse)" = 2 &&
	! test -e ports.ps0
'

test_expect_success 'after: an allreduce and a sparse iteration, as before' '
	kill $listener_ps0 $listener_w0 &&
	for h in ps0 w0; do
		k=0 &&
		until ! vcluster_run $h ss -Hln --udp "sport = :$((P + 2))" | grep -q .; do
			k=$((k + 1)) && test $k -lt 300 || return 1
			sleep 0.1
		done || return 1
	done &&
	for w in w0 w1; do cp in.1.$w in.2.$w || return 1; done &&
	dp_allreduce 2 && dp_check 2 &&
	for w in w0 w1; do cmp out.1.$w out.2.$w || return 1; done &&
	round 2 &&
	cmp sout.1.ps0 sout.2.ps0
'

test_done
