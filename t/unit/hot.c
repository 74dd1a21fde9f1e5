// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/hot: Principle 1, comparisons, Space-Saving, Alg. 1, Zipf. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "tap.h"

static void test_principle1(void)
{
	struct agg_hot_entry e[] = { { 7, 50 }, { 3, 30 }, { 9, 10 }, { 1, 5 }, { 2, 5 } };
	struct agg_hot_k k;

	agg_hot_choose_k(e, 5, 100, 0.5, 1 << 20, &k);
	ok(k.k == 1 && !k.budget_bound && k.achieved == 0.5, "p=0.5: k=1 (50 of 100)");
	agg_hot_choose_k(e, 5, 100, 0.8, 1 << 20, &k);
	ok(k.k == 2 && k.achieved == 0.8, "p=0.8: k=2 (80 of 100)");
	agg_hot_choose_k(e, 5, 100, 0.85, 1 << 20, &k);
	ok(k.k == 3 && k.k_coverage == 3, "p=0.85: k=3 (90 of 100)");
	agg_hot_choose_k(e, 5, 100, 0.85, 2 * AGG_HOT_SLOT_BYTES, &k);
	ok(k.k == 2 && k.budget_bound && k.k_budget == 2 && k.achieved == 0.8,
	   "budget of two slots: k=2, budget-bound, covering 0.8");
	agg_hot_choose_k(e, 5, 100, 0.85, 2 * AGG_HOT_SLOT_BYTES + 15, &k);
	is_int(k.k_budget, 2, "budget rounds down to whole %d-byte slots", AGG_HOT_SLOT_BYTES);
	/* the list may stop at the budget: p out of reach is still budget-bound */
	agg_hot_choose_k(e, 2, 100, 0.95, 2 * AGG_HOT_SLOT_BYTES, &k);
	ok(k.k == 2 && k.budget_bound, "a list cut at the budget is budget-bound");
	agg_hot_choose_k(e, 5, 100, 1.0, 1 << 20, &k);
	is_int(k.k, 5, "p=1: every parameter");
}

static struct agg_hot_table table(const uint64_t *ids, size_t n)
{
	struct agg_hot_table t = { .k = n, .stripes = 4 };

	t.e = calloc(n, sizeof(*t.e));
	for (size_t i = 0; i < n; i++)
		t.e[i] = (struct agg_hot_entry){ ids[i], 100 - i };
	return t;
}

static void test_compare(void)
{
	uint64_t a[] = { 1, 2, 3, 4 }, rev[] = { 4, 3, 2, 1 }, sw[] = { 2, 1, 3, 4 };
	uint64_t half[] = { 3, 4, 5, 6 };
	struct agg_hot_table ta = table(a, 4), tr = table(rev, 4), ts = table(sw, 4);
	struct agg_hot_table th = table(half, 4);
	size_t c;

	is_dbl(agg_hot_kendall(&ta, &ta, &c), 0, 0, "same order: distance 0");
	is_dbl(agg_hot_kendall(&ta, &tr, &c), 1, 0, "reversed: distance 1");
	is_dbl(agg_hot_kendall(&ta, &ts, &c), 1.0 / 6, 1e-12, "one swap of six pairs: 1/6");
	is_dbl(agg_hot_precision(&ta, &th), 0.5, 0, "precision |A n B| / |A| = 2/4");
	agg_hot_kendall(&ta, &th, &c);
	is_int(c, 2, "two ids in common");
	agg_hot_table_free(&ta);
	agg_hot_table_free(&tr);
	agg_hot_table_free(&ts);
	agg_hot_table_free(&th);
}

