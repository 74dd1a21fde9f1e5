// SPDX-License-Identifier: GPL-2.0-only
/*
 * The sending engine: framing, injection into the node's own XDP program,
 * the window of lanes dealt to streams, resends, and probes when a call
 * stalls (send.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <numa.h>

#include "opts.h"
#include "probe.h"
#include "quant.h"
#include "recv.h"
#include "send.h"

static void stream_free(struct agg_stream *st)
{
	if (st->sock >= 0)
		close(st->sock);
	if (st->kick >= 0)
		close(st->kick);
	free(st->frame);
	free(st->out);
}

void agg_sender_free(struct agg_sender *s)
{
	if (!s->n)
		return;		/* never set up, or freed */
	for (unsigned k = 0; s->st && k < s->nstreams; k++)
		stream_free(&s->st[k]);
	if (s->sig >= 0)
		close(s->sig);
	ring_buffer__free(s->rb);
	pthread_mutex_destroy(&s->rb_lock);
	if (s->cpus)
		numa_bitmask_free(s->cpus);
	free(s->st);
	free(s->parent);
	free(s->local);
	free(s->root);
	free(s->kid);
	free(s->kid_first);
	free(s->exps);
	memset(s, 0, sizeof(*s));
	s->sig = -1;
}

void agg_sender_counters(const struct agg_sender *s, uint64_t iters,
			 uint64_t out[AGG_SENT_ENTRIES])
{
	static const int total[AGG_SST_COUNT] = {
		[AGG_SST_WIRE] = AGG_SENT_WIRE, [AGG_SST_LOCAL] = AGG_SENT_LOCAL,
		[AGG_SST_RESENT] = AGG_SENT_RESENT, [AGG_SST_FANOUT] = AGG_SENT_FANOUT,
		[AGG_SST_SIGNALS] = AGG_SENT_SIGNALS,
	};

	memset(out, 0, AGG_SENT_ENTRIES * sizeof(*out));
	out[AGG_SENT_ITERS] = iters;
	for (unsigned k = 0; s->st && k < s->nstreams; k++)
		for (int f = 0; f < AGG_SST_COUNT; f++) {
			out[AGG_SENT_STREAM(k, f)] = s->st[k].count[f];
			out[total[f]] += s->st[k].count[f];
		}
}

static int event_nop(void *ctx, void *data, size_t size)
{
	return 0;
}

/*
 * The congestion state a sender leaves on the node ("cc" map) and the
 * next one starts from, as Linux starts a connection from its route's
 * TCP metrics: agg-send runs once an iteration, and each new process in
 * slow start from 8 segments, its timeout from the first few trips, went
 * over every queue at the start of every iteration (half of a shaped
 * incast's packets were resent).  The node's window is the streams'
 * together: each starts with its share.  State older than CC_KEEP is not
 * used.
 */
#define CC_KEEP		600.0
#define CWND_MIN	2	/* the congestion window's floor, segments */
static void cc_load(struct agg_sender *s)
{
	struct agg_cc_state cs;
	__u32 zero = 0;

	if (s->n->fd_cc < 0 || bpf_map_lookup_elem(s->n->fd_cc, &zero, &cs) || !cs.at_ns ||
	    agg_now() - (double)cs.at_ns * 1e-9 > CC_KEEP || !cs.cwnd_milli)
		return;
	for (unsigned k = 0; k < s->nstreams; k++) {
		struct agg_stream *st = &s->st[k];

		st->cwnd = (double)cs.cwnd_milli / 1000 / s->nstreams;
		if (st->cwnd < CWND_MIN)
			st->cwnd = CWND_MIN;	/* more streams than before */
		st->slow_start = false;
		st->rtt_med = (double)cs.rtt_med_ns * 1e-9;
		st->rtt_base = (double)cs.rtt_base_ns * 1e-9;
	}
}

double agg_sender_cwnd(const struct agg_sender *s)
{
	double w = 0;

	for (unsigned k = 0; k < s->nstreams; k++)
		w += s->st[k].cwnd;
	return w;
}

double agg_sender_rtt(const struct agg_sender *s)
{
	double r = 0;
	unsigned n = 0;

	for (unsigned k = 0; k < s->nstreams; k++)
		if (s->st[k].rtt_med > 0) {	/* a stream that never ran has none */
			r += s->st[k].rtt_med;
			n++;
		}
	return n ? r / n : 0;
}

int agg_sender_save(const struct agg_sender *s)
{
	struct agg_cc_state cs = { .at_ns = (__u64)(agg_now() * 1e9) };
	double cwnd = agg_sender_cwnd(s), med = agg_sender_rtt(s), base = 0;
	__u32 zero = 0;

	if (!s->n || s->n->fd_cc < 0 || s->cc_off)
		return 0;
	for (unsigned k = 0; k < s->nstreams; k++)
		if (s->st[k].rtt_base && (!base || s->st[k].rtt_base < base))
			base = s->st[k].rtt_base;
	if (!cwnd)
		return 0;
	cs.cwnd_milli = (__u64)(cwnd * 1000);
	cs.rtt_med_ns = (__u64)(med * 1e9);
	cs.rtt_base_ns = (__u64)(base * 1e9);
	return bpf_map_update_elem(s->n->fd_cc, &zero, &cs, BPF_ANY) ? -errno : 0;
}

/* Read a small sysfs file of the interface into buf: 0 or -errno. */
static int netif_sysfs(const char *ifname, const char *what, char *buf, size_t len)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, what);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok ? 0 : -EIO;
}

