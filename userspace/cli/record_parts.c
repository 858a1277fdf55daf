/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The parts directory of a recording (`record -- CMD`, `record -p`): each
 * process image writes its part there, the agents their messages (the
 * events file); what is left after the merge is removed here, and the
 * text report of the merged file printed.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/report.h>
#include <stackprobe/table.h>

#include "cli.h"

void cli_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < sizeof(path))
			unlink(path);
	closedir(d);
	rmdir(dir);
}

void cli_report_text(const char *output)
{
	struct sprobe_report_opts ro = { .sz = sizeof(ro), .source = output };
	struct sprobe_report *r = sprobe_report__new(&ro);

	if (!r)
		return;
	int lerr = sprobe_report__load_file(r, output);
	if (lerr < 0 && sprobe_report__samples(r) == 0)
		fprintf(stderr, "stackprobe record: %s: %s\n", output,
			sprobe_report__message(r)[0] ? sprobe_report__message(r) : strerror(-lerr));
	else
		sprobe_report__write(r, stderr, SPROBE_REPORT_TEXT);
	sprobe_report__free(r);
}

/* What the agents of the tree had to say ("msg PID TEXT" lines of
 * DIR/events: the agent writes nothing on the program's own stderr under
 * record), each distinct text once, with how many processes said it. */
void cli_print_agent_messages(const char *dir)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0, n = 0;
	struct said {
		char *text;
		unsigned count;
		int pid;
	} v[64];
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/events", dir) >= sizeof(path) ||
	    !(f = fopen(path, "re")))
		return;
	while (getline(&line, &cap, f) > 0) {
		int pid, off = 0;
		size_t i;

		if (sscanf(line, "msg %d %n", &pid, &off) != 1 || !off)
			continue;
		line[strcspn(line, "\n")] = '\0';
		for (i = 0; i < n && strcmp(v[i].text, line + off) != 0; i++)
			;
		if (i < n) {
			v[i].count++;
		} else if (n < sizeof(v) / sizeof(v[0]) && (v[n].text = strdup(line + off))) {
			v[n].count = 1;
			v[n++].pid = pid;
		}
	}
	free(line);
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		if (v[i].count > 1)
			fprintf(stderr, "%s (said by %u process images)\n", v[i].text, v[i].count);
		else
			fprintf(stderr, "%s\n", v[i].text);
		free(v[i].text);
	}
}

/* Processes of the recording so far: the parts in its directory. */
unsigned cli_count_processes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".0.part"))
			n++;
	closedir(d);
	return n;
}

/* Node tables left by processes of the tree that died without exit
 * handlers (killed): only files of ours naming a dead pid. */
void cli_remove_stale_tables(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		unsigned pid;
		char proc[32], tpath[64];
		struct stat st;

		if (sscanf(de->d_name, "%u.0.part", &pid) != 1)
			continue;
		snprintf(proc, sizeof(proc), "/proc/%u", pid);
		if (stat(proc, &st) == 0)
			continue;
		struct sprobe_table *left = sprobe_table__open_pid((pid_t)pid, NULL);
		if (left) {
			snprintf(tpath, sizeof(tpath), "/dev/shm/stackprobe-%u.table", pid);
			sprobe_table__close(left);
			unlink(tpath);
		}
	}
	closedir(d);
}

/* Has pid no live process: none at all, or a zombie (dead, its table
 * garbage, its pid not free for another until reaped)? */
static bool pid_dead(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
}

int cli_remove_dead_table(pid_t pid, char *path, size_t len, uid_t *owner)
{
	struct stat st;

	snprintf(path, len, "/dev/shm/stackprobe-%d.table", (int)pid);
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	*owner = st.st_uid;
	if (!pid_dead(pid))
		return -EBUSY;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	return unlink(path) == 0 ? 1 : errno == ENOENT ? 0 : -errno;
}

void cli_say_dead_table(pid_t pid, bool quiet)
{
	char path[64];
	uid_t owner = 0;
	int r = cli_remove_dead_table(pid, path, sizeof(path), &owner);

	if (r == 1 && !quiet)
		fprintf(stderr, "stackprobe record: process %d left its node table %s (it was killed: "
				"no exit handler ran); removed it\n", (int)pid, path);
	else if (r == -EPERM)
		fprintf(stderr, "stackprobe record: process %d left its node table %s, uid %u's: not "
				"removed (its user or root may remove it)\n", (int)pid, path,
			(unsigned)owner);
}
