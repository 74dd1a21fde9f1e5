// SPDX-License-Identifier: GPL-2.0-only
/* The plan (man 5 agg-plan): nodes and weighted trees over them. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "opts.h"
#include "plan.h"
#include "siphash.h"
#include "text.h"

static const char *const scheme_names[AGG_SCHEME_COUNT] = {
	[AGG_SCHEME_ALEPH] = "aleph",
	[AGG_SCHEME_RAT] = "rat",
	[AGG_SCHEME_PS] = "ps",
	[AGG_SCHEME_RING] = "ring",
};

const char *agg_scheme_name(enum agg_scheme s)
{
	return s < AGG_SCHEME_COUNT ? scheme_names[s] : "?";
}

int agg_scheme_parse(const char *s, enum agg_scheme *out)
{
	for (int i = 0; i < AGG_SCHEME_COUNT; i++) {
		if (!strcmp(s, scheme_names[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

void agg_plan_init(struct agg_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->job = AGG_PLAN_DEF_JOB;
	p->port = AGG_PLAN_DEF_PORT;
	p->scheme = AGG_SCHEME_ALEPH;
	p->seed = 1;
	p->segment = AGG_PLAN_DEF_SEGMENT;
	p->size = AGG_PLAN_DEF_SIZE;
	p->slots = AGG_PLAN_DEF_SLOTS;
	p->cpu_demand = AGG_PLAN_DEF_CPU_DEMAND;
}

unsigned agg_plan_default_slots(unsigned segment)
{
	unsigned s = segment ? (1u << 18) / segment : AGG_PLAN_DEF_SLOTS;

	return s < 16 ? 16 : s > AGG_PLAN_DEF_SLOTS ? AGG_PLAN_DEF_SLOTS : s;
}

void agg_plan_free(struct agg_plan *p)
{
	for (int t = 0; t < p->ntrees; t++) {
		free(p->tree[t].edge);
		free(p->tree[t].parent);
	}
	free(p->tree);
	free(p->node);
	free(p->seg_map);
	memset(p, 0, sizeof(*p));
}

int agg_plan_set_nodes(struct agg_plan *p, const struct agg_hosts *h)
{
	p->node = calloc(h->n, sizeof(*p->node));
	if (!p->node)
		return -ENOMEM;
	memcpy(p->node, h->host, h->n * sizeof(*p->node));
	p->nnodes = h->n;
	return 0;
}

int agg_plan_find(const struct agg_plan *p, const char *name)
{
	for (int i = 0; i < p->nnodes; i++)
		if (!strcmp(p->node[i].name, name))
			return i;
	return -1;
}

int agg_plan_add_tree(struct agg_plan *p, int root, unsigned weight)
{
	struct agg_plan_tree *t;

	if (p->ntrees >= AGG_PLAN_MAX_TREES)
		return -E2BIG;
	if (agg_grow((void **)&p->tree, p->ntrees + 1, sizeof(*p->tree)))
		return -ENOMEM;
	t = &p->tree[p->ntrees];
	memset(t, 0, sizeof(*t));
	t->root = root;
	t->weight = weight;
	return p->ntrees++;
}

int agg_plan_add_edge(struct agg_plan *p, int tree, int child, int parent)
{
	struct agg_plan_tree *t = &p->tree[tree];

	if (agg_grow((void **)&t->edge, t->nedges + 1, sizeof(*t->edge)))
		return -ENOMEM;
	t->edge[t->nedges++] = (struct agg_plan_edge){ child, parent };
	return 0;
}

int agg_plan_finish(struct agg_plan *p)
{
	unsigned period = 0;
	long cur[AGG_PLAN_MAX_TREES] = { 0 };

	for (int t = 0; t < p->ntrees; t++) {
		struct agg_plan_tree *tr = &p->tree[t];

		free(tr->parent);
		tr->parent = malloc(p->nnodes * sizeof(int));
		if (!tr->parent)
			return -ENOMEM;
		for (int i = 0; i < p->nnodes; i++)
			tr->parent[i] = -1;
		/* A second edge for a child is kept in edge[] for agg-check
		 * to report; the first one wins here. */
		for (int e = tr->nedges - 1; e >= 0; e--)
			tr->parent[tr->edge[e].child] = tr->edge[e].parent;
		period += tr->weight;
	}
	if (period == 0 || period > AGG_PLAN_MAX_PERIOD)
		return -EINVAL;
	free(p->seg_map);
	p->seg_map = malloc(period * sizeof(*p->seg_map));
	if (!p->seg_map)
		return -ENOMEM;
	p->period = period;
	/* Smooth weighted round robin: each tree's segments spread evenly. */
	for (unsigned s = 0; s < period; s++) {
		int best = 0;

		for (int t = 0; t < p->ntrees; t++) {
			cur[t] += p->tree[t].weight;
			if (cur[t] > cur[best])
				best = t;
		}
		cur[best] -= period;
		p->seg_map[s] = best;
	}
	return 0;
}

