/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file writer and reader. Format: docs/FORMAT.md.
 *
 * Invariant the reader relies on: the writer only ever appends whole framed
 * records, so a file cut by a crash is a prefix of a valid file and every
 * record before the cut is intact. Each frame carries a CRC32C of its own
 * header and of its payload: a cut inside a record is told apart from a
 * damaged record by whether the bytes run out (cut short) or are present but
 * wrong (corrupt).
 *
 * The reader treats every byte as hostile: every length is checked against
 * what is left of the payload before use, counts against their documented
 * maxima, and no allocation depends on a value read from the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

/* ---- little-endian helpers -------------------------------------------- */

/* The file is little-endian. On a little-endian host these are plain
 * unaligned loads and stores (memcpy), elsewhere byte by byte. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#else
static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}
#endif

/* ---- CRC32C ----------------------------------------------------------- */

/* Slicing-by-8 over constant tables (no lazy init, so no race and usable
 * in a signal handler). CRC32C rather than CRC32: better error detection
 * for short records, and the same polynomial as the SSE4.2/ARMv8 crc
 * instructions should this ever need to be faster. */
#include "userspace/datafile/datafile_crc.h"
#include "userspace/datafile/datafile_owned.h"
#include "userspace/common/fds.h"

uint32_t sprobe_df__crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^ get32(p);
		uint32_t hi = get32(p + 4);

		crc = crc32c_tab[7][lo & 0xff] ^ crc32c_tab[6][(lo >> 8) & 0xff] ^
		      crc32c_tab[5][(lo >> 16) & 0xff] ^ crc32c_tab[4][lo >> 24] ^
		      crc32c_tab[3][hi & 0xff] ^ crc32c_tab[2][(hi >> 8) & 0xff] ^
		      crc32c_tab[1][(hi >> 16) & 0xff] ^ crc32c_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc32c_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

void sprobe_df__frame(uint8_t out[SPROBE_DF_FRAME_SIZE], uint32_t type,
		      const void *payload, uint32_t len)
{
	put32(out, type);
	put32(out + 4, len);
	put32(out + 8, sprobe_df__crc32c(0, payload, len));
	put32(out + 12, sprobe_df__crc32c(0, out, 12));
}

const char *sprobe_df_type__name(uint32_t type)
{
	static const char *const names[SPROBE_DF__TYPE_COUNT] = {
		[SPROBE_DF_HEADER] = "header",	 [SPROBE_DF_THREAD] = "thread",
		[SPROBE_DF_MODULE] = "module",	 [SPROBE_DF_SYMBOL] = "symbol",
		[SPROBE_DF_SAMPLE] = "sample",	 [SPROBE_DF_CAPTURE] = "capture",
		[SPROBE_DF_KWINDOW] = "kwindow", [SPROBE_DF_LOST] = "lost",
		[SPROBE_DF_TRAILER] = "trailer",
	};
	if (type < SPROBE_DF__TYPE_COUNT && names[type])
		return names[type];
	return "unknown";
}

/* ---- encoder ---------------------------------------------------------- */

/* A bounded cursor: writes past cap are counted but not stored, so one pass
 * gives both the bytes and the size needed. */
struct enc {
	uint8_t *buf;
	size_t cap, len;
};

static inline void enc_bytes(struct enc *e, const void *src, size_t n)
{
	if (n && e->len + n <= e->cap)
		memcpy(e->buf + e->len, src, n);
	e->len += n;
}

static inline void enc32(struct enc *e, uint32_t v)
{
	if (e->len + 4 <= e->cap)
		put32(e->buf + e->len, v);
	e->len += 4;
}

static inline void enc64(struct enc *e, uint64_t v)
{
	if (e->len + 8 <= e->cap)
		put64(e->buf + e->len, v);
	e->len += 8;
}

static bool str_ok(const void *s, uint32_t len)
{
	return len <= SPROBE_DF_MAX_STRING && (len == 0 || s != NULL);
}

