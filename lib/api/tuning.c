// SPDX-License-Identifier: GPL-2.0-only
/*
 * libagg's auto-tuning (agg_tuning_*, agg/agg.h): lib/tune's tuner over
 * the unit size, started from the cache of best settings (man 5 agg-tune),
 * with every decision agreed by the workers through the handle itself.
 *
 * The tuner is deterministic: given the same start, seed and reported
 * times it proposes the same settings.  So the workers agree on the start
 * (worker 0's cache lookup, sent to all with a max-allreduce in which the
 * others contribute nothing) and on every time (the largest of the
 * workers': an iteration is over when its last worker's is), and then
 * each runs its own copy of the tuner.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "tune.h"

#ifndef AGG_CACHE_DIR
#define AGG_CACHE_DIR "/var/cache/agg"
#endif

#define UNIT_OFF	(25u << 20)	/* DDP's bucket_cap_mb */
#define UNIT_MIN	(256u << 10)
#define NEAR_MAX	1.0		/* a cached plan this near seeds the search */
#define AGREED_FAILED	3		/* worker 0's word: its cache is unreadable */

struct agg_tuning {
	struct agg *a;
	enum agg_tuning_mode mode;
	bool fixed;			/* off or reused: unit, streams, no tuner */
	size_t unit;
	unsigned streams;		/* 0: the handle's */
	struct agg_tune_space sp;
	struct agg_tune *t;
	struct agg_tune_fp fp;
	char dir[4096];
	FILE *log;
	bool json;
	size_t logged;			/* events printed */
	bool stored;
	int trials0;			/* the tuner's trials at the start */
};

static uint64_t pow2_floor(uint64_t v)
{
	uint64_t p = 1;

	while (p <= v / 2)
		p *= 2;
	return p;
}

/*
 * The fingerprint: the plan's shape and the workload.  The topology
 * (scheme, depth, fan-in) and the window (slots) are in it: the same
 * hosts planned under two schemes or windows are two plans, and one's
 * tuned setting is no measurement of the other's.
 */
static int fingerprint(const struct agg *a, uint64_t model_bytes, struct agg_tune_fp *fp)
{
	const struct agg_plan *p = agg_api_plan(a);
	double bw_min = INFINITY, bw_max = 0;
	int err, depth = 0, fanin = 0;

	for (int i = 0; i < p->nnodes; i++) {
		for (int t = 0; t < p->ntrees; t++) {
			int d = agg_plan_depth(p, t, i), k = agg_plan_children(p, t, i, NULL, 0);

			depth = d > depth ? d : depth;
			fanin = k > fanin ? k : fanin;
		}
		if (p->node[i].role != AGG_ROLE_WORKER)
			continue;
		bw_min = fmin(bw_min, p->node[i].bw);
		bw_max = fmax(bw_max, p->node[i].bw);
	}
	memset(fp, 0, sizeof(*fp));
	if ((err = agg_tune_fp_add(fp, "workers", agg_world_size(a))) ||
	    (err = agg_tune_fp_add(fp, "nodes", p->nnodes)) ||
	    (err = agg_tune_fp_add(fp, "trees", p->ntrees)) ||
	    (err = agg_tune_fp_add(fp, "bw_min", isfinite(bw_min) ? bw_min : 0)) ||
	    (err = agg_tune_fp_add(fp, "bw_max", bw_max)) ||
	    (err = agg_tune_fp_add(fp, "segment", p->segment)) ||
	    /* enum agg_scheme's number, as man 3 libagg lists it */
	    (err = agg_tune_fp_add(fp, "scheme", p->scheme)) ||
	    (err = agg_tune_fp_add(fp, "depth", depth)) ||
	    (err = agg_tune_fp_add(fp, "fanin", fanin)) ||
	    (err = agg_tune_fp_add(fp, "slots", p->slots)) ||
	    (err = agg_tune_fp_add(fp, "model_bytes", (double)model_bytes)))
		return err;
	return 0;
}

/* Every worker gets worker 0's v[0..n) (the others' are not used). */
static int from_worker0(struct agg *a, float *v, size_t n)
{
	if (agg_rank(a) != 0)
		for (size_t i = 0; i < n; i++)
			v[i] = -1;
	return agg_allreduce(a, v, n, AGG_FLOAT32, AGG_REDUCE_MAX, 0);
}

