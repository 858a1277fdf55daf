/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Bounded SPSC byte ring from the probe thread to a writer thread.
 *
 * Layout: a power-of-two byte array. Each entry is an 8-byte header
 * {u32 type, u32 len} and the payload padded to 8 bytes. An entry never
 * wraps: when it does not fit before the end, the producer writes a PAD
 * entry (type 0) covering the rest and starts at offset 0.
 *
 * head: bytes ever reserved+committed by the producer (only it writes).
 * tail: bytes ever consumed by the writer thread (only it writes).
 * Free space = capacity - (head - tail). Both grow forever (u64).
 *
 * Memory: only the ring's working set is resident (populate_ahead() and
 * release_behind()): the writer faults pages in a little ahead of head and,
 * in a ring of RELEASE_MIN_CAP or more, gives consumed RELEASE_CHUNKs back
 * (MADV_DONTNEED) before it publishes the tail that frees them, so the
 * producer never writes into a page being given back. The published tail
 * then lags the consumed bytes by less than one chunk.
 *
 * Sleeping: the writer sleeps on a futex word (wake_seq), with a timeout
 * of flush_interval_ns, only after announcing it (sleeping = 1) and
 * re-checking the queue. The producer wakes it only when it announced so
 * and at least wake_bytes (min(capacity/8, WAKE_MAX)) were queued since the producer last
 * looked, so a steady trickle of samples costs no system call at all. Both sides put a seq_cst fence between
 * their store and their load (Dekker), so at least one of them sees the
 * other: either the writer sees the new head, or the producer sees
 * sleeping and bumps wake_seq, which makes the futex wait return.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; Debian 12's headers have it */
#endif

#include <stackprobe/stream.h>

#include "userspace/datafile/stream_internal.h"

#define ENTRY_HDR 8u
#define PAD_TYPE 0u

struct sprobe_stream {
	/* producer-owned */
	uint64_t head_local;		/* == head, without an atomic load */
	uint64_t tail_cache;		/* last tail seen by the producer */
	uint64_t woken_head;		/* head when the producer last considered a wake */
	bool closed;			/* producer side: __close() called */

	/* shared */
	_Atomic uint64_t head;		/* release: producer commit; acquire: writer */
	_Atomic uint64_t tail;		/* release: writer consumed; acquire: producer */
	_Atomic uint32_t sleeping;	/* writer announced a futex wait */
	_Atomic uint32_t wake_seq;	/* futex word */
	_Atomic uint32_t closing;	/* release in __close(); acquire in writer */

	/* counters: each written by one side only, read relaxed by anyone */
	_Atomic uint64_t pushed, invalid;
	_Atomic uint64_t dropped[SPROBE_DF__TYPE_COUNT];
	_Atomic uint64_t written, sink_errors, lost_written;
	_Atomic int last_sink_error;
	_Atomic pid_t writer_tid;	/* set once by the writer thread */

	uint8_t *ring;
	size_t cap;			/* power of two */
	uint64_t populated;		/* writer-owned: position up to which pages are faulted in */
	uint64_t seen_head;		/* writer-owned: head at its previous look */
	uint64_t ahead;			/* writer-owned: bytes kept populated past head */
	uint64_t released;		/* writer-owned: position below which pages were given back */
	bool release;			/* writer gives consumed chunks back (cap >= RELEASE_MIN_CAP) */
	size_t wake_bytes;		/* queued bytes that justify a futex wake */
	uint64_t flush_interval_ns;
	struct sprobe_stream_sink sink;
	pthread_t thread;
	bool thread_started;
	int close_rc;
};

/* Working set of the ring (docs/PERFORMANCE.md "What the agent costs"):
 * faulted in beyond head in POPULATE_STEPs, twice what the producer queued
 * between two looks of the writer (POPULATE_STEP at least, POPULATE_AHEAD
 * at most). The writer is woken after WAKE_MAX queued bytes at most, which
 * can be more than one step: a burst right after an idle spell may run
 * past the populated pages, and the producer then takes those pages'
 * first-touch faults itself (a cost, never a loss). An idle program keeps
 * one step ahead, not 128 KiB ("Memory, what does not grow with threads"). */
