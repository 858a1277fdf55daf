/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The JSON report (SPROBE_REPORT_JSON): the text report's content, for
 * programs.
 */
#include <errno.h>
#include <math.h>
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
#include "userspace/report/shares.h"

/* ---- json --------------------------------------------------------------- */


static void jdist(FILE *o, const u64vec *v, uint64_t wall)
{
	uint64_t total = sprobe_rep__sum(v);

	fprintf(o, "{\"count\": %zu, \"median_ns\": %" PRIu64 ", \"p99_ns\": %" PRIu64
		   ", \"max_ns\": %" PRIu64 ", \"total_ns\": %" PRIu64 ", \"share_of_wall\": %.9f}",
		v->n, sprobe_rep__pct(v, 50), sprobe_rep__pct(v, 99), sprobe_rep__pct(v, 100), total,
		wall ? (double)total / (double)wall : 0.0);
}

/* A share's 95 % interval, [lo, hi] as fractions of 1, or null. */
static void jci(FILE *o, const struct sprobe_rep_shares *sh, double share, double se)
{
	double lo, hi;

	sprobe_rep__share_ci(sh, share, se, &lo, &hi);
	if (isnan(lo))
		fputs("null", o);
	else
		fprintf(o, "[%.9g, %.9g]", lo, hi);
}

/* The interval's half-width before clipping to [0, 1] (the text report's
 * ±), or null. */
static void jerr(FILE *o, const struct sprobe_rep_shares *sh, double se)
{
	if (isnan(se) || isnan(sh->tq))
		fputs("null", o);
	else
		fprintf(o, "%.9g", sh->tq * se);
}

static void jlost(FILE *o, const uint64_t *lost)
{
	uint64_t t = 0;

	fputc('{', o);
	for (int i = 1; i < SPROBE_DF__TYPE_COUNT; i++) {
		t += lost[i];
		/* Reserved numbers have no name: no duplicate "unknown" keys. */
		if (strcmp(sprobe_df_type__name(i), "unknown"))
			fprintf(o, "\"%s\": %" PRIu64 ", ", sprobe_df_type__name(i), lost[i]);
	}
	fprintf(o, "\"total\": %" PRIu64 "}", t);
}

static void jpdist(FILE *o, const char *name, const struct sprobe_pause_dist *d, bool last)
{
	fprintf(o, "\"%s\": {\"count\": %" PRIu64 ", \"median_ns\": %" PRIu64
		   ", \"p99_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 ", \"total_ns\": %" PRIu64 "}%s",
		name, d->count, d->median, d->p99, d->max, d->total, last ? "" : ", ");
}

static void jpsummary(FILE *o, const struct sprobe_pause_summary *s)
{
	fprintf(o, "{\"tid\": %d, \"matched\": %u, \"kernel_only\": %u, \"self_only\": %u, ",
		(int)s->tid, s->matched, s->kernel_only, s->self_only);
	jpdist(o, "delivery", &s->delivery, false);
	jpdist(o, "kernel_pause", &s->kernel_pause, false);
	jpdist(o, "self_pause", &s->self_pause, false);
	jpdist(o, "kernel_minus_self", &s->difference, false);
	jpdist(o, "offcpu", &s->offcpu, false);
	fprintf(o, "\"pause_share\": %.9f}", s->pause_share);
}

/* "pause_check": null without kernel windows, else the overall and
 * per-thread comparison of kernel and self-reported windows. */
static void json_pause_check(const struct sprobe_report *r, FILE *o)
{
	struct sprobe_pause_merge *m = sprobe_rep__pause_check(r);
	size_t n = 0;

	if (!m) {
		fputs("null", o);
		return;
	}
	fputs("{\n    \"overall\": ", o);
	jpsummary(o, sprobe_pause_merge__overall(m));
	fputs(",\n    \"threads\": [", o);
	const struct sprobe_pause_summary *t = sprobe_pause_merge__threads(m, &n);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n      " : "\n      ", o);
		jpsummary(o, &t[i]);
	}
	fputs("\n    ]", o);
	struct sprobe_pause_zp_check zc;
	if (sprobe_rep__zp_check(r, &zc) == 0)
		fprintf(o, ",\n    \"zero_pause\": {\"samples\": %" PRIu64 ", \"confirmed\": %" PRIu64
			   ", \"signalled\": %" PRIu64 ", \"outside\": %" PRIu64 "}",
			zc.samples, zc.confirmed, zc.signalled, zc.outside);
	fputs("\n  }", o);
	sprobe_pause_merge__free(m);
}

