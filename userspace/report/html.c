/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe report --format html` (SPROBE_REPORT_HTML): one
 * self-contained page (docs/OUTPUTS.md, "HTML"). The summary is static,
 * escaped HTML; everything else is one JSON object in a
 * <script type="application/json"> that the page's script (html_page.c)
 * draws: the flame graph, the process and thread tables, the pause
 * timeline of every capture window (self-reported, and the kernel's from
 * the eBPF companion when the file has them), the window distributions and
 * the drops. The tree is built by html_tree.c, the timeline by
 * html_timeline.c; this file writes the object and the page around it.
 * A Content-Security-Policy of default-src 'none' makes the
 * browser refuse any request the page could make.
 *
 * Hostile input: every string of the data file is escaped, HTML text by
 * ro_xml_str() and JSON by jstr() (which also escapes '<', '>' and '&', so
 * no name can close the script element). The script puts names into the
 * page with textContent only.
 *
 * Size: frames under 1/100000 of the samples and of the pause time are
 * left out of the tree; a side of the timeline (self or kernel) with more
 * than TL_MAX windows is sent as TL_BINS time bins per thread instead of
 * window by window. Both are stated on the page.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/pause.h>
#include <stackprobe/report.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/html_timeline.h"
#include "userspace/report/html_tree.h"
#include "userspace/report/report_internal.h"
#include "userspace/report/shares.h"

#define HTML_FUNCS 500u	/* rows of the functions table */
#define HIST_BUCKETS 40		/* log2 ns: [2^k, 2^(k+1)), bucket 0 holds 0 and 1 */

/* ---- escaping ------------------------------------------------------------- */

/* A JSON string that is also safe inside a <script> element: '<', '>' and
 * '&' as \u escapes (no "</script>" or "<!--" can appear), U+2028/2029
 * escaped, invalid UTF-8 and control bytes as U+FFFD / \u00XX. */
static void jstr(FILE *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	fputc('"', o);
	while (*s) {
		unsigned char c = *s;
		int n;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c == '<' || c == '>' || c == '&' || c < 0x20 || c == 0x7f)
			fprintf(o, "\\u%04x", c);
		else if (c < 0x80)
			fputc(c, o);
		else if ((n = ro_utf8_len(s)) > 0) {
			if (n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9))
				fprintf(o, "\\u%04x", 0x2000 | (s[2] - 0x80));
			else
				fwrite(s, 1, (size_t)n, o);
			s += n;
			continue;
		} else
			fputs("\\ufffd", o);
		s++;
	}
	fputc('"', o);
}

/* [count, median, p99, max, total] of a sorted vector. */
static void jdist(FILE *o, const u64vec *v)
{
	fprintf(o, "[%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", v->n, sprobe_rep__pct(v, 50),
		sprobe_rep__pct(v, 99), sprobe_rep__pct(v, 100), sprobe_rep__sum(v));
}

static void jpdist(FILE *o, const struct sprobe_pause_dist *d)
{
	fprintf(o, "[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", d->count, d->median,
		d->p99, d->max, d->total);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Histogram of window durations, log2 ns buckets. */
static void hist_add(uint64_t *h, uint64_t ns)
{
	int b = 0;

	while (ns > 1 && b < HIST_BUCKETS - 1) {
		ns >>= 1;
		b++;
	}
	h[b]++;
}

static void write_hist(FILE *o, const uint64_t *h)
{
	fputc('[', o);
	for (int b = 0; b < HIST_BUCKETS; b++)
		fprintf(o, "%s%" PRIu64, b ? "," : "", h[b]);
	fputc(']', o);
}

/* ---- the JSON object ---------------------------------------------------------- */

static int sorted_threads(const struct sprobe_report *r, uint32_t **out);

static void write_counts(FILE *o, const uint64_t *v, const char *const *names, int n)
{
	bool first = true;

	fputc('{', o);
	for (int k = 0; k < n; k++)
		if (v[k]) {
			fprintf(o, "%s", first ? "" : ",");
			jstr(o, names[k]);
			fprintf(o, ":%" PRIu64, v[k]);
			first = false;
		}
	fputc('}', o);
}

static void write_summary(FILE *o, const struct sprobe_pause_summary *s)
{
	fprintf(o, "{\"tid\":%d,\"matched\":%u,\"kernel_only\":%u,\"self_only\":%u,\"reasons\":{", (int)s->tid,
		s->matched, s->kernel_only, s->self_only);
	bool first = true;

	for (int k = 1; k < SPROBE_PAUSE_R__COUNT; k++)
		if (s->unmatched_by_reason[k]) {
			fprintf(o, "%s", first ? "" : ",");
			jstr(o, sprobe_pause_reason__str((enum sprobe_pause_reason)k));
			fprintf(o, ":%u", s->unmatched_by_reason[k]);
			first = false;
		}
	fputs("},\"kernel\":", o);
	jpdist(o, &s->kernel_pause);
	fputs(",\"self\":", o);
	jpdist(o, &s->self_pause);
	fputs(",\"diff\":", o);
	jpdist(o, &s->difference);
	fputs(",\"delivery\":", o);
	jpdist(o, &s->delivery);
	fputs(",\"offcpu\":", o);
	jpdist(o, &s->offcpu);
	fprintf(o, ",\"share\":%.9f}", s->pause_share);
}

static void jfrac(FILE *o, double v)
{
	if (isnan(v))
		fputs(",null", o);
	else
		fprintf(o, ",%.9g", v);
}

/* "funcs": the top HTML_FUNCS functions by total samples, each
 * [name, self, total, self_lo, self_hi, total_lo, total_hi, self_err,
 * total_err] (fractions of 1; the 95 % intervals of shares.c clipped to
 * [0, 1], and their half-widths before clipping; null without one). */
static int write_funcs(FILE *o, struct sprobe_report *r)
{
	struct sprobe_rep_shares sh;
	uint32_t *ids;
	size_t nf;
	int err = sprobe_rep__shares(r, NULL, 0, &sh);

	if (err)
		return err;
	ids = sprobe_rep__sorted_funcs(r, true, &nf);
	if (!ids) {
		sprobe_rep__shares_free(&sh);
		return -ENOMEM;
	}
	fprintf(o, ",\n\"funcs\":{\"batches\":%u,\"shown\":%zu,\"of\":%zu,\"rows\":[", sh.batches,
		nf < HTML_FUNCS ? nf : HTML_FUNCS, nf);
	for (size_t i = 0; i < nf && i < HTML_FUNCS; i++) {
		const struct sprobe_rep_share *f = ids[i] < sh.nfuncs ? &sh.f[ids[i]] : NULL;
		double lo, hi;

		fputs(i ? ",\n[" : "[", o);
		jstr(o, sprobe_rep__func_name(r, ids[i]));
		jfrac(o, f ? f->self : NAN);
		jfrac(o, f ? f->total : NAN);
		sprobe_rep__share_ci(&sh, f ? f->self : NAN, f ? f->self_se : NAN, &lo, &hi);
		jfrac(o, lo);
		jfrac(o, hi);
		sprobe_rep__share_ci(&sh, f ? f->total : NAN, f ? f->total_se : NAN, &lo, &hi);
		jfrac(o, lo);
		jfrac(o, hi);
		/* the half-widths before clipping (the text report's ±) */
		jfrac(o, f && !isnan(sh.tq) ? sh.tq * f->self_se : NAN);
		jfrac(o, f && !isnan(sh.tq) ? sh.tq * f->total_se : NAN);
		fputc(']', o);
	}
	fputs("]}", o);
	free(ids);
	sprobe_rep__shares_free(&sh);
	return 0;
}

static int write_data(FILE *o, struct sprobe_report *r, struct html_tree *t, const struct html_tl *tl)
{
	uint64_t wall = sprobe_rep__wall_ns(r);
	uint64_t hs[HIST_BUCKETS] = { 0 }, hk[HIST_BUCKETS] = { 0 };
	u64vec kp = { 0 }, kd = { 0 }, lat = { 0 };
	uint32_t *order = NULL;
	int err = 0;

	fputs("{\"v\":1,\"source\":", o);
	jstr(o, r->source ? r->source : "");
	fprintf(o, ",\"status\":\"%s\",\"message\":", sprobe_rep__status_name(r->status));
	jstr(o, r->message);
	fprintf(o, ",\"records\":%" PRIu64 ",\"filter_tid\":%u,\"filter_pid\":%u,\"cmdline\":[", r->records,
		r->filter_tid, r->filter_pid);
	for (uint32_t i = 0; r->has_header && i < r->header.cmdline_len;) {
		const char *arg = r->header.cmdline + i;
		size_t len = strnlen(arg, r->header.cmdline_len - i);
		char *a = strndup(arg, len);

		if (!a)
			return -ENOMEM;
		fputs(i ? "," : "", o);
		jstr(o, a);
		free(a);
		i += (uint32_t)len + 1;
	}
	fprintf(o, "],\"header\":%s,\"pid\":%u,\"mode\":\"%s\",\"freq\":%u,\"start_s\":%" PRIu64
		   ",\"wall_ns\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"stacks\":%" PRIu64
		   ",\"captures\":%" PRIu64,
		r->has_header ? "true" : "false", r->header.pid,
		r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", r->header.freq_hz,
		r->header.start_realtime_ns / 1000000000u, wall, r->nsel, r->nsel_stacks, r->captures);

	/* names and tree */
	fputs(",\n\"names\":[", o);
	for (size_t i = 0; i < t->names.n; i++) {
		fputs(i ? "," : "", o);
		jstr(o, ro_strtab__get(&t->names, (uint32_t)i));
	}
	fputs("],\n\"tree\":[", o);
	sprobe_rep__html_tree_write(o, t);
	bool first;
	fprintf(o, "],\"pruned\":%" PRIu64 ",\"prune_div\":%u", t->pruned, PRUNE_DIV);
	if (write_funcs(o, r))
		return -ENOMEM;

	/* processes */
	fputs(",\n\"procs\":[", o);
	for (size_t i = 0; i < r->procs.n; i++) {
		const struct process *p = &r->procs.v[i];
		char end[64], nb[32];

		sprobe_rep__proc_end(p, end, sizeof(end));
		fprintf(o, "%s{\"pid\":%u,\"exec\":%u,\"ppid\":%u,\"name\":", i ? ",\n" : "", p->pid,
			p->exec_index, p->ppid);
		jstr(o, sprobe_rep__proc_name(r, (uint32_t)i, nb, sizeof(nb)));
		fputs(",\"exe\":", o);
		jstr(o, p->exe);
		fprintf(o, ",\"samples\":%" PRIu64 ",\"captures\":%" PRIu64 ",\"sampled\":%s,\"selected\":%s,\"end\":",
			p->samples, p->captures, p->flags & SPROBE_DF_PROCESS_UNSAMPLED ? "false" : "true",
			!r->filter_pid || p->pid == r->filter_pid ? "true" : "false");
		jstr(o, end);
		fputs(",\"data\":", o);
		jstr(o, sprobe_rep__proc_data(p));
		fputs(",\"note\":", o);
		jstr(o, p->part_status == SPROBE_DF_CORRUPT ? p->exit_note : "");
		fputc('}', o);
	}

	/* threads, by samples, with their timelines */
	err = sorted_threads(r, &order);
	if (err)
		return err;
	fputs("],\n\"threads\":[", o);
	first = true;
	for (size_t oi = 0; oi < r->threads.n; oi++) {
		uint32_t ti = order[oi];
		const struct thread *th = &r->threads.v[ti];

		if (!sprobe_rep__thread_selected(r, ti))
			continue;
		fprintf(o, "%s{\"tid\":%u,\"proc\":%u,\"name\":", first ? "" : ",\n", th->tid, th->proc);
		first = false;
		jstr(o, sprobe_rep__thread_label(th));
		fprintf(o, ",\"samples\":%" PRIu64 ",\"truncated\":%" PRIu64 ",\"stack_max\":%" PRIu64 ",\"methods\":",
			th->samples, th->truncated, th->stack_max);
		write_counts(o, th->methods, sprobe_rep__method_names, NMETHODS);
		fputs(",\"drops\":", o);
		write_counts(o, th->dropped, sprobe_rep__drop_names, SPROBE_DROP__COUNT);
		fputs(",\"win\":", o);
		jdist(o, &th->win);
		fputs(",\"lat\":", o);
		jdist(o, &th->lat);
		fputs(",\"kpause\":", o);
		jdist(o, &th->kpause);
		fputs(",\"kdelay\":", o);
		jdist(o, &th->kdelay);
		fprintf(o, ",\"koffcpu\":%" PRIu64, th->koffcpu);
		err = sprobe_rep__html_tl_write_thread(o, r, tl, ti);
		if (err)
			goto out;
		fputc('}', o);
		for (size_t k = 0; k < th->kpause.n; k++)
			if (VEC_PUSH(kp, th->kpause.v[k])) {
				err = -ENOMEM;
				goto out;
			}
		for (size_t k = 0; k < th->kdelay.n; k++)
			if (VEC_PUSH(kd, th->kdelay.v[k])) {
				err = -ENOMEM;
				goto out;
			}
		for (size_t k = 0; k < th->lat.n; k++)
			if (VEC_PUSH(lat, th->lat.v[k])) {
				err = -ENOMEM;
				goto out;
			}
	}
	fprintf(o, "],\n\"tl\":{\"t0\":\"%" PRIu64 "\",\"span\":%" PRIu64 ",\"self\":%zu,\"kernel\":%zu,"
		   "\"max\":%u,\"bins\":%u,\"bin_ns\":%" PRIu64 "}",
		tl->t0, tl->t1 - tl->t0, tl->ns, tl->nk, TL_MAX, TL_BINS, (tl->t1 - tl->t0) / TL_BINS + 1);

	/* distributions */
	/* Empty vectors have no array (qsort wants one). */
	if (kp.n)
		qsort(kp.v, kp.n, sizeof(*kp.v), cmp_u64);
	if (kd.n)
		qsort(kd.v, kd.n, sizeof(*kd.v), cmp_u64);
	if (lat.n)
		qsort(lat.v, lat.n, sizeof(*lat.v), cmp_u64);
	for (size_t i = 0; i < tl->ns; i++) {
		const struct sprobe_pause_swindow *w = &r->swv.v[tl->sidx[i]];

		hist_add(hs, w->exit_ns - w->entry_ns);
	}
	for (size_t i = 0; i < tl->nk; i++) {
		const struct sprobe_pause_kwindow *w = &r->kwv.v[tl->kidx[i]];

		if (w->sigreturn_ns >= w->deliver_ns && !(w->flags & SPROBE_PAUSE_KW_INCOMPLETE))
			hist_add(hk, w->sigreturn_ns - w->deliver_ns);
	}
	fputs(",\n\"dist\":{\"self\":", o);
	jdist(o, &r->all_win);
	fputs(",\"kernel\":", o);
	jdist(o, &kp);
	fputs(",\"delivery\":", o);
	jdist(o, &kd);
	fputs(",\"latency\":", o);
	jdist(o, &lat);
	fputs(",\"capture\":", o);
	if (r->filter_tid)
		fputs("null", o);
	else
		jdist(o, &r->capture_ns);
	fputs(",\"hist_self\":", o);
	write_hist(o, hs);
	fputs(",\"hist_kernel\":", o);
	write_hist(o, hk);
	fputc('}', o);

	/* kernel vs self */
	fputs(",\n\"reasons\":[", o);
	for (int k = 0; k < SPROBE_PAUSE_R__COUNT; k++) {
		fputs(k ? "," : "", o);
		jstr(o, sprobe_pause_reason__str((enum sprobe_pause_reason)k));
	}
	fputs("],\n\"check\":", o);
	const struct sprobe_pause_merge *m = tl->m;

	if (m) {
		size_t n = 0;
		const struct sprobe_pause_summary *ts = sprobe_pause_merge__threads(m, &n);

		fputs("{\"overall\":", o);
		write_summary(o, sprobe_pause_merge__overall(m));
		fputs(",\"threads\":[", o);
		for (size_t i = 0; i < n; i++) {
			fputs(i ? ",\n" : "", o);
			write_summary(o, &ts[i]);
		}
		fputs("]", o);
		struct sprobe_pause_zp_check zc;

		if (sprobe_rep__zp_check(r, &zc) == 0 && zc.samples)
			fprintf(o, ",\"zero_pause\":{\"samples\":%" PRIu64 ",\"confirmed\":%" PRIu64
				   ",\"signalled\":%" PRIu64 ",\"outside\":%" PRIu64 "}",
				zc.samples, zc.confirmed, zc.signalled, zc.outside);
		fputc('}', o);
	} else {
		fputs("null", o);
	}

	/* drops */
	fputs(",\n\"drops\":{\"lost\":{", o);
	first = true;
	for (int i = 1; i < SPROBE_DF__TYPE_COUNT; i++)
		if (r->lost[i]) {
			fprintf(o, "%s", first ? "" : ",");
			jstr(o, sprobe_df_type__name((uint32_t)i));
			fprintf(o, ":%" PRIu64, r->lost[i]);
			first = false;
		}
	fprintf(o, "},\"lost_total\":%" PRIu64 ",\"cap_total\":%" PRIu64 ",\"cap_dropped\":%" PRIu64 ",\"reasons\":",
		sprobe_rep__lost_total(r), r->cap_total, r->cap_dropped);
	write_counts(o, r->cap_dropped_reason, sprobe_rep__drop_names, SPROBE_DROP__COUNT);
	fprintf(o, ",\"procs_skipped\":%" PRIu64 "}}", r->procs_skipped);
out:
	free(order);
	free(kp.v);
	free(kd.v);
	free(lat.v);
	return err;
}

/* Threads by samples, most first; ties by tid. */
static int cmp_thread(const void *a, const void *b, void *arg)
{
	const struct sprobe_report *r = arg;
	const struct thread *x = &r->threads.v[*(const uint32_t *)a];
	const struct thread *y = &r->threads.v[*(const uint32_t *)b];

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int sorted_threads(const struct sprobe_report *r, uint32_t **out)
{
	uint32_t *order = malloc((r->threads.n ? r->threads.n : 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < r->threads.n; i++)
		order[i] = (uint32_t)i;
	sprobe_qsort_r(order, r->threads.n, sizeof(*order), cmp_thread, (void *)r);
	*out = order;
	return 0;
}

/* ---- the page --------------------------------------------------------------- */

static void summary_row(FILE *o, const char *key, const char *id)
{
	fprintf(o, "<tr><th>%s</th><td id=\"%s\">", key, id);
}

static void write_summary_html(FILE *o, struct sprobe_report *r)
{
	uint64_t wall = sprobe_rep__wall_ns(r);

	fputs("<table class=\"summary\">\n", o);
	if (r->has_header) {
		time_t secs = (time_t)(r->header.start_realtime_ns / 1000000000u);
		struct tm tm;
		char when[64] = "?";

		if (gmtime_r(&secs, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
		summary_row(o, "command", "sum-command");
		for (uint32_t i = 0; i < r->header.cmdline_len;) {
			const char *arg = r->header.cmdline + i;
			size_t len = strnlen(arg, r->header.cmdline_len - i);
			char *a = strndup(arg, len);

			if (a) {
				fputs(i ? " " : "", o);
				ro_xml_str(o, a, 0);
				free(a);
			}
			i += (uint32_t)len + 1;
		}
		fprintf(o, "</td></tr>\n");
		summary_row(o, "mode", "sum-mode");
		fprintf(o, "%s mode, %u Hz, pid %u, started %s</td></tr>\n",
			r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", r->header.freq_hz, r->header.pid,
			when);
	}
	summary_row(o, "wall time", "sum-wall");
	fprintf(o, "%.3f s</td></tr>\n", (double)wall / 1e9);
	summary_row(o, "samples", "sum-samples");
	fprintf(o, "%" PRIu64 " in %" PRIu64 " captures", r->nsel, r->captures);
	if (r->nsel_stacks != r->nsel)
		fprintf(o, " (%" PRIu64 " captured stacks, weighted by the CPU timer periods they cover)",
			r->nsel_stacks);
	fputs("</td></tr>\n", o);
	summary_row(o, "processes", "sum-procs");
	size_t unsampled = 0;

	for (size_t i = 0; i < r->procs.n; i++)
		unsampled += !!(r->procs.v[i].flags & SPROBE_DF_PROCESS_UNSAMPLED);
	fprintf(o, "%zu (%zu not sampled)", r->procs.n, unsampled);
	if (r->filter_pid)
		fprintf(o, "; only pid %u shown", r->filter_pid);
	if (r->filter_tid)
		fprintf(o, "; only tid %u shown", r->filter_tid);
	fputs("</td></tr>\n", o);
	summary_row(o, "pause", "sum-pause");
	if (r->all_win.n) {
		uint64_t total = sprobe_rep__sum(&r->all_win);

		fprintf(o, "%zu windows, median %.1f \xc2\xb5s, p99 %.1f \xc2\xb5s, max %.1f \xc2\xb5s; total %.3f ms = %.4f%% of the wall time",
			r->all_win.n, (double)sprobe_rep__pct(&r->all_win, 50) / 1e3,
			(double)sprobe_rep__pct(&r->all_win, 99) / 1e3, (double)sprobe_rep__pct(&r->all_win, 100) / 1e3,
			(double)total / 1e6, wall ? 100.0 * (double)total / (double)wall : 0.0);
	} else {
		fputs("no windows recorded", o);
	}
	fprintf(o, "%s</td></tr>\n", r->kwindows ? "; kernel windows (eBPF) present" : "");
	summary_row(o, "file", "sum-file");
	if (r->status == SPROBE_DF_COMPLETE)
		fprintf(o, "complete (%" PRIu64 " records)", r->records);
	else {
		fputs(r->status == SPROBE_DF_CUT_SHORT ? "CUT SHORT: " : "ERROR: ", o);
		ro_xml_str(o, r->message, 0);
	}
	fputs("</td></tr>\n", o);
	summary_row(o, "drops", "sum-drops");
	fprintf(o, "%" PRIu64 " records lost in the stream, %" PRIu64 " of %" PRIu64 " thread-captures dropped</td></tr>\n",
		sprobe_rep__lost_total(r), r->cap_dropped, r->cap_total);
	fputs("</table>\n", o);
}

int sprobe_rep__write_html(struct sprobe_report *r, FILE *o)
{
	struct html_tree t = { 0 };
	struct html_tl tl = { 0 };
	int err;

	err = sprobe_rep__html_tree_build(r, &t);
	if (!err)
		err = sprobe_rep__html_tl_build(r, &tl);
	if (!err)
		err = sprobe_rep__html_tl_flags(r, &tl);
	if (err)
		goto out;
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      /* The page may fetch nothing: inline style and script only. */
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
	      "<meta name=\"generator\" content=\"stackprobe\">\n<title>stackprobe: ", o);
	ro_xml_str(o, r->source ? r->source : "profile", 0);
	fprintf(o, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header>\n<h1>stackprobe: ",
		sprobe_rep__html_style);
	ro_xml_str(o, r->source ? r->source : "profile", 0);
	fputs("</h1>\n", o);
	write_summary_html(o, r);
	fprintf(o, "</header>\n%s", sprobe_rep__html_body);
	fputs("<script type=\"application/json\" id=\"sp-data\">", o);
	err = write_data(o, r, &t, &tl);
	if (err)
		goto out;
	fprintf(o, "</script>\n<script>\n%s</script>\n</body>\n</html>\n", sprobe_rep__html_script);
out:
	sprobe_rep__html_tree_free(&t);
	sprobe_rep__html_tl_free(&tl);
	return err;
}
