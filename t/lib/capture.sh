# SPDX-License-Identifier: GPL-2.0-only
# Packet captures on the virtual cluster (vcluster.sh) with tcpdump.
#
#   capture_start FILE [HOST]   capture agg traffic (UDP 9999) and the stop
#                               marker (UDP 9) on $CAP_HOST's bridge port
#                               (default c1), or inside HOST's namespace
#   capture_stop                send the marker from $CAP_HOST to
#                               $CAP_MARK_TO (default 10.90.0.1), wait until
#                               every capture holds it, stop them, and fail
#                               if the kernel dropped any packet; CAP_MARKS
#                               is how many markers it sent (usually 1)

CAP_HOST=${CAP_HOST:-c1}
CAP_MARK_TO=${CAP_MARK_TO:-10.90.0.1}
CAP_PIDS= CAP_FILES=

capture_start() {
	# nsenter execs tcpdump, so $! is its pid.  --immediate-mode hands
	# every packet to tcpdump at once (TPACKET_V3 holds them for up to a
	# second otherwise, and a stop meanwhile loses them); its ring has a
	# frame per packet of the snap length, so with -s 0 a burst of a few
	# packets overflows it: the headers (128 bytes) are all agg-check reads.
	if [ -n "${2-}" ]; then
		nsenter --net="/var/run/netns/$(vcluster_ns "$2")" -- tcpdump -i any \
			--immediate-mode -B 8192 -s 128 -w "$1" -U -Z root "udp port 9999 or udp port 9" 2>"$1.err" &
	else
		nsenter --net="/var/run/netns/$(vcluster_brns)" -- tcpdump -i "$(vcluster_port "$CAP_HOST")" \
			--immediate-mode -B 8192 -s 128 -w "$1" -U -Z root "udp port 9999 or udp port 9" 2>"$1.err" &
	fi
	CAP_PIDS="$CAP_PIDS $!" CAP_FILES="$CAP_FILES $1"
	# up to 30 s: on a loaded machine tcpdump takes a while to start
	n=0
	until grep -q "listening on" "$1.err" 2>/dev/null; do
		n=$((n + 1))
		test $n -lt 600 || { cat "$1.err"; return 1; }
		sleep 0.05
	done
}
capture_stop() {
	# A stop loses what tcpdump has not read yet: first send a marker (UDP
	# to the discard port, after every agg packet) and wait until each
	# capture holds it.  The reports count it as "other".  nc -q0, not
	# -w0: with -w0 nc may exit at stdin's EOF before it sends (about 1
	# in 300 on an idle machine).  The marker is sent again every 20 looks
	# (a datagram waiting on ARP on a loaded machine, or one a capture
	# missed, is not a reason to fail), so a capture may hold several.
	CAP_MARKS=0
	for f in $CAP_FILES; do
		n=0
		until tcpdump -r "$f" -nn "udp port 9" 2>/dev/null | grep -q "\.9: UDP"; do
			if [ $((n % 20)) = 0 ]; then
				echo end | vcluster_run "$CAP_HOST" nc -u -q0 "$CAP_MARK_TO" 9 ||
					{ echo "cannot send the marker from $CAP_HOST"; return 1; }
				CAP_MARKS=$((CAP_MARKS + 1))
			fi
			n=$((n + 1))
			test $n -lt 600 || { echo "no marker in $f after $((n / 20)) sends"; return 1; }
			sleep 0.05
		done
	done &&
	for p in $CAP_PIDS; do kill -INT "$p"; done &&
	for p in $CAP_PIDS; do wait "$p"; done &&
	for f in $CAP_FILES; do
		grep -q "^0 packets dropped by kernel" "$f.err" || { cat "$f.err"; return 1; }
	done &&
	CAP_PIDS= CAP_FILES=
}
command -v test_atexit >/dev/null 2>&1 && test_atexit 'for p in $CAP_PIDS; do kill "$p"; done'
