// SPDX-License-Identifier: GPL-2.0-only
/* Counting updates: exact (flat array + map) and Space-Saving. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

#define MAP_EMPTY	UINT64_MAX	/* never an id: the binary iteration end */
#define SPILLED		UINT32_MAX	/* dense counter moved to the map */
/*
 * The array may cover 2^24 ids (64 MiB) whatever, and 32 ids per distinct
 * id seen: 128 bytes a distinct id, about twice what the map takes at its
 * peak (16-byte entries at 35% load next to the 70% table being rehashed),
 * for a counter that is one load, no probing and no rehash.
 */
#define DENSE_FLOOR	(1ULL << 24)
#define DENSE_PER_ID	32

static inline size_t hash64(uint64_t x, size_t mask)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x & mask;
}

/* ---- id -> count map ---------------------------------------------------------- */

static int map_init(struct agg_hot_map *m, size_t slots)
{
	size_t t = 16;

	while (t < slots)
		t <<= 1;
	m->e = malloc(t * sizeof(*m->e));
	if (!m->e)
		return -ENOMEM;
	for (size_t i = 0; i < t; i++)
		m->e[i].id = MAP_EMPTY;
	m->mask = t - 1;
	m->n = 0;
	return 0;
}

static struct agg_hot_entry *map_find(const struct agg_hot_map *m, uint64_t id)
{
	size_t i;

	if (!m->e)
		return NULL;
	for (i = hash64(id, m->mask); m->e[i].id != MAP_EMPTY; i = (i + 1) & m->mask)
		if (m->e[i].id == id)
			return &m->e[i];
	return NULL;
}

/* Insert (id must be absent) without growing. */
static void map_put(struct agg_hot_map *m, uint64_t id, uint64_t freq)
{
	size_t i = hash64(id, m->mask);

	while (m->e[i].id != MAP_EMPTY)
		i = (i + 1) & m->mask;
	m->e[i] = (struct agg_hot_entry){ id, freq };
	m->n++;
}

/* A copy of m keeping the entries keep() accepts, sized for them. */
static int map_rebuild(struct agg_hot_map *m, size_t want,
		       bool (*keep)(struct agg_hot_entry *e, void *arg), void *arg)
{
	struct agg_hot_map nm;
	size_t old = m->e ? m->mask + 1 : 0;

	if (map_init(&nm, want + want / 2 + 1))
		return -ENOMEM;
	for (size_t i = 0; i < old; i++)
		if (m->e[i].id != MAP_EMPTY && (!keep || keep(&m->e[i], arg)))
			map_put(&nm, m->e[i].id, m->e[i].freq);
	free(m->e);
	*m = nm;
	return 0;
}

/* Add delta to id's count; 1 if id was new, 0, or -ENOMEM. */
static int map_add(struct agg_hot_map *m, uint64_t id, uint64_t delta)
{
	struct agg_hot_entry *e = map_find(m, id);

	if (e) {
		e->freq += delta;
		return 0;
	}
	/* Linear probing stays short below 70% load. */
	if (!m->e || (m->n + 1) * 10 > (m->mask + 1) * 7) {
		if (map_rebuild(m, 2 * (m->n + 1), NULL, NULL))
			return -ENOMEM;
	}
	map_put(m, id, delta);
	return 1;
}

/* ---- exact counts ----------------------------------------------------------------- */

struct migrate {
	struct agg_hot_counts *hc;
	uint64_t below;
};

/* Entries below the new end of the array move into it (big ones stay). */
static bool stays_in_map(struct agg_hot_entry *e, void *arg)
{
	struct migrate *mg = arg;

	if (e->id >= mg->below)
		return true;
	if (e->freq >= SPILLED) {
		mg->hc->dense[e->id] = SPILLED;
		return true;
	}
	mg->hc->dense[e->id] = e->freq;
	return false;
}

static int dense_grow(struct agg_hot_counts *hc, uint64_t n)
{
	uint32_t *c = realloc(hc->dense, n * sizeof(*c));
	struct migrate mg = { hc, n };

	if (!c)
		return -ENOMEM;
	memset(c + hc->ndense, 0, (n - hc->ndense) * sizeof(*c));
	hc->dense = c;
	hc->ndense = n;
	if (!hc->map.n)
		return 0;
	return map_rebuild(&hc->map, hc->map.n, stays_in_map, &mg);
}

