/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data file: what is written is read back; a file cut at ANY byte keeps
 * every complete record and says it was cut short; ANY damaged byte is a
 * clear error, never a crash or a silently shorter result.
 */
#include <stdio.h>
#include <string.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"

static const uint64_t pcs1[] = { 0x401000, 0x402000, 0x7f0000001234 };
static const struct sprobe_df_range ranges[] = {
	{ 0x400000, 0x401000, 0 }, { 0x401000, 0x480000, 0x1000 },
};
static const uint8_t build_id[] = { 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02 };
static const struct sprobe_df_dropped dropped_tids[] = {
	{ 104, SPROBE_DROP_EXITED }, { 105, SPROBE_DROP_TIMEOUT },
};
static const char cmdline[] = "./demo\0--fast\0x y";

/* The records of the reference file, in order (trailer last). */
static void ref_records(struct sprobe_df_record *recs, size_t *n, uint64_t *big_pcs)
{
	size_t i = 0;

	for (int k = 0; k < SPROBE_MAX_FRAMES; k++)
		big_pcs[k] = 0x1000 + (uint64_t)k * 16;
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 4242, .mode = SPROBE_DF_MODE_CPU, .freq_hz = 99, .flags = 0,
		.start_realtime_ns = 1764500000123456789ULL, .start_mono_ns = 1000000000,
		.cmdline = cmdline, .cmdline_len = sizeof(cmdline) - 1 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 101, .name = "main", .name_len = 4 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 102, .name = "", .name_len = 0 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 7, .load_bias = 0x1000, .build_id = build_id,
		.build_id_len = sizeof(build_id), .path = "/usr/bin/demo", .path_len = 13,
		.ranges = ranges, .nranges = 2 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = 0x401000, .module = 7, .offset = 0x10, .name = "compute_a", .name_len = 9 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = 1000001000, .tid = 101, .method = SPROBE_METHOD_SIGNAL,
		.flags = SPROBE_DF_SAMPLE_TRUNCATED, .stack_used = 12345, .signal_ns = 1000000900,
		.entry_ns = 1000000950, .exit_ns = 1000000990, .pcs = pcs1, .nframes = 3 } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = 1000002000, .tid = 102, .method = SPROBE_METHOD_ZERO_PAUSE,
		.pcs = big_pcs, .nframes = SPROBE_MAX_FRAMES } };
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = 1000003000, .tid = 102, .nframes = 0 } };
	struct sprobe_df_record cap = { .type = SPROBE_DF_CAPTURE, .capture = {
		.time_ns = 1000000800, .threads_total = 5, .threads_captured = 3,
		.threads_dropped = 2, .pause_ns = 777, .capture_ns = 8888,
		.dropped_tids = dropped_tids, .ndropped_tids = 2 } };
	cap.capture.dropped[SPROBE_DROP_EXITED] = 1;
	cap.capture.dropped[SPROBE_DROP_TIMEOUT] = 1;
	recs[i++] = cap;
	recs[i++] = (struct sprobe_df_record){ .type = SPROBE_DF_KWINDOW, .kwindow = {
		.tid = 101, .generate_ns = 10, .deliver_ns = 20, .sigreturn_ns = 30, .offcpu_ns = 4 } };
	struct sprobe_df_record lost = { .type = SPROBE_DF_LOST, .lost = { .time_ns = 5 } };
	lost.lost.lost[SPROBE_DF_SAMPLE] = 3;
	recs[i++] = lost;
	struct sprobe_df_record tr = { .type = SPROBE_DF_TRAILER, .trailer = {
		.end_realtime_ns = 1764500001123456789ULL, .end_mono_ns = 2000000000 } };
	tr.trailer.lost[SPROBE_DF_SAMPLE] = 3;
	tr.trailer.records = i;	/* the writer fills this in: i records before */
	recs[i++] = tr;
	*n = i;
}

