// SPDX-License-Identifier: GPL-2.0-only
/*
 * Unit tests of lib/tune: the space, the bandit's AUC credit, the tuner on
 * synthetic noisy iteration-time landscapes over many seeds, its log, and
 * the cache (round trip, exact and nearest hits, malformed files,
 * concurrent writers).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "tap.h"
#include "tune.h"

/* ---- landscapes ------------------------------------------------------------ */
/*
 * Iteration time as a function of the stream count s and the unit size u
 * (bytes) for a 100 MB model on a 10 Gbit/s link: streams fill the link
 * (one stream gets 40% of it, eight nearly all) but contend beyond that,
 * small units pay a per-unit latency, large ones expose the last unit's
 * transfer (no overlap with the backward pass).  A bowl in log2(u) with a
 * plateau along s, as the real thing is.
 */
struct land {
	const char *name;
	double (*f)(int64_t s, int64_t u);
};

static double bowl(int64_t s, int64_t u)
{
	const double bytes = 100e6, bw = 1.25e9, lat = 20e-6;
	double eff = 1 - 0.6 * exp(-(s - 1) / 1.5);

	return 0.01 + bytes / (bw * eff) + bytes / u * lat / (s < 4 ? s : 4) +
	       u / bw + 0.0015 * s;
}

/*
 * A misleading local minimum: the middle of the space (where the search
 * starts) lies in a basin whose floor, at one stream and 4 MiB units, is
 * 25% slower than the true best at 16 streams and small units, a narrower
 * basin across a ridge.
 */
static double deceptive(int64_t s, int64_t u)
{
	double ls = log2((double)s), lu = log2((double)u / 65536);
	double g1 = 0.100 + 0.003 * (ls * ls + (lu - 6) * (lu - 6));
	double g2 = 0.080 + 0.004 * ((ls - 4) * (ls - 4) + (lu - 1) * (lu - 1));

	return g1 < g2 ? g1 : g2;
}

/* Flat within 3% over most of the space, the best on a shallow slope. */
static double plateau(int64_t s, int64_t u)
{
	double ls = log2((double)s), lu = log2((double)u / 65536);
	double r2 = (ls - 3) * (ls - 3) + (lu - 8) * (lu - 8);

	return 0.05 * (1 + 0.03 * (1 - exp(-r2 / 8)) + 0.4 * (r2 > 30 ? 1 : 0));
}

static const struct land lands[] = {
	{ "bowl", bowl },
	{ "deceptive", deceptive },
	{ "plateau", plateau },
};

/* streams 1..32, units 64 KiB..256 MiB: 6 x 13 = 78 settings */
static void make_space(struct agg_tune_space *s)
{
	memset(s, 0, sizeof(*s));
	agg_tune_space_add_pow2(s, "streams", 1, 32);
	agg_tune_space_add_pow2(s, "unit", 64 << 10, 256 << 20);
}

static double truth(const struct agg_tune_space *s, const struct land *l,
		    const struct agg_tune_setting *x)
{
	return l->f(agg_tune_value(s, x, 0), agg_tune_value(s, x, 1));
}

static double exhaustive(const struct agg_tune_space *s, const struct land *l)
{
	struct agg_tune_setting x = { { 0 } };
	double best = INFINITY;

	for (x.i[0] = 0; x.i[0] < s->p[0].n; x.i[0]++)
		for (x.i[1] = 0; x.i[1] < s->p[1].n; x.i[1]++)
			best = fmin(best, truth(s, l, &x));
	return best;
}

/* A measurement: the truth times lognormal noise of sd `noise`. */
static double measure(const struct agg_tune_space *s, const struct land *l,
		      const struct agg_tune_setting *x, struct agg_rand *r, double noise)
{
	return truth(s, l, x) * exp(noise * agg_rand_normal(r));
}

struct run {
	int trials;		/* until converged */
	double ratio;		/* truth of the best / the exhaustive best */
	int uses[AGG_TUNE_NTECH];
	int wins[AGG_TUNE_NTECH];	/* new bests credited */
	bool log_ok;
	struct agg_tune_setting best, first;
};

/* Tune until converged (at most limit trials); false on an API error. */
static bool tune(const struct agg_tune_space *s, const struct land *l,
		 const struct agg_tune_opts *o, double noise, int limit, struct run *out)
{
	struct agg_tune *t;
	struct agg_rand r;
	double opt = exhaustive(s, l);
	bool good = true;

	memset(out, 0, sizeof(*out));
	if (agg_tune_new(s, o, &t))
		return false;
	agg_rand_seed(&r, o->seed * 7919 + 13);
	out->log_ok = true;
	while (!agg_tune_converged(t) && agg_tune_trials(t) < limit) {
		struct agg_tune_setting x, again;
		enum agg_tune_tech tech, tech2;
		const struct agg_tune_event *e;
		double sec;

		good &= !agg_tune_next(t, &x, &tech) && !agg_tune_next(t, &again, &tech2) &&
			agg_tune_setting_eq(s, &x, &again) && tech == tech2;
		sec = measure(s, l, &x, &r, noise);
		good &= !agg_tune_report(t, &x, sec);
		e = agg_tune_event(t, agg_tune_nevents(t) - 1);
		out->log_ok &= agg_tune_nevents(t) == (size_t)agg_tune_trials(t) && e &&
			e->trial == agg_tune_trials(t) && e->tech == tech && e->seconds == sec &&
			agg_tune_setting_eq(s, &e->x, &x);
		if (agg_tune_trials(t) == 1)
			out->first = x;
		if (e && e->new_best)
			out->wins[e->found_by]++;
	}
	out->trials = agg_tune_trials(t);
	good &= !agg_tune_best(t, &out->best, NULL);
	out->ratio = truth(s, l, &out->best) / opt;
	for (int k = 0; k < AGG_TUNE_NTECH; k++)
		out->uses[k] = agg_tune_uses(t, k);
	agg_tune_free(t);
	return good;
}

