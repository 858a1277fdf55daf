/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sampler: a probe thread that captures, unwinds, publishes and streams.
 *
 * Order inside one round, and why:
 *   1. capture every sibling (the only part that stops anyone: see
 *      backends/linux/);
 *   2. unwind every copy (all threads run again by now);
 *   3. update the node table, push samples, symbols, thread and module
 *      records into the stream (bounded queue: never blocks the probe).
 * Everything the probe allocates is allocated in __start() or grows
 * rarely (per new thread, per new pc), never inside a window.
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
#define DEFAULT_MAX_THREADS 1024u
#define KEEP_ALIVE_NS 100000000ull /* cpu mode: sweep exited threads every 100 ms */


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

/* ---- tid -> thread_ent ------------------------------------------------ */

static size_t tid_hash(pid_t tid, size_t cap)
{
	return ((uint32_t)tid * 2654435761u) & (cap - 1);
}

/* Find or insert tid. Returns NULL only when the table is full (it is sized
 * at 2x max_threads and swept every round, so that means more live threads
 * than the snapshot holds anyway). */
static struct thread_ent *thread_get(struct sprobe_sampler *s, pid_t tid, bool *fresh)
{
	size_t i = tid_hash(tid, s->threads_cap);
	for (size_t n = 0; n < s->threads_cap; n++, i = (i + 1) & (s->threads_cap - 1)) {
		struct thread_ent *e = &s->threads[i];
		if (e->tid == tid) {
			*fresh = false;
			return e;
		}
		if (e->tid == 0) {
			memset(e, 0, sizeof(*e));
			e->tid = tid;
			*fresh = true;
			s->nents++;
			return e;
		}
	}
	return NULL;
}

static void mark_seen(struct sprobe_sampler *s, struct thread_ent *e)
{
	if (e->round != s->round) {
		e->round = s->round;
		s->nseen++;
	}
}

static bool poll_engine(const struct sprobe_sampler *s);
/* Longest __start() waits for the cpu sources (see there). */
#define SOURCES_WAIT_NS 200000000ull
static void poll_emit_one(struct sprobe_sampler *s, struct thread_ent *e, uint64_t now,
			  uint32_t flags);

/* Remove entries not seen this round (backward-shift deletion keeps the
 * probe sequences intact), dropping their table nodes (POLL engine: and
 * writing their last CPU time first). */
static void threads_sweep(struct sprobe_sampler *s)
{
	size_t cap = s->threads_cap;

	/* Every entry seen: nothing to remove, and no need to walk the
	 * whole table (2 x max_threads entries, cold by the next round). */
	if (s->nseen == s->nents)
		return;
	for (size_t i = 0; i < cap; i++) {
		struct thread_ent *e = &s->threads[i];
		if (e->tid == 0 || e->round == s->round)
			continue;
		if (e->node && s->table)
			sprobe_table__remove(s->table, e->node);
		/* Its ring was drained this round; what came since is lost
		 * (no callback here: it would insert into this table). */
		if (s->bperf)
			sprobe_blocked_perf__unwatch(s->bperf, e->tid, NULL, NULL);
		if (poll_engine(s))
			poll_emit_one(s, e, sprobe_mono_ns(), SPROBE_CPU_USAGE_EXITED);
		/* backward shift */
		size_t hole = i, j = i;
		for (;;) {
			j = (j + 1) & (cap - 1);
			struct thread_ent *f = &s->threads[j];
			if (f->tid == 0)
				break;
			size_t home = tid_hash(f->tid, cap);
			bool movable = hole <= j ? (home <= hole || home > j)
						 : (home <= hole && home > j);
			if (movable) {
				s->threads[hole] = *f;
				hole = j;
			}
		}
		s->threads[hole].tid = 0;
		s->nents--;
		if (hole != i)
			i--; /* re-examine the entry shifted into i */
	}
}


