// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/ops/quant.c and the segment layout (lib/dp/dp.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "agg.h"
#include "dp.h"
#include "quant.h"
#include "quant-ref.h"
#include "rand.h"
#include "tap.h"

/* Sum W workers' vectors through the data plane's integer arithmetic. */
static double worst_error(unsigned w, int n, uint64_t seed, double mag_lo, double mag_hi)
{
	struct agg_rand r;
	float x[64][128], out[128];
	int32_t q[128];
	int64_t acc[128];
	int shift = agg_quant_shift(w);
	double worst = 0;

	agg_rand_seed(&r, seed);
	for (int rep = 0; rep < n; rep++) {
		double mag = mag_lo * pow(mag_hi / mag_lo, agg_rand_double(&r)), big = 0;
		int32_t e = AGG_EXP_ZERO;
		uint64_t nf = 0;

		for (unsigned k = 0; k < w; k++) {
			for (int i = 0; i < 128; i++) {
				x[k][i] = (float)((agg_rand_double(&r) * 2 - 1) * mag);
				if (fabs(x[k][i]) > big)
					big = fabs(x[k][i]);
			}
			int32_t ek = agg_quant_exponent(x[k], 128, &nf);
			if (ek > e)
				e = ek;
		}
		memset(acc, 0, sizeof(acc));
		for (unsigned k = 0; k < w; k++) {
			agg_quantize(x[k], 128, 128, e, shift, AGG_OP_SUM, q);
			for (int i = 0; i < 128; i++)
				acc[i] += q[i];
		}
		for (int i = 0; i < 128; i++) {
			if (acc[i] > AGG_SUM_LIMIT || acc[i] < -AGG_SUM_LIMIT)
				return INFINITY;	/* overflowed the bound */
			q[i] = (int32_t)acc[i];
		}
		agg_dequantize(q, 128, e, shift, AGG_OP_SUM, out);
		for (int i = 0; i < 128; i++) {
			double s = 0;

			for (unsigned k = 0; k < w; k++)
				s += x[k][i];
			if (fabs(out[i] - s) / big > worst)
				worst = fabs(out[i] - s) / big;
		}
	}
	return worst;
}

/*
 * Every implementation against the reference scalar code (quant-ref.h),
 * bit for bit, on random segments that mix every kind of float: random
 * bit patterns (NaN, Inf, subnormals, -0), random magnitudes from 2^-149
 * to 2^127, all-zero and all-non-finite segments (AGG_EXP_ZERO), and
 * values whose scaled form is an exact or nearly exact half, where
 * round-half-to-even decides.
 */
#define NSEG	3000
#define MAXSEG	4096

static float rand_float(struct agg_rand *r, int kind, int e, int shift)
{
	uint64_t b = agg_rand_u64(r);
	uint32_t u = (uint32_t)b;
	float f;

	switch (kind) {
	case 0:		/* any bit pattern */
		memcpy(&f, &u, sizeof(f));
		return f;
	case 1:		/* a random magnitude below 2^e */
		return (float)ldexp(agg_rand_double(r) * 2 - 1,
				    e - (int)agg_rand_below(r, 24));
	case 2: {	/* (k + 1/2) / scale, k below 2^(shift-1), and neighbours */
		int bits = b >> 59 & 1 ? (shift - 1 < 22 ? shift - 1 : 22) : 3;
		double k = (double)agg_rand_below(r, 1u << bits) + 0.5;
		float h = (float)ldexp(b >> 63 ? -k : k, e - shift);

		return (b >> 32 & 3) == 0 ? nextafterf(h, 0) :
		       (b >> 32 & 3) == 1 ? nextafterf(h, INFINITY) : h;
	}
	case 3:		/* zeros of both signs and the odd non-finite value */
		return (b & 15) == 0 ? NAN : (b & 15) == 1 ? -INFINITY :
		       (b & 15) == 2 ? INFINITY : (b & 1) ? -0.0f : 0.0f;
	default:	/* subnormals */
		u &= 0x807fffffu;
		memcpy(&f, &u, sizeof(f));
		return f;
	}
}

struct cmp_stats {
	uint64_t values, exp_bad, q_bad, dq_bad, nan_bad, halves;
};

