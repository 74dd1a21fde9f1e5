// SPDX-License-Identifier: GPL-2.0-only
/* The site secret default job tokens are derived from. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secret.h"

const char *agg_secret_path(const char *path, enum agg_secret_from *from)
{
	const char *env = getenv(AGG_SECRET_ENV);
	enum agg_secret_from f = AGG_SECRET_FROM_OPTION;

	if (!path && env && *env) {
		path = env;
		f = AGG_SECRET_FROM_ENV;
	} else if (!path) {
		path = AGG_SECRET_FILE;
		f = AGG_SECRET_FROM_DEFAULT;
	}
	if (from)
		*from = f;
	return path;
}

static int __attribute__((format(printf, 3, 4)))
fail(struct agg_diag *d, int err, const char *fmt, ...)
{
	va_list ap;

	if (!d)
		return err;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return err;
}

int agg_secret_key(const char *path, uint8_t key[AGG_SIPHASH_KEY_SIZE],
		   struct agg_diag *d)
{
	static const char kdf_key[] = "agg.secret.key.1";
	struct agg_siphash h[2];
	uint8_t buf[4096];
	uint64_t len = 0;
	struct stat st;
	ssize_t n;
	int fd, err = 0;

	_Static_assert(sizeof(kdf_key) - 1 == AGG_SIPHASH_KEY_SIZE, "KDF key size");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(d, -errno, "cannot open secret %s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		err = fail(d, -errno, "cannot read secret %s: %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		err = fail(d, -EISDIR, "secret %s is a directory", path);
		goto out;
	}
	/* Fixed when opened: what we read is what was checked. */
	if (st.st_mode & 077) {
		err = fail(d, -EPERM, "secret %s is open to group or others "
			   "(mode %04o): chmod 600 %s", path,
			   (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		uint8_t domain = i;

		agg_siphash_init(&h[i], (const uint8_t *)kdf_key);
		agg_siphash_update(&h[i], &domain, 1);
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = fail(d, -errno, "cannot read secret %s: %s", path,
				   strerror(errno));
			goto out;
		}
		agg_siphash_update(&h[0], buf, n);
		agg_siphash_update(&h[1], buf, n);
		len += n;
	}
	if (len < AGG_SECRET_MIN) {
		err = fail(d, -EINVAL, "secret %s has %llu bytes, fewer than %d: "
			   "fill it with 'head -c 32 /dev/urandom >%s'", path,
			   (unsigned long long)len, AGG_SECRET_MIN, path);
		goto out;
	}
	agg_siphash_key(key, agg_siphash_final(&h[0]), agg_siphash_final(&h[1]));
out:
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(h, sizeof(h));
	close(fd);
	return err;
}
