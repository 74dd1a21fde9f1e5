// SPDX-License-Identifier: GPL-2.0-only
/*
 * The agg data plane: one XDP program and one TC program per node, loaded
 * and configured by agg-load for the node's role in every tree of a plan.
 *
 * XDP (agg_xdp), for every agg packet addressed to this node:
 *   DATA from a child (or the local worker, injected with BPF_PROG_RUN):
 *     add its values into the segment's slot unless that contributor is
 *     already in; when every contributor is in, rewrite the packet with
 *     the aggregate and send it to the parent (through TC), or at the root turn it
 *     into the RESULT and pass it to TC for the fan-out.
 *   RESULT from the parent: store the values for the local worker (the
 *     mmap-able "results" map), then fan out to the children through TC;
 *     the packet that completes the iteration becomes the fetch signal,
 *     delivered to agg-recv's UDP port (plan port + 1).
 * Everything that is not agg traffic for this node passes untouched.  The
 * job's ports are the plan's port P and P + 1 .. P + 3 (agg-wire(7)): a
 * packet to any of them is checked, on P + 1 .. P + 3 too (side_port), and
 * one with IP options or a fragment, which agg never sends, is malformed
 * (odd_ip).
 *
 * Packets that XDP hands to TC carry what TC is to do in the XDP metadata
 * (struct agg_tcmeta, with the load's random key), never in the packet, so
 * nothing from the wire can make TC act.
 *
 * TC ingress (agg_tc): a RESULT our XDP program flagged AGG_F_FANOUT is
 * copied to every child of its tree with bpf_clone_redirect (XDP can send
 * one frame per packet; a tree node has up to 63 children on one link);
 * an aggregate flagged AGG_F_UP goes to the parent with bpf_redirect.
 * Both leave through the interface's qdisc, which pushes back when the
 * link is busy (XDP_TX on veth drops instead).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <linux/if_packet.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "agg.h"

/* Filled by agg-load before the load; the verifier sees them as constants. */
const volatile __u32 cfg_job;
const volatile __u64 cfg_token;
const volatile __u16 cfg_port;		/* host order */
const volatile __u32 cfg_self;		/* our node index */
const volatile __u32 cfg_self_addr;	/* network order */
const volatile __u8 cfg_mac[6];
const volatile __u32 cfg_ifindex;
const volatile __u32 cfg_worker;	/* 1: this node contributes and receives */
const volatile __u32 cfg_segment = 128;	/* values per segment */
const volatile __u32 cfg_nsegs = 1;	/* wire segments: exponents + data */
const volatile __u32 cfg_nexp;		/* exponent segments (the first ones) */
const volatile __u32 cfg_nslots = 1;	/* the slot pool */
const volatile __u32 cfg_nchunks = 1;	/* chunks per slot (agg.h "slots") */
const volatile __u32 cfg_chunk = 128;	/* values per chunk: ceil(segment / nchunks) */
const volatile __u32 cfg_chunk_cap = 128; /* accumulators per chunk: cfg_chunk up to x4 */
const volatile __u32 cfg_period = 1;	/* entries of "segmap" */
const volatile __u32 cfg_meta_key;	/* random per load: marks XDP -> TC metadata */
const volatile __u32 cfg_sparse_root = ~0U; /* node index of tree 0's root */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGG_MAX_NODES);
	__type(key, __u32);		/* IPv4 address, network order */
	__type(value, __u32);		/* node index */
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGG_MAX_NODES);
	__type(key, __u32);
	__type(value, struct agg_node_info);
} nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGG_MAX_TREES);
	__type(key, __u32);
	__type(value, struct agg_tree_info);
} trees SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGG_MAX_PERIOD);
	__type(key, __u32);
	__type(value, __u32);		/* tree of wire segment s: segmap[s % period] */
} segmap SEC(".maps");

/* (tree << 16 | node) -> the node's bit in the tree's contributor bitmap
 * here: its children's, and ours when we are a worker with children. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGG_MAX_TREES * (AGG_MAX_KIDS + 1));
	__type(key, __u32);
	__type(value, __u32);
} kids SEC(".maps");

struct agg_lock {
	struct bpf_spin_lock lock;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);		/* the slot pool size, set by agg-load */
	__type(key, __u32);
	__type(value, struct agg_lock);
} locks SEC(".maps");

/* Value: struct agg_slot + segment s64 accumulators (size set by agg-load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct agg_slot) + 8);
} slots SEC(".maps");

/* Per-CPU scratch: one segment of int32 values. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 8);
} scratch SEC(".maps");

/* One entry per wire segment: its int32 result values (mmap-able). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 8);
} results SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_meta);
} meta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGG_PROGRESS_SLOTS);
	__type(key, __u32);
	__type(value, struct agg_progress);
} progress SEC(".maps");

/*
 * The wire segment of every result stored here, for agg-send to wait on
 * (epoll) instead of polling "meta": its window moves on results only.
 * Records are only a wake-up: a full ring loses them, and the sender
 * reads what is stored from "meta".
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

/* The node's clock (struct agg_clock): the tools open iterations in it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_clock);
} clock SEC(".maps");

/* The plan text the node was loaded with (agg-send, agg-recv read it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 8);
} plan SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AGG_S_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* What agg-send did here (enum agg_sent); only user space writes it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGG_SENT_ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} sent SEC(".maps");

/* The last agg-send's congestion state (struct agg_cc_state); only user
 * space touches it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_cc_state);
} cc SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &what);

	if (c)
		*c += 1;
}

static __always_inline int drop(__u32 why)
{
	count(why);
	return XDP_DROP;
}

static __always_inline __u16 ip_csum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

	ip->check = 0;
#pragma clang loop unroll(full)
	for (int i = 0; i < (int)sizeof(*ip) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

#define HDR_OFF (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define VAL_OFF (HDR_OFF + sizeof(struct agg_hdr))

struct pkt {
	struct ethhdr *eth;
	struct iphdr *ip;
	struct udphdr *udp;
	struct agg_hdr *h;
};

/* Re-derive the header pointers (after a helper changed the packet). */
static __always_inline int pkt_parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	p->eth = data;
	p->ip = data + sizeof(struct ethhdr);
	p->udp = data + sizeof(struct ethhdr) + sizeof(struct iphdr);
	p->h = data + HDR_OFF;
	if ((void *)(p->h + 1) > end)
		return -1;
	return 0;
}

