// SPDX-License-Identifier: GPL-2.0-only
/*
 * libagg in-process: ITERS timed allreduces of SIZE bytes of float32
 * after two warm-ups, each after a 1-value allreduce that lines the
 * workers up (as gloo.py's barrier does).  The first worker prints one line
 * per timed allreduce: seconds, and the CPU seconds the whole machine was
 * busy meanwhile (/proc/stat: every namespace's).
 *	inproc SIZE ITERS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <agg/agg.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double busy(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6]) != 7)
		v[0] = 0;
	if (f)
		fclose(f);
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / sysconf(_SC_CLK_TCK);
}

static int call(struct agg *a, float *x, size_t n)
{
	if (agg_allreduce(a, x, n, AGG_FLOAT32, AGG_REDUCE_SUM, 30)) {
		fprintf(stderr, "inproc: %s\n", agg_errmsg());
		exit(1);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct agg *a;
	size_t n;
	int iters;
	float *x, one = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: inproc SIZE ITERS\n");
		return 2;
	}
	n = strtoull(argv[1], NULL, 0) / 4;
	iters = atoi(argv[2]);
	if (agg_open(&a, NULL)) {
		fprintf(stderr, "inproc: %s\n", agg_errmsg());
		return 1;
	}
	x = malloc(n * sizeof(*x));
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(i % 1000) * 1e-3f;
	for (int i = 0; i < 2; i++)
		call(a, x, n);
	for (int i = 0; i < iters; i++) {
		double t0, t1, c0, c1;

		call(a, &one, 1);
		c0 = busy();
		t0 = now();
		call(a, x, n);
		t1 = now();
		c1 = busy();
		if (agg_rank(a) == 0)
			printf("%.6f %.3f\n", t1 - t0, c1 - c0);
	}
	fflush(stdout);
	agg_close(a);
	free(x);
	return 0;
}
