/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table: portable logic over a mapped byte region. The OS half
 * (create/open/map/unlink) is in table_posix.c behind table_os.h.
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
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/capture.h>
#include <stackprobe/table.h>

#include "table_os.h"

_Static_assert(SPROBE_TABLE_MAX_FRAMES == SPROBE_MAX_FRAMES,
	       "a node holds what a capture unwinds");

/* ---- on-disk format v1 (docs/TABLE.md) ------------------------------- */

/* "SPROBETB" read as a little-endian u64. */
#define TABLE_MAGIC 0x425445424f525053ull
#define TABLE_HEADER_SIZE 256u
#define NODE_STATE_FREE 0u
#define NODE_STATE_LIVE 1u
#define WRITER_OPEN 1u
#define WRITER_CLOSED 2u

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
	uint8_t reserved[TABLE_HEADER_SIZE - 88];
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
	uint32_t reserved0;
	_Atomic uint64_t capture_ns;
	_Atomic uint64_t stack_bytes;
	uint64_t reserved1;
	_Atomic uint64_t frames[2 * SPROBE_TABLE_MAX_FRAMES]; /* pc, fp, ... */
};

#define TABLE_NODE_SIZE ((uint32_t)sizeof(struct shm_node))

_Static_assert(sizeof(struct shm_header) == TABLE_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct shm_node) == 2112, "node size");
_Static_assert(offsetof(struct shm_header, generation) == 48, "layout");
_Static_assert(offsetof(struct shm_header, head) == 56, "layout");
_Static_assert(offsetof(struct shm_header, updates) == 80, "layout");
_Static_assert(offsetof(struct shm_node, state) == 20, "layout");
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
	struct wnode *w;	/* capacity + 1 entries, [0] unused */
	uint32_t head, free_head, watermark, nlive;
	uint64_t gen, updates;

	/* Iteration state. */
	uint64_t *visited;	/* bitmap, capacity + 1 bits */
	enum iter_phase phase;
	uint32_t cur, steps, scan_pos, scan_end;
	uint64_t gen0;
	struct sprobe_table_iter_stats stats;
};

void sprobe_table__seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

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

static inline bool bit_test(const uint64_t *bm, uint32_t i)
{
	return bm[i / 64] >> (i % 64) & 1;
}

static inline void bit_set(uint64_t *bm, uint32_t i)
{
	bm[i / 64] |= 1ull << (i % 64);
}

static size_t bitmap_words(uint32_t capacity)
{
	return ((size_t)capacity + 1 + 63) / 64;
}

static size_t table_size(uint32_t capacity)
{
	return TABLE_HEADER_SIZE + (size_t)capacity * TABLE_NODE_SIZE;
}

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

/* Write a node's seqlocked fields. rec == NULL writes only the state.
 * ASYNC-SIGNAL-SAFE: no malloc, locks or syscalls. */
static void node_write(struct sprobe_table *t, uint32_t idx, uint32_t state,
		       const struct sprobe_table_record *rec, uint64_t stack)
{
	struct shm_node *n = node_at(t, idx);
	struct wnode *w = &t->w[idx];

	atomic_store_explicit(&n->seq, w->seq + 1, memory_order_relaxed);
	/* Orders the odd seq before the field stores; pairs with the acquire
	 * fence in read_node(): a reader that loaded any field written below
	 * then loads a seq different from its first one. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&n->state, state, memory_order_relaxed);
	if (rec) {
		uint32_t nf = rec->nframes, flags = rec->flags;

		if (nf > SPROBE_TABLE_MAX_FRAMES) {
			nf = SPROBE_TABLE_MAX_FRAMES;
			flags |= SPROBE_TABLE_NODE_TRUNCATED;
		}
		atomic_store_explicit(&n->tid, (int32_t)rec->tid, memory_order_relaxed);
		atomic_store_explicit(&n->nframes, nf, memory_order_relaxed);
		atomic_store_explicit(&n->flags, flags, memory_order_relaxed);
		atomic_store_explicit(&n->capture_ns, rec->capture_ns,
				      memory_order_relaxed);
		atomic_store_explicit(&n->stack_bytes, stack, memory_order_relaxed);
		for (uint32_t i = 0; i < nf; i++) {
			atomic_store_explicit(&n->frames[2 * i], rec->frames[i].pc,
					      memory_order_relaxed);
			atomic_store_explicit(&n->frames[2 * i + 1],
					      rec->frames[i].fp,
					      memory_order_relaxed);
		}
	}
	/* Release: the fields above happen-before a reader whose acquire load
	 * of seq in read_node() returns this even value. */
	w->seq += 2;
	atomic_store_explicit(&n->seq, w->seq, memory_order_release);
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
	t->w = calloc((size_t)capacity + 1, sizeof(*t->w));
	t->visited = calloc(bitmap_words(capacity), sizeof(uint64_t));
	if (!t->path || !t->w || !t->visited) {
		err = -ENOMEM;
		goto fail;
	}
	err = sprobe_table_os__create(path, t->size, &t->os, &base);
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
	h->version = SPROBE_TABLE_VERSION;
	h->header_size = TABLE_HEADER_SIZE;
	h->node_size = TABLE_NODE_SIZE;
	h->capacity = capacity;
	h->max_frames = SPROBE_TABLE_MAX_FRAMES;
	h->writer_pid = t->writer_pid;
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
	free(t->w);
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
	free(t->w);
	free(t->path);
	free(t);
}

