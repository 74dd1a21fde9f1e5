// SPDX-License-Identifier: GPL-2.0-only
/* Hot-parameter tables: Principle 1, the v1 text format, the id index and
 * comparing two tables (ZEBRA III-C, V-C). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "opts.h"
#include "text.h"

/* ---- Principle 1 ---------------------------------------------------------------- */

void agg_hot_choose_k(const struct agg_hot_entry *e, size_t n, uint64_t total,
		      double p, uint64_t budget, struct agg_hot_k *out)
{
	const double eps = 1e-12;	/* p given in decimal: 0.8 of 100 is 80 */
	uint64_t cum = 0;
	size_t k;

	memset(out, 0, sizeof(*out));
	out->k_budget = budget / AGG_HOT_SLOT_BYTES;
	out->k_coverage = SIZE_MAX;
	for (k = 0; k < n && total; k++) {
		cum += e[k].freq;
		if ((double)cum / total >= p - eps) {
			out->k_coverage = k + 1;
			break;
		}
	}
	out->k = out->k_coverage < n ? out->k_coverage : n;
	if (out->k > out->k_budget)
		out->k = out->k_budget;
	cum = 0;
	for (k = 0; k < out->k; k++)
		cum += e[k].freq;
	out->achieved = total ? (double)cum / total : 0;
	/* e[] may stop at the budget: then p was out of its reach too. */
	out->budget_bound = out->achieved < p - eps && out->k == out->k_budget;
}

/* ---- the text format -------------------------------------------------------------- */

int agg_hot_table_write(const struct agg_hot_table *t, FILE *f)
{
	fprintf(f, "hot v1 k=%zu coverage=%.6g achieved=%.6f budget=%" PRIu64
		" slot_bytes=%d stripes=%u updates=%" PRIu64 " iter=%" PRIu64
		" sample=%.6g method=%s\n",
		t->k, t->coverage, t->achieved, t->budget, AGG_HOT_SLOT_BYTES,
		t->stripes, t->updates, t->iter, t->sample > 0 ? t->sample : 1,
		t->sketch ? "sketch" : "exact");
	for (size_t i = 0; i < t->k; i++)
		fprintf(f, "%zu %" PRIu64 " %" PRIu64 " %u %" PRIu64 "\n", i,
			t->e[i].id, t->e[i].freq, agg_hot_stripe(i, t->stripes),
			agg_hot_slot(i, t->stripes));
	return ferror(f) ? -EIO : 0;
}