#define POPULATE_STEP (32u << 10)
#define POPULATE_AHEAD (128u << 10)
#define WAKE_MAX (64u << 10)
#define RELEASE_CHUNK (32u << 10)
#define RELEASE_MIN_CAP (256u << 10)

static inline uint32_t align8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	/* Returns on wake, timeout, EAGAIN (value changed) or EINTR: all mean
	 * "look at the queue again". */
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* ---- producer --------------------------------------------------------- */

/* Reserve need bytes (a multiple of 8). Returns the entry address or NULL
 * when the queue is full. Nothing is visible until commit(). */
static uint8_t *reserve(struct sprobe_stream *s, uint32_t need, uint64_t *new_head)
{
	uint64_t head = s->head_local;
	size_t off = head & (s->cap - 1);
	size_t to_end = s->cap - off;
	uint64_t total = need;

	if (to_end < need)
		total += to_end;	/* PAD to the end, then start at 0 */
	if (head + total - s->tail_cache > s->cap) {
		/* Acquire: pairs with the release store of tail in
		 * writer_main(), so the bytes it consumed are free to reuse. */
		s->tail_cache = atomic_load_explicit(&s->tail, memory_order_acquire);
		if (head + total - s->tail_cache > s->cap)
			return NULL;
	}
	if (to_end < need) {
		uint8_t *pad = s->ring + off;
		uint32_t pad_len = (uint32_t)to_end - ENTRY_HDR;

		memcpy(pad, &(uint32_t){ PAD_TYPE }, 4);
		memcpy(pad + 4, &pad_len, 4);
		off = 0;
	}
	*new_head = head + total;
	return s->ring + off;
}

static void commit(struct sprobe_stream *s, uint64_t new_head)
{
	s->head_local = new_head;
	/* Release: pairs with the acquire load of head in writer_main(); the
	 * entry bytes written before are visible once head covers them. */
	atomic_store_explicit(&s->head, new_head, memory_order_release);
	/* Wake the writer only once wake_bytes have queued up since the last
	 * look: a wake per record would cost the probe a system call (and a
	 * context switch) each time. Below the mark, the writer's own timer
	 * (flush_interval_ns) picks the records up. */
	if (new_head - s->woken_head < s->wake_bytes)
		return;
	s->woken_head = new_head;
	/* seq_cst fence: pairs with the fence in writer_main() between its
	 * store of sleeping and its re-load of head (see the top comment). */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->sleeping, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_relaxed);
		futex_wake(&s->wake_seq);
	}
}

/* Payload size without a full encoding pass for the hot record type. */
static long payload_size(const struct sprobe_df_record *rec)
{
	if (rec->type == SPROBE_DF_SAMPLE) {
		if (rec->sample.nframes > SPROBE_MAX_FRAMES ||
		    (rec->sample.nframes && !rec->sample.pcs))
			return -EINVAL;
		return 56 + 8 * (long)rec->sample.nframes;
	}
	return sprobe_df__encode(rec, NULL, 0);
}

