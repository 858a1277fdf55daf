/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CLI commands. Each command lives in userspace/cli/cmd_<name>.c and is one
 * row of the table in main.c. A command gets argv with argv[0] = its name,
 * parses its own options with getopt_long, and returns the process exit
 * status: 0 success, 1 runtime error, 2 usage error.
 */
#ifndef SPROBE_CLI_H
#define SPROBE_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

struct cli_command {
	const char *name;
	const char *summary;	/* one line for `stackprobe --help` */
	int (*run)(int argc, char **argv);
};

/* The end of a command's getopt switch for -h/--help (c == 'h': usage on
 * stdout, CLI_EXIT_OK) and for anything getopt refused (usage on stderr,
 * CLI_EXIT_USAGE). */
int cli_usage_exit(void (*usage)(FILE *), int c);

/*
 * Strict number parsing for options and operands (parse.c): decimal digits
 * only for integers (no blanks, no sign, no trailing junk), the whole
 * string for doubles; the value must lie in [min, max]. Return 0 with *out
 * set, or -EINVAL with *out untouched.
 */
int cli_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out);
int cli_parse_double(const char *s, double min, double max, double *out);
/* A process id, 1..PID_MAX_LIMIT. */
int cli_parse_pid(const char *s, pid_t *out);
/* A real-time signal number, SIGRTMIN..SIGRTMAX (Linux). */
int cli_parse_rtsig(const char *s, int *out);

int cmd_record(int argc, char **argv);

/* `stackprobe record -p PID` (cmd_record_pid.c): a recording of a running
 * process whose agent listens (docs/AGENT.md "On demand"). Returns the
 * exit status. */
struct cli_record_pid_opts {
	pid_t pid;
	double seconds;
	double freq;
	const char *mode;	/* "wall" | "cpu" */
	const char *output;
	bool quiet, report;
};
int cli_record_pid(const struct cli_record_pid_opts *o);
/*
 * Name the pcs the agents left unnamed (symbol records with a module and
 * no name: STACKPROBE_NAMES=record) and add the source view of each named
 * pc (srcline records, docs/FORMAT.md type 12) to the merged recording at
 * path, from the files its module records name (build-id checked):
 * `record` runs it when its agents wrote neither (STACKPROBE_LINES=record,
 * record_lines.c says why). Rewrites the file through a temporary one
 * beside it, renamed over it only when the whole pass succeeded. Returns
 * the number of srcline records added, or -errno with the file unchanged
 * (msg, when not empty, says why). Not thread-safe.
 */
long cli_record_lines(const char *path, char *msg, size_t msg_len);
int cmd_report(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_pause(int argc, char **argv);

#endif
