// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/ops/sparse.c (the formats, the sum) and of
 * lib/hot/hotgen.c's sparse gradients (Zipf shape, determinism). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "sparse.h"
#include "tap.h"

static struct agg_diag d;

/* Parse text s; the error message (or "" when it parses). */
static const char *text_err(const char *s)
{
	struct agg_sparse g;
	int err = agg_sparse_parse(&g, s, strlen(s), "g.txt", &d);

	if (!err) {
		agg_sparse_free(&g);
		return "";
	}
	if (g.n || g.id)
		return "error left pairs behind";
	return d.msg;
}

static bool same(const struct agg_sparse *a, const struct agg_sparse *b)
{
	return a->width == b->width && a->n == b->n &&
	       !memcmp(a->id, b->id, a->n * 8) && !memcmp(a->val, b->val, a->n * a->width * 4);
}

static void test_text(void)
{
	struct agg_sparse g;
	const char *t = "# two rows\nwidth 2\n9 1.5 -2\n\n3 0.25 1e-3  # hot\n";

	ok(!agg_sparse_parse(&g, t, strlen(t), "g.txt", &d), "text parses");
	is_int(g.width, 2, "width from the width line");
	is_int(g.n, 2, "two pairs");
	ok(g.id[0] == 3 && g.id[1] == 9, "sorted by id");
	ok(g.val[0] == 0.25f && g.val[1] == 1e-3f && g.val[2] == 1.5f && g.val[3] == -2.0f,
	   "values follow their ids");
	agg_sparse_free(&g);

	t = "5 1\n4 2\n";
	ok(!agg_sparse_parse(&g, t, strlen(t), "g.txt", &d) && g.width == 1,
	   "scalars: the width from the first pair");
	agg_sparse_free(&g);
	ok(!agg_sparse_parse(&g, "width 16\n", 9, "g.txt", &d) && g.width == 16 && g.n == 0,
	   "a width line alone: no pairs, width known");
	agg_sparse_free(&g);

	is_str(text_err("1 2 3\n2 4\n"), "g.txt:2:4: 1 values, want 2 (the first pair's)",
	       "too few values: at the line's end");
	is_str(text_err("width 2\n1 2 3 4\n"), "g.txt:2:7: 3 values, want 2 (the width line)",
	       "too many values: at the first extra one");
	is_str(text_err("1 2\nx7 3\n"), "g.txt:2:1: bad id 'x7' (a whole number)", "bad id");
	is_str(text_err("1 2\n7x 3\n"), "g.txt:2:2: bad id '7x' (a whole number)",
	       "bad id: the column of the bad character");
	is_str(text_err("18446744073709551616 1\n"),
	       "g.txt:1:1: id '18446744073709551616' is beyond 2^64 - 1", "id too large");
	is_str(text_err("1 2\n2   3.5z\n"), "g.txt:2:8: bad value '3.5z' (a decimal number)",
	       "bad value: the column of the bad character");
	is_str(text_err("1 NaN\n"), "g.txt:1:3: bad value 'NaN' (a decimal number)",
	       "NaN is not a value (nan is)");
	t = "1 nan -inf inf -nan 1.4e-45 -1e-39 1e-50\n";
	ok(!agg_sparse_parse(&g, t, strlen(t), "g.txt", &d) && isnan(g.val[0]) &&
	   g.val[1] == -INFINITY && g.val[2] == INFINITY && isnan(g.val[3]) &&
	   signbit(g.val[3]), "nan, inf, -inf, -nan: what %%.9g writes for them");
	ok(g.val[4] == 1.4e-45f && g.val[5] == -1e-39f && g.val[6] == 0,
	   "subnormals are values; below them, 0");
	agg_sparse_free(&g);
	is_str(text_err("1 1e39\n"), "g.txt:1:3: value '1e39' is beyond float32's range",
	       "beyond float32");
	is_str(text_err("3 1\n5 2\n3 4\n"), "g.txt:3:1: id 3 again (first on line 1): an id is one pair",
	       "duplicate id: the second line, naming the first");
	is_str(text_err("7\n"), "g.txt:1:2: id 7 has no values", "an id without values");
	is_str(text_err("1 2\nwidth 1\n"), "g.txt:2:1: 'width' goes before the first pair, once",
	       "width after a pair");
	is_str(text_err("width 0\n"), "g.txt:1:7: bad width '0' (1 to 256)", "width 0");
	is_str(text_err("width 2 3\n"), "g.txt:1:9: want 'width N'", "width with two numbers");
	is_str(text_err("# nothing\n"),
	       "g.txt:2:1: no pairs and no 'width N' line: the width is unknown", "empty");
	{
		static char line[4096];
		int n = snprintf(line, sizeof(line), "1");

		for (int i = 0; i < 257; i++)
			n += snprintf(line + n, sizeof(line) - n, " 1");
		snprintf(line + n, sizeof(line) - n, "\n");
		is_str(text_err(line), "g.txt:1:515: 257 values: the width is at most 256",
		       "more than 256 values");
	}
}

