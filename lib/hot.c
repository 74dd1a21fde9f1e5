// SPDX-License-Identifier: GPL-2.0-only
/* Hot parameters: identification, Principle 1, layout, packing (ZEBRA). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "opts.h"
#include "text.h"

/* ---- update logs -------------------------------------------------------- */

void agg_hot_log_open(struct agg_hot_log *l, FILE *f, const char *fname,
		      bool binary)
{
	memset(l, 0, sizeof(*l));
	l->f = f;
	l->fname = fname;
	l->binary = binary;
}

void agg_hot_log_close(struct agg_hot_log *l)
{
	free(l->buf);
	l->buf = NULL;
}

static int ids_push(uint64_t **ids, size_t *n, size_t *cap, uint64_t id)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 256;
		uint64_t *p = realloc(*ids, c * sizeof(**ids));

		if (!p)
			return -ENOMEM;
		*ids = p;
		*cap = c;
	}
	(*ids)[(*n)++] = id;
	return 0;
}

/* Binary: up to a buffer of ids at a time, never across an iteration end. */
static int next_binary(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		       size_t *cap, uint64_t *iter)
{
	const size_t bufsz = 8 * 8192;

	*n = 0;
	*iter = l->iter;
	if (!l->buf) {
		l->buf = malloc(bufsz);
		if (!l->buf)
			return -ENOMEM;
	}
	if (*cap < 8192) {
		uint64_t *p = realloc(*ids, 8192 * sizeof(**ids));

		if (!p)
			return -ENOMEM;
		*ids = p;
		*cap = 8192;
	}
	for (;;) {
		if (l->pos + 8 > l->len) {
			size_t keep = l->len - l->pos, got;

			if (*n)
				return 1;
			if (l->eof) {
				if (keep)
					return -EINVAL;
				return 0;
			}
			memmove(l->buf, l->buf + l->pos, keep);
			got = fread(l->buf + keep, 1, bufsz - keep, l->f);
			if (got < bufsz - keep) {
				if (ferror(l->f))
					return -EIO;
				l->eof = true;
			}
			l->len = keep + got;
			l->pos = 0;
			continue;
		}
		while (l->pos + 8 <= l->len && *n < *cap) {
			uint64_t id;

			memcpy(&id, l->buf + l->pos, 8);
			id = le64toh(id);
			l->pos += 8;
			if (id == AGG_HOT_ITER_END) {
				l->iter++;
				if (*n)
					return 1;
				*iter = l->iter;
				continue;
			}
			(*ids)[(*n)++] = id;
		}
		if (*n == *cap)
			return 1;
	}
}

int agg_hot_log_next(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		     size_t *cap, uint64_t *iter, struct agg_diag *d)
{
	ssize_t len;

	if (l->binary) {
		int r = next_binary(l, ids, n, cap, iter);

		if (r == -EINVAL)
			agg_diag_set(d, l->fname, 1, 1,
				     "binary log is not a whole number of u64 ids");
		return r;
	}
	for (;;) {
		char *p, *end;
		int ntok = 0;
		uint64_t first = 0;

		*n = 0;
		len = getline(&l->buf, &l->cap, l->f);
		if (len < 0)
			return ferror(l->f) ? -EIO : 0;
		l->lineno++;
		for (p = l->buf; *p;) {
			unsigned long long v;

			while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
				p++;
			if (!*p || *p == '#')
				break;
			if (!isdigit((unsigned char)*p)) {
				agg_diag_set(d, l->fname, l->lineno, (int)(p - l->buf) + 1,
					     "expected an id (unsigned integer)");
				return -EINVAL;
			}
			errno = 0;
			v = strtoull(p, &end, 10);
			if (errno == ERANGE || v == AGG_HOT_ITER_END ||
			    (*end && !isspace((unsigned char)*end) && *end != '#')) {
				agg_diag_set(d, l->fname, l->lineno, (int)(p - l->buf) + 1,
					     "bad id '%.*s'", (int)strcspn(p, " \t\r\n"), p);
				return -EINVAL;
			}
			if (ntok++ == 0)
				first = v;
			else if (ids_push(ids, n, cap, v))
				return -ENOMEM;
			p = end;
		}
		if (ntok == 0)
			continue;
		if (ntok == 1) {	/* one id per line */
			if (ids_push(ids, n, cap, first))
				return -ENOMEM;
		} else {
			l->iter = first;	/* "ITER ID ID ..." */
		}
		*iter = l->iter;
		return 1;
	}
}

