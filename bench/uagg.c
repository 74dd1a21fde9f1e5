// SPDX-License-Identifier: GPL-2.0-only
/*
 * uagg: the baseline of the aggregation-rate benchmark, a user-space
 * aggregator doing what agg_xdp does with packets from a recvmmsg socket:
 * check the header and the sender, add the values into the segment's slot
 * (64-bit accumulators, contributor bitmap), count.
 *
 *   uagg PLAN NODE SECONDS          prints the packets aggregated
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

struct slot {
	uint32_t ver, seg;
	uint64_t bitmap;
	int64_t acc[];
};

int main(int argc, char **argv)
{
	struct agg_plan p;
	struct agg_layout l;
	struct agg_diag d;
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in addr[BATCH], me = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	struct timespec t0, t;
	char why[256];
	unsigned long long done = 0;
	uint64_t token;
	uint8_t *buf, *slots;
	size_t len, slen;
	double secs;
	int self, s;
	FILE *f;

	if (argc != 4 || !(f = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: uagg PLAN NODE SECONDS\n");
		return 2;
	}
	agg_plan_init(&p);
	if (agg_plan_read(&p, f, argv[1], &d) || agg_layout_of(&p, &l, why, sizeof(why)))
		return 2;
	self = agg_plan_find(&p, argv[2]);
	secs = atof(argv[3]);
	if (self < 0)
		return 2;
	len = sizeof(struct agg_hdr) + 4 * (size_t)l.segment;
	slen = sizeof(struct slot) + 8 * (size_t)l.segment;
	buf = calloc(BATCH, len);
	slots = calloc(l.nslots, slen);
	me.sin_addr = p.node[self].addr;
	me.sin_port = htons(p.port);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (bind(s, (struct sockaddr *)&me, sizeof(me))) {
		perror("uagg: bind");
		return 3;
	}
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	{
		int rcvbuf = 8 << 20;

		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	}
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = buf + i * len;
		iov[i].iov_len = len;
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
		msg[i].msg_hdr.msg_name = &addr[i];
		msg[i].msg_hdr.msg_namelen = sizeof(addr[i]);
	}
	token = agg_plan_wire_token(&p);	/* hashes the whole plan: once */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = recvmmsg(s, msg, BATCH, MSG_WAITFORONE, NULL);

		for (int i = 0; i < n; i++) {
			struct agg_hdr *h = iov[i].iov_base;
			int32_t *v = (int32_t *)(h + 1);
			struct slot *sl;
			int from = -1;

			if (msg[i].msg_len != len || h->magic != AGG_MAGIC || h->job != p.job ||
			    h->token != token || h->flags || h->seg >= l.nsegs)
				continue;
			for (int k = 0; k < p.nnodes; k++)
				if (p.node[k].addr.s_addr == addr[i].sin_addr.s_addr)
					from = k;
			if (from < 0 || from != h->from || p.tree[h->tree].parent[from] != self)
				continue;
			sl = (struct slot *)(slots + (size_t)(h->seg % l.nslots) * slen);
			if (sl->ver == h->iter + 1 && sl->seg == h->seg) {
				if (sl->bitmap & (1ULL << (from & 63)))
					continue;
				for (uint32_t k = 0; k < l.segment; k++)
					sl->acc[k] += v[k];
			} else {
				sl->ver = h->iter + 1;
				sl->seg = h->seg;
				sl->bitmap = 0;
				for (uint32_t k = 0; k < l.segment; k++)
					sl->acc[k] = v[k];
			}
			sl->bitmap |= 1ULL << (from & 63);
			done++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= secs)
			break;
	}
	printf("%llu\n", done);
	return 0;
}
