/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_SEND_H
#define AGG_SEND_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "dp.h"

/*
 * The sending engine (agg-send(1), the library's allreduce): one node's
 * gradient, cut into segments, into the plan's trees.  A segment goes to
 * the node's own XDP program with BPF_PROG_RUN where the node aggregates
 * in that tree, to its parent otherwise; a window of slots x trees
 * segments is in flight, a segment's result acknowledges it, and one
 * whose result does not come back in time is sent again.  When
 * agg_send_run returns 0, every result of the call is on the node.
 */
struct agg_sender {
	struct agg_node *n;
	int sock;			/* UDP, bound to the node's address */
	int sig;			/* the fetch signal's socket, or -1 */
	struct sockaddr_in *parent;	/* per tree: where a leaf sends */
	bool *local;			/* per tree: aggregate here (BPF_PROG_RUN) */
	bool *root;			/* per tree: we are its root (a worker root) */
	struct sockaddr_in *kid;	/* a worker root's children: those of tree
					 * t are kid[kid_first[t] .. kid_first[t + 1]) */
	unsigned *kid_first;
	uint8_t *frame;			/* eth + ip + udp + agg header + values */
	uint8_t *out;			/* the frame after our XDP program ran,
					 * behind its metadata (struct agg_tcmeta) */
	size_t frame_len;
	int32_t *exps;			/* per data segment */
	struct ring_buffer *rb;		/* the node's "events", or NULL: poll */
	double rtt_med;			/* median round trip, s */
	double cwnd;			/* congestion window, segments */
	bool slow_start;
	bool round_lossy;		/* this round timed out */
	double rtt_base, rtt_round;	/* shortest round trip: ever, this round */
	double rtt_prev;		/* the round before's */
	uint64_t round_end;		/* the round ends with a result of this send */
	uint64_t seq;			/* sends so far (resends too) */
	/* what the calls did, added up */
	uint64_t sent_local, sent_remote, resent;
	uint64_t fanned;		/* results a worker root sent its children */
	uint64_t signalled;		/* fetch signals a worker root delivered */
};

/* What one call sends: the first nvalues of the plan's gradient. */
struct agg_send_call {
	uint64_t ver;			/* agg_ver(run, iter) */
	const float *x;			/* nvalues float32 */
	uint64_t nvalues;		/* 1 .. the plan's size / 4 */
	unsigned op;			/* AGG_OP_* */
	double timeout;			/* give up after this long without progress */
	uint64_t nonfinite;		/* out: NaN and Inf in x */
};

/* What the calls did so far, as the "sent" map counts it (enum agg_sent),
 * iters being the caller's count of calls. */
void agg_sender_counters(const struct agg_sender *s, uint64_t iters,
			 uint64_t out[AGG_SENT_COUNT]);

/* 0 or -errno (with errno set). */
int agg_sender_init(struct agg_sender *s, struct agg_node *n);
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
