// SPDX-License-Identifier: GPL-2.0-only
/* agg-stat: the counters of a loaded node. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>

#include "dp.h"
#include "json.h"
#include "log.h"
#include "opts.h"

static const char doc[] =
"Print the counters of a node loaded by agg-load(1): packets, segments\n"
"aggregated and completed, forwarded, fanned out, results, fetch signals\n"
"and drops by reason, summed over CPUs.\n"
"\v"
"Exit status: 0 ok, 2 bad usage or nothing loaded, 3 system failure.";

static const char *const names[] = AGG_STAT_NAMES;

int main(int argc, char **argv)
{
	static const struct argp_child children[] = {
		{ &agg_target_argp, 0, "Target:", 0 },
		{ &agg_common_argp, 0, "Output:", 0 },
		{ 0 }
	};
	static const struct argp argp = { .doc = doc, .children = children };
	uint64_t v[AGG_S_COUNT];
	char dir[512], why[600], path[600];
	int err, fd;

	agg_opts_setup(argv[0]);
	if (argp_parse(&argp, argc, argv, 0, NULL, NULL))
		return AGG_EXIT_USAGE;
	agg_opts_done(argv[0]);
	agg_print_start(agg_common.json, agg_common.pretty);
	err = agg_node_locate(agg_target.pin_dir, agg_target.job, agg_target.node,
			      dir, sizeof(dir), why, sizeof(why));
	if (err) {
		agg_err("%s", why);
		return agg_opts_exit(err == -ENOENT ? AGG_EXIT_USAGE : AGG_EXIT_SYSTEM);
	}
	snprintf(path, sizeof(path), "%s/stats", dir);
	fd = bpf_obj_get(path);
	if (fd < 0 || (err = agg_stats_read(fd, v, NULL, 0)) < 0) {
		agg_err("%s: %s", path, strerror(fd < 0 ? errno : -err));
		return agg_opts_exit(AGG_EXIT_SYSTEM);
	}
	agg_print_obj_open(NULL);
	for (int k = 0; k < AGG_S_COUNT; k++) {
		if (!agg_print_json())
			printf("%-16s %" PRIu64 "\n", names[k], v[k]);
		else
			agg_print_uint(names[k], NULL, v[k]);
	}
	agg_print_obj_close();
	return agg_opts_exit(0);
}
