// SPDX-License-Identifier: GPL-2.0-only
/*
 * The cache of tuned settings (man 5 agg-tune): the best setting per plan
 * fingerprint, so that a second run of a plan starts where the first
 * ended and a similar plan starts from the nearest one (AIACC-Training
 * Sec. VI, "stores the previously-found best parameter setting").
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opts.h"
#include "siphash.h"
#include "tune.h"

/* ---- fingerprints ---------------------------------------------------------- */

bool agg_tune_name_ok(const char *s, size_t len)
{
	if (!len || len >= AGG_TUNE_NAME_MAX || s[0] < 'a' || s[0] > 'z')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_'))
			return false;
	return true;
}

/* Kept sorted by name, so the order features are added in does not matter. */
int agg_tune_fp_add(struct agg_tune_fp *fp, const char *name, double v)
{
	int at = 0;

	if (!agg_tune_name_ok(name, strlen(name)) || !isfinite(v) || v < 0)
		return -EINVAL;
	while (at < fp->n && strcmp(fp->name[at], name) < 0)
		at++;
	if (at < fp->n && !strcmp(fp->name[at], name))
		return -EINVAL;
	if (fp->n == AGG_TUNE_FP_MAX)
		return -E2BIG;
	memmove(fp->name[at + 1], fp->name[at], (fp->n - at) * sizeof(fp->name[0]));
	memmove(&fp->v[at + 1], &fp->v[at], (fp->n - at) * sizeof(fp->v[0]));
	snprintf(fp->name[at], sizeof(fp->name[at]), "%s", name);
	fp->v[at] = v;
	fp->n++;
	return 0;
}

/* "name=%.15g ...": what the file says, what the hash covers, what equality is. */
static void fp_text(const struct agg_tune_fp *fp, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int k = 0; k < fp->n && n < len; k++)
		n += snprintf(buf + n, len - n, "%s%s=%.15g", k ? " " : "", fp->name[k], fp->v[k]);
}

#define FP_TEXT_MAX	(AGG_TUNE_FP_MAX * (AGG_TUNE_NAME_MAX + 32))

uint64_t agg_tune_fp_hash(const struct agg_tune_fp *fp)
{
	uint8_t key[AGG_SIPHASH_KEY_SIZE];
	char buf[FP_TEXT_MAX];

	agg_siphash_key(key, 0x6167672d74756e65ULL /* "agg-tune" */, 1);
	fp_text(fp, buf, sizeof(buf));
	return agg_siphash(key, buf, strlen(buf));
}

unsigned long agg_tune_fp_eq_calls;

bool agg_tune_fp_eq(const struct agg_tune_fp *a, const struct agg_tune_fp *b)
{
	char ta[FP_TEXT_MAX], tb[FP_TEXT_MAX];

	agg_tune_fp_eq_calls++;
	if (a->n != b->n)
		return false;
	fp_text(a, ta, sizeof(ta));
	fp_text(b, tb, sizeof(tb));
	return !strcmp(ta, tb);
}

double agg_tune_fp_distance(const struct agg_tune_fp *a, const struct agg_tune_fp *b)
{
	double sum = 0;

	if (a->n != b->n || !a->n)
		return INFINITY;
	for (int k = 0; k < a->n; k++) {
		double g = log2(1 + a->v[k]) - log2(1 + b->v[k]);

		if (strcmp(a->name[k], b->name[k]))
			return INFINITY;
		sum += g * g;
	}
	return sqrt(sum / a->n);
}

/* ---- the file --------------------------------------------------------------- */

/* NAME=VALUE: the name's length and the value's text, or false. */
static bool split_kv(const char *s, size_t *nlen, const char **val)
{
	const char *eq = strchr(s, '=');

	if (!eq || !eq[1])
		return false;
	*nlen = eq - s;
	*val = eq + 1;
	return true;
}

/* Where a word's part starts, for the column of an error inside it. */
#define AT(tok, p)	((tok).col + (int)((p) - (tok).s))

