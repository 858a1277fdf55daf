/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe pause PID: watch, from the kernel, every capture window that
 * an agent-enabled process opens in its own threads, and print what they
 * cost: delivery latency (signal generated -> handler entered), the pause
 * (handler entered -> rt_sigreturn) and the time spent off CPU inside it.
 *
 * Needs the eBPF companion (root, or CAP_BPF + CAP_PERFMON). The capture
 * signal is found in the target's initial environment (STACKPROBE_SIGNAL,
 * set by `stackprobe record`), else among the real-time signals it catches
 * (/proc/PID/status SigCgt) when there is exactly one; --signal overrides.
 *
 * Exit status: 0 ok, 1 runtime error, 2 usage error.
 */
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/pause.h>

#include "userspace/common/clock.h"

#include "cli.h"

static void usage(FILE *f)
{
	fputs("Usage: stackprobe pause PID [-d SECONDS] [--signal N] [-v]\n"
	      "\n"
	      "Measure from the kernel (eBPF) every capture window the stackprobe\n"
	      "agent opens in the threads of PID, until SECONDS have passed, the\n"
	      "process exits, or Ctrl-C.\n"
	      "\n"
	      "Options:\n"
	      "  -d, --duration SECONDS  stop after this long (default: until exit or Ctrl-C)\n"
	      "  -s, --signal N          the agent's capture signal (default: found in\n"
	      "                          /proc/PID/environ or /proc/PID/status)\n"
	      "  -v, --verbose           libbpf's debug output\n"
	      "  -h, --help              show this help\n"
	      "\n"
	      "Examples:\n"
	      "  STACKPROBE_AGENT=1 LD_PRELOAD=build/libstackprobe.so ./server &\n"
	      "  sudo stackprobe pause $! -d 10\n"
	      "\n"
	      "Exit status: 0 ok, 1 error (no such process, no privilege, no signal\n"
	      "found), 2 usage error.\n", f);
}

static volatile sig_atomic_t stop_req;
static void on_int(int sig)
{
	(void)sig;
	stop_req = 1;
}

/* STACKPROBE_SIGNAL from the initial environment of pid, or 0. */
static int signal_from_environ(pid_t pid)
{
	char path[64], buf[65536];
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		if (strncmp(buf + i, "STACKPROBE_SIGNAL=", 18) == 0)
			return atoi(buf + i + 18);
	return 0;
}

/* The only real-time signal pid catches, 0 if none, -1 if several. */
static int signal_from_status(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	unsigned long long mask = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigCgt: %llx", &mask) == 1)
			break;
	fclose(f);
	int found = 0;
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++) {
		if (!(mask & (1ull << (sig - 1))))
			continue;
		if (found)
			return -1;
		found = sig;
	}
	return found;
}

int cmd_pause(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "signal", required_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	double seconds = 0;
	int signo = 0, c;
	bool verbose = false;

	while ((c = getopt_long(argc, argv, "d:s:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			/* DBL_MIN, the least positive double: (0, 86400]. */
			if (cli_parse_double(optarg, DBL_MIN, 86400, &seconds)) {
				fprintf(stderr, "stackprobe pause: -d %s: expected seconds in (0, 86400]\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 's':
			if (cli_parse_rtsig(optarg, &signo)) {
				fprintf(stderr, "stackprobe pause: --signal %s: expected %d..%d\n", optarg,
					SIGRTMIN, SIGRTMAX);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	pid_t pid;
	if (optind != argc - 1 || cli_parse_pid(argv[optind], &pid)) {
		fprintf(stderr, "stackprobe pause: expected one PID\n");
		return CLI_EXIT_USAGE;
	}
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		fprintf(stderr, "stackprobe pause: no process with pid %d\n", pid);
		return CLI_EXIT_ERROR;
	}
	if (!signo)
		signo = signal_from_environ(pid);
	if (!signo) {
		signo = signal_from_status(pid);
		if (signo <= 0) {
			fprintf(stderr, "stackprobe pause: %s; give the capture signal with --signal N\n",
				signo < 0 ? "pid catches several real-time signals"
					  : "pid catches no real-time signal (is the agent loaded?)");
			return CLI_EXIT_ERROR;
		}
	}

	struct sprobe_pause_opts po = { .sz = sizeof(po), .tgid = pid, .signo = signo,
					.verbose = verbose, .quiet = true };
	struct sprobe_pause *kp = sprobe_pause__new(&po);
	if (!kp) {
		char why[512];
		sprobe_pause__strerror(-errno, why, sizeof(why));
		fprintf(stderr, "stackprobe pause: %s\n", why);
		return CLI_EXIT_ERROR;
	}
	struct sigaction sa = { .sa_handler = on_int };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fprintf(stderr, "stackprobe pause: watching pid %d, signal %d%s\n", pid, signo,
		seconds > 0 ? "" : " (Ctrl-C to stop)");

	uint64_t t0 = sprobe_mono_ns(), end_ns = seconds > 0 ? t0 + (uint64_t)(seconds * 1e9) : 0;
	while (!stop_req) {
		sprobe_pause__poll(kp, 100);
		if (end_ns && sprobe_mono_ns() >= end_ns)
			break;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			break;
	}
	while (sprobe_pause__poll(kp, 0) > 0)
		;
	uint64_t wall = sprobe_mono_ns() - t0;

	size_t nk = 0;
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(kp, &nk);
	struct sprobe_pause_stats ps;
	sprobe_pause__stats(kp, &ps);
	struct sprobe_pause_merge_opts mo = { .sz = sizeof(mo), .wall_ns = wall,
					      .kernel_lost = ps.lost + ps.no_state + ps.missed };
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, NULL, 0, &mo);
	int rc = CLI_EXIT_OK;
	printf("pid %d: %zu capture windows in %.2f s (%llu lost)\n", pid, nk, (double)wall / 1e9,
	       (unsigned long long)mo.kernel_lost);
	if (!m || sprobe_pause_merge__print(m, stdout) < 0)
		rc = CLI_EXIT_ERROR;
	if (nk == 0)
		fprintf(stderr, "stackprobe pause: no capture window seen: is the agent sampling pid %d "
				"with signal %d?\n", pid, signo);
	sprobe_pause_merge__free(m);
	sprobe_pause__free(kp);
	return rc;
}
