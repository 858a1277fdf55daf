/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reading a data file into a report for `stackprobe report` and
 * `stackprobe diff`: a file, a parts directory record left unmerged, a
 * pipe or standard input (spooled into an unlinked temporary file: the
 * lines pass and the report each read it), with what the writer left to
 * the reader (names, lines) added on the way; debuginfod names when
 * DEBUGINFOD_URLS is set. Every failure is said on stderr, once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>

#ifdef __linux__
#include <poll.h>

#include "userspace/datafile/merge.h"
#endif

#include "cli.h"

static void say(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "stackprobe %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

#ifdef __linux__
/* The file at path with what its writer left to the reader added
 * (record's pass, record_lines.c: names of module pcs, srcline records
 * from the module files), in an unlinked temporary file of $TMPDIR (or
 * /tmp): nothing is left behind if the report is interrupted, and the
 * input is never written (it may be another user's, or read-only).
 * Returns its descriptor, or -errno with msg saying why. */
/* An unlinked temporary file of $TMPDIR (or /tmp): a descriptor or -errno. */
static int tmp_file(void)
{
	const char *dir = getenv("TMPDIR");
	char tmp[PATH_MAX];
	int fd;

	if (!dir || dir[0] != '/')
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		/* a file system without O_TMPFILE: a name, removed at once */
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s/stackprobe-report-XXXXXX", dir) >= sizeof(tmp))
			return -ENAMETOOLONG;
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return -errno;
		unlink(tmp);
	}
	return fd;
}

/* All of descriptor in into an unlinked temporary file (a pipe or FIFO
 * can be read once; the pass and the report each read the file): its
 * descriptor, or -errno. */
static int spool(int in)
{
	char buf[65536];
	int fd = tmp_file();
	ssize_t n;

	while (fd >= 0 && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		for (ssize_t done = 0; n > 0 && done < n;) {
			ssize_t w = write(fd, buf + done, (size_t)(n - done));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				n = -1;
				break;
			}
			done += w;
		}
		if (n < 0) {
			int err = -errno;

			close(fd);
			return err ? err : -EIO;
		}
	}
	return fd;
}

static int with_lines(const char *path, char *msg, size_t msg_len)
{
	int fd = tmp_file();

	if (fd < 0)
		return fd;
	/* JIT names from the map the process left, only if it was last
	 * modified while the process ran or just after (cli.h): a later
	 * process's of the same pid is not used. Keep the header's bits: the
	 * text report says why names are missing. */
	struct cli_lines_opts lo = { .jit = true, .keep_flags = true };
	long added = cli_lines_pass(path, fd, &lo, msg, msg_len);

	if (added < 0) {
		close(fd);
		return (int)added;
	}
	return fd;
}

/* Open a FIFO for reading without hanging silently: a plain open blocks
 * until a writer comes, with nothing said. Opened non-blocking (that
 * never waits), it is said on stderr when nothing is there yet, then
 * waited for: its first data, or a writer that came and went (EOF).
 * Returns a blocking descriptor, or -errno. */
static int open_fifo(const char *cmd, const char *path, const char *shown)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (fd < 0)
		return -errno;
	if (poll(&p, 1, 0) == 0) {
		say(cmd, "%s is a FIFO with nothing in it yet: waiting for a writer to send a data "
			 "file (Ctrl-C stops)\n", shown);
		/* POLLHUP comes only after a writer has come and gone. */
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* Load the file at path into r, through with_lines() when its writer left
 * names or lines to the reader. A pipe or FIFO is spooled first. */
static int load_file(const char *cmd, struct sprobe_report *r, const char *path, const char *shown)
{
	struct stat st;
	char why[256] = "", fdpath[64];

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		int probe = tmp_file();

		if (probe < 0) /* no temporary file: read once, as it comes */
			return sprobe_report__load_file(r, path);
		close(probe);
		int in = S_ISFIFO(st.st_mode) ? open_fifo(cmd, path, shown)
					      : open(path, O_RDONLY | O_CLOEXEC);
		if (in == -1 && !S_ISFIFO(st.st_mode))
			in = -errno;
		int sp = in >= 0 ? spool(in) : in;

		if (in >= 0)
			close(in);
		if (sp < 0) {
			say(cmd, "%s: could not copy it into the temporary "
					"directory (TMPDIR, else /tmp) to read it: %s\n",
				shown, strerror(-sp));
			return sp == -ENOENT ? -EIO : sp;
		}
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", sp);
		int err = load_file(cmd, r, fdpath, shown);

		close(sp);
		return err;
	}
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || !cli_lines_left_to_reader(path))
		return sprobe_report__load_file(r, path);
	int fd = with_lines(path, why, sizeof(why));

	if (fd < 0) {
		if (fd != -EILSEQ) /* damage: said by the caller, as for any file */
			say(cmd, "%s: no source lines, inlined frames or "
					"names of the system's libraries: %s\n",
				shown, why[0] ? why : strerror(-fd));
		return sprobe_report__load_file(r, path);
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	int err = sprobe_report__load_file(r, fdpath);

	close(fd);
	return err;
}
#endif

