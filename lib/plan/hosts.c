// SPDX-License-Identifier: GPL-2.0-only
/* The hosts file (man 5 agg-hosts): one host per line, "link A B" lines. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"
#include "opts.h"
#include "text.h"

bool agg_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= AGG_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return false;
	return true;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];
	char tail;

	if (strlen(s) != 17 ||
	    sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
		   &b[4], &b[5], &tail) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		if (!isxdigit((unsigned char)s[3 * i]) ||
		    !isxdigit((unsigned char)s[3 * i + 1]))
			return -EINVAL;
		mac[i] = b[i];
	}
	return 0;
}

static int set_positive(double *dst, const char *v, const char **why, int *col)
{
	double x;

	if (agg_parse_double(v, &x, col)) {
		*why = "not a decimal number";
		return -EINVAL;
	}
	if (x <= 0) {
		*col = 0;
		*why = "must be positive";
		return -EINVAL;
	}
	*dst = x;
	return 0;
}

static int set_name(char *dst, size_t max, const char *v, const char **why)
{
	if (!agg_name_valid(v) || strlen(v) >= max) {
		*why = "not a valid name (letters, digits, '_', '.', '-')";
		return -EINVAL;
	}
	strcpy(dst, v);
	return 0;
}

int agg_host_set_attr(struct agg_host *hst, const char *kv, const char **why,
		      int *col_off)
{
	const char *eq = strchr(kv, '=');
	size_t klen;
	const char *v;
	int col = 0, err;

	*col_off = 0;
	if (!eq || eq == kv) {
		*why = "expected key=value";
		return -EINVAL;
	}
	klen = eq - kv;
	v = eq + 1;
#define KEY(k) (klen == strlen(k) && !strncmp(kv, k, klen))
	if (KEY("bw")) {
		err = set_positive(&hst->bw, v, why, &col);
	} else if (KEY("cpu")) {
		err = set_positive(&hst->cpu, v, why, &col);
	} else if (KEY("role")) {
		err = 0;
		if (!strcmp(v, "ps"))
			hst->role = AGG_ROLE_PS;
		else if (!strcmp(v, "worker"))
			hst->role = AGG_ROLE_WORKER;
		else {
			*why = "role must be 'ps' or 'worker'";
			err = -EINVAL;
		}
	} else if (KEY("rack")) {
		err = set_name(hst->rack, sizeof(hst->rack), v, why);
	} else if (KEY("pod")) {
		err = set_name(hst->pod, sizeof(hst->pod), v, why);
	} else if (KEY("dev")) {
		err = set_name(hst->dev, 16, v, why);	/* IFNAMSIZ */
	} else if (KEY("mac")) {
		err = parse_mac(v, hst->mac);
		if (err)
			*why = "mac must be six hex bytes, aa:bb:cc:dd:ee:ff";
		hst->has_mac = !err;
	} else {
		*why = "unknown attribute";
		return -EINVAL;
	}
#undef KEY
	if (err)
		*col_off = (int)(v - kv) + col;
	return err;
}

int agg_hosts_find(const struct agg_hosts *h, const char *name)
{
	for (int i = 0; i < h->n; i++)
		if (!strcmp(h->host[i].name, name))
			return i;
	return -1;
}

int agg_hosts_count_role(const struct agg_hosts *h, enum agg_role role)
{
	int n = 0;

	for (int i = 0; i < h->n; i++)
		n += h->host[i].role == role;
	return n;
}

void agg_hosts_free(struct agg_hosts *h)
{
	free(h->host);
	free(h->link);
	free(h->fname);
	memset(h, 0, sizeof(*h));
}

static bool addr_usable(struct in_addr a)
{
	uint32_t x = ntohl(a.s_addr);

	return x != 0 && x != 0xffffffff && (x >> 24) != 127 &&
	       (x >> 28) != 0xe;
}

/* Pending link line: resolved once every host is known. */
struct pending_link {
	char a[AGG_NAME_MAX], b[AGG_NAME_MAX];
	int line, col_a, col_b;
};

