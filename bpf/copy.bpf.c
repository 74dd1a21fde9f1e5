// SPDX-License-Identifier: GPL-2.0-only
/*
 * A second baseline of the aggregation-rate benchmark: count every packet,
 * copy all of it, 4 KiB at a time, into a per-CPU buffer (what agg_xdp
 * does before it adds), and drop it.  Between this and XDP_DROP is what
 * reading a packet costs at all; between this and agg_xdp, the adding.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PIECE 4096

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} copy_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[PIECE]);
} copy_buf SEC(".maps");

SEC("xdp.frags")
int agg_copy(struct xdp_md *ctx)
{
	__u32 k = 0, len = bpf_xdp_get_buff_len(ctx);
	__u64 *c = bpf_map_lookup_elem(&copy_count, &k);
	void *buf = bpf_map_lookup_elem(&copy_buf, &k);

	if (!c || !buf)
		return XDP_DROP;
	*c += 1;
	/* 16 pieces: the largest IPv4 packet. */
#pragma clang loop unroll(disable)
	for (__u32 off = 0; off < 16 * PIECE; off += PIECE) {
		__u32 n = len - off;

		if (off >= len)
			break;
		if (n > PIECE)
			n = PIECE;
		if (!n || bpf_xdp_load_bytes(ctx, off, buf, n))
			break;
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
