/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Student t and Holm's correction (stats.c), for the intervals of the
 * shares (shares.c) and the tests of `stackprobe diff` (diff.c). Pure
 * functions; Holm's allocates its ordering only.
 */
#ifndef SPROBE_REPORT_STATS_H
#define SPROBE_REPORT_STATS_H

#include <stddef.h>

/* Two-sided p-value of t at df degrees of freedom (df > 0). */
double sprobe_rep__t_pvalue(double t, double df);
/* The t with two-sided p-value p at df: the (1 - p/2) quantile. */
double sprobe_rep__t_quantile(double p, double df);
/* Holm's step-down over n p-values at family-wise level alpha: sig[i] set
 * for each rejected hypothesis. NAN p-values are never rejected. Returns 0
 * or -ENOMEM. */
int sprobe_rep__holm(const double *p, size_t n, double alpha, unsigned char *sig);

#endif