/* ---- the space ---------------------------------------------------------------- */

static void test_space(void)
{
	struct agg_tune_space s = { 0 };
	struct agg_tune_setting x;
	struct agg_tune_values v = { 0 };
	const int64_t bad[] = { 1, 4, 2 }, few[] = { 3 };
	char buf[64];

	is_int(agg_tune_space_add_pow2(&s, "streams", 1, 16), 0, "streams 1..16");
	is_int(agg_tune_space_add_pow2(&s, "unit", 256 << 10, 64 << 20), 0, "unit 256K..64M");
	is_int(s.p[0].n * s.p[1].n, 5 * 9, "5 x 9 settings");
	is_int(agg_tune_space_points(&s), 45, "agg_tune_space_points");
	is_int(agg_tune_space_add(&s, "x", bad, 3), -EINVAL, "values not ascending: -EINVAL");
	is_int(agg_tune_space_add(&s, "unit", few, 1), -EINVAL, "a name twice: -EINVAL");
	is_int(agg_tune_space_add(&s, "Bad", few, 1), -EINVAL, "a name not [a-z][a-z0-9_]*");
	is_int(agg_tune_space_add_pow2(&s, "y", 3, 16), -EINVAL, "pow2 of a non-power");
	is_int(agg_tune_space_add_pow2(&s, "z", 1, 1LL << 40), -E2BIG, "41 values: -E2BIG");

	v.n = 2;
	strcpy(v.name[0], "unit");
	v.v[0] = 3 << 20;
	strcpy(v.name[1], "other");
	v.v[1] = 9;
	is_int(agg_tune_space_find(&s, &v, &x), 1, "find: one of the space's parameters given");
	agg_tune_setting_format(&s, &x, buf, sizeof(buf));
	is_str(buf, "streams=4 unit=4194304",
	       "find: 3 MiB is nearest 4 MiB in log2; streams, not given, the middle");
	v.v[0] = 1LL << 40;
	agg_tune_space_find(&s, &v, &x);
	is_int(agg_tune_value(&s, &x, 1), 64 << 20, "find: past the end, the largest");
	ok(!agg_tune_space_exact(&s, &v, &x), "exact: not past the end (nor with 'other')");

	/* A cached setting is used as it is only when it is a point of the space. */
	strcpy(v.name[1], "streams");
	v.v[0] = 4 << 20;
	v.v[1] = 8;
	agg_tune_space_find(&s, &v, &x);
	ok(agg_tune_space_exact(&s, &v, &x), "exact: streams=8 unit=4M");
	v.v[0] = 128 << 20;
	agg_tune_space_find(&s, &v, &x);
	ok(!agg_tune_space_exact(&s, &v, &x), "exact: not unit=128M, past 64M");
	v.v[0] = 3 << 20;
	agg_tune_space_find(&s, &v, &x);
	ok(!agg_tune_space_exact(&s, &v, &x), "exact: not unit=3M, between two");
	v.v[0] = 4 << 20;
	v.n = 1;
	agg_tune_space_find(&s, &v, &x);
	ok(!agg_tune_space_exact(&s, &v, &x), "exact: not without the streams");
	v.n = 3;
	strcpy(v.name[2], "window");
	v.v[2] = 2;
	agg_tune_space_find(&s, &v, &x);
	ok(!agg_tune_space_exact(&s, &v, &x), "exact: not with a parameter the space lacks");
}

/* ---- the bandit ----------------------------------------------------------------- */

static void test_bandit(void)
{
	struct agg_tune_bandit b;
	struct agg_rand r;
	int picks[3] = { 0 };

	agg_rand_seed(&r, 5);
	agg_tune_bandit_init(&b, 10, 0.2);
	/* arm 0: win, lose, win -> (1 + 3) * 2 / (3 * 4) */
	agg_tune_bandit_record(&b, 0, 1);
	agg_tune_bandit_record(&b, 1, 2);
	agg_tune_bandit_record(&b, 0, 3);
	agg_tune_bandit_record(&b, 0, 4);
	ok(agg_tune_bandit_credit(&b, 1) && agg_tune_bandit_credit(&b, 4),
	   "credit two uses in the window");
	is_dbl(agg_tune_bandit_auc(&b, 0), 4.0 * 2 / 12, 1e-12,
	       "AUC: wins at the 1st and 3rd use of 3 -> (1+3)/6");
	is_dbl(agg_tune_bandit_auc(&b, 1), 0, 0, "AUC of an arm that never won: 0");
	is_dbl(agg_tune_bandit_score(&b, 1), 0.2 * sqrt(2 * log2(4) / 1), 1e-12,
	       "score: AUC + C sqrt(2 lg|H| / H_t)");
	ok(isinf(agg_tune_bandit_score(&b, 2)), "an unused arm scores infinity");
	is_int(agg_tune_bandit_choose(&b, 7, &r, NULL), 2, "an unused arm is chosen first");
	/* recent wins weigh more: a win at the last use scores more than at the first */
	{
		struct agg_tune_bandit e, l;

		agg_tune_bandit_init(&e, 10, 0);
		agg_tune_bandit_init(&l, 10, 0);
		for (int i = 1; i <= 4; i++) {
			agg_tune_bandit_record(&e, 0, i);
			agg_tune_bandit_record(&l, 0, i);
		}
		agg_tune_bandit_credit(&e, 1);
		agg_tune_bandit_credit(&l, 4);
		ok(agg_tune_bandit_auc(&l, 0) > agg_tune_bandit_auc(&e, 0),
		   "a recent win earns more credit than an old one (%.3f > %.3f)",
		   agg_tune_bandit_auc(&l, 0), agg_tune_bandit_auc(&e, 0));
	}
	/* the window slides: 10 more uses of arm 1 push arm 0 out */
	for (int i = 0; i < 10; i++)
		agg_tune_bandit_record(&b, 1, 10 + i);
	is_int(agg_tune_bandit_uses(&b, 0), 0, "window 10: older uses leave");
	ok(!agg_tune_bandit_credit(&b, 4), "credit for a use out of the window: false");

	/* arms that win 50%, 0% and 10% of their uses: the first gets most picks */
	agg_tune_bandit_init(&b, 20, 0.2);
	agg_rand_seed(&r, 5);
	for (int trial = 1; trial <= 300; trial++) {
		int a = agg_tune_bandit_choose(&b, 7, &r, NULL);
		static const double p[3] = { 0.5, 0.0, 0.1 };

		picks[a]++;
		agg_tune_bandit_record(&b, a, trial);
		if (agg_rand_double(&r) < p[a])
			agg_tune_bandit_credit(&b, trial);
	}
	ok(picks[0] > 150 && picks[0] > picks[2] && picks[2] >= picks[1],
	   "300 picks of arms winning 50%%, 0%%, 10%%: %d, %d, %d", picks[0], picks[1], picks[2]);
}