uint64_t agg_plan_nsegments(const struct agg_plan *p)
{
	uint64_t values = p->size / 4;

	return (values + p->segment - 1) / p->segment;
}

int agg_plan_depth(const struct agg_plan *p, int tree, int node)
{
	const struct agg_plan_tree *t = &p->tree[tree];
	int d = 0;

	while (node != t->root) {
		node = t->parent[node];
		if (node < 0 || ++d > p->nnodes)
			return -1;
	}
	return d;
}

int agg_plan_children(const struct agg_plan *p, int t, int node, int *kids, int max)
{
	int n = 0;

	for (int c = 0; c < p->nnodes; c++)
		if (p->tree[t].parent[c] == node && n++ < max)
			kids[n - 1] = c;
	return n;
}

/* ---- checking ---------------------------------------------------------- */

#define REPORT(...) do {						\
	char _m[256];							\
	snprintf(_m, sizeof(_m), __VA_ARGS__);				\
	report(ctx, _m);						\
	problems++;							\
} while (0)

int agg_plan_check(const struct agg_plan *p, agg_plan_report_fn report, void *ctx)
{
	int *nparent = calloc(p->nnodes, sizeof(int)), *nkids = calloc(p->nnodes, sizeof(int));
	int problems = 0;

	if (!nparent || !nkids) {
		free(nparent);
		free(nkids);
		report(ctx, "out of memory");
		return 1;
	}
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_plan_tree *tr = &p->tree[t];
		const char *root = p->node[tr->root].name;

		memset(nparent, 0, p->nnodes * sizeof(int));
		memset(nkids, 0, p->nnodes * sizeof(int));
		for (int e = 0; e < tr->nedges; e++) {
			int c = tr->edge[e].child;

			nparent[c]++;
			nkids[tr->edge[e].parent]++;
			if (c == tr->root)
				REPORT("tree %d: root %s has a parent", t, root);
			else if (p->node[c].role != AGG_ROLE_WORKER)
				REPORT("tree %d: parameter server %s sends to %s", t,
				       p->node[c].name, p->node[tr->edge[e].parent].name);
		}
		for (int i = 0; i < p->nnodes; i++) {
			/* A root may be a worker (RAT): it has no parent. */
			if (p->node[i].role != AGG_ROLE_WORKER || i == tr->root)
				continue;
			if (nparent[i] == 0)
				REPORT("tree %d: worker %s has no parent", t, p->node[i].name);
			else if (nparent[i] > 1)
				REPORT("tree %d: worker %s has %d parents", t, p->node[i].name,
				       nparent[i]);
			else if (agg_plan_depth(p, t, i) < 0) {
				/* a dead end (a node without a parent) or a cycle */
				int end = i, steps = 0;

				while (tr->parent[end] >= 0 && end != tr->root &&
				       ++steps <= p->nnodes)
					end = tr->parent[end];
				if (steps > p->nnodes)
					REPORT("tree %d: worker %s does not reach root %s (a cycle)",
					       t, p->node[i].name, root);
				else
					REPORT("tree %d: worker %s does not reach root %s (its chain ends at %s)",
					       t, p->node[i].name, root, p->node[end].name);
			}
		}
		/* ALEPH's capacities (Eq. 1); RAT puts a whole region under its
		 * aggregator by design, and PS plans have no aggregators. */
		for (int i = 0; i < p->nnodes; i++) {
			int kids = nkids[i], cap;

			if (p->scheme != AGG_SCHEME_ALEPH ||
			    p->node[i].role != AGG_ROLE_WORKER || p->bw_demand <= 0)
				continue;
			cap = agg_cluster_capacity(&p->node[i], p->bw_demand, p->cpu_demand);
			if (kids > cap)
				REPORT("tree %d: %s aggregates %d worker%s, capacity %d "
				       "(bw=%.15g, b=%.15g)", t, p->node[i].name, kids,
				       kids == 1 ? "" : "s", cap, p->node[i].bw, p->bw_demand);
		}
	}
	free(nparent);
	free(nkids);
	return problems;
}
#undef REPORT

