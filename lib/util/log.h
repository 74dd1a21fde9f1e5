/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_LOG_H
#define AGG_LOG_H

#include <stdarg.h>

/*
 * Diagnostics go to stderr as "agg-TOOL: message".  Verbosity: -1 quiet
 * (errors only), 0 default (errors and warnings), 1 info (-v), 2 debug (-vv).
 */
void agg_log_init(const char *prog, int verbosity);
int agg_log_level(void);
const char *agg_log_prog(void);

void agg_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agg_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agg_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


#endif
