// SPDX-License-Identifier: GPL-2.0-only
/* agg-recv: wait for an iteration's result and write it as raw float32. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cold.h"
#include "dp.h"
#include "grad.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "recv.h"

static struct {
	const char *file;
	uint32_t iter, run;
	bool has_run;
	uint64_t ver;		/* agg_ver(run, iter) */
	double timeout;
	bool in_place;
	bool sparse, text;
} env = { .timeout = 30 };

enum { OPT_ITER = 0x100, OPT_RUN, OPT_TIMEOUT, OPT_IN_PLACE, OPT_SPARSE, OPT_TEXT };

static const char doc[] =
"Wait for iteration N's aggregated gradient on this node and write it to\n"
"FILE (or standard output) as raw little-endian float32 values.  The XDP\n"
"program stores the result segments in a pinned map and signals when the\n"
"last one is in; agg-recv reads the map.  Start it before or after\n"
"agg-send(1).  Within a run an iteration is received once.\n"
"\n"
"EXAMPLES:\n"
"  agg-recv --iter 3 > sum.bin\n"
"  agg-recv --node w2 --iter 3 --timeout 5 sum.bin\n"
"  agg-recv --sparse --iter 3 rows.sum     # on the root: sums; on a worker: receives\n"
"\v"
"Exit status: 0 ok, 1 timed out (the missing segments are named) or\n"
"overwritten by a newer iteration, 2 bad usage (an iteration already\n"
"received, a run that is over), 3 system failure.";

