/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe: command-line front end. Dispatches to userspace/cli/cmd_*.c.
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe.h>

#include "cli.h"

/* One row per command; keep in the order shown by --help. */
static const struct cli_command commands[] = {
	{ "record", "run a command with the agent and record every thread", cmd_record },
	{ "report", "print a data file: text, folded, json, pprof, speedscope, svg, trace, html", cmd_report },
	{ "diff", "compare two data files: each function's change, its interval, significance", cmd_diff },
	{ "dump", "print the live stacks of an agent-enabled process", cmd_dump },
	{ "pause", "measure an agent's capture windows from the kernel (eBPF)", cmd_pause },
	{ NULL, NULL, NULL },
};

static void print_usage(FILE *f)
{
	fputs("Usage: stackprobe [--help] [--version] COMMAND [ARGS]\n"
	      "\n"
	      "Sample the stacks of every thread of a process from inside it, and\n"
	      "measure what each capture costs the threads it stops.\n"
	      "\n"
	      "Commands:\n", f);
	for (const struct cli_command *c = commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fputs("\n"
	      "Options:\n"
	      "  -h, --help       show this help and exit\n"
	      "  -V, --version    show the version and exit\n"
	      "\n"
	      "Run 'stackprobe COMMAND --help' for a command's options.\n", f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			print_usage(stdout);
			return CLI_EXIT_OK;
		case 'V':
			printf("stackprobe %s\n", sprobe_version());
			return CLI_EXIT_OK;
		default:
			print_usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	for (const struct cli_command *cmd = commands; cmd->name; cmd++) {
		if (strcmp(cmd->name, argv[optind]) == 0) {
			int first = optind;

			/* glibc: optind = 0 re-initialises getopt, so each command
			 * parses its own argv from scratch. */
			optind = 0;
			return cmd->run(argc - first, argv + first);
		}
	}
	fprintf(stderr, "stackprobe: unknown command '%s' (see stackprobe --help)\n",
		argv[optind]);
	return CLI_EXIT_USAGE;
}
