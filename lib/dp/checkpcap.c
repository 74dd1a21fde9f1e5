// SPDX-License-Identifier: GPL-2.0-only
/*
 * agg-check --pcap: agg packets of a capture file grouped by (job,
 * iteration, sender, receiver, type, segment), each group with its
 * distinct attempts, so that a transmission followed by a resend of the
 * same segment (the sender gave up on it: lost), extra copies of one
 * transmission (duplicated) and DATA never answered by a RESULT show.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcap/pcap.h>

#include "check.h"

const char *agg_type_name(unsigned type)
{
	switch (type) {
	case AGG_T_DATA: return "DATA";
	case AGG_T_RESULT: return "RESULT";
	case AGG_T_REQUEST: return "REQUEST";
	case AGG_T_PROBE: return "PROBE";
	}
	return "?";
}

static int addr_learn(struct agg_cap *c, uint32_t addr, uint32_t idx);

int agg_cap_init(struct agg_cap *c, uint16_t port, const struct agg_plan *plan)
{
	memset(c, 0, sizeof(*c));
	c->port = port;
	c->plan = plan;
	c->idx_addr = calloc(65536, sizeof(*c->idx_addr));
	if (!c->idx_addr)
		return -ENOMEM;
	for (int i = 0; plan && i < plan->nnodes && i < 65536; i++)
		if (addr_learn(c, plan->node[i].addr.s_addr, i))
			return -ENOMEM;
	return 0;
}

void agg_cap_free(struct agg_cap *c)
{
	for (size_t i = 0; i < c->ng; i++)
		free(c->g[i].more);
	free(c->g);
	free(c->table);
	free(c->addr);
	free(c->atable);
	free(c->idx_addr);
	memset(c, 0, sizeof(*c));
}

/* ---- hashing: index tables over the group and address arrays ---------- */

#define KEY_LEN offsetof(struct agg_cap_group, rsvd)

static uint64_t hash_bytes(const void *k, size_t len)
{
	const unsigned char *b = k;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h ^ (h >> 29);
}

/*
 * The table slot of key among entries base[0..] (stride bytes apart, key
 * first): the slot holding its index + 1, or the empty slot where it goes.
 */
static uint32_t *table_slot(uint32_t *table, size_t tcap, const void *key, size_t klen,
			    const void *base, size_t stride)
{
	size_t i = hash_bytes(key, klen) & (tcap - 1);

	for (;; i = (i + 1) & (tcap - 1)) {
		uint32_t e = table[i];

		if (!e || !memcmp((const char *)base + (size_t)(e - 1) * stride, key, klen))
			return &table[i];
	}
}

/* Grow a table to hold n + 1 entries at most half full; 0 or -ENOMEM. */
static int table_grow(uint32_t **table, size_t *tcap, size_t n, size_t klen,
		      const void *base, size_t stride)
{
	size_t cap = *tcap ? *tcap : 1024;
	uint32_t *t;

	if (2 * (n + 1) <= *tcap)
		return 0;
	while (2 * (n + 1) > cap)
		cap *= 2;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		*table_slot(t, cap, (const char *)base + i * stride, klen, base, stride) = i + 1;
	free(*table);
	*table = t;
	*tcap = cap;
	return 0;
}

/* ---- groups ------------------------------------------------------------ */

const struct agg_cap_tx *agg_cap_tx(const struct agg_cap_group *g, uint32_t i)
{
	return i == 0 ? &g->tx0 : &g->more[i - 1];
}

