// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

void agg_diag_set(struct agg_diag *d, const char *file, int line, int col,
		  const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!d)
		return;
	n = snprintf(d->msg, sizeof(d->msg), "%s:%d:%d: ", file, line, col);
	if (n < 0 || n >= (int)sizeof(d->msg))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(d->msg + n, sizeof(d->msg) - n, fmt, ap);
	va_end(ap);
}

int agg_grow(void **p, size_t need, size_t sz)
{
	size_t have = need - 1, cap;
	void *q;

	/* Capacity is the next power of two: reallocate only on crossing. */
	if (have && (have & (have - 1)))
		return 0;
	cap = have ? have * 2 : 1;
	q = realloc(*p, cap * sz);
	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

void agg_text_init(struct agg_text *tx, FILE *f)
{
	memset(tx, 0, sizeof(*tx));
	tx->f = f;
}

void agg_text_free(struct agg_text *tx)
{
	free(tx->buf);
	free(tx->tok);
	tx->buf = NULL;
	tx->tok = NULL;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int agg_text_next(struct agg_text *tx, struct agg_text_line *ln)
{
	ssize_t len;
	char *p;

	errno = 0;
	len = getline(&tx->buf, &tx->cap, tx->f);
	if (len < 0)	/* getline sets errno: EISDIR for a directory */
		return ferror(tx->f) ? -(errno ? errno : EIO) : 0;
	tx->lineno++;
	if (len > AGG_TEXT_LINE_MAX)
		return -E2BIG;
	if (len > 0 && tx->buf[len - 1] == '\n')
		tx->buf[--len] = '\0';
	/* An embedded NUL ends the line where the parser sees it. */
	ln->ntok = 0;
	ln->lineno = tx->lineno;
	ln->end_col = 1;
	for (p = tx->buf; *p;) {
		char *start;

		while (is_blank(*p))
			p++;
		if (!*p || *p == '#')
			break;
		start = p;
		while (*p && !is_blank(*p))
			p++;
		if (ln->ntok >= tx->tokcap) {
			int cap = tx->tokcap ? 2 * tx->tokcap : 16;
			void *q = realloc(tx->tok, cap * sizeof(*tx->tok));

			if (!q)
				return -ENOMEM;
			tx->tok = q;
			tx->tokcap = cap;
		}
		tx->tok[ln->ntok].s = start;
		tx->tok[ln->ntok].col = (int)(start - tx->buf) + 1;
		ln->ntok++;
		ln->end_col = (int)(p - tx->buf) + 1;
		if (*p)
			*p++ = '\0';
	}
	ln->tok = tx->tok;
	return 1;
}
