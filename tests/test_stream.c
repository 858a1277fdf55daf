/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Stream: the backpressure contract. A stalled sink makes the producer drop
 * and count, never block; what is accepted arrives intact and in order; the
 * drops reach the sink (and so the data file) as LOST records.
 *
 * Non-blocking is proven without timing: the sink is held inside write() on
 * a condition variable until the producer has finished all its pushes. If a
 * push could block on the sink, the test would deadlock (and the runner's
 * timeout would fail it).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include <stackprobe/stream.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"
#include "userspace/datafile/stream_internal.h"

/* A sink that records what it gets and can be held stalled. */
struct rec_copy {
	uint32_t type;
	uint32_t len;
	uint8_t *bytes;
};

struct test_sink {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stall;		/* hold the next write() until released */
	bool entered;		/* a write() is being held */
	int fail_every;		/* return -EIO on every Nth write (0: never) */
	int flushes;
	size_t n, cap;
	struct rec_copy *recs;
};

static int ts_write(void *ctx, uint32_t type, const void *payload, uint32_t len)
{
	struct test_sink *s = ctx;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	if (s->stall) {
		s->entered = true;
		pthread_cond_broadcast(&s->cv);
		while (s->stall)
			pthread_cond_wait(&s->cv, &s->mu);
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->recs = realloc(s->recs, s->cap * sizeof(*s->recs));
	}
	s->recs[s->n].type = type;
	s->recs[s->n].len = len;
	s->recs[s->n].bytes = malloc(len ? len : 1);
	memcpy(s->recs[s->n].bytes, payload, len);
	s->n++;
	if (s->fail_every && s->n % (size_t)s->fail_every == 0)
		rc = -EIO;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int ts_flush(void *ctx)
{
	struct test_sink *s = ctx;

	pthread_mutex_lock(&s->mu);
	s->flushes++;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static void ts_init(struct test_sink *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
}

static void ts_fini(struct test_sink *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->recs[i].bytes);
	free(s->recs);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}

static struct sprobe_stream_sink ts_sink(struct test_sink *s)
{
	return (struct sprobe_stream_sink){ .write = ts_write, .flush = ts_flush, .ctx = s };
}

/* A sample whose tid carries a sequence number and whose pcs derive from
 * it, so content and order can be checked on the sink side. */
static struct sprobe_df_record seq_sample(uint32_t seq, uint32_t nframes, uint64_t *pcs)
{
	for (uint32_t i = 0; i < nframes; i++)
		pcs[i] = (uint64_t)seq << 20 | i;
	return (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = seq, .tid = seq, .pcs = pcs, .nframes = nframes } };
}

/* The sink received exactly the encoding of REC. */
static void assert_payload(const struct rec_copy *got, const struct sprobe_df_record *rec)
{
	uint8_t buf[2048];
	long n = sprobe_df__encode(rec, buf, sizeof(buf));

	assert_true(n > 0 && (size_t)n <= sizeof(buf));
	assert_int_equal(got->type, rec->type);
	assert_int_equal(got->len, n);
	assert_memory_equal(got->bytes, buf, (size_t)n);
}

static void test_all_records_arrive_in_order(void **state)
{
	struct test_sink ts;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	struct sprobe_stream_stats st;

	ts_init(&ts);
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, NULL);

	assert_non_null(s);
	for (uint32_t i = 0; i < 1000; i++) {
		struct sprobe_df_record rec = seq_sample(i, i % 40, pcs);

		assert_int_equal(sprobe_stream__push(s, &rec), 0);
	}
	assert_int_equal(sprobe_stream__close(s), 0);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.pushed, 1000);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.written, 1000);
	assert_int_equal(st.lost_records_written, 0);
	assert_int_equal(ts.n, 1000);
	for (uint32_t i = 0; i < 1000; i++) {
		struct sprobe_df_record rec = seq_sample(i, i % 40, pcs);

		assert_payload(&ts.recs[i], &rec);
	}
	assert_true(ts.flushes >= 1);
	/* After close: refused, and close again is harmless. */
	struct sprobe_df_record rec = seq_sample(0, 0, pcs);

	assert_int_equal(sprobe_stream__push(s, &rec), -EPIPE);
	assert_int_equal(sprobe_stream__close(s), 0);
	sprobe_stream__free(s);
	ts_fini(&ts);
}

/* The contract itself. Capacity 4096 bytes; a sample with no frames takes
 * exactly 64 bytes of queue (8 entry header + 56 payload), so the queue
 * holds 64 of them. The first is held by the stalled sink (its bytes are
 * not released until write() returns), so exactly 63 of the next N fit and
 * N - 63 are dropped, whatever the timing. */
