/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table: the stacktrack seed's four tests ported, the writer API, the
 * file security rules, and a reader fed hostile files. The byte offsets used
 * to forge files are the ones docs/TABLE.md documents, so these tests also
 * pin the documented format.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/table.h>

#include "sprobe_test.h"

/* The default table directory (table/table_posix.c): macOS has no /dev/shm.
 * NOT_A_FILE: a directory that is not a symlink (/tmp is one on macOS). */
#ifdef __APPLE__
#define TABLE_DIR "/tmp"
#define NOT_A_FILE "/private/tmp"
#else
#define TABLE_DIR "/dev/shm"
#define NOT_A_FILE "/dev/shm"
#endif

/* docs/TABLE.md, format version 1. */
#define HDR_SIZE 256u
#define NODE_SIZE 2112u
#define H_MAGIC 0
#define H_VERSION 8
#define H_HEADER_SIZE 12
#define H_NODE_SIZE 16
#define H_CAPACITY 20
#define H_MAX_FRAMES 24
#define H_WRITER_PID 28
#define H_GENERATION 48
#define H_HEAD 56
#define H_WATERMARK 60
#define H_FREE_HEAD 64
#define H_LIVE 68
#define N_SEQ 0
#define N_NEXT 8
#define N_FREE_NEXT 16
#define N_STATE 20
#define N_TID 24
#define N_NFRAMES 28
#define N_FRAMES 64
#define NODE_OFF(i) (HDR_SIZE + ((size_t)(i) - 1) * NODE_SIZE)

static char *tmp_path(char *buf, size_t len, const char *tag)
{
	static unsigned counter;

	snprintf(buf, len, TABLE_DIR "/sprobe-test-%d-%u-%s.table", (int)getpid(),
		 counter++, tag);
	unlink(buf);
	return buf;
}

static struct sprobe_table *new_writer(uint32_t capacity, char *path,
				       size_t len)
{
	struct sprobe_table *w;

	tmp_path(path, len, "w");
	w = sprobe_table__create(path, capacity);
	assert_non_null(w);
	return w;
}

static struct sprobe_table *open_reader(const char *path)
{
	char err[256];
	struct sprobe_table_open_opts o = {
		.sz = sizeof(o), .errbuf = err, .errbuf_len = sizeof(err)
	};
	struct sprobe_table *r = sprobe_table__open_path(path, &o);

	if (!r)
		fail_msg("open_path(%s): %s (%s)", path, strerror(errno), err);
	return r;
}

static int insert_simple(struct sprobe_table *w, pid_t tid, uint64_t pc,
			 uint64_t fp)
{
	struct sprobe_table_frame f = { .pc = pc, .fp = fp };
	struct sprobe_table_record rec = {
		.tid = tid, .nframes = 1, .frames = &f, .capture_ns = 1,
	};
	return sprobe_table__insert(w, &rec);
}

/* Iterate r fully; store tids (in order) into tids[] (cap max); return the
 * count, failing the test on an iteration error. */
static int read_all(struct sprobe_table *r, pid_t *tids, int max)
{
	static struct sprobe_table_node n;
	int count = 0, ret;

	assert_int_equal(sprobe_table__iter_begin(r), 0);
	while ((ret = sprobe_table__iter_next(r, &n)) == 1) {
		if (count < max)
			tids[count] = n.tid;
		count++;
	}
	assert_int_equal(ret, 0);
	return count;
}

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
	assert_int_equal(info.file_size, HDR_SIZE + 16 * NODE_SIZE);
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

/* ---- security -------------------------------------------------------- */

static void test_existing_file_refused(void **state)
{
	char path[128], buf[8] = { 0 };
	int fd;

	tmp_path(path, sizeof(path), "exist");
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious", 8), 8);
	close(fd);

	errno = 0;
	assert_null(sprobe_table__create(path, 4));
	assert_int_equal(errno, EEXIST);
	/* Untouched, and not removed by the failed create. */
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, 8), 8);
	close(fd);
	assert_memory_equal(buf, "precious", 8);
	unlink(path);
}

