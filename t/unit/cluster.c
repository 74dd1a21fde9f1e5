// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of M-WCHA, RAT and the cost model (ALEPH, RAT papers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "eval.h"
#include "rand.h"
#include "tap.h"
#include "tree.h"

static int hosts_from(struct agg_hosts *h, const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct agg_diag d;
	int err = agg_hosts_read(h, f, "test", &d);

	fclose(f);
	if (err)
		diag("hosts: %s", d.msg);
	return err;
}

static int build(struct agg_plan *p, const struct agg_hosts *h,
		 enum agg_scheme s, uint64_t seed, uint64_t size, int trees)
{
	struct agg_build_info info;

	agg_plan_init(p);
	p->scheme = s;
	p->seed = seed;
	p->size = size;
	return agg_tree_build(p, h, trees, &info);
}

static double eval_time(const struct agg_hosts *h, enum agg_scheme s,
			uint64_t size)
{
	struct agg_plan p;
	struct agg_eval e;

	build(&p, h, s == AGG_SCHEME_RING ? AGG_SCHEME_PS : s, 1, size, 0);
	if (s == AGG_SCHEME_RING)
		agg_eval_ring(&p, &e);
	else
		agg_eval_plan(&p, &e);
	agg_plan_free(&p);
	return e.time_s;
}

static void test_table1(void)
{
	struct agg_hosts h;

	hosts_from(&h, "ps0 10.90.0.100 bw=20 role=ps\n"
		       "w0 10.90.0.1 bw=10\nw1 10.90.0.2 bw=10\n"
		       "w2 10.90.0.3 bw=10\nw3 10.90.0.4 bw=30\n");
	/* 4.2 Gb of gradients = 525 MB */
	is_dbl(eval_time(&h, AGG_SCHEME_PS, 525000000), 0.84, 1e-9, "Table 1: PS 0.84 s");
	is_dbl(eval_time(&h, AGG_SCHEME_RING, 525000000), 0.63, 1e-9, "Table 1: ring 0.63 s");
	is_dbl(eval_time(&h, AGG_SCHEME_ALEPH, 525000000), 0.42, 1e-9, "Table 1: ALEPH 0.42 s");
	agg_hosts_free(&h);
}

/* Section 6.3: the 30 G worker takes two 10 G workers, each 20 G worker
 * one, the last 10 G worker goes to the PS: for every seed. */
static void test_testbed(void)
{
	struct agg_hosts h;
	int good = 0, seeds = 1000;

	hosts_from(&h, "ps0 10.90.0.100 bw=40 role=ps\n"
		       "a 10.90.0.1 bw=30\nb1 10.90.0.2 bw=20\nb2 10.90.0.3 bw=20\n"
		       "c1 10.90.0.4 bw=10\nc2 10.90.0.5 bw=10\nc3 10.90.0.6 bw=10\n"
		       "c4 10.90.0.7 bw=10\nc5 10.90.0.8 bw=10\n");
	for (int s = 0; s < seeds; s++) {
		struct agg_cluster_opts o = { .cpu_demand = 0.1, .seed = s };
		struct agg_cluster_stats st;
		int agg[9], members[9] = { 0 }, direct_c = 0, ok1;

		agg_cluster_mwcha(&h, &o, agg, &st);
		for (int i = 0; i < 9; i++)
			if (agg[i] >= 0)
				members[agg[i]]++;
		for (int i = 4; i < 9; i++)
			direct_c += agg[i] < 0;
		ok1 = members[1] == 2 && members[2] == 1 && members[3] == 1 &&
		      agg[1] < 0 && agg[2] < 0 && agg[3] < 0 && direct_c == 1 &&
		      st.clusters == 4 && st.aggregators == 3;
		good += ok1;
		if (!ok1 && good == s)
			diag("seed %d: a:%d b1:%d b2:%d direct10G:%d", s, members[1],
			     members[2], members[3], direct_c);
	}
	is_int(good, seeds, "testbed of Sec. 6.3: paper's clustering for every one of %d seeds", seeds);
	agg_hosts_free(&h);
}

