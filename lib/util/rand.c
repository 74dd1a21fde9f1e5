// SPDX-License-Identifier: GPL-2.0-only
#include <math.h>

#include "rand.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void agg_rand_seed(struct agg_rand *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t agg_rand_u64(struct agg_rand *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

double agg_rand_double(struct agg_rand *r)
{
	return (agg_rand_u64(r) >> 11) * 0x1.0p-53;
}

double agg_rand_normal(struct agg_rand *r)
{
	double u1 = 1.0 - agg_rand_double(r), u2 = agg_rand_double(r);

	return sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2);
}

uint64_t agg_rand_below(struct agg_rand *r, uint64_t n)
{
	/* Lemire's multiply-shift; the tiny bias is irrelevant here. */
	return (uint64_t)(((unsigned __int128)agg_rand_u64(r) * n) >> 64);
}

uint64_t agg_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}
