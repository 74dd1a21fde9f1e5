/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The agg wire format and the layout of the pinned maps, shared by the
 * XDP/TC programs (bpf/agg.bpf.c) and the tools (lib/dp/dp.c).  man 7 agg-wire
 * documents all of it; keep the two in step.
 *
 * Every multi-byte field is little-endian: the header and the values.
 */
#ifndef AGG_BPF_AGG_H
#define AGG_BPF_AGG_H

#include <linux/types.h>

/* struct bpf_spin_lock for the programs; its layout for user space, which
 * cannot include linux/bpf.h next to libpcap's pcap/bpf.h. */
#ifdef __bpf__
#include <linux/bpf.h>
#define AGG_SPIN_LOCK	struct bpf_spin_lock
#else
#define AGG_SPIN_LOCK	struct { __u32 val; }
#endif

#define AGG_MAGIC		0xAA	/* wire version 2 (0xA9 was version 1) */
#define AGG_WIRE_VERSION	2

/* hdr.type */
enum {
	AGG_T_DATA = 1,		/* a contribution or partial aggregate, child -> parent */
	AGG_T_RESULT = 2,	/* a finished segment, parent -> children */
	AGG_T_REQUEST = 3,	/* child -> parent: like DATA, but contributes
				 * nothing; asks for a finished segment again */
	AGG_T_PROBE = 4,	/* any member -> a node: its slot state for (iter,
				 * seg), answered in place (struct agg_probe) */
	/* The sparse cold path (ZEBRA): workers' (id, values) pairs summed
	 * in user space on the sparse root, the root of tree 0.  Every one
	 * carries struct agg_sparse_hdr after the header; seg numbers the
	 * sender's packets of (run, iter) from 0; tree 0, op sum. */
	AGG_T_SPARSE = 5,	/* worker -> sparse root: pairs */
	AGG_T_SPARSE_END = 6,	/* worker -> sparse root: no more pairs; seg ==
				 * npkts, the number of AGG_T_SPARSE sent */
	AGG_T_SPARSE_ACK = 7,	/* packet seg arrived: root -> a worker's
				 * sender, or a worker's receiver -> root */
	AGG_T_SPARSE_RESULT = 8, /* sparse root -> worker: summed pairs */
};

/*
 * Ports of the sparse path, from the plan's port P: SPARSE, END and a
 * receiver's ACK go to the root's P (its XDP program checks them as any
 * agg packet and passes them to the aggregator's socket there); the
 * root's ACK goes to the sender's port, P + 2; RESULT to the receiver's,
 * P + 3, where a worker's XDP program checks them the same way and passes
 * them only from the sparse root.  (P + 1 is agg-recv's fetch signal,
 * which never comes from the wire.)
 */
#define AGG_SPARSE_PORT_SEND	2
#define AGG_SPARSE_PORT_RECV	3

/* After struct agg_hdr in every sparse packet; then npairs pairs, each a
 * __u64 id and width float32 (IEEE 754 bits), little-endian. */
struct agg_sparse_hdr {
	__u32 npkts;		/* SPARSE, END: the sender's SPARSE packets in the
				 * iteration; RESULT: the result's packets; ACK:
				 * the packets of the acknowledged stream its
				 * sender holds when that is all of them (the END
				 * included), else 0 */
	__u16 width;		/* values per pair, 1 .. AGG_WIRE_MAX_WIDTH */
	__u16 npairs;		/* 0 in END and ACK */
} __attribute__((packed));

#define AGG_WIRE_MAX_WIDTH	256

static inline int agg_is_sparse(__u8 type)
{
	return type >= AGG_T_SPARSE && type <= AGG_T_SPARSE_RESULT;
}

/* Bytes after struct agg_hdr of a sparse packet, or 0 when the width or
 * the count is out of bounds for its type. */
static inline __u32 agg_sparse_len(__u8 type, const struct agg_sparse_hdr *sh)
{
	__u32 w = sh->width, np = sh->npairs;

	if (w < 1 || w > AGG_WIRE_MAX_WIDTH ||
	    (np && type != AGG_T_SPARSE && type != AGG_T_SPARSE_RESULT))
		return 0;
	return sizeof(*sh) + np * (8 + 4 * w);
}

