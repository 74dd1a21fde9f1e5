// SPDX-License-Identifier: GPL-2.0-only
/*
 * M-WCHA: MDS-based Worker Clustering for Hierarchical Aggregation (ALEPH
 * Alg. 1).  Where the paper leaves room, agg-plan(1) documents the choice:
 *  - N(w) - clustered counts the other unclustered neighbours, so a lone
 *    worker has capacity 0 (Eq. 2 counting w itself would give it 1), and
 *    a worker that can aggregate nobody is never a candidate (g^ = 0);
 *  - drawn candidates take their members in turn, strongest first (line 18
 *    leaves the order open); a candidate taken as a member before its turn
 *    stays a member;
 *  - the Bernoulli(alpha) draw of members is conditioned on filling the
 *    capacity g-bar: members are taken weakest first (workers that could
 *    not aggregate first), uniformly at random among equals, never more
 *    than g-bar;
 *  - a round in which no candidate is drawn selects the candidate with the
 *    smallest median beta instead of stopping, and an aggregator left with
 *    no member stays unclustered for the next round;
 *  - the loop ends when no unclustered worker can aggregate anyone (Alg. 1
 *    loops until every worker is clustered); the rest send to the root;
 *  - beta (Eq. 6) is computed for every unclustered worker, candidates
 *    included, and N(w') contains w', so a candidate's own alpha counts in
 *    its beta and in the medians of its neighbours (4 equal workers are
 *    each drawn with probability 3/4, not 1).
 * Adjacency is a union of region cliques plus link lines, so a round costs
 * O(n log n + links) rather than O(n^2).  A local-improvement pass
 * (mw_improve) follows, in O(n log n) per sweep.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "rand.h"

int agg_cluster_capacity(const struct agg_host *w, double b, double c)
{
	double g = w->bw / b - 1;

	if (w->cpu > 0 && c > 0 && w->cpu / c < g)
		g = w->cpu / c;
	if (g < 0)
		return 0;
	/* 1e-9: 30/10 - 1 must be 2, whatever the rounding of the division. */
	return g > 1e6 ? 1000000 : (int)floor(g + 1e-9);
}

double agg_cluster_min_bw(const struct agg_hosts *h)
{
	double b = 0;

	for (int i = 0; i < h->n; i++)
		if (h->host[i].role == AGG_ROLE_WORKER && (b == 0 || h->host[i].bw < b))
			b = h->host[i].bw;
	return b;
}

static const struct agg_hosts *sort_hosts;

static int cmp_region(const void *a, const void *b)
{
	const struct agg_host *x = &sort_hosts->host[*(const int *)a];
	const struct agg_host *y = &sort_hosts->host[*(const int *)b];
	int c = strcmp(x->pod, y->pod);

	if (!c && (x->rack[0] || y->rack[0]))
		c = strcmp(x->rack, y->rack);
	return c ? c : *(const int *)a - *(const int *)b;
}

int agg_cluster_groups(const struct agg_hosts *h, int *grp)
{
	int *idx = malloc(h->n * sizeof(int)), n = 0, ngrp = 0;

	if (!idx)
		return -ENOMEM;
	for (int i = 0; i < h->n; i++) {
		grp[i] = -1;
		if (h->host[i].role == AGG_ROLE_WORKER)
			idx[n++] = i;
	}
	sort_hosts = h;
	qsort(idx, n, sizeof(int), cmp_region);
	for (int k = 0; k < n; k++) {
		const struct agg_host *x = &h->host[idx[k]];

		if (k > 0) {
			const struct agg_host *p = &h->host[idx[k - 1]];

			if (strcmp(p->pod, x->pod) || strcmp(p->rack, x->rack))
				ngrp++;
		}
		grp[idx[k]] = ngrp;
	}
	free(idx);
	return n ? ngrp + 1 : 0;
}

/* ---- the algorithm ------------------------------------------------------ */