long sprobe_df__encode(const struct sprobe_df_record *rec, void *buf, size_t cap)
{
	struct enc e = { .buf = buf, .cap = buf ? cap : 0 };

	if (!rec)
		return -EINVAL;
	switch (rec->type) {
	case SPROBE_DF_HEADER: {
		const struct sprobe_df_header *h = &rec->header;

		if (!str_ok(h->cmdline, h->cmdline_len))
			return -EINVAL;
		enc32(&e, h->pid);
		enc32(&e, h->mode);
		enc32(&e, h->freq_hz);
		enc32(&e, h->flags);
		enc64(&e, h->start_realtime_ns);
		enc64(&e, h->start_mono_ns);
		enc32(&e, h->cmdline_len);
		enc_bytes(&e, h->cmdline, h->cmdline_len);
		break;
	}
	case SPROBE_DF_THREAD: {
		const struct sprobe_df_thread *t = &rec->thread;

		if (!str_ok(t->name, t->name_len))
			return -EINVAL;
		enc32(&e, t->tid);
		enc32(&e, t->name_len);
		enc_bytes(&e, t->name, t->name_len);
		break;
	}
	case SPROBE_DF_MODULE: {
		const struct sprobe_df_module *m = &rec->module;

		if (!str_ok(m->path, m->path_len) || m->build_id_len > SPROBE_DF_MAX_BUILD_ID ||
		    (m->build_id_len && !m->build_id) || m->nranges > SPROBE_DF_MAX_RANGES ||
		    (m->nranges && !m->ranges))
			return -EINVAL;
		enc32(&e, m->index);
		enc32(&e, m->build_id_len);
		enc32(&e, m->path_len);
		enc32(&e, m->nranges);
		enc64(&e, m->load_bias);
		enc_bytes(&e, m->build_id, m->build_id_len);
		enc_bytes(&e, m->path, m->path_len);
		for (uint32_t i = 0; i < m->nranges; i++) {
			enc64(&e, m->ranges[i].start);
			enc64(&e, m->ranges[i].end);
			enc64(&e, m->ranges[i].file_offset);
		}
		break;
	}
	case SPROBE_DF_SYMBOL: {
		const struct sprobe_df_symbol *s = &rec->symbol;

		if (!str_ok(s->name, s->name_len))
			return -EINVAL;
		enc64(&e, s->pc);
		enc64(&e, s->offset);
		enc32(&e, s->module);
		enc32(&e, s->name_len);
		enc_bytes(&e, s->name, s->name_len);
		break;
	}
	case SPROBE_DF_SAMPLE: {
		const struct sprobe_df_sample *s = &rec->sample;

		if (s->nframes > SPROBE_MAX_FRAMES || (s->nframes && !s->pcs))
			return -EINVAL;
		enc64(&e, s->time_ns);
		enc32(&e, s->tid);
		enc32(&e, s->method);
		{
			uint32_t w = s->weight ? s->weight : 1;

			if (w > SPROBE_DF_SAMPLE_WEIGHT_MAX)
				w = SPROBE_DF_SAMPLE_WEIGHT_MAX;
			enc32(&e, (s->flags & ((1u << SPROBE_DF_SAMPLE_WEIGHT_SHIFT) - 1)) |
					  (w - 1) << SPROBE_DF_SAMPLE_WEIGHT_SHIFT);
		}
		enc32(&e, s->nframes);
		enc64(&e, s->stack_used);
		enc64(&e, s->signal_ns);
		enc64(&e, s->entry_ns);
		enc64(&e, s->exit_ns);
		for (uint32_t i = 0; i < s->nframes; i++)
			enc64(&e, s->pcs[i]);
		break;
	}
	case SPROBE_DF_CAPTURE: {
		const struct sprobe_df_capture *c = &rec->capture;

		if (c->ndropped_tids > SPROBE_DF_MAX_DROPPED_TIDS ||
		    (c->ndropped_tids && !c->dropped_tids))
			return -EINVAL;
		enc64(&e, c->time_ns);
		enc32(&e, c->threads_total);
		enc32(&e, c->threads_captured);
		enc32(&e, c->threads_dropped);
		enc32(&e, SPROBE_DROP__COUNT);
		enc32(&e, c->ndropped_tids);
		enc32(&e, 0);
		enc64(&e, c->pause_ns);
		enc64(&e, c->capture_ns);
		for (uint32_t i = 0; i < SPROBE_DROP__COUNT; i++)
			enc32(&e, c->dropped[i]);
		for (uint32_t i = 0; i < c->ndropped_tids; i++) {
			enc32(&e, c->dropped_tids[i].tid);
			enc32(&e, c->dropped_tids[i].reason);
		}
		break;
	}
	case SPROBE_DF_KWINDOW: {
		const struct sprobe_df_kwindow *k = &rec->kwindow;

		enc32(&e, k->tid);
		enc32(&e, 0);
		enc64(&e, k->generate_ns);
		enc64(&e, k->deliver_ns);
		enc64(&e, k->sigreturn_ns);
		enc64(&e, k->offcpu_ns);
		break;
	}
	case SPROBE_DF_LOST:
		enc64(&e, rec->lost.time_ns);
		enc32(&e, SPROBE_DF__TYPE_COUNT);
		enc32(&e, 0);
		for (uint32_t i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			enc64(&e, rec->lost.lost[i]);
		break;
	case SPROBE_DF_TRAILER:
		enc64(&e, rec->trailer.end_realtime_ns);
		enc64(&e, rec->trailer.end_mono_ns);
		enc64(&e, rec->trailer.records);
		enc32(&e, SPROBE_DF__TYPE_COUNT);
		enc32(&e, 0);
		for (uint32_t i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			enc64(&e, rec->trailer.lost[i]);
		break;
	default:
		return -EINVAL;
	}
	return (long)e.len;
}

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

static int write_all(int fd, const uint8_t *p, size_t n)
{
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
	}
	return 0;
}

/* Write through the registry when the file is a registered descriptor
 * in a host process: once per batch, check that the number still is the
 * file it was opened on (a raw close(2) and an open by the program may
 * have given the number to a file of the program's), so the program's
 * file is never written. */
static int w_write(struct sprobe_datafile_writer *w, const uint8_t *p, size_t n)
{
	int fd, err;

	if (w->fd_handle < 0)
		return write_all(w->fd, p, n);
	err = sprobe_fd__verify(w->fd_handle);
	if (err)
		return err;
	fd = sprobe_fd__get(w->fd_handle);
	if (fd < 0)
		return fd;
	err = write_all(fd, p, n);
	sprobe_fd__put(w->fd_handle);
	return err;
}

int sprobe_datafile_writer__flush(struct sprobe_datafile_writer *w)
{
	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (w->len) {
		int err = w_write(w, w->buf, w->len);

		if (err) {
			w->error = err;
			return err;
		}
		w->len = 0;
	}
	return 0;
}

/* Append bytes to the buffer, flushing as needed; large blocks go straight
 * to the file after the buffer so the order of bytes is preserved. */
static int wbuf_append(struct sprobe_datafile_writer *w, const void *p, size_t n)
{
	int err;

	if (w->len + n > w->cap) {
		err = sprobe_datafile_writer__flush(w);
		if (err)
			return err;
	}
	if (n > w->cap) {
		err = w_write(w, p, n);
		if (err)
			w->error = err;
		return err;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
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
	/* Frame and payload go to the buffer together when they fit, so a
	 * flush never separates them needlessly; correctness does not depend
	 * on it (the reader handles any cut). */
	err = wbuf_append(w, frame, sizeof(frame));
	if (!err)
		err = wbuf_append(w, payload, len);
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

/* ---- reader ----------------------------------------------------------- */

struct sprobe_datafile_reader {
	FILE *f;			/* NULL when reading memory */
	bool own_f;
	const uint8_t *mem;
	size_t mem_len, mem_pos;

	bool preamble_done, trailer_seen, done;
	int done_rc;			/* what __next returns once done */
	int status;			/* enum sprobe_df_status */
	uint64_t pos;			/* bytes consumed */
	uint64_t good;			/* offset after the last good record */
	uint64_t records;
	char msg[256];

	uint8_t *payload;		/* grown to the largest payload seen */
	char *strings;			/* NUL-terminated copies of strings */
	size_t buf_cap;			/* payload holds buf_cap, strings buf_cap + 8 */
	size_t strings_len;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	struct sprobe_df_range ranges[SPROBE_DF_MAX_RANGES];
	struct sprobe_df_dropped dropped[SPROBE_DF_MAX_DROPPED_TIDS];
};

static struct sprobe_datafile_reader *reader_alloc(void)
{
	struct sprobe_datafile_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	return r;
}

/* Make room for a payload of len bytes (len <= SPROBE_DF_MAX_PAYLOAD, so
 * the allocation is bounded by the format, not by the file). Strings of
 * one payload never exceed it, plus one NUL each (at most two strings per
 * record), hence + 8. */
static int reserve_payload(struct sprobe_datafile_reader *r, uint32_t len)
{
	size_t cap = r->buf_cap ? r->buf_cap : 4096;
	uint8_t *p;
	char *s;

	if (len <= r->buf_cap)
		return 0;
	while (cap < len)
		cap *= 2;
	p = realloc(r->payload, cap);
	if (!p)
		return -ENOMEM;
	r->payload = p;
	s = realloc(r->strings, cap + 8);
	if (!s)
		return -ENOMEM;
	r->strings = s;
	r->buf_cap = cap;
	return 0;
}

struct sprobe_datafile_reader *sprobe_datafile_reader__open(const char *path)
{
	struct sprobe_datafile_reader *r;
	FILE *f;

	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	f = fopen(path, "rbe");
	if (!f)
		return NULL;
	r = reader_alloc();
	if (!r) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	r->f = f;
	r->own_f = true;
	return r;
}

struct sprobe_datafile_reader *sprobe_datafile_reader__from_stdio(FILE *f)
{
	struct sprobe_datafile_reader *r;

	if (!f) {
		errno = EINVAL;
		return NULL;
	}
	r = reader_alloc();
	if (r)
		r->f = f;
	return r;
}

struct sprobe_datafile_reader *sprobe_datafile_reader__from_mem(const void *buf, size_t len)
{
	struct sprobe_datafile_reader *r;

	if (!buf && len) {
		errno = EINVAL;
		return NULL;
	}
	r = reader_alloc();
	if (r) {
		r->mem = buf;
		r->mem_len = len;
	}
	return r;
}

void sprobe_datafile_reader__free(struct sprobe_datafile_reader *r)
{
	if (!r)
		return;
	if (r->own_f && r->f)
		fclose(r->f);
	free(r->payload);
	free(r->strings);
	free(r);
}

int sprobe_datafile_reader__status(const struct sprobe_datafile_reader *r)
{
	return r ? r->status : SPROBE_DF_CORRUPT;
}

const char *sprobe_datafile_reader__error(const struct sprobe_datafile_reader *r)
{
	return r ? r->msg : "no reader";
}

uint64_t sprobe_datafile_reader__records(const struct sprobe_datafile_reader *r)
{
	return r ? r->records : 0;
}

uint64_t sprobe_datafile_reader__good_bytes(const struct sprobe_datafile_reader *r)
{
	return r ? r->good : 0;
}

/* Read up to n bytes. Returns the count (< n only at end of input) or
 * -errno on a read error. */
static long src_read(struct sprobe_datafile_reader *r, void *buf, size_t n)
{
	size_t got;

	if (!r->f) {
		size_t left = r->mem_len - r->mem_pos;

		got = n < left ? n : left;
		if (got)
			memcpy(buf, r->mem + r->mem_pos, got);
		r->mem_pos += got;
	} else {
		errno = 0;
		got = fread(buf, 1, n, r->f);
		if (got < n && ferror(r->f))
			return errno ? -errno : -EIO;	/* e.g. EISDIR for a directory */
	}
	r->pos += got;
	return (long)got;
}

__attribute__((format(printf, 4, 5)))
static int finish(struct sprobe_datafile_reader *r, int status, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	r->status = status;
	r->done = true;
	r->done_rc = rc;
	return rc;
}

/* Bounded decoder over one payload. Any read past the end sets bad, and
 * every value read after that is 0, so decoding code can check once. */
struct dec {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
	const char *why;
};

static inline uint32_t dec32(struct dec *d)
{
	if (d->bad || d->len - d->pos < 4) {
		d->bad = true;
		d->why = d->why ? d->why : "payload too short";
		return 0;
	}
	d->pos += 4;
	return get32(d->p + d->pos - 4);
}

static inline uint64_t dec64(struct dec *d)
{
	if (d->bad || d->len - d->pos < 8) {
		d->bad = true;
		d->why = d->why ? d->why : "payload too short";
		return 0;
	}
	d->pos += 8;
	return get64(d->p + d->pos - 8);
}

static inline const uint8_t *dec_bytes(struct dec *d, size_t n)
{
	if (d->bad || d->len - d->pos < n) {
		d->bad = true;
		d->why = d->why ? d->why : "length field runs past the payload";
		return NULL;
	}
	d->pos += n;
	return d->p + d->pos - n;
}

static void dec_fail(struct dec *d, const char *why)
{
	if (!d->bad)
		d->why = why;
	d->bad = true;
}

/* A NUL-terminated copy of n payload bytes in the reader's string area. */
static const char *dec_str(struct sprobe_datafile_reader *r, struct dec *d, uint32_t n)
{
	const uint8_t *src;
	char *dst;

	if (n > SPROBE_DF_MAX_STRING) {
		dec_fail(d, "string longer than the format allows");
		return "";
	}
	src = dec_bytes(d, n);
	if (!src)
		return "";
	/* n <= remaining payload, so strings_len + n + 1 stays within
	 * buf_cap + 8 for the at most two strings of one record. */
	dst = r->strings + r->strings_len;
	memcpy(dst, src, n);
	dst[n] = '\0';
	r->strings_len += (size_t)n + 1;
	return dst;
}

static void decode(struct sprobe_datafile_reader *r, struct dec *d, struct sprobe_df_record *rec)
{
	r->strings_len = 0;
	switch (rec->type) {
	case SPROBE_DF_HEADER: {
		struct sprobe_df_header *h = &rec->header;

		h->pid = dec32(d);
		h->mode = dec32(d);
		h->freq_hz = dec32(d);
		h->flags = dec32(d);
		h->start_realtime_ns = dec64(d);
		h->start_mono_ns = dec64(d);
		h->cmdline_len = dec32(d);
		h->cmdline = dec_str(r, d, h->cmdline_len);
		if (h->mode > SPROBE_DF_MODE_CPU)
			dec_fail(d, "unknown mode");
		break;
	}
	case SPROBE_DF_THREAD:
		rec->thread.tid = dec32(d);
		rec->thread.name_len = dec32(d);
		rec->thread.name = dec_str(r, d, rec->thread.name_len);
		break;
	case SPROBE_DF_MODULE: {
		struct sprobe_df_module *m = &rec->module;

		m->index = dec32(d);
		m->build_id_len = dec32(d);
		m->path_len = dec32(d);
		m->nranges = dec32(d);
		m->load_bias = dec64(d);
		if (m->build_id_len > SPROBE_DF_MAX_BUILD_ID) {
			dec_fail(d, "build-id longer than the format allows");
			break;
		}
		if (m->nranges > SPROBE_DF_MAX_RANGES) {
			dec_fail(d, "more address ranges than the format allows");
			break;
		}
		m->build_id = dec_bytes(d, m->build_id_len);
		m->path = dec_str(r, d, m->path_len);
		for (uint32_t i = 0; i < m->nranges && !d->bad; i++) {
			r->ranges[i].start = dec64(d);
			r->ranges[i].end = dec64(d);
			r->ranges[i].file_offset = dec64(d);
			if (r->ranges[i].end < r->ranges[i].start)
				dec_fail(d, "address range ends before it starts");
		}
		m->ranges = r->ranges;
		break;
	}
	case SPROBE_DF_SYMBOL:
		rec->symbol.pc = dec64(d);
		rec->symbol.offset = dec64(d);
		rec->symbol.module = dec32(d);
		rec->symbol.name_len = dec32(d);
		rec->symbol.name = dec_str(r, d, rec->symbol.name_len);
		break;
	case SPROBE_DF_SAMPLE: {
		struct sprobe_df_sample *s = &rec->sample;

		s->time_ns = dec64(d);
		s->tid = dec32(d);
		s->method = dec32(d);
		s->flags = dec32(d);
		s->weight = (s->flags >> SPROBE_DF_SAMPLE_WEIGHT_SHIFT) + 1;
		s->flags &= (1u << SPROBE_DF_SAMPLE_WEIGHT_SHIFT) - 1;
		s->nframes = dec32(d);
		s->stack_used = dec64(d);
		s->signal_ns = dec64(d);
		s->entry_ns = dec64(d);
		s->exit_ns = dec64(d);
		if (s->nframes > SPROBE_MAX_FRAMES) {
			dec_fail(d, "more frames than SPROBE_MAX_FRAMES");
			break;
		}
		for (uint32_t i = 0; i < s->nframes; i++)
			r->pcs[i] = dec64(d);
		s->pcs = r->pcs;
		break;
	}
	case SPROBE_DF_CAPTURE: {
		struct sprobe_df_capture *c = &rec->capture;
		uint32_t nreasons;

		c->time_ns = dec64(d);
		c->threads_total = dec32(d);
		c->threads_captured = dec32(d);
		c->threads_dropped = dec32(d);
		nreasons = dec32(d);
		c->ndropped_tids = dec32(d);
		(void)dec32(d);
		c->pause_ns = dec64(d);
		c->capture_ns = dec64(d);
		if (nreasons > 64) {
			dec_fail(d, "implausible number of drop reasons");
			break;
		}
		if (c->ndropped_tids > SPROBE_DF_MAX_DROPPED_TIDS) {
			dec_fail(d, "more dropped threads than the format allows");
			break;
		}
		memset(c->dropped, 0, sizeof(c->dropped));
		/* Reasons this reader does not know are folded into ERROR. */
		for (uint32_t i = 0; i < nreasons; i++) {
			uint32_t v = dec32(d);

			c->dropped[i < SPROBE_DROP__COUNT ? i : SPROBE_DROP_ERROR] += v;
		}
		for (uint32_t i = 0; i < c->ndropped_tids; i++) {
			r->dropped[i].tid = dec32(d);
			r->dropped[i].reason = dec32(d);
		}
		c->dropped_tids = r->dropped;
		break;
	}
	case SPROBE_DF_KWINDOW:
		rec->kwindow.tid = dec32(d);
		(void)dec32(d);
		rec->kwindow.generate_ns = dec64(d);
		rec->kwindow.deliver_ns = dec64(d);
		rec->kwindow.sigreturn_ns = dec64(d);
		rec->kwindow.offcpu_ns = dec64(d);
		break;
	case SPROBE_DF_LOST:
	case SPROBE_DF_TRAILER: {
		uint64_t *lost;
		uint32_t ntypes;

		if (rec->type == SPROBE_DF_LOST) {
			rec->lost.time_ns = dec64(d);
			lost = rec->lost.lost;
		} else {
			rec->trailer.end_realtime_ns = dec64(d);
			rec->trailer.end_mono_ns = dec64(d);
			rec->trailer.records = dec64(d);
			lost = rec->trailer.lost;
		}
		ntypes = dec32(d);
		(void)dec32(d);
		if (ntypes > 256) {
			dec_fail(d, "implausible number of record types");
			break;
		}
		memset(lost, 0, sizeof(uint64_t) * SPROBE_DF__TYPE_COUNT);
		for (uint32_t i = 0; i < ntypes; i++) {
			uint64_t v = dec64(d);

			if (i < SPROBE_DF__TYPE_COUNT)
				lost[i] = v;
		}
		break;
	}
	}
	/* Trailing bytes inside a known record: a newer minor revision may
	 * append fields, so they are allowed and ignored. */
}

int sprobe_datafile_reader__next(struct sprobe_datafile_reader *r, struct sprobe_df_record *rec)
{
	uint8_t hdr[SPROBE_DF_FRAME_SIZE];
	long n;

	if (!r || !rec)
		return -EINVAL;
	if (r->done)
		return r->done_rc;
	if (!r->preamble_done) {
		n = src_read(r, hdr, SPROBE_DF_PREAMBLE_SIZE);
		if (n < 0)
			return finish(r, SPROBE_DF_CORRUPT, (int)n, "read error: %s", strerror((int)-n));
		if (memcmp(hdr, SPROBE_DF_MAGIC, (size_t)n < 8 ? (size_t)n : 8) != 0)
			return finish(r, SPROBE_DF_CORRUPT, -EPROTO,
				      "not a stackprobe data file (bad magic)");
		if (n < SPROBE_DF_PREAMBLE_SIZE)
			return finish(r, SPROBE_DF_CUT_SHORT, 0,
				      n == 0 ? "file is empty: cut short before the preamble, no records"
					     : "file cut short inside the preamble (%ld of 16 bytes), no records",
				      n);
		if (get32(hdr + 8) < SPROBE_DF_VERSION_MIN || get32(hdr + 8) > SPROBE_DF_VERSION)
			return finish(r, SPROBE_DF_CORRUPT, -EPROTONOSUPPORT,
				      "data file version %u is not supported (this reader reads versions "
				      "%u to %u)",
				      get32(hdr + 8), SPROBE_DF_VERSION_MIN, SPROBE_DF_VERSION);
		if (get32(hdr + 12) != SPROBE_DF_PREAMBLE_SIZE)
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt preamble: size %u, expected %u", get32(hdr + 12),
				      SPROBE_DF_PREAMBLE_SIZE);
		r->preamble_done = true;
		r->good = r->pos;
	}
	for (;;) {
		uint64_t off = r->pos;
		uint32_t type, len;
		struct dec d;

		n = src_read(r, hdr, sizeof(hdr));
		if (n < 0)
			return finish(r, SPROBE_DF_CORRUPT, (int)n, "read error at offset %llu: %s",
				      (unsigned long long)off, strerror((int)-n));
		if (r->trailer_seen) {
			if (n == 0)
				return finish(r, SPROBE_DF_COMPLETE, 0, "%s", "");
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt: unexpected data after the trailer at offset %llu",
				      (unsigned long long)off);
		}
		if (n == 0)
			return finish(r, SPROBE_DF_CUT_SHORT, 0,
				      "file cut short: ends after %llu records (%llu bytes) without a trailer; "
				      "the recording did not finish cleanly",
				      (unsigned long long)r->records, (unsigned long long)off);
		if (n < SPROBE_DF_FRAME_SIZE)
			return finish(r, SPROBE_DF_CUT_SHORT, 0,
				      "file cut short inside a record header at offset %llu, after %llu "
				      "complete records; the recording did not finish cleanly",
				      (unsigned long long)off, (unsigned long long)r->records);
		if (sprobe_df__crc32c(0, hdr, 12) != get32(hdr + 12))
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt record header at offset %llu (checksum mismatch)",
				      (unsigned long long)off);
		type = get32(hdr);
		len = get32(hdr + 4);
		if (len > SPROBE_DF_MAX_PAYLOAD || type == 0)
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt record header at offset %llu (type %u, length %u)",
				      (unsigned long long)off, type, len);
		if (reserve_payload(r, len ? len : 1))
			return finish(r, SPROBE_DF_CORRUPT, -ENOMEM,
				      "out of memory reading a %u-byte record at offset %llu", len,
				      (unsigned long long)off);
		n = src_read(r, r->payload, len);
		if (n < 0)
			return finish(r, SPROBE_DF_CORRUPT, (int)n, "read error at offset %llu: %s",
				      (unsigned long long)off, strerror((int)-n));
		if ((uint32_t)n < len)
			return finish(r, SPROBE_DF_CUT_SHORT, 0,
				      "file cut short inside a %s record at offset %llu (%ld of %u bytes), "
				      "after %llu complete records; the recording did not finish cleanly",
				      sprobe_df_type__name(type), (unsigned long long)off, n, len,
				      (unsigned long long)r->records);
		if (sprobe_df__crc32c(0, r->payload, len) != get32(hdr + 8))
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt %s record at offset %llu (payload checksum mismatch)",
				      sprobe_df_type__name(type), (unsigned long long)off);
		if (type >= SPROBE_DF__TYPE_COUNT) {
			r->good = r->pos;	/* intact record of a newer kind: skip */
			continue;
		}
		if ((r->records == 0) != (type == SPROBE_DF_HEADER))
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      r->records == 0 ? "corrupt: first record at offset %llu is a %s record, not the header"
						      : "corrupt: second header record at offset %llu (%s)",
				      (unsigned long long)off, sprobe_df_type__name(type));
		memset(rec, 0, sizeof(*rec));
		rec->type = type;
		rec->offset = off;
		d = (struct dec){ .p = r->payload, .len = len };
		decode(r, &d, rec);
		if (d.bad)
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt %s record at offset %llu: %s", sprobe_df_type__name(type),
				      (unsigned long long)off, d.why ? d.why : "malformed");
		if (type == SPROBE_DF_TRAILER)
			r->trailer_seen = true;
		r->records++;
		r->good = r->pos;
		return 1;
	}
}