/* ---- exact counts --------------------------------------------------------- */

int agg_hot_counts_add(struct agg_hot_counts *hc, uint64_t id)
{
	if (id >= hc->size) {
		uint64_t size = hc->size ? hc->size : 1 << 16;
		uint32_t *c;

		if (id >= AGG_HOT_DENSE_MAX)
			return -ERANGE;
		while (size <= id)
			size *= 2;
		c = realloc(hc->c, size * sizeof(*c));
		if (!c)
			return -ENOMEM;
		memset(c + hc->size, 0, (size - hc->size) * sizeof(*c));
		hc->c = c;
		hc->size = size;
	}
	if (hc->c[id] == UINT32_MAX)
		return -EOVERFLOW;
	hc->distinct += hc->c[id]++ == 0;
	hc->total++;
	return 0;
}

void agg_hot_counts_free(struct agg_hot_counts *hc)
{
	free(hc->c);
	memset(hc, 0, sizeof(*hc));
}

/* Entry order: frequency descending, then id ascending. */
static int entry_before(const struct agg_hot_entry *a, const struct agg_hot_entry *b)
{
	return a->freq != b->freq ? a->freq > b->freq : a->id < b->id;
}

static int cmp_entry(const void *x, const void *y)
{
	const struct agg_hot_entry *a = x, *b = y;

	if (entry_before(a, b))
		return -1;
	return entry_before(b, a);
}

/* A bounded min-heap keeping the best max entries seen. */
struct topk {
	struct agg_hot_entry *h;
	size_t n, max;
};

static void topk_push(struct topk *t, uint64_t id, uint64_t freq)
{
	struct agg_hot_entry e = { id, freq };
	size_t i;

	if (t->n == t->max) {
		if (!entry_before(&e, &t->h[0]))
			return;
		i = 0;		/* replace the worst, sift down */
		for (;;) {
			size_t c = 2 * i + 1;

			if (c >= t->n)
				break;
			if (c + 1 < t->n && entry_before(&t->h[c], &t->h[c + 1]))
				c++;
			if (!entry_before(&e, &t->h[c]))
				break;
			t->h[i] = t->h[c];
			i = c;
		}
		t->h[i] = e;
		return;
	}
	for (i = t->n++; i > 0 && entry_before(&t->h[(i - 1) / 2], &e); i = (i - 1) / 2)
		t->h[i] = t->h[(i - 1) / 2];
	t->h[i] = e;
}

static int topk_init(struct topk *t, size_t max)
{
	t->n = 0;
	t->max = max ? max : 1;
	t->h = malloc(t->max * sizeof(*t->h));
	return t->h ? 0 : -ENOMEM;
}

static void topk_finish(struct topk *t, struct agg_hot_entry **out, size_t *n)
{
	qsort(t->h, t->n, sizeof(*t->h), cmp_entry);
	*out = t->h;
	*n = t->n;
}

int agg_hot_counts_top(const struct agg_hot_counts *hc, size_t max,
		       struct agg_hot_entry **out, size_t *n)
{
	struct topk t;

	if (topk_init(&t, max))
		return -ENOMEM;
	for (uint64_t id = 0; id < hc->size; id++)
		if (hc->c[id] && (t.n < t.max || hc->c[id] >= t.h[0].freq))
			topk_push(&t, id, hc->c[id]);
	topk_finish(&t, out, n);
	return 0;
}

/* ---- Space-Saving ------------------------------------------------------------ */

