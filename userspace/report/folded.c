/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Folded stacks (SPROBE_REPORT_FOLDED): one "a;b;c count" line per stack,
 * the input of flamegraph.pl and friends.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/trace.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"

/* ---- folded ------------------------------------------------------------- */

/* Folded frames may not contain ';' (the separator) or a newline; the
 * count is the last space-separated field, so spaces are fine. */
static void folded_frame(FILE *o, const char *s)
{
	for (; *s; s++) {
		char c = *s;

		fputc(c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c, o);
	}
}

int sprobe_rep__write_folded(struct sprobe_report *r, FILE *o)
{
	for (size_t i = 0; i < r->stacks.n; i++) {
		const struct stack *st = &r->stacks.v[i];
		const struct thread *t = &r->threads.v[st->thread];
		const uint32_t *key = (const uint32_t *)sprobe_rep__bytemap_key(&r->stackmap, st->key);
		size_t n = r->stackmap.keys.v[st->key].len / sizeof(uint32_t) - 1;
		char label[64];

		/* The thread is the root frame: "name-tid" ("thread-tid" when
		 * the file has no name for it); with several processes, the
		 * process ("name-pid") above it. */
		if (sprobe_rep__multi(r)) {
			char nb[32];

			folded_frame(o, sprobe_rep__proc_name(r, t->proc, nb, sizeof(nb)));
			fprintf(o, "-%u;", r->procs.v[t->proc].pid);
		}
		snprintf(label, sizeof(label), "-%u", t->tid);
		folded_frame(o, t->name && *t->name ? t->name : "thread");
		fputs(label, o);
		for (size_t k = 0; k < n; k++) {
			uint32_t fid;

			memcpy(&fid, key + 1 + k, sizeof(fid));
			fputc(';', o);
			folded_frame(o, sprobe_rep__func_name(r, fid));
		}
		fprintf(o, " %" PRIu64 "\n", st->count);
	}
	return 0;
}
