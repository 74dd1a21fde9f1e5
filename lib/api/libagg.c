// SPDX-License-Identifier: GPL-2.0-only
/*
 * libagg: the public API (agg/agg.h) over the sending engine (send.h) and
 * the result reader (recv.h).  Each handle has one thread that runs its
 * allreduces in the order they were started; callers wait on its
 * condition variable.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <agg/agg.h>

#include "api.h"
#include "dp.h"
#include "opts.h"
#include "recv.h"
#include "send.h"

#ifndef AGG_PIN_DIR
#define AGG_PIN_DIR "/sys/fs/bpf/agg"
#endif
#ifndef AGG_VERSION
#define AGG_VERSION "0"
#endif

#define MSG_LEN		1200
#define FLUSH_EVERY	1.0	/* seconds between updates of the "sent" map */

static __thread char errmsg[MSG_LEN];
int agg_api_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	return err;
}

const char *agg_errmsg(void)
{
	return errmsg;
}

const char *agg_version(void)
{
	return AGG_VERSION;
}

struct agg_req {
	struct agg *a;
	void *buf;
	size_t count;
	enum agg_dtype dtype;
	enum agg_reduce op;
	double timeout;
	unsigned streams;		/* not 0: change the sender's streams */
	bool done;
	int rc;
	char msg[MSG_LEN];
	struct agg_req *next;		/* in the queue */
	struct agg_req *older, *newer;	/* every request not waited for */
};

struct agg {
	struct agg_node n;
	struct agg_sender s;
	uint32_t run;
	uint32_t iter;			/* the next allreduce's */
	double timeout;
	int rank;
	float *scratch;			/* float16 and bfloat16 in float32 */
	uint64_t iters, flushed[AGG_SENT_ENTRIES];
	double flushed_at;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a request queued, ended, or stop */
	struct agg_req *head, *tail;	/* queued, not yet run */
	struct agg_req *all;		/* not waited for, newest first */
	bool stop;
	bool lost;			/* set_streams failed twice: no sender */
};

/* ---- numbers ------------------------------------------------------------ */

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	float f;

	if (e == 0x1f)
		u = sign | 0x7f800000 | m << 13;	/* Inf, NaN */
	else if (e)
		u = sign | (e + 112) << 23 | m << 13;
	else if (m) {					/* subnormal */
		f = (float)m * (1.0f / 16777216.0f);	/* m x 2^-24 */
		memcpy(&u, &f, 4);
		u |= sign;
	} else
		u = sign;
	memcpy(&f, &u, 4);
	return f;
}

/* Round to nearest, ties to even; overflow to Inf, NaN stays NaN. */
static uint16_t float_to_half(float f)
{
	uint32_t u, sign, e, m;
	int exp;

	memcpy(&u, &f, 4);
	sign = (u >> 16) & 0x8000;
	e = (u >> 23) & 0xff;
	m = u & 0x7fffff;
	if (e == 0xff)
		return sign | 0x7c00 | (m ? 0x200 | m >> 13 : 0);
	exp = (int)e - 127 + 15;
	if (exp >= 0x1f)
		return sign | 0x7c00;
	if (exp <= 0) {					/* subnormal or zero */
		uint32_t full, shift, r, half;

		if (exp < -10)
			return sign;
		full = m | 0x800000;
		shift = (uint32_t)(14 - exp);
		r = full >> shift;
		half = 1u << (shift - 1);
		if ((full & ((1u << shift) - 1)) > half ||
		    ((full & ((1u << shift) - 1)) == half && (r & 1)))
			r++;
		return sign | r;
	}
	{
		uint32_t r = (uint32_t)exp << 10 | m >> 13, rest = m & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
			r++;	/* may carry into the exponent: right, up to Inf */
		return sign | r;
	}
}

static float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint16_t float_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7f800000) == 0x7f800000 && (u & 0x7fffff))
		return (u >> 16) | 0x40;		/* NaN stays quiet NaN */
	u += 0x7fff + ((u >> 16) & 1);
	return u >> 16;
}

static void to_float(const void *buf, size_t n, enum agg_dtype t, float *out)
{
	const uint16_t *h = buf;

	for (size_t i = 0; i < n; i++)
		out[i] = t == AGG_FLOAT16 ? half_to_float(h[i]) : bf16_to_float(h[i]);
}

static void from_float(const float *x, size_t n, enum agg_dtype t, void *buf)
{
	uint16_t *h = buf;

	for (size_t i = 0; i < n; i++)
		h[i] = t == AGG_FLOAT16 ? float_to_half(x[i]) : float_to_bf16(x[i]);
}

