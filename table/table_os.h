/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private: the OS-specific half of the node table. table_writer.c and
 * table_reader.c hold all the logic over a mapped byte region and call the
 * OS half (table_posix.c or table_win.c), which calls neither of them: it
 * only creates, opens, maps, re-checks and removes the backing object.
 * Every function returns 0 or -errno.
 */
#ifndef SPROBE_TABLE_OS_H
#define SPROBE_TABLE_OS_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* errno values the table returns that some C libraries (mingw) lack. */
#ifndef ESTALE
#define ESTALE 116	/* Linux's value */
#endif

/* Private to the library: not exported from libstackprobe.so. */
#if defined(__GNUC__) && !defined(_WIN32)
#define SPROBE_TABLE_OS_API __attribute__((visibility("hidden")))
#else
#define SPROBE_TABLE_OS_API
#endif

/* printf into err (len bytes) when err is not NULL: the reason a table
 * could not be opened, for the reader and the OS half alike. Inline here so
 * that neither depends on the other for it. */
static inline __attribute__((format(printf, 3, 4)))
void sprobe_table__seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* OS resources behind one table. Zero-initialised = nothing to release. */
struct sprobe_table_os {
	int fd;		/* POSIX: the open file, -1 when none */
	void *handle;	/* Windows: the mapping handle, NULL when none */
	uint64_t dev, ino; /* identity of the created file (unlink check) */
};

/* Write the default table path for pid into buf (the writer's when pid is
 * the caller's own). */
SPROBE_TABLE_OS_API
int sprobe_table_os__default_path(int pid, char *buf, size_t len);

/* Create a new, exclusive, owner-only object of `size` bytes at path and
 * map it read-write, with the storage of its first `reserved` bytes
 * allocated (the rest is reserved later, sprobe_table_os__reserve(), so a
 * small process never pays for a big table). On success *base is the
 * mapping. */
SPROBE_TABLE_OS_API
int sprobe_table_os__create(const char *path, size_t size, size_t reserved,
			    struct sprobe_table_os *os, void **base);

/* Allocate the storage of the object's bytes [off, off + len) (POSIX:
 * posix_fallocate through a transient descriptor on path, after checking
 * it is still the object created), so that writing them can never fault
 * (a SIGBUS in the profiled process on a full tmpfs). 0, -ENOSPC, -ESTALE
 * (path names another file now), or -errno. */
SPROBE_TABLE_OS_API
int sprobe_table_os__reserve(const struct sprobe_table_os *os, const char *path, size_t off,
			     size_t len);

/* Open path read-only after the ownership and type checks, map all of it.
 * err (len errlen) gets a reason on failure. */
SPROBE_TABLE_OS_API
int sprobe_table_os__open(const char *path, struct sprobe_table_os *os,
			  const void **base, size_t *size, char *err,
			  size_t errlen);

/* 0 if the object still has `size` bytes, -ESTALE if not. */
SPROBE_TABLE_OS_API
int sprobe_table_os__check_size(const struct sprobe_table_os *os, size_t size);

/* Unmap; close; if unlink_path is not NULL, remove it when it still names
 * the object created by sprobe_table_os__create. */
SPROBE_TABLE_OS_API
void sprobe_table_os__close(struct sprobe_table_os *os, void *base,
			    size_t size, const char *unlink_path);

/* size zeroed bytes for the writer's own index (one entry per node, of
 * which most processes use a prefix): the pages cost memory only once
 * written, where calloc wrote them all (POSIX: an anonymous mapping;
 * Windows: VirtualAlloc). NULL on failure. Not async-signal-safe. */
SPROBE_TABLE_OS_API
void *sprobe_table_os__zalloc(size_t size);

/* Frees what sprobe_table_os__zalloc(size) returned; NULL is a no-op. */
SPROBE_TABLE_OS_API
void sprobe_table_os__zfree(void *p, size_t size);

SPROBE_TABLE_OS_API
int sprobe_table_os__getpid(void);

/* CLOCK_MONOTONIC (monotonic != 0) or CLOCK_REALTIME, in ns. */
SPROBE_TABLE_OS_API
uint64_t sprobe_table_os__clock_ns(int monotonic);

#endif