static void write_ref(struct df_buf *b, const struct sprobe_df_record *recs, size_t n)
{
	assert_int_equal(df_buf_open(b), 0);
	for (size_t i = 0; i + 1 < n; i++)
		assert_int_equal(sprobe_datafile_writer__write(b->w, &recs[i]), 0);
	assert_int_equal(sprobe_datafile_writer__finish(b->w, &recs[n - 1].trailer), 0);
	assert_int_equal(df_buf_take(b), 0);
}

static void assert_str(const char *got, const char *want, uint32_t len)
{
	assert_non_null(got);
	assert_memory_equal(got, want, len);
	assert_int_equal(got[len], '\0');	/* reader strings are terminated */
}

/* Field-by-field comparison of a record read back with what was written. */
static void assert_same(const struct sprobe_df_record *a, const struct sprobe_df_record *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case SPROBE_DF_HEADER:
		assert_int_equal(a->header.pid, b->header.pid);
		assert_int_equal(a->header.mode, b->header.mode);
		assert_int_equal(a->header.freq_hz, b->header.freq_hz);
		assert_true(a->header.start_realtime_ns == b->header.start_realtime_ns);
		assert_true(a->header.start_mono_ns == b->header.start_mono_ns);
		assert_int_equal(a->header.cmdline_len, b->header.cmdline_len);
		assert_str(b->header.cmdline, a->header.cmdline, a->header.cmdline_len);
		break;
	case SPROBE_DF_THREAD:
		assert_int_equal(a->thread.tid, b->thread.tid);
		assert_int_equal(a->thread.name_len, b->thread.name_len);
		assert_str(b->thread.name, a->thread.name, a->thread.name_len);
		break;
	case SPROBE_DF_MODULE:
		assert_int_equal(a->module.index, b->module.index);
		assert_true(a->module.load_bias == b->module.load_bias);
		assert_int_equal(a->module.build_id_len, b->module.build_id_len);
		assert_memory_equal(a->module.build_id, b->module.build_id, a->module.build_id_len);
		assert_str(b->module.path, a->module.path, a->module.path_len);
		assert_int_equal(a->module.nranges, b->module.nranges);
		assert_memory_equal(a->module.ranges, b->module.ranges,
				    a->module.nranges * sizeof(*a->module.ranges));
		break;
	case SPROBE_DF_SYMBOL:
		assert_true(a->symbol.pc == b->symbol.pc);
		assert_int_equal(a->symbol.module, b->symbol.module);
		assert_true(a->symbol.offset == b->symbol.offset);
		assert_str(b->symbol.name, a->symbol.name, a->symbol.name_len);
		break;
	case SPROBE_DF_SAMPLE:
		assert_true(a->sample.time_ns == b->sample.time_ns);
		assert_int_equal(a->sample.tid, b->sample.tid);
		assert_int_equal(a->sample.method, b->sample.method);
		assert_int_equal(a->sample.flags, b->sample.flags);
		assert_true(a->sample.stack_used == b->sample.stack_used);
		assert_true(a->sample.signal_ns == b->sample.signal_ns);
		assert_true(a->sample.entry_ns == b->sample.entry_ns);
		assert_true(a->sample.exit_ns == b->sample.exit_ns);
		assert_int_equal(a->sample.nframes, b->sample.nframes);
		if (a->sample.nframes)
			assert_memory_equal(a->sample.pcs, b->sample.pcs, a->sample.nframes * 8);
		break;
	case SPROBE_DF_CAPTURE:
		assert_true(a->capture.time_ns == b->capture.time_ns);
		assert_int_equal(a->capture.threads_total, b->capture.threads_total);
		assert_int_equal(a->capture.threads_captured, b->capture.threads_captured);
		assert_int_equal(a->capture.threads_dropped, b->capture.threads_dropped);
		assert_memory_equal(a->capture.dropped, b->capture.dropped, sizeof(a->capture.dropped));
		assert_true(a->capture.pause_ns == b->capture.pause_ns);
		assert_true(a->capture.capture_ns == b->capture.capture_ns);
		assert_int_equal(a->capture.ndropped_tids, b->capture.ndropped_tids);
		assert_memory_equal(a->capture.dropped_tids, b->capture.dropped_tids,
				    a->capture.ndropped_tids * sizeof(*a->capture.dropped_tids));
		break;
	case SPROBE_DF_KWINDOW:
		assert_memory_equal(&a->kwindow, &b->kwindow, sizeof(a->kwindow));
		break;
	case SPROBE_DF_LOST:
		assert_memory_equal(&a->lost, &b->lost, sizeof(a->lost));
		break;
	case SPROBE_DF_TRAILER:
		assert_memory_equal(&a->trailer, &b->trailer, sizeof(a->trailer));
		break;
	default:
		fail_msg("unexpected type %u", a->type);
	}
}

