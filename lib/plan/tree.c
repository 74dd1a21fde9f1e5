// SPDX-License-Identifier: GPL-2.0-only
/*
 * Tree builders: ALEPH (M-WCHA clusters under each PS), RAT (one tree
 * rooted at each host, one aggregator per region per level, rotated
 * across trees) and PS.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rand.h"
#include "tree.h"

void agg_tree_weights(const double *share, int n, unsigned *w)
{
	double min = share[0], sum = 0;
	unsigned g = 0;

	for (int i = 0; i < n; i++) {
		min = share[i] < min ? share[i] : min;
		sum += share[i];
	}
	/* Exact small ratios first (40:10 -> 4:1, 12.5:10 -> 5:4). */
	for (unsigned s = 1; s <= AGG_PLAN_MAX_PERIOD; s++) {
		double total = 0;
		int exact = 1;

		for (int i = 0; i < n && exact; i++) {
			double x = share[i] / min * s;

			exact = fabs(x - round(x)) < 1e-6;
			total += round(x);
		}
		if (!exact)
			continue;
		if (total > AGG_PLAN_MAX_PERIOD)
			break;
		for (int i = 0; i < n; i++)
			w[i] = (unsigned)round(share[i] / min * s);
		return;
	}
	/* Otherwise the nearest proportions within the period. */
	for (int i = 0; i < n; i++) {
		double x = floor(share[i] / sum * (AGG_PLAN_MAX_PERIOD - n));

		w[i] = x < 1 ? 1 : (unsigned)x;
		g = agg_gcd(g, w[i]);
	}
	for (int i = 0; i < n; i++)
		w[i] /= g;
}

/* The parameter servers, in file order (at most AGG_PLAN_MAX_TREES). */
static int root_list(const struct agg_hosts *h, int *ps)
{
	int n = 0;

	for (int i = 0; i < h->n; i++)
		if (h->host[i].role == AGG_ROLE_PS) {
			if (n == AGG_PLAN_MAX_TREES)
				return -E2BIG;
			ps[n++] = i;
		}
	return n;
}

static int add_trees(struct agg_plan *p, const struct agg_hosts *h,
		     const int *root, int ntrees)
{
	double share[AGG_PLAN_MAX_TREES] = { 0 };
	unsigned w[AGG_PLAN_MAX_TREES] = { 0 };

	/* A root serving k trees gives each 1/k of its bandwidth share. */
	for (int t = 0; t < ntrees; t++) {
		int k = 0;

		for (int u = 0; u < ntrees; u++)
			k += root[u] == root[t];
		share[t] = h->host[root[t]].bw / k;
	}
	agg_tree_weights(share, ntrees, w);
	for (int t = 0; t < ntrees; t++) {
		int err = agg_plan_add_tree(p, root[t], w[t]);

		if (err < 0)
			return err;
	}
	return 0;
}

/* ---- RAT ------------------------------------------------------------------ */

static const struct agg_hosts *rat_hosts;
static int rat_level;	/* 0: rack, 1: pod */

static const char *rat_key(int node, char *buf, size_t len)
{
	const struct agg_host *x = &rat_hosts->host[node];

	if (rat_level == 0 && x->rack[0])
		snprintf(buf, len, "%s/%s", x->pod, x->rack);
	else if (rat_level == 1 && x->pod[0])
		snprintf(buf, len, "%s", x->pod);
	else
		buf[0] = '\0';
	return buf;
}

/* By region, then bandwidth (highest first), then file order. */
static int cmp_rat(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	char kx[2 * AGG_NAME_MAX + 2], ky[2 * AGG_NAME_MAX + 2];
	int c = strcmp(rat_key(x, kx, sizeof(kx)), rat_key(y, ky, sizeof(ky)));
	double bx = rat_hosts->host[x].bw, by = rat_hosts->host[y].bw;

	if (c)
		return c;
	if (bx != by)
		return bx > by ? -1 : 1;
	return x - y;
}

