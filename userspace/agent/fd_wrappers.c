/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's descriptor wrappers: what a program does to the numbers the
 * library holds (userspace/fds.h, docs/AGENT.md "Descriptors").
 *
 *  - close(fd) of one of ours: the program never opened that number
 *    (it was ours from the moment the kernel gave it out), so without the
 *    agent the call would find nothing open: it fails with EBADF and ours
 *    stays open. This is what makes close loops at daemon start harmless.
 *    Re-homing ours instead would not help closefrom(3), which leaves no
 *    number to move to.
 *  - close_range(lo, hi, flags) and closefrom(lo): the program's range
 *    minus our numbers (one real close_range per gap). With
 *    CLOSE_RANGE_UNSHARE the calling thread gets its own descriptor table
 *    first and the library's threads keep the shared one: passed through.
 *  - dup2/dup3(old, fd) onto one of ours: ours moves to another number
 *    first (sprobe_fd__rehome()), then the program's call goes through
 *    and fd is the program's file, as it asked. With old one of ours
 *    (the program cannot hold that number): EBADF, as without the agent.
 *  - fcntl(F_DUPFD*) never replaces a number (it takes the lowest free
 *    one at or above its argument, and ours are not free), so it needs no
 *    wrapper; dup() likewise.
 *
 * What cannot be seen: raw system calls (syscall(SYS_close, fd)) and
 * libc's internal calls (fclose closes through a hidden alias, but only
 * the program's own FILEs). The writers check per batch that a number is
 * still their file (sprobe_fd__verify()), so those make the library stop,
 * never write into the program's file.
 *
 * All wrappers are async-signal-safe when the call they wrap is: atomics,
 * fcntl and the next definition resolved at load time.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "userspace/common/fds.h"

/* glibc 2.34+; declared here so older headers build too. */
int close_range(unsigned int first, unsigned int last, int flags);
void closefrom(int lowfd);

typedef int (*close_fn)(int);
typedef int (*pipe2_fn)(int[2], int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);

enum { NF_CLOSE, NF_DUP2, NF_DUP3, NF_PIPE2, NF__COUNT };
static const char *const nf_names[NF__COUNT] = { "close", "dup2", "dup3", "pipe2" };
static void *nf_slots[NF__COUNT];

/* Resolved once at load (a first close() may come from a signal handler,
 * where dlsym must not run); a racing store writes the same value. */
__attribute__((constructor)) static void fd_wrappers_init(void)
{
	for (int i = 0; i < NF__COUNT; i++)
		__atomic_store_n(&nf_slots[i], dlsym(RTLD_NEXT, nf_names[i]), __ATOMIC_RELAXED);
}

static void *next(int i)
{
	void *f = __atomic_load_n(&nf_slots[i], __ATOMIC_RELAXED);

	if (!f) {
		f = dlsym(RTLD_NEXT, nf_names[i]);
		__atomic_store_n(&nf_slots[i], f, __ATOMIC_RELAXED);
	}
	return f;
}

static int refuse(void)
{
	sprobe_fd__count_refused_close();
	errno = EBADF;
	return -1;
}

/* Check-then-act under a guard (fds.h): no library open can hand out the
 * number between the check and the call. */
int close(int fd)
{
	close_fn f = (close_fn)next(NF_CLOSE);
	int r;

	sprobe_fd__guard_enter();
	if (sprobe_fd__owned(fd)) {
		sprobe_fd__guard_exit();
		return refuse();
	}
	r = f ? f(fd) : (int)syscall(SYS_close, fd);
	sprobe_fd__guard_exit();
	return r;
}

static int sys_close_range(unsigned lo, unsigned hi, int flags)
{
	return (int)syscall(SYS_close_range, lo, hi, flags);
}

/* close_range over [lo, hi] without our numbers. */
static int close_range_around(unsigned lo, unsigned hi, int flags)
{
	while (lo <= hi) {
		int own = sprobe_fd__next_owned(lo, hi);
		unsigned end = own < 0 ? hi : (unsigned)own - 1;

		if (own != (int)lo && end >= lo) {
			int r = sys_close_range(lo, end, flags);

			if (r < 0)
				return r;
		}
		if (own < 0 || (unsigned)own == hi)
			break;
		lo = (unsigned)own + 1;
	}
	return 0;
}