int agg_netif_numa_node(const struct agg_netif *nif)
{
	char buf[64], mac[24];
	long v;

	/* sysfs is the namespace's that mounted it: under nsenter --net
	 * another namespace's device may answer to the name.  Ours has our
	 * index and MAC. */
	if (netif_sysfs(nif->name, "ifindex", buf, sizeof(buf)) || atoi(buf) != nif->ifindex)
		return -1;
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", nif->mac[0], nif->mac[1],
		 nif->mac[2], nif->mac[3], nif->mac[4], nif->mac[5]);
	if (netif_sysfs(nif->name, "address", buf, sizeof(buf)) || strncmp(buf, mac, 17))
		return -1;
	if (netif_sysfs(nif->name, "device/numa_node", buf, sizeof(buf)))
		return -1;
	v = strtol(buf, NULL, 10);
	return v >= 0 && v < 4096 ? (int)v : -1;
}

/* The CPUs of NUMA node node that this process may run on, or with node
 * -1 all it may run on (malloc'd), or NULL without libnuma's support. */
static struct bitmask *node_cpus(int node)
{
	struct bitmask *m;

	if (numa_available() < 0)
		return NULL;
	m = numa_allocate_cpumask();
	if (!m)
		return NULL;
	if (node >= 0 && numa_node_to_cpus(node, m) == 0) {
		for (unsigned c = 0; c < m->size; c++)
			if (numa_bitmask_isbitset(m, c) && !numa_bitmask_isbitset(numa_all_cpus_ptr, c))
				numa_bitmask_clearbit(m, c);
	} else {
		numa_bitmask_clearall(m);
		for (unsigned c = 0; c < m->size && c < numa_all_cpus_ptr->size; c++)
			if (numa_bitmask_isbitset(numa_all_cpus_ptr, c))
				numa_bitmask_setbit(m, c);
	}
	if (!numa_bitmask_weight(m)) {
		numa_bitmask_free(m);
		return NULL;
	}
	return m;
}

/* The interface's receive queues by ethtool (rx + combined channels),
 * which asks the namespace we are in; 0 when it does not say. */
static unsigned netif_rx_queues(const struct agg_netif *nif)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned q = 0;

	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nif->name);
	ifr.ifr_data = (void *)&ch;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0)
		q = ch.rx_count + ch.combined_count;
	close(fd);
	return q;
}

unsigned agg_streams_auto(const struct agg_node *n, char *why, size_t whylen)
{
	int node = agg_netif_numa_node(&n->nif);
	struct bitmask *m = node_cpus(node);
	unsigned q = netif_rx_queues(&n->nif), cpus = m ? numa_bitmask_weight(m) : 0, k;
	char cpu_why[64];

	if (!cpus) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		cpus = c > 0 ? (unsigned)c : 1;
	}
	if (m)
		numa_bitmask_free(m);
	k = q ? q : 1;
	if (k > cpus)
		k = cpus;
	if (k > AGG_MAX_STREAMS)
		k = AGG_MAX_STREAMS;
	if (node >= 0)
		snprintf(cpu_why, sizeof(cpu_why), "%u CPUs on its NUMA node %d", cpus, node);
	else
		snprintf(cpu_why, sizeof(cpu_why), "%u CPUs (no NUMA node)", cpus);
	if (why && q)
		snprintf(why, whylen, "%u streams: %s has %u receive queues, %s", k,
			 n->nif.name, q, cpu_why);
	else if (why)
		snprintf(why, whylen, "%u stream: %s reports no receive queues (ethtool -l)",
			 k, n->nif.name);
	return k;
}

static int stream_init(struct agg_sender *s, struct agg_stream *st, unsigned id)
{
	const struct agg_plan *p = &s->n->plan;
	const struct agg_host *me = &p->node[s->n->self];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = me->addr };
	socklen_t sl = sizeof(sa);
	struct ethhdr *eth;
	struct iphdr *ip;
	struct udphdr *udp;

	st->s = s;
	st->id = id;
	st->sock = st->kick = -1;
	st->frame = calloc(1, s->frame_len);
	st->out = calloc(1, s->frame_len + sizeof(struct agg_tcmeta));
	if (!st->frame || !st->out) {
		errno = ENOMEM;
		return -1;
	}
	/* Port 0: the kernel picks a free port, a distinct one per stream. */
	st->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (st->sock < 0 || bind(st->sock, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(st->sock, (struct sockaddr *)&sa, &sl))
		return -1;
	st->port = ntohs(sa.sin_port);
	st->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (st->kick < 0)
		return -1;
	/* The frame a local contribution enters our own XDP program with. */
	eth = (struct ethhdr *)st->frame;
	ip = (struct iphdr *)(eth + 1);
	udp = (struct udphdr *)(ip + 1);
	memcpy(eth->h_dest, s->n->nif.mac, 6);
	memcpy(eth->h_source, s->n->nif.mac, 6);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(s->frame_len - sizeof(*eth));
	ip->saddr = me->addr.s_addr;
	ip->daddr = me->addr.s_addr;
	udp->source = htons(st->port);
	udp->dest = htons(p->port);
	udp->len = htons(s->frame_len - sizeof(*eth) - sizeof(*ip));
	return 0;
}