int agg_host_parse(const struct agg_text_line *ln, int first,
		   struct agg_host *out, const char *fname, struct agg_diag *d)
{
	struct agg_host hst = { .line = ln->lineno };
	const struct agg_text_tok *tok = ln->tok + first;
	int ntok = ln->ntok - first;
	char seen[8][8] = { 0 };
	int nseen = 0;

	if (!agg_name_valid(tok[0].s)) {
		agg_diag_set(d, fname, ln->lineno, tok[0].col,
			     "bad host name '%s' (letters, digits, '_', '.', '-'; at most %d)",
			     tok[0].s, AGG_NAME_MAX - 1);
		return -EINVAL;
	}
	strcpy(hst.name, tok[0].s);
	if (ntok < 2) {
		agg_diag_set(d, fname, ln->lineno, ln->end_col,
			     "missing address after '%s'", hst.name);
		return -EINVAL;
	}
	if (inet_pton(AF_INET, tok[1].s, &hst.addr) != 1) {
		agg_diag_set(d, fname, ln->lineno, tok[1].col,
			     "bad IPv4 address '%s'", tok[1].s);
		return -EINVAL;
	}
	if (!addr_usable(hst.addr)) {
		agg_diag_set(d, fname, ln->lineno, tok[1].col,
			     "address '%s' is not a unicast host address",
			     tok[1].s);
		return -EINVAL;
	}
	for (int t = 2; t < ntok; t++) {
		const char *kv = tok[t].s, *why = NULL;
		size_t klen = strcspn(kv, "=");
		int off;

		for (int s = 0; s < nseen; s++) {
			if (klen < sizeof(seen[s]) && !strncmp(seen[s], kv, klen) &&
			    seen[s][klen] == '\0') {
				agg_diag_set(d, fname, ln->lineno, tok[t].col,
					     "attribute '%.*s' given twice",
					     (int)klen, kv);
				return -EINVAL;
			}
		}
		if (agg_host_set_attr(&hst, kv, &why, &off)) {
			agg_diag_set(d, fname, ln->lineno, tok[t].col + off,
				     "%s in '%s'", why, kv);
			return -EINVAL;
		}
		if (nseen < 8 && klen < sizeof(seen[0]))
			memcpy(seen[nseen++], kv, klen);
	}
	if (hst.bw <= 0) {
		agg_diag_set(d, fname, ln->lineno, ln->end_col,
			     "host '%s' has no bw= (available Gbit/s)", hst.name);
		return -EINVAL;
	}
	*out = hst;
	return 0;
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static uint32_t addr_hash(struct in_addr a)
{
	/* murmur3's finaliser: the table uses the low bits, s_addr's low
	 * byte is the first octet, the same for a whole cluster. */
	uint32_t h = a.s_addr;

	h = (h ^ (h >> 16)) * 0x85ebca6bu;
	h = (h ^ (h >> 13)) * 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* Position of the host named name (or with address addr when !name), or -1. */
static int index_find(const struct agg_host_index *x, const struct agg_host *hosts,
		      const char *name, struct in_addr addr)
{
	const int *tab = name ? x->name : x->addr;
	uint32_t mask = x->cap - 1, k;

	if (!x->cap)
		return -1;
	for (k = (name ? name_hash(name) : addr_hash(addr)) & mask; tab[k];
	     k = (k + 1) & mask) {
		const struct agg_host *o = &hosts[tab[k] - 1];

		if (name ? !strcmp(o->name, name) : o->addr.s_addr == addr.s_addr)
			return tab[k] - 1;
	}
	return -1;
}

/* Insert hosts[i] unless its name (address) is there already: first wins. */
static void index_put(struct agg_host_index *x, const struct agg_host *hosts, int i)
{
	uint32_t mask = x->cap - 1, k;

	if (index_find(x, hosts, hosts[i].name, hosts[i].addr) < 0) {
		for (k = name_hash(hosts[i].name) & mask; x->name[k]; k = (k + 1) & mask)
			;
		x->name[k] = i + 1;
	}
	if (index_find(x, hosts, NULL, hosts[i].addr) < 0) {
		for (k = addr_hash(hosts[i].addr) & mask; x->addr[k]; k = (k + 1) & mask)
			;
		x->addr[k] = i + 1;
	}
}

int agg_host_index_add(struct agg_host_index *x, const struct agg_host *hosts)
{
	if (2 * (x->n + 1) > x->cap) {
		struct agg_host_index y = { .cap = x->cap ? 2 * x->cap : 64 };

		y.name = calloc(y.cap, sizeof(int));
		y.addr = calloc(y.cap, sizeof(int));
		if (!y.name || !y.addr) {
			agg_host_index_free(&y);
			return -ENOMEM;
		}
		for (int i = 0; i < x->n; i++)
			index_put(&y, hosts, i);
		y.n = x->n;
		agg_host_index_free(x);
		*x = y;
	}
	index_put(x, hosts, x->n++);
	return 0;
}

void agg_host_index_free(struct agg_host_index *x)
{
	free(x->name);
	free(x->addr);
	memset(x, 0, sizeof(*x));
}

int agg_host_check_dup(const struct agg_host_index *x, const struct agg_host *hosts,
		       const struct agg_host *hst, const struct agg_text_line *ln,
		       int first, const char *fname, struct agg_diag *d)
{
	int in = index_find(x, hosts, hst->name, hst->addr);
	int ia = index_find(x, hosts, NULL, hst->addr);

	/* A scan stops at the first host matching either, the name first. */
	if (in >= 0 && (ia < 0 || in <= ia)) {
		agg_diag_set(d, fname, ln->lineno, ln->tok[first].col,
			     "duplicate host name '%s' (first on line %d)",
			     hst->name, hosts[in].line);
		return -EINVAL;
	}
	if (ia >= 0) {
		agg_diag_set(d, fname, ln->lineno, ln->tok[first + 1].col,
			     "duplicate address %s (first on line %d, host '%s')",
			     ln->tok[first + 1].s, hosts[ia].line, hosts[ia].name);
		return -EINVAL;
	}
	return 0;
}

static int parse_host_line(struct agg_hosts *h, struct agg_host_index *x,
			   struct agg_text_line *ln, const char *fname,
			   struct agg_diag *d)
{
	struct agg_host hst;
	int err;

	err = agg_host_parse(ln, 0, &hst, fname, d);
	if (!err)
		err = agg_host_check_dup(x, h->host, &hst, ln, 0, fname, d);
	if (err)
		return err;
	if (agg_grow((void **)&h->host, h->n + 1, sizeof(*h->host)))
		return -ENOMEM;
	h->host[h->n] = hst;
	if (agg_host_index_add(x, h->host))
		return -ENOMEM;
	h->n++;
	return 0;
}

int agg_hosts_read(struct agg_hosts *h, FILE *f, const char *fname,
		   struct agg_diag *d)
{
	struct agg_text tx;
	struct agg_text_line ln;
	struct pending_link *pl = NULL;
	struct agg_host_index hx = { 0 };
	int npl = 0, err = 0, r;

	memset(h, 0, sizeof(*h));
	agg_text_init(&tx, f);
	while ((r = agg_text_next(&tx, &ln)) > 0) {
		if (ln.ntok == 0)
			continue;
		if (!strcmp(ln.tok[0].s, "link")) {
			if (ln.ntok != 3) {
				agg_diag_set(d, fname, ln.lineno,
					     ln.ntok > 3 ? ln.tok[3].col : ln.end_col,
					     "expected 'link NAME NAME'");
				err = -EINVAL;
				break;
			}
			for (int k = 1; k <= 2; k++) {
				if (strlen(ln.tok[k].s) >= AGG_NAME_MAX) {
					agg_diag_set(d, fname, ln.lineno, ln.tok[k].col,
						     "unknown host '%s' in link", ln.tok[k].s);
					err = -EINVAL;
				}
			}
			if (err)
				break;
			if (agg_grow((void **)&pl, npl + 1, sizeof(*pl))) {
				err = -ENOMEM;
				break;
			}
			snprintf(pl[npl].a, AGG_NAME_MAX, "%s", ln.tok[1].s);
			snprintf(pl[npl].b, AGG_NAME_MAX, "%s", ln.tok[2].s);
			pl[npl].line = ln.lineno;
			pl[npl].col_a = ln.tok[1].col;
			pl[npl].col_b = ln.tok[2].col;
			npl++;
			continue;
		}
		err = parse_host_line(h, &hx, &ln, fname, d);
		if (err)
			break;
	}
	if (r < 0 && !err) {
		/* A line too long is bad input; a read error is not. */
		err = r == -E2BIG ? -EINVAL : r;
		agg_diag_set(d, fname, tx.lineno, 1, "%s", r == -E2BIG ?
			     "line too long (more than 65536 bytes)" : strerror(-r));
	}
	for (int i = 0; !err && i < npl; i++) {
		int a = agg_hosts_find(h, pl[i].a), b = agg_hosts_find(h, pl[i].b);
		int bad = a < 0 ? pl[i].col_a : b < 0 ? pl[i].col_b : 0;

		if (bad) {
			agg_diag_set(d, fname, pl[i].line, bad,
				     "unknown host '%s' in link",
				     a < 0 ? pl[i].a : pl[i].b);
			err = -EINVAL;
		} else if (h->host[a].role != AGG_ROLE_WORKER ||
			   h->host[b].role != AGG_ROLE_WORKER) {
			agg_diag_set(d, fname, pl[i].line,
				     h->host[a].role ? pl[i].col_a : pl[i].col_b,
				     "links join workers; '%s' is a parameter server",
				     h->host[a].role ? pl[i].a : pl[i].b);
			err = -EINVAL;
		} else if (a == b) {
			agg_diag_set(d, fname, pl[i].line, pl[i].col_b,
				     "link from '%s' to itself", pl[i].a);
			err = -EINVAL;
		} else if (!agg_grow((void **)&h->link, h->nlinks + 1,
				     sizeof(*h->link))) {
			h->link[h->nlinks++] = (struct agg_link){ a, b };
		} else {
			err = -ENOMEM;
		}
	}
	free(pl);
	agg_host_index_free(&hx);
	/* Whether a parameter server is needed is the scheme's to say
	 * (agg_hosts_check_scheme); without one, so is "no workers". */
	h->end_line = tx.lineno + 1;
	if (!err && !(h->fname = strdup(fname)))
		err = -ENOMEM;
	if (!err && agg_hosts_count_role(h, AGG_ROLE_PS) &&
	    agg_hosts_count_role(h, AGG_ROLE_WORKER) == 0) {
		agg_diag_set(d, fname, tx.lineno + 1, 1, "no workers");
		err = -EINVAL;
	}
	agg_text_free(&tx);
	if (err == -ENOMEM)
		agg_diag_set(d, fname, tx.lineno, 1, "out of memory");
	if (err)
		agg_hosts_free(h);
	return err;
}

int agg_hosts_check_scheme(const struct agg_hosts *h, bool need_ps, struct agg_diag *d)
{
	const char *fname = h->fname ? h->fname : "<hosts>";

	if (agg_hosts_count_role(h, AGG_ROLE_PS))
		return 0;
	if (need_ps)
		agg_diag_set(d, fname, h->end_line, 1,
			     "no parameter server: mark one host role=ps");
	else if (agg_hosts_count_role(h, AGG_ROLE_WORKER) == 0)
		agg_diag_set(d, fname, h->end_line, 1, "no workers");
	else
		return 0;
	return -EINVAL;
}

void agg_host_write_attrs(const struct agg_host *hst, FILE *f)
{
	fprintf(f, " bw=%.15g", hst->bw);
	if (hst->cpu > 0)
		fprintf(f, " cpu=%.15g", hst->cpu);
	if (hst->role == AGG_ROLE_PS)
		fputs(" role=ps", f);
	if (hst->rack[0])
		fprintf(f, " rack=%s", hst->rack);
	if (hst->pod[0])
		fprintf(f, " pod=%s", hst->pod);
	if (hst->dev[0])
		fprintf(f, " dev=%s", hst->dev);
	if (hst->has_mac)
		fprintf(f, " mac=%02x:%02x:%02x:%02x:%02x:%02x", hst->mac[0],
			hst->mac[1], hst->mac[2], hst->mac[3], hst->mac[4],
			hst->mac[5]);
}