/* Random instance in the style of Sec. 6.4. */
static char *random_hosts(struct agg_rand *r, int n, int racks, double sd,
			  int links)
{
	size_t cap = 64 * (n + links + 2);
	char *buf = malloc(cap);
	size_t len = 0;

	len += snprintf(buf + len, cap - len, "ps0 10.90.255.254 bw=100 role=ps\n");
	for (int i = 0; i < n; i++) {
		double x = 0.5 + sd * agg_rand_normal(r);

		x = x < 0.1 ? 0.1 : x > 0.9 ? 0.9 : x;
		len += snprintf(buf + len, cap - len, "w%d 10.90.%d.%d bw=%.3f",
				i, i / 250, i % 250 + 1, x * 10);
		if (racks)
			len += snprintf(buf + len, cap - len, " rack=r%d", i % racks);
		len += snprintf(buf + len, cap - len, "\n");
	}
	for (int k = 0; k < links; k++) {
		int a = agg_rand_below(r, n), b = agg_rand_below(r, n);

		if (a != b)
			len += snprintf(buf + len, cap - len, "link w%d w%d\n", a, b);
	}
	return buf;
}

/* Eq. 1 and adjacency: returns a description of the first violation. */
static const char *check_eq1(const struct agg_hosts *h, const int *agg, double b,
			     double c)
{
	int *grp = malloc(h->n * sizeof(int)), *cnt = calloc(h->n, sizeof(int));
	const char *bad = NULL;

	agg_cluster_groups(h, grp);
	for (int i = 0; i < h->n && !bad; i++) {
		int a = agg[i];
		bool adj;

		if (a < 0)
			continue;
		if (h->host[i].role != AGG_ROLE_WORKER || h->host[a].role != AGG_ROLE_WORKER)
			bad = "a non-worker in a cluster";
		else if (agg[a] >= 0)
			bad = "an aggregator that is itself a member";
		adj = grp[i] == grp[a];
		for (int k = 0; k < h->nlinks && !adj; k++)
			adj = (h->link[k].a == i && h->link[k].b == a) ||
			      (h->link[k].b == i && h->link[k].a == a);
		if (!bad && !adj)
			bad = "a member not adjacent to its aggregator";
		cnt[a]++;
	}
	for (int i = 0; i < h->n && !bad; i++)
		if (cnt[i] > agg_cluster_capacity(&h->host[i], b, c))
			bad = "an aggregator over its capacity";
	free(grp);
	free(cnt);
	return bad;
}

static void test_random(void)
{
	struct agg_rand r;
	int sizes[] = { 20, 50, 100, 300 }, rackss[] = { 0, 5 };
	double sds[] = { 0.1, 0.2, 0.3 }, ratio_sum = 0, worst = 0;
	int inst = 0, viol = 0, worst_over = 0;
	const char *first = NULL;

	agg_rand_seed(&r, 42);
	for (size_t a = 0; a < 4; a++)
	for (size_t b = 0; b < 2; b++)
	for (size_t s = 0; s < 3; s++)
	for (int seed = 1; seed <= 5; seed++) {
		char *text = random_hosts(&r, sizes[a], rackss[b], sds[s], 0);
		struct agg_cluster_opts o = { .cpu_demand = 0.1, .seed = seed };
		struct agg_cluster_stats st;
		struct agg_hosts h;
		int *agg, opt;
		const char *bad;

		hosts_from(&h, text);
		agg = malloc(h.n * sizeof(int));
		agg_cluster_mwcha(&h, &o, agg, &st);
		bad = check_eq1(&h, agg, st.bw_demand, 0.1);
		if (bad) {
			viol++;
			first = first ? first : bad;
		}
		opt = agg_cluster_optimum(&h, st.bw_demand, 0.1);
		ratio_sum += (double)st.clusters / opt;
		if ((double)st.clusters / opt > worst)
			worst = (double)st.clusters / opt;
		if (getenv("AGG_TEST_DEBUG")) diag("n=%d racks=%d sd=%.1f seed=%d: %d vs opt %d", sizes[a], rackss[b], sds[s], seed, st.clusters, opt);
		if (st.clusters > opt * 1.25 + 1)
			worst_over++;
		inst++;
		free(agg);
		free(text);
		agg_hosts_free(&h);
	}
	if (!ok(viol == 0, "Eq. 1 holds on %d random instances", inst))
		diag("%d violations, first: %s", viol, first);
	diag("mean clusters / optimum = %.4f, worst %.4f over %d instances",
	     ratio_sum / inst, worst, inst);
	ok(ratio_sum / inst <= 1.02, "clusters within 2%% of the optimum on average (%.4f)",
	   ratio_sum / inst);
	ok(worst <= 1.10, "no instance more than 10%% over the optimum (%.4f)", worst);
	is_int(worst_over, 0, "no instance more than 25%% over the optimum");
}

