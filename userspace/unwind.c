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
 *     instead of dereferenced;
 *   - registers from the sample (DWARF numbering = libunwind numbering on
 *     x86_64 and aarch64);
 *   - find_proc_info from the module's PT_GNU_EH_FRAME binary-search table
 *     through _U<arch>_dwarf_search_unwind_table (exported by libunwind,
 *     declared in no header).
 *
 * None of this runs inside a suspend window: the samples were copied by the
 * capture backend and every thread runs again when we get here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include <stackprobe/unwind.h>

#include "modules_internal.h"

#if defined(__x86_64__)
#define REG_FP 6
#define REG_SP 7
#define REG_IP 16
#define SEARCH_UNWIND_TABLE _Ux86_64_dwarf_search_unwind_table
#elif defined(__aarch64__)
#define REG_FP 29
#define REG_LR 30
#define REG_SP 31
#define REG_IP 32
#define SEARCH_UNWIND_TABLE _Uaarch64_dwarf_search_unwind_table
#else
#error "stackprobe unwinds x86_64 and aarch64 only"
#endif

int SEARCH_UNWIND_TABLE(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
			unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* The capture backend's frame-pointer walker (userspace/unwind_fp.c): fills
 * s->frames from s->ip/sp/fp (and lr) over the copy. Weak until that file
 * is linked in, so the DWARF path builds and runs on its own. */
int sprobe_unwind_fp(struct sprobe_thread_sample *s) __attribute__((weak));

struct sprobe_unwinder {
	unw_addr_space_t as;
	struct sprobe_modules *mods;
	bool own_mods;
	bool no_dwarf, no_fp;
	uint32_t max_frames;
	uint64_t mods_gen;	/* inventory generation the libunwind cache matches */
	struct sprobe_unwinder_stats st;
	struct sprobe_thread_sample tmp; /* scratch for the frame-pointer tail */
};

/* State of one walk; the accessors' `arg`. */
struct walk {
	struct sprobe_unwinder *u;
	const struct sprobe_thread_sample *s;
	uint64_t lo, hi;	/* the copy: [lo, hi) */
	uint64_t seg_lo, seg_hi; /* last live segment read, [seg_lo, seg_hi) */
	uint64_t regs[SPROBE_NREGS];
	bool no_cfi;		/* find_proc_info found no CFI during this step */
	bool past_copy;		/* a read fell between the copy's end and stack_top */
};

/* ---- accessors ---- */

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			      int need_unwind_info, void *arg)
{
	struct walk *w = arg;
	struct module *mod = sprobe__modules_find(w->u->mods, ip);
	int ret;

	w->u->st.table_lookups++;
	if (!mod || !mod->pub.eh_frame_hdr)
		goto noinfo;
	if (mod->unw.state == 0) {
		/* Check the .eh_frame_hdr once per module: version 1,
		 * eh_frame_ptr pcrel|sdata4, fde_count udata4, table
		 * datarel|sdata4 — the only layout libunwind's remote table
		 * search understands. */
		const uint8_t *h = (const uint8_t *)(uintptr_t)mod->pub.eh_frame_hdr;
		uint32_t count;

		mod->unw.state = -ENOTSUP;
		if (mod->pub.eh_frame_hdr_len >= 12 && h[0] == 1 && h[1] == 0x1b && h[2] == 0x03 &&
		    h[3] == 0x3b) {
			memcpy(&count, h + 8, 4);
			if (12 + (uint64_t)count * 8 <= mod->pub.eh_frame_hdr_len) {
				mod->unw.fde_count = count;
				mod->unw.table = mod->pub.eh_frame_hdr + 12;
				mod->unw.state = 1;
			}
		}
	}
	if (mod->unw.state != 1)
		goto noinfo;

	unw_dyn_info_t di;

	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = mod->pub.start;
	di.end_ip = mod->pub.end;
	di.u.rti.segbase = mod->pub.eh_frame_hdr;
	di.u.rti.table_data = mod->unw.table;
	/* In unw_word_t units; a table entry is two int32 (8 bytes). */
	di.u.rti.table_len = mod->unw.fde_count * 8 / sizeof(unw_word_t);
	mod->unw.lookups++;
	ret = SEARCH_UNWIND_TABLE(as, ip, &di, pi, need_unwind_info, arg);
	if (ret == -UNW_ENOINFO) {
		mod->unw.failures++;
		goto noinfo;
	}
	return ret;
noinfo:
	w->no_cfi = true;
	w->u->st.table_failures++;
	return -UNW_ENOINFO;
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	/* libunwind frees table-format unwind info itself. */
}

