// SPDX-License-Identifier: GPL-2.0-only
/*
 * losstool: the loss injector of the tests (bpf/loss.bpf.c), run in the
 * namespace of the interface (the virtual cluster's bridge namespace).
 *
 *   losstool attach IFACE in|out PPM PORT PINDIR [--type data|result|request|probe]
 *       load the program to drop PPM per million agg packets to UDP PORT
 *       (of one type only with --type), attach it to IFACE's tcx ingress
 *       (in: what the host behind the port sends) or egress (out: what
 *       goes to it), pin the link as PINDIR/link-IFACE-DIR and exit.  The
 *       log and counter maps are pinned in PINDIR by the first attach and
 *       shared by every later one there, so one log holds a whole cluster.
 *   losstool log PINDIR     one line per dropped packet, in drop order:
 *                           dir iter seg from type attempt saddr daddr ifindex
 *   losstool stats PINDIR   "name value" lines: seen, dropped (and per
 *                           direction), logged, overflow
 *   losstool detach PINDIR  detach each link from its hook, then remove the
 *                           pins and PINDIR
 *
 * Exit status: 0 ok, 2 bad usage, 3 system failure.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dp.h"
#include "log.h"
#include "opts.h"
#include "loss.h"
#include "loss.skel.h"

static const char *const map_pins[] = { "loss_log", "loss_head", "loss_count" };
#define NMAPS (sizeof(map_pins) / sizeof(map_pins[0]))

static const char *const type_names[] = {
	[AGG_T_DATA] = "data", [AGG_T_RESULT] = "result",
	[AGG_T_REQUEST] = "request", [AGG_T_PROBE] = "probe",
	[AGG_T_SPARSE] = "sparse", [AGG_T_SPARSE_END] = "sparse_end",
	[AGG_T_SPARSE_ACK] = "sparse_ack", [AGG_T_SPARSE_RESULT] = "sparse_result",
};

static const char usage_text[] =
"usage: losstool attach IFACE in|out PPM PORT[-LAST] PINDIR [--type TYPE]\n"
"       (TYPE: data, result, request, probe, sparse, sparse_end, sparse_ack,\n"
"       sparse_result)\n"
"       losstool log PINDIR\n"
"       losstool stats PINDIR\n"
"       losstool detach PINDIR\n";

static int usage(const char *fmt, const char *arg)
{
	if (fmt) {
		fprintf(stderr, "losstool: ");
		fprintf(stderr, fmt, arg);
		fputc('\n', stderr);
	}
	fputs(usage_text, stderr);
	return AGG_EXIT_USAGE;
}

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len) {
		agg_err("%s/%s: path too long", dir, name);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int check_bpffs(const char *dir)
{
	int err = agg_bpffs_check(dir);

	if (err)
		agg_err("%s: %s", dir, err == -ENOTSUP ?
			"not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)" :
			err == -ENOENT ? "no bpf filesystem mounted" : strerror(-err));
	return err;
}

static int do_attach(int argc, char **argv)
{
	const char *ifname, *dir, *pindir;
	struct bpf_map *maps[NMAPS];
	char path[512], link_pin[512];
	struct loss *skel = NULL;
	uint64_t ppm, port, last;
	char *dash;
	unsigned type = 0;
	int ifindex, link = -1, rc = AGG_EXIT_SYSTEM, err;
	bool reuse;

	if (argc != 7 && argc != 9)
		return usage(NULL, NULL);
	ifname = argv[2];
	dir = argv[3];
	pindir = argv[6];
	if (strcmp(dir, "in") && strcmp(dir, "out"))
		return usage("direction '%s': in (from the host) or out (to the host)", dir);
	if (agg_parse_u64(argv[4], &ppm, NULL) || ppm > 1000000)
		return usage("PPM '%s': drops per million, 0 to 1000000", argv[4]);
	/* PORT-LAST: the sparse path's ports too (agg.h: P to P + 3) */
	dash = strchr(argv[5], '-');
	if (dash)
		*dash = '\0';
	if (agg_parse_u64(argv[5], &port, NULL) || port == 0 || port > 65535 ||
	    (dash && (agg_parse_u64(dash + 1, &last, NULL) || last < port || last > 65535)))
		return usage("PORT '%s': a UDP port, 1 to 65535, or a range FIRST-LAST", argv[5]);
	if (!dash)
		last = port;
	if (argc == 9) {
		if (strcmp(argv[7], "--type"))
			return usage("unknown option '%s'", argv[7]);
		for (unsigned t = 1; t < sizeof(type_names) / sizeof(type_names[0]); t++)
			if (!strcmp(argv[8], type_names[t]))
				type = t;
		if (!type)
			return usage("type '%s': data, result, request, probe, sparse, sparse_end, "
				     "sparse_ack or sparse_result", argv[8]);
	}
	ifindex = if_nametoindex(ifname);
	if (!ifindex) {
		agg_err("no interface %s in this network namespace", ifname);
		return AGG_EXIT_USAGE;
	}
	if (check_bpffs(pindir))
		return AGG_EXIT_USAGE;
	if (mkdir(pindir, 0700) && errno != EEXIST) {
		agg_err("cannot create %s: %s", pindir, strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	if ((size_t)snprintf(link_pin, sizeof(link_pin), "%s/link-%s-%s", pindir, ifname, dir) >=
	    sizeof(link_pin)) {
		agg_err("%s: path too long", pindir);
		return AGG_EXIT_USAGE;
	}
	if (access(link_pin, F_OK) == 0) {
		agg_err("%s already has a loss program on %s (%s): detach first", ifname, dir, link_pin);
		return AGG_EXIT_USAGE;
	}

	skel = loss__open();
	if (!skel) {
		agg_err("cannot open the loss program: %s", strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	skel->rodata->cfg_ppm = ppm;
	skel->rodata->cfg_port = port;
	skel->rodata->cfg_nports = last - port + 1;
	skel->rodata->cfg_type = type;
	skel->rodata->cfg_dir = strcmp(dir, "in") ? LOSS_OUT : LOSS_IN;
	maps[0] = skel->maps.loss_log;
	maps[1] = skel->maps.loss_head;
	maps[2] = skel->maps.loss_count;
	if (bpf_map__value_size(maps[0]) != sizeof(struct loss_rec)) {
		agg_err("loss_log entries are %u bytes, losstool expects %zu: rebuild both",
			bpf_map__value_size(maps[0]), sizeof(struct loss_rec));
		goto out;
	}
	/* The first attach in pindir pins the maps, the later ones share them. */
	if (pin_path(path, sizeof(path), pindir, map_pins[0]))
		goto out;
	reuse = access(path, F_OK) == 0;
	for (unsigned i = 0; reuse && i < NMAPS; i++) {
		int fd;

		if (pin_path(path, sizeof(path), pindir, map_pins[i]))
			goto out;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			agg_err("cannot open %s: %s", path, strerror(errno));
			goto out;
		}
		err = bpf_map__reuse_fd(maps[i], fd);
		close(fd);
		if (err) {
			agg_err("%s does not fit the loss program: %s", path, strerror(-err));
			goto out;
		}
	}
	err = loss__load(skel);
	if (err) {
		agg_err("cannot load the loss program: %s", strerror(-err));
		goto out;
	}
	link = agg_link_create(bpf_program__fd(skel->progs.agg_loss), ifindex,
			       strcmp(dir, "in") ? AGG_TCX_EGRESS : AGG_TCX_INGRESS, 0);
	if (link < 0) {
		agg_err("cannot attach to tcx %s of %s: %s%s", strcmp(dir, "in") ? "egress" : "ingress",
			ifname, strerror(-link), link == -EINVAL ? " (tcx needs kernel 6.6)" : "");
		goto out;
	}
	for (unsigned i = 0; !reuse && i < NMAPS; i++) {
		if (pin_path(path, sizeof(path), pindir, map_pins[i]))
			goto out;
		if (bpf_map__pin(maps[i], path)) {
			agg_err("cannot pin %s: %s", path, strerror(errno));
			goto out;
		}
	}
	if (bpf_obj_pin(link, link_pin)) {
		agg_err("cannot pin %s: %s", link_pin, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (link >= 0)
		close(link);
	loss__destroy(skel);
	return rc;
}

static int open_pinned(const char *pindir, const char *name)
{
	char path[512];
	int fd;

	if (pin_path(path, sizeof(path), pindir, name))
		return -1;
	fd = bpf_obj_get(path);
	if (fd < 0)
		agg_err("cannot open %s: %s%s", path, strerror(errno),
			errno == ENOENT ? " (no losstool attach there)" : "");
	return fd;
}

static int read_head(const char *pindir, uint64_t *head)
{
	uint32_t zero = 0;
	int fd = open_pinned(pindir, "loss_head");

	if (fd < 0)
		return -1;
	if (bpf_map_lookup_elem(fd, &zero, head)) {
		agg_err("cannot read %s/loss_head: %s", pindir, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int do_log(const char *pindir)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info);
	const struct loss_rec *log;
	uint64_t head, n;
	size_t bytes;
	int fd;

	if (read_head(pindir, &head))
		return AGG_EXIT_SYSTEM;
	fd = open_pinned(pindir, "loss_log");
	if (fd < 0)
		return AGG_EXIT_SYSTEM;
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		agg_err("cannot inspect %s/loss_log: %s", pindir, strerror(errno));
		close(fd);
		return AGG_EXIT_SYSTEM;
	}
	if (info.value_size != sizeof(struct loss_rec)) {
		agg_err("%s/loss_log entries are %u bytes, losstool expects %zu",
			pindir, info.value_size, sizeof(struct loss_rec));
		close(fd);
		return AGG_EXIT_SYSTEM;
	}
	bytes = (size_t)info.max_entries * info.value_size;
	log = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (log == MAP_FAILED) {
		agg_err("cannot map %s/loss_log: %s", pindir, strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	n = head < info.max_entries ? head : info.max_entries;
	for (uint64_t i = 0; i < n; i++) {
		const struct loss_rec *r = &log[i];
		char sa[INET_ADDRSTRLEN], da[INET_ADDRSTRLEN], tn[16];

		inet_ntop(AF_INET, &r->saddr, sa, sizeof(sa));
		inet_ntop(AF_INET, &r->daddr, da, sizeof(da));
		if (r->type < sizeof(type_names) / sizeof(type_names[0]) && type_names[r->type])
			snprintf(tn, sizeof(tn), "%s", type_names[r->type]);
		else
			snprintf(tn, sizeof(tn), "%u", r->type);
		printf("%s %u %u %u %s %u %s %s %u\n", r->dir == LOSS_IN ? "in" : "out",
		       r->iter, r->seg, r->from, tn, r->attempt, sa, da, r->ifindex);
	}
	munmap((void *)log, bytes);
	return 0;
}

static int do_stats(const char *pindir)
{
	static const char *const names[LOSS_NCOUNT] = {
		"seen_in", "dropped_in", "seen_out", "dropped_out", "overflow",
	};
	uint64_t sum[LOSS_NCOUNT] = { 0 }, head, *v;
	int ncpu = libbpf_num_possible_cpus(), fd;

	if (ncpu < 0) {
		agg_err("cannot count the CPUs: %s", strerror(-ncpu));
		return AGG_EXIT_SYSTEM;
	}
	if (read_head(pindir, &head))
		return AGG_EXIT_SYSTEM;
	fd = open_pinned(pindir, "loss_count");
	if (fd < 0)
		return AGG_EXIT_SYSTEM;
	v = calloc(ncpu, sizeof(*v));
	if (!v) {
		agg_err("out of memory");
		close(fd);
		return AGG_EXIT_SYSTEM;
	}
	for (uint32_t k = 0; k < LOSS_NCOUNT; k++) {
		if (bpf_map_lookup_elem(fd, &k, v)) {
			agg_err("cannot read %s/loss_count: %s", pindir, strerror(errno));
			free(v);
			close(fd);
			return AGG_EXIT_SYSTEM;
		}
		for (int c = 0; c < ncpu; c++)
			sum[k] += v[c];
	}
	free(v);
	close(fd);
	printf("seen %" PRIu64 "\n", sum[LOSS_SEEN_IN] + sum[LOSS_SEEN_OUT]);
	printf("dropped %" PRIu64 "\n", sum[LOSS_DROP_IN] + sum[LOSS_DROP_OUT]);
	for (int k = 0; k < LOSS_NCOUNT; k++)
		printf("%s %" PRIu64 "\n", names[k], sum[k]);
	printf("logged %" PRIu64 "\n", head - sum[LOSS_OVERFLOW]);
	return 0;
}

static int link_detach(const char *path)
{
	int fd = bpf_obj_get(path), err = 0;

	if (fd < 0 || bpf_link_detach(fd)) {
		err = -errno;
		agg_err("cannot detach %s: %s", path, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return err;
}

static int do_detach(const char *pindir)
{
	char path[512];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	if (check_bpffs(pindir))
		return AGG_EXIT_USAGE;
	d = opendir(pindir);
	if (!d) {
		agg_err("cannot open %s: %s", pindir, strerror(errno));
		return errno == ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM;
	}
	/* Links first: no program outlives the maps it writes to. */
	for (int pass = 0; pass < 2; pass++) {
		rewinddir(d);
		while ((e = readdir(d))) {
			bool is_link = !strncmp(e->d_name, "link-", 5), known = is_link;

			for (unsigned i = 0; i < NMAPS; i++)
				known |= !strcmp(e->d_name, map_pins[i]);
			if (!known || is_link != (pass == 0))
				continue;
			if (pin_path(path, sizeof(path), pindir, e->d_name)) {
				rc = AGG_EXIT_SYSTEM;
				continue;
			}
			/* The link's last reference goes later (bpffs frees
			 * its inode after an RCU grace period, the link in a
			 * work item): detach it now, so that no packet is
			 * dropped once losstool has returned. */
			if (is_link && link_detach(path))
				rc = AGG_EXIT_SYSTEM;
			if (unlink(path)) {
				agg_err("cannot remove %s: %s", path, strerror(errno));
				rc = AGG_EXIT_SYSTEM;
			}
		}
	}
	closedir(d);
	if (!rc && rmdir(pindir)) {
		agg_err("cannot remove %s: %s%s", pindir, strerror(errno),
			errno == ENOTEMPTY ? " (it holds pins losstool did not make)" : "");
		rc = AGG_EXIT_SYSTEM;
	}
	return rc;
}

int main(int argc, char **argv)
{
	int rc;

	agg_log_init("losstool", getenv("LOSSTOOL_VERBOSE") ? 2 : 0);
	agg_log_libbpf();
	if (argc < 2)
		return usage(NULL, NULL);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "attach"))
		return do_attach(argc, argv);
	if (argc != 3)
		return usage(NULL, NULL);
	if (!strcmp(argv[1], "log"))
		rc = do_log(argv[2]);
	else if (!strcmp(argv[1], "stats"))
		rc = do_stats(argv[2]);
	else if (!strcmp(argv[1], "detach"))
		rc = do_detach(argv[2]);
	else
		return usage("unknown command '%s'", argv[1]);
	if (fflush(stdout) || ferror(stdout)) {
		agg_err("cannot write standard output: %s", strerror(errno));
		return AGG_EXIT_SYSTEM;
	}
	return rc;
}
