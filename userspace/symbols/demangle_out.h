/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The output of the Rust demanglers (demangle_rust.c, legacy; and
 * demangle_rust_v0.c): a growing string capped at SPROBE_DM_OUT_MAX bytes,
 * whose first failure sticks. Nested back-references can describe
 * exponentially long names: past the cap the symbol is "malformed" and the
 * caller keeps the mangled name, which is never a wrong name. Not
 * async-signal-safe (allocates); an object belongs to one thread.
 */
#ifndef SPROBE_SYMBOLS_DEMANGLE_OUT_H
#define SPROBE_SYMBOLS_DEMANGLE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPROBE_DM_OUT_MAX 4096

/* Zero-initialised: empty. */
struct sprobe_dm_out {
	char *p;
	size_t len, cap;
	bool bad;	/* malformed input or the cap reached */
	bool nomem;
};

/* Append n bytes of s (nothing once bad or nomem; over the cap: bad). */
void sprobe__dm_put_n(struct sprobe_dm_out *o, const char *s, size_t n);
void sprobe__dm_put(struct sprobe_dm_out *o, const char *s);
/* Append code point c as UTF-8; false (nothing appended) for a surrogate
 * or c >= 0x110000. */
bool sprobe__dm_put_utf8(struct sprobe_dm_out *o, uint32_t c);
/* The string (the caller frees), or NULL with errno ENOMEM, or EINVAL
 * (bad, or nothing written); o's storage is freed on failure. */
char *sprobe__dm_finish(struct sprobe_dm_out *o);

/* Lowercase hex digit, as both manglings write them. */
static inline bool sprobe__dm_is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Value of a hex digit of either case, or -1. */
static inline int sprobe__dm_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
