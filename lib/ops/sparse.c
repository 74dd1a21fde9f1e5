// SPDX-License-Identifier: GPL-2.0-only
/* Sparse gradient files (sparse.h, man 5 agg-sparse): read, write, sum. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sparse.h"
#include "opts.h"
#include "text.h"

void agg_sparse_init(struct agg_sparse *s, uint32_t width)
{
	memset(s, 0, sizeof(*s));
	s->width = width;
}

void agg_sparse_free(struct agg_sparse *s)
{
	free(s->id);
	free(s->val);
	agg_sparse_init(s, 0);
}

int agg_sparse_reserve(struct agg_sparse *s, uint64_t n)
{
	uint64_t *id;
	float *val;

	if (n <= s->cap)
		return 0;
	if (n > SIZE_MAX / agg_sparse_pair_size(s->width ? s->width : AGG_SPARSE_MAX_WIDTH))
		return -ENOMEM;
	id = realloc(s->id, n * sizeof(*id));
	if (!id)
		return -ENOMEM;
	s->id = id;
	val = realloc(s->val, n * (s->width ? s->width : 1) * sizeof(*val));
	if (!val)
		return -ENOMEM;
	s->val = val;
	s->cap = n;
	return 0;
}

/* ---- binary ---------------------------------------------------------------- */

static int parse_binary(struct agg_sparse *s, const uint8_t *p, size_t len, const char *name,
			struct agg_diag *d)
{
	uint16_t version, width;
	uint64_t count, want;
	size_t ps;

	if (len < AGG_SPARSE_HDR) {
		snprintf(d->msg, sizeof(d->msg), "%s: truncated: %zu bytes, the header alone is %d",
			 name, len, AGG_SPARSE_HDR);
		return -EINVAL;
	}
	memcpy(&version, p + 4, 2);
	memcpy(&width, p + 6, 2);
	memcpy(&count, p + 8, 8);
	version = le16toh(version);
	width = le16toh(width);
	count = le64toh(count);
	if (version != AGG_SPARSE_VERSION) {
		snprintf(d->msg, sizeof(d->msg), "%s: byte 4: version %u, this agg reads version %d",
			 name, version, AGG_SPARSE_VERSION);
		return -EINVAL;
	}
	if (width < 1 || width > AGG_SPARSE_MAX_WIDTH) {
		snprintf(d->msg, sizeof(d->msg), "%s: byte 6: width %u (1 to %d)", name, width,
			 AGG_SPARSE_MAX_WIDTH);
		return -EINVAL;
	}
	ps = agg_sparse_pair_size(width);
	want = (len - AGG_SPARSE_HDR) / ps;
	if (count != want || (len - AGG_SPARSE_HDR) % ps) {
		snprintf(d->msg, sizeof(d->msg), "%s: %s: the header says %" PRIu64 " pairs of %zu "
			 "bytes, %zu bytes follow it", name,
			 count > want ? "truncated" : "bytes after the last pair", count, ps,
			 len - AGG_SPARSE_HDR);
		return -EINVAL;
	}
	agg_sparse_init(s, width);
	if (agg_sparse_reserve(s, count ? count : 1)) {
		snprintf(d->msg, sizeof(d->msg), "%s: out of memory for %" PRIu64 " pairs", name,
			 count);
		return -ENOMEM;
	}
	p += AGG_SPARSE_HDR;
	for (uint64_t i = 0; i < count; i++, p += ps) {
		uint64_t id;

		memcpy(&id, p, 8);
		id = le64toh(id);
		if (i && id <= s->id[i - 1]) {
			snprintf(d->msg, sizeof(d->msg), "%s: byte %" PRIu64 ": pair %" PRIu64
				 " has id %" PRIu64 " after %" PRIu64 ": ids must increase", name,
				 AGG_SPARSE_HDR + i * ps, i, id, s->id[i - 1]);
			agg_sparse_free(s);
			return -EINVAL;
		}
		s->id[i] = id;
		for (uint32_t j = 0; j < width; j++) {
			uint32_t v;

			memcpy(&v, p + 8 + 4 * j, 4);
			v = le32toh(v);
			memcpy(&s->val[i * width + j], &v, 4);
		}
	}
	s->n = count;
	return 0;
}

