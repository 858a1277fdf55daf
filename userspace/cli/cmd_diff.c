/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe diff BASE NEW: which functions' shares changed between two
 * recordings, by how much, with the 95 % interval of each change and
 * whether it is significant (userspace/report/diff.c). Inputs are read as
 * `stackprobe report` reads them (report_input.c). Exit 0 on success, 1 on
 * a runtime error, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/report.h>

#include "cli.h"

static void usage(FILE *f)
{
	fputs("Usage: stackprobe diff [--format FMT] [--tid TID] [--pid PID] [--top N]\n"
	      "                       [--alpha A] [-o FILE] BASE NEW\n"
	      "\n"
	      "Compare two data files (or parts directories): each function's self and\n"
	      "total share of its run's samples in both, the change, its 95 % interval\n"
	      "and whether it is significant after Holm's correction over every function\n"
	      "tested. Shares are of each run's own samples, so runs of different length\n"
	      "or rate compare. Intervals come from batch means over the run's time, not\n"
	      "from a binomial (docs/OUTPUTS.md \"stackprobe diff\").\n"
	      "\n"
	      "Options:\n"
	      "  -f, --format FMT     text (default): the changes, significant first\n"
	      "                       json: {\"functions\": [{name, base_share, new_share, delta,\n"
	      "                             ci95, significant, total: {...}}]}\n"
	      "                       folded: 'stack base new' lines (difffolded.pl's form,\n"
	      "                               the base scaled to the new run's samples):\n"
	      "                               flamegraph.pl draws a differential graph\n"
	      "                       pprof: the base negated (pprof -diff_base's form); binary\n"
	      "                       html: one page, red/blue differential flame graph\n"
	      "  -t, --tid TID        only this thread (in both)\n"
	      "  -p, --pid PID        only this process (in both)\n"
	      "  -n, --top N          rows of the text table (default 25)\n"
	      "  -a, --alpha A        family-wise significance level (default 0.05)\n"
	      "  -o, --output FILE    write there instead of standard output\n"
	      "  -h, --help           show this help\n"
	      "\n"
	      "Examples:\n"
	      "  stackprobe diff before.data after.data\n"
	      "  stackprobe diff --format folded before.data after.data | flamegraph.pl > diff.svg\n"
	      "  stackprobe diff --format pprof -o diff.pb.gz before.data after.data && go tool pprof -top diff.pb.gz\n"
	      "  stackprobe diff --format html -o diff.html before.data after.data\n"
	      "\n"
	      "Exit status: 0 ok, 1 error (missing, empty, unreadable or corrupt file),\n"
	      "2 usage error.\n", f);
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "tid", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "top", required_argument, NULL, 'n' },
		{ "alpha", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *output = NULL;
	int fmt = SPROBE_REPORT_TEXT, c, err = 0;
	uint32_t tid = 0, top = 0, fpid = 0;
	double alpha = 0.05;
	struct sprobe_report *r[2] = { NULL, NULL };
	FILE *out = stdout;
	int rc = CLI_EXIT_ERROR;

	while ((c = getopt_long(argc, argv, "f:t:p:n:a:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			fmt = sprobe_report_format__parse(optarg);
			if (fmt != SPROBE_REPORT_TEXT && fmt != SPROBE_REPORT_JSON &&
			    fmt != SPROBE_REPORT_FOLDED && fmt != SPROBE_REPORT_PPROF &&
			    fmt != SPROBE_REPORT_HTML) {
				fprintf(stderr, "stackprobe diff: format '%s' is not one of text, json, "
						"folded, pprof or html\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'p':
		case 't':
		case 'n':
			if (cli_parse_selection("diff", c, optarg, &tid, &fpid, &top))
				return CLI_EXIT_USAGE;
			break;
		case 'a':
			if (cli_parse_double(optarg, 1e-12, 0.5, &alpha)) {
				fprintf(stderr, "stackprobe diff: --alpha wants a level above 0 and at most "
						"0.5 (e.g. 0.05), got '%s'\n", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
		default:
			return cli_usage_exit(usage, c);
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "stackprobe diff: wants two data files, BASE and NEW (got %d "
				"argument%s; see stackprobe diff --help)\n",
			argc - optind, argc - optind == 1 ? "" : "s");
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(argv[optind], "-") && !strcmp(argv[optind + 1], "-")) {
		fprintf(stderr, "stackprobe diff: only one input can be standard input\n");
		return CLI_EXIT_USAGE;
	}
	if (fmt == SPROBE_REPORT_PPROF && !output && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "stackprobe diff: pprof is binary (gzip): write it with -o FILE or "
				"into a pipe, not to a terminal\n");
		return CLI_EXIT_USAGE;
	}
	for (int i = 0; i < 2; i++) {
		r[i] = sprobe_report__new(&(struct sprobe_report_opts){
			.sz = sizeof(struct sprobe_report_opts), .tid = tid, .top = top,
			.source = argv[optind + i], .pid = fpid });
		if (!r[i]) {
			fprintf(stderr, "stackprobe diff: %s\n", strerror(errno));
			goto out;
		}
		if (cli_report_open("diff", argv[optind + i], r[i]) != CLI_EXIT_OK)
			goto out;
	}
	if (output) {
		out = fopen(output, "we");
		if (!out) {
			fprintf(stderr, "stackprobe diff: cannot create %s: %s\n", output, strerror(errno));
			goto out;
		}
	}
	err = sprobe_report__diff(r[0], r[1], out, (enum sprobe_report_format)fmt,
				  &(struct sprobe_diff_opts){ .sz = sizeof(struct sprobe_diff_opts),
							      .top = top, .alpha = alpha,
							      .base_name = argv[optind],
							      .new_name = argv[optind + 1] });
	if (output && fclose(out) != 0 && !err)
		err = -EIO;
	if (err)
		fprintf(stderr, "stackprobe diff: %s: %s\n",
			err == -EIO ? (output ? output : "writing standard output") : "comparing the runs",
			strerror(-err));
	else
		rc = CLI_EXIT_OK;
out:
	sprobe_report__free(r[0]);
	sprobe_report__free(r[1]);
	return rc;
}