const char *sprobe_table__path(const struct sprobe_table *t)
{
	return t ? t->path : NULL;
}

/* ---- reader ---------------------------------------------------------- */

/* Validate the header of a size-byte region at base and fill t's copies.
 * Reads each field exactly once. */
static int table_validate(struct sprobe_table *t, const uint8_t *base,
			  size_t size, char *err, size_t errlen)
{
	const struct shm_header *h = (const struct shm_header *)base;
	uint32_t version, header_size, node_size, capacity, max_frames;
	uint64_t magic, want;
	int32_t pid;

	if (size < 24) {
		sprobe_table__seterr(err, errlen, "truncated table: %llu bytes, the header "
				     "alone needs %u", (unsigned long long)size,
				     TABLE_HEADER_SIZE);
		return -EBADMSG;
	}
	/* Acquire; pairs with the release store of magic at creation: the
	 * header fields below were written before it. */
	magic = atomic_load_explicit(&h->magic, memory_order_acquire);
	if (magic == 0) {
		sprobe_table__seterr(err, errlen, "table is still being created (no magic "
				     "yet): retry");
		return -EAGAIN;
	}
	if (magic != TABLE_MAGIC) {
		sprobe_table__seterr(err, errlen, "not a stackprobe table: bad magic "
				     "0x%016llx", (unsigned long long)magic);
		return -EBADMSG;
	}
	/* The fixed fields are copied once and only the copies are used. */
	version = *(const volatile uint32_t *)&h->version;
	header_size = *(const volatile uint32_t *)&h->header_size;
	node_size = *(const volatile uint32_t *)&h->node_size;
	if (version != SPROBE_TABLE_VERSION) {
		sprobe_table__seterr(err, errlen, "unsupported table format version %u (this "
				     "stackprobe reads version %u)", version,
				     SPROBE_TABLE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (size < TABLE_HEADER_SIZE) {
		sprobe_table__seterr(err, errlen, "truncated table: %llu bytes, the header "
				     "alone needs %u", (unsigned long long)size,
				     TABLE_HEADER_SIZE);
		return -EBADMSG;
	}
	capacity = *(const volatile uint32_t *)&h->capacity;
	max_frames = *(const volatile uint32_t *)&h->max_frames;
	pid = *(const volatile int32_t *)&h->writer_pid;
	if (header_size != TABLE_HEADER_SIZE || node_size != TABLE_NODE_SIZE ||
	    max_frames != SPROBE_TABLE_MAX_FRAMES) {
		sprobe_table__seterr(err, errlen, "bad layout: header_size %u node_size %u "
				     "max_frames %u (version 1 has %u, %u, %u)", header_size,
				     node_size, max_frames, TABLE_HEADER_SIZE,
				     TABLE_NODE_SIZE, SPROBE_TABLE_MAX_FRAMES);
		return -EBADMSG;
	}
	if (capacity == 0 || capacity > SPROBE_TABLE_MAX_CAPACITY) {
		sprobe_table__seterr(err, errlen, "bad capacity %u (1..%u)", capacity,
				     SPROBE_TABLE_MAX_CAPACITY);
		return -EBADMSG;
	}
	want = (uint64_t)header_size + (uint64_t)capacity * node_size;
	if ((uint64_t)size != want) {
		sprobe_table__seterr(err, errlen, "size %llu does not match header_size + "
				     "capacity * node_size = %u + %u * %u = %llu%s",
				     (unsigned long long)size,
				     header_size, capacity, node_size,
				     (unsigned long long)want,
				     (uint64_t)size < want ? " (truncated)" : "");
		return -EBADMSG;
	}
	if (pid <= 0) {
		sprobe_table__seterr(err, errlen, "bad writer pid %d", pid);
		return -EBADMSG;
	}
	t->version = version;
	t->capacity = capacity;
	t->writer_pid = pid;
	t->created_realtime_ns = *(const volatile uint64_t *)&h->created_realtime_ns;
	t->created_monotonic_ns = *(const volatile uint64_t *)&h->created_monotonic_ns;
	return 0;
}

struct open_args {
	char *err;
	size_t errlen;
};

static int parse_opts(const struct sprobe_table_open_opts *opts,
		      struct open_args *a)
{
	a->err = NULL;
	a->errlen = 0;
	if (!opts)
		return 0;
	if (opts->sz < sizeof(size_t))
		return -EINVAL;
	if (opts->sz >= offsetof(struct sprobe_table_open_opts, errbuf_len) +
			       sizeof(size_t)) {
		a->err = opts->errbuf;
		a->errlen = opts->errbuf_len;
	}
	if (a->err && a->errlen)
		a->err[0] = '\0';
	return 0;
}

/* Build a reader over [base, base + size); on failure release nothing of
 * the caller's. */
static struct sprobe_table *reader_new(const void *base, size_t size,
				       struct open_args *a, int *errp)
{
	struct sprobe_table *t = calloc(1, sizeof(*t));
	int err;

	if (!t) {
		*errp = -ENOMEM;
		return NULL;
	}
	t->os.fd = -1;
	err = table_validate(t, base, size, a->err, a->errlen);
	if (err)
		goto fail;
	t->visited = calloc(bitmap_words(t->capacity), sizeof(uint64_t));
	if (!t->visited) {
		err = -ENOMEM;
		goto fail;
	}
	t->base = (uint8_t *)base;
	t->size = size;
	return t;
fail:
	free(t);
	*errp = err;
	return NULL;
}

struct sprobe_table *sprobe_table__open_mem(const void *buf, size_t len,
				const struct sprobe_table_open_opts *opts)
{
	struct sprobe_table *t;
	struct open_args a;
	int err;

	err = parse_opts(opts, &a);
	if (!err && (!buf || ((uintptr_t)buf & 7))) {
		sprobe_table__seterr(a.err, a.errlen, "buffer is NULL or not 8-byte aligned");
		err = -EINVAL;
	}
	if (err) {
		errno = -err;
		return NULL;
	}
	t = reader_new(buf, len, &a, &err);
	if (!t)
		errno = -err;
	return t;
}

struct sprobe_table *sprobe_table__open_path(const char *path,
				const struct sprobe_table_open_opts *opts)
{
	struct sprobe_table_os os = { .fd = -1 };
	struct sprobe_table *t;
	struct open_args a;
	const void *base;
	size_t size;
	int err;

	err = parse_opts(opts, &a);
	if (!err && !path)
		err = -EINVAL;
	if (err) {
		errno = -err;
		return NULL;
	}
	err = sprobe_table_os__open(path, &os, &base, &size, a.err, a.errlen);
	if (err) {
		errno = -err;
		return NULL;
	}
	t = reader_new(base, size, &a, &err);
	if (t)
		t->path = strdup(path);
	if (!t || !t->path) {
		sprobe_table_os__close(&os, (void *)base, size, NULL);
		if (t) {
			free(t->visited);
			free(t);
			err = -ENOMEM;
		}
		errno = -err;
		return NULL;
	}
	t->os = os;
	t->has_os = true;
	return t;
}

struct sprobe_table *sprobe_table__open_pid(pid_t pid,
				const struct sprobe_table_open_opts *opts)
{
	struct sprobe_table *t;
	struct open_args a;
	char path[64];
	int err;

	err = parse_opts(opts, &a);
	if (!err && pid <= 0)
		err = -EINVAL;
	if (!err)
		err = sprobe_table_os__default_path(pid, path, sizeof(path));
	if (err) {
		errno = -err;
		return NULL;
	}
	t = sprobe_table__open_path(path, opts);
	if (t && t->writer_pid != pid) {
		sprobe_table__seterr(a.err, a.errlen, "%s was written by pid %d, not %d: a "
				     "stale table", path, (int)t->writer_pid, (int)pid);
		sprobe_table__close(t);
		errno = ESTALE;
		return NULL;
	}
	return t;
}

int sprobe_table__info(const struct sprobe_table *t,
		       struct sprobe_table_info *info)
{
	const struct shm_header *h;

	if (!t || !info)
		return -EINVAL;
	h = hdr(t);
	memset(info, 0, sizeof(*info));
	info->version = t->version;
	info->capacity = t->capacity;
	info->header_size = TABLE_HEADER_SIZE;
	info->node_size = TABLE_NODE_SIZE;
	info->writer_pid = t->writer_pid;
	info->created_realtime_ns = t->created_realtime_ns;
	info->created_monotonic_ns = t->created_monotonic_ns;
	info->file_size = t->size;
	/* Advisory values: relaxed loads, no pairing needed. */
	info->writer_closed = atomic_load_explicit(&h->writer_state,
				memory_order_acquire) == WRITER_CLOSED;
	info->generation = atomic_load_explicit(&h->generation,
						memory_order_relaxed);
	info->watermark = atomic_load_explicit(&h->watermark,
					       memory_order_relaxed);
	info->live = atomic_load_explicit(&h->live, memory_order_relaxed);
	info->updates = atomic_load_explicit(&h->updates, memory_order_relaxed);
	return 0;
}

enum read_result { READ_LIVE, READ_FREE, READ_BUSY, READ_INVALID };

/* Copy node idx (range-checked by the caller) into *out under its seqlock.
 * A node whose counter is odd or moved is retried, at most
 * SPROBE_TABLE_READ_RETRIES times. */
static enum read_result read_node(const struct sprobe_table *t, uint32_t idx,
				  struct sprobe_table_node *out,
				  uint32_t *retries)
{
	const struct shm_node *n = node_at(t, idx);

	for (int attempt = 0; attempt < SPROBE_TABLE_READ_RETRIES; attempt++) {
		uint32_t state, nf, k, flags;
		uint64_t s1, s2, cap, stack;
		int32_t tid;

		if (attempt) {
			(*retries)++;
			cpu_relax();
		}
		/* Acquire; pairs with the release store of the even seq at the
		 * end of node_write(). */
		s1 = atomic_load_explicit(&n->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		state = atomic_load_explicit(&n->state, memory_order_relaxed);
		tid = atomic_load_explicit(&n->tid, memory_order_relaxed);
		nf = atomic_load_explicit(&n->nframes, memory_order_relaxed);
		flags = atomic_load_explicit(&n->flags, memory_order_relaxed);
		cap = atomic_load_explicit(&n->capture_ns, memory_order_relaxed);
		stack = atomic_load_explicit(&n->stack_bytes, memory_order_relaxed);
		/* nf may be torn or hostile: clamp before it sizes a copy. */
		k = nf > SPROBE_TABLE_MAX_FRAMES ? SPROBE_TABLE_MAX_FRAMES : nf;
		if (state == NODE_STATE_LIVE) {
			for (uint32_t i = 0; i < k; i++) {
				out->frames[i].pc = atomic_load_explicit(
					&n->frames[2 * i], memory_order_relaxed);
				out->frames[i].fp = atomic_load_explicit(
					&n->frames[2 * i + 1], memory_order_relaxed);
			}
		}
		/* Acquire fence; pairs with the release fence after the odd
		 * store in node_write(): if any load above saw a newer write,
		 * the reload below sees seq moved. */
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&n->seq, memory_order_relaxed);
		if (s1 != s2)
			continue;
		if (state == NODE_STATE_FREE)
			return READ_FREE;
		if (state != NODE_STATE_LIVE || nf > SPROBE_TABLE_MAX_FRAMES ||
		    tid <= 0)
			return READ_INVALID;
		out->index = idx;
		out->tid = tid;
		out->flags = flags;
		out->nframes = nf;
		out->capture_ns = cap;
		out->stack_bytes = stack;
		out->writes = s1 / 2;
		return READ_LIVE;
	}
	return READ_BUSY;
}

int sprobe_table__iter_begin(struct sprobe_table *t)
{
	const struct shm_header *h;
	int err;

	if (!t)
		return -EINVAL;
	if (t->has_os && !t->writer) {
		err = sprobe_table_os__check_size(&t->os, t->size);
		if (err)
			return err;
	}
	h = hdr(t);
	memset(t->visited, 0, bitmap_words(t->capacity) * sizeof(uint64_t));
	memset(&t->stats, 0, sizeof(t->stats));
	/* Acquire; pairs with the release store in gen_end(). */
	t->gen0 = atomic_load_explicit(&h->generation, memory_order_acquire);
	/* Acquire; pairs with the release stores of head in insert/remove. */
	t->cur = atomic_load_explicit(&h->head, memory_order_acquire);
	t->steps = 0;
	t->phase = ITER_LIST;
	return 0;
}

/* True if no insert or remove ran since iter_begin(). */
static bool list_stable(const struct sprobe_table *t)
{
	uint64_t g;

	/* Acquire fence; pairs with the release fence in gen_begin(): if any
	 * link we loaded came from a relink, g below differs from gen0. */
	atomic_thread_fence(memory_order_acquire);
	g = atomic_load_explicit(&hdr(t)->generation, memory_order_relaxed);
	return g == t->gen0 && !(g & 1);
}

static void start_scan(struct sprobe_table *t)
{
	uint32_t wm;

	/* Acquire; pairs with the release store of watermark in insert. */
	wm = atomic_load_explicit(&hdr(t)->watermark, memory_order_acquire);
	if (wm == 0 || wm > t->capacity + 1)
		wm = t->capacity + 1;	/* hostile value: scan everything */
	t->stats.list_changed = true;
	t->scan_pos = 1;
	t->scan_end = wm;
	t->phase = ITER_SCAN;
}

static int visit(struct sprobe_table *t, uint32_t idx,
		 struct sprobe_table_node *out)
{
	bit_set(t->visited, idx);
	t->stats.visited++;
	switch (read_node(t, idx, out, &t->stats.retries)) {
	case READ_LIVE:
		t->stats.returned++;
		return 1;
	case READ_BUSY:
		t->stats.skipped_busy++;
		return 0;
	case READ_INVALID:
		t->stats.skipped_invalid++;
		return 0;
	case READ_FREE:
		break;
	}
	return 0;
}

/* One step of the list walk: 1 node copied, 0 go on, <0 error or end
 * (phase set). */
static int list_step(struct sprobe_table *t, struct sprobe_table_node *out)
{
	uint32_t idx = t->cur;
	int r;

	if (idx == SPROBE_TABLE_NIL) {
		if (list_stable(t))
			t->phase = ITER_DONE;
		else
			start_scan(t);
		return 0;
	}
	if (idx > t->capacity || bit_test(t->visited, idx) ||
	    t->steps >= t->capacity) {
		if (!list_stable(t)) {
			/* Expected under a writer: a reused node led us
			 * back. The scan finishes the job. */
			start_scan(t);
			return 0;
		}
		t->phase = ITER_DONE;
		return idx > t->capacity ? -EBADMSG : -ELOOP;
	}
	t->steps++;
	r = visit(t, idx, out);
	/* Acquire; pairs with the release stores of next in insert/remove. */
	t->cur = atomic_load_explicit(&node_at(t, idx)->next,
				      memory_order_acquire);
	return r;
}

int sprobe_table__iter_next(struct sprobe_table *t,
			    struct sprobe_table_node *out)
{
	int r;

	if (!t || !out)
		return -EINVAL;
	while (t->phase == ITER_LIST) {
		r = list_step(t, out);
		if (r)
			return r;
	}
	while (t->phase == ITER_SCAN) {
		if (t->scan_pos >= t->scan_end) {
			t->phase = ITER_DONE;
			break;
		}
		uint32_t idx = t->scan_pos++;
		if (bit_test(t->visited, idx))
			continue;
		if (visit(t, idx, out))
			return 1;
	}
	return t->phase == ITER_NONE ? -EINVAL : 0;
}

int sprobe_table__iter_stats(const struct sprobe_table *t,
			     struct sprobe_table_iter_stats *stats)
{
	if (!t || !stats)
		return -EINVAL;
	*stats = t->stats;
	return 0;
}

/* Walk one list (live or free) from first, following next or free_next,
 * marking seen[]. Returns the count or -errno. */
static int check_walk(const struct sprobe_table *t, uint32_t first,
		      bool free_list, uint64_t *seen, uint32_t watermark,
		      char *err, size_t errlen)
{
	const char *what = free_list ? "free list" : "list";
	uint32_t idx = first, count = 0;
	struct sprobe_table_node tmp;
	enum read_result rr;
	uint32_t retries = 0;

	while (idx != SPROBE_TABLE_NIL) {
		if (idx > t->capacity || idx >= watermark) {
			sprobe_table__seterr(err, errlen, "%s: index %u out of range (capacity "
					     "%u, watermark %u)", what, idx, t->capacity,
					     watermark);
			return -EBADMSG;
		}
		if (bit_test(seen, idx)) {
			sprobe_table__seterr(err, errlen, "%s: node %u reached twice (%s)",
					     what, idx, count >= 1 && free_list ?
					     "cycle or node on both lists" : "cycle");
			return -ELOOP;
		}
		bit_set(seen, idx);
		count++;
		rr = read_node(t, idx, &tmp, &retries);
		if (rr != (free_list ? READ_FREE : READ_LIVE)) {
			sprobe_table__seterr(err, errlen, "%s: node %u is %s", what, idx,
					     rr == READ_BUSY ? "changing" :
					     rr == READ_INVALID ? "invalid" :
					     free_list ? "live" : "free");
			return rr == READ_BUSY ? -EAGAIN : -EBADMSG;
		}
		idx = atomic_load_explicit(free_list ? &node_at(t, idx)->free_next
						     : &node_at(t, idx)->next,
					   memory_order_acquire);
	}
	return (int)count;
}

int sprobe_table__check(const struct sprobe_table *t, char *err,
			size_t errlen)
{
	const struct shm_header *h;
	uint32_t wm, live_mirror;
	uint64_t g0, g1, *seen;
	int nlive, nfree, ret;

	if (!t)
		return -EINVAL;
	h = hdr(t);
	g0 = atomic_load_explicit(&h->generation, memory_order_acquire);
	if (g0 & 1) {
		sprobe_table__seterr(err, errlen, "the writer is changing the list: retry");
		return -EAGAIN;
	}
	wm = atomic_load_explicit(&h->watermark, memory_order_acquire);
	if (wm == 0 || wm > t->capacity + 1) {
		sprobe_table__seterr(err, errlen, "watermark %u out of range 1..%u", wm,
				     t->capacity + 1);
		return -EBADMSG;
	}
	seen = calloc(bitmap_words(t->capacity), sizeof(uint64_t));
	if (!seen)
		return -ENOMEM;
	nlive = check_walk(t, atomic_load_explicit(&h->head, memory_order_acquire),
			   false, seen, wm, err, errlen);
	ret = nlive;
	if (nlive >= 0) {
		nfree = check_walk(t, atomic_load_explicit(&h->free_head,
						memory_order_acquire),
				   true, seen, wm, err, errlen);
		ret = nfree;
		if (nfree >= 0) {
			ret = 0;
			live_mirror = atomic_load_explicit(&h->live,
						memory_order_relaxed);
			if ((uint32_t)(nlive + nfree) != wm - 1) {
				sprobe_table__seterr(err, errlen, "%d live + %d free nodes, "
						     "but %u were used (watermark %u)", nlive,
						     nfree, wm - 1, wm);
				ret = -EBADMSG;
			} else if (live_mirror != (uint32_t)nlive) {
				sprobe_table__seterr(err, errlen, "header says %u live, list "
						     "has %d", live_mirror, nlive);
				ret = -EBADMSG;
			}
		}
	}
	free(seen);
	atomic_thread_fence(memory_order_acquire);
	g1 = atomic_load_explicit(&h->generation, memory_order_relaxed);
	if (g1 != g0) {
		sprobe_table__seterr(err, errlen, "the writer changed the list: retry");
		return -EAGAIN;
	}
	return ret;
}
