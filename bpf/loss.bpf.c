// SPDX-License-Identifier: GPL-2.0-only
/*
 * A loss injector for the tests (the kernel has no netem): a tcx program
 * on a bridge-side port of the virtual cluster that drops a chosen
 * fraction of agg packets, and only agg packets.  On tcx ingress it sees
 * what the host sends, on tcx egress what goes to the host.  Every drop
 * is logged (the "loss_log" array, in drop order) and counted, so a test
 * can tell what recovery had to repair.  t/unit/losstool.c loads it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "agg.h"
#include "loss.h"

/* Set by the loader; the verifier sees constants. */
const volatile __u32 cfg_ppm;		/* drops per million agg packets */
const volatile __u16 cfg_port;		/* the plan's UDP port, host order */
const volatile __u32 cfg_nports = 1;	/* ports cfg_port .. cfg_port + cfg_nports - 1 */
const volatile __u8 cfg_type;		/* AGG_T_* to drop, 0: every type */
const volatile __u8 cfg_dir;		/* LOSS_IN or LOSS_OUT: the hook */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, LOSS_LOG_CAP);
	__type(key, __u32);
	__type(value, struct loss_rec);
} loss_log SEC(".maps");

/* The log's next index, shared by every CPU and every port. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} loss_head SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOSS_NCOUNT);
	__type(key, __u32);
	__type(value, __u64);
} loss_count SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&loss_count, &what);

	if (c)
		*c += 1;
}

#define IP_OFF	sizeof(struct ethhdr)
#define HDR_OFF	(IP_OFF + sizeof(struct iphdr) + sizeof(struct udphdr))

SEC("tc")
int agg_loss(struct __sk_buff *skb)
{
	struct iphdr ip;
	struct udphdr udp;
	struct agg_hdr h;
	struct loss_rec *r;
	__u32 zero = 0, idx;
	__u64 *head, n;

	/* Loads, not direct access: a frame need not be linear here. */
	if (skb->protocol != bpf_htons(ETH_P_IP) ||
	    bpf_skb_load_bytes(skb, IP_OFF, &ip, sizeof(ip)) ||
	    ip.version != 4 || ip.ihl != 5 || ip.protocol != IPPROTO_UDP ||
	    (ip.frag_off & bpf_htons(0x3fff)) ||
	    bpf_skb_load_bytes(skb, IP_OFF + sizeof(ip), &udp, sizeof(udp)) ||
	    (__u16)(bpf_ntohs(udp.dest) - cfg_port) >= cfg_nports ||
	    bpf_skb_load_bytes(skb, HDR_OFF, &h, sizeof(h)) ||
	    h.magic != AGG_MAGIC || (cfg_type && h.type != cfg_type))
		return TC_ACT_UNSPEC;	/* not ours to drop: tcx goes on */

	count(cfg_dir == LOSS_IN ? LOSS_SEEN_IN : LOSS_SEEN_OUT);
	/* 2^32 is not a multiple of 10^6: the bias is below 1e-3 ppm. */
	if (bpf_get_prandom_u32() % 1000000 >= cfg_ppm)
		return TC_ACT_UNSPEC;
	count(cfg_dir == LOSS_IN ? LOSS_DROP_IN : LOSS_DROP_OUT);

	head = bpf_map_lookup_elem(&loss_head, &zero);
	if (!head)
		return TC_ACT_SHOT;
	n = __sync_fetch_and_add(head, 1);
	idx = n;
	r = n < LOSS_LOG_CAP ? bpf_map_lookup_elem(&loss_log, &idx) : NULL;
	if (!r) {
		count(LOSS_OVERFLOW);
		return TC_ACT_SHOT;
	}
	r->ns = bpf_ktime_get_ns();
	r->iter = h.iter;
	r->seg = h.seg;
	r->saddr = ip.saddr;
	r->daddr = ip.daddr;
	r->ifindex = skb->ifindex;
	r->from = h.from;
	r->attempt = h.attempt;
	r->type = h.type;
	r->dir = cfg_dir;
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
