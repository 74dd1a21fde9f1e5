// SPDX-License-Identifier: GPL-2.0-only
/* Identifying the hot parameters of a log: exact, sampled (ZEBRA's
 * sampling-based method), online (its iteration-based method), sketched. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

struct ident {
	const struct agg_hot_opts *o;
	struct agg_hot_counts exact;
	struct agg_hot_sketch *sketch;
	struct agg_hot_table last;	/* online: the last table emitted */
	bool have_last;
};

/* Principle 1 over what is counted so far, laid out over the stripes. */
static int make_table(struct ident *h, uint64_t iters, struct agg_hot_table *t)
{
	const struct agg_hot_opts *o = h->o;
	uint64_t total = h->sketch ? agg_hot_sketch_total(h->sketch) : h->exact.total;
	uint64_t distinct = h->sketch ? o->sketch : h->exact.distinct;
	uint64_t kmax = o->budget / AGG_HOT_SLOT_BYTES;
	struct agg_hot_entry *e;
	struct agg_hot_k k;
	size_t n;
	int err;

	if (kmax > distinct)
		kmax = distinct;
	err = h->sketch ? agg_hot_sketch_top(h->sketch, kmax, &e, &n) :
	      agg_hot_counts_top(&h->exact, kmax, &e, &n);
	if (err)
		return err;
	agg_hot_choose_k(e, n, total, o->coverage, o->budget, &k);
	*t = (struct agg_hot_table){
		.k = k.k, .coverage = o->coverage, .achieved = k.achieved,
		.budget = o->budget, .stripes = o->stripes, .updates = total,
		.iter = iters, .sample = o->sample > 0 && o->sample < 1 ? o->sample : 1,
		.sketch = h->sketch != NULL, .budget_bound = k.budget_bound, .e = e,
	};
	return 0;
}

/* Online: emit t when it moved from the last table emitted; keeps it. */
static int offer(struct ident *h, struct agg_hot_table *t, agg_hot_emit_fn emit,
		 void *arg, struct agg_hot_ident_stats *st)
{
	int err;

	st->tables++;
	if (h->o->online && h->have_last &&
	    !(agg_hot_kendall_topk(&h->last, t) > h->o->tau)) {
		agg_hot_table_free(t);
		return 0;
	}
	err = emit(t, arg);
	st->emitted++;
	agg_hot_table_free(&h->last);
	h->last = *t;
	h->have_last = true;
	return err;
}

int agg_hot_identify(struct agg_hot_log *l, const struct agg_hot_opts *o,
		     agg_hot_emit_fn emit, void *arg, struct agg_hot_ident_stats *st,
		     struct agg_diag *d)
{
	struct ident h = { .o = o };
	struct agg_hot_table t;
	struct agg_rand rng;
	bool sample = o->sample > 0 && o->sample < 1, any = false;
	uint64_t *ids = NULL, iter, last_iter = 0;
	size_t n, cap = 0;
	int r, err = 0;

	memset(st, 0, sizeof(*st));
	agg_rand_seed(&rng, o->seed);
	if (o->sketch && !(h.sketch = agg_hot_sketch_new(o->sketch)))
		return -ENOMEM;
	while ((r = agg_hot_log_next(l, &ids, &n, &cap, &iter, d)) > 0) {
		if (any && iter != last_iter) {
			st->iters++;
			if (o->online && st->iters % o->online == 0) {
				if ((err = make_table(&h, st->iters, &t)) ||
				    (err = offer(&h, &t, emit, arg, st)))
					goto out;
				if (o->window && h.sketch)
					agg_hot_sketch_reset(h.sketch);
				else if (o->window)
					agg_hot_counts_reset(&h.exact);
			}
		}
		last_iter = iter;
		any = true;
		st->updates += n;
		/* ZEBRA samples training examples: a text line, or a binary id. */
		if (sample && !l->binary && agg_rand_double(&rng) >= o->sample)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (sample && l->binary && agg_rand_double(&rng) >= o->sample)
				continue;
			st->counted++;
			if (h.sketch)
				agg_hot_sketch_add(h.sketch, ids[i]);
			else if ((err = agg_hot_counts_add(&h.exact, ids[i])))
				goto out;
		}
	}
	if (r < 0) {
		err = r;
		goto out;
	}
	st->iters += any;
	if ((err = make_table(&h, st->iters, &t)))
		goto out;
	err = offer(&h, &t, emit, arg, st);
out:
	st->count_bytes = h.sketch ? agg_hot_sketch_bytes(o->sketch) :
			  agg_hot_counts_bytes(&h.exact);
	agg_hot_table_free(&h.last);
	agg_hot_counts_free(&h.exact);
	agg_hot_sketch_free(h.sketch);
	free(ids);
	return err;
}