/* ---- text ------------------------------------------------------------------ */

struct where {
	int line, col;
};

struct text_in {
	struct agg_sparse *s;
	struct where *at;	/* of each pair, for the duplicate check */
	const char *name;
	struct agg_diag *d;
	bool width_line;	/* a "width N" line was read */
};

static int bad(struct text_in *t, int line, int col, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int bad(struct text_in *t, int line, int col, int err, const char *fmt, ...)
{
	char msg[sizeof(t->d->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	agg_diag_set(t->d, t->name, line, col, "%s", msg);
	return err;
}

static int read_width(struct text_in *t, const struct agg_text_line *ln)
{
	uint64_t w;
	int col = 0;

	if (t->width_line || t->s->n)
		return bad(t, ln->lineno, ln->tok[0].col, -EINVAL,
			   "'width' goes before the first pair, once");
	if (ln->ntok != 2)
		return bad(t, ln->lineno, ln->ntok < 2 ? ln->end_col : ln->tok[2].col, -EINVAL,
			   "want 'width N'");
	if (agg_parse_u64(ln->tok[1].s, &w, &col) || w < 1 || w > AGG_SPARSE_MAX_WIDTH)
		return bad(t, ln->lineno, ln->tok[1].col + col, -EINVAL,
			   "bad width '%s' (1 to %d)", ln->tok[1].s, AGG_SPARSE_MAX_WIDTH);
	t->s->width = (uint32_t)w;
	t->width_line = true;
	return 0;
}

/* A float32 value: decimal within float32's range, or inf, -inf, nan
 * (what %.9g prints for them; a NaN's payload is not kept). */
static int parse_value(const char *s, float *out, int *col)
{
	double v;
	int err;

	if (!strcmp(s, "inf") || !strcmp(s, "-inf") || !strcmp(s, "nan") || !strcmp(s, "-nan")) {
		*out = s[s[0] == '-'] == 'n' ? (s[0] == '-' ? -NAN : NAN) :
		       (s[0] == '-' ? -INFINITY : INFINITY);
		return 0;
	}
	err = agg_parse_double(s, &v, col);
	if (err == -ERANGE) {
		/* strtod says ERANGE for float32's subnormals too: those are values */
		errno = 0;
		v = strtod(s, NULL);
		err = isfinite(v) ? 0 : -ERANGE;
	}
	if (err)
		return err;
	/* beyond what rounds to FLT_MAX (%.9g prints it a little above) */
	if (isinf((float)v)) {
		*col = 0;
		return -ERANGE;
	}
	*out = (float)v;
	return 0;
}

static int read_pair(struct text_in *t, const struct agg_text_line *ln)
{
	struct agg_sparse *s = t->s;
	uint64_t id;
	int col = 0, err;

	err = agg_parse_u64(ln->tok[0].s, &id, &col);
	if (err)
		return bad(t, ln->lineno, ln->tok[0].col + col, -EINVAL,
			   err == -ERANGE ? "id '%s' is beyond 2^64 - 1" :
			   "bad id '%s' (a whole number)", ln->tok[0].s);
	if (!s->width) {
		if (ln->ntok - 1 > AGG_SPARSE_MAX_WIDTH)
			return bad(t, ln->lineno, ln->tok[AGG_SPARSE_MAX_WIDTH + 1].col, -EINVAL,
				   "%d values: the width is at most %d", ln->ntok - 1,
				   AGG_SPARSE_MAX_WIDTH);
		if (ln->ntok < 2)
			return bad(t, ln->lineno, ln->end_col, -EINVAL,
				   "id %" PRIu64 " has no values", id);
		s->width = ln->ntok - 1;
	}
	if ((uint32_t)(ln->ntok - 1) != s->width)
		return bad(t, ln->lineno, (uint32_t)(ln->ntok - 1) > s->width ?
			   ln->tok[s->width + 1].col : ln->end_col, -EINVAL,
			   "%d values, want %u (the %s)", ln->ntok - 1, s->width,
			   t->width_line ? "width line" : "first pair's");
	if (s->n == s->cap) {
		uint64_t cap = s->cap ? 2 * s->cap : 256;
		struct where *at = realloc(t->at, cap * sizeof(*at));

		if (!at)
			return -ENOMEM;
		t->at = at;
		if (agg_sparse_reserve(s, cap))
			return -ENOMEM;
	}
	for (uint32_t j = 0; j < s->width; j++) {
		const struct agg_text_tok *tk = &ln->tok[1 + j];

		err = parse_value(tk->s, &s->val[s->n * s->width + j], &col);
		if (err)
			return bad(t, ln->lineno, tk->col + col, -EINVAL, err == -ERANGE ?
				   "value '%s' is beyond float32's range" :
				   "bad value '%s' (a decimal number)", tk->s);
	}
	s->id[s->n] = id;
	t->at[s->n] = (struct where){ ln->lineno, ln->tok[0].col };
	s->n++;
	return 0;
}

/* Pairs in id order (indices into the pairs as read), for a stable sort. */
static const struct agg_sparse *sort_s;

static int cmp_pair(const void *a, const void *b)
{
	uint64_t x = sort_s->id[*(const uint64_t *)a], y = sort_s->id[*(const uint64_t *)b];

	if (x != y)
		return x < y ? -1 : 1;
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : 1;
}

/* Sort the pairs by id; a duplicate is an error at its second line. */
static int sort_pairs(struct text_in *t)
{
	struct agg_sparse *s = t->s, out;
	uint64_t *ord;
	bool sorted = true;
	int err = 0;

	for (uint64_t i = 1; i < s->n && sorted; i++)
		sorted = s->id[i] > s->id[i - 1];
	if (sorted)
		return 0;
	ord = malloc(s->n * sizeof(*ord));
	agg_sparse_init(&out, s->width);
	if (!ord || agg_sparse_reserve(&out, s->n)) {
		free(ord);
		agg_sparse_free(&out);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < s->n; i++)
		ord[i] = i;
	sort_s = s;
	qsort(ord, s->n, sizeof(*ord), cmp_pair);
	for (uint64_t i = 0; i < s->n && !err; i++) {
		if (i && s->id[ord[i]] == s->id[ord[i - 1]]) {
			const struct where *a = &t->at[ord[i - 1]], *b = &t->at[ord[i]];

			err = bad(t, b->line, b->col, -EINVAL,
				  "id %" PRIu64 " again (first on line %d): an id is one pair",
				  s->id[ord[i]], a->line);
			break;
		}
		out.id[i] = s->id[ord[i]];
		memcpy(&out.val[i * s->width], &s->val[ord[i] * s->width], 4 * (size_t)s->width);
	}
	free(ord);
	if (err) {
		agg_sparse_free(&out);
		return err;
	}
	out.n = s->n;
	agg_sparse_free(s);
	*s = out;
	return 0;
}

static int parse_text(struct agg_sparse *s, const void *buf, size_t len, const char *name,
		      struct agg_diag *d)
{
	struct text_in t = { .s = s, .name = name, .d = d };
	struct agg_text_line ln;
	struct agg_text tx;
	FILE *f = len ? fmemopen((void *)buf, len, "r") : fopen("/dev/null", "r");
	int rc, err = 0;

	agg_sparse_init(s, 0);
	if (!f)
		return bad(&t, 1, 1, -ENOMEM, "out of memory");
	agg_text_init(&tx, f);
	while (!err && (rc = agg_text_next(&tx, &ln)) > 0) {
		if (ln.ntok == 0)
			continue;
		if (!strcmp(ln.tok[0].s, "width"))
			err = read_width(&t, &ln);
		else
			err = read_pair(&t, &ln);
	}
	if (!err && rc < 0)
		err = bad(&t, tx.lineno, 1, rc == -E2BIG ? -EINVAL : rc, "%s", rc == -E2BIG ?
			  "line too long (more than 65536 bytes)" : strerror(-rc));
	if (err == -ENOMEM)
		bad(&t, tx.lineno, 1, err, "out of memory");
	if (!err && !s->width)
		err = bad(&t, tx.lineno + 1, 1, -EINVAL,
			  "no pairs and no 'width N' line: the width is unknown");
	if (!err)
		err = sort_pairs(&t);
	agg_text_free(&tx);
	fclose(f);
	free(t.at);
	if (err)
		agg_sparse_free(s);
	return err;
}

int agg_sparse_parse(struct agg_sparse *s, const void *buf, size_t len, const char *name,
		     struct agg_diag *d)
{
	if (len >= 4 && !memcmp(buf, AGG_SPARSE_MAGIC, 4))
		return parse_binary(s, buf, len, name, d);
	/* Not text either: say what it is not, rather than "bad id". */
	if (memchr(buf, '\0', len < 4096 ? len : 4096)) {
		agg_sparse_init(s, 0);
		snprintf(d->msg, sizeof(d->msg), "%s: neither a binary sparse gradient (no "
			 "magic '%s' at byte 0) nor text (NUL bytes)", name, AGG_SPARSE_MAGIC);
		return -EINVAL;
	}
	return parse_text(s, buf, len, name, d);
}

int agg_sparse_read(struct agg_sparse *s, FILE *f, const char *name, struct agg_diag *d)
{
	char *buf = NULL;
	size_t len = 0, cap = 0, r;
	int err;

	agg_sparse_init(s, 0);
	do {
		if (len == cap) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 65536);

			if (!nb) {
				free(buf);
				snprintf(d->msg, sizeof(d->msg), "%s: out of memory", name);
				return -ENOMEM;
			}
			buf = nb;
		}
		r = fread(buf + len, 1, cap - len, f);
		len += r;
	} while (r);
	if (ferror(f)) {
		err = errno ? -errno : -EIO;
		snprintf(d->msg, sizeof(d->msg), "cannot read %s: %s", name, strerror(-err));
		free(buf);
		return err;
	}
	err = agg_sparse_parse(s, buf, len, name, d);
	free(buf);
	return err;
}

int agg_sparse_load(struct agg_sparse *s, const char *path, struct agg_diag *d)
{
	bool std = !path || !strcmp(path, "-");
	FILE *f = std ? stdin : fopen(path, "r");
	int err;

	agg_sparse_init(s, 0);
	if (!f) {
		err = -errno;
		snprintf(d->msg, sizeof(d->msg), "cannot open %s: %s", path, strerror(errno));
		return err;
	}
	errno = 0;
	err = agg_sparse_read(s, f, std ? "<stdin>" : path, d);
	if (!std)
		fclose(f);
	return err;
}

/* ---- writing --------------------------------------------------------------- */

int agg_sparse_encode(const struct agg_sparse *s, bool text, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);
	int err;

	if (!f)
		return -ENOMEM;
	err = agg_sparse_write(s, f, text);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	return err;
}

