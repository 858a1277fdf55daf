/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sampler's life cycle: a probe thread (probe.c) that captures,
 * unwinds, publishes and streams, started with everything it needs
 * allocated here (sprobe_sampler__start), stopped and its file finished
 * (sprobe_sampler__stop), or abandoned in a fork child (__forget). One
 * sampler per process: the capture handler is process-wide.
 *
 * CPU mode: per-thread POSIX timers on each thread's own CPU clock
 * (sprobe_capturer__cpu_collect(), backends/linux/cputime.c): the kernel signals a
 * thread after every 1/F of CPU time it consumed, the handler copies the
 * stack where that CPU was spent, and each round (every 1/F of wall time)
 * the probe collects the finished samples, weighted by the expirations each
 * stands for. A thread that stays blocked is never signalled and has no
 * samples; it stays in the node table (with its last stack) while it lives.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>
#include <stackprobe/stream.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/table.h>
#include <stackprobe/unwind.h>

#include "userspace/datafile/datafile_owned.h"

/* Longest __start() waits for the cpu sources (see there). */
#define SOURCES_WAIT_NS 200000000ull
#include "userspace/common/clock.h"
#include "userspace/common/dl_failed.h"
#include "userspace/common/dl_table.h"
#include "userspace/common/fds.h"
#include "userspace/common/zalloc.h"
#include "userspace/sampler/blocked_perf.h"
#include "userspace/sampler/sampler_internal.h"
#include "userspace/unwind/unwind_prepare.h"

#define DEFAULT_FREQ 99.0
#define DEFAULT_TABLE_NODES 1024u
/* Slots, sample headers and the threads table are anonymous mappings
 * paged in by use: a process of few threads pays for the few. */
#define DEFAULT_MAX_THREADS 16384u
/* Carrying blocked threads forward: checks of blocked threads per second
 * (each a schedstat read, ~2 us cached, ~8 us past the descriptor
 * budget), and the longest turn, in s. */
#define CARRY_CHECKS_PER_S 800.0
#define CARRY_TURN_MAX_S 5.0


/* One sampler per process: the capture handler is process-wide. */
static atomic_flag sampler_running = ATOMIC_FLAG_INIT;

int sprobe_sampler_mode__parse(const char *name)
{
	if (!name)
		return -EINVAL;
	if (strcmp(name, "wall") == 0)
		return SPROBE_MODE_WALL;
	if (strcmp(name, "cpu") == 0)
		return SPROBE_MODE_CPU;
	return -EINVAL;
}

static void sampler_free(struct sprobe_sampler *s)
{
	if (!s)
		return;
	sprobe_stream__free(s->stream);
	sprobe_datafile_writer__free(s->writer);
	sprobe_fd__close(s->fd);
	sprobe_table__close(s->table);
	sprobe_blocked_perf__free(s->bperf);
	sprobe_unwinder__free(s->unwinder);
	sprobe_snapshot__free(s->snap);
	sprobe_capturer__free(s->capturer);
	for (size_t i = 0; i < s->nmods; i++)
		free(s->mods[i].path);
	free(s->mods);
	free(s->pcs.keys);
	free(s->lines_pending);
	sprobe__zfree(s->threads);
	sprobe__zfree(s->tidx);
	sprobe__zfree(s->windows);
	sprobe__zfree(s->dropped);
	sprobe__zfree(s->usage);
	sprobe__zfree(s->carry_from);
	sprobe__zfree(s->carry_tid);
	free(s);
}

struct sprobe_sampler *sprobe_sampler__start(const struct sprobe_sampler_opts *opts)
{
	struct sprobe_sampler *s;
	int err = 0;

	if (!opts || opts->sz < sizeof(size_t) || opts->sz > sizeof(*opts)) {
		errno = EINVAL;
		return NULL;
	}
	if (atomic_flag_test_and_set(&sampler_running)) {
		errno = EBUSY;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		atomic_flag_clear(&sampler_running);
		errno = ENOMEM;
		return NULL;
	}
	s->fd = -1;
	memcpy(&s->opts, opts, opts->sz);
	s->opts.sz = sizeof(s->opts);
	if (s->opts.freq_hz == 0)
		s->opts.freq_hz = DEFAULT_FREQ;
	if (!(s->opts.freq_hz > 0 && s->opts.freq_hz <= 10000) ||
	    s->opts.cpu_engine > SPROBE_CPU_ENGINE_POLL ||
	    s->opts.mode > SPROBE_MODE_CPU || s->opts.duration_s < 0) {
		err = EINVAL;
		goto fail_early;
	}
	if (!s->opts.max_threads)
		s->opts.max_threads = DEFAULT_MAX_THREADS;
	if (!s->opts.table_capacity)
		s->opts.table_capacity = DEFAULT_TABLE_NODES;

