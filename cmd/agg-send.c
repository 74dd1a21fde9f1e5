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

#include "dp.h"
#include "grad.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "probe.h"
#include "quant.h"

static struct {
	const char *file;
	uint32_t iter, run;
	bool has_run;
	uint64_t ver;		/* agg_ver(run, iter) */
	unsigned op;
	double timeout;
} env = { .timeout = 10 };

enum { OPT_ITER = 0x100, OPT_RUN, OPT_OP, OPT_TIMEOUT };

static const char doc[] =
"Send this node's gradient for one iteration: FILE (or standard input) holds\n"
"raw little-endian float32 values, exactly as many as the plan's size.  The\n"
"values are cut into segments and sent up every tree of the plan, paced by\n"
"the slot pool; agg-send exits once all of them are aggregated.  agg-recv(1)\n"
"reads the result.  Within a run an iteration is sent once: a retried step\n"
"takes a new iteration number, a restarted job a new run.\n"
"\n"
"EXAMPLES:\n"
"  agg-send --iter 3 grad.bin\n"
"  agg-send --node w2 --iter 3 --op max < grad.bin\n"
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
	case OPT_OP:
		env.op = agg_argp_op(state, arg);
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

struct sender {
	struct agg_node *n;
	int sock;
	struct sockaddr_in *parent;	/* per tree: where a leaf sends */
	bool *local;			/* per tree: aggregate here (BPF_PROG_RUN) */
	uint8_t *frame;			/* eth + ip + udp + agg header + values */
	uint8_t *out;			/* the frame after our XDP program ran,
					 * behind its metadata (struct agg_tcmeta) */
	size_t frame_len;
	uint64_t sent_local, sent_remote, resent;
	double rtt_med;			/* median round trip, s */
};

static int sender_init(struct sender *s, struct agg_node *n)
{
	const struct agg_plan *p = &n->plan;
	const struct agg_host *me = &p->node[n->self];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = me->addr };
	struct ethhdr *eth;
	struct iphdr *ip;
	struct udphdr *udp;

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->parent = calloc(p->ntrees, sizeof(*s->parent));
	s->local = calloc(p->ntrees, sizeof(*s->local));
	s->frame_len = sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + sizeof(struct agg_hdr) +
		       4 * (size_t)n->l.segment;
	s->frame = calloc(1, s->frame_len);
	s->out = calloc(1, s->frame_len + sizeof(struct agg_tcmeta));
	if (!s->parent || !s->local || !s->frame || !s->out)
		return -ENOMEM;
	for (int t = 0; t < p->ntrees; t++) {
		int par = p->tree[t].parent[n->self];

		s->local[t] = agg_plan_children(p, t, n->self, NULL, 0) > 0;
		if (!s->local[t] && par < 0)
			return -EINVAL;	/* a worker outside a tree: agg_plan_check forbids */
		if (par >= 0) {
			s->parent[t].sin_family = AF_INET;
			s->parent[t].sin_addr = p->node[par].addr;
			s->parent[t].sin_port = htons(p->port);
		}
	}
	s->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->sock < 0 || bind(s->sock, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	/* The frame a local contribution enters our own XDP program with. */
	eth = (struct ethhdr *)s->frame;
	ip = (struct iphdr *)(eth + 1);
	udp = (struct udphdr *)(ip + 1);
	memcpy(eth->h_dest, n->nif.mac, 6);
	memcpy(eth->h_source, n->nif.mac, 6);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(s->frame_len - sizeof(*eth));
	ip->saddr = me->addr.s_addr;
	ip->daddr = me->addr.s_addr;
	udp->source = htons(p->port);
	udp->dest = htons(p->port);
	udp->len = htons(s->frame_len - sizeof(*eth) - sizeof(*ip));
	return 0;
}

static struct agg_hdr *frame_hdr(struct sender *s)
{
	return (struct agg_hdr *)(s->frame + sizeof(struct ethhdr) + sizeof(struct iphdr) +
				  sizeof(struct udphdr));
}

/* Send the segment in the frame's header and values, as the attempt-th
 * resend (0: the first transmission). */
