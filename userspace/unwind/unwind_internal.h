/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the unwinder: its state and one walk's, shared by the walk
 * (unwind.c) and the live-memory side (access.c: libunwind's accessors and
 * the module pins).
 */
#ifndef SPROBE_USERSPACE_UNWIND_INTERNAL_H
#define SPROBE_USERSPACE_UNWIND_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libunwind.h>

#include <stackprobe/unwind.h>

#include "userspace/symbols/modules_internal.h"

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

/* libunwind is opened at the first walk: its names are macros from here on. */
#include "userspace/unwind/libunwind_dl.h"
#ifndef SPROBE_LIBUNWIND_DL_IMPL
#if defined(__x86_64__)
#define _Ux86_64_dwarf_search_unwind_table (sprobe__libunwind._Ux86_64_dwarf_search_unwind_table)
#else
#define _Uaarch64_dwarf_search_unwind_table (sprobe__libunwind._Uaarch64_dwarf_search_unwind_table)
#endif
#endif

struct sprobe_unwinder {
	unw_addr_space_t as;
	struct sprobe_modules *mods;
	bool own_mods;
	bool foreign;		/* mods is another process's: read its files */
	bool no_dwarf, no_fp;
	uint32_t max_frames;
	uint64_t mods_gen;	/* inventory generation last seen */
	uint64_t round;		/* current round, for the modules' pin stamps */
	bool in_round;		/* inside unwind_snapshot(): one round for all */
	void **pins;		/* dlopen handles held this round */
	size_t npins, cap_pins;
	struct sprobe_unwinder_stats st;
	struct sprobe_thread_sample tmp; /* scratch for the frame-pointer tail */
	struct sprobe_frame tmp_frames[SPROBE_MAX_FRAMES]; /* tmp's storage */
	/* Where a walk writes before its frames go to the sample's storage
	 * (backends/frames.h); a sample with none keeps pointing here. */
	struct sprobe_frame walk_frames[SPROBE_MAX_FRAMES];
	/* The last unwind_snapshot()'s zero-pause samples whose walk came
	 * up short (sprobe_unwinder__short_walks()). */
	uint32_t *short_idx;
	uint32_t short_cap, nshort;
};

/* State of one walk; the accessors' `arg`. */
struct walk {
	struct sprobe_unwinder *u;
	const struct sprobe_thread_sample *s;
	uint64_t lo, hi;	/* the copy: [lo, hi) */
	uint64_t seg_lo, seg_hi; /* last segment read, [seg_lo, seg_hi), */
	const uint8_t *seg_base; /* where its byte seg_lo is (live or file) */
	uint64_t regs[SPROBE_NREGS];
	bool no_cfi;		/* find_proc_info found no CFI during this step */
	bool unpinned;		/* a module could not be pinned: nothing learned */
	bool past_copy;		/* a read fell between the copy's end and stack_top */
	const struct module *synth; /* module whose synthetic table a search reads */
};

/* ---- access.c ----------------------------------------------------------- */

/* libunwind's remote accessors over a struct walk (their `arg`). */
extern unw_accessors_t sprobe_unw__accessors;

/* May mod's memory be read live this round? Pins it on first ask (see
 * access.c for which modules need no pin). */
bool sprobe_unw__mod_readable(struct sprobe_unwinder *u, struct module *mod);

/* End the round: drop every pin it took (dlclose). */
void sprobe_unw__round_end(struct sprobe_unwinder *u);

/* ---- go_preempt.c ------------------------------------------------------- */

/* Is ip the first instruction of Go's runtime.asyncPreempt in mod, where
 * the return address (the preempted pc) is at [sp] and the frame pointer
 * is still the preempted function's? Reads mod's symbol table on the first
 * ask (a module without Go code: its section headers only) and remembers
 * the answer with the module. Always false on aarch64 (the preempted pc is
 * in LR there). Not async-signal-safe. */
bool sprobe_unw__go_preempt_entry(struct module *mod, uint64_t ip);
/* ---- access_file.c: another process's modules, from their files ---- */

/* Is mod's file image at hand (opened once, on first ask)? */
bool sprobe_unw__file_readable(struct sprobe_unwinder *u, struct module *mod);

/* The file bytes of [addr, addr + len) in a read-only segment of mod, or
 * NULL; [*lo, *hi) is the part of that segment the same translation serves. */
const uint8_t *sprobe_unw__file_at(const struct module *mod, uint64_t addr, size_t len,
				   uint64_t *lo, uint64_t *hi);

#endif
