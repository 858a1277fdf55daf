/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private: qsort with a context argument, on every C library stackprobe
 * builds with. glibc's qsort_r takes the context last and passes it last to
 * the comparator; Darwin's (the BSD one) takes it before the comparator and
 * passes it first. Called with the other order, each would hand the context
 * to the comparator as an element. sprobe_qsort_r has glibc's shape
 * everywhere. Thread-safe (no global state); not async-signal-safe.
 */
#ifndef SPROBE_SORT_COMPAT_H
#define SPROBE_SORT_COMPAT_H

#include <stddef.h>
#include <stdlib.h>

typedef int (*sprobe_cmp_r_fn)(const void *a, const void *b, void *arg);

#if defined(__APPLE__)
struct sprobe_qsort_r_ctx {
	sprobe_cmp_r_fn cmp;
	void *arg;
};

static inline int sprobe_qsort_r_bsd(void *ctx, const void *a, const void *b)
{
	const struct sprobe_qsort_r_ctx *c = ctx;

	return c->cmp(a, b, c->arg);
}
#endif

static inline void sprobe_qsort_r(void *base, size_t n, size_t size, sprobe_cmp_r_fn cmp,
				  void *arg)
{
#if defined(__APPLE__)
	struct sprobe_qsort_r_ctx c = { cmp, arg };

	qsort_r(base, n, size, &c, sprobe_qsort_r_bsd);
#else
	qsort_r(base, n, size, cmp, arg);
#endif
}

#endif