int sprobe_rep__write_json(struct sprobe_report *r, FILE *o)
{
	uint64_t wall = sprobe_rep__wall_ns(r);
	size_t nf;
	uint32_t *ids;
	bool first;

	fprintf(o, "{\n  \"format\": \"stackprobe-report\",\n  \"version\": 1,\n  \"source\": ");
	if (r->source)
		ro_json_str(o, r->source);
	else
		fputs("null", o);
	fprintf(o, ",\n  \"status\": \"%s\",\n  \"status_message\": ", sprobe_rep__status_name(r->status));
	ro_json_str(o, r->message);
	fprintf(o, ",\n  \"records\": %" PRIu64 ",\n  \"filter_tid\": ", r->records);
	if (r->filter_tid)
		fprintf(o, "%u", r->filter_tid);
	else
		fputs("null", o);
	fputs(",\n  \"header\": ", o);
	if (r->has_header) {
		uint32_t eng = r->header.flags & SPROBE_DF_HEADER_CPU_ENGINE_MASK;

		fprintf(o, "{\"pid\": %u, \"mode\": \"%s\", \"freq_hz\": %u, \"start_realtime_ns\": %" PRIu64
			   ", \"start_mono_ns\": %" PRIu64 ", \"cpu_engine\": ",
			r->header.pid, r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall",
			r->header.freq_hz, r->header.start_realtime_ns, r->header.start_mono_ns);
		if (eng)
			fprintf(o, "\"%s\"", sprobe_cpu_engine__name(eng));
		else
			fputs("null", o);
		fputs(", \"cmdline\": [", o);
		for (uint32_t i = 0; i < r->header.cmdline_len;) {
			const char *arg = r->header.cmdline + i;

			if (i)
				fputs(", ", o);
			ro_json_str(o, arg);
			i += (uint32_t)strlen(arg) + 1;
		}
		fputs("]}", o);
	} else {
		fputs("null", o);
	}
	fputs(",\n  \"trailer\": ", o);
	if (r->has_trailer)
		fprintf(o, "{\"end_realtime_ns\": %" PRIu64 ", \"end_mono_ns\": %" PRIu64
			   ", \"records\": %" PRIu64 "}",
			r->trailer.end_realtime_ns, r->trailer.end_mono_ns, r->trailer.records);
	else
		fputs("null", o);
	fprintf(o, ",\n  \"wall_ns\": %" PRIu64 ",\n  \"samples\": %" PRIu64 ",\n  \"captured_stacks\": %" PRIu64 ",\n",
		wall, r->nsel, r->nsel_stacks);

	fprintf(o, "  \"captures\": {\"count\": %" PRIu64 ", \"threads_total\": %" PRIu64
		   ", \"threads_captured\": %" PRIu64 ", \"threads_dropped\": %" PRIu64
		   ", \"pause_ns\": %" PRIu64 ", \"capture_ns\": ",
		r->captures, r->cap_total, r->cap_captured, r->cap_dropped, r->cap_pause_ns);
	jdist(o, &r->capture_ns, wall);
	fputs("},\n  \"methods\": {", o);
	for (int k = 0; k < NMETHODS; k++) {
		uint64_t m = 0;

		for (size_t i = 0; i < r->threads.n; i++)
			if (sprobe_rep__selected(r, r->threads.v[i].tid))
				m += r->threads.v[i].methods[k];
		fprintf(o, "%s\"%s\": %" PRIu64, k ? ", " : "", sprobe_rep__method_names[k], m);
	}
	fputs("},\n  \"pause\": ", o);
	jdist(o, &r->all_win, wall);

	fputs(",\n  \"drops\": {\"stream_lost\": ", o);
	jlost(o, r->lost);
	fputs(", \"threads_not_captured\": {", o);
	for (int k = 1; k < SPROBE_DROP__COUNT; k++)
		fprintf(o, "\"%s\": %" PRIu64 ", ", sprobe_rep__drop_names[k], r->cap_dropped_reason[k]);
	fprintf(o, "\"total\": %" PRIu64 "}},\n", r->cap_dropped);

	/* Every process image of the recording (one for a single-process
	 * file): who, how it ended, what its part holds. */
	fputs("  \"processes\": [", o);
	for (size_t i = 0; i < r->procs.n; i++) {
		const struct process *p = &r->procs.v[i];

		if (r->filter_pid && p->pid != r->filter_pid)
			continue;
		fprintf(o, "%s\n    {\"pid\": %u, \"exec_index\": %u, \"ppid\": %u, \"name\": ",
			i ? "," : "", p->pid, p->exec_index, p->ppid);
		ro_json_str(o, p->name ? p->name : "");
		fputs(", \"exe\": ", o);
		ro_json_str(o, p->exe ? p->exe : "");
		fprintf(o, ", \"sampled\": %s, \"samples\": %" PRIu64 ", \"end\": \"%s\", \"code\": %d, "
			   "\"data\": \"%s\", \"note\": ",
			p->flags & SPROBE_DF_PROCESS_UNSAMPLED ? "false" : "true", p->samples,
			p->has_exit ? sprobe_df_exit_how__name(p->exit_how) : "unknown", p->exit_code,
			sprobe_rep__status_name(p->has_exit ? (int)p->part_status
							    : p->has_trailer ? SPROBE_DF_COMPLETE
									     : SPROBE_DF_CUT_SHORT));
		ro_json_str(o, p->flags & SPROBE_DF_PROCESS_UNSAMPLED ? p->note
				: (p->exit_note ? p->exit_note : ""));
		fputc('}', o);
	}
	fputs("\n  ],\n", o);
	fputs("  \"threads\": [", o);
	first = true;
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];

		if (!sprobe_rep__thread_selected(r, (uint32_t)i))
			continue;
		fprintf(o, "%s\n    {\"tid\": %u, \"pid\": %u, \"name\": ", first ? "" : ",", t->tid,
			r->procs.n ? r->procs.v[t->proc].pid : 0);
		first = false;
		if (t->name)
			ro_json_str(o, t->name);
		else
			fputs("null", o);
		fprintf(o, ", \"samples\": %" PRIu64 ", \"share\": %.6f, \"truncated\": %" PRIu64
			   ", \"stack_max_bytes\": %" PRIu64 ", \"cpu_ns\": ",
			t->samples, r->nsel ? (double)t->samples / (double)r->nsel : 0.0, t->truncated,
			t->stack_max);
		/* cpu mode's coverage: the CPU it used while sampled (null:
		 * no THREAD_CPU record). */
		if (t->cpu_seen)
			fprintf(o, "%" PRIu64, t->cpu_ns);
		else
			fputs("null", o);
		fprintf(o, ", \"cpu_blocked\": %s, \"methods\": {",
			t->cpu_flags & SPROBE_CPU_USAGE_BLOCKED ? "true" : "false");
		for (int k = 0; k < NMETHODS; k++)
			fprintf(o, "%s\"%s\": %" PRIu64, k ? ", " : "", sprobe_rep__method_names[k], t->methods[k]);
		fputs("}, \"window\": ", o);
		jdist(o, &t->win, wall);
		fputs(", \"latency\": ", o);
		jdist(o, &t->lat, wall);
		fputs(", \"dropped\": {", o);
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			fprintf(o, "%s\"%s\": %" PRIu64, k > 1 ? ", " : "", sprobe_rep__drop_names[k], t->dropped[k]);
		fputs("}, \"kernel\": ", o);
		if (t->kpause.n || t->kdelay.n) {
			fputs("{\"deliver_to_sigreturn\": ", o);
			jdist(o, &t->kpause, wall);
			fputs(", \"generate_to_deliver\": ", o);
			jdist(o, &t->kdelay, wall);
			fprintf(o, ", \"offcpu_ns\": %" PRIu64 "}", t->koffcpu);
		} else {
			fputs("null", o);
		}
		fputc('}', o);
	}
	fputs("\n  ],\n  \"functions\": [", o);
	struct sprobe_rep_shares sh;
	int serr = sprobe_rep__shares(r, NULL, 0, &sh);

	if (serr)
		return serr;
	ids = sprobe_rep__sorted_funcs(r, false, &nf);
	if (!ids) {
		sprobe_rep__shares_free(&sh);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nf; i++) {
		const struct func *f = &r->funcs.v[ids[i]];
		const char *mod = sprobe_rep__module_name(r, f->module);

		fprintf(o, "%s\n    {\"name\": ", i ? "," : "");
		ro_json_str(o, sprobe_rep__func_name(r, ids[i]));
		fputs(", \"module\": ", o);
		if (mod)
			ro_json_str(o, mod);
		else
			fputs("null", o);
		if (sprobe_rep__is_inlined(r, ids[i]))
			fputs(", \"inlined\": true", o);
		fprintf(o, ", \"self\": %" PRIu64 ", \"total\": %" PRIu64, f->self, f->total);
		if (ids[i] < sh.nfuncs) {
			const struct sprobe_rep_share *s = &sh.f[ids[i]];

			fprintf(o, ", \"self_share\": %.9g, \"self_ci95\": ", s->self);
			jci(o, &sh, s->self, s->self_se);
			fputs(", \"self_err95\": ", o);
			jerr(o, &sh, s->self_se);
			fprintf(o, ", \"total_share\": %.9g, \"total_ci95\": ", s->total);
			jci(o, &sh, s->total, s->total_se);
			fputs(", \"total_err95\": ", o);
			jerr(o, &sh, s->total_se);
		}
		fputc('}', o);
	}
	free(ids);
	sprobe_rep__shares_free(&sh);
	fputs("\n  ],\n  \"stacks\": [", o);
	for (size_t i = 0; i < r->stacks.n; i++) {
		const struct stack *st = &r->stacks.v[i];
		const uint32_t *key = (const uint32_t *)sprobe_rep__bytemap_key(&r->stackmap, st->key);
		size_t n = r->stackmap.keys.v[st->key].len / sizeof(uint32_t) - 1;

		fprintf(o, "%s\n    {\"tid\": %u, \"count\": %" PRIu64 ", \"frames\": [", i ? "," : "",
			r->threads.v[st->thread].tid, st->count);
		for (size_t k = 0; k < n; k++) {
			uint32_t fid;

			memcpy(&fid, key + 1 + k, sizeof(fid));
			if (k)
				fputs(", ", o);
			ro_json_str(o, sprobe_rep__func_name(r, fid));
		}
		fputs("]}", o);
	}
	fputs("\n  ],\n  \"modules\": [", o);
	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];

		fprintf(o, "%s\n    {\"index\": %u, \"path\": ", i ? "," : "", m->index);
		ro_json_str(o, m->path);
		fputs(", \"build_id\": ", o);
		ro_json_str(o, m->build_id);
		fprintf(o, ", \"load_bias\": %" PRIu64 ", \"ranges\": [", m->load_bias);
		for (uint32_t k = 0; k < m->nranges; k++)
			fprintf(o, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", k ? ", " : "",
				m->ranges[k].start, m->ranges[k].end, m->ranges[k].file_offset);
		fputs("]}", o);
	}
	fprintf(o, "\n  ],\n  \"kernel_windows\": %" PRIu64 ",\n  \"pause_check\": ", r->kwindows);
	json_pause_check(r, o);
	fprintf(o, "\n}\n");
	return 0;
}