static void count(_Atomic uint64_t *c)
{
	/* Single writer (this side): a plain load+store, no RMW needed. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

int sprobe_stream__push(struct sprobe_stream *s, const struct sprobe_df_record *rec)
{
	uint64_t new_head;
	uint8_t *e;
	long len;
	uint32_t need;

	if (!s || !rec)
		return -EINVAL;
	if (s->closed)
		return -EPIPE;
	len = payload_size(rec);
	if (len < 0) {
		count(&s->invalid);
		return (int)len;
	}
	if ((uint64_t)len > SPROBE_DF_MAX_PAYLOAD || ENTRY_HDR + align8((uint32_t)len) > s->cap) {
		count(&s->invalid);
		return -E2BIG;
	}
	need = ENTRY_HDR + align8((uint32_t)len);
	e = reserve(s, need, &new_head);
	if (!e) {
		count(&s->dropped[rec->type]);
		return -ENOBUFS;
	}
	uint32_t type = rec->type, plen = (uint32_t)len;

	memcpy(e, &type, 4);
	memcpy(e + 4, &plen, 4);
	sprobe_df__encode(rec, e + ENTRY_HDR, (size_t)len);
	commit(s, new_head);
	count(&s->pushed);
	return 0;
}

int sprobe_stream__push_thread_sample(struct sprobe_stream *s,
				      const struct sprobe_thread_sample *ts, uint64_t time_ns)
{
	uint64_t pcs[SPROBE_MAX_FRAMES];
	struct sprobe_df_record rec = { .type = SPROBE_DF_SAMPLE };
	uint32_t n;

	if (!s || !ts)
		return -EINVAL;
	n = ts->nframes < SPROBE_MAX_FRAMES ? ts->nframes : SPROBE_MAX_FRAMES;
	for (uint32_t i = 0; i < n; i++)
		pcs[i] = ts->frames[i].pc;
	rec.sample = (struct sprobe_df_sample){
		.time_ns = time_ns,
		.tid = (uint32_t)ts->tid,
		.method = ts->method,
		.flags = ts->truncated ? SPROBE_DF_SAMPLE_TRUNCATED : 0,
		.stack_used = ts->stack_top > ts->sp ? ts->stack_top - ts->sp : 0,
		.signal_ns = ts->signal_ns,
		.entry_ns = ts->entry_ns,
		.exit_ns = ts->exit_ns,
		.pcs = pcs,
		.nframes = n,
		.weight = ts->weight ? ts->weight : 1,
	};
	return sprobe_stream__push(s, &rec);
}

int sprobe_stream__push_capture_stats(struct sprobe_stream *s,
				      const struct sprobe_snapshot_stats *st, uint64_t time_ns,
				      const struct sprobe_df_dropped *dropped, uint32_t ndropped)
{
	struct sprobe_df_record rec = { .type = SPROBE_DF_CAPTURE };

	if (!s || !st || (ndropped && !dropped))
		return -EINVAL;
	rec.capture = (struct sprobe_df_capture){
		.time_ns = time_ns,
		.threads_total = st->threads_total,
		.threads_captured = st->threads_captured,
		.threads_dropped = st->threads_dropped,
		.pause_ns = st->pause_ns,
		.capture_ns = st->capture_ns,
		.dropped_tids = dropped,
		.ndropped_tids = ndropped < SPROBE_DF_MAX_DROPPED_TIDS ? ndropped
								: SPROBE_DF_MAX_DROPPED_TIDS,
	};
	memcpy(rec.capture.dropped, st->dropped, sizeof(rec.capture.dropped));
	return sprobe_stream__push(s, &rec);
}

pid_t sprobe_stream__writer_tid(const struct sprobe_stream *s)
{
	/* const-cast: C11 atomic loads take a non-const pointer. */
	return s ? atomic_load_explicit(&((struct sprobe_stream *)s)->writer_tid,
					memory_order_relaxed)
		 : 0;
}

/* ---- writer thread ---------------------------------------------------- */

static void sink_result(struct sprobe_stream *s, int err)
{
	if (err) {
		count(&s->sink_errors);
		atomic_store_explicit(&s->last_sink_error, err, memory_order_relaxed);
	}
}

/* Emit a LOST record when the producer's drop counters moved since the
 * last one. Relaxed loads: the counts may lag by a few drops, the next
 * look (or the final one after the closing acquire) catches up. */
