/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe report --format html` (SPROBE_REPORT_HTML): one
 * self-contained page (docs/OUTPUTS.md, "HTML"). The summary is static,
 * escaped HTML; everything else is one JSON object in a
 * <script type="application/json"> that the page's script (html_page.c)
 * draws: the flame graph, the process and thread tables, the pause
 * timeline of every capture window (self-reported, and the kernel's from
 * the eBPF companion when the file has them), the window distributions and
 * the drops. A Content-Security-Policy of default-src 'none' makes the
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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/pause.h>
#include <stackprobe/report.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"

#define TL_MAX 100000u		/* windows per side sent one by one */
#define TL_BINS 2000u		/* bins per thread above that */
#define HIST_BUCKETS 40		/* log2 ns: [2^k, 2^(k+1)), bucket 0 holds 0 and 1 */
#define PRUNE_DIV 100000u	/* frames under 1/PRUNE_DIV of both totals */

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

static const char *label_of(const struct thread *t)
{
	return t->name && *t->name ? t->name : "thread";
}

/* ---- the flame graph tree --------------------------------------------------- */

enum { K_ROOT, K_PROC, K_THREAD, K_FRAME };

struct node {
	uint32_t name;		/* id in names */
	uint32_t first, next;	/* first child, next sibling (UINT32_MAX: none) */
	uint8_t kind;
	uint64_t value, pause;
};

struct tree {
	VEC(struct node) nodes;
	struct ro_map child;	/* parent << 32 | name -> node */
	struct ro_strtab names;
	struct ro_map name_of_fid;
	struct ro_map name_of_thread;
	struct ro_map name_of_proc;
	uint64_t pruned;
};

static long node_get(struct tree *t, uint32_t parent, uint32_t name, uint8_t kind)
{
	uint64_t key = (uint64_t)parent << 32 | name;
	uint32_t id;

	if (ro_map__get(&t->child, key, &id))
		return id;
	struct node nd = { .name = name, .first = UINT32_MAX, .next = UINT32_MAX, .kind = kind };

	if (VEC_PUSH(t->nodes, nd))
		return -ENOMEM;
	id = (uint32_t)(t->nodes.n - 1);
	if (parent != UINT32_MAX) {
		t->nodes.v[id].next = t->nodes.v[parent].first;
		t->nodes.v[parent].first = id;
	}
	if (ro_map__put(&t->child, key, id))
		return -ENOMEM;
	return id;
}

/* The name id of a label, through a cache keyed by what it names. */
static long cached_name(struct tree *t, struct ro_map *cache, uint64_t key, const char *label)
{
	uint32_t id;
	long n;

	if (ro_map__get(cache, key, &id))
		return id;
	n = ro_strtab__intern(&t->names, label, strlen(label));
	if (n < 0 || ro_map__put(cache, key, (uint32_t)n))
		return -ENOMEM;
	return n;
}

static long thread_name_id(struct sprobe_report *r, struct tree *t, uint32_t ti)
{
	const struct thread *th = &r->threads.v[ti];
	uint32_t id;

	if (ro_map__get(&t->name_of_thread, ti, &id))
		return id;
	size_t ln = strlen(label_of(th));
	char *s = malloc(ln + 16);

	if (!s)
		return -ENOMEM;
	snprintf(s, ln + 16, "%s-%u", label_of(th), th->tid);
	long n = cached_name(t, &t->name_of_thread, ti, s);

	free(s);
	return n;
}

static long proc_name_id(struct sprobe_report *r, struct tree *t, uint32_t p)
{
	char nb[32];
	const char *pn = sprobe_rep__proc_name(r, p, nb, sizeof(nb));
	size_t ln = strlen(pn);
	uint32_t id;

	if (ro_map__get(&t->name_of_proc, p, &id))
		return id;
	char *s = malloc(ln + 16);

	if (!s)
		return -ENOMEM;
	snprintf(s, ln + 16, "%s-%u", pn, r->procs.v[p].pid);
	long n = cached_name(t, &t->name_of_proc, p, s);

	free(s);
	return n;
}

/* all -> [process] -> thread -> frames root first, as the folded report
 * (the process level only with several processes). */
static int tree_build(struct sprobe_report *r, struct tree *t)
{
	bool multi = sprobe_rep__multi(r);

	if (ro_strtab__intern(&t->names, "all", 3) != 0 || node_get(t, UINT32_MAX, 0, K_ROOT) != 0)
		return -ENOMEM;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *th = &r->threads.v[s->thread];
		uint32_t parent = 0;
		long id, n;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		t->nodes.v[0].value += s->weight;
		t->nodes.v[0].pause += s->window_ns;
		/* Inlined functions are frames of their own (inline.c), as in
		 * the folded report. */
		size_t nfr;
		const uint64_t *pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL,
							 s->nframes, &nfr);

		for (int level = multi ? 0 : 1; level < 2 + (int)nfr; level++) {
			uint8_t kind;

			if (level == 0) {
				n = proc_name_id(r, t, th->proc);
				kind = K_PROC;
			} else if (level == 1) {
				n = thread_name_id(r, t, s->thread);
				kind = K_THREAD;
			} else {
				/* pcs are innermost first: root first here. */
				uint64_t pc = pcs[nfr - 1 - (size_t)(level - 2)];
				long fid = sprobe_rep__func_of(r, pc);

				if (fid < 0)
					return (int)fid;
				n = cached_name(t, &t->name_of_fid, (uint64_t)fid,
						sprobe_rep__func_name(r, (uint32_t)fid));
				kind = K_FRAME;
			}
			if (n < 0)
				return (int)n;
			id = node_get(t, parent, (uint32_t)n, kind);
			if (id < 0)
				return (int)id;
			t->nodes.v[id].value += s->weight;
			t->nodes.v[id].pause += s->window_ns;
			parent = (uint32_t)id;
		}
	}
	return 0;
}

static uint64_t subtree_size(const struct tree *t, uint32_t id)
{
	uint64_t n = 1;

	for (uint32_t c = t->nodes.v[id].first; c != UINT32_MAX; c = t->nodes.v[c].next)
		n += subtree_size(t, c);
	return n;
}

/* Preorder: name, kind, samples, pause ns, number of children written.
 * Recursion depth <= 3 + SPROBE_MAX_FRAMES. */
static void tree_write(FILE *o, struct tree *t, uint32_t id, bool *first)
{
	const struct node *nd = &t->nodes.v[id];
	const struct node *root = &t->nodes.v[0];
	uint32_t nk = 0;

	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->nodes.v[c].next) {
		const struct node *k = &t->nodes.v[c];

		if (k->value * PRUNE_DIV >= root->value || k->pause * PRUNE_DIV >= root->pause)
			nk++;
	}
	fprintf(o, "%s%u,%u,%" PRIu64 ",%" PRIu64 ",%u", *first ? "" : ",", nd->name, nd->kind, nd->value,
		nd->pause, nk);
	*first = false;
	for (uint32_t c = nd->first; c != UINT32_MAX; c = t->nodes.v[c].next) {
		const struct node *k = &t->nodes.v[c];

		if (k->value * PRUNE_DIV >= root->value || k->pause * PRUNE_DIV >= root->pause)
			tree_write(o, t, c, first);
		else
			t->pruned += subtree_size(t, c);
	}
}

static void tree_free(struct tree *t)
{
	free(t->nodes.v);
	ro_map__free(&t->child);
	ro_strtab__free(&t->names);
	ro_map__free(&t->name_of_fid);
	ro_map__free(&t->name_of_thread);
	ro_map__free(&t->name_of_proc);
}

/* ---- the timeline ------------------------------------------------------------ */

/* Each selected thread's windows, by start: indexes into kwv / swv. */
struct tl {
	uint32_t *sidx, *kidx;	/* grouped by thread: soff[ti] .. soff[ti + 1] */
	size_t *soff, *koff;
	size_t ns, nk;
	uint64_t t0, t1;
	/* Kernel vs self (NULL without kernel windows), and for each window
	 * of swv / kwv the reason it has no partner + 1, 0 when matched. */
	struct sprobe_pause_merge *m;
	uint8_t *sflag, *kflag;
};

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

static int tl_build(struct sprobe_report *r, struct tl *tl)
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
static int tl_flags(struct sprobe_report *r, struct tl *tl)
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

static void tl_free(struct tl *tl)
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
static void write_bins(FILE *o, struct bin *bins, const struct tl *tl, const uint64_t *start,
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
static int write_thread_tl(FILE *o, struct sprobe_report *r, const struct tl *tl, size_t ti)
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

static int write_data(FILE *o, struct sprobe_report *r, struct tree *t, const struct tl *tl)
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
	bool first = true;

	if (t->nodes.n)
		tree_write(o, t, 0, &first);
	fprintf(o, "],\"pruned\":%" PRIu64 ",\"prune_div\":%u", t->pruned, PRUNE_DIV);

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
		jstr(o, label_of(th));
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
		err = write_thread_tl(o, r, tl, ti);
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
	struct tree t = { 0 };
	struct tl tl = { 0 };
	int err;

	err = tree_build(r, &t);
	if (!err)
		err = tl_build(r, &tl);
	if (!err)
		err = tl_flags(r, &tl);
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
	tree_free(&t);
	tl_free(&tl);
	return err;
}
