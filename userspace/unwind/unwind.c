/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Deferred unwinding of copied stacks (see include/stackprobe/unwind.h).
 *
 * libunwind's remote interface (not UNW_LOCAL_ONLY: the local library reads
 * saved registers from live memory and would never look at our copy) over
 * accessors that serve:
 *   - stack memory from the copy, [stack_addr, stack_addr + stack_len);
 *   - code and unwind tables from live memory, but only inside a readable
 *     segment of a module in the inventory, so a wild address is refused
 *     instead of dereferenced, and only while that module is pinned (below);
 *   - registers from the sample (DWARF numbering = libunwind numbering on
 *     x86_64 and aarch64);
 *   - find_proc_info from the module's PT_GNU_EH_FRAME binary-search table
 *     through _U<arch>_dwarf_search_unwind_table (exported by libunwind,
 *     declared in no header).
 *
 * None of this runs inside a suspend window: the samples were copied by the
 * capture backend and every thread runs again when we get here.
 *
 * Live reads go through access.c: the accessors, and the pins that keep a
 * module mapped while it is read (why and how: there).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include <stackprobe/unwind.h>

#include "backends/frames.h"
#include "userspace/common/fds.h"
#include "userspace/symbols/modules_internal.h"

#include "userspace/unwind/unwind_internal.h"
#include "userspace/unwind/unwind_prepare.h"

/* ---- public API ---- */

struct sprobe_unwinder *sprobe_unwinder__new(const struct sprobe_unwinder_opts *opts)
{
	struct sprobe_unwinder *u;

	if (opts && opts->sz < offsetof(struct sprobe_unwinder_opts, modules)) {
		errno = EINVAL;
		return NULL;
	}
	/* Live reads go to the inventory's segments: they must be this
	 * process's; another process's are read from its files; a data
	 * file's inventory (empty mode) has neither. */
	if (opts && opts->sz >= sizeof(*opts) && opts->modules && opts->modules->empty_mode) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->max_frames = SPROBE_MAX_FRAMES;
	u->tmp.frames = u->tmp_frames;
	u->tmp.frames_cap = SPROBE_MAX_FRAMES;
	if (opts) {
		if (opts->max_frames && opts->max_frames < SPROBE_MAX_FRAMES)
			u->max_frames = opts->max_frames;
		u->no_dwarf = opts->no_dwarf;
		u->no_fp = opts->no_fp_fallback;
		if (opts->sz >= sizeof(*opts))
			u->mods = opts->modules;
	}
	u->foreign = u->mods && u->mods->pid != 0;
	if (!u->mods) {
		u->mods = sprobe_modules__new(NULL);
		if (!u->mods) {
			int e = errno;

			free(u);
			errno = e;
			return NULL;
		}
		u->own_mods = true;
	}
	u->mods_gen = sprobe_modules__generation(u->mods);
	u->round = 1; /* a fresh module's stamp (0) never matches */
	/* libunwind's address space at the first walk (unwinder_as()): an
	 * agent whose threads never run (cpu mode) never pays for it. */
	return u;
}

/* libunwind's address space, made once: 0, -ENOSYS (no libunwind) or
 * -ENOMEM. libunwind itself (libunwind_dl.h), its 26 KiB (the cache calloc
 * clears) and its initialisation wait for the first walk that needs CFI
 * (docs/PERFORMANCE.md, "Memory, what does not grow with threads"). */
static int unwinder_as(struct sprobe_unwinder *u)
{
	if (u->as)
		return 0;
	if (sprobe__libunwind_load() != 0)
		return -ENOSYS;
	/* The first calls initialise libunwind, which opens a pipe it keeps
	 * for the process's life: out of the program's numbers (fds.h). */
	sprobe_fd__foreign_begin();
	u->as = unw_create_addr_space(&sprobe_unw__accessors, 0);
	/* Rows are cached per module (struct unw_cache); libunwind's own
	 * cache would only add a lock and two sigprocmask calls per step.
	 * (This call is the one that initialises libunwind.) */
	if (u->as)
		unw_set_caching_policy(u->as, UNW_CACHE_NONE);
	sprobe_fd__foreign_end();
	return u->as ? 0 : -ENOMEM;
}

int sprobe__unwinder_prepare(struct sprobe_unwinder *u)
{
	return u ? unwinder_as(u) : -EINVAL;
}

