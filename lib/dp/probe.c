// SPDX-License-Identifier: GPL-2.0-only
/*
 * Why a segment does not finish (see probe.h): ALEPH's integrity check
 * (Alg. 2) asked from the outside.  Every node of a tree answers a PROBE
 * with its slot's state for (iteration, segment): which of its children
 * (and itself) are in.  Walking from the root down through the nodes that
 * still wait ends at the nodes whose contribution never arrived.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "opts.h"
#include "probe.h"

struct walk {
	const struct agg_node *n;
	uint64_t ver;		/* agg_ver(run, iteration) */
	uint32_t seg;
	unsigned tree;
	int sock, timeout_ms;
	struct agg_culprit *out;
	int max, found;
};

static int probe_local(const struct walk *w, struct agg_probe *a)
{
	const struct agg_node *n = w->n;
	uint32_t si = (uint32_t)(((uint64_t)agg_ver_iter(w->ver) * n->l.nsegs + w->seg) % n->l.nslots);
	uint32_t t = w->tree;
	uint64_t ver = w->ver;
	struct agg_tree_info ti;
	struct agg_slot slot, *s = &slot;
	int err;

	if (bpf_map_lookup_elem(n->fd_trees, &t, &ti))
		return -errno;
	err = agg_slot_read(n->fd_slots, &n->l, si, s);
	if (err)
		return err;
	memset(a, 0, sizeof(*a));
	a->node = n->self;
	a->expect = ti.expect;
	a->slot_ver = s->ver;
	a->slot_seg = s->seg;
	a->clock = __atomic_load_n(&n->clock->now, __ATOMIC_ACQUIRE);
	if (!ti.expect)
		a->state = AGG_PROBE_NOT_IN_TREE;
	else if (s->ver == ver && s->seg == w->seg)
		a->state = s->done ? AGG_PROBE_DONE : AGG_PROBE_COLLECTING;
	else if (agg_ver_cmp(ver, s->ver) > 0 || (ver == s->ver && w->seg > s->seg))
		a->state = AGG_PROBE_EMPTY;
	else
		a->state = AGG_PROBE_GONE;
	if (a->state == AGG_PROBE_COLLECTING || a->state == AGG_PROBE_DONE)
		a->bitmap = s->bitmap;
	return 0;
}

static double now_ms(void)
{
	return agg_now() * 1e3;
}

