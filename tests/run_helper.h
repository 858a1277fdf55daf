/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the end-to-end tests (tests/run_helper.c). */
#ifndef SPROBE_TESTS_RUN_HELPER_H
#define SPROBE_TESTS_RUN_HELPER_H

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* Run cmd with /bin/sh; its stdout (and stderr where cmd says 2>&1) into a
 * malloc'd NUL-terminated *out (the caller frees it; NULL: discarded).
 * Returns the exit status, -1 if it did not exit. Fails the test (cmocka)
 * if the command cannot be started. */
int sprobe_test_run(const char *cmd, char **out);

/* Samples of a folded report (lines "root;...;leaf COUNT") whose line
 * holds fn, summed; *roots (if not NULL) gets how many distinct first
 * frames those lines have (the thread, or the process of a multi-process
 * recording: up to 32 are told apart). */
unsigned long sprobe_test_folded_count(const char *folded, const char *fn, int *roots);

/* 0 if this process may open a task-clock perf event on itself (with
 * user registers and a stack copy in its samples, when regs_stack), user
 * and kernel or user only; else -errno. */
int sprobe_test_perf_allowed(bool regs_stack);

/* Skip the test, saying why, where the kernel refuses perf events; fail
 * on any other error. */
#define NEED_PERF(regs_stack)                                                               \
	do {                                                                                \
		int e_ = sprobe_test_perf_allowed(regs_stack);                              \
		if (e_ == -EACCES || e_ == -EPERM || e_ == -ENOENT || e_ == -ENOSYS)        \
			SPROBE_SKIP("perf events not allowed here (%s)\n", strerror(-e_)); \
		assert_int_equal(e_, 0);                                                    \
	} while (0)

#endif
