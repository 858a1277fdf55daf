/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier (issue 26, first part): a process tree the agent
 * cannot enter (a static binary, a set-ID program, `record --external`) is
 * sampled through the kernel by `record` itself: one perf event on the
 * command's first process, inherited by every thread and child it makes
 * (PERF_COUNT_SW_TASK_CLOCK, user space only; each sample carries the user
 * registers, a copy of the top of the user stack and the kernel's
 * frame-pointer call chain: xsample.h), read from its ring buffer while
 * the command runs. The target runs no code of ours and sees no signal.
 *
 * What it gives: cpu mode only (a task clock counts CPU time; blocked
 * threads have no samples); each sample unwound when its ring is read, by
 * the deferred unwinder from the copied registers and stack, reading code
 * and .eh_frame from the process's module files (DWARF, frame pointers
 * where there is no CFI, the kernel's chain where the copy ran out), so
 * a program built without frame pointers has its callers. Each process
 * image becomes an ordinary part (DIR/PID.N.part) with its
 * header, process, threads, modules (from /proc/PID/maps, read while the
 * process lives), samples and symbols, merged like the agent's parts.
 *
 * Not thread-safe (the record command's main thread); 0 or -errno.
 */
#ifndef SPROBE_USERSPACE_EXTERNAL_H
#define SPROBE_USERSPACE_EXTERNAL_H

#include <stddef.h>
#include <sys/types.h>

struct sprobe_ext;

/* Open the event on pid (stopped before its exec: enable_on_exec starts
 * counting at the exec), sampling freq_hz per CPU-second, parts into dir.
 * NULL with errno set (EACCES/EPERM: perf_event_paranoid or a seccomp
 * filter; why gets one line saying so). */
struct sprobe_ext *sprobe_ext__open(pid_t pid, double freq_hz, const char *dir, char *why,
				    size_t len);

/* Read what the ring holds (call often: every 50-250 ms). Returns the
 * number of samples read, or -errno. */
int sprobe_ext__poll(struct sprobe_ext *x);

/* Read the rest, write one part per process image into dir. Returns the
 * number of parts written, or -errno. */
int sprobe_ext__finish(struct sprobe_ext *x);

/* Samples read, and samples the kernel reported lost (ring full). */
void sprobe_ext__counts(const struct sprobe_ext *x, unsigned long long *samples,
			unsigned long long *lost);

void sprobe_ext__free(struct sprobe_ext *x);

#endif
