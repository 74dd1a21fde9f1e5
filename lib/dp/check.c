// SPDX-License-Identifier: GPL-2.0-only
/*
 * The integrity check of agg-check(1): a plan's problems (what
 * agg_plan_check finds and what the data plane needs), and a loaded
 * node's state for an iteration (ALEPH Alg. 2): the slots still waiting
 * for contributors, the results a worker lacks, and REQUEST packets that
 * ask the parent for them again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "check.h"

/* ---- ranges ------------------------------------------------------------ */

void agg_ranges_init(struct agg_ranges *r)
{
	memset(r, 0, sizeof(*r));
}

static void ranges_flush(struct agg_ranges *r)
{
	char item[32];
	int w;

	if (!r->open)
		return;
	r->open = false;
	if (r->lo == r->hi)
		w = snprintf(item, sizeof(item), "%s%u", r->len ? "," : "", r->lo);
	else
		w = snprintf(item, sizeof(item), "%s%u-%u", r->len ? "," : "", r->lo, r->hi);
	if (r->len + w + 1 > r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		char *b;

		while (cap < r->len + w + 1)
			cap *= 2;
		b = realloc(r->buf, cap);
		if (!b) {
			r->oom = true;
			return;
		}
		r->buf = b;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, item, w + 1);
	r->len += w;
}

void agg_ranges_add(struct agg_ranges *r, uint32_t v)
{
	r->count++;
	if (r->open && v == r->hi + 1) {
		r->hi = v;
		return;
	}
	ranges_flush(r);
	r->lo = r->hi = v;
	r->open = true;
}

const char *agg_ranges_str(struct agg_ranges *r)
{
	ranges_flush(r);
	if (r->oom)
		return "(out of memory)";
	return r->buf ? r->buf : "";
}

void agg_ranges_free(struct agg_ranges *r)
{
	free(r->buf);
	agg_ranges_init(r);
}

/* ---- plans ------------------------------------------------------------- */

int agg_check_plan(const struct agg_plan *p, agg_plan_report_fn report, void *ctx)
{
	int problems = agg_plan_check(p, report, ctx), *kids;
	struct agg_layout l;
	char msg[300];

	if (agg_layout_of(p, &l, msg, sizeof(msg))) {
		report(ctx, msg);
		problems++;
	}
	if (p->port == 65535) {
		report(ctx, "port=65535: the fetch signal goes to port + 1 (take 1 to 65534)");
		problems++;
	}
	kids = calloc(p->nnodes ? p->nnodes : 1, sizeof(*kids));
	if (!kids) {
		report(ctx, "out of memory");
		return problems + 1;
	}
	/* The contributor bitmap is 64 bits: the children and the node itself. */
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_plan_tree *tr = &p->tree[t];

		memset(kids, 0, p->nnodes * sizeof(*kids));
		for (int c = 0; c < p->nnodes; c++)
			if (tr->parent[c] >= 0)
				kids[tr->parent[c]]++;
		for (int i = 0; i < p->nnodes; i++) {
			if (kids[i] <= AGG_MAX_KIDS)
				continue;
			snprintf(msg, sizeof(msg), "tree %d: %s has %d children, the data plane "
				 "takes at most %d per node and tree", t, p->node[i].name,
				 kids[i], AGG_MAX_KIDS);
			report(ctx, msg);
			problems++;
		}
	}
	free(kids);
	return problems;
}

/* ---- a loaded node ----------------------------------------------------- */

int agg_check_live_open(struct agg_check_live *c, const struct agg_node *n,
			char *why, size_t whylen)
{
	struct bpf_map_info info;
	uint32_t il = sizeof(info);
	int err;

	memset(c, 0, sizeof(*c));
	c->n = n;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(c->n->fd_slots, &info, &il)) {
		err = -errno;
		snprintf(why, whylen, "%s/slots: %s", n->dir, strerror(errno));
		agg_check_live_close(c);
		return err;
	}
	/* One entry per chunk of every slot (agg.h, "slots"). */
	if (info.max_entries != n->l.nslots * n->l.nchunks ||
	    info.value_size != agg_slot_size(&n->l)) {
		snprintf(why, whylen, "%s/slots: %u entries of %u bytes, the plan makes %u of %zu",
			 n->dir, info.max_entries, info.value_size, n->l.nslots * n->l.nchunks,
			 agg_slot_size(&n->l));
		agg_check_live_close(c);
		return -EIO;
	}
	c->ti = calloc(n->plan.ntrees, sizeof(*c->ti));
	c->slot = calloc(n->l.nslots, sizeof(*c->slot));
	if (!c->ti || !c->slot) {
		snprintf(why, whylen, "out of memory");
		agg_check_live_close(c);
		return -ENOMEM;
	}
	for (uint32_t t = 0; t < (uint32_t)n->plan.ntrees; t++) {
		if (bpf_map_lookup_elem(c->n->fd_trees, &t, &c->ti[t])) {
			err = -errno;
			snprintf(why, whylen, "%s/trees: %s", n->dir, strerror(errno));
			agg_check_live_close(c);
			return err;
		}
		if (c->ti[t].nkids > AGG_MAX_KIDS)
			c->ti[t].nkids = AGG_MAX_KIDS;
	}
	return 0;
}

int agg_check_live_read(struct agg_check_live *c)
{
	for (uint32_t i = 0; i < c->n->l.nslots; i++) {
		int err = agg_slot_read(c->n->fd_slots, &c->n->l, i, &c->slot[i]);

		if (err)
			return err;
	}
	return 0;
}

void agg_check_live_close(struct agg_check_live *c)
{
	free(c->ti);
	free(c->slot);
	memset(c, 0, sizeof(*c));
}

