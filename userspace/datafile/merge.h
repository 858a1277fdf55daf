/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One recording from a process tree: the parts that each process's agent
 * wrote into a directory (DIR/PID.EXEC.part, one data file per process
 * image), merged into one version-3 data file (docs/FORMAT.md "Several
 * processes"), with an EXIT record after each part saying how that image
 * ended and what its part holds, and a PROCESS + EXIT pair for each
 * process the agent could not enter.
 *
 * Where the ends come from, most trusted first: what `record` itself
 * reaped (its child, and orphans it reaped as a subreaper) and the
 * kernel's word (the eBPF companion), passed in opts; then DIR/events,
 * written by the agents (an image's own exit/_exit/exec, and what each
 * parent reaped: see userspace/agent/process_wrappers.c).
 *
 * Parts are copied record by record as written (checksums and all), up to
 * the last intact record; a part cut short or damaged keeps what was
 * intact and says where it stopped in its EXIT record, and never stops the
 * other parts from being merged. Kernel windows (KWINDOW) of a tgid go
 * into that process's parts, before their trailers.
 *
 * Not thread-safe; allocates; returns 0 or -errno.
 */
#ifndef SPROBE_USERSPACE_DATAFILE_MERGE_H
#define SPROBE_USERSPACE_DATAFILE_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/datafile.h>

#define SPROBE_MERGE_LATEST UINT32_MAX	/* exec_index: the pid's last image */

struct sprobe_merge_exit {
	uint32_t pid;
	uint32_t exec_index;		/* or SPROBE_MERGE_LATEST */
	uint32_t how;			/* enum sprobe_df_exit_how */
	int32_t code;
	uint64_t time_ns;
};

struct sprobe_merge_opts {
	const char *dir;
	const char *output;		/* written whole (created or truncated) */
	const struct sprobe_merge_exit *exits;	/* trusted ends (see above) */
	size_t nexits;
	const struct sprobe_df_kwindow *kw;	/* kernel windows ... */
	const uint32_t *kw_tgid;	/* ... and their processes (NULL: all root_pid's) */
	size_t nkw;
	pid_t root_pid;
};

struct sprobe_merge_result {
	unsigned processes;		/* pids seen (sampled or not) */
	unsigned parts;			/* images with a part */
	unsigned cut_short;		/* parts without trailer (killed, running) */
	unsigned damaged;		/* parts with a corrupt record */
	unsigned unsampled;		/* images the agent could not enter */
	unsigned running;		/* still running at the merge */
	size_t kwindows;		/* kernel windows placed */
	char unsampled_what[512];	/* the first: "PATH: REASON" */
	char damaged_what[512];		/* the first damaged part and why */
};

int sprobe_merge__dir(const struct sprobe_merge_opts *o, struct sprobe_merge_result *res);

#endif
