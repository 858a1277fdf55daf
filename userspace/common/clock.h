/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The clock readings of the userspace stages and the CLI. Monotonic
 * (CLOCK_MONOTONIC: the clock every window timestamp, the data file and the
 * eBPF companion use, so their times compare without an offset). Inline so
 * the CLI and the library share it without a symbol.
 */
#ifndef SPROBE_COMMON_CLOCK_H
#define SPROBE_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sprobe_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time, for the data file's header and trailer (when the
 * recording happened). */
static inline uint64_t sprobe_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