struct ss_counter {
	uint64_t id, count;
	uint32_t hpos;		/* its slot in the hash table */
};

struct agg_hot_sketch {
	struct ss_counter *heap;	/* min-heap by count */
	uint32_t *table;		/* open addressing: heap index + 1, 0 empty */
	size_t n, max, tmask;
	uint64_t total;
};

static inline size_t ss_hash(uint64_t id, size_t mask)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return id & mask;
}

size_t agg_hot_sketch_bytes(size_t counters)
{
	size_t t = 1;

	while (t < 2 * counters)
		t <<= 1;
	return counters * sizeof(struct ss_counter) + t * sizeof(uint32_t);
}

struct agg_hot_sketch *agg_hot_sketch_new(size_t counters)
{
	struct agg_hot_sketch *s = calloc(1, sizeof(*s));
	size_t t = 1;

	if (!s || counters == 0 || counters > UINT32_MAX / 2) {
		free(s);
		return NULL;
	}
	while (t < 2 * counters)
		t <<= 1;
	s->heap = malloc(counters * sizeof(*s->heap));
	s->table = calloc(t, sizeof(*s->table));
	if (!s->heap || !s->table) {
		agg_hot_sketch_free(s);
		return NULL;
	}
	s->max = counters;
	s->tmask = t - 1;
	return s;
}

void agg_hot_sketch_free(struct agg_hot_sketch *s)
{
	if (!s)
		return;
	free(s->heap);
	free(s->table);
	free(s);
}

uint64_t agg_hot_sketch_total(const struct agg_hot_sketch *s)
{
	return s->total;
}

static void ss_set(struct agg_hot_sketch *s, size_t i, struct ss_counter c)
{
	s->heap[i] = c;
	s->table[c.hpos] = i + 1;
}

static void ss_sift_down(struct agg_hot_sketch *s, size_t i)
{
	struct ss_counter c = s->heap[i];

	for (;;) {
		size_t k = 2 * i + 1;

		if (k >= s->n)
			break;
		if (k + 1 < s->n && s->heap[k + 1].count < s->heap[k].count)
			k++;
		if (s->heap[k].count >= c.count)
			break;
		ss_set(s, i, s->heap[k]);
		i = k;
	}
	ss_set(s, i, c);
}

/* Remove the table slot at pos with backward-shift deletion. */
static void ss_table_del(struct agg_hot_sketch *s, size_t pos)
{
	size_t i = pos, j = pos;

	s->table[i] = 0;
	for (;;) {
		size_t home;

		j = (j + 1) & s->tmask;
		if (!s->table[j])
			return;
		home = ss_hash(s->heap[s->table[j] - 1].id, s->tmask);
		/* Move j back to i unless its home lies in (i, j]. */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		s->table[i] = s->table[j];
		s->heap[s->table[i] - 1].hpos = i;
		s->table[j] = 0;
		i = j;
	}
}

void agg_hot_sketch_add(struct agg_hot_sketch *s, uint64_t id)
{
	size_t pos = ss_hash(id, s->tmask);

	s->total++;
	for (; s->table[pos]; pos = (pos + 1) & s->tmask) {
		size_t i = s->table[pos] - 1;

		if (s->heap[i].id == id) {
			s->heap[i].count++;
			ss_sift_down(s, i);
			return;
		}
	}
	if (s->n < s->max) {	/* a free counter: append, it is the smallest or ties */
		struct ss_counter c = { id, 1, pos };
		size_t i = s->n++;

		while (i > 0 && s->heap[(i - 1) / 2].count > c.count) {
			ss_set(s, i, s->heap[(i - 1) / 2]);
			i = (i - 1) / 2;
		}
		ss_set(s, i, c);
		return;
	}
	/* Replace the minimum: the new id inherits its count (+1). */
	{
		struct ss_counter c = s->heap[0];

		ss_table_del(s, s->heap[0].hpos);
		pos = ss_hash(id, s->tmask);
		while (s->table[pos])
			pos = (pos + 1) & s->tmask;
		c.id = id;
		c.count++;
		c.hpos = pos;
		ss_set(s, 0, c);
		ss_sift_down(s, 0);
	}
}

