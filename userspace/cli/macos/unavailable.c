/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CLI on macOS is `report` only (the Darwin block of the top Makefile
 * builds main.c, cmd_report.c and this file; the folder keeps it out of
 * the Linux build's userspace/cli/ wildcard). record, dump and pause
 * need parts that exist on Linux only: the in-process sampler (per-thread
 * CPU timers, futexes), the LD_PRELOAD agent that writes the node table, and
 * the eBPF companion. They stay in --help so the command set is the same
 * everywhere, and each says why it cannot run instead of doing nothing.
 */
#include <stdio.h>

#include "../cli.h"

static int unavailable(const char *cmd, const char *needs)
{
	fprintf(stderr,
		"stackprobe %s: not available on macOS: it needs %s, which is Linux-only.\n"
		"On macOS, record on Linux and read the data file here with "
		"'stackprobe report'; see docs/MACOS.md.\n", cmd, needs);
	return CLI_EXIT_ERROR;
}

int cmd_record(int argc, char **argv)
{
	return unavailable("record", "the in-process sampler and the LD_PRELOAD agent");
}

int cmd_dump(int argc, char **argv)
{
	return unavailable("dump", "a node table written by the agent");
}

int cmd_pause(int argc, char **argv)
{
	return unavailable("pause", "the eBPF companion");
}
