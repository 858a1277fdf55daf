/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the data-file stage: what the encoder (format.c), the writer
 * (writer.c) and the reader (reader.c) share. Format: docs/FORMAT.md.
 */
#ifndef SPROBE_USERSPACE_DATAFILE_INTERNAL_H
#define SPROBE_USERSPACE_DATAFILE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A srcline record's text (format.c): len bytes holding exactly 2n
 * NUL-terminated strings, the last byte a NUL. */
bool sprobe_df__srcline_text_ok(const char *text, uint32_t len, uint32_t n);

/* ---- little-endian helpers -------------------------------------------- */

/* The file is little-endian. On a little-endian host these are plain
 * unaligned loads and stores (memcpy), elsewhere byte by byte. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#else
static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}
#endif

#endif
