/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe report: turn a data file into a text summary, Brendan Gregg's
 * folded stacks, or JSON (documented in docs/FORMAT.md, "Report JSON").
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
};

struct sprobe_report_opts {
	size_t sz;		/* sizeof(struct sprobe_report_opts) */
	uint32_t tid;		/* 0: all threads; else only this thread */
	uint32_t top;		/* text: rows of the function tables; 0: 25 */
	const char *source;	/* name shown for the input (e.g. its path) */
};

struct sprobe_report;

/* New, empty report. The opts are copied (source is duplicated). Returns
 * NULL with errno set (EINVAL, ENOMEM). */
struct sprobe_report *sprobe_report__new(const struct sprobe_report_opts *opts);

/*
 * Read every record from RD into the report. Returns 0 when the reader got
 * to the end of the file, whether COMPLETE or CUT_SHORT (see __status());
 * or the reader's negative errno (-EBADMSG corrupt, -EPROTO not a data
 * file, ...), in which case the report keeps what it read before the error
 * and __message() says what went wrong. -ENOMEM if memory ran out. The
 * reader stays owned by the caller.
 */
int sprobe_report__load(struct sprobe_report *r, struct sprobe_datafile_reader *rd);

/* Open PATH, load it, close it. Returns as __load(), or the open error. */
int sprobe_report__load_file(struct sprobe_report *r, const char *path);

/* enum sprobe_df_status of the loaded file, and its one-line explanation
 * ("" when complete). The string is owned by the report. */
int sprobe_report__status(const struct sprobe_report *r);
const char *sprobe_report__message(const struct sprobe_report *r);

/* Samples loaded that pass the tid filter. */
uint64_t sprobe_report__samples(const struct sprobe_report *r);

/* Write the report in FMT to OUT. Returns 0, -EINVAL, -ENOMEM, or -EIO if
 * writing failed. May be called several times (with different formats). */
int sprobe_report__write(struct sprobe_report *r, FILE *out, enum sprobe_report_format fmt);

/* "text", "folded", "json" -> enum value; -EINVAL otherwise. */
int sprobe_report_format__parse(const char *name);

/* Free. Accepts NULL. */
void sprobe_report__free(struct sprobe_report *r);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_REPORT_H */