static int parse_entry(const struct agg_text_line *ln, const char *fname,
		       struct agg_tune_entry *e, struct agg_diag *d)
{
	enum { FEATURES, SETTING, RESULT } part = FEATURES;
	const struct agg_text_tok *tok = ln->tok;
	uint64_t hash;
	char *end;

	memset(e, 0, sizeof(*e));
	if (strcmp(tok[0].s, "fp")) {
		agg_diag_set(d, fname, ln->lineno, tok[0].col, "unknown word '%s' (want 'fp')",
			     tok[0].s);
		return -EINVAL;
	}
	if (ln->ntok < 2 || strlen(tok[1].s) != 16 ||
	    strspn(tok[1].s, "0123456789abcdef") != 16) {
		agg_diag_set(d, fname, ln->lineno, ln->ntok < 2 ? ln->end_col : tok[1].col,
			     "want the fingerprint's hash, 16 lower-case hex digits");
		return -EINVAL;
	}
	hash = strtoull(tok[1].s, NULL, 16);
	for (int w = 2; w < ln->ntok; w++) {
		const struct agg_text_tok *t = &tok[w];
		const char *val;
		size_t nlen;
		char name[AGG_TUNE_NAME_MAX];
		int err;

		if (!strcmp(t->s, "set") && part == FEATURES) {
			part = SETTING;
			continue;
		}
		if (!strcmp(t->s, "result") && part == SETTING) {
			part = RESULT;
			continue;
		}
		if (!split_kv(t->s, &nlen, &val) || !agg_tune_name_ok(t->s, nlen)) {
			agg_diag_set(d, fname, ln->lineno, t->col, "want NAME=VALUE, not '%s'", t->s);
			return -EINVAL;
		}
		memcpy(name, t->s, nlen);
		name[nlen] = '\0';
		errno = 0;
		if (part == FEATURES) {
			double v = strtod(val, &end);

			if (*end || errno || !isfinite(v) || v < 0) {
				agg_diag_set(d, fname, ln->lineno, AT(*t, val),
					     "bad value '%s' of feature %s (a number >= 0)", val, name);
				return -EINVAL;
			}
			err = agg_tune_fp_add(&e->fp, name, v);
			if (err == -E2BIG)
				agg_diag_set(d, fname, ln->lineno, t->col, "more than %d features",
					     AGG_TUNE_FP_MAX);
			else if (err)
				agg_diag_set(d, fname, ln->lineno, t->col,
					     "feature %s given twice", name);
			if (err)
				return -EINVAL;
		} else if (part == SETTING) {
			long long v = strtoll(val, &end, 10);
			struct agg_tune_values *s = &e->set;

			if (*end || errno) {
				agg_diag_set(d, fname, ln->lineno, AT(*t, val),
					     "bad value '%s' of %s (an integer)", val, name);
				return -EINVAL;
			}
			for (int k = 0; k < s->n; k++)
				if (!strcmp(s->name[k], name)) {
					agg_diag_set(d, fname, ln->lineno, t->col,
						     "%s given twice", name);
					return -EINVAL;
				}
			if (s->n == AGG_TUNE_MAX_PARAMS) {
				agg_diag_set(d, fname, ln->lineno, t->col,
					     "more than %d parameters", AGG_TUNE_MAX_PARAMS);
				return -EINVAL;
			}
			memcpy(s->name[s->n], name, nlen + 1);
			s->v[s->n++] = v;
		} else if (!strcmp(name, "seconds")) {
			e->seconds = strtod(val, &end);
			if (*end || errno || !isfinite(e->seconds) || e->seconds <= 0) {
				agg_diag_set(d, fname, ln->lineno, AT(*t, val),
					     "bad seconds '%s' (a number > 0)", val);
				return -EINVAL;
			}
		} else if (!strcmp(name, "trials")) {
			long v = strtol(val, &end, 10);

			if (*end || errno || v < 0 || v > INT_MAX) {
				agg_diag_set(d, fname, ln->lineno, AT(*t, val),
					     "bad trials '%s' (an integer >= 0)", val);
				return -EINVAL;
			}
			e->trials = v;
		}
		/* Other result fields: a later version's, skipped. */
	}
	if (!e->fp.n || part == FEATURES || !e->set.n || part != RESULT || !e->seconds) {
		agg_diag_set(d, fname, ln->lineno, ln->end_col, !e->fp.n ? "no features" :
			     part == FEATURES ? "no 'set' after the features" :
			     !e->set.n ? "no setting after 'set'" :
			     part != RESULT ? "no 'result' after the setting" :
			     "no seconds=S in the result");
		return -EINVAL;
	}
	if (hash != agg_tune_fp_hash(&e->fp)) {
		agg_diag_set(d, fname, ln->lineno, tok[1].col,
			     "hash %s is not the features' (%016" PRIx64 "): edited by hand?",
			     tok[1].s, agg_tune_fp_hash(&e->fp));
		return -EINVAL;
	}
	return 0;
}

