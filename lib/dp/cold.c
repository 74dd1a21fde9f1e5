// SPDX-License-Identifier: GPL-2.0-only
/*
 * The sparse cold path (cold.h): framing of pairs into agg packets, the
 * acknowledged window of a sender, the root's gather, sum and result.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
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

static void done_free(struct agg_cold *c);

void agg_cold_close(struct agg_cold *c)
{
	if (c->sock >= 0)
		close(c->sock);
	free(c->buf);
	done_free(c);
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

/*
 * What one sender sent of an iteration.  No single packet decides how many
 * packets the sender has (a forged count would lock its genuine ones out):
 * each packet is kept under the stream it claims, (npkts, width), and the
 * sender is complete once one claim has all its packets (and its end
 * marker, for a worker).  Memory follows the packets held, never a count
 * or a sequence number a packet carries: a table of the packets kept,
 * open addressing on (seq, npkts, width), and the claims seen.
 */
struct held {
	uint32_t seq, npkts;
	uint16_t width, npairs;
	uint8_t *pairs;		/* NULL: the entry is free */
};

struct claim {
	uint32_t npkts, have;
	uint16_t width;
	bool end;
};

struct agg_cold_inbox {
	struct held *tab;
	uint32_t cap, used;
	struct claim *cl;
	uint32_t ncl;
	int done;		/* the claim that is complete, -1: none yet */
};

static void inbox_init(struct agg_cold_inbox *b)
{
	memset(b, 0, sizeof(*b));
	b->done = -1;
}

static void inbox_free(struct agg_cold_inbox *b)
{
	for (uint32_t i = 0; i < b->cap; i++)
		free(b->tab[i].pairs);
	free(b->tab);
	free(b->cl);
	inbox_init(b);
}

static struct held *inbox_slot(const struct agg_cold_inbox *b, uint32_t seq, uint32_t npkts, uint16_t width)
{
	uint32_t i = (seq * 2654435761u ^ npkts * 40503u ^ width) & (b->cap - 1);

	while (b->tab[i].pairs && (b->tab[i].seq != seq || b->tab[i].npkts != npkts ||
				   b->tab[i].width != width))
		i = (i + 1) & (b->cap - 1);
	return &b->tab[i];
}

static int inbox_grow(struct agg_cold_inbox *b)
{
	struct agg_cold_inbox nb = *b;

	if (b->cap && b->used < b->cap / 2)
		return 0;
	nb.cap = b->cap ? 2 * b->cap : 64;
	nb.tab = calloc(nb.cap, sizeof(*nb.tab));
	if (!nb.tab)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->cap; i++)
		if (b->tab[i].pairs)
			*inbox_slot(&nb, b->tab[i].seq, b->tab[i].npkts, b->tab[i].width) = b->tab[i];
	free(b->tab);
	*b = nb;
	return 0;
}

static struct claim *inbox_claim(struct agg_cold_inbox *b, uint32_t npkts, uint16_t width)
{
	struct claim *cl;

	for (uint32_t i = 0; i < b->ncl; i++)
		if (b->cl[i].npkts == npkts && b->cl[i].width == width)
			return &b->cl[i];
	cl = realloc(b->cl, (b->ncl + 1) * sizeof(*cl));
	if (!cl)
		return NULL;
	b->cl = cl;
	cl[b->ncl] = (struct claim){ .npkts = npkts, .width = width };
	return &cl[b->ncl++];
}

/*
 * Keep packet h (an end marker: end): 1 new, 0 again (the same bytes),
 * -EPROTO malformed, -EEXIST the same packet with other pairs (another
 * attempt of the iteration), -ENOMEM.  need_end: a claim is complete only
 * with its end marker.
 */
static int inbox_put(struct agg_cold_inbox *b, const struct agg_hdr *h, const struct agg_sparse_hdr *sh,
		     bool end, bool need_end)
{
	size_t len = (size_t)sh->npairs * agg_sparse_pair_size(sh->width);
	struct claim *cl;
	struct held *e;
	int r = 1;

	if (sh->npkts >= MAX_PKTS || (end ? h->seg != sh->npkts : h->seg >= sh->npkts))
		return -EPROTO;
	if (!end && inbox_grow(b))
		return -ENOMEM;
	cl = inbox_claim(b, sh->npkts, sh->width);
	if (!cl)
		return -ENOMEM;
	if (end) {
		r = !cl->end;
		cl->end = true;
	} else if ((e = inbox_slot(b, h->seg, sh->npkts, sh->width))->pairs) {
		if (e->npairs != sh->npairs || memcmp(e->pairs, sh + 1, len))
			return -EEXIST;
		r = 0;
	} else {
		e->pairs = malloc(len ? len : 1);
		if (!e->pairs)
			return -ENOMEM;
		memcpy(e->pairs, sh + 1, len);
		e->seq = h->seg;
		e->npkts = sh->npkts;
		e->width = sh->width;
		e->npairs = sh->npairs;
		b->used++;
		cl->have++;
	}
	if (b->done < 0 && cl->have == cl->npkts && (cl->end || !need_end))
		b->done = (int)(cl - b->cl);
	return r;
}