/* hdr.op */
enum {
	AGG_OP_SUM = 0,
	AGG_OP_MAX = 1,
	AGG_OP_MIN = 2,
	AGG_OP_COUNT,
};

/*
 * What a node's XDP program hands its TC program, in the XDP metadata in
 * front of the packet (bpf_xdp_adjust_meta), never in the packet: nothing
 * from the wire can carry it.  key is a random number of the load, so TC
 * also ignores metadata that another program left.
 */
#define AGG_F_FANOUT	0x01	/* TC: copy to every child of hdr.tree */
#define AGG_F_SIGNAL	0x02	/* TC: then deliver as the fetch signal */
#define AGG_F_UP	0x04	/* TC: send to the parent (addressed already) */

struct agg_tcmeta {
	__u32 key;		/* the load's cfg_meta_key */
	__u32 flags;		/* AGG_F_* */
};

struct agg_hdr {
	__u8 magic;		/* AGG_MAGIC */
	__u8 type;		/* AGG_T_* */
	__u8 op;		/* AGG_OP_* */
	__u8 flags;		/* 0: a packet with any bit set is dropped */
	__u16 tree;		/* the plan tree this segment belongs to */
	__u16 from;		/* sender's node index in the plan */
	__u32 job;
	__u32 iter;		/* the training iteration (not 0xffffffff) */
	__u32 seg;		/* wire segment: exponent segments first, then data */
	__u16 run;		/* the run: a newer one supersedes (agg_ver) */
	__u16 attempt;		/* 0: first transmission; n: the n-th resend */
	__u64 token;		/* the plan's wire token (agg_plan_wire_token) */
} __attribute__((packed));

/*
 * Runs and iterations.  Every state that belongs to an iteration (a slot,
 * a result, the node's clock) carries its version, agg_ver(run, iter):
 * the run in the high 32 bits, iteration + 1 in the low ones, 0 for
 * "never used".  Runs are 16-bit serial numbers (RFC 1982): run a is newer
 * than run b when a - b mod 2^16 is below 2^15, so they may wrap; within a
 * run, iterations compare as numbers.  A packet may move a node at most
 * AGG_ITER_AHEAD iterations ahead of the newest one it has seen in the
 * run, or at most AGG_RUN_AHEAD runs ahead (drop_ahead).
 */
#define AGG_ITER_AHEAD		1024
#define AGG_RUN_AHEAD		1024

static inline __u64 agg_ver(__u32 run, __u32 iter)
{
	return (__u64)(run & 0xffff) << 32 | (__u32)(iter + 1);
}

static inline __u32 agg_ver_run(__u64 v)
{
	return (__u32)(v >> 32);
}

/* Iteration of a version (undefined for 0). */
static inline __u32 agg_ver_iter(__u64 v)
{
	return (__u32)v - 1;
}

/* 1: a newer than b, 0: the same, -1: older. */
static inline int agg_ver_cmp(__u64 a, __u64 b)
{
	__u16 d = (__u16)(agg_ver_run(a) - agg_ver_run(b));

	if (d)
		return d < 0x8000 ? 1 : -1;
	return (__u32)a > (__u32)b ? 1 : (__u32)a < (__u32)b ? -1 : 0;
}

/* Is v too far ahead of a node's clock now to be taken (drop_ahead)?  A
 * clock with no iteration yet (now's low half 0) takes any of its run. */
static inline int agg_ver_too_far(__u64 v, __u64 now)
{
	__u32 vr = agg_ver_run(v), nr = agg_ver_run(now);

	if (agg_ver_cmp(v, now) <= 0)
		return 0;
	if (vr == nr)
		return (__u32)now && (__u32)v - (__u32)now > AGG_ITER_AHEAD;
	return (__u16)(vr - nr) > AGG_RUN_AHEAD;
}

