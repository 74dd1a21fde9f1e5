// SPDX-License-Identifier: GPL-2.0-only
/* SipHash-2-4, from the paper (https://131002.net/siphash/siphash.pdf). */
#include "siphash.h"

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void sipround(struct agg_siphash *s)
{
	s->v0 += s->v1; s->v1 = rotl(s->v1, 13); s->v1 ^= s->v0; s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3; s->v3 = rotl(s->v3, 16); s->v3 ^= s->v2;
	s->v0 += s->v3; s->v3 = rotl(s->v3, 21); s->v3 ^= s->v0;
	s->v2 += s->v1; s->v1 = rotl(s->v1, 17); s->v1 ^= s->v2; s->v2 = rotl(s->v2, 32);
}

static inline void compress(struct agg_siphash *s, uint64_t m)
{
	s->v3 ^= m;
	sipround(s);
	sipround(s);
	s->v0 ^= m;
}

void agg_siphash_init(struct agg_siphash *s, const uint8_t key[AGG_SIPHASH_KEY_SIZE])
{
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);

	s->v0 = k0 ^ 0x736f6d6570736575ULL;	/* "somepseudorandomlygeneratedbytes" */
	s->v1 = k1 ^ 0x646f72616e646f6dULL;
	s->v2 = k0 ^ 0x6c7967656e657261ULL;
	s->v3 = k1 ^ 0x7465646279746573ULL;
	s->tail = 0;
	s->len = 0;
}

void agg_siphash_update(struct agg_siphash *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	unsigned have = s->len % 8;

	s->len += len;
	/* Fill a word started by an earlier call, byte by byte. */
	while (have && len) {
		s->tail |= (uint64_t)*p++ << (8 * have++);
		len--;
		if (have == 8) {
			compress(s, s->tail);
			s->tail = 0;
			have = 0;
		}
	}
	for (; len >= 8; p += 8, len -= 8)
		compress(s, load_le64(p));
	for (unsigned i = 0; i < len; i++)
		s->tail |= (uint64_t)p[i] << (8 * i);
}

uint64_t agg_siphash_final(struct agg_siphash *s)
{
	compress(s, s->tail | s->len << 56);
	s->v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		sipround(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t agg_siphash(const uint8_t key[AGG_SIPHASH_KEY_SIZE], const void *data,
		     size_t len)
{
	struct agg_siphash s;

	agg_siphash_init(&s, key);
	agg_siphash_update(&s, data, len);
	return agg_siphash_final(&s);
}

void agg_siphash_key(uint8_t key[AGG_SIPHASH_KEY_SIZE], uint64_t k0, uint64_t k1)
{
	for (int i = 0; i < 8; i++) {
		key[i] = k0 >> (8 * i);
		key[8 + i] = k1 >> (8 * i);
	}
}
