/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The scalar quantization lib/ops/quant.c had before it was vectorized, kept
 * as the reference its results must equal bit for bit (t/unit/quant.c)
 * and as the baseline of bench/quant.c.  Do not "improve" it.
 */
#ifndef AGG_QUANT_REF_H
#define AGG_QUANT_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "agg.h"

static inline int32_t ref_quant_exponent(const float *x, size_t n, uint64_t *nonfinite)
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

static inline void ref_quantize(const float *x, size_t n, size_t segment, int32_t e, int shift,
				unsigned op, int32_t *q)
{
	int32_t poison = op == AGG_OP_MIN ? AGG_POISON_LO : AGG_POISON_HI;
	int32_t ident = op == AGG_OP_MAX ? -(1 << 30) : op == AGG_OP_MIN ? (1 << 30) : 0;
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

/* Returns the NaN count agg-recv used to take in a second pass. */
static inline size_t ref_dequantize(const int32_t *q, size_t n, int32_t e, int shift,
				    unsigned op, float *out)
{
	double scale = e == AGG_EXP_ZERO ? 0 : ldexp(1.0, e - shift);
	size_t nan = 0;

	for (size_t i = 0; i < n; i++) {
		int32_t v = q[i];

		if ((op == AGG_OP_SUM && v > AGG_SUM_LIMIT) ||
		    (op == AGG_OP_MAX && v == AGG_POISON_HI) ||
		    (op == AGG_OP_MIN && v == AGG_POISON_LO))
			out[i] = NAN;
		else
			out[i] = (float)((double)v * scale);
	}
	for (size_t i = 0; i < n; i++)
		nan += out[i] != out[i];
	return nan;
}

#endif
