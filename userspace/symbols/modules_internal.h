/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private state shared by the files of userspace/symbols and unwind/. Not
 * installed. Nothing here is async-signal-safe (see symbolize.h).
 *
 * The calls between the folder's files go one way: modules.c (the
 * inventory, owner of every struct module) calls the files that fill a
 * module's caches to release them (symbolize.c, inline.c, perfmap.c);
 * those never call modules.c, and find a module with the lookup below.
 */
#ifndef SPROBE_MODULES_INTERNAL_H
#define SPROBE_MODULES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <libelf.h>
#include <stackprobe/symbolize.h>

struct sym {
	uint64_t start;		/* ELF virtual address (unbiased) */
	uint64_t size;
	const char *name;	/* points into an open ELF's string table */
	char *demangled;	/* lazily; SYM_NOT_MANGLED when not C++ */
	uint8_t bind;		/* STB_* */
	uint8_t plt;		/* SYM_PLT_*: a PLT stub's name (plt.h) */
};

#define SYM_PLT_ENTRY 1		/* name is the target's: shown "<name>@plt" */
#define SYM_PLT_HEADER 2	/* ".plt" */

#define SYM_NOT_MANGLED ((char *)1)

/* An ELF object being read. From a file, libelf holds the whole file
 * (mapped, or read in) and the descriptor is closed as soon as elf_begin()
 * returns: the library keeps no descriptor per module in the host
 * process (userspace/fds.h). */
struct elf_file {
	bool from_file;	/* false: an image in memory (vDSO) */
	Elf *elf;
};

/* Function ranges from .eh_frame (cfi_names.c): the FDEs of an object,
 * sorted and disjoint, ELF virtual addresses; names[i] ("gzip+0x42f0")
 * formatted on first use. */
struct fde_index {
	int state;		/* 0 not built, 1 built, -errno none */
	uint64_t *start, *end;	/* [start[i], end[i]) */
	uint64_t *fde;		/* ELF vaddr of each one's FDE record */
	uint64_t eh_frame;	/* ELF vaddr of .eh_frame */
	char **names;
	size_t n;
};

struct symtab {
	int state;		/* 0 not loaded, 1 loaded, -errno failed */
	struct sym *syms;
	size_t n;
	const char *source;	/* see struct sprobe_symbol */
	struct elf_file files[2]; /* the object, and its debug file */
	unsigned nfiles;
	void *membuf;		/* another process's vDSO image, copied */
	void *dwarf;		/* libdw Dwarf * for line numbers, or NULL */
	/* dwarf_load.h's image dwarf lives on (it owns dwarf), or NULL: then
	 * dwarf came from dwarf_begin_elf() on one of files[]. */
	struct sprobe_dwarf_image *dwarf_img;
	int dwarf_state;	/* 0 not tried, 1 open, -errno none */
	/* files[0] is the object that was mapped (its build-id matched, or
	 * it has none to check): its .eh_frame describes the mapped code. */
	bool obj_trusted;
	struct fde_index fde;
};

/* One row of a procedure's CFI table: the register-state rule that holds
 * for [start, end), as libunwind's unw_reg_states_iterate() produced it
 * (an opaque blob of blob_size bytes at blobs + blob). */
struct unw_row {
	uint64_t start, end;
	size_t blob;
};

/* Per-module unwind state, filled on first use by unwind.c: the checked
 * .eh_frame_hdr index, and the rows of every procedure seen so far, sorted
 * by start. Plain memory, so modules.c can free it without libunwind. */