static void test_crc32c_known_vector(void **state)
{
	/* RFC 3720 / iSCSI check value; also exercises the 8-byte loop and
	 * the byte tail, and continuation from a previous crc. */
	assert_int_equal(sprobe_df__crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(sprobe_df__crc32c(sprobe_df__crc32c(0, "1234", 4), "56789", 5),
			 0xe3069283u);
	assert_int_equal(sprobe_df__crc32c(0, "", 0), 0);
}

static void test_round_trip(void **state)
{
	struct sprobe_df_record recs[16], got;
	uint64_t big[SPROBE_MAX_FRAMES];
	struct df_buf b;
	size_t n, i = 0;
	int rc;

	ref_records(recs, &n, big);
	write_ref(&b, recs, n);
	struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(b.bytes, b.len);

	assert_non_null(r);
	while ((rc = sprobe_datafile_reader__next(r, &got)) == 1) {
		assert_true(i < n);
		assert_same(&recs[i], &got);
		i++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(i, n);
	assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_COMPLETE);
	assert_string_equal(sprobe_datafile_reader__error(r), "");
	assert_int_equal(sprobe_datafile_reader__records(r), n);
	assert_int_equal(sprobe_datafile_reader__good_bytes(r), b.len);
	/* After the end, the same answer again. */
	assert_int_equal(sprobe_datafile_reader__next(r, &got), 0);
	sprobe_datafile_reader__free(r);
	df_buf_close(&b);
}

static void test_round_trip_through_a_path(void **state)
{
	struct sprobe_df_record recs[16], got;
	uint64_t big[SPROBE_MAX_FRAMES];
	struct df_buf b;
	char path[64];
	size_t n, i = 0;

	ref_records(recs, &n, big);
	write_ref(&b, recs, n);
	assert_int_equal(df_write_tmp(b.bytes, b.len, path, sizeof(path)), 0);
	struct sprobe_datafile_reader *r = sprobe_datafile_reader__open(path);

	assert_non_null(r);
	while (sprobe_datafile_reader__next(r, &got) == 1)
		assert_same(&recs[i++], &got);
	assert_int_equal(i, n);
	assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(r);
	unlink(path);
	df_buf_close(&b);

	errno = 0;
	assert_null(sprobe_datafile_reader__open("/nonexistent/stackprobe.data"));
	assert_int_equal(errno, ENOENT);
}

/* Cut the reference file at every byte offset: every record that ends at
 * or before the cut is returned intact, nothing more, no error, and the
 * reader says the file was cut short. */
static void test_truncated_at_every_offset(void **state)
{
	struct sprobe_df_record recs[16], got;
	uint64_t big[SPROBE_MAX_FRAMES];
	uint64_t ends[16];
	struct df_buf b;
	size_t n, i = 0;

	ref_records(recs, &n, big);
	write_ref(&b, recs, n);
	/* Where each record ends, from a full read. */
	struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(b.bytes, b.len);

	while (sprobe_datafile_reader__next(r, &got) == 1)
		ends[i++] = sprobe_datafile_reader__good_bytes(r);
	assert_int_equal(i, n);
	sprobe_datafile_reader__free(r);

	for (size_t cut = 0; cut < b.len; cut++) {
		size_t want = 0, k = 0;
		int rc;

		while (want < n && ends[want] <= cut)
			want++;
		r = sprobe_datafile_reader__from_mem(b.bytes, cut);
		assert_non_null(r);
		while ((rc = sprobe_datafile_reader__next(r, &got)) == 1) {
			assert_true(k < want);
			assert_same(&recs[k], &got);
			k++;
		}
		if (rc != 0 || k != want)
			fail_msg("cut at %zu: rc %d, %zu records, want %zu (%s)", cut, rc, k, want,
				 sprobe_datafile_reader__error(r));
		if (want == n) {
			/* Only the bytes after the trailer are missing... which
			 * cannot happen: the trailer ends the file. */
			fail_msg("cut at %zu returned the trailer", cut);
		}
		assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_CUT_SHORT);
		assert_non_null(strstr(sprobe_datafile_reader__error(r), "cut short"));
		sprobe_datafile_reader__free(r);
	}
	df_buf_close(&b);
}