int agg_hot_sketch_top(const struct agg_hot_sketch *s, size_t max,
		       struct agg_hot_entry **out, size_t *n)
{
	struct topk t;

	if (topk_init(&t, max))
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		topk_push(&t, s->heap[i].id, s->heap[i].count);
	topk_finish(&t, out, n);
	return 0;
}

/* ---- Principle 1 ---------------------------------------------------------------- */

void agg_hot_choose_k(const struct agg_hot_entry *e, size_t n, uint64_t total,
		      double p, uint64_t budget, struct agg_hot_k *out)
{
	uint64_t cum = 0;
	size_t k;

	memset(out, 0, sizeof(*out));
	out->k_budget = budget / AGG_HOT_SLOT_BYTES;
	out->k_coverage = SIZE_MAX;	/* not reached within e[] */
	for (k = 0; k < n; k++) {
		cum += e[k].freq;
		if (total && (double)cum / total >= p - 1e-12) {
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
	/* e[] may stop at the budget: then p was out of reach. */
	out->budget_bound = out->achieved < p - 1e-12 && out->k == out->k_budget;
}

/* ---- tables -------------------------------------------------------------------------- */

int agg_hot_table_write(const struct agg_hot_table *t, FILE *f)
{
	fprintf(f, "hot v1 k=%zu coverage=%.6g achieved=%.6f budget=%" PRIu64
		" stripes=%u updates=%" PRIu64 " iter=%" PRIu64 "\n",
		t->k, t->coverage, t->achieved, t->budget, t->stripes, t->updates,
		t->iter);
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
	for (int i = 2; i < ln->ntok; i++) {
		const char *kv = ln->tok[i].s, *v = strchr(kv, '=');
		size_t klen = v ? (size_t)(v - kv) : 0;
		uint64_t u = 0;
		double x = 0;
		int bad;

		if (!v)
			goto bad;
		v++;
#define KEY(k) (klen == strlen(k) && !strncmp(kv, k, klen))
		if (KEY("coverage") || KEY("achieved"))
			bad = agg_parse_double(v, &x, NULL) || x < 0 || x > 1;
		else
			bad = agg_parse_u64(v, &u, NULL);
		if (bad)
			goto bad;
		if (KEY("k"))
			t->k = u;
		else if (KEY("coverage"))
			t->coverage = x;
		else if (KEY("achieved"))
			t->achieved = x;
		else if (KEY("budget"))
			t->budget = u;
		else if (KEY("stripes") && u >= 1 && u <= 1 << 20)
			t->stripes = u;
		else if (KEY("updates"))
			t->updates = u;
		else if (KEY("iter"))
			t->iter = u;
		else
			goto bad;
#undef KEY
		continue;
bad:
		agg_diag_set(d, fname, ln->lineno, ln->tok[i].col,
			     "bad hot table header field '%s'", kv);
		return -EINVAL;
	}
	return 0;	/* rows are allocated as they come */
}

static int cmp_u64_first(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

int agg_hot_table_read(struct agg_hot_table *t, FILE *f, const char *fname,
		       struct agg_diag *d)
{
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
		if (ln.ntok != 5) {
			agg_diag_set(d, fname, ln.lineno, ln.ntok > 5 ? ln.tok[5].col : ln.end_col,
				     "expected 'rank id freq stripe slot'");
			err = -EINVAL;
			break;
		}
		for (int i = 0; i < 5 && !err; i++) {
			char *end;

			errno = 0;
			v[i] = strtoull(ln.tok[i].s, &end, 10);
			if (*end || errno || !isdigit((unsigned char)ln.tok[i].s[0])) {
				agg_diag_set(d, fname, ln.lineno, ln.tok[i].col,
					     "not a number: '%s'", ln.tok[i].s);
				err = -EINVAL;
			}
		}
		if (err)
			break;
		if (v[0] != rows || rows >= t->k || v[3] != agg_hot_stripe(rows, t->stripes) ||
		    v[4] != agg_hot_slot(rows, t->stripes)) {
			agg_diag_set(d, fname, ln.lineno, 1, rows >= t->k ?
				     "more rows than k" :
				     "row does not match its rank's place (rank %zu)", rows);
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
	if (!err && !header) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "no 'hot v1' table");
		err = -EINVAL;
	}
	if (!err && rows != t->k) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "table has %zu rows, k=%zu", rows, t->k);
		err = -EINVAL;
	}
	if (!err && rows > 1) {	/* an id has one rank */
		struct agg_hot_entry *c = malloc(rows * sizeof(*c));

		if (!c) {
			err = -ENOMEM;
		} else {
			memcpy(c, t->e, rows * sizeof(*c));
			for (size_t i = 0; i < rows; i++)
				c[i].freq = i;	/* keep the rank */
			qsort(c, rows, sizeof(*c), cmp_u64_first);
			for (size_t i = 1; i < rows && !err; i++) {
				if (c[i].id != c[i - 1].id)
					continue;
				agg_diag_set(d, fname, tx.lineno + 1, 1,
					     "id %" PRIu64 " has two ranks, %" PRIu64 " and %" PRIu64,
					     c[i].id, c[i - 1].freq < c[i].freq ? c[i - 1].freq : c[i].freq,
					     c[i - 1].freq < c[i].freq ? c[i].freq : c[i - 1].freq);
				err = -EINVAL;
			}
			free(c);
		}
	}
	agg_text_free(&tx);
	if (err)
		agg_hot_table_free(t);
	return err;
}

