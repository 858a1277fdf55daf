/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HTML report's pause timeline (html_timeline.h): each selected
 * thread's capture windows by start, self-reported and the kernel's, with
 * the kernel-vs-self merge's verdict on each window without a partner;
 * sent window by window, or as time bins past TL_MAX windows a side.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/pause.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/html_timeline.h"


static bool win_thread(const struct sprobe_report *r, pid_t tid, uint32_t *ti)
{
	return tid > 0 && ro_map__get(&r->tid_any, (uint64_t)tid, ti) &&
	       sprobe_rep__thread_selected(r, *ti);
}

static int cmp_sw(const void *a, const void *b, void *arg)
{
	const struct sprobe_report *r = arg;
	const struct sprobe_pause_swindow *x = &r->swv.v[*(const uint32_t *)a];
	const struct sprobe_pause_swindow *y = &r->swv.v[*(const uint32_t *)b];

	return x->entry_ns < y->entry_ns ? -1 : x->entry_ns > y->entry_ns;
}

static int cmp_kw(const void *a, const void *b, void *arg)
{
	const struct sprobe_report *r = arg;
	const struct sprobe_pause_kwindow *x = &r->kwv.v[*(const uint32_t *)a];
	const struct sprobe_pause_kwindow *y = &r->kwv.v[*(const uint32_t *)b];

	return x->deliver_ns < y->deliver_ns ? -1 : x->deliver_ns > y->deliver_ns;
}

/* Group the N windows of a side (tid of window i by TID_OF) by selected
 * thread: *idx their indexes, *off[ti] .. *off[ti + 1] thread ti's, *count
 * how many. The caller frees both. Returns 0 or -ENOMEM. */
static int group(const struct sprobe_report *r, size_t n, pid_t (*tid_of)(const struct sprobe_report *, size_t),
		 uint32_t **idx, size_t **off, size_t *count)
{
	size_t nt = r->threads.n;
	size_t *o = calloc(nt + 2, sizeof(*o));
	uint32_t *ix = malloc((n ? n : 1) * sizeof(*ix));
	uint32_t ti;

	if (!o || !ix) {
		free(o);
		free(ix);
		return -ENOMEM;
	}
	/* Counts in o[ti + 2], prefix sums make o[ti + 1] thread ti's first
	 * slot; filling moves it to its end, which is thread ti + 1's start,
	 * so afterwards o[ti] .. o[ti + 1] is thread ti's range. */
	for (size_t i = 0; i < n; i++)
		if (win_thread(r, tid_of(r, i), &ti))
			o[ti + 2]++;
	for (size_t i = 0; i < nt; i++)
		o[i + 2] += o[i + 1];
	for (size_t i = 0; i < n; i++)
		if (win_thread(r, tid_of(r, i), &ti))
			ix[o[ti + 1]++] = (uint32_t)i;
	*count = o[nt];
	*idx = ix;
	*off = o;
	return 0;
}

static pid_t sw_tid(const struct sprobe_report *r, size_t i)
{
	return r->swv.v[i].tid;
}

static pid_t kw_tid(const struct sprobe_report *r, size_t i)
{
	return r->kwv.v[i].tid;
}

int sprobe_rep__html_tl_build(struct sprobe_report *r, struct html_tl *tl)
{
	int err = group(r, r->swv.n, sw_tid, &tl->sidx, &tl->soff, &tl->ns);

	if (!err)
		err = group(r, r->kwv.n, kw_tid, &tl->kidx, &tl->koff, &tl->nk);
	if (err)
		return err;
	for (size_t ti = 0; ti < r->threads.n; ti++) {
		sprobe_qsort_r(tl->sidx + tl->soff[ti], tl->soff[ti + 1] - tl->soff[ti], sizeof(uint32_t),
			       cmp_sw, r);
		sprobe_qsort_r(tl->kidx + tl->koff[ti], tl->koff[ti + 1] - tl->koff[ti], sizeof(uint32_t),
			       cmp_kw, r);
	}
	/* The axis: the recording's start and end, widened to every window. */
	uint64_t t0 = r->has_header && r->header.start_mono_ns ? r->header.start_mono_ns : r->t_min;
	uint64_t t1 = t0 + sprobe_rep__wall_ns(r);

	for (size_t i = 0; i < tl->ns; i++) {
		const struct sprobe_pause_swindow *w = &r->swv.v[tl->sidx[i]];

		if (w->entry_ns < t0)
			t0 = w->entry_ns;
		if (w->exit_ns > t1)
			t1 = w->exit_ns;
	}
	for (size_t i = 0; i < tl->nk; i++) {
		const struct sprobe_pause_kwindow *w = &r->kwv.v[tl->kidx[i]];

		if (w->deliver_ns < t0)
			t0 = w->deliver_ns;
		if (w->sigreturn_ns > t1)
			t1 = w->sigreturn_ns;
	}
	tl->t0 = t0;
	tl->t1 = t1 > t0 ? t1 : t0 + 1;
	return 0;
}

