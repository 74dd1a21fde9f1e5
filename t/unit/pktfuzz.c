// SPDX-License-Identifier: GPL-2.0-only
/*
 * pktfuzz: hostile packets for the data-plane tests (t/0430, t/0440).
 *
 *   pktfuzz run [--count N] [--seed S] [--iter I] [--iter-max M] [--trace FILE] [TARGET]
 *	Valid, truncated, mutated and random packets (and agg headers of
 *	random bytes) through the loaded node's XDP program by BPF_PROG_RUN:
 *	a plain run, so nothing leaves the host.  After every packet it reads
 *	the node's counters and checks that they account for it: other + rx
 *	grew by one, rx by as much as the outcome counters.  Prints "name
 *	value" lines: packets, run, refused (shorter than an Ethernet header:
 *	the kernel runs no such frame), the verdicts, max_iter (the highest
 *	iteration of a packet with the job and its token), unaccounted, the
 *	counters' deltas and which verdict each outcome came with.
 *   pktfuzz state [TARGET]
 *	Check the slot pool's invariants; print digests of the node's maps.
 *   pktfuzz send --plan FILE [--to NODE] [--dev DEV] [--count N]
 *		  [--duration SEC] [--rate PPS] SPEC...
 *	Crafted agg packets out of this namespace through AF_PACKET (any
 *	source address), each SPEC --count times in turn, or round and round
 *	for --duration seconds (SIGTERM or SIGINT ends it sooner, the
 *	counts printed as at the end).  A SPEC is key=value,... on top of a valid
 *	DATA packet of the plan from this host: src (address or node; hdr.from
 *	follows a node), smac (a node's MAC, by ARP, or aa:bb:cc:dd:ee:ff),
 *	dst (node, else --to), dstip (the IP destination, to dst's MAC), from, type (data, result,
 *	request, probe or a number), op, magic, flags, tree, job, iter, seg,
 *	run, attempt, token, len (frame bytes: cut or zero-padded), val (every
 *	value), dport; for the sparse types (type sparse, sparse_end,
 *	sparse_ack, sparse_result: tree 0, op sum) width, npairs, npkts; and
 *	the IP header: ihl (5 to 15, the options all NOPs) and frag (first:
 *	the first 40 bytes of the datagram with more-fragments set; rest: the
 *	remainder at offset 40; the two of a round have the same IP id, so a
 *	"frag=rest" and a "frag=first" spec make one datagram).
 *
 * TARGET: --job, --node, --pin-dir as for agg-stat(1).  Exit status: 0 ok,
 * 1 a check failed (accounting, slot invariants), 2 bad usage or input,
 * 3 system failure.
 */
#include <argp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <netpacket/packet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dp.h"
#include "log.h"
#include "opts.h"
#include "plan.h"
#include "rand.h"

#define IP_OFF		14
#define UDP_OFF		34
#define HDR_OFF		42
#define VAL_OFF		74
#define MAX_FRAME	9014	/* a jumbo frame: MTU 9000 + Ethernet */

static const char *const stat_names[] = AGG_STAT_NAMES;

static struct {
	enum { M_NONE, M_RUN, M_STATE, M_SEND } mode;
	uint64_t count;
	uint64_t seed;
	uint32_t iter;
	uint32_t iter_max;
	uint32_t run;
	const char *trace;
	const char *plan;
	const char *to;
	const char *dev;
	double duration;
	double rate;
	char **specs;
	int nspecs;
} env = { .count = 1000, .seed = 1, .iter = 1, .iter_max = 0x7fffffff, .dev = "eth0",
	.rate = 20000 };

enum { OPT_COUNT = 0x100, OPT_SEED, OPT_ITER, OPT_ITER_MAX, OPT_TRACE, OPT_PLAN, OPT_TO,
       OPT_DEV, OPT_DURATION, OPT_RATE, OPT_RUN };

static const char doc[] =
"pktfuzz run|state|send: hostile packets for the data-plane tests.\n"
"\n"
"  run    valid, truncated, mutated and random packets through the node's\n"
"         XDP program (BPF_PROG_RUN), checking the counters per packet\n"
"  state  check the slot pool; print digests of the node's maps\n"
"  send   crafted packets from this namespace (AF_PACKET); a SPEC is\n"
"         key=value,... with keys src smac dst dstip from type op magic flags tree\n"
"         job iter seg run attempt token len val dport width npairs npkts\n"
"         ihl frag\n"
"\v"
"Exit status: 0 ok, 1 a check failed, 2 bad usage, 3 system failure.";

