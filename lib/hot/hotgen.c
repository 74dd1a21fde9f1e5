// SPDX-License-Identifier: GPL-2.0-only
/* Synthetic sparse-model update logs: Zipf-distributed ids. */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

/* ---- Zipf by rejection inversion (Hormann and Derflinger 1996) -------------- */

static double helper1(double x)	/* log1p(x) / x */
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x / 2 + x * x / 3;
}

static double helper2(double x)	/* expm1(x) / x */
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x / 2 + x * x / 6;
}

/* H(x) = integral of x^-s, stable near s = 1. */
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

/* ---- the log ---------------------------------------------------------------------- */

/* A multiplier near n/phi coprime with n: rank r -> r * mul mod n is a
 * bijection that scatters neighbouring ranks far apart. */
static uint64_t scatter_mul(uint64_t n)
{
	uint64_t mul = (uint64_t)(n * 0.6180339887498949);

	if (n < 2)
		return 0;
	if (mul == 0)
		mul = 1;
	while (agg_gcd(mul, n) != 1)
		mul++;
	return mul;
}

static inline uint64_t gen_id(uint64_t n, uint64_t mul, uint64_t drift, uint64_t rank,
			      uint64_t it)
{
	uint64_t r = (uint64_t)(((unsigned __int128)drift * it + rank) % n);

	return (uint64_t)(((unsigned __int128)r * mul) % n);
}

uint64_t agg_hot_gen_id(const struct agg_hot_gen_opts *o, uint64_t rank, uint64_t it)
{
	return o->ids < 2 ? 0 : gen_id(o->ids, scatter_mul(o->ids), o->drift, rank, it);
}

struct out {
	FILE *f;
	char buf[1 << 16];
	size_t len;
	int err;
};

static void out_flush(struct out *w)
{
	if (w->len && fwrite(w->buf, 1, w->len, w->f) != w->len)
		w->err = -EIO;
	w->len = 0;
}

static inline void out_bytes(struct out *w, const void *p, size_t n)
{
	if (w->len + n > sizeof(w->buf))
		out_flush(w);
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static inline void out_u64(struct out *w, uint64_t v, char sep)
{
	char tmp[24];
	int i = sizeof(tmp);

	tmp[--i] = sep;
	do {
		tmp[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	out_bytes(w, tmp + i, sizeof(tmp) - i);
}

int agg_hot_gen(FILE *f, const struct agg_hot_gen_opts *o)
{
	struct out *w;
	uint64_t mul = scatter_mul(o->ids), end = htole64(AGG_HOT_ITER_END);
	struct agg_zipf z;
	struct agg_rand r;
	int err;

	if (o->ids == 0 || o->ids >= AGG_HOT_ITER_END || o->per_example == 0 ||
	    !(o->zipf > 0))
		return -EINVAL;
	w = calloc(1, sizeof(*w));	/* 64 KiB: off the stack */
	if (!w)
		return -ENOMEM;
	w->f = f;
	agg_zipf_init(&z, o->ids, o->zipf);
	agg_rand_seed(&r, o->seed);
	for (uint64_t it = 0; it < o->iters && !w->err; it++) {
		for (uint64_t ex = 0; ex < o->batch; ex++) {
			if (!o->binary)
				out_u64(w, it, ' ');
			for (uint64_t k = 0; k < o->per_example; k++) {
				uint64_t rank = agg_zipf_draw(&z, &r) - 1;
				uint64_t id = o->ids < 2 ? 0 :
					      gen_id(o->ids, mul, o->drift, rank, it);

				if (o->binary) {
					uint64_t le = htole64(id);

					out_bytes(w, &le, 8);
				} else {
					out_u64(w, id, k + 1 == o->per_example ? '\n' : ' ');
				}
			}
		}
		if (o->binary)
			out_bytes(w, &end, 8);
	}
	out_flush(w);
	if (!w->err && fflush(f))
		w->err = -EIO;
	err = w->err;
	free(w);
	return err;
}

/* ---- sparse gradients -------------------------------------------------------------- */

struct touched {
	uint64_t *id;		/* open addressing; UINT64_MAX: empty */
	uint32_t *count;
	uint64_t mask, n;
};

/* Count one draw of id; its slot's count. */
static void touch_id(struct touched *t, uint64_t id)
{
	uint64_t h = (id * 0x9e3779b97f4a7c15ULL) >> 17;

	for (;; h++) {
		uint64_t *slot = &t->id[h & t->mask];

		if (*slot == id) {
			t->count[h & t->mask]++;
			return;
		}
		if (*slot == UINT64_MAX) {
			*slot = id;
			t->count[h & t->mask] = 1;
			t->n++;
			return;
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int agg_hot_gen_sparse(const struct agg_hot_gen_opts *o, struct agg_sparse *out)
{
	uint64_t target, mul = scatter_mul(o->ids), size = 2, draws = 0, max_draws, k = 0;
	struct touched t = { 0 };
	struct agg_rand r;
	struct agg_zipf z;
	int err = 0;

	agg_sparse_init(out, o->width);
	if (o->ids == 0 || o->ids >= AGG_HOT_ITER_END || !(o->zipf > 0) || o->width < 1 ||
	    o->width > AGG_SPARSE_MAX_WIDTH || !(o->touch > 0) || !(o->touch <= 1))
		return -EINVAL;
	target = (uint64_t)llround(o->touch * (double)o->ids);
	if (target < 1)
		target = 1;
	max_draws = 1000 * target;
	while (size < 2 * target)
		size *= 2;
	t.id = malloc(size * sizeof(*t.id));
	t.count = malloc(size * sizeof(*t.count));
	if (!t.id || !t.count) {
		err = -ENOMEM;
		goto out;
	}
	memset(t.id, 0xff, size * sizeof(*t.id));
	t.mask = size - 1;
	agg_zipf_init(&z, o->ids, o->zipf);
	/* One stream per (seed, worker, iteration): splitmix64 in
	 * agg_rand_seed scatters the mixed seeds. */
	agg_rand_seed(&r, o->seed ^ (o->worker + 1) * 0xd1b54a32d192ed03ULL ^
			  (o->iter + 1) * 0x9e3779b97f4a7c15ULL);
	while (t.n < target && draws++ < max_draws) {
		uint64_t rank = agg_zipf_draw(&z, &r) - 1;

		touch_id(&t, o->ids < 2 ? 0 : gen_id(o->ids, mul, o->drift, rank, o->iter));
	}
	if (t.n < target) {
		err = -ERANGE;
		goto out;
	}
	err = agg_sparse_reserve(out, target);
	if (err)
		goto out;
	for (uint64_t i = 0; i < size; i++)
		if (t.id[i] != UINT64_MAX)
			out->id[k++] = t.id[i];
	qsort(out->id, k, sizeof(*out->id), cmp_u64);
	out->n = k;
	/* Values in id order, from a stream of their own. */
	agg_rand_seed(&r, agg_rand_u64(&r));
	for (uint64_t i = 0; i < k; i++) {
		uint64_t h = (out->id[i] * 0x9e3779b97f4a7c15ULL) >> 17;
		double scale;

		while (t.id[h & t.mask] != out->id[i])
			h++;
		scale = sqrt((double)t.count[h & t.mask]);
		for (uint32_t j = 0; j < o->width; j++)
			out->val[i * o->width + j] = (float)(agg_rand_normal(&r) * scale);
	}
out:
	free(t.id);
	free(t.count);
	if (err)
		agg_sparse_free(out);
	return err;
}
