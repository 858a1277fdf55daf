/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Deferred unwinding and symbolization throughput (docs/PERFORMANCE.md,
 * "Deferred unwinding"). One real capture of a thread parked under a
 * 35-frame stack, then, on that copy:
 *   - frame-pointer walk (sprobe_unwind_fp);
 *   - DWARF walk, warm (one unwinder, libunwind's cache filled);
 *   - DWARF walk, cold (caches flushed before each sample: every frame
 *     searches the .eh_frame_hdr table, parses its FDE, runs its CFI);
 *   - DWARF walk, coldest (a new unwinder and a new inventory per sample);
 *   - symbol lookups, warm; and the one-off cost of loading symbol tables.
 * Built with frame pointers so both walkers see the same 35 frames.
 *
 *   build/bench/bench_unwind [seconds-per-case]   (default 0.5)
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#define DEPTH 31 /* + marker, park, start_thread, clone3 = 35 frames */

static _Atomic int ready, stop;
static _Atomic pid_t worker_tid;
volatile int bench_sink;

int bench_recurse(int n);
void bench_marker(void);

__attribute__((noinline)) void bench_marker(void)
{
	atomic_store(&ready, 1);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		;
}

__attribute__((noinline)) int bench_recurse(int n)
{
	if (n > 0) {
		int r = bench_recurse(n - 1);

		bench_sink += r;
		return r + 1;
	}
	bench_marker();
	return bench_sink;
}

static void *worker(void *arg)
{
	atomic_store(&worker_tid, (pid_t)syscall(SYS_gettid));
	bench_recurse(DEPTH);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(const char *what, double secs, uint64_t samples, uint64_t frames)
{
	printf("  %-44s %10.0f frames/s  %8.2f us/sample  (%llu samples)\n", what,
	       (double)frames / secs, secs * 1e6 / (double)samples, (unsigned long long)samples);
}

int main(int argc, char **argv)
{
	double budget = argc > 1 ? atof(argv[1]) : 0.5;
	struct sprobe_capturer *cap = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *snap = sprobe_snapshot__new(16, 0);
	struct sprobe_thread_sample *t = NULL, s;
	struct sprobe_unwinder *u;
	struct sprobe_modules *mods;
	enum sprobe_unwind_stop why;
	pthread_t th;
	uint64_t n, frames;
	double t0, el;

	if (!cap || !snap) {
		fprintf(stderr, "bench_unwind: capture setup failed: %s\n", strerror(errno));
		return 1;
	}
	pthread_create(&th, NULL, worker, NULL);
	while (!atomic_load(&ready))
		sched_yield();
	for (int tries = 0; tries < 100 && !t; tries++) {
		if (sprobe_capturer__capture(cap, snap) != 0)
			break;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
			struct sprobe_thread_sample *x = sprobe_snapshot__thread(snap, i);

			if (x->tid == atomic_load(&worker_tid) && x->stage == SPROBE_STAGE_RAW)
				t = x;
		}
	}
	if (!t) {
		fprintf(stderr, "bench_unwind: could not capture the worker\n");
		return 1;
	}
	/* Copies of the capture, walked over and over: each with frame
	 * storage of its own (a copy must not write the snapshot's). */
	static struct sprobe_frame s_frames[SPROBE_MAX_FRAMES], fps_frames[SPROBE_MAX_FRAMES];

	s = *t;
	s.frames = s_frames;
	s.frames_cap = SPROBE_MAX_FRAMES;
	s.frames_owner = NULL;

	u = sprobe_unwinder__new(NULL);
	mods = sprobe_unwinder__modules(u);
	if (sprobe_unwinder__unwind(u, &s, &why) < 0) {
		fprintf(stderr, "bench_unwind: unwind failed\n");
		return 1;
	}
	uint32_t dwarf_frames = s.nframes;
	struct sprobe_thread_sample fps = *t;

	fps.frames = fps_frames;
	fps.frames_cap = SPROBE_MAX_FRAMES;
	fps.frames_owner = NULL;
	sprobe_unwind_fp(&fps);
	printf("bench_unwind: one capture, %zu stack bytes; DWARF walk: %u frames (stop %s), "
	       "FP walk: %u frames\n", t->stack_len, dwarf_frames, sprobe_unwind_stop__str(why),
	       fps.nframes);

	/* Frame pointers. */
	n = frames = 0;
	t0 = now_s();
	do {
		for (int k = 0; k < 1000; k++) {
			fps.stage = SPROBE_STAGE_RAW;
			frames += (uint64_t)sprobe_unwind_fp(&fps);
		}
		n += 1000;
	} while ((el = now_s() - t0) < budget);
	report("FP (sprobe_unwind_fp)", el, n, frames);

	/* DWARF, warm. */
	n = frames = 0;
	t0 = now_s();
	do {
		for (int k = 0; k < 100; k++)
			frames += (uint64_t)sprobe_unwinder__unwind(u, &s, NULL);
		n += 100;
	} while ((el = now_s() - t0) < budget);
	report("DWARF warm (one unwinder)", el, n, frames);

	/* DWARF, cold row cache (every procedure searched and parsed again),
	 * warm inventory. */
	n = frames = 0;
	t0 = now_s();
	do {
		sprobe_unwinder__flush(u);
		frames += (uint64_t)sprobe_unwinder__unwind(u, &s, NULL);
		n++;
	} while ((el = now_s() - t0) < budget);
	report("DWARF cold (caches flushed before each)", el, n, frames);

	/* DWARF, everything cold. */
	n = frames = 0;
	t0 = now_s();
	do {
		struct sprobe_unwinder *c = sprobe_unwinder__new(NULL);

		frames += (uint64_t)sprobe_unwinder__unwind(c, &s, NULL);
		sprobe_unwinder__free(c);
		n++;
	} while ((el = now_s() - t0) < budget);
	report("DWARF coldest (new unwinder + inventory)", el, n, frames);

	/* Inventory refresh when nothing changed (done before every snapshot). */
	n = 0;
	t0 = now_s();
	do {
		for (int k = 0; k < 1000; k++)
			sprobe_modules__refresh(mods);
		n += 1000;
	} while ((el = now_s() - t0) < budget);
	printf("  %-44s %10.0f /s     %8.3f us each\n", "inventory refresh, unchanged", (double)n / el,
	       el * 1e6 / (double)n);

	/* Symbols: first load (exe .symtab, libc through its debug file), then
	 * warm lookups of the 35 pcs. */
	struct sprobe_modules *fresh = sprobe_modules__new(NULL);
	struct sprobe_symbol sym;

	t0 = now_s();
	for (uint32_t i = 0; i < s.nframes; i++)
		sprobe_modules__symbolize(fresh, sprobe_frame_lookup_pc(&s.frames[i]), &sym);
	el = now_s() - t0;
	printf("  %-44s %10.2f ms  (%zu modules in the inventory)\n",
	       "symbol tables, first load (exe + libc)", el * 1e3, sprobe_modules__count(fresh));
	n = 0;
	t0 = now_s();
	do {
		for (int k = 0; k < 100; k++)
			for (uint32_t i = 0; i < s.nframes; i++)
				sprobe_modules__symbolize(fresh, sprobe_frame_lookup_pc(&s.frames[i]),
							  &sym);
		n += 100 * (uint64_t)s.nframes;
	} while ((el = now_s() - t0) < budget);
	printf("  %-44s %10.0f lookups/s  %6.3f us each\n", "symbol lookup, warm", (double)n / el,
	       el * 1e6 / (double)n);

	sprobe_modules__free(fresh);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
	sprobe_capturer__free(cap);
	return 0;
}
