/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_GRAD_H
#define AGG_GRAD_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Gradient files: raw little-endian float32, in (agg-send) and out
 * (agg-recv), without copying 100 MB more than needed.
 */

/* An input: a regular file mapped read-only, anything else read into
 * anonymous memory (transparent huge pages where the kernel has them). */
struct agg_grad_in {
	const float *x;
	void *base;		/* the mapping */
	size_t len;
	bool mapped;		/* a file's pages, not a copy */
};

/*
 * Open path (NULL or "-": standard input) holding exactly want bytes.
 * Returns 0, or -errno with why set: -ENOENT, -EACCES and -EISDIR (cannot
 * be opened or read), -EINVAL (another length: "NAME: N bytes, the plan's
 * gradient is ..."), others for system failures.  A mapped file must keep
 * its length while it is used: a truncation raises SIGBUS.
 */
int agg_grad_in_open(struct agg_grad_in *in, const char *path, uint64_t want,
		     char *why, size_t whylen);
void agg_grad_in_close(struct agg_grad_in *in);

/*
 * An output.  A regular file (or a new one) is written to a temporary file
 * in its directory, with the mode fopen would leave (an existing file's,
 * or 0666 & ~umask), and renamed over it by agg_grad_out_commit, so that
 * readers see the old content or the whole new one and an error leaves the
 * old one.  The temporary file is unnamed (O_TMPFILE) where the file
 * system allows, so nothing is left behind even on SIGKILL; otherwise it
 * is .NAME.XXXXXX and agg_grad_out_abort (also from a signal handler:
 * async-signal-safe) removes it.  Standard output (path NULL or "-"),
 * FIFOs and devices are written directly.
 */
struct agg_grad_out {
	int fd;
	bool replace;		/* through a temporary file */
	bool is_stdout;
	bool in_place;		/* over its own pages, cut at commit */
	uint64_t written;
	const char *path;	/* as given, for messages */
	char target[PATH_MAX];	/* what is replaced: path, symlinks resolved */
	char tmp[PATH_MAX];	/* the temporary file's name while it has one */
};

/* Would path be replaced (true) or written directly? */
bool agg_grad_out_replaces(const char *path);
/* 0 or -errno with why set.  flags: AGG_GRAD_NAMED for a named temporary
 * file even where an unnamed one works (it shows while it is written);
 * AGG_GRAD_IN_PLACE to write a regular file over its own pages (no
 * temporary file, no truncation: nothing is allocated or freed when it
 * has the size already) and cut it to the length written at commit. */
#define AGG_GRAD_NAMED		1u
#define AGG_GRAD_IN_PLACE	2u
int agg_grad_out_open(struct agg_grad_out *o, const char *path, unsigned flags,
		      char *why, size_t whylen);
int agg_grad_out_write(struct agg_grad_out *o, const void *buf, size_t len,
		       char *why, size_t whylen);
/* Rename the temporary file over the target (or just close); 0 or -errno. */
int agg_grad_out_commit(struct agg_grad_out *o, char *why, size_t whylen);
/* Remove the temporary file, close; the target stays as it was. */
void agg_grad_out_abort(struct agg_grad_out *o);

#endif
