// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: the sparse gradient reader (binary and text), and the
 * round trip of what it accepts through both writers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_sparse g, back;
	struct agg_diag d;

	if (agg_sparse_parse(&g, data, size, "fuzz", &d))
		return 0;
	for (int text = 0; text < 2; text++) {
		char *buf;
		size_t len;

		if (agg_sparse_encode(&g, text, &buf, &len))
			abort();
		/* what was read is written and read back to the same bits */
		if (agg_sparse_parse(&back, buf, len, "fuzz", &d) || back.n != g.n ||
		    back.width != g.width || memcmp(back.id, g.id, g.n * 8))
			abort();
		for (uint64_t i = 0; i < g.n * g.width; i++)	/* NaN: any NaN */
			if (isnan(g.val[i]) ? !isnan(back.val[i]) :
			    memcmp(&back.val[i], &g.val[i], 4))
				abort();
		agg_sparse_free(&back);
		free(buf);
	}
	agg_sparse_free(&g);
	return 0;
}
