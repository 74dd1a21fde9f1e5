// SPDX-License-Identifier: GPL-2.0-only
/* Unit tests of lib/ops/grad.c: gradient files in and out. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grad.h"
#include "tap.h"

#define N	(3 * 4096 + 5)	/* float32 values: not a whole number of pages */

static char dir[64], why[PATH_MAX + 200];
static float data[N + 2048];

static void put(const char *name, const void *buf, size_t len)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd)) {
		perror(name);
		exit(1);
	}
}

static bool same(const char *name, const void *buf, size_t len)
{
	static char got[sizeof(data) + 1];
	int fd = open(name, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, got, sizeof(got));

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)len && !memcmp(got, buf, len);
}

/* The names in dir, space-separated, sorted by readdir order (few). */
static const char *names(void)
{
	static char buf[1024];
	struct dirent *e;
	DIR *d = opendir(dir);

	buf[0] = '\0';
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			strcat(buf, buf[0] ? " " : "");
			strncat(buf, e->d_name, sizeof(buf) - strlen(buf) - 2);
		}
	if (d)
		closedir(d);
	return buf;
}

static int count_names(void)
{
	const char *s = names();
	int n = *s != '\0';

	for (; *s; s++)
		n += *s == ' ';
	return n;
}

static mode_t mode_of(const char *name)
{
	struct stat st;

	return stat(name, &st) ? (mode_t)-1 : st.st_mode & 07777;
}

/* Feed the bytes to a pipe on standard input from a child. */
static pid_t stdin_pipe(const void *buf, size_t len)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		exit(1);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		_exit(write(p[1], buf, len) != (ssize_t)len);
	}
	close(p[1]);
	dup2(p[0], STDIN_FILENO);
	close(p[0]);
	return pid;
}

static void test_input(void)
{
	struct agg_grad_in in;
	char path[128], off[128];
	int fd, err;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/g", dir);
	put(path, data, N * 4);
	err = agg_grad_in_open(&in, path, N * 4, why, sizeof(why));
	ok(!err && in.mapped && !memcmp(in.x, data, N * 4), "a regular file is mapped, read-only");
	agg_grad_in_close(&in);

	err = agg_grad_in_open(&in, path, N * 4 + 4, why, sizeof(why));
	ok(err == -EINVAL && strstr(why, "/g: 49172 bytes, the plan's gradient is 49176 bytes"),
	   "a short file: %s", why);
	err = agg_grad_in_open(&in, path, N * 4 - 4, why, sizeof(why));
	ok(err == -EINVAL && strstr(why, "/g: more than 49168 bytes, the plan's gradient is 49168"),
	   "a long file: %s", why);
	err = agg_grad_in_open(&in, dir, 8, why, sizeof(why));
	ok(err == -EISDIR && strstr(why, "cannot read"), "a directory: %s", why);
	snprintf(off, sizeof(off), "%s/none", dir);
	err = agg_grad_in_open(&in, off, 8, why, sizeof(why));
	ok(err == -ENOENT && strstr(why, "cannot open"), "no such file: %s", why);

	/* Standard input: a file at an offset that is not a page's. */
	snprintf(off, sizeof(off), "%s/off", dir);
	put(off, data, (N + 1027) * 4 + 3);
	fd = open(off, O_RDONLY);
	lseek(fd, 1027 * 4 + 3, SEEK_SET);
	dup2(fd, STDIN_FILENO);
	close(fd);
	err = agg_grad_in_open(&in, "-", N * 4, why, sizeof(why));
	ok(!err && in.mapped && !memcmp(in.x, (char *)data + 1027 * 4 + 3, N * 4),
	   "standard input from a file, at byte 4111: mapped from there");
	agg_grad_in_close(&in);

	pid = stdin_pipe(data, N * 4);
	err = agg_grad_in_open(&in, NULL, N * 4, why, sizeof(why));
	ok(!err && !in.mapped && !memcmp(in.x, data, N * 4), "a pipe is read");
	agg_grad_in_close(&in);
	waitpid(pid, NULL, 0);
	pid = stdin_pipe(data, N * 4 + 1);
	err = agg_grad_in_open(&in, NULL, N * 4, why, sizeof(why));
	ok(err == -EINVAL && !strcmp(why, "<stdin>: more than 49172 bytes, the plan's gradient "
				     "is 49172 bytes (12293 float32 values)"), "a long pipe: %s", why);
	waitpid(pid, NULL, 0);
	pid = stdin_pipe(data, 1000);
	err = agg_grad_in_open(&in, NULL, N * 4, why, sizeof(why));
	ok(err == -EINVAL && strstr(why, "<stdin>: 1000 bytes,"), "a short pipe: %s", why);
	waitpid(pid, NULL, 0);
	unlink(path);
	unlink(off);
}