void agg_hot_table_free(struct agg_hot_table *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

static int table_header(struct agg_hot_table *t, const struct agg_text_line *ln,
			const char *fname, struct agg_diag *d)
{
	if (ln->ntok < 2 || strcmp(ln->tok[1].s, "v1")) {
		agg_diag_set(d, fname, ln->lineno, ln->ntok < 2 ? ln->end_col : ln->tok[1].col,
			     "unsupported hot table version (this agg reads v1)");
		return -EINVAL;
	}
	agg_hot_table_free(t);
	t->stripes = 1;
	t->sample = 1;
	for (int i = 2; i < ln->ntok; i++) {
		const char *kv = ln->tok[i].s, *v = strchr(kv, '=');
		size_t klen = v ? (size_t)(v - kv) : 0;
		uint64_t u = 0;
		double x = 0;
		bool bad = false;

		if (!v || !klen)
			goto bad;
		v++;
#define KEY(k) (klen == strlen(k) && !strncmp(kv, k, klen))
		if (KEY("coverage") || KEY("achieved") || KEY("sample"))
			bad = agg_parse_double(v, &x, NULL) || !(x >= 0 && x <= 1);
		else if (KEY("k") || KEY("budget") || KEY("stripes") || KEY("updates") ||
			 KEY("iter") || KEY("slot_bytes"))
			bad = agg_parse_u64(v, &u, NULL);
		if (bad)
			goto bad;
		if (KEY("k"))
			t->k = u;
		else if (KEY("coverage"))
			t->coverage = x;
		else if (KEY("achieved"))
			t->achieved = x;
		else if (KEY("sample"))
			t->sample = x;
		else if (KEY("budget"))
			t->budget = u;
		else if (KEY("stripes")) {
			if (u < 1 || u > 1 << 20)
				goto bad;
			t->stripes = u;
		} else if (KEY("updates"))
			t->updates = u;
		else if (KEY("iter"))
			t->iter = u;
		else if (KEY("method"))
			t->sketch = !strcmp(v, "sketch");
		/* Other keys are newer fields: version 1 only grows by fields. */
#undef KEY
		continue;
bad:
		agg_diag_set(d, fname, ln->lineno, ln->tok[i].col,
			     "bad hot table header field '%s'", kv);
		return -EINVAL;
	}
	return 0;	/* rows are allocated as they come: k may lie */
}

static int parse_row(const struct agg_text_line *ln, uint64_t v[5], const char *fname,
		     struct agg_diag *d)
{
	if (ln->ntok != 5) {
		agg_diag_set(d, fname, ln->lineno, ln->ntok > 5 ? ln->tok[5].col : ln->end_col,
			     "expected 'rank id freq stripe slot'");
		return -EINVAL;
	}
	for (int i = 0; i < 5; i++) {
		if (agg_parse_u64(ln->tok[i].s, &v[i], NULL) ||
		    !isdigit((unsigned char)ln->tok[i].s[0])) {
			agg_diag_set(d, fname, ln->lineno, ln->tok[i].col,
				     "not a number: '%s'", ln->tok[i].s);
			return -EINVAL;
		}
	}
	if (v[1] == AGG_HOT_ITER_END) {
		agg_diag_set(d, fname, ln->lineno, ln->tok[1].col,
			     "bad id '%s' (ids are 0 to 2^64-2)", ln->tok[1].s);
		return -EINVAL;
	}
	return 0;
}

int agg_hot_table_read(struct agg_hot_table *t, FILE *f, const char *fname,
		       struct agg_diag *d)
{
	struct agg_hot_index *x = NULL;
	struct agg_text tx;
	struct agg_text_line ln;
	bool header = false;
	size_t rows = 0;
	int r, err = 0;

	memset(t, 0, sizeof(*t));
	agg_text_init(&tx, f);
	/* A stream of tables (agg-hot --online): the last one counts. */
	while (!err && (r = agg_text_next(&tx, &ln)) > 0) {
		uint64_t v[5];

		if (ln.ntok == 0)
			continue;
		if (!strcmp(ln.tok[0].s, "hot")) {
			if (header && rows != t->k) {
				agg_diag_set(d, fname, ln.lineno, 1,
					     "table before this one has %zu rows, k=%zu", rows, t->k);
				err = -EINVAL;
				break;
			}
			err = table_header(t, &ln, fname, d);
			header = true;
			rows = 0;
			continue;
		}
		if (!header) {
			agg_diag_set(d, fname, ln.lineno, 1, "expected a 'hot v1' header");
			err = -EINVAL;
			break;
		}
		if ((err = parse_row(&ln, v, fname, d)))
			break;
		if (v[0] != rows || rows >= t->k || v[3] != agg_hot_stripe(rows, t->stripes) ||
		    v[4] != agg_hot_slot(rows, t->stripes)) {
			agg_diag_set(d, fname, ln.lineno, 1, rows >= t->k ?
				     "more rows than k=%zu" :
				     "row out of place (rank %zu: stripe %u, slot %" PRIu64 ")",
				     rows >= t->k ? t->k : rows, agg_hot_stripe(rows, t->stripes),
				     agg_hot_slot(rows, t->stripes));
			err = -EINVAL;
			break;
		}
		if (agg_grow((void **)&t->e, rows + 1, sizeof(*t->e))) {
			err = -ENOMEM;
			break;
		}
		t->e[rows].id = v[1];
		t->e[rows].freq = v[2];
		rows++;
	}
	if (!err && r < 0)
		err = r == -E2BIG ? (agg_diag_set(d, fname, tx.lineno, 1, "line too long"),
				     -EINVAL) : r;
	if (!err && !header) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "no 'hot v1' table");
		err = -EINVAL;
	}
	if (!err && rows != t->k) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "table has %zu rows, k=%zu", rows, t->k);
		err = -EINVAL;
	}
	if (!err) {
		err = agg_hot_index_new(&x, t);
		if (err == -EEXIST) {
			/* the index found the second rank of some id: name both */
			for (size_t i = 0; i < t->k && err == -EEXIST; i++) {
				int64_t first = agg_hot_index_rank(x, t->e[i].id);

				if (first != (int64_t)i)
					agg_diag_set(d, fname, tx.lineno + 1, 1,
						     "id %" PRIu64 " has two ranks, %" PRId64 " and %zu",
						     t->e[i].id, first, i);
				err = first != (int64_t)i ? -EINVAL : err;
			}
		}
		agg_hot_index_free(x);
	}
	agg_text_free(&tx);
	if (err)
		agg_hot_table_free(t);
	return err;
}

