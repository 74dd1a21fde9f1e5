// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grad.h"

static bool is_stdio(const char *path)
{
	return !path || !strcmp(path, "-");
}

static int wrong_length(const char *name, uint64_t got, bool more, uint64_t want,
			char *why, size_t whylen)
{
	snprintf(why, whylen, "%s: %s%" PRIu64 " bytes, the plan's gradient is %" PRIu64
		 " bytes (%" PRIu64 " float32 values)", name, more ? "more than " : "",
		 got, want, want / 4);
	return -EINVAL;
}

/* Read everything from fd into anonymous memory: exactly want bytes. */
static int read_all(struct agg_grad_in *in, int fd, const char *name, uint64_t want,
		    char *why, size_t whylen)
{
	uint64_t got = 0;
	char extra;
	ssize_t r = 0;

	in->len = want ? want : 1;
	in->base = mmap(NULL, in->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (in->base == MAP_FAILED) {
		in->base = NULL;
		snprintf(why, whylen, "out of memory for %" PRIu64 " bytes", want);
		return -ENOMEM;
	}
	/* 2 MiB pages where the kernel has them: 512 times fewer faults. */
	madvise(in->base, in->len, MADV_HUGEPAGE);
	/* A bigger pipe, fewer wake-ups (up to pipe-max-size; may fail). */
	fcntl(fd, F_SETPIPE_SZ, 1 << 20);
	while (got < want) {
		r = read(fd, (char *)in->base + got, want - got > (1 << 30) ? 1 << 30 : want - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	if (got == want)
		while ((r = read(fd, &extra, 1)) < 0 && errno == EINTR)
			;
	if (r < 0) {
		int err = -errno;

		snprintf(why, whylen, "cannot read %s: %s", name, strerror(errno));
		return err;
	}
	if (got < want || r > 0)
		return wrong_length(name, got, got == want, want, why, whylen);
	in->x = in->base;
	return 0;
}

/* A regular file: its length first, then its pages, read-only. */
static int map_file(struct agg_grad_in *in, int fd, const struct stat *st, const char *name,
		    uint64_t want, char *why, size_t whylen)
{
	off_t off = lseek(fd, 0, SEEK_CUR);	/* standard input may be read into */
	off_t start = off > 0 ? off - off % sysconf(_SC_PAGESIZE) : 0;
	uint64_t size;

	if (off < 0)
		off = 0;
	size = st->st_size > off ? (uint64_t)(st->st_size - off) : 0;
	if (size != want)
		return wrong_length(name, size < want ? size : want, size > want, want, why, whylen);
	in->len = want + (off - start);
	in->base = mmap(NULL, in->len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, start);
	if (in->base == MAP_FAILED) {
		int err = -errno;

		in->base = NULL;
		snprintf(why, whylen, "cannot map %s: %s", name, strerror(errno));
		return err;
	}
	madvise(in->base, in->len, MADV_SEQUENTIAL);
	in->x = (const float *)((char *)in->base + (off - start));
	in->mapped = true;
	return 0;
}

int agg_grad_in_open(struct agg_grad_in *in, const char *path, uint64_t want,
		     char *why, size_t whylen)
{
	const char *name = is_stdio(path) ? "<stdin>" : path;
	int fd = STDIN_FILENO, err;
	struct stat st;

	memset(in, 0, sizeof(*in));
	if (!is_stdio(path)) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
			return err;
		}
	}
	if (fstat(fd, &st)) {
		err = -errno;
		snprintf(why, whylen, "cannot read %s: %s", name, strerror(errno));
	} else if (S_ISREG(st.st_mode) && want) {
		err = map_file(in, fd, &st, name, want, why, whylen);
	} else {
		err = read_all(in, fd, name, want, why, whylen);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (err)
		agg_grad_in_close(in);
	return err;
}

void agg_grad_in_close(struct agg_grad_in *in)
{
	if (in->base)
		munmap(in->base, in->len);
	memset(in, 0, sizeof(*in));
}

/* ---- output ------------------------------------------------------------- */

bool agg_grad_out_replaces(const char *path)
{
	struct stat st;

	if (is_stdio(path))
		return false;
	if (!stat(path, &st))
		return S_ISREG(st.st_mode);
	/* A new file, but not through a dangling symlink: that creates the
	 * link's target, as fopen would. */
	return errno == ENOENT && lstat(path, &st) && errno == ENOENT;
}

/* DIR/.BASE.XXXXXX with a random suffix, for dir and base of target. */
static void tmp_name(char *buf, size_t len, const char *target)
{
	const char *slash = strrchr(target, '/');
	unsigned rnd;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (unsigned)getpid() * 2654435761u ^ (unsigned)clock();
	if (slash)
		snprintf(buf, len, "%.*s/.%s.%06x", (int)(slash - target), target, slash + 1,
			 rnd & 0xffffff);
	else
		snprintf(buf, len, ".%s.%06x", target, rnd & 0xffffff);
}

static int open_tmp(struct agg_grad_out *o, unsigned flags, bool keep, mode_t mode,
		    char *why, size_t whylen)
{
	const char *slash = strrchr(o->target, '/');
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->target) + 1 : 1,
		 slash ? o->target : ".");
	if (flags & AGG_GRAD_NAMED)
		errno = EOPNOTSUPP;
	else
		o->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
	/* EISDIR, EOPNOTSUPP, EINVAL: no O_TMPFILE here; a named one. */
	for (int tries = 0; o->fd < 0 && errno != EACCES && errno != EROFS && errno != ENOENT &&
	     tries < 100; tries++) {
		tmp_name(o->tmp, sizeof(o->tmp), o->target);
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (o->fd < 0)
			o->tmp[0] = '\0';
		if (o->fd < 0 && errno != EEXIST)
			break;
	}
	if (o->fd < 0) {
		int err = -errno;

		snprintf(why, whylen, "cannot create a temporary file in %s for %s: %s", dir,
			 o->path, strerror(errno));
		return err;
	}
	/* The mode fopen would leave: the old file's, or 0666 & ~umask (the
	 * kernel applied the umask already). */
	if (keep && fchmod(o->fd, mode)) {
		int err = -errno;

		snprintf(why, whylen, "cannot set the mode of the temporary file for %s: %s",
			 o->path, strerror(errno));
		agg_grad_out_abort(o);
		return err;
	}
	return 0;
}

