/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe modules and symbols: which loaded object an address belongs to,
 * and which function.
 *
 * A module inventory (struct sprobe_modules) lists the objects loaded in a
 * process: path, load bias, segments, GNU build-id and, for the current
 * process, the runtime address of PT_GNU_EH_FRAME (the unwinder's index).
 * It is built one of three ways:
 *   - the current process (opts.pid == 0 or getpid()): dl_iterate_phdr; a
 *     refresh re-reads the list only when the loader's adds/subs counters
 *     moved, so calling refresh before every unwind costs one callback;
 *   - another process (opts.pid > 0): /proc/PID/maps plus the ELF files
 *     (opened through /proc/PID/root, so mount namespaces work);
 *   - empty (opts.empty), filled with sprobe_modules__add() from module
 *     records saved elsewhere (a data file), for offline symbolization.
 *
 * Symbolization reads the module's ELF file with libelf: .symtab if the file
 * has one, else a separate debug file found by build-id under
 * DEBUG_ROOT/.build-id/xx/yyyy.debug or by .gnu_debuglink (next to the file,
 * in its .debug/ directory, or under DEBUG_ROOT/<dir>; CRC checked), else
 * .dynsym. Each module's table is loaded once, on first use, into a sorted
 * array searched by binary search. A pc covered by no sized symbol is named
 * by the function range its CFI gives: the .eh_frame FDE covering it (the
 * compiler writes one per function, with its exact bounds, and strip keeps
 * it), as "<module>+0x<FDE start, an ELF virtual address>" with source
 * "eh-frame", so every pc of one stripped function has one name. With no
 * FDE either it comes out as module + offset only: a nearest-preceding-
 * symbol guess would name the wrong function in a stripped module, so
 * stackprobe never guesses. A PLT stub, which no symbol table covers
 * either, is named "<function>@plt" from the object's PLT relocations, as
 * perf names it (source "plt").
 *
 * C++ names are demangled with __cxa_demangle from libstdc++ (the maintained
 * demangler every GNU toolchain ships). libstdc++ is looked up with dlopen
 * the first time a "_Z" name is seen, so C programs and the static library
 * need no C++ runtime at link time; without libstdc++ the mangled name is
 * returned unchanged. (libiberty's cplus_demangle would need -liberty, a
 * static-only, unversioned library, on every consumer's link line.) Rust
 * names (legacy "_ZN...17h<hash>E" and v0 "_R...") are demangled first, by
 * stackprobe's own demangler, as perf and Rust's backtraces print them: no
 * hash, no crate disambiguator ("hot::spin::<u64>").
 *
 * Async-signal-safety: NONE of these functions is async-signal-safe. They
 * allocate, open files, take the loader lock (dl_iterate_phdr) and call
 * libelf. Never call them inside a suspend window or a signal handler; the
 * capture backend never does, and the unwinder calls them only after every
 * thread runs again.
 *
 * Thread-safety: a struct sprobe_modules is not internally locked. Use it
 * from one thread at a time (different objects are independent).
 *
 * Errors: int functions return 0 (or a documented positive value) or -errno;
 * pointer functions return NULL and set errno.
 */
#ifndef STACKPROBE_SYMBOLIZE_H
#define STACKPROBE_SYMBOLIZE_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPROBE_MODULE_MAX_SEGS 16
#define SPROBE_BUILD_ID_MAX 64

/* Segment protection bits (same values as PROT_READ/WRITE/EXEC). */
#define SPROBE_SEG_R 0x1u
#define SPROBE_SEG_W 0x2u
#define SPROBE_SEG_X 0x4u

struct sprobe_segment {
	uint64_t start, end;	/* runtime addresses, [start, end) */
	uint32_t prot;		/* SPROBE_SEG_* */
	uint32_t _pad;
	/* Offset in the file of the byte mapped at start (ELF p_offset of the
	 * PT_LOAD), so that file offset = file_offset + (addr - start). 0 for
	 * the vDSO and where the format has no linear mapping (PE images). */
	uint64_t file_offset;
};

/*
 * One loaded object. Read-only for callers; owned by its inventory and valid
 * until sprobe_modules__refresh() reports that the module set changed, or
 * the inventory is freed.
 */
struct sprobe_module {
	const char *path;	/* file as loaded; "[vdso]" for the vDSO */
	const char *name;	/* basename of path */
	uint64_t bias;		/* runtime address = ELF p_vaddr + bias */
	uint64_t start, end;	/* span of all segments, [start, end) */
	uint32_t nsegs;
	struct sprobe_segment segs[SPROBE_MODULE_MAX_SEGS];
	uint32_t build_id_len;	/* 0: the object has no GNU build-id */
	uint8_t build_id[SPROBE_BUILD_ID_MAX];
	/* Runtime address and size of PT_GNU_EH_FRAME; 0 when absent or when
	 * the inventory is not of the current process. */
	uint64_t eh_frame_hdr, eh_frame_hdr_len;
};

/* Options for sprobe_modules__new(). Zeroed fields take defaults. */
struct sprobe_modules_opts {
	size_t sz;		/* sizeof(struct sprobe_modules_opts) */
	pid_t pid;		/* 0: the current process */
	bool empty;		/* start empty, fill with sprobe_modules__add() */
	bool no_demangle;	/* keep C++ names mangled */
	const char *debug_root;	/* default "/usr/lib/debug" */
	/* Do not read the process's JIT map (/tmp/perf-PID.map) for pcs
	 * in no module (see sprobe_modules__symbolize()). */
	bool no_perf_map;
	/* When no local file has symbols (or the object is not on this
	 * machine), fetch its debug file by build-id from the debuginfod
	 * servers of DEBUGINFOD_URLS (libdebuginfod, dlopen'd; cached by it),
	 * source "debuginfod". Network access: for tools that symbolize
	 * offline (stackprobe report), not for the agent inside a profiled
	 * process. A server that cannot be reached is asked once per
	 * process (later lookups fail at once). */
	bool debuginfod;
};

struct sprobe_modules;

/*
 * Build an inventory (see the top of this file). Returns a new object the
 * caller frees with sprobe_modules__free(), or NULL with errno set: EINVAL
 * (bad opts), ESRCH (no such process), EACCES/EPERM (cannot read its maps:
 * run as the same user or with CAP_SYS_PTRACE), ENOMEM.
 */
SPROBE_API
struct sprobe_modules *sprobe_modules__new(const struct sprobe_modules_opts *opts);

/* Free the inventory, its symbol tables and its unwind caches. NULL is ok. */
SPROBE_API
void sprobe_modules__free(struct sprobe_modules *m);

/*
 * Bring the inventory up to date. Current process: one dl_iterate_phdr
 * callback when nothing was loaded or unloaded since the last refresh.
 * Another process: re-reads /proc/PID/maps. Empty inventories: no-op.
 * Returns 1 if the module set changed (earlier module pointers and
 * sprobe_symbol results are then invalid), 0 if not, -errno on failure (the
 * previous inventory stays usable).
 */
SPROBE_API
int sprobe_modules__refresh(struct sprobe_modules *m);

/* Counter bumped by every refresh that changed the set. Never fails. */
SPROBE_API
uint64_t sprobe_modules__generation(const struct sprobe_modules *m);

/* Number of modules, and the i-th one in address order (NULL, errno ERANGE
 * when i >= count). */
SPROBE_API
size_t sprobe_modules__count(const struct sprobe_modules *m);
SPROBE_API
const struct sprobe_module *sprobe_modules__get(const struct sprobe_modules *m, size_t i);

/* The module whose span contains addr, or NULL (errno ENOENT). O(log n). */
SPROBE_API
const struct sprobe_module *sprobe_modules__find(const struct sprobe_modules *m,
						 uint64_t addr);

/*
 * Add a module described by desc (path, bias, segments, build-id; name, start,
 * end and eh_frame_hdr are derived or ignored). Copies everything. For
 * inventories made with opts.empty. Returns 0, -EINVAL (bad description or
 * not an empty-mode inventory), -EEXIST (overlaps a module), -ENOMEM.
 */
SPROBE_API
int sprobe_modules__add(struct sprobe_modules *m, const struct sprobe_module *desc);

/* Result of a symbol lookup. Strings are owned by the inventory and valid
 * as long as the module is (see struct sprobe_module). */
struct sprobe_symbol {
	const struct sprobe_module *module; /* NULL: pc is in no module */
	uint64_t pc;
	uint64_t module_offset;	/* pc - bias: the ELF virtual address */
	const char *name;	/* NULL: no symbol covers pc */
	uint64_t sym_start;	/* runtime address of the symbol */
	uint64_t sym_offset;	/* pc - sym_start */
	uint64_t sym_size;
	const char *source;	/* where the name came from: "symtab",
				 * "debug-build-id", "debug-link", "dynsym",
				 * "memory" (vDSO), "perf-map" (JIT code),
				 * "debuginfod" (opts.debuginfod),
				 * "plt" (a PLT stub: "<function>@plt",
				 * ".plt" for the lazy-binding header),
				 * "eh-frame" (no symbol: the name is the
				 * module's base name + "+0x" + the FDE's
				 * start, sym_start/sym_size its range);
				 * NULL when name is NULL */
};

/*
 * Symbolize pc. For a return address pass pc - 1 (or use
 * sprobe_frame_lookup_pc() from unwind.h) so a call at the very end of a
 * function is not charged to the next one. Loads the module's symbol table
 * on first use. Returns 0 when pc is in a module (out->name may still be
 * NULL: no symbol covers it), -ENOENT when it is in none (out->module NULL),
 * -EINVAL on NULL arguments.
 *
 * JIT code: a pc in no module (anonymous executable memory) is looked up in
 * the process's perf map, /tmp/perf-PID.map (read through /proc/PID/root
 * for another process), which node --perf-basic-prof, the JVM
 * (-XX:+DumpPerfMapAtExit, perf-map-agent), python3.12 -X perf, LuaJIT and
 * .NET write. When it names pc the result is 0 with out->module NULL and
 * out->name, sym_start, sym_offset, sym_size set, source "perf-map". The map
 * is read incrementally (only what the program appended since the last
 * miss), bounded in size, only if it is a regular file owned by the
 * process's user or root; a line that does not parse is skipped. Not for
 * inventories made with opts.empty (they have no process), nor with
 * opts.no_perf_map.
 */
SPROBE_API
int sprobe_modules__symbolize(struct sprobe_modules *m, uint64_t pc,
			      struct sprobe_symbol *out);

/*
 * Source file and line of pc from the DWARF line table (libdw) of the
 * module's debug file, or of the module itself when built with -g. Pass
 * pc - 1 for return addresses, as for sprobe_modules__symbolize(). Returns
 * 0 and sets *file (owned by the inventory, valid as long as the module)
 * and *line; -ENOENT when no line information covers pc (stripped module,
 * no debug file); -EINVAL on NULL arguments. Not async-signal-safe.
 */
SPROBE_API
int sprobe_modules__source_line(struct sprobe_modules *m, uint64_t pc, const char **file,
				int *line);

/* One frame of the source view of a pc (sprobe_modules__inline_frames). */
struct sprobe_src_frame {
	/* The inlined function's name (demangled like symbol names); NULL
	 * for the last frame, the function the code belongs to, whose name
	 * is the symbol's (sprobe_modules__symbolize()). */
	const char *function;
	const char *file;	/* source file as DWARF spells it; NULL if unknown */
	uint32_t line;		/* 0 if unknown */
};

#define SPROBE_MAX_INLINE 32

/*
 * The chain of functions inlined at pc, from DWARF (libdw): out[0] is the
 * innermost inlined function with the file:line of pc in it, each next one
 * the function it was inlined into with the file:line of that call site
 * (DW_AT_call_file/line), and the last, out[n - 1], is the real function
 * (function NULL) with its line: what `addr2line -i -f` and `eu-addr2line
 * -i` print. Pass pc - 1 for return addresses. At most max frames (the
 * innermost ones are kept when the chain is longer). Returns n >= 1, or
 * -ENOENT (no module or no DWARF covers pc), -EINVAL. Strings are owned by
 * the inventory, valid as long as the module. Not async-signal-safe.
 */
SPROBE_API
int sprobe_modules__inline_frames(struct sprobe_modules *m, uint64_t pc,
				  struct sprobe_src_frame *out, size_t max);

/*
 * Format a lookup result: "name+0x1a (libfoo.so)", "libfoo.so+0x1234" when
 * no symbol covers the pc, "gzip+0x42f0+0x18" when only an FDE does (source
 * "eh-frame"), "name+0x1a ([jit])" for JIT code named by a perf map, "0x7f..." when nothing names it. Returns the length
 * snprintf would have written (may exceed len), -EINVAL on NULL sym.
 */
SPROBE_API
int sprobe_symbol__snprintf(const struct sprobe_symbol *sym, char *buf, size_t len);

/*
 * Format a build-id as lowercase hex into buf (2 * len + 1 bytes). Returns
 * the string length, -ENOSPC when buf is too small.
 */
SPROBE_API
int sprobe_build_id__hex(const uint8_t *id, size_t len, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_SYMBOLIZE_H */