/* Address the packet from us to node n, as type. */
static __always_inline void pkt_address(struct pkt *p, const struct agg_node_info *n,
					__u8 type)
{
	__builtin_memcpy(p->eth->h_dest, n->mac, ETH_ALEN);
	p->eth->h_source[0] = cfg_mac[0];
	p->eth->h_source[1] = cfg_mac[1];
	p->eth->h_source[2] = cfg_mac[2];
	p->eth->h_source[3] = cfg_mac[3];
	p->eth->h_source[4] = cfg_mac[4];
	p->eth->h_source[5] = cfg_mac[5];
	p->ip->saddr = cfg_self_addr;
	p->ip->daddr = n->addr;
	p->ip->ttl = 64;
	p->ip->check = ip_csum(p->ip);
	p->udp->source = bpf_htons(cfg_port);
	p->udp->dest = bpf_htons(cfg_port);
	p->udp->check = 0;	/* legal for IPv4; the stack's partial sum is not */
	p->h->type = type;
	p->h->from = cfg_self;
}

/* Pass the packet to our TC program with flags (AGG_F_*), in the metadata. */
static __always_inline int to_tc(struct xdp_md *ctx, __u32 flags)
{
	struct agg_tcmeta *m;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m)))
		return XDP_ABORTED;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return XDP_ABORTED;
	m->key = cfg_meta_key;
	m->flags = flags;
	return XDP_PASS;
}

/* (ver, seg) strictly newer than the slot's? */
static __always_inline int newer(__u64 ver, __u32 seg, struct agg_slot *s)
{
	int c = agg_ver_cmp(ver, s->ver);

	return c > 0 || (c == 0 && seg > s->seg);
}

/*
 * May a packet of version v go on here?  0, or the drop counter: a run
 * older than the node's (drop_run), or too far ahead of the node's clock
 * (drop_ahead: a single packet must not move every slot out of reach of
 * the workers).  A newer v moves the clock.
 */
static __always_inline int admit(__u64 v)
{
	__u32 zero = 0;
	struct agg_clock *c = bpf_map_lookup_elem(&clock, &zero);
	__u64 now;

	if (!c)
		return AGG_S_ERROR;
	now = *(volatile __u64 *)&c->now;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 4; i++) {
		__u64 prev;

		if (agg_ver_cmp(v, now) <= 0)
			return agg_ver_run(v) != agg_ver_run(now) ? AGG_S_DROP_RUN : 0;
		if (agg_ver_too_far(v, now))
			return AGG_S_DROP_AHEAD;
		prev = __sync_val_compare_and_swap(&c->now, now, v);
		if (prev == now)
			return 0;
		now = prev;	/* moved meanwhile: judge again */
	}
	return 0;
}

/*
 * The slot of (iteration, segment): segments are numbered across
 * iterations, and the pool holds two windows, so a segment's slot is
 * reused only once every worker has sent a segment a window later, that
 * is once every worker has the segment's result (SwitchML's shadow pool).
 * Until then a resend or a request can be answered from the slot.
 */
static __always_inline __u32 slot_of(__u32 iter, __u32 seg)
{
	return ((__u64)iter * cfg_nsegs + seg) % cfg_nslots;
}

/*
 * The loops run over a chunk's whole capacity, cfg_chunk_cap values (a
 * multiple of 4, a constant: the verifier walks one path, and the steps
 * can take four values): values past the packet's n in the scratch
 * buffer are left from earlier packets and land in accumulators nothing
 * reads.
 */
#define MAX_STEP(k) do { if (buf[k] > s->acc[k]) s->acc[k] = buf[k]; } while (0)
#define MIN_STEP(k) do { if (buf[k] < s->acc[k]) s->acc[k] = buf[k]; } while (0)
/* Branch-free, or the verifier follows every path: whether value k of n
 * is a sum past the limit, and the value to send. */
#define SAT(k, n) ((((__u64)(AGG_SUM_LIMIT - s->acc[k]) | (__u64)(s->acc[k] + AGG_SUM_LIMIT)) >> 63) & \
		   ((__u64)((__s64)(k) - (n)) >> 63))
#define FINAL(k) (s->acc[k] > AGG_SUM_LIMIT ? AGG_POISON_HI : \
		  s->acc[k] < -AGG_SUM_LIMIT ? lo : (__s32)s->acc[k])

/* The slot's final values into buf; nonzero if one of the first n (the
 * real ones) is a saturated sum.  A sum beyond +-2^30 in either direction
 * is poison (the receiver's NaN); a min's own poison stays the low one.
 * One value a step: it runs once per segment, and with four a step the
 * verifier took 569K steps for the program at segment 16368 instead of
 * 143K. */
