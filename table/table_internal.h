/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the node table's two halves share: the on-disk format, the
 * in-process state and the accessors. The writer (table_writer.c) runs in
 * the profiled process; the reader (table_reader.c) in another one. The OS
 * half (create/open/map/unlink) is in table_posix.c / table_win.c behind
 * table_os.h. Calls go one way: each half calls the OS half, the two halves
 * never call each other (sprobe_table__close(), in the writer, closes
 * either kind of handle).
 *
 * The design follows the stacktrack threads table (header, fixed nodes,
 * list from head, LIFO free list, watermark), changed for a reader that
 * reads the LIVE mapping from another process while the writer runs (there
 * is no copy-on-write snapshot on Linux):
 *
 *  - Each node carries a 64-bit sequence counter (seqlock). The writer makes
 *    it odd, writes the node's fields, makes it even again. The reader copies
 *    the fields between two loads of the counter and keeps the copy only if
 *    both loads agree and are even. Fields are accessed with relaxed atomics
 *    (the C11 way to write seqlocks: Boehm, "Can seqlocks get along with
 *    programming language memory models?", 2012); on x86_64 and aarch64 they
 *    compile to plain loads and stores.
 *  - The header's generation counter is a seqlock over the list shape: odd
 *    while insert or remove relinks, +2 per change. An iteration that saw it
 *    stable walked an unchanging list and is exact; otherwise it finishes
 *    with an index scan so that no node live throughout is missed.
 *  - A node's state (FREE/LIVE) is a seqlocked field, and the free list has
 *    its own link (free_next), so a reader standing on a node that was just
 *    removed keeps following `next` into list nodes, never into the free
 *    list, and never returns a free node.
 *  - The writer keeps its links, free list, watermark and counters in
 *    private memory and only publishes them: it never reads the mapping, so
 *    a corrupted file cannot crash the (profiled) writer process.
 *  - The reader copies every header field once at open, validates it, and
 *    afterwards uses only its copies; every index it loads from the file is
 *    range-checked before use.
 *  - Storage is sized by depth: a node holds TABLE_INLINE_FRAMES frames in
 *    place, and a deeper stack lives whole in a block, named by the node's
 *    seqlocked `block` field. The node's index never changes (callers keep
 *    it), only where its frames are. A block is covered by the seq of the
 *    node naming it; the writer frees a block only after that node's write
 *    that stopped naming it, so a reader copying a block another node has
 *    since reused sees its own node's seq moved and retries.
 */
#ifndef SPROBE_TABLE_INTERNAL_H
#define SPROBE_TABLE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stackprobe/capture.h>
#include <stackprobe/table.h>

#include "table/table_os.h"

/* ---- on-disk format v2 (docs/TABLE.md) ------------------------------- */

/* "SPROBETB" read as a little-endian u64. */
#define TABLE_MAGIC 0x425445424f525053ull
#define TABLE_HEADER_SIZE 256u
#define NODE_STATE_FREE 0u
#define NODE_STATE_LIVE 1u
#define WRITER_OPEN 1u
#define WRITER_CLOSED 2u
/* Frames a node holds in place. An idle thread's stack is 6-12 frames deep,
 * so most nodes never need more: 12 makes the node 256 bytes, where holding
 * all 128 frames made it 2112. A deeper stack goes whole into a block. */
#define TABLE_INLINE_FRAMES 12u
/* A block holds a full stack (SPROBE_TABLE_MAX_FRAMES frames). 2048 divides
 * a page and the blocks region starts on a multiple of it, so a block never
 * straddles two pages: storing a stack touches one page. */
#define TABLE_BLOCK_SIZE (16u * SPROBE_TABLE_MAX_FRAMES)

struct shm_header {
	_Atomic uint64_t magic;		/* stored last at creation (release);
					 * pairs with the acquire load in
					 * table_validate() */
	uint32_t version;
	uint32_t header_size;
	uint32_t node_size;
	uint32_t capacity;
	uint32_t max_frames;
	int32_t writer_pid;
	uint64_t created_realtime_ns;
	uint64_t created_monotonic_ns;
	_Atomic uint64_t generation;	/* list seqlock: see gen_begin/gen_end;
					 * pairs with the loads in
					 * iter_begin() and list_stable() */
	_Atomic uint32_t head;		/* release in insert/remove; pairs with
					 * the acquire load in iter_begin() */
	_Atomic uint32_t watermark;	/* release in insert; pairs with the
					 * acquire load in start_scan() */
	_Atomic uint32_t free_head;	/* mirror, read by check() only */
	_Atomic uint32_t live;		/* mirror, advisory */
	_Atomic uint32_t writer_state;	/* release in close; advisory */
	uint32_t reserved0;
	_Atomic uint64_t updates;	/* mirror, advisory */
	/* Fixed, like the fields before generation. */
	uint32_t inline_frames;
	uint32_t block_size;
	uint64_t blocks_offset;
	uint32_t blocks;
	_Atomic uint32_t block_watermark; /* mirror: blocks >= it never used;
					   * read by check() only */
	uint8_t reserved[TABLE_HEADER_SIZE - 112];
};

struct shm_node {
	_Atomic uint64_t seq;		/* node seqlock: odd while written.
					 * Writer: node_write(); reader:
					 * read_node() */
	_Atomic uint32_t next;		/* list link: release in insert/remove;
					 * pairs with the acquire load in
					 * list_step() */
	_Atomic uint32_t prev;		/* mirror of the writer's back link */
	_Atomic uint32_t free_next;	/* mirror of the free-list link */
	/* Fields below are protected by seq. */
	_Atomic uint32_t state;
	_Atomic int32_t tid;
	_Atomic uint32_t nframes;
	_Atomic uint32_t flags;
	_Atomic uint32_t block;		/* nframes > TABLE_INLINE_FRAMES: the
					 * block holding the frames (1..blocks);
					 * else 0 and the frames are inline */
	_Atomic uint64_t capture_ns;
	_Atomic uint64_t stack_bytes;
	uint64_t reserved1;
	_Atomic uint64_t frames[2 * TABLE_INLINE_FRAMES]; /* pc, fp, ... */
};