static void emit_lost(struct sprobe_stream *s, uint64_t *last_total)
{
	struct sprobe_df_record rec = { .type = SPROBE_DF_LOST };
	uint8_t buf[16 + 8 * SPROBE_DF__TYPE_COUNT];
	uint64_t total = 0;
	struct timespec now;
	long len;

	for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++) {
		rec.lost.lost[i] = atomic_load_explicit(&s->dropped[i], memory_order_relaxed);
		total += rec.lost.lost[i];
	}
	if (total == *last_total)
		return;
	*last_total = total;
	clock_gettime(CLOCK_MONOTONIC, &now);
	rec.lost.time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	len = sprobe_df__encode(&rec, buf, sizeof(buf));
	if (len > 0 && (size_t)len <= sizeof(buf)) {
		int err = s->sink.write(s->sink.ctx, SPROBE_DF_LOST, buf, (uint32_t)len);

		sink_result(s, err);
		if (!err)
			count(&s->written);
		count(&s->lost_written);
	}
}

/* Keep the pages from head to POPULATE_AHEAD past it faulted in (see
 * sprobe_stream__new()), never beyond tail + cap (pages of unconsumed
 * entries are resident already). Writer thread only; the producer may be
 * writing these pages meanwhile: MADV_POPULATE_WRITE faults pages in
 * without changing their contents. */
static void populate_ahead(struct sprobe_stream *s, uint64_t head, uint64_t tail)
{
	uint64_t burst = 2 * (head - s->seen_head), want;

	/* Up at once to a burst's need; down by an eighth per look, so a
	 * steady rate keeps its distance and an idle ring drifts to a step. */
	burst = (burst + POPULATE_STEP - 1) & ~(uint64_t)(POPULATE_STEP - 1);
	if (burst > POPULATE_AHEAD)
		burst = POPULATE_AHEAD;
	if (burst >= s->ahead)
		s->ahead = burst;
	else
		s->ahead -= (s->ahead - burst) / 8;
	if (s->ahead < POPULATE_STEP)
		s->ahead = POPULATE_STEP;
	s->seen_head = head;
	want = head + s->ahead;

	if (want > tail + s->cap)
		want = tail + s->cap;
	if (s->populated < head)
		s->populated = head & ~(uint64_t)4095;
	while (s->populated < want) {
		size_t off = (size_t)(s->populated & (s->cap - 1));
		size_t n = POPULATE_STEP - (off & (POPULATE_STEP - 1));

		if (n > s->cap - off)
			n = s->cap - off;
		madvise(s->ring + off, n, MADV_POPULATE_WRITE);
		s->populated += n;
	}
}

/* Give the whole chunks below tail back (MADV_DONTNEED: they read as zero
 * and fault in again when reused) and return the tail to publish: the
 * first byte not given back. Called before the release store of tail, so
 * the producer cannot be writing a chunk while it is given back: it writes
 * a consumed byte again only once the published tail passed it (reserve()).
 * A ring below RELEASE_MIN_CAP keeps its pages and publishes tail as is. */
static uint64_t release_behind(struct sprobe_stream *s, uint64_t tail)
{
	uint64_t upto = tail & ~(uint64_t)(RELEASE_CHUNK - 1);

	if (!s->release)
		return tail;
	while (s->released < upto) {
		madvise(s->ring + (s->released & (s->cap - 1)), RELEASE_CHUNK, MADV_DONTNEED);
		s->released += RELEASE_CHUNK;
	}
	return upto;
}

