/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Data path costs (numbers go to docs/PERFORMANCE.md, never into tests):
 *   1. push cost on the probe thread, ns/op: queue accepting (fast sink),
 *      and queue full (stalled sink: the drop path);
 *   2. write throughput: data-file writer alone, and stream -> writer ->
 *      file end to end;
 *   3. report time for 10^5 samples: load, text, folded, json.
 *
 *   make bench   or   build/bench/bench_stream [samples-for-report]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>
#include <stackprobe/stream.h>

#define FRAMES 32

/* CPU time of the calling thread: the machine these run on is shared and
 * often loaded, and what the probe pays is CPU, not wall time. Throughput
 * figures use wall time (wall_ns) and say so. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_stream: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* 64 precomputed stacks, so the timed loops measure the data path and not
 * the making of pcs. */
static uint64_t pool[64][FRAMES];

static void make_pool(void)
{
	for (uint64_t i = 0; i < 64; i++)
		for (int k = 0; k < FRAMES; k++)
			pool[i][k] = 0x400000 + ((i * 7 + (uint64_t)k * 131) % 500) * 0x40;
}

static struct sprobe_df_record sample(uint64_t i, uint64_t *unused)
{
	const uint64_t *pcs = pool[i & 63];

	(void)unused;
	return (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = i, .tid = 1000 + (uint32_t)(i % 8), .method = SPROBE_METHOD_SIGNAL,
		.signal_ns = i, .entry_ns = i + 1000, .exit_ns = i + 1000 + (i % 5000),
		.stack_used = 8192, .pcs = pcs, .nframes = FRAMES } };
}

/* --- sinks ---------------------------------------------------------------- */

static int null_write(void *ctx, uint32_t type, const void *p, uint32_t len)
{
	(void)type;
	(void)p;
	*(uint64_t *)ctx += len;
	return 0;
}

struct stall {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int held, release;
};

static int stall_write(void *ctx, uint32_t type, const void *p, uint32_t len)
{
	struct stall *s = ctx;

	pthread_mutex_lock(&s->mu);
	s->held = 1;
	pthread_cond_broadcast(&s->cv);
	while (!s->release)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static void bench_push(void)
{
	const uint64_t N = 2000000;
	uint64_t pcs[FRAMES], bytes = 0, t0, t1;
	struct sprobe_stream_stats st;
	struct sprobe_stream_sink sink = { .write = null_write, .ctx = &bytes };
	struct sprobe_stream_opts o = { .sz = sizeof(o), .capacity_bytes = 64u << 20 };
	struct sprobe_stream *s = sprobe_stream__new(&sink, &o);

	if (!s)
		die("stream", errno);
	t0 = now_ns();
	for (uint64_t i = 0; i < N; i++) {
		struct sprobe_df_record r = sample(i, pcs);

		sprobe_stream__push(s, &r);
	}
	t1 = now_ns();
	sprobe_stream__close(s);
	sprobe_stream__stats(s, &st);
	printf("push, %d-frame sample, sink keeps up (64 MiB queue): %.1f ns/op CPU "
	       "(%llu pushed, %llu dropped)\n", FRAMES, (double)(t1 - t0) / (double)N,
	       (unsigned long long)st.pushed, (unsigned long long)st.dropped);
	sprobe_stream__free(s);

	/* Drop path: a stalled sink, the queue fills, every push drops. */
	struct stall sl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct sprobe_stream_sink ssink = { .write = stall_write, .ctx = &sl };

	o.capacity_bytes = 1u << 20;
	s = sprobe_stream__new(&ssink, &o);
	if (!s)
		die("stream", errno);
	struct sprobe_df_record r0 = sample(0, pcs);

	sprobe_stream__push(s, &r0);
	pthread_mutex_lock(&sl.mu);
	while (!sl.held)
		pthread_cond_wait(&sl.cv, &sl.mu);
	pthread_mutex_unlock(&sl.mu);
	for (uint64_t i = 0; i < 10000; i++) {	/* fill */
		struct sprobe_df_record r = sample(i, pcs);

		sprobe_stream__push(s, &r);
	}
	t0 = now_ns();
	for (uint64_t i = 0; i < N; i++) {
		struct sprobe_df_record r = sample(i, pcs);

		sprobe_stream__push(s, &r);
	}
	t1 = now_ns();
	sprobe_stream__stats(s, &st);
	printf("push, queue full (sink stalled): %.1f ns/op CPU (%llu dropped and counted)\n",
	       (double)(t1 - t0) / (double)N, (unsigned long long)st.dropped);
	pthread_mutex_lock(&sl.mu);
	sl.release = 1;
	pthread_cond_broadcast(&sl.cv);
	pthread_mutex_unlock(&sl.mu);
	sprobe_stream__free(s);
}

static int tmpfile_fd(char *path)
{
	strcpy(path, "/tmp/sprobe-bench-XXXXXX");
	int fd = mkstemp(path);

	if (fd < 0)
		die("mkstemp", errno);
	return fd;
}

static void bench_write(void)
{
	const uint64_t N = 1000000;
	uint64_t pcs[FRAMES], t0, t1;
	char path[64];
	struct stat sb;
	int fd = tmpfile_fd(path);
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, NULL);
	struct sprobe_df_record hdr = { .type = SPROBE_DF_HEADER };

	if (!w)
		die("writer", errno);
	sprobe_datafile_writer__write(w, &hdr);
	t0 = now_ns();
	for (uint64_t i = 0; i < N; i++) {
		struct sprobe_df_record r = sample(i, pcs);
		int err = sprobe_datafile_writer__write(w, &r);

		if (err)
			die("write", err);
	}
	sprobe_datafile_writer__finish(w, NULL);
	t1 = now_ns();
	fstat(fd, &sb);
	printf("writer alone (CPU time): %.1f ns/record, %.0f MB/s, %.0f records/s (%lld bytes, page cache)\n",
	       (double)(t1 - t0) / (double)N, (double)sb.st_size / ((double)(t1 - t0) / 1e9) / 1e6,
	       (double)N / ((double)(t1 - t0) / 1e9), (long long)sb.st_size);
	sprobe_datafile_writer__free(w);
	close(fd);
	unlink(path);

	/* End to end: probe thread pushes as fast as it can; the writer
	 * thread writes to the file; drops show where it cannot keep up. */
	fd = tmpfile_fd(path);
	w = sprobe_datafile_writer__new(fd, NULL);
	struct sprobe_stream_sink sink = sprobe_stream_sink__datafile(w);
	struct sprobe_stream_opts o = { .sz = sizeof(o), .capacity_bytes = 4u << 20 };
	struct sprobe_stream *s = sprobe_stream__new(&sink, &o);
	struct sprobe_stream_stats st;

	if (!s)
		die("stream", errno);
	sprobe_stream__push(s, &hdr);
	t0 = wall_ns();
	for (uint64_t i = 0; i < N; i++) {
		struct sprobe_df_record r = sample(i, pcs);

		sprobe_stream__push(s, &r);
	}
	sprobe_stream__close(s);
	t1 = wall_ns();
	sprobe_stream__stats(s, &st);
	sprobe_datafile_writer__finish(w, NULL);
	fstat(fd, &sb);
	printf("stream -> writer -> file, unpaced producer (4 MiB queue, wall time): %.0f records/s written, "
	       "%.0f MB/s, %llu of %llu dropped\n",
	       (double)st.written / ((double)(t1 - t0) / 1e9),
	       (double)sb.st_size / ((double)(t1 - t0) / 1e9) / 1e6,
	       (unsigned long long)st.dropped, (unsigned long long)N);
	sprobe_stream__free(s);
	sprobe_datafile_writer__free(w);
	close(fd);
	unlink(path);
}

