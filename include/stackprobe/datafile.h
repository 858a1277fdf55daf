/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe data file: the recording written by `stackprobe record` (or the
 * LD_PRELOAD agent) and read by `stackprobe report`.
 *
 * The byte layout is documented in docs/FORMAT.md. In short: a 16-byte
 * preamble (magic "SPRBDATA", version, preamble size), then a sequence of
 * records, each a 16-byte frame header {type, payload length, payload CRC32C,
 * header CRC32C} followed by the payload. All integers are little-endian.
 *
 * Why a checksum per record: a recording process may die at any moment, so
 * the file on disk is any prefix of what the writer meant to write. The
 * reader keeps every complete, intact record and reports how the file ended:
 *   - COMPLETE   a trailer record ends the file (clean exit);
 *   - CUT_SHORT  the file ends without a trailer (crash, kill, disk full), at
 *                a record boundary or inside a record: everything before is
 *                kept and the reader says where it stopped;
 *   - CORRUPT    a record's header or payload fails its checksum or does not
 *                decode: a clear error with the byte offset.
 * The reader never trusts a length it has not checked, never allocates more
 * than SPROBE_DF_MAX_PAYLOAD per record, and never crashes on any input (it
 * is fuzzed: tests/fuzz_datafile.c).
 *
 * This part depends only on libc, so it can be fuzzed and linked anywhere.
 *
 * Errors: int functions return 0 or -errno; pointer functions return NULL and
 * set errno.
 */
#ifndef STACKPROBE_DATAFILE_H
#define STACKPROBE_DATAFILE_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stackprobe/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPROBE_DF_MAGIC "SPRBDATA"	/* 8 bytes, no NUL in the file */
/* Bumped on incompatible change. 2: sample weights (flags bits 16..31),
 * which a version-1 reader would count once each. 3: a file may hold
 * several processes (parts, each from its HEADER on) and PROCESS / EXIT
 * records, which a version-2 reader would mix into one process. Readers
 * read 1 to 3. */
#define SPROBE_DF_VERSION 3
#define SPROBE_DF_VERSION_MIN 1
#define SPROBE_DF_PREAMBLE_SIZE 16
#define SPROBE_DF_FRAME_SIZE 16		/* per-record header */
/* Largest payload a writer produces and a reader accepts. A larger length is
 * corruption, never an allocation. */
#define SPROBE_DF_MAX_PAYLOAD (1u << 20)
/* Longest string (thread name, path, symbol, command line) in a record. */
#define SPROBE_DF_MAX_STRING 65535u
#define SPROBE_DF_MAX_RANGES 256u
#define SPROBE_DF_MAX_BUILD_ID 64u
/* Dropped-thread entries kept per capture record. */
#define SPROBE_DF_MAX_DROPPED_TIDS 4096u
#define SPROBE_DF_NO_MODULE UINT32_MAX

enum sprobe_df_type {
	SPROBE_DF_HEADER = 1,
	SPROBE_DF_THREAD = 2,
	SPROBE_DF_MODULE = 3,
	SPROBE_DF_SYMBOL = 4,
	SPROBE_DF_SAMPLE = 5,
	SPROBE_DF_CAPTURE = 6,
	SPROBE_DF_KWINDOW = 7,
	SPROBE_DF_LOST = 8,
	SPROBE_DF_TRAILER = 9,
	SPROBE_DF_PROCESS = 10,
	SPROBE_DF_EXIT = 11,
	SPROBE_DF_SRCLINE = 12,
	SPROBE_DF_THREAD_CPU = 13,
	SPROBE_DF__TYPE_COUNT
};

enum sprobe_df_mode {
	SPROBE_DF_MODE_WALL = 0,
	SPROBE_DF_MODE_CPU = 1,
};

/* Sample flags. */
#define SPROBE_DF_SAMPLE_TRUNCATED 0x1u	/* stack longer than the copy cap */
/* Bits 16..31 of the flags word on disk hold the sample's weight minus one
 * (cpu mode: the CPU periods one captured stack stands for). The writer
 * fills them from sprobe_df_sample.weight; the reader moves them back
 * there and clears them from flags. */