/* One block: a whole stack's frames, pc, fp, ... Protected by the seq of
 * the node that names it. */
struct shm_block {
	_Atomic uint64_t frames[2 * SPROBE_TABLE_MAX_FRAMES];
};

#define TABLE_NODE_SIZE ((uint32_t)sizeof(struct shm_node))

_Static_assert(sizeof(struct shm_header) == TABLE_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct shm_node) == 256, "node size");
_Static_assert(sizeof(struct shm_block) == TABLE_BLOCK_SIZE, "block size");
_Static_assert(4096 % TABLE_BLOCK_SIZE == 0, "a block lies in one page");
_Static_assert(offsetof(struct shm_header, generation) == 48, "layout");
_Static_assert(offsetof(struct shm_header, head) == 56, "layout");
_Static_assert(offsetof(struct shm_header, updates) == 80, "layout");
_Static_assert(offsetof(struct shm_header, inline_frames) == 88, "layout");
_Static_assert(offsetof(struct shm_header, blocks_offset) == 96, "layout");
_Static_assert(offsetof(struct shm_header, block_watermark) == 108, "layout");
_Static_assert(offsetof(struct shm_node, state) == 20, "layout");
_Static_assert(offsetof(struct shm_node, block) == 36, "layout");
_Static_assert(offsetof(struct shm_node, capture_ns) == 40, "layout");
_Static_assert(offsetof(struct shm_node, frames) == 64, "layout");
_Static_assert(TABLE_HEADER_SIZE % 64 == 0 && sizeof(struct shm_node) % 64 == 0,
	       "nodes start on cache lines");


/* ---- in-process state ------------------------------------------------ */

/* The writer's private view of one node: the truth, never read back from
 * the mapping. */
struct wnode {
	uint32_t next, prev, free_next;
	uint32_t live;
	uint64_t seq;
	uint64_t stack_hwm;
	uint32_t block;		/* the node's block, 0 while its frames fit */
};

enum iter_phase { ITER_NONE, ITER_LIST, ITER_SCAN, ITER_DONE };

struct sprobe_table {
	bool writer;
	uint8_t *base;		/* the mapping (read-only for readers) */
	size_t size;
	struct sprobe_table_os os;
	bool has_os;
	char *path;

	/* Header copies validated at open (readers) or set at create. */
	uint32_t capacity;
	uint32_t version;
	pid_t writer_pid;
	uint64_t created_realtime_ns, created_monotonic_ns;

	/* Writer-private truth. */
	uint32_t reserved_nodes;	/* nodes 1..reserved_nodes have storage */
	struct wnode *w;	/* capacity + 1 entries, [0] unused */
	uint32_t head, free_head, watermark, nlive;
	/* Blocks: same scheme as the nodes (LIFO free list, watermark,
	 * storage reserved by doubling); bfree[b] links free block b. */
	uint32_t *bfree;	/* capacity + 1 entries, [0] unused */
	uint32_t bfree_head, bwatermark, reserved_blocks;
	uint64_t gen, updates;

	/* Iteration state. */
	uint64_t *visited;	/* bitmap, capacity + 1 bits */
	enum iter_phase phase;
	uint32_t cur, steps, scan_pos, scan_end;
	uint64_t gen0;
	struct sprobe_table_iter_stats stats;
};


static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline struct shm_header *hdr(const struct sprobe_table *t)
{
	return (struct shm_header *)t->base;
}

/* Callers have range-checked idx (1..capacity). */
static inline struct shm_node *node_at(const struct sprobe_table *t,
				       uint32_t idx)
{
	return (struct shm_node *)(t->base + TABLE_HEADER_SIZE +
				   (size_t)(idx - 1) * TABLE_NODE_SIZE);
}

/* Where the blocks start: after the nodes, rounded up to a block so that
 * no block straddles a page. */
static inline size_t blocks_offset(uint32_t capacity)
{
	size_t end = TABLE_HEADER_SIZE + (size_t)capacity * TABLE_NODE_SIZE;

	return (end + TABLE_BLOCK_SIZE - 1) / TABLE_BLOCK_SIZE * TABLE_BLOCK_SIZE;
}

/* Callers have range-checked b (1..capacity: a table has one block per
 * node, so that every thread it holds may be deep at once). */
static inline struct shm_block *block_at(const struct sprobe_table *t,
					 uint32_t b)
{
	return (struct shm_block *)(t->base + blocks_offset(t->capacity) +
				    (size_t)(b - 1) * TABLE_BLOCK_SIZE);
}

static inline bool bit_test(const uint64_t *bm, uint32_t i)
{
	return bm[i / 64] >> (i % 64) & 1;
}

static inline void bit_set(uint64_t *bm, uint32_t i)
{
	bm[i / 64] |= 1ull << (i % 64);
}

static inline size_t bitmap_words(uint32_t capacity)
{
	return ((size_t)capacity + 1 + 63) / 64;
}

/* Bytes of the header and the first n nodes. */
static inline size_t nodes_size(uint32_t n)
{
	return TABLE_HEADER_SIZE + (size_t)n * TABLE_NODE_SIZE;
}

/* The whole file: header, nodes, padding, one block per node. */
static inline size_t table_size(uint32_t capacity)
{
	return blocks_offset(capacity) + (size_t)capacity * TABLE_BLOCK_SIZE;
}


#endif
