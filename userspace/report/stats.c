/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Student t distribution and Holm's correction, for the intervals of the
 * shares and the tests of `stackprobe diff` (stats.h). The t CDF is the
 * regularised incomplete beta function by its continued fraction (Lentz),
 * exact to ~1e-12 for the df used here; the quantile is its bisection.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/stats.h"

/* Continued fraction of the incomplete beta function (x < (a+1)/(a+b+2)). */
static double betacf(double a, double b, double x)
{
	const double tiny = 1e-300;
	double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0), h;

	if (fabs(d) < tiny)
		d = tiny;
	d = 1.0 / d;
	h = d;
	for (int m = 1; m <= 300; m++) {
		double m2 = 2.0 * m, aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)), del;

		d = 1.0 + aa * d;
		d = fabs(d) < tiny ? tiny : d;
		c = 1.0 + aa / c;
		c = fabs(c) < tiny ? tiny : c;
		d = 1.0 / d;
		h *= d * c;
		aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
		d = 1.0 + aa * d;
		d = fabs(d) < tiny ? tiny : d;
		c = 1.0 + aa / c;
		c = fabs(c) < tiny ? tiny : c;
		d = 1.0 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1.0) < 1e-14)
			break;
	}
	return h;
}

/* Regularised incomplete beta I_x(a, b). */
static double ibeta(double a, double b, double x)
{
	if (x <= 0.0)
		return 0.0;
	if (x >= 1.0)
		return 1.0;
	double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);

	if (x < (a + 1.0) / (a + b + 2.0))
		return exp(lbt) * betacf(a, b, x) / a;
	return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double sprobe_rep__t_pvalue(double t, double df)
{
	if (isnan(t) || !(df > 0))
		return NAN;
	if (isinf(t))
		return 0.0;
	return ibeta(df / 2.0, 0.5, df / (df + t * t));
}

double sprobe_rep__t_quantile(double p, double df)
{
	double lo = 0.0, hi = 1.0;

	if (!(p > 0 && p < 1) || !(df > 0))
		return NAN;
	while (sprobe_rep__t_pvalue(hi, df) > p && hi < 1e12)
		hi *= 2.0;
	for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
		double mid = (lo + hi) / 2.0;

		if (sprobe_rep__t_pvalue(mid, df) > p)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2.0;
}

static int cmp_p(const void *a, const void *b, void *arg)
{
	const double *p = arg;
	double x = p[*(const size_t *)a], y = p[*(const size_t *)b];

	/* NANs last */
	if (isnan(x) || isnan(y))
		return isnan(x) - isnan(y);
	return (x > y) - (x < y);
}

int sprobe_rep__holm(const double *p, size_t n, double alpha, unsigned char *sig)
{
	size_t *ord = n ? malloc(n * sizeof(*ord)) : NULL, m = 0;

	if (n && !ord)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ord[i] = i;
		sig[i] = 0;
		m += !isnan(p[i]);
	}
	sprobe_qsort_r(ord, n, sizeof(*ord), cmp_p, (void *)p);
	for (size_t k = 0; k < m; k++) {
		if (!(p[ord[k]] <= alpha / (double)(m - k)))
			break;
		sig[ord[k]] = 1;
	}
	free(ord);
	return 0;
}
