/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_HOT_H
#define AGG_HOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hosts.h"	/* struct agg_diag */
#include "rand.h"

/*
 * Hot parameters of sparse models (ZEBRA Sec. III-C, III-D).
 *
 * One hot parameter in the XDP hot-slot map: an s64 sum, a u32 iteration
 * and a u32 bitmap of the children that contributed; the parameter id is
 * implied by the slot (its rank), as in ZEBRA's register layout.
 */
#define AGG_HOT_SLOT_BYTES	16
#define AGG_HOT_ITER_END	UINT64_MAX	/* binary logs: end of an iteration */
#define AGG_HOT_DENSE_MAX	(1ULL << 32)	/* exact counting: ids below this */

/* ---- update logs -------------------------------------------------------- */

/*
 * A streamed update log: text ("ITER ID ID ..." per line, or one ID per
 * line) or binary (little-endian u64 ids, AGG_HOT_ITER_END between
 * iterations).  Each text line is one training example; --sample keeps
 * whole examples.
 */
struct agg_hot_log {
	FILE *f;
	const char *fname;
	bool binary;
	char *buf;
	size_t cap, len, pos;
	int lineno;
	uint64_t iter;		/* iteration of the current example */
	bool eof;
};

void agg_hot_log_open(struct agg_hot_log *l, FILE *f, const char *fname,
		      bool binary);
void agg_hot_log_close(struct agg_hot_log *l);
/*
 * Next example: its ids into *ids (grown as needed), their number into *n,
 * its iteration into *iter.  Returns 1, 0 at the end, -EINVAL (d filled)
 * or -EIO.
 */
int agg_hot_log_next(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		     size_t *cap, uint64_t *iter, struct agg_diag *d);

/* ---- counting ------------------------------------------------------------- */

struct agg_hot_entry {
	uint64_t id;
	uint64_t freq;
};

/* Exact counts, dense over ids below AGG_HOT_DENSE_MAX. */
struct agg_hot_counts {
	uint32_t *c;
	uint64_t size;		/* ids covered */
	uint64_t total;		/* updates counted */
	uint64_t distinct;
};

int agg_hot_counts_add(struct agg_hot_counts *hc, uint64_t id);
void agg_hot_counts_free(struct agg_hot_counts *hc);
/* The entries with the largest counts, at most max, by count descending
 * then id ascending. */
int agg_hot_counts_top(const struct agg_hot_counts *hc, size_t max,
		       struct agg_hot_entry **out, size_t *n);

/* Space-Saving heavy hitters (Metwally et al.) in bounded memory. */
struct agg_hot_sketch;

struct agg_hot_sketch *agg_hot_sketch_new(size_t counters);
void agg_hot_sketch_free(struct agg_hot_sketch *s);
void agg_hot_sketch_add(struct agg_hot_sketch *s, uint64_t id);
uint64_t agg_hot_sketch_total(const struct agg_hot_sketch *s);
size_t agg_hot_sketch_bytes(size_t counters);
int agg_hot_sketch_top(const struct agg_hot_sketch *s, size_t max,
		       struct agg_hot_entry **out, size_t *n);

/* ---- choosing k (ZEBRA Principle 1) ------------------------------------- */

struct agg_hot_k {
	size_t k;
	size_t k_coverage;	/* smallest k with T_k / T_n >= p; SIZE_MAX: not within e[] */
	size_t k_budget;	/* budget / AGG_HOT_SLOT_BYTES */
	double achieved;	/* T_k / T_n */
	bool budget_bound;	/* the budget stopped k short of p */
};

/* e: all counted entries, frequency descending; total: T_n. */
void agg_hot_choose_k(const struct agg_hot_entry *e, size_t n, uint64_t total,
		      double p, uint64_t budget, struct agg_hot_k *out);

/* ---- tables ------------------------------------------------------------------ */

struct agg_hot_table {
	size_t k;
	double coverage, achieved;
	uint64_t budget;
	unsigned stripes;
	uint64_t updates;
	uint64_t iter;		/* iterations seen when it was computed */
	struct agg_hot_entry *e;	/* rank order */
};

/* Heat-based placement (ZEBRA III-D): rank i -> stripe i mod m, slot i / m. */
static inline unsigned agg_hot_stripe(uint64_t rank, unsigned m) { return rank % m; }
static inline uint64_t agg_hot_slot(uint64_t rank, unsigned m) { return rank / m; }

int agg_hot_table_write(const struct agg_hot_table *t, FILE *f);
int agg_hot_table_read(struct agg_hot_table *t, FILE *f, const char *fname,
		       struct agg_diag *d);
void agg_hot_table_free(struct agg_hot_table *t);

/* ---- comparing ---------------------------------------------------------------- */

/* |A n B| / |A| */
double agg_hot_precision(const struct agg_hot_table *a, const struct agg_hot_table *b);
/* Normalised Kendall tau distance between the orders A and B give their
 * common ids: discordant pairs / all pairs, 0 = same order, 1 = reversed. */
double agg_hot_kendall(const struct agg_hot_table *a, const struct agg_hot_table *b,
		       size_t *common);

/* ---- packing (ZEBRA Alg. 1) ----------------------------------------------------- */

struct agg_hot_pack_stats {
	size_t pairs;		/* hot pairs packed */
	size_t packets;
	size_t conflicts;	/* pairs sharing a stripe with an earlier pair of their packet */
	size_t overflow;	/* pairs that Alg. 1 sent in padding packets (G') */
};

/*
 * Pack the ranks of one worker's hot pairs into packets of at most per_pkt
 * pairs.  layout[rank] is the stripe of each rank.  pkt_of (optional, n
 * entries) gets each pair's packet.  Alg. 1 when orchestrate, else the
 * pairs in order, per_pkt at a time.
 */
int agg_hot_pack(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
		 unsigned m, size_t per_pkt, bool orchestrate,
		 struct agg_hot_pack_stats *st);

/* ---- workload --------------------------------------------------------------------- */

/* Zipf(s) over ranks 1..n by rejection inversion (Hormann and Derflinger):
 * O(1) per draw, no table. */
struct agg_zipf {
	double s, n, hx0, hxn, h1, shift;
};

void agg_zipf_init(struct agg_zipf *z, uint64_t n, double s);
uint64_t agg_zipf_draw(const struct agg_zipf *z, struct agg_rand *r);	/* 1..n */

#endif
