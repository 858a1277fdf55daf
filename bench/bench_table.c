/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table benchmark (make bench; results in docs/PERFORMANCE.md).
 *
 *   writer ops: insert, update, remove in ns/op, timed per batch of 1024
 *               operations (median and p99 over batches), for 32 and 128
 *               frames per node;
 *   full read:  one iteration over a 1024-node table, copying every node
 *               out, from a separate read-only handle (median and p99 over
 *               iterations), with and without a writer PROCESS churning
 *               (updates + remove/insert pairs) on the same table.
 *
 *   build/bench/bench_table [batches] [reads]
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/table.h>

#define CAP 1024

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of this thread: excludes time spent preempted, which on a
 * shared VM dominates wall-clock tails. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, size_t n, double div,
		   const char *unit)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("  %-40s median %9.1f %s   p99 %9.1f %s   (n=%zu)\n", what,
	       (double)v[n / 2] / div, unit,
	       (double)v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / div,
	       unit, n);
}

static void die(const char *what)
{
	fprintf(stderr, "bench_table: %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sprobe_table_frame frames[SPROBE_TABLE_MAX_FRAMES];

static void writer_ops(uint32_t nframes, size_t batches)
{
	uint64_t *ins = calloc(batches, 8), *upd = calloc(batches, 8),
		 *rem = calloc(batches, 8), *cins = calloc(batches, 8),
		 *cupd = calloc(batches, 8), *crem = calloc(batches, 8), c0;
	struct sprobe_table_record rec = {
		.tid = 1, .nframes = nframes, .frames = frames,
		.stack_bytes = 8192,
	};
	struct sprobe_table *t;
	char path[128];
	uint32_t idx[CAP];
	uint64_t t0, rng = 88172645463325252ull;

	snprintf(path, sizeof(path), "/dev/shm/sprobe-bench-%d.table",
		 (int)getpid());
	unlink(path);
	t = sprobe_table__create(path, CAP);
	if (!t || !ins || !upd || !rem || !cins || !cupd || !crem)
		die("create");
	for (size_t b = 0; b < batches; b++) {
		c0 = cpu_ns();
		t0 = now_ns();
		for (uint32_t i = 0; i < CAP; i++) {
			rec.tid = (pid_t)(i + 1);
			rec.capture_ns = t0 + i;
			idx[i] = (uint32_t)sprobe_table__insert(t, &rec);
		}
		ins[b] = now_ns() - t0;
		cins[b] = cpu_ns() - c0;
		c0 = cpu_ns();
		t0 = now_ns();
		for (uint32_t i = 0; i < CAP; i++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			rec.capture_ns = rng;
			sprobe_table__update(t, idx[rng % CAP], &rec);
		}
		upd[b] = now_ns() - t0;
		cupd[b] = cpu_ns() - c0;
		c0 = cpu_ns();
		t0 = now_ns();
		/* Remove in a scattered order: links in the middle of the list. */
		for (uint32_t i = 0; i < CAP; i++)
			sprobe_table__remove(t, idx[(i * 389) % CAP]);
		rem[b] = now_ns() - t0;
		crem[b] = cpu_ns() - c0;
	}
	printf("writer, %u frames per node, batches of %d ops:\n", nframes, CAP);
	report("insert (wall)", ins, batches, CAP, "ns/op");
	report("insert (thread cpu)", cins, batches, CAP, "ns/op");
	report("update (wall)", upd, batches, CAP, "ns/op");
	report("update (thread cpu)", cupd, batches, CAP, "ns/op");
	report("remove (wall)", rem, batches, CAP, "ns/op");
	report("remove (thread cpu)", crem, batches, CAP, "ns/op");
	sprobe_table__close(t);
	free(ins);
	free(upd);
	free(rem);
	free(cins);
	free(cupd);
	free(crem);
}

struct ctl {
	_Atomic int stop;	/* release by the parent; acquire in churn() */
	_Atomic uint64_t ops;	/* relaxed: a count reported at the end */
};

/* Writer process: keep the table full-ish and churn it until told to stop. */
static void churn(struct sprobe_table *t, uint32_t *idx, uint32_t nframes,
		  struct ctl *ctl, int ready_w)
{
	struct sprobe_table_record rec = {
		.tid = 1, .nframes = nframes, .frames = frames,
	};
	uint64_t rng = 0x9e3779b97f4a7c15ull, ops = 0;
	char byte = 1;

	if (write(ready_w, &byte, 1) != 1)
		_exit(2);
	/* Acquire; pairs with the release store in read_bench(). */
	while (!atomic_load_explicit(&ctl->stop, memory_order_acquire)) {
		for (int k = 0; k < 256; k++, ops++) {
			uint32_t s;

			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			s = (uint32_t)(rng % CAP);
			rec.capture_ns = ops;
			rec.tid = (pid_t)(s + 1);
			if (rng >> 62) {	/* 3/4 updates */
				sprobe_table__update(t, idx[s], &rec);
			} else {		/* 1/4 remove + insert */
				sprobe_table__remove(t, idx[s]);
				idx[s] = (uint32_t)sprobe_table__insert(t, &rec);
				ops++;
			}
		}
	}
	atomic_store_explicit(&ctl->ops, ops, memory_order_relaxed);
	_exit(0);
}

static void read_bench(uint32_t nframes, size_t reads, bool with_writer)
{
	static struct sprobe_table_node n;
	struct sprobe_table_record rec = {
		.tid = 1, .nframes = nframes, .frames = frames,
	};
	struct sprobe_table_iter_stats st;
	uint64_t *v = calloc(reads, 8), *cv = calloc(reads, 8), t0, c0;
	uint64_t busy = 0, changed = 0, got = 0;
	struct sprobe_table *w, *r;
	struct ctl *ctl;
	uint32_t idx[CAP];
	char path[128], what[96], byte;
	int pfd[2], status;
	pid_t pid = -1;

	snprintf(path, sizeof(path), "/dev/shm/sprobe-bench-%d.table",
		 (int)getpid());
	unlink(path);
	w = sprobe_table__create(path, CAP);
	if (!w || !v || !cv)
		die("create");
	for (uint32_t i = 0; i < CAP; i++) {
		rec.tid = (pid_t)(i + 1);
		idx[i] = (uint32_t)sprobe_table__insert(w, &rec);
	}
	r = sprobe_table__open_path(path, NULL);
	if (!r)
		die("open");
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED || pipe(pfd))
		die("mmap/pipe");
	atomic_init(&ctl->stop, 0);
	atomic_init(&ctl->ops, 0);
	if (with_writer) {
		/* The child inherits the writer handle: it becomes the one
		 * writer; the parent stops writing from here on. */
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(pfd[0]);
			churn(w, idx, nframes, ctl, pfd[1]);
		}
		close(pfd[1]);
		if (read(pfd[0], &byte, 1) != 1)
			die("writer start");
	}
	t0 = now_ns();
	for (size_t i = 0; i < reads; i++) {
		uint64_t s = now_ns();

		c0 = cpu_ns();
		sprobe_table__iter_begin(r);
		while (sprobe_table__iter_next(r, &n) == 1)
			;
		v[i] = now_ns() - s;
		cv[i] = cpu_ns() - c0;
		sprobe_table__iter_stats(r, &st);
		busy += st.skipped_busy;
		changed += st.list_changed;
		got += st.returned;
	}
	t0 = now_ns() - t0;
	if (with_writer) {
		/* Release; pairs with the acquire load in churn(). */
		atomic_store_explicit(&ctl->stop, 1, memory_order_release);
		waitpid(pid, &status, 0);
	}
	snprintf(what, sizeof(what), "full read, %u frames, %s (wall)", nframes,
		 with_writer ? "writer" : "no writer");
	report(what, v, reads, 1000.0, "us");
	snprintf(what, sizeof(what), "full read, %u frames, %s (cpu)", nframes,
		 with_writer ? "writer" : "no writer");
	report(what, cv, reads, 1000.0, "us");
	printf("  %-40s %.1f nodes/read, %llu busy skips, %llu/%zu reads saw "
	       "list changes", "", (double)got / (double)reads,
	       (unsigned long long)busy, (unsigned long long)changed, reads);
	if (with_writer)
		printf(", writer %.1f Mops/s",
		       (double)atomic_load(&ctl->ops) / ((double)t0 / 1e3));
	printf("\n");
	sprobe_table__close(r);
	/* The writer child exited without closing: unlink from here. */
	sprobe_table__close(w);
	munmap(ctl, sizeof(*ctl));
	close(pfd[0]);
	if (!with_writer)
		close(pfd[1]);
	free(v);
	free(cv);
}

int main(int argc, char **argv)
{
	size_t batches = argc > 1 ? strtoul(argv[1], NULL, 10) : 300;
	size_t reads = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;

	if (!batches || !reads) {
		fprintf(stderr, "usage: bench_table [batches] [reads]\n");
		return 2;
	}
	for (uint32_t i = 0; i < SPROBE_TABLE_MAX_FRAMES; i++)
		frames[i] = (struct sprobe_table_frame){ 0x400000 + i * 16,
							 0x7ffd0000 + i * 64 };
	printf("node table: capacity %d\n", CAP);
	writer_ops(32, batches);
	writer_ops(128, batches);
	printf("reader (separate read-only handle, 1024 live nodes):\n");
	read_bench(32, reads, false);
	read_bench(32, reads, true);
	read_bench(128, reads, false);
	read_bench(128, reads, true);
	return 0;
}
