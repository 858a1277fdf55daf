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

/*
 * The preloaded agent never loads the companion, yet the companion's BPF
 * object (~700 kB embedded by the skeleton in libstackprobe.so's read-only
 * segment) shared that mapping with the tables the agent reads: the
 * kernel maps whole page-cache folios and 64 KiB windows around a fault,
 * so 100-300 kB of it became resident in every program under `record`
 * (docs/PERFORMANCE.md, "Memory, what does not grow with threads"). The agent's constructor
 * calls this: the pages wholly inside the object become PROT_NONE (their
 * own mapping, which fault-around never crosses) and are dropped if
 * mapped. sprobe_pause__new() makes them readable again first, so the
 * companion works in a process that parked them. Thread-safe; returns 0
 * or -errno (the object is then left as it was).
 */
int sprobe_pause__object_park(void);

#endif /* SPROBE_PAUSE_INTERNAL_H */
