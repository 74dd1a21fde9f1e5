// SPDX-License-Identifier: GPL-2.0-only
/*
 * The virtual cluster's switch in XDP (t/lib/vcluster.sh, VCLUSTER_SWITCH=xdp):
 * on every bridge-side port, a unicast frame to a host's MAC goes straight
 * to that host's port (a DEVMAP_HASH entry), as a switch forwards by its
 * forwarding table; veth then runs the host's XDP program on the frame in
 * place.  Broadcast, multicast, unknown destinations and frames back to
 * their own port go on to the Linux bridge (XDP_PASS), so ARP, TCP and
 * everything else work as before.  vcluster.sh fills "fdb" (MAC -> port
 * ifindex) and "ports" statically from the hosts it made.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);		/* destination MAC in the low 48 bits */
	__type(value, __u32);		/* its port's ifindex */
} fdb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);		/* ifindex */
	__type(value, __u32);		/* the same ifindex */
} ports SEC(".maps");

enum { PORT_FORWARDED, PORT_PASSED, PORT_NSTATS };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PORT_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} port_stats SEC(".maps");

static __always_inline int counted(__u32 what, int act)
{
	__u64 *c = bpf_map_lookup_elem(&port_stats, &what);

	if (c)
		*c += 1;
	return act;
}

SEC("xdp.frags")
int agg_port(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u64 mac = 0;
	__u32 *port;

	if ((void *)(eth + 1) > end || (eth->h_dest[0] & 1))
		return counted(PORT_PASSED, XDP_PASS);	/* broadcast, multicast */
	__builtin_memcpy(&mac, eth->h_dest, ETH_ALEN);
	port = bpf_map_lookup_elem(&fdb, &mac);
	if (!port || *port == ctx->ingress_ifindex)
		return counted(PORT_PASSED, XDP_PASS);
	counted(PORT_FORWARDED, 0);
	return bpf_redirect_map(&ports, *port, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
