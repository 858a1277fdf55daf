/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mach-O module inventory, attribution and symbol names (internal header).
 *
 * Two layers:
 *  - sprobe_macho_image__* (macho.c): a parser for one Mach-O image *as dyld maps it in
 *    memory* (header at the start of __TEXT, segments at vmaddr + slide).
 *    Portable C over bytes: it builds and is tested on Linux against dylibs
 *    linked here with ld64.lld (tests/test_macho.c), because no macOS host
 *    exists on the build machines.
 *  - on macOS, modules.c implements the public module API of
 *    <stackprobe/symbolize.h> (sprobe_modules__*) over dyld's image list
 *    (_dyld_image_count and friends), with this parser underneath.
 *
 * Nothing here may run inside a suspend window: dyld's image list and the
 * allocator are both guarded by locks a suspended thread may hold.
 *
 * Errors: int functions return 0 or -errno; pointer functions return NULL
 * and set errno.
 */
#ifndef SPROBE_MODULES_MACOS_H
#define SPROBE_MODULES_MACOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A bound on sizeofcmds: real images stay far below it, and it keeps a
 * corrupt header from making us walk gigabytes. */
#define MACHO_MAX_CMDS_BYTES (1u << 20)

struct sprobe_macho_sym;

/* One image. Pointers (path, the symbol and string tables) point into memory
 * owned by the loader or by the caller's buffer: valid while the image stays
 * mapped. */
struct sprobe_macho_image {
	const char *path;	 /* NULL when unknown (parser alone) */
	uint64_t header_addr;	 /* where the mach_header_64 lives */
	int64_t slide;		 /* header_addr - __TEXT vmaddr */
	uint64_t text_start;	 /* slid __TEXT range [start, end) */
	uint64_t text_end;
	uint8_t uuid[16];	 /* LC_UUID */
	bool has_uuid;
	uint32_t cputype;	 /* CPU_TYPE_X86_64 / CPU_TYPE_ARM64 */
	uint32_t filetype;	 /* MH_EXECUTE, MH_DYLIB, ... */
	/* LC_SYMTAB, located through __LINKEDIT; nsyms == 0 when absent. */
	const void *symtab;	 /* struct nlist_64[nsyms] */
	uint32_t nsyms;
	const char *strtab;
	uint32_t strsize;
	/* LC_FUNCTION_STARTS data (ULEB128), NULL when absent. */
	const uint8_t *fstarts;
	uint32_t fstarts_size;
	/* Lazily built by __symbolize: defined __TEXT symbols and function
	 * starts (unslid), sorted by address. */
	struct sprobe_macho_sym *sorted;
	uint32_t nsorted;
	uint64_t *starts;
	uint32_t nstarts;
};

/*
 * Parse the image whose mach_header_64 is at @header, mapped with @slide
 * (the amount added to every vmaddr in the file). Every load command is
 * bounds-checked against sizeofcmds; the symbol and string tables must lie
 * inside __LINKEDIT's file range. @span bounds how many bytes from @header
 * may be read for the header and load commands (pass the __TEXT size when
 * known, or a page count you know is mapped).
 * Returns 0, -EINVAL for a bad or unsupported image (not 64-bit
 * little-endian, load commands out of bounds, no __TEXT). Fills @out; the
 * caller owns @out and must release it with sprobe_macho_image__clear().
 * Thread-safe on distinct @out. Not async-signal-safe (no allocation, but
 * it reads loader data that may be changing).
 */
int sprobe_macho_image__parse(const void *header, size_t span, int64_t slide,
			      struct sprobe_macho_image *out);

/* Free what __symbolize cached in @img (accepts NULL). Does not free @img. */
void sprobe_macho_image__clear(struct sprobe_macho_image *img);

/* True when @pc lies in the image's slid __TEXT range. Thread-safe,
 * async-signal-safe (reads @img only). */
bool sprobe_macho_image__contains(const struct sprobe_macho_image *img, uint64_t pc);

/*
 * Name the function containing @pc: the defined, non-debug symbol in a
 * section with the greatest address <= @pc inside __TEXT, unless
 * LC_FUNCTION_STARTS shows a function starting between that symbol and @pc
 * (a function whose name was stripped: -ENOENT, never a neighbour's name).
 * The C leading underscore is removed. On success *name points into the image's string
 * table (owned by the image; valid while it is mapped) and *offset is
 * pc - symbol address.
 * Returns 0, -ENOENT when no symbol covers @pc (stripped image, pc before the
 * first symbol or outside __TEXT), -ENOMEM if the lazy index could not be
 * built. The first call allocates the index: not thread-safe on the same
 * image, not async-signal-safe.
 */
int sprobe_macho_image__symbolize(struct sprobe_macho_image *img, uint64_t pc,
				  const char **name, uint64_t *offset);


/*
 * 1 when LC_FUNCTION_STARTS shows a function starting after @sym and at or
 * before @pc (runtime addresses, sym <= pc): a name found for @sym elsewhere
 * would belong to the wrong function. 0 when not (or no function starts are
 * known), -EINVAL (sym > pc), -ENOMEM. Same thread-safety as __symbolize.
 */
int sprobe_macho_image__unnamed_between(struct sprobe_macho_image *img, uint64_t sym,
					uint64_t pc);

#endif /* SPROBE_MODULES_MACOS_H */