	s->threads_cap = 1;
	while (s->threads_cap < 2 * (size_t)s->opts.max_threads)
		s->threads_cap <<= 1;
	/* Both resident only where written: the entries densely, the index
	 * where its tids hash (threads.c). */
	s->threads = sprobe__zcalloc(s->threads_cap, sizeof(*s->threads));
	s->tidx = sprobe__zcalloc(s->threads_cap, sizeof(*s->tidx));
	s->windows = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->windows));
	s->dropped = sprobe__zcalloc(SPROBE_DF_MAX_DROPPED_TIDS, sizeof(*s->dropped));
	s->usage = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->usage));
	s->carry_from = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->carry_from));
	s->carry_tid = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->carry_tid));
	if (!s->threads || !s->tidx || !s->windows || !s->dropped || !s->usage || !s->carry_from ||
	    !s->carry_tid) {
		err = ENOMEM;
		goto fail;
	}

	struct sprobe_capture_opts copts = {
		.sz = sizeof(copts),
		.signo = s->opts.signo,
		.max_stack_bytes = s->opts.max_stack_bytes,
		.max_threads = s->opts.max_threads,
		/* The POLL engine captures as wall mode does: zero-pause reads
		 * the blocked threads (they used no CPU) without a signal. */
		.zero_pause = !s->opts.no_zero_pause &&
			      (s->opts.mode == SPROBE_MODE_WALL ||
			       s->opts.cpu_engine == SPROBE_CPU_ENGINE_POLL ||
			       s->opts.cpu_engine == SPROBE_CPU_ENGINE_AUTO),
		.zero_pause_pretested = s->opts.zero_pause_pretested,
	};
	s->capturer = sprobe_capturer__new(&copts);
	if (!s->capturer) {
		err = errno;
		goto fail;
	}
	s->zero_pause = sprobe_capturer__zero_pause(s->capturer, NULL, 0) == 1;
	if (s->zero_pause) {
		/* Blocked threads are checked in turns and carried forward in
		 * between: a round costs the threads that ran plus about
		 * CARRY_CHECKS_PER_S / F checks, not every thread; a turn
		 * lasts N / CARRY_CHECKS_PER_S s, at most CARRY_TURN_MAX_S
		 * (docs/capture.md "Many threads"). */
		double per_round = CARRY_CHECKS_PER_S / s->opts.freq_hz;
		double rounds = s->opts.freq_hz * CARRY_TURN_MAX_S;

		(void)sprobe_capturer__zp_carry(s->capturer, per_round < 1 ? 1 : (uint32_t)(per_round + 0.5),
						rounds < 1 ? 1 : rounds > 65535 ? 65535 : (uint32_t)rounds);
	}
	if (s->opts.mode == SPROBE_MODE_CPU && s->opts.cpu_engine == SPROBE_CPU_ENGINE_POLL) {
		s->cpu_engine = SPROBE_CPU_ENGINE_POLL;
		snprintf(s->cpu_engine_why, sizeof(s->cpu_engine_why),
			 "cpu engine: cpu-poll (asked for; captures at randomised intervals, each "
			 "stack weighted by the CPU its thread used since its previous capture)");
	} else if (s->opts.mode == SPROBE_MODE_CPU) {
		/* Chosen before the header is written: the file says which.
		 * AUTO: perf events, else cpu-poll, which does not alias with
		 * the tick as the CPU timers do (docs/PERFORMANCE.md "CPU
		 * engines"). */
		uint32_t want = s->opts.cpu_engine == SPROBE_CPU_ENGINE_AUTO ? SPROBE_CPU_ENGINE_PERF
									       : s->opts.cpu_engine;
		int e = sprobe_capturer__cpu_engine(s->capturer, want, s->cpu_engine_why,
						    sizeof(s->cpu_engine_why));
		if (e < 0 && s->opts.cpu_engine == SPROBE_CPU_ENGINE_AUTO && e != -ECHILD) {
			const char *why = strstr(s->cpu_engine_why, "unavailable: ");
			char reason[sizeof(s->cpu_engine_why)];

			snprintf(reason, sizeof(reason), "%s", why ? why + 13 : strerror(-e));
			snprintf(s->cpu_engine_why, sizeof(s->cpu_engine_why),
				 "cpu engine: cpu-poll (fallback: %.400s; captures at randomised "
				 "intervals weighted by CPU)", reason);
			e = SPROBE_CPU_ENGINE_POLL;
		}
		if (e < 0) {
			err = -e;
			goto fail;
		}
		s->cpu_engine = (uint32_t)e;
	}
	if (s->opts.exclude_tid > 0) {
		int xe = sprobe_capturer__exclude_tid(s->capturer, s->opts.exclude_tid);
		if (xe < 0 && xe != -EEXIST) {
			err = -xe;
			goto fail;
		}
	}
	s->snap = sprobe_snapshot__new(s->opts.max_threads, s->opts.max_stack_bytes);
	if (!s->snap) {
		err = errno;
		goto fail;
	}
	/* Events are opened only for threads found blocking the signal; a
	 * failure to make the (empty) set leaves such threads unsampled, as
	 * without it. */
	struct sprobe_blocked_perf_opts bopts = {
		.sz = sizeof(bopts),
		.period_ns = (uint64_t)(1e9 / s->opts.freq_hz),
		.stack_bytes = s->opts.max_stack_bytes && s->opts.max_stack_bytes <
							  SPROBE_BLOCKED_PERF_STACK_DEFAULT
				       ? s->opts.max_stack_bytes
				       : 0,
	};
	s->bperf = sprobe_blocked_perf__new(&bopts);
	struct sprobe_unwinder_opts uopts = { .sz = sizeof(uopts) };
	s->unwinder = sprobe_unwinder__new(&uopts);
	if (!s->unwinder) {
		err = errno;
		goto fail;
	}
	/* Wall mode walks at its first round: libunwind's pipe is made now,
	 * while the registry can still place it above the program's numbers
	 * (unwind_prepare.h). Its absence is said at the first round. */
	if (s->opts.mode != SPROBE_MODE_CPU)
		(void)sprobe__unwinder_prepare(s->unwinder);
	if (!s->opts.no_table) {
		s->table = sprobe_table__create(s->opts.table_path, s->opts.table_capacity);
		if (!s->table) {
			err = errno;
			goto fail;
		}
	}
	if (s->opts.output) {
		/* A registry handle (fds.h): out of the program's numbers,
		 * checked before every batch. 0600: what a program did is
		 * its user's to read (as perf.data). */
		s->fd = sprobe_fd__open(s->opts.output, O_WRONLY | O_CREAT | O_TRUNC, 0600,
					SPROBE_FD_KEEP);
		if (s->fd < 0) {
			err = -s->fd;
			s->fd = -1;
			goto fail;
		}
		struct sprobe_datafile_writer_opts wopts = { .sz = sizeof(wopts) };
		s->writer = sprobe_datafile_writer__new_owned(s->fd, &wopts);
		if (!s->writer) {
			err = errno;
			goto fail;
		}
		struct sprobe_stream_sink sink = sprobe_stream_sink__datafile(s->writer);
		struct sprobe_stream_opts sopts = { .sz = sizeof(sopts),
						    .capacity_bytes = s->opts.queue_bytes,
						    .flush_interval_ns = s->opts.flush_interval_ns };
		s->stream = sprobe_stream__new(&sink, &sopts);
		if (!s->stream) {
			err = errno;
			goto fail;
		}
		sprobe_sampler_emit__header(s);
	}
	err = pthread_create(&s->probe, NULL, sprobe_sampler_probe__main, s);
	if (err)
		goto fail;
	/* cpu mode with per-thread sources: return once the probe's first
	 * collect has made them. The caller (the agent's constructor: the
	 * program's main thread) would otherwise run on unsampled until the
	 * probe thread is scheduled: a process of a few ms (a compiler's
	 * `as`) lost most or all of its samples. Bounded: a probe that
	 * cannot make them soon (a busy machine, a lock the caller holds)
	 * only costs samples. Only on the main thread: a fork child's
	 * sampler starts on a thread of its own while the program runs on
	 * (and may fork again: its child must not inherit a registry section
	 * the probe holds, userspace/agent/process_wrappers.c). */
	if (s->opts.mode == SPROBE_MODE_CPU && !sprobe_sampler_poll__engine(s) &&
	    syscall(SYS_gettid) == getpid()) {
		uint64_t until = sprobe_mono_ns() + SOURCES_WAIT_NS;

		while (!atomic_load(&s->sources_ready)) {
			uint64_t now = sprobe_mono_ns();

			if (now >= until)
				break;
			struct timespec ts = { (time_t)((until - now) / 1000000000ull),
					       (long)((until - now) % 1000000000ull) };
			syscall(SYS_futex, &s->sources_ready, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, &ts,
				NULL, 0);
		}
	}
	return s;

