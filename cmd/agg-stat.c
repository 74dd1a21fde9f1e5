// SPDX-License-Identifier: GPL-2.0-only
/* agg-stat: counters, rates and slot state of loaded nodes. */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dp.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "stat.h"

static struct {
	bool all, per_cpu, slots, range;
	double watch;		/* seconds; 0: no --watch */
	uint64_t count;		/* intervals; 0: until interrupted */
	uint32_t lo, hi;	/* --range */
	const char *range_arg;
} env;

enum { OPT_ALL = 0x100, OPT_PER_CPU, OPT_WATCH, OPT_COUNT, OPT_SLOTS, OPT_RANGE };

static const char doc[] =
"Show the data plane of nodes loaded by agg-load(1): the counters of the\n"
"XDP and TC programs (summed over CPUs) and of agg-send, grouped as packets\n"
"in, aggregation, results, recovery, drops by reason and sending; per-\n"
"interval rates with --watch; the slot pool and the stored results with\n"
"--slots.\n"
"\n"
"EXAMPLES:\n"
"  agg-stat --node ps0\n"
"  agg-stat --all -j | jq '.[] | {node, done, drop_stale}'\n"
"  agg-stat --node a --watch 1 --count 10\n"
"  agg-stat --node a --slots --range 0-99\n"
"\v"
"Exit status: 0 ok, 2 bad usage, nothing loaded, an unknown job or node, or\n"
"no bpf filesystem at the pin directory, 3 system failure.";

