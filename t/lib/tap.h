/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A tiny TAP producer for unit tests of lib/: ok(), is_int(), is_dbl(),
 * is_str(), diag(), skip_all(), done_testing().  Output goes to stdout.
 */
#ifndef AGG_TAP_H
#define AGG_TAP_H

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tap_n, tap_failed;
static unsigned int tap_timeout_s;

/*
 * The time bound of test-lib.sh for a unit test: AGG_TEST_TIMEOUT
 * seconds (default 300), then the test fails naming the last test that
 * passed or failed before the hang.
 */
static void tap_on_alarm(int sig)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg),
			 "not ok - timed out after %u s (AGG_TEST_TIMEOUT), after test %d\n",
			 tap_timeout_s, tap_n);

	(void)sig;
	if (n > 0 && write(1, msg, (size_t)n) < 0)
		_exit(2);
	_exit(1);
}

__attribute__((constructor)) static void tap_watchdog(void)
{
	const char *s = getenv("AGG_TEST_TIMEOUT");

	tap_timeout_s = s && atoi(s) > 0 ? (unsigned int)atoi(s) : 300;
	signal(SIGALRM, tap_on_alarm);
	alarm(tap_timeout_s);
}

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
