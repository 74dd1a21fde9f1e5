// SPDX-License-Identifier: GPL-2.0-only
/*
 * Reading a loaded node's counters and slot state for agg-stat: the
 * pinned maps of PIN_DIR/JOB/NODE, opened by path, so any namespace that
 * sees the bpf filesystem can read any node.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "opts.h"
#include "stat.h"

static const char *const stat_names[] = AGG_STAT_NAMES;
static const char *const sent_names[] = AGG_SENT_NAMES;
static const char *const sst_names[] = AGG_SST_NAMES;

_Static_assert(sizeof(stat_names) / sizeof(stat_names[0]) == AGG_S_COUNT,
	       "AGG_STAT_NAMES and enum agg_stat disagree");
_Static_assert(sizeof(sent_names) / sizeof(sent_names[0]) == AGG_SENT_COUNT,
	       "AGG_SENT_NAMES and enum agg_sent disagree");
_Static_assert(sizeof(sst_names) / sizeof(sst_names[0]) == AGG_SST_COUNT,
	       "AGG_SST_NAMES and enum agg_sent_stream disagree");

const char *agg_stat_stream_name(int f)
{
	return f >= 0 && f < AGG_SST_COUNT ? sst_names[f] : "?";
}

const char *agg_stat_name(int field)
{
	if (field >= 0 && field < AGG_S_COUNT)
		return stat_names[field];
	if (field >= AGG_S_COUNT && field < AGG_STAT_NFIELDS)
		return sent_names[field - AGG_S_COUNT];
	return "?";
}

bool agg_stat_is_drop(int field)
{
	return (field >= AGG_S_DROP_DUP && field <= AGG_S_DROP_AHEAD) ||
	       field == AGG_S_ERROR || field == AGG_S_TX_FAIL;
}

const struct agg_stat_group agg_stat_groups[] = {
	{ "packets in", 2, { AGG_S_RX, AGG_S_OTHER } },
	{ "aggregation", 5, { AGG_S_ADDED, AGG_S_DONE, AGG_S_FWD_UP, AGG_S_SATURATED,
			      AGG_S_SPARSE } },
	{ "results", 4, { AGG_S_STORED, AGG_S_RELAYED, AGG_S_FANOUT, AGG_S_SIGNALS } },
	{ "recovery", 5, { AGG_S_RETX, AGG_STAT_SENT(AGG_SENT_RESENT), AGG_S_SERVED,
			   AGG_S_PENDING, AGG_S_PROBES } },
	{ "drops", 15, { AGG_S_DROP_DUP, AGG_S_DROP_STALE, AGG_S_DROP_BUSY,
			 AGG_S_DROP_MALFORMED, AGG_S_DROP_JOB, AGG_S_DROP_TOKEN,
			 AGG_S_DROP_MEMBER, AGG_S_DROP_MAC, AGG_S_DROP_FLAGS,
			 AGG_S_DROP_RUN, AGG_S_DROP_AHEAD, AGG_S_DROP_ROUTE,
			 AGG_S_DROP_SEG, AGG_S_ERROR, AGG_S_TX_FAIL } },
	{ "sent by agg-send and libagg", 5, { AGG_STAT_SENT(AGG_SENT_ITERS), AGG_STAT_SENT(AGG_SENT_WIRE),
				  AGG_STAT_SENT(AGG_SENT_LOCAL), AGG_STAT_SENT(AGG_SENT_FANOUT),
				  AGG_STAT_SENT(AGG_SENT_SIGNALS) } },
};
const int agg_stat_ngroups = sizeof(agg_stat_groups) / sizeof(agg_stat_groups[0]);

static bool is_number(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 10;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ref_cmp(const void *a, const void *b)
{
	const struct agg_stat_ref *x = a, *y = b;

	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return strcmp(x->node, y->node);
}

/* Append the node directories of one job directory. */
static int list_job(const char *pin_dir, const char *job, struct agg_stat_ref **out,
		    int *n, int *cap)
{
	char jobdir[512];
	struct dirent *e;
	DIR *d;

	snprintf(jobdir, sizeof(jobdir), "%s/%s", pin_dir, job);
	d = opendir(jobdir);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct agg_stat_ref *r;
		char path[1024];

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", jobdir, e->d_name) >= (int)sizeof(path) ||
		    !is_dir(path))
			continue;
		if (*n == *cap) {
			int ncap = *cap ? 2 * *cap : 16;
			struct agg_stat_ref *m = realloc(*out, ncap * sizeof(**out));

			if (!m) {
				closedir(d);
				return -ENOMEM;
			}
			*out = m;
			*cap = ncap;
		}
		r = &(*out)[(*n)++];
		memset(r, 0, sizeof(*r));
		r->job = (uint32_t)strtoul(job, NULL, 10);
		snprintf(r->node, sizeof(r->node), "%s", e->d_name);
		if (agg_pin_path(r->dir, sizeof(r->dir), pin_dir, r->job, r->node, NULL)) {
			(*n)--;
			continue;
		}
	}
	closedir(d);
	return 0;
}