struct unw_cache {
	int state;		/* 0 not prepared, 1 ready, -errno unusable */
	uint64_t fde_count;
	uint64_t table;		/* runtime address of the binary-search table */
	uint64_t lookups, failures;
	struct unw_row *rows;
	size_t nrows, cap_rows;
	uint8_t *blobs;
	size_t blob_size, nblobs, cap_blobs; /* counts of blobs */
	uint64_t *no_cfi;	/* direct-mapped set of ips without CFI, or NULL */
	/* Pin of this round (see unwind.c, "pins"): decided once per round
	 * of the unwinder pin_owner. */
	const void *pin_owner;
	uint64_t pin_round;
	int pin_state;		/* 1 readable this round, -1 not */
	/* ip -> "is a sigreturn trampoline", so the warm path reads
	 * no code (direct-mapped, UNW_NO_CFI_SLOTS entries), or NULL. */
	struct unw_sig *sig;
	/* Go: runtime address of runtime.asyncPreempt in this module
	 * (go_preempt.c), go_state 0 not looked up, 1 found, -1 none. */
	int go_state;
	uint64_t go_preempt;
	/* Another process's module (unwind.h, "other process"): its bytes
	 * from the object's file image, checked once (file_state 0 not
	 * tried, 1 usable, -errno not). */
	int file_state;
	const uint8_t *file;	/* the object's file image (the symbol table's) */
	size_t file_len;
	uint64_t eh_hdr, eh_hdr_len; /* runtime address of PT_GNU_EH_FRAME, or 0 */
	/* No PT_GNU_EH_FRAME: a search table built from .eh_frame (int32
	 * pairs {start, fde} relative to synth_base, the runtime .eh_frame),
	 * served to libunwind at UNW_SYNTH_ADDR (access.c). */
	int32_t *synth;
	uint64_t synth_count, synth_base;
	/* ... or from .debug_frame (Go): its .eh_frame-form copy, which
	 * libunwind reads at synth_base (a page-aligned address past the
	 * module's end, so the table's int32 offsets reach the code). Go's
	 * rules do not restore the frame pointer: only the interrupted
	 * frame is unwound by them (cfi_first_only), frame pointers above. */
	uint8_t *synth_eh;
	size_t synth_eh_len;
	bool cfi_first_only;
};

/* Where a synthetic search table appears to libunwind: in the kernel's
 * half of the address space, which no user address (so no module, no
 * stack copy) can be. */
#define UNW_SYNTH_ADDR 0xffff900000000000ull

struct unw_sig {
	uint64_t ip;		/* 0: empty */
	bool is_sig;
};

#define UNW_NO_CFI_SLOTS 256

struct module {
	struct sprobe_module pub; /* first: modules are handed out as &pub */
	char *path;		/* owned storage for pub.path */
	char *open_path;	/* what to open(); differs for other processes */
	uint64_t dev, ino;	/* from /proc/PID/maps (0 for self) */
	bool vdso_self;		/* the vDSO of this process: ELF is in memory */
	bool permanent;		/* this process's main program, vDSO, loader or
				 * the object holding stackprobe: never unmapped
				 * while we run, read without a pin */
	bool seen;		/* refresh bookkeeping */
	struct symtab st;
	/* inline.c: functions' DIEs by address, from st.dwarf (so freed
	 * before it), or NULL. */
	struct inl_cache *inl;
	struct unw_cache unw;
};

/* One line of a JIT's perf map (perfmap.c). */
struct jit_sym {
	uint64_t start, size;	/* runtime addresses */
	uint64_t seq;		/* line order: the later line wins */
	const char *name;	/* in a perfmap block, never moved */
};

/* The perf map of the inventory's process, read incrementally. */
struct perfmap {
	struct jit_sym *v;	/* sorted by start, then seq */
	size_t n, cap;
	uint64_t seq;
	uint64_t offset;	/* bytes of whole lines consumed */
	uint64_t dev, ino;	/* the file those bytes came from */
	uint8_t head[64];	/* its first bytes: a file rewritten in place */
	uint32_t head_len;	/* (truncated, written again) differs there */
	bool skipping;		/* inside an over-long line */
	bool capped;		/* PERFMAP_BYTES_MAX or ENTRIES_MAX reached */
	struct perfmap_block *blocks; /* names */
};

struct sprobe_modules {
	pid_t pid;		/* 0: this process */
	bool empty_mode;
	bool demangle;
	char *debug_root;
	struct module **mods;	/* sorted by pub.start, spans disjoint */
	size_t n, cap;
	unsigned long long adds, subs; /* dl_iterate_phdr counters, self only */
	bool have_counters;
	uint64_t generation;
	/* __cxa_demangle, resolved on the first "_Z" name. */
	int demangler_state;	/* 0 unresolved, 1 ready, -1 unavailable */
	void *demangler_dl;	/* dlopen handle to release, or NULL */
	char *(*demangler)(const char *, char *, size_t *, int *);
	bool no_perf_map;
	bool debuginfod;	/* opts.debuginfod: ask debuginfod.h */
	struct perfmap jit;
	/* Demangled names of inlined functions handed out (inline.c). */
	char **inl_names;
	size_t inl_n, inl_cap;
};