/*
 * One level of tree t (rooted at root) of RAT: items sharing a region send
 * to one aggregator among them (the t-th strongest, so trees spread the
 * load), which passes up in their place; items outside any region of this
 * level pass up unchanged.  In the root's own region the root is the
 * aggregator: its items send to it and nothing of the region passes up,
 * so no aggregate of the tree leaves the root's region.
 */
static int rat_level_build(struct agg_plan *p, int t, int root, int *item, int nitem)
{
	char ka[2 * AGG_NAME_MAX + 2], kb[2 * AGG_NAME_MAX + 2], kr[2 * AGG_NAME_MAX + 2];
	int out = 0;

	rat_key(root, kr, sizeof(kr));
	qsort(item, nitem, sizeof(int), cmp_rat);
	for (int s = 0; s < nitem;) {
		int e = s + 1, agg;

		rat_key(item[s], ka, sizeof(ka));
		while (e < nitem && !strcmp(rat_key(item[e], kb, sizeof(kb)), ka))
			e++;
		if (!ka[0]) {
			for (int i = s; i < e; i++)
				item[out++] = item[i];
			s = e;
			continue;
		}
		agg = strcmp(ka, kr) ? item[s + t % (e - s)] : root;
		for (int i = s; i < e; i++) {
			int err;

			if (item[i] == agg)
				continue;
			err = agg_plan_add_edge(p, t, item[i], agg);
			if (err)
				return err;
		}
		if (agg != root)
			item[out++] = agg;
		s = e;
	}
	return out;
}

/* Hosts by region (pod, then rack), strongest first, then file order. */
static int cmp_region(const void *a, const void *b)
{
	const struct agg_host *x = &rat_hosts->host[*(const int *)a];
	const struct agg_host *y = &rat_hosts->host[*(const int *)b];
	int c = strcmp(x->pod, y->pod);

	if (!c)
		c = strcmp(x->rack, y->rack);
	if (!c && x->bw != y->bw)
		c = x->bw > y->bw ? -1 : 1;
	return c ? c : *(const int *)a - *(const int *)b;
}

/*
 * The roots of n trees: every host once, spread over the regions.  The
 * parameter servers first (in file order), then the workers dealt round
 * robin over the pods, within a pod over its racks, the strongest of a
 * rack first: the first trees have their roots in different pods and
 * racks, and all of them, one per host, when n is the number of hosts.
 */
static int rat_roots(const struct agg_hosts *h, int n, int *root)
{
	/* w: the workers by region; rack r is w[rs[r] .. rs[r + 1]), its
	 * next root w[next[r]]; pod q is racks ps[q] .. ps[q + 1], its next
	 * rack turn[q] */
	int *w = malloc(h->n * sizeof(int)), *rs = malloc((h->n + 1) * sizeof(int));
	int *next = malloc(h->n * sizeof(int)), *ps = malloc((h->n + 1) * sizeof(int));
	int *turn = calloc(h->n, sizeof(int)), nw = 0, nr = 0, np = 0, k = 0;

	if (!w || !rs || !next || !ps || !turn) {
		k = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < h->n && k < n; i++)
		if (h->host[i].role == AGG_ROLE_PS)
			root[k++] = i;
	for (int i = 0; i < h->n; i++)
		if (h->host[i].role == AGG_ROLE_WORKER)
			w[nw++] = i;
	rat_hosts = h;
	qsort(w, nw, sizeof(int), cmp_region);
	for (int i = 0; i < nw; i++) {
		const struct agg_host *a = i ? &h->host[w[i - 1]] : NULL, *b = &h->host[w[i]];
		bool new_pod = !a || strcmp(a->pod, b->pod);

		if (new_pod)
			ps[np++] = nr;
		if (new_pod || strcmp(a->rack, b->rack)) {
			next[nr] = i;
			rs[nr++] = i;
		}
	}
	rs[nr] = nw;
	ps[np] = nr;
	while (k < n) {
		bool got = false;

		for (int q = 0; q < np && k < n; q++) {
			int racks = ps[q + 1] - ps[q];

			for (int j = 0; j < racks; j++) {
				int r = ps[q] + (turn[q] + j) % racks;

				if (next[r] < rs[r + 1]) {
					root[k++] = w[next[r]++];
					turn[q] = (turn[q] + j + 1) % racks;
					got = true;
					break;
				}
			}
		}
		if (!got)
			break;
	}
out:
	free(w);
	free(rs);
	free(next);
	free(ps);
	free(turn);
	return k;
}