#define SPROBE_DF_SAMPLE_WEIGHT_SHIFT 16
#define SPROBE_DF_SAMPLE_WEIGHT_MAX 65536u

/* Header flags. Bits 0..3: cpu mode's engine (enum sprobe_cpu_engine:
 * 1 perf-event, 2 cpu-timer; 0 not recorded, as in files of older
 * writers, which kept the word 0). Bit 4: the writer left the source
 * view of its pcs (srcline records) to the reader, to be made from the
 * module files its module records name; bit 5: it left the names of the
 * pcs of those files to the reader too (symbol records with a module and
 * no name). `stackprobe record`'s pass after the merge (and `record -p`'s)
 * does both and clears the bits; `stackprobe report` does them as it
 * reads a file that still has them. Other bits 0. */
#define SPROBE_DF_HEADER_CPU_ENGINE_MASK 0xfu
#define SPROBE_DF_HEADER_LINES_BY_READER (1u << 4)
#define SPROBE_DF_HEADER_NAMES_BY_READER (1u << 5)

/* Strings in records are (pointer, length); they need not be NUL-terminated
 * when writing. Strings handed out by the reader are NUL-terminated too. */
struct sprobe_df_header {
	uint32_t pid;
	uint32_t mode;			/* enum sprobe_df_mode */
	uint32_t freq_hz;
	uint32_t flags;			/* SPROBE_DF_HEADER_* (0 from older writers) */
	uint64_t start_realtime_ns;	/* CLOCK_REALTIME at start */
	uint64_t start_mono_ns;		/* CLOCK_MONOTONIC at the same moment */
	/* Command line: the arguments joined by NUL bytes (like
	 * /proc/PID/cmdline, without the final NUL required). */
	const char *cmdline;
	uint32_t cmdline_len;
};

struct sprobe_df_thread {
	uint32_t tid;
	const char *name;
	uint32_t name_len;
};

struct sprobe_df_range {
	uint64_t start, end;		/* [start, end) runtime addresses */
	uint64_t file_offset;
};

struct sprobe_df_module {
	uint32_t index;			/* referred to by symbol records */
	uint64_t load_bias;		/* runtime address - ELF vaddr */
	const uint8_t *build_id;
	uint32_t build_id_len;		/* <= SPROBE_DF_MAX_BUILD_ID */
	const char *path;
	uint32_t path_len;
	const struct sprobe_df_range *ranges;
	uint32_t nranges;		/* <= SPROBE_DF_MAX_RANGES */
};

/* One resolved pc (written by the agent at flush, so reports need no ELF
 * access). offset = pc - symbol start. */
struct sprobe_df_symbol {
	uint64_t pc;
	uint32_t module;		/* module index or SPROBE_DF_NO_MODULE */
	uint64_t offset;
	const char *name;
	uint32_t name_len;
};

/* Entries of a srcline record: the chain of inlined functions at a pc plus
 * the function itself. */
#define SPROBE_DF_MAX_INLINE 32u

/* The source view of one pc (written by the agent after its symbol record):
 * entry 0 is the innermost inlined function with the file:line of pc in
 * it, each next entry the function it was inlined into with the line of
 * that call, the last entry the symbol's own function (empty name: the
 * symbol record names it) with its line. text holds n pairs of
 * NUL-terminated strings "function\0file\0" (an empty file: unknown);
 * lines[i] is 0 when unknown. */
struct sprobe_df_srcline {
	uint64_t pc;
	uint32_t n;			/* 1..SPROBE_DF_MAX_INLINE */
	const uint32_t *lines;		/* n */
	const char *text;
	uint32_t text_len;		/* <= SPROBE_DF_MAX_STRING */
};