/* ---- comparing ------------------------------------------------------------------------ */

struct idrank {
	uint64_t id;
	size_t rank;
};

static int cmp_idrank(const void *x, const void *y)
{
	const struct idrank *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

/* Pairs (rank in A, rank in B) of the common ids, by rank in A. */
static size_t common_ranks(const struct agg_hot_table *a, const struct agg_hot_table *b,
			   size_t *rb)
{
	struct idrank *x = malloc((b->k + 1) * sizeof(*x));
	size_t c = 0;

	if (!x)
		return 0;
	for (size_t i = 0; i < b->k; i++)
		x[i] = (struct idrank){ b->e[i].id, i };
	qsort(x, b->k, sizeof(*x), cmp_idrank);
	for (size_t i = 0; i < a->k; i++) {
		struct idrank key = { a->e[i].id, 0 }, *hit;

		hit = bsearch(&key, x, b->k, sizeof(*x), cmp_idrank);
		if (hit && rb)
			rb[c] = hit->rank;
		c += hit != NULL;
	}
	free(x);
	return c;
}

double agg_hot_precision(const struct agg_hot_table *a, const struct agg_hot_table *b)
{
	return a->k ? (double)common_ranks(a, b, NULL) / a->k : 0;
}

static uint64_t inversions(size_t *v, size_t *tmp, size_t n)
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

double agg_hot_kendall(const struct agg_hot_table *a, const struct agg_hot_table *b,
		       size_t *common)
{
	size_t *rb = malloc((a->k + 1) * sizeof(*rb)), *tmp = malloc((a->k + 1) * sizeof(*tmp));
	size_t c;
	double d = 0;

	if (!rb || !tmp) {
		free(rb);
		free(tmp);
		return NAN;
	}
	c = common_ranks(a, b, rb);
	if (c >= 2)
		d = (double)inversions(rb, tmp, c) / ((double)c * (c - 1) / 2);
	if (common)
		*common = c;
	free(rb);
	free(tmp);
	return d;
}

/* ---- packing --------------------------------------------------------------------------- */

int agg_hot_pack(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
		 unsigned m, size_t per_pkt, bool orchestrate,
		 struct agg_hot_pack_stats *st)
{
	size_t npk = (n + per_pkt - 1) / per_pkt, words = (m + 63) / 64;
	size_t *fill = calloc(npk + 1, sizeof(*fill)), *cursor = calloc(m, sizeof(*cursor));
	uint64_t *has = calloc((npk + 1) * words, sizeof(*has));
	uint64_t *over = malloc((n + 1) * sizeof(*over));
	size_t nover = 0;
	int err = 0;

	memset(st, 0, sizeof(*st));
	if (!fill || !cursor || !has || !over || per_pkt == 0) {
		err = -ENOMEM;
		goto out;
	}
	st->pairs = n;
	if (!orchestrate) {
		/* In order, per_pkt at a time: conflicts are what they are. */
		for (size_t p = 0; p * per_pkt < n; p++) {
			memset(has, 0, words * sizeof(*has));
			for (size_t i = p * per_pkt; i < n && i < (p + 1) * per_pkt; i++) {
				unsigned k = stripe_of[ranks[i]];

				st->conflicts += (has[k / 64] >> (k % 64)) & 1;
				has[k / 64] |= 1ULL << (k % 64);
			}
			st->packets++;
		}
		goto out;
	}
	/*
	 * ZEBRA Alg. 1: each pair goes to the first open packet that holds no
	 * pair of its stripe; a stripe's candidates only ever move forward, so
	 * a cursor per stripe finds it.  Pairs that fit nowhere (G') go to
	 * padding packets of their own.
	 */
	for (size_t i = 0; i < n; i++) {
		unsigned k = stripe_of[ranks[i]];
		size_t p = cursor[k];

		while (p < npk && (fill[p] == per_pkt ||
				   ((has[p * words + k / 64] >> (k % 64)) & 1)))
			p++;
		cursor[k] = p;
		if (p == npk) {
			over[nover++] = ranks[i];
			continue;
		}
		has[p * words + k / 64] |= 1ULL << (k % 64);
		fill[p]++;
	}
	for (size_t p = 0; p < npk; p++)
		st->packets += fill[p] > 0;
	st->overflow = nover;
	if (nover) {
		struct agg_hot_pack_stats pad;

		err = agg_hot_pack(over, nover, stripe_of, m, per_pkt, false, &pad);
		st->packets += pad.packets;
		st->conflicts += pad.conflicts;
	}
out:
	free(fill);
	free(cursor);
	free(has);
	free(over);
	return err;
}

/* ---- Zipf --------------------------------------------------------------------------------- */

static double helper1(double x)	/* log1p(x) / x */
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x / 2 + x * x / 3;
}