int agg_sparse_write(const struct agg_sparse *s, FILE *f, bool text)
{
	if (text) {
		fprintf(f, "width %u\n", s->width);
		for (uint64_t i = 0; i < s->n; i++) {
			fprintf(f, "%" PRIu64, s->id[i]);
			/* %.9g: every float32 reads back to the same bits */
			for (uint32_t j = 0; j < s->width; j++)
				fprintf(f, " %.9g", s->val[i * s->width + j]);
			fputc('\n', f);
		}
	} else {
		uint16_t version = htole16(AGG_SPARSE_VERSION), width = htole16(s->width);
		uint64_t count = htole64(s->n);

		fwrite(AGG_SPARSE_MAGIC, 1, 4, f);
		fwrite(&version, 2, 1, f);
		fwrite(&width, 2, 1, f);
		fwrite(&count, 8, 1, f);
		for (uint64_t i = 0; i < s->n; i++) {
			uint64_t id = htole64(s->id[i]);

			fwrite(&id, 8, 1, f);
			for (uint32_t j = 0; j < s->width; j++) {
				uint32_t v;

				memcpy(&v, &s->val[i * s->width + j], 4);
				v = htole32(v);
				fwrite(&v, 4, 1, f);
			}
		}
	}
	return fflush(f) || ferror(f) ? -EIO : 0;
}

