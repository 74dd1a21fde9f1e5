/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_DP_H
#define AGG_DP_H

#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <netinet/in.h>

#include "agg.h"
#include "plan.h"

/*
 * The data plane as the tools see it: how a plan's gradient maps onto
 * wire segments, where a node's state is pinned, and how to open it.
 */

/* How the gradient is cut (man 7 agg-wire, "Segments"). */
struct agg_layout {
	uint64_t nvalues;	/* float32 values per iteration */
	uint32_t segment;	/* values per segment */
	uint32_t ndata;		/* data segments */
	uint32_t nexp;		/* exponent segments, sent first */
	uint32_t nsegs;		/* ndata + nexp: wire segments 0..nsegs-1 */
	uint32_t window;	/* segments a sender keeps in flight: slots x trees */
	uint32_t nslots;	/* the slot pool of every node: 2 x window, so a
				 * finished segment stays until every worker has it */
	uint32_t nchunks;	/* "slots" map entries per slot (agg.h) */
	uint32_t chunk;		/* values per chunk: ceil(segment / nchunks) */
	uint32_t chunk_cap;	/* accumulators per chunk: chunk rounded up to x4 */
	uint32_t workers;	/* W: nodes that contribute */
	int shift;		/* S of the quantization */
};

/* libbpf's messages through the tools' log: -v its warnings, -vv all
 * (after agg_opts_done; a data-plane tool's first call). */
void agg_log_libbpf(void);

/* Fill l from p; -EINVAL with why set when the data plane cannot run it. */
int agg_layout_of(const struct agg_plan *p, struct agg_layout *l,
		  char *why, size_t whylen);

/* The wire segments a call of nvalues values (1 .. l->nvalues) uses:
 * exponent segments [0, *nexp) and data segments [l->nexp, l->nexp + *ndata). */
void agg_call_segs(const struct agg_layout *l, uint64_t nvalues, uint32_t *ndata,
		   uint32_t *nexp);

/* Bytes of one "slots" map entry (one chunk of a slot). */
size_t agg_slot_size(const struct agg_layout *l);

/* Slot i's state, the header of its last chunk, from the "slots" map fd;
 * -errno. */
int agg_slot_read(int fd, const struct agg_layout *l, uint32_t i, struct agg_slot *hdr);

/* The maps and links a node pins, in unload order. */
extern const char *const agg_pin_names[];

/* PIN_DIR/JOB/NODE[/name] into buf; -ENAMETOOLONG if it does not fit. */
int agg_pin_path(char *buf, size_t len, const char *pin_dir, uint32_t job,
		 const char *node, const char *name);

/* Make sure bpffs is mounted at (or above) dir; -errno. */
int agg_bpffs_check(const char *dir);

/* Take the node directory's lock (flock); fd or -errno (-EWOULDBLOCK: busy). */
int agg_pin_lock(const char *dir, bool wait);

/*
 * The interface that holds addr in this network namespace: name, index,
 * MAC.  dev (may be "") names it instead.  -ENODEV when none.
 */
struct agg_netif {
	char name[IF_NAMESIZE];
	int ifindex;
	uint8_t mac[6];
	int mtu;
};
int agg_netif_find(struct in_addr addr, const char *dev, struct agg_netif *out);
/* Is addr configured on an interface of this namespace? */
bool agg_addr_is_local(struct in_addr addr);
/* ARP for addr on the interface: 0 and mac, or -errno (-ETIMEDOUT). */
int agg_arp_resolve(const struct agg_netif *nif, struct in_addr self,
		    struct in_addr addr, int timeout_ms, uint8_t mac[6]);
/*
 * ARP for n addresses at once: got[i] and mac[i] for those that answered.
 * Waits up to timeout_ms for those with need[i], and for the others until
 * grace_ms have passed too; -ETIMEDOUT when a needed one did not answer.
 */
int agg_arp_resolve_all(const struct agg_netif *nif, struct in_addr self,
			const struct in_addr *addr, int n, const bool *need,
			int timeout_ms, int grace_ms, uint8_t (*mac)[6], bool *got);

/* A loaded node opened by agg-send, agg-recv, agg-stat and agg-check. */
struct agg_node {
	struct agg_plan plan;
	struct agg_layout l;
	int self;		/* node index */
	char dir[512];		/* its pin directory */
	int fd_results, fd_meta, fd_stats, fd_sent, fd_prog, fd_clock, fd_progress;
	int fd_events;		/* ring buffer of stored results, or -1 */
	int fd_cc;		/* the last sender's congestion state, or -1 */
	int fd_slots, fd_trees;
	const int32_t *results;	/* mmap: the exponent segments' values (nexp x
				 * segment); all nsegs after agg_node_map_results */
	const struct agg_meta *meta; /* mmap: nsegs entries */
	struct agg_clock *clock; /* mmap (read-write): the node's clock */
	size_t results_len, meta_len, clock_len;
	uint64_t token;		/* the wire token of the plan */
	struct agg_netif nif;
};

/*
 * Open the node pinned under pin_dir: job and node may be NULL (the only
 * job; the node whose address is on this host).  Returns 0, -ENOENT with
 * why set when nothing matches, or another -errno.
 */
/* Find the pin directory of job/node (NULL: the only job; the local node). */
int agg_node_locate(const char *pin_dir, const char *job, const char *node,
		    char *dir, size_t dirlen, char *why, size_t whylen);
