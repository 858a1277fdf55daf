/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe record: run a command with the agent preloaded, show a live
 * status line, then print the report.
 *
 * The command's stdin/stdout/stderr are its own (inherited), its exit
 * status is ours (128+N when killed by signal N). The status line and the
 * report go to stderr, so a pipeline on the command's stdout is unchanged.
 *
 * Live status: the agent shares its counters through a memfd created here
 * and inherited by the child (STACKPROBE_STATUS_FD); the agent maps it and
 * closes the descriptor in its constructor, before main() runs.
 *
 * Kernel timestamps (the eBPF companion): the child is forked first and
 * waits on a pipe; the companion is loaded for its pid and the capture
 * signal chosen here (passed as STACKPROBE_SIGNAL), then the child execs.
 * So no window of the command escapes it. Its windows are written into the
 * data file, before the trailer, when the command has ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/sampler.h>

#include "userspace/common/clock.h"
#include "userspace/common/enterable.h"
#include "userspace/datafile/merge.h"
#include "userspace/external/external.h"
#include "userspace/symbols/dwarf_cache.h"

#include "cli.h"

#define DEFAULT_OUTPUT "stackprobe.data"

static void usage(FILE *f)
{
	fputs("Usage: stackprobe record [-F HZ] [--mode wall|cpu] [-o FILE] [--quiet]\n"
	      "                         [--bpf|--no-bpf] [--signal N] [--no-report]\n"
	      "                         [--no-zero-pause] [--no-inherit] [--external]\n"
	      "                         [--cpu-engine perf|timer|poll|auto]\n"
	      "                         -- COMMAND [ARGS...]\n"
	      "       stackprobe record -p PID [-d SECONDS] [-F HZ] [--mode wall|cpu]\n"
	      "                         [--external] [--no-children] [-o FILE] [--quiet]\n"
	      "                         [--no-report]\n"
	      "\n"
	      "Run COMMAND with the stackprobe agent loaded: every thread of every\n"
	      "process it starts (children, exec chains, forked workers) is sampled\n"
	      "from inside the process, each capture's pause is measured, and the\n"
	      "result is written to one data file and summarised.\n"
	      "\n"
	      "Options:\n"
	      "  -F, --freq HZ        captures per second (default 99, max 10000)\n"
	      "  -m, --mode MODE      wall (default): every thread, running or blocked\n"
	      "                       cpu: each thread weighted by its own CPU time\n"
	      "  -o, --output FILE    data file (default " DEFAULT_OUTPUT ")\n"
	      "  -q, --quiet          no status line, no report\n"
	      "      --bpf            insist on kernel timestamps of every capture window\n"
	      "                       (eBPF companion): fail if they cannot be had\n"
	      "      --no-bpf         do not load the eBPF companion (default: load it\n"
	      "                       when privileges allow, else say why and go on)\n"
	      "      --signal N       real-time signal for captures (default SIGRTMAX-2)\n"
	      "      --no-report      no report at the end\n"
	      "      --no-zero-pause  wall mode: signal every thread, also those blocked\n"
	      "                       in the kernel (default: read blocked threads without\n"
	      "                       a signal or pause; docs/capture.md)\n"
	      "      --no-inherit     sample COMMAND's first process only, not the\n"
	      "                       processes it starts\n"
	      "      --external       sample through the kernel (perf events), without the\n"
	      "                       agent: cpu time, DWARF-unwound stacks (default\n"
	      "                       for a command the agent cannot enter: static, set-ID,\n"
	      "                       file capabilities)\n"
	      "      --cpu-engine E   cpu mode: perf (a task-clock perf event per thread:\n"
	      "                       exact, fails if perf events are not allowed), timer\n"
	      "                       (CPU-clock timers: fire at the scheduler tick only),\n"
	      "                       poll (captures at random instants, weighted by each\n"
	      "                       thread's CPU since its previous one) or auto\n"
	      "                       (default: perf where allowed, else poll)\n"
	      "  -p, --pid PID        record the running process PID instead: through its\n"
	      "                       idle agent if it has one (STACKPROBE_AGENT=idle: it\n"
	      "                       samples for the duration, then is idle again), else\n"
	      "                       (or with --external) through the kernel: cpu time,\n"
	      "                       its threads and the children it starts from now on\n"
	      "                       (and the children it has already: below)\n"
	      "  -d, --duration S     with -p: seconds to record (default 30); Ctrl-C\n"
	      "                       ends it early and keeps what was taken\n"
	      "      --no-children    with -p: the process alone; by default the children\n"
	      "                       it has already (a server's forked workers) are\n"
	      "                       recorded too, through the kernel (cpu time)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  stackprobe record -- ./server --port 8080\n"
	      "  stackprobe record -F 999 --mode cpu -o cpu.data -- make -j2\n"
	      "  stackprobe record -p 4242 -d 30 -o service.data\n"
	      "  stackprobe report -i cpu.data --format folded > cpu.folded\n"
	      "\n"
	      "Exit status: the command's own (128+N if killed by signal N); 1 if\n"
	      "stackprobe itself failed, 2 on a usage error.\n", f);
}

