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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/sampler.h>
#include <stackprobe/table.h>

#include "userspace/common/clock.h"

#include "cli.h"

#define DEFAULT_OUTPUT "stackprobe.data"

static void usage(FILE *f)
{
	fputs("Usage: stackprobe record [-F HZ] [--mode wall|cpu] [-o FILE] [--quiet]\n"
	      "                         [--bpf|--no-bpf] [--signal N] [--no-report]\n"
	      "                         [--no-zero-pause] [--cpu-engine perf|timer|poll|auto]\n"
	      "                         -- COMMAND [ARGS...]\n"
	      "\n"
	      "Run COMMAND with the stackprobe agent loaded: every thread is sampled\n"
	      "from inside the process, each capture's pause is measured, and the\n"
	      "result is written to a data file and summarised.\n"
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
	      "      --cpu-engine E   cpu mode: perf (a task-clock perf event per thread:\n"
	      "                       exact, fails if perf events are not allowed), timer\n"
	      "                       (CPU-clock timers: fire at the scheduler tick only),\n"
	      "                       poll (captures at random instants, weighted by each\n"
	      "                       thread's CPU since its previous one) or auto\n"
	      "                       (default: perf where allowed, else timer)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  stackprobe record -- ./server --port 8080\n"
	      "  stackprobe record -F 999 --mode cpu -o cpu.data -- make -j2\n"
	      "  stackprobe report -i cpu.data --format folded > cpu.folded\n"
	      "\n"
	      "Exit status: the command's own (128+N if killed by signal N); 1 if\n"
	      "stackprobe itself failed, 2 on a usage error.\n", f);
}

/* The agent library: $STACKPROBE_AGENT_LIB, else next to this executable
 * (build tree), else ../lib (installed). */
static int find_agent(char *out, size_t len)
{
	const char *env = getenv("STACKPROBE_AGENT_LIB");
	char exe[PATH_MAX];
	static const char *const rel[] = { "libstackprobe.so", "../lib/libstackprobe.so",
					   "../lib/libstackprobe.so.0" };

	if (env && *env) {
		if (access(env, R_OK) != 0)
			return -errno;
		snprintf(out, len, "%s", env);
		return 0;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if ((size_t)snprintf(out, len, "%s/%s", exe, rel[i]) >= len)
			continue;
		if (access(out, R_OK) == 0) {
			char *r = realpath(out, NULL);
			if (r) {
				snprintf(out, len, "%s", r);
				free(r);
			}
			return 0;
		}
	}
	return -ENOENT;
}

static volatile sig_atomic_t forward_sig;
static void on_signal(int sig)
{
	forward_sig = sig;
}

