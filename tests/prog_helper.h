/* SPDX-License-Identifier: BSD-2-Clause */
/* A program running beside a test, with the inventory of its process
 * (tests/prog_helper.c; used by the symbol tests on other processes). */
#ifndef SPROBE_TESTS_PROG_HELPER_H
#define SPROBE_TESTS_PROG_HELPER_H

#include <sys/types.h>

#include <stackprobe/symbolize.h>

/* Run prog with the arguments "100000000000000 FD" (loop that long; write
 * a byte to FD once main runs, when every library is mapped), wait for
 * that byte, and open the inventory of its process; its module named name
 * goes to *mod. Fails the test (cmocka) when any of it fails. */
struct sprobe_modules *sprobe_test_prog_start(const char *prog, const char *name, pid_t *pid,
					      const struct sprobe_module **mod);

/* Free m, kill and reap pid. */
void sprobe_test_prog_stop(struct sprobe_modules *m, pid_t pid);

/* cmocka teardown: kill the program a failed assertion left running. */
int sprobe_test_prog_teardown(void **state);

#endif