/* A header of the given fields, then len bytes of pairs. */
static size_t bin(uint8_t *buf, const char *magic, uint16_t version, uint16_t width,
		  uint64_t count)
{
	memcpy(buf, magic, 4);
	memcpy(buf + 4, &version, 2);
	memcpy(buf + 6, &width, 2);
	memcpy(buf + 8, &count, 8);
	return 16;
}

static void test_binary(void)
{
	struct agg_sparse a, b, c;
	uint8_t buf[256];
	char *enc;
	size_t len;

	agg_sparse_init(&a, 3);
	agg_sparse_reserve(&a, 4);
	for (int i = 0; i < 4; i++) {
		a.id[i] = (uint64_t)i * 1000003 + (i == 3 ? (1ULL << 40) : 0);
		for (int j = 0; j < 3; j++)
			a.val[i * 3 + j] = (float)((i + 1) * (j - 1)) / 3.0f + 1e-7f * i;
	}
	a.n = 4;
	ok(!agg_sparse_encode(&a, false, &enc, &len), "binary encodes");
	is_int(len, 16 + 4 * (8 + 12), "16-byte header, 20-byte pairs");
	ok(!memcmp(enc, "AGSP\1\0\3\0\4\0\0\0\0\0\0\0", 16), "header: magic, version 1, width 3, count 4 (LE)");
	ok(!agg_sparse_parse(&b, enc, len, "g.bin", &d) && same(&a, &b), "binary round trip: same bits");
	agg_sparse_free(&b);
	/* every error leaves nothing behind */
	ok(agg_sparse_parse(&b, enc, len - 1, "g.bin", &d) == -EINVAL && !b.id, "one byte short");
	is_str(d.msg, "g.bin: truncated: the header says 4 pairs of 20 bytes, 79 bytes follow it",
	       "truncated: named, with the sizes");
	enc[len] = 0;
	ok(agg_sparse_parse(&b, enc, 10, "g.bin", &d) == -EINVAL, "a header cut short");
	is_str(d.msg, "g.bin: truncated: 10 bytes, the header alone is 16", "short header named");
	free(enc);

	len = bin(buf, "AGSP", 1, 1, 1);
	memset(buf + len, 0, 12 + 12);
	ok(agg_sparse_parse(&b, buf, len + 24, "g.bin", &d) == -EINVAL, "bytes after the last pair");
	is_str(d.msg, "g.bin: bytes after the last pair: the header says 1 pairs of 12 bytes, "
	       "24 bytes follow it", "extra bytes named");
	len = bin(buf, "AGSP", 2, 1, 0);
	ok(agg_sparse_parse(&b, buf, len, "g.bin", &d) == -EINVAL, "version 2");
	is_str(d.msg, "g.bin: byte 4: version 2, this agg reads version 1", "version named");
	len = bin(buf, "AGSP", 1, 0, 0);
	ok(agg_sparse_parse(&b, buf, len, "g.bin", &d) == -EINVAL, "width 0");
	is_str(d.msg, "g.bin: byte 6: width 0 (1 to 256)", "width named");
	len = bin(buf, "AGSP", 1, 1, 2);
	{
		uint64_t id = 5;
		float v = 1;

		memcpy(buf + 16, &id, 8);
		memcpy(buf + 24, &v, 4);
		memcpy(buf + 28, &id, 8);
		memcpy(buf + 36, &v, 4);
	}
	ok(agg_sparse_parse(&b, buf, 40, "g.bin", &d) == -EINVAL && !b.id, "duplicate id");
	is_str(d.msg, "g.bin: byte 28: pair 1 has id 5 after 5: ids must increase",
	       "duplicate named by byte and pair");
	memcpy(buf, "AG\0P", 4);
	ok(agg_sparse_parse(&b, buf, 40, "g.bin", &d) == -EINVAL, "bad magic");
	is_str(d.msg, "g.bin: neither a binary sparse gradient (no magic 'AGSP' at byte 0) nor "
	       "text (NUL bytes)", "bad magic named");

	ok(!agg_sparse_encode(&a, true, &enc, &len), "text encodes");
	ok(!agg_sparse_parse(&c, enc, len, "g.txt", &d) && same(&a, &c),
	   "text round trip: same bits (%%.9g)");
	free(enc);
	agg_sparse_free(&c);
	agg_sparse_free(&a);

	agg_sparse_init(&a, 4);
	ok(!agg_sparse_encode(&a, false, &enc, &len) && len == 16 &&
	   !agg_sparse_parse(&b, enc, len, "e.bin", &d) && b.n == 0 && b.width == 4,
	   "an empty gradient keeps its width (binary)");
	free(enc);
	agg_sparse_free(&b);
	ok(!agg_sparse_encode(&a, true, &enc, &len) &&
	   !agg_sparse_parse(&b, enc, len, "e.txt", &d) && b.n == 0 && b.width == 4,
	   "an empty gradient keeps its width (text)");
	free(enc);
	agg_sparse_free(&b);
}