int agg_sender_init(struct agg_sender *s, struct agg_node *n, unsigned nstreams)
{
	const struct agg_plan *p = &n->plan;

	memset(s, 0, sizeof(*s));
	s->sig = -1;
	if (nstreams > AGG_MAX_STREAMS) {
		errno = EINVAL;
		return -EINVAL;
	}
	s->n = n;
	pthread_mutex_init(&s->rb_lock, NULL);
	s->nstreams = nstreams ? nstreams : 1;
	s->numa_node = -1;
	s->parent = calloc(p->ntrees, sizeof(*s->parent));
	s->local = calloc(p->ntrees, sizeof(*s->local));
	s->root = calloc(p->ntrees, sizeof(*s->root));
	s->kid_first = calloc(p->ntrees + 1, sizeof(*s->kid_first));
	s->kid = calloc(p->ntrees * (size_t)(AGG_MAX_KIDS + 1), sizeof(*s->kid));
	s->frame_len = sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr) +
		       sizeof(struct agg_hdr) + 4 * (size_t)n->l.segment;
	s->exps = malloc(sizeof(*s->exps) * (n->l.ndata ? n->l.ndata : 1));
	s->st = calloc(s->nstreams, sizeof(*s->st));
	if (!s->parent || !s->local || !s->root || !s->kid_first || !s->kid || !s->exps || !s->st)
		goto nomem;
	for (unsigned k = 0; k < s->nstreams; k++)
		s->st[k].sock = s->st[k].kick = -1;
	for (int t = 0; t < p->ntrees; t++) {
		int par = p->tree[t].parent[n->self], kids[AGG_MAX_KIDS];
		int nk = agg_plan_children(p, t, n->self, kids, AGG_MAX_KIDS);

		s->local[t] = nk > 0;
		s->root[t] = par < 0;
		s->kid_first[t + 1] = s->kid_first[t];
		for (int k = 0; par < 0 && k < nk && k < AGG_MAX_KIDS; k++)
			s->kid[s->kid_first[t + 1]++] = (struct sockaddr_in){
				.sin_family = AF_INET, .sin_addr = p->node[kids[k]].addr,
				.sin_port = htons(p->port) };
		if (!s->local[t] && par < 0) {
			errno = EINVAL;	/* a worker outside a tree: agg_plan_check forbids */
			goto fail;
		}
		if (par >= 0) {
			s->parent[t].sin_family = AF_INET;
			s->parent[t].sin_addr = p->node[par].addr;
			s->parent[t].sin_port = htons(p->port);
		}
	}
	for (unsigned k = 0; k < s->nstreams; k++)
		if (stream_init(s, &s->st[k], k))
			goto fail;
	if (s->nstreams > 1) {
		s->numa_node = agg_netif_numa_node(&n->nif);
		s->cpus = node_cpus(s->numa_node);
	}
	if (n->fd_events >= 0) {
		s->rb = ring_buffer__new(n->fd_events, event_nop, NULL, NULL);
		if (!s->rb)
			goto fail;
		ring_buffer__consume(s->rb);	/* what came before us */
	}
	cc_load(s);
	return 0;
nomem:
	errno = ENOMEM;
fail:
	{
		int err = -errno;

		agg_sender_free(s);
		errno = -err;
		return err;
	}
}

int agg_sender_listen(struct agg_sender *s)
{
	int fd = agg_signal_socket(s->n);

	if (fd < 0)
		return fd;
	s->sig = fd;
	return 0;
}

static struct agg_hdr *frame_hdr(struct agg_stream *st)
{
	return (struct agg_hdr *)(st->frame + sizeof(struct ethhdr) + sizeof(struct iphdr) +
				  sizeof(struct udphdr));
}

static int32_t *frame_vals(struct agg_stream *st)
{
	return (int32_t *)(frame_hdr(st) + 1);
}

/* The UDP payload at h (an agg header and its values) to dst, waiting
 * while the socket's buffer is full. */
static int send_to(struct agg_stream *st, const struct agg_hdr *h,
		   const struct sockaddr_in *dst)
{
	size_t len = st->s->frame_len - ((uint8_t *)frame_hdr(st) - st->frame);

	while (sendto(st->sock, h, len, 0, (const struct sockaddr *)dst, sizeof(*dst)) < 0) {
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			return -errno;
		usleep(50);
	}
	return 0;
}

/*
 * Our own contribution completed a slot where we are the tree's root (a
 * worker root, RAT): our XDP program stored the result here and handed it
 * back as a RESULT for TC's fan-out, which a BPF_PROG_RUN frame never
 * reaches.  Send it to the tree's children from here, and wake the node's
 * receiver when it completed the iteration (AGG_F_SIGNAL).
 */
static int fan_out(struct agg_stream *st, unsigned t, const struct agg_hdr *h, bool signal)
{
	struct agg_sender *s = st->s;

	for (unsigned k = s->kid_first[t]; k < s->kid_first[t + 1]; k++) {
		int err = send_to(st, h, &s->kid[k]);

		if (err)
			return err;
		st->count[AGG_SST_FANOUT]++;
	}
	if (signal) {
		const struct agg_plan *p = &s->n->plan;
		struct sockaddr_in me = { .sin_family = AF_INET,
					  .sin_addr = p->node[s->n->self].addr,
					  .sin_port = htons(p->port + 1) };

		/* A wake-up only: the receiver reads the results map. */
		if (sendto(st->sock, "", 0, 0, (struct sockaddr *)&me, sizeof(me)) == 0)
			st->count[AGG_SST_SIGNALS]++;
	}
	return 0;
}

/* Send the segment in the frame's header and values, as the attempt-th
 * resend (0: the first transmission). */
