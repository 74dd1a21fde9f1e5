// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"

static int same_region(const struct agg_host *a, const struct agg_host *b)
{
	return !strcmp(a->pod, b->pod) && !strcmp(a->rack, b->rack);
}

static void finish_time(const struct agg_plan *p, const double *in,
			const double *out, struct agg_eval *e)
{
	e->time_s = 0;
	e->bottleneck = -1;
	for (int i = 0; i < p->nnodes; i++) {
		double bytes = in[i] > out[i] ? in[i] : out[i];
		double t = bytes * 8 / (p->node[i].bw * 1e9);

		if (e->bottleneck < 0 || t > e->time_s) {
			e->time_s = t;
			e->bottleneck = i;
		}
	}
}

int agg_eval_plan(const struct agg_plan *p, struct agg_eval *e)
{
	double *in = calloc(p->nnodes, sizeof(double));
	double *out = calloc(p->nnodes, sizeof(double));
	char *aggs = calloc(p->nnodes, 1);
	double S = (double)p->size, wsum = 0;
	int nworkers = 0;

	if (!in || !out || !aggs) {
		free(in);
		free(out);
		free(aggs);
		return -ENOMEM;
	}
	memset(e, 0, sizeof(*e));
	e->scheme = p->scheme;
	for (int t = 0; t < p->ntrees; t++)
		wsum += p->tree[t].weight;
	for (int i = 0; i < p->nnodes; i++)
		nworkers += p->node[i].role == AGG_ROLE_WORKER;
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_plan_tree *tr = &p->tree[t];
		double f = tr->weight / wsum * S, hops = 0;
		int clusters = 0;

		for (int k = 0; k < tr->nedges; k++) {
			int c = tr->edge[k].child, par = tr->edge[k].parent;

			out[c] += f;	/* gradient up */
			in[par] += f;
			out[par] += f;	/* result down */
			in[c] += f;
			if (par == tr->root)
				clusters++;
			else
				aggs[par] = 1;
			if (!same_region(&p->node[c], &p->node[par]))
				e->cross_bytes += 2 * f;
		}
		if (clusters > e->clusters)
			e->clusters = clusters;
		if (in[tr->root] > e->root_bytes)
			e->root_bytes = in[tr->root];
		for (int i = 0; i < p->nnodes; i++) {
			int d = agg_plan_depth(p, t, i);

			if (d > 0 && 2 * d > e->chain)
				e->chain = 2 * d;
			if (p->node[i].role == AGG_ROLE_WORKER && d > 0)
				hops += d;
		}
		if (nworkers)
			e->mean_hops += tr->weight / wsum * hops / nworkers;
	}
	for (int i = 0; i < p->nnodes; i++)
		e->aggregators += aggs[i];
	finish_time(p, in, out, e);
	free(in);
	free(out);
	free(aggs);
	return 0;
}

static const struct agg_plan *ring_plan;

static int cmp_ring(const void *a, const void *b)
{
	const struct agg_host *x = &ring_plan->node[*(const int *)a];
	const struct agg_host *y = &ring_plan->node[*(const int *)b];
	int c = strcmp(x->pod, y->pod);

	if (!c)
		c = strcmp(x->rack, y->rack);
	return c ? c : *(const int *)a - *(const int *)b;
}

int agg_eval_ring(const struct agg_plan *p, struct agg_eval *e)
{
	double *in = calloc(p->nnodes, sizeof(double));
	int *ring = malloc(p->nnodes * sizeof(int)), n = 0;
	double per;

	if (!in || !ring) {
		free(in);
		free(ring);
		return -ENOMEM;
	}
	memset(e, 0, sizeof(*e));
	e->scheme = AGG_SCHEME_RING;
	for (int i = 0; i < p->nnodes; i++)
		if (p->node[i].role == AGG_ROLE_WORKER)
			ring[n++] = i;
	/* Region order keeps the ring's crossings at one per region. */
	ring_plan = p;
	qsort(ring, n, sizeof(int), cmp_ring);
	per = n > 1 ? 2.0 * (n - 1) / n * (double)p->size : 0;
	for (int k = 0; k < n; k++) {
		in[ring[k]] = per;
		if (n > 1 && !same_region(&p->node[ring[k]], &p->node[ring[(k + 1) % n]]))
			e->cross_bytes += per;
	}
	finish_time(p, in, in, e);
	e->aggregators = n;
	e->chain = n > 1 ? 2 * (n - 1) : 0;
	e->mean_hops = n > 1 ? n - 1 : 0;
	free(in);
	free(ring);
	return 0;
}
