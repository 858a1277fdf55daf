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
 * This file orchestrates: it reads the configuration into the agent's
 * state (state.c) and starts what the environment asks for (this image's
 * sampler, the control channel, continuous profiling, the fork handler).
 * The wrappers (exec_wrappers.c, signal_wrappers.c, process_wrappers.c,
 * wait_wrappers.c ...) read the state and never call back in here.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/sampler.h>

#include "userspace/agent/agent_internal.h"
#include "userspace/pause/pause_internal.h"

static int parse_double(const char *name, double lo, double hi, double *out)
{
	const char *v = sprobe_agent__getenv(name);
	char *end;
	if (!v || !*v)
		return 0;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !(d >= lo && d <= hi)) {
		sprobe_agent__msg("%s=%s is not a valid number; not sampling", name, v);
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
			 sprobe_ag.descendant ? 1 : 0);
		sprobe_agent__setenv("STACKPROBE_AGENT_PID", buf);
	}

	struct sprobe_sampler_opts o = { .sz = sizeof(o), .notice = sprobe_agent__notice };
	double freq = 0, sig = 0, maxstack = 0;
	if (parse_double("STACKPROBE_FREQ", 1, 10000, &freq) ||
	    parse_double("STACKPROBE_SIGNAL", 1, 64, &sig) ||
	    parse_double("STACKPROBE_MAX_STACK", 4096, 256 * 1024, &maxstack))
		return;
	o.freq_hz = freq;
	if (freq > 0)
		sprobe_ag.freq = freq;
	o.signo = (int)sig;
	/* Without STACKPROBE_SIGNAL, take the highest free real-time signal:
	 * programs that use real-time signals conventionally number theirs
	 * up from SIGRTMIN, and a program that installs its handler after
	 * the agent started would otherwise collide with ours (see the
	 * sigaction wrapper below and docs/LIMITATIONS.md). A forked child
	 * keeps its parent's (the handler it inherited is the agent's). */
	if (!o.signo && sprobe_ag.signo)
		o.signo = sprobe_ag.signo;
	if (!o.signo) {
		for (int sg = SIGRTMAX; sg >= SIGRTMIN && !o.signo; sg--) {
			struct sigaction cur;
			if (sigaction(sg, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
			    cur.sa_handler == SIG_DFL)
				o.signo = sg;
		}
	}
	sprobe_ag.signo = o.signo;
	o.max_stack_bytes = (size_t)maxstack;
	const char *mode = sprobe_agent__getenv("STACKPROBE_MODE");
	if (mode && *mode) {
		int m = sprobe_sampler_mode__parse(mode);
		if (m < 0) {
			sprobe_agent__msg("STACKPROBE_MODE=%s: expected wall or cpu%s", mode, "");
			return;
		}
		o.mode = (uint32_t)m;
	}
	/* STACKPROBE_ZERO_PAUSE=0: signal every thread, blocked or not
	 * (default 1: wall mode reads blocked threads without a signal). */
	const char *zp = sprobe_agent__getenv("STACKPROBE_ZERO_PAUSE");
	if (zp && *zp) {
		if (strcmp(zp, "0") != 0 && strcmp(zp, "1") != 0) {
			sprobe_agent__msg("STACKPROBE_ZERO_PAUSE=%s: expected 0 or 1%s", zp, "");
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
			sprobe_agent__msg("STACKPROBE_LINES=%s: expected 0, 1 or record%s", lines, "");
			return;
		}
		o.no_lines = strcmp(lines, "1") != 0;
		o.lines_by_reader = strcmp(lines, "record") == 0;
	} else if (!sprobe_ag.continuous) {
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
			sprobe_agent__msg("STACKPROBE_NAMES=%s: expected 1 or record%s", names, "");
			return;
		}
		o.names_by_reader = strcmp(names, "record") == 0;
		/* names from the files, then lines from them too (the agent
		 * reads none once names are not its), unless STACKPROBE_LINES=0 */
		if (o.names_by_reader && !(lines && strcmp(lines, "0") == 0))
			o.lines_by_reader = o.no_lines = true;
	} else if (!sprobe_ag.continuous && !(lines && *lines)) {
		o.names_by_reader = true;
	}
	/* STACKPROBE_CPU_ENGINE=perf|timer|auto: cpu mode's engine (default
	 * auto: perf events where allowed, else CPU timers). */
	const char *eng = sprobe_agent__getenv("STACKPROBE_CPU_ENGINE");
	if (eng && *eng) {
		int e = sprobe_cpu_engine__parse(eng);
		if (e < 0) {
			sprobe_agent__msg("STACKPROBE_CPU_ENGINE=%s: expected perf, timer, poll or auto%s",
					  eng, "");
			return;
		}
		o.cpu_engine = (uint32_t)e;
	}
	const char *table = sprobe_agent__getenv("STACKPROBE_TABLE");
	if (table && strcmp(table, "off") == 0)
		o.no_table = true;
	else if (table && *table && !sprobe_ag.descendant)
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
	if (sprobe_ag.dir) {
		/* The first free name of this pid: the environment cannot tell
		 * a forked child's exec'd image from a new child (the start
		 * thread does not write it), the directory can. */
		size_t cap = strlen(sprobe_ag.dir) + 48;
		path = malloc(cap);
		if (!path)
			return;
		for (;; exec_count++) {
			snprintf(path, cap, "%s/%d.%u.part", sprobe_ag.dir, (int)getpid(), exec_count);
			if (!exists(path) || exec_count > 100000)
				break;
		}
		o.output = path;
	} else if (sprobe_ag.output) {
		for (;; exec_count++) {
			path = output_path(sprobe_ag.output, exec_count, sprobe_ag.descendant);
			if (!path)
				return;
			/* The first process's file is its own to overwrite
			 * (as before); a descendant never overwrites. */
			if (!sprobe_ag.descendant || !exists(path) || exec_count > 100000)
				break;
			free(path);
		}
		o.output = path;
	}
	sprobe_ag.exec_index = exec_count;
	o.exec_index = exec_count;
	/* A process the command started: source lines once it has run 1 s
	 * (a build's short processes would each pay the DWARF of libc). */
	if (sprobe_ag.descendant)
		o.lines_after_ns = 1000000000ull;
	/* Under `record`, a process killed by a signal (Ctrl-C) writes no
	 * trailer: its part holds what reached the file, so records reach it
	 * within 20 ms (the writer thread wakes 50 times a second). */
	if (sprobe_ag.dir)
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
	sprobe_ag.pid = getpid();
	if (sprobe_ag.control)
		o.exclude_tid = sprobe_agent__control_tid() ? sprobe_agent__control_tid()
							     : sprobe_agent__continuous_tid();
	if (sprobe_ag.control && !forked) {
		/* Kept for the samplers the control channel starts (the
		 * environment is the program's by then: never read again). */
		sprobe_ag.signo_fixed = sig > 0;
		sprobe_ag.base = o;
		sprobe_ag.base.output = NULL;
		sprobe_ag.base.status = NULL;
		sprobe_ag.base.table_path = o.table_path ? strdup(o.table_path) : NULL;
		sprobe_ag.base.exclude_tid = o.exclude_tid;
		__atomic_store_n(&sprobe_ag.base_ready, true, __ATOMIC_RELEASE);
		if (sprobe_ag.idle) {
			sprobe_ag.signo = 0;
			free(path);
			return;
		}
	}
	sprobe_ag.sampler = sprobe_sampler__start(&o);
	if (sprobe_ag.sampler && !forked && !o.zero_pause_pretested && zkey[0] &&
	    sprobe_sampler__zero_pause(sprobe_ag.sampler, NULL, 0) == 1)
		sprobe_agent__setenv("STACKPROBE_ZP_OK", zkey);
	if (!sprobe_ag.sampler)
		sprobe_ag.signo = 0;
	if (!sprobe_ag.sampler)
		sprobe_agent__msg("not sampling: %s%s", strerror(errno),
				  errno == EEXIST ? " (a node table for this pid already exists)"
				  : o.mode == SPROBE_MODE_CPU && o.cpu_engine == SPROBE_CPU_ENGINE_PERF
				  ? " (STACKPROBE_CPU_ENGINE=perf: the kernel refused a perf event: "
				    "perf_event_paranoid, CAP_PERFMON or a seccomp profile; "
				    "STACKPROBE_CPU_ENGINE=auto falls back)"
				  : "");
	else
		sprobe_agent__at_exit_once();
	/* One line at start: which cpu engine, and why (a fact, not a
	 * complaint: "stackprobe:", not "stackprobe agent:"); the first
	 * process's only (a build's hundreds of processes would each print
	 * it). */
	if (sprobe_ag.sampler && o.mode == SPROBE_MODE_CPU && !sprobe_ag.descendant) {
		char why[512];

		sprobe_sampler__cpu_engine(sprobe_ag.sampler, why, sizeof(why));
		sprobe_agent__say("stackprobe: ", why);
	}
	free(path);
}

