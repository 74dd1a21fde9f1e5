// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/hot*: Principle 1, counting, tables, comparisons,
 * Space-Saving, Alg. 1, the log reader, the generator, identification. */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "tap.h"

static void test_principle1(void)
{
	struct agg_hot_entry e[] = { { 7, 50 }, { 3, 30 }, { 9, 10 }, { 1, 5 }, { 2, 5 } };
	struct agg_hot_entry *flat = malloc(100000 * sizeof(*flat));
	struct agg_hot_k k;

	is_int(AGG_HOT_SLOT_BYTES, 8 + 8 + 4 + 4,
	       "a hot slot: u64 id, s64 sum, u32 iteration, u32 bitmap");
	agg_hot_choose_k(e, 5, 100, 0.5, 1 << 20, &k);
	ok(k.k == 1 && !k.budget_bound && k.achieved == 0.5, "p=0.5: k=1 (50 of 100)");
	agg_hot_choose_k(e, 5, 100, 0.8, 1 << 20, &k);
	ok(k.k == 2 && k.achieved == 0.8, "p=0.8: k=2 (80 of 100, decimal p)");
	agg_hot_choose_k(e, 5, 100, 0.85, 1 << 20, &k);
	ok(k.k == 3 && k.k_coverage == 3 && fabs(k.achieved - 0.9) < 1e-12,
	   "p=0.85: k=3 (90 of 100)");
	agg_hot_choose_k(e, 5, 100, 0.85, 2 * 24, &k);
	ok(k.k == 2 && k.budget_bound && k.k_budget == 2 && k.k_coverage == 3 &&
	   k.achieved == 0.8, "budget 48 B = two 24-byte slots: k=2, budget-bound, covering 0.8");
	agg_hot_choose_k(e, 5, 100, 0.85, 3 * 24 - 1, &k);
	is_int(k.k_budget, 2, "71 B hold two whole slots");
	agg_hot_choose_k(e, 2, 100, 0.95, 2 * 24, &k);
	ok(k.k == 2 && k.budget_bound, "a list cut at the budget is budget-bound");
	agg_hot_choose_k(e, 5, 100, 1.0, 1 << 20, &k);
	ok(k.k == 5 && !k.budget_bound, "p=1: every parameter");
	agg_hot_choose_k(e, 5, 100, 0.5, 23, &k);
	ok(k.k == 0 && k.budget_bound, "a budget under one slot: k=0");
	/* ZEBRA's c x m: 5% of 20 MB; 1 MiB here holds 1048576 / 24 = 43690 */
	for (int i = 0; i < 100000; i++)
		flat[i] = (struct agg_hot_entry){ i, 1 };
	agg_hot_choose_k(flat, 100000, 100000, 0.5, 1 << 20, &k);
	ok(k.k == 43690 && k.budget_bound && fabs(k.achieved - 0.4369) < 1e-12,
	   "uniform 100000 ids, p=0.5, 1 MiB: k=43690 covering 0.4369");
	agg_hot_choose_k(flat, 100000, 100000, 0.4, 1 << 20, &k);
	ok(k.k == 40000 && !k.budget_bound, "p=0.4: k=40000 fits");
	free(flat);
}