/* The merge's unmatched windows, back to their positions in swv / kwv:
 * sprobe_rep__pause_check() passes it the windows of the selected tids in
 * vector order, so the n-th selected one is its index n. */
int sprobe_rep__html_tl_flags(struct sprobe_report *r, struct html_tl *tl)
{
	size_t nk = 0, ns = 0, nu = 0;
	uint32_t *kmap, *smap;

	if (!r->kwindows)
		return 0;
	tl->m = sprobe_rep__pause_check(r);
	if (!tl->m)
		return errno == ENOMEM ? -ENOMEM : 0;
	tl->sflag = calloc(r->swv.n + 1, 1);
	tl->kflag = calloc(r->kwv.n + 1, 1);
	kmap = malloc((r->kwv.n + 1) * sizeof(*kmap));
	smap = malloc((r->swv.n + 1) * sizeof(*smap));
	if (!tl->sflag || !tl->kflag || !kmap || !smap) {
		free(kmap);
		free(smap);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->kwv.n; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->kwv.v[i].tid))
			kmap[nk++] = (uint32_t)i;
	for (size_t i = 0; i < r->swv.n; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->swv.v[i].tid))
			smap[ns++] = (uint32_t)i;
	const struct sprobe_pause_unmatched *u = sprobe_pause_merge__unmatched(tl->m, &nu);

	for (size_t i = 0; i < nu; i++) {
		uint8_t why = (uint8_t)(u[i].reason < SPROBE_PAUSE_R__COUNT ? u[i].reason + 1 : 1);

		if (u[i].side == SPROBE_PAUSE_KERNEL && u[i].idx < nk)
			tl->kflag[kmap[u[i].idx]] = why;
		else if (u[i].side == SPROBE_PAUSE_SELF && u[i].idx < ns)
			tl->sflag[smap[u[i].idx]] = why;
	}
	free(kmap);
	free(smap);
	return 0;
}

void sprobe_rep__html_tl_free(struct html_tl *tl)
{
	sprobe_pause_merge__free(tl->m);
	free(tl->sflag);
	free(tl->kflag);
	free(tl->sidx);
	free(tl->kidx);
	free(tl->soff);
	free(tl->koff);
}

struct bin {
	uint64_t count, max, total;
};

/* Windows of one thread as [bin, count, max ns, total ns] for the bins that
 * hold any. bins has TL_BINS zeroed entries (left zeroed). */
static void write_bins(FILE *o, struct bin *bins, const struct html_tl *tl, const uint64_t *start,
		       const uint64_t *dur, size_t n)
{
	uint64_t span = tl->t1 - tl->t0;
	bool first = true;

	for (size_t i = 0; i < n; i++) {
		uint64_t b = (start[i] - tl->t0) / (span / TL_BINS + 1);

		if (b >= TL_BINS)
			b = TL_BINS - 1;
		bins[b].count++;
		bins[b].total += dur[i];
		if (dur[i] > bins[b].max)
			bins[b].max = dur[i];
	}
	for (uint32_t b = 0; b < TL_BINS; b++) {
		if (!bins[b].count)
			continue;
		fprintf(o, "%s%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64, first ? "" : ",", b, bins[b].count,
			bins[b].max, bins[b].total);
		first = false;
		bins[b] = (struct bin){ 0 };
	}
}

/* "su" / "ku": [position in the thread's list, reason] of its windows
 * without a partner (reasons index "reasons"); nothing when all matched. */
