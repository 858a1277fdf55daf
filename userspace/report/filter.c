/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's filters (sprobe_report_opts.tid, .pid): which threads take
 * part. Every writer and the aggregation ask here, so they agree.
 */
#include "userspace/report/report_internal.h"

bool sprobe_rep__thread_selected(const struct sprobe_report *r, uint32_t ti)
{
	const struct thread *t = &r->threads.v[ti];

	if (r->filter_tid && r->filter_tid != t->tid)
		return false;
	return !r->filter_pid || r->procs.v[t->proc].pid == r->filter_pid;
}

bool sprobe_rep__selected(const struct sprobe_report *r, uint32_t tid)
{
	uint32_t ti;

	if (r->filter_tid && r->filter_tid != tid)
		return false;
	if (!r->filter_pid)
		return true;
	return ro_map__get(&r->tid_any, tid, &ti) && sprobe_rep__thread_selected(r, ti);
}
