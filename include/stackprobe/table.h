/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe node table: the latest stack of every thread of a process,
 * published in a shared-memory file that another process reads live.
 *
 * Design (after the stacktrack threads table): a header followed by
 * `capacity` fixed-size nodes, then `capacity` frame blocks. Live nodes form
 * a singly linked list from header.head (newest first); freed nodes go on a
 * LIFO free list; nodes never used lie above a watermark. Index 0 is NIL.
 * A node holds a shallow stack (up to 12 frames, an idle thread's) in
 * place; a deeper one goes whole into a block the node names, taken when
 * the stack outgrows the node and given back when it shrinks or the node
 * is removed. A node's index never changes. Storage is allocated as nodes
 * and blocks are first used. The byte layout is in docs/TABLE.md.
 *
 * CONCURRENCY CONTRACT
 *
 * - One writer. Exactly one thread of the process that created the table
 *   calls the writer functions (insert, update, remove, close): in stackprobe
 *   that is the sampler's probe thread. The writer takes no lock; two
 *   writer threads would corrupt the table. The writer never reads the
 *   shared mapping back: all of its decisions use private copies, so another
 *   process scribbling on the file cannot make the writer crash.
 * - Any number of readers, in any processes, each with its own read-only
 *   mapping, iterate the live table while the writer keeps writing. There is
 *   no snapshot: the reader copies each node out under the node's sequence
 *   counter (seqlock) and retries a bounded number of times. It guarantees:
 *     1. a returned node is never torn: all of its fields come from one
 *        write (insert or update);
 *     2. a node is returned at most once per iteration;
 *     3. a node that is live for the whole iteration is returned (unless it
 *        changed on every one of SPROBE_TABLE_READ_RETRIES attempts; then it
 *        is skipped and counted in stats.skipped_busy);
 *     4. a node inserted or removed during the iteration may or may not be
 *        returned; a free node is never returned;
 *     5. the iteration ends after at most 2 * capacity node visits, whatever
 *        the file contains: it follows the list while the list is stable and
 *        falls back to a bounded index scan when the writer changed it.
 * - The file is hostile input to the reader. Every header field is checked
 *   at open and only private copies are used afterwards; every index loaded
 *   from the file is range-checked before use; node contents are checked
 *   before they are returned. Corrupt content gives an error or a bounded
 *   iteration, never a crash or a hang. Not covered: the owner shrinking the
 *   file while it is mapped (the reader re-checks the size at each
 *   iteration start, which narrows but cannot close that window: a SIGBUS
 *   remains possible), since only the reader's own user (or root's victim)
 *   can do that.
 *
 * Errors: int functions return 0 (or a node index) on success and -errno on
 * failure. Pointer functions return NULL and set errno.
 *
 * Security: the file is created 0600 with O_CREAT|O_EXCL|O_NOFOLLOW, so an
 * existing file or a symlink at the path is refused (EEXIST or ELOOP). A
 * reader refuses a table owned by another user (EACCES) unless it runs as
 * root. The writer unlinks the file when it closes the table.
 */
#ifndef STACKPROBE_TABLE_H
#define STACKPROBE_TABLE_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Frames per node (same as SPROBE_MAX_FRAMES in capture.h). */
#define SPROBE_TABLE_MAX_FRAMES 128
/* Largest capacity accepted by create and by readers (the file is then
 * ~144 MiB, of which only what is used gets storage). Bounds every
 * allocation a hostile header can cause. */
#define SPROBE_TABLE_MAX_CAPACITY 65536u
/* The NIL node index. Valid indices are 1..capacity. */
#define SPROBE_TABLE_NIL 0u
/* Seqlock attempts per node before a reader skips it as busy. */
#define SPROBE_TABLE_READ_RETRIES 64
/* Format version written by this library and the only one it reads. */
#define SPROBE_TABLE_VERSION 2u

/* Node flags. */
enum sprobe_table_node_flags {
	/* More frames existed than the node holds (or than were passed). */
	SPROBE_TABLE_NODE_TRUNCATED = 1u << 0,
	/* The stack copy was cut at the capture's byte cap. */
	SPROBE_TABLE_NODE_STACK_TRUNCATED = 1u << 1,
	/* The unwinder stopped on an error, not at the outermost frame. */
	SPROBE_TABLE_NODE_UNWIND_ERROR = 1u << 2,
};

struct sprobe_table_frame {
	uint64_t pc;	/* return address (or IP for frame 0) */
	uint64_t fp;	/* frame pointer / CFA, 0 if unknown */
};

