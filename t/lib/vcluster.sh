# SPDX-License-Identifier: GPL-2.0-only
# A virtual cluster: one network namespace per host of a hosts file, each
# with eth0 on a veth pair whose other end is a port of bridge br0 in a
# namespace of its own.  Only the hosts file's addresses are used, inside
# namespaces made here; the root namespace is never touched.
#
#   vcluster_up HOSTSFILE [PREFIX]   make it (PREFIX: namespace name prefix)
#   vcluster_run NAME CMD...         run CMD "on" host NAME (nsenter, so
#                                    /sys/fs/bpf pins stay visible)
#   vcluster_ns NAME                 the namespace of host NAME
#   vcluster_port NAME               NAME's bridge-side port (in vcluster_brns)
#   vcluster_brns                    the bridge's namespace
#   vcluster_hosts                   the host names, one per line
#   vcluster_listening NAME tcp|udp PORT
#                                    wait (up to 30 s) until a socket of
#                                    host NAME listens on PORT
#   vcluster_link_up NAME            wait (up to 30 s) until host NAME's
#                                    eth0 is up and its bridge port forwards
#   vcluster_shape                   limit every host to its bw= in both
#                                    directions (HTB; IFB for the upload)
#   vcluster_ports off|on            take XDP off the switch ports (a TCP
#                                    baseline's best case) or put it back
#   vcluster_switch_stats            "forwarded N passed M": the frames the
#                                    XDP switch redirected and passed to br0
#   vcluster_scaled_hosts FILE       FILE with bw= scaled to the emulated rates
#   vcluster_napi NAME               pid and name of the thread of each
#                                    receive queue of host NAME's eth0
#                                    (VCLUSTER_QUEUES; while an XDP
#                                    program runs there)
#   vcluster_down                    remove everything vcluster_up made
#
# VCLUSTER_MTU (default 1500) sets the MTU of every link.
# VCLUSTER_SWITCH=bridge (default) or xdp: how the switch forwards.  bridge:
# every frame through the Linux bridge br0 (each port's XDP_PASS program
# hands it up as an skb, which veth copies); xdp: a switch's forwarding
# table in XDP on every port ($AGG_BUILD/port.bpf.o): a unicast frame to a
# host's MAC is redirected straight to its port, and veth runs the host's
# XDP program on it in place; the rest (ARP, broadcast) still goes through
# br0.  It models a hardware switch, which forwards without any host's
# CPU; but redirected frames skip the ports' qdiscs and tc programs, so
# vcluster_shape and the loss injector (loss.sh) need the bridge.
# VCLUSTER_QUEUE_MS (default 50): vcluster_shape's switch buffers, in time:
# each port's egress queue toward its host holds that long of the link's
# rate, in bytes, as a switch's shared buffer gives a port about that much
# (5 ms is a shallow one); the host's own transmit queue is Linux's
# default, 1000 packets.  VCLUSTER_QLEN=N instead makes both N packets.
# VCLUSTER_QUEUES=N (default 1; a power of two up to 64) models NICs with
# N queues and RSS: every veth (each host's eth0 and its bridge port) gets
# N transmit and N receive queues and threaded NAPI, so each receive queue
# is a kernel thread of its own (napi/eth0-ID) that the scheduler puts on
# any CPU, as a NIC's queue has an interrupt and a CPU of its own.  RSS:
# each port's ingress runs $AGG_BUILD/rss.bpf.o (tc), which records the
# kernel's hash of the frame's flow (addresses, protocol, ports: a NIC
# hashes the same 4-tuple, with Toeplitz) as its receive queue, and the
# bridge sends it to its destination port on the transmit queue of that
# number modulo N, which veth delivers to the host's receive queue of the
# same number.  One flow always lands on one queue; two flows share one
# when their hashes do (with 2 queues, half the time).  Without it, veth's
# bridge forwarding put every flow on queue 0.  Native XDP still attaches
# (veth wants as many receive queues as its peer has transmit queues).
# Shaping (vcluster_shape) and VCLUSTER_SWITCH=xdp, which bypass the
# ports' tc ingress, do not go with it.  vcluster_napi NAME lists host
# NAME's receive threads.
# VCLUSTER_BW_SCALE (default 0.05) scales bw= (Gbit/s) to the emulated
# rate: TCP over these veths (XDP on the port, so no TSO, MTU 1500) moves
# about 1.8 Gbit/s, so 10 Gbit/s becomes 500 Mbit/s and ratios hold.  Every bridge
# port runs an XDP_PASS program ($AGG_BUILD/pass.bpf.o), native mode where
# the kernel allows it: veth delivers XDP_TX frames only to a peer that
# runs XDP.

