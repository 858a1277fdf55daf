/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe trace: a timeline of suspend windows and samples as Chrome
 * trace-event JSON (the "JSON Object Format"), which Perfetto UI
 * (ui.perfetto.dev) and chrome://tracing open directly.
 *
 * One track per thread (pid = the process, tid = the thread). On a track:
 *   "signal delivery"  slice generate -> deliver     (kernel, cat "kernel")
 *   "kernel pause"     slice deliver -> rt_sigreturn (kernel, cat "kernel")
 *   "handler"          slice entry -> exit, nested inside the kernel pause
 *                      (self-reported, cat "self")
 *   "sample"           instant at the sample time, args.stack = frames
 * Timestamps are CLOCK_MONOTONIC, written in microseconds with ns digits.
 *
 * The writer streams: events go to the FILE as they are added, so memory
 * stays O(threads). Not thread-safe: one writer per FILE, one caller at a
 * time. Not async-signal-safe (stdio).
 */
#ifndef STACKPROBE_TRACE_H
#define STACKPROBE_TRACE_H

#include <stackprobe/api.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <stackprobe/pause.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sprobe_trace_opts {
	size_t sz;			/* sizeof(struct sprobe_trace_opts) */
	pid_t pid;			/* the process; required, > 0 */
	const char *process_name;	/* NULL: "pid <pid>"; copied */
};

struct sprobe_trace;

/*
 * Start a trace on f (not closed by the writer; f must stay open until
 * sprobe_trace__finish()). Writes the header at once. Returns a new writer
 * owned by the caller (sprobe_trace__free()), or NULL with errno EINVAL
 * (NULL f or opts, pid <= 0), ENOMEM, or EIO (write error).
 */
SPROBE_API
struct sprobe_trace *sprobe_trace__new(FILE *f, const struct sprobe_trace_opts *opts);

/* Put tid's track in process pid (a recording of several processes; the
 * default is opts.pid), naming the process process_name (NULL: "pid N")
 * the first time pid is seen. Call it before any other event of tid. The
 * first process given for a tid wins. Returns 0 or -EINVAL / -ENOMEM /
 * -EIO. */
SPROBE_API
int sprobe_trace__thread_process(struct sprobe_trace *t, pid_t tid, pid_t pid,
				 const char *process_name);

/* Name tid's track (e.g. its comm). The first name given for a tid wins;
 * tracks never named get "thread <tid>" at finish. name is copied.
 * Returns 0 or -EINVAL / -ENOMEM / -EIO. */
SPROBE_API
int sprobe_trace__thread_name(struct sprobe_trace *t, pid_t tid, const char *name);

/* Add one kernel window (delivery and pause slices; an incomplete window
 * becomes an instant "kernel pause (no rt_sigreturn)"). Returns 0 or
 * -EINVAL (NULL, tid <= 0, no deliver time) / -ENOMEM / -EIO. */
SPROBE_API
int sprobe_trace__kernel_window(struct sprobe_trace *t, const struct sprobe_pause_kwindow *w);

/* Add one self-reported window ("handler" slice). Returns 0 or -EINVAL
 * (NULL, tid <= 0, exit < entry or entry 0) / -ENOMEM / -EIO. */
SPROBE_API
int sprobe_trace__self_window(struct sprobe_trace *t, const struct sprobe_pause_swindow *w);

/* Add one sample of tid at ts_ns with frames[0..nframes) (innermost first;
 * NULL entries are written as "??") standing for weight samples (cpu mode:
 * timer periods; 0 is 1; above 1 it is written as args.weight). Strings
 * are JSON-escaped; invalid UTF-8 becomes U+FFFD. Returns 0 or -EINVAL /
 * -ENOMEM / -EIO. */
SPROBE_API
int sprobe_trace__sample(struct sprobe_trace *t, pid_t tid, uint64_t ts_ns,
			 const char *const *frames, size_t nframes, uint32_t weight);

/* Name the unnamed tracks, close the JSON document and flush f. Further
 * calls other than free return -EINVAL. Returns 0 or -EIO. */
SPROBE_API
int sprobe_trace__finish(struct sprobe_trace *t);

/* Free the writer (finishing the document first if that was not done, so
 * the file is still valid JSON). Accepts NULL. Does not close f. */
SPROBE_API
void sprobe_trace__free(struct sprobe_trace *t);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_TRACE_H */
