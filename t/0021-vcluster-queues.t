#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the virtual cluster with VCLUSTER_QUEUES: multi-queue veth, threaded NAPI, flows spread over queues by their hash'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"
. "$TEST_DIRECTORY/lib/fuzz.sh"

test_require ROOT,NETNS "network namespaces need root"
command -v ethtool >/dev/null && command -v nc >/dev/null ||
	skip_all "no ethtool or nc (make deps installs them)"

cat >hosts.txt <<'EOF_HOSTS'
w0 10.90.0.1 bw=10
w1 10.90.0.2 bw=10
w2 10.90.0.3 bw=10
EOF_HOSTS

# rx PACKETS of host w1's eth0 per receive queue ("queue packets" lines):
# what its XDP program saw there
per_queue() {
	vcluster_run w1 ethtool -S eth0 |
		sed -n "s/^ *rx_queue_\([0-9]*\)_xdp_packets: \([0-9]*\)$/\1 \2/p"
}

# queues FROM TO: the queues whose count grew from file FROM to file TO,
# "queue growth" lines
grown() {
	join "$1" "$2" | awk "\$3 > \$2 { print \$1, \$3 - \$2 }"
}

# grow_to FROM TO N: per_queue into file TO until the queues together grew
# by N or more since file FROM (up to 30 s: NAPI threads run when the
# scheduler lets them)
grow_to() {
	gt_n=0
	until per_queue >"$2" && [ "$(grown "$1" "$2" | awk "{ s += \$2 } END { print s + 0 }")" -ge "$3" ]; do
		gt_n=$((gt_n + 1)) && test $gt_n -lt 300 || return 1
		sleep 0.1
	done
}

# The MAC address of host NAME's eth0.
mac_of() {
	vcluster_run "$1" cat /sys/class/net/eth0/address
}

test_expect_success 'a bad VCLUSTER_QUEUES is refused' '
	for q in 0 3 128 x; do
		VCLUSTER_QUEUES=$q test_must_fail vcluster_up hosts.txt aggq$$- 2>err &&
		grep "VCLUSTER_QUEUES=$q: a power of two, 1 to 64" err || return 1
	done &&
	VCLUSTER_QUEUES=2 VCLUSTER_SWITCH=xdp test_must_fail vcluster_up hosts.txt aggq$$- 2>err &&
	grep "VCLUSTER_QUEUES needs VCLUSTER_SWITCH=bridge" err
'

test_expect_success 'VCLUSTER_QUEUES=4: every veth has 4 queues each way and threaded NAPI' '
	VCLUSTER_QUEUES=4 vcluster_up hosts.txt aggq$$- &&
	for h in $(vcluster_hosts); do
		vcluster_run $h ethtool -l eth0 >ch.$h &&
		test "$(sed -n "/^Current/,\$ s/^RX:[[:space:]]*//p" ch.$h)" = 4 &&
		test "$(sed -n "/^Current/,\$ s/^TX:[[:space:]]*//p" ch.$h)" = 4 &&
		test "$(ip netns exec $(vcluster_ns $h) cat /sys/class/net/eth0/threaded)" = 1 &&
		test "$(ip netns exec $(vcluster_brns) cat /sys/class/net/$(vcluster_port $h)/threaded)" = 1 ||
		{ cat ch.$h; return 1; }
	done
'

test_expect_success 'native XDP attaches to a host; each receive queue is a thread of its own' '
	ip -n $(vcluster_ns w1) link set dev eth0 xdpdrv obj "$AGG_BUILD/pass.bpf.o" sec xdp.frags &&
	ip -n $(vcluster_ns w1) -d link show dev eth0 >link &&
	grep -q "prog/xdp " link && ! grep -q "prog/xdpgeneric" link &&
	vcluster_napi w1 >napi &&
	cat napi &&
	test "$(cut -d" " -f1 napi | sort -u | wc -l)" = 4 &&
	test "$(grep -c " napi/eth0-[0-9]*$" napi)" = 4
'

# w1 counts every frame its XDP sees, so nothing else may come: no IPv6
# (router solicitations, MLD, DAD), no ARP (permanent neighbours both
# ways), and a flow of 200 datagrams from one socket against which a
# stray frame would still show as small.
test_expect_success 'one flow stays on one receive queue' '
	fz_quiet &&
	vcluster_run w0 ip neigh replace 10.90.0.2 lladdr $(mac_of w1) dev eth0 nud permanent &&
	vcluster_run w1 ip neigh replace 10.90.0.1 lladdr $(mac_of w0) dev eth0 nud permanent &&
	per_queue >q0 && test "$(wc -l <q0)" = 4 &&
	vcluster_run w0 /usr/bin/python3 -c "import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((\"10.90.0.1\", 40000))
for i in range(200):
	s.sendto(b\"x\", (\"10.90.0.2\", 9))" &&
	grow_to q0 q1 200 &&
	grown q0 q1 >g1 && cat g1 &&
	sort -k2,2n g1 | tail -1 >top &&
	test "$(cut -d" " -f2 top)" -ge 200 &&
	test "$(grep -v -x -F -f top g1 | awk "{ s += \$2 } END { print s + 0 }")" -lt 20
'

# 32 flows over 4 queues all on one queue: 4 x 4^-32, never; and a queue
# with none of them: 4 x (3/4)^32, 1 in 2500.
test_expect_success 'flows from different source ports spread over the receive queues' '
	per_queue >q2 &&
	for p in $(seq 40001 40032); do
		# -q0, not -w0: nc -w0 may exit before it sends
		echo x | vcluster_run w0 nc -u -q0 -p $p 10.90.0.2 9 || return 1
	done &&
	grow_to q2 q3 32 &&
	grown q2 q3 >g3 && cat g3 &&
	test "$(wc -l <g3)" -ge 3
'

test_expect_success 'shaping is refused with queues' '
	test_must_fail vcluster_shape 2>err &&
	grep "shaping does not go with VCLUSTER_QUEUES" err
'

test_expect_success 'vcluster_down removes every namespace' '
	ns=$(vcluster_ns w0) &&
	vcluster_down &&
	! ip netns list | grep -q "^$ns\\b"
'

test_done
