/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Why a segment does not finish: ask the nodes of its tree, from the root
 * down, which contributions they still wait for (PROBE packets, man 7
 * agg-wire; this node's own slot is read from its map).
 */
#ifndef AGG_PROBE_H
#define AGG_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "dp.h"

enum agg_blame {
	AGG_BLAME_NO_DATA,	/* node's contribution never reached its parent */
	AGG_BLAME_SILENT,	/* node does not answer probes: down or cut off */
	AGG_BLAME_LOST_UP,	/* node finished, its aggregate did not reach the parent */
	AGG_BLAME_LOST_DOWN,	/* node has the result, its child "at" has not */
	AGG_BLAME_AHEAD,	/* node's slot (or clock) holds a newer version: ver */
	AGG_BLAME_FAR,		/* node refuses ours as too far ahead of its clock, ver */
};

struct agg_culprit {
	int node;		/* plan node index */
	int at;			/* the node that waits for it (-1: none) */
	enum agg_blame why;
	uint32_t seg;		/* the wire segment probed */
	uint64_t ver;		/* AGG_BLAME_AHEAD, _FAR: the node's version (agg_ver) */
};

/*
 * Walk the tree of wire segment seg of version ver from its root and
 * collect up to max culprits in out; each probe waits up to timeout_ms.
 * Returns the number found or -errno.
 */
int agg_probe_segment(const struct agg_node *n, uint64_t ver, uint32_t seg,
		      struct agg_culprit *out, int max, int timeout_ms);

/* How long a stalled send or receive probes before its timeout: a fifth
 * of it, at most 0.5 s. */
static inline double agg_probe_budget(double timeout)
{
	return timeout / 5 < 0.5 ? timeout / 5 : 0.5;
}

/*
 * One sentence on who holds up wire segments [lo, hi) of version ver (agg_ver) on node n
 * ("" when the probes found nothing), probing the first missing segment of
 * every tree within about budget_ms.
 */
void agg_explain_missing(const struct agg_node *n, uint64_t ver, uint32_t lo,
			 uint32_t hi, int budget_ms, char *buf, size_t len);

#endif