static volatile sig_atomic_t forward_sig;
/* The main loop sleeps on this pipe when it has no ring to read: a child
 * that changes state (SIGCHLD) and a new kernel-tier ring
 * (ext_children.c) write a byte, so neither is missed between the check
 * and the sleep. */
static int wake_pipe[2] = { -1, -1 };

static void on_child(int sig)
{
	int saved = errno;

	(void)sig;
	if (wake_pipe[1] >= 0)
		(void)!write(wake_pipe[1], "c", 1);
	errno = saved;
}

/* A terminal's Ctrl-C (SIGINT, SIGQUIT) reaches the command's process
 * group, the command included, by itself: passing it on would deliver it
 * twice (a program that stops cleanly on the first would take the second
 * as "force quit"). The kernel sends those with SI_KERNEL; what someone
 * sent record alone with kill() is passed on. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (si && si->si_code == SI_KERNEL)
		return;
	forward_sig = sig;
}

struct exits {
	struct sprobe_merge_exit *v;
	size_t n, cap;
};

static void exits_add(struct exits *e, pid_t pid, int wst)
{
	if (!WIFEXITED(wst) && !WIFSIGNALED(wst))
		return;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		struct sprobe_merge_exit *v = realloc(e->v, cap * sizeof(*v));
		if (!v)
			return;
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = (struct sprobe_merge_exit){
		.pid = (uint32_t)pid, .exec_index = SPROBE_MERGE_LATEST,
		.how = WIFEXITED(wst) ? SPROBE_DF_EXIT_EXITED : SPROBE_DF_EXIT_KILLED,
		.code = WIFEXITED(wst) ? WEXITSTATUS(wst) : WTERMSIG(wst),
		.time_ns = sprobe_mono_ns(),
	};
}

/* kernel: samples the kernel tier has read so far (it has no status
 * page: record reads its rings itself). */
