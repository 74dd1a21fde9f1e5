/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What lib/api's files share behind agg/agg.h (libagg.map exports none of
 * it): libagg.c's handle internals for tuning.c.
 */
#ifndef AGG_API_H
#define AGG_API_H

#include <agg/agg.h>

#include "plan.h"

/* The plan of a's job. */
const struct agg_plan *agg_api_plan(const struct agg *a);
/* The handle's streams, and a change of them for the allreduces after
 * those started (waits for them): 0 or -errno. */
unsigned agg_api_streams(const struct agg *a);
int agg_api_set_streams(struct agg *a, unsigned streams);
/* Set the calling thread's agg_errmsg() and return err (< 0). */
int agg_api_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
