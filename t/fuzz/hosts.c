// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: the hosts parser (make fuzz). */
#include <stdint.h>
#include <stdio.h>

#include "hosts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_hosts h;
	struct agg_diag d;
	FILE *f;

	if (size == 0)
		return 0;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	if (agg_hosts_read(&h, f, "fuzz", &d) == 0)
		agg_hosts_free(&h);
	fclose(f);
	return 0;
}
