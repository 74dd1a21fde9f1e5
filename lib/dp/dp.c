// SPDX-License-Identifier: GPL-2.0-only
/*
 * Data-plane helpers shared by the tools: the segment layout, the pin
 * directory, the node's interface and its peers' MAC addresses, and the
 * opened state of a loaded node.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <linux/if_ether.h>
#include <netpacket/packet.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dp.h"
#include "opts.h"
#include "quant.h"

const char *const agg_pin_names[] = {
	"tc_link", "xdp_prog", "plan", "members", "nodes", "trees", "kids",
	"segmap", "locks", "slots", "scratch", "results", "meta", "progress",
	"clock", "stats", "sent", "events", "cc", NULL,
};

int agg_layout_of(const struct agg_plan *p, struct agg_layout *l,
		  char *why, size_t whylen)
{
	uint64_t ndata;
	unsigned w = 0;

	memset(l, 0, sizeof(*l));
	if (p->size == 0 || p->size % 4) {
		snprintf(why, whylen, "size=%llu is not a whole number of float32 values",
			 (unsigned long long)p->size);
		return -EINVAL;
	}
	if (p->segment < 2 || p->segment > AGG_MAX_SEGMENT || p->segment % 2) {
		snprintf(why, whylen, "segment=%u: the data plane takes an even number from 2 to %d",
			 p->segment, AGG_MAX_SEGMENT);
		return -EINVAL;
	}
	if (p->nnodes > AGG_MAX_NODES || p->ntrees > AGG_MAX_TREES ||
	    p->period > AGG_MAX_PERIOD) {
		snprintf(why, whylen, "the data plane takes at most %d nodes, %d trees",
			 AGG_MAX_NODES, AGG_MAX_TREES);
		return -EINVAL;
	}
	l->nvalues = p->size / 4;
	l->segment = p->segment;
	ndata = (l->nvalues + p->segment - 1) / p->segment;
	l->nexp = (uint32_t)((ndata + p->segment - 1) / p->segment);
	if (ndata + l->nexp >= UINT32_MAX / 2) {
		snprintf(why, whylen, "size=%llu needs too many segments",
			 (unsigned long long)p->size);
		return -EINVAL;
	}
	l->nchunks = (p->segment + AGG_CHUNK - 1) / AGG_CHUNK;
	l->chunk = (p->segment + l->nchunks - 1) / l->nchunks;
	l->chunk_cap = (l->chunk + 3) & ~3u;
	l->ndata = (uint32_t)ndata;
	l->nsegs = l->ndata + l->nexp;
	l->window = p->slots * (uint32_t)p->ntrees;
	l->nslots = 2 * l->window;
	if (l->window == 0 || l->window > 1u << 20) {
		snprintf(why, whylen, "slots=%u x %d trees: the pool takes 1 to %u entries",
			 p->slots, p->ntrees, 1u << 20);
		return -EINVAL;
	}
	for (int i = 0; i < p->nnodes; i++)
		w += p->node[i].role == AGG_ROLE_WORKER;
	if (w == 0 || w > 1u << 20) {
		snprintf(why, whylen, "the plan has no workers");
		return -EINVAL;
	}
	l->workers = w;
	l->shift = agg_quant_shift(w);
	return 0;
}

void agg_call_segs(const struct agg_layout *l, uint64_t nvalues, uint32_t *ndata,
		   uint32_t *nexp)
{
	uint64_t d = (nvalues + l->segment - 1) / l->segment;

	*ndata = (uint32_t)d;
	*nexp = (uint32_t)((d + l->segment - 1) / l->segment);
}

size_t agg_slot_size(const struct agg_layout *l)
{
	return sizeof(struct agg_slot) + 8 * (size_t)l->chunk_cap;
}

int agg_slot_read(int fd, const struct agg_layout *l, uint32_t i, struct agg_slot *hdr)
{
	uint32_t key = i * l->nchunks + l->nchunks - 1;
	struct agg_slot *v = malloc(agg_slot_size(l));
	int err = 0;

	if (!v)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &key, v))
		err = -errno;
	else
		memcpy(hdr, v, sizeof(*hdr));
	free(v);
	return err;
}

int agg_pin_path(char *buf, size_t len, const char *pin_dir, uint32_t job,
		 const char *node, const char *name)
{
	int n;

	if (name)
		n = snprintf(buf, len, "%s/%u/%s/%s", pin_dir, job, node, name);
	else if (node)
		n = snprintf(buf, len, "%s/%u/%s", pin_dir, job, node);
	else
		n = snprintf(buf, len, "%s/%u", pin_dir, job);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int agg_bpffs_check(const char *dir)
{
	char path[512];
	struct statfs fs;

	snprintf(path, sizeof(path), "%s", dir);
	/* The nearest existing ancestor must be on bpffs. */
	for (;;) {
		char *slash;

		if (statfs(path, &fs) == 0)
			return fs.f_type == BPF_FS_MAGIC ? 0 : -ENOTSUP;
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(path, '/');
		if (!slash || slash == path)
			return -ENOENT;
		*slash = '\0';
	}
}

