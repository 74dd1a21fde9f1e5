// SPDX-License-Identifier: GPL-2.0-only
/*
 * XDP_PASS for the bridge-side ports of the virtual cluster: a veth peer
 * delivers XDP_TX frames only when the receiving end runs an XDP program.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp.frags")
int agg_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
