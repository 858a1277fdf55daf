/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Opening an object's ELF file, and finding its separate debug file: by
 * build-id under the debug root, from a debuginfod server, or by
 * .gnu_debuglink (debug_file.c). The symbol tables (symbolize.c) choose
 * among them (symbolize.h gives the order). Not async-signal-safe (files,
 * libelf); an inventory belongs to one thread at a time.
 */
#ifndef SPROBE_SYMBOLS_DEBUG_FILE_H
#define SPROBE_SYMBOLS_DEBUG_FILE_H

#include <stdbool.h>

#include "userspace/symbols/modules_internal.h"

/* Open path as an ELF file into f (libelf holds it; no descriptor stays
 * open). 0, or -errno (-ENOEXEC: not ELF). sprobe__elf_close() undoes it. */
int sprobe__elf_open(const char *path, struct elf_file *f);
void sprobe__elf_close(struct elf_file *f);

/* Has elf a symbol table of type (SHT_SYMTAB, SHT_DYNSYM) with a symbol? */
bool sprobe__elf_has_symbols(Elf *elf, Elf64_Word type);

/* Is elf's GNU build-id mod's (both none counts as the same)? */
bool sprobe__same_build_id(Elf *elf, const struct sprobe_module *mod);

/* mod's debug file into f, build-id checked: <debug root>/.build-id/ab/
 * cdef....debug; or from debuginfod (only with opts.debuginfod, and only
 * one with a .symtab). 0, or -ENOENT (none usable). */
int sprobe__debug_by_build_id(struct sprobe_modules *m, const struct sprobe_module *mod,
			      struct elf_file *f);
int sprobe__debug_by_debuginfod(struct sprobe_modules *m, const struct sprobe_module *mod,
				struct elf_file *f);

/* The file .gnu_debuglink of elf (mod's object) names, next to the object,
 * in its .debug/, or under <debug root>/<its directory>, CRC checked, into
 * f. 0, or -ENOENT. */
int sprobe__debug_by_link(struct sprobe_modules *m, struct module *mod, Elf *elf,
			  struct elf_file *f);

#endif
