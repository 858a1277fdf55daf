/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table: the file security rules, and a reader fed hostile files. The
 * byte offsets used to forge files are the ones docs/TABLE.md documents, so
 * these tests also pin the documented format.
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
#include "table_fixture.h"

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
	/* A table of another format version is named as such, with which
	 * side is behind (version 1 had every frame inline). */
	FORGE(put32(c, H_VERSION, 1), EPROTONOSUPPORT, "version 1 (this stackprobe reads "
	      "version 2 only: the writer is an older stackprobe)");
	FORGE(put32(c, H_VERSION, 3), EPROTONOSUPPORT, "version 3 (this stackprobe reads "
	      "version 2 only: the writer is a newer stackprobe)");
	FORGE(put32(c, H_VERSION, 0), EPROTONOSUPPORT, "version 0");
	FORGE(put32(c, H_NODE_SIZE, 2112), EBADMSG, "node_size");
	FORGE(put32(c, H_HEADER_SIZE, 128), EBADMSG, "header_size");
	FORGE(put32(c, H_MAX_FRAMES, 256), EBADMSG, "max_frames");
	FORGE(put32(c, H_INLINE_FRAMES, 128), EBADMSG, "inline_frames");
	FORGE(put32(c, H_BLOCK_SIZE, 4096), EBADMSG, "block_size");
	FORGE(put32(c, H_BLOCKS, 9), EBADMSG, "9 blocks");
	FORGE(put64(c, H_BLOCKS_OFFSET, HDR_SIZE), EBADMSG, "blocks at offset 256");
	FORGE(put64(c, H_BLOCKS_OFFSET, ~0ull), EBADMSG, "blocks at offset");
	FORGE(put32(c, H_CAPACITY, 9), EBADMSG, "capacity 9 needs");
	FORGE(put32(c, H_CAPACITY, 7), EBADMSG, "capacity 7 needs");
	FORGE((put32(c, H_CAPACITY, 7), put32(c, H_BLOCKS, 7),
	       put64(c, H_BLOCKS_OFFSET, BLOCKS_OFF(7))), EBADMSG, "does not match");
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

/* A deep node names a block: one out of range is never dereferenced (the
 * node is skipped), and check() refuses a block above the block watermark
 * or named by two nodes. */
static void test_hostile_blocks(void **state)
{
	struct sprobe_table_iter_stats st;
	char err[256];
	size_t len;
	uint8_t *b = table_bytes(8, 3, 0, &len);
	uint8_t *c = malloc(len);
	int count;

	assert_non_null(c);
	memcpy(c, b, len);
	put32(c, NODE_OFF(1) + N_NFRAMES, INLINE_FRAMES + 1);	/* block 0 */
	put32(c, NODE_OFF(2) + N_NFRAMES, 128);
	put32(c, NODE_OFF(2) + N_BLOCK, 9);			/* > capacity */
	put32(c, NODE_OFF(3) + N_NFRAMES, 100);
	put32(c, NODE_OFF(3) + N_BLOCK, 0xffffffffu);
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 0);
	assert_int_equal(st.skipped_invalid, 3);

	/* In range: read (its frames are whatever the block holds) ... */
	memcpy(c, b, len);
	put32(c, NODE_OFF(2) + N_NFRAMES, 128);
	put32(c, NODE_OFF(2) + N_BLOCK, 8);
	assert_int_equal(iterate_mem(c, len, &count, &st), 0);
	assert_int_equal(count, 3);
	/* ... but never taken by the writer, says check() */
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "block watermark"));
	put32(c, H_BLOCK_WATERMARK, 9);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), 0);
	put32(c, NODE_OFF(3) + N_NFRAMES, 20);
	put32(c, NODE_OFF(3) + N_BLOCK, 8);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "another node's"));
	put32(c, H_BLOCK_WATERMARK, 10);
	assert_int_equal(check_mem(c, len, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "block watermark 10 out of range"));
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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_existing_file_refused),
	cmocka_unit_test(test_symlink_refused),
	cmocka_unit_test(test_other_users_table_refused),
	cmocka_unit_test(test_hostile_truncated),
	cmocka_unit_test(test_hostile_header_fields),
	cmocka_unit_test(test_hostile_indices_out_of_range),
	cmocka_unit_test(test_hostile_list_cycle),
	cmocka_unit_test(test_hostile_free_list_cycle),
	cmocka_unit_test(test_hostile_node_contents),
	cmocka_unit_test(test_hostile_blocks),
	cmocka_unit_test(test_open_mem_bad_args),
	cmocka_unit_test(test_fifo_refused_without_blocking),
};

SPROBE_TEST_MAIN(tests)