static const struct argp_option options[] = {
	{ "count", OPT_COUNT, "N", 0, "run: packets (default 1000); send: rounds", 0 },
	{ "seed", OPT_SEED, "S", 0, "Random seed (default 1)", 0 },
	{ "iter", OPT_ITER, "I", 0, "run: valid packets use iterations I to I+3 (default 1)", 0 },
	{ "iter-max", OPT_ITER_MAX, "M", 0,
	  "run: fold the iteration of a packet with the job's token to at most M\n"
	  "(default 2^31-1), so a real iteration can run above every one", 0 },
	{ "run", OPT_RUN, "R", 0,
	  "The run of valid packets, and of every packet with the job's token in\n"
	  "run (default 0: a newer run would end the test's)", 0 },
	{ "trace", OPT_TRACE, "FILE", 0, "run: write every unaccounted packet to FILE", 0 },
	{ "plan", OPT_PLAN, "FILE", 0, "send: the plan the target runs", 0 },
	{ "to", OPT_TO, "NODE", 0, "send: the default destination node", 0 },
	{ "dev", OPT_DEV, "DEV", 0, "send: the interface to send on (default eth0)", 0 },
	{ "duration", OPT_DURATION, "SEC", 0, "send: repeat the specs for SEC seconds", 0 },
	{ "rate", OPT_RATE, "PPS", 0, "send: packets per second (default 20000)", 0 },
	{ 0 }
};

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	unsigned long long v;
	double d;
	char *end;

	switch (key) {
	case OPT_COUNT:
	case OPT_SEED:
	case OPT_ITER:
	case OPT_ITER_MAX:
		errno = 0;
		v = strtoull(arg, &end, 0);
		if (errno || end == arg || *end || *arg == '-' ||
		    (key >= OPT_ITER && v >= UINT32_MAX - 4))
			argp_error(state, "bad number '%s'", arg);
		if (key == OPT_COUNT)
			env.count = v;
		else if (key == OPT_SEED)
			env.seed = v;
		else if (key == OPT_ITER)
			env.iter = (uint32_t)v;
		else
			env.iter_max = (uint32_t)v;
		break;
	case OPT_RUN:
		env.run = agg_argp_run(state, arg);
		break;
	case OPT_TRACE:
		env.trace = arg;
		break;
	case OPT_PLAN:
		env.plan = arg;
		break;
	case OPT_TO:
		env.to = arg;
		break;
	case OPT_DEV:
		env.dev = arg;
		break;
	case OPT_DURATION:
	case OPT_RATE:
		if (agg_parse_double(arg, &d, NULL) || !(d > 0) || d > 1e7)
			argp_error(state, "bad number '%s'", arg);
		if (key == OPT_DURATION)
			env.duration = d;
		else
			env.rate = d;
		break;
	case ARGP_KEY_ARG:
		if (env.mode == M_NONE) {
			if (!strcmp(arg, "run"))
				env.mode = M_RUN;
			else if (!strcmp(arg, "state"))
				env.mode = M_STATE;
			else if (!strcmp(arg, "send"))
				env.mode = M_SEND;
			else
				argp_error(state, "unknown command '%s' (run, state or send)", arg);
		} else if (env.mode == M_SEND) {
			env.specs = realloc(env.specs, (env.nspecs + 1) * sizeof(*env.specs));
			if (!env.specs)
				argp_failure(state, AGG_EXIT_SYSTEM, ENOMEM, "specs");
			env.specs[env.nspecs++] = arg;
		} else {
			argp_error(state, "unexpected argument '%s'", arg);
		}
		break;
	case ARGP_KEY_END:
		if (env.mode == M_NONE)
			argp_error(state, "say run, state or send");
		if (env.iter + 3 > env.iter_max)
			argp_error(state, "--iter %u is above --iter-max %u", env.iter, env.iter_max);
		if (env.mode == M_SEND && (!env.plan || !env.nspecs))
			argp_error(state, "send needs --plan and at least one SPEC");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- frames ------------------------------------------------------------ */

/* One agg frame as the data plane expects it (man 7 agg-wire). */
struct frame {
	struct in_addr src, dst;
	uint8_t smac[6], dmac[6];
	uint16_t sport, dport;		/* host order */
	struct agg_hdr h;
	int vals;			/* 0 random small, 1 random, 2 extremes, 3 all val */
	int32_t val;
	bool sparse;			/* sh and pairs after h, not a segment */
	struct agg_sparse_hdr sh;
};

/* The checksum of an IP header of ihl 32-bit words. */
static uint16_t ip_csum_len(const void *hdr, int ihl)
{
	const uint16_t *w = hdr;
	uint32_t sum = 0;

	for (int i = 0; i < 2 * ihl; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint16_t ip_csum(const void *hdr)
{
	return ip_csum_len(hdr, 5);
}

static size_t body_len(const struct frame *f, uint32_t segment)
{
	if (f->sparse)
		return sizeof(f->sh) + f->sh.npairs * (8 + 4 * (size_t)f->sh.width);
	return f->h.type == AGG_T_PROBE ? sizeof(struct agg_probe) : 4 * (size_t)segment;
}

static int32_t value(struct agg_rand *r, const struct frame *f)
{
	static const int32_t extreme[] = { 0, 1, -1, AGG_POISON_HI, AGG_POISON_LO,
					   1 << 30, -(1 << 30), AGG_EXP_ZERO };

	switch (f->vals) {
	case 0:
		return (int32_t)agg_rand_below(r, 1 << 21) - (1 << 20);
	case 1:
		return (int32_t)agg_rand_u64(r);
	case 2:
		return extreme[agg_rand_below(r, sizeof(extreme) / sizeof(extreme[0]))];
	default:
		return f->val;
	}
}

/* Write f into buf; returns the frame's length (header and values). */
static size_t frame_build(uint8_t *buf, const struct frame *f, uint32_t segment,
			  struct agg_rand *r)
{
	size_t body = body_len(f, segment), len = VAL_OFF + body;
	struct ethhdr *eth = (struct ethhdr *)buf;
	struct iphdr ip = { .version = 4, .ihl = 5, .ttl = 64, .protocol = IPPROTO_UDP };
	struct udphdr udp = { 0 };

	memset(buf, 0, len);
	memcpy(eth->h_dest, f->dmac, 6);
	memcpy(eth->h_source, f->smac, 6);
	eth->h_proto = htons(ETH_P_IP);
	ip.tot_len = htons((uint16_t)(len - IP_OFF));
	ip.saddr = f->src.s_addr;
	ip.daddr = f->dst.s_addr;
	ip.check = ip_csum(&ip);
	memcpy(buf + IP_OFF, &ip, sizeof(ip));
	udp.source = htons(f->sport);
	udp.dest = htons(f->dport);
	udp.len = htons((uint16_t)(len - UDP_OFF));
	memcpy(buf + UDP_OFF, &udp, sizeof(udp));
	memcpy(buf + HDR_OFF, &f->h, sizeof(f->h));
	if (f->sparse) {
		memcpy(buf + VAL_OFF, &f->sh, sizeof(f->sh));
		for (size_t i = sizeof(f->sh); i + 4 <= body; i += 4) {
			int32_t v = value(r, f);

			memcpy(buf + VAL_OFF + i, &v, 4);
		}
	} else if (f->h.type != AGG_T_PROBE)
		for (uint32_t i = 0; i < segment; i++) {
			int32_t v = value(r, f);

			memcpy(buf + VAL_OFF + 4 * i, &v, 4);
		}
	return len;
}

/* ---- run: the fuzzer ---------------------------------------------------- */

enum { C_VALID, C_TRUNC, C_MUTATE, C_RANDOM, C_GARBAGE, C_COUNT };
static const char *const class_names[] = { "valid", "truncated", "mutated", "random",
					   "garbage" };

struct tmpl {
	uint8_t type;
	uint16_t tree;
	int from;
};

struct fuzz {
	struct agg_node *n;
	struct agg_rand r;
	struct tmpl *t;
	int nt;
	uint8_t (*mac)[6];	/* per node: its MAC, from the node's "nodes" map */
	uint32_t **offs;	/* per tree: offsets within the period that map to it */
	uint32_t *noffs;
	uint64_t trunc_next;
};

static uint64_t rnd(struct fuzz *z, uint64_t n)
{
	return agg_rand_below(&z->r, n);
}

static void tmpl_add(struct fuzz *z, uint8_t type, int tree, int from)
{
	z->t[z->nt++] = (struct tmpl){ type, (uint16_t)tree, from };
}

/* The templates: DATA and REQUEST from every child (and from ourselves when
 * we aggregate as a worker too), RESULT from the parent, PROBE from anyone. */
static int fuzz_init(struct fuzz *z, struct agg_node *n)
{
	const struct agg_plan *p = &n->plan;
	bool worker = p->node[n->self].role == AGG_ROLE_WORKER;

	memset(z, 0, sizeof(*z));
	z->n = n;
	agg_rand_seed(&z->r, env.seed);
	z->t = calloc((size_t)p->ntrees * (2 * p->nnodes + 3) + p->nnodes, sizeof(*z->t));
	z->offs = calloc(p->ntrees, sizeof(*z->offs));
	z->noffs = calloc(p->ntrees, sizeof(*z->noffs));
	z->mac = calloc(p->nnodes, sizeof(*z->mac));
	if (!z->t || !z->offs || !z->noffs || !z->mac)
		return -ENOMEM;
	{
		char path[600];
		int fd;

		snprintf(path, sizeof(path), "%s/nodes", n->dir);
		fd = bpf_obj_get(path);
		if (fd < 0)
			return -errno;
		for (uint32_t i = 0; i < (uint32_t)p->nnodes; i++) {
			struct agg_node_info ni;

			if (!bpf_map_lookup_elem(fd, &i, &ni))
				memcpy(z->mac[i], ni.mac, 6);
		}
		close(fd);
	}
	for (int t = 0; t < p->ntrees; t++) {
		const int *par = p->tree[t].parent;
		bool kids = false;

		for (int c = 0; c < p->nnodes; c++)
			if (par[c] == n->self) {
				tmpl_add(z, AGG_T_DATA, t, c);
				tmpl_add(z, AGG_T_REQUEST, t, c);
				kids = true;
			}
		if (kids && worker) {
			tmpl_add(z, AGG_T_DATA, t, n->self);
			tmpl_add(z, AGG_T_REQUEST, t, n->self);
		}
		if (par[n->self] >= 0)
			tmpl_add(z, AGG_T_RESULT, t, par[n->self]);
		z->offs[t] = calloc(p->period, sizeof(**z->offs));
		if (!z->offs[t])
			return -ENOMEM;
		for (uint32_t o = 0; o < p->period && o < n->l.nsegs; o++)
			if (p->seg_map[o] == t)
				z->offs[t][z->noffs[t]++] = o;
	}
	for (int i = 0; i < p->nnodes; i++)
		tmpl_add(z, AGG_T_PROBE, agg_plan_seg_tree(p, 0), i);
	return 0;
}

static uint32_t pick_seg(struct fuzz *z, int tree)
{
	const struct agg_layout *l = &z->n->l;
	uint32_t period = z->n->plan.period, o, k;

	if (!z->noffs[tree])
		return (uint32_t)rnd(z, l->nsegs);
	o = z->offs[tree][rnd(z, z->noffs[tree])];
	if (rnd(z, 8) == 0)	/* the first or the last segment of the tree */
		k = rnd(z, 2) ? 0 : (l->nsegs - 1 - o) / period;
	else if (rnd(z, 8) == 0 && l->nexp > o)	/* around the exponents' end */
		k = (l->nexp - 1 - o) / period + (uint32_t)rnd(z, 2);
	else
		k = (uint32_t)rnd(z, (l->nsegs - 1 - o) / period + 1);
	if ((uint64_t)k * period + o >= l->nsegs)
		k = (l->nsegs - 1 - o) / period;
	return k * period + o;
}

static size_t fuzz_valid(struct fuzz *z, uint8_t *buf)
{
	const struct agg_plan *p = &z->n->plan;
	const struct tmpl *t = &z->t[rnd(z, z->nt)];
	const struct agg_host *self = &p->node[z->n->self];
	struct frame f = { .sport = p->port, .dport = p->port };
	uint32_t seg = t->type == AGG_T_PROBE ? (uint32_t)rnd(z, z->n->l.nsegs) :
		       pick_seg(z, t->tree);

	f.src = p->node[t->from].addr;
	f.dst = self->addr;
	memcpy(f.dmac, z->n->nif.mac, 6);
	memcpy(f.smac, z->mac[t->from], 6);
	f.h.magic = AGG_MAGIC;
	f.h.type = t->type;
	if (seg < z->n->l.nexp)
		f.h.op = AGG_OP_MAX;
	else
		f.h.op = rnd(z, 4) ? AGG_OP_SUM : (uint8_t)rnd(z, AGG_OP_COUNT);
	f.h.tree = t->type == AGG_T_PROBE ? agg_plan_seg_tree(p, seg) : t->tree;
	f.h.from = (uint16_t)t->from;
	f.h.job = p->job;
	f.h.iter = env.iter + (uint32_t)rnd(z, 4);
	f.h.run = (uint16_t)env.run;
	f.h.seg = seg;
	f.h.attempt = rnd(z, 8) ? 0 : (uint16_t)(1 + rnd(z, 5));
	f.h.token = z->n->token;
	f.vals = (int)rnd(z, 3);
	return frame_build(buf, &f, p->segment, &z->r);
}

static const struct field {
	uint16_t off, size;
	bool be;		/* network order */
} fields[] = {
	{ 12, 2, true },	/* eth proto */
	{ 14, 1, false },	/* ip version, ihl */
	{ 16, 2, true },	/* ip tot_len */
	{ 20, 2, true },	/* ip frag_off */
	{ 23, 1, false },	/* ip protocol */
	{ 26, 4, true },	/* ip saddr */
	{ 30, 4, true },	/* ip daddr */
	{ 36, 2, true },	/* udp dest */
	{ 38, 2, true },	/* udp len */
	{ 42, 1, false },	/* magic */
	{ 43, 1, false },	/* type */
	{ 44, 1, false },	/* op */
	{ 45, 1, false },	/* flags */
	{ 46, 2, false },	/* tree */
	{ 48, 2, false },	/* from */
	{ 50, 4, false },	/* job */
	{ 54, 4, false },	/* iter */
	{ 58, 4, false },	/* seg */
	{ 62, 2, false },	/* run */
	{ 64, 2, false },	/* attempt */
	{ 66, 8, false },	/* token */
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static uint64_t field_get(const uint8_t *buf, const struct field *fd)
{
	uint64_t v = 0;

	for (int i = 0; i < fd->size; i++)
		v |= (uint64_t)buf[fd->off + (fd->be ? fd->size - 1 - i : i)] << (8 * i);
	return v;
}

static void field_set(uint8_t *buf, const struct field *fd, uint64_t v)
{
	for (int i = 0; i < fd->size; i++)
		buf[fd->off + (fd->be ? fd->size - 1 - i : i)] = (uint8_t)(v >> (8 * i));
}

/* A value worth trying in a field: boundaries, neighbours, plan values. */
static uint64_t field_value(struct fuzz *z, const struct field *fd, uint64_t cur)
{
	const struct agg_plan *p = &z->n->plan;
	const struct agg_layout *l = &z->n->l;
	uint64_t mask = fd->size == 8 ? ~0ULL : (1ULL << (8 * fd->size)) - 1;
	const uint64_t plan_vals[] = {
		l->nsegs, l->nsegs - 1, l->nexp, l->nexp - 1, (uint64_t)p->nnodes,
		(uint64_t)p->ntrees, p->segment, p->segment + 1, p->segment - 1,
		sizeof(struct agg_probe), 4 * (uint64_t)p->segment, p->job, p->job + 1,
		z->n->token, z->n->token ^ 1, p->port, p->port + 1,
		ntohl(p->node[rnd(z, p->nnodes)].addr.s_addr), rnd(z, p->nnodes),
	};

	switch (rnd(z, 9)) {
	case 0: return 0;
	case 1: return mask;
	case 2: return (cur + 1) & mask;
	case 3: return (cur - 1) & mask;
	case 4: return cur ^ (1ULL << rnd(z, 8 * fd->size));
	case 5: return agg_rand_u64(&z->r) & mask;
	case 6: return rnd(z, 8);
	default: return plan_vals[rnd(z, sizeof(plan_vals) / sizeof(plan_vals[0]))] & mask;
	}
}

static size_t fuzz_mutate(struct fuzz *z, uint8_t *buf)
{
	size_t len = fuzz_valid(z, buf);
	int edits = 1 + (int)rnd(z, 8);

	while (edits--) {
		switch (rnd(z, 6)) {
		case 0:		/* any byte */
			if (len)
				buf[rnd(z, len)] = (uint8_t)rnd(z, 256);
			break;
		case 1:		/* a bit of the headers */
			buf[rnd(z, VAL_OFF)] ^= (uint8_t)(1 << rnd(z, 8));
			break;
		case 2:		/* the frame's length, not the headers' */
			if (rnd(z, 2)) {
				size_t d = 1 + rnd(z, 8);

				len = len > d ? len - d : 0;
			} else {
				size_t d = 1 + rnd(z, rnd(z, 4) ? 8 : MAX_FRAME);

				if (len + d > MAX_FRAME)
					d = MAX_FRAME - len;
				for (size_t i = 0; i < d; i++)
					buf[len + i] = (uint8_t)rnd(z, 256);
				len += d;
			}
			break;
		default: {	/* a header field */
			const struct field *fd = &fields[rnd(z, NFIELDS)];

			if (fd->off + fd->size <= len)
				field_set(buf, fd, field_value(z, fd, field_get(buf, fd)));
			break;
		}
		}
	}
	return len;
}

/* Every length of valid packets in turn: 0, 1, ..., the whole frame - 1. */
static size_t fuzz_truncate(struct fuzz *z, uint8_t *buf)
{
	size_t len = fuzz_valid(z, buf);

	return z->trunc_next++ % len;
}

static size_t fuzz_random(struct fuzz *z, uint8_t *buf)
{
	static const size_t lo[] = { 0, 15, 129, 1601 }, hi[] = { 14, 128, 1600, MAX_FRAME };
	int b = (int)rnd(z, 4);
	size_t len = lo[b] + rnd(z, hi[b] - lo[b] + 1);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = agg_rand_u64(&z->r);

		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
	return len;
}

/* Valid Ethernet, IP and UDP to us, then random bytes: the agg header's
 * checks see garbage (magic, job and token sometimes right). */
static size_t fuzz_garbage(struct fuzz *z, uint8_t *buf)
{
	const struct agg_plan *p = &z->n->plan;
	size_t len = fuzz_valid(z, buf);
	struct agg_hdr h;

	if (rnd(z, 2))
		len = HDR_OFF + rnd(z, MAX_FRAME - HDR_OFF + 1);
	for (size_t i = HDR_OFF; i < len; i++)
		buf[i] = (uint8_t)rnd(z, 256);
	if (len >= VAL_OFF) {
		memcpy(&h, buf + HDR_OFF, sizeof(h));
		if (rnd(z, 2))
			h.magic = AGG_MAGIC;
		if (rnd(z, 2))
			h.job = p->job;
		if (rnd(z, 2))
			h.token = z->n->token;
		memcpy(buf + HDR_OFF, &h, sizeof(h));
	}
	if (rnd(z, 2) && len >= HDR_OFF) {	/* lengths that match the frame */
		field_set(buf, &fields[2], len - IP_OFF);
		field_set(buf, &fields[8], len - UDP_OFF);
	}
	return len;
}

/* Per-CPU counters summed, in one syscall (the check runs per packet). */
struct stats_reader {
	int fd, ncpu;
	uint32_t keys[AGG_S_COUNT];
	uint64_t *vals;
};

static int stats_init(struct stats_reader *s, int fd)
{
	s->fd = fd;
	s->ncpu = libbpf_num_possible_cpus();
	if (s->ncpu <= 0)
		return -EINVAL;
	s->vals = calloc((size_t)s->ncpu * AGG_S_COUNT, sizeof(*s->vals));
	return s->vals ? 0 : -ENOMEM;
}

static int stats_get(struct stats_reader *s, uint64_t out[AGG_S_COUNT])
{
	uint32_t count = AGG_S_COUNT, next;
	LIBBPF_OPTS(bpf_map_batch_opts, o);

	if (bpf_map_lookup_batch(s->fd, NULL, &next, s->keys, s->vals, &count, &o) &&
	    errno != ENOENT)
		return -errno;
	if (count != AGG_S_COUNT)
		return -EIO;
	for (uint32_t k = 0; k < count; k++) {
		uint64_t sum = 0;

		for (int c = 0; c < s->ncpu; c++)
			sum += s->vals[(size_t)k * s->ncpu + c];
		out[s->keys[k]] = sum;
	}
	return 0;
}

static bool is_outcome(int k)
{
	return (k >= AGG_S_ADDED && k <= AGG_S_PROBES) ||
	       (k >= AGG_S_DROP_DUP && k <= AGG_S_ERROR) || k == AGG_S_SPARSE;
}

static const char *verdict_name(uint32_t v)
{
	static const char *const names[] = { "aborted", "drop", "pass", "tx", "redirect" };

	return v < 5 ? names[v] : "other";
}

static void trace_packet(FILE *f, int cls, uint32_t verdict, const uint8_t *buf, size_t len,
			 const uint64_t *d)
{
	fprintf(f, "%s %s len=%zu", class_names[cls], verdict_name(verdict), len);
	for (int k = 0; k < AGG_S_COUNT; k++)
		if (d[k])
			fprintf(f, " %s+%" PRIu64, stat_names[k], d[k]);
	fputc(' ', f);
	for (size_t i = 0; i < len && i < VAL_OFF + 16; i++)
		fprintf(f, "%02x", buf[i]);
	fprintf(f, "%s\n", len > VAL_OFF + 16 ? "..." : "");
}

static int do_run(struct agg_node *n)
{
	static uint8_t buf[MAX_FRAME + 64], out[16384];
	uint64_t cls_n[C_COUNT] = { 0 }, cls_bad[C_COUNT] = { 0 }, verdicts[6] = { 0 };
	uint64_t first[AGG_S_COUNT], prev[AGG_S_COUNT], cur[AGG_S_COUNT], d[AGG_S_COUNT];
	uint64_t ran = 0, refused = 0, bad = 0, max_iter = 0;
	static uint64_t matrix[AGG_S_COUNT + 1][6];	/* outcome (or other) x verdict */
	bool any_iter = false;
	struct stats_reader sr;
	struct fuzz z;
	FILE *trace = NULL;
	double t0, secs;
	int err;

	if (fuzz_init(&z, n) || stats_init(&sr, n->fd_stats)) {
		agg_err("out of memory");
		return AGG_EXIT_SYSTEM;
	}
	if (env.trace && !(trace = fopen(env.trace, "w"))) {
		agg_err("cannot write %s: %s", env.trace, strerror(errno));
		return AGG_EXIT_USAGE;
	}
	if ((err = stats_get(&sr, first))) {
		agg_err("%s/stats: %s", n->dir, strerror(-err));
		return AGG_EXIT_SYSTEM;
	}
	memcpy(prev, first, sizeof(prev));
	t0 = now();
	for (uint64_t i = 0; i < env.count; i++) {
		int cls = (int)rnd(&z, 20);
		size_t len;
		uint64_t rx_out = 0;

		cls = cls < 3 ? C_VALID : cls < 6 ? C_TRUNC : cls < 14 ? C_MUTATE :
		      cls < 17 ? C_RANDOM : C_GARBAGE;
		len = cls == C_VALID ? fuzz_valid(&z, buf) : cls == C_TRUNC ? fuzz_truncate(&z, buf) :
		      cls == C_MUTATE ? fuzz_mutate(&z, buf) : cls == C_RANDOM ?
		      fuzz_random(&z, buf) : fuzz_garbage(&z, buf);
		cls_n[cls]++;
		if (len >= VAL_OFF) {
			struct agg_hdr h;

			memcpy(&h, buf + HDR_OFF, sizeof(h));
			/* 0xffffffff is malformed whatever else the header says.
			 * A member's packet with the token is trusted: one of a
			 * far iteration would hold its slot until the job got
			 * there, so the test could run no real iteration after. */
			if (h.job == n->plan.job && h.token == n->token &&
			    h.iter != UINT32_MAX) {
				/* and so would a newer run: every packet with
				 * the token stays in the test's run */
				if (h.iter > env.iter_max || h.run != env.run) {
					if (h.iter > env.iter_max)
						h.iter %= env.iter_max + 1;
					h.run = (uint16_t)env.run;
					memcpy(buf + HDR_OFF, &h, sizeof(h));
				}
				if (!any_iter || h.iter > max_iter)
					max_iter = h.iter;
				any_iter = true;
			}
		}
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = buf, .data_size_in = (uint32_t)len,
			    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
		if (bpf_prog_test_run_opts(n->fd_prog, &o)) {
			/* The kernel runs no frame shorter than Ethernet's header. */
			if (errno == EINVAL && len < ETH_HLEN) {
				refused++;
				continue;
			}
			agg_err("BPF_PROG_RUN of a %s packet of %zu bytes: %s", class_names[cls],
				len, strerror(errno));
			return AGG_EXIT_SYSTEM;
		}
		ran++;
		verdicts[o.retval < 5 ? o.retval : 5]++;
		if ((err = stats_get(&sr, cur))) {
			agg_err("%s/stats: %s", n->dir, strerror(-err));
			return AGG_EXIT_SYSTEM;
		}
		for (int k = 0; k < AGG_S_COUNT; k++) {
			d[k] = cur[k] - prev[k];
			if (is_outcome(k))
				rx_out += d[k];
		}
		if (d[AGG_S_OTHER] + d[AGG_S_RX] == 1 && d[AGG_S_RX] == rx_out) {
			int k = AGG_S_OTHER;

			for (int j = 0; j < AGG_S_COUNT; j++)
				if (is_outcome(j) && d[j])
					k = j;
			matrix[k][o.retval < 5 ? o.retval : 5]++;
		} else {
			bad++;
			cls_bad[cls]++;
			if (trace)
				trace_packet(trace, cls, o.retval, buf, len, d);
		}
		memcpy(prev, cur, sizeof(prev));
	}
	secs = now() - t0;
	printf("seed %" PRIu64 "\n", env.seed);
	printf("packets %" PRIu64 "\n", env.count);
	printf("run %" PRIu64 "\n", ran);
	printf("refused %" PRIu64 "\n", refused);
	for (int c = 0; c < C_COUNT; c++)
		printf("class_%s %" PRIu64 "\n", class_names[c], cls_n[c]);
	for (int v = 0; v < 6; v++)
		printf("xdp_%s %" PRIu64 "\n", verdict_name(v), verdicts[v]);
	if (any_iter)
		printf("max_iter %" PRIu64 "\n", max_iter);
	else
		printf("max_iter none\n");
	printf("unaccounted %" PRIu64 "\n", bad);
	for (int c = 0; c < C_COUNT; c++)
		if (cls_bad[c])
			printf("unaccounted_%s %" PRIu64 "\n", class_names[c], cls_bad[c]);
	for (int k = 0; k < AGG_S_COUNT; k++)
		printf("delta_%s %" PRIu64 "\n", stat_names[k], prev[k] - first[k]);
	/* Which verdict each outcome came with, for the packets accounted. */
	for (int k = 0; k < AGG_S_COUNT; k++)
		for (int v = 0; v < 6; v++)
			if (matrix[k][v])
				printf("verdict_%s_%s %" PRIu64 "\n", stat_names[k], verdict_name(v),
				       matrix[k][v]);
	printf("seconds %.3f\n", secs);
	printf("pps %.0f\n", secs > 0 ? ran / secs : 0);
	if (trace && fclose(trace)) {
		agg_err("cannot write %s: %s", env.trace, strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	return bad ? AGG_EXIT_PROBLEM : 0;
}

/* ---- state ------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static int pin_open(const struct agg_node *n, const char *name, struct bpf_map_info *info)
{
	char path[600];
	uint32_t len = sizeof(*info);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", n->dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0) {
		agg_err("%s: %s", path, strerror(errno));
		return -1;
	}
	memset(info, 0, sizeof(*info));
	if (bpf_obj_get_info_by_fd(fd, info, &len)) {
		agg_err("%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* A digest of a map's entries that does not depend on their order. */
static int map_digest(const struct agg_node *n, const char *name, uint64_t *out)
{
	struct bpf_map_info info;
	int fd = pin_open(n, name, &info), ncpu = libbpf_num_possible_cpus();
	size_t vsize = info.type == BPF_MAP_TYPE_PERCPU_ARRAY ?
		       (size_t)((info.value_size + 7) & ~7u) * ncpu : info.value_size;
	uint8_t *key, *next, *val;
	void *prev = NULL;
	uint64_t sum = 0;

	if (fd < 0)
		return -1;
	key = calloc(1, info.key_size);
	next = calloc(1, info.key_size);
	val = calloc(1, vsize);
	if (!key || !next || !val)
		return -1;
	while (!bpf_map_get_next_key(fd, prev, next)) {
		uint64_t h = 0xcbf29ce484222325ULL;

		if (bpf_map_lookup_elem(fd, next, val)) {
			agg_err("%s/%s: %s", n->dir, name, strerror(errno));
			return -1;
		}
		h = fnv(h, next, info.key_size);
		sum += fnv(h, val, vsize);
		memcpy(key, next, info.key_size);
		prev = key;
	}
	*out = sum;
	free(key);
	free(next);
	free(val);
	close(fd);
	return 0;
}

static int do_state(struct agg_node *n)
{
	static const char *const digests[] = { "members", "nodes", "trees", "kids", "segmap",
					       "plan", "slots", "meta", "results", "progress" };
	const struct agg_layout *l = &n->l;
	struct bpf_map_info si, ti;
	int fs = pin_open(n, "slots", &si), ft = pin_open(n, "trees", &ti);
	struct agg_tree_info *trees;
	uint64_t used = 0, bad = 0;
	struct agg_slot *s, first = { 0 };

	if (fs < 0 || ft < 0)
		return AGG_EXIT_SYSTEM;
	trees = calloc(n->plan.ntrees, sizeof(*trees));
	s = calloc(1, si.value_size);
	if (!trees || !s)
		return AGG_EXIT_SYSTEM;
	for (uint32_t t = 0; t < (uint32_t)n->plan.ntrees; t++)
		if (bpf_map_lookup_elem(ft, &t, &trees[t]))
			return AGG_EXIT_SYSTEM;
	/* Every slot holds (iter, seg) at its own index, of a segment in
	 * range, contributors it expects only, complete only when all are in;
	 * its chunks (agg.h "slots") agree, as packets pass them all in turn. */
	for (uint32_t i = 0; i < si.max_entries; i++) {
		const char *why = NULL;
		uint64_t expect;

		if (bpf_map_lookup_elem(fs, &i, s)) {
			agg_err("%s/slots: %s", n->dir, strerror(errno));
			return AGG_EXIT_SYSTEM;
		}
		if (i % l->nchunks == 0) {
			first = *s;
		} else if (s->ver != first.ver || s->seg != first.seg || s->op != first.op ||
			   s->bitmap != first.bitmap || s->done != first.done) {
			why = "its chunks disagree";
			goto check;
		}
		if (!s->ver) {
			if (s->bitmap || s->done)
				why = "unused but not empty";
			goto check;
		}
		used++;
		if (s->seg >= l->nsegs) {
			why = "segment out of range";
			goto check;
		}
		expect = trees[agg_plan_seg_tree(&n->plan, s->seg)].expect;
		if (((uint64_t)agg_ver_iter(s->ver) * l->nsegs + s->seg) % l->nslots != i / l->nchunks)
			why = "not at its index";
		else if (s->op >= AGG_OP_COUNT || (s->seg < l->nexp && s->op != AGG_OP_MAX))
			why = "bad op";
		else if (s->bitmap & ~expect)
			why = "a contributor it does not expect";
		else if (s->done && s->bitmap != expect)
			why = "done without every contributor";
		else if (!s->done && s->bitmap == expect)
			why = "every contributor in but not done";
check:
		if (why) {
			bad++;
			printf("bad_slot %u ver=%#" PRIx64 " seg=%u bitmap=%#" PRIx64 " done=%u op=%u: %s\n",
			       i, (uint64_t)s->ver, s->seg, (uint64_t)s->bitmap, s->done, s->op, why);
		}
	}
	printf("slots %u\n", si.max_entries);
	printf("slots_used %" PRIu64 "\n", used);
	printf("slots_bad %" PRIu64 "\n", bad);
	for (size_t i = 0; i < sizeof(digests) / sizeof(digests[0]); i++) {
		uint64_t h;

		if (map_digest(n, digests[i], &h))
			return AGG_EXIT_SYSTEM;
		printf("digest_%s %016" PRIx64 "\n", digests[i], h);
	}
	free(trees);
	free(s);
	close(fs);
	close(ft);
	return bad ? AGG_EXIT_PROBLEM : 0;
}

/* ---- send: crafted packets from this namespace ------------------------- */

struct sendspec {
	struct frame f;
	int len;		/* frame bytes; -1: what the headers say */
	int to;			/* destination node */
	int from;		/* hdr.from; -1: the node of the source address */
	bool have_src;		/* else our own address */
	bool have_dstip;	/* dstip=: the IP destination is not dst's */
	int smac_node;		/* source MAC: that node's (ARP), -2 smac, -1 ours */
	int ihl;		/* IP header words: 5, or more with options */
	enum { FRAG_NONE, FRAG_FIRST, FRAG_REST } frag;
	uint8_t smac[6];
	uint8_t dmac[6];
	uint64_t sent;
};

static int node_or_addr(const struct agg_plan *p, const char *s, struct in_addr *a, int *idx)
{
	int i = agg_plan_find(p, s);

	if (i >= 0) {
		*a = p->node[i].addr;
		*idx = i;
		return 0;
	}
	if (inet_pton(AF_INET, s, a) != 1)
		return -EINVAL;
	*idx = -1;
	for (i = 0; i < p->nnodes; i++)
		if (p->node[i].addr.s_addr == a->s_addr)
			*idx = i;
	return 0;
}

static int parse_num(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end || *out > max || *s == '-' ? -EINVAL : 0;
}

/* "key=value,..." into sp, on top of a valid DATA packet. */
static int spec_parse(const struct agg_plan *p, const struct agg_layout *l, char *text,
		      int to, struct sendspec *sp, char *why, size_t wl)
{
	struct frame *f = &sp->f;
	bool have_from = false, have_tree = false, have_op = false, have_npairs = false;
	int from = -1;
	char *kv, *save = NULL;

	memset(sp, 0, sizeof(*sp));
	sp->len = -1;
	sp->smac_node = -1;
	sp->ihl = 5;
	sp->to = to;
	f->sh = (struct agg_sparse_hdr){ .npkts = 1, .width = 1 };
	f->sport = f->dport = p->port;
	f->h.magic = AGG_MAGIC;
	f->h.type = AGG_T_DATA;
	f->h.job = p->job;
	f->h.token = agg_plan_wire_token(p);
	f->h.run = (uint16_t)env.run;
	f->h.seg = l->nexp;	/* the first data segment */
	for (kv = strtok_r(text, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');
		uint64_t x = 0;
		int idx, bad = 0;

		if (!v) {
			snprintf(why, wl, "'%s' is not key=value", kv);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(kv, "src")) {
			sp->have_src = true;
			bad = node_or_addr(p, v, &f->src, &idx);
			if (!bad && idx >= 0 && !have_from)
				from = idx;
		} else if (!strcmp(kv, "smac")) {
			/* a node's MAC (what a spoofer copies), or aa:bb:cc:dd:ee:ff */
			unsigned m[6];
			char c;

			if ((sp->smac_node = agg_plan_find(p, v)) < 0) {
				sp->smac_node = -2;
				bad = sscanf(v, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3],
					     &m[4], &m[5], &c) != 6;
				for (int k = 0; k < 6 && !bad; k++)
					sp->smac[k] = (uint8_t)m[k];
			}
		} else if (!strcmp(kv, "dstip")) {
			sp->have_dstip = true;
			bad = inet_pton(AF_INET, v, &f->dst) != 1;
		} else if (!strcmp(kv, "dst")) {
			bad = (sp->to = agg_plan_find(p, v)) < 0;
		} else if (!strcmp(kv, "from")) {
			struct in_addr a;

			have_from = true;
			if (node_or_addr(p, v, &a, &idx) == 0 && idx >= 0)
				from = idx;
			else if (!(bad = parse_num(v, 0xffff, &x)))
				from = (int)x;
		} else if (!strcmp(kv, "type")) {
			f->h.type = !strcmp(v, "data") ? AGG_T_DATA : !strcmp(v, "result") ?
				    AGG_T_RESULT : !strcmp(v, "request") ? AGG_T_REQUEST :
				    !strcmp(v, "probe") ? AGG_T_PROBE :
				    !strcmp(v, "sparse") ? AGG_T_SPARSE :
				    !strcmp(v, "sparse_end") ? AGG_T_SPARSE_END :
				    !strcmp(v, "sparse_ack") ? AGG_T_SPARSE_ACK :
				    !strcmp(v, "sparse_result") ? AGG_T_SPARSE_RESULT : 0;
			if (!f->h.type && !(bad = parse_num(v, 0xff, &x)))
				f->h.type = (uint8_t)x;
		} else if (!strcmp(kv, "op")) {
			have_op = true;
			f->h.op = !strcmp(v, "sum") ? AGG_OP_SUM : !strcmp(v, "max") ? AGG_OP_MAX :
				  !strcmp(v, "min") ? AGG_OP_MIN : 0xff;
			if (f->h.op == 0xff && !(bad = parse_num(v, 0xff, &x)))
				f->h.op = (uint8_t)x;
		} else if (!strcmp(kv, "magic")) {
			if (!(bad = parse_num(v, 0xff, &x)))
				f->h.magic = (uint8_t)x;
		} else if (!strcmp(kv, "flags")) {
			if (!(bad = parse_num(v, 0xff, &x)))
				f->h.flags = (uint8_t)x;
		} else if (!strcmp(kv, "tree")) {
			have_tree = true;
			if (!(bad = parse_num(v, 0xffff, &x)))
				f->h.tree = (uint16_t)x;
		} else if (!strcmp(kv, "job")) {
			if (!(bad = parse_num(v, UINT32_MAX, &x)))
				f->h.job = (uint32_t)x;
		} else if (!strcmp(kv, "iter")) {
			if (!(bad = parse_num(v, UINT32_MAX, &x)))
				f->h.iter = (uint32_t)x;
		} else if (!strcmp(kv, "seg")) {
			if (!(bad = parse_num(v, UINT32_MAX, &x)))
				f->h.seg = (uint32_t)x;
		} else if (!strcmp(kv, "run")) {
			if (!(bad = parse_num(v, 0xffff, &x)))
				f->h.run = (uint16_t)x;
		} else if (!strcmp(kv, "attempt")) {
			if (!(bad = parse_num(v, 0xffff, &x)))
				f->h.attempt = (uint16_t)x;
		} else if (!strcmp(kv, "token")) {
			if (!(bad = parse_num(v, UINT64_MAX, &x)))
				f->h.token = x;
		} else if (!strcmp(kv, "len")) {
			if (!(bad = parse_num(v, MAX_FRAME, &x)))
				sp->len = (int)x;
		} else if (!strcmp(kv, "val")) {
			if (!(bad = parse_num(v, UINT32_MAX, &x))) {
				f->vals = 3;
				f->val = (int32_t)(uint32_t)x;
			}
		} else if (!strcmp(kv, "dport")) {
			if (!(bad = parse_num(v, 0xffff, &x)))
				f->dport = (uint16_t)x;
		} else if (!strcmp(kv, "width")) {
			if (!(bad = parse_num(v, 0xffff, &x)))
				f->sh.width = (uint16_t)x;
		} else if (!strcmp(kv, "npairs")) {
			have_npairs = true;
			if (!(bad = parse_num(v, 64, &x)))
				f->sh.npairs = (uint16_t)x;
		} else if (!strcmp(kv, "npkts")) {
			if (!(bad = parse_num(v, UINT32_MAX, &x)))
				f->sh.npkts = (uint32_t)x;
		} else if (!strcmp(kv, "ihl")) {
			if (!(bad = parse_num(v, 15, &x) || x < 5))
				sp->ihl = (int)x;
		} else if (!strcmp(kv, "frag")) {
			sp->frag = !strcmp(v, "first") ? FRAG_FIRST : !strcmp(v, "rest") ? FRAG_REST :
				   FRAG_NONE;
			bad = sp->frag == FRAG_NONE;
		} else {
			snprintf(why, wl, "unknown key '%s'", kv);
			return -EINVAL;
		}
		if (bad) {
			snprintf(why, wl, "bad %s '%s'", kv, v);
			return -EINVAL;
		}
	}
	sp->from = from;
	f->sparse = agg_is_sparse(f->h.type);
	if (f->sparse) {
		/* the sparse path's: tree 0, op sum (agg-wire(7)) */
		if (!have_tree)
			f->h.tree = 0;
		if (!have_op)
			f->h.op = AGG_OP_SUM;
		if (!have_npairs)
			f->sh.npairs = f->h.type == AGG_T_SPARSE ||
				       f->h.type == AGG_T_SPARSE_RESULT;
		if (4 * (size_t)f->sh.npairs * (2 + f->sh.width) > MAX_FRAME - VAL_OFF - 8) {
			snprintf(why, wl, "%u pairs of width %u do not fit a frame",
				 f->sh.npairs, f->sh.width);
			return -EINVAL;
		}
		have_tree = have_op = true;
	}
	if (!have_tree)
		f->h.tree = (uint16_t)agg_plan_seg_tree(p, f->h.seg);
	if (!have_op)
		f->h.op = f->h.seg < l->nexp ? AGG_OP_MAX : AGG_OP_SUM;
	if (sp->to < 0) {
		snprintf(why, wl, "no destination: give --to or dst=");
		return -EINVAL;
	}
	if (!sp->have_dstip)
		f->dst = p->node[sp->to].addr;
	return 0;
}

static int self_addr(const char *dev, struct in_addr *a)
{
	struct ifaddrs *ifa, *i;
	int err = -EADDRNOTAVAIL;

	if (getifaddrs(&ifa))
		return -errno;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, dev)) {
			*a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			err = 0;
			break;
		}
	freeifaddrs(ifa);
	return err;
}

/*
 * The frame of len bytes in buf with sp's IP header: options (all NOPs)
 * and a fragment of the datagram (id).  Returns the new length.
 */
#define FRAG_AT	40	/* bytes of the datagram in a first fragment (8 x 5) */
static size_t ip_reshape(uint8_t *buf, size_t len, const struct sendspec *sp, uint16_t id)
{
	size_t opt = 4 * (size_t)(sp->ihl - 5), pay = len - UDP_OFF;
	struct iphdr ip;

	if ((sp->ihl == 5 && sp->frag == FRAG_NONE) || len < UDP_OFF + FRAG_AT)
		return len;
	memcpy(&ip, buf + IP_OFF, sizeof(ip));
	ip.frag_off = 0;
	if (sp->frag == FRAG_FIRST) {
		pay = FRAG_AT;
		ip.frag_off = htons(0x2000);		/* more fragments */
	} else if (sp->frag == FRAG_REST) {
		pay -= FRAG_AT;
		memmove(buf + UDP_OFF, buf + UDP_OFF + FRAG_AT, pay);
		ip.frag_off = htons(FRAG_AT / 8);
	}
	memmove(buf + UDP_OFF + opt, buf + UDP_OFF, pay);
	memset(buf + UDP_OFF, 1, opt);			/* IPOPT_NOOP */
	ip.ihl = (unsigned)sp->ihl;
	ip.id = htons(id);
	ip.tot_len = htons((uint16_t)(sizeof(ip) + opt + pay));
	ip.check = 0;
	memcpy(buf + IP_OFF, &ip, sizeof(ip));
	ip.check = ip_csum_len(buf + IP_OFF, sp->ihl);
	memcpy(buf + IP_OFF, &ip, sizeof(ip));
	return UDP_OFF + opt + pay;
}

/* send: SIGTERM or SIGINT stops the rounds; the counts are printed. */
static volatile sig_atomic_t send_stop;

static void on_stop(int sig)
{
	(void)sig;
	send_stop = 1;
}

/* Sleep until t (CLOCK_MONOTONIC seconds). */
static void pace(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int do_send(void)
{
	static uint8_t buf[MAX_FRAME + 64];
	struct agg_plan p;
	struct agg_layout l;
	struct agg_diag d;
	struct agg_netif nif;
	struct in_addr self = { 0 };
	struct sendspec *sp;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_halen = 6 };
	struct agg_rand r;
	char why[512];
	double t0, gap = 1 / env.rate, next;
	uint64_t total = 0;
	uint16_t ipid0 = (uint16_t)(getpid() * 977);	/* fragments of other runs apart */
	int sock, err, to = -1;
	FILE *f;

	agg_plan_init(&p);
	f = fopen(env.plan, "r");
	if (!f) {
		agg_err("cannot open %s: %s", env.plan, strerror(errno));
		return AGG_EXIT_USAGE;
	}
	err = agg_plan_read(&p, f, env.plan, &d);
	fclose(f);
	if (err) {
		agg_err("%s", d.msg);
		return AGG_EXIT_USAGE;
	}
	if (agg_layout_of(&p, &l, why, sizeof(why))) {
		agg_err("%s: %s", env.plan, why);
		return AGG_EXIT_USAGE;
	}
	if (env.to && (to = agg_plan_find(&p, env.to)) < 0) {
		agg_err("--to %s: no such node in %s", env.to, env.plan);
		return AGG_EXIT_USAGE;
	}
	sp = calloc(env.nspecs, sizeof(*sp));
	if (!sp)
		return AGG_EXIT_SYSTEM;
	for (int i = 0; i < env.nspecs; i++) {
		char *text = strdup(env.specs[i]);

		if (!text || spec_parse(&p, &l, text, to, &sp[i], why, sizeof(why))) {
			agg_err("spec %d '%s': %s", i + 1, env.specs[i], text ? why : "out of memory");
			return text ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
		}
		free(text);
	}
	if ((err = self_addr(env.dev, &self)) || (err = agg_netif_find(self, env.dev, &nif))) {
		bool none = err == -EADDRNOTAVAIL || err == -ENODEV;

		agg_err("--dev %s: %s", env.dev, none ? "no such interface with an IPv4 address here" :
			strerror(-err));
		return none ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	for (int i = 0; i < env.nspecs; i++) {
		if (!sp[i].have_src) {
			sp[i].f.src = self;
			for (int j = 0; j < p.nnodes && sp[i].from < 0; j++)
				if (p.node[j].addr.s_addr == self.s_addr)
					sp[i].from = j;
		}
		/* not a member: say we are node 0 */
		sp[i].f.h.from = (uint16_t)(sp[i].from < 0 ? 0 : sp[i].from);
		if (sp[i].smac_node == -2)
			memcpy(sp[i].f.smac, sp[i].smac, 6);
		else if (sp[i].smac_node >= 0 &&
			 (err = agg_arp_resolve(&nif, self, p.node[sp[i].smac_node].addr, 3000,
						sp[i].f.smac))) {
			agg_err("no ARP answer from %s: %s", p.node[sp[i].smac_node].name,
				strerror(-err));
			return AGG_EXIT_SYSTEM;
		} else if (sp[i].smac_node == -1) {
			memcpy(sp[i].f.smac, nif.mac, 6);
		}
		for (int j = 0; j < i; j++)
			if (sp[j].to == sp[i].to)
				memcpy(sp[i].dmac, sp[j].dmac, 6);
		if (!memcmp(sp[i].dmac, "\0\0\0\0\0\0", 6) &&
		    (err = agg_arp_resolve(&nif, self, p.node[sp[i].to].addr, 3000, sp[i].dmac))) {
			agg_err("no ARP answer from %s: %s", p.node[sp[i].to].name, strerror(-err));
			return AGG_EXIT_SYSTEM;
		}
		memcpy(sp[i].f.dmac, sp[i].dmac, 6);
	}
	sock = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		agg_err("AF_PACKET socket: %s", strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	sll.sll_ifindex = nif.ifindex;
	agg_rand_seed(&r, env.seed);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	t0 = next = now();
	for (uint64_t round = 0; !send_stop &&
	     (env.duration ? now() - t0 < env.duration : round < env.count); round++) {
		for (int i = 0; i < env.nspecs; i++) {
			size_t len = frame_build(buf, &sp[i].f, p.segment, &r);

			if (sp[i].len >= 0) {
				if ((size_t)sp[i].len > len)
					memset(buf + len, 0, sp[i].len - len);
				len = sp[i].len;
			}
			len = ip_reshape(buf, len, &sp[i], (uint16_t)(ipid0 + round));
			memcpy(sll.sll_addr, sp[i].dmac, 6);
			pace(next);
			while (sendto(sock, buf, len, 0, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
				if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
					agg_err("send on %s: %s", env.dev, strerror(errno));
					return AGG_EXIT_SYSTEM;
				}
				usleep(100);
			}
			next += gap;
			if (next < now() - 0.01)	/* do not burst after a stall */
				next = now();
			sp[i].sent++;
			total++;
		}
	}
	for (int i = 0; i < env.nspecs; i++)
		printf("sent_%d %" PRIu64 "\n", i + 1, sp[i].sent);
	printf("sent %" PRIu64 "\n", total);
	printf("seconds %.3f\n", now() - t0);
	close(sock);
	free(sp);
	agg_plan_free(&p);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = {
		{ &agg_target_argp, 0, "Target (run, state):", 0 },
		{ 0 }
	};
	static const struct argp argp = { options, parse_opt, "run|state|send [SPEC...]", doc,
					  children, NULL, NULL };
	struct agg_node n;
	char why[600];
	int err, rc;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	setlinebuf(stdout);
	if (env.mode == M_SEND)
		return agg_opts_exit(do_send());
	err = agg_node_open(&n, agg_target.pin_dir, agg_target.job, agg_target.node,
			    why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		return agg_opts_exit(err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM);
	}
	rc = env.mode == M_RUN ? do_run(&n) : do_state(&n);
	agg_node_close(&n);
	return agg_opts_exit(rc);
}
