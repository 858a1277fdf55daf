/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The unwinder's live-memory side: libunwind's remote accessors, and the
 * pins that keep a module mapped while it is read.
 *
 * Pins. Another thread may dlclose() a library between the inventory
 * refresh and the read, or during it; reading its unmapped pages would
 * fault the probe thread. So before the first live read of a module in a
 * round (one sprobe_unwinder__unwind() call, or a whole
 * sprobe_unwinder__unwind_snapshot()), the module is pinned:
 * dlopen(path, RTLD_NOLOAD) takes a reference only if the object is still
 * loaded, and dlinfo(RTLD_DI_LINKMAP)'s l_addr must still be the inventory's
 * load bias (the same object at the same place, not a namesake loaded
 * elsewhere). The loader's lock orders this against dlclose(): once we hold
 * the reference, nothing unmaps the object until the round ends and drops
 * it (dlclose). A module that cannot be pinned is not read that round: no
 * CFI search, no code read; its cached rows (copies) still serve. The main
 * program, the vDSO, the loader and the object holding this code are never
 * unmapped while we run and need no pin (modules.c, "permanent"). The warm path
 * (cached rows) reads no module memory on x86_64 at all; on aarch64 the
 * sigreturn check reads the code at ip, so its answer is cached per ip.
 * dlopen/dlclose take the loader lock (dl_load_lock, which fork() resets in
 * the child), never the dl_iterate_phdr lock.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include <stackprobe/unwind.h>

#include "userspace/common/dl_table.h"
#include "userspace/common/fds.h"
#include "userspace/unwind/unwind_internal.h"

/* ---- pins ---- */

/* Take a reference on mod's object if it is still loaded where the
 * inventory says. Returns 0 or -errno (ENOENT unloaded or moved, ENOMEM). */
