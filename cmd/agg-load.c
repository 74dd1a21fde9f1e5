// SPDX-License-Identifier: GPL-2.0-only
/* agg-load: plan in; load, attach and pin this host's part of it. */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "json.h"
#include "load.h"
#include "log.h"
#include "opts.h"
#include "plan.h"

static struct {
	const char *file;
	enum agg_xdp_mode mode;
	bool unload;
	bool dry_run;
	int arp_timeout_ms;
} env = { .arp_timeout_ms = 3000 };

enum { OPT_MODE = 0x100, OPT_UNLOAD, OPT_DRY_RUN, OPT_ARP_TIMEOUT };

static const char doc[] =
"Load this host's part of an aggregation plan (FILE, or standard input when\n"
"FILE is absent or '-'): the XDP and TC programs of node NODE on the\n"
"interface that holds its address, with every map and link pinned under\n"
"PIN_DIR/JOB/NODE/.  Loading the same plan again does nothing; another plan\n"
"replaces the loaded one.\n"
"\n"
"EXAMPLES:\n"
"  agg-plan hosts.txt | agg-load          # the node whose address is here\n"
"  agg-load --node w3 plan.txt            # say which node\n"
"  agg-load --dry-run plan.txt            # what it would do\n"
"  agg-load --unload --job 7              # remove job 7's node from this host\n"
"\v"
"Exit status: 0 ok, 2 bad usage or bad input (a plan that cannot run),\n"
"3 system failure (no bpffs, attach or pin failed, a peer does not answer ARP).";