/* Why pin_dir is not on bpffs or the job is not loaded, in the words of
 * agg_node_locate, which every tool's errors share. */
static int locate_why(const char *pin_dir, const char *job, char *why, size_t whylen)
{
	char dir[512];

	snprintf(why, whylen, "job %s is not loaded under %s", job ? job : "", pin_dir);
	agg_node_locate(pin_dir, job, NULL, dir, sizeof(dir), why, whylen);
	return -ENOENT;
}

int agg_stat_list(const char *pin_dir, const char *job, struct agg_stat_ref **out,
		  char *why, size_t whylen)
{
	struct dirent *e;
	int n = 0, cap = 0, err;
	DIR *d;

	*out = NULL;
	if (job) {
		char jobdir[512];

		snprintf(jobdir, sizeof(jobdir), "%s/%s", pin_dir, job);
		if (agg_bpffs_check(pin_dir) || !is_number(job) || !is_dir(jobdir))
			return locate_why(pin_dir, job, why, whylen);
		err = list_job(pin_dir, job, out, &n, &cap);
	} else {
		if (agg_bpffs_check(pin_dir))
			return locate_why(pin_dir, NULL, why, whylen);
		d = opendir(pin_dir);
		if (!d) {
			if (errno == ENOENT) {
				snprintf(why, whylen, "no job is loaded under %s", pin_dir);
				return -ENOENT;
			}
			err = -errno;
			snprintf(why, whylen, "%s: %s", pin_dir, strerror(errno));
			return err;
		}
		err = 0;
		while (!err && (e = readdir(d))) {
			char jobdir[1024];

			snprintf(jobdir, sizeof(jobdir), "%s/%s", pin_dir, e->d_name);
			if (is_number(e->d_name) && is_dir(jobdir))
				err = list_job(pin_dir, e->d_name, out, &n, &cap);
		}
		closedir(d);
	}
	if (err) {
		snprintf(why, whylen, "%s: %s", pin_dir, strerror(-err));
		free(*out);
		*out = NULL;
		return err;
	}
	if (n == 0) {
		if (job)
			snprintf(why, whylen, "job %s has no node loaded under %s", job, pin_dir);
		else
			snprintf(why, whylen, "no job is loaded under %s", pin_dir);
		free(*out);
		*out = NULL;
		return -ENOENT;
	}
	qsort(*out, n, sizeof(**out), ref_cmp);
	return n;
}

int agg_stat_open(struct agg_stat_node *n, const char *dir, char *why, size_t whylen)
{
	const char *slash = strrchr(dir, '/'), *node;
	int err;

	memset(n, 0, sizeof(*n));
	snprintf(n->ref.dir, sizeof(n->ref.dir), "%s", dir);
	node = slash ? slash + 1 : dir;
	snprintf(n->ref.node, sizeof(n->ref.node), "%s", node);
	if (slash) {
		const char *j = slash;

		while (j > dir && j[-1] != '/')
			j--;
		n->ref.job = (uint32_t)strtoul(j, NULL, 10);
	}
	err = agg_node_open_dir(&n->node, dir, 0, why, whylen);
	if (err)
		return err;
	n->ncpu = libbpf_num_possible_cpus();
	if (n->ncpu <= 0) {
		snprintf(why, whylen, "cannot count the possible CPUs: %s", strerror(-n->ncpu));
		return n->ncpu ? n->ncpu : -EINVAL;
	}
	return 0;
}

void agg_stat_close(struct agg_stat_node *n)
{
	agg_node_close(&n->node);
	memset(&n->ref, 0, sizeof(n->ref));
	n->ncpu = 0;
}

static int map_id(int fd, uint32_t *id)
{
	struct bpf_map_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*id = info.id;
	return 0;
}

