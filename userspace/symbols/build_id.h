/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GNU build-ids (build_id.c): read from an ELF note area, from an opened
 * ELF file's SHT_NOTE sections, and spelled in hex (symbolize.h). A leaf
 * of the symbols folder: the inventory, the symbol tables and the DWARF
 * loader all ask it, it asks none of them. Not async-signal-safe only
 * through libelf (sprobe__elf_build_id); the note parser is plain memory.
 */
#ifndef SPROBE_SYMBOLS_BUILD_ID_H
#define SPROBE_SYMBOLS_BUILD_ID_H

#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

/* Parse ELF notes in [p, p + len) (alignment align: 8, else 4) for the
 * GNU build-id; copies at most SPROBE_BUILD_ID_MAX bytes to out. Returns
 * its length, or 0 (none, or a malformed note area). */
uint32_t sprobe__parse_build_id(const uint8_t *p, size_t len, size_t align, uint8_t *out);

/* The GNU build-id of an ELF file from its SHT_NOTE sections (at most
 * SPROBE_BUILD_ID_MAX bytes to out): its length, or 0. */
uint32_t sprobe__elf_build_id(Elf *elf, uint8_t *out);

#endif
