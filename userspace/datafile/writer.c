/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file writer: whole framed records only, appended (the invariant the
 * reader relies on: format.c). Format: docs/FORMAT.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/common/fds.h"
#include "userspace/datafile/datafile_internal.h"
#include "userspace/datafile/datafile_owned.h"

/* ---- writer ----------------------------------------------------------- */

struct sprobe_datafile_writer {
	int fd;
	int fd_handle;			/* >= 0: fd comes from the registry (fds.h) */
	bool finished, fsync_on_finish;
	int error;			/* sticky write error, 0 if none */
	uint64_t records;
	uint8_t *buf;
	size_t cap, len;
	uint8_t *scratch;		/* encode buffer, grows up to MAX_PAYLOAD */
	size_t scratch_cap;
};

/* *done: the bytes written before an error (the file holds them). */
static int write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
	*done = 0;
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		*done += (size_t)w;
	}
	return 0;
}

/* Write through the registry when the file is a registered descriptor
 * in a host process: once per batch, check that the number still is the
 * file it was opened on (a raw close(2) and an open by the program may
 * have given the number to a file of the program's), so the program's
 * file is never written. */
static int w_write(struct sprobe_datafile_writer *w, const uint8_t *p, size_t n, size_t *done)
{
	int fd, err;

	*done = 0;
	if (w->fd_handle < 0)
		return write_all(w->fd, p, n, done);
	err = sprobe_fd__verify(w->fd_handle);
	if (err)
		return err;
	fd = sprobe_fd__get(w->fd_handle);
	if (fd < 0)
		return fd;
	err = write_all(fd, p, n, done);
	sprobe_fd__put(w->fd_handle);
	return err;
}

/* A full disk (or quota) may get room again: the bytes not written wait
 * in the buffer for the next flush, and the file stays a prefix of whole
 * records. Any other error is sticky. */
