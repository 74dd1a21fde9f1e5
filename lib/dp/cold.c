// SPDX-License-Identifier: GPL-2.0-only
/*
 * The sparse cold path (cold.h): framing of pairs into agg packets, the
 * acknowledged window of a sender, the root's gather, sum and result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cold.h"
#include "json.h"
#include "opts.h"

_Static_assert(AGG_SPARSE_MAX_WIDTH == AGG_WIRE_MAX_WIDTH,
	       "a file's width limit and the wire's disagree");

#define WINDOW		64		/* packets in flight per peer */
#define SPAN		(16 * WINDOW)	/* from the oldest one not acknowledged:
					 * a lost packet does not stall the rest */
#define MAX_PKTS	(1u << 24)	/* packets of one sender in one iteration */
#define DGRAM_MAX	65536
#define RTO_MIN		0.01
#define RTO_MAX		0.2

static const size_t HDRS = sizeof(struct agg_hdr) + sizeof(struct agg_sparse_hdr);

int agg_cold_root(const struct agg_plan *p)
{
	return p->ntrees > 0 ? p->tree[0].root : -1;
}

void agg_cold_close(struct agg_cold *c)
{
	if (c->sock >= 0)
		close(c->sock);
	free(c->buf);
	free(c->done_total);
	memset(c, 0, sizeof(*c));
	c->sock = -1;
}

