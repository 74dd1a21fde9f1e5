/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_TUNE_H
#define AGG_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rand.h"
#include "text.h"	/* struct agg_diag */

/*
 * Auto-tuning of communication parameters (AIACC-Training Sec. VI): during
 * the first iterations of a run, a tuner proposes a setting (say streams=4
 * unit=1048576), the caller runs one iteration with it and reports the
 * time, and so on; the warm-up iterations train the model all the same.
 *
 * As in the paper, a multi-armed bandit (the meta-solver) picks, for every
 * trial, one of several search techniques, crediting each by the area under
 * the curve of its recent new global bests over a sliding window, plus an
 * exploration term: argmax_t AUC_t + C sqrt(2 lg|H| / H_t).  The AUC is
 * OpenTuner's (Ansel et al., PACT 2014, the paper's [28]): a technique's
 * uses in the window are numbered 1..H_t, a use that found a new best adds
 * its number, and the sum is divided by H_t (H_t + 1) / 2, so 1 means every
 * use found a new best and recent finds weigh more than old ones.
 *
 * Where we differ from the paper:
 *  - techniques: random (space-filling: the farthest from the measured
 *    settings of a few uniform draws), hill climbing over the nearest
 *    untried neighbours of the best, Nelder-Mead and differential evolution
 *    on the index grid (after OpenTuner's ensemble), not grid search, PBT,
 *    Bayesian optimisation and
 *    Hyperband: the space is two or three small ordered parameters and the
 *    budget 50 iterations, too few for PBT or Hyperband to pay off;
 *  - noise: an iteration's time is noisy, and the best of many single
 *    measurements is mostly luck (the winner's curse).  A setting whose
 *    first measurement beats the best by opts.min_gain is measured again
 *    ("confirm" trials) until it has opts.repeats measurements; it becomes
 *    the best only if the median of them still does.  Credit goes to the
 *    technique that proposed it, when it is confirmed;
 *  - a setting is measured once by a technique: a technique that asks for
 *    a measured setting is answered from the table of medians without
 *    spending a trial (Nelder-Mead and DE revisit points often), and one
 *    that insists gets the untried setting nearest to it;
 *  - the cache (tunecache.c) keys settings by a feature vector of the plan
 *    and workload and a normalised distance, not by graph edit distance
 *    between computation graphs and topologies.
 */

#define AGG_TUNE_MAX_PARAMS	4
#define AGG_TUNE_MAX_VALUES	32
#define AGG_TUNE_MAX_POINTS	4096	/* settings in a space */
#define AGG_TUNE_NAME_MAX	24	/* parameter and feature names, with NUL */
#define AGG_TUNE_MAX_REPEATS	8	/* measurements kept per setting */
#define AGG_TUNE_MAX_WINDOW	256

/* ---- the search space ---------------------------------------------------- */

/* The len bytes at s name a parameter or feature: [a-z][a-z0-9_]*, < 24. */
bool agg_tune_name_ok(const char *s, size_t len);

/* A parameter: a name and its values, strictly ascending. */
struct agg_tune_param {
	char name[AGG_TUNE_NAME_MAX];
	int n;
	int64_t v[AGG_TUNE_MAX_VALUES];
};

struct agg_tune_space {
	int n;
	struct agg_tune_param p[AGG_TUNE_MAX_PARAMS];
};

/* A setting: an index into each parameter's values. */
struct agg_tune_setting {
	int i[AGG_TUNE_MAX_PARAMS];
};

/* A setting by name and value, as the cache stores it. */
struct agg_tune_values {
	int n;
	char name[AGG_TUNE_MAX_PARAMS][AGG_TUNE_NAME_MAX];
	int64_t v[AGG_TUNE_MAX_PARAMS];
};

/* Add a parameter: -EINVAL (bad name, duplicate, values not ascending),
 * -E2BIG (too many parameters, values or settings). */
int agg_tune_space_add(struct agg_tune_space *s, const char *name,
		       const int64_t *v, int n);
/* The powers of two from lo to hi (both powers of two, 1 <= lo <= hi). */
int agg_tune_space_add_pow2(struct agg_tune_space *s, const char *name,
			    int64_t lo, int64_t hi);