/* ---- writing ----------------------------------------------------------- */

static const struct agg_plan_tree *order_tree;

/* By parent, then child (node order), then as stored. */
static int cmp_edge(const void *x, const void *y)
{
	const struct agg_plan_edge *a = &order_tree->edge[*(const int *)x];
	const struct agg_plan_edge *b = &order_tree->edge[*(const int *)y];

	if (a->parent != b->parent)
		return a->parent - b->parent;
	if (a->child != b->child)
		return a->child - b->child;
	return *(const int *)x - *(const int *)y;
}

int agg_plan_edge_order(const struct agg_plan *p, int t, int *order)
{
	const struct agg_plan_tree *tr = &p->tree[t];
	int ne = tr->nedges, n = 0, head = 0, tail = 0;
	int *byp = malloc((ne + 1) * sizeof(int)), *first = malloc((p->nnodes + 1) * sizeof(int));
	int *queue = malloc((p->nnodes + 1) * sizeof(int));
	char *done = calloc(ne + 1, 1), *seen = calloc(p->nnodes + 1, 1);

	if (!byp || !first || !queue || !done || !seen) {
		n = -ENOMEM;
		goto out;
	}
	for (int e = 0; e < ne; e++)
		byp[e] = e;
	order_tree = tr;
	qsort(byp, ne, sizeof(int), cmp_edge);
	for (int i = 0; i <= p->nnodes; i++)
		first[i] = ne;
	for (int k = ne - 1; k >= 0; k--)
		first[tr->edge[byp[k]].parent] = k;
	/* Breadth first from the root, each node's children in node order... */
	queue[tail++] = tr->root;
	seen[tr->root] = 1;
	while (head < tail) {
		int u = queue[head++];

		for (int k = first[u]; k < ne && tr->edge[byp[k]].parent == u; k++) {
			int c = tr->edge[byp[k]].child;

			done[byp[k]] = 1;
			order[n++] = byp[k];
			if (!seen[c]) {
				seen[c] = 1;
				queue[tail++] = c;
			}
		}
	}
	/* ...then edges not reachable from the root (a broken plan), sorted. */
	for (int k = 0; k < ne; k++)
		if (!done[byp[k]])
			order[n++] = byp[k];
out:
	free(byp);
	free(first);
	free(queue);
	free(done);
	free(seen);
	return n;
}

int agg_plan_write(const struct agg_plan *p, FILE *f)
{
	char addr[INET_ADDRSTRLEN];
	int maxe = 0, *order;

	fprintf(f, "plan v%d job=%u port=%u scheme=%s seed=%" PRIu64
		" segment=%u size=%" PRIu64 " slots=%u token=0x%016" PRIx64
		" bw-demand=%.15g cpu-demand=%.15g\n",
		AGG_PLAN_VERSION, p->job, p->port, agg_scheme_name(p->scheme),
		p->seed, p->segment, p->size, p->slots, p->token,
		p->bw_demand, p->cpu_demand);
	for (int i = 0; i < p->nnodes; i++) {
		inet_ntop(AF_INET, &p->node[i].addr, addr, sizeof(addr));
		fprintf(f, "node %s %s", p->node[i].name, addr);
		agg_host_write_attrs(&p->node[i], f);
		fputc('\n', f);
	}
	for (int t = 0; t < p->ntrees; t++)
		if (p->tree[t].nedges > maxe)
			maxe = p->tree[t].nedges;
	order = malloc((maxe + 1) * sizeof(int));
	if (!order)
		return -ENOMEM;
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_plan_tree *tr = &p->tree[t];
		int n = agg_plan_edge_order(p, t, order);

		if (n < 0) {
			free(order);
			return n;
		}
		fprintf(f, "tree %d root=%s weight=%u\n", t, p->node[tr->root].name,
			tr->weight);
		for (int k = 0; k < n; k++)
			fprintf(f, "edge %d %s %s\n", t,
				p->node[tr->edge[order[k]].child].name,
				p->node[tr->edge[order[k]].parent].name);
	}
	free(order);
	return ferror(f) ? -EIO : 0;
}

