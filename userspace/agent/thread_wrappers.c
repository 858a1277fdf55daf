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
 * the profile. The wrapper starts the thread in a trampoline that, when
 * the inherited mask blocks the capture signal *as part of blocking
 * everything* (every real-time signal: what sigfillset gives), unblocks
 * the capture signal and only it, then runs the program's start routine.
 *
 * Why this is safe for the program: the capture signal is queued to one
 * thread by tid (rt_tgsigqueueinfo), never to the process, so unblocking
 * it changes no routing of the program's own signals; the handler only
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
 * wrappers in agent.c already yield the signal to it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include "userspace/agent/agent.h"

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);

static pthread_create_fn next_create;
static sigmask_fn next_sigmask;

__attribute__((constructor)) static void thread_wrappers_init(void)
{
	next_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
	next_sigmask = (sigmask_fn)dlsym(RTLD_NEXT, "pthread_sigmask");
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
	if (!sig)
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