static void publish(struct sprobe_sampler *s, struct thread_ent *e,
		    const struct sprobe_thread_sample *ts, uint64_t now)
{
	struct sprobe_table_frame frames[SPROBE_TABLE_MAX_FRAMES];
	uint32_t n = ts->nframes < SPROBE_TABLE_MAX_FRAMES ? ts->nframes : SPROBE_TABLE_MAX_FRAMES;

	for (uint32_t i = 0; i < n; i++) {
		frames[i].pc = ts->frames[i].pc;
		frames[i].fp = ts->frames[i].fp;
	}
	struct sprobe_table_record rec = {
		.tid = ts->tid,
		.flags = ts->truncated ? SPROBE_TABLE_NODE_STACK_TRUNCATED : 0,
		.capture_ns = now,
		.stack_bytes = ts->stack_top > ts->sp ? ts->stack_top - ts->sp : 0,
		.nframes = n,
		.frames = frames,
	};
	if (e->node) {
		if (sprobe_table__update(s->table, e->node, &rec) == 0)
			return;
		e->node = 0;
	}
	int idx = sprobe_table__insert(s->table, &rec);
	if (idx > 0)
		e->node = (uint32_t)idx;
	else
		atomic_fetch_add_explicit(&s->st_table_errors, 1, memory_order_relaxed);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* cpu mode with the POLL engine: wall-style captures, weighted by CPU. */
static bool poll_engine(const struct sprobe_sampler *s)
{
	return s->opts.mode == SPROBE_MODE_CPU && s->cpu_engine == SPROBE_CPU_ENGINE_POLL;
}

/* The CPU clock of thread tid of this process (MAKE_THREAD_CPUCLOCK). */
static bool thread_cpu(pid_t tid, uint64_t *ns)
{
	clockid_t clk = (clockid_t)((~(unsigned)tid) << 3) | 6;
	struct timespec ts;

	if (clock_gettime(clk, &ts) < 0)
		return false;
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return true;
}

/*
 * POLL engine: the periods of CPU thread e used since its previous
 * capture, which the stack captured now stands for (0: it used less than
 * a period, or it was blocked; the rest is carried). The captures come at random instants
 * (wall_interval()), so the stack is an unbiased draw of where the CPU
 * went, whatever the workload's period, and the weights add up to the
 * thread's CPU time / period.
 */
static uint32_t poll_weight(struct sprobe_sampler *s, struct thread_ent *e, bool running)
{
	uint64_t now, period = (uint64_t)(1e9 / s->opts.freq_hz), w;

	if (!thread_cpu(e->tid, &now))
		return 0;
	if (!e->cpu_known) {
		/* A thread there at the first capture counts from now; one
		 * born later from its start (its CPU so far was sampleable:
		 * the first stack stands for it). */
		e->cpu_known = true;
		e->cpu_first = s->round <= 1 ? now : 0;
		e->cpu_last = e->cpu_first;
	}
	e->cpu_carry += now > e->cpu_last ? now - e->cpu_last : 0;
	e->cpu_last = now;
	/* Read while blocked (zero-pause): its stack is where it waits, not
	 * where the CPU went. The CPU waits for a capture that finds the
	 * thread running or runnable (a later burst: the same draw). */
	if (!running)
		return 0;
	w = e->cpu_carry / period;
	e->cpu_carry -= w * period;
	return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* POLL engine: a THREAD_CPU record for e if its CPU changed since the
 * last one (flags: SPROBE_CPU_USAGE_EXITED when it is being swept). */
static void poll_emit_one(struct sprobe_sampler *s, struct thread_ent *e, uint64_t now,
			  uint32_t flags)
{
	struct sprobe_df_record rec = { .type = SPROBE_DF_THREAD_CPU };

	if (!s->stream || !e->tid || !e->cpu_known || e->cpu_last - e->cpu_first == e->cpu_emitted)
		return;
	e->cpu_emitted = e->cpu_last - e->cpu_first;
	if (!e->named) {
		sprobe_sampler_emit__thread_name(s, e->tid);
		e->named = true;
	}
	rec.thread_cpu.time_ns = now;
	rec.thread_cpu.tid = (uint32_t)e->tid;
	rec.thread_cpu.flags = flags | (e->cpu_blocked ? SPROBE_CPU_USAGE_BLOCKED : 0);
	rec.thread_cpu.cpu_ns = e->cpu_emitted;
	sprobe_stream__push(s->stream, &rec);
}

/* POLL engine: THREAD_CPU records for the threads whose CPU changed. */
static void poll_emit_usage(struct sprobe_sampler *s, uint64_t now)
{
	for (size_t i = 0; i < s->threads_cap; i++)
		poll_emit_one(s, &s->threads[i], now, 0);
}

/* cpu mode: a thread that had no sample this round (it did not use a
 * period of CPU) is kept while it lives; only exited threads are swept. */
static void threads_keep_alive(struct sprobe_sampler *s)
{
	pid_t pid = getpid();
	for (size_t i = 0; i < s->threads_cap; i++) {
		struct thread_ent *e = &s->threads[i];
		if (e->tid == 0 || e->round == s->round)
			continue;
		if (syscall(SYS_tgkill, pid, e->tid, 0) == 0)
			mark_seen(s, e);
	}
}

void sprobe_sampler_emit__name_once(struct sprobe_sampler *s, pid_t tid)
{
	bool fresh;
	struct thread_ent *e = thread_get(s, tid, &fresh);

	if (e && !e->named) {
		sprobe_sampler_emit__thread_name(s, tid);
		e->named = true;
	}
	if (e)
		mark_seen(s, e);
}

/* Leave the stream's writer thread out of the captures: it is ours, not
 * the application's. Its tid is published by the writer itself when it
 * starts, so look until it is there (normally before the first round). */
static void exclude_own_threads(struct sprobe_sampler *s)
{
	if (!s->stream || s->writer_excluded)
		return;
	pid_t tid = sprobe_stream__writer_tid(s->stream);
	if (tid > 0) {
		int err = sprobe_capturer__exclude_tid(s->capturer, tid);
		s->writer_excluded = err == 0 || err == -EEXIST;
	}
}

/* ---- threads that block the capture signal (blocked_perf.h) ----------- */

/* One sample of a blocked thread, drained from its perf event: unwound by
 * the same unwinder as the signal path's copies, then published and
 * streamed like them (weight: one CPU period, plus any the ring lost). */
static void bperf_sample(void *ctx, struct sprobe_thread_sample *ts, uint64_t time_ns)
{
	struct sprobe_sampler *s = ctx;
	bool fresh;
	struct thread_ent *e = ts->tid > 0 ? thread_get(s, ts->tid, &fresh) : NULL;
	uint32_t w = ts->weight ? ts->weight : 1;

	if (!e)
		return;
	sprobe_unwinder__unwind(s->unwinder, ts, NULL);
	if (!e->named) {
		sprobe_sampler_emit__thread_name(s, ts->tid);
		e->named = true;
	}
	if (s->table)
		publish(s, e, ts, time_ns);
	if (w > SPROBE_DF_SAMPLE_WEIGHT_MAX)
		ts->weight = w = SPROBE_DF_SAMPLE_WEIGHT_MAX;
	sprobe_stream__push_thread_sample(s->stream, ts, time_ns);
	atomic_fetch_add_explicit(&s->st_samples, w, memory_order_relaxed);
	sprobe_sampler_emit__symbols(s, ts);
}

/*
 * A capture dropped e's thread as 'blocked': watch it with a perf event if
 * it runs. cpu mode (perf or timer engine): the engine drops a thread
 * only after it used CPU with the signal blocked. Wall mode and cpu-poll:
 * a blocked thread waiting in the kernel is read by zero-pause; without
 * it, its CPU clock says whether it ran since its previous 'blocked' drop.
 */
static void bperf_blocked(struct sprobe_sampler *s, struct thread_ent *e)
{
	char why[256], line[400];
	uint64_t now;
	int err;

	if (!s->bperf || sprobe_blocked_perf__watching(s->bperf, e->tid))
		return;
	if (!sprobe_blocked_perf__available(s->bperf, NULL, 0))
		goto refused;
	if (s->opts.mode != SPROBE_MODE_CPU || poll_engine(s)) {
		bool ran;

		if (!thread_cpu(e->tid, &now))
			return;
		/* With zero-pause, a thread waiting in the kernel is read, not
		 * dropped: a 'blocked' drop is a thread that ran or was
		 * runnable, so the first one is enough. */
		ran = (e->blk_known && now > e->blk_cpu) || (!e->blk_known && s->zero_pause);
		e->blk_cpu = now;
		e->blk_known = true;
		if (!ran)
			return;
	}
	err = sprobe_blocked_perf__watch(s->bperf, e->tid);
	if (err == 0 || sprobe_blocked_perf__available(s->bperf, NULL, 0))
		return; /* watched, or not now (descriptor budget): tried again */
refused:
	if (s->bperf_noticed)
		return;
	sprobe_blocked_perf__available(s->bperf, why, sizeof(why));
	s->bperf_noticed = true;
	if (s->opts.notice) {
		snprintf(line, sizeof(line),
			 "thread %d blocks the capture signal; no perf-event fallback: %s; "
			 "threads that do are reported unsampled",
			 (int)e->tid, why);
		s->opts.notice(s->opts.notice_ctx, line);
	}
}

/* The thread takes the capture signal again, or is no longer flagged as
 * blocking it: the signal path has it, close its event (drained first). */
static void bperf_release(struct sprobe_sampler *s, pid_t tid)
{
	if (s->bperf && sprobe_blocked_perf__watching(s->bperf, tid))
		sprobe_blocked_perf__unwatch(s->bperf, tid, bperf_sample, s);
}

/* cpu mode: THREAD_CPU records, then release the threads no longer flagged
 * BLOCKED (or gone). */
static void cpu_usage_round(struct sprobe_sampler *s, uint64_t now)
{
	int n = sprobe_sampler_emit__cpu_usage(s, now);

	for (int k = 0; k < n; k++)
		if ((s->usage[k].flags & SPROBE_CPU_USAGE_EXITED) ||
		    !(s->usage[k].flags & SPROBE_CPU_USAGE_BLOCKED))
			bperf_release(s, s->usage[k].tid);
}

/* Say once what a library that could not be opened on first use turned
 * off: linked, its absence was the loader's error at the program's start;
 * opened on demand, it would otherwise only show as flatter stacks or
 * unnamed pcs, and a report blaming the program's symbol table. */
static void libs_notice(struct sprobe_sampler *s)
{
	static const struct {
		bool (*failed)(void);
		const char *line;
	} libs[] = {
		{ sprobe__libunwind_failed,
		  "libunwind could not be loaded: stacks are walked by frame pointers only, "
		  "without DWARF CFI (install libunwind8)" },
		{ sprobe__libelf_failed,
		  "libelf could not be loaded: pcs this agent names itself are left unnamed "
		  "(install libelf1)" },
		{ sprobe__libdw_failed,
		  "libdw could not be loaded: no source lines or inlined frames from this agent "
		  "(install libdw1)" },
	};

	for (uint32_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		if ((s->libs_noticed & (1u << i)) || !libs[i].failed())
			continue;
		s->libs_noticed |= 1u << i;
		if (s->opts.notice)
			s->opts.notice(s->opts.notice_ctx, libs[i].line);
	}
}

/* Unwind, publish and stream the capture in s->snap (err: how it ended),
 * taken at t0. */
static void round_process(struct sprobe_sampler *s, int err, uint64_t t0)
{
	if (err >= 0) {
		/* Unwinds (one pin round for the snapshot), and re-captures
		 * with a signal the zero-pause samples whose walk needs a
		 * register the kernel's syscall file does not give (the
		 * register gap): userspace/sampler/resolve.c. */
		int rerr = sprobe_unwinder__resolve(s->unwinder, s->capturer, s->snap);
		if (rerr < 0)
			err = rerr;
	}
	if (err < 0) {
		if (err == -ENOTSUP)
			s->probe_error = err;
		/* Counted and shown (status line, stop message), not silent. */
		atomic_store_explicit(&s->st_last_error, err, memory_order_relaxed);
		atomic_fetch_add_explicit(&s->st_rounds_failed, 1, memory_order_relaxed);
		if (s->opts.status)
			atomic_fetch_add_explicit(&s->opts.status->rounds_failed, 1,
						  memory_order_relaxed);
		return;
	}
	s->round++;
	s->nseen = 0;

	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s->snap);
	uint32_t n = sprobe_snapshot__nthreads(s->snap), nwin = 0, ndropped = 0;

	if (sprobe_modules__generation(sprobe_unwinder__modules(s->unwinder)) != s->mods_generation)
		s->mods_generation = sprobe_modules__generation(sprobe_unwinder__modules(s->unwinder));

	for (uint32_t i = 0; i < n; i++) {
		struct sprobe_thread_sample *ts = sprobe_snapshot__thread(s->snap, i);
		bool fresh = false;
		struct thread_ent *e = ts->tid > 0 ? thread_get(s, ts->tid, &fresh) : NULL;

		if (ts->drop_reason != SPROBE_DROP_NONE || ts->stage == SPROBE_STAGE_EMPTY) {
			if (ndropped < SPROBE_DF_MAX_DROPPED_TIDS && ts->tid > 0) {
				s->dropped[ndropped].tid = (uint32_t)ts->tid;
				s->dropped[ndropped].reason = ts->drop_reason;
				ndropped++;
			}
			/* An exited thread is forgotten by the sweep. */
			if (e && ts->drop_reason != SPROBE_DROP_EXITED)
				mark_seen(s, e);
			if (e && ts->drop_reason == SPROBE_DROP_BLOCKED)
				bperf_blocked(s, e);
			if (e && poll_engine(s)) {
				/* Its CPU since the last capture goes unsampled. */
				(void)poll_weight(s, e, false);
				e->cpu_carry = 0;
				if (ts->drop_reason == SPROBE_DROP_BLOCKED)
					e->cpu_blocked = true;
			}
			continue;
		}
		if (!e)
			continue;
		mark_seen(s, e);
		/* Its signal reached it: it no longer blocks it. */
		if (ts->method == SPROBE_METHOD_SIGNAL)
			bperf_release(s, ts->tid);
		if (poll_engine(s)) {
			ts->weight = poll_weight(s, e, ts->method != SPROBE_METHOD_ZERO_PAUSE);
			if (!ts->weight)
				continue; /* used no period of CPU since its last capture */
		}
		if (fresh || !e->named) {
			sprobe_sampler_emit__thread_name(s, ts->tid);
			e->named = true;
		}
		if (ts->method == SPROBE_METHOD_ZERO_PAUSE)
			s->windows[nwin++] = 0; /* read without stopping it */
		else if (ts->exit_ns > ts->entry_ns)
			s->windows[nwin++] = ts->exit_ns - ts->entry_ns;
		if (s->table)
			publish(s, e, ts, t0);
		/* cpu mode: the record carries the CPU periods the timer
		 * counted for this stack (overruns the kernel folded at its
		 * tick, expiries before the probe collected): one record,
		 * weighted, instead of copies of the same stack. */
		uint32_t w = ts->weight ? ts->weight : 1;
		if (w > SPROBE_DF_SAMPLE_WEIGHT_MAX)
			w = SPROBE_DF_SAMPLE_WEIGHT_MAX; /* what the file can say */
		sprobe_stream__push_thread_sample(s->stream, ts, t0);
		atomic_fetch_add_explicit(&s->st_samples, w, memory_order_relaxed);
	}
	/* The blocked threads' perf-event samples since the last round. */
	if (s->bperf)
		sprobe_blocked_perf__drain(s->bperf, sprobe_mono_ns(), bperf_sample, s);
	sprobe_sampler_emit__pending_lines(s);
	/* Symbols after the round's samples: naming a new pc can take long
	 * (the first libdw lookup in a module reads its debug file), and a
	 * process killed meanwhile keeps the samples already in the stream
	 * (readers take symbols after the samples that use them). */
	for (uint32_t i = 0; i < n; i++) {
		struct sprobe_thread_sample *ts = sprobe_snapshot__thread(s->snap, i);

		if (ts->drop_reason == SPROBE_DROP_NONE && ts->stage != SPROBE_STAGE_EMPTY && ts->tid > 0)
			sprobe_sampler_emit__symbols(s, ts);
	}
	/* Done with the copies: those of threads blocked for a whole round
	 * go back to the kernel (their walks stay for the next capture to
	 * keep), so a blocked thread costs no copy between rounds
	 * (docs/PERFORMANCE.md "Memory, per thread"). A failure only costs
	 * memory. */
	(void)sprobe_snapshot__trim(s->snap);

	struct sprobe_df_record rec = { .type = SPROBE_DF_CAPTURE };
	rec.capture.time_ns = t0;
	rec.capture.threads_total = st->threads_total;
	rec.capture.threads_captured = st->threads_captured;
	rec.capture.threads_dropped = st->threads_dropped;
	memcpy(rec.capture.dropped, st->dropped, sizeof(rec.capture.dropped));
	rec.capture.pause_ns = st->pause_ns;
	rec.capture.capture_ns = st->capture_ns;
	rec.capture.dropped_tids = s->dropped;
	rec.capture.ndropped_tids = ndropped;
	sprobe_stream__push(s->stream, &rec);

	if (poll_engine(s) && t0 - s->last_sweep_ns >= KEEP_ALIVE_NS) {
		poll_emit_usage(s, t0);
		s->last_sweep_ns = t0;
	}
	if (s->opts.mode != SPROBE_MODE_CPU || poll_engine(s)) {
		threads_sweep(s); /* the capture listed every live thread */
	} else if (t0 - s->last_sweep_ns >= KEEP_ALIVE_NS) {
		/* Each thread's CPU time, for the coverage (and the check
		 * for threads that block the signal): same cadence. */
		cpu_usage_round(s, t0);
		/* cpu mode samples only threads that used CPU: the others
		 * are asked whether they live (one tgkill(0) each), so not
		 * every round. An exited thread's node stays in the table
		 * until then. */
		threads_keep_alive(s);
		threads_sweep(s);
		s->last_sweep_ns = t0;
	}

	if (nwin) {
		qsort(s->windows, nwin, sizeof(uint64_t), cmp_u64);
		atomic_store_explicit(&s->st_window_median, s->windows[nwin / 2],
				      memory_order_relaxed);
	}
	libs_notice(s);
	atomic_fetch_add_explicit(&s->st_rounds, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->st_threads_dropped, st->threads_dropped,
				  memory_order_relaxed);
	atomic_store_explicit(&s->st_threads, st->threads_total, memory_order_relaxed);
	if (s->opts.status) {
		struct sprobe_sampler_stats now;
		sprobe_sampler__stats(s, &now);
		struct sprobe_sampler_status *o = s->opts.status;
		atomic_store_explicit(&o->rounds, now.rounds, memory_order_relaxed);
		atomic_store_explicit(&o->samples, now.samples, memory_order_relaxed);
		atomic_store_explicit(&o->threads_dropped, now.threads_dropped, memory_order_relaxed);
		atomic_store_explicit(&o->stream_dropped, now.stream_dropped, memory_order_relaxed);
		atomic_store_explicit(&o->window_median_ns, now.last_window_median_ns,
				      memory_order_relaxed);
		atomic_store_explicit(&o->threads, now.threads, memory_order_relaxed);
	}
}

/* Wall mode: finish the capture started last round and process it. */
static void round_finish(struct sprobe_sampler *s)
{
	if (!s->started)
		return;
	s->started = false;
	round_process(s, sprobe_capturer__capture_finish(s->capturer, s->snap), s->started_ns);
}

/* The first collect made the per-thread sources (or failed, or the probe
 * ends): let __start() return. */
static void sources_made(struct sprobe_sampler *s)
{
	/* seq_cst; pairs with the load in __start()'s wait, which sleeps
	 * only while the word is 0 (FUTEX_WAIT compares it again). */
	if (atomic_exchange(&s->sources_ready, 1) == 0)
		syscall(SYS_futex, &s->sources_ready, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

/*
 * One round. CPU mode: collect what the timers produced, process it.
 * Wall mode, pipelined: finish the capture started last round (its
 * handlers ran while the probe slept), process it, start the next one and
 * go back to sleep. The probe then sleeps once per round instead of twice
 * (once more while the handlers run), and no handler makes the wake-up
 * system call; each sleep and wake-up costs the probe tens of us on a
 * virtual machine (docs/PERFORMANCE.md, "Record"). A thread that has not
 * answered by the next round is waited for then, under the same deadline.
 */
static void round_once(struct sprobe_sampler *s)
{
	int err;

	if (s->opts.mode == SPROBE_MODE_CPU && !poll_engine(s)) {
		uint64_t t0;

		exclude_own_threads(s);
		t0 = sprobe_mono_ns();
		err = sprobe_capturer__cpu_collect(s->capturer, s->snap,
						  (uint64_t)(1e9 / s->opts.freq_hz));
		sources_made(s);
		round_process(s, err, t0);
		return;
	}
	round_finish(s);
	exclude_own_threads(s);
	s->started_ns = sprobe_mono_ns();
	err = sprobe_capturer__capture_start(s->capturer, s->snap);
	if (err == 0)
		s->started = true;
	else
		round_process(s, err, s->started_ns); /* records -ENOTSUP */
}

/*
 * How often the probe wakes. Wall mode: every 1/F (the probe is the
 * clock). CPU mode: the timers are the clock and the probe only collects;
 * Linux checks thread CPU timers at its scheduler tick
 * (run_posix_cpu_timers()), so a thread's timer fires at most once per
 * tick and folds the other expirations into si_overrun (which the weight
 * counts). Collecting every half tick therefore sees every stack a timer
 * can produce; waking at 1/F above HZ/2 would only find empty slots
 * (docs/PERFORMANCE.md, "Sampler: the CPU-mode wake-up"). The tick is the
 * resolution of CLOCK_MONOTONIC_COARSE (one jiffy).
 */
static uint64_t probe_period_ns(const struct sprobe_sampler *s)
{
	uint64_t period = (uint64_t)(1e9 / s->opts.freq_hz);
	struct timespec res;

	/* A perf event overflows at any point of the CPU time: collect at 1/F. */
	if (s->opts.mode == SPROBE_MODE_CPU && s->cpu_engine == SPROBE_CPU_ENGINE_TIMER &&
	    clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0) {
		uint64_t half_tick = ((uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec) / 2;

		if (half_tick > period && half_tick <= 10000000ull)
			period = half_tick;
	}
	return period;
}

/*
 * Wall mode's next wake-up: one period on average, each interval drawn
 * uniformly from [period/2, 3*period/2]. A fixed interval samples a
 * workload periodic at F (a 100 Hz loop, anything driven by the kernel
 * tick) at a fixed phase, so the profile shows one part of its period for
 * all of it. With the interval drawn, the phase of the samples walks
 * randomly and is spread over the whole period after a few samples, while
 * the rate stays F. xorshift64*: no lock, no syscall, a state per sampler.
 */
static uint64_t wall_interval(struct sprobe_sampler *s, uint64_t period)
{
	uint64_t x = s->jitter_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->jitter_state = x;
	x *= 0x2545F4914F6CDD1Dull;
	return period / 2 + (uint64_t)(((unsigned __int128)(x >> 11) * period) >> 53);
}

static void *probe_main(void *arg)
{
	struct sprobe_sampler *s = arg;
	sigset_t all;

	/* The probe never takes the capture signal (it is excluded from
	 * captures) nor the application's: keep it out of signal routing. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "stackprobe");

	uint64_t period = probe_period_ns(s);
	uint64_t start = sprobe_mono_ns();
	s->t_start_ns = start;
	uint64_t end = s->opts.duration_s > 0 ? start + (uint64_t)(s->opts.duration_s * 1e9) : 0;
	bool jitter = s->opts.mode == SPROBE_MODE_WALL || poll_engine(s);

	s->jitter_state = (start ^ ((uint64_t)getpid() << 32)) | 1;
	uint64_t next = start + (jitter ? wall_interval(s, period) : period);

	/* cpu mode with per-thread sources (perf events, timers): the first
	 * collect creates them, so do it now, not one period in. A process
	 * of a few ms (a compiler's `as`) would otherwise lose its first
	 * period or two of CPU, most of its life. */
	if (s->opts.mode == SPROBE_MODE_CPU && !poll_engine(s) && !atomic_load(&s->stop))
		round_once(s);

	while (!atomic_load(&s->stop) && !s->probe_error) {
		struct timespec ts = { (time_t)(next / 1000000000ull), (long)(next % 1000000000ull) };
		/* Absolute CLOCK_MONOTONIC (FUTEX_WAIT_BITSET's default clock). */
		long rc = syscall(SYS_futex, &s->stop, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts,
				  NULL, FUTEX_BITSET_MATCH_ANY);
		if (rc == 0 || (rc < 0 && errno != ETIMEDOUT))
			continue; /* woken (stop), EAGAIN (stop already 1), EINTR */
		uint64_t now = sprobe_mono_ns();
		if (now < next)
			continue; /* early return: sleep again */
		if (end && now >= end)
			break;
		round_once(s);
		uint64_t step = jitter ? wall_interval(s, period) : period;
		next += step;
		now = sprobe_mono_ns();
		if (next < now) /* overran: skip the missed ticks, do not burst */
			next = now + step;
	}
	sources_made(s); /* never made: __start() must not wait on */
	round_finish(s); /* the last wall capture, if one was started */
	/* cpu mode: what the sources produced since the last collect (a
	 * short process's whole profile may be there). */
	if (s->opts.mode == SPROBE_MODE_CPU && !poll_engine(s) && !s->probe_error)
		round_once(s);
	if (poll_engine(s))
		poll_emit_usage(s, sprobe_mono_ns());
	else if (s->opts.mode == SPROBE_MODE_CPU)
		cpu_usage_round(s, sprobe_mono_ns()); /* the final CPU times */
	return NULL;
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
	sprobe__zfree(s->windows);
	sprobe__zfree(s->dropped);
	sprobe__zfree(s->usage);
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
	s->threads = sprobe__zcalloc(s->threads_cap, sizeof(*s->threads));
	s->windows = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->windows));
	s->dropped = sprobe__zcalloc(SPROBE_DF_MAX_DROPPED_TIDS, sizeof(*s->dropped));
	s->usage = sprobe__zcalloc(s->opts.max_threads, sizeof(*s->usage));
	if (!s->threads || !s->windows || !s->dropped || !s->usage) {
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
		 * checked before every batch. */
		s->fd = sprobe_fd__open(s->opts.output, O_WRONLY | O_CREAT | O_TRUNC, 0644,
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
	err = pthread_create(&s->probe, NULL, probe_main, s);
	if (err)
		goto fail;
	/* cpu mode with per-thread sources: return once the probe's first
	 * collect has made them. The caller (the agent's constructor: the
	 * program's main thread) would otherwise run on unsampled until the
	 * probe thread is scheduled: a process of a few ms (a compiler's
	 * `as`) lost most or all of its samples. Bounded: a probe that
	 * cannot make them soon (a busy machine, a lock the caller holds)
	 * only costs samples. Only on the main thread:
	 * a fork child's sampler starts on a thread of its own while the
	 * program runs on (and may fork again: its child must not inherit a
	 * registry section the probe holds, userspace/agent/process_wrappers.c). */
	if (s->opts.mode == SPROBE_MODE_CPU && !poll_engine(s) && syscall(SYS_gettid) == getpid()) {
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

void sprobe_sampler__stats(const struct sprobe_sampler *s, struct sprobe_sampler_stats *out)
{
	struct sprobe_sampler *m = (struct sprobe_sampler *)s;
	memset(out, 0, sizeof(*out));
	out->rounds = atomic_load_explicit(&m->st_rounds, memory_order_relaxed);
	out->samples = atomic_load_explicit(&m->st_samples, memory_order_relaxed);
	out->threads_dropped = atomic_load_explicit(&m->st_threads_dropped, memory_order_relaxed);
	out->table_errors = atomic_load_explicit(&m->st_table_errors, memory_order_relaxed);
	out->rounds_failed = atomic_load_explicit(&m->st_rounds_failed, memory_order_relaxed);
	out->last_error = atomic_load_explicit(&m->st_last_error, memory_order_relaxed);
	out->last_window_median_ns = atomic_load_explicit(&m->st_window_median, memory_order_relaxed);
	out->threads = atomic_load_explicit(&m->st_threads, memory_order_relaxed);
	if (m->stream) {
		struct sprobe_stream_stats st;
		sprobe_stream__stats(m->stream, &st);
		out->stream_dropped = st.dropped;
	}
}
