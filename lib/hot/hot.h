/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_HOT_H
#define AGG_HOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hosts.h"	/* struct agg_diag */
#include "rand.h"
#include "sparse.h"

/*
 * Hot parameters of sparse models (ZEBRA Sec. III-C, III-D): which ids are
 * hot (exact, sampled, online or sketched counts), how many (Principle 1),
 * where each lives in the XDP hot-slot map (heat-based placement) and how a
 * worker packs its hot pairs into packets (Alg. 1).
 *
 * Bytes one hot parameter takes in the XDP hot-slot map, the unit of
 * Principle 1's budget: a u64 id (the slot checks that a pair is for the
 * parameter it holds, so a worker with a stale table cannot add into
 * another parameter's sum), an s64 sum (quantized values, wide enough never
 * to overflow), a u32 iteration (late packets of an old iteration are
 * dropped) and a u32 bitmap of the contributors (duplicates are not added
 * twice).  The data plane's slot struct must keep this size.
 */
#define AGG_HOT_SLOT_BYTES	24

#define AGG_HOT_ITER_END	UINT64_MAX	/* binary logs: end of an iteration */

/* ---- update logs (hotlog.c) ------------------------------------------------ */

/*
 * A streamed update log: text ("ITER ID ID ..." per line, or one ID per
 * line; each line is one training example) or binary (little-endian u64
 * ids, AGG_HOT_ITER_END after each iteration; each id is an example).
 */
struct agg_hot_log {
	FILE *f;
	const char *fname;
	bool binary;
	char *buf;
	size_t cap, len, pos;
	uint64_t offset;	/* of buf[0] in the file */
	int lineno;
	uint64_t iter;		/* text: the last ITER given; binary: ends seen */
	bool eof;
};

void agg_hot_log_open(struct agg_hot_log *l, FILE *f, const char *fname,
		      bool binary);
void agg_hot_log_close(struct agg_hot_log *l);
/*
 * The next example (text) or run of ids of one iteration (binary): the ids
 * into *ids (grown as needed, *cap elements), their number into *n and the
 * iteration into *iter.  Returns 1, 0 at the end, -EINVAL (d filled),
 * -ENOMEM or -EIO.
 */
int agg_hot_log_next(struct agg_hot_log *l, uint64_t **ids, size_t *n,
		     size_t *cap, uint64_t *iter, struct agg_diag *d);

/* ---- counting (hotcount.c) -------------------------------------------------- */

struct agg_hot_entry {
	uint64_t id;
	uint64_t freq;
};

/* An open-addressing id -> u64 map (UINT64_MAX marks an empty slot). */
struct agg_hot_map {
	struct agg_hot_entry *e;
	size_t mask, n;
};

/*
 * Exact counts: a flat array of u32 counters for the ids below ndense, a
 * map for the rest.  The array grows to cover a new id only while it has at
 * most 32 ids per distinct id seen (or covers under 64 MiB), so dense id
 * spaces count at 4 bytes an id and sparse ones at about 32 bytes a
 * distinct id (46 at a rehash), whatever their range.  A counter that would
 * reach 2^32 - 1 moves to the map.
 */
struct agg_hot_counts {
	uint32_t *dense;
	uint64_t ndense;
	struct agg_hot_map map;
	uint64_t total;		/* updates counted */
	uint64_t distinct;
};

int agg_hot_counts_add(struct agg_hot_counts *hc, uint64_t id);
void agg_hot_counts_reset(struct agg_hot_counts *hc);	/* all to 0, memory kept */
uint64_t agg_hot_counts_get(const struct agg_hot_counts *hc, uint64_t id);
size_t agg_hot_counts_bytes(const struct agg_hot_counts *hc);
void agg_hot_counts_free(struct agg_hot_counts *hc);
/* The max entries with the largest counts, by count descending then id
 * ascending; *out is malloc'ed. */
int agg_hot_counts_top(const struct agg_hot_counts *hc, size_t max,
		       struct agg_hot_entry **out, size_t *n);

/*
 * Space-Saving heavy hitters (Metwally, Agrawal, El Abbadi 2005) in fixed
 * memory: counts over-estimate by at most the smallest counter, and every
 * id with more than updates/counters updates is kept.
 */
struct agg_hot_sketch;

struct agg_hot_sketch *agg_hot_sketch_new(size_t counters);
void agg_hot_sketch_free(struct agg_hot_sketch *s);
void agg_hot_sketch_add(struct agg_hot_sketch *s, uint64_t id);
void agg_hot_sketch_reset(struct agg_hot_sketch *s);
uint64_t agg_hot_sketch_total(const struct agg_hot_sketch *s);
size_t agg_hot_sketch_bytes(size_t counters);
int agg_hot_sketch_top(const struct agg_hot_sketch *s, size_t max,
		       struct agg_hot_entry **out, size_t *n);

