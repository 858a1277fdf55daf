/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The descriptors the library holds inside someone else's process.
 *
 * The agent is a guest: the program may close every descriptor above
 * stderr at start (close loops, closefrom, close_range), dup2 over any
 * number, lower RLIMIT_NOFILE, or make a raw close system call. None of
 * that may make the library write into, read from or close a descriptor
 * the program owns, and the library may not take numbers the program
 * would otherwise get. So every descriptor the library opens in a host
 * process goes through this registry:
 *
 *  - Long-lived descriptors (KEEP, CACHE) are moved to the top of the
 *    numbers the program can use (the region just below min(soft
 *    RLIMIT_NOFILE, SPROBE_FD_TOP)), where open() and dup() never reach
 *    before the program has used every lower number. All are
 *    close-on-exec.
 *  - CACHE descriptors (per-thread /proc files) are held only within a
 *    budget (sprobe_fd__budget()); past it the caller opens per use, and
 *    while the soft limit is small (below SPROBE_FD_MIN_LIMIT_FOR_CACHE)
 *    no CACHE descriptor is held at all: a tight limit is the program's
 *    to use. KEEP descriptors (the data file, the task directory) are
 *    held whatever the budget: at most SPROBE_FD_MAX_KEEP of them.
 *  - Every registered number is marked in a bitmap that the agent's
 *    close/close_range/closefrom/dup2/dup3 wrappers read (userspace/agent):
 *    a close of one of ours is answered as if the number were not open
 *    (EBADF: the program never opened it, so without the agent it would
 *    not be open), a dup2/dup3 onto one of ours first re-homes ours
 *    (sprobe_fd__rehome()) and then lets the program's call go through.
 *  - Each entry remembers the device and inode it was opened on. Users
 *    that write (the data file) check them per batch
 *    (sprobe_fd__verify()), and sprobe_fd__close() closes a number only
 *    if it is still that file: a raw close(2) the wrappers cannot see,
 *    followed by the program reusing the number, makes the library stop
 *    using it, never use the program's file.
 *
 * Handles: callers hold a handle (>= 0), not a number, because the number
 * can change under them (re-homing). sprobe_fd__get() pins the entry and
 * returns its current number; sprobe_fd__put() unpins. The re-homing
 * thread waits for the pins of the old number to drain before the
 * program's dup2 replaces it. Get/put are lock-free (two atomic adds).
 *
 * Thread safety: every function may be called from any thread. None is
 * async-signal-safe except sprobe_fd__owned() (one relaxed load), which
 * the close wrapper may run inside a program's signal handler;
 * sprobe_fd__rehome() is called from dup2/dup3, which are
 * async-signal-safe in libc: it takes no lock and allocates nothing (it
 * spins on the pin count of one entry, whose holders are the library's
 * own threads, which block every signal).
 */
#ifndef SPROBE_USERSPACE_FDS_H
#define SPROBE_USERSPACE_FDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Long-lived descriptors go just below min(soft limit, SPROBE_FD_TOP):
 * placing them at a soft limit of 1M would make the kernel grow the
 * process's descriptor table to 1M entries (8 MiB); 4096 entries are
 * 32 KiB, and a quarter of them (the CACHE budget) covers the two /proc
 * files of 512 blocked threads. */
#define SPROBE_FD_TOP 4096
/* Below this soft limit the library holds no CACHE descriptor. */
#define SPROBE_FD_MIN_LIMIT_FOR_CACHE 256
/* KEEP descriptors are few and fixed: the data file, the task directory. */
#define SPROBE_FD_MAX_KEEP 8
/* Registered numbers are tracked up to this value; a transient
 * descriptor that the kernel numbers higher (a program holding 64k files)
 * is used and closed unregistered. */
#define SPROBE_FD_BITMAP_FDS 65536

enum sprobe_fd_kind {
	SPROBE_FD_TRANSIENT = 0, /* opened, used and closed by one caller; stays where open() put it */
	SPROBE_FD_KEEP = 1,	 /* held for the sampler's life; moved to the top region */
	SPROBE_FD_CACHE = 2,	 /* held while within budget (-EDQUOT past it); top region */
	SPROBE_FD_FOREIGN = 3,	 /* created by a library we call, which keeps the number
				  * itself: top region, never re-homed (see below) */
};

/*
 * Descriptors that libraries we call open for themselves and keep: today
 * libunwind's address-check pipe, opened by the first
 * unw_create_addr_space() and kept for the process's life (the remote
 * unwinding we do never uses it). Around such a call the library brackets
 * itself with begin/end; meanwhile the agent's pipe2 wrapper, on this
 * thread only, moves what it creates to the top region and registers it
 * FOREIGN (sprobe_fd__adopt_foreign()). A close of it is refused like any
 * of ours; a dup2 onto it cannot move the number the other library
 * remembers, so the entry is given up and the program's call goes through.
 */
void sprobe_fd__foreign_begin(void);
void sprobe_fd__foreign_end(void);
/* For the wrappers: is this thread inside begin/end? */
bool sprobe_fd__foreign_active(void);
/* Move fd to the top region and register it FOREIGN; returns the number
 * to hand to the library (fd itself if it could not move). */
int sprobe_fd__adopt_foreign(int fd);

/* open(path, flags | O_CLOEXEC, mode), registered as kind. Returns a
 * handle >= 0, or -errno: -EDQUOT for a CACHE open past the budget
 * (nothing was opened: open per use instead), -ENOSPC when the registry
 * is full (transients are then opened unregistered by the callers that
 * must go on: see sprobe_fd__open_raw()). */
