/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sampler's threads: the tid -> thread_ent table (open addressing,
 * swept each round of the threads a capture no longer listed), each
 * thread's node in the node table, its THREAD record (once), and the CPU
 * time records: the POLL engine's own clock reads and the capturer's
 * (cpu mode). Probe thread only; nothing here captures or unwinds.
 *
 * Invariant: the table is sized at 2 x max_threads and swept every round,
 * so a full table means more live threads than a snapshot holds.
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>
#include <stackprobe/stream.h>
#include <stackprobe/table.h>

#include "userspace/common/clock.h"
#include "userspace/sampler/blocked_perf.h"
#include "userspace/sampler/sampler_internal.h"

/* ---- tid -> thread_ent ------------------------------------------------ */

/*
 * The entries are dense (threads[0..nents)) and found through an index
 * (open addressing, tid -> position). A hash spreads what it holds over
 * the whole table: 80-byte entries hashed into a table sized for
 * 2 x max_threads faulted in a page for nearly every thread (2.5 MiB at
 * 1 000 threads). Dense entries cost their threads' bytes; the index, 8
 * bytes a slot, at most 256 KiB (docs/PERFORMANCE.md "Memory, per
 * thread"). Invariant: for every entry k < nents, the index holds
 * {threads[k].tid, k + 1} on its probe sequence.
 */

static size_t tid_hash(pid_t tid, size_t cap)
{
	return ((uint32_t)tid * 2654435761u) & (cap - 1);
}

/* tid's index slot, or the empty slot where it would go. */
static size_t idx_find(const struct sprobe_sampler *s, pid_t tid)
{
	size_t i = tid_hash(tid, s->threads_cap);

	while (s->tidx[i].pos && s->tidx[i].tid != tid)
		i = (i + 1) & (s->threads_cap - 1);
	return i;
}

/* Find or insert tid. Returns NULL only when the table is full (it is sized
 * at 2x max_threads and swept every round, so that means more live threads
 * than the snapshot holds anyway). */
struct thread_ent *sprobe_sampler_threads__get(struct sprobe_sampler *s, pid_t tid,
					       bool *fresh)
{
	size_t i = idx_find(s, tid);
	struct thread_ent *e;

	if (s->tidx[i].pos) {
		*fresh = false;
		return &s->threads[s->tidx[i].pos - 1];
	}
	/* One index slot stays empty: it ends every probe sequence. */
	if (s->nents + 1 >= s->threads_cap)
		return NULL;
	e = &s->threads[s->nents++];
	memset(e, 0, sizeof(*e));
	e->tid = tid;
	s->tidx[i].tid = tid;
	s->tidx[i].pos = (uint32_t)s->nents;
	*fresh = true;
	return e;
}

void sprobe_sampler_threads__seen(struct sprobe_sampler *s, struct thread_ent *e)
{
	if (e->round != s->round) {
		e->round = s->round;
		s->nseen++;
	}
}

/* Take tid out of the index (backward-shift deletion keeps the probe
 * sequences intact). */
static void idx_remove(struct sprobe_sampler *s, pid_t tid)
{
	size_t cap = s->threads_cap, hole = idx_find(s, tid), j = hole;

	for (;;) {
		j = (j + 1) & (cap - 1);
		if (!s->tidx[j].pos)
			break;
		size_t home = tid_hash(s->tidx[j].tid, cap);
		bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);

		if (movable) {
			s->tidx[hole] = s->tidx[j];
			hole = j;
		}
	}
	s->tidx[hole].tid = 0;
	s->tidx[hole].pos = 0;
}

/* Remove entries not seen this round, dropping their table nodes (POLL
 * engine: and writing their last CPU time first). The last entry moves
 * into each hole: entries stay dense, and pointers to them do not outlive
 * a sweep. */
void sprobe_sampler_threads__sweep(struct sprobe_sampler *s)
{
	/* Every entry seen: nothing to remove, and no need to walk them. */
	if (s->nseen + s->ncarried == s->nents)
		return;
	for (size_t k = 0; k < s->nents;) {
		struct thread_ent *e = &s->threads[k];

		if (e->round == s->round) {
			k++;
			continue;
		}
		/* Carried forward this round: seen, in the slot it had. */
		if (s->snap && sprobe_snapshot__carried(s->snap, e->slot) != SPROBE_CARRY_NONE &&
		    sprobe_snapshot__thread(s->snap, e->slot)->tid == e->tid) {
			k++;
			continue;
		}
		if (e->node && s->table)
			sprobe_table__remove(s->table, e->node);
		/* Its ring was drained this round; what came since is lost
		 * (no callback here: it would insert into this table). */
		if (s->bperf)
			sprobe_blocked_perf__unwatch(s->bperf, e->tid, NULL, NULL);
		if (sprobe_sampler_poll__engine(s))
			sprobe_sampler_poll__emit_one(s, e, sprobe_mono_ns(), SPROBE_CPU_USAGE_EXITED);
		idx_remove(s, e->tid);
		if (k != --s->nents) {
			*e = s->threads[s->nents];
			s->tidx[idx_find(s, e->tid)].pos = (uint32_t)(k + 1);
		}
		/* k again: it holds the entry moved there */
	}
}

