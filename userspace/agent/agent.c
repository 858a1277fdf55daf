/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The LD_PRELOAD agent: libstackprobe.so starts a sampler from its
 * constructor when STACKPROBE_OUTPUT (or STACKPROBE_AGENT=1) is set, and
 * stops it (flushing the data file) at exit.
 *
 * Environment (documented in docs/AGENT.md):
 *   STACKPROBE_OUTPUT      data file path ("%p" is replaced by the pid)
 *   STACKPROBE_AGENT=1     start even without an output (table only)
 *   STACKPROBE_FREQ        samples per second, default 99
 *   STACKPROBE_MODE        wall (default) | cpu
 *   STACKPROBE_SIGNAL      real-time signal number to use (default: a free one)
 *   STACKPROBE_ZERO_PAUSE  1 (default): wall mode reads blocked threads
 *                          without a signal; 0: signal every thread
 *   STACKPROBE_TABLE       node table path, "off" to disable
 *   STACKPROBE_MAX_STACK   bytes copied per thread (default 262144)
 *   STACKPROBE_FOLLOW_FORK=1  also sample exec'd children
 *   STACKPROBE_QUIET=1     no messages on stderr
 *   STACKPROBE_STATUS_FD   (set by `stackprobe record`) memfd for live counters
 *
 * Never changes the program's behaviour: no output on stdout, messages on
 * stderr only on failure to start, exit status untouched. A forked child
 * (without exec) has no probe thread: the inherited sampler is inert there
 * and the child's exit neither joins nor flushes it. After exec the new
 * image starts again only in the same process (the pid the agent started
 * in, kept in STACKPROBE_AGENT_PID) or when STACKPROBE_FOLLOW_FORK=1;
 * its data file gets a ".N" suffix (N = exec count) so nothing is
 * overwritten. The agent wraps the exec family so the old image stops its
 * sampler (drains the queue, writes the trailer) before the kernel
 * replaces it: both files end complete. If the exec fails, sampling stays
 * stopped for the rest of that image (a restart would truncate its file).
 *
 * Every non-static function here is a libc wrapper, exported from
 * libstackprobe.so to interpose the program's calls. The library is linked
 * with a version script that exports nothing else: a new wrapper must be
 * added to the interposed list in userspace/libstackprobe.map, or it is
 * bound inside the library only and silently stops interposing
 * (tests/exports_test.sh fails on such a wrapper). Helpers stay static.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/sampler.h>
#include <stackprobe/table.h>

#include "userspace/agent/agent.h"

/* The agent's state: one sampler per process image. */
static struct sprobe_sampler *agent_sampler;
static pid_t agent_pid;
static int agent_quiet;
/* The capture signal the agent chose (0: none). Read by the sigaction and
 * signal wrappers below; written before the sampler starts. */
static int agent_signo;

static void agent_msg(const char *fmt, const char *a, const char *b)
{
	if (agent_quiet)
		return;
	fprintf(stderr, "stackprobe agent: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
}

static int parse_double(const char *name, double lo, double hi, double *out)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return 0;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !(d >= lo && d <= hi)) {
		agent_msg("%s=%s is not a valid number; not sampling", name, v);
		return -1;
	}
	*out = d;
	return 0;
}

/* Expand %p to the pid; add ".N" when this image follows an exec. */
static char *output_path(const char *tmpl, unsigned exec_count)
{
	size_t cap = strlen(tmpl) + 64;
	char *out = malloc(cap), *o = out;
	if (!out)
		return NULL;
	for (const char *p = tmpl; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += snprintf(o, cap - (size_t)(o - out) - 24, "%d", (int)getpid());
			p++;
		} else if ((size_t)(o - out) < cap - 24) {
			*o++ = *p;
		}
	}
	*o = '\0';
	if (exec_count)
		snprintf(o, 24, ".%u", exec_count);
	return out;
}

static int agent_stop_sampler(struct sprobe_sampler *s);

static void agent_stop(void)
{
	/* A forked child inherits agent_sampler but not the probe thread. */
	if (!agent_sampler || getpid() != agent_pid)
		return;
	struct sprobe_sampler *s = agent_sampler;
	agent_sampler = NULL;
	int err = agent_stop_sampler(s);
	if (err == -ESTALE || err == -EBADF)
		agent_msg("the program closed or replaced the data file's descriptor behind the "
			  "agent's back (a raw close or dup2 system call, or dup2 over every free "
			  "number): recording stopped there, and nothing was written to the file "
			  "that has that number now%s%s", "", "");
	else if (err)
		agent_msg("could not finish the data file: %s%s", strerror(-err), "");
}

