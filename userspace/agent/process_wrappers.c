/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent follows the process tree (`stackprobe record` samples every
 * process the command starts; docs/AGENT.md "Process trees"):
 *
 *  - fork without exec (prefork servers, Python multiprocessing): the
 *    child inherits an inert copy of the parent's sampler (its threads did
 *    not survive the fork). The atfork child handler gives up that copy
 *    (descriptors closed, the capture signal's disposition put back, the
 *    process-wide claims released) and starts one thread that waits one
 *    capture period, then starts the child's own sampler with its own part.
 *    A child that execs or exits within that period (the common fork+exec
 *    of shells and make) costs that thread only: no file, no table.
 *  - exec: exec_wrappers.c finish the old image's part; the new
 *    image's constructor starts the next one (its exec index is the first
 *    free part name of its pid).
 *  - vfork / posix_spawn: the child runs nothing of ours until its exec
 *    (glibc's posix_spawn execs with its internal execve, which no
 *    wrapper sees): the posix_spawn wrappers note a program the agent
 *    cannot enter, with the pid it got.
 *  - _exit / _Exit: wrapped here, so a program (a shell) that leaves that
 *    way still finishes its part (exit() runs the agent's on_exit
 *    handler). Inside one of the program's signal handlers the part is not
 *    flushed (stopping joins threads that may wait on a lock the
 *    interrupted code holds); its end is still noted.
 *  - the wait family: what a parent reaps (exit status, killing signal) is
 *    noted for the recording, which otherwise knows only its own child's
 *    status. The program's call and its result are unchanged.
 *
 * Notes go to DIR/events (STACKPROBE_OUTPUT_DIR), one line per write(2) of
 * an O_APPEND file, read by `stackprobe record` when it merges the parts.
 * Without a directory (a hand-run agent writing STACKPROBE_OUTPUT) nothing
 * is noted.
 *
 * Every non-static function below except the sprobe_agent__ ones is a libc
 * wrapper, listed in userspace/libstackprobe.map.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/agent/agent_internal.h"
#include "userspace/common/clock.h"
#include "userspace/common/enterable.h"
#include "userspace/common/fds.h"

static void note_exit(pid_t pid, unsigned exec_index, int wstatus)
{
	char line[96];
	unsigned how;
	int code, n;

	if (WIFEXITED(wstatus)) {
		how = SPROBE_DF_EXIT_EXITED;
		code = WEXITSTATUS(wstatus);
	} else if (WIFSIGNALED(wstatus)) {
		how = SPROBE_DF_EXIT_KILLED;
		code = WTERMSIG(wstatus);
	} else {
		return; /* stopped or continued: not an end */
	}
	n = snprintf(line, sizeof(line), "exit %d %u %u %d %llu\n", (int)pid, exec_index, how, code,
		     (unsigned long long)sprobe_mono_ns());
	if (n > 0 && (size_t)n < sizeof(line))
		sprobe_agent__event(line, (size_t)n);
}

/* ---- fork ------------------------------------------------------------- */

/* A fork child of a sampling process (or of a child still waiting to
 * start) starts its own sampler; set in the child by the handler. */
static int fork_pending;
/* The orchestrator's start of a fork child's sampler (process_init). */
static void (*start_forked_fn)(void);

static void *fork_start_thread(void *arg)
{
	(void)arg;
	double f = sprobe_agent__freq();
	uint64_t ns = f > 0 ? (uint64_t)(1e9 / f) : 10000000ull;

	if (ns < 1000000ull)
		ns = 1000000ull;
	if (ns > 20000000ull)
		ns = 20000000ull;
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	/* Absolute-free relative sleep; EINTR cannot happen (every signal
	 * is blocked here), but loop anyway on a remaining time. */
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
	__atomic_store_n(&fork_pending, 0, __ATOMIC_RELAXED);
	start_forked_fn();
	return NULL;
}