static int group_add(struct agg_cap *c, const struct agg_cap_group *key, uint16_t attempt)
{
	struct agg_cap_group *g;
	struct agg_cap_tx *tx;
	uint32_t *slot;

	if (table_grow(&c->table, &c->tcap, c->ng, KEY_LEN, c->g, sizeof(*c->g)))
		return -ENOMEM;
	slot = table_slot(c->table, c->tcap, key, KEY_LEN, c->g, sizeof(*c->g));
	if (!*slot) {
		if (c->ng == c->gcap) {
			size_t cap = c->gcap ? 2 * c->gcap : 1024;
			struct agg_cap_group *ng = realloc(c->g, cap * sizeof(*ng));

			if (!ng)
				return -ENOMEM;
			c->g = ng;
			c->gcap = cap;
		}
		g = &c->g[c->ng++];
		*g = *key;
		g->ntx = 1;
		g->tx0 = (struct agg_cap_tx){ attempt, 1, c->packets, c->packets };
		*slot = c->ng;
		return 0;
	}
	g = &c->g[*slot - 1];
	for (uint32_t i = 0; i < g->ntx; i++) {
		tx = (struct agg_cap_tx *)agg_cap_tx(g, i);
		if (tx->attempt == attempt) {
			tx->copies++;
			tx->last = c->packets;
			return 0;
		}
	}
	tx = realloc(g->more, g->ntx * sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	g->more = tx;
	g->more[g->ntx - 1] = (struct agg_cap_tx){ attempt, 1, c->packets, c->packets };
	g->ntx++;
	return 0;
}

/* Remember that address addr sends as node idx (without a plan). */
static int addr_learn(struct agg_cap *c, uint32_t addr, uint32_t idx)
{
	uint32_t *slot;

	if (table_grow(&c->atable, &c->atcap, c->naddr, sizeof(addr), c->addr, sizeof(*c->addr)))
		return -ENOMEM;
	slot = table_slot(c->atable, c->atcap, &addr, sizeof(addr), c->addr, sizeof(*c->addr));
	if (*slot)
		return 0;
	if (c->naddr == c->acap) {
		size_t cap = c->acap ? 2 * c->acap : 64;
		struct agg_cap_addr *na = realloc(c->addr, cap * sizeof(*na));

		if (!na)
			return -ENOMEM;
		c->addr = na;
		c->acap = cap;
	}
	c->addr[c->naddr++] = (struct agg_cap_addr){ addr, idx };
	*slot = c->naddr;
	if (!c->idx_addr[idx & 0xffff])
		c->idx_addr[idx & 0xffff] = addr;
	return 0;
}

/* The node index of address a; -1 unknown. */
static int addr_index(const struct agg_cap *c, uint32_t a)
{
	uint32_t *slot;

	if (!c->atcap)
		return -1;
	slot = table_slot(c->atable, c->atcap, &a, sizeof(a), c->addr, sizeof(*c->addr));
	return *slot ? (int)c->addr[*slot - 1].idx : -1;
}

/* ---- packets ----------------------------------------------------------- */

static int le16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Where the IPv4 header starts in a frame of this link type, or -1. */
static int ip_offset(int linktype, const uint8_t *d, uint32_t len)
{
	int off, proto;

	switch (linktype) {
	case DLT_EN10MB:
		if (len < 14)
			return -1;
		off = 14;
		proto = d[12] << 8 | d[13];
		while ((proto == 0x8100 || proto == 0x88a8) && len >= (uint32_t)off + 4) {
			proto = d[off + 2] << 8 | d[off + 3];
			off += 4;
		}
		return proto == 0x0800 ? off : -1;
	case DLT_LINUX_SLL:
		return len >= 16 && (d[14] << 8 | d[15]) == 0x0800 ? 16 : -1;
	case DLT_LINUX_SLL2:
		return len >= 20 && (d[0] << 8 | d[1]) == 0x0800 ? 20 : -1;
	case DLT_RAW:
	case DLT_IPV4:
		return 0;
	}
	return -1;
}

static int packet(struct agg_cap *c, const uint8_t *d, uint32_t caplen)
{
	struct agg_cap_group key;
	const uint8_t *ip, *udp, *h;
	int off = ip_offset(c->linktype, d, caplen), ihl;
	uint32_t src, dst;

	if (off < 0 || caplen < (uint32_t)off + 20)
		goto other;
	ip = d + off;
	ihl = (ip[0] & 15) * 4;
	if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != 17 || ((ip[6] << 8 | ip[7]) & 0x3fff))
		goto other;
	if (caplen < (uint32_t)off + ihl + 8)
		goto other;
	udp = ip + ihl;
	if ((udp[2] << 8 | udp[3]) != c->port)
		goto other;
	h = udp + 8;
	if (caplen < (uint32_t)(h - d) + sizeof(struct agg_hdr)) {
		if (caplen > (uint32_t)(h - d) && h[0] == AGG_MAGIC)
			c->truncated++;
		else
			c->other++;
		return 0;
	}
	if (h[0] != AGG_MAGIC || h[1] < AGG_T_DATA || h[1] > AGG_T_PROBE)
		goto other;
	memcpy(&src, ip + 12, 4);
	memcpy(&dst, ip + 16, 4);
	/* The wire token hashes the whole plan text: once per capture. */
	if (c->plan && !c->token)
		c->token = agg_plan_wire_token(c->plan);
	if (c->plan && (le32(h + 8) != c->plan->job || le64(h + 24) != c->token)) {
		c->foreign++;
		return 0;
	}
	if (h[1] == AGG_T_PROBE) {	/* agg-recv asking who holds it up */
		c->probes++;
		return 0;
	}
	memset(&key, 0, sizeof(key));
	key.job = le32(h + 8);
	key.iter = le32(h + 12);
	key.to = dst;
	key.seg = le32(h + 16);
	key.from = le16(h + 6);
	key.type = h[1];
	c->agg++;
	if (!c->plan && addr_learn(c, src, key.from))
		return -ENOMEM;
	return group_add(c, &key, le16(h + 22));
other:
	c->other++;
	return 0;
}

