// SPDX-License-Identifier: GPL-2.0-only
/*
 * quant: the number conversion of agg-send and agg-recv on N float32
 * values (default 25M, a 100 MB gradient) in segments of SEG (default
 * 2048), as the tools call it: the exponent of every segment, each segment
 * quantized into one reused frame buffer, each dequantized into one
 * reused 256 KiB chunk.  The baseline is the scalar code lib/ops/quant.c had
 * before (t/lib/quant-ref.h), timed in the same run; each implementation
 * this CPU runs is checked bit for bit against it and timed (best of
 * REPS runs).
 *
 *   quant [N [SEG [REPS]]]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg.h"
#include "quant.h"
#include "rand.h"
#include "../t/lib/quant-ref.h"

#define CHUNK	(256 * 1024 / 4)

static size_t n, seg, nseg;
static float *x, *chunk;
static int32_t *exps, *q, frame[AGG_MAX_SEGMENT];

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t seg_len(size_t s)
{
	return n - s * seg < seg ? n - s * seg : seg;
}

static void run_exponent(const struct agg_quant_impl *im)
{
	uint64_t nf = 0;

	for (size_t s = 0; s < nseg; s++)
		exps[s] = im->exponent(x + s * seg, seg_len(s), &nf);
}

static void run_quantize(const struct agg_quant_impl *im)
{
	for (size_t s = 0; s < nseg; s++)
		im->quantize(x + s * seg, seg_len(s), seg, exps[s], 28, AGG_OP_SUM, frame);
}

static void run_dequantize(const struct agg_quant_impl *im)
{
	size_t per = CHUNK / seg ? CHUNK / seg : 1;

	for (size_t s = 0; s < nseg; s++)
		im->dequantize(q + s * seg, seg_len(s), exps[s], 28, AGG_OP_SUM,
				       chunk + (s % per) * seg);
}

static double best_of(void (*fn)(const struct agg_quant_impl *),
		      const struct agg_quant_impl *im, int reps)
{
	double best = 1e9;

	for (int r = 0; r < reps; r++) {
		double t0 = now();

		fn(im);
		if (now() - t0 < best)
			best = now() - t0;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const struct agg_quant_impl ref = {
		"scalar (before)", ref_quant_exponent, ref_quantize, ref_dequantize,
	};
	static const struct {
		const char *name;
		void (*fn)(const struct agg_quant_impl *);
	} fns[] = {
		{ "exponent", run_exponent },
		{ "quantize", run_quantize },
		{ "dequantize", run_dequantize },
	};
	const struct agg_quant_impl *im[8];
	struct agg_rand r;
	size_t k;
	int reps;

	n = argc > 1 ? strtoull(argv[1], NULL, 10) : 25000000;
	seg = argc > 2 ? strtoull(argv[2], NULL, 10) : 2048;
	reps = argc > 3 ? atoi(argv[3]) : 5;
	if (!n || !seg || seg > AGG_MAX_SEGMENT || reps < 1) {
		fprintf(stderr, "usage: quant [N [SEG (1-%d) [REPS]]]\n", AGG_MAX_SEGMENT);
		return 2;
	}
	nseg = (n + seg - 1) / seg;
	x = malloc(n * sizeof(*x));
	q = malloc(n * sizeof(*q));
	exps = malloc(nseg * sizeof(*exps));
	chunk = malloc((CHUNK > seg ? CHUNK : seg) * sizeof(*chunk));
	if (!x || !q || !exps || !chunk) {
		fprintf(stderr, "quant: out of memory\n");
		return 3;
	}
	/* Like gradtool gen: each segment's magnitude in 1e-6..1e2. */
	agg_rand_seed(&r, 1);
	for (size_t s = 0; s < nseg; s++) {
		double mag = pow(10, -6 + 8 * agg_rand_double(&r));

		for (size_t i = s * seg; i < s * seg + seg_len(s); i++)
			x[i] = (float)((agg_rand_double(&r) * 2 - 1) * mag);
	}
	run_exponent(&ref);
	for (size_t s = 0; s < nseg; s++)	/* a sum of 4 workers' values */
		for (size_t i = 0; i < seg_len(s); i++)
			q[s * seg + i] = (int32_t)(agg_rand_u64(&r) >> 34) - (1 << 29);

	k = agg_quant_impls(im, 8);
	printf("%zu values, segment %zu, best of %d; this CPU runs", n, seg, reps);
	for (size_t j = 0; j < k; j++)
		printf(" %s", im[j]->name);
	printf(" (agg-send and agg-recv use %s)\n", im[k - 1]->name);
	printf("%-10s %-16s %9s %8s %9s\n", "function", "implementation", "seconds", "ns/value",
	       "speedup");
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		double base = best_of(fns[f].fn, &ref, reps);

		printf("%-10s %-16s %9.4f %8.3f %9.2f\n", fns[f].name, ref.name, base,
		       base / n * 1e9, 1.0);
		for (size_t j = 0; j < k; j++) {
			double t = best_of(fns[f].fn, im[j], reps);

			printf("%-10s %-16s %9.4f %8.3f %9.2f\n", fns[f].name, im[j]->name, t,
			       t / n * 1e9, base / t);
		}
	}
	/* The same bits as the baseline, on these inputs too. */
	for (size_t j = 0; j < k; j++) {
		for (size_t s = 0; s < nseg; s++) {
			static int32_t fr[AGG_MAX_SEGMENT];
			static float ca[AGG_MAX_SEGMENT], cb[AGG_MAX_SEGMENT];
			uint64_t a = 0, b = 0;

			if (im[j]->exponent(x + s * seg, seg_len(s), &a) !=
			    ref_quant_exponent(x + s * seg, seg_len(s), &b) || a != b)
				goto differ;
			ref_quantize(x + s * seg, seg_len(s), seg, exps[s], 28, AGG_OP_SUM, fr);
			im[j]->quantize(x + s * seg, seg_len(s), seg, exps[s], 28, AGG_OP_SUM, frame);
			if (memcmp(fr, frame, seg * sizeof(*fr)))
				goto differ;
			ref_dequantize(q + s * seg, seg_len(s), exps[s], 28, AGG_OP_SUM, ca);
			im[j]->dequantize(q + s * seg, seg_len(s), exps[s], 28, AGG_OP_SUM, cb);
			if (memcmp(ca, cb, seg_len(s) * sizeof(*ca)))
				goto differ;
		}
		continue;
differ:
		fprintf(stderr, "quant: %s differs from the scalar code\n", im[j]->name);
		return 1;
	}
	printf("every implementation gave the scalar code's bits\n");
	return 0;
}