static void test_stalled_sink_drops_and_counts_never_blocks(void **state)
{
	const uint32_t N = 1000, fit = 4096 / 64 - 1;
	struct sprobe_stream_opts opts = { .sz = sizeof(opts), .capacity_bytes = 4096 };
	struct test_sink ts;
	uint64_t pcs[1];
	struct sprobe_stream_stats st;
	uint32_t accepted = 0, refused = 0;

	ts_init(&ts);
	ts.stall = true;
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, &opts);

	assert_non_null(s);
	struct sprobe_df_record first = seq_sample(0, 0, pcs);

	assert_int_equal(sprobe_stream__push(s, &first), 0);
	/* Wait until the writer thread is held inside the sink. */
	pthread_mutex_lock(&ts.mu);
	while (!ts.entered)
		pthread_cond_wait(&ts.cv, &ts.mu);
	pthread_mutex_unlock(&ts.mu);

	/* The sink is stalled and stays stalled until after this loop: every
	 * push must return on its own. */
	for (uint32_t i = 1; i <= N; i++) {
		struct sprobe_df_record rec = seq_sample(i, 0, pcs);
		int rc = sprobe_stream__push(s, &rec);

		if (rc == 0) {
			assert_int_equal(refused, 0);	/* no accept after a refusal */
			accepted++;
		} else {
			assert_int_equal(rc, -ENOBUFS);
			refused++;
		}
	}
	assert_int_equal(accepted, fit);
	assert_int_equal(refused, N - fit);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.dropped, N - fit);
	assert_int_equal(st.dropped_by_type[SPROBE_DF_SAMPLE], N - fit);
	assert_int_equal(st.pushed, 1 + fit);
	pthread_mutex_lock(&ts.mu);
	assert_int_equal(ts.n, 0);	/* the sink really was stalled */
	ts.stall = false;
	pthread_cond_broadcast(&ts.cv);
	/* Wait for the queued samples to drain, then the queue takes more. */
	while (ts.n < 1 + fit)
		pthread_cond_wait(&ts.cv, &ts.mu);
	pthread_mutex_unlock(&ts.mu);
	for (uint32_t i = 0; i < 10; i++) {
		struct sprobe_df_record rec = seq_sample(N + 1 + i, 0, pcs);

		assert_int_equal(sprobe_stream__push(s, &rec), 0);
	}
	assert_int_equal(sprobe_stream__close(s), 0);

	/* What the sink got: samples 0..fit and N+1..N+10 in order, and LOST
	 * records whose last one has the exact final count. */
	uint32_t want_seq = 0;
	const struct rec_copy *last_lost = NULL;
	size_t samples = 0;

	for (size_t i = 0; i < ts.n; i++) {
		if (ts.recs[i].type == SPROBE_DF_LOST) {
			last_lost = &ts.recs[i];
			continue;
		}
		struct sprobe_df_record rec = seq_sample(want_seq, 0, pcs);

		assert_payload(&ts.recs[i], &rec);
		samples++;
		want_seq = want_seq == fit ? N + 1 : want_seq + 1;
	}
	assert_int_equal(samples, 1 + fit + 10);
	assert_non_null(last_lost);
	struct sprobe_df_record lost = { .type = SPROBE_DF_LOST };

	memcpy(&lost.lost.time_ns, last_lost->bytes, 8);	/* time is not ours to check */
	lost.lost.lost[SPROBE_DF_SAMPLE] = N - fit;
	assert_payload(last_lost, &lost);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.written, 1 + fit + 10 + st.lost_records_written);
	assert_true(st.lost_records_written >= 1);
	sprobe_stream__free(s);
	ts_fini(&ts);
}

/* Mixed sizes through a small ring, many times around: wrap-around and
 * padding never corrupt or reorder; every accepted record arrives. */
static void test_wraparound_with_mixed_sizes(void **state)
{
	struct sprobe_stream_opts opts = { .sz = sizeof(opts), .capacity_bytes = 4096 };
	struct test_sink ts;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	uint32_t *accepted = calloc(20000, sizeof(uint32_t));
	size_t nacc = 0;
	struct sprobe_stream_stats st;

	ts_init(&ts);
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, &opts);

	assert_non_null(s);
	for (uint32_t i = 0; i < 20000; i++) {
		struct sprobe_df_record rec = seq_sample(i, (i * 37) % (SPROBE_MAX_FRAMES + 1), pcs);
		int rc = sprobe_stream__push(s, &rec);

		assert_true(rc == 0 || rc == -ENOBUFS);
		if (rc == 0)
			accepted[nacc++] = i;
	}
	assert_int_equal(sprobe_stream__close(s), 0);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.pushed, nacc);
	assert_int_equal(st.pushed + st.dropped, 20000);
	size_t k = 0;

	for (size_t i = 0; i < ts.n; i++) {
		if (ts.recs[i].type == SPROBE_DF_LOST)
			continue;
		assert_true(k < nacc);
		struct sprobe_df_record rec =
			seq_sample(accepted[k], (accepted[k] * 37) % (SPROBE_MAX_FRAMES + 1), pcs);

		assert_payload(&ts.recs[i], &rec);
		k++;
	}
	assert_int_equal(k, nacc);
	sprobe_stream__free(s);
	ts_fini(&ts);
	free(accepted);
}

