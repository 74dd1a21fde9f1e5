/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_CHECK_H
#define AGG_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp.h"
#include "plan.h"

/*
 * The integrity check (ALEPH Sec. 5.6, Alg. 2) as agg-check(1) runs it:
 * a plan's problems, a loaded node's unfinished segments and missing
 * results, and the losses a packet capture shows.
 */

/* ---- ranges ------------------------------------------------------------ */

/* Ascending numbers as "0-99,130" (agg-check prints segments this way). */
struct agg_ranges {
	char *buf;
	size_t len, cap;
	uint64_t count;		/* numbers added */
	uint32_t lo, hi;	/* the range not yet in buf, when open */
	bool open, oom;
};

void agg_ranges_init(struct agg_ranges *r);
void agg_ranges_add(struct agg_ranges *r, uint32_t v);	/* v above the last one */
const char *agg_ranges_str(struct agg_ranges *r);	/* "" when empty */
void agg_ranges_free(struct agg_ranges *r);

/* ---- plans ------------------------------------------------------------- */

/*
 * Every problem of a plan that reads: agg_plan_check's (trees, parents,
 * roots, capacities) and what the data plane needs (agg_layout_of, at
 * most AGG_MAX_KIDS children per node per tree, a port whose port + 1 is
 * a port for the fetch signal).  report(ctx, msg) once per problem;
 * returns the number of problems.
 */
int agg_check_plan(const struct agg_plan *p, agg_plan_report_fn report, void *ctx);

/* ---- a loaded node ----------------------------------------------------- */

/* What a node knows of wire segment s of an iteration. */
enum agg_seg_state {
	AGG_SEG_NOT_HERE,	/* the node aggregates nothing of s's tree */
	AGG_SEG_DONE,		/* complete and sent on */
	AGG_SEG_INCOMPLETE,	/* in its slot, some contributors missing */
	AGG_SEG_NOT_STARTED,	/* no contribution of it arrived yet */
	AGG_SEG_UNKNOWN,	/* its slot went to a newer iteration */
};

struct agg_check_live {
	const struct agg_node *n;
	struct agg_tree_info *ti;	/* per tree, from the "trees" map */
	struct agg_slot *slot;		/* headers of the pool (n->l.nslots), agg_check_live_read */
};

/* Open the node's "slots", "trees" and "progress" maps; 0 or -errno (why). */
int agg_check_live_open(struct agg_check_live *c, const struct agg_node *n,
			char *why, size_t whylen);
/* Take a snapshot of the slot headers; 0 or -errno. */
int agg_check_live_read(struct agg_check_live *c);
void agg_check_live_close(struct agg_check_live *c);

/* The newest iteration in the slots or the results; false when none. */
bool agg_check_newest(const struct agg_check_live *c, uint64_t *ver);

/* The state of wire segment seg of iter here; *slot: its slot, if any. */
enum agg_seg_state agg_check_seg(const struct agg_check_live *c, uint64_t ver,
				 uint32_t seg, const struct agg_slot **slot);

/*
 * The contributors of tree t whose bits are set in bits, as node indices
 * (bit i: kid[i]; the self bit: the node itself): fills out (65 entries),
 * returns how many.
 */
int agg_check_bits_nodes(const struct agg_check_live *c, uint32_t t, uint64_t bits,
			 int *out);

/* Results of iter on a worker: ver < iter + 1 missing, > superseded. */
enum { AGG_RES_IN, AGG_RES_MISSING, AGG_RES_SUPERSEDED };
int agg_check_result(const struct agg_check_live *c, uint64_t ver, uint32_t seg);

/* Data segments of iter the worker counted in "progress", or -1 if the
 * map no longer holds that iteration. */
int64_t agg_check_progress(const struct agg_check_live *c, uint64_t ver);

/* The op of iter's data results already in, or -1 when none is. */
int agg_check_data_op(const struct agg_check_live *c, uint64_t ver);

