// SPDX-License-Identifier: GPL-2.0-only
/* The job token: the secret's key, the keyed default token, the wire token. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"
#include "secret.h"
#include "tap.h"

/* A plan in canonical form (agg-plan(5)). */
static const char *base =
	"plan v1 job=7 port=9999 scheme=aleph seed=1 segment=128 size=100000000 "
	"slots=256 token=0x0123456789abcdef bw-demand=10 cpu-demand=0.1\n"
	"node ps0 10.90.0.100 bw=20 role=ps\n"
	"node w0 10.90.0.1 bw=10\n"
	"node w1 10.90.0.2 bw=10\n"
	"node w2 10.90.0.3 bw=30\n"
	"tree 0 root=ps0 weight=1\n"
	"edge 0 w0 ps0\n"
	"edge 0 w2 ps0\n"
	"edge 0 w1 w2\n";

/*
 * Values of the documented constructions computed apart from this code
 * (a few lines of Python from the SipHash paper), so that a change of
 * construction, not only a change of lib/util/siphash.c, fails here.
 */
#define BASE_WIRE	0x16ad7aefc4746952ULL
#define BASE_KEYED	0x4c039854e8aa14e7ULL
static const char secret_text[] = "agg test suite secret: not a secret";
static const uint8_t secret_key[16] = {
	0xfe, 0xd7, 0xb1, 0xd9, 0x83, 0x4a, 0x4a, 0xd1,
	0xb1, 0x2f, 0x3d, 0x66, 0xb9, 0x41, 0x8f, 0x0f,
};

static int parse(const char *text, struct agg_plan *p)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct agg_diag d;
	int err = agg_plan_read(p, f, "p", &d);

	fclose(f);
	if (err)
		diag("parse: %s", d.msg);
	return err;
}

static uint64_t wire_of(const char *text)
{
	struct agg_plan p;
	uint64_t w;

	if (parse(text, &p))
		return 0;
	w = agg_plan_wire_token(&p);
	agg_plan_free(&p);
	return w;
}

/* base with the first occurrence of from replaced by to (static buffer). */
static const char *edit(const char *from, const char *to)
{
	static char buf[2048];
	const char *at = strstr(base, from);

	if (!at) {
		diag("'%s' is not in the plan", from);
		return base;
	}
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - base), base, to,
		 at + strlen(from));
	return buf;
}

