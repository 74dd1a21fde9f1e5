/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_HOSTS_H
#define AGG_HOSTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "text.h"	/* struct agg_diag */

#define AGG_NAME_MAX 32		/* node, rack, pod and device names */

enum agg_role {
	AGG_ROLE_WORKER = 0,
	AGG_ROLE_PS = 1,
};

struct agg_host {
	char name[AGG_NAME_MAX];
	struct in_addr addr;
	double bw;		/* Gbit/s available */
	double cpu;		/* cores available for aggregation; 0: unlimited */
	enum agg_role role;
	char rack[AGG_NAME_MAX];	/* "" when not given */
	char pod[AGG_NAME_MAX];
	char dev[AGG_NAME_MAX];
	uint8_t mac[6];
	bool has_mac;
	int line;		/* where it was defined */
};

struct agg_link {
	int a, b;		/* host indices */
};

struct agg_hosts {
	struct agg_host *host;
	int n;
	struct agg_link *link;
	int nlinks;
	char *fname;		/* the file read, for diagnostics */
	int end_line;		/* the line after its last one */
};

/* Parse a hosts file (man 5 agg-hosts).  Returns 0 or -EINVAL (d filled). */
int agg_hosts_read(struct agg_hosts *h, FILE *f, const char *fname,
		   struct agg_diag *d);
void agg_hosts_free(struct agg_hosts *h);
/*
 * What a scheme needs of the hosts beyond a valid file: a parameter server
 * (need_ps: aleph and ps), and workers.  0, or -EINVAL with d filled,
 * located after the file's last line.
 */
int agg_hosts_check_scheme(const struct agg_hosts *h, bool need_ps, struct agg_diag *d);
int agg_hosts_find(const struct agg_hosts *h, const char *name);
int agg_hosts_count_role(const struct agg_hosts *h, enum agg_role role);

/*
 * Parse one "key=value" host attribute into hst.  Shared by the hosts and
 * plan parsers.  Returns 0, or -EINVAL with *why set and *col_off the offset
 * within kv of the bad part.
 */
int agg_host_set_attr(struct agg_host *hst, const char *kv, const char **why,
		      int *col_off);
struct agg_text_line;
/* Parse "NAME ADDR key=value..." starting at word first of a line. */
int agg_host_parse(const struct agg_text_line *ln, int first,
		   struct agg_host *out, const char *fname, struct agg_diag *d);
/*
 * Names and addresses of the hosts read so far, hashed: a file of n hosts
 * is checked for duplicates in O(n), not O(n^2).  Zero-initialise; the
 * index refers to hosts by position in the caller's array.
 */
struct agg_host_index {
	int cap;		/* slots, a power of two, or 0 */
	int n;			/* hosts added */
	int *name, *addr;	/* host position + 1; 0: empty slot */
};
/*
 * -EINVAL (d filled) if hst's name or address is already one of
 * hosts[0..x->n), reporting the first such host as a linear scan would.
 */
int agg_host_check_dup(const struct agg_host_index *x, const struct agg_host *hosts,
		       const struct agg_host *hst, const struct agg_text_line *ln,
		       int first, const char *fname, struct agg_diag *d);
/* Add hosts[x->n] (hosts holds x->n + 1 entries); 0 or -ENOMEM. */
int agg_host_index_add(struct agg_host_index *x, const struct agg_host *hosts);
void agg_host_index_free(struct agg_host_index *x);
/* Write hst's attributes as " key=value..." (the form both parsers read). */
void agg_host_write_attrs(const struct agg_host *hst, FILE *f);
/* Parse a node name: [A-Za-z0-9_.-], 1..AGG_NAME_MAX-1 characters. */
bool agg_name_valid(const char *s);

#endif
