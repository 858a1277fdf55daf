/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cpu mode's CPU coverage in the text report (no thread is
 * silently missing). The agent writes each thread's CPU clock (THREAD_CPU
 * records, about every 100 ms and at exit); a sample stands for one period
 * (1/F) of CPU, so a thread's samples / (its CPU time x F) is the share of
 * its CPU the profile shows. Every thread that used at least two periods
 * and shows less than half of them is named, with the reason known.
 */
#include <inttypes.h>
#include <stdio.h>

#include "userspace/report/report_internal.h"

static const char *engine_line(uint32_t flags)
{
	switch (flags & SPROBE_DF_HEADER_CPU_ENGINE_MASK) {
	case SPROBE_CPU_ENGINE_PERF:
		return "perf-event (a task-clock perf event per thread)";
	case SPROBE_CPU_ENGINE_TIMER:
		return "cpu-timer (CPU-clock timers fire at the scheduler tick only: a workload "
		       "whose phases line up with the tick is seen at a fixed phase)";
	case SPROBE_CPU_ENGINE_POLL:
		return "cpu-poll (captures at randomised intervals, each stack weighted by the CPU "
		       "its thread used since its previous capture)";
	case 0:
		return NULL; /* an older writer: not recorded */
	default:
		return "unknown";
	}
}

void sprobe_rep__write_cpu_coverage(const struct sprobe_report *r, FILE *o)
{
	uint64_t cpu = 0, covered = 0;
	double hz;
	bool any = false, header = false;
	const char *eng;

	if (!r->has_header || r->header.mode != SPROBE_DF_MODE_CPU)
		return;
	eng = engine_line(r->header.flags);
	if (eng)
		fprintf(o, "  engine:   cpu engine: %s\n", eng);
	hz = r->header.freq_hz ? (double)r->header.freq_hz : 99.0;
	uint64_t on_timer = 0, nosrc = 0;
	for (size_t i = 0; i < r->threads.n; i++) {
		on_timer += !!(r->threads.v[i].cpu_flags & SPROBE_CPU_USAGE_TIMER);
		nosrc += !!(r->threads.v[i].cpu_flags & SPROBE_CPU_USAGE_NOSOURCE);
	}
	if (on_timer)
		fprintf(o, "            %" PRIu64 " threads on CPU timers instead of perf events "
			   "(no descriptor left in the agent's budget, docs/AGENT.md): tick-bound\n",
			on_timer);
	if (nosrc)
		fprintf(o, "            %" PRIu64 " threads with no signal source at some point (no "
			   "descriptor left and no room for a CPU timer in RLIMIT_SIGPENDING, "
			   "docs/LIMITATIONS.md): unsampled meanwhile\n",
			nosrc);
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];

		if (!t->cpu_seen || !sprobe_rep__selected(r, t->tid))
			continue;
		any = true;
		cpu += t->cpu_ns;
		covered += t->samples;
	}
	if (!any)
		return;
	fprintf(o, "  coverage: %.3f s of CPU in the sampled threads, %" PRIu64
		   " samples = %.3f s at %.0f Hz (%.0f%%)\n",
		(double)cpu / 1e9, covered, (double)covered / hz, hz,
		cpu ? 100.0 * ((double)covered / hz) / ((double)cpu / 1e9) : 0.0);
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];
		double periods = (double)t->cpu_ns * hz / 1e9;

		if (!t->cpu_seen || !sprobe_rep__selected(r, t->tid) || periods < 2 ||
		    (double)t->samples >= periods / 2)
			continue;
		if (!header)
			fprintf(o, "  UNSAMPLED CPU (threads whose CPU time the samples do not show):\n");
		header = true;
		fprintf(o, "            tid %u (%s): %.3f s of CPU, %" PRIu64 " samples (%.0f%%): %s\n",
			t->tid, t->name && *t->name ? t->name : "?", (double)t->cpu_ns / 1e9, t->samples,
			100.0 * (double)t->samples / periods,
			t->cpu_flags & SPROBE_CPU_USAGE_BLOCKED
				? "it blocks the capture signal (dropped 'blocked' while it did; the "
				  "perf-event fallback samples such a thread from when it is found, "
				  "and not where perf events are refused: see the recording's "
				  "'stackprobe:' line)"
			: t->cpu_flags & SPROBE_CPU_USAGE_NOSOURCE
				? "the kernel refused it a signal source (no descriptor left, no room "
				  "for a CPU timer in RLIMIT_SIGPENDING)"
				: "no capture reached it (it started or ran before its signal source "
				  "was set up, or the kernel refused one)");
	}
}