struct sprobe_df_sample {
	uint64_t time_ns;		/* CLOCK_MONOTONIC */
	uint32_t tid;
	uint32_t method;		/* enum sprobe_method */
	uint32_t flags;			/* SPROBE_DF_SAMPLE_* */
	uint64_t stack_used;		/* bytes of stack in use (top - sp) */
	/* Capture window, CLOCK_MONOTONIC ns, 0 when not applicable. */
	uint64_t signal_ns, entry_ns, exit_ns;
	/* Frames, innermost first: pcs[0] is the interrupted pc. */
	const uint64_t *pcs;
	uint32_t nframes;		/* <= SPROBE_MAX_FRAMES */
	/* Samples this record stands for: 0 or 1 = one; cpu mode writes the
	 * timer periods the stack covers (the kernel folds expirations at
	 * its tick); wall mode the captures a blocked thread was carried
	 * through unchecked, plus this one (docs/capture.md "Many
	 * threads"). Written capped at SPROBE_DF_SAMPLE_WEIGHT_MAX; the
	 * reader always returns >= 1. */
	uint32_t weight;
};

struct sprobe_df_dropped {
	uint32_t tid;
	uint32_t reason;		/* enum sprobe_drop_reason */
};

struct sprobe_df_capture {
	uint64_t time_ns;		/* CLOCK_MONOTONIC, capture start */
	uint32_t threads_total;
	uint32_t threads_captured;
	uint32_t threads_dropped;
	uint32_t dropped[SPROBE_DROP__COUNT]; /* by enum sprobe_drop_reason */
	uint64_t pause_ns;
	uint64_t capture_ns;
	const struct sprobe_df_dropped *dropped_tids;
	uint32_t ndropped_tids;		/* <= SPROBE_DF_MAX_DROPPED_TIDS */
};

/* cpu mode: one thread's sampleable CPU time (since sampling started for
 * a thread that existed then, all of it for one born later) as the agent
 * last read it, written when it changed (about every 100 ms) and when the thread
 * exits; the last record of a tid wins. The report compares it with the
 * thread's samples (coverage). */
struct sprobe_df_thread_cpu {
	uint64_t time_ns;		/* CLOCK_MONOTONIC, when read */
	uint32_t tid;
	uint32_t flags;			/* SPROBE_CPU_USAGE_* (capture.h) */
	uint64_t cpu_ns;
};

/* Kernel-side window of one capture signal, from the eBPF companion. */
struct sprobe_df_kwindow {
	uint32_t tid;
	uint64_t generate_ns;		/* signal_generate */
	uint64_t deliver_ns;		/* signal_deliver */
	uint64_t sigreturn_ns;		/* rt_sigreturn entry */
	uint64_t offcpu_ns;		/* time off CPU inside the window */
};

/* Records the stream had to drop (queue full), cumulative since start,
 * indexed by enum sprobe_df_type. Written by the stream's writer thread, so
 * a file cut short still says how much was lost. */
struct sprobe_df_lost {
	uint64_t time_ns;
	uint64_t lost[SPROBE_DF__TYPE_COUNT];
};

struct sprobe_df_trailer {
	uint64_t end_realtime_ns;
	uint64_t end_mono_ns;
	uint64_t records;		/* records before the trailer */
	uint64_t lost[SPROBE_DF__TYPE_COUNT]; /* final stream drops */
};

/* Who a part's process is (version 3). The agent writes one right after its
 * HEADER; `stackprobe record` writes a standalone one (flags UNSAMPLED, why
 * in note) for a process of the tree the agent could not enter. */
#define SPROBE_DF_PROCESS_UNSAMPLED 0x1u
struct sprobe_df_process {
	uint32_t pid;
	uint32_t ppid;			/* parent when the image started, 0 unknown */
	uint32_t exec_index;		/* images of this pid before this one (execs) */
	uint32_t flags;			/* SPROBE_DF_PROCESS_* */
	uint64_t start_mono_ns;		/* CLOCK_MONOTONIC when the image started */
	const char *name;		/* comm (basename of the program) */
	uint32_t name_len;
	const char *exe;		/* /proc/self/exe or the exec'd path */
	uint32_t exe_len;
	const char *note;		/* UNSAMPLED: why, one line */
	uint32_t note_len;
};

/* How a process image ended (version 3), and what its part of the file
 * holds. Written by `stackprobe record` after each part it merges (and
 * after a standalone PROCESS record), from the wait status it or the
 * process's parent saw, the kernel's word (eBPF companion), or the agent's
 * own note (exit, _exit, exec). */
