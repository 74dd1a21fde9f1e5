// SPDX-License-Identifier: GPL-2.0-only
/* agg-plan: hosts file in, aggregation plan out; --eval prints the cost model. */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "hosts.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "plan.h"
#include "secret.h"
#include "tree.h"

static struct {
	const char *hosts;
	const char *secret;
	struct agg_plan plan;
	int trees;
	bool has_token;
	bool has_slots;
	bool eval;
	bool dot;
} env;

enum {
	OPT_SEED = 0x100, OPT_SIZE, OPT_JOB, OPT_PORT, OPT_SEGMENT, OPT_SLOTS,
	OPT_TOKEN, OPT_SECRET, OPT_BW_DEMAND, OPT_CPU_DEMAND, OPT_TREES, OPT_DOT,
};

static const char doc[] =
"Plan hierarchical gradient aggregation for the hosts in HOSTS (a file, or\n"
"standard input when HOSTS is absent or '-').  The plan goes to standard\n"
"output, for agg-load(1).\n"
"\n"
"EXAMPLES:\n"
"  agg-plan hosts.txt > plan.txt          # ALEPH clustering, seed 1\n"
"  agg-plan -s rat --trees 4 hosts.txt    # RAT, four trees\n"
"  agg-plan --eval --size 100M hosts.txt  # compare ps, ring, aleph, rat\n"
"  agg-plan hosts.txt | agg-load          # plan and deploy on this host\n"
"  agg-plan --dot hosts.txt | dot -Tpng > plan.png\n"
"\v"
"The default token is a keyed hash of the plan under a secret, read from\n"
"--secret FILE, else $" AGG_SECRET_ENV ", else " AGG_SECRET_FILE ".\n"
"\n"
"Exit status: 0 ok, 2 bad usage or bad input, 3 system failure.";

static const struct argp_option options[] = {
	{ "scheme", 's', "SCHEME", 0, "aleph (default), rat or ps", 0 },
	{ "seed", OPT_SEED, "N", 0, "Seed of M-WCHA's random choices (default 1)", 0 },
	{ "size", OPT_SIZE, "BYTES", 0,
	  "Gradient bytes per iteration (default 100M; k/M/G = 1000, Ki/Mi/Gi = 1024)", 0 },
	{ "job", OPT_JOB, "N", 0, "Job id (default 1)", 0 },
	{ "port", OPT_PORT, "PORT", 0, "UDP port of the job (default 9999)", 0 },
	{ "segment", OPT_SEGMENT, "N", 0, "float32 values per segment (default 128)", 0 },
	{ "slots", OPT_SLOTS, "N", 0,
	  "Aggregation slots per tree on each node: the flow-control window "
	  "(default 2^18 / segment, 16 to 256: 256 for the default segment)", 0 },
	{ "token", OPT_TOKEN, "HEX", 0,
	  "Per-job token (default: a keyed hash of the plan under the secret)", 0 },
	{ "secret", OPT_SECRET, "FILE", 0,
	  "The secret the default token is derived from (default $" AGG_SECRET_ENV
	  ", else " AGG_SECRET_FILE ")", 0 },
	{ "bw-demand", OPT_BW_DEMAND, "GBPS",
	  0, "b: bandwidth one worker's gradient needs (default: the smallest worker bw)", 0 },
	{ "cpu-demand", OPT_CPU_DEMAND, "CORES", 0,
	  "c: cores one aggregated worker costs (default 0.1)", 0 },
	{ "trees", OPT_TREES, "N", 0,
	  "rat: number of trees, each rooted at a different host (default: one per host, "
	  "at most 64)", 0 },
	{ "eval", 'e', NULL, 0, "Print the cost model of every scheme instead of the plan", 0 },
	{ "dot", OPT_DOT, NULL, 0, "Print the trees as a Graphviz digraph", 0 },
	{ 0 }
};

static void usage_error(struct argp_state *state, const char *what, const char *arg)
{
	argp_error(state, "bad %s '%s'", what, arg);
}