/* ---- the engine thread -------------------------------------------------- */

/* Add what the sender did to the node's "sent" map, as agg-send does. */
static void flush_counters(struct agg *a, bool force)
{
	uint64_t now[AGG_SENT_ENTRIES], add[AGG_SENT_ENTRIES];

	agg_sender_counters(&a->s, a->iters, now);
	if (!force && agg_now() - a->flushed_at < FLUSH_EVERY)
		return;
	for (int k = 0; k < AGG_SENT_ENTRIES; k++)
		add[k] = now[k] - a->flushed[k];
	if (!agg_sent_add(a->n.fd_sent, add))
		memcpy(a->flushed, now, sizeof(now));
	a->flushed_at = agg_now();
}

static int run_req(struct agg *a, struct agg_req *r)
{
	uint64_t ver = agg_ver(a->run, a->iter), nan = 0;
	struct agg_send_call c;
	float *x;
	int err;

	/* Every call takes an iteration, failed or not: the workers keep
	 * counting alike. */
	a->iter++;
	err = agg_node_open_iter(&a->n, ver, true, r->msg, sizeof(r->msg));
	if (err)
		return err;
	a->iters++;
	if (r->dtype == AGG_FLOAT32) {
		x = r->buf;
	} else {
		x = a->scratch;
		to_float(r->buf, r->count, r->dtype, x);
	}
	c = (struct agg_send_call){ .ver = ver, .x = x, .nvalues = r->count,
				    .op = (unsigned)r->op, .timeout = r->timeout };
	err = agg_send_run(&a->s, &c, r->msg, sizeof(r->msg));
	if (err)
		return err;
	/* Every result of the call is in: read them under their locks. */
	{
		uint32_t ndata, nexp;

		agg_call_segs(&a->n.l, r->count, &ndata, &nexp);
		err = agg_result_read(&a->n, ver, 0, ndata, r->count, x, &nan);
	}
	if (err) {
		snprintf(r->msg, sizeof(r->msg), "iteration %u of run %u was overwritten by a "
			 "newer one while it was read (did a newer run start?)",
			 agg_ver_iter(ver), a->run);
		return -ESTALE;
	}
	if (r->dtype != AGG_FLOAT32)
		from_float(x, r->count, r->dtype, r->buf);
	agg_node_mark_recvd(&a->n, ver);
	return 0;
}

/* Send over r->streams streams from now on: a new sender, which starts
 * from the old one's congestion state (the node's "cc" map). */
static int set_streams(struct agg *a, struct agg_req *r)
{
	unsigned old = a->s.nstreams;
	bool cc_off = a->s.cc_off;
	int sig = a->s.sig, err = 0;

	if (r->streams == old)
		return 0;
	flush_counters(a, true);
	agg_sender_save(&a->s);
	a->s.sig = -1;		/* the fetch signal's socket goes to the new sender */
	agg_sender_free(&a->s);
	/* The new sender counts from 0; the handle's iterations go on. */
	memset(a->flushed, 0, sizeof(a->flushed));
	a->flushed[AGG_SENT_ITERS] = a->iters;
	if (agg_sender_init(&a->s, &a->n, r->streams)) {
		err = -errno;
		snprintf(r->msg, sizeof(r->msg), "cannot set up %u streams: %s", r->streams,
			 strerror(errno));
		if (agg_sender_init(&a->s, &a->n, old))
			a->lost = true;
	}
	if (a->lost && sig >= 0)
		close(sig);
	else
		a->s.sig = sig;
	a->s.cc_off = cc_off;
	return err;
}

static void *engine(void *arg)
{
	struct agg *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct agg_req *r;

		while (!a->head && !a->stop)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->stop) {
			/* agg_close: what has not begun is cancelled. */
			for (r = a->head; r; r = r->next) {
				r->rc = -ECANCELED;
				snprintf(r->msg, sizeof(r->msg), "cancelled: the handle was closed");
				r->done = true;
			}
			a->head = a->tail = NULL;
			pthread_cond_broadcast(&a->cond);
			break;
		}
		r = a->head;
		a->head = r->next;
		if (!a->head)
			a->tail = NULL;
		pthread_mutex_unlock(&a->lock);
		r->msg[0] = '\0';
		if (a->lost) {
			r->rc = -EIO;
			snprintf(r->msg, sizeof(r->msg), "the handle lost its sender (setting "
				 "streams failed): close it");
		} else {
			r->rc = r->streams ? set_streams(a, r) : r->count ? run_req(a, r) : 0;
		}
		flush_counters(a, false);
		pthread_mutex_lock(&a->lock);
		r->done = true;
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* ---- the API ------------------------------------------------------------ */

