/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file -> report model: every record of the reader, checked (a hostile
 * file may hold anything), into the tables of report_internal.h. pcs are
 * resolved later, by the aggregation (model.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/trace.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"

/* ---- loading ------------------------------------------------------------ */

static void seen_time(struct sprobe_report *r, uint64_t t)
{
	if (!t)
		return;
	if (t < r->t_min)
		r->t_min = t;
	if (t > r->t_max)
		r->t_max = t;
}

/* Index of the thread TID, created on first sight. Returns -ENOMEM. */
static long thread_get(struct sprobe_report *r, uint32_t tid)
{
	uint32_t i;

	if (ro_map__get(&r->tid_idx, tid, &i))
		return i;
	struct thread t = { .tid = tid };

	if (VEC_PUSH(r->threads, t))
		return -ENOMEM;
	i = (uint32_t)(r->threads.n - 1);
	if (ro_map__put(&r->tid_idx, tid, i))
		return -ENOMEM;
	return i;
}

static char *hex(const uint8_t *b, uint32_t n)
{
	char *s = malloc((size_t)n * 2 + 1);

	if (!s)
		return NULL;
	/* Not sprintf: the macOS 13+ SDK marks it deprecated (-Werror). */
	static const char digits[] = "0123456789abcdef";

	for (uint32_t i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

static int load_record(struct sprobe_report *r, const struct sprobe_df_record *rec)
{
	long ti;
	bool added;

	switch (rec->type) {
	case SPROBE_DF_HEADER: {
		char *cmd = malloc((size_t)rec->header.cmdline_len + 1);

		if (!cmd)
			return -ENOMEM;
		memcpy(cmd, rec->header.cmdline, rec->header.cmdline_len);
		cmd[rec->header.cmdline_len] = '\0';
		free((char *)r->header.cmdline);
		r->header = rec->header;
		r->header.cmdline = cmd;
		r->has_header = true;
		break;
	}
	case SPROBE_DF_THREAD_CPU: {
		struct thread *t;

		ti = thread_get(r, rec->thread_cpu.tid);
		if (ti < 0)
			return -ENOMEM;
		t = &r->threads.v[ti];
		if (!t->cpu_seen || rec->thread_cpu.cpu_ns > t->cpu_ns)
			t->cpu_ns = rec->thread_cpu.cpu_ns; /* a CPU clock only grows */
		t->cpu_flags |= rec->thread_cpu.flags;
		t->cpu_seen = true;
		break;
	}
	case SPROBE_DF_THREAD: {
		char *name = strdup(rec->thread.name);

		ti = thread_get(r, rec->thread.tid);
		if (ti < 0 || !name) {
			free(name);
			return -ENOMEM;
		}
		free(r->threads.v[ti].name);	/* renamed: last name wins */
		r->threads.v[ti].name = name;
		break;
	}
	case SPROBE_DF_MODULE: {
		const struct sprobe_df_module *m = &rec->module;
		struct module mod = { .index = m->index, .load_bias = m->load_bias,
				      .nranges = m->nranges };
		uint32_t pos;

		mod.path = strdup(m->path);
		mod.build_id = hex(m->build_id, m->build_id_len);
		mod.ranges = calloc(m->nranges ? m->nranges : 1, sizeof(*mod.ranges));
		if (!mod.path || !mod.build_id || !mod.ranges) {
			free(mod.path);
			free(mod.build_id);
			free(mod.ranges);
			return -ENOMEM;
		}
		if (m->nranges)
			memcpy(mod.ranges, m->ranges, m->nranges * sizeof(*mod.ranges));
		if (ro_map__get(&r->mod_idx, m->index, &pos)) {
			/* Same index again (re-announced): replace. */
			free(r->modules.v[pos].path);
			free(r->modules.v[pos].build_id);
			free(r->modules.v[pos].ranges);
			r->modules.v[pos] = mod;
			break;
		}
		if (VEC_PUSH(r->modules, mod) ||
		    ro_map__put(&r->mod_idx, m->index, (uint32_t)(r->modules.n - 1))) {
			free(mod.path);
			free(mod.build_id);
			free(mod.ranges);
			return -ENOMEM;
		}
		break;
	}
	case SPROBE_DF_SYMBOL: {
		const struct sprobe_df_symbol *s = &rec->symbol;
		long name = sprobe_rep__bytemap_intern(&r->names, s->name, s->name_len, &added);
		struct symbol sym = { .module = s->module, .offset = s->offset };

		if (name < 0)
			return (int)name;
		sym.name = (uint32_t)name;
		if (VEC_PUSH(r->syms, sym) ||
		    ro_map__put(&r->sym_idx, s->pc, (uint32_t)(r->syms.n - 1)))
			return -ENOMEM;
		break;
	}
	case SPROBE_DF_SAMPLE: {
		const struct sprobe_df_sample *s = &rec->sample;
		struct sample smp = {
			.time_ns = s->time_ns, .pc_off = r->pcs.n, .nframes = (uint16_t)s->nframes,
			.method = s->method < NMETHODS ? (uint8_t)s->method : 0,
			.truncated = !!(s->flags & SPROBE_DF_SAMPLE_TRUNCATED),
			.weight = s->weight ? s->weight : 1,
		};
		struct thread *t;

		ti = thread_get(r, s->tid);
		if (ti < 0)
			return -ENOMEM;
		smp.thread = (uint32_t)ti;
		if (ro_grow((void **)&r->pcs.v, &r->pcs.cap, r->pcs.n + s->nframes, 8))
			return -ENOMEM;
		if (s->nframes)
			memcpy(r->pcs.v + r->pcs.n, s->pcs, s->nframes * sizeof(uint64_t));
		r->pcs.n += s->nframes;
		if (VEC_PUSH(r->samples, smp))
			return -ENOMEM;
		t = &r->threads.v[ti];
		t->samples += smp.weight;
		t->truncated += smp.truncated ? smp.weight : 0;
		t->methods[smp.method] += smp.weight;
		if (s->stack_used > t->stack_max)
			t->stack_max = s->stack_used;
		if (s->method == SPROBE_METHOD_ZERO_PAUSE) {
			/* Read while blocked, no signal: a 0 ns pause. Its
			 * entry/exit bracket the probe's reads; the kernel
			 * must show no signal for it (zero-pause check). */
			struct sprobe_pause_zp_sample z = { .tid = (pid_t)s->tid,
							    .start_ns = s->time_ns,
							    .end_ns = s->exit_ns };
			if (VEC_PUSH(r->zpv, z) || VEC_PUSH(t->win, 0))
				return -ENOMEM;
		} else if (s->entry_ns && s->exit_ns >= s->entry_ns) {
			struct sprobe_pause_swindow sw = { .tid = (pid_t)s->tid, .signal_ns = s->signal_ns,
							   .entry_ns = s->entry_ns, .exit_ns = s->exit_ns };
			if (VEC_PUSH(r->swv, sw))
				return -ENOMEM;
			r->samples.v[r->samples.n - 1].window_ns = s->exit_ns - s->entry_ns;
			if (VEC_PUSH(t->win, s->exit_ns - s->entry_ns))
				return -ENOMEM;
		}
		if (s->signal_ns && s->exit_ns >= s->signal_ns &&
		    VEC_PUSH(t->lat, s->exit_ns - s->signal_ns))
			return -ENOMEM;
		seen_time(r, s->time_ns);
		seen_time(r, s->exit_ns);
		break;
	}
	case SPROBE_DF_CAPTURE: {
		const struct sprobe_df_capture *c = &rec->capture;

		r->captures++;
		r->cap_total += c->threads_total;
		r->cap_captured += c->threads_captured;
		r->cap_dropped += c->threads_dropped;
		for (int i = 0; i < SPROBE_DROP__COUNT; i++)
			r->cap_dropped_reason[i] += c->dropped[i];
		r->cap_pause_ns += c->pause_ns;
		if (VEC_PUSH(r->capture_ns, c->capture_ns))
			return -ENOMEM;
		if (c->time_ns &&
		    ro_map__put(&r->cap_end, c->time_ns,
			       c->capture_ns < UINT32_MAX - 1 ? (uint32_t)c->capture_ns : UINT32_MAX - 1))
			return -ENOMEM;
		for (uint32_t i = 0; i < c->ndropped_tids; i++) {
			uint32_t reason = c->dropped_tids[i].reason;

			ti = thread_get(r, c->dropped_tids[i].tid);
			if (ti < 0)
				return -ENOMEM;
			r->threads.v[ti].dropped[reason < SPROBE_DROP__COUNT ? reason
									     : SPROBE_DROP_ERROR]++;
		}
		seen_time(r, c->time_ns);
		seen_time(r, c->time_ns + c->capture_ns);
		break;
	}
	case SPROBE_DF_KWINDOW: {
		const struct sprobe_df_kwindow *k = &rec->kwindow;
		struct thread *t;

		ti = thread_get(r, k->tid);
		if (ti < 0)
			return -ENOMEM;
		t = &r->threads.v[ti];
		r->kwindows++;
		struct sprobe_pause_kwindow kw = {
			.tid = (pid_t)k->tid, .generate_ns = k->generate_ns, .deliver_ns = k->deliver_ns,
			.sigreturn_ns = k->sigreturn_ns, .offcpu_ns = k->offcpu_ns,
			.flags = (k->generate_ns ? 0 : SPROBE_PAUSE_KW_NO_GENERATE) |
				 (k->sigreturn_ns ? 0 : SPROBE_PAUSE_KW_INCOMPLETE),
		};
		if (k->deliver_ns && VEC_PUSH(r->kwv, kw))
			return -ENOMEM;
		if (k->deliver_ns && k->sigreturn_ns >= k->deliver_ns &&
		    VEC_PUSH(t->kpause, k->sigreturn_ns - k->deliver_ns))
			return -ENOMEM;
		if (k->generate_ns && k->deliver_ns >= k->generate_ns &&
		    VEC_PUSH(t->kdelay, k->deliver_ns - k->generate_ns))
			return -ENOMEM;
		t->koffcpu += k->offcpu_ns;
		break;
	}
	case SPROBE_DF_LOST:
		for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			if (rec->lost.lost[i] > r->lost[i])
				r->lost[i] = rec->lost.lost[i];
		break;
	case SPROBE_DF_TRAILER:
		r->trailer = rec->trailer;
		r->has_trailer = true;
		for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			if (rec->trailer.lost[i] > r->lost[i])
				r->lost[i] = rec->trailer.lost[i];
		break;
	}
	return 0;
}

int sprobe_report__load(struct sprobe_report *r, struct sprobe_datafile_reader *rd)
{
	struct sprobe_df_record rec;
	int rc;

	if (!r || !rd)
		return -EINVAL;
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		int err = load_record(r, &rec);

		if (err)
			return err;
		r->records++;
	}
	r->status = sprobe_datafile_reader__status(rd);
	free(r->message);
	r->message = strdup(sprobe_datafile_reader__error(rd));
	r->aggregated = false;
	if (!r->message)
		return -ENOMEM;
	return rc;
}

int sprobe_report__load_file(struct sprobe_report *r, const char *path)
{
	struct sprobe_datafile_reader *rd;
	int rc;

	if (!r || !path)
		return -EINVAL;
	rd = sprobe_datafile_reader__open(path);
	if (!rd)
		return -errno;
	rc = sprobe_report__load(r, rd);
	sprobe_datafile_reader__free(rd);
	return rc;
}