static __always_inline __u32 finish(struct agg_slot *s, __s32 *buf, __u32 n)
{
	__u32 cap = cfg_chunk_cap;
	__s32 lo = s->op == AGG_OP_MIN ? AGG_POISON_LO : AGG_POISON_HI;
	__u64 sat = 0;

#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < AGG_CHUNK; i++) {
		if (i >= cap)
			break;
		sat |= SAT(i, n);
		buf[i] = FINAL(i);
	}
	return sat != 0;
}

/* Values of chunk c: cfg_chunk, fewer in the last chunk; 0 past the end. */
static __always_inline __u32 chunk_len(__u32 c)
{
	__u32 lim = cfg_chunk, first = c * lim;

	if (c >= cfg_nchunks || first >= cfg_segment)
		return 0;
	return cfg_segment - first < lim ? cfg_segment - first : lim;
}

/* Outcomes of a chunk besides the drop counters (enum agg_stat). */
enum { AGG_NEW = 0x100, AGG_COMPLETE, AGG_SERVE };

/*
 * The chunks are processed by global functions: the verifier checks each
 * once, on its own, whatever the number of chunks (a bpf_loop callback or
 * an inlined loop would be walked again per chunk and per path).  Their
 * arguments: the chunk c, and in "how" the packet's op, contributor bit and
 * whether it is a REQUEST (AGG_HOW).
 */
#define AGG_HOW(c, op, bit, request) ((c) | (op) << 8 | (bit) << 16 | (request) << 24)

/*
 * Add the packet's chunk c into the slot's chunk c, under that chunk's
 * lock; the chunk's outcome: AGG_NEW, AGG_COMPLETE (the chunk has every
 * contributor now), AGG_SERVE (finished before) or a drop counter.  Chunk
 * 0 decides what the packet is; every later chunk must agree.  Every
 * packet passes the chunks in order, so the packet that completes the
 * last chunk is the last contributor everywhere: it sends the aggregate on.
 */
__attribute__((noinline))
int chunk_add(struct xdp_md *ctx, __u32 how, __u64 ver, __u32 seg, __u64 expect)
{
	__u32 c = how & 0xff, op = (how >> 8) & 0xff, bit = (how >> 16) & 63;
	__u32 request = how >> 24, zero = 0, n = chunk_len(c), len = cfg_chunk;
	__u32 cap = cfg_chunk_cap;
	__u32 key = slot_of(agg_ver_iter(ver), seg) * cfg_nchunks + c;
	struct agg_lock *lk = bpf_map_lookup_elem(&locks, &key);
	struct agg_slot *s = bpf_map_lookup_elem(&slots, &key);
	__s32 *buf = bpf_map_lookup_elem(&scratch, &zero);
	int v = AGG_NEW;

	if (!lk || !s || !buf || !n || n > len || len > cap)
		return AGG_S_ERROR;
	if (!request && bpf_xdp_load_bytes(ctx, VAL_OFF + c * len * 4, buf, n * 4))
		return AGG_S_DROP_MALFORMED;
	bpf_spin_lock(&lk->lock);
	if (s->ver == ver && s->seg == seg) {
		if (s->op != op) {
			v = AGG_S_DROP_MALFORMED;
		} else if (s->done) {
			/* A resend or a request from a child that has no
			 * result: finished here, send it on again. */
			v = AGG_SERVE;
		} else if (request) {
			v = AGG_S_PENDING;
		} else if (s->bitmap & (1ULL << bit)) {
			v = AGG_S_DROP_DUP;
		} else if (op == AGG_OP_SUM) {
			/* Four values a step, read as two 64-bit words. */
#pragma clang loop unroll(disable)
			for (__u32 i = 0; i < AGG_CHUNK; i += 4) {
				__u64 w0, w1;

				if (i >= cap)
					break;
				w0 = *(__u64 *)&buf[i];
				w1 = *(__u64 *)&buf[i + 2];
				s->acc[i] += (__s64)(w0 << 32) >> 32;
				s->acc[i + 1] += (__s64)w0 >> 32;
				s->acc[i + 2] += (__s64)(w1 << 32) >> 32;
				s->acc[i + 3] += (__s64)w1 >> 32;
			}
		} else if (op == AGG_OP_MAX) {
#pragma clang loop unroll(disable)
			for (__u32 i = 0; i < AGG_CHUNK; i += 4) {
				if (i >= cap)
					break;
				MAX_STEP(i);
				MAX_STEP(i + 1);
				MAX_STEP(i + 2);
				MAX_STEP(i + 3);
			}
		} else {
#pragma clang loop unroll(disable)
			for (__u32 i = 0; i < AGG_CHUNK; i += 4) {
				if (i >= cap)
					break;
				MIN_STEP(i);
				MIN_STEP(i + 1);
				MIN_STEP(i + 2);
				MIN_STEP(i + 3);
			}
		}
	} else if (newer(ver, seg, s)) {
		if (request) {
			v = AGG_S_PENDING;
		} else if (s->ver == ver && !s->done) {
			/* The same iteration's older segment unfinished: the
			 * sender overran the window.  A newer iteration or
			 * run abandons it. */
			v = AGG_S_DROP_BUSY;
		} else {
			s->ver = ver;
			s->seg = seg;
			s->bitmap = 0;
			s->done = 0;
			s->op = op;
#pragma clang loop unroll(disable)
			for (__u32 i = 0; i < AGG_CHUNK; i += 4) {
				if (i >= cap)
					break;
				s->acc[i] = buf[i];
				s->acc[i + 1] = buf[i + 1];
				s->acc[i + 2] = buf[i + 2];
				s->acc[i + 3] = buf[i + 3];
			}
		}
	} else {
		v = AGG_S_DROP_STALE;
	}
	if (v == AGG_NEW) {
		s->bitmap |= 1ULL << bit;
		if (s->bitmap == expect) {
			s->done = 1;
			v = AGG_COMPLETE;
		}
	}
	bpf_spin_unlock(&lk->lock);
	return v;
}