/* ---- the id index ----------------------------------------------------------------------- */

struct agg_hot_index {
	struct agg_hot_entry *e;	/* id, rank; empty: UINT64_MAX */
	size_t mask;
};

static inline size_t idx_hash(uint64_t x, size_t mask)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x & mask;
}

/*
 * -EEXIST when an id has two ranks; the index is still made (with the
 * first rank of each id), so the caller can name the pair.
 */
int agg_hot_index_new(struct agg_hot_index **out, const struct agg_hot_table *t)
{
	struct agg_hot_index *x = calloc(1, sizeof(*x));
	size_t sz = 16;
	int err = 0;

	*out = NULL;
	if (!x)
		return -ENOMEM;
	while (sz < 2 * t->k)
		sz <<= 1;
	x->e = malloc(sz * sizeof(*x->e));
	if (!x->e) {
		free(x);
		return -ENOMEM;
	}
	x->mask = sz - 1;
	for (size_t i = 0; i < sz; i++)
		x->e[i].id = UINT64_MAX;
	for (size_t r = 0; r < t->k; r++) {
		size_t i = idx_hash(t->e[r].id, x->mask);

		for (; x->e[i].id != UINT64_MAX; i = (i + 1) & x->mask)
			if (x->e[i].id == t->e[r].id)
				break;
		if (x->e[i].id == t->e[r].id) {
			err = -EEXIST;
			continue;
		}
		x->e[i] = (struct agg_hot_entry){ t->e[r].id, r };
	}
	*out = x;
	return err;
}

void agg_hot_index_free(struct agg_hot_index *x)
{
	if (!x)
		return;
	free(x->e);
	free(x);
}

int64_t agg_hot_index_rank(const struct agg_hot_index *x, uint64_t id)
{
	if (id == UINT64_MAX)
		return -1;
	for (size_t i = idx_hash(id, x->mask); x->e[i].id != UINT64_MAX; i = (i + 1) & x->mask)
		if (x->e[i].id == id)
			return x->e[i].freq;
	return -1;
}

/* ---- comparing ------------------------------------------------------------------------------ */

/* in_b[i]: the rank in B of A's rank i, or -1. */
static int64_t *ranks_in(const struct agg_hot_table *a, const struct agg_hot_table *b,
			 size_t *common)
{
	struct agg_hot_index *x;
	int64_t *in = malloc((a->k + 1) * sizeof(*in));
	int err = agg_hot_index_new(&x, b);

	*common = 0;
	if (!in || (err && err != -EEXIST)) {
		free(in);
		agg_hot_index_free(x);
		return NULL;
	}
	for (size_t i = 0; i < a->k; i++) {
		in[i] = agg_hot_index_rank(x, a->e[i].id);
		*common += in[i] >= 0;
	}
	agg_hot_index_free(x);
	return in;
}

