/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_JSON_H
#define AGG_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A streaming JSON writer (after bpftool's json_writer). */
struct agg_jw;

struct agg_jw *agg_jw_new(FILE *f, bool pretty);
void agg_jw_free(struct agg_jw *jw);
void agg_jw_name(struct agg_jw *jw, const char *name);
void agg_jw_start_object(struct agg_jw *jw);
void agg_jw_end_object(struct agg_jw *jw);
void agg_jw_start_array(struct agg_jw *jw);
void agg_jw_end_array(struct agg_jw *jw);
void agg_jw_string(struct agg_jw *jw, const char *s);
void agg_jw_uint(struct agg_jw *jw, uint64_t v);
void agg_jw_int(struct agg_jw *jw, int64_t v);
void agg_jw_float(struct agg_jw *jw, double v);
void agg_jw_bool(struct agg_jw *jw, bool v);
void agg_jw_null(struct agg_jw *jw);

/*
 * Print helpers (after iproute2's print_*(PRINT_ANY, ...)): each field is
 * printed once, as "key": value in JSON mode or through fmt in text mode,
 * so the two forms cannot disagree.  A NULL key prints in text mode only;
 * a NULL fmt prints in JSON mode only.
 */
void agg_print_start(bool json, bool pretty);
int agg_print_end(void);	/* 0, or -EIO if stdout could not be written */
bool agg_print_json(void);
struct agg_jw *agg_print_jw(void);
void agg_print_obj_open(const char *key);
void agg_print_obj_close(void);
void agg_print_arr_open(const char *key);
void agg_print_arr_close(void);
void agg_print_str(const char *key, const char *fmt, const char *val);
void agg_print_uint(const char *key, const char *fmt, uint64_t val);
void agg_print_int(const char *key, const char *fmt, int64_t val);
void agg_print_float(const char *key, const char *fmt, double val);
void agg_print_bool(const char *key, const char *fmt, bool val);
/* No value: null in JSON, "-" through fmt (a %s) in text. */
void agg_print_null(const char *key, const char *fmt);
void agg_print_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