int agg_pin_lock(const char *dir, bool wait)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int netif_fill(const char *name, struct agg_netif *out)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	snprintf(out->name, sizeof(out->name), "%s", name);
	if (ioctl(s, SIOCGIFINDEX, &ifr))
		err = -errno;
	else
		out->ifindex = ifr.ifr_ifindex;
	if (!err && ioctl(s, SIOCGIFHWADDR, &ifr))
		err = -errno;
	else if (!err)
		memcpy(out->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (!err && ioctl(s, SIOCGIFMTU, &ifr))
		err = -errno;
	else if (!err)
		out->mtu = ifr.ifr_mtu;
	close(s);
	return err == -ENODEV || err == -ENXIO ? -ENODEV : err;
}

int agg_netif_find(struct in_addr addr, const char *dev, struct agg_netif *out)
{
	struct ifaddrs *ifa, *i;
	int err = -ENODEV;

	memset(out, 0, sizeof(*out));
	if (dev && *dev)
		return netif_fill(dev, out);
	if (getifaddrs(&ifa))
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == addr.s_addr) {
			err = netif_fill(i->ifa_name, out);
			break;
		}
	}
	freeifaddrs(ifa);
	return err;
}

bool agg_addr_is_local(struct in_addr addr)
{
	struct agg_netif nif;

	return agg_netif_find(addr, NULL, &nif) == 0;
}

struct arp_pkt {
	uint16_t htype, ptype;
	uint8_t hlen, plen;
	uint16_t op;
	uint8_t sha[6];
	uint8_t spa[4];
	uint8_t tha[6];
	uint8_t tpa[4];
} __attribute__((packed));

static long now_ms(void)
{
	return (long)(agg_now() * 1000);
}

