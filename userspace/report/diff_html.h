/* SPDX-License-Identifier: BSD-2-Clause */
/* `stackprobe diff --format html` (diff_html.c). */
#ifndef SPROBE_REPORT_DIFF_HTML_H
#define SPROBE_REPORT_DIFF_HTML_H

#include <stdio.h>

#include <stackprobe/report.h>

#include "userspace/report/diff.h"

/* d as one self-contained page: the table of changes and a red/blue
 * differential flame graph. 0 or -ENOMEM. */
int sprobe_rep__diff_html(struct sprobe_rep_diff *d, struct sprobe_report *base,
			  struct sprobe_report *now, const struct sprobe_diff_opts *opts, FILE *o);

#endif
