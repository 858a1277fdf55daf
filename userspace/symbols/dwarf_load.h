/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A libdw Dwarf over only the sections that line and inline lookups read,
 * decompressed up front with libdeflate (dwarf_load.c).
 *
 * Why: elfutils 0.188's dwarf_begin_elf() inflates, with zlib, every
 * compressed section it recognises (check_section() -> elf_compress()),
 * also those no line or inline lookup reads (.debug_loclists, .debug_loc,
 * .debug_macro, .debug_frame, ...). For Debian's libc debug file that is
 * ~40 ms and ~10 MB, most of `stackprobe record`'s names-and-lines pass
 * (docs/PERFORMANCE.md, "The DWARF loader").
 *
 * What it reads: .debug_info, .debug_abbrev, .debug_aranges, .debug_line,
 * .debug_line_str, .debug_str, .debug_str_offsets, .debug_addr,
 * .debug_ranges, .debug_rnglists, .debug_types and .gnu_debugaltlink,
 * copied (or inflated) into one private anonymous mapping laid out as an
 * ELF image (elf_memory()) on which dwarf_begin_elf() runs. libdw 0.188
 * reads those sections for dwarf_addrdie, dwarf_getsrc_die,
 * dwarf_getsrcfiles, dwarf_getscopes, dwarf_ranges/haspc and attribute
 * forms strx/addrx/line_strp/sec_offset of ranges and stmt_list; it reads
 * the others only for locations, macros, CFI and pubnames, which a Dwarf
 * made here must not be asked for (they answer "no such section").
 *
 * When: an ELFCLASS64 ET_DYN or ET_EXEC file in this machine's byte order
 * whose needed sections include at least one SHF_COMPRESSED with
 * ELFCOMPRESS_ZLIB. Anything else (ET_REL, which needs relocations; zstd;
 * GNU .zdebug_*; split or LTO DWARF sections; section groups; a file with
 * nothing compressed, which libdw already reads in place) is -ENOTSUP and
 * the caller uses dwarf_begin_elf() on the file as before; so is a process
 * where libdeflate.so.0 cannot be dlopen'd (it is loaded on the first
 * image, never linked: a profiled program whose agent reads no DWARF maps
 * nothing more).
 *
 * The image has no file descriptor, so libdw knows no directory of the
 * file: a split-DWARF skeleton finds its .dwo only by an absolute
 * DW_AT_dwo_name or under an absolute DW_AT_comp_dir, not beside the file
 * (docs/LIMITATIONS.md).
 *
 * Where the CLI turned the cache on (dwarf_cache.h), an image is first
 * looked for there by the file's build-id and size, and one built is
 * stored there.
 *
 * Images may be opened from several threads at once (the libdeflate load
 * is once per process); one image is not thread-safe. Nothing here is
 * async-signal-safe.
 */
#ifndef SPROBE_SYMBOLS_DWARF_LOAD_H
#define SPROBE_SYMBOLS_DWARF_LOAD_H

#include <stdbool.h>

#include <elfutils/libdw.h>
#include <libelf.h>

struct sprobe_dwarf_image;

/* Build the image of elf's needed debug sections and open a Dwarf on it.
 * elf is only read (never decompressed in place) and must outlive nothing
 * here: the image holds copies. Returns 0 and *out (the caller owns it:
 * sprobe_dwarf_image__free), -ENOTSUP (not a file this loader handles, or
 * no libdeflate, see above: use dwarf_begin_elf), -EILSEQ (a section header, compression
 * header or compressed stream is damaged or truncated), -ENOENT (libdw
 * finds no DWARF in the image), -ENOSYS (libelf or libdw could not be
 * opened: libelf_dl.h, libdw_dl.h), -ENOMEM. */
int sprobe_dwarf_image__open(Elf *elf, struct sprobe_dwarf_image **out);

/* The image's Dwarf, valid until sprobe_dwarf_image__free(). */
Dwarf *sprobe_dwarf_image__dwarf(const struct sprobe_dwarf_image *img);

/* Did the image come from the cache (dwarf_cache.h: only where the CLI
 * turned it on; a built image is stored there best effort)? */
bool sprobe_dwarf_image__cached(const struct sprobe_dwarf_image *img);

/* Bytes of the image's mapping (its decompressed sections and headers). */
size_t sprobe_dwarf_image__bytes(const struct sprobe_dwarf_image *img);

/* dwarf_end() of its Dwarf, then its Elf and mapping. Accepts NULL. */
void sprobe_dwarf_image__free(struct sprobe_dwarf_image *img);

#endif