static int send_seg(struct sender *s, uint32_t seg, unsigned attempt)
{
	const struct agg_plan *p = &s->n->plan;
	struct agg_hdr *h = frame_hdr(s);
	unsigned t = agg_plan_seg_tree(p, seg);

	h->magic = AGG_MAGIC;
	h->type = AGG_T_DATA;
	h->tree = t;
	h->from = s->n->self;
	h->job = p->job;
	h->iter = env.iter;
	h->run = env.run;
	h->seg = seg;
	h->attempt = attempt > 0xffff ? 0xffff : attempt;
	h->token = s->n->token;
	if (attempt)
		s->resent++;
	if (s->local[t]) {
		/* Our own contribution enters our own XDP program directly.  A
		 * plain BPF_PROG_RUN: the live-frames mode sets up and tears
		 * down a page pool per call, which costs more than the
		 * aggregation.  When the run completes the slot, the program
		 * returns the aggregate addressed to the parent (XDP_PASS with
		 * AGG_F_UP in the metadata, for TC); here it goes to the parent
		 * from us.  The output is the metadata, then the frame. */
		struct xdp_md ctx = { .data_end = s->frame_len,
				       .ingress_ifindex = s->n->nif.ifindex }, ctx_out;
		const size_t ml = sizeof(struct agg_tcmeta);
		const struct agg_tcmeta *m = (const void *)s->out;
		LIBBPF_OPTS(bpf_test_run_opts, o,
			    .data_in = s->frame, .data_size_in = s->frame_len,
			    .data_out = s->out, .data_size_out = s->frame_len + ml,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
			    .ctx_out = &ctx_out, .ctx_size_out = sizeof(ctx_out), .repeat = 1);

		if (bpf_prog_test_run_opts(s->n->fd_prog, &o))
			return -errno;
		s->sent_local++;
		if (o.retval == XDP_DROP)
			return 0;	/* in the slot (or a duplicate, counted) */
		h = (struct agg_hdr *)(s->out + ml + ((uint8_t *)h - s->frame));
		if (o.retval != XDP_PASS || o.data_size_out != s->frame_len + ml ||
		    ctx_out.data != ml || !(m->flags & AGG_F_UP))
			return -EPROTO;
	}
	for (;;) {
		if (sendto(s->sock, h, s->frame_len - ((uint8_t *)frame_hdr(s) - s->frame), 0,
			   (struct sockaddr *)&s->parent[t], sizeof(s->parent[t])) >= 0)
			break;
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			return -errno;
		usleep(50);
	}
	if (!s->local[t])
		s->sent_remote++;
	return 0;
}

static int timeout_report(struct sender *s, uint32_t lo, uint32_t hi, const char *why)
{
	char ranges[512];

	agg_node_missing_ranges(s->n, lo, hi, env.ver, ranges, sizeof(ranges));
	agg_err("iteration %u: %u of %u segments not aggregated after %g s without progress "
		"(wire segments %s)%s%s", env.iter, agg_node_missing(s->n, lo, hi, env.ver),
		hi - lo, env.timeout, ranges, why[0] ? ": " : "", why);
	return AGG_EXIT_PROBLEM;
}

/* Time to ask the tree who holds the iteration up, before giving up. */
static double probe_budget(void)
{
	return env.timeout / 5 < 0.5 ? env.timeout / 5 : 0.5;
}

/*
 * When a segment without its result is sent again.  A result acknowledges
 * a segment and comes back only when every worker has sent it, so round
 * trips follow the slowest worker and, under loss, the other workers'
 * resends: their distribution has a long tail whose mean and maximum say
 * little, while its median is the time a segment needs when nothing goes
 * wrong (on a congested link too, where every round trip is long).  So the
 * timeout is twice a running median of the time from a segment's
 * last send to its result, between RTO_MIN and RTO_STALL, RTO_INIT before the
 * first sample (the workers start at different times), and doubled per
 * resend up to RTO_STALL once nothing at all has come back for RTO_IDLE,
 * so that a dead or cut-off peer is not flooded.
 */
#define RTO_MIN		0.010
#define RTO_INIT	0.200
#define RTO_IDLE	0.100
#define RTO_STALL	1.0
static double rto(const struct sender *s, unsigned attempt, double idle)
{
	double t = 2 * s->rtt_med;

	if (!s->rtt_med)
		return RTO_INIT;
	if (t < RTO_MIN)
		t = RTO_MIN;
	while (idle > RTO_IDLE && attempt-- && t < RTO_STALL)
		t *= 2;
	return t < RTO_STALL ? t : RTO_STALL;
}