int sprobe_fd__open(const char *path, int flags, mode_t mode, enum sprobe_fd_kind kind);

/* The same, relative to the directory of handle dirh (openat): a path of
 * one or two components under a directory held open skips the walk from
 * the root (/proc/self/task/<tid>/<file> per thread: the walk was most of
 * the open). dirh not a live handle: -EBADF, nothing opened. */
int sprobe_fd__openat(int dirh, const char *path, int flags, enum sprobe_fd_kind kind);

/* A TRANSIENT read-only open of a file whose path someone else controls
 * (a module of the profiled program, its debug file): O_NONBLOCK and
 * O_NOCTTY, so a FIFO or a device planted there cannot block or take a
 * terminal, then refused (-EINVAL, nothing left open) unless it is a
 * regular file. Returns a handle as sprobe_fd__open(). */
int sprobe_fd__open_file(const char *path);

/* Register fd (any descriptor the library created, e.g. by pipe2) as kind,
 * moving a KEEP/CACHE one to the top region (the original number is
 * closed). On error fd is closed and -errno returned. */
int sprobe_fd__adopt(int fd, enum sprobe_fd_kind kind);

/* Register fd (a per-thread descriptor the library created itself, e.g. a
 * perf event) as CACHE, and only if it can live in the top region within
 * the budget: the program never loses a low number to it. On error fd is
 * closed and -EDQUOT returned (the budget is spent, or the soft limit is
 * small: use something that needs no descriptor), -EMFILE (the top region
 * is full: the program uses those numbers), or -errno. Probe thread only
 * (the budget check and the count do not race, as for CACHE opens). */
int sprobe_fd__adopt_cache(int fd);

/* The current number of handle h, pinned until sprobe_fd__put(h); -EBADF
 * for a bad or lost handle, and h itself when h is the -errno of a failed
 * sprobe_fd__open() (so "h = open(...); fd = get(h)" keeps the error).
 * No put is needed after an error. */
int sprobe_fd__get(int h);
void sprobe_fd__put(int h);

/* Is fd still the file h was opened on (device and inode)? 0, -ESTALE
 * when the number now names another file (a raw close(2) and a reuse:
 * the entry is then marked lost and never used again), or -errno from
 * fstat (-EBADF: closed behind our back). */
int sprobe_fd__verify(int h);

/* Close h's descriptor if it is still our file (see above) and free the
 * entry. Accepts -1. */
void sprobe_fd__close(int h);

/* In the child of a fork() (the agent's atfork handler, on the only thread
 * left): close every KEEP and CACHE descriptor inherited from the parent
 * (its data file, its task directory, its threads' /proc files: they
 * describe the parent, and the child's program never opened them) and
 * reset what the parent's other threads held (sections, guards, pins).
 * FOREIGN entries stay: the library that made them keeps using them.
 * Handles held before the fork are invalid afterwards. */
void sprobe_fd__atfork_child(void);

/* Unpin and close: the end of a transient use (get, read, done). */
static inline void sprobe_fd__done(int h)
{
	sprobe_fd__put(h);
	sprobe_fd__close(h);
}

/* Read the whole file at path (a /proc file: no size is known ahead)
 * through a transient descriptor into a malloc'd, NUL-terminated buffer
 * (*buf, owned by the caller; *len without the NUL). Returns 0 or -errno. */
int sprobe_fd__read_file(const char *path, char **buf, size_t *len);

/*
 * Allocation sections and guards (see fds.c): every allocation of a number
 * by the library (sprobe_fd__open/adopt do it themselves; a caller that
 * makes one otherwise, e.g. pipe2 then adopt, brackets both with
 * alloc_begin/end) excludes the wrappers' check-then-act, which runs
 * between guard_enter/exit. Without it a program thread closing numbers
 * it never opened could close ours between open() and its registration.
 * Sections are reentrant on their thread; a guard never waits on its own
 * thread's section. Guards are async-signal-safe (atomics, sched_yield).
 */
void sprobe_fd__alloc_begin(void);
void sprobe_fd__alloc_end(void);
void sprobe_fd__guard_enter(void);
void sprobe_fd__guard_exit(void);

/* For the agent's wrappers: is fd a number the library holds? */
bool sprobe_fd__owned(int fd);

/* For the dup2/dup3 wrappers: fd is ours and the program is about to
 * replace it. Move ours to another number and wait until no thread of
 * the library uses the old one. Returns 0 (the program may go on) or
 * -errno when no other number was free (ours is then given up: the entry
 * is marked lost and its users see -EBADF). */
int sprobe_fd__rehome(int fd);

/* For close_range/closefrom: the lowest registered number in [lo, hi],
 * or -1. */
int sprobe_fd__next_owned(unsigned lo, unsigned hi);

/* How many CACHE descriptors may be held now (0 while the soft limit is
 * below SPROBE_FD_MIN_LIMIT_FOR_CACHE). */
unsigned sprobe_fd__budget(void);

struct sprobe_fd_stats {
	uint32_t held;	      /* registered now */
	uint32_t keep, cache; /* of which long-lived */
	uint32_t lost;	      /* entries given up (rehome failed, raw close seen) */
	uint64_t rehomed;     /* dup2/dup3 onto ours, answered by moving ours */
	uint64_t refused_close; /* closes of ours answered with EBADF */
};
void sprobe_fd__stats(struct sprobe_fd_stats *out);
/* Counted by the agent's close wrappers. */
void sprobe_fd__count_refused_close(void);

#endif
