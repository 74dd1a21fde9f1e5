/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_CLUSTER_H
#define AGG_CLUSTER_H

#include <stdint.h>

#include "hosts.h"

/*
 * ALEPH's M-WCHA worker clustering (Alg. 1, Eq. 1-6).  Adjacency N(w):
 * workers sharing the lowest region given (rack, else pod; all workers when
 * no regions are given), plus "link" lines.
 */
struct agg_cluster_opts {
	double bw_demand;	/* b, Gbit/s; <= 0: the minimum worker bw */
	double cpu_demand;	/* c, cores per aggregated worker */
	uint64_t seed;
};

struct agg_cluster_stats {
	int mwcha_clusters;	/* clusters M-WCHA made, before improvement */
	int clusters;		/* aggregators plus workers sent to the root */
	int aggregators;	/* workers with at least one member */
	int rounds;
	double bw_demand;	/* the b used */
};

/* g_w = floor(min(B/b - 1, C/c)), at least 0; C unlimited when cpu=0. */
int agg_cluster_capacity(const struct agg_host *w, double b, double c);
double agg_cluster_min_bw(const struct agg_hosts *h);

/*
 * M-WCHA followed by a local-improvement pass (swap in the strongest
 * worker of a cluster, dissolve clusters into spare capacity) that never
 * adds a cluster or breaks Eq. 1; deterministic for a seed.
 * agg[i] for every host i: the host index of worker i's aggregator, or -1
 * when worker i sends to the root itself (aggregators, lone workers, and
 * hosts that are not workers).
 */
int agg_cluster_mwcha(const struct agg_hosts *h, const struct agg_cluster_opts *o,
		      int *agg, struct agg_cluster_stats *st);

/*
 * The minimum number of clusters, exact when adjacency is a union of
 * cliques (regions without link lines): per region, the fewest workers
 * with the largest capacities whose clusters (1 + g) cover the region.
 * -EOPNOTSUPP when link lines make the problem NP-hard.
 */
int agg_cluster_optimum(const struct agg_hosts *h, double b, double c);

/* Region group of every host (same id = adjacent by region); returns the
 * number of groups or -ENOMEM.  Workers only; other hosts get -1. */
int agg_cluster_groups(const struct agg_hosts *h, int *grp);

#endif
