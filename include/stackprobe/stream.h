/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe stream: a bounded single-producer queue of data-file records
 * from the probe thread to a writer thread that hands them to a sink
 * (normally the data-file writer).
 *
 * The backpressure contract: the producer NEVER blocks on the sink. A push
 * either copies the encoded record into the queue or, when the queue is full,
 * drops it and counts the drop (per record type). The writer thread writes
 * the cumulative drop counts into the stream as SPROBE_DF_LOST records
 * whenever they change, so drops are in the file even when it is cut short,
 * and every report shows them. A sink that stalls (slow disk, full pipe)
 * costs records, never probe latency.
 *
 * Memory: one byte ring of capacity_bytes, reserved in __new(), of which
 * only the working set is resident (the queued bytes and ~128 KiB ahead:
 * the writer gives consumed pages back in rings of 256 KiB or more); a
 * push does no allocation, takes no lock and makes a system call only to
 * wake a sleeping writer thread once min(capacity/8, 64 KiB) bytes have
 * queued up (futex wake); otherwise the writer wakes on its own every flush_interval_ns.
 * So records reach the sink within flush_interval_ns, and the queue should
 * hold well over flush_interval_ns worth of records.
 *
 * Typical use (the sampler):
 *
 *	w = sprobe_datafile_writer__new(fd, NULL);
 *	struct sprobe_stream_sink sink = sprobe_stream_sink__datafile(w);
 *	s = sprobe_stream__new(&sink, NULL);
 *	sprobe_stream__push(s, &header_rec);            // probe thread
 *	sprobe_stream__push_thread_sample(s, ts, now);  // per captured thread
 *	...
 *	sprobe_stream__close(s);                        // drain + join
 *	sprobe_stream__stats(s, &st);
 *	memcpy(trailer.lost, st.dropped_by_type, sizeof(trailer.lost));
 *	sprobe_datafile_writer__finish(w, &trailer);
 *	sprobe_stream__free(s); sprobe_datafile_writer__free(w); close(fd);
 */
#ifndef STACKPROBE_STREAM_H
#define STACKPROBE_STREAM_H

#include <stackprobe/api.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Where records go. write() is called on the stream's writer thread only,
 * once per record, in push order, with the encoded payload (the bytes of
 * docs/FORMAT.md without the frame header); the payload is only valid
 * during the call. It may block as long as it likes: the producer is not
 * affected. It returns 0 or -errno; an error is counted (sink_errors) and
 * the stream goes on with the next record. flush() (may be NULL) is called
 * when the queue runs empty and at close.
 */
struct sprobe_stream_sink {
	int (*write)(void *ctx, uint32_t type, const void *payload, uint32_t len);
	int (*flush)(void *ctx);
	void *ctx;
};

/* A sink that appends to a data-file writer. The writer must not be used by
 * any other thread until sprobe_stream__close() returns. */
SPROBE_API
struct sprobe_stream_sink sprobe_stream_sink__datafile(struct sprobe_datafile_writer *w);

struct sprobe_stream_opts {
	size_t sz;			/* sizeof(struct sprobe_stream_opts) */
	size_t capacity_bytes;		/* 0: 4 MiB; rounded up to a power of
					 * two, at least 4 KiB */
	uint64_t flush_interval_ns;	/* 0: 100 ms; longest time drops and
					 * records sit before the writer
					 * thread looks again */
};

struct sprobe_stream_stats {
	uint64_t pushed;		/* accepted into the queue */
	uint64_t dropped;		/* refused because the queue was full */
	uint64_t dropped_by_type[SPROBE_DF__TYPE_COUNT];
	uint64_t invalid;		/* refused: not encodable, or larger than
					 * the whole queue */
	uint64_t written;		/* handed to the sink, which returned 0 */
	uint64_t sink_errors;		/* sink write() calls that failed */
	int last_sink_error;		/* -errno of the last failure, or 0 */
	uint64_t lost_records_written;	/* SPROBE_DF_LOST records emitted */
	size_t capacity_bytes;
};

struct sprobe_stream;

/*
 * Allocate the queue and start the writer thread. The sink struct is
 * copied; its ctx stays owned by the caller and must outlive the stream.
 * Returns NULL with errno set: EINVAL (no sink or bad opts), ENOMEM, or the
 * pthread_create error. Thread-safe.
 */
SPROBE_API
struct sprobe_stream *sprobe_stream__new(const struct sprobe_stream_sink *sink,
					 const struct sprobe_stream_opts *opts);

/*
 * Producer side: queue one record (encoded here, so REC's pointers need
 * only be valid during the call). Returns 0 when queued, -ENOBUFS when the
 * queue is full (dropped and counted), -EINVAL when the record cannot be
 * encoded, -E2BIG when it is larger than the whole queue (both counted as
 * invalid), -EPIPE after close. Never blocks, never allocates.
 * Single producer: at most one thread may push at a time. Not
 * async-signal-safe (it may call futex(2) to wake the writer, which is, but
 * the queue state is not reentrant).
 */
SPROBE_API
int sprobe_stream__push(struct sprobe_stream *s, const struct sprobe_df_record *rec);

/* Producer side: queue a SPROBE_DF_SAMPLE made from a captured thread
 * (frames' pcs, window timestamps, method, truncated flag, stack in use =
 * stack_top - sp) taken at TIME_NS. Same returns and rules as __push(). */
SPROBE_API
int sprobe_stream__push_thread_sample(struct sprobe_stream *s,
				      const struct sprobe_thread_sample *ts, uint64_t time_ns);

/* Producer side: queue a SPROBE_DF_CAPTURE made from the capture backend's
 * per-capture statistics, taken at TIME_NS, with the dropped threads (may
 * be NULL/0; more than SPROBE_DF_MAX_DROPPED_TIDS are cut to that many,
 * the per-reason counts stay exact). Same returns and rules as __push(). */
SPROBE_API
int sprobe_stream__push_capture_stats(struct sprobe_stream *s,
				      const struct sprobe_snapshot_stats *st, uint64_t time_ns,
				      const struct sprobe_df_dropped *dropped, uint32_t ndropped);

/* Thread id of the stream's writer thread (so a sampler can leave it out of
 * its captures), or 0 before it has started. The writer thread is named
 * "sprobe-writer" and blocks every asynchronous signal, real-time ones
 * included, so the program's process-directed signals are delivered to
 * its own threads (synchronous ones, a fault, stay deliverable).
 * Thread-safe. */
SPROBE_API
pid_t sprobe_stream__writer_tid(const struct sprobe_stream *s);

/*
 * Drain what is queued to the sink, emit a final SPROBE_DF_LOST record if
 * anything was dropped, flush the sink and join the writer thread. Call it
 * from the producer thread or after the producer stopped pushing (it makes
 * every earlier push visible to the writer). Returns 0, or the last sink
 * error if any write or flush failed. Idempotent: later calls return 0.
 */
SPROBE_API
int sprobe_stream__close(struct sprobe_stream *s);

/* Counters so far; exact once __close() returned. Thread-safe (relaxed
 * reads of counters each written by one side). */
SPROBE_API
void sprobe_stream__stats(const struct sprobe_stream *s, struct sprobe_stream_stats *st);

/* Close (if not closed) and free. Accepts NULL. */
SPROBE_API
void sprobe_stream__free(struct sprobe_stream *s);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_STREAM_H */