char *agg_plan_to_text(const struct agg_plan *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return NULL;
	err = agg_plan_write(p, f);
	if (fclose(f) || err) {
		free(buf);
		return NULL;
	}
	return buf;
}

int agg_plan_keyed_token(const struct agg_plan *p, const uint8_t key[16],
			 uint64_t *token)
{
	struct agg_plan q = *p;
	char *text;

	q.token = 0;
	text = agg_plan_to_text(&q);
	if (!text)
		return -ENOMEM;
	*token = agg_siphash(key, text, strlen(text));
	free(text);
	return 0;
}

#define AGG_WIRE_K1	0x657269772d676761ULL	/* "agg-wire", little-endian */

uint64_t agg_plan_wire_token(const struct agg_plan *p)
{
	uint8_t key[AGG_SIPHASH_KEY_SIZE];
	char *text = agg_plan_to_text(p);
	uint64_t h;

	if (!text)
		return 0;
	agg_siphash_key(key, p->token, AGG_WIRE_K1);
	h = agg_siphash(key, text, strlen(text));
	free(text);
	return h ? h : 1;	/* 0 is the error */
}

/* ---- reading ----------------------------------------------------------- */

struct plan_reader {
	struct agg_plan *p;
	const char *fname;
	struct agg_diag *d;
	const struct agg_text_line *ln;
	struct agg_host_index nodes;
};

static int bad(struct plan_reader *r, int col, const char *fmt, const char *arg)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, arg);
	agg_diag_set(r->d, r->fname, r->ln->lineno, col, "%s", msg);
	return -EINVAL;
}

static int header_u64(struct plan_reader *r, int t, const char *v, uint64_t max,
		      uint64_t min, uint64_t *out)
{
	const struct agg_text_tok *tok = &r->ln->tok[t];
	int col = 0;

	if (agg_parse_u64(v, out, &col) || *out > max || *out < min)
		return bad(r, tok->col + (int)(v - tok->s) + col,
			   "bad number in '%s'", tok->s);
	return 0;
}

