# SPDX-License-Identifier: GPL-2.0-only
# Packet loss for the virtual cluster (vcluster.sh), with the loss injector
# bpf/loss.bpf.c loaded by losstool on the hosts' bridge-side ports.
#
#   loss_on [--type T] PPM [in|out|both] [HOST...]
#                  drop PPM per million agg packets (of type T only:
#                  data, result, request or probe) on the ports of HOST
#                  (default every host), in: what the host sends, out:
#                  what goes to it, both (default); replaces any loss
#                  already on, with a fresh log and fresh counters
#   loss_off       remove it (registered with test_atexit by loss_on)
#   loss_log       one line per dropped packet, in drop order:
#                  dir iter seg from type attempt saddr daddr ifindex
#   loss_stats     seen, dropped, seen_in, dropped_in, seen_out,
#                  dropped_out, overflow, logged ("name value" lines)
#   loss_stat NAME one value of loss_stats
#
# The port is the plan's ($DP_PLAN, dp.sh) unless LOSS_PORT is set.

LOSS_PIN_DIR=/sys/fs/bpf/aggloss-$$
LOSS_ATEXIT=

loss_tool_() {
	nsenter --net="/var/run/netns/$(vcluster_brns)" -- losstool "$@"
}

loss_off() {
	[ -e "$LOSS_PIN_DIR" ] || return 0
	loss_tool_ detach "$LOSS_PIN_DIR"
}

loss_on() {
	loss_type=
	if [ "$1" = --type ]; then
		loss_type="--type $2"
		shift 2
	fi
	loss_ppm=$1
	loss_dirs=${2:-both}
	[ $# -ge 2 ] && shift 2 || shift $#
	case $loss_dirs in
	both) loss_dirs="in out" ;;
	in|out) ;;
	*) echo "loss_on: direction '$loss_dirs': in, out or both" >&2; return 2 ;;
	esac
	[ -z "$VCLUSTER_PORT_PIN" ] ||
		{ echo "loss_on: loss needs VCLUSTER_SWITCH=bridge (forwarded frames skip the ports' tc)" >&2; return 2; }
	loss_port=${LOSS_PORT:-$(dp_plan_field port)}
	[ -n "$loss_port" ] || { echo "loss_on: no port (set LOSS_PORT or DP_PLAN)" >&2; return 2; }
	if [ -z "$LOSS_ATEXIT" ] && command -v test_atexit >/dev/null 2>&1; then
		test_atexit loss_off
		LOSS_ATEXIT=1
	fi
	loss_off || return 1
	for loss_h in ${*:-$(vcluster_hosts)}; do
		loss_p=$(vcluster_port "$loss_h")
		[ -n "$loss_p" ] || { echo "loss_on: no host $loss_h in the cluster" >&2; return 2; }
		for loss_d in $loss_dirs; do
			loss_tool_ attach "$loss_p" "$loss_d" "$loss_ppm" "$loss_port" \
				"$LOSS_PIN_DIR" $loss_type || return 1
		done
	done
}

loss_log() {
	loss_tool_ log "$LOSS_PIN_DIR"
}

loss_stats() {
	loss_tool_ stats "$LOSS_PIN_DIR"
}

loss_stat() {
	loss_stats | awk -v k="$1" '$1 == k { print $2; f = 1 } END { exit !f }'
}