static int pin(struct sprobe_unwinder *u, struct module *mod)
{
	struct link_map *lm = NULL;
	void *h;

	if (u->npins == u->cap_pins) {
		size_t cap = u->cap_pins ? u->cap_pins * 2 : 16;
		void **p = realloc(u->pins, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		u->pins = p;
		u->cap_pins = cap;
	}
	/* RTLD_NOLOAD: never loads anything (and runs no constructor); the
	 * loader lock orders this against a concurrent dlclose(). */
	h = sprobe__dl_open(mod->path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return -ENOENT;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || (uint64_t)lm->l_addr != mod->pub.bias) {
		dlclose(h);
		return -ENOENT;
	}
	u->pins[u->npins++] = h;
	return 0;
}

/*
 * May mod's segments be read live now? Decided once per module per round:
 * the main program and the vDSO always; a library if pin() holds it.
 */
bool sprobe_unw__mod_readable(struct sprobe_unwinder *u, struct module *mod)
{
	struct unw_cache *uc = &mod->unw;

	if (u->foreign)
		return sprobe_unw__file_readable(u, mod); /* files need no pin */
	if (mod->permanent)
		return true;
	if (uc->pin_owner != u || uc->pin_round != u->round) {
		uc->pin_owner = u;
		uc->pin_round = u->round;
		uc->pin_state = pin(u, mod) == 0 ? 1 : -1;
		if (uc->pin_state > 0)
			u->st.pins++;
		else
			u->st.pin_failures++;
	}
	return uc->pin_state > 0;
}

/* End the round: drop every pin. A library that was dlclose()d meanwhile
 * is unloaded here, by its last reference (its destructors run now, on
 * this thread). */
void sprobe_unw__round_end(struct sprobe_unwinder *u)
{
	for (size_t i = 0; i < u->npins; i++)
		dlclose(u->pins[i]);
	u->npins = 0;
	u->round++;
	u->in_round = false;
}

/* ---- accessors ---- */

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			      int need_unwind_info, void *arg)
{
	struct walk *w = arg;
	struct module *mod = sprobe__modules_find(w->u->mods, ip);
	bool foreign = w->u->foreign;
	uint64_t hdr, hdr_len, lo, hi;
	int ret;

	w->u->st.table_lookups++;
	if (!mod || (!foreign && !mod->pub.eh_frame_hdr))
		goto noinfo;
	if (!sprobe_unw__mod_readable(w->u, mod)) {
		/* Unloaded since the refresh (or, another process's, no
		 * file): nothing of it can be read, and nothing is concluded
		 * about its CFI. */
		w->unpinned = true;
		goto noinfo;
	}
	/* Another process's index comes from its file's program headers,
	 * or was built from its .eh_frame (access_file.c). */
	hdr = foreign ? mod->unw.eh_hdr : mod->pub.eh_frame_hdr;
	hdr_len = foreign ? mod->unw.eh_hdr_len : mod->pub.eh_frame_hdr_len;
	if (foreign && !hdr && mod->unw.synth) {
		unw_dyn_info_t di;

		memset(&di, 0, sizeof(di));
		di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
		di.start_ip = mod->pub.start;
		di.end_ip = mod->pub.end;
		di.u.rti.segbase = mod->unw.synth_base;
		di.u.rti.table_data = UNW_SYNTH_ADDR;
		di.u.rti.table_len = mod->unw.synth_count * 8 / sizeof(unw_word_t);
		mod->unw.lookups++;
		const struct module *outer = w->synth;

		w->synth = mod;
		ret = SEARCH_UNWIND_TABLE(as, ip, &di, pi, need_unwind_info, arg);
		w->synth = outer;
		if (ret == -UNW_ENOINFO) {
			mod->unw.failures++;
			goto noinfo;
		}
		return ret;
	}
	if (!hdr)
		goto noinfo;
	if (mod->unw.state == 0) {
		/* Check the .eh_frame_hdr once per module: version 1,
		 * eh_frame_ptr pcrel|sdata4, fde_count udata4, table
		 * datarel|sdata4 — the only layout libunwind's remote table
		 * search understands. */
		const uint8_t *h = foreign ? sprobe_unw__file_at(mod, hdr, 12, &lo, &hi)
					   : (const uint8_t *)(uintptr_t)hdr;
		uint32_t count;

		mod->unw.state = -ENOTSUP;
		if (h && hdr_len >= 12 && h[0] == 1 && h[1] == 0x1b && h[2] == 0x03 && h[3] == 0x3b) {
			memcpy(&count, h + 8, 4);
			if (12 + (uint64_t)count * 8 <= hdr_len) {
				mod->unw.fde_count = count;
				mod->unw.table = hdr + 12;
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
	di.u.rti.segbase = hdr;
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

/* Reads foreign memory on purpose (another thread's stack copy, other
 * modules' read-only segments), each checked against known bounds first:
 * not for AddressSanitizer's instrumentation. */
__attribute__((no_sanitize_address))
static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct walk *w = arg;
	struct module *mod;

	if (write)
		return -UNW_EINVAL;
	/* The synthetic search table and .eh_frame of the module whose CFI
	 * is being read (access_file.c): our memory, not the target's. A
	 * word straddling the end is zero-filled (libunwind reads aligned
	 * words). */
	if (w->synth) {
		const struct unw_cache *uc = &w->synth->unw;
		const uint8_t *src = NULL;
		uint64_t off = 0, len = 0;

		if (addr >= UNW_SYNTH_ADDR && addr - UNW_SYNTH_ADDR < uc->synth_count * 8) {
			src = (const uint8_t *)uc->synth;
			off = addr - UNW_SYNTH_ADDR;
			len = uc->synth_count * 8;
		} else if (uc->synth_eh && addr >= uc->synth_base &&
			   addr - uc->synth_base < uc->synth_eh_len) {
			src = uc->synth_eh;
			off = addr - uc->synth_base;
			len = uc->synth_eh_len;
		}
		if (src) {
			*val = 0;
			memcpy(val, src + off, len - off < sizeof(*val) ? len - off : sizeof(*val));
			return 0;
		}
	}
	if (addr >= w->lo && w->hi - w->lo >= sizeof(*val) && addr - w->lo <= w->hi - w->lo - sizeof(*val)) {
		memcpy(val, w->s->stack + (addr - w->lo), sizeof(*val));
		return 0;
	}
	if (addr >= w->seg_lo && addr < w->seg_hi && w->seg_hi - addr >= sizeof(*val)) {
		memcpy(val, w->seg_base + (addr - w->seg_lo), sizeof(*val));
		return 0;
	}
	mod = sprobe__modules_find(w->u->mods, addr);
	const struct module *owner = mod;

	if (mod && !sprobe_unw__mod_readable(w->u, mod)) {
		w->unpinned = true;
		return -UNW_EINVAL;
	}
	if (mod && w->u->foreign) {
		/* Another process: the file's bytes of a read-only segment. */
		uint64_t lo, hi;
		const uint8_t *p = sprobe_unw__file_at(mod, addr, sizeof(*val), &lo, &hi);

		if (p) {
			w->seg_lo = lo;
			w->seg_hi = hi;
			w->seg_base = p - (addr - lo);
			memcpy(val, p, sizeof(*val));
			return 0;
		}
		mod = NULL;
	}
	for (uint32_t i = 0; mod && i < mod->pub.nsegs; i++) {
		const struct sprobe_segment *sg = &mod->pub.segs[i];

		/* Code and unwind tables live in read-only segments; data
		 * segments are never needed, and another thread may be
		 * writing them. The module is pinned (or permanent) for the
		 * round, so the segment stays mapped until sprobe_unw__round_end(). */
		if (!(sg->prot & (SPROBE_SEG_R | SPROBE_SEG_X)) || (sg->prot & SPROBE_SEG_W) ||
		    addr < sg->start ||
		    addr >= sg->end || sg->end - addr < sizeof(*val))
			continue;
		w->seg_lo = sg->start;
		w->seg_hi = sg->end;
		w->seg_base = (const uint8_t *)(uintptr_t)sg->start;
		memcpy(val, (const void *)(uintptr_t)addr, sizeof(*val));
		return 0;
	}
	/* A word of a module's writable segment: what libunwind reads there is
	 * a CIE's personality routine pointer (augmentation 'P' encoded
	 * DW_EH_PE_indirect: a DW.ref.* or GOT slot), which unwinding never
	 * uses. Every C++ and Rust function with a cleanup or a catch has
	 * one, so refusing the read ended each walk at the first such frame
	 * (a C++ program's stacks stopped at the first function holding a
	 * std::string). It reads as 0: no data of the program is touched
	 * (another thread may write it) and the answer is the same for
	 * another process's file. */
	for (uint32_t i = 0; owner && i < owner->pub.nsegs; i++) {
		const struct sprobe_segment *sg = &owner->pub.segs[i];

		if ((sg->prot & SPROBE_SEG_W) && addr >= sg->start && addr < sg->end &&
		    sg->end - addr >= sizeof(*val)) {
			*val = 0;
			return 0;
		}
	}
	/* A word reaching past the copy's end (or a straddling one) would
	 * have been there had the copy been longer. */
	if (addr >= w->lo && addr < w->s->stack_top && addr + sizeof(*val) > w->hi)
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

unw_accessors_t sprobe_unw__accessors = {
	.find_proc_info = acc_find_proc_info,
	.put_unwind_info = acc_put_unwind_info,
	.get_dyn_info_list_addr = acc_get_dyn_info_list_addr,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_get_proc_name,
};
