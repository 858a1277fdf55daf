/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Test fixture shared by test_datafile, test_stream and test_report: write
 * records with the real writer into an in-memory file (memfd; an unlinked
 * temporary file on macOS) and get the bytes back. Header-only (static functions) so it is linked only into the
 * tests that include it.
 */
#ifndef SPROBE_DATAFILE_FIXTURE_H
#define SPROBE_DATAFILE_FIXTURE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

struct df_buf {
	int fd;				/* memfd the writer writes to */
	struct sprobe_datafile_writer *w;
	uint8_t *bytes;			/* after df_buf_take() */
	size_t len;
};

static inline int df_buf_open(struct df_buf *b)
{
	memset(b, 0, sizeof(*b));
#ifdef __linux__
	b->fd = memfd_create("sprobe-test", MFD_CLOEXEC);
#else
	/* No memfd on macOS: an unlinked temporary file is the same thing
	 * to the writer (a seekable fd with no name). */
	char tmpl[] = "/tmp/sprobe-df-buf-XXXXXX";

	b->fd = mkstemp(tmpl);
	if (b->fd >= 0)
		unlink(tmpl);
#endif
	if (b->fd < 0)
		return -errno;
	b->w = sprobe_datafile_writer__new(b->fd, NULL);
	return b->w ? 0 : -errno;
}

/* Free the writer (flushing, no trailer unless finished) and read the file
 * into b->bytes. */
static inline int df_buf_take(struct df_buf *b)
{
	struct stat st;

	sprobe_datafile_writer__free(b->w);
	b->w = NULL;
	if (fstat(b->fd, &st) < 0)
		return -errno;
	b->len = (size_t)st.st_size;
	b->bytes = malloc(b->len ? b->len : 1);
	if (!b->bytes)
		return -ENOMEM;
	if (pread(b->fd, b->bytes, b->len, 0) != (ssize_t)b->len)
		return -EIO;
	return 0;
}

static inline void df_buf_close(struct df_buf *b)
{
	sprobe_datafile_writer__free(b->w);
	if (b->fd >= 0)
		close(b->fd);
	free(b->bytes);
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

/* Write BYTES to a fresh file in a private temp dir; returns its path in
 * path[cap] (caller unlinks). */
static inline int df_write_tmp(const void *bytes, size_t len, char *path, size_t cap)
{
	char tmpl[] = "/tmp/sprobe-df-XXXXXX";
	int fd = mkstemp(tmpl);

	if (fd < 0)
		return -errno;
	if (write(fd, bytes, len) != (ssize_t)len) {
		close(fd);
		unlink(tmpl);
		return -EIO;
	}
	close(fd);
	snprintf(path, cap, "%s", tmpl);
	return 0;
}

#endif