/* ---- choosing k: ZEBRA Principle 1 (hot.c) ------------------------------- */

struct agg_hot_k {
	size_t k;
	size_t k_coverage;	/* smallest k with T_k / T_n >= p; SIZE_MAX: not within e[] */
	size_t k_budget;	/* budget / AGG_HOT_SLOT_BYTES */
	double achieved;	/* T_k / T_n */
	bool budget_bound;	/* the budget stopped k short of p */
};

/* e: the counted entries, frequency descending (at least the top k_budget);
 * total: T_n. */
void agg_hot_choose_k(const struct agg_hot_entry *e, size_t n, uint64_t total,
		      double p, uint64_t budget, struct agg_hot_k *out);

/* ---- tables (hot.c) ---------------------------------------------------------- */

struct agg_hot_table {
	size_t k;
	double coverage, achieved;
	uint64_t budget;
	unsigned stripes;
	uint64_t updates;	/* updates counted */
	uint64_t iter;		/* iterations seen when it was made */
	double sample;		/* fraction of the log counted */
	bool sketch;		/* counted by Space-Saving */
	bool budget_bound;	/* not written: achieved < coverage for lack of budget */
	struct agg_hot_entry *e;	/* rank order */
};

/* Heat-based placement (ZEBRA III-D): rank i -> stripe i mod m, slot i / m. */
static inline unsigned agg_hot_stripe(uint64_t rank, unsigned m) { return rank % m; }
static inline uint64_t agg_hot_slot(uint64_t rank, unsigned m) { return rank / m; }

int agg_hot_table_write(const struct agg_hot_table *t, FILE *f);
/* Reads a table (of a stream of tables, the last).  -EINVAL with d filled. */
int agg_hot_table_read(struct agg_hot_table *t, FILE *f, const char *fname,
		       struct agg_diag *d);
void agg_hot_table_free(struct agg_hot_table *t);

/* id -> rank of a table, what a worker keeps to find its hot pairs' slots. */
struct agg_hot_index;

int agg_hot_index_new(struct agg_hot_index **out, const struct agg_hot_table *t);
void agg_hot_index_free(struct agg_hot_index *x);
/* The rank of id, or -1 when it is cold. */
int64_t agg_hot_index_rank(const struct agg_hot_index *x, uint64_t id);

/* ---- comparing (hot.c) -------------------------------------------------------- */

/* |A n B| / |A| (ZEBRA V-C); 0 when A is empty. */
double agg_hot_precision(const struct agg_hot_table *a, const struct agg_hot_table *b);
/*
 * Normalised Kendall tau distance between the orders A and B give their
 * common ids: discordant pairs / all pairs, 0 the same order, 1 reversed.
 * NAN when out of memory.
 */
double agg_hot_kendall(const struct agg_hot_table *a, const struct agg_hot_table *b,
		       size_t *common);
/*
 * Kendall tau distance between A and B as top-k lists (Fagin, Kumar and
 * Sivakumar 2003, K^(1/2)): a pair of ids costs 1 when the lists order it
 * differently (an id missing from a list ranks below all of that list), 1/2
 * when both ids are missing from the same list; over the cost of two
 * disjoint lists.  0 the same table, 1 nothing in common: it sees both a
 * changed hot set and a changed order, so --online uses it.
 */
double agg_hot_kendall_topk(const struct agg_hot_table *a, const struct agg_hot_table *b);

/* ---- identification (hotident.c) --------------------------------------------- */

struct agg_hot_opts {
	double coverage;	/* Principle 1's p */
	uint64_t budget;	/* Principle 1's c x m, bytes */
	unsigned stripes;
	double sample;		/* count this fraction of the examples; 0 or 1: all */
	uint64_t seed;
	size_t sketch;		/* Space-Saving counters; 0: exact counts */
	uint64_t online;	/* a table every T iterations; 0: one at the end */
	double tau;		/* online: emit when kendall_topk to the last > tau */
	bool window;		/* online: count each T iterations afresh */
};

struct agg_hot_ident_stats {
	uint64_t updates;	/* read from the log */
	uint64_t counted;	/* after sampling */
	uint64_t iters;
	uint64_t tables;	/* computed (online: also those not emitted) */
	uint64_t emitted;
	size_t count_bytes;	/* memory of the counters at the end */
};

/* Called with each table to print; a non-zero return stops and is returned. */
typedef int (*agg_hot_emit_fn)(const struct agg_hot_table *t, void *arg);

