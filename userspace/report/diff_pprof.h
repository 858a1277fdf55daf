/* SPDX-License-Identifier: BSD-2-Clause */
/* `stackprobe diff --format pprof` (diff_pprof.c). */
#ifndef SPROBE_REPORT_DIFF_PPROF_H
#define SPROBE_REPORT_DIFF_PPROF_H

#include <stdio.h>

#include "userspace/report/diff.h"

/* d as one gzipped profile.proto, the base negated and labelled
 * pprof::base (pprof -diff_base's form). 0, -ENOMEM or -EIO. */
int sprobe_rep__diff_pprof(struct sprobe_rep_diff *d, struct sprobe_report *base,
			   struct sprobe_report *now, FILE *o);

#endif