static void atfork_child(void)
{
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;

	/* Every forked child: the registry's sections, guards and pins that
	 * the parent's other threads held at fork() (a probe thread starting
	 * a sampler, or walking) are nobody's now, and its descriptors
	 * describe the parent. Not only when a sampler came along: a sampler
	 * still starting on its own thread is not known here yet, and a
	 * section its thread held would make this child's first allocation
	 * spin for good. */
	sprobe_fd__atfork_child();
	if (!sprobe_agent__inherit())
		return;
	/* The parent sampled (its inert sampler came along), or was itself
	 * a child waiting to start. */
	if (!sprobe_agent__forked_from_sampler() && !__atomic_load_n(&fork_pending, __ATOMIC_RELAXED))
		return;
	sprobe_agent__forget_parent();
	__atomic_store_n(&fork_pending, 1, __ATOMIC_RELAXED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_attr_init(&a) == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 * 1024);
		if (pthread_create(&t, &a, fork_start_thread, NULL) == 0)
			pthread_setname_np(t, "sprobe-fork");
		pthread_attr_destroy(&a);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void sprobe_agent__process_init(void (*start_forked)(void))
{
	static int done;

	if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
		return;
	start_forked_fn = start_forked;
	pthread_atfork(NULL, NULL, atfork_child);
}

/* ---- _exit ------------------------------------------------------------ */

typedef void (*exit_fn)(int);

static void before_exit(int status)
{
	if (!sprobe_agent__active())
		return;
	if (!__atomic_load_n(&sprobe_agent__in_handler, __ATOMIC_RELAXED))
		sprobe_agent__stop();
	note_exit(getpid(), sprobe_agent__exec_index(), (status & 0xff) << 8);
}

__attribute__((noreturn)) static void really_exit(const char *name, int status)
{
	exit_fn f = (exit_fn)dlsym(RTLD_NEXT, name);

	if (f)
		f(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

void _exit(int status)
{
	before_exit(status);
	really_exit("_exit", status);
}

void _Exit(int status)
{
	before_exit(status);
	really_exit("_Exit", status);
}

/* ---- the wait family -------------------------------------------------- */

/* The exec index a parent cannot know: "the latest image of that pid". */
#define LATEST_IMAGE 4294967295u

typedef pid_t (*waitpid_fn)(pid_t, int *, int);
typedef pid_t (*wait_fn)(int *);
typedef pid_t (*wait3_fn)(int *, int, struct rusage *);
typedef pid_t (*wait4_fn)(pid_t, int *, int, struct rusage *);
typedef int (*waitid_fn)(idtype_t, id_t, siginfo_t *, int);

static void *next_wait(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	}
	return f;
}

static void *nx_waitpid, *nx_wait, *nx_wait3, *nx_wait4, *nx_waitid;

__attribute__((constructor)) static void process_wrappers_init(void)
{
	next_wait(&nx_waitpid, "waitpid");
	next_wait(&nx_wait, "wait");
	next_wait(&nx_wait3, "wait3");
	next_wait(&nx_wait4, "wait4");
	next_wait(&nx_waitid, "waitid");
}

/* After a wait call returned pid with *status (status may be NULL: the
 * program did not ask; then nothing is known). */
static void reaped(pid_t pid, const int *status)
{
	if (pid > 0 && status && sprobe_agent__dir())
		note_exit(pid, LATEST_IMAGE, *status);
}

pid_t waitpid(pid_t pid, int *status, int options)
{
	waitpid_fn f = (waitpid_fn)next_wait(&nx_waitpid, "waitpid");
	int st, saved;
	pid_t r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(pid, &st, options);
	saved = errno;
	if (r > 0 && status)
		*status = st;
	reaped(r, &st);
	errno = saved;
	return r;
}

pid_t wait(int *status)
{
	wait_fn f = (wait_fn)next_wait(&nx_wait, "wait");
	int st, saved;
	pid_t r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(&st);
	saved = errno;
	if (r > 0 && status)
		*status = st;
	reaped(r, &st);
	errno = saved;
	return r;
}

pid_t wait3(int *status, int options, struct rusage *ru)
{
	wait3_fn f = (wait3_fn)next_wait(&nx_wait3, "wait3");
	int st, saved;
	pid_t r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(&st, options, ru);
	saved = errno;
	if (r > 0 && status)
		*status = st;
	reaped(r, &st);
	errno = saved;
	return r;
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	wait4_fn f = (wait4_fn)next_wait(&nx_wait4, "wait4");
	int st, saved;
	pid_t r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(pid, &st, options, ru);
	saved = errno;
	if (r > 0 && status)
		*status = st;
	reaped(r, &st);
	errno = saved;
	return r;
}

int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	waitid_fn f = (waitid_fn)next_wait(&nx_waitid, "waitid");
	int r, saved;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	r = f(idtype, id, info, options);
	saved = errno;
	if (r == 0 && info && info->si_pid > 0 && sprobe_agent__dir()) {
		int st = -1;

		if (info->si_code == CLD_EXITED)
			st = (info->si_status & 0xff) << 8;
		else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED)
			st = info->si_status & 0x7f;
		if (st >= 0)
			note_exit(info->si_pid, LATEST_IMAGE, st);
	}
	errno = saved;
	return r;
}

