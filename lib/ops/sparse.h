/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_SPARSE_H
#define AGG_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hosts.h"	/* struct agg_diag */

/*
 * Sparse gradients (man 5 agg-sparse): one worker's rows of an embedding
 * table for one iteration, as (id, value vector) pairs, the vectors all
 * of one width (1 for scalars).  Ids are unique and in increasing order.
 *
 * Binary: a 16-byte header, little-endian
 *     magic "AGSP", u16 version (1), u16 width, u64 count
 * then count pairs, each a u64 id and width float32 values.
 * Text: an optional "width N" line, then one pair a line, "ID V1 ... VN";
 * '#' comments and blank lines are ignored; pairs in any order.
 */
#define AGG_SPARSE_MAGIC	"AGSP"
#define AGG_SPARSE_VERSION	1
#define AGG_SPARSE_HDR		16
#define AGG_SPARSE_MAX_WIDTH	256	/* one pair still fits a 1500-byte frame */

struct agg_sparse {
	uint32_t width;		/* float32 values per pair; 0: not known yet */
	uint64_t n;		/* pairs */
	uint64_t cap;
	uint64_t *id;		/* n ids, increasing */
	float *val;		/* n x width values, pair i at val[i * width] */
};

/* The float64 sum of several sparse gradients over the union of their ids. */
struct agg_sparse_sum {
	uint32_t width;
	uint64_t n;
	uint64_t *id;
	double *val;
};

void agg_sparse_init(struct agg_sparse *s, uint32_t width);
void agg_sparse_free(struct agg_sparse *s);
/* Room for n pairs in all (ids and values); -ENOMEM. */
int agg_sparse_reserve(struct agg_sparse *s, uint64_t n);
/* Bytes of one pair in a file or a packet: the id and width float32. */
static inline size_t agg_sparse_pair_size(uint32_t width)
{
	return 8 + 4 * (size_t)width;
}

/*
 * Read a sparse gradient, binary or text (told apart by the magic), all of
 * f, named name in messages.  0, or -EINVAL with d saying what and where
 * ("FILE:LINE:COL: ..." for text, "FILE: byte N: ..." for binary),
 * -ENOMEM, or the read error (-EIO, -EISDIR...) with d set.  On error s
 * holds nothing.
 */
int agg_sparse_read(struct agg_sparse *s, FILE *f, const char *name, struct agg_diag *d);
/* The same from bytes in memory. */
int agg_sparse_parse(struct agg_sparse *s, const void *buf, size_t len, const char *name,
		     struct agg_diag *d);
/* The same from path (NULL or "-": standard input); -ENOENT, -EACCES... with
 * d "cannot open PATH: ...". */
int agg_sparse_load(struct agg_sparse *s, const char *path, struct agg_diag *d);

/* s as a file, binary or text, into a malloc'd buffer: 0 or -ENOMEM. */
int agg_sparse_encode(const struct agg_sparse *s, bool text, char **buf, size_t *len);
/* The same written to f: 0, -ENOMEM or -EIO. */
int agg_sparse_write(const struct agg_sparse *s, FILE *f, bool text);

/*
 * Sum n inputs of one width over the union of their ids, in float64, each
 * id's values added in input order (in[0] first): the same inputs give the
 * same bits, whatever order they were gathered in.  0, -EINVAL (widths
 * differ) or -ENOMEM.
 */
int agg_sparse_sum(const struct agg_sparse *const *in, int n, struct agg_sparse_sum *out);
void agg_sparse_sum_free(struct agg_sparse_sum *s);
/*
 * The sum rounded to float32 (round to nearest): 0 or -ENOMEM.  A value
 * beyond float32's range (or from a NaN or Inf input) becomes NaN, as the
 * dense path's poison does; *over counts them.
 */
int agg_sparse_sum_round(const struct agg_sparse_sum *sum, struct agg_sparse *out,
			 uint64_t *over);

/*
 * Compare got with the float64 reference: the same ids, and every value
 * within tol x the largest magnitude of ref.  0, or -EINVAL with why
 * naming the first difference; *maxerr gets the largest error seen
 * relative to that magnitude.
 */
int agg_sparse_check(const struct agg_sparse *got, const struct agg_sparse_sum *ref,
		     double tol, double *maxerr, char *why, size_t whylen);

#endif