int close_range(unsigned int first, unsigned int last, int flags)
{
	int r;

	sprobe_fd__guard_enter();
	if (first > last || (flags & CLOSE_RANGE_UNSHARE) || sprobe_fd__next_owned(first, last) < 0)
		r = sys_close_range(first, last, flags);
	else
		r = close_range_around(first, last, flags);
	sprobe_fd__guard_exit();
	return r;
}

void closefrom(int lowfd)
{
	unsigned lo = lowfd < 0 ? 0 : (unsigned)lowfd;

	sprobe_fd__guard_enter();
	if (close_range_around(lo, ~0u, 0) != 0) {
		/* No close_range (before Linux 5.9): every number up to the
		 * limit, as glibc's own fallback does through /proc/self/fd. */
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = lo; fd < max; fd++)
			if (!sprobe_fd__owned((int)fd))
				syscall(SYS_close, (int)fd);
	}
	sprobe_fd__guard_exit();
}

/* The program replaces fd: move ours away first (outside any guard: the
 * move allocates a number in a section of its own). If ours could not
 * move, it is given up (the library stops using it) and the program's
 * call still goes through. True when fd was ours: if the program's call
 * then fails, fd still holds our old reference, which nobody uses any
 * more and must not stay open in the program's table (undo_room()). */
static bool make_room(int fd)
{
	if (!sprobe_fd__owned(fd))
		return false;
	(void)sprobe_fd__rehome(fd);
	return true;
}

/* The real dup2/dup3 under a guard, once make_room() ran: if a library
 * open got newfd meanwhile (newfd was free), move that one too. */
static int guarded_dup(dup3_fn f3, dup2_fn f2, int oldfd, int newfd, int flags, bool *moved)
{
	int r;

	for (;;) {
		sprobe_fd__guard_enter();
		if (sprobe_fd__owned(oldfd)) {
			sprobe_fd__guard_exit();
			return refuse();
		}
		if (!sprobe_fd__owned(newfd))
			break;
		sprobe_fd__guard_exit();
		*moved = make_room(newfd) || *moved;
	}
	r = f3 ? f3(oldfd, newfd, flags) : f2(oldfd, newfd);
	sprobe_fd__guard_exit();
	return r;
}

static int undo_room(int r, bool moved, int fd)
{
	if (r < 0 && moved) {
		int e = errno;

		syscall(SYS_close, fd);
		errno = e;
	}
	return r;
}

int dup2(int oldfd, int newfd)
{
	dup2_fn f = (dup2_fn)next(NF_DUP2);

	bool moved;

	if (sprobe_fd__owned(oldfd))
		return refuse();
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (oldfd == newfd) /* only checks oldfd: not a replacement */
		return f(oldfd, newfd);
	moved = make_room(newfd);
	return undo_room(guarded_dup(NULL, f, oldfd, newfd, 0, &moved), moved, newfd);
}

int dup3(int oldfd, int newfd, int flags)
{
	dup3_fn f = (dup3_fn)next(NF_DUP3);

	bool moved;

	if (sprobe_fd__owned(oldfd))
		return refuse();
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (oldfd == newfd) /* EINVAL from dup3 */
		return f(oldfd, newfd, flags);
	moved = make_room(newfd);
	return undo_room(guarded_dup(f, NULL, oldfd, newfd, flags, &moved), moved, newfd);
}

/* pipe2 is wrapped for the libraries the library calls, which open pipes
 * for themselves (libunwind's address-check pipe, see fds.h "FOREIGN"):
 * only on a thread inside sprobe_fd__foreign_begin/end; every other call
 * is the program's and passes through untouched. */
int pipe2(int pipefd[2], int flags)
{
	pipe2_fn f = (pipe2_fn)next(NF_PIPE2);
	int r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(pipefd, flags);
	if (r == 0 && sprobe_fd__foreign_active()) {
		pipefd[0] = sprobe_fd__adopt_foreign(pipefd[0]);
		pipefd[1] = sprobe_fd__adopt_foreign(pipefd[1]);
	}
	return r;
}
