/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe report: turn a data file into a text summary, Brendan Gregg's
 * folded stacks, JSON (documented in docs/FORMAT.md, "Report JSON"), a
 * gzipped pprof profile, a speedscope file, an interactive SVG flame
 * graph, a Chrome trace or one interactive HTML page (docs/OUTPUTS.md).
 *
 * Symbol names come from the file's symbol records only (the agent writes
 * them at flush), so a report needs no access to the profiled binaries. A pc
 * without a symbol record prints as module+0xOFFSET (OFFSET = pc - load
 * bias, i.e. the ELF virtual address, ready for addr2line), or as 0xPC when
 * no module covers it.
 *
 * Every report states how the file ended (complete, cut short) and shows the
 * stream's dropped records and the threads the sampler could not capture.
 *
 * Errors: int functions return 0 or -errno; pointer functions return NULL
 * and set errno. Not thread-safe: one report is used by one thread.
 */
#ifndef STACKPROBE_REPORT_H
#define STACKPROBE_REPORT_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <stackprobe/datafile.h>

#ifdef __cplusplus
extern "C" {
#endif

enum sprobe_report_format {
	SPROBE_REPORT_TEXT = 0,
	SPROBE_REPORT_FOLDED,
	SPROBE_REPORT_JSON,
	SPROBE_REPORT_PPROF,		/* gzip-compressed profile.proto */
	SPROBE_REPORT_SPEEDSCOPE,	/* speedscope JSON, one profile per thread */
	SPROBE_REPORT_SVG,		/* self-contained interactive flame graph */
	SPROBE_REPORT_TRACE,	/* Chrome trace-event JSON (Perfetto): windows + samples */
	SPROBE_REPORT_HTML,	/* one self-contained interactive page: flame graph,
				 * threads, pause timeline, drops */
};

struct sprobe_report_opts {
	size_t sz;		/* sizeof(struct sprobe_report_opts) */
	uint32_t tid;		/* 0: all threads; else only this thread */
	uint32_t top;		/* text: rows of the function tables; 0: 25 */
	const char *source;	/* name shown for the input (e.g. its path) */
	uint32_t pid;		/* 0: all processes; else only this pid's */
	/* pprof: "key=value" lines ('\n'-separated) added to every sample
	 * as string labels (what a profiling backend indexes on: service
	 * name, hostname); NULL: none. Copied. */
	const char *labels;
};

struct sprobe_report;

/* New, empty report. The opts are copied (source is duplicated). Returns
 * NULL with errno set (EINVAL, ENOMEM). */
SPROBE_API
struct sprobe_report *sprobe_report__new(const struct sprobe_report_opts *opts);

/*
 * Read every record from RD into the report. Returns 0 when the reader got
 * to the end of the file, whether COMPLETE or CUT_SHORT (see __status());
 * or the reader's negative errno (-EBADMSG corrupt, -EPROTO not a data
 * file, ...), in which case the report keeps what it read before the error
 * and __message() says what went wrong. -ENOMEM if memory ran out. The
 * reader stays owned by the caller.
 */
SPROBE_API
int sprobe_report__load(struct sprobe_report *r, struct sprobe_datafile_reader *rd);

/* Open PATH, load it, close it. Returns as __load(), or the open error. */
SPROBE_API
int sprobe_report__load_file(struct sprobe_report *r, const char *path);

/* enum sprobe_df_status of the loaded file, and its one-line explanation
 * ("" when complete). The string is owned by the report. */
SPROBE_API
int sprobe_report__status(const struct sprobe_report *r);
SPROBE_API
const char *sprobe_report__message(const struct sprobe_report *r);

/* Records loaded (0: the file held nothing, not even a header). */
SPROBE_API
uint64_t sprobe_report__records(const struct sprobe_report *r);

/* Samples loaded that pass the tid filter. */
SPROBE_API
uint64_t sprobe_report__samples(const struct sprobe_report *r);

/* Records the stream lost (queue full), all types, from the file's lost
 * records and trailer; and thread-captures the sampler dropped (all
 * reasons, whole process). For callers that must surface drops next to a
 * format that has no room for them (folded). */
SPROBE_API
uint64_t sprobe_report__lost(const struct sprobe_report *r);
SPROBE_API
uint64_t sprobe_report__threads_dropped(const struct sprobe_report *r);

/* Write the report in FMT to OUT. Returns 0, -EINVAL, -ENOMEM, or -EIO if
 * writing failed. May be called several times (with different formats). */
/*
 * Name frames from debuginfod (Linux; call after loading, before the first
 * write): for each module with a build-id whose recorded frames have no
 * symbol's name (none, or only their FDE's "gzip+0x42f0"), fetch its debug
 * file from the servers of DEBUGINFOD_URLS (symbolize.h, opts.debuginfod;
 * cached by libdebuginfod) and rename those frames from its symbol table.
 * Returns the number of frames renamed (0 without DEBUGINFOD_URLS), or
 * -ENOMEM. When the servers cannot be reached, one line on stderr says so
 * and frames keep their recorded names (not an error). Network access and
 * up to DEBUGINFOD_TIMEOUT seconds per server; not thread-safe.
 */
SPROBE_API
int sprobe_report__debuginfod(struct sprobe_report *r);

SPROBE_API
int sprobe_report__write(struct sprobe_report *r, FILE *out, enum sprobe_report_format fmt);

/* Options of sprobe_report__diff(). */
struct sprobe_diff_opts {
	size_t sz;		/* sizeof(struct sprobe_diff_opts) */
	uint32_t top;		/* text: rows; 0: 25 */
	double alpha;		/* family-wise significance level; 0: 0.05 */
	const char *base_name;	/* names shown for the two inputs; NULL: BASE, NEW */
	const char *new_name;
};

/*
 * Compare two loaded reports (`stackprobe diff`): every function's self
 * and total share of each report's own selected samples, the change, its
 * 95 % interval (batch means over time: docs/OUTPUTS.md "stackprobe
 * diff") and whether it is significant after Holm's correction over all
 * the functions tested. Functions are matched by name. Formats: TEXT,
 * JSON, FOLDED (difffolded.pl's "stack base new", the base scaled to the
 * new run's weight), PPROF (the base negated and labelled pprof::base, as
 * pprof -diff_base), HTML (a red/blue differential flame graph); others
 * -ENOTSUP. Both reports are aggregated (as by sprobe_report__write).
 * Returns 0, -EINVAL, -ENOTSUP, -ENOMEM or -EIO. Not thread-safe.
 */
SPROBE_API
int sprobe_report__diff(struct sprobe_report *base, struct sprobe_report *now, FILE *out,
			enum sprobe_report_format fmt, const struct sprobe_diff_opts *opts);

/* "text", "folded", "json", "pprof", "speedscope", "svg", "trace", "html"
 * -> enum value;
 * -EINVAL otherwise. */
SPROBE_API
int sprobe_report_format__parse(const char *name);

/*
 * ---- Access to the loaded data, for writers of other formats ----------
 *
 * What the pprof, speedscope and SVG writers (and any embedding program)
 * read. Everything honours the tid filter. Strings and arrays handed out are
 * owned by the report and stay valid until sprobe_report__free(), except
 * where a callback says otherwise. Not thread-safe (one thread per report).
 */

/* Recording-wide facts. Fill info->sz first. */
struct sprobe_report_info {
	size_t sz;			/* sizeof(struct sprobe_report_info) */
	bool has_header;		/* false: the fields below from it are 0 */
	uint32_t pid;
	uint32_t mode;			/* enum sprobe_df_mode */
	uint32_t freq_hz;		/* sampling frequency; 0 if unknown */
	uint64_t start_realtime_ns;	/* CLOCK_REALTIME at start */
	uint64_t wall_ns;		/* start -> end of the recording */
	uint64_t samples;		/* samples passing the filter */
	uint64_t lost;			/* == sprobe_report__lost() */
	uint64_t threads_dropped;	/* == sprobe_report__threads_dropped() */
	int status;			/* == sprobe_report__status() */
	const char *message;		/* == sprobe_report__message() */
	const char *source;		/* opts->source or NULL */
	const char *cmdline;		/* arguments joined by NUL bytes */
	uint32_t cmdline_len;
};

/* Fill *info (up to info->sz bytes). Returns 0 or -EINVAL. */
SPROBE_API
int sprobe_report__info(const struct sprobe_report *r, struct sprobe_report_info *info);

/* Frames of a sample as handed out, inlined frames included. */
#define SPROBE_REPORT_MAX_FRAMES 512

/* One loaded sample, as handed to a sprobe_report__foreach_sample callback.
 * Pointers are valid during the callback only. */
struct sprobe_report_sample {
	uint32_t tid;
	const char *thread_name;	/* last name seen, or "thread" (as folded) */
	uint32_t pid;			/* its process (0 if the file does not say) */
	const char *process_name;	/* that process's name ("" if unknown) */
	bool multi_process;		/* the report holds several processes */
	uint64_t time_ns;		/* CLOCK_MONOTONIC */
	uint64_t window_ns;		/* capture window entry -> exit; 0 if none */
	uint32_t method;		/* enum sprobe_method */
	bool truncated;			/* stack longer than the copy cap */
	/* Innermost first; NULL if nframes is 0. In a report of several
	 * processes these are keys, not addresses (the process in bits
	 * 48..62): pass them to sprobe_report__resolve(), whose .address is
	 * the address. A pc where functions were inlined is preceded by one
	 * frame per inlined function, innermost first (a synthetic pc with
	 * bit 63 set: resolve it, or ask sprobe_report__frame_line(), never
	 * a module). So nframes may exceed the recorded frames (at most
	 * SPROBE_REPORT_MAX_FRAMES). */
	const uint64_t *pcs;
	uint32_t nframes;
	/* Samples this one stands for, >= 1: cpu mode records one stack for
	 * the timer periods the kernel folded together (every count the
	 * report prints is weighted; the window belongs to the one capture). */
	uint32_t weight;
};

/* Called once per sample; a non-zero return stops the walk and is
 * returned by sprobe_report__foreach_sample(). */
typedef int (*sprobe_report_sample_fn)(const struct sprobe_report_sample *s, void *ctx);

/* Call FN for every sample passing the filter, in file order (the order
 * the stream wrote them, which is per-thread time order). Returns 0, FN's
 * non-zero value, or -EINVAL. */
SPROBE_API
int sprobe_report__foreach_sample(struct sprobe_report *r, sprobe_report_sample_fn fn, void *ctx);

/* What a pc resolves to. */
struct sprobe_report_frame {
	/* The same name the text, folded and JSON reports print: the symbol
	 * record's name, else "module+0xOFFSET", else "0xPC". Frames with
	 * equal names are the same function in every report. */
	const char *name;
	bool symbolized;		/* name came from a symbol record */
	const char *module;		/* module path, or NULL */
	uint32_t module_index;		/* or SPROBE_DF_NO_MODULE */
	uint64_t address;		/* the pc itself (a key's address part) */
	uint32_t module_pos;		/* for sprobe_report__module(), or SPROBE_DF_NO_MODULE */
};

/* Resolve PC into *f. Returns 0, -EINVAL or -ENOMEM. Resolution is cached:
 * each pc is looked up once per report. */
SPROBE_API
int sprobe_report__resolve(struct sprobe_report *r, uint64_t pc, struct sprobe_report_frame *f);

/*
 * Source position of a frame handed out by sprobe_report__foreach_sample():
 * *file and *line from the recording's srcline records (docs/FORMAT.md
 * type 12: *file "" and *line 0 where DWARF did not say), *inlined true
 * for an inlined function's frame, whose plain name ("f", where resolve()
 * says "f (inlined)") goes to *function; NULL there for other frames.
 * function and inlined may be NULL. Returns 0, -ENOENT (the recording has
 * no line information for pc), -EINVAL. Strings live as long as the report.
 */
SPROBE_API
int sprobe_report__frame_line(const struct sprobe_report *r, uint64_t pc, const char **function,
			      const char **file, uint32_t *line, bool *inlined);

/* A module (executable or shared object) announced in the file. */
struct sprobe_report_module {
	uint32_t index;
	uint32_t pid;			/* its process (0 if the file does not say) */
	const char *path;
	const char *build_id;		/* lowercase hex, "" if none */
	uint64_t load_bias;		/* runtime address - ELF vaddr */
	const struct sprobe_df_range *ranges;	/* executable mappings */
	uint32_t nranges;
};

/* Number of modules, and module I (0 <= I < count) into *m. __module()
 * returns 0 or -EINVAL (out of range). */
SPROBE_API
size_t sprobe_report__module_count(const struct sprobe_report *r);
SPROBE_API
int sprobe_report__module(const struct sprobe_report *r, size_t i, struct sprobe_report_module *m);

/* The per-line view of FUNCTION (a name as the reports print it, without
 * " (inlined)"): each of its source lines with the samples there, self
 * and total, and the line's text where the source file is readable
 * (`report --source`). Returns 0, -ENOENT (no sample has FUNCTION on its
 * stack), -EINVAL, -ENOMEM. */
SPROBE_API
int sprobe_report__write_source(struct sprobe_report *r, FILE *out, const char *function);

/* Free. Accepts NULL. */
SPROBE_API
void sprobe_report__free(struct sprobe_report *r);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_REPORT_H */