static void test_symlink_refused(void **state)
{
	char link[128], target[128];
	struct stat st;
	int fd;

	/* Dangling symlink: create must not create the target. */
	tmp_path(link, sizeof(link), "link");
	tmp_path(target, sizeof(target), "target");
	assert_int_equal(symlink(target, link), 0);
	errno = 0;
	assert_null(sprobe_table__create(link, 4));
	assert_true(errno == EEXIST || errno == ELOOP);
	assert_int_equal(lstat(target, &st), -1);

	/* Symlink to an existing file: refused, target untouched. */
	fd = open(target, O_CREAT | O_EXCL | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	errno = 0;
	assert_null(sprobe_table__create(link, 4));
	assert_true(errno == EEXIST || errno == ELOOP);
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_size, 0);

	/* The reader does not follow symlinks either. */
	unlink(target);
	{
		char wpath[128];
		struct sprobe_table *w = new_writer(4, wpath, sizeof(wpath));

		unlink(link);
		assert_int_equal(symlink(wpath, link), 0);
		errno = 0;
		assert_null(sprobe_table__open_path(link, NULL));
		assert_int_equal(errno, ELOOP);
		sprobe_table__close(w);
	}
	unlink(link);
}

static void test_other_users_table_refused(void **state)
{
	char path[128];
	struct sprobe_table *w;
	pid_t pid;
	int status;

	if (geteuid() != 0)
		SPROBE_SKIP("needs root to act as two users");
	w = new_writer(4, path, sizeof(path));
	/* Let uid 65534 open() the file so the refusal tested is ours, not
	 * the kernel's permission check. */
	assert_int_equal(chmod(path, 0644), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char err[256] = "";
		struct sprobe_table_open_opts o = {
			.sz = sizeof(o), .errbuf = err, .errbuf_len = sizeof(err)
		};
		struct sprobe_table *r;

		if (setgid(65534) || setuid(65534))
			_exit(10);
		r = sprobe_table__open_path(path, &o);
		if (r)
			_exit(11);
		if (errno != EACCES)
			_exit(12);
		if (!strstr(err, "belongs to uid 0"))
			_exit(13);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	sprobe_table__close(w);
}

/* ---- hostile files --------------------------------------------------- */

/* A valid table file's bytes: `live` live nodes (tids 1001..), then
 * `freed` of the oldest removed. Returned buffer is malloc'd (8-aligned). */
static uint8_t *table_bytes(uint32_t capacity, int live, int freed,
			    size_t *len)
{
	char path[128];
	struct sprobe_table *w = new_writer(capacity, path, sizeof(path));
	uint8_t *buf;
	struct stat st;
	int fd;

	for (int i = 0; i < live; i++)
		assert_int_equal(insert_simple(w, 1001 + i, 0x10 + i, 0x20 + i),
				 i + 1);
	for (int i = 0; i < freed; i++)
		assert_int_equal(sprobe_table__remove(w, i + 1), 0);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	buf = malloc(*len + 16);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, *len), (ssize_t)*len);
	close(fd);
	sprobe_table__close(w);
	return buf;
}

static void put32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

static char *write_file(const uint8_t *b, size_t len, char *path, size_t plen)
{
	int fd;

	tmp_path(path, plen, "hostile");
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, len), (ssize_t)len);
	close(fd);
	return path;
}

/* Open b both as a file and from memory; both must fail with want_errno
 * and a reason that contains `why`. */
