/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Captures cause no EINTR in the program (docs/AGENT.md "Wait
 * calls", docs/LIMITATIONS.md "EINTR").
 *
 * The capture handler is installed with SA_RESTART (backends/linux/capturer.c
 * try_install), so the kernel restarts read, write, recv, accept, wait,
 * flock and the like by itself. The calls wrapped here are the libc entry
 * points the kernel fails with EINTR after *any* handler, whatever
 * SA_RESTART says (signal(7), "Interruption of system calls"): when a
 * capture lands while one waits, it fails as if the program had been
 * signalled.
 *
 * Each wrapper reads this thread's count of program-handler runs
 * (handler_table.c), calls the next definition, and when that fails with
 * EINTR while the count did not move, the handler that ran was the capture
 * handler (Linux returns EINTR only when a handler ran on the thread): it
 * calls again, so the program sees the wait it asked for.
 *   - relative timeouts resume with the time left on CLOCK_MONOTONIC (the
 *     clock the kernel measures them on): an entry that asked for 100 ms
 *     returns after ~100 ms in total, never later by a full restart. A
 *     deadline already passed resumes with a zero timeout: one last
 *     non-blocking check, which also gives the call's own timed-out result
 *     (0, EAGAIN, cleared fd sets) without the wrapper making it up;
 *   - absolute deadlines (sem_timedwait, TIMER_ABSTIME) resume as given;
 *   - infinite waits resume as they were;
 *   - nanosleep and clock_nanosleep resume with the remaining time the
 *     kernel wrote back (the program's rem, or ours when it passed NULL);
 *   - sleep and usleep are wrapped at the outer call: glibc implements
 *     them with its internal __nanosleep, which no interposer sees.
 * The program's own handlers still interrupt: the count moved.
 *
 * Cost when not interrupted: one thread-pointer-relative load, the call
 * through a pointer resolved at load, one compare of the result; relative
 * timeouts > 0 also read CLOCK_MONOTONIC (vDSO) before the call, since the
 * time left cannot be known afterwards (docs/PERFORMANCE.md "Wait
 * wrappers"). Everything else is on the EINTR path, out of line.
 *
 * Resumes only while the agent samples in this process
 * (sprobe_agent__capture_signo): otherwise no capture can have caused the
 * EINTR, and a handler the table cannot see (installed with a raw
 * rt_sigaction) must keep interrupting. STACKPROBE_RESUME_WAITS=0 turns
 * resuming and the trampolines off.
 *
 * Left alone: errno on a success after a resume may read EINTR (POSIX
 * leaves errno unspecified on success; sleep() restores it, as glibc's
 * does).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <time.h>
#include <unistd.h>

#include "userspace/agent/agent_internal.h"

/* Exported by glibc (the _FORTIFY_SOURCE versions of poll and ppoll a
 * fortified program calls instead), declared only under fortify. */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
		size_t fdslen);

/* ---- the next definitions -------------------------------------------------- */

enum {
	W_POLL, W_POLL_CHK, W_PPOLL, W_PPOLL_CHK, W_SELECT, W_PSELECT, W_EPOLL_WAIT,
	W_EPOLL_PWAIT, W_EPOLL_PWAIT2, W_NANOSLEEP, W_CLOCK_NANOSLEEP, W_USLEEP, W_SLEEP,
	W_PAUSE, W_SIGSUSPEND, W_SEM_WAIT, W_SEM_TIMEDWAIT, W_SEM_CLOCKWAIT, W_SIGTIMEDWAIT,
	W_SIGWAITINFO, W_MSGRCV, W_MSGSND, W_SEMOP, W_SEMTIMEDOP, W__COUNT
};
static const char *const next_names[W__COUNT] = {
	"poll", "__poll_chk", "ppoll", "__ppoll_chk", "select", "pselect", "epoll_wait",
	"epoll_pwait", "epoll_pwait2", "nanosleep", "clock_nanosleep", "usleep", "sleep",
	"pause", "sigsuspend", "sem_wait", "sem_timedwait", "sem_clockwait", "sigtimedwait",
	"sigwaitinfo", "msgrcv", "msgsnd", "semop", "semtimedop",
};
static void *next_fns[W__COUNT];

/* Resolved at load, so the fast path is one load; again on a first call
 * made before this constructor ran (another library's constructor). */
__attribute__((constructor)) static void wait_wrappers_init(void)
{
	for (int i = 0; i < W__COUNT; i++)
		if (!__atomic_load_n(&next_fns[i], __ATOMIC_RELAXED))
			__atomic_store_n(&next_fns[i], dlsym(RTLD_NEXT, next_names[i]),
					 __ATOMIC_RELAXED);
}

__attribute__((noinline, cold)) static void *resolve(int i)
{
	wait_wrappers_init();
	return __atomic_load_n(&next_fns[i], __ATOMIC_RELAXED);
}

static inline void *next_fn(int i)
{
	void *f = __atomic_load_n(&next_fns[i], __ATOMIC_RELAXED);
	return __builtin_expect(f != NULL, 1) ? f : resolve(i);
}

#define NEXT(type, idx) ((type)next_fn(idx))

/* A libc without the function (sem_clockwait before glibc 2.30): the
 * program could not have linked against it either; say so as a libc
 * would. */
#define NEXT_OR_ENOSYS(var, type, idx, fail) \
	type var = NEXT(type, idx);          \
	if (!var) {                          \
		errno = ENOSYS;              \
		return fail;                 \
	}

/* ---- was it the capture? ------------------------------------------------- */

static inline unsigned long handler_runs(void)
{
	return __atomic_load_n(&sprobe_agent__handler_runs, __ATOMIC_RELAXED);
}

/* The call failed with EINTR (err) while no handler of the program ran on
 * this thread since runs was read: the capture handler interrupted it. */
__attribute__((noinline)) static bool by_capture(int err, unsigned long runs)
{
	return err == EINTR && handler_runs() == runs && sprobe_agent__resume_waits() &&
	       sprobe_agent__capture_signo() != 0;
}

#define INTERRUPTED(r, runs) __builtin_expect((r) < 0 && by_capture(errno, runs), 0)

/* ---- time ------------------------------------------------------------------ */

#define NS 1000000000LL
/* Far enough to be "never" and to leave room for sums. */
#define FAR (INT64_MAX / 4)

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * NS + t.tv_nsec;
}

static int64_t ts_ns(const struct timespec *t)
{
	if (t->tv_sec >= FAR / NS)
		return FAR;
	return (int64_t)t->tv_sec * NS + t->tv_nsec;
}

/* The deadline of a relative timeout of rel ns: 0 for a zero timeout (no
 * clock read; the time left is then 0, as it should be). */
static inline int64_t deadline_of(int64_t rel)
{
	return rel > 0 ? now_ns() + rel : 0;
}

static struct timespec time_left(int64_t deadline)
{
	int64_t l = deadline >= FAR ? FAR : deadline - now_ns();
	if (l < 0)
		l = 0;
	return (struct timespec){ .tv_sec = l / NS, .tv_nsec = l % NS };
}

/* ---- poll, ppoll ------------------------------------------------------------- */

typedef int (*poll_fn)(struct pollfd *, nfds_t, int);
typedef int (*poll_chk_fn)(struct pollfd *, nfds_t, int, size_t);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*ppoll_chk_fn)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *,
			    size_t);

