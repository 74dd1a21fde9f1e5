// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/quant.c and the segment layout (lib/dp.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "agg.h"
#include "dp.h"
#include "quant.h"
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
	return done_testing();
}