int agg_cap_read(struct agg_cap *c, const char *file, char *why, size_t whylen)
{
	char errbuf[PCAP_ERRBUF_SIZE] = "";
	struct pcap_pkthdr *ph;
	const u_char *data;
	pcap_t *pc;
	FILE *f;
	int rc, err = 0;

	f = fopen(file, "rb");
	if (!f) {
		err = -errno;
		snprintf(why, whylen, "cannot open %s: %s", file, strerror(errno));
		return err;
	}
	pc = pcap_fopen_offline(f, errbuf);
	if (!pc) {
		snprintf(why, whylen, "%s: not a capture libpcap reads: %s", file, errbuf);
		fclose(f);
		return -EINVAL;
	}
	c->linktype = pcap_datalink(pc);
	if (c->linktype != DLT_EN10MB && c->linktype != DLT_LINUX_SLL &&
	    c->linktype != DLT_LINUX_SLL2 && c->linktype != DLT_RAW &&
	    c->linktype != DLT_IPV4) {
		snprintf(why, whylen, "%s: link type %s is not one agg-check reads "
			 "(Ethernet, Linux cooked SLL or SLL2, raw IPv4)", file,
			 pcap_datalink_val_to_name(c->linktype) ?
			 pcap_datalink_val_to_name(c->linktype) : "unknown");
		pcap_close(pc);
		return -EINVAL;
	}
	while ((rc = pcap_next_ex(pc, &ph, &data)) == 1) {
		c->packets++;
		err = packet(c, data, ph->caplen);
		if (err) {
			snprintf(why, whylen, "%s: out of memory at packet %llu", file,
				 (unsigned long long)c->packets);
			break;
		}
	}
	if (!err && rc == PCAP_ERROR) {
		snprintf(why, whylen, "%s: after packet %llu: %s", file,
			 (unsigned long long)c->packets, pcap_geterr(pc));
		err = -EINVAL;
	}
	pcap_close(pc);
	return err;
}

/* ---- results ----------------------------------------------------------- */

static int cmp_group(const void *x, const void *y)
{
	const struct agg_cap_group *a = x, *b = y;

#define CMP(f) if (a->f != b->f) return a->f < b->f ? -1 : 1
	CMP(job);
	CMP(iter);
	CMP(from);
	if (a->to != b->to)
		return ntohl(a->to) < ntohl(b->to) ? -1 : 1;
	CMP(type);
	CMP(seg);
#undef CMP
	return 0;
}

void agg_cap_sort(struct agg_cap *c)
{
	qsort(c->g, c->ng, sizeof(*c->g), cmp_group);
	if (table_grow(&c->table, &c->tcap, c->ng, KEY_LEN, c->g, sizeof(*c->g)) == 0) {
		memset(c->table, 0, c->tcap * sizeof(*c->table));
		for (size_t i = 0; i < c->ng; i++)
			*table_slot(c->table, c->tcap, &c->g[i], KEY_LEN, c->g, sizeof(*c->g)) = i + 1;
	}
}

bool agg_cap_tx_lost(const struct agg_cap_group *g, uint32_t i)
{
	const struct agg_cap_tx *t = agg_cap_tx(g, i);

	/* The sender gave up on it: a higher attempt came after it. */
	for (uint32_t j = 0; j < g->ntx; j++) {
		const struct agg_cap_tx *u = agg_cap_tx(g, j);

		if (u->attempt > t->attempt && u->last > t->first)
			return true;
	}
	return false;
}

void agg_cap_group_count(const struct agg_cap_group *g, struct agg_cap_count *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < g->ntx; i++) {
		const struct agg_cap_tx *t = agg_cap_tx(g, i);

		if (t->attempt)
			out->resent++;
		else
			out->sent++;
		out->duplicated += t->copies - 1;
		out->lost += agg_cap_tx_lost(g, i);
	}
}

/* Is there a group sent from node index from to address to (sorted)? */
static bool pair_seen(const struct agg_cap *c, uint32_t job, uint32_t iter,
		      uint16_t from, uint32_t to)
{
	size_t lo = 0, hi = c->ng;
	struct agg_cap_group k = { .job = job, .iter = iter, .from = from, .to = to };

	/* The first group at or after (job, iter, from, to, type 0, seg 0). */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (cmp_group(&c->g[mid], &k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->ng && c->g[lo].job == job && c->g[lo].iter == iter &&
	       c->g[lo].from == from && c->g[lo].to == to;
}

int agg_cap_answered(const struct agg_cap *c, const struct agg_cap_group *g)
{
	struct agg_cap_group k;
	int back = addr_index(c, g->to);
	uint32_t me = c->idx_addr[g->from];

	if (back < 0 || !me || !pair_seen(c, g->job, g->iter, back, me))
		return -1;
	memset(&k, 0, sizeof(k));
	k.job = g->job;
	k.iter = g->iter;
	k.from = back;
	k.to = me;
	k.type = AGG_T_RESULT;
	k.seg = g->seg;
	return *table_slot(c->table, c->tcap, &k, KEY_LEN, c->g, sizeof(*c->g)) ? 1 : 0;
}

const char *agg_cap_from_name(const struct agg_cap *c, uint16_t i, char *buf, size_t len)
{
	if (c->plan && i < c->plan->nnodes)
		snprintf(buf, len, "%s", c->plan->node[i].name);
	else
		snprintf(buf, len, "%u", i);
	return buf;
}

const char *agg_cap_to_name(const struct agg_cap *c, uint32_t a, char *buf, size_t len)
{
	int i = addr_index(c, a);

	if (i >= 0)
		return agg_cap_from_name(c, i, buf, len);
	inet_ntop(AF_INET, &a, buf, len);
	return buf;
}