static int send_seg(struct agg_stream *st, uint64_t ver, uint32_t seg, unsigned attempt)
{
	struct agg_sender *s = st->s;
	const struct agg_plan *p = &s->n->plan;
	struct agg_hdr *h = frame_hdr(st);
	unsigned t = agg_plan_seg_tree(p, seg);
	int err;

	h->magic = AGG_MAGIC;
	h->type = AGG_T_DATA;
	h->tree = t;
	h->from = s->n->self;
	h->job = p->job;
	h->iter = agg_ver_iter(ver);
	h->run = agg_ver_run(ver);
	h->seg = seg;
	h->attempt = attempt > 0xffff ? 0xffff : attempt;
	h->token = s->n->token;
	if (attempt)
		st->count[AGG_SST_RESENT]++;
	if (s->local[t]) {
		/* Our own contribution enters our own XDP program directly.  A
		 * plain BPF_PROG_RUN: the live-frames mode sets up and tears
		 * down a page pool per call, which costs more than the
		 * aggregation.  When the run completes the slot, the program
		 * returns the aggregate addressed to the parent (XDP_PASS with
		 * AGG_F_UP in the metadata, for TC); here it goes to the parent
		 * from us.  The output is the metadata, then the frame. */
		struct xdp_md ctx = { .data_end = s->frame_len,
				       .ingress_ifindex = s->n->nif.ifindex }, ctx_out;
		const size_t ml = sizeof(struct agg_tcmeta);
		const struct agg_tcmeta *m = (const void *)st->out;
		LIBBPF_OPTS(bpf_test_run_opts, o,
			    .data_in = st->frame, .data_size_in = s->frame_len,
			    .data_out = st->out, .data_size_out = s->frame_len + ml,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
			    .ctx_out = &ctx_out, .ctx_size_out = sizeof(ctx_out), .repeat = 1);

		if (bpf_prog_test_run_opts(s->n->fd_prog, &o))
			return -errno;
		st->count[AGG_SST_LOCAL]++;
		if (o.retval == XDP_DROP)
			return 0;	/* in the slot (or a duplicate, counted) */
		h = (struct agg_hdr *)(st->out + ml + ((uint8_t *)h - st->frame));
		if (o.retval != XDP_PASS || o.data_size_out != s->frame_len + ml ||
		    ctx_out.data != ml || !(m->flags & (AGG_F_UP | AGG_F_FANOUT)))
			return -EPROTO;
		if (m->flags & AGG_F_FANOUT)
			return fan_out(st, t, h, m->flags & AGG_F_SIGNAL);
	}
	err = send_to(st, h, &s->parent[t]);
	if (!err && !s->local[t])
		st->count[AGG_SST_WIRE]++;
	return err;
}

/*
 * When a segment without its result is sent again.  A result acknowledges
 * a segment and comes back only when every worker has sent it, so round
 * trips follow the slowest worker and, under loss, the other workers'
 * resends: their distribution has a long tail whose mean and maximum say
 * little (TCP's mean and deviation grow with every other worker's loss,
 * and their timeouts with them, until recovery takes seconds), while its
 * median is the time a segment needs when nothing goes wrong (on a
 * congested link too, where every round trip is long).  So the timeout is
 * twice a running median of the time from a segment's last send to its
 * result, between RTO_MIN and RTO_STALL, RTO_INIT before the first sample
 * (the workers start at different times), and doubled per resend up to
 * RTO_STALL once nothing at all has come back for RTO_IDLE, so that a dead
 * or cut-off peer is not flooded.
 */
#define RTO_MIN		0.010
#define RTO_INIT	0.200
#define RTO_IDLE	0.100
#define RTO_STALL	1.0
static double rto(const struct agg_stream *s, unsigned attempt, double idle)
{
	double t = 2 * s->rtt_med;

	if (!s->rtt_med)
		return RTO_INIT;
	if (t < RTO_MIN)
		t = RTO_MIN;
	while (idle > RTO_IDLE && attempt-- && t < RTO_STALL)
		t *= 2;
	return t < RTO_STALL ? t : RTO_STALL;
}

/* A running median: steps of 5% of itself towards each sample.  Since
 * the last send, resends too: a sample that an earlier send answered is
 * short, and the median shrugs it off; without resends' samples a
 * congested link, where every segment is resent before its result is
 * back, would give none, and the timeout could never grow. */
static void rtt_sample(struct agg_stream *s, double r)
{
	if (!s->rtt_med)
		s->rtt_med = r > 1e-5 ? r : 1e-5;
	else
		s->rtt_med *= r > s->rtt_med ? 1.05 : 1 / 1.05;
}

/*
 * The congestion window: segments sent to a parent and in the pipe (see
 * run_phase), below the slot pool's limit (the plan's window), kept by
 * the delay of our results, as Swift and TCP Vegas do.  base is the
 * shortest round trip seen (the path with empty queues; on a virtual
 * cluster the whole trip may happen inside the send); once a round trip
 * (a result of a segment sent after the last decision) the standing
 * delay, the shortest trip of that round or the one before, is compared
 * with base + CC_TARGET: below it, the window grows (by one per result in
 * slow start, until the delay reaches half the target; by one a round
 * after), above it, it shrinks in proportion to the excess, by at most
 * half.  So the queues on a worker's path hold about CC_TARGET of its
 * data, whatever the switch's buffer: the incast of every worker at one
 * root stays in a shallow buffer instead of overflowing it (and then
 * every worker resends the losses).  A result that waited for another
 * worker reads as queueing too, and slows a worker that was ahead anyway.
 */
