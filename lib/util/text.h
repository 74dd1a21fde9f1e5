/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_TEXT_H
#define AGG_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Where a parse went wrong: "FILE:LINE:COL: message". */
struct agg_diag {
	char msg[512];
};

void agg_diag_set(struct agg_diag *d, const char *file, int line, int col,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Line-oriented text input shared by the hosts and plan parsers: '#' starts
 * a comment (at the start of a word), words are split on blanks, and each
 * word keeps its 1-based column for error messages.
 */
struct agg_text_tok {
	char *s;
	int col;
};

struct agg_text_line {
	struct agg_text_tok *tok;
	int ntok;
	int lineno;
	int end_col;		/* column just past the last word */
};

struct agg_text {
	FILE *f;
	char *buf;
	size_t cap;
	struct agg_text_tok *tok;
	int tokcap;
	int lineno;
};

#define AGG_TEXT_LINE_MAX 65536

void agg_text_init(struct agg_text *tx, FILE *f);
/* 1: a line (maybe empty), 0: end of file, -E2BIG (line too long),
 * -ENOMEM, or the read error (-EISDIR, -EIO, ...). */
int agg_text_next(struct agg_text *tx, struct agg_text_line *ln);
void agg_text_free(struct agg_text *tx);

/* Grow *p to hold need elements of size sz when adding them one by one. */
int agg_grow(void **p, size_t need, size_t sz);

#endif
