/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capturer of the running capture test and how it is made, shared by
 * test_capture.c, test_capture_copy.c and test_capture_cpu.c (header-only,
 * so the aarch64 lane builds them the same way).
 */
#ifndef SPROBE_CAPTURE_CASE_FIXTURE_H
#define SPROBE_CAPTURE_CASE_FIXTURE_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/capture.h>

#include "capture_fixture.h"
#include "sprobe_test.h"

/* The capturer of the running test, freed by the teardown if the test
 * fails half-way (one capturer per process: a leak would fail the rest). */
static struct sprobe_capturer *g_cur;

static inline struct sprobe_capturer *track(struct sprobe_capturer *c)
{
	if (c)
		g_cur = c;
	return c;
}

static inline void untrack(struct sprobe_capturer *c)
{
	if (c == g_cur)
		g_cur = NULL;
	sprobe_capturer__free(c);
}

static inline int teardown(void **state)
{
	untrack(g_cur);
	return 0;
}

/* qemu-user emulates the guest's signal masks: /proc/<tid>/status shows
 * the host thread's, so "this thread blocks the signal" cannot be seen. */
static inline bool under_qemu(void)
{
	const char *q = getenv("SPROBE_TEST_QEMU");

	return q && *q == '1';
}

static inline struct sprobe_capturer *new_capturer(uint32_t strategy, uint32_t method)
{
	struct sprobe_capture_opts o = {
		.sz = sizeof(o),
		.timeout_ns = fx_timeout_ns(),
		.strategy = strategy,
		.method = method,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));

	if (!c)
		print_message("sprobe_capturer__new: %s\n", strerror(errno));
	return c;
}

#endif
