/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file reader. Format: docs/FORMAT.md; framing and the cut-short /
 * corrupt distinction: format.c.
 *
 * The reader treats every byte as hostile: every length is checked against
 * what is left of the payload before use, counts against their documented
 * maxima, and no allocation depends on a value read from the file.
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

#include "userspace/datafile/datafile_internal.h"

/* ---- reader ----------------------------------------------------------- */

struct sprobe_datafile_reader {
	FILE *f;			/* NULL when reading memory */
	bool own_f;
	const uint8_t *mem;
	size_t mem_len, mem_pos;

	bool preamble_done, trailer_seen, done;
	uint32_t version;		/* of the preamble */
	uint32_t last_type;		/* of the last record returned */
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
	uint32_t lines[SPROBE_DF_MAX_INLINE];
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
 * one payload never exceed it, plus one NUL each (at most three strings per
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
	 * buf_cap + 8 for the at most three strings of one record. */
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
	case SPROBE_DF_THREAD_CPU:
		rec->thread_cpu.time_ns = dec64(d);
		rec->thread_cpu.tid = dec32(d);
		rec->thread_cpu.flags = dec32(d);
		rec->thread_cpu.cpu_ns = dec64(d);
		break;
	case SPROBE_DF_KWINDOW:
		rec->kwindow.tid = dec32(d);
		(void)dec32(d);
		rec->kwindow.generate_ns = dec64(d);
		rec->kwindow.deliver_ns = dec64(d);
		rec->kwindow.sigreturn_ns = dec64(d);
		rec->kwindow.offcpu_ns = dec64(d);
		break;
	case SPROBE_DF_PROCESS: {
		struct sprobe_df_process *p = &rec->process;

		p->pid = dec32(d);
		p->ppid = dec32(d);
		p->exec_index = dec32(d);
		p->flags = dec32(d);
		p->start_mono_ns = dec64(d);
		p->name_len = dec32(d);
		p->exe_len = dec32(d);
		p->note_len = dec32(d);
		(void)dec32(d);
		p->name = dec_str(r, d, p->name_len);
		p->exe = dec_str(r, d, p->exe_len);
		p->note = dec_str(r, d, p->note_len);
		break;
	}
	case SPROBE_DF_EXIT: {
		struct sprobe_df_exit *x = &rec->exit;

		x->pid = dec32(d);
		x->exec_index = dec32(d);
		x->how = dec32(d);
		x->code = (int32_t)dec32(d);
		x->time_ns = dec64(d);
		x->part_status = dec32(d);
		x->note_len = dec32(d);
		x->note = dec_str(r, d, x->note_len);
		if (x->part_status > SPROBE_DF_CORRUPT)
			dec_fail(d, "unknown part status");
		break;
	}
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
	case SPROBE_DF_SRCLINE: {
		struct sprobe_df_srcline *l = &rec->srcline;

		l->pc = dec64(d);
		l->n = dec32(d);
		l->text_len = dec32(d);
		if (l->n == 0 || l->n > SPROBE_DF_MAX_INLINE) {
			dec_fail(d, "srcline entry count out of range");
			break;
		}
		for (uint32_t i = 0; i < l->n; i++)
			r->lines[i] = dec32(d);
		l->lines = r->lines;
		l->text = dec_str(r, d, l->text_len);
		if (!d->bad && !sprobe_df__srcline_text_ok(l->text, l->text_len, l->n))
			dec_fail(d, "srcline text is not its entries' names and files");
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
		r->version = get32(hdr + 8);
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
		if (r->trailer_seen && r->version < 3) {
			if (n == 0)
				return finish(r, SPROBE_DF_COMPLETE, 0, "%s", "");
			return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
				      "corrupt: unexpected data after the trailer at offset %llu",
				      (unsigned long long)off);
		}
		/* Version 3: parts follow each other; the file is whole when it
		 * ends after a part's trailer or after the EXIT record that
		 * `stackprobe record` writes behind each part it merged. */
		if (n == 0 && r->version >= 3 && r->records &&
		    (r->last_type == SPROBE_DF_TRAILER || r->last_type == SPROBE_DF_EXIT))
			return finish(r, SPROBE_DF_COMPLETE, 0, "%s", "");
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
		if (type >= SPROBE_DF__TYPE_COUNT ||
		    (type != 0 && strcmp(sprobe_df_type__name(type), "unknown") == 0)) {
			/* intact record of a newer kind (or of a reserved
			 * number this reader has no decoder for): skip */
			r->good = r->pos;
			continue;
		}
		if (r->version >= 3) {
			/* A part starts at its HEADER, anywhere; after its trailer
			 * come only what `record` adds (kernel windows, EXIT)
			 * or the next part; a process the
			 * agent never ran in has only PROCESS and EXIT. */
			if (r->records == 0 && type != SPROBE_DF_HEADER && type != SPROBE_DF_PROCESS &&
			    type != SPROBE_DF_EXIT)
				return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
					      "corrupt: first record at offset %llu is a %s record, not "
					      "the header",
					      (unsigned long long)off, sprobe_df_type__name(type));
			if (type == SPROBE_DF_HEADER)
				r->trailer_seen = false;
			else if (r->trailer_seen && type != SPROBE_DF_EXIT && type != SPROBE_DF_PROCESS &&
				 type != SPROBE_DF_KWINDOW)
				return finish(r, SPROBE_DF_CORRUPT, -EBADMSG,
					      "corrupt: a %s record at offset %llu follows its part's "
					      "trailer",
					      sprobe_df_type__name(type), (unsigned long long)off);
		} else if ((r->records == 0) != (type == SPROBE_DF_HEADER))
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
		r->last_type = type;
		r->records++;
		r->good = r->pos;
		return 1;
	}
}

