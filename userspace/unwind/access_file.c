/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The unwinder's file side: code and unwind tables of ANOTHER process's
 * modules, read from the objects' files instead of memory (unwind.h,
 * "Other processes").
 *
 * A runtime address of a read-only segment maps to the file byte
 * segment.file_offset + (addr - segment.start): the ELF loader maps
 * PT_LOAD p_offset at p_vaddr + bias, and a segment that is not writable
 * holds what the file holds (relocations write only writable ones, and
 * p_filesz == p_memsz for them). The file image is the one the symbol
 * table's loader mapped (libelf), opened through /proc/PID while the
 * process lived and checked against the mapped object's build-id, so it
 * stays readable after the process exits and never is this process's
 * memory at that address.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <stackprobe/unwind.h>

#include "userspace/unwind/unwind_internal.h"

/*
 * No .eh_frame_hdr (a static executable: ld writes one only for dynamic
 * links): the same binary-search table, built from the object's .eh_frame
 * FDEs (cfi_names.c's index), {start, fde} as int32 relative to the
 * runtime .eh_frame, as .eh_frame_hdr's datarel entries are. libunwind
 * reads it through access_mem at UNW_SYNTH_ADDR. An object of more than
 * 2 GiB of code has no table (offsets do not fit): frame pointers.
 */
static void synth_table(struct module *mod)
{
	const struct fde_index *fi;
	struct unw_cache *uc = &mod->unw;
	uint64_t base;

	if (sprobe__fde_table(mod, &fi) != 0 || !fi->n) {
		/* No .eh_frame: a Go binary's .debug_frame, converted. */
		base = (mod->pub.end + 0xffff) & ~0xffffull;
		if (sprobe__debug_frame_eh(mod, base, &uc->synth_eh, &uc->synth_eh_len, &uc->synth,
					   &uc->synth_count) == 0) {
			uc->synth_base = base;
			uc->cfi_first_only = true;
		}
		return;
	}
	base = mod->pub.bias + fi->eh_frame;
	uc->synth = malloc(fi->n * 2 * sizeof(*uc->synth));
	if (!uc->synth)
		return;
	for (size_t i = 0; i < fi->n; i++) {
		int64_t a = (int64_t)(mod->pub.bias + fi->start[i] - base);
		int64_t f = (int64_t)(mod->pub.bias + fi->fde[i] - base);

		if (a < INT32_MIN || a > INT32_MAX || f < INT32_MIN || f > INT32_MAX) {
			free(uc->synth);
			uc->synth = NULL;
			return;
		}
		uc->synth[2 * i] = (int32_t)a;
		uc->synth[2 * i + 1] = (int32_t)f;
	}
	uc->synth_count = fi->n;
	uc->synth_base = base;
}

bool sprobe_unw__file_readable(struct sprobe_unwinder *u, struct module *mod)
{
	struct unw_cache *uc = &mod->unw;

	if (uc->file_state == 0) {
		const uint8_t *base = NULL;
		size_t len = 0;
		uint64_t hdr = 0, hdr_len = 0;

		uc->file_state = sprobe__module_image(u->mods, mod, &base, &len, &hdr, &hdr_len) == 0
					 ? 1
					 : -ENOENT;
		if (uc->file_state == 1) {
			uc->file = base;
			uc->file_len = len;
			uc->eh_hdr = hdr;
			uc->eh_hdr_len = hdr_len;
			if (!hdr)
				synth_table(mod);
		} else {
			u->st.pin_failures++;
		}
	}
	return uc->file_state == 1;
}

const uint8_t *sprobe_unw__file_at(const struct module *mod, uint64_t addr, size_t len,
				   uint64_t *lo, uint64_t *hi)
{
	const struct unw_cache *uc = &mod->unw;

	if (uc->file_state != 1)
		return NULL;
	for (uint32_t i = 0; i < mod->pub.nsegs; i++) {
		const struct sprobe_segment *sg = &mod->pub.segs[i];
		uint64_t end = sg->end;

		if (!(sg->prot & (SPROBE_SEG_R | SPROBE_SEG_X)) || (sg->prot & SPROBE_SEG_W) ||
		    addr < sg->start || addr >= end || sg->file_offset > uc->file_len)
			continue;
		/* What of the segment the file holds. */
		if (end - sg->start > uc->file_len - sg->file_offset)
			end = sg->start + (uc->file_len - sg->file_offset);
		if (addr >= end || end - addr < len)
			return NULL;
		*lo = sg->start;
		*hi = end;
		return uc->file + sg->file_offset + (addr - sg->start);
	}
	return NULL;
}
