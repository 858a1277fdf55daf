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
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "userspace/common/enterable.h"

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
/* The report selection options report and diff share: --tid, --pid,
 * --top (c is 't', 'p' or 'n'; arg its value) into *tid, *pid, *top,
 * saying on stderr what a bad value wants. Returns 0 or CLI_EXIT_USAGE. */
int cli_parse_selection(const char *cmd, int c, const char *arg, uint32_t *tid, uint32_t *pid,
			uint32_t *top);

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
	bool no_children;	/* --no-children: the process alone */
};
int cli_record_pid(const struct cli_record_pid_opts *o);

/*
 * record -p's children (record_kids.c): the processes pid had started
 * before the recording (a prefork server's workers), each attached
 * through the kernel, its parts into the recording's directory.
 * cli_kids_list() fills out with pid's descendants now (breadth first, at
 * most max) and *cpu with their CPU seconds so far; returns how many.
 * _attach() attaches those (one that has gone is skipped) and says so
 * unless quiet; NULL only when out of memory. _poll() reads their rings
 * (often); _finish() writes their parts and returns their samples (*lost
 * the ones the kernel dropped); _free() accepts NULL.
 * cli_kids_say_left() says on stderr which children --no-children left
 * out, and their CPU.
 */
#define CLI_KIDS_MAX 256
struct cli_kids;
size_t cli_kids_list(pid_t pid, pid_t *out, size_t max, double *cpu);
struct cli_kids *cli_kids__attach(pid_t pid, const pid_t *v, size_t n, double cpu, double freq,
				  const char *dir, bool quiet);
size_t cli_kids__count(const struct cli_kids *k);
void cli_kids__poll(struct cli_kids *k);
unsigned long long cli_kids__finish(struct cli_kids *k, unsigned long long *lost);
void cli_kids__free(struct cli_kids *k);
void cli_kids_say_left(pid_t pid);
/*
 * The external tier for the programs of the tree the agent cannot enter
 * (ext_children.c): a thread answers the agent's requests
 * (userspace/agent/external_request.c) on an abstract socket whose name
 * goes to the children as STACKPROBE_EXTERNAL_SOCK; each accepted pid
 * gets its own external-tier events, its parts written into dir when its
 * processes have ended (or at the end). NULL with errno when the socket
 * or the thread cannot be made. A byte is written to wake_fd (a pipe the
 * main loop polls) whenever a new ring needs reading. _poll() reads the
 * rings and retires what has ended (the main loop, often); _finish()
 * stops the thread and writes every part left (returns how many parts in
 * all, *lost the samples the kernel dropped); _free() releases everything.
 */
struct cli_xkids;
struct cli_xkids *cli_xkids__new(const char *dir, double freq, bool quiet, int wake_fd);
const char *cli_xkids__name(const struct cli_xkids *k);
size_t cli_xkids__count(struct cli_xkids *k); /* pids taken so far */
unsigned long long cli_xkids__samples(struct cli_xkids *k); /* read so far */
void cli_xkids__poll(struct cli_xkids *k);
size_t cli_xkids__finish(struct cli_xkids *k, unsigned long long *lost);
void cli_xkids__free(struct cli_xkids *k);

/* The parts directory of a recording (record_parts.c). Remove it and the
 * files in it. */
void cli_remove_dir(const char *dir);
/* The text report of a data file, to stderr. */
void cli_report_text(const char *output);
/* Print each distinct "msg PID TEXT" line the agents left in DIR/events
 * once, with how many process images said it. */
void cli_print_agent_messages(const char *dir);
/* Processes of the recording so far: the first parts in dir. */
unsigned cli_count_processes(const char *dir);
/* Remove the node tables (/dev/shm) left by processes of dir's parts that
 * died without exit handlers (killed): only files of ours naming a pid
 * that no process has now. */
void cli_remove_stale_tables(const char *dir);
/* Remove the node table (/dev/shm/stackprobe-PID.table, path filled) that
 * a killed pid left: only when no live process has the pid now (none, or
 * a zombie) and only a regular file of our effective uid (*owner gets its
 * uid). 1 removed, 0 none there, -EBUSY the pid lives, -EPERM not ours,
 * else -errno. */
