// SPDX-License-Identifier: GPL-2.0-only
/* agg-hot: hot parameters of sparse models (ZEBRA). */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hot.h"
#include "json.h"
#include "log.h"
#include "opts.h"

enum cmd { CMD_IDENTIFY, CMD_PACK, CMD_COMPARE, CMD_GEN, NCMD };

static const char *const cmd_name[NCMD] = { "identification", "pack", "compare", "gen" };

enum {
	OPT_BINARY = 0x100, OPT_SAMPLE, OPT_ONLINE, OPT_TAU, OPT_SKETCH,
	OPT_COVERAGE, OPT_BUDGET, OPT_STRIPES, OPT_SEED, OPT_PAIRS, OPT_IDS,
	OPT_ITERS, OPT_BATCH, OPT_PER_EXAMPLE, OPT_ZIPF, OPT_DRIFT, OPT_WINDOW,
	OPT_SPARSE, OPT_WIDTH, OPT_TOUCH, OPT_WORKER, OPT_ITER, OPT_END,
};

/* Which options each command takes (bit OPT_x - OPT_BINARY). */
#define O(x) (1u << ((x) - OPT_BINARY))
static const unsigned cmd_opts[NCMD] = {
	[CMD_IDENTIFY] = O(OPT_BINARY) | O(OPT_SAMPLE) | O(OPT_ONLINE) | O(OPT_TAU) |
			 O(OPT_WINDOW) | O(OPT_SKETCH) | O(OPT_COVERAGE) | O(OPT_BUDGET) |
			 O(OPT_STRIPES) | O(OPT_SEED),
	[CMD_PACK] = O(OPT_BINARY) | O(OPT_PAIRS) | O(OPT_SEED),
	[CMD_COMPARE] = 0,
	[CMD_GEN] = O(OPT_BINARY) | O(OPT_IDS) | O(OPT_ITERS) | O(OPT_BATCH) |
		    O(OPT_PER_EXAMPLE) | O(OPT_ZIPF) | O(OPT_DRIFT) | O(OPT_SEED) |
		    O(OPT_SPARSE) | O(OPT_WIDTH) | O(OPT_TOUCH) | O(OPT_WORKER) | O(OPT_ITER),
};

/* gen: the options of a log, and those of a sparse gradient (--sparse). */
#define GEN_LOG_OPTS	(O(OPT_ITERS) | O(OPT_BATCH) | O(OPT_PER_EXAMPLE))
#define GEN_SPARSE_OPTS	(O(OPT_WIDTH) | O(OPT_TOUCH) | O(OPT_WORKER) | O(OPT_ITER))

static struct {
	enum cmd cmd;
	const char *arg[2];
	int nargs;
	unsigned given;		/* O(option) of the options given */
	const char *given_name[OPT_END - OPT_BINARY];
	struct agg_hot_opts hot;
	struct agg_hot_gen_opts gen;
	size_t pairs;
	bool sparse;
} env = {
	.hot = { .coverage = 0.5, .budget = 1 << 20, .stripes = 128, .seed = 1, .tau = 0.1 },
	.gen = { .ids = 1000000, .iters = 100, .batch = 1000, .per_example = 10,
		 .zipf = 1.1, .seed = 1, .width = 16, .touch = 0.015 },
	.pairs = 64,
};

#define DEFAULT_SKETCH	(1 << 20)

