/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libdw through dlopen, for source lines and inlined frames (symbolize.c,
 * inline.c) only.
 *
 * Why: libstackprobe.so is preloaded into every program `record` runs, and
 * under `record` the agent reads no DWARF (record writes the lines after
 * the merge: STACKPROBE_LINES=record). Linked, libdw.so.1 and the libbz2
 * it pulls in were mapped into each of them anyway (~240 kB of RSS: text
 * faulted around, relocated data; docs/PERFORMANCE.md, "Memory, third
 * pass"). So the shared library does not link libdw; the first module
 * whose DWARF is asked for (sprobe__module_dwarf) opens libdw.so.1, and
 * every libdw call in those two files goes through one table filled then.
 * Programs linked with -ldw (the CLI, the tests) get the copy already
 * loaded. libelf is reached the same way (libelf_dl.h), loaded when the
 * agent first reads an ELF file.
 *
 * Include this header instead of <elfutils/libdw.h>: after it, the libdw
 * names are macros that read the table. A call through the table before
 * sprobe__libdw_load() returned 0 is a NULL call: every path to a Dwarf
 * handle goes through sprobe__module_dwarf, which loads first.
 */
#ifndef SPROBE_SYMBOLS_LIBDW_DL_H
#define SPROBE_SYMBOLS_LIBDW_DL_H

#include <dwarf.h>
#include <elfutils/libdw.h>

/* libdw's soname has been libdw.so.1 since elfutils 0.130. */
#define SPROBE_LIBDW_SONAME "libdw.so.1"

/* Every libdw function symbolize.c and inline.c call. */
#define SPROBE_LIBDW_FNS(X)                                                         \
	X(dwarf_begin_elf) X(dwarf_end) X(dwarf_addrdie) X(dwarf_getsrc_die)              \
	X(dwarf_lineno) X(dwarf_linesrc) X(dwarf_attr) X(dwarf_attr_integrate)           \
	X(dwarf_child) X(dwarf_siblingof) X(dwarf_diename) X(dwarf_dieoffset)            \
	X(dwarf_offdie) X(dwarf_tag) X(dwarf_hasattr) X(dwarf_haspc) X(dwarf_ranges)     \
	X(dwarf_getscopes) X(dwarf_getsrcfiles) X(dwarf_filesrc) X(dwarf_formstring)     \
	X(dwarf_formudata)

struct sprobe_libdw {
#define SPROBE_LIBDW_PTR(f) __typeof__(f) *f;
	SPROBE_LIBDW_FNS(SPROBE_LIBDW_PTR)
#undef SPROBE_LIBDW_PTR
};

/* Filled by sprobe__libdw_load(); read-only after. */
extern struct sprobe_libdw sprobe__libdw;

/* Open libdw and fill the table, once per process (later calls return the
 * first call's result). Returns 0, or -ENOSYS: no libdw.so.1, or one of
 * its functions missing. Thread-safe; not async-signal-safe (dlopen). */
int sprobe__libdw_load(void);

#ifndef SPROBE_LIBDW_DL_IMPL
#define dwarf_begin_elf (sprobe__libdw.dwarf_begin_elf)
#define dwarf_end (sprobe__libdw.dwarf_end)
#define dwarf_addrdie (sprobe__libdw.dwarf_addrdie)
#define dwarf_getsrc_die (sprobe__libdw.dwarf_getsrc_die)
#define dwarf_lineno (sprobe__libdw.dwarf_lineno)
#define dwarf_linesrc (sprobe__libdw.dwarf_linesrc)
#define dwarf_attr (sprobe__libdw.dwarf_attr)
#define dwarf_attr_integrate (sprobe__libdw.dwarf_attr_integrate)
#define dwarf_child (sprobe__libdw.dwarf_child)
#define dwarf_siblingof (sprobe__libdw.dwarf_siblingof)
#define dwarf_diename (sprobe__libdw.dwarf_diename)
#define dwarf_dieoffset (sprobe__libdw.dwarf_dieoffset)
#define dwarf_offdie (sprobe__libdw.dwarf_offdie)
#define dwarf_tag (sprobe__libdw.dwarf_tag)
#define dwarf_hasattr (sprobe__libdw.dwarf_hasattr)
#define dwarf_haspc (sprobe__libdw.dwarf_haspc)
#define dwarf_ranges (sprobe__libdw.dwarf_ranges)
#define dwarf_getscopes (sprobe__libdw.dwarf_getscopes)
#define dwarf_getsrcfiles (sprobe__libdw.dwarf_getsrcfiles)
#define dwarf_filesrc (sprobe__libdw.dwarf_filesrc)
#define dwarf_formstring (sprobe__libdw.dwarf_formstring)
#define dwarf_formudata (sprobe__libdw.dwarf_formudata)
#endif

#endif /* SPROBE_SYMBOLS_LIBDW_DL_H */
