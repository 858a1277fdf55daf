/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A pc's inline chain and lines (sprobe_modules__inline_frames()) as one
 * SRCLINE record (docs/FORMAT.md type 12), the same layout whoever writes
 * it: the agent's sampler (userspace/sampler/emit.c) or `record` after
 * the merge (userspace/cli/record_lines.c), so a report cannot tell them
 * apart.
 */
#ifndef SPROBE_SYMBOLS_SRCLINE_H
#define SPROBE_SYMBOLS_SRCLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackprobe/datafile.h>
#include <stackprobe/symbolize.h>

/* Fill rec (pointing into text and lines, which the caller owns: text
 * text_cap bytes, lines n entries) from the n frames fr, innermost first,
 * for pc. Function and file names are packed NUL-terminated in pairs;
 * inner frames that do not fit text are dropped, keeping the outer ones
 * and the real function (the outermost entry) last. False when there is nothing worth a record: no frame, one frame
 * without a file, or a chain cut so that it does not end at its
 * function. */
bool sprobe_srcline__pack(const struct sprobe_src_frame *fr, int n, uint64_t pc, char *text,
			  size_t text_cap, uint32_t *lines, struct sprobe_df_record *rec);

#endif