static int parse_env_u32(const char *name, uint32_t max, uint32_t *out)
{
	const char *e = getenv(name);
	char *end;
	unsigned long long v;

	*out = 0;
	if (!e || !*e)
		return 0;
	errno = 0;
	v = strtoull(e, &end, 10);
	if (errno || *end || *e == '-' || v > max)
		return agg_api_fail(-EINVAL, "%s='%s' is not a number from 0 to %u", name, e, max);
	*out = (uint32_t)v;
	return 0;
}

/* The run: given, or $AGG_RUN + $TORCHELASTIC_RESTART_COUNT (mod 2^16). */
static int pick_run(const struct agg_opts *o, uint32_t *run)
{
	uint32_t base, restarts;
	int err;

	if (o->flags & AGG_OPEN_RUN) {
		if (o->run > 0xffff)
			return agg_api_fail(-EINVAL, "run %u: runs are 0 to 65535", o->run);
		*run = o->run;
		return 0;
	}
	if ((err = parse_env_u32("AGG_RUN", 0xffff, &base)) ||
	    (err = parse_env_u32("TORCHELASTIC_RESTART_COUNT", UINT32_MAX, &restarts)))
		return err;
	*run = (base + restarts) & 0xffff;
	return 0;
}

/* May this run start on the node from iteration 0?  The node's clock says
 * which run it is in and what was sent there. */
static int check_run(struct agg *a)
{
	const char *name = a->n.plan.node[a->n.self].name;
	uint64_t sent = __atomic_load_n(&a->n.clock->sent, __ATOMIC_ACQUIRE);

	if (agg_node_run_over(&a->n, a->run, errmsg, sizeof(errmsg)))
		return -ESTALE;
	if (sent && agg_ver_run(sent) == a->run)
		return agg_api_fail(-EALREADY, "run %u has sent iterations on node %s already (up to %u): "
			    "a job that starts again needs a newer run on every worker "
			    "(AGG_RUN, or torchrun's restart count)", a->run, name,
			    agg_ver_iter(sent));
	return 0;
}

