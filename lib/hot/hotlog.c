// SPDX-License-Identifier: GPL-2.0-only
/* Update logs, text or binary, parsed in large blocks (not a line at a time
 * through stdio): logs run to hundreds of millions of ids. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

#define LOG_BLOCK	(1 << 20)
#define LOG_LINE_MAX	(1 << 26)	/* one example; longer is an error */
#define LOG_IDS_MAX	65536		/* binary: ids returned per call */

void agg_hot_log_open(struct agg_hot_log *l, FILE *f, const char *fname,
		      bool binary)
{
	memset(l, 0, sizeof(*l));
	l->f = f;
	l->fname = fname;
	l->binary = binary;
}

void agg_hot_log_close(struct agg_hot_log *l)
{
	free(l->buf);
	l->buf = NULL;
	l->cap = l->len = l->pos = 0;
}

/* Keep buf[pos, len), read more after it; 0, or -EIO / -ENOMEM / -E2BIG. */
static int refill(struct agg_hot_log *l)
{
	size_t keep = l->len - l->pos, got;

	if (l->pos) {
		memmove(l->buf, l->buf + l->pos, keep);
		l->offset += l->pos;
		l->pos = 0;
		l->len = keep;
	}
	if (l->len == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : LOG_BLOCK;
		char *b;

		if (cap > LOG_LINE_MAX + LOG_BLOCK)
			return -E2BIG;
		b = realloc(l->buf, cap);
		if (!b)
			return -ENOMEM;
		l->buf = b;
		l->cap = cap;
	}
	got = fread(l->buf + l->len, 1, l->cap - l->len, l->f);
	l->len += got;
	if (got == 0) {
		if (ferror(l->f))
			return -EIO;
		l->eof = true;
	}
	return 0;
}

static int grow_ids(uint64_t **ids, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 64;
	uint64_t *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*ids, c * sizeof(**ids));
	if (!p)
		return -ENOMEM;
	*ids = p;
	*cap = c;
	return 0;
}

static int next_binary(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		       size_t *cap, uint64_t *iter, struct agg_diag *d)
{
	int err;

	*n = 0;
	*iter = l->iter;
	if ((err = grow_ids(ids, cap, LOG_IDS_MAX)))
		return err;
	for (;;) {
		while (l->pos + 8 <= l->len && *n < LOG_IDS_MAX) {
			uint64_t id;

			memcpy(&id, l->buf + l->pos, 8);
			id = le64toh(id);
			l->pos += 8;
			if (id == AGG_HOT_ITER_END) {
				l->iter++;
				if (*n)
					return 1;
				*iter = l->iter;
				continue;
			}
			(*ids)[(*n)++] = id;
		}
		if (*n == LOG_IDS_MAX)
			return 1;
		if (l->eof) {
			if (*n || l->pos == l->len)
				return *n > 0;
			snprintf(d->msg, sizeof(d->msg),
				 "%s: %zu trailing byte%s after the last whole id at offset %llu "
				 "(a binary log is little-endian u64 ids)",
				 l->fname, l->len - l->pos, l->len - l->pos == 1 ? "" : "s",
				 (unsigned long long)(l->offset + l->pos));
			return -EINVAL;
		}
		if ((err = refill(l)))
			return err;
	}
}

static inline bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* One line buf[s, e): its ids, or -EINVAL naming the column. */
static int parse_line(struct agg_hot_log *l, const char *s, const char *e,
		      uint64_t **ids, size_t *n, size_t *cap, int *ntok,
		      struct agg_diag *d)
{
	const char *p = s;

	*ntok = 0;
	*n = 0;
	for (;;) {
		const char *tok;
		uint64_t v = 0;
		int err;

		while (p < e && blank(*p))
			p++;
		if (p == e || *p == '#')
			return 0;
		tok = p;
		if (*p < '0' || *p > '9') {
			agg_diag_set(d, l->fname, l->lineno, (int)(p - s) + 1,
				     "expected an id (unsigned integer)");
			return -EINVAL;
		}
		for (; p < e && *p >= '0' && *p <= '9'; p++) {
			unsigned dig = *p - '0';

			if (v > (UINT64_MAX - dig) / 10)
				break;
			v = v * 10 + dig;
		}
		if ((p < e && !blank(*p) && *p != '#') || v == AGG_HOT_ITER_END) {
			while (p < e && !blank(*p))
				p++;
			agg_diag_set(d, l->fname, l->lineno, (int)(tok - s) + 1,
				     "bad id '%.*s' (ids are 0 to 2^64-2)",
				     (int)(p - tok > 40 ? 40 : p - tok), tok);
			return -EINVAL;
		}
		/* The first word of several is the iteration: store it too and
		 * drop it once the line is done, so ids need no second copy. */
		if ((err = grow_ids(ids, cap, *n + 1)))
			return err;
		(*ids)[(*n)++] = v;
		(*ntok)++;
	}
}

int agg_hot_log_next(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		     size_t *cap, uint64_t *iter, struct agg_diag *d)
{
	int err;

	if (l->binary)
		return next_binary(l, ids, n, cap, iter, d);
	for (;;) {
		char *s, *e, *nl = NULL;
		int ntok;

		if (l->pos < l->len)
			nl = memchr(l->buf + l->pos, '\n', l->len - l->pos);
		if (!nl && !l->eof) {
			if ((err = refill(l))) {
				if (err == -E2BIG) {
					agg_diag_set(d, l->fname, l->lineno + 1, 1,
						     "line longer than %d bytes", LOG_LINE_MAX);
					return -EINVAL;
				}
				return err;
			}
			continue;
		}
		if (!nl && l->pos == l->len)
			return 0;
		s = l->buf + l->pos;
		e = nl ? nl : l->buf + l->len;
		l->pos = nl ? (size_t)(nl - l->buf) + 1 : l->len;
		l->lineno++;
		if ((err = parse_line(l, s, e, ids, n, cap, &ntok, d)))
			return err;
		if (ntok == 0)
			continue;
		if (ntok > 1) {		/* "ITER ID ID ..." */
			l->iter = (*ids)[0];
			memmove(*ids, *ids + 1, (*n - 1) * sizeof(**ids));
			(*n)--;
		}
		*iter = l->iter;
		return 1;
	}
}
