/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Make an unwinder's libunwind state now, not at its first walk
 * (unwind.c).
 *
 * Why: libunwind's initialisation opens a pipe it keeps for the process's
 * life, which the descriptor registry moves above the program's numbers
 * (userspace/common/fds.h). Made at the first walk, that can be after
 * the program lowered RLIMIT_NOFILE, when no number above its own is
 * left: the pipe then takes two of the program's (test_agent_fds
 * test_tight_rlimit). Wall mode walks at its first round anyway, so the
 * sampler prepares at start there; cpu mode keeps the deferral (an idle
 * program never maps libunwind: docs/PERFORMANCE.md, "Memory, third
 * pass").
 *
 * Returns 0, -ENOSYS (no libunwind: walks use frame pointers), -ENOMEM,
 * -EINVAL (u NULL). Not thread-safe against walks on the same unwinder.
 */
#ifndef SPROBE_UNWIND_UNWIND_PREPARE_H
#define SPROBE_UNWIND_UNWIND_PREPARE_H

struct sprobe_unwinder;

int sprobe__unwinder_prepare(struct sprobe_unwinder *u);

#endif /* SPROBE_UNWIND_UNWIND_PREPARE_H */
