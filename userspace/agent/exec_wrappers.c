/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The exec family (docs/AGENT.md "Process trees"): before the kernel
 * replaces the image, its sampler is stopped (queue drained, trailer
 * written) so that its part ends complete, and the recording learns how
 * the image ended and whether the next one can be sampled (a static or
 * set-ID program, or an environment without the agent's LD_PRELOAD). If
 * the exec fails, sampling stays stopped for the rest of that image (a
 * restart would truncate its part).
 *
 * Every non-static function here is a libc wrapper, listed in
 * userspace/libstackprobe.map (tests/exports_test.sh checks).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/agent/agent_internal.h"
#include "userspace/common/clock.h"
#include "userspace/common/enterable.h"

/*
 * glibc's exec functions call the internal __execve, so each public entry
 * point is wrapped; the wrappers stop sampling in the agent's own process
 * (not in a forked or vforked child: sprobe_agent__stop() checks the pid) and
 * forward to the next definition. They allocate nothing before the call
 * except the exec[lp] argument vectors, built on the stack.
 */
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static void *next_fn(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* Is there a part named PATH already? */
static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Does envp still preload this library? A program that execs with an
 * environment of its own making (env -i, sudo's env_reset, a sandbox)
 * leaves the agent out of the new image. */
static bool env_preloads_us(char *const envp[])
{
	Dl_info self;
	const char *base;

	if (!envp || !dladdr((void *)env_preloads_us, &self) || !self.dli_fname)
		return true; /* cannot tell: say nothing */
	base = strrchr(self.dli_fname, '/');
	base = base ? base + 1 : self.dli_fname;
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
			return strstr(*e + 11, base) != NULL;
	return false;
}

/* Before an exec: finish this image's part, and tell the recording the
 * image ended by exec (and, if the new program is one the agent cannot
 * enter, that it will not be sampled). The exec may still fail: then the
 * program goes on unsampled in this image (a restart would truncate its
 * part), and the recording lists the exec that did not happen as the
 * end of the part. */
static void exec_prepare(const char *path, char *const envp[])
{
	bool active = sprobe_agent__active();
	char line[PATH_MAX + 384], why[256];
	unsigned long long now = (unsigned long long)sprobe_mono_ns();
	unsigned next;
	int n;

	if (active) {
		sprobe_agent__stop();
		n = snprintf(line, sizeof(line), "exit %d %u %u 0 %llu\n", (int)getpid(),
			     sprobe_ag.exec_index, (unsigned)SPROBE_DF_EXIT_EXECED, now);
		sprobe_agent__event(line, (size_t)n);
		next = sprobe_ag.exec_index + 1;
	} else if (sprobe_ag.dir && sprobe_ag.inherit) {
		/* A forked child that execs before its sampler started (the
		 * fork + exec of shells), or a vfork child: the new image is
		 * the first of this pid the recording has a part for. */
		char part[PATH_MAX];

		for (next = 0; next < 100000; next++) {
			snprintf(part, sizeof(part), "%s/%d.%u.part", sprobe_ag.dir, (int)getpid(), next);
			if (!exists(part))
				break;
		}
	} else {
		return;
	}
	int kind = path ? sprobe_agent__unenterable(path, why, sizeof(why)) : SPROBE_ENTER_OK;
	bool unenterable = kind != SPROBE_ENTER_OK, env_choice = false;

	if (!unenterable && path && !env_preloads_us(envp)) {
		snprintf(why, sizeof(why), "its environment has no LD_PRELOAD of the agent");
		unenterable = env_choice = true;
	}
	if (sprobe_ag.dir && unenterable) {
		char answer[160] = "";

		/* The kernel can sample what the agent cannot enter (a
		 * set-ID program only once it runs: the kernel drops perf
		 * events at its exec); an environment without the agent is
		 * the caller's choice. */
		bool taken = false;

		if (kind == SPROBE_ENTER_SETID)
			taken = sprobe_agent__ask_attach_at_exec(next, path, why, answer, sizeof(answer));
		else if (!env_choice)
			taken = sprobe_agent__ask_external(next, path, why, answer, sizeof(answer));
		if (taken)
			return;
		if (answer[0] && strlen(why) + 2 + strlen(answer) < sizeof(why))
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "; %s", answer);
		n = snprintf(line, sizeof(line), "unsampled %d %u %llu %s\t%s\n", (int)getpid(), next,
			     now, path, why);
		if (n > 0 && (size_t)n < sizeof(line))
			sprobe_agent__event(line, (size_t)n);
	}
}

#define EXEC_PREPARE(path, envp) exec_prepare(path, envp)

int execve(const char *path, char *const argv[], char *const envp[])
{
	execve_fn f = (execve_fn)next_fn("execve");
	EXEC_PREPARE(path, envp);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	int r = f(path, argv, envp);

	sprobe_agent__exec_failed();
	return r;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	execvpe_fn f = (execvpe_fn)next_fn("execvpe");
	EXEC_PREPARE(file, envp);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	int r = f(file, argv, envp);

	sprobe_agent__exec_failed();
	return r;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	fexecve_fn f = (fexecve_fn)next_fn("fexecve");
	EXEC_PREPARE(NULL, envp);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	int r = f(fd, argv, envp);

	sprobe_agent__exec_failed();
	return r;
}

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* Collect a NULL-terminated variadic list into a stack vector. */
#define EXECL_ARGV(first, ap, argv, extra)                                        \
	size_t n_ = 1;                                                            \
	va_start(ap, first);                                                      \
	while (va_arg(ap, char *))                                                \
		n_++;                                                             \
	va_end(ap);                                                               \
	char *argv[n_ + 1];                                                       \
	argv[0] = (char *)(first);                                                \
	va_start(ap, first);                                                      \
	for (size_t i_ = 1; i_ <= n_; i_++)                                       \
		argv[i_] = va_arg(ap, char *);                                    \
	extra;                                                                    \
	va_end(ap)

int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	EXECL_ARGV(arg, ap, argv, (void)0);
	return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	EXECL_ARGV(arg, ap, argv, (void)0);
	return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **envp;
	EXECL_ARGV(arg, ap, argv, envp = va_arg(ap, char **));
	return execve(path, argv, envp);
}
