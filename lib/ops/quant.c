// SPDX-License-Identifier: GPL-2.0-only
#include <float.h>
#include <math.h>
#include <string.h>

#include "agg.h"
#include "quant.h"

int agg_quant_shift(unsigned workers)
{
	int bits = 0;

	while (workers > 1 && (1u << bits) < workers)
		bits++;
	return 30 - bits;
}

/*
 * The loops below have no branch per element, so the compiler vectorizes
 * them (at -O3; selects are bit masks: with ?: gcc moves a conversion,
 * which may raise an FP exception, under a branch it then cannot remove).
 * Each is compiled once per instruction set and the public functions jump
 * to the best one this CPU has (an ifunc on x86-64).  Results are
 * bit-identical to the plain scalar code (t/lib/quant-ref.h):
 *
 * - the largest finite |x| is the largest of the bit patterns with the sign
 *   cleared (non-negative floats order as their bits do);
 * - (double)x * 2^k is exact, and adding and subtracting 1.5 * 2^52 rounds
 *   a double below 2^51 in magnitude to an integer, half to even, as rint
 *   does in the default rounding mode (|x| < 2^e keeps |x * scale| < 2^30);
 * - counts go into 32-bit lanes per block of BLOCK elements.
 */
#define ABS_MASK	0x7fffffffu
#define INF_BITS	0x7f800000u
#define NAN_BITS	0x7fc00000u	/* NAN */
#define BLOCK		((size_t)1 << 30)
#if FLT_EVAL_METHOD == 0
#define ROUND_MAGIC	0x1.8p52
#define round_even(v)	(((v) + ROUND_MAGIC) - ROUND_MAGIC)
#else			/* excess precision (x87) would break the trick */
#define round_even(v)	__builtin_rint(v)
#endif

static inline uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline __attribute__((always_inline)) int32_t
exponent_body(const float *restrict x, size_t n, uint64_t *nonfinite)
{
	int32_t m = 0;		/* signed compares: SSE2 has no unsigned ones */
	int e;

	while (n) {
		size_t k = n < BLOCK ? n : BLOCK;
		uint32_t bad = 0;

		for (size_t i = 0; i < k; i++) {
			int32_t u = (int32_t)(bits_of(x[i]) & ABS_MASK);
			int32_t fin = u & -(int32_t)(u < (int32_t)INF_BITS);

			bad += u >= (int32_t)INF_BITS;
			m = fin > m ? fin : m;
		}
		*nonfinite += bad;
		x += k;
		n -= k;
	}
	if (m == 0)
		return AGG_EXP_ZERO;
	frexpf(float_of((uint32_t)m), &e);
	return e;
}

static inline __attribute__((always_inline)) void
quantize_body(const float *restrict x, size_t n, size_t segment, int32_t e, int shift,
	      unsigned op, int32_t *restrict q)
{
	int32_t poison = op == AGG_OP_MIN ? AGG_POISON_LO : AGG_POISON_HI;
	int32_t ident = op == AGG_OP_MAX ? -(1 << 30) : op == AGG_OP_MIN ? (1 << 30) : 0;
	/* A power of two: x * scale is exact in double, as ldexp would be
	 * (|shift - e| <= 30 + 149 unless e is AGG_EXP_ZERO, all zeros). */
	double scale = e == AGG_EXP_ZERO ? 0 : ldexp(1.0, shift - e);
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t u = bits_of(x[i]);
		/* All ones where x is finite; non-finite values are zeroed
		 * before the conversion and replaced by poison after it. */
		uint32_t fin = -(uint32_t)((u & ABS_MASK) < INF_BITS);
		double v = (double)float_of(u & fin) * scale;
		uint32_t r = (uint32_t)(int32_t)round_even(v);

		q[i] = (int32_t)((r & fin) | ((uint32_t)poison & ~fin));
	}
	for (; i < segment; i++)
		q[i] = ident;
}