static void test_counts(void)
{
	struct agg_hot_counts hc = { 0 };
	struct agg_hot_entry *top, want[4];
	const uint64_t big = 1ULL << 63, far = 20000000;	/* > 16M: past the 64 MiB floor */
	size_t n, map_before;
	int err = 0;

	/* ids far apart: the map, not a 2^63-entry array */
	for (int i = 0; i < 5; i++)
		err |= agg_hot_counts_add(&hc, big + i % 2);
	err |= agg_hot_counts_add(&hc, far);
	err |= agg_hot_counts_add(&hc, 3);
	ok(!err && hc.total == 7 && hc.distinct == 4, "7 updates of 4 ids counted");
	ok(agg_hot_counts_get(&hc, big) == 3 && agg_hot_counts_get(&hc, big + 1) == 2 &&
	   agg_hot_counts_get(&hc, far) == 1 && agg_hot_counts_get(&hc, 3) == 1,
	   "counts of ids near 2^63, 2e7 and 3");
	ok(hc.ndense < far && agg_hot_counts_bytes(&hc) < (1 << 20),
	   "sparse ids cost no array (%zu bytes)", agg_hot_counts_bytes(&hc));
	/* once 2.6M ids are seen, an array of up to 32 ids each may cover 2e7 */
	for (uint64_t id = 0; id < 2600000; id++)
		err |= agg_hot_counts_add(&hc, id);
	map_before = hc.map.n;
	err |= agg_hot_counts_add(&hc, far + 1);
	ok(!err && hc.ndense > far + 1 && hc.map.n == map_before - 1,
	   "the array grows over a denser id space; map entries move into it (%zu -> %zu)",
	   map_before, hc.map.n);
	ok(agg_hot_counts_get(&hc, far) == 1 && agg_hot_counts_get(&hc, 3) == 2 &&
	   agg_hot_counts_get(&hc, big) == 3 && agg_hot_counts_get(&hc, far + 1) == 1 &&
	   hc.distinct == 2600000 + 3 + 1,
	   "counts survive the move");
	/* a counter at the top of u32 moves to the map and keeps counting */
	hc.dense[5] = UINT32_MAX - 2;
	for (int i = 0; i < 3; i++)
		err |= agg_hot_counts_add(&hc, 5);
	ok(!err && agg_hot_counts_get(&hc, 5) == (uint64_t)UINT32_MAX + 1,
	   "a count passes 2^32 - 1");
	agg_hot_counts_top(&hc, 4, &top, &n);
	want[0] = (struct agg_hot_entry){ 5, (uint64_t)UINT32_MAX + 1 };
	want[1] = (struct agg_hot_entry){ big, 3 };
	want[2] = (struct agg_hot_entry){ 3, 2 };
	want[3] = (struct agg_hot_entry){ big + 1, 2 };
	ok(n == 4 && !memcmp(top, want, sizeof(want)),
	   "top 4: by count, ties by id, from array and map");
	free(top);
	agg_hot_counts_free(&hc);
}

static struct agg_hot_table table(const uint64_t *ids, size_t n)
{
	struct agg_hot_table t = { .k = n, .stripes = 4 };

	t.e = calloc(n + 1, sizeof(*t.e));
	for (size_t i = 0; i < n; i++)
		t.e[i] = (struct agg_hot_entry){ ids[i], 100 - i };
	return t;
}

static void test_compare(void)
{
	uint64_t a[] = { 1, 2, 3, 4 }, rev[] = { 4, 3, 2, 1 }, sw[] = { 2, 1, 3, 4 };
	uint64_t half[] = { 3, 4, 5, 6 }, none[] = { 7, 8, 9, 10 };
	uint64_t x[] = { 1, 2, 3 }, y[] = { 1, 3, 4 };
	struct agg_hot_table ta = table(a, 4), tr = table(rev, 4), ts = table(sw, 4);
	struct agg_hot_table th = table(half, 4), tn = table(none, 4);
	struct agg_hot_table tx = table(x, 3), ty = table(y, 3), te = table(NULL, 0);
	size_t c;

	is_dbl(agg_hot_kendall(&ta, &ta, &c), 0, 0, "same order: distance 0");
	is_dbl(agg_hot_kendall(&ta, &tr, &c), 1, 0, "reversed: distance 1");
	is_dbl(agg_hot_kendall(&ta, &ts, &c), 1.0 / 6, 1e-12, "one swap of six pairs: 1/6");
	is_dbl(agg_hot_precision(&ta, &th), 0.5, 0, "precision |A n B| / |A| = 2/4");
	agg_hot_kendall(&ta, &th, &c);
	is_int(c, 2, "two ids in common");
	is_dbl(agg_hot_precision(&tx, &ty), 2.0 / 3, 1e-12, "precision 2/3");
	/* Fagin's K^(1/2): (2,3) discordant (3 is in B, 2 is not), (2,4) one
	 * in each list only: 2 of a maximum 3*3 + (3+3)/2 = 12 */
	is_dbl(agg_hot_kendall_topk(&tx, &ty), 2.0 / 12, 1e-12, "top-k distance 2/12");
	is_dbl(agg_hot_kendall_topk(&ty, &tx), 2.0 / 12, 1e-12, "and symmetric");
	is_dbl(agg_hot_kendall_topk(&ta, &ta), 0, 0, "top-k: same table 0");
	is_dbl(agg_hot_kendall_topk(&ta, &tn), 1, 1e-12, "top-k: disjoint tables 1");
	is_dbl(agg_hot_kendall_topk(&ta, &tr), 6.0 / 22, 1e-12,
	       "top-k: reversed set of 4, 6 of 16 + 6");
	ok(agg_hot_kendall_topk(&ta, &th) > agg_hot_kendall(&ta, &th, NULL),
	   "top-k sees the half that changed, common-id tau does not (%.3f > %.3f)",
	   agg_hot_kendall_topk(&ta, &th), agg_hot_kendall(&ta, &th, NULL));
	ok(agg_hot_precision(&te, &ta) == 0 && agg_hot_kendall_topk(&te, &te) == 0,
	   "empty tables");
	agg_hot_table_free(&ta);
	agg_hot_table_free(&tr);
	agg_hot_table_free(&ts);
	agg_hot_table_free(&th);
	agg_hot_table_free(&tn);
	agg_hot_table_free(&tx);
	agg_hot_table_free(&ty);
	agg_hot_table_free(&te);
}