/* Ask node for its slot state; -ETIMEDOUT when it does not answer. */
static int probe_remote(const struct walk *w, int node, struct agg_probe *a)
{
	const struct agg_plan *p = &w->n->plan;
	struct {
		struct agg_hdr h;
		struct agg_probe a;
	} __attribute__((packed)) q, r;
	struct sockaddr_in to = {
		.sin_family = AF_INET, .sin_port = htons(p->port), .sin_addr = p->node[node].addr,
	};

	memset(&q, 0, sizeof(q));
	q.h.magic = AGG_MAGIC;
	q.h.type = AGG_T_PROBE;
	q.h.op = w->seg < w->n->l.nexp ? AGG_OP_MAX : AGG_OP_SUM;
	q.h.tree = w->tree;
	q.h.from = w->n->self;
	q.h.job = p->job;
	q.h.iter = agg_ver_iter(w->ver);
	q.h.run = agg_ver_run(w->ver);
	q.h.seg = w->seg;
	q.h.token = w->n->token;
	for (int attempt = 0; attempt < 2; attempt++) {
		double end = now_ms() + w->timeout_ms / 2.0;

		q.h.attempt = attempt;
		if (sendto(w->sock, &q, sizeof(q), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return -errno;
		for (double left; (left = end - now_ms()) > 0;) {
			struct pollfd pfd = { .fd = w->sock, .events = POLLIN };

			if (poll(&pfd, 1, (int)left + 1) <= 0)
				break;
			if (recv(w->sock, &r, sizeof(r), 0) != sizeof(r))
				continue;
			if (r.h.magic != AGG_MAGIC || r.h.type != AGG_T_PROBE ||
			    r.h.from != node || r.h.iter != agg_ver_iter(w->ver) ||
			    r.h.run != agg_ver_run(w->ver) || r.h.seg != w->seg ||
			    r.a.node != (uint32_t)node)
				continue;	/* an older probe's answer */
			*a = r.a;
			return 0;
		}
	}
	return -ETIMEDOUT;
}

static void blame_ver(struct walk *w, int node, int at, enum agg_blame why, uint64_t ver)
{
	if (w->found < w->max)
		w->out[w->found] = (struct agg_culprit){ node, at, why, w->seg, ver };
	w->found++;
}

static void blame(struct walk *w, int node, int at, enum agg_blame why)
{
	blame_ver(w, node, at, why, 0);
}

/*
 * The root finished the segment and we lack its result: follow the path
 * from the root down to us and stop at the first node that does not
 * answer or (a worker) has not got the result either.
 */
static void down(struct walk *w, int root)
{
	const struct agg_plan *p = &w->n->plan;
	int path[64], np = 0, prev = root;

	for (int x = p->tree[w->tree].parent[w->n->self]; x >= 0 && x != root && np < 64;
	     x = p->tree[w->tree].parent[x])
		path[np++] = x;
	while (np--) {
		struct agg_probe a;
		int x = path[np];

		if (probe_remote(w, x, &a)) {
			blame(w, x, prev, AGG_BLAME_SILENT);
			return;
		}
		if (p->node[x].role == AGG_ROLE_WORKER && a.result_ver != w->ver) {
			blame(w, prev, x, AGG_BLAME_LOST_DOWN);
			return;
		}
		prev = x;
	}
	blame(w, prev, w->n->self, AGG_BLAME_LOST_DOWN);
}

static void walk(struct walk *w, int r, int at, int depth)
{
	const struct agg_plan *p = &w->n->plan;
	struct agg_probe a;
	int kids[AGG_MAX_KIDS], nkids, err;
	uint64_t missing;

	if (depth > p->nnodes)
		return;		/* agg_plan_check forbids cycles; be safe anyway */
	err = r == w->n->self ? probe_local(w, &a) : probe_remote(w, r, &a);
	if (err) {
		blame(w, r, at, AGG_BLAME_SILENT);
		return;
	}
	if (a.clock && agg_ver_run(a.clock) != agg_ver_run(w->ver) &&
	    agg_ver_cmp(a.clock, w->ver) > 0) {
		/* r is in a newer run: ours is over there (drop_run). */
		blame_ver(w, r, at, AGG_BLAME_AHEAD, a.clock);
		return;
	}
	if (a.state == AGG_PROBE_EMPTY && agg_ver_too_far(w->ver, a.clock)) {
		/* r refuses our packets as too far ahead (drop_ahead). */
		blame_ver(w, r, at, AGG_BLAME_FAR, a.clock);
		return;
	}
	switch (a.state) {
	case AGG_PROBE_GONE:
		if (agg_ver_cmp(a.slot_ver, w->ver) > 0) {
			/* Not lost: a newer iteration took the slot (someone
			 * runs ahead, or the job restarted from a lower one). */
			blame_ver(w, r, at, AGG_BLAME_AHEAD, a.slot_ver);
			return;
		}
		/* fall through */
	case AGG_PROBE_DONE:
		if (at < 0)
			down(w, r);
		else
			blame(w, r, at, AGG_BLAME_LOST_UP);
		return;
	case AGG_PROBE_NOT_IN_TREE:
		return;
	default:
		break;
	}
	missing = a.expect & ~a.bitmap;
	nkids = agg_plan_children(p, w->tree, r, kids, AGG_MAX_KIDS);
	for (int b = 0; b < 64; b++) {
		if (!(missing & (1ULL << b)))
			continue;
		if (b == nkids)			/* r's own contribution */
			blame(w, r, r, AGG_BLAME_NO_DATA);
		else if (b < nkids && b < AGG_MAX_KIDS &&
			 agg_plan_children(p, w->tree, kids[b], NULL, 0))
			walk(w, kids[b], r, depth + 1);
		else if (b < nkids && b < AGG_MAX_KIDS)
			blame(w, kids[b], r, AGG_BLAME_NO_DATA);
	}
}

int agg_probe_segment(const struct agg_node *n, uint64_t ver, uint32_t seg,
		      struct agg_culprit *out, int max, int timeout_ms)
{
	const struct agg_plan *p = &n->plan;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = p->node[n->self].addr };
	struct walk w = {
		.n = n, .ver = ver, .seg = seg, .tree = agg_plan_seg_tree(p, seg),
		.timeout_ms = timeout_ms, .out = out, .max = max,
	};

	w.sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (w.sock < 0)
		return -errno;
	if (bind(w.sock, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(w.sock);
		return err;
	}
	walk(&w, p->tree[w.tree].root, -1, 0);
	close(w.sock);
	return w.found < max ? w.found : max;
}

static void say(char *buf, size_t len, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void say(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*used >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (n > 0)
		*used += (size_t)n;
}

void agg_explain_missing(const struct agg_node *n, uint64_t ver, uint32_t lo,
			 uint32_t hi, int budget_ms, char *buf, size_t len)
{
	const struct agg_plan *p = &n->plan;
	struct agg_culprit c[16], all[32];
	double end = now_ms() + budget_ms;
	char v1[64], v2[64];
	int nall = 0;
	size_t used = 0;

	buf[0] = '\0';
	/* The first missing segment of every tree. */
	for (int t = 0; t < p->ntrees && now_ms() < end; t++) {
		uint32_t s;
		int k;

		for (s = lo; s < hi; s++)
			if (agg_plan_seg_tree(p, s) == (unsigned)t &&
			    agg_node_missing(n, s, s + 1, ver))
				break;
		if (s == hi)
			continue;
		k = agg_probe_segment(n, ver, s, c, 16, 200);
		for (int i = 0; i < k; i++) {
			bool dup = false;

			for (int j = 0; j < nall; j++)
				dup |= all[j].node == c[i].node && all[j].why == c[i].why;
			if (!dup && nall < 32)
				all[nall++] = c[i];
		}
	}
	for (int i = 0; i < nall; i++) {
		const char *who = p->node[all[i].node].name;
		const char *at = all[i].at >= 0 ? p->node[all[i].at].name : "";

		say(buf, len, &used, "%s", i ? "; " : "held up by ");
		switch (all[i].why) {
		case AGG_BLAME_NO_DATA:
			if (all[i].at == all[i].node)
				say(buf, len, &used, "%s (its own contribution to segment %u is not in)",
				    who, all[i].seg);
			else
				say(buf, len, &used, "%s (%s has nothing from it for segment %u)",
				    who, at, all[i].seg);
			break;
		case AGG_BLAME_SILENT:
			say(buf, len, &used, "%s (does not answer probes: down or cut off)", who);
			break;
		case AGG_BLAME_LOST_UP:
			say(buf, len, &used, "%s (finished segment %u but %s does not have it: lost on the way up)",
			    who, all[i].seg, at);
			break;
		case AGG_BLAME_AHEAD:
			say(buf, len, &used, "%s (has seen %s for segment %u, newer than %s: "
			    "a job restarted from a lower iteration needs a newer run, --run)",
			    who, agg_ver_str(all[i].ver, v1, sizeof(v1)), all[i].seg,
			    agg_ver_str(ver, v2, sizeof(v2)));
			break;
		case AGG_BLAME_FAR:
			say(buf, len, &used, "%s (is at %s: %s is more than %d ahead, and refused; "
			    "a jump needs a new run, --run)", who,
			    agg_ver_str(all[i].ver, v1, sizeof(v1)), agg_ver_str(ver, v2, sizeof(v2)),
			    AGG_ITER_AHEAD);
			break;
		case AGG_BLAME_LOST_DOWN:
			say(buf, len, &used, "%s (has the result of segment %u; %s does not: lost on the way down)",
			    who, all[i].seg, at);
			break;
		}
	}
}