size_t agg_tune_space_points(const struct agg_tune_space *s);
int64_t agg_tune_value(const struct agg_tune_space *s,
		       const struct agg_tune_setting *x, int param);
bool agg_tune_setting_eq(const struct agg_tune_space *s,
			 const struct agg_tune_setting *a,
			 const struct agg_tune_setting *b);
void agg_tune_setting_values(const struct agg_tune_space *s,
			     const struct agg_tune_setting *x,
			     struct agg_tune_values *out);
/*
 * The setting nearest to v: each parameter of s takes the value of v's
 * parameter of that name nearest in log2 (values <= 0: nearest outright),
 * the lower of two; a parameter v lacks takes its middle value.  Returns
 * the number of parameters of s found in v.
 */
int agg_tune_space_find(const struct agg_tune_space *s,
			const struct agg_tune_values *v,
			struct agg_tune_setting *x);
/* Is v exactly the point x of s: s's parameters and no others, each with
 * x's value (so on s's grid)?  What a cached setting must be to be used
 * as it is rather than only to start a search. */
bool agg_tune_space_exact(const struct agg_tune_space *s,
			  const struct agg_tune_values *v,
			  const struct agg_tune_setting *x);
/* "streams=4 unit=1048576" into buf; snprintf's return. */
int agg_tune_setting_format(const struct agg_tune_space *s,
			    const struct agg_tune_setting *x, char *buf, size_t len);

/* ---- the tuner ------------------------------------------------------------- */

enum agg_tune_tech {
	AGG_TUNE_START,		/* trial 1: the start setting */
	AGG_TUNE_CONFIRM,	/* a candidate new best measured again */
	AGG_TUNE_BEST,		/* converged: the best setting, from now on */
	AGG_TUNE_RANDOM,	/* the bandit's arms from here on */
	AGG_TUNE_HILL,
	AGG_TUNE_NELDER_MEAD,
	AGG_TUNE_DE,
	AGG_TUNE_NTECH,
};
#define AGG_TUNE_FIRST_ARM	AGG_TUNE_RANDOM
#define AGG_TUNE_ARM(t)		(1u << (t))
#define AGG_TUNE_ALL_ARMS	(AGG_TUNE_ARM(AGG_TUNE_RANDOM) | AGG_TUNE_ARM(AGG_TUNE_HILL) | \
				 AGG_TUNE_ARM(AGG_TUNE_NELDER_MEAD) | AGG_TUNE_ARM(AGG_TUNE_DE))

/* "start", "confirm", "best", "random", "hill", "nelder-mead", "de" */
const char *agg_tune_tech_name(enum agg_tune_tech t);

struct agg_tune_opts {
	uint64_t seed;
	int max_trials;		/* the budget, AIACC's n: 50 */
	int window;		/* the bandit's sliding window |H| in trials: 20 */
	double c;		/* the exploration constant C: 0.2 (AIACC's) */
	int repeats;		/* measurements to confirm a new best: 2 */
	int patience;		/* converged after this many trials without a
				 * new best: 25; 0: only the budget ends it */
	double min_gain;	/* a new best is faster by this fraction: 0.01 */
	unsigned arms;		/* AGG_TUNE_ARM() mask the bandit picks from */
	bool have_start;	/* start at .start, else the middle of each range */
	struct agg_tune_setting start;
};

void agg_tune_opts_default(struct agg_tune_opts *o);

/* One trial: what was decided, why, and what it measured. */
struct agg_tune_event {
	int trial;		/* 1, 2, ... */
	enum agg_tune_tech tech;
	double score;		/* the bandit's score of tech; NAN: not its choice */
	struct agg_tune_setting x;
	double seconds;		/* measured */
	double median;		/* of x's measurements so far */
	int samples;		/* x's measurements so far */
	double best;		/* the best median after this trial; NAN: none yet */
	bool new_best;		/* x became the best with this trial */
	enum agg_tune_tech found_by;	/* new_best: the technique credited */
	int found_trial;		/* new_best: the trial that first measured x */
};

struct agg_tune;

int agg_tune_new(const struct agg_tune_space *s, const struct agg_tune_opts *o,
		 struct agg_tune **out);