static void bench_report(uint64_t nsamples)
{
	uint64_t pcs[FRAMES], t0, t1, t2;
	char path[64];
	int fd = tmpfile_fd(path);
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, NULL);
	struct sprobe_df_record hdr = { .type = SPROBE_DF_HEADER,
					.header = { .start_mono_ns = 1, .freq_hz = 99 } };
	static const struct sprobe_df_range rg = { 0x400000, 0x500000, 0 };
	struct sprobe_df_record mod = { .type = SPROBE_DF_MODULE, .module = {
		.path = "/usr/bin/bench", .path_len = 14, .ranges = &rg, .nranges = 1 } };

	sprobe_datafile_writer__write(w, &hdr);
	sprobe_datafile_writer__write(w, &mod);
	for (uint64_t i = 0; i < nsamples; i++) {
		struct sprobe_df_record r = sample(i, pcs);

		sprobe_datafile_writer__write(w, &r);
	}
	for (int k = 0; k < 500; k++) {
		char name[32];
		int n = snprintf(name, sizeof(name), "function_%03d", k);
		struct sprobe_df_record sy = { .type = SPROBE_DF_SYMBOL, .symbol = {
			.pc = 0x400000 + (uint64_t)k * 0x40, .name = name, .name_len = (uint32_t)n } };

		sprobe_datafile_writer__write(w, &sy);
	}
	sprobe_datafile_writer__finish(w, NULL);
	sprobe_datafile_writer__free(w);
	close(fd);

	FILE *null = fopen("/dev/null", "w");
	static const char *const names[] = { "text", "folded", "json" };

	for (int f = 0; f < 3; f++) {
		struct sprobe_report *r = sprobe_report__new(NULL);

		t0 = now_ns();
		int err = sprobe_report__load_file(r, path);

		if (err)
			die("load", err);
		t1 = now_ns();
		err = sprobe_report__write(r, null, (enum sprobe_report_format)f);
		if (err)
			die("report", err);
		t2 = now_ns();
		printf("report of %llu samples x %d frames (CPU time): load %.1f ms, %s %.1f ms, total %.1f ms\n",
		       (unsigned long long)nsamples, FRAMES, (double)(t1 - t0) / 1e6, names[f],
		       (double)(t2 - t1) / 1e6, (double)(t2 - t0) / 1e6);
		sprobe_report__free(r);
	}
	fclose(null);
	unlink(path);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;

	make_pool();
	bench_push();
	bench_write();
	bench_report(n ? n : 100000);
	return 0;
}
