// SPDX-License-Identifier: GPL-2.0-only
/*
 * The per-interface XDP dispatcher: an interface runs one XDP program, and
 * several agg jobs may share it (each on its own UDP port).  agg-load
 * attaches this program once per interface and registers every job's
 * agg_xdp in "progs" under the index "ports" gives its port; a UDP packet
 * to a registered port is tail-called into that job's program, everything
 * else passes untouched.  Replacing a job's program is one map update.
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
	struct udphdr *udp = (void *)(ip + 1);
	struct agg_dispatch *d;
	__u32 port;

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	port = bpf_ntohs(udp->dest);
	d = bpf_map_lookup_elem(&ports, &port);
	if (d)
		bpf_tail_call(ctx, &progs, d->idx);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