static void expect_open_error(const uint8_t *b, size_t len, int want_errno,
			      const char *why)
{
	char path[128], err[256];
	struct sprobe_table_open_opts o = {
		.sz = sizeof(o), .errbuf = err, .errbuf_len = sizeof(err)
	};

	write_file(b, len, path, sizeof(path));
	err[0] = '\0';
	errno = 0;
	assert_null(sprobe_table__open_path(path, &o));
	assert_int_equal(errno, want_errno);
	if (!strstr(err, why))
		fail_msg("file error '%s' does not mention '%s'", err, why);
	unlink(path);
	if (len) {
		err[0] = '\0';
		errno = 0;
		assert_null(sprobe_table__open_mem(b, len, &o));
		assert_int_equal(errno, want_errno);
		if (!strstr(err, why))
			fail_msg("mem error '%s' does not mention '%s'", err, why);
	}
}

static void test_hostile_truncated(void **state)
{
	size_t len;
	uint8_t *b = table_bytes(8, 2, 0, &len);
	size_t cuts[] = { 0, 4, 23, 100, HDR_SIZE - 1, HDR_SIZE,
			  HDR_SIZE + NODE_SIZE, len - 1 };

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		expect_open_error(b, cuts[i], EBADMSG,
				  cuts[i] == 0 ? "empty" : "truncated");
	/* One byte too many is a mismatch too. */
	b[len] = 0;
	expect_open_error(b, len + 1, EBADMSG, "does not match");
	free(b);
}

static void test_hostile_header_fields(void **state)
{
	size_t len;
	uint8_t *b = table_bytes(8, 2, 0, &len);
	uint8_t *c = malloc(len);

	assert_non_null(c);
#define FORGE(stmt, err, why)                                  \
	do {                                                   \
		memcpy(c, b, len);                             \
		stmt;                                          \
		expect_open_error(c, len, err, why);           \
	} while (0)
	FORGE(put64(c, H_MAGIC, 0x4141414141414141ull), EBADMSG, "bad magic");
	FORGE(put64(c, H_MAGIC, 0), EAGAIN, "being created");
	FORGE(put32(c, H_VERSION, 2), EPROTONOSUPPORT, "version 2");
	FORGE(put32(c, H_VERSION, 0), EPROTONOSUPPORT, "version 0");
	FORGE(put32(c, H_NODE_SIZE, NODE_SIZE - 16), EBADMSG, "node_size");
	FORGE(put32(c, H_HEADER_SIZE, 128), EBADMSG, "header_size");
	FORGE(put32(c, H_MAX_FRAMES, 256), EBADMSG, "max_frames");
	FORGE(put32(c, H_CAPACITY, 9), EBADMSG, "does not match");
	FORGE(put32(c, H_CAPACITY, 7), EBADMSG, "does not match");
	FORGE(put32(c, H_CAPACITY, 0), EBADMSG, "capacity");
	FORGE(put32(c, H_CAPACITY, 0xffffffffu), EBADMSG, "capacity");
	FORGE(put32(c, H_WRITER_PID, 0), EBADMSG, "pid");
	FORGE(put32(c, H_WRITER_PID, 0x80000000u), EBADMSG, "pid");
#undef FORGE
	/* Sanity: the unforged copy opens. */
	{
		struct sprobe_table *r = sprobe_table__open_mem(b, len, NULL);

		assert_non_null(r);
		sprobe_table__close(r);
	}
	free(c);
	free(b);
}

/* Iterate a forged table from memory: return what iter_next ended with,
 * the number of nodes returned, and the stats. */
static int iterate_mem(const uint8_t *b, size_t len, int *count,
		       struct sprobe_table_iter_stats *st)
{
	static struct sprobe_table_node n;
	struct sprobe_table *r = sprobe_table__open_mem(b, len, NULL);
	int ret;

	assert_non_null(r);
	*count = 0;
	assert_int_equal(sprobe_table__iter_begin(r), 0);
	while ((ret = sprobe_table__iter_next(r, &n)) == 1) {
		assert_true(n.nframes <= SPROBE_TABLE_MAX_FRAMES);
		assert_true(n.index >= 1 && n.index <= 8);
		(*count)++;
		assert_true(*count <= 2 * 8); /* never unbounded */
	}
	/* After the end, stays ended. */
	assert_int_equal(sprobe_table__iter_next(r, &n), ret < 0 ? 0 : ret);
	assert_int_equal(sprobe_table__iter_stats(r, st), 0);
	sprobe_table__close(r);
	return ret;
}