VCLUSTER_PREFIX=
VCLUSTER_NAMES=
VCLUSTER_XDP_MODE=
VCLUSTER_PORT_PIN=
VCLUSTER_NQUEUES=1

vcluster_var_() {
	printf 'VCLUSTER_PORT_%s' "$(printf %s "$1" | tr -c 'A-Za-z0-9_\n' _)"
}

vcluster_brns() { echo "${VCLUSTER_PREFIX}br"; }
vcluster_ns() { echo "${VCLUSTER_PREFIX}$1"; }
vcluster_hosts() { for n in $VCLUSTER_NAMES; do echo "$n"; done; }
vcluster_port() { eval "echo \${$(vcluster_var_ "$1")}"; }

vcluster_run() {
	vc_ns=$(vcluster_ns "$1"); shift
	nsenter --net="/var/run/netns/$vc_ns" -- "$@"
}

vcluster_listening() {
	vc_i=0
	until vcluster_run "$1" ss -Hln --"$2" "sport = :$3" | grep -q .; do
		vc_i=$((vc_i + 1))
		[ $vc_i -lt 600 ] || { echo "nothing listens on $2 port $3 of $1"; return 1; }
		sleep 0.05
	done
}

vcluster_down() {
	[ -n "$VCLUSTER_PREFIX" ] || return 0
	[ -z "$VCLUSTER_PORT_PIN" ] || rm -rf "$VCLUSTER_PORT_PIN"
	VCLUSTER_PORT_PIN=
	for vc_n in $VCLUSTER_NAMES; do
		ip netns del "$(vcluster_ns "$vc_n")" 2>/dev/null
	done
	ip netns del "$(vcluster_brns)" 2>/dev/null
	VCLUSTER_NAMES=
	VCLUSTER_PREFIX=
	return 0
}

