// SPDX-License-Identifier: GPL-2.0-only
/*
 * The sending engine: framing, injection into the node's own XDP program,
 * the window of lanes, resends, and probes when a call stalls (send.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "opts.h"
#include "probe.h"
#include "quant.h"
#include "recv.h"
#include "send.h"

void agg_sender_free(struct agg_sender *s)
{
	if (s->sock >= 0)
		close(s->sock);
	if (s->sig >= 0)
		close(s->sig);
	ring_buffer__free(s->rb);
	free(s->parent);
	free(s->local);
	free(s->root);
	free(s->kid);
	free(s->kid_first);
	free(s->frame);
	free(s->out);
	free(s->exps);
	memset(s, 0, sizeof(*s));
	s->sock = s->sig = -1;
}

void agg_sender_counters(const struct agg_sender *s, uint64_t iters,
			 uint64_t out[AGG_SENT_COUNT])
{
	out[AGG_SENT_ITERS] = iters;
	out[AGG_SENT_WIRE] = s->sent_remote;
	out[AGG_SENT_LOCAL] = s->sent_local;
	out[AGG_SENT_RESENT] = s->resent;
	out[AGG_SENT_FANOUT] = s->fanned;
	out[AGG_SENT_SIGNALS] = s->signalled;
}

static int event_nop(void *ctx, void *data, size_t size)
{
	return 0;
}

int agg_sender_init(struct agg_sender *s, struct agg_node *n)
{
	const struct agg_plan *p = &n->plan;
	const struct agg_host *me = &p->node[n->self];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = me->addr };
	struct ethhdr *eth;
	struct iphdr *ip;
	struct udphdr *udp;

	memset(s, 0, sizeof(*s));
	s->sock = s->sig = -1;
	s->n = n;
	s->parent = calloc(p->ntrees, sizeof(*s->parent));
	s->local = calloc(p->ntrees, sizeof(*s->local));
	s->root = calloc(p->ntrees, sizeof(*s->root));
	s->kid_first = calloc(p->ntrees + 1, sizeof(*s->kid_first));
	s->kid = calloc(p->ntrees * (size_t)(AGG_MAX_KIDS + 1), sizeof(*s->kid));
	s->frame_len = sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + sizeof(struct agg_hdr) +
		       4 * (size_t)n->l.segment;
	s->frame = calloc(1, s->frame_len);
	s->out = calloc(1, s->frame_len + sizeof(struct agg_tcmeta));
	s->exps = malloc(sizeof(*s->exps) * (n->l.ndata ? n->l.ndata : 1));
	if (!s->parent || !s->local || !s->root || !s->kid_first || !s->kid || !s->frame || !s->out ||
	    !s->exps)
		goto nomem;
	for (int t = 0; t < p->ntrees; t++) {
		int par = p->tree[t].parent[n->self], kids[AGG_MAX_KIDS];
		int nk = agg_plan_children(p, t, n->self, kids, AGG_MAX_KIDS);

		s->local[t] = nk > 0;
		s->root[t] = par < 0;
		s->kid_first[t + 1] = s->kid_first[t];
		for (int k = 0; par < 0 && k < nk && k < AGG_MAX_KIDS; k++)
			s->kid[s->kid_first[t + 1]++] = (struct sockaddr_in){
				.sin_family = AF_INET, .sin_addr = p->node[kids[k]].addr,
				.sin_port = htons(p->port) };
		if (!s->local[t] && par < 0) {
			errno = EINVAL;	/* a worker outside a tree: agg_plan_check forbids */
			goto fail;
		}
		if (par >= 0) {
			s->parent[t].sin_family = AF_INET;
			s->parent[t].sin_addr = p->node[par].addr;
			s->parent[t].sin_port = htons(p->port);
		}
	}
	s->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->sock < 0 || bind(s->sock, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	if (n->fd_events >= 0) {
		s->rb = ring_buffer__new(n->fd_events, event_nop, NULL, NULL);
		if (!s->rb)
			goto fail;
		ring_buffer__consume(s->rb);	/* what came before us */
	}
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
nomem:
	errno = ENOMEM;
fail:
	{
		int err = -errno;

		agg_sender_free(s);
		errno = -err;
		return err;
	}
}

