/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_SIPHASH_H
#define AGG_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/*
 * SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit hash, a PRF
 * for short inputs under a secret 128-bit key.  The key is 16 bytes, read
 * as two little-endian 64-bit words k0 (bytes 0-7) and k1 (bytes 8-15).
 */
#define AGG_SIPHASH_KEY_SIZE	16

struct agg_siphash {
	uint64_t v0, v1, v2, v3;
	uint64_t tail;		/* the last len % 8 bytes fed, little-endian */
	uint64_t len;		/* bytes fed so far */
};

/* Incremental: init, update any number of times, final once. */
void agg_siphash_init(struct agg_siphash *s, const uint8_t key[AGG_SIPHASH_KEY_SIZE]);
void agg_siphash_update(struct agg_siphash *s, const void *data, size_t len);
uint64_t agg_siphash_final(struct agg_siphash *s);

/* SipHash-2-4 of len bytes at data under key. */
uint64_t agg_siphash(const uint8_t key[AGG_SIPHASH_KEY_SIZE], const void *data,
		     size_t len);

/* The key bytes of two 64-bit words: k0 little-endian, then k1. */
void agg_siphash_key(uint8_t key[AGG_SIPHASH_KEY_SIZE], uint64_t k0, uint64_t k1);

#endif