void sprobe_unwinder__free(struct sprobe_unwinder *u)
{
	if (!u)
		return;
	if (u->as)
		unw_destroy_addr_space(u->as);
	sprobe_unw__round_end(u); /* no pin outlives a call; this is for safety */
	free(u->pins);
	if (u->own_mods)
		sprobe_modules__free(u->mods);
	free(u->short_idx);
	free(u);
}

struct sprobe_modules *sprobe_unwinder__modules(struct sprobe_unwinder *u)
{
	return u ? u->mods : NULL;
}

int sprobe_unwinder__flush(struct sprobe_unwinder *u)
{
	if (!u)
		return -EINVAL;
	for (size_t i = 0; i < u->mods->n; i++) {
		struct unw_cache *uc = &u->mods->mods[i]->unw;

		free(uc->rows);
		free(uc->blobs);
		free(uc->no_cfi);
		free(uc->sig);
		free(uc->synth);
		free(uc->synth_eh);
		memset(uc, 0, sizeof(*uc)); /* the pin stamp too: held pins stay
					     * in u->pins until the round ends */
	}
	return 0;
}

int sprobe_unwinder__stats(const struct sprobe_unwinder *u, struct sprobe_unwinder_stats *out)
{
	if (!u || !out)
		return -EINVAL;
	*out = u->st;
	return 0;
}

const char *sprobe_unwind_stop__str(enum sprobe_unwind_stop why)
{
	switch (why) {
	case SPROBE_UNWIND_END: return "end";
	case SPROBE_UNWIND_FP_END: return "fp-end";
	case SPROBE_UNWIND_TRUNCATED: return "truncated";
	case SPROBE_UNWIND_BAD: return "bad";
	case SPROBE_UNWIND_LOOP: return "loop";
	case SPROBE_UNWIND_MAX_FRAMES: return "max-frames";
	default: return "?";
	}
}

static void push(struct sprobe_unwinder *u, struct sprobe_thread_sample *s, uint64_t pc,
		 uint64_t cfa, uint32_t method)
{
	s->frames[s->nframes++] = (struct sprobe_frame){ .pc = pc, .fp = cfa, .method = method };
	u->st.frames_by_method[method < 5 ? method : 0]++;
}

/*
 * A frame past the first whose pc is not a return address: the sigreturn
 * trampoline (a signal handler "returns" to its first instruction) and
 * the pc the signal interrupted. Every frame past the first is named at
 * pc - 1 (sprobe_frame_lookup_pc(), the data file's and the node table's
 * readers), so such a frame is stored one past its pc: pc - 1 is then the
 * instruction itself (__restore_rt, not the padding before it).
 */
static void exact_frame(struct sprobe_frame *f)
{
	f->pc += 1;
}

/*
 * Frame-pointer walk from (ip, sp, fp[, lr]) appended to s->frames, whose
 * last entry is already ip. first: ip is the interrupted frame, so the
 * aarch64 link register may still hold its caller.
 */
static enum sprobe_unwind_stop fp_tail(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
				       uint64_t ip, uint64_t sp, uint64_t fp, bool first)
{
	struct sprobe_thread_sample *t = &u->tmp;

	memcpy(t, s, offsetof(struct sprobe_thread_sample, nframes));
	t->ip = t->regs[REG_IP] = ip;
	t->sp = t->regs[REG_SP] = sp;
	t->fp = t->regs[REG_FP] = fp;
	if (!first) {
		t->has_lr = false;
		t->lr = 0;
	}
	t->nframes = 0;
	if (sprobe_unwind_fp(t) < 0 || t->nframes == 0)
		return SPROBE_UNWIND_BAD;
	for (uint32_t i = 1; i < t->nframes; i++) {
		if (s->nframes >= u->max_frames)
			return SPROBE_UNWIND_MAX_FRAMES;
		push(u, s, t->frames[i].pc, t->frames[i].fp, t->frames[i].method);
	}
	return s->nframes >= u->max_frames ? SPROBE_UNWIND_MAX_FRAMES : SPROBE_UNWIND_FP_END;
}

/*
 * Frame pointers from the interrupted frame (s->frames holds only its ip,
 * in module mod or NULL). At the first instruction of Go's
 * runtime.asyncPreempt the frame record is not pushed yet: the preempted
 * pc is the word at sp and the frame pointer is still the preempted
 * function's (go_preempt.c says why captures land there). That pc is a
 * frame of its own, and the walk goes on from it with the same frame
 * pointer, as from a function that has not pushed its record.
 */
