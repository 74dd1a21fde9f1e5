// SPDX-License-Identifier: GPL-2.0-only
#include <stdio.h>
#include <string.h>

#include "log.h"

static const char *log_prog = "agg";
static int log_level;

void agg_log_init(const char *prog, int verbosity)
{
	const char *slash = strrchr(prog, '/');

	log_prog = slash ? slash + 1 : prog;
	log_level = verbosity;
}

int agg_log_level(void)
{
	return log_level;
}

const char *agg_log_prog(void)
{
	return log_prog;
}

static void vlog(int level, const char *fmt, va_list ap)
{
	if (level > log_level)
		return;
	fprintf(stderr, "%s: ", log_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

#define DEFINE_LOG(name, level)				\
void name(const char *fmt, ...)				\
{							\
	va_list ap;					\
	va_start(ap, fmt);				\
	vlog(level, fmt, ap);				\
	va_end(ap);					\
}

DEFINE_LOG(agg_err, -1)
DEFINE_LOG(agg_warn, 0)
DEFINE_LOG(agg_info, 1)
DEFINE_LOG(agg_dbg, 2)