int agg_tuning_open(struct agg *a, const struct agg_tuning_opts *opts, struct agg_tuning **out)
{
	struct agg_tuning_opts o = { 0 };
	struct agg_tune_opts to;
	struct agg_tune_cache cache = { 0 };
	struct agg_tune_hit hit = { .match = AGG_TUNE_MISS };
	struct agg_tune_setting start;
	struct agg_tuning *t;
	struct agg_diag d = { "" };
	const char *dir;
	uint64_t plan_bytes, hi;
	float agreed[1 + AGG_TUNE_MAX_PARAMS];
	int err;

	if (!a || !out)
		return agg_api_fail(-EINVAL, "agg_tuning_open: no handle or no out");
	if (opts)
		memcpy(&o, opts, opts->sz && opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	if (o.mode != AGG_TUNING_OFF && o.mode != AGG_TUNING_ON && o.mode != AGG_TUNING_REUSE)
		return agg_api_fail(-EINVAL, "agg_tuning_open: mode %d is none of off, on, reuse",
				    (int)o.mode);
	plan_bytes = (uint64_t)agg_max_count(a) * 4;
	hi = o.unit_max ? o.unit_max : pow2_floor(plan_bytes);
	if (!o.unit_min)
		o.unit_min = UNIT_MIN < hi ? UNIT_MIN : hi;	/* a small plan: its size */
	if (o.unit_min & (o.unit_min - 1) || hi & (hi - 1) || o.unit_min > hi || hi > plan_bytes)
		return agg_api_fail(-EINVAL, "agg_tuning_open: units %zu..%" PRIu64 " bytes: "
				    "powers of two, the smaller first, at most the plan's %" PRIu64,
				    o.unit_min, hi, plan_bytes);
	t = calloc(1, sizeof(*t));
	if (!t)
		return agg_api_fail(-ENOMEM, "agg_tuning_open: out of memory");
	t->a = a;
	t->mode = o.mode;
	t->log = o.log;
	t->json = o.log_json;
	t->unit = o.unit ? o.unit : UNIT_OFF < plan_bytes ? UNIT_OFF : plan_bytes;
	dir = o.cache_dir ? o.cache_dir : getenv("AGG_CACHE_DIR") && *getenv("AGG_CACHE_DIR") ?
	      getenv("AGG_CACHE_DIR") : AGG_CACHE_DIR;
	snprintf(t->dir, sizeof(t->dir), "%s", dir);
	if (o.mode == AGG_TUNING_OFF) {
		t->fixed = true;
		*out = t;
		return 0;
	}
	if (o.streams_max > AGG_MAX_STREAMS) {
		free(t);
		return agg_api_fail(-EINVAL, "agg_tuning_open: streams_max %u: at most %d",
				    o.streams_max, AGG_MAX_STREAMS);
	}
	if ((err = agg_tune_space_add_pow2(&t->sp, "unit", (int64_t)o.unit_min, (int64_t)hi)) ||
	    (o.streams_max > 1 &&
	     (err = agg_tune_space_add_pow2(&t->sp, "streams", 1,
					    (int64_t)pow2_floor(o.streams_max)))) ||
	    (err = fingerprint(a, o.model_bytes ? o.model_bytes : plan_bytes, &t->fp))) {
		free(t);
		return agg_api_fail(err, "agg_tuning_open: %s", strerror(-err));
	}
	/* Worker 0's cache decides where every worker starts. */
	memset(agreed, 0, sizeof(agreed));
	if (agg_rank(a) == 0) {
		/* A cache it cannot read fails every worker's open, not
		 * only its own: the others wait for its word. */
		if (agg_tune_cache_load(t->dir, &cache, &d))
			agreed[0] = AGREED_FAILED;
		else
			agg_tune_cache_lookup(&cache, &t->fp, NEAR_MAX, &hit);
		agg_tune_cache_free(&cache);
		if (hit.match != AGG_TUNE_MISS) {
			/* An entry that is not a point of our search space
			 * (tuned with other parameters, or a value outside
			 * our units or streams) only seeds the search at
			 * the nearest point, exact fingerprint or not. */
			agg_tune_space_find(&t->sp, &hit.e.set, &start);
			agreed[0] = hit.match == AGG_TUNE_EXACT &&
				    agg_tune_space_exact(&t->sp, &hit.e.set, &start) ? 2 : 1;
			for (int k = 0; k < t->sp.n; k++)
				agreed[1 + k] = (float)start.i[k];
		}
	}
	if ((err = from_worker0(a, agreed, 1 + (size_t)t->sp.n))) {
		free(t);
		return err;	/* the allreduce's message */
	}
	if (agreed[0] == AGREED_FAILED) {
		free(t);
		return agg_api_fail(-EIO, "%s", agg_rank(a) ? "agg_tuning_open: worker 0 cannot "
				    "read its tuning cache (its message names the file)" : d.msg);
	}
	for (int k = 0; k < t->sp.n; k++)
		start.i[k] = (int)agreed[1 + k];
	if (agreed[0] == 2 && o.mode == AGG_TUNING_REUSE) {
		t->fixed = true;
		t->unit = (size_t)agg_tune_value(&t->sp, &start, 0);
		if (t->sp.n > 1)
			t->streams = (unsigned)agg_tune_value(&t->sp, &start, 1);
		*out = t;
		return 0;
	}
	agg_tune_opts_default(&to);
	to.seed = o.seed ? o.seed : 1;
	if (o.max_trials > 0)
		to.max_trials = o.max_trials;
	to.have_start = agreed[0] > 0;
	to.start = start;
	if ((err = agg_tune_new(&t->sp, &to, &t->t))) {
		free(t);
		return agg_api_fail(err, "agg_tuning_open: %s", strerror(-err));
	}
	*out = t;
	return 0;
}

int agg_tuning_next(struct agg_tuning *t, struct agg_setting *s)
{
	struct agg_tune_setting x;
	int err;

	if (!t || !s)
		return agg_api_fail(-EINVAL, "agg_tuning_next: no tuning or no setting");
	if (t->fixed) {
		s->unit = t->unit;
		s->streams = t->streams;
	} else {
		if ((err = agg_tune_next(t->t, &x, NULL)))
			return agg_api_fail(err, "agg_tuning_next: %s", strerror(-err));
		s->unit = (size_t)agg_tune_value(&t->sp, &x, 0);
		s->streams = t->sp.n > 1 ? (unsigned)agg_tune_value(&t->sp, &x, 1) : 0;
	}
	if (s->streams && (err = agg_api_set_streams(t->a, s->streams)))
		return err;
	s->streams = agg_api_streams(t->a);
	return 0;
}

/* The best setting into the cache, once (mode on or reuse that tuned). */
static int store(struct agg_tuning *t)
{
	struct agg_tune_entry e = { .fp = t->fp };
	struct agg_tune_setting x;
	struct agg_diag d = { "" };
	int err;

	t->stored = true;
	if (agg_tune_best(t->t, &x, &e.seconds))
		return 0;
	agg_tune_setting_values(&t->sp, &x, &e.set);
	e.trials = agg_tune_trials(t->t);
	err = agg_tune_cache_store(t->dir, &e, &d);
	return err ? agg_api_fail(err, "%s", d.msg) : 0;
}

int agg_tuning_report(struct agg_tuning *t, double seconds)
{
	struct agg_tune_setting x;
	float v[1];
	int err;

	bool bad = !(seconds > 0) || !isfinite(seconds);

	if (!t)
		return agg_api_fail(-EINVAL, "agg_tuning_report: no tuning");
	if (t->fixed || agg_tune_converged(t->t))
		return bad ? agg_api_fail(-EINVAL, "agg_tuning_report: a time > 0 s, not %g",
					  seconds) : 0;
	/* A bad time still takes part (as -1), or the other workers would
	 * wait for it and the next allreduce would take its iteration; the
	 * largest good time is every worker's, none: every worker fails. */
	v[0] = bad ? -1.0f : (float)seconds;
	if ((err = agg_allreduce(t->a, v, 1, AGG_FLOAT32, AGG_REDUCE_MAX, 0)))
		return err;
	if (!(v[0] > 0))
		return agg_api_fail(-EINVAL, "agg_tuning_report: no worker had a time > 0 s%s",
				    bad ? "" : " but this one");
	if ((err = agg_tune_next(t->t, &x, NULL)) ||
	    (err = agg_tune_report(t->t, &x, v[0])))
		return agg_api_fail(err, "agg_tuning_report: %s", strerror(-err));
	if (bad)
		return agg_api_fail(-EINVAL, "agg_tuning_report: a time > 0 s, not %g (the "
				    "other workers' was taken)", seconds);
	for (; t->log && t->logged < agg_tune_nevents(t->t); t->logged++)
		agg_tune_fprint_event(t->log, t->json, t->t, agg_tune_event(t->t, t->logged));
	if (t->log)
		fflush(t->log);
	if (agg_tune_converged(t->t) && !t->stored)
		return store(t);
	return 0;
}

int agg_tuning_done(const struct agg_tuning *t)
{
	return t && (t->fixed || agg_tune_converged(t->t));
}

void agg_tuning_close(struct agg_tuning *t)
{
	if (!t)
		return;
	agg_tune_free(t->t);
	free(t);
}