/* ---- the tuner ------------------------------------------------------------------ */

static void test_protocol(void)
{
	struct agg_tune_space s;
	struct agg_tune_opts o;
	struct agg_tune_setting x, y;
	struct agg_tune *t;
	enum agg_tune_tech tech;

	make_space(&s);
	agg_tune_opts_default(&o);
	is_int(agg_tune_new(&s, &o, &t), 0, "agg_tune_new");
	is_int(agg_tune_best(t, &x, NULL), -ENOENT, "no best before a trial");
	is_int(agg_tune_report(t, &x, 1.0), -EINVAL, "a report before a proposal: -EINVAL");
	agg_tune_next(t, &x, &tech);
	is_int(tech, AGG_TUNE_START, "trial 1 is the start");
	is_int(x.i[0] * 100 + x.i[1], 2 * 100 + 6, "the start: the middle of each range");
	y = x;
	y.i[0]++;
	is_int(agg_tune_report(t, &y, 1.0), -EINVAL, "a report of another setting: -EINVAL");
	is_int(agg_tune_report(t, &x, 0), -EINVAL, "0 seconds: -EINVAL");
	is_int(agg_tune_report(t, &x, NAN), -EINVAL, "NaN seconds: -EINVAL");
	is_int(agg_tune_report(t, &x, 1.0), 0, "the report of the proposal");
	agg_tune_next(t, &y, &tech);
	ok(tech == AGG_TUNE_CONFIRM && agg_tune_setting_eq(&s, &x, &y),
	   "trial 2 measures the start again (repeats 2)");
	agg_tune_report(t, &y, 1.2);
	is_int(agg_tune_best(t, &y, NULL), 0, "a best after two measurements");
	ok(agg_tune_event(t, 1)->new_best && agg_tune_event(t, 1)->found_by == AGG_TUNE_START &&
	   agg_tune_event(t, 1)->found_trial == 1 && agg_tune_event(t, 1)->best == 1.1,
	   "event 2: new best 1.1 s (median of 1.0, 1.2), found by start at trial 1");
	agg_tune_free(t);

	o.have_start = true;
	o.start.i[0] = 6;
	is_int(agg_tune_new(&s, &o, &t), -EINVAL, "a start outside the space: -EINVAL");
	o.have_start = false;
	o.arms = 0;
	is_int(agg_tune_new(&s, &o, &t), -EINVAL, "no arms: -EINVAL");
}

/* Over many seeds: within 5% of the exhaustive best, converged in 50 trials. */
static void test_convergence(void)
{
	const int seeds = 200;
	struct agg_tune_space s;
	struct agg_tune_opts o;

	make_space(&s);
	for (size_t li = 0; li < sizeof(lands) / sizeof(lands[0]); li++) {
		const struct land *l = &lands[li];
		int within = 0, converged = 0, api = 0, logs = 0;
		double worst = 0, trials = 0;

		for (int seed = 1; seed <= seeds; seed++) {
			struct run run;

			agg_tune_opts_default(&o);
			o.seed = seed;
			api += tune(&s, l, &o, 0.03, 1000, &run);
			within += run.ratio <= 1.05;
			converged += run.trials <= 50;
			logs += run.log_ok;
			worst = fmax(worst, run.ratio);
			trials += run.trials;
		}
		ok(api == seeds && logs == seeds,
		   "%s: the API and the log hold for every seed (%d, %d)", l->name, api, logs);
		ok(converged == seeds, "%s: converged within 50 trials for %d of %d seeds "
		   "(mean %.1f)", l->name, converged, seeds, trials / seeds);
		ok(within >= seeds * 95 / 100,
		   "%s, 3%% noise: within 5%% of the exhaustive best for %d of %d seeds "
		   "(worst %.3f)", l->name, within, seeds, worst);
	}
}