static double helper2(double x)	/* expm1(x) / x */
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x / 2 + x * x / 6;
}

static double zipf_H(const struct agg_zipf *z, double x)
{
	double lx = log(x);

	return helper2((1 - z->s) * lx) * lx;
}

static double zipf_h(const struct agg_zipf *z, double x)
{
	return exp(-z->s * log(x));
}

static double zipf_Hinv(const struct agg_zipf *z, double x)
{
	double t = x * (1 - z->s);

	if (t < -1)
		t = -1;
	return exp(helper1(t) * x);
}

void agg_zipf_init(struct agg_zipf *z, uint64_t n, double s)
{
	z->s = s;
	z->n = (double)n;
	z->hx0 = zipf_H(z, 1.5) - 1;
	z->hxn = zipf_H(z, z->n + 0.5);
	z->shift = 2 - zipf_Hinv(z, zipf_H(z, 2.5) - zipf_h(z, 2));
}

uint64_t agg_zipf_draw(const struct agg_zipf *z, struct agg_rand *r)
{
	for (;;) {
		double u = z->hxn + agg_rand_double(r) * (z->hx0 - z->hxn);
		double x = zipf_Hinv(z, u);
		double k = floor(x + 0.5);

		if (k < 1)
			k = 1;
		else if (k > z->n)
			k = z->n;
		if (k - x <= z->shift || u >= zipf_H(z, k + 0.5) - zipf_h(z, k))
			return (uint64_t)k;
	}
}
