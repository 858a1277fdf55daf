/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the node-table tests (test_table.c, test_table_hostile.c): the
 * documented byte offsets of the format (docs/TABLE.md) and writers and
 * readers made on temporary paths.
 */
#ifndef SPROBE_TABLE_FIXTURE_H
#define SPROBE_TABLE_FIXTURE_H

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

/* docs/TABLE.md, format version 2. */
#define HDR_SIZE 256u
#define NODE_SIZE 256u
#define BLOCK_SIZE 2048u
#define INLINE_FRAMES 12u
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
#define H_INLINE_FRAMES 88
#define H_BLOCK_SIZE 92
#define H_BLOCKS_OFFSET 96
#define H_BLOCKS 104
#define H_BLOCK_WATERMARK 108
#define N_SEQ 0
#define N_NEXT 8
#define N_FREE_NEXT 16
#define N_STATE 20
#define N_TID 24
#define N_NFRAMES 28
#define N_BLOCK 36
#define N_FRAMES 64
#define NODE_OFF(i) (HDR_SIZE + ((size_t)(i) - 1) * NODE_SIZE)
/* Blocks start after the nodes, on a multiple of BLOCK_SIZE. */
#define BLOCKS_OFF(cap) ((HDR_SIZE + (size_t)(cap) * NODE_SIZE + BLOCK_SIZE - 1) / \
			 BLOCK_SIZE * BLOCK_SIZE)
#define BLOCK_OFF(cap, b) (BLOCKS_OFF(cap) + ((size_t)(b) - 1) * BLOCK_SIZE)
#define FILE_SIZE(cap) (BLOCKS_OFF(cap) + (size_t)(cap) * BLOCK_SIZE)

static inline char *tmp_path(char *buf, size_t len, const char *tag)
{
	static unsigned counter;

	snprintf(buf, len, TABLE_DIR "/sprobe-test-%d-%u-%s.table", (int)getpid(),
		 counter++, tag);
	unlink(buf);
	return buf;
}

static inline struct sprobe_table *new_writer(uint32_t capacity, char *path,
				       size_t len)
{
	struct sprobe_table *w;

	tmp_path(path, len, "w");
	w = sprobe_table__create(path, capacity);
	assert_non_null(w);
	return w;
}

static inline struct sprobe_table *open_reader(const char *path)
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

static inline int insert_simple(struct sprobe_table *w, pid_t tid, uint64_t pc,
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
static inline int read_all(struct sprobe_table *r, pid_t *tids, int max)
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


#endif
