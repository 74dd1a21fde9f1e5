// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"

#define JW_MAX_DEPTH 64

struct agg_jw {
	FILE *f;
	bool pretty;
	int depth;
	bool first[JW_MAX_DEPTH];	/* nothing printed yet at this depth */
	bool after_name;
};

struct agg_jw *agg_jw_new(FILE *f, bool pretty)
{
	struct agg_jw *jw = calloc(1, sizeof(*jw));

	if (!jw)
		return NULL;
	jw->f = f;
	jw->pretty = pretty;
	jw->first[0] = true;
	return jw;
}

void agg_jw_free(struct agg_jw *jw)
{
	if (!jw)
		return;
	if (jw->depth == 0 && !jw->first[0])
		fputc('\n', jw->f);
	free(jw);
}

static void jw_indent(struct agg_jw *jw)
{
	if (!jw->pretty)
		return;
	fputc('\n', jw->f);
	for (int i = 0; i < jw->depth; i++)
		fputs("  ", jw->f);
}

/* Separator before a value or a name. */
static void jw_sep(struct agg_jw *jw)
{
	if (jw->after_name) {
		jw->after_name = false;
		return;
	}
	if (!jw->first[jw->depth])
		fputc(',', jw->f);
	if (jw->depth > 0)
		jw_indent(jw);
	jw->first[jw->depth] = false;
}

static void jw_quoted(struct agg_jw *jw, const char *s)
{
	fputc('"', jw->f);
	for (; *s; s++) {
		unsigned char c = *s;

		switch (c) {
		case '"':  fputs("\\\"", jw->f); break;
		case '\\': fputs("\\\\", jw->f); break;
		case '\n': fputs("\\n", jw->f); break;
		case '\t': fputs("\\t", jw->f); break;
		case '\r': fputs("\\r", jw->f); break;
		default:
			if (c < 0x20)
				fprintf(jw->f, "\\u%04x", c);
			else
				fputc(c, jw->f);
		}
	}
	fputc('"', jw->f);
}

void agg_jw_name(struct agg_jw *jw, const char *name)
{
	jw_sep(jw);
	jw_quoted(jw, name);
	fputs(jw->pretty ? ": " : ":", jw->f);
	jw->after_name = true;
}

static void jw_open(struct agg_jw *jw, char c)
{
	jw_sep(jw);
	fputc(c, jw->f);
	if (jw->depth < JW_MAX_DEPTH - 1)
		jw->depth++;
	jw->first[jw->depth] = true;
}

static void jw_close(struct agg_jw *jw, char c)
{
	bool empty = jw->first[jw->depth];

	if (jw->depth > 0)
		jw->depth--;
	if (!empty)
		jw_indent(jw);
	fputc(c, jw->f);
}

void agg_jw_start_object(struct agg_jw *jw) { jw_open(jw, '{'); }
void agg_jw_end_object(struct agg_jw *jw) { jw_close(jw, '}'); }
void agg_jw_start_array(struct agg_jw *jw) { jw_open(jw, '['); }
void agg_jw_end_array(struct agg_jw *jw) { jw_close(jw, ']'); }

void agg_jw_string(struct agg_jw *jw, const char *s)
{
	jw_sep(jw);
	jw_quoted(jw, s ? s : "");
}

void agg_jw_uint(struct agg_jw *jw, uint64_t v)
{
	jw_sep(jw);
	fprintf(jw->f, "%llu", (unsigned long long)v);
}

void agg_jw_int(struct agg_jw *jw, int64_t v)
{
	jw_sep(jw);
	fprintf(jw->f, "%lld", (long long)v);
}

void agg_jw_float(struct agg_jw *jw, double v)
{
	jw_sep(jw);
	if (isfinite(v))
		fprintf(jw->f, "%.9g", v);
	else
		fputs("null", jw->f);	/* JSON has no NaN or Inf */
}

void agg_jw_bool(struct agg_jw *jw, bool v)
{
	jw_sep(jw);
	fputs(v ? "true" : "false", jw->f);
}

void agg_jw_null(struct agg_jw *jw)
{
	jw_sep(jw);
	fputs("null", jw->f);
}

/* ---- print helpers ---------------------------------------------------- */

static struct agg_jw *print_jw;

void agg_print_start(bool json, bool pretty)
{
	if (json || pretty)
		print_jw = agg_jw_new(stdout, pretty);
}

bool agg_print_json(void)
{
	return print_jw != NULL;
}

struct agg_jw *agg_print_jw(void)
{
	return print_jw;
}

int agg_print_end(void)
{
	int bad;

	agg_jw_free(print_jw);
	print_jw = NULL;
	bad = fflush(stdout) != 0 || ferror(stdout);
	if (fclose(stdout) != 0)
		bad = 1;
	return bad ? -EIO : 0;
}

void agg_print_obj_open(const char *key)
{
	if (!print_jw)
		return;
	if (key)
		agg_jw_name(print_jw, key);
	agg_jw_start_object(print_jw);
}

void agg_print_obj_close(void)
{
	if (print_jw)
		agg_jw_end_object(print_jw);
}

void agg_print_arr_open(const char *key)
{
	if (!print_jw)
		return;
	if (key)
		agg_jw_name(print_jw, key);
	agg_jw_start_array(print_jw);
}

void agg_print_arr_close(void)
{
	if (print_jw)
		agg_jw_end_array(print_jw);
}

#define PRINT_FIELD(jwcall)					\
	do {							\
		if (print_jw) {					\
			if (!key)				\
				return;				\
			agg_jw_name(print_jw, key);		\
			jwcall;					\
		} else if (fmt) {				\
			printf(fmt, val);			\
		}						\
	} while (0)

void agg_print_str(const char *key, const char *fmt, const char *val)
{
	PRINT_FIELD(agg_jw_string(print_jw, val));
}

void agg_print_uint(const char *key, const char *fmt, uint64_t val)
{
	PRINT_FIELD(agg_jw_uint(print_jw, val));
}

void agg_print_int(const char *key, const char *fmt, int64_t val)
{
	PRINT_FIELD(agg_jw_int(print_jw, val));
}

void agg_print_float(const char *key, const char *fmt, double val)
{
	PRINT_FIELD(agg_jw_float(print_jw, val));
}

void agg_print_bool(const char *key, const char *fmt, bool val)
{
	if (print_jw) {
		if (key) {
			agg_jw_name(print_jw, key);
			agg_jw_bool(print_jw, val);
		}
	} else if (fmt) {
		printf(fmt, val ? "yes" : "no");
	}
}

void agg_print_null(const char *key, const char *fmt)
{
	if (print_jw) {
		if (key) {
			agg_jw_name(print_jw, key);
			agg_jw_null(print_jw);
		}
	} else if (fmt) {
		printf(fmt, "-");
	}
}

void agg_print_text(const char *fmt, ...)
{
	va_list ap;

	if (print_jw)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}