# Heterogeneous bandwidth (DESIGN.md): toward a host, HTB on its bridge
# port's egress; from a host, the port's ingress redirected to an IFB
# device with HTB.  Both limit XDP_TX and redirected traffic too.
vcluster_shape() {
	[ -z "$VCLUSTER_PORT_PIN" ] ||
		{ echo "vcluster: shaping needs VCLUSTER_SWITCH=bridge (forwarded frames skip the qdiscs)" >&2; return 1; }
	[ "$VCLUSTER_NQUEUES" = 1 ] ||
		{ echo "vcluster: shaping does not go with VCLUSTER_QUEUES (the ports' ingress runs RSS)" >&2; return 1; }
	vc_scale=${VCLUSTER_BW_SCALE:-0.05}
	vc_br=$(vcluster_brns)
	vc_i=0
	for vc_ent in $(awk '{ sub(/(^|[ \t])#.*/, "") } NF >= 2 && $1 != "link" {
			bw = 0
			for (i = 3; i <= NF; i++) if ($i ~ /^bw=/) bw = substr($i, 4)
			print $1 "," bw }' "$VCLUSTER_HOSTS_FILE"); do
		vc_name=${vc_ent%,*}
		vc_port=$(vcluster_port "$vc_name")
		vc_rate=$(awk -v b="${vc_ent#*,}" -v s="$vc_scale" 'BEGIN { printf "%d", b * s * 1000 }')
		[ "$vc_rate" -gt 0 ] || continue
		# A 2 ms burst (at least 64 KiB) and a 64 KiB quantum: smaller
		# ones starve the rate at these speeds.
		vc_bytes=$(awk -v r="$vc_rate" 'BEGIN { b = r * 1000000 / 8 * 0.002; printf "%d", b < 65536 ? 65536 : b }')
		vc_burst="burst $vc_bytes cburst $vc_bytes quantum 65536"
		# Toward the host, the switch's egress buffer, in time:
		# VCLUSTER_QUEUE_MS (default 50) of the link's rate, in bytes
		# (at least two 64 KiB frames).  From the host, its NIC's
		# transmit queue at the NIC's rate: Linux's default
		# txqueuelen, 1000 packets.  VCLUSTER_QLEN=N: N packets both.
		if [ -n "${VCLUSTER_QLEN:-}" ]; then
			vc_fifo="pfifo limit $VCLUSTER_QLEN" vc_upfifo=$vc_fifo
		else
			vc_fifo="bfifo limit $(awk -v r="$vc_rate" -v ms="${VCLUSTER_QUEUE_MS:-50}" \
				'BEGIN { b = r * 1000000 / 8 * ms / 1000; printf "%d", b < 131072 ? 131072 : b }')"
			vc_upfifo="pfifo limit 1000"
		fi
		vc_ifb=ifb$vc_i
		vc_i=$((vc_i + 1))
		tc -n "$vc_br" qdisc replace dev "$vc_port" root handle 1: htb default 1 &&
		tc -n "$vc_br" class replace dev "$vc_port" parent 1: classid 1:1 \
			htb rate "${vc_rate}mbit" $vc_burst &&
		tc -n "$vc_br" qdisc replace dev "$vc_port" parent 1:1 $vc_fifo &&
		ip -n "$vc_br" link add "$vc_ifb" type ifb &&
		ip -n "$vc_br" link set "$vc_ifb" up &&
		tc -n "$vc_br" qdisc replace dev "$vc_ifb" root handle 1: htb default 1 &&
		tc -n "$vc_br" class replace dev "$vc_ifb" parent 1: classid 1:1 \
			htb rate "${vc_rate}mbit" $vc_burst &&
		tc -n "$vc_br" qdisc replace dev "$vc_ifb" parent 1:1 $vc_upfifo &&
		tc -n "$vc_br" qdisc replace dev "$vc_port" handle ffff: ingress &&
		tc -n "$vc_br" filter replace dev "$vc_port" parent ffff: protocol all \
			u32 match u32 0 0 action mirred egress redirect dev "$vc_ifb" ||
			{ echo "vcluster: cannot shape $vc_name" >&2; return 1; }
		eval "VCLUSTER_RATE_$(printf %s "$vc_name" | tr -c 'A-Za-z0-9_\n' _)=$vc_rate"
	done
}

# vcluster_scaled_hosts FILE: FILE with every bw= scaled as vcluster_shape
# scales it (VCLUSTER_BW_SCALE), for agg-plan --eval's model at the rates
# the cluster really has.
vcluster_scaled_hosts() {
	awk -v s="${VCLUSTER_BW_SCALE:-0.05}" '{ for (i = 1; i <= NF; i++) if ($i ~ /^bw=/) $i = "bw=" substr($i, 4) * s; print }' "$1"
}

# The emulated rate of host NAME in Mbit/s (after vcluster_shape).
vcluster_rate() {
	eval "echo \${VCLUSTER_RATE_$(printf %s "$1" | tr -c 'A-Za-z0-9_\n' _)-}"
}

vcluster_fail_() {
	echo "vcluster: $*" >&2
	vcluster_down
	return 1
}

