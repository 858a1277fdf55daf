/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Test seams of the companion's loader: not part of the API (hidden in the
 * shared library, reachable by tests linked with the static one).
 */
#ifndef SPROBE_PAUSE_INTERNAL_H
#define SPROBE_PAUSE_INTERNAL_H

#include <stdbool.h>

/*
 * Load the next companions as if sched_process_exit had no group_dead
 * argument (kernels before 6.16): the BPF side then decides a process's
 * end from signal->live. Lets that path be tested on a newer kernel. Not
 * thread-safe with sprobe_pause__new().
 */
void sprobe_pause__test_ignore_group_dead(bool on);

#endif /* SPROBE_PAUSE_INTERNAL_H */
