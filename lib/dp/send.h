/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_SEND_H
#define AGG_SEND_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>

#include "dp.h"

/*
 * The sending engine (agg-send(1), the library's allreduce): one node's
 * gradient, cut into segments, into the plan's trees.  A segment goes to
 * the node's own XDP program with BPF_PROG_RUN where the node aggregates
 * in that tree, to its parent otherwise; a window of slots x trees
 * segments is in flight, a segment's result acknowledges it, and one
 * whose result does not come back in time is sent again.  When
 * agg_send_run returns 0, every result of the call is on the node.
 *
 * Streams (AIACC-Training's multi-streamed communication): the window's
 * lanes are dealt to nstreams streams, lane j to stream j mod nstreams.
 * Each stream has a UDP socket of its own (its own source port, so a
 * receiver's RSS spreads the streams over its queues and CPUs), its own
 * frame, congestion window, round trips and counters, and runs in a
 * thread of its own (stream 0 in the caller's); with more than one, the
 * threads, the caller's too, run on the CPUs of the NUMA node of the
 * node's interface (libnuma).
 */
struct agg_sender;
struct agg_stream {
	struct agg_sender *s;
	unsigned id;
	int sock;			/* UDP, bound to the node's address */
	uint16_t port;			/* its source port (host order) */
	int kick;			/* eventfd: a wake-up another stream took */
	uint8_t *frame;			/* eth + ip + udp + agg header + values */
	uint8_t *out;			/* the frame after our XDP program ran,
					 * behind its metadata (struct agg_tcmeta) */
	double rtt_med;			/* median round trip, s */
	double cwnd;			/* congestion window, segments */
	bool slow_start;
	bool round_lossy;		/* this round timed out */
	double rtt_base, rtt_round;	/* shortest round trip: ever, this round */
	double rtt_prev;		/* the round before's */
	uint64_t round_end;		/* the round ends with a result of this send */
	uint64_t seq;			/* sends so far (resends too) */
	/* what the calls did, added up (enum agg_sent_stream) */
	uint64_t count[AGG_SST_COUNT];
};

struct agg_sender {
	struct agg_node *n;		/* NULL: not set up (free is a no-op) */
	int sig;			/* the fetch signal's socket, or -1 */
	struct sockaddr_in *parent;	/* per tree: where a leaf sends */
	bool *local;			/* per tree: aggregate here (BPF_PROG_RUN) */
	bool *root;			/* per tree: we are its root (a worker root) */
	struct sockaddr_in *kid;	/* a worker root's children: those of tree
					 * t are kid[kid_first[t] .. kid_first[t + 1]) */
	unsigned *kid_first;
	size_t frame_len;
	int32_t *exps;			/* per data segment */
	struct ring_buffer *rb;		/* the node's "events", or NULL: poll */
	pthread_mutex_t rb_lock;	/* one consumer of rb at a time */
	unsigned nstreams;		/* 1 .. AGG_MAX_STREAMS */
	bool cc_off;			/* no congestion window: the slot pool's */
	struct agg_stream *st;
	int numa_node;			/* the interface's, or -1: unknown */
	struct bitmask *cpus;		/* where the streams run, or NULL: anywhere */
	bool pinned;			/* agg_send_run's thread is on cpus */
	struct agg_phase *phase;		/* the phase the streams run now */
};

/* Streams for --streams auto on the node's interface: its receive queues
 * (ethtool's channels: rx + combined), at most the CPUs of its NUMA node
 * (all CPUs when the node is unknown) and AGG_MAX_STREAMS, at least 1.
 * why (may be NULL) says how it was found.  Never fails. */
unsigned agg_streams_auto(const struct agg_node *n, char *why, size_t whylen);

/* The interface's NUMA node from sysfs, or -1 when it has none (veth) or
 * sysfs shows another network namespace's device of that name. */
int agg_netif_numa_node(const struct agg_netif *nif);

/* What one call sends: the first nvalues of the plan's gradient. */
struct agg_send_call {
	uint64_t ver;			/* agg_ver(run, iter) */
	const float *x;			/* nvalues float32 */
	uint64_t nvalues;		/* 1 .. the plan's size / 4 */
	unsigned op;			/* AGG_OP_* */
	double timeout;			/* give up after this long without progress */
	uint64_t nonfinite;		/* out: NaN and Inf in x */
};

/* Leave the congestion state on the node for the next sender ("cc"
 * map): 0 or -errno. */
int agg_sender_save(const struct agg_sender *s);
/* The congestion window (the streams' together, segments) and the median
 * round trip (their mean, s), for reports. */
double agg_sender_cwnd(const struct agg_sender *s);
double agg_sender_rtt(const struct agg_sender *s);

/* What the calls did so far, as the "sent" map counts it (enum agg_sent,
 * then each stream's section, enum agg_sent_stream; those of streams not
 * set up 0), iters being the caller's count of calls. */
void agg_sender_counters(const struct agg_sender *s, uint64_t iters,
			 uint64_t out[AGG_SENT_ENTRIES]);

/* Set up nstreams streams (0: 1; at most AGG_MAX_STREAMS): 0 or -errno
 * (with errno set). */
int agg_sender_init(struct agg_sender *s, struct agg_node *n, unsigned nstreams);
void agg_sender_free(struct agg_sender *s);

/*
 * Listen for the node's fetch signal (plan port + 1), so that waiting for
 * results sleeps in poll() instead of polling the map: 0 or -errno
 * (-EADDRINUSE: an agg-recv of this node listens).  Optional.
 */
int agg_sender_listen(struct agg_sender *s);

/*
 * Send one call.  The caller has taken the iteration (agg_node_open_iter).
 * Returns 0 (every result of the call is in), -ETIMEDOUT (nothing moved for
 * c->timeout: why names the missing segments and, from probes, who holds
 * them up) or another -errno (why says what failed).
 */
int agg_send_run(struct agg_sender *s, struct agg_send_call *c, char *why, size_t whylen);

#endif
