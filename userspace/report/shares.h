/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Each function's share of a report's selected samples, with its standard
 * error (shares.c). Private to userspace/report/.
 *
 * Why batch means: samples of one thread in consecutive captures are not
 * independent (in wall mode a blocked thread gives the same stack every
 * round), so a binomial error would be far too small. The run is cut into
 * K batches of equal time; a share is the ratio of its batch sums, and its
 * variance the spread of the batches around that ratio (the ratio
 * estimator's linearisation), floored by the binomial variance of the
 * samples taken. docs/OUTPUTS.md "Error of a share" says it for users.
 *
 * Nothing here is thread-safe; nothing allocates but shares.c's arrays.
 */
#ifndef SPROBE_REPORT_SHARES_H
#define SPROBE_REPORT_SHARES_H

#include <stddef.h>
#include <stdint.h>

struct sprobe_report;

/* Batches a run is cut into, when it has enough samples (shares.c). */
#define SPROBE_REP_BATCHES 20
/* Fewest samples a batch should hold on average: fewer batches below. */
#define SPROBE_REP_BATCH_MIN 10

struct sprobe_rep_share {
	double self, total;		/* fractions of 1 of the selected weight */
	double self_se, total_se;	/* standard errors; NAN: no interval */
};

struct sprobe_rep_shares {
	size_t nfuncs;			/* r->funcs.n, or ngroups */
	struct sprobe_rep_share *f;	/* by function id (or group); owned */
	unsigned batches;		/* K: batches of time that hold samples; 0: too
					 * few samples or batches for an interval */
	double df;			/* degrees of freedom of se: K - 1 */
	double tq;			/* two-sided 95 % t quantile at df; NAN if K < 2 */
	uint64_t weight;		/* selected weight (the shares' denominator) */
	uint64_t samples;		/* selected samples, unweighted */
};

/* Shares and standard errors of every function of r (aggregated here if it
 * is not yet). With group non-NULL, of groups of functions instead: function
 * id i counts for group group[i] (< ngroups; UINT32_MAX: none), out->f is
 * by group and a sample counts once for a group it holds several times
 * (diff.c groups equal names of several processes). Returns 0, -ENOMEM or
 * the aggregation's error; out is zeroed first and owns its array on
 * success (sprobe_rep__shares_free). */
int sprobe_rep__shares(struct sprobe_report *r, const uint32_t *group, size_t ngroups,
		       struct sprobe_rep_shares *out);
void sprobe_rep__shares_free(struct sprobe_rep_shares *s);
/* The 95 % interval of a share: [lo, hi] clipped to [0, 1]; NAN both
 * when there is none. */
void sprobe_rep__share_ci(const struct sprobe_rep_shares *s, double share, double se,
			  double *lo, double *hi);

#endif
