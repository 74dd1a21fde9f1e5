/* SPDX-License-Identifier: GPL-2.0-only */
/* The loss injector's log and counters (bpf/loss.bpf.c), read by losstool. */
#ifndef AGG_BPF_LOSS_H
#define AGG_BPF_LOSS_H

#include <linux/types.h>

enum { LOSS_IN, LOSS_OUT };		/* from the host, to the host */

/* One dropped packet. */
struct loss_rec {
	__u64 ns;			/* bpf_ktime_get_ns */
	__u32 iter;
	__u32 seg;
	__u32 saddr;			/* network order */
	__u32 daddr;
	__u32 ifindex;			/* the port it was dropped on */
	__u16 from;
	__u16 attempt;
	__u8 type;
	__u8 dir;			/* LOSS_IN or LOSS_OUT */
	__u8 rsvd[6];
};

#define LOSS_LOG_CAP	(1 << 20)

/* Per-CPU counters ("loss_count"). */
enum {
	LOSS_SEEN_IN, LOSS_DROP_IN, LOSS_SEEN_OUT, LOSS_DROP_OUT,
	LOSS_OVERFLOW,			/* drops the full log did not record */
	LOSS_NCOUNT,
};

#endif