/* ---- posix_spawn ------------------------------------------------------ */

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *, char *const[], char *const[]);

static int spawn(const char *name, pid_t *pid, const char *file,
		 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at, char *const argv[],
		 char *const envp[])
{
	spawn_fn f = (spawn_fn)dlsym(RTLD_NEXT, name);
	char why[256], answer[160] = "";
	bool note = sprobe_agent__dir() && sprobe_agent__inherit() &&
		    sprobe_agent__unenterable(file, why, sizeof(why));
	bool kernel_can = note;

	if (!note && sprobe_agent__dir() && sprobe_agent__inherit() && envp) {
		/* An environment of the caller's making without the agent. */
		bool found = false;

		for (char *const *e = envp; *e && !found; e++)
			found = strncmp(*e, "LD_PRELOAD=", 11) == 0 && strstr(*e, "libstackprobe");
		if (!found) {
			snprintf(why, sizeof(why), "its environment has no LD_PRELOAD of the agent");
			note = true;
		}
	}
	pid_t got = 0;
	int r;

	if (!f)
		return ENOSYS;
	r = f(&got, file, fa, at, argv, envp);
	if (pid)
		*pid = got;
	/* The kernel tier attaches to a static or set-ID child once it
	 * runs (what ran before is not sampled). */
	if (r == 0 && kernel_can &&
	    sprobe_agent__ask_attach_spawned(got, file, why, answer, sizeof(answer)))
		note = false;
	if (r == 0 && note) {
		char line[PATH_MAX + 448];
		int saved = errno;

		if (answer[0] && strlen(why) + 2 + strlen(answer) < sizeof(why))
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "; %s", answer);
		int n = snprintf(line, sizeof(line), "unsampled %d 0 %llu %s\t%s\n", (int)got,
				 (unsigned long long)sprobe_mono_ns(), file, why);

		if (n > 0 && (size_t)n < sizeof(line))
			sprobe_agent__event(line, (size_t)n);
		errno = saved;
	}
	return r;
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	return spawn("posix_spawn", pid, path, fa, at, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	return spawn("posix_spawnp", pid, file, fa, at, argv, envp);
}

/* ---- programs the agent cannot enter ---------------------------------- */

int sprobe_agent__unenterable(const char *file, char *why, size_t len)
{
	char path[PATH_MAX];

	if (!file || !sprobe_enter__resolve(file, sprobe_agent__getenv("PATH"), path, sizeof(path)))
		return SPROBE_ENTER_OK;
	for (int depth = 0; depth <= SPROBE_ENTER_MAX_SCRIPTS; depth++) {
		char interp[256];
		int h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
		enum sprobe_enter r = sprobe_enter__check_fd(sprobe_fd__get(h), why, len, interp,
							     sizeof(interp));

		sprobe_fd__done(h);
		if (r != SPROBE_ENTER_SCRIPT)
			return r;
		snprintf(path, sizeof(path), "%s", interp); /* a script: its interpreter runs */
	}
	return false;
}