/* poll resumes as ppoll: the same call with a nanosecond timeout (and no
 * mask), so the time left is not rounded to milliseconds at every resume.
 * deadline: -1 for an infinite wait. */
__attribute__((noinline)) static int ppoll_resume(struct pollfd *fds, nfds_t n, int64_t deadline,
						  const sigset_t *mask, unsigned long runs)
{
	ppoll_fn f = NEXT(ppoll_fn, W_PPOLL);
	int r;
	do {
		struct timespec left = time_left(deadline);
		r = f(fds, n, deadline < 0 ? NULL : &left, mask);
	} while (INTERRUPTED(r, runs));
	return r;
}

static inline int64_t ms_deadline(int timeout)
{
	return timeout < 0 ? -1 : deadline_of((int64_t)timeout * 1000000);
}

static inline int64_t ts_deadline(const struct timespec *ts)
{
	return ts ? deadline_of(ts_ns(ts)) : -1;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ms_deadline(timeout);
	NEXT_OR_ENOSYS(f, poll_fn, W_POLL, -1);
	int r = f(fds, n, timeout);
	return INTERRUPTED(r, runs) ? ppoll_resume(fds, n, deadline, NULL, runs) : r;
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ms_deadline(timeout);
	NEXT_OR_ENOSYS(f, poll_chk_fn, W_POLL_CHK, -1);
	/* The first call checked fdslen (it aborts on an overflow). */
	int r = f(fds, n, timeout, fdslen);
	return INTERRUPTED(r, runs) ? ppoll_resume(fds, n, deadline, NULL, runs) : r;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, ppoll_fn, W_PPOLL, -1);
	int r = f(fds, n, ts, mask);
	return INTERRUPTED(r, runs) ? ppoll_resume(fds, n, deadline, mask, runs) : r;
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
		size_t fdslen)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, ppoll_chk_fn, W_PPOLL_CHK, -1);
	int r = f(fds, n, ts, mask, fdslen);
	return INTERRUPTED(r, runs) ? ppoll_resume(fds, n, deadline, mask, runs) : r;
}

