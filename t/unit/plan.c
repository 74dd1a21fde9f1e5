// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of the hosts and plan parsers and the plan writer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "plan.h"
#include "tap.h"
#include "tree.h"

static int read_hosts(const char *text, struct agg_hosts *h, struct agg_diag *d)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int err = agg_hosts_read(h, f, "h.txt", d);

	fclose(f);
	return err;
}

static const char *good =
	"# name address attrs\n"
	"ps0 10.90.0.100 bw=40 cpu=44 role=ps\n"
	"\n"
	"w0  10.90.0.1 bw=10 cpu=8 rack=r1 pod=p1   # comment\n"
	"w1\t10.90.0.2 bw=12.5 rack=r1 pod=p1 mac=02:00:00:00:00:01 dev=eth0\n"
	"w2 10.90.0.3 bw=10 rack=r2 pod=p1 role=worker\n"
	"link w0 w2\n";

static void test_hosts_good(void)
{
	struct agg_hosts h;
	struct agg_diag d;

	is_int(read_hosts(good, &h, &d), 0, "a valid hosts file parses");
	is_int(h.n, 4, "four hosts");
	is_int(h.nlinks, 1, "one link");
	ok(h.host[0].role == AGG_ROLE_PS && h.host[0].cpu == 44, "role=ps and cpu");
	is_dbl(h.host[2].bw, 12.5, 0, "decimal bandwidth");
	is_str(h.host[2].dev, "eth0", "dev=");
	ok(h.host[2].has_mac && h.host[2].mac[5] == 1, "mac=");
	is_str(h.host[1].rack, "r1", "rack=");
	agg_hosts_free(&h);
}

static void test_hosts_bad(void)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1 colour=red\n",
		  "h.txt:2:18: unknown attribute in 'colour=red'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=ten\n",
		  "h.txt:2:16: not a decimal number in 'bw=ten'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=-3\n",
		  "h.txt:2:16: must be positive in 'bw=-3'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=0\n",
		  "h.txt:2:16: must be positive in 'bw=0'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1e400\n",
		  "h.txt:2:16: not a decimal number in 'bw=1e400'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=10x\n",
		  "h.txt:2:18: not a decimal number in 'bw=10x'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1\nw 10.90.0.3 bw=1\n",
		  "h.txt:3:1: duplicate host name 'w' (first on line 2)" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.1 bw=1\n",
		  "h.txt:2:3: duplicate address 10.90.0.1 (first on line 1, host 'ps')" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.256 bw=1\n",
		  "h.txt:2:3: bad IPv4 address '10.90.0.256'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 127.0.0.1 bw=1\n",
		  "h.txt:2:3: address '127.0.0.1' is not a unicast host address" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2\n",
		  "h.txt:2:12: host 'w' has no bw= (available Gbit/s)" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw\n", "h.txt:2:2: missing address after 'w'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1 bw=2\n",
		  "h.txt:2:18: attribute 'bw' given twice" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1\nlink w x\n",
		  "h.txt:3:8: unknown host 'x' in link" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1\nlink w ps\n",
		  "h.txt:3:8: links join workers; 'ps' is a parameter server" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1\nlink w\n",
		  "h.txt:3:7: expected 'link NAME NAME'" },
		{ "ps 10.90.0.1 bw=1 role=ps\n", "h.txt:2:1: no workers" },
		{ "ps 10.90.0.1 bw=1 role=boss\n",
		  "h.txt:1:24: role must be 'ps' or 'worker' in 'role=boss'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1 mac=02:00:00:00:00\n",
		  "h.txt:2:22: mac must be six hex bytes, aa:bb:cc:dd:ee:ff in 'mac=02:00:00:00:00'" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw/1 10.90.0.2 bw=1\n",
		  "h.txt:2:1: bad host name 'w/1' (letters, digits, '_', '.', '-'; at most 31)" },
		{ "ps 10.90.0.1 bw=1 role=ps\nw 10.90.0.2 bw=1 cpu=\n",
		  "h.txt:2:22: not a decimal number in 'cpu='" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct agg_hosts h;
		struct agg_diag d = { "" };
		int err = read_hosts(cases[i].text, &h, &d);

		if (!ok(err == -EINVAL && !strcmp(d.msg, cases[i].want),
			"rejects: %s", cases[i].want))
			diag("  got %d '%s'", err, d.msg);
	}
}

