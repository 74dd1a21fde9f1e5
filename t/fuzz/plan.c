// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: the plan reader, and the writer on what it accepts:
 * a plan that reads must write back to text that reads to the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_plan p, q;
	struct agg_diag d;
	char *a, *b;
	FILE *f;

	if (size == 0)
		return 0;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	if (agg_plan_read(&p, f, "fuzz", &d)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	for (uint64_t s = 0; s < 3 * p.period; s++)
		if (agg_plan_seg_tree(&p, s) >= (unsigned)p.ntrees)
			abort();
	a = agg_plan_to_text(&p);
	f = fmemopen(a, strlen(a), "r");
	if (agg_plan_read(&q, f, "again", &d))
		abort();	/* what we write we must read */
	fclose(f);
	b = agg_plan_to_text(&q);
	if (strcmp(a, b))
		abort();	/* and it must be a fixed point */
	free(a);
	free(b);
	agg_plan_free(&p);
	agg_plan_free(&q);
	return 0;
}