/* ---- select, pselect ----------------------------------------------------------- */
/*
 * The fd sets need no copy: a select that fails leaves them as they were
 * (POSIX: "On failure, the objects pointed to by the readfds, writefds,
 * and errorfds arguments shall not be modified"; Linux's core_sys_select
 * writes them back only on success), so the resume passes them as the
 * program filled them. The timeval: Linux writes the time not slept into
 * it on return; the resume writes the time left into it, and the last
 * call leaves Linux's value there.
 */
typedef int (*select_fn)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*pselect_fn)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
			  const sigset_t *);

__attribute__((noinline)) static int select_resume(select_fn f, int n, fd_set *r, fd_set *w,
						   fd_set *e, struct timeval *tv, int64_t deadline,
						   unsigned long runs)
{
	int ret;
	do {
		if (tv) {
			struct timespec left = time_left(deadline);
			/* Microseconds rounded up: never back before the deadline. */
			long us = (left.tv_nsec + 999) / 1000;
			tv->tv_sec = left.tv_sec + us / 1000000;
			tv->tv_usec = us % 1000000;
		}
		ret = f(n, r, w, e, tv);
	} while (INTERRUPTED(ret, runs));
	return ret;
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	unsigned long runs = handler_runs();
	int64_t deadline =
		tv ? deadline_of(tv->tv_sec >= FAR / NS ? FAR
						       : (int64_t)tv->tv_sec * NS + tv->tv_usec * 1000)
		   : -1;
	NEXT_OR_ENOSYS(f, select_fn, W_SELECT, -1);
	int ret = f(n, r, w, e, tv);
	return INTERRUPTED(ret, runs) ? select_resume(f, n, r, w, e, tv, deadline, runs) : ret;
}

__attribute__((noinline)) static int pselect_resume(pselect_fn f, int n, fd_set *r, fd_set *w,
						    fd_set *e, int64_t deadline,
						    const sigset_t *mask, unsigned long runs)
{
	int ret;
	do {
		struct timespec left = time_left(deadline);
		ret = f(n, r, w, e, deadline < 0 ? NULL : &left, mask);
	} while (INTERRUPTED(ret, runs));
	return ret;
}

