/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe: command-line front end.
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <stackprobe.h>
#include <string.h>

static const char usage[] =
	"Usage: stackprobe [--help] [--version] COMMAND [ARGS]\n"
	"\n"
	"Sample the stacks of every thread of a process from inside it, and\n"
	"measure what each capture costs the threads it stops.\n"
	"\n"
	"Options:\n"
	"  -h, --help       show this help and exit\n"
	"  -V, --version    show the version and exit\n";

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
			fputs(usage, stdout);
			return 0;
		case 'V':
			printf("stackprobe %s\n", sprobe_version());
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	fprintf(stderr, "stackprobe: unknown command '%s' (see stackprobe --help)\n",
		argv[optind]);
	return 2;
}