static uint64_t num_arg(struct argp_state *state, const char *what,
			const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (agg_parse_u64(arg, &v, NULL) || v < min || v > max) {
		argp_error(state, "bad %s '%s' (%" PRIu64 " to %" PRIu64 ")", what,
			   arg, min, max);
	}
	return v;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct agg_plan *p = &env.plan;
	uint64_t v;

	switch (key) {
	case 's':
		if (agg_scheme_parse(arg, &p->scheme) || p->scheme == AGG_SCHEME_RING)
			argp_error(state, "unknown scheme '%s' (aleph, rat or ps; "
				   "ring is in --eval only)", arg);
		break;
	case OPT_SEED:
		p->seed = num_arg(state, "seed", arg, 0, UINT64_MAX);
		break;
	case OPT_SIZE:
		if (agg_parse_size(arg, &v, NULL) || v < 4 || v % 4)
			argp_error(state, "bad size '%s' (bytes, a multiple of 4; "
				   "k/M/G or Ki/Mi/Gi suffixes)", arg);
		p->size = v;
		break;
	case OPT_JOB:
		p->job = num_arg(state, "job", arg, 0, UINT32_MAX);
		break;
	case OPT_PORT:
		p->port = num_arg(state, "port", arg, 1, 65535);
		break;
	case OPT_SEGMENT:
		p->segment = num_arg(state, "segment", arg, 1, AGG_PLAN_MAX_SEGMENT);
		break;
	case OPT_SLOTS:
		p->slots = num_arg(state, "slots", arg, 1, 1 << 20);
		env.has_slots = true;
		break;
	case OPT_TOKEN: {
		char *end;

		errno = 0;
		p->token = strtoull(arg, &end, 16);
		if (!*arg || *end || errno || *arg == '-')
			usage_error(state, "token (hex)", arg);
		env.has_token = true;
		break;
	}
	case OPT_SECRET:
		env.secret = arg;
		break;
	case OPT_BW_DEMAND:
	case OPT_CPU_DEMAND: {
		double *dst = key == OPT_BW_DEMAND ? &p->bw_demand : &p->cpu_demand;

		if (agg_parse_double(arg, dst, NULL) || *dst <= 0)
			usage_error(state, key == OPT_BW_DEMAND ? "bw-demand" :
				    "cpu-demand", arg);
		break;
	}
	case OPT_TREES:
		env.trees = num_arg(state, "trees", arg, 1, AGG_PLAN_MAX_TREES);
		break;
	case 'e':
		env.eval = true;
		break;
	case OPT_DOT:
		env.dot = true;
		break;
	case ARGP_KEY_ARG:
		if (env.hosts)
			argp_error(state, "one HOSTS file at most");
		env.hosts = arg;
		break;
	case ARGP_KEY_END:
		if (env.trees && p->scheme != AGG_SCHEME_RAT && !env.eval)
			argp_error(state, "--trees applies to --scheme rat");
		if (env.eval && env.dot)
			argp_error(state, "--eval and --dot exclude each other");
		if (env.dot && agg_common.json)
			argp_error(state, "--dot and -j exclude each other");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The key of the secret the default token is derived from: 0 or an exit status. */
static int read_secret(uint8_t key[AGG_SIPHASH_KEY_SIZE])
{
	enum agg_secret_from from;
	const char *path = agg_secret_path(env.secret, &from);
	struct agg_diag diag;
	int err = agg_secret_key(path, key, &diag);

	if (err == -ENOENT && from == AGG_SECRET_FROM_DEFAULT) {
		char dir[sizeof(AGG_SECRET_FILE)] = AGG_SECRET_FILE;

		agg_err("no secret to derive the job token from (%s): create it "
			"once with 'install -d -m 700 %s && (umask 077; head -c 32 "
			"/dev/urandom >%s)' and copy it (mode 600) wherever plans "
			"are made; or --secret FILE, " AGG_SECRET_ENV ", --token HEX",
			path, dirname(dir), path);
	} else if (err) {
		agg_err("%s%s", from == AGG_SECRET_FROM_ENV ? AGG_SECRET_ENV ": " : "",
			diag.msg);
	}
	switch (err) {
	case 0:
		return 0;
	case -ENOENT: case -ENOTDIR: case -EACCES: case -EISDIR: case -EPERM:
	case -EINVAL: case -ELOOP: case -ENAMETOOLONG:
		return AGG_EXIT_USAGE;
	default:
		return AGG_EXIT_SYSTEM;
	}
}

static void report_problem(void *ctx, const char *msg)
{
	agg_err("internal error: the plan built is invalid: %s", msg);
}

static void print_plan_json(const struct agg_plan *p)
{
	char addr[INET_ADDRSTRLEN], tok[24];

	snprintf(tok, sizeof(tok), "0x%016" PRIx64, p->token);
	agg_print_obj_open(NULL);
	agg_print_uint("version", NULL, AGG_PLAN_VERSION);
	agg_print_uint("job", NULL, p->job);
	agg_print_uint("port", NULL, p->port);
	agg_print_str("scheme", NULL, agg_scheme_name(p->scheme));
	agg_print_uint("seed", NULL, p->seed);
	agg_print_uint("segment", NULL, p->segment);
	agg_print_uint("size", NULL, p->size);
	agg_print_uint("slots", NULL, p->slots);
	agg_print_str("token", NULL, tok);
	agg_print_float("bw_demand", NULL, p->bw_demand);
	agg_print_float("cpu_demand", NULL, p->cpu_demand);
	agg_print_arr_open("nodes");
	for (int i = 0; i < p->nnodes; i++) {
		const struct agg_host *n = &p->node[i];

		inet_ntop(AF_INET, &n->addr, addr, sizeof(addr));
		agg_print_obj_open(NULL);
		agg_print_str("name", NULL, n->name);
		agg_print_str("addr", NULL, addr);
		agg_print_float("bw", NULL, n->bw);
		if (n->cpu > 0)
			agg_print_float("cpu", NULL, n->cpu);
		agg_print_str("role", NULL, n->role == AGG_ROLE_PS ? "ps" : "worker");
		if (n->rack[0])
			agg_print_str("rack", NULL, n->rack);
		if (n->pod[0])
			agg_print_str("pod", NULL, n->pod);
		if (n->dev[0])
			agg_print_str("dev", NULL, n->dev);
		if (n->has_mac) {
			char mac[18];

			snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x",
				 n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4],
				 n->mac[5]);
			agg_print_str("mac", NULL, mac);
		}
		agg_print_obj_close();
	}
	agg_print_arr_close();
	agg_print_arr_open("trees");
	for (int t = 0; t < p->ntrees; t++) {
		agg_print_obj_open(NULL);
		agg_print_uint("id", NULL, t);
		agg_print_str("root", NULL, p->node[p->tree[t].root].name);
		agg_print_uint("weight", NULL, p->tree[t].weight);
		int order[p->tree[t].nedges + 1];
		int n = agg_plan_edge_order(p, t, order);

		agg_print_arr_open("edges");
		for (int k = 0; k < n; k++) {
			const struct agg_plan_edge *e = &p->tree[t].edge[order[k]];

			agg_print_obj_open(NULL);
			agg_print_str("child", NULL, p->node[e->child].name);
			agg_print_str("parent", NULL, p->node[e->parent].name);
			agg_print_obj_close();
		}
		agg_print_arr_close();
		agg_print_obj_close();
	}
	agg_print_arr_close();
	agg_print_obj_close();
}