static void test_table_io(void)
{
	uint64_t ids[] = { 42, 7, 99, 3, 1000000 };
	struct agg_hot_table t = table(ids, 5), u;
	struct agg_diag d;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	t.coverage = 0.5;
	t.budget = 1024;
	agg_hot_table_write(&t, f);
	fclose(f);
	f = fmemopen(buf, len, "r");
	is_int(agg_hot_table_read(&u, f, "t", &d), 0, "a written table reads back");
	fclose(f);
	ok(u.k == 5 && u.stripes == 4 && u.e[4].id == 1000000 && u.e[1].freq == 99,
	   "rows and header survive");
	ok(strstr(buf, "\n4 1000000 96 0 1\n") != NULL, "rank 4 of 4 stripes: stripe 0, slot 1");
	agg_hot_table_free(&u);
	buf[strlen(buf) - 2] = '9';	/* slot 1 -> 9 */
	f = fmemopen(buf, len, "r");
	ok(agg_hot_table_read(&u, f, "t", &d) == -EINVAL && strstr(d.msg, "t:6:1:"),
	   "a row out of place is an error naming its line (%s)", d.msg);
	fclose(f);
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
	size_t n, en, under = 0, missing = 0;
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
	/* Space-Saving: every tracked count is at least the true count, and
	 * every id more frequent than N/counters is tracked. */
	for (size_t i = 0; i < n; i++)
		under += top[i].freq < hc.c[top[i].id];
	for (size_t i = 0; i < en; i++) {
		bool found = false;

		if (etop[i].freq <= N / 500)
			continue;
		for (size_t j = 0; j < n && !found; j++)
			found = top[j].id == etop[i].id;
		missing += !found;
	}
	is_int(under, 0, "Space-Saving never undercounts");
	is_int(missing, 0, "Space-Saving keeps every id above N/counters");
	ok(top[0].id == etop[0].id && top[1].id == etop[1].id, "the two hottest agree");
	is_int(agg_hot_sketch_total(s), N, "the sketch counts every update");
	free(top);
	free(etop);
	agg_hot_sketch_free(s);
	agg_hot_counts_free(&hc);
}

static void test_pack(void)
{
	enum { N = 1000, M = 128, P = 64 };
	uint64_t ranks[N];
	unsigned heat[N], rnd[N];
	struct agg_hot_pack_stats a, b, c;
	struct agg_rand r;

	agg_rand_seed(&r, 1);
	for (int i = 0; i < N; i++) {
		ranks[i] = i;
		heat[i] = agg_hot_stripe(i, M);
		rnd[i] = agg_rand_below(&r, M);
	}
	agg_hot_pack(ranks, N, heat, M, P, true, &a);
	agg_hot_pack(ranks, N, rnd, M, P, false, &b);
	agg_hot_pack(ranks, N, rnd, M, P, true, &c);
	ok(a.conflicts == 0 && a.packets == (N + P - 1) / P && a.pairs == N,
	   "heat layout + Alg. 1: %zu packets, no conflict", a.packets);
	ok(b.conflicts > 100, "random layout, in order: %zu conflicts", b.conflicts);
	ok(c.conflicts < b.conflicts, "Alg. 1 helps a random layout too (%zu < %zu)",
	   c.conflicts, b.conflicts);
	/* every stripe the same: Alg. 1 can put one pair per packet */
	for (int i = 0; i < N; i++)
		rnd[i] = 0;
	agg_hot_pack(ranks, 10, rnd, M, 4, true, &c);
	ok(c.overflow == 7 && c.packets == 3 + 2 && c.conflicts == 3 + 2,
	   "one stripe: 3 packets of 1, 7 pairs padded into packets of 4 and 3 with 3 + 2 conflicts");
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

static void test_log(void)
{
	const char *text = "0 5 6 7\n# comment\n\n1 8\n9\n2 10 x1\n";
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct agg_hot_log l;
	struct agg_diag d;
	uint64_t *ids = NULL, iter;
	size_t n, cap = 0;

	agg_hot_log_open(&l, f, "log", false);
	ok(agg_hot_log_next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 3 && iter == 0 &&
	   ids[2] == 7, "ITER ID ID ID");
	ok(agg_hot_log_next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && iter == 1 &&
	   ids[0] == 8, "comments and blank lines skipped");
	ok(agg_hot_log_next(&l, &ids, &n, &cap, &iter, &d) == 1 && n == 1 && iter == 1 &&
	   ids[0] == 9, "one id per line keeps the iteration");
	ok(agg_hot_log_next(&l, &ids, &n, &cap, &iter, &d) == -EINVAL &&
	   !strcmp(d.msg, "log:6:6: expected an id (unsigned integer)"),
	   "a bad id names line and column (%s)", d.msg);
	agg_hot_log_close(&l);
	fclose(f);
	free(ids);
}

int main(void)
{
	test_principle1();
	test_compare();
	test_table_io();
	test_sketch();
	test_pack();
	test_zipf();
	test_log();
	return done_testing();
}
