/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The probe thread: its pacing and its rounds. Order inside one round,
 * and why:
 *   1. capture every sibling (the only part that stops anyone: see
 *      backends/linux/);
 *   2. unwind every copy (all threads run again by now);
 *   3. update the node table, push samples, symbols, thread and module
 *      records into the stream (bounded queue: never blocks the probe).
 * Also the policy for threads that block the capture signal (watch them
 * with a perf event: blocked_perf.h), which belongs to the orchestrator,
 * not to the capturer or the unwinder. Everything the probe allocates is
 * allocated in sprobe_sampler__start() or grows rarely (per new thread,
 * per new pc), never inside a window.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#include "userspace/common/clock.h"
#include "userspace/common/dl_failed.h"
#include "userspace/sampler/blocked_perf.h"
#include "userspace/sampler/sampler_internal.h"
#include "userspace/unwind/unwind_prepare.h"

#define KEEP_ALIVE_NS 100000000ull /* cpu mode: sweep exited threads every 100 ms */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- threads that block the capture signal (blocked_perf.h) ----------- */

/* One sample of a blocked thread, drained from its perf event: unwound by
 * the same unwinder as the signal path's copies, then published and
 * streamed like them (weight: one CPU period, plus any the ring lost). */
static void bperf_sample(void *ctx, struct sprobe_thread_sample *ts, uint64_t time_ns)
{
	struct sprobe_sampler *s = ctx;
	bool fresh;
	struct thread_ent *e = ts->tid > 0 ? sprobe_sampler_threads__get(s, ts->tid, &fresh) : NULL;
	uint32_t w = ts->weight ? ts->weight : 1;

	if (!e)
		return;
	sprobe_unwinder__unwind(s->unwinder, ts, NULL);
	if (!e->named) {
		sprobe_sampler_emit__thread_name(s, ts->tid);
		e->named = true;
	}
	if (s->table)
		sprobe_sampler_threads__publish(s, e, ts, time_ns);
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
	if (s->opts.mode != SPROBE_MODE_CPU || sprobe_sampler_poll__engine(s)) {
		bool ran;

		if (!sprobe_sampler_threads__cpu_clock(e->tid, &now))
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
 * BLOCKED (or gone). all: every thread's clock (the final values), else
 * those that ran and a rotating share of the rest. */
static void cpu_usage_pass(struct sprobe_sampler *s, uint64_t now, bool all)
{
	int n = sprobe_sampler_threads__cpu_usage(s, now, all), why = 0;
	uint32_t unsourced = sprobe_capturer__cpu_unsourced(s->capturer, &why);

	/* Threads the engine could give no signal source: said once (the
	 * report names those that used CPU, flagged NOSOURCE). */
	if (unsourced && !s->unsourced_noticed && s->opts.notice) {
		char line[320];

		snprintf(line, sizeof(line),
			 "%u threads have no CPU signal source, so no samples: %s (docs/LIMITATIONS.md "
			 "\"cpu mode: how many threads\")",
			 unsourced,
			 why ? (why == EAGAIN ? "no room for a CPU timer: the agent's timers take at most "
						"half of RLIMIT_SIGPENDING (ulimit -i), shared by the user's "
						"processes"
					      : strerror(why))
			     : "more threads than slots (max_threads)");
		s->opts.notice(s->opts.notice_ctx, line);
		s->unsourced_noticed = true;
	}

	for (int k = 0; k < n; k++)
		if ((s->usage[k].flags & SPROBE_CPU_USAGE_EXITED) ||
		    !(s->usage[k].flags & SPROBE_CPU_USAGE_BLOCKED))
			bperf_release(s, s->usage[k].tid);
}

static void cpu_usage_round(struct sprobe_sampler *s, uint64_t now)
{
	cpu_usage_pass(s, now, false);
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

/* Push ts with weight w (records of at most the file's largest weight),
 * at t; its own weight is left as it was. */
static void push_weighted(struct sprobe_sampler *s, struct sprobe_thread_sample *ts, uint64_t w,
			  uint64_t t)
{
	uint32_t own = ts->weight;

	atomic_fetch_add_explicit(&s->st_samples, w, memory_order_relaxed);
	while (w) {
		ts->weight = w > SPROBE_DF_SAMPLE_WEIGHT_MAX ? SPROBE_DF_SAMPLE_WEIGHT_MAX : (uint32_t)w;
		w -= ts->weight;
		sprobe_stream__push_thread_sample(s->stream, ts, t);
	}
	ts->weight = own;
}

/* One record for the rounds that carried slot i's thread forward, this one
 * included (ts: its carried sample, the stack it was carried with), at t. */
static void carry_flush(struct sprobe_sampler *s, uint32_t i, struct sprobe_thread_sample *ts,
			uint64_t t)
{
	if (!s->carry_from[i])
		return;
	if (s->carry_from[i] <= s->round + 1)
		push_weighted(s, ts, s->round + 1 - s->carry_from[i], t);
	s->carry_from[i] = 0;
}

/* Slot i's carried rounds before this one if they are tid's, and the
 * spell ended; rounds another thread left there are counted lost, not
 * given to tid. */
static uint64_t carry_take(struct sprobe_sampler *s, uint32_t i, pid_t tid)
{
	/* (A spell begun by a failed capture starts at the next round.) */
	uint64_t w = s->carry_from[i] && s->carry_from[i] <= s->round ? s->round - s->carry_from[i] : 0;

	s->carry_from[i] = 0;
	if (w && s->carry_tid[i] != tid) {
		s->carry_lost += w;
		return 0;
	}
	return w;
}

/* The probe ends: every carried spell still open gets its record. */
static void carry_flush_all(struct sprobe_sampler *s, uint64_t t)
{
	uint32_t n = sprobe_snapshot__nthreads(s->snap);

	for (uint32_t i = 0; i < n; i++)
		if (s->carry_from[i] && sprobe_snapshot__carried(s->snap, i) != SPROBE_CARRY_NONE)
			carry_flush(s, i, sprobe_snapshot__thread(s->snap, i), t);
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
		/* The capture may have begun carried spells (slots touched
		 * only in it, then carried on unread): they begin at the next
		 * round counted, or their weight would be lost at their LAST. */
		const uint32_t *tv;
		uint32_t ntv = sprobe_snapshot__touched(s->snap, &tv);

		for (uint32_t k = 0; k < ntv && !sprobe_sampler_poll__engine(s); k++) {
			uint32_t i = tv ? tv[k] : k;

			if (sprobe_snapshot__carried(s->snap, i) != SPROBE_CARRY_MORE)
				continue;
			pid_t tid = sprobe_snapshot__thread(s->snap, i)->tid;

			if (s->carry_from[i] && s->carry_tid[i] != tid)
				(void)carry_take(s, i, tid);
			if (!s->carry_from[i]) {
				s->carry_from[i] = s->round + 1;
				s->carry_tid[i] = tid;
			}
		}
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
	uint32_t nwin = 0, ndropped = 0;

	if (sprobe_modules__generation(sprobe_unwinder__modules(s->unwinder)) != s->mods_generation)
		s->mods_generation = sprobe_modules__generation(sprobe_unwinder__modules(s->unwinder));

	/* Only the slots the capture visited: a slot carried on unchanged
	 * needs nothing (its spell's weight is counted from carry_from when
	 * it ends), and reading it would cost a cold line per thread. */
	const uint32_t *touched;
	uint32_t nv = sprobe_snapshot__touched(s->snap, &touched);

	s->ncarried = st->zp_carried;
	for (uint32_t k = 0; k < nv; k++) {
		uint32_t i = touched ? touched[k] : k;
		int carried = sprobe_snapshot__carried(s->snap, i);

		if (carried != SPROBE_CARRY_NONE) {
			/* Unchecked, no system call: its weight waits for its
			 * spell's LAST (one record a turn or a new thread
			 * list, not one a capture). A slot keeps its thread
			 * while carried (the list is re-read only after a
			 * LAST). */
			struct sprobe_thread_sample *cs = sprobe_snapshot__thread(s->snap, i);

			if (sprobe_sampler_poll__engine(s))
				continue;
			if (s->carry_from[i] && s->carry_tid[i] != cs->tid)
				(void)carry_take(s, i, cs->tid);
			if (!s->carry_from[i]) {
				s->carry_from[i] = s->round;
				s->carry_tid[i] = cs->tid;
			}
			if (carried == SPROBE_CARRY_LAST)
				carry_flush(s, i, cs, t0);
			continue;
		}

		struct sprobe_thread_sample *ts = sprobe_snapshot__thread(s->snap, i);
		bool fresh = false;
		struct thread_ent *e = ts->tid > 0 ? sprobe_sampler_threads__get(s, ts->tid, &fresh) : NULL;

		if (e)
			e->slot = i; /* the sweep finds it there while it is carried */
		if (ts->drop_reason != SPROBE_DROP_NONE || ts->stage == SPROBE_STAGE_EMPTY) {
			/* Written at its LAST unless the check was not
			 * foreseen (R moved): then its stack is gone. */
			s->carry_lost += carry_take(s, i, ts->tid);
			if (ndropped < SPROBE_DF_MAX_DROPPED_TIDS && ts->tid > 0) {
				s->dropped[ndropped].tid = (uint32_t)ts->tid;
				s->dropped[ndropped].reason = ts->drop_reason;
				ndropped++;
			}
			/* An exited thread is forgotten by the sweep. */
			if (e && ts->drop_reason != SPROBE_DROP_EXITED)
				sprobe_sampler_threads__seen(s, e);
			if (e && ts->drop_reason == SPROBE_DROP_BLOCKED)
				bperf_blocked(s, e);
			if (e && sprobe_sampler_poll__engine(s)) {
				/* Its CPU since the last capture goes unsampled. */
				(void)sprobe_sampler_poll__weight(s, e, false);
				e->cpu_carry = 0;
				if (ts->drop_reason == SPROBE_DROP_BLOCKED)
					e->cpu_blocked = true;
			}
			continue;
		}
		if (!e)
			continue;
		sprobe_sampler_threads__seen(s, e);
		/* Its signal reached it: it no longer blocks it. */
		if (ts->method == SPROBE_METHOD_SIGNAL)
			bperf_release(s, ts->tid);
		if (sprobe_sampler_poll__engine(s)) {
			ts->weight = sprobe_sampler_poll__weight(s, e,
								 ts->method != SPROBE_METHOD_ZERO_PAUSE);
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
			sprobe_sampler_threads__publish(s, e, ts, t0);
		/* cpu mode: the record carries the CPU periods the timer
		 * counted for this stack (overruns the kernel folded at its
		 * tick, expiries before the probe collected): one record,
		 * weighted, instead of copies of the same stack. */
		uint64_t w = (ts->weight ? ts->weight : 1) + carry_take(s, i, ts->tid);

		/* Wall mode: the captures that carried it forward count
		 * here; the slot keeps its own weight for the next capture,
		 * which may keep this header. */
		push_weighted(s, ts, w, t0);
	}
	/* The blocked threads' perf-event samples since the last round. */
	if (s->bperf)
		sprobe_blocked_perf__drain(s->bperf, sprobe_mono_ns(), bperf_sample, s);
	sprobe_sampler_emit__pending_lines(s);
	/* Symbols after the round's samples: naming a new pc can take long
	 * (the first libdw lookup in a module reads its debug file), and a
	 * process killed meanwhile keeps the samples already in the stream
	 * (readers take symbols after the samples that use them). */
	for (uint32_t k = 0; k < nv; k++) {
		uint32_t i = touched ? touched[k] : k;

		if (sprobe_snapshot__carried(s->snap, i) != SPROBE_CARRY_NONE)
			continue; /* its pcs were named when it was captured */
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

	if (sprobe_sampler_poll__engine(s) && t0 - s->last_sweep_ns >= KEEP_ALIVE_NS) {
		sprobe_sampler_poll__emit_usage(s, t0);
		s->last_sweep_ns = t0;
	}
	if (s->opts.mode != SPROBE_MODE_CPU || sprobe_sampler_poll__engine(s)) {
		sprobe_sampler_threads__sweep(s); /* the capture listed every live thread */
	} else if (t0 - s->last_sweep_ns >= KEEP_ALIVE_NS) {
		/* Each thread's CPU time, for the coverage (and the check
		 * for threads that block the signal): same cadence. */
		cpu_usage_round(s, t0);
		/* cpu mode samples only threads that used CPU: the others
		 * are asked whether they live (one tgkill(0) each), so not
		 * every round. An exited thread's node stays in the table
		 * until then. */
		sprobe_sampler_threads__keep_alive(s);
		sprobe_sampler_threads__sweep(s);
		s->last_sweep_ns = t0;
	}

	if (nwin) {
		qsort(s->windows, nwin, sizeof(uint64_t), cmp_u64);
		atomic_store_explicit(&s->st_window_median, s->windows[nwin / 2],
				      memory_order_relaxed);
	}
	libs_notice(s);
	atomic_fetch_add_explicit(&s->st_rounds, 1, memory_order_relaxed);
	atomic_store_explicit(&s->st_carry_lost, s->carry_lost, memory_order_relaxed);
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
		atomic_store_explicit(&o->carried_lost, now.carried_lost, memory_order_relaxed);
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
/* The first collect made the per-thread sources (or failed, or the probe
 * ends): let __start() return. */
static void sources_made(struct sprobe_sampler *s)
{
	/* seq_cst; pairs with the load in __start()'s wait, which sleeps
	 * only while the word is 0 (FUTEX_WAIT compares it again). */
	if (atomic_exchange(&s->sources_ready, 1) == 0)
		syscall(SYS_futex, &s->sources_ready, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

static void round_once(struct sprobe_sampler *s)
{
	int err;

	if (s->opts.mode == SPROBE_MODE_CPU && !sprobe_sampler_poll__engine(s)) {
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

void *sprobe_sampler_probe__main(void *arg)
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
	bool jitter = s->opts.mode == SPROBE_MODE_WALL || sprobe_sampler_poll__engine(s);

	s->jitter_state = (start ^ ((uint64_t)getpid() << 32)) | 1;
	uint64_t next = start + (jitter ? wall_interval(s, period) : period);

	/* cpu mode with per-thread sources (perf events, timers): the first
	 * collect creates them, so do it now, not one period in. A process
	 * of a few ms (a compiler's `as`) would otherwise lose its first
	 * period or two of CPU, most of its life. */
	if (s->opts.mode == SPROBE_MODE_CPU && !sprobe_sampler_poll__engine(s) && !atomic_load(&s->stop))
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
		if (next + period < now) {
			/* Overran by more than a period: skip the missed
			 * ticks, do not burst, and say so (status, stats;
			 * the report compares the captures' rate to the
			 * asked one). */
			uint64_t missed = (now - next) / period;

			atomic_fetch_add_explicit(&s->st_rounds_skipped, missed, memory_order_relaxed);
			if (s->opts.status)
				atomic_fetch_add_explicit(&s->opts.status->rounds_skipped, missed,
							  memory_order_relaxed);
			next = now + step;
		}
		/* Late by less than a period (a slow wake-up, a long round):
		 * the next round starts at once and the schedule keeps its
		 * rate; at most one round runs back to back. */
	}
	sources_made(s); /* never made: __start() must not wait on */
	round_finish(s); /* the last wall capture, if one was started */
	if (s->opts.mode == SPROBE_MODE_WALL)
		carry_flush_all(s, s->started_ns);
	/* cpu mode: what the sources produced since the last collect (a
	 * short process's whole profile may be there). */
	if (s->opts.mode == SPROBE_MODE_CPU && !sprobe_sampler_poll__engine(s) && !s->probe_error)
		round_once(s);
	if (sprobe_sampler_poll__engine(s))
		sprobe_sampler_poll__emit_usage(s, sprobe_mono_ns());
	else if (s->opts.mode == SPROBE_MODE_CPU)
		cpu_usage_pass(s, sprobe_mono_ns(), true); /* the final CPU times */
	return NULL;
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
	out->rounds_skipped = atomic_load_explicit(&m->st_rounds_skipped, memory_order_relaxed);
	out->last_error = atomic_load_explicit(&m->st_last_error, memory_order_relaxed);
	out->last_window_median_ns = atomic_load_explicit(&m->st_window_median, memory_order_relaxed);
	out->threads = atomic_load_explicit(&m->st_threads, memory_order_relaxed);
	out->carried_lost = atomic_load_explicit(&m->st_carry_lost, memory_order_relaxed);
	if (m->stream) {
		struct sprobe_stream_stats st;
		sprobe_stream__stats(m->stream, &st);
		out->stream_dropped = st.dropped;
	}
}
