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
