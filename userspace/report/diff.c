/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The comparison behind `stackprobe diff`: each function's self and total
 * share in two reports, the change, its 95 % interval and whether it is
 * significant (Holm's correction over every function tested); and the
 * stacks of both runs folded by name. diff_write.c writes it as text, JSON
 * or folded stacks, diff_pprof.c and diff_html.c in their forms.
 *
 * Functions are matched by name across the two reports (and across the
 * processes of one report), as every report names them. Shares are of
 * each report's own selected samples, so runs of different length or rate
 * compare. The change's variance is the sum of the two shares' (the runs
 * are independent), its degrees of freedom Welch-Satterthwaite's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/report.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/diff.h"
#include "userspace/report/stats.h"
#include "userspace/report/report_internal.h"

/* Group the function ids of r by name into d's name table. */
static int group_names(struct sprobe_rep_diff *d, struct sprobe_report *r, uint32_t **out)
{
	uint32_t *g = malloc((r->funcs.n ? r->funcs.n : 1) * sizeof(*g));

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < r->funcs.n; i++) {
		const char *name = sprobe_rep__func_name(r, (uint32_t)i);
		bool added;
		long id;

		g[i] = UINT32_MAX;
		if (!r->funcs.v[i].total)
			continue;
		id = sprobe_rep__bytemap_intern(&d->names, name, strlen(name) + 1, &added);
		if (id < 0) {
			free(g);
			return (int)id;
		}
		g[i] = (uint32_t)id;
	}
	*out = g;
	return 0;
}