int agg_node_open(struct agg_node *n, const char *pin_dir, const char *job,
		  const char *node, char *why, size_t whylen);
/*
 * Open the node pinned in dir (PIN_DIR/JOB/NODE): its plan, layout and
 * counters, slots, trees, results' versions and progress (what agg-stat
 * and agg-check read, from any namespace); with AGG_NODE_IO also its
 * program, results, clock and interface, to send and receive (the node's
 * own namespace: what agg_node_open opens).  0, or -errno with why set
 * (-ENOENT: no plan pinned, a load that did not finish; -EIO: the stored
 * plan does not read).  agg_node_close undoes a failed open too.
 */
#define AGG_NODE_IO	1u
int agg_node_open_dir(struct agg_node *n, const char *dir, unsigned flags,
		      char *why, size_t whylen);
void agg_node_close(struct agg_node *n);
/* Map all of the results (agg_node_open maps the exponents only); -errno. */
int agg_node_map_results(struct agg_node *n);

/* Read the plan text stored in a node's "plan" map (malloc'd) or NULL. */
char *agg_pin_plan_text(const char *dir);

/* The wire segment of data segment d, and the tree of wire segment s. */
static inline uint32_t agg_wire_seg(const struct agg_layout *l, uint32_t d)
{
	return l->nexp + d;
}

/* Wire segments in [lo, hi) whose result is not version ver (agg_ver) yet. */
uint32_t agg_node_missing(const struct agg_node *n, uint32_t lo, uint32_t hi,
			  uint64_t ver);
/* The same as ranges of data segments ("0-99,130"), at most len bytes. */
void agg_node_missing_ranges(const struct agg_node *n, uint32_t lo, uint32_t hi,
			     uint64_t ver, char *buf, size_t len);

/*
 * Reading a result under its sequence lock (agg.h, "meta"): seq =
 * agg_meta_begin(m) (odd: being written, read nothing), read ver and the
 * values, then agg_meta_valid(m, seq): false if it changed meanwhile.
 */
static inline uint32_t agg_meta_begin(const struct agg_meta *m)
{
	return __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
}

static inline bool agg_meta_valid(const struct agg_meta *m, uint32_t seq)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return !(seq & 1) && __atomic_load_n(&m->seq, __ATOMIC_RELAXED) == seq;
}

/* "run 3 iteration 7", "nothing" for 0. */
const char *agg_ver_str(uint64_t ver, char *buf, size_t len);

/*
 * Open version ver on the node's clock for agg-send (send true) or
 * agg-recv: an iteration is sent once and received once per run, and a
 * run older than the node's is over.  -EALREADY (sent or received
 * already), -ESTALE (an older run), -ERANGE (too far ahead of the node's
 * clock, which other nodes would refuse), with why set; else 0, and the
 * clock (and the sent mark) moved to ver.
 */
int agg_node_open_iter(struct agg_node *n, uint64_t ver, bool send, char *why, size_t whylen);
/* Is run over on the node (it has seen a newer one)?  -ESTALE with why set,
 * else 0.  The first check of agg_node_open_iter. */
int agg_node_run_over(const struct agg_node *n, uint32_t run, char *why, size_t whylen);
/* agg-recv delivered ver: later agg-recvs of it (or older) are refused. */
void agg_node_mark_recvd(struct agg_node *n, uint64_t ver);
/*
 * The same for the sparse path, on marks of its own (an iteration may have
 * a dense and a sparse part): a worker's send and the root's serve take
 * the mark at once, a worker's receive on delivery
 * (agg_node_mark_sparse_recvd).  The errors of agg_node_open_iter, and
 * -EOPNOTSUPP when the node's clock predates the sparse marks.
 */
enum agg_sparse_mark { AGG_SPARSE_SEND, AGG_SPARSE_RECV, AGG_SPARSE_SERVE };
int agg_node_open_sparse(struct agg_node *n, uint64_t ver, enum agg_sparse_mark how,
			 char *why, size_t whylen);
void agg_node_mark_sparse_recvd(struct agg_node *n, uint64_t ver);
/* The agreed exponent of data segment d (valid once its exponent segment
 * of iter is in). */
int32_t agg_node_exponent(const struct agg_node *n, uint32_t d);

/*
 * Sum the per-CPU counters of a "stats" map into out; with percpu (ncpu x
 * AGG_S_COUNT) keep each CPU's too.  Returns the number of CPUs or -errno.
 */
int agg_stats_read(int fd, uint64_t out[AGG_S_COUNT], uint64_t *percpu, int ncpu);

/* Add to agg-send's counters in the "sent" map (one writer per node):
 * AGG_SENT_ENTRIES values, keys 0 ..; the per-stream keys are skipped on
 * a map of a load older than them. */
int agg_sent_add(int fd, const uint64_t add[AGG_SENT_ENTRIES]);

/*
 * A BPF link of prog on an interface by BPF_LINK_CREATE (XDP, or tcx,
 * which libbpf 1.1 does not know): the link's fd or -errno.
 */
#define AGG_TCX_INGRESS	46	/* enum bpf_attach_type, kernel >= 6.6 */
#define AGG_TCX_EGRESS	47
int agg_link_create(int prog_fd, int ifindex, unsigned type, unsigned flags);

#endif
