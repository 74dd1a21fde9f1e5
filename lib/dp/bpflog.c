// SPDX-License-Identifier: GPL-2.0-only
/* libbpf's messages through the tools' log (dp.h, agg_log_libbpf). */
#include <stdarg.h>
#include <stdio.h>

#include <bpf/libbpf.h>

#include "dp.h"
#include "log.h"

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (agg_log_level() < 2 && level != LIBBPF_WARN)
		return 0;
	if (agg_log_level() < 1)
		return 0;
	fprintf(stderr, "%s: libbpf: ", agg_log_prog());
	return vfprintf(stderr, fmt, ap);
}

void agg_log_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
