/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table under a live writer: a writer PROCESS inserts, updates and
 * removes at full speed while a reader PROCESS iterates the same file.
 *
 * Every write is self-describing: with c the writer's per-write counter,
 * the node holds capture_ns = c, stack_bytes = 16 c, nframes = 1 + 7c mod 128,
 * and frame i = mix(tid, c, i). A node put together from two writes fails
 * node_consistent(). The depths cross the frames a node holds in place, so
 * nodes keep taking, giving back and reusing each other's frame blocks. Some nodes ("pinned") are inserted first and only ever
 * updated: every iteration must return each of them (the contract's
 * guarantee 3), whatever the churn does to the list around them.
 *
 * Synchronisation: pipes for "table ready", "reader ready" and results; a
 * shared-memory flag (release/acquire) for "writer done". No sleeps. Each
 * child has an alarm() deadline so a hang is a failure, not a stuck test.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/table.h>

#include "sprobe_test.h"

#ifdef __APPLE__
#define TABLE_DIR "/tmp"	/* no /dev/shm on macOS (table/table_posix.c) */
#else
#define TABLE_DIR "/dev/shm"
#endif

#define DEADLINE_S 120
#define PINNED 8
#define CHURN_TID_BASE 1000

struct shared_ctl {
	/* Release by the writer when it has finished all its operations;
	 * pairs with the acquire load in the reader's loop. */
	_Atomic int writer_done;
	/* Relaxed: iterations the reader finished; the writer keeps going
	 * until there are enough of them, so the two really overlap. */
	_Atomic uint64_t reader_iters;
};

#define MIN_READER_ITERS 200

struct writer_result {
	uint64_t ops, inserts, updates, removes, enospc, errors;
};

struct reader_result {
	uint64_t iterations;	   /* full iterations */
	uint64_t iterations_live;  /* ... begun before the writer finished */
	uint64_t nodes;		   /* nodes returned and checked */
	uint64_t torn;		   /* inconsistent nodes returned: must be 0 */
	uint64_t duplicates;	   /* same index twice in one iteration */
	uint64_t pinned_missing;   /* pinned node neither returned nor busy */
	uint64_t busy, retries, list_changed, errors;
	uint64_t max_visited;
	int last_error;
};