__attribute__((constructor)) static void agent_start(void)
{
	const char *out = getenv("STACKPROBE_OUTPUT");
	const char *force = getenv("STACKPROBE_AGENT");
	const char *owner = getenv("STACKPROBE_AGENT_PID");
	const char *follow = getenv("STACKPROBE_FOLLOW_FORK");
	unsigned exec_count = 0;
	char buf[64];

	if ((!out || !*out) && !(force && strcmp(force, "1") == 0))
		return;
	agent_quiet = getenv("STACKPROBE_QUIET") && strcmp(getenv("STACKPROBE_QUIET"), "1") == 0;

	/* Who started sampling first? A different pid is a child that exec'd
	 * (fork + exec inherits the environment): skip unless asked. */
	if (owner && *owner) {
		unsigned long opid = strtoul(owner, NULL, 10);
		const char *dot = strchr(owner, ':');
		if ((pid_t)opid != getpid() && !(follow && strcmp(follow, "1") == 0))
			return;
		if ((pid_t)opid == getpid() && dot)
			exec_count = (unsigned)strtoul(dot + 1, NULL, 10) + 1;
	}
	snprintf(buf, sizeof(buf), "%d:%u", (int)getpid(), exec_count);
	setenv("STACKPROBE_AGENT_PID", buf, 1);

	struct sprobe_sampler_opts o = { .sz = sizeof(o) };
	double freq = 0, sig = 0, maxstack = 0;
	if (parse_double("STACKPROBE_FREQ", 1, 10000, &freq) ||
	    parse_double("STACKPROBE_SIGNAL", 1, 64, &sig) ||
	    parse_double("STACKPROBE_MAX_STACK", 4096, 256 * 1024, &maxstack))
		return;
	o.freq_hz = freq;
	o.signo = (int)sig;
	/* Without STACKPROBE_SIGNAL, take the highest free real-time signal:
	 * programs that use real-time signals conventionally number theirs
	 * up from SIGRTMIN, and a program that installs its handler after
	 * the agent started would otherwise collide with ours (see the
	 * sigaction wrapper below and docs/LIMITATIONS.md). */
	if (!o.signo) {
		for (int sg = SIGRTMAX; sg >= SIGRTMIN && !o.signo; sg--) {
			struct sigaction cur;
			if (sigaction(sg, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
			    cur.sa_handler == SIG_DFL)
				o.signo = sg;
		}
	}
	agent_signo = o.signo;
	o.max_stack_bytes = (size_t)maxstack;
	const char *mode = getenv("STACKPROBE_MODE");
	if (mode && *mode) {
		int m = sprobe_sampler_mode__parse(mode);
		if (m < 0) {
			agent_msg("STACKPROBE_MODE=%s: expected wall or cpu%s", mode, "");
			return;
		}
		o.mode = (uint32_t)m;
	}
	/* STACKPROBE_ZERO_PAUSE=0: signal every thread, blocked or not
	 * (default 1: wall mode reads blocked threads without a signal). */
	const char *zp = getenv("STACKPROBE_ZERO_PAUSE");
	if (zp && *zp) {
		if (strcmp(zp, "0") != 0 && strcmp(zp, "1") != 0) {
			agent_msg("STACKPROBE_ZERO_PAUSE=%s: expected 0 or 1%s", zp, "");
			return;
		}
		o.no_zero_pause = zp[0] == '0';
	}
	/* STACKPROBE_CPU_ENGINE=perf|timer|auto: cpu mode's engine (default
	 * auto: perf events where allowed, else CPU timers). */
	const char *eng = getenv("STACKPROBE_CPU_ENGINE");
	if (eng && *eng) {
		int e = sprobe_cpu_engine__parse(eng);
		if (e < 0) {
			agent_msg("STACKPROBE_CPU_ENGINE=%s: expected perf, timer, poll or auto%s", eng, "");
			return;
		}
		o.cpu_engine = (uint32_t)e;
	}
	const char *table = getenv("STACKPROBE_TABLE");
	if (table && strcmp(table, "off") == 0)
		o.no_table = true;
	else if (table && *table)
		o.table_path = table;
	/* A table already named after our pid is stale: left by our previous
	 * image (exec runs no exit handler) or by a dead process whose pid we
	 * reuse (killed: no exit handler either). open_pid() only succeeds
	 * on a regular file of ours whose header names our pid: remove it. */
	if (!o.no_table && !o.table_path) {
		char tpath[64];
		snprintf(tpath, sizeof(tpath), "/dev/shm/stackprobe-%d.table", (int)getpid());
		struct sprobe_table *old = sprobe_table__open_pid(getpid(), NULL);
		if (old) {
			sprobe_table__close(old);
			unlink(tpath);
		}
	}
	char *path = NULL;
	if (out && *out) {
		path = output_path(out, exec_count);
		if (!path)
			return;
		o.output = path;
	}
	/* Live counters for `stackprobe record` (a memfd it created). Map it
	 * and close the descriptor so the program never sees it. */
	const char *sfd = getenv("STACKPROBE_STATUS_FD");
	if (sfd && *sfd) {
		char *end;
		long fd = strtol(sfd, &end, 10);
		if (!*end && fd > 2 && fd < 65536) {
			void *m = mmap(NULL, sizeof(struct sprobe_sampler_status),
				       PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
			if (m != MAP_FAILED)
				o.status = m;
			close((int)fd);
		}
		unsetenv("STACKPROBE_STATUS_FD");
	}
	agent_pid = getpid();
	agent_sampler = sprobe_sampler__start(&o);
	if (!agent_sampler)
		agent_signo = 0;
	if (!agent_sampler)
		agent_msg("not sampling: %s%s", strerror(errno),
			  errno == EEXIST ? " (a node table for this pid already exists)"
			  : o.mode == SPROBE_MODE_CPU && o.cpu_engine == SPROBE_CPU_ENGINE_PERF
				  ? " (STACKPROBE_CPU_ENGINE=perf: the kernel refused a perf event: "
				    "perf_event_paranoid, CAP_PERFMON or a seccomp profile; "
				    "STACKPROBE_CPU_ENGINE=auto falls back)"
				  : "");
	else
		atexit(agent_stop);
	if (agent_sampler && o.mode == SPROBE_MODE_CPU) {
		char why[512];

		sprobe_sampler__cpu_engine(agent_sampler, why, sizeof(why));
		agent_msg("%s%s", why, ""); /* one line: which engine, and why */
	}
	free(path);
}

/* ---- exec wrappers --------------------------------------------------- */
/*
 * glibc's exec functions call the internal __execve, so each public entry
 * point is wrapped; the wrappers stop sampling in the agent's own process
 * (not in a forked or vforked child: agent_stop() checks the pid) and
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

#define EXEC_PREPARE() agent_stop()

/* ---- the program takes the capture signal ---------------------------- */
/*
 * A program that installs its own handler for the capture signal after the
 * agent started would replace the capture handler: every capture would
 * time out and the program's handler would receive the capture signals.
 * The program wins: sampling stops (the data file is finished), the
 * original disposition is restored, a line on stderr says why, and the
 * program's call goes through unchanged. Only queries (act == NULL) leave
 * sampling on: any new disposition, even SIG_DFL, would unhook the capture
 * handler.
 *
 * Every libc entry point that sets a disposition is wrapped, because libc
 * calls its internal sigaction, which an interposer never sees: sigaction,
 * __sigaction, signal, bsd_signal, ssignal, sysv_signal and __sysv_signal
 * (what signal() becomes in a program built without _DEFAULT_SOURCE, e.g.
 * -std=c11), sigset, sigignore.
 *
 * Blocking the signal is taking it too when it is targeted: a program that
 * blocks the capture signal (sigprocmask, pthread_sigmask, sighold,
 * sigset(SIG_HOLD)) without blocking every real-time signal means to
 * receive it with sigwait/signalfd, and could take a capture signal queued
 * to it meanwhile. A set holding every real-time signal (sigfillset: a
 * thread that wants no signal at all) is not a use of ours: that thread is
 * dropped as "blocked" in each capture, and the others are sampled.
 *
 * A raw rt_sigaction system call cannot be intercepted. The capture backend
 * checks its handler before each capture and sends nothing once it was
 * replaced (at most one capture's signals can reach the new handler); the
 * agent says so when it stops, and puts the program's disposition back
 * after stopping the sampler (which restores the disposition it found at
 * start): it matters for SIG_IGN, which survives exec.
 *
 * The wrappers may run in any thread, and signal()-style re-installs even
 * in a signal handler: they read agent_signo atomically, find the next
 * definition resolved at load time, and only the first call that takes the
 * signal stops the sampler.
 */
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*sigint_fn)(int);

/* Exported by glibc, declared by no header (or only under old feature
 * macros). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);
sighandler_t ssignal(int sig, sighandler_t handler);
sighandler_t sysv_signal(int sig, sighandler_t handler);
sighandler_t __sysv_signal(int sig, sighandler_t handler);

/* dlsym(RTLD_NEXT) once per entry point: the mask calls can be hot.
 * Relaxed load and store: racing threads store the same value, and the
 * pointer is to immutable code. */
static void *next_cached(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (!f) {
		f = next_fn(name);
		__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	}
	return f;
}

/* One slot per wrapped entry point, all resolved by wrappers_init() at
 * load time, so that a first call made from a signal handler (the mask
 * functions and signal() are async-signal-safe in libc) runs no dlsym. */
enum {
	NX_SIGACTION, NX___SIGACTION, NX_SIGNAL, NX_BSD_SIGNAL, NX_SSIGNAL, NX_SYSV_SIGNAL,
	NX___SYSV_SIGNAL, NX_SIGSET, NX_SIGIGNORE, NX_SIGHOLD, NX_SIGPROCMASK,
	NX_PTHREAD_SIGMASK, NX__COUNT
};
static const char *const next_names[NX__COUNT] = {
	"sigaction", "__sigaction", "signal", "bsd_signal", "ssignal", "sysv_signal",
	"__sysv_signal", "sigset", "sigignore", "sighold", "sigprocmask", "pthread_sigmask",
};
static void *next_slots[NX__COUNT];

#define NEXT(type, idx) ((type)next_cached(&next_slots[idx], next_names[idx]))

__attribute__((constructor)) static void wrappers_init(void)
{
	for (int i = 0; i < NX__COUNT; i++)
		next_cached(&next_slots[i], next_names[i]);
}

/* The program takes sig (verb: what it does to it). Stops sampling once. */
static void agent_yield_signal(int sig, const char *verb)
{
	int expect = sig;

	if (sig <= 0 || !agent_sampler || getpid() != agent_pid)
		return;
	/* Acq_rel; pairs with itself in a racing wrapper: one thread wins. */
	if (!__atomic_compare_exchange_n(&agent_signo, &expect, 0, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	char what[96];
	snprintf(what, sizeof(what), "%s signal %d", verb, sig);
	agent_msg("the program %s, the capture signal: sampling stopped%s (set STACKPROBE_SIGNAL "
		  "to a signal it does not use)", what, "");
	agent_stop();
}

static int capture_signo(void)
{
	return __atomic_load_n(&agent_signo, __ATOMIC_RELAXED);
}

int sprobe_agent__capture_signo(void)
{
	/* A forked child has no probe thread: no capture reaches its threads. */
	return agent_sampler && getpid() == agent_pid ? capture_signo() : 0;
}

/* Does this mask change block the capture signal on purpose? (see above) */
static bool targets_capture_signal(int how, const sigset_t *set)
{
	int sig = capture_signo();

	if (!sig || !set || how == SIG_UNBLOCK || sigismember(set, sig) != 1)
		return false;
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		if (s != sig && sigismember(set, s) != 1)
			return true;
	return false; /* every real-time signal: "block everything" */
}

/* sigaction() and glibc's __sigaction: same shape, a different next
 * definition. A query (act NULL) takes nothing. */
#define SIGACTION_WRAPPER(name, idx)                                                   \
	int name(int sig, const struct sigaction *act, struct sigaction *old)           \
	{                                                                               \
		sigaction_fn f = NEXT(sigaction_fn, idx);                               \
		if (act)                                                                \
			agent_yield_signal(sig, "installs a handler for");              \
		if (!f) {                                                               \
			errno = ENOSYS;                                                 \
			return -1;                                                      \
		}                                                                       \
		/* the program's handler behind a trampoline (handler_table.c) */     \
		return sprobe_agent__sigaction(f, sig, act, old);                       \
	}

SIGACTION_WRAPPER(sigaction, NX_SIGACTION)
SIGACTION_WRAPPER(__sigaction, NX___SIGACTION)

/* signal() and its aliases: same shape, a different next definition. */
#define SIGNAL_WRAPPER(name, idx)                                                 \
	sighandler_t name(int sig, sighandler_t handler)                          \
	{                                                                         \
		signal_fn f = NEXT(signal_fn, idx);                               \
		agent_yield_signal(sig, "installs a handler for");                \
		if (!f) {                                                         \
			errno = ENOSYS;                                           \
			return SIG_ERR;                                           \
		}                                                                 \
		/* the program's handler behind a trampoline (handler_table.c) */ \
		return sprobe_agent__signal(f, sig, handler);                     \
	}

SIGNAL_WRAPPER(signal, NX_SIGNAL)
SIGNAL_WRAPPER(bsd_signal, NX_BSD_SIGNAL)
SIGNAL_WRAPPER(ssignal, NX_SSIGNAL)
SIGNAL_WRAPPER(sysv_signal, NX_SYSV_SIGNAL)
SIGNAL_WRAPPER(__sysv_signal, NX___SYSV_SIGNAL)

sighandler_t sigset(int sig, sighandler_t disp)
{
	signal_fn f = NEXT(signal_fn, NX_SIGSET);
	agent_yield_signal(sig, disp == SIG_HOLD ? "blocks" : "installs a handler for");
	if (!f) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	/* the program's handler behind a trampoline (handler_table.c) */
	return sprobe_agent__signal(f, sig, disp);
}

int sigignore(int sig)
{
	sigint_fn f = NEXT(sigint_fn, NX_SIGIGNORE);
	agent_yield_signal(sig, "ignores");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig);
}

int sighold(int sig)
{
	sigint_fn f = NEXT(sigint_fn, NX_SIGHOLD);
	agent_yield_signal(sig, "blocks");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigmask_fn f = NEXT(sigmask_fn, NX_SIGPROCMASK);
	if (targets_capture_signal(how, set))
		agent_yield_signal(capture_signo(), "blocks");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(how, set, old);
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigmask_fn f = NEXT(sigmask_fn, NX_PTHREAD_SIGMASK);
	if (targets_capture_signal(how, set))
		agent_yield_signal(capture_signo(), "blocks");
	if (!f)
		return ENOSYS;
	return f(how, set, old);
}

/* Is sig's handler still the capture handler (a function of this object)?
 * *cur gets the current disposition. */
static bool capture_handler_replaced(int sig, struct sigaction *cur)
{
	sigaction_fn f = NEXT(sigaction_fn, NX_SIGACTION);
	Dl_info self, h;

	if (!f || f(sig, NULL, cur) != 0)
		return false;
	if (!(cur->sa_flags & SA_SIGINFO))
		return true; /* SIG_DFL, SIG_IGN or a one-argument handler */
	if (!dladdr((void *)agent_stop, &self))
		return false;
	return !dladdr((void *)cur->sa_sigaction, &h) || h.dli_fbase != self.dli_fbase;
}

/* Stop s (agent_stop). If the program replaced the capture handler behind
 * the wrappers' back, say so, and give the program its handler back after
 * the sampler restored the disposition it found at start. */
static int agent_stop_sampler(struct sprobe_sampler *s)
{
	int sig = capture_signo();
	struct sigaction cur;
	bool replaced = sig && capture_handler_replaced(sig, &cur);
	int err;

	if (replaced) {
		struct sprobe_sampler_stats st;
		char num[16], refused[64];

		sprobe_sampler__stats(s, &st);
		snprintf(num, sizeof(num), "%d", sig);
		snprintf(refused, sizeof(refused), " (%llu capture rounds refused)",
			 (unsigned long long)st.rounds_failed);
		agent_msg("the disposition of signal %s, the capture signal, was replaced without "
			  "sigaction() or signal() (a raw rt_sigaction system call?): no capture "
			  "since then%s; the program's disposition is kept", num, refused);
	}
	err = sprobe_sampler__stop(s);
	if (replaced) {
		sigaction_fn f = NEXT(sigaction_fn, NX_SIGACTION);
		if (f)
			f(sig, &cur, NULL);
	}
	return err;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	execve_fn f = (execve_fn)next_fn("execve");
	EXEC_PREPARE();
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(path, argv, envp);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	execvpe_fn f = (execvpe_fn)next_fn("execvpe");
	EXEC_PREPARE();
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(file, argv, envp);
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	fexecve_fn f = (fexecve_fn)next_fn("fexecve");
	EXEC_PREPARE();
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(fd, argv, envp);
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

__attribute__((destructor)) static void agent_fini(void)
{
	agent_stop();
}
