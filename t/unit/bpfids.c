// SPDX-License-Identifier: GPL-2.0-only
/*
 * bpfids: the ids of every BPF map, program or link the kernel holds, one
 * a line, read with BPF_*_GET_NEXT_ID only: no object is opened.
 *
 *   bpfids map|prog|link
 *
 * bpftool map show opens every map by id, and closing such an fd can leak
 * a program array whose last pin just went: its usercnt falls to zero
 * again while the deferred clear of the first time is still queued, and
 * prog_array_map_clear() takes a reference that only a clear which
 * actually runs gives back (kernel/bpf/arraymap.c).  The map then never
 * goes.  So a test that waits for an unloaded node's maps to go asks for
 * ids only.
 *
 * Exit status: 0 ok, 2 bad usage, 3 system failure.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>

int main(int argc, char **argv)
{
	int (*next)(__u32, __u32 *);
	__u32 id = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: bpfids map|prog|link\n");
		return 2;
	}
	if (!strcmp(argv[1], "map"))
		next = bpf_map_get_next_id;
	else if (!strcmp(argv[1], "prog"))
		next = bpf_prog_get_next_id;
	else if (!strcmp(argv[1], "link"))
		next = bpf_link_get_next_id;
	else {
		fprintf(stderr, "bpfids: '%s': map, prog or link\n", argv[1]);
		return 2;
	}
	while (!next(id, &id))
		printf("%u\n", id);
	if (errno != ENOENT) {
		fprintf(stderr, "bpfids: %s ids: %s\n", argv[1], strerror(errno));
		return 3;
	}
	return 0;
}