static void test_output(unsigned flags, const char *kind)
{
	struct agg_grad_out o;
	char path[128], link[128], *base;
	mode_t um = umask(027);
	int err;

	snprintf(path, sizeof(path), "%s/out", dir);
	base = path + strlen(dir) + 1;
	ok(agg_grad_out_replaces(path) && !agg_grad_out_replaces("-") &&
	   !agg_grad_out_replaces("/dev/null") && !agg_grad_out_replaces(dir),
	   "a new or regular file is replaced; standard output, devices, directories not");

	/* A new file. */
	err = agg_grad_out_open(&o, path, flags, why, sizeof(why));
	err = err ? err : agg_grad_out_write(&o, data, N * 4, why, sizeof(why));
	ok(!err && o.replace && !strcmp(names(), flags ? strrchr(o.tmp, '/') + 1 : ""),
	   "%s: while written, the temporary file is all there is (%s)", kind, names());
	err = err ? err : agg_grad_out_commit(&o, why, sizeof(why));
	ok(!err && same(path, data, N * 4) && mode_of(path) == 0640 && !strcmp(names(), base),
	   "%s: committed, the new file has it all, mode 0666 & ~umask 027", kind);

	/* An existing file: its mode stays; aborted, its content too. */
	chmod(path, 0604);
	err = agg_grad_out_open(&o, path, flags, why, sizeof(why));
	err = err ? err : agg_grad_out_write(&o, data + 1, 4000, why, sizeof(why));
	ok(!err && same(path, data, N * 4), "%s: the old content while the new is written", kind);
	agg_grad_out_abort(&o);
	ok(same(path, data, N * 4) && !strcmp(names(), base),
	   "%s: aborted, the old file is untouched and the temporary one gone", kind);
	err = agg_grad_out_open(&o, path, flags, why, sizeof(why));
	err = err ? err : agg_grad_out_write(&o, data + 1, 4000, why, sizeof(why));
	err = err ? err : agg_grad_out_commit(&o, why, sizeof(why));
	ok(!err && same(path, data + 1, 4000) && mode_of(path) == 0604 && count_names() == 1,
	   "%s: committed over an existing file: its mode 0604 kept", kind);

	/* Through a symlink: the link stays, its target is replaced. */
	snprintf(link, sizeof(link), "%s/link", dir);
	symlink("out", link);
	err = agg_grad_out_open(&o, link, flags, why, sizeof(why));
	err = err ? err : agg_grad_out_write(&o, data, 400, why, sizeof(why));
	err = err ? err : agg_grad_out_commit(&o, why, sizeof(why));
	ok(!err && same(path, data, 400) && mode_of(link) == 0604 && count_names() == 2,
	   "%s: a symlink's target is replaced, the link kept", kind);
	unlink(link);
	unlink(path);
	umask(um);
}

int main(void)
{
	struct agg_grad_out o;
	int err;

	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		data[i] = (float)i * 0.25f - 1000.0f;
	snprintf(dir, sizeof(dir), "%s/agg-grad.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	test_input();
	test_output(0, "unnamed");
	test_output(AGG_GRAD_NAMED, "named");

	err = agg_grad_out_open(&o, "/dev/null", 0, why, sizeof(why));
	err = err ? err : agg_grad_out_write(&o, data, N * 4, why, sizeof(why));
	err = err ? err : agg_grad_out_commit(&o, why, sizeof(why));
	ok(!err && !o.replace, "/dev/null is written directly");
	err = agg_grad_out_open(&o, dir, 0, why, sizeof(why));
	ok(err == -EISDIR && strstr(why, "cannot create"), "a directory cannot be written: %s", why);
	rmdir(dir);
	return done_testing();
}
