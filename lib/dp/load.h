/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_LOAD_H
#define AGG_LOAD_H

#include <stdbool.h>
#include <stdio.h>

#include "plan.h"

enum agg_xdp_mode {
	AGG_MODE_NATIVE,	/* native only (the default) */
	AGG_MODE_AUTO,		/* native, else generic with a warning */
	AGG_MODE_GENERIC,	/* generic (skb) mode */
};

struct agg_load_opts {
	const char *pin_dir;
	enum agg_xdp_mode mode;
	bool dry_run;
	FILE *dry_out;		/* where --dry-run describes the load */
	int arp_timeout_ms;
};

/* What agg_load did. */
enum agg_load_result {
	AGG_LOADED,		/* loaded and attached */
	AGG_REPLACED,		/* another plan was loaded for the node: replaced */
	AGG_UNCHANGED,		/* the same plan was loaded: nothing done */
	AGG_DRY_RUN,
};

/*
 * Load node self of plan p on this host: XDP and TC programs on the
 * node's interface, maps filled, everything pinned under
 * PIN_DIR/JOB/NODE/ with that directory locked meanwhile.  Returns an
 * agg_load_result, or -errno with why set; *generic tells whether XDP
 * runs in generic mode.  -EINVAL: the plan cannot run (bad input).
 */
int agg_load(const struct agg_plan *p, int self, const struct agg_load_opts *o,
	     bool *generic, char *why, size_t whylen);

/* Remove everything pinned in dir (a node directory) and the directory;
 * the job directory too when it is left empty.  0 or -errno. */
int agg_unload_dir(const char *dir, char *why, size_t whylen);

#endif