/* What the writer stores for one thread (input of insert and update). */
struct sprobe_table_record {
	pid_t tid;
	uint32_t flags;		/* enum sprobe_table_node_flags */
	uint64_t capture_ns;	/* CLOCK_MONOTONIC time of the capture */
	uint64_t stack_bytes;	/* stack bytes in use at this capture */
	uint32_t nframes;	/* > SPROBE_TABLE_MAX_FRAMES: cut, TRUNCATED set */
	const struct sprobe_table_frame *frames; /* nframes entries */
};

/* A consistent copy of one node, as returned by the reader. */
struct sprobe_table_node {
	uint32_t index;		/* node index, 1..capacity */
	pid_t tid;
	uint32_t flags;
	uint32_t nframes;	/* <= SPROBE_TABLE_MAX_FRAMES */
	uint64_t capture_ns;	/* CLOCK_MONOTONIC ns */
	uint64_t stack_bytes;	/* high-water mark of the thread's stack use */
	uint64_t writes;	/* writes to this node slot since creation */
	struct sprobe_table_frame frames[SPROBE_TABLE_MAX_FRAMES];
};

/* Header fields, as seen by a reader (validated) or the writer. */
struct sprobe_table_info {
	uint32_t version;
	uint32_t capacity;
	uint32_t header_size, node_size;
	pid_t writer_pid;
	bool writer_closed;		/* the writer closed the table */
	uint64_t created_realtime_ns;	/* CLOCK_REALTIME at creation */
	uint64_t created_monotonic_ns;	/* CLOCK_MONOTONIC at creation */
	uint64_t generation;		/* list changes * 2 (odd: changing) */
	uint32_t watermark;		/* indices >= watermark never used */
	uint32_t live;			/* live nodes (advisory for readers) */
	uint64_t updates;		/* update calls (advisory) */
	size_t file_size;
};

/* What one iteration did. */
struct sprobe_table_iter_stats {
	uint32_t returned;	  /* nodes copied out */
	uint32_t visited;	  /* node slots examined */
	uint32_t retries;	  /* seqlock retries in total */
	uint32_t skipped_busy;	  /* changed on every attempt: skipped */
	uint32_t skipped_invalid; /* impossible contents: skipped */
	bool list_changed;	  /* writer changed the list: index scan used */
};

struct sprobe_table_open_opts {
	size_t sz;		/* sizeof(struct sprobe_table_open_opts) */
	char *errbuf;		/* optional: one-line reason on failure */
	size_t errbuf_len;
};

struct sprobe_table;

/* ---- writer ---------------------------------------------------------- */

/*
 * Create a table for `capacity` nodes (1..SPROBE_TABLE_MAX_CAPACITY) in a
 * new file at `path`, or at /dev/shm/stackprobe-<pid>.table when path is
 * NULL (/tmp/stackprobe-<pid>.table on macOS, which has no /dev/shm).
 * The file is created 0600 with O_CREAT|O_EXCL|O_NOFOLLOW and its space
 * is reserved up front (a full /dev/shm fails here with ENOSPC, never
 * later with SIGBUS).
 * Returns the writer handle (owned by the caller, release it with
 * sprobe_table__close) or NULL with errno: EINVAL (capacity), EEXIST (a
 * file or symlink is already at the path), ELOOP, ENOSPC, ENOMEM, ...
 * Not async-signal-safe (allocates, makes syscalls). Thread-safe w.r.t.
 * other tables.
 */
SPROBE_API
struct sprobe_table *sprobe_table__create(const char *path, uint32_t capacity);

/*
 * Insert a node for rec->tid at the head of the list, taking a node from the
 * free list (most recently freed first) or else the watermark.
 * Returns the node index (> 0), or -ENOSPC when every node is in use,
 * -EINVAL for a bad record (NULL, tid <= 0, frames NULL with nframes > 0),
 * -EPERM on a read-only table.
 * Writer thread only. ASYNC-SIGNAL-SAFE: no malloc or locks; a system call
 * (posix_fallocate) only when the insert reaches storage not yet reserved,
 * a handful of times in a table's life.
 */
SPROBE_API
int sprobe_table__insert(struct sprobe_table *t,
			 const struct sprobe_table_record *rec);

/*
 * Overwrite node `index` in place with rec (tid, flags, time, frames). The
 * stored stack_bytes is the maximum over the node's life (high-water mark).
 * The index stays the node's whatever the depth: a stack deeper than the
 * node holds moves its frames to a block, and back when it is shallow
 * again. Should no block be had (a full file system), the node keeps the
 * frames it holds and is flagged SPROBE_TABLE_NODE_TRUNCATED.
 * Returns 0, -EINVAL if index is not a live node or rec is bad, -EPERM on a
 * read-only table.
 * Writer thread only. ASYNC-SIGNAL-SAFE: no malloc or locks; a system call
 * (posix_fallocate) only when a block is first taken from storage not yet
 * reserved, a handful of times in a table's life.
 */
