// SPDX-License-Identifier: GPL-2.0-only
/*
 * agg_load: put one node of a plan on this host (man 1 agg-load).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agg.skel.h"
#include "cold.h"
#include "dispatch.skel.h"
#include "dp.h"
#include "load.h"
#include "log.h"

#define FAIL(err_, ...) do { snprintf(why, whylen, __VA_ARGS__); rc = (err_); goto out; } while (0)

static int mkdir_p(const char *path)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return mkdir(buf, 0700) && errno != EEXIST ? -errno : 0;
}

static void unpin_all(const char *dir)
{
	char path[600];

	for (int i = 0; agg_pin_names[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, agg_pin_names[i]);
		unlink(path);
	}
}

/*
 * The XDP dispatcher of an interface (bpf/dispatch.bpf.c): one per
 * interface, shared by every job on it, pinned under
 * PIN_DIR/dev/NETNS-IFINDEX/ (bpffs is shared by network namespaces,
 * interface indexes are not) as "link", "progs" and "ports".
 */
static const char *const dev_pin_names[] = { "link", "progs", "ports", NULL };

static int netns_id(unsigned long *id)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st))
		return -errno;
	*id = (unsigned long)st.st_ino;
	return 0;
}

static int dev_dir(char *buf, size_t len, const char *pin_dir, int ifindex)
{
	unsigned long ns = 0;
	int err = netns_id(&ns);

	if (err)
		return err;
	if (snprintf(buf, len, "%s/dev/%lu-%d", pin_dir, ns, ifindex) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static void dev_unpin(const char *ddir)
{
	char path[600];

	for (int i = 0; dev_pin_names[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", ddir, dev_pin_names[i]);
		unlink(path);
	}
	rmdir(ddir);
}

static int pinned_fd(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return bpf_obj_get(path);
}

/* Remove job's registration from the dispatcher in ddir (the caller holds
 * dev_lock); the dispatcher itself when no job is left.  0 or -errno. */
static int dev_unregister(const char *ddir, uint32_t job)
{
	int ports = pinned_fd(ddir, "ports"), progs = pinned_fd(ddir, "progs");
	uint32_t key, next, *prev = NULL;
	struct agg_dispatch d;
	int left = 0, err = 0;

	if (ports < 0 || progs < 0) {
		err = -errno;
		goto out;
	}
	while (!bpf_map_get_next_key(ports, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(ports, &key, &d))
			continue;
		if (d.job != job) {
			left++;
			continue;
		}
		bpf_map_delete_elem(ports, &key);
		bpf_map_delete_elem(progs, &d.idx);
		prev = NULL;	/* the walk restarts after a delete */
		left = 0;
	}
	if (!left)
		dev_unpin(ddir);
out:
	if (ports >= 0)
		close(ports);
	if (progs >= 0)
		close(progs);
	return err;
}

/*
 * Every dispatcher is changed under one lock: PIN_DIR itself, which agg
 * never removes (a dispatcher's own directory comes and goes, and two
 * agg-loads that locked two incarnations of it took the same program
 * slot).  Taken after a node directory's lock, never before.
 */
static int dev_lock(const char *pin_dir)
{
	return agg_pin_lock(pin_dir, true);
}

/* Unregister job from every dispatcher of this network namespace. */
static void dev_unregister_all(const char *pin_dir, uint32_t job)
{
	char devs[512], ddir[800], prefix[32];
	unsigned long ns = 0;
	struct dirent *e;
	int lock;
	DIR *d;

	if (netns_id(&ns))
		return;
	lock = dev_lock(pin_dir);
	if (lock < 0)
		return;
	snprintf(devs, sizeof(devs), "%s/dev", pin_dir);
	snprintf(prefix, sizeof(prefix), "%lu-", ns);
	d = opendir(devs);
	if (d) {
		while ((e = readdir(d))) {
			if (strncmp(e->d_name, prefix, strlen(prefix)))
				continue;
			snprintf(ddir, sizeof(ddir), "%s/%s", devs, e->d_name);
			dev_unregister(ddir, job);
		}
		closedir(d);
		rmdir(devs);	/* when empty */
	}
	close(lock);
}

/* The program registered for port in the dispatcher of ddir, by id; 0 if none. */
static uint32_t dev_prog_id(const char *ddir, uint32_t port, uint32_t job)
{
	int ports = pinned_fd(ddir, "ports"), progs = pinned_fd(ddir, "progs");
	struct agg_dispatch d;
	uint32_t id = 0;

	if (ports >= 0 && progs >= 0 && !bpf_map_lookup_elem(ports, &port, &d) &&
	    d.job == job && bpf_map_lookup_elem(progs, &d.idx, &id))
		id = 0;
	if (ports >= 0)
		close(ports);
	if (progs >= 0)
		close(progs);
	return id;
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/*
 * Register prog_fd for job on port in the dispatcher of ifindex: attach
 * the dispatcher first if the interface has none (mode as asked; *generic
 * says what it runs in).  Another job's port is a conflict (-EADDRINUSE);
 * the job's old registration (another port) goes.  The caller holds
 * dev_lock.
 */
static int dev_register(const char *ddir, const struct agg_netif *nif, enum agg_xdp_mode mode,
			uint32_t job, uint32_t port, int prog_fd, bool *generic,
			char *why, size_t whylen)
{
	struct dispatch *skel = NULL;
	int ports = -1, progs = -1, link = -1, rc = 0, err;
	uint32_t key, next, *prev = NULL, idx;
	bool used[AGG_MAX_JOBS_PER_DEV] = { false };
	struct agg_dispatch d;
	char path[600];

	ports = pinned_fd(ddir, "ports");
	progs = pinned_fd(ddir, "progs");
	link = pinned_fd(ddir, "link");
	if (ports < 0 || progs < 0 || link < 0) {
		/* None, or a half-made one (agg-load killed): start over. */
		if (ports >= 0)
			close(ports);
		if (progs >= 0)
			close(progs);
		if (link >= 0)
			close(link);
		ports = progs = link = -1;
		dev_unpin(ddir);
		err = mkdir(ddir, 0700);
		if (err && errno != EEXIST)
			FAIL(-errno, "cannot create %s: %s", ddir, strerror(errno));
		skel = dispatch__open_and_load();
		if (!skel)
			FAIL(-errno, "cannot load the XDP dispatcher: %s", strerror(errno));
		if (mode != AGG_MODE_GENERIC)
			link = agg_link_create(bpf_program__fd(skel->progs.agg_dispatch),
					       nif->ifindex, BPF_XDP, XDP_FLAGS_DRV_MODE);
		if (mode == AGG_MODE_GENERIC || (link < 0 && mode == AGG_MODE_AUTO)) {
			if (mode == AGG_MODE_AUTO)
				agg_warn("native XDP failed on %s (%s): using generic mode, which is slower",
					 nif->name, strerror(-link));
			link = agg_link_create(bpf_program__fd(skel->progs.agg_dispatch),
					       nif->ifindex, BPF_XDP, XDP_FLAGS_SKB_MODE);
			*generic = link >= 0;
		}
		if (link < 0)
			FAIL(link, "cannot attach XDP to %s: %s%s", nif->name, strerror(-link),
			     link == -EBUSY || link == -EEXIST ?
			     " (another XDP program is attached: ip link show dev)" :
			     mode == AGG_MODE_NATIVE ? " (--mode auto falls back to generic)" : "");
		/* The maps before the link: a dispatcher with a link is whole. */
		snprintf(path, sizeof(path), "%s/progs", ddir);
		if (bpf_map__pin(skel->maps.progs, path))
			FAIL(-errno, "cannot pin %s: %s", path, strerror(errno));
		snprintf(path, sizeof(path), "%s/ports", ddir);
		if (bpf_map__pin(skel->maps.ports, path))
			FAIL(-errno, "cannot pin %s: %s", path, strerror(errno));
		snprintf(path, sizeof(path), "%s/link", ddir);
		if (bpf_obj_pin(link, path))
			FAIL(-errno, "cannot pin %s: %s", path, strerror(errno));
		ports = bpf_map__fd(skel->maps.ports);
		progs = bpf_map__fd(skel->maps.progs);
	} else {
		struct bpf_link_info info;
		uint32_t len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(link, &info, &len) &&
		    info.xdp.ifindex != (unsigned)nif->ifindex)
			FAIL(-ESTALE, "%s: the dispatcher is attached to another interface", ddir);
	}

	/* Our old registrations (another port) and the indexes in use. */
	while (!bpf_map_get_next_key(ports, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(ports, &key, &d))
			continue;
		if (key == port && d.job != job)
			FAIL(-EADDRINUSE, "UDP port %u on %s is taken by job %u: give this job another port (agg-plan --port)",
			     port, nif->name, d.job);
		if (d.job == job && key != port) {
			bpf_map_delete_elem(ports, &key);
			bpf_map_delete_elem(progs, &d.idx);
			prev = NULL;
			memset(used, 0, sizeof(used));
			continue;
		}
		if (d.idx < AGG_MAX_JOBS_PER_DEV)
			used[d.idx] = true;
	}
	if (!bpf_map_lookup_elem(ports, &port, &d)) {
		idx = d.idx;		/* a new program for our port: swap it in */
	} else {
		for (idx = 0; idx < AGG_MAX_JOBS_PER_DEV && used[idx]; idx++)
			;
		if (idx == AGG_MAX_JOBS_PER_DEV)
			FAIL(-ENOSPC, "%s already runs %d jobs", nif->name, AGG_MAX_JOBS_PER_DEV);
	}
	if (bpf_map_update_elem(progs, &idx, &prog_fd, BPF_ANY))
		FAIL(-errno, "cannot register the program with the dispatcher: %s", strerror(errno));
	d = (struct agg_dispatch){ .idx = idx, .job = job };
	if (bpf_map_update_elem(ports, &port, &d, BPF_ANY))
		FAIL(-errno, "cannot register port %u with the dispatcher: %s", port, strerror(errno));
out:
	if (rc < 0 && skel)
		dev_unpin(ddir);
	if (!skel) {
		if (ports >= 0)
			close(ports);
		if (progs >= 0)
			close(progs);
	}
	if (link >= 0)
		close(link);
	dispatch__destroy(skel);
	return rc;
}

int agg_unload_dir(const char *dir, char *why, size_t whylen)
{
	char jobdir[512], *slash;
	int lock = agg_pin_lock(dir, true);

	if (lock < 0) {
		snprintf(why, whylen, "%s: %s", dir, strerror(-lock));
		return lock;
	}
	/* "plan" first: a half-removed node no longer looks loaded. */
	{
		char path[600], pin_dir[512], *job;

		snprintf(path, sizeof(path), "%s/plan", dir);
		unlink(path);
		/* dir is PIN_DIR/JOB/NODE */
		snprintf(pin_dir, sizeof(pin_dir), "%s", dir);
		if ((job = strrchr(pin_dir, '/')))
			*job = '\0';
		if ((job = strrchr(pin_dir, '/'))) {
			*job++ = '\0';
			dev_unregister_all(pin_dir, (uint32_t)strtoul(job, NULL, 10));
		}
	}
	unpin_all(dir);
	if (rmdir(dir)) {
		int err = -errno;

		snprintf(why, whylen, "%s: %s (files agg does not know of?)", dir,
			 strerror(errno));
		close(lock);
		return err;
	}
	close(lock);
	snprintf(jobdir, sizeof(jobdir), "%s", dir);
	slash = strrchr(jobdir, '/');
	if (slash) {
		*slash = '\0';
		rmdir(jobdir);	/* only when no other node of the job is left */
	}
	return 0;
}

/* Is the plan in dir this text, its program the one the dispatcher of
 * ddir runs for the port, and its TC link there? */
static bool same_load(const char *dir, const char *ddir, const char *text,
		      const struct agg_plan *p)
{
	char *old = agg_pin_plan_text(dir), path[600];
	bool same = old && !strcmp(old, text);
	int fd;

	free(old);
	if (!same)
		return false;
	fd = pinned_fd(dir, "xdp_prog");
	if (fd < 0)
		return false;
	same = prog_id(fd) == dev_prog_id(ddir, p->port, p->job);
	close(fd);
	snprintf(path, sizeof(path), "%s/tc_link", dir);
	return same && access(path, F_OK) == 0;
}

static void describe(FILE *f, const struct agg_plan *p, int self,
		     const struct agg_layout *l, const struct agg_netif *nif,
		     const struct agg_tree_info *ti, const char *dir,
		     enum agg_xdp_mode mode)
{
	fprintf(f, "node %s %s dev=%s ifindex=%d mtu=%d\n", p->node[self].name,
		inet_ntoa(p->node[self].addr), nif->name, nif->ifindex, nif->mtu);
	fprintf(f, "xdp %s\n", mode == AGG_MODE_GENERIC ? "generic" :
		mode == AGG_MODE_AUTO ? "native (generic if native fails)" : "native");
	fprintf(f, "pin %s\n", dir);
	fprintf(f, "segments %u data %u exponent %u x %u values, pool %u slots (%zu bytes)\n",
		l->nsegs, l->ndata, l->nexp, l->segment, l->nslots,
		(size_t)l->nslots * l->nchunks * agg_slot_size(l));
	for (int t = 0; t < p->ntrees; t++) {
		fprintf(f, "tree %d parent %s children", t,
			ti[t].parent >= 0 ? p->node[ti[t].parent].name : "-");
		for (unsigned k = 0; k < ti[t].nkids; k++)
			fprintf(f, " %s", p->node[ti[t].kid[k]].name);
		if (!ti[t].nkids)
			fprintf(f, " -");
		fprintf(f, "%s\n", ti[t].nkids && ti[t].self_bit < 64 ? " +self" : "");
	}
}

/*
 * agg_load in stages, run in order over one load_ctx.  A stage's run
 * returns -errno with why set, 0 to go on, or how the load ended
 * (AGG_DRY_RUN, AGG_UNCHANGED; the last stage AGG_LOADED, which is 0, or
 * AGG_REPLACED).  On failure every stage begun, the failed one too, is
 * undone in reverse order: its undo reverses what its run changed on the
 * host, wherever the run stopped.  What the stages hold (locks, fds, the
 * skeleton, memory) is released at the end whatever the outcome.
 */
struct load_ctx {
	const struct agg_plan *p;
	int self;
	const struct agg_host *me;
	bool worker;
	const struct agg_load_opts *o;
	bool *generic;
	char *why;
	size_t whylen;

	/* prepare */
	struct agg_layout l;
	struct agg_netif nif;
	char dir[512];			/* PIN_DIR/JOB/NODE */
	struct agg_tree_info *ti;	/* the node's place in each tree */
	bool *peer;			/* parent or child in some tree */
	/* lock */
	char *text;			/* the plan as text */
	int lock;			/* dir's */
	char ddir[600];			/* the interface's dispatcher */
	char plan[600];			/* dir/plan */
	bool replaced;			/* another plan was loaded */
	/* resolve */
	uint8_t (*mac)[6];		/* every member's */
	/* build */
	struct agg *skel;
	int tc_fd;
	/* register */
	int dlock;			/* dev_lock */
};

static int __attribute__((format(printf, 3, 4)))
fail(struct load_ctx *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, c->whylen, fmt, ap);
	va_end(ap);
	return err;
}

/* The node's parent and children in every tree, and which members are
 * its peers. */
static int place_in_trees(struct load_ctx *c)
{
	const struct agg_plan *p = c->p;

	c->ti = calloc(p->ntrees, sizeof(*c->ti));
	c->peer = calloc(p->nnodes, sizeof(*c->peer));
	if (!c->ti || !c->peer)
		return fail(c, -ENOMEM, "out of memory");
	for (int t = 0; t < p->ntrees; t++) {
		struct agg_tree_info *ti = &c->ti[t];
		int kids[AGG_MAX_KIDS];
		int n = agg_plan_children(p, t, c->self, kids, AGG_MAX_KIDS);

		ti->parent = p->tree[t].parent[c->self];
		if (ti->parent >= 0)
			c->peer[ti->parent] = true;
		if (n > AGG_MAX_KIDS)
			return fail(c, -EINVAL, "node %s has more than %d children in tree %d",
				    c->me->name, AGG_MAX_KIDS, t);
		for (int k = 0; k < n; k++) {
			ti->kid[ti->nkids++] = kids[k];
			c->peer[kids[k]] = true;
		}
		ti->expect = ti->nkids == 64 ? ~0ULL : (1ULL << ti->nkids) - 1;
		ti->self_bit = 64;
		if (c->worker && ti->nkids) {
			ti->self_bit = ti->nkids;
			ti->expect |= 1ULL << ti->nkids;
		}
	}
	return 0;
}

/* 1. What the node is on this host; nothing changes.  --dry-run stops here. */
static int load_prepare(struct load_ctx *c)
{
	const struct agg_host *me = c->me;
	size_t frame;
	int err;

	if (agg_layout_of(c->p, &c->l, c->why, c->whylen))
		return -EINVAL;
	err = agg_netif_find(me->addr, me->dev, &c->nif);
	if (err)
		return fail(c, err, me->dev[0] ?
			    "node %s: no interface %s here" :
			    "node %s: address %s is on no interface of this host (dev= in the hosts file?)",
			    me->name, me->dev[0] ? me->dev : inet_ntoa(me->addr));
	frame = sizeof(struct agg_hdr) + 4 * c->l.segment + 28;
	if (frame > (size_t)c->nif.mtu)
		return fail(c, -EINVAL, "segment=%u makes %zu-byte IP packets; %s has MTU %d",
			    c->l.segment, frame, c->nif.name, c->nif.mtu);
	if (agg_pin_path(c->dir, sizeof(c->dir), c->o->pin_dir, c->p->job, me->name, NULL))
		return fail(c, -ENAMETOOLONG, "pin directory name too long");
	err = place_in_trees(c);
	if (err)
		return err;
	if (c->o->dry_run) {
		describe(c->o->dry_out, c->p, c->self, &c->l, &c->nif, c->ti, c->dir, c->o->mode);
		return AGG_DRY_RUN;
	}
	return 0;
}

/*
 * 2. The node directory, made and locked; the same load again stops
 * here.  The directory stays when a later stage fails before pinning, as
 * it would with an old load in it.
 */
static int load_lock(struct load_ctx *c)
{
	const char *pin_dir = c->o->pin_dir;
	int err;

	c->text = agg_plan_to_text(c->p);
	if (!c->text)
		return fail(c, -ENOMEM, "out of memory");
	err = agg_bpffs_check(pin_dir);
	if (err)
		return fail(c, err, "%s: %s", pin_dir, err == -ENOTSUP ?
			    "not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)" :
			    strerror(-err));
	/* A load that failed removes the directory it made (load_unlock,
	 * load_unpin) under its lock: one that waited for the lock then holds
	 * a directory no longer there, and takes the new one. */
	for (;;) {
		struct stat held, now;

		err = mkdir_p(c->dir);
		if (err)
			return fail(c, err, "cannot create %s: %s", c->dir, strerror(-err));
		c->lock = agg_pin_lock(c->dir, true);
		if (c->lock == -ENOENT)
			continue;
		if (c->lock < 0)
			return fail(c, c->lock, "cannot lock %s: %s", c->dir, strerror(-c->lock));
		if (!fstat(c->lock, &held) && !stat(c->dir, &now) &&
		    held.st_dev == now.st_dev && held.st_ino == now.st_ino)
			break;
		close(c->lock);
		c->lock = -1;
	}
	err = dev_dir(c->ddir, sizeof(c->ddir), pin_dir, c->nif.ifindex);
	if (err)
		return fail(c, err, "cannot name the dispatcher directory: %s", strerror(-err));
	if (same_load(c->dir, c->ddir, c->text, c->p))
		return AGG_UNCHANGED;
	/* Nothing changes until everything is loaded: a failure (or a kill)
	 * before load_pin leaves the old state as it was. */
	snprintf(c->plan, sizeof(c->plan), "%s/plan", c->dir);
	c->replaced = access(c->plan, F_OK) == 0;
	return 0;
}

/*
 * 3. Every member's MAC: packets are checked against it.  The peers'
 * (parent, children) are needed; the others only probe, and get a
 * second (a member that is down cannot probe us until a reload).
 * Nothing changes.
 */
static int load_resolve(struct load_ctx *c)
{
	const struct agg_plan *p = c->p;
	struct in_addr *addr = calloc(p->nnodes, sizeof(*addr));
	bool *need = calloc(p->nnodes, sizeof(*need)), *got = calloc(p->nnodes, sizeof(*got));
	int n = 0, err = 0, *idx = calloc(p->nnodes, sizeof(*idx));
	bool named = false;
	uint8_t (*m)[6] = calloc(p->nnodes, sizeof(*m));

	c->mac = calloc(p->nnodes, sizeof(*c->mac));
	if (!c->mac || !addr || !need || !got || !idx || !m)
		err = -ENOMEM;
	for (int i = 0; !err && i < p->nnodes; i++) {
		if (i == c->self) {
			memcpy(c->mac[i], c->nif.mac, 6);
		} else if (p->node[i].has_mac) {
			memcpy(c->mac[i], p->node[i].mac, 6);
		} else {
			idx[n] = i;
			addr[n] = p->node[i].addr;
			need[n++] = c->peer[i];
		}
	}
	if (!err && n)
		err = agg_arp_resolve_all(&c->nif, c->me->addr, addr, n, need,
					  c->o->arp_timeout_ms, 1000, m, got);
	for (int k = 0; k < n && (!err || err == -ETIMEDOUT); k++) {
		if (got[k])
			memcpy(c->mac[idx[k]], m[k], 6);
		else if (need[k] && err == -ETIMEDOUT && !named && (named = true))
			snprintf(c->why, c->whylen, "cannot resolve the MAC address of %s (%s) on %s: no ARP reply",
				 p->node[idx[k]].name, inet_ntoa(addr[k]), c->nif.name);
		else if (!need[k])
			agg_info("%s (%s) did not answer ARP: its probes will be dropped here",
				 p->node[idx[k]].name, inet_ntoa(addr[k]));
	}
	free(addr);
	free(need);
	free(got);
	free(idx);
	free(m);
	if (err == -ENOMEM)
		return fail(c, err, "out of memory");
	if (err && err != -ETIMEDOUT)
		return fail(c, err, "cannot resolve MAC addresses on %s: %s", c->nif.name,
			    strerror(-err));
	return err;	/* -ETIMEDOUT: why names the first needed node that did not answer */
}

/* Bytes of the "plan" map's value: the text, NUL, 8-byte aligned. */
static size_t plan_value_size(const char *text)
{
	return (strlen(text) + 1 + 7) & ~(size_t)7;
}

/* The skeleton's constants and map sizes, before it is loaded. */
static int configure(struct load_ctx *c)
{
	const struct agg_plan *p = c->p;
	const struct agg_layout *l = &c->l;
	struct agg *skel = c->skel;
	int err;

	skel->rodata->cfg_job = p->job;
	skel->rodata->cfg_token = agg_plan_wire_token(p);
	skel->rodata->cfg_port = p->port;
	skel->rodata->cfg_self = c->self;
	skel->rodata->cfg_self_addr = c->me->addr.s_addr;
	memcpy((void *)skel->rodata->cfg_mac, c->nif.mac, 6);
	skel->rodata->cfg_ifindex = c->nif.ifindex;
	skel->rodata->cfg_worker = c->worker;
	skel->rodata->cfg_segment = l->segment;
	skel->rodata->cfg_nsegs = l->nsegs;
	skel->rodata->cfg_nexp = l->nexp;
	skel->rodata->cfg_nslots = l->nslots;
	skel->rodata->cfg_nchunks = l->nchunks;
	skel->rodata->cfg_chunk = l->chunk;
	skel->rodata->cfg_chunk_cap = l->chunk_cap;
	skel->rodata->cfg_period = p->period;
	skel->rodata->cfg_sparse_root = (uint32_t)agg_cold_root(p);
	if (getrandom((void *)&skel->rodata->cfg_meta_key, sizeof(skel->rodata->cfg_meta_key), 0) !=
	    sizeof(skel->rodata->cfg_meta_key))
		return fail(c, -errno, "cannot get a random number: %s", strerror(errno));
	err = bpf_map__set_max_entries(skel->maps.locks, l->nslots * l->nchunks) ?:
	      bpf_map__set_max_entries(skel->maps.slots, l->nslots * l->nchunks) ?:
	      bpf_map__set_value_size(skel->maps.slots, agg_slot_size(l)) ?:
	      bpf_map__set_value_size(skel->maps.scratch, 4 * l->chunk_cap) ?:
	      bpf_map__set_value_size(skel->maps.results, 4 * l->segment) ?:
	      bpf_map__set_max_entries(skel->maps.results, c->worker ? l->nsegs : 1) ?:
	      bpf_map__set_max_entries(skel->maps.meta, c->worker ? l->nsegs : 1) ?:
	      bpf_map__set_max_entries(skel->maps.nodes, p->nnodes) ?:
	      bpf_map__set_max_entries(skel->maps.trees, p->ntrees) ?:
	      bpf_map__set_max_entries(skel->maps.segmap, p->period) ?:
	      bpf_map__set_value_size(skel->maps.plan, plan_value_size(c->text));
	if (err)
		return fail(c, err, "cannot size the maps: %s", strerror(-err));
	return 0;
}

/* The loaded maps' contents: members, trees, children, segments, plan. */
static int fill_maps(struct load_ctx *c)
{
	const struct agg_plan *p = c->p;
	struct agg *skel = c->skel;
	size_t plen = plan_value_size(c->text);
	uint32_t zero = 0;
	char *buf;
	int err = 0;

	for (int i = 0; i < p->nnodes; i++) {
		struct agg_node_info ni = { .addr = p->node[i].addr.s_addr };
		uint32_t k = i, v = i;

		memcpy(ni.mac, c->mac[i], 6);
		if (bpf_map__update_elem(skel->maps.nodes, &k, 4, &ni, sizeof(ni), 0) ||
		    bpf_map__update_elem(skel->maps.members, &ni.addr, 4, &v, 4, 0))
			return fail(c, -errno, "cannot fill the node maps: %s", strerror(errno));
	}
	for (int t = 0; t < p->ntrees; t++) {
		const struct agg_tree_info *ti = &c->ti[t];
		uint32_t k = t;

		if (bpf_map__update_elem(skel->maps.trees, &k, 4, ti, sizeof(*ti), 0))
			return fail(c, -errno, "cannot fill the tree map: %s", strerror(errno));
		for (unsigned b = 0; b <= ti->nkids; b++) {
			uint32_t key, bit = b;

			if (b < ti->nkids)
				key = (uint32_t)t << 16 | ti->kid[b];
			else if (ti->self_bit < 64)
				key = (uint32_t)t << 16 | (uint32_t)c->self;
			else
				break;
			if (bpf_map__update_elem(skel->maps.kids, &key, 4, &bit, 4, 0))
				return fail(c, -errno, "cannot fill the children map: %s",
					    strerror(errno));
		}
	}
	for (unsigned i = 0; i < p->period; i++) {
		uint32_t k = i, v = p->seg_map[i];

		if (bpf_map__update_elem(skel->maps.segmap, &k, 4, &v, 4, 0))
			return fail(c, -errno, "cannot fill the segment map: %s", strerror(errno));
	}
	buf = calloc(1, plen);
	if (!buf)
		return fail(c, -ENOMEM, "out of memory");
	memcpy(buf, c->text, strlen(c->text));
	if (bpf_map__update_elem(skel->maps.plan, &zero, 4, buf, plen, 0))
		err = fail(c, -errno, "cannot store the plan: %s", strerror(errno));
	free(buf);
	return err;
}

/*
 * 4. The programs loaded with their maps filled, TC attached.  Nothing
 * on the host shows it yet: the TC link lives by its fd until load_pin,
 * and goes when the context is released.
 */
static int load_build(struct load_ctx *c)
{
	int err;

	c->skel = agg__open();
	if (!c->skel)
		return fail(c, -errno, "cannot open the BPF object: %s", strerror(errno));
	err = configure(c);
	if (err)
		return err;
	if (agg_log_level() >= 2) {
		/* -vv: libbpf prints the verifier's statistics of each program
		 * ("processed N insns"); asking it for the log afterwards with
		 * bpf_program__log_buf crashed libbpf 1.1. */
		bpf_program__set_log_level(c->skel->progs.agg_xdp, 4);
		bpf_program__set_log_level(c->skel->progs.agg_tc, 4);
	}
	err = agg__load(c->skel);
	if (err)
		return fail(c, err, "cannot load the BPF programs: %s (run with -vv for the verifier log)",
			    strerror(-err));
	err = fill_maps(c);
	if (err)
		return err;
	c->tc_fd = agg_link_create(bpf_program__fd(c->skel->progs.agg_tc), c->nif.ifindex,
				   AGG_TCX_INGRESS, 0);
	if (c->tc_fd < 0)
		return fail(c, c->tc_fd, "cannot attach the TC program to %s: %s", c->nif.name,
			    strerror(-c->tc_fd));
	return 0;
}

/*
 * 5. The old pins go (the old program keeps running from the
 * dispatcher until the new one is swapped in), the new ones come, all
 * but the plan.
 */
static int load_pin(struct load_ctx *c)
{
	char path[600];
	int err;

	unlink(c->plan);
	unpin_all(c->dir);
	for (int i = 0; agg_pin_names[i]; i++) {
		const char *name = agg_pin_names[i];
		struct bpf_map *m;

		if (!strcmp(name, "plan"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", c->dir, name);
		if (!strcmp(name, "tc_link"))
			err = bpf_obj_pin(c->tc_fd, path);
		else if (!strcmp(name, "xdp_prog"))
			err = bpf_program__pin(c->skel->progs.agg_xdp, path);
		else if ((m = bpf_object__find_map_by_name(c->skel->obj, name)))
			err = bpf_map__pin(m, path);
		else
			err = -ENOENT;
		if (err)
			return fail(c, -errno ?: err, "cannot pin %s: %s", path,
				    strerror(errno ?: -err));
	}
	return 0;
}

/* A load that failed leaves no directory it made: the node's (and the
 * job's) go if nothing is in them.  Under the node's lock (load_lock). */
static void load_unlock(struct load_ctx *c)
{
	char job[sizeof(c->dir)], *slash;

	if (c->lock < 0 || (rmdir(c->dir) && errno != ENOENT))
		return;	/* not ours, or not empty: loaded before */
	snprintf(job, sizeof(job), "%s", c->dir);
	slash = strrchr(job, '/');
	if (slash) {
		*slash = '\0';
		rmdir(job);
	}
}

/* Half replaced is not loaded: nothing of the job stays. */
static void load_unpin(struct load_ctx *c)
{
	/* "plan" first: a half-removed node no longer looks loaded. */
	unlink(c->plan);
	/* With the dispatchers' lock, load_unregister has done it. */
	if (c->dlock < 0)
		dev_unregister_all(c->o->pin_dir, c->p->job);
	unpin_all(c->dir);
	rmdir(c->dir);
}

/* 6. The new program in the interface's dispatcher, swapped for the old. */
static int load_register(struct load_ctx *c)
{
	int err;

	c->dlock = dev_lock(c->o->pin_dir);
	if (c->dlock < 0)
		return fail(c, c->dlock, "cannot lock %s: %s", c->o->pin_dir,
			    strerror(-c->dlock));
	err = mkdir_p(c->ddir);
	if (err)
		return fail(c, err, "cannot create %s: %s", c->ddir, strerror(-err));
	return dev_register(c->ddir, &c->nif, c->o->mode, c->p->job, c->p->port,
			    bpf_program__fd(c->skel->progs.agg_xdp), c->generic,
			    c->why, c->whylen);
}

static void load_unregister(struct load_ctx *c)
{
	if (c->dlock >= 0)
		dev_unregister(c->ddir, c->p->job);
}

/* 7. The plan last: a node directory with a plan is complete. */
static int load_commit(struct load_ctx *c)
{
	if (bpf_map__pin(c->skel->maps.plan, c->plan))
		return fail(c, -errno, "cannot pin %s: %s", c->plan, strerror(errno));
	return c->replaced ? AGG_REPLACED : AGG_LOADED;
}

static const struct load_stage {
	int (*run)(struct load_ctx *c);
	void (*undo)(struct load_ctx *c);
} load_stages[] = {
	{ load_prepare,		NULL },
	{ load_lock,		load_unlock },
	{ load_resolve,		NULL },
	{ load_build,		NULL },
	{ load_pin,		load_unpin },
	{ load_register,	load_unregister },
	{ load_commit,		NULL },
};

static void load_release(struct load_ctx *c)
{
	if (c->dlock >= 0)
		close(c->dlock);
	if (c->tc_fd >= 0)
		close(c->tc_fd);
	agg__destroy(c->skel);
	if (c->lock >= 0)
		close(c->lock);
	free(c->mac);
	free(c->text);
	free(c->ti);
	free(c->peer);
}

int agg_load(const struct agg_plan *p, int self, const struct agg_load_opts *o,
	     bool *generic, char *why, size_t whylen)
{
	struct load_ctx c = {
		.p = p, .self = self, .me = &p->node[self],
		.worker = p->node[self].role == AGG_ROLE_WORKER,
		.o = o, .generic = generic, .why = why, .whylen = whylen,
		.lock = -1, .tc_fd = -1, .dlock = -1,
	};
	size_t n;
	int rc = 0;

	*generic = false;
	for (n = 0; n < sizeof(load_stages) / sizeof(load_stages[0]) && !rc; n++)
		rc = load_stages[n].run(&c);
	if (rc < 0) {
		while (n--)
			if (load_stages[n].undo)
				load_stages[n].undo(&c);
	} else if (rc != AGG_DRY_RUN) {
		LIBBPF_OPTS(bpf_xdp_query_opts, q);

		if (!bpf_xdp_query(c.nif.ifindex, 0, &q))
			*generic = q.attach_mode == XDP_ATTACHED_SKB;
	}
	load_release(&c);
	return rc;
}
