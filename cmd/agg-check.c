// SPDX-License-Identifier: GPL-2.0-only
/*
 * agg-check: the integrity check (ALEPH Alg. 2) by hand or from cron: a
 * plan's problems, a loaded node's missing segments and results (and a
 * request for them), and the losses in a packet capture.
 */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "dp.h"
#include "json.h"
#include "log.h"
#include "opts.h"

enum mode { MODE_LIVE, MODE_PLAN, MODE_PCAP };

static struct {
	enum mode mode;
	const char *file;	/* plan: the plan to check */
	const char *pcap;
	const char *plan;	/* --plan with --pcap */
	uint32_t iter, run;
	bool has_iter, has_run, request, has_port, has_op, has_timeout;
	uint16_t port;
	unsigned op;
	double timeout;
} env = { .port = AGG_PLAN_DEF_PORT, .timeout = 1 };

enum { OPT_ITER = 0x100, OPT_RUN, OPT_REQUEST, OPT_TIMEOUT, OPT_OP, OPT_PCAP, OPT_PORT, OPT_PLAN };

static const char doc[] =
"Check that gradient aggregation can run and did run (ALEPH's Integrity\n"
"Check, Alg. 2), in three modes:\n"
"\n"
"  agg-check plan [FILE]   validate a plan: one line per problem\n"
"  agg-check [--iter N]    scan this node's pinned slots and results for the\n"
"                          segments of iteration N (default: the newest) still\n"
"                          waiting for contributors, naming them, and the\n"
"                          results a worker lacks; --request asks the parent\n"
"                          for those results again\n"
"  agg-check --pcap FILE   per iteration, node pair and segment: what a capture\n"
"                          shows sent, resent, duplicated and lost\n"
"\n"
"EXAMPLES:\n"
"  agg-plan hosts.txt | agg-check plan\n"
"  agg-check --node w3 --iter 41\n"
"  agg-check --node w3 --request\n"
"  agg-check --pcap agg.pcap --plan plan.txt -v\n"
"\v"
"Exit status: 0 nothing is wrong, 1 the check found a problem (a plan\n"
"problem, a missing segment or result, a lost packet), 2 bad usage or bad\n"
"input (a plan that does not read, a file that is not a capture, nothing\n"
"loaded), 3 system failure.";