static void test_links(void)
{
	struct agg_rand r;
	int viol = 0;

	agg_rand_seed(&r, 7);
	for (int seed = 1; seed <= 20; seed++) {
		char *text = random_hosts(&r, 60, 6, 0.3, 40);
		struct agg_cluster_opts o = { .cpu_demand = 0.1, .seed = seed };
		struct agg_cluster_stats st;
		struct agg_hosts h;
		int *agg;

		hosts_from(&h, text);
		agg = malloc(h.n * sizeof(int));
		agg_cluster_mwcha(&h, &o, agg, &st);
		viol += check_eq1(&h, agg, st.bw_demand, 0.1) != NULL;
		free(agg);
		free(text);
		agg_hosts_free(&h);
	}
	is_int(viol, 0, "Eq. 1 and adjacency hold with link lines (20 instances)");
}

/*
 * The local-improvement pass over many random instances, with and
 * without racks and link lines: never more clusters than M-WCHA made,
 * Eq. 1 and adjacency hold, and the same seed gives the same clusters.
 */
static void test_improve(void)
{
	struct agg_rand r;
	int inst = 0, more = 0, viol = 0, nondet = 0, better = 0;
	const char *first = NULL;

	agg_rand_seed(&r, 33);
	for (int k = 0; k < 400; k++) {
		int n = 12 + agg_rand_below(&r, 229), racks = agg_rand_below(&r, 3) * 4;
		int links = agg_rand_below(&r, 2) ? agg_rand_below(&r, n) : 0;
		double sd = 0.1 + 0.1 * agg_rand_below(&r, 3);
		char *text = random_hosts(&r, n, racks, sd, links);
		struct agg_cluster_opts o = { .cpu_demand = agg_rand_below(&r, 2) ? 0.1 : 2,
					      .seed = agg_rand_u64(&r) };
		struct agg_cluster_stats st, st2;
		struct agg_hosts h;
		int *agg, *agg2;
		const char *bad;

		hosts_from(&h, text);
		for (int i = 0; i < h.n; i++)
			if (h.host[i].role == AGG_ROLE_WORKER)
				h.host[i].cpu = 1 + agg_rand_below(&r, 16);
		agg = malloc(h.n * sizeof(int));
		agg2 = malloc(h.n * sizeof(int));
		agg_cluster_mwcha(&h, &o, agg, &st);
		agg_cluster_mwcha(&h, &o, agg2, &st2);
		more += st.clusters > st.mwcha_clusters;
		better += st.clusters < st.mwcha_clusters;
		nondet += memcmp(agg, agg2, h.n * sizeof(int)) != 0 ||
			  st.clusters != st2.clusters;
		bad = check_eq1(&h, agg, st.bw_demand, o.cpu_demand);
		if (bad) {
			viol++;
			first = first ? first : bad;
		}
		inst++;
		free(agg);
		free(agg2);
		free(text);
		agg_hosts_free(&h);
	}
	is_int(more, 0, "improvement: never more clusters than M-WCHA (%d instances)", inst);
	if (!ok(viol == 0, "improvement: capacities, adjacency, one cluster per worker (%d instances)", inst))
		diag("%d violations, first: %s", viol, first);
	is_int(nondet, 0, "improvement: the same seed gives the same clusters");
	ok(better > 0, "improvement: fewer clusters than M-WCHA on %d of %d instances",
	   better, inst);
}