#ifdef __linux__
static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
#endif


int cli_report_open(const char *cmd, const char *input, struct sprobe_report *r)
{
	int err;

	if (strcmp(input, "-") == 0) {
#ifdef __linux__
		/* Spooled: the pass and the report each read it (where no
		 * temporary file can be made: read as it comes, as it is). */
		int probe = tmp_file();
		struct stat in_st;

		if (fstat(STDIN_FILENO, &in_st) == 0 && S_ISREG(in_st.st_mode) &&
		    access("/proc/self/fd/0", R_OK) == 0) {
			/* a file (-i - < FILE): read as a file, no copy */
			if (probe >= 0)
				close(probe);
			err = load_file(cmd, r, "/proc/self/fd/0", "standard input");
		} else if (probe >= 0) {
			close(probe);
			int sp = spool(STDIN_FILENO);
			char fdpath[64];

			if (sp >= 0) {
				snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", sp);
				err = load_file(cmd, r, fdpath, "standard input");
				close(sp);
			} else {
				say(cmd, "could not copy standard input into the "
						"temporary directory (TMPDIR, else /tmp) to read it: %s\n",
					strerror(-sp));
				err = sp == -ENOENT ? -EIO : sp;
			}
		} else {
			struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_stdio(stdin);

			err = rd ? sprobe_report__load(r, rd) : -errno;
			sprobe_datafile_reader__free(rd);
		}
#else
		struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_stdio(stdin);

		err = rd ? sprobe_report__load(r, rd) : -errno;
		sprobe_datafile_reader__free(rd);
#endif
#ifdef __linux__
	} else if (is_dir(input)) {
		/* The parts `record` left when it could not merge them (killed,
		 * disk full): merged here into a temporary file and read. */
		char tmp[64];
		int tfd = tmp_file(); /* unlinked: nothing left if interrupted */
		struct sprobe_merge_result mr;

		if (tfd < 0) {
			err = tfd;
		} else {
			snprintf(tmp, sizeof(tmp), "/proc/self/fd/%d", tfd);
			struct sprobe_merge_opts mo = { .dir = input, .output = tmp };
			err = sprobe_merge__dir(&mo, &mr);
			if (!err && !mr.parts && !mr.unsampled)
				err = -ENOENT;
			if (!err)
				err = load_file(cmd, r, tmp, input);
			close(tfd);
		}
		if (err == -ENOENT) {
			say(cmd, "%s is a directory without parts of a "
					"recording (PID.N.part files)\n", input);
			return CLI_EXIT_ERROR;
		}
#endif
	} else {
#ifdef __linux__
		/* The agent alone left names and lines to the reader (no
		 * symbol table or DWARF in the program): added here, to a
		 * temporary copy, as record adds them. */
		err = load_file(cmd, r, input, input);
#else
		err = sprobe_report__load_file(r, input);
#endif
	}
	if (err == -ENOENT || err == -EACCES || err == -EISDIR || err == -EPERM) {
		say(cmd, "cannot open %s: %s%s\n", input, strerror(-err),
			err == -ENOENT ? " (record one with 'stackprobe record -o FILE -- CMD')" : "");
		return CLI_EXIT_ERROR;
	}
	if (err) {
		say(cmd, "%s: %s\n", input,
			*sprobe_report__message(r) ? sprobe_report__message(r) : strerror(-err));
		return CLI_EXIT_ERROR;
	}
	if (sprobe_report__records(r) == 0) {
		/* Cut short before even the header: nothing to report, and an
		 * empty report with exit 0 would look like success. */
		say(cmd, "%s: %s: nothing to report\n", input,
			sprobe_report__message(r));
		return CLI_EXIT_ERROR;
	}
	if (sprobe_report__status(r) == SPROBE_DF_CUT_SHORT)
		say(cmd, "warning: %s: %s\n", input,
			sprobe_report__message(r));
#ifdef __linux__
	/* Names for stripped modules from debuginfod, here and not in the
	 * agent (see userspace/report/debuginfod.c). libdebuginfod's own
	 * defaults wait on a server that accepts and never answers until it
	 * closes, three times (DEBUGINFOD_RETRY_LIMIT 2, no
	 * DEBUGINFOD_MAXTIME): a report waits at most 30 s for a download
	 * (10 s without progress), once, unless the environment says
	 * otherwise. The first server failure stops all lookups. */
	if (getenv("DEBUGINFOD_URLS")) {
		setenv("DEBUGINFOD_TIMEOUT", "10", 0);
		setenv("DEBUGINFOD_MAXTIME", "30", 0);
		setenv("DEBUGINFOD_RETRY_LIMIT", "0", 0);
		if (sprobe_report__debuginfod(r) == -ENOMEM) {
			say(cmd, "%s\n", strerror(ENOMEM));
			return CLI_EXIT_ERROR;
		}
	}
#endif
	return CLI_EXIT_OK;
}