static int read_str(struct agg_hot_table *t, const char *s, struct agg_diag *d)
{
	FILE *f = fmemopen((void *)s, strlen(s), "r");
	int err = agg_hot_table_read(t, f, "t", d);

	fclose(f);
	return err;
}

static void test_table_io(void)
{
	uint64_t ids[] = { 42, 7, 99, 3, 1000000 };
	struct agg_hot_table t = table(ids, 5), u;
	struct agg_hot_index *x;
	struct agg_diag d;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	t.coverage = 0.5;
	t.budget = 1024;
	t.sample = 0.08;
	agg_hot_table_write(&t, f);
	fclose(f);
	ok(!strncmp(buf, "hot v1 k=5 coverage=0.5 achieved=0.000000 budget=1024 slot_bytes=24 "
		    "stripes=4 updates=0 iter=0 sample=0.08 method=exact\n", 101),
	   "header line");
	is_int(read_str(&u, buf, &d), 0, "a written table reads back");
	ok(u.k == 5 && u.stripes == 4 && u.e[4].id == 1000000 && u.e[1].freq == 99 &&
	   u.sample == 0.08, "rows and header survive");
	ok(strstr(buf, "\n4 1000000 96 0 1\n") != NULL, "rank 4 of 4 stripes: stripe 0, slot 1");
	agg_hot_index_new(&x, &u);
	ok(agg_hot_index_rank(x, 99) == 2 && agg_hot_index_rank(x, 5) == -1 &&
	   agg_hot_index_rank(x, UINT64_MAX) == -1, "index: id -> rank, cold -1");
	agg_hot_index_free(x);
	agg_hot_table_free(&u);
	is_int(read_str(&u, "hot v1 k=1 stripes=2 colour=red\n0 5 1 0 0\n", &d), 0,
	       "unknown header fields are newer versions' and ignored");
	agg_hot_table_free(&u);
	ok(read_str(&u, "hot v1 k=1 stripes=2\n0 5 1 0 0\nhot v1 k=2 stripes=2\n0 6 1 0 0\n"
		    "1 7 1 1 0\n", &d) == 0 && u.k == 2 && u.e[1].id == 7,
	   "a stream of tables: the last one");
	agg_hot_table_free(&u);
	buf[strlen(buf) - 2] = '9';	/* slot 1 -> 9 */
	ok(read_str(&u, buf, &d) == -EINVAL && strstr(d.msg, "t:6:1: row out of place"),
	   "a row out of place names its line (%s)", d.msg);
	ok(read_str(&u, "hot v1 k=2 stripes=2\n0 5 3 0 0\n1 5 2 1 0\n", &d) == -EINVAL &&
	   !strcmp(d.msg, "t:4:1: id 5 has two ranks, 0 and 1"), "an id ranked twice (%s)", d.msg);
	ok(read_str(&u, "hot v2 k=0\n", &d) == -EINVAL && strstr(d.msg, "t:1:5: unsupported"),
	   "other versions are refused (%s)", d.msg);
	ok(read_str(&u, "hot v1 k=1 coverage=2\n", &d) == -EINVAL &&
	   strstr(d.msg, "t:1:12: bad hot table header field 'coverage=2'"),
	   "a bad header value names its column (%s)", d.msg);
	ok(read_str(&u, "hot v1 k=3\n0 5 3 0 0\n", &d) == -EINVAL &&
	   strstr(d.msg, "table has 1 rows, k=3"), "missing rows (%s)", d.msg);
	free(buf);
	agg_hot_table_free(&t);
}

