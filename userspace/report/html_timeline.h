/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HTML report's pause timeline (html_timeline.c), which html.c writes
 * per thread into the page's JSON object ("sw", "kw", "sb", "kb", "su",
 * "ku") and sums up ("tl", the histograms). Not thread-safe: one writer
 * call owns it.
 */
#ifndef SPROBE_REPORT_HTML_TIMELINE_H
#define SPROBE_REPORT_HTML_TIMELINE_H

#include <stdio.h>

#include <stackprobe/pause.h>

#include "userspace/report/report_internal.h"

#define TL_MAX 100000u		/* windows per side sent one by one */
#define TL_BINS 2000u		/* bins per thread above that */

/* Each selected thread's windows, by start: indexes into kwv / swv. */
struct html_tl {
	uint32_t *sidx, *kidx;	/* grouped by thread: soff[ti] .. soff[ti + 1] */
	size_t *soff, *koff;
	size_t ns, nk;
	uint64_t t0, t1;
	/* Kernel vs self (NULL without kernel windows), and for each window
	 * of swv / kwv the reason it has no partner + 1, 0 when matched. */
	struct sprobe_pause_merge *m;
	uint8_t *sflag, *kflag;
};

/* Group and sort the selected threads' windows into tl (zeroed by the
 * caller) and set its time axis. 0 or -ENOMEM; free tl either way. */
int sprobe_rep__html_tl_build(struct sprobe_report *r, struct html_tl *tl);
/* With kernel windows: the merge (sprobe_rep__pause_check()) and each
 * unmatched window's reason in sflag / kflag. 0 (also without kernel
 * windows, or when the merge has none to match) or -ENOMEM. */
int sprobe_rep__html_tl_flags(struct sprobe_report *r, struct html_tl *tl);
/* Thread ti's timeline members, each starting with ','. 0 or -ENOMEM. */
int sprobe_rep__html_tl_write_thread(FILE *o, struct sprobe_report *r, const struct html_tl *tl,
				     size_t ti);
void sprobe_rep__html_tl_free(struct html_tl *tl);

#endif