static const struct argp_option options[] = {
	{ NULL, 0, NULL, 0, "Live check (the default):", 1 },
	{ "iter", OPT_ITER, "N", 0,
	  "Iteration to check (default: the newest the node has seen; with --pcap: all)", 1 },
	{ "run", OPT_RUN, "RUN", 0,
	  "The run of --iter (default $AGG_RUN, else the node's newest run)", 1 },
	{ "request", OPT_REQUEST, NULL, 0,
	  "Ask the parent again for the missing results, then report what came", 1 },
	{ "timeout", OPT_TIMEOUT, "SEC", 0,
	  "How long --request waits for the results (default 1)", 1 },
	{ "op", OPT_OP, "OP", 0,
	  "The iteration's op for --request: sum, max or min (default: that of the "
	  "results already in, else sum)", 1 },
	{ NULL, 0, NULL, 0, "Capture:", 2 },
	{ "pcap", OPT_PCAP, "FILE", 0, "Read a packet capture instead of the live maps", 2 },
	{ "port", OPT_PORT, "PORT", 0, "The plan's UDP port in the capture (default 9999)", 2 },
	{ "plan", OPT_PLAN, "FILE", 0,
	  "The plan of the capture: node names, port, job and token", 2 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	uint64_t v;

	switch (key) {
	case OPT_ITER:
		env.iter = agg_argp_iter(state, arg);
		env.has_iter = true;
		break;
	case OPT_RUN:
		env.run = agg_argp_run(state, arg);
		env.has_run = true;
		break;
	case OPT_REQUEST:
		env.request = true;
		break;
	case OPT_TIMEOUT:
		env.timeout = agg_argp_timeout(state, arg);
		env.has_timeout = true;
		break;
	case OPT_OP:
		env.op = agg_argp_op(state, arg);
		env.has_op = true;
		break;
	case OPT_PCAP:
		env.pcap = arg;
		break;
	case OPT_PORT:
		if (agg_parse_u64(arg, &v, NULL) || v < 1 || v > 65535)
			argp_error(state, "bad port '%s' (1 to 65535)", arg);
		env.port = (uint16_t)v;
		env.has_port = true;
		break;
	case OPT_PLAN:
		env.plan = arg;
		break;
	case ARGP_KEY_ARG:
		if (state->arg_num == 0 && !strcmp(arg, "plan"))
			env.mode = MODE_PLAN;
		else if (state->arg_num == 1 && env.mode == MODE_PLAN)
			env.file = arg;
		else if (env.mode == MODE_PLAN)
			argp_error(state, "plan takes one FILE at most");
		else
			argp_error(state, "unknown command '%s' (plan, or options only)", arg);
		break;
	case ARGP_KEY_END:
		if (env.pcap && env.mode == MODE_PLAN)
			argp_error(state, "--pcap and plan exclude each other");
		if (env.pcap)
			env.mode = MODE_PCAP;
		if (env.mode != MODE_LIVE &&
		    (env.request || env.has_timeout || env.has_op || agg_target.job ||
		     agg_target.node))
			argp_error(state, "--request, --timeout, --op, --job and --node "
				   "check a loaded node (not with %s)",
				   env.mode == MODE_PLAN ? "plan" : "--pcap");
		if (env.mode != MODE_PCAP && (env.has_port || env.plan))
			argp_error(state, "--port and --plan go with --pcap");
		if (env.mode == MODE_PLAN && env.has_iter)
			argp_error(state, "--iter does not go with plan");
		if (env.mode != MODE_LIVE && env.has_run)
			argp_error(state, "--run goes with the live check");
		if (env.mode == MODE_LIVE && !env.request && (env.has_timeout || env.has_op))
			argp_error(state, "--timeout and --op go with --request");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_json_null(const char *key)
{
	if (agg_print_json()) {
		agg_jw_name(agg_print_jw(), key);
		agg_jw_null(agg_print_jw());
	}
}

/* Read a plan file ("-" or NULL: standard input); an exit status. */
static int read_plan(const char *file, struct agg_plan *p, const char **name,
		     struct agg_diag *d)
{
	FILE *f = stdin;
	int err;

	*name = "<stdin>";
	d->msg[0] = '\0';
	if (file && strcmp(file, "-")) {
		*name = file;
		f = fopen(file, "r");
		if (!f) {
			snprintf(d->msg, sizeof(d->msg), "cannot open %s: %s", file, strerror(errno));
			return errno == ENOENT || errno == EACCES ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		}
	}
	err = agg_plan_read(p, f, *name, d);
	if (f != stdin)
		fclose(f);
	if (err == -EINVAL)
		return AGG_EXIT_USAGE;
	if (err) {
		snprintf(d->msg, sizeof(d->msg), "cannot read %s: %s", *name, strerror(-err));
		return err == -EISDIR ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	return 0;
}

/* ---- plan -------------------------------------------------------------- */

struct problems {
	char **msg;
	int n;
	bool oom;
};

static void collect(void *ctx, const char *msg)
{
	struct problems *pr = ctx;
	char **m = realloc(pr->msg, (pr->n + 1) * sizeof(*m));

	if (!m || !(m[pr->n] = strdup(msg))) {
		pr->msg = m ? m : pr->msg;
		pr->oom = true;
		return;
	}
	pr->msg = m;
	pr->n++;
}

static int run_plan(void)
{
	struct problems pr = { 0 };
	struct agg_plan p;
	struct agg_layout l;
	struct agg_diag d;
	const char *name;
	char why[300];
	int rc;

	agg_plan_init(&p);
	rc = read_plan(env.file, &p, &name, &d);
	if (rc) {
		agg_err("%s", d.msg);
		if (agg_print_json()) {
			agg_print_obj_open(NULL);
			agg_print_bool("ok", NULL, false);
			agg_print_str("error", NULL, d.msg);
			agg_print_arr_open("problems");
			agg_print_arr_close();
			agg_print_obj_close();
		}
		return rc;
	}
	agg_check_plan(&p, collect, &pr);
	if (pr.oom) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_print_obj_open(NULL);
	agg_print_str("file", NULL, name);
	agg_print_bool("ok", NULL, pr.n == 0);
	agg_print_arr_open("problems");
	for (int i = 0; i < pr.n; i++) {
		if (agg_print_json())
			agg_jw_string(agg_print_jw(), pr.msg[i]);
		else
			printf("%s: %s\n", name, pr.msg[i]);
	}
	agg_print_arr_close();
	if (pr.n == 0 && agg_layout_of(&p, &l, why, sizeof(why)) == 0) {
		int w = 0;

		for (int i = 0; i < p.nnodes; i++)
			w += p.node[i].role == AGG_ROLE_WORKER;
		agg_print_str(NULL, "%s: ok", name);
		agg_print_uint("nodes", " nodes=%" PRIu64, p.nnodes);
		agg_print_uint("workers", " workers=%" PRIu64, w);
		agg_print_uint("trees", " trees=%" PRIu64, p.ntrees);
		agg_print_uint("segments", " segments=%" PRIu64, l.nsegs);
		agg_print_uint("slots", " slots=%" PRIu64 "\n", l.nslots);
	}
	agg_print_obj_close();
	rc = pr.n ? AGG_EXIT_PROBLEM : AGG_EXIT_OK;
out:
	for (int i = 0; i < pr.n; i++)
		free(pr.msg[i]);
	free(pr.msg);
	agg_plan_free(&p);
	return rc;
}

/* ---- live -------------------------------------------------------------- */

/* Node names: a JSON array, or "a,b,c" in text ("-" for none). */
static void print_names(const struct agg_plan *p, const char *key, const char *label,
			const int *idx, int n)
{
	if (agg_print_json()) {
		agg_print_arr_open(key);
		for (int i = 0; i < n; i++)
			agg_jw_string(agg_print_jw(), p->node[idx[i]].name);
		agg_print_arr_close();
		return;
	}
	printf(" %s=", label);
	for (int i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", p->node[idx[i]].name);
	if (!n)
		printf("-");
}

/* "what node=N iter=I segs=R count=C" in text, an object in JSON. */
static void print_ranges(const char *key, const char *what, const char *node,
			 uint64_t ver, struct agg_ranges *r)
{
	agg_print_obj_open(key);
	agg_print_text("%s node=%s iter=%u", what, node, agg_ver_iter(ver));
	agg_print_str("segs", " segs=%s", agg_ranges_str(r));
	agg_print_uint("count", " count=%" PRIu64 "\n", r->count);
	agg_print_obj_close();
}

struct live_result {
	uint64_t incomplete, not_started, unknown, res_missing, superseded;
};

/* Alg. 2 lines 1-6: the slots of iter still waiting, and who they wait for. */
static int scan_slots(const struct agg_check_live *c, uint64_t ver, struct live_result *r)
{
	const struct agg_node *n = c->n;
	const char *me = n->plan.node[n->self].name;
	struct agg_ranges ns;

	agg_ranges_init(&ns);
	agg_print_arr_open("incomplete");
	for (uint32_t s = 0; s < n->l.nsegs; s++) {
		const struct agg_slot *slot;
		enum agg_seg_state st = agg_check_seg(c, ver, s, &slot);
		unsigned t = agg_plan_seg_tree(&n->plan, s);
		int who[65], nw;

		if (st == AGG_SEG_NOT_STARTED)
			agg_ranges_add(&ns, s);
		else if (st == AGG_SEG_UNKNOWN)
			r->unknown++;
		if (st != AGG_SEG_INCOMPLETE)
			continue;
		r->incomplete++;
		agg_print_obj_open(NULL);
		agg_print_text("incomplete node=%s iter=%u", me, agg_ver_iter(ver));
		agg_print_uint("seg", " seg=%" PRIu64, s);
		agg_print_uint("tree", " tree=%" PRIu64, t);
		nw = agg_check_bits_nodes(c, t, c->ti[t].expect & ~slot->bitmap, who);
		print_names(&n->plan, "missing", "missing", who, nw);
		nw = agg_check_bits_nodes(c, t, slot->bitmap & c->ti[t].expect, who);
		print_names(&n->plan, "in", "in", who, nw);
		agg_print_text("\n");
		agg_print_obj_close();
	}
	agg_print_arr_close();
	r->not_started = ns.count;
	if (ns.count || agg_print_json())
		print_ranges("not_started", "not-started", me, ver, &ns);
	agg_ranges_free(&ns);
	return 0;
}

/* Alg. 2 lines 8-13: the results of iter a worker lacks, in missing[]. */
static uint32_t scan_results(const struct agg_check_live *c, uint64_t ver,
			     uint32_t *missing, struct live_result *r)
{
	uint32_t nm = 0;

	r->superseded = 0;
	for (uint32_t s = 0; s < c->n->l.nsegs; s++) {
		int st = agg_check_result(c, ver, s);

		if (st == AGG_RES_MISSING)
			missing[nm++] = s;
		else if (st == AGG_RES_SUPERSEDED)
			r->superseded++;
	}
	r->res_missing = nm;
	return nm;
}

static void print_results(const struct agg_check_live *c, uint64_t ver,
			  const uint32_t *missing, uint32_t nm)
{
	const char *me = c->n->plan.node[c->n->self].name;
	struct agg_ranges rg;

	agg_ranges_init(&rg);
	for (uint32_t i = 0; i < nm; i++)
		agg_ranges_add(&rg, missing[i]);
	if (nm || agg_print_json())
		print_ranges("results_missing", "results-missing", me, ver, &rg);
	agg_ranges_free(&rg);
}

/* --request: ask, wait, and say what came; the missing list is updated. */
static int request(const struct agg_check_live *c, uint64_t ver, uint32_t *missing,
		   uint32_t *nm, struct live_result *r)
{
	const struct agg_node *n = c->n;
	int op = env.has_op ? (int)env.op : agg_check_data_op(c, ver), sent;
	uint32_t asked = *nm, left = *nm;
	double deadline;

	if (op < 0)
		op = AGG_OP_SUM;	/* nothing to tell by: the default op */
	sent = asked ? agg_check_request(n, ver, missing, asked, op) : 0;
	if (sent < 0) {
		agg_err("cannot send requests from %s: %s", inet_ntoa(n->plan.node[n->self].addr),
			strerror(-sent));
		return AGG_EXIT_SYSTEM;
	}
	deadline = now() + env.timeout;
	while (left && now() < deadline) {
		usleep(2000);
		left = 0;
		for (uint32_t i = 0; i < asked; i++)
			left += agg_check_result(c, ver, missing[i]) == AGG_RES_MISSING;
	}
	agg_print_obj_open("request");
	agg_print_text("request node=%s iter=%u", n->plan.node[n->self].name, agg_ver_iter(ver));
	agg_print_uint("requested", " requested=%" PRIu64, (uint64_t)sent);
	agg_print_str("op", " op=%s", op == AGG_OP_MAX ? "max" : op == AGG_OP_MIN ? "min" : "sum");
	agg_print_uint("arrived", " arrived=%" PRIu64, asked - left);
	agg_print_uint("still_missing", " still_missing=%" PRIu64 "\n", left);
	agg_print_obj_close();
	*nm = scan_results(c, ver, missing, r);
	return 0;
}

static int run_live(void)
{
	struct agg_check_live c = { 0 };
	struct live_result r = { 0 };
	struct agg_node n;
	uint32_t *missing = NULL, nm = 0;
	uint64_t ver = 0;
	const char *me;
	char why[600];
	bool worker, have;
	int err, rc = 0;

	err = agg_node_open(&n, agg_target.pin_dir, agg_target.job, agg_target.node,
			    why, sizeof(why));
	/* The maps open before the interface is looked for: a scan needs no
	 * interface (pins are visible from any network namespace), a request does. */
	if (err == -ENODEV && !env.request)
		err = 0;
	if (err) {
		agg_err("%s%s", why, err == -ENODEV ?
			" (--request sends from the node's address: run it in the node's network namespace)" : "");
		agg_node_close(&n);
		return err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	me = n.plan.node[n.self].name;
	worker = n.plan.node[n.self].role == AGG_ROLE_WORKER;
	if (env.request && !worker) {
		agg_err("node %s is a parameter server: it has no results to request", me);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	err = agg_check_live_open(&c, &n, why, sizeof(why));
	if (!err)
		err = agg_check_live_read(&c);
	if (err) {
		agg_err("%s", err == -ENOENT ? why : strerror(-err));
		rc = err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		goto out;
	}
	have = env.has_iter || agg_check_newest(&c, &ver);
	if (env.has_iter) {
		/* The run: --run, $AGG_RUN, else the node's newest. */
		uint32_t run = env.run;

		if (!env.has_run && getenv("AGG_RUN") && agg_run_default(&run)) {
			rc = AGG_EXIT_USAGE;
			goto out;
		}
		if (!env.has_run && !getenv("AGG_RUN"))
			run = agg_ver_run(__atomic_load_n(&n.clock->now, __ATOMIC_ACQUIRE));
		ver = agg_ver(run, env.iter);
	} else if (have && env.has_run && agg_ver_run(ver) != env.run) {
		ver = agg_ver(env.run, 0);
		have = false;	/* nothing of that run seen */
	}
	agg_print_obj_open(NULL);
	agg_print_str("node", NULL, me);
	if (!have) {
		print_json_null("iter");
		agg_print_text("summary node=%s iter=none ok=yes\n", me);
		agg_print_bool("ok", NULL, true);
		agg_print_obj_close();
		goto out;
	}
	agg_print_uint("iter", NULL, agg_ver_iter(ver));
	agg_print_uint("run", NULL, agg_ver_run(ver));
	scan_slots(&c, ver, &r);
	if (worker) {
		missing = malloc(sizeof(*missing) * (n.l.nsegs ? n.l.nsegs : 1));
		if (!missing) {
			agg_err("out of memory");
			rc = AGG_EXIT_SYSTEM;
			goto out;
		}
		nm = scan_results(&c, ver, missing, &r);
		if (env.request) {
			rc = request(&c, ver, missing, &nm, &r);
			if (rc)
				goto out;
		}
		print_results(&c, ver, missing, nm);
	}
	agg_print_text("summary node=%s iter=%u run=%u", me, agg_ver_iter(ver), agg_ver_run(ver));
	agg_print_uint(NULL, " incomplete=%" PRIu64, r.incomplete);
	agg_print_uint(NULL, " not_started=%" PRIu64, r.not_started);
	agg_print_uint("unknown", " unknown=%" PRIu64, r.unknown);
	if (worker) {
		int64_t stored = agg_check_progress(&c, ver);

		agg_print_uint(NULL, " results_missing=%" PRIu64, r.res_missing);
		agg_print_uint("superseded", " superseded=%" PRIu64, r.superseded);
		agg_print_bool("signal", " signal=%s", stored == n.l.ndata);
	} else {
		agg_print_text(" results_missing=- superseded=- signal=-");
	}
	rc = r.incomplete || r.not_started || r.res_missing ? AGG_EXIT_PROBLEM : AGG_EXIT_OK;
	agg_print_bool("ok", " ok=%s\n", rc == AGG_EXIT_OK);
	agg_print_obj_close();
out:
	free(missing);
	agg_check_live_close(&c);
	agg_node_close(&n);
	return rc;
}

/* ---- pcap -------------------------------------------------------------- */

struct run_total {
	uint64_t pairs, lost, unanswered, duplicated, resent;
	bool several_jobs;
};

static bool same_run(const struct agg_cap_group *a, const struct agg_cap_group *b)
{
	return a->job == b->job && a->iter == b->iter && a->from == b->from &&
	       a->to == b->to && a->type == b->type;
}

static bool wanted(const struct agg_cap_group *g)
{
	return !env.has_iter || g->iter == env.iter;
}

/* "lost iter=I from=A to=B type=T seg=S", one line per lost transmission. */
static void print_segs(const struct agg_cap *c, const struct agg_cap_group *g,
		       const char *what, bool several_jobs, uint32_t n)
{
	char from[64], to[64];

	agg_cap_from_name(c, g->from, from, sizeof(from));
	agg_cap_to_name(c, g->to, to, sizeof(to));
	for (uint32_t k = 0; k < n; k++) {
		agg_print_obj_open(NULL);
		agg_print_text("%s ", what);
		if (several_jobs || agg_print_json())
			agg_print_uint("job", "job=%" PRIu64 " ", g->job);
		agg_print_uint("iter", "iter=%" PRIu64, g->iter);
		agg_print_str("from", " from=%s", from);
		agg_print_str("to", " to=%s", to);
		agg_print_str("type", " type=%s", agg_type_name(g->type));
		agg_print_uint("seg", " seg=%" PRIu64 "\n", g->seg);
		agg_print_obj_close();
	}
}

/* The summary line of groups [i, j) and, with -v, their lost segments. */
static void print_run(const struct agg_cap *c, size_t i, size_t j, struct run_total *tot)
{
	const struct agg_cap_group *g = &c->g[i];
	struct agg_cap_count sum = { 0 }, one;
	bool asks = g->type == AGG_T_DATA || g->type == AGG_T_REQUEST, known = true;
	uint64_t unanswered = 0, segs = j - i;
	char from[64], to[64];

	for (size_t k = i; k < j; k++) {
		agg_cap_group_count(&c->g[k], &one);
		sum.sent += one.sent;
		sum.resent += one.resent;
		sum.duplicated += one.duplicated;
		sum.lost += one.lost;
		if (asks) {
			int a = agg_cap_answered(c, &c->g[k]);

			known = a >= 0;
			unanswered += a == 0;
		}
	}
	tot->pairs++;
	tot->lost += sum.lost;
	tot->unanswered += unanswered;
	tot->duplicated += sum.duplicated;
	tot->resent += sum.resent;
	agg_print_obj_open(NULL);
	if (tot->several_jobs || agg_print_json())
		agg_print_uint("job", "job=%" PRIu64 " ", g->job);
	agg_print_uint("iter", "iter=%" PRIu64, g->iter);
	agg_print_str("from", " from=%s", agg_cap_from_name(c, g->from, from, sizeof(from)));
	agg_print_str("to", " to=%s", agg_cap_to_name(c, g->to, to, sizeof(to)));
	agg_print_str("type", " type=%s", agg_type_name(g->type));
	agg_print_uint("segments", " segments=%" PRIu64, segs);
	agg_print_uint("sent", " sent=%" PRIu64, sum.sent);
	agg_print_uint("resent", " resent=%" PRIu64, sum.resent);
	agg_print_uint("duplicated", " duplicated=%" PRIu64, sum.duplicated);
	agg_print_uint("lost", " lost=%" PRIu64, sum.lost);
	if (asks && known)
		agg_print_uint("unanswered", " unanswered=%" PRIu64, unanswered);
	else if (asks && agg_print_json())
		print_json_null("unanswered");
	else if (asks)
		agg_print_text(" unanswered=-");	/* nothing back in the capture */
	agg_print_text("\n");
	agg_print_obj_close();
	if (agg_print_json() || agg_log_level() < 1)
		return;
	for (size_t k = i; k < j; k++) {
		const struct agg_cap_group *h = &c->g[k];
		uint32_t lost = 0;

		for (uint32_t t = 0; t < h->ntx; t++)
			lost += agg_cap_tx_lost(h, t);
		print_segs(c, h, "lost", tot->several_jobs, lost);
		if (asks && known && agg_cap_answered(c, h) == 0)
			print_segs(c, h, "unanswered", tot->several_jobs, 1);
	}
}

/* The lost and unanswered segments as JSON arrays. */
static void print_json_segs(const struct agg_cap *c, bool lost)
{
	agg_print_arr_open(lost ? "lost" : "unanswered");
	for (size_t k = 0; k < c->ng; k++) {
		const struct agg_cap_group *g = &c->g[k];
		uint32_t n = 0;

		if (!wanted(g))
			continue;
		if (lost)
			for (uint32_t t = 0; t < g->ntx; t++)
				n += agg_cap_tx_lost(g, t);
		else if (g->type == AGG_T_DATA || g->type == AGG_T_REQUEST)
			n = agg_cap_answered(c, g) == 0;
		print_segs(c, g, "", false, n);
	}
	agg_print_arr_close();
}

static int run_pcap(void)
{
	struct agg_plan p;
	struct agg_cap c;
	struct run_total tot = { 0 };
	struct agg_diag d;
	const char *name;
	char why[700];
	int rc = 0, err;

	agg_plan_init(&p);
	if (env.plan) {
		rc = read_plan(env.plan, &p, &name, &d);
		if (rc) {
			agg_err("%s", d.msg);
			return rc;
		}
		if (!env.has_port)
			env.port = p.port;
	}
	if (agg_cap_init(&c, env.port, env.plan ? &p : NULL)) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	err = agg_cap_read(&c, env.pcap, why, sizeof(why));
	if (err) {
		agg_err("%s", err == -ENOMEM ? "out of memory" : why);
		rc = err == -EINVAL || err == -ENOENT || err == -EACCES || err == -EISDIR ?
		     AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_cap_sort(&c);
	for (size_t k = 1; k < c.ng; k++)
		tot.several_jobs |= c.g[k].job != c.g[0].job;
	agg_print_obj_open(NULL);
	agg_print_arr_open("pairs");
	for (size_t i = 0, j; i < c.ng; i = j) {
		for (j = i + 1; j < c.ng && same_run(&c.g[i], &c.g[j]); j++)
			;
		if (wanted(&c.g[i]))
			print_run(&c, i, j, &tot);
	}
	agg_print_arr_close();
	if (agg_print_json()) {
		print_json_segs(&c, true);
		print_json_segs(&c, false);
	}
	agg_print_text("summary");
	agg_print_uint("packets", " packets=%" PRIu64, c.packets);
	agg_print_uint("agg", " agg=%" PRIu64, c.agg);
	agg_print_uint("other", " other=%" PRIu64, c.other);
	agg_print_uint("foreign", " foreign=%" PRIu64, c.foreign);
	agg_print_uint("truncated", " truncated=%" PRIu64, c.truncated);
	agg_print_uint("probes", " probes=%" PRIu64, c.probes);
	agg_print_uint(NULL, " pairs=%" PRIu64, tot.pairs);
	agg_print_uint("resent_total", " resent=%" PRIu64, tot.resent);
	agg_print_uint("duplicated_total", " duplicated=%" PRIu64, tot.duplicated);
	agg_print_uint("lost_total", " lost=%" PRIu64, tot.lost);
	agg_print_uint("unanswered_total", " unanswered=%" PRIu64, tot.unanswered);
	rc = tot.lost || tot.unanswered ? AGG_EXIT_PROBLEM : AGG_EXIT_OK;
	agg_print_bool("ok", " ok=%s\n", rc == AGG_EXIT_OK);
	agg_print_obj_close();
	if (c.truncated)
		agg_warn("%s: %" PRIu64 " agg packets cut short by the capture's snap length "
			 "(capture with -s 0)", env.pcap, c.truncated);
out:
	agg_cap_free(&c);
	agg_plan_free(&p);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = {
		{ &agg_target_argp, 0, "Target (a loaded node):", 0 },
		{ &agg_common_argp, 0, "Output:", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		.options = options, .parser = parse_opt,
		.args_doc = "\nplan [FILE]\n--pcap FILE", .doc = doc, .children = children,
	};
	int rc;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_log_libbpf();
	agg_print_start(agg_common.json, agg_common.pretty);
	if (env.mode == MODE_PLAN)
		rc = run_plan();
	else if (env.mode == MODE_PCAP)
		rc = run_pcap();
	else
		rc = run_live();
	return agg_opts_exit(rc);
}
