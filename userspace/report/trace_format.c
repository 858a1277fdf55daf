/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report as a Chrome trace (SPROBE_REPORT_TRACE, Perfetto): the model's
 * threads, windows and samples through the trace writer (trace.c).
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

/* ---- trace (Chrome trace-event JSON, Perfetto) --------------------------- */

int sprobe_rep__write_trace(struct sprobe_report *r, FILE *o)
{
	char pname[256];
	size_t n = 0;

	if (r->has_header && r->header.cmdline_len) {
		n = r->header.cmdline_len < sizeof(pname) - 1 ? r->header.cmdline_len : sizeof(pname) - 1;
		memcpy(pname, r->header.cmdline, n);
		for (size_t i = 0; i < n; i++)
			if (pname[i] == '\0')
				pname[i] = ' ';
	}
	pname[n] = '\0';
	struct sprobe_trace_opts to = { .sz = sizeof(to),
					/* a hostile header may hold any pid */
					.pid = r->has_header && (pid_t)r->header.pid > 0 ? (pid_t)r->header.pid : 1,
					.process_name = n ? pname : NULL };
	struct sprobe_trace *t = sprobe_trace__new(o, &to);
	if (!t)
		return -errno;
	/* A hostile file may hold items the trace cannot show (tid 0, a
	 * window ending before it starts): they are skipped (-EINVAL); only
	 * -ENOMEM and -EIO end the trace. */
#define TRACE_ITEM(call) do { int e_ = (call); if (e_ && e_ != -EINVAL) err = e_; } while (0)
	int err = 0;
	/* Several processes: each thread's track in its own process. */
	for (size_t i = 0; i < r->threads.n && !err && sprobe_rep__multi(r); i++) {
		const struct thread *th = &r->threads.v[i];
		char nb[32];

		if (sprobe_rep__thread_selected(r, (uint32_t)i) && (pid_t)r->procs.v[th->proc].pid > 0)
			TRACE_ITEM(sprobe_trace__thread_process(
				t, (pid_t)th->tid, (pid_t)r->procs.v[th->proc].pid,
				sprobe_rep__proc_name(r, th->proc, nb, sizeof(nb))));
	}
	for (size_t i = 0; i < r->threads.n && !err; i++)
		if (sprobe_rep__selected(r, r->threads.v[i].tid) && r->threads.v[i].name)
			TRACE_ITEM(sprobe_trace__thread_name(t, (pid_t)r->threads.v[i].tid,
							     r->threads.v[i].name));
	for (size_t i = 0; i < r->kwv.n && !err; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->kwv.v[i].tid))
			TRACE_ITEM(sprobe_trace__kernel_window(t, &r->kwv.v[i]));
	for (size_t i = 0; i < r->swv.n && !err; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->swv.v[i].tid))
			TRACE_ITEM(sprobe_trace__self_window(t, &r->swv.v[i]));
	const char *names[SPROBE_REP_MAX_FRAMES];
	for (size_t i = 0; i < r->samples.n && !err; i++) {
		const struct sample *sm = &r->samples.v[i];
		uint32_t tid = r->threads.v[sm->thread].tid;
		size_t nf;

		if (!sprobe_rep__selected(r, tid))
			continue;
		/* inlined functions are frames of their own (inline.c) */
		const uint64_t *pcs = sprobe_rep__expand(r, sm->nframes ? r->pcs.v + sm->pc_off : NULL,
							 sm->nframes, &nf);
		for (size_t f = 0; f < nf; f++) {
			long fid = sprobe_rep__func_of(r, pcs[f]);
			if (fid == -ENOMEM) {
				err = -ENOMEM;
				break;
			}
			names[f] = fid >= 0 ? sprobe_rep__func_name(r, (uint32_t)fid) : NULL;
		}
		if (!err)
			TRACE_ITEM(sprobe_trace__sample(t, (pid_t)tid, sm->time_ns, names, nf,
							 sm->weight));
	}
#undef TRACE_ITEM
	int ferr = sprobe_trace__finish(t);
	sprobe_trace__free(t);
	return err ? err : ferr;
}