/* A running median: steps of 5% of itself towards each sample. */
static void rtt_sample(struct sender *s, double r)
{
	if (!s->rtt_med)
		s->rtt_med = r > 1e-5 ? r : 1e-5;
	else
		s->rtt_med *= r > s->rtt_med ? 1.05 : 1 / 1.05;
}

struct lane {			/* one slot of the window */
	uint32_t seg;		/* the segment in flight, or UINT32_MAX */
	unsigned attempt;
	double sent;
};

/*
 * Send wire segments [lo, hi) through a window of lanes: lane j carries
 * segments lo + j, lo + j + window, ..., and sends the next one as soon as
 * the result of the one before is on this node (the result acknowledges
 * it), so a node never holds more than the window of ours.  fill(s, seg)
 * puts a segment's values into the frame.
 */
static int run_phase(struct sender *s, uint32_t lo, uint32_t hi, uint8_t op,
		     void (*fill)(struct sender *, uint32_t, void *), void *ctx)
{
	uint32_t window = s->n->l.window, nl = hi - lo < window ? hi - lo : window, busy = nl;
	struct lane *lane = calloc(nl ? nl : 1, sizeof(*lane));
	double last = agg_now(), t;
	char why[600] = "";
	int err = 0;

	if (!lane) {
		agg_err("out of memory");
		return AGG_EXIT_SYSTEM;
	}
	frame_hdr(s)->op = op;
	for (uint32_t j = 0; j < nl && !err; j++) {
		fill(s, lo + j, ctx);
		err = send_seg(s, lo + j, 0);
		lane[j] = (struct lane){ lo + j, 0, agg_now() };
	}
	while (busy && !err) {
		bool moved = false;

		t = agg_now();
		for (uint32_t j = 0; j < nl && !err; j++) {
			struct lane *l = &lane[j];

			if (l->seg == UINT32_MAX)
				continue;
			if (!agg_node_missing(s->n, l->seg, l->seg + 1, env.ver)) {
				/* Since the last send, resends too: a sample
				 * that an earlier send answered is short, and
				 * the median shrugs it off; without resends'
				 * samples a congested link, where every segment
				 * is resent before its result is back, would
				 * give none, and the timeout could never grow. */
				rtt_sample(s, t - l->sent);
				moved = true;
				last = t;
				why[0] = '\0';	/* moving again: ask anew next time */
				if ((uint64_t)l->seg + window >= hi) {
					l->seg = UINT32_MAX;
					busy--;
					continue;
				}
				l->seg += window;
				l->attempt = 0;
			} else if (t - l->sent > rto(s, l->attempt, t - last)) {
				l->attempt++;
			} else {
				continue;
			}
			fill(s, l->seg, ctx);
			err = send_seg(s, l->seg, l->attempt);
			l->sent = agg_now();
		}
		if (err)
			break;
		if (agg_now() - last > env.timeout - probe_budget() && !why[0]) {
			agg_explain_missing(s->n, env.ver, lo, hi, (int)(probe_budget() * 800),
					    why, sizeof(why));
			if (!why[0])
				snprintf(why, sizeof(why), "%s", " ");	/* probed once */
		}
		if (agg_now() - last > env.timeout) {
			free(lane);
			return timeout_report(s, lo, hi, why[0] == ' ' ? "" : why);
		}
		if (!moved)
			usleep(50);
	}
	free(lane);
	if (err) {
		agg_err("cannot send: %s", strerror(-err));
		return AGG_EXIT_SYSTEM;
	}
	return 0;
}

struct grad {
	const float *x;
	const int32_t *exp;	/* own exponents (phase 0), agreed ones (phase 1) */
};

static int32_t *frame_vals(struct sender *s)
{
	return (int32_t *)(frame_hdr(s) + 1);
}

static void fill_exp(struct sender *s, uint32_t seg, void *ctx)
{
	const struct grad *g = ctx;
	const struct agg_layout *l = &s->n->l;
	int32_t *v = frame_vals(s);

	for (uint32_t i = 0; i < l->segment; i++) {
		uint64_t d = (uint64_t)seg * l->segment + i;

		v[i] = d < l->ndata ? g->exp[d] : AGG_EXP_ZERO;
	}
}