static const char doc[] =
"Find the hot parameters of a sparse model in an update log and lay them out\n"
"over the lock stripes of the XDP hot-slot map (ZEBRA).\n"
"\n"
"USAGE:\n"
"  agg-hot [OPTION...] [LOG]              the hot-parameter table of a log\n"
"  agg-hot pack [OPTION...] TABLE [BATCH]  pack one worker's batch (Alg. 1)\n"
"  agg-hot compare A B                    precision and Kendall tau of tables\n"
"  agg-hot gen [OPTION...]                a synthetic Zipf update log\n"
"  agg-hot gen --sparse [OPTION...]       one worker's sparse gradient\n"
"\n"
"A log is text, 'ITER ID ID ...' or one ID per line, or with --binary\n"
"little-endian u64 ids with 0xffffffffffffffff after each iteration; LOG or\n"
"BATCH absent or '-' is standard input.  Sizes take k/M/G (1000) and\n"
"Ki/Mi/Gi (1024) suffixes.\n"
"\n"
"EXAMPLES:\n"
"  agg-hot gen --ids 1M --iters 100 --batch 8192 --per-example 26 > log.txt\n"
"  for w in 0 1 2 3; do agg-hot gen --sparse --binary --worker $w --iter 3 \\\n"
"      > grad.3.$w; done                  # agg-sparse(5) files for agg-send\n"
"  agg-hot --coverage 0.8 --budget 1Mi --stripes 128 log.txt > hot.txt\n"
"  agg-hot --sample 0.08 --coverage 0.8 log.txt | agg-hot compare hot.txt -\n"
"  agg-hot --online 5 log.txt        # a new table when the hot set moves\n"
"  awk '$1 == 7' log.txt | head -512 | agg-hot pack hot.txt\n"
"\v"
"Exit status: 0 ok, 2 bad usage or bad input, 3 system failure.\n"
"See agg-hot(1) and, for the table, agg-hot(5).";

static const struct argp_option options[] = {
	{ NULL, 0, NULL, 0, "Identification (agg-hot [LOG]):", 1 },
	{ "sample", OPT_SAMPLE, "RATE", 0,
	  "Count a random fraction RATE of the examples (ZEBRA's sampling)", 1 },
	{ "online", OPT_ONLINE, "T", 0,
	  "Recompute every T iterations; print a table when it moved", 1 },
	{ "tau", OPT_TAU, "X", 0,
	  "--online: top-k Kendall tau distance a table must move to be printed "
	  "(default 0.1)", 1 },
	{ "window", OPT_WINDOW, NULL, 0,
	  "--online: count each T iterations afresh, not all since the start", 1 },
	{ "sketch", OPT_SKETCH, "COUNTERS", OPTION_ARG_OPTIONAL,
	  "Count with Space-Saving in bounded memory (default 1Mi counters, 32 MiB)", 1 },
	{ "coverage", OPT_COVERAGE, "P", 0,
	  "Principle 1: share of the updates the hot set covers (default 0.5)", 1 },
	{ "budget", OPT_BUDGET, "BYTES", 0,
	  "Principle 1: bytes of hot slots, 24 per parameter (default 1Mi)", 1 },
	{ "stripes", OPT_STRIPES, "M", 0, "Lock stripes of the hot-slot map (default 128)", 1 },
	{ NULL, 0, NULL, 0, "Packing (agg-hot pack TABLE [BATCH]):", 2 },
	{ "pairs", OPT_PAIRS, "P", 0, "Pairs per packet (default 64)", 2 },
	{ NULL, 0, NULL, 0, "Workload (agg-hot gen):", 3 },
	{ "ids", OPT_IDS, "N", 0, "Parameters (default 1M)", 3 },
	{ "iters", OPT_ITERS, "T", 0, "Iterations (default 100)", 3 },
	{ "batch", OPT_BATCH, "B", 0, "Examples per iteration (default 1000)", 3 },
	{ "per-example", OPT_PER_EXAMPLE, "F", 0, "Updates per example (default 10)", 3 },
	{ "zipf", OPT_ZIPF, "S", 0, "Zipf exponent (default 1.1)", 3 },
	{ "drift", OPT_DRIFT, "R", 0,
	  "Ranks the popularity order moves per iteration (default 0)", 3 },
	{ "sparse", OPT_SPARSE, NULL, 0,
	  "Write one worker's sparse gradient (agg-sparse(5)) instead of a log", 3 },
	{ "width", OPT_WIDTH, "D", 0, "--sparse: values per row (default 16)", 3 },
	{ "touch", OPT_TOUCH, "F", 0,
	  "--sparse: share of the rows a worker touches (default 0.015)", 3 },
	{ "worker", OPT_WORKER, "K", 0, "--sparse: the worker (default 0)", 3 },
	{ "iter", OPT_ITER, "I", 0, "--sparse: the iteration (default 0)", 3 },
	{ NULL, 0, NULL, 0, "Any command:", 4 },
	{ "binary", OPT_BINARY, NULL, 0, "Logs are little-endian u64 ids", 4 },
	{ "seed", OPT_SEED, "N", 0,
	  "Seed of sampling, pack's random layout and gen (default 1)", 4 },
	{ 0 }
};