int agg_cold_open(struct agg_cold *c, struct agg_node *n, enum agg_cold_role role,
		  char *why, size_t whylen)
{
	static const char *const what[] = { "sender", "receiver", "aggregator" };
	static const int port_off[] = { AGG_SPARSE_PORT_SEND, AGG_SPARSE_PORT_RECV, 0 };
	const struct agg_plan *p = &n->plan;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = p->node[n->self].addr };
	int big = 8 << 20, err;

	memset(c, 0, sizeof(*c));
	c->sock = -1;
	c->n = n;
	c->role = role;
	c->root = agg_cold_root(p);
	c->srtt = 0.01;
	if (c->root < 0 || p->port > 65535 - AGG_SPARSE_PORT_RECV) {
		snprintf(why, whylen, "the plan has %s: the sparse path needs tree 0 and a "
			 "port up to %d", c->root < 0 ? "no tree" : "its port too high",
			 65535 - AGG_SPARSE_PORT_RECV);
		return -EINVAL;
	}
	if (role == AGG_COLD_SERVE && c->root != n->self) {
		snprintf(why, whylen, "node %s is not the sparse root (%s, the root of tree 0)",
			 p->node[n->self].name, p->node[c->root].name);
		return -EINVAL;
	}
	if (role != AGG_COLD_SERVE && p->node[n->self].role != AGG_ROLE_WORKER) {
		snprintf(why, whylen, "node %s is a parameter server: it has no sparse gradient",
			 p->node[n->self].name);
		return -EINVAL;
	}
	c->root_sa = (struct sockaddr_in){ .sin_family = AF_INET,
					   .sin_addr = p->node[c->root].addr,
					   .sin_port = htons(p->port) };
	c->buf = malloc(DGRAM_MAX);
	sa.sin_port = htons(p->port + port_off[role]);
	c->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (!c->buf || c->sock < 0 || bind(c->sock, (struct sockaddr *)&sa, sizeof(sa))) {
		err = c->buf ? -errno : -ENOMEM;
		snprintf(why, whylen, err == -EADDRINUSE ?
			 "another sparse %s of node %s listens on %s:%u" :
			 "cannot set up the sparse %s of node %s on %s:%u: %s", what[role],
			 p->node[n->self].name, inet_ntoa(sa.sin_addr), ntohs(sa.sin_port),
			 strerror(-err));
		agg_cold_close(c);
		return err;
	}
	/* The root takes every worker's window at once: room for them (the
	 * forced size needs CAP_NET_ADMIN; else what rmem_max allows). */
	if (setsockopt(c->sock, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(c->sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return 0;
}

/* ---- framing ------------------------------------------------------------------ */

/* Pairs of width w in one packet of the node's MTU. */
static uint32_t pairs_per_pkt(const struct agg_cold *c, uint32_t w)
{
	int mtu = c->n->nif.mtu > 0 ? c->n->nif.mtu : 1500;
	size_t room = (size_t)mtu - 28 - HDRS, per = room / agg_sparse_pair_size(w);

	if (mtu > 65535 || room > DGRAM_MAX - 28 - HDRS)
		per = (DGRAM_MAX - 28 - HDRS - 1) / agg_sparse_pair_size(w);
	return per ? (per > 65535 ? 65535 : (uint32_t)per) : 1;
}

static void fill_hdr(const struct agg_cold *c, uint8_t type, uint64_t ver, uint32_t seq,
		     uint16_t attempt, uint32_t npkts, uint32_t width, uint32_t npairs)
{
	struct agg_hdr *h = (struct agg_hdr *)c->buf;
	struct agg_sparse_hdr *sh = (struct agg_sparse_hdr *)(h + 1);

	*h = (struct agg_hdr){
		.magic = AGG_MAGIC, .type = type, .op = AGG_OP_SUM, .tree = 0,
		.from = (uint16_t)c->n->self, .job = c->n->plan.job,
		.iter = agg_ver_iter(ver), .seg = seq, .run = (uint16_t)agg_ver_run(ver),
		.attempt = attempt, .token = c->n->token,
	};
	*sh = (struct agg_sparse_hdr){ .npkts = npkts, .width = (uint16_t)width,
				       .npairs = (uint16_t)npairs };
}

/* Pairs [lo, lo + np) of g after the headers in c->buf; the datagram's length. */
static size_t fill_pairs(struct agg_cold *c, const struct agg_sparse *g, uint64_t lo, uint32_t np)
{
	uint8_t *p = c->buf + HDRS;

	for (uint64_t i = lo; i < lo + np; i++) {
		memcpy(p, &g->id[i], 8);
		memcpy(p + 8, &g->val[i * g->width], 4 * (size_t)g->width);
		p += agg_sparse_pair_size(g->width);
	}
	return (size_t)(p - c->buf);
}

static int send_buf(struct agg_cold *c, size_t len, const struct sockaddr_in *dst)
{
	while (sendto(c->sock, c->buf, len, 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0) {
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			return -errno;
		usleep(50);
	}
	return 0;
}

/* Acknowledge packet seq of ver; have: the packets of the stream we hold
 * when that is all of them (any one such acknowledgement completes the
 * peer's window), else 0. */
static int ack(struct agg_cold *c, uint64_t ver, uint32_t seq, uint32_t have, uint32_t width,
	       const struct sockaddr_in *dst)
{
	fill_hdr(c, AGG_T_SPARSE_ACK, ver, seq, 0, have, width, 0);
	return send_buf(c, HDRS, dst);
}

static int send_ack(struct agg_cold *c, const struct agg_hdr *h, uint32_t have, uint32_t width,
		    const struct sockaddr_in *dst)
{
	return ack(c, agg_ver(h->run, h->iter), h->seg, have, width, dst);
}

/*
 * The datagram in c->buf, len bytes from src: its header if it is a sparse
 * packet of ver from a member of the plan (sh set), else NULL, counted.
 */
static const struct agg_hdr *take(struct agg_cold *c, ssize_t len, const struct sockaddr_in *src,
				  uint64_t ver, const struct agg_sparse_hdr **sh)
{
	const struct agg_hdr *h = (const struct agg_hdr *)c->buf;
	const struct agg_plan *p = &c->n->plan;
	struct agg_cold_stats *st = &c->st;

	*sh = (const struct agg_sparse_hdr *)(h + 1);
	if (len < (ssize_t)HDRS || h->magic != AGG_MAGIC || h->flags || !agg_is_sparse(h->type) ||
	    h->op != AGG_OP_SUM || h->tree != 0 || !agg_sparse_len(h->type, *sh) ||
	    (size_t)len != sizeof(*h) + agg_sparse_len(h->type, *sh) || h->iter == 0xffffffff) {
		st->drop_malformed++;
		return NULL;
	}
	if (h->job != p->job) {
		st->drop_job++;
		return NULL;
	}
	if (h->token != c->n->token) {
		st->drop_token++;
		return NULL;
	}
	if (h->from >= p->nnodes || p->node[h->from].addr.s_addr != src->sin_addr.s_addr) {
		st->drop_member++;
		return NULL;
	}
	if (h->run != agg_ver_run(ver)) {
		st->drop_run++;
		return NULL;
	}
	if (h->iter != agg_ver_iter(ver)) {
		st->drop_stale++;
		return NULL;
	}
	return h;
}

/* Wait up to wait seconds for a datagram; its length (0: none), -errno. */
static ssize_t recv_one(struct agg_cold *c, double wait, struct sockaddr_in *src)
{
	socklen_t sl = sizeof(*src);
	ssize_t r = recvfrom(c->sock, c->buf, DGRAM_MAX, 0, (struct sockaddr *)src, &sl);

	if (r >= 0)
		return r;
	if (errno != EAGAIN && errno != EINTR)
		return -errno;
	if (wait > 0) {
		struct pollfd pfd = { .fd = c->sock, .events = POLLIN };
		int ms = (int)(wait * 1000) + 1;

		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
		sl = sizeof(*src);
		r = recvfrom(c->sock, c->buf, DGRAM_MAX, 0, (struct sockaddr *)src, &sl);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* ---- a window of acknowledged packets to one peer ---------------------------- */

struct outbox {
	struct sockaddr_in dst;
	uint32_t npkts;		/* packets 0 .. npkts - 1 */
	uint32_t base;		/* the lowest one not acknowledged */
	uint32_t next;		/* the lowest one never sent */
	uint32_t nacked;
	uint32_t inflight;	/* sent, not acknowledged */
	uint8_t *acked;
	uint16_t *attempt;
	double *sent_at;
};

static int outbox_init(struct outbox *o, uint32_t npkts, const struct sockaddr_in *dst)
{
	memset(o, 0, sizeof(*o));
	o->dst = *dst;
	o->npkts = npkts;
	o->acked = calloc(npkts, sizeof(*o->acked));
	o->attempt = calloc(npkts, sizeof(*o->attempt));
	o->sent_at = calloc(npkts, sizeof(*o->sent_at));
	return o->acked && o->attempt && o->sent_at ? 0 : -ENOMEM;
}

static void outbox_free(struct outbox *o)
{
	free(o->acked);
	free(o->attempt);
	free(o->sent_at);
	memset(o, 0, sizeof(*o));
}

static double rto(const struct agg_cold *c, unsigned attempt)
{
	double t = 3 * c->srtt + 0.005;

	t = t < RTO_MIN ? RTO_MIN : t;
	t *= 1u << (attempt < 3 ? attempt : 3);
	return t > RTO_MAX ? RTO_MAX : t;
}

/* An acknowledgement of packet seq; true when it was news. */
static bool outbox_ack(struct agg_cold *c, struct outbox *o, uint32_t seq, double now)
{
	if (seq >= o->next || o->acked[seq])
		return false;
	o->acked[seq] = 1;
	o->nacked++;
	o->inflight--;
	c->st.acked++;
	if (!o->attempt[seq])	/* Karn: only first transmissions time the path */
		c->srtt = 0.875 * c->srtt + 0.125 * (now - o->sent_at[seq]);
	while (o->base < o->npkts && o->acked[o->base])
		o->base++;
	return true;
}

/* An acknowledgement that the peer holds all npkts: every packet is. */
static bool outbox_ack_all(struct agg_cold *c, struct outbox *o, uint32_t npkts, double now)
{
	bool news = false;

	if (npkts != o->npkts)
		return false;
	for (uint32_t s = o->base; s < o->npkts; s++) {
		if (o->acked[s])
			continue;
		if (s >= o->next) {	/* never sent: the peer cannot hold it */
			c->st.drop_malformed++;
			return news;
		}
		news |= outbox_ack(c, o, s, now);
	}
	return news;
}

typedef size_t (*frame_fn)(struct agg_cold *c, uint32_t seq, uint16_t attempt, void *ctx);

/* Send what is due again, then new packets as far as the window allows;
 * *due gets the time of the next resend.  0 or -errno. */
static int outbox_pump(struct agg_cold *c, struct outbox *o, frame_fn frame, void *ctx,
		       double now, double *due)
{
	int err;

	for (uint32_t s = o->base; s < o->next; s++) {
		double at;

		if (o->acked[s])
			continue;
		at = o->sent_at[s] + rto(c, o->attempt[s]);
		if (at <= now) {
			o->attempt[s] = o->attempt[s] < 0xffff ? o->attempt[s] + 1 : 0xffff;
			err = send_buf(c, frame(c, s, o->attempt[s], ctx), &o->dst);
			if (err)
				return err;
			o->sent_at[s] = now;
			c->st.resent++;
			at = now + rto(c, o->attempt[s]);
		}
		if (at < *due)
			*due = at;
	}
	while (o->next < o->npkts && o->inflight < WINDOW && o->next - o->base < SPAN) {
		uint32_t s = o->next++;

		o->inflight++;
		err = send_buf(c, frame(c, s, 0, ctx), &o->dst);
		if (err)
			return err;
		o->sent_at[s] = now;
		c->st.sent++;
		if (now + rto(c, 0) < *due)
			*due = now + rto(c, 0);
	}
	return 0;
}

/* ---- the sender ------------------------------------------------------------ */

struct send_ctx {
	const struct agg_sparse *g;
	uint64_t ver;
	uint32_t per, ndata;	/* pairs a packet; data packets (the end marker is ndata) */
};

static size_t frame_data(struct agg_cold *c, uint32_t seq, uint16_t attempt, void *ctx)
{
	struct send_ctx *x = ctx;
	uint64_t lo = (uint64_t)seq * x->per;
	uint32_t np = seq == x->ndata ? 0 :
		      (uint32_t)(x->g->n - lo < x->per ? x->g->n - lo : x->per);

	fill_hdr(c, seq == x->ndata ? AGG_T_SPARSE_END : AGG_T_SPARSE, x->ver, seq, attempt,
		 x->ndata, x->g->width, np);
	return fill_pairs(c, x->g, lo, np);
}

int agg_cold_send(struct agg_cold *c, const struct agg_sparse *g, uint64_t ver, double timeout,
		  char *why, size_t whylen)
{
	struct send_ctx x = { .g = g, .ver = ver, .per = pairs_per_pkt(c, g->width) };
	double last = agg_now();
	struct outbox o;
	uint64_t nd = (g->n + x.per - 1) / x.per;
	int err;

	if (nd >= MAX_PKTS) {
		snprintf(why, whylen, "%" PRIu64 " pairs: more than %u packets", g->n, MAX_PKTS);
		return -E2BIG;
	}
	x.ndata = (uint32_t)nd;
	if (outbox_init(&o, x.ndata + 1, &c->root_sa)) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	c->st.pairs_out += g->n;
	for (;;) {
		double now = agg_now(), due = now + 0.05;
		struct sockaddr_in src;
		const struct agg_sparse_hdr *sh;
		const struct agg_hdr *h;
		ssize_t r;

		err = outbox_pump(c, &o, frame_data, &x, now, &due);
		if (err) {
			snprintf(why, whylen, "cannot send to %s: %s",
				 c->n->plan.node[c->root].name, strerror(-err));
			break;
		}
		if (o.nacked == o.npkts)
			break;
		if (now - last > timeout) {
			snprintf(why, whylen, "iteration %u: %u of %u packets (%u of pairs and the end "
				 "marker) not acknowledged by the sparse root %s in %.3g s",
				 agg_ver_iter(ver), o.npkts - o.nacked, o.npkts, x.ndata,
				 c->n->plan.node[c->root].name, timeout);
			err = -ETIMEDOUT;
			break;
		}
		r = recv_one(c, due - now, &src);
		for (; r > 0; r = recv_one(c, 0, &src)) {
			h = take(c, r, &src, ver, &sh);
			if (!h)
				continue;
			if (h->type != AGG_T_SPARSE_ACK || h->from != c->root) {
				c->st.drop_malformed++;
				continue;
			}
			if (outbox_ack(c, &o, h->seg, agg_now()) |
			    (sh->npkts && outbox_ack_all(c, &o, sh->npkts, agg_now())))
				last = agg_now();
		}
		if (r < 0) {
			err = (int)r;
			snprintf(why, whylen, "cannot receive: %s", strerror(-err));
			break;
		}
	}
	outbox_free(&o);
	return err;
}

/* ---- gathering packets ----------------------------------------------------- */

/* What one sender sent of an iteration, by packet. */
struct inbox {
	uint32_t npkts;		/* UINT32_MAX until known */
	uint32_t have, cap;
	uint8_t **pkt;		/* the pairs of packet s (NULL: not in) */
	uint16_t *npairs;
	bool end;		/* the end marker is in (a sender's) */
};

static void inbox_free(struct inbox *b)
{
	for (uint32_t s = 0; s < b->cap; s++)
		free(b->pkt[s]);
	free(b->pkt);
	free(b->npairs);
	memset(b, 0, sizeof(*b));
	b->npkts = UINT32_MAX;
}

/* Keep packet h's pairs (new: 1, again: 0) or -ENOMEM / -EPROTO. */
static int inbox_put(struct inbox *b, const struct agg_hdr *h, const struct agg_sparse_hdr *sh)
{
	size_t len = (size_t)sh->npairs * agg_sparse_pair_size(sh->width);
	uint32_t s = h->seg;

	if (s >= MAX_PKTS || (b->npkts != UINT32_MAX && s >= b->npkts))
		return -EPROTO;
	if (s >= b->cap) {
		uint32_t cap = b->cap ? b->cap : 64;
		uint8_t **pkt;
		uint16_t *np;

		while (cap <= s)
			cap *= 2;
		pkt = realloc(b->pkt, cap * sizeof(*pkt));
		if (pkt)
			b->pkt = pkt;
		np = pkt ? realloc(b->npairs, cap * sizeof(*np)) : NULL;
		if (!np)
			return -ENOMEM;
		b->npairs = np;
		memset(b->pkt + b->cap, 0, (cap - b->cap) * sizeof(*pkt));
		b->cap = cap;
	}
	if (b->pkt[s])
		return 0;
	b->pkt[s] = malloc(len ? len : 1);
	if (!b->pkt[s])
		return -ENOMEM;
	memcpy(b->pkt[s], sh + 1, len);
	b->npairs[s] = sh->npairs;
	b->have++;
	return 1;
}

static bool inbox_full(const struct inbox *b, bool need_end)
{
	return b->npkts != UINT32_MAX && b->have == b->npkts && (!need_end || b->end);
}

/* The pairs of a complete inbox, in packet order, into g: 0, -ENOMEM, or
 * -EPROTO with *bad the first pair out of id order. */
static int inbox_pairs(const struct inbox *b, uint32_t width, struct agg_sparse *g, uint64_t *bad)
{
	uint64_t n = 0, k = 0;
	size_t ps = agg_sparse_pair_size(width);

	for (uint32_t s = 0; s < b->npkts; s++)
		n += b->npairs[s];
	agg_sparse_init(g, width);
	if (agg_sparse_reserve(g, n ? n : 1))
		return -ENOMEM;
	for (uint32_t s = 0; s < b->npkts; s++)
		for (uint32_t i = 0; i < b->npairs[s]; i++, k++) {
			const uint8_t *p = b->pkt[s] + i * ps;

			memcpy(&g->id[k], p, 8);
			memcpy(&g->val[k * width], p + 8, 4 * (size_t)width);
			if (k && g->id[k] <= g->id[k - 1]) {
				*bad = k;
				agg_sparse_free(g);
				return -EPROTO;
			}
		}
	g->n = n;
	return 0;
}

/* ---- the receiver ---------------------------------------------------------- */

int agg_cold_recv(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		  char *why, size_t whylen)
{
	double deadline = agg_now() + timeout;
	struct inbox b = { .npkts = UINT32_MAX };
	uint32_t width = 0;
	uint64_t bad = 0;
	int err = 0;

	agg_sparse_init(out, 0);
	while (!inbox_full(&b, false)) {
		double now = agg_now();
		struct sockaddr_in src;
		const struct agg_sparse_hdr *sh;
		const struct agg_hdr *h;
		ssize_t r;

		if (now >= deadline) {
			if (b.npkts == UINT32_MAX)
				snprintf(why, whylen, "iteration %u: no result packet from the sparse "
					 "root %s in %.3g s", agg_ver_iter(ver),
					 c->n->plan.node[c->root].name, timeout);
			else
				snprintf(why, whylen, "iteration %u: %u of %u result packets from the "
					 "sparse root %s missing after %.3g s", agg_ver_iter(ver),
					 b.npkts - b.have, b.npkts, c->n->plan.node[c->root].name,
					 timeout);
			err = -ETIMEDOUT;
			break;
		}
		r = recv_one(c, deadline - now < 0.1 ? deadline - now : 0.1, &src);
		if (r < 0) {
			err = (int)r;
			snprintf(why, whylen, "cannot receive: %s", strerror(-err));
			break;
		}
		if (r == 0 || !(h = take(c, r, &src, ver, &sh)))
			continue;
		if (h->type != AGG_T_SPARSE_RESULT || h->from != c->root || !sh->npkts ||
		    (b.npkts != UINT32_MAX && (sh->npkts != b.npkts || sh->width != width))) {
			c->st.drop_malformed++;
			continue;
		}
		b.npkts = sh->npkts;
		width = sh->width;
		err = inbox_put(&b, h, sh);
		if (err < 0) {
			if (err == -EPROTO) {
				c->st.drop_malformed++;
				err = 0;
				continue;
			}
			snprintf(why, whylen, "out of memory");
			break;
		}
		if (err)
			c->st.taken++, c->st.pairs_in += sh->npairs;
		else
			c->st.dup++;
		err = send_ack(c, h, inbox_full(&b, false) ? b.npkts : 0, width, &src);
		if (err) {
			snprintf(why, whylen, "cannot acknowledge: %s", strerror(-err));
			break;
		}
	}
	if (!err) {
		c->done_npkts = b.npkts;
		c->done_width = width;
		err = inbox_pairs(&b, width, out, &bad);
		if (err == -EPROTO)
			snprintf(why, whylen, "iteration %u: the result's pair %" PRIu64 " is out of "
				 "id order", agg_ver_iter(ver), bad);
		else if (err)
			snprintf(why, whylen, "out of memory");
		else
			c->st.pairs_out += out->n;
	}
	inbox_free(&b);
	return err;
}

/* ---- the root -------------------------------------------------------------- */

struct result_ctx {
	const struct agg_sparse *g;
	uint64_t ver;
	uint32_t per, npkts;
};

static size_t frame_result(struct agg_cold *c, uint32_t seq, uint16_t attempt, void *ctx)
{
	struct result_ctx *x = ctx;
	uint64_t lo = (uint64_t)seq * x->per;
	uint32_t np = lo >= x->g->n ? 0 :
		      (uint32_t)(x->g->n - lo < x->per ? x->g->n - lo : x->per);

	fill_hdr(c, AGG_T_SPARSE_RESULT, x->ver, seq, attempt, x->npkts, x->g->width, np);
	return fill_pairs(c, x->g, lo, np);
}

/* Who is missing what, for a timeout: "w3 (12 of 800 packets, the end
 * marker), w5 (nothing)". */
static void missing_why(const struct agg_cold *c, const int *wk, const struct inbox *in,
			const struct outbox *out, int nw, uint64_t ver, double timeout,
			char *why, size_t whylen)
{
	const struct agg_plan *p = &c->n->plan;
	size_t used = (size_t)snprintf(why, whylen, "iteration %u: after %.3g s, %s", agg_ver_iter(ver),
				       timeout, out ? "results not acknowledged by" :
				       "pairs missing from");

	for (int i = 0; i < nw && used < whylen; i++) {
		const struct inbox *b = &in[i];
		int w;

		if (out ? (!out[i].npkts || out[i].nacked == out[i].npkts) : inbox_full(b, true))
			continue;
		if (out)
			w = snprintf(why + used, whylen - used, " %s (%u of %u packets)",
				     p->node[wk[i]].name, out[i].npkts - out[i].nacked, out[i].npkts);
		else if (!b->have && !b->end)
			w = snprintf(why + used, whylen - used, " %s (nothing)", p->node[wk[i]].name);
		else
			w = snprintf(why + used, whylen - used, " %s (%s%s)", p->node[wk[i]].name,
				     b->npkts == UINT32_MAX ? "the end marker" : "packets",
				     b->npkts != UINT32_MAX ? " of pairs" : "");
		used += w > 0 ? (size_t)w : 0;
	}
}

/* The pairs of every worker, summed in plan order, rounded: the result. */
static int sum_up(struct agg_cold *c, const int *wk, const struct inbox *in, int nw,
		  uint32_t width, struct agg_sparse *out, char *why, size_t whylen)
{
	struct agg_sparse *g = calloc(nw ? nw : 1, sizeof(*g));
	const struct agg_sparse **gp = calloc(nw ? nw : 1, sizeof(*gp));
	struct agg_sparse_sum sum = { 0 };
	uint64_t bad = 0;
	int err = g && gp ? 0 : -ENOMEM;

	for (int i = 0; i < nw && !err; i++) {
		gp[i] = &g[i];
		err = inbox_pairs(&in[i], width, &g[i], &bad);
		if (err == -EPROTO)
			snprintf(why, whylen, "%s's pair %" PRIu64 " is out of id order (agg-sparse(5): "
				 "ids increase)", c->n->plan.node[wk[i]].name, bad);
		c->st.pairs_in += g[i].n;
	}
	if (!err)
		err = agg_sparse_sum(gp, nw, &sum);
	if (!err)
		err = agg_sparse_sum_round(&sum, out);
	if (err == -ENOMEM)
		snprintf(why, whylen, "out of memory");
	agg_sparse_sum_free(&sum);
	for (int i = 0; g && i < nw; i++)
		agg_sparse_free(&g[i]);
	free(g);
	free(gp);
	return err;
}

/*
 * A SPARSE or END packet of worker k (in its inbox b): kept once,
 * acknowledged always.  1 new, 0 again, -1 malformed (not acknowledged),
 * or -errno.
 */
static int gather(struct agg_cold *c, struct inbox *b, const struct agg_hdr *h,
		  const struct agg_sparse_hdr *sh, const struct sockaddr_in *src)
{
	int r;

	if ((b->npkts != UINT32_MAX && sh->npkts != b->npkts) || sh->npkts >= MAX_PKTS ||
	    (h->type == AGG_T_SPARSE_END ? h->seg != sh->npkts :
	     h->seg >= sh->npkts || !sh->npairs))
		return -1;
	b->npkts = sh->npkts;
	if (h->type == AGG_T_SPARSE_END) {
		r = !b->end;
		b->end = true;
	} else {
		r = inbox_put(b, h, sh);
		if (r == -EPROTO)
			return -1;
		if (r < 0)
			return r;
	}
	return send_ack(c, h, inbox_full(b, true) ? b->npkts + 1 : 0, sh->width, src) ?: r;
}

int agg_cold_serve(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		   char *why, size_t whylen)
{
	const struct agg_plan *p = &c->n->plan;
	double deadline = agg_now() + timeout;
	int nw = 0, ndone = 0, nacked = 0, nout = 0, err = 0, *wk, *slot;
	struct inbox *in;
	struct outbox *ob = NULL;
	struct result_ctx x = { .ver = ver };
	uint32_t width = 0;
	bool *full;

	agg_sparse_init(out, 0);
	wk = calloc(p->nnodes, sizeof(*wk));
	slot = calloc(p->nnodes, sizeof(*slot));
	in = calloc(p->nnodes, sizeof(*in));
	full = calloc(p->nnodes, sizeof(*full));
	if (!wk || !slot || !in || !full) {
		err = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	/* The workers in plan order: the order of every sum. */
	for (int i = 0; i < p->nnodes; i++) {
		slot[i] = -1;
		if (p->node[i].role == AGG_ROLE_WORKER) {
			slot[i] = nw;
			in[nw].npkts = UINT32_MAX;
			wk[nw++] = i;
		}
	}
	while (!ob || nacked < nout) {
		double now = agg_now(), due = now + 0.05;
		struct sockaddr_in src;
		const struct agg_sparse_hdr *sh;
		const struct agg_hdr *h;
		ssize_t r;

		for (int i = 0; ob && i < nw && !err; i++)
			if (ob[i].npkts && ob[i].nacked < ob[i].npkts)
				err = outbox_pump(c, &ob[i], frame_result, &x, now, &due);
		if (err) {
			snprintf(why, whylen, "cannot send the result: %s", strerror(-err));
			break;
		}
		if (now >= deadline) {
			missing_why(c, wk, in, ob, nw, ver, timeout, why, whylen);
			err = -ETIMEDOUT;
			break;
		}
		r = recv_one(c, due - now, &src);
		for (; r > 0; r = recv_one(c, 0, &src)) {
			int k;

			h = take(c, r, &src, ver, &sh);
			if (!h)
				continue;
			k = slot[h->from];
			if (k < 0 || h->type == AGG_T_SPARSE_RESULT || (width && sh->width != width)) {
				c->st.drop_malformed++;
				continue;
			}
			if (h->type == AGG_T_SPARSE_ACK) {
				bool was = ob && ob[k].npkts && ob[k].nacked == ob[k].npkts;

				if (ob && ob[k].npkts) {
					outbox_ack(c, &ob[k], h->seg, agg_now());
					if (sh->npkts)
						outbox_ack_all(c, &ob[k], sh->npkts, agg_now());
				}
				nacked += !was && ob && ob[k].npkts && ob[k].nacked == ob[k].npkts;
				continue;
			}
			width = sh->width;
			err = gather(c, &in[k], h, sh, &src);
			if (err < 0) {
				if (err == -1) {
					c->st.drop_malformed++;
					err = 0;
					continue;
				}
				snprintf(why, whylen, "cannot take %s's packet: %s",
					 p->node[h->from].name, strerror(-err));
				break;
			}
			if (err)
				c->st.taken++;
			else
				c->st.dup++;
			err = 0;
			if (!full[k] && inbox_full(&in[k], true)) {
				full[k] = true;
				ndone++;
			}
		}
		if (!err && r < 0) {
			err = (int)r;
			snprintf(why, whylen, "cannot receive: %s", strerror(-err));
		}
		if (err)
			break;
		if (ndone == nw && !ob) {
			err = sum_up(c, wk, in, nw, width ? width : 1, out, why, whylen);
			if (err)
				break;
			c->st.pairs_out += out->n;
			x.g = out;
			x.per = pairs_per_pkt(c, out->width);
			x.npkts = out->n ? (uint32_t)((out->n + x.per - 1) / x.per) : 1;
			ob = calloc(nw, sizeof(*ob));
			for (int i = 0; ob && i < nw && !err; i++) {
				struct sockaddr_in dst = {
					.sin_family = AF_INET, .sin_addr = p->node[wk[i]].addr,
					.sin_port = htons(p->port + AGG_SPARSE_PORT_RECV) };

				if (wk[i] == c->n->self)	/* a worker root has it */
					continue;
				err = outbox_init(&ob[i], x.npkts, &dst);
				nout++;
			}
			if (!ob || err) {
				err = -ENOMEM;
				snprintf(why, whylen, "out of memory");
				break;
			}
		}
	}
out:
	if (err)
		agg_sparse_free(out);
	free(c->done_total);
	c->done_total = err ? NULL : calloc(p->nnodes, sizeof(*c->done_total));
	c->done_width = width;
	for (int i = 0; c->done_total && i < nw; i++)
		c->done_total[wk[i]] = in[i].npkts + 1;
	for (int i = 0; in && i < nw; i++)
		inbox_free(&in[i]);
	for (int i = 0; ob && i < nw; i++)
		outbox_free(&ob[i]);
	free(ob);
	free(wk);
	free(slot);
	free(in);
	free(full);
	return err;
}

/* Tell every peer once more that its stream is complete here (the
 * acknowledgement it waits for may have been lost). */
static void ack_done(struct agg_cold *c, uint64_t ver)
{
	const struct agg_plan *p = &c->n->plan;

	if (c->role == AGG_COLD_RECV && c->done_npkts) {
		ack(c, ver, c->done_npkts - 1, c->done_npkts, c->done_width, &c->root_sa);
		return;
	}
	for (int i = 0; c->role == AGG_COLD_SERVE && c->done_total && i < p->nnodes; i++) {
		struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = p->node[i].addr,
					   .sin_port = htons(p->port + AGG_SPARSE_PORT_SEND) };

		if (c->done_total[i])
			ack(c, ver, c->done_total[i] - 1, c->done_total[i], c->done_width, &dst);
	}
}

void agg_cold_linger(struct agg_cold *c, uint64_t ver, double quiet, double max)
{
	static const double again[] = { 0, 0.02, 0.05 };	/* repeats of ack_done */
	double start = agg_now(), last = start;
	unsigned next = 0;

	for (;;) {
		double now = agg_now(), wait = last + quiet - now;
		struct sockaddr_in src;
		const struct agg_sparse_hdr *sh;
		const struct agg_hdr *h;
		ssize_t r;

		if (wait <= 0 || now - start >= max)
			return;
		while (next < sizeof(again) / sizeof(again[0]) && now - start >= again[next]) {
			ack_done(c, ver);
			next++;
		}
		if (next < sizeof(again) / sizeof(again[0]) && start + again[next] - now < wait)
			wait = start + again[next] - now;
		r = recv_one(c, wait, &src);
		if (r <= 0) {
			if (r < 0)
				return;
			continue;
		}
		h = take(c, r, &src, ver, &sh);
		if (!h)
			continue;
		/* Everything of ver is in: what comes again was kept already. */
		if (c->role == AGG_COLD_SERVE && (h->type == AGG_T_SPARSE ||
						  h->type == AGG_T_SPARSE_END)) {
			c->st.dup++;
			send_ack(c, h, sh->npkts + 1, sh->width, &src);
			last = agg_now();
		} else if (c->role == AGG_COLD_RECV && h->type == AGG_T_SPARSE_RESULT &&
			   h->from == c->root && sh->npkts == c->done_npkts) {
			c->st.dup++;
			send_ack(c, h, c->done_npkts, sh->width, &src);
			last = agg_now();
		}
	}
}

void agg_cold_print(const struct agg_cold_stats *st)
{
	agg_print_uint("sent", NULL, st->sent);
	agg_print_uint("resent", NULL, st->resent);
	agg_print_uint("acked", NULL, st->acked);
	agg_print_uint("taken", NULL, st->taken);
	agg_print_uint("dup", NULL, st->dup);
	agg_print_uint("pairs_in", NULL, st->pairs_in);
	agg_print_uint("pairs_out", NULL, st->pairs_out);
	agg_print_uint("drop_malformed", NULL, st->drop_malformed);
	agg_print_uint("drop_job", NULL, st->drop_job);
	agg_print_uint("drop_token", NULL, st->drop_token);
	agg_print_uint("drop_member", NULL, st->drop_member);
	agg_print_uint("drop_run", NULL, st->drop_run);
	agg_print_uint("drop_stale", NULL, st->drop_stale);
}
