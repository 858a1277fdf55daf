/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report model (report_internal.h): its life (new, free), and the
 * queries over the loaded tables the writers share (processes, windows,
 * totals, the kernel-vs-self check). load.c fills the tables, aggregate.c
 * turns pcs into functions and stacks, access.c serves the public
 * accessors.
 *
 * Loading keeps samples as (thread, pcs) and resolves pcs only once all
 * records are in, because symbol records are written at flush, after the
 * samples that use them. Each distinct pc is resolved once (hash map).
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

#include "userspace/report/report_internal.h"

const char *const sprobe_rep__method_names[NMETHODS] = {
	"none", "signal", "vm-readv", "zero-pause", "suspend", "perf-event",
};

const char *const sprobe_rep__drop_names[SPROBE_DROP__COUNT] = {
	"none", "exited", "blocked", "timeout", "no-stack", "no-slot", "error",
};

struct sprobe_report *sprobe_report__new(const struct sprobe_report_opts *opts)
{
	struct sprobe_report *r;

	if (opts && opts->sz < sizeof(size_t)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->top = 25;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, tid) + sizeof(uint32_t))
		r->filter_tid = opts->tid;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, pid) + sizeof(uint32_t))
		r->filter_pid = opts->pid;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, top) + sizeof(uint32_t) &&
	    opts->top)
		r->top = opts->top;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, source) + sizeof(char *) &&
	    opts->source)
		r->source = strdup(opts->source);
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, labels) + sizeof(char *) &&
	    opts->labels && !(r->labels = strdup(opts->labels))) {
		sprobe_report__free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->message = strdup("");
	r->t_min = UINT64_MAX;
	if (!r->message || (opts && opts->sz >= offsetof(struct sprobe_report_opts, source) +
							sizeof(char *) && opts->source && !r->source)) {
		sprobe_report__free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}

void sprobe_report__free(struct sprobe_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->threads.n; i++) {
		struct thread *t = &r->threads.v[i];

		free(t->name);
		free(t->win.v);
		free(t->lat.v);
		free(t->kpause.v);
		free(t->kdelay.v);
	}
	free(r->threads.v);
	ro_map__free(&r->tid_idx);
	ro_map__free(&r->tid_any);
	for (size_t i = 0; i < r->procs.n; i++) {
		struct process *p = &r->procs.v[i];

		free(p->name);
		free(p->exe);
		free(p->note);
		free(p->cmdline);
		free(p->exit_note);
	}
	free(r->procs.v);
	for (size_t i = 0; i < r->modules.n; i++) {
		free(r->modules.v[i].path);
		free(r->modules.v[i].build_id);
		free(r->modules.v[i].ranges);
	}
	free(r->modules.v);
	ro_map__free(&r->mod_idx);
	sprobe_rep__bytemap_free(&r->names);
	ro_map__free(&r->sym_idx);
	free(r->syms.v);
	sprobe_rep__inline_free(r);
	free(r->samples.v);
	free(r->pcs.v);
	free(r->capture_ns.v);
	free(r->kwv.v);
	free(r->swv.v);
	free(r->zpv.v);
	ro_map__free(&r->cap_end);
	free(r->funcs.v);
	ro_map__free(&r->pc_func);
	sprobe_rep__bytemap_free(&r->stackmap);
	free(r->stacks.v);
	free(r->all_win.v);
	free((char *)r->header.cmdline);
	free(r->source);
	free(r->labels);
	free(r->message);
	free(r);
}

int sprobe_report__status(const struct sprobe_report *r)
{
	return r ? r->status : SPROBE_DF_CORRUPT;
}

const char *sprobe_report__message(const struct sprobe_report *r)
{
	return r && r->message ? r->message : "";
}

/* ---- queries the writers share ------------------------------------------ */

const char *sprobe_rep__base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

const char *sprobe_rep__proc_name(const struct sprobe_report *r, uint32_t p, char *buf, size_t len)
{
	const struct process *pr = &r->procs.v[p];

	if (pr->name && *pr->name)
		return pr->name;
	if (pr->cmdline && *pr->cmdline)
		return sprobe_rep__base_name(pr->cmdline);
	snprintf(buf, len, "pid %u", pr->pid);
	return buf;
}

