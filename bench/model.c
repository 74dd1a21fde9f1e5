// SPDX-License-Identifier: GPL-2.0-only
/*
 * A training job's communication, shaped like a real model's: the
 * gradients of ResNet-50 or BERT-base, tensor by tensor in backward order,
 * each ready at a time of the backward pass (an accelerator computing
 * them: the CPU only waits, BACKWARD seconds in all, tensors ready in
 * proportion to their size), packed into allreduce units of the setting's
 * size (a unit goes as soon as its last tensor is ready, as DDP's buckets
 * do) and allreduced with libagg's asynchronous calls.  An iteration is
 * over when every unit's result is back.  With --tune, libagg's tuning
 * (agg_tuning_*) picks the unit size, and with -s MAX the streams (up to
 * MAX) too.  Every worker prints a line per iteration: iteration, unit
 * bytes, streams, seconds, done (1 once tuned); worker
 * 0 writes the tuning log to -l LOG.  MODEL: resnet50, bert-base, or mlp
 * (784-512-512-10, for tests).
 * -S N opens the handle with N streams (default 1).
 *	model [-t off|on|reuse] [-u UNIT] [-s MAX] [-S N] [-b BACKWARD] [-l LOG] [-j] MODEL ITERS
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <agg/agg.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	double d = t - now();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

/* The model's parameter tensors in forward order, as float32 counts. */
static size_t *tensors;
static int ntensors, cap;

static void add(size_t n)
{
	if (ntensors == cap) {
		cap = cap ? 2 * cap : 256;
		tensors = realloc(tensors, cap * sizeof(*tensors));
		if (!tensors) {
			perror("model");
			exit(3);
		}
	}
	tensors[ntensors++] = n;
}

static void bn(size_t c)
{
	add(c);	/* weight */
	add(c);	/* bias */
}

/* torchvision's resnet50: 25,557,032 parameters in 161 tensors. */
static void resnet50(void)
{
	static const size_t planes[] = { 64, 128, 256, 512 }, blocks[] = { 3, 4, 6, 3 };
	size_t in = 64;

	add(64 * 3 * 7 * 7);
	bn(64);
	for (int l = 0; l < 4; l++) {
		for (size_t b = 0; b < blocks[l]; b++) {
			size_t p = planes[l];

			add(p * in);
			bn(p);
			add(p * p * 9);
			bn(p);
			add(4 * p * p);
			bn(4 * p);
			if (b == 0) {
				add(4 * p * in);	/* downsample */
				bn(4 * p);
			}
			in = 4 * p;
		}
	}
	add(1000 * 2048);
	add(1000);
}

static void linear(size_t out, size_t in)
{
	add(out * in);
	add(out);
}

/* BERT-base (uncased): 109,482,240 parameters in 199 tensors. */
static void bert_base(void)
{
	add(30522 * 768);	/* word embeddings */
	add(512 * 768);		/* positions */
	add(2 * 768);		/* token types */
	bn(768);		/* LayerNorm */
	for (int l = 0; l < 12; l++) {
		linear(768, 768);	/* query */
		linear(768, 768);	/* key */
		linear(768, 768);	/* value */
		linear(768, 768);	/* attention output */
		bn(768);
		linear(3072, 768);	/* intermediate */
		linear(768, 3072);	/* output */
		bn(768);
	}
	linear(768, 768);		/* pooler */
}

struct unit {
	size_t lo, n;		/* values [lo, lo + n) of the flat gradient */
	double ready;		/* seconds into the backward pass */
	struct agg_req *req[64];
	int nreq;
};