static const struct argp_option options[] = {
	{ "mode", OPT_MODE, "MODE", 0,
	  "XDP mode: native (default), auto (native, else generic) or generic", 0 },
	{ "unload", OPT_UNLOAD, NULL, 0,
	  "Remove the node's programs, links and pins instead", 0 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0, "Print what would be loaded; change nothing", 0 },
	{ "arp-timeout", OPT_ARP_TIMEOUT, "MS", 0,
	  "How long to wait for a peer's ARP reply (default 3000)", 0 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	uint64_t v;

	switch (key) {
	case OPT_MODE:
		if (!strcmp(arg, "native"))
			env.mode = AGG_MODE_NATIVE;
		else if (!strcmp(arg, "auto"))
			env.mode = AGG_MODE_AUTO;
		else if (!strcmp(arg, "generic"))
			env.mode = AGG_MODE_GENERIC;
		else
			argp_error(state, "bad mode '%s' (native, auto or generic)", arg);
		break;
	case OPT_UNLOAD:
		env.unload = true;
		break;
	case OPT_DRY_RUN:
		env.dry_run = true;
		break;
	case OPT_ARP_TIMEOUT:
		if (agg_parse_u64(arg, &v, NULL) || v < 1 || v > 600000)
			argp_error(state, "bad ARP timeout '%s' (1 to 600000 ms)", arg);
		env.arp_timeout_ms = (int)v;
		break;
	case ARGP_KEY_ARG:
		if (env.file)
			argp_error(state, "one plan FILE at most");
		env.file = arg;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static void report_problem(void *ctx, const char *msg)
{
	agg_err("%s: %s", (const char *)ctx, msg);
}

static int read_plan(struct agg_plan *p, const char **fname)
{
	struct agg_diag d;
	FILE *f = stdin;
	int err;

	*fname = "<stdin>";
	if (env.file && strcmp(env.file, "-")) {
		*fname = env.file;
		f = fopen(env.file, "r");
		if (!f) {
			agg_err("cannot open %s: %s", env.file, strerror(errno));
			return errno == ENOENT || errno == EACCES ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		}
	}
	err = agg_plan_read(p, f, *fname, &d);
	if (f != stdin)
		fclose(f);
	if (err == -EINVAL) {
		agg_err("%s", d.msg);
		return AGG_EXIT_USAGE;
	} else if (err) {
		agg_err("cannot read %s: %s", *fname, strerror(-err));
		return err == -EISDIR ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	if (agg_plan_check(p, report_problem, (void *)*fname))
		return AGG_EXIT_USAGE;
	return 0;
}

/* The node to load: --node, else the one whose address is on this host. */
static int pick_node(const struct agg_plan *p, const char *fname)
{
	int self = -1;

	if (agg_target.node) {
		self = agg_plan_find(p, agg_target.node);
		if (self < 0)
			agg_err("%s: no node %s in the plan", fname, agg_target.node);
		return self;
	}
	for (int i = 0; i < p->nnodes; i++) {
		if (!agg_addr_is_local(p->node[i].addr))
			continue;
		if (self >= 0) {
			agg_err("%s: nodes %s and %s both have addresses on this host: say which with --node",
				fname, p->node[self].name, p->node[i].name);
			return -1;
		}
		self = i;
	}
	if (self < 0)
		agg_err("%s: no node of the plan has an address on this host: say which with --node",
			fname);
	return self;
}

static int do_unload(void)
{
	char dir[512], why[600];
	const char *job = agg_target.job, *node = agg_target.node;
	char jobbuf[16];
	struct agg_plan p;
	int err, rc = 0;

	agg_plan_init(&p);
	if (env.file) {	/* a plan names the job and, by address, the node */
		const char *fname;
		int self;

		rc = read_plan(&p, &fname);
		if (rc)
			goto out;
		self = pick_node(&p, fname);
		if (self < 0) {
			rc = AGG_EXIT_USAGE;
			goto out;
		}
		snprintf(jobbuf, sizeof(jobbuf), "%u", p.job);
		job = jobbuf;
		node = p.node[self].name;
	}
	err = agg_node_locate(agg_target.pin_dir, job, node, dir, sizeof(dir), why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		goto out;
	}
	if (env.dry_run) {
		printf("unload %s\n", dir);
		goto out;
	}
	err = agg_unload_dir(dir, why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_info("unloaded %s", dir);
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_str("action", NULL, "unloaded");
		agg_print_str("pin", NULL, dir);
		agg_print_obj_close();
	}
out:
	agg_plan_free(&p);
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
		.options = options, .parser = parse_opt, .args_doc = "[FILE]",
		.doc = doc, .children = children,
	};
	static const char *const action[] = {
		[AGG_LOADED] = "loaded", [AGG_REPLACED] = "replaced",
		[AGG_UNCHANGED] = "unchanged", [AGG_DRY_RUN] = "dry-run",
	};
	struct agg_load_opts o = { 0 };
	struct agg_plan p;
	const char *fname;
	char why[600], dir[512];
	bool generic;
	int rc, self;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_log_libbpf();
	agg_print_start(agg_common.json, agg_common.pretty);

	if (env.unload)
		return agg_opts_exit(do_unload());

	agg_plan_init(&p);
	rc = read_plan(&p, &fname);
	if (rc)
		goto out;
	if (agg_target.job && strtoul(agg_target.job, NULL, 10) != p.job) {
		agg_err("%s: the plan is job %u, not --job %s", fname, p.job, agg_target.job);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	self = pick_node(&p, fname);
	if (self < 0) {
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	o.pin_dir = agg_target.pin_dir;
	o.mode = env.mode;
	o.dry_run = env.dry_run;
	o.dry_out = stdout;
	o.arp_timeout_ms = env.arp_timeout_ms;
	rc = agg_load(&p, self, &o, &generic, why, sizeof(why));
	if (rc < 0) {
		agg_err("%s", why);
		rc = rc == -EINVAL || rc == -EADDRINUSE ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_pin_path(dir, sizeof(dir), o.pin_dir, p.job, p.node[self].name, NULL);
	if (rc != AGG_DRY_RUN)
		agg_info("%s job %u node %s (%s XDP), pinned at %s", action[rc], p.job,
			 p.node[self].name, generic ? "generic" : "native", dir);
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_str("action", NULL, action[rc]);
		agg_print_uint("job", NULL, p.job);
		agg_print_str("node", NULL, p.node[self].name);
		agg_print_str("xdp_mode", NULL, generic ? "generic" : "native");
		agg_print_str("pin", NULL, dir);
		agg_print_obj_close();
	}
	rc = 0;
out:
	agg_plan_free(&p);
	return agg_opts_exit(rc);
}