static int counts_add_slow(struct agg_hot_counts *hc, uint64_t id)
{
	uint64_t limit = DENSE_PER_ID * (hc->distinct + 1);
	int r;

	if (limit < DENSE_FLOOR)
		limit = DENSE_FLOOR;
	/* Grow by half at least, or each new id would move the whole map. */
	if (id >= hc->ndense && id < limit && limit >= hc->ndense + hc->ndense / 2) {
		uint64_t n = hc->ndense * 2;

		if (n < id + 1)
			n = id + 1;
		if (n < 65536)
			n = 65536;
		if (n > limit)
			n = limit;
		if ((r = dense_grow(hc, n)))
			return r;
		return agg_hot_counts_add(hc, id);
	}
	if (id < hc->ndense) {
		uint32_t *c = &hc->dense[id];

		/* A counter about to reach the marker moves to the map. */
		r = map_add(&hc->map, id, *c == SPILLED ? 1 : (uint64_t)*c + 1);
		if (r < 0)
			return r;
		*c = SPILLED;
		hc->total++;
		return 0;
	}
	r = map_add(&hc->map, id, 1);
	if (r < 0)
		return r;
	hc->distinct += r;
	hc->total++;
	return 0;
}

int agg_hot_counts_add(struct agg_hot_counts *hc, uint64_t id)
{
	if (id < hc->ndense && hc->dense[id] < SPILLED - 1) {
		hc->distinct += hc->dense[id]++ == 0;
		hc->total++;
		return 0;
	}
	return counts_add_slow(hc, id);
}

void agg_hot_counts_reset(struct agg_hot_counts *hc)
{
	if (hc->dense)
		memset(hc->dense, 0, hc->ndense * sizeof(*hc->dense));
	if (hc->map.e)
		for (size_t i = 0; i <= hc->map.mask; i++)
			hc->map.e[i].id = MAP_EMPTY;
	hc->map.n = 0;
	hc->total = hc->distinct = 0;
}

uint64_t agg_hot_counts_get(const struct agg_hot_counts *hc, uint64_t id)
{
	const struct agg_hot_entry *e;

	if (id < hc->ndense && hc->dense[id] != SPILLED)
		return hc->dense[id];
	e = map_find(&hc->map, id);
	return e ? e->freq : 0;
}

size_t agg_hot_counts_bytes(const struct agg_hot_counts *hc)
{
	return hc->ndense * sizeof(*hc->dense) +
	       (hc->map.e ? (hc->map.mask + 1) * sizeof(*hc->map.e) : 0);
}

void agg_hot_counts_free(struct agg_hot_counts *hc)
{
	free(hc->dense);
	free(hc->map.e);
	memset(hc, 0, sizeof(*hc));
}

/* ---- top k ----------------------------------------------------------------------------- */

/* Entry order: frequency descending, then id ascending. */
static inline bool before(const struct agg_hot_entry *a, const struct agg_hot_entry *b)
{
	return a->freq != b->freq ? a->freq > b->freq : a->id < b->id;
}

static int cmp_entry(const void *x, const void *y)
{
	const struct agg_hot_entry *a = x, *b = y;

	return before(a, b) ? -1 : before(b, a);
}

/* A min-heap (worst on top) keeping the best max entries seen. */
struct topk {
	struct agg_hot_entry *h;
	size_t n, max;
};

static void topk_push(struct topk *t, uint64_t id, uint64_t freq)
{
	struct agg_hot_entry e = { id, freq };
	size_t i;

	if (t->n == t->max) {
		if (!before(&e, &t->h[0]))
			return;
		for (i = 0;;) {		/* replace the worst, sift down */
			size_t c = 2 * i + 1;

			if (c >= t->n)
				break;
			if (c + 1 < t->n && before(&t->h[c], &t->h[c + 1]))
				c++;
			if (!before(&e, &t->h[c]))
				break;
			t->h[i] = t->h[c];
			i = c;
		}
		t->h[i] = e;
		return;
	}
	for (i = t->n++; i > 0 && before(&t->h[(i - 1) / 2], &e); i = (i - 1) / 2)
		t->h[i] = t->h[(i - 1) / 2];
	t->h[i] = e;
}

static int topk_init(struct topk *t, size_t max)
{
	t->n = 0;
	t->max = max ? max : 1;
	t->h = malloc(t->max * sizeof(*t->h));
	return t->h ? 0 : -ENOMEM;
}

static void topk_finish(struct topk *t, struct agg_hot_entry **out, size_t *n)
{
	qsort(t->h, t->n, sizeof(*t->h), cmp_entry);
	*out = t->h;
	*n = t->n;
}

int agg_hot_counts_top(const struct agg_hot_counts *hc, size_t max,
		       struct agg_hot_entry **out, size_t *n)
{
	struct topk t;

	if (topk_init(&t, max))
		return -ENOMEM;
	for (uint64_t id = 0; id < hc->ndense; id++) {
		uint32_t c = hc->dense[id];

		/* Most ids lose against a full heap's worst: test that first. */
		if (c && c != SPILLED && (t.n < t.max || c >= t.h[0].freq))
			topk_push(&t, id, c);
	}
	if (hc->map.e)
		for (size_t i = 0; i <= hc->map.mask; i++)
			if (hc->map.e[i].id != MAP_EMPTY)
				topk_push(&t, hc->map.e[i].id, hc->map.e[i].freq);
	topk_finish(&t, out, n);
	return 0;
}