/* The finished slot's chunk c into the packet: 0, 1 if a sum saturated,
 * -1 if the slot no longer holds (ver, seg) finished (a restarted job
 * reused it: never send a mix) or the packet is too short. */
__attribute__((noinline))
int chunk_finish(struct xdp_md *ctx, __u32 c, __u64 ver, __u32 seg)
{
	__u32 key = slot_of(agg_ver_iter(ver), seg) * cfg_nchunks + c, zero = 0, n = chunk_len(c);
	__u32 len = cfg_chunk;
	struct agg_lock *lk = bpf_map_lookup_elem(&locks, &key);
	struct agg_slot *s = bpf_map_lookup_elem(&slots, &key);
	__s32 *buf = bpf_map_lookup_elem(&scratch, &zero);
	int ok, sat = 0;

	if (!lk || !s || !buf || !n || n > len || len > cfg_chunk_cap)
		return -1;
	bpf_spin_lock(&lk->lock);
	ok = s->ver == ver && s->seg == seg && s->done;
	if (ok)
		sat = finish(s, buf, n);
	bpf_spin_unlock(&lk->lock);
	if (!ok || bpf_xdp_store_bytes(ctx, VAL_OFF + c * len * 4, buf, n * 4))
		return -1;
	return sat;
}

/* Is the slot's last chunk finished with (ver, seg)? */
static __always_inline int slot_done(__u32 si, __u64 ver, __u32 seg)
{
	__u32 key = si * cfg_nchunks + cfg_nchunks - 1;
	struct agg_lock *lk = bpf_map_lookup_elem(&locks, &key);
	struct agg_slot *s = bpf_map_lookup_elem(&slots, &key);
	int done;

	if (!lk || !s)
		return 0;
	bpf_spin_lock(&lk->lock);
	done = s->ver == ver && s->seg == seg && s->done;
	bpf_spin_unlock(&lk->lock);
	return done;
}

/* Copy our stored result of seg, version ver, into the packet: 0, or -1
 * when it is not (or no longer: a newer one is being written) that one. */
static __always_inline int copy_result(struct xdp_md *ctx, __u32 seg, __u64 ver)
{
	struct agg_meta *m = bpf_map_lookup_elem(&meta, &seg);
	void *res = bpf_map_lookup_elem(&results, &seg);
	__u32 seq;

	if (!m || !res)
		return -1;
	seq = *(volatile __u32 *)&m->seq;
	if ((seq & 1) || m->ver != ver)
		return -1;
	if (bpf_xdp_store_bytes(ctx, VAL_OFF, res, cfg_segment * 4))
		return -1;
	return __sync_fetch_and_add(&m->seq, 0) == seq ? 0 : -1;
}

/* Count a stored data segment of version ver; 1 when it completes the
 * iteration (the packet becomes the fetch signal). */
static __always_inline int progress_add(__u64 ver)
{
	__u32 k = (__u32)ver % AGG_PROGRESS_SLOTS;
	struct agg_progress *pg = bpf_map_lookup_elem(&progress, &k);
	int done;

	if (!pg)
		return 0;
	bpf_spin_lock(&pg->lock);
	if (pg->ver != ver) {
		pg->ver = ver;
		pg->count = 0;
		pg->want = 0;
	}
	done = ++pg->count == (pg->want ? pg->want : cfg_nsegs - cfg_nexp);
	bpf_spin_unlock(&pg->lock);
	return done;
}

/*
 * Store the packet's values as our result of seg, version ver, under the
 * sequence lock (agg.h, "meta"): 0 stored (*signal: it completes the
 * iteration), -1 the result is ours already, or a drop counter.
 */
static __always_inline int store_result(struct xdp_md *ctx, __u32 seg, __u64 ver,
					__u32 op, int *signal)
{
	struct agg_meta *m = bpf_map_lookup_elem(&meta, &seg);
	void *res = bpf_map_lookup_elem(&results, &seg);
	__u32 seq;
	int c, bad;

	if (!m || !res)
		return AGG_S_ERROR;
	seq = *(volatile __u32 *)&m->seq;
	c = agg_ver_cmp(ver, m->ver);
	if (c < 0)
		return AGG_S_DROP_STALE;
	if (c == 0 && !(seq & 1))
		return -1;
	/* The sequence lock: odd while we write; a reader that saw it
	 * change drops what it read.  Another CPU writing (odd, or the swap
	 * lost) has this result or a newer one. */
	if ((seq & 1) || __sync_val_compare_and_swap(&m->seq, seq, seq + 1) != seq)
		return AGG_S_DROP_DUP;
	bad = bpf_xdp_load_bytes(ctx, VAL_OFF, res, cfg_segment * 4);
	m->ver = bad ? 0 : ver;
	m->op = op;
	__sync_fetch_and_add(&m->seq, 1);
	if (bad)
		return AGG_S_DROP_MALFORMED;
	count(AGG_S_STORED);
	bpf_ringbuf_output(&events, &seg, sizeof(seg), 0);
	*signal = seg >= cfg_nexp && progress_add(ver);
	return 0;
}