static void status_line(const struct sprobe_sampler_status *st, uint64_t elapsed_ns)
{
	uint64_t med = atomic_load_explicit(&st->window_median_ns, memory_order_relaxed);
	fprintf(stderr, "\r\033[Kstackprobe: %6.1fs  samples %-8llu threads %-4u drops %-6llu window p50 %.1f us",
		(double)elapsed_ns / 1e9,
		(unsigned long long)atomic_load_explicit(&st->samples, memory_order_relaxed),
		atomic_load_explicit(&st->threads, memory_order_relaxed),
		(unsigned long long)(atomic_load_explicit(&st->threads_dropped, memory_order_relaxed) +
				     atomic_load_explicit(&st->stream_dropped, memory_order_relaxed)),
		(double)med / 1e3);
	uint64_t refused = atomic_load_explicit(&st->rounds_failed, memory_order_relaxed);
	if (refused)
		fprintf(stderr, "  captures refused %llu", (unsigned long long)refused);
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
		{ "cpu-engine", required_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *output = DEFAULT_OUTPUT, *mode = "wall", *engine = NULL;
	double freq = 99;
	bool quiet = false, report = true, zero_pause = true;
	int bpf = 1; /* 0 off, 1 if possible, 2 insist */
	int signo = SIGRTMAX - 2;
	int c;

	while ((c = getopt_long(argc, argv, "+F:m:o:qh", opts, NULL)) != -1) {
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
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "stackprobe record: no command given (stackprobe record -- CMD [ARGS])\n");
		return CLI_EXIT_USAGE;
	}
	char agent[PATH_MAX];
	int err = find_agent(agent, sizeof(agent));
	if (err) {
		fprintf(stderr, "stackprobe record: cannot find libstackprobe.so next to the stackprobe "
				"binary or in ../lib (%s); set STACKPROBE_AGENT_LIB\n", strerror(-err));
		return CLI_EXIT_ERROR;
	}
	/* Fail before running anything if the output cannot be written. */
	int probe_fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (probe_fd < 0) {
		fprintf(stderr, "stackprobe record: cannot write %s: %s\n", output, strerror(errno));
		return CLI_EXIT_ERROR;
	}
	close(probe_fd);
	char *abs_out = realpath(output, NULL);

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
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0) {
		fprintf(stderr, "stackprobe record: pipe: %s\n", strerror(errno));
		return CLI_EXIT_ERROR;
	}

	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term, old_quit;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGQUIT, &sa, &old_quit);

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
		setenv("LD_PRELOAD", preload, 1);
		setenv("STACKPROBE_OUTPUT", abs_out ? abs_out : output, 1);
		setenv("STACKPROBE_FREQ", fbuf, 1);
		setenv("STACKPROBE_MODE", mode, 1);
		setenv("STACKPROBE_SIGNAL", sigbuf, 1);
		setenv("STACKPROBE_ZERO_PAUSE", zero_pause ? "1" : "0", 1);
		if (engine)
			setenv("STACKPROBE_CPU_ENGINE", engine, 1);
		unsetenv("STACKPROBE_AGENT_PID");
		if (st)
			setenv("STACKPROBE_STATUS_FD", fdbuf, 1);
		/* Wait until the parent has attached what it attaches. */
		char go;
		close(gate[1]);
		if (read(gate[0], &go, 1) != 1)
			_exit(CLI_EXIT_ERROR);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "stackprobe record: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	free(preload);
	if (sfd >= 0)
		close(sfd);
	close(gate[0]);

	struct sprobe_pause *kp = NULL;
	if (bpf) {
		struct sprobe_pause_opts po = {
			.sz = sizeof(po),
			.tgid = pid,
			.signo = signo,
			.mode = strcmp(mode, "cpu") == 0 ? SPROBE_PAUSE_MODE_TIMER : SPROBE_PAUSE_MODE_PROBE,
			.quiet = true,
		};
		kp = sprobe_pause__new(&po);
		if (!kp) {
			char why[512];
			int e = errno;
			sprobe_pause__strerror(-e, why, sizeof(why));
			if (bpf == 2) {
				fprintf(stderr, "stackprobe record: --bpf: %s\n", why);
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				return CLI_EXIT_ERROR;
			}
			if (!quiet)
				fprintf(stderr, "stackprobe record: recording without kernel timestamps: %s\n",
					why);
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

	bool tty = !quiet && st && isatty(STDERR_FILENO);
	int wst = 0;
	for (;;) {
		pid_t w = waitpid(pid, &wst, tty || kp ? WNOHANG : 0);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			fprintf(stderr, "stackprobe record: waitpid: %s\n", strerror(errno));
			return CLI_EXIT_ERROR;
		}
		if (forward_sig) {
			kill(pid, forward_sig);
			forward_sig = 0;
		}
		if (tty)
			status_line(st, sprobe_mono_ns() - t0);
		if (kp)
			sprobe_pause__poll(kp, tty ? 250 : 50);
		else if (tty)
			poll(NULL, 0, 250);
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

	/* A command killed by a signal ran no exit handler: remove the node
	 * table its agent left (only a file of ours naming that pid). */
	struct sprobe_table *left = sprobe_table__open_pid(pid, NULL);
	if (left) {
		char tpath[64];
		snprintf(tpath, sizeof(tpath), "/dev/shm/stackprobe-%d.table", (int)pid);
		sprobe_table__close(left);
		unlink(tpath);
	}

	int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
	if (!quiet) {
		if (WIFSIGNALED(wst))
			fprintf(stderr, "stackprobe record: %s was killed by signal %d (%s)\n",
				argv[optind], WTERMSIG(wst), strsignal(WTERMSIG(wst)));
		fprintf(stderr, "stackprobe record: wrote %s (%.2f s)\n", output,
			(double)(sprobe_mono_ns() - t0) / 1e9);
	}
	if (kp) {
		size_t nk = 0;
		const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(kp, &nk);
		struct sprobe_pause_stats ps;
		sprobe_pause__stats(kp, &ps);
		int merr = sprobe_pause__splice_windows(output, kw, nk);
		if (merr < 0)
			fprintf(stderr, "stackprobe record: could not add %zu kernel windows to %s: %s\n",
				nk, output, strerror(-merr));
		else if (!quiet)
			fprintf(stderr, "stackprobe record: %zu kernel windows (%llu lost) added to %s\n", nk,
				(unsigned long long)(ps.lost + ps.no_state + ps.missed), output);
		sprobe_pause__free(kp);
	}
	if (report) {
		struct sprobe_report_opts ro = { .sz = sizeof(ro), .source = output };
		struct sprobe_report *r = sprobe_report__new(&ro);
		if (r) {
			int lerr = sprobe_report__load_file(r, output);
			if (lerr < 0 && sprobe_report__samples(r) == 0)
				fprintf(stderr, "stackprobe record: %s: %s\n", output,
					sprobe_report__message(r)[0] ? sprobe_report__message(r)
								      : strerror(-lerr));
			else
				sprobe_report__write(r, stderr, SPROBE_REPORT_TEXT);
			sprobe_report__free(r);
		}
	}
	free(abs_out);
	if (st)
		munmap(st, sizeof(*st));
	return code;
}
