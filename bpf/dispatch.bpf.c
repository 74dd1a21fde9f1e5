// SPDX-License-Identifier: GPL-2.0-only
/*
 * The per-interface XDP dispatcher: an interface runs one XDP program, and
 * several agg jobs may share it (each on its own UDP port).  agg-load
 * attaches this program once per interface and registers every job's
 * agg_xdp in "progs" under the index "ports" gives its port; a UDP packet
 * to a registered port P, or to P + 1 .. P + 3, is tail-called into that
 * job's program, everything else passes untouched.  Replacing a job's program is one map update.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "agg.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, AGG_MAX_JOBS_PER_DEV);
	__type(key, __u32);
	__type(value, __u32);
} progs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGG_MAX_JOBS_PER_DEV);
	__type(key, __u32);			/* UDP port, host order */
	__type(value, struct agg_dispatch);
} ports SEC(".maps");

SEC("xdp.frags")
int agg_dispatch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp;
	struct agg_dispatch *d;
	__u32 port;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl < 5 ||
	    (ip->frag_off & bpf_htons(0x1fff)))
		return XDP_PASS;	/* a later fragment has no UDP header */
	/* After the IP options, if any: the job's program drops those. */
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	port = bpf_ntohs(udp->dest);
	/* A job owns its port and the next three (agg-wire(7)); its own port
	 * first, so a job's port that is another's port + k stays its own. */
#pragma clang loop unroll(full)
	for (__u32 k = 0; k < 4; k++) {
		__u32 key = port - k;

		if (port < k)
			break;
		d = bpf_map_lookup_elem(&ports, &key);
		if (d)
			bpf_tail_call(ctx, &progs, d->idx);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