/* A ring large enough to give consumed pages back (stream.c
 * release_behind()): records still arrive whole and in order across many
 * wraps, and once the writer has drained, only the working set of the
 * ring is resident, not the whole of it. */
static void test_ring_gives_consumed_pages_back(void **state)
{
	const size_t cap = 1u << 20;
	struct sprobe_stream_opts opts = { .sz = sizeof(opts), .capacity_bytes = cap };
	struct test_sink ts;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	const uint32_t total = 40000; /* ~20 MiB of samples: ~20 wraps */
	uint32_t *accepted = calloc(total, sizeof(uint32_t));
	size_t nacc = 0, k = 0, peak = 0;

	(void)state;
	assert_non_null(accepted);
	ts_init(&ts);
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, &opts);

	assert_non_null(s);
	for (uint32_t i = 0; i < total; i++) {
		struct sprobe_df_record rec = seq_sample(i, (i * 37) % (SPROBE_MAX_FRAMES + 1), pcs);
		int rc = sprobe_stream__push(s, &rec);

		assert_true(rc == 0 || rc == -ENOBUFS);
		if (rc == 0)
			accepted[nacc++] = i;
		if (i % 1000 == 999) {
			size_t r = sprobe_stream__resident_bytes(s);

			peak = r > peak ? r : peak;
		}
	}
	assert_int_equal(sprobe_stream__close(s), 0);
	assert_true(nacc > cap / 1024); /* more than one ring's worth went through */
	for (size_t i = 0; i < ts.n; i++) {
		if (ts.recs[i].type == SPROBE_DF_LOST)
			continue;
		assert_true(k < nacc);
		struct sprobe_df_record rec =
			seq_sample(accepted[k], (accepted[k] * 37) % (SPROBE_MAX_FRAMES + 1), pcs);

		assert_payload(&ts.recs[i], &rec);
		k++;
	}
	assert_int_equal(k, nacc);
	/* While records flowed, ring pages were resident (the count works);
	 * drained, what is left is at most what the writer populated ahead
	 * of head plus the last chunk it kept (stream.c: 128 + 32 KiB; it may
	 * have given those back too), far below the 1 MiB a ring that kept
	 * its pages would hold. */
	size_t resident = sprobe_stream__resident_bytes(s);

	assert_true(peak > 0);
	assert_true(resident <= cap / 4);
	sprobe_stream__free(s);
	ts_fini(&ts);
	free(accepted);
}

static void test_invalid_and_oversized_records(void **state)
{
	struct sprobe_stream_opts opts = { .sz = sizeof(opts), .capacity_bytes = 4096 };
	static struct sprobe_df_range ranges[SPROBE_DF_MAX_RANGES];
	struct test_sink ts;
	struct sprobe_stream_stats st;

	ts_init(&ts);
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, &opts);

	assert_non_null(s);
	struct sprobe_df_record bad = { .type = 42 };
	struct sprobe_df_record huge = { .type = SPROBE_DF_MODULE, .module = {
		.path = "/x", .path_len = 2, .ranges = ranges, .nranges = SPROBE_DF_MAX_RANGES } };

	assert_int_equal(sprobe_stream__push(s, &bad), -EINVAL);
	assert_int_equal(sprobe_stream__push(s, &huge), -E2BIG);	/* 6 KiB > 4 KiB ring */
	assert_int_equal(sprobe_stream__push(s, NULL), -EINVAL);
	assert_int_equal(sprobe_stream__close(s), 0);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.invalid, 2);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(ts.n, 0);
	sprobe_stream__free(s);
	ts_fini(&ts);

	assert_null(sprobe_stream__new(NULL, NULL));
	assert_int_equal(errno, EINVAL);
}

