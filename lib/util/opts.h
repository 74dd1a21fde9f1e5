/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_OPTS_H
#define AGG_OPTS_H

#include <argp.h>
#include <stdbool.h>
#include <stdint.h>

/* Options every tool shares: -v (repeatable), -q, -j, -p. */
struct agg_common_opts {
	int verbose;		/* -1 with -q */
	bool json;
	bool pretty;
};

/* Options of the tools that work on a loaded job: --job, --node, --pin-dir. */
struct agg_target_opts {
	const char *job;	/* NULL: the only job loaded */
	const char *node;	/* NULL: the node whose address is local */
	const char *pin_dir;	/* default AGG_PIN_DIR */
};

extern struct agg_common_opts agg_common;
extern struct agg_target_opts agg_target;
extern const struct argp agg_common_argp;
extern const struct argp agg_target_argp;

/* The children of a tool that takes only the common options. */
extern const struct argp_child agg_common_children[];

/* Close standard output (the JSON writer too): rc, or 3 if it failed. */
int agg_opts_exit(int rc);

/* Set argp's version and bug address and initialise logging after parsing. */
void agg_opts_setup(const char *prog);
void agg_opts_done(const char *prog);

/*
 * Strict number parsing: the whole string must be the number.  Return 0 or
 * -EINVAL / -ERANGE; *col (if not NULL) gets the 0-based offset of the
 * first bad character.
 */
int agg_parse_u64(const char *s, uint64_t *out, int *col);
int agg_parse_double(const char *s, double *out, int *col);
/* Byte counts: 123, 10k, 10M, 1G (powers of 1000), 1Ki, 1Mi, 1Gi (1024). */
int agg_parse_size(const char *s, uint64_t *out, int *col);

/* Seconds on CLOCK_MONOTONIC. */
double agg_now(void);

/* --iter N (0 to 2^32-2) and --timeout SEC (0 < SEC <= 86400) for argp
 * parsers: argp_error with a clear message when arg is bad. */
uint32_t agg_argp_iter(struct argp_state *state, const char *arg);
double agg_argp_timeout(struct argp_state *state, const char *arg);
/* --run N (0 to AGG_RUN_MAX), and the default: $AGG_RUN, else 0 (-EINVAL,
 * said on stderr, when AGG_RUN is set to something else). */
#define AGG_RUN_MAX	65535
uint32_t agg_argp_run(struct argp_state *state, const char *arg);
int agg_run_default(uint32_t *run);
/* --op sum|max|min: AGG_OP_* of bpf/agg.h. */
unsigned agg_argp_op(struct argp_state *state, const char *arg);

/* Exit status (documented in every man page). */
enum {
	AGG_EXIT_OK = 0,
	AGG_EXIT_PROBLEM = 1,	/* a check found a problem, a wait timed out */
	AGG_EXIT_USAGE = 2,	/* bad usage or bad input */
	AGG_EXIT_SYSTEM = 3,	/* system failure */
};

#endif