int agg_arp_resolve_all(const struct agg_netif *nif, struct in_addr self,
			const struct in_addr *addr, int n, const bool *need,
			int timeout_ms, int grace_ms, uint8_t (*mac)[6], bool *got)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ARP),
		.sll_ifindex = nif->ifindex,
		.sll_halen = 6,
		.sll_addr = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
	};
	struct arp_pkt req = {
		.htype = htons(ARPHRD_ETHER), .ptype = htons(ETH_P_IP),
		.hlen = 6, .plen = 4, .op = htons(ARPOP_REQUEST),
	};
	long start = now_ms(), deadline = start + timeout_ms, next = 0;
	int s, err = 0, needed = 0, left = 0;

	for (int i = 0; i < n; i++) {
		got[i] = false;
		needed += need[i];
	}
	left = n;
	s = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP));
	if (s < 0)
		return -errno;
	if (bind(s, (struct sockaddr *)&sll, sizeof(sll))) {
		err = -errno;
		goto out;
	}
	memcpy(req.sha, nif->mac, 6);
	memcpy(req.spa, &self, 4);
	while (left) {
		long t = now_ms();
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		struct arp_pkt rep;
		ssize_t r;

		/* The needed ones until the deadline; the others until the
		 * grace period is over too. */
		if (t >= deadline || (!needed && t >= start + grace_ms))
			break;
		if (t >= next) {	/* ask every one still unknown every 200 ms */
			for (int i = 0; i < n; i++) {
				if (got[i])
					continue;
				memcpy(req.tpa, &addr[i], 4);
				if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&sll,
					   sizeof(sll)) < 0 && errno != ENOBUFS && errno != EAGAIN) {
					err = -errno;
					goto out;
				}
			}
			next = t + 200;
		}
		if (poll(&pfd, 1, (int)((next < deadline ? next : deadline) - t)) <= 0)
			continue;
		while ((r = recv(s, &rep, sizeof(rep), MSG_DONTWAIT)) > 0) {
			if (r < (ssize_t)sizeof(rep) || rep.op != htons(ARPOP_REPLY))
				continue;
			for (int i = 0; i < n; i++) {
				if (got[i] || memcmp(rep.spa, &addr[i], 4))
					continue;
				memcpy(mac[i], rep.sha, 6);
				got[i] = true;
				left--;
				needed -= need[i];
			}
		}
	}
	for (int i = 0; i < n && !err; i++)
		if (need[i] && !got[i])
			err = -ETIMEDOUT;
out:
	close(s);
	return err;
}

int agg_arp_resolve(const struct agg_netif *nif, struct in_addr self,
		    struct in_addr addr, int timeout_ms, uint8_t mac[6])
{
	uint8_t m[1][6];
	bool need = true, got;
	int err = agg_arp_resolve_all(nif, self, &addr, 1, &need, timeout_ms, 0, m, &got);

	if (!err)
		memcpy(mac, m[0], 6);
	return err;
}

char *agg_pin_plan_text(const char *dir)
{
	char path[600];
	struct bpf_map_info info;
	uint32_t len = sizeof(info), key = 0;
	char *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/plan", dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return NULL;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.value_size < 1) {
		close(fd);
		return NULL;
	}
	buf = calloc(1, info.value_size + 1);
	if (buf && bpf_map_lookup_elem(fd, &key, buf)) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

/* The only directory entry of dir that is a number (job) or any name
 * (node) for which ok() holds; -ENOENT none, -EEXIST several. */
static int only_entry(const char *dir, char *out, size_t len,
		      bool (*ok)(const char *dir, const char *name, void *ctx), void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !ok(dir, e->d_name, ctx))
			continue;
		if (found++ == 0)
			snprintf(out, len, "%s", e->d_name);
	}
	closedir(d);
	return found == 0 ? -ENOENT : found > 1 ? -EEXIST : 0;
}

static bool is_job(const char *dir, const char *name, void *ctx)
{
	return strspn(name, "0123456789") == strlen(name);
}

/* A node directory whose plan puts that node's address on this host. */
static bool is_local_node(const char *dir, const char *name, void *ctx)
{
	char path[600], *text;
	struct agg_plan p;
	struct agg_diag d;
	bool local = false;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = agg_pin_plan_text(path);
	if (!text)
		return false;
	f = fmemopen(text, strlen(text), "r");
	agg_plan_init(&p);
	if (f && agg_plan_read(&p, f, path, &d) == 0 &&
	    (i = agg_plan_find(&p, name)) >= 0)
		local = agg_addr_is_local(p.node[i].addr);
	if (f)
		fclose(f);
	agg_plan_free(&p);
	free(text);
	return local;
}

/* Map the first n entries of an mmap-able array map (all when n is 0 or
 * more than it has): the kernel maps every page at once, so a tool maps
 * what it reads, not a 100 MB result it does not. */
