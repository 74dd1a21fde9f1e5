/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_COLD_H
#define AGG_COLD_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "dp.h"
#include "sparse.h"

struct agg_cold_inbox;

/*
 * The sparse cold path (ZEBRA Sec. III-F), and the PS-lite baseline: every
 * worker sends its (id, values) pairs over UDP to the sparse root (the
 * root of the plan's tree 0), which sums them per id in user space and,
 * once every worker's end marker and all its packets are in, sends the
 * union of the sums back to every worker.  Every packet is acknowledged
 * and sent again until it is; a packet that arrives twice is acknowledged
 * again and never added twice (the root keeps which (worker, packet) it
 * has).  The root sums each id in float64 in the plan's worker order and
 * rounds once to float32, so every worker receives the same bits whatever
 * the order packets arrived in or were lost; a sum beyond float32's range
 * is NaN and counted (saturated), as the dense path's poison.  Each packet
 * is kept under the stream it claims (its npkts and width), never sized by
 * a count a packet carries, and a packet that arrives again with other
 * pairs is another attempt of the iteration: never summed with the first
 * (the tools also send, serve and receive an iteration once per run,
 * agg_node_open_sparse).  man 7 agg-wire, "Sparse".
 */
enum agg_cold_role {
	AGG_COLD_SEND,		/* a worker's pairs to the root (port P + 2) */
	AGG_COLD_RECV,		/* a worker's result from the root (port P + 3) */
	AGG_COLD_SERVE,		/* the root's aggregator (port P) */
};

struct agg_cold_stats {
	uint64_t sent;		/* packets sent, first transmissions */
	uint64_t resent;	/* packets sent again, not acknowledged in time */
	uint64_t acked;		/* of ours, acknowledged */
	uint64_t taken;		/* packets received and kept (new) */
	uint64_t dup;		/* received again: acknowledged again, not added */
	uint64_t pairs_in;	/* pairs received and kept */
	uint64_t pairs_out;	/* pairs of the result (serve, recv) or sent (send) */
	/* received and dropped, by reason */
	uint64_t drop_malformed, drop_job, drop_token, drop_member, drop_run, drop_stale;
	/* a packet of the iteration that another attempt of it sent: at the
	 * root after the sum (not acknowledged), or one that contradicts a
	 * packet held (the iteration fails, -EPROTO) */
	uint64_t drop_attempt;
	uint64_t saturated;	/* root: values of the sum beyond float32's range, sent as NaN */
	uint64_t nan;		/* NaN values in the result (serve, recv) */
};

struct agg_cold {
	struct agg_node *n;
	enum agg_cold_role role;
	int sock;
	int root;		/* node index of the sparse root */
	struct sockaddr_in root_sa;	/* its port P */
	uint8_t *buf;		/* one datagram, in or out */
	double srtt;		/* smoothed round trip of first transmissions, s */
	/* what agg_cold_linger says is complete here: the result's packets
	 * (recv), each node's packets by node index (serve), and the width */
	uint32_t done_npkts, *done_total, done_width;
	/* serve: the packets summed, per worker (done_slot: node -> worker) */
	struct agg_cold_inbox *done_in;
	int *done_slot, done_nin;
	struct agg_cold_stats st;
};

/* The sparse root of a plan: tree 0's root. */
int agg_cold_root(const struct agg_plan *p);

/*
 * Bind the role's socket on the node's address: 0, or -errno with why set
 * (-EADDRINUSE: another process of the role runs on the node; -EINVAL: the
 * node cannot take the role, e.g. serving on a node that is not the
 * sparse root, or a plan port above 65532).
 */
int agg_cold_open(struct agg_cold *c, struct agg_node *n, enum agg_cold_role role,
		  char *why, size_t whylen);
void agg_cold_close(struct agg_cold *c);

/*
 * Send g for version ver (agg_ver) and the end marker; return once the
 * root acknowledged all of it: 0, -ETIMEDOUT when nothing was
 * acknowledged for timeout seconds (why says how much is missing), or
 * another -errno.
 */
int agg_cold_send(struct agg_cold *c, const struct agg_sparse *g, uint64_t ver, double timeout,
		  char *why, size_t whylen);

/*
 * Receive the result of ver into out (agg_sparse_free it): 0, -ETIMEDOUT
 * after timeout seconds in all, -EPROTO (pairs out of id order, or a result
 * packet that arrived twice with other pairs), -errno.
 */
int agg_cold_recv(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		  char *why, size_t whylen);

/*
 * The root: gather every worker's pairs of ver, sum them, send the result
 * to every worker (but the root itself) until each acknowledged all of it;
 * the result into out.  0, -ETIMEDOUT after timeout seconds in all (why
 * names the workers missing and what of theirs), -EPROTO (a worker's pairs
 * out of id order, two complete workers whose widths differ, or a packet
 * that arrived twice with other pairs: two attempts), -errno.
 */
int agg_cold_serve(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		   char *why, size_t whylen);

/*
 * After agg_cold_recv or _serve: acknowledge again what of ver arrives
 * again (an acknowledgement of ours was lost, and the peer still sends),
 * until nothing of ver arrived for quiet seconds or max seconds passed.
 */
#define AGG_COLD_QUIET	0.3
void agg_cold_linger(struct agg_cold *c, uint64_t ver, double quiet, double max);

/* The counters as -j fields of the object open (agg_print_*). */
void agg_cold_print(const struct agg_cold_stats *st);

#endif