int agg_stat_current(const struct agg_stat_node *n)
{
	char path[600];
	uint32_t now = 0, ours = 0;
	int fd, err;

	snprintf(path, sizeof(path), "%s/stats", n->ref.dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	err = map_id(fd, &now) ?: map_id(n->node.fd_stats, &ours);
	close(fd);
	if (err)
		return err;
	return now == ours;
}

int agg_stat_read(const struct agg_stat_node *n, struct agg_stat_snap *s, bool percpu)
{
	int err;

	if (percpu && !s->percpu) {
		s->percpu = calloc((size_t)n->ncpu * AGG_S_COUNT, sizeof(*s->percpu));
		if (!s->percpu)
			return -ENOMEM;
	}
	err = agg_stats_read(n->node.fd_stats, s->v, percpu ? s->percpu : NULL, n->ncpu);
	if (err < 0)
		return err;
	for (uint32_t k = 0; k < AGG_SENT_COUNT; k++) {
		uint64_t v = 0;

		if (bpf_map_lookup_elem(n->node.fd_sent, &k, &v))
			return -errno;
		s->v[AGG_STAT_SENT(k)] = v;
	}
	s->nstreams = 0;
	for (uint32_t k = 0; k < AGG_MAX_STREAMS * AGG_SST_COUNT; k++) {
		uint32_t key = AGG_SENT_COUNT + k;
		uint64_t v = 0;

		if (bpf_map_lookup_elem(n->node.fd_sent, &key, &v)) {
			if (errno == ENOENT)
				break;	/* a load older than the stream sections */
			return -errno;
		}
		s->stream[k] = v;
		s->nstreams = k / AGG_SST_COUNT + 1;
	}
	s->t = agg_now();
	return 0;
}

void agg_stat_snap_free(struct agg_stat_snap *s)
{
	free(s->percpu);
	s->percpu = NULL;
}

void agg_stat_rates(const struct agg_stat_node *n, const struct agg_stat_snap *a,
		    const struct agg_stat_snap *b, struct agg_stat_rates *r)
{
	double dt = b->t - a->t;

	memset(r, 0, sizeof(*r));
	r->seconds = dt;
	if (dt <= 0)
		return;
	for (int k = 0; k < AGG_STAT_NFIELDS; k++) {
		/* A counter never goes back unless the node was reloaded. */
		uint64_t d = b->v[k] >= a->v[k] ? b->v[k] - a->v[k] : 0;

		r->rate[k] = d / dt;
		if (k < AGG_S_COUNT && agg_stat_is_drop(k))
			r->drops += r->rate[k];
	}
	r->gbps = r->rate[AGG_S_RX] * n->node.l.segment * 4 * 8 / 1e9;
}

int agg_stat_trees_read(const struct agg_stat_node *n, struct agg_tree_info *ti)
{
	for (uint32_t t = 0; t < (uint32_t)n->node.plan.ntrees; t++) {
		memset(&ti[t], 0, sizeof(ti[t]));
		if (bpf_map_lookup_elem(n->node.fd_trees, &t, &ti[t]))
			return -errno;
	}
	return 0;
}

int agg_stat_slot_read(const struct agg_stat_node *n, const struct agg_tree_info *ti,
		       uint32_t i, struct agg_stat_slot *s)
{
	struct agg_slot v;
	int err;

	memset(s, 0, sizeof(*s));
	s->index = i;
	err = agg_slot_read(n->node.fd_slots, &n->node.l, i, &v);
	if (err)
		return err;
	s->ver = v.ver;
	s->seg = v.seg;
	s->done = v.done;
	s->op = v.op;
	s->bitmap = v.bitmap;
	if (s->ver) {
		s->tree = agg_plan_seg_tree(&n->node.plan, s->seg);
		s->expect = ti[s->tree].expect;
	}
	return 0;
}

void agg_stat_bits_names(const struct agg_stat_node *n, const struct agg_tree_info *ti,
			 uint64_t bits, char *buf, size_t len)
{
	size_t used = 0;

	snprintf(buf, len, "-");
	for (unsigned b = 0; b < 64 && bits; b++) {
		char num[24];
		const char *name;
		int w;

		if (!(bits & (1ULL << b)))
			continue;
		bits &= ~(1ULL << b);
		if (b < ti->nkids && ti->kid[b] < (uint32_t)n->node.plan.nnodes) {
			name = n->node.plan.node[ti->kid[b]].name;
		} else if (b == ti->self_bit) {
			name = n->node.plan.node[n->node.self].name;
		} else {
			snprintf(num, sizeof(num), "bit%u", b);
			name = num;
		}
		w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", name);
		if (w < 0 || (size_t)w >= len - used) {
			if (len > 4)
				strcpy(buf + len - 4, "...");
			return;
		}
		used += w;
	}
}

int agg_stat_meta_read(const struct agg_stat_node *n, uint32_t s, struct agg_meta *m)
{
	memset(m, 0, sizeof(*m));
	if (bpf_map_lookup_elem(n->node.fd_meta, &s, m))
		return -errno;
	return 0;
}

const char *agg_stat_op_name(uint32_t op)
{
	switch (op) {
	case AGG_OP_SUM: return "sum";
	case AGG_OP_MAX: return "max";
	case AGG_OP_MIN: return "min";
	}
	return "?";
}

int agg_stat_range_parse(const char *s, uint32_t *lo, uint32_t *hi, int *col)
{
	const char *dash = strchr(s, '-');
	char first[24];
	uint64_t a, b;
	int c = 0, err;

	if (!dash) {
		err = agg_parse_u64(s, &a, &c);
		if (err || a > UINT32_MAX) {
			*col = err ? c : 0;
			return -EINVAL;
		}
		*lo = *hi = (uint32_t)a;
		return 0;
	}
	if ((size_t)(dash - s) >= sizeof(first)) {
		*col = 0;
		return -EINVAL;
	}
	memcpy(first, s, dash - s);
	first[dash - s] = '\0';
	err = agg_parse_u64(first, &a, &c);
	if (err || a > UINT32_MAX) {
		*col = err ? c : 0;
		return -EINVAL;
	}
	err = agg_parse_u64(dash + 1, &b, &c);
	if (err || b > UINT32_MAX) {
		*col = (int)(dash + 1 - s) + (err ? c : 0);
		return -EINVAL;
	}
	if (b < a) {
		*col = (int)(dash + 1 - s);
		return -EINVAL;
	}
	*lo = (uint32_t)a;
	*hi = (uint32_t)b;
	return 0;
}