static void print_dot(const struct agg_plan *p)
{
	printf("digraph agg {\n\trankdir=BT;\n\tnode [shape=ellipse];\n");
	for (int i = 0; i < p->nnodes; i++)
		printf("\t\"%s\" [label=\"%s\\n%.15g G\"%s];\n", p->node[i].name,
		       p->node[i].name, p->node[i].bw,
		       p->node[i].role == AGG_ROLE_PS ? ", shape=box" : "");
	for (int t = 0; t < p->ntrees; t++)
		for (int e = 0; e < p->tree[t].nedges; e++)
			printf("\t\"%s\" -> \"%s\" [label=\"%d\"];\n",
			       p->node[p->tree[t].edge[e].child].name,
			       p->node[p->tree[t].edge[e].parent].name, t);
	printf("}\n");
}

static void print_eval_row(const struct agg_plan *p, const struct agg_eval *e)
{
	agg_print_obj_open(NULL);
	agg_print_str("scheme", "%-6s", agg_scheme_name(e->scheme));
	agg_print_float("time_s", " %9.4f", e->time_s);
	agg_print_str("bottleneck", " %-12s",
		      e->bottleneck >= 0 ? p->node[e->bottleneck].name : "-");
	agg_print_uint("root_bytes", " %13" PRIu64, (uint64_t)llround(e->root_bytes));
	agg_print_int("aggregators", " %11" PRId64, e->aggregators);
	agg_print_int("clusters", " %8" PRId64, e->clusters);
	agg_print_uint("cross_region_bytes", " %18" PRIu64, (uint64_t)llround(e->cross_bytes));
	agg_print_int("chain", " %5" PRId64, e->chain);
	agg_print_float("mean_hops", " %9.3f\n", e->mean_hops);
	agg_print_obj_close();
}

