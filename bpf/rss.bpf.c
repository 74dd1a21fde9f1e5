// SPDX-License-Identifier: GPL-2.0-only
/*
 * RSS for the virtual cluster (t/lib/vcluster.sh, VCLUSTER_QUEUES): on a
 * bridge port's ingress, record the frame's receive queue as the hash of
 * its flow (the kernel's: addresses and ports, as a NIC's RSS hashes the
 * 4-tuple) modulo AGG_RSS_SPAN.  The bridge then sends it to the port of
 * its destination on transmit queue "recorded mod queues" (skb_tx_hash),
 * and veth hands it to the host's receive queue of that number.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define AGG_RSS_SPAN	64	/* any power of two up to 64 queues divides it */

SEC("tc")
int agg_rss(struct __sk_buff *skb)
{
	__u32 h = bpf_get_hash_recalc(skb);

	skb->queue_mapping = h % AGG_RSS_SPAN + 1;	/* + 1: "recorded" */
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
