// SPDX-License-Identifier: GPL-2.0-only
/*
 * blast: send agg DATA packets from one node of a plan to another as fast
 * as the socket takes them, for the aggregation-rate benchmark.  Segment s
 * cycles over [0, POOL) and the iteration advances each lap, so every
 * packet lands in a slot holding an older iteration: the receiver resets
 * the slot with it (the same loop as an add) and waits for the others.
 *
 *   blast PLAN FROM TO SECONDS      prints the packets sent
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "agg.h"
#include "dp.h"
#include "plan.h"

#define BATCH 64

int main(int argc, char **argv)
{
	struct agg_plan p;
	struct agg_layout l;
	struct agg_diag d;
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct timespec t0, t;
	char why[256];
	unsigned long long sent = 0;
	uint8_t *buf;
	uint32_t seg = 0, iter = 1;
	size_t len;
	double secs;
	int from, dst, s;
	uint64_t token;
	FILE *f;

	if (argc != 5 || !(f = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: blast PLAN FROM TO SECONDS\n");
		return 2;
	}
	agg_plan_init(&p);
	if (agg_plan_read(&p, f, argv[1], &d) || agg_layout_of(&p, &l, why, sizeof(why))) {
		fprintf(stderr, "blast: %s\n", d.msg);
		return 2;
	}
	from = agg_plan_find(&p, argv[2]);
	dst = agg_plan_find(&p, argv[3]);
	secs = atof(argv[4]);
	if (from < 0 || dst < 0)
		return 2;
	len = sizeof(struct agg_hdr) + 4 * (size_t)l.segment;
	buf = calloc(BATCH, len);
	to.sin_addr = p.node[dst].addr;
	to.sin_port = htons(p.port);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	token = agg_plan_wire_token(&p);	/* hashes the whole plan: once */
	for (int i = 0; i < BATCH; i++) {
		struct agg_hdr *h = (struct agg_hdr *)(buf + i * len);
		int32_t *v = (int32_t *)(h + 1);

		h->magic = AGG_MAGIC;
		h->type = AGG_T_DATA;
		h->op = AGG_OP_SUM;
		h->from = from;
		h->job = p.job;
		h->token = token;
		for (uint32_t k = 0; k < l.segment; k++)
			v[k] = (int32_t)(k * 7 + i);
		iov[i].iov_base = h;
		iov[i].iov_len = len;
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
		msg[i].msg_hdr.msg_name = &to;
		msg[i].msg_hdr.msg_namelen = sizeof(to);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n;

		for (int i = 0; i < BATCH; i++) {
			struct agg_hdr *h = (struct agg_hdr *)(buf + i * len);

			/* data segments only (op sum), nexp.. */
			h->seg = l.nexp + seg;
			h->tree = agg_plan_seg_tree(&p, h->seg);
			h->iter = iter;
			if (++seg == l.nslots || l.nexp + seg >= l.nsegs) {
				seg = 0;
				iter++;
			}
		}
		n = sendmmsg(s, msg, BATCH, 0);
		if (n > 0)
			sent += n;
		else if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
			perror("blast: sendmmsg");
			return 3;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= secs)
			break;
	}
	printf("%llu\n", sent);
	return 0;
}
