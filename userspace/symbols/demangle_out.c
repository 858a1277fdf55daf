/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The demanglers' bounded output string (demangle_out.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/demangle_out.h"

void sprobe__dm_put_n(struct sprobe_dm_out *o, const char *s, size_t n)
{
	if (o->bad || o->nomem)
		return;
	if (o->len + n >= SPROBE_DM_OUT_MAX) {
		o->bad = true;
		return;
	}
	if (o->len + n + 1 > o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 128;
		char *q;

		while (nc < o->len + n + 1)
			nc *= 2;
		q = realloc(o->p, nc);
		if (!q) {
			o->nomem = true;
			return;
		}
		o->p = q;
		o->cap = nc;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

void sprobe__dm_put(struct sprobe_dm_out *o, const char *s)
{
	sprobe__dm_put_n(o, s, strlen(s));
}

/* UTF-8 of code point c (c < 0x110000, not a surrogate: checked). */
bool sprobe__dm_put_utf8(struct sprobe_dm_out *o, uint32_t c)
{
	char b[4];
	size_t n;

	if (c >= 0x110000 || (c >= 0xd800 && c < 0xe000))
		return false;
	if (c < 0x80) {
		b[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xc0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (char)(0xe0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	sprobe__dm_put_n(o, b, n);
	return true;
}

char *sprobe__dm_finish(struct sprobe_dm_out *o)
{
	if (o->nomem) {
		free(o->p);
		errno = ENOMEM;
		return NULL;
	}
	if (o->bad || !o->p) {
		free(o->p);
		errno = EINVAL;
		return NULL;
	}
	return o->p;
}