enum sprobe_df_exit_how {
	SPROBE_DF_EXIT_UNKNOWN = 0,	/* nobody saw it end */
	SPROBE_DF_EXIT_EXITED = 1,	/* code = exit status */
	SPROBE_DF_EXIT_KILLED = 2,	/* code = signal number */
	SPROBE_DF_EXIT_EXECED = 3,	/* replaced by a new image of the same pid */
	SPROBE_DF_EXIT_RUNNING = 4,	/* still running when the recording ended */
};
struct sprobe_df_exit {
	uint32_t pid;
	uint32_t exec_index;
	uint32_t how;			/* enum sprobe_df_exit_how */
	int32_t code;
	uint64_t time_ns;		/* CLOCK_MONOTONIC, 0 unknown */
	uint32_t part_status;		/* enum sprobe_df_status of its part:
					 * COMPLETE, CUT_SHORT or CORRUPT;
					 * OK when it had no part */
	const char *note;		/* part_status not COMPLETE: where and why */
	uint32_t note_len;
};

/* Name of an enum sprobe_df_exit_how ("exited", ...). Static string. */
SPROBE_API
const char *sprobe_df_exit_how__name(uint32_t how);

/* A tagged record, used both to write and to read. */
struct sprobe_df_record {
	uint32_t type;			/* enum sprobe_df_type */
	uint64_t offset;		/* reader: file offset of the frame */
	union {
		struct sprobe_df_header header;
		struct sprobe_df_thread thread;
		struct sprobe_df_module module;
		struct sprobe_df_symbol symbol;
		struct sprobe_df_sample sample;
		struct sprobe_df_capture capture;
		struct sprobe_df_kwindow kwindow;
		struct sprobe_df_lost lost;
		struct sprobe_df_trailer trailer;
		struct sprobe_df_process process;
		struct sprobe_df_exit exit;
		struct sprobe_df_srcline srcline;
		struct sprobe_df_thread_cpu thread_cpu;
	};
};

/* Name of a record type ("sample", ...), "unknown" otherwise. Static string;
 * thread-safe, async-signal-safe. */
SPROBE_API
const char *sprobe_df_type__name(uint32_t type);

/*
 * Encode REC's payload (no frame header) into buf[0..cap).
 * Returns the payload size (> 0) when it fits; if it does not, returns the
 * size it needs without writing past cap (call again with a bigger buffer);
 * -EINVAL for an unknown type or a field over its limit (string longer than
 * SPROBE_DF_MAX_STRING, too many frames, ranges or dropped tids).
 * No allocation, no locks: thread-safe and async-signal-safe.
 */
SPROBE_API
long sprobe_df__encode(const struct sprobe_df_record *rec, void *buf, size_t cap);

/* CRC32C (Castagnoli) of buf, continuing from crc (start with 0).
 * Thread-safe, async-signal-safe. */
SPROBE_API
uint32_t sprobe_df__crc32c(uint32_t crc, const void *buf, size_t len);

/* Fill the 16-byte frame header for a payload of TYPE. Thread-safe,
 * async-signal-safe. */
SPROBE_API
void sprobe_df__frame(uint8_t out[SPROBE_DF_FRAME_SIZE], uint32_t type,
		      const void *payload, uint32_t len);

/* ---- writer ---------------------------------------------------------- */

struct sprobe_datafile_writer;

struct sprobe_datafile_writer_opts {
	size_t sz;			/* sizeof(struct sprobe_datafile_writer_opts) */
	size_t buffer_bytes;		/* 0: 64 KiB of write buffering */
	bool fsync_on_finish;		/* fsync() the file in __finish() */
};

/*
 * Create a writer on an open, writable file descriptor and write the
 * preamble. The writer does not own fd (the caller closes it after
 * __free()). Returns NULL with errno set (EINVAL bad opts, ENOMEM, or the
 * write error). Not thread-safe: one writer is used by one thread at a time.
 */
SPROBE_API
struct sprobe_datafile_writer *
sprobe_datafile_writer__new(int fd, const struct sprobe_datafile_writer_opts *opts);

/* Append one record (encoded and framed). Returns 0, -EINVAL (see
 * sprobe_df__encode), -E2BIG (payload over SPROBE_DF_MAX_PAYLOAD), -EPIPE
 * after __finish(), or a write error. Not thread-safe. */
