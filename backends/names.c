/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Names of the capture layer's enumerations, apart from the snapshot so
 * that readers of data files (the report, its fuzzer) take them without
 * the capture code.
 */
#include <errno.h>
#include <string.h>

#include <stackprobe/capture.h>

const char *sprobe_cpu_engine__name(uint32_t engine)
{
	switch (engine) {
	case SPROBE_CPU_ENGINE_AUTO:
		return "auto";
	case SPROBE_CPU_ENGINE_PERF:
		return "perf-event";
	case SPROBE_CPU_ENGINE_TIMER:
		return "cpu-timer";
	case SPROBE_CPU_ENGINE_POLL:
		return "cpu-poll";
	default:
		return "unknown";
	}
}

int sprobe_cpu_engine__parse(const char *name)
{
	if (!name)
		return -EINVAL;
	if (!strcmp(name, "auto"))
		return SPROBE_CPU_ENGINE_AUTO;
	if (!strcmp(name, "perf") || !strcmp(name, "perf-event"))
		return SPROBE_CPU_ENGINE_PERF;
	if (!strcmp(name, "timer") || !strcmp(name, "cpu-timer"))
		return SPROBE_CPU_ENGINE_TIMER;
	if (!strcmp(name, "poll") || !strcmp(name, "cpu-poll"))
		return SPROBE_CPU_ENGINE_POLL;
	return -EINVAL;
}
