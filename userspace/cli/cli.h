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
 * process: through its agent when one listens (docs/AGENT.md "On
 * demand"), else (or with --external) through the kernel
 * (cmd_record_ext.c, the external tier). Returns the exit status. */
struct cli_record_pid_opts {
	pid_t pid;
	double seconds;
	double freq;
	const char *mode;	/* "wall" | "cpu" */
	bool mode_given;	/* --mode was on the command line */
	bool external;		/* --external: the kernel tier even if an agent listens */
	const char *output;
	bool quiet, report;
};
int cli_record_pid(const struct cli_record_pid_opts *o);
/* Remove a parts directory and the files in it (cmd_record_pid.c). */
void cli_remove_dir(const char *dir);
/* The text report of a data file, to stderr (cmd_record_pid.c). */
void cli_report_text(const char *output);
/* The external tier's half (cmd_record_ext.c); tier says why it is used. */
int cli_record_pid_external(const struct cli_record_pid_opts *o, const char *tier);
int cmd_report(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_pause(int argc, char **argv);

#endif
