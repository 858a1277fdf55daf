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
#include "userspace/datafile/merge.h"
#endif

#include "cli.h"

#define DEFAULT_INPUT "stackprobe.data"

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
		case 'p':
		case 't':
		case 'n':
			if (cli_parse_selection("report", c, optarg, &tid, &fpid, &top))
				return CLI_EXIT_USAGE;
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
	if (cli_report_open("report", input, r) != 0) {
		sprobe_report__free(r);
		return CLI_EXIT_ERROR;
	}
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
