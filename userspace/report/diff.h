/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The comparison of two reports behind `stackprobe diff` (diff.c), which
 * its writers read (diff_write.c, diff_pprof.c, diff_html.c). Private to
 * userspace/report/; not thread-safe.
 */
#ifndef SPROBE_REPORT_DIFF_H
#define SPROBE_REPORT_DIFF_H

#include <stdbool.h>
#include <stdio.h>

#include "userspace/report/report_internal.h"
#include "userspace/report/shares.h"

/* A share in both runs and its change (fractions of 1). */
struct sprobe_rep_change {
	double base, now, delta;
	double lo, hi;		/* 95 % interval of delta; NAN: none */
	double base_lo, base_hi, now_lo, now_hi;	/* of each share; NAN: none */
	double p, df;		/* two-sided p-value (NAN: not tested), its df */
	bool significant;	/* after Holm's correction */
};

struct sprobe_rep_diff_row {
	const char *name;	/* in names; lives as long as the diff */
	uint32_t id;		/* name id (group of both shares) */
	struct sprobe_rep_change self, total;
};

struct sprobe_rep_diff {
	double alpha;			/* family-wise level */
	struct bytemap names;		/* function names of both runs */
	struct sprobe_rep_shares base, now;	/* by name id */
	struct sprobe_rep_diff_row *rows;	/* significant first, then by change */
	size_t nrows, tested, significant;
	/* folded stacks of both runs (write_folded, the HTML graph) */
	struct bytemap stacks;
	u64vec stack_counts;		/* 2 per stack: base, new */
};

/* Compare base with now (both aggregated here). 0, -ENOMEM or a load
 * error; d owns its memory on success (sprobe_rep__diff_free). */
int sprobe_rep__diff_new(struct sprobe_report *base, struct sprobe_report *now, double alpha,
			 struct sprobe_rep_diff *d);
void sprobe_rep__diff_free(struct sprobe_rep_diff *d);
/* A JSON number, or null for NAN (the writers' missing interval). */
void sprobe_rep__diff_jnum(FILE *o, double v);
/* Every stack of both runs into d->stacks / d->stack_counts (idempotent). */
int sprobe_rep__diff_fold(struct sprobe_rep_diff *d, struct sprobe_report *base,
			  struct sprobe_report *now);

#endif
