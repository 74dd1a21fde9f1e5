// SPDX-License-Identifier: GPL-2.0-only
/* agg-send: one iteration's gradient in (raw float32), into the trees. */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "cold.h"
#include "dp.h"
#include "grad.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "send.h"

static struct {
	const char *file;
	uint32_t iter, run;
	bool has_run;
	uint64_t ver;		/* agg_ver(run, iter) */
	unsigned op;
	double timeout;
	unsigned streams;	/* 0: auto */
	bool cc_off;
	bool sparse;
} env = { .timeout = 10, .streams = 1 };

enum { OPT_ITER = 0x100, OPT_RUN, OPT_OP, OPT_TIMEOUT, OPT_STREAMS, OPT_CC, OPT_SPARSE };

static const char doc[] =
"Send this node's gradient for one iteration: FILE (or standard input) holds\n"
"raw little-endian float32 values, exactly as many as the plan's size.  The\n"
"values are cut into segments and sent up every tree of the plan, paced by\n"
"the slot pool; agg-send exits once all of them are aggregated.  agg-recv(1)\n"
"reads the result.  Within a run an iteration is sent once: a retried step\n"
"takes a new iteration number, a restarted job a new run.  --streams sends\n"
"over several UDP sockets (source ports) at once, each in a thread of its\n"
"own, so a receiver's RSS spreads them over its queues and CPUs.\n"
"\n"
"EXAMPLES:\n"
"  agg-send --iter 3 grad.bin\n"
"  agg-send --node w2 --iter 3 --op max < grad.bin\n"
"  agg-send --iter 3 --streams auto grad.bin\n"
"  agg-send --sparse --iter 3 rows.3.w2    # pairs to agg-recv --sparse on the root\n"
"\v"
"Exit status: 0 aggregated, 1 not aggregated within --timeout, 2 bad usage\n"
"or bad input (wrong length; an iteration already sent, a run that is over),\n"
"3 system failure.";