int agg_sender_listen(struct agg_sender *s)
{
	int fd = agg_signal_socket(s->n);

	if (fd < 0)
		return fd;
	s->sig = fd;
	return 0;
}

static struct agg_hdr *frame_hdr(struct agg_sender *s)
{
	return (struct agg_hdr *)(s->frame + sizeof(struct ethhdr) + sizeof(struct iphdr) +
				  sizeof(struct udphdr));
}

static int32_t *frame_vals(struct agg_sender *s)
{
	return (int32_t *)(frame_hdr(s) + 1);
}

/* The UDP payload at h (an agg header and its values) to dst, waiting
 * while the socket's buffer is full. */
static int send_to(struct agg_sender *s, const struct agg_hdr *h,
		   const struct sockaddr_in *dst)
{
	size_t len = s->frame_len - ((uint8_t *)frame_hdr(s) - s->frame);

	while (sendto(s->sock, h, len, 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0) {
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			return -errno;
		usleep(50);
	}
	return 0;
}

/*
 * Our own contribution completed a slot where we are the tree's root (a
 * worker root, RAT): our XDP program stored the result here and handed it
 * back as a RESULT for TC's fan-out, which a BPF_PROG_RUN frame never
 * reaches.  Send it to the tree's children from here, and wake the node's
 * receiver when it completed the iteration (AGG_F_SIGNAL).
 */
static int fan_out(struct agg_sender *s, unsigned t, const struct agg_hdr *h, bool signal)
{
	for (unsigned k = s->kid_first[t]; k < s->kid_first[t + 1]; k++) {
		int err = send_to(s, h, &s->kid[k]);

		if (err)
			return err;
		s->fanned++;
	}
	if (signal) {
		const struct agg_plan *p = &s->n->plan;
		struct sockaddr_in me = { .sin_family = AF_INET,
					  .sin_addr = p->node[s->n->self].addr,
					  .sin_port = htons(p->port + 1) };

		/* A wake-up only: the receiver reads the results map. */
		if (sendto(s->sock, "", 0, 0, (struct sockaddr *)&me, sizeof(me)) == 0)
			s->signalled++;
	}
	return 0;
}

/* Send the segment in the frame's header and values, as the attempt-th
 * resend (0: the first transmission). */
static int send_seg(struct agg_sender *s, uint64_t ver, uint32_t seg, unsigned attempt)
{
	const struct agg_plan *p = &s->n->plan;
	struct agg_hdr *h = frame_hdr(s);
	unsigned t = agg_plan_seg_tree(p, seg);
	int err;

	h->magic = AGG_MAGIC;
	h->type = AGG_T_DATA;
	h->tree = t;
	h->from = s->n->self;
	h->job = p->job;
	h->iter = agg_ver_iter(ver);
	h->run = agg_ver_run(ver);
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
		    ctx_out.data != ml || !(m->flags & (AGG_F_UP | AGG_F_FANOUT)))
			return -EPROTO;
		if (m->flags & AGG_F_FANOUT)
			return fan_out(s, t, h, m->flags & AGG_F_SIGNAL);
	}
	err = send_to(s, h, &s->parent[t]);
	if (!err && !s->local[t])
		s->sent_remote++;
	return err;
}

/*
 * When a segment without its result is sent again.  A result acknowledges
 * a segment and comes back only when every worker has sent it, so round
 * trips follow the slowest worker and, under loss, the other workers'
 * resends: their distribution has a long tail whose mean and maximum say
 * little (TCP's mean and deviation grow with every other worker's loss,
 * and their timeouts with them, until recovery takes seconds), while its
 * median is the time a segment needs when nothing goes wrong (on a
 * congested link too, where every round trip is long).  So the timeout is
 * twice a running median of the time from a segment's last send to its
 * result, between RTO_MIN and RTO_STALL, RTO_INIT before the first sample
 * (the workers start at different times), and doubled per resend up to
 * RTO_STALL once nothing at all has come back for RTO_IDLE, so that a dead
 * or cut-off peer is not flooded.
 */
#define RTO_MIN		0.010
#define RTO_INIT	0.200
#define RTO_IDLE	0.100
#define RTO_STALL	1.0
static double rto(const struct agg_sender *s, unsigned attempt, double idle)
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