static void compare_impl(const struct agg_quant_impl *im, uint64_t seed, struct cmp_stats *st)
{
	static float x[MAXSEG + 1], y[MAXSEG], yr[MAXSEG];
	static int32_t q[MAXSEG + 64], qr[MAXSEG + 64], v[MAXSEG + 1];
	struct agg_rand r;

	agg_rand_seed(&r, seed);
	memset(st, 0, sizeof(*st));
	for (int s = 0; s < NSEG; s++) {
		size_t n = 1 + agg_rand_below(&r, MAXSEG), pad = agg_rand_below(&r, 64);
		size_t off = agg_rand_below(&r, 2);	/* unaligned too */
		int kind = (int)agg_rand_below(&r, 6), shift = agg_quant_shift(1 + agg_rand_below(&r, 1024));
		int e0 = (int)agg_rand_below(&r, 240) - 110;
		unsigned op = agg_rand_below(&r, 3);
		uint64_t nf = 0, nfr = 0;
		int32_t e, er;
		size_t nan, nanr;

		for (size_t i = 0; i < n; i++)	/* kind 5: kinds 1-4 mixed */
			x[off + i] = rand_float(&r, kind == 5 ? 1 + (int)agg_rand_below(&r, 4) : kind,
						e0, shift);
		e = im->exponent(x + off, n, &nf);
		er = ref_quant_exponent(x + off, n, &nfr);
		st->exp_bad += e != er || nf != nfr;
		/* The agreed exponent is the max of every worker's: ours or
		 * above, e0 for the halves of kind 2 (all below 2^e0). */
		if (kind != 0 && (er == AGG_EXP_ZERO ? agg_rand_below(&r, 2) : er < e0))
			er = e0;
		else if (er != AGG_EXP_ZERO && agg_rand_below(&r, 4) == 0)
			er += (int)agg_rand_below(&r, 8);
		for (size_t i = 0; er != AGG_EXP_ZERO && i < n; i++) {
			double t = (double)x[off + i] * ldexp(1.0, shift - er);

			st->halves += isfinite(t) && fabs(t - floor(t)) == 0.5;
		}
		im->quantize(x + off, n, n + pad, er, shift, op, q);
		ref_quantize(x + off, n, n + pad, er, shift, op, qr);
		st->q_bad += memcmp(q, qr, (n + pad) * sizeof(*q)) != 0;

		/* Dequantize any integers: poison and its neighbours, sums near
		 * the limit, anything, with any exponent (even one whose scale
		 * is infinite) and any op (an unknown one has no poison). */
		for (size_t i = 0; i < n; i++) {
			static const int32_t edge[] = {
				AGG_POISON_HI, AGG_POISON_HI - 1, AGG_POISON_LO, AGG_POISON_LO + 1,
				AGG_SUM_LIMIT, AGG_SUM_LIMIT + 1, -AGG_SUM_LIMIT, -AGG_SUM_LIMIT - 1,
				0, 1, -1, 1 << 30,
			};
			uint64_t b = agg_rand_u64(&r);

			v[off + i] = b & 1 ? edge[(b >> 8) % (sizeof(edge) / sizeof(edge[0]))] :
				     b & 2 ? (int32_t)(b >> 32) : qr[i];
		}
		er = agg_rand_below(&r, 16) == 0 ? AGG_EXP_ZERO :
		     agg_rand_below(&r, 16) == 0 ? (int)agg_rand_below(&r, 2400) - 1200 : er;
		op = agg_rand_below(&r, 4);
		nan = im->dequantize(v + off, n, er, shift, op, y);
		nanr = ref_dequantize(v + off, n, er, shift, op, yr);
		st->dq_bad += memcmp(y, yr, n * sizeof(*y)) != 0;
		st->nan_bad += nan != nanr;
		st->values += n;
	}
}

