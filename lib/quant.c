// SPDX-License-Identifier: GPL-2.0-only
#include <math.h>

#include "agg.h"
#include "quant.h"

int agg_quant_shift(unsigned workers)
{
	int bits = 0;

	while (workers > 1 && (1u << bits) < workers)
		bits++;
	return 30 - bits;
}

int32_t agg_quant_exponent(const float *x, size_t n, uint64_t *nonfinite)
{
	float m = 0;
	int e;

	for (size_t i = 0; i < n; i++) {
		float a = fabsf(x[i]);

		if (!isfinite(a))
			(*nonfinite)++;
		else if (a > m)
			m = a;
	}
	if (m == 0)
		return AGG_EXP_ZERO;
	frexpf(m, &e);
	return e;
}

void agg_quantize(const float *x, size_t n, size_t segment, int32_t e, int shift,
		  unsigned op, int32_t *q)
{
	int32_t poison = op == AGG_OP_MIN ? AGG_POISON_LO : AGG_POISON_HI;
	int32_t ident = op == AGG_OP_MAX ? -(1 << 30) : op == AGG_OP_MIN ? (1 << 30) : 0;
	/* A power of two: x * scale is exact in double, as ldexp would be
	 * (|shift - e| <= 30 + 149 unless e is AGG_EXP_ZERO, all zeros). */
	double scale = e == AGG_EXP_ZERO ? 0 : ldexp(1.0, shift - e);
	size_t i;

	for (i = 0; i < n; i++) {
		if (!isfinite(x[i]))
			q[i] = poison;
		else
			q[i] = (int32_t)__builtin_rint((double)x[i] * scale);
	}
	for (; i < segment; i++)
		q[i] = ident;
}

void agg_dequantize(const int32_t *q, size_t n, int32_t e, int shift,
		    unsigned op, float *out)
{
	double scale = e == AGG_EXP_ZERO ? 0 : ldexp(1.0, e - shift);	/* exact */

	for (size_t i = 0; i < n; i++) {
		int32_t v = q[i];

		if ((op == AGG_OP_SUM && v > AGG_SUM_LIMIT) ||
		    (op == AGG_OP_MAX && v == AGG_POISON_HI) ||
		    (op == AGG_OP_MIN && v == AGG_POISON_LO))
			out[i] = NAN;
		else
			out[i] = (float)((double)v * scale);
	}
}