/* ---- sums ------------------------------------------------------------------ */

void agg_sparse_sum_free(struct agg_sparse_sum *s)
{
	free(s->id);
	free(s->val);
	memset(s, 0, sizeof(*s));
}

int agg_sparse_sum(const struct agg_sparse *const *in, int n, struct agg_sparse_sum *out)
{
	uint64_t total = 0, *pos;
	uint32_t w = n ? in[0]->width : 1;

	memset(out, 0, sizeof(*out));
	out->width = w;
	for (int i = 0; i < n; i++) {
		if (in[i]->width != w && in[i]->n)
			return -EINVAL;
		total += in[i]->n;
	}
	pos = calloc(n > 0 ? (size_t)n : 1, sizeof(*pos));
	out->id = malloc((total ? total : 1) * sizeof(*out->id));
	out->val = malloc((total ? total : 1) * w * sizeof(*out->val));
	if (!pos || !out->id || !out->val) {
		free(pos);
		agg_sparse_sum_free(out);
		return -ENOMEM;
	}
	/* A merge of sorted inputs: the smallest id at the heads, summed in
	 * input order. */
	for (;;) {
		uint64_t min = UINT64_MAX;
		bool any = false;
		double *v = &out->val[out->n * w];

		for (int i = 0; i < n; i++)
			if (pos[i] < in[i]->n && (!any || in[i]->id[pos[i]] < min)) {
				min = in[i]->id[pos[i]];
				any = true;
			}
		if (!any)
			break;
		for (uint32_t j = 0; j < w; j++)
			v[j] = 0;
		for (int i = 0; i < n; i++) {
			const float *x;

			if (pos[i] >= in[i]->n || in[i]->id[pos[i]] != min)
				continue;
			x = &in[i]->val[pos[i]++ * w];
			for (uint32_t j = 0; j < w; j++)
				v[j] += x[j];
		}
		out->id[out->n++] = min;
	}
	free(pos);
	return 0;
}