/* The ensemble against hill climbing alone on the misleading landscape. */
static void test_ensemble(void)
{
	const int seeds = 200;
	struct agg_tune_space s;
	struct agg_tune_opts o;
	int all = 0, hill = 0;

	make_space(&s);
	for (int seed = 1; seed <= seeds; seed++) {
		struct run run;

		agg_tune_opts_default(&o);
		o.seed = seed;
		tune(&s, &lands[1], &o, 0.03, 1000, &run);
		all += run.ratio <= 1.05;
		o.arms = AGG_TUNE_ARM(AGG_TUNE_HILL);
		tune(&s, &lands[1], &o, 0.03, 1000, &run);
		hill += run.ratio <= 1.05;
	}
	ok(hill < seeds / 2 && all > hill + seeds / 4,
	   "deceptive: hill climbing alone is caught in the local minimum (%d of %d "
	   "within 5%%), the bandit's ensemble is not (%d)", hill, seeds, all);
}

/*
 * The bandit gives its trials to the technique that improves: from a
 * corner of a cone, hill climbing finds a new best with most steps while
 * random, once near the tip, rarely does.
 */
static double cone(int64_t s, int64_t u)
{
	return 1 + fabs(log2((double)s) - 3) + fabs(log2((double)u / 65536) - 6);
}

static void test_credit(void)
{
	const struct land c = { "cone", cone };
	struct agg_tune_space s;
	struct agg_tune_opts o;
	long hill_c = 0, rand_c = 0, wins[AGG_TUNE_NTECH] = { 0 };

	make_space(&s);
	for (int seed = 1; seed <= 50; seed++) {
		struct run run;

		agg_tune_opts_default(&o);
		o.seed = seed;
		o.arms = AGG_TUNE_ARM(AGG_TUNE_HILL) | AGG_TUNE_ARM(AGG_TUNE_RANDOM);
		o.have_start = true;
		o.patience = 0;
		o.max_trials = 30;
		o.repeats = 1;
		tune(&s, &c, &o, 0, 1000, &run);
		hill_c += run.uses[AGG_TUNE_HILL];
		rand_c += run.uses[AGG_TUNE_RANDOM];
		for (int k = 0; k < AGG_TUNE_NTECH; k++)
			wins[k] += run.wins[k];
	}
	ok(wins[AGG_TUNE_HILL] > wins[AGG_TUNE_RANDOM] && hill_c * 4 > rand_c * 5,
	   "a cone from its corner: hill climbing finds more new bests (%ld to %ld) and "
	   "gets more trials (%ld to random's %ld)", wins[AGG_TUNE_HILL],
	   wins[AGG_TUNE_RANDOM], hill_c, rand_c);
}

static void test_determinism(void)
{
	struct agg_tune_space s;
	struct agg_tune_opts o;
	struct run a, b, c;

	make_space(&s);
	agg_tune_opts_default(&o);
	o.seed = 42;
	tune(&s, &lands[0], &o, 0.03, 1000, &a);
	tune(&s, &lands[0], &o, 0.03, 1000, &b);
	o.seed = 43;
	tune(&s, &lands[0], &o, 0.03, 1000, &c);
	ok(a.trials == b.trials && !memcmp(a.uses, b.uses, sizeof(a.uses)) &&
	   agg_tune_setting_eq(&s, &a.best, &b.best), "the same seed, the same search");
	ok(a.trials != c.trials || memcmp(a.uses, c.uses, sizeof(a.uses)),
	   "another seed, another search");
}

/* ---- the log ------------------------------------------------------------------- */

/* Print every event of t to a file: 0, or -1. */
static int print_log(const struct agg_tune *t, bool json, const char *path)
{
	FILE *f = fopen(path, "w");
	int err = !f;

	for (size_t i = 0; f && !err && i < agg_tune_nevents(t); i++)
		err = agg_tune_fprint_event(f, json, t, agg_tune_event(t, i));
	if (f && fclose(f))
		err = 1;
	return err ? -1 : 0;
}

static void test_log(const char *dir)
{
	struct agg_tune_space s;
	struct agg_tune_opts o;
	struct agg_tune *t;
	struct agg_rand r;
	char path[512], line[1024], want[64];
	int lines = 0, shaped = 0, bests = 0, nbest = 0;
	FILE *f;

	make_space(&s);
	agg_tune_opts_default(&o);
	o.seed = 3;
	agg_tune_new(&s, &o, &t);
	agg_rand_seed(&r, 3);
	while (!agg_tune_converged(t)) {
		struct agg_tune_setting x;

		agg_tune_next(t, &x, NULL);
		agg_tune_report(t, &x, measure(&s, &lands[0], &x, &r, 0.03));
	}
	for (size_t i = 0; i < agg_tune_nevents(t); i++)
		nbest += agg_tune_event(t, i)->new_best;

	snprintf(path, sizeof(path), "%s/log.txt", dir);
	is_int(print_log(t, false, path), 0, "text log printed");
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		const struct agg_tune_event *e = agg_tune_event(t, lines++);
		char set[128];

		agg_tune_setting_format(&s, &e->x, set, sizeof(set));
		snprintf(want, sizeof(want), "trial %d technique %s score ", e->trial,
			 agg_tune_tech_name(e->tech));
		shaped += !strncmp(line, want, strlen(want)) && strstr(line, set) &&
			  strstr(line, e->new_best ? " new_best yes found_by " : " new_best no\n");
		bests += e->new_best && strstr(line, " new_best yes");
	}
	if (f)
		fclose(f);
	ok(lines == agg_tune_trials(t) && shaped == lines && bests == nbest && nbest > 0,
	   "text: a line per trial (%d of %d) naming trial, technique, setting, new bests (%d)",
	   shaped, agg_tune_trials(t), bests);

	snprintf(path, sizeof(path), "%s/log.json", dir);
	is_int(print_log(t, true, path), 0, "JSON log printed");
	lines = shaped = 0;
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		const struct agg_tune_event *e = agg_tune_event(t, lines++);

		snprintf(want, sizeof(want), "{\"trial\":%d,\"technique\":\"%s\",\"score\":",
			 e->trial, agg_tune_tech_name(e->tech));
		shaped += !strncmp(line, want, strlen(want)) &&
			  strstr(line, "\"setting\":{\"streams\":") &&
			  strstr(line, e->new_best ? "\"new_best\":true,\"found_by\":\"" :
				 "\"new_best\":false,\"found_by\":null,\"found_trial\":null}\n");
	}
	if (f)
		fclose(f);
	ok(lines == agg_tune_trials(t) && shaped == lines,
	   "JSON: an object per trial with the same fields (%d of %d)", shaped, lines);
	agg_tune_free(t);
}