vcluster_up() {
	vc_hosts=$1
	VCLUSTER_PREFIX=${2:-agg$$-}
	vc_mtu=${VCLUSTER_MTU:-1500}
	vc_obj=${AGG_BUILD:-build}/pass.bpf.o
	vc_br=$(vcluster_brns)
	vc_queues=
	VCLUSTER_NQUEUES=${VCLUSTER_QUEUES:-1}
	case ${VCLUSTER_QUEUES:-1} in
	1) ;;
	2|4|8|16|32|64) vc_queues="numtxqueues $VCLUSTER_QUEUES numrxqueues $VCLUSTER_QUEUES" ;;
	*) echo "vcluster: VCLUSTER_QUEUES=$VCLUSTER_QUEUES: a power of two, 1 to 64" >&2; return 1 ;;
	esac
	[ -z "$vc_queues" ] || [ "${VCLUSTER_SWITCH:-bridge}" = bridge ] ||
		{ echo "vcluster: VCLUSTER_QUEUES needs VCLUSTER_SWITCH=bridge (redirected frames skip the ports' RSS)" >&2; return 1; }
	[ -z "$vc_queues" ] || [ -r "${AGG_BUILD:-build}/rss.bpf.o" ] ||
		{ echo "vcluster: no ${AGG_BUILD:-build}/rss.bpf.o (run make)" >&2; return 1; }

	[ -r "$vc_hosts" ] || { echo "vcluster: cannot read $vc_hosts" >&2; return 1; }
	[ -r "$vc_obj" ] || { echo "vcluster: no $vc_obj (run make)" >&2; return 1; }
	command -v test_atexit >/dev/null 2>&1 && test_atexit vcluster_down
	ip netns add "$vc_br" || vcluster_fail_ "cannot create namespace $vc_br" || return 1
	ip -n "$vc_br" link set lo up
	ip -n "$vc_br" link add br0 mtu "$vc_mtu" type bridge || vcluster_fail_ "no bridge" || return 1
	ip -n "$vc_br" link set br0 up
	# A switch does not run iptables: with br_netfilter loaded, bridged
	# IPv4 would go through it (and frames shorter than their IP length
	# would vanish there).
	for vc_f in iptables ip6tables arptables; do
		nsenter --net="/var/run/netns/$vc_br" sh -c \
			"test -e /proc/sys/net/bridge/bridge-nf-call-$vc_f && echo 0 >/proc/sys/net/bridge/bridge-nf-call-$vc_f"
	done
	VCLUSTER_HOSTS_FILE=$vc_hosts
	vc_i=0
	# name and address of each host line; "link" lines and comments skipped
	for vc_ent in $(awk '{ sub(/(^|[ \t])#.*/, "") } NF >= 2 && $1 != "link" { print $1 "," $2 }' "$vc_hosts"); do
		vc_name=${vc_ent%,*}
		vc_addr=${vc_ent#*,}
		vc_ns=$(vcluster_ns "$vc_name")
		vc_port=p$vc_i
		ip netns add "$vc_ns" || vcluster_fail_ "cannot create namespace $vc_ns" || return 1
		VCLUSTER_NAMES="$VCLUSTER_NAMES $vc_name"
		eval "$(vcluster_var_ "$vc_name")=$vc_port"
		ip -n "$vc_ns" link set lo up
		ip link add eth0 mtu "$vc_mtu" $vc_queues netns "$vc_ns" type veth \
			peer name "$vc_port" mtu "$vc_mtu" $vc_queues netns "$vc_br" ||
			vcluster_fail_ "cannot create veth for $vc_name" || return 1
		ip -n "$vc_br" link set "$vc_port" master br0 up
		tc -n "$vc_br" qdisc replace dev "$vc_port" root pfifo limit 4096 ||
			vcluster_fail_ "cannot give $vc_port a qdisc" || return 1
		ip -n "$vc_ns" addr add "$vc_addr/16" dev eth0 ||
			vcluster_fail_ "bad address $vc_addr for $vc_name" || return 1
		ip -n "$vc_ns" link set eth0 up
		# veth has no qdisc by default; a real NIC has one.  With a
		# qdisc, a full veth ring stops the queue instead of dropping.
		tc -n "$vc_ns" qdisc replace dev eth0 root pfifo limit 4096 ||
			vcluster_fail_ "cannot give $vc_name's eth0 a qdisc" || return 1
		if ip -n "$vc_br" link set dev "$vc_port" xdpdrv obj "$vc_obj" sec xdp.frags 2>/dev/null; then
			VCLUSTER_XDP_MODE=native
		elif ip -n "$vc_br" link set dev "$vc_port" xdpgeneric obj "$vc_obj" sec xdp.frags; then
			VCLUSTER_XDP_MODE=generic
			echo "# vcluster: native XDP failed on $vc_port, using generic mode"
		else
			vcluster_fail_ "cannot attach XDP to $vc_port" || return 1
		fi
		if [ -n "$vc_queues" ]; then
			tc -n "$vc_br" qdisc add dev "$vc_port" clsact &&
			tc -n "$vc_br" filter add dev "$vc_port" ingress bpf da \
				obj "${AGG_BUILD:-build}/rss.bpf.o" sec tc &&
			vcluster_threaded_ "$vc_br" "$vc_port" &&
			# eth0's NAPI exists while an XDP program runs there
			# (agg-load's, later): make it threaded now, under one.
			ip -n "$vc_ns" link set dev eth0 xdpdrv obj "$vc_obj" sec xdp.frags &&
			vcluster_threaded_ "$vc_ns" eth0 &&
			ip -n "$vc_ns" link set dev eth0 xdpdrv off ||
				vcluster_fail_ "cannot make $vc_name's queues threaded" || return 1
		fi
		vc_i=$((vc_i + 1))
	done
	[ $vc_i -gt 0 ] || vcluster_fail_ "no hosts in $vc_hosts" || return 1
	case ${VCLUSTER_SWITCH:-bridge} in
	bridge) ;;
	xdp) vcluster_switch_xdp_ || return 1 ;;
	*) vcluster_fail_ "VCLUSTER_SWITCH=$VCLUSTER_SWITCH: bridge or xdp" || return 1 ;;
	esac
	# Duplicate address detection is IPv6-only; IPv4 is up at once.  Wait
	# for the carrier of every port so the first packet is not lost.
	for vc_n in $VCLUSTER_NAMES; do
		vcluster_link_up "$vc_n" || vcluster_fail_ "eth0 of $vc_n never came up" || return 1
	done
	return 0
}