static void *map_mmap_prot(int fd, size_t *len, uint32_t n, int prot)
{
	struct bpf_map_info info;
	uint32_t il = sizeof(info);
	void *m;

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &il))
		return NULL;
	if (!n || n > info.max_entries)
		n = info.max_entries;
	*len = (size_t)((info.value_size + 7) & ~7u) * n;
	m = mmap(NULL, *len, prot, MAP_SHARED, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

static void *map_mmap(int fd, size_t *len, uint32_t n)
{
	return map_mmap_prot(fd, len, n, PROT_READ);
}

int agg_node_map_results(struct agg_node *n)
{
	size_t len;
	void *m = map_mmap(n->fd_results, &len, 0);

	if (!m)
		return -errno;
	munmap((void *)n->results, n->results_len);
	n->results = m;
	n->results_len = len;
	return 0;
}

int agg_node_locate(const char *pin_dir, const char *job, const char *node,
		    char *dir, size_t dirlen, char *why, size_t whylen)
{
	char jobdir[512], jobname[32], nodename[256];
	int err;

	err = agg_bpffs_check(pin_dir);
	if (err) {
		snprintf(why, whylen, "%s: %s", pin_dir, err == -ENOTSUP ?
			 "not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)" :
			 err == -ENOENT ? "no bpf filesystem mounted" : strerror(-err));
		return -ENOENT;
	}
	if (job) {
		snprintf(jobname, sizeof(jobname), "%s", job);
		snprintf(jobdir, sizeof(jobdir), "%s/%s", pin_dir, jobname);
		if (access(jobdir, F_OK)) {
			snprintf(why, whylen, "job %s is not loaded (no %s)", job, jobdir);
			return -ENOENT;
		}
	} else {
		err = only_entry(pin_dir, jobname, sizeof(jobname), is_job, NULL);
		if (err) {
			snprintf(why, whylen, err == -EEXIST ?
				 "several jobs are loaded under %s: say which with --job" :
				 "no job is loaded under %s", pin_dir);
			return -ENOENT;
		}
	}
	snprintf(jobdir, sizeof(jobdir), "%s/%s", pin_dir, jobname);
	if (node) {
		snprintf(nodename, sizeof(nodename), "%s", node);
	} else {
		err = only_entry(jobdir, nodename, sizeof(nodename), is_local_node, NULL);
		if (err) {
			snprintf(why, whylen, err == -EEXIST ?
				 "several nodes of job %s are on this host: say which with --node" :
				 "no node of job %s is loaded for an address of this host (--node)",
				 jobname);
			return -ENOENT;
		}
	}
	if (snprintf(dir, dirlen, "%s/%s", jobdir, nodename) >= (int)dirlen)
		return -ENAMETOOLONG;
	if (access(dir, F_OK)) {
		snprintf(why, whylen, "node %s of job %s is not loaded (no %s)",
			 nodename, jobname, dir);
		return -ENOENT;
	}
	return 0;
}

static void node_reset(struct agg_node *n)
{
	memset(n, 0, sizeof(*n));
	n->fd_results = n->fd_meta = n->fd_stats = n->fd_sent = n->fd_prog = n->fd_clock =
		n->fd_progress = n->fd_slots = n->fd_trees = n->fd_events = n->fd_cc = -1;
}

int agg_node_open_dir(struct agg_node *n, const char *dir, unsigned flags,
		      char *why, size_t whylen)
{
	const char *nodename = strrchr(dir, '/');
	char path[600], *text;
	struct agg_diag d;
	FILE *f;
	int err;

	node_reset(n);
	agg_plan_init(&n->plan);
	snprintf(n->dir, sizeof(n->dir), "%s", dir);
	nodename = nodename ? nodename + 1 : dir;
	text = agg_pin_plan_text(n->dir);
	if (!text) {
		snprintf(why, whylen, "%s: no plan pinned (a load in progress or half done? "
			 "run agg-load again)", n->dir);
		return -ENOENT;
	}
	f = fmemopen(text, strlen(text), "r");
	err = f ? agg_plan_read(&n->plan, f, n->dir, &d) : -ENOMEM;
	if (f)
		fclose(f);
	free(text);
	if (err) {
		snprintf(why, whylen, "%s: the stored plan does not read: %s", n->dir,
			 f ? d.msg : strerror(ENOMEM));
		return -EIO;
	}
	n->token = agg_plan_wire_token(&n->plan);
	n->self = agg_plan_find(&n->plan, nodename);
	if (n->self < 0) {
		snprintf(why, whylen, "%s: the stored plan has no node %s", n->dir, nodename);
		return -EIO;
	}
	if (agg_layout_of(&n->plan, &n->l, why, whylen))
		return -EIO;
#define OPEN_PIN(fd, name) do { \
		snprintf(path, sizeof(path), "%s/%s", n->dir, name); \
		fd = bpf_obj_get(path); \
		if (fd < 0) { \
			err = -errno; \
			snprintf(why, whylen, "%s: %s", path, strerror(errno)); \
			return err; \
		} \
	} while (0)
	OPEN_PIN(n->fd_stats, "stats");
	OPEN_PIN(n->fd_sent, "sent");
	OPEN_PIN(n->fd_slots, "slots");
	OPEN_PIN(n->fd_trees, "trees");
	OPEN_PIN(n->fd_meta, "meta");
	OPEN_PIN(n->fd_progress, "progress");
	if (!(flags & AGG_NODE_IO))
		return 0;
	OPEN_PIN(n->fd_prog, "xdp_prog");
	OPEN_PIN(n->fd_results, "results");
	OPEN_PIN(n->fd_clock, "clock");
#undef OPEN_PIN
	/* Optional: a node an older agg-load pinned has none (the sender
	 * then polls). */
	snprintf(path, sizeof(path), "%s/events", n->dir);
	n->fd_events = bpf_obj_get(path);
	snprintf(path, sizeof(path), "%s/cc", n->dir);
	n->fd_cc = bpf_obj_get(path);
	n->meta = map_mmap(n->fd_meta, &n->meta_len, 0);
	n->results = map_mmap(n->fd_results, &n->results_len, n->l.nexp);
	n->clock = map_mmap_prot(n->fd_clock, &n->clock_len, 1, PROT_READ | PROT_WRITE);
	if (!n->meta || !n->results || !n->clock) {
		snprintf(why, whylen, "%s: cannot map the results: %s", n->dir, strerror(errno));
		return -errno;
	}
	err = agg_netif_find(n->plan.node[n->self].addr, n->plan.node[n->self].dev, &n->nif);
	if (err) {
		snprintf(why, whylen, "node %s: no interface with address %s here",
			 nodename, inet_ntoa(n->plan.node[n->self].addr));
		return err;
	}
	return 0;
}