static void fill_data(struct sender *s, uint32_t seg, void *ctx)
{
	const struct grad *g = ctx;
	const struct agg_layout *l = &s->n->l;
	uint32_t d = seg - l->nexp;
	uint64_t first = (uint64_t)d * l->segment;
	size_t n = l->nvalues - first < l->segment ? l->nvalues - first : l->segment;

	agg_quantize(g->x + first, n, l->segment, agg_node_exponent(s->n, d), l->shift,
		     frame_hdr(s)->op, frame_vals(s));
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
	struct sender s = { 0 };
	struct grad g = { 0 };
	int32_t *exps = NULL;
	uint64_t nonfinite = 0;
	struct agg_grad_in in = { 0 };
	char why[600];
	double t0;
	bool taken = false;	/* the iteration is ours to send: count it */
	int rc, err;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_print_start(agg_common.json, agg_common.pretty);
	if (!env.has_run && agg_run_default(&env.run))
		return AGG_EXIT_USAGE;
	env.ver = agg_ver(env.run, env.iter);

	err = agg_node_open(&n, agg_target.pin_dir, agg_target.job, agg_target.node,
			    why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		return agg_opts_exit(err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM);
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
	exps = malloc(sizeof(*exps) * (n.l.ndata ? n.l.ndata : 1));
	if (!exps || sender_init(&s, &n)) {
		agg_err("cannot set up sending: %s", strerror(errno));
		rc = AGG_EXIT_SYSTEM;
		goto out;
	}
	for (uint32_t d = 0; d < n.l.ndata; d++) {
		uint64_t first = (uint64_t)d * n.l.segment;
		size_t cnt = n.l.nvalues - first < n.l.segment ? n.l.nvalues - first : n.l.segment;

		exps[d] = agg_quant_exponent(in.x + first, cnt, &nonfinite);
	}
	if (nonfinite)
		agg_warn("%" PRIu64 " NaN or Inf values in the input: those elements will be NaN in the result",
			 nonfinite);
	/* Input and sender ready: now the iteration is taken (once per run). */
	if (agg_node_open_iter(&n, env.ver, true, why, sizeof(why))) {
		agg_err("%s", why);
		rc = AGG_EXIT_USAGE;
		goto out;
	}
	taken = true;
	g.x = in.x;
	g.exp = exps;
	/* Phase 0: the exponents, max-reduced; phase 1: the values. */
	rc = run_phase(&s, 0, n.l.nexp, AGG_OP_MAX, fill_exp, &g);
	if (!rc)
		rc = run_phase(&s, n.l.nexp, n.l.nsegs, env.op, fill_data, &g);
	if (rc)
		goto out;
	agg_info("iteration %u: %u segments aggregated (%" PRIu64 " here, %" PRIu64
		 " sent, %" PRIu64 " of them resent) in %.3f s", env.iter, n.l.nsegs,
		 s.sent_local, s.sent_remote, s.resent, agg_now() - t0);
	if (agg_print_json()) {
		agg_print_obj_open(NULL);
		agg_print_uint("iter", NULL, env.iter);
		agg_print_uint("run", NULL, env.run);
		agg_print_uint("segments", NULL, n.l.nsegs);
		agg_print_uint("local", NULL, s.sent_local);
		agg_print_uint("sent", NULL, s.sent_remote);
		agg_print_uint("resent", NULL, s.resent);
		agg_print_uint("nonfinite", NULL, nonfinite);
		agg_print_float("seconds", NULL, agg_now() - t0);
		agg_print_obj_close();
	}
out:
	if (n.fd_sent >= 0 && taken) {
		uint64_t add[AGG_SENT_COUNT] = {
			[AGG_SENT_ITERS] = 1, [AGG_SENT_WIRE] = s.sent_remote,
			[AGG_SENT_LOCAL] = s.sent_local, [AGG_SENT_RESENT] = s.resent,
		};

		if (agg_sent_add(n.fd_sent, add))
			agg_warn("cannot update the counters of %s/sent: %s", n.dir, strerror(errno));
	}
	agg_grad_in_close(&in);
	free(exps);
	agg_node_close(&n);
	return agg_opts_exit(rc);
}