/* ---- Space-Saving ------------------------------------------------------------------------ */

struct ss_counter {
	uint64_t id, count;
	uint32_t hpos;		/* its slot in the hash table */
};

struct agg_hot_sketch {
	struct ss_counter *heap;	/* min-heap by count */
	uint32_t *table;		/* open addressing: heap index + 1, 0 empty */
	size_t n, max, tmask;
	uint64_t total;
};

static size_t ss_table_size(size_t counters)
{
	size_t t = 1;

	while (t < 2 * counters)
		t <<= 1;
	return t;
}

size_t agg_hot_sketch_bytes(size_t counters)
{
	return counters * sizeof(struct ss_counter) + ss_table_size(counters) * sizeof(uint32_t);
}

struct agg_hot_sketch *agg_hot_sketch_new(size_t counters)
{
	struct agg_hot_sketch *s;

	if (counters == 0 || counters > UINT32_MAX / 4)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->heap = malloc(counters * sizeof(*s->heap));
	s->table = calloc(ss_table_size(counters), sizeof(*s->table));
	if (!s->heap || !s->table) {
		agg_hot_sketch_free(s);
		return NULL;
	}
	s->max = counters;
	s->tmask = ss_table_size(counters) - 1;
	return s;
}

void agg_hot_sketch_free(struct agg_hot_sketch *s)
{
	if (!s)
		return;
	free(s->heap);
	free(s->table);
	free(s);
}

void agg_hot_sketch_reset(struct agg_hot_sketch *s)
{
	memset(s->table, 0, (s->tmask + 1) * sizeof(*s->table));
	s->n = 0;
	s->total = 0;
}

uint64_t agg_hot_sketch_total(const struct agg_hot_sketch *s)
{
	return s->total;
}

static void ss_set(struct agg_hot_sketch *s, size_t i, struct ss_counter c)
{
	s->heap[i] = c;
	s->table[c.hpos] = i + 1;
}

static void ss_sift_down(struct agg_hot_sketch *s, size_t i)
{
	struct ss_counter c = s->heap[i];

	for (;;) {
		size_t k = 2 * i + 1;

		if (k >= s->n)
			break;
		if (k + 1 < s->n && s->heap[k + 1].count < s->heap[k].count)
			k++;
		if (s->heap[k].count >= c.count)
			break;
		ss_set(s, i, s->heap[k]);
		i = k;
	}
	ss_set(s, i, c);
}

/* Remove the table slot at pos with backward-shift deletion. */
static void ss_table_del(struct agg_hot_sketch *s, size_t pos)
{
	size_t i = pos, j = pos;

	s->table[i] = 0;
	for (;;) {
		size_t home;

		j = (j + 1) & s->tmask;
		if (!s->table[j])
			return;
		home = hash64(s->heap[s->table[j] - 1].id, s->tmask);
		/* j may move back to i unless its home lies in (i, j]. */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		s->table[i] = s->table[j];
		s->heap[s->table[i] - 1].hpos = i;
		s->table[j] = 0;
		i = j;
	}
}

void agg_hot_sketch_add(struct agg_hot_sketch *s, uint64_t id)
{
	size_t pos = hash64(id, s->tmask);
	struct ss_counter c;

	s->total++;
	for (; s->table[pos]; pos = (pos + 1) & s->tmask) {
		size_t i = s->table[pos] - 1;

		if (s->heap[i].id == id) {
			s->heap[i].count++;
			ss_sift_down(s, i);
			return;
		}
	}
	if (s->n < s->max) {	/* a free counter: count 1 is the smallest */
		size_t i = s->n++;

		c = (struct ss_counter){ id, 1, pos };
		while (i > 0 && s->heap[(i - 1) / 2].count > c.count) {
			ss_set(s, i, s->heap[(i - 1) / 2]);
			i = (i - 1) / 2;
		}
		ss_set(s, i, c);
		return;
	}
	/* Replace the minimum: the new id inherits its count, plus one. */
	c = s->heap[0];
	ss_table_del(s, c.hpos);
	for (pos = hash64(id, s->tmask); s->table[pos]; pos = (pos + 1) & s->tmask)
		;
	c.id = id;
	c.count++;
	c.hpos = pos;
	ss_set(s, 0, c);
	ss_sift_down(s, 0);
}

int agg_hot_sketch_top(const struct agg_hot_sketch *s, size_t max,
		       struct agg_hot_entry **out, size_t *n)
{
	struct topk t;

	if (topk_init(&t, max))
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		topk_push(&t, s->heap[i].id, s->heap[i].count);
	topk_finish(&t, out, n);
	return 0;
}