static __always_inline int aggregate(struct xdp_md *ctx, struct agg_hdr *h,
				     struct agg_tree_info *ti, __u32 bit)
{
	__u32 seg = h->seg, op = h->op, from = h->from;
	__u64 ver = agg_ver(h->run, h->iter);
	__u32 si = slot_of(h->iter, seg), request = h->type == AGG_T_REQUEST;
	__u64 expect = ti->expect;
	int first = AGG_S_ERROR, last = 0, what, sat = 0, sig = 0;
	struct pkt p;

#pragma clang loop unroll(disable)
	for (__u32 c = 0; c < AGG_MAX_CHUNKS; c++) {
		int v;

		if (c >= cfg_nchunks)
			break;
		v = chunk_add(ctx, AGG_HOW(c, op, bit, request), ver, seg, expect);
		if (c == 0) {
			first = v;
			if (v != AGG_NEW && v != AGG_COMPLETE)
				break;	/* decided by chunk 0 alone */
		} else if (v != AGG_NEW && v != AGG_COMPLETE) {
			/* Chunks disagree: only a packet racing a restart
			 * of the job, or a bug.  What is added stays;
			 * nothing is sent. */
			return drop(AGG_S_ERROR);
		}
		last = v;
	}
	if (first != AGG_NEW && first != AGG_COMPLETE && first != AGG_SERVE)
		return drop(first < AGG_S_COUNT ? first : AGG_S_ERROR);
	if (first == AGG_SERVE) {
		/* Finished in chunk 0, but the last contributor may still be
		 * adding the later chunks on another CPU: then it is a
		 * duplicate of a packet the slot is taking right now. */
		if (cfg_nchunks > 1 && !slot_done(si, ver, seg))
			return drop(AGG_S_DROP_DUP);
		what = AGG_SERVE;
	} else {
		count(AGG_S_ADDED);
		if (last != AGG_COMPLETE)
			return XDP_DROP;	/* consumed into the slot */
		count(AGG_S_DONE);
		what = AGG_COMPLETE;
	}
	if (what == AGG_SERVE) {
		count(AGG_S_SERVED);
		if (cfg_worker && from != cfg_self) {
			/* An aggregator that has the result already answers its
			 * child itself: no round trip to the root. */
			struct agg_node_info *n = bpf_map_lookup_elem(&nodes, &from);

			if (n && !copy_result(ctx, seg, ver)) {
				if (pkt_parse(ctx, &p))
					return XDP_ABORTED;
				p.h->attempt = 0;
				pkt_address(&p, n, AGG_T_RESULT);
				return to_tc(ctx, AGG_F_UP);
			}
		}
	}
	/* The aggregate into the packet, chunk by chunk. */
#pragma clang loop unroll(disable)
	for (__u32 c = 0; c < AGG_MAX_CHUNKS; c++) {
		int r;

		if (c >= cfg_nchunks)
			break;
		r = chunk_finish(ctx, c, ver, seg);
		if (r < 0)
			return XDP_ABORTED;
		sat |= r;
	}
	if (sat && op == AGG_OP_SUM && what == AGG_COMPLETE)
		count(AGG_S_SATURATED);
	if (pkt_parse(ctx, &p))
		return XDP_ABORTED;
	p.h->attempt = 0;
	if (ti->parent >= 0) {
		__u32 pi = ti->parent;
		struct agg_node_info *n = bpf_map_lookup_elem(&nodes, &pi);

		if (!n)
			return XDP_ABORTED;
		/* Up through TC, not XDP_TX: on veth an XDP_TX frame skips the
		 * qdisc and is dropped when the peer's ring is full. */
		pkt_address(&p, n, AGG_T_DATA);
		count(AGG_S_FWD_UP);
		return to_tc(ctx, AGG_F_UP);
	}
	if (what == AGG_SERVE) {
		/* The root answers the child that asked, and only it; its own
		 * worker (a worker root) stored the result when the slot
		 * completed, and asks for nothing. */
		struct agg_node_info *n = bpf_map_lookup_elem(&nodes, &from);

		if (from == cfg_self)
			return XDP_DROP;
		if (!n)
			return XDP_ABORTED;
		pkt_address(&p, n, AGG_T_RESULT);
		return to_tc(ctx, AGG_F_UP);
	}
	/* The root: the aggregate is the result.  A worker root keeps it
	 * for itself as a RESULT from its parent would be kept (and it may
	 * complete the iteration: the fetch signal); TC copies it to the
	 * children.  When our own contribution completed the slot, through
	 * BPF_PROG_RUN, no TC sees the packet: the sender does both
	 * (agg-wire(7), "Worker roots"). */
	if (cfg_worker) {
		int r = store_result(ctx, seg, ver, op, &sig);

		if (r > 0)
			count(r);	/* counted; the children still need it */
		if (pkt_parse(ctx, &p))
			return XDP_ABORTED;
		sig = r == 0 && sig;
	}
	{
		struct agg_node_info self = { .addr = cfg_self_addr };

		pkt_address(&p, &self, AGG_T_RESULT);
	}
	return to_tc(ctx, AGG_F_FANOUT | (sig ? AGG_F_SIGNAL : 0));
}