int main(int argc, char **argv)
{
	struct agg_tuning_opts to = { .sz = sizeof(to) };
	struct agg_opts ao = { .sz = sizeof(ao) };
	struct agg_tuning *tu;
	struct agg *a;
	const char *mode = "off", *logf = NULL;
	double backward = 0.1;
	size_t unit = 0, total = 0, maxc;
	struct unit *u;
	float *x;
	int iters, c;
	FILE *log = NULL;

	while ((c = getopt(argc, argv, "t:u:s:S:b:l:j")) != -1) {
		switch (c) {
		case 'S': ao.streams = (unsigned)atoi(optarg); break;
		case 's': to.streams_max = (unsigned)atoi(optarg); break;
		case 't': mode = optarg; break;
		case 'u': unit = strtoull(optarg, NULL, 0); break;
		case 'b': backward = atof(optarg); break;
		case 'l': logf = optarg; break;
		case 'j': to.log_json = 1; break;
		default: goto usage;
		}
	}
	if (argc - optind != 2)
		goto usage;
	if (!strcmp(argv[optind], "resnet50"))
		resnet50();
	else if (!strcmp(argv[optind], "bert-base"))
		bert_base();
	else if (!strcmp(argv[optind], "mlp")) {
		linear(512, 784);
		linear(512, 512);
		linear(10, 512);
	}
	else
		goto usage;
	iters = atoi(argv[optind + 1]);
	to.mode = !strcmp(mode, "on") ? AGG_TUNING_ON : !strcmp(mode, "reuse") ? AGG_TUNING_REUSE :
		  !strcmp(mode, "off") ? AGG_TUNING_OFF : -1;
	if ((int)to.mode < 0 || iters < 1)
		goto usage;
	for (int i = 0; i < ntensors; i++)
		total += tensors[i];
	to.model_bytes = total * 4;
	to.unit = unit;
	if (agg_open(&a, &ao)) {
		fprintf(stderr, "model: %s\n", agg_errmsg());
		return 1;
	}
	if (logf && agg_rank(a) == 0 && !(log = fopen(logf, "w"))) {
		perror(logf);
		return 3;
	}
	to.log = log;
	if (agg_tuning_open(a, &to, &tu)) {
		fprintf(stderr, "model: %s\n", agg_errmsg());
		return 1;
	}
	maxc = agg_max_count(a);
	x = malloc(total * sizeof(*x));
	u = calloc(ntensors, sizeof(*u));
	if (!x || !u) {
		perror("model");
		return 3;
	}
	for (int it = 0; it < iters; it++) {
		struct agg_setting s;
		size_t lo = total, done = 0;
		double t0, t;
		int nu = 0;

		if (agg_tuning_next(tu, &s)) {
			fprintf(stderr, "model: %s\n", agg_errmsg());
			return 1;
		}
		for (size_t i = 0; i < total; i++)
			x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
		/* Backward order: the last layer's gradients first. */
		t0 = now();
		for (int k = ntensors - 1; k >= 0; k--) {
			lo -= tensors[k];
			done += tensors[k];
			if (!nu || u[nu - 1].n * 4 >= s.unit)
				u[nu++] = (struct unit){ .lo = lo };
			u[nu - 1].lo = lo;
			u[nu - 1].n += tensors[k];
			u[nu - 1].ready = backward * (double)done / (double)total;
			if (k && u[nu - 1].n * 4 < s.unit)
				continue;
			/* The unit is full (or the last): send it when ready. */
			sleep_until(t0 + u[nu - 1].ready);
			for (size_t o = 0; o < u[nu - 1].n; o += maxc) {
				size_t n = u[nu - 1].n - o < maxc ? u[nu - 1].n - o : maxc;

				if (u[nu - 1].nreq == 64) {
					fprintf(stderr, "model: a unit of %zu bytes is over 64 of "
						"the plan's %zu values: plan a larger --size\n",
						u[nu - 1].n * 4, maxc);
					return 1;
				}
				if (agg_allreduce_start(a, x + u[nu - 1].lo + o, n, AGG_FLOAT32,
							AGG_REDUCE_SUM, 0,
							&u[nu - 1].req[u[nu - 1].nreq++])) {
					fprintf(stderr, "model: %s\n", agg_errmsg());
					return 1;
				}
			}
		}
		for (int k = 0; k < nu; k++)
			for (int r = 0; r < u[k].nreq; r++)
				if (agg_wait(u[k].req[r])) {
					fprintf(stderr, "model: %s\n", agg_errmsg());
					return 1;
				}
		t = now() - t0;
		printf("%d %zu %u %.6f %d\n", it, s.unit, s.streams, t, agg_tuning_done(tu));
		fflush(stdout);
		if (agg_tuning_report(tu, t)) {
			fprintf(stderr, "model: %s\n", agg_errmsg());
			return 1;
		}
	}
	agg_tuning_close(tu);
	agg_close(a);
	if (log)
		fclose(log);
	free(x);
	free(u);
	free(tensors);
	return 0;
usage:
	fprintf(stderr, "usage: model [-t off|on|reuse] [-u UNIT] [-s MAX] [-S N] [-b BACKWARD] [-l LOG] [-j] "
		"resnet50|bert-base|mlp ITERS\n");
	return 2;
}