int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
	    const sigset_t *mask)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, pselect_fn, W_PSELECT, -1);
	int ret = f(n, r, w, e, ts, mask);
	return INTERRUPTED(ret, runs) ? pselect_resume(f, n, r, w, e, deadline, mask, runs) : ret;
}

/* ---- epoll ----------------------------------------------------------------------- */

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int, const struct timespec *,
			       const sigset_t *);

/* Set when the kernel has no epoll_pwait2 (before 5.11). */
static int no_pwait2;

/* epoll_wait and epoll_pwait resume as epoll_pwait2 (nanoseconds, like
 * poll as ppoll); on a kernel without it, as epoll_pwait with the time
 * left rounded up to a millisecond. */
__attribute__((noinline)) static int epoll_resume(int ep, struct epoll_event *ev, int max,
						  int64_t deadline, const sigset_t *mask,
						  unsigned long runs)
{
	epoll_pwait2_fn f2 = NEXT(epoll_pwait2_fn, W_EPOLL_PWAIT2);
	epoll_pwait_fn f = NEXT(epoll_pwait_fn, W_EPOLL_PWAIT);
	int r;
	do {
		struct timespec left = time_left(deadline);
		if (f2 && !__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
			r = f2(ep, ev, max, deadline < 0 ? NULL : &left, mask);
			if (r >= 0 || errno != ENOSYS)
				continue;
			__atomic_store_n(&no_pwait2, 1, __ATOMIC_RELAXED);
		}
		int64_t ms = (ts_ns(&left) + 999999) / 1000000;
		r = f(ep, ev, max, deadline < 0 ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms, mask);
	} while (INTERRUPTED(r, runs));
	return r;
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ms_deadline(timeout);
	NEXT_OR_ENOSYS(f, epoll_wait_fn, W_EPOLL_WAIT, -1);
	int r = f(ep, ev, max, timeout);
	return INTERRUPTED(r, runs) ? epoll_resume(ep, ev, max, deadline, NULL, runs) : r;
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ms_deadline(timeout);
	NEXT_OR_ENOSYS(f, epoll_pwait_fn, W_EPOLL_PWAIT, -1);
	int r = f(ep, ev, max, timeout, mask);
	return INTERRUPTED(r, runs) ? epoll_resume(ep, ev, max, deadline, mask, runs) : r;
}

int epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *ts,
		 const sigset_t *mask)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, epoll_pwait2_fn, W_EPOLL_PWAIT2, -1);
	int r = f(ep, ev, max, ts, mask);
	return INTERRUPTED(r, runs) ? epoll_resume(ep, ev, max, deadline, mask, runs) : r;
}

/* ---- sleeping ------------------------------------------------------------------- */

typedef int (*nanosleep_fn)(const struct timespec *, struct timespec *);
typedef int (*usleep_fn)(useconds_t);
typedef unsigned (*sleep_fn)(unsigned);
typedef int (*pause_fn)(void);
typedef int (*sigsuspend_fn)(const sigset_t *);

typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

/*
 * The kernel wrote the time not slept into *rem. The rest is slept until
 * an absolute deadline on the same clock (now + *rem, taken once): later
 * captures then cost nothing, where resuming with each new rem would lose
 * the time from each interruption to the next call (a usleep(3 s) at
 * 999 Hz: ~3000 of them). Returns 0 or an error number; an EINTR of the
 * program's gets *rem filled as the kernel would.
 */
__attribute__((noinline)) static int sleep_rest(clockid_t clk, struct timespec *rem,
						unsigned long runs)
{
	clock_nanosleep_fn f = NEXT(clock_nanosleep_fn, W_CLOCK_NANOSLEEP);
	struct timespec now, until;
	int err;

	if (!f || clock_gettime(clk, &now) != 0)
		return EINTR; /* cannot resume: the program sees the EINTR */
	int64_t dl = ts_ns(&now) + ts_ns(rem);
	until = (struct timespec){ .tv_sec = dl / NS, .tv_nsec = dl % NS };
	do
		err = f(clk, TIMER_ABSTIME, &until, NULL);
	while (err == EINTR && by_capture(err, runs));
	if (err == EINTR && clock_gettime(clk, &now) == 0) {
		int64_t l = dl - ts_ns(&now);
		l = l < 0 ? 0 : l;
		*rem = (struct timespec){ .tv_sec = l / NS, .tv_nsec = l % NS };
	}
	return err;
}