int agg_open(struct agg **out, const struct agg_opts *opts)
{
	struct agg_opts o = { 0 };
	char why[MSG_LEN];
	const char *pin_dir;
	struct agg *a;
	int err;

	if (!out)
		return agg_api_fail(-EINVAL, "agg_open: no out");
	*out = NULL;
	if (opts) {
		if (opts->sz < offsetof(struct agg_opts, timeout) + sizeof(double) &&
		    opts->sz != 0)
			return agg_api_fail(-EINVAL, "struct agg_opts: sz %zu is too small", opts->sz);
		memcpy(&o, opts, opts->sz && opts->sz < sizeof(o) ? opts->sz : sizeof(o));
		if (o.flags & ~AGG_OPEN_RUN)
			return agg_api_fail(-EINVAL, "flags 0x%x: unknown bits", o.flags);
	}
	/* Written so that NaN fails too: a NaN deadline never comes. */
	if (!(o.timeout >= 0 && o.timeout <= 86400))
		return agg_api_fail(-EINVAL, "timeout %g: seconds, 0 to 86400", o.timeout);
	if (o.streams > AGG_MAX_STREAMS && o.streams != AGG_STREAMS_AUTO)
		return agg_api_fail(-EINVAL, "streams %u: 1 to %d, or AGG_STREAMS_AUTO", o.streams,
			    AGG_MAX_STREAMS);
	pin_dir = o.pin_dir ? o.pin_dir : getenv("AGG_PIN_DIR") && *getenv("AGG_PIN_DIR") ?
		  getenv("AGG_PIN_DIR") : AGG_PIN_DIR;
	a = calloc(1, sizeof(*a));
	if (!a)
		return agg_api_fail(-ENOMEM, "out of memory");
	a->s.sig = -1;
	a->timeout = o.timeout ? o.timeout : 30;
	if ((err = pick_run(&o, &a->run)))
		goto fail_free;
	err = agg_node_open(&a->n, pin_dir, o.job, o.node, why, sizeof(why));
	/* agg_node_open's -ENODEV (the node's address is on no interface
	 * here) is what man 3 libagg calls "not this host's node". */
	if (err == -ENODEV)
		err = -ENOENT;
	if (err) {
		agg_api_fail(err, "%s", why);
		goto fail_node;
	}
	if (a->n.plan.node[a->n.self].role != AGG_ROLE_WORKER) {
		err = agg_api_fail(-EINVAL, "node %s is a parameter server: it has no gradient to "
			   "allreduce", a->n.plan.node[a->n.self].name);
		goto fail_node;
	}
	for (int i = 0; i < a->n.self; i++)
		a->rank += a->n.plan.node[i].role == AGG_ROLE_WORKER;
	if ((err = check_run(a)))
		goto fail_node;
	if ((err = agg_node_map_results(&a->n))) {
		agg_api_fail(err, "%s: cannot map the results: %s", a->n.dir, strerror(-err));
		goto fail_node;
	}
	if (o.streams == AGG_STREAMS_AUTO)
		o.streams = agg_streams_auto(&a->n, NULL, 0);
	if (agg_sender_init(&a->s, &a->n, o.streams)) {
		err = agg_api_fail(-errno, "cannot set up sending on node %s: %s",
			   a->n.plan.node[a->n.self].name, strerror(errno));
		goto fail_node;
	}
	err = agg_sender_listen(&a->s);
	if (err) {
		agg_api_fail(err, "cannot listen for node %s's results on port %u: %s%s",
		     a->n.plan.node[a->n.self].name, a->n.plan.port + 1, strerror(-err),
		     err == -EADDRINUSE ? " (an agg-recv, or another process that opened the "
		     "node, uses it)" : "");
		goto fail_sender;
	}
	a->scratch = malloc(a->n.l.nvalues * sizeof(float));
	if (!a->scratch) {
		err = agg_api_fail(-ENOMEM, "out of memory (%llu values)",
			   (unsigned long long)a->n.l.nvalues);
		goto fail_sender;
	}
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	a->flushed_at = agg_now();
	err = -pthread_create(&a->thread, NULL, engine, a);
	if (err) {
		agg_api_fail(err, "cannot start the engine thread: %s", strerror(-err));
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
		goto fail_sender;
	}
	a->started = true;
	*out = a;
	return 0;
fail_sender:
	agg_sender_free(&a->s);
fail_node:
	agg_node_close(&a->n);
fail_free:
	free(a->scratch);
	free(a);
	return err;
}

void agg_close(struct agg *a)
{
	if (!a)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->lock);
		a->stop = true;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
		pthread_join(a->thread, NULL);
		while (a->all) {
			struct agg_req *r = a->all;

			a->all = r->older;
			free(r);
		}
		pthread_cond_destroy(&a->cond);
		pthread_mutex_destroy(&a->lock);
	}
	flush_counters(a, true);
	agg_sender_save(&a->s);	/* best effort: for the next process */
	agg_sender_free(&a->s);
	agg_node_close(&a->n);
	free(a->scratch);
	free(a);
}

static int queue_req(struct agg *a, struct agg_req *r, struct agg_req **req);

int agg_allreduce_start(struct agg *a, void *buf, size_t count, enum agg_dtype dtype,
			enum agg_reduce op, double timeout, struct agg_req **req)
{
	struct agg_req *r;

	if (!req)
		return agg_api_fail(-EINVAL, "no request to return");
	*req = NULL;
	if (!a)
		return agg_api_fail(-EINVAL, "no handle");
	if (dtype != AGG_FLOAT32 && dtype != AGG_FLOAT16 && dtype != AGG_BFLOAT16)
		return agg_api_fail(-EINVAL, "dtype %d: AGG_FLOAT32, AGG_FLOAT16 or AGG_BFLOAT16", dtype);
	if (op != AGG_REDUCE_SUM && op != AGG_REDUCE_MAX && op != AGG_REDUCE_MIN)
		return agg_api_fail(-EINVAL, "op %d: AGG_REDUCE_SUM, _MAX or _MIN", op);
	if (count > a->n.l.nvalues)
		return agg_api_fail(-EINVAL, "%zu values: the plan of job %u takes at most %llu "
			    "(its size, %llu bytes of float32)", count, a->n.plan.job,
			    (unsigned long long)a->n.l.nvalues, (unsigned long long)a->n.plan.size);
	if (count && !buf)
		return agg_api_fail(-EINVAL, "no buffer");
	if (!isfinite(timeout) || timeout > 86400)
		return agg_api_fail(-EINVAL, "timeout %g: seconds, up to 86400 (0 or less: "
				    "the handle's)", timeout);
	r = calloc(1, sizeof(*r));
	if (!r)
		return agg_api_fail(-ENOMEM, "out of memory");
	*r = (struct agg_req){ .a = a, .buf = buf, .count = count, .dtype = dtype, .op = op,
			       .timeout = timeout > 0 ? timeout : a->timeout };
	return queue_req(a, r, req);
}