static bool inbox_full(const struct agg_cold_inbox *b)
{
	return b->done >= 0;
}

/* The complete claim's packets and width (0 when none is). */
static uint32_t inbox_npkts(const struct agg_cold_inbox *b)
{
	return b->done >= 0 ? b->cl[b->done].npkts : 0;
}

static uint32_t inbox_width(const struct agg_cold_inbox *b)
{
	return b->done >= 0 ? b->cl[b->done].width : 0;
}

/* Does packet h belong to the complete claim? */
static bool inbox_is_done(const struct agg_cold_inbox *b, const struct agg_sparse_hdr *sh)
{
	return b->done >= 0 && sh->npkts == inbox_npkts(b) && sh->width == inbox_width(b);
}

/* Is packet h, byte for byte, one of the complete claim's? */
static bool inbox_summed(const struct agg_cold_inbox *b, const struct agg_hdr *h,
			 const struct agg_sparse_hdr *sh)
{
	const struct held *e;

	if (!inbox_is_done(b, sh))
		return false;
	if (h->type == AGG_T_SPARSE_END)
		return h->seg == sh->npkts;
	if (h->seg >= sh->npkts)
		return false;
	e = inbox_slot(b, h->seg, sh->npkts, sh->width);
	return e->pairs && e->npairs == sh->npairs &&
	       !memcmp(e->pairs, sh + 1, (size_t)sh->npairs * agg_sparse_pair_size(sh->width));
}

/* The pairs of a complete inbox, in packet order, into g: 0, -ENOMEM, or
 * -EPROTO with *bad the first pair out of id order. */
static int inbox_pairs(const struct agg_cold_inbox *b, struct agg_sparse *g, uint64_t *bad)
{
	uint32_t npkts = inbox_npkts(b), width = inbox_width(b);
	size_t ps = agg_sparse_pair_size(width);
	uint64_t n = 0, k = 0;

	for (uint32_t s = 0; s < npkts; s++)
		n += inbox_slot(b, s, npkts, (uint16_t)width)->npairs;
	agg_sparse_init(g, width);
	if (agg_sparse_reserve(g, n ? n : 1))
		return -ENOMEM;
	for (uint32_t s = 0; s < npkts; s++) {
		const struct held *e = inbox_slot(b, s, npkts, (uint16_t)width);

		for (uint32_t i = 0; i < e->npairs; i++, k++) {
			const uint8_t *p = e->pairs + i * ps;

			memcpy(&g->id[k], p, 8);
			memcpy(&g->val[k * width], p + 8, 4 * (size_t)width);
			if (k && g->id[k] <= g->id[k - 1]) {
				*bad = k;
				agg_sparse_free(g);
				return -EPROTO;
			}
		}
	}
	g->n = n;
	return 0;
}

/* ---- the receiver ---------------------------------------------------------- */