/* Flip every byte in turn: each damaged file is a clear error (magic,
 * version or a checksum), never a crash, never a silent success. */
static void test_corrupt_every_byte(void **state)
{
	struct sprobe_df_record recs[16], got;
	uint64_t big[SPROBE_MAX_FRAMES];
	struct df_buf b;
	size_t n;

	ref_records(recs, &n, big);
	write_ref(&b, recs, n);
	uint8_t *copy = malloc(b.len);

	assert_non_null(copy);
	for (size_t off = 0; off < b.len; off++) {
		int rc;

		memcpy(copy, b.bytes, b.len);
		copy[off] ^= 0x5a;
		struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(copy, b.len);

		assert_non_null(r);
		while ((rc = sprobe_datafile_reader__next(r, &got)) == 1)
			;
		const char *msg = sprobe_datafile_reader__error(r);

		if (rc >= 0)
			fail_msg("flipping byte %zu went unnoticed (status %d)", off,
				 sprobe_datafile_reader__status(r));
		assert_true(rc == -EBADMSG || rc == -EPROTO || rc == -EPROTONOSUPPORT);
		assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_CORRUPT);
		assert_true(strstr(msg, "corrupt") || strstr(msg, "not a stackprobe") ||
			    strstr(msg, "version"));
		/* The error is sticky. */
		assert_int_equal(sprobe_datafile_reader__next(r, &got), rc);
		sprobe_datafile_reader__free(r);
	}
	free(copy);
	df_buf_close(&b);
}

static int read_all(const void *bytes, size_t len, size_t *nrec, char *msg, size_t cap)
{
	struct sprobe_df_record got;
	struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(bytes, len);
	int rc;

	*nrec = 0;
	while ((rc = sprobe_datafile_reader__next(r, &got)) == 1)
		(*nrec)++;
	snprintf(msg, cap, "%s", sprobe_datafile_reader__error(r));
	sprobe_datafile_reader__free(r);
	return rc;
}