static void test_sketch(void)
{
	struct agg_hot_sketch *s = agg_hot_sketch_new(500);
	struct agg_hot_counts hc = { 0 };
	struct agg_zipf z;
	struct agg_rand r;
	struct agg_hot_entry *top, *etop;
	size_t n, en, under = 0, missing = 0, over_bound = 0;
	const uint64_t N = 200000;

	agg_zipf_init(&z, 100000, 1.1);
	agg_rand_seed(&r, 5);
	for (uint64_t i = 0; i < N; i++) {
		uint64_t id = agg_zipf_draw(&z, &r) * 7919 % 100003;

		agg_hot_sketch_add(s, id);
		agg_hot_counts_add(&hc, id);
	}
	agg_hot_sketch_top(s, 500, &top, &n);
	agg_hot_counts_top(&hc, 500, &etop, &en);
	/* Space-Saving: a count is at least the true one and at most N/counters more;
	 * every id above N/counters is kept */
	for (size_t i = 0; i < n; i++) {
		uint64_t c = agg_hot_counts_get(&hc, top[i].id);

		under += top[i].freq < c;
		over_bound += top[i].freq > c + N / 500;
	}
	for (size_t i = 0; i < en; i++) {
		bool found = false;

		if (etop[i].freq <= N / 500)
			continue;
		for (size_t j = 0; j < n && !found; j++)
			found = top[j].id == etop[i].id;
		missing += !found;
	}
	is_int(under, 0, "Space-Saving never undercounts");
	is_int(over_bound, 0, "and overcounts by at most N/counters");
	is_int(missing, 0, "Space-Saving keeps every id above N/counters");
	ok(top[0].id == etop[0].id && top[1].id == etop[1].id, "the two hottest agree");
	is_int(agg_hot_sketch_total(s), N, "the sketch counts every update");
	ok(agg_hot_sketch_bytes(1 << 20) <= 32 << 20, "1Mi counters fit in 32 MiB (%zu)",
	   agg_hot_sketch_bytes(1 << 20));
	ok(agg_hot_sketch_new(0) == NULL, "no sketch of 0 counters");
	free(top);
	free(etop);
	agg_hot_sketch_free(s);
	agg_hot_counts_free(&hc);
}

/* Every packet at most per_pkt pairs; Alg. 1's own packets repeat no stripe. */
static bool packets_ok(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
		       const size_t *pkt_of, size_t per_pkt, const struct agg_hot_pack_stats *st)
{
	size_t *fill = calloc(st->packets + 1, sizeof(*fill)), conflicts = 0;
	bool good = true;

	for (size_t i = 0; i < n && good; i++) {
		bool clash = false;

		good = pkt_of[i] < st->packets && ++fill[pkt_of[i]] <= per_pkt;
		for (size_t j = 0; j < i; j++)
			clash |= pkt_of[j] == pkt_of[i] &&
				 stripe_of[ranks[j]] == stripe_of[ranks[i]];
		conflicts += clash;
	}
	for (size_t p = 0; p < st->packets && good; p++)
		good = fill[p] > 0;
	free(fill);
	return good && conflicts == st->conflicts;
}