/* ---- the cache ------------------------------------------------------------------ */

static void make_entry(struct agg_tune_entry *e, double workers, double bw,
		       int64_t streams, int64_t unit)
{
	memset(e, 0, sizeof(*e));
	agg_tune_fp_add(&e->fp, "workers", workers);
	agg_tune_fp_add(&e->fp, "bw_min", bw);
	agg_tune_fp_add(&e->fp, "model_bytes", 100e6);
	e->set.n = 2;
	strcpy(e->set.name[0], "streams");
	e->set.v[0] = streams;
	strcpy(e->set.name[1], "unit");
	e->set.v[1] = unit;
	e->seconds = 0.0123;
	e->trials = 37;
}

static bool entry_eq(const struct agg_tune_entry *a, const struct agg_tune_entry *b)
{
	return agg_tune_fp_eq(&a->fp, &b->fp) && a->set.n == b->set.n &&
	       !memcmp(a->set.v, b->set.v, sizeof(a->set.v)) &&
	       !strcmp(a->set.name[0], b->set.name[0]) && a->seconds == b->seconds &&
	       a->trials == b->trials;
}

static void test_fingerprint(void)
{
	struct agg_tune_fp a = { 0 }, b = { 0 }, c = { 0 };

	agg_tune_fp_add(&a, "workers", 8);
	agg_tune_fp_add(&a, "bw_min", 10);
	agg_tune_fp_add(&b, "bw_min", 10);
	agg_tune_fp_add(&b, "workers", 8);
	ok(agg_tune_fp_eq(&a, &b) && agg_tune_fp_hash(&a) == agg_tune_fp_hash(&b),
	   "features in any order: the same fingerprint and hash");
	is_int(agg_tune_fp_add(&a, "workers", 9), -EINVAL, "a feature twice: -EINVAL");
	is_int(agg_tune_fp_add(&a, "x", -1), -EINVAL, "a negative feature: -EINVAL");
	is_int(agg_tune_fp_add(&a, "x", INFINITY), -EINVAL, "an infinite feature: -EINVAL");
	agg_tune_fp_add(&c, "workers", 17);
	agg_tune_fp_add(&c, "bw_min", 10);
	is_dbl(agg_tune_fp_distance(&a, &c), sqrt(1.0 / 2), 1e-12,
	       "distance: 9 -> 18 workers is one doubling of two features' log2(1+v)");
	agg_tune_fp_add(&c, "depth", 2);
	ok(isinf(agg_tune_fp_distance(&a, &c)), "other feature names: infinitely far");
	ok(agg_tune_fp_hash(&a) != agg_tune_fp_hash(&c), "other features, another hash");
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static void test_cache(const char *dir)
{
	struct agg_tune_cache c = { 0 }, back;
	struct agg_tune_entry e[3], q;
	struct agg_tune_hit hit;
	struct agg_diag d;
	char path[512], sub[512];
	FILE *f;
	int err;
	bool same = true;

	make_entry(&e[0], 4, 10, 2, 1 << 20);
	make_entry(&e[1], 8, 10, 4, 4 << 20);
	make_entry(&e[2], 64, 10.5, 16, 16 << 20);
	for (int i = 0; i < 3; i++)
		agg_tune_cache_put(&c, &e[i]);
	snprintf(path, sizeof(path), "%s/rt.cache", dir);
	f = fopen(path, "w");
	is_int(agg_tune_cache_write(f, &c), 0, "write a cache of 3");
	fclose(f);
	f = fopen(path, "r");
	err = agg_tune_cache_read(f, path, &back, &d);
	fclose(f);
	if (!ok(!err && back.n == 3, "read it back: 3 entries"))
		diag("%s", d.msg);
	for (size_t i = 0; i < back.n && i < 3; i++)
		same &= entry_eq(&back.e[i], &e[i]);
	ok(same, "round trip: fingerprints, settings, seconds and trials");
	agg_tune_cache_free(&back);

	make_entry(&q, 8, 10, 0, 0);
	agg_tune_cache_lookup(&c, &q.fp, INFINITY, &hit);
	ok(hit.match == AGG_TUNE_EXACT && hit.e.set.v[0] == 4 && hit.e.set.v[1] == 4 << 20 &&
	   hit.distance == 0, "exact hit: the stored setting");
	make_entry(&q, 12, 10, 0, 0);
	agg_tune_cache_lookup(&c, &q.fp, INFINITY, &hit);
	ok(hit.match == AGG_TUNE_NEAREST && hit.e.fp.v[2] == 8,
	   "12 workers: the nearest is 8 workers (not 4 or 64), at %.3f", hit.distance);
	make_entry(&q, 40, 10.5, 0, 0);
	agg_tune_cache_lookup(&c, &q.fp, INFINITY, &hit);
	ok(hit.match == AGG_TUNE_NEAREST && hit.e.fp.v[2] == 64, "40 workers: 64 is nearest");
	agg_tune_cache_lookup(&c, &q.fp, 0.1, &hit);
	is_int(hit.match, AGG_TUNE_MISS, "nothing within distance 0.1: a miss");
	memset(&q, 0, sizeof(q));
	agg_tune_fp_add(&q.fp, "workers", 8);
	agg_tune_cache_lookup(&c, &q.fp, INFINITY, &hit);
	is_int(hit.match, AGG_TUNE_MISS, "other feature names: a miss");

	make_entry(&q, 8, 10, 8, 2 << 20);
	agg_tune_cache_put(&c, &q);
	ok(c.n == 3 && c.e[2].set.v[0] == 8 && c.e[1].fp.v[2] == 64,
	   "put of a stored fingerprint replaces it and makes it the newest");
	agg_tune_cache_free(&c);
	for (int i = 0; i < AGG_TUNE_CACHE_MAX + 1; i++) {
		make_entry(&q, i, 1, 1, 1);
		agg_tune_cache_put(&c, &q);
	}
	ok(c.n == AGG_TUNE_CACHE_MAX && c.e[0].fp.v[2] == 1,
	   "a full cache drops its oldest entry");
	agg_tune_cache_free(&c);

	/* store and load through the directory, made on the way */
	snprintf(sub, sizeof(sub), "%s/cache", dir);
	is_int(agg_tune_cache_load(sub, &c, &d), 0, "load of a missing cache: empty");
	is_int(c.n, 0, "no entries");
	for (int i = 0; i < 3; i++)
		if (agg_tune_cache_store(sub, &e[i], &d))
			diag("%s", d.msg);
	is_int(agg_tune_cache_store(sub, &e[1], &d), 0, "store again: replaces");
	err = agg_tune_cache_load(sub, &c, &d);
	ok(!err && c.n == 3 && entry_eq(&c.e[2], &e[1]) && entry_eq(&c.e[0], &e[0]),
	   "the directory's cache holds the 3, the one stored again newest");
	agg_tune_cache_free(&c);
}

static void test_malformed(const char *dir)
{
	static const struct {
		const char *text, *where, *why;
	} bad[] = {
		{ "fp 0 a=1 set s=1 result seconds=1\n", ":1:1: ", "not a tune cache" },
		{ "tune v2\n", ":1:6: ", "version" },
		{ "tune v1\nentry\n", ":2:1: ", "unknown word 'entry'" },
		{ "tune v1\nfp 12z4 a=1\n", ":2:4: ", "16 lower-case hex" },
		{ "tune v1\n\n# c\nfp 0000000000000000 workers=8 set streams=4 result seconds=1\n",
		  ":4:4: ", "is not the features'" },
		{ "tune v1\nfp 0000000000000000 workers=-8 set s=1 result seconds=1\n",
		  ":2:29: ", "bad value '-8' of feature workers" },
		{ "tune v1\nfp 0000000000000000 workers=8 set streams=four result seconds=1\n",
		  ":2:43: ", "bad value 'four' of streams" },
		{ "tune v1\nfp 0000000000000000 workers=8 Set\n", ":2:31: ", "want NAME=VALUE" },
		{ "tune v1\nfp 0000000000000000 workers=8\n", ":2:30: ", "no 'set'" },
		{ "tune v1\nfp 0000000000000000 w=1 w=2 set s=1 result seconds=1\n", ":2:25: ",
		  "feature w given twice" },
		{ "tune v1\nfp 0000000000000000 w=1 set s=1 result seconds=0\n", ":2:48: ",
		  "bad seconds '0'" },
		{ "tune v1\nfp 0000000000000000 w=1 set s=1\n", ":2:32: ", "no 'result'" },
	};
	struct agg_tune_cache c;
	struct agg_diag d;
	char path[600], sub[512], want[700];
	struct agg_tune_entry e;
	int good = 0;

	snprintf(path, sizeof(path), "%s/bad.cache", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f;
		int err;

		write_file(path, bad[i].text);
		f = fopen(path, "r");
		d.msg[0] = '\0';
		err = agg_tune_cache_read(f, path, &c, &d);
		fclose(f);
		snprintf(want, sizeof(want), "%s%s", path, bad[i].where);
		if (ok(err == -EINVAL && !strncmp(d.msg, want, strlen(want)) &&
		       strstr(d.msg, bad[i].why), "malformed %zu: FILE%s...%s", i, bad[i].where,
		       bad[i].why))
			good++;
		else
			diag("got %d '%s'", err, d.msg);
	}

	/* a duplicate fingerprint names both lines */
	{
		struct agg_tune_cache two = { 0 };
		struct agg_tune_entry x;
		char *text;
		FILE *f;
		int err;

		make_entry(&x, 8, 10, 4, 1 << 20);
		agg_tune_cache_put(&two, &x);
		f = fopen(path, "w");
		agg_tune_cache_write(f, &two);
		fclose(f);
		text = strdup(slurp(path));
		f = fopen(path, "a");
		fputs(strchr(strchr(text, '\n') + 1, '\n') + 1, f);	/* the entry again */
		fclose(f);
		f = fopen(path, "r");
		err = agg_tune_cache_read(f, path, &c, &d);
		fclose(f);
		snprintf(want, sizeof(want), "%s:4:4: fingerprint ", path);
		ok(err == -EINVAL && !strncmp(d.msg, want, strlen(want)) &&
		   strstr(d.msg, "also on line 3"), "a fingerprint twice: lines 4 and 3 (%s)", d.msg);
		free(text);
		agg_tune_cache_free(&two);
	}

	/* store refuses a malformed cache and leaves it as it was */
	snprintf(sub, sizeof(sub), "%s/badcache", dir);
	mkdir(sub, 0755);
	snprintf(path, sizeof(path), "%s/%s", sub, AGG_TUNE_CACHE_FILE);
	write_file(path, bad[4].text);
	make_entry(&e, 8, 10, 4, 1 << 20);
	is_int(agg_tune_cache_store(sub, &e, &d), -EINVAL, "store into a malformed cache: -EINVAL");
	snprintf(want, sizeof(want), "%s:4:4: ", path);
	ok(!strncmp(d.msg, want, strlen(want)), "naming FILE:LINE:COL (%s)", d.msg);
	is_str(slurp(path), bad[4].text, "the malformed cache is kept as it was");
}

/*
 * A full cache loads and stores with work linear in its entries: the
 * fingerprint comparisons are counted (agg_tune_fp_eq_calls), not timed.
 * Comparing each entry with every other made 1024 entries take seconds,
 * with the lock held.
 */
static void test_linear(const char *dir)
{
	enum { N = AGG_TUNE_CACHE_MAX };
	struct agg_tune_cache c = { 0 }, back;
	struct agg_tune_entry e;
	struct agg_diag d;
	char sub[512], path[600];
	unsigned long calls;
	FILE *f;

	snprintf(sub, sizeof(sub), "%s/linear", dir);
	mkdir(sub, 0755);
	snprintf(path, sizeof(path), "%s/%s", sub, AGG_TUNE_CACHE_FILE);
	c.e = calloc(N, sizeof(*c.e));
	for (c.n = 0; c.n < N; c.n++)
		make_entry(&c.e[c.n], c.n + 1, 10, 1, 1 << 20);
	f = fopen(path, "w");
	agg_tune_cache_write(f, &c);
	fclose(f);

	agg_tune_fp_eq_calls = 0;
	is_int(agg_tune_cache_load(sub, &back, &d), 0, "a cache of %d entries loads", N);
	calls = agg_tune_fp_eq_calls;
	ok(back.n == N && calls <= N, "load: %lu fingerprint comparisons for %d entries "
	   "(at most one each; each with every other: %d)", calls, N, N * (N - 1) / 2);
	agg_tune_cache_free(&back);

	make_entry(&e, N + 1, 10, 2, 1 << 20);
	agg_tune_fp_eq_calls = 0;
	is_int(agg_tune_cache_store(sub, &e, &d), 0, "a new entry into the full cache");
	calls = agg_tune_fp_eq_calls;
	ok(calls <= 2 * N, "store of a new entry: %lu comparisons (at most %d)", calls, 2 * N);
	make_entry(&e, N / 2, 10, 3, 1 << 20);
	agg_tune_fp_eq_calls = 0;
	is_int(agg_tune_cache_store(sub, &e, &d), 0, "an entry stored again");
	calls = agg_tune_fp_eq_calls;
	ok(calls <= 2 * N, "store of a stored entry: %lu comparisons (at most %d)", calls, 2 * N);
	is_int(agg_tune_cache_load(sub, &back, &d), 0, "and it loads");
	ok(back.n == N && back.e[N - 1].set.v[0] == 3 && back.e[N - 2].set.v[0] == 2 &&
	   back.e[0].fp.v[2] == 2, "the oldest went, the two stored are the newest");
	agg_tune_cache_free(&back);
	agg_tune_cache_free(&c);

	/* a duplicate far apart is still found, by its hash */
	{
		char text[8192];

		snprintf(path, sizeof(path), "%s/dup.cache", dir);
		c.e = calloc(3, sizeof(*c.e));
		for (c.n = 0; c.n < 3; c.n++)
			make_entry(&c.e[c.n], c.n + 1, 10, 1, 1 << 20);
		f = fopen(path, "w");
		agg_tune_cache_write(f, &c);
		fclose(f);
		snprintf(text, sizeof(text), "%s", slurp(path));
		/* line 3 is the first entry */
		f = fopen(path, "a");
		fputs(strchr(strchr(text, '\n') + 1, '\n') + 1, f);
		fclose(f);
		f = fopen(path, "r");
		is_int(agg_tune_cache_read(f, path, &back, &d), -EINVAL,
		       "the 3 entries twice: a duplicate");
		fclose(f);
		ok(strstr(d.msg, ":6:4: fingerprint ") && strstr(d.msg, "also on line 3"),
		   "line 6 names line 3 (%s)", d.msg);
		agg_tune_cache_free(&c);
	}
}

/*
 * The store waits AGG_TUNE_LOCK_WAIT seconds at most for a lock another
 * process holds, then fails with -ETIMEDOUT naming the lock; the cache is
 * left as it is.
 */
static void test_lock_bound(const char *dir)
{
	struct agg_tune_entry e;
	struct agg_diag d = { "" };
	char sub[512], lock[600], go;
	int ready[2], release[2], status, err;
	pid_t pid;

	snprintf(sub, sizeof(sub), "%s/locked", dir);
	mkdir(sub, 0755);
	snprintf(lock, sizeof(lock), "%s/%s", sub, AGG_TUNE_LOCK_FILE);
	if (pipe(ready) || pipe(release)) {
		ok(0, "pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		int fd = open(lock, O_RDWR | O_CREAT, 0644);

		close(ready[0]);
		close(release[1]);
		if (fd < 0 || flock(fd, LOCK_EX))
			_exit(1);
		if (write(ready[1], "l", 1) != 1)
			_exit(1);
		/* hold it until the parent is done */
		while (read(release[0], &go, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(ready[1]);
	close(release[0]);
	if (!ok(pid > 0 && read(ready[0], &go, 1) == 1, "another process holds %s", lock))
		return;
	make_entry(&e, 8, 10, 4, 1 << 20);
	err = agg_tune_cache_store(sub, &e, &d);
	is_int(err, -ETIMEDOUT, "store: -ETIMEDOUT after %d s", AGG_TUNE_LOCK_WAIT);
	ok(strstr(d.msg, lock) && strstr(d.msg, "another process has held it"),
	   "the message names the lock (%s)", d.msg);
	close(release[1]);
	waitpid(pid, &status, 0);
	close(ready[0]);
	snprintf(lock, sizeof(lock), "%s/%s", sub, AGG_TUNE_CACHE_FILE);
	ok(access(lock, F_OK) && errno == ENOENT, "no cache was written");
	is_int(agg_tune_cache_store(sub, &e, &d), 0, "once it is released, the store goes through");
}

/* Writers in parallel processes: every entry of every writer survives. */
static void test_concurrent(const char *dir)
{
	enum { WRITERS = 6, EACH = 20 };
	struct agg_tune_cache c;
	struct agg_diag d;
	char sub[512];
	int failed = 0, found = 0;
	pid_t pid[WRITERS];

	snprintf(sub, sizeof(sub), "%s/shared", dir);
	for (int w = 0; w < WRITERS; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			for (int i = 0; i < EACH; i++) {
				struct agg_tune_entry e;

				make_entry(&e, 1000 * (w + 1) + i, 10, w + 1, i + 1);
				if (agg_tune_cache_store(sub, &e, &d))
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int w = 0; w < WRITERS; w++) {
		int status;

		failed += pid[w] < 0 || waitpid(pid[w], &status, 0) != pid[w] ||
			  !WIFEXITED(status) || WEXITSTATUS(status);
	}
	is_int(failed, 0, "%d writers of %d entries each, all stores succeed", WRITERS, EACH);
	if (!ok(!agg_tune_cache_load(sub, &c, &d), "the shared cache parses"))
		diag("%s", d.msg);
	for (int w = 0; w < WRITERS; w++)
		for (int i = 0; i < EACH; i++) {
			struct agg_tune_entry e;
			struct agg_tune_hit hit;

			make_entry(&e, 1000 * (w + 1) + i, 10, w + 1, i + 1);
			agg_tune_cache_lookup(&c, &e.fp, 0, &hit);
			found += hit.match == AGG_TUNE_EXACT && entry_eq(&hit.e, &e);
		}
	ok(c.n == WRITERS * EACH && found == WRITERS * EACH,
	   "no lost update: %zu entries, %d found exactly", c.n, found);
	agg_tune_cache_free(&c);
}

/*
 * A second run with the cache starts at the first run's best, and with a
 * budget of 12 trials does better than a cold start with the same budget.
 */
static void test_reuse(const char *dir)
{
	struct agg_tune_space s;
	struct agg_tune_opts o;
	struct agg_tune_entry e;
	struct agg_tune_hit hit;
	struct agg_tune_cache c;
	struct agg_diag d;
	struct run first, second, cold;
	char sub[512];
	int starts = 0, warm_ok = 0, cold_ok = 0;

	make_space(&s);
	snprintf(sub, sizeof(sub), "%s/reuse", dir);
	for (int seed = 1; seed <= 40; seed++) {
		agg_tune_opts_default(&o);
		o.seed = seed;
		tune(&s, &lands[1], &o, 0.03, 1000, &first);
		make_entry(&e, 8, 10 + seed, 0, 0);
		agg_tune_setting_values(&s, &first.best, &e.set);
		e.seconds = deceptive(e.set.v[0], e.set.v[1]);
		e.trials = first.trials;
		if (agg_tune_cache_store(sub, &e, &d))
			diag("%s", d.msg);

		agg_tune_cache_load(sub, &c, &d);
		agg_tune_cache_lookup(&c, &e.fp, 1, &hit);
		agg_tune_cache_free(&c);
		o.have_start = hit.match == AGG_TUNE_EXACT &&
			       agg_tune_space_find(&s, &hit.e.set, &o.start) == 2;
		o.seed = seed + 1000;
		o.max_trials = 12;
		tune(&s, &lands[1], &o, 0.03, 1000, &second);
		starts += o.have_start && agg_tune_setting_eq(&s, &second.first, &first.best);
		warm_ok += second.ratio <= 1.05;
		o.have_start = false;
		tune(&s, &lands[1], &o, 0.03, 1000, &cold);
		cold_ok += cold.ratio <= 1.05;
	}
	is_int(starts, 40, "second runs start at the cached best");
	ok(warm_ok >= 38 && warm_ok > cold_ok + 10, "deceptive, 12 trials: within 5%% from "
	   "the cache in %d of 40 runs, from a cold start in %d", warm_ok, cold_ok);
}

int main(void)
{
	char dir[] = "/tmp/agg-tune-XXXXXX";
	char cmd[64];

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	test_space();
	test_bandit();
	test_protocol();
	test_convergence();
	test_ensemble();
	test_credit();
	test_determinism();
	test_log(dir);
	test_fingerprint();
	test_cache(dir);
	test_malformed(dir);
	test_concurrent(dir);
	test_linear(dir);
	test_lock_bound(dir);
	test_reuse(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		diag("could not remove %s", dir);
	return done_testing();
}