/* Queue r for the engine: 0 and *req, or -ECANCELED (r freed). */
static int queue_req(struct agg *a, struct agg_req *r, struct agg_req **req)
{
	pthread_mutex_lock(&a->lock);
	if (a->stop) {
		pthread_mutex_unlock(&a->lock);
		free(r);
		return agg_api_fail(-ECANCELED, "the handle is being closed");
	}
	if (a->tail)
		a->tail->next = r;
	else
		a->head = r;
	a->tail = r;
	r->older = a->all;
	if (a->all)
		a->all->newer = r;
	a->all = r;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	*req = r;
	return 0;
}

int agg_test(struct agg_req *r)
{
	int done;

	if (!r)
		return agg_api_fail(-EINVAL, "no request");
	pthread_mutex_lock(&r->a->lock);
	done = r->done;
	pthread_mutex_unlock(&r->a->lock);
	return done;
}

int agg_wait(struct agg_req *r)
{
	struct agg *a;
	int rc;

	if (!r)
		return agg_api_fail(-EINVAL, "no request");
	a = r->a;
	pthread_mutex_lock(&a->lock);
	while (!r->done)
		pthread_cond_wait(&a->cond, &a->lock);
	if (r->newer)
		r->newer->older = r->older;
	else
		a->all = r->older;
	if (r->older)
		r->older->newer = r->newer;
	pthread_mutex_unlock(&a->lock);
	rc = r->rc;
	if (rc)
		agg_api_fail(rc, "%s", r->msg[0] ? r->msg : strerror(-rc));
	else
		errmsg[0] = '\0';
	free(r);
	return rc;
}

int agg_allreduce(struct agg *a, void *buf, size_t count, enum agg_dtype dtype,
		  enum agg_reduce op, double timeout)
{
	struct agg_req *r;
	int err = agg_allreduce_start(a, buf, count, dtype, op, timeout, &r);

	return err ? err : agg_wait(r);
}

int agg_ready(struct agg *a, const uint8_t *mine, uint8_t *all, size_t n, double timeout)
{
	float *v;
	int err;

	if (!a || (n && (!mine || !all)))
		return agg_api_fail(-EINVAL, "agg_ready: no handle or no vectors");
	if (n > a->n.l.nvalues)
		return agg_api_fail(-EINVAL, "agg_ready: %zu units: the plan of job %u takes at most %llu",
			    n, a->n.plan.job, (unsigned long long)a->n.l.nvalues);
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return agg_api_fail(-ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		v[i] = mine[i] ? 1.0f : 0.0f;
	err = agg_allreduce(a, v, n, AGG_FLOAT32, AGG_REDUCE_MIN, timeout);
	for (size_t i = 0; !err && i < n; i++)
		all[i] = v[i] > 0.5f;
	free(v);
	return err;
}

size_t agg_max_count(const struct agg *a)
{
	return a ? a->n.l.nvalues : 0;
}

int agg_rank(const struct agg *a)
{
	return a ? a->rank : -EINVAL;
}

int agg_world_size(const struct agg *a)
{
	return a ? (int)a->n.l.workers : -EINVAL;
}

const char *agg_node_name(const struct agg *a)
{
	return a ? a->n.plan.node[a->n.self].name : NULL;
}

unsigned agg_run(const struct agg *a)
{
	return a ? a->run : 0;
}

const struct agg_plan *agg_api_plan(const struct agg *a)
{
	return &a->n.plan;
}

unsigned agg_api_streams(const struct agg *a)
{
	return a->s.nstreams;
}

int agg_api_set_streams(struct agg *a, unsigned streams)
{
	struct agg_req *r, *req;
	int err;

	if (!streams || streams > AGG_MAX_STREAMS)
		return agg_api_fail(-EINVAL, "streams %u: 1 to %d", streams, AGG_MAX_STREAMS);
	if (streams == agg_api_streams(a))
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return agg_api_fail(-ENOMEM, "out of memory");
	*r = (struct agg_req){ .a = a, .streams = streams };
	err = queue_req(a, r, &req);
	return err ? err : agg_wait(req);
}