/* A parameter server is the scheme's to require (aleph, ps), not the file's. */
static void test_hosts_scheme(void)
{
	struct agg_hosts h;
	struct agg_diag d = { "" };

	ok(!read_hosts("w 10.90.0.2 bw=1\n", &h, &d), "a hosts file without a PS reads");
	is_int(agg_hosts_check_scheme(&h, false, &d), 0, "rat needs no PS");
	ok(agg_hosts_check_scheme(&h, true, &d) == -EINVAL &&
	   !strcmp(d.msg, "h.txt:2:1: no parameter server: mark one host role=ps"),
	   "aleph and ps: no parameter server, after the last line (%s)", d.msg);
	agg_hosts_free(&h);
	ok(!read_hosts("# nothing\n", &h, &d), "a hosts file without hosts reads");
	ok(agg_hosts_check_scheme(&h, false, &d) == -EINVAL &&
	   !strcmp(d.msg, "h.txt:2:1: no workers"), "rat: no workers (%s)", d.msg);
	ok(agg_hosts_check_scheme(&h, true, &d) == -EINVAL &&
	   !strcmp(d.msg, "h.txt:2:1: no parameter server: mark one host role=ps"),
	   "aleph: no parameter server first (%s)", d.msg);
	agg_hosts_free(&h);
}

static void test_plan_roundtrip(void)
{
	enum agg_scheme schemes[] = { AGG_SCHEME_ALEPH, AGG_SCHEME_RAT, AGG_SCHEME_PS };
	struct agg_hosts h;
	struct agg_diag d;

	read_hosts("ps0 10.90.0.100 bw=40 role=ps cpu=4\nps1 10.90.0.101 bw=12.5 role=ps\n"
		   "a 10.90.0.1 bw=30 rack=r1 pod=p1 mac=02:00:00:00:00:0a dev=veth0\n"
		   "b 10.90.0.2 bw=20 rack=r1 pod=p1\nc 10.90.0.3 bw=10 rack=r2 pod=p1\n"
		   "d 10.90.0.4 bw=10 rack=r2 pod=p1\ne 10.90.0.5 bw=10.25 rack=r3 pod=p2\n",
		   &h, &d);
	for (size_t s = 0; s < 3; s++) {
		struct agg_plan p, q;
		struct agg_build_info info;
		char *a, *b;
		FILE *f;
		int err;

		agg_plan_init(&p);
		p.scheme = schemes[s];
		p.seed = 7;
		p.token = 0xfeedULL;
		agg_tree_build(&p, &h, schemes[s] == AGG_SCHEME_RAT ? 3 : 0, &info);
		a = agg_plan_to_text(&p);
		f = fmemopen(a, strlen(a), "r");
		err = agg_plan_read(&q, f, "p", &d);
		fclose(f);
		if (!ok(!err, "%s plan reads back", agg_scheme_name(schemes[s])))
			diag("%s\n%s", d.msg, a);
		if (err)
			continue;
		b = agg_plan_to_text(&q);
		is_str(b, a, "%s plan round-trips exactly", agg_scheme_name(schemes[s]));
		ok(q.ntrees == p.ntrees && q.token == p.token && q.seed == 7 &&
		   q.period == p.period && !memcmp(q.seg_map, p.seg_map, p.period * 2),
		   "%s plan: header, trees and segment map survive", agg_scheme_name(schemes[s]));
		free(a);
		free(b);
		agg_plan_free(&p);
		agg_plan_free(&q);
	}
	agg_hosts_free(&h);
}