static const struct argp_option options[] = {
	{ "iter", OPT_ITER, "N", 0, "Iteration number (default 0)", 0 },
	{ "run", OPT_RUN, "RUN", 0,
	  "Run: the same on every worker, newer for each restart of the job "
	  "(0 to 65535; default $AGG_RUN, else 0)", 0 },
	{ "op", OPT_OP, "OP", 0, "sum (default), max or min", 0 },
	{ "timeout", OPT_TIMEOUT, "SEC", 0,
	  "Give up when nothing progresses for SEC seconds (default 10)", 0 },
	{ "streams", OPT_STREAMS, "N|auto", 0,
	  "Send over N streams (1 to 64; default 1); auto: the interface's "
	  "receive queues, at most the CPUs of its NUMA node", 0 },
	{ "cc", OPT_CC, "MODE", 0,
	  "Congestion window: delay (default: kept by the results' delay) or off "
	  "(the slot pool, fixed)", 0 },
	{ "sparse", OPT_SPARSE, NULL, 0,
	  "FILE is a sparse gradient (agg-sparse(5)): send its pairs to the sparse "
	  "root, summed there by agg-recv --sparse", 0 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	uint64_t v;

	switch (key) {
	case OPT_ITER:
		env.iter = agg_argp_iter(state, arg);
		break;
	case OPT_RUN:
		env.run = agg_argp_run(state, arg);
		env.has_run = true;
		break;
	case OPT_OP:
		env.op = agg_argp_op(state, arg);
		break;
	case OPT_TIMEOUT:
		env.timeout = agg_argp_timeout(state, arg);
		break;
	case OPT_STREAMS:
		if (!strcmp(arg, "auto")) {
			env.streams = 0;
			break;
		}
		if (agg_parse_u64(arg, &v, NULL) || v < 1 || v > AGG_MAX_STREAMS)
			argp_error(state, "bad --streams '%s' (1 to %d, or auto)", arg,
				   AGG_MAX_STREAMS);
		env.streams = (unsigned)v;
		break;
	case OPT_CC:
		if (strcmp(arg, "delay") && strcmp(arg, "off"))
			argp_error(state, "--cc %s: delay or off", arg);
		env.cc_off = !strcmp(arg, "off");
		break;
	case OPT_SPARSE:
		env.sparse = true;
		break;
	case ARGP_KEY_END:
		if (env.sparse && env.op != AGG_OP_SUM)
			argp_error(state, "--sparse sums: no --op");
		if (env.sparse && (env.streams != 1 || env.cc_off))
			argp_error(state, "--sparse sends over one acknowledged window: "
				   "no --streams or --cc");
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

/* The gradient: exactly want bytes of float32; exit status on failure. */
static int read_input(struct agg_grad_in *in, uint64_t want)
{
	char why[PATH_MAX + 200];
	int err = agg_grad_in_open(in, env.file, want, why, sizeof(why));

	if (!err)
		return 0;
	agg_err("%s", why);
	return err == -ENOENT || err == -EACCES || err == -EISDIR || err == -EINVAL ?
	       AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
}

/* A mapped FILE that shrinks under us faults: say so instead of dying. */
static char sigbus_msg[PATH_MAX + 200];

static void on_sigbus(int sig)
{
	ssize_t w = write(STDERR_FILENO, sigbus_msg, strlen(sigbus_msg));

	(void)w;
	_exit(AGG_EXIT_USAGE);
}

static void guard_input(const struct agg_grad_in *in)
{
	struct sigaction sa = { .sa_handler = on_sigbus };

	if (!in->mapped)
		return;
	snprintf(sigbus_msg, sizeof(sigbus_msg),
		 "%s: %s was truncated while it was being sent (it is read in place: "
		 "replace it with rename, do not rewrite it)\n", agg_log_prog(),
		 env.file && strcmp(env.file, "-") ? env.file : "<stdin>");
	sigaction(SIGBUS, &sa, NULL);
}

/* --sparse: the pairs to the sparse root (cold.h); an exit status. */
static int run_sparse(struct agg_node *n)
{
	struct agg_cold c = { .sock = -1 };
	struct agg_sparse g;
	struct agg_diag d;
	char why[1200];
	double t0 = agg_now();
	int err = agg_sparse_load(&g, env.file, &d), rc = 0;

	if (err) {
		agg_err("%s", d.msg);
		return err == -ENOMEM || err == -EIO ? AGG_EXIT_SYSTEM : AGG_EXIT_USAGE;
	}
	if (agg_node_run_over(n, env.run, why, sizeof(why)) ||
	    (err = agg_cold_open(&c, n, AGG_COLD_SEND, why, sizeof(why)))) {
		agg_err("%s", why);
		rc = err && err != -EINVAL ? AGG_EXIT_SYSTEM : AGG_EXIT_USAGE;
		goto out;
	}
	/* Input and socket ready: now the iteration is taken (once per run:
	 * the root must never see two attempts of one). */
	err = agg_node_open_sparse(n, env.ver, AGG_SPARSE_SEND, why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = err == -EOPNOTSUPP ? AGG_EXIT_SYSTEM : AGG_EXIT_USAGE;
		goto out;
	}
	err = agg_cold_send(&c, &g, env.ver, env.timeout, why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		rc = err == -ETIMEDOUT ? AGG_EXIT_PROBLEM : err == -E2BIG ? AGG_EXIT_USAGE :
		     AGG_EXIT_SYSTEM;
		goto out;
	}
	agg_info("iteration %u: %" PRIu64 " pairs of width %u in %" PRIu64 " packets (%" PRIu64
		 " resent) to the sparse root in %.3f s", env.iter, g.n, g.width, c.st.sent,
		 c.st.resent, agg_now() - t0);
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_uint("iter", NULL, env.iter);
		agg_print_uint("run", NULL, env.run);
		agg_print_uint("width", NULL, g.width);
		agg_cold_print(&c.st);
		agg_print_float("seconds", NULL, agg_now() - t0);
		agg_print_obj_close();
	}
out:
	agg_cold_close(&c);
	agg_sparse_free(&g);
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
	struct agg_sender s = { .sig = -1 };
	uint64_t counts[AGG_SENT_ENTRIES];
	unsigned streams;
	struct agg_send_call c = { 0 };
	struct agg_grad_in in = { 0 };
	char why[1200];
	double t0;
	bool taken = false;	/* the iteration is ours to send: count it */
	int rc, err;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_log_libbpf();
	agg_print_start(agg_common.json, agg_common.pretty);
	if (!env.has_run && agg_run_default(&env.run))
		return AGG_EXIT_USAGE;
	env.ver = agg_ver(env.run, env.iter);
	streams = env.streams;

	err = agg_node_open(&n, agg_target.pin_dir, agg_target.job, agg_target.node,
			    why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		return agg_opts_exit(err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM);
	}
	if (env.sparse) {
		rc = run_sparse(&n);
		goto out;
	}
	if (n.plan.node[n.self].role != AGG_ROLE_WORKER) {
		agg_err("node %s is a parameter server: it has no gradient to send",
			n.plan.node[n.self].name);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	rc = read_input(&in, n.l.nvalues * 4);
	if (rc)
		goto out;
	guard_input(&in);
	t0 = agg_now();
	if (!streams) {
		char how[200];

		streams = agg_streams_auto(&n, how, sizeof(how));
		agg_info("--streams auto: %s", how);
	}
	if (agg_sender_init(&s, &n, streams)) {
		agg_err("cannot set up sending: %s", strerror(errno));
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	s.cc_off = env.cc_off;
	/* Input and sender ready: now the iteration is taken (once per run). */
	if (agg_node_open_iter(&n, env.ver, true, why, sizeof(why))) {
		agg_err("%s", why);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	taken = true;
	c = (struct agg_send_call){ .ver = env.ver, .x = in.x, .nvalues = n.l.nvalues,
				    .op = env.op, .timeout = env.timeout };
	err = agg_send_run(&s, &c, why, sizeof(why));
	if (c.nonfinite)
		agg_warn("%" PRIu64 " NaN or Inf values in the input: those elements will be NaN in the result",
			 c.nonfinite);
	if (err) {
		agg_err("%s", why);
		rc = err == -ETIMEDOUT ? AGG_EXIT_PROBLEM : AGG_EXIT_SYSTEM;
		goto out;
	}
	if (agg_sender_save(&s))
		agg_warn("cannot keep the congestion state for the next agg-send: %s",
			 strerror(errno));
	agg_sender_counters(&s, 1, counts);
	agg_info("iteration %u: %u segments aggregated (%" PRIu64 " here, %" PRIu64
		 " sent, %" PRIu64 " of them resent) over %u stream%s in %.3f s; window %.0f "
		 "segments, round trip %.2f ms", env.iter,
		 n.l.nsegs, counts[AGG_SENT_LOCAL], counts[AGG_SENT_WIRE],
		 counts[AGG_SENT_RESENT], s.nstreams, s.nstreams == 1 ? "" : "s",
		 agg_now() - t0, agg_sender_cwnd(&s), agg_sender_rtt(&s) * 1e3);
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_uint("iter", NULL, env.iter);
		agg_print_uint("run", NULL, env.run);
		agg_print_uint("segments", NULL, n.l.nsegs);
		agg_print_uint("streams", NULL, s.nstreams);
		agg_print_uint("local", NULL, counts[AGG_SENT_LOCAL]);
		agg_print_uint("sent", NULL, counts[AGG_SENT_WIRE]);
		agg_print_uint("resent", NULL, counts[AGG_SENT_RESENT]);
		agg_print_uint("nonfinite", NULL, c.nonfinite);
		agg_print_float("seconds", NULL, agg_now() - t0);
		agg_print_float("window", NULL, agg_sender_cwnd(&s));
		agg_print_float("rtt_ms", NULL, agg_sender_rtt(&s) * 1e3);
		agg_print_obj_close();
	}
out:
	if (n.fd_sent >= 0 && taken) {
		agg_sender_counters(&s, 1, counts);
		if (agg_sent_add(n.fd_sent, counts))
			agg_warn("cannot update the counters of %s/sent: %s", n.dir, strerror(errno));
	}
	agg_sender_free(&s);
	agg_grad_in_close(&in);
	agg_node_close(&n);
	return agg_opts_exit(rc);
}
