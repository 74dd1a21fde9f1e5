// SPDX-License-Identifier: GPL-2.0-only
/*
 * A training program's use of libagg, in short: open this host's node of
 * the loaded job, allreduce buffers of several sizes and element types,
 * check each sum, close.  Worker r contributes (r + 1) x pattern, so the
 * sum is W (W + 1) / 2 x pattern, which the quantization keeps exact.
 *
 *	cc allreduce.c $(pkg-config --cflags --libs agg) -o allreduce
 *	./allreduce [COUNT [ROUNDS]]
 *
 * Prints one line per allreduce; exit status 0 when every sum was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <agg/agg.h>

static float pattern(size_t i)
{
	return (float)((int)(i % 7) - 3) * 0.25f;
}

static int check(const char *what, const float *x, size_t n, int world)
{
	float k = world * (world + 1) / 2.0f;
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += x[i] != k * pattern(i);
	printf("%s: %zu values, %zu wrong\n", what, n, bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	struct agg *a;
	size_t max, n;
	int rounds = argc > 2 ? atoi(argv[2]) : 1, rank, world, fails = 0;
	float *x;
	uint16_t *h;

	if (agg_open(&a, NULL)) {
		fprintf(stderr, "allreduce: %s\n", agg_errmsg());
		return 1;
	}
	max = agg_max_count(a);
	n = argc > 1 ? strtoul(argv[1], NULL, 0) : max;
	rank = agg_rank(a);
	world = agg_world_size(a);
	printf("node %s: rank %d of %d, run %u, up to %zu values\n", agg_node_name(a), rank,
	       world, agg_run(a), max);
	x = malloc((n > max ? n : max) * sizeof(*x));
	h = malloc((n > max ? n : max) * sizeof(*h));
	for (int r = 0; r < rounds && x && h; r++) {
		/* float32, in place, the whole count */
		for (size_t i = 0; i < n; i++)
			x[i] = (rank + 1) * pattern(i);
		if (agg_allreduce(a, x, n, AGG_FLOAT32, AGG_REDUCE_SUM, 0)) {
			fprintf(stderr, "allreduce: float32: %s\n", agg_errmsg());
			return 1;
		}
		fails += check("float32", x, n, world);
		/* two buckets in flight: float16 (C's _Float16) and bfloat16
		 * (a float32's high half), halves of the count */
		{
			size_t m = n / 2;
			_Float16 *f16 = (_Float16 *)h;
			struct agg_req *q1, *q2;
			uint32_t u;

			for (size_t i = 0; i < n; i++) {
				float v = (rank + 1) * pattern(i);

				memcpy(&u, &v, 4);
				if (i < m)
					f16[i] = (_Float16)v;
				else
					h[i] = u >> 16;
			}
			if (agg_allreduce_start(a, h, m, AGG_FLOAT16, AGG_REDUCE_SUM, 0, &q1) ||
			    agg_allreduce_start(a, h + m, n - m, AGG_BFLOAT16, AGG_REDUCE_SUM, 0,
						&q2)) {
				fprintf(stderr, "allreduce: %s\n", agg_errmsg());
				return 1;
			}
			if (agg_wait(q1) || agg_wait(q2)) {
				fprintf(stderr, "allreduce: float16, bfloat16: %s\n", agg_errmsg());
				return 1;
			}
			for (size_t i = 0; i < n; i++) {
				u = (uint32_t)h[i] << 16;
				if (i < m)
					x[i] = (float)f16[i];
				else
					memcpy(&x[i], &u, 4);
			}
			fails += check("float16+bfloat16", x, n, world);
		}
	}
	agg_close(a);
	free(x);
	free(h);
	return fails ? 1 : 0;
}
