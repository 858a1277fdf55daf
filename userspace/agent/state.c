/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's state and configuration (userspace/agent/): what the
 * constructor read from the environment, the one sampler of this process
 * image, and the channels for messages (DIR/events or stderr). Every
 * other file of the agent reads it; this file calls none of them, so the
 * wrappers never call back into the file that orchestrates (agent.c).
 *
 * Also here, because every path that ends a sampler needs them: stopping
 * this image's sampler (exit, exec, _exit, the capture signal taken) and
 * giving up the inert copy a fork child inherits.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>

#include "userspace/agent/agent_internal.h"
#include "userspace/common/clock.h"
#include "userspace/common/fds.h"

struct sprobe_agent_state sprobe_ag = {
	.inherit = true,
	.freq = 99,
	.od_lock = PTHREAD_MUTEX_INITIALIZER,
};

const char *sprobe_agent__getenv(const char *name)
{
	size_t n = strlen(name);

	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

typedef int (*setenv_fn)(const char *, const char *, int);
typedef int (*unsetenv_fn)(const char *);

int sprobe_agent__setenv(const char *name, const char *value)
{
	setenv_fn f = (setenv_fn)dlsym(RTLD_NEXT, "setenv");

	return f ? f(name, value, 1) : -1;
}

int sprobe_agent__unsetenv(const char *name)
{
	unsetenv_fn f = (unsetenv_fn)dlsym(RTLD_NEXT, "unsetenv");

	return f ? f(name) : -1;
}

/* ---- events ----------------------------------------------------------- */

void sprobe_agent__event(const char *line, size_t len)
{
	const char *dir = sprobe_agent__dir();
	char path[PATH_MAX];
	int saved = errno;

	if (!dir || !len || (size_t)snprintf(path, sizeof(path), "%s/events", dir) >= sizeof(path))
		return;
	int h = sprobe_fd__open(path, O_WRONLY | O_APPEND | O_CREAT, 0600, SPROBE_FD_TRANSIENT);
	int fd = sprobe_fd__get(h);

	if (fd >= 0) {
		ssize_t n = write(fd, line, len);

		(void)n;
		sprobe_fd__put(h);
	}
	sprobe_fd__close(h);
	errno = saved;
}

/* A message for the person recording. Under `record` (sprobe_ag.dir set) it
 * goes to DIR/events, and record prints it on its own stderr: the
 * program's descriptor 2 is the program's (a daemon points it at its log
 * file), and a guest writes nothing there. Run by hand, stderr is the
 * only channel there is (STACKPROBE_QUIET=1 silences it). */
void sprobe_agent__say(const char *prefix, const char *text)
{
	if (sprobe_ag.quiet)
		return;
	if (sprobe_ag.dir) {
		char line[1024];
		int n = snprintf(line, sizeof(line), "msg %d %s%s\n", (int)getpid(), prefix, text);

		if (n > 0 && (size_t)n < sizeof(line)) {
			for (int i = 4; i < n - 1; i++)
				if (line[i] == '\n')
					line[i] = ' '; /* one note, one line */
			sprobe_agent__event(line, (size_t)n);
			return;
		}
	}
	fprintf(stderr, "%s%s\n", prefix, text);
}

void sprobe_agent__msg(const char *fmt, const char *a, const char *b)
{
	char text[900];

	if (sprobe_ag.quiet)
		return;
	snprintf(text, sizeof(text), fmt, a, b);
	sprobe_agent__say("stackprobe agent: ", text);
}

/* The sampler's notices (sprobe_sampler_opts.notice): facts about what
 * it cannot sample, one line each, from the probe thread. */
void sprobe_agent__notice(void *ctx, const char *line)
{
	(void)ctx;
	sprobe_agent__say("stackprobe: ", line);
}

#define SPROBE_STR2(x) #x
#define SPROBE_STR(x) SPROBE_STR2(x)

void sprobe_agent__stop(void)
{
	/* A forked child inherits sprobe_ag.sampler but not the probe thread. */
	if (!sprobe_ag.sampler || getpid() != sprobe_ag.pid)
		return;
	if (sprobe_ag.control)
		pthread_mutex_lock(&sprobe_ag.od_lock);
	/* Acq_rel; pairs with itself in sprobe_agent__ondemand_stop(). */
	struct sprobe_sampler *s = __atomic_exchange_n(&sprobe_ag.sampler, NULL, __ATOMIC_ACQ_REL);
	int err = s ? sprobe_sampler__stop(s) : 0;
	if (sprobe_ag.control)
		pthread_mutex_unlock(&sprobe_ag.od_lock);
	if (err == -ESTALE || err == -EBADF)
		sprobe_agent__msg("the program closed or replaced the data file's descriptor behind the "
				  "agent's back (a raw close or dup2 system call, or dup2 over every free "
				  "number): recording stopped there, and nothing was written to the file "
				  "that has that number now%s%s", "", "");
	else if (err == -ETIMEDOUT)
		sprobe_agent__msg("stopped waiting for the probe thread after %s s: it waits in the dynamic "
				  "loader, whose lock the exiting thread holds (exit() called inside dlopen, "
				  "from a library's constructor); the data file is left unfinished%s",
				  SPROBE_STR(SPROBE_SAMPLER_STOP_TIMEOUT_S), "");
	else if (err)
		sprobe_agent__msg("could not finish the data file: %s%s", strerror(-err), "");
}

bool sprobe_agent__active(void)
{
	return sprobe_ag.sampler && getpid() == sprobe_ag.pid;
}

const char *sprobe_agent__dir(void)
{
	return sprobe_ag.dir;
}

unsigned sprobe_agent__exec_index(void)
{
	return sprobe_ag.exec_index;
}

bool sprobe_agent__inherit(void)
{
	return sprobe_ag.inherit;
}

double sprobe_agent__freq(void)
{
	return sprobe_ag.freq;
}

int sprobe_agent__capture_signo(void)
{
	/* A forked child has no probe thread: no capture reaches its threads. */
	return sprobe_agent__active() ? __atomic_load_n(&sprobe_ag.signo, __ATOMIC_RELAXED) : 0;
}

/* exit() and returning from main: the status is known here (on_exit),
 * and the recording's events file gets it. */
static void agent_on_exit(int status, void *arg)
{
	(void)arg;
	if (!sprobe_ag.sampler || getpid() != sprobe_ag.pid)
		return;
	sprobe_agent__stop();
	char line[96];
	int n = snprintf(line, sizeof(line), "exit %d %u %u %d %llu\n", (int)getpid(),
			 sprobe_ag.exec_index, (unsigned)SPROBE_DF_EXIT_EXITED, status & 0xff,
			 (unsigned long long)sprobe_mono_ns());
	sprobe_agent__event(line, (size_t)n);
}

void sprobe_agent__at_exit_once(void)
{
	/* Inherited by a forked child, which checks the pid. */
	if (sprobe_ag.exit_registered)
		return;
	sprobe_ag.exit_registered = true;
	on_exit(agent_on_exit, NULL);
}

bool sprobe_agent__forked_from_sampler(void)
{
	return sprobe_ag.sampler && getpid() != sprobe_ag.pid;
}

void sprobe_agent__forget_parent(void)
{
	sprobe_fd__atfork_child();
	/* The parent's sampler is inert here (its threads did not survive
	 * the fork); what it claimed process-wide is released, its memory
	 * abandoned (it describes the parent). */
	if (sprobe_ag.sampler && getpid() != sprobe_ag.pid)
		sprobe_sampler__forget(sprobe_ag.sampler);
	sprobe_ag.sampler = NULL;
}

/* ---- the wait wrappers' switch (STACKPROBE_RESUME_WAITS) ------------------- */

/* 0: not read yet, 1: on, 2: off. Read once; from a signal handler at
 * worst (getenv only reads environ). */
static int resume_state;

__attribute__((constructor)) static void resume_init(void)
{
	const char *v = sprobe_agent__getenv("STACKPROBE_RESUME_WAITS");
	__atomic_store_n(&resume_state, v && strcmp(v, "0") == 0 ? 2 : 1, __ATOMIC_RELAXED);
}

bool sprobe_agent__resume_waits(void)
{
	int s = __atomic_load_n(&resume_state, __ATOMIC_RELAXED);
	if (!s) {
		resume_init();
		s = __atomic_load_n(&resume_state, __ATOMIC_RELAXED);
	}
	return s == 1;
}