static void test_not_a_data_file_and_empty(void **state)
{
	char msg[256];
	size_t n;

	assert_int_equal(read_all("hello world, not a data file", 28, &n, msg, sizeof(msg)),
			 -EPROTO);
	assert_non_null(strstr(msg, "not a stackprobe data file"));
	/* Empty: cut short before anything, zero records, not an error. */
	assert_int_equal(read_all("", 0, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 0);
	assert_non_null(strstr(msg, "empty"));
	/* A version from the future. */
	uint8_t pre[16] = "SPRBDATA";

	pre[8] = 99;
	pre[12] = 16;
	assert_int_equal(read_all(pre, sizeof(pre), &n, msg, sizeof(msg)), -EPROTONOSUPPORT);
	assert_non_null(strstr(msg, "version 99"));
	/* Version 0 (before the first) too; version 1 (no sample weights,
	 * which read as 1) is still read: a preamble alone, no records. */
	pre[8] = 0;
	assert_int_equal(read_all(pre, sizeof(pre), &n, msg, sizeof(msg)), -EPROTONOSUPPORT);
	pre[8] = 1;
	assert_int_equal(read_all(pre, sizeof(pre), &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 0);
}

/* Valid checksums around invalid content: the decoder's own checks. */
static void test_malformed_payloads(void **state)
{
	struct sprobe_df_record hdr = { .type = SPROBE_DF_HEADER };
	uint8_t p[64] = { 0 };
	char msg[256];
	size_t n;
	struct {
		uint32_t type;
		size_t len;
		const char *why;
		void (*fill)(uint8_t *);
	} cases[] = {
		{ SPROBE_DF_SAMPLE, 60, "more frames", NULL },
		{ SPROBE_DF_SAMPLE, 20, "too short", NULL },
		{ SPROBE_DF_THREAD, 8, "runs past", NULL },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct df_buf b;

		memset(p, 0, sizeof(p));
		if (cases[c].type == SPROBE_DF_SAMPLE)
			p[20] = 200;			/* nframes = 200 */
		if (cases[c].type == SPROBE_DF_THREAD)
			p[4] = 50;			/* name_len 50 > what follows */
		assert_int_equal(df_buf_open(&b), 0);
		assert_int_equal(sprobe_datafile_writer__write(b.w, &hdr), 0);
		assert_int_equal(sprobe_datafile_writer__write_raw(b.w, cases[c].type, p,
								   (uint32_t)cases[c].len), 0);
		assert_int_equal(df_buf_take(&b), 0);
		assert_int_equal(read_all(b.bytes, b.len, &n, msg, sizeof(msg)), -EBADMSG);
		assert_int_equal(n, 1);
		if (!strstr(msg, cases[c].why))
			fail_msg("case %zu: message '%s' lacks '%s'", c, msg, cases[c].why);
		df_buf_close(&b);
	}

	/* The first record must be the header. */
	struct df_buf b;
	struct sprobe_df_record th = { .type = SPROBE_DF_THREAD, .thread = { .tid = 1 } };

	assert_int_equal(df_buf_open(&b), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &th), 0);
	assert_int_equal(df_buf_take(&b), 0);
	assert_int_equal(read_all(b.bytes, b.len, &n, msg, sizeof(msg)), -EBADMSG);
	assert_non_null(strstr(msg, "not the header"));
	df_buf_close(&b);
}

static void test_unknown_type_skipped_and_data_after_trailer(void **state)
{
	struct sprobe_df_record hdr = { .type = SPROBE_DF_HEADER };
	struct sprobe_df_record th = { .type = SPROBE_DF_THREAD, .thread = { .tid = 9 } };
	char msg[256];
	struct df_buf b;
	size_t n;

	assert_int_equal(df_buf_open(&b), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &hdr), 0);
	assert_int_equal(sprobe_datafile_writer__write_raw(b.w, 200, "future", 6), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &th), 0);
	assert_int_equal(sprobe_datafile_writer__finish(b.w, NULL), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &th), -EPIPE);
	assert_int_equal(df_buf_take(&b), 0);
	/* header, thread, trailer: the unknown record is skipped. */
	assert_int_equal(read_all(b.bytes, b.len, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 3);

	/* After a part's trailer only a new part (HEADER) or the notes on
	 * processes (EXIT, PROCESS) may follow: an intact thread record
	 * there is corruption, and so are bytes that are not a record. */
	uint8_t payload[64], frame[SPROBE_DF_FRAME_SIZE];
	long plen = sprobe_df__encode(&th, payload, sizeof(payload));

	assert_true(plen > 0 && plen <= (long)sizeof(payload));
	sprobe_df__frame(frame, SPROBE_DF_THREAD, payload, (uint32_t)plen);
	uint8_t *more = malloc(b.len + sizeof(frame) + (size_t)plen + 32);

	assert_non_null(more);
	memcpy(more, b.bytes, b.len);
	memcpy(more + b.len, frame, sizeof(frame));
	memcpy(more + b.len + sizeof(frame), payload, (size_t)plen);
	assert_int_equal(read_all(more, b.len + sizeof(frame) + (size_t)plen, &n, msg, sizeof(msg)),
			 -EBADMSG);
	assert_non_null(strstr(msg, "follows its part's trailer"));
	memset(more + b.len, 'x', 32);
	assert_int_equal(read_all(more, b.len + 32, &n, msg, sizeof(msg)), -EBADMSG);
	assert_non_null(strstr(msg, "corrupt record header"));
	free(more);
	df_buf_close(&b);
}