static void test_pack(void)
{
	enum { N = 1000, M = 128, P = 64 };
	uint64_t ranks[N];
	unsigned heat[N], rnd[N], count[M] = { 0 };
	size_t pkt[N];
	struct agg_hot_pack_stats a, b, c;
	struct agg_rand r;
	bool same = true;

	agg_rand_seed(&r, 1);
	for (int i = 0; i < N; i++)	/* a batch of distinct ranks in random order */
		ranks[i] = i;
	for (int i = N - 1; i > 0; i--) {
		int j = agg_rand_below(&r, i + 1);
		uint64_t t = ranks[i];

		ranks[i] = ranks[j];
		ranks[j] = t;
	}
	agg_hot_layout(heat, N, M, false, 0);
	agg_hot_layout(rnd, N, M, true, 7);
	ok(heat[0] == 0 && heat[129] == 1, "heat layout: rank i on stripe i mod m");
	for (int i = 0; i < N; i++)
		count[rnd[i]]++;
	for (int s = 0; s < M; s++)
		same &= count[s] == (unsigned)(N / M + (s < N % M));
	ok(same, "random layout: a permutation of the same slots");
	agg_hot_pack(ranks, N, heat, M, P, true, pkt, &a);
	/* the last packets' free places may all hold a pair's stripe: a few pairs pad */
	ok(a.conflicts < 0.1 * a.packets && a.packets <= (N + P - 1) / P + 1 && a.pairs == N &&
	   a.padded < P, "heat layout + Alg. 1: %zu packets (%zu pairs padded), %zu conflicts",
	   a.packets, a.padded, a.conflicts);
	ok(packets_ok(ranks, N, heat, pkt, P, &a), "Alg. 1's packets are well formed");
	agg_hot_pack(ranks, N, rnd, M, P, false, pkt, &b);
	/* 64 of 128 stripes at random: 64 - 128 (1 - (127/128)^64) = 13.6 per packet */
	ok(b.conflicts > 10 * b.packets && b.conflicts < 17 * b.packets,
	   "random layout in order: %.1f conflicts per packet (13.6 expected)",
	   (double)b.conflicts / b.packets);
	ok(packets_ok(ranks, N, rnd, pkt, P, &b), "sequential packets are well formed");
	agg_hot_pack(ranks, N, rnd, M, P, true, pkt, &c);
	ok(c.conflicts < b.conflicts / 4, "Alg. 1 helps a random layout too (%zu < %zu / 4)",
	   c.conflicts, b.conflicts);
	ok(packets_ok(ranks, N, rnd, pkt, P, &c), "and its packets are well formed");
	/* every pair on one stripe: Alg. 1 puts one pair in each of its 3 packets */
	for (int i = 0; i < 10; i++)
		rnd[ranks[i]] = 0;
	agg_hot_pack(ranks, 10, rnd, M, 4, true, pkt, &c);
	ok(c.padded == 7 && c.packets == 3 + 2 && c.conflicts == 3 + 2 &&
	   packets_ok(ranks, 10, rnd, pkt, 4, &c),
	   "one stripe: 3 packets of 1, 7 pairs padded into packets of 4 and 3 (3 + 2 conflicts)");
	is_int(agg_hot_pack(ranks, 10, rnd, M, 0, true, NULL, &c), -EINVAL, "0 pairs per packet");
}

static void test_batch(void)
{
	uint64_t ids[] = { 40, 41, 30, 99, 30, 10, 41, 99, 12 }, *r;
	uint64_t hot[] = { 10, 20, 30, 40, 41 };
	struct agg_hot_table t = table(hot, 5);
	struct agg_hot_index *x;
	size_t n, cold;

	agg_hot_index_new(&x, &t);
	agg_hot_batch_ranks(x, ids, 9, &r, &n, &cold);
	ok(n == 4 && r[0] == 0 && r[1] == 2 && r[2] == 3 && r[3] == 4 && cold == 2,
	   "a batch's hot ranks once each, in key order; 2 cold ids");
	free(r);
	agg_hot_index_free(x);
	agg_hot_table_free(&t);
}

static void test_zipf(void)
{
	struct agg_zipf z;
	struct agg_rand r;
	uint64_t c[4] = { 0 }, bad = 0;

	agg_zipf_init(&z, 1000000, 1.1);
	agg_rand_seed(&r, 9);
	for (int i = 0; i < 1000000; i++) {
		uint64_t k = agg_zipf_draw(&z, &r);

		bad += k < 1 || k > 1000000;
		if (k <= 3)
			c[k]++;
	}
	is_int(bad, 0, "draws stay in 1..n");
	is_dbl((double)c[1] / c[2], 2.1435, 0.08, "P(1)/P(2) = 2^1.1");
	is_dbl((double)c[1] / c[3], 3.3483, 0.15, "P(1)/P(3) = 3^1.1");
	/* H(1e6, 1.1) ~ 8.0720: rank 1 has ~12.4% of the mass */
	is_dbl(c[1] / 1e6, 1 / 8.0720, 0.003, "P(1) = 1 / H(n, s)");
}

static int next(struct agg_hot_log *l, uint64_t **ids, size_t *n, size_t *cap,
		uint64_t *iter, struct agg_diag *d)
{
	return agg_hot_log_next(l, ids, n, cap, iter, d);
}

