/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_STAT_H
#define AGG_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp.h"
#include "plan.h"

/*
 * A loaded node's counters and slot state as agg-stat(1) reads them: the
 * per-CPU "stats" map of the programs and agg-send's "sent" map, the slot
 * pool ("slots", "trees") and the results' iterations ("meta").  Nothing
 * here needs the node's address to be local: a node's pins can be read
 * from any network namespace that sees the bpf filesystem.
 */

/* Counter fields: the "stats" map's AGG_S_* first, then the "sent" map's. */
#define AGG_STAT_SENT(k)	(AGG_S_COUNT + (k))
#define AGG_STAT_NFIELDS	(AGG_S_COUNT + AGG_SENT_COUNT)

/* The stable name of a field (AGG_STAT_NAMES, AGG_SENT_NAMES). */
const char *agg_stat_name(int field);
/* The name of a stream's field f (AGG_SST_NAMES). */
const char *agg_stat_stream_name(int f);
/* Is the field a drop (drop_*, error, tx_fail)? */
bool agg_stat_is_drop(int field);

/* Counters grouped for people; every field is in exactly one group. */
struct agg_stat_group {
	const char *title;
	int nfields;
	int field[16];
};
extern const struct agg_stat_group agg_stat_groups[];
extern const int agg_stat_ngroups;

/* A pinned node directory PIN_DIR/JOB/NODE. */
struct agg_stat_ref {
	uint32_t job;
	char node[256];
	char dir[512];
};

/*
 * Every node directory under pin_dir (only job's when job is not NULL),
 * sorted by job then node name, into *out (malloc'd).  Returns how many,
 * or -ENOENT with why set when pin_dir is not on bpffs, the job is not
 * loaded or nothing is, or another -errno.
 */
int agg_stat_list(const char *pin_dir, const char *job, struct agg_stat_ref **out,
		  char *why, size_t whylen);

/* A node opened for reading. */
struct agg_stat_node {
	struct agg_node node;	/* opened without AGG_NODE_IO (dp.h) */
	struct agg_stat_ref ref;
	int ncpu;		/* possible CPUs: entries of a per-CPU value */
};

/* Open the node in dir (a PIN_DIR/JOB/NODE directory): 0, or -errno with
 * why set (-ENOENT: no plan pinned, a load that did not finish). */
int agg_stat_open(struct agg_stat_node *n, const char *dir, char *why, size_t whylen);
void agg_stat_close(struct agg_stat_node *n);

/* Is the node opened the one pinned now?  1 yes, 0 it was loaded again
 * (other maps are pinned), -ENOENT it was unloaded, or another -errno. */
int agg_stat_current(const struct agg_stat_node *n);

/* One reading of a node's counters, at t (CLOCK_MONOTONIC seconds). */
struct agg_stat_snap {
	uint64_t v[AGG_STAT_NFIELDS];
	/* agg-send's streams: stream k's field f (enum agg_sent_stream) is
	 * stream[k * AGG_SST_COUNT + f]; nstreams streams read (0 for a load
	 * older than the stream sections) */
	uint64_t stream[AGG_MAX_STREAMS * AGG_SST_COUNT];
	unsigned nstreams;
	uint64_t *percpu;	/* ncpu x AGG_S_COUNT when asked for, else NULL */
	double t;
};

/* Read the counters (with percpu, each CPU's too, malloc'd into s->percpu
 * once and reused).  0 or -errno. */
int agg_stat_read(const struct agg_stat_node *n, struct agg_stat_snap *s, bool percpu);
void agg_stat_snap_free(struct agg_stat_snap *s);


/* Per-second rates between two readings of one node, over the elapsed
 * time measured between them. */
struct agg_stat_rates {
	double seconds;			/* b.t - a.t */
	double rate[AGG_STAT_NFIELDS];	/* per field, per second */
	double gbps;			/* rx x segment x 4 bytes, in Gbit/s */
	double drops;			/* every drop field, per second */
};
void agg_stat_rates(const struct agg_stat_node *n, const struct agg_stat_snap *a,
		    const struct agg_stat_snap *b, struct agg_stat_rates *r);

/* A slot of the pool, with the contributors it holds and waits for. */
struct agg_stat_slot {
	uint32_t index;
	uint64_t ver;		/* agg_ver(run, iteration); 0: never used */
	uint32_t seg;		/* wire segment */
	uint32_t done;
	uint32_t op;
	unsigned tree;		/* the segment's tree */
	uint64_t bitmap;	/* contributors in */
	uint64_t expect;	/* contributors of the tree here */
};

/* The node's place in every tree of the plan ("trees" map): ti has
 * plan.ntrees entries.  0 or -errno. */
int agg_stat_trees_read(const struct agg_stat_node *n, struct agg_tree_info *ti);

/* Read slot i (0 .. l.nslots-1); ti from agg_stat_trees_read gives its
 * expected contributors.  0 or -errno. */
int agg_stat_slot_read(const struct agg_stat_node *n, const struct agg_tree_info *ti,
		       uint32_t i, struct agg_stat_slot *s);

/* The names of the contributors of bits (kid[i] for bit i, the node itself
 * for its own bit), comma-separated, or "-" for none; at most len bytes. */
void agg_stat_bits_names(const struct agg_stat_node *n, const struct agg_tree_info *ti,
			 uint64_t bits, char *buf, size_t len);

/* The result ("meta") of wire segment s.  0 or -errno. */
int agg_stat_meta_read(const struct agg_stat_node *n, uint32_t s, struct agg_meta *m);

/* "sum", "max", "min" or "?". */
const char *agg_stat_op_name(uint32_t op);

/*
 * A range of wire segments: "A-B" (inclusive) or "A".  0, or -EINVAL with
 * *col the 0-based offset of the first bad character.
 */
int agg_stat_range_parse(const char *s, uint32_t *lo, uint32_t *hi, int *col);

#endif