/*
 * Read the log to its end and identify the hot parameters: one table at
 * the end, or with o->online one after every T iterations whose
 * agg_hot_kendall_topk to the last one emitted exceeds o->tau (the first
 * always), and the final one under the same rule.  Online tables count
 * every iteration so far, or with o->window the last T only.  Returns 0, the log's
 * error (d filled for -EINVAL), -ENOMEM or emit's return.
 */
int agg_hot_identify(struct agg_hot_log *l, const struct agg_hot_opts *o,
		     agg_hot_emit_fn emit, void *arg, struct agg_hot_ident_stats *st,
		     struct agg_diag *d);

/* ---- packing: ZEBRA Alg. 1 (hotpack.c) ------------------------------------------ */

/* Stripe of each rank: heat-based (rank mod m) or ZEBRA's random baseline, a
 * random permutation of the same slots (every stripe keeps k/m of them). */
int agg_hot_layout(unsigned *stripe_of, size_t k, unsigned m, bool random, uint64_t seed);

/*
 * One worker's batch of ids -> the ranks of its hot pairs, each once (a
 * worker sums its own gradients of an id first), ascending: the rank is the
 * pair's key on the hot path (ZEBRA maps ids to ranks) and workers send keys
 * in order, as PS-lite does.  *ranks is malloc'ed; *cold gets the number of
 * distinct cold ids.
 */
int agg_hot_batch_ranks(const struct agg_hot_index *x, const uint64_t *ids, size_t n,
			uint64_t **ranks, size_t *nranks, size_t *cold);

struct agg_hot_pack_stats {
	size_t pairs;		/* hot pairs packed */
	size_t packets;
	size_t conflicts;	/* pairs sharing a stripe with an earlier pair of their packet */
	size_t padded;		/* pairs Alg. 1 put in padding packets (its G') */
};

/*
 * Pack the pairs of ranks[] into packets of at most per_pkt pairs.
 * stripe_of[rank] is each rank's stripe (< m).  orchestrate: ZEBRA's Alg. 1,
 * else in order, per_pkt at a time.  pkt_of (NULL or n entries) gets the
 * packet of each pair.
 */
int agg_hot_pack(const uint64_t *ranks, size_t n, const unsigned *stripe_of,
		 unsigned m, size_t per_pkt, bool orchestrate, size_t *pkt_of,
		 struct agg_hot_pack_stats *st);

/* ---- workload (hotgen.c) ----------------------------------------------------------- */

/* Zipf(s) over ranks 1..n by rejection inversion (Hormann and Derflinger
 * 1996): O(1) per draw, no table. */
struct agg_zipf {
	double s, n, hx0, hxn, shift;
};

void agg_zipf_init(struct agg_zipf *z, uint64_t n, double s);
uint64_t agg_zipf_draw(const struct agg_zipf *z, struct agg_rand *r);	/* 1..n */

struct agg_hot_gen_opts {
	uint64_t ids;		/* parameters */
	uint64_t iters;
	uint64_t batch;		/* examples per iteration */
	uint64_t per_example;	/* updates per example */
	double zipf;
	uint64_t drift;		/* ranks the popularity order moves per iteration */
	uint64_t seed;
	bool binary;
	/* sparse gradients (agg_hot_gen_sparse) */
	uint32_t width;		/* float32 values per row */
	double touch;		/* share of the ids a worker touches per iteration */
	uint32_t worker;
	uint64_t iter;
};

/* The id of Zipf rank r (0-based) in iteration it: ranks are scattered over
 * the ids by an affine bijection, shifted by drift per iteration. */
uint64_t agg_hot_gen_id(const struct agg_hot_gen_opts *o, uint64_t rank, uint64_t it);
/* Write a synthetic log to f.  -EINVAL on bad options, -EIO on write errors. */
int agg_hot_gen(FILE *f, const struct agg_hot_gen_opts *o);

/*
 * One worker's sparse gradient for one iteration (o->worker, o->iter): Zipf
 * draws of ranks, mapped to ids as agg_hot_gen_id does, until
 * round(touch x ids) distinct ids are touched; each touched row gets width
 * N(0, 1) values times the square root of the times it was drawn.  The
 * same options give the same bits; workers and iterations draw from
 * independent streams of the seed.  -EINVAL on bad options, -ERANGE when
 * the Zipf exponent makes so many distinct ids out of reach (1000 draws a
 * row), -ENOMEM.
 */
int agg_hot_gen_sparse(const struct agg_hot_gen_opts *o, struct agg_sparse *out);

#endif
