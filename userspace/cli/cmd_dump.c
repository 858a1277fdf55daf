/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe dump PID: read an agent-enabled process's node table from
 * outside (no ptrace, no signal to the target) and print every thread's
 * latest stack, symbolized from /proc/PID/maps and the ELF files.
 *
 * Exit status: 0 ok, 1 runtime error (no table, dead pid, another user's
 * table, corrupt table), 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>
#include <stackprobe/table.h>

#include "userspace/common/clock.h"

#include "cli.h"

static void usage(FILE *f)
{
	fputs("Usage: stackprobe dump PID [--table FILE] [--raw]\n"
	      "\n"
	      "Print the latest stack of every thread of a process that runs the\n"
	      "stackprobe agent, read from its shared-memory node table. The target\n"
	      "is neither stopped nor signalled, and no ptrace is needed.\n"
	      "\n"
	      "Options:\n"
	      "  -t, --table FILE     read this table file instead of\n"
	      "                       /dev/shm/stackprobe-PID.table\n"
	      "  -r, --raw            print addresses only (no symbolization)\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  STACKPROBE_AGENT=1 LD_PRELOAD=build/libstackprobe.so ./server &\n"
	      "  stackprobe dump $!\n"
	      "\n"
	      "Exit status: 0 ok, 1 error (no table, dead process, another user's or\n"
	      "a corrupt table), 2 usage error.\n", f);
}

static void thread_name(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	FILE *f = fopen(path, "re");
	buf[0] = '\0';
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	if (!buf[0])
		snprintf(buf, len, "(exited)");
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "table", required_argument, NULL, 't' },
		{ "raw", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *table_path = NULL;
	bool raw = false;
	int c;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "t:rh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			table_path = optarg;
			break;
		case 'r':
			raw = true;
			break;
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	if (optind != argc - 1 || cli_parse_pid(argv[optind], &pid)) {
		if (optind < argc)
			fprintf(stderr, "stackprobe dump: expected one PID (a positive number), got '%s'\n",
				argv[optind]);
		else
			fprintf(stderr, "stackprobe dump: expected a PID\n");
		return CLI_EXIT_USAGE;
	}
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		char tpath[64];
		struct stat st;

		/* A killed agent leaves its table: say so, it holds nothing live
		 * (record -p removes it when it sees the process go). */
		snprintf(tpath, sizeof(tpath), "/dev/shm/stackprobe-%d.table", (int)pid);
		if (table_path || lstat(tpath, &st) != 0)
			fprintf(stderr, "stackprobe dump: process %d is gone (no process has that "
					"pid now)\n", pid);
		else
			fprintf(stderr, "stackprobe dump: process %d is gone (no process has that "
					"pid now); its node table %s was left behind (it was killed): "
					"its stacks are not live, remove it with rm\n", pid, tpath);
		return CLI_EXIT_ERROR;
	}

	char err[256] = "";
	struct sprobe_table_open_opts oo = { .sz = sizeof(oo), .errbuf = err, .errbuf_len = sizeof(err) };
	struct sprobe_table *t = table_path ? sprobe_table__open_path(table_path, &oo)
					    : sprobe_table__open_pid(pid, &oo);
	if (!t) {
		int e = errno;
		if (e == ENOENT && !table_path)
			fprintf(stderr, "stackprobe dump: pid %d has no stackprobe table "
					"(/dev/shm/stackprobe-%d.table): is the agent loaded? "
					"Start it with STACKPROBE_AGENT=1 LD_PRELOAD=libstackprobe.so\n",
				pid, pid);
		else
			fprintf(stderr, "stackprobe dump: %s\n", err[0] ? err : strerror(e));
		return CLI_EXIT_ERROR;
	}
	struct sprobe_table_info info;
	sprobe_table__info(t, &info);

	struct sprobe_modules *mods = NULL;
	if (!raw) {
		struct sprobe_modules_opts mo = { .sz = sizeof(mo), .pid = pid };
		mods = sprobe_modules__new(&mo);
		if (!mods)
			fprintf(stderr, "stackprobe dump: cannot read the modules of pid %d (%s); "
					"printing addresses\n", pid, strerror(errno));
	}

	int rc = sprobe_table__iter_begin(t);
	if (rc < 0) {
		fprintf(stderr, "stackprobe dump: %s: %s\n", sprobe_table__path(t), strerror(-rc));
		sprobe_modules__free(mods);
		sprobe_table__close(t);
		return CLI_EXIT_ERROR;
	}
	struct sprobe_table_node *node = malloc(sizeof(*node));
	if (!node) {
		sprobe_modules__free(mods);
		sprobe_table__close(t);
		return CLI_EXIT_ERROR;
	}
	uint64_t now = sprobe_mono_ns();
	unsigned threads = 0;
	printf("pid %d: %u threads in %s%s\n", pid, info.live, sprobe_table__path(t),
	       info.writer_closed ? " (the agent has stopped: stacks are the last ones)" : "");
	while ((rc = sprobe_table__iter_next(t, node)) == 1) {
		char name[64], line[512];
		thread_name(pid, node->tid, name, sizeof(name));
		double age_ms = now > node->capture_ns ? (double)(now - node->capture_ns) / 1e6 : 0;
		printf("\nthread %d (%s): %u frames, captured %.1f ms ago, stack high-water %llu bytes%s%s\n",
		       node->tid, name, node->nframes, age_ms, (unsigned long long)node->stack_bytes,
		       node->flags & SPROBE_TABLE_NODE_STACK_TRUNCATED ? ", stack copy truncated" : "",
		       node->flags & SPROBE_TABLE_NODE_UNWIND_ERROR ? ", unwind stopped early" : "");
		for (uint32_t i = 0; i < node->nframes; i++) {
			uint64_t pc = node->frames[i].pc;
			struct sprobe_symbol sym;
			line[0] = '\0';
			/* Return addresses are looked up at pc - 1 (the call). */
			if (mods && sprobe_modules__symbolize(mods, i ? pc - 1 : pc, &sym) == 0) {
				sym.pc = pc;
				if (sym.name)
					sym.sym_offset = pc - sym.sym_start;
				sprobe_symbol__snprintf(&sym, line, sizeof(line));
			}
			printf("  #%-3u 0x%016llx %s\n", i, (unsigned long long)pc, line);
		}
		threads++;
	}
	struct sprobe_table_iter_stats ist;
	sprobe_table__iter_stats(t, &ist);
	free(node);
	sprobe_modules__free(mods);
	sprobe_table__close(t);
	if (rc < 0) {
		fprintf(stderr, "stackprobe dump: the table is corrupt (%s) after %u threads\n",
			rc == -ELOOP ? "its list has a cycle" : "an index is out of range", threads);
		return CLI_EXIT_ERROR;
	}
	if (ist.skipped_busy || ist.skipped_invalid)
		fprintf(stderr, "stackprobe dump: skipped %u nodes that kept changing and %u invalid nodes\n",
			ist.skipped_busy, ist.skipped_invalid);
	return CLI_EXIT_OK;
}