static int check_mem(const uint8_t *b, size_t len, char *err, size_t elen)
{
	struct sprobe_table *r = sprobe_table__open_mem(b, len, NULL);
	int ret;

	assert_non_null(r);
	ret = sprobe_table__check(r, err, elen);
	sprobe_table__close(r);
	return ret;
}

static void test_hostile_indices_out_of_range(void **state)
{
	struct sprobe_table_iter_stats st;
	char err[256];
	size_t len;
	uint8_t *b = table_bytes(8, 3, 0, &len); /* list 3 -> 2 -> 1 */
	uint8_t *c = malloc(len);
	int count;

	assert_non_null(c);
	memcpy(c, b, len);
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 3);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), 0);

	/* head beyond capacity */
	put32(c, H_HEAD, 9);
	assert_int_equal(iterate_mem(c, len, &count, &st), -EBADMSG);
	assert_int_equal(count, 0);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	put32(c, H_HEAD, 0xffffffffu);
	assert_int_equal(iterate_mem(c, len, &count, &st), -EBADMSG);

	/* a next link beyond capacity, mid-list */
	memcpy(c, b, len);
	put32(c, NODE_OFF(2) + N_NEXT, 0x7fffffffu);
	assert_int_equal(iterate_mem(c, len, &count, &st), -EBADMSG);
	assert_int_equal(count, 2);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "out of range"));

	/* watermark out of range: check() refuses it */
	memcpy(c, b, len);
	put32(c, H_WATERMARK, 100);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "watermark"));
	/* a free-list index out of range */
	memcpy(c, b, len);
	put32(c, H_FREE_HEAD, 8);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	free(c);
	free(b);
}

static void test_hostile_list_cycle(void **state)
{
	struct sprobe_table_iter_stats st;
	char err[256];
	size_t len;
	uint8_t *b = table_bytes(8, 3, 0, &len); /* list 3 -> 2 -> 1 */
	int count;

	put32(b, NODE_OFF(1) + N_NEXT, 3);	/* 3 -> 2 -> 1 -> 3 ... */
	assert_int_equal(iterate_mem(b, len, &count, &st), -ELOOP);
	assert_int_equal(count, 3);		/* each node once */
	assert_int_equal(check_mem(b, len, err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, "cycle"));

	put32(b, NODE_OFF(3) + N_NEXT, 3);	/* self loop at head */
	assert_int_equal(iterate_mem(b, len, &count, &st), -ELOOP);
	assert_int_equal(count, 1);

	/* A writer that looks stuck mid-change (odd generation) and a cycle:
	 * no error can be proven, but the iteration ends, each node once. */
	put64(b, H_GENERATION, 7);
	put32(b, NODE_OFF(3) + N_NEXT, 2);
	assert_int_equal(iterate_mem(b, len, &count, &st), 0);
	assert_int_equal(count, 3);
	assert_true(st.list_changed);
	assert_true(st.visited <= 2 * 8);
	free(b);
}

static void test_hostile_free_list_cycle(void **state)
{
	struct sprobe_table_iter_stats st;
	char err[256];
	size_t len;
	/* 5 inserted, 1..3 removed: live 5 -> 4, free 3 -> 2 -> 1. */
	uint8_t *b = table_bytes(8, 5, 3, &len);
	int count;

	assert_int_equal(check_mem(b, len, err, sizeof(err)), 0);
	put32(b, NODE_OFF(1) + N_FREE_NEXT, 3);	/* 3 -> 2 -> 1 -> 3 */
	assert_int_equal(check_mem(b, len, err, sizeof(err)), -ELOOP);
	/* Readers never walk the free list: iteration is unaffected. */
	assert_int_equal(iterate_mem(b, len, &count, &st), 0);
	assert_int_equal(count, 2);

	/* A node on both lists. */
	put32(b, NODE_OFF(1) + N_FREE_NEXT, 5);
	assert_int_equal(check_mem(b, len, err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, "both lists"));
	/* A leaked node (on no list). */
	put32(b, NODE_OFF(2) + N_FREE_NEXT, 0);
	assert_int_equal(check_mem(b, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "were used"));
	free(b);
}