/* nanosleep measures on CLOCK_MONOTONIC (Linux). */
static int nanosleep_resume(struct timespec *rem, unsigned long runs)
{
	int err = sleep_rest(CLOCK_MONOTONIC, rem, runs);
	if (!err)
		return 0;
	errno = err;
	return -1;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
	unsigned long runs = handler_runs();
	struct timespec mine;
	struct timespec *r = rem ? rem : &mine;
	NEXT_OR_ENOSYS(f, nanosleep_fn, W_NANOSLEEP, -1);
	int ret = f(req, r);
	return INTERRUPTED(ret, runs) ? nanosleep_resume(r, runs) : ret;
}

/* clock_nanosleep returns the error number (errno untouched).
 * TIMER_ABSTIME: the deadline as given; relative: the rest, as nanosleep. */
__attribute__((noinline)) static int clock_nanosleep_resume(clock_nanosleep_fn f, clockid_t clk,
							    int flags, const struct timespec *req,
							    struct timespec *rem,
							    unsigned long runs)
{
	int err;
	if (!(flags & TIMER_ABSTIME))
		return sleep_rest(clk, rem, runs);
	do
		err = f(clk, flags, req, rem);
	while (err == EINTR && by_capture(err, runs));
	return err;
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	unsigned long runs = handler_runs();
	struct timespec mine;
	struct timespec *r = rem ? rem : &mine;
	clock_nanosleep_fn f = NEXT(clock_nanosleep_fn, W_CLOCK_NANOSLEEP);
	if (!f)
		return ENOSYS;
	int err = f(clk, flags, req, r);
	if (__builtin_expect(err == EINTR, 0) && by_capture(err, runs))
		return clock_nanosleep_resume(f, clk, flags, req, r, runs);
	return err;
}

/* glibc: usleep(us) is __nanosleep(us, NULL); the same through the next
 * nanosleep, resumed like nanosleep. */
int usleep(useconds_t us)
{
	unsigned long runs = handler_runs();
	if (!sprobe_agent__resume_waits()) {
		NEXT_OR_ENOSYS(u, usleep_fn, W_USLEEP, -1);
		return u(us);
	}
	NEXT_OR_ENOSYS(f, nanosleep_fn, W_NANOSLEEP, -1);
	struct timespec req = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
	struct timespec rem;
	int ret = f(&req, &rem);
	return INTERRUPTED(ret, runs) ? nanosleep_resume(&rem, runs) : ret;
}

/* glibc: sleep(s) is __nanosleep(s, &rem), errno kept on success; when
 * interrupted it returns the whole seconds not slept (truncated, as glibc
 * 2.36 does: 3.7 s left returns 3). */
unsigned sleep(unsigned s)
{
	unsigned long runs = handler_runs();
	if (!sprobe_agent__resume_waits()) {
		sleep_fn sl = NEXT(sleep_fn, W_SLEEP);
		return sl ? sl(s) : s;
	}
	nanosleep_fn f = NEXT(nanosleep_fn, W_NANOSLEEP);
	if (!f)
		return s;
	int saved = errno;
	struct timespec ts = { .tv_sec = s, .tv_nsec = 0 };
	int ret = f(&ts, &ts);
	if (INTERRUPTED(ret, runs))
		ret = nanosleep_resume(&ts, runs);
	if (ret < 0)
		return (unsigned)ts.tv_sec;
	errno = saved;
	return 0;
}