static void test_cpu_limit(void)
{
	struct agg_hosts h;
	struct agg_cluster_opts o = { .cpu_demand = 1, .seed = 1 };
	struct agg_cluster_stats st;
	int agg[6], m = 0;

	/* bw allows 3 members, cpu=1 with c=1 allows one. */
	hosts_from(&h, "ps 10.90.0.100 bw=10 role=ps\n"
		       "big 10.90.0.1 bw=40 cpu=1\nw1 10.90.0.2 bw=10\n"
		       "w2 10.90.0.3 bw=10\nw3 10.90.0.4 bw=10\n");
	agg_cluster_mwcha(&h, &o, agg, &st);
	for (int i = 0; i < h.n; i++)
		m += agg[i] == 1;
	is_int(m, 1, "the CPU constraint C/c caps an aggregator");
	is_int(agg_cluster_capacity(&h.host[1], 10, 1), 1, "g = min(B/b - 1, C/c)");
	is_int(agg_cluster_capacity(&h.host[1], 10, 0.1), 3, "g = B/b - 1 when CPU is ample");
	agg_hosts_free(&h);
}

static int crossings_out_of(const struct agg_plan *p, int t, const char *pod,
			    const char *rack)
{
	int n = 0;

	for (int e = 0; e < p->tree[t].nedges; e++) {
		const struct agg_host *c = &p->node[p->tree[t].edge[e].child];
		const struct agg_host *q = &p->node[p->tree[t].edge[e].parent];
		bool in_c = !strcmp(c->pod, pod) && (!rack || !strcmp(c->rack, rack));
		bool in_q = !strcmp(q->pod, pod) && (!rack || !strcmp(q->rack, rack));

		n += in_c && !in_q;
	}
	return n;
}

/*
 * RAT on 2 pods x 2 racks x 3 workers, with and without a parameter
 * server: each tree's root is a host of its own; out of each rack and pod
 * that does not hold the root exactly one aggregate leaves per tree, and
 * nothing leaves the root's rack or pod; depth at most l + 1.
 */
static void check_rat(const struct agg_plan *p, int want_trees, const char *what)
{
	static const char *pods[] = { "p1", "p2" }, *racks[] = { "r1", "r2" };
	int bad = 0, deep = 0, reach = 0, roots = 0, differ = 0;
	struct agg_eval e;

	is_int(p->ntrees, want_trees, "%s: %d trees", what, want_trees);
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_host *r = &p->node[p->tree[t].root];

		for (int u = 0; u < t; u++)
			roots += p->tree[u].root == p->tree[t].root;
		for (int a = 0; a < 2; a++) {
			bool in_pod = !strcmp(r->pod, pods[a]);

			bad += crossings_out_of(p, t, pods[a], NULL) != !in_pod;
			for (int b = 0; b < 2; b++)
				bad += crossings_out_of(p, t, pods[a], racks[b]) !=
				       !(in_pod && !strcmp(r->rack, racks[b]));
		}
		for (int i = 0; i < p->nnodes; i++) {
			int d = agg_plan_depth(p, t, i);

			if (p->node[i].role != AGG_ROLE_WORKER)
				continue;
			reach += i == p->tree[t].root ? d != 0 : d < 1;
			deep += d > 2 + 1;
		}
	}
	is_int(roots, 0, "%s: every tree has a root of its own", what);
	is_int(bad, 0, "%s: one aggregate out of each rack and pod, none out of the root's", what);
	is_int(reach, 0, "%s: every worker reaches the root in every tree", what);
	is_int(deep, 0, "%s: depth at most l + 1", what);
	agg_eval_plan(p, &e);
	is_int(e.chain, 2 * (2 + 1), "%s: dependency chain 2(l+1) with racks and pods", what);
	for (int i = 0; i < p->nnodes && p->ntrees > 1; i++)
		differ += p->tree[0].parent[i] != p->tree[1].parent[i];
	ok(differ > 0, "%s: trees rotate their aggregators", what);
}