static void test_wire_token(void)
{
	static const struct { const char *what, *from, *to; } edits[] = {
		{ "job", "job=7", "job=8" },
		{ "port", "port=9999", "port=9998" },
		{ "scheme", "scheme=aleph", "scheme=ps" },
		{ "seed", "seed=1", "seed=2" },
		{ "segment", "segment=128", "segment=64" },
		{ "size", "size=100000000", "size=99999996" },
		{ "slots", "slots=256", "slots=128" },
		{ "token", "token=0x0123456789abcdef", "token=0x0123456789abcdee" },
		{ "bw-demand", "bw-demand=10", "bw-demand=11" },
		{ "cpu-demand", "cpu-demand=0.1", "cpu-demand=0.2" },
		{ "a node's bw", "node w1 10.90.0.2 bw=10", "node w1 10.90.0.2 bw=11" },
		{ "a node's address", "node w1 10.90.0.2", "node w1 10.90.0.9" },
		{ "a node's rack", "node w1 10.90.0.2 bw=10", "node w1 10.90.0.2 bw=10 rack=r1" },
		{ "a node's role", "node w0 10.90.0.1 bw=10", "node w0 10.90.0.1 bw=10 role=ps" },
		{ "an edge's parent", "edge 0 w1 w2", "edge 0 w1 ps0" },
		{ "an extra edge", "edge 0 w1 w2\n", "edge 0 w1 w2\nedge 0 w1 w0\n" },
		{ "a tree's weight", "weight=1", "weight=2" },
		{ "an extra tree", "edge 0 w1 w2\n", "edge 0 w1 w2\ntree 1 root=ps0 weight=1\n" },
	};
	enum { N = sizeof(edits) / sizeof(edits[0]) };
	uint64_t w = wire_of(base), v[N];
	struct agg_plan p;
	char *text;
	int same = 0;

	ok(w != 0, "the wire token of a plan is not 0 (the error value)");
	if (!ok(w == BASE_WIRE, "it is SipHash-2-4 of the text under (token, \"agg-wire\")"))
		diag("  got 0x%016" PRIx64, w);
	is_int(wire_of(base) == w, 1, "the same plan parsed twice: the same wire token");
	parse(base, &p);
	text = agg_plan_to_text(&p);
	is_str(text, base, "(the plan is in canonical form)");
	free(text);
	agg_plan_free(&p);
	ok(wire_of("# a comment\nplan v1 token=0x0123456789abcdef job=7 "
		   "scheme=aleph bw-demand=10\n"
		   "node ps0 10.90.0.100 bw=20 role=ps\nnode w0 10.90.0.1 bw=10\n"
		   "node w1   10.90.0.2 bw=10\nnode w2 10.90.0.3 bw=30\n"
		   "tree 0 weight=1 root=ps0\n"
		   "edge 0 w1 w2\nedge 0 w2 ps0\nedge 0 w0 ps0\n") == w,
	   "written differently, the same plan: the same wire token");
	for (int i = 0; i < N; i++) {
		v[i] = wire_of(edit(edits[i].from, edits[i].to));
		ok(v[i] && v[i] != w, "%s edited: another wire token", edits[i].what);
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			same += v[i] == v[j];
	is_int(same, 0, "the %d edited plans have %d different wire tokens", N, N);
}

static void test_keyed_token(void)
{
	uint8_t key[16], other[16];
	uint64_t t, t2;
	struct agg_plan p;

	memcpy(key, secret_key, 16);
	memcpy(other, secret_key, 16);
	other[0] ^= 1;
	parse(base, &p);
	is_int(agg_plan_keyed_token(&p, key, &t), 0, "agg_plan_keyed_token");
	if (!ok(t == BASE_KEYED, "it is SipHash-2-4 of the text with token=0 under the key"))
		diag("  got 0x%016" PRIx64, t);
	p.token = 0xdead;
	agg_plan_keyed_token(&p, key, &t2);
	ok(t2 == t, "the plan's own token does not enter it");
	agg_plan_keyed_token(&p, other, &t2);
	ok(t2 != t, "another key, another token");
	p.seed = 2;
	agg_plan_keyed_token(&p, key, &t2);
	ok(t2 != t, "another plan (seed), another token");
	p.seed = 1;
	p.node[1].bw = 11;
	agg_plan_keyed_token(&p, key, &t2);
	ok(t2 != t, "another plan (a node's bw), another token");
	agg_plan_free(&p);
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f;

	unlink(path);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return chmod(path, mode);
}

static void test_secret(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[300], want[700];
	uint8_t key[16];
	struct agg_diag d;
	enum agg_secret_from from;
	int err;

	snprintf(dir, sizeof(dir), "%s/agg-token-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/secret", dir);
	write_file(path, secret_text, 0600);
	err = agg_secret_key(path, key, &d);
	if (!ok(!err, "a secret of mode 600 is read"))
		diag("  %d %s", err, d.msg);
	ok(!memcmp(key, secret_key, 16),
	   "its key is SipHash-2-4 under \"agg.secret.key.1\" of 0x00 and 0x01 || S");
	if (memcmp(key, secret_key, 16))
		for (int i = 0; i < 16; i++)
			diag("  key[%d] = 0x%02x", i, key[i]);
	write_file(path, secret_text, 0400);
	is_int(agg_secret_key(path, key, &d), 0, "mode 400 is fine");
	write_file(path, secret_text, 0640);
	is_int(agg_secret_key(path, key, &d), -EPERM, "group-readable: -EPERM");
	snprintf(want, sizeof(want), "secret %s is open to group or others "
		 "(mode 0640): chmod 600 %s", path, path);
	is_str(d.msg, want, "the message names the file, the mode and the fix");
	write_file(path, secret_text, 0604);
	is_int(agg_secret_key(path, key, &d), -EPERM, "others-readable: -EPERM");
	write_file(path, secret_text, 0620);
	is_int(agg_secret_key(path, key, &d), -EPERM, "group-writable: -EPERM");
	write_file(path, "0123456789abcde", 0600);
	is_int(agg_secret_key(path, key, &d), -EINVAL, "15 bytes: -EINVAL");
	write_file(path, "0123456789abcdef", 0600);
	is_int(agg_secret_key(path, key, &d), 0, "16 bytes are enough");
	is_int(agg_secret_key(dir, key, &d), -EISDIR, "a directory: -EISDIR");
	unlink(path);
	is_int(agg_secret_key(path, key, &d), -ENOENT, "no file: -ENOENT");
	rmdir(dir);

	unsetenv(AGG_SECRET_ENV);
	is_str(agg_secret_path(NULL, &from), AGG_SECRET_FILE, "the default path");
	is_int(from, AGG_SECRET_FROM_DEFAULT, "... from the default");
	setenv(AGG_SECRET_ENV, "", 1);
	is_str(agg_secret_path(NULL, &from), AGG_SECRET_FILE, "an empty variable is unset");
	setenv(AGG_SECRET_ENV, "/e", 1);
	is_str(agg_secret_path(NULL, &from), "/e", "the variable over the default");
	is_int(from, AGG_SECRET_FROM_ENV, "... from the environment");
	is_str(agg_secret_path("/o", &from), "/o", "the option over the variable");
	is_int(from, AGG_SECRET_FROM_OPTION, "... from the option");
}

int main(void)
{
	test_wire_token();
	test_keyed_token();
	test_secret();
	return done_testing();
}