static uint64_t mix(uint64_t tid, uint64_t c, uint64_t i)
{
	uint64_t z = (tid << 40) ^ (c << 8) ^ i;

	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t nframes_for(uint64_t c)
{
	return 1 + (uint32_t)((c * 7) % SPROBE_TABLE_MAX_FRAMES);
}

static void make_record(struct sprobe_table_record *rec,
			struct sprobe_table_frame *frames, pid_t tid,
			uint64_t c)
{
	uint32_t nf = nframes_for(c);

	for (uint32_t i = 0; i < nf; i++) {
		frames[i].pc = mix((uint64_t)tid, c, i);
		frames[i].fp = ~mix((uint64_t)tid, c, i + 1000);
	}
	rec->tid = tid;
	rec->flags = (uint32_t)(c & 1) << 2;
	rec->capture_ns = c;
	rec->stack_bytes = c * 16;
	rec->nframes = nf;
	rec->frames = frames;
}

/* True if every field of n comes from the same write. */
static bool node_consistent(const struct sprobe_table_node *n)
{
	uint64_t c = n->capture_ns;

	if (n->tid <= 0 || n->stack_bytes != c * 16 ||
	    n->nframes != nframes_for(c) || n->flags != ((uint32_t)(c & 1) << 2))
		return false;
	for (uint32_t i = 0; i < n->nframes; i++)
		if (n->frames[i].pc != mix((uint64_t)n->tid, c, i) ||
		    n->frames[i].fp != ~mix((uint64_t)n->tid, c, i + 1000))
			return false;
	return true;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

struct scenario {
	uint32_t capacity;
	uint64_t ops;
	bool only_update_one;	/* hammer a single node with updates */
};

/* Writer process body. Creates the table, waits for the reader, churns. */
static int writer_main(const struct scenario *sc, const char *path,
		       struct shared_ctl *ctl, int ready_w, int go_r,
		       int result_w)
{
	static struct sprobe_table_frame frames[SPROBE_TABLE_MAX_FRAMES];
	struct writer_result res = { 0 };
	struct sprobe_table_record rec;
	struct sprobe_table *t;
	uint32_t *live, nlive = 0;
	pid_t *tid_of;
	uint64_t c = 0, rng = 0x243f6a8885a308d3ull;
	char byte = 0;
	int idx;

	alarm(DEADLINE_S);
	t = sprobe_table__create(path, sc->capacity);
	live = calloc(sc->capacity + 1, sizeof(*live));
	tid_of = calloc(sc->capacity + 1, sizeof(*tid_of));
	if (!t || !live || !tid_of)
		return 20;
	/* Pinned nodes: inserted first, only ever updated. */
	for (int i = 0; i < PINNED && !sc->only_update_one; i++) {
		make_record(&rec, frames, i + 1, ++c);
		idx = sprobe_table__insert(t, &rec);
		if (idx <= 0)
			return 21;
		tid_of[idx] = i + 1;
	}
	if (sc->only_update_one) {
		make_record(&rec, frames, 1, ++c);
		idx = sprobe_table__insert(t, &rec);
		if (idx <= 0)
			return 21;
		tid_of[idx] = 1;
		live[nlive++] = (uint32_t)idx;
	}
	if (write_all(ready_w, &byte, 1) || read_all(go_r, &byte, 1))
		return 22;

	while (res.ops < sc->ops ||
	       atomic_load_explicit(&ctl->reader_iters, memory_order_relaxed) <
		       MIN_READER_ITERS) {
		uint64_t r = xorshift(&rng);
		unsigned op = sc->only_update_one ? 0 : (unsigned)(r % 4);

		res.ops++;
		if (op == 0 || op == 1) {	/* update (half of the ops) */
			if (!nlive && !sc->only_update_one)
				op = 2;
			else {
				uint32_t pick = sc->only_update_one ? 0 :
						(uint32_t)((r >> 8) % (nlive + PINNED));
				idx = pick < nlive ? (int)live[pick] :
				      (int)(pick - nlive + 1);
				make_record(&rec, frames, tid_of[idx], ++c);
				if (sprobe_table__update(t, (uint32_t)idx, &rec))
					res.errors++;
				res.updates++;
				continue;
			}
		}
		if (op == 2) {			/* insert */
			pid_t tid = CHURN_TID_BASE + (pid_t)(r >> 40 & 0xffff);

			make_record(&rec, frames, tid, ++c);
			idx = sprobe_table__insert(t, &rec);
			if (idx == -ENOSPC) {
				res.enospc++;
				op = 3;
			} else if (idx <= 0) {
				res.errors++;
				continue;
			} else {
				tid_of[idx] = tid;
				live[nlive++] = (uint32_t)idx;
				res.inserts++;
				continue;
			}
		}
		if (op == 3 && nlive) {		/* remove */
			uint32_t pick = (uint32_t)((r >> 16) % nlive);

			if (sprobe_table__remove(t, live[pick]))
				res.errors++;
			live[pick] = live[--nlive];
			res.removes++;
		}
	}
	/* Release; pairs with the acquire load in reader_main(). */
	atomic_store_explicit(&ctl->writer_done, 1, memory_order_release);
	if (write_all(result_w, &res, sizeof(res)))
		return 23;
	/* Keep the table until the reader has reported (it maps the file, so
	 * closing would be fine; this keeps writer_closed out of the way). */
	read_all(go_r, &byte, 1);
	sprobe_table__close(t);
	free(live);
	free(tid_of);
	return 0;
}

static int reader_main(const struct scenario *sc, const char *path,
		       struct shared_ctl *ctl, int ready_r, int go_w,
		       int result_w)
{
	static struct sprobe_table_node n;
	struct reader_result res = { 0 };
	struct sprobe_table_iter_stats st;
	struct sprobe_table *t;
	uint64_t *seen;
	size_t words = (sc->capacity + 64) / 64;
	char byte = 1;
	bool done = false;
	int ret;

	alarm(DEADLINE_S);
	if (read_all(ready_r, &byte, 1))
		return 30;
	t = sprobe_table__open_path(path, NULL);
	seen = calloc(words, sizeof(*seen));
	if (!t || !seen)
		return 31;
	if (write_all(go_w, &byte, 1))
		return 32;
	while (!done) {
		int pinned_seen = 0;

		/* Acquire; pairs with the release store in writer_main(). One
		 * more full iteration runs after the writer finished. */
		done = atomic_load_explicit(&ctl->writer_done,
					    memory_order_acquire);
		memset(seen, 0, words * sizeof(*seen));
		if (sprobe_table__iter_begin(t))
			return 33;
		while ((ret = sprobe_table__iter_next(t, &n)) == 1) {
			res.nodes++;
			if (!node_consistent(&n))
				res.torn++;
			if (seen[n.index / 64] >> (n.index % 64) & 1)
				res.duplicates++;
			seen[n.index / 64] |= 1ull << (n.index % 64);
			if (n.tid <= PINNED)
				pinned_seen++;
		}
		if (ret < 0) {
			res.errors++;
			res.last_error = ret;
		}
		sprobe_table__iter_stats(t, &st);
		res.iterations++;
		if (!done) {
			res.iterations_live++;
			atomic_fetch_add_explicit(&ctl->reader_iters, 1,
						  memory_order_relaxed);
		}
		res.busy += st.skipped_busy;
		res.retries += st.retries;
		res.list_changed += st.list_changed;
		if (st.visited > res.max_visited)
			res.max_visited = st.visited;
		if (!sc->only_update_one &&
		    pinned_seen + (int)st.skipped_busy < PINNED)
			res.pinned_missing++;
	}
	sprobe_table__close(t);
	free(seen);
	return write_all(result_w, &res, sizeof(res)) ? 34 : 0;
}

static void run_scenario(const struct scenario *sc)
{
	struct shared_ctl *ctl;
	struct writer_result wr;
	struct reader_result rr;
	int ready[2], go[2], wres[2], rres[2], status;
	char path[128];
	pid_t writer, reader;

	snprintf(path, sizeof(path), TABLE_DIR "/sprobe-test-%d-conc.table",
		 (int)getpid());
	unlink(path);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(ctl != MAP_FAILED);
	atomic_init(&ctl->writer_done, 0);
	atomic_init(&ctl->reader_iters, 0);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(wres), 0);
	assert_int_equal(pipe(rres), 0);

	/* Each process closes the pipe ends it does not use, so a process
	 * that dies gives its peers EOF instead of a hang. */
	writer = fork();
	assert_true(writer >= 0);
	if (writer == 0) {
		close(ready[0]);
		close(go[1]);
		close(wres[0]);
		close(rres[0]);
		close(rres[1]);
		_exit(writer_main(sc, path, ctl, ready[1], go[0], wres[1]));
	}
	close(ready[1]);
	close(wres[1]);
	reader = fork();
	assert_true(reader >= 0);
	if (reader == 0) {
		close(go[0]);
		close(wres[0]);
		close(rres[0]);
		_exit(reader_main(sc, path, ctl, ready[0], go[1], rres[1]));
	}
	close(ready[0]);
	close(go[0]);
	close(rres[1]);

	/* Reader results first (it finishes after the writer's last op). */
	if (read_all(rres[0], &rr, sizeof(rr))) {
		waitpid(reader, &status, 0);
		kill(writer, SIGKILL);
		waitpid(writer, NULL, 0);
		fail_msg("reader died without a result: %s %d",
			 WIFSIGNALED(status) ? "signal" : "exit status",
			 WIFSIGNALED(status) ? WTERMSIG(status)
					     : WEXITSTATUS(status));
	}
	assert_int_equal(read_all(wres[0], &wr, sizeof(wr)), 0);
	{
		char byte = 0;

		/* Let the writer close the table. */
		assert_int_equal(write_all(go[1], &byte, 1), 0);
	}
	assert_int_equal(waitpid(reader, &status, 0), reader);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(waitpid(writer, &status, 0), writer);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	print_message("writer: %llu ops (%llu inserts, %llu updates, %llu "
		      "removes, %llu ENOSPC)\n", (unsigned long long)wr.ops,
		      (unsigned long long)wr.inserts,
		      (unsigned long long)wr.updates,
		      (unsigned long long)wr.removes,
		      (unsigned long long)wr.enospc);
	print_message("reader: %llu iterations (%llu during churn), %llu nodes, "
		      "%llu torn, %llu duplicates, %llu busy skips, %llu "
		      "retries, %llu list changes, max %llu visits\n",
		      (unsigned long long)rr.iterations,
		      (unsigned long long)rr.iterations_live,
		      (unsigned long long)rr.nodes,
		      (unsigned long long)rr.torn,
		      (unsigned long long)rr.duplicates,
		      (unsigned long long)rr.busy,
		      (unsigned long long)rr.retries,
		      (unsigned long long)rr.list_changed,
		      (unsigned long long)rr.max_visited);

	assert_true(wr.ops >= 1000000);
	assert_int_equal(wr.errors, 0);
	assert_int_equal(rr.torn, 0);
	assert_int_equal(rr.duplicates, 0);
	assert_int_equal(rr.errors, 0);
	assert_int_equal(rr.pinned_missing, 0);
	assert_true(rr.max_visited <= 2 * (uint64_t)sc->capacity);
	/* The reader really overlapped the writer and really read nodes. */
	assert_true(rr.iterations_live >= MIN_READER_ITERS);
	assert_true(rr.nodes > 0);
	if (sc->only_update_one) {
		/* The one node is returned or, having changed on every
		 * attempt, skipped and counted: never silently lost. */
		assert_int_equal(rr.nodes + rr.busy, rr.iterations);
	} else {
		assert_true(wr.inserts > 0 && wr.removes > 0 && wr.updates > 0);
	}
	close(go[1]);
	close(wres[0]);
	close(rres[0]);
	munmap(ctl, sizeof(*ctl));
	assert_int_equal(access(path, F_OK), -1);	/* writer unlinked it */
}

/* The check itself must be able to fail: a node assembled from two writes
 * is caught. */
static void test_verifier_catches_torn_nodes(void **state)
{
	static struct sprobe_table_frame f1[SPROBE_TABLE_MAX_FRAMES];
	static struct sprobe_table_frame f2[SPROBE_TABLE_MAX_FRAMES];
	static struct sprobe_table_node n;
	struct sprobe_table_record r1, r2;

	make_record(&r1, f1, 55, 1000);
	make_record(&r2, f2, 55, 1001);
	n.tid = 55;
	n.flags = r1.flags;
	n.capture_ns = r1.capture_ns;
	n.stack_bytes = r1.stack_bytes;
	n.nframes = r1.nframes;
	memcpy(n.frames, f1, sizeof(f1));
	assert_true(node_consistent(&n));
	n.frames[r1.nframes - 1] = f2[r1.nframes - 1];	/* torn tail */
	assert_false(node_consistent(&n));
	memcpy(n.frames, f1, sizeof(f1));
	n.stack_bytes = r2.stack_bytes;			/* torn header */
	assert_false(node_consistent(&n));
}

/* Insert/update/remove churn on a small table: nodes are reused all the
 * time, so readers standing on a node see it freed and reinserted. */
static void test_churn_small_table(void **state)
{
	struct scenario sc = { .capacity = 48, .ops = 2000000 };

	run_scenario(&sc);
}

/* The same on a 1024-node table (long iterations, many list changes). */
static void test_churn_1024_nodes(void **state)
{
	struct scenario sc = { .capacity = 1024, .ops = 1000000 };

	run_scenario(&sc);
}

/* Every write hits the same node: the most seqlock collisions. */
static void test_update_one_node(void **state)
{
	struct scenario sc = { .capacity = 4, .ops = 1000000,
			       .only_update_one = true };

	run_scenario(&sc);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_verifier_catches_torn_nodes),
	cmocka_unit_test(test_churn_small_table),
	cmocka_unit_test(test_churn_1024_nodes),
	cmocka_unit_test(test_update_one_node),
};

SPROBE_TEST_MAIN(tests)