/*
 * Numbers.  A worker quantizes data segment d with the exponent e[d]
 * agreed by a max-reduction (the exponent segments): q = rint(x * 2^(S-e)),
 * S = 30 - ceil(log2 W) for W contributing workers, so |q| <= 2^S and any
 * sum of W of them stays within +-2^30.  A non-finite input element is sent
 * as AGG_POISON_HI (sum, max) or AGG_POISON_LO (min); an aggregator sends
 * a sum above AGG_SUM_LIMIT on as AGG_POISON_HI, so poison survives every
 * level and the receiver turns it into NaN.
 */
#define AGG_SUM_LIMIT		(1LL << 30)	/* sums beyond +-this are poison */
#define AGG_POISON_HI		0x7fffffff
#define AGG_POISON_LO		(-0x7fffffff - 1)
#define AGG_EXP_ZERO		(-1000)	/* exponent of an all-zero segment */

#define AGG_MAX_SEGMENT		16368	/* values per segment: the largest IPv4 packet */
#define AGG_CHUNK		1024	/* values per slot chunk (one lock, one pass) */
#define AGG_MAX_CHUNKS		((AGG_MAX_SEGMENT + AGG_CHUNK - 1) / AGG_CHUNK)
#define AGG_MAX_KIDS		63	/* children per node per tree (+1 bit: self) */
#define AGG_MAX_NODES		4096
#define AGG_MAX_TREES		64
#define AGG_MAX_PERIOD		1024

/* The node's place in one tree ("trees" map, one entry per plan tree). */
struct agg_tree_info {
	__s32 parent;		/* node index, -1 at the root or when not in the tree */
	__u32 nkids;		/* children in kid[] */
	__u64 expect;		/* bitmap of contributors: bit i kid[i], bit nkids self */
	__u32 kid[AGG_MAX_KIDS];
	__u32 self_bit;		/* bit of the local worker, or 64 when not a worker */
};

/* "nodes" map: where to send to node i. */
struct agg_node_info {
	__u32 addr;		/* IPv4, network order */
	__u8 mac[6];
	__u16 rsvd;
};

/*
 * "slots" map entry: one chunk of a slot.  Slot i of the pool is entries
 * i * nchunks .. i * nchunks + nchunks - 1, chunk c holding values
 * [c * AGG_CHUNK, c * AGG_CHUNK + AGG_CHUNK) of the segment as s64
 * accumulators (the last chunk may be shorter; the value size is that of
 * min(segment, AGG_CHUNK) values).  Every packet passes the chunks in
 * order, so the last chunk's header is the slot's state: complete there
 * means complete everywhere.
 */
struct agg_slot {
	__u64 ver;		/* agg_ver(run, iteration); 0: never used */
	__u32 seg;
	__u32 done;		/* 1: complete and sent on */
	__u64 bitmap;		/* contributors already added */
	__u32 op;
	__u32 rsvd;
	__s64 acc[];
};

/*
 * "meta" map (mmap-able, one per wire segment): which result "results"
 * holds.  seq is a sequence lock: odd while the XDP program writes ver, op
 * and the values; a reader takes seq (even), reads, and keeps what it read
 * only if seq is still the same afterwards (agg_meta_begin / _valid).
 */
struct agg_meta {
	__u32 seq;
	__u32 op;		/* the op that made it */
	__u64 ver;		/* agg_ver of the result */
};

/* "progress" map: data segments stored per iteration, entry
 * (iteration + 1) % AGG_PROGRESS_SLOTS.  The packet that stores the
 * iteration's last data segment becomes the fetch signal: the plan's
 * number of them, or want when the node's own sender has set it (with
 * BPF_F_LOCK, before it sends anything of ver) for a call shorter than the
 * plan's size. */
#define AGG_PROGRESS_SLOTS	4
struct agg_progress {
	AGG_SPIN_LOCK lock;
	__u32 want;		/* data segments of ver; 0: all of the plan's */
	__u64 ver;		/* agg_ver of the iteration counted */
	__u64 count;
};

