/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table: the stacktrack seed's four tests ported, the writer API, a
 * reader and a writer interleaved step by step, stale tables, storage
 * reserved as used. The file security rules and a reader fed hostile files
 * are in test_table_hostile.c; the fixtures in table_fixture.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/table.h>

#include "sprobe_test.h"
#include "table_fixture.h"

/* ---- the seed's four tests ------------------------------------------- */

#define NUM_ITERATIONS 100
#define NUM_NODES (NUM_ITERATIONS + 10)

static void test_read_empty(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(NUM_NODES, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	struct sprobe_table_iter_stats st;
	pid_t tids[1];

	assert_int_equal(read_all(r, tids, 1), 0);
	assert_int_equal(sprobe_table__iter_stats(r, &st), 0);
	assert_int_equal(st.returned, 0);
	assert_false(st.list_changed);
	assert_int_equal(sprobe_table__check(r, NULL, 0), 0);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

static void test_allocation_exhaustion(void **state)
{
	char path[128];
	/* The seed's 10-slot table has 9 usable nodes (slot 0 is the
	 * header); here capacity counts usable nodes directly. */
	struct sprobe_table *w = new_writer(9, path, sizeof(path));

	for (int i = 1; i <= 9; i++)
		assert_int_equal(insert_simple(w, i, 0, 0), i);
	assert_int_equal(insert_simple(w, 10, 0, 0), -ENOSPC);
	assert_int_equal(sprobe_table__remove(w, 9), 0);
	assert_int_equal(insert_simple(w, 11, 0, 0), 9);
	assert_int_equal(insert_simple(w, 12, 0, 0), -ENOSPC);
	sprobe_table__close(w);
}

static void test_lifecycle(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(NUM_NODES, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	static struct sprobe_table_node n;
	pid_t tids[4];

	assert_int_equal(insert_simple(w, 101, 0x123, 0x456), 1);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.tid, 101);
	assert_int_equal(n.index, 1);
	assert_int_equal(n.nframes, 1);
	assert_int_equal(n.frames[0].pc, 0x123);
	assert_int_equal(n.frames[0].fp, 0x456);
	assert_int_equal(sprobe_table__iter_next(r, &n), 0);

	assert_int_equal(insert_simple(w, 102, 0x123, 0x456), 2);
	assert_int_equal(sprobe_table__remove(w, 1), 0);
	assert_int_equal(read_all(r, tids, 4), 1);
	assert_int_equal(tids[0], 102);

	assert_int_equal(sprobe_table__remove(w, 2), 0);
	assert_int_equal(read_all(r, tids, 4), 0);
	assert_int_equal(sprobe_table__check(r, NULL, 0), 0);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

static int cmp_pid(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

static void test_multiple_nodes(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(NUM_NODES, path, sizeof(path));
	struct sprobe_table *r;
	pid_t tids[4];

	assert_int_equal(insert_simple(w, 101, 0, 0), 1);
	assert_int_equal(insert_simple(w, 102, 0, 0), 2);
	r = open_reader(path);
	assert_int_equal(read_all(r, tids, 4), 2);
	qsort(tids, 2, sizeof(pid_t), cmp_pid);
	assert_int_equal(tids[0], 101);
	assert_int_equal(tids[1], 102);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* ---- writer API ------------------------------------------------------ */

static void test_newest_first_and_unlink_middle(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(8, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	pid_t tids[8];

	for (int i = 1; i <= 4; i++)
		assert_int_equal(insert_simple(w, 100 + i, 0, 0), i);
	assert_int_equal(read_all(r, tids, 8), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(tids[i], 104 - i);
	assert_int_equal(sprobe_table__remove(w, 3), 0); /* middle */
	assert_int_equal(sprobe_table__remove(w, 4), 0); /* head */
	assert_int_equal(sprobe_table__remove(w, 1), 0); /* tail */
	assert_int_equal(read_all(r, tids, 8), 1);
	assert_int_equal(tids[0], 102);
	assert_int_equal(sprobe_table__check(r, NULL, 0), 0);
	/* Free list is LIFO: 1 was freed last. */
	assert_int_equal(insert_simple(w, 200, 0, 0), 1);
	assert_int_equal(insert_simple(w, 201, 0, 0), 4);
	assert_int_equal(insert_simple(w, 202, 0, 0), 3);
	assert_int_equal(insert_simple(w, 203, 0, 0), 5);
	assert_int_equal(read_all(r, tids, 8), 5);
	assert_int_equal(tids[0], 203);
	assert_int_equal(tids[4], 102);
	assert_int_equal(sprobe_table__check(r, NULL, 0), 0);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

static void test_update_in_place(void **state)
{
	static struct sprobe_table_frame frames[SPROBE_TABLE_MAX_FRAMES + 5];
	static struct sprobe_table_node n;
	char path[128];
	struct sprobe_table *w = new_writer(4, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	struct sprobe_table_record rec = {
		.tid = 77, .capture_ns = 1000, .stack_bytes = 4096,
		.nframes = 3, .frames = frames,
	};
	int idx;

	for (unsigned i = 0; i < SPROBE_TABLE_MAX_FRAMES + 5; i++)
		frames[i] = (struct sprobe_table_frame){ 0x1000 + i, 0x2000 + i };
	idx = sprobe_table__insert(w, &rec);
	assert_true(idx > 0);

	/* Smaller stack use: the node keeps the high-water mark. Too many
	 * frames: cut to the maximum and flagged. */
	rec.stack_bytes = 1024;
	rec.capture_ns = 2000;
	rec.nframes = SPROBE_TABLE_MAX_FRAMES + 5;
	rec.flags = SPROBE_TABLE_NODE_UNWIND_ERROR;
	assert_int_equal(sprobe_table__update(w, idx, &rec), 0);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.index, idx);
	assert_int_equal(n.capture_ns, 2000);
	assert_int_equal(n.stack_bytes, 4096);
	assert_int_equal(n.nframes, SPROBE_TABLE_MAX_FRAMES);
	assert_int_equal(n.flags, SPROBE_TABLE_NODE_UNWIND_ERROR |
				  SPROBE_TABLE_NODE_TRUNCATED);
	assert_int_equal(n.frames[127].pc, 0x1000 + 127);
	assert_int_equal(n.frames[127].fp, 0x2000 + 127);
	assert_int_equal(n.writes, 2);

	rec.stack_bytes = 8192;
	rec.nframes = 0;
	rec.flags = 0;
	assert_int_equal(sprobe_table__update(w, idx, &rec), 0);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.stack_bytes, 8192);
	assert_int_equal(n.nframes, 0);
	assert_int_equal(n.flags, 0);
	assert_int_equal(n.writes, 3);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

static void test_bad_arguments(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(4, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	struct sprobe_table_record rec = { .tid = 5 };
	struct sprobe_table_record bad_tid = { .tid = 0 };
	struct sprobe_table_record bad_frames = { .tid = 5, .nframes = 2 };
	int idx;

	errno = 0;
	assert_null(sprobe_table__create(tmp_path(path, sizeof(path), "c0"), 0));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_table__create(path, SPROBE_TABLE_MAX_CAPACITY + 1));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(access(path, F_OK), -1);

	assert_int_equal(sprobe_table__insert(w, NULL), -EINVAL);
	assert_int_equal(sprobe_table__insert(w, &bad_tid), -EINVAL);
	assert_int_equal(sprobe_table__insert(w, &bad_frames), -EINVAL);
	assert_int_equal(sprobe_table__update(w, 1, &rec), -EINVAL); /* not live */
	assert_int_equal(sprobe_table__remove(w, 1), -EINVAL);
	assert_int_equal(sprobe_table__remove(w, 0), -EINVAL);
	assert_int_equal(sprobe_table__remove(w, 99), -EINVAL);
	idx = sprobe_table__insert(w, &rec);
	assert_int_equal(idx, 1);
	assert_int_equal(sprobe_table__remove(w, idx), 0);
	assert_int_equal(sprobe_table__remove(w, idx), -EINVAL); /* twice */
	assert_int_equal(sprobe_table__update(w, idx, &rec), -EINVAL);

	/* A reader handle cannot write. */
	assert_int_equal(sprobe_table__insert(r, &rec), -EPERM);
	assert_int_equal(sprobe_table__remove(r, 1), -EPERM);
	assert_int_equal(sprobe_table__update(r, 1, &rec), -EPERM);
	sprobe_table__close(r);
	sprobe_table__close(w);
	sprobe_table__close(NULL);
}

static void test_default_path_open_pid_and_unlink(void **state)
{
	char want[128];
	struct sprobe_table *w, *r;
	struct sprobe_table_info info;
	pid_t tids[2];

	snprintf(want, sizeof(want), TABLE_DIR "/stackprobe-%d.table",
		 (int)getpid());
	unlink(want);
	w = sprobe_table__create(NULL, 16);
	assert_non_null(w);
	assert_string_equal(sprobe_table__path(w), want);
	assert_int_equal(insert_simple(w, 4242, 1, 2), 1);

	r = sprobe_table__open_pid(getpid(), NULL);
	assert_non_null(r);
	assert_int_equal(sprobe_table__info(r, &info), 0);
	assert_int_equal(info.version, SPROBE_TABLE_VERSION);
	assert_int_equal(info.capacity, 16);
	assert_int_equal(info.writer_pid, getpid());
	assert_int_equal(info.live, 1);
	assert_int_equal(info.watermark, 2);
	assert_int_equal(info.file_size, FILE_SIZE(16));
	assert_false(info.writer_closed);
	assert_true(info.created_realtime_ns > 0);

	sprobe_table__close(w);
	/* The writer removed the file; the reader's mapping stays valid. */
	assert_int_equal(access(want, F_OK), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(sprobe_table__info(r, &info), 0);
	assert_true(info.writer_closed);
	assert_int_equal(read_all(r, tids, 2), 1);
	assert_int_equal(tids[0], 4242);
	sprobe_table__close(r);

	errno = 0;
	assert_null(sprobe_table__open_pid(getpid(), NULL));
	assert_int_equal(errno, ENOENT);
	assert_null(sprobe_table__open_pid(0, NULL));
	assert_int_equal(errno, EINVAL);
}

/* ---- reader vs. writer, interleaved step by step ---------------------- */

/* The reader stands on a node (cur = its successor) when the writer removes
 * that successor and reuses it at the head: the walk is led back into
 * visited nodes. Nodes live throughout must each come back exactly once, via
 * the index scan, and the iteration must say the list changed. */
static void test_interleaved_reuse_under_reader(void **state)
{
	static struct sprobe_table_node n;
	struct sprobe_table_iter_stats st;
	char path[128];
	struct sprobe_table *w = new_writer(8, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	int got[9] = { 0 }, ret;

	for (int i = 1; i <= 5; i++)	/* list 5 -> 4 -> 3 -> 2 -> 1 */
		assert_int_equal(insert_simple(w, 100 + i, 0, 0), i);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.index, 5);
	got[n.index]++;
	/* Reader's next stop is 4. Free 4 and reuse it: 4 -> 5 -> 3 ... */
	assert_int_equal(sprobe_table__remove(w, 4), 0);
	assert_int_equal(insert_simple(w, 200, 0, 0), 4);
	/* And free 3 for good. */
	assert_int_equal(sprobe_table__remove(w, 3), 0);
	while ((ret = sprobe_table__iter_next(r, &n)) == 1) {
		got[n.index]++;
		assert_true(n.index != 3);	/* free at read time */
		if (n.index == 4)
			assert_int_equal(n.tid, 200); /* never old + new mixed */
	}
	assert_int_equal(ret, 0);
	for (int i = 1; i <= 8; i++)
		assert_true(got[i] <= 1);
	assert_int_equal(got[1], 1);	/* live throughout */
	assert_int_equal(got[2], 1);	/* live throughout */
	assert_int_equal(got[5], 1);
	assert_int_equal(sprobe_table__iter_stats(r, &st), 0);
	assert_true(st.list_changed);
	assert_true(st.visited <= 2 * 8);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* A node removed while the reader stands on it: it is not returned, and the
 * walk goes on into the list (not into the free list). */
static void test_interleaved_remove_current(void **state)
{
	static struct sprobe_table_node n;
	struct sprobe_table_iter_stats st;
	char path[128];
	struct sprobe_table *w = new_writer(8, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	int got[9] = { 0 }, ret;

	for (int i = 1; i <= 4; i++)	/* list 4 -> 3 -> 2 -> 1 */
		assert_int_equal(insert_simple(w, 100 + i, 0, 0), i);
	assert_int_equal(sprobe_table__remove(w, 4), 0); /* free list: 4 */
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.index, 3);
	/* Reader will next read node 2; remove 2 and 3 first. Both go on the
	 * free list (2 -> 3 -> 4) but the walk must reach 1, never 4. */
	assert_int_equal(sprobe_table__remove(w, 3), 0);
	assert_int_equal(sprobe_table__remove(w, 2), 0);
	while ((ret = sprobe_table__iter_next(r, &n)) == 1)
		got[n.index]++;
	assert_int_equal(ret, 0);
	assert_int_equal(got[1], 1);
	assert_int_equal(got[2] + got[3] + got[4], 0);
	assert_int_equal(sprobe_table__iter_stats(r, &st), 0);
	assert_true(st.list_changed);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* Updates do not change the list: the walk stays exact (no scan), and a
 * node updated before it is read comes back with the new contents. */
static void test_interleaved_update_keeps_list_stable(void **state)
{
	static struct sprobe_table_node n;
	struct sprobe_table_iter_stats st;
	struct sprobe_table_frame f = { 0xabc, 0xdef };
	struct sprobe_table_record rec = {
		.tid = 102, .nframes = 1, .frames = &f, .capture_ns = 99,
	};
	char path[128];
	struct sprobe_table *w = new_writer(8, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);

	assert_int_equal(insert_simple(w, 101, 0, 0), 1);
	assert_int_equal(insert_simple(w, 102, 0, 0), 2);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.index, 2);
	assert_int_equal(sprobe_table__update(w, 2, &rec), 0);
	rec.tid = 101;
	assert_int_equal(sprobe_table__update(w, 1, &rec), 0);
	assert_int_equal(sprobe_table__iter_next(r, &n), 1);
	assert_int_equal(n.index, 1);
	assert_int_equal(n.capture_ns, 99);
	assert_int_equal(n.frames[0].pc, 0xabc);
	assert_int_equal(sprobe_table__iter_next(r, &n), 0);
	assert_int_equal(sprobe_table__iter_stats(r, &st), 0);
	assert_false(st.list_changed);
	assert_int_equal(st.returned, 2);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* A forked child that closes its inherited copy of the writer handle must
 * not unlink the parent's table or mark it closed. */
static void test_close_in_forked_child_keeps_table(void **state)
{
	char path[128];
	struct sprobe_table *w = new_writer(4, path, sizeof(path));
	struct sprobe_table_info info;
	int status;
	pid_t pid;

	assert_int_equal(insert_simple(w, 9, 1, 2), 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sprobe_table__close(w);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(sprobe_table__info(w, &info), 0);
	assert_false(info.writer_closed);
	sprobe_table__close(w);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_stale_tables(void **state)
{
	char path[128];
	struct sprobe_table *w, *r;
	pid_t other = getpid() + 1000000;

	/* A file at another pid's default path, written by us: not that
	 * pid's table. */
	snprintf(path, sizeof(path), TABLE_DIR "/stackprobe-%d.table", (int)other);
	unlink(path);
	w = sprobe_table__create(path, 2);
	assert_non_null(w);
	errno = 0;
	assert_null(sprobe_table__open_pid(other, NULL));
	assert_int_equal(errno, ESTALE);
	sprobe_table__close(w);

	/* The file changed size under a reader: the next iteration refuses. */
	w = new_writer(2, path, sizeof(path));
	r = open_reader(path);
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	assert_int_equal(truncate(path, HDR_SIZE + 3 * NODE_SIZE), 0);
	assert_int_equal(sprobe_table__iter_begin(r), -ESTALE);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* The table's storage is allocated as nodes are first used (32, then
 * doubling), not all at create: a small process pays for a small table,
 * and every node a reader sees was written into allocated storage. */
static void test_storage_reserved_as_used(void **state)
{
	char path[256];
	struct sprobe_table *w = new_writer(400, path, sizeof(path));
	struct stat st;
	pid_t tids[400];

	assert_int_equal(stat(path, &st), 0);
	off_t full = st.st_size;
	blkcnt_t at_start = st.st_blocks;
	assert_int_equal(full, FILE_SIZE(400));
	assert_true((off_t)at_start * 512 < full / 8);
	for (int i = 0; i < 300; i++)
		assert_true(insert_simple(w, 1000 + i, 0x1000 + (uint64_t)i, 0) > 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_blocks > at_start);
	assert_true((off_t)st.st_blocks * 512 >= (off_t)NODE_OFF(301));
	assert_true((off_t)st.st_blocks * 512 < full / 4);
	struct sprobe_table *r = open_reader(path);
	assert_int_equal(read_all(r, tids, 400), 300);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

/* ---- storage sized by depth ------------------------------------------ */

static struct sprobe_table_frame depth_frames[SPROBE_TABLE_MAX_FRAMES];

/* A record of nf frames whose values tell tid, round and position apart. */
static struct sprobe_table_record depth_rec(pid_t tid, uint32_t nf, uint64_t round)
{
	for (uint32_t i = 0; i < nf; i++)
		depth_frames[i] = (struct sprobe_table_frame){
			((uint64_t)tid << 32) | round << 16 | i, ~(uint64_t)i ^ round,
		};
	return (struct sprobe_table_record){
		.tid = tid, .capture_ns = round, .nframes = nf, .frames = depth_frames,
	};
}

/* Read node idx through r: it must hold exactly depth_rec(tid, nf, round). */
static void expect_depth(struct sprobe_table *r, int idx, pid_t tid, uint32_t nf,
			 uint64_t round)
{
	static struct sprobe_table_node n;
	int found = 0, ret;

	assert_int_equal(sprobe_table__iter_begin(r), 0);
	while ((ret = sprobe_table__iter_next(r, &n)) == 1) {
		if (n.index != (uint32_t)idx)
			continue;
		found++;
		assert_int_equal(n.tid, tid);
		assert_int_equal(n.nframes, nf);
		assert_int_equal(n.flags, 0);
		assert_int_equal(n.capture_ns, round);
		for (uint32_t i = 0; i < nf; i++) {
			assert_int_equal(n.frames[i].pc, ((uint64_t)tid << 32) | round << 16 | i);
			assert_int_equal(n.frames[i].fp, ~(uint64_t)i ^ round);
		}
	}
	assert_int_equal(ret, 0);
	assert_int_equal(found, 1);
	assert_int_equal(sprobe_table__check(r, NULL, 0), 0);
}

/* The block node idx names in the file (0: its frames are inline). */
static uint32_t file_block(const char *path, int idx)
{
	uint32_t b = 0;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 4, (off_t)(NODE_OFF(idx) + N_BLOCK)), 4);
	close(fd);
	return b;
}

/* A thread's stack grows past what its node holds in place and shrinks
 * again: every frame is read back each time, under the same index, and a
 * freed block serves the next deep stack. */
static void test_stack_grows_and_shrinks(void **state)
{
	static const uint32_t depths[] = { 8, 120, 12, 13, 128, 1, 0, 120, 8 };
	char path[128];
	struct sprobe_table *w = new_writer(4, path, sizeof(path));
	struct sprobe_table *r = open_reader(path);
	struct sprobe_table_record rec = depth_rec(501, 8, 0);
	int a = sprobe_table__insert(w, &rec), b, c;

	assert_true(a > 0);
	expect_depth(r, a, 501, 8, 0);
	for (uint64_t k = 0; k < sizeof(depths) / sizeof(depths[0]); k++) {
		rec = depth_rec(501, depths[k], k + 1);
		assert_int_equal(sprobe_table__update(w, a, &rec), 0);
		expect_depth(r, a, 501, depths[k], k + 1);
		assert_int_equal(file_block(path, a), depths[k] > INLINE_FRAMES ? 1 : 0);
	}
	/* a is shallow again: its block went back and is the next one taken. */
	rec = depth_rec(502, 100, 50);
	b = sprobe_table__insert(w, &rec);
	assert_true(b > 0);
	expect_depth(r, b, 502, 100, 50);
	expect_depth(r, a, 501, 8, 9);
	assert_int_equal(file_block(path, b), 1);
	rec = depth_rec(501, 64, 51);
	assert_int_equal(sprobe_table__update(w, a, &rec), 0);
	assert_int_equal(file_block(path, a), 2);
	expect_depth(r, a, 501, 64, 51);
	expect_depth(r, b, 502, 100, 50);
	/* Removing a deep node frees its block too. */
	assert_int_equal(sprobe_table__remove(w, b), 0);
	rec = depth_rec(503, 40, 52);
	c = sprobe_table__insert(w, &rec);
	assert_int_equal(c, b);
	assert_int_equal(file_block(path, c), 1);
	expect_depth(r, c, 503, 40, 52);
	expect_depth(r, a, 501, 64, 51);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

#ifdef __linux__
/* Bytes of the file with storage, and bytes of it resident (mincore on a
 * mapping: tmpfs pages are the file's memory). Linux only: Darwin's table
 * file is allocated whole at creation (table_posix.c). */
static void file_cost(const char *path, size_t *allocated, size_t *resident)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char vec[4096];
	struct stat st;
	int fd = open(path, O_RDONLY);
	void *p;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*allocated = (size_t)st.st_blocks * 512;
	size_t pages = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page;
	assert_true(pages <= sizeof(vec));
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(mincore(p, (size_t)st.st_size, (void *)vec), 0);
	*resident = 0;
	for (size_t i = 0; i < pages; i++)
		*resident += (vec[i] & 1) ? (size_t)page : 0;
	munmap(p, (size_t)st.st_size);
	close(fd);
}

/* A thousand idle threads (8 frames) cost a fraction of a full stack's
 * 2 KiB each; a few deep ones add about a block each. */
static void test_idle_nodes_cost_little(void **state)
{
	enum { N = 1000, DEEP = 10 };
	char path[128];
	struct sprobe_table *w = new_writer(1024, path, sizeof(path));
	int idx[N];
	size_t alloc, res;

	for (int i = 0; i < N; i++) {
		struct sprobe_table_record rec = depth_rec(10000 + i, 8, 1);

		idx[i] = sprobe_table__insert(w, &rec);
		assert_true(idx[i] > 0);
	}
	for (uint64_t round = 2; round < 4; round++)
		for (int i = 0; i < N; i++) {
			struct sprobe_table_record rec = depth_rec(10000 + i, 8, round);

			assert_int_equal(sprobe_table__update(w, idx[i], &rec), 0);
		}
	file_cost(path, &alloc, &res);
	print_message("%d idle nodes: %zu bytes allocated (%zu a node), %zu resident\n",
		      N, alloc, alloc / N, res);
	assert_true(alloc <= (size_t)N * 300);
	assert_true(res <= (size_t)N * 300);

	for (int i = 0; i < DEEP; i++) {
		struct sprobe_table_record rec = depth_rec(10000 + i, 120, 4);

		assert_int_equal(sprobe_table__update(w, idx[i], &rec), 0);
	}
	size_t alloc2, res2;
	file_cost(path, &alloc2, &res2);
	print_message("+ %d deep nodes: %zu bytes allocated, %zu resident\n", DEEP, alloc2,
		      res2);
	/* Blocks are reserved by doubling from 4: 16 for 10 deep stacks. */
	assert_true(alloc2 - alloc <= 16 * BLOCK_SIZE);
	assert_true(res2 - res <= 16 * BLOCK_SIZE);
	struct sprobe_table *r = open_reader(path);
	expect_depth(r, idx[0], 10000, 120, 4);
	expect_depth(r, idx[DEEP], 10000 + DEEP, 8, 3);
	sprobe_table__close(r);
	sprobe_table__close(w);
}
#endif

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_storage_reserved_as_used),
	cmocka_unit_test(test_stack_grows_and_shrinks),
#ifdef __linux__
	cmocka_unit_test(test_idle_nodes_cost_little),
#endif
	cmocka_unit_test(test_read_empty),
	cmocka_unit_test(test_allocation_exhaustion),
	cmocka_unit_test(test_lifecycle),
	cmocka_unit_test(test_multiple_nodes),
	cmocka_unit_test(test_newest_first_and_unlink_middle),
	cmocka_unit_test(test_update_in_place),
	cmocka_unit_test(test_bad_arguments),
	cmocka_unit_test(test_default_path_open_pid_and_unlink),
	cmocka_unit_test(test_interleaved_reuse_under_reader),
	cmocka_unit_test(test_interleaved_remove_current),
	cmocka_unit_test(test_interleaved_update_keeps_list_stable),
	cmocka_unit_test(test_close_in_forked_child_keeps_table),
	cmocka_unit_test(test_stale_tables),
};

SPROBE_TEST_MAIN(tests)