/* The node of e's thread in the node table gets this stack; a node the
 * table dropped (or none yet) is inserted again. */
void sprobe_sampler_threads__publish(struct sprobe_sampler *s, struct thread_ent *e,
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
/* cpu mode with the POLL engine: wall-style captures, weighted by CPU. */
bool sprobe_sampler_poll__engine(const struct sprobe_sampler *s)
{
	return s->opts.mode == SPROBE_MODE_CPU && s->cpu_engine == SPROBE_CPU_ENGINE_POLL;
}

/* The CPU clock of thread tid of this process (MAKE_THREAD_CPUCLOCK). */
bool sprobe_sampler_threads__cpu_clock(pid_t tid, uint64_t *ns)
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
uint32_t sprobe_sampler_poll__weight(struct sprobe_sampler *s, struct thread_ent *e, bool running)
{
	uint64_t now, period = (uint64_t)(1e9 / s->opts.freq_hz), w;

	if (!sprobe_sampler_threads__cpu_clock(e->tid, &now))
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
void sprobe_sampler_poll__emit_one(struct sprobe_sampler *s, struct thread_ent *e, uint64_t now,
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
void sprobe_sampler_poll__emit_usage(struct sprobe_sampler *s, uint64_t now)
{
	for (size_t i = 0; i < s->nents; i++)
		sprobe_sampler_poll__emit_one(s, &s->threads[i], now, 0);
}

/* cpu mode: a thread that had no sample this round (it did not use a
 * period of CPU) is kept while it lives; only exited threads are swept.
 * Asking each whether it lives (a tgkill(0)) at every call would cost
 * the probe one system call per thread that ever ran, every 100 ms: a
 * rotation asks a share of the table such that each entry is asked about
 * once per KEEP_ALIVE_SWEEP_NS (all of them while the table holds at
 * most KEEP_ALIVE_ALL); the others are kept until their turn. An exited
 * thread's node stays in the table that much longer. */
#define KEEP_ALIVE_SWEEP_NS 1000000000ull
#define KEEP_ALIVE_ALL 64

void sprobe_sampler_threads__keep_alive(struct sprobe_sampler *s)
{
	pid_t pid = getpid();
	uint64_t now = sprobe_mono_ns();
	/* Over the dense entries (threads[0..nents)): the rotation's
	 * position is an index among them; a sweep that moves entries only
	 * shifts which ones this turn asks. */
	size_t cap = s->nents, share = cap, start = cap && s->keep_next < cap ? s->keep_next : 0;

	if (!cap)
		return;
	if (s->keep_ns && s->nents > KEEP_ALIVE_ALL && now - s->keep_ns < KEEP_ALIVE_SWEEP_NS) {
		share = (size_t)(((uint64_t)cap * (now - s->keep_ns) + KEEP_ALIVE_SWEEP_NS - 1) /
				 KEEP_ALIVE_SWEEP_NS);
		if (share < KEEP_ALIVE_ALL)
			share = KEEP_ALIVE_ALL;
		if (share > cap)
			share = cap;
	}
	s->keep_ns = now;
	s->keep_next = (start + share) % cap;
	/* Every entry seen this round is alive; nothing to do when all are. */
	if (s->nseen + s->ncarried == s->nents)
		return;
	for (size_t i = 0; i < cap; i++) {
		struct thread_ent *e = &s->threads[i];

		if (e->round == s->round)
			continue;
		/* Outside this call's share of the rotation: kept until its turn. */
		if ((i + cap - start) % cap >= share) {
			sprobe_sampler_threads__seen(s, e);
			continue;
		}
		if (syscall(SYS_tgkill, pid, e->tid, 0) == 0)
			sprobe_sampler_threads__seen(s, e);
	}
}

void sprobe_sampler_threads__name_once(struct sprobe_sampler *s, pid_t tid)
{
	bool fresh;
	struct thread_ent *e = sprobe_sampler_threads__get(s, tid, &fresh);

	if (e && !e->named) {
		sprobe_sampler_emit__thread_name(s, tid);
		e->named = true;
	}
	if (e)
		sprobe_sampler_threads__seen(s, e);
}

int sprobe_sampler_threads__cpu_usage(struct sprobe_sampler *s, uint64_t now, bool all)
{
	int n = all ? sprobe_capturer__cpu_usage_all(s->capturer, s->usage, s->opts.max_threads)
		    : sprobe_capturer__cpu_usage(s->capturer, s->usage, s->opts.max_threads);

	for (int k = 0; k < n && s->stream; k++) {
		struct sprobe_df_record rec = { .type = SPROBE_DF_THREAD_CPU };

		/* A thread with CPU and no sample has no THREAD record yet:
		 * the report names it (it is alive unless EXITED). */
		if (!(s->usage[k].flags & SPROBE_CPU_USAGE_EXITED))
			sprobe_sampler_threads__name_once(s, s->usage[k].tid);
		rec.thread_cpu.time_ns = now;
		rec.thread_cpu.tid = (uint32_t)s->usage[k].tid;
		rec.thread_cpu.flags = s->usage[k].flags;
		rec.thread_cpu.cpu_ns = s->usage[k].cpu_ns;
		sprobe_stream__push(s->stream, &rec);
	}
	return n > 0 ? n : 0;
}
