/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table backing store on POSIX: a regular file (by default in
 * /dev/shm, i.e. tmpfs; in /tmp on macOS, which has no /dev/shm) mapped
 * MAP_SHARED. The logic is in table.c.
 *
 * macOS: a regular file, not shm_open(). A POSIX shared-memory object there
 * has a name of at most PSHMNAMLEN (31) bytes, no inode to check before
 * unlinking, no S_IFREG type, and fstat reports its size rounded up to a
 * page, which the reader's exact-size validation would refuse. A 0600 file
 * made with O_CREAT|O_EXCL|O_NOFOLLOW in the sticky /tmp has the same
 * security model as Linux's sticky /dev/shm.
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

#include "userspace/common/fds.h"
#include "table_os.h"

#ifdef __APPLE__
#define TABLE_DIR "/tmp"
#else
#define TABLE_DIR "/dev/shm"
#endif

int sprobe_table_os__default_path(int pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, TABLE_DIR "/stackprobe-%d.table", pid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Give fd `size` bytes with the blocks of the first `reserved` allocated
 * (Linux; Darwin allocates all); 0 or an errno value (ENOSPC when the file
 * system is full: better here than a SIGBUS later). */
static int reserve(int fd, size_t size, size_t reserved)
{
#ifdef __APPLE__
	/* Darwin has no posix_fallocate: F_PREALLOCATE reserves the blocks
	 * (F_PEOFPOSMODE: from the end of the file, which is empty here),
	 * ftruncate sets the size. A file system without preallocation
	 * (ENOTSUP) gets a plain ftruncate, as Linux does on EOPNOTSUPP. */
	fstore_t fst = {
		.fst_flags = F_ALLOCATEALL,
		.fst_posmode = F_PEOFPOSMODE,
		.fst_offset = 0,
		.fst_length = (off_t)size,
	};

	if (fcntl(fd, F_PREALLOCATE, &fst) < 0 && errno != ENOTSUP)
		return errno;
	return ftruncate(fd, (off_t)size) < 0 ? errno : 0;
#else
	int err;

	if (ftruncate(fd, (off_t)size) < 0)
		return errno;
	err = posix_fallocate(fd, 0, (off_t)(reserved < size ? reserved : size));
	if (err == EOPNOTSUPP || err == EINVAL)
		return 0;
	return err;
#endif
}

int sprobe_table_os__reserve(const struct sprobe_table_os *os, const char *path, size_t off,
			     size_t len)
{
#ifdef __APPLE__
	(void)os;
	(void)path;
	(void)off;
	(void)len;
	return 0; /* all of it was allocated at create */
#else
	struct stat st;
	int h, fd, err;

	h = sprobe_fd__open(path, O_RDWR | O_NOFOLLOW, 0, SPROBE_FD_TRANSIENT);
	fd = sprobe_fd__get(h);
	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_dev != os->dev || (uint64_t)st.st_ino != os->ino) {
		sprobe_fd__done(h);
		return -ESTALE;
	}
	err = posix_fallocate(fd, (off_t)off, (off_t)len);
	sprobe_fd__done(h);
	if (err == EOPNOTSUPP || err == EINVAL)
		return 0;
	return -err;
#endif
}

int sprobe_table_os__create(const char *path, size_t size, size_t reserved,
			    struct sprobe_table_os *os, void **base)
{
	struct stat st;
	void *p;
	int h, fd, err;

	/* O_EXCL makes open fail on any existing name, symlinks included
	 * (dangling or not); O_NOFOLLOW says the same for the last component
	 * on systems where O_EXCL alone would not. 0600: owner only. */
	/* Through the descriptor registry (userspace/fds.h): the writer runs
	 * inside a host process, and holds no descriptor once the table is
	 * mapped (the mapping keeps the file). */
	h = sprobe_fd__open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600,
			    SPROBE_FD_TRANSIENT);
	fd = sprobe_fd__get(h);
	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	if (fstat(fd, &st) < 0)
		goto fail_errno;
	/* Reserve the pages now: on tmpfs a sparse file that cannot grow
	 * would SIGBUS the writer (the profiled process) on first touch. */
	err = reserve(fd, size, reserved);
	if (err) {
		errno = err;
		goto fail_errno;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail_errno;
	sprobe_fd__done(h);
	os->fd = -1;
	os->handle = NULL;
	os->dev = st.st_dev;
	os->ino = st.st_ino;
	*base = p;
	return 0;

fail_errno:
	err = -errno;
	unlink(path);
	sprobe_fd__done(h);
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
			sprobe_table__seterr(err, errlen, "%s is a symlink: refused", path);
		else
			sprobe_table__seterr(err, errlen, "cannot open %s: %s", path,
					     strerror(-e));
		return e;
	}
	if (fstat(fd, &st) < 0) {
		e = -errno;
		sprobe_table__seterr(err, errlen, "fstat %s: %s", path, strerror(-e));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		e = -EINVAL;
		sprobe_table__seterr(err, errlen, "%s is not a regular file", path);
		goto fail;
	}
	/* Another user's table may have been crafted to attack the reader,
	 * or may leak that user's addresses to us: refuse unless root. */
	if (st.st_uid != geteuid() && geteuid() != 0) {
		e = -EACCES;
		sprobe_table__seterr(err, errlen,
		       "%s belongs to uid %u, not to you (uid %u): run as that "
		       "user or as root", path, (unsigned)st.st_uid,
		       (unsigned)geteuid());
		goto fail;
	}
	if (st.st_size <= 0) {
		e = -EBADMSG;
		sprobe_table__seterr(err, errlen, "%s is empty (truncated table)", path);
		goto fail;
	}
	if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
		e = -EFBIG;
		sprobe_table__seterr(err, errlen, "%s is too large", path);
		goto fail;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		e = -errno;
		sprobe_table__seterr(err, errlen, "mmap %s: %s", path, strerror(-e));
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

void *sprobe_table_os__zalloc(size_t size)
{
	void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void sprobe_table_os__zfree(void *p, size_t size)
{
	if (p)
		munmap(p, size ? size : 1);
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