/* Version 3: several processes' parts in one file, each from its HEADER;
 * a part cut short (no trailer) is followed by the next; PROCESS and EXIT
 * records round-trip; the file is whole when it ends after an EXIT. */
static void test_multi_part_file(void **state)
{
	struct sprobe_df_record h1 = { .type = SPROBE_DF_HEADER, .header = { .pid = 10 } };
	struct sprobe_df_record h2 = { .type = SPROBE_DF_HEADER, .header = { .pid = 11 } };
	struct sprobe_df_record pr = {
		.type = SPROBE_DF_PROCESS,
		.process = { .pid = 11, .ppid = 10, .exec_index = 2, .flags = 0, .start_mono_ns = 77,
			     .name = "cc1", .name_len = 3, .exe = "/usr/bin/cc1", .exe_len = 12 },
	};
	struct sprobe_df_record ex = {
		.type = SPROBE_DF_EXIT,
		.exit = { .pid = 10, .how = SPROBE_DF_EXIT_KILLED, .code = 9, .time_ns = 5,
			  .part_status = SPROBE_DF_CUT_SHORT, .note = "cut", .note_len = 3 },
	};
	struct sprobe_df_record got[8];
	struct sprobe_datafile_reader *rd;
	struct df_buf b;
	int k = 0, rc;

	assert_int_equal(df_buf_open(&b), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &h1), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &ex), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &h2), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &pr), 0);
	assert_int_equal(sprobe_datafile_writer__finish(b.w, NULL), 0);
	assert_int_equal(df_buf_take(&b), 0);
	rd = sprobe_datafile_reader__from_mem(b.bytes, b.len);
	assert_non_null(rd);
	while (k < 8 && (rc = sprobe_datafile_reader__next(rd, &got[k])) == 1) {
		if (got[k].type == SPROBE_DF_PROCESS) {
			assert_int_equal(got[k].process.ppid, 10);
			assert_int_equal(got[k].process.exec_index, 2);
			assert_int_equal(got[k].process.start_mono_ns, 77);
			assert_string_equal(got[k].process.name, "cc1");
			assert_string_equal(got[k].process.exe, "/usr/bin/cc1");
		}
		if (got[k].type == SPROBE_DF_EXIT) {
			assert_int_equal(got[k].exit.how, SPROBE_DF_EXIT_KILLED);
			assert_int_equal(got[k].exit.code, 9);
			assert_int_equal(got[k].exit.part_status, SPROBE_DF_CUT_SHORT);
			assert_string_equal(got[k].exit.note, "cut");
		}
		k++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(k, 5);
	assert_int_equal(got[2].type, SPROBE_DF_HEADER);
	assert_int_equal(got[2].header.pid, 11);
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd);
	/* Ending on the EXIT of a part without trailer is whole too; ending
	 * on any other record is cut short. */
	size_t cut[3] = { 0 };

	rd = sprobe_datafile_reader__from_mem(b.bytes, b.len);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(sprobe_datafile_reader__next(rd, &got[0]), 1);
		cut[i] = (size_t)sprobe_datafile_reader__good_bytes(rd);
	}
	sprobe_datafile_reader__free(rd);
	for (int i = 0; i < 3; i++) {
		rd = sprobe_datafile_reader__from_mem(b.bytes, cut[i]);
		while (sprobe_datafile_reader__next(rd, &got[0]) == 1)
			;
		/* after h1: cut short; after its EXIT: whole; after h2: cut */
		assert_int_equal(sprobe_datafile_reader__status(rd),
				 i == 1 ? SPROBE_DF_COMPLETE : SPROBE_DF_CUT_SHORT);
		sprobe_datafile_reader__free(rd);
	}
	df_buf_close(&b);
}