static void *writer_main(void *arg)
{
	struct sprobe_stream *s = arg;
	uint64_t tail = 0, last_lost = 0;
	bool dirty = false;

	pthread_setname_np(pthread_self(), "sprobe-writer");
	atomic_store_explicit(&s->writer_tid, (pid_t)syscall(SYS_gettid), memory_order_relaxed);

	for (;;) {
		/* Acquire: pairs with the release store in __close(); after it,
		 * every push (and drop count) made before close is visible. */
		bool closing = atomic_load_explicit(&s->closing, memory_order_acquire);
		/* Acquire: pairs with the release store of head in commit(). */
		uint64_t head = atomic_load_explicit(&s->head, memory_order_acquire);

		populate_ahead(s, head, tail);
		while (tail != head) {
			const uint8_t *e = s->ring + (tail & (s->cap - 1));
			uint32_t type, len;

			memcpy(&type, e, 4);
			memcpy(&len, e + 4, 4);
			if (type != PAD_TYPE) {
				int err = s->sink.write(s->sink.ctx, type, e + ENTRY_HDR, len);

				sink_result(s, err);
				if (!err)
					count(&s->written);
				dirty = true;
			}
			tail += ENTRY_HDR + align8(len);
			/* Release: pairs with the acquire load of tail in
			 * reserve(); we are done reading these bytes (and
			 * gave back the chunks below the published tail). */
			atomic_store_explicit(&s->tail, release_behind(s, tail),
					      memory_order_release);
		}
		emit_lost(s, &last_lost);
		if (closing)
			break;	/* head was loaded after closing: all drained */
		if (dirty && s->sink.flush) {
			sink_result(s, s->sink.flush(s->sink.ctx));
			dirty = false;
		}

		/* Acquire: pairs with the release add in __close(). */
		uint32_t seq = atomic_load_explicit(&s->wake_seq, memory_order_acquire);

		atomic_store_explicit(&s->sleeping, 1, memory_order_relaxed);
		/* seq_cst fence: pairs with the fence in commit() (Dekker). */
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&s->head, memory_order_relaxed) == tail &&
		    !atomic_load_explicit(&s->closing, memory_order_relaxed))
			futex_wait(&s->wake_seq, seq, s->flush_interval_ns);
		atomic_store_explicit(&s->sleeping, 0, memory_order_relaxed);
	}
	if (s->sink.flush)
		sink_result(s, s->sink.flush(s->sink.ctx));
	return NULL;
}

/* ---- life cycle ------------------------------------------------------- */

struct sprobe_stream *sprobe_stream__new(const struct sprobe_stream_sink *sink,
					 const struct sprobe_stream_opts *opts)
{
	struct sprobe_stream *s;
	size_t want = 4u << 20, cap = 4096;
	uint64_t flush_ns = 100000000u;
	int err;

	if (!sink || !sink->write || (opts && opts->sz < sizeof(size_t))) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && opts->sz >= offsetof(struct sprobe_stream_opts, capacity_bytes) + sizeof(size_t) &&
	    opts->capacity_bytes)
		want = opts->capacity_bytes;
	if (opts && opts->sz >= offsetof(struct sprobe_stream_opts, flush_interval_ns) +
				       sizeof(uint64_t) && opts->flush_interval_ns)
		flush_ns = opts->flush_interval_ns;
	if (want > ((size_t)1 << 40)) {
		errno = EINVAL;
		return NULL;
	}
	while (cap < want)
		cap <<= 1;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->ring = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->ring == MAP_FAILED)
		s->ring = NULL;
	/* Faulted in ahead of the producer, not up front: a first-touch page
	 * fault in the probe costs more than the record it interrupts (~5 %
	 * of the probe's CPU on a virtual machine, where faults are dear),
	 * but a resident ring is memory taken from the program: 4 MiB, or
	 * 1.25 MiB at start when the writer kept 1 MiB populated ahead. So
	 * the first POPULATE_STEP now, then the writer keeps POPULATE_AHEAD
	 * bytes beyond the producer populated and gives consumed chunks back
	 * (populate_ahead(), release_behind()). Best effort:
	 * MADV_POPULATE_WRITE is Linux 5.14+; without it pages fault in as
	 * the probe touches them. */
	if (s->ring) {
		s->populated = cap < POPULATE_STEP ? cap : POPULATE_STEP;
		madvise(s->ring, (size_t)s->populated, MADV_POPULATE_WRITE);
	}
	if (!s->ring) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->cap = cap;
	s->wake_bytes = cap / 8 < WAKE_MAX ? cap / 8 : WAKE_MAX;
	s->release = cap >= RELEASE_MIN_CAP;
	s->flush_interval_ns = flush_ns;
	s->sink = *sink;
	/* The writer inherits a mask with every asynchronous signal blocked,
	 * real-time ones included: the program's process-directed signals
	 * (SIGINT, SIGCHLD, a timer's SIGRTMIN+n, its own kill() of a signal
	 * it shares with the capture backend) must not land on a thread the
	 * program does not know, where its handler would run beside its own
	 * threads (a one-shot SA_RESETHAND handler raced that way and the
	 * process died by its next signal's default action). Synchronous
	 * signals (a fault in this thread) stay deliverable. A sampler leaves
	 * the writer out of its captures (sprobe_stream__writer_tid()). */
	sigset_t block, old;

	sigfillset(&block);
	sigdelset(&block, SIGSEGV);
	sigdelset(&block, SIGBUS);
	sigdelset(&block, SIGFPE);
	sigdelset(&block, SIGILL);
	sigdelset(&block, SIGTRAP);
	sigdelset(&block, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	err = pthread_create(&s->thread, NULL, writer_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		munmap(s->ring, s->cap);
		free(s);
		errno = err;
		return NULL;
	}
	s->thread_started = true;
	return s;
}