static const char *cur_opt;	/* the option being parsed, for messages */

static uint64_t size_arg(struct argp_state *state, const char *arg, uint64_t min,
			 uint64_t max)
{
	uint64_t v;

	if (agg_parse_size(arg, &v, NULL) || v < min || v > max)
		argp_error(state, "bad --%s '%s' (%" PRIu64 " to %" PRIu64 ")", cur_opt, arg,
			   min, max);
	return v;
}

/* lo < v <= hi, or lo <= v <= hi with lo_incl */
static double dbl_arg(struct argp_state *state, const char *arg, double lo, bool lo_incl,
		      double hi)
{
	double v;

	if (agg_parse_double(arg, &v, NULL) || !(lo_incl ? v >= lo : v > lo) || !(v <= hi))
		argp_error(state, "bad --%s '%s' (%s %g, at most %g)", cur_opt, arg,
			   lo_incl ? "at least" : "more than", lo, hi);
	return v;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	if (key >= OPT_BINARY && key < OPT_END) {
		env.given |= O(key);
		for (const struct argp_option *o = options; o->name || o->doc; o++)
			if (o->key == key)
				cur_opt = env.given_name[key - OPT_BINARY] = o->name;
	}
	switch (key) {
	case OPT_BINARY: env.gen.binary = true; break;
	case OPT_SAMPLE: env.hot.sample = dbl_arg(state, arg, 0, false, 1); break;
	case OPT_ONLINE: env.hot.online = size_arg(state, arg, 1, UINT32_MAX); break;
	case OPT_TAU: env.hot.tau = dbl_arg(state, arg, 0, true, 1); break;
	case OPT_WINDOW: env.hot.window = true; break;
	case OPT_SKETCH:
		env.hot.sketch = arg ? size_arg(state, arg, 1, 1 << 30) : DEFAULT_SKETCH;
		break;
	case OPT_COVERAGE: env.hot.coverage = dbl_arg(state, arg, 0, false, 1); break;
	case OPT_BUDGET: env.hot.budget = size_arg(state, arg, 0, UINT64_MAX); break;
	case OPT_STRIPES: env.hot.stripes = size_arg(state, arg, 1, 1 << 20); break;
	case OPT_SEED:
		env.hot.seed = env.gen.seed = size_arg(state, arg, 0, UINT64_MAX);
		break;
	case OPT_PAIRS: env.pairs = size_arg(state, arg, 1, 1 << 20); break;
	case OPT_IDS: env.gen.ids = size_arg(state, arg, 1, AGG_HOT_ITER_END - 1); break;
	case OPT_ITERS: env.gen.iters = size_arg(state, arg, 1, UINT32_MAX); break;
	case OPT_BATCH: env.gen.batch = size_arg(state, arg, 1, UINT32_MAX); break;
	case OPT_PER_EXAMPLE: env.gen.per_example = size_arg(state, arg, 1, 1 << 20); break;
	case OPT_ZIPF: env.gen.zipf = dbl_arg(state, arg, 0, false, 100); break;
	case OPT_DRIFT: env.gen.drift = size_arg(state, arg, 0, UINT64_MAX); break;
	case OPT_SPARSE: env.sparse = true; break;
	case OPT_WIDTH: env.gen.width = size_arg(state, arg, 1, AGG_SPARSE_MAX_WIDTH); break;
	case OPT_TOUCH: env.gen.touch = dbl_arg(state, arg, 0, false, 1); break;
	case OPT_WORKER: env.gen.worker = size_arg(state, arg, 0, UINT32_MAX); break;
	case OPT_ITER: env.gen.iter = size_arg(state, arg, 0, UINT32_MAX); break;
	case ARGP_KEY_ARG:
		if (state->arg_num == 0) {
			for (int c = CMD_PACK; c < NCMD; c++)
				if (!strcmp(arg, cmd_name[c])) {
					env.cmd = c;
					return 0;
				}
		}
		if (env.nargs == 2)
			argp_error(state, "too many arguments");
		env.arg[env.nargs++] = arg;
		break;
	case ARGP_KEY_END: {
		static const int want_min[NCMD] = { 0, 1, 2, 0 }, want_max[NCMD] = { 1, 2, 2, 0 };
		unsigned stray = env.given & ~cmd_opts[env.cmd];

		if (env.nargs < want_min[env.cmd])
			argp_error(state, "%s needs %s", cmd_name[env.cmd],
				   env.cmd == CMD_PACK ? "a TABLE" : "two tables, A and B");
		if (env.nargs > want_max[env.cmd])
			argp_error(state, "too many arguments");
		for (int i = 0; stray; i++, stray >>= 1)
			if (stray & 1)
				argp_error(state, "--%s does not apply to %s", env.given_name[i],
					   cmd_name[env.cmd]);
		if (env.cmd == CMD_GEN && (env.given & (env.sparse ? GEN_LOG_OPTS : GEN_SPARSE_OPTS)))
			for (int i = 0; i < OPT_END - OPT_BINARY; i++)
				if (env.given & O(OPT_BINARY + i) &
				    (env.sparse ? GEN_LOG_OPTS : GEN_SPARSE_OPTS))
					argp_error(state, env.sparse ? "--%s does not apply to gen --sparse" :
						   "--%s needs gen --sparse", env.given_name[i]);
		if (env.cmd == CMD_COMPARE && !strcmp(env.arg[0], "-") && !strcmp(env.arg[1], "-"))
			argp_error(state, "only one of A and B can be standard input");
		if ((env.given & (O(OPT_TAU) | O(OPT_WINDOW))) && !env.hot.online)
			argp_error(state, "--%s needs --online",
				   env.given & O(OPT_TAU) ? "tau" : "window");
		break;
	}
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static FILE *open_in(const char *name, const char **fname)
{
	FILE *f;

	if (!name || !strcmp(name, "-")) {
		*fname = "<stdin>";
		return stdin;
	}
	*fname = name;
	f = fopen(name, "r");
	if (!f)
		agg_err("cannot open %s: %s", name, strerror(errno));
	return f;
}

static void close_in(FILE *f)
{
	if (f && f != stdin)
		fclose(f);
}

static int input_error(int err, const char *fname, const struct agg_diag *d)
{
	if (err == -EINVAL) {
		agg_err("%s", d->msg);
		return AGG_EXIT_USAGE;
	}
	if (err == -ENOMEM)
		agg_err("%s: out of memory", fname);
	else
		agg_err("cannot read %s: %s", fname, strerror(-err));
	return AGG_EXIT_SYSTEM;
}

/* ---- identify ----------------------------------------------------------------------- */

static void print_table(const struct agg_hot_table *t)
{
	if (!agg_print_json()) {
		agg_hot_table_write(t, stdout);
		return;
	}
	agg_print_obj_open(NULL);
	agg_print_uint("k", NULL, t->k);
	agg_print_float("coverage", NULL, t->coverage);
	agg_print_float("achieved", NULL, t->achieved);
	agg_print_uint("budget", NULL, t->budget);
	agg_print_uint("slot_bytes", NULL, AGG_HOT_SLOT_BYTES);
	agg_print_uint("stripes", NULL, t->stripes);
	agg_print_uint("updates", NULL, t->updates);
	agg_print_uint("iter", NULL, t->iter);
	agg_print_float("sample", NULL, t->sample);
	agg_print_str("method", NULL, t->sketch ? "sketch" : "exact");
	agg_print_arr_open("params");
	for (size_t i = 0; i < t->k; i++) {
		agg_print_obj_open(NULL);
		agg_print_uint("rank", NULL, i);
		agg_print_uint("id", NULL, t->e[i].id);
		agg_print_uint("freq", NULL, t->e[i].freq);
		agg_print_uint("stripe", NULL, agg_hot_stripe(i, t->stripes));
		agg_print_uint("slot", NULL, agg_hot_slot(i, t->stripes));
		agg_print_obj_close();
	}
	agg_print_arr_close();
	agg_print_obj_close();
}

static int emit_table(const struct agg_hot_table *t, void *arg)
{
	bool *warned = arg;

	if (t->budget_bound && !*warned) {
		agg_warn("budget %" PRIu64 " B holds %zu hot parameters of %d B covering "
			 "%.1f%% of the updates, short of --coverage %g%%", t->budget, t->k,
			 AGG_HOT_SLOT_BYTES, 100 * t->achieved, 100 * t->coverage);
		*warned = true;
	}
	print_table(t);
	if (env.hot.online)
		fflush(stdout);		/* a table as soon as it is made */
	return ferror(stdout) ? -EIO : 0;
}

static int run_identify(void)
{
	struct agg_hot_ident_stats st;
	struct agg_hot_log log;
	struct agg_diag d;
	const char *fname;
	bool warned = false;
	FILE *f = open_in(env.arg[0], &fname);
	int err;

	if (!f)
		return AGG_EXIT_USAGE;
	if (env.hot.sketch)
		agg_info("sketch: %zu counters, %zu bytes", env.hot.sketch,
			 agg_hot_sketch_bytes(env.hot.sketch));
	agg_hot_log_open(&log, f, fname, env.gen.binary);
	if (env.hot.online)
		agg_print_arr_open(NULL);
	err = agg_hot_identify(&log, &env.hot, emit_table, &warned, &st, &d);
	if (env.hot.online)
		agg_print_arr_close();
	agg_hot_log_close(&log);
	close_in(f);
	if (err == -EIO && ferror(stdout))
		return AGG_EXIT_SYSTEM;		/* agg_opts_exit says so */
	if (err)
		return input_error(err, fname, &d);
	agg_info("%" PRIu64 " updates in %" PRIu64 " iterations, %" PRIu64 " counted; "
		 "%" PRIu64 " tables made, %" PRIu64 " printed; counters %zu bytes",
		 st.updates, st.iters, st.counted, st.tables, st.emitted, st.count_bytes);
	return 0;
}

/* ---- compare ------------------------------------------------------------------------- */

static int read_table(const char *name, struct agg_hot_table *t)
{
	struct agg_diag d;
	const char *fname;
	FILE *f = open_in(name, &fname);
	int err;

	if (!f)
		return AGG_EXIT_USAGE;
	err = agg_hot_table_read(t, f, fname, &d);
	close_in(f);
	return err ? input_error(err, fname, &d) : 0;
}

static int run_compare(void)
{
	struct agg_hot_table a, b;
	size_t common, ka, kb;
	double prec, recall, kt, ktk;
	int rc;

	if ((rc = read_table(env.arg[0], &a)))
		return rc;
	if ((rc = read_table(env.arg[1], &b))) {
		agg_hot_table_free(&a);
		return rc;
	}
	prec = agg_hot_precision(&a, &b);
	recall = agg_hot_precision(&b, &a);
	kt = agg_hot_kendall(&a, &b, &common);
	ktk = agg_hot_kendall_topk(&a, &b);
	ka = a.k;
	kb = b.k;
	agg_hot_table_free(&a);
	agg_hot_table_free(&b);
	if (isnan(prec) || isnan(recall) || isnan(kt) || isnan(ktk)) {
		agg_err("out of memory");
		return AGG_EXIT_SYSTEM;
	}
	agg_print_obj_open(NULL);
	agg_print_uint("k_a", "k_a %" PRIu64 "\n", ka);
	agg_print_uint("k_b", "k_b %" PRIu64 "\n", kb);
	agg_print_uint("common", "common %" PRIu64 "\n", common);
	agg_print_float("precision", "precision %.6f\n", prec);
	agg_print_float("recall", "recall %.6f\n", recall);
	agg_print_float("kendall_tau", "kendall_tau %.6f\n", kt);
	agg_print_float("kendall_topk", "kendall_topk %.6f\n", ktk);
	agg_print_obj_close();
	return 0;
}

/* ---- pack --------------------------------------------------------------------------------- */

static int read_batch(uint64_t **batch, size_t *nb)
{
	struct agg_hot_log log;
	struct agg_diag d;
	const char *fname;
	uint64_t *ids = NULL, iter;
	size_t n, cap = 0, bcap = 0;
	FILE *f = open_in(env.arg[1], &fname);
	int r;

	*batch = NULL;
	*nb = 0;
	if (!f)
		return AGG_EXIT_USAGE;
	agg_hot_log_open(&log, f, fname, env.gen.binary);
	while ((r = agg_hot_log_next(&log, &ids, &n, &cap, &iter, &d)) > 0) {
		if (*nb + n > bcap) {
			uint64_t *p;

			while (*nb + n > bcap)
				bcap = bcap ? 2 * bcap : 4096;
			p = realloc(*batch, bcap * sizeof(*p));
			if (!p) {
				r = -ENOMEM;
				break;
			}
			*batch = p;
		}
		memcpy(*batch + *nb, ids, n * sizeof(*ids));
		*nb += n;
	}
	agg_hot_log_close(&log);
	free(ids);
	close_in(f);
	return r < 0 ? input_error(r, fname, &d) : 0;
}

static void print_pack_row(const char *layout, const char *packing,
			   const struct agg_hot_pack_stats *st)
{
	agg_print_obj_open(NULL);
	agg_print_str("layout", "%-7s", layout);
	agg_print_str("packing", " %-10s", packing);
	agg_print_uint("pairs", " %8" PRIu64, st->pairs);
	agg_print_uint("packets", " %8" PRIu64, st->packets);
	agg_print_uint("conflicts", " %9" PRIu64, st->conflicts);
	agg_print_float("conflicts_per_packet", " %10.4f",
			st->packets ? (double)st->conflicts / st->packets : 0);
	agg_print_uint("padded", " %7" PRIu64 "\n", st->padded);
	agg_print_obj_close();
}

static int run_pack(void)
{
	static const char *const layout_name[2] = { "heat", "random" };
	static const char *const packing_name[2] = { "sequential", "alg1" };
	struct agg_hot_pack_stats st[2][2];
	struct agg_hot_index *x = NULL;
	struct agg_hot_table t;
	uint64_t *batch = NULL, *ranks = NULL;
	unsigned *stripe_of[2] = { NULL, NULL };
	size_t nb, nr = 0, cold = 0;
	int rc, err;

	if ((rc = read_table(env.arg[0], &t)))
		return rc;
	if ((rc = read_batch(&batch, &nb)))
		goto out;
	rc = AGG_EXIT_SYSTEM;
	stripe_of[0] = malloc((t.k + 1) * sizeof(unsigned));
	stripe_of[1] = malloc((t.k + 1) * sizeof(unsigned));
	if (!stripe_of[0] || !stripe_of[1] || agg_hot_index_new(&x, &t) ||
	    agg_hot_batch_ranks(x, batch, nb, &ranks, &nr, &cold))
		goto oom;
	for (int l = 0; l < 2; l++) {
		if ((err = agg_hot_layout(stripe_of[l], t.k, t.stripes, l, env.hot.seed)))
			goto oom;
		for (int p = 0; p < 2; p++)
			if ((err = agg_hot_pack(ranks, nr, stripe_of[l], t.stripes, env.pairs, p,
						NULL, &st[l][p])))
				goto oom;
	}
	agg_info("batch: %zu updates, %zu hot pairs, %zu cold ids left to user space; "
		 "%u stripes", nb, nr, cold, t.stripes);
	agg_print_arr_open(NULL);
	agg_print_text("%-7s %-10s %8s %8s %9s %10s %7s\n", "layout", "packing", "pairs",
		       "packets", "conflicts", "per_packet", "padded");
	for (int l = 0; l < 2; l++)
		for (int p = 1; p >= 0; p--)
			print_pack_row(layout_name[l], packing_name[p], &st[l][p]);
	agg_print_arr_close();
	rc = 0;
	goto out;
oom:
	agg_err("out of memory");
out:
	agg_hot_index_free(x);
	free(stripe_of[0]);
	free(stripe_of[1]);
	free(ranks);
	free(batch);
	agg_hot_table_free(&t);
	return rc;
}

/* ---- gen ---------------------------------------------------------------------------------- */

static int run_gen_sparse(void)
{
	struct agg_sparse g;
	int err = agg_hot_gen_sparse(&env.gen, &g);

	if (err == -ERANGE) {
		agg_err("--touch %g of %" PRIu64 " rows is out of reach of Zipf %g (1000 draws a "
			"row): touch fewer rows or lower --zipf", env.gen.touch, env.gen.ids,
			env.gen.zipf);
		return AGG_EXIT_USAGE;
	}
	if (err) {
		agg_err("cannot generate: %s", strerror(-err));
		return err == -EINVAL ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	agg_info("worker %u iteration %" PRIu64 ": %" PRIu64 " rows of %u values", env.gen.worker,
		 env.gen.iter, g.n, g.width);
	err = agg_sparse_write(&g, stdout, !env.gen.binary);
	agg_sparse_free(&g);
	return err ? AGG_EXIT_SYSTEM : 0;	/* agg_opts_exit names a write error */
}

static int run_gen(void)
{
	int err;

	if (env.gen.binary && isatty(STDOUT_FILENO)) {
		agg_err("not writing a binary %s to a terminal (redirect it)",
			env.sparse ? "gradient" : "log");
		return AGG_EXIT_USAGE;
	}
	if (env.sparse)
		return run_gen_sparse();
	err = agg_hot_gen(stdout, &env.gen);
	if (err == -EIO)
		return AGG_EXIT_SYSTEM;		/* agg_opts_exit names the error */
	if (err) {
		agg_err("cannot generate: %s", strerror(-err));
		return err == -EINVAL ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct argp argp = {
		.options = options, .parser = parse_opt,
		.args_doc = "[LOG]\npack TABLE [BATCH]\ncompare A B\ngen",
		.doc = doc, .children = agg_common_children,
	};
	struct rusage ru;
	int rc = 0;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_print_start(agg_common.json, agg_common.pretty);
	switch (env.cmd) {
	case CMD_IDENTIFY: rc = run_identify(); break;
	case CMD_PACK: rc = run_pack(); break;
	case CMD_COMPARE: rc = run_compare(); break;
	case CMD_GEN: rc = run_gen(); break;
	default: break;
	}
	if (!getrusage(RUSAGE_SELF, &ru))
		agg_info("peak memory %ld KiB", ru.ru_maxrss);
	return agg_opts_exit(rc);
}