fail:
	sampler_free(s);
	atomic_flag_clear(&sampler_running);
	errno = err;
	return NULL;
fail_early:
	free(s);
	atomic_flag_clear(&sampler_running);
	errno = err;
	return NULL;
}

int sprobe_sampler__zero_pause(const struct sprobe_sampler *s, char *why, size_t len)
{
	if (!s)
		return -EINVAL;
	return sprobe_capturer__zero_pause(s->capturer, why, len);
}

int sprobe_sampler__cpu_engine(const struct sprobe_sampler *s, char *why, size_t len)
{
	if (!s)
		return -EINVAL;
	if (why && len)
		snprintf(why, len, "%s", s->cpu_engine ? s->cpu_engine_why : "");
	return (int)s->cpu_engine;
}

int sprobe_sampler__stop(struct sprobe_sampler *s)
{
	int err = 0;

	if (!s)
		return 0;
	atomic_store(&s->stop, 1); /* seq_cst; the probe re-checks it before each sleep */
	syscall(SYS_futex, &s->stop, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
	/* The probe can wait for something this thread holds. The case met:
	 * exit() from a library constructor, i.e. inside the program's dlopen
	 * with the loader's lock held, while the probe is in a dlopen of its
	 * own (a first-use load, the unwinder's RTLD_NOLOAD pin) waiting for
	 * that lock: an unbounded join hung the program forever. So the join
	 * gives up only when, after SPROBE_SAMPLER_STOP_TIMEOUT_S, a thread of
	 * ours is still in the loader (dl_table.h); a probe that is merely
	 * slow (a loaded machine, a large first DWARF image) is waited for.
	 * Given up: nothing is freed (the probe may still run), the file is
	 * left unfinished (a reader sees it cut short), the table's name is
	 * removed. */
	for (;;) {
		/* pthread_timedjoin_np (CLOCK_REALTIME), not clockjoin: the
		 * thread sanitizers intercept only the former, and a clock step
		 * only moves the next look at the loader. */
		struct timespec dl;

		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += SPROBE_SAMPLER_STOP_TIMEOUT_S;
		if (pthread_timedjoin_np(s->probe, NULL, &dl) != ETIMEDOUT)
			break;
		if (sprobe__dl_busy()) {
			const char *tp = s->table ? sprobe_table__path(s->table) : NULL;

			if (tp)
				unlink(tp);
			return -ETIMEDOUT;
		}
	}

	if (s->stream) {
		struct sprobe_stream_stats st;
		struct sprobe_df_trailer tr = { 0 };
		err = sprobe_stream__close(s->stream);
		sprobe_stream__stats(s->stream, &st);
		tr.end_realtime_ns = sprobe_real_ns();
		tr.end_mono_ns = sprobe_mono_ns();
		memcpy(tr.lost, st.dropped_by_type, sizeof(tr.lost));
		int e2 = sprobe_datafile_writer__finish(s->writer, &tr);
		if (!err)
			err = e2;
	}
	if (!err && s->probe_error)
		err = s->probe_error;
	sampler_free(s);
	atomic_flag_clear(&sampler_running);
	return err;
}

int sprobe_sampler__forget(struct sprobe_sampler *s)
{
	int err;

	if (!s)
		return -EINVAL;
	err = sprobe_capturer__forget(s->capturer);
	if (!err)
		atomic_flag_clear(&sampler_running);
	return err;
}