int cli_remove_dead_table(pid_t pid, char *path, size_t len, uid_t *owner);
/* The same for record -p, saying on stderr what was removed (unless
 * quiet) or left (another user's). */
void cli_say_dead_table(pid_t pid, bool quiet);

/* The agent library (record_enter.c): $STACKPROBE_AGENT_LIB, else next to
 * this executable (build tree), else ../lib (installed). 0 with out set,
 * or -errno. */
int cli_find_agent(char *out, size_t len);
/* Is CMD (looked up on PATH like execvp, through its #! chain) one the
 * agent cannot enter? SPROBE_ENTER_STATIC or _SETID with why ("is ...")
 * filled, else SPROBE_ENTER_OK: the same question the agent's exec
 * wrapper asks of the same file (userspace/common/enterable.h). */
enum sprobe_enter cli_unenterable(const char *cmd, char *why, size_t len);
/* The external tier's half (cmd_record_ext.c); tier says why it is used. */
int cli_record_pid_external(const struct cli_record_pid_opts *o, const char *tier);
/* Why pid's agent is not used, one phrase into why (record_pid_why.c):
 * _no_channel() when nothing listens on its control channel (no agent
 * loaded, an agent busy with another recording, one without a channel,
 * out of reach), from /proc; _reply() from the agent's first reply line
 * (n: read_line's return) when it was not "ok" (busy, refused, another
 * version, an error). */
void cli_why_no_channel(pid_t pid, char *why, size_t len);
void cli_why_reply(pid_t pid, const char *line, int n, char *why, size_t len);

/*
 * Name the pcs the agents left unnamed (symbol records with a module and
 * no name: STACKPROBE_NAMES=record; pcs in no module from the
 * /tmp/perf-PID.map the process left, perfmap.h) and add the source view of each named
 * pc (srcline records, docs/FORMAT.md type 12) to the merged recording at
 * path, from the files its module records name (build-id checked):
 * `record` runs it when its agents wrote neither (STACKPROBE_LINES=record,
 * record_lines.c says why). Rewrites the file through a temporary one
 * beside it, renamed over it only when the whole pass succeeded. Returns
 * the number of srcline records added, or -errno with the file unchanged
 * (msg, when not empty, says why). Not thread-safe.
 */
struct cli_lines_opts {
	/* Prefix of the module files' paths and of /tmp (record -p of a
	 * process in another mount namespace: "/proc/PID/root"), or NULL. */
	const char *root;
	/* Name pcs in no module from the /tmp/perf-PID.map the process left
	 * (perfmap.h), only from a map last modified while its part ran or
	 * within 5 s after (a map of a later process of that pid, or of an
	 * image it exec'd, is newer); with live, a map modified since the
	 * part began (record -p: the process still runs, the pid is its). */
	bool jit, live;
	/* Leave the header's by-reader bits set (report's temporary copy:
	 * the text report then says why a module's names are missing). */
	bool keep_flags;
	/* The user whose JIT maps are taken (besides root): the recorded
	 * process's (record -p of another user's service), else ours. */
	bool owner_set;
	uid_t owner;
};
long cli_record_lines(const char *path, const struct cli_lines_opts *o, char *msg, size_t msg_len);
/* The same pass from the file at path into descriptor fd (positioned at
 * its start): path is not written. Same returns. */
long cli_lines_pass(const char *path, int fd, const struct cli_lines_opts *o, char *msg, size_t msg_len);
/* Does the file at path leave its pcs' names or source view to its
 * reader (header flags SPROBE_DF_HEADER_LINES_BY_READER, _NAMES_: agents
 * not run by `stackprobe record`, whose pass clears them)? false also
 * when it cannot be read. */
bool cli_lines_left_to_reader(const char *path);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);

struct sprobe_report;
/* Load input (a data file, a parts directory, a FIFO, "-" for standard
 * input) into r for command cmd ("report", "diff"), as `stackprobe report`
 * reads it: names and lines the writer left to the reader added, debuginfod
 * names when DEBUGINFOD_URLS is set (report_input.c). Every failure is said
 * on stderr; a file cut short gets a warning and loads. Returns
 * CLI_EXIT_OK or CLI_EXIT_ERROR. */
int cli_report_open(const char *cmd, const char *input, struct sprobe_report *r);
int cmd_dump(int argc, char **argv);
int cmd_pause(int argc, char **argv);

#endif
