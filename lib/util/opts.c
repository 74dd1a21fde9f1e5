// SPDX-License-Identifier: GPL-2.0-only
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "log.h"
#include "agg.h"
#include "opts.h"

#ifndef AGG_PIN_DIR
#define AGG_PIN_DIR "/sys/fs/bpf/agg"
#endif

struct agg_common_opts agg_common;
struct agg_target_opts agg_target = { .pin_dir = AGG_PIN_DIR };

const char *argp_program_version = "agg " AGG_VERSION;
const char *argp_program_bug_address = NULL;

enum { OPT_JOB = 0x1000, OPT_NODE, OPT_PIN_DIR };

static const struct argp_option common_options[] = {
	{ "verbose", 'v', NULL, 0, "Say more (repeat for debug output)", -1 },
	{ "quiet", 'q', NULL, 0, "Print errors only", -1 },
	{ "json", 'j', NULL, 0, "Print JSON", -1 },
	{ "pretty", 'p', NULL, 0, "Print indented JSON (implies -j)", -1 },
	{ 0 }
};

static error_t common_parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case 'v':
		agg_common.verbose = agg_common.verbose < 0 ? 1 :
				     agg_common.verbose + 1;
		break;
	case 'q':
		agg_common.verbose = -1;
		break;
	case 'j':
		agg_common.json = true;
		break;
	case 'p':
		agg_common.json = agg_common.pretty = true;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp agg_common_argp = {
	.options = common_options,
	.parser = common_parse,
};

static const struct argp_option target_options[] = {
	{ "job", OPT_JOB, "JOB", 0, "Job id (default: the only job loaded)", -2 },
	{ "node", OPT_NODE, "NODE", 0,
	  "Node name (default: the node whose address is on this host)", -2 },
	{ "pin-dir", OPT_PIN_DIR, "DIR", 0,
	  "Root of the pinned state (default $AGG_PIN_DIR, else " AGG_PIN_DIR ")", -2 },
	{ 0 }
};

static error_t target_parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case OPT_JOB:
		agg_target.job = arg;
		break;
	case OPT_NODE:
		agg_target.node = arg;
		break;
	case OPT_PIN_DIR:
		agg_target.pin_dir = arg;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp agg_target_argp = {
	.options = target_options,
	.parser = target_parse,
};

const struct argp_child agg_common_children[] = {
	{ &agg_common_argp, 0, "Output:", 0 },
	{ 0 }
};

int agg_opts_exit(int rc)
{
	if (agg_print_end()) {
		agg_err("cannot write standard output: %s", strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	return rc;
}

void agg_opts_setup(const char *prog)
{
	const char *pin = getenv("AGG_PIN_DIR");

	agg_log_init(prog, 0);
	argp_err_exit_status = AGG_EXIT_USAGE;
	if (pin && *pin)
		agg_target.pin_dir = pin;
}

void agg_opts_done(const char *prog)
{
	agg_log_init(prog, agg_common.verbose);
}

static int bad_at(const char *s, const char *end, int *col, int err)
{
	if (col)
		*col = (int)(end - s);
	return err;
}

int agg_parse_u64(const char *s, uint64_t *out, int *col)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return bad_at(s, s, col, -EINVAL);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return bad_at(s, s, col, -ERANGE);
	if (*end)
		return bad_at(s, end, col, -EINVAL);
	*out = v;
	return 0;
}

int agg_parse_double(const char *s, double *out, int *col)
{
	char *end;
	double v;
	const char *p = s;

	/* Decimal only: no hex floats, inf or nan from strtod. */
	if (*p == '-' || *p == '+')
		p++;
	if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
		return bad_at(s, p, col, -EINVAL);
	for (const char *q = p; *q; q++)
		if (*q == 'x' || *q == 'X' || *q == 'p' || *q == 'P')
			return bad_at(s, q, col, -EINVAL);
	errno = 0;
	v = strtod(s, &end);
	if (errno == ERANGE || !isfinite(v))
		return bad_at(s, s, col, -ERANGE);
	if (*end)
		return bad_at(s, end, col, -EINVAL);
	*out = v;
	return 0;
}

int agg_parse_size(const char *s, uint64_t *out, int *col)
{
	static const struct { const char *sfx; uint64_t mul; } units[] = {
		{ "", 1 }, { "k", 1000ULL }, { "K", 1000ULL },
		{ "M", 1000000ULL }, { "G", 1000000000ULL },
		{ "T", 1000000000000ULL },
		{ "Ki", 1ULL << 10 }, { "Mi", 1ULL << 20 }, { "Gi", 1ULL << 30 },
		{ "Ti", 1ULL << 40 },
	};
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return bad_at(s, s, col, -EINVAL);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return bad_at(s, s, col, -ERANGE);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].sfx))
			continue;
		if (v > UINT64_MAX / units[i].mul)
			return bad_at(s, s, col, -ERANGE);
		*out = v * units[i].mul;
		return 0;
	}
	return bad_at(s, end, col, -EINVAL);
}

double agg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint32_t agg_argp_iter(struct argp_state *state, const char *arg)
{
	uint64_t v;

	if (agg_parse_u64(arg, &v, NULL) || v >= UINT32_MAX)
		argp_error(state, "bad iteration '%s' (0 to %u)", arg, UINT32_MAX - 1);
	return (uint32_t)v;
}

uint32_t agg_argp_run(struct argp_state *state, const char *arg)
{
	uint64_t v;

	if (agg_parse_u64(arg, &v, NULL) || v > AGG_RUN_MAX)
		argp_error(state, "bad run '%s' (0 to %u)", arg, AGG_RUN_MAX);
	return (uint32_t)v;
}

int agg_run_default(uint32_t *run)
{
	const char *e = getenv("AGG_RUN");
	uint64_t v;

	*run = 0;
	if (!e || !*e)
		return 0;
	if (agg_parse_u64(e, &v, NULL) || v > AGG_RUN_MAX) {
		agg_err("AGG_RUN='%s' is not a run (0 to %u)", e, AGG_RUN_MAX);
		return -EINVAL;
	}
	*run = (uint32_t)v;
	return 0;
}

double agg_argp_timeout(struct argp_state *state, const char *arg)
{
	double d;

	if (agg_parse_double(arg, &d, NULL) || !(d > 0) || d > 86400)
		argp_error(state, "bad timeout '%s' (seconds, up to 86400)", arg);
	return d;
}

unsigned agg_argp_op(struct argp_state *state, const char *arg)
{
	static const char *const ops[] = { [AGG_OP_SUM] = "sum", [AGG_OP_MAX] = "max",
					   [AGG_OP_MIN] = "min" };

	for (unsigned i = 0; i < AGG_OP_COUNT; i++)
		if (!strcmp(arg, ops[i]))
			return i;
	argp_error(state, "bad op '%s' (sum, max or min)", arg);
	return AGG_OP_SUM;
}
