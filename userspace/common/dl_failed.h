/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Did a library the agent opens on first use fail to load?
 * (userspace/unwind/libunwind_dl.h, userspace/symbols/libelf_dl.h,
 * userspace/symbols/libdw_dl.h; each .c implements its own.)
 *
 * Why apart from those headers: the sampler says once what a missing
 * library turned off (it used to be a loader error at the program's
 * start, when libstackprobe.so linked them), without taking in their
 * macros. These never load anything: false until a load was tried and
 * failed. Thread-safe (an atomic flag); not async-signal-safe by contract.
 */
#ifndef SPROBE_COMMON_DL_FAILED_H
#define SPROBE_COMMON_DL_FAILED_H

#include <stdbool.h>

bool sprobe__libunwind_failed(void);
bool sprobe__libelf_failed(void);
bool sprobe__libdw_failed(void);

#endif /* SPROBE_COMMON_DL_FAILED_H */
