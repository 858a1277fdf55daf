/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table, the writer: create, insert, update, remove, close. Runs in
 * the profiled process; never reads the mapping back (table_internal.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_internal.h"

_Static_assert(SPROBE_TABLE_MAX_FRAMES == SPROBE_MAX_FRAMES,
	       "a node holds what a capture unwinds");

/* ---- writer ---------------------------------------------------------- */

/* List seqlock, writer side. Odd store, then a release fence so that no
 * link store below becomes visible before the odd value: pairs with the
 * acquire fence in list_stable() (a reader that saw any relink sees the
 * generation moved). ASYNC-SIGNAL-SAFE. */
static inline void gen_begin(struct sprobe_table *t)
{
	atomic_store_explicit(&hdr(t)->generation, ++t->gen, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

/* Release: the relinks happen-before a reader that acquires this even
 * value in iter_begin(). ASYNC-SIGNAL-SAFE. */
static inline void gen_end(struct sprobe_table *t)
{
	atomic_store_explicit(&hdr(t)->generation, ++t->gen, memory_order_release);
}

/* Doubling from a few: a handful of reservations in a table's life. */
#define RESERVE_FIRST 32u
#define RESERVE_FIRST_BLOCKS 4u

/* Take a block for a deep stack: the most recently freed one, else the
 * watermark, reserving storage as it rises (as insert() does for nodes).
 * 0 when none can be had (the caller keeps the inline frames and marks the
 * node truncated). ASYNC-SIGNAL-SAFE: no malloc or locks; a system call
 * only for a reservation. */
static uint32_t block_take(struct sprobe_table *t)
{
	uint32_t b;

	if (t->bfree_head != SPROBE_TABLE_NIL) {
		b = t->bfree_head;
		t->bfree_head = t->bfree[b];
		return b;
	}
	if (t->bwatermark > t->capacity)
		return 0;
	if (t->bwatermark > t->reserved_blocks) {
		uint32_t want = t->reserved_blocks ? t->reserved_blocks * 2 : RESERVE_FIRST_BLOCKS;
		size_t off = blocks_offset(t->capacity) + (size_t)t->reserved_blocks * TABLE_BLOCK_SIZE;

		if (want > t->capacity)
			want = t->capacity;
		if (t->has_os && sprobe_table_os__reserve(&t->os, t->path, off,
				(size_t)(want - t->reserved_blocks) * TABLE_BLOCK_SIZE))
			return 0;
		t->reserved_blocks = want;
	}
	b = t->bwatermark++;
	/* Advisory mirror for sprobe_table__check(). */
	atomic_store_explicit(&hdr(t)->block_watermark, t->bwatermark, memory_order_relaxed);
	return b;
}

/* Write a node's seqlocked fields. rec == NULL writes only the state (and
 * drops the node's block). ASYNC-SIGNAL-SAFE: no malloc or locks; a system
 * call only when a block's storage is reserved (block_take()). */
static void node_write(struct sprobe_table *t, uint32_t idx, uint32_t state,
		       const struct sprobe_table_record *rec, uint64_t stack)
{
	struct shm_node *n = node_at(t, idx);
	struct wnode *w = &t->w[idx];
	uint32_t nf = 0, flags = 0, block = 0, old = w->block;
	_Atomic uint64_t *dst = n->frames;

	if (rec) {
		nf = rec->nframes;
		flags = rec->flags;
		if (nf > SPROBE_TABLE_MAX_FRAMES) {
			nf = SPROBE_TABLE_MAX_FRAMES;
			flags |= SPROBE_TABLE_NODE_TRUNCATED;
		}
		if (nf > TABLE_INLINE_FRAMES) {
			/* Before the seqlock section: a reservation is a
			 * system call, not to be made while readers retry. */
			block = old ? old : block_take(t);
			if (block) {
				dst = block_at(t, block)->frames;
			} else {
				nf = TABLE_INLINE_FRAMES;
				flags |= SPROBE_TABLE_NODE_TRUNCATED;
			}
		}
	}
	atomic_store_explicit(&n->seq, w->seq + 1, memory_order_relaxed);
	/* Orders the odd seq before the field stores; pairs with the acquire
	 * fence in read_node(): a reader that loaded any field written below
	 * (or any frame of the block) then loads a seq different from its
	 * first one. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&n->state, state, memory_order_relaxed);
	atomic_store_explicit(&n->block, block, memory_order_relaxed);
	if (rec) {
		atomic_store_explicit(&n->tid, (int32_t)rec->tid, memory_order_relaxed);
		atomic_store_explicit(&n->nframes, nf, memory_order_relaxed);
		atomic_store_explicit(&n->flags, flags, memory_order_relaxed);
		atomic_store_explicit(&n->capture_ns, rec->capture_ns,
				      memory_order_relaxed);
		atomic_store_explicit(&n->stack_bytes, stack, memory_order_relaxed);
		for (uint32_t i = 0; i < nf; i++) {
			atomic_store_explicit(&dst[2 * i], rec->frames[i].pc,
					      memory_order_relaxed);
			atomic_store_explicit(&dst[2 * i + 1], rec->frames[i].fp,
					      memory_order_relaxed);
		}
	}
	/* Release: the fields above happen-before a reader whose acquire load
	 * of seq in read_node() returns this even value. */
	w->seq += 2;
	atomic_store_explicit(&n->seq, w->seq, memory_order_release);
	w->block = block;
	/* A block the node stopped naming is free only now, after the seq
	 * that says so: whoever writes it next does so under its own node's
	 * release fence, which orders this seq before those stores, so a
	 * reader still copying it for this node sees this seq moved. */
	if (old && old != block) {
		t->bfree[old] = t->bfree_head;
		t->bfree_head = old;
	}
}

static bool record_ok(const struct sprobe_table_record *rec)
{
	return rec && rec->tid > 0 && (rec->nframes == 0 || rec->frames);
}

struct sprobe_table *sprobe_table__create(const char *path, uint32_t capacity)
{
	char defpath[64];
	struct sprobe_table *t;
	struct shm_header *h;
	void *base;
	int err;

	if (capacity == 0 || capacity > SPROBE_TABLE_MAX_CAPACITY) {
		errno = EINVAL;
		return NULL;
	}
	if (!path) {
		err = sprobe_table_os__default_path(sprobe_table_os__getpid(),
						    defpath, sizeof(defpath));
		if (err) {
			errno = -err;
			return NULL;
		}
		path = defpath;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->os.fd = -1;
	t->writer = true;
	t->capacity = capacity;
	t->size = table_size(capacity);
	t->path = strdup(path);
	t->w = sprobe_table_os__zalloc(((size_t)capacity + 1) * sizeof(*t->w));
	t->bfree = sprobe_table_os__zalloc(((size_t)capacity + 1) * sizeof(*t->bfree));
	t->visited = calloc(bitmap_words(capacity), sizeof(uint64_t));
	if (!t->path || !t->w || !t->bfree || !t->visited) {
		err = -ENOMEM;
		goto fail;
	}
	/* Storage for the first RESERVE_FIRST nodes now, more as the
	 * watermark reaches them (insert()), and blocks only once a stack is
	 * deeper than a node holds (block_take()): most processes have a few
	 * threads, most threads shallow stacks, and a full table of 1 024 is
	 * 2.3 MiB of tmpfs. */
	t->reserved_nodes = capacity < RESERVE_FIRST ? capacity : RESERVE_FIRST;
	err = sprobe_table_os__create(path, t->size, nodes_size(t->reserved_nodes), &t->os, &base);
	if (err)
		goto fail;
	t->has_os = true;
	t->base = base;

	/* The file is all zeroes: every node is FREE with seq 0. Fill the
	 * header, then publish the magic. */
	h = hdr(t);
	t->version = SPROBE_TABLE_VERSION;
	t->writer_pid = sprobe_table_os__getpid();
	t->created_realtime_ns = sprobe_table_os__clock_ns(0);
	t->created_monotonic_ns = sprobe_table_os__clock_ns(1);
	t->watermark = 1;
	t->bwatermark = 1;
	h->version = SPROBE_TABLE_VERSION;
	h->header_size = TABLE_HEADER_SIZE;
	h->node_size = TABLE_NODE_SIZE;
	h->capacity = capacity;
	h->max_frames = SPROBE_TABLE_MAX_FRAMES;
	h->writer_pid = t->writer_pid;
	h->inline_frames = TABLE_INLINE_FRAMES;
	h->block_size = TABLE_BLOCK_SIZE;
	h->blocks_offset = blocks_offset(capacity);
	h->blocks = capacity;
	atomic_store_explicit(&h->block_watermark, 1, memory_order_relaxed);
	h->created_realtime_ns = t->created_realtime_ns;
	h->created_monotonic_ns = t->created_monotonic_ns;
	atomic_store_explicit(&h->watermark, 1, memory_order_relaxed);
	atomic_store_explicit(&h->writer_state, WRITER_OPEN, memory_order_relaxed);
	/* Release: every header field above happens-before a reader whose
	 * acquire load of magic in table_validate() sees it. */
	atomic_store_explicit(&h->magic, TABLE_MAGIC, memory_order_release);
	return t;
fail:
	free(t->visited);
	sprobe_table_os__zfree(t->w, ((size_t)t->capacity + 1) * sizeof(*t->w));
	sprobe_table_os__zfree(t->bfree, ((size_t)t->capacity + 1) * sizeof(*t->bfree));
	free(t->path);
	free(t);
	errno = -err;
	return NULL;
}

int sprobe_table__insert(struct sprobe_table *t,
			 const struct sprobe_table_record *rec)
{
	struct shm_header *h;
	uint32_t idx, old;
	struct wnode *w;

	if (!t || !record_ok(rec))
		return -EINVAL;
	if (!t->writer)
		return -EPERM;
	h = hdr(t);
	/* Pop the most recently freed node, else take the watermark. */
	if (t->free_head != SPROBE_TABLE_NIL) {
		idx = t->free_head;
		t->free_head = t->w[idx].free_next;
	} else if (t->watermark <= t->capacity) {
		if (t->watermark > t->reserved_nodes) {
			/* Doubling: a handful of reservations in a table's life. */
			uint32_t want = t->reserved_nodes * 2;
			int err;

			if (want > t->capacity)
				want = t->capacity;
			err = t->has_os ? sprobe_table_os__reserve(&t->os, t->path, 0,
								   nodes_size(want)) : 0;
			if (err)
				return err == -ENOSPC ? -ENOSPC : err;
			t->reserved_nodes = want;
		}
		idx = t->watermark++;
	} else {
		return -ENOSPC;
	}
	w = &t->w[idx];
	w->live = 1;
	w->free_next = SPROBE_TABLE_NIL;
	w->stack_hwm = rec->stack_bytes;
	/* Fill the node while it is unreachable from head (a reader may still
	 * stand on it from an old iteration: the seqlock covers that). */
	node_write(t, idx, NODE_STATE_LIVE, rec, rec->stack_bytes);

	gen_begin(t);
	old = t->head;
	w->next = old;
	w->prev = SPROBE_TABLE_NIL;
	if (old != SPROBE_TABLE_NIL) {
		t->w[old].prev = idx;
		atomic_store_explicit(&node_at(t, old)->prev, idx,
				      memory_order_relaxed);
	}
	atomic_store_explicit(&node_at(t, idx)->prev, SPROBE_TABLE_NIL,
			      memory_order_relaxed);
	atomic_store_explicit(&node_at(t, idx)->free_next, SPROBE_TABLE_NIL,
			      memory_order_relaxed);
	/* Release; pairs with the acquire load of next in list_step(). */
	atomic_store_explicit(&node_at(t, idx)->next, old, memory_order_release);
	/* Release; pairs with the acquire load in start_scan(). Before head so
	 * a scan bound read after this insert covers idx. */
	atomic_store_explicit(&h->watermark, t->watermark, memory_order_release);
	atomic_store_explicit(&h->free_head, t->free_head, memory_order_relaxed);
	t->head = idx;
	/* Release: makes the node reachable; pairs with the acquire load of
	 * head in iter_begin() (the node's fields were published by its own
	 * seq, see node_write). */
	atomic_store_explicit(&h->head, idx, memory_order_release);
	atomic_store_explicit(&h->live, ++t->nlive, memory_order_relaxed);
	gen_end(t);
	return (int)idx;
}

static bool writer_live(const struct sprobe_table *t, uint32_t idx)
{
	return idx != SPROBE_TABLE_NIL && idx <= t->capacity && t->w[idx].live;
}

int sprobe_table__update(struct sprobe_table *t, uint32_t index,
			 const struct sprobe_table_record *rec)
{
	struct wnode *w;

	if (!t || !record_ok(rec))
		return -EINVAL;
	if (!t->writer)
		return -EPERM;
	if (!writer_live(t, index))
		return -EINVAL;
	w = &t->w[index];
	if (rec->stack_bytes > w->stack_hwm)
		w->stack_hwm = rec->stack_bytes;
	node_write(t, index, NODE_STATE_LIVE, rec, w->stack_hwm);
	atomic_store_explicit(&hdr(t)->updates, ++t->updates,
			      memory_order_relaxed);
	return 0;
}

int sprobe_table__remove(struct sprobe_table *t, uint32_t index)
{
	struct shm_header *h;
	uint32_t p, nx;
	struct wnode *w;

	if (!t)
		return -EINVAL;
	if (!t->writer)
		return -EPERM;
	if (!writer_live(t, index))
		return -EINVAL;
	h = hdr(t);
	w = &t->w[index];
	p = w->prev;
	nx = w->next;

	gen_begin(t);
	if (nx != SPROBE_TABLE_NIL) {
		t->w[nx].prev = p;
		atomic_store_explicit(&node_at(t, nx)->prev, p,
				      memory_order_relaxed);
	}
	if (p != SPROBE_TABLE_NIL) {
		t->w[p].next = nx;
		/* Release; pairs with the acquire load in list_step(). */
		atomic_store_explicit(&node_at(t, p)->next, nx,
				      memory_order_release);
	} else {
		t->head = nx;
		/* Release; pairs with the acquire load in iter_begin(). */
		atomic_store_explicit(&h->head, nx, memory_order_release);
	}
	/* Unreachable from head now. Mark it FREE under its seqlock so a
	 * reader already on it skips it; leave its shared `next` alone so
	 * that reader walks on into the list, not into the free list. */
	node_write(t, index, NODE_STATE_FREE, NULL, 0);
	w->live = 0;
	w->prev = SPROBE_TABLE_NIL;
	w->next = SPROBE_TABLE_NIL;
	w->free_next = t->free_head;
	t->free_head = index;
	atomic_store_explicit(&node_at(t, index)->prev, SPROBE_TABLE_NIL,
			      memory_order_relaxed);
	atomic_store_explicit(&node_at(t, index)->free_next, w->free_next,
			      memory_order_relaxed);
	atomic_store_explicit(&h->free_head, index, memory_order_relaxed);
	atomic_store_explicit(&h->live, --t->nlive, memory_order_relaxed);
	gen_end(t);
	return 0;
}

void sprobe_table__close(struct sprobe_table *t)
{
	bool owner;

	if (!t)
		return;
	/* A forked child holds a copy of the writer handle over the parent's
	 * live mapping: it may release its copy but must neither mark the
	 * parent's table closed nor unlink its file. */
	owner = t->writer && t->writer_pid == sprobe_table_os__getpid();
	if (owner && t->base)
		/* Release; advisory for readers (sprobe_table__info). */
		atomic_store_explicit(&hdr(t)->writer_state, WRITER_CLOSED,
				      memory_order_release);
	if (t->has_os)
		sprobe_table_os__close(&t->os, t->base, t->size,
				       owner ? t->path : NULL);
	free(t->visited);
	sprobe_table_os__zfree(t->w, ((size_t)t->capacity + 1) * sizeof(*t->w));
	sprobe_table_os__zfree(t->bfree, ((size_t)t->capacity + 1) * sizeof(*t->bfree));
	free(t->path);
	free(t);
}

const char *sprobe_table__path(const struct sprobe_table *t)
{
	return t ? t->path : NULL;
}