int agg_grad_out_open(struct agg_grad_out *o, const char *path, unsigned flags,
		      char *why, size_t whylen)
{
	struct stat st;
	bool keep = false;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->path = path;
	if (is_stdio(path)) {
		o->fd = STDOUT_FILENO;
		o->is_stdout = true;
		return 0;
	}
	if (!agg_grad_out_replaces(path) || (flags & AGG_GRAD_IN_PLACE)) {
		o->in_place = flags & AGG_GRAD_IN_PLACE;
		o->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (o->in_place ? 0 : O_TRUNC),
			     0666);
		if (o->fd < 0) {
			int err = -errno;

			snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
			return err;
		}
		return 0;
	}
	o->replace = true;
	if (!stat(path, &st)) {
		/* fopen writes through symlinks into the file and needs write
		 * permission on it: the same here. */
		if (!realpath(path, o->target) ||
		    faccessat(AT_FDCWD, o->target, W_OK, AT_EACCESS)) {
			int err = -errno;

			snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
			return err;
		}
		keep = true;
	} else if (snprintf(o->target, sizeof(o->target), "%s", path) >= (int)sizeof(o->target)) {
		snprintf(why, whylen, "cannot create %s: %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	return open_tmp(o, flags, keep, keep ? st.st_mode & 07777 : 0, why, whylen);
}

int agg_grad_out_write(struct agg_grad_out *o, const void *buf, size_t len,
		       char *why, size_t whylen)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(o->fd, p, len > (1 << 30) ? 1 << 30 : len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? -errno : -EIO;

			snprintf(why, whylen, "cannot write %s: %s",
				 o->is_stdout ? "standard output" : o->path, strerror(-err));
			return err;
		}
		p += w;
		len -= w;
		o->written += w;
	}
	return 0;
}

int agg_grad_out_commit(struct agg_grad_out *o, char *why, size_t whylen)
{
	int err = 0;

	if (o->is_stdout) {
		o->fd = -1;
		return 0;
	}
	if (o->in_place) {
		struct stat st;

		/* A longer file keeps no old tail; a device or FIFO has none. */
		if ((!fstat(o->fd, &st) && S_ISREG(st.st_mode) &&
		     ftruncate(o->fd, (off_t)o->written)) || close(o->fd))
			err = -errno;
		o->fd = -1;
		if (err)
			snprintf(why, whylen, "cannot write %s: %s", o->path, strerror(-err));
		return err;
	}
	if (o->replace && !o->tmp[0]) {
		/* Name the unnamed file, then rename it over the target. */
		char proc[64];

		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o->fd);
		for (int tries = 0; tries < 100; tries++) {
			tmp_name(o->tmp, sizeof(o->tmp), o->target);
			if (!linkat(AT_FDCWD, proc, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) ||
			    (errno != EEXIST &&
			     !linkat(o->fd, "", AT_FDCWD, o->tmp, AT_EMPTY_PATH)))
				break;
			err = -errno;
			o->tmp[0] = '\0';
			if (err != -EEXIST)
				break;
		}
		if (!o->tmp[0]) {
			snprintf(why, whylen, "cannot write %s: cannot name its temporary file: %s",
				 o->path, strerror(-err));
			agg_grad_out_abort(o);
			return err;
		}
	}
	if (close(o->fd) && !err)
		err = -errno;
	o->fd = -1;
	if (!err && o->replace && rename(o->tmp, o->target))
		err = -errno;
	if (err) {
		snprintf(why, whylen, "cannot write %s: %s", o->path, strerror(-err));
		agg_grad_out_abort(o);
		return err;
	}
	o->tmp[0] = '\0';
	return 0;
}

void agg_grad_out_abort(struct agg_grad_out *o)
{
	if (o->fd >= 0 && !o->is_stdout)
		close(o->fd);
	o->fd = -1;
	if (o->tmp[0])
		unlink(o->tmp);
	o->tmp[0] = '\0';
}
