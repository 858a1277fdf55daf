/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table backing store on POSIX: a regular file (by default in
 * /dev/shm, i.e. tmpfs) mapped MAP_SHARED. The logic is in table.c.
 */
#ifndef _WIN32

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "table_os.h"

static void seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

int sprobe_table_os__default_path(int pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "/dev/shm/stackprobe-%d.table", pid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int sprobe_table_os__create(const char *path, size_t size,
			    struct sprobe_table_os *os, void **base)
{
	struct stat st;
	void *p;
	int fd, err;

	/* O_EXCL makes open fail on any existing name, symlinks included
	 * (dangling or not); O_NOFOLLOW says the same for the last component
	 * on systems where O_EXCL alone would not. 0600: owner only. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		goto fail_errno;
	/* Reserve the pages now: on tmpfs a sparse file that cannot grow
	 * would SIGBUS the writer (the profiled process) on first touch. */
	err = posix_fallocate(fd, 0, (off_t)size);
	if (err) {
		if (err == EOPNOTSUPP || err == EINVAL) {
			if (ftruncate(fd, (off_t)size) < 0)
				goto fail_errno;
		} else {
			errno = err;
			goto fail_errno;
		}
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail_errno;
	os->fd = fd;
	os->handle = NULL;
	os->dev = st.st_dev;
	os->ino = st.st_ino;
	*base = p;
	return 0;

fail_errno:
	err = -errno;
	unlink(path);
	close(fd);
	return err;
}

int sprobe_table_os__open(const char *path, struct sprobe_table_os *os,
			  const void **base, size_t *size, char *err,
			  size_t errlen)
{
	struct stat st;
	void *p;
	int fd, e;

	/* O_NONBLOCK: a FIFO planted at the path must not block us in open();
	 * the S_ISREG check below then refuses it. No effect on files. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		e = -errno;
		if (e == -ELOOP)
			seterr(err, errlen, "%s is a symlink: refused", path);
		else
			seterr(err, errlen, "cannot open %s: %s", path,
			       strerror(-e));
		return e;
	}
	if (fstat(fd, &st) < 0) {
		e = -errno;
		seterr(err, errlen, "fstat %s: %s", path, strerror(-e));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		e = -EINVAL;
		seterr(err, errlen, "%s is not a regular file", path);
		goto fail;
	}
	/* Another user's table may have been crafted to attack the reader,
	 * or may leak that user's addresses to us: refuse unless root. */
	if (st.st_uid != geteuid() && geteuid() != 0) {
		e = -EACCES;
		seterr(err, errlen,
		       "%s belongs to uid %u, not to you (uid %u): run as that "
		       "user or as root", path, (unsigned)st.st_uid,
		       (unsigned)geteuid());
		goto fail;
	}
	if (st.st_size <= 0) {
		e = -EBADMSG;
		seterr(err, errlen, "%s is empty (truncated table)", path);
		goto fail;
	}
	if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
		e = -EFBIG;
		seterr(err, errlen, "%s is too large", path);
		goto fail;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		e = -errno;
		seterr(err, errlen, "mmap %s: %s", path, strerror(-e));
		goto fail;
	}
	os->fd = fd;
	os->handle = NULL;
	os->dev = st.st_dev;
	os->ino = st.st_ino;
	*base = p;
	*size = (size_t)st.st_size;
	return 0;
fail:
	close(fd);
	return e;
}

int sprobe_table_os__check_size(const struct sprobe_table_os *os, size_t size)
{
	struct stat st;

	if (os->fd < 0)
		return 0;
	if (fstat(os->fd, &st) < 0)
		return -errno;
	return (uint64_t)st.st_size == (uint64_t)size ? 0 : -ESTALE;
}

void sprobe_table_os__close(struct sprobe_table_os *os, void *base,
			    size_t size, const char *unlink_path)
{
	struct stat st;

	/* Remove the name only if it still is our file: someone (same user)
	 * may have replaced it, and that file is not ours to delete. */
	if (unlink_path && lstat(unlink_path, &st) == 0 &&
	    (uint64_t)st.st_dev == os->dev && (uint64_t)st.st_ino == os->ino)
		unlink(unlink_path);
	if (base)
		munmap(base, size);
	if (os->fd >= 0)
		close(os->fd);
	os->fd = -1;
}

int sprobe_table_os__getpid(void)
{
	return (int)getpid();
}

uint64_t sprobe_table_os__clock_ns(int monotonic)
{
	struct timespec ts;

	clock_gettime(monotonic ? CLOCK_MONOTONIC : CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* !_WIN32 */
