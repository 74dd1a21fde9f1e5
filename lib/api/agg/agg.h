/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libagg: allreduce through a loaded agg job, in-process (man 3 libagg).
 *
 *	#include <agg/agg.h>		cc prog.c $(pkg-config --cflags --libs agg)
 *
 * A job is planned and loaded with the tools (agg-plan hosts | agg-load);
 * a training process on each worker host opens its node and allreduces
 * buffers through the XDP data plane.  Every function returns 0 or a
 * negative errno; agg_errmsg() then says what went wrong in one line.
 */
#ifndef AGG_AGG_H
#define AGG_AGG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AGG_API_VERSION	1

/* Element types of a buffer. */
enum agg_dtype {
	AGG_FLOAT32 = 0,
	AGG_FLOAT16 = 1,	/* IEEE 754 binary16 */
	AGG_BFLOAT16 = 2,	/* the high half of a float32 */
};

/* Reductions. */
enum agg_reduce {
	AGG_REDUCE_SUM = 0,
	AGG_REDUCE_MAX = 1,
	AGG_REDUCE_MIN = 2,
};

/* How to open; zero (or NULL) fields take the defaults of the tools.
 * The layout is part of the ABI (AGG_1.0): fields are only ever added at
 * the end, and sz tells the library which ones the caller knows. */
struct agg_opts {
	size_t sz;		/* sizeof(struct agg_opts) */
	const char *pin_dir;	/* NULL: $AGG_PIN_DIR, else /sys/fs/bpf/agg */
	const char *job;	/* NULL: the only job loaded */
	const char *node;	/* NULL: the node whose address is on this host */
	unsigned flags;		/* AGG_OPEN_* */
	unsigned run;		/* with AGG_OPEN_RUN: this run (0 to 65535); without:
				 * $AGG_RUN (else 0) + $TORCHELASTIC_RESTART_COUNT */
	double timeout;		/* seconds without progress before a call fails,
				 * 0 to 86400 (not NaN or Inf); 0: 30 */
	unsigned streams;	/* streams (UDP sockets, threads) an allreduce
				 * sends over: 0 or 1: one, 2 to AGG_MAX_STREAMS,
				 * or AGG_STREAMS_AUTO (agg-send(1) --streams auto) */
};
#define AGG_OPEN_RUN	0x1u	/* opts.run says the run */
#define AGG_MAX_STREAMS	64
#define AGG_STREAMS_AUTO 0xffffffffu

struct agg;		/* an opened node */
struct agg_req;		/* an allreduce started, not yet waited for */

/*
 * Open this host's node of a loaded job.  Every worker of the job opens
 * with the same run; each allreduce then takes the next iteration of the
 * run, so the workers must make the same calls in the same order (as with
 * any collective).  A job whose workers all restart opens with a newer run
 * (torchrun's restart count does it) and supersedes the old run's state
 * without a reload.  0 and *out, or -errno: -ENOENT (nothing loaded that
 * matches, or the node is not this host's), -EINVAL (out NULL, a bad
 * option, or the node is a parameter server), -EIO (the pinned plan),
 * -ESTALE (the node has seen a newer run), -EALREADY (the run has sent
 * iterations on the node already: a job that starts again needs a newer
 * one), -EADDRINUSE (an agg-recv or another process uses the node), others
 * for system failures.  A handle belongs to the process that opened it: a
 * forked child must not use or close it.
 */
int agg_open(struct agg **out, const struct agg_opts *opts);

/*
 * Close: the allreduce running ends (or times out), those started after it
 * are cancelled, and every request not waited for is freed.  NULL is a
 * no-op.
 */
void agg_close(struct agg *a);

/*
 * Sum (max, min) count elements of buf across every worker, in place.
 * count may be anything from 0 to agg_max_count(a); timeout <= 0 takes the
 * one agg_open was given (NaN, Inf or more than 86400: -EINVAL).  On error buf is unchanged and the result of
 * this iteration is lost on this worker (the others may have it): -EINVAL
 * (bad arguments), -ETIMEDOUT (nothing moved for timeout seconds; the
 * message names the missing segments and who holds them up), -ESTALE (a
 * newer run took the node over; buf may then be partly overwritten),
 * -EALREADY (another process sent this iteration of the run), -ERANGE (the
 * iteration is too far ahead), -ECANCELED (agg_close came first), others
 * for system failures (man 3 libagg lists them).  NaN and Inf
 * anywhere give NaN in the result at that element.
 */
int agg_allreduce(struct agg *a, void *buf, size_t count, enum agg_dtype dtype,
		  enum agg_reduce op, double timeout);

/*
 * The same, started: returns at once with *req, and the allreduce runs in
 * the handle's own thread, after those started before it.  buf must stay
 * untouched until agg_wait returns.  Several may be in flight.
 */
int agg_allreduce_start(struct agg *a, void *buf, size_t count, enum agg_dtype dtype,
			enum agg_reduce op, double timeout, struct agg_req **req);

/* 1 when req has ended (agg_wait will not block), 0 while it runs;
 * -EINVAL for NULL. */
