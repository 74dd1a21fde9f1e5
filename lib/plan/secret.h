/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef AGG_SECRET_H
#define AGG_SECRET_H

#include <stdint.h>

#include "hosts.h"	/* struct agg_diag */
#include "siphash.h"

/*
 * The site secret that default job tokens are derived from (agg-plan(1),
 * Token): a file of at least AGG_SECRET_MIN bytes that only its owner may
 * access, the same on every host that makes plans.
 */
#ifndef AGG_SECRET_FILE
#define AGG_SECRET_FILE	"/etc/agg/secret"
#endif
#define AGG_SECRET_ENV	"AGG_SECRET_FILE"
#define AGG_SECRET_MIN	16

enum agg_secret_from {
	AGG_SECRET_FROM_OPTION,		/* the path given (--secret) */
	AGG_SECRET_FROM_ENV,		/* $AGG_SECRET_FILE */
	AGG_SECRET_FROM_DEFAULT,	/* AGG_SECRET_FILE, set at build time */
};

/* The secret's path: path if not NULL, else $AGG_SECRET_FILE if set and
 * not empty, else the default; *from (if not NULL) says which. */
const char *agg_secret_path(const char *path, enum agg_secret_from *from);

/*
 * Read the secret file at path and derive the 128-bit key from its whole
 * content S, with SipHash-2-4 under the fixed key K = the 16 ASCII bytes
 * "agg.secret.key.1":
 *
 *	k0 = SipHash-2-4(K, 0x00 || S), k1 = SipHash-2-4(K, 0x01 || S),
 *	key = k0 then k1, each as 8 little-endian bytes.
 *
 * Returns 0, or -errno with d->msg (d may be NULL) saying what is wrong,
 * naming the file:
 * -ENOENT, -EACCES and the like (cannot open), -EISDIR, -EPERM (group or
 * others have any access to it, as ssh refuses private keys), -EINVAL
 * (fewer than AGG_SECRET_MIN bytes), or another -errno (reading failed).
 */
int agg_secret_key(const char *path, uint8_t key[AGG_SIPHASH_KEY_SIZE],
		   struct agg_diag *d);

#endif