int main(void)
{
	uint64_t nf = 0;
	float x[8] = { 0.5f, -0.25f, 0, 0, 0, 0, 0, 0 }, y[8];
	int32_t q[8];

	ok(agg_quant_shift(1) == 30 && agg_quant_shift(2) == 29 && agg_quant_shift(8) == 27 &&
	   agg_quant_shift(9) == 26 && agg_quant_shift(32) == 25 && agg_quant_shift(33) == 24,
	   "S = 30 - ceil(log2 W)");

	ok(agg_quant_exponent(x, 8, &nf) == 0 && nf == 0, "exponent of 0.5 is 0 (0.5 < 2^0)");
	x[2] = 1.0f;
	ok(agg_quant_exponent(x, 8, &nf) == 1, "exponent of 1.0 is 1");
	memset(x, 0, sizeof(x));
	ok(agg_quant_exponent(x, 8, &nf) == AGG_EXP_ZERO, "an all-zero segment has AGG_EXP_ZERO");
	x[1] = NAN;
	x[2] = -INFINITY;
	x[3] = 3.0f;
	ok(agg_quant_exponent(x, 8, &nf) == 2 && nf == 2,
	   "NaN and Inf are counted and do not set the exponent");

	agg_quantize(x, 4, 8, 2, 27, AGG_OP_SUM, q);
	ok(q[0] == 0 && q[1] == AGG_POISON_HI && q[2] == AGG_POISON_HI &&
	   q[3] == (int32_t)lrint(3.0 * (1 << 25)) && q[4] == 0 && q[7] == 0,
	   "sum: poison for NaN/Inf, 3.0 * 2^(27-2), zero padding");
	agg_quantize(x, 4, 8, 2, 27, AGG_OP_MIN, q);
	ok(q[1] == AGG_POISON_LO && q[4] == (1 << 30), "min: low poison, padding is the identity");
	agg_quantize(x, 4, 8, 2, 27, AGG_OP_MAX, q);
	ok(q[1] == AGG_POISON_HI && q[4] == -(1 << 30), "max: high poison, padding is the identity");

	/* Poison summed with W-1 extreme values stays above the limit. */
	{
		int64_t s = AGG_POISON_HI - 7LL * (1 << 27);
		int32_t v[2] = { s > AGG_SUM_LIMIT ? AGG_POISON_HI : (int32_t)s, 1 << 27 };

		agg_dequantize(v, 2, 3, 27, AGG_OP_SUM, y);
		ok(isnan(y[0]) && y[1] == 8.0f, "sum with a poisoned contributor is NaN; 2^27 at e=3 is 8");
	}

	ok(worst_error(8, 200, 1, 1e-6, 1e2) <= 1e-6, "8 workers: error within 1e-6 of the segment max");
	ok(worst_error(32, 100, 2, 1e-6, 1e2) <= 1e-6, "32 workers: within 1e-6");
	ok(worst_error(64, 50, 3, 1e-6, 1e2) <= 4e-6, "64 workers: within the documented 3.8e-6");

	/* The same integers give the same bits. */
	{
		int32_t v[3] = { 123456789, -5, 0 };
		float a[3], b[3];

		agg_dequantize(v, 3, -20, 26, AGG_OP_SUM, a);
		agg_dequantize(v, 3, -20, 26, AGG_OP_SUM, b);
		ok(!memcmp(a, b, sizeof(a)) && a[0] == (float)ldexp(123456789.0, -46),
		   "dequantize is exact double scaling rounded once to float");
	}

	/* Layout. */
	{
		struct agg_plan p;
		struct agg_layout l;
		struct agg_host h[3];
		char why[200];

		memset(h, 0, sizeof(h));
		h[0].role = AGG_ROLE_PS;
		agg_plan_init(&p);
		p.node = h;
		p.nnodes = 3;
		p.ntrees = 2;
		p.period = 3;
		p.size = 4000000;
		p.segment = 128;
		p.slots = 256;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == 0 && l.nvalues == 1000000 &&
		   l.ndata == 7813 && l.nexp == 62 && l.nsegs == 7875 && l.window == 512 && l.nslots == 1024 &&
		   l.workers == 2 && l.shift == 29,
		   "1M values: 7813 data + 62 exponent segments, window 256 x 2 trees, pool twice that");
		p.size = 4002;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == -EINVAL && strstr(why, "float32"),
		   "a size that is not whole float32 values is refused: %s", why);
		p.size = 4000;
		p.segment = 127;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == -EINVAL && strstr(why, "even"),
		   "an odd segment is refused: %s", why);
		p.segment = AGG_MAX_SEGMENT;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == 0 && l.nchunks == 16 &&
		   l.chunk == 1023, "segment %d: slots of 16 chunks of 1023 values",
		   AGG_MAX_SEGMENT);
		p.segment = 2050;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == 0 && l.nchunks == 3 && l.chunk == 684,
		   "segment 2050: 3 chunks of 684 values (the last 682)");
		p.segment = 1024;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == 0 && l.nchunks == 1 && l.chunk == 1024,
		   "segment 1024: one chunk");
		p.segment = AGG_MAX_SEGMENT + 2;
		ok(agg_layout_of(&p, &l, why, sizeof(why)) == -EINVAL,
		   "a segment above %d is refused", AGG_MAX_SEGMENT);
		p.node = NULL;
		p.nnodes = 0;
	}

	/* Every implementation this CPU runs, and the dispatch, against the
	 * reference: millions of values each. */
	{
		const struct agg_quant_impl *im[8];
		struct agg_quant_impl pub = { "dispatched", agg_quant_exponent, agg_quantize,
					      agg_dequantize };
		size_t k = agg_quant_impls(im, 7);

		im[k++] = &pub;
		for (size_t j = 0; j < k; j++) {
			struct cmp_stats st;
			uint64_t total = 0, bad = 0, halves = 0;

			for (uint64_t seed = 1; seed <= 2; seed++) {
				compare_impl(im[j], seed * 1000 + j, &st);
				total += st.values;
				halves += st.halves;
				bad += st.exp_bad + st.q_bad + st.dq_bad + st.nan_bad;
				if (st.exp_bad + st.q_bad + st.dq_bad + st.nan_bad)
					diag("%s seed %" PRIu64 ": %" PRIu64 " exponent, %" PRIu64
					     " quantize, %" PRIu64 " dequantize, %" PRIu64
					     " NaN-count segments differ", im[j]->name, seed,
					     st.exp_bad, st.q_bad, st.dq_bad, st.nan_bad);
			}
			ok(bad == 0 && total > 10000000 && halves > 100000,
			   "%s: bit-identical to the scalar reference on %" PRIu64
			   " values x 3 functions (%" PRIu64 " exact halves)", im[j]->name, total, halves);
		}
	}
	return done_testing();
}
