// SPDX-License-Identifier: GPL-2.0-only
/* Waiting for results and reading them under their sequence locks (recv.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opts.h"
#include "probe.h"
#include "quant.h"
#include "recv.h"

int agg_signal_socket(const struct agg_node *n)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_addr = n->plan.node[n->self].addr,
		.sin_port = htons(n->plan.port + 1),
	};
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -errno;
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(s);
		return err;
	}
	return s;
}

int agg_recv_wait(const struct agg_node *n, int sock, uint64_t ver, uint32_t ndata,
		  double timeout, char *why, size_t whylen)
{
	const struct agg_layout *l = &n->l;
	double deadline = agg_now() + timeout, budget = agg_probe_budget(timeout);
	uint32_t lo = l->nexp, hi = l->nexp + ndata, nexp, nd, miss;
	char probed[600] = "";
	bool asked = false;

	agg_call_segs(l, (uint64_t)ndata * l->segment, &nd, &nexp);
	while ((miss = agg_node_missing(n, lo, hi, ver))) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		double left = deadline - agg_now();
		char buf[64];

		if (left <= budget && !asked) {
			/* The first missing segment of each tree, or the
			 * exponents when even they are not all in. */
			uint32_t from = agg_node_missing(n, 0, nexp, ver) ? 0 : lo;

			agg_explain_missing(n, ver, from, hi, (int)(budget * 800),
					    probed, sizeof(probed));
			asked = true;
			continue;
		}
		if (left <= 0) {
			char ranges[512];

			agg_node_missing_ranges(n, lo, hi, ver, ranges, sizeof(ranges));
			snprintf(why, whylen, "iteration %u: %u of %u result segments missing after "
				 "%g s (wire segments %s%s)%s%s", agg_ver_iter(ver), miss, ndata,
				 timeout, ranges, agg_node_missing(n, 0, nexp, ver) ?
				 "; the exponents are missing too" : "", probed[0] ? ": " : "",
				 probed);
			return -ETIMEDOUT;
		}
		/* The signal wakes us; the map is the truth (poll it too). */
		poll(&pfd, 1, left < 0.1 ? (int)(left * 1000) + 1 : 100);
		while (recv(sock, buf, sizeof(buf), 0) > 0)
			;
	}
	return 0;
}

/* Is wire segment s version ver, not being written: its lock in *seq. */
static bool seq_take(const struct agg_node *n, uint32_t s, uint64_t ver, uint32_t *seq)
{
	*seq = agg_meta_begin(&n->meta[s]);
	return !(*seq & 1) && __atomic_load_n(&n->meta[s].ver, __ATOMIC_RELAXED) == ver;
}

int agg_result_read(const struct agg_node *n, uint64_t ver, uint32_t lo, uint32_t hi,
		    uint64_t nvalues, float *out, uint64_t *nan)
{
	const struct agg_layout *l = &n->l;
	uint64_t first = (uint64_t)lo * l->segment;

	for (uint32_t d = lo; d < hi; d++) {
		uint64_t at = (uint64_t)d * l->segment;
		size_t cnt = nvalues - at < l->segment ? nvalues - at : l->segment;
		uint32_t seg = agg_wire_seg(l, d), e = d / l->segment, sq, eq;

		if (!seq_take(n, seg, ver, &sq) || !seq_take(n, e, ver, &eq))
			return -ESTALE;
		*nan += agg_dequantize(n->results + (size_t)seg * l->segment, cnt,
				       agg_node_exponent(n, d), l->shift, n->meta[seg].op,
				       out + (at - first));
		if (!agg_meta_valid(&n->meta[seg], sq) || !agg_meta_valid(&n->meta[e], eq))
			return -ESTALE;
	}
	return 0;
}