int sprobe_stream__close(struct sprobe_stream *s)
{
	if (!s)
		return -EINVAL;
	if (s->closed)
		return 0;
	s->closed = true;
	/* Release: pairs with the acquire load in writer_main(). */
	atomic_store_explicit(&s->closing, 1, memory_order_release);
	/* Release: pairs with the acquire load of wake_seq in writer_main(),
	 * so a writer that sees the new value also sees closing. */
	atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_release);
	futex_wake(&s->wake_seq);
	if (s->thread_started) {
		pthread_join(s->thread, NULL);
		s->thread_started = false;
	}
	return atomic_load_explicit(&s->last_sink_error, memory_order_relaxed);
}

void sprobe_stream__stats(const struct sprobe_stream *s, struct sprobe_stream_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!s)
		return;
	/* const-cast: C11 atomic loads take a non-const pointer. */
	struct sprobe_stream *m = (struct sprobe_stream *)s;

	st->pushed = atomic_load_explicit(&m->pushed, memory_order_relaxed);
	st->invalid = atomic_load_explicit(&m->invalid, memory_order_relaxed);
	for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++) {
		st->dropped_by_type[i] = atomic_load_explicit(&m->dropped[i], memory_order_relaxed);
		st->dropped += st->dropped_by_type[i];
	}
	st->written = atomic_load_explicit(&m->written, memory_order_relaxed);
	st->sink_errors = atomic_load_explicit(&m->sink_errors, memory_order_relaxed);
	st->last_sink_error = atomic_load_explicit(&m->last_sink_error, memory_order_relaxed);
	st->lost_records_written = atomic_load_explicit(&m->lost_written, memory_order_relaxed);
	st->capacity_bytes = s->cap;
}

size_t sprobe_stream__resident_bytes(const struct sprobe_stream *s)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n, resident = 0;
	unsigned char *vec;

	if (!s || !s->ring || page == 0)
		return 0;
	n = (s->cap + page - 1) / page;
	vec = malloc(n);
	if (!vec)
		return 0;
	if (mincore(s->ring, s->cap, vec) == 0)
		for (size_t i = 0; i < n; i++)
			resident += (vec[i] & 1) ? page : 0;
	free(vec);
	return resident;
}

void sprobe_stream__free(struct sprobe_stream *s)
{
	if (!s)
		return;
	sprobe_stream__close(s);
	if (s->ring)
		munmap(s->ring, s->cap);
	free(s);
}

/* ---- data-file sink ---------------------------------------------------- */

static int df_sink_write(void *ctx, uint32_t type, const void *payload, uint32_t len)
{
	return sprobe_datafile_writer__write_raw(ctx, type, payload, len);
}

static int df_sink_flush(void *ctx)
{
	return sprobe_datafile_writer__flush(ctx);
}

struct sprobe_stream_sink sprobe_stream_sink__datafile(struct sprobe_datafile_writer *w)
{
	return (struct sprobe_stream_sink){ .write = df_sink_write, .flush = df_sink_flush,
					    .ctx = w };
}