static int acc_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
	return -UNW_ENOINFO; /* no JIT registration (_U_dyn_register) support */
}

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct walk *w = arg;
	struct module *mod;

	if (write)
		return -UNW_EINVAL;
	if (addr >= w->lo && w->hi - w->lo >= sizeof(*val) && addr - w->lo <= w->hi - w->lo - sizeof(*val)) {
		memcpy(val, w->s->stack + (addr - w->lo), sizeof(*val));
		return 0;
	}
	if (addr >= w->seg_lo && addr < w->seg_hi && w->seg_hi - addr >= sizeof(*val)) {
		memcpy(val, (const void *)(uintptr_t)addr, sizeof(*val));
		return 0;
	}
	mod = sprobe__modules_find(w->u->mods, addr);
	for (uint32_t i = 0; mod && i < mod->pub.nsegs; i++) {
		const struct sprobe_segment *sg = &mod->pub.segs[i];

		if (!(sg->prot & (SPROBE_SEG_R | SPROBE_SEG_X)) || addr < sg->start ||
		    addr >= sg->end || sg->end - addr < sizeof(*val))
			continue;
		w->seg_lo = sg->start;
		w->seg_hi = sg->end;
		memcpy(val, (const void *)(uintptr_t)addr, sizeof(*val));
		return 0;
	}
	if (addr >= w->hi && addr < w->s->stack_top)
		w->past_copy = true;
	return -UNW_EINVAL;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	struct walk *w = arg;

	if (reg < 0 || reg >= SPROBE_NREGS)
		return -UNW_EBADREG;
	if (write)
		w->regs[reg] = *val;
	else
		*val = w->regs[reg];
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
		     void *arg)
{
	return -UNW_EBADREG; /* a copied stack has no FP state we need */
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	return -UNW_EINVAL; /* we only read; resuming a copy is meaningless */
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
			     unw_word_t *off, void *arg)
{
	return -UNW_ENOINFO; /* names come from symbolize.c, later */
}

static unw_accessors_t accessors = {
	.find_proc_info = acc_find_proc_info,
	.put_unwind_info = acc_put_unwind_info,
	.get_dyn_info_list_addr = acc_get_dyn_info_list_addr,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_get_proc_name,
};

/* ---- public API ---- */

struct sprobe_unwinder *sprobe_unwinder__new(const struct sprobe_unwinder_opts *opts)
{
	struct sprobe_unwinder *u;
	uint32_t cache = 4096;

	if (opts && opts->sz < offsetof(struct sprobe_unwinder_opts, modules)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && opts->sz >= sizeof(*opts) && opts->modules && opts->modules->pid != 0) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->max_frames = SPROBE_MAX_FRAMES;
	if (opts) {
		if (opts->max_frames && opts->max_frames < SPROBE_MAX_FRAMES)
			u->max_frames = opts->max_frames;
		u->no_dwarf = opts->no_dwarf;
		u->no_fp = opts->no_fp_fallback;
		if (opts->cache_size)
			cache = opts->cache_size;
		if (opts->sz >= sizeof(*opts))
			u->mods = opts->modules;
	}
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
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		sprobe_unwinder__free(u);
		errno = ENOMEM;
		return NULL;
	}
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	unw_set_cache_size(u->as, cache, 0);
	return u;
}

void sprobe_unwinder__free(struct sprobe_unwinder *u)
{
	if (!u)
		return;
	if (u->as)
		unw_destroy_addr_space(u->as);
	if (u->own_mods)
		sprobe_modules__free(u->mods);
	free(u);
}

struct sprobe_modules *sprobe_unwinder__modules(struct sprobe_unwinder *u)
{
	return u ? u->mods : NULL;
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
 * Frame-pointer walk from (ip, sp, fp[, lr]) appended to s->frames, whose
 * last entry is already ip. first: ip is the interrupted frame, so the
 * aarch64 link register may still hold its caller.
 */
static enum sprobe_unwind_stop fp_tail(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
				       uint64_t ip, uint64_t sp, uint64_t fp, bool first)
{
	struct sprobe_thread_sample *t = &u->tmp;

	if (!sprobe_unwind_fp)
		return SPROBE_UNWIND_BAD;
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

int sprobe_unwinder__unwind(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
			    enum sprobe_unwind_stop *why)
{
	enum sprobe_unwind_stop stop = SPROBE_UNWIND_BAD;
	struct walk w;
	unw_cursor_t c;
	uint64_t prev_sp = 0, prev_ip = 0;
	unsigned same_sp = 0;

	if (!u || !s || s->stage == SPROBE_STAGE_EMPTY || !s->stack || !s->stack_len)
		return -EINVAL;
	if (sprobe_modules__generation(u->mods) != u->mods_gen) {
		/* Code may now live where other code was: forget cached
		 * register states. */
		unw_flush_cache(u->as, 0, 0);
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
	if (u->no_dwarf) {
		stop = fp_tail(u, s, s->ip, s->sp, s->fp, true);
		goto out;
	}
	if (unw_init_remote(&c, u->as, &w) < 0)
		goto out;
	prev_ip = s->ip;
	prev_sp = s->sp;
	for (;;) {
		unw_word_t ip = 0, sp = 0, fp = 0;
		int ret;

		if (s->nframes >= u->max_frames) {
			stop = SPROBE_UNWIND_MAX_FRAMES;
			break;
		}
		unw_get_reg(&c, REG_FP, &fp);
		w.no_cfi = false;
		ret = unw_step(&c);
		if (w.no_cfi) {
			/* No CFI for this frame: libunwind may have guessed;
			 * we switch to frame pointers instead, and say so. */
			if (u->no_fp)
				stop = SPROBE_UNWIND_BAD;
			else
				stop = fp_tail(u, s, prev_ip, prev_sp, fp, s->nframes == 1);
			break;
		}
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
		prev_ip = ip;
		prev_sp = sp;
	}
out:
	s->stage = SPROBE_STAGE_UNWOUND;
	u->st.frames += s->nframes;
	u->st.stops[stop]++;
	if (why)
		*why = stop;
	return (int)s->nframes;
}
