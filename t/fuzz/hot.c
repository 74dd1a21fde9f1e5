// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: agg-hot's update-log (text and binary) and table readers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_hot_table t;
	struct agg_diag d;
	uint64_t *ids = NULL, iter;
	size_t n, cap = 0;
	FILE *f;

	if (size == 0)
		return 0;
	for (int binary = 0; binary < 2; binary++) {
		struct agg_hot_log l;

		f = fmemopen((void *)data, size, "r");
		agg_hot_log_open(&l, f, "fuzz", binary);
		while (agg_hot_log_next(&l, &ids, &n, &cap, &iter, &d) > 0)
			;
		agg_hot_log_close(&l);
		fclose(f);
	}
	free(ids);
	f = fmemopen((void *)data, size, "r");
	if (agg_hot_table_read(&t, f, "fuzz", &d) == 0) {
		if (agg_hot_precision(&t, &t) != (t.k ? 1.0 : 0.0) ||
		    agg_hot_kendall(&t, &t, NULL) != 0)
			abort();	/* a table agrees with itself */
		agg_hot_table_free(&t);
	}
	fclose(f);
	return 0;
}