static const struct argp_option options[] = {
	{ "iter", OPT_ITER, "N", 0, "Iteration number (default 0)", 0 },
	{ "run", OPT_RUN, "RUN", 0,
	  "Run: the same on every worker, newer for each restart of the job "
	  "(0 to 65535; default $AGG_RUN, else 0)", 0 },
	{ "timeout", OPT_TIMEOUT, "SEC", 0, "Give up after SEC seconds (default 30)", 0 },
	{ "in-place", OPT_IN_PLACE, NULL, 0,
	  "Overwrite FILE's own pages instead of replacing it through a temporary "
	  "file (no page allocation: cheaper for a result in tmpfs; an error while "
	  "writing leaves FILE partly written)", 0 },
	{ "sparse", OPT_SPARSE, NULL, 0,
	  "The sparse path: on the sparse root (tree 0's) gather the workers' pairs "
	  "(agg-send --sparse), sum them and send the sum to every worker; on a "
	  "worker receive it.  Both write it as agg-sparse(5)", 0 },
	{ "text", OPT_TEXT, NULL, 0, "--sparse: write the text form, not the binary", 0 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{

	switch (key) {
	case OPT_ITER:
		env.iter = agg_argp_iter(state, arg);
		break;
	case OPT_RUN:
		env.run = agg_argp_run(state, arg);
		env.has_run = true;
		break;
	case OPT_IN_PLACE:
		env.in_place = true;
		break;
	case OPT_SPARSE:
		env.sparse = true;
		break;
	case OPT_TEXT:
		env.text = true;
		break;
	case ARGP_KEY_END:
		if (env.text && !env.sparse)
			argp_error(state, "--text needs --sparse");
		break;
	case OPT_TIMEOUT:
		env.timeout = agg_argp_timeout(state, arg);
		break;
	case ARGP_KEY_ARG:
		if (env.file)
			argp_error(state, "one FILE at most");
		env.file = arg;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The output; a signal removes its temporary file (grad.h). */
static struct agg_grad_out out = { .fd = -1 };

static void on_signal(int sig)
{
	agg_grad_out_abort(&out);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int open_output(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = on_signal }, old;
	char why[PATH_MAX + 200];

	/* Not those ignored from the start (a background job's SIGINT). */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!sigaction(sigs[i], NULL, &old) && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	if (agg_grad_out_open(&out, env.file, env.in_place ? AGG_GRAD_IN_PLACE : 0,
			      why, sizeof(why))) {
		agg_err("%s", why);
		return AGG_EXIT_SYSTEM;
	}
	return 0;
}

/*
 * Convert the data segments and write them, a chunk of about 256 KiB at a
 * time through buf.  Every segment and exponent segment is read under its
 * sequence lock (agg.h, "meta"): the lock and the version are taken before
 * the conversion and checked after it, so a newer iteration that
 * overwrites one meanwhile is noticed, and no mix is ever written.  Adds
 * the NaN written to *nan.
 */
#define CHUNK_BYTES	(256 * 1024)
static uint32_t chunk_segs(const struct agg_layout *l)
{
	return CHUNK_BYTES / 4 / l->segment ? CHUNK_BYTES / 4 / l->segment : 1;
}

static int write_result(const struct agg_node *n, float *buf, uint64_t *nan)
{
	const struct agg_layout *l = &n->l;
	char why[PATH_MAX + 200];

	for (uint32_t lo = 0, hi; lo < l->ndata; lo = hi) {
		uint64_t first = (uint64_t)lo * l->segment, last;

		hi = l->ndata - lo < chunk_segs(l) ? l->ndata : lo + chunk_segs(l);
		last = (uint64_t)hi * l->segment;
		if (last > l->nvalues)
			last = l->nvalues;
		if (agg_result_read(n, env.ver, lo, hi, l->nvalues, buf, nan)) {
			agg_err("iteration %u was overwritten by a newer one while reading it",
				env.iter);
			return AGG_EXIT_PROBLEM;
		}
		if (agg_grad_out_write(&out, buf, (last - first) * sizeof(float), why,
				       sizeof(why))) {
			agg_err("%s", why);
			return AGG_EXIT_SYSTEM;
		}
	}
	return 0;
}

/* --sparse: serve on the sparse root, else receive (cold.h); write the sum. */
static int run_sparse(struct agg_node *n, double t0)
{
	bool serve = agg_cold_root(&n->plan) == n->self;
	struct agg_cold c = { .sock = -1 };
	struct agg_sparse g = { 0 };
	char why[1200], *buf = NULL;
	size_t len;
	int err = 0, rc;

	if (agg_node_run_over(n, env.run, why, sizeof(why)) ||
	    (err = agg_cold_open(&c, n, serve ? AGG_COLD_SERVE : AGG_COLD_RECV, why, sizeof(why)))) {
		agg_err("%s", why);
		return err && err != -EINVAL ? AGG_EXIT_SYSTEM : AGG_EXIT_USAGE;
	}
	/* Once per run: the root serves an iteration once (a second serve
	 * could complete a receiver with packets of two sums); a worker's
	 * receive is marked when it delivered. */
	err = agg_node_open_sparse(n, env.ver, serve ? AGG_SPARSE_SERVE : AGG_SPARSE_RECV,
				   why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		agg_cold_close(&c);
		return err == -EOPNOTSUPP ? AGG_EXIT_SYSTEM : AGG_EXIT_USAGE;
	}
	err = serve ? agg_cold_serve(&c, env.ver, env.timeout, &g, why, sizeof(why)) :
		      agg_cold_recv(&c, env.ver, env.timeout, &g, why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = err == -ETIMEDOUT || err == -EPROTO ? AGG_EXIT_PROBLEM : AGG_EXIT_SYSTEM;
	} else if (agg_sparse_encode(&g, env.text, &buf, &len)) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
	} else if (!(rc = open_output()) &&
		   (agg_grad_out_write(&out, buf, len, why, sizeof(why)) ||
		    agg_grad_out_commit(&out, why, sizeof(why)))) {
		agg_err("%s", why);
		rc = AGG_EXIT_SYSTEM;
	}
	if (!rc && !serve)
		agg_node_mark_sparse_recvd(n, env.ver);
	if (!rc && c.st.nan)
		agg_warn("iteration %u: %" PRIu64 " values of the sum are NaN (beyond float32's range, "
			 "or NaN or Inf in a worker's input)", env.iter, c.st.nan);
	if (!rc)
		agg_info("iteration %u: %" PRIu64 " pairs of width %u %s after %.3f s", env.iter,
			 g.n, g.width, serve ? "summed and sent to every worker" : "received",
			 agg_now() - t0);
	/* The counters also when it failed: what arrived, what was dropped. */
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_bool("ok", NULL, !rc);
		agg_print_uint("iter", NULL, env.iter);
		agg_print_uint("run", NULL, env.run);
		agg_print_str("role", NULL, serve ? "root" : "worker");
		agg_print_uint("pairs", NULL, g.n);
		agg_print_uint("width", NULL, g.width);
		agg_cold_print(&c.st);
		agg_print_float("seconds", NULL, agg_now() - t0);
		agg_print_obj_close();
	}
	/* Our acknowledgements may be lost: answer what comes again a while. */
	if (!rc)
		agg_cold_linger(&c, env.ver, AGG_COLD_QUIET, 5);
	free(buf);
	agg_sparse_free(&g);
	agg_cold_close(&c);
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
	struct agg_node n;
	float *chunk = NULL;
	char why[1200];
	double t0 = agg_now();
	uint64_t nan = 0;
	int rc = 0, err, sock = -1;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_log_libbpf();
	agg_print_start(agg_common.json, agg_common.pretty);
	if (!env.has_run && agg_run_default(&env.run))
		return AGG_EXIT_USAGE;
	env.ver = agg_ver(env.run, env.iter);
	if (agg_print_json() && (!env.file || !strcmp(env.file, "-"))) {
		agg_err("-j needs FILE: the gradient itself goes to standard output");
		return AGG_EXIT_USAGE;
	}

	err = agg_node_open(&n, agg_target.pin_dir, agg_target.job, agg_target.node,
			    why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		return agg_opts_exit(err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM);
	}
	if (env.sparse) {
		rc = run_sparse(&n, t0);
		goto out;
	}
	if (n.plan.node[n.self].role != AGG_ROLE_WORKER) {
		agg_err("node %s is a parameter server: it receives no result",
			n.plan.node[n.self].name);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	if (agg_node_open_iter(&n, env.ver, false, why, sizeof(why))) {
		agg_err("%s", why);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	why[0] = '\0';
	chunk = malloc((size_t)chunk_segs(&n.l) * n.l.segment * sizeof(float));
	if (!chunk) {
		agg_err("out of memory");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	/* Bind first, then look: a signal cannot fall between the two. */
	sock = agg_signal_socket(&n);
	if (sock < 0) {
		agg_err("cannot listen for the fetch signal on port %u: %s%s", n.plan.port + 1,
			strerror(-sock), sock == -EADDRINUSE ?
			" (another agg-recv for this node?)" : "");
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	err = agg_recv_wait(&n, sock, env.ver, n.l.ndata, env.timeout, why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = AGG_EXIT_PROBLEM;
		goto out;
	}

	/* The output is touched only once every result is in.  (Writing the
	 * first ones while the others came in was slower: the 2 cores that
	 * send lost more than the overlap won, 0.9-1.2 s against 0.7 s for a
	 * 4-worker 100 MB allreduce.) */
	if ((err = agg_node_map_results(&n))) {
		agg_err("%s: cannot map the results: %s", n.dir, strerror(-err));
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	if ((rc = open_output()))
		goto out;
	rc = write_result(&n, chunk, &nan);
	if (!rc && agg_grad_out_commit(&out, why, sizeof(why))) {
		agg_err("%s", why);
		rc = AGG_EXIT_SYSTEM;
	}
	if (!rc)
		agg_node_mark_recvd(&n, env.ver);
	if (!rc)
		agg_info("iteration %u: %" PRIu64 " values (%" PRIu64 " NaN) after %.3f s",
			 env.iter, n.l.nvalues, nan, agg_now() - t0);
	if (!rc && agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_uint("iter", NULL, env.iter);
		agg_print_uint("run", NULL, env.run);
		agg_print_uint("values", NULL, n.l.nvalues);
		agg_print_uint("nan", NULL, nan);
		agg_print_float("seconds", NULL, agg_now() - t0);
		agg_print_obj_close();
	}
out:
	agg_grad_out_abort(&out);	/* on success: nothing left to remove */
	free(chunk);
	if (sock >= 0)
		close(sock);
	agg_node_close(&n);
	return agg_opts_exit(rc);
}