/* The module containing addr, or NULL (binary search over m->mods). Here,
 * not in modules.c, so that the files modules.c calls can find modules. */
static inline struct module *sprobe__modules_find(const struct sprobe_modules *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct module *x = m->mods[mid];

		if (addr < x->pub.start)
			hi = mid;
		else if (addr >= x->pub.end)
			lo = mid + 1;
		else
			return x;
	}
	return NULL;
}

/* Name pc (in no module) from the process's perf map: fills out's name,
 * sym_start, sym_offset, sym_size, source "perf-map". 0, -ENOENT (no map,
 * no entry, empty inventory), -ENOMEM. In perfmap.c. */
int sprobe__perfmap_symbolize(struct sprobe_modules *m, uint64_t pc, struct sprobe_symbol *out);
void sprobe__perfmap_release(struct perfmap *pm);

/* symbolize.c: the module of pc with its DWARF (a Dwarf *) open, or NULL;
 * a mangled name demangled (caller frees) or NULL. The Dwarf may hold only
 * the sections of dwarf_load.h (lines, scopes, ranges, names): ask it for
 * no locations, CFI or macros. */
struct module *sprobe__module_dwarf(struct sprobe_modules *m, uint64_t pc, void **dw);
char *sprobe__demangle(struct sprobe_modules *m, const char *name);

/* symbolize.c: the bytes of the object mod was mapped from, for reading
 * another process's code and unwind tables without its memory: *base (the
 * whole file, or the copied vDSO image) and *len, valid as long as mod;
 * *eh_hdr / *eh_hdr_len the runtime address and size of its
 * PT_GNU_EH_FRAME (0 when it has none). Opens the object with its symbol
 * table (once) if not yet. 0, -ENOENT (no module image: not opened, or its
 * build-id differs from the mapped object's: not the bytes that run). */
int sprobe__module_image(struct sprobe_modules *m, struct module *mod, const uint8_t **base,
			 size_t *len, uint64_t *eh_hdr, uint64_t *eh_hdr_len);

/* inline.c: release the inline-frame names kept for the inventory's life,
 * and a module's index of function DIEs (NULL is ok). Called by modules.c. */
void sprobe__inline_release(struct sprobe_modules *m);
void sprobe__inline_cache_free(struct inl_cache *c);

/* cfi_names.c: the FDE of mod's object elf covering vaddr (an ELF virtual
 * address): 0 and its [*start, *end) and synthetic name "<module
 * name>+0x<start>" (owned by mod, valid as long as it), -ENOENT (no FDE
 * covers it, or the object has no .eh_frame), -ENOMEM. Builds the index on
 * first use; a failure to build is remembered. */
int sprobe__fde_name(struct module *mod, Elf *elf, uint64_t vaddr, uint64_t *start,
		     uint64_t *end, const char **name);
void sprobe__fde_index_free(struct fde_index *fi);

/* cfi_names.c: mod's FDE index (built on first use from its object, when
 * that is the mapped one: obj_trusted), for an unwinder that has no
 * .eh_frame_hdr to search (static executables: ld writes none without a
 * dynamic link). 0 and *out (owned by mod), -ENOENT, -ENOMEM. */
int sprobe__fde_table(struct module *mod, const struct fde_index **out);

/* debug_frame.c: mod's .debug_frame (decompressed) in .eh_frame form, for
 * an object with no .eh_frame (Go), as if it lay at runtime address base:
 * *eh (*eh_len bytes, caller frees) and a binary-search table of *count
 * {start - base, FDE offset} int32 pairs sorted by start (*table, caller
 * frees). 0, -ENOENT (no usable .debug_frame, or mod's object is not the
 * mapped one), -ENOMEM. */
int sprobe__debug_frame_eh(struct module *mod, uint64_t base, uint8_t **eh, size_t *eh_len,
			   int32_t **table, uint64_t *count);

/* symbolize.c: release a module's symbol table, its files and DWARF (not
 * the inline cache, module_free's), and the inventory's C++ demangler.
 * Called by modules.c. */
void sprobe__symtab_release(struct symtab *st);
void sprobe__demangler_release(struct sprobe_modules *m);

#endif
