/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Names for the PLT stubs of an ELF object (plt.c), as perf synthesizes
 * them: "<function>@plt" for the stub that jumps to <function>, ".plt" for
 * the lazy-binding header. No symbol table covers the PLT, and its one
 * .eh_frame FDE spans every stub, so without these a profile shows all the
 * time spent in stubs as one row named after the PLT's start.
 *
 * Read from the object's allocated sections (a debug file has them as
 * NOBITS): the JUMP_SLOT and IRELATIVE relocations of .rela.plt, sorted by
 * their GOT slot, name the entries of .plt (after its header) and, with
 * IBT, of .plt.sec in order; each .plt.got entry (x86_64) names the
 * .rela.dyn symbol of the GOT slot its jmp reads. x86_64 (16-byte .plt and
 * .plt.sec entries, 8 or 16-byte .plt.got ones) and aarch64 (32-byte
 * header, 16 or 24-byte entries with BTI/PAC) only; a layout that does not
 * add up (sizes against relocation counts) yields no names, never a shifted
 * one.
 *
 * Not async-signal-safe (allocates, libelf). Thread-safe for distinct
 * objects.
 */
#ifndef SPROBE_SYMBOLS_PLT_H
#define SPROBE_SYMBOLS_PLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

struct sprobe_plt_sym {
	uint64_t start, size;	/* ELF virtual addresses, [start, start + size) */
	/* The target's name in elf's .dynstr, unversioned and mangled as
	 * linked; ".plt" for the header; NULL for an IRELATIVE entry, whose
	 * target is the ifunc at address ifunc (the caller names it). */
	const char *name;
	uint64_t ifunc;
	bool header;
};

/* The PLT entries of elf: *out (the caller frees; NULL when none) and *n.
 * 0, or -ENOMEM. An object with no PLT, or one laid out as this does not
 * know, has none. Names stay valid as long as elf. */
int sprobe__plt_symbols(Elf *elf, struct sprobe_plt_sym **out, size_t *n);

#endif
