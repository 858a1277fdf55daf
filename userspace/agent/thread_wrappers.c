/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's pthread_create wrapper: threads created with every signal
 * blocked can still be sampled (docs/AGENT.md "Threads that block every
 * signal").
 *
 * Programs and runtimes (xz, GLib, thread pools, many C++ runtimes) block
 * every signal around pthread_create so that the new thread inherits a
 * full mask and process-directed signals go to a thread that wants them.
 * Such a thread can never take the capture signal: every capture dropped
 * it as "blocked", and a worker that used all the CPU was missing from
 * the profile. When the mask the new thread will start with blocks the
 * capture signal *as part of blocking everything* (every real-time
 * signal: what sigfillset gives), the wrapper makes it start with the
 * capture signal, and only it, unblocked:
 *  - the mask inherited from the creating thread (the common case): the
 *    wrapper unblocks the capture signal in the creating thread around the
 *    real pthread_create and restores the mask after it. glibc saves the
 *    caller's mask for the child before it blocks everything for the
 *    clone, so the child starts without the capture signal blocked, with
 *    no frame of ours on its stack. A capture signal pending on the
 *    creating thread is delivered in that window: a stale one finds no
 *    armed slot and returns (backends/linux/handler.c);
 *  - a mask given in the attributes (pthread_attr_setsigmask_np): the
 *    attributes are the program's and const, so the thread starts in a
 *    trampoline, stackprobe_thread_start, that unblocks the capture signal
 *    and runs the program's routine (one frame of ours under it).
 * Every other thread is created exactly as the program asked.
 *
 * Why this is safe for the program: the capture signal is queued to one
 * thread by tid (rt_tgsigqueueinfo), never to the process, so unblocking
 * it changes no routing of the program's own signals (unless the program
 * takes the capture signal too and sends it to the process: then such a
 * thread may take it, docs/LIMITATIONS.md); the handler only
 * copies registers and stack and returns, restoring errno; the mask the
 * program set stays otherwise as it was, and pthread_sigmask read-back
 * shows it (with the capture signal unblocked, which is the one visible
 * difference). The risk is the one of any signal: a blocking call in that
 * thread can return EINTR when a capture lands while it waits; zero-pause
 * (threads blocked in the kernel are read without a signal) keeps that
 * rare, and docs/LIMITATIONS.md says what remains.
 *
 * A mask that blocks the capture signal but not every real-time signal is
 * a program that wants that signal itself: left alone (the sigprocmask
 * wrappers in signal_wrappers.c already yield the signal to it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include "userspace/agent/agent_internal.h"

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);

typedef int (*attr_getmask_fn)(const pthread_attr_t *, sigset_t *);

static pthread_create_fn next_create;
static sigmask_fn next_sigmask;
static attr_getmask_fn attr_getmask; /* glibc 2.32+; NULL before */

__attribute__((constructor)) static void thread_wrappers_init(void)
{
	next_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
	next_sigmask = (sigmask_fn)dlsym(RTLD_NEXT, "pthread_sigmask");
	attr_getmask = (attr_getmask_fn)dlsym(RTLD_DEFAULT, "pthread_attr_getsigmask_np");
}

struct start {
	void *(*fn)(void *);
	void *arg;
	int signo;
};

/* Does mask block every real-time signal (the "block everything" idiom)? */
static bool blocks_everything(const sigset_t *mask)
{
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		if (sigismember(mask, s) != 1)
			return false;
	return true;
}

/* The thread's first frame: fix the mask, then the program's routine. Its
 * name is what a stack shows under the program's start routine. */
__attribute__((noinline)) static void *stackprobe_thread_start(void *p)
{
	struct start st = *(struct start *)p;
	sigset_t cur, one;

	free(p);
	if (next_sigmask && next_sigmask(SIG_SETMASK, NULL, &cur) == 0 &&
	    sigismember(&cur, st.signo) == 1 && blocks_everything(&cur)) {
		sigemptyset(&one);
		sigaddset(&one, st.signo);
		next_sigmask(SIG_UNBLOCK, &one, NULL);
	}
	return st.fn(st.arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	pthread_create_fn f = next_create;
	int sig = sprobe_agent__capture_signo();
	struct start *st;
	int err;

	if (!f) {
		f = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
		if (!f)
			return ENOSYS;
	}
	if (!sig || !next_sigmask)
		return f(thread, attr, fn, arg);
	sigset_t am, cur, one;
	/* 0: attr carries a mask; PTHREAD_ATTR_NO_SIGMASK_NP (-1): none. */
	bool attr_mask = attr && attr_getmask && attr_getmask(attr, &am) == 0;

	if (!attr_mask) {
		if (next_sigmask(SIG_SETMASK, NULL, &cur) != 0 || sigismember(&cur, sig) != 1 ||
		    !blocks_everything(&cur))
			return f(thread, attr, fn, arg);
		sigemptyset(&one);
		sigaddset(&one, sig);
		next_sigmask(SIG_UNBLOCK, &one, NULL);
		err = f(thread, attr, fn, arg);
		next_sigmask(SIG_SETMASK, &cur, NULL);
		return err;
	}
	if (sigismember(&am, sig) != 1 || !blocks_everything(&am))
		return f(thread, attr, fn, arg);
	st = malloc(sizeof(*st));
	if (!st) /* the program's thread matters more than its sampling */
		return f(thread, attr, fn, arg);
	st->fn = fn;
	st->arg = arg;
	st->signo = sig;
	err = f(thread, attr, stackprobe_thread_start, st);
	if (err)
		free(st);
	return err;
}