/*
 * "clock" map (mmap-able, one entry): the node's place in time.  now is the
 * newest version the node has accepted from the wire or its own tools have
 * opened (packets are bounded by it: AGG_ITER_AHEAD, AGG_RUN_AHEAD); sent
 * and recvd are the newest that agg-send started and agg-recv delivered
 * here, so an iteration is sent and received once per run (agg-send(1));
 * sparse_sent and sparse_recvd are the same for the sparse path (a
 * worker's agg-send --sparse, the root's serve or a worker's agg-recv
 * --sparse), apart so an iteration has a dense and a sparse part.
 */
struct agg_clock {
	__u64 now;
	__u64 sent;
	__u64 recvd;
	__u64 sparse_sent;
	__u64 sparse_recvd;
};

/*
 * A PROBE carries this after the header (count 0); the probed node fills
 * it in and sends the packet back to the prober's address and port.
 */
enum {
	AGG_PROBE_ASKED,	/* not answered (what the prober sends) */
	AGG_PROBE_EMPTY,	/* the slot holds an older segment: none of this one in */
	AGG_PROBE_COLLECTING,	/* the slot collects this segment: bitmap says who is in */
	AGG_PROBE_DONE,		/* complete and sent on (bitmap == expect) */
	AGG_PROBE_GONE,		/* the slot already holds a newer segment */
	AGG_PROBE_NOT_IN_TREE,	/* the node has no children in the segment's tree */
};

struct agg_probe {
	__u32 node;		/* the node that answered */
	__u32 state;		/* AGG_PROBE_* */
	__u64 bitmap;		/* contributors in (bit i: kid[i], bit nkids: self) */
	__u64 expect;		/* contributors the slot waits for */
	__u64 slot_ver;		/* what the slot holds: agg_ver, and segment */
	__u64 result_ver;	/* agg_ver of the node's result of seg (workers) */
	__u64 clock;		/* the node's clock (struct agg_clock now) */
	__u32 slot_seg;
	__u32 rsvd;
};

/* Per-CPU counters ("stats" map, one __u64 each). */
enum agg_stat {
	AGG_S_OTHER,		/* not agg traffic for this node: passed untouched */
	AGG_S_RX,		/* agg packets for this job: each gets one outcome
				 * below (added ... probes, or a drop_*) */
	AGG_S_ADDED,		/* outcome: a contribution added into a slot */
	AGG_S_STORED,		/* outcome: a result stored for the local worker */
	AGG_S_RELAYED,		/* outcome: a result fanned out, not stored here */
	AGG_S_SERVED,		/* outcome: a resend or request for a finished
				 * segment, answered by sending it on again */
	AGG_S_PENDING,		/* outcome: a request for an unfinished segment */
	AGG_S_PROBES,		/* outcome: a probe answered */
	AGG_S_DONE,		/* slots completed */
	AGG_S_FWD_UP,		/* partial aggregates sent to the parent */
	AGG_S_FANOUT,		/* result copies sent to children (TC) */
	AGG_S_SIGNALS,		/* fetch signals delivered to agg-recv */
	AGG_S_SATURATED,	/* sums past AGG_SUM_LIMIT sent on as poison */
	AGG_S_DROP_DUP,		/* a contributor already in the slot */
	AGG_S_DROP_STALE,	/* an older iteration or segment than the slot's */
	AGG_S_DROP_BUSY,	/* the slot still holds an unfinished segment */
	AGG_S_DROP_MALFORMED,	/* bad magic, version, length, count, flags, op;
				 * IP options or a fragment on the job's ports */
	AGG_S_DROP_JOB,		/* another job on our port */
	AGG_S_DROP_TOKEN,	/* wrong token */
	AGG_S_DROP_MEMBER,	/* source address not in the plan, or not its node */
	AGG_S_DROP_ROUTE,	/* wrong tree, or not a child / the parent here, or
				 * not what port P + 1 .. P + 3 takes */
	AGG_S_DROP_SEG,		/* segment out of range */
	AGG_S_DROP_MAC,		/* source MAC is not the member's */
	AGG_S_DROP_FLAGS,	/* internal flags set on the wire (forged) */
	AGG_S_DROP_RUN,		/* a run older than the node's */
	AGG_S_DROP_AHEAD,	/* too far ahead of the node's clock */
	AGG_S_ERROR,		/* outcome: an internal error (XDP_ABORTED) */
	AGG_S_RETX,		/* received packets with attempt > 0 */
	AGG_S_TX_FAIL,		/* a redirect or clone failed */
	AGG_S_SPARSE,		/* outcome: a sparse packet for the sparse root,
				 * passed to its aggregator's socket, or the
				 * root's ACK or RESULT to a worker's P + 2, + 3 */
	AGG_S_COUNT,
};