# Threaded NAPI on device DEV of namespace NS (its own sysfs: ip netns
# exec, not nsenter, whose /sys is the root namespace's); the device keeps
# it when its NAPI instances come and go with XDP programs.
vcluster_threaded_() {
	ip netns exec "$1" sh -c "echo 1 >/sys/class/net/$2/threaded" 2>/dev/null
}

vcluster_napi() {
	# The kernel names a NAPI thread napi/DEV-ID when it starts it (and
	# keeps the thread, and the name, when the instance is made again),
	# and every namespace has an eth0: ask the namespace's own netdev
	# netlink for its instances and their threads.
	vcluster_run "$1" "${AGG_BUILD:-build}/t/napitool" eth0 |
		while read -r vc_id vc_pid; do
			[ "$vc_pid" = 0 ] || echo "$vc_pid $(cat "/proc/$vc_pid/comm")"
		done
}

# The forwarding table in XDP on every port (VCLUSTER_SWITCH=xdp): one
# program and its maps, pinned for the cluster, replace each port's
# XDP_PASS program.  Every host's eth0 gets GRO, so veth takes redirected
# frames even where no XDP program runs, and computes its checksums itself,
# as a NIC does before the wire: a redirected frame is no longer an skb, so
# a checksum left to "offload" would arrive unfilled.
vcluster_switch_xdp_() {
	vc_br=$(vcluster_brns)
	vc_pobj=${AGG_BUILD:-build}/port.bpf.o
	VCLUSTER_PORT_PIN=/sys/fs/bpf/aggvc-$VCLUSTER_PREFIX
	command -v ethtool >/dev/null || vcluster_fail_ "VCLUSTER_SWITCH=xdp needs ethtool" || return 1
	mkdir -p "$VCLUSTER_PORT_PIN" &&
	bpftool prog load "$vc_pobj" "$VCLUSTER_PORT_PIN/prog" type xdp \
		pinmaps "$VCLUSTER_PORT_PIN" ||
		vcluster_fail_ "cannot load $vc_pobj" || return 1
	for vc_n in $VCLUSTER_NAMES; do
		vc_port=$(vcluster_port "$vc_n")
		vc_idx=$(ip -n "$vc_br" -o link show dev "$vc_port" | cut -d: -f1)
		vc_mac=$(ip -n "$(vcluster_ns "$vc_n")" -o link show dev eth0 |
			 sed -n 's/.*link\/ether \([0-9a-f:]*\) .*/\1/p')
		vc_le=$(printf '%08x' "$vc_idx" | sed 's/\(..\)\(..\)\(..\)\(..\)/\4 \3 \2 \1/')
		nsenter --net="/var/run/netns/$vc_br" -- bpftool map update pinned \
			"$VCLUSTER_PORT_PIN/ports" key hex $vc_le value hex $vc_le &&
		nsenter --net="/var/run/netns/$vc_br" -- bpftool map update pinned \
			"$VCLUSTER_PORT_PIN/fdb" key hex $(echo "$vc_mac" | tr : ' ') 00 00 value hex $vc_le ||
			vcluster_fail_ "cannot add $vc_n to the forwarding table" || return 1
	done
	vcluster_ports on || vcluster_fail_ "cannot make the ports forward in XDP"
}

