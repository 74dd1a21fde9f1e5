// SPDX-License-Identifier: GPL-2.0-only
/*
 * metatool: the sequence lock of a loaded node's results, for t/0405.
 *
 *   metatool DIR SEG hold [SEC] hold wire segment SEG's lock odd for SEC
 *                               seconds, or until SIGTERM or SIGINT, as a
 *                               writer in the middle of storing a newer
 *                               result would
 *   metatool DIR SEG show       "seq N run R iter I" of SEG (iter -1: none)
 *
 * DIR is the node's pin directory.  Exit status 0, 2 bad usage, 3 failure.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agg.h"

static volatile sig_atomic_t stopped;

static void on_stop(int sig)
{
	stopped = 1;
}

int main(int argc, char **argv)
{
	sigset_t stop, old;
	struct bpf_map_info info;
	uint32_t len = sizeof(info), seg;
	struct agg_meta *m;
	char path[600];
	size_t sz;
	int fd;

	if (argc < 4 || (strcmp(argv[3], "show") && (strcmp(argv[3], "hold") || argc > 5))) {
		fprintf(stderr, "usage: metatool DIR SEG hold [SEC] | show\n");
		return 2;
	}
	seg = (uint32_t)strtoul(argv[2], NULL, 10);
	snprintf(path, sizeof(path), "%s/meta", argv[1]);
	fd = bpf_obj_get(path);
	memset(&info, 0, sizeof(info));
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
		fprintf(stderr, "metatool: %s: %s\n", path, strerror(errno));
		return 3;
	}
	if (seg >= info.max_entries) {
		fprintf(stderr, "metatool: segment %u of %u\n", seg, info.max_entries);
		return 2;
	}
	sz = (size_t)info.max_entries * sizeof(*m);
	m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "metatool: mmap %s: %s\n", path, strerror(errno));
		return 3;
	}
	m += seg;
	if (!strcmp(argv[3], "show")) {
		printf("seq %u run %u iter %d\n", m->seq, agg_ver_run(m->ver),
		       m->ver ? (int)agg_ver_iter(m->ver) : -1);
		return 0;
	}
	/* Blocked before the lock is taken: a signal that comes early waits
	 * for sigsuspend instead of ending the process with the lock odd. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, &old);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	if (__atomic_fetch_add(&m->seq, 1, __ATOMIC_ACQ_REL) & 1) {
		fprintf(stderr, "metatool: segment %u is being written\n", seg);
		return 3;
	}
	printf("held\n");
	fflush(stdout);
	if (argc == 5) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		usleep((useconds_t)(atof(argv[4]) * 1e6));
	} else {
		while (!stopped)
			sigsuspend(&old);
	}
	__atomic_fetch_add(&m->seq, 1, __ATOMIC_ACQ_REL);
	return 0;
}