static bool transient(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

int sprobe_datafile_writer__flush(struct sprobe_datafile_writer *w)
{
	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (w->len) {
		size_t done;
		int err = w_write(w, w->buf, w->len, &done);

		if (err) {
			if (!transient(err)) {
				w->error = err;
				return err;
			}
			memmove(w->buf, w->buf + done, w->len - done);
			w->len -= done;
			return err;
		}
		w->len = 0;
	}
	return 0;
}

/* Append one record (frame + payload) whole, or nothing: a record that
 * does not fit while the disk is full is dropped (the caller counts it),
 * the file never gets half of one. A record larger than the buffer goes
 * straight to the file after the buffer, so the order of bytes holds. */
static int wbuf_record(struct sprobe_datafile_writer *w, const uint8_t *frame, size_t flen,
		       const void *payload, size_t len)
{
	size_t need = flen + len, done;
	int err;

	if (w->len + need > w->cap) {
		err = sprobe_datafile_writer__flush(w);
		if (err && (!transient(err) || w->len + need > w->cap))
			return err;
	}
	if (need <= w->cap - w->len) {
		memcpy(w->buf + w->len, frame, flen);
		if (len)
			memcpy(w->buf + w->len + flen, payload, len);
		w->len += need;
		return 0;
	}
	/* Larger than the buffer (which is empty now). */
	err = w_write(w, frame, flen, &done);
	if (!err) {
		err = w_write(w, payload, len, &done);
		if (err)
			w->error = err; /* a frame without its payload: no more */
	} else if (done || !transient(err)) {
		w->error = err;
	}
	return err;
}

struct sprobe_datafile_writer *
sprobe_datafile_writer__new(int fd, const struct sprobe_datafile_writer_opts *opts)
{
	struct sprobe_datafile_writer *w;
	size_t cap = 64 * 1024;
	uint8_t pre[SPROBE_DF_PREAMBLE_SIZE];

	if (fd < 0 || (opts && opts->sz < sizeof(size_t))) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	if (opts && opts->sz >= offsetof(struct sprobe_datafile_writer_opts, buffer_bytes) +
				       sizeof(size_t) && opts->buffer_bytes)
		cap = opts->buffer_bytes < 4096 ? 4096 : opts->buffer_bytes;
	if (opts && opts->sz >= offsetof(struct sprobe_datafile_writer_opts, fsync_on_finish) +
				       sizeof(bool))
		w->fsync_on_finish = opts->fsync_on_finish;
	w->fd = fd;
	w->fd_handle = -1;
	w->cap = cap;
	w->buf = malloc(cap);
	w->scratch_cap = 4096;
	w->scratch = malloc(w->scratch_cap);
	if (!w->buf || !w->scratch) {
		sprobe_datafile_writer__free(w);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(pre, SPROBE_DF_MAGIC, 8);
	put32(pre + 8, SPROBE_DF_VERSION);
	put32(pre + 12, SPROBE_DF_PREAMBLE_SIZE);
	memcpy(w->buf, pre, sizeof(pre));
	w->len = sizeof(pre);
	return w;
}

int sprobe_datafile_writer__write_raw(struct sprobe_datafile_writer *w, uint32_t type,
				      const void *payload, uint32_t len)
{
	uint8_t frame[SPROBE_DF_FRAME_SIZE];
	int err;

	if (!w || (len && !payload) || type == 0)
		return -EINVAL;
	if (w->finished)
		return -EPIPE;
	if (w->error)
		return w->error;
	if (len > SPROBE_DF_MAX_PAYLOAD)
		return -E2BIG;
	sprobe_df__frame(frame, type, payload, len);
	err = wbuf_record(w, frame, sizeof(frame), payload, len);
	if (!err && type != SPROBE_DF_TRAILER)
		w->records++;
	return err;
}

int sprobe_datafile_writer__write(struct sprobe_datafile_writer *w,
				  const struct sprobe_df_record *rec)
{
	long n;

	if (!w || !rec)
		return -EINVAL;
	n = sprobe_df__encode(rec, w->scratch, w->scratch_cap);
	if (n < 0)
		return (int)n;
	if ((size_t)n > SPROBE_DF_MAX_PAYLOAD)
		return -E2BIG;
	if ((size_t)n > w->scratch_cap) {
		uint8_t *nb = realloc(w->scratch, (size_t)n);

		if (!nb)
			return -ENOMEM;
		w->scratch = nb;
		w->scratch_cap = (size_t)n;
		n = sprobe_df__encode(rec, w->scratch, w->scratch_cap);
		if (n < 0)
			return (int)n;
	}
	return sprobe_datafile_writer__write_raw(w, rec->type, w->scratch, (uint32_t)n);
}

int sprobe_datafile_writer__finish(struct sprobe_datafile_writer *w,
				   const struct sprobe_df_trailer *trailer)
{
	struct sprobe_df_record rec = { .type = SPROBE_DF_TRAILER };
	int err;

	if (!w)
		return -EINVAL;
	if (w->finished)
		return -EPIPE;
	if (trailer)
		rec.trailer = *trailer;
	rec.trailer.records = w->records;
	err = sprobe_datafile_writer__write(w, &rec);
	if (err)
		return err;
	w->finished = true;
	err = sprobe_datafile_writer__flush(w);
	if (err)
		return err;
	if (w->fsync_on_finish) {
		int fd = w->fd_handle >= 0 ? sprobe_fd__get(w->fd_handle) : w->fd;

		if (fd < 0)
			return fd;
		err = fsync(fd) < 0 && errno != EINVAL ? -errno : 0;
		if (w->fd_handle >= 0)
			sprobe_fd__put(w->fd_handle);
		return err;
	}
	return 0;
}

struct sprobe_datafile_writer *
sprobe_datafile_writer__new_owned(int h, const struct sprobe_datafile_writer_opts *opts)
{
	int fd = sprobe_fd__get(h);
	struct sprobe_datafile_writer *w;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	w = sprobe_datafile_writer__new(fd, opts);
	sprobe_fd__put(h);
	if (w)
		w->fd_handle = h;
	return w;
}

uint64_t sprobe_datafile_writer__records(const struct sprobe_datafile_writer *w)
{
	return w ? w->records : 0;
}

void sprobe_datafile_writer__free(struct sprobe_datafile_writer *w)
{
	if (!w)
		return;
	if (w->buf)
		(void)sprobe_datafile_writer__flush(w);
	free(w->buf);
	free(w->scratch);
	free(w);
}

