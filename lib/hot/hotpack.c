// SPDX-License-Identifier: GPL-2.0-only
/* Placement of the hot parameters over the stripes and layout-aware
 * packing of a worker's hot pairs (ZEBRA III-D, Alg. 1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

int agg_hot_layout(unsigned *stripe_of, size_t k, unsigned m, bool random, uint64_t seed)
{
	struct agg_rand r;

	if (m == 0)
		return -EINVAL;
	for (size_t i = 0; i < k; i++)
		stripe_of[i] = agg_hot_stripe(i, m);
	if (!random)
		return 0;
	/* A random permutation of the same slots (Fisher-Yates). */
	agg_rand_seed(&r, seed);
	for (size_t i = k; i > 1; i--) {
		size_t j = agg_rand_below(&r, i);
		unsigned s = stripe_of[i - 1];

		stripe_of[i - 1] = stripe_of[j];
		stripe_of[j] = s;
	}
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

int agg_hot_batch_ranks(const struct agg_hot_index *x, const uint64_t *ids, size_t n,
			uint64_t **ranks, size_t *nranks, size_t *cold)
{
	uint64_t *r = malloc((n + 1) * sizeof(*r)), *c = malloc((n + 1) * sizeof(*c));
	size_t nr = 0, nc = 0, out = 0;

	*ranks = NULL;
	*nranks = *cold = 0;
	if (!r || !c) {
		free(r);
		free(c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t rank = agg_hot_index_rank(x, ids[i]);

		if (rank < 0)
			c[nc++] = ids[i];
		else
			r[nr++] = rank;
	}
	qsort(r, nr, sizeof(*r), cmp_u64);
	for (size_t i = 0; i < nr; i++)
		if (i == 0 || r[i] != r[i - 1])
			r[out++] = r[i];
	qsort(c, nc, sizeof(*c), cmp_u64);
	for (size_t i = 0; i < nc; i++)
		*cold += i == 0 || c[i] != c[i - 1];
	free(c);
	*ranks = r;
	*nranks = out;
	return 0;
}

/* Pairs per_pkt at a time, in order; packets numbered from first. */
static void pack_in_order(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
			  unsigned m, size_t per_pkt, size_t first, size_t *pkt_of,
			  uint64_t *seen, struct agg_hot_pack_stats *st)
{
	size_t words = (m + 63) / 64;

	for (size_t p = 0; p * per_pkt < n; p++) {
		memset(seen, 0, words * sizeof(*seen));
		for (size_t i = p * per_pkt; i < n && i < (p + 1) * per_pkt; i++) {
			unsigned k = stripe_of[ranks[i]];

			st->conflicts += (seen[k / 64] >> (k % 64)) & 1;
			seen[k / 64] |= 1ULL << (k % 64);
			if (pkt_of)
				pkt_of[i] = first + p;
		}
		st->packets++;
	}
}

int agg_hot_pack(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
		 unsigned m, size_t per_pkt, bool orchestrate, size_t *pkt_of,
		 struct agg_hot_pack_stats *st)
{
	size_t npk, words = (m + 63) / 64, nover = 0;
	size_t *fill = NULL, *cursor = NULL, *num = NULL, *over = NULL;
	uint64_t *has = NULL, *tmp = NULL;
	int err = -ENOMEM;

	memset(st, 0, sizeof(*st));
	if (per_pkt == 0 || m == 0)
		return -EINVAL;
	st->pairs = n;
	npk = (n + per_pkt - 1) / per_pkt;	/* Alg. 1 line 1: Estimate_packets */
	has = calloc((npk + 1) * words, sizeof(*has));
	if (!has)
		goto out;
	if (!orchestrate) {
		pack_in_order(ranks, n, stripe_of, m, per_pkt, 0, pkt_of, has, st);
		err = 0;
		goto out;
	}
	fill = calloc(npk + 1, sizeof(*fill));
	cursor = calloc(m, sizeof(*cursor));
	num = malloc((npk + 1) * sizeof(*num));
	over = malloc((n + 1) * sizeof(*over));
	tmp = malloc((n + 1) * sizeof(*tmp));
	if (!fill || !cursor || !num || !over || !tmp)
		goto out;
	/*
	 * Each pair goes to the first packet that is not full and holds no
	 * pair of its stripe (lines 4-16).  A packet skipped for a stripe
	 * stays unfit for it (packets only fill up), so a cursor per stripe
	 * finds the first candidate in amortised O(1).
	 */
	for (size_t i = 0; i < n; i++) {
		unsigned k = stripe_of[ranks[i]];
		size_t p = cursor[k];

		while (p < npk && (fill[p] == per_pkt ||
				   ((has[p * words + k / 64] >> (k % 64)) & 1)))
			p++;
		cursor[k] = p;
		if (p == npk) {		/* lines 17-18: G' */
			over[nover++] = i;
			continue;
		}
		has[p * words + k / 64] |= 1ULL << (k % 64);
		fill[p]++;
		if (pkt_of)
			pkt_of[i] = p;
	}
	for (size_t p = 0; p < npk; p++) {	/* number the packets used */
		num[p] = st->packets;
		st->packets += fill[p] > 0;
	}
	if (pkt_of)
		for (size_t i = 0, o = 0; i < n; i++) {
			if (o < nover && over[o] == i)
				o++;
			else
				pkt_of[i] = num[pkt_of[i]];
		}
	/* Lines 19-20: G' in padding packets of its own, regardless of layout. */
	st->padded = nover;
	if (nover) {
		size_t *po = pkt_of ? malloc(nover * sizeof(*po)) : NULL;

		if (pkt_of && !po)
			goto out;
		for (size_t o = 0; o < nover; o++)
			tmp[o] = ranks[over[o]];
		pack_in_order(tmp, nover, stripe_of, m, per_pkt, st->packets, po, has, st);
		for (size_t o = 0; po && o < nover; o++)
			pkt_of[over[o]] = po[o];
		free(po);
	}
	err = 0;
out:
	free(fill);
	free(cursor);
	free(num);
	free(over);
	free(tmp);
	free(has);
	return err;
}