static void status_line(const struct sprobe_sampler_status *st, uint64_t elapsed_ns,
			unsigned procs, unsigned long long kernel)
{
	uint64_t med = atomic_load_explicit(&st->window_median_ns, memory_order_relaxed);
	fprintf(stderr, "\r\033[Kstackprobe: %6.1fs  processes %-4u samples %-8llu threads %-4u drops %-6llu window p50 %.1f us",
		(double)elapsed_ns / 1e9, procs,
		(unsigned long long)atomic_load_explicit(&st->samples, memory_order_relaxed) + kernel,
		atomic_load_explicit(&st->threads, memory_order_relaxed),
		(unsigned long long)(atomic_load_explicit(&st->threads_dropped, memory_order_relaxed) +
				     atomic_load_explicit(&st->stream_dropped, memory_order_relaxed)),
		(double)med / 1e3);
	uint64_t refused = atomic_load_explicit(&st->rounds_failed, memory_order_relaxed);
	if (refused)
		fprintf(stderr, "  captures refused %llu", (unsigned long long)refused);
	uint64_t skipped = atomic_load_explicit(&st->rounds_skipped, memory_order_relaxed);
	if (skipped)
		fprintf(stderr, "  rounds skipped %llu (below the asked rate)", (unsigned long long)skipped);
	uint64_t lost = atomic_load_explicit(&st->carried_lost, memory_order_relaxed);
	if (lost)
		fprintf(stderr, "  carried captures lost %llu", (unsigned long long)lost);
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "mode", required_argument, NULL, 'm' },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-report", no_argument, NULL, 'R' },
		{ "bpf", no_argument, NULL, 'B' },
		{ "no-bpf", no_argument, NULL, 'N' },
		{ "signal", required_argument, NULL, 'S' },
		{ "no-zero-pause", no_argument, NULL, 'Z' },
		{ "no-inherit", no_argument, NULL, 'I' },
		{ "external", no_argument, NULL, 'X' },
		{ "cpu-engine", required_argument, NULL, 'E' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "no-children", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *output = DEFAULT_OUTPUT, *mode = "wall", *engine = NULL;
	pid_t target = 0;
	double seconds = 0;
	double freq = 99;
	bool quiet = false, report = true, zero_pause = true, inherit = true, external = false;
	bool mode_given = false, no_children = false;
	int bpf = 1; /* 0 off, 1 if possible, 2 insist */
	int signo = SIGRTMAX - 2;
	int c;

	while ((c = getopt_long(argc, argv, "+F:m:o:qhp:d:", opts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (cli_parse_double(optarg, 1, 10000, &freq)) {
				fprintf(stderr, "stackprobe record: -F %s: expected a number of Hz in 1..10000\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'm':
			if (sprobe_sampler_mode__parse(optarg) < 0) {
				fprintf(stderr, "stackprobe record: --mode %s: expected wall or cpu\n", optarg);
				return CLI_EXIT_USAGE;
			}
			mode = optarg;
			mode_given = true;
			break;
		case 'o':
			output = optarg;
			break;
		case 'q':
			quiet = true;
			report = false;
			break;
		case 'R':
			report = false;
			break;
		case 'B':
			bpf = 2;
			break;
		case 'N':
			bpf = 0;
			break;
		case 'Z':
			zero_pause = false;
			break;
		case 'I':
			inherit = false;
			break;
		case 'C':
			no_children = true;
			break;
		case 'X':
			external = true;
			break;
		case 'E':
			if (sprobe_cpu_engine__parse(optarg) < 0) {
				fprintf(stderr, "stackprobe record: --cpu-engine %s: expected perf, timer, poll or auto\n",
					optarg);
				return CLI_EXIT_USAGE;
			}
			engine = optarg;
			break;
		case 'S':
			if (cli_parse_rtsig(optarg, &signo)) {
				fprintf(stderr, "stackprobe record: --signal %s: expected a real-time signal "
						"number in %d..%d\n", optarg, SIGRTMIN, SIGRTMAX);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'p':
			if (cli_parse_pid(optarg, &target)) {
				fprintf(stderr, "stackprobe record: -p %s: expected a process id\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'd':
			if (cli_parse_double(optarg, 0.001, 7 * 24 * 3600, &seconds)) {
				fprintf(stderr, "stackprobe record: -d %s: expected a number of seconds "
						"(at most a week)\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	if (seconds > 0 && !target) {
		fprintf(stderr, "stackprobe record: -d is for -p PID (a command runs until it ends)\n");
		return CLI_EXIT_USAGE;
	}
	if (no_children && !target) {
		fprintf(stderr, "stackprobe record: --no-children is for -p PID (with a command: "
				"--no-inherit)\n");
		return CLI_EXIT_USAGE;
	}
	if (target) {
		if (optind < argc) {
			fprintf(stderr, "stackprobe record: -p PID records a running process: give no "
					"command\n");
			return CLI_EXIT_USAGE;
		}
		struct cli_record_pid_opts po = { .pid = target, .seconds = seconds > 0 ? seconds : 30,
						  .freq = freq, .mode = mode, .mode_given = mode_given,
						  .external = external, .output = output,
						  .quiet = quiet, .report = report,
						  .no_children = no_children };
		return cli_record_pid(&po);
	}
	if (optind >= argc) {
		fprintf(stderr, "stackprobe record: no command given (stackprobe record -- CMD [ARGS])\n");
		return CLI_EXIT_USAGE;
	}
	char agent[PATH_MAX];
	int err = cli_find_agent(agent, sizeof(agent));
	if (err) {
		fprintf(stderr, "stackprobe record: cannot find libstackprobe.so next to the stackprobe "
				"binary or in ../lib (%s); set STACKPROBE_AGENT_LIB\n", strerror(-err));
		return CLI_EXIT_ERROR;
	}
	/* Fail before running anything if the output cannot be written. */
	int probe_fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (probe_fd < 0) {
		fprintf(stderr, "stackprobe record: cannot write %s: %s\n", output, strerror(errno));
		return CLI_EXIT_ERROR;
	}
	close(probe_fd);
	char *abs_out = realpath(output, NULL);
	/* Each process of the tree writes its own part here (next to the
	 * output: same file system); they are merged into the output when
	 * the command has ended, and the directory removed. */
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof(dir), "%s.parts.XXXXXX", abs_out ? abs_out : output) >=
		    sizeof(dir) || !mkdtemp(dir)) {
		fprintf(stderr, "stackprobe record: cannot create a directory next to %s: %s\n", output,
			strerror(errno));
		return CLI_EXIT_ERROR;
	}
	char why[160];
	enum sprobe_enter root_kind = cli_unenterable(argv[optind], why, sizeof(why));
	bool unsampled_root = root_kind != SPROBE_ENTER_OK;
	/* The agent cannot go in: the kernel samples it (the external tier),
	 * except through a set-ID exec, where the kernel drops the events
	 * (the new image is not dumpable). */
	bool no_agent = external || root_kind == SPROBE_ENTER_STATIC;
	bool use_ext = no_agent && root_kind != SPROBE_ENTER_SETID;

	int sfd = memfd_create("stackprobe-status", 0);
	struct sprobe_sampler_status *st = NULL;
	if (sfd >= 0 && ftruncate(sfd, sizeof(*st)) == 0) {
		st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
		if (st == MAP_FAILED)
			st = NULL;
	}

	/* Child environment. */
	const char *old_preload = getenv("LD_PRELOAD");
	size_t plen = strlen(agent) + (old_preload ? strlen(old_preload) + 2 : 1);
	char *preload = malloc(plen);
	char fbuf[32], fdbuf[16], sigbuf[16];
	if (!preload) {
		fprintf(stderr, "stackprobe record: out of memory\n");
		return CLI_EXIT_ERROR;
	}
	snprintf(preload, plen, "%s%s%s", agent, old_preload && *old_preload ? ":" : "",
		 old_preload ? old_preload : "");
	snprintf(fbuf, sizeof(fbuf), "%g", freq);
	snprintf(fdbuf, sizeof(fdbuf), "%d", sfd);
	snprintf(sigbuf, sizeof(sigbuf), "%d", signo);
	int gate[2], execp[2];
	if (pipe2(execp, O_CLOEXEC) < 0) {
		fprintf(stderr, "stackprobe record: pipe: %s\n", strerror(errno));
		return CLI_EXIT_ERROR;
	}
	if (pipe2(gate, O_CLOEXEC) < 0) {
		fprintf(stderr, "stackprobe record: pipe: %s\n", strerror(errno));
		return CLI_EXIT_ERROR;
	}

	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO }, old_int, old_term,
			 old_quit, old_chld;
	struct sigaction sc = { .sa_handler = on_child }; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	/* Orphans of the tree (a daemonising child, a killed parent's
	 * workers) are reparented here, so their end is known too. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGQUIT, &sa, &old_quit);
	sigemptyset(&sc.sa_mask);
	sigaction(SIGCHLD, &sc, &old_chld);

	/* Programs deeper in the tree that the agent cannot enter: the
	 * agent asks, the kernel samples them (ext_children.c). */
	if (wake_pipe[0] < 0 && pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		wake_pipe[0] = wake_pipe[1] = -1;
	struct cli_xkids *xkids = inherit ? cli_xkids__new(dir, freq, quiet, wake_pipe[1]) : NULL;

	/* Source lines: added after the merge, out of the program's memory
	 * (record_lines.c), unless the user chose with STACKPROBE_LINES. */
	const char *lines_env = getenv("STACKPROBE_LINES");
	const char *names_env = getenv("STACKPROBE_NAMES");
	/* "record" is what an outer record set (record -- record -- CMD):
	 * not the user's choice, and this record does the pass itself. */
	bool lines_here = !use_ext && !(lines_env && *lines_env && strcmp(lines_env, "record") != 0);
	bool names_here = lines_here && !(names_env && *names_env && strcmp(names_env, "record") != 0);
	uint64_t t0 = sprobe_mono_ns();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "stackprobe record: fork: %s\n", strerror(errno));
		return CLI_EXIT_ERROR;
	}
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		sigaction(SIGCHLD, &old_chld, NULL);
		if (!no_agent)
			setenv("LD_PRELOAD", preload, 1);
		unsetenv("STACKPROBE_OUTPUT");
		setenv("STACKPROBE_OUTPUT_DIR", dir, 1);
		setenv("STACKPROBE_INHERIT", inherit ? "1" : "0", 1);
		setenv("STACKPROBE_FREQ", fbuf, 1);
		setenv("STACKPROBE_MODE", mode, 1);
		setenv("STACKPROBE_SIGNAL", sigbuf, 1);
		setenv("STACKPROBE_ZERO_PAUSE", zero_pause ? "1" : "0", 1);
		if (lines_here)
			setenv("STACKPROBE_LINES", "record", 1);
		else if (lines_env && strcmp(lines_env, "record") == 0)
			unsetenv("STACKPROBE_LINES");
		if (names_here)
			setenv("STACKPROBE_NAMES", "record", 1);
		else if (names_env && strcmp(names_env, "record") == 0)
			unsetenv("STACKPROBE_NAMES");
		if (engine)
			setenv("STACKPROBE_CPU_ENGINE", engine, 1);
		unsetenv("STACKPROBE_AGENT_PID");
		if (xkids)
			setenv("STACKPROBE_EXTERNAL_SOCK", cli_xkids__name(xkids), 1);
		else
			unsetenv("STACKPROBE_EXTERNAL_SOCK");
		if (st)
			setenv("STACKPROBE_STATUS_FD", fdbuf, 1);
		/* Wait until the parent has attached what it attaches. */
		char go;
		close(gate[1]);
		if (read(gate[0], &go, 1) != 1)
			_exit(CLI_EXIT_ERROR);
		close(execp[0]);
		execvp(argv[optind], argv + optind);
		int e = errno;
		/* The exec failed: say so, and tell the parent (the pipe closes
		 * on a successful exec, so EOF there means it ran). */
		fprintf(stderr, "stackprobe record: cannot run %s: %s\n", argv[optind], strerror(e));
		if (write(execp[1], &e, sizeof(e)) < 0)
			e = errno;
		_exit(e == ENOENT ? 127 : 126);
	}
	free(preload);
	if (sfd >= 0)
		close(sfd);
	close(gate[0]);
	close(execp[1]);

	struct sprobe_ext *ext = NULL;
	if (use_ext) {
		char xwhy[256];
		ext = sprobe_ext__open(pid, freq, dir, xwhy, sizeof(xwhy));
		if (!ext && !quiet)
			fprintf(stderr, "stackprobe record: cannot sample %s through the kernel: %s\n",
				argv[optind], xwhy);
	}
	const char *kwhy = ext ? sprobe_ext__kernel_why(ext) : NULL;
	if (unsampled_root && root_kind != SPROBE_ENTER_SETID && !quiet)
		fprintf(stderr, "stackprobe record: %s %s; %s%s%s\n", argv[optind], why,
			ext ? "sampled through the kernel instead (perf events: cpu time, stacks "
			      "unwound from the kernel's copies)"
			    : "it runs unsampled (its exit status is passed through)",
			kwhy ? "; " : "", kwhy ? kwhy : "");
	else if (ext && !quiet)
		fprintf(stderr, "stackprobe record: sampling through the kernel (perf events: cpu "
				"time, stacks unwound from the kernel's copies), without the agent%s%s\n",
			kwhy ? "; " : "", kwhy ? kwhy : "");

	struct sprobe_pause *kp = NULL;
	if (bpf) {
		struct sprobe_pause_opts po = {
			.sz = sizeof(po),
			.tgid = pid,
			.signo = signo,
			.mode = strcmp(mode, "cpu") == 0 ? SPROBE_PAUSE_MODE_TIMER : SPROBE_PAUSE_MODE_PROBE,
			.quiet = true,
			/* Every process of the tree, from its first instruction. */
			.follow_children = inherit,
		};
		kp = sprobe_pause__new(&po);
		if (!kp) {
			char bwhy[512];
			int e = errno;
			sprobe_pause__strerror(-e, bwhy, sizeof(bwhy));
			if (bpf == 2) {
				fprintf(stderr, "stackprobe record: --bpf: %s\n", bwhy);
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				return CLI_EXIT_ERROR;
			}
			if (!quiet)
				fprintf(stderr, "stackprobe record: recording without kernel timestamps: %s\n",
					bwhy);
		}
	}
	/* Let the child exec the command. */
	if (write(gate[1], "g", 1) != 1) {
		fprintf(stderr, "stackprobe record: cannot start the command: %s\n", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		sprobe_pause__free(kp);
		return CLI_EXIT_ERROR;
	}
	close(gate[1]);

	/* A set-ID command: the kernel drops perf events at its exec, so the
	 * external tier attaches right after it (the exec pipe is
	 * close-on-exec: its end of file is the exec). What the loader and
	 * the program's first instructions do before the attach is not
	 * sampled. */
	int exec_errno = 0;
	bool exec_read = false;
	if (root_kind == SPROBE_ENTER_SETID) {
		char xwhy[256];
		ssize_t r = read(execp[0], &exec_errno, sizeof(exec_errno));

		exec_read = true;
		if (r != (ssize_t)sizeof(exec_errno))
			exec_errno = 0;
		if (r == 0)
			ext = sprobe_ext__attach(pid, freq, dir, xwhy, sizeof(xwhy));
		if (!quiet && r == 0)
			fprintf(stderr, "stackprobe record: %s %s; %s%s\n", argv[optind], why,
				ext ? "sampled through the kernel, attached just after its exec (the "
				      "kernel drops perf events at a set-ID exec)"
				    : "it runs unsampled: ",
				ext ? "" : xwhy);
	}
	if (unsampled_root && !ext && !exec_errno) {
		char line[PATH_MAX + 256];
		int n = snprintf(line, sizeof(line), "unsampled %d 0 %llu %s\t%s\n", (int)pid,
				 (unsigned long long)sprobe_mono_ns(), argv[optind], why + 3);
		char ev[PATH_MAX + 8];
		snprintf(ev, sizeof(ev), "%s/events", dir);
		int efd = open(ev, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (efd >= 0) {
			if (n > 0 && (size_t)n < sizeof(line) && write(efd, line, (size_t)n) < 0)
				n = 0;
			close(efd);
		}
	}

	bool tty = !quiet && st && isatty(STDERR_FILENO);
	int wst = 0;
	struct exits ends = { 0 };
	for (;;) {
		int ws;
		/* Any child: the command, or an orphan of its tree. */
		bool rings = ext || (xkids && cli_xkids__count(xkids));
		pid_t w = waitpid(-1, &ws, WNOHANG);
		if (w > 0) {
			exits_add(&ends, w, ws);
			if (w == pid) {
				wst = ws;
				break;
			}
			continue;
		}
		if (w < 0 && errno != EINTR) {
			fprintf(stderr, "stackprobe record: waitpid: %s\n", strerror(errno));
			return CLI_EXIT_ERROR;
		}
		if (forward_sig) {
			kill(pid, forward_sig);
			forward_sig = 0;
		}
		if (tty) {
			unsigned long long ks = 0, kl;

			if (ext)
				sprobe_ext__counts(ext, &ks, &kl);
			/* Kernel-tier processes write their parts at the end:
			 * counted by the events that sample them. */
			status_line(st, sprobe_mono_ns() - t0,
				    cli_count_processes(dir) + (ext ? 1 : 0) +
					    (unsigned)(xkids ? cli_xkids__count(xkids) : 0),
				    ks + (xkids ? cli_xkids__samples(xkids) : 0));
		}
		if (ext)
			sprobe_ext__poll(ext);
		if (xkids)
			cli_xkids__poll(xkids);
		char drain[64];
		if (w == 0 && wake_pipe[0] >= 0)
			while (read(wake_pipe[0], drain, sizeof(drain)) > 0)
				;
		if (w < 0 || (w = waitpid(-1, &ws, WNOHANG)) == 0) {
			/* Nothing ended since the wake-ups were drained: sleep
			 * until one, or the rings' interval. */
			struct pollfd wp = { .fd = wake_pipe[0], .events = POLLIN };
			if (kp)
				sprobe_pause__poll(kp, tty ? 250 : 50);
			else if (tty || rings || wake_pipe[0] < 0)
				poll(wake_pipe[0] >= 0 ? &wp : NULL, wake_pipe[0] >= 0, tty ? 250 : 50);
			else
				poll(&wp, 1, -1);
		} else if (w > 0) {
			exits_add(&ends, w, ws);
			if (w == pid) {
				wst = ws;
				break;
			}
		}
	}
	/* Orphans that ended meanwhile. */
	for (int ws; ;) {
		pid_t w = waitpid(-1, &ws, WNOHANG);
		if (w <= 0)
			break;
		exits_add(&ends, w, ws);
	}
	if (kp) {
		/* The command is gone: collect what the ring buffer still holds. */
		while (sprobe_pause__poll(kp, 0) > 0)
			;
	}
	if (tty)
		fputs("\r\033[K", stderr);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	sigaction(SIGCHLD, &old_chld, NULL);

	if (ext) {
		int np = sprobe_ext__finish(ext);
		unsigned long long xs, xl;
		sprobe_ext__counts(ext, &xs, &xl);
		if (np < 0)
			fprintf(stderr, "stackprobe record: could not write the kernel's samples: %s\n",
				strerror(-np));
		else if (!quiet && xl)
			fprintf(stderr, "stackprobe record: the kernel lost %llu samples (ring full)\n", xl);
		sprobe_ext__free(ext);
	}
	if (xkids) {
		unsigned long long xl;

		cli_xkids__finish(xkids, &xl);
		if (!quiet && xl)
			fprintf(stderr, "stackprobe record: the kernel lost %llu samples (ring full)\n", xl);
		cli_xkids__free(xkids);
	}
	/* Even with --quiet, as when the agents printed them themselves:
	 * they are about the recording (STACKPROBE_QUIET=1 silences them). */
	cli_print_agent_messages(dir);
	/* Processes killed by a signal ran no exit handler: remove the node
	 * tables they left. */
	cli_remove_stale_tables(dir);
	if (!exec_read && read(execp[0], &exec_errno, sizeof(exec_errno)) != (ssize_t)sizeof(exec_errno))
		exec_errno = 0;
	close(execp[0]);
	if (exec_errno) {
		/* Nothing ran: no recording (the message is out already). */
		sprobe_pause__free(kp);
		cli_remove_dir(dir);
		unlink(output);
		free(ends.v);
		free(abs_out);
		if (st)
			munmap(st, sizeof(*st));
		return WIFEXITED(wst) ? WEXITSTATUS(wst) : CLI_EXIT_ERROR;
	}

	int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
	if (!quiet && WIFSIGNALED(wst))
		fprintf(stderr, "stackprobe record: %s was killed by signal %d (%s)\n", argv[optind],
			WTERMSIG(wst), strsignal(WTERMSIG(wst)));

	size_t nk = 0;
	const struct sprobe_pause_kwindow *kw = kp ? sprobe_pause__windows(kp, &nk) : NULL;
	struct sprobe_df_kwindow *dkw = nk ? calloc(nk, sizeof(*dkw)) : NULL;
	uint32_t *ktg = nk ? calloc(nk, sizeof(*ktg)) : NULL;
	if (nk && (!dkw || !ktg))
		nk = 0;
	for (size_t i = 0; i < nk; i++) {
		dkw[i] = (struct sprobe_df_kwindow){ .tid = (uint32_t)kw[i].tid,
						     .generate_ns = kw[i].generate_ns,
						     .deliver_ns = kw[i].deliver_ns,
						     .sigreturn_ns = kw[i].sigreturn_ns,
						     .offcpu_ns = kw[i].offcpu_ns };
		ktg[i] = kw[i].tgid > 0 ? (uint32_t)kw[i].tgid : (uint32_t)pid;
	}
	/* The kernel's word on how each process of the tree ended (also the
	 * grandchildren record is not the parent of). */
	size_t nx = 0;
	const struct sprobe_pause_exit *kx = kp ? sprobe_pause__exits(kp, &nx) : NULL;
	for (size_t i = 0; i < nx; i++)
		exits_add(&ends, kx[i].tgid, kx[i].exit_code);
	struct sprobe_merge_opts mo = { .dir = dir, .output = output, .exits = ends.v,
					.nexits = ends.n, .kw = dkw, .kw_tgid = ktg, .nkw = nk,
					.root_pid = pid };
	struct sprobe_merge_result mr;
	int merr = sprobe_merge__dir(&mo, &mr);
	free(dkw);
	free(ktg);
	free(ends.v);
	if (merr < 0) {
		fprintf(stderr, "stackprobe record: could not write %s: %s; the processes' parts are "
				"kept in %s\n", output, strerror(-merr), dir);
		report = false;
		if (code == 0)
			code = CLI_EXIT_ERROR;
	} else {
		cli_remove_dir(dir);
		/* Always: JIT maps written at exit are read here whatever the
		 * agents did with names and lines (the pass adds lines only to
		 * parts whose header asks). */
		{
			char lwhy[256];
			struct cli_lines_opts lo = { .jit = true };
			long nl = cli_record_lines(output, &lo, lwhy, sizeof(lwhy));

			if (nl < 0)
				fprintf(stderr, "stackprobe record: %s keeps no source lines%s: %s\n", output,
					names_here ? " and no names of module files" : "",
					lwhy[0] ? lwhy : strerror((int)-nl));
			const char *cdir = NULL;
			int cerr = sprobe_dwarf_cache__problem(&cdir);

			if (cerr && !quiet)
				fprintf(stderr,
					"stackprobe record: DWARF image cache %s not used (%s): "
					"each run inflates debug sections again "
					"(STACKPROBE_DWARF_CACHE=DIR or off)\n",
					cdir ? cdir : "", cerr == -EPERM
								  ? "not this user's alone"
								  : strerror(-cerr));
		}
		if (!quiet) {
			fprintf(stderr, "stackprobe record: wrote %s (%.2f s, %u process%s", output,
				(double)(sprobe_mono_ns() - t0) / 1e9, mr.processes,
				mr.processes == 1 ? "" : "es");
			if (mr.unsampled)
				fprintf(stderr, ", %u not sampled", mr.unsampled);
			if (kp) {
				struct sprobe_pause_stats ps;
				sprobe_pause__stats(kp, &ps);
				fprintf(stderr, ", %zu kernel windows, %llu lost", mr.kwindows,
					(unsigned long long)(ps.lost + ps.no_state + ps.missed));
			}
			fputs(")\n", stderr);
			if (mr.damaged)
				fprintf(stderr, "stackprobe record: damaged part: %s\n", mr.damaged_what);
		}
	}
	sprobe_pause__free(kp);
	if (report)
		cli_report_text(output);
	free(abs_out);
	if (st)
		munmap(st, sizeof(*st));
	return code;
}