static void test_encode_limits(void **state)
{
	static uint64_t pcs[SPROBE_MAX_FRAMES + 1];
	static char big[SPROBE_DF_MAX_STRING + 2];
	struct sprobe_df_record rec = { .type = SPROBE_DF_SAMPLE,
					.sample = { .pcs = pcs, .nframes = SPROBE_MAX_FRAMES + 1 } };
	uint8_t buf[16];
	struct df_buf b;

	assert_int_equal(sprobe_df__encode(&rec, NULL, 0), -EINVAL);
	rec = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
					 .thread = { .name = big, .name_len = sizeof(big) - 1 } };
	assert_int_equal(sprobe_df__encode(&rec, NULL, 0), -EINVAL);
	rec.type = 77;
	assert_int_equal(sprobe_df__encode(&rec, NULL, 0), -EINVAL);
	/* Too small a buffer: the size needed, nothing written past cap. */
	rec = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
					 .thread = { .tid = 1, .name = "abcdefghijkl", .name_len = 12 } };
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(sprobe_df__encode(&rec, buf, 4), 20);
	for (size_t i = 4; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xee);
	assert_int_equal(df_buf_open(&b), 0);
	rec.thread.name = big;
	rec.thread.name_len = sizeof(big) - 1;
	assert_int_equal(sprobe_datafile_writer__write(b.w, &rec), -EINVAL);
	assert_int_equal(sprobe_datafile_writer__records(b.w), 0);
	df_buf_close(&b);
}

/* A writer freed without __finish (a crash, in effect) reads as cut short
 * with every record it wrote. */
static void test_unfinished_writer_reads_cut_short(void **state)
{
	struct sprobe_df_record recs[16];
	uint64_t big[SPROBE_MAX_FRAMES];
	char msg[256];
	struct df_buf b;
	size_t n, got;

	ref_records(recs, &n, big);
	assert_int_equal(df_buf_open(&b), 0);
	for (size_t i = 0; i + 1 < n; i++)
		assert_int_equal(sprobe_datafile_writer__write(b.w, &recs[i]), 0);
	assert_int_equal(df_buf_take(&b), 0);
	assert_int_equal(read_all(b.bytes, b.len, &got, msg, sizeof(msg)), 0);
	assert_int_equal(got, n - 1);
	assert_non_null(strstr(msg, "without a trailer"));
	df_buf_close(&b);
}

/* A sample's weight travels in bits 16..31 of its flags word as weight - 1:
 * 0 and 1 both read as 1, a weight over the cap reads as the cap, and the
 * reader hands back the flags without the weight bits, so TRUNCATED is
 * exactly what was written next to any weight. */