#define REO_MIN		0.001	/* reordering tolerated: RACK's window */
#define CWND_INIT	8
#define CC_TARGET	0.003
static void cc_result(struct agg_stream *s, uint32_t limit, double trip, uint64_t seq)
{
	if (trip > 0 && (!s->rtt_base || trip < s->rtt_base))
		s->rtt_base = trip;
	if (trip > 0 && (!s->rtt_round || trip < s->rtt_round))
		s->rtt_round = trip;
	if (s->slow_start)
		s->cwnd += 1;
	if (seq >= s->round_end && s->rtt_round) {
		/* The shorter of this round's and the last one's: a round
		 * whose every result was late because this process or a
		 * peer's was not scheduled (2 cores, a dozen senders)
		 * reads as queueing; two in a row rarely do. */
		double standing = s->rtt_prev && s->rtt_prev < s->rtt_round ?
				  s->rtt_prev : s->rtt_round;
		double over = standing - s->rtt_base - CC_TARGET;

		if (over <= 0) {
			if (!s->slow_start)
				s->cwnd += 1;
			else if (over > -CC_TARGET / 2 && !s->round_lossy)
				s->slow_start = false;	/* halfway: doubling
							 * again would overshoot */
		} else if (!s->round_lossy) {
			double cut = 0.8 * over / standing;

			s->slow_start = false;
			s->cwnd *= 1 - (cut < 0.5 ? cut : 0.5);
		}
		s->round_end = s->seq;
		s->rtt_prev = s->rtt_round;
		s->rtt_round = 0;
		s->round_lossy = false;
	}
	if (s->cwnd > limit)
		s->cwnd = limit;
	if (s->cwnd < CWND_MIN)
		s->cwnd = CWND_MIN;
}

/* A timeout marks the round lossy, whose delay decides nothing: a
 * segment lost to noise delays every worker's result by a timeout, ours
 * too, so on a lossy link most rounds read as queueing, and cutting there
 * (or ending slow start on a loss, as TCP does) would leave it at a few
 * segments a round trip; queues that fill show in the delay of the clean
 * rounds before they overflow. */
static void cc_timeout(struct agg_stream *s)
{
	s->round_lossy = true;
}

/* Another stream took a wake-up that may be ours too (a result in the
 * ring, the fetch signal): pass it on to every other stream. */
static void kick_others(struct agg_stream *st)
{
	const uint64_t one = 1;

	for (unsigned k = 0; k < st->s->nstreams; k++)
		if (k != st->id && write(st->s->st[k].kick, &one, sizeof(one)) < 0)
			continue;	/* full (2^64 - 2): it wakes anyway */
}

static void drain_kick(struct agg_stream *st)
{
	uint64_t v;

	if (st->s->nstreams > 1 && read(st->kick, &v, sizeof(v)) < 0)
		return;
}