static void test_sum(void)
{
	uint64_t over;
	struct agg_sparse a, b, e, r;
	struct agg_sparse_sum s, s2;
	const struct agg_sparse *in[3] = { &a, &b, &e }, *rev[3] = { &e, &b, &a };
	double err;
	char why[256];

	agg_sparse_parse(&a, "1 1 2\n4 1e8 1\n", 14, "a", &d);
	agg_sparse_parse(&b, "4 1 -1\n2 0.5 0.5\n", 17, "b", &d);
	agg_sparse_init(&e, 2);
	ok(!agg_sparse_sum(in, 3, &s), "sum of three (one empty)");
	is_int(s.n, 3, "the union of the ids");
	ok(s.id[0] == 1 && s.id[1] == 2 && s.id[2] == 4, "in id order");
	ok(s.val[4] == 1e8 + 1 && s.val[5] == 0 && s.val[2] == 0.5, "float64 sums: 1e8 + 1 is kept");
	ok(!agg_sparse_sum(rev, 3, &s2) && !memcmp(s.val, s2.val, 6 * 8),
	   "another input order, the same bits here");
	ok(!agg_sparse_sum_round(&s, &r, &over) && r.val[4] == 1e8f && !over, "rounded to float32");
	ok(!agg_sparse_check(&r, &s, 1e-6, &err, why, sizeof(why)), "within 1e-6 of the largest");
	r.val[1] += 1000;
	ok(agg_sparse_check(&r, &s, 1e-6, &err, why, sizeof(why)) == -EINVAL, "a wrong value found");
	diag("%s", why);
	r.val[1] -= 1000;
	r.id[1] = 3;
	ok(agg_sparse_check(&r, &s, 1e-6, &err, why, sizeof(why)) == -EINVAL &&
	   strstr(why, "pair 1: id 3"), "a wrong id found");
	b.width = 3;
	ok(agg_sparse_sum(in, 3, &s2) == -EINVAL, "widths must agree");
	agg_sparse_free(&r);
	s.val[0] = 3.5e38;
	s.val[1] = -1e39;
	ok(!agg_sparse_sum_round(&s, &r, &over) && isnan(r.val[0]) && isnan(r.val[1]) &&
	   over == 2 && r.val[4] == 1e8f, "beyond float32's range: NaN (not Inf), counted");
	agg_sparse_free(&a);
	agg_sparse_free(&b);
	agg_sparse_free(&r);
	agg_sparse_sum_free(&s);
	agg_sparse_sum_free(&s2);
}