static void agent_start_forked(void)
{
	if (sprobe_ag.sampler)
		return;
	sprobe_ag.descendant = true;
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
	sprobe_ag.continuous = continuous;
	sprobe_ag.idle = (!out || !*out) && (!dir || !*dir) &&
			 (env_is("STACKPROBE_AGENT", "idle") || continuous);
	if ((!out || !*out) && (!dir || !*dir) && !env_is("STACKPROBE_AGENT", "1") && !sprobe_ag.idle)
		return;
	sprobe_ag.quiet = env_is("STACKPROBE_QUIET", "1");
	/* The companion's BPF object is never used by the agent: keep the
	 * kernel from mapping it around the tables the agent reads. */
	(void)sprobe_pause__object_park();
	/* Children are followed unless STACKPROBE_INHERIT=0 (`record
	 * --no-inherit`); STACKPROBE_FOLLOW_FORK=1 is the old spelling of
	 * the default. */
	sprobe_ag.inherit = !env_is("STACKPROBE_INHERIT", "0");

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
			if (!sprobe_ag.inherit)
				return;
			sprobe_ag.descendant = true;
		} else {
			exec_count = (unsigned)n + 1;
			sprobe_ag.descendant = desc;
		}
	}
	if (dir && *dir)
		sprobe_ag.dir = strdup(dir);
	else if (out && *out)
		sprobe_ag.output = strdup(out);
	/* The control channel: in the process the agent was started in
	 * (a child that exec'd is its own service, with its own pid), not
	 * under `record` (which samples the tree itself). Its thread is up
	 * before the first sampler, which leaves it out of the captures. */
	/* Continuous profiling (continuous.c) drives the samplers itself:
	 * no control channel then (`record -p` would find it busy). */
	if (continuous)
		sprobe_ag.control = !sprobe_ag.descendant &&
				    sprobe_agent__continuous_start(pprof, sprobe_ag.quiet) == 0;
	else
		sprobe_ag.control = !sprobe_ag.dir && !sprobe_ag.output &&
				    (sprobe_ag.idle || env_is("STACKPROBE_CONTROL", "1")) &&
				    sprobe_agent__control_start(sprobe_ag.quiet) == 0;
	if (sprobe_ag.idle && !sprobe_ag.control)
		return;
	agent_begin(exec_count, false);
	__atomic_store_n(&sprobe_ag.ctor_done, true, __ATOMIC_RELEASE);
	if (sprobe_ag.sampler)
		sprobe_agent__process_init(agent_start_forked);
}

__attribute__((destructor)) static void agent_fini(void)
{
	sprobe_agent__stop();
}