/* pause and sigsuspend return when a handler ran: only a program's counts. */
int pause(void)
{
	unsigned long runs = handler_runs();
	NEXT_OR_ENOSYS(f, pause_fn, W_PAUSE, -1);
	int r;
	do
		r = f();
	while (INTERRUPTED(r, runs));
	return r;
}

int sigsuspend(const sigset_t *mask)
{
	unsigned long runs = handler_runs();
	NEXT_OR_ENOSYS(f, sigsuspend_fn, W_SIGSUSPEND, -1);
	int r;
	do
		r = f(mask);
	while (INTERRUPTED(r, runs));
	return r;
}

/* ---- semaphores, signals, System V IPC ---------------------------------------- */

typedef int (*sem_wait_fn)(sem_t *);
typedef int (*sem_timedwait_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*sigtimedwait_fn)(const sigset_t *, siginfo_t *, const struct timespec *);
typedef int (*sigwaitinfo_fn)(const sigset_t *, siginfo_t *);
typedef ssize_t (*msgrcv_fn)(int, void *, size_t, long, int);
typedef int (*msgsnd_fn)(int, const void *, size_t, int);
typedef int (*semop_fn)(int, struct sembuf *, size_t);
typedef int (*semtimedop_fn)(int, struct sembuf *, size_t, const struct timespec *);

/* Calls without a relative timeout: resume with the same arguments. */
#define RESUME_AS_GIVEN(ret_t, call)               \
	unsigned long runs = handler_runs();       \
	ret_t r;                                   \
	do                                         \
		r = (call);                        \
	while (INTERRUPTED(r, runs));              \
	return r

int sem_wait(sem_t *sem)
{
	NEXT_OR_ENOSYS(f, sem_wait_fn, W_SEM_WAIT, -1);
	RESUME_AS_GIVEN(int, f(sem));
}

int sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
	NEXT_OR_ENOSYS(f, sem_timedwait_fn, W_SEM_TIMEDWAIT, -1);
	RESUME_AS_GIVEN(int, f(sem, abstime));
}

int sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abstime)
{
	NEXT_OR_ENOSYS(f, sem_clockwait_fn, W_SEM_CLOCKWAIT, -1);
	RESUME_AS_GIVEN(int, f(sem, clk, abstime));
}

int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	NEXT_OR_ENOSYS(f, sigwaitinfo_fn, W_SIGWAITINFO, -1);
	RESUME_AS_GIVEN(int, f(set, info));
}

ssize_t msgrcv(int id, void *msg, size_t sz, long type, int flags)
{
	NEXT_OR_ENOSYS(f, msgrcv_fn, W_MSGRCV, -1);
	RESUME_AS_GIVEN(ssize_t, f(id, msg, sz, type, flags));
}

int msgsnd(int id, const void *msg, size_t sz, int flags)
{
	NEXT_OR_ENOSYS(f, msgsnd_fn, W_MSGSND, -1);
	RESUME_AS_GIVEN(int, f(id, msg, sz, flags));
}

int semop(int id, struct sembuf *ops, size_t n)
{
	NEXT_OR_ENOSYS(f, semop_fn, W_SEMOP, -1);
	RESUME_AS_GIVEN(int, f(id, ops, n));
}

int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, sigtimedwait_fn, W_SIGTIMEDWAIT, -1);
	int r = f(set, info, ts);
	while (INTERRUPTED(r, runs)) {
		struct timespec left = time_left(deadline);
		r = f(set, info, deadline < 0 ? NULL : &left);
	}
	return r;
}

int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *ts)
{
	unsigned long runs = handler_runs();
	int64_t deadline = ts_deadline(ts);
	NEXT_OR_ENOSYS(f, semtimedop_fn, W_SEMTIMEDOP, -1);
	int r = f(id, ops, n, ts);
	while (INTERRUPTED(r, runs)) {
		struct timespec left = time_left(deadline);
		r = f(id, ops, n, deadline < 0 ? NULL : &left);
	}
	return r;
}