void agg_tune_cache_free(struct agg_tune_cache *c)
{
	free(c->e);
	c->e = NULL;
	c->n = 0;
}

/*
 * The entries read so far by fingerprint hash (open addressing, entry
 * index + 1, 0 for none): a duplicate is found in one probe, not by
 * comparing each entry with every other (1024 of them took seconds).
 */
#define INDEX_SIZE	(2 * AGG_TUNE_CACHE_MAX)	/* a power of two */

/* fp's slot: its entry's, or the empty one where it goes. */
static size_t *index_slot(size_t *index, const struct agg_tune_cache *c,
			  const uint64_t *hashes, uint64_t hash, const struct agg_tune_fp *fp)
{
	size_t i = hash & (INDEX_SIZE - 1);

	while (index[i] && !(hashes[index[i] - 1] == hash &&
			     agg_tune_fp_eq(&c->e[index[i] - 1].fp, fp)))
		i = (i + 1) & (INDEX_SIZE - 1);
	return &index[i];
}

int agg_tune_cache_read(FILE *f, const char *fname, struct agg_tune_cache *c,
			struct agg_diag *d)
{
	struct agg_text tx;
	struct agg_text_line ln;
	int *lines = NULL;	/* each entry's line, for duplicates */
	uint64_t *hashes = NULL;
	size_t *index = calloc(INDEX_SIZE, sizeof(*index));
	bool header = false;
	int err;

	memset(c, 0, sizeof(*c));
	if (!index)
		return -ENOMEM;
	agg_text_init(&tx, f);
	while ((err = agg_text_next(&tx, &ln)) > 0) {
		struct agg_tune_entry e;
		uint64_t hash;
		size_t *slot;

		if (!ln.ntok)
			continue;
		if (!header) {
			if (strcmp(ln.tok[0].s, "tune")) {
				agg_diag_set(d, fname, ln.lineno, ln.tok[0].col,
					     "not a tune cache: want 'tune v1' first");
				err = -EINVAL;
				break;
			}
			if (ln.ntok < 2 || strcmp(ln.tok[1].s, "v1")) {
				agg_diag_set(d, fname, ln.lineno, ln.ntok < 2 ? ln.end_col : ln.tok[1].col,
					     "want version v1 (this agg reads v1 only)");
				err = -EINVAL;
				break;
			}
			header = true;
			continue;
		}
		err = parse_entry(&ln, fname, &e, d);
		if (err)
			break;
		/* parse_entry checked that the line's hash is the features' */
		hash = strtoull(ln.tok[1].s, NULL, 16);
		slot = index_slot(index, c, hashes, hash, &e.fp);
		if (*slot) {
			agg_diag_set(d, fname, ln.lineno, ln.tok[1].col,
				     "fingerprint %s also on line %d", ln.tok[1].s,
				     lines[*slot - 1]);
			err = -EINVAL;
			break;
		}
		if (c->n == AGG_TUNE_CACHE_MAX) {
			agg_diag_set(d, fname, ln.lineno, 1, "more than %d entries",
				     AGG_TUNE_CACHE_MAX);
			err = -EINVAL;
			break;
		}
		if ((err = agg_grow((void **)&c->e, c->n + 1, sizeof(*c->e))) ||
		    (err = agg_grow((void **)&lines, c->n + 1, sizeof(*lines))) ||
		    (err = agg_grow((void **)&hashes, c->n + 1, sizeof(*hashes))))
			break;
		lines[c->n] = ln.lineno;
		hashes[c->n] = hash;
		*slot = c->n + 1;
		c->e[c->n++] = e;
	}
	if (err == -E2BIG) {
		agg_diag_set(d, fname, tx.lineno, 1, "line longer than %d bytes", AGG_TEXT_LINE_MAX);
		err = -EINVAL;
	}
	agg_text_free(&tx);
	free(lines);
	free(hashes);
	free(index);
	if (err < 0)
		agg_tune_cache_free(c);
	return err < 0 ? err : 0;
}