static int read_header(struct plan_reader *r)
{
	const struct agg_text_line *ln = r->ln;
	struct agg_plan *p = r->p;
	uint64_t x;
	int err = 0;
	bool slots = false;

	if (strcmp(ln->tok[0].s, "plan"))
		return bad(r, ln->tok[0].col,
			   "expected 'plan v1 ...' header, got '%s'", ln->tok[0].s);
	if (ln->ntok < 2 || strcmp(ln->tok[1].s, "v1"))
		return bad(r, ln->ntok < 2 ? ln->end_col : ln->tok[1].col,
			   "unsupported plan version '%s' (this agg reads v1)",
			   ln->ntok < 2 ? "" : ln->tok[1].s);
	for (int t = 2; t < ln->ntok && !err; t++) {
		const char *kv = ln->tok[t].s, *v = strchr(kv, '=');
		size_t klen = v ? (size_t)(v - kv) : 0;
		int col = 0;

		if (!v)
			return bad(r, ln->tok[t].col, "expected key=value, got '%s'", kv);
		v++;
#define KEY(k) (klen == strlen(k) && !strncmp(kv, k, klen))
		if (KEY("job")) {
			err = header_u64(r, t, v, UINT32_MAX, 0, &x);
			p->job = x;
		} else if (KEY("port")) {
			err = header_u64(r, t, v, 65535, 1, &x);
			p->port = x;
		} else if (KEY("scheme")) {
			if (agg_scheme_parse(v, &p->scheme) ||
			    p->scheme == AGG_SCHEME_RING)
				err = bad(r, ln->tok[t].col + 7,
					  "unknown plan scheme '%s' (aleph, rat or ps)", v);
		} else if (KEY("seed")) {
			err = header_u64(r, t, v, UINT64_MAX, 0, &p->seed);
		} else if (KEY("segment")) {
			err = header_u64(r, t, v, AGG_PLAN_MAX_SEGMENT, 1, &x);
			p->segment = x;
		} else if (KEY("size")) {
			err = header_u64(r, t, v, UINT64_MAX, 4, &p->size);
			if (!err && p->size % 4)
				err = bad(r, ln->tok[t].col,
					  "size must be a multiple of 4 bytes: '%s'", kv);
		} else if (KEY("slots")) {
			err = header_u64(r, t, v, 1 << 20, 1, &x);
			p->slots = x;
			slots = true;
		} else if (KEY("token")) {
			char *end;

			errno = 0;
			p->token = strtoull(v, &end, 16);
			if (strncmp(v, "0x", 2) || *end || errno)
				err = bad(r, ln->tok[t].col + 6,
					  "token must be 0x and hex digits: '%s'", v);
		} else if (KEY("bw-demand") || KEY("cpu-demand")) {
			double *dst = KEY("bw-demand") ? &p->bw_demand : &p->cpu_demand;

			if (agg_parse_double(v, dst, &col) || *dst < 0)
				err = bad(r, ln->tok[t].col + (int)(v - kv) + col,
					  "bad number in '%s'", kv);
		} else {
			err = bad(r, ln->tok[t].col, "unknown plan header field '%s'", kv);
		}
#undef KEY
	}
	if (!slots)
		p->slots = agg_plan_default_slots(p->segment);
	return err;
}

static int read_node(struct plan_reader *r)
{
	struct agg_plan *p = r->p;
	struct agg_host hst;
	int err;

	if (p->ntrees)
		return bad(r, r->ln->tok[0].col, "%s lines must come before tree lines",
			   "node");
	if (r->ln->ntok < 2)
		return bad(r, r->ln->end_col, "expected 'node NAME ADDRESS ...'%s", "");
	err = agg_host_parse(r->ln, 1, &hst, r->fname, r->d);
	if (!err)
		err = agg_host_check_dup(&r->nodes, p->node, &hst, r->ln, 1,
					 r->fname, r->d);
	if (err)
		return err;
	if (agg_grow((void **)&p->node, p->nnodes + 1, sizeof(*p->node)))
		return -ENOMEM;
	p->node[p->nnodes] = hst;
	if (agg_host_index_add(&r->nodes, p->node))
		return -ENOMEM;
	p->nnodes++;
	return 0;
}

static int find_node(struct plan_reader *r, int t, int *out)
{
	*out = agg_plan_find(r->p, r->ln->tok[t].s);
	if (*out < 0)
		return bad(r, r->ln->tok[t].col, "unknown node '%s'", r->ln->tok[t].s);
	return 0;
}

