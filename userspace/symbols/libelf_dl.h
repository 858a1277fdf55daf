/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libelf through dlopen, for the ELF readers of the library (modules.c,
 * build_id.c, symbolize.c, debug_file.c, plt.c, debug_frame.c, cfi_names.c,
 * unwind/go_preempt.c).
 *
 * Why: libstackprobe.so is preloaded into every program `record` runs.
 * There the agent reads ELF files only to name the pcs of files record may
 * not find as they were (build products, see emit.c's stable_file()); a
 * program whose code is all installed (and any program in cpu mode while
 * it sleeps) never calls libelf. Linked, libelf.so.1 was mapped anyway
 * (~80 kB of RSS: its text faulted around at load, its relocated data;
 * docs/PERFORMANCE.md, "Memory, what does not grow with threads"). So the shared library does
 * not link it: the first elf_begin() or elf_memory() opens libelf.so.1.
 * Programs linked with -lelf get the copy already loaded.
 *
 * Include this header instead of <libelf.h> and <gelf.h>: after it, the
 * libelf names are macros. elf_begin, elf_memory, elf_version, elf_end and
 * elf_kind go through the functions below (NULL-safe, and the first two
 * load); the others read the table directly: they take an Elf, Elf_Scn or
 * Elf_Data that came from a loaded libelf.
 */
#ifndef SPROBE_SYMBOLS_LIBELF_DL_H
#define SPROBE_SYMBOLS_LIBELF_DL_H

#include <gelf.h>
#include <libelf.h>

/* libelf's soname has been libelf.so.1 since elfutils 0.1xx. */
#define SPROBE_LIBELF_SONAME "libelf.so.1"

#define SPROBE_LIBELF_FNS(X)                                                        \
	X(elf_version) X(elf_begin) X(elf_memory) X(elf_end) X(elf_kind) X(elf_cntl)      \
	X(elf_getdata) X(elf_rawdata) X(elf_getphdrnum) X(elf_getshdrstrndx)             \
	X(elf_nextscn) X(elf_rawfile) X(elf_strptr) X(elf_getident) X(gelf_getphdr)      \
	X(gelf_getshdr) X(gelf_getsym) X(gelf_getclass) X(gelf_getehdr) X(gelf_getchdr)      \
	X(gelf_getrela) X(elf_getscn)

struct sprobe_libelf {
#define SPROBE_LIBELF_PTR(f) __typeof__(f) *f;
	SPROBE_LIBELF_FNS(SPROBE_LIBELF_PTR)
#undef SPROBE_LIBELF_PTR
};

/* Filled by sprobe__libelf_load(); read-only after. */
extern struct sprobe_libelf sprobe__libelf;

/* Open libelf, fill the table and set its working version to EV_CURRENT,
 * once per process (later calls return the first call's result). Returns
 * 0, or -ENOSYS: no libelf.so.1, one of its functions missing, or no
 * EV_CURRENT. Thread-safe; not async-signal-safe (dlopen). */
int sprobe__libelf_load(void);

/* elf_begin()/elf_memory(), after loading: NULL (errno ENOSYS) without
 * libelf. */
Elf *sprobe__elf_begin(int fd, Elf_Cmd cmd, Elf *ref);
Elf *sprobe__elf_memory(char *image, size_t size);
/* EV_CURRENT for EV_CURRENT without loading (sprobe__libelf_load() sets
 * the version when it loads); EV_NONE for any other version. */
unsigned int sprobe__elf_version(unsigned int version);
/* elf_end(), elf_kind() of NULL without loading (0, ELF_K_NONE). */
int sprobe__elf_end(Elf *elf);
Elf_Kind sprobe__elf_kind(Elf *elf);

#ifndef SPROBE_LIBELF_DL_IMPL
#define elf_version sprobe__elf_version
#define elf_begin sprobe__elf_begin
#define elf_memory sprobe__elf_memory
#define elf_end sprobe__elf_end
#define elf_kind sprobe__elf_kind
#define elf_cntl (sprobe__libelf.elf_cntl)
#define elf_getdata (sprobe__libelf.elf_getdata)
#define elf_rawdata (sprobe__libelf.elf_rawdata)
#define elf_getphdrnum (sprobe__libelf.elf_getphdrnum)
#define elf_getshdrstrndx (sprobe__libelf.elf_getshdrstrndx)
#define elf_nextscn (sprobe__libelf.elf_nextscn)
#define elf_rawfile (sprobe__libelf.elf_rawfile)
#define elf_strptr (sprobe__libelf.elf_strptr)
#define elf_getident (sprobe__libelf.elf_getident)
#define gelf_getphdr (sprobe__libelf.gelf_getphdr)
#define gelf_getshdr (sprobe__libelf.gelf_getshdr)
#define gelf_getsym (sprobe__libelf.gelf_getsym)
#define gelf_getclass (sprobe__libelf.gelf_getclass)
#define gelf_getehdr (sprobe__libelf.gelf_getehdr)
#define gelf_getchdr (sprobe__libelf.gelf_getchdr)
#define gelf_getrela (sprobe__libelf.gelf_getrela)
#define elf_getscn (sprobe__libelf.elf_getscn)
#endif

#endif /* SPROBE_SYMBOLS_LIBELF_DL_H */