static __always_inline int result(struct xdp_md *ctx, struct agg_hdr *h,
				  struct agg_tree_info *ti)
{
	__u32 seg = h->seg, nkids = ti->nkids;
	__u64 ver = agg_ver(h->run, h->iter);
	int signal = 0;
	struct pkt p;

	if (cfg_worker) {
		int r = store_result(ctx, seg, ver, h->op, &signal);

		if (r > 0)
			return drop(r);
		if (r < 0) {
			/* Ours already; a resent result still goes on to
			 * the children, one of which asked for it. */
			if (!nkids)
				return drop(AGG_S_DROP_DUP);
			goto relay;
		}
	} else {
relay:
		if (!nkids)
			return drop(AGG_S_DROP_ROUTE);
		count(AGG_S_RELAYED);
	}
	if (pkt_parse(ctx, &p))
		return XDP_ABORTED;
	p.h->attempt = 0;
	if (nkids) {
		struct agg_node_info self = { .addr = cfg_self_addr };

		pkt_address(&p, &self, AGG_T_RESULT);
		return to_tc(ctx, AGG_F_FANOUT | (signal ? AGG_F_SIGNAL : 0));
	}
	if (!signal)
		return XDP_DROP;	/* stored */
	p.udp->dest = bpf_htons(cfg_port + 1);
	p.udp->check = 0;
	count(AGG_S_SIGNALS);
	return XDP_PASS;
}

/* Answer a probe in place: the slot's state for (iter, seg), back to the
 * prober's address and port. */
static __always_inline int probe(struct xdp_md *ctx, struct agg_hdr *h,
				 struct agg_tree_info *ti)
{
	/* The last chunk: the slot's state (agg.h, "slots"). */
	__u32 seg = h->seg, zero = 0;
	__u64 ver = agg_ver(h->run, h->iter);
	__u32 key = slot_of(h->iter, seg) * cfg_nchunks + cfg_nchunks - 1;
	struct agg_lock *lk = bpf_map_lookup_elem(&locks, &key);
	struct agg_slot *s = bpf_map_lookup_elem(&slots, &key);
	struct agg_clock *ck = bpf_map_lookup_elem(&clock, &zero);
	struct agg_probe a = { .node = cfg_self, .expect = ti->expect };
	struct agg_meta *m;
	struct pkt p;
	__u8 mac[ETH_ALEN];
	__u32 addr;
	__u16 port;

	if (!lk || !s)
		return drop(AGG_S_ERROR);
	if (cfg_worker) {
		m = bpf_map_lookup_elem(&meta, &seg);
		if (m)
			a.result_ver = m->ver;
	}
	if (ck)
		a.clock = ck->now;
	bpf_spin_lock(&lk->lock);
	a.slot_ver = s->ver;
	a.slot_seg = s->seg;
	a.bitmap = s->bitmap;
	if (!ti->expect)
		a.state = AGG_PROBE_NOT_IN_TREE;
	else if (s->ver == ver && s->seg == seg)
		a.state = s->done ? AGG_PROBE_DONE : AGG_PROBE_COLLECTING;
	else if (newer(ver, seg, s))
		a.state = AGG_PROBE_EMPTY;
	else
		a.state = AGG_PROBE_GONE;
	bpf_spin_unlock(&lk->lock);
	if (a.state != AGG_PROBE_COLLECTING && a.state != AGG_PROBE_DONE)
		a.bitmap = 0;
	if (bpf_xdp_store_bytes(ctx, VAL_OFF, &a, sizeof(a)))
		return XDP_ABORTED;
	if (pkt_parse(ctx, &p))
		return XDP_ABORTED;
	__builtin_memcpy(mac, p.eth->h_source, ETH_ALEN);
	__builtin_memcpy(p.eth->h_source, p.eth->h_dest, ETH_ALEN);
	__builtin_memcpy(p.eth->h_dest, mac, ETH_ALEN);
	addr = p.ip->saddr;
	p.ip->saddr = p.ip->daddr;
	p.ip->daddr = addr;		/* the checksum does not change */
	port = p.udp->source;
	p.udp->source = p.udp->dest;
	p.udp->dest = port;
	p.udp->check = 0;
	p.h->from = cfg_self;
	count(AGG_S_PROBES);
	return XDP_TX;
}

/* xdp.frags: multi-buffer frames, so jumbo segments attach on veth. */
/*
 * A sparse packet of a member, checked like any agg packet up to here: the
 * sparse root's user-space aggregator takes it (XDP_PASS to its socket on
 * the plan's port), if this node is that root (of tree 0) and the run is
 * not over here.
 */
static __always_inline int sparse(struct agg_hdr *h)
{
	__u32 zero = 0;
	struct agg_tree_info *t0 = bpf_map_lookup_elem(&trees, &zero);
	int why;

	if (h->op != AGG_OP_SUM || h->tree != 0 || h->type == AGG_T_SPARSE_RESULT)
		return drop(AGG_S_DROP_MALFORMED);
	if (!t0 || t0->parent >= 0 || !t0->nkids)	/* not tree 0's root */
		return drop(AGG_S_DROP_ROUTE);
	if (h->attempt)
		count(AGG_S_RETX);
	why = admit(agg_ver(h->run, h->iter));
	if (why)
		return drop(why);
	count(AGG_S_SPARSE);
	return XDP_PASS;
}