# vcluster_ports off|on: take the XDP program off every bridge port (and,
# with VCLUSTER_SWITCH=xdp, give the hosts their checksum offload and TSO
# back): veth keeps TSO when its peer runs no XDP, a TCP baseline's best
# case; or put back what vcluster_up attached.  The ports' bpftool and ip
# run inside the bridge's namespace (nsenter: "ip -n" hides /sys/fs/bpf).
vcluster_ports() {
	vc_br=$(vcluster_brns)
	vc_m=xdpgeneric
	[ "$VCLUSTER_XDP_MODE" != native ] || vc_m=xdpdrv
	for vc_n in $VCLUSTER_NAMES; do
		vc_port=$(vcluster_port "$vc_n")
		ip -n "$vc_br" link set dev "$vc_port" xdp off || return 1
		case $1,$VCLUSTER_PORT_PIN in
		off,) ;;
		off,*) vcluster_run "$vc_n" ethtool -K eth0 tx on tso on >/dev/null ;;
		on,) ip -n "$vc_br" link set dev "$vc_port" $vc_m \
			obj "${AGG_BUILD:-build}/pass.bpf.o" sec xdp.frags ;;
		on,*) vcluster_run "$vc_n" ethtool -K eth0 gro on tx off >/dev/null &&
		      nsenter --net="/var/run/netns/$vc_br" -- ip link set dev "$vc_port" \
			$vc_m pinned "$VCLUSTER_PORT_PIN/prog" ;;
		*) echo "vcluster_ports: off or on" >&2; return 2 ;;
		esac || { echo "vcluster: cannot turn $vc_port's XDP $1" >&2; return 1; }
	done
}

# Frames the XDP switch forwarded and passed to the bridge, summed over
# the ports: "forwarded N passed M" (VCLUSTER_SWITCH=xdp).
vcluster_switch_stats() {
	bpftool -j map dump pinned "$VCLUSTER_PORT_PIN/port_stats" |
		jq -r '"forwarded \([.[0].formatted.values[].value] | add) passed \([.[1].formatted.values[].value] | add)"'
}

# The kernel's linkwatch (a workqueue, behind the RTNL lock every other
# namespace's setup and teardown takes too) marks a veth up and starts its
# qdisc, and makes the bridge port forward, a while after "ip link set
# up".  ip -n and bridge -n ask the namespace itself: cat
# /sys/class/net/eth0/operstate under nsenter --net reads the sysfs of
# the root namespace, whose eth0 is another device.
vcluster_link_up() {
	vc_t=0
	until ip -n "$(vcluster_ns "$1")" -o link show dev eth0 2>/dev/null | grep -q " state UP " &&
	      bridge -n "$(vcluster_brns)" link show dev "$(vcluster_port "$1")" 2>/dev/null |
		grep -q " state forwarding "; do
		vc_t=$((vc_t + 1))
		[ $vc_t -lt 300 ] || { echo "vcluster: eth0 of $1 or its bridge port is not up" >&2; return 1; }
		sleep 0.1
	done
}
