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

#include "hot.h"
#include "json.h"
#include "log.h"
#include "opts.h"

enum cmd { CMD_IDENTIFY, CMD_PACK, CMD_COMPARE, CMD_GEN };

static struct {
	enum cmd cmd;
	const char *arg[2];
	int nargs;
	bool binary;
	double sample;		/* 0: all */
	uint64_t online;	/* T iterations; 0: off */
	double tau;
	size_t sketch;		/* counters; 0: exact */
	double coverage;
	uint64_t budget;
	unsigned stripes;
	uint64_t seed;
	size_t pairs;
	uint64_t ids, iters, batch, per_example;
	double zipf;
} env = {
	.tau = 0.1, .coverage = 0.5, .budget = 1 << 20, .stripes = 128, .seed = 1,
	.pairs = 64, .ids = 1000000, .iters = 100, .batch = 100, .per_example = 10,
	.zipf = 1.1,
};

enum {
	OPT_BINARY = 0x100, OPT_SAMPLE, OPT_ONLINE, OPT_TAU, OPT_SKETCH,
	OPT_COVERAGE, OPT_BUDGET, OPT_STRIPES, OPT_SEED, OPT_PAIRS, OPT_IDS,
	OPT_ITERS, OPT_BATCH, OPT_PER_EXAMPLE, OPT_ZIPF,
};

static const char doc[] =
"Find the hot parameters of a sparse model in an update log and lay them out\n"
"for the XDP hot-slot map (ZEBRA).\n"
"\n"
"  agg-hot [OPTION...] [LOG]        hot-parameter table from an update log\n"
"  agg-hot pack [OPTION...] TABLE [LOG]  pack one worker's batch (Alg. 1)\n"
"  agg-hot compare A B               precision and Kendall tau of two tables\n"
"  agg-hot gen [OPTION...]           a synthetic Zipf update log\n"
"\n"
"A log is text, 'ITER ID ID ...' or one ID per line, or with --binary\n"
"little-endian u64 ids with 0xffffffffffffffff between iterations; LOG\n"
"absent or '-' is standard input.\n"
"\n"
"EXAMPLES:\n"
"  agg-hot gen --ids 1M --iters 100 > log.txt\n"
"  agg-hot --coverage 0.5 --budget 1Mi --stripes 64 log.txt > hot.txt\n"
"  agg-hot --sample 0.08 log.txt > sampled.txt; agg-hot compare hot.txt sampled.txt\n"
"  agg-hot --online 5 log.txt          # a new table when the hot set moves\n"
"  agg-hot pack --pairs 64 hot.txt batch.txt\n"
"\v"
"Exit status: 0 ok, 2 bad usage or bad input, 3 system failure.";

static const struct argp_option options[] = {
	{ "binary", OPT_BINARY, NULL, 0, "Logs are little-endian u64 ids", 1 },
	{ "sample", OPT_SAMPLE, "RATE", 0,
	  "Count a random fraction RATE of the examples (ZEBRA's sampling)", 1 },
	{ "online", OPT_ONLINE, "T", 0,
	  "Recompute every T iterations; print a table when it moved", 1 },
	{ "tau", OPT_TAU, "X", 0,
	  "With --online: how far a table must move to be printed (default 0.1)", 1 },
	{ "sketch", OPT_SKETCH, "COUNTERS", OPTION_ARG_OPTIONAL,
	  "Space-Saving in bounded memory (default 1048576 counters, 32 MiB)", 1 },
	{ "coverage", OPT_COVERAGE, "P", 0,
	  "Principle 1: share of the updates the hot set should cover (default 0.5)", 1 },
	{ "budget", OPT_BUDGET, "BYTES", 0,
	  "Principle 1: memory for hot slots, 16 bytes each (default 1Mi)", 1 },
	{ "stripes", OPT_STRIPES, "M", 0, "Lock stripes of the hot-slot map (default 128)", 1 },
	{ "seed", OPT_SEED, "N", 0, "Seed of sampling, layouts and gen (default 1)", 1 },
	{ "pairs", OPT_PAIRS, "P", 0, "pack: pairs per packet (default 64)", 2 },
	{ "ids", OPT_IDS, "N", 0, "gen: parameters (default 1M)", 3 },
	{ "iters", OPT_ITERS, "T", 0, "gen: iterations (default 100)", 3 },
	{ "batch", OPT_BATCH, "B", 0, "gen: examples per iteration (default 100)", 3 },
	{ "per-example", OPT_PER_EXAMPLE, "F", 0, "gen: updates per example (default 10)", 3 },
	{ "zipf", OPT_ZIPF, "S", 0, "gen: Zipf exponent (default 1.1)", 3 },
	{ 0 }
};