SPROBE_API
int sprobe_table__update(struct sprobe_table *t, uint32_t index,
			 const struct sprobe_table_record *rec);

/*
 * Unlink node `index` from the list and push it on the free list.
 * Returns 0, -EINVAL if index is not a live node, -EPERM on a read-only
 * table.
 * Writer thread only. ASYNC-SIGNAL-SAFE: no malloc, locks or syscalls.
 */
SPROBE_API
int sprobe_table__remove(struct sprobe_table *t, uint32_t index);

/*
 * Close a table. For the writer: mark it closed in the header, unlink the
 * file (only if the path still names the file this table created), unmap.
 * For a reader: unmap. Frees t. Accepts NULL.
 * After fork(), the child's copy of a writer handle is not the writer: the
 * child must not insert, update or remove (it would corrupt the parent's
 * table); closing it there only unmaps and frees (no unlink, no mark).
 * Writer thread only for a writer; not async-signal-safe.
 */
SPROBE_API
void sprobe_table__close(struct sprobe_table *t);

/* The file path, or NULL for a memory view. Owned by t. Thread-safe. */
SPROBE_API
const char *sprobe_table__path(const struct sprobe_table *t);

/* ---- reader ---------------------------------------------------------- */

/*
 * Open the table file at `path` read-only. Refuses symlinks (ELOOP),
 * non-regular files (EINVAL), another user's file unless root (EACCES), a
 * table still being created (EAGAIN), a bad magic or layout (EBADMSG), an
 * unknown version (EPROTONOSUPPORT). opts may be NULL; opts->errbuf gets a
 * one-line reason on failure.
 * Returns a handle owned by the caller (sprobe_table__close) or NULL+errno.
 * Not async-signal-safe. Thread-safe w.r.t. other tables.
 */
SPROBE_API
struct sprobe_table *sprobe_table__open_path(const char *path,
				const struct sprobe_table_open_opts *opts);

/*
 * Open /dev/shm/stackprobe-<pid>.table (macOS: /tmp/...) as open_path
 * does, and also check that its writer_pid is pid (ESTALE otherwise).
 */
SPROBE_API
struct sprobe_table *sprobe_table__open_pid(pid_t pid,
				const struct sprobe_table_open_opts *opts);

/*
 * Read-only view over len bytes at buf (a copy of a table file, or a
 * mapping the caller made). The caller keeps buf alive and unchanged in
 * size until sprobe_table__close. Same validation as open_path.
 */
SPROBE_API
struct sprobe_table *sprobe_table__open_mem(const void *buf, size_t len,
				const struct sprobe_table_open_opts *opts);

/*
 * Fill *info with the header fields. Fixed fields come from the copies
 * validated at open; live fields (generation, watermark, live, updates,
 * writer_closed) are read now and are advisory.
 * Returns 0 or -EINVAL. Thread-safe; async-signal-safe.
 */
SPROBE_API
int sprobe_table__info(const struct sprobe_table *t,
		       struct sprobe_table_info *info);

/*
 * Start an iteration (see the contract above). Re-checks that the file size
 * did not change (-ESTALE). Returns 0 or -errno.
 * One iteration at a time per handle: a handle is not thread-safe; open one
 * handle per reading thread. Works on a writer handle too (from the writer
 * thread). No allocation.
 */
SPROBE_API
int sprobe_table__iter_begin(struct sprobe_table *t);

/*
 * Copy the next node into *out.
 * Returns 1 when a node was copied, 0 at the end, -ELOOP when a stable list
 * has a cycle, -EBADMSG when a stable list holds an index out of range,
 * -EINVAL without iter_begin; the iteration is over after 0 or an error
 * (the nodes returned before an error are good). Never returns a torn
 * node. No allocation, locks or system calls.
 */
SPROBE_API
int sprobe_table__iter_next(struct sprobe_table *t,
			    struct sprobe_table_node *out);

/* Statistics of the current or last iteration. Returns 0 or -EINVAL. */
SPROBE_API
int sprobe_table__iter_stats(const struct sprobe_table *t,
			     struct sprobe_table_iter_stats *stats);

/*
 * Consistency check for a table that is not changing (the writer closed it,
 * or the file is a copy): the live list and the free list are acyclic,
 * in range, disjoint, and with the watermark they cover every used index
 * exactly once; the blocks live nodes name were taken and are distinct.
 * Returns 0, -ELOOP (a cycle), -EBADMSG (anything else wrong),
 * or -EAGAIN if the writer changed the list meanwhile (retry). errbuf (may
 * be NULL) gets a one-line reason. Allocates a temporary bitmap.
 */
SPROBE_API
int sprobe_table__check(const struct sprobe_table *t, char *errbuf,
			size_t errbuf_len);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_TABLE_H */
