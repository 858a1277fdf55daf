/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libFuzzer target for the data-file reader and the reports built on it:
 * any byte string must give records, "cut short" or a clear error, never a
 * crash, a hang, a leak or undefined behaviour; and whatever was read must
 * render in every format. Each input is tried as is and with its checksums
 * repaired, so mutations also reach the record decoders.
 *
 *   make test-fuzz-datafile           (bounded run, part of make test)
 *   build/fuzz/fuzz_datafile DIR...   (longer runs by hand)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A copy of DATA with a valid preamble and every frame's checksums
 * recomputed (as far as the frames' lengths lead), so the mutations reach
 * the record decoders instead of stopping at a checksum mismatch. */
static uint8_t *fix_checksums(const uint8_t *data, size_t size)
{
	uint8_t *c = malloc(size ? size : 1);
	size_t pos = SPROBE_DF_PREAMBLE_SIZE;

	if (!c)
		abort();
	memcpy(c, data, size);
	if (size < SPROBE_DF_PREAMBLE_SIZE)
		return c;
	memcpy(c, SPROBE_DF_MAGIC, 8);
	c[8] = SPROBE_DF_VERSION, c[9] = c[10] = c[11] = 0;
	c[12] = SPROBE_DF_PREAMBLE_SIZE, c[13] = c[14] = c[15] = 0;
	while (size - pos >= SPROBE_DF_FRAME_SIZE) {
		uint32_t type, len;

		memcpy(&type, c + pos, 4);
		memcpy(&len, c + pos + 4, 4);
		if (len > size - pos - SPROBE_DF_FRAME_SIZE)
			break;
		sprobe_df__frame(c + pos, type, c + pos + SPROBE_DF_FRAME_SIZE, len);
		pos += SPROBE_DF_FRAME_SIZE + len;
	}
	return c;
}

static void one_input(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed = fix_checksums(data, size);

	one_input(data, size);
	one_input(fixed, size);
	free(fixed);
	return 0;
}

static void one_input(const uint8_t *data, size_t size)
{
	static FILE *sink;
	struct sprobe_datafile_reader *rd;
	struct sprobe_df_record rec;
	int rc;

	if (!sink)
		sink = fopen("/dev/null", "w");
	/* 1. The reader alone: every record decodes, the end is explained. */
	rd = sprobe_datafile_reader__from_mem(data, size);
	if (!rd)
		abort();
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		/* Re-encoding what was read must work and give a payload no
		 * larger than the format allows. */
		long n = sprobe_df__encode(&rec, NULL, 0);

		if (n < 0 || n > (long)SPROBE_DF_MAX_PAYLOAD)
			abort();
	}
	int st = sprobe_datafile_reader__status(rd);

	if (rc == 0 && st != SPROBE_DF_COMPLETE && st != SPROBE_DF_CUT_SHORT)
		abort();
	if (rc < 0 && (st != SPROBE_DF_CORRUPT || !*sprobe_datafile_reader__error(rd)))
		abort();
	sprobe_datafile_reader__free(rd);

	/* 2. The report over the same bytes, in every format, with and
	 * without a thread filter. */
	for (uint32_t tid = 0; tid < 2; tid++) {
		struct sprobe_report *r = sprobe_report__new(&(struct sprobe_report_opts){
			.sz = sizeof(struct sprobe_report_opts), .tid = tid ? 101 : 0 });

		rd = sprobe_datafile_reader__from_mem(data, size);
		if (!r || !rd)
			abort();
		rc = sprobe_report__load(r, rd);
		if (rc == -ENOMEM)
			abort();
		for (int f = SPROBE_REPORT_TEXT; f <= SPROBE_REPORT_HTML; f++)
			if ((rc = sprobe_report__write(r, sink, (enum sprobe_report_format)f)) != 0) {
				fprintf(stderr, "format %d failed: %d\n", f, rc);
				abort();
			}
		sprobe_datafile_reader__free(rd);
		sprobe_report__free(r);
	}
}