void agg_tune_free(struct agg_tune *t);

/*
 * The setting to measure next and who chose it.  Until it is reported,
 * agg_tune_next() proposes it again.  Once converged it is always the
 * best setting (AGG_TUNE_BEST), so a caller may keep asking.  0 or -ENOMEM.
 */
int agg_tune_next(struct agg_tune *t, struct agg_tune_setting *x,
		  enum agg_tune_tech *tech);
/*
 * The time of one iteration with the proposed setting x (> 0, finite):
 * 0, or -EINVAL when x is not the pending proposal or seconds is bad.
 */
int agg_tune_report(struct agg_tune *t, const struct agg_tune_setting *x,
		    double seconds);
/* The best confirmed setting and its median: 0, or -ENOENT before one. */
int agg_tune_best(const struct agg_tune *t, struct agg_tune_setting *x,
		  double *seconds);
/*
 * Converged: the search is over and the best setting is final.  That is
 * when max_trials trials were measured (a candidate still awaiting
 * confirmation is dropped; without a confirmed best, the lowest median
 * measured becomes the best), or when a best is confirmed, no candidate
 * awaits confirmation, and either the last patience trials found no new
 * best or every setting of the space has been measured.
 */
bool agg_tune_converged(const struct agg_tune *t);
int agg_tune_trials(const struct agg_tune *t);
/* Trials the bandit gave technique tech in total. */
int agg_tune_uses(const struct agg_tune *t, enum agg_tune_tech tech);

/* The log: one event per reported trial, in order. */
size_t agg_tune_nevents(const struct agg_tune *t);
const struct agg_tune_event *agg_tune_event(const struct agg_tune *t, size_t i);
/*
 * One event on f: a text line
 *   trial 7 technique hill score 0.41 streams=4 unit=1048576 seconds 0.0123
 *   median 0.0123 samples 1 best 0.0119 new_best no
 * (one line; "found_by hill found_trial 5" after "new_best yes"; a score
 * or best not known yet is "-"), or, with json, the same fields as one
 * JSON object on a line ("setting" an object of the parameters; nulls
 * where the text has none).  0, or -EIO (f's error flag), -ENOMEM.
 */
int agg_tune_fprint_event(FILE *f, bool json, const struct agg_tune *t,
			  const struct agg_tune_event *e);

/* ---- the bandit (AUC credit over a sliding window) ------------------------- */

struct agg_tune_bandit {
	int window;
	double c;
	int len, head;		/* a ring of the last len <= window uses */
	struct {
		uint8_t arm;
		bool win;	/* found a new best */
		int trial;
	} h[AGG_TUNE_MAX_WINDOW];
};

/* window is clamped to 1..AGG_TUNE_MAX_WINDOW. */
void agg_tune_bandit_init(struct agg_tune_bandit *b, int window, double c);
/* A use of arm (< 32) at trial; drops the oldest beyond the window. */
void agg_tune_bandit_record(struct agg_tune_bandit *b, int arm, int trial);
/* The use at trial found a new best: true, or false if it left the window. */
bool agg_tune_bandit_credit(struct agg_tune_bandit *b, int trial);
int agg_tune_bandit_uses(const struct agg_tune_bandit *b, int arm);
double agg_tune_bandit_auc(const struct agg_tune_bandit *b, int arm);
/* AUC + C sqrt(2 lg|H| / H_t); INFINITY for an arm unused in the window. */
double agg_tune_bandit_score(const struct agg_tune_bandit *b, int arm);
/* The arm of mask (not 0) with the highest score, ties at random. */
int agg_tune_bandit_choose(const struct agg_tune_bandit *b, unsigned mask,
			   struct agg_rand *r, double *score);

/* ---- the cache of best settings (tunecache.c, man 5 agg-tune) --------------- */

#define AGG_TUNE_FP_MAX		16
#define AGG_TUNE_CACHE_MAX	1024	/* entries; the oldest go first */
#define AGG_TUNE_CACHE_FILE	"tune.cache"
#define AGG_TUNE_LOCK_FILE	"tune.lock"