int agg_node_open(struct agg_node *n, const char *pin_dir, const char *job,
		  const char *node, char *why, size_t whylen)
{
	char dir[sizeof(n->dir)];
	int err;

	node_reset(n);
	agg_plan_init(&n->plan);
	err = agg_node_locate(pin_dir, job, node, dir, sizeof(dir), why, whylen);
	if (err)
		return err;
	return agg_node_open_dir(n, dir, AGG_NODE_IO, why, whylen);
}

void agg_node_close(struct agg_node *n)
{
	int *fds[] = { &n->fd_results, &n->fd_meta, &n->fd_stats, &n->fd_sent, &n->fd_prog,
		       &n->fd_clock, &n->fd_progress, &n->fd_slots, &n->fd_trees,
		       &n->fd_events, &n->fd_cc };

	if (n->meta)
		munmap((void *)n->meta, n->meta_len);
	if (n->results)
		munmap((void *)n->results, n->results_len);
	if (n->clock)
		munmap(n->clock, n->clock_len);
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	agg_plan_free(&n->plan);
	node_reset(n);
}

/* Is the result of wire segment s version ver (and not being rewritten)? */
static bool meta_is(const struct agg_node *n, uint32_t s, uint64_t ver)
{
	uint32_t seq = agg_meta_begin(&n->meta[s]);

	return !(seq & 1) && __atomic_load_n(&n->meta[s].ver, __ATOMIC_RELAXED) == ver;
}

