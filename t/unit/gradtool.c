// SPDX-License-Identifier: GPL-2.0-only
/*
 * gradtool: gradients for the data-plane tests.
 *   gradtool gen N SEGMENT SEED [nan]  random float32, each segment with
 *                                      its own magnitude in 1e-6..1e2
 *   gradtool check SEGMENT RESULT IN... compare RESULT with the float64
 *                                      sum of the inputs: prints the worst
 *                                      error relative to the segment's
 *                                      largest input magnitude; exit 1 if
 *                                      above 1e-6 or a NaN is misplaced
 *   gradtool check-max|check-min ...   the same against the max or min
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rand.h"

static float *load(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	float *x;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		exit(2);
	}
	x = malloc(len + 4);
	if (!x || fread(x, 1, len, f) != (size_t)len) {
		perror(path);
		exit(2);
	}
	fclose(f);
	*n = len / 4;
	return x;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "gen")) {
		size_t n = strtoull(argv[2], NULL, 10), seg = strtoull(argv[3], NULL, 10);
		struct agg_rand r;
		float *x = malloc(n * 4 + 4);

		agg_rand_seed(&r, strtoull(argv[4], NULL, 10));
		for (size_t s = 0; s * seg < n; s++) {
			/* magnitude 10^(-6 .. 2) by segment */
			double mag = pow(10, -6 + 8 * agg_rand_double(&r));

			for (size_t i = s * seg; i < n && i < (s + 1) * seg; i++)
				x[i] = (float)((agg_rand_double(&r) * 2 - 1) * mag);
		}
		if (argc > 5 && !strcmp(argv[5], "nan") && n > 10) {
			x[3] = NAN;
			x[n - 1] = INFINITY;
		}
		fwrite(x, 4, n, stdout);
		return 0;
	}
	if (argc >= 5 && !strncmp(argv[1], "check", 5)) {
		int op = !strcmp(argv[1], "check-max") ? 1 : !strcmp(argv[1], "check-min") ? 2 : 0;
		size_t seg = strtoull(argv[2], NULL, 10), n, m;
		float *y = load(argv[3], &n);
		int k = argc - 4, bad = 0;
		float **in = calloc(k, sizeof(*in));
		double worst = 0;

		for (int j = 0; j < k; j++) {
			in[j] = load(argv[4 + j], &m);
			if (m != n) {
				fprintf(stderr, "gradtool: %s has %zu values, result %zu\n",
					argv[4 + j], m, n);
				return 2;
			}
		}
		for (size_t s = 0; s * seg < n; s++) {
			double big = 0;

			for (size_t i = s * seg; i < n && i < (s + 1) * seg; i++)
				for (int j = 0; j < k; j++)
					if (isfinite(in[j][i]) && fabs(in[j][i]) > big)
						big = fabs(in[j][i]);
			for (size_t i = s * seg; i < n && i < (s + 1) * seg; i++) {
				double sum = 0, err;
				int nonfinite = 0;

				for (int j = 0; j < k; j++) {
					nonfinite |= !isfinite(in[j][i]);
					if (op == 0 || j == 0)
						sum += in[j][i];
					else if (op == 1 ? in[j][i] > sum : in[j][i] < sum)
						sum = in[j][i];
				}
				if (nonfinite != !!isnan(y[i])) {
					fprintf(stderr, "gradtool: element %zu: %g, want %s\n", i,
						y[i], nonfinite ? "NaN" : "a number");
					bad = 1;
					continue;
				}
				if (nonfinite)
					continue;
				err = big > 0 ? fabs(y[i] - sum) / big : fabs(y[i] - sum);
				if (err > worst)
					worst = err;
				if (err > 1e-6 && bad++ < 5)
					fprintf(stderr, "gradtool: element %zu: %.9g, float64 sum %.9g (segment max %g)\n",
						i, y[i], sum, big);
			}
		}
		printf("max_rel_error %.3g\n", worst);
		return bad ? 1 : 0;
	}
	fprintf(stderr, "usage: gradtool gen N SEGMENT SEED [nan] | check[-max|-min] SEGMENT RESULT IN...\n");
	return 2;
}
