/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tiny TAP producer for unit tests of lib/: ok(), is_int(), is_dbl(),
 * is_str(), diag(), skip_all(), done_testing().  Output goes to stdout.
 */
#ifndef AGG_TAP_H
#define AGG_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

static inline void tap_vresult(int pass, const char *fmt, va_list ap)
{
	printf("%sok %d - ", pass ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	putchar('\n');
	if (!pass)
		tap_failed++;
	fflush(stdout);
}

static inline int __attribute__((format(printf, 2, 3)))
ok(int pass, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vresult(pass, fmt, ap);
	va_end(ap);
	return pass;
}

static inline void __attribute__((format(printf, 1, 2)))
diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

#define is_int(got, want, ...) do {					\
	long long _g = (got), _w = (want);				\
	if (!ok(_g == _w, __VA_ARGS__))					\
		diag("  got %lld, want %lld", _g, _w);			\
} while (0)

#define is_dbl(got, want, tol, ...) do {				\
	double _g = (got), _w = (want);					\
	if (!ok(fabs(_g - _w) <= (tol), __VA_ARGS__))			\
		diag("  got %.12g, want %.12g (tolerance %g)", _g, _w,	\
		     (double)(tol));					\
} while (0)

#define is_str(got, want, ...) do {					\
	const char *_g = (got), *_w = (want);				\
	if (!ok(_g && _w && !strcmp(_g, _w), __VA_ARGS__))		\
		diag("  got '%s', want '%s'", _g ? _g : "(null)",	\
		     _w ? _w : "(null)");				\
} while (0)

static inline void skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
