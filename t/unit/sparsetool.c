// SPDX-License-Identifier: GPL-2.0-only
/*
 * Sparse gradients for the tests (the dense path's gradtool, for
 * agg-sparse(5) files):
 *
 *   sparsetool ref IN...            the float64 sum of IN over the union of
 *                                   their ids (lib/ops/sparse.c's reference),
 *                                   as text: "width W", then "ID V..." (%.17g)
 *   sparsetool check RESULT IN...   RESULT holds the ids of that sum and every
 *                                   value within 1e-6 of its largest magnitude
 *                                   (DESIGN.md's bound); prints "pairs N
 *                                   maxerr E"; exit 1 when not
 *   sparsetool forge PLAN FROM TO [KEY=VALUE...]
 *                                   one sparse packet of FROM (a node of PLAN,
 *                                   sent from its address: run it in FROM's
 *                                   namespace) to TO's plan port; KEYs: type
 *                                   (sparse, end, ack, result), job, run, iter,
 *                                   token, seg, npkts, width, npairs, id, value
 *                                   (default: a SPARSE of one pair of width 16,
 *                                   iteration 0, run 0, the plan's job and
 *                                   token); the pairs' ids count up from id
 *                                   (0), every value is value (0); ack=SECONDS:
 *                                   from FROM's sender port, then wait that
 *                                   long for the acknowledgement, print "ack
 *                                   seg S npkts N" or "no ack"
 *
 * Reading the reference from a library function is the point: a tool in
 * t/unit/ keeps agg-hot's interface to what a user needs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg.h"
#include "opts.h"
#include "plan.h"
#include "sparse.h"

static int load_all(int n, char **paths, struct agg_sparse *g, const struct agg_sparse **gp)
{
	struct agg_diag d;

	for (int i = 0; i < n; i++) {
		gp[i] = &g[i];
		if (agg_sparse_load(&g[i], paths[i], &d)) {
			fprintf(stderr, "sparsetool: %s\n", d.msg);
			return -1;
		}
	}
	return 0;
}

static int ref(int n, char **paths)
{
	struct agg_sparse *g = calloc(n, sizeof(*g));
	const struct agg_sparse **gp = calloc(n, sizeof(*gp));
	struct agg_sparse_sum s;

	if (!g || !gp || load_all(n, paths, g, gp) || agg_sparse_sum(gp, n, &s)) {
		fprintf(stderr, "sparsetool: cannot sum\n");
		return 3;
	}
	printf("width %u\n", s.width);
	for (uint64_t i = 0; i < s.n; i++) {
		printf("%" PRIu64, s.id[i]);
		for (uint32_t j = 0; j < s.width; j++)
			printf(" %.17g", s.val[i * s.width + j]);
		putchar('\n');
	}
	return fflush(stdout) ? 3 : 0;
}

static int check(const char *result, int n, char **paths)
{
	struct agg_sparse *g = calloc(n, sizeof(*g)), r;
	const struct agg_sparse **gp = calloc(n, sizeof(*gp));
	struct agg_sparse_sum s;
	struct agg_diag d;
	char why[512];
	double err;

	if (!g || !gp || load_all(n, paths, g, gp) || agg_sparse_sum(gp, n, &s)) {
		fprintf(stderr, "sparsetool: cannot sum\n");
		return 3;
	}
	if (agg_sparse_load(&r, result, &d)) {
		fprintf(stderr, "sparsetool: %s\n", d.msg);
		return 1;
	}
	if (agg_sparse_check(&r, &s, 1e-6, &err, why, sizeof(why))) {
		fprintf(stderr, "sparsetool: %s: %s\n", result, why);
		return 1;
	}
	printf("pairs %" PRIu64 " maxerr %.3g\n", r.n, err);
	return 0;
}

static int forge(int argc, char **argv)
{
	struct agg_plan p;
	struct agg_diag d;
	FILE *f = fopen(argv[0], "r");
	int from, to, s;
	static uint8_t buf[65536];
	uint64_t id0 = 0;
	float value = 0;
	double wait = 0;
	struct agg_hdr *h = (struct agg_hdr *)buf;
	struct agg_sparse_hdr *sh = (struct agg_sparse_hdr *)(h + 1);
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	size_t len;

	agg_plan_init(&p);
	if (!f || agg_plan_read(&p, f, argv[0], &d)) {
		fprintf(stderr, "sparsetool: %s\n", f ? d.msg : strerror(errno));
		return 2;
	}
	from = agg_plan_find(&p, argv[1]);
	to = agg_plan_find(&p, argv[2]);
	if (from < 0 || to < 0) {
		fprintf(stderr, "sparsetool: no node %s in %s\n", from < 0 ? argv[1] : argv[2], argv[0]);
		return 2;
	}
	*h = (struct agg_hdr){ .magic = AGG_MAGIC, .type = AGG_T_SPARSE, .from = (uint16_t)from,
			       .job = p.job, .token = agg_plan_wire_token(&p) };
	*sh = (struct agg_sparse_hdr){ .npkts = 1, .width = 16, .npairs = 1 };
	for (int i = 3; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		uint64_t v;

		if (!eq) {
			fprintf(stderr, "sparsetool: want KEY=VALUE, not '%s'\n", argv[i]);
			return 2;
		}
		*eq++ = '\0';
		if (!strcmp(argv[i], "type")) {
			h->type = !strcmp(eq, "end") ? AGG_T_SPARSE_END : !strcmp(eq, "ack") ?
				  AGG_T_SPARSE_ACK : !strcmp(eq, "result") ? AGG_T_SPARSE_RESULT :
				  AGG_T_SPARSE;
			continue;
		}
		if (!strcmp(argv[i], "value")) {
			value = strtof(eq, NULL);
			continue;
		}
		if (!strcmp(argv[i], "ack")) {
			wait = strtod(eq, NULL);
			continue;
		}
		if (agg_parse_u64(eq, &v, NULL)) {
			fprintf(stderr, "sparsetool: bad number '%s'\n", eq);
			return 2;
		}
		if (!strcmp(argv[i], "job"))
			h->job = (uint32_t)v;
		else if (!strcmp(argv[i], "run"))
			h->run = (uint16_t)v;
		else if (!strcmp(argv[i], "iter"))
			h->iter = (uint32_t)v;
		else if (!strcmp(argv[i], "token"))
			h->token = v;
		else if (!strcmp(argv[i], "seg"))
			h->seg = (uint32_t)v;
		else if (!strcmp(argv[i], "npkts"))
			sh->npkts = (uint32_t)v;
		else if (!strcmp(argv[i], "width"))
			sh->width = (uint16_t)v;
		else if (!strcmp(argv[i], "npairs"))
			sh->npairs = (uint16_t)v;
		else if (!strcmp(argv[i], "id"))
			id0 = v;
		else {
			fprintf(stderr, "sparsetool: unknown key '%s'\n", argv[i]);
			return 2;
		}
	}
	len = sizeof(*h) + sizeof(*sh) + (size_t)sh->npairs * (8 + 4 * (size_t)sh->width);
	if (len > sizeof(buf)) {
		fprintf(stderr, "sparsetool: %zu bytes: too large\n", len);
		return 2;
	}
	for (uint32_t k = 0; k < sh->npairs; k++) {
		uint8_t *pair = (uint8_t *)(sh + 1) + k * (8 + 4 * (size_t)sh->width);
		uint64_t id = id0 + k;

		memcpy(pair, &id, 8);
		for (uint32_t j = 0; j < sh->width; j++)
			memcpy(pair + 8 + 4 * j, &value, 4);
	}
	src.sin_addr = p.node[from].addr;
	dst.sin_addr = p.node[to].addr;
	dst.sin_port = htons(p.port);
	if (wait > 0)
		src.sin_port = htons(p.port + AGG_SPARSE_PORT_SEND);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&src, sizeof(src)) ||
	    sendto(s, buf, len, 0, (struct sockaddr *)&dst, sizeof(dst)) != (ssize_t)len) {
		fprintf(stderr, "sparsetool: cannot send: %s\n", strerror(errno));
		return 3;
	}
	if (wait > 0) {
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		uint32_t seg = h->seg;
		int ms = (int)(wait * 1000);
		ssize_t r = 0;

		/* the acknowledgement of this packet, not another one of the
		 * node's stream (the root repeats its last one) */
		for (; ms > 0 && poll(&pfd, 1, 10) >= 0; ms -= 10) {
			r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
			if (r >= (ssize_t)(sizeof(*h) + sizeof(*sh)) &&
			    h->type == AGG_T_SPARSE_ACK && h->seg == seg)
				break;
			r = 0;
		}
		if (r)
			printf("ack seg %u npkts %u\n", h->seg, sh->npkts);
		else
			printf("no ack\n");
	}
	close(s);
	agg_plan_free(&p);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "ref"))
		return ref(argc - 2, argv + 2);
	if (argc >= 4 && !strcmp(argv[1], "check"))
		return check(argv[2], argc - 3, argv + 3);
	if (argc >= 5 && !strcmp(argv[1], "forge"))
		return forge(argc - 2, argv + 2);
	fprintf(stderr, "usage: sparsetool ref IN...\n"
			"       sparsetool check RESULT IN...\n"
			"       sparsetool forge PLAN FROM TO [KEY=VALUE...]\n");
	return 2;
}
