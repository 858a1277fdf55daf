/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file format: record framing (CRC32C), type names and the record
 * encoder the writer and the stream use. Format: docs/FORMAT.md; the
 * writer is writer.c, the reader reader.c.
 *
 * Invariant the reader relies on: the writer only ever appends whole framed
 * records, so a file cut by a crash is a prefix of a valid file and every
 * record before the cut is intact. Each frame carries a CRC32C of its own
 * header and of its payload: a cut inside a record is told apart from a
 * damaged record by whether the bytes run out (cut short) or are present but
 * wrong (corrupt).
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

/* ---- CRC32C ----------------------------------------------------------- */

/* Slicing-by-8 over constant tables (no lazy init, so no race and usable
 * in a signal handler). CRC32C rather than CRC32: better error detection
 * for short records, and the same polynomial as the SSE4.2/ARMv8 crc
 * instructions should this ever need to be faster. */
#include "userspace/datafile/datafile_crc.h"

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
		[SPROBE_DF_TRAILER] = "trailer", [SPROBE_DF_PROCESS] = "process",
		[SPROBE_DF_EXIT] = "exit",	 [SPROBE_DF_SRCLINE] = "srcline",
		[SPROBE_DF_THREAD_CPU] = "thread-cpu",
	};
	if (type < SPROBE_DF__TYPE_COUNT && names[type])
		return names[type];
	return "unknown";
}

const char *sprobe_df_exit_how__name(uint32_t how)
{
	static const char *const names[] = {
		[SPROBE_DF_EXIT_UNKNOWN] = "unknown", [SPROBE_DF_EXIT_EXITED] = "exited",
		[SPROBE_DF_EXIT_KILLED] = "killed",   [SPROBE_DF_EXIT_EXECED] = "exec'd",
		[SPROBE_DF_EXIT_RUNNING] = "running",
	};
	return how < sizeof(names) / sizeof(names[0]) ? names[how] : "unknown";
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

bool sprobe_df__srcline_text_ok(const char *text, uint32_t len, uint32_t n)
{
	uint32_t nuls = 0;

	if (!text || len == 0 || len > SPROBE_DF_MAX_STRING || text[len - 1] != '\0')
		return false;
	for (uint32_t i = 0; i < len; i++)
		nuls += text[i] == '\0';
	return nuls == 2 * n;
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
	case SPROBE_DF_THREAD_CPU:
		enc64(&e, rec->thread_cpu.time_ns);
		enc32(&e, rec->thread_cpu.tid);
		enc32(&e, rec->thread_cpu.flags);
		enc64(&e, rec->thread_cpu.cpu_ns);
		break;
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
	case SPROBE_DF_PROCESS: {
		const struct sprobe_df_process *p = &rec->process;

		if (!str_ok(p->name, p->name_len) || !str_ok(p->exe, p->exe_len) ||
		    !str_ok(p->note, p->note_len))
			return -EINVAL;
		enc32(&e, p->pid);
		enc32(&e, p->ppid);
		enc32(&e, p->exec_index);
		enc32(&e, p->flags);
		enc64(&e, p->start_mono_ns);
		enc32(&e, p->name_len);
		enc32(&e, p->exe_len);
		enc32(&e, p->note_len);
		enc32(&e, 0);
		enc_bytes(&e, p->name, p->name_len);
		enc_bytes(&e, p->exe, p->exe_len);
		enc_bytes(&e, p->note, p->note_len);
		break;
	}
	case SPROBE_DF_EXIT: {
		const struct sprobe_df_exit *x = &rec->exit;

		if (!str_ok(x->note, x->note_len))
			return -EINVAL;
		enc32(&e, x->pid);
		enc32(&e, x->exec_index);
		enc32(&e, x->how);
		enc32(&e, (uint32_t)x->code);
		enc64(&e, x->time_ns);
		enc32(&e, x->part_status);
		enc32(&e, x->note_len);
		enc_bytes(&e, x->note, x->note_len);
		break;
	}
	case SPROBE_DF_SRCLINE: {
		const struct sprobe_df_srcline *l = &rec->srcline;

		if (l->n == 0 || l->n > SPROBE_DF_MAX_INLINE || !l->lines ||
		    !sprobe_df__srcline_text_ok(l->text, l->text_len, l->n))
			return -EINVAL;
		enc64(&e, l->pc);
		enc32(&e, l->n);
		enc32(&e, l->text_len);
		for (uint32_t i = 0; i < l->n; i++)
			enc32(&e, l->lines[i]);
		enc_bytes(&e, l->text, l->text_len);
		break;
	}
	default:
		return -EINVAL;
	}
	return (long)e.len;
}

