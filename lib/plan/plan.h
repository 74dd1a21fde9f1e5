/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_PLAN_H
#define AGG_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "hosts.h"

#define AGG_PLAN_VERSION	1
#define AGG_PLAN_MAX_TREES	64
#define AGG_PLAN_MAX_PERIOD	1024	/* sum of tree weights */
#define AGG_PLAN_MAX_SEGMENT	16384	/* float32 values per segment */

enum agg_scheme {
	AGG_SCHEME_ALEPH,
	AGG_SCHEME_RAT,
	AGG_SCHEME_PS,
	AGG_SCHEME_RING,	/* --eval only: the data plane aggregates over trees */
	AGG_SCHEME_COUNT,
};

const char *agg_scheme_name(enum agg_scheme s);
int agg_scheme_parse(const char *s, enum agg_scheme *out);

struct agg_plan_edge {
	int child, parent;	/* node indices */
};

struct agg_plan_tree {
	int root;		/* node index */
	unsigned weight;	/* share of the segments: weight / sum(weights) */
	struct agg_plan_edge *edge;
	int nedges;
	int *parent;		/* per node: parent index, -1 for none (derived) */
};

struct agg_plan {
	uint32_t job;
	uint16_t port;
	enum agg_scheme scheme;
	uint64_t seed;
	uint32_t segment;	/* float32 values per segment */
	uint64_t size;		/* gradient bytes per iteration */
	uint32_t slots;		/* aggregation slots per tree on each node */
	uint64_t token;		/* per-job token carried in every packet */
	double bw_demand;	/* b of ALEPH Eq. 1, Gbit/s */
	double cpu_demand;	/* c of ALEPH Eq. 1, cores per aggregated worker */
	struct agg_host *node;
	int nnodes;
	struct agg_plan_tree *tree;
	int ntrees;
	uint16_t *seg_map;	/* period entries: segment % period -> tree */
	unsigned period;
};

/* Defaults of plan header fields (documented in agg-plan(5)). */
#define AGG_PLAN_DEF_JOB	1
#define AGG_PLAN_DEF_PORT	9999
#define AGG_PLAN_DEF_SEGMENT	128
#define AGG_PLAN_DEF_SLOTS	256
#define AGG_PLAN_DEF_SIZE	100000000ULL
#define AGG_PLAN_DEF_CPU_DEMAND	0.1

/* Slots per tree when the plan does not say: a window of 2^18 values
 * (1 MiB of int32) per tree, 16 to AGG_PLAN_DEF_SLOTS (256 up to segment
 * 1024; 16 for the largest segments, whose slot pool would not fit the
 * CPU's caches otherwise). */
unsigned agg_plan_default_slots(unsigned segment);

void agg_plan_init(struct agg_plan *p);
void agg_plan_free(struct agg_plan *p);

/* Copy the hosts into the plan's node table (in file order). */
int agg_plan_set_nodes(struct agg_plan *p, const struct agg_hosts *h);
int agg_plan_find(const struct agg_plan *p, const char *name);
/* Add a tree rooted at node root; returns its index or -errno. */
int agg_plan_add_tree(struct agg_plan *p, int root, unsigned weight);
int agg_plan_add_edge(struct agg_plan *p, int tree, int child, int parent);

/*
 * Derive per-tree parent arrays and the segment map.  Called by the reader
 * and by the builders once all edges are in.
 */
int agg_plan_finish(struct agg_plan *p);

/* The tree segment seg belongs to: a smooth weighted round robin over
 * period = sum of weights, the same on every host. */
static inline unsigned agg_plan_seg_tree(const struct agg_plan *p, uint64_t seg)
{
	return p->seg_map[seg % p->period];
}

uint64_t agg_plan_nsegments(const struct agg_plan *p);
/* The tree's depth of node (edges to the root), or -1 if not in the tree. */
int agg_plan_depth(const struct agg_plan *p, int tree, int node);

/*
 * The canonical order of tree t's edges (breadth first from the root,
 * children in node order, unreachable edges last): fills order[] with
 * edge indices, returns their number or -ENOMEM.
 */
int agg_plan_edge_order(const struct agg_plan *p, int t, int *order);
int agg_plan_write(const struct agg_plan *p, FILE *f);
/* The canonical text of a plan (malloc'd), or NULL: equal plans, equal text. */
char *agg_plan_to_text(const struct agg_plan *p);
int agg_plan_read(struct agg_plan *p, FILE *f, const char *fname,
		  struct agg_diag *d);

/*
 * Check that plan p can run: every worker has exactly one parent in every
 * tree and reaches the root without a cycle, roots are parameter servers
 * with no parent, parameter servers send nowhere, and in an aleph plan no
 * aggregator has more children than its capacity (Eq. 1, with
 * p->bw_demand and p->cpu_demand).  Calls report(ctx, message) once per problem and
 * returns the number of problems.
 */
typedef void (*agg_plan_report_fn)(void *ctx, const char *msg);
int agg_plan_check(const struct agg_plan *p, agg_plan_report_fn report, void *ctx);

/*
 * The children of node in tree t, in node order (the order of the bits in
 * the data plane's contributor bitmaps): up to max of them into kids;
 * returns how many there are.
 */
int agg_plan_children(const struct agg_plan *p, int t, int node, int *kids, int max);

/*
 * The default job token (agg-plan(1), Token): SipHash-2-4 under key (the
 * secret's key, agg_secret_key) of the canonical text of p with token=0,
 * so the same plan and secret give the same token, and nobody without the
 * secret can compute it.  0 or -ENOMEM.
 */
int agg_plan_keyed_token(const struct agg_plan *p, const uint8_t key[16],
			 uint64_t *token);

/*
 * The value every packet of the job carries and the data plane checks
 * (agg-plan(5)): SipHash-2-4 of agg_plan_to_text(p), the text agg-load
 * pins, under the key k0 = p->token, k1 = 0x657269772d676761 (the ASCII
 * bytes "agg-wire" read little-endian), or 1 if that hash is 0.  Hosts
 * loaded with plans that differ in any byte have different values.
 * Returns 0 only if memory ran out.
 */
uint64_t agg_plan_wire_token(const struct agg_plan *p);

#endif
