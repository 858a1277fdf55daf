/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * capture_times FILE: the CLOCK_MONOTONIC time (ns) and the threads listed
 * of every capture in a recording, one capture a line, then "end STATUS"
 * (the reader's status). For
 * bench/threads.py, which counts the captures of a steady window (the
 * report's rate line covers the whole run, thread creation and exit
 * included).
 */
#include <stdio.h>

#include <stackprobe/datafile.h>

int main(int argc, char **argv)
{
	struct sprobe_datafile_reader *r;
	struct sprobe_df_record rec;
	int st;

	if (argc != 2) {
		fprintf(stderr, "usage: capture_times FILE\n");
		return 2;
	}
	r = sprobe_datafile_reader__open(argv[1]);
	if (!r) {
		perror(argv[1]);
		return 1;
	}
	while (sprobe_datafile_reader__next(r, &rec) > 0)
		if (rec.type == SPROBE_DF_CAPTURE)
			printf("%llu %u\n", (unsigned long long)rec.capture.time_ns,
			       rec.capture.threads_total);
	st = sprobe_datafile_reader__status(r);
	printf("end %d\n", st);
	sprobe_datafile_reader__free(r);
	return 0;
}