/*
 * A packet to one of the job's other ports, port + 1 .. + 3 (off), checked
 * like any agg packet up to here.  A worker's sparse sender on port + 2
 * takes the sparse root's SPARSE_ACK, its receiver on port + 3 the root's
 * SPARSE_RESULT: those pass to the socket.  Nothing from the wire belongs
 * on port + 1: the fetch signal is made on the node itself (here, in TC,
 * or sent over loopback by a worker root's sender).
 */
static __always_inline int side_port(struct agg_hdr *h, __u32 off)
{
	__u8 want = off == AGG_SPARSE_PORT_SEND ? AGG_T_SPARSE_ACK :
		    off == AGG_SPARSE_PORT_RECV ? AGG_T_SPARSE_RESULT : 0;

	if (agg_is_sparse(h->type) && (h->op != AGG_OP_SUM || h->tree != 0))
		return drop(AGG_S_DROP_MALFORMED);
	if (!want || h->type != want || h->from != cfg_sparse_root || !cfg_worker)
		return drop(AGG_S_DROP_ROUTE);
	if (h->attempt)
		count(AGG_S_RETX);
	count(AGG_S_SPARSE);
	return XDP_PASS;
}

/*
 * An IPv4 header with options, or a fragment.  agg's packets have neither
 * (agg-wire(7)), and everything below reads headers at fixed offsets, so
 * one to the job's ports here is malformed.  A later fragment carries no
 * UDP header and passes: its datagram is never reassembled, as its first
 * fragment, which has the port, is dropped.
 */
static __always_inline int odd_ip(struct xdp_md *ctx, struct iphdr *ip)
{
	__u32 l4 = sizeof(struct ethhdr) + ip->ihl * 4;
	__u16 dport;

	if ((ip->frag_off & bpf_htons(0x1fff)) || ip->ihl < 5 || ip->daddr != cfg_self_addr ||
	    bpf_xdp_load_bytes(ctx, l4 + __builtin_offsetof(struct udphdr, dest), &dport, 2) ||
	    bpf_ntohs(dport) - (__u32)cfg_port > 3) {
		count(AGG_S_OTHER);
		return XDP_PASS;
	}
	count(AGG_S_RX);
	return drop(AGG_S_DROP_MALFORMED);
}

SEC("xdp.frags")
int agg_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	struct agg_hdr *h = (void *)(udp + 1);
	struct agg_tree_info *ti;
	struct agg_node_info *ni;
	__u32 *idx, tree, bit, from, k, vals, off;
	int why;

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->version != 4 || ip->protocol != IPPROTO_UDP) {
		count(AGG_S_OTHER);
		return XDP_PASS;
	}
	if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
		return odd_ip(ctx, ip);
	/* The job's ports: port (agg packets) and the next three (agg-wire(7)). */
	off = bpf_ntohs(udp->dest) - (__u32)cfg_port;
	if (off > 3) {
		count(AGG_S_OTHER);
		return XDP_PASS;
	}
	if (ip->daddr != cfg_self_addr) {
		/* Not ours; but an agg header with flags set is forged
		 * whoever it is for: it must never reach a TC program. */
		if ((void *)(h + 1) <= end && h->magic == AGG_MAGIC && h->flags) {
			count(AGG_S_RX);
			return drop(AGG_S_DROP_FLAGS);
		}
		count(AGG_S_OTHER);
		return XDP_PASS;
	}
	count(AGG_S_RX);
	if ((void *)(h + 1) > end)
		return drop(AGG_S_DROP_MALFORMED);
	if (h->magic == AGG_MAGIC && h->flags)
		return drop(AGG_S_DROP_FLAGS);
	vals = h->type == AGG_T_PROBE ? sizeof(struct agg_probe) : cfg_segment * 4;
	if (agg_is_sparse(h->type)) {
		struct agg_sparse_hdr *sh = (void *)(h + 1);

		if ((void *)(sh + 1) > end)
			return drop(AGG_S_DROP_MALFORMED);
		vals = agg_sparse_len(h->type, sh);
		if (!vals)
			return drop(AGG_S_DROP_MALFORMED);
	}
	if (h->magic != AGG_MAGIC || h->op >= AGG_OP_COUNT || h->iter == 0xffffffff ||
	    bpf_ntohs(udp->len) != sizeof(*udp) + sizeof(*h) + vals ||
	    bpf_ntohs(ip->tot_len) != sizeof(*ip) + sizeof(*udp) + sizeof(*h) + vals ||
	    bpf_xdp_get_buff_len(ctx) < VAL_OFF + vals)
		return drop(AGG_S_DROP_MALFORMED);
	if (h->job != cfg_job)
		return drop(AGG_S_DROP_JOB);
	if (h->token != cfg_token)
		return drop(AGG_S_DROP_TOKEN);
	idx = bpf_map_lookup_elem(&members, &ip->saddr);
	from = h->from;
	if (!idx || *idx != from)
		return drop(AGG_S_DROP_MEMBER);
	/* The source MAC too: an address alone is easy to claim on a segment. */
	ni = bpf_map_lookup_elem(&nodes, &from);
	if (!ni || *(__u32 *)ni->mac != *(__u32 *)eth->h_source ||
	    *(__u16 *)&ni->mac[4] != *(__u16 *)&eth->h_source[4])
		return drop(AGG_S_DROP_MAC);
	if (off)
		return side_port(h, off);
	if (agg_is_sparse(h->type))
		return sparse(h);
	if (h->seg >= cfg_nsegs)
		return drop(AGG_S_DROP_SEG);
	if (h->seg < cfg_nexp && h->op != AGG_OP_MAX)
		return drop(AGG_S_DROP_MALFORMED);
	k = h->seg % cfg_period;
	idx = bpf_map_lookup_elem(&segmap, &k);
	if (!idx || *idx != h->tree)
		return drop(AGG_S_DROP_ROUTE);
	tree = h->tree;
	ti = bpf_map_lookup_elem(&trees, &tree);
	if (!ti)
		return drop(AGG_S_DROP_ROUTE);
	if (h->attempt)
		count(AGG_S_RETX);
	if (h->type != AGG_T_PROBE && (why = admit(agg_ver(h->run, h->iter))))
		return drop(why);

	if (h->type == AGG_T_DATA || h->type == AGG_T_REQUEST) {
		/* A map lookup, not a search: a searched bit would be a
		 * different constant on every path, and the verifier would
		 * walk the aggregation loops once per child. */
		k = tree << 16 | from;
		idx = bpf_map_lookup_elem(&kids, &k);
		if (!idx)
			return drop(AGG_S_DROP_ROUTE);
		bit = *idx;
		if (bit >= 64 || !(ti->expect & (1ULL << bit)))
			return drop(AGG_S_DROP_ROUTE);
		return aggregate(ctx, h, ti, bit);
	}
	if (h->type == AGG_T_RESULT) {
		if (ti->parent < 0 || (__u32)ti->parent != from)
			return drop(AGG_S_DROP_ROUTE);
		return result(ctx, h, ti);
	}
	if (h->type == AGG_T_PROBE)
		return probe(ctx, h, ti);
	return drop(AGG_S_DROP_MALFORMED);
}

