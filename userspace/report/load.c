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

/* Index of the thread TID of the current process, created on first
 * sight. Returns -ENOMEM. */
static long thread_get(struct sprobe_report *r, uint32_t tid)
{
	uint64_t key = (uint64_t)r->cur_proc << 32 | tid;
	uint32_t i;

	if (ro_map__get(&r->tid_idx, key, &i))
		return i;
	struct thread t = { .tid = tid, .proc = r->cur_proc };

	if (VEC_PUSH(r->threads, t))
		return -ENOMEM;
	i = (uint32_t)(r->threads.n - 1);
	if (ro_map__put(&r->tid_idx, key, i) || ro_map__put(&r->tid_any, tid, i))
		return -ENOMEM;
	return i;
}

static char *dup_str(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		if (n)
			memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* A new process entry (a part's HEADER, or a standalone PROCESS). */
static long proc_new(struct sprobe_report *r, uint32_t pid)
{
	struct process p = { .pid = pid };

	if (r->procs.n >= MAX_PROCS)
		return -E2BIG;
	p.name = strdup("");
	p.exe = strdup("");
	p.note = strdup("");
	p.exit_note = strdup("");
	if (!p.name || !p.exe || !p.note || !p.exit_note || VEC_PUSH(r->procs, p)) {
		free(p.name);
		free(p.exe);
		free(p.note);
		free(p.exit_note);
		return -ENOMEM;
	}
	return (long)(r->procs.n - 1);
}

/* The current part's process (one is made for a file that starts without
 * a header: a corrupt one still loads what it can). */
static struct process *cur(struct sprobe_report *r)
{
	if (!r->procs.n && proc_new(r, 0) < 0)
		return NULL;
	return &r->procs.v[r->cur_proc];
}

/* The process image (pid, exec) an EXIT record is about: the latest entry
 * with that pid and exec index. */
static struct process *proc_find(struct sprobe_report *r, uint32_t pid, uint32_t exec)
{
	for (size_t i = r->procs.n; i-- > 0;)
		if (r->procs.v[i].pid == pid && r->procs.v[i].exec_index == exec)
			return &r->procs.v[i];
	return NULL;
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

	/* Past MAX_PROCS parts, the rest is counted, not loaded (until an
	 * EXIT, which may name a loaded one). */
	if (rec->type == SPROBE_DF_HEADER && r->procs.n >= MAX_PROCS) {
		r->procs_skipped++;
		r->skipping = true;
		return 0;
	}
	if (r->skipping && rec->type != SPROBE_DF_HEADER)
		return 0;
	switch (rec->type) {
	case SPROBE_DF_HEADER: {
		long pi = r->procs.n == 1 && !r->procs.v[0].has_header && !r->threads.n
				  ? 0 /* the entry made for records before it */
				  : proc_new(r, rec->header.pid);
		struct process *p;

		if (pi < 0)
			return (int)pi;
		r->cur_proc = (uint32_t)pi;
		p = &r->procs.v[pi];
		p->pid = rec->header.pid;
		p->has_header = true;
		p->mode = rec->header.mode;
		p->freq_hz = rec->header.freq_hz;
		p->start_realtime_ns = rec->header.start_realtime_ns;
		p->start_mono_ns = rec->header.start_mono_ns;
		free(p->cmdline);
		p->cmdline = dup_str(rec->header.cmdline, rec->header.cmdline_len);
		p->cmdline_len = rec->header.cmdline_len;
		if (!p->cmdline)
			return -ENOMEM;
		/* The recording's header is its first process's. */
		if (!r->has_header) {
			char *cmd = dup_str(rec->header.cmdline, rec->header.cmdline_len);

			if (!cmd)
				return -ENOMEM;
			r->header = rec->header;
			r->header.cmdline = cmd;
			r->has_header = true;
		}
		break;
	}
	case SPROBE_DF_PROCESS: {
		const struct sprobe_df_process *x = &rec->process;
		struct process *p;

		/* Standalone (unsampled, or a part with nothing intact), or
		 * the one after its part's header. */
		if ((x->flags & SPROBE_DF_PROCESS_UNSAMPLED) || !r->procs.n ||
		    !r->procs.v[r->cur_proc].has_header || r->procs.v[r->cur_proc].pid != x->pid) {
			long pi = proc_new(r, x->pid);

			if (pi < 0)
				return pi == -E2BIG ? 0 : (int)pi;
			r->cur_proc = (uint32_t)pi;
		}
		p = &r->procs.v[r->cur_proc];
		p->ppid = x->ppid;
		p->exec_index = x->exec_index;
		p->flags = x->flags;
		if (x->start_mono_ns)
			p->start_mono_ns = x->start_mono_ns;
		free(p->name);
		free(p->exe);
		free(p->note);
		p->name = strdup(x->name);
		p->exe = strdup(x->exe);
		p->note = strdup(x->note);
		if (!p->name || !p->exe || !p->note)
			return -ENOMEM;
		break;
	}
	case SPROBE_DF_EXIT: {
		const struct sprobe_df_exit *x = &rec->exit;
		struct process *p = proc_find(r, x->pid, x->exec_index);

		if (!p)
			break;
		p->has_exit = true;
		p->exit_how = x->how;
		p->exit_code = x->code;
		p->part_status = x->part_status;
		if (x->time_ns && x->time_ns > p->end_mono_ns)
			p->end_mono_ns = x->time_ns;
		free(p->exit_note);
		p->exit_note = strdup(x->note);
		if (!p->exit_note)
			return -ENOMEM;
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

		if (!cur(r)) {
			free(name);
			return -ENOMEM;
		}
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

		mod.proc = r->cur_proc;
		mod.path = strdup(m->path);
		{
			/* The agent's own library: its wrapper frames (a wait
			 * or exec wrapper between the program and libc) are
			 * not the program's, and the reports leave them out. */
			const char *b = mod.path ? strrchr(mod.path, '/') : NULL;

			b = b ? b + 1 : mod.path;
			mod.agent = b && strncmp(b, "libstackprobe.so", 16) == 0;
		}
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
		uint64_t mkey = (uint64_t)r->cur_proc << 32 | m->index;

		if (!cur(r))
			return -ENOMEM;
		if (ro_map__get(&r->mod_idx, mkey, &pos)) {
			/* Same index again (re-announced): replace. */
			free(r->modules.v[pos].path);
			free(r->modules.v[pos].build_id);
			free(r->modules.v[pos].ranges);
			r->modules.v[pos] = mod;
			break;
		}
		if (VEC_PUSH(r->modules, mod) ||
		    ro_map__put(&r->mod_idx, mkey, (uint32_t)(r->modules.n - 1))) {
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
		struct symbol sym = { .key = pc_key(r->cur_proc, s->pc), .module = SPROBE_DF_NO_MODULE,
				      .offset = s->offset };
		uint32_t mpos;

		if (name < 0)
			return (int)name;
		if (s->module != SPROBE_DF_NO_MODULE &&
		    ro_map__get(&r->mod_idx, (uint64_t)r->cur_proc << 32 | s->module, &mpos))
			sym.module = mpos;
		sym.name = (uint32_t)name;
		if (VEC_PUSH(r->syms, sym) ||
		    ro_map__put(&r->sym_idx, pc_key(r->cur_proc, s->pc), (uint32_t)(r->syms.n - 1)))
			return -ENOMEM;
		break;
	}
	case SPROBE_DF_SRCLINE: {
		/* Keyed like the part's pcs (its process's). */
		struct sprobe_df_srcline l = rec->srcline;

		if (l.pc >> 63)
			return 0; /* not a user pc */
		l.pc = pc_key(r->cur_proc, l.pc);
		return sprobe_rep__load_srcline(r, &l);
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

		if (!cur(r))
			return -ENOMEM;
		ti = thread_get(r, s->tid);
		if (ti < 0)
			return -ENOMEM;
		smp.thread = (uint32_t)ti;
		if (ro_grow((void **)&r->pcs.v, &r->pcs.cap, r->pcs.n + s->nframes, 8))
			return -ENOMEM;
		for (uint32_t k = 0; k < s->nframes; k++)
			r->pcs.v[r->pcs.n + k] = pc_key(r->cur_proc, s->pcs[k]);
		r->pcs.n += s->nframes;
		if (VEC_PUSH(r->samples, smp))
			return -ENOMEM;
		t = &r->threads.v[ti];
		t->samples += smp.weight;
		r->procs.v[t->proc].samples += smp.weight;
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
		if (c->time_ns && (!r->cap_first_ns || c->time_ns < r->cap_first_ns))
			r->cap_first_ns = c->time_ns;
		if (c->time_ns > r->cap_last_ns)
			r->cap_last_ns = c->time_ns;
		if (cur(r))
			cur(r)->captures++;
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

		if (!cur(r))
			return -ENOMEM;
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
		if (cur(r)) {
			cur(r)->has_trailer = true;
			if (rec->trailer.end_mono_ns > cur(r)->end_mono_ns)
				cur(r)->end_mono_ns = rec->trailer.end_mono_ns;
		}
		/* The recording's trailer: its first process's (or the
		 * latest end, see sprobe_rep__wall_ns()). */
		if (!r->has_trailer || r->cur_proc == 0)
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