/* A scheme the hosts cannot run (no parameter server): "-" in every
 * column, null in JSON. */
static void print_eval_none(enum agg_scheme s)
{
	agg_print_obj_open(NULL);
	agg_print_str("scheme", "%-6s", agg_scheme_name(s));
	agg_print_null("time_s", " %9s");
	agg_print_null("bottleneck", " %-12s");
	agg_print_null("root_bytes", " %13s");
	agg_print_null("aggregators", " %11s");
	agg_print_null("clusters", " %8s");
	agg_print_null("cross_region_bytes", " %18s");
	agg_print_null("chain", " %5s");
	agg_print_null("mean_hops", " %9s\n");
	agg_print_obj_close();
}

/* -v: the clusters of each step, M-WCHA then the local-improvement pass. */
static void info_aleph(const struct agg_build_info *info)
{
	agg_info("aleph: %d clusters (M-WCHA %d, improved %d), %d aggregators, %d rounds, b=%.15g Gbit/s",
		 info->cluster.clusters, info->cluster.mwcha_clusters,
		 info->cluster.clusters, info->cluster.aggregators,
		 info->cluster.rounds, info->cluster.bw_demand);
}

/* Evaluate every scheme on the same hosts and options. */
static int run_eval(const struct agg_hosts *h)
{
	enum agg_scheme schemes[] = { AGG_SCHEME_PS, AGG_SCHEME_RING,
				      AGG_SCHEME_ALEPH, AGG_SCHEME_RAT };

	agg_print_arr_open(NULL);
	agg_print_text("%-6s %9s %-12s %13s %11s %8s %18s %5s %9s\n", "scheme",
		       "time_s", "bottleneck", "root_bytes", "aggregators",
		       "clusters", "cross_region_bytes", "chain", "mean_hops");
	for (size_t k = 0; k < sizeof(schemes) / sizeof(schemes[0]); k++) {
		struct agg_plan p = env.plan;
		struct agg_build_info info;
		struct agg_eval e;
		int err;

		if ((schemes[k] == AGG_SCHEME_PS || schemes[k] == AGG_SCHEME_ALEPH) &&
		    !agg_hosts_count_role(h, AGG_ROLE_PS)) {
			agg_info("%s: no parameter server among the hosts", agg_scheme_name(schemes[k]));
			print_eval_none(schemes[k]);
			continue;
		}
		p.node = NULL;
		p.tree = NULL;
		p.ntrees = 0;
		p.seg_map = NULL;
		p.scheme = schemes[k] == AGG_SCHEME_RING ? AGG_SCHEME_PS : schemes[k];
		/* the ring is modelled on the workers alone */
		err = schemes[k] == AGG_SCHEME_RING ? agg_plan_set_nodes(&p, h) :
		      agg_tree_build(&p, h, schemes[k] == AGG_SCHEME_RAT ? env.trees : 0, &info);
		if (!err)
			err = schemes[k] == AGG_SCHEME_RING ? agg_eval_ring(&p, &e) :
			      agg_eval_plan(&p, &e);
		if (!err && schemes[k] == AGG_SCHEME_ALEPH)
			info_aleph(&info);
		if (!err)
			print_eval_row(&p, &e);
		agg_plan_free(&p);
		if (err == -E2BIG) {
			agg_err("cannot evaluate %s: more than 64 trees or parameter servers",
				agg_scheme_name(schemes[k]));
			return AGG_EXIT_USAGE;
		} else if (err) {
			agg_err("cannot evaluate %s: %s", agg_scheme_name(schemes[k]),
				strerror(-err));
			return AGG_EXIT_SYSTEM;
		}
	}
	agg_print_arr_close();
	return 0;
}