static void test_hostile_node_contents(void **state)
{
	struct sprobe_table_iter_stats st;
	size_t len;
	uint8_t *b = table_bytes(8, 3, 0, &len);
	uint8_t *c = malloc(len);
	int count;

	assert_non_null(c);
	memcpy(c, b, len);
	put32(c, NODE_OFF(2) + N_NFRAMES, 1000);	/* > 128 frames */
	put32(c, NODE_OFF(3) + N_STATE, 77);		/* unknown state */
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 1);
	assert_int_equal(st.skipped_invalid, 2);

	memcpy(c, b, len);
	put32(c, NODE_OFF(1) + N_TID, 0);		/* tid 0 */
	put64(c, NODE_OFF(2) + N_SEQ, 5);		/* forever mid-write */
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 1);
	assert_int_equal(st.skipped_invalid, 1);
	assert_int_equal(st.skipped_busy, 1);
	assert_true(st.retries >= SPROBE_TABLE_READ_RETRIES - 1);

	/* A free node linked into the list is skipped, never returned. */
	memcpy(c, b, len);
	put32(c, NODE_OFF(2) + N_STATE, 0);
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 2);
	free(c);
	free(b);
}

static void test_open_mem_bad_args(void **state)
{
	size_t len;
	uint8_t *b = table_bytes(8, 1, 0, &len);
	struct sprobe_table_open_opts bad = { .sz = 1 };

	errno = 0;
	assert_null(sprobe_table__open_mem(NULL, len, NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_table__open_mem(b + 1, len - 1, NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_table__open_mem(b, len, &bad));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(sprobe_table__open_path(NOT_A_FILE, NULL));
	assert_int_equal(errno, EINVAL);	/* not a regular file */
	free(b);
}

/* A FIFO at the path would block a plain open(O_RDONLY) forever. */
static void test_fifo_refused_without_blocking(void **state)
{
	char path[128];

	tmp_path(path, sizeof(path), "fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	errno = 0;
	assert_null(sprobe_table__open_path(path, NULL));
	assert_int_equal(errno, EINVAL);
	unlink(path);
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
	assert_true((off_t)at_start * 512 < full / 4);
	for (int i = 0; i < 300; i++)
		assert_true(insert_simple(w, 1000 + i, 0x1000 + (uint64_t)i, 0) > 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_blocks > at_start);
	assert_true((off_t)st.st_blocks * 512 >= full / 2);
	struct sprobe_table *r = open_reader(path);
	assert_int_equal(read_all(r, tids, 400), 300);
	sprobe_table__close(r);
	sprobe_table__close(w);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_storage_reserved_as_used),
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
	cmocka_unit_test(test_existing_file_refused),
	cmocka_unit_test(test_symlink_refused),
	cmocka_unit_test(test_other_users_table_refused),
	cmocka_unit_test(test_hostile_truncated),
	cmocka_unit_test(test_hostile_header_fields),
	cmocka_unit_test(test_hostile_indices_out_of_range),
	cmocka_unit_test(test_hostile_list_cycle),
	cmocka_unit_test(test_hostile_free_list_cycle),
	cmocka_unit_test(test_hostile_node_contents),
	cmocka_unit_test(test_open_mem_bad_args),
	cmocka_unit_test(test_fifo_refused_without_blocking),
};

SPROBE_TEST_MAIN(tests)
