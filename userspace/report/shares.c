/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Each function's self and total share of the selected samples, with its
 * standard error by batch means over time (the why: shares.h).
 *
 * For a function f and batch b, a_b is the weight of the samples in b that
 * have f on top (self) or anywhere (total, recursion once), n_b the weight
 * of all samples in b. The share is p = sum a_b / sum n_b and its variance
 *     K / (K - 1) * sum_b (a_b - p n_b)^2 / (sum n_b)^2,
 * the ratio estimator's, with K - 1 degrees of freedom; it is floored by
 * p (1 - p) / samples, the variance had every sample been independent,
 * so that a share constant across batches (a thread blocked all run)
 * still has the error its finite sample gives it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/report_internal.h"
#include "userspace/report/shares.h"
#include "userspace/report/stats.h"

static unsigned batches_for(uint64_t samples, uint64_t t0, uint64_t t1)
{
	uint64_t k = samples / SPROBE_REP_BATCH_MIN;

	if (k > SPROBE_REP_BATCHES)
		k = SPROBE_REP_BATCHES;
	if (t1 <= t0 || k < 2)
		return 0;
	return (unsigned)k;
}

/* kk: the batches that hold samples (an empty one is no observation: a
 * wall-mode run of many threads and few captures fills few batches). */
static double variance(const double *a, const double *n, unsigned k, unsigned kk, double p,
		       double sum_n, uint64_t samples)
{
	double ss = 0, floor_v;

	for (unsigned b = 0; b < k; b++) {
		double d = a[b] - p * n[b];

		ss += d * d;
	}
	floor_v = samples ? p * (1.0 - p) / (double)samples : 0;
	ss = (double)kk / (double)(kk - 1) * ss / (sum_n * sum_n);
	return ss > floor_v ? ss : floor_v;
}

int sprobe_rep__shares(struct sprobe_report *r, const uint32_t *group, size_t ngroups,
		       struct sprobe_rep_shares *out)
{
	uint64_t t0 = UINT64_MAX, t1 = 0;
	double *nb = NULL, *selfb = NULL, *totb = NULL;
	size_t *mark = NULL;
	unsigned k;
	int err = sprobe_rep__aggregate(r);

	memset(out, 0, sizeof(*out));
	if (err)
		return err;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		t0 = s->time_ns < t0 ? s->time_ns : t0;
		t1 = s->time_ns > t1 ? s->time_ns : t1;
		out->weight += s->weight;
		out->samples++;
	}
	out->nfuncs = group ? ngroups : r->funcs.n;
	out->f = calloc(out->nfuncs ? out->nfuncs : 1, sizeof(*out->f));
	if (!out->f)
		return -ENOMEM;
	k = batches_for(out->samples, t0, t1);
	out->df = out->tq = NAN;
	for (size_t i = 0; i < out->nfuncs; i++)
		out->f[i].self_se = out->f[i].total_se = NAN;
	if (!out->nfuncs)
		return 0;
	if (!k)
		k = 1;	/* shares only: one batch, no interval */
	nb = calloc(k, sizeof(*nb));
	selfb = calloc(out->nfuncs * k, sizeof(*selfb));
	totb = calloc(out->nfuncs * k, sizeof(*totb));
	mark = calloc(out->nfuncs, sizeof(*mark));
	if (!nb || !selfb || !totb || !mark) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		size_t nframes;
		const uint64_t *pcs;
		unsigned b;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		b = (unsigned)((double)(s->time_ns - t0) / (double)(t1 - t0 + 1) * k);
		b = b < k ? b : k - 1;
		nb[b] += s->weight;
		pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL, s->nframes,
					 &nframes);
		for (size_t i = 0; i < nframes; i++) {
			long fid = sprobe_rep__func_of(r, pcs[i]);

			if (fid < 0) {
				err = (int)fid;
				goto out;
			}
			size_t g = group ? ((size_t)fid < r->funcs.n ? group[fid] : UINT32_MAX)
					 : (size_t)fid;

			if (g >= out->nfuncs)
				continue;
			if (i == 0)
				selfb[g * k + b] += s->weight;
			if (mark[g] != si + 1) {	/* recursion counts once */
				mark[g] = si + 1;
				totb[g * k + b] += s->weight;
			}
		}
	}
	/* Only batches that hold samples are observations; under two, no
	 * interval (the shares stand). */
	if (k > 1) {
		unsigned kk = 0;

		for (unsigned b = 0; b < k; b++)
			kk += nb[b] > 0;
		if (kk >= 2) {
			out->batches = kk;
			out->df = kk - 1.0;
			out->tq = sprobe_rep__t_quantile(0.05, out->df);
		}
	}
	for (size_t i = 0; i < out->nfuncs; i++) {
		struct sprobe_rep_share *sh = &out->f[i];
		double w = out->weight ? (double)out->weight : 1.0, st = 0, tt = 0;

		for (unsigned b = 0; b < k; b++) {
			st += selfb[i * k + b];
			tt += totb[i * k + b];
		}
		sh->self = st / w;
		sh->total = tt / w;
		if (!out->batches)
			continue;
		sh->self_se = sqrt(variance(selfb + i * k, nb, k, out->batches, sh->self,
					    (double)out->weight, out->samples));
		sh->total_se = sqrt(variance(totb + i * k, nb, k, out->batches, sh->total,
					     (double)out->weight, out->samples));
	}
out:
	free(nb);
	free(selfb);
	free(totb);
	free(mark);
	if (err)
		sprobe_rep__shares_free(out);
	return err;
}

void sprobe_rep__shares_free(struct sprobe_rep_shares *s)
{
	if (!s)
		return;
	free(s->f);
	memset(s, 0, sizeof(*s));
}

void sprobe_rep__share_ci(const struct sprobe_rep_shares *s, double share, double se, double *lo,
			  double *hi)
{
	if (isnan(se) || isnan(s->tq)) {
		*lo = *hi = NAN;
		return;
	}
	*lo = share - s->tq * se;
	*hi = share + s->tq * se;
	*lo = *lo < 0 ? 0 : *lo;
	*hi = *hi > 1 ? 1 : *hi;
}