/* A running median: steps of 5% of itself towards each sample.  Since
 * the last send, resends too: a sample that an earlier send answered is
 * short, and the median shrugs it off; without resends' samples a
 * congested link, where every segment is resent before its result is
 * back, would give none, and the timeout could never grow. */
static void rtt_sample(struct agg_sender *s, double r)
{
	if (!s->rtt_med)
		s->rtt_med = r > 1e-5 ? r : 1e-5;
	else
		s->rtt_med *= r > s->rtt_med ? 1.05 : 1 / 1.05;
}

/*
 * The congestion window: segments sent to a parent and in the pipe (see
 * run_phase), below the slot pool's limit (the plan's window), kept by
 * the delay of our results, as Swift and TCP Vegas do.  base is the
 * shortest round trip seen (the path with empty queues; on a virtual
 * cluster the whole trip may happen inside the send); once a round trip
 * (a result of a segment sent after the last decision) the standing
 * delay, the shortest trip of that round or the one before, is compared
 * with base + CC_TARGET: below it, the window grows (by one per result in
 * slow start, until the delay reaches half the target; by one a round
 * after), above it, it shrinks in proportion to the excess, by at most
 * half.  So the queues on a worker's path hold about CC_TARGET of its
 * data, whatever the switch's buffer: the incast of every worker at one
 * root stays in a shallow buffer instead of overflowing it (and then
 * every worker resends the losses).  A result that waited for another
 * worker reads as queueing too, and slows a worker that was ahead anyway.
 */
#define REO_MIN		0.001	/* reordering tolerated: RACK's window */
#define CWND_INIT	8
#define CWND_MIN	2
#define CC_TARGET	0.003
static void cc_result(struct agg_sender *s, uint32_t limit, double trip, uint64_t seq)
{
	if (trip > 0 && (!s->rtt_base || trip < s->rtt_base))
		s->rtt_base = trip;
	if (trip > 0 && (!s->rtt_round || trip < s->rtt_round))
		s->rtt_round = trip;
	if (s->slow_start)
		s->cwnd += 1;
	if (seq >= s->round_end && s->rtt_round) {
		/* The shorter of this round's and the last one's: a round
		 * whose every result was late because this process or a
		 * peer's was not scheduled (2 cores, a dozen senders)
		 * reads as queueing; two in a row rarely do. */
		double standing = s->rtt_prev && s->rtt_prev < s->rtt_round ?
				  s->rtt_prev : s->rtt_round;
		double over = standing - s->rtt_base - CC_TARGET;

		if (over <= 0) {
			if (!s->slow_start)
				s->cwnd += 1;
			else if (over > -CC_TARGET / 2 && !s->round_lossy)
				s->slow_start = false;	/* halfway: doubling
							 * again would overshoot */
		} else if (!s->round_lossy) {
			double cut = 0.8 * over / standing;

			s->slow_start = false;
			s->cwnd *= 1 - (cut < 0.5 ? cut : 0.5);
		}
		s->round_end = s->seq;
		s->rtt_prev = s->rtt_round;
		s->rtt_round = 0;
		s->round_lossy = false;
	}
	if (s->cwnd > limit)
		s->cwnd = limit;
	if (s->cwnd < CWND_MIN)
		s->cwnd = CWND_MIN;
}

/* A timeout marks the round lossy, whose delay decides nothing: a
 * segment lost to noise delays every worker's result by a timeout, ours
 * too, so on a lossy link most rounds read as queueing, and cutting there
 * (or ending slow start on a loss, as TCP does) would leave it at a few
 * segments a round trip; queues that fill show in the delay of the clean
 * rounds before they overflow. */
static void cc_timeout(struct agg_sender *s)
{
	s->round_lossy = true;
}

/*
 * Wait for something to happen: 50 us while results come in, longer (up
 * to 1 ms) the longer nothing has, and with the fetch signal's socket in
 * poll(), which the call's last result wakes at once.
 */