static int read_tree(struct plan_reader *r)
{
	const struct agg_text_line *ln = r->ln;
	int root = -1, err = 0;
	uint64_t id, weight = 0;

	if (ln->ntok < 2)
		return bad(r, ln->end_col, "expected 'tree ID root=NAME weight=N'%s", "");
	if (agg_parse_u64(ln->tok[1].s, &id, NULL) || id != (uint64_t)r->p->ntrees)
		return bad(r, ln->tok[1].col, "tree ids count up from 0: expected %s",
			   r->p->ntrees == 0 ? "0" : "the next id");
	if (id >= AGG_PLAN_MAX_TREES)
		return bad(r, ln->tok[1].col, "too many trees (at most 64)%s", "");
	for (int t = 2; t < ln->ntok && !err; t++) {
		const char *kv = ln->tok[t].s;

		if (!strncmp(kv, "root=", 5)) {
			root = agg_plan_find(r->p, kv + 5);
			if (root < 0)
				err = bad(r, ln->tok[t].col + 5, "unknown node '%s'", kv + 5);
		} else if (!strncmp(kv, "weight=", 7)) {
			int col = 0;

			if (agg_parse_u64(kv + 7, &weight, &col) || weight == 0 ||
			    weight > AGG_PLAN_MAX_PERIOD)
				err = bad(r, ln->tok[t].col + 7 + col,
					  "weight must be 1 to 1024: '%s'", kv);
		} else {
			err = bad(r, ln->tok[t].col, "unknown tree field '%s'", kv);
		}
	}
	if (!err && root < 0)
		err = bad(r, ln->end_col, "tree without root=NAME%s", "");
	if (!err && weight == 0)
		err = bad(r, ln->end_col, "tree without weight=N%s", "");
	if (err)
		return err;
	err = agg_plan_add_tree(r->p, root, weight);
	return err < 0 ? err : 0;
}

static int read_edge(struct plan_reader *r)
{
	const struct agg_text_line *ln = r->ln;
	uint64_t t;
	int child, parent, err;

	if (ln->ntok != 4)
		return bad(r, ln->ntok > 4 ? ln->tok[4].col : ln->end_col,
			   "expected 'edge TREE CHILD PARENT'%s", "");
	if (agg_parse_u64(ln->tok[1].s, &t, NULL) || t >= (uint64_t)r->p->ntrees)
		return bad(r, ln->tok[1].col, "no tree '%s' declared before this edge",
			   ln->tok[1].s);
	err = find_node(r, 2, &child);
	if (!err)
		err = find_node(r, 3, &parent);
	if (!err && child == parent)
		err = bad(r, ln->tok[3].col, "edge from '%s' to itself", ln->tok[2].s);
	if (!err)
		err = agg_plan_add_edge(r->p, t, child, parent);
	return err;
}

int agg_plan_read(struct agg_plan *p, FILE *f, const char *fname,
		  struct agg_diag *d)
{
	struct plan_reader r = { .p = p, .fname = fname, .d = d };
	struct agg_text tx;
	struct agg_text_line ln;
	bool have_header = false;
	int err = 0, rc;

	agg_plan_init(p);
	p->bw_demand = 0;
	agg_text_init(&tx, f);
	r.ln = &ln;
	while (!err && (rc = agg_text_next(&tx, &ln)) > 0) {
		const char *w;

		if (ln.ntok == 0)
			continue;
		w = ln.tok[0].s;
		if (!have_header) {
			err = read_header(&r);
			have_header = true;
		} else if (!strcmp(w, "node")) {
			err = read_node(&r);
		} else if (!strcmp(w, "tree")) {
			err = read_tree(&r);
		} else if (!strcmp(w, "edge")) {
			err = read_edge(&r);
		} else {
			err = bad(&r, ln.tok[0].col,
				  "unknown line '%s' (node, tree or edge)", w);
		}
	}
	if (!err && rc < 0) {
		err = rc == -E2BIG ? -EINVAL : rc;
		agg_diag_set(d, fname, tx.lineno, 1, "%s", rc == -E2BIG ?
			     "line too long (more than 65536 bytes)" : strerror(-rc));
	}
	if (!err && !have_header) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "empty plan: no 'plan v1' header");
		err = -EINVAL;
	}
	if (!err && (p->nnodes == 0 || p->ntrees == 0)) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "plan has no %s",
			     p->nnodes ? "tree" : "node");
		err = -EINVAL;
	}
	if (!err && agg_plan_finish(p)) {
		agg_diag_set(d, fname, tx.lineno + 1, 1,
			     "tree weights add up to more than %d", AGG_PLAN_MAX_PERIOD);
		err = -EINVAL;
	}
	if (err == -ENOMEM)
		agg_diag_set(d, fname, tx.lineno, 1, "out of memory");
	agg_text_free(&tx);
	agg_host_index_free(&r.nodes);
	if (err)
		agg_plan_free(p);
	return err;
}