static void compare(const struct sprobe_rep_shares *b, const struct sprobe_rep_shares *n,
		    double pb, double seb, double pn, double sen, struct sprobe_rep_change *c)
{
	double vb = seb * seb, vn = sen * sen, v = vb + vn, tq;

	c->base = pb;
	c->now = pn;
	c->delta = pn - pb;
	c->lo = c->hi = c->p = NAN;
	sprobe_rep__share_ci(b, pb, seb, &c->base_lo, &c->base_hi);
	sprobe_rep__share_ci(n, pn, sen, &c->now_lo, &c->now_hi);
	if (isnan(v) || !b->batches || !n->batches)
		return;
	c->df = v > 0 ? v * v / (vb * vb / b->df + vn * vn / n->df) : b->df + n->df;
	if (isnan(c->df) || c->df < 1)
		c->df = 1;
	tq = sprobe_rep__t_quantile(0.05, c->df);
	c->lo = c->delta - tq * sqrt(v);
	c->hi = c->delta + tq * sqrt(v);
	/* No variance: both shares 0 or 1 (absent, or on every stack): no
	 * test when equal, a certain change when not. */
	c->p = v > 0 ? sprobe_rep__t_pvalue(c->delta / sqrt(v), c->df) : (c->delta ? 0.0 : NAN);
	if (isnan(c->p))
		c->lo = c->hi = NAN;	/* no test: no interval either */
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
	const struct sprobe_rep_diff_row *x = a, *y = b;
	double kx = fmax(fabs(x->self.delta), fabs(x->total.delta));
	double ky = fmax(fabs(y->self.delta), fabs(y->total.delta));
	bool sx = x->self.significant || x->total.significant;
	bool sy = y->self.significant || y->total.significant;

	(void)arg;
	if (sx != sy)
		return sx ? -1 : 1;
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

int sprobe_rep__diff_new(struct sprobe_report *base, struct sprobe_report *now, double alpha,
			 struct sprobe_rep_diff *d)
{
	uint32_t *gb = NULL, *gn = NULL;
	double *p = NULL;
	unsigned char *sig = NULL;
	size_t n;
	int err;

	memset(d, 0, sizeof(*d));
	d->alpha = alpha > 0 && alpha < 1 ? alpha : 0.05;
	if ((err = sprobe_rep__aggregate(base)) || (err = sprobe_rep__aggregate(now)) ||
	    (err = group_names(d, base, &gb)) || (err = group_names(d, now, &gn)))
		goto out;
	n = d->names.keys.n;
	if ((err = sprobe_rep__shares(base, gb, n, &d->base)) ||
	    (err = sprobe_rep__shares(now, gn, n, &d->now)))
		goto out;
	d->rows = calloc(n ? n : 1, sizeof(*d->rows));
	p = calloc(2 * (n ? n : 1), sizeof(*p));
	sig = calloc(2 * (n ? n : 1), 1);
	if (!d->rows || !p || !sig) {
		err = -ENOMEM;
		goto out;
	}
	d->nrows = n;
	for (size_t i = 0; i < n; i++) {
		struct sprobe_rep_diff_row *row = &d->rows[i];
		const struct sprobe_rep_share *sb = &d->base.f[i], *sn = &d->now.f[i];

		row->name = sprobe_rep__bytemap_key(&d->names, (uint32_t)i);
		row->id = (uint32_t)i;
		compare(&d->base, &d->now, sb->self, sb->self_se, sn->self, sn->self_se, &row->self);
		compare(&d->base, &d->now, sb->total, sb->total_se, sn->total, sn->total_se,
			&row->total);
		p[2 * i] = row->self.p;
		p[2 * i + 1] = row->total.p;
	}
	/* One family: every function's self and total change. */
	if ((err = sprobe_rep__holm(p, 2 * n, d->alpha, sig)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		d->rows[i].self.significant = sig[2 * i];
		d->rows[i].total.significant = sig[2 * i + 1];
		d->tested += !isnan(p[2 * i]) + !isnan(p[2 * i + 1]);
		d->significant += sig[2 * i] + sig[2 * i + 1];
	}
	sprobe_qsort_r(d->rows, n, sizeof(*d->rows), cmp_rows, NULL);
out:
	free(gb);
	free(gn);
	free(p);
	free(sig);
	if (err)
		sprobe_rep__diff_free(d);
	return err;
}

void sprobe_rep__diff_free(struct sprobe_rep_diff *d)
{
	if (!d)
		return;
	sprobe_rep__shares_free(&d->base);
	sprobe_rep__shares_free(&d->now);
	free(d->names.arena.v);
	free(d->names.keys.v);
	ro_map__free(&d->names.idx);
	free(d->rows);
	free(d->stacks.arena.v);
	free(d->stacks.keys.v);
	ro_map__free(&d->stacks.idx);
	free(d->stack_counts.v);
	memset(d, 0, sizeof(*d));
}

/* ---- folded stacks of both runs ------------------------------------------ */

/* One frame of a folded stack, as folded.c writes it: ';' separates
 * frames, so a name's own becomes ':', and a newline a space. */
static void fold_frame(FILE *m, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s, m);
}

/* Stacks of r by their folded text (thread and process names without their
 * ids, which differ between runs), into d->stacks as name ids, with counts
 * in col (0 base, 1 new). */
static int fold(struct sprobe_report *r, struct sprobe_rep_diff *d, int col)
{
	char *buf = NULL;
	size_t cap = 0;

	for (size_t i = 0; i < r->stacks.n; i++) {
		const struct stack *st = &r->stacks.v[i];
		const struct thread *t = &r->threads.v[st->thread];
		const uint32_t *key = (const uint32_t *)sprobe_rep__bytemap_key(&r->stackmap, st->key);
		size_t n = r->stackmap.keys.v[st->key].len / sizeof(uint32_t) - 1, len = 0;
		FILE *m = open_memstream(&buf, &cap);
		const struct process *pr = &r->procs.v[t->proc];
		bool added;
		long id;

		if (!m)
			return -ENOMEM;
		if (sprobe_rep__multi(r)) {	/* the process by name: its pid differs */
			fold_frame(m, pr->name && *pr->name ? pr->name : "process");
			fputc(';', m);
		}
		fold_frame(m, t->name && *t->name ? t->name : "thread");
		for (size_t k = 0; k < n; k++) {
			uint32_t fid;

			memcpy(&fid, key + 1 + k, sizeof(fid));
			fputc(';', m);
			fold_frame(m, sprobe_rep__func_name(r, fid));
		}
		if (fclose(m)) {
			free(buf);
			return -ENOMEM;
		}
		len = strlen(buf);
		id = sprobe_rep__bytemap_intern(&d->stacks, buf, len + 1, &added);
		free(buf);
		buf = NULL;
		if (id < 0)
			return (int)id;
		if (added) {
			uint64_t z = 0;

			if (VEC_PUSH(d->stack_counts, z) || VEC_PUSH(d->stack_counts, z))
				return -ENOMEM;
		}
		d->stack_counts.v[2 * id + col] += st->count;
	}
	return 0;
}

int sprobe_rep__diff_fold(struct sprobe_rep_diff *d, struct sprobe_report *base,
			  struct sprobe_report *now)
{
	int err;

	if (d->stacks.keys.n)
		return 0;
	err = fold(base, d, 0);
	return err ? err : fold(now, d, 1);
}


void sprobe_rep__diff_jnum(FILE *o, double v)
{
	if (isnan(v))
		fputs("null", o);
	else
		fprintf(o, "%.9g", v);
}