uint64_t sprobe_report__samples(const struct sprobe_report *r)
{
	uint64_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->threads.n; i++)
		if (sprobe_rep__thread_selected(r, (uint32_t)i))
			n += r->threads.v[i].samples;
	return n;
}

/* Nearest-rank percentile of a sorted vector (p in 0..100). */
uint64_t sprobe_rep__pct(const u64vec *v, unsigned p)
{
	size_t rank;

	if (!v->n)
		return 0;
	rank = (v->n * p + 99) / 100;
	if (rank == 0)
		rank = 1;
	return v->v[rank - 1];
}

uint64_t sprobe_rep__sum(const u64vec *v)
{
	uint64_t s = 0;

	for (size_t i = 0; i < v->n; i++)
		s += v->v[i];
	return s;
}

/* How a process image ended, in words: "exit 0", "killed by SIGINT". */
void sprobe_rep__proc_end(const struct process *p, char *buf, size_t len)
{
	if (!p->has_exit) {
		snprintf(buf, len, "%s", p->has_trailer ? "ended" : "?");
		return;
	}
	switch (p->exit_how) {
	case SPROBE_DF_EXIT_EXITED:
		snprintf(buf, len, "exit %d", p->exit_code);
		break;
	case SPROBE_DF_EXIT_KILLED: {
		/* Linux numbers (the recording's), whatever the reader runs on. */
		static const char *const names[32] = {
			[1] = "HUP",   [2] = "INT",   [3] = "QUIT",  [4] = "ILL",   [5] = "TRAP",
			[6] = "ABRT",  [7] = "BUS",   [8] = "FPE",   [9] = "KILL",  [10] = "USR1",
			[11] = "SEGV", [12] = "USR2", [13] = "PIPE", [14] = "ALRM", [15] = "TERM",
			[16] = "STKFLT", [17] = "CHLD", [18] = "CONT", [19] = "STOP", [20] = "TSTP",
			[21] = "TTIN", [22] = "TTOU", [23] = "URG",  [24] = "XCPU", [25] = "XFSZ",
			[26] = "VTALRM", [27] = "PROF", [28] = "WINCH", [29] = "IO", [30] = "PWR",
			[31] = "SYS",
		};
		const char *n = p->exit_code > 0 && p->exit_code < 32 ? names[p->exit_code] : NULL;

		if (n)
			snprintf(buf, len, "killed by SIG%s", n);
		else
			snprintf(buf, len, "killed by signal %d", p->exit_code);
		break;
	}
	case SPROBE_DF_EXIT_EXECED:
		snprintf(buf, len, "exec'd");
		break;
	case SPROBE_DF_EXIT_RUNNING:
		snprintf(buf, len, "still running");
		break;
	default:
		snprintf(buf, len, "end not seen");
	}
}

/* Whether the part of the file of a process image is whole, in words (a
 * process killed by a signal writes no trailer: that is how it ended, not
 * damage). */
const char *sprobe_rep__proc_data(const struct process *p)
{
	if (p->flags & SPROBE_DF_PROCESS_UNSAMPLED)
		return p->note;
	else if (!p->has_header)
		return "no data: it ended while its sampler started";
	else if (!p->has_exit)
		return p->has_trailer ? "complete" : "no trailer";
	else if (p->part_status == SPROBE_DF_COMPLETE)
		return "complete";
	else if (p->part_status == SPROBE_DF_CORRUPT)
		return "DAMAGED: kept up to the damage";
	else if (p->exit_how == SPROBE_DF_EXIT_KILLED)
		return "up to its last write before the signal";
	else if (p->exit_how == SPROBE_DF_EXIT_RUNNING)
		return "up to the end of the recording";
	else if (p->exit_how == SPROBE_DF_EXIT_EXITED)
		/* An exit the agent did not see (a raw exit_group,
		 * as Go's runtime makes): what reached the file. */
		return "up to its last write (it left without exit())";
	else
		return "CUT SHORT";
}

