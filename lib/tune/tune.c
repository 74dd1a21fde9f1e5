// SPDX-License-Identifier: GPL-2.0-only
/*
 * The tuner (AIACC-Training Sec. VI): a bandit over search techniques, a
 * table of every setting's measurements, confirmation of new bests.  See
 * tune.h for the protocol and where we differ from the paper.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "tune.h"

/* ---- the search space ---------------------------------------------------- */

int agg_tune_space_add(struct agg_tune_space *s, const char *name,
		       const int64_t *v, int n)
{
	struct agg_tune_param *p;

	if (!agg_tune_name_ok(name, strlen(name)) || n < 1)
		return -EINVAL;
	for (int k = 0; k < s->n; k++)
		if (!strcmp(s->p[k].name, name))
			return -EINVAL;
	for (int j = 1; j < n; j++)
		if (v[j] <= v[j - 1])
			return -EINVAL;
	if (s->n == AGG_TUNE_MAX_PARAMS || n > AGG_TUNE_MAX_VALUES ||
	    agg_tune_space_points(s) * n > AGG_TUNE_MAX_POINTS)
		return -E2BIG;
	p = &s->p[s->n++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->n = n;
	memcpy(p->v, v, n * sizeof(*v));
	return 0;
}

int agg_tune_space_add_pow2(struct agg_tune_space *s, const char *name,
			    int64_t lo, int64_t hi)
{
	int64_t v[AGG_TUNE_MAX_VALUES];
	int n = 0;

	if (lo < 1 || hi < lo || (lo & (lo - 1)) || (hi & (hi - 1)))
		return -EINVAL;
	for (int64_t x = lo; ; x *= 2) {
		if (n == AGG_TUNE_MAX_VALUES)
			return -E2BIG;
		v[n++] = x;
		if (x == hi)
			break;
	}
	return agg_tune_space_add(s, name, v, n);
}

size_t agg_tune_space_points(const struct agg_tune_space *s)
{
	size_t n = 1;

	for (int k = 0; k < s->n; k++)
		n *= s->p[k].n;
	return n;
}

int64_t agg_tune_value(const struct agg_tune_space *s,
		       const struct agg_tune_setting *x, int param)
{
	return s->p[param].v[x->i[param]];
}

bool agg_tune_setting_eq(const struct agg_tune_space *s,
			 const struct agg_tune_setting *a,
			 const struct agg_tune_setting *b)
{
	for (int k = 0; k < s->n; k++)
		if (a->i[k] != b->i[k])
			return false;
	return true;
}

void agg_tune_setting_values(const struct agg_tune_space *s,
			     const struct agg_tune_setting *x,
			     struct agg_tune_values *out)
{
	memset(out, 0, sizeof(*out));
	out->n = s->n;
	for (int k = 0; k < s->n; k++) {
		memcpy(out->name[k], s->p[k].name, AGG_TUNE_NAME_MAX);
		out->v[k] = agg_tune_value(s, x, k);
	}
}

/* How far apart two values of a parameter are: in log2 when both are > 0. */
static double value_gap(int64_t a, int64_t b)
{
	if (a > 0 && b > 0)
		return fabs(log2((double)a) - log2((double)b));
	return fabs((double)a - (double)b);
}

int agg_tune_space_find(const struct agg_tune_space *s,
			const struct agg_tune_values *v,
			struct agg_tune_setting *x)
{
	int found = 0;

	memset(x, 0, sizeof(*x));
	for (int k = 0; k < s->n; k++) {
		const struct agg_tune_param *p = &s->p[k];
		int j = 0;

		while (j < v->n && strcmp(v->name[j], p->name))
			j++;
		if (j == v->n) {
			x->i[k] = (p->n - 1) / 2;
			continue;
		}
		found++;
		for (int i = 1; i < p->n; i++)
			if (value_gap(p->v[i], v->v[j]) < value_gap(p->v[x->i[k]], v->v[j]))
				x->i[k] = i;
	}
	return found;
}

bool agg_tune_space_exact(const struct agg_tune_space *s,
			  const struct agg_tune_values *v,
			  const struct agg_tune_setting *x)
{
	if (v->n != s->n)
		return false;
	for (int k = 0; k < s->n; k++) {
		int j = 0;

		while (j < v->n && strcmp(v->name[j], s->p[k].name))
			j++;
		if (j == v->n || v->v[j] != agg_tune_value(s, x, k))
			return false;
	}
	return true;
}

int agg_tune_setting_format(const struct agg_tune_space *s,
			    const struct agg_tune_setting *x, char *buf, size_t len)
{
	int n = 0;

	if (len)
		buf[0] = '\0';
	for (int k = 0; k < s->n; k++) {
		int w = snprintf(buf + (n < (int)len ? n : (int)len),
				 (size_t)n < len ? len - n : 0, "%s%s=%" PRId64,
				 k ? " " : "", s->p[k].name, agg_tune_value(s, x, k));

		if (w < 0)
			return w;
		n += w;
	}
	return n;
}

/* ---- the bandit ------------------------------------------------------------ */

void agg_tune_bandit_init(struct agg_tune_bandit *b, int window, double c)
{
	memset(b, 0, sizeof(*b));
	b->window = window < 1 ? 1 : window > AGG_TUNE_MAX_WINDOW ? AGG_TUNE_MAX_WINDOW : window;
	b->c = c;
}

/* The i-th use in the window, oldest first. */
#define BANDIT_AT(b, i)	((b)->h[((b)->head + (i)) % (b)->window])

void agg_tune_bandit_record(struct agg_tune_bandit *b, int arm, int trial)
{
	int slot = (b->head + b->len) % b->window;

	if (b->len == b->window) {
		b->head = (b->head + 1) % b->window;	/* the oldest leaves */
		b->len--;
	}
	b->h[slot].arm = arm;
	b->h[slot].win = false;
	b->h[slot].trial = trial;
	b->len++;
}

bool agg_tune_bandit_credit(struct agg_tune_bandit *b, int trial)
{
	for (int i = 0; i < b->len; i++)
		if (BANDIT_AT(b, i).trial == trial) {
			BANDIT_AT(b, i).win = true;
			return true;
		}
	return false;
}

int agg_tune_bandit_uses(const struct agg_tune_bandit *b, int arm)
{
	int n = 0;

	for (int i = 0; i < b->len; i++)
		n += BANDIT_AT(b, i).arm == arm;
	return n;
}

double agg_tune_bandit_auc(const struct agg_tune_bandit *b, int arm)
{
	double area = 0;
	int pos = 0;

	/* OpenTuner's curve: the pos-th use, when it found a new best, adds pos. */
	for (int i = 0; i < b->len; i++) {
		if (BANDIT_AT(b, i).arm != arm)
			continue;
		pos++;
		if (BANDIT_AT(b, i).win)
			area += pos;
	}
	return pos ? area * 2.0 / (pos * (pos + 1.0)) : 0.0;
}

double agg_tune_bandit_score(const struct agg_tune_bandit *b, int arm)
{
	int uses = agg_tune_bandit_uses(b, arm);

	if (!uses)
		return INFINITY;
	return agg_tune_bandit_auc(b, arm) + b->c * sqrt(2.0 * log2(b->len) / uses);
}

int agg_tune_bandit_choose(const struct agg_tune_bandit *b, unsigned mask,
			   struct agg_rand *r, double *score)
{
	double top = -INFINITY;
	int arm = -1, ties = 0;

	for (int a = 0; a < 32; a++) {
		double sc;

		if (!(mask & (1u << a)))
			continue;
		sc = agg_tune_bandit_score(b, a);
		if (sc > top) {
			top = sc;
			arm = a;
			ties = 1;
		} else if (sc == top && agg_rand_below(r, ++ties) == 0) {
			arm = a;	/* reservoir: each tied arm equally likely */
		}
	}
	if (score)
		*score = top;
	return arm;
}

/* ---- the tuner's state ------------------------------------------------------ */

/* A setting's measurements: the last AGG_TUNE_MAX_REPEATS, in a ring. */
struct point {
	int n;			/* measurements, all told */
	double s[AGG_TUNE_MAX_REPEATS];
	double med;		/* their median; NAN before the first */
	enum agg_tune_tech found_by;
	int found_trial;
};

/* A point in the continuous index space of the active parameters. */
typedef double vec[AGG_TUNE_MAX_PARAMS];

enum nm_phase { NM_BUILD, NM_VERTICES, NM_REFLECT, NM_EXPAND, NM_CONTRACT, NM_SHRINK };

struct nelder_mead {
	enum nm_phase phase;
	vec v[AGG_TUNE_MAX_PARAMS + 1];	/* the simplex, best first after a sort */
	double f[AGG_TUNE_MAX_PARAMS + 1];
	vec c, xr;			/* centroid and reflected point */
	double fr;
	bool inside;			/* contract toward the worst vertex */
};

#define DE_MAX_POP	(AGG_TUNE_MAX_PARAMS + 4)

struct diff_evol {
	bool init;
	int np, target;
	vec y[DE_MAX_POP];
	bool have_trial;
	vec trial;
};

struct agg_tune {
	struct agg_tune_space s;
	struct agg_tune_opts o;
	struct agg_rand r;
	size_t npoints, measured;
	size_t stride[AGG_TUNE_MAX_PARAMS];
	int d, dim[AGG_TUNE_MAX_PARAMS];	/* the parameters with > 1 value */
	struct point *pt;
	int trials;
	bool pending;
	struct agg_tune_setting px;
	enum agg_tune_tech ptech;
	double pscore;
	long best, cand;		/* point indices, or -1 */
	int last_best_trial;
	struct agg_tune_bandit b;
	int uses[AGG_TUNE_NTECH];
	struct agg_tune_event *ev;
	size_t nev;
	struct nelder_mead nm;
	struct diff_evol de;
};

static const char *const tech_names[AGG_TUNE_NTECH] = {
	[AGG_TUNE_START] = "start",
	[AGG_TUNE_CONFIRM] = "confirm",
	[AGG_TUNE_BEST] = "best",
	[AGG_TUNE_RANDOM] = "random",
	[AGG_TUNE_HILL] = "hill",
	[AGG_TUNE_NELDER_MEAD] = "nelder-mead",
	[AGG_TUNE_DE] = "de",
};

const char *agg_tune_tech_name(enum agg_tune_tech t)
{
	return (unsigned)t < AGG_TUNE_NTECH ? tech_names[t] : "?";
}

void agg_tune_opts_default(struct agg_tune_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->max_trials = 50;
	o->window = 20;
	o->c = 0.2;
	o->repeats = 2;
	o->patience = 25;
	o->min_gain = 0.01;
	o->arms = AGG_TUNE_ALL_ARMS;
}

static size_t index_of(const struct agg_tune *t, const struct agg_tune_setting *x)
{
	size_t idx = 0;

	for (int k = 0; k < t->s.n; k++)
		idx += x->i[k] * t->stride[k];
	return idx;
}

static void setting_of(const struct agg_tune *t, size_t idx, struct agg_tune_setting *x)
{
	memset(x, 0, sizeof(*x));
	for (int k = 0; k < t->s.n; k++)
		x->i[k] = idx / t->stride[k] % t->s.p[k].n;
}

/* The grid setting nearest to y (rounded, clamped); inactive parameters 0. */
static void setting_at(const struct agg_tune *t, const vec y, struct agg_tune_setting *x)
{
	memset(x, 0, sizeof(*x));
	for (int j = 0; j < t->d; j++) {
		int k = t->dim[j];
		long i = lround(y[j]);

		x->i[k] = i < 0 ? 0 : i >= t->s.p[k].n ? t->s.p[k].n - 1 : (int)i;
	}
}

static void vec_of(const struct agg_tune *t, const struct agg_tune_setting *x, vec y)
{
	for (int j = 0; j < t->d; j++)
		y[j] = x->i[t->dim[j]];
}

static void clamp(const struct agg_tune *t, vec y)
{
	for (int j = 0; j < t->d; j++)
		y[j] = fmin(fmax(y[j], 0), t->s.p[t->dim[j]].n - 1);
}

static bool measured_at(const struct agg_tune *t, const vec y, double *f)
{
	struct agg_tune_setting x;
	const struct point *p;

	setting_at(t, y, &x);
	p = &t->pt[index_of(t, &x)];
	if (f)
		*f = p->med;
	return p->n > 0;
}

static double median(const struct point *p)
{
	double a[AGG_TUNE_MAX_REPEATS];
	int n = p->n < AGG_TUNE_MAX_REPEATS ? p->n : AGG_TUNE_MAX_REPEATS;

	memcpy(a, p->s, n * sizeof(*a));
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
			double tmp = a[j];

			a[j] = a[j - 1];
			a[j - 1] = tmp;
		}
	return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

/* The start, or the middle of every range. */
static void start_setting(const struct agg_tune *t, struct agg_tune_setting *x)
{
	if (t->o.have_start) {
		*x = t->o.start;
		return;
	}
	memset(x, 0, sizeof(*x));
	for (int k = 0; k < t->s.n; k++)
		x->i[k] = (t->s.p[k].n - 1) / 2;
}

/* Where the techniques search from: the best, else the start. */
static void centre(const struct agg_tune *t, struct agg_tune_setting *x)
{
	if (t->best >= 0)
		setting_of(t, t->best, x);
	else
		start_setting(t, x);
}

/*
 * The unmeasured setting nearest to x: by Chebyshev distance on the index
 * grid, then by Manhattan (the axis neighbours before the diagonal ones),
 * ties at random.  False when every setting is measured.
 */
static bool nearest_unmeasured(struct agg_tune *t, const struct agg_tune_setting *x,
			       struct agg_tune_setting *out)
{
	long top = -1;
	int ties = 0;

	for (size_t idx = 0; idx < t->npoints; idx++) {
		struct agg_tune_setting y;
		long cheb = 0, manh = 0, dist;

		if (t->pt[idx].n)
			continue;
		setting_of(t, idx, &y);
		for (int k = 0; k < t->s.n; k++) {
			long dk = labs((long)y.i[k] - x->i[k]);

			cheb = dk > cheb ? dk : cheb;
			manh += dk;
		}
		dist = cheb * 4 * AGG_TUNE_MAX_PARAMS * AGG_TUNE_MAX_VALUES + manh;
		if (top < 0 || dist < top) {
			top = dist;
			ties = 1;
			*out = y;
		} else if (dist == top && agg_rand_below(&t->r, ++ties) == 0) {
			*out = y;
		}
	}
	return top >= 0;
}

/* ---- the techniques ---------------------------------------------------------- */
/*
 * Each proposes a setting; one that wants a measured setting is answered
 * from the table and goes on, so each returns true with an unmeasured
 * setting in *x, or false with the setting it wanted last (the caller then
 * measures the untried setting nearest to it).
 */

/* Squared distance from x to the nearest measured setting, in ranges. */
static double gap_to_measured(const struct agg_tune *t, const struct agg_tune_setting *x)
{
	double top = INFINITY;

	for (size_t idx = 0; idx < t->npoints; idx++) {
		struct agg_tune_setting y;
		double d2 = 0;

		if (!t->pt[idx].n)
			continue;
		setting_of(t, idx, &y);
		for (int j = 0; j < t->d; j++) {
			int k = t->dim[j];
			double g = (double)(x->i[k] - y.i[k]) / (t->s.p[k].n - 1);

			d2 += g * g;
		}
		top = fmin(top, d2);
	}
	return top;
}

/*
 * Random search, space-filling: of RANDOM_DRAWS uniform untried settings,
 * the one farthest from every measured setting (Mitchell's best
 * candidate), so that a few draws cover the space rather than clump.
 */
#define RANDOM_DRAWS	4

static bool tech_random(struct agg_tune *t, struct agg_tune_setting *x)
{
	double far = -1;
	bool found = false;

	for (int tries = 0, draws = 0; tries < 64 && draws < RANDOM_DRAWS; tries++) {
		struct agg_tune_setting y;
		double g;

		setting_of(t, agg_rand_below(&t->r, t->npoints), &y);
		if (t->pt[index_of(t, &y)].n)
			continue;
		draws++;
		g = gap_to_measured(t, &y);
		if (g > far) {
			far = g;
			*x = y;
			found = true;
		}
	}
	return found;
}

/* Hill climbing: the nearest untried neighbour of the best, widening. */
static bool tech_hill(struct agg_tune *t, struct agg_tune_setting *x)
{
	centre(t, x);
	return false;
}

/* A simplex of the centre and one step along each active axis, the steps
 * random in 1..range/2, away from the nearer edge. */
static void nm_build(struct agg_tune *t)
{
	struct nelder_mead *nm = &t->nm;
	struct agg_tune_setting x;

	centre(t, &x);
	for (int k = 0; k <= t->d; k++)
		vec_of(t, &x, nm->v[k]);
	for (int j = 0; j < t->d; j++) {
		int n = t->s.p[t->dim[j]].n;
		int step = 1 + (int)agg_rand_below(&t->r, n / 2 > 1 ? n / 2 : 1);
		double at = nm->v[0][j];

		nm->v[j + 1][j] = at + step <= n - 1 && (at - step < 0 || agg_rand_below(&t->r, 2)) ?
			at + step : at - step;
	}
	for (int k = 0; k <= t->d; k++)
		clamp(t, nm->v[k]);
	nm->phase = NM_VERTICES;
}

/* Every pair of vertices on distinct settings: the simplex still spans. */
static bool nm_spans(const struct agg_tune *t)
{
	struct agg_tune_setting a, b;

	for (int k = 0; k <= t->d; k++)
		for (int l = k + 1; l <= t->d; l++) {
			setting_at(t, t->nm.v[k], &a);
			setting_at(t, t->nm.v[l], &b);
			if (agg_tune_setting_eq(&t->s, &a, &b))
				return false;
		}
	return true;
}

static void nm_sort(struct agg_tune *t)
{
	struct nelder_mead *nm = &t->nm;

	for (int k = 0; k <= t->d; k++)
		measured_at(t, nm->v[k], &nm->f[k]);
	for (int i = 1; i <= t->d; i++)
		for (int j = i; j > 0 && nm->f[j - 1] > nm->f[j]; j--) {
			double f = nm->f[j];
			vec v;

			memcpy(v, nm->v[j], sizeof(vec));
			memcpy(nm->v[j], nm->v[j - 1], sizeof(vec));
			memcpy(nm->v[j - 1], v, sizeof(vec));
			nm->f[j] = nm->f[j - 1];
			nm->f[j - 1] = f;
		}
}

/* p = a + s (b - a), clamped to the grid. */
static void along(const struct agg_tune *t, const vec a, const vec b, double s, vec p)
{
	for (int j = 0; j < t->d; j++)
		p[j] = a[j] + s * (b[j] - a[j]);
	clamp(t, p);
}

/*
 * Nelder-Mead (reflection 1, expansion 2, contraction 1/2, shrink 1/2) on
 * the index grid, points rounded to the nearest setting.  The simplex is
 * rebuilt around the best when rounding has collapsed it.
 */
static bool tech_nelder_mead(struct agg_tune *t, struct agg_tune_setting *x)
{
	struct nelder_mead *nm = &t->nm;
	int w = t->d;		/* the worst vertex, after a sort */
	vec p;
	double f;

	centre(t, x);
	if (!t->d)
		return false;
	for (int step = 0; step < 64; step++) {
		switch (nm->phase) {
		case NM_BUILD:
			nm_build(t);
			break;
		case NM_VERTICES:
			for (int k = 0; k <= t->d; k++)
				if (!measured_at(t, nm->v[k], NULL)) {
					setting_at(t, nm->v[k], x);
					return true;
				}
			nm->phase = NM_REFLECT;
			break;
		case NM_REFLECT:
			nm_sort(t);
			if (!nm_spans(t)) {
				nm->phase = NM_BUILD;
				break;
			}
			for (int j = 0; j < t->d; j++) {
				nm->c[j] = 0;
				for (int k = 0; k < t->d; k++)
					nm->c[j] += nm->v[k][j] / t->d;
			}
			along(t, nm->c, nm->v[w], -1, nm->xr);
			if (!measured_at(t, nm->xr, &nm->fr)) {
				setting_at(t, nm->xr, x);
				return true;
			}
			if (nm->fr < nm->f[0]) {
				nm->phase = NM_EXPAND;
			} else if (nm->fr < nm->f[w - 1]) {
				memcpy(nm->v[w], nm->xr, sizeof(vec));
			} else {
				nm->inside = nm->fr >= nm->f[w];
				nm->phase = NM_CONTRACT;
			}
			break;
		case NM_EXPAND:
			along(t, nm->c, nm->xr, 2, p);
			if (!measured_at(t, p, &f)) {
				setting_at(t, p, x);
				return true;
			}
			memcpy(nm->v[w], f < nm->fr ? p : nm->xr, sizeof(vec));
			nm->phase = NM_REFLECT;
			break;
		case NM_CONTRACT:
			along(t, nm->c, nm->inside ? nm->v[w] : nm->xr, 0.5, p);
			if (!measured_at(t, p, &f)) {
				setting_at(t, p, x);
				return true;
			}
			if (nm->inside ? f < nm->f[w] : f <= nm->fr) {
				memcpy(nm->v[w], p, sizeof(vec));
				nm->phase = NM_REFLECT;
			} else {
				nm->phase = NM_SHRINK;
			}
			break;
		case NM_SHRINK:
			for (int k = 1; k <= t->d; k++)
				along(t, nm->v[0], nm->v[k], 0.5, nm->v[k]);
			nm->phase = NM_VERTICES;
			break;
		}
	}
	nm->phase = NM_BUILD;	/* stalled on measured points: start afresh */
	setting_at(t, nm->xr, x);
	return false;
}

static void random_vec(struct agg_tune *t, vec y)
{
	for (int j = 0; j < t->d; j++)
		y[j] = agg_rand_below(&t->r, t->s.p[t->dim[j]].n);
}

static double value_or_inf(const struct agg_tune *t, const vec y)
{
	double f;

	return measured_at(t, y, &f) ? f : INFINITY;
}

/*
 * Differential evolution, DE/rand/1/bin (Storn and Price 1997): F dithered
 * in [0.5, 1), CR 0.9; a population of d + 4 from the centre and random
 * settings, the best setting put in place of the worst member when it is
 * not in the population (the other techniques' finds are shared).
 */
static bool tech_de(struct agg_tune *t, struct agg_tune_setting *x)
{
	struct diff_evol *de = &t->de;
	struct agg_tune_setting b;

	centre(t, x);
	if (!t->d)
		return false;
	if (!de->init) {
		de->np = t->d + 4;
		vec_of(t, x, de->y[0]);
		for (int m = 1; m < de->np; m++)
			random_vec(t, de->y[m]);
		de->init = true;
	}
	if (t->best >= 0) {
		int worst = 0;
		bool in = false;

		setting_of(t, t->best, &b);
		for (int m = 0; m < de->np; m++) {
			struct agg_tune_setting y;

			setting_at(t, de->y[m], &y);
			in |= agg_tune_setting_eq(&t->s, &y, &b);
			if (value_or_inf(t, de->y[m]) > value_or_inf(t, de->y[worst]))
				worst = m;
		}
		if (!in)
			vec_of(t, &b, de->y[worst]);
	}
	for (int m = 0; m < de->np; m++)
		if (!measured_at(t, de->y[m], NULL)) {
			setting_at(t, de->y[m], x);
			return true;
		}
	for (int step = 0; step < 64; step++) {
		double *tgt = de->y[de->target];

		if (!de->have_trial) {
			int a, bb, c, jr = agg_rand_below(&t->r, t->d);
			double F = 0.5 + 0.5 * agg_rand_double(&t->r);

			do a = agg_rand_below(&t->r, de->np); while (a == de->target);
			do bb = agg_rand_below(&t->r, de->np); while (bb == de->target || bb == a);
			do c = agg_rand_below(&t->r, de->np);
			while (c == de->target || c == a || c == bb);
			for (int j = 0; j < t->d; j++)
				de->trial[j] = j == jr || agg_rand_double(&t->r) < 0.9 ?
					de->y[a][j] + F * (de->y[bb][j] - de->y[c][j]) : tgt[j];
			clamp(t, de->trial);
			de->have_trial = true;
		}
		if (!measured_at(t, de->trial, NULL)) {
			setting_at(t, de->trial, x);
			return true;
		}
		if (value_or_inf(t, de->trial) <= value_or_inf(t, tgt))
			memcpy(tgt, de->trial, sizeof(vec));
		de->have_trial = false;
		de->target = (de->target + 1) % de->np;
	}
	setting_at(t, de->trial, x);
	return false;
}

typedef bool (*tech_fn)(struct agg_tune *t, struct agg_tune_setting *x);

static const tech_fn techs[AGG_TUNE_NTECH] = {
	[AGG_TUNE_RANDOM] = tech_random,
	[AGG_TUNE_HILL] = tech_hill,
	[AGG_TUNE_NELDER_MEAD] = tech_nelder_mead,
	[AGG_TUNE_DE] = tech_de,
};

/* ---- the tuner ------------------------------------------------------------------ */

int agg_tune_new(const struct agg_tune_space *s, const struct agg_tune_opts *o,
		 struct agg_tune **out)
{
	struct agg_tune *t;
	size_t stride = 1;

	*out = NULL;
	if (s->n < 1 || o->max_trials < 1 || o->repeats < 1 ||
	    o->repeats > AGG_TUNE_MAX_REPEATS || o->patience < 0 || !(o->c >= 0) ||
	    !(o->min_gain >= 0 && o->min_gain < 1) ||
	    !(o->arms & AGG_TUNE_ALL_ARMS) || (o->arms & ~AGG_TUNE_ALL_ARMS))
		return -EINVAL;
	for (int k = 0; o->have_start && k < s->n; k++)
		if (o->start.i[k] < 0 || o->start.i[k] >= s->p[k].n)
			return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = *s;
	t->o = *o;
	t->npoints = agg_tune_space_points(s);
	t->pt = calloc(t->npoints, sizeof(*t->pt));
	if (!t->pt) {
		free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->npoints; i++)
		t->pt[i].med = NAN;
	for (int k = s->n - 1; k >= 0; k--) {
		t->stride[k] = stride;
		stride *= s->p[k].n;
		if (s->p[k].n > 1)
			t->dim[t->d++] = k;
	}
	agg_rand_seed(&t->r, o->seed);
	agg_tune_bandit_init(&t->b, o->window, o->c);
	t->best = t->cand = -1;
	*out = t;
	return 0;
}

void agg_tune_free(struct agg_tune *t)
{
	if (!t)
		return;
	free(t->pt);
	free(t->ev);
	free(t);
}

bool agg_tune_converged(const struct agg_tune *t)
{
	if (t->trials >= t->o.max_trials)
		return true;
	if (t->best < 0 || t->cand >= 0)
		return false;
	return t->measured == t->npoints ||
	       (t->o.patience && t->trials - t->last_best_trial >= t->o.patience);
}

/* Past the budget without a confirmed best: the lowest median measured. */
static long best_or_lowest(const struct agg_tune *t)
{
	long top = t->best;

	for (size_t i = 0; top < 0 && i < t->npoints; i++)
		if (t->pt[i].n && (top < 0 || t->pt[i].med < t->pt[top].med))
			top = i;
	return top;
}

int agg_tune_next(struct agg_tune *t, struct agg_tune_setting *x,
		  enum agg_tune_tech *tech)
{
	if (!t->pending) {
		t->pscore = NAN;
		if (agg_tune_converged(t)) {
			t->best = best_or_lowest(t);
			t->cand = -1;
			t->ptech = AGG_TUNE_BEST;
			centre(t, &t->px);
		} else if (!t->trials) {
			t->ptech = AGG_TUNE_START;
			start_setting(t, &t->px);
		} else if (t->cand >= 0) {
			t->ptech = AGG_TUNE_CONFIRM;
			setting_of(t, t->cand, &t->px);
		} else {
			struct agg_tune_setting want;
			int arm = agg_tune_bandit_choose(&t->b, t->o.arms, &t->r, &t->pscore);

			/* Not converged: some setting is unmeasured. */
			if (!techs[arm](t, &want))
				nearest_unmeasured(t, &want, &t->px);
			else
				t->px = want;
			t->ptech = arm;
		}
		t->pending = true;
	}
	*x = t->px;
	if (tech)
		*tech = t->ptech;
	return 0;
}

static void add_sample(struct point *p, double seconds)
{
	p->s[p->n % AGG_TUNE_MAX_REPEATS] = seconds;
	p->n++;
	p->med = median(p);
}

int agg_tune_report(struct agg_tune *t, const struct agg_tune_setting *x,
		    double seconds)
{
	struct agg_tune_event *e;
	struct point *p;
	size_t idx;
	int err;

	if (!t->pending || !agg_tune_setting_eq(&t->s, x, &t->px) ||
	    !isfinite(seconds) || seconds <= 0)
		return -EINVAL;
	err = agg_grow((void **)&t->ev, t->nev + 1, sizeof(*t->ev));
	if (err)
		return err;
	idx = index_of(t, x);
	p = &t->pt[idx];
	t->measured += !p->n;
	add_sample(p, seconds);
	t->trials++;
	t->pending = false;
	e = &t->ev[t->nev++];
	memset(e, 0, sizeof(*e));
	e->trial = t->trials;
	e->tech = t->ptech;
	e->score = t->pscore;
	e->x = *x;
	e->seconds = seconds;
	if (t->ptech >= AGG_TUNE_FIRST_ARM) {
		agg_tune_bandit_record(&t->b, t->ptech, t->trials);
		t->uses[t->ptech]++;
	}
	if (t->ptech != AGG_TUNE_BEST && t->ptech != AGG_TUNE_CONFIRM && p->n == 1) {
		p->found_by = t->ptech;
		p->found_trial = t->trials;
		if (t->cand < 0 && (t->best < 0 ||
				    p->med < t->pt[t->best].med * (1 - t->o.min_gain)))
			t->cand = idx;
	}
	if (t->cand >= 0) {
		struct point *c = &t->pt[t->cand];

		if (t->best >= 0 && c->med >= t->pt[t->best].med * (1 - t->o.min_gain)) {
			t->cand = -1;		/* luck: not better after all */
		} else if (c->n >= t->o.repeats) {
			t->best = t->cand;
			t->cand = -1;
			t->last_best_trial = t->trials;
			e->new_best = true;
			e->found_by = c->found_by;
			e->found_trial = c->found_trial;
			if (c->found_by >= AGG_TUNE_FIRST_ARM)
				agg_tune_bandit_credit(&t->b, c->found_trial);
		}
	}
	e->median = p->med;
	e->samples = p->n;
	e->best = t->best >= 0 ? t->pt[t->best].med : NAN;
	return 0;
}

int agg_tune_best(const struct agg_tune *t, struct agg_tune_setting *x,
		  double *seconds)
{
	long b = t->best;

	if (b < 0 && agg_tune_converged(t))
		b = best_or_lowest(t);
	if (b < 0)
		return -ENOENT;
	setting_of(t, b, x);
	if (seconds)
		*seconds = t->pt[b].med;
	return 0;
}

int agg_tune_trials(const struct agg_tune *t)
{
	return t->trials;
}

int agg_tune_uses(const struct agg_tune *t, enum agg_tune_tech tech)
{
	return (unsigned)tech < AGG_TUNE_NTECH ? t->uses[tech] : 0;
}

size_t agg_tune_nevents(const struct agg_tune *t)
{
	return t->nev;
}

const struct agg_tune_event *agg_tune_event(const struct agg_tune *t, size_t i)
{
	return i < t->nev ? &t->ev[i] : NULL;
}

/* One field of an event, as text (" name value") or as a JSON member. */
struct ev_out {
	FILE *f;
	struct agg_jw *jw;	/* NULL: text */
};

static void ev_num(struct ev_out *o, const char *name, const char *tfmt, double v, bool integer)
{
	if (o->jw) {
		agg_jw_name(o->jw, name);
		if (isnan(v))
			agg_jw_null(o->jw);
		else if (integer)
			agg_jw_int(o->jw, (int64_t)v);
		else
			agg_jw_float(o->jw, v);
	} else if (tfmt) {
		if (isnan(v))
			fprintf(o->f, " %s -", name);
		else if (integer)
			fprintf(o->f, tfmt, name, (int64_t)v);
		else
			fprintf(o->f, tfmt, name, v);
	}
}

static void ev_str(struct ev_out *o, const char *name, const char *v)
{
	if (o->jw) {
		agg_jw_name(o->jw, name);
		if (v)
			agg_jw_string(o->jw, v);
		else
			agg_jw_null(o->jw);
	} else if (v) {
		fprintf(o->f, " %s %s", name, v);
	}
}

int agg_tune_fprint_event(FILE *f, bool json, const struct agg_tune *t,
			  const struct agg_tune_event *e)
{
	struct ev_out o = { .f = f, .jw = json ? agg_jw_new(f, false) : NULL };

	if (json && !o.jw)
		return -ENOMEM;
	if (o.jw)
		agg_jw_start_object(o.jw);
	if (o.jw) {
		agg_jw_name(o.jw, "trial");
		agg_jw_int(o.jw, e->trial);
	} else {
		fprintf(f, "trial %d", e->trial);
	}
	ev_str(&o, "technique", agg_tune_tech_name(e->tech));
	ev_num(&o, "score", " %s %.3g", e->score, false);
	if (o.jw) {
		agg_jw_name(o.jw, "setting");
		agg_jw_start_object(o.jw);
	}
	for (int k = 0; k < t->s.n; k++) {
		int64_t v = agg_tune_value(&t->s, &e->x, k);

		if (o.jw) {
			agg_jw_name(o.jw, t->s.p[k].name);
			agg_jw_int(o.jw, v);
		} else {
			fprintf(f, " %s=%" PRId64, t->s.p[k].name, v);
		}
	}
	if (o.jw)
		agg_jw_end_object(o.jw);
	ev_num(&o, "seconds", " %s %.6g", e->seconds, false);
	ev_num(&o, "median", " %s %.6g", e->median, false);
	ev_num(&o, "samples", " %s %" PRId64, e->samples, true);
	ev_num(&o, "best", " %s %.6g", e->best, false);
	if (o.jw) {
		agg_jw_name(o.jw, "new_best");
		agg_jw_bool(o.jw, e->new_best);
	} else {
		fprintf(f, " new_best %s", e->new_best ? "yes" : "no");
	}
	ev_str(&o, "found_by", e->new_best ? agg_tune_tech_name(e->found_by) : NULL);
	ev_num(&o, "found_trial", e->new_best ? " %s %" PRId64 : NULL,
	       e->new_best ? e->found_trial : NAN, true);
	if (o.jw) {
		agg_jw_end_object(o.jw);
		agg_jw_free(o.jw);	/* its newline: one object a line */
	} else {
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

int agg_tune_mode_parse(const char *s, enum agg_tune_mode *mode)
{
	static const char *const names[] = { "off", "on", "reuse" };

	for (int m = 0; m < 3; m++)
		if (!strcmp(s, names[m])) {
			*mode = m;
			return 0;
		}
	return -EINVAL;
}

const char *agg_tune_mode_name(enum agg_tune_mode mode)
{
	return mode == AGG_TUNE_OFF ? "off" : mode == AGG_TUNE_ON ? "on" :
	       mode == AGG_TUNE_REUSE ? "reuse" : "?";
}