uint32_t agg_node_missing(const struct agg_node *n, uint32_t lo, uint32_t hi,
			  uint64_t ver)
{
	uint32_t miss = 0;

	for (uint32_t s = lo; s < hi; s++)
		miss += !meta_is(n, s, ver);
	return miss;
}

const char *agg_ver_str(uint64_t ver, char *buf, size_t len)
{
	if (!ver)
		snprintf(buf, len, "nothing");
	else
		snprintf(buf, len, "run %u iteration %u", agg_ver_run(ver), agg_ver_iter(ver));
	return buf;
}

/* Move *at to ver if ver is newer (compare and swap: agg-send, agg-recv
 * and the XDP program share the clock); the value it held. */
static uint64_t clock_raise(__u64 *at, uint64_t ver)
{
	uint64_t cur = __atomic_load_n(at, __ATOMIC_ACQUIRE);

	while (agg_ver_cmp(ver, cur) > 0 &&
	       !__atomic_compare_exchange_n(at, &cur, ver, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return cur;
}

int agg_node_run_over(const struct agg_node *n, uint32_t run, char *why, size_t whylen)
{
	uint64_t now = __atomic_load_n(&n->clock->now, __ATOMIC_ACQUIRE);

	if (!now || agg_ver_cmp(agg_ver(run, 0), now) >= 0 || run == agg_ver_run(now))
		return 0;
	snprintf(why, whylen, "run %u is over on node %s: it has seen run %u (a restarted "
		 "job needs a newer run on every worker: --run, AGG_RUN or torchrun's restart "
		 "count, at most %d ahead, modulo 65536)", run, n->plan.node[n->self].name,
		 agg_ver_run(now), AGG_RUN_AHEAD);
	return -ESTALE;
}

/* The check and claim of agg_node_open_iter on one mark of the clock;
 * claim: take the mark now (two takers of one iteration: one wins), else
 * only check it (taken on delivery). */
static int open_mark(struct agg_node *n, uint64_t ver, __u64 *mark, bool claim,
		     const char *done, char *why, size_t whylen)
{
	const char *name = n->plan.node[n->self].name;
	uint64_t now = __atomic_load_n(&n->clock->now, __ATOMIC_ACQUIRE), old;
	char a[64], b[64];
	int err = agg_node_run_over(n, agg_ver_run(ver), why, whylen);

	if (err)
		return err;
	/* The tools may jump runs (a restart), not far within one: the other
	 * nodes would refuse such an iteration (drop_ahead). */
	if (agg_ver_run(ver) == agg_ver_run(now) && agg_ver_too_far(ver, now)) {
		snprintf(why, whylen, "iteration %u is more than %d ahead of %s, the newest node %s "
			 "has seen: the other nodes would refuse it (a jump needs a new run: --run)",
			 agg_ver_iter(ver), AGG_ITER_AHEAD, agg_ver_str(now, a, sizeof(a)), name);
		return -ERANGE;
	}
	old = claim ? clock_raise(mark, ver) : __atomic_load_n(mark, __ATOMIC_ACQUIRE);
	if (old && agg_ver_cmp(ver, old) <= 0) {
		snprintf(why, whylen, "%s was %s on node %s already (the newest there is %s): "
			 "within a run an iteration is %s once; a retried step needs a new iteration "
			 "number on every worker, a restarted job a new run (--run, AGG_RUN)",
			 agg_ver_str(ver, a, sizeof(a)), done, name,
			 agg_ver_str(old, b, sizeof(b)), done);
		return -EALREADY;
	}
	clock_raise(&n->clock->now, ver);
	return 0;
}

int agg_node_open_iter(struct agg_node *n, uint64_t ver, bool send, char *why, size_t whylen)
{
	/* agg-send takes its mark now; agg-recv when it has delivered
	 * (agg_node_mark_recvd). */
	return open_mark(n, ver, send ? &n->clock->sent : &n->clock->recvd, send,
			 send ? "sent" : "received", why, whylen);
}

void agg_node_mark_recvd(struct agg_node *n, uint64_t ver)
{
	clock_raise(&n->clock->recvd, ver);
}

int agg_node_open_sparse(struct agg_node *n, uint64_t ver, enum agg_sparse_mark how,
			 char *why, size_t whylen)
{
	static const char *const done[] = { "sent (sparse)", "received (sparse)",
					    "served (sparse)" };

	if (n->clock_len < offsetof(struct agg_clock, sparse_recvd) + sizeof(__u64)) {
		snprintf(why, whylen, "node %s was loaded by an older agg-load (its clock has no "
			 "sparse marks): load the job again", n->plan.node[n->self].name);
		return -EOPNOTSUPP;
	}
	return open_mark(n, ver, how == AGG_SPARSE_SEND ? &n->clock->sparse_sent :
			 &n->clock->sparse_recvd, how != AGG_SPARSE_RECV, done[how], why, whylen);
}

void agg_node_mark_sparse_recvd(struct agg_node *n, uint64_t ver)
{
	clock_raise(&n->clock->sparse_recvd, ver);
}

void agg_node_missing_ranges(const struct agg_node *n, uint32_t lo, uint32_t hi,
			     uint64_t ver, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (uint32_t s = lo; s < hi; s++) {
		uint32_t e = s;
		int w;

		if (meta_is(n, s, ver))
			continue;
		while (e + 1 < hi && !meta_is(n, e + 1, ver))
			e++;
		if (e == s)
			w = snprintf(buf + used, len - used, "%s%u", used ? "," : "", s);
		else
			w = snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", s, e);
		if (w < 0 || (size_t)w >= len - used) {
			if (len > 4)
				strcpy(buf + len - 4, "...");
			return;
		}
		used += w;
		s = e;
	}
}

int32_t agg_node_exponent(const struct agg_node *n, uint32_t d)
{
	return n->results[d];	/* exponent segments come first, one value per data segment */
}

int agg_stats_read(int fd, uint64_t out[AGG_S_COUNT], uint64_t *percpu, int ncpu)
{
	int n = libbpf_num_possible_cpus();
	uint64_t *v;

	if (n <= 0)
		return n ? n : -EINVAL;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t k = 0; k < AGG_S_COUNT; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, v)) {
			int err = -errno;

			free(v);
			return err;
		}
		for (int c = 0; c < n; c++) {
			out[k] += v[c];
			if (percpu && c < ncpu)
				percpu[(size_t)c * AGG_S_COUNT + k] = v[c];
		}
	}
	free(v);
	return n;
}

int agg_link_create(int prog_fd, int ifindex, unsigned type, unsigned flags)
{
	union bpf_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog_fd;
	attr.link_create.target_fd = ifindex;
	attr.link_create.attach_type = type;
	attr.link_create.flags = flags;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}

int agg_sent_add(int fd, const uint64_t add[AGG_SENT_ENTRIES])
{
	for (uint32_t k = 0; k < AGG_SENT_ENTRIES; k++) {
		uint64_t v = 0;

		if (!add[k])
			continue;
		if (bpf_map_lookup_elem(fd, &k, &v)) {
			if (errno == ENOENT && k >= AGG_SENT_COUNT)
				return 0;	/* a map without stream sections */
			return -errno;
		}
		v += add[k];
		if (bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			return -errno;
	}
	return 0;
}