static void test_log(void)
{
	const char *text = "0 5 6 7\n# comment\n\n1 8 # eight\n9\n 18446744073709551614\n"
			   "2 10 x1\n";
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct agg_hot_log l;
	struct agg_diag d;
	uint64_t *ids = NULL, iter, bin[] = { 1, 2, AGG_HOT_ITER_END, 3, AGG_HOT_ITER_END };
	size_t n, cap = 0, biglen = 3 << 20;
	char *big = malloc(biglen + 16);

	agg_hot_log_open(&l, f, "log", false);
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 3 && iter == 0 && ids[0] == 5 &&
	   ids[2] == 7, "ITER ID ID ID");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && iter == 1 && ids[0] == 8,
	   "comments and blank lines skipped");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && iter == 1 && ids[0] == 9,
	   "one id per line keeps the iteration");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && ids[0] == UINT64_MAX - 1,
	   "the largest id");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == -EINVAL &&
	   !strcmp(d.msg, "log:7:6: expected an id (unsigned integer)"),
	   "a bad id names line and column (%s)", d.msg);
	agg_hot_log_close(&l);
	fclose(f);

	text = "1 18446744073709551615\n";
	f = fmemopen((void *)text, strlen(text), "r");
	agg_hot_log_open(&l, f, "log", false);
	ok(next(&l, &ids, &n, &cap, &iter, &d) == -EINVAL && strstr(d.msg, "log:1:3: bad id"),
	   "2^64-1 is reserved (%s)", d.msg);
	agg_hot_log_close(&l);
	fclose(f);

	/* a line longer than the read block, then one without a newline */
	memset(big, ' ', biglen);
	memcpy(big, "4 1", 3);
	memcpy(big + biglen - 2, "2\n", 2);
	memcpy(big + biglen, "3", 2);
	f = fmemopen(big, biglen + 1, "r");
	agg_hot_log_open(&l, f, "log", false);
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 2 && iter == 4 && ids[1] == 2,
	   "a 3 MiB line");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && ids[0] == 3 &&
	   next(&l, &ids, &n, &cap, &iter, &d) == 0, "a last line without newline, then the end");
	agg_hot_log_close(&l);
	fclose(f);

	for (int i = 0; i < 5; i++)
		bin[i] = htole64(bin[i]);
	f = fmemopen(bin, sizeof(bin), "r");
	agg_hot_log_open(&l, f, "log.bin", true);
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 2 && iter == 0 && ids[1] == 2,
	   "binary: the ids of iteration 0");
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && iter == 1 && ids[0] == 3 &&
	   next(&l, &ids, &n, &cap, &iter, &d) == 0, "binary: iteration 1, then the end");
	agg_hot_log_close(&l);
	fclose(f);
	f = fmemopen(bin, 19, "r");
	agg_hot_log_open(&l, f, "log.bin", true);
	ok(next(&l, &ids, &n, &cap, &iter, &d) == 1 &&
	   next(&l, &ids, &n, &cap, &iter, &d) == -EINVAL &&
	   strstr(d.msg, "log.bin: 3 trailing bytes after the last whole id at offset 16"),
	   "binary: a torn id (%s)", d.msg);
	agg_hot_log_close(&l);
	fclose(f);
	free(ids);
	free(big);
}

static int count_emit(const struct agg_hot_table *t, void *arg)
{
	struct agg_hot_table *last = arg;

	last->iter++;		/* tables emitted */
	last->k = t->k;
	free(last->e);
	last->e = malloc((t->k + 1) * sizeof(*t->e));
	memcpy(last->e, t->e, t->k * sizeof(*t->e));
	return 0;
}

static int identify(const char *buf, size_t len, const struct agg_hot_opts *o, bool binary,
		    struct agg_hot_table *out, struct agg_hot_ident_stats *st)
{
	FILE *f = fmemopen((void *)buf, len, "r");
	struct agg_hot_log l;
	struct agg_diag d;
	int err;

	memset(out, 0, sizeof(*out));
	agg_hot_log_open(&l, f, "gen", binary);
	err = agg_hot_identify(&l, o, count_emit, out, st, &d);
	agg_hot_log_close(&l);
	fclose(f);
	return err;
}