#define AGG_STAT_NAMES { \
	"other", "rx", "added", "stored", "relayed", "served", "pending", \
	"probes", "done", "fwd_up", "fanout", "signals", "saturated", \
	"drop_dup", "drop_stale", "drop_busy", "drop_malformed", "drop_job", \
	"drop_token", "drop_member", "drop_route", "drop_seg", "drop_mac", \
	"drop_flags", "drop_run", "drop_ahead", "error", \
	"retx", "tx_fail", "sparse", }

/* "sent" map (array of __u64): what agg-send did on this node, added by
 * agg-send itself after each iteration (the programs never touch it). */
enum agg_sent {
	AGG_SENT_ITERS,		/* iterations agg-send ran (done or timed out) */
	AGG_SENT_WIRE,		/* segments sent on the wire */
	AGG_SENT_LOCAL,		/* segments put into our own program */
	AGG_SENT_RESENT,	/* of those, resends */
	AGG_SENT_FANOUT,	/* results a worker root sent its children itself */
	AGG_SENT_SIGNALS,	/* fetch signals a worker root delivered itself */
	AGG_SENT_COUNT,
};

#define AGG_SENT_NAMES { "iterations", "sent", "sent_local", "resent", \
	"sent_fanout", "sent_signals", }

/* "cc" map (one entry): the sender's congestion state when the last
 * agg-send on this node ended, for the next one to start from (as Linux
 * keeps a route's TCP metrics); only user space writes it. */
struct agg_cc_state {
	__u64 at_ns;		/* CLOCK_MONOTONIC when written; 0: never */
	__u64 cwnd_milli;	/* congestion window, 1/1000 segments */
	__u64 rtt_med_ns;	/* median round trip */
	__u64 rtt_base_ns;	/* shortest round trip */
};

/*
 * After those, one section per stream of agg-send (--streams): stream k's
 * field f is key AGG_SENT_STREAM(k, f).  The totals above are the sums of
 * the sections (and iterations); a stream never used stays 0.
 */
#define AGG_MAX_STREAMS		64
enum agg_sent_stream {
	AGG_SST_WIRE,		/* segments sent on the wire */
	AGG_SST_LOCAL,		/* segments put into our own program */
	AGG_SST_RESENT,		/* of those, resends */
	AGG_SST_FANOUT,		/* results a worker root sent its children */
	AGG_SST_SIGNALS,	/* fetch signals a worker root delivered */
	AGG_SST_COUNT,
};
#define AGG_SST_NAMES { "sent", "sent_local", "resent", "sent_fanout", "sent_signals", }
#define AGG_SENT_STREAM(k, f)	(AGG_SENT_COUNT + (k) * AGG_SST_COUNT + (f))
#define AGG_SENT_ENTRIES	AGG_SENT_STREAM(AGG_MAX_STREAMS, 0)

/*
 * The XDP dispatcher of an interface (bpf/dispatch.bpf.c), pinned under
 * PIN_DIR/dev/NETNS-IFINDEX/: "ports" maps a job's UDP port to its entry
 * in the program array "progs".
 */
#define AGG_MAX_JOBS_PER_DEV	64
struct agg_dispatch {
	__u32 idx;		/* the job's program in "progs" */
	__u32 job;		/* the job that registered the port */
};

#endif