#define IP_CSUM_OFF (sizeof(struct ethhdr) + __builtin_offsetof(struct iphdr, check))
#define IP_DADDR_OFF (sizeof(struct ethhdr) + __builtin_offsetof(struct iphdr, daddr))
#define IP_SADDR_OFF (sizeof(struct ethhdr) + __builtin_offsetof(struct iphdr, saddr))
#define UDP_DPORT_OFF (sizeof(struct ethhdr) + sizeof(struct iphdr) + \
		       __builtin_offsetof(struct udphdr, dest))

static __always_inline void tc_count(__u32 what)
{
	count(what);
}

SEC("tc")
int agg_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	struct agg_hdr *h = (void *)(udp + 1);
	struct agg_tcmeta *m = (void *)(long)skb->data_meta;
	struct agg_tree_info *ti;
	__u32 tree, cur, nkids, flags;
	__u16 port;

	/* Only what our XDP program marked: the metadata, which no packet
	 * from the wire carries, with this load's key. */
	if ((void *)(m + 1) > data || m->key != cfg_meta_key)
		return TC_ACT_UNSPEC;	/* not ours: tcx runs the next program */
	if ((void *)(h + 1) > end)
		return TC_ACT_UNSPEC;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP ||
	    udp->dest != bpf_htons(cfg_port) || h->magic != AGG_MAGIC ||
	    !(m->flags & (AGG_F_FANOUT | AGG_F_UP)) || ip->saddr != cfg_self_addr ||
	    h->from != cfg_self || h->job != cfg_job)
		return TC_ACT_UNSPEC;
	flags = m->flags;
	if (flags & AGG_F_UP)	/* addressed to the parent by XDP already */
		return bpf_redirect(cfg_ifindex, 0);
	tree = h->tree;
	cur = ip->daddr;
	ti = bpf_map_lookup_elem(&trees, &tree);
	if (!ti)
		return TC_ACT_SHOT;
	nkids = ti->nkids;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < AGG_MAX_KIDS; i++) {
		struct agg_node_info *n;
		__u32 kid;

		if (i >= nkids)
			break;
		kid = ti->kid[i];
		n = bpf_map_lookup_elem(&nodes, &kid);
		if (!n)
			break;
		bpf_l3_csum_replace(skb, IP_CSUM_OFF, cur, n->addr, 4);
		bpf_skb_store_bytes(skb, IP_DADDR_OFF, &n->addr, 4, 0);
		bpf_skb_store_bytes(skb, 0, n->mac, ETH_ALEN, 0);
		cur = n->addr;
		if (bpf_clone_redirect(skb, cfg_ifindex, 0))
			tc_count(AGG_S_TX_FAIL);
		else
			tc_count(AGG_S_FANOUT);
	}
	if (!(flags & AGG_F_SIGNAL))
		return TC_ACT_SHOT;
	{
		/* To our own MAC and address, from the last child's: the
		 * stack drops, without counting, a packet it took as for
		 * another host (XDP rewrote the MAC before the skb was made)
		 * or arriving with a source address of its own (a martian).
		 * Swapping the two addresses keeps the IP checksum. */
		__u32 self = cfg_self_addr;
		__u8 mac[ETH_ALEN] = { cfg_mac[0], cfg_mac[1], cfg_mac[2],
				       cfg_mac[3], cfg_mac[4], cfg_mac[5] };

		bpf_skb_store_bytes(skb, 0, mac, ETH_ALEN, 0);
		bpf_skb_change_type(skb, PACKET_HOST);
		bpf_skb_store_bytes(skb, IP_SADDR_OFF, &cur, 4, 0);
		bpf_skb_store_bytes(skb, IP_DADDR_OFF, &self, 4, 0);
		port = bpf_htons(cfg_port + 1);
		bpf_skb_store_bytes(skb, UDP_DPORT_OFF, &port, 2, 0);
	}
	tc_count(AGG_S_SIGNALS);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
