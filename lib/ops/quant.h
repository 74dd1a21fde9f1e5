/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_QUANT_H
#define AGG_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Block floating point for the data plane (man 7 agg-wire, "Numbers").
 * A segment's exponent e bounds its finite values: |x| < 2^e.  With W
 * contributing workers every value becomes q = rint(x * 2^(S - e)), S =
 * agg_quant_shift(W), so that a sum of W values never leaves +-2^30.
 */
int agg_quant_shift(unsigned workers);

/* The exponent of x[0..n): the frexp exponent of the largest finite |x|,
 * AGG_EXP_ZERO when there is none.  *nonfinite += NaN and Inf seen. */
int32_t agg_quant_exponent(const float *x, size_t n, uint64_t *nonfinite);

/* Quantize x[0..n) with exponent e; non-finite values become the op's
 * poison.  Values past n (a short last segment) are the op's identity. */
void agg_quantize(const float *x, size_t n, size_t segment, int32_t e, int shift,
		  unsigned op, int32_t *q);

/* The inverse: poison becomes NaN.  Deterministic: equal q, equal bits.
 * Returns the number of NaN written. */
size_t agg_dequantize(const int32_t *q, size_t n, int32_t e, int shift,
		      unsigned op, float *out);

/*
 * The three compiled for each instruction set (portable, and on x86-64
 * avx2 and avx512f), bit-identical; the functions above run the last one
 * agg_quant_impls lists.  For tests and benchmarks.
 */
typedef int32_t agg_quant_exponent_fn(const float *x, size_t n, uint64_t *nonfinite);
typedef void agg_quantize_fn(const float *x, size_t n, size_t segment, int32_t e,
			     int shift, unsigned op, int32_t *q);
typedef size_t agg_dequantize_fn(const int32_t *q, size_t n, int32_t e, int shift,
				 unsigned op, float *out);
struct agg_quant_impl {
	const char *name;
	agg_quant_exponent_fn *exponent;
	agg_quantize_fn *quantize;
	agg_dequantize_fn *dequantize;
};
/* Those this CPU runs, portable first, at most max into out; the count. */
size_t agg_quant_impls(const struct agg_quant_impl **out, size_t max);

#endif