static const struct argp_option options[] = {
	{ "all", OPT_ALL, NULL, 0,
	  "Every node pinned on this machine (of --job JOB if given)", 0 },
	{ "per-cpu", OPT_PER_CPU, NULL, 0, "Show each CPU's counters too", 0 },
	{ "watch", OPT_WATCH, "SEC", 0,
	  "Print rates every SEC seconds, one line per node and interval", 0 },
	{ "count", OPT_COUNT, "N", 0, "With --watch: stop after N intervals", 0 },
	{ "slots", OPT_SLOTS, NULL, 0,
	  "Show the slot pool and the iteration of each stored result", 0 },
	{ "range", OPT_RANGE, "A-B", 0,
	  "With --slots: only wire segments A to B (or A alone)", 0 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	uint64_t v;
	double d;
	int col = 0;

	switch (key) {
	case OPT_ALL:
		env.all = true;
		break;
	case OPT_PER_CPU:
		env.per_cpu = true;
		break;
	case OPT_WATCH:
		if (agg_parse_double(arg, &d, &col) || !(d >= 0.01) || d > 86400)
			argp_error(state, "bad --watch '%s' (seconds, 0.01 to 86400)", arg);
		env.watch = d;
		break;
	case OPT_COUNT:
		if (agg_parse_u64(arg, &v, &col) || v < 1 || v > UINT32_MAX)
			argp_error(state, "bad --count '%s' (1 to %u intervals)", arg, UINT32_MAX);
		env.count = v;
		break;
	case OPT_SLOTS:
		env.slots = true;
		break;
	case OPT_RANGE:
		if (agg_stat_range_parse(arg, &env.lo, &env.hi, &col))
			argp_error(state, "bad --range '%s' at character %d (wire segments A-B, A <= B, or A)",
				   arg, col + 1);
		env.range = true;
		env.range_arg = arg;
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "no arguments expected ('%s')", arg);
		break;
	case ARGP_KEY_END:
		if (env.all && agg_target.node)
			argp_error(state, "--all and --node do not go together");
		if (env.count && !env.watch)
			argp_error(state, "--count needs --watch");
		if (env.range && !env.slots)
			argp_error(state, "--range needs --slots");
		if (env.watch && (env.slots || env.per_cpu))
			argp_error(state, "--watch does not go with %s",
				   env.slots ? "--slots" : "--per-cpu");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* ---- the nodes ------------------------------------------------------- */

static struct agg_stat_node *nodes;
static int nnodes;

static int exit_of(int err)
{
	return err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
}

/* Open the node(s) asked for; the exit status of the worst failure. */
static int open_nodes(void)
{
	struct agg_stat_ref *refs = NULL;
	char why[700];
	int n, rc = 0, err;

	if (env.all) {
		n = agg_stat_list(agg_target.pin_dir, agg_target.job, &refs, why, sizeof(why));
		if (n < 0) {
			agg_err("%s", why);
			return exit_of(n);
		}
	} else {
		n = 1;
		refs = calloc(1, sizeof(*refs));
		if (!refs) {
			agg_err("out of memory");
			return AGG_EXIT_SYSTEM;
		}
		err = agg_node_locate(agg_target.pin_dir, agg_target.job, agg_target.node,
				      refs->dir, sizeof(refs->dir), why, sizeof(why));
		if (err) {
			agg_err("%s", why);
			free(refs);
			return exit_of(err);
		}
	}
	nodes = calloc(n, sizeof(*nodes));
	if (!nodes) {
		free(refs);
		agg_err("out of memory");
		return AGG_EXIT_SYSTEM;
	}
	for (int i = 0; i < n; i++) {
		err = agg_stat_open(&nodes[nnodes], refs[i].dir, why, sizeof(why));
		if (err) {
			agg_err("%s", why);
			agg_stat_close(&nodes[nnodes]);
			if (exit_of(err) > rc)
				rc = exit_of(err);
			continue;
		}
		nnodes++;
	}
	free(refs);
	return nnodes ? rc : (rc ? rc : AGG_EXIT_SYSTEM);
}

static void read_fail(const struct agg_stat_node *n, const char *what, int err)
{
	agg_err("job %u node %s: cannot read %s: %s", n->ref.job, n->ref.node, what,
		strerror(-err));
}

/* What the node does in the plan's trees: root, aggregator, leaf. */
static void role_of(const struct agg_stat_node *n, char *buf, size_t len)
{
	const struct agg_plan *p = &n->node.plan;
	bool root = false, agg = false, leaf = false;

	for (int t = 0; t < p->ntrees; t++) {
		int kids = agg_plan_children(p, t, n->node.self, NULL, 0);

		if (p->tree[t].parent[n->node.self] < 0)
			root |= kids > 0;
		else if (kids)
			agg = true;
		else
			leaf = true;
	}
	snprintf(buf, len, "%s%s%s%s%s", root ? "root" : "",
		 root && (agg || leaf) ? "," : "", agg ? "aggregator" : "",
		 agg && leaf ? "," : "", leaf ? "leaf" : "");
	if (!*buf)
		snprintf(buf, len, "idle");
}

/* The fields every object starts with, and the "# ..." line of the text. */
static void print_head(const struct agg_stat_node *n)
{
	char role[64];

	role_of(n, role, sizeof(role));
	agg_print_uint("job", "# job %" PRIu64, n->ref.job);
	agg_print_str("node", " node %s", n->ref.node);
	agg_print_str("address", " %s", inet_ntoa(n->node.plan.node[n->node.self].addr));
	agg_print_str("role", " %s", role);
	agg_print_uint("cpus", ", %" PRIu64 " cpus", n->ncpu);
	agg_print_uint("segment", ", segment %" PRIu64 " values\n", n->node.l.segment);
}

/* JSON Lines: every record gets a writer of its own, so no comma goes
 * between records and each ends with its newline. */
static void record_end(void)
{
	if (agg_print_json()) {
		agg_jw_free(agg_print_jw());
		agg_print_start(true, agg_common.pretty);
	}
}

/* ---- counters --------------------------------------------------------- */

/* agg-send's streams that sent anything: a table, or "streams" in JSON.
 * Its rows start with '#' too: the text's other lines are "name value"
 * (and per-CPU values), which scripts read. */
static void print_streams(const struct agg_stat_snap *s)
{
	bool head = false;

	agg_print_arr_open("streams");
	for (unsigned k = 0; k < s->nstreams; k++) {
		const uint64_t *v = &s->stream[(size_t)k * AGG_SST_COUNT];
		bool used = false;

		for (int f = 0; f < AGG_SST_COUNT; f++)
			used |= v[f] != 0;
		if (!used)
			continue;
		if (!head) {
			agg_print_text("# sent per stream (agg-send --streams)\n# %-6s", "stream");
			for (int f = 0; f < AGG_SST_COUNT; f++)
				agg_print_text(" %14s", agg_stat_stream_name(f));
			agg_print_text("\n");
			head = true;
		}
		agg_print_obj_open(NULL);
		agg_print_uint("stream", "# %6" PRIu64, k);
		for (int f = 0; f < AGG_SST_COUNT; f++)
			agg_print_uint(agg_stat_stream_name(f), " %14" PRIu64, v[f]);
		agg_print_text("\n");
		agg_print_obj_close();
	}
	agg_print_arr_close();
}

static void print_counters(const struct agg_stat_node *n, const struct agg_stat_snap *s)
{
	char fmt[64];

	agg_print_obj_open(NULL);
	print_head(n);
	if (s->percpu) {
		agg_print_text("# %-13s %14s", "counter", "total");
		for (int c = 0; c < n->ncpu; c++) {
			char cpu[16];

			snprintf(cpu, sizeof(cpu), "cpu%d", c);
			agg_print_text(" %14s", cpu);
		}
		agg_print_text("\n");
	}
	for (int g = 0; g < agg_stat_ngroups; g++) {
		const struct agg_stat_group *gr = &agg_stat_groups[g];

		agg_print_text("# %s\n", gr->title);
		for (int i = 0; i < gr->nfields; i++) {
			int k = gr->field[i];

			snprintf(fmt, sizeof(fmt), "%-15s %%14" PRIu64, agg_stat_name(k));
			agg_print_uint(agg_stat_name(k), fmt, s->v[k]);
			for (int c = 0; s->percpu && c < n->ncpu; c++) {
				if (k < AGG_S_COUNT)
					agg_print_uint(NULL, " %14" PRIu64,
						       s->percpu[(size_t)c * AGG_S_COUNT + k]);
				else
					agg_print_text(" %14s", "-");
			}
			agg_print_text("\n");
		}
	}
	print_streams(s);
	if (s->percpu && agg_print_json()) {
		agg_print_arr_open("per_cpu");
		for (int c = 0; c < n->ncpu; c++) {
			agg_print_obj_open(NULL);
			agg_print_uint("cpu", NULL, c);
			for (int g = 0; g < agg_stat_ngroups; g++)
				for (int i = 0; i < agg_stat_groups[g].nfields; i++) {
					int k = agg_stat_groups[g].field[i];

					if (k < AGG_S_COUNT)
						agg_print_uint(agg_stat_name(k), NULL,
							       s->percpu[(size_t)c * AGG_S_COUNT + k]);
				}
			agg_print_obj_close();
		}
		agg_print_arr_close();
	}
	agg_print_obj_close();
}

static int show_counters(void)
{
	struct agg_stat_snap s = { 0 };
	int rc = 0;

	if (env.all)
		agg_print_arr_open(NULL);
	for (int i = 0; i < nnodes; i++) {
		int err = agg_stat_read(&nodes[i], &s, env.per_cpu);

		if (err) {
			read_fail(&nodes[i], "the counters", err);
			rc = AGG_EXIT_SYSTEM;
			continue;
		}
		if (i)
			agg_print_text("\n");
		print_counters(&nodes[i], &s);
	}
	if (env.all)
		agg_print_arr_close();
	agg_stat_snap_free(&s);
	return rc;
}

/* ---- --watch ------------------------------------------------------------ */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static const int rate_fields[] = { AGG_S_RX, -1, AGG_S_DONE, AGG_S_STORED, AGG_S_RETX };
static const char *const rate_fmt[] = { " %9.1f", NULL, " %8.1f", " %8.1f", " %7.1f" };

static void print_rate_line(const struct agg_stat_node *n, uint64_t interval,
			    const struct agg_stat_rates *r)
{
	char fmt[80], key[40];
	bool any = false;

	agg_print_obj_open(NULL);
	agg_print_uint("job", "%" PRIu64 "/", n->ref.job);
	agg_print_str("node", "%-8s", n->ref.node);
	agg_print_uint("interval", NULL, interval);
	agg_print_float("seconds", " %6.3f", r->seconds);
	for (size_t i = 0; i < sizeof(rate_fields) / sizeof(rate_fields[0]); i++) {
		int k = rate_fields[i];

		if (k < 0) {
			agg_print_float("gbit_per_s", " %7.3f", r->gbps);
			continue;
		}
		snprintf(key, sizeof(key), "%s_per_s", agg_stat_name(k));
		agg_print_float(key, rate_fmt[i], r->rate[k]);
	}
	agg_print_float("drops_per_s", " %7.1f", r->drops);
	agg_print_obj_open("drops");
	for (int k = 0; k < AGG_S_COUNT; k++) {
		if (!agg_stat_is_drop(k) || r->rate[k] == 0)
			continue;
		snprintf(fmt, sizeof(fmt), "%s%s=%%.1f", any ? "," : " ", agg_stat_name(k));
		agg_print_float(agg_stat_name(k), fmt, r->rate[k]);
		any = true;
	}
	if (!any)
		agg_print_text(" -");
	agg_print_obj_close();
	agg_print_text("\n");
	agg_print_obj_close();
	record_end();
}

/*
 * Before reading node i: is it still the node we opened?  A node loaded
 * again gets new maps (its counters start at 0): open those and start
 * over; an unloaded one is watched for until it comes back.  Returns 1
 * when the node has a reading to compare with, 0 when not, or an exit
 * status (> 1).
 */
static int watch_check(int i, struct agg_stat_snap *prev, bool *gone)
{
	struct agg_stat_node *n = &nodes[i];
	char dir[sizeof(n->ref.dir)], why[700];
	int cur, err;

	cur = gone[i] ? -ENOENT : agg_stat_current(n);
	if (cur == 1)
		return 1;
	if (cur < 0 && cur != -ENOENT) {
		read_fail(n, "the pinned counters", cur);
		return AGG_EXIT_SYSTEM;
	}
	snprintf(dir, sizeof(dir), "%s", n->ref.dir);
	if (!gone[i])
		agg_stat_close(n);
	err = agg_stat_open(n, dir, why, sizeof(why));
	if (err) {
		if (!gone[i])
			agg_warn("%s: unloaded; watching for it to come back", dir);
		agg_stat_close(n);
		snprintf(n->ref.dir, sizeof(n->ref.dir), "%s", dir);
		gone[i] = true;
		return 0;
	}
	agg_warn("%s: loaded again; its rates start over", dir);
	gone[i] = false;
	err = agg_stat_read(n, &prev[i], false);
	if (err) {
		read_fail(n, "the counters", err);
		return AGG_EXIT_SYSTEM;
	}
	return 0;
}

static int watch(void)
{
	struct agg_stat_snap *prev = calloc(nnodes, sizeof(*prev));
	bool *gone = calloc(nnodes, sizeof(*gone));
	struct agg_stat_snap cur = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec next;
	double t0;
	int rc = 0;

	if (!prev || !gone) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	record_end();
	for (int i = 0; i < nnodes; i++) {
		int err = agg_stat_read(&nodes[i], &prev[i], false);

		if (err) {
			read_fail(&nodes[i], "the counters", err);
			rc = AGG_EXIT_SYSTEM;
			goto out;
		}
	}
	agg_info("watching %d node%s every %g s", nnodes, nnodes == 1 ? "" : "s", env.watch);
	agg_print_text("# %-8s %6s %9s %7s %8s %8s %7s %7s %s\n", "node", "secs", "rx/s", "Gbit/s",
		       "done/s", "stored/s", "retx/s", "drops/s", "reasons");
	t0 = agg_now();
	for (uint64_t k = 1; !stop && (!env.count || k <= env.count); k++) {
		double due = t0 + k * env.watch;

		next.tv_sec = (time_t)due;
		next.tv_nsec = (long)((due - (double)next.tv_sec) * 1e9);
		while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (stop)
			break;
		for (int i = 0; i < nnodes; i++) {
			struct agg_stat_rates r;
			int err = watch_check(i, prev, gone);

			if (err > 1) {
				rc = err;
				goto out;
			}
			if (!err)
				continue;
			err = agg_stat_read(&nodes[i], &cur, false);
			if (err) {
				read_fail(&nodes[i], "the counters", err);
				rc = AGG_EXIT_SYSTEM;
				goto out;
			}
			agg_stat_rates(&nodes[i], &prev[i], &cur, &r);
			print_rate_line(&nodes[i], k, &r);
			memcpy(prev[i].v, cur.v, sizeof(cur.v));
			prev[i].t = cur.t;
		}
	}
out:
	free(prev);
	free(gone);
	return rc;
}

/* ---- --slots ---------------------------------------------------------- */

static void print_names(const char *key, const struct agg_stat_node *n,
			const struct agg_tree_info *ti, uint64_t bits, bool last)
{
	char buf[4096];

	if (agg_print_json()) {
		agg_print_arr_open(key);
		for (unsigned b = 0; b < 64; b++) {
			if (!(bits & (1ULL << b)))
				continue;
			agg_stat_bits_names(n, ti, 1ULL << b, buf, sizeof(buf));
			agg_jw_string(agg_print_jw(), buf);
		}
		agg_print_arr_close();
		return;
	}
	agg_stat_bits_names(n, ti, bits, buf, sizeof(buf));
	agg_print_text(last ? " %s" : " %-12s", buf);
}

static int print_slot_table(const struct agg_stat_node *n, uint32_t lo, uint32_t hi)
{
	struct agg_tree_info *ti = calloc(n->node.plan.ntrees, sizeof(*ti));
	int err = ti ? agg_stat_trees_read(n, ti) : -ENOMEM;
	uint64_t unused = 0, shown = 0;

	agg_print_text("%-6s %7s %7s %4s %-3s %-10s %13s %-12s %s\n", "slot", "iter", "seg",
		       "tree", "op", "state", "bitmap/expect", "in", "missing");

	agg_print_arr_open("slots");
	for (uint32_t i = 0; !err && i < n->node.l.nslots; i++) {
		struct agg_stat_slot s;

		err = agg_stat_slot_read(n, ti, i, &s);
		if (err)
			break;
		if (!s.ver) {
			unused++;
			continue;
		}
		if (env.range && (s.seg < lo || s.seg > hi))
			continue;
		shown++;
		agg_print_obj_open(NULL);
		agg_print_uint("slot", "%-6" PRIu64, s.index);
		agg_print_uint("iter", " %7" PRIu64, agg_ver_iter(s.ver));
		agg_print_uint("run", NULL, agg_ver_run(s.ver));
		agg_print_uint("seg", " %7" PRIu64, s.seg);
		agg_print_uint("tree", " %4" PRIu64, s.tree);
		agg_print_str("op", " %-3s", agg_stat_op_name(s.op));
		agg_print_str("state", " %-10s", s.done ? "done" : "collecting");
		agg_print_uint("bitmap", " %#6" PRIx64, s.bitmap);
		agg_print_uint("expect", "/%-#6" PRIx64, s.expect);
		print_names("in", n, &ti[s.tree], s.bitmap, false);
		print_names("missing", n, &ti[s.tree], s.done ? 0 : s.expect & ~s.bitmap, true);
		agg_print_text("\n");
		agg_print_obj_close();
	}
	agg_print_arr_close();
	free(ti);
	if (err) {
		read_fail(n, "the slots", err);
		return AGG_EXIT_SYSTEM;
	}
	agg_print_uint("shown", "# %" PRIu64 " slots shown", shown);
	agg_print_uint("unused", ", %" PRIu64 " never used\n", unused);
	return 0;
}

/* Runs of wire segments in [lo, hi] whose results are of one iteration. */
static int print_results(const struct agg_stat_node *n, uint32_t lo, uint32_t hi)
{
	struct agg_meta m, run = { 0 };
	uint32_t first = lo;

	agg_print_arr_open("results");
	if (n->node.plan.node[n->node.self].role != AGG_ROLE_WORKER) {
		agg_print_text("# results: none (a parameter server stores no result)\n");
		agg_print_arr_close();
		return 0;
	}
	agg_print_text("# results: the iteration of the result stored here, by wire segment\n");
	agg_print_text("%-17s %8s %s\n", "segments", "iter", "op");
	for (uint64_t s = lo; s <= (uint64_t)hi + 1; s++) {
		int err = s <= hi ? agg_stat_meta_read(n, (uint32_t)s, &m) : 0;
		char segs[32];

		if (err) {
			agg_print_arr_close();
			read_fail(n, "the results", err);
			return AGG_EXIT_SYSTEM;
		}
		if (s == lo) {
			run = m;
			continue;
		}
		if (s <= hi && m.ver == run.ver && (!m.ver || m.op == run.op))
			continue;
		agg_print_obj_open(NULL);
		if (first == s - 1)
			snprintf(segs, sizeof(segs), "%u", first);
		else
			snprintf(segs, sizeof(segs), "%u-%u", first, (uint32_t)(s - 1));
		agg_print_text("%-17s", segs);
		agg_print_uint("first", NULL, first);
		agg_print_uint("last", NULL, s - 1);
		agg_print_bool("stored", NULL, run.ver != 0);
		if (run.ver) {
			agg_print_uint("iter", " %8" PRIu64, agg_ver_iter(run.ver));
			agg_print_uint("run", NULL, agg_ver_run(run.ver));
			agg_print_str("op", " %s", agg_stat_op_name(run.op));
		} else {
			agg_print_text(" %8s %s", "-", "-");
		}
		agg_print_text("\n");
		agg_print_obj_close();
		first = (uint32_t)s;
		run = m;
	}
	agg_print_arr_close();
	return 0;
}

static int show_slots(void)
{
	int rc = 0;

	if (env.all)
		agg_print_arr_open(NULL);
	for (int i = 0; i < nnodes; i++) {
		const struct agg_stat_node *n = &nodes[i];
		uint32_t lo = 0, hi = n->node.l.nsegs - 1;
		int err;

		if (env.range) {
			if (env.lo >= n->node.l.nsegs) {
				agg_err("--range %s: job %u node %s has wire segments 0-%u",
					env.range_arg, n->ref.job, n->ref.node, n->node.l.nsegs - 1);
				rc = AGG_EXIT_USAGE;
				continue;
			}
			lo = env.lo;
			hi = env.hi < n->node.l.nsegs ? env.hi : n->node.l.nsegs - 1;
		}
		if (i)
			agg_print_text("\n");
		agg_print_obj_open(NULL);
		print_head(n);
		agg_print_uint("nslots", "# %" PRIu64 " slots", n->node.l.nslots);
		agg_print_uint("window", " (2 windows of %" PRIu64 ")", n->node.l.window);
		agg_print_uint("trees", n->node.plan.ntrees == 1 ? ", %" PRIu64 " tree" :
			       ", %" PRIu64 " trees", n->node.plan.ntrees);
		agg_print_uint("nsegs", ", %" PRIu64 " wire segments", n->node.l.nsegs);
		agg_print_uint("first", ", showing %" PRIu64, lo);
		agg_print_uint("last", "-%" PRIu64 "\n", hi);
		err = print_slot_table(n, lo, hi);
		if (!err)
			err = print_results(n, lo, hi);
		agg_print_obj_close();
		if (err)
			rc = err;
	}
	if (env.all)
		agg_print_arr_close();
	return rc;
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = {
		{ &agg_target_argp, 0, "Target:", 0 },
		{ &agg_common_argp, 0, "Output:", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		.options = options, .parser = parse_opt, .doc = doc, .children = children,
	};
	int rc, rc2;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_log_libbpf();
	agg_print_start(agg_common.json, agg_common.pretty);
	rc = open_nodes();
	if (nnodes) {
		rc2 = env.watch ? watch() : env.slots ? show_slots() : show_counters();
		if (rc2 > rc)
			rc = rc2;
	}
	for (int i = 0; i < nnodes; i++)
		agg_stat_close(&nodes[i]);
	free(nodes);
	return agg_opts_exit(rc);
}
