/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Rust demangling (see demangle_rust.h): the entry points, and the legacy
 * mangling, written from rustc's legacy escapes
 * (compiler/rustc_symbol_mangling, legacy.rs). v0 names ("_R", RFC 2603)
 * go to demangle_rust_v0.c.
 *
 * Bounds against hostile names: every read checks the string's end, and
 * the output is capped (demangle_out.h); a malformed name is left to the
 * caller mangled, which is never a wrong name.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/demangle_out.h"
#include "userspace/symbols/demangle_rust.h"
#include "userspace/symbols/demangle_rust_v0.h"

/* Length of name without a trailing ".llvm.<hex or @>" (ThinLTO). */
static size_t without_llvm_suffix(const char *name)
{
	const char *l = strstr(name, ".llvm.");
	const char *p;

	if (!l)
		return strlen(name);
	for (p = l + 6; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F') || *p == '@'))
			return strlen(name);
	return (size_t)(l - name);
}

/* ---- legacy ------------------------------------------------------------- */

/* Skip "_ZN" (also "ZN", "__ZN" as on Mach-O); the offset of the first
 * element, or 0. */
static size_t legacy_start(const char *s)
{
	if (strncmp(s, "_ZN", 3) == 0)
		return 3;
	if (strncmp(s, "ZN", 2) == 0)
		return 2;
	if (strncmp(s, "__ZN", 4) == 0)
		return 4;
	return 0;
}

/*
 * Walk the elements of a legacy name in s[0, n): calls back nothing, just
 * validates; returns the number of elements, sets *end to the offset just
 * past the closing 'E' and *last to the offset of the last element's
 * identifier. 0 when malformed.
 */
static size_t legacy_elements(const char *s, size_t n, size_t *end, size_t *last)
{
	size_t i = legacy_start(s), count = 0;

	if (!i)
		return 0;
	while (i < n && s[i] != 'E') {
		size_t len = 0;

		if (s[i] < '0' || s[i] > '9')
			return 0;
		while (i < n && s[i] >= '0' && s[i] <= '9') {
			len = len * 10 + (size_t)(s[i] - '0');
			if (len > n)
				return 0;
			i++;
		}
		if (len == 0 || len > n - i)
			return 0;
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)s[i + k] >= 0x80)
				return 0;
		*last = i;
		i += len;
		count++;
	}
	if (i >= n)
		return 0;
	*end = i + 1;
	return count;
}

static bool is_rust_hash(const char *id, size_t len)
{
	if (len != 17 || id[0] != 'h')
		return false;
	for (size_t k = 1; k < 17; k++)
		if (!sprobe__dm_is_hex(id[k]))
			return false;
	return true;
}

static bool legacy_is_rust(const char *s, size_t n, size_t *end)
{
	size_t last = 0;
	size_t count = legacy_elements(s, n, end, &last);

	/* The hash element's length prefix "17" sits right before it. */
	return count >= 2 && *end >= last + 18 && is_rust_hash(s + last, *end - 1 - last);
}

/* One identifier with rustc's escapes undone (rustc-demangle's rules). */
static void legacy_ident(struct sprobe_dm_out *o, const char *id, size_t len)
{
	static const struct {
		const char *esc, *to;
	} map[] = { { "SP", "@" }, { "BP", "*" }, { "RF", "&" }, { "LT", "<" }, { "GT", ">" },
		    { "LP", "(" }, { "RP", ")" }, { "C", "," } };
	size_t i = 0;

	if (len >= 2 && id[0] == '_' && id[1] == '$')
		i = 1;
	while (i < len) {
		if (id[i] == '.') {
			if (i + 1 < len && id[i + 1] == '.') {
				sprobe__dm_put(o, "::");
				i += 2;
			} else {
				sprobe__dm_put(o, ".");
				i++;
			}
		} else if (id[i] == '$') {
			const char *close = memchr(id + i + 1, '$', len - i - 1);
			size_t elen;
			bool done = false;

			if (!close)
				break;
			elen = (size_t)(close - (id + i + 1));
			for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++) {
				if (strlen(map[k].esc) == elen && memcmp(map[k].esc, id + i + 1, elen) == 0) {
					sprobe__dm_put(o, map[k].to);
					done = true;
					break;
				}
			}
			if (!done && elen >= 2 && elen <= 7 && id[i + 1] == 'u') {
				uint32_t c = 0;
				bool hex = true;

				for (size_t k = 2; k <= elen; k++) {
					if (!sprobe__dm_is_hex(id[i + k])) {
						hex = false;
						break;
					}
					c = c * 16 + (uint32_t)sprobe__dm_hexval(id[i + k]);
				}
				/* Control characters stay escaped, as rustc-demangle leaves them. */
				if (hex && c >= 0x20 && c != 0x7f && !(c >= 0x80 && c < 0xa0))
					done = sprobe__dm_put_utf8(o, c);
			}
			if (!done)
				break;
			i += elen + 2;
		} else {
			size_t k = i;

			while (k < len && id[k] != '$' && id[k] != '.')
				k++;
			sprobe__dm_put_n(o, id + i, k - i);
			i = k;
		}
	}
	sprobe__dm_put_n(o, id + i, len - i);
}

static char *legacy_demangle(const char *s, size_t n)
{
	struct sprobe_dm_out o = { 0 };
	size_t end = 0, i = legacy_start(s);
	bool first = true;

	if (!legacy_is_rust(s, n, &end)) {
		errno = EINVAL;
		return NULL;
	}
	while (s[i] != 'E') {
		size_t len = 0;

		while (s[i] >= '0' && s[i] <= '9')
			len = len * 10 + (size_t)(s[i++] - '0');
		if (s[i + len] == 'E' && is_rust_hash(s + i, len))
			break; /* the hash: dropped */
		if (!first)
			sprobe__dm_put(&o, "::");
		first = false;
		legacy_ident(&o, s + i, len);
		i += len;
	}
	/* A suffix rustc or LLVM appended (".cold", ".1"): kept, as perf does. */
	if (end < n) {
		if (s[end] != '.') {
			free(o.p);
			errno = EINVAL;
			return NULL;
		}
		sprobe__dm_put_n(&o, s + end, n - end);
	}
	return sprobe__dm_finish(&o);
}

/* ---- entry points ------------------------------------------------------- */

bool sprobe__rust_is_mangled(const char *name)
{
	size_t n, end = 0;

	if (!name)
		return false;
	if (strncmp(name, "_R", 2) == 0)
		return name[2] >= 'A' && name[2] <= 'Z';
	if (!legacy_start(name))
		return false;
	n = without_llvm_suffix(name);
	return legacy_is_rust(name, n, &end);
}

char *sprobe__rust_demangle(const char *name)
{
	size_t n;

	if (!name) {
		errno = EINVAL;
		return NULL;
	}
	n = without_llvm_suffix(name);
	if (strncmp(name, "_R", 2) == 0)
		return sprobe__rust_v0_demangle(name, n);
	if (legacy_start(name))
		return legacy_demangle(name, n);
	errno = EINVAL;
	return NULL;
}