static int build_rat(struct agg_plan *p, const struct agg_hosts *h, int ntrees,
		     struct agg_build_info *info)
{
	int root[AGG_PLAN_MAX_TREES] = { 0 };
	int *item = malloc(h->n * sizeof(int)), has[2] = { 0, 0 }, err = 0, n;

	if (!item)
		return -ENOMEM;
	if (ntrees <= 0)
		ntrees = h->n < AGG_PLAN_MAX_TREES ? h->n : AGG_PLAN_MAX_TREES;
	if (ntrees > AGG_PLAN_MAX_TREES) {
		free(item);
		return -E2BIG;
	}
	for (int i = 0; i < h->n; i++) {
		if (h->host[i].role != AGG_ROLE_WORKER)
			continue;
		has[0] |= h->host[i].rack[0] != 0;
		has[1] |= h->host[i].pod[0] != 0;
	}
	info->levels = has[0] + has[1];
	n = rat_roots(h, ntrees, root);
	if (n < 0) {
		free(item);
		return n;
	}
	ntrees = n;	/* --trees beyond the hosts: one tree each */
	err = add_trees(p, h, root, ntrees);
	rat_hosts = h;
	for (int t = 0; !err && t < ntrees; t++) {
		n = 0;
		for (int i = 0; i < h->n; i++)
			if (h->host[i].role == AGG_ROLE_WORKER && i != root[t])
				item[n++] = i;
		for (rat_level = 0; rat_level < 2 && n >= 0; rat_level++)
			if (has[rat_level])
				n = rat_level_build(p, t, root[t], item, n);
		if (n < 0) {
			err = n;
			break;
		}
		for (int i = 0; !err && i < n; i++)
			err = agg_plan_add_edge(p, t, item[i], root[t]);
	}
	free(item);
	return err;
}

/* ---- ALEPH and PS ---------------------------------------------------------- */

static int build_flat(struct agg_plan *p, const struct agg_hosts *h,
		      const int *agg)
{
	int ps[AGG_PLAN_MAX_TREES] = { 0 }, nps = root_list(h, ps), err;

	if (nps <= 0)
		return nps ? nps : -EINVAL;	/* agg_hosts_check_scheme says why */
	err = add_trees(p, h, ps, nps);
	for (int t = 0; !err && t < nps; t++)
		for (int i = 0; !err && i < h->n; i++)
			if (h->host[i].role == AGG_ROLE_WORKER)
				err = agg_plan_add_edge(p, t, i,
							agg && agg[i] >= 0 ? agg[i] : ps[t]);
	return err;
}

int agg_tree_build(struct agg_plan *p, const struct agg_hosts *h, int ntrees,
		   struct agg_build_info *info)
{
	int err;

	memset(info, 0, sizeof(*info));
	if (p->bw_demand <= 0)
		p->bw_demand = agg_cluster_min_bw(h);
	err = agg_plan_set_nodes(p, h);
	if (err)
		return err;
	switch (p->scheme) {
	case AGG_SCHEME_ALEPH: {
		struct agg_cluster_opts o = {
			.bw_demand = p->bw_demand, .cpu_demand = p->cpu_demand,
			.seed = p->seed,
		};
		int *agg = malloc(h->n * sizeof(int));

		if (!agg)
			return -ENOMEM;
		err = agg_cluster_mwcha(h, &o, agg, &info->cluster);
		if (!err)
			err = build_flat(p, h, agg);
		free(agg);
		break;
	}
	case AGG_SCHEME_RAT:
		err = build_rat(p, h, ntrees, info);
		break;
	case AGG_SCHEME_PS:
		err = build_flat(p, h, NULL);
		break;
	default:
		return -EINVAL;
	}
	if (!err)
		err = agg_plan_finish(p);
	return err;
}
