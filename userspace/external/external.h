/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier: a process tree the agent
 * cannot enter (a static binary, a set-ID program, `record --external`) is
 * sampled through the kernel by `record` itself: one perf event on the
 * command's first process, inherited by every thread and child it makes
 * (PERF_COUNT_SW_TASK_CLOCK, user and kernel time where the kernel allows
 * it, else user time only: sprobe_ext__kernel_why(); each sample carries the user
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
 * Two ways in: sprobe_ext__open() for a command record starts (stopped
 * before its exec), sprobe_ext__attach() for a process already running
 * (`record -p PID` without an agent: userspace/cli/cmd_record_ext.c).
 * Why the kernel refused: sprobe_ext__explain() (perm.c).
 *
 * Not thread-safe (the record command's main thread); 0 or -errno.
 */
#ifndef SPROBE_USERSPACE_EXTERNAL_H
#define SPROBE_USERSPACE_EXTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sprobe_ext;

/* Open the event on pid (stopped before its exec: enable_on_exec starts
 * counting at the exec), sampling freq_hz per CPU-second, parts into dir.
 * NULL with errno set (EACCES/EPERM: perf_event_paranoid or a seccomp
 * filter; why gets one line saying so). */
struct sprobe_ext *sprobe_ext__open(pid_t pid, double freq_hz, const char *dir, char *why,
				    size_t len);

/* Attach to pid, a process already running (record -p): one event per
 * thread and CPU, inherited (threads and children made later follow),
 * every CPU's events writing into one ring (PERF_EVENT_IOC_SET_OUTPUT).
 * Threads made while the threads are listed: /proc/PID/task is read
 * again after the attach, and a thread found then gets events of its own
 * unless an attached parent's were inherited (its FORK record is in a
 * ring). Threads that have exited are skipped; children that exist
 * already are not followed. The process's name, modules and thread
 * names are read now. Sampling starts before it returns.
 * NULL with errno set and why filled: ESRCH (no such process, a zombie),
 * EINVAL (a kernel thread, a thread id), EACCES/EPERM (see
 * sprobe_ext__explain), EMFILE (more threads x CPUs than descriptors). */
struct sprobe_ext *sprobe_ext__attach(pid_t pid, double freq_hz, const char *dir, char *why,
				      size_t len);

/* Name the attached process's live threads from /proc (call now and
 * then: a thread that exits unnamed is named after its process).
 * Returns the number of threads, or -errno (-ESRCH: it has exited). */
int sprobe_ext__refresh(struct sprobe_ext *x);

/* One line into why saying why perf_event_open(pid) failed with err and
 * what to run (userspace/external/perm.c): perf_event_paranoid and the
 * sysctl, CAP_PERFMON, another user's or a set-ID (non-dumpable)
 * process, a seccomp filter (a container's profile), a kernel without
 * perf events. Reads /proc; thread-safe. */
void sprobe_ext__explain(int err, pid_t pid, char *why, size_t len);

/* Read what the ring holds (call often: every 50-250 ms). Returns the
 * number of samples read, or -errno. */
int sprobe_ext__poll(struct sprobe_ext *x);

/* Read the rest, write one part per process image into dir. Returns the
 * number of parts written, or -errno. */
int sprobe_ext__finish(struct sprobe_ext *x);

/* The pid given to sprobe_ext__open() or _attach() is a process deeper
 * in a tree whose earlier images the agent sampled (parts PID.0 ..
 * PID.N-1): its first image here is exec_index, its parent ppid, its
 * process id pid (_open() may have been given the tid of the thread that
 * will exec: after the exec that thread is the process). Call before the
 * first sprobe_ext__poll(). */
void sprobe_ext__set_root(struct sprobe_ext *x, pid_t pid, unsigned exec_index, pid_t ppid);

/* Have the root and every process seen in the rings ended (or are they
 * zombies)? Then nothing more will come: _finish() and _free() it. A
 * fork whose FORK record is not read yet is not known here: poll first. */
bool sprobe_ext__gone(const struct sprobe_ext *x);

/* NULL when the events sample kernel time too (kernel frames on top of
 * the user stack), else one phrase saying why they sample user time only
 * ("user time only: ... perf_event_paranoid ..."). */
const char *sprobe_ext__kernel_why(const struct sprobe_ext *x);

/* Samples read, and samples the kernel reported lost (ring full). */
void sprobe_ext__counts(const struct sprobe_ext *x, unsigned long long *samples,
			unsigned long long *lost);

void sprobe_ext__free(struct sprobe_ext *x);

#endif
