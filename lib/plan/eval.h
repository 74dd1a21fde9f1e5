/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_EVAL_H
#define AGG_EVAL_H

#include "plan.h"

/*
 * ALEPH's Table 1 cost model: every node moves its ingress and egress
 * bytes at its bandwidth, full duplex; an iteration takes as long as the
 * busiest node.  Every tree edge carries the tree's share of the gradient
 * up and the same share of the result down.
 */
struct agg_eval {
	enum agg_scheme scheme;
	double time_s;		/* modeled communication time per iteration */
	int bottleneck;		/* node index of the busiest node */
	double root_bytes;	/* ingress bytes of the busiest root (0: ring) */
	int aggregators;	/* non-root nodes that aggregate children */
	int clusters;		/* units sending to a root (max over trees) */
	double cross_bytes;	/* bytes crossing rack boundaries, both ways */
	int chain;		/* dependency chain (RAT Table 1) */
	double mean_hops;	/* mean hops from a worker's gradient to a root */
};

int agg_eval_plan(const struct agg_plan *p, struct agg_eval *e);
/* Ring all-reduce among the plan's workers (parameter servers idle). */
int agg_eval_ring(const struct agg_plan *p, struct agg_eval *e);

#endif
