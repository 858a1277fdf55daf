/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe report: print a recorded data file as text, folded stacks or
 * JSON. Exit 0 on success (also for a file cut short: it reports what the
 * file holds and says so), 1 on a runtime error (missing, unreadable or
 * corrupt file), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
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

#define DEFAULT_INPUT "stackprobe.data"

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
static int open_fifo(const char *path, const char *shown)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (fd < 0)
		return -errno;
	if (poll(&p, 1, 0) == 0) {
		fprintf(stderr, "stackprobe report: %s is a FIFO with nothing in it yet: waiting for "
				"a writer to send a data file (Ctrl-C stops)\n", shown);
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
static int load_file(struct sprobe_report *r, const char *path, const char *shown)
{
	struct stat st;
	char why[256] = "", fdpath[64];

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		int probe = tmp_file();

		if (probe < 0) /* no temporary file: read once, as it comes */
			return sprobe_report__load_file(r, path);
		close(probe);
		int in = S_ISFIFO(st.st_mode) ? open_fifo(path, shown)
					      : open(path, O_RDONLY | O_CLOEXEC);
		if (in == -1 && !S_ISFIFO(st.st_mode))
			in = -errno;
		int sp = in >= 0 ? spool(in) : in;

		if (in >= 0)
			close(in);
		if (sp < 0) {
			fprintf(stderr, "stackprobe report: %s: could not copy it into the temporary "
					"directory (TMPDIR, else /tmp) to read it: %s\n",
				shown, strerror(-sp));
			return sp == -ENOENT ? -EIO : sp;
		}
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", sp);
		int err = load_file(r, fdpath, shown);

		close(sp);
		return err;
	}
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || !cli_lines_left_to_reader(path))
		return sprobe_report__load_file(r, path);
	int fd = with_lines(path, why, sizeof(why));

	if (fd < 0) {
		if (fd != -EILSEQ) /* damage: said by the caller, as for any file */
			fprintf(stderr, "stackprobe report: %s: no source lines, inlined frames or "
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

static void usage(FILE *f)
{
	fputs("Usage: stackprobe report [-i FILE] [--format FMT] [--tid TID] [--pid PID]\n"
	      "                         [--top N] [-o FILE]\n"
	      "\n"
	      "Summarise a data file written by 'stackprobe record' or the agent.\n"
	      "\n"
	      "Options:\n"
	      "  -i, --input FILE     data file to read, - for stdin (default: " DEFAULT_INPUT ")\n"
	      "  -f, --format FMT     text (default): top functions, threads, pauses, drops\n"
	      "                       folded: one 'thread;frame;...;frame count' line per stack\n"
	      "                               (flamegraph.pl, inferno, speedscope)\n"
	      "                       json: everything, see docs/FORMAT.md\n"
	      "                       pprof: gzipped profile.proto (go tool pprof, Pyroscope,\n"
	      "                              Parca, Grafana); binary, so needs -o or a pipe\n"
	      "                       speedscope: speedscope.app JSON, one profile per thread\n"
	      "                       svg: interactive flame graph (hover, click to zoom) plus\n"
	      "                            pause cost per thread; one file, no network\n"
	      "                       trace: Chrome trace-event JSON (Perfetto UI,\n"
	      "                              chrome://tracing): every capture window, kernel\n"
	      "                              and self-reported, and every sample, per thread\n"
	      "                       html: one interactive page, no network: flame graph\n"
	      "                             (zoom, search), thread and process tables, the\n"
	      "                             pause timeline of every capture window (kernel\n"
	      "                             and self-reported) and its distribution, drops\n"
	      "  -t, --tid TID        only this thread\n"
	      "  -p, --pid PID        only this process (a recording of a process tree)\n"
	      "  -s, --source FUNC    the source lines of FUNC with their samples (like\n"
	      "                       pprof -list), from the recording's line information\n"
	      "  -n, --top N          rows in the text function tables (default 25)\n"
	      "  -o, --output FILE    write there instead of standard output\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  stackprobe report -i server.data\n"
	      "  stackprobe report -i server.data --format folded | flamegraph.pl > fg.svg\n"
	      "  stackprobe report -i server.data --format json -o server.json\n"
	      "  stackprobe report -i server.data --format pprof -o server.pb.gz && go tool pprof -top server.pb.gz\n"
	      "  stackprobe report -i server.data --format speedscope -o server.speedscope.json\n"
	      "  stackprobe report -i server.data --format svg -o server.svg\n"
	      "  stackprobe report -i server.data --format trace -o server.trace.json\n"
	      "  stackprobe report -i server.data --format html -o server.html\n"
	      "  stackprobe report -i server.data --tid 4242\n"
	      "  ssh host cat /tmp/app.data | stackprobe report -i -\n"
	      "\n"
	      "Exit status: 0 ok (a file cut short still reports what it holds and says\n"
	      "so), 1 error (missing, empty, unreadable or corrupt file), 2 usage error.\n", f);
}

#ifdef __linux__
static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
#endif

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "format", required_argument, NULL, 'f' },
		{ "tid", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "source", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *input = DEFAULT_INPUT, *output = NULL;
	int fmt = SPROBE_REPORT_TEXT, c, err;
	uint32_t tid = 0, top = 0, fpid = 0;
	const char *source_fn = NULL;
	unsigned long num;
	struct sprobe_report *r;
	FILE *out = stdout;

	while ((c = getopt_long(argc, argv, "i:f:t:p:s:n:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			input = optarg;
			break;
		case 'f':
			fmt = sprobe_report_format__parse(optarg);
			if (fmt < 0) {
				fprintf(stderr, "stackprobe report: unknown format '%s' "
						"(text, folded, json, pprof, speedscope, svg, trace or html)\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 's':
			source_fn = optarg;
			break;
		case 'p': {
			pid_t pp;
			if (cli_parse_pid(optarg, &pp)) {
				fprintf(stderr, "stackprobe report: --pid wants a process id, got '%s'\n",
					optarg);
				return CLI_EXIT_USAGE;
			}
			fpid = (uint32_t)pp;
			break;
		}
		case 't':
			if (cli_parse_ulong(optarg, 1, 0x7fffffffUL, &num)) {
				fprintf(stderr, "stackprobe report: --tid wants a thread id "
						"(a positive decimal number), got '%s'\n", optarg);
				return CLI_EXIT_USAGE;
			}
			tid = (uint32_t)num;
			break;
		case 'n':
			if (cli_parse_ulong(optarg, 1, 1000000UL, &num)) {
				fprintf(stderr, "stackprobe report: --top wants a number from 1 "
						"to 1000000, got '%s'\n", optarg);
				return CLI_EXIT_USAGE;
			}
			top = (uint32_t)num;
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stackprobe report: unexpected argument '%s' "
				"(the input file goes after -i)\n", argv[optind]);
		return CLI_EXIT_USAGE;
	}

	if (fmt == SPROBE_REPORT_PPROF && !output && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "stackprobe report: pprof is binary (gzip): write it with "
				"-o FILE or into a pipe, not to a terminal\n");
		return CLI_EXIT_USAGE;
	}
	r = sprobe_report__new(&(struct sprobe_report_opts){
		.sz = sizeof(struct sprobe_report_opts), .tid = tid, .top = top, .source = input,
		.pid = fpid });
	if (!r) {
		fprintf(stderr, "stackprobe report: %s\n", strerror(errno));
		return CLI_EXIT_ERROR;
	}
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
			err = load_file(r, "/proc/self/fd/0", "standard input");
		} else if (probe >= 0) {
			close(probe);
			int sp = spool(STDIN_FILENO);
			char fdpath[64];

			if (sp >= 0) {
				snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", sp);
				err = load_file(r, fdpath, "standard input");
				close(sp);
			} else {
				fprintf(stderr, "stackprobe report: could not copy standard input into the "
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
				err = load_file(r, tmp, input);
			close(tfd);
		}
		if (err == -ENOENT) {
			fprintf(stderr, "stackprobe report: %s is a directory without parts of a "
					"recording (PID.N.part files)\n", input);
			sprobe_report__free(r);
			return CLI_EXIT_ERROR;
		}
#endif
	} else {
#ifdef __linux__
		/* The agent alone left names and lines to the reader (no
		 * symbol table or DWARF in the program): added here, to a
		 * temporary copy, as record adds them. */
		err = load_file(r, input, input);
#else
		err = sprobe_report__load_file(r, input);
#endif
	}
	if (err == -ENOENT || err == -EACCES || err == -EISDIR || err == -EPERM) {
		fprintf(stderr, "stackprobe report: cannot open %s: %s%s\n", input, strerror(-err),
			err == -ENOENT ? " (record one with 'stackprobe record -o FILE -- CMD')" : "");
		sprobe_report__free(r);
		return CLI_EXIT_ERROR;
	}
	if (err) {
		fprintf(stderr, "stackprobe report: %s: %s\n", input,
			*sprobe_report__message(r) ? sprobe_report__message(r) : strerror(-err));
		sprobe_report__free(r);
		return CLI_EXIT_ERROR;
	}
	if (sprobe_report__records(r) == 0) {
		/* Cut short before even the header: nothing to report, and an
		 * empty report with exit 0 would look like success. */
		fprintf(stderr, "stackprobe report: %s: %s: nothing to report\n", input,
			sprobe_report__message(r));
		sprobe_report__free(r);
		return CLI_EXIT_ERROR;
	}
	if (sprobe_report__status(r) == SPROBE_DF_CUT_SHORT)
		fprintf(stderr, "stackprobe report: warning: %s: %s\n", input,
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
			fprintf(stderr, "stackprobe report: %s\n", strerror(ENOMEM));
			sprobe_report__free(r);
			return CLI_EXIT_ERROR;
		}
	}
#endif
	if (output) {
		out = fopen(output, "we");
		if (!out) {
			fprintf(stderr, "stackprobe report: cannot create %s: %s\n", output,
				strerror(errno));
			sprobe_report__free(r);
			return CLI_EXIT_ERROR;
		}
	}
	/* Text, JSON, pprof (comments) and SVG (subtitle) carry the drops;
	 * folded and speedscope have no room for them, so they
	 * go to stderr: drops appear with every report. */
	if ((fmt == SPROBE_REPORT_FOLDED || fmt == SPROBE_REPORT_SPEEDSCOPE) &&
	    (sprobe_report__lost(r) || sprobe_report__threads_dropped(r)))
		fprintf(stderr, "stackprobe report: note: %llu records lost in the stream (queue full), "
				"%llu thread-captures dropped; see the text report\n",
			(unsigned long long)sprobe_report__lost(r),
			(unsigned long long)sprobe_report__threads_dropped(r));
	if (source_fn) {
		err = sprobe_report__write_source(r, out, source_fn);
		if (err == -ENOENT) {
			fprintf(stderr, "stackprobe report: no sample has %s on its stack (names as the "
					"text report prints them)\n", source_fn);
			if (output)
				fclose(out);
			sprobe_report__free(r);
			return CLI_EXIT_ERROR;
		}
	} else {
		err = sprobe_report__write(r, out, (enum sprobe_report_format)fmt);
	}
	if (output && fclose(out) != 0 && !err)
		err = -EIO;
	sprobe_report__free(r);
	if (err) {
		fprintf(stderr, "stackprobe report: writing %s: %s\n", output ? output : "output",
			strerror(-err));
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}