/*
 * A fingerprint of a plan and workload: a few named features (>= 0), e.g.
 * workers, depth, aggregators, bw_min and bw_max (Gbit/s), model_bytes;
 * the cache does not care which.  Two fingerprints are the same when their
 * features are, name for name, as printed with %.15g (the hash is SipHash
 * of that text under a fixed key).  Their distance, for fingerprints of
 * the same names, is the root mean square of the features' log2(1 + v)
 * differences: 1 is a factor of two in every feature.
 */
struct agg_tune_fp {
	int n;
	char name[AGG_TUNE_FP_MAX][AGG_TUNE_NAME_MAX];
	double v[AGG_TUNE_FP_MAX];
};

struct agg_tune_entry {
	struct agg_tune_fp fp;
	struct agg_tune_values set;	/* the best setting */
	double seconds;			/* its median time */
	int trials;			/* trials the tuning took */
};

struct agg_tune_cache {
	struct agg_tune_entry *e;	/* oldest first */
	size_t n;
};

enum agg_tune_match {
	AGG_TUNE_MISS,
	AGG_TUNE_EXACT,
	AGG_TUNE_NEAREST,
};

struct agg_tune_hit {
	enum agg_tune_match match;
	struct agg_tune_entry e;	/* EXACT, NEAREST: the entry */
	double distance;		/* 0 for EXACT */
};

/* Add a feature: -EINVAL (bad name, duplicate, v < 0 or not finite), -E2BIG. */
int agg_tune_fp_add(struct agg_tune_fp *fp, const char *name, double v);
uint64_t agg_tune_fp_hash(const struct agg_tune_fp *fp);
bool agg_tune_fp_eq(const struct agg_tune_fp *a, const struct agg_tune_fp *b);
/* Calls of agg_tune_fp_eq so far: for tests that the cache's work is
 * linear in its entries. */
extern unsigned long agg_tune_fp_eq_calls;
/* INFINITY when the two have not the same feature names. */
double agg_tune_fp_distance(const struct agg_tune_fp *a, const struct agg_tune_fp *b);

/* Parse a cache file: 0, -EINVAL (d: FILE:LINE:COL: why), -ENOMEM, -EIO. */
int agg_tune_cache_read(FILE *f, const char *fname, struct agg_tune_cache *c,
			struct agg_diag *d);
int agg_tune_cache_write(FILE *f, const struct agg_tune_cache *c);
void agg_tune_cache_free(struct agg_tune_cache *c);
/* Replace or append e's fingerprint's entry (it becomes the newest). */
int agg_tune_cache_put(struct agg_tune_cache *c, const struct agg_tune_entry *e);
/*
 * The entry of fp (EXACT), else the nearest of the same feature names
 * within max_distance (NEAREST; the older of two as near), else MISS.
 */
void agg_tune_cache_lookup(const struct agg_tune_cache *c, const struct agg_tune_fp *fp,
			   double max_distance, struct agg_tune_hit *hit);

/*
 * DIR/tune.cache: load (no file: an empty cache) and store (under an
 * exclusive flock of DIR/tune.lock: read, put, write a temporary file in
 * DIR and rename it over the cache; DIR is made if missing).  A malformed
 * cache file is left as it is: -EINVAL with d naming FILE:LINE:COL.  A
 * lock held by another process for AGG_TUNE_LOCK_WAIT seconds: -ETIMEDOUT,
 * d naming the lock file.  Other errors: -errno, d saying which file.
 */
#define AGG_TUNE_LOCK_WAIT	10
int agg_tune_cache_load(const char *dir, struct agg_tune_cache *c, struct agg_diag *d);
int agg_tune_cache_store(const char *dir, const struct agg_tune_entry *e,
			 struct agg_diag *d);

/* --tune off|on|reuse: 0 and *mode, or -EINVAL. */
enum agg_tune_mode {
	AGG_TUNE_OFF,		/* no tuning, no cache: the given setting */
	AGG_TUNE_ON,		/* tune, from the nearest cached setting; store */
	AGG_TUNE_REUSE,		/* an exact hit's setting without tuning; else as on */
};
int agg_tune_mode_parse(const char *s, enum agg_tune_mode *mode);
const char *agg_tune_mode_name(enum agg_tune_mode mode);

#endif