int main(int argc, char **argv)
{
	static const struct argp argp = {
		.options = options, .parser = parse_opt, .args_doc = "[HOSTS]",
		.doc = doc, .children = agg_common_children,
	};
	struct agg_hosts hosts;
	struct agg_build_info info;
	struct agg_diag diag;
	uint8_t key[AGG_SIPHASH_KEY_SIZE];
	bool keyed;
	const char *fname = "<stdin>";
	FILE *f = stdin;
	int err, rc = 0;

	agg_opts_setup(argv[0]);
	agg_plan_init(&env.plan);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	if (!env.has_slots)
		env.plan.slots = agg_plan_default_slots(env.plan.segment);
	/* Only a printed plan carries a token: --eval and --dot need no secret. */
	keyed = !env.has_token && !env.eval && !env.dot;
	if (keyed && (rc = read_secret(key)))
		return rc;

	if (env.hosts && strcmp(env.hosts, "-")) {
		fname = env.hosts;
		f = fopen(fname, "r");
		if (!f) {
			agg_err("cannot open %s: %s", fname, strerror(errno));
			return errno == ENOENT || errno == EACCES ? AGG_EXIT_USAGE :
			       AGG_EXIT_SYSTEM;
		}
	}
	err = agg_hosts_read(&hosts, f, fname, &diag);
	if (f != stdin)
		fclose(f);
	if (err) {
		if (err == -EINVAL)
			agg_err("%s", diag.msg);
		else
			agg_err("cannot read %s: %s", fname, strerror(-err));
		/* Naming a directory is bad input too; other read errors are not. */
		return err == -EINVAL || err == -EISDIR ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}

	if (!env.eval && agg_hosts_check_scheme(&hosts, env.plan.scheme != AGG_SCHEME_RAT,
						&diag)) {
		agg_err("%s", diag.msg);
		agg_hosts_free(&hosts);
		return agg_opts_exit(AGG_EXIT_USAGE);
	}
	if (env.eval && agg_hosts_check_scheme(&hosts, false, &diag)) {
		agg_err("%s", diag.msg);
		agg_hosts_free(&hosts);
		return agg_opts_exit(AGG_EXIT_USAGE);
	}
	agg_print_start(agg_common.json, agg_common.pretty);
	if (env.eval) {
		rc = run_eval(&hosts);
		goto out;
	}
	err = agg_tree_build(&env.plan, &hosts, env.trees, &info);
	if (err) {
		agg_err("cannot build the %s plan: %s", agg_scheme_name(env.plan.scheme),
			err == -E2BIG ? "more than 64 trees or parameter servers" :
			strerror(-err));
		rc = err == -E2BIG ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		goto out;
	}
	if (agg_plan_check(&env.plan, report_problem, NULL)) {
		rc = AGG_EXIT_SYSTEM;	/* a bug in agg-plan, never the user's input */
		goto out;
	}
	if (keyed) {
		err = agg_plan_keyed_token(&env.plan, key, &env.plan.token);
		if (err) {
			agg_err("cannot derive the job token: %s", strerror(-err));
			rc = AGG_EXIT_SYSTEM;
			goto out;
		}
	}
	if (env.plan.scheme == AGG_SCHEME_ALEPH)
		info_aleph(&info);
	else if (env.plan.scheme == AGG_SCHEME_RAT)
		agg_info("rat: %d region levels, %d trees%s", info.levels, env.plan.ntrees,
			 !env.trees && hosts.n > env.plan.ntrees ?
			 " (at most 64: not every host roots one)" : "");
	if (agg_print_json())
		print_plan_json(&env.plan);
	else if (env.dot)
		print_dot(&env.plan);
	else
		agg_plan_write(&env.plan, stdout);
out:
	explicit_bzero(key, sizeof(key));
	agg_plan_free(&env.plan);
	agg_hosts_free(&hosts);
	return agg_opts_exit(rc);
}