struct mw {
	int n;			/* workers */
	int ngrp;
	int *hid;		/* worker -> host index */
	int *grp;
	int *g;			/* capacity g_w */
	uint64_t *key;		/* random tie-break, fixed per seed */
	int *loff, *ladj;	/* link neighbours outside the own group (CSR) */
	int *goff, *gmem;	/* group members (CSR) */
	char *glinked;		/* group has a member with links */
	/* per round */
	char *clustered, *ca, *sel;
	int *gbar, *ghat, *nfree;
	double *alpha, *beta, *med;
	int *ucnt, *gmax, *glmax, *lmax1;
	double *galpha;
	int *order, *pref, *cursor, *prefoff;
	double *scratch;
	int *lscratch;
};

static struct mw *sort_mw;

static int cmp_pref(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (sort_mw->g[x] != sort_mw->g[y])
		return sort_mw->g[x] - sort_mw->g[y];
	return sort_mw->key[x] < sort_mw->key[y] ? -1 : sort_mw->key[x] > sort_mw->key[y];
}

/* Candidates strongest first: they fill before weaker ones of a tier. */
static int cmp_ca(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (sort_mw->gbar[x] != sort_mw->gbar[y])
		return sort_mw->gbar[y] - sort_mw->gbar[x];
	if (sort_mw->g[x] != sort_mw->g[y])
		return sort_mw->g[y] - sort_mw->g[x];
	return sort_mw->key[x] < sort_mw->key[y] ? -1 : sort_mw->key[x] > sort_mw->key[y];
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int pow2ceil(int x)
{
	int p = 1;

	if (x <= 0)
		return 0;
	while (p < x)
		p <<= 1;
	return p;
}

static void mw_free(struct mw *m)
{
	void *ptrs[] = { m->hid, m->grp, m->g, m->key, m->loff, m->ladj, m->goff,
			 m->gmem, m->glinked, m->clustered, m->ca, m->sel, m->gbar,
			 m->ghat, m->nfree, m->alpha, m->beta, m->med, m->ucnt,
			 m->gmax, m->glmax, m->lmax1, m->galpha, m->order, m->pref,
			 m->cursor, m->prefoff, m->scratch, m->lscratch };

	for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
		free(ptrs[i]);
}

static int mw_init(struct mw *m, const struct agg_hosts *h,
		   const struct agg_cluster_opts *o, double b, struct agg_rand *rng)
{
	int *hgrp = malloc(h->n * sizeof(int)), *w_of = malloc(h->n * sizeof(int));
	int n = 0, nl = 0, err = -ENOMEM;

	memset(m, 0, sizeof(*m));
	if (!hgrp || !w_of)
		goto out;
	m->ngrp = agg_cluster_groups(h, hgrp);
	if (m->ngrp < 0)
		goto out;
	for (int i = 0; i < h->n; i++)
		w_of[i] = h->host[i].role == AGG_ROLE_WORKER ? n++ : -1;
	m->n = n;
#define ALLOC(f, cnt) do { m->f = calloc((cnt) + 1, sizeof(*m->f)); if (!m->f) goto out; } while (0)
	ALLOC(hid, n); ALLOC(grp, n); ALLOC(g, n); ALLOC(key, n);
	ALLOC(loff, n + 1); ALLOC(goff, m->ngrp + 1); ALLOC(gmem, n);
	ALLOC(glinked, m->ngrp); ALLOC(clustered, n); ALLOC(ca, n); ALLOC(sel, n);
	ALLOC(gbar, n); ALLOC(ghat, n); ALLOC(nfree, n); ALLOC(alpha, n);
	ALLOC(beta, n); ALLOC(med, n); ALLOC(ucnt, m->ngrp); ALLOC(gmax, m->ngrp);
	ALLOC(glmax, m->ngrp); ALLOC(lmax1, n); ALLOC(galpha, m->ngrp);
	ALLOC(order, n); ALLOC(pref, n); ALLOC(cursor, m->ngrp);
	ALLOC(prefoff, m->ngrp + 1); ALLOC(scratch, n); ALLOC(lscratch, n);
	for (int i = 0; i < h->n; i++) {
		int w = w_of[i];

		if (w < 0)
			continue;
		m->hid[w] = i;
		m->grp[w] = hgrp[i];
		m->g[w] = agg_cluster_capacity(&h->host[i], b, o->cpu_demand);
		m->key[w] = agg_rand_u64(rng);
	}
	/* Link neighbours in other groups (in-group links add nothing). */
	for (int pass = 0; pass < 2; pass++) {
		int *fill = pass ? calloc(n + 1, sizeof(int)) : NULL;

		if (pass && !fill)
			goto out;
		for (int k = 0; k < h->nlinks; k++) {
			int a = w_of[h->link[k].a], c = w_of[h->link[k].b];

			if (a < 0 || c < 0 || m->grp[a] == m->grp[c])
				continue;
			if (!pass) {
				m->loff[a + 1]++;
				m->loff[c + 1]++;
				continue;
			}
			m->ladj[m->loff[a] + fill[a]++] = c;
			m->ladj[m->loff[c] + fill[c]++] = a;
		}
		if (!pass) {
			for (int w = 0; w < n; w++)
				m->loff[w + 1] += m->loff[w];
			nl = m->loff[n];
			ALLOC(ladj, nl);
		}
		free(fill);
	}
	/* Drop duplicate links so neighbour counts stay right. */
	{
		int out = 0;

		for (int w = 0; w < n; w++) {
			int start = m->loff[w], end = m->loff[w + 1];

			m->loff[w] = out;
			for (int i = start; i < end; i++) {
				int dup = 0;

				for (int j = m->loff[w]; j < out && !dup; j++)
					dup = m->ladj[j] == m->ladj[i];
				if (!dup)
					m->ladj[out++] = m->ladj[i];
			}
		}
		m->loff[n] = out;
	}
	for (int w = 0; w < n; w++) {
		m->goff[m->grp[w] + 1]++;
		if (m->loff[w + 1] > m->loff[w])
			m->glinked[m->grp[w]] = 1;
	}
	for (int k = 0; k < m->ngrp; k++)
		m->goff[k + 1] += m->goff[k];
	{
		int *fill = calloc(m->ngrp + 1, sizeof(int));

		if (!fill)
			goto out;
		for (int w = 0; w < n; w++)
			m->gmem[m->goff[m->grp[w]] + fill[m->grp[w]]++] = w;
		free(fill);
	}
#undef ALLOC
	err = 0;
out:
	free(hgrp);
	free(w_of);
	return err;
}

#define FOR_LINKS(m, w, v) \
	for (int _i = (m)->loff[w], v; _i < (m)->loff[(w) + 1] && ((v) = (m)->ladj[_i], 1); _i++)

/* Median beta over w's other unclustered neighbours (Alg. 1 line 19). */
static double median_beta(struct mw *m, int w)
{
	int k = 0, gw = m->grp[w];

	if (!m->glinked[gw])	/* every group member has the same beta */
		return m->galpha[gw];
	for (int i = m->goff[gw]; i < m->goff[gw + 1]; i++) {
		int u = m->gmem[i];

		if (u != w && !m->clustered[u])
			m->scratch[k++] = m->beta[u];
	}
	FOR_LINKS(m, w, v)
		if (!m->clustered[v])
			m->scratch[k++] = m->beta[v];
	if (k == 0)
		return 0;
	qsort(m->scratch, k, sizeof(double), cmp_dbl);
	return k % 2 ? m->scratch[k / 2] : (m->scratch[k / 2 - 1] + m->scratch[k / 2]) / 2;
}

/* Anyone unclustered may be a member, even a candidate not yet drawn
 * (Alg. 1 lines 18-23 run one candidate after the other). */
static int eligible(struct mw *m, int u)
{
	return !m->clustered[u];
}

/* Give aggregator w up to gbar members, weakest first. */
static int take_members(struct mw *m, int w, int *agg)
{
	int gw = m->grp[w], want = m->gbar[w], took = 0, nl = 0;
	int hi = m->prefoff[gw + 1], *lk = m->lscratch;
	int i, j = 0;

	/* Link neighbours, in preference order (few: sort a copy). */
	FOR_LINKS(m, w, v)
		if (eligible(m, v))
			lk[nl++] = v;
	qsort(lk, nl, sizeof(int), cmp_pref);
	/* The group's list is shared by its aggregators: skip taken heads. */
	while (m->cursor[gw] < hi && m->clustered[m->pref[m->cursor[gw]]])
		m->cursor[gw]++;
	for (i = m->cursor[gw]; took < want;) {
		int u;

		while (i < hi && (!eligible(m, m->pref[i]) || m->pref[i] == w))
			i++;
		while (j < nl && !eligible(m, lk[j]))
			j++;
		if (i >= hi && j >= nl)
			break;
		if (j < nl && (i >= hi || cmp_pref(&lk[j], &m->pref[i]) < 0))
			u = lk[j++];
		else
			u = m->pref[i++];
		m->clustered[u] = 1;
		agg[m->hid[u]] = m->hid[w];
		took++;
	}
	return took;
}

/* ---- local improvement after M-WCHA ------------------------------------- */

/*
 * Clusters whose workers all share one region group are "local": any worker
 * of the group is adjacent to any other, so they can be re-packed inside the
 * group without looking at link lines.  Clusters reaching over a link are
 * left as M-WCHA made them (they still take local members as targets).
 *
 * Two moves, repeated until neither helps:
 *  - swap: the strongest worker of a local cluster becomes its aggregator
 *    (same workers, more spare capacity);
 *  - dissolve: a local cluster whose workers fit in the spare capacity of
 *    the group's other aggregators is spread over them, one cluster fewer.
 *    Dissolving aggregator a costs the group g_a + 1 of capacity whatever
 *    its size, so clusters go cheapest first (lone workers, then weak
 *    aggregators), ties by the seeded key.
 * Neither move adds a cluster, fills an aggregator past g, or pairs
 * workers that are not adjacent by region.
 */
struct imp {
	int *ag;		/* worker -> aggregator worker, or -1 */
	int *cnt;		/* members per worker */
	int *local;		/* 1: cluster of an aggregator/lone worker is local */
	int *spare;		/* per group: sum of g - cnt over aggregators */
	int *ord, *gcur, *cost, *head, *nxt;
};

static struct mw *sort_imp_mw;
static struct imp *sort_imp;

static int cmp_dissolve(const void *a, const void *b)
{
	const struct mw *m = sort_imp_mw;
	int x = *(const int *)a, y = *(const int *)b;

	if (m->grp[x] != m->grp[y])
		return m->grp[x] - m->grp[y];
	if (sort_imp->cost[x] != sort_imp->cost[y])	/* cost, filled in before sorting */
		return sort_imp->cost[x] - sort_imp->cost[y];
	return m->key[x] < m->key[y] ? -1 : m->key[x] > m->key[y];
}

static void imp_recount(struct mw *m, struct imp *im)
{
	memset(im->cnt, 0, m->n * sizeof(int));
	memset(im->spare, 0, m->ngrp * sizeof(int));
	for (int w = 0; w < m->n; w++)
		im->local[w] = 1;
	for (int w = 0; w < m->n; w++)
		if (im->ag[w] >= 0) {
			im->cnt[im->ag[w]]++;
			if (m->grp[w] != m->grp[im->ag[w]])
				im->local[im->ag[w]] = 0;
		}
	for (int w = 0; w < m->n; w++)
		if (im->ag[w] < 0 && im->cnt[w] > 0)
			im->spare[m->grp[w]] += m->g[w] - im->cnt[w];
}

/* Swap in the strongest worker of every local cluster; returns changes. */
static int imp_swap(struct mw *m, struct imp *im)
{
	int changed = 0;
	int *best = m->lscratch;

	for (int w = 0; w < m->n; w++)
		best[w] = -1;
	for (int u = 0; u < m->n; u++) {
		int a = im->ag[u];

		if (a < 0 || !im->local[a])
			continue;
		if (m->g[u] > m->g[a] && m->g[u] >= im->cnt[a] &&
		    (best[a] < 0 || m->g[u] > m->g[best[a]] ||
		     (m->g[u] == m->g[best[a]] && m->key[u] < m->key[best[a]])))
			best[a] = u;
	}
	for (int u = 0; u < m->n; u++) {
		int a = im->ag[u];

		if (a >= 0 && best[a] >= 0 && u != best[a])
			im->ag[u] = best[a];
	}
	for (int a = 0; a < m->n; a++) {
		if (best[a] < 0)
			continue;
		im->ag[best[a]] = -1;
		im->ag[a] = best[a];
		changed++;
	}
	return changed;
}

static int cmp_lone(const void *a, const void *b)
{
	const struct mw *m = sort_imp_mw;
	int x = *(const int *)a, y = *(const int *)b;

	if (m->grp[x] != m->grp[y])
		return m->grp[x] - m->grp[y];
	if (m->g[x] != m->g[y])	/* cost 1: strongest first; -1: weakest */
		return sort_imp->cost[x] * (m->g[y] - m->g[x]);
	return m->key[x] < m->key[y] ? -1 : m->key[x] > m->key[y];
}

/*
 * Promote: a lone worker or a member stronger than a local aggregator
 * takes over its cluster and the aggregator with it: one cluster fewer for
 * a lone worker, more capacity for a member (its old cluster keeps the
 * rest).  Per group the
 * strongest lone workers meet the weakest aggregators.
 */
static int imp_promote(struct mw *m, struct imp *im)
{
	int nl = 0, na, done = 0, *map = m->lscratch, *lone = im->ord, *ags;

	for (int w = 0; w < m->n; w++) {
		map[w] = -1;
		im->cost[w] = 0;
		if (im->cnt[w] == 0 && m->g[w] > 0) {
			im->cost[w] = 1;	/* lone or member: strongest first */
			lone[nl++] = w;
		}
	}
	ags = lone + nl;
	na = 0;
	for (int w = 0; w < m->n; w++)
		if (im->ag[w] < 0 && im->cnt[w] > 0 && im->local[w]) {
			im->cost[w] = -1;	/* aggregators: weakest first */
			ags[na++] = w;
		}
	sort_imp_mw = m;
	sort_imp = im;
	qsort(lone, nl, sizeof(int), cmp_lone);
	qsort(ags, na, sizeof(int), cmp_lone);
	for (int i = 0, j = 0; i < nl && j < na;) {
		int L = lone[i], a = ags[j];

		if (m->grp[a] < m->grp[L]) {
			j++;
		} else if (m->grp[L] < m->grp[a] || m->g[L] <= m->g[a]) {
			i++;	/* no weaker aggregator left for L */
			if (i < nl && m->grp[lone[i]] == m->grp[L])
				while (i < nl && m->grp[lone[i]] == m->grp[L])
					i++;
		} else if (m->g[L] < im->cnt[a] + 1) {
			j++;
		} else {
			map[a] = L;
			done += im->ag[L] < 0;
			im->cost[L] = 2;	/* promoted */
			i++;
			j++;
		}
	}
	for (int u = 0; u < m->n; u++)
		if (im->ag[u] >= 0 && map[im->ag[u]] >= 0 &&
		    !(im->cnt[u] == 0 && im->cost[u] == 2))
			im->ag[u] = map[im->ag[u]];
	for (int a = 0; a < m->n; a++)
		if (map[a] >= 0) {
			im->ag[map[a]] = -1;
			im->ag[a] = map[a];
		}
	return done;
}

/* Dissolve local clusters into their group's spare capacity. */
static int imp_dissolve(struct mw *m, struct imp *im)
{
	int nh = 0, done = 0;

	for (int w = 0; w < m->n; w++)
		if (im->ag[w] < 0 && im->local[w]) {
			/* lone worker: costs 1; aggregator: g + 1 */
			im->cost[w] = im->cnt[w] > 0 ? m->g[w] + 1 : 1;
			im->ord[nh++] = w;
		}
	sort_imp_mw = m;
	sort_imp = im;
	qsort(im->ord, nh, sizeof(int), cmp_dissolve);
	for (int k = 0; k < m->ngrp; k++)
		im->gcur[k] = m->goff[k];
	for (int w = 0; w < m->n; w++)
		im->head[w] = -1;
	for (int u = 0; u < m->n; u++)
		if (im->ag[u] >= 0) {
			im->nxt[u] = im->head[im->ag[u]];
			im->head[im->ag[u]] = u;
		}
	for (int k = 0; k < nh; k++) {
		int w = im->ord[k], gw = m->grp[w], size = 1 + im->cnt[w];
		int avail = im->spare[gw];

		if (im->cnt[w] > 0)
			avail -= m->g[w] - im->cnt[w];
		if (avail < size)
			continue;
		/* Move w's members, then w, to other aggregators, first fit. */
		im->spare[gw] -= im->cnt[w] > 0 ? m->g[w] - im->cnt[w] : 0;
		im->cnt[w] = 0;
		for (int u = im->head[w], nu; ; u = nu) {
			int t;

			if (u < 0)
				u = w;
			nu = u == w ? -1 : im->nxt[u];
			while (im->gcur[gw] < m->goff[gw + 1]) {
				t = m->gmem[im->gcur[gw]];
				if (t != w && im->ag[t] < 0 && im->cnt[t] > 0 &&
				    im->cnt[t] < m->g[t])
					break;
				im->gcur[gw]++;
			}
			t = m->gmem[im->gcur[gw]];
			im->ag[u] = t;
			im->cnt[t]++;
			im->spare[gw]--;
			im->nxt[u] = im->head[t];
			im->head[t] = u;
			if (u == w)
				break;
		}
		im->head[w] = -1;
		done++;
	}
	return done;
}

/* Returns the number of clusters removed, or -ENOMEM. */
static int mw_improve(struct mw *m, const struct agg_hosts *h, int *agg)
{
	struct imp im;
	int removed = 0, err = -ENOMEM;
	int *w_of = malloc(h->n * sizeof(int));

	memset(&im, 0, sizeof(im));
	im.ag = malloc((m->n + 1) * sizeof(int));
	im.cnt = malloc((m->n + 1) * sizeof(int));
	im.local = malloc((m->n + 1) * sizeof(int));
	im.ord = malloc((m->n + 1) * sizeof(int));
	im.spare = malloc((m->ngrp + 1) * sizeof(int));
	im.gcur = malloc((m->ngrp + 1) * sizeof(int));
	im.cost = malloc((m->n + 1) * sizeof(int));
	im.head = malloc((m->n + 1) * sizeof(int));
	im.nxt = malloc((m->n + 1) * sizeof(int));
	if (!w_of || !im.ag || !im.cnt || !im.local || !im.ord || !im.spare || !im.gcur ||
	    !im.cost || !im.head || !im.nxt)
		goto out;
	for (int i = 0; i < h->n; i++)
		w_of[i] = -1;
	for (int w = 0; w < m->n; w++)
		w_of[m->hid[w]] = w;
	for (int w = 0; w < m->n; w++)
		im.ag[w] = agg[m->hid[w]] >= 0 ? w_of[agg[m->hid[w]]] : -1;
	for (;;) {
		int d;

		imp_recount(m, &im);
		imp_swap(m, &im);
		imp_recount(m, &im);
		d = imp_promote(m, &im);
		imp_recount(m, &im);
		d += imp_dissolve(m, &im);
		if (!d)
			break;
		removed += d;
	}
	for (int w = 0; w < m->n; w++)
		agg[m->hid[w]] = im.ag[w] >= 0 ? m->hid[im.ag[w]] : -1;
	err = removed;
out:
	free(w_of);
	free(im.ag);
	free(im.cnt);
	free(im.local);
	free(im.ord);
	free(im.spare);
	free(im.gcur);
	free(im.cost);
	free(im.head);
	free(im.nxt);
	return err;
}

int agg_cluster_mwcha(const struct agg_hosts *h, const struct agg_cluster_opts *o,
		      int *agg, struct agg_cluster_stats *st)
{
	struct agg_rand rng;
	struct mw m;
	double b = o->bw_demand > 0 ? o->bw_demand : agg_cluster_min_bw(h);
	int err;

	memset(st, 0, sizeof(*st));
	st->bw_demand = b;
	for (int i = 0; i < h->n; i++)
		agg[i] = -1;
	if (b <= 0)
		return -EINVAL;
	agg_rand_seed(&rng, o->seed);
	err = mw_init(&m, h, o, b, &rng);
	if (err) {
		mw_free(&m);
		return err;
	}
	sort_mw = &m;
	for (;;) {
		int nca = 0, nsel = 0, any = 0;

		/* Step 1: capacities g-bar (Eq. 2) and g^ (Eq. 3). */
		memset(m.ucnt, 0, m.ngrp * sizeof(int));
		for (int w = 0; w < m.n; w++)
			if (!m.clustered[w])
				m.ucnt[m.grp[w]]++;
		for (int w = 0; w < m.n; w++) {
			m.ca[w] = m.sel[w] = 0;
			m.ghat[w] = 0;
			if (m.clustered[w])
				continue;
			m.nfree[w] = m.ucnt[m.grp[w]] - 1;
			FOR_LINKS(&m, w, v)
				m.nfree[w] += !m.clustered[v];
			m.gbar[w] = m.g[w] < m.nfree[w] ? m.g[w] : m.nfree[w];
			m.ghat[w] = pow2ceil(m.gbar[w]);
			any |= m.ghat[w] > 0;
		}
		if (!any)
			break;
		st->rounds++;
		/* Step 2: candidates have the largest g^ within two hops. */
		memset(m.gmax, 0, m.ngrp * sizeof(int));
		memset(m.glmax, 0, m.ngrp * sizeof(int));
		for (int w = 0; w < m.n; w++) {
			m.lmax1[w] = 0;
			FOR_LINKS(&m, w, v)
				if (m.ghat[v] > m.lmax1[w])
					m.lmax1[w] = m.ghat[v];
			if (m.ghat[w] > m.gmax[m.grp[w]])
				m.gmax[m.grp[w]] = m.ghat[w];
		}
		for (int w = 0; w < m.n; w++)
			if (m.lmax1[w] > m.glmax[m.grp[w]])
				m.glmax[m.grp[w]] = m.lmax1[w];
		for (int w = 0; w < m.n; w++) {
			int top;

			if (m.clustered[w] || m.ghat[w] == 0)
				continue;
			top = m.gmax[m.grp[w]] > m.glmax[m.grp[w]] ?
			      m.gmax[m.grp[w]] : m.glmax[m.grp[w]];
			FOR_LINKS(&m, w, v) {
				if (m.gmax[m.grp[v]] > top)
					top = m.gmax[m.grp[v]];
				if (m.lmax1[v] > top)
					top = m.lmax1[v];
			}
			if (m.ghat[w] >= top) {
				m.ca[w] = 1;
				m.order[nca++] = w;
			}
		}
		/* Step 3: alpha (Eq. 5), beta (Eq. 6), selection with 1/median. */
		memset(m.galpha, 0, m.ngrp * sizeof(double));
		for (int k = 0; k < nca; k++) {
			int w = m.order[k];

			m.alpha[w] = (double)m.gbar[w] / m.nfree[w];
			m.galpha[m.grp[w]] += m.alpha[w];
		}
		for (int u = 0; u < m.n; u++) {
			if (m.clustered[u])
				continue;
			m.beta[u] = m.galpha[m.grp[u]];
			FOR_LINKS(&m, u, v)
				if (m.ca[v])
					m.beta[u] += m.alpha[v];
		}
		qsort(m.order, nca, sizeof(int), cmp_ca);
		for (int k = 0; k < nca; k++) {
			int w = m.order[k];
			double p;

			m.med[w] = median_beta(&m, w);
			p = m.med[w] > 1 ? 1 / m.med[w] : 1;
			if (agg_rand_double(&rng) < p) {
				m.sel[w] = 1;
				nsel++;
			}
		}
		if (!nsel) {
			int best = m.order[0];

			for (int k = 1; k < nca; k++)
				if (m.med[m.order[k]] < m.med[best])
					best = m.order[k];
			m.sel[best] = 1;
		}
		/* Members: per group, unclustered workers in preference order. */
		for (int k = 0, off = 0; k < m.ngrp; k++) {
			m.prefoff[k] = off;
			m.cursor[k] = off;
			for (int i = m.goff[k]; i < m.goff[k + 1]; i++)
				if (!m.clustered[m.gmem[i]])
					m.pref[off++] = m.gmem[i];
			qsort(m.pref + m.prefoff[k], off - m.prefoff[k], sizeof(int),
			      cmp_pref);
			m.prefoff[k + 1] = off;
		}
		/* Strongest first, so weaker ones of a tier fill last. */
		for (int k = 0; k < nca; k++) {
			int w = m.order[k];

			if (m.sel[w] && !m.clustered[w] && take_members(&m, w, agg) > 0)
				m.clustered[w] = 1;
		}
	}
	for (int w = 0; w < m.n; w++)
		st->mwcha_clusters += agg[m.hid[w]] < 0;
	err = mw_improve(&m, h, agg);
	if (err < 0) {
		mw_free(&m);
		return err;
	}
	for (int w = 0; w < m.n; w++) {
		int i = m.hid[w];

		if (agg[i] < 0)
			st->clusters++;
	}
	for (int i = 0; i < h->n; i++)
		if (agg[i] >= 0 && agg[agg[i]] == -1) {
			agg[agg[i]] = -2;	/* mark counted */
			st->aggregators++;
		}
	for (int i = 0; i < h->n; i++)
		if (agg[i] == -2)
			agg[i] = -1;
	mw_free(&m);
	return 0;
}

static int cmp_int_desc(const void *a, const void *b)
{
	return *(const int *)b - *(const int *)a;
}

int agg_cluster_optimum(const struct agg_hosts *h, double b, double c)
{
	int *grp = malloc(h->n * sizeof(int)), *cap = malloc(h->n * sizeof(int));
	int ngrp, total = 0;

	if (!grp || !cap) {
		free(grp);
		free(cap);
		return -ENOMEM;
	}
	if (h->nlinks) {
		free(grp);
		free(cap);
		return -EOPNOTSUPP;
	}
	if (b <= 0)
		b = agg_cluster_min_bw(h);
	ngrp = agg_cluster_groups(h, grp);
	for (int k = 0; k < ngrp; k++) {
		int n = 0, covered = 0, used = 0;

		for (int i = 0; i < h->n; i++)
			if (grp[i] == k)
				cap[n++] = agg_cluster_capacity(&h->host[i], b, c);
		qsort(cap, n, sizeof(int), cmp_int_desc);
		while (covered < n) {
			covered += 1 + cap[used];
			used++;
		}
		total += used;
	}
	free(grp);
	free(cap);
	return total;
}
