/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CLI's shared option handling: the end of every getopt switch, and
 * the one number parser. Strict on purpose: what a user typed is
 * either a number in range or a usage error, never silently something
 * else ("10x" is not 10, "-1" is not 4294967295, " 5" is not 5).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_usage_exit(void (*usage)(FILE *), int c)
{
	usage(c == 'h' ? stdout : stderr);
	return c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int cli_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	/* strtoul alone takes leading blanks and a sign. */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	/* !(in range) also refuses NaN. */
	if (errno || *end || !(v >= min && v <= max))
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_pid(const char *s, pid_t *out)
{
	unsigned long v;

	/* 0x3fffffff: the kernel's PID_MAX_LIMIT. */
	if (cli_parse_ulong(s, 1, 0x3fffffffUL, &v))
		return -EINVAL;
	*out = (pid_t)v;
	return 0;
}

/* macOS has no real-time signals (and its CLI no record or pause). */
#ifdef SIGRTMIN
int cli_parse_rtsig(const char *s, int *out)
{
	unsigned long v;

	if (cli_parse_ulong(s, (unsigned long)SIGRTMIN, (unsigned long)SIGRTMAX, &v))
		return -EINVAL;
	*out = (int)v;
	return 0;
}
#endif

int cli_parse_selection(const char *cmd, int c, const char *arg, uint32_t *tid, uint32_t *pid,
			uint32_t *top)
{
	unsigned long num;
	pid_t pp;

	if (c == 'p') {
		if (cli_parse_pid(arg, &pp)) {
			fprintf(stderr, "stackprobe %s: --pid wants a process id, got '%s'\n", cmd, arg);
			return CLI_EXIT_USAGE;
		}
		*pid = (uint32_t)pp;
	} else if (c == 't') {
		if (cli_parse_ulong(arg, 1, 0x7fffffffUL, &num)) {
			fprintf(stderr, "stackprobe %s: --tid wants a thread id (a positive decimal "
					"number), got '%s'\n", cmd, arg);
			return CLI_EXIT_USAGE;
		}
		*tid = (uint32_t)num;
	} else {
		if (cli_parse_ulong(arg, 1, 1000000UL, &num)) {
			fprintf(stderr, "stackprobe %s: --top wants a number from 1 to 1000000, got "
					"'%s'\n", cmd, arg);
			return CLI_EXIT_USAGE;
		}
		*top = (uint32_t)num;
	}
	return 0;
}