int agg_cold_recv(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		  char *why, size_t whylen)
{
	const char *root = c->n->plan.node[c->root].name;
	double deadline = agg_now() + timeout;
	struct agg_cold_inbox b;
	uint64_t bad = 0;
	int err = 0;

	inbox_init(&b);
	agg_sparse_init(out, 0);
	while (!inbox_full(&b)) {
		double now = agg_now();
		struct sockaddr_in src;
		const struct agg_sparse_hdr *sh;
		const struct agg_hdr *h;
		ssize_t r;

		if (now >= deadline) {
			if (!b.used)
				snprintf(why, whylen, "iteration %u: no result packet from the sparse "
					 "root %s in %.3g s", agg_ver_iter(ver), root, timeout);
			else
				snprintf(why, whylen, "iteration %u: %u of %u result packets from the "
					 "sparse root %s missing after %.3g s", agg_ver_iter(ver),
					 b.cl[0].npkts - b.cl[0].have, b.cl[0].npkts, root, timeout);
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
		if (h->type != AGG_T_SPARSE_RESULT || h->from != c->root || !sh->npkts) {
			c->st.drop_malformed++;
			continue;
		}
		err = inbox_put(&b, h, sh, false, false);
		if (err == -EPROTO) {
			c->st.drop_malformed++;
			err = 0;
			continue;
		}
		if (err == -EEXIST) {
			c->st.drop_attempt++;
			snprintf(why, whylen, "iteration %u: the sparse root %s sent result packet %u "
				 "twice with different pairs: two sums of one iteration are never "
				 "mixed", agg_ver_iter(ver), root, h->seg);
			err = -EPROTO;
			break;
		}
		if (err < 0) {
			snprintf(why, whylen, "out of memory");
			break;
		}
		if (err)
			c->st.taken++, c->st.pairs_in += sh->npairs;
		else
			c->st.dup++;
		err = send_ack(c, h, inbox_is_done(&b, sh) ? sh->npkts : 0, sh->width, &src);
		if (err) {
			snprintf(why, whylen, "cannot acknowledge: %s", strerror(-err));
			break;
		}
	}
	if (!err) {
		c->done_npkts = inbox_npkts(&b);
		c->done_width = inbox_width(&b);
		err = inbox_pairs(&b, out, &bad);
		if (err == -EPROTO)
			snprintf(why, whylen, "iteration %u: the result's pair %" PRIu64 " is out of "
				 "id order", agg_ver_iter(ver), bad);
		else if (err)
			snprintf(why, whylen, "out of memory");
		else
			c->st.pairs_out += out->n;
		for (uint64_t i = 0; !err && i < out->n * out->width; i++)
			c->st.nan += isnan(out->val[i]);
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

/* Who is missing what, for a timeout: "w3 (packets of pairs), w5 (nothing)". */
static void missing_why(const struct agg_cold *c, const int *wk, const struct agg_cold_inbox *in,
			const struct outbox *out, int nw, uint64_t ver, double timeout,
			char *why, size_t whylen)
{
	const struct agg_plan *p = &c->n->plan;
	size_t used = (size_t)snprintf(why, whylen, "iteration %u: after %.3g s, %s", agg_ver_iter(ver),
				       timeout, out ? "results not acknowledged by" :
				       "pairs missing from");

	for (int i = 0; i < nw && used < whylen; i++) {
		const struct agg_cold_inbox *b = &in[i];
		bool end = false;
		int w;

		if (out ? (!out[i].npkts || out[i].nacked == out[i].npkts) : inbox_full(b))
			continue;
		for (uint32_t k = 0; k < b->ncl; k++)
			end |= b->cl[k].end;
		if (out)
			w = snprintf(why + used, whylen - used, " %s (%u of %u packets)",
				     p->node[wk[i]].name, out[i].npkts - out[i].nacked, out[i].npkts);
		else if (!b->ncl)
			w = snprintf(why + used, whylen - used, " %s (nothing)", p->node[wk[i]].name);
		else
			w = snprintf(why + used, whylen - used, " %s (%s)", p->node[wk[i]].name,
				     end ? "packets of pairs" : "the end marker");
		used += w > 0 ? (size_t)w : 0;
	}
}

/* The pairs of every worker, summed in plan order, rounded: the result. */
static int sum_up(struct agg_cold *c, const int *wk, const struct agg_cold_inbox *in, int nw,
		  uint32_t width, struct agg_sparse *out, char *why, size_t whylen)
{
	struct agg_sparse *g = calloc(nw ? nw : 1, sizeof(*g));
	const struct agg_sparse **gp = calloc(nw ? nw : 1, sizeof(*gp));
	struct agg_sparse_sum sum = { 0 };
	uint64_t bad = 0;
	int err = g && gp ? 0 : -ENOMEM;

	for (int i = 0; i < nw && !err; i++) {
		gp[i] = &g[i];
		err = inbox_pairs(&in[i], &g[i], &bad);
		if (err == -EPROTO)
			snprintf(why, whylen, "%s's pair %" PRIu64 " is out of id order (agg-sparse(5): "
				 "ids increase)", c->n->plan.node[wk[i]].name, bad);
		c->st.pairs_in += g[i].n;
	}
	if (!err && !nw)
		agg_sparse_init(out, width);
	else if (!err)
		err = agg_sparse_sum(gp, nw, &sum);
	if (!err && nw)
		err = agg_sparse_sum_round(&sum, out, &c->st.saturated);
	if (!err)
		c->st.nan = c->st.saturated;
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
 * acknowledged always.  1 new, 0 again, or -errno: -EPROTO malformed (not
 * acknowledged), -EEXIST another attempt's packet.
 */
static int gather(struct agg_cold *c, struct agg_cold_inbox *b, const struct agg_hdr *h,
		  const struct agg_sparse_hdr *sh, const struct sockaddr_in *src)
{
	bool end = h->type == AGG_T_SPARSE_END;
	int r;

	if (!end && !sh->npairs)
		return -EPROTO;
	r = inbox_put(b, h, sh, end, true);
	if (r < 0)
		return r;
	return send_ack(c, h, inbox_is_done(b, sh) ? sh->npkts + 1 : 0, sh->width, src) ?: r;
}

int agg_cold_serve(struct agg_cold *c, uint64_t ver, double timeout, struct agg_sparse *out,
		   char *why, size_t whylen)
{
	const struct agg_plan *p = &c->n->plan;
	double deadline = agg_now() + timeout;
	int nw = 0, ndone = 0, nacked = 0, nout = 0, err = 0, *wk, *slot, first = -1;
	struct agg_cold_inbox *in;
	struct outbox *ob = NULL;
	struct result_ctx x = { .ver = ver };
	uint32_t width = 0;
	bool *full;

	agg_sparse_init(out, 0);
	done_free(c);
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
			inbox_init(&in[nw]);
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
			if (k < 0 || h->type == AGG_T_SPARSE_RESULT) {
				c->st.drop_malformed++;
				continue;
			}
			if (h->type == AGG_T_SPARSE_ACK) {
				bool was = ob && ob[k].npkts && ob[k].nacked == ob[k].npkts;

				if (ob && ob[k].npkts && sh->width == out->width) {
					outbox_ack(c, &ob[k], h->seg, agg_now());
					if (sh->npkts)
						outbox_ack_all(c, &ob[k], sh->npkts, agg_now());
				}
				nacked += !was && ob && ob[k].npkts && ob[k].nacked == ob[k].npkts;
				continue;
			}
			/* gather's acknowledgement reuses c->buf: h is gone after it */
			err = gather(c, &in[k], h, sh, &src);
			if (err == -EPROTO) {
				c->st.drop_malformed++;
				err = 0;
				continue;
			}
			if (err == -EEXIST && ob) {	/* summed already: not answered */
				c->st.drop_attempt++;
				err = 0;
				continue;
			}
			if (err == -EEXIST) {
				c->st.drop_attempt++;
				snprintf(why, whylen, "iteration %u: %s sent packet %u twice with "
					 "different pairs: two attempts of one iteration (an agg-send "
					 "run again?) are never summed; a retried step needs a new "
					 "iteration number on every worker", agg_ver_iter(ver),
					 p->node[h->from].name, h->seg);
				err = -EPROTO;
				break;
			}
			if (err < 0) {
				snprintf(why, whylen, "cannot take %s's packet: %s",
					 p->node[h->from].name, strerror(-err));
				break;
			}
			if (err)
				c->st.taken++;
			else
				c->st.dup++;
			err = 0;
			if (full[k] || !inbox_full(&in[k]))
				continue;
			full[k] = true;
			ndone++;
			/* One table, one width: the first complete worker's. */
			if (first < 0) {
				first = k;
				width = inbox_width(&in[k]);
			} else if (inbox_width(&in[k]) != width) {
				snprintf(why, whylen, "iteration %u: %s sends pairs of width %u, %s of "
					 "width %u: the workers' sparse gradients must have one width "
					 "(agg-sparse(5))", agg_ver_iter(ver), p->node[wk[k]].name,
					 inbox_width(&in[k]), p->node[wk[first]].name, width);
				err = -EPROTO;
				break;
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
	c->done_total = err ? NULL : calloc(p->nnodes, sizeof(*c->done_total));
	c->done_width = width;
	for (int i = 0; c->done_total && i < nw; i++)
		c->done_total[wk[i]] = inbox_npkts(&in[i]) + 1;
	if (!err && c->done_total) {	/* what was summed: agg_cold_linger answers it */
		c->done_in = in;
		c->done_slot = slot;
		c->done_nin = nw;
		in = NULL;
		slot = NULL;
	}
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

static void done_free(struct agg_cold *c)
{
	for (int i = 0; c->done_in && i < c->done_nin; i++)
		inbox_free(&c->done_in[i]);
	free(c->done_in);
	free(c->done_slot);
	free(c->done_total);
	c->done_in = NULL;
	c->done_slot = NULL;
	c->done_total = NULL;
	c->done_nin = 0;
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
			int k = c->done_slot ? c->done_slot[h->from] : -1;

			/* Only what was summed: a packet of another attempt
			 * of ver was not, and is not answered. */
			if (k < 0 || !inbox_summed(&c->done_in[k], h, sh)) {
				c->st.drop_attempt++;
				continue;
			}
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
	agg_print_uint("drop_attempt", NULL, st->drop_attempt);
	agg_print_uint("saturated", NULL, st->saturated);
	agg_print_uint("nan", NULL, st->nan);
}
