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

#include <stackprobe/sampler.h>
#include <stackprobe/table.h>

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

static void agent_stop(void)
{
	/* A forked child inherits agent_sampler but not the probe thread. */
	if (!agent_sampler || getpid() != agent_pid)
		return;
	struct sprobe_sampler *s = agent_sampler;
	agent_sampler = NULL;
	int err = sprobe_sampler__stop(s);
	if (err)
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
			  errno == EEXIST ? " (a node table for this pid already exists)" : "");
	else
		atexit(agent_stop);
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
 * handler. signal() is wrapped too (glibc's calls its internal sigaction,
 * which this wrapper does not see); sigset()/bsd_signal() are not.
 */
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static void agent_yield_signal(int sig)
{
	if (!agent_sampler || sig != agent_signo || getpid() != agent_pid)
		return;
	char num[16];
	snprintf(num, sizeof(num), "%d", sig);
	agent_msg("the program installs a handler for signal %s, the capture signal: sampling "
		  "stopped%s (set STACKPROBE_SIGNAL to a signal it does not use)", num, "");
	agent_signo = 0;
	agent_stop();
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn f = (sigaction_fn)next_fn("sigaction");
	if (act)
		agent_yield_signal(sig);
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig, act, old);
}

sighandler_t signal(int sig, sighandler_t handler)
{
	signal_fn f = (signal_fn)next_fn("signal");
	agent_yield_signal(sig);
	if (!f) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return f(sig, handler);
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
