/* SPDX-License-Identifier: BSD-2-Clause */
/* Build products copied where another user can run them
 * (tests/uid_dir_helper.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sprobe_test.h"
#include "uid_dir_helper.h"

static int copy_file(const char *src, const char *dst)
{
	char buf[1 << 16];
	struct stat st;
	ssize_t n = 0;
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, err = 0;

	if (in < 0 || fstat(in, &st))
		err = -errno;
	else if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
		err = -errno;
	while (!err && (n = read(in, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0, w; off < n && !err; off += w)
			if ((w = write(out, buf + off, (size_t)(n - off))) < 0)
				err = -errno;
	if (!err && n < 0)
		err = -errno;
	/* Set after the data: the umask must not narrow what uid may do. */
	if (!err && fchmod(out, st.st_mode & 07777))
		err = -errno;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) && !err)
		err = -errno;
	return err;
}

/* What the child found it cannot do: the entry (-1: out) and errno. */
struct refusal {
	int index;
	int err;
};

/* Become uid and try what the test's user will do. Exits 0 when all is
 * allowed, else writes a struct refusal to fd and exits 1. Only
 * async-signal-safe calls: the parent may have threads. */
static void check_as(int fd, uid_t uid, gid_t gid, const char *out, char *const paths[], int n)
{
	struct refusal r = { -2, 0 };

	if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) {
		r.err = errno;
		goto refused;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (stat(paths[i], &st) || access(paths[i], (st.st_mode & S_IXUSR) ? R_OK | X_OK : R_OK)) {
			r.index = i;
			r.err = errno;
			goto refused;
		}
	}
	r.index = -1;
	if (access(out, W_OK | X_OK)) {
		r.err = errno;
		goto refused;
	}
	_exit(0);
refused:
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(2);
	_exit(1);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) ? -errno : 0;
}

void sprobe_test_uid_dir_free(char *dir)
{
	if (!dir)
		return;
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

int sprobe_test_uid_dir_teardown(void **state)
{
	sprobe_test_uid_dir_free(*state);
	*state = NULL;
	return 0;
}

/* Make the directory under base and check it as uid. Returns it
 * (malloc'd), or NULL with why it does not do in why. */
static char *try_base(const char *base, uid_t uid, gid_t gid, const char *const files[],
		      unsigned flags, char *why, size_t len)
{
	char dir[PATH_MAX], out[PATH_MAX + 8], *paths[16];
	struct statvfs vfs;
	int n = 0, p[2], st;

	if ((flags & SPROBE_TEST_UID_DIR_SETID) && statvfs(base, &vfs) == 0 &&
	    (vfs.f_flag & ST_NOSUID)) {
		snprintf(why, len, "%s is mounted nosuid", base);
		return NULL;
	}
	snprintf(dir, sizeof(dir), "%s/sprobe-uid-XXXXXX", base);
	if (!mkdtemp(dir)) {
		snprintf(why, len, "cannot create a directory in %s: %s", base, strerror(errno));
		return NULL;
	}
	char *ret = strdup(dir);
	assert_non_null(ret);
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(out, sizeof(out), "%s/out", dir);
	assert_int_equal(mkdir(out, 0700), 0);
	assert_int_equal(chmod(out, 01777), 0);
	for (; files[n]; n++) {
		const char *name = strrchr(files[n], '/');

		assert_true(n < 16);
		assert_true(asprintf(&paths[n], "%s/%s", dir, name ? name + 1 : files[n]) > 0);
		int err = copy_file(files[n], paths[n]);
		if (err) {
			for (int i = 0; i <= n; i++)
				free(paths[i]);
			sprobe_test_uid_dir_free(ret);
			fail_msg("copying %s to %s: %s", files[n], dir, strerror(-err));
		}
	}
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0)
		check_as(p[1], uid, gid, out, paths, n);
	close(p[1]);
	struct refusal r = { -2, 0 };
	ssize_t got = read(p[0], &r, sizeof(r));
	close(p[0]);
	assert_int_equal(waitpid(c, &st, 0), c);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (got != (ssize_t)sizeof(r))
			snprintf(why, len, "checking %s as uid %u: the child exited with status %d", dir,
				 (unsigned)uid, st);
		else if (r.index == -2)
			snprintf(why, len, "cannot become uid %u: %s", (unsigned)uid, strerror(r.err));
		else
			snprintf(why, len, "uid %u cannot use %s: %s", (unsigned)uid,
				 r.index >= 0 ? paths[r.index] : out, strerror(r.err));
		sprobe_test_uid_dir_free(ret);
		ret = NULL;
	}
	for (int i = 0; i < n; i++)
		free(paths[i]);
	return ret;
}

char *sprobe_test_uid_dir(uid_t uid, gid_t gid, const char *const files[], unsigned flags)
{
	const char *tmpdir = getenv("TMPDIR");
	const char *bases[] = { tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp", "/tmp", "/var/tmp" };
	char why[3][PATH_MAX + 128];

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (i > 0 && strcmp(bases[i], bases[0]) == 0) {
			why[i][0] = '\0';
			continue;
		}
		char *dir = try_base(bases[i], uid, gid, files, flags, why[i], sizeof(why[i]));
		if (dir)
			return dir;
	}
	SPROBE_SKIP("no directory here that uid %u can use: %s%s%s%s%s", (unsigned)uid, why[0],
		    why[1][0] ? "; " : "", why[1], why[2][0] ? "; " : "", why[2]);
	return NULL;
}