int agg_tune_cache_write(FILE *f, const struct agg_tune_cache *c)
{
	char buf[FP_TEXT_MAX];

	fputs("# agg tune cache (man 5 agg-tune): the best setting per plan fingerprint\n"
	      "tune v1\n", f);
	for (size_t i = 0; i < c->n; i++) {
		const struct agg_tune_entry *e = &c->e[i];

		fp_text(&e->fp, buf, sizeof(buf));
		fprintf(f, "fp %016" PRIx64 " %s set", agg_tune_fp_hash(&e->fp), buf);
		for (int k = 0; k < e->set.n; k++)
			fprintf(f, " %s=%" PRId64, e->set.name[k], e->set.v[k]);
		fprintf(f, " result seconds=%.9g trials=%d\n", e->seconds, e->trials);
	}
	return fflush(f) || ferror(f) ? -EIO : 0;
}

int agg_tune_cache_put(struct agg_tune_cache *c, const struct agg_tune_entry *e)
{
	size_t i = 0;
	int err;

	if (!e->fp.n || !e->set.n || !isfinite(e->seconds) || e->seconds <= 0 || e->trials < 0)
		return -EINVAL;
	for (int k = 0; k < e->set.n; k++)
		if (!agg_tune_name_ok(e->set.name[k], strnlen(e->set.name[k], AGG_TUNE_NAME_MAX)))
			return -EINVAL;
	while (i < c->n && !agg_tune_fp_eq(&c->e[i].fp, &e->fp))
		i++;
	if (i == c->n && c->n == AGG_TUNE_CACHE_MAX)
		i = 0;			/* full: the oldest goes */
	if (i < c->n) {
		memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof(*c->e));
		c->n--;
	} else if ((err = agg_grow((void **)&c->e, c->n + 1, sizeof(*c->e)))) {
		return err;
	}
	c->e[c->n++] = *e;
	return 0;
}

void agg_tune_cache_lookup(const struct agg_tune_cache *c, const struct agg_tune_fp *fp,
			   double max_distance, struct agg_tune_hit *hit)
{
	memset(hit, 0, sizeof(*hit));
	hit->match = AGG_TUNE_MISS;
	hit->distance = INFINITY;
	for (size_t i = 0; i < c->n; i++) {
		double dist;

		if (agg_tune_fp_eq(&c->e[i].fp, fp)) {
			hit->match = AGG_TUNE_EXACT;
			hit->e = c->e[i];
			hit->distance = 0;
			return;
		}
		dist = agg_tune_fp_distance(&c->e[i].fp, fp);
		if (isfinite(dist) && dist <= max_distance && dist <= hit->distance) {
			hit->match = AGG_TUNE_NEAREST;	/* the newer of two as near */
			hit->e = c->e[i];
			hit->distance = dist;
		}
	}
}

/* ---- the directory ------------------------------------------------------------ */

static void sys_diag(struct agg_diag *d, const char *what, const char *path, int err)
{
	if (d && snprintf(d->msg, sizeof(d->msg), "cannot %s %s: %s", what, path,
			  strerror(-err)) >= (int)sizeof(d->msg))
		strcpy(d->msg + sizeof(d->msg) - 4, "...");	/* a long path */
}