#define NAP_MIN		50e-6
#define NAP_MAX		1e-3
static void nap(struct agg_sender *s, double idle)
{
	double t = idle < NAP_MIN ? NAP_MIN : idle > NAP_MAX ? NAP_MAX : idle;

	if (s->sig >= 0 && t >= NAP_MAX / 2) {
		struct pollfd pfd = { .fd = s->sig, .events = POLLIN };
		char buf[64];

		if (poll(&pfd, 1, (int)(t * 1000)) > 0)
			while (recv(s->sig, buf, sizeof(buf), 0) > 0)
				;
		return;
	}
	usleep((useconds_t)(t * 1e6));
}

/*
 * Wait until deadline (agg_now()'s clock), or until a result is stored
 * on the node (the "events" ring) or the fetch signal comes, whichever is
 * first; then empty both.  Without the ring, nap.  At most WAIT_MAX at a
 * time, so the caller looks again even if a wake-up was missed.
 */
#define WAIT_MAX	0.05
static void wait_until(struct agg_sender *s, double deadline, double idle)
{
	struct pollfd pfd[2];
	struct timespec ts;
	double t = deadline - agg_now();
	char buf[64];
	nfds_t np = 0;

	if (!s->rb) {
		nap(s, idle);
		return;
	}
	t = t < 0 ? 0 : t > WAIT_MAX ? WAIT_MAX : t;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	pfd[np++] = (struct pollfd){ .fd = ring_buffer__epoll_fd(s->rb), .events = POLLIN };
	if (s->sig >= 0)
		pfd[np++] = (struct pollfd){ .fd = s->sig, .events = POLLIN };
	if (ppoll(pfd, np, &ts, NULL) <= 0)
		return;
	ring_buffer__consume(s->rb);
	if (s->sig >= 0)
		while (recv(s->sig, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
}

struct lane {			/* one slot of the window */
	uint32_t seg;		/* its segment, or UINT32_MAX when all are done */
	bool waiting;		/* seg not sent yet: for the congestion window */
	bool pipe;		/* in the congestion window's count (RFC 6675's
			 * pipe): sent to a parent, not overtaken, no
			 * result, not timed out */
	unsigned attempt;
	uint64_t seq;		/* our send number of its last send */
	double sent;		/* when */
};

static void timeout_why(struct agg_sender *s, const struct agg_send_call *c, uint32_t lo,
			uint32_t hi, const char *probed, char *why, size_t whylen)
{
	char ranges[512];

	agg_node_missing_ranges(s->n, lo, hi, c->ver, ranges, sizeof(ranges));
	snprintf(why, whylen, "iteration %u: %u of %u %ssegments not aggregated after %g s "
		 "without progress (wire segments %s)%s%s", agg_ver_iter(c->ver),
		 agg_node_missing(s->n, lo, hi, c->ver), hi - lo,
		 lo < s->n->l.nexp ? "exponent " : "", c->timeout, ranges,
		 probed[0] ? ": " : "", probed);
}

/*
 * Send wire segments [lo, hi) through a window of lanes: lane j carries
 * segments lo + j, lo + j + window, ..., and may send the next one once
 * the result of the one before is on this node (the result acknowledges
 * it), so a node never holds more than the window of ours (the slot pool
 * holds two windows, so a slot is reused only when every worker has its
 * last result); and only while fewer than the congestion window of first
 * sends wait for their results.  A lane stuck on a lost segment holds up
 * only its own next one.  fill(s, c, seg) puts a segment's values into
 * the frame.
 */
static int run_phase(struct agg_sender *s, struct agg_send_call *c, uint32_t lo, uint32_t hi,
		     uint8_t op, void (*fill)(struct agg_sender *, const struct agg_send_call *,
					      uint32_t),
		     char *why, size_t whylen)
{
	const struct agg_plan *p = &s->n->plan;
	uint32_t window = s->n->l.window, nl = hi - lo < window ? hi - lo : window, busy = nl;
	uint32_t inflight = 0;	/* lanes in the pipe */
	struct lane *lane = calloc(nl ? nl : 1, sizeof(*lane));
	double *rack = calloc(p->ntrees ? p->ntrees : 1, sizeof(*rack));
	double last = agg_now(), t, budget = agg_probe_budget(c->timeout);
	char probed[600] = "";
	int err = 0;

	if (!lane || !rack) {
		free(lane);
		free(rack);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	if (!s->cwnd) {
		s->cwnd = CWND_INIT < window ? CWND_INIT : window;
		s->slow_start = true;
	}
	for (uint32_t j = 0; j < nl; j++)
		lane[j] = (struct lane){ .seg = lo + j, .waiting = true };
	frame_hdr(s)->op = op;
	while (busy && !err) {
		bool moved = false;
		unsigned tree;
		double next, reo = s->rtt_base / 4 > REO_MIN ? s->rtt_base / 4 : REO_MIN;

		t = agg_now();
		next = last + c->timeout - (probed[0] ? 0 : budget);
		for (uint32_t j = 0; j < nl && !err; j++) {
			struct lane *l = &lane[j];
			bool root;
			double due;

			if (l->seg == UINT32_MAX)
				continue;
			tree = agg_plan_seg_tree(p, l->seg);
			root = s->root[tree];
			if (!l->waiting && !agg_node_missing(s->n, l->seg, l->seg + 1, c->ver)) {
				rtt_sample(s, t - l->sent);
				if (!s->local[tree])
					cc_result(s, window, l->attempt ? 0 : t - l->sent, l->seq);
				if (!l->attempt && l->sent > rack[tree])
					rack[tree] = l->sent;
				if (l->pipe)
					inflight--;
				moved = true;
				last = t;
				probed[0] = '\0';	/* moving again: ask anew next time */
				if ((uint64_t)l->seg + window >= hi) {
					l->seg = UINT32_MAX;
					busy--;
					continue;
				}
				*l = (struct lane){ .seg = l->seg + window, .waiting = true };
				tree = agg_plan_seg_tree(p, l->seg);
				root = s->root[tree];
			}
			/* Overtaken (RACK, RFC 8985): a segment we sent later on
			 * its tree has its result, so this one is lost or waits
			 * for another worker, in no queue of ours either way:
			 * out of the pipe, or under loss a window of segments
			 * waiting for other workers' resends would hold up every
			 * new one until its timeout.  (On one path, queues are
			 * FIFO: congestion never reorders.) */
			if (l->pipe && l->sent + reo < rack[tree]) {
				l->pipe = false;
				inflight--;
			}
			if (l->waiting) {
				continue;	/* below, in order */
			} else if (root) {
				continue;	/* our own went into our own program:
						 * it cannot be lost */
			} else if (t >= l->sent + rto(s, l->attempt, t - last)) {
				cc_timeout(s);
				/* Lost: out of the congestion window's count
				 * (RFC 6675's pipe), or a lossy link would
				 * fill it with segments waiting for resends. */
				if (l->pipe)
					inflight--;
				l->pipe = false;
				l->attempt++;
			} else {
				due = l->sent + rto(s, l->attempt, t - last);
				if (due < next)
					next = due;
				continue;
			}
			fill(s, c, l->seg);
			/* When it leaves: on one machine the whole round trip
			 * may happen inside the send. */
			l->sent = agg_now();
			l->seq = s->seq++;
			err = send_seg(s, c->ver, l->seg, l->attempt);
			due = l->sent + rto(s, l->attempt, t - last);
			if (!root && due < next)
				next = due;
		}
		/* New segments, each once its lane's one before has its result,
		 * lowest segment first: results complete on every worker at
		 * once, so every worker then sends the same segments in the
		 * same order, and a segment one worker sends waits for no
		 * other worker's turn (taking lanes in their own order, the
		 * workers drifted apart under loss, and each resent segments
		 * the others had not sent yet).  Those for a parent while the
		 * congestion window has room; our own contributions to trees
		 * we aggregate in (BPF_PROG_RUN) whenever their lane is free:
		 * they cross no link, and our children wait for them. */
		for (bool full = false; !err;) {
			struct lane *l = NULL;

			full = full || inflight >= (uint32_t)s->cwnd;
			for (uint32_t j = 0; j < nl; j++)
				if (lane[j].waiting && lane[j].seg != UINT32_MAX &&
				    (!l || lane[j].seg < l->seg) &&
				    (!full || s->local[agg_plan_seg_tree(p, lane[j].seg)]))
					l = &lane[j];
			if (!l)
				break;
			tree = agg_plan_seg_tree(p, l->seg);
			fill(s, c, l->seg);
			l->waiting = false;
			l->sent = agg_now();
			l->seq = s->seq++;
			err = send_seg(s, c->ver, l->seg, 0);
			if (!s->local[tree]) {
				l->pipe = true;
				inflight++;
			}
			if (!s->root[tree] && l->sent + rto(s, 0, 0) < next)
				next = l->sent + rto(s, 0, 0);
		}
		if (err || !busy)
			break;
		if (agg_now() - last > c->timeout - budget && !probed[0]) {
			agg_explain_missing(s->n, c->ver, lo, hi, (int)(budget * 800),
					    probed, sizeof(probed));
			if (!probed[0])
				snprintf(probed, sizeof(probed), "%s", " ");	/* probed once */
		}
		if (agg_now() - last > c->timeout) {
			free(lane);
			free(rack);
			timeout_why(s, c, lo, hi, probed[0] == ' ' ? "" : probed, why, whylen);
			return -ETIMEDOUT;
		}
		if (!moved || s->rb)
			wait_until(s, next, agg_now() - last);
	}
	free(lane);
	free(rack);
	if (err)
		snprintf(why, whylen, "cannot send: %s", strerror(-err));
	return err;
}

static void fill_exp(struct agg_sender *s, const struct agg_send_call *c, uint32_t seg)
{
	const struct agg_layout *l = &s->n->l;
	uint32_t ndata, nexp;
	int32_t *v = frame_vals(s);

	agg_call_segs(l, c->nvalues, &ndata, &nexp);
	for (uint32_t i = 0; i < l->segment; i++) {
		uint64_t d = (uint64_t)seg * l->segment + i;

		v[i] = d < ndata ? s->exps[d] : AGG_EXP_ZERO;
	}
}

static void fill_data(struct agg_sender *s, const struct agg_send_call *c, uint32_t seg)
{
	const struct agg_layout *l = &s->n->l;
	uint32_t d = seg - l->nexp;
	uint64_t first = (uint64_t)d * l->segment;
	size_t n = c->nvalues - first < l->segment ? c->nvalues - first : l->segment;

	agg_quantize(c->x + first, n, l->segment, agg_node_exponent(s->n, d), l->shift,
		     frame_hdr(s)->op, frame_vals(s));
}

/* Tell the node's XDP program how many data segments version ver has, so
 * that the packet storing the last one becomes the fetch signal (a call
 * shorter than the plan's size); before anything of ver is sent. */
static void expect_segs(struct agg_sender *s, uint64_t ver, uint32_t ndata)
{
	struct agg_progress pg = { .ver = ver, .want = ndata };
	uint32_t k = (uint32_t)ver % AGG_PROGRESS_SLOTS;

	if (s->sig >= 0 && s->n->fd_progress >= 0)
		bpf_map_update_elem(s->n->fd_progress, &k, &pg, BPF_F_LOCK);
}

int agg_send_run(struct agg_sender *s, struct agg_send_call *c, char *why, size_t whylen)
{
	const struct agg_layout *l = &s->n->l;
	uint32_t ndata, nexp;
	int err;

	if (!c->nvalues || c->nvalues > l->nvalues) {
		snprintf(why, whylen, "%llu values: the plan takes 1 to %llu",
			 (unsigned long long)c->nvalues, (unsigned long long)l->nvalues);
		return -EINVAL;
	}
	agg_call_segs(l, c->nvalues, &ndata, &nexp);
	c->nonfinite = 0;
	for (uint32_t d = 0; d < ndata; d++) {
		uint64_t first = (uint64_t)d * l->segment;
		size_t cnt = c->nvalues - first < l->segment ? c->nvalues - first : l->segment;

		s->exps[d] = agg_quant_exponent(c->x + first, cnt, &c->nonfinite);
	}
	expect_segs(s, c->ver, ndata);
	/* Phase 0: the exponents, max-reduced; phase 1: the values. */
	err = run_phase(s, c, 0, nexp, AGG_OP_MAX, fill_exp, why, whylen);
	if (!err)
		err = run_phase(s, c, l->nexp, l->nexp + ndata, c->op, fill_data, why, whylen);
	return err;
}
