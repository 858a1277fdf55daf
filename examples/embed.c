/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Embedding libstackprobe: the three things an application does with the
 * public C API.
 *
 *   1. capture now: stop every other thread for a moment, copy its stack,
 *      let it run again, then unwind and symbolize the copies
 *      (capture.h + unwind.h + symbolize.h);
 *   2. start the sampler (sampler.h): a probe thread that samples every
 *      thread at a fixed rate, publishes each thread's latest stack in a
 *      shared-memory table and writes a data file for `stackprobe report`;
 *   3. read that table (table.h), as another process (`stackprobe dump`)
 *      would.
 *
 * Build against an installed library:
 *   cc -o embed embed.c $(pkg-config --cflags --libs stackprobe)
 *   cc -static -o embed embed.c $(pkg-config --static --cflags --libs stackprobe)
 * Run:
 *   ./embed [DATAFILE]      then: stackprobe report -i DATAFILE
 *
 * It checks what it prints: exit 0 only if the capture found the worker in
 * embed_spin(), the sampler took samples and the table held the worker.
 */
#define _GNU_SOURCE	/* gettid */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe.h>
#include <stackprobe/capture.h>
#include <stackprobe/sampler.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/table.h>
#include <stackprobe/unwind.h>

static atomic_bool stop_workers;
static atomic_int worker_tid;

/* The function the capture must find on the worker's stack. noinline and
 * a side effect keep it a real frame at any optimisation level. */
__attribute__((noinline)) static unsigned long embed_spin(void)
{
	volatile unsigned long x = 0;

	while (!atomic_load_explicit(&stop_workers, memory_order_relaxed))
		x++;
	return x;
}

static void *worker(void *arg)
{
	(void)arg;
	atomic_store(&worker_tid, (int)gettid());
	return (void *)embed_spin();
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1. One capture of every other thread, unwound and symbolized. Returns
 * whether the worker's stack holds embed_spin. */
static int capture_now(pid_t want_tid)
{
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *snap = sprobe_snapshot__new(0, 0);
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	int found = 0, err;

	if (!c || !snap || !u) {
		fprintf(stderr, "embed: capture setup: %s\n", strerror(errno));
		goto out;
	}
	err = sprobe_capture_and_resolve(c, snap, u);
	if (err) {
		fprintf(stderr, "embed: capture: %s\n", strerror(-err));
		goto out;
	}
	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(snap);

	printf("capture: %u threads, %u captured, pause %.1f us in total\n", st->threads_total,
	       st->threads_captured, (double)st->pause_ns / 1000.0);
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
		const struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);

		if (t->stage != SPROBE_STAGE_UNWOUND) {
			printf("  tid %d: not captured (%s)\n", (int)t->tid,
			       sprobe_drop_reason__str(t->drop_reason));
			continue;
		}
		printf("  tid %d: %u frames, window %.1f us\n", (int)t->tid, t->nframes,
		       (double)(t->exit_ns - t->entry_ns) / 1000.0);
		for (uint32_t k = 0; k < t->nframes; k++) {
			struct sprobe_symbol sym;
			char line[256];

			sprobe_modules__symbolize(sprobe_unwinder__modules(u),
						  sprobe_frame_lookup_pc(&t->frames[k]), &sym);
			sprobe_symbol__snprintf(&sym, line, sizeof(line));
			printf("    #%-2u %s\n", k, line);
			if (t->tid == want_tid && sym.name && strcmp(sym.name, "embed_spin") == 0)
				found = 1;
		}
	}
out:
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
	sprobe_capturer__free(c);	/* one capturer per process: the sampler needs it */
	return found;
}

/* 3. Read the table the sampler publishes. Returns whether a node for
 * want_tid with frames is there. */
static int read_table(const char *path, pid_t want_tid)
{
	char errbuf[256] = "";
	struct sprobe_table_open_opts o = { .sz = sizeof(o), .errbuf = errbuf,
					    .errbuf_len = sizeof(errbuf) };
	struct sprobe_table *t = sprobe_table__open_path(path, &o);
	struct sprobe_table_node node;
	int found = 0, rc;

	if (!t) {
		fprintf(stderr, "embed: open table %s: %s\n", path, errbuf);
		return 0;
	}
	if (sprobe_table__iter_begin(t) == 0) {
		while ((rc = sprobe_table__iter_next(t, &node)) == 1) {
			if (node.tid == want_tid && node.nframes > 0)
				found = 1;
		}
	}
	sprobe_table__close(t);
	return found;
}

int main(int argc, char **argv)
{
	const char *datafile = argc > 1 ? argv[1] : NULL;
	char table[128];
	pthread_t th;
	int ok_capture, ok_table = 0, err;
	uint64_t deadline;
	struct sprobe_sampler_stats stats = { 0 };

	printf("libstackprobe %s\n", sprobe_version());
	if (pthread_create(&th, NULL, worker, NULL))
		return 1;
	deadline = now_ns() + 5000000000ull;
	while (!atomic_load(&worker_tid) && now_ns() < deadline)
		sched_yield();
	pid_t wtid = atomic_load(&worker_tid);

	/* The worker may not have reached embed_spin at the first capture:
	 * try a few times. */
	ok_capture = 0;
	for (int i = 0; i < 20 && !ok_capture; i++)
		ok_capture = capture_now(wtid);

	/* 2. The sampler: 199 Hz, wall mode, a table at our own path. */
	snprintf(table, sizeof(table), "/tmp/stackprobe-embed-%d.table", (int)getpid());
	struct sprobe_sampler_opts so = {
		.sz = sizeof(so), .freq_hz = 199, .mode = SPROBE_MODE_WALL,
		.output = datafile, .table_path = table,
	};
	struct sprobe_sampler *s = sprobe_sampler__start(&so);

	if (!s) {
		fprintf(stderr, "embed: sampler: %s\n", strerror(errno));
		atomic_store(&stop_workers, true);
		pthread_join(th, NULL);
		return 1;
	}
	/* Read the table until it shows the worker (bounded wait). */
	deadline = now_ns() + 5000000000ull;
	while (!ok_table && now_ns() < deadline) {
		ok_table = read_table(table, wtid);
		sprobe_sampler__stats(s, &stats);
		if (!ok_table)
			sched_yield();
	}
	/* Let it take a few rounds more (bounded), so the data file has some. */
	while (stats.rounds < 20 && now_ns() < deadline) {
		sched_yield();
		sprobe_sampler__stats(s, &stats);
	}
	err = sprobe_sampler__stop(s);
	atomic_store(&stop_workers, true);
	pthread_join(th, NULL);

	printf("sampler: %llu rounds, %llu samples, %llu thread-captures dropped%s%s\n",
	       (unsigned long long)stats.rounds, (unsigned long long)stats.samples,
	       (unsigned long long)stats.threads_dropped, datafile ? ", data file " : "",
	       datafile ? datafile : "");
	printf("checks: capture found embed_spin: %s; table held the worker: %s; sampler stop: %s\n",
	       ok_capture ? "yes" : "NO", ok_table ? "yes" : "NO", err ? strerror(-err) : "ok");
	return ok_capture && ok_table && stats.samples > 0 && !err ? 0 : 1;
}
