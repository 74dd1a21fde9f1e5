// SPDX-License-Identifier: GPL-2.0-only
/*
 * napitool IFNAME: the NAPI instances of an interface of this network
 * namespace, one "ID PID" line each (PID 0: not threaded), from the
 * kernel's netdev generic netlink family (NETDEV_CMD_NAPI_GET).  The
 * test suite and the benchmarks find a host's receive threads with it:
 * their names (napi/eth0-ID) do not say which namespace's eth0 they serve.
 * Exit status 0, 2 bad usage or no such interface, 3 system failure.
 */
#include <errno.h>
#include <stdbool.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* include/uapi/linux/netdev.h, which this libc's headers do not have */
#define NETDEV_FAMILY_NAME	"netdev"
#define NETDEV_CMD_NAPI_GET	11
#define NETDEV_A_NAPI_IFINDEX	1
#define NETDEV_A_NAPI_ID	2
#define NETDEV_A_NAPI_PID	4

struct req {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[256];
};

static void put_attr(struct req *r, int type, const void *data, int len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->n.nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->n.nlmsg_len = NLMSG_ALIGN(r->n.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* Call f on each attribute of the generic netlink message m. */
static void each_attr(struct nlmsghdr *m, void (*f)(struct nlattr *, void *), void *ctx)
{
	struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(m) + GENL_HDRLEN);
	int left = (int)m->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;

	while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
		f(a, ctx);
		left -= NLA_ALIGN(a->nla_len);
		a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len));
	}
}

static void family_id(struct nlattr *a, void *ctx)
{
	if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
		*(int *)ctx = *(unsigned short *)((char *)a + NLA_HDRLEN);
}

struct napi {
	unsigned id, pid, ifindex;
};

static void napi_attr(struct nlattr *a, void *ctx)
{
	struct napi *n = ctx;
	unsigned v;

	if (a->nla_len < NLA_HDRLEN + 4)
		return;
	memcpy(&v, (char *)a + NLA_HDRLEN, 4);
	switch (a->nla_type & NLA_TYPE_MASK) {
	case NETDEV_A_NAPI_ID: n->id = v; break;
	case NETDEV_A_NAPI_PID: n->pid = v; break;
	case NETDEV_A_NAPI_IFINDEX: n->ifindex = v; break;
	}
}

/* Send r, then read replies until the dump or the answer ends, calling
 * f on each message: 0 or -errno. */
static int talk(int fd, struct req *r, void (*f)(struct nlmsghdr *, void *), void *ctx)
{
	static char buf[65536];
	bool done = false;

	if (send(fd, r, r->n.nlmsg_len, 0) < 0)
		return -errno;
	while (!done) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *m = (struct nlmsghdr *)buf;

		if (len < 0)
			return -errno;
		for (; NLMSG_OK(m, len); m = NLMSG_NEXT(m, len)) {
			if (m->nlmsg_type == NLMSG_DONE)
				return 0;
			if (m->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(m);

				if (e->error)
					return e->error;
				done = true;
				continue;
			}
			f(m, ctx);
			if (!(m->nlmsg_flags & NLM_F_MULTI))
				done = true;
		}
	}
	return 0;
}

static void on_family(struct nlmsghdr *m, void *ctx)
{
	each_attr(m, family_id, ctx);
}

static void on_napi(struct nlmsghdr *m, void *ctx)
{
	struct napi n = { 0 };

	each_attr(m, napi_attr, &n);
	if (n.ifindex == *(unsigned *)ctx && n.id)
		printf("%u %u\n", n.id, n.pid);
}

int main(int argc, char **argv)
{
	struct req r;
	unsigned ifindex;
	int fd, fam = -1, err;

	if (argc != 2) {
		fprintf(stderr, "usage: napitool IFNAME\n");
		return 2;
	}
	ifindex = if_nametoindex(argv[1]);
	if (!ifindex) {
		fprintf(stderr, "napitool: no interface %s here\n", argv[1]);
		return 2;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0) {
		perror("napitool: netlink");
		return 3;
	}
	memset(&r, 0, sizeof(r));
	r.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.n.nlmsg_type = GENL_ID_CTRL;
	r.n.nlmsg_flags = NLM_F_REQUEST;
	r.g.cmd = CTRL_CMD_GETFAMILY;
	r.g.version = 1;
	put_attr(&r, CTRL_ATTR_FAMILY_NAME, NETDEV_FAMILY_NAME, sizeof(NETDEV_FAMILY_NAME));
	err = talk(fd, &r, on_family, &fam);
	if (err || fam < 0) {
		fprintf(stderr, "napitool: no netdev netlink family: %s\n", strerror(err ? -err : ENOENT));
		return 3;
	}
	memset(&r, 0, sizeof(r));
	r.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.n.nlmsg_type = fam;
	r.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	r.g.cmd = NETDEV_CMD_NAPI_GET;
	r.g.version = 1;
	put_attr(&r, NETDEV_A_NAPI_IFINDEX, &ifindex, 4);
	err = talk(fd, &r, on_napi, &ifindex);
	close(fd);
	if (err) {
		fprintf(stderr, "napitool: cannot list the NAPI instances of %s: %s\n", argv[1],
			strerror(-err));
		return 3;
	}
	return fflush(stdout) ? 3 : 0;
}