static bool is_worker(const struct agg_check_live *c)
{
	return c->n->plan.node[c->n->self].role == AGG_ROLE_WORKER;
}

/* The version of the result of seg; a result being rewritten is none. */
static uint64_t meta_ver(const struct agg_check_live *c, uint32_t seg)
{
	const struct agg_meta *m = &c->n->meta[seg];
	uint32_t seq = agg_meta_begin(m);
	uint64_t v = __atomic_load_n(&m->ver, __ATOMIC_RELAXED);

	return agg_meta_valid(m, seq) ? v : 0;
}

bool agg_check_newest(const struct agg_check_live *c, uint64_t *ver)
{
	uint64_t best = __atomic_load_n(&c->n->clock->now, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < c->n->l.nslots; i++)
		if (c->slot[i].ver && agg_ver_cmp(c->slot[i].ver, best) > 0)
			best = c->slot[i].ver;
	if (is_worker(c))
		for (uint32_t s = 0; s < c->n->l.nsegs; s++)
			if (meta_ver(c, s) && agg_ver_cmp(meta_ver(c, s), best) > 0)
				best = meta_ver(c, s);
	if (!(uint32_t)best)	/* nothing, or a run opened without an iteration */
		return false;
	*ver = best;
	return true;
}

enum agg_seg_state agg_check_seg(const struct agg_check_live *c, uint64_t ver,
				 uint32_t seg, const struct agg_slot **slot)
{
	const struct agg_layout *l = &c->n->l;
	unsigned t = agg_plan_seg_tree(&c->n->plan, seg);
	uint32_t si = ((uint64_t)agg_ver_iter(ver) * l->nsegs + seg) % l->nslots;
	const struct agg_slot *s = &c->slot[si];

	*slot = NULL;
	if (!c->ti[t].expect)
		return AGG_SEG_NOT_HERE;
	if (s->ver == ver && s->seg == seg) {
		*slot = s;
		return s->done ? AGG_SEG_DONE : AGG_SEG_INCOMPLETE;
	}
	if (agg_ver_cmp(ver, s->ver) > 0 || (ver == s->ver && seg > s->seg))
		return AGG_SEG_NOT_STARTED;
	/* A later segment of the same iteration takes a slot only once the
	 * one before is done (bpf/agg.bpf.c: drop_busy); a newer iteration
	 * takes it in any case. */
	return s->ver == ver ? AGG_SEG_DONE : AGG_SEG_UNKNOWN;
}

int agg_check_bits_nodes(const struct agg_check_live *c, uint32_t t, uint64_t bits,
			 int *out)
{
	const struct agg_tree_info *ti = &c->ti[t];
	int n = 0;

	for (uint32_t i = 0; i < ti->nkids; i++)
		if (bits & (1ULL << i))
			out[n++] = (int)ti->kid[i];
	if (ti->self_bit < 64 && (bits & (1ULL << ti->self_bit)))
		out[n++] = c->n->self;
	return n;
}

int agg_check_result(const struct agg_check_live *c, uint64_t ver, uint32_t seg)
{
	uint64_t v = meta_ver(c, seg);

	return v == ver ? AGG_RES_IN : !v || agg_ver_cmp(v, ver) < 0 ? AGG_RES_MISSING :
	       AGG_RES_SUPERSEDED;
}

int64_t agg_check_progress(const struct agg_check_live *c, uint64_t ver)
{
	uint32_t k = (uint32_t)ver % AGG_PROGRESS_SLOTS;
	struct agg_progress v;

	if (bpf_map_lookup_elem(c->n->fd_progress, &k, &v) || v.ver != ver)
		return -1;
	return (int64_t)v.count;
}

int agg_check_data_op(const struct agg_check_live *c, uint64_t ver)
{
	for (uint32_t s = c->n->l.nexp; s < c->n->l.nsegs; s++)
		if (meta_ver(c, s) == ver)
			return (int)c->n->meta[s].op;
	return -1;
}

int agg_check_request(const struct agg_node *n, uint64_t ver, const uint32_t *segs,
		      uint32_t nsegs, unsigned data_op)
{
	const struct agg_plan *p = &n->plan;
	struct sockaddr_in self = { .sin_family = AF_INET,
				    .sin_addr = p->node[n->self].addr };
	size_t len = sizeof(struct agg_hdr) + 4 * (size_t)n->l.segment;
	struct agg_hdr *h = calloc(1, len);
	int sock, sent = 0, err = 0;

	if (!h)
		return -ENOMEM;
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&self, sizeof(self))) {
		err = -errno;
		goto out;
	}
	for (uint32_t i = 0; i < nsegs; i++) {
		unsigned t = agg_plan_seg_tree(p, segs[i]);
		int par = p->tree[t].parent[n->self];
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(p->port) };

		if (par < 0)
			continue;	/* a root: nobody to ask */
		to.sin_addr = p->node[par].addr;
		*h = (struct agg_hdr){
			.magic = AGG_MAGIC, .type = AGG_T_REQUEST,
			.op = segs[i] < n->l.nexp ? AGG_OP_MAX : data_op,
			.tree = t, .from = n->self, .job = p->job, .iter = agg_ver_iter(ver),
			.run = agg_ver_run(ver), .seg = segs[i], .attempt = 1,
			.token = n->token,
		};
		/* A full socket buffer pushes back, as in agg-send. */
		while (sendto(sock, h, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
				err = -errno;
				goto out;
			}
			usleep(50);
		}
		sent++;
	}
out:
	if (sock >= 0)
		close(sock);
	free(h);
	return err ? err : sent;
}