double agg_hot_precision(const struct agg_hot_table *a, const struct agg_hot_table *b)
{
	size_t c;
	int64_t *in = ranks_in(a, b, &c);

	if (!in)
		return NAN;
	free(in);
	return a->k ? (double)c / a->k : 0;
}

/* Inversions of v[0..n) by merge sort (v is sorted on return). */
static uint64_t inversions(int64_t *v, int64_t *tmp, size_t n)
{
	uint64_t inv;
	size_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return 0;
	inv = inversions(v, tmp, h) + inversions(v + h, tmp, n - h);
	while (i < h && j < n) {
		if (v[i] <= v[j]) {
			tmp[k++] = v[i++];
		} else {
			inv += h - i;
			tmp[k++] = v[j++];
		}
	}
	while (i < h)
		tmp[k++] = v[i++];
	while (j < n)
		tmp[k++] = v[j++];
	memcpy(v, tmp, n * sizeof(*v));
	return inv;
}

/* Discordant pairs among the common ids (in_b of A, order of A). */
static int common_inversions(const int64_t *in_b, size_t ka, size_t c, uint64_t *inv)
{
	int64_t *v = malloc((c + 1) * sizeof(*v)), *tmp = malloc((c + 1) * sizeof(*tmp));
	size_t n = 0;

	if (!v || !tmp) {
		free(v);
		free(tmp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ka; i++)
		if (in_b[i] >= 0)
			v[n++] = in_b[i];
	*inv = inversions(v, tmp, n);
	free(v);
	free(tmp);
	return 0;
}

double agg_hot_kendall(const struct agg_hot_table *a, const struct agg_hot_table *b,
		       size_t *common)
{
	size_t c;
	int64_t *in = ranks_in(a, b, &c);
	uint64_t inv = 0;
	double d = 0;

	if (common)
		*common = 0;
	if (!in)
		return NAN;
	if (common_inversions(in, a->k, c, &inv)) {
		free(in);
		return NAN;
	}
	if (c >= 2)
		d = (double)inv / ((double)c * (c - 1) / 2);
	if (common)
		*common = c;
	free(in);
	return d;
}

/* Pairs (x in the list only, y common) that the list ranks x above y. */
static double missing_above_common(const int64_t *in_other, size_t k)
{
	double pen = 0;
	size_t common_below = 0;

	for (size_t i = k; i-- > 0;) {
		if (in_other[i] >= 0)
			common_below++;
		else
			pen += common_below;
	}
	return pen;
}

double agg_hot_kendall_topk(const struct agg_hot_table *a, const struct agg_hot_table *b)
{
	const double p = 0.5;
	size_t c, c2;
	int64_t *in_b = ranks_in(a, b, &c), *in_a = ranks_in(b, a, &c2);
	double ka = a->k, kb = b->k, oa = ka - c, ob = kb - c, cost, max;
	uint64_t inv;

	if (!in_a || !in_b || common_inversions(in_b, a->k, c, &inv)) {
		free(in_a);
		free(in_b);
		return NAN;
	}
	/*
	 * Fagin et al.'s four cases: both ids in both lists (discordant pairs);
	 * both in one list, one in the other (the missing one ranks last
	 * there); one only in A and one only in B (always discordant); both
	 * only in the same list (order unknown: p).
	 */
	cost = inv + missing_above_common(in_b, a->k) + missing_above_common(in_a, b->k) +
	       oa * ob + p * (oa * (oa - 1) / 2 + ob * (ob - 1) / 2);
	max = ka * kb + p * (ka * (ka - 1) / 2 + kb * (kb - 1) / 2);
	free(in_a);
	free(in_b);
	if (max == 0)
		return a->k == b->k && c == a->k ? 0 : 1;
	return cost / max;
}