static enum sprobe_unwind_stop fp_from_ip(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
					  struct module *mod, uint64_t ip, uint64_t sp, uint64_t fp)
{
	uint64_t ret;

	if (s->nframes < u->max_frames && sprobe_unw__go_preempt_entry(mod, ip) &&
	    sp >= s->stack_addr && s->stack_len >= sizeof(ret) &&
	    sp - s->stack_addr <= s->stack_len - sizeof(ret)) {
		memcpy(&ret, s->stack + (sp - s->stack_addr), sizeof(ret));
		if (ret >= 4096) {
			push(u, s, ret, sp + sizeof(ret), SPROBE_FRAME_FP);
			return fp_tail(u, s, ret, sp + sizeof(ret), fp, false);
		}
	}
	return fp_tail(u, s, ip, sp, fp, true);
}

/* ---- per-module cache of CFI rows ---- */

static const struct unw_row *rows_find(const struct unw_cache *uc, uint64_t ip)
{
	size_t lo = 0, hi = uc->nrows;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (uc->rows[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && ip < uc->rows[lo - 1].end)
		return &uc->rows[lo - 1];
	return NULL;
}

/* Remember ips the .eh_frame_hdr search found nothing for, so a hot
 * no-CFI frame does not repeat the search (direct-mapped: a collision only
 * costs a repeated search). */
static size_t no_cfi_slot(uint64_t ip)
{
	return (size_t)((ip * 0x9e3779b97f4a7c15ull) >> 56) % UNW_NO_CFI_SLOTS;
}

static bool no_cfi_has(const struct unw_cache *uc, uint64_t ip)
{
	return uc->no_cfi && uc->no_cfi[no_cfi_slot(ip)] == ip;
}

static void no_cfi_add(struct unw_cache *uc, uint64_t ip)
{
	if (!uc->no_cfi)
		uc->no_cfi = calloc(UNW_NO_CFI_SLOTS, sizeof(*uc->no_cfi));
	if (uc->no_cfi)
		uc->no_cfi[no_cfi_slot(ip)] = ip;
}

struct fill {
	struct module *mod;
	int err;
};

/* unw_reg_states_iterate() callback: one row of the procedure's CFI table.
 * The blob is libunwind's own register-state record, replayed later with
 * unw_apply_reg_state(); we copy it and never look inside. */
static int row_cb(void *token, void *data, size_t size, unw_word_t start, unw_word_t end)
{
	struct fill *f = token;
	struct unw_cache *uc = &f->mod->unw;
	size_t pos;

	if (!uc->blob_size)
		uc->blob_size = size;
	if (size != uc->blob_size || end <= start) {
		f->err = -EINVAL;
		return -UNW_EINVAL;
	}
	if (rows_find(uc, start))
		return 0; /* already cached (a procedure seen via another ip) */
	if (uc->nblobs == uc->cap_blobs) {
		size_t cap = uc->cap_blobs ? uc->cap_blobs * 2 : 64;
		uint8_t *b = realloc(uc->blobs, cap * size);

		if (!b)
			goto nomem;
		uc->blobs = b;
		uc->cap_blobs = cap;
	}
	if (uc->nrows == uc->cap_rows) {
		size_t cap = uc->cap_rows ? uc->cap_rows * 2 : 64;
		struct unw_row *r = realloc(uc->rows, cap * sizeof(*r));

		if (!r)
			goto nomem;
		uc->rows = r;
		uc->cap_rows = cap;
	}
	memcpy(uc->blobs + uc->nblobs * size, data, size);
	/* Insert in start order (cold path: a memmove is fine). */
	for (pos = uc->nrows; pos > 0 && uc->rows[pos - 1].start > start; pos--)
		;
	memmove(&uc->rows[pos + 1], &uc->rows[pos], (uc->nrows - pos) * sizeof(*uc->rows));
	uc->rows[pos] = (struct unw_row){ start, end, uc->nblobs++ };
	uc->nrows++;
	return 0;
nomem:
	f->err = -ENOMEM;
	return -UNW_ENOMEM;
}

/*
 * Cold path: have libunwind find the procedure containing ip (our
 * find_proc_info, the .eh_frame_hdr search) and run its CFI program, then
 * keep every row. Returns the row for ip, or NULL (no CFI: w->no_cfi set).
 */
static const struct unw_row *cold_fill(struct sprobe_unwinder *u, struct walk *w,
				       struct module *mod, uint64_t ip)
{
	struct walk w2 = *w;
	struct fill f = { mod, 0 };
	unw_cursor_t c2;

	w2.regs[REG_IP] = ip;
	w2.no_cfi = false;
	/* Another process's CFI may be ours (access_file.c): readable for
	 * the whole fill, the CFI program's run included. */
	if (u->foreign)
		w2.synth = mod;
	if (unwinder_as(u) != 0 || unw_init_remote(&c2, u->as, &w2) < 0)
		return NULL;
	unw_reg_states_iterate(&c2, row_cb, &f);
	if (w2.no_cfi)
		w->no_cfi = true;
	if (w2.unpinned)
		w->unpinned = true;
	return rows_find(&mod->unw, ip);
}

/*
 * Does the code at ip start a sigreturn trampoline? aarch64: libunwind
 * reads the instruction at ip. x86_64: libunwind answers from the state
 * its own unw_step() leaves, which this walk never runs (it applies
 * cached rows), so the code is read here: glibc's __restore_rt and the
 * kernel's are "mov $15, %rax; syscall" (rt_sigreturn).
 */
static bool sigreturn_code(struct walk *w, unw_cursor_t *c, uint64_t ip)
{
#if defined(__x86_64__)
	unw_word_t w0, w1;

	(void)c;
	if (sprobe_unw__accessors.access_mem(w->u->as, ip, &w0, 0, w) < 0 ||
	    sprobe_unw__accessors.access_mem(w->u->as, ip + 8, &w1, 0, w) < 0)
		return false;
	return w0 == 0x0f0000000fc0c748ull && (w1 & 0xff) == 0x05;
#else
	(void)w;
	(void)ip;
	return unw_is_signal_frame(c) > 0;
#endif
}

/*
 * Is the frame at ip (the cursor's) a sigreturn trampoline? The answer
 * reads the code at ip: it is cached per ip with the module (code never
 * changes while the module lives), so the warm path reads no module
 * memory and pins nothing. A module that cannot be pinned answers "no",
 * uncached.
 */
static bool signal_frame(struct sprobe_unwinder *u, struct walk *w, unw_cursor_t *c, uint64_t ip)
{
	struct module *mod = sprobe__modules_find(u->mods, ip);
	struct unw_sig *slot;
	bool sig;

	if (!mod)
		return false;
	if (mod->unw.sig) {
		slot = &mod->unw.sig[no_cfi_slot(ip)];
		if (slot->ip == ip)
			return slot->is_sig;
	}
	if (!sprobe_unw__mod_readable(u, mod))
		return false;
	sig = sigreturn_code(w, c, ip);
	if (!mod->unw.sig)
		mod->unw.sig = calloc(UNW_NO_CFI_SLOTS, sizeof(*mod->unw.sig));
	if (mod->unw.sig)
		mod->unw.sig[no_cfi_slot(ip)] = (struct unw_sig){ ip, sig };
	return sig;
}

/* One walk; the caller has opened the round. */
static int unwind_one(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
		      enum sprobe_unwind_stop *why)
{
	enum sprobe_unwind_stop stop = SPROBE_UNWIND_BAD;
	struct walk w;
	unw_cursor_t c;
	uint64_t prev_sp = 0, prev_ip = 0;
	unsigned same_sp = 0;
	bool exact = true; /* frame 0's ip is exact; callers' are return addresses */
	bool first_only = false; /* the last step used Go's CFI (cfi_first_only) */

	if (sprobe_modules__generation(u->mods) != u->mods_gen) {
		/* Modules were replaced: their row caches went with them. */
		u->mods_gen = sprobe_modules__generation(u->mods);
		u->st.module_refreshes++;
	}
	s->nframes = 0;
	u->st.samples++;

	memset(&w, 0, sizeof(w));
	w.u = u;
	w.s = s;
	w.lo = s->stack_addr;
	w.hi = s->stack_addr + s->stack_len;
	memcpy(w.regs, s->regs, sizeof(w.regs));
	w.regs[REG_IP] = s->ip;
	w.regs[REG_SP] = s->sp;
	w.regs[REG_FP] = s->fp;
#ifdef REG_LR
	if (s->has_lr)
		w.regs[REG_LR] = s->lr;
#endif

	if (s->ip == 0)
		goto out;
	push(u, s, s->ip, s->sp, SPROBE_FRAME_IP);
	/* Without libunwind (not installed): frame pointers, as no_dwarf. */
	if (u->no_dwarf || unwinder_as(u) != 0) {
		stop = fp_from_ip(u, s, sprobe__modules_find(u->mods, s->ip), s->ip, s->sp, s->fp);
		goto out;
	}
	if (unw_init_remote(&c, u->as, &w) < 0)
		goto out;
	prev_ip = s->ip;
	prev_sp = s->sp;
	for (;;) {
		uint64_t look = exact ? prev_ip : prev_ip - 1;
		struct module *mod = sprobe__modules_find(u->mods, look);
		const struct unw_row *row = NULL;
		unw_word_t ip = 0, sp = 0;
		bool sig;
		int ret;

		if (s->nframes >= u->max_frames) {
			stop = SPROBE_UNWIND_MAX_FRAMES;
			break;
		}
		/* Warm path: the row is cached with the module; no lookup, no
		 * lock, no system call. */
		/* Go's CFI (cfi_first_only) unwinds the interrupted frame
		 * only: frame pointers from its caller on. */
		if (mod && mod->unw.cfi_first_only && s->nframes > 1)
			mod = NULL;
		if (mod) {
			row = rows_find(&mod->unw, look);
			if (!row && !no_cfi_has(&mod->unw, look)) {
				w.unpinned = false;
				row = cold_fill(u, &w, mod, look);
				/* "No CFI" only when the module could be read:
				 * an unloaded one taught us nothing. */
				if (!row && !w.unpinned)
					no_cfi_add(&mod->unw, look);
			}
		}
		if (!row) {
			/* No CFI here (JIT code, assembly without CFI, a
			 * module without .eh_frame_hdr): frame pointers take
			 * over from this frame, and the frames say so. */
			unw_word_t fp = 0;

			unw_get_reg(&c, REG_FP, &fp);
			/* After a frame whose rules leave the frame pointer
			 * as it was (Go's), a frame pointer below the
			 * caller's sp is that frame's own record: the
			 * caller's is the one saved there. */
			if (first_only && fp < prev_sp && fp >= w.lo && w.hi - fp >= 8)
				memcpy(&fp, s->stack + (fp - w.lo), 8);
			u->st.table_failures += mod ? 0 : 1;
			if (u->no_fp)
				stop = SPROBE_UNWIND_BAD;
			else if (s->nframes == 1)
				stop = fp_from_ip(u, s, mod, prev_ip, prev_sp, fp);
			else
				stop = fp_tail(u, s, prev_ip, prev_sp, fp, false);
			break;
		}
		first_only = mod->unw.cfi_first_only;
		/* A sigreturn trampoline's caller was interrupted, not
		 * calling: its ip is exact. */
		sig = signal_frame(u, &w, &c, prev_ip);
		if (sig && s->nframes > 1)
			exact_frame(&s->frames[s->nframes - 1]);
		ret = unw_apply_reg_state(&c, mod->unw.blobs + row->blob * mod->unw.blob_size);
		if (ret == 0) {
			stop = SPROBE_UNWIND_END;
			break;
		}
		if (ret < 0) {
			stop = w.past_copy ? SPROBE_UNWIND_TRUNCATED : SPROBE_UNWIND_BAD;
			break;
		}
		unw_get_reg(&c, UNW_REG_IP, &ip);
		unw_get_reg(&c, UNW_REG_SP, &sp);
		if (ip == 0) {
			stop = SPROBE_UNWIND_END;
			break;
		}
		if (sp < prev_sp || (sp == prev_sp && (ip == prev_ip || ++same_sp > 2))) {
			stop = SPROBE_UNWIND_LOOP;
			break;
		}
		if (sp != prev_sp)
			same_sp = 0;
		push(u, s, ip, sp, SPROBE_FRAME_DWARF);
		if (sig)
			exact_frame(&s->frames[s->nframes - 1]);
		prev_ip = ip;
		prev_sp = sp;
		exact = sig;
	}
out:
	s->stage = SPROBE_STAGE_UNWOUND;
	u->st.frames += s->nframes;
	u->st.stops[stop]++;
	if (why)
		*why = stop;
	return (int)s->nframes;
}

/* One walk into the sample's frame storage (backends/frames.h): through
 * walk_frames, then kept in the snapshot's storage, or straight into the
 * caller's array (whose length then bounds the walk). */
static int unwind_stored(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
			 enum sprobe_unwind_stop *why)
{
	struct sprobe_frames_walk w;
	uint32_t max = sprobe__frames_begin(s, u->walk_frames, &w), keep = u->max_frames;
	int ret;

	if (max < u->max_frames)
		u->max_frames = max;
	ret = max ? unwind_one(u, s, why) : 0;
	u->max_frames = keep;
	if (sprobe__frames_end(s, &w) < 0)
		ret = (int)s->nframes; /* cut to what the storage holds */
	return ret;
}

int sprobe_unwinder__unwind(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
			    enum sprobe_unwind_stop *why)
{
	int ret;

	if (!u || !s || s->stage == SPROBE_STAGE_EMPTY || !s->stack || !s->stack_len)
		return -EINVAL;
	if (u->in_round)
		return unwind_stored(u, s, why);
	/* A round of its own: pins taken during this walk end with it. */
	u->in_round = true;
	ret = unwind_stored(u, s, why);
	sprobe_unw__round_end(u);
	return ret;
}

/* Did the walk of a zero-pause sample get a whole stack? END is the
 * thread's start; MAX_FRAMES and a copy the cap cut short would end the
 * same way through the signal path. Anything else (BAD: a frame needed a
 * register the syscall file does not give; FP_END: no CFI and no frame
 * pointer) is the register gap. */
static bool zp_walk_complete(const struct sprobe_thread_sample *t, enum sprobe_unwind_stop why)
{
	return why == SPROBE_UNWIND_END || why == SPROBE_UNWIND_MAX_FRAMES ||
	       (why == SPROBE_UNWIND_TRUNCATED && t->truncated);
}

int sprobe_unwinder__unwind_snapshot(struct sprobe_unwinder *u, struct sprobe_snapshot *snap)
{
	uint32_t n;
	int ret, done = 0;

	if (!u || !snap)
		return -EINVAL;
	u->nshort = 0;
	/* Outside any window: the loader lock is free to take. A failed
	 * refresh leaves the previous inventory, still the best we have. */
	ret = sprobe_modules__refresh(u->mods);
	(void)ret;
	n = sprobe_snapshot__nthreads(snap);
	if (n > u->short_cap) {
		uint32_t *p = realloc(u->short_idx, n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		u->short_idx = p;
		u->short_cap = n;
	}
	/* One round for the whole snapshot: each module is pinned at most
	 * once, and released after the last thread. */
	u->in_round = true;
	/* Only the slots the capture visited: the others were carried on,
	 * walked when they were captured. */
	const uint32_t *touched;
	uint32_t nv = sprobe_snapshot__touched(snap, &touched);

	if (touched)
		done = (int)(n - nv); /* carried on: walked, counted as such */

	for (uint32_t k = 0; k < nv; k++) {
		uint32_t i = touched ? touched[k] : k;

		/* Carried forward: walked when it was captured, and not
		 * read here (one cold cache line per thread and round). */
		if (sprobe_snapshot__carried(snap, i) != SPROBE_CARRY_NONE) {
			done++;
			continue;
		}
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);
		enum sprobe_unwind_stop why = SPROBE_UNWIND_BAD;

		if (!t || t->stage == SPROBE_STAGE_EMPTY)
			continue;
		if (t->stage == SPROBE_STAGE_UNWOUND) {
			/* A zero-pause copy of a thread that has not run since
			 * its last walk, which was complete (the capture keeps
			 * it; a short one was re-captured with a signal). */
			done++;
			continue;
		}
		if (sprobe_unwinder__unwind(u, t, &why) < 0)
			continue;
		done++;
		if (t->method != SPROBE_METHOD_ZERO_PAUSE)
			continue;
		u->st.zp_walks++;
		if (!zp_walk_complete(t, why)) {
			u->st.zp_short++;
			u->short_idx[u->nshort++] = i;
		}
	}
	sprobe_unw__round_end(u);
	sprobe_snapshot__set_frames_resolved(snap, true);
	return done;
}

uint32_t sprobe_unwinder__short_walks(const struct sprobe_unwinder *u, const uint32_t **idx)
{
	if (idx)
		*idx = u && u->nshort ? u->short_idx : NULL;
	return u ? u->nshort : 0;
}
