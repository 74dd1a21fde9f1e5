/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_TREE_H
#define AGG_TREE_H

#include "cluster.h"
#include "hosts.h"
#include "plan.h"

struct agg_build_info {
	struct agg_cluster_stats cluster;	/* aleph */
	int levels;				/* rat: region levels l */
};

/*
 * Build the trees of plan p over hosts h for p->scheme (aleph, rat or ps),
 * using p->seed, p->bw_demand (0: the minimum worker bandwidth, written
 * back) and p->cpu_demand.  ntrees: rat's --trees (0: one tree rooted at
 * each host, at most 64); the other schemes build one tree per PS,
 * weighted by PS bandwidth share.
 */
int agg_tree_build(struct agg_plan *p, const struct agg_hosts *h, int ntrees,
		   struct agg_build_info *info);

/*
 * Integer weights (sum at most AGG_PLAN_MAX_PERIOD, each at least 1) in
 * the proportions of share[0..n).
 */
void agg_tree_weights(const double *share, int n, unsigned *w);

#endif