static void write_unmatched(FILE *o, const char *key, const uint8_t *flag, const uint32_t *idx, size_t n)
{
	bool first = true;

	for (size_t i = 0; flag && i < n; i++) {
		if (!flag[idx[i]])
			continue;
		if (first)
			fprintf(o, ",\"%s\":[", key);
		fprintf(o, "%s%zu,%u", first ? "" : ",", i, flag[idx[i]] - 1u);
		first = false;
	}
	if (!first)
		fputc(']', o);
}

/* One thread's "sw" and "kw" members: delta-encoded starts (ns from the
 * previous window's start, the first from t0) with their durations; or
 * "sb" / "kb" bins. Kernel windows: [delta, pause, delivery, off-CPU],
 * -1 for a pause without rt_sigreturn or a delivery without generation. */
int sprobe_rep__html_tl_write_thread(FILE *o, struct sprobe_report *r, const struct html_tl *tl,
				     size_t ti)
{
	size_t s0 = tl->soff[ti], s1 = tl->soff[ti + 1], k0 = tl->koff[ti], k1 = tl->koff[ti + 1];
	uint64_t prev = tl->t0;

	if (tl->ns <= TL_MAX) {
		fputs(",\"sw\":[", o);
		for (size_t i = s0; i < s1; i++) {
			const struct sprobe_pause_swindow *w = &r->swv.v[tl->sidx[i]];

			fprintf(o, "%s%" PRIu64 ",%" PRIu64, i == s0 ? "" : ",", w->entry_ns - prev,
				w->exit_ns - w->entry_ns);
			prev = w->entry_ns;
		}
		fputc(']', o);
		write_unmatched(o, "su", tl->sflag, tl->sidx + s0, s1 - s0);
	}
	prev = tl->t0;
	if (tl->nk <= TL_MAX) {
		fputs(",\"kw\":[", o);
		for (size_t i = k0; i < k1; i++) {
			const struct sprobe_pause_kwindow *w = &r->kwv.v[tl->kidx[i]];
			bool done = w->sigreturn_ns >= w->deliver_ns && !(w->flags & SPROBE_PAUSE_KW_INCOMPLETE);
			bool gen = w->generate_ns && w->generate_ns <= w->deliver_ns;

			fprintf(o, "%s%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRIu64, i == k0 ? "" : ",",
				w->deliver_ns - prev, done ? (int64_t)(w->sigreturn_ns - w->deliver_ns) : -1,
				gen ? (int64_t)(w->deliver_ns - w->generate_ns) : -1, w->offcpu_ns);
			prev = w->deliver_ns;
		}
		fputc(']', o);
		write_unmatched(o, "ku", tl->kflag, tl->kidx + k0, k1 - k0);
	}
	if (tl->ns <= TL_MAX && tl->nk <= TL_MAX)
		return 0;

	size_t n = (s1 - s0) > (k1 - k0) ? s1 - s0 : k1 - k0;
	uint64_t *start = malloc((n ? n : 1) * sizeof(*start));
	uint64_t *dur = malloc((n ? n : 1) * sizeof(*dur));
	struct bin *bins = calloc(TL_BINS, sizeof(*bins));

	if (!start || !dur || !bins) {
		free(start);
		free(dur);
		free(bins);
		return -ENOMEM;
	}
	if (tl->ns > TL_MAX) {
		for (size_t i = s0; i < s1; i++) {
			const struct sprobe_pause_swindow *w = &r->swv.v[tl->sidx[i]];

			start[i - s0] = w->entry_ns;
			dur[i - s0] = w->exit_ns - w->entry_ns;
		}
		fputs(",\"sb\":[", o);
		write_bins(o, bins, tl, start, dur, s1 - s0);
		fputc(']', o);
	}
	if (tl->nk > TL_MAX) {
		size_t m = 0;

		for (size_t i = k0; i < k1; i++) {
			const struct sprobe_pause_kwindow *w = &r->kwv.v[tl->kidx[i]];

			start[m] = w->deliver_ns;
			dur[m++] = w->sigreturn_ns >= w->deliver_ns ? w->sigreturn_ns - w->deliver_ns : 0;
		}
		fputs(",\"kb\":[", o);
		write_bins(o, bins, tl, start, dur, m);
		fputc(']', o);
	}
	free(start);
	free(dur);
	free(bins);
	return 0;
}