static inline __attribute__((always_inline)) size_t
dequantize_body(const int32_t *restrict q, size_t n, int32_t e, int shift, unsigned op,
		float *restrict out)
{
	double scale = e == AGG_EXP_ZERO ? 0 : ldexp(1.0, e - shift);	/* exact */
	/* Poison is what lies outside [lo, hi]. */
	int32_t hi = op == AGG_OP_SUM ? AGG_SUM_LIMIT :
		     op == AGG_OP_MAX ? AGG_POISON_HI - 1 : AGG_POISON_HI;
	int32_t lo = op == AGG_OP_MIN ? AGG_POISON_LO + 1 : AGG_POISON_LO;
	size_t nan = 0;

	while (n) {
		size_t k = n < BLOCK ? n : BLOCK;
		uint32_t cnt = 0;

		for (size_t i = 0; i < k; i++) {
			int32_t v = q[i];
			uint32_t f = bits_of((float)((double)v * scale));
			uint32_t bad = -(uint32_t)((v > hi) | (v < lo));

			f = (f & ~bad) | (NAN_BITS & bad);
			cnt += (f & ABS_MASK) > INF_BITS;
			out[i] = float_of(f);
		}
		nan += cnt;
		q += k;
		out += k;
		n -= k;
	}
	return nan;
}

#define QUANT_IMPL(name, attr)							\
static attr int32_t exponent_##name(const float *x, size_t n, uint64_t *nonfinite) \
{										\
	return exponent_body(x, n, nonfinite);					\
}										\
static attr void quantize_##name(const float *x, size_t n, size_t segment,	\
				 int32_t e, int shift, unsigned op, int32_t *q)	\
{										\
	quantize_body(x, n, segment, e, shift, op, q);				\
}										\
static attr size_t dequantize_##name(const int32_t *q, size_t n, int32_t e,	\
				     int shift, unsigned op, float *out)	\
{										\
	return dequantize_body(q, n, e, shift, op, out);			\
}

QUANT_IMPL(portable, )
#if defined(__x86_64__)
QUANT_IMPL(avx2, __attribute__((target("avx2"))))
QUANT_IMPL(avx512f, __attribute__((target("avx512f"))))
#endif

static const struct agg_quant_impl impls[] = {
	{ "portable", exponent_portable, quantize_portable, dequantize_portable },
#if defined(__x86_64__)
	{ "avx2", exponent_avx2, quantize_avx2, dequantize_avx2 },
	{ "avx512f", exponent_avx512f, quantize_avx512f, dequantize_avx512f },
#endif
};

static bool impl_runs(const struct agg_quant_impl *im)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (!strcmp(im->name, "avx2"))
		return __builtin_cpu_supports("avx2");
	if (!strcmp(im->name, "avx512f"))
		return __builtin_cpu_supports("avx512f");
#endif
	return true;
}

size_t agg_quant_impls(const struct agg_quant_impl **out, size_t max)
{
	size_t k = 0;

	for (size_t i = 0; i < sizeof(impls) / sizeof(impls[0]); i++)
		if (impl_runs(&impls[i]) && k < max)
			out[k++] = &impls[i];
	return k;
}

#if defined(__x86_64__)
/* ifunc resolvers run before constructors: each asks the CPU itself. */
static const struct agg_quant_impl *best_impl(void)
{
	const struct agg_quant_impl *best = &impls[0];

	for (size_t i = 1; i < sizeof(impls) / sizeof(impls[0]); i++)
		if (impl_runs(&impls[i]))
			best = &impls[i];
	return best;
}

static __attribute__((used)) agg_quant_exponent_fn *resolve_exponent(void)
{
	return best_impl()->exponent;
}

static __attribute__((used)) agg_quantize_fn *resolve_quantize(void)
{
	return best_impl()->quantize;
}

static __attribute__((used)) agg_dequantize_fn *resolve_dequantize(void)
{
	return best_impl()->dequantize;
}

int32_t agg_quant_exponent(const float *x, size_t n, uint64_t *nonfinite)
	__attribute__((ifunc("resolve_exponent")));
void agg_quantize(const float *x, size_t n, size_t segment, int32_t e, int shift,
		  unsigned op, int32_t *q) __attribute__((ifunc("resolve_quantize")));
size_t agg_dequantize(const int32_t *q, size_t n, int32_t e, int shift,
		      unsigned op, float *out) __attribute__((ifunc("resolve_dequantize")));
#else
int32_t agg_quant_exponent(const float *x, size_t n, uint64_t *nonfinite)
{
	return exponent_portable(x, n, nonfinite);
}

void agg_quantize(const float *x, size_t n, size_t segment, int32_t e, int shift,
		  unsigned op, int32_t *q)
{
	quantize_portable(x, n, segment, e, shift, op, q);
}

size_t agg_dequantize(const int32_t *q, size_t n, int32_t e, int shift,
		      unsigned op, float *out)
{
	return dequantize_portable(q, n, e, shift, op, out);
}
#endif