/*
 * Send a REQUEST for each of the n wire segments segs[] of iter to the
 * node's parent in the segment's tree: a DATA-sized packet with zero
 * values, attempt 1, from the node's address.  Exponent segments go with
 * max, data segments with data_op.  Returns the number sent or -errno.
 */
int agg_check_request(const struct agg_node *n, uint64_t ver, const uint32_t *segs,
		      uint32_t nsegs, unsigned data_op);

/* ---- captures ---------------------------------------------------------- */

/* One (job, iteration, sender, receiver, type, segment) of a capture. */
struct agg_cap_group {
	uint32_t job, iter, to, seg;	/* to: IPv4, network order */
	uint16_t from;			/* the header's node index */
	uint8_t type;
	uint8_t rsvd;
	/* the distinct attempts, in order of first appearance */
	uint32_t ntx;
	struct agg_cap_tx {
		uint16_t attempt;
		uint32_t copies;
		uint64_t first, last;	/* packet numbers */
	} tx0, *more;
};

struct agg_cap {
	uint16_t port;
	const struct agg_plan *plan;	/* NULL: indices, every job */
	uint64_t token;			/* plan's wire token, once (0: not yet) */
	uint64_t packets;		/* records in the file */
	uint64_t agg;			/* agg packets analysed */
	uint64_t other;			/* not agg traffic on the port */
	uint64_t foreign;		/* another job or token than the plan's */
	uint64_t truncated;		/* agg packets cut short by the snap length */
	uint64_t probes;		/* PROBE packets (diagnostics, not grouped) */
	int linktype;
	struct agg_cap_group *g;
	size_t ng, gcap;
	uint32_t *table;		/* open addressing: group index + 1 */
	size_t tcap;
	/* Node index <-> address: the plan's, or learned from the packets
	 * (the source address of a header's "from"). */
	struct agg_cap_addr { uint32_t addr, idx; } *addr;
	size_t naddr, acap;
	uint32_t *atable;
	size_t atcap;
	uint32_t *idx_addr;		/* 65536 entries, 0: unknown */
};

/* 0 or -ENOMEM. */
int agg_cap_init(struct agg_cap *c, uint16_t port, const struct agg_plan *plan);
void agg_cap_free(struct agg_cap *c);

/*
 * Read a capture file (pcap or pcapng as libpcap reads them; Ethernet,
 * Linux cooked SLL and SLL2, raw IPv4).  Returns 0, -EINVAL with why set
 * when the file is not a capture, is cut short or has another link type,
 * the error of opening it (why set), or -ENOMEM.
 */
int agg_cap_read(struct agg_cap *c, const char *file, char *why, size_t whylen);

/* Sort the groups by job, iteration, sender, receiver, type, segment. */
void agg_cap_sort(struct agg_cap *c);

/* What a group shows: first transmissions, resends, extra copies, lost. */
struct agg_cap_count {
	uint64_t sent, resent, duplicated, lost;
};
void agg_cap_group_count(const struct agg_cap_group *g, struct agg_cap_count *out);
/* Is attempt i (index into the group's attempts) followed by a resend? */
bool agg_cap_tx_lost(const struct agg_cap_group *g, uint32_t i);
const struct agg_cap_tx *agg_cap_tx(const struct agg_cap_group *g, uint32_t i);

/*
 * For DATA or REQUEST group g: 1 if the capture holds a RESULT of that
 * segment back from the receiver, 0 if not though it holds packets from
 * the receiver to the sender, -1 if it holds nothing in that direction
 * (after agg_cap_sort).
 */
int agg_cap_answered(const struct agg_cap *c, const struct agg_cap_group *g);

/* The name of node index i or of address a (network order) in buf. */
const char *agg_cap_from_name(const struct agg_cap *c, uint16_t i, char *buf, size_t len);
const char *agg_cap_to_name(const struct agg_cap *c, uint32_t a, char *buf, size_t len);

const char *agg_type_name(unsigned type);

#endif