static uint64_t size_arg(struct argp_state *state, const char *what, const char *arg,
			 uint64_t min, uint64_t max)
{
	uint64_t v;

	if (agg_parse_size(arg, &v, NULL) || v < min || v > max)
		argp_error(state, "bad %s '%s' (%" PRIu64 " to %" PRIu64 ")", what, arg,
			   min, max);
	return v;
}

static double dbl_arg(struct argp_state *state, const char *what, const char *arg,
		      double lo, double hi)
{
	double v;

	if (agg_parse_double(arg, &v, NULL) || v <= lo || v > hi)
		argp_error(state, "bad %s '%s' (more than %g, at most %g)", what, arg, lo, hi);
	return v;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case OPT_BINARY: env.binary = true; break;
	case OPT_SAMPLE: env.sample = dbl_arg(state, "sample rate", arg, 0, 1); break;
	case OPT_ONLINE: env.online = size_arg(state, "--online", arg, 1, UINT32_MAX); break;
	case OPT_TAU: env.tau = dbl_arg(state, "tau", arg, -1e-300, 1); break;
	case OPT_SKETCH:
		env.sketch = arg ? size_arg(state, "sketch counters", arg, 1, 1ULL << 30) :
			     1 << 20;
		break;
	case OPT_COVERAGE: env.coverage = dbl_arg(state, "coverage", arg, 0, 1); break;
	case OPT_BUDGET: env.budget = size_arg(state, "budget", arg, AGG_HOT_SLOT_BYTES,
					       UINT64_MAX); break;
	case OPT_STRIPES: env.stripes = size_arg(state, "stripes", arg, 1, 1 << 20); break;
	case OPT_SEED: env.seed = size_arg(state, "seed", arg, 0, UINT64_MAX); break;
	case OPT_PAIRS: env.pairs = size_arg(state, "pairs", arg, 1, 1 << 20); break;
	case OPT_IDS: env.ids = size_arg(state, "ids", arg, 1, 1ULL << 40); break;
	case OPT_ITERS: env.iters = size_arg(state, "iters", arg, 1, UINT32_MAX); break;
	case OPT_BATCH: env.batch = size_arg(state, "batch", arg, 1, UINT32_MAX); break;
	case OPT_PER_EXAMPLE:
		env.per_example = size_arg(state, "per-example", arg, 1, 1 << 20);
		break;
	case OPT_ZIPF: env.zipf = dbl_arg(state, "zipf exponent", arg, 0, 100); break;
	case ARGP_KEY_ARG:
		if (state->arg_num == 0 && env.cmd == CMD_IDENTIFY) {
			if (!strcmp(arg, "pack")) { env.cmd = CMD_PACK; break; }
			if (!strcmp(arg, "compare")) { env.cmd = CMD_COMPARE; break; }
			if (!strcmp(arg, "gen")) { env.cmd = CMD_GEN; break; }
		}
		if (env.nargs == 2)
			argp_error(state, "too many arguments");
		env.arg[env.nargs++] = arg;
		break;
	case ARGP_KEY_END:
		if (env.cmd == CMD_COMPARE && env.nargs != 2)
			argp_error(state, "compare needs two tables");
		if (env.cmd == CMD_PACK && env.nargs < 1)
			argp_error(state, "pack needs a TABLE");
		if ((env.cmd == CMD_IDENTIFY && env.nargs > 1) ||
		    (env.cmd == CMD_GEN && env.nargs > 0))
			argp_error(state, "too many arguments");
		if (env.online && env.sketch)
			argp_error(state, "--online counts exactly; drop --sketch");
		break;
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

static int input_error(int err, const char *fname, const struct agg_diag *d)
{
	if (err == -EINVAL) {
		agg_err("%s", d->msg);
		return AGG_EXIT_USAGE;
	}
	agg_err("cannot read %s: %s", fname, strerror(-err));
	return AGG_EXIT_SYSTEM;
}

/* ---- identify --------------------------------------------------------------------------- */

struct counter {
	struct agg_hot_counts exact;
	struct agg_hot_sketch *sketch;
};

static int count_id(struct counter *c, uint64_t id)
{
	if (c->sketch) {
		agg_hot_sketch_add(c->sketch, id);
		return 0;
	}
	return agg_hot_counts_add(&c->exact, id);
}

/* Principle 1 over what is counted so far, laid out over the stripes. */
static int make_table(const struct counter *c, uint64_t iters, struct agg_hot_table *t,
		      bool warn)
{
	uint64_t total = c->sketch ? agg_hot_sketch_total(c->sketch) : c->exact.total;
	size_t kmax = env.budget / AGG_HOT_SLOT_BYTES, n;
	struct agg_hot_entry *e;
	struct agg_hot_k k;
	int err;

	err = c->sketch ? agg_hot_sketch_top(c->sketch, kmax, &e, &n) :
	      agg_hot_counts_top(&c->exact, kmax, &e, &n);
	if (err)
		return err;
	agg_hot_choose_k(e, n, total, env.coverage, env.budget, &k);
	if (warn && k.budget_bound)
		agg_warn("budget %" PRIu64 " B holds %zu hot parameters covering %.1f%% "
			 "of the updates, less than --coverage %.1f%%", env.budget, k.k,
			 100 * k.achieved, 100 * env.coverage);
	*t = (struct agg_hot_table){
		.k = k.k, .coverage = env.coverage, .achieved = k.achieved,
		.budget = env.budget, .stripes = env.stripes, .updates = total,
		.iter = iters, .e = e,
	};
	return 0;
}

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
	agg_print_uint("stripes", NULL, t->stripes);
	agg_print_uint("updates", NULL, t->updates);
	agg_print_uint("iter", NULL, t->iter);
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

/* How far table b moved from a: Kendall tau over the common ids, or the
 * share of ids not in common, whichever is larger. */
static double moved(const struct agg_hot_table *a, const struct agg_hot_table *b)
{
	double miss = 1 - agg_hot_precision(a, b), kt = agg_hot_kendall(a, b, NULL);

	return miss > kt ? miss : kt;
}

static int run_identify(void)
{
	struct counter c = { 0 };
	struct agg_hot_log log;
	struct agg_hot_table cur = { 0 };
	struct agg_rand rng;
	struct agg_diag d;
	const char *fname;
	uint64_t *ids = NULL, iter, last_iter = 0, iters = 0;
	size_t n, cap = 0;
	bool have_cur = false, any = false;
	FILE *f = open_in(env.arg[0], &fname);
	int r, rc = 0;

	if (!f)
		return AGG_EXIT_USAGE;
	agg_rand_seed(&rng, env.seed);
	if (env.sketch) {
		c.sketch = agg_hot_sketch_new(env.sketch);
		if (!c.sketch) {
			agg_err("cannot allocate %zu sketch counters", env.sketch);
			return AGG_EXIT_SYSTEM;
		}
		agg_info("sketch: %zu counters, %zu bytes", env.sketch,
			 agg_hot_sketch_bytes(env.sketch));
	}
	agg_hot_log_open(&log, f, fname, env.binary);
	if (env.online)
		agg_print_arr_open(NULL);
	while ((r = agg_hot_log_next(&log, &ids, &n, &cap, &iter, &d)) > 0) {
		if (!any || iter != last_iter) {
			if (any)
				iters++;
			/* Every T iterations: recompute, print if it moved. */
			if (env.online && any && iters % env.online == 0) {
				struct agg_hot_table t;

				if ((rc = make_table(&c, iters, &t, false)))
					break;
				if (!have_cur || moved(&cur, &t) > env.tau) {
					print_table(&t);
					agg_hot_table_free(&cur);
					cur = t;
					have_cur = true;
				} else {
					agg_hot_table_free(&t);
				}
			}
			last_iter = iter;
			any = true;
		}
		if (env.sample > 0 && !log.binary && agg_rand_double(&rng) >= env.sample)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (env.sample > 0 && log.binary && agg_rand_double(&rng) >= env.sample)
				continue;
			r = count_id(&c, ids[i]);
			if (r) {
				agg_err("%s: id %" PRIu64 " %s", fname, ids[i], r == -ERANGE ?
					"is 2^32 or more: exact counting is dense, use --sketch" :
					strerror(-r));
				rc = r == -ERANGE ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
				goto out;
			}
		}
	}
	if (r < 0) {
		rc = input_error(r, fname, &d);
		goto out;
	}
	if (rc) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	iters += any;
	{
		struct agg_hot_table t;

		if (make_table(&c, iters, &t, !env.online)) {
			agg_err("out of memory");
			rc = AGG_EXIT_SYSTEM;
			goto out;
		}
		if (!env.online || !have_cur || moved(&cur, &t) > env.tau)
			print_table(&t);
		agg_hot_table_free(&t);
	}
out:
	if (env.online)
		agg_print_arr_close();
	agg_hot_table_free(&cur);
	agg_hot_log_close(&log);
	agg_hot_counts_free(&c.exact);
	agg_hot_sketch_free(c.sketch);
	free(ids);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* ---- compare ---------------------------------------------------------------------------------- */

static int read_table(const char *name, struct agg_hot_table *t)
{
	struct agg_diag d;
	const char *fname;
	FILE *f = open_in(name, &fname);
	int err;

	if (!f)
		return AGG_EXIT_USAGE;
	err = agg_hot_table_read(t, f, fname, &d);
	if (f != stdin)
		fclose(f);
	return err ? input_error(err, fname, &d) : 0;
}

static int run_compare(void)
{
	struct agg_hot_table a, b;
	size_t common;
	double prec, kt;
	int rc;

	if ((rc = read_table(env.arg[0], &a)))
		return rc;
	if ((rc = read_table(env.arg[1], &b))) {
		agg_hot_table_free(&a);
		return rc;
	}
	prec = agg_hot_precision(&a, &b);
	kt = agg_hot_kendall(&a, &b, &common);
	agg_print_obj_open(NULL);
	agg_print_uint("k_a", "k_a %" PRIu64 "\n", a.k);
	agg_print_uint("k_b", "k_b %" PRIu64 "\n", b.k);
	agg_print_uint("common", "common %" PRIu64 "\n", common);
	agg_print_float("precision", "precision %.6f\n", prec);
	agg_print_float("kendall_tau", "kendall_tau %.6f\n", kt);
	agg_print_obj_close();
	agg_hot_table_free(&a);
	agg_hot_table_free(&b);
	return 0;
}

/* ---- pack ----------------------------------------------------------------------------------------- */

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void print_pack_row(const char *layout, const char *packing,
			   const struct agg_hot_pack_stats *st)
{
	agg_print_obj_open(NULL);
	agg_print_str("layout", "%-7s", layout);
	agg_print_str("packing", " %-11s", packing);
	agg_print_uint("pairs", " %9" PRIu64, st->pairs);
	agg_print_uint("packets", " %8" PRIu64, st->packets);
	agg_print_uint("conflicts", " %9" PRIu64, st->conflicts);
	agg_print_float("conflicts_per_packet", " %9.4f\n",
			st->packets ? (double)st->conflicts / st->packets : 0);
	agg_print_obj_close();
}

static int run_pack(void)
{
	struct agg_hot_table t;
	struct agg_hot_log log;
	struct agg_hot_pack_stats heat, heat_seq, rnd;
	struct agg_rand rng;
	struct agg_diag d;
	struct { uint64_t id; size_t rank; } *map = NULL;
	uint64_t *ids = NULL, *batch = NULL, iter;
	size_t n, cap = 0, nb = 0, bcap = 0, cold = 0;
	unsigned *heat_of = NULL, *rnd_of = NULL;
	const char *fname;
	FILE *f;
	int r, rc;

	if ((rc = read_table(env.arg[0], &t)))
		return rc;
	f = open_in(env.arg[1], &fname);
	if (!f) {
		agg_hot_table_free(&t);
		return AGG_EXIT_USAGE;
	}
	agg_hot_log_open(&log, f, fname, env.binary);
	while ((r = agg_hot_log_next(&log, &ids, &n, &cap, &iter, &d)) > 0) {
		for (size_t i = 0; i < n; i++) {
			if (nb == bcap) {
				bcap = bcap ? 2 * bcap : 4096;
				batch = realloc(batch, bcap * sizeof(*batch));
				if (!batch) {
					r = -ENOMEM;
					goto done;
				}
			}
			batch[nb++] = ids[i];
		}
	}
done:
	agg_hot_log_close(&log);
	free(ids);
	if (f != stdin)
		fclose(f);
	if (r < 0) {
		rc = input_error(r, fname, &d);
		goto out;
	}
	/* One pair per distinct hot id, keyed by its rank. */
	map = malloc((t.k + 1) * sizeof(*map));
	heat_of = malloc((t.k + 1) * sizeof(*heat_of));
	rnd_of = malloc((t.k + 1) * sizeof(*rnd_of));
	if (!map || !heat_of || !rnd_of) {
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	for (size_t i = 0; i < t.k; i++) {
		map[i].id = t.e[i].id;
		map[i].rank = i;
	}
	qsort(map, t.k, sizeof(*map), cmp_u64);	/* id is the first member */
	qsort(batch, nb, sizeof(*batch), cmp_u64);
	{
		size_t out = 0;

		for (size_t i = 0; i < nb; i++) {
			uint64_t key[2] = { batch[i], 0 }, *hit;

			if (i && batch[i] == batch[i - 1])
				continue;
			hit = bsearch(key, map, t.k, sizeof(*map), cmp_u64);
			if (!hit) {
				cold++;
				continue;
			}
			batch[out++] = ((size_t *)hit)[1];
		}
		nb = out;
	}
	qsort(batch, nb, sizeof(*batch), cmp_u64);	/* hottest first */
	agg_rand_seed(&rng, env.seed);
	for (size_t i = 0; i < t.k; i++) {
		heat_of[i] = agg_hot_stripe(i, t.stripes);
		rnd_of[i] = agg_rand_below(&rng, t.stripes);
	}
	if (agg_hot_pack(batch, nb, heat_of, t.stripes, env.pairs, true, &heat) ||
	    agg_hot_pack(batch, nb, heat_of, t.stripes, env.pairs, false, &heat_seq) ||
	    agg_hot_pack(batch, nb, rnd_of, t.stripes, env.pairs, false, &rnd)) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_info("%zu hot pairs, %zu cold ids left to user space, %u stripes",
		 nb, cold, t.stripes);
	agg_print_arr_open(NULL);
	agg_print_text("%-7s %-11s %9s %8s %9s %9s\n", "layout", "packing", "pairs",
		       "packets", "conflicts", "per_pkt");
	print_pack_row("heat", "alg1", &heat);
	print_pack_row("heat", "sequential", &heat_seq);
	print_pack_row("random", "sequential", &rnd);
	agg_print_arr_close();
out:
	free(map);
	free(heat_of);
	free(rnd_of);
	free(batch);
	agg_hot_table_free(&t);
	return rc;
}

/* ---- gen ------------------------------------------------------------------------------------------- */

static int run_gen(void)
{
	struct agg_zipf z;
	struct agg_rand r;
	/* Ranks are scattered over the id space by an affine bijection. */
	uint64_t mul = 2654435761ULL % env.ids, n = env.ids;

	while (n > 1 && (mul == 0 || ({ uint64_t a = mul, b = n;
				 while (b) { uint64_t t2 = a % b; a = b; b = t2; } a; }) != 1))
		mul++;
	agg_zipf_init(&z, env.ids, env.zipf);
	agg_rand_seed(&r, env.seed);
	for (uint64_t it = 0; it < env.iters; it++) {
		for (uint64_t ex = 0; ex < env.batch; ex++) {
			if (!env.binary)
				printf("%" PRIu64, it);
			for (uint64_t k = 0; k < env.per_example; k++) {
				uint64_t rank = agg_zipf_draw(&z, &r) - 1;
				uint64_t id = n > 1 ? (uint64_t)(((unsigned __int128)rank * mul) % n) : 0;

				if (env.binary) {
					uint64_t le = htole64(id);

					fwrite(&le, 8, 1, stdout);
				} else {
					printf(" %" PRIu64, id);
				}
			}
			if (!env.binary)
				putchar('\n');
		}
		if (env.binary) {
			uint64_t end = AGG_HOT_ITER_END;

			fwrite(&end, 8, 1, stdout);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct argp argp = {
		.options = options, .parser = parse_opt,
		.args_doc = "[LOG]\npack TABLE [LOG]\ncompare A B\ngen",
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
	}
	if (!getrusage(RUSAGE_SELF, &ru))
		agg_info("peak memory %ld KiB", ru.ru_maxrss);
	return agg_opts_exit(rc);
}
