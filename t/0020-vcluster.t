#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
test_description='the virtual cluster: namespaces, bridge, XDP on the ports'
. "$(dirname "$0")/lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/vcluster.sh"

test_require ROOT,NETNS "network namespaces need root"
command -v ping >/dev/null || skip_all "no ping (make deps installs iputils-ping)"

cat >hosts.txt <<'EOF_HOSTS'
# four hosts
ps0 10.90.0.100 bw=40 role=ps
w0  10.90.0.1   bw=10 rack=r1   # comment
w1  10.90.0.2   bw=10
w2  10.90.0.3   bw=10
link w0 w1
EOF_HOSTS
prefix=aggt$$-

test_expect_success 'vcluster_up builds one namespace per host and a bridge' '
	vcluster_up hosts.txt $prefix &&
	ip netns list >ns &&
	for h in ps0 w0 w1 w2; do grep "^$prefix$h\\b" ns || return 1; done &&
	grep "^${prefix}br\\b" ns &&
	test "$(vcluster_hosts | wc -l)" = 4
'

test_expect_success 'every host reaches every other' '
	for a in $(vcluster_hosts); do
		for addr in 10.90.0.100 10.90.0.1 10.90.0.2 10.90.0.3; do
			vcluster_run $a ping -c 1 -W 10 -q $addr >/dev/null ||
				{ echo "$a cannot reach $addr"; return 1; }
		done
	done
'

test_expect_success 'TCP works between two hosts' '
	head -c 200000 /dev/urandom >payload &&
	{ nsenter --net=/var/run/netns/$(vcluster_ns w1) -- \
		timeout 10 nc -l -p 7777 >received & } &&
	srv=$! &&
	vcluster_listening w1 tcp 7777 &&
	vcluster_run w0 timeout 10 nc -N 10.90.0.2 7777 <payload &&
	wait $srv &&
	cmp payload received
'

test_expect_success 'every bridge port runs XDP' '
	for h in $(vcluster_hosts); do
		ip -n "$(vcluster_brns)" -d link show dev "$(vcluster_port $h)" >link &&
		grep -q "prog/xdp" link || { cat link; return 1; }
	done
'

test_expect_success BPFFS 'a host sees the pins of /sys/fs/bpf' '
	pin=/sys/fs/bpf/aggt-$$ &&
	test_when_finished "rm -f $pin" &&
	bpftool map create $pin type array key 4 value 4 entries 1 name aggt &&
	vcluster_run w0 test -e $pin
'

test_expect_success 'vcluster_shape limits each host to its bw= both ways' '
	VCLUSTER_BW_SCALE=0.1 vcluster_shape &&
	test "$(vcluster_rate ps0)" = 4000 &&
	test "$(vcluster_rate w1)" = 1000 &&
	for h in $(vcluster_hosts); do
		port=$(vcluster_port $h) &&
		tc -n "$(vcluster_brns)" class show dev $port >down &&
		grep -q "rate $(vcluster_rate $h)Mbit\|rate $(($(vcluster_rate $h) / 1000))Gbit" down &&
		tc -n "$(vcluster_brns)" filter show dev $port parent ffff: >up &&
		grep -q "mirred (Egress Redirect to device ifb" up || { cat down up; return 1; }
	done &&
	# the switch buffer toward ps0: 50 ms of 4000 Mbit/s; its own NIC queue 1000 packets
	tc -n "$(vcluster_brns)" qdisc show dev "$(vcluster_port ps0)" >q &&
	grep -q "bfifo.*limit 25000000b" q &&
	tc -n "$(vcluster_brns)" qdisc show >qall &&
	grep -q "pfifo.*dev ifb.*limit 1000p" qall || { cat q qall; return 1; } &&
	vcluster_run w0 ping -c 1 -W 10 -q 10.90.0.2 >/dev/null
'

test_expect_success 'hosts are isolated from the root namespace' '
	! ip addr show | grep -q "10\.90\.0\.1/"
'

test_expect_success 'vcluster_down removes every namespace it made' '
	vcluster_down &&
	! ip netns list | grep "^$prefix"
'

test_expect_success BPFFS 'VCLUSTER_SWITCH=xdp forwards unicast in XDP, the rest through br0' '
	VCLUSTER_SWITCH=xdp vcluster_up hosts.txt ${prefix}x &&
	pin=$VCLUSTER_PORT_PIN &&
	test -e $pin/prog &&
	for h in $(vcluster_hosts); do
		ip -n "$(vcluster_brns)" -d link show dev "$(vcluster_port $h)" >link &&
		grep -q "prog/xdp" link || { cat link; return 1; }
	done &&
	for a in $(vcluster_hosts); do
		for addr in 10.90.0.100 10.90.0.1 10.90.0.2 10.90.0.3; do
			vcluster_run $a ping -c 1 -W 10 -q $addr >/dev/null ||
				{ echo "$a cannot reach $addr"; return 1; }
		done
	done &&
	head -c 2000000 /dev/urandom >payload2 &&
	{ nsenter --net=/var/run/netns/$(vcluster_ns w2) -- \
		timeout 20 nc -l -p 7778 >received2 & } &&
	srv=$! &&
	vcluster_listening w2 tcp 7778 &&
	vcluster_run ps0 timeout 20 nc -N 10.90.0.3 7778 <payload2 &&
	wait $srv &&
	cmp payload2 received2 &&
	vcluster_switch_stats >stats &&
	read x fwd y passed <stats &&
	echo "$(cat stats)" &&
	# 2 MB of TCP is over 1000 frames each way; ARP went to the bridge
	test "$fwd" -gt 1000 && test "$passed" -gt 0 &&
	test_must_fail vcluster_shape 2>err &&
	grep "shaping needs VCLUSTER_SWITCH=bridge" err &&
	vcluster_down &&
	! test -e $pin &&
	! ip netns list | grep "^${prefix}x"
'

test_expect_success 'a killed test leaves nothing behind' '
	# the helpers by absolute path: test-lib.sh makes TEST_DIRECTORY the
	# directory of inner.t, here
	cat >inner.t <<-EOF_INNER &&
	#!/bin/sh
	. "$TEST_DIRECTORY/lib/test-lib.sh"
	. "$TEST_DIRECTORY/lib/vcluster.sh"
	vcluster_up "$PWD/hosts.txt" aggk$$- || exit 1
	echo up
	sleep 30 & wait \$!	# the TERM trap runs at once, not after the sleep
	EOF_INNER
	{ AGG_TEST_TMP=$PWD sh inner.t >out 2>&1 & } &&
	pid=$! &&
	# vcluster_up took 4 s for 2 hosts on a loaded machine: up to 60 s
	n=0 &&
	until grep -q "^up" out; do
		n=$((n + 1)) && test $n -lt 600 && kill -0 $pid || { cat out; return 1; }
		sleep 0.1
	done &&
	ip netns list | grep -q "^aggk$$-" &&
	kill -TERM $pid && { wait $pid; :; } &&
	! ip netns list | grep "^aggk$$-"
'

test_done