uint64_t sprobe_rep__wall_ns(const struct sprobe_report *r)
{
	uint64_t start = r->has_header && r->header.start_mono_ns ? r->header.start_mono_ns
								  : r->t_min;
	uint64_t end = r->has_trailer && r->trailer.end_mono_ns ? r->trailer.end_mono_ns
							       : r->t_max;

	/* Several processes: from the first start to the last end. */
	for (size_t i = 0; i < r->procs.n; i++)
		if (r->procs.v[i].end_mono_ns > end)
			end = r->procs.v[i].end_mono_ns;
	if (r->procs.n > 1 && r->t_max != 0 && r->t_max > end)
		end = r->t_max;

	if (start == UINT64_MAX || end <= start)
		return 0;
	return end - start;
}

uint64_t sprobe_rep__lost_total(const struct sprobe_report *r)
{
	uint64_t n = 0;

	for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
		n += r->lost[i];
	return n;
}

uint64_t sprobe_report__records(const struct sprobe_report *r)
{
	return r ? r->records : 0;
}

uint64_t sprobe_report__lost(const struct sprobe_report *r)
{
	return r ? sprobe_rep__lost_total(r) : 0;
}

uint64_t sprobe_report__threads_dropped(const struct sprobe_report *r)
{
	return r ? r->cap_dropped : 0;
}

const char *sprobe_rep__status_name(int st)
{
	switch (st) {
	case SPROBE_DF_COMPLETE:
		return "complete";
	case SPROBE_DF_CUT_SHORT:
		return "cut_short";
	case SPROBE_DF_CORRUPT:
		return "corrupt";
	default:
		return "unread";
	}
}

/* ---- kernel vs self-reported windows ------------------------------------ */

/* The kernel's word on the selected threads' zero-pause samples: each is
 * checked over its whole capture round (start .. start + capture_ns of the
 * capture record with that start; its own reads' end when that record is
 * missing). */
int sprobe_rep__zp_check(const struct sprobe_report *r, struct sprobe_pause_zp_check *out)
{
	struct sprobe_pause_zp_sample *zs = malloc((r->zpv.n + 1) * sizeof(*zs));
	size_t nz = 0;
	int err;

	if (!zs)
		return -ENOMEM;
	for (size_t i = 0; i < r->zpv.n; i++) {
		struct sprobe_pause_zp_sample z = r->zpv.v[i];
		uint32_t dur;

		if (!sprobe_rep__selected(r, (uint32_t)z.tid))
			continue;
		if (ro_map__get(&r->cap_end, z.start_ns, &dur) && z.start_ns + dur > z.end_ns)
			z.end_ns = z.start_ns + dur;
		zs[nz++] = z;
	}
	err = sprobe_pause_zp__check(r->kwv.v, r->kwv.n, zs, nz, r->lost[SPROBE_DF_KWINDOW], out);
	free(zs);
	return err;
}

/* Match the selected threads' kernel windows with their self-reported ones
 * (see userspace/pause/pause_merge.c). NULL with errno on failure; a report
 * without kernel windows gets NULL with errno ENOENT. */
struct sprobe_pause_merge *sprobe_rep__pause_check(const struct sprobe_report *r)
{
	struct sprobe_pause_kwindow *kw;
	struct sprobe_pause_swindow *sw;
	size_t nk = 0, ns = 0;

	if (!r->kwv.n) {
		errno = ENOENT;
		return NULL;
	}
	kw = malloc((r->kwv.n + 1) * sizeof(*kw));
	sw = malloc((r->swv.n + 1) * sizeof(*sw));
	if (!kw || !sw) {
		free(kw);
		free(sw);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < r->kwv.n; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->kwv.v[i].tid))
			kw[nk++] = r->kwv.v[i];
	for (size_t i = 0; i < r->swv.n; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->swv.v[i].tid))
			sw[ns++] = r->swv.v[i];
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo),
		.wall_ns = sprobe_rep__wall_ns(r),
		.kernel_lost = r->lost[SPROBE_DF_KWINDOW],
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, ns, &mo);
	free(kw);
	free(sw);
	return m;
}