int agg_sparse_sum_round(const struct agg_sparse_sum *sum, struct agg_sparse *out,
			 uint64_t *over)
{
	*over = 0;
	agg_sparse_init(out, sum->width);
	if (agg_sparse_reserve(out, sum->n ? sum->n : 1))
		return -ENOMEM;
	memcpy(out->id, sum->id, sum->n * sizeof(*out->id));
	/* As the dense path poisons a sum past its range: a value float32
	 * cannot hold is NaN, never a plausible +-Inf. */
	for (uint64_t i = 0; i < sum->n * sum->width; i++) {
		out->val[i] = (float)sum->val[i];
		if (!isfinite(out->val[i])) {
			out->val[i] = NAN;
			(*over)++;
		}
	}
	out->n = sum->n;
	return 0;
}

int agg_sparse_check(const struct agg_sparse *got, const struct agg_sparse_sum *ref,
		     double tol, double *maxerr, char *why, size_t whylen)
{
	double big = 0, worst = 0;
	uint64_t nv = ref->n * ref->width;

	*maxerr = 0;
	if (got->width != ref->width || got->n != ref->n) {
		snprintf(why, whylen, "%" PRIu64 " pairs of width %u, the reference has %" PRIu64
			 " of width %u", got->n, got->width, ref->n, ref->width);
		return -EINVAL;
	}
	for (uint64_t i = 0; i < nv; i++)
		if (fabs(ref->val[i]) > big)
			big = fabs(ref->val[i]);
	for (uint64_t i = 0; i < got->n; i++) {
		if (got->id[i] != ref->id[i]) {
			snprintf(why, whylen, "pair %" PRIu64 ": id %" PRIu64 ", the reference has %"
				 PRIu64, i, got->id[i], ref->id[i]);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < ref->width; j++) {
			double g = got->val[i * ref->width + j], r = ref->val[i * ref->width + j];
			double e = big > 0 ? fabs(g - r) / big : fabs(g - r);

			if (!(e <= tol)) {
				snprintf(why, whylen, "id %" PRIu64 " value %u: %.9g, the reference "
					 "%.17g (error %.3g of the largest magnitude %.6g, over %g)",
					 got->id[i], j, g, r, e, big, tol);
				*maxerr = e;
				return -EINVAL;
			}
			if (e > worst)
				worst = e;
		}
	}
	*maxerr = worst;
	return 0;
}
