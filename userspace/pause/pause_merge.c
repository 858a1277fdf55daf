/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Matching kernel windows (eBPF companion) with self-reported windows (the
 * capture backend's handler), and the pause statistics of both.
 *
 * Both sides read CLOCK_MONOTONIC, so no offset is estimated: a self window
 * belongs to the kernel window of the same thread that contains it. Windows
 * of one thread never overlap (the handler runs with its signal blocked and
 * the probe waits for each window), so one merge walk per thread in time
 * order pairs each window at most once. Anything left over is reported with
 * the most specific reason we can give.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/pause.h>

#include "userspace/common/sort_compat.h"

struct sprobe_pause_merge {
	struct sprobe_pause_pair *pairs;
	size_t npairs;
	struct sprobe_pause_unmatched *un;
	size_t nun;
	struct sprobe_pause_summary *threads;
	size_t nthreads;
	struct sprobe_pause_summary overall;
};

static const char *const reason_names[SPROBE_PAUSE_R__COUNT] = {
	[SPROBE_PAUSE_R_NONE] = "none",
	[SPROBE_PAUSE_R_INCOMPLETE] = "kernel-window-incomplete",
	[SPROBE_PAUSE_R_NO_SELF] = "no-self-report",
	[SPROBE_PAUSE_R_OUTSIDE_SELF] = "outside-self-reports",
	[SPROBE_PAUSE_R_NO_KERNEL] = "no-kernel-window",
	[SPROBE_PAUSE_R_KERNEL_LOST] = "kernel-events-lost",
	[SPROBE_PAUSE_R_OUTSIDE_KERNEL] = "outside-kernel-trace",
	[SPROBE_PAUSE_R_NOT_CONTAINED] = "not-contained",
	[SPROBE_PAUSE_R_BAD] = "bad-timestamps",
	[SPROBE_PAUSE_R_SELF_DROPPED] = "dropped-by-capturer",
};

int sprobe_pause_swindow__from_sample(struct sprobe_pause_swindow *out,
				      const struct sprobe_thread_sample *s)
{
	if (!out || !s)
		return -EINVAL;
	/* Zero-pause: entry/exit bracket the probe's reads, no window. */
	if (s->method == SPROBE_METHOD_ZERO_PAUSE || (!s->entry_ns && !s->signal_ns))
		return -ENOENT;
	*out = (struct sprobe_pause_swindow){
		.tid = s->tid,
		.signal_ns = s->signal_ns,
		.entry_ns = s->entry_ns,
		.exit_ns = s->entry_ns ? s->exit_ns : 0,
	};
	return 0;
}

const char *sprobe_pause_reason__str(enum sprobe_pause_reason r)
{
	if ((unsigned)r >= SPROBE_PAUSE_R__COUNT)
		return "unknown";
	return reason_names[r];
}

/* ------------------------------------------------------------------ */
/* Ordering                                                            */

static int cmp_kidx(const void *a, const void *b, void *ctx)
{
	const struct sprobe_pause_kwindow *kw = ctx;
	const struct sprobe_pause_kwindow *x = &kw[*(const uint32_t *)a];
	const struct sprobe_pause_kwindow *y = &kw[*(const uint32_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->deliver_ns != y->deliver_ns)
		return x->deliver_ns < y->deliver_ns ? -1 : 1;
	return 0;
}

static int cmp_sidx(const void *a, const void *b, void *ctx)
{
	const struct sprobe_pause_swindow *sw = ctx;
	const struct sprobe_pause_swindow *x = &sw[*(const uint32_t *)a];
	const struct sprobe_pause_swindow *y = &sw[*(const uint32_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->entry_ns != y->entry_ns)
		return x->entry_ns < y->entry_ns ? -1 : 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool k_complete(const struct sprobe_pause_kwindow *k)
{
	return !(k->flags & SPROBE_PAUSE_KW_INCOMPLETE) && k->deliver_ns &&
	       k->sigreturn_ns >= k->deliver_ns;
}

static bool s_valid(const struct sprobe_pause_swindow *s)
{
	return s->entry_ns && s->exit_ns >= s->entry_ns;
}

/* ------------------------------------------------------------------ */
/* Distributions                                                       */

/* Nearest rank: sorted[ceil(q * n) - 1], with q = num / den. */
static uint64_t rank(const uint64_t *sorted, size_t n, uint64_t num, uint64_t den)
{
	size_t r = (size_t)((n * num + den - 1) / den);

	return sorted[r ? r - 1 : 0];
}

/* Sorts v in place. */
static void dist_of(uint64_t *v, size_t n, struct sprobe_pause_dist *d)
{
	memset(d, 0, sizeof(*d));
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	d->count = n;
	d->median = rank(v, n, 50, 100);
	d->p99 = rank(v, n, 99, 100);
	d->max = v[n - 1];
	for (size_t i = 0; i < n; i++)
		d->total += v[i];
}

struct ranges {
	const uint32_t *kidx;
	size_t nk;
	const uint32_t *sidx;
	size_t ns;
	const struct sprobe_pause_pair *pairs;
	size_t np;
};

static void fill_dists(struct sprobe_pause_summary *s, const struct ranges *r,
		       const struct sprobe_pause_kwindow *kw,
		       const struct sprobe_pause_swindow *sw, uint64_t *scratch,
		       uint64_t wall_ns)
{
	size_t n;

	n = 0;
	for (size_t i = 0; i < r->nk; i++) {
		const struct sprobe_pause_kwindow *k = &kw[r->kidx[i]];
		if (k->generate_ns && k->deliver_ns >= k->generate_ns)
			scratch[n++] = k->deliver_ns - k->generate_ns;
	}
	dist_of(scratch, n, &s->delivery);

	n = 0;
	for (size_t i = 0; i < r->nk; i++) {
		const struct sprobe_pause_kwindow *k = &kw[r->kidx[i]];
		if (k_complete(k))
			scratch[n++] = k->sigreturn_ns - k->deliver_ns;
	}
	dist_of(scratch, n, &s->kernel_pause);

	n = 0;
	for (size_t i = 0; i < r->nk; i++) {
		const struct sprobe_pause_kwindow *k = &kw[r->kidx[i]];
		if (k_complete(k))
			scratch[n++] = k->offcpu_ns;
	}
	dist_of(scratch, n, &s->offcpu);

	n = 0;
	for (size_t i = 0; i < r->nk; i++) {
		const struct sprobe_pause_kwindow *k = &kw[r->kidx[i]];
		if (k_complete(k))
			scratch[n++] = k->runq_ns;
	}
	dist_of(scratch, n, &s->runq);

	n = 0;
	for (size_t i = 0; i < r->ns; i++) {
		const struct sprobe_pause_swindow *w = &sw[r->sidx[i]];
		if (s_valid(w))
			scratch[n++] = w->exit_ns - w->entry_ns;
	}
	dist_of(scratch, n, &s->self_pause);

	/* Containment makes kernel >= self for every pair, up to slack;
	 * clamp the slack's negative remainder to 0. */
	n = 0;
	for (size_t i = 0; i < r->np; i++) {
		const struct sprobe_pause_kwindow *k = &kw[r->pairs[i].kernel_idx];
		const struct sprobe_pause_swindow *w = &sw[r->pairs[i].self_idx];
		uint64_t kp = k->sigreturn_ns - k->deliver_ns;
		uint64_t sp = w->exit_ns - w->entry_ns;
		scratch[n++] = kp > sp ? kp - sp : 0;
	}
	dist_of(scratch, n, &s->difference);

	uint64_t total = s->kernel_pause.count ? s->kernel_pause.total : s->self_pause.total;
	s->pause_share = wall_ns ? (double)total / (double)wall_ns : 0.0;
}

/* ------------------------------------------------------------------ */
/* Matching                                                            */

struct bounds {
	bool any;
	uint64_t first, last;	/* earliest start, latest end */
};

static void bounds_add(struct bounds *b, uint64_t start, uint64_t end)
{
	if (!b->any || start < b->first)
		b->first = start;
	if (!b->any || end > b->last)
		b->last = end;
	b->any = true;
}

static bool outside(const struct bounds *b, uint64_t start, uint64_t end)
{
	return b->any && (end < b->first || start > b->last);
}

static void add_unmatched(struct sprobe_pause_merge *m, struct sprobe_pause_summary *t,
			  uint32_t side, uint32_t idx, pid_t tid, uint32_t reason)
{
	m->un[m->nun++] = (struct sprobe_pause_unmatched){
		.side = side, .idx = idx, .reason = reason, .tid = tid,
	};
	if (side == SPROBE_PAUSE_KERNEL)
		t->kernel_only++;
	else
		t->self_only++;
	t->unmatched_by_reason[reason]++;
}

struct sprobe_pause_merge *sprobe_pause_merge__new(const struct sprobe_pause_kwindow *kw,
						   size_t nk,
						   const struct sprobe_pause_swindow *sw,
						   size_t ns,
						   const struct sprobe_pause_merge_opts *uopts)
{
	struct sprobe_pause_merge_opts o = { 0 };
	struct sprobe_pause_merge *m = NULL;
	uint32_t *kidx = NULL, *sidx = NULL;
	uint64_t *scratch = NULL;
	struct bounds kb = { 0 }, sb = { 0 };

	if ((!kw && nk) || (!sw && ns) || nk > UINT32_MAX || ns > UINT32_MAX ||
	    (uopts && uopts->sz < sizeof(size_t))) {
		errno = EINVAL;
		return NULL;
	}
	if (uopts)
		memcpy(&o, uopts, uopts->sz < sizeof(o) ? uopts->sz : sizeof(o));

	m = calloc(1, sizeof(*m));
	kidx = malloc((nk ? nk : 1) * sizeof(*kidx));
	sidx = malloc((ns ? ns : 1) * sizeof(*sidx));
	scratch = malloc((nk + ns + 1) * sizeof(*scratch));
	if (m) {
		m->pairs = malloc(((nk < ns ? nk : ns) + 1) * sizeof(*m->pairs));
		m->un = malloc((nk + ns + 1) * sizeof(*m->un));
		/* At most one thread per window. */
		m->threads = calloc(nk + ns + 1, sizeof(*m->threads));
	}
	if (!m || !kidx || !sidx || !scratch || !m->pairs || !m->un || !m->threads) {
		free(kidx);
		free(sidx);
		free(scratch);
		sprobe_pause_merge__free(m);
		errno = ENOMEM;
		return NULL;
	}

	for (size_t i = 0; i < nk; i++) {
		kidx[i] = (uint32_t)i;
		if (k_complete(&kw[i]))
			bounds_add(&kb, kw[i].deliver_ns, kw[i].sigreturn_ns);
	}
	for (size_t i = 0; i < ns; i++) {
		sidx[i] = (uint32_t)i;
		if (s_valid(&sw[i]))
			bounds_add(&sb, sw[i].entry_ns, sw[i].exit_ns);
	}
	sprobe_qsort_r(kidx, nk, sizeof(*kidx), cmp_kidx, (void *)kw);
	sprobe_qsort_r(sidx, ns, sizeof(*sidx), cmp_sidx, (void *)sw);

	size_t i = 0, j = 0;
	uint64_t slack = o.slack_ns;

	while (i < nk || j < ns) {
		/* The next thread: the smaller tid at the head of either list. */
		pid_t tid;
		if (i < nk && (j >= ns || kw[kidx[i]].tid <= sw[sidx[j]].tid))
			tid = kw[kidx[i]].tid;
		else
			tid = sw[sidx[j]].tid;

		struct sprobe_pause_summary *t = &m->threads[m->nthreads++];
		size_t i0 = i, j0 = j, p0 = m->npairs;
		t->tid = tid;

		while ((i < nk && kw[kidx[i]].tid == tid) || (j < ns && sw[sidx[j]].tid == tid)) {
			bool hk = i < nk && kw[kidx[i]].tid == tid;
			bool hs = j < ns && sw[sidx[j]].tid == tid;
			const struct sprobe_pause_kwindow *k = hk ? &kw[kidx[i]] : NULL;
			const struct sprobe_pause_swindow *s = hs ? &sw[sidx[j]] : NULL;

			if (k && !k_complete(k)) {
				add_unmatched(m, t, SPROBE_PAUSE_KERNEL, kidx[i++], tid,
					      SPROBE_PAUSE_R_INCOMPLETE);
				continue;
			}
			if (s && !s_valid(s)) {
				add_unmatched(m, t, SPROBE_PAUSE_SELF, sidx[j++], tid,
					      !s->entry_ns && s->signal_ns
						      ? SPROBE_PAUSE_R_SELF_DROPPED
						      : SPROBE_PAUSE_R_BAD);
				continue;
			}
			if (k && s && k->deliver_ns <= s->entry_ns + slack &&
			    s->exit_ns <= k->sigreturn_ns + slack) {
				m->pairs[m->npairs++] = (struct sprobe_pause_pair){
					.kernel_idx = kidx[i++], .self_idx = sidx[j++],
				};
				t->matched++;
				continue;
			}
			/* The kernel window ends before the self window starts
			 * (or there is no self window left): it has no partner. */
			if (k && (!s || k->sigreturn_ns + slack < s->entry_ns)) {
				uint32_t why = !sb.any ? SPROBE_PAUSE_R_NO_SELF
					     : outside(&sb, k->deliver_ns, k->sigreturn_ns)
						       ? SPROBE_PAUSE_R_OUTSIDE_SELF
						       : SPROBE_PAUSE_R_NO_SELF;
				add_unmatched(m, t, SPROBE_PAUSE_KERNEL, kidx[i++], tid, why);
				continue;
			}
			uint32_t why;
			if (k && s->exit_ns + slack >= k->deliver_ns)
				why = SPROBE_PAUSE_R_NOT_CONTAINED; /* they overlap */
			else if (kb.any && outside(&kb, s->entry_ns, s->exit_ns))
				why = SPROBE_PAUSE_R_OUTSIDE_KERNEL;
			else if (o.kernel_lost)
				why = SPROBE_PAUSE_R_KERNEL_LOST;
			else
				why = SPROBE_PAUSE_R_NO_KERNEL;
			add_unmatched(m, t, SPROBE_PAUSE_SELF, sidx[j++], tid, why);
		}

		struct ranges r = {
			.kidx = kidx + i0, .nk = i - i0, .sidx = sidx + j0, .ns = j - j0,
			.pairs = m->pairs + p0, .np = m->npairs - p0,
		};
		fill_dists(t, &r, kw, sw, scratch, o.wall_ns);
		m->overall.matched += t->matched;
		m->overall.kernel_only += t->kernel_only;
		m->overall.self_only += t->self_only;
		for (int k = 0; k < SPROBE_PAUSE_R__COUNT; k++)
			m->overall.unmatched_by_reason[k] += t->unmatched_by_reason[k];
	}

	struct ranges all = {
		.kidx = kidx, .nk = nk, .sidx = sidx, .ns = ns,
		.pairs = m->pairs, .np = m->npairs,
	};
	/* Overall share: pause summed over threads / (wall x threads) would
	 * hide a thread that was stopped a lot; report the process-wide sum
	 * over the wall time instead (can exceed 1 with many threads). */
	fill_dists(&m->overall, &all, kw, sw, scratch, o.wall_ns);
	m->overall.tid = 0;

	free(kidx);
	free(sidx);
	free(scratch);
	return m;
}

void sprobe_pause_merge__free(struct sprobe_pause_merge *m)
{
	if (!m)
		return;
	free(m->pairs);
	free(m->un);
	free(m->threads);
	free(m);
}

const struct sprobe_pause_pair *sprobe_pause_merge__pairs(const struct sprobe_pause_merge *m,
							   size_t *n)
{
	if (n)
		*n = m ? m->npairs : 0;
	return m ? m->pairs : NULL;
}

const struct sprobe_pause_unmatched *
sprobe_pause_merge__unmatched(const struct sprobe_pause_merge *m, size_t *n)
{
	if (n)
		*n = m ? m->nun : 0;
	return m ? m->un : NULL;
}

const struct sprobe_pause_summary *sprobe_pause_merge__threads(const struct sprobe_pause_merge *m,
							       size_t *n)
{
	if (n)
		*n = m ? m->nthreads : 0;
	return m ? m->threads : NULL;
}

const struct sprobe_pause_summary *sprobe_pause_merge__overall(const struct sprobe_pause_merge *m)
{
	return m ? &m->overall : NULL;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */

static void print_dist(FILE *f, const char *name, const struct sprobe_pause_dist *d)
{
	fprintf(f, "    %-22s n=%-7" PRIu64 " median %9.3f  p99 %9.3f  max %9.3f  total %11.3f us\n",
		name, d->count, d->median / 1e3, d->p99 / 1e3, d->max / 1e3, d->total / 1e3);
}

static void print_summary(FILE *f, const struct sprobe_pause_summary *s)
{
	if (s->tid)
		fprintf(f, "  thread %d: %u matched, %u kernel-only, %u self-only",
			(int)s->tid, s->matched, s->kernel_only, s->self_only);
	else
		fprintf(f, "  all threads: %u matched, %u kernel-only, %u self-only",
			s->matched, s->kernel_only, s->self_only);
	if (s->pause_share > 0)
		fprintf(f, ", pause %.4f%% of wall time", s->pause_share * 100.0);
	fputc('\n', f);
	print_dist(f, "delivery latency", &s->delivery);
	print_dist(f, "kernel pause", &s->kernel_pause);
	print_dist(f, "self-reported pause", &s->self_pause);
	print_dist(f, "kernel - self", &s->difference);
	print_dist(f, "off-CPU in window", &s->offcpu);
	print_dist(f, "  waiting for a CPU", &s->runq);
	for (int r = 1; r < SPROBE_PAUSE_R__COUNT; r++)
		if (s->unmatched_by_reason[r])
			fprintf(f, "    unmatched: %u %s\n", s->unmatched_by_reason[r],
				sprobe_pause_reason__str(r));
}

int sprobe_pause_merge__print(const struct sprobe_pause_merge *m, FILE *f)
{
	if (!m || !f)
		return -EINVAL;
	fprintf(f, "Pause (kernel: eBPF companion; self: capture handler)\n");
	print_summary(f, &m->overall);
	for (size_t i = 0; i < m->nthreads; i++)
		print_summary(f, &m->threads[i]);
	return ferror(f) ? -EIO : 0;
}

/* ---- zero-pause check ---------------------------------------------------- */

struct zp_ev {
	pid_t tid;
	uint64_t ns;
};

static int zp_ev_cmp(const void *a, const void *b)
{
	const struct zp_ev *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

int sprobe_pause_zp__check(const struct sprobe_pause_kwindow *kw, size_t nk,
			   const struct sprobe_pause_zp_sample *zs, size_t nz,
			   uint64_t kernel_lost, struct sprobe_pause_zp_check *out)
{
	struct zp_ev *ev;
	size_t nev = 0;
	uint64_t span_lo = UINT64_MAX, span_hi = 0;

	if (!out || (nk && !kw) || (nz && !zs))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->kernel_lost = kernel_lost;
	ev = malloc((2 * nk + 1) * sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	/* Every generation and every delivery of a capture signal, by
	 * thread and time; and the span the companion was seen running. */
	for (size_t i = 0; i < nk; i++) {
		uint64_t first = kw[i].generate_ns ? kw[i].generate_ns : kw[i].deliver_ns;
		uint64_t last = kw[i].sigreturn_ns ? kw[i].sigreturn_ns : kw[i].deliver_ns;

		if (kw[i].generate_ns)
			ev[nev++] = (struct zp_ev){ kw[i].tid, kw[i].generate_ns };
		if (kw[i].deliver_ns)
			ev[nev++] = (struct zp_ev){ kw[i].tid, kw[i].deliver_ns };
		if (first && first < span_lo)
			span_lo = first;
		if (last > span_hi)
			span_hi = last;
	}
	qsort(ev, nev, sizeof(*ev), zp_ev_cmp);
	for (size_t i = 0; i < nz; i++) {
		const struct sprobe_pause_zp_sample *z = &zs[i];
		size_t a = 0, b = nev;

		out->samples++;
		/* First event of z->tid at or after z->start_ns. */
		while (a < b) {
			size_t m = a + (b - a) / 2;

			if (ev[m].tid < z->tid || (ev[m].tid == z->tid && ev[m].ns < z->start_ns))
				a = m + 1;
			else
				b = m;
		}
		if (a < nev && ev[a].tid == z->tid && ev[a].ns <= z->end_ns)
			out->signalled++;
		else if (nk && z->start_ns >= span_lo && z->end_ns <= span_hi)
			out->confirmed++;
		else
			out->outside++;
	}
	free(ev);
	return 0;
}

void sprobe_pause_zp__print(const struct sprobe_pause_zp_check *c, FILE *o)
{
	if (!c || !o)
		return;
	fprintf(o, "  zero-pause samples: %" PRIu64 "; kernel saw no capture signal for %" PRIu64
		   " (confirmed 0 ns), a signal for %" PRIu64 ", %" PRIu64
		   " outside its trace%s\n",
		c->samples, c->confirmed, c->signalled, c->outside,
		c->kernel_lost ? " (the companion lost events)" : "");
}