static void test_gen_identify(void)
{
	struct agg_hot_gen_opts g = { .ids = 10000, .iters = 20, .batch = 100,
				      .per_example = 10, .zipf = 1.1, .seed = 3 };
	struct agg_hot_opts o = { .coverage = 0.5, .budget = 1 << 20, .stripes = 8 };
	struct agg_hot_ident_stats st;
	struct agg_hot_table t, tb;
	char *txt = NULL, *bin = NULL;
	size_t tlen = 0, blen = 0;
	bool lead;
	FILE *f;

	f = open_memstream(&txt, &tlen);
	is_int(agg_hot_gen(f, &g), 0, "gen: a text log");
	fclose(f);
	g.binary = true;
	f = open_memstream(&bin, &blen);
	agg_hot_gen(f, &g);
	fclose(f);
	is_int(blen, (20 * 100 * 10 + 20) * 8, "gen: a binary log of the same ids");
	ok(identify(txt, tlen, &o, false, &t, &st) == 0 && st.updates == 20000 && st.iters == 20 &&
	   t.iter == 1, "20000 updates in 20 iterations: one table");
	ok(t.k > 0 && t.e[0].id == agg_hot_gen_id(&g, 0, 0) &&
	   t.e[1].id == agg_hot_gen_id(&g, 1, 0), "the hottest ids are Zipf ranks 0 and 1");
	identify(bin, blen, &o, true, &tb, &st);
	ok(tb.k == t.k && !memcmp(tb.e, t.e, t.k * sizeof(*t.e)), "binary and text agree");
	agg_hot_table_free(&tb);

	o.online = 5;
	o.tau = 1;
	identify(txt, tlen, &o, false, &tb, &st);
	ok(st.tables == 4 && st.emitted == 1, "online, tau 1: 4 tables made, the first printed");
	agg_hot_table_free(&tb);
	o.tau = 0;
	identify(txt, tlen, &o, false, &tb, &st);
	ok(st.tables == 4 && st.emitted == 4, "online, tau 0: every table that moved (%llu)",
	   (unsigned long long)st.emitted);
	agg_hot_table_free(&tb);
	o.online = 0;
	o.sample = 0.5;
	identify(txt, tlen, &o, false, &tb, &st);
	ok(st.counted > 8000 && st.counted < 12000 && st.counted % 10 == 0,
	   "sampling half the examples counts whole examples (%llu)",
	   (unsigned long long)st.counted);
	agg_hot_table_free(&tb);
	o.sample = 0;
	o.sketch = 1000;
	identify(txt, tlen, &o, false, &tb, &st);
	ok(tb.k == t.k && tb.e[0].id == t.e[0].id, "the sketch finds the same hottest ids");
	agg_hot_table_free(&tb);
	agg_hot_table_free(&t);
	free(txt);

	/* a hot set that drifts: online tables keep coming */
	g.binary = false;
	g.drift = 50;
	txt = NULL;
	f = open_memstream(&txt, &tlen);
	agg_hot_gen(f, &g);
	fclose(f);
	ok(agg_hot_gen_id(&g, 0, 1) == agg_hot_gen_id(&g, 50, 0), "drift 50: rank 0 of "
	   "iteration 1 is rank 50 of iteration 0");
	o = (struct agg_hot_opts){ .coverage = 0.5, .budget = 1 << 20, .stripes = 8,
				   .online = 5, .tau = 0.3 };
	identify(txt, tlen, &o, false, &tb, &st);
	ok(st.emitted < 4, "online, drifting hot set, tau 0.3, counts since the start: "
	   "%llu of 4 tables printed", (unsigned long long)st.emitted);
	agg_hot_table_free(&tb);
	o.window = true;
	identify(txt, tlen, &o, false, &tb, &st);
	lead = false;
	for (int it = 15; it < 20; it++)
		lead |= tb.e[0].id == agg_hot_gen_id(&g, 0, it);
	ok(st.emitted == 4 && lead, "counting each 5 iterations afresh: all 4 printed, the "
	   "last led by a rank 0 of iterations 15-19");
	agg_hot_table_free(&tb);
	free(txt);
	free(bin);
}

int main(void)
{
	test_principle1();
	test_counts();
	test_compare();
	test_table_io();
	test_sketch();
	test_pack();
	test_batch();
	test_zipf();
	test_log();
	test_gen_identify();
	return done_testing();
}
