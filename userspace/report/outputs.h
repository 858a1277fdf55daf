/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the library: the pprof, speedscope and SVG writers
 * (pprof.c, speedscope.c, svg.c) and the small containers they share
 * (outputs.c), the model's writers included.
 *
 * The writers read the report only through the public accessors in
 * <stackprobe/report.h> (info, foreach_sample, resolve, modules), so the
 * report's own tables stay private to the model (report_internal.h).
 * sprobe_report__write() (formats.c) calls them after aggregating.
 *
 * Errors: int functions return 0 or -errno (-ENOMEM, -EIO). Nothing here is
 * thread-safe; each object belongs to one writer call.
 */
#ifndef SPROBE_REPORT_OUTPUTS_H
#define SPROBE_REPORT_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stackprobe/report.h>

int sprobe_report__write_pprof(struct sprobe_report *r, FILE *out);
int sprobe_report__write_speedscope(struct sprobe_report *r, FILE *out);
int sprobe_report__write_svg(struct sprobe_report *r, FILE *out);
/* The labels the report was made with (sprobe_report_opts.labels), or
 * NULL; owned by r (access.c). */
const char *sprobe_report__labels(const struct sprobe_report *r);

/* ---- growable arrays --------------------------------------------------- */

/* Make room for need elements of elem bytes in *v (capacity *cap, doubled
 * from 16 until it fits; *v and *cap untouched on failure). Returns 0 or
 * -ENOMEM (also when the size would overflow). */
int ro_grow(void **v, size_t *cap, size_t need, size_t elem);

/* ---- growable byte buffer ---------------------------------------------- */

struct ro_buf {
	uint8_t *p;
	size_t n, cap;
	bool oom;		/* sticky: an append failed, content is short */
};

void ro_buf__put(struct ro_buf *b, const void *data, size_t len);
void ro_buf__byte(struct ro_buf *b, uint8_t c);
void ro_buf__free(struct ro_buf *b);

/* ---- u64 -> u32 map (open addressing) ---------------------------------- */

struct ro_map {
	uint64_t *keys;
	uint32_t *vals;		/* value + 1; 0 marks an empty slot */
	size_t cap, n;		/* cap: power of two */
};

bool ro_map__get(const struct ro_map *m, uint64_t key, uint32_t *val);
int ro_map__put(struct ro_map *m, uint64_t key, uint32_t val);
void ro_map__free(struct ro_map *m);

/* 64-bit hash of bytes (not cryptographic: collisions are checked). */
uint64_t ro_hash(const void *p, size_t n, uint64_t seed);

/* ---- interned byte strings -> dense ids 0, 1, 2, ... ------------------- */

struct ro_strtab {
	struct ro_map idx;	/* hash -> first id with that hash */
	struct ro_buf arena;	/* NUL-terminated keys, back to back */
	size_t *off;		/* by id: offset in arena */
	size_t *len;		/* by id: length without the NUL */
	uint32_t *next;		/* by id: next id with the same hash */
	size_t n, cap;
};

/* Id of KEY[0..len), added if new. Returns the id or -ENOMEM. */
long ro_strtab__intern(struct ro_strtab *t, const void *key, size_t len);
/* NUL-terminated key of ID (keys may hold NULs only if interned so). */
const char *ro_strtab__get(const struct ro_strtab *t, uint32_t id);
size_t ro_strtab__len(const struct ro_strtab *t, uint32_t id);
void ro_strtab__free(struct ro_strtab *t);

/* ---- text escaping ------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1..4), 0 if invalid. */
int ro_utf8_len(const unsigned char *s);
/* JSON string with quotes; invalid UTF-8 bytes become U+FFFD. */
void ro_json_str(FILE *o, const char *s);
/* XML text or attribute content; invalid UTF-8 and control characters
 * (not allowed in XML 1.0) become U+FFFD. At most max_chars characters
 * (0: all), followed by ".." if cut. */
void ro_xml_str(FILE *o, const char *s, size_t max_chars);

#endif