int agg_test(struct agg_req *req);

/* Wait for req to end and free it: what agg_allreduce would return. */
int agg_wait(struct agg_req *req);

/* The largest count: the plan's size in float32 values (0 for NULL). */
size_t agg_max_count(const struct agg *a);
/* This worker's index among the plan's workers (0 ..), and their number
 * (-EINVAL for NULL). */
int agg_rank(const struct agg *a);
int agg_world_size(const struct agg *a);
/* The node's name in the plan, and the run the handle uses (NULL, 0 for
 * NULL). */
const char *agg_node_name(const struct agg *a);
unsigned agg_run(const struct agg *a);

/*
 * The calling thread's message for its last failed call ("" when none):
 * one line, valid until its next call into libagg.
 */
const char *agg_errmsg(void);

/* The library's version, "0.1.0". */
const char *agg_version(void);

/*
 * Readiness (AIACC-Training Sec. V-A): which of n gradient units are ready
 * on every worker.  all[i] becomes 1 where every worker's mine[i] is not
 * 0, else 0: a min-allreduce of n values through the data plane (an
 * iteration of the run, like any allreduce), so a unit can start as soon
 * as every worker has it, without a coordinator.  n up to agg_max_count;
 * mine and all may be the same array.  0, or agg_allreduce's errors (all
 * then unchanged).
 */
int agg_ready(struct agg *a, const uint8_t *mine, uint8_t *all, size_t n, double timeout);

/*
 * Auto-tuning (AIACC-Training Sec. VI; man 5 agg-tune): during the first
 * iterations of a job, how the caller packs its gradients into allreduce
 * units (the unit size) is tuned by a bandit over search techniques, and
 * the best setting is kept in a cache per plan fingerprint for the next
 * run.  Each iteration the caller asks agg_tuning_next for the setting,
 * runs the iteration with it, and reports the iteration's time with
 * agg_tuning_report.  Every worker must make the same calls in the same
 * order: the workers agree on every time (the largest, through an
 * allreduce on the handle, which takes an iteration of the run) and on the
 * start (worker 0's cache, through another at agg_tuning_open), so they
 * all propose the same settings.
 */
enum agg_tuning_mode {
	AGG_TUNING_OFF = 0,	/* no tuning: opts.unit every iteration */
	AGG_TUNING_ON = 1,	/* tune, from the nearest cached setting; store
				 * the best when converged */
	AGG_TUNING_REUSE = 2,	/* a cached setting of this very plan and
				 * workload without tuning; else as ON */
};

struct agg_tuning_opts {
	size_t sz;		/* sizeof(struct agg_tuning_opts) */
	enum agg_tuning_mode mode;
	const char *cache_dir;	/* NULL: $AGG_CACHE_DIR, else /var/cache/agg */
	uint64_t model_bytes;	/* gradient bytes an iteration (the fingerprint) */
	size_t unit;		/* the unit with tuning off: 0: 25 MiB (DDP's
				 * default bucket) */
	size_t unit_min, unit_max;	/* powers of two to try: 0: 256 KiB ..
					 * the plan's size */
	unsigned streams_max;	/* tune the streams too, over the powers of
				 * two up to this; 0 or 1: the handle's */
	uint64_t seed;		/* 0: 1 */
	int max_trials;		/* 0: 50 */
	FILE *log;		/* one line a trial (man 5 agg-tune), or NULL */
	int log_json;		/* the log as a JSON object a line */
};

/* What to run an iteration with. */
struct agg_setting {
	size_t unit;		/* bytes of gradient an allreduce unit */
	unsigned streams;	/* the handle's streams (set by agg_tuning_next) */
};

struct agg_tuning;

/* 0 and *out, or -EINVAL (bad options), -ENOMEM, -EIO (the cache: the
 * message names the file, line and column), and the allreduce's errors. */
int agg_tuning_open(struct agg *a, const struct agg_tuning_opts *opts,
		    struct agg_tuning **out);
/* The setting for the next iteration (the same until it is reported);
 * it sets the handle's streams, so call it with no allreduce in flight. */
int agg_tuning_next(struct agg_tuning *t, struct agg_setting *s);
/* This worker's time of the iteration run with the last setting (> 0):
 * agreed with every worker's; once tuned, a no-op.  0, -EINVAL, or the
 * allreduce's errors; when it stores the best setting, -ETIMEDOUT (another
 * process held the cache's lock for 10 s) or the errors of writing it. */
int agg_tuning_report(struct agg_tuning *t, double seconds);
/* 1 once the setting is final (tuned, reused, or tuning off), else 0. */
int agg_tuning_done(const struct agg_tuning *t);
/* Free t (not the handle).  NULL is a no-op. */
void agg_tuning_close(struct agg_tuning *t);

/*
 * Thread safety: a handle may be used from several threads; allreduces run
 * one at a time, in the order they were started.  agg_close must not race
 * other calls on the same handle.
 */

#ifdef __cplusplus
}
#endif

#endif