SPROBE_API
int sprobe_datafile_writer__write(struct sprobe_datafile_writer *w,
				  const struct sprobe_df_record *rec);

/* Append an already encoded payload of TYPE (what the stream carries).
 * Returns as __write(). Not thread-safe. */
SPROBE_API
int sprobe_datafile_writer__write_raw(struct sprobe_datafile_writer *w, uint32_t type,
				      const void *payload, uint32_t len);

/* Push buffered bytes to the kernel (write(2)). Returns 0 or -errno. */
SPROBE_API
int sprobe_datafile_writer__flush(struct sprobe_datafile_writer *w);

/* Write the trailer (its .records field is filled in by the writer), flush,
 * and fsync if asked. Further writes fail with -EPIPE. Returns 0 or -errno. */
SPROBE_API
int sprobe_datafile_writer__finish(struct sprobe_datafile_writer *w,
				   const struct sprobe_df_trailer *trailer);

/* Records written so far (trailer excluded). */
SPROBE_API
uint64_t sprobe_datafile_writer__records(const struct sprobe_datafile_writer *w);

/* Flush what is buffered (best effort) and free. Does not write a trailer:
 * a file freed without __finish() reads as CUT_SHORT, as after a crash.
 * Accepts NULL. */
SPROBE_API
void sprobe_datafile_writer__free(struct sprobe_datafile_writer *w);

/* ---- reader ---------------------------------------------------------- */

enum sprobe_df_status {
	SPROBE_DF_OK = 0,		/* still reading, nothing wrong yet */
	SPROBE_DF_COMPLETE,		/* trailer read, file ends there */
	SPROBE_DF_CUT_SHORT,		/* ended without a trailer */
	SPROBE_DF_CORRUPT,		/* bad checksum, length or content */
};

struct sprobe_datafile_reader;

/* Open PATH for reading. Returns NULL with errno set (the open(2) error, or
 * ENOMEM). Format errors are reported by __next(), not here, so that an
 * empty or cut file still gives a precise message. */
SPROBE_API
struct sprobe_datafile_reader *sprobe_datafile_reader__open(const char *path);

/* Read from a FILE the caller keeps owning (and closes after __free()). */
SPROBE_API
struct sprobe_datafile_reader *sprobe_datafile_reader__from_stdio(FILE *f);

/* Read from memory; buf must stay valid until __free(). */
SPROBE_API
struct sprobe_datafile_reader *sprobe_datafile_reader__from_mem(const void *buf,
								 size_t len);

/*
 * Read the next record into *rec. Pointers inside *rec point into the
 * reader and stay valid until the next call to __next() or __free().
 * Returns 1 with a record, 0 at the end of the file (then __status() is
 * COMPLETE or CUT_SHORT), or a negative errno: -EBADMSG corrupt record,
 * -EPROTO not a stackprobe data file, -EPROTONOSUPPORT unknown version,
 * -EIO and friends for read errors. After an error or the end, further
 * calls return the same value. __error() gives a one-line explanation.
 * Unknown record types with a valid checksum are skipped (forward
 * compatibility within a version). Not thread-safe.
 */
SPROBE_API
int sprobe_datafile_reader__next(struct sprobe_datafile_reader *r,
				 struct sprobe_df_record *rec);

/* How the file ended so far (enum sprobe_df_status). */
SPROBE_API
int sprobe_datafile_reader__status(const struct sprobe_datafile_reader *r);

/* One-line explanation of CUT_SHORT or an error, "" otherwise. Owned by the
 * reader. */
SPROBE_API
const char *sprobe_datafile_reader__error(const struct sprobe_datafile_reader *r);

/* Records returned so far, and the offset just past the last good one. */
SPROBE_API
uint64_t sprobe_datafile_reader__records(const struct sprobe_datafile_reader *r);
SPROBE_API
uint64_t sprobe_datafile_reader__good_bytes(const struct sprobe_datafile_reader *r);

/* Free the reader (closes the file it opened itself). Accepts NULL. */
SPROBE_API
void sprobe_datafile_reader__free(struct sprobe_datafile_reader *r);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_DATAFILE_H */