int agg_tune_cache_load(const char *dir, struct agg_tune_cache *c, struct agg_diag *d)
{
	char path[PATH_MAX];
	FILE *f;
	int err;

	memset(c, 0, sizeof(*c));
	if (snprintf(path, sizeof(path), "%s/%s", dir, AGG_TUNE_CACHE_FILE) >= (int)sizeof(path)) {
		sys_diag(d, "read", dir, -ENAMETOOLONG);
		return -ENAMETOOLONG;
	}
	f = fopen(path, "re");
	if (!f) {
		err = -errno;
		if (err == -ENOENT)
			return 0;
		sys_diag(d, "read", path, err);
		return err;
	}
	err = agg_tune_cache_read(f, path, c, d);
	if (err && err != -EINVAL)
		sys_diag(d, "read", path, err);
	fclose(f);
	return err;
}

/* Write c to a temporary file in dir and rename it over the cache. */
static int replace_cache(const char *dir, const struct agg_tune_cache *c, struct agg_diag *d)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	FILE *f = NULL;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, AGG_TUNE_CACHE_FILE);
	snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, AGG_TUNE_CACHE_FILE);
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		sys_diag(d, "create a temporary file in", dir, err);
		return err;
	}
	if (fchmod(fd, 0644) || !(f = fdopen(fd, "w")))
		err = -errno;
	if (!err)
		err = agg_tune_cache_write(f, c);
	if (!err && fsync(fileno(f)))
		err = -errno;
	if (f ? fclose(f) && !err : close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		sys_diag(d, "write", path, err);
	}
	return err;
}

/*
 * Take fd's lock, waiting AGG_TUNE_LOCK_WAIT seconds at most: a store
 * holds it for milliseconds, so a longer wait means a holder that is
 * stuck, and a library must not hang its caller on it.  flock has no
 * timeout of its own, hence the polls.
 */
static int lock_bounded(int fd, const char *lock, struct agg_diag *d)
{
	double end = agg_now() + AGG_TUNE_LOCK_WAIT;
	struct timespec nap = { 0, 10 * 1000 * 1000 };

	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int err = -errno;

			sys_diag(d, "lock", lock, err);
			return err;
		}
		if (agg_now() >= end) {
			if (d && snprintf(d->msg, sizeof(d->msg), "cannot lock %s: another "
					  "process has held it for %d s (a stuck agg? the cache "
					  "is left as it is)", lock, AGG_TUNE_LOCK_WAIT) >=
			    (int)sizeof(d->msg))
				strcpy(d->msg + sizeof(d->msg) - 4, "...");
			return -ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
	return 0;
}

int agg_tune_cache_store(const char *dir, const struct agg_tune_entry *e,
			 struct agg_diag *d)
{
	struct agg_tune_cache c;
	char lock[PATH_MAX];
	int fd, err;

	if (snprintf(lock, sizeof(lock), "%s/%s.XXXXXX", dir, AGG_TUNE_CACHE_FILE) >=
	    (int)sizeof(lock)) {
		sys_diag(d, "write", dir, -ENAMETOOLONG);
		return -ENAMETOOLONG;
	}
	snprintf(lock, sizeof(lock), "%s/%s", dir, AGG_TUNE_LOCK_FILE);
	if (mkdir(dir, 0755) && errno != EEXIST) {
		err = -errno;
		sys_diag(d, "make", dir, err);
		return err;
	}
	/* A lock file of its own: the cache's inode changes with every rename. */
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		sys_diag(d, "open", lock, err);
		return err;
	}
	if ((err = lock_bounded(fd, lock, d))) {
		close(fd);
		return err;
	}
	err = agg_tune_cache_load(dir, &c, d);
	if (!err) {
		err = agg_tune_cache_put(&c, e);
		if (err)
			sys_diag(d, "store an entry in", dir, err);
	}
	if (!err)
		err = replace_cache(dir, &c, d);
	agg_tune_cache_free(&c);
	close(fd);		/* and with it the lock */
	return err;
}