static void test_gen(void)
{
	struct agg_hot_gen_opts o = { .ids = 100000, .zipf = 1.1, .seed = 5, .width = 4,
				      .touch = 0.02 };
	struct agg_sparse w[8], again;
	const struct agg_sparse *in[8];
	struct agg_sparse_sum u;
	uint64_t hot0 = agg_hot_gen_id(&o, 0, 3), cold = agg_hot_gen_id(&o, 99999, 3);
	int with_hot = 0, with_r10 = 0, with_tail = 0;

	o.iter = 3;
	for (int k = 0; k < 8; k++) {
		o.worker = k;
		in[k] = &w[k];
		ok(!agg_hot_gen_sparse(&o, &w[k]), "worker %d generates", k);
		is_int(w[k].n, 2000, "worker %d touches 2%% of 100000 rows", k);
		for (uint64_t i = 1; i < w[k].n; i++)
			if (w[k].id[i] <= w[k].id[i - 1] || w[k].id[i] >= o.ids) {
				ok(0, "ids increase, below --ids");
				break;
			}
		for (uint64_t i = 0; i < w[k].n; i++) {
			with_hot += w[k].id[i] == hot0;
			with_r10 += w[k].id[i] == agg_hot_gen_id(&o, 9, 3);
			with_tail += w[k].id[i] == cold;
		}
	}
	ok(!same(&w[0], &w[1]), "workers draw from streams of their own");
	is_int(with_hot, 8, "Zipf: the top rank's row is in every worker's gradient");
	is_int(with_r10, 8, "and rank 10's");
	is_int(with_tail, 0, "the last rank's in none");
	ok(!agg_sparse_sum(in, 8, &u), "the union of 8 workers");
	diag("union %llu rows of 8 x 2000", (unsigned long long)u.n);
	ok(u.n > 2000 && u.n < 8 * 2000 * 0.8, "Zipf: the workers' rows overlap (hot rows shared)");
	o.worker = 3;
	ok(!agg_hot_gen_sparse(&o, &again) && same(&again, &w[3]), "the same options, the same bits");
	agg_sparse_free(&again);
	o.iter = 4;
	ok(!agg_hot_gen_sparse(&o, &again) && !same(&again, &w[3]), "another iteration, other bits");
	agg_sparse_free(&again);
	o.seed = 6;
	o.iter = 3;
	ok(!agg_hot_gen_sparse(&o, &again) && !same(&again, &w[3]), "another seed, other bits");
	agg_sparse_free(&again);
	o.zipf = 4;
	ok(agg_hot_gen_sparse(&o, &again) == -ERANGE && !again.id,
	   "Zipf 4 cannot touch 2%% of the rows: -ERANGE");
	o.zipf = 1.1;
	o.touch = 0;
	ok(agg_hot_gen_sparse(&o, &again) == -EINVAL, "touch 0: -EINVAL");
	for (int k = 0; k < 8; k++)
		agg_sparse_free(&w[k]);
	agg_sparse_sum_free(&u);
}

int main(void)
{
	test_text();
	test_binary();
	test_sum();
	test_gen();
	return done_testing();
}
