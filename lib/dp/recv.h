/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_RECV_H
#define AGG_RECV_H

#include <stddef.h>
#include <stdint.h>

#include "dp.h"

/*
 * The receiving side (agg-recv(1), the library's allreduce): waiting for
 * an iteration's results on a node and turning them back into float32.
 */

/* A UDP socket on the node's fetch signal port (plan port + 1), bound
 * before the results are looked at, so no signal falls in between: fd or
 * -errno (-EADDRINUSE: another receiver of this node listens). */
int agg_signal_socket(const struct agg_node *n);

/*
 * Wait until the first ndata data segments of version ver are on the node,
 * woken by the fetch signal on sock (or every 100 ms), for up to timeout
 * seconds.  0, or -ETIMEDOUT with why naming the missing segments and,
 * from probes of the tree, who holds them up.
 */
int agg_recv_wait(const struct agg_node *n, int sock, uint64_t ver, uint32_t ndata,
		  double timeout, char *why, size_t whylen);

/*
 * Dequantize data segments [lo, hi) of version ver into out (value 0 of
 * out is value lo x segment of the gradient; nvalues: the call's length,
 * which cuts the last segment).  Every segment and its exponent are read
 * under their sequence locks (agg.h, "meta"), so a segment being rewritten
 * or holding another version is never returned: -ESTALE then (a newer
 * iteration overwrote it, or it is not in).  Adds the NaN written to *nan.
 * The node's results must be mapped (agg_node_map_results).
 */
int agg_result_read(const struct agg_node *n, uint64_t ver, uint32_t lo, uint32_t hi,
		    uint64_t nvalues, float *out, uint64_t *nan);

#endif
