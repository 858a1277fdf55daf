/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Node table, the reader: open (memory, path, pid), validate, iterate,
 * check. Runs in another process than the writer and trusts nothing in the
 * mapping (table_internal.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/table_internal.h"

/* ---- reader ---------------------------------------------------------- */

/* Validate the header of a size-byte region at base and fill t's copies.
 * Reads each field exactly once. */
static int table_validate(struct sprobe_table *t, const uint8_t *base,
			  size_t size, char *err, size_t errlen)
{
	const struct shm_header *h = (const struct shm_header *)base;
	uint32_t version, header_size, node_size, capacity, max_frames;
	uint32_t inline_frames, block_size, blocks;
	uint64_t magic, want, boff;
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
				     "stackprobe reads version %u only: the writer is %s "
				     "stackprobe)", version, SPROBE_TABLE_VERSION,
				     version < SPROBE_TABLE_VERSION ? "an older" : "a newer");
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
	inline_frames = *(const volatile uint32_t *)&h->inline_frames;
	block_size = *(const volatile uint32_t *)&h->block_size;
	boff = *(const volatile uint64_t *)&h->blocks_offset;
	blocks = *(const volatile uint32_t *)&h->blocks;
	if (header_size != TABLE_HEADER_SIZE || node_size != TABLE_NODE_SIZE ||
	    max_frames != SPROBE_TABLE_MAX_FRAMES || inline_frames != TABLE_INLINE_FRAMES ||
	    block_size != TABLE_BLOCK_SIZE) {
		sprobe_table__seterr(err, errlen, "bad layout: header_size %u node_size %u "
				     "max_frames %u inline_frames %u block_size %u (version %u "
				     "has %u, %u, %u, %u, %u)", header_size, node_size,
				     max_frames, inline_frames, block_size,
				     SPROBE_TABLE_VERSION, TABLE_HEADER_SIZE, TABLE_NODE_SIZE,
				     SPROBE_TABLE_MAX_FRAMES, TABLE_INLINE_FRAMES,
				     TABLE_BLOCK_SIZE);
		return -EBADMSG;
	}
	if (capacity == 0 || capacity > SPROBE_TABLE_MAX_CAPACITY) {
		sprobe_table__seterr(err, errlen, "bad capacity %u (1..%u)", capacity,
				     SPROBE_TABLE_MAX_CAPACITY);
		return -EBADMSG;
	}
	/* Capacity is bounded: none of this overflows. */
	if (blocks != capacity || boff != blocks_offset(capacity)) {
		sprobe_table__seterr(err, errlen, "bad layout: %u blocks at offset %llu "
				     "(capacity %u needs %u at %llu)", blocks,
				     (unsigned long long)boff, capacity, capacity,
				     (unsigned long long)blocks_offset(capacity));
		return -EBADMSG;
	}
	want = table_size(capacity);
	if ((uint64_t)size != want) {
		sprobe_table__seterr(err, errlen, "size %llu does not match blocks_offset + "
				     "capacity * block_size = %llu + %u * %u = %llu%s",
				     (unsigned long long)size, (unsigned long long)boff,
				     capacity, block_size, (unsigned long long)want,
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

/* Release a reader: what reader_new() and open_path made. Never unlinks:
 * the file is the writer's (sprobe_table__close() closes any handle; the
 * reader keeps its own release so that it never calls into the writer). */
static void reader_free(struct sprobe_table *t)
{
	if (t->has_os)
		sprobe_table_os__close(&t->os, t->base, t->size, NULL);
	free(t->visited);
	free(t->path);
	free(t);
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
	if (!t) {
		sprobe_table_os__close(&os, (void *)base, size, NULL);
		errno = -err;
		return NULL;
	}
	t->os = os;
	t->has_os = true;
	t->path = strdup(path);
	if (!t->path) {
		reader_free(t);
		errno = ENOMEM;
		return NULL;
	}
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
		reader_free(t);
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
				  uint32_t *retries, uint32_t *blockp)
{
	const struct shm_node *n = node_at(t, idx);

	for (int attempt = 0; attempt < SPROBE_TABLE_READ_RETRIES; attempt++) {
		uint32_t state, nf, k, flags, block;
		const _Atomic uint64_t *src;
		bool bad_block;
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
		block = atomic_load_explicit(&n->block, memory_order_relaxed);
		/* nf and block may be torn or hostile: clamp nf before it sizes
		 * a copy, range-check block before it is an address. */
		k = nf > SPROBE_TABLE_MAX_FRAMES ? SPROBE_TABLE_MAX_FRAMES : nf;
		src = n->frames;
		bad_block = false;
		if (k > TABLE_INLINE_FRAMES) {
			bad_block = block == 0 || block > t->capacity;
			src = bad_block ? NULL : block_at(t, block)->frames;
		}
		if (state == NODE_STATE_LIVE && src) {
			for (uint32_t i = 0; i < k; i++) {
				out->frames[i].pc = atomic_load_explicit(
					&src[2 * i], memory_order_relaxed);
				out->frames[i].fp = atomic_load_explicit(
					&src[2 * i + 1], memory_order_relaxed);
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
		    tid <= 0 || bad_block)
			return READ_INVALID;
		if (blockp)
			*blockp = nf > TABLE_INLINE_FRAMES ? block : 0;
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
	switch (read_node(t, idx, out, &t->stats.retries, NULL)) {
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

struct check_state {
	uint64_t *seen;		/* nodes met on either list */
	uint64_t *bseen;	/* blocks named by live nodes */
	uint32_t watermark, bwatermark;
};

/* Walk one list (live or free) from first, following next or free_next,
 * marking seen nodes and the blocks live nodes name. Returns the count or
 * -errno. */
static int check_walk(const struct sprobe_table *t, uint32_t first,
		      bool free_list, struct check_state *cs,
		      char *err, size_t errlen)
{
	const char *what = free_list ? "free list" : "list";
	uint32_t idx = first, count = 0, block = 0;
	uint64_t *seen = cs->seen;
	uint32_t watermark = cs->watermark;
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
		rr = read_node(t, idx, &tmp, &retries, &block);
		if (rr != (free_list ? READ_FREE : READ_LIVE)) {
			sprobe_table__seterr(err, errlen, "%s: node %u is %s", what, idx,
					     rr == READ_BUSY ? "changing" :
					     rr == READ_INVALID ? "invalid" :
					     free_list ? "live" : "free");
			return rr == READ_BUSY ? -EAGAIN : -EBADMSG;
		}
		/* read_node() range-checked the block against the capacity. */
		if (!free_list && block) {
			if (block >= cs->bwatermark || bit_test(cs->bseen, block)) {
				sprobe_table__seterr(err, errlen, "node %u: block %u %s", idx,
						     block, block >= cs->bwatermark ?
						     "was never taken (above the block "
						     "watermark)" : "is another node's too");
				return -EBADMSG;
			}
			bit_set(cs->bseen, block);
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
	struct check_state cs;
	uint64_t g0, g1;
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
	cs.watermark = wm;
	cs.bwatermark = atomic_load_explicit(&h->block_watermark, memory_order_relaxed);
	if (cs.bwatermark == 0 || cs.bwatermark > t->capacity + 1) {
		sprobe_table__seterr(err, errlen, "block watermark %u out of range 1..%u",
				     cs.bwatermark, t->capacity + 1);
		return -EBADMSG;
	}
	cs.seen = calloc(bitmap_words(t->capacity), sizeof(uint64_t));
	cs.bseen = calloc(bitmap_words(t->capacity), sizeof(uint64_t));
	if (!cs.seen || !cs.bseen) {
		free(cs.seen);
		free(cs.bseen);
		return -ENOMEM;
	}
	nlive = check_walk(t, atomic_load_explicit(&h->head, memory_order_acquire),
			   false, &cs, err, errlen);
	ret = nlive;
	if (nlive >= 0) {
		nfree = check_walk(t, atomic_load_explicit(&h->free_head,
						memory_order_acquire),
				   true, &cs, err, errlen);
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
	free(cs.seen);
	free(cs.bseen);
	atomic_thread_fence(memory_order_acquire);
	g1 = atomic_load_explicit(&h->generation, memory_order_relaxed);
	if (g1 != g0) {
		sprobe_table__seterr(err, errlen, "the writer changed the list: retry");
		return -EAGAIN;
	}
	return ret;
}

