/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A JIT's perf map read from a given file, for a process that has exited
 * (perfmap.c; the inventory reads the live process's own map itself).
 *
 * Why: some JITs write their map only at exit (the JVM's
 * -XX:+DumpPerfMapAtExit, `jcmd PID Compiler.perfmap`), and every JIT
 * writes a line after the code it names has started to run, so a pc the
 * agent saw first may have had no line yet; the agent names a pc once.
 * `record` names those pcs after the merge from the map the process left
 * in /tmp, as `perf report` does (`record -p` from the map of the
 * process it recorded, which still runs; `report` of a file the agent
 * wrote alone), bounded by the part's times (below).
 */
#ifndef SPROBE_SYMBOLS_PERFMAP_H
#define SPROBE_SYMBOLS_PERFMAP_H

#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/symbolize.h>

struct sprobe_perfmap_file;

/* A reader of the map at path (nothing is read yet). Only a regular file
 * (no symlink) owned by owner or root, last modified in [not_before_s,
 * not_after_s] (seconds of CLOCK_REALTIME; 0: no bound): a map left by an
 * earlier process of the same pid is older than this one's start, one of
 * a later process (the pid reused, or an image this one exec'd) newer
 * than its end. NULL with errno EINVAL or ENOMEM. */
struct sprobe_perfmap_file *sprobe_perfmap_file__new(const char *path, int64_t not_before_s,
						     int64_t not_after_s, uid_t owner);

/* Name pc: out's name (valid until the reader is freed), sym_start,
 * sym_offset, sym_size, source "perf-map". The file is read once, at the
 * first call (the process is gone: the map no longer grows). 0, -ENOENT
 * (no usable map, no line for pc), -ENOMEM (then the next call reads
 * again). */
int sprobe_perfmap_file__symbolize(struct sprobe_perfmap_file *f, uint64_t pc,
				   struct sprobe_symbol *out);

void sprobe_perfmap_file__free(struct sprobe_perfmap_file *f);

#endif