static void test_rat(void)
{
	static const char *pods[] = { "p1", "p2" }, *racks[] = { "r1", "r2" };
	char text[4096], *workers;
	size_t len = 0;
	struct agg_hosts h;
	struct agg_plan p;
	int k = 1, pod_of_root[2] = { 0, 0 };

	len += snprintf(text, sizeof(text), "ps0 10.90.0.100 bw=40 role=ps\n");
	workers = text + len;
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			for (int w = 0; w < 3; w++, k++)
				len += snprintf(text + len, sizeof(text) - len,
						"w%d 10.90.0.%d bw=%d pod=%s rack=%s\n",
						k, k, 10 + (k * 7) % 11, pods[a], racks[b]);
	hosts_from(&h, text);
	build(&p, &h, AGG_SCHEME_RAT, 1, 1000000, 0);
	check_rat(&p, 13, "rat with a PS");
	is_int(p.tree[0].root, 0, "rat with a PS: the PS roots the first tree");
	agg_plan_free(&p);
	build(&p, &h, AGG_SCHEME_RAT, 1, 1000000, 3);
	check_rat(&p, 3, "rat --trees 3");
	for (int t = 1; t < 3; t++)
		pod_of_root[p.node[p.tree[t].root].pod[1] - '1']++;
	ok(pod_of_root[0] == 1 && pod_of_root[1] == 1,
	   "rat --trees 3: the PS, then one root in each pod");
	agg_plan_free(&p);
	agg_hosts_free(&h);

	hosts_from(&h, workers);
	is_int(build(&p, &h, AGG_SCHEME_RAT, 1, 1000000, 0), 0, "rat without a PS builds");
	check_rat(&p, 12, "rat without a PS");
	agg_plan_free(&p);
	agg_hosts_free(&h);
}

static void test_multi_ps(void)
{
	struct agg_hosts h;
	struct agg_plan p;
	int per[2] = { 0, 0 };
	unsigned w[2];
	double sh[2] = { 12.5, 10 };

	hosts_from(&h, "ps0 10.90.0.100 bw=40 role=ps\nps1 10.90.0.101 bw=10 role=ps\n"
		       "a 10.90.0.1 bw=30\nb 10.90.0.2 bw=10\nc 10.90.0.3 bw=10\n");
	build(&p, &h, AGG_SCHEME_ALEPH, 1, 1000000, 0);
	is_int(p.ntrees, 2, "two PS: two trees");
	is_int(p.tree[0].weight, 4, "weights are the PS bandwidth shares (40)");
	is_int(p.tree[1].weight, 1, "weights are the PS bandwidth shares (10)");
	for (unsigned s = 0; s < 1000; s++)
		per[agg_plan_seg_tree(&p, s)]++;
	is_int(per[0], 800, "segments split 4:1 between the trees");
	ok(agg_plan_seg_tree(&p, 0) != agg_plan_seg_tree(&p, 1) ||
	   agg_plan_seg_tree(&p, 1) != agg_plan_seg_tree(&p, 2) ||
	   agg_plan_seg_tree(&p, 2) != agg_plan_seg_tree(&p, 3) ||
	   agg_plan_seg_tree(&p, 3) != agg_plan_seg_tree(&p, 4),
	   "the interleave spreads trees within a period");
	is_int(p.tree[0].parent[3], p.tree[1].parent[3] == 2 ? 2 : p.tree[0].parent[3],
	       "the same clusters under each PS");
	agg_tree_weights(sh, 2, w);
	ok(w[0] == 5 && w[1] == 4, "12.5:10 gives weights 5:4 (got %u:%u)", w[0], w[1]);
	agg_plan_free(&p);
	agg_hosts_free(&h);
}

int main(void)
{
	test_table1();
	test_testbed();
	test_random();
	test_links();
	test_improve();
	test_cpu_limit();
	test_rat();
	test_multi_ps();
	return done_testing();
}
