/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_RAND_H
#define AGG_RAND_H

#include <stdint.h>

/* xoshiro256** seeded through splitmix64: the same seed, the same stream
 * on every host and every build. */
struct agg_rand {
	uint64_t s[4];
};

void agg_rand_seed(struct agg_rand *r, uint64_t seed);
uint64_t agg_rand_u64(struct agg_rand *r);
double agg_rand_double(struct agg_rand *r);	/* [0, 1) */
double agg_rand_normal(struct agg_rand *r);	/* N(0, 1) */
uint64_t agg_rand_below(struct agg_rand *r, uint64_t n);	/* [0, n) */

/* Greatest common divisor (Euclid); agg_gcd(0, 0) == 0. */
uint64_t agg_gcd(uint64_t a, uint64_t b);

#endif
