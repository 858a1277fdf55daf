/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The LD_PRELOAD agent: libstackprobe.so starts a sampler from its
 * constructor when STACKPROBE_OUTPUT (or STACKPROBE_AGENT=1) is set, and
 * stops it (flushing the data file) at exit.
 *
 * Environment (documented in docs/AGENT.md):
 *   STACKPROBE_OUTPUT      data file path ("%p" is replaced by the pid)
 *   STACKPROBE_AGENT=1     start even without an output (table only)
 *   STACKPROBE_AGENT=idle  sample nothing: wait for `stackprobe record -p`
 *                          on the control channel (control.c)
 *   STACKPROBE_CONTROL=1   with STACKPROBE_AGENT=1: also the control channel
 *   STACKPROBE_PPROF_DIR   one pprof profile per STACKPROBE_PERIOD (continuous.c)
 *   STACKPROBE_FREQ        samples per second, default 99
 *   STACKPROBE_MODE        wall (default) | cpu
 *   STACKPROBE_SIGNAL      real-time signal number to use (default: a free one)
 *   STACKPROBE_ZERO_PAUSE  1 (default): wall mode reads blocked threads
 *                          without a signal; 0: signal every thread
 *   STACKPROBE_TABLE       node table path, "off" to disable
 *   STACKPROBE_MAX_STACK   bytes copied per thread (default 262144)
 *   STACKPROBE_OUTPUT_DIR  (set by `stackprobe record`) one part per
 *                          process image, DIR/PID.EXEC.part, notes in DIR/events
 *   STACKPROBE_INHERIT=0   the first process only (default: every process it
 *                          starts: process_wrappers.c)
 *   STACKPROBE_LINES=0     no source lines / inlined frames; 1: read in the
 *                          program; record (default): added by the file's
 *                          reader (stackprobe record after the merge,
 *                          stackprobe report)
 *   STACKPROBE_CPU_ENGINE  perf | poll | timer | auto (cpu mode)
 *   STACKPROBE_QUIET=1     no messages on stderr
 *   STACKPROBE_STATUS_FD   (set by `stackprobe record`) memfd for live counters
 *
 * Never changes the program's behaviour: no output on stdout, messages on
 * stderr only on failure to start (and the cpu engine's one line), exit
 * status untouched. Process trees (docs/AGENT.md "Process trees"): a
 * forked child gives up the inert copy of the parent's sampler and starts
 * its own (process_wrappers.c); an exec'd image starts as a descendant
 * when STACKPROBE_AGENT_PID names another process, as the next image of
 * its pid otherwise; each image has its own part (or file: ".PID" for a
 * descendant without %p, ".N" after an exec). The agent wraps the exec
 * family so the old image stops its sampler (drains the queue, writes the
 * trailer) before the kernel replaces it: both parts end complete. If the
 * exec fails, sampling stays stopped for the rest of that image (a
 * restart would truncate its part). The environment is read and written
 * through libc, not the program (sprobe_agent__getenv: bash has its own).
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
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>
#include <stackprobe/table.h>

#include "backends/linux/chain.h"
#include "userspace/agent/agent.h"
#include "userspace/common/clock.h"
#include "userspace/common/enterable.h"
#include "userspace/common/fds.h"
#include "userspace/pause/pause_internal.h"

/* The agent's state: one sampler per process image. */
static struct sprobe_sampler *agent_sampler;
static pid_t agent_pid;
static int agent_quiet;
/* The capture signal the agent chose (0: none). Read by the sigaction and
 * signal wrappers below; written before the sampler starts. */
static int agent_signo;
/* Fixed by the constructor: where data goes, whether children are
 * followed, this image's exec index, whether this process descends from
 * the one the recording started in, the rate. */
static char *agent_dir;
static char *agent_output;
static bool agent_inherit = true;
static unsigned agent_exec_index;
static bool agent_descendant;
static double agent_freq = 99;
static bool agent_exit_registered;
/* On demand (control.c, docs/AGENT.md "On demand"): the control channel
 * runs (agent_control); STACKPROBE_AGENT=idle keeps no sampler between
 * recordings (agent_idle), STACKPROBE_AGENT=1 keeps its table sampler,
 * stopped while a recording runs. agent_base: the options the constructor
 * read from the environment, for the samplers started later (its strings
 * are owned here). agent_od_lock serialises those starts and stops with
 * each other and with agent_stop() (exit, exec): the part a recording
 * writes is finished once, by whoever stops it first, and an exit waits
 * for a stop in progress on the control thread. */
static bool agent_control, agent_idle, agent_signo_fixed;
/* Release stores, once: agent_base is complete (base_ready), or the
 * constructor gave up before (ctor_done); read by
 * sprobe_agent__ondemand_ready() on the continuous thread. */
static bool agent_base_ready, agent_ctor_done;
/* STACKPROBE_PPROF_DIR (continuous.c) drives the samplers. */
static bool agent_continuous;
static struct sprobe_sampler_opts agent_base;
static pthread_mutex_t agent_od_lock = PTHREAD_MUTEX_INITIALIZER;

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

/* A message for the person recording. Under `record` (agent_dir set) it
 * goes to DIR/events, and record prints it on its own stderr: the
 * program's descriptor 2 is the program's (a daemon points it at its log
 * file), and a guest writes nothing there. Run by hand, stderr is the
 * only channel there is (STACKPROBE_QUIET=1 silences it). */
static void agent_say(const char *prefix, const char *text)
{
	if (agent_quiet)
		return;
	if (agent_dir) {
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

static void agent_msg(const char *fmt, const char *a, const char *b)
{
	char text[900];

	if (agent_quiet)
		return;
	snprintf(text, sizeof(text), fmt, a, b);
	agent_say("stackprobe agent: ", text);
}

/* The sampler's notices (sprobe_sampler_opts.notice): facts about what
 * it cannot sample, one line each, from the probe thread. */
static void agent_notice(void *ctx, const char *line)
{
	(void)ctx;
	agent_say("stackprobe: ", line);
}

static int parse_double(const char *name, double lo, double hi, double *out)
{
	const char *v = sprobe_agent__getenv(name);
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

/* Expand %p to the pid; a descendant's file gets ".PID" when the template
 * has no %p (so a tree's files never overwrite each other); ".N" when this
 * image follows an exec. */
static char *output_path(const char *tmpl, unsigned exec_count, bool descendant)
{
	size_t cap = strlen(tmpl) + 64;
	char *out = malloc(cap), *o = out;
	bool had_pid = false;
	if (!out)
		return NULL;
	for (const char *p = tmpl; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += snprintf(o, cap - (size_t)(o - out) - 24, "%d", (int)getpid());
			had_pid = true;
			p++;
		} else if ((size_t)(o - out) < cap - 48) {
			*o++ = *p;
		}
	}
	*o = '\0';
	if (descendant && !had_pid)
		o += snprintf(o, 24, ".%d", (int)getpid());
	if (exec_count)
		snprintf(o, 24, ".%u", exec_count);
	return out;
}

static int agent_stop_sampler(struct sprobe_sampler *s);

#define SPROBE_STR2(x) #x
#define SPROBE_STR(x) SPROBE_STR2(x)

static void agent_stop(void)
{
	/* A forked child inherits agent_sampler but not the probe thread. */
	if (!agent_sampler || getpid() != agent_pid)
		return;
	if (agent_control)
		pthread_mutex_lock(&agent_od_lock);
	/* Acq_rel; pairs with itself in sprobe_agent__ondemand_stop(). */
	struct sprobe_sampler *s = __atomic_exchange_n(&agent_sampler, NULL, __ATOMIC_ACQ_REL);
	int err = s ? agent_stop_sampler(s) : 0;
	if (agent_control)
		pthread_mutex_unlock(&agent_od_lock);
	if (err == -ESTALE || err == -EBADF)
		agent_msg("the program closed or replaced the data file's descriptor behind the "
			  "agent's back (a raw close or dup2 system call, or dup2 over every free "
			  "number): recording stopped there, and nothing was written to the file "
			  "that has that number now%s%s", "", "");
	else if (err == -ETIMEDOUT)
		agent_msg("stopped waiting for the probe thread after %s s: it waits in the dynamic "
			  "loader, whose lock the exiting thread holds (exit() called inside dlopen, "
			  "from a library's constructor); the data file is left unfinished%s",
			  SPROBE_STR(SPROBE_SAMPLER_STOP_TIMEOUT_S), "");
	else if (err)
		agent_msg("could not finish the data file: %s%s", strerror(-err), "");
}

void sprobe_agent__stop(void)
{
	agent_stop();
}

bool sprobe_agent__active(void)
{
	return agent_sampler && getpid() == agent_pid;
}

const char *sprobe_agent__dir(void)
{
	return agent_dir;
}

unsigned sprobe_agent__exec_index(void)
{
	return agent_exec_index;
}

bool sprobe_agent__inherit(void)
{
	return agent_inherit;
}

double sprobe_agent__freq(void)
{
	return agent_freq;
}

/* exit() and returning from main: the status is known here (on_exit),
 * and the recording's events file gets it. */
static void agent_on_exit(int status, void *arg)
{
	(void)arg;
	if (!agent_sampler || getpid() != agent_pid)
		return;
	agent_stop();
	char line[96];
	int n = snprintf(line, sizeof(line), "exit %d %u %u %d %llu\n", (int)getpid(),
			 agent_exec_index, (unsigned)SPROBE_DF_EXIT_EXITED, status & 0xff,
			 (unsigned long long)sprobe_mono_ns());
	sprobe_agent__event(line, (size_t)n);
}

/* Is there a part (or file) named PATH already? */
static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Start this image's sampler: exec_count images of this pid ran before
 * (as far as the environment tells). FORKED: on the start thread of a
 * forked child, which leaves the environment alone (the program's own
 * threads may read it meanwhile; getenv is not safe against setenv). */
static void agent_begin(unsigned exec_count, bool forked)
{
	char buf[64];

	if (!forked) {
		snprintf(buf, sizeof(buf), "%d:%u:%d", (int)getpid(), exec_count,
			 agent_descendant ? 1 : 0);
		sprobe_agent__setenv("STACKPROBE_AGENT_PID", buf);
	}

	struct sprobe_sampler_opts o = { .sz = sizeof(o), .notice = agent_notice };
	double freq = 0, sig = 0, maxstack = 0;
	if (parse_double("STACKPROBE_FREQ", 1, 10000, &freq) ||
	    parse_double("STACKPROBE_SIGNAL", 1, 64, &sig) ||
	    parse_double("STACKPROBE_MAX_STACK", 4096, 256 * 1024, &maxstack))
		return;
	o.freq_hz = freq;
	if (freq > 0)
		agent_freq = freq;
	o.signo = (int)sig;
	/* Without STACKPROBE_SIGNAL, take the highest free real-time signal:
	 * programs that use real-time signals conventionally number theirs
	 * up from SIGRTMIN, and a program that installs its handler after
	 * the agent started would otherwise collide with ours (see the
	 * sigaction wrapper below and docs/LIMITATIONS.md). A forked child
	 * keeps its parent's (the handler it inherited is the agent's). */
	if (!o.signo && agent_signo)
		o.signo = agent_signo;
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
	const char *mode = sprobe_agent__getenv("STACKPROBE_MODE");
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
	const char *zp = sprobe_agent__getenv("STACKPROBE_ZERO_PAUSE");
	if (zp && *zp) {
		if (strcmp(zp, "0") != 0 && strcmp(zp, "1") != 0) {
			agent_msg("STACKPROBE_ZERO_PAUSE=%s: expected 0 or 1%s", zp, "");
			return;
		}
		o.no_zero_pause = zp[0] == '0';
	}
	/* STACKPROBE_LINES=0: no inlined frames or source lines; =1: read
	 * here, from DWARF; =record (the default): none from the agent, the
	 * file's reader adds them (`stackprobe record` after the merge,
	 * `stackprobe report` as it reads a file the agent wrote alone:
	 * userspace/cli/record_lines.c), so the DWARF stays out of the
	 * program's memory (libc's alone is ~12 MB there, docs/PERFORMANCE.md
	 * "Memory, the agent alone"). Continuous profiling makes its pprof
	 * files in the program, with no reader after it: lines are read here
	 * unless said otherwise. */
	const char *lines = sprobe_agent__getenv("STACKPROBE_LINES");
	if (lines && *lines) {
		if (strcmp(lines, "0") != 0 && strcmp(lines, "1") != 0 &&
		    strcmp(lines, "record") != 0) {
			agent_msg("STACKPROBE_LINES=%s: expected 0, 1 or record%s", lines, "");
			return;
		}
		o.no_lines = strcmp(lines, "1") != 0;
		o.lines_by_reader = strcmp(lines, "record") == 0;
	} else if (!agent_continuous) {
		o.no_lines = true;
		o.lines_by_reader = true;
	}
	/* STACKPROBE_NAMES=record (the default but for continuous
	 * profiling, as for lines above): pcs of the system's module files
	 * are named by the file's reader, no symbol table in the program;
	 * =1: named here. */
	const char *names = sprobe_agent__getenv("STACKPROBE_NAMES");
	if (names && *names) {
		if (strcmp(names, "record") != 0 && strcmp(names, "1") != 0) {
			agent_msg("STACKPROBE_NAMES=%s: expected 1 or record%s", names, "");
			return;
		}
		o.names_by_reader = strcmp(names, "record") == 0;
		/* names from the files, then lines from them too (the agent
		 * reads none once names are not its), unless STACKPROBE_LINES=0 */
		if (o.names_by_reader && !(lines && strcmp(lines, "0") == 0))
			o.lines_by_reader = o.no_lines = true;
	} else if (!agent_continuous && !(lines && *lines)) {
		o.names_by_reader = true;
	}
	/* STACKPROBE_CPU_ENGINE=perf|timer|auto: cpu mode's engine (default
	 * auto: perf events where allowed, else CPU timers). */
	const char *eng = sprobe_agent__getenv("STACKPROBE_CPU_ENGINE");
	if (eng && *eng) {
		int e = sprobe_cpu_engine__parse(eng);
		if (e < 0) {
			agent_msg("STACKPROBE_CPU_ENGINE=%s: expected perf, timer, poll or auto%s", eng, "");
			return;
		}
		o.cpu_engine = (uint32_t)e;
	}
	const char *table = sprobe_agent__getenv("STACKPROBE_TABLE");
	if (table && strcmp(table, "off") == 0)
		o.no_table = true;
	else if (table && *table && !agent_descendant)
		o.table_path = table; /* one path: the first process's */
	/* A table already named after our pid is stale: left by our previous
	 * image (exec runs no exit handler) or by a dead process whose pid we
	 * reuse (killed: no exit handler either; killed while it made the
	 * table, it left a file with no header, which open_pid() refuses).
	 * Nothing of this image has made one yet (this runs before main): a
	 * regular file of ours by that name is removed; another user's stays
	 * (the sticky directory keeps it), and the start then says so. */
	if (!o.no_table && !o.table_path) {
		char tpath[64];
		struct stat tst;

		snprintf(tpath, sizeof(tpath), "/dev/shm/stackprobe-%d.table", (int)getpid());
		if (lstat(tpath, &tst) == 0 && S_ISREG(tst.st_mode) && tst.st_uid == geteuid())
			unlink(tpath);
	}
	char *path = NULL;
	if (agent_dir) {
		/* The first free name of this pid: the environment cannot tell
		 * a forked child's exec'd image from a new child (the start
		 * thread does not write it), the directory can. */
		size_t cap = strlen(agent_dir) + 48;
		path = malloc(cap);
		if (!path)
			return;
		for (;; exec_count++) {
			snprintf(path, cap, "%s/%d.%u.part", agent_dir, (int)getpid(), exec_count);
			if (!exists(path) || exec_count > 100000)
				break;
		}
		o.output = path;
	} else if (agent_output) {
		for (;; exec_count++) {
			path = output_path(agent_output, exec_count, agent_descendant);
			if (!path)
				return;
			/* The first process's file is its own to overwrite
			 * (as before); a descendant never overwrites. */
			if (!agent_descendant || !exists(path) || exec_count > 100000)
				break;
			free(path);
		}
		o.output = path;
	}
	agent_exec_index = exec_count;
	o.exec_index = exec_count;
	/* A process the command started: source lines once it has run 1 s
	 * (a build's short processes would each pay the DWARF of libc). */
	if (agent_descendant)
		o.lines_after_ns = 1000000000ull;
	/* Under `record`, a process killed by a signal (Ctrl-C) writes no
	 * trailer: its part holds what reached the file, so records reach it
	 * within 20 ms (the writer thread wakes 50 times a second). */
	if (agent_dir)
		o.flush_interval_ns = 20000000ull;
	/* Live counters for `stackprobe record` (a memfd it created): the
	 * first process's only. Map it and close the descriptor so the
	 * program never sees it. */
	const char *sfd = forked ? NULL : sprobe_agent__getenv("STACKPROBE_STATUS_FD");
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
		sprobe_agent__unsetenv("STACKPROBE_STATUS_FD");
	}
	/* Zero-pause's self-test passed in an ancestor on this kernel: the
	 * processes of a tree skip it (STACKPROBE_ZP_OK holds the key). */
	char zkey[512];
	const char *zok = sprobe_agent__getenv("STACKPROBE_ZP_OK");
	sprobe_capturer__zp_key(zkey, sizeof(zkey));
	o.zero_pause_pretested = zkey[0] && zok && strcmp(zok, zkey) == 0;
	agent_pid = getpid();
	if (agent_control)
		o.exclude_tid = sprobe_agent__control_tid() ? sprobe_agent__control_tid()
							     : sprobe_agent__continuous_tid();
	if (agent_control && !forked) {
		/* Kept for the samplers the control channel starts (the
		 * environment is the program's by then: never read again). */
		agent_signo_fixed = sig > 0;
		agent_base = o;
		agent_base.output = NULL;
		agent_base.status = NULL;
		agent_base.table_path = o.table_path ? strdup(o.table_path) : NULL;
		agent_base.exclude_tid = o.exclude_tid;
		__atomic_store_n(&agent_base_ready, true, __ATOMIC_RELEASE);
		if (agent_idle) {
			agent_signo = 0;
			free(path);
			return;
		}
	}
	agent_sampler = sprobe_sampler__start(&o);
	if (agent_sampler && !forked && !o.zero_pause_pretested && zkey[0] &&
	    sprobe_sampler__zero_pause(agent_sampler, NULL, 0) == 1)
		sprobe_agent__setenv("STACKPROBE_ZP_OK", zkey);
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
	else if (!agent_exit_registered) {
		/* Inherited by a forked child, which checks the pid. */
		agent_exit_registered = true;
		on_exit(agent_on_exit, NULL);
	}
	/* One line at start: which cpu engine, and why (a fact, not a
	 * complaint: "stackprobe:", not "stackprobe agent:"); the first
	 * process's only (a build's hundreds of processes would each print
	 * it). */
	if (agent_sampler && o.mode == SPROBE_MODE_CPU && !agent_descendant) {
		char why[512];

		sprobe_sampler__cpu_engine(agent_sampler, why, sizeof(why));
		agent_say("stackprobe: ", why);
	}
	free(path);
}

/* Pick the capture signal for a sampler started on demand: the one
 * STACKPROBE_SIGNAL named, else the highest real-time signal that is
 * still free now (the program may have taken the one the constructor saw
 * free). Under agent_od_lock. */
static int ondemand_signo(void)
{
	if (agent_signo_fixed)
		return agent_base.signo;
	for (int sg = SIGRTMAX; sg >= SIGRTMIN; sg--) {
		struct sigaction cur;
		if (sigaction(sg, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_handler == SIG_DFL)
			return sg;
	}
	return 0;
}

/* Under agent_od_lock: start a sampler from o, publishing it. */
static int ondemand_run(struct sprobe_sampler_opts *o)
{
	o->signo = ondemand_signo();
	if (!o->signo)
		return -EBUSY;
	__atomic_store_n(&agent_signo, o->signo, __ATOMIC_RELAXED);
	struct sprobe_sampler *s = sprobe_sampler__start(o);
	if (!s) {
		int err = -errno;
		__atomic_store_n(&agent_signo, 0, __ATOMIC_RELAXED);
		return err;
	}
	/* Zero-pause's self-test passed here: later starts skip it. */
	if (sprobe_sampler__zero_pause(s, NULL, 0) == 1)
		agent_base.zero_pause_pretested = true;
	/* Release; pairs with the acquire exchange in agent_stop(). */
	__atomic_store_n(&agent_sampler, s, __ATOMIC_RELEASE);
	if (!agent_exit_registered) {
		agent_exit_registered = true;
		on_exit(agent_on_exit, NULL);
	}
	return 0;
}

bool sprobe_agent__ondemand_ready(void)
{
	return __atomic_load_n(&agent_base_ready, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&agent_ctor_done, __ATOMIC_ACQUIRE);
}

int sprobe_agent__ondemand_start(const char *dir, double freq, uint32_t mode, unsigned *exec_index)
{
	char path[PATH_MAX];
	int err;

	if (!__atomic_load_n(&agent_base_ready, __ATOMIC_ACQUIRE))
		return -ECANCELED; /* the constructor found a bad setting */
	if (freq <= 0) { /* the environment's (continuous.c) */
		freq = agent_base.freq_hz > 0 ? agent_base.freq_hz : 99;
		mode = agent_base.mode;
	}

	if ((size_t)snprintf(path, sizeof(path), "%s/%d.%u.part", dir, (int)getpid(),
			     agent_exec_index) >= sizeof(path))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&agent_od_lock);
	/* STACKPROBE_AGENT=1: the table sampler makes way (one sampler per
	 * process); the recording's sampler publishes the table meanwhile. */
	struct sprobe_sampler *table = __atomic_exchange_n(&agent_sampler, NULL, __ATOMIC_ACQ_REL);
	if (table)
		agent_stop_sampler(table);
	struct sprobe_sampler_opts o = agent_base;
	o.output = path;
	o.freq_hz = freq;
	o.mode = mode;
	/* What a recording keeps if the service is killed meanwhile. */
	o.flush_interval_ns = 20000000ull;
	err = ondemand_run(&o);
	if (err && !agent_idle) {
		struct sprobe_sampler_opts t = agent_base;
		ondemand_run(&t);
	}
	pthread_mutex_unlock(&agent_od_lock);
	*exec_index = agent_exec_index;
	return err;
}

int sprobe_agent__ondemand_stop(void)
{
	int err = 0;

	pthread_mutex_lock(&agent_od_lock);
	struct sprobe_sampler *s = __atomic_exchange_n(&agent_sampler, NULL, __ATOMIC_ACQ_REL);
	if (s)
		err = agent_stop_sampler(s);
	else
		err = -ESRCH; /* stopped already: exit, exec, or the signal taken */
	__atomic_store_n(&agent_signo, 0, __ATOMIC_RELAXED);
	if (!agent_idle) {
		struct sprobe_sampler_opts t = agent_base;
		ondemand_run(&t);
	}
	pthread_mutex_unlock(&agent_od_lock);
	return err;
}

bool sprobe_agent__forked_from_sampler(void)
{
	return agent_sampler && getpid() != agent_pid;
}

void sprobe_agent__forget_parent(void)
{
	sprobe_fd__atfork_child();
	/* The parent's sampler is inert here (its threads did not survive
	 * the fork); what it claimed process-wide is released, its memory
	 * abandoned (it describes the parent). */
	if (agent_sampler && getpid() != agent_pid)
		sprobe_sampler__forget(agent_sampler);
	agent_sampler = NULL;
}

void sprobe_agent__start_forked(void)
{
	if (agent_sampler)
		return;
	agent_descendant = true;
	agent_begin(0, true);
}

static bool env_is(const char *name, const char *val)
{
	const char *v = sprobe_agent__getenv(name);
	return v && strcmp(v, val) == 0;
}

__attribute__((constructor)) static void agent_start(void)
{
	const char *out = sprobe_agent__getenv("STACKPROBE_OUTPUT");
	const char *dir = sprobe_agent__getenv("STACKPROBE_OUTPUT_DIR");
	const char *owner = sprobe_agent__getenv("STACKPROBE_AGENT_PID");
	unsigned exec_count = 0;

	const char *pprof = sprobe_agent__getenv("STACKPROBE_PPROF_DIR");
	bool continuous = (!out || !*out) && (!dir || !*dir) && pprof && *pprof;
	agent_continuous = continuous;
	agent_idle = (!out || !*out) && (!dir || !*dir) &&
		     (env_is("STACKPROBE_AGENT", "idle") || continuous);
	if ((!out || !*out) && (!dir || !*dir) && !env_is("STACKPROBE_AGENT", "1") && !agent_idle)
		return;
	agent_quiet = env_is("STACKPROBE_QUIET", "1");
	/* The companion's BPF object is never used by the agent: keep the
	 * kernel from mapping it around the tables the agent reads. */
	(void)sprobe_pause__object_park();
	/* Children are followed unless STACKPROBE_INHERIT=0 (`record
	 * --no-inherit`); STACKPROBE_FOLLOW_FORK=1 is the old spelling of
	 * the default. */
	agent_inherit = !env_is("STACKPROBE_INHERIT", "0");

	/* Who started sampling first? STACKPROBE_AGENT_PID is "pid:exec:d"
	 * of the image that set it (d: it descends from the first process).
	 * The same pid: this image follows an exec of that one. Another pid:
	 * a child that exec'd (fork + exec inherits the environment). */
	if (owner && *owner) {
		char *end;
		unsigned long opid = strtoul(owner, &end, 10);
		unsigned long n = *end == ':' ? strtoul(end + 1, &end, 10) : 0;
		bool desc = *end == ':' && end[1] == '1';

		if ((pid_t)opid != getpid()) {
			if (!agent_inherit)
				return;
			agent_descendant = true;
		} else {
			exec_count = (unsigned)n + 1;
			agent_descendant = desc;
		}
	}
	if (dir && *dir)
		agent_dir = strdup(dir);
	else if (out && *out)
		agent_output = strdup(out);
	/* The control channel: in the process the agent was started in
	 * (a child that exec'd is its own service, with its own pid), not
	 * under `record` (which samples the tree itself). Its thread is up
	 * before the first sampler, which leaves it out of the captures. */
	/* Continuous profiling (continuous.c) drives the samplers itself:
	 * no control channel then (`record -p` would find it busy). */
	if (continuous)
		agent_control = !agent_descendant && sprobe_agent__continuous_start(pprof, agent_quiet) == 0;
	else
		agent_control = !agent_dir && !agent_output &&
				(agent_idle || env_is("STACKPROBE_CONTROL", "1")) &&
				sprobe_agent__control_start(agent_quiet) == 0;
	if (agent_idle && !agent_control)
		return;
	agent_begin(exec_count, false);
	__atomic_store_n(&agent_ctor_done, true, __ATOMIC_RELEASE);
	if (agent_sampler)
		sprobe_agent__process_init();
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

/* Before an exec: finish this image's part, and tell the recording the
 * image ended by exec (and, if the new program is one the agent cannot
 * enter, that it will not be sampled). The exec may still fail: then the
 * program goes on unsampled in this image (a restart would truncate its
 * part), and the recording lists the exec that did not happen as the
 * end of the part. */
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

static void exec_prepare(const char *path, char *const envp[])
{
	bool active = agent_sampler && getpid() == agent_pid;
	char line[PATH_MAX + 384], why[256];
	unsigned long long now = (unsigned long long)sprobe_mono_ns();
	unsigned next;
	int n;

	if (active) {
		agent_stop();
		n = snprintf(line, sizeof(line), "exit %d %u %u 0 %llu\n", (int)getpid(),
			     agent_exec_index, (unsigned)SPROBE_DF_EXIT_EXECED, now);
		sprobe_agent__event(line, (size_t)n);
		next = agent_exec_index + 1;
	} else if (agent_dir && agent_inherit) {
		/* A forked child that execs before its sampler started (the
		 * fork + exec of shells), or a vfork child: the new image is
		 * the first of this pid the recording has a part for. */
		char part[PATH_MAX];

		for (next = 0; next < 100000; next++) {
			snprintf(part, sizeof(part), "%s/%d.%u.part", agent_dir, (int)getpid(), next);
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
	if (agent_dir && unenterable) {
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

/* ---- the program and the capture signal ------------------------------ */
/*
 * The capture signal is shared (userspace/agent/signal_share.c,
 * backends/linux/chain.c): a program that installs its own handler for it,
 * whenever it does, gets every delivery that is not one of the probe's
 * captures with its own flags and mask, reads back its own disposition,
 * and sampling goes on. The wrappers route a call on the shared signal to
 * signal_share.c and every other call to libc.
 *
 * Every libc entry point that sets a disposition is wrapped, because libc
 * calls its internal sigaction, which an interposer never sees: sigaction,
 * __sigaction, signal, bsd_signal, ssignal, sysv_signal and __sysv_signal
 * (what signal() becomes in a program built without _DEFAULT_SOURCE, e.g.
 * -std=c11), sigset, sigignore. A raw rt_sigaction system call (the Go
 * runtime's) is seen by the capture backend before its next capture round
 * and moved behind the capture handler the same way (chain.c).
 *
 * Sharing is impossible when the program blocks the capture signal to
 * receive it with sigwait/signalfd: a queued capture would be taken by its
 * sigwait. A program that blocks it (sigprocmask, pthread_sigmask, sighold,
 * sigset(SIG_HOLD)) without blocking every real-time signal means to do
 * that: the agent yields the signal (sampling stops, the data file is
 * finished, a line on stderr says why) and the program's call goes through
 * unchanged. A set holding every real-time signal (sigfillset: a thread
 * that wants no signal at all) is not a use of ours: that thread is
 * dropped as "blocked" in each capture, and the others are sampled.
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
		if (sprobe_lx_chain_owns(sig))                                          \
			return sprobe_agent__share_sigaction(sig, act, old);            \
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
#define SIGNAL_WRAPPER(name, idx, flavour)                                        \
	sighandler_t name(int sig, sighandler_t handler)                          \
	{                                                                         \
		signal_fn f = NEXT(signal_fn, idx);                               \
		if (sprobe_lx_chain_owns(sig))                                    \
			return sprobe_agent__share_signal(sig, handler, flavour); \
		if (!f) {                                                         \
			errno = ENOSYS;                                           \
			return SIG_ERR;                                           \
		}                                                                 \
		/* the program's handler behind a trampoline (handler_table.c) */ \
		return sprobe_agent__signal(f, sig, handler);                     \
	}

SIGNAL_WRAPPER(signal, NX_SIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(bsd_signal, NX_BSD_SIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(ssignal, NX_SSIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(sysv_signal, NX_SYSV_SIGNAL, SPROBE_SHARE_SYSV)
SIGNAL_WRAPPER(__sysv_signal, NX___SYSV_SIGNAL, SPROBE_SHARE_SYSV)

sighandler_t sigset(int sig, sighandler_t disp)
{
	signal_fn f = NEXT(signal_fn, NX_SIGSET);
	if (disp == SIG_HOLD)
		agent_yield_signal(sig, "blocks");
	else if (sprobe_lx_chain_owns(sig))
		return sprobe_agent__share_signal(sig, disp, SPROBE_SHARE_SIGSET);
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
	if (sprobe_lx_chain_owns(sig))
		return sprobe_agent__share_signal(sig, SIG_IGN, SPROBE_SHARE_BSD) == SIG_ERR ? -1 : 0;
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

/* Stop s (agent_stop): the capture backend gives the program its
 * disposition of the capture signal back (chain.c). */
static int agent_stop_sampler(struct sprobe_sampler *s)
{
	return sprobe_sampler__stop(s);
}

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

__attribute__((destructor)) static void agent_fini(void)
{
	agent_stop();
}
