/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CLI commands. Each command lives in userspace/cli/cmd_<name>.c and is one
 * row of the table in main.c. A command gets argv with argv[0] = its name,
 * parses its own options with getopt_long, and returns the process exit
 * status: 0 success, 1 runtime error, 2 usage error.
 */
#ifndef SPROBE_CLI_H
#define SPROBE_CLI_H

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

struct cli_command {
	const char *name;
	const char *summary;	/* one line for `stackprobe --help` */
	int (*run)(int argc, char **argv);
};

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_pause(int argc, char **argv);

#endif