static void drain_signal(struct agg_stream *st)
{
	char buf[64];
	bool got = false;

	while (recv(st->s->sig, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		got = true;
	if (got && st->s->nstreams > 1)
		kick_others(st);
}

/*
 * Wait for something to happen: 50 us while results come in, longer (up
 * to 1 ms) the longer nothing has, and with the fetch signal's socket in
 * poll(), which the call's last result wakes at once.
 */
#define NAP_MIN		50e-6
#define NAP_MAX		1e-3
static void nap(struct agg_stream *st, double idle)
{
	double t = idle < NAP_MIN ? NAP_MIN : idle > NAP_MAX ? NAP_MAX : idle;

	if (st->s->sig >= 0 && t >= NAP_MAX / 2) {
		struct pollfd pfd[2] = { { .fd = st->s->sig, .events = POLLIN },
					 { .fd = st->kick, .events = POLLIN } };

		if (poll(pfd, st->s->nstreams > 1 ? 2 : 1, (int)(t * 1000)) > 0) {
			drain_signal(st);
			drain_kick(st);
		}
		return;
	}
	usleep((useconds_t)(t * 1e6));
}

/*
 * Wait until deadline (agg_now()'s clock), or until a result is stored
 * on the node (the "events" ring) or the fetch signal comes, whichever is
 * first; then empty both.  Without the ring, nap.  At most WAIT_MAX at a
 * time, so the caller looks again even if a wake-up was missed.  The ring
 * has one consumer at a time; a stream that empties it (or the signal's
 * socket) kicks the others, whose wake-up it may have taken.
 */
#define WAIT_MAX	0.05
static void wait_until(struct agg_stream *st, double deadline, double idle)
{
	struct agg_sender *s = st->s;
	struct pollfd pfd[3];
	struct timespec ts;
	double t = deadline - agg_now();
	nfds_t np = 0;
	int got;

	if (!s->rb) {
		nap(st, idle);
		return;
	}
	t = t < 0 ? 0 : t > WAIT_MAX ? WAIT_MAX : t;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	pfd[np++] = (struct pollfd){ .fd = ring_buffer__epoll_fd(s->rb), .events = POLLIN };
	if (s->nstreams > 1)
		pfd[np++] = (struct pollfd){ .fd = st->kick, .events = POLLIN };
	if (s->sig >= 0)
		pfd[np++] = (struct pollfd){ .fd = s->sig, .events = POLLIN };
	if (ppoll(pfd, np, &ts, NULL) <= 0)
		return;
	pthread_mutex_lock(&s->rb_lock);
	got = ring_buffer__consume(s->rb);
	pthread_mutex_unlock(&s->rb_lock);
	if (got > 0 && s->nstreams > 1)
		kick_others(st);
	drain_kick(st);
	if (s->sig >= 0)
		drain_signal(st);
}

struct lane {			/* one slot of the window */
	uint32_t seg;		/* its segment, or UINT32_MAX when all are done */
	bool waiting;		/* seg not sent yet: for the congestion window */
	bool pipe;		/* in the congestion window's count (RFC 6675's
			 * pipe): sent to a parent, not overtaken, no
			 * result, not timed out */
	unsigned attempt;
	uint64_t seq;		/* our send number of its last send */
	double sent;		/* when */
};

/* One phase of a call, shared by the streams that run it. */
struct agg_phase {
	struct agg_send_call *c;
	uint32_t lo, hi;	/* wire segments [lo, hi) */
	uint32_t nl;		/* lanes: min(hi - lo, window) */
	uint8_t op;
	void (*fill)(struct agg_stream *, const struct agg_send_call *, uint32_t);
	double last;		/* when a segment of any stream last moved (atomic) */
	int stop;		/* a stream failed: the others end too (atomic) */
	int probing;		/* PROBE_*: who holds the call up (atomic) */
	char probed[600];	/* what the probes found, " " for nothing */
	pthread_mutex_t lock;	/* err and why */
	int err;
	char *why;
	size_t whylen;
};
enum { PROBE_NOT, PROBE_RUNNING, PROBE_DONE };

static double phase_last(struct agg_phase *ph)
{
	double v;

	__atomic_load(&ph->last, &v, __ATOMIC_ACQUIRE);
	return v;
}

static void phase_moved(struct agg_phase *ph, double t)
{
	double cur = phase_last(ph);
	int done = PROBE_DONE;

	while (t > cur && !__atomic_compare_exchange(&ph->last, &cur, &t, false,
						       __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		;
	/* moving again: ask anew next time */
	__atomic_compare_exchange_n(&ph->probing, &done, PROBE_NOT, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

/* The first failure of the phase is the call's; every stream then ends. */
static void phase_fail(struct agg_phase *ph, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void phase_fail(struct agg_phase *ph, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&ph->lock);
	if (!ph->err) {
		ph->err = err;
		va_start(ap, fmt);
		vsnprintf(ph->why, ph->whylen, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&ph->lock);
	__atomic_store_n(&ph->stop, 1, __ATOMIC_RELEASE);
}

static void timeout_fail(struct agg_stream *st, struct agg_phase *ph)
{
	const struct agg_send_call *c = ph->c;
	bool probed = __atomic_load_n(&ph->probing, __ATOMIC_ACQUIRE) == PROBE_DONE &&
		      ph->probed[0] != ' ';
	char ranges[512];

	agg_node_missing_ranges(st->s->n, ph->lo, ph->hi, c->ver, ranges, sizeof(ranges));
	phase_fail(ph, -ETIMEDOUT, "iteration %u: %u of %u %ssegments not aggregated after %g s "
		   "without progress (wire segments %s)%s%s", agg_ver_iter(c->ver),
		   agg_node_missing(st->s->n, ph->lo, ph->hi, c->ver), ph->hi - ph->lo,
		   ph->lo < st->s->n->l.nexp ? "exponent " : "", c->timeout, ranges,
		   probed ? ": " : "", probed ? ph->probed : "");
}

/* Lanes of stream k among the first n of the window: j = k, k + N, ... */
static uint32_t stream_lanes(const struct agg_sender *s, unsigned k, uint32_t n)
{
	return n > k ? (n - k + s->nstreams - 1) / s->nstreams : 0;
}

/*
 * Send a stream's share of wire segments [lo, hi) through its lanes of
 * the window: lane j carries segments lo + j, lo + j + window, ..., and
 * may send the next one once the result of the one before is on this
 * node (the result acknowledges it), so a node never holds more than the
 * window of ours (the slot pool holds two windows, so a slot is reused
 * only when every worker has its last result); and only while fewer than
 * the stream's congestion window of first sends wait for their results.
 * Lane j belongs to stream j mod nstreams, so every lane has one stream
 * and no two of a node's segments in flight share a slot, whatever the
 * number of streams.  A lane stuck on a lost segment holds up only its
 * own next one.  ph->fill(st, c, seg) puts a segment's values into the
 * stream's frame.
 */
static void stream_phase(struct agg_stream *st, struct agg_phase *ph)
{
	struct agg_sender *s = st->s;
	const struct agg_plan *p = &s->n->plan;
	struct agg_send_call *c = ph->c;
	uint32_t window = s->n->l.window, lo = ph->lo, hi = ph->hi;
	uint32_t nl = stream_lanes(s, st->id, ph->nl), busy = nl;
	uint32_t share = stream_lanes(s, st->id, window);	/* the congestion window's limit */
	uint32_t inflight = 0;	/* lanes in the pipe */
	struct lane *lane;
	double *rack, t, budget = agg_probe_budget(c->timeout);
	int err = 0;

	if (!nl)
		return;
	lane = calloc(nl, sizeof(*lane));
	rack = calloc(p->ntrees ? p->ntrees : 1, sizeof(*rack));
	if (!lane || !rack) {
		free(lane);
		free(rack);
		phase_fail(ph, -ENOMEM, "out of memory");
		return;
	}
	if (s->cc_off) {
		st->cwnd = share;
	} else if (st->cwnd > share) {
		st->cwnd = share;
	} else if (st->cwnd && st->cwnd < CWND_MIN) {
		st->cwnd = CWND_MIN < share ? CWND_MIN : share;
	} else if (!st->cwnd) {
		/* The streams start with one stream's window between them. */
		uint32_t init = (CWND_INIT + s->nstreams - 1) / s->nstreams;

		init = init < CWND_MIN ? CWND_MIN : init;
		st->cwnd = init < share ? init : share;
		st->slow_start = true;
	}
	for (uint32_t i = 0; i < nl; i++)
		lane[i] = (struct lane){ .seg = lo + st->id + i * s->nstreams, .waiting = true };
	frame_hdr(st)->op = ph->op;
	while (busy && !err) {
		bool moved = false, probed;
		unsigned tree;
		double next, last = phase_last(ph);
		double reo = st->rtt_base / 4 > REO_MIN ? st->rtt_base / 4 : REO_MIN;

		t = agg_now();
		probed = __atomic_load_n(&ph->probing, __ATOMIC_ACQUIRE) == PROBE_DONE;
		next = last + c->timeout - (probed ? 0 : budget);
		for (uint32_t j = 0; j < nl && !err; j++) {
			struct lane *l = &lane[j];
			bool root;
			double due;

			if (l->seg == UINT32_MAX)
				continue;
			tree = agg_plan_seg_tree(p, l->seg);
			root = s->root[tree];
			if (!l->waiting && !agg_node_missing(s->n, l->seg, l->seg + 1, c->ver)) {
				rtt_sample(st, t - l->sent);
				if (!s->local[tree] && !s->cc_off)
					cc_result(st, share, l->attempt ? 0 : t - l->sent, l->seq);
				if (!l->attempt && l->sent > rack[tree])
					rack[tree] = l->sent;
				if (l->pipe)
					inflight--;
				moved = true;
				last = t;
				phase_moved(ph, t);
				if ((uint64_t)l->seg + window >= hi) {
					l->seg = UINT32_MAX;
					busy--;
					continue;
				}
				*l = (struct lane){ .seg = l->seg + window, .waiting = true };
				tree = agg_plan_seg_tree(p, l->seg);
				root = s->root[tree];
			}
			/* Overtaken (RACK, RFC 8985): a segment we sent later on
			 * its tree has its result, so this one is lost or waits
			 * for another worker, in no queue of ours either way:
			 * out of the pipe, or under loss a window of segments
			 * waiting for other workers' resends would hold up every
			 * new one until its timeout.  (On one path, queues are
			 * FIFO: congestion never reorders; a stream's path is
			 * one flow.) */
			if (l->pipe && l->sent + reo < rack[tree]) {
				l->pipe = false;
				inflight--;
			}
			if (l->waiting) {
				continue;	/* below, in order */
			} else if (root) {
				continue;	/* our own went into our own program:
						 * it cannot be lost */
			} else if (t >= l->sent + rto(st, l->attempt, t - last)) {
				cc_timeout(st);
				/* Lost: out of the congestion window's count
				 * (RFC 6675's pipe), or a lossy link would
				 * fill it with segments waiting for resends. */
				if (l->pipe)
					inflight--;
				l->pipe = false;
				l->attempt++;
			} else {
				due = l->sent + rto(st, l->attempt, t - last);
				if (due < next)
					next = due;
				continue;
			}
			ph->fill(st, c, l->seg);
			/* When it leaves: on one machine the whole round trip
			 * may happen inside the send. */
			l->sent = agg_now();
			l->seq = st->seq++;
			err = send_seg(st, c->ver, l->seg, l->attempt);
			due = l->sent + rto(st, l->attempt, t - last);
			if (!root && due < next)
				next = due;
		}
		/* New segments, each once its lane's one before has its result,
		 * lowest segment first: results complete on every worker at
		 * once, so every worker then sends the same segments in the
		 * same order, and a segment one worker sends waits for no
		 * other worker's turn (taking lanes in their own order, the
		 * workers drifted apart under loss, and each resent segments
		 * the others had not sent yet).  Those for a parent while the
		 * congestion window has room; our own contributions to trees
		 * we aggregate in (BPF_PROG_RUN) whenever their lane is free:
		 * they cross no link, and our children wait for them. */
		for (bool full = false; !err;) {
			struct lane *l = NULL;

			full = full || inflight >= (uint32_t)st->cwnd;
			for (uint32_t j = 0; j < nl; j++)
				if (lane[j].waiting && lane[j].seg != UINT32_MAX &&
				    (!l || lane[j].seg < l->seg) &&
				    (!full || s->local[agg_plan_seg_tree(p, lane[j].seg)]))
					l = &lane[j];
			if (!l)
				break;
			tree = agg_plan_seg_tree(p, l->seg);
			ph->fill(st, c, l->seg);
			l->waiting = false;
			l->sent = agg_now();
			l->seq = st->seq++;
			err = send_seg(st, c->ver, l->seg, 0);
			if (!s->local[tree]) {
				l->pipe = true;
				inflight++;
			}
			if (!s->root[tree] && l->sent + rto(st, 0, 0) < next)
				next = l->sent + rto(st, 0, 0);
		}
		if (err || !busy || __atomic_load_n(&ph->stop, __ATOMIC_ACQUIRE))
			break;
		last = phase_last(ph);
		if (agg_now() - last > c->timeout - budget) {
			int not = PROBE_NOT;

			/* One stream asks who holds the call up, for all. */
			if (__atomic_compare_exchange_n(&ph->probing, &not, PROBE_RUNNING, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				ph->probed[0] = '\0';
				agg_explain_missing(s->n, c->ver, lo, hi, (int)(budget * 800),
						    ph->probed, sizeof(ph->probed));
				if (!ph->probed[0])
					snprintf(ph->probed, sizeof(ph->probed), "%s", " ");
				__atomic_store_n(&ph->probing, PROBE_DONE, __ATOMIC_RELEASE);
			}
		}
		if (agg_now() - phase_last(ph) > c->timeout) {
			timeout_fail(st, ph);
			break;
		}
		if (!moved || s->rb)
			wait_until(st, next, agg_now() - phase_last(ph));
	}
	free(lane);
	free(rack);
	if (err)
		phase_fail(ph, err, "cannot send: %s", strerror(-err));
}

static void *stream_main(void *arg)
{
	struct agg_stream *st = arg;
	struct agg_phase *ph = st->s->phase;

	if (st->s->cpus)
		numa_sched_setaffinity(0, st->s->cpus);
	stream_phase(st, ph);
	return NULL;
}

/*
 * Run wire segments [lo, hi) on every stream that has a lane of them:
 * stream 0 on this thread, the others on threads of their own, and
 * return when all are done (so the exponent phase is over on every
 * stream before any sends a data segment, which needs the exponents).
 * 0, or the first stream's failure (why says what): -ETIMEDOUT when
 * nothing moved on any stream for c->timeout.
 */
static int run_phase(struct agg_sender *s, struct agg_send_call *c, uint32_t lo, uint32_t hi,
		     uint8_t op, void (*fill)(struct agg_stream *, const struct agg_send_call *,
					      uint32_t),
		     char *why, size_t whylen)
{
	uint32_t window = s->n->l.window;
	struct agg_phase ph = { .c = c, .lo = lo, .hi = hi, .op = op, .fill = fill,
			    .last = agg_now(), .why = why, .whylen = whylen };
	pthread_t th[AGG_MAX_STREAMS];
	unsigned nrun, started = 1;

	ph.nl = hi - lo < window ? hi - lo : window;
	nrun = ph.nl < s->nstreams ? ph.nl : s->nstreams;
	pthread_mutex_init(&ph.lock, NULL);
	s->phase = &ph;
	for (unsigned k = 1; k < nrun; k++, started++) {
		int err = pthread_create(&th[k], NULL, stream_main, &s->st[k]);

		if (err) {
			phase_fail(&ph, -err, "cannot start stream %u: %s", k, strerror(err));
			break;
		}
	}
	if (!ph.err)
		stream_phase(&s->st[0], &ph);
	for (unsigned k = 1; k < started; k++)
		pthread_join(th[k], NULL);
	s->phase = NULL;
	pthread_mutex_destroy(&ph.lock);
	return ph.err;
}

static void fill_exp(struct agg_stream *st, const struct agg_send_call *c, uint32_t seg)
{
	const struct agg_layout *l = &st->s->n->l;
	uint32_t ndata, nexp;
	int32_t *v = frame_vals(st);

	agg_call_segs(l, c->nvalues, &ndata, &nexp);
	for (uint32_t i = 0; i < l->segment; i++) {
		uint64_t d = (uint64_t)seg * l->segment + i;

		v[i] = d < ndata ? st->s->exps[d] : AGG_EXP_ZERO;
	}
}

static void fill_data(struct agg_stream *st, const struct agg_send_call *c, uint32_t seg)
{
	const struct agg_layout *l = &st->s->n->l;
	uint32_t d = seg - l->nexp;
	uint64_t first = (uint64_t)d * l->segment;
	size_t n = c->nvalues - first < l->segment ? c->nvalues - first : l->segment;

	agg_quantize(c->x + first, n, l->segment, agg_node_exponent(st->s->n, d), l->shift,
		     frame_hdr(st)->op, frame_vals(st));
}

/* Tell the node's XDP program how many data segments version ver has, so
 * that the packet storing the last one becomes the fetch signal (a call
 * shorter than the plan's size); before anything of ver is sent. */
static void expect_segs(struct agg_sender *s, uint64_t ver, uint32_t ndata)
{
	struct agg_progress pg = { .ver = ver, .want = ndata };
	uint32_t k = (uint32_t)ver % AGG_PROGRESS_SLOTS;

	if (s->sig >= 0 && s->n->fd_progress >= 0)
		bpf_map_update_elem(s->n->fd_progress, &k, &pg, BPF_F_LOCK);
}

int agg_send_run(struct agg_sender *s, struct agg_send_call *c, char *why, size_t whylen)
{
	const struct agg_layout *l = &s->n->l;
	uint32_t ndata, nexp;
	int err;

	if (!c->nvalues || c->nvalues > l->nvalues) {
		snprintf(why, whylen, "%llu values: the plan takes 1 to %llu",
			 (unsigned long long)c->nvalues, (unsigned long long)l->nvalues);
		return -EINVAL;
	}
	agg_call_segs(l, c->nvalues, &ndata, &nexp);
	c->nonfinite = 0;
	for (uint32_t d = 0; d < ndata; d++) {
		uint64_t first = (uint64_t)d * l->segment;
		size_t cnt = c->nvalues - first < l->segment ? c->nvalues - first : l->segment;

		s->exps[d] = agg_quant_exponent(c->x + first, cnt, &c->nonfinite);
	}
	expect_segs(s, c->ver, ndata);
	/* More than one stream: this thread is stream 0, and runs where the
	 * other streams' threads do. */
	if (s->nstreams > 1 && s->cpus && !s->pinned) {
		numa_sched_setaffinity(0, s->cpus);
		s->pinned = true;
	}
	/* Phase 0: the exponents, max-reduced; phase 1: the values. */
	err = run_phase(s, c, 0, nexp, AGG_OP_MAX, fill_exp, why, whylen);
	if (!err)
		err = run_phase(s, c, l->nexp, l->nexp + ndata, c->op, fill_data, why, whylen);
	return err;
}