static void test_sample_weight_round_trip(void **state)
{
	static const uint64_t pcs[] = { 0x401000, 0x402000 };
	static const struct {
		uint32_t weight, flags;		/* written */
		uint32_t want_weight;		/* read back */
	} cases[] = {
		{ 0, 0, 1 },
		{ 1, 0, 1 },
		{ 7, SPROBE_DF_SAMPLE_TRUNCATED, 7 },
		{ SPROBE_DF_SAMPLE_WEIGHT_MAX + 5, 0, SPROBE_DF_SAMPLE_WEIGHT_MAX },
		{ SPROBE_DF_SAMPLE_WEIGHT_MAX, SPROBE_DF_SAMPLE_TRUNCATED, SPROBE_DF_SAMPLE_WEIGHT_MAX },
		{ 2, 0, 2 },
	};
	const size_t ncases = sizeof(cases) / sizeof(cases[0]);
	struct sprobe_df_record got;
	struct df_buf b;
	size_t k = 0;
	int rc;

	/* The largest weight must fit the 16 bits the format gives it. */
	assert_int_equal((SPROBE_DF_SAMPLE_WEIGHT_MAX - 1) >> (32 - SPROBE_DF_SAMPLE_WEIGHT_SHIFT), 0);
	assert_int_equal(df_buf_open(&b), 0);
	assert_int_equal(sprobe_datafile_writer__write(b.w, &(struct sprobe_df_record){
		.type = SPROBE_DF_HEADER, .header = { .mode = SPROBE_DF_MODE_CPU } }), 0);
	for (size_t i = 0; i < ncases; i++)
		assert_int_equal(sprobe_datafile_writer__write(b.w, &(struct sprobe_df_record){
			.type = SPROBE_DF_SAMPLE, .sample = {
				.time_ns = 1000 + i, .tid = 100 + (uint32_t)i,
				.method = SPROBE_METHOD_SIGNAL, .flags = cases[i].flags,
				.weight = cases[i].weight, .pcs = pcs, .nframes = 2 } }), 0);
	assert_int_equal(sprobe_datafile_writer__finish(b.w, NULL), 0);
	assert_int_equal(df_buf_take(&b), 0);

	struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(b.bytes, b.len);

	assert_non_null(r);
	assert_int_equal(sprobe_datafile_reader__next(r, &got), 1);
	assert_int_equal(got.type, SPROBE_DF_HEADER);
	while ((rc = sprobe_datafile_reader__next(r, &got)) == 1 && got.type == SPROBE_DF_SAMPLE) {
		assert_true(k < ncases);
		if (got.sample.weight != cases[k].want_weight || got.sample.flags != cases[k].flags)
			fail_msg("sample %zu: wrote weight %u flags %#x, read weight %u flags %#x, "
				 "want weight %u flags %#x", k, cases[k].weight, cases[k].flags,
				 got.sample.weight, got.sample.flags, cases[k].want_weight,
				 cases[k].flags);
		/* The fields around the flags word are intact. */
		assert_int_equal(got.sample.tid, 100 + k);
		assert_int_equal(got.sample.method, SPROBE_METHOD_SIGNAL);
		assert_int_equal(got.sample.nframes, 2);
		assert_memory_equal(got.sample.pcs, pcs, sizeof(pcs));
		k++;
	}
	assert_int_equal(rc, 1);
	assert_int_equal(got.type, SPROBE_DF_TRAILER);
	assert_int_equal(k, ncases);
	assert_int_equal(sprobe_datafile_reader__next(r, &got), 0);
	assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(r);

	/* On disk: the payload's flags word (after time 8, tid 4, method 4)
	 * is (weight - 1) << 16 | flags, whatever the caller left in the
	 * weight bits of .flags: the writer fills them from .weight. */
	struct sprobe_df_record one = { .type = SPROBE_DF_SAMPLE, .sample = {
		.flags = SPROBE_DF_SAMPLE_TRUNCATED | 0xabcd0000u, .weight = 7, .pcs = pcs,
		.nframes = 2 } };
	uint8_t buf[256];
	long len = sprobe_df__encode(&one, buf, sizeof(buf));
	uint32_t want = (7u - 1) << SPROBE_DF_SAMPLE_WEIGHT_SHIFT | SPROBE_DF_SAMPLE_TRUNCATED;
	const uint8_t le[4] = { (uint8_t)want, (uint8_t)(want >> 8), (uint8_t)(want >> 16),
				(uint8_t)(want >> 24) };

	assert_true(len >= 20 && (size_t)len <= sizeof(buf));
	assert_memory_equal(buf + 16, le, sizeof(le));
	df_buf_close(&b);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_crc32c_known_vector),
	cmocka_unit_test(test_round_trip),
	cmocka_unit_test(test_sample_weight_round_trip),
	cmocka_unit_test(test_round_trip_through_a_path),
	cmocka_unit_test(test_truncated_at_every_offset),
	cmocka_unit_test(test_corrupt_every_byte),
	cmocka_unit_test(test_not_a_data_file_and_empty),
	cmocka_unit_test(test_malformed_payloads),
	cmocka_unit_test(test_unknown_type_skipped_and_data_after_trailer),
	cmocka_unit_test(test_multi_part_file),
	cmocka_unit_test(test_encode_limits),
	cmocka_unit_test(test_unfinished_writer_reads_cut_short),
};

SPROBE_TEST_MAIN(tests)