static void test_plan_bad(void)
{
	static const char *hdr = "plan v1 job=7 port=9999 scheme=ps seed=1 segment=128\n"
				 "node ps0 10.90.0.100 bw=40 role=ps\nnode w0 10.90.0.1 bw=10\n";
	static const struct { const char *body, *want; } cases[] = {
		{ "tree 0 root=ps0 weight=1\nedge 0 w0 ps9\n", "p:5:11: unknown node 'ps9'" },
		{ "tree 1 root=ps0 weight=1\n", "p:4:6: tree ids count up from 0: expected 0" },
		{ "tree 0 root=ps0 weight=0\n", "p:4:24: weight must be 1 to 1024: 'weight=0'" },
		{ "tree 0 root=ps0 weight=1\nedge 1 w0 ps0\n",
		  "p:5:6: no tree '1' declared before this edge" },
		{ "tree 0 root=ps0 weight=1\nedge 0 w0 w0\n", "p:5:11: edge from 'w0' to itself" },
		{ "tree 0 root=ps0 weight=1\nfoo\n", "p:5:1: unknown line 'foo' (node, tree or edge)" },
		{ "tree 0 root=ps0 weight=1\nnode w1 10.90.0.2 bw=1\n",
		  "p:5:1: node lines must come before tree lines" },
		{ "node w0 10.90.0.9 bw=1\n", "p:4:6: duplicate host name 'w0' (first on line 3)" },
		{ "", "p:4:1: plan has no tree" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[1024];
		struct agg_plan p;
		struct agg_diag d = { "" };
		FILE *f;
		int err;

		snprintf(text, sizeof(text), "%s%s", hdr, cases[i].body);
		f = fmemopen(text, strlen(text), "r");
		err = agg_plan_read(&p, f, "p", &d);
		fclose(f);
		if (!ok(err == -EINVAL && !strcmp(d.msg, cases[i].want), "plan rejects: %s",
			cases[i].want))
			diag("  got %d '%s'", err, d.msg);
		if (!err)
			agg_plan_free(&p);
	}
	{
		static const struct { const char *text, *want; } hc[] = {
			{ "plan v2\n", "p:1:6: unsupported plan version 'v2' (this agg reads v1)" },
			{ "plan v1 colour=red\n", "p:1:9: unknown plan header field 'colour=red'" },
			{ "plan v1 port=0\n", "p:1:14: bad number in 'port=0'" },
			{ "plan v1 scheme=ring\n", "p:1:16: unknown plan scheme 'ring' (aleph, rat or ps)" },
			{ "node a 10.0.0.1 bw=1\n", "p:1:1: expected 'plan v1 ...' header, got 'node'" },
			{ "# nothing\n", "p:2:1: empty plan: no 'plan v1' header" },
		};

		for (size_t i = 0; i < sizeof(hc) / sizeof(hc[0]); i++) {
			struct agg_plan p;
			struct agg_diag d = { "" };
			FILE *f = fmemopen((void *)hc[i].text, strlen(hc[i].text), "r");
			int err = agg_plan_read(&p, f, "p", &d);

			fclose(f);
			if (!ok(err == -EINVAL && !strcmp(d.msg, hc[i].want),
				"plan header rejects: %s", hc[i].want))
				diag("  got %d '%s'", err, d.msg);
		}
	}
}

static int nreports;
static char last_report[256], all_reports[2048];

static void collect(void *ctx, const char *msg)
{
	size_t len = strlen(all_reports);

	nreports++;
	snprintf(last_report, sizeof(last_report), "%s", msg);
	snprintf(all_reports + len, sizeof(all_reports) - len, "%s\n", msg);
}

static int check_text(const char *text)
{
	struct agg_plan p;
	struct agg_diag d;
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int n = -1;

	nreports = 0;
	last_report[0] = all_reports[0] = 0;
	if (!agg_plan_read(&p, f, "p", &d)) {
		n = agg_plan_check(&p, collect, NULL);
		agg_plan_free(&p);
	} else {
		diag("%s", d.msg);
	}
	fclose(f);
	return n;
}

static void test_plan_check(void)
{
	static const char *hdr = "plan v1 scheme=aleph bw-demand=10 cpu-demand=0.1\n"
		"node ps0 10.90.0.100 bw=40 role=ps\nnode a 10.90.0.1 bw=30\n"
		"node b 10.90.0.2 bw=10\nnode c 10.90.0.3 bw=10\nnode d 10.90.0.4 bw=10\n"
		"tree 0 root=ps0 weight=1\n";
	static const struct { const char *edges; int n; const char *want; } cases[] = {
		{ "edge 0 a ps0\nedge 0 b a\nedge 0 c a\nedge 0 d ps0\n", 0, "" },
		{ "edge 0 a ps0\nedge 0 b a\nedge 0 c a\n", 1, "tree 0: worker d has no parent" },
		{ "edge 0 a ps0\nedge 0 b a\nedge 0 c a\nedge 0 d ps0\nedge 0 d a\n", 2,
		  "tree 0: a aggregates 3 workers, capacity 2 (bw=30, b=10)" },
		{ "edge 0 a b\nedge 0 b a\nedge 0 c ps0\nedge 0 d ps0\n", 3,
		  "tree 0: worker b does not reach root ps0 (a cycle)" },
		{ "edge 0 a b\nedge 0 b a\nedge 0 c ps0\nedge 0 d ps0\n", 3,
		  "tree 0: b aggregates 1 worker, capacity 0 (bw=10, b=10)" },
		{ "edge 0 a ps0\nedge 0 b a\nedge 0 c a\nedge 0 d ps0\nedge 0 ps0 a\n", 2,
		  "tree 0: root ps0 has a parent" },
		{ "edge 0 a ps0\nedge 0 b a\nedge 0 c a\nedge 0 d ps0\nedge 0 ps0 a\n", 2,
		  "tree 0: a aggregates 3 workers, capacity 2 (bw=30, b=10)" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[1024];
		int n;

		snprintf(text, sizeof(text), "%s%s", hdr, cases[i].edges);
		n = check_text(text);
		if (!ok(n == cases[i].n && strstr(all_reports, cases[i].want),
			"plan check: %d problem(s)%s%s", cases[i].n, n ? ", among them: " : "",
			cases[i].want))
			diag("  got %d:\n%s", n, all_reports);
	}
}

static void test_built_plans_check(void)
{
	enum agg_scheme schemes[] = { AGG_SCHEME_ALEPH, AGG_SCHEME_RAT, AGG_SCHEME_PS };
	struct agg_hosts h;
	struct agg_diag d;
	int bad = 0;

	read_hosts("ps0 10.90.0.100 bw=40 role=ps\nps1 10.90.0.101 bw=20 role=ps\n"
		   "a 10.90.0.1 bw=30 rack=r1\nb 10.90.0.2 bw=20 rack=r1\n"
		   "c 10.90.0.3 bw=10 rack=r1\nd 10.90.0.4 bw=10 rack=r2\n"
		   "e 10.90.0.5 bw=25 rack=r2\nf 10.90.0.6 bw=10 rack=r2\n", &h, &d);
	for (size_t s = 0; s < 3; s++)
		for (uint64_t seed = 1; seed <= 20; seed++) {
			struct agg_plan p;
			struct agg_build_info info;

			agg_plan_init(&p);
			p.scheme = schemes[s];
			p.seed = seed;
			agg_tree_build(&p, &h, schemes[s] == AGG_SCHEME_RAT ? 3 : 0, &info);
			nreports = 0;
			bad += agg_plan_check(&p, collect, NULL);
			if (nreports)
				diag("%s seed %llu: %s", agg_scheme_name(schemes[s]),
				     (unsigned long long)seed, last_report);
			agg_plan_free(&p);
		}
	is_int(bad, 0, "every plan agg-plan builds passes the check (3 schemes x 20 seeds)");
	agg_hosts_free(&h);
}

/* The same edges in any order are the same plan, and print the same. */
static void test_canonical_order(void)
{
	static const char *hdr = "plan v1 scheme=rat\n"
		"node ps0 10.90.0.100 bw=40 role=ps\nnode wa 10.90.0.1 bw=10\n"
		"node wb 10.90.0.2 bw=25\nnode wc 10.90.0.3 bw=12\nnode wd 10.90.0.4 bw=12\n"
		"tree 0 root=ps0 weight=1\n";
	static const char *orders[] = {
		"edge 0 wb ps0\nedge 0 wa wb\nedge 0 wc wb\nedge 0 wd wc\n",
		"edge 0 wd wc\nedge 0 wc wb\nedge 0 wa wb\nedge 0 wb ps0\n",
		"edge 0 wc wb\nedge 0 wd wc\nedge 0 wb ps0\nedge 0 wa wb\n",
	};
	char *first = NULL;
	int same = 0;

	for (size_t i = 0; i < 3; i++) {
		char text[1024];
		struct agg_plan p;
		struct agg_diag d;
		FILE *f;
		char *out;

		snprintf(text, sizeof(text), "%s%s", hdr, orders[i]);
		f = fmemopen(text, strlen(text), "r");
		agg_plan_read(&p, f, "p", &d);
		fclose(f);
		out = agg_plan_to_text(&p);
		if (!first) {
			first = out;
			ok(strstr(out, "edge 0 wb ps0\nedge 0 wa wb\nedge 0 wc wb\nedge 0 wd wc\n") != NULL,
			   "breadth first, children in node order");
		} else {
			same += !strcmp(first, out);
			free(out);
		}
		agg_plan_free(&p);
	}
	is_int(same, 2, "edges read in any order print the same text");
	free(first);
}

static void test_sizes(void)
{
	uint64_t v = 0;
	int col = -1;

	ok(!agg_parse_size("100M", &v, NULL) && v == 100000000, "100M = 10^8");
	ok(!agg_parse_size("4Ki", &v, NULL) && v == 4096, "4Ki = 4096");
	ok(!agg_parse_size("2Gi", &v, NULL) && v == 2147483648ULL, "2Gi");
	ok(!agg_parse_size("525M", &v, NULL) && v == 525000000, "525M");
	ok(agg_parse_size("10MB", &v, &col) == -EINVAL && col == 2, "10MB is an error at column 2");
	ok(agg_parse_size("99999999999999999999", &v, NULL) == -ERANGE, "overflow is ERANGE");
	ok(agg_parse_size("20000000000G", &v, NULL) == -ERANGE, "suffix overflow is ERANGE");
	ok(agg_parse_size("-1", &v, NULL) == -EINVAL, "negative size");
}

int main(void)
{
	test_hosts_good();
	test_hosts_bad();
	test_hosts_scheme();
	test_plan_roundtrip();
	test_plan_bad();
	test_plan_check();
	test_canonical_order();
	test_built_plans_check();
	test_sizes();
	return done_testing();
}