static void test_sink_errors_are_counted(void **state)
{
	struct test_sink ts;
	uint64_t pcs[4];
	struct sprobe_stream_stats st;

	ts_init(&ts);
	ts.fail_every = 2;
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, NULL);

	for (uint32_t i = 0; i < 10; i++) {
		struct sprobe_df_record rec = seq_sample(i, 4, pcs);

		assert_int_equal(sprobe_stream__push(s, &rec), 0);
	}
	assert_int_equal(sprobe_stream__close(s), -EIO);
	sprobe_stream__stats(s, &st);
	assert_int_equal(st.sink_errors, 5);
	assert_int_equal(st.written, 5);
	assert_int_equal(st.last_sink_error, -EIO);
	sprobe_stream__free(s);
	ts_fini(&ts);
}

/* The path the sampler will use: captured thread -> stream -> data file
 * writer -> reader; drops end up in the file too. */
static void test_thread_sample_to_datafile(void **state)
{
	struct sprobe_stream_opts opts = { .sz = sizeof(opts), .capacity_bytes = 4096 };
	static struct sprobe_thread_sample ts;
	static struct sprobe_frame frames[5];
	struct sprobe_df_record hdr = { .type = SPROBE_DF_HEADER, .header = { .pid = 7 } };
	struct sprobe_stream_stats st;
	struct df_buf b;

	memset(&ts, 0, sizeof(ts));
	ts.tid = 321;
	ts.method = SPROBE_METHOD_SIGNAL;
	ts.stage = SPROBE_STAGE_UNWOUND;
	ts.sp = 0x7ffc0000f000;
	ts.stack_top = 0x7ffc00010000;
	ts.truncated = true;
	ts.signal_ns = 100;
	ts.entry_ns = 110;
	ts.exit_ns = 150;
	ts.frames = frames;
	ts.frames_cap = 5;
	ts.nframes = 5;
	for (int i = 0; i < 5; i++)
		ts.frames[i].pc = 0x400000 + (uint64_t)i * 0x10;

	assert_int_equal(df_buf_open(&b), 0);
	struct sprobe_stream_sink sink = sprobe_stream_sink__datafile(b.w);
	struct sprobe_stream *s = sprobe_stream__new(&sink, &opts);

	assert_non_null(s);
	assert_int_equal(sprobe_stream__push(s, &hdr), 0);
	assert_int_equal(sprobe_stream__push_thread_sample(s, &ts, 12345), 0);
	assert_int_equal(sprobe_stream__close(s), 0);
	sprobe_stream__stats(s, &st);
	struct sprobe_df_trailer tr = { .end_mono_ns = 99999 };

	memcpy(tr.lost, st.dropped_by_type, sizeof(tr.lost));
	assert_int_equal(sprobe_datafile_writer__finish(b.w, &tr), 0);
	assert_int_equal(df_buf_take(&b), 0);

	struct sprobe_datafile_reader *r = sprobe_datafile_reader__from_mem(b.bytes, b.len);
	struct sprobe_df_record rec;

	assert_int_equal(sprobe_datafile_reader__next(r, &rec), 1);
	assert_int_equal(rec.type, SPROBE_DF_HEADER);
	assert_int_equal(rec.header.pid, 7);
	assert_int_equal(sprobe_datafile_reader__next(r, &rec), 1);
	assert_int_equal(rec.type, SPROBE_DF_SAMPLE);
	assert_int_equal(rec.sample.tid, 321);
	assert_true(rec.sample.time_ns == 12345);
	assert_int_equal(rec.sample.method, SPROBE_METHOD_SIGNAL);
	assert_int_equal(rec.sample.flags, SPROBE_DF_SAMPLE_TRUNCATED);
	assert_true(rec.sample.stack_used == 0x1000);
	assert_true(rec.sample.signal_ns == 100 && rec.sample.entry_ns == 110 &&
		    rec.sample.exit_ns == 150);
	assert_int_equal(rec.sample.nframes, 5);
	for (int i = 0; i < 5; i++)
		assert_true(rec.sample.pcs[i] == 0x400000 + (uint64_t)i * 0x10);
	assert_int_equal(sprobe_datafile_reader__next(r, &rec), 1);
	assert_int_equal(rec.type, SPROBE_DF_TRAILER);
	assert_true(rec.trailer.end_mono_ns == 99999);
	assert_true(rec.trailer.records == 2);
	assert_int_equal(sprobe_datafile_reader__next(r, &rec), 0);
	assert_int_equal(sprobe_datafile_reader__status(r), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(r);
	sprobe_stream__free(s);
	df_buf_close(&b);
}

/* What the writer thread looks like from inside, seen by its sink. */
struct probe_sink {
	pid_t tid;
	bool sigint_blocked, sigterm_blocked;
	bool rt_blocked;	/* real-time signals blocked (the program's too) */
	bool sync_open;		/* synchronous signals (a fault) not blocked */
	char comm[32];
};

static int probe_write(void *ctx, uint32_t type, const void *p, uint32_t len)
{
	struct probe_sink *ps = ctx;
	sigset_t cur;
	char path[64];

	ps->tid = (pid_t)syscall(SYS_gettid);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	ps->sigint_blocked = sigismember(&cur, SIGINT) == 1;
	ps->sigterm_blocked = sigismember(&cur, SIGTERM) == 1;
	ps->rt_blocked = sigismember(&cur, SIGRTMIN + 2) == 1 && sigismember(&cur, SIGRTMAX) == 1;
	ps->sync_open = sigismember(&cur, SIGSEGV) == 0 && sigismember(&cur, SIGBUS) == 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", ps->tid);
	FILE *f = fopen(path, "r");

	if (f) {
		if (!fgets(ps->comm, sizeof(ps->comm), f))
			ps->comm[0] = '\0';
		fclose(f);
	}
	return 0;
}

static void test_writer_thread_identity_and_signals(void **state)
{
	struct probe_sink ps = { 0 };
	struct sprobe_stream_sink sink = { .write = probe_write, .ctx = &ps };
	struct sprobe_stream *s = sprobe_stream__new(&sink, NULL);
	struct sprobe_df_record rec = { .type = SPROBE_DF_THREAD, .thread = { .tid = 1 } };

	assert_non_null(s);
	assert_int_equal(sprobe_stream__push(s, &rec), 0);
	assert_int_equal(sprobe_stream__close(s), 0);	/* joins: ps is complete */
	assert_true(ps.tid > 0);
	assert_int_equal(ps.tid, sprobe_stream__writer_tid(s));
	assert_true(ps.tid != (pid_t)syscall(SYS_gettid));
	assert_true(ps.sigint_blocked);
	assert_true(ps.sigterm_blocked);
	assert_true(ps.rt_blocked);
	assert_true(ps.sync_open);
	assert_string_equal(ps.comm, "sprobe-writer\n");
	/* The caller's own mask is untouched. */
	sigset_t cur;

	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	assert_int_equal(sigismember(&cur, SIGINT), 0);
	sprobe_stream__free(s);
}

static void test_capture_stats_record(void **state)
{
	struct test_sink ts;
	struct sprobe_snapshot_stats st = { .threads_total = 5, .threads_captured = 3,
					    .threads_dropped = 2, .pause_ns = 10, .capture_ns = 20 };
	static const struct sprobe_df_dropped dropped[] = {
		{ 7, SPROBE_DROP_EXITED }, { 8, SPROBE_DROP_TIMEOUT },
	};

	st.dropped[SPROBE_DROP_EXITED] = 1;
	st.dropped[SPROBE_DROP_TIMEOUT] = 1;
	ts_init(&ts);
	struct sprobe_stream_sink sink = ts_sink(&ts);
	struct sprobe_stream *s = sprobe_stream__new(&sink, NULL);

	assert_int_equal(sprobe_stream__push_capture_stats(s, &st, 999, dropped, 2), 0);
	assert_int_equal(sprobe_stream__push_capture_stats(s, &st, 999, NULL, 1), -EINVAL);
	assert_int_equal(sprobe_stream__close(s), 0);
	assert_int_equal(ts.n, 1);
	struct sprobe_df_record want = { .type = SPROBE_DF_CAPTURE, .capture = {
		.time_ns = 999, .threads_total = 5, .threads_captured = 3, .threads_dropped = 2,
		.pause_ns = 10, .capture_ns = 20, .dropped_tids = dropped, .ndropped_tids = 2 } };

	want.capture.dropped[SPROBE_DROP_EXITED] = 1;
	want.capture.dropped[SPROBE_DROP_TIMEOUT] = 1;
	assert_payload(&ts.recs[0], &want);
	sprobe_stream__free(s);
	ts_fini(&ts);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_writer_thread_identity_and_signals),
	cmocka_unit_test(test_capture_stats_record),
	cmocka_unit_test(test_all_records_arrive_in_order),
	cmocka_unit_test(test_stalled_sink_drops_and_counts_never_blocks),
	cmocka_unit_test(test_wraparound_with_mixed_sizes),
	cmocka_unit_test(test_ring_gives_consumed_pages_back),
	cmocka_unit_test(test_invalid_and_oversized_records),
	cmocka_unit_test(test_sink_errors_are_counted),
	cmocka_unit_test(test_thread_sample_to_datafile),
};

SPROBE_TEST_MAIN(tests)
